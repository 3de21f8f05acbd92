//! Arbitrary bytes as a whole Claude Code transcript (see
//! `mem_ingest_fuzz::check_claude`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_claude(data);
});
