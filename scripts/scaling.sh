#!/usr/bin/env bash
# Multi-core scaling of `mem-ingest stats` (issue 4): a generated archive of
# TOTAL_MB (default 2048) read with --jobs 1, 2, 4, 8 and 16, warm page
# cache, medians of 3; prints the table for BENCHMARKS.md (target: 12 times
# at 16 jobs on a 16-core machine). About two minutes on 16 cores.
#
#   scripts/scaling.sh [TOTAL_MB] [JOBS...]
#
# Uses $BIN_DIR/mem-ingest and $BIN_DIR/gen-corpus when they exist (a
# machine without the crate registry gets the binaries built here), and
# otherwise builds them. WORK (default a temporary folder) holds the
# archive.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL_MB=${1:-2048}
shift || true
JOBS=("$@")
if [ ${#JOBS[@]} -eq 0 ]; then JOBS=(1 2 4 8 16); fi
BIN_DIR=${BIN_DIR:-${CARGO_TARGET_DIR:-target}/release}
if [ ! -x "$BIN_DIR/mem-ingest" ] || [ ! -x "$BIN_DIR/gen-corpus" ]; then
    cargo build --release --bin mem-ingest --bin gen-corpus
fi
WORK=${WORK:-$(mktemp -d)}
ARCH=$WORK/archive
rm -rf "$ARCH"
"$BIN_DIR/gen-corpus" --archive "$ARCH" --total-mb "$TOTAL_MB" --seed 1
cat $(find "$ARCH" -name '*.jsonl') > /dev/null # warm the page cache

# Median wall time of 3 runs, in seconds, by the shell's clock.
median() {
    local spans=()
    for _ in 1 2 3; do
        local t0=$EPOCHREALTIME
        "$@" > /dev/null 2>&1
        spans+=("$t0 $EPOCHREALTIME")
    done
    printf '%s\n' "${spans[@]}" | python3 -c '
import statistics, sys
print(statistics.median(float(b) - float(a) for a, b in (l.split() for l in sys.stdin)))'
}

echo "== archive: $(find "$ARCH" -name '*.jsonl' | wc -l) files, $(du -sm "$ARCH" | cut -f1) MB;" \
    "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
# The counts must not depend on --jobs: each run's summary is compared.
reference=$("$BIN_DIR/mem-ingest" stats -q --json --jobs 1 "$ARCH")
medians=()
for j in "${JOBS[@]}"; do
    got=$("$BIN_DIR/mem-ingest" stats -q --json --jobs "$j" "$ARCH")
    if [ "$got" != "$reference" ]; then
        echo "stats --jobs $j differs from --jobs 1" >&2
        exit 1
    fi
    medians+=("$(median "$BIN_DIR/mem-ingest" stats -q --json --jobs "$j" "$ARCH")")
done
row() { printf '| %s |' "$1"; shift; printf ' %s |' "$@"; echo; }
row '`--jobs`' "${JOBS[@]}"
printf '|---|'; for _ in "${JOBS[@]}"; do printf -- '---:|'; done; echo
row 'median (s)' $(for m in "${medians[@]}"; do printf '%.3f ' "$m"; done)
row 'speed-up' $(for m in "${medians[@]}"; do python3 -c "print(f'{${medians[0]} / $m:.2f}')"; done)
