//! Arbitrary bytes as a whole Gemini CLI chat file (see
//! `mem_ingest_fuzz::check_gemini`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_gemini(data);
});
