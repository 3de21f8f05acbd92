//! Arbitrary bytes as a record's text, redacted: never a panic, never a
//! broken output line (`mem_ingest_fuzz::check_redact`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_redact(data);
});
