//! Arbitrary bytes as a whole Gemini CLI legacy session, one version or two
//! (see `mem_ingest_fuzz::check_gemini_legacy`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_gemini_legacy(data);
});
