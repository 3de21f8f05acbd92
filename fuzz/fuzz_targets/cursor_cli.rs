//! Arbitrary bytes as a whole Cursor CLI transcript, JSONL and `.txt`
//! (see `mem_ingest_fuzz::check_cursor_cli`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mem_ingest_fuzz::check_cursor_cli(data);
});
