#!/usr/bin/env bash
# The store's figures (issue 12), measured in one run on generated
# archives (page cache warm):
#   - backfill --db against its floor, SQLite itself (examples/store_floor:
#     the same rows into the same schema with a bare rusqlite loop), medians
#     of 3, alternated (target: at most 1.25 times);
#   - against what a user would do instead: backfill -o NDJSON, then
#     sqlite-utils insert --nl --pk key and enable-fts (be faster);
#   - the database's size against the NDJSON's;
#   - search latency on the store of a 1 GB archive: 20 queries of words
#     and identifiers of the corpus, --limit 20 (target: p50 under 10 ms,
#     p95 under 50 ms).
#
#   scripts/store-ratios.sh [TOTAL_MB] [SEARCH_MB]   (default 300 1024)
#
# Needs sqlite-utils (pip install sqlite-utils).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL_MB=${1:-300}
SEARCH_MB=${2:-1024}
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
cargo build -q --release --bin mem-ingest --bin gen-corpus --example store_floor --example search_latency
BIN=$TARGET/release/mem-ingest
WORK=${WORK:-$(mktemp -d)}
ARCH=$WORK/archive
rm -rf "$ARCH"
"$TARGET/release/gen-corpus" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1 >/dev/null
cat $(find "$ARCH" -name '*.jsonl') > /dev/null
echo "== archive: $(find "$ARCH" -name '*.jsonl' | wc -l) files, $(du -sm "$ARCH" | cut -f1) MB; $(nproc) cores"

secs() { local t0=$EPOCHREALTIME; "$@" > /dev/null 2>&1; python3 -c "print($EPOCHREALTIME - $t0)"; }
median() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

floors=() ours=()
for _ in 1 2 3; do
    floors+=("$("$TARGET/release/examples/store_floor" "$WORK/floor.db" "$ARCH" | awk '/insert seconds/ {print $3}')")
    rm -f "$WORK"/ours.db*
    ours+=("$(secs "$BIN" backfill -q --db "$WORK/ours.db" "$ARCH")")
done
f=$(median "${floors[@]}"); o=$(median "${ours[@]}")
printf 'floor (bare rusqlite loop)  %7.2f s   runs: %s\n' "$f" "${floors[*]}"
printf 'backfill --db               %7.2f s   runs: %s\n' "$o" "${ours[*]}"
printf 'backfill --db / floor       %7.3f   (target <= 1.25)\n' "$(python3 -c "print($o / $f)")"

rm -f "$WORK/out.ndjson" "$WORK"/su.db*
t_nd=$(secs "$BIN" backfill -q -o "$WORK/out.ndjson" "$ARCH")
t_ins=$(secs sqlite-utils insert "$WORK/su.db" records "$WORK/out.ndjson" --nl --pk key --alter)
t_fts=$(secs sqlite-utils enable-fts "$WORK/su.db" records text)
su=$(python3 -c "print($t_nd + $t_ins + $t_fts)")
printf 'backfill -o + sqlite-utils  %7.2f s   (%.2f + %.2f insert + %.2f enable-fts)\n' "$su" "$t_nd" "$t_ins" "$t_fts"
printf 'sqlite-utils path / --db    %7.2f   (be faster: > 1)\n' "$(python3 -c "print($su / $o)")"
nd=$(stat -c %s "$WORK/out.ndjson"); db=$(stat -c %s "$WORK/ours.db")
printf 'sizes: NDJSON %d MB, store %d MB (%.2f of the NDJSON), sqlite-utils %d MB\n' \
    $((nd / 1000000)) $((db / 1000000)) "$(python3 -c "print($db / $nd)")" $(( $(stat -c %s "$WORK/su.db") / 1000000 ))

BIG=$WORK/big
"$TARGET/release/gen-corpus" --archive "$BIG" --total-mb "$SEARCH_MB" --seed 2 >/dev/null
t_big=$(secs "$BIN" backfill -q --db "$WORK/big.db" "$BIG")
echo "== search: $(du -sm "$BIG" | cut -f1) MB archive, store $(( $(stat -c %s "$WORK/big.db") / 1000000 )) MB, $(sqlite3 "$WORK/big.db" 'select count(*) from records') rows, built in $t_big s"
"$TARGET/release/examples/search_latency" "$WORK/big.db" \
    parser arena compute naïve café value12 src/module_3/file_17.ts src/pi.rs FAILED \
    '"regression test"' '"truncated last line"' '"Performance matters"' 'buffer stream' \
    'token cache' 'async await' 'Some None' 'struct impl' datei staff 'header entry message'
