#!/usr/bin/env bash
# Two mem-ingest binaries side by side on the figures of cli-ratios.sh
# (and `backfill --db` into a new store),
# alternated in one sitting (OLD, NEW, OLD, NEW, ...), medians of ROUNDS
# (default 5) each: a refactor must keep each within noise.
#
#   scripts/compare-binaries.sh OLD_BINARY NEW_BINARY [ARCHIVE]
#
# ARCHIVE defaults to a 300 MB archive generated (seed 1) under /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
ARCH=${3:-/tmp/mem-ingest-same-300}
if [ ! -d "$ARCH" ]; then
    cargo run -q --release --bin gen-corpus -- --archive "$ARCH" --total-mb 300 >/dev/null
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat $(find "$ARCH" -name '*.jsonl') > /dev/null # warm the page cache
ROUNDS=${ROUNDS:-5}

# time_once BIN SETUP ARGS...: wall seconds of one run (SETUP untimed).
time_once() {
    local bin=$1 setup=$2; shift 2
    eval "$setup"
    local t0=$EPOCHREALTIME
    "$bin" "$@" > /dev/null 2>&1 || true
    local t1=$EPOCHREALTIME
    python3 -c "print($t1 - $t0)"
}

# measure NAME SETUP ARGS...: alternates the binaries, prints both medians.
measure() {
    local name=$1 setup=$2; shift 2
    local a=() b=()
    for _ in $(seq "$ROUNDS"); do
        a+=("$(BIN_TAG=old time_once "$OLD" "${setup//BIN/old}" "${@//BIN/old}")")
        b+=("$(BIN_TAG=new time_once "$NEW" "${setup//BIN/new}" "${@//BIN/new}")")
    done
    python3 - "$name" "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys
name, a, b = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"{name:34} old {ma:8.4f} s  new {mb:8.4f} s  new/old {mb / ma:5.3f}")
PY
}

echo "== $(find "$ARCH" -name '*.jsonl' | wc -l) files, $(du -sm "$ARCH" | cut -f1) MB; $(nproc) cores; medians of $ROUNDS, alternated"
measure "stats --jobs 1" ":" stats -q --json --jobs 1 "$ARCH"
measure "stats --jobs 2" ":" stats -q --json --jobs 2 "$ARCH"
measure "backfill -o new file, --jobs 2" "rm -f $WORK/out-BIN.ndjson" backfill -q --jobs 2 -o "$WORK/out-BIN.ndjson" "$ARCH"
measure "backfill --state -o, first run" "rm -f $WORK/st-BIN $WORK/st-BIN.ndjson" backfill -q --jobs 2 --state "$WORK/st-BIN" -o "$WORK/st-BIN.ndjson" "$ARCH"
measure "backfill --state -o, re-run" ":" backfill -q --jobs 2 --state "$WORK/st-BIN" -o "$WORK/st-BIN.ndjson" "$ARCH"
measure "stats --state, re-run" ":" stats -q --json --jobs 2 --state "$WORK/ss-BIN" "$ARCH"
measure "backfill --db, new store" "rm -f $WORK/db-BIN.db $WORK/db-BIN.db-wal $WORK/db-BIN.db-shm $WORK/db-BIN.db.lock" backfill -q --jobs 2 --db "$WORK/db-BIN.db" "$ARCH"
