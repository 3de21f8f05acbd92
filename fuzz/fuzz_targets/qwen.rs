//! Arbitrary bytes as a whole Qwen Code chat file (see
//! `mem_ingest_fuzz::check_qwen`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_qwen(data);
});
