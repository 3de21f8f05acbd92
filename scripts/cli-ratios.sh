#!/usr/bin/env bash
# The command line's targets, measured in one run on a generated archive
# (warm page cache, medians of 5 runs):
#   - stats --jobs 2 against --jobs 1 (target: at least 1.8 times);
#   - backfill -o FILE against stats (target: at least 0.8 times), and
#     against stats plus writing its bytes alone (target: at most 1.1);
#   - backfill --state: a re-run over the unchanged archive against the
#     first run (target: at least 50 times faster);
#   - appending 1 MB to one session: what the re-run reads (target: ~1 MB).
#
#   scripts/cli-ratios.sh [TOTAL_MB]      (default 300)
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL_MB=${1:-300}
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
cargo build --release --bin mem-ingest --bin gen-corpus
BIN=$TARGET/release/mem-ingest
WORK=${WORK:-$(mktemp -d)}
ARCH=$WORK/archive
rm -rf "$ARCH"
"$TARGET/release/gen-corpus" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1
cat $(find "$ARCH" -name '*.jsonl') > /dev/null # warm the page cache

calc() { python3 -c "print($1)"; }

# Median wall time of $RUNS runs (default 5) of a command, in seconds,
# timed by the shell's clock (no process between runs). $BEFORE, when set,
# runs before each one, untimed (to remove an output or a state).
median() {
    local spans=()
    for _ in $(seq "${RUNS:-5}"); do
        local t0 t1
        if [ -n "${BEFORE:-}" ]; then eval "$BEFORE"; fi
        t0=$EPOCHREALTIME
        "$@" > /dev/null 2>&1 || true
        t1=$EPOCHREALTIME
        spans+=("$t0 $t1")
    done
    printf '%s\n' "${spans[@]}" | python3 -c '
import statistics, sys
print(statistics.median(float(b) - float(a) for a, b in (l.split() for l in sys.stdin)))'
}

echo "== archive: $(find "$ARCH" -name '*.jsonl' | wc -l) files, $(du -sm "$ARCH" | cut -f1) MB; $(nproc) cores"
s1=$(median "$BIN" stats -q --json --jobs 1 "$ARCH")
s2=$(median "$BIN" stats -q --json --jobs 2 "$ARCH")
# To a new file (the previous output removed before each run, untimed), and
# over the previous output (each run then also frees the last one's pages,
# waiting for any still being written back).
b2=$(BEFORE='rm -f "$WORK/out.ndjson"' median "$BIN" backfill -q --jobs 2 -o "$WORK/out.ndjson" "$ARCH")
b2over=$(median "$BIN" backfill -q --jobs 2 -o "$WORK/out.ndjson" "$ARCH")
printf 'stats --jobs 1            %8.3f s\n' "$s1"
printf 'stats --jobs 2            %8.3f s   speed-up %.2f (target >= 1.8)\n' "$s2" "$(calc "$s1 / $s2")"
printf 'backfill -o new, --jobs 2 %8.3f s   %.2f of stats speed (target >= 0.8)\n' "$b2" "$(calc "$s2 / $b2")"
printf 'backfill -o over the last %8.3f s   %.2f of stats speed\n' "$b2over" "$(calc "$s2 / $b2over")"
# Issue 15's floor of backfill -o: stats plus writing the output's bytes,
# that write measured alone (the output copied into a new file in the same
# folder by dd, 1 MiB writes, the copy removed before each run, untimed).
wr=$(BEFORE='rm -f "$WORK/copy.ndjson"' median dd if="$WORK/out.ndjson" of="$WORK/copy.ndjson" bs=1M status=none)
rm -f "$WORK/copy.ndjson"
printf 'write alone (dd, %s MB)   %8.3f s\n' "$(du -m "$WORK/out.ndjson" | cut -f1)" "$wr"
printf 'backfill -o / (stats + write) %.2f (target <= 1.1)\n' "$(calc "$b2 / ($s2 + $wr)")"

# First runs from nothing (state and output removed before each, untimed),
# then re-runs over the unchanged archive.
first=$(BEFORE='rm -f "$WORK/state.json" "$WORK/state.json.lock" "$WORK/inc.ndjson"' \
    median "$BIN" backfill -q --state "$WORK/state.json" -o "$WORK/inc.ndjson" "$ARCH")
"$BIN" backfill -q --state "$WORK/state.json" -o "$WORK/inc.ndjson" "$ARCH"
again=$(RUNS=11 median "$BIN" backfill -q --state "$WORK/state.json" -o "$WORK/inc.ndjson" "$ARCH")
# For scale: what listing the archive alone costs (one stat per file).
listing=$(RUNS=11 median find "$ARCH" -name '*.jsonl' -printf '%s %T@ %i\n')
printf 'backfill --state, first   %8.3f s\n' "$first"
printf 'backfill --state, re-run  %8.4f s   %.0f times faster (target >= 50)\n' "$again" "$(calc "$first / $again")"
printf 'find -printf, same files  %8.4f s   (listing only, for scale)\n' "$listing"

# Append 1 MB of whole lines (copies of a session's own lines with new ids)
# to one session, and read what the re-run reports.
victim=$(find "$ARCH" -name '*.jsonl' | sort | sed -n 1p)
python3 - "$victim" <<'EOF'
import json, sys
path = sys.argv[1]
lines = [l for l in open(path, encoding="utf-8").read().splitlines()[1:] if l]
out, n, size = [], 0, 0
while size < 1_000_000:
    e = json.loads(lines[n % len(lines)])
    if "id" in e:
        e["id"] = f"app{n:06d}"
    # ASCII escapes keep lone surrogates (\ud83d) as pi writes them.
    out.append(json.dumps(e, separators=(",", ":")))
    size += len(out[-1]) + 1
    n += 1
with open(path, "a", encoding="utf-8") as f:
    f.write("\n".join(out) + "\n")
print(f"appended {sum(len(l.encode()) + 1 for l in out)} bytes ({n} lines) to {path}")
EOF
"$BIN" backfill --state "$WORK/state.json" -o "$WORK/inc.ndjson" "$ARCH" 2>&1 | tail -1
echo "(the summary's \"MB read\" is what the re-run read)"
