//! The rows seam proved by a format that lives here, in a test, and plugs
//! into the engine with no edit to it: `*.rows` files, each a toy
//! database (a table the test rewrites as an agent rewrites its rows),
//! read through `mem_ingest::rows` after a cursor, in batches, as the
//! SQLite formats read theirs.
//!
//! A table: one row a line, `rowid<TAB>id<TAB>session<TAB>role<TAB>state
//! <TAB>text`; `state` is `done` (final) or `busy` (a message still being
//! written, filled in later under the same rowid). The toy reads rows
//! after the cursor's mark three at a time, the ids pending first, and
//! guards its mark with the id of the row there: a table rewritten under
//! it (a deleted row's rowid taken by a new one, a VACUUM that renumbers
//! the rows) is read again from the start, and the keys emitted keep it
//! from emitting anything twice.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mem_ingest::archive::{Archive, PART_BYTES};
use mem_ingest::format::{BoxedSource, Format, Input};
use mem_ingest::rows::{self, Bump, Cursor, Database, MapRows, Row, Rows};
use mem_ingest::sink::{ForEach, NdjsonFile};
use mem_ingest::{
    Header, OwnedRecord, Record, Report, Role, RoleFilter, SourceError, SourceOptions, Usage,
    UsageAt,
};
use serde_json::Value;

mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("rows", name)
}

fn fnv(parts: &[&[u8]]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, p| {
        p.iter()
            .chain(b"\x00")
            .fold(h, |h, c| (h ^ u64::from(*c)).wrapping_mul(0x100_0000_01b3))
    })
}

/// The rows read at most in one batch.
const BATCH: usize = 3;

/// One row of a toy table.
#[derive(Debug, Clone)]
struct T {
    rowid: i64,
    id: String,
    session: String,
    role: String,
    done: bool,
    text: String,
}

fn parse(data: &str) -> Vec<T> {
    data.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(6, '\t').collect();
            (f.len() == 6).then(|| T {
                rowid: f[0].parse().unwrap(),
                id: f[1].to_owned(),
                session: f[2].to_owned(),
                role: f[3].to_owned(),
                done: f[4] == "done",
                text: f[5].to_owned(),
            })
        })
        .collect()
}

/// The toy rows format.
struct Toy;

/// A toy table, read whole when opened (it is small).
struct ToyDb {
    rows: Vec<T>,
    /// A lock the toy meets once its mark reaches this rowid (the
    /// number in `<table>.busy`, when that file exists).
    busy_at: Option<i64>,
    path: PathBuf,
    stem: String,
    pending_read: bool,
    bytes: u64,
}

impl ToyDb {
    /// Counts and pushes `t` when final and not emitted; holds it
    /// pending when unfinished.
    fn take<'a>(
        &mut self,
        t: &T,
        cursor: &mut Cursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) {
        let key = format!("{}:{}", t.session, t.id);
        if cursor.was_emitted(&key) {
            return;
        }
        if !t.done {
            cursor.pending.insert(key);
            return;
        }
        self.bytes += t.text.len() as u64 + 1;
        let role = if t.role == "user" {
            Role::User
        } else {
            Role::Assistant
        };
        let usage = (role == Role::Assistant).then(|| Usage {
            output: 10,
            total_tokens: 10,
            ..Usage::default()
        });
        if let Some(u) = &usage {
            let at = UsageAt {
                line: t.rowid as u64,
                time: None,
                reasoning: 0,
                seq: 0,
            };
            report.add_usage_at(Some("toy"), Some("toy-1"), u, true, at);
        }
        let key: &'a str = arena.alloc_str(&key);
        let record = report.count_record(role, filter).then(|| Record {
            role,
            text: arena.alloc_str(&t.text),
            project: "/proj",
            session: arena.alloc_str(&t.session),
            key,
            source: arena.alloc_str(&format!("rows:{}", self.stem)),
            id: Some(arena.alloc_str(&t.id)),
            parent_id: None,
            line: t.rowid as u64,
            byte: 0,
            entry: "message",
            message_role: None,
            kinds: &[],
            timestamp: None,
            provider: None,
            model: None,
            usage,
            stop_reason: None,
            tool_name: None,
            tool_call_id: None,
            is_error: None,
            custom_type: None,
            command: None,
            exit_code: None,
            repaired: false,
            agent_id: None,
            message_id: None,
            request_id: None,
            provisional: false,
        });
        rows.push(
            report,
            Row {
                key,
                // A message's identity is its role and text: one copied
                // under another id (a fork's copy) is a duplicate.
                fingerprint: fnv(&[b"row", t.role.as_bytes(), t.text.as_bytes()]),
                line: t.rowid as u64,
                byte: self.bytes,
                record,
            },
        );
    }
}

impl Database for ToyDb {
    fn next_batch<'a>(
        &mut self,
        cursor: &mut Cursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<bool, SourceError> {
        if !self.pending_read {
            // The messages seen unfinished, by id, first.
            self.pending_read = true;
            let pending = std::mem::take(&mut cursor.pending);
            for key in pending {
                // One gone before it was final has nothing to emit.
                let found = self
                    .rows
                    .iter()
                    .find(|t| format!("{}:{}", t.session, t.id) == key);
                if let Some(t) = found.cloned() {
                    self.take(&t, cursor, arena, filter, report, rows);
                }
            }
            return Ok(true);
        }
        let mark = cursor.marks.get("t").copied().unwrap_or(0);
        if self.busy_at.is_some_and(|b| mark >= b) {
            return Err(SourceError::io(
                &self.path,
                std::io::Error::other("the database is locked by a writer"),
            ));
        }
        let batch: Vec<T> = self
            .rows
            .iter()
            .filter(|t| t.rowid > mark)
            .take(BATCH)
            .cloned()
            .collect();
        for t in &batch {
            self.take(t, cursor, arena, filter, report, rows);
        }
        if let Some(last) = batch.last() {
            cursor.marks.insert("t".into(), last.rowid);
            cursor.guards.insert("t".into(), fnv(&[last.id.as_bytes()]));
        }
        Ok(batch.len() == BATCH)
    }
}

impl MapRows for Toy {
    fn open(
        &self,
        path: &Path,
        cursor: &mut Cursor,
    ) -> Result<(Header, Box<dyn Database>), SourceError> {
        let data = fs::read_to_string(path).map_err(|e| SourceError::io(path, e))?;
        let mut rows = parse(&data);
        rows.sort_by_key(|t| t.rowid);
        // The row at the mark must be the one read there.
        if let Some(&mark) = cursor.marks.get("t") {
            let there = rows.iter().find(|t| t.rowid == mark);
            let same =
                there.is_some_and(|t| Some(&fnv(&[t.id.as_bytes()])) == cursor.guards.get("t"));
            if !same {
                cursor.rescan();
            }
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let header = Header {
            id: stem.clone(),
            cwd: String::new(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fnv(&[b"toy-db", stem.as_bytes()]),
        };
        let busy_at = fs::read_to_string(path.with_extension("busy"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let db = ToyDb {
            rows,
            busy_at,
            path: path.to_path_buf(),
            stem,
            pending_read: false,
            bytes: 0,
        };
        Ok((header, Box::new(db)))
    }
}

impl Format for Toy {
    fn name(&self) -> &'static str {
        "rows"
    }

    fn is_session_file(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "rows")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        Err("toy databases have no default archive".into())
    }

    fn open<'d>(
        &self,
        _input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, SourceError> {
        Ok(rows::open(self, path, None, opts))
    }

    fn resume<'d>(
        &self,
        _input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        _byte: u64,
        _lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        rows::open(self, path, Some((header, context)), opts)
    }

    fn needs_running_context(&self) -> bool {
        true
    }

    fn is_rows(&self, _path: &Path) -> bool {
        true
    }
}

/// A table's text: `(rowid, id, role, done, text)` rows of session `s`.
fn table(s: &str, rows: &[(i64, &str, &str, bool, &str)]) -> String {
    rows.iter()
        .map(|(r, id, role, done, text)| {
            let state = if *done { "done" } else { "busy" };
            format!("{r}\t{id}\t{s}\t{role}\t{state}\t{text}\n")
        })
        .collect()
}

/// Rewrites `path` in place (the same inode, as a database's pages are).
fn write_in_place(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
}

fn archive(dir: &Path, state: &Path) -> Archive {
    Archive::builder()
        .path(dir)
        .formats(vec![Arc::new(Toy) as Arc<dyn Format>])
        .state(state)
        .build()
}

fn keys_texts(got: &[OwnedRecord]) -> Vec<(String, String)> {
    got.iter()
        .map(|r| (r.key.clone(), r.text.clone()))
        .collect()
}

fn kt(k: &str, t: &str) -> (String, String) {
    (k.to_owned(), t.to_owned())
}

#[test]
fn rows_are_read_after_the_cursor_and_an_unfinished_message_once_it_is_final() {
    let d = tmpdir("incremental");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.rows");
    // Five rows: more than a batch; the assistant's last is unfinished.
    let mut rows = vec![
        (1, "m1", "user", true, "hello"),
        (2, "m2", "assistant", true, "hi"),
        (3, "m3", "user", true, "do it"),
        (4, "m4", "assistant", true, "done"),
        (5, "m5", "assistant", false, ""),
    ];
    write_in_place(&f, &table("s", &rows));
    let run = archive(&a, &d.join("state"));
    let mut got = Vec::new();
    let first = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [
            kt("s:m1", "hello"),
            kt("s:m2", "hi"),
            kt("s:m3", "do it"),
            kt("s:m4", "done")
        ]
    );
    assert_eq!(
        (first.written, first.report.records, first.report.lines),
        (4, 4, 4)
    );
    assert_eq!(first.report.usage.output, 20);
    assert_eq!(got[3].line, 4);
    assert_eq!(got[3].source, "rows:one");

    // Nothing new: the database is opened, nothing emitted, the report
    // the same.
    let again = run
        .backfill(&mut ForEach(|r| panic!("nothing new: {r:?}")))
        .unwrap();
    assert_eq!((again.written, again.report.records), (0, 4));

    // The unfinished message filled in under its rowid, and a row more.
    rows[4] = (5, "m5", "assistant", true, "filled in later");
    rows.push((6, "m6", "user", true, "thanks"));
    write_in_place(&f, &table("s", &rows));
    got.clear();
    let third = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [kt("s:m5", "filled in later"), kt("s:m6", "thanks")]
    );
    // The database's report adds up over its reads: six records, three
    // replies.
    assert_eq!(
        (
            third.written,
            third.report.records,
            third.report.lines,
            third.report.usage.output
        ),
        (2, 6, 6, 30)
    );
    // `stats` without a state reads it whole: the same totals.
    let stats = Archive::builder()
        .path(&a)
        .formats(vec![Arc::new(Toy) as Arc<dyn Format>])
        .build()
        .stats()
        .unwrap();
    assert_eq!((stats.report.records, stats.report.usage.output), (6, 30));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_rowid_taken_again_a_vacuum_and_a_compaction_emit_only_what_is_new() {
    let d = tmpdir("rescan");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.rows");
    write_in_place(
        &f,
        &table(
            "s",
            &[
                (1, "m1", "user", true, "one"),
                (2, "m2", "assistant", true, "two"),
                (3, "m3", "user", true, "three"),
            ],
        ),
    );
    let run = archive(&a, &d.join("state"));
    let mut got = Vec::new();
    run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(got.len(), 3);

    // The row at the mark deleted and its rowid taken by a new row: the
    // guard sees another row there, the table is read again, and only the
    // new row is emitted.
    write_in_place(
        &f,
        &table(
            "s",
            &[
                (1, "m1", "user", true, "one"),
                (2, "m2", "assistant", true, "two"),
                (3, "m4", "assistant", true, "four"),
            ],
        ),
    );
    got.clear();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [kt("s:m4", "four")]);
    assert_eq!((s.written, s.report.records), (1, 4));

    // A VACUUM that renumbers every row, and a compaction that put the
    // conversation back under new rowids with one message more: only it.
    write_in_place(
        &f,
        &table(
            "s",
            &[
                (10, "m1", "user", true, "one"),
                (11, "m2", "assistant", true, "two"),
                (12, "m4", "assistant", true, "four"),
                (13, "m3", "user", true, "three"),
                (14, "m5", "user", true, "five"),
            ],
        ),
    );
    got.clear();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [kt("s:m5", "five")]);
    assert_eq!((s.written, s.report.records), (1, 5));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_damaged_cursor_reads_from_the_start_and_a_database_that_cannot_open_fails_named() {
    let c = Cursor::default();
    assert_eq!(Cursor::decode(&c.encode()), Some(c));
    assert_eq!(Cursor::decode(b""), None);
    assert_eq!(Cursor::decode(b"R\xff\xff\xff\xff\xff\xff\xff\xff"), None);
    let d = tmpdir("unreadable");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    fs::write(a.join("bad.rows"), b"1\tm1\t\xff\n").unwrap();
    write_in_place(
        &a.join("good.rows"),
        &table("g", &[(1, "m1", "user", true, "x")]),
    );
    let s = Archive::builder()
        .path(&a)
        .formats(vec![Arc::new(Toy) as Arc<dyn Format>])
        .build()
        .stats()
        .unwrap();
    assert_eq!(s.report.records, 1);
    assert_eq!(s.failures.len(), 1);
    assert!(s.failures[0].0.ends_with("bad.rows"), "{:?}", s.failures);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_read_that_fails_after_rows_were_handed_out_ends_there_and_the_next_run_goes_on() {
    let d = tmpdir("busy");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.rows");
    let texts: Vec<(String, String)> = (1..=8)
        .map(|i| (format!("m{i}"), format!("text {i}")))
        .collect();
    let rows: Vec<(i64, &str, &str, bool, &str)> = texts
        .iter()
        .enumerate()
        .map(|(i, (id, t))| (i as i64 + 1, id.as_str(), "user", true, t.as_str()))
        .collect();
    write_in_place(&f, &table("s", &rows));
    // Locked once the first two batches (six rows) were read.
    fs::write(a.join("one.busy"), "6").unwrap();
    let out = d.join("out.ndjson");
    let state = d.join("out.state");
    let run = || {
        archive(&a, &state)
            .backfill(&mut NdjsonFile::append(&out, &state))
            .unwrap()
    };
    let first = run();
    assert_eq!(first.written, 6);
    assert!(first.failures.is_empty());
    assert_eq!(first.report.skipped, 1);
    let skip = format!("{:?}", first.skips);
    assert!(
        skip.contains("the read stopped after 6 rows") && skip.contains("locked"),
        "{skip}"
    );
    // The lock gone: the rest, and nothing again.
    fs::remove_file(a.join("one.busy")).unwrap();
    let second = run();
    assert_eq!(second.written, 2);
    let keys = keys_once(&out);
    assert_eq!(keys.len(), 8);
    // Locked before any row was handed out: the database fails this run.
    fs::write(a.join("one.busy"), "0").unwrap();
    write_in_place(&f, &table("t", &rows));
    let third = archive(&a, &d.join("fresh.state"))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!(third.failures.len(), 1);
    fs::remove_dir_all(d).unwrap();
}

/// A read of more than [`PART_BYTES`] of rows is handed over in parts as
/// it goes (as a 20 MB OpenCode database's is): each part's usage rows
/// are those of the rows it hands out, so the usage rows of every sink and
/// report sum to `stats`' usage, the rows after the first part's end
/// included, and a copy dropped just after a part's end takes its own row
/// out with it.
#[test]
fn a_read_handed_over_in_parts_keeps_the_usage_rows_of_every_part() {
    let d = tmpdir("parts");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    // A part ends at the row that takes the read past PART_BYTES (row 2),
    // in the middle of the first batch of three; the answer after it is a
    // copy of the first (its text and role), dropped; two batches follow.
    let big = "x".repeat(PART_BYTES as usize);
    let rows = [
        (1, "m1", "assistant", true, "an answer"),
        (2, "m2", "user", true, big.as_str()),
        (3, "m3", "assistant", true, "an answer"),
        (4, "m4", "assistant", true, "four"),
        (5, "m5", "user", true, "five"),
        (6, "m6", "assistant", true, "six"),
        (7, "m7", "assistant", true, "seven"),
    ];
    write_in_place(&a.join("one.rows"), &table("s", &rows));
    let toy = || {
        Archive::builder()
            .path(&a)
            .formats(vec![Arc::new(Toy) as Arc<dyn Format>])
    };
    // Answers 1, 4, 6 and 7: 10 tokens each.
    let stats = toy().build().stats().unwrap();
    assert_eq!((stats.report.records, stats.report.usage.output), (6, 40));
    let usage = toy().build().usage().unwrap();
    assert_eq!(usage.report.usage.output, 40);
    let lines: Vec<(u64, u64)> = usage
        .usage
        .iter()
        .map(|u| (u.line, u.usage.output))
        .collect();
    assert_eq!(lines, [(1, 10), (4, 10), (6, 10), (7, 10)]);
    // `--usage-out`: the same rows, beside the six records.
    let (out, rows_out) = (d.join("out.ndjson"), d.join("usage.ndjson"));
    let written = toy()
        .build()
        .backfill(&mut NdjsonFile::create(&out).usage_out(&rows_out))
        .unwrap();
    assert_eq!(written.written, 6);
    let rows_written: Vec<(u64, u64)> = fs::read_to_string(&rows_out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["line"].as_u64().unwrap(), v["output"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(rows_written, [(1, 10), (4, 10), (6, 10), (7, 10)]);
    fs::remove_dir_all(d).unwrap();
}

/// The archive of the kill test: `n` tables of `per` rows each, `from`
/// rows more.
fn kill_archive(a: &Path, n: usize, per: usize, from: usize) {
    for i in 0..n {
        let texts: Vec<(String, String)> = (0..per + from)
            .map(|k| {
                (
                    format!("m{k}"),
                    format!("table {i} message {k} {}", "words ".repeat(20)),
                )
            })
            .collect();
        let rows: Vec<(i64, &str, &str, bool, &str)> = texts
            .iter()
            .enumerate()
            .map(|(k, (id, t))| {
                let role = if k % 2 == 0 { "user" } else { "assistant" };
                (k as i64 + 1, id.as_str(), role, true, t.as_str())
            })
            .collect();
        write_in_place(
            &a.join(format!("t{i:04}.rows")),
            &table(&format!("s{i}"), &rows),
        );
    }
}

/// The run the kill test kills: a backfill of `ROWS_KILL_ARCHIVE` to
/// `ROWS_KILL_OUT` with its state, checkpointing every millisecond. Run
/// alone (no variable), it makes an archive of its own and checks that one
/// clean run writes each message once.
#[test]
fn kill_child_backfills_with_a_state() {
    let (a, out, own) = match std::env::var_os("ROWS_KILL_ARCHIVE") {
        Some(a) => (
            PathBuf::from(a),
            PathBuf::from(std::env::var_os("ROWS_KILL_OUT").unwrap()),
            None,
        ),
        None => {
            let d = tmpdir("kill-child");
            let a = d.join("a");
            fs::create_dir_all(&a).unwrap();
            kill_archive(&a, 20, 6, 0);
            (a, d.join("out.ndjson"), Some(d))
        }
    };
    let state = out.with_extension("state");
    let summary = Archive::builder()
        .path(&a)
        .formats(vec![Arc::new(Toy) as Arc<dyn Format>])
        .state(&state)
        .checkpoint_every(std::time::Duration::from_millis(1))
        .jobs(2)
        .build()
        .backfill(&mut NdjsonFile::append(&out, &state))
        .unwrap();
    if let Some(d) = own {
        assert_eq!(summary.written, 120);
        assert_eq!(keys_once(&out).len(), 120);
        fs::remove_dir_all(d).unwrap();
    }
}

/// The output's keys, each once (a key written twice fails).
fn keys_once(out: &Path) -> std::collections::BTreeSet<String> {
    let mut text = String::new();
    fs::File::open(out)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    let mut keys = std::collections::BTreeSet::new();
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let k = v["key"].as_str().unwrap().to_owned();
        assert!(keys.insert(k.clone()), "{k} written twice");
    }
    keys
}

#[test]
fn kill_9_at_any_moment_then_a_rerun_gives_every_row_exactly_once() {
    let d = tmpdir("kill");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let (n, per) = (150, 40);
    kill_archive(&a, n, per, 0);
    let out = d.join("out.ndjson");
    let child = || {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args([
            "--exact",
            "kill_child_backfills_with_a_state",
            "--test-threads=1",
        ])
        .env("ROWS_KILL_ARCHIVE", &a)
        .env("ROWS_KILL_OUT", &out);
        c
    };
    let t = std::time::Instant::now();
    let clean = child().output().unwrap();
    assert!(clean.status.success());
    let pace = t.elapsed().as_millis() as u64;
    assert_eq!(keys_once(&out).len(), n * per);
    // Again from nothing, killed at growing delays until a run finishes.
    fs::remove_file(&out).unwrap();
    fs::remove_file(out.with_extension("state")).unwrap();
    let kills = common::kill_until_it_finishes(child, pace, "tables");
    assert!(kills >= 3);
    assert_eq!(keys_once(&out).len(), n * per);
    // Every table with two rows more: killed again.
    kill_archive(&a, n, per, 2);
    common::kill_until_it_finishes(child, pace, "tables grown");
    let keys = keys_once(&out);
    assert_eq!(keys.len(), n * (per + 2));
    assert!(keys.contains(&format!("s{}:m{}", n - 1, per + 1)));
    fs::remove_dir_all(d).unwrap();
}
