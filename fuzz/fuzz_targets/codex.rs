//! Arbitrary bytes as a whole Codex rollout (see
//! `mem_ingest_fuzz::check_codex`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_codex(data);
});
