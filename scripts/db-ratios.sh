#!/usr/bin/env bash
# The database agents' speed (issue 50), measured in one run (warm page
# cache; the commands alternate round by round, so a shared machine's load
# falls on all of them alike; medians of ROUNDS rounds):
#   - opencode: `stats --jobs 2` on a generated OpenCode database of about
#     MB megabytes (`scripts/gen-db.py opencode --forks`: answers of up to
#     three calls) against ccusage 20.0.24 (`ccusage opencode daily --json
#     --offline`; target: at least 2.0 times its speed), after checking
#     that each gives the token totals `gen-db.py count` computes for it
#     from the rows (equal where ccusage is right; where it is not, ours
#     and its differ by exactly the documented amounts: later calls, fork
#     copies);
#   - goose: `stats --jobs 2` on a generated Goose sessions.db against a
#     bare scan of the tables it reads by the sqlite3 shell (every column
#     read, each text's length computed: every byte touched), after
#     checking our totals against `gen-db.py count` (ccusage reads only the
#     `sessions` table: no speed comparison with it).
# With OLD=path/to/an/older/mem-ingest, that binary's `stats --jobs 2`
# alternates with the rest (before/after).
#
#   scripts/db-ratios.sh opencode|goose [MB]   (default 100)
#
# Environment: CARGO_TARGET_DIR (default target), WORK (default a temp
# dir; databases already there are reused), ROUNDS (default 5), CCUSAGE
# (default /tmp/ccusage-reference/node_modules/.bin/ccusage), BIN (a
# mem-ingest binary to measure; none built then).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=${1:?usage: db-ratios.sh opencode|goose [MB]}
MB=${2:-100}
TARGET=${CARGO_TARGET_DIR:-target}
CCUSAGE=${CCUSAGE:-/tmp/ccusage-reference/node_modules/.bin/ccusage}
ROUNDS=${ROUNDS:-5}
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin mem-ingest
    BIN=$TARGET/release/mem-ingest
fi
WORK=${WORK:-$(mktemp -d)}
EMPTY=$WORK/empty-home
mkdir -p "$EMPTY"
case $AGENT in
    opencode)
        DATA=$WORK/opencode-$MB
        [ -f "$DATA/opencode.db" ] || python3 scripts/gen-db.py opencode "$DATA" --mb "$MB" --forks
        DB=$DATA/opencode.db
        ;;
    goose)
        DATA=$WORK/goose-$MB
        DB=$DATA/.local/share/goose/sessions/sessions.db
        [ -f "$DB" ] || python3 scripts/gen-db.py goose "$DATA" --mb "$MB"
        ;;
    *) echo "usage: db-ratios.sh opencode|goose [MB]" >&2; exit 2 ;;
esac
SIZE=$(stat -c %s "$DB")
echo "database: $DB ($SIZE bytes)"
python3 scripts/gen-db.py count "$AGENT" "$DATA" > "$WORK/count.json"

ours() { HOME=$EMPTY "$1" stats --json -q --jobs 2 --agent "$AGENT" "$DB"; }
theirs() { TZ=UTC HOME=$EMPTY OPENCODE_DATA_DIR=$DATA "$CCUSAGE" opencode daily --json --offline; }
bare() {
    sqlite3 -readonly "$DB" \
        "SELECT count(*), sum(id + length(message_id) + length(session_id) + length(role) + length(content_json) + created_timestamp + ifnull(length(metadata_json), 0)) FROM messages;
         SELECT count(*), sum(id + length(session_id) + created_timestamp + ifnull(length(model), 0) + input_tokens + output_tokens + total_tokens + cache_read_tokens + cache_write_tokens + cost + ifnull(length(cost_source), 0)) FROM usage_ledger;
         SELECT count(*), sum(length(id) + length(working_dir) + ifnull(length(model_config_json), 0) + ifnull(length(provider_name), 0) + ifnull(length(created_at), 0) + ifnull(accumulated_input_tokens, 0)) FROM sessions;"
}

# The totals, checked before any timing.
ours "$BIN" > "$WORK/ours.json"
python3 - "$WORK/count.json" "$WORK/ours.json" <<'EOF'
import json, sys
want = json.load(open(sys.argv[1]))["ours"]
got = json.load(open(sys.argv[2]))
for k in ("input", "output", "cache_read", "cache_write", "total_tokens"):
    assert got["usage"][k] == want["usage"][k], (k, got["usage"][k], want["usage"][k])
for r, n in want["records"].items():
    assert got["roles"][r] == n, (r, got["roles"][r], n)
print("ours: usage and records equal gen-db.py count's (input %d, records %d)" % (got["usage"]["input"], got["records"]))
EOF
if [ "$AGENT" = opencode ]; then
    theirs > "$WORK/theirs.json"
    python3 - "$WORK/count.json" "$WORK/theirs.json" "$WORK/ours.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
t = json.load(open(sys.argv[2]))["totals"]
o = json.load(open(sys.argv[3]))["usage"]
names = {"input": "inputTokens", "output": "outputTokens", "cache_read": "cacheReadTokens",
         "cache_write": "cacheCreationTokens", "total_tokens": "totalTokens"}
for k, n in names.items():
    assert t[n] == c["ccusage"][k], (k, t[n], c["ccusage"][k])
d = c["input_difference"]
assert o["input"] - t["inputTokens"] == d["later_calls"] + d["channel_only"] - d["fork_copies"]
print("ccusage: totals equal its rules' account; ours - ccusage input = %d = later calls %d + channel %d - fork copies %d"
      % (o["input"] - t["inputTokens"], d["later_calls"], d["channel_only"], d["fork_copies"]))
EOF
else
    bare > /dev/null
fi

declare -A T
names=(ours)
[ -n "${OLD:-}" ] && names+=(old)
if [ "$AGENT" = opencode ]; then names+=(ccusage); else names+=(bare); fi
secs() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
for i in $(seq "$ROUNDS"); do
    for n in "${names[@]}"; do
        case $n in
            ours) t=$(secs ours "$BIN") ;;
            old) t=$(secs ours "$OLD") ;;
            ccusage) t=$(secs theirs) ;;
            bare) t=$(secs bare) ;;
        esac
        T[$n]="${T[$n]:-} $t"
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "load: $(uptime)"
for n in "${names[@]}"; do
    m=$(echo "${T[$n]}" | median)
    printf '%-8s median %.3f s  (%s)  %.1f MB/s\n' "$n" "$m" "${T[$n]# }" "$(echo "$SIZE / 1000000 / $m" | bc -l)"
    eval "M_$n=$m"
done
if [ "$AGENT" = opencode ]; then
    printf 'ratio: ccusage / ours (stats --jobs 2) = %.2f (target >= 2.0)\n' "$(echo "$M_ccusage / $M_ours" | bc -l)"
else
    printf 'ratio: ours (stats --jobs 2) / bare sqlite3 scan = %.2f\n' "$(echo "$M_ours / $M_bare" | bc -l)"
fi
if [ -n "${OLD:-}" ]; then
    printf 'ratio: old / ours = %.2f\n' "$(echo "$M_old / $M_ours" | bc -l)"
fi
