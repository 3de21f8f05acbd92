//! Hostile input: files that change while they are read, damage inside
//! lines, and files the command line cannot read. Each case has an exact
//! expected outcome.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use mem_ingest::{
    MmapSessionSource, OwnedRecord, PiSessionSource, RecordSource, Report, Role, SkipReason,
    SourceOptions,
};

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mem-ingest-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn drain(mut src: impl RecordSource) -> (Vec<OwnedRecord>, Report) {
    let mut v = Vec::new();
    while let Some(r) = src.next_record().unwrap() {
        v.push(r.to_owned_record());
    }
    (v, src.report().clone())
}

fn read(bytes: &[u8]) -> (Vec<OwnedRecord>, Report) {
    drain(PiSessionSource::from_reader(bytes, "t.jsonl").unwrap())
}

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/my-project"}"#;

fn user(id: &str, text: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1767225601000}}}}"#
    )
}

#[test]
fn file_growing_while_read_gives_a_prefix_and_at_most_one_partial_line() {
    let d = tmpdir("grow");
    let path = d.join("live.jsonl");
    std::fs::write(&path, format!("{HEADER}\n")).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, done) = (path.clone(), done.clone());
        std::thread::spawn(move || {
            let mut f = OpenOptions::new().append(true).open(&path).unwrap();
            for i in 0..3000 {
                let line = format!("{}\n", user(&format!("{i:08x}"), &"x".repeat(i % 300)));
                // Whole lines, and lines written in two halves.
                if i % 3 == 0 {
                    let (a, b) = line.split_at(line.len() / 2);
                    f.write_all(a.as_bytes()).unwrap();
                    f.flush().unwrap();
                    std::thread::yield_now();
                    f.write_all(b.as_bytes()).unwrap();
                } else {
                    f.write_all(line.as_bytes()).unwrap();
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let mut runs = 0;
    loop {
        let finished = done.load(Ordering::SeqCst);
        let opts = SourceOptions::new().buffer_capacity(512);
        let (recs, report) = drain(PiSessionSource::open_with(&path, &opts).unwrap());
        // What was read is exactly the first records of the file, in order.
        for (i, r) in recs.iter().enumerate() {
            assert_eq!(r.id.as_deref(), Some(format!("{i:08x}").as_str()));
            assert_eq!(r.text, "x".repeat(i % 300));
            assert_eq!(r.line, i as u64 + 2);
        }
        // Only the last line can be partial; nothing else is lost.
        assert!(report.skipped <= 1, "{:?}", report.skips);
        if let Some(s) = report.skips.first() {
            assert_eq!(s.line, recs.len() as u64 + 2);
            assert!(
                matches!(s.reason, SkipReason::Truncated(_)),
                "{:?}",
                s.reason
            );
        }
        assert_eq!(
            report.records + report.no_record + report.skipped,
            report.lines
        );
        runs += 1;
        if finished {
            assert_eq!(recs.len(), 3000);
            assert_eq!(report.skipped, 0);
            break;
        }
    }
    writer.join().unwrap();
    assert!(runs >= 1);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn file_truncated_while_read_ends_early_without_a_crash() {
    let d = tmpdir("trunc");
    let path = d.join("t.jsonl");
    let mut body = format!("{HEADER}\n");
    for i in 0..2000 {
        body.push_str(&user(&format!("{i:08x}"), &"y".repeat(200)));
        body.push('\n');
    }
    std::fs::write(&path, &body).unwrap();
    let opts = SourceOptions::new().buffer_capacity(4096);
    let mut src = PiSessionSource::open_with(&path, &opts).unwrap();
    let mut seen = Vec::new();
    for _ in 0..10 {
        seen.push(src.next_record().unwrap().unwrap().to_owned_record());
    }
    // The writer truncates the file to 50 bytes into line 102 (a live session
    // rewritten, or a full disk).
    let cut = body.match_indices('\n').nth(100).unwrap().0 + 50;
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    while let Some(r) = src.next_record().unwrap() {
        seen.push(r.to_owned_record());
    }
    let report = src.report().clone();
    // The chunked reader goes on from where it was to the new end: the 100
    // whole messages left (lines 2 to 101), then the partial line 102,
    // skipped.
    assert_eq!(seen.len(), 100);
    for (i, r) in seen.iter().enumerate() {
        assert_eq!(r.id.as_deref(), Some(format!("{i:08x}").as_str()));
    }
    assert_eq!(report.skipped, 1);
    assert_eq!(report.skips[0].line, 102);
    assert_eq!(
        report.records + report.no_record + report.skipped,
        report.lines
    );
    // A new read sees the same.
    let (recs, report) = drain(PiSessionSource::open(&path).unwrap());
    assert_eq!(recs, seen);
    assert_eq!(report.skipped, 1);
    assert_eq!(report.skips[0].line, 102);
    // The mapping source agrees on the truncated file.
    let (mrecs, mreport) = // SAFETY: a temporary file of this test, not written while mapped.
    drain(unsafe { MmapSessionSource::open(&path, &SourceOptions::new()) }.unwrap());
    assert_eq!((mrecs, mreport), (recs, report));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn nul_runs_in_the_middle_and_at_the_end() {
    let mut f = format!("{HEADER}\n{}\n", user("a1", "one"));
    f.push_str(&"\0".repeat(40));
    f.push('\n');
    f.push_str(&format!("{}\n", user("a2", "two")));
    f.push_str("{\"type\":\"message\",\0\0\0\"id\":\"a3\"}\n");
    f.push_str(&"\0".repeat(4096));
    let (recs, report) = read(f.as_bytes());
    assert_eq!(
        recs.iter().map(|r| r.text.as_str()).collect::<Vec<_>>(),
        ["one", "two"]
    );
    let skips: Vec<(u64, SkipReason)> = report
        .skips
        .iter()
        .map(|s| (s.line, s.reason.clone()))
        .collect();
    assert_eq!(
        skips,
        vec![
            (3, SkipReason::Nul),
            (5, SkipReason::Nul),
            (6, SkipReason::Nul)
        ]
    );
    assert_eq!(report.lines, 6);
}

#[test]
fn file_cut_in_the_middle_of_a_multibyte_character() {
    let full = format!(
        "{HEADER}\n{}\n{}",
        user("a1", "ok"),
        user("a2", "caf\u{e9} \u{1F680}")
    );
    let bytes = full.as_bytes();
    // Cut inside the 4-byte rocket: the last line is partial and invalid.
    let rocket = full.find('\u{1F680}').unwrap();
    let (recs, report) = read(&bytes[..rocket + 2]);
    assert_eq!(recs.len(), 1);
    assert_eq!(report.skipped, 1);
    assert_eq!(report.skips[0].line, 3);
    assert!(matches!(report.skips[0].reason, SkipReason::Truncated(_)));
    assert_eq!(report.repaired, 0);
    // Whole, it is kept as is.
    let (recs, report) = read(bytes);
    assert_eq!(recs[1].text, "caf\u{e9} \u{1F680}");
    assert_eq!((report.skipped, report.repaired), (0, 0));
}

#[test]
fn headers_that_are_not_headers() {
    for (first, why) in [
        (
            r#"{"type":"session","id":42,"cwd":"/x"}"#,
            "session header without a string \"id\"",
        ),
        (
            r#"{"type":"session","id":null,"cwd":"/x"}"#,
            "session header without a string \"id\"",
        ),
        (
            r#"["session"]"#,
            "not a session header: not an object with a string \"type\"",
        ),
        ("\0\0\0\0", "NUL bytes before the session header"),
    ] {
        let text = format!("{first}\n{}\n", user("a1", "x"));
        let err = PiSessionSource::from_reader(text.as_bytes(), "dir/h.jsonl").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("dir/h.jsonl:1:0: {why}"),
            "{first}"
        );
    }
    // A header repeated mid-file gives no record and is counted.
    let text = format!(
        "{HEADER}\n{}\n{HEADER}\n{}\n",
        user("a1", "x"),
        user("a2", "y")
    );
    let (recs, report) = read(text.as_bytes());
    assert_eq!(recs.len(), 2);
    assert_eq!(report.entries.get("session"), 2);
    assert_eq!(report.no_record, 2);
}

#[test]
fn content_of_the_wrong_type_is_empty_text() {
    let mut text = format!("{HEADER}\n");
    for (i, c) in ["42", "{\"text\":\"x\"}", "null", "true", "[1,\"a\",null]"]
        .iter()
        .enumerate()
    {
        text.push_str(&format!(
            r#"{{"type":"message","id":"c{i}","message":{{"role":"assistant","content":{c}}}}}"#
        ));
        text.push('\n');
    }
    let (recs, report) = read(text.as_bytes());
    assert_eq!(recs.len(), 5);
    for r in &recs {
        assert_eq!(
            (r.role, r.text.as_str(), r.kinds.len()),
            (Role::Assistant, "", 0)
        );
    }
    assert_eq!(report.skipped, 0);
}

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
}

fn stats(args: &[&Path]) -> (serde_json::Value, std::process::Output) {
    let out = cli()
        .args(["stats", "--json", "-q"])
        .args(args)
        .output()
        .unwrap();
    (serde_json::from_slice(&out.stdout).unwrap(), out)
}

#[test]
fn cli_skips_non_jsonl_and_survives_symlink_loops() {
    let d = tmpdir("cli-tree");
    std::fs::create_dir_all(d.join("a/b")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl"),
        d.join("a/b/s.jsonl"),
    )
    .unwrap();
    std::fs::write(d.join("a/README.md"), "# not a session\n").unwrap();
    std::fs::write(d.join("a/b/s.jsonl.bak"), "garbage").unwrap();
    std::os::unix::fs::symlink(d.join("a"), d.join("a/b/up")).unwrap();
    std::os::unix::fs::symlink(d.join("a/b"), d.join("a/b/self")).unwrap();
    let (s, out) = stats(&[&d]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        (s["files"].as_u64(), s["records"].as_u64()),
        (Some(1), Some(22))
    );
    std::fs::remove_dir_all(d).unwrap();
}

/// Keys of the records `backfill` writes with `args`, and its stderr.
fn backfill_keys(args: &[&dyn AsRef<std::ffi::OsStr>]) -> (Vec<String>, String) {
    let out = common::cli()
        .args(["backfill", "-q"])
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let keys = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    (keys, err)
}

/// Links met while walking a folder lead out of it: they are not followed
/// unless `--follow-links` (`-L`) says so (ripgrep's convention); a PATH
/// named on the command line is followed, link or not.
#[test]
fn cli_does_not_follow_links_found_while_walking() {
    let d = tmpdir("cli-links");
    let (archive, outside) = (d.join("archive"), d.join("outside"));
    std::fs::create_dir_all(&archive).unwrap();
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    let session = |id: &str, entry: &str, text: &str| {
        format!(
            "{}\n{}\n",
            HEADER.replace("\"id\":\"s1\"", &format!("\"id\":\"{id}\"")),
            user(entry, text)
        )
    };
    std::fs::write(archive.join("in.jsonl"), session("s1", "a", "inside")).unwrap();
    std::fs::write(
        outside.join("secret.jsonl"),
        session("s2", "b", "a file elsewhere"),
    )
    .unwrap();
    std::fs::write(
        outside.join("dir/deep.jsonl"),
        session("s3", "c", "a folder elsewhere"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.join("secret.jsonl"), archive.join("passwd.jsonl")).unwrap();
    std::os::unix::fs::symlink(outside.join("dir"), archive.join("linked")).unwrap();

    let (keys, _) = backfill_keys(&[&archive]);
    assert_eq!(keys, ["s1:a"]);
    let (s, out) = stats(&[&archive]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        (s["files"].as_u64(), s["records"].as_u64()),
        (Some(1), Some(1))
    );
    // Followed when asked, in path order.
    for flag in ["--follow-links", "-L"] {
        let (keys, _) = backfill_keys(&[&flag, &archive]);
        assert_eq!(keys, ["s1:a", "s3:c", "s2:b"], "{flag}");
    }
    // Links named as PATHs are followed (files in path order).
    let (keys, _) = backfill_keys(&[&archive.join("passwd.jsonl"), &archive.join("linked")]);
    assert_eq!(keys, ["s3:c", "s2:b"]);
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn cli_file_without_read_permission_fails_alone() {
    let d = tmpdir("cli-perm");
    for dir in [&d, &d.join("p")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl");
    std::fs::copy(&fixture, d.join("p/ok.jsonl")).unwrap();
    std::fs::copy(&fixture, d.join("p/locked.jsonl")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for (p, mode) in [
        (d.clone(), 0o755),
        (d.join("p"), 0o755),
        (d.join("p/ok.jsonl"), 0o644),
        (d.join("p/locked.jsonl"), 0o000),
    ] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Root reads any file: run as the unprivileged `nobody` then.
    let mut cmd = common::unprivileged_cli();
    let out = cmd
        .args(["stats", "--json", "-q"])
        .arg(d.join("p"))
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        (s["files"].as_u64(), s["files_failed"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(s["records"], 22);
    assert_eq!(
        s["failures"][0]["path"],
        d.join("p/locked.jsonl").to_str().unwrap()
    );
    assert_eq!(s["failures"][0]["error"], "Permission denied (os error 13)");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn cli_never_writes_to_inputs() {
    let d = tmpdir("cli-ro");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut before = Vec::new();
    for dir in ["", "bad", "no-header"] {
        for e in std::fs::read_dir(fixtures.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                let m = std::fs::metadata(&p).unwrap();
                before.push((p.clone(), std::fs::read(&p).unwrap(), m.modified().unwrap()));
            }
        }
    }
    let out = cli()
        .args(["backfill", "-q", "-o"])
        .arg(d.join("o.ndjson"))
        .arg(&fixtures)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    for (p, bytes, mtime) in before {
        assert_eq!(std::fs::read(&p).unwrap(), bytes, "{}", p.display());
        assert_eq!(std::fs::metadata(&p).unwrap().modified().unwrap(), mtime);
    }
    // A file without a final newline is not given one (pi 1.x would).
    let tail =
        std::fs::read(fixtures.join("bad/truncated-last-line-no-newline-valid.jsonl")).unwrap();
    assert_ne!(tail.last(), Some(&b'\n'));
    std::fs::remove_dir_all(d).unwrap();
}

/// The engine's NDJSON writer reads pi lines with record text built
/// escaped from the lines' raw strings; written out, every record is the
/// same line as from decoded text. Every `*.jsonl` of `dirs`, each file's
/// record count checked: `(files, records)`.
fn raw_text_agrees_on_every_file_of(dirs: &[PathBuf]) -> (usize, usize) {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "jsonl") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut total = 0;
    for p in &files {
        let bytes = std::fs::read(p).unwrap();
        let Ok(src) = PiSessionSource::from_reader(&bytes[..], "fuzz.jsonl") else {
            let e = mem_ingest::raw_text_agrees(&bytes).unwrap_err();
            assert!(!e.starts_with("built escaped"), "{}: {e}", p.display());
            continue;
        };
        let (records, _) = drain(src);
        let n =
            mem_ingest::raw_text_agrees(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(n, records.len(), "{}", p.display());
        total += n;
    }
    (files.len(), total)
}

#[test]
fn record_text_built_escaped_writes_what_decoded_text_writes_on_every_fixture() {
    // 20 files, 2,140 records (the README's main job writes 1,100 records of the
    // fixtures' after deduplication across files; each is read alone here).
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs = ["fixtures", "fixtures/bad", "fixtures/no-header"].map(|d| root.join(d));
    assert_eq!(raw_text_agrees_on_every_file_of(&dirs), (20, 2140));
}

#[test]
#[ignore = "needs ../shared: pi's real sessions (MEM_INGEST_SHARED, MEM_INGEST_REAL_DIR)"]
fn record_text_built_escaped_writes_what_decoded_text_writes_on_the_real_sessions() {
    assert_eq!(
        raw_text_agrees_on_every_file_of(&[common::shared::real_dir()]),
        (2, 1906)
    );
}

/// A pi session of `n` user messages (about 190 bytes each): more than a
/// pipe holds, and more than a file's first 64 KiB that detection reads.
fn long_session(n: usize) -> String {
    let mut s = format!("{HEADER}\n");
    for i in 0..n {
        s.push_str(&user(&format!("m{i}"), &format!("message {i}")));
        s.push('\n');
    }
    s
}

/// `backfill` with `args` reading `input` on its stdin: its records (file,
/// session, key), stderr and exit code.
fn backfill_stdin(
    args: &[&dyn AsRef<std::ffi::OsStr>],
    input: &str,
) -> (Vec<(String, String, String)>, String, Option<i32>) {
    let mut child = common::cli()
        .arg("backfill")
        .args(args.iter().map(|a| a.as_ref()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_owned();
    // A run that refuses never reads it: the write may fail.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let records = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let s = |k: &str| v[k].as_str().unwrap().to_owned();
            (s("file"), s("session"), s("key"))
        })
        .collect();
    (
        records,
        String::from_utf8(out.stderr).unwrap(),
        out.status.code(),
    )
}

/// The summary line of a run's stderr, from its files count to its
/// records count.
fn files_and_records(err: &str) -> &str {
    let line = err
        .lines()
        .find(|l| l.starts_with("mem-ingest: "))
        .unwrap_or(err);
    let end = line
        .find(" records")
        .map_or(line.len(), |i| i + " records".len());
    &line[..end]
}

/// A pipe named as a PATH (`/dev/stdin`, `<(...)`, a FIFO) is read as a
/// stream: every record, its `file` the path as given, its session from
/// its content, whether its format is detected from its first bytes
/// (every agent) or not (`--source pi`).
#[test]
fn cli_reads_a_pipe_named_as_a_path_as_a_stream() {
    let n = 2000;
    let text = long_session(n);
    assert!(text.len() > 256 << 10);
    for source in [&[][..], &["--source", "pi"][..]] {
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = source.iter().map(|s| s as _).collect();
        args.push(&"/dev/stdin");
        let (records, err, code) = backfill_stdin(&args, &text);
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            files_and_records(&err),
            format!("mem-ingest: 1 files (0 failed, 0 empty), {n} records"),
            "{source:?}"
        );
        assert_eq!(records.len(), n);
        assert_eq!(
            records[0],
            ("/dev/stdin".to_owned(), "s1".to_owned(), "s1:m0".to_owned())
        );
        assert_eq!(records[n - 1].2, format!("s1:m{}", n - 1));
    }

    // A FIFO, a child writing into it.
    let d = tmpdir("fifo");
    let fifo = d.join("s.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let writer = {
        let (fifo, text) = (fifo.clone(), text.clone());
        std::thread::spawn(move || {
            let mut f = OpenOptions::new().write(true).open(&fifo).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        })
    };
    let out = common::cli()
        .args(["backfill", "-q"])
        .arg(&fifo)
        .output()
        .unwrap();
    writer.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), n);
    assert_eq!(lines[5]["file"], fifo.to_str().unwrap());
    assert_eq!(lines[5]["key"], "s1:m5");
    std::fs::remove_dir_all(d).unwrap();
}

/// A pipe has no parts and cannot be read again: a run that keeps a
/// checkpoint or follows is refused (exit 2, naming the path) before it
/// reads it; a character device named as a PATH fails at once.
#[test]
fn cli_refuses_a_pipe_with_a_checkpoint_and_a_device() {
    let d = tmpdir("pipe-refused");
    let state = d.join("state");
    let db = d.join("s.db");
    let parquet = d.join("parquet");
    let why = "a pipe is read once, as a stream (no parts, no resume): it cannot be read with a \
               checkpoint (--state, --db, --parquet) or --follow; save it to a file and name that";
    let cases: [&[&dyn AsRef<std::ffi::OsStr>]; 4] = [
        &[&"--state", &state],
        &[&"--db", &db],
        &[&"--parquet", &parquet],
        &[&"--db", &db, &"--follow"],
    ];
    for case in cases {
        let mut args = case.to_vec();
        args.push(&"/dev/stdin");
        let (records, err, code) = backfill_stdin(&args, &long_session(10));
        assert_eq!(
            (code, err.as_str(), records.len()),
            (Some(2), format!("error: /dev/stdin: {why}\n").as_str(), 0)
        );
    }
    assert!(!state.exists() && !db.exists() && !parquet.exists());
    // A FIFO no one writes to: refused without being opened (an open would
    // wait for a writer).
    let fifo = d.join("s.jsonl");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let out = common::cli()
        .args(["backfill", "--state"])
        .arg(&state)
        .arg(&fifo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!("error: {}: {why}\n", fifo.display())
    );
    // /dev/zero: at once, in bounded memory (a limit of 3 GB on the
    // process: it grew to 14 GB).
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 3000000; exec {} stats --json -q --jobs 2 /dev/zero",
            env!("CARGO_BIN_EXE_mem-ingest")
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            s["files"].as_u64(),
            s["files_failed"].as_u64(),
            s["records"].as_u64()
        ),
        // A failed PATH counts among the files, as a missing one does.
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(
        s["failures"][0],
        serde_json::json!({"path": "/dev/zero", "error": "a character device, not a session file or folder"})
    );
    std::fs::remove_dir_all(d).unwrap();
}
