//! The files a run creates hold what the sessions said: they are created
//! readable by their owner alone (or as `--file-mode` says), whatever the
//! umask the run starts with; an output that exists keeps its mode.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mem-ingest-modes-{}-{tag}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hand-built.jsonl")
}

/// `mem-ingest ARGS` in `dir`, started with `umask`.
fn run_with_umask(dir: &Path, umask: &str, args: &[&str]) -> Output {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(common::bin())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every path under `dir` (itself left out) with its permission bits,
/// sorted.
fn modes(dir: &Path) -> Vec<(String, u32)> {
    let mut all = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            let name = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            // A dataset part's name holds the run's id: its folder says it.
            let name = match name.rsplit_once("/part-") {
                Some((folder, _)) => format!("{folder}/part"),
                None => name,
            };
            all.push((name, m.permissions().mode() & 0o777));
            if m.is_dir() {
                todo.push(p);
            }
        }
    }
    all.sort();
    all
}

fn every_sink(dir: &Path, umask: &str, extra: &[&str]) {
    let f = fixture();
    let f = f.to_str().unwrap();
    fn with<'a>(args: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [args, extra].concat()
    }
    run_with_umask(
        dir,
        umask,
        &with(
            &["backfill", "-q", "-o", "out.ndjson", "--state", "st", f],
            extra,
        ),
    );
    run_with_umask(
        dir,
        umask,
        &with(&["backfill", "-q", "--db", "s.db", f], extra),
    );
    // A backfill's last connection removes the WAL and shared-memory
    // files; a reader makes them again, with the store's own mode, as
    // SQLite does whatever the umask.
    run_with_umask(dir, "000", &["search", "--db", "s.db", "hello"]);
    run_with_umask(
        dir,
        umask,
        &with(&["backfill", "-q", "--parquet", "ds", f], extra),
    );
    run_with_umask(
        dir,
        umask,
        &with(&["stats", "-q", "--state", "stats.st", f], extra),
    );
}

/// The layout every_sink leaves, each path with the mode `file` or, for a
/// folder, `folder`.
fn expected(file: u32, folder: u32) -> Vec<(String, u32)> {
    let mut want: Vec<(String, u32)> = [
        ("ds", folder),
        ("ds/records", folder),
        ("ds/records/format=pi", folder),
        ("ds/records/format=pi/date=2026-01-15", folder),
        ("ds/records/format=pi/date=2026-01-15/part", file),
        ("ds/usage", folder),
        ("ds/usage/format=pi", folder),
        ("ds/usage/format=pi/date=2026-01-15", folder),
        ("ds/usage/format=pi/date=2026-01-15/part", file),
        ("out.ndjson", file),
        ("s.db", file),
        ("s.db-shm", file),
        ("s.db-wal", file),
        ("s.db.lock", file),
        ("st", file),
        ("st.lock", file),
        ("stats.st", file),
        ("stats.st.lock", file),
    ]
    .into_iter()
    .map(|(n, m)| (n.to_owned(), m))
    .collect();
    want.sort();
    want
}

#[test]
fn what_a_run_creates_is_its_owners_alone_whatever_the_umask() {
    for umask in ["022", "000"] {
        let d = tmpdir(&format!("owner-{umask}"));
        every_sink(&d, umask, &[]);
        assert_eq!(modes(&d), expected(0o600, 0o700), "umask {umask}");
        fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn file_mode_shares_with_the_group_whatever_the_umask() {
    for umask in ["022", "077"] {
        let d = tmpdir(&format!("group-{umask}"));
        every_sink(&d, umask, &["--file-mode", "0640"]);
        assert_eq!(modes(&d), expected(0o640, 0o750), "umask {umask}");
        fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn an_output_that_exists_keeps_its_mode() {
    let d = tmpdir("keeps");
    let f = fixture();
    let f = f.to_str().unwrap();
    for (name, mode) in [("plain.ndjson", 0o644), ("kept.ndjson", 0o604)] {
        let out = d.join(name);
        fs::write(&out, "old\n").unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(mode)).unwrap();
        // Without a state: written beside it, then renamed over it.
        run_with_umask(&d, "077", &["backfill", "-q", "-o", name, f]);
        assert_eq!(
            fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            mode
        );
        let text = fs::read_to_string(&out).unwrap();
        assert_eq!(text.lines().count(), 22);
        assert!(!text.starts_with("old"));
    }
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_mode_that_is_not_one_is_refused() {
    let d = tmpdir("refused");
    for (mode, says) in [
        (
            "0755",
            "0755: files that hold records get no execute bits (0600, 0640, 0644)",
        ),
        (
            "0440",
            "0440: the owner must read and write the files a run reopens (0600, 0640, 0644)",
        ),
        (
            "rw-------",
            "\"rw-------\" is not an octal mode (0600, 0640, 0644)",
        ),
        ("01600", "\"01600\" is not an octal mode (0600, 0640, 0644)"),
    ] {
        let out = Command::new(common::bin())
            .args(["backfill", "-q", "--file-mode", mode, "-o"])
            .arg(d.join("out.ndjson"))
            .arg(fixture())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{mode}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{mode}: {err}");
        assert!(!d.join("out.ndjson").exists());
    }
    fs::remove_dir_all(d).unwrap();
}
