//! Arbitrary bytes as a whole Cline transcript (SDK and legacy), one version or two
//! (see `mem_ingest_fuzz::check_cline`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_cline(data);
});
