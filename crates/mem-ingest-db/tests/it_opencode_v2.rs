//! OpenCode 2.x's `session_message` table read through the engine, after
//! the 1.x tables of the same database: the rows 2.x's migration copied
//! (the same ids) are not emitted again, the messages written there alone
//! are, each once (an unfinished answer once it is final, across runs
//! with a state), with their usage; a damaged row is a counted skip. The
//! shared fixture built with `--v2` gives the records and usage of the
//! one built without.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::Format;
use mem_ingest::sink::ForEach;
use mem_ingest::{OwnedRecord, Role};
use mem_ingest_db::OpenCode;
use rusqlite::Connection;
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/shared.rs"]
mod shared;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-db-opencode-v2-{name}-{}",
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
CREATE TABLE session_message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, type TEXT NOT NULL,
  seq INTEGER NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  data TEXT NOT NULL);
CREATE UNIQUE INDEX session_message_session_seq_idx ON session_message (session_id, seq);
INSERT INTO session VALUES ('ses_1', 'p', NULL, '/proj', 't', 1, 1);
";

fn v1(c: &Connection, id: &str, t: i64, data: &Value, parts: &[(&str, Value)]) {
    c.execute(
        "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3)",
        rusqlite::params![id, t, data.to_string()],
    )
    .unwrap();
    for (pid, p) in parts {
        c.execute(
            "INSERT INTO part VALUES (?1, ?2, 'ses_1', ?3, ?3, ?4)",
            rusqlite::params![pid, id, t, p.to_string()],
        )
        .unwrap();
    }
}

fn v2(c: &Connection, id: &str, seq: i64, kind: &str, data: &str) {
    c.execute(
        "INSERT INTO session_message VALUES (?1, 'ses_1', ?2, ?3, ?3, ?3, ?4) \
         ON CONFLICT(id) DO UPDATE SET data = excluded.data",
        rusqlite::params![id, kind, seq, data],
    )
    .unwrap();
}

fn tokens(i: u64, o: u64, cr: u64) -> Value {
    json!({"input": i, "output": o, "reasoning": 0, "cache": {"read": cr, "write": 0}})
}

fn run(dir: &Path, state: &Path, got: &mut Vec<OwnedRecord>) -> mem_ingest::archive::Summary {
    Archive::builder()
        .path(dir)
        .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>])
        .state(state)
        .build()
        .backfill(&mut ForEach(|r| got.push(r)))
        .unwrap()
}

fn rows(got: &[OwnedRecord]) -> Vec<(String, Role, String)> {
    got.iter()
        .map(|r| (r.key.clone(), r.role, r.text.clone()))
        .collect()
}

fn row(k: &str, role: Role, t: &str) -> (String, Role, String) {
    (k.to_owned(), role, t.to_owned())
}

#[test]
fn rows_written_in_session_message_alone_are_read_once_and_its_copies_of_1x_rows_not() {
    let d = tmpdir("alone");
    let a = d.join("data");
    fs::create_dir_all(&a).unwrap();
    let c = Connection::open(a.join("opencode.db")).unwrap();
    c.execute_batch(DDL).unwrap();
    // 1.x rows, and 2.x's copies of them under the same ids.
    v1(
        &c,
        "msg_1",
        1000,
        &json!({"role": "user", "time": {"created": 1000}}),
        &[("prt_1", json!({"type": "text", "text": "hello"}))],
    );
    v1(
        &c,
        "msg_2",
        2000,
        &json!({"role": "assistant", "time": {"created": 2000, "completed": 2010},
                "modelID": "m1", "providerID": "p1", "tokens": tokens(100, 20, 0), "cost": 0.5}),
        &[
            ("prt_2", json!({"type": "text", "text": "hi"})),
            (
                "prt_3",
                json!({"type": "step-finish", "cost": 0.5, "tokens": tokens(100, 20, 0)}),
            ),
        ],
    );
    let copy_user = json!({"text": "hello", "files": [], "agents": [], "references": [],
        "time": {"created": 1000}});
    v2(&c, "msg_1", 1, "user", &copy_user.to_string());
    let copy_answer = json!({"agent": "build", "model": {"id": "m1", "providerID": "p1"},
        "content": [{"type": "text", "id": "prt_2", "text": "hi"}], "cost": 0.5,
        "tokens": tokens(100, 20, 0), "time": {"created": 2000, "completed": 2010}});
    v2(&c, "msg_2", 2, "assistant", &copy_answer.to_string());
    // Written in 2.x alone.
    let question = json!({"text": "what is in here?", "files": [{"filename": "a.rs"}],
        "agents": [], "references": [], "time": {"created": 3000}});
    v2(&c, "msg_3", 3, "user", &question.to_string());
    let answer = json!({"agent": "build", "model": {"id": "m2", "providerID": "p2"},
        "content": [
            {"type": "reasoning", "id": "r1", "text": "look first"},
            {"type": "tool", "id": "call_1", "name": "bash",
             "state": {"status": "completed", "input": {"command": "ls"},
                       "content": [{"type": "text", "text": "a.rs"}], "structured": {}},
             "time": {"created": 4001, "completed": 4002}},
            {"type": "text", "id": "t1", "text": "one file"}],
        "cost": 0.25, "tokens": tokens(300, 40, 5), "finish": "stop",
        "time": {"created": 4000, "completed": 4010}});
    v2(&c, "msg_4", 4, "assistant", &answer.to_string());
    v2(
        &c,
        "msg_5",
        5,
        "system",
        &json!({"text": "be brief", "time": {"created": 5000}}).to_string(),
    );
    v2(&c, "msg_6", 6, "idle", "{}");
    v2(&c, "msg_7", 7, "user", "not json");
    // An answer still streaming: a tool running, no time.completed.
    let mut streaming = json!({"agent": "build", "model": {"id": "m2", "providerID": "p2"},
        "content": [{"type": "tool", "id": "call_2", "name": "read",
                     "state": {"status": "running", "input": {"path": "a.rs"},
                               "content": [], "structured": {}},
                     "time": {"created": 8001}}],
        "time": {"created": 8000}});
    v2(&c, "msg_8", 8, "assistant", &streaming.to_string());

    let state = d.join("state");
    let mut got = Vec::new();
    let s = run(&a, &state, &mut got);
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(
        rows(&got),
        [
            row("ses_1:msg_1", Role::User, "hello"),
            row("ses_1:msg_2", Role::Assistant, "hi"),
            row("ses_1:msg_3", Role::User, "what is in here?\n\n[file a.rs]"),
            row(
                "ses_1:msg_4",
                Role::Assistant,
                "look first\n\nbash {\"command\":\"ls\"}\n\none file"
            ),
            row("ses_1:msg_4:call_1", Role::ToolResult, "a.rs"),
            row("ses_1:msg_5", Role::System, "be brief"),
        ]
    );
    let a4 = &got[3];
    assert_eq!(a4.kinds, ["thinking", "toolCall", "text"]);
    assert_eq!(
        (
            a4.provider.as_deref(),
            a4.model.as_deref(),
            a4.stop_reason.as_deref()
        ),
        (Some("p2"), Some("m2"), Some("stop"))
    );
    assert_eq!(a4.project, "/proj");
    assert_eq!(a4.tool_call_id.as_deref(), Some("call_1"));
    let t = &got[4];
    assert_eq!(
        (t.is_error, t.command.as_deref(), t.parent_id.as_deref()),
        (Some(false), Some("ls"), Some("msg_4"))
    );
    // Usage: the 1.x answer's call once (not its 2.x copy), the 2.x answer's.
    let u = &s.report.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.total_tokens),
        (400, 60, 5, 465)
    );
    assert!((u.cost - 0.75).abs() < 1e-9, "{}", u.cost);
    assert_eq!(s.report.skipped, 1);
    assert!(
        s.report.skips[0]
            .reason
            .to_string()
            .contains("session_message row msg_7"),
        "{:?}",
        s.report.skips
    );
    assert_eq!(s.report.unknown_roles, [("idle".to_owned(), 1)]);

    // Again: nothing new.
    got.clear();
    let again = run(&a, &state, &mut got);
    assert_eq!((again.written, got.len()), (0, 0));

    // The streaming answer finished in place: emitted once, its usage
    // counted once.
    streaming["content"][0]["state"]["status"] = json!("completed");
    streaming["content"][0]["state"]["content"] = json!([{"type": "text", "text": "fn main"}]);
    streaming["content"][0]["time"]["completed"] = json!(8002);
    streaming["time"]["completed"] = json!(8010);
    streaming["tokens"] = tokens(50, 5, 0);
    v2(&c, "msg_8", 8, "assistant", &streaming.to_string());
    got.clear();
    let third = run(&a, &state, &mut got);
    assert_eq!(
        rows(&got),
        [
            row("ses_1:msg_8", Role::Assistant, "read {\"path\":\"a.rs\"}"),
            row("ses_1:msg_8:call_2", Role::ToolResult, "fn main"),
        ]
    );
    assert_eq!(
        (third.report.usage.input, third.report.usage.output),
        (450, 65)
    );
    got.clear();
    let fourth = run(&a, &state, &mut got);
    assert_eq!((fourth.written, got.len()), (0, 0));

    // The row at the mark deleted (a revert) and its rowid taken by a new
    // one: caught by the guard, the table read again, only the new row
    // emitted.
    c.execute("DELETE FROM session_message WHERE id = 'msg_8'", [])
        .unwrap();
    v2(
        &c,
        "msg_9",
        9,
        "user",
        &json!({"text": "after the revert", "time": {"created": 9000}}).to_string(),
    );
    let rowid: i64 = c
        .query_row(
            "SELECT rowid FROM session_message WHERE id = 'msg_9'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rowid, 8, "the deleted row's rowid taken");
    got.clear();
    run(&a, &state, &mut got);
    assert_eq!(
        rows(&got),
        [row("ses_1:msg_9", Role::User, "after the revert")]
    );
    fs::remove_dir_all(d).unwrap();
}

fn fixture(dir: &Path, v2: bool) {
    let script = shared::samples().join("opencode/make_fixture.py");
    let mut c = Command::new("python3");
    c.arg(&script).arg(dir).arg("--no-legacy-json");
    if v2 {
        c.arg("--v2");
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
#[ignore = "needs ../shared: samples/opencode/make_fixture.py"]
fn the_fixture_with_its_2x_copy_gives_the_records_and_usage_of_the_one_without() {
    let d = tmpdir("fixture");
    let (one, two) = (d.join("v1"), d.join("v2"));
    fixture(&one, false);
    fixture(&two, true);
    let copies: i64 = Connection::open(two.join("opencode.db"))
        .unwrap()
        .query_row("SELECT count(*) FROM session_message", [], |r| r.get(0))
        .unwrap();
    assert!(copies >= 8, "{copies} rows in session_message");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let sa = run(&one, &d.join("s1"), &mut a);
    let sb = run(&two, &d.join("s2"), &mut b);
    assert!(!a.is_empty());
    assert_eq!(rows(&a), rows(&b));
    assert_eq!(sa.report.usage, sb.report.usage);
    assert_eq!(sa.report.records, sb.report.records);
    assert_eq!(sb.report.skipped, 0);
    fs::remove_dir_all(d).unwrap();
}
