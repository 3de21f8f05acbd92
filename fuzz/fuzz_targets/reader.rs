//! Arbitrary bytes as a whole file, read with an arbitrary buffer capacity
//! through a reader that returns arbitrary short reads (the first bytes of
//! the input choose both; see `mem_ingest_fuzz::ReaderCase`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if !mem_ingest_fuzz::hits_known_bug(data) {
        mem_ingest_fuzz::check_reader(data);
    }
});
