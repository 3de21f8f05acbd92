#!/usr/bin/env bash
# Builds release, runs the throughput benches and the bare-parse benches
# (issue 15), prints every bench's median and the ratios issues 4 and 15 ask
# for (from criterion's estimates.json), then measures peak memory
# (`/usr/bin/time -v`) of draining a generated 1 GB file against a 100 MB
# one.
#
#   scripts/bench-ratios.sh [criterion args...]
#
# Environment:
#   CARGO_TARGET_DIR     target dir (default: target)
#   MEM_INGEST_BENCH_MB  corpus size of the benches in MB (default 100)
#   SKIP_BENCH=1         only print ratios of the last run (no cargo bench)
#   SKIP_THROUGHPUT=1    run only the bare-parse benches (issue 15)
#   SKIP_MEMORY=1        skip the peak-memory part
#   MEMORY_BIG_MB        size of the big file (default 1024)
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET

cargo build --release --bin gen-corpus --bin mem-ingest --example drain
# what the bare-parse group runs as `stats --jobs 1`
export MEM_INGEST_BIN="$TARGET/release/mem-ingest"

if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
    if [[ "${SKIP_THROUGHPUT:-0}" != 1 ]]; then
        cargo bench --bench throughput -- "$@"
    fi
    cargo bench --bench bare_parse -- "$@"
fi

echo
echo "== throughput (medians; corpus ${MEM_INGEST_BENCH_MB:-100} MB) =="
python3 - "$TARGET/criterion" <<'EOF'
import json, os, sys
crit = sys.argv[1]
groups = {
    "throughput": [
        "1_floor_line_split",
        "2_baseline_serde_json",
        "3_simd_json_borrowed_dom",
        "4_mem_ingest_in_memory",
        "5_mem_ingest_file_chunked",
        "5_mem_ingest_file_mmap",
    ],
    "bare_parse": [
        "bare_parse",
        "mem_ingest_stats_jobs1",
    ],
}
med = {}
print(f"{'bench':28} {'median':>9} {'95% CI of median':>19} {'samples min-max':>19} {'GB/s':>7}")
for group, names in groups.items():
    for n in names:
        d = os.path.join(crit, group, n, "new")
        try:
            est = json.load(open(os.path.join(d, "estimates.json")))
            bench = json.load(open(os.path.join(d, "benchmark.json")))
            sample = json.load(open(os.path.join(d, "sample.json")))
        except OSError:
            print(f"{n:28} (no result)")
            continue
        bytes_ = bench["throughput"]["Bytes"]
        m = est["median"]["point_estimate"]
        lo = est["median"]["confidence_interval"]["lower_bound"]
        hi = est["median"]["confidence_interval"]["upper_bound"]
        med[n] = bytes_ / m  # bytes per ns = GB/s
        per_iter = [t / i for t, i in zip(sample["times"], sample["iters"])]
        smin, smax = min(per_iter), max(per_iter)
        print(f"{n:28} {m/1e6:7.1f}ms {lo/1e6:8.1f}-{hi/1e6:6.1f}ms {smin/1e6:8.1f}-{smax/1e6:6.1f}ms {med[n]:7.3f}")

def ratio(a, b, label, target):
    if a in med and b in med:
        r = med[a] / med[b]
        verdict = "" if target is None else ("  MET" if r >= target else "  NOT MET")
        t = "" if target is None else f" (target >= {target})"
        print(f"{label:44} {r:5.2f}{t}{verdict}")

print()
print("== ratios (throughput of the first over the second) ==")
ratio("4_mem_ingest_in_memory", "2_baseline_serde_json", "(4) mem-ingest / (2) serde_json", 1.8)
ratio("4_mem_ingest_in_memory", "2_baseline_serde_json", "(4) mem-ingest / (2) serde_json, stretch", 2.0)
ratio("4_mem_ingest_in_memory", "3_simd_json_borrowed_dom", "(4) mem-ingest / (3) simd-json DOM", 1.0)
ratio("3_simd_json_borrowed_dom", "2_baseline_serde_json", "(3) simd-json DOM / (2) serde_json", None)
ratio("5_mem_ingest_file_chunked", "4_mem_ingest_in_memory", "(5) chunked file / (4) in memory", 0.9)
ratio("5_mem_ingest_file_mmap", "4_mem_ingest_in_memory", "(5) mmap file / (4) in memory", None)
ratio("5_mem_ingest_file_mmap", "5_mem_ingest_file_chunked", "(5) mmap / (5) chunked", None)
ratio("1_floor_line_split", "4_mem_ingest_in_memory", "(1) floor / (4) mem-ingest", None)
ratio("mem_ingest_stats_jobs1", "bare_parse", "(15) stats --jobs 1 / bare parse", 1.0)
EOF

[[ "${SKIP_MEMORY:-0}" == 1 ]] && exit 0

echo
echo "== peak memory draining one file (PiSessionSource, examples/drain) =="
if [[ ! -x /usr/bin/time ]]; then
    SUDO=""
    [[ $(id -u) != 0 ]] && SUDO=sudo
    $SUDO apt-get install -y time >/dev/null
fi
BIG_MB=${MEMORY_BIG_MB:-1024}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
GEN="$TARGET/release/gen-corpus"
DRAIN="$TARGET/release/examples/drain"
"$GEN" --seed 1 --size-mb 100 "$TMP/small.jsonl"
"$GEN" --seed 1 --size-mb "$BIG_MB" "$TMP/big.jsonl"

peak_kib() { # file -> max RSS in KiB
    /usr/bin/time -v "$DRAIN" "$1" 2>"$TMP/time.txt" >/dev/null
    awk -F': ' '/Maximum resident set size/ {print $2}' "$TMP/time.txt"
}
longest() { # file -> longest line in bytes
    LC_ALL=C awk '{ if (length($0) > m) m = length($0) } END { print m }' "$1"
}
small_kib=$(peak_kib "$TMP/small.jsonl")
big_kib=$(peak_kib "$TMP/big.jsonl")
small_long=$(longest "$TMP/small.jsonl")
big_long=$(longest "$TMP/big.jsonl")
limit_kib=$(( 64 * 1024 + 3 * big_long / 1024 ))
printf '%-10s %12s %16s\n' file "peak RSS" "longest line"
printf '%-10s %9d KiB %12d B\n' "100 MB" "$small_kib" "$small_long"
printf '%-10s %9d KiB %12d B\n' "$BIG_MB MB" "$big_kib" "$big_long"
echo "limit for the big file: 64 MiB + 3 x longest line = $limit_kib KiB"
if (( big_kib <= limit_kib )); then echo "under the limit: MET"; else echo "under the limit: NOT MET"; fi
# The big file repeats the small one's generator stream, so its longest
# line may be longer: allow 3x the difference and 5% noise.
allow=$(( small_kib + small_kib / 20 + 3 * (big_long - small_long) / 1024 ))
if (( big_kib <= allow )); then
    echo "big file no more than the 100 MB file (+5%, +3x longer line): MET"
else
    echo "big file no more than the 100 MB file (+5%, +3x longer line): NOT MET"
fi
