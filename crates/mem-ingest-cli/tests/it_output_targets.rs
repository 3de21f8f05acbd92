//! What `-o` (and `--usage-out`) name when it is not a plain file: a
//! named pipe, a device such as `/dev/null`, a link. A run without a state
//! writes a plain file's replacement beside it and renames it into place;
//! renamed over a pipe or a device, that replaced the node itself (as root,
//! `backfill -o /dev/null` left `/dev/null` a regular file of records). A
//! node that is not a regular file is written in place instead, a link is
//! written through (the file it names is replaced, the link stays), and a
//! state, whose checkpoint counts the output's bytes, is refused one.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `backfill -q ARGS` of the fixture, run in `dir`.
fn backfill(dir: &Path, args: &[&dyn AsRef<OsStr>]) -> Output {
    common::cli()
        .current_dir(dir)
        .args(["backfill", "-q"])
        .args(args.iter().map(|a| a.as_ref()))
        .arg(fixture())
        .output()
        .unwrap()
}

/// `out`, which must have succeeded.
fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hand-built.jsonl")
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().unwrap();
    assert!(st.success(), "mkfifo {}", p.display());
}

/// Reads the pipe at `p` to its end on a thread of its own.
fn drain(p: &Path) -> std::thread::JoinHandle<String> {
    let p = p.to_path_buf();
    std::thread::spawn(move || {
        let mut s = String::new();
        fs::File::open(&p).unwrap().read_to_string(&mut s).unwrap();
        s
    })
}

/// The names in `d`, sorted.
fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// What the fixture gives on stdout, records and usage rows, for the
/// comparison.
fn expected(tag: &str) -> (String, String) {
    let d = common::tmpdir("targets", &format!("expected-{tag}"));
    ok(backfill(
        &d,
        &[&"-o", &"r.ndjson", &"--usage-out", &"u.ndjson"],
    ));
    let r = fs::read_to_string(d.join("r.ndjson")).unwrap();
    let u = fs::read_to_string(d.join("u.ndjson")).unwrap();
    fs::remove_dir_all(d).unwrap();
    (r, u)
}

#[test]
fn pipes_named_by_o_and_usage_out_are_written_in_place_and_stay_pipes() {
    let (want_r, want_u) = expected("fifo");
    assert_eq!(want_r.lines().count(), 22);
    assert_eq!(want_u.lines().count(), 8);
    let d = common::tmpdir("targets", "fifo");
    let (r, u) = (d.join("records"), d.join("usage"));
    mkfifo(&r);
    mkfifo(&u);
    let (rr, ur) = (drain(&r), drain(&u));
    ok(backfill(&d, &[&"-o", &r, &"--usage-out", &u]));
    // Checked before the readers are joined: a pipe renamed over leaves
    // them waiting for a writer that never comes (the test would hang).
    assert!(fs::symlink_metadata(&r).unwrap().file_type().is_fifo());
    assert!(fs::symlink_metadata(&u).unwrap().file_type().is_fifo());
    assert_eq!(rr.join().unwrap(), want_r);
    assert_eq!(ur.join().unwrap(), want_u);
    // No temporary file left beside them.
    assert_eq!(names(&d), ["records", "usage"]);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn dev_stdout_on_a_pipe_is_written_in_place() {
    // `/dev/stdout` is a link `readlink` reads as `pipe:[N]`: the kernel
    // follows it, a path built from it names nothing.
    let (want_r, _) = expected("stdout");
    let out = ok(backfill(Path::new("/"), &[&"-o", &"/dev/stdout"]));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want_r);
}

#[test]
fn a_link_named_by_o_stays_a_link_and_the_file_it_names_is_replaced() {
    let (want_r, _) = expected("link");
    let d = common::tmpdir("targets", "link");
    fs::create_dir(d.join("real")).unwrap();
    fs::write(d.join("real/out.ndjson"), "old\n").unwrap();
    std::os::unix::fs::symlink("real/out.ndjson", d.join("out.ndjson")).unwrap();
    ok(backfill(&d, &[&"-o", &"out.ndjson"]));
    assert!(fs::symlink_metadata(d.join("out.ndjson"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read_link(d.join("out.ndjson")).unwrap(),
        Path::new("real/out.ndjson")
    );
    assert_eq!(
        fs::read_to_string(d.join("real/out.ndjson")).unwrap(),
        want_r
    );
    assert_eq!(names(&d), ["out.ndjson", "real"]);
    assert_eq!(names(&d.join("real")), ["out.ndjson"]);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_state_is_refused_an_output_that_is_not_a_regular_file() {
    let d = common::tmpdir("targets", "state");
    let r = d.join("records");
    mkfifo(&r);
    let out = backfill(&d, &[&"--state", &"s.state", &"-o", &r]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {}: the output is a named pipe, not a regular file: a state counts the \
             bytes of the outputs it pairs with, which only a regular file keeps; give a file, \
             or leave out --state to write through it",
            r.display()
        )
    );
    assert!(fs::symlink_metadata(&r).unwrap().file_type().is_fifo());
    // No state saved; the state's lock, as every run leaves it (a lock
    // file removed could be taken by two runs at once).
    assert_eq!(names(&d), ["records", "s.state.lock"]);
    fs::remove_dir_all(d).unwrap();
}
