#!/usr/bin/env bash
# Refactors keep behaviour: runs two mem-ingest binaries over the same
# inputs with the same options and compares what they print, byte for byte:
# `backfill` NDJSON and `stats --json` on every fixture and on a generated
# archive, with and without --state, --jobs 1 and 2, with filters; and the
# human stats table, with runs of spaces squeezed (see compare_spaces).
#
#   scripts/same-output.sh OLD_BINARY NEW_BINARY [ARCHIVE]
#
# ARCHIVE defaults to a 300 MB archive generated (seed 1) under /tmp.
# QWEN_ARCHIVE (default a 30 MB Qwen Code runtime folder generated under
# /tmp, seed 1) is compared too (an older binary that does not read Qwen
# Code differs there: a change of behaviour); so is COPILOT_ARCHIVE (a 30
# MB Copilot CLI home, likewise), and GEMINI_ARCHIVE (a 30 MB Gemini CLI
# home, likewise; the generator dates its files back, so every message is
# final).
# The store (`backfill --db`, run twice: the second run reads nothing new)
# is compared as `sqlite3 .dump` prints it, its lines sorted (a table's
# rows are in the order of their transactions, which the time-based
# checkpoints cut), but for the full-text index's segments, whose layout
# follows those transactions too: the index is compared as the rows and
# instances of its every term (an fts5vocab table, in term order); the
# dataset
# (`backfill --parquet`) as DuckDB reads its rows, sorted (its file names
# hold a run id: never the same). With NO_DB=1 or NO_PARQUET=1 those are
# left out.
# Prints one line per case and exits 1 when any differs.
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1 NEW=$2
ARCH=${3:-/tmp/mem-ingest-same-300}
if [ ! -d "$ARCH" ]; then
    cargo run -q --release --bin gen-corpus -- --archive "$ARCH" --total-mb 300 >/dev/null
fi
QARCH=${QWEN_ARCHIVE:-/tmp/mem-ingest-same-qwen-30}
if [ ! -d "$QARCH" ]; then
    cargo run -q --release --bin gen-corpus -- --format qwen --archive "$QARCH" --total-mb 30 2>/dev/null
fi
CARCH=${COPILOT_ARCHIVE:-/tmp/mem-ingest-same-copilot-30}
if [ ! -d "$CARCH" ]; then
    cargo run -q --release --bin gen-corpus -- --format copilot --archive "$CARCH" --total-mb 30 2>/dev/null
fi
GARCH=${GEMINI_ARCHIVE:-/tmp/mem-ingest-same-gemini-30}
if [ ! -d "$GARCH" ]; then
    cargo run -q --release --bin gen-corpus -- --format gemini --archive "$GARCH" --total-mb 30 2>/dev/null
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail=0
# verdict NAME OLD NEW: one line saying whether the two digests are the
# same; a difference fails the run.
verdict() {
    if [ "$2" = "$3" ]; then
        echo "same     $1 ($2)"
    else
        echo "DIFFERS  $1 ($2 vs $3)"
        fail=1
    fi
}
# case NAME ARGS...: both binaries, stdout compared (stderr ignored: it
# holds timings). With --state, each binary gets a state of its own, run
# twice (the second run reads nothing new) and the states' outputs compared.
compare() {
    local name=$1; shift
    local a b
    a=$("$OLD" "$@" 2>/dev/null | sha256sum | cut -c1-16) || true
    b=$("$NEW" "$@" 2>/dev/null | sha256sum | cut -c1-16) || true
    verdict "$name" "$a" "$b"
}
# compare_spaces NAME ARGS...: as compare, runs of spaces squeezed to one
# first. For the human stats table only: its columns widen to the longest
# name, and its headers moved one space to the right to stand over their
# columns (#13); every word and number must still be the same.
compare_spaces() {
    local name=$1; shift
    local a b
    a=$("$OLD" "$@" 2>/dev/null | tr -s ' ' | sha256sum | cut -c1-16) || true
    b=$("$NEW" "$@" 2>/dev/null | tr -s ' ' | sha256sum | cut -c1-16) || true
    verdict "$name" "$a" "$b"
}
compare_state() {
    local name=$1; shift
    local bin out=()
    for bin in "$OLD" "$NEW"; do
        local d="$WORK/$(basename "$(dirname "$(dirname "$bin")")")-$RANDOM"
        mkdir -p "$d"
        local first second
        first=$("$bin" "$@" --state "$d/state" 2>/dev/null | sha256sum | cut -c1-16) || true
        second=$("$bin" "$@" --state "$d/state" 2>/dev/null | sha256sum | cut -c1-16) || true
        out+=("$first/$second")
    done
    verdict "$name" "${out[0]}" "${out[1]}"
}
# compare_db NAME ARGS...: `backfill --db` twice with each binary, each
# store dumped whole.
compare_db() {
    local name=$1; shift
    local bin out=()
    for bin in "$OLD" "$NEW"; do
        local d="$WORK/db-$RANDOM"
        mkdir -p "$d"
        "$bin" backfill -q "$@" --db "$d/m.db" >/dev/null 2>&1 || true
        "$bin" backfill -q "$@" --db "$d/m.db" >/dev/null 2>&1 || true
        out+=("$({ sqlite3 "$d/m.db" .dump | grep -Ev '^INSERT INTO "?records_fts_(data|idx)' | sort
                  sqlite3 "$d/m.db" "CREATE VIRTUAL TABLE temp.v USING fts5vocab('main', 'records_fts', 'row');
                                     SELECT * FROM temp.v"; } | sha256sum | cut -c1-16)")
        rm -rf "$d"
    done
    verdict "$name" "${out[0]}" "${out[1]}"
}
# compare_parquet NAME ARGS...: `backfill --parquet` with each binary, the
# dataset's rows (with their partition columns) sorted.
compare_parquet() {
    local name=$1; shift
    local bin out=()
    for bin in "$OLD" "$NEW"; do
        local d="$WORK/pq-$RANDOM"
        "$bin" backfill -q "$@" --parquet "$d" >/dev/null 2>&1 || true
        out+=("$(python3 - "$d" <<'PY' | sha256sum | cut -c1-16
import duckdb, os, sys
# Each table (records, and usage beside them; a dataset of a version before
# the usage table: its records at the top).
d = sys.argv[1]
tables = [t for t in ("records", "usage") if os.path.isdir(f"{d}/{t}")] or ["."]
for t in tables:
    rel = duckdb.sql(f"select * from read_parquet('{d}/{t}/**/*.parquet', hive_partitioning = true)")
    cols = ", ".join(f'"{c}"' for c in rel.columns)
    print(t, rel.columns)
    for row in duckdb.sql(f"select * from rel order by {cols}").fetchall():
        print(row)
PY
)")
        rm -rf "$d"
    done
    verdict "$name" "${out[0]}" "${out[1]}"
}
FIX=(fixtures/*.jsonl fixtures/bad/)
if [ -z "${NO_DB:-}" ]; then
    compare_db "fixtures --db" "${FIX[@]}"
    compare_db "archive --db" "$ARCH"
fi
if [ -z "${NO_PARQUET:-}" ]; then
    compare_parquet "fixtures --parquet" "${FIX[@]}"
    compare_parquet "archive --parquet" "$ARCH"
fi
for j in 1 2; do
    compare "fixtures backfill -j$j" backfill -q -j$j "${FIX[@]}"
    compare "fixtures stats -j$j" stats --json -q -j$j "${FIX[@]}"
    compare "fixtures+no-header stats -j$j" stats --json -q -j$j fixtures/
    compare_spaces "fixtures stats table (spaces squeezed) -j$j" stats -q -j$j "${FIX[@]}"
    compare "fixtures backfill filters -j$j" backfill -q -j$j --role user --role assistant --since 2025-01-01 --max-text 40 "${FIX[@]}"
    compare "fixtures backfill no-dedupe -j$j" backfill -q -j$j --no-dedupe "${FIX[@]}"
    compare "archive backfill -j$j" backfill -q -j$j "$ARCH"
    compare "archive stats -j$j" stats --json -q -j$j "$ARCH"
    compare "archive backfill filters -j$j" backfill -q -j$j --role tool_result --until 2026-06-01 --max-text 100 "$ARCH"
    compare_state "fixtures stats --state -j$j" stats --json -q -j$j "${FIX[@]}"
    compare_state "fixtures backfill --state -j$j" backfill -q -j$j "${FIX[@]}"
    compare_state "archive stats --state -j$j" stats --json -q -j$j "$ARCH"
    compare_state "archive backfill --state -j$j" backfill -q -j$j "$ARCH"
    compare "qwen backfill -j$j" backfill -q -j$j "$QARCH"
    compare "qwen stats -j$j" stats --json -q -j$j "$QARCH"
    compare_state "qwen backfill --state -j$j" backfill -q -j$j "$QARCH"
    compare "copilot backfill -j$j" backfill -q -j$j "$CARCH"
    compare "copilot stats -j$j" stats --json -q -j$j "$CARCH"
    compare_state "copilot backfill --state -j$j" backfill -q -j$j "$CARCH"
    compare "gemini backfill -j$j" backfill -q -j$j "$GARCH"
    compare "gemini stats -j$j" stats --json -q -j$j "$GARCH"
    compare_state "gemini backfill --state -j$j" backfill -q -j$j "$GARCH"
done
exit $fail
