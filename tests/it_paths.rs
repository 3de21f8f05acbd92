//! Paths as the file system has them: names that are not UTF-8 stay
//! distinct files, in the checkpoint (state and store) and in every
//! output's `file` field, spelled reversibly (`\xHH` for each byte that is
//! not UTF-8, a literal backslash doubled).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::{run, tmpdir, user_line};

/// A pi session of `n` user lines, id `id`.
fn session(path: &Path, id: &str, n: usize) {
    let mut s = format!(
        r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-15T10:00:00.000Z","cwd":"/tmp/p"}}"#
    ) + "\n";
    for i in 0..n {
        s += &user_line(&format!("{id}-{i}"), &format!("line {i} of {id}"));
    }
    fs::write(path, s).unwrap();
}

/// Two sessions whose names differ in a byte that is not UTF-8.
fn archive(d: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    let ff = arch.join(OsStr::from_bytes(b"bad\xff.jsonl"));
    let fe = arch.join(OsStr::from_bytes(b"bad\xfe.jsonl"));
    session(&ff, "sess-ff", 2);
    session(&fe, "sess-fe", 2);
    (arch, ff, fe)
}

fn records(ndjson: &[u8]) -> Vec<Value> {
    ndjson
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// `(file, key)` of every record, sorted.
fn files_and_keys(recs: &[Value]) -> Vec<(String, String)> {
    let mut v: Vec<_> = recs
        .iter()
        .map(|r| {
            (
                r["file"].as_str().unwrap().to_owned(),
                r["key"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn names_that_are_not_utf8_stay_two_files_across_runs() {
    let d = tmpdir("paths", "not-utf8");
    let (arch, _, _) = archive(&d);
    let (state, out) = (d.join("st"), d.join("out.ndjson"));
    let a = arch.display().to_string();
    let want: Vec<(String, String)> = ["fe", "ff"]
        .iter()
        .flat_map(|b| {
            let a = a.clone();
            (0..2).map(move |i| {
                (
                    format!("{a}/bad\\x{b}.jsonl"),
                    format!("sess-{b}:sess-{b}-{i}"),
                )
            })
        })
        .collect();
    for round in 1..=3 {
        let o = run(&[
            &"backfill",
            &"--no-dedupe",
            &"--state",
            &state,
            &"-o",
            &out,
            &arch,
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "round {round}: {err}");
        let recs = records(&fs::read(&out).unwrap());
        assert_eq!(recs.len(), 4, "round {round}: {err}");
        assert!(
            !err.contains("shrank or was replaced"),
            "round {round}: {err}"
        );
    }
    let recs = records(&fs::read(&out).unwrap());
    assert_eq!(files_and_keys(&recs), want);
    // The store: the same rows, once, and the same spelling.
    let db = d.join("m.db");
    for round in 1..=3 {
        let o = run(&[&"backfill", &"-q", &"--no-dedupe", &"--db", &db, &arch]);
        assert!(
            o.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut st = c
            .prepare("SELECT file, key FROM records ORDER BY file, key")
            .unwrap();
        let rows: Vec<(String, String)> = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(rows, want, "round {round}");
    }
    fs::remove_dir_all(d).unwrap();
}
