//! Arbitrary bytes as a Goose legacy session file (`sessions/<id>.jsonl`,
//! before 1.10), one version or two (the second renamed over the first),
//! read through the engine with a checkpoint (see `fuzz/src/db.rs`,
//! `check_goose_legacy`).
#![no_main]

#[path = "../src/db.rs"]
#[allow(dead_code)]
mod db;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    db::check_goose_legacy(data);
});
