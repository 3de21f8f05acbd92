#!/usr/bin/env bash
# What redaction costs (issue 46): `backfill -o` with redaction (the
# default) against `--no-redact`, alternating, medians of 5 runs each, in
# one sitting, on
#   - a generated pi archive (gen-corpus, PI_MB MB, default 545), and
#   - pi's real sessions (../shared/real) replicated to about REAL_MB MB
#     (default 200) under new names, read with --no-dedupe so every copy is
#     written (real sessions hold far more of the rules' keywords than
#     generated text);
# and `stats` with the build of each (it builds no text: no redaction).
# Target: backfill with redaction at most 1.10 times the time without.
#
#   scripts/redact-ratios.sh
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp
# dir), PI_MB, REAL_MB, RUNS (default 5), JOBS (default: all cores), SHARED
# (default ../shared beside the repository), NO_BUILD=1 (the release
# binaries of CARGO_TARGET_DIR as they are: a figure of a build made
# before).
# Prints the archives, each median and the ratios. The machine's load
# changes the figures: say what else ran beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
PI_MB=${PI_MB:-545}
REAL_MB=${REAL_MB:-200}
RUNS=${RUNS:-5}
SHARED=${SHARED:-$(cd .. && pwd)/shared}
JOBS=${JOBS:-$(nproc)}
if [ -z "${NO_BUILD:-}" ]; then
    cargo build -q --release --bin mem-ingest --bin gen-corpus
fi
BIN=$TARGET/release/mem-ingest
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"

PI=$WORK/pi-$PI_MB
if [ ! -d "$PI" ]; then
    "$TARGET/release/gen-corpus" --archive "$PI" --total-mb "$PI_MB" --seed 1 > /dev/null
fi
REAL=$WORK/real-$REAL_MB
if [ ! -d "$REAL" ]; then
    mkdir -p "$REAL"
    src=("$SHARED"/real/*.jsonl)
    [ -e "${src[0]}" ] || { echo "error: no sessions in $SHARED/real" >&2; exit 1; }
    i=0
    while [ "$(du -sm "$REAL" | cut -f1)" -lt "$REAL_MB" ]; do
        mkdir -p "$REAL/copy-$i"
        for f in "${src[@]}"; do cp "$f" "$REAL/copy-$i/"; done
        i=$((i + 1))
    done
fi
cat $(find "$PI" "$REAL" -name '*.jsonl') > /dev/null # warm the page cache

# Medians of $RUNS alternating runs of two commands, `OUT A... -- B...`
# (A then B, the file OUT removed before each run, untimed; OUT "": none,
# for commands that write no file): prints "A B" in seconds.
alternate() {
    local out=$1; shift
    local a=() b=()
    while [ "$1" != "--" ]; do a+=("$1"); shift; done
    shift
    b=("$@")
    local ta=() tb=()
    for _ in $(seq "$RUNS"); do
        local t0 t1
        [ -z "$out" ] || rm -f -- "$out"
        t0=$EPOCHREALTIME; "${a[@]}" > /dev/null 2>&1; t1=$EPOCHREALTIME
        ta+=("$t0 $t1")
        [ -z "$out" ] || rm -f -- "$out"
        t0=$EPOCHREALTIME; "${b[@]}" > /dev/null 2>&1; t1=$EPOCHREALTIME
        tb+=("$t0 $t1")
    done
    [ -z "$out" ] || rm -f -- "$out"
    python3 - "${ta[@]}" -- "${tb[@]}" <<'PY'
import statistics, sys
args = sys.argv[1:]
cut = args.index("--")
med = lambda xs: statistics.median(float(b) - float(a) for a, b in (x.split() for x in xs))
print(med(args[:cut]), med(args[cut + 1:]))
PY
}

report() { # NAME ARCHIVE EXTRA...
    local name=$1 arch=$2; shift 2
    # This run's own output file: WORK may be shared with other scripts.
    local out=$WORK/redact-ratios.$$.ndjson
    read -r red raw < <(alternate "$out" \
        "$BIN" backfill -q --jobs "$JOBS" "$@" -o "$out" "$arch" -- \
        "$BIN" backfill -q --jobs "$JOBS" "$@" --no-redact -o "$out" "$arch")
    # The secrets the redacted run replaced, for the record.
    local said
    said=$("$BIN" backfill --jobs "$JOBS" "$@" -o "$out" "$arch" 2>&1 >/dev/null | grep 'secrets redacted' || echo "no secrets redacted")
    rm -f "$out"
    printf '%-28s redacted %8.3f s   --no-redact %8.3f s   ratio %.3f (target <= 1.10)\n' \
        "$name" "$red" "$raw" "$(python3 -c "print($red / $raw)")"
    echo "    $said"
}

echo "== $(nproc) cores, --jobs $JOBS, medians of $RUNS alternating runs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== generated pi archive: $(find "$PI" -name '*.jsonl' | wc -l) files, $(du -sm "$PI" | cut -f1) MB"
echo "== real sessions ($SHARED/real) replicated: $(find "$REAL" -name '*.jsonl' | wc -l) files, $(du -sm "$REAL" | cut -f1) MB"
report "generated pi, backfill -o" "$PI"
report "real x N, backfill -o" "$REAL" --no-dedupe
# stats builds no text: it is the same run either way (no --no-redact
# flag) and never compiles the rules; its median for scale (the same
# command twice: the noise).
read -r s1 s2 < <(alternate "" "$BIN" stats -q --json --jobs "$JOBS" "$PI" -- \
    "$BIN" stats -q --json --jobs "$JOBS" "$PI")
printf '%-28s %8.3f s / %8.3f s (the same command twice: the noise)\n' "generated pi, stats" "$s1" "$s2"
