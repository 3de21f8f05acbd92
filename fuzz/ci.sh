#!/usr/bin/env bash
# Runs each fuzz target for a bounded time, for CI (called by .ci/run).
#
# With a nightly toolchain: installs cargo-fuzz if it is missing, seeds the
# corpus from the fixtures (fuzz/seed.sh), then runs `line`, `reader`,
# `claude`, `codex`, `qwen`, `copilot`, `cursor_cli`, `redact`, `gemini`, `amp`, `cline` and
# `gemini_legacy` for FUZZ_SECONDS each (default 60), and the database
# targets `opencode`, `goose`, `goose_legacy` and `cursor` for FUZZ_DB_SECONDS each (default
# 20: each input builds a database and reads it three times through the
# engine, so they take about a minute of CI together). Exits non-zero when a target crashes
# (its input is then under fuzz/artifacts/<target>/; see fuzz/README.md to
# turn it into a regression test). Without a nightly toolchain it says so
# and exits 0: the saved inputs still replay in `cargo test`
# (tests/fuzz_regressions.rs).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
seconds=${FUZZ_SECONDS:-60}
db_seconds=${FUZZ_DB_SECONDS:-20}
targets=(line reader claude codex qwen copilot cursor_cli redact gemini amp cline gemini_legacy opencode goose goose_legacy cursor)

say() { echo "fuzz/ci.sh: $*"; }

if ! command -v rustup >/dev/null 2>&1 || ! rustup run nightly rustc --version >/dev/null 2>&1; then
    say "no nightly toolchain; skipping the fuzz runs (install one with: rustup toolchain install nightly)"
    exit 0
fi
say "nightly: $(rustup run nightly rustc --version)"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz"
    cargo install cargo-fuzz --locked || { say "cargo install cargo-fuzz failed"; exit 1; }
fi
say "$(cargo +nightly fuzz --version)"

"$here/seed.sh" || { say "seeding failed"; exit 1; }

cd "$root" || exit 1
say "building the targets"
cargo +nightly fuzz build || { say "build failed"; exit 1; }

# A detached thread's thread-local destructor node is not a leak (see
# fuzz/lsan.supp).
export LSAN_OPTIONS="suppressions=$here/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

failed=()
for t in "${targets[@]}"; do
    log=$(mktemp)
    # A target's own dictionary when it has one (fuzz/<target>.dict).
    dict=$here/$t.dict
    [ -f "$dict" ] || dict=$here/pi.dict
    s=$seconds
    case $t in opencode | goose | goose_legacy | cursor) s=$db_seconds ;; esac
    say "running $t for ${s}s"
    cargo +nightly fuzz run "$t" -- \
        -max_total_time="$s" -timeout=30 -dict="$dict" -print_final_stats=1 \
        >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        # "Done N runs in S second(s)" is libFuzzer's last word on a clean run.
        say "$t: clean: $(grep -E '^Done [0-9]+ runs' "$log" | tail -n 1)"
    else
        say "$t: FAILED (exit $rc); the end of its log:"
        tail -n 60 "$log"
        ls -l "$here/artifacts/$t" 2>/dev/null
        failed+=("$t")
    fi
    rm -f "$log"
done

if [ ${#failed[@]} -gt 0 ]; then
    say "crashed: ${failed[*]} (see fuzz/README.md: minimise, then add to crates/mem-ingest-parse/tests/fuzz_regressions.rs, or crates/mem-ingest-db/tests/fuzz_db.rs for opencode, goose and cursor)"
    exit 1
fi
say "all targets clean"
