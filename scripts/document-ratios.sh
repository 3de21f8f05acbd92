#!/usr/bin/env bash
# The speed targets of issue 45 (agents whose sessions are JSON documents
# rewritten in place), measured in one run (warm page cache; the commands
# alternate round by round, so a shared machine's load falls on all of
# them alike; medians of ROUNDS rounds):
#   - `stats --jobs 2` against ccusage 20 (`ccusage amp|gemini daily --json
#     --offline`; target for Amp: at least 2.0 times its speed), after
#     checking the token totals: Amp's are ccusage's plus the usages it
#     drops (those without `usage.timestamp`, docs/amp.md), computed from
#     the files; Gemini's are ccusage's less the messages a resumed
#     session's .jsonl copies from its .json (ccusage counts them twice);
#     ccusage reads no Cline, which is not compared;
#   - `stats --jobs 1` on the agent's archive against `stats --jobs 1` on
#     a pi archive of the same size from the same generator, in MB/s
#     (target: at least 0.8);
#   - an unchanged re-run with a state (`stats --state`, --jobs 2): none is
#     parsed (Amp's threads are hashed: their time never moves).
# The load average (`uptime`) is printed before and after the rounds: on
# a shared machine, quote it beside the figures.
#
#   scripts/document-ratios.sh amp|cline|gemini [TOTAL_MB]   (default 100)
#
# The archives are gen-corpus's: --format amp, --format cline (SDK sessions
# and legacy tasks, with the files never read beside them), --format
# gemini-legacy (legacy session-*.json, 5% of them resumed into a .jsonl
# beside them: ccusage counts the copied messages twice, ours once; the
# check below takes them out of ccusage's totals, computed from the files).
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp
# dir; archives already there are reused), ROUNDS (default 5), CCUSAGE
# (default /tmp/ccusage-reference/node_modules/.bin/ccusage), BIN (a
# mem-ingest binary to measure; none built then; gen-corpus is taken from
# beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=${1:?usage: document-ratios.sh amp|cline|gemini [TOTAL_MB]}
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
amp | cline) [ -d "$ARCH" ] || "$GEN" --format "$AGENT" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1 ;;
gemini) [ -d "$ARCH" ] || "$GEN" --format gemini-legacy --archive "$ARCH/.gemini" --total-mb "$TOTAL_MB" --seed 1 ;;
*) echo "document-ratios.sh: amp, cline or gemini, not $AGENT" >&2; exit 2 ;;
esac
[ -d "$PI" ] || "$GEN" --archive "$PI" --total-mb "$TOTAL_MB" --seed 1
NONE=$WORK/none
mkdir -p "$NONE"
export TZ=UTC HOME=$NONE XDG_CONFIG_HOME=$NONE XDG_DATA_HOME=$NONE CLAUDE_CONFIG_DIR=$NONE CODEX_HOME=$NONE PI_CODING_AGENT_DIR=$NONE QWEN_DATA_DIR=$NONE COPILOT_HOME=$NONE
unset QWEN_RUNTIME_DIR GEMINI_CLI_HOME GEMINI_DATA_DIR AMP_DATA_DIR CLINE_DIR CLINE_DATA_DIR CLINE_SESSION_DATA_DIR
case $AGENT in
amp) export AMP_DATA_DIR=$ARCH ;;
cline) export CLINE_DATA_DIR=$ARCH ;;
gemini) export GEMINI_DATA_DIR=$ARCH/.gemini/tmp ;;
esac
OURS=(--agent "$AGENT")
# The session files read: pi's *.jsonl; Amp's T-*.json; Cline's transcripts;
# Gemini's chats/**/*.json(l).
files() {
    case $2 in
    pi) find "$1/" -type f -name '*.jsonl' ;;
    amp) find "$1/" -type f -name 'T-*.json' ;;
    cline) find "$1/" -type f \( -name '*.messages.json' -o -name 'api_conversation_history.json' \) ;;
    gemini) find "$1/" -type f -path '*/chats/*' \( -name '*.json' -o -name '*.jsonl' \) ;;
    esac
}
bytes() { files "$1" "$2" | xargs -d '\n' stat -c %s | awk '{s += $1} END {print s}'; }
ab=$(bytes "$ARCH" "$AGENT")
pb=$(bytes "$PI" pi)
docs=$(files "$ARCH" "$AGENT" | wc -l)
cat $(find "$ARCH/" "$PI/" -type f | sort -u) > /dev/null # warm the page cache

"$BIN" stats -q --json "${OURS[@]}" > "$WORK/ours.json"
if [ "$AGENT" = cline ]; then
    echo "cline: ccusage 20.0.24 reads no Cline; totals not compared"
else
    "$CCUSAGE" "$AGENT" daily --json --offline > "$WORK/ccusage.json"
    python3 - "$AGENT" "$ARCH" "$WORK/ours.json" "$WORK/ccusage.json" <<'PY'
import glob, json, sys
agent, arch = sys.argv[1], sys.argv[2]
ours, cc = json.load(open(sys.argv[3]))["usage"], json.load(open(sys.argv[4]))["totals"]
# What ccusage drops of Amp's: usages without a timestamp, in threads
# without a ledger (docs/amp.md).
dropped = dict.fromkeys(["input", "output", "cache_write", "cache_read", "total_tokens"], 0)
for f in glob.glob(f"{arch}/threads/*.json") if agent == "amp" else []:
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
# What ccusage counts twice of Gemini's: the messages a resumed session's
# .jsonl copied from its .json (docs/gemini-cli.md), as ccusage counts them.
for f in glob.glob(f"{arch}/.gemini/tmp/*/chats/*.jsonl") if agent == "gemini" else []:
    old = {m["id"] for m in json.load(open(f[:-1]))["messages"]}
    for line in open(f):
        m = json.loads(line)
        t = m.get("tokens")
        if m.get("id") not in old or m.get("type") != "gemini" or not isinstance(t, dict):
            continue
        n = {k: t.get(k, 0) for k in ["input", "output", "cached", "thoughts", "tool", "total"]}
        whole = n["input"] + n["output"] + n["thoughts"] + n["tool"]
        inp = n["input"] - n["cached"] if n["cached"] > 0 and n["total"] == whole else n["input"]
        for k, v in [("input", -(inp + n["tool"])), ("output", -n["output"]), ("cache_read", -n["cached"]), ("total_tokens", -n["total"])]:
            dropped[k] += v
pairs = [("input", "inputTokens"), ("output", "outputTokens"), ("cache_read", "cacheReadTokens"),
         ("cache_write", "cacheCreationTokens"), ("total_tokens", "totalTokens")]
diff = [(a, ours[a], cc[b], dropped[a]) for a, b in pairs if ours[a] != cc[b] + dropped[a]]
if diff:
    sys.exit(f"token totals differ from ccusage's (plus what it drops): {diff}")
print("token totals: ccusage's plus what it drops:", {a: ours[a] for a, _ in pairs}, "dropped:", dropped)
PY
fi

# Appends "start end cpu" (wall clock, and the command's user + system
# seconds from getrusage, to the microsecond: steadier on a shared
# machine than the wall clock, and finer than /usr/bin/time's 10 ms) to $1.
timed() {
    local out=$1
    shift
    python3 - "$@" >> "$out" <<'PY'
import resource, subprocess, sys, time
t0 = time.time()
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t1 = time.time()
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(t0, t1, r.ru_utime + r.ru_stime)
PY
}
STATE=$WORK/unchanged-$AGENT.state
rm -f "$STATE"
"$BIN" stats -q --json "${OURS[@]}" --state "$STATE" > /dev/null
names=(ours_j2 ccusage ours_j1 pi_j1 unchanged_j2)
[ "$AGENT" = cline ] && names=(ours_j2 ours_j1 pi_j1 unchanged_j2)
for n in "${names[@]}"; do : > "$WORK/t.$n"; done
echo "load before the rounds: $(uptime)"
for r in $(seq "$ROUNDS"); do
    timed "$WORK/t.ours_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2
    [ "$AGENT" = cline ] || timed "$WORK/t.ccusage" "$CCUSAGE" "$AGENT" daily --json --offline
    timed "$WORK/t.ours_j1" "$BIN" stats -q --json "${OURS[@]}" --jobs 1
    timed "$WORK/t.pi_j1" "$BIN" stats -q --json --jobs 1 "$PI"
    timed "$WORK/t.unchanged_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2 --state "$STATE"
done
echo "load after the rounds: $(uptime)"
"$BIN" stats --json "${OURS[@]}" --jobs 2 --state "$STATE" 2>&1 > /dev/null | tail -1
python3 - "$AGENT" "$WORK" "$ab" "$pb" "$(nproc)" "$docs" "${names[@]}" <<'PY'
import statistics, sys
agent, work, ab, pb, cores, docs, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7:]
runs = {n: [float(l.split()[1]) - float(l.split()[0]) for l in open(f"{work}/t.{n}")] for n in names}
cpu = {n: [float(l.split()[2]) for l in open(f"{work}/t.{n}")] for n in names}
med = {n: statistics.median(v) for n, v in runs.items()}
mcpu = {n: statistics.median(v) for n, v in cpu.items()}
print(f"{agent} archive {ab:,} bytes in {docs} documents, pi archive {pb:,} bytes, {cores} cores, {len(runs['ours_j2'])} rounds")
for n in names:
    b = pb if n == "pi_j1" else ab
    print(f"{n:13} median {med[n]:.3f} s  ({', '.join(f'{x:.3f}' for x in runs[n])})  {b / med[n] / 1e6:,.0f} MB/s; CPU median {mcpu[n]:.3f} s")
if "ccusage" in med:
    print(f"stats --jobs 2 / ccusage speed: {med['ccusage'] / med['ours_j2']:.2f} (target >= 2.0 for amp)")
print(f"stats --jobs 1, {agent} MB/s / pi MB/s: {(ab / med['ours_j1']) / (pb / med['pi_j1']):.2f} (target >= 0.8); by CPU time {(ab / mcpu['ours_j1']) / (pb / mcpu['pi_j1']):.2f}")
hashed = "every thread hashed, " if agent == "amp" else ""
print(f"unchanged re-run with a state ({hashed}none parsed): {med['unchanged_j2']:.3f} s for {docs} documents")
PY
