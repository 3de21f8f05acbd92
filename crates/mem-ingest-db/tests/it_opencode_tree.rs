//! OpenCode's pre-1.2 JSON tree (`storage/`) read through the engine,
//! alone and beside the database its 1.2 migration filled with the same
//! messages under the same ids: each message once, its usage once,
//! whichever store is read first (one run, or a checkpointed run of the
//! tree and the database appearing later); a message the database lacks
//! (issue #13818) read from the tree; an orphan part, a damaged file, a
//! message without parts. The shared fixture's tree and database, and
//! tokscale's message file, at the end (ignored in a plain clone).

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
        "mem-ingest-db-opencode-tree-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn put(path: &Path, v: &Value) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// A message file of session `ses_1` (the message with its id and
/// session id, as OpenCode wrote them).
fn message(data: &Path, id: &str, v: &Value) {
    let mut v = v.clone();
    v["id"] = json!(id);
    v["sessionID"] = json!("ses_1");
    put(&data.join(format!("storage/message/ses_1/{id}.json")), &v);
}

fn part(data: &Path, msg: &str, id: &str, v: &Value) {
    let mut v = v.clone();
    v["id"] = json!(id);
    v["sessionID"] = json!("ses_1");
    v["messageID"] = json!(msg);
    put(&data.join(format!("storage/part/{msg}/{id}.json")), &v);
}

fn tokens(i: u64, o: u64, r: u64, w: u64) -> Value {
    json!({"input": i, "output": o, "reasoning": 0, "cache": {"read": r, "write": w}})
}

/// A JSON tree in `data/storage`: session `ses_1` of project `p1` in
/// `/proj`, and
/// - `msg_1`: a user message, a text and a file part;
/// - `msg_2`: an answer of two calls (two step-finish parts: 10+4 and
///   5+2 tokens, costs 0.1 and 0.2; its own `tokens` the last call's),
///   reasoning, text and a finished `bash` call;
/// - `msg_3`: an answer not finished (no `time.completed`);
/// - `msg_4`: a damaged file (cut short);
/// - `msg_5`: a finished answer without parts (tokscale's shape): its
///   own tokens (100, 50, cache 20 and 10);
/// - `msg_6`: a user message with a text part and a damaged part;
/// - an orphan part folder, `part/msg_9/`.
fn tree(data: &Path) {
    let s = data.join("storage");
    put(
        &s.join("project/p1.json"),
        &json!({"id": "p1", "worktree": "/proj", "vcs": "git", "time": {"created": 1}}),
    );
    put(
        &s.join("session/p1/ses_1.json"),
        &json!({"id": "ses_1", "projectID": "p1", "directory": "/proj", "title": "t",
            "version": "0.15.0", "time": {"created": 1, "updated": 2}}),
    );
    message(
        data,
        "msg_1",
        &json!({"role": "user", "time": {"created": 1000}}),
    );
    part(
        data,
        "msg_1",
        "prt_1a",
        &json!({"type": "text", "text": "hello"}),
    );
    part(
        data,
        "msg_1",
        "prt_1b",
        &json!({"type": "file", "mime": "text/plain", "filename": "a.rs", "url": "file:///proj/a.rs"}),
    );
    message(
        data,
        "msg_2",
        &json!({"role": "assistant", "time": {"created": 2000, "completed": 2900},
            "parentID": "msg_1", "modelID": "m1", "providerID": "p1", "cost": 0.3,
            "tokens": tokens(5, 2, 0, 0), "finish": "stop",
            "path": {"cwd": "/proj/sub", "root": "/proj"}}),
    );
    part(
        data,
        "msg_2",
        "prt_2a",
        &json!({"type": "reasoning", "text": "think", "time": {"start": 2001, "end": 2002}}),
    );
    part(
        data,
        "msg_2",
        "prt_2b",
        &json!({"type": "text", "text": "answer"}),
    );
    part(
        data,
        "msg_2",
        "prt_2c",
        &json!({"type": "tool", "callID": "call_1", "tool": "bash", "state": {
            "status": "completed", "input": {"command": "ls"}, "output": "a.rs\n",
            "metadata": {"exit": 0}, "time": {"start": 2100, "end": 2200}}}),
    );
    part(
        data,
        "msg_2",
        "prt_2d",
        &json!({"type": "step-finish", "reason": "tool-calls", "cost": 0.1, "tokens": tokens(10, 4, 0, 0)}),
    );
    part(
        data,
        "msg_2",
        "prt_2e",
        &json!({"type": "step-finish", "reason": "stop", "cost": 0.2, "tokens": tokens(5, 2, 0, 0)}),
    );
    message(
        data,
        "msg_3",
        &json!({"role": "assistant", "time": {"created": 3000}, "modelID": "m1",
            "providerID": "p1", "tokens": tokens(0, 0, 0, 0), "cost": 0}),
    );
    part(
        data,
        "msg_3",
        "prt_3a",
        &json!({"type": "text", "text": ""}),
    );
    fs::write(
        s.join("message/ses_1/msg_4.json"),
        b"{\"role\": \"user\", \"time\": {\"cre",
    )
    .unwrap();
    message(
        data,
        "msg_5",
        &json!({"role": "assistant", "time": {"created": 5000, "completed": 5100},
            "modelID": "m2", "providerID": "p2", "tokens": tokens(100, 50, 20, 10)}),
    );
    message(
        data,
        "msg_6",
        &json!({"role": "user", "time": {"created": 6000}}),
    );
    part(
        data,
        "msg_6",
        "prt_6a",
        &json!({"type": "text", "text": "still here"}),
    );
    fs::write(s.join("part/msg_6/prt_6b.json"), b"{\"type\": \"te").unwrap();
    part(
        data,
        "msg_9",
        "prt_9a",
        &json!({"type": "text", "text": "orphan"}),
    );
}

/// What the 1.2 migration does: the tree's messages and parts (those that
/// parse) copied into `data/opencode.db` under the same ids, `data`
/// without the ids; its files left in place.
fn migrate(data: &Path) -> Connection {
    let c = Connection::open(data.join("opencode.db")).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT,
           directory TEXT NOT NULL, title TEXT NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
           time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
           session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         INSERT INTO session VALUES ('ses_1', 'p1', NULL, '/proj', 't', 1, 2);",
    )
    .unwrap();
    let read = |p: &Path| -> Option<serde_json::Map<String, Value>> {
        serde_json::from_slice(&fs::read(p).ok()?).ok()
    };
    let s = data.join("storage");
    for e in fs::read_dir(s.join("message/ses_1")).unwrap() {
        let p = e.unwrap().path();
        let Some(mut m) = read(&p) else { continue };
        let id = p.file_stem().unwrap().to_str().unwrap().to_owned();
        m.remove("id");
        m.remove("sessionID");
        let t = m["time"]["created"].as_i64().unwrap();
        c.execute(
            "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3)",
            rusqlite::params![id, t, Value::Object(m).to_string()],
        )
        .unwrap();
        let Ok(parts) = fs::read_dir(s.join("part").join(&id)) else {
            continue;
        };
        for e in parts {
            let p = e.unwrap().path();
            let Some(mut d) = read(&p) else { continue };
            let pid = p.file_stem().unwrap().to_str().unwrap().to_owned();
            for k in ["id", "sessionID", "messageID"] {
                d.remove(k);
            }
            // The migration's time, one for all.
            c.execute(
                "INSERT INTO part VALUES (?1, ?2, 'ses_1', 99, 99, ?3)",
                rusqlite::params![pid, id, Value::Object(d).to_string()],
            )
            .unwrap();
        }
    }
    c
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

/// A backfill of `dir` (with the state at `state`), its summary and
/// records; no file failed.
fn backfill(dir: &Path, state: Option<&Path>) -> (mem_ingest::archive::Summary, Vec<OwnedRecord>) {
    let mut got = Vec::new();
    let s = archive(dir, state)
        .backfill(&mut ForEach(|r| got.push(r)))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    (s, got)
}

fn sorted(got: &[OwnedRecord]) -> Vec<(String, Role, String)> {
    let mut v: Vec<_> = got
        .iter()
        .map(|r| (r.key.clone(), r.role, r.text.clone()))
        .collect();
    v.sort();
    v
}

fn k(key: &str, role: Role, text: &str) -> (String, Role, String) {
    (key.to_owned(), role, text.to_owned())
}

/// The tree's records (`msg_3` not final yet).
fn tree_records() -> Vec<(String, Role, String)> {
    vec![
        k("ses_1:msg_1", Role::User, "hello\n\n[file a.rs]"),
        k(
            "ses_1:msg_2",
            Role::Assistant,
            "think\n\nanswer\n\nbash {\"command\":\"ls\"}",
        ),
        k("ses_1:msg_2:prt_2c", Role::ToolResult, "a.rs\n"),
        k("ses_1:msg_5", Role::Assistant, ""),
        k("ses_1:msg_6", Role::User, "still here"),
    ]
}

/// Input, output, cache read, cache write, total tokens.
fn usage(s: &mem_ingest::archive::Summary) -> (u64, u64, u64, u64, u64) {
    let u = &s.report.usage;
    (
        u.input,
        u.output,
        u.cache_read,
        u.cache_write,
        u.total_tokens,
    )
}

/// The tree's usage: `msg_2`'s two calls (10+4, 5+2) and `msg_5`'s own
/// tokens (100+50, cache 20 and 10).
const TREE_USAGE: (u64, u64, u64, u64, u64) = (115, 56, 20, 10, 201);

#[test]
fn a_tree_alone_gives_each_final_message_once_with_its_parts_and_usage_per_call() {
    let d = tmpdir("alone");
    let data = d.join("data");
    tree(&data);
    let state = d.join("state");
    let (s, got) = backfill(&data, Some(&state));
    assert_eq!(sorted(&got), tree_records());
    // The project: the session file's directory (not the answer's cwd).
    assert!(got.iter().all(|r| r.project == "/proj"), "{got:?}");
    assert!(got.iter().all(|r| r.source == "opencode:ses_1"), "{got:?}");
    let a = got.iter().find(|r| r.key == "ses_1:msg_2").unwrap();
    assert_eq!(
        (
            a.model.as_deref(),
            a.provider.as_deref(),
            a.stop_reason.as_deref()
        ),
        (Some("m1"), Some("p1"), Some("stop"))
    );
    assert_eq!(a.kinds, ["thinking", "text", "toolCall"]);
    let t = got.iter().find(|r| r.key == "ses_1:msg_2:prt_2c").unwrap();
    assert_eq!(
        (t.command.as_deref(), t.exit_code, t.is_error),
        (Some("ls"), Some(0), Some(false))
    );
    assert_eq!(usage(&s), TREE_USAGE);
    assert!(
        (s.report.usage.cost - 0.3).abs() < 1e-9,
        "{}",
        s.report.usage.cost
    );
    // The damaged message file and the damaged part: counted skips naming
    // them; the orphan part: nothing.
    let mut skips: Vec<(String, String)> = s
        .skips
        .iter()
        .map(|k| (k.path.clone(), k.reason.clone()))
        .collect();
    skips.sort();
    assert_eq!(skips.len(), 2, "{skips:?}");
    assert!(
        skips[0].0.ends_with("storage/message/ses_1/msg_4.json"),
        "{skips:?}"
    );
    assert!(skips[0].1.contains("message msg_4: EOF"), "{skips:?}");
    assert!(
        skips[1].0.ends_with("storage/message/ses_1/msg_6.json"),
        "{skips:?}"
    );
    assert!(
        skips[1].1.contains("storage/part/msg_6/prt_6b.json: EOF"),
        "{skips:?}"
    );
    assert_eq!(s.report.skipped, 2);

    // Again: nothing new. Then the answer finished (its part first, its
    // file last, as OpenCode writes them): it alone.
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!(s.written, 0);
    part(
        &data,
        "msg_3",
        "prt_3a",
        &json!({"type": "text", "text": "done now"}),
    );
    part(
        &data,
        "msg_3",
        "prt_3b",
        &json!({"type": "step-finish", "cost": 0.5, "tokens": tokens(7, 3, 0, 0)}),
    );
    // A part's write alone is not seen: the message file did not change.
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!(s.written, 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    message(
        &data,
        "msg_3",
        &json!({"role": "assistant", "time": {"created": 3000, "completed": 3500},
            "modelID": "m1", "providerID": "p1", "tokens": tokens(7, 3, 0, 0), "cost": 0.5}),
    );
    let (s, got) = backfill(&data, Some(&state));
    assert_eq!(
        sorted(&got),
        [k("ses_1:msg_3", Role::Assistant, "done now")]
    );
    assert_eq!(s.written, 1);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_tree_and_the_database_it_was_migrated_to_give_each_message_once_in_one_run() {
    let d = tmpdir("both");
    let data = d.join("data");
    tree(&data);
    let c = migrate(&data);
    // Issue #13818: a message the migration lost, the tree its only copy.
    c.execute("DELETE FROM message WHERE id = 'msg_6'", [])
        .unwrap();
    c.execute("DELETE FROM part WHERE message_id = 'msg_6'", [])
        .unwrap();
    // A message written after the migration, in the database alone.
    c.execute(
        "INSERT INTO message VALUES ('msg_7', 'ses_1', 7000, 7000, ?1)",
        [json!({"role": "user", "time": {"created": 7000}}).to_string()],
    )
    .unwrap();
    c.execute(
        "INSERT INTO part VALUES ('prt_7a', 'msg_7', 'ses_1', 7000, 7000, ?1)",
        [json!({"type": "text", "text": "after 1.2"}).to_string()],
    )
    .unwrap();
    drop(c);
    let mut want = tree_records();
    want.push(k("ses_1:msg_7", Role::User, "after 1.2"));
    want.sort();
    for state in [None, Some(d.join("state"))] {
        let (s, got) = backfill(&data, state.as_deref());
        assert_eq!(sorted(&got), want);
        assert_eq!(usage(&s), TREE_USAGE);
        // And the database alone counts the same (msg_6 has no usage).
        let only_db = archive(&data.join("opencode.db"), None)
            .backfill(&mut ForEach(|_| {}))
            .unwrap();
        assert_eq!(usage(&only_db), TREE_USAGE);
    }
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_tree_read_in_a_checkpointed_run_and_its_database_appearing_later_add_nothing_twice() {
    let d = tmpdir("later");
    let data = d.join("data");
    tree(&data);
    let state = d.join("state");
    let (s, got) = backfill(&data, Some(&state));
    assert_eq!(sorted(&got), tree_records());
    assert_eq!(usage(&s), TREE_USAGE);
    // OpenCode 1.2 migrates the tree, then writes a message of its own.
    let c = migrate(&data);
    c.execute(
        "INSERT INTO message VALUES ('msg_7', 'ses_1', 7000, 7000, ?1)",
        [
            json!({"role": "assistant", "time": {"created": 7000, "completed": 7100},
            "modelID": "m1", "providerID": "p1"})
            .to_string(),
        ],
    )
    .unwrap();
    c.execute(
        "INSERT INTO part VALUES ('prt_7a', 'msg_7', 'ses_1', 7000, 7000, ?1)",
        [json!({"type": "step-finish", "cost": 0.01, "tokens": tokens(1, 1, 0, 0)}).to_string()],
    )
    .unwrap();
    drop(c);
    let (s, got) = backfill(&data, Some(&state));
    assert_eq!(sorted(&got), [k("ses_1:msg_7", Role::Assistant, "")]);
    assert_eq!(s.written, 1);
    // The run's usage: the archive's, each call once (the tree's
    // unchanged files keep their counts; the database's copies none).
    assert_eq!(usage(&s), (116, 57, 20, 10, 203));
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!((s.written, usage(&s)), (0, (116, 57, 20, 10, 203)));
    fs::remove_dir_all(d).unwrap();
}

/// Moves a file's modification time a minute on (`touch`): the engine
/// reads it again, its content unchanged.
fn touch(path: &Path) {
    let f = fs::File::options().append(true).open(path).unwrap();
    let t = f.metadata().unwrap().modified().unwrap() + std::time::Duration::from_secs(60);
    f.set_modified(t).unwrap();
}

#[test]
fn a_tree_message_file_read_again_after_its_database_keeps_its_copies_out_of_the_counts() {
    let d = tmpdir("touched");
    let data = d.join("data");
    tree(&data);
    drop(migrate(&data));
    let state = d.join("state");
    // The database first (by path): the tree's items are its copies.
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|_| {}))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(usage(&s), TREE_USAGE);
    let before = (s.report.records, s.report.no_record, s.report.lines);
    // Two message files touched (an answer of two calls, one without
    // parts): read again, nothing new, their copies still copies.
    for m in ["msg_2", "msg_5"] {
        touch(&data.join(format!("storage/message/ses_1/{m}.json")));
    }
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!((s.written, s.reread), (0, 2));
    assert_eq!(usage(&s), TREE_USAGE);
    assert_eq!(
        (s.report.records, s.report.no_record, s.report.lines),
        before
    );
    // And once more, unchanged: not read.
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!((s.written, s.reread, usage(&s)), (0, 0, TREE_USAGE));
    fs::remove_dir_all(d).unwrap();
}

/// The shared fixture's data folder: its database and the tree of its
/// first session (which the database holds too).
fn fixture(dir: &Path) {
    let out = Command::new("python3")
        .arg(shared::samples().join("opencode/make_fixture.py"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
#[ignore = "needs ../shared: samples/opencode/make_fixture.py"]
fn the_fixtures_tree_alone_and_beside_its_database_gives_its_messages_once() {
    let d = tmpdir("fixture");
    let data = d.join("data");
    fixture(&data);
    // Beside the database: what the database alone gives.
    let read = |p: &Path| {
        let (s, got) = backfill(p, None);
        (sorted(&got), usage(&s))
    };
    let (both, both_usage) = read(&data);
    let (db, db_usage) = read(&data.join("opencode.db"));
    assert_eq!(both, db);
    assert_eq!(both_usage, db_usage);
    assert_eq!(both.len(), 11);
    // The tree alone: its session's user message, answer and tool result,
    // as the database gives them; its one call.
    fs::remove_file(data.join("opencode.db")).unwrap();
    let (tree, tree_usage) = read(&data);
    let first: Vec<_> = db
        .iter()
        .filter(|r| tree.iter().any(|t| t.0 == r.0))
        .cloned()
        .collect();
    assert_eq!(tree, first);
    assert_eq!(tree.len(), 3);
    assert_eq!(tree_usage, (12_450, 611, 0, 12_100, 25_289));
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/opencode/tokscale"]
fn tokscales_message_file_without_parts_is_an_answer_with_its_own_tokens() {
    let file = shared::samples().join(
        "opencode/tokscale/packages/core/__test__/fixtures/.local/share/opencode/storage/message/test-project/msg_test001.json",
    );
    let (s, got) = backfill(&file, None);
    // The session id is its folder's name (a third party's, not an id's
    // shape), as OpenCode's migration takes it.
    assert_eq!(
        sorted(&got),
        [k("test-project:msg_test001", Role::Assistant, "")]
    );
    assert_eq!(got[0].model.as_deref(), Some("claude-3-5-sonnet-20241022"));
    assert_eq!(got[0].timestamp, Some(1_733_011_200_000));
    assert_eq!(usage(&s), (1000, 500, 200, 100, 1800));
}

/// Sessions `ses_1` (with the tree's messages) and another root session
/// of the other shard of two, with a child session (`parentID`) of it,
/// each a user message in the tree; all migrated to the database.
#[test]
fn shards_of_a_tree_and_its_database_write_each_message_once_between_them() {
    use mem_ingest::checkpoint::Shard;
    let d = tmpdir("shards");
    let data = d.join("data");
    tree(&data);
    let shard = |s: &str| mem_ingest_parse::rows::shard_of(&format!("opencode:{s}"), 2);
    let other = (0..100)
        .map(|i| format!("ses_o{i}"))
        .find(|s| shard(s) != shard("ses_1"))
        .unwrap();
    let s = data.join("storage");
    let child = "ses_child";
    for (sid, parent) in [(other.as_str(), None), (child, Some(other.as_str()))] {
        let mut v = json!({"id": sid, "projectID": "p1", "directory": "/proj"});
        if let Some(p) = parent {
            v["parentID"] = json!(p);
        }
        put(&s.join(format!("session/p1/{sid}.json")), &v);
        let mid = format!("msg_{sid}");
        put(
            &s.join(format!("message/{sid}/{mid}.json")),
            &json!({"id": mid, "sessionID": sid, "role": "user", "time": {"created": 9000}}),
        );
        put(
            &s.join(format!("part/{mid}/prt_{sid}.json")),
            &json!({"type": "text", "text": format!("in {sid}")}),
        );
    }
    let c = migrate(&data);
    for (sid, parent) in [(other.as_str(), None), (child, Some(other.as_str()))] {
        c.execute(
            "INSERT INTO session VALUES (?1, 'p1', ?2, '/proj', 't', 3, 3)",
            rusqlite::params![sid, parent],
        )
        .unwrap();
        let mid = format!("msg_{sid}");
        c.execute(
            "INSERT INTO message VALUES (?1, ?2, 9000, 9000, ?3)",
            rusqlite::params![
                mid,
                sid,
                json!({"role": "user", "time": {"created": 9000}}).to_string()
            ],
        )
        .unwrap();
        c.execute(
            "INSERT INTO part VALUES (?1, ?2, ?3, 99, 99, ?4)",
            rusqlite::params![
                format!("prt_{sid}"),
                mid,
                sid,
                json!({"type": "text", "text": format!("in {sid}")}).to_string()
            ],
        )
        .unwrap();
    }
    drop(c);
    let mut want = tree_records();
    want.push(k(
        &format!("{other}:msg_{other}"),
        Role::User,
        &format!("in {other}"),
    ));
    want.push(k(
        &format!("{child}:msg_{child}"),
        Role::User,
        &format!("in {child}"),
    ));
    want.sort();
    let mut all = Vec::new();
    let mut input = 0;
    for k in 0..2 {
        let state = d.join(format!("state-{k}"));
        let run = || {
            Archive::builder()
                .path(&data)
                .formats(vec![Arc::new(OpenCode) as Arc<dyn Format>])
                .shard(Shard { k, n: 2 })
                .state(&state)
                .build()
        };
        let mut got = Vec::new();
        let s = run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        assert!(!got.is_empty(), "shard {k} wrote nothing");
        // A lineage's messages in one shard: the child with its parent.
        let sessions: std::collections::BTreeSet<&str> =
            got.iter().map(|r| r.session.as_str()).collect();
        assert_eq!(sessions.contains(child), sessions.contains(other.as_str()));
        input += s.report.usage.input;
        all.extend(got);
        let s = run().backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
        assert_eq!(s.written, 0);
    }
    assert_eq!(sorted(&all), want);
    assert_eq!(input, TREE_USAGE.0);
    fs::remove_dir_all(d).unwrap();
}

/// Hostile files in a tree: message files of every wrong shape (an
/// array, a string, `null`, a number, a role of the wrong type, nesting
/// deeper than the parser goes, bytes that are not UTF-8, a number out of
/// range, cut JSON, empty, whitespace only, a folder named like one) and
/// part files likewise:
/// no panic and no failure, each damaged one a counted skip naming it,
/// the good message beside them read; a second run with the state reads
/// nothing again.
#[test]
fn hostile_files_in_a_tree_are_counted_skips_and_the_rest_is_read() {
    let d = tmpdir("hostile");
    let data = d.join("data");
    let m = data.join("storage/message/ses_1");
    fs::create_dir_all(&m).unwrap();
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let bad: [(&str, &[u8]); 8] = [
        ("msg_a", b"[1, 2]"),
        ("msg_b", b"\"text\""),
        ("msg_c", b"null"),
        ("msg_d", b"12"),
        ("msg_e", deep.as_bytes()),
        ("msg_f", b"{\"role\": \"user\", \"x\": \"\xff\xfe\"}"),
        (
            "msg_g",
            b"{\"role\": \"assistant\", \"time\": {\"created\": 1e400, \"completed\": 2}}",
        ),
        ("msg_h", b"{\"role\": \"user\" \"time\": 1}"),
    ];
    for (id, bytes) in bad {
        fs::write(m.join(format!("{id}.json")), bytes).unwrap();
    }
    fs::write(m.join("msg_empty.json"), b"").unwrap();
    fs::write(m.join("msg_blank.json"), b"  \n\t ").unwrap();
    fs::create_dir_all(m.join("msg_dir.json")).unwrap();
    // A role of the wrong type: no record, counted under unknown roles.
    message(&data, "msg_r", &json!({"role": 7, "time": {"created": 1}}));
    // The good message, its parts of every shape.
    message(
        &data,
        "msg_ok",
        &json!({"role": "user", "time": {"created": 5}}),
    );
    part(
        &data,
        "msg_ok",
        "prt_1",
        &json!({"type": "text", "text": "kept"}),
    );
    let p = data.join("storage/part/msg_ok");
    fs::write(p.join("prt_2.json"), b"[]").unwrap();
    fs::write(
        p.join("prt_3.json"),
        b"{\"type\": \"text\", \"text\": \"\xc3\"}",
    )
    .unwrap();
    fs::write(p.join("prt_4.json"), deep.as_bytes()).unwrap();
    fs::create_dir_all(p.join("prt_5.json")).unwrap();
    fs::write(p.join("prt_6.json"), b"{\"type\": 5, \"text\": [\"x\"]}").unwrap();
    // A part larger than a document may be (sparse: nothing written).
    fs::File::create(p.join("prt_7.json"))
        .unwrap()
        .set_len((256 << 20) + 1)
        .unwrap();
    let state = d.join("state");
    let (s, got) = backfill(&data, Some(&state));
    assert_eq!(sorted(&got), [k("ses_1:msg_ok", Role::User, "kept")]);
    let mut skips: Vec<(String, String)> = s
        .skips
        .iter()
        .map(|k| {
            let name = Path::new(&k.path).file_name().unwrap().to_string_lossy();
            (name.into_owned(), k.reason.clone())
        })
        .collect();
    skips.sort();
    let named: Vec<&str> = skips.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        named,
        [
            "msg_a.json",
            "msg_b.json",
            "msg_c.json",
            "msg_d.json",
            "msg_e.json",
            "msg_f.json",
            "msg_g.json",
            "msg_h.json",
            "msg_ok.json",
            "msg_ok.json",
            "msg_ok.json",
            "msg_ok.json",
        ],
        "{skips:?}"
    );
    for (i, want) in [
        (0, "message msg_a: not a JSON object"),
        (1, "message msg_b: not a JSON object"),
        (2, "message msg_c: not a JSON object"),
        (3, "message msg_d: not a JSON object"),
        (4, "message msg_e: recursion limit exceeded"),
        (5, "message msg_f: not UTF-8"),
        (6, "message msg_g: number out of range"),
        (7, "message msg_h: expected `,` or `}`"),
    ] {
        assert!(skips[i].1.contains(want), "{i}: {skips:?}");
    }
    let parts: Vec<&str> = skips[8..].iter().map(|s| s.1.as_str()).collect();
    // (A part that is JSON but not an object, `prt_2`, or whose fields
    // are of other types, `prt_6`, is a part of no type, as a database's
    // part `data` of that shape: nothing of it taken, nothing skipped.)
    assert!(
        parts[0].contains("part/msg_ok/prt_5.json: a folder, not a part file"),
        "{parts:?}"
    );
    assert!(
        parts[1].contains("part/msg_ok/prt_3.json: not UTF-8"),
        "{parts:?}"
    );
    assert!(
        parts[2].contains("part/msg_ok/prt_4.json: recursion limit exceeded"),
        "{parts:?}"
    );
    assert!(
        parts[3].contains("part/msg_ok/prt_7.json: larger than the 256 MiB a document may be"),
        "{parts:?}"
    );
    assert_eq!(s.report.unknown_roles, [("(none)".to_owned(), 1)]);
    // Every item and every skip a line of the report.
    let r = &s.report;
    assert_eq!(r.records + r.no_record + r.skipped, r.lines, "{r:?}");
    let s = archive(&data, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!((s.written, s.failures.len()), (0, 0));
    fs::remove_dir_all(d).unwrap();
}

/// Runs `f` on a thread of its own: `None` when it has not returned in
/// 60 seconds (a read blocked on a FIFO).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60)).ok()
}

fn mkfifo(path: &Path) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let o = Command::new("mkfifo").arg(path).output().unwrap();
    assert!(o.status.success(), "{o:?}");
}

#[test]
fn links_and_special_files_in_a_tree_are_counted_skips_not_read() {
    use std::os::unix::fs::symlink;
    let d = tmpdir("links");
    let data = d.join("data");
    let s = data.join("storage");
    let outside = d.join("outside");
    put(
        &outside.join("x.json"),
        &json!({"type": "text", "text": "leaked"}),
    );
    put(
        &outside.join("parts/prt_1.json"),
        &json!({"type": "text", "text": "leaked too"}),
    );
    put(
        &outside.join("sessions/ses_3.json"),
        &json!({"id": "ses_3", "directory": "/leaked"}),
    );
    // ses_1: its session file names no directory; its project file a FIFO.
    put(
        &s.join("session/p1/ses_1.json"),
        &json!({"id": "ses_1", "projectID": "p1"}),
    );
    mkfifo(&s.join("project/p1.json"));
    message(
        &data,
        "msg_1",
        &json!({"role": "user", "time": {"created": 1}}),
    );
    part(
        &data,
        "msg_1",
        "prt_1a",
        &json!({"type": "text", "text": "kept"}),
    );
    let p = s.join("part/msg_1");
    symlink(outside.join("x.json"), p.join("prt_1z.json")).unwrap();
    mkfifo(&p.join("prt_1b.json"));
    symlink("/dev/zero", p.join("prt_1c.json")).unwrap();
    // msg_2: its part folder a link out of the archive.
    message(
        &data,
        "msg_2",
        &json!({"role": "user", "time": {"created": 2}}),
    );
    symlink(outside.join("parts"), s.join("part/msg_2")).unwrap();
    // ses_2: its session file a FIFO.
    mkfifo(&s.join("session/p1/ses_2.json"));
    let m3 = json!({"id": "msg_3", "sessionID": "ses_2", "role": "user", "time": {"created": 3}});
    put(&s.join("message/ses_2/msg_3.json"), &m3);
    put(
        &s.join("part/msg_3/prt_3a.json"),
        &json!({"type": "text", "text": "third"}),
    );
    // ses_3: its session file in a linked project folder.
    symlink(outside.join("sessions"), s.join("session/p3")).unwrap();
    let m4 = json!({"id": "msg_4", "sessionID": "ses_3", "role": "user", "time": {"created": 4}});
    put(&s.join("message/ses_3/msg_4.json"), &m4);
    put(
        &s.join("part/msg_4/prt_4a.json"),
        &json!({"type": "text", "text": "fourth"}),
    );
    let dir = data.clone();
    let run = within_a_minute(move || {
        let (s, got) = backfill(&dir, None);
        (got, s)
    });
    let Some((got, s)) = run else {
        panic!("the run hangs on a FIFO of the tree");
    };
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let texts: Vec<(String, String)> = got
        .iter()
        .map(|r| (r.key.clone(), format!("{} {}", r.project, r.text)))
        .collect();
    assert_eq!(
        texts,
        [
            ("ses_1:msg_1".to_owned(), " kept".to_owned()),
            // (Its parts not read: a question of no text.)
            ("ses_1:msg_2".to_owned(), " ".to_owned()),
            ("ses_2:msg_3".to_owned(), " third".to_owned()),
            ("ses_3:msg_4".to_owned(), " fourth".to_owned()),
        ]
    );
    // Every item and every skip a line of the report.
    let r = &s.report;
    assert_eq!(r.records + r.no_record + r.skipped, r.lines, "{r:?}");
    let mut skips: Vec<String> = s
        .skips
        .iter()
        .map(|k| {
            let at = Path::new(&k.path).strip_prefix(s_root(&data)).unwrap();
            let why = k.reason.replace(&*s_root(&data).to_string_lossy(), "");
            format!("{}: {why}", at.display())
        })
        .collect();
    skips.sort();
    let link = "a symbolic link: not followed (it may lead out of the archive)";
    let special = "not a regular file (a FIFO, a device or a socket): not read";
    assert_eq!(
        skips,
        [
            format!("message/ses_1/msg_1.json: file not read: part file /part/msg_1/prt_1b.json: {special}"),
            format!("message/ses_1/msg_1.json: file not read: part file /part/msg_1/prt_1c.json: {link}"),
            format!("message/ses_1/msg_1.json: file not read: part file /part/msg_1/prt_1z.json: {link}"),
            format!("message/ses_1/msg_1.json: file not read: project file /project/p1.json: {special}"),
            format!("message/ses_1/msg_2.json: file not read: part folder /part/msg_2: {link}"),
            format!("message/ses_1/msg_2.json: file not read: project file /project/p1.json: {special}"),
            format!("message/ses_2/msg_3.json: file not read: session file /session/p1/ses_2.json: {special}"),
            // (Not found elsewhere: the linked folder might hold it.)
            format!("message/ses_2/msg_3.json: file not read: session folder /session/p3: {link}"),
            format!("message/ses_3/msg_4.json: file not read: session folder /session/p3: {link}"),
        ],
    );
    fs::remove_dir_all(d).unwrap();
}

/// The `storage/` folder of a data folder.
fn s_root(data: &Path) -> PathBuf {
    data.join("storage")
}

#[test]
fn a_message_with_its_parts_larger_than_a_document_is_a_counted_skip_naming_it() {
    let d = tmpdir("too-much");
    let data = d.join("data");
    message(
        &data,
        "msg_1",
        &json!({"role": "user", "time": {"created": 1}}),
    );
    part(
        &data,
        "msg_1",
        "prt_1",
        &json!({"type": "text", "text": "small"}),
    );
    // A part of exactly the most a document may be (sparse): each file
    // within the limit, the message with its parts past it.
    fs::File::create(data.join("storage/part/msg_1/prt_2.json"))
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    message(
        &data,
        "msg_2",
        &json!({"role": "user", "time": {"created": 2}}),
    );
    part(
        &data,
        "msg_2",
        "prt_3",
        &json!({"type": "text", "text": "read"}),
    );
    let (s, got) = backfill(&data, None);
    assert_eq!(sorted(&got), [k("ses_1:msg_2", Role::User, "read")]);
    let skips: Vec<(String, String)> = s
        .skips
        .iter()
        .map(|k| {
            let name = Path::new(&k.path).file_name().unwrap().to_string_lossy();
            (name.into_owned(), k.reason.clone())
        })
        .collect();
    assert_eq!(
        skips,
        [(
            "msg_1.json".to_owned(),
            "file not read: message msg_1 with its parts is larger than the 256 MiB a \
             document may be: not read (nothing of it is emitted; read again when its file \
             changes)"
                .to_owned()
        )]
    );
    assert_eq!(
        (s.report.records, s.report.skipped, s.report.lines),
        (1, 1, 2)
    );
    fs::remove_dir_all(d).unwrap();
}
