//! Arbitrary bytes as the rows of a database of the cursor reader, one
//! version or two, read through the engine with a checkpoint (see
//! `fuzz/src/db.rs`, `check_cursor`).
#![no_main]

#[path = "../src/db.rs"]
#[allow(dead_code)]
mod db;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    db::check_cursor(data);
});
