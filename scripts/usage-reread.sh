#!/usr/bin/env bash
# How long a store made before usage rows (schema 6) takes to get them:
# the run that migrates it reads the files its checkpoint covers again
# for usage alone (issue 47). Measured in one run on a generated archive
# (page cache warm), alternated, medians of ROUNDS:
#   - migrate: `backfill --db` of a copy of the archive's store of schema 6
#     (this release's store with its usage table taken away and its
#     version set back: the tables a schema 6 release wrote), the archive
#     unchanged (the run reads nothing new after the re-read);
#   - unchanged: `backfill --db` of the schema 7 store over the same
#     archive (what a run costs without the re-read);
#   - stats: `stats` of the archive (reading the same bytes, nothing
#     written);
# and the re-read's own time, as the run prints it.
#
#   scripts/usage-reread.sh [TOTAL_MB] [ROUNDS]   (default 545 3)
#   (WORK=DIR keeps the archive and stores for another sitting)
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL_MB=${1:-545}
ROUNDS=${2:-3}
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
# BIN and GEN name builds made before (then nothing is built).
if [ -z "${BIN:-}" ]; then
    cargo build -q --release --bin mem-ingest --bin gen-corpus
fi
BIN=${BIN:-$TARGET/release/mem-ingest}
GEN=${GEN:-$TARGET/release/gen-corpus}
WORK=${WORK:-$(mktemp -d)}
ARCH=$WORK/archive
if [ ! -d "$ARCH" ]; then
    "$GEN" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1 >/dev/null
fi
if [ ! -f "$WORK/v7.db" ]; then
    "$BIN" backfill -q --db "$WORK/v7.db" "$ARCH"
    python3 - "$WORK/v7.db" "$WORK/v6.db" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("VACUUM INTO ?", (sys.argv[2],))
c.close()
c = sqlite3.connect(sys.argv[2])
c.executescript("DROP TABLE usage; DELETE FROM checkpoint_meta WHERE name LIKE 'usage%'; "
                "PRAGMA user_version = 6;")
c.close()
EOF
fi
cat $(find "$ARCH" -name '*.jsonl') > /dev/null
echo "== archive: $(find "$ARCH" -name '*.jsonl' | wc -l) files, $(du -sm "$ARCH" | cut -f1) MB; $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"

secs() { local t0=$EPOCHREALTIME; "$@" > /dev/null 2>&1; python3 -c "print($EPOCHREALTIME - $t0)"; }
median() { python3 -c "import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 2))" "$@"; }

migrate=() unchanged=() stats=() reread=()
for _ in $(seq "$ROUNDS"); do
    rm -f "$WORK"/run.db*
    cp "$WORK/v6.db" "$WORK/run.db"
    t0=$EPOCHREALTIME
    "$BIN" backfill --db "$WORK/run.db" "$ARCH" > /dev/null 2> "$WORK/migrate.err"
    migrate+=("$(python3 -c "print($EPOCHREALTIME - $t0)")")
    reread+=("$(sed -n 's/.*rows written, in \([0-9.]*\) s$/\1/p' "$WORK/migrate.err")")
    unchanged+=("$(secs "$BIN" backfill -q --db "$WORK/v7.db" "$ARCH")")
    stats+=("$(secs "$BIN" stats -q "$ARCH")")
done
grep 'read again' "$WORK/migrate.err"
echo "rows: $(python3 -c "
import sqlite3, sys
for db in sys.argv[1:]:
    print(db.split('/')[-1], sqlite3.connect(db).execute('SELECT count(*), sum(total_tokens) FROM usage').fetchone())
" "$WORK/run.db" "$WORK/v7.db" | tr '\n' ' ')"
m=$(median "${migrate[@]}"); u=$(median "${unchanged[@]}"); s=$(median "${stats[@]}"); r=$(median "${reread[@]}")
echo "migrating run (re-read included): ${migrate[*]} s, median $m"
echo "  its re-read, as printed:        ${reread[*]} s, median $r"
echo "unchanged run of the v7 store:    ${unchanged[*]} s, median $u"
echo "stats of the archive:             ${stats[*]} s, median $s"
python3 -c "print('re-read / stats: %.2f; migrating run / unchanged run: %.1f' % ($r / $s, $m / $u))"
echo "load after: $(uptime | sed 's/.*load average: //')"
