//! Arbitrary bytes as a whole Copilot CLI session log (see
//! `mem_ingest_fuzz::check_copilot`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_copilot(data);
});
