//! OpenCode's database read through the engine: exact records, usage per
//! LLM call, an unfinished message emitted once it is final, a writer
//! that never fails while the reader reads, a database locked longer than
//! the retry, a rowid taken again, and the database's bytes untouched.
//!
//! Most tests build a small database with OpenCode's own tables (the
//! columns of `../shared/spec/opencode-format.md` §3 that are read); the
//! fixture test reads the one `../shared/samples/opencode/make_fixture.py`
//! builds (ignored in a plain clone).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::Format;
use mem_ingest::sink::{ForEach, NdjsonFile};
use mem_ingest::{OwnedRecord, Role};
use mem_ingest_db::OpenCode;
use rusqlite::Connection;
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/shared.rs"]
mod shared;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-db-opencode-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

const DDL: &str = "
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT,
  directory TEXT NOT NULL, title TEXT NOT NULL, time_created INTEGER NOT NULL,
  time_updated INTEGER NOT NULL);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
";

/// A database in `dir/opencode.db` with one session `ses_1` in `/proj`.
fn new_db(dir: &Path, wal: bool) -> (PathBuf, Connection) {
    let path = dir.join("opencode.db");
    let c = Connection::open(&path).unwrap();
    let mode: String = c
        .query_row(
            &format!(
                "PRAGMA journal_mode = {}",
                if wal { "WAL" } else { "DELETE" }
            ),
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(mode, if wal { "wal" } else { "delete" });
    c.execute_batch(DDL).unwrap();
    c.execute(
        "INSERT INTO session VALUES ('ses_1', 'p', NULL, '/proj', 't', 1, 1)",
        [],
    )
    .unwrap();
    (path, c)
}

fn put_msg(c: &Connection, id: &str, t: i64, data: &Value) {
    c.execute(
        "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3) \
         ON CONFLICT(id) DO UPDATE SET data = excluded.data, time_updated = excluded.time_updated",
        rusqlite::params![id, t, data.to_string()],
    )
    .unwrap();
}

fn put_part(c: &Connection, id: &str, msg: &str, t: i64, data: &Value) {
    c.execute(
        "INSERT INTO part VALUES (?1, ?2, 'ses_1', ?3, ?3, ?4) \
         ON CONFLICT(id) DO UPDATE SET data = excluded.data",
        rusqlite::params![id, msg, t, data.to_string()],
    )
    .unwrap();
}

fn user(c: &Connection, id: &str, t: i64, text: &str) {
    put_msg(c, id, t, &json!({"role": "user", "time": {"created": t}}));
    put_part(
        c,
        &format!("prt_{id}"),
        id,
        t,
        &json!({"type": "text", "text": text}),
    );
}

fn tokens(i: u64, o: u64) -> Value {
    json!({"input": i, "output": o, "reasoning": 0, "cache": {"read": 0, "write": 0}})
}

/// An assistant message; `done`: completed, with its text and one
/// step-finish of `(i, o)` tokens; else inserted empty, as OpenCode
/// inserts one when it starts.
fn assistant(c: &Connection, id: &str, t: i64, text: &str, done: bool, (i, o): (u64, u64)) {
    let mut data = json!({"role": "assistant", "time": {"created": t}, "modelID": "m1",
        "providerID": "p1", "tokens": tokens(0, 0), "cost": 0});
    if done {
        data["time"]["completed"] = json!(t + 10);
        data["tokens"] = tokens(i, o);
        put_part(
            c,
            &format!("prt_{id}_t"),
            id,
            t + 1,
            &json!({"type": "text", "text": text}),
        );
        put_part(
            c,
            &format!("prt_{id}_s"),
            id,
            t + 2,
            &json!({"type": "step-finish", "reason": "stop", "cost": 0.5, "tokens": tokens(i, o)}),
        );
    }
    put_msg(c, id, t, &data);
}

fn archive(dir: &Path, state: Option<&Path>) -> Archive {
    let b = Archive::builder()
        .path(dir)
        .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>]);
    match state {
        Some(s) => b.state(s).build(),
        None => b.build(),
    }
}

fn keys_texts(got: &[OwnedRecord]) -> Vec<(String, String)> {
    got.iter()
        .map(|r| (r.key.clone(), r.text.clone()))
        .collect()
}

fn kt(k: &str, t: &str) -> (String, String) {
    (k.to_owned(), t.to_owned())
}

fn sha(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[test]
fn an_assistant_message_filled_in_after_it_was_first_seen_is_emitted_once_final() {
    let d = tmpdir("filled");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    user(&c, "msg_1", 1000, "hello");
    assistant(&c, "msg_2", 2000, "", false, (0, 0));
    let run = archive(&a, Some(&d.join("state")));
    let mut got = Vec::new();
    let first = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [kt("ses_1:msg_1", "hello")]);
    assert_eq!(got[0].project, "/proj");
    assert_eq!(got[0].source, "opencode:ses_1");
    assert_eq!(got[0].role, Role::User);
    assert_eq!((first.written, first.report.records), (1, 1));
    assert_eq!(first.report.usage.total_tokens, 0);

    // Nothing new: nothing emitted.
    let again = run
        .backfill(&mut ForEach(|r| panic!("nothing new: {r:?}")))
        .unwrap();
    assert_eq!((again.written, again.report.records), (0, 1));

    // The assistant message written to its end under its rowid (an
    // upsert), then a new user message.
    assistant(&c, "msg_2", 2000, "hi there", true, (100, 20));
    user(&c, "msg_3", 3000, "thanks");
    got.clear();
    let third = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [kt("ses_1:msg_2", "hi there"), kt("ses_1:msg_3", "thanks")]
    );
    assert_eq!(got[0].model.as_deref(), Some("m1"));
    assert_eq!(got[0].usage.as_ref().map(|u| u.total_tokens), Some(120));
    assert_eq!(
        (
            third.written,
            third.report.records,
            third.report.usage.input
        ),
        (2, 3, 100)
    );
    assert_eq!(third.report.usage.output, 20);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn tool_parts_wait_until_finished_and_give_a_tool_result_record_each() {
    let d = tmpdir("tools");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    user(&c, "msg_1", 1000, "list files");
    let data = json!({"role": "assistant", "time": {"created": 2000, "completed": 2100},
        "modelID": "m1", "providerID": "p1", "tokens": tokens(10, 5), "cost": 0.1});
    put_msg(&c, "msg_2", 2000, &data);
    let tool = |status: &str| {
        let mut state = json!({"status": status, "input": {"command": "ls"}});
        if status == "completed" {
            state["output"] = json!("a\nb\n");
            state["metadata"] = json!({"exit": 0});
        }
        json!({"type": "tool", "callID": "call_1", "tool": "bash", "state": state})
    };
    put_part(&c, "prt_a", "msg_2", 2001, &tool("running"));
    let run = archive(&a, Some(&d.join("state")));
    let mut got = Vec::new();
    run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [kt("ses_1:msg_1", "list files")]);

    // The tool's row rewritten as completed: the message and its result.
    put_part(&c, "prt_a", "msg_2", 2001, &tool("completed"));
    got.clear();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [
            kt("ses_1:msg_2", r#"bash {"command":"ls"}"#),
            kt("ses_1:msg_2:prt_a", "a\nb\n")
        ]
    );
    assert_eq!(got[0].kinds, ["toolCall"]);
    assert_eq!(got[0].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(got[1].role, Role::ToolResult);
    assert_eq!(got[1].tool_name.as_deref(), Some("bash"));
    assert_eq!(got[1].command.as_deref(), Some("ls"));
    assert_eq!((got[1].exit_code, got[1].is_error), (Some(0), Some(false)));
    // No step-finish part: the message's own tokens are its usage.
    assert_eq!((s.report.records, s.report.usage.total_tokens), (3, 15));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn usage_is_every_step_finish_not_the_messages_last_call_only() {
    let d = tmpdir("steps");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    user(&c, "msg_1", 1000, "go");
    assistant(&c, "msg_2", 2000, "done", true, (100, 20));
    // A second LLM call of the same message: OpenCode keeps the last
    // call's tokens on the message (ccusage counts those only), and a
    // step-finish part per call.
    put_part(
        &c,
        "prt_msg_2_s2",
        "msg_2",
        2003,
        &json!({"type": "step-finish", "reason": "stop", "cost": 0.25, "tokens": tokens(300, 40)}),
    );
    let mut data: Value = c
        .query_row("SELECT data FROM message WHERE id = 'msg_2'", [], |r| {
            r.get::<_, String>(0)
        })
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap();
    data["tokens"] = tokens(300, 40);
    put_msg(&c, "msg_2", 2000, &data);
    let s = archive(&a, None).stats().unwrap();
    assert_eq!(
        (
            s.report.usage.input,
            s.report.usage.output,
            s.report.usage.cost
        ),
        (400, 60, 0.75)
    );
    fs::remove_dir_all(d).unwrap();
}

/// `/fork`: the session `ses_2` with copies of `ses_1`'s messages and
/// parts under new ids (`<id>_f`), their data the same.
fn fork(c: &Connection) {
    c.execute(
        "INSERT INTO session VALUES ('ses_2', 'p', NULL, '/proj', 't (fork #1)', 5, 5)",
        [],
    )
    .unwrap();
    c.execute_batch(
        "INSERT INTO message SELECT id || '_f', 'ses_2', time_created, time_updated, data
           FROM message WHERE session_id = 'ses_1' ORDER BY rowid;
         INSERT INTO part SELECT id || '_f', message_id || '_f', 'ses_2', time_created,
           time_updated, data FROM part WHERE session_id = 'ses_1' ORDER BY rowid;",
    )
    .unwrap();
}

#[test]
fn a_forks_copied_calls_are_counted_once_its_records_kept() {
    let d = tmpdir("fork");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    user(&c, "msg_1", 1000, "go");
    assistant(&c, "msg_2", 2000, "done", true, (100, 20));
    // Another answer of the same tokens at another time: a call of its own.
    assistant(&c, "msg_3", 3000, "again", true, (100, 20));
    fork(&c);
    let s = archive(&a, None).stats().unwrap();
    assert_eq!(
        (
            s.report.usage.input,
            s.report.usage.output,
            s.report.usage.cost
        ),
        (200, 40, 1.0)
    );
    // The fork's messages are records of their own session.
    assert_eq!(s.report.records, 6);

    // Forked after a run: the next run counts no usage again.
    let d2 = tmpdir("fork-later");
    let a2 = d2.join("data");
    fs::create_dir_all(&a2).unwrap();
    let (_, c2) = new_db(&a2, true);
    user(&c2, "msg_1", 1000, "go");
    assistant(&c2, "msg_2", 2000, "done", true, (100, 20));
    let run = archive(&a2, Some(&d2.join("state")));
    let first = run.backfill(&mut ForEach(|_| {})).unwrap();
    assert_eq!(first.report.usage.input, 100);
    fork(&c2);
    let mut got = Vec::new();
    let second = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        got.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["ses_2:msg_1_f", "ses_2:msg_2_f"]
    );
    assert_eq!(second.report.usage.input, 100);
    fs::remove_dir_all(d).unwrap();
    fs::remove_dir_all(d2).unwrap();
}

#[test]
fn a_deleted_rows_rowid_taken_by_a_new_row_is_caught_and_nothing_is_emitted_twice() {
    let d = tmpdir("rowid");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    user(&c, "msg_1", 1000, "one");
    user(&c, "msg_2", 2000, "two");
    let run = archive(&a, Some(&d.join("state")));
    let mut got = Vec::new();
    run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(got.len(), 2);
    // A revert deletes the last message; the next one takes its rowid.
    c.execute("DELETE FROM message WHERE id = 'msg_2'", [])
        .unwrap();
    user(&c, "msg_3", 3000, "three");
    let rowid: i64 = c
        .query_row("SELECT rowid FROM message WHERE id = 'msg_3'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(rowid, 2, "the new row took the deleted one's rowid");
    got.clear();
    run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(keys_texts(&got), [kt("ses_1:msg_3", "three")]);
    // A VACUUM between runs: nothing new, nothing again.
    c.execute_batch("VACUUM").unwrap();
    let s = run
        .backfill(&mut ForEach(|r| panic!("after a VACUUM: {r:?}")))
        .unwrap();
    assert_eq!(s.written, 0);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_writer_inserting_while_the_reader_reads_never_fails_and_every_message_is_written_once() {
    let d = tmpdir("writer");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (db, c) = new_db(&a, true);
    drop(c);
    let n = 400;
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let c = Connection::open(&db).unwrap();
            // No busy wait at all: a reader's lock would fail a write.
            c.busy_timeout(std::time::Duration::ZERO).unwrap();
            for i in 0..n {
                let id = format!("msg_{i:05}");
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                user(&c, &id, i64::from(i), &format!("message {i}"));
                c.execute_batch("COMMIT").unwrap();
                // Spread over a while, so that many reads meet it.
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let out = d.join("out.ndjson");
    let state = d.join("out.state");
    let read = || {
        archive(&a, Some(&state))
            .backfill(&mut NdjsonFile::append(&out, &state))
            .unwrap()
    };
    let mut runs = 0;
    while !writer.is_finished() {
        read();
        runs += 1;
    }
    writer.join().expect("the writer never failed");
    read();
    let text = fs::read_to_string(&out).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    for l in text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        assert!(
            keys.insert(v["key"].as_str().unwrap().to_owned()),
            "twice: {l}"
        );
    }
    assert_eq!(keys.len(), n as usize, "after {runs} runs while it wrote");
    assert!(runs >= 3, "only {runs} reads while it wrote");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_database_locked_longer_than_the_retry_fails_named_and_is_read_at_the_next_run() {
    let d = tmpdir("locked");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    // Rollback-journal mode, where a writer's lock keeps readers out.
    let (db, c) = new_db(&a, false);
    user(&c, "msg_1", 1000, "hello");
    c.execute_batch("BEGIN EXCLUSIVE").unwrap();
    user(&c, "msg_2", 2000, "held");
    let run = archive(&a, Some(&d.join("state")));
    let t = std::time::Instant::now();
    let s = run
        .backfill(&mut ForEach(|r| panic!("locked: {r:?}")))
        .unwrap();
    assert!(t.elapsed() >= mem_ingest_db::sqlite::BUSY_WAIT);
    assert_eq!(s.failures.len(), 1);
    assert_eq!(Path::new(&s.failures[0].0), db);
    assert!(
        s.failures[0].1.contains("locked by a writer"),
        "{:?}",
        s.failures
    );
    c.execute_batch("COMMIT").unwrap();
    let mut got = Vec::new();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        keys_texts(&got),
        [kt("ses_1:msg_1", "hello"), kt("ses_1:msg_2", "held")]
    );
    assert!(s.failures.is_empty());
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_database_by_opencodes_name_without_its_tables_fails_named_and_others_are_never_opened() {
    let d = tmpdir("foreign");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    Connection::open(a.join("opencode-dev.db"))
        .unwrap()
        .execute_batch("CREATE TABLE other (x)")
        .unwrap();
    // Not OpenCode's name: never opened (were it, it would fail too).
    Connection::open(a.join("store.sqlite"))
        .unwrap()
        .execute_batch("CREATE TABLE other (x)")
        .unwrap();
    let s = archive(&a, None).stats().unwrap();
    assert_eq!(s.failures.len(), 1, "{:?}", s.failures);
    assert!(s.failures[0].0.ends_with("opencode-dev.db"));
    assert!(s.failures[0].1.contains("not an OpenCode database"));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn channel_databases_holding_the_same_messages_give_each_once() {
    let d = tmpdir("channels");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (db, c) = new_db(&a, true);
    user(&c, "msg_1", 1000, "shared");
    drop(c);
    // The beta channel's copy of the database, and a message of its own.
    let beta = a.join("opencode-beta.db");
    Connection::open(&db)
        .unwrap()
        .execute("VACUUM INTO ?1", [beta.to_str().unwrap()])
        .unwrap();
    user(
        &Connection::open(&beta).unwrap(),
        "msg_2",
        2000,
        "beta only",
    );
    let mut got = Vec::new();
    let s = archive(&a, Some(&d.join("state")))
        .backfill(&mut ForEach(|r| got.push(r)))
        .unwrap();
    let mut keys = keys_texts(&got);
    keys.sort();
    assert_eq!(
        keys,
        [kt("ses_1:msg_1", "shared"), kt("ses_1:msg_2", "beta only")]
    );
    assert_eq!(s.written, 2);
    fs::remove_dir_all(d).unwrap();
}

/// An OpenCode data folder built by the shared fixture script.
fn fixture(dir: &Path) -> PathBuf {
    let script = shared::samples().join("opencode/make_fixture.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir)
        .arg("--no-legacy-json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dir.join("opencode.db")
}

#[test]
#[ignore = "needs ../shared: samples/opencode/make_fixture.py"]
fn the_fixture_database_gives_every_final_message_once_and_its_usage_per_call() {
    let d = tmpdir("fixture");
    let a = d.join("data");
    let db = fixture(&a);
    let before = sha(&db);
    let run = archive(&a, Some(&d.join("state")));
    let mut got = Vec::new();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    // The database file itself is never written.
    assert_eq!(sha(&db), before);
    let roles: Vec<(Role, &str)> = got.iter().map(|r| (r.role, r.text.as_str())).collect();
    assert_eq!(
        roles,
        [
            (
                Role::User,
                "Add a token-bucket limiter in front of the /api routes.\n\n[file router.ts]"
            ),
            (
                Role::Assistant,
                "The router registers middleware in order; the limiter must run first.\n\n\
                 I'll look at the router first.\n\n\
                 bash {\"command\":\"grep -n 'app.use' src/router.ts\",\"description\":\"Find middleware registrations\"}"
            ),
            (Role::ToolResult, "12:app.use(cors())\n13:app.use(json())\n"),
            (Role::User, "Find out why bursts of 20 requests get 429s."),
            (
                Role::Assistant,
                "task {\"description\":\"Investigate 429s\",\"prompt\":\"Read src/limiter.ts and report how the bucket refills.\",\"subagent_type\":\"general\"}"
            ),
            (
                Role::ToolResult,
                "The bucket refills once per second, by `rate`, capped at `burst` = 10."
            ),
            (Role::User, "Read src/limiter.ts and report how the bucket refills."),
            (
                Role::Assistant,
                "The bucket refills once per second, by `rate`, capped at `burst` = 10."
            ),
            (Role::User, ""),
            (
                Role::Assistant,
                "Summary: burst is hard-coded to 10 in src/limiter.ts; the user wants 20."
            ),
            (Role::User, "Make burst configurable."),
        ]
    );
    assert_eq!(got[8].kinds, ["compaction"]);
    assert_eq!(got[9].kinds, ["text", "summary"]);
    assert!(got.iter().all(|r| r.project == "/home/dev/src/ratelimit"));
    // Usage: the four step-finish parts of the final messages (the one
    // still streaming has none yet).
    let u = &s.report.usage;
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens
        ),
        (70_052, 2_183, 12_100, 26_900, 111_363)
    );
    assert!((u.cost - 0.2475).abs() < 1e-9, "{}", u.cost);

    // The message still streaming, finished by its writer: it alone, and
    // its tool's result.
    let c = Connection::open(&db).unwrap();
    let (id, data): (String, String) = c
        .query_row(
            "SELECT id, data FROM message ORDER BY rowid DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut data: Value = serde_json::from_str(&data).unwrap();
    data["time"]["completed"] = json!(data["time"]["created"].as_i64().unwrap() + 9000);
    c.execute(
        "UPDATE message SET data = ?1 WHERE id = ?2",
        rusqlite::params![data.to_string(), id],
    )
    .unwrap();
    let parts: Vec<(String, String)> = c
        .prepare("SELECT id, data FROM part WHERE message_id = ?1")
        .unwrap()
        .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (pid, pdata) in parts {
        let mut p: Value = serde_json::from_str(&pdata).unwrap();
        match p["type"].as_str() {
            Some("text") => p["text"] = json!("Done: burst reads RATE_BURST."),
            Some("tool") => {
                p["state"]["status"] = json!("completed");
                p["state"]["output"] = json!("edited");
            }
            _ => continue,
        }
        c.execute(
            "UPDATE part SET data = ?1 WHERE id = ?2",
            rusqlite::params![p.to_string(), pid],
        )
        .unwrap();
    }
    drop(c);
    got.clear();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        got.iter()
            .map(|r| (r.role, r.text.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                Role::Assistant,
                "Done: burst reads RATE_BURST.\n\nedit {\"filePath\":\"/home/dev/src/ratelimit/src/limiter.ts\"}"
            ),
            (Role::ToolResult, "edited"),
        ]
    );
    assert_eq!((s.written, s.report.records), (2, 13));
    fs::remove_dir_all(d).unwrap();
}

/// A message whose `data` is NULL, one whose `data` is a BLOB, and a part
/// whose `data` is NULL: each a counted skip at its rowid, the messages
/// after them read; the next run counts none of them again. (A NULL
/// `data` failed the batch: nothing in or after it was ever read.)
#[test]
fn a_row_of_the_wrong_type_is_a_counted_skip_not_a_wall() {
    let d = tmpdir("null-data");
    let c = Connection::open(d.join("opencode.db")).unwrap();
    c.execute_batch(&DDL.replace("data TEXT NOT NULL", "data TEXT"))
        .unwrap();
    c.execute(
        "INSERT INTO session VALUES ('ses_1', 'p', NULL, '/proj', 't', 1, 1)",
        [],
    )
    .unwrap();
    user(&c, "msg_1", 1, "one");
    c.execute(
        "INSERT INTO message VALUES ('msg_2', 'ses_1', 2, 2, NULL)",
        [],
    )
    .unwrap();
    c.execute(
        "INSERT INTO message VALUES ('msg_3', 'ses_1', 3, 3, x'7b7d')",
        [],
    )
    .unwrap();
    user(&c, "msg_4", 4, "four");
    c.execute(
        "INSERT INTO part VALUES ('prt_bad', 'msg_4', 'ses_1', 5, 5, NULL)",
        [],
    )
    .unwrap();
    let state = d.join("state");
    let run = || {
        Archive::builder()
            .path(&d)
            .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>])
            .state(&state)
            .build()
    };
    let mut got = Vec::new();
    let s = run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let keys: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.key.as_str(), r.text.as_str()))
        .collect();
    assert_eq!(keys, [("ses_1:msg_1", "one"), ("ses_1:msg_4", "four")]);
    assert_eq!(s.report.skipped, 3);
    let skips: Vec<(u64, String)> = s
        .report
        .skips
        .iter()
        .map(|k| (k.line, k.reason.to_string()))
        .collect();
    assert_eq!(skips.iter().map(|k| k.0).collect::<Vec<_>>(), [2, 3, 4]);
    assert!(
        skips[0].1.contains("message msg_2: data is NULL"),
        "{skips:?}"
    );
    assert!(
        skips[1].1.contains("message msg_3: data is a BLOB"),
        "{skips:?}"
    );
    assert!(
        skips[2]
            .1
            .contains("part prt_bad of message msg_4: data is NULL"),
        "{skips:?}"
    );
    let s = run().backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!((s.written, s.report.skipped), (0, 3));
    fs::remove_dir_all(d).unwrap();
}

/// A message's `data` and a part's that are text but not UTF-8: each a
/// counted skip at its message's rowid, saying so, the rest read, alike
/// with one job, with several (the batches read ahead, the text checked on
/// the counting thread) and in a stats run (the parts glanced at, by
/// either thread).
#[test]
fn data_that_is_not_utf8_is_a_counted_skip_however_it_is_read() {
    let d = tmpdir("not-utf8");
    let (_, c) = new_db(&d, true);
    user(&c, "msg_1", 1, "one");
    c.execute(
        "INSERT INTO message VALUES ('msg_2', 'ses_1', 2, 2, \
         CAST(x'7b22726f6c65223a2275736572ff227d' AS TEXT))",
        [],
    )
    .unwrap();
    user(&c, "msg_3", 3, "three");
    c.execute(
        "INSERT INTO part VALUES ('prt_bad', 'msg_3', 'ses_1', 4, 4, \
         CAST(x'7b2274797065223a2274657874ff227d' AS TEXT))",
        [],
    )
    .unwrap();
    drop(c);
    let want_skips = [
        (2, "message msg_2: data is not UTF-8 text".to_owned()),
        (
            3,
            "part prt_bad of message msg_3: data is not UTF-8 text".to_owned(),
        ),
    ];
    let skips = |r: &mem_ingest::Report| -> Vec<(u64, String)> {
        r.skips
            .iter()
            .map(|k| (k.line, k.reason.to_string()))
            .collect()
    };
    for jobs in [1, 2] {
        let b = || {
            Archive::builder()
                .path(&d)
                .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>])
                .jobs(jobs)
                .build()
        };
        let mut got = Vec::new();
        let s = b().backfill(&mut ForEach(|r| got.push(r))).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        let keys: Vec<(&str, &str)> = got
            .iter()
            .map(|r| (r.key.as_str(), r.text.as_str()))
            .collect();
        assert_eq!(keys, [("ses_1:msg_1", "one"), ("ses_1:msg_3", "three")]);
        let found = skips(&s.report);
        assert_eq!(found.len(), 2, "{found:?}");
        for ((line, why), (want_line, want)) in found.iter().zip(&want_skips) {
            assert_eq!(line, want_line);
            assert!(why.contains(want.as_str()), "{why}");
        }
        let u = b().usage().unwrap();
        assert!(u.failures.is_empty(), "{:?}", u.failures);
        assert_eq!(skips(&u.report), found, "jobs {jobs}");
        assert_eq!(u.report.records, 2, "jobs {jobs}");
    }
    fs::remove_dir_all(d).unwrap();
}

/// A message whose id is text but not UTF-8 fails the read of its
/// database, naming it and saying what it could not read (the id is the
/// message's identity: there is no record to skip to), with one job and
/// with several (the batches read ahead): the batch it is in is not read,
/// the message before it in that batch included (OpenCode's ids are
/// ASCII it makes itself: this is a damaged database, said, not guessed
/// at).
#[test]
fn a_message_id_that_is_not_utf8_fails_the_read_naming_the_database() {
    let d = tmpdir("id-not-utf8");
    let (db, c) = new_db(&d, true);
    user(&c, "msg_1", 1, "one");
    c.execute(
        "INSERT INTO message VALUES (CAST(x'6d73675fff' AS TEXT), 'ses_1', 2, 2, \
         '{\"role\":\"user\"}')",
        [],
    )
    .unwrap();
    drop(c);
    for jobs in [1, 2] {
        let s = Archive::builder()
            .path(&d)
            .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>])
            .jobs(jobs)
            .build()
            .backfill(&mut ForEach(|_| {}))
            .unwrap();
        assert_eq!(s.written, 0, "jobs {jobs}");
        assert_eq!(s.failures.len(), 1, "jobs {jobs}: {:?}", s.failures);
        assert_eq!(Path::new(&s.failures[0].0), db, "jobs {jobs}");
        assert!(
            s.failures[0].1.contains("cannot read its messages"),
            "jobs {jobs}: {}",
            s.failures[0].1
        );
    }
    fs::remove_dir_all(d).unwrap();
}

/// Two different answers in two sessions (not a fork: no parent), without
/// `time.created`, whose first calls are equal in every field (tokens,
/// cost, place, provider, model): the second answer's equal call is taken
/// for a copy (deduplication by content), and only that call: the usage
/// rows (the `usage` report, the store's) sum to the stats, the second
/// answer's other call kept (it was taken out with the copy, every row at
/// the answer's line).
#[test]
fn a_call_taken_for_a_copy_takes_out_its_own_usage_row_only() {
    let d = tmpdir("copy-row");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    c.execute(
        "INSERT INTO session VALUES ('ses_2', 'p', NULL, '/other', 't', 1, 1)",
        [],
    )
    .unwrap();
    let answer = |id: &str, session: &str, calls: &[(u64, u64)]| {
        let data = json!({"role": "assistant", "time": {"completed": 9}, "modelID": "m1",
            "providerID": "p1", "tokens": tokens(0, 0), "cost": 0});
        c.execute(
            "INSERT INTO message VALUES (?1, ?2, 1, 1, ?3)",
            rusqlite::params![id, session, data.to_string()],
        )
        .unwrap();
        for (n, &(i, o)) in calls.iter().enumerate() {
            let part = json!({"type": "step-finish", "reason": "stop", "cost": 0.5,
                "tokens": tokens(i, o)});
            c.execute(
                "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                rusqlite::params![
                    format!("prt_{id}_{n}"),
                    id,
                    session,
                    n as i64,
                    part.to_string()
                ],
            )
            .unwrap();
        }
    };
    answer("msg_1", "ses_1", &[(100, 20), (300, 40)]);
    answer("msg_2", "ses_2", &[(100, 20), (500, 50)]);
    let s = archive(&a, None).stats().unwrap();
    // The equal call counted once: 100 + 300 + 500.
    assert_eq!((s.report.usage.input, s.report.usage.output), (900, 110));
    let u = archive(&a, None).usage().unwrap();
    assert!(u.failures.is_empty(), "{:?}", u.failures);
    let rows: Vec<(u64, u32, u64)> = u
        .usage
        .iter()
        .map(|r| (r.line, r.seq, r.usage.input))
        .collect();
    assert_eq!(rows, [(1, 0, 100), (1, 1, 300), (2, 1, 500)]);
    assert_eq!(u.usage.iter().map(|r| r.usage.input).sum::<u64>(), 900);
    fs::remove_dir_all(d).unwrap();
}

/// With several jobs the batches after the marks are read ahead on a
/// thread of their own: the records, stats, usage rows and checkpoint are
/// those of one job, over several batches (700 messages, 256 a batch),
/// answers still streaming (pending, then final at a second run), tool
/// parts, and a stats run (no record built: parts glanced at) equal to
/// the backfill's counts.
#[test]
fn reading_ahead_with_several_jobs_gives_what_one_job_gives() {
    let d = tmpdir("ahead");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (_, c) = new_db(&a, true);
    c.execute_batch("BEGIN").unwrap();
    for i in 0..350_i64 {
        user(
            &c,
            &format!("msg_{i:04}_u"),
            i * 10,
            &format!("question {i}"),
        );
        let id = format!("msg_{i:04}_a");
        // Every 50th answer still streaming at the first run.
        assistant(
            &c,
            &id,
            i * 10 + 1,
            &format!("answer {i}"),
            i % 50 != 7,
            (i as u64, 1),
        );
        if i % 3 == 0 {
            put_part(
                &c,
                &format!("prt_{id}_tool"),
                &id,
                i * 10 + 3,
                &json!({"type": "tool", "callID": format!("c{i}"), "tool": "bash",
                    "state": {"status": "completed", "input": {"command": "ls"},
                    "output": "a\nb \"c\"", "metadata": {"exit": 0}}}),
            );
        }
    }
    c.execute_batch("COMMIT").unwrap();
    let run = |jobs: usize, state: &Path, stats: bool| {
        let b = Archive::builder()
            .path(&a)
            .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>])
            .jobs(jobs)
            .state(state)
            .build();
        if stats {
            let s = b.usage().unwrap();
            assert!(s.failures.is_empty(), "{:?}", s.failures);
            let rows: Vec<(u64, u32, u64)> = s
                .usage
                .iter()
                .map(|r| (r.line, r.seq, r.usage.input))
                .collect();
            return (
                Vec::new(),
                format!(
                    "{:?} {:?} {:?}",
                    s.report.roles, s.report.usage, s.report.skipped
                ),
                rows,
            );
        }
        let mut got = Vec::new();
        let s = b.backfill(&mut ForEach(|r| got.push(r))).unwrap();
        (
            keys_texts(&got),
            format!(
                "{:?} {:?} {:?}",
                s.report.roles, s.report.usage, s.report.skipped
            ),
            Vec::new(),
        )
    };
    let finish = |c: &Connection| {
        for i in (7..350_i64).step_by(50) {
            assistant(
                c,
                &format!("msg_{i:04}_a"),
                i * 10 + 1,
                &format!("answer {i}"),
                true,
                (i as u64, 1),
            );
        }
    };
    let one = (d.join("one.state"), d.join("one-stats.state"));
    let two = (d.join("two.state"), d.join("two-stats.state"));
    let first = (run(1, &one.0, false), run(1, &one.1, true));
    // Two of the seven answers streaming have a tool part (57, 207).
    assert_eq!(first.0 .0.len(), 350 + 343 + 115, "{}", first.0 .1);
    assert_eq!((run(2, &two.0, false), run(2, &two.1, true)), first);
    finish(&c);
    let second = (run(1, &one.0, false), run(1, &one.1, true));
    assert_eq!(second.0 .0.len(), 7 + 2);
    assert_eq!((run(3, &two.0, false), run(3, &two.1, true)), second);
    assert_eq!(fs::read(&one.0).unwrap(), fs::read(&two.0).unwrap());
    fs::remove_dir_all(d).unwrap();
}

/// With several jobs the thread taking the batches is kept on its CPU
/// while the one reading ahead starts off it (`sys::keep_on`), and runs
/// where it could before once the read is done: a library caller's thread
/// is never left kept. Read on a thread of its own (its CPUs are changed).
#[test]
fn the_thread_taking_the_batches_runs_where_it_could_after_the_read() {
    use mem_ingest_parse::{rows, sys, SourceOptions};
    let d = tmpdir("kept");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let (db, c) = new_db(&a, true);
    c.execute_batch("BEGIN").unwrap();
    for i in 0..600_i64 {
        user(
            &c,
            &format!("msg_{i:04}_u"),
            i * 10,
            &format!("question {i}"),
        );
    }
    c.execute_batch("COMMIT").unwrap();
    let (may, during, young, n, after) = std::thread::spawn(move || {
        let may = sys::allowed_cpus();
        let opened = std::time::Instant::now();
        let mut src = rows::open(&OpenCode, &db, None, &SourceOptions::new().jobs(2));
        assert!(src.next_entry().unwrap().is_some());
        let during = (sys::allowed_cpus(), sys::current_cpu());
        // Kept for 50 ms from the first batch: still kept if read sooner.
        let young = opened.elapsed() < std::time::Duration::from_millis(40);
        let mut n = 1;
        while src.next_entry().unwrap().is_some() {
            n += 1;
        }
        drop(src);
        (may, during, young, n, sys::allowed_cpus())
    })
    .join()
    .unwrap();
    assert_eq!(n, 600);
    assert_eq!(after, may);
    if may.len() > 1 && young {
        assert_eq!(during.0.len(), 1, "{during:?}");
        assert_eq!(Some(during.0[0]), during.1);
    }
    fs::remove_dir_all(d).unwrap();
}
