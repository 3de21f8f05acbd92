#!/usr/bin/env bash
# The speed targets of issue 45 (agents whose sessions are JSON documents
# rewritten in place), measured in one run (warm page cache; the commands
# alternate round by round, so a shared machine's load falls on all of
# them alike; medians of ROUNDS rounds):
#   - amp: `stats --jobs 2` against ccusage 20 (`ccusage amp daily --json
#     --offline`; target: at least 2.0 times its speed), after checking
#     the token totals: ours are ccusage's plus the usages it drops (those
#     without `usage.timestamp`, docs/amp.md), computed from the files;
#   - `stats --jobs 1` on the agent's archive against `stats --jobs 1` on
#     a pi archive of the same size from the same generator, in MB/s
#     (target: at least 0.8);
#   - an unchanged re-run with a state (`stats --state`, --jobs 2): Amp's
#     threads are hashed (their time never moves), none is parsed.
#
#   scripts/document-ratios.sh amp [TOTAL_MB]   (default 100)
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp
# dir; archives already there are reused), ROUNDS (default 5), CCUSAGE
# (default /tmp/ccusage-reference/node_modules/.bin/ccusage), BIN (a
# mem-ingest binary to measure; none built then; gen-corpus is taken from
# beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=${1:?usage: document-ratios.sh amp [TOTAL_MB]}
TOTAL_MB=${2:-100}
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
CCUSAGE=${CCUSAGE:-/tmp/ccusage-reference/node_modules/.bin/ccusage}
ROUNDS=${ROUNDS:-5}
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin mem-ingest --bin gen-corpus
    BIN=$TARGET/release/mem-ingest
fi
GEN=$(dirname "$BIN")/gen-corpus
WORK=${WORK:-$(mktemp -d)}
ARCH=$WORK/$AGENT-$TOTAL_MB
PI=$WORK/pi-$TOTAL_MB
case $AGENT in
amp) ;;
*) echo "document-ratios.sh: amp, not $AGENT" >&2; exit 2 ;;
esac
[ -d "$ARCH" ] || "$GEN" --format "$AGENT" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1
[ -d "$PI" ] || "$GEN" --archive "$PI" --total-mb "$TOTAL_MB" --seed 1
NONE=$WORK/none
mkdir -p "$NONE"
export TZ=UTC HOME=$NONE XDG_CONFIG_HOME=$NONE XDG_DATA_HOME=$NONE CLAUDE_CONFIG_DIR=$NONE CODEX_HOME=$NONE PI_CODING_AGENT_DIR=$NONE QWEN_DATA_DIR=$NONE COPILOT_HOME=$NONE
unset QWEN_RUNTIME_DIR GEMINI_CLI_HOME GEMINI_DATA_DIR
export AMP_DATA_DIR=$ARCH
OURS=(--agent amp)
bytes() { find "$1/" -type f \( -name '*.jsonl' -o -name '*.json' \) -printf '%s\n' | awk '{s += $1} END {print s}'; }
ab=$(bytes "$ARCH")
pb=$(bytes "$PI")
threads=$(find "$ARCH/threads" -name 'T-*.json' | wc -l)
cat $(find "$ARCH/" "$PI/" -type f | sort -u) > /dev/null # warm the page cache

"$BIN" stats -q --json "${OURS[@]}" > "$WORK/ours.json"
"$CCUSAGE" amp daily --json --offline > "$WORK/ccusage.json"
python3 - "$ARCH" "$WORK/ours.json" "$WORK/ccusage.json" <<'EOF'
import glob, json, sys
arch, ours, cc = sys.argv[1], json.load(open(sys.argv[2]))["usage"], json.load(open(sys.argv[3]))["totals"]
# What ccusage drops: usages without a timestamp, in threads without a
# ledger (docs/amp.md).
dropped = dict.fromkeys(["input", "output", "cache_write", "cache_read", "total_tokens"], 0)
for f in glob.glob(f"{arch}/threads/*.json"):
    t = json.load(open(f))
    if "usageLedger" in t:
        continue
    for m in t["messages"]:
        u = m.get("usage")
        if m.get("role") == "assistant" and isinstance(u, dict) and "timestamp" not in u:
            parts = {"input": u["inputTokens"], "output": u["outputTokens"],
                     "cache_write": u["cacheCreationInputTokens"], "cache_read": u["cacheReadInputTokens"]}
            for k, v in parts.items():
                dropped[k] += v
            dropped["total_tokens"] += sum(parts.values())
pairs = [("input", "inputTokens"), ("output", "outputTokens"), ("cache_read", "cacheReadTokens"),
         ("cache_write", "cacheCreationTokens"), ("total_tokens", "totalTokens")]
diff = [(a, ours[a], cc[b], dropped[a]) for a, b in pairs if ours[a] != cc[b] + dropped[a]]
if diff:
    sys.exit(f"token totals differ from ccusage's plus what it drops: {diff}")
print("token totals: ccusage's plus what it drops (usage without a timestamp):",
      {a: ours[a] for a, _ in pairs}, "dropped by ccusage:", dropped)
EOF

timed() {
    local out=$1 t0 t1
    shift
    t0=$EPOCHREALTIME
    "$@" > /dev/null 2>&1
    t1=$EPOCHREALTIME
    echo "$t0 $t1" >> "$out"
}
STATE=$WORK/unchanged.state
rm -f "$STATE"
"$BIN" stats -q --json "${OURS[@]}" --state "$STATE" > /dev/null
names=(ours_j2 ccusage ours_j1 pi_j1 unchanged_j2)
for n in "${names[@]}"; do : > "$WORK/t.$n"; done
for r in $(seq "$ROUNDS"); do
    timed "$WORK/t.ours_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2
    timed "$WORK/t.ccusage" "$CCUSAGE" amp daily --json --offline
    timed "$WORK/t.ours_j1" "$BIN" stats -q --json "${OURS[@]}" --jobs 1
    timed "$WORK/t.pi_j1" "$BIN" stats -q --json --jobs 1 "$PI"
    timed "$WORK/t.unchanged_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2 --state "$STATE"
done
"$BIN" stats --json "${OURS[@]}" --jobs 2 --state "$STATE" 2>&1 > /dev/null | tail -1
python3 - "$AGENT" "$WORK" "$ab" "$pb" "$(nproc)" "$threads" "${names[@]}" <<'EOF'
import statistics, sys
agent, work, ab, pb, cores, threads, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7:]
runs = {}
for n in names:
    runs[n] = [float(b) - float(a) for a, b in (l.split() for l in open(f"{work}/t.{n}"))]
med = {n: statistics.median(v) for n, v in runs.items()}
print(f"{agent} archive {ab:,} bytes in {threads} threads, pi archive {pb:,} bytes, {cores} cores, {len(runs['ours_j2'])} rounds")
for n in names:
    b = pb if n == "pi_j1" else ab
    print(f"{n:13} median {med[n]:.3f} s  ({', '.join(f'{x:.3f}' for x in runs[n])})  {b / med[n] / 1e6:,.0f} MB/s")
print(f"stats --jobs 2 / ccusage speed: {med['ccusage'] / med['ours_j2']:.2f} (target >= 2.0)")
print(f"stats --jobs 1, {agent} MB/s / pi MB/s: {(ab / med['ours_j1']) / (pb / med['pi_j1']):.2f} (target >= 0.8)")
print(f"unchanged re-run with a state (every thread hashed, none parsed): {med['unchanged_j2']:.3f} s for {threads} threads")
EOF
