//! Arbitrary bytes as one line of a session, after a fixed valid header.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if !mem_ingest_fuzz::hits_known_bug(data) {
        mem_ingest_fuzz::check_line(data);
    }
});
