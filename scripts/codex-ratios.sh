#!/usr/bin/env bash
# Issue 14's speed targets on a generated Codex home, measured in one run
# (warm page cache; the commands alternate round by round, so a shared
# machine's load falls on all of them alike; medians of ROUNDS rounds):
#   - `stats --jobs 2` against `ccusage codex daily --json --offline`
#     (target: at least 2.0 times its speed on 2 cores), after checking
#     that both give the same token totals;
#   - `stats --jobs 1` on the Codex home against `stats --jobs 1` on a pi
#     archive from the same generator, in MB/s (target: at least 0.8).
# With OLD=path/to/an/older/mem-ingest, that binary's `stats --jobs 2` and
# `--jobs 1` on the Codex home alternate with the rest (before/after).
#
#   scripts/codex-ratios.sh [TOTAL_MB]      (default 300)
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp
# dir; archives already there are reused), ROUNDS (default 3), CCUSAGE
# (default /tmp/ccusage-reference/node_modules/.bin/ccusage).
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL_MB=${1:-300}
TARGET=${CARGO_TARGET_DIR:-target}
export CARGO_TARGET_DIR=$TARGET
CCUSAGE=${CCUSAGE:-/tmp/ccusage-reference/node_modules/.bin/ccusage}
ROUNDS=${ROUNDS:-3}
cargo build --release --bin mem-ingest --bin gen-corpus
BIN=$TARGET/release/mem-ingest
WORK=${WORK:-$(mktemp -d)}
CODEX=$WORK/codex-$TOTAL_MB
PI=$WORK/pi-$TOTAL_MB
[ -d "$CODEX" ] || "$TARGET/release/gen-corpus" --format codex --archive "$CODEX" --total-mb "$TOTAL_MB" --seed 1
[ -d "$PI" ] || "$TARGET/release/gen-corpus" --archive "$PI" --total-mb "$TOTAL_MB" --seed 1
export TZ=UTC CODEX_HOME=$CODEX
bytes() { find "$1/" -type f -name '*.jsonl' -printf '%s\n' | awk '{s += $1} END {print s}'; }
cb=$(bytes "$CODEX")
pb=$(bytes "$PI")
cat $(find "$CODEX/" "$PI/" -type f) > /dev/null # warm the page cache

# The same totals first (ccusage's inputTokens is the non-cached input, as
# ours; see the README's Codex section).
"$BIN" stats -q --json --source codex > "$WORK/ours.json"
"$CCUSAGE" codex daily --json --offline > "$WORK/ccusage.json"
python3 - "$WORK/ours.json" "$WORK/ccusage.json" <<'EOF'
import json, sys
ours = json.load(open(sys.argv[1]))["usage"]
cc = json.load(open(sys.argv[2]))["totals"]
pairs = [("input", "inputTokens"), ("output", "outputTokens"),
         ("cache_read", "cacheReadTokens"), ("total_tokens", "totalTokens")]
diff = [(a, ours[a], cc[b]) for a, b in pairs if ours[a] != cc[b]]
if diff:
    sys.exit(f"token totals differ from ccusage's: {diff}")
print("token totals equal ccusage's:", {a: ours[a] for a, _ in pairs})
EOF

# One timed run of a command, appended to the file named by $1: wall
# seconds (the shell's clock), and the CPU seconds (user + system) it and
# its children used, from /usr/bin/time (load-independent, unlike the wall
# time on a shared machine; 0 when /usr/bin/time is missing).
timed() {
    local out=$1 t0 t1 cpu=0
    shift
    t0=$EPOCHREALTIME
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%U %S' -o "$out.cpu" "$@" > /dev/null 2>&1
        cpu=$(awk '{print $1 + $2}' "$out.cpu")
    else
        "$@" > /dev/null 2>&1
    fi
    t1=$EPOCHREALTIME
    echo "$t0 $t1 $cpu" >> "$out"
}
names=(ours_j2 ccusage ours_j1 pi_j1)
[ -n "${OLD:-}" ] && names+=(old_j2 old_j1)
for n in "${names[@]}"; do : > "$WORK/t.$n"; done
for r in $(seq "$ROUNDS"); do
    timed "$WORK/t.ours_j2" "$BIN" stats -q --json --source codex --jobs 2
    timed "$WORK/t.ccusage" "$CCUSAGE" codex daily --json --offline
    timed "$WORK/t.ours_j1" "$BIN" stats -q --json --source codex --jobs 1
    timed "$WORK/t.pi_j1" "$BIN" stats -q --json --jobs 1 "$PI"
    if [ -n "${OLD:-}" ]; then
        timed "$WORK/t.old_j2" "$OLD" stats -q --json --source codex --jobs 2
        timed "$WORK/t.old_j1" "$OLD" stats -q --json --source codex --jobs 1
    fi
done
python3 - "$WORK" "$cb" "$pb" "$(nproc)" "${names[@]}" <<'EOF'
import statistics, sys
work, cb, pb, cores, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
runs, cpus = {}, {}
for n in names:
    rows = [l.split() for l in open(f"{work}/t.{n}")]
    runs[n] = [float(b) - float(a) for a, b, _ in rows]
    cpus[n] = statistics.median(float(c) for _, _, c in rows)
med = {n: statistics.median(v) for n, v in runs.items()}
print(f"codex home {cb:,} bytes, pi archive {pb:,} bytes, {cores} cores, {len(runs['ours_j2'])} rounds")
for n in names:
    b = pb if n == "pi_j1" else cb
    print(f"{n:8} median {med[n]:.3f} s  ({', '.join(f'{x:.3f}' for x in runs[n])})  {b / med[n] / 1e6:,.0f} MB/s, CPU {cpus[n]:.2f} s")
print(f"stats --jobs 2 / ccusage speed: {med['ccusage'] / med['ours_j2']:.2f} (target >= 2.0)")
if cpus["ours_j2"] > 0:
    print(f"CPU seconds, ccusage / stats --jobs 2: {cpus['ccusage'] / cpus['ours_j2']:.2f} "
          f"(the speed ratio two idle cores allow at most: about twice this)")
codex_mbs, pi_mbs = cb / med["ours_j1"], pb / med["pi_j1"]
print(f"stats --jobs 1, codex MB/s / pi MB/s: {codex_mbs / pi_mbs:.2f} (target >= 0.8)")
if "old_j2" in med:
    print(f"old / new, --jobs 2: {med['old_j2'] / med['ours_j2']:.2f}; --jobs 1: {med['old_j1'] / med['ours_j1']:.2f}")
EOF
