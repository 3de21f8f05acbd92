#!/usr/bin/env bash
# Documents a test suite cannot hold (issue 45): an agent's session
# document of 300 MB (over the 256 MiB a document may be: a counted
# failure naming it, the other files read, exit 1) and one of BIG_MB
# (default 200: under the limit, read whole, its long message's record
# whole), each beside an ordinary document, read by `backfill`. Prints the
# outcome and the peak memory of each run (GNU time).
#
#   scripts/hostile-documents.sh amp|cline|gemini [BIG_MB]
#
# Environment: CARGO_TARGET_DIR (default target), BIN (a mem-ingest binary;
# none built then), WORK (default a temp dir, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=${1:?usage: hostile-documents.sh amp|cline|gemini [BIG_MB]}
BIG_MB=${2:-200}
TARGET=${CARGO_TARGET_DIR:-target}
if [ -z "${BIN:-}" ]; then
    cargo build --release --bin mem-ingest
    BIN=$TARGET/release/mem-ingest
fi
WORK=${WORK:-$(mktemp -d)}
trap 'rm -rf "$WORK"' EXIT
export HOME=$WORK/none XDG_CONFIG_HOME=$WORK/none XDG_DATA_HOME=$WORK/none
mkdir -p "$HOME"
unset AMP_DATA_DIR CLINE_DIR CLINE_DATA_DIR CLINE_SESSION_DATA_DIR GEMINI_CLI_HOME GEMINI_DATA_DIR

# doc FILE ID MB: a document of the agent with a user message, and an
# assistant message whose text is MB megabytes of `x`.
doc() {
    local file=$1 id=$2 mb=$3
    mkdir -p "$(dirname "$file")"
    {
        case $AGENT in
        amp) printf '{"id":"%s","created":1767865803494,"messages":[{"role":"user","messageId":0,"content":[{"type":"text","text":"go"}]},{"role":"assistant","messageId":1,"content":[{"type":"text","text":"' "$id" ;;
        cline) printf '{"version":1,"agent":"lead","sessionId":"%s","messages":[{"id":"m0","role":"user","content":[{"type":"text","text":"go"}]},{"id":"m1","role":"assistant","content":[{"type":"text","text":"' "$id" ;;
        gemini) printf '{"sessionId":"%s","projectHash":"h","startTime":"2026-06-05T04:59:00.000Z","messages":[{"id":"u0","type":"user","content":[{"text":"go"}]},{"id":"g1","type":"gemini","content":"' "$id" ;;
        esac
        head -c $((mb * 1000000)) /dev/zero | tr '\0' 'x'
        case $AGENT in
        amp | cline) printf '"}]}]}' ;;
        gemini) printf '"}]}' ;;
        esac
    } > "$file"
}
case $AGENT in
amp) D=$WORK/amp/threads; export AMP_DATA_DIR=$WORK/amp; SMALL=$D/T-small.json; HUGE=$D/T-huge.json; BIG=$D/T-big.json ;;
cline) D=$WORK/cline/data/sessions; export CLINE_DATA_DIR=$WORK/cline/data; SMALL=$D/small/small.messages.json; HUGE=$D/huge/huge.messages.json; BIG=$D/big/big.messages.json ;;
gemini) D=$WORK/gemini/.gemini/tmp/p/chats; export GEMINI_CLI_HOME=$WORK/gemini; SMALL=$D/session-small.json; HUGE=$D/session-huge.json; BIG=$D/session-big.json ;;
*) echo "hostile-documents.sh: amp, cline or gemini, not $AGENT" >&2; exit 2 ;;
esac

run() {
    local what=$1 code=0
    /usr/bin/time -v "$BIN" backfill --agent "$AGENT" > "$WORK/out.ndjson" 2> "$WORK/err" || code=$?
    local peak
    peak=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/err")
    grep -v '^\s' "$WORK/err" | grep -v 'Command being timed' | head -4
    echo "$what: exit $code, $(wc -l < "$WORK/out.ndjson") records, peak RSS $((peak / 1024)) MB"
    LAST_CODE=$code
}

doc "$SMALL" small 0
doc "$HUGE" huge 300
run "a 300 MB document beside a small one"
[ "$LAST_CODE" = 1 ] || { echo "expected exit 1 (a failed file)"; exit 1; }
grep -q "larger than the 256 MiB a document may be" "$WORK/err" || { echo "no failure naming the limit"; exit 1; }
grep -q "$(basename "$HUGE")" "$WORK/err" || { echo "the failure does not name the file"; exit 1; }
[ "$(wc -l < "$WORK/out.ndjson")" = 2 ] || { echo "the small document's two records were not written"; exit 1; }
rm -f "$HUGE"
doc "$BIG" big "$BIG_MB"
run "a $BIG_MB MB document beside a small one"
[ "$LAST_CODE" = 0 ] || { echo "expected exit 0"; exit 1; }
python3 - "$WORK/out.ndjson" "$BIG_MB" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
long = [r for r in recs if len(r["text"]) == int(sys.argv[2]) * 1000000]
assert len(recs) == 4 and len(long) == 1, (len(recs), [len(r["text"]) for r in recs])
print(f"4 records, the long message's text whole ({len(long[0]['text']):,} bytes)")
EOF
echo "hostile-documents.sh $AGENT: ok"
