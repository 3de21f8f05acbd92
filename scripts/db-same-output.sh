#!/usr/bin/env bash
# The database agents' outputs before and after a change, byte for byte:
# two mem-ingest binaries over the same generated OpenCode (and Goose)
# databases (`scripts/gen-db.py`), each case run by both:
#   - `stats --json` and `backfill` NDJSON, --jobs 1 and 2, all roles and
#     `--role user` (the record paths), `usage --json`;
#   - `backfill --state`, run twice (the second reads nothing new): the
#     NDJSON of each run and the state file's bytes;
#   - `backfill --db`, run twice: the store as `sqlite3 .dump` prints it,
#     but for the full-text index's internal tables and the run times, its
#     lines sorted.
# Prints one line per case and exits 1 when any differs.
#
#   scripts/db-same-output.sh OLD_BINARY NEW_BINARY [WORK]
#
# WORK (default a temp dir) holds the databases (generated when missing:
# OpenCode 10 MB with forks, seed 1; 4 MB with a channel database and
# forks, seed 2; Goose 4 MB with a second store, seed 3).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$(realpath "$1") NEW=$(realpath "$2")
WORK=${3:-$(mktemp -d)}
mkdir -p "$WORK/empty"
[ -d "$WORK/oc1" ] || python3 scripts/gen-db.py opencode "$WORK/oc1" --mb 10 --forks --seed 1 >/dev/null
[ -d "$WORK/oc2" ] || python3 scripts/gen-db.py opencode "$WORK/oc2" --mb 4 --forks --channel local --seed 2 >/dev/null
[ -d "$WORK/goose" ] || python3 scripts/gen-db.py goose "$WORK/goose" --mb 4 --second --seed 3 >/dev/null
fail=0
same() {
    local name=$1
    shift
    if cmp -s "$WORK/out.old" "$WORK/out.new"; then
        echo "same    $name ($(wc -c < "$WORK/out.new") bytes)"
    else
        echo "DIFFERS $name"
        diff <(head -c 100000 "$WORK/out.old") <(head -c 100000 "$WORK/out.new") | head -5 || true
        fail=1
    fi
}
# Runs `$@` with each binary (HOME an empty folder), stdout to out.old/new.
both() {
    HOME=$WORK/empty "$OLD" "$@" > "$WORK/out.old" 2>/dev/null
    HOME=$WORK/empty "$NEW" "$@" > "$WORK/out.new" 2>/dev/null
}
dump() {
    sqlite3 "$1" .dump | grep -v -e 'INSERT INTO records_fts_' -e "INSERT INTO \"records_fts_" \
        -e 'checkpoint_meta' | LC_ALL=C sort
}
for db in "$WORK/oc1/opencode.db" "$WORK/oc2/opencode.db" "$WORK/oc2/opencode-local.db" \
    "$WORK/goose/.local/share/goose/sessions/sessions.db"; do
    case $db in *goose*) agent=goose ;; *) agent=opencode ;; esac
    short=${db#"$WORK"/}
    for j in 1 2; do
        both stats --json -q --jobs $j --agent $agent "$db"
        same "$short stats --jobs $j"
        both backfill -q --jobs $j --agent $agent "$db"
        same "$short backfill --jobs $j"
        both backfill -q --jobs $j --role user --agent $agent "$db"
        same "$short backfill --role user --jobs $j"
    done
    both usage daily --json -q --timezone UTC --agent $agent "$db"
    same "$short usage daily"
    for b in old new; do
        bin=$OLD
        [ $b = new ] && bin=$NEW
        rm -f "$WORK/state.$b" "$WORK/store.$b.db"
        {
            HOME=$WORK/empty "$bin" backfill -q --jobs 2 --state "$WORK/state.$b" --agent $agent "$db"
            HOME=$WORK/empty "$bin" backfill -q --jobs 2 --state "$WORK/state.$b" --agent $agent "$db"
        } > "$WORK/out.$b" 2>/dev/null
    done
    same "$short backfill --state, twice"
    cp "$WORK/state.old" "$WORK/out.old"
    cp "$WORK/state.new" "$WORK/out.new"
    same "$short the state file"
    for b in old new; do
        bin=$OLD
        [ $b = new ] && bin=$NEW
        HOME=$WORK/empty "$bin" backfill -q --agent $agent --db "$WORK/store.$b.db" "$db" 2>/dev/null
        HOME=$WORK/empty "$bin" backfill -q --agent $agent --db "$WORK/store.$b.db" "$db" 2>/dev/null
        dump "$WORK/store.$b.db" > "$WORK/out.$b"
    done
    same "$short backfill --db, twice (the store's dump)"
done
exit $fail
