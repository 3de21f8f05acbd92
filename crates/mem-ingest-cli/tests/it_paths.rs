//! Paths as the file system has them: names that are not UTF-8 stay
//! distinct files, in the checkpoint (state and store) and in every
//! output's `file` field, spelled reversibly (`\xHH` for each byte that is
//! not UTF-8, a literal backslash doubled).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
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
        let o = run(&[&"backfill", &"-q", &"--db", &db, &arch]);
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
    // The dataset: the same rows, once a run, the same spelling.
    let ds = d.join("ds");
    for round in 1..=3 {
        let o = run(&[
            &"backfill",
            &"-q",
            &"--parquet",
            &ds,
            &"--state",
            &d.join("ds.state"),
            &arch,
        ]);
        assert!(
            o.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(dataset_files_and_keys(&ds), want, "round {round}");
    }
    fs::remove_dir_all(d).unwrap();
}

/// `(file, key)` of every row of a dataset's parts, sorted.
fn dataset_files_and_keys(ds: &Path) -> Vec<(String, String)> {
    use arrow_array::{Array, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut out = Vec::new();
    let mut stack = vec![ds.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".parquet") && !name.starts_with('.') {
                let r = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&p).unwrap())
                    .unwrap()
                    .build()
                    .unwrap();
                for b in r {
                    let b = b.unwrap();
                    let col = |n: &str| -> StringArray {
                        b.column_by_name(n)
                            .unwrap()
                            .as_any()
                            .downcast_ref::<StringArray>()
                            .unwrap()
                            .clone()
                    };
                    let (file, key) = (col("file"), col("key"));
                    for i in 0..b.num_rows() {
                        assert!(!file.is_null(i));
                        out.push((file.value(i).to_owned(), key.value(i).to_owned()));
                    }
                }
            }
        }
    }
    out.sort();
    out
}

/// A store of schema 3 keyed its checkpoint files by their paths made
/// UTF-8 lossily (two names that differ in a byte that is not UTF-8 had
/// one row, the last file saved). Opened by this release, it is migrated
/// to schema 4: a backslash's key respelled, the lossy key given to the
/// file with its recorded inode; the other file is read as new, and its
/// rows, already there, are the same rows (no record twice).
#[test]
fn a_schema_3_store_is_respelled() {
    let d = tmpdir("paths", "store-v3");
    let (arch, ff, fe) = archive(&d);
    let slash = arch.join("back\\slash.jsonl");
    session(&slash, "sess-bs", 2);
    let db = d.join("m.db");
    let o = run(&[&"backfill", &"-q", &"--db", &db, &arch]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // As schema 3 had it: lossy keys, one row for both bad\x.. files.
    let c = rusqlite::Connection::open(&db).unwrap();
    let lossy = |p: &Path| p.to_string_lossy().into_owned();
    let a = arch.display().to_string();
    c.execute(
        "DELETE FROM checkpoint_files WHERE path = ?1",
        [format!("{a}/bad\\xff.jsonl")],
    )
    .unwrap();
    c.execute(
        "UPDATE checkpoint_files SET path = ?2 WHERE path = ?1",
        [format!("{a}/bad\\xfe.jsonl"), lossy(&fe)],
    )
    .unwrap();
    c.execute(
        "UPDATE checkpoint_files SET path = ?2 WHERE path = ?1",
        [format!("{a}/back\\\\slash.jsonl"), lossy(&slash)],
    )
    .unwrap();
    c.pragma_update(None, "user_version", 3).unwrap();
    let paths = |c: &rusqlite::Connection| -> Vec<String> {
        let mut st = c
            .prepare("SELECT path FROM checkpoint_files ORDER BY path")
            .unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        paths(&c),
        [
            format!("{a}/back\\slash.jsonl"),
            format!("{a}/bad\u{fffd}.jsonl")
        ]
    );
    drop(c);
    // ff's state is gone: it is read again, each entry already emitted.
    assert!(ff.exists());
    let o = run(&[&"backfill", &"--db", &db, &arch]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(
            "3 files (0 failed, 0 empty, 2 unchanged, 0 resumed, 0 re-read), 4 records \
             (0 written), 3 deduplicated"
        ),
        "{err}"
    );
    let c = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = c
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, mem_ingest_store::SCHEMA_VERSION);
    assert_eq!(
        paths(&c),
        [
            format!("{a}/back\\\\slash.jsonl"),
            format!("{a}/bad\\xfe.jsonl"),
            format!("{a}/bad\\xff.jsonl"),
        ]
    );
    let n: i64 = c
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 6);
    fs::remove_dir_all(d).unwrap();
}

/// Waits until `cond` holds, at most 20 s.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let t = std::time::Instant::now();
    while !cond() {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The writer's lock is the file's, not the name's: a second writer that
/// names the store through a symbolic link is refused while the first
/// runs (before, `alias.db.lock` let it in beside `two.db.lock`).
#[test]
fn a_store_named_through_a_link_is_locked_as_itself() {
    let d = tmpdir("paths", "store-link");
    let (arch, _, _) = archive(&d);
    let db = d.join("two.db");
    let alias = d.join("alias.db");
    std::os::unix::fs::symlink("two.db", &alias).unwrap();
    let mut first = common::cli()
        .args(["backfill", "-q", "--follow", "--db"])
        .arg(&db)
        .arg(&arch)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the first writer's rows", || {
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| c.query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0)))
            .is_ok_and(|n| n == 4)
    });
    let second = run(&[&"backfill", &"-q", &"--db", &alias, &arch]);
    let _ = first.kill();
    let _ = first.wait();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "another mem-ingest run is using the store {}",
            alias.display()
        )),
        "{err}"
    );
    assert!(!d.join("alias.db.lock").exists());
    fs::remove_dir_all(d).unwrap();
}

/// A state named through a symbolic link is saved through it: the link
/// stays a link and its target holds the state, so a run that names the
/// target sees what the other saved (before, the link was replaced by a
/// regular file and the target went stale).
#[test]
fn a_state_named_through_a_link_is_saved_through_it() {
    let d = tmpdir("paths", "state-link");
    let (arch, ff, _) = archive(&d);
    let (real, alias, out) = (
        d.join("real.state"),
        d.join("alias.state"),
        d.join("out.ndjson"),
    );
    std::os::unix::fs::symlink("real.state", &alias).unwrap();
    let backfill = |st: &Path| {
        let o = run(&[&"backfill", &"--state", &st, &"-o", &out, &arch]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    backfill(&alias);
    assert!(fs::symlink_metadata(&alias)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(real.is_file());
    assert_eq!(records(&fs::read(&out).unwrap()).len(), 4);
    common::append(&ff, &user_line("sess-ff-2", "one more"));
    // Through the target: the link's run is known, one record is new.
    let err = backfill(&real);
    assert!(
        err.contains(
            "2 files (0 failed, 0 empty, 1 unchanged, 1 resumed, 0 re-read), 5 records (1 written)"
        ),
        "{err}"
    );
    assert_eq!(records(&fs::read(&out).unwrap()).len(), 5);
    // And through the link again.
    let err = backfill(&alias);
    assert!(err.contains("2 unchanged"), "{err}");
    assert!(fs::symlink_metadata(&alias)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!d.join("alias.state.lock").exists());
    fs::remove_dir_all(d).unwrap();
}

/// An archive with a session of its own (`sess-in`, 2 lines) and a link to
/// a session outside it (`sess-out`, 3 lines), as `link.jsonl`.
fn linked_archive(d: &Path) -> PathBuf {
    let (arch, outside) = (d.join("archive"), d.join("outside"));
    fs::create_dir_all(&arch).unwrap();
    fs::create_dir_all(&outside).unwrap();
    session(&arch.join("in.jsonl"), "sess-in", 2);
    session(&outside.join("out.jsonl"), "sess-out", 3);
    std::os::unix::fs::symlink(outside.join("out.jsonl"), arch.join("link.jsonl")).unwrap();
    arch
}

/// The keys of the records of an NDJSON output, in order.
fn keys(out: &Path) -> Vec<String> {
    records(&fs::read(out).unwrap())
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

/// What the refusal of a checkpoint of links followed says to a run that
/// does not follow them (`what`: `state`, `store`).
fn followed_but_not_now(what: &str) -> String {
    format!(
        "--follow-links: {what} has links followed (given -L, or saved before -L existed, \
         when runs always followed them), this run links not followed: give -L to go on"
    )
}

/// Issue 42: whether links met while walking are followed (`-L`) is
/// recorded in the state like the other options: a state of a run that did
/// not follow them refuses a run that does (it would read the linked file
/// into a checkpoint that says links are not followed), and the other way
/// round; the output is left as it was.
#[test]
fn a_state_records_whether_links_are_followed() {
    let d = tmpdir("paths", "state-links");
    let arch = linked_archive(&d);
    let inside = ["sess-in:sess-in-0", "sess-in:sess-in-1"];
    let outside = [
        "sess-out:sess-out-0",
        "sess-out:sess-out-1",
        "sess-out:sess-out-2",
    ];
    let backfill = |flags: &[&str], state: &Path, out: &Path| {
        let mut args: Vec<&dyn AsRef<OsStr>> = vec![&"backfill", &"-q"];
        args.extend(flags.iter().map(|f| f as &dyn AsRef<OsStr>));
        args.extend([&"--state" as &dyn AsRef<OsStr>, &state, &"-o", &out, &arch]);
        run(&args)
    };
    // Not followed: the link is not read, and -L is refused.
    let (state, out) = (d.join("skip.state"), d.join("skip.ndjson"));
    let o = backfill(&[], &state, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(keys(&out), inside);
    for flag in ["-L", "--follow-links"] {
        let o = backfill(&[flag], &state, &out);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!(
                "error: the state {} was written with other options (--follow-links: state \
                 has links not followed, this run links followed: leave out -L to go on); use \
                 another state file\n",
                state.display()
            ),
            "{flag}"
        );
        assert_eq!(keys(&out), inside, "{flag}");
    }
    // The state goes on without -L: a line appended inside is its one
    // new record.
    common::append(&arch.join("in.jsonl"), &user_line("sess-in-2", "new"));
    let o = backfill(&[], &state, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(keys(&out).len(), 3);
    // Followed: the linked session is read, and a run without -L refused.
    let (state, out) = (d.join("follow.state"), d.join("follow.ndjson"));
    let o = backfill(&["-L"], &state, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut want: Vec<&str> = vec![];
    want.extend([
        "sess-in:sess-in-0",
        "sess-in:sess-in-1",
        "sess-in:sess-in-2",
    ]);
    want.extend(outside);
    assert_eq!(keys(&out), want);
    let o = backfill(&[], &state, &out);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: the state {} was written with other options ({}); use another state file\n",
            state.display(),
            followed_but_not_now("state")
        )
    );
    assert_eq!(keys(&out), want);
    // With -L again it goes on: the linked file, unchanged, is not read.
    common::append(
        &d.join("outside/out.jsonl"),
        &user_line("sess-out-3", "new"),
    );
    let o = backfill(&["--follow-links"], &state, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    want.push("sess-out:sess-out-3");
    assert_eq!(keys(&out), want);
    fs::remove_dir_all(d).unwrap();
}

/// The same for a store: its checkpoint records whether links were
/// followed, and a run that differs is refused with no row added.
#[test]
fn a_store_records_whether_links_are_followed() {
    let d = tmpdir("paths", "store-links");
    let arch = linked_archive(&d);
    let rows = |db: &Path| -> Vec<String> {
        let c = rusqlite::Connection::open(db).unwrap();
        let mut st = c.prepare("SELECT key FROM records ORDER BY key").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let inside = ["sess-in:sess-in-0", "sess-in:sess-in-1"];
    let all = [
        "sess-in:sess-in-0",
        "sess-in:sess-in-1",
        "sess-out:sess-out-0",
        "sess-out:sess-out-1",
        "sess-out:sess-out-2",
    ];
    let skip = d.join("skip.db");
    let o = run(&[&"backfill", &"-q", &"--db", &skip, &arch]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(rows(&skip), inside);
    let o = run(&[&"backfill", &"-q", &"-L", &"--db", &skip, &arch]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: the store {} was written with other options (--follow-links: store has \
             links not followed, this run links followed: leave out -L to go on); use another \
             store\n",
            skip.display()
        )
    );
    assert_eq!(rows(&skip), inside);
    let follow = d.join("follow.db");
    let o = run(&[&"backfill", &"-q", &"-L", &"--db", &follow, &arch]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(rows(&follow), all);
    let o = run(&[&"backfill", &"-q", &"--db", &follow, &arch]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: the store {} was written with other options ({}); use another store\n",
            follow.display(),
            followed_but_not_now("store")
        )
    );
    assert_eq!(rows(&follow), all);
    fs::remove_dir_all(d).unwrap();
}

/// A state saved before `-L` existed (the checked-in `state-v9.state`) was
/// saved by runs that followed every link met while walking: it says so,
/// and a run without `-L` is refused rather than silently dropping what
/// it read through links; with `-L` it goes on (copies of its two files:
/// every entry one it holds, no record).
#[test]
fn a_state_saved_before_links_were_recorded_followed_them() {
    let d = tmpdir("paths", "state-v9-links");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    for name in ["hand-built.jsonl", "pi-classic.jsonl"] {
        fs::copy(common::fixtures().join(name), arch.join(name)).unwrap();
    }
    let (state, out) = (d.join("state"), d.join("out.ndjson"));
    fs::copy(common::fixtures().join("state-v9.state"), &state).unwrap();
    let o = run(&[&"backfill", &"-q", &"--state", &state, &"-o", &out, &arch]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: the state {} was written with other options ({}); use another state file\n",
            state.display(),
            followed_but_not_now("state")
        )
    );
    assert!(!out.exists());
    let o = run(&[&"backfill", &"-L", &"--state", &state, &"-o", &out, &arch]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(fs::read(&out).unwrap(), b"");
    assert!(err.contains("(0 written), 380 deduplicated"), "{err}");
    fs::remove_dir_all(d).unwrap();
}
