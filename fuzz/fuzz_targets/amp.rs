//! Arbitrary bytes as a whole Amp thread, one version or two
//! (see `mem_ingest_fuzz::check_amp`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_amp(data);
});
