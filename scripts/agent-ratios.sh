#!/usr/bin/env bash
# The speed targets against ccusage of issues 13 (Claude Code), 14 (Codex)
# and 15 (pi), measured in one run (warm page cache; the commands
# alternate round by round, so a shared machine's load falls on all of
# them alike; medians of ROUNDS rounds):
#   - `stats --jobs 2` against ccusage 20 (`ccusage claude|codex|pi daily
#     --json --offline`; target: at least 2.0 times its speed on 2 cores),
#     after checking that both give the same token totals;
#   - claude and codex: `stats --jobs 1` on the agent's archive against
#     `stats --jobs 1` on a pi archive of the same size from the same
#     generator, in MB/s (target: at least 0.8).
# The pi archive of the pi mode has FILES files (default 200: issue 15's
# "about 500 MB in about 200 files", `gen-corpus --files`).
# With OLD=path/to/an/older/mem-ingest, that binary's `stats --jobs 2` and
# `--jobs 1` on the agent's archive alternate with the rest (before/after).
#
#   scripts/agent-ratios.sh claude|codex|qwen|copilot|gemini|pi [TOTAL_MB]   (default 300)
#   scripts/agent-ratios.sh claude|codex|qwen|copilot|gemini|pi ARCHIVE_DIR
#
# The second form measures an archive that already exists (a Claude Code
# config folder, a Codex home, a Gemini CLI `.gemini` folder, a pi sessions
# folder), read as it is; the pi
# archive of the one-thread comparison is generated to its size.
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp
# dir; archives already there are reused), ROUNDS (default 3), CCUSAGE
# (default /tmp/ccusage-reference/node_modules/.bin/ccusage), SHAPE (a
# `gen-corpus --shape` for the generated archive, e.g. `held-out` for
# Codex: issue 41's held-out home), BIN (a mem-ingest binary to measure;
# none built then).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=${1:?usage: agent-ratios.sh claude|codex|qwen|copilot|gemini|pi [TOTAL_MB | ARCHIVE_DIR]}
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
CCUSAGE=${CCUSAGE:-/tmp/ccusage-reference/node_modules/.bin/ccusage}
ROUNDS=${ROUNDS:-3}
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin mem-ingest --bin gen-corpus
    BIN=$TARGET/release/mem-ingest
fi
WORK=${WORK:-$(mktemp -d)}
if [ -d "${2:-}" ]; then
    ARCH=$(cd "$2" && pwd)
    TOTAL_MB=$(( ($(find "$ARCH/" -type f -name '*.jsonl' -printf '%s\n' | awk '{s += $1} END {print s + 0}') + 999999) / 1000000 ))
else
    TOTAL_MB=${2:-300}
    ARCH=$WORK/$AGENT-$TOTAL_MB${SHAPE:+-$SHAPE}
fi
PI=$WORK/pi-$TOTAL_MB
if [ -d "${2:-}" ]; then
    [ "$AGENT" = pi ] || [ -d "$PI" ] || "$TARGET/release/gen-corpus" --archive "$PI" --total-mb "$TOTAL_MB" --seed 1
elif [ "$AGENT" = pi ]; then
    ARCH=$WORK/pi-$TOTAL_MB-${FILES:-200}-files
    [ -d "$ARCH" ] || "$TARGET/release/gen-corpus" --archive "$ARCH" --total-mb "$TOTAL_MB" --files "${FILES:-200}" --seed 1
else
    [ -d "$ARCH" ] || "$TARGET/release/gen-corpus" --format "$AGENT" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1 ${SHAPE:+--shape "$SHAPE"}
    [ -d "$PI" ] || "$TARGET/release/gen-corpus" --archive "$PI" --total-mb "$TOTAL_MB" --seed 1
fi
# Neither reads this machine's own archives: every default points at an
# empty folder, the agent's at the generated one.
NONE=$WORK/none
mkdir -p "$NONE"
export TZ=UTC HOME=$NONE XDG_CONFIG_HOME=$NONE CLAUDE_CONFIG_DIR=$NONE CODEX_HOME=$NONE PI_CODING_AGENT_DIR=$NONE QWEN_DATA_DIR=$NONE COPILOT_HOME=$NONE GEMINI_DATA_DIR=$NONE
unset QWEN_RUNTIME_DIR COPILOT_OTEL_FILE_EXPORTER_PATH GEMINI_CLI_HOME
# ours and ccusage: the same archive, each its own way of naming it.
case $AGENT in
claude) export CLAUDE_CONFIG_DIR=$ARCH; OURS=(--source claude); THEIRS=() ;;
codex) export CODEX_HOME=$ARCH; OURS=(--source codex); THEIRS=() ;;
qwen) export QWEN_DATA_DIR=$ARCH; OURS=(--source qwen); THEIRS=() ;;
copilot) export COPILOT_HOME=$ARCH; OURS=(--source copilot); THEIRS=() ;;
gemini) export GEMINI_DATA_DIR=$ARCH/tmp; OURS=(--agent gemini); THEIRS=() ;;
pi) OURS=("$ARCH"); THEIRS=(--pi-path "$ARCH"); PI=$ARCH ;;
*) echo "agent-ratios.sh: claude, codex, qwen, copilot, gemini or pi, not $AGENT" >&2; exit 2 ;;
esac
bytes() { find "$1/" -type f -name '*.jsonl' -printf '%s\n' | awk '{s += $1} END {print s}'; }
ab=$(bytes "$ARCH")
pb=$(bytes "$PI")
cat $(find "$ARCH/" "$PI/" -type f | sort -u) > /dev/null # warm the page cache

# The same totals first (docs/claude-code.md and docs/codex.md map
# ccusage's fields to ours).
# pi: ccusage counts the usage of assistant messages alone, where `stats`
# also sums the usage pi 1.x records on compactions and `usage` entries
# (and the generator writes both): the totals compared are then those of
# the assistant records `backfill` writes, the work timed is `stats`'.
"$BIN" stats -q --json "${OURS[@]}" > "$WORK/ours.json"
if [ "$AGENT" = pi ]; then
    "$BIN" backfill -q "${OURS[@]}" | python3 -c '
import json, sys
keys = ["input", "output", "cache_read", "cache_write", "total_tokens"]
t = dict.fromkeys(keys, 0)
for line in sys.stdin:
    r = json.loads(line)
    if r["role"] == "assistant" and r["entry"] == "message" and r.get("usage"):
        for k in keys:
            t[k] += r["usage"][k]
print(json.dumps({"usage": t}))' > "$WORK/ours-assistant.json"
    OURS_JSON=$WORK/ours-assistant.json
elif [ "$AGENT" = qwen ]; then
    # ccusage counts a fork's copies again and the cached tokens twice
    # (docs/qwen-code.md): ours without deduplication, the cached tokens
    # added to the input and the total, are its totals.
    "$BIN" stats -q --json --no-dedupe "${OURS[@]}" | python3 -c '
import json, sys
u = json.load(sys.stdin)["usage"]
u["input"] += u["cache_read"]
u["total_tokens"] += u["cache_read"]
print(json.dumps({"usage": u}))' > "$WORK/ours-as-ccusage.json"
    OURS_JSON=$WORK/ours-as-ccusage.json
elif [ "$AGENT" = gemini ]; then
    # ccusage counts a hash folder's session and its copy in the slug
    # folder twice (docs/gemini-cli.md): ours without deduplication are
    # its totals (the run timed deduplicates, as a user's does).
    "$BIN" stats -q --json --no-dedupe "${OURS[@]}" > "$WORK/ours-no-dedupe.json"
    echo "total tokens, ours deduplicated: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["total_tokens"])' "$WORK/ours.json") (the migration copies once)"
    OURS_JSON=$WORK/ours-no-dedupe.json
else
    OURS_JSON=$WORK/ours.json
fi
"$CCUSAGE" "$AGENT" daily --json --offline "${THEIRS[@]}" > "$WORK/ccusage.json"
if [ "$AGENT" = copilot ]; then
    # ccusage reads the shutdown lines alone, takes every later snapshot
    # of a model as cumulative and counts nothing of a crash
    # (docs/copilot-cli.md): the totals differ on the generated home's
    # reset and crashed sessions, which conform_copilot.rs checks session
    # by session. Only the speed is measured here.
    echo "total tokens: ccusage $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["totalTokens"])' "$WORK/ccusage.json"), ours $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["total_tokens"])' "$OURS_JSON") (not compared: docs/copilot-cli.md)"
else
python3 - "$AGENT" "$OURS_JSON" "$WORK/ccusage.json" <<'EOF'
import json, sys
agent, ours, cc = sys.argv[1], json.load(open(sys.argv[2]))["usage"], json.load(open(sys.argv[3]))["totals"]
pairs = [("input", "inputTokens"), ("output", "outputTokens"),
         ("cache_read", "cacheReadTokens"), ("total_tokens", "totalTokens")]
if agent != "codex":
    pairs.append(("cache_write", "cacheCreationTokens"))
diff = [(a, ours[a], cc[b]) for a, b in pairs if ours[a] != cc[b]]
if diff:
    sys.exit(f"token totals differ from ccusage's: {diff}")
print("token totals equal ccusage's:", {a: ours[a] for a, _ in pairs})
EOF
fi

# One timed run of a command (wall seconds, the shell's clock), appended
# to the file named by $1.
timed() {
    local out=$1 t0 t1
    shift
    t0=$EPOCHREALTIME
    "$@" > /dev/null 2>&1
    t1=$EPOCHREALTIME
    echo "$t0 $t1" >> "$out"
}
names=(ours_j2 ccusage ours_j1)
[ "$AGENT" != pi ] && names+=(pi_j1)
[ -n "${OLD:-}" ] && names+=(old_j2 old_j1)
for n in "${names[@]}"; do : > "$WORK/t.$n"; done
for r in $(seq "$ROUNDS"); do
    timed "$WORK/t.ours_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2
    timed "$WORK/t.ccusage" "$CCUSAGE" "$AGENT" daily --json --offline "${THEIRS[@]}"
    timed "$WORK/t.ours_j1" "$BIN" stats -q --json "${OURS[@]}" --jobs 1
    [ "$AGENT" != pi ] && timed "$WORK/t.pi_j1" "$BIN" stats -q --json --jobs 1 "$PI"
    if [ -n "${OLD:-}" ]; then
        timed "$WORK/t.old_j2" "$OLD" stats -q --json "${OURS[@]}" --jobs 2
        timed "$WORK/t.old_j1" "$OLD" stats -q --json "${OURS[@]}" --jobs 1
    fi
done
python3 - "$AGENT" "$WORK" "$ab" "$pb" "$(nproc)" "${names[@]}" <<'EOF'
import statistics, sys
agent, work, ab, pb, cores, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6:]
runs = {}
for n in names:
    spans = [float(b) - float(a) for a, b in (l.split() for l in open(f"{work}/t.{n}"))]
    runs[n] = spans
med = {n: statistics.median(v) for n, v in runs.items()}
print(f"{agent} archive {ab:,} bytes, pi archive {pb:,} bytes, {cores} cores, {len(runs['ours_j2'])} rounds")
for n in names:
    b = pb if n == "pi_j1" else ab
    print(f"{n:8} median {med[n]:.3f} s  ({', '.join(f'{x:.3f}' for x in runs[n])})  {b / med[n] / 1e6:,.0f} MB/s")
print(f"stats --jobs 2 / ccusage speed: {med['ccusage'] / med['ours_j2']:.2f} (target >= 2.0)")
if "pi_j1" in med:
    agent_mbs, pi_mbs = ab / med["ours_j1"], pb / med["pi_j1"]
    print(f"stats --jobs 1, {agent} MB/s / pi MB/s: {agent_mbs / pi_mbs:.2f} (target >= 0.8)")
if "old_j2" in med:
    print(f"old / new, --jobs 2: {med['old_j2'] / med['ours_j2']:.2f}; --jobs 1: {med['old_j1'] / med['ours_j1']:.2f}")
EOF
