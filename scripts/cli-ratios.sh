#!/usr/bin/env bash
# The command line's targets, measured in one run on a generated archive
# (warm page cache, medians of 5 runs):
#   - stats --jobs 2 against --jobs 1 (target: at least 1.8 times);
#   - backfill -o FILE against stats (target: at least 0.8 times);
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

# Median wall time of 5 runs of a command, in seconds.
median() {
    local times=()
    for _ in 1 2 3 4 5; do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" > /dev/null 2>&1 || true
        t1=$(date +%s.%N)
        times+=("$(calc "$t1 - $t0")")
    done
    printf '%s\n' "${times[@]}" | sort -g | sed -n 3p
}

echo "== archive: $(find "$ARCH" -name '*.jsonl' | wc -l) files, $(du -sm "$ARCH" | cut -f1) MB; $(nproc) cores"
s1=$(median "$BIN" stats -q --json --jobs 1 "$ARCH")
s2=$(median "$BIN" stats -q --json --jobs 2 "$ARCH")
b2=$(median "$BIN" backfill -q --jobs 2 -o "$WORK/out.ndjson" "$ARCH")
printf 'stats --jobs 1            %8.3f s\n' "$s1"
printf 'stats --jobs 2            %8.3f s   speed-up %.2f (target >= 1.8)\n' "$s2" "$(calc "$s1 / $s2")"
printf 'backfill -o, --jobs 2     %8.3f s   %.2f of stats speed (target >= 0.8)\n' "$b2" "$(calc "$s2 / $b2")"

rm -f "$WORK/state.json" "$WORK/state.json.lock" "$WORK/inc.ndjson"
t0=$(date +%s.%N)
"$BIN" backfill -q --state "$WORK/state.json" -o "$WORK/inc.ndjson" "$ARCH"
first=$(calc "$(date +%s.%N) - $t0")
again=$(median "$BIN" backfill -q --state "$WORK/state.json" -o "$WORK/inc.ndjson" "$ARCH")
printf 'backfill --state, first   %8.3f s\n' "$first"
printf 'backfill --state, re-run  %8.3f s   %.0f times faster (target >= 50)\n' "$again" "$(calc "$first / $again")"

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
