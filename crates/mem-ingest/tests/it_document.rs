//! The document seam proved by a format that lives here, in a test, and
//! plugs into the engine with no edit to it: `*.doc` files, each one JSON
//! document rewritten whole as the agent writes (as Amp, Cline and Gemini
//! CLI's legacy sessions do), read through `mem_ingest::document`.
//!
//! A document: `{"session": id, "cwd": path, "messages": [{"id", "role",
//! "text", "tokens"?, "running"?}], "pad"?}`. A message's key is its `id`
//! (its position `#<n>` without one); `running: true` is a message still
//! being written.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::document::{self, Bump, Item, Items, MapDocument};
use mem_ingest::format::{BoxedSource, Format, Input};
use mem_ingest::sink::{ForEach, NdjsonFile};
use mem_ingest::{
    Header, OwnedRecord, Record, Report, Role, RoleFilter, SkipReason, SourceError, SourceOptions,
    Usage,
};
use serde_json::Value;

mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("doc", name)
}

fn fnv(parts: &[&[u8]]) -> u64 {
    parts.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, p| {
        p.iter()
            .chain(b"\x00")
            .fold(h, |h, c| (h ^ u64::from(*c)).wrapping_mul(0x100_0000_01b3))
    })
}

/// The toy document format; `hashes`: its writer may keep a document's
/// size and time ([`Format::hashes_unchanged`]).
struct Docs {
    hashes: bool,
}

impl MapDocument for Docs {
    fn read<'a>(
        &self,
        data: &'a [u8],
        _path: &Path,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        items: &mut Items<'a>,
    ) -> Result<Header, SkipReason> {
        let doc: Value =
            serde_json::from_slice(data).map_err(|e| SkipReason::Malformed(e.to_string()))?;
        let (Some(session), Some(messages)) = (
            doc.get("session").and_then(Value::as_str),
            doc.get("messages").and_then(Value::as_array),
        ) else {
            return Err(SkipReason::Unsupported(
                "not a document: no string `session` and `messages` list".into(),
            ));
        };
        let session: &'a str = arena.alloc_str(session);
        let cwd: &'a str = arena.alloc_str(doc.get("cwd").and_then(Value::as_str).unwrap_or(""));
        let source: &'a str = arena.alloc_str(&format!("doc:{session}"));
        for (i, m) in messages.iter().enumerate() {
            let pos = i as u64 + 1;
            let key: &'a str = match m.get("id").and_then(Value::as_str) {
                Some(id) => arena.alloc_str(id),
                None => arena.alloc_str(&format!("#{pos}")),
            };
            let role = match m.get("role").and_then(Value::as_str) {
                Some("user") => Some(Role::User),
                Some("assistant") => Some(Role::Assistant),
                _ => None,
            };
            let usage = m.get("tokens").and_then(Value::as_u64).map(|n| Usage {
                output: n,
                total_tokens: n,
                ..Usage::default()
            });
            if let Some(u) = &usage {
                report.add_usage(Some("toy"), Some("toy-1"), u, true);
            }
            let record = match role {
                Some(role) if report.count_record(role, filter) => Some(Record {
                    role,
                    text: arena.alloc_str(m.get("text").and_then(Value::as_str).unwrap_or("")),
                    project: cwd,
                    session,
                    key: arena.alloc_str(&format!("{session}:{key}")),
                    source,
                    id: Some(key),
                    parent_id: None,
                    line: pos,
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
                }),
                Some(_) => None,
                None => {
                    report.no_record += 1;
                    None
                }
            };
            items.push(
                report,
                Item {
                    key,
                    positional: false,
                    version: fnv(&[m.to_string().as_bytes()]),
                    settled: m.get("running").and_then(Value::as_bool) != Some(true),
                    fingerprint: fnv(&[b"doc", session.as_bytes(), key.as_bytes()]),
                    line: pos,
                    byte: 0,
                    record,
                },
            );
        }
        Ok(Header {
            id: session.to_owned(),
            cwd: cwd.to_owned(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fnv(&[b"doc-header", session.as_bytes()]),
        })
    }
}

impl Format for Docs {
    fn name(&self) -> &'static str {
        "doc"
    }

    fn is_session_file(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "doc")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        Err("documents have no default archive".into())
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, SourceError> {
        Ok(document::open(self, b"doc", input, path, None, opts))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        _byte: u64,
        _lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        document::open(self, b"doc", input, path, Some((header, context)), opts)
    }

    fn needs_running_context(&self) -> bool {
        true
    }

    fn is_document(&self, _path: &Path) -> bool {
        true
    }

    fn hashes_unchanged(&self) -> bool {
        self.hashes
    }
}

/// A document's JSON: its messages as `(id, text)`, user then assistant
/// in turn, each assistant message with 10 tokens; `pad` bytes of padding.
fn doc(session: &str, messages: &[(&str, &str)], pad: usize) -> String {
    let msgs: Vec<Value> = messages
        .iter()
        .enumerate()
        .map(|(i, (id, text))| {
            if i % 2 == 0 {
                serde_json::json!({"id": id, "role": "user", "text": text})
            } else {
                serde_json::json!({"id": id, "role": "assistant", "text": text, "tokens": 10})
            }
        })
        .collect();
    serde_json::json!({
        "session": session,
        "cwd": "/proj",
        "messages": msgs,
        "pad": "x".repeat(pad),
    })
    .to_string()
}

/// Rewrites `path` as the agents do: a temporary file renamed over it (a
/// new inode).
fn rewrite(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

fn archive(dir: &Path, hashes: bool, state: &Path) -> Archive {
    Archive::builder()
        .path(dir)
        .formats(vec![Arc::new(Docs { hashes }) as Arc<dyn Format>])
        .state(state)
        .build()
}

fn keys_texts(got: &[OwnedRecord]) -> Vec<(String, String)> {
    got.iter()
        .map(|r| (r.key.clone(), r.text.clone()))
        .collect()
}

#[test]
fn a_rewrite_that_adds_one_message_emits_exactly_it() {
    let d = tmpdir("adds");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.doc");
    rewrite(&f, &doc("s1", &[("m1", "hello"), ("m2", "hi there")], 0));
    let run = archive(&a, false, &d.join("state"));
    let mut got = Vec::new();
    let first = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [
            ("s1:m1".to_owned(), "hello".to_owned()),
            ("s1:m2".to_owned(), "hi there".to_owned())
        ]
    );
    assert_eq!(
        (first.written, first.report.records, first.report.lines),
        (2, 2, 2)
    );
    assert_eq!(first.report.usage.output, 10);
    assert_eq!(got[1].project, "/proj");
    assert_eq!(got[1].source, "doc:s1");

    // Unchanged: not opened.
    let again = run
        .backfill(&mut ForEach(|r| panic!("unchanged: {r:?}")))
        .unwrap();
    assert_eq!(
        (again.written, again.unchanged, again.report.records),
        (0, 1, 2)
    );

    // Rewritten with a third message: exactly it.
    rewrite(
        &f,
        &doc(
            "s1",
            &[("m1", "hello"), ("m2", "hi there"), ("m3", "more")],
            0,
        ),
    );
    got.clear();
    let third = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [("s1:m3".to_owned(), "more".to_owned())]);
    assert_eq!(got[0].line, 3);
    // The document's report is its whole content: three records, one
    // usage, however many reads it took.
    assert_eq!(
        (
            third.written,
            third.reread,
            third.report.records,
            third.report.lines
        ),
        (1, 1, 3, 3)
    );
    assert_eq!(third.report.usage.output, 10);

    // Rewritten with a fourth, a reply: its usage counted once.
    rewrite(
        &f,
        &doc(
            "s1",
            &[
                ("m1", "hello"),
                ("m2", "hi there"),
                ("m3", "more"),
                ("m4", "ok"),
            ],
            0,
        ),
    );
    got.clear();
    let fourth = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [("s1:m4".to_owned(), "ok".to_owned())]);
    assert_eq!((fourth.report.records, fourth.report.usage.output), (4, 20));
    // And `stats` of the archive: the same totals.
    let stats = Archive::builder()
        .path(&a)
        .formats(vec![Arc::new(Docs { hashes: false }) as Arc<dyn Format>])
        .build()
        .stats()
        .unwrap();
    assert_eq!((stats.report.records, stats.report.usage.output), (4, 20));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_rewrite_keeping_size_and_time_is_caught_by_the_hash() {
    let d = tmpdir("hash");
    for hashes in [true, false] {
        let a = d.join(format!("a-{hashes}"));
        fs::create_dir_all(&a).unwrap();
        let f = a.join("one.doc");
        let before = doc("s1", &[("m1", "hello")], 120);
        // A message more, the padding shorter: the same size.
        let mut after = doc("s1", &[("m1", "hello"), ("m2", "again")], 0);
        let pad = before.len() - after.len();
        after = doc("s1", &[("m1", "hello"), ("m2", "again")], pad);
        assert_eq!(before.len(), after.len());
        fs::write(&f, &before).unwrap();
        let mtime = fs::metadata(&f).unwrap().modified().unwrap();
        let run = archive(&a, hashes, &d.join(format!("state-{hashes}")));
        let first = run.backfill(&mut ForEach(|_| {})).unwrap();
        assert_eq!(first.written, 1);
        // Rewritten in place (the same inode), its time put back.
        fs::write(&f, &after).unwrap();
        fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let mut got = Vec::new();
        let second = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
        if hashes {
            // The hash taken at planning differs from the saved one.
            assert_eq!(keys_texts(&got), [("s1:m2".to_owned(), "again".to_owned())]);
            assert_eq!((second.unchanged, second.reread), (0, 1));
        } else {
            // A format whose writer moves the time is not hashed: the
            // document looks unchanged (this is what the hash is for).
            assert!(got.is_empty());
            assert_eq!((second.unchanged, second.reread), (1, 0));
        }
        // With the hash, an unchanged document is hashed and stays
        // unchanged.
        let third = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
        assert_eq!((third.written, third.unchanged), (0, 1));
    }
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn an_edited_message_updates_the_stores_row_and_is_counted_by_ndjson() {
    let d = tmpdir("edit");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.doc");
    rewrite(&f, &doc("s1", &[("m1", "hello"), ("m2", "draft")], 0));
    let formats = || vec![Arc::new(Docs { hashes: false }) as Arc<dyn Format>];
    // NDJSON with its state.
    let out = d.join("out.ndjson");
    let nd = Archive::builder()
        .path(&a)
        .formats(formats())
        .state(d.join("nd.state"))
        .build();
    let first = nd
        .backfill(&mut NdjsonFile::append(&out, d.join("nd.state")))
        .unwrap();
    assert_eq!((first.written, first.updated), (2, 0));
    // The store.
    let db = d.join("m.db");
    let store_run = || {
        let mut store = mem_ingest_store::SqliteStore::open(&db).unwrap();
        Archive::builder()
            .path(&a)
            .formats(formats())
            .build()
            .backfill(&mut store)
            .unwrap()
    };
    assert_eq!(store_run().written, 2);
    let rows = || -> Vec<(String, String, i64)> {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut st = c
            .prepare("SELECT key, text, row_id FROM records ORDER BY row_id")
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let before = rows();
    assert_eq!(before.len(), 2);
    assert_eq!(before[1].1, "draft");

    // The reply edited, a message added.
    rewrite(
        &f,
        &doc("s1", &[("m1", "hello"), ("m2", "final"), ("m3", "next")], 0),
    );
    let second = nd
        .backfill(&mut NdjsonFile::append(&out, d.join("nd.state")))
        .unwrap();
    assert_eq!((second.written, second.updated), (1, 1));
    let text = fs::read_to_string(&out).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(&str, &str)> = lines
        .iter()
        .map(|v| (v["key"].as_str().unwrap(), v["text"].as_str().unwrap()))
        .collect();
    // Appended output: the edit is counted, never written twice.
    assert_eq!(
        got,
        [("s1:m1", "hello"), ("s1:m2", "draft"), ("s1:m3", "next")]
    );
    let s2 = store_run();
    assert_eq!((s2.written, s2.updated), (1, 1));
    let after = rows();
    assert_eq!(
        after,
        [
            (before[0].0.clone(), "hello".to_owned(), before[0].2),
            (before[1].0.clone(), "final".to_owned(), before[1].2),
            ("s1:m3".to_owned(), "next".to_owned(), before[1].2 + 1),
        ],
        "the row updated in place, by key, keeping its row id"
    );
    // Found by its new text, not its old one.
    let c = rusqlite::Connection::open(&db).unwrap();
    let hits = |q: &str| -> i64 {
        c.query_row(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?1",
            [q],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!((hits("final"), hits("draft")), (1, 0));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_message_being_written_waits_and_a_dropped_key_is_never_emitted_again() {
    let d = tmpdir("running");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.doc");
    let running = r#"{"session":"s","messages":[{"id":"m1","role":"user","text":"q"},{"id":"m2","role":"assistant","text":"par","running":true}]}"#;
    rewrite(&f, running);
    let run = archive(&a, false, &d.join("state"));
    let mut got = Vec::new();
    let first = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [("s:m1".to_owned(), "q".to_owned())]);
    // Counted with its document (as the agent's own tools count it).
    assert_eq!(first.report.records, 2);
    let done = r#"{"session":"s","messages":[{"id":"m1","role":"user","text":"q"},{"id":"m2","role":"assistant","text":"partial answer"}]}"#;
    rewrite(&f, done);
    got.clear();
    let second = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [("s:m2".to_owned(), "partial answer".to_owned())]
    );
    assert_eq!(second.updated, 0);
    // Rewound: m2 leaves the document, then a message of that id comes
    // back with the same content: emitted once, never again.
    rewrite(
        &f,
        r#"{"session":"s","messages":[{"id":"m1","role":"user","text":"q"}]}"#,
    );
    let third = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!((third.written, third.report.records), (0, 1));
    rewrite(&f, done);
    let fourth = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!((fourth.written, fourth.updated), (0, 0));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn damaged_documents_are_counted_and_what_was_emitted_stays_emitted() {
    let d = tmpdir("damaged");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.doc");
    let two = doc("s1", &[("m1", "hello"), ("m2", "hi")], 0);
    rewrite(&f, &two);
    let run = archive(&a, false, &d.join("state"));
    assert_eq!(run.backfill(&mut ForEach(|_| {})).unwrap().written, 2);
    // Caught mid-rewrite: truncated. One skipped "line", named.
    let three = doc("s1", &[("m1", "hello"), ("m2", "hi"), ("m3", "three")], 0);
    rewrite(&f, &three[..three.len() / 2]);
    let cut = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!(
        (
            cut.written,
            cut.report.skipped,
            cut.report.lines,
            cut.files_failed
        ),
        (0, 1, 1, 0)
    );
    assert_eq!(cut.skips.len(), 1);
    assert_eq!((cut.skips[0].line, cut.skips[0].byte), (1, 0));
    assert!(
        cut.skips[0].reason.starts_with("malformed JSON"),
        "{}",
        cut.skips[0].reason
    );
    // Finished: only the new message.
    rewrite(&f, &three);
    let mut got = Vec::new();
    let fixed = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [("s1:m3".to_owned(), "three".to_owned())]);
    assert_eq!((fixed.report.skipped, fixed.report.records), (0, 3));
    // Another shape, null where the list was, invalid UTF-8: each one
    // counted skip; then the document back, nothing emitted twice.
    for (bad, why) in [
        (
            r#"{"session":"s1","messages":{"m1":1}}"#.as_bytes(),
            "file not read: not a document",
        ),
        (
            br#"{"session":"s1","messages":null}"#,
            "file not read: not a document",
        ),
        (
            b"{\"session\":\"s1\",\"messages\":[\"\xff\xfe\"]}",
            "malformed JSON",
        ),
        (b"[1,2,3]", "file not read: not a document"),
    ] {
        let tmp = f.with_extension("tmp");
        fs::write(&tmp, bad).unwrap();
        fs::rename(&tmp, &f).unwrap();
        let s = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
        assert_eq!((s.report.skipped, s.files_failed), (1, 0), "{why}");
        assert!(s.skips[0].reason.starts_with(why), "{}", s.skips[0].reason);
    }
    rewrite(&f, &three);
    let back = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!((back.written, back.report.records), (0, 3));
    fs::remove_dir_all(d).unwrap();
}

/// The archive of the kill test: `n` documents of `per` messages each.
fn kill_archive(a: &Path, n: usize, per: usize, from: usize) {
    for i in 0..n {
        let ids: Vec<String> = (0..per + from).map(|k| format!("m{k}")).collect();
        let texts: Vec<String> = (0..per + from)
            .map(|k| format!("document {i} message {k} {}", "words ".repeat(20)))
            .collect();
        let msgs: Vec<(&str, &str)> = ids
            .iter()
            .zip(&texts)
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        rewrite(
            &a.join(format!("d{i:04}.doc")),
            &doc(&format!("s{i}"), &msgs, 0),
        );
    }
}

/// The run the kill test kills: a backfill of `DOC_KILL_ARCHIVE` to
/// `DOC_KILL_OUT` with its state, checkpointing every millisecond. Run
/// alone (no variable), it makes an archive of its own and checks that one
/// clean run writes each message once.
#[test]
fn kill_child_backfills_with_a_state() {
    let (a, out, own) = match std::env::var_os("DOC_KILL_ARCHIVE") {
        Some(a) => (
            PathBuf::from(a),
            PathBuf::from(std::env::var_os("DOC_KILL_OUT").unwrap()),
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
        .formats(vec![Arc::new(Docs { hashes: true }) as Arc<dyn Format>])
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
fn kill_9_at_any_moment_then_a_rerun_gives_every_message_exactly_once() {
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
        .env("DOC_KILL_ARCHIVE", &a)
        .env("DOC_KILL_OUT", &out);
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
    let kills = common::kill_until_it_finishes(child, pace, "documents");
    assert!(kills >= 3);
    assert_eq!(keys_once(&out).len(), n * per);
    // Every document rewritten with two messages more: killed again.
    kill_archive(&a, n, per, 2);
    common::kill_until_it_finishes(child, pace, "documents rewritten");
    let keys = keys_once(&out);
    assert_eq!(keys.len(), n * (per + 2));
    assert!(keys.contains(&format!("s{}:m{}", n - 1, per + 1)));
    fs::remove_dir_all(d).unwrap();
}

/// A document emptied while it is replaced (nothing but whitespace), then
/// written again: what it emitted stays known by its checkpoint, not by
/// deduplication (off here).
#[test]
fn an_emptied_document_keeps_what_it_emitted() {
    let d = tmpdir("emptied");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let f = a.join("one.doc");
    rewrite(&f, &doc("s1", &[("m1", "hello"), ("m2", "hi")], 0));
    let run = Archive::builder()
        .path(&a)
        .formats(vec![Arc::new(Docs { hashes: false }) as Arc<dyn Format>])
        .state(d.join("state"))
        .dedupe(false)
        .build();
    assert_eq!(run.backfill(&mut ForEach(|_| {})).unwrap().written, 2);
    rewrite(&f, "  \n");
    let empty = run.backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!((empty.written, empty.files_empty), (0, 1));
    rewrite(
        &f,
        &doc("s1", &[("m1", "hello"), ("m2", "hi"), ("m3", "three")], 0),
    );
    let mut got = Vec::new();
    run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [("s1:m3".to_owned(), "three".to_owned())]);
    fs::remove_dir_all(d).unwrap();
}

/// Moves a file's modification time a minute on (`touch`): read again,
/// its content unchanged.
fn touch(path: &Path) {
    let f = fs::File::options().append(true).open(path).unwrap();
    let t = f.metadata().unwrap().modified().unwrap() + std::time::Duration::from_secs(60);
    f.set_modified(t).unwrap();
}

#[test]
fn a_document_of_copies_read_again_keeps_their_counts_out() {
    // Two documents of one session (a history written twice, as Gemini
    // CLI's legacy `.json` beside its `.jsonl`, OpenCode's tree beside its
    // database): `b.doc`'s first two messages are copies of `a.doc`'s.
    let d = tmpdir("copies-touched");
    let a = d.join("a");
    fs::create_dir_all(&a).unwrap();
    let two = [("m1", "hello"), ("m2", "hi there")];
    let four = [
        ("m1", "hello"),
        ("m2", "hi there"),
        ("m3", "more"),
        ("m4", "ok"),
    ];
    rewrite(&a.join("a.doc"), &doc("s1", &two, 0));
    rewrite(&a.join("b.doc"), &doc("s1", &four, 0));
    let run = archive(&a, false, &d.join("state"));
    let mut got = Vec::new();
    let first = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(got.len(), 4);
    let counts = |s: &mem_ingest::archive::Summary| {
        (
            s.report.records,
            s.report.lines,
            s.report.usage.output,
            s.report.deduplicated,
        )
    };
    assert_eq!(counts(&first), (4, 6, 20, 2));
    // The copies' document touched: read again, nothing new, its copies
    // still copies (their counts stay out), and so for the original.
    for name in ["b.doc", "a.doc"] {
        touch(&a.join(name));
        let again = run
            .backfill(&mut ForEach(|r| panic!("nothing new: {r:?}")))
            .unwrap();
        assert!(again.failures.is_empty(), "{:?}", again.failures);
        assert_eq!((again.written, again.reread), (0, 1), "{name}");
        assert_eq!(counts(&again), (4, 6, 20, 2), "{name}");
    }
    // Rewritten with a fifth message: exactly it, the copies still out.
    let five = [
        ("m1", "hello"),
        ("m2", "hi there"),
        ("m3", "more"),
        ("m4", "ok"),
        ("m5", "bye"),
    ];
    rewrite(&a.join("b.doc"), &doc("s1", &five, 0));
    got.clear();
    let fifth = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [("s1:m5".to_owned(), "bye".to_owned())]);
    assert_eq!(counts(&fifth), (5, 7, 20, 2));
    // `stats` of the archive: the same totals.
    let stats = Archive::builder()
        .path(&a)
        .formats(vec![Arc::new(Docs { hashes: false }) as Arc<dyn Format>])
        .build()
        .stats()
        .unwrap();
    assert_eq!(counts(&stats), (5, 7, 20, 2));
    fs::remove_dir_all(d).unwrap();
}
