//! Replays fuzz inputs on the stable toolchain through the fuzz targets'
//! own checks (`fuzz/src/lib.rs`, included here).
//!
//! Every crash the fuzzer finds is minimised (`cargo fuzz tmin`), copied to
//! `fuzz/regressions/<target>/<name>` and gets a test below with a paragraph
//! on its root cause. `every_saved_input_replays` replays the whole folder,
//! so a saved input is never forgotten.

#[path = "../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod checks;

use std::fs;
use std::path::Path;

fn replay(target: &str, name: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target)
        .join(name);
    let data = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match target {
        "line" => checks::check_line(&data),
        "reader" => checks::check_reader(&data),
        other => panic!("no fuzz target {other}"),
    }
}

/// `line`, found in the first 20 s: the two bytes `E4 5C` (an invalid UTF-8
/// byte, then a backslash that ends the line) panic with "range start index
/// 5 out of range for slice of length 4" (the fuzzer's input: index 12 of
/// 11).
///
/// Root cause: simd-json rejects the line as invalid UTF-8, so
/// `pi::parse_into` calls `pi::repair` (src/pi.rs). After replacing invalid
/// UTF-8, `repair` scans for lone surrogate escapes with
/// `memchr(b'\\', &out[i..])` and skips an escaped character with
/// `i = at + 2`. When the backslash is the last byte there is no escaped
/// character, `i` is `out.len() + 1`, and `&out[i..]` panics. Any line that
/// needs repair (invalid UTF-8 or a lone surrogate escape) and ends with a
/// backslash kills the reader: pi keeps both kinds of line, and a line cut by
/// a crash can end anywhere. Fix: in the loop condition, take
/// `out.get(i..).unwrap_or_default()` instead of `&out[i..]` (or clamp,
/// `i = (at + 2).min(out.len())`).
///
/// Fixed in 10cbe9a ("Fix pi::repair panic on a repaired line ending in a
/// backslash"), exactly so.
#[test]
fn repair_trailing_backslash() {
    replay("line", "repair-trailing-backslash");
    // The same line in a whole file, read in pieces.
    let file = [checks::HEADER, b"\n\xE4\\"].concat();
    checks::check_reader(&checks::ReaderCase::encode(3, &[0], &file));
}

#[test]
fn every_saved_input_replays() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    for target in ["line", "reader"] {
        let Ok(dir) = fs::read_dir(root.join(target)) else {
            continue;
        };
        for entry in dir {
            let name = entry.unwrap().file_name();
            let name = name.to_str().expect("ASCII names");
            if !name.starts_with('.') {
                replay(target, name);
            }
        }
    }
}

/// The fixtures pass both checks: the line check for every line, the reader
/// check for every file with a few capacities and read plans (the checks
/// themselves are sound on known-good input).
#[test]
fn fixtures_pass_the_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files = Vec::new();
    for dir in [root.clone(), root.join("bad"), root.join("no-header")] {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 10, "fixtures missing: {files:?}");
    for path in &files {
        let file = fs::read(path).unwrap();
        for line in file.split(|b| *b == b'\n') {
            checks::check_line(line);
        }
        for (cap, plan) in [
            (1, &[][..]),
            (7, &[2, 0xFF, 10][..]),
            (64, &[0xFF][..]),
            (4096, &[][..]),
        ] {
            checks::check_reader(&checks::ReaderCase::encode(cap, plan, &file));
        }
    }
}

/// The reader's input decoding round-trips, and short inputs decode.
#[test]
fn reader_case_decoding() {
    let data = checks::ReaderCase::encode(4096, &[1, 2, 3], b"file");
    let case = checks::ReaderCase::decode(&data);
    assert_eq!(
        (case.capacity, case.plan, case.file),
        (4096, &[1, 2, 3][..], &b"file"[..])
    );
    for short in [&[][..], &[5][..], &[5, 0][..], &[5, 0, 9][..]] {
        let case = checks::ReaderCase::decode(short);
        assert!(case.plan.is_empty() && case.file.is_empty());
    }
}
