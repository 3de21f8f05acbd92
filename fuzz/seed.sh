#!/usr/bin/env bash
# Fills fuzz/corpus/line/, reader/, claude/ and codex/ from the fixtures
# and the samples beside the project.
#   line:   every distinct line of fixtures/*.jsonl, fixtures/bad/*.jsonl and fixtures/no-header/*.jsonl
#           (without its \n, cut to 8 KiB).
#   reader: every fixture file (large ones as their first 12 lines, cut to
#           12 KiB, plus their last 3 lines, cut to 4 KiB), each behind a few
#           reader prefixes: 2 bytes of buffer capacity (little-endian, 1 + n
#           % 4096), 1 byte of plan length, the plan (see fuzz/src/lib.rs).
# Files are named by their SHA-1, so running it again adds nothing twice.
# Usage: fuzz/seed.sh [CORPUS_DIR]   (from anywhere; default fuzz/corpus)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
corpus=${1:-$here/corpus}
line_dir=$corpus/line
reader_dir=$corpus/reader
mkdir -p "$line_dir" "$reader_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

shopt -s nullglob
fixtures=("$root"/fixtures/*.jsonl "$root"/fixtures/bad/*.jsonl "$root"/fixtures/no-header/*.jsonl)
if [ ${#fixtures[@]} -eq 0 ]; then
    echo "seed.sh: no fixtures under $root/fixtures" >&2
    exit 1
fi

# Reader prefixes: capacity 1 one byte at a time; 7 with short reads and an
# interruption; 64 interrupted before every read; 4096 whole reads.
prefixes=('\000\000\001\000' '\006\000\003\002\377\012' '\077\000\001\377' '\377\017\000')

# Moves every file of directory $1 to $2/<sha1 of its content>.
by_sha1() {
    (cd "$1" && sha1sum -- *) | while read -r sum name; do
        mv "$1/$name" "$2/$sum"
    done
}

# Lines: the distinct lines of all fixtures, one file each (split keeps
# each line's \n; tr drops it, a line holds no other).
mkdir "$tmp/split" "$tmp/lines" "$tmp/files"
for f in "${fixtures[@]}"; do
    cat "$f"
    echo
done | LC_ALL=C sort -u >"$tmp/all"
split -l 1 -a 6 "$tmp/all" "$tmp/split/l"
for l in "$tmp"/split/l*; do
    head -c 8192 "$l" | tr -d '\n' >"$tmp/lines/${l##*/}"
done
by_sha1 "$tmp/lines" "$line_dir"

# Files, behind each reader prefix.
i=0
for f in "${fixtures[@]}"; do
    if [ "$(wc -c <"$f")" -le 16384 ]; then
        cp "$f" "$tmp/file"
    else
        # (through files: `head | head` would die of SIGPIPE under pipefail)
        head -n 12 "$f" >"$tmp/head"
        tail -n 3 "$f" >"$tmp/tail"
        { head -c 12288 "$tmp/head"; tail -c 4096 "$tmp/tail"; } >"$tmp/file"
    fi
    for p in "${prefixes[@]}"; do
        i=$((i + 1))
        { printf "$p"; cat "$tmp/file"; } >"$tmp/files/$i"
    done
done
by_sha1 "$tmp/files" "$reader_dir"

# Claude Code transcripts: every sample beside the project (../shared), each
# as its first 12 lines cut to 12 KiB.
claude_dir=$corpus/claude
mkdir -p "$claude_dir" "$tmp/claude"
samples=$(cd "$root/.." && pwd)/shared/samples
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/claude/$i"
    done < <(find "$samples/claude-code" "$samples/claude-code-log-messages/claude-code" -name '*.jsonl' -print0 2>/dev/null)
fi
# And a few hand-made lines, so the corpus is never empty.
printf '%s\n' '{"type":"user","uuid":"u1","sessionId":"s","cwd":"/p","timestamp":"2025-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}' \
    '{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","requestId":"r","message":{"id":"m","role":"assistant","model":"claude","content":[{"type":"text","text":"yo"}],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":2}}}' \
    >"$tmp/claude/hand"
if [ -n "$(ls "$tmp/claude")" ]; then by_sha1 "$tmp/claude" "$claude_dir"; fi

# Codex rollouts: every sample beside the project, each as its first 12
# lines cut to 12 KiB, and a hand-made rollout of the shapes that carry a
# running context (a model, cumulative totals, twins).
codex_dir=$corpus/codex
mkdir -p "$codex_dir" "$tmp/codex"
i=0
if [ -d "$samples" ]; then
    while IFS= read -r -d '' f; do
        i=$((i + 1))
        head -n 12 "$f" >"$tmp/head"
        head -c 12288 "$tmp/head" >"$tmp/codex/$i"
    done < <(find "$samples/codex" "$samples/claude-code-log-messages/codex" -name '*.jsonl' -print0 2>/dev/null)
fi
printf '%s\n' '{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","cwd":"/a","forked_from_id":"t0"}}' \
    '{"timestamp":"2026-01-01T00:00:01.000Z","type":"turn_context","payload":{"cwd":"/a","model":"gpt-5"}}' \
    '{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}' \
    '{"timestamp":"2026-01-01T00:00:02.500Z","type":"event_msg","payload":{"type":"user_message","message":"hi"}}' \
    '{"timestamp":"2026-01-01T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"reasoning_output_tokens":1,"total_tokens":13}}}}' \
    '{"timestamp":"2026-01-01T00:00:04.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":30,"cached_input_tokens":4,"output_tokens":9,"reasoning_output_tokens":1,"total_tokens":39},"last_token_usage":{"input_tokens":20,"cached_input_tokens":0,"output_tokens":6,"reasoning_output_tokens":0,"total_tokens":26}}}}' \
    >"$tmp/codex/hand"
by_sha1 "$tmp/codex" "$codex_dir"

echo "seed.sh: $(ls "$line_dir" | wc -l) inputs in $line_dir, $(ls "$reader_dir" | wc -l) in $reader_dir, $(ls "$claude_dir" | wc -l) in $claude_dir, $(ls "$codex_dir" | wc -l) in $codex_dir"
