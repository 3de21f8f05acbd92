#!/usr/bin/env bash
# Fills fuzz/corpus/line/ and fuzz/corpus/reader/ from the fixtures.
#   line:   every distinct line of fixtures/*.jsonl and fixtures/bad/*.jsonl
#           (without its \n, cut to 8 KiB).
#   reader: every fixture file (large ones as their first 12 lines, cut to
#           12 KiB, plus their last 3 lines, cut to 4 KiB), each behind a few
#           reader prefixes: 2 bytes of buffer capacity (little-endian, 1 + n
#           % 4096), 1 byte of plan length, the plan (see fuzz/src/lib.rs).
# Files are named by their SHA-1, so running it again adds nothing twice.
# Usage: fuzz/seed.sh   (from anywhere)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
line_dir=$here/corpus/line
reader_dir=$here/corpus/reader
mkdir -p "$line_dir" "$reader_dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Writes stdin to $1/<sha1 of the content>.
save() {
    local f
    f=$tmp/piece
    cat >"$f"
    cp "$f" "$1/$(sha1sum <"$f" | cut -c1-40)"
}

shopt -s nullglob
fixtures=("$root"/fixtures/*.jsonl "$root"/fixtures/bad/*.jsonl)
if [ ${#fixtures[@]} -eq 0 ]; then
    echo "seed.sh: no fixtures under $root/fixtures" >&2
    exit 1
fi

# Reader prefixes: capacity 1 one byte at a time; 7 with short reads and an
# interruption; 64 interrupted before every read; 4096 whole reads.
prefixes=('\000\000\001\000' '\006\000\003\002\377\012' '\077\000\001\377' '\377\017\000')

for f in "${fixtures[@]}"; do
    # Lines: split keeps each line's \n; tr drops it (a line holds no other).
    mkdir "$tmp/split"
    split -l 1 -a 6 "$f" "$tmp/split/l"
    for l in "$tmp"/split/l*; do
        head -c 8192 "$l" | tr -d '\n' | save "$line_dir"
    done
    rm -rf "$tmp/split"

    if [ "$(wc -c <"$f")" -le 16384 ]; then
        cp "$f" "$tmp/file"
    else
        { head -n 12 "$f" | head -c 12288; tail -n 3 "$f" | tail -c 4096; } >"$tmp/file"
    fi
    for p in "${prefixes[@]}"; do
        { printf "$p"; cat "$tmp/file"; } | save "$reader_dir"
    done
done

echo "seed.sh: $(ls "$line_dir" | wc -l) inputs in $line_dir, $(ls "$reader_dir" | wc -l) in $reader_dir"
