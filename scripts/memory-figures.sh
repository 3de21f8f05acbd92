#!/usr/bin/env bash
# Issue 42's memory figures: the peak resident memory (`/usr/bin/time -v`,
# "Maximum resident set size") of `stats`, `backfill -o` and
# `backfill --db` on three Codex files, each beside the same command on a
# pi file of the same size and longest line (the bound: the pi figure plus
# 10%, plus a few dozen bytes a distinct entry):
#   - a 2 GB stream of one repeated line, compressed (`.jsonl.zst`, 1 record)
#     against the same 2 GB of one repeated pi line, plain;
#   - a real-shaped rollout of 760 MB (`gen-corpus --format codex`) against
#     a generated pi file of 760 MB;
#   - 600 MB of NUL bytes as one line (over the 512 MiB limit: skipped)
#     between two messages, Codex and pi.
#
#   scripts/memory-figures.sh
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp dir;
# files already there are reused), BIN (a mem-ingest binary; none built
# then), JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin mem-ingest --bin gen-corpus
    BIN=$TARGET/release/mem-ingest
fi
GEN=$(dirname "$BIN")/gen-corpus
JOBS=${JOBS:-2}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
META='{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a","model_provider":"openai"}}'
CLINE='{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"the same line again and again, a kilobyte of it: '"$(printf 'x%.0s' $(seq 900))"'"}]}}'
PHEAD='{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a"}'
PLINE='{"type":"message","id":"same","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z","message":{"role":"user","content":"the same line again and again, a kilobyte of it: '"$(printf 'x%.0s' $(seq 900))"'","timestamp":1769904000000}}'
mkdir -p "$WORK/repeat-codex" "$WORK/repeat-pi" "$WORK/real-codex" "$WORK/real-pi" "$WORK/zeros-codex" "$WORK/zeros-pi"
N=$(( 2000000000 / (${#CLINE} + 1) ))
RC=$WORK/repeat-codex/rollout-2026-01-01T00-00-00-t1.jsonl.zst
[ -f "$RC" ] || { echo "$META"; { yes "$CLINE" || true; } | head -n "$N"; } | zstd -q -3 -o "$RC"
RP=$WORK/repeat-pi/s1.jsonl
[ -f "$RP" ] || { echo "$PHEAD"; { yes "$PLINE" || true; } | head -n "$N"; } > "$RP"
# A rollout of 760 MB shaped as a real one (gen-corpus writes archives of
# many rollouts): turns of a task start, a turn context, a prompt and its
# event twin, reasoning, tool calls and their outputs (0.2-24 KB), token
# counts and an answer with its twin; every line distinct.
[ -f "$WORK/real-codex/rollout-2026-01-01T00-00-00-t1.jsonl" ] || python3 - "$WORK/real-codex/rollout-2026-01-01T00-00-00-t1.jsonl" <<'PY'
import json, random, sys
rng = random.Random(1)
out = open(sys.argv[1], "w")
def line(ts, ty, payload):
    out.write(json.dumps({"timestamp": ts, "type": ty, "payload": payload}, separators=(",", ":")) + "\n")
line("2026-01-01T00:00:00.000Z", "session_meta", {"id": "t1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/a", "model_provider": "openai", "base_instructions": {"text": "You are Codex. " * 800}})
words = "the a file test build error fix function return value change line read write path config".split()
total = [0, 0, 0, 0, 0]
turn = 0
while out.tell() < 760_000_000:
    ts = "2026-01-%02dT%02d:%02d:%02d.%03dZ" % (1 + turn // 86400 % 28, turn // 3600 % 24, turn // 60 % 60, turn % 60, turn % 1000)
    prompt = "please %s %d" % (" ".join(rng.choice(words) for _ in range(rng.randint(5, 60))), turn)
    line(ts, "event_msg", {"type": "task_started", "turn_id": str(turn)})
    line(ts, "turn_context", {"cwd": "/a", "model": "gpt-5.%d" % (turn // 500 % 3), "approval_policy": "on-request"})
    line(ts, "response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]})
    line(ts, "event_msg", {"type": "user_message", "message": prompt})
    for k in range(rng.randint(1, 6)):
        line(ts, "response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking %d %d " % (turn, k) + " ".join(rng.choice(words) for _ in range(rng.randint(10, 80)))}], "encrypted_content": "x" * rng.randint(200, 2000)})
        line(ts, "response_item", {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", "cat src/%d_%d.rs" % (turn, k)]}), "call_id": "c%d_%d" % (turn, k)})
        body = "\n".join("%d: %s" % (i, " ".join(rng.choice(words) for _ in range(8))) for i in range(rng.randint(4, 500)))
        line(ts, "response_item", {"type": "function_call_output", "call_id": "c%d_%d" % (turn, k), "output": json.dumps({"output": body, "metadata": {"exit_code": 0}})})
        step = [rng.randint(1000, 30000), rng.randint(0, 20000), rng.randint(10, 2000), rng.randint(0, 500), 0]
        step[1] = min(step[1], step[0]); step[4] = step[0] + step[2]
        total = [a + b for a, b in zip(total, step)]
        keys = ["input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens"]
        line(ts, "event_msg", {"type": "token_count", "info": {"total_token_usage": dict(zip(keys, total)), "last_token_usage": dict(zip(keys, step))}})
    answer = "done %d: %s" % (turn, " ".join(rng.choice(words) for _ in range(rng.randint(5, 120))))
    line(ts, "response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]})
    line(ts, "event_msg", {"type": "agent_message", "message": answer})
    turn += 1
PY
[ -f "$WORK/real-pi/s1.jsonl" ] || "$GEN" --size-mb 760 --seed 1 "$WORK/real-pi/s1.jsonl"
zeros() {
    echo "$1"
    echo "$2"
    head -c 600000000 /dev/zero
    echo
    echo "$2"
}
ZC=$WORK/zeros-codex/rollout-2026-01-01T00-00-00-t1.jsonl
[ -f "$ZC" ] || zeros "$META" "$(echo "$CLINE" | sed 's/2026-01-01T00:00:02/2026-01-01T00:00:03/')" > "$ZC"
ZP=$WORK/zeros-pi/s1.jsonl
[ -f "$ZP" ] || zeros "$PHEAD" "$PLINE" > "$ZP"

# The longest line of a case's file.
longest() {
    case "$1" in
    repeat-pi) echo "${#PLINE}" ;;
    repeat-codex) echo "${#CLINE}" ;;
    zeros-*) echo 600000000 ;;
    *) awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$2" ;;
    esac
}

# Peak RSS in KB of one command.
rss() {
    /usr/bin/time -v "$@" 2> "$WORK/time.txt" > /dev/null || { cat "$WORK/time.txt" >&2; exit 1; }
    awk -F': ' '/Maximum resident set size/ { print $2 }' "$WORK/time.txt"
}

printf '%-8s %-9s %12s %10s %10s %10s\n' case agent bytes stats '-o' '--db'
for c in repeat real zeros; do
    for a in pi codex; do
        d=$WORK/$c-$a
        f=$(find "$d" -type f \( -name '*.jsonl' -o -name '*.zst' \) | head -1)
        case "$f" in
        *.zst) size=$(zstd -dc "$f" | wc -c) ;;
        *) size=$(stat -c %s "$f") ;;
        esac
        agent=$([ "$a" = pi ] && echo pi || echo codex)
        s=$(rss "$BIN" stats -q --jobs "$JOBS" --agent "$agent" "$d")
        rm -f "$WORK/out.ndjson" "$WORK/m.db" "$WORK/m.db-wal" "$WORK/m.db-shm"
        o=$(rss "$BIN" backfill -q --jobs "$JOBS" --agent "$agent" -o "$WORK/out.ndjson" "$d")
        b=$(rss "$BIN" backfill -q --jobs "$JOBS" --agent "$agent" --db "$WORK/m.db" "$d")
        printf '%-8s %-9s %12s %8s KB %8s KB %8s KB  (longest line %s)\n' "$c" "$a" "$size" "$s" "$o" "$b" "$(longest "$c-$a" "$f")"
    done
done
rm -f "$WORK/out.ndjson" "$WORK/m.db" "$WORK/m.db-wal" "$WORK/m.db-shm"
