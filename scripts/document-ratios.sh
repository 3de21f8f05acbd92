#!/usr/bin/env bash
# The speed targets of issue 45 (agents whose sessions are JSON documents
# rewritten in place), measured in one run (warm page cache; the commands
# alternate round by round, so a shared machine's load falls on all of
# them alike; medians of ROUNDS rounds):
#   - `stats --jobs 2` against ccusage 20 (`ccusage amp|gemini daily --json
#     --offline`; target for Amp: at least 2.0 times its speed), after
#     checking the token totals: Amp's are ccusage's plus the usages it
#     drops (those without `usage.timestamp`, docs/amp.md), computed from
#     the files; Gemini's equal (no migrated copies here); ccusage reads no
#     Cline, which is not compared;
#   - `stats --jobs 1` on the agent's archive against `stats --jobs 1` on
#     a pi archive of the same size from the same generator, in MB/s
#     (target: at least 0.8);
#   - an unchanged re-run with a state (`stats --state`, --jobs 2): none is
#     parsed (Amp's threads are hashed: their time never moves).
#
#   scripts/document-ratios.sh amp|cline|gemini [TOTAL_MB]   (default 100)
#
# amp's archive is gen-corpus's (--format amp); cline's (SDK sessions) and
# gemini's (legacy session-*.json) are written here by a small seeded
# generator (prose, a tool call and its result per turn, usage on every
# assistant message; documents of Pareto sizes around 150 KB).
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

gen_documents() {
    python3 - "$AGENT" "$ARCH" "$TOTAL_MB" <<'PY'
import json, os, random, sys
agent, arch, total = sys.argv[1], sys.argv[2], int(sys.argv[3]) * 1000000
rng = random.Random(1)
words = "the quick brown fox jumps over the lazy dog while parsing json lines fast".split()
def prose(n):
    return " ".join(rng.choice(words) for _ in range(max(1, n // 5)))
written, n = 0, 0
while written < total:
    n += 1
    size = min(total - written, int(rng.paretovariate(1.1) * 150000))
    msgs, b, k = [], 0, 0
    while b < size:
        k += 1
        ts = 1784094124598 + n * 3600000 + k * 60000
        u = prose(rng.randint(40, 600))
        a = prose(rng.randint(30, 1500))
        out = prose(rng.randint(200, 3000) if rng.random() < 0.8 else rng.randint(3000, 24000))
        if agent == "cline":
            m = [{"id": f"u{k}", "role": "user", "ts": ts, "content": [{"type": "text", "text": u}]},
                 {"id": f"a{k}", "role": "assistant", "ts": ts + 1,
                  "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
                  "metrics": {"inputTokens": rng.randint(1000, 90000), "outputTokens": rng.randint(10, 2000),
                              "cacheReadTokens": 500, "cacheWriteTokens": 10, "cost": 0.01},
                  "content": [{"type": "thinking", "thinking": prose(200)}, {"type": "text", "text": a},
                              {"type": "tool_use", "id": f"t{k}", "name": "read_files",
                               "input": {"path": f"src/m{k}.rs"}}]},
                 {"id": f"r{k}", "role": "user", "ts": ts + 2,
                  "content": [{"type": "tool_result", "tool_use_id": f"t{k}", "content": out}]}]
        else:
            m = [{"id": f"u{k}", "timestamp": "2026-06-05T04:59:00.000Z", "type": "user", "content": [{"text": u}]},
                 {"id": f"g{k}", "timestamp": "2026-06-05T04:59:01.000Z", "type": "gemini", "content": a,
                  "model": "gemini-2.5-flash",
                  "thoughts": [{"subject": "Plan", "description": prose(200), "timestamp": "2026-06-05T04:59:00.500Z"}],
                  "toolCalls": [{"id": f"c{k}", "name": "read_file", "args": {"path": f"src/m{k}.rs"},
                                 "status": "success",
                                 "result": [{"functionResponse": {"id": f"c{k}", "name": "read_file",
                                                                  "response": {"output": out}}}]}],
                  "tokens": {"input": 4000, "output": 80, "cached": 0, "thoughts": 20, "tool": 0, "total": 4100}}]
        msgs += m
        b += sum(len(json.dumps(x)) for x in m)
    if agent == "cline":
        sid = f"{1784094124598 + n}_s{n:05d}"
        d = os.path.join(arch, "sessions", sid)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{sid}.messages.json")
        doc = {"version": 1, "agent": "lead", "sessionId": sid, "messages": msgs}
        with open(os.path.join(d, f"{sid}.json"), "w") as f:
            json.dump({"session_id": sid, "cwd": "/home/dev/app"}, f)
    else:
        d = os.path.join(arch, ".gemini", "tmp", "app", "chats")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"session-2026-06-05T04-59-{n:08d}.json")
        doc = {"sessionId": f"{n:08d}-aaaa", "projectHash": "h", "startTime": "2026-06-05T04:59:00.000Z",
               "messages": msgs, "kind": "main"}
    text = json.dumps(doc, indent=2)
    with open(path, "w") as f:
        f.write(text)
    written += len(text)
print(f"{agent}: {n} documents, {written:,} bytes", file=sys.stderr)
PY
}

case $AGENT in
amp) [ -d "$ARCH" ] || "$GEN" --format amp --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1 ;;
cline | gemini) [ -d "$ARCH" ] || gen_documents ;;
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
bytes() { find "$1/" -type f \( -name '*.jsonl' -o -name 'T-*.json' -o -name '*.messages.json' -o -name 'session-*.json' \) -printf '%s\n' | awk '{s += $1} END {print s}'; }
ab=$(bytes "$ARCH")
pb=$(bytes "$PI")
docs=$(find "$ARCH" \( -name 'T-*.json' -o -name '*.messages.json' -o -name 'session-*.json' \) | wc -l)
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
pairs = [("input", "inputTokens"), ("output", "outputTokens"), ("cache_read", "cacheReadTokens"),
         ("cache_write", "cacheCreationTokens"), ("total_tokens", "totalTokens")]
diff = [(a, ours[a], cc[b], dropped[a]) for a, b in pairs if ours[a] != cc[b] + dropped[a]]
if diff:
    sys.exit(f"token totals differ from ccusage's (plus what it drops): {diff}")
print("token totals: ccusage's plus what it drops:", {a: ours[a] for a, _ in pairs}, "dropped:", dropped)
PY
fi

timed() {
    local out=$1 t0 t1
    shift
    t0=$EPOCHREALTIME
    "$@" > /dev/null 2>&1
    t1=$EPOCHREALTIME
    echo "$t0 $t1" >> "$out"
}
STATE=$WORK/unchanged-$AGENT.state
rm -f "$STATE"
"$BIN" stats -q --json "${OURS[@]}" --state "$STATE" > /dev/null
names=(ours_j2 ccusage ours_j1 pi_j1 unchanged_j2)
[ "$AGENT" = cline ] && names=(ours_j2 ours_j1 pi_j1 unchanged_j2)
for n in "${names[@]}"; do : > "$WORK/t.$n"; done
for r in $(seq "$ROUNDS"); do
    timed "$WORK/t.ours_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2
    [ "$AGENT" = cline ] || timed "$WORK/t.ccusage" "$CCUSAGE" "$AGENT" daily --json --offline
    timed "$WORK/t.ours_j1" "$BIN" stats -q --json "${OURS[@]}" --jobs 1
    timed "$WORK/t.pi_j1" "$BIN" stats -q --json --jobs 1 "$PI"
    timed "$WORK/t.unchanged_j2" "$BIN" stats -q --json "${OURS[@]}" --jobs 2 --state "$STATE"
done
"$BIN" stats --json "${OURS[@]}" --jobs 2 --state "$STATE" 2>&1 > /dev/null | tail -1
python3 - "$AGENT" "$WORK" "$ab" "$pb" "$(nproc)" "$docs" "${names[@]}" <<'PY'
import statistics, sys
agent, work, ab, pb, cores, docs, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7:]
runs = {n: [float(b) - float(a) for a, b in (l.split() for l in open(f"{work}/t.{n}"))] for n in names}
med = {n: statistics.median(v) for n, v in runs.items()}
print(f"{agent} archive {ab:,} bytes in {docs} documents, pi archive {pb:,} bytes, {cores} cores, {len(runs['ours_j2'])} rounds")
for n in names:
    b = pb if n == "pi_j1" else ab
    print(f"{n:13} median {med[n]:.3f} s  ({', '.join(f'{x:.3f}' for x in runs[n])})  {b / med[n] / 1e6:,.0f} MB/s")
if "ccusage" in med:
    print(f"stats --jobs 2 / ccusage speed: {med['ccusage'] / med['ours_j2']:.2f} (target >= 2.0 for amp)")
print(f"stats --jobs 1, {agent} MB/s / pi MB/s: {(ab / med['ours_j1']) / (pb / med['pi_j1']):.2f} (target >= 0.8)")
hashed = "every thread hashed, " if agent == "amp" else ""
print(f"unchanged re-run with a state ({hashed}none parsed): {med['unchanged_j2']:.3f} s for {docs} documents")
PY
