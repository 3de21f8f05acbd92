//! `--agent opencode` and OpenCode's pre-1.2 `storage/` JSON tree: found
//! with no PATH in the data folder, alone or beside the databases; read in
//! a checkpointed run, then its database (the 1.2 migration's copy, same
//! ids) appearing beside it: no record and no usage row twice, in the
//! NDJSON (`--state`, `-o`, `--usage-out`) and in the store (`--db`). The
//! format's own cases are `crates/mem-ingest-db/tests/it_opencode_tree.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::Connection;
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("opencode-tree", name)
}

fn bin(home: &Path) -> Command {
    let mut c = common::cli();
    c.env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("OPENCODE_DB");
    c
}

fn ndjson(b: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn put(path: &Path, v: &Value) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, serde_json::to_vec(v).unwrap()).unwrap();
}

#[test]
fn agent_opencode_with_no_path_reads_a_data_folder_holding_only_a_tree() {
    let home = tmpdir("only-tree");
    let s = home.join(".local/share/opencode/storage");
    put(
        &s.join("session/p1/ses_1.json"),
        &json!({"id": "ses_1", "projectID": "p1", "directory": "/proj"}),
    );
    put(
        &s.join("message/ses_1/msg_1.json"),
        &json!({"id": "msg_1", "sessionID": "ses_1", "role": "user", "time": {"created": 1_700_000_000_000_i64}}),
    );
    put(
        &s.join("part/msg_1/prt_1.json"),
        &json!({"id": "prt_1", "sessionID": "ses_1", "messageID": "msg_1", "type": "text", "text": "hello"}),
    );
    put(
        &s.join("message/ses_1/msg_2.json"),
        &json!({"id": "msg_2", "sessionID": "ses_1", "role": "assistant", "modelID": "m1",
            "providerID": "p1", "time": {"created": 1_700_000_001_000_i64, "completed": 1_700_000_002_000_i64}}),
    );
    put(
        &s.join("part/msg_2/prt_2.json"),
        &json!({"id": "prt_2", "sessionID": "ses_1", "messageID": "msg_2", "type": "text", "text": "hi"}),
    );
    put(
        &s.join("part/msg_2/prt_3.json"),
        &json!({"id": "prt_3", "sessionID": "ses_1", "messageID": "msg_2", "type": "step-finish",
            "cost": 0.01, "tokens": {"input": 7, "output": 3, "reasoning": 0, "cache": {"read": 0, "write": 0}}}),
    );
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "opencode"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got: Vec<(String, String, String)> = ndjson(&o.stdout)
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["text"].as_str().unwrap().to_owned(),
                r["project"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want = |k: &str, t: &str| (k.to_owned(), t.to_owned(), "/proj".to_owned());
    assert_eq!(
        got,
        [want("ses_1:msg_1", "hello"), want("ses_1:msg_2", "hi")]
    );
    let o = bin(&home)
        .args(["stats", "--json", "-q", "--agent", "opencode"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["records"].as_u64(), v["usage"]["input"].as_u64()),
        (Some(2), Some(7)),
        "{v}"
    );
    // Neither a database nor a tree: both named.
    fs::remove_dir_all(home.join(".local/share/opencode/storage/message")).unwrap();
    let o = bin(&home)
        .args(["stats", "-q", "--agent", "opencode"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("no storage/message/"), "{err}");
    fs::remove_dir_all(home).unwrap();
}

/// `(records' keys, usage rows' input summed)` of NDJSON outputs.
fn keys_and_input(records: &[Value], usage: &[Value]) -> (Vec<String>, u64) {
    let mut keys: Vec<String> = records
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    (
        keys,
        usage.iter().map(|u| u["input"].as_u64().unwrap()).sum(),
    )
}

#[test]
#[ignore = "needs ../shared: samples/opencode/make_fixture.py"]
fn a_tree_read_first_then_its_database_adds_no_record_or_usage_row_twice() {
    let home = tmpdir("later");
    let data = home.join(".local/share/opencode");
    let o = Command::new("python3")
        .arg(common::shared::samples().join("opencode/make_fixture.py"))
        .arg(&data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    // Before the migration: the tree alone.
    let db = data.join("opencode.db");
    let aside = home.join("opencode.db");
    fs::rename(&db, &aside).unwrap();
    let state = home.join("state");
    let store = home.join("memory.db");
    let (records, usage) = (home.join("records.ndjson"), home.join("usage.ndjson"));
    let run = || {
        let o = bin(&home)
            .args(["backfill", "-q", "--agent", "opencode", "--state"])
            .arg(&state)
            .arg("-o")
            .arg(&records)
            .arg("--usage-out")
            .arg(&usage)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = bin(&home)
            .args(["backfill", "-q", "--agent", "opencode", "--db"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let read = |p: &Path| ndjson(&fs::read(p).unwrap());
        keys_and_input(&read(&records), &read(&usage))
    };
    let (keys, input) = run();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert_eq!(input, 12_450);
    // The migration: the database, holding the tree's session too.
    fs::rename(&aside, &db).unwrap();
    let (keys, input) = run();
    let mut unique = keys.clone();
    unique.dedup();
    assert_eq!(keys, unique, "a record twice");
    assert_eq!(keys.len(), 11, "{keys:?}");
    // The usage rows: each call once, as `stats` counts them.
    let stats = bin(&home)
        .args(["stats", "--json", "-q", "--agent", "opencode"])
        .output()
        .unwrap();
    assert!(stats.status.success());
    let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(s["usage"]["input"], 70_052, "{s}");
    assert_eq!(input, 70_052);
    // The store: each record once, its usage table each call once.
    let c = Connection::open(&store).unwrap();
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
        .unwrap();
    let (rows, sum): (i64, i64) = c
        .query_row("SELECT COUNT(*), SUM(input) FROM usage", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((n, rows, sum), (11, 4, 70_052));
    let u = bin(&home)
        .args(["usage", "daily", "--json", "-q", "--db"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(u.status.success(), "{u:?}");
    let u: Value = serde_json::from_slice(&u.stdout).unwrap();
    assert_eq!(u["totals"]["inputTokens"], 70_052, "{u}");
    fs::remove_dir_all(home).unwrap();
}

/// A child session in the tree alone (a subagent's: `parentID` in its
/// session file) names its parent in the store, as the database's do.
#[test]
fn a_child_session_of_the_tree_names_its_parent_in_the_store() {
    let home = tmpdir("child");
    let s = home.join(".local/share/opencode/storage");
    for (sid, parent) in [("ses_p", None), ("ses_c", Some("ses_p"))] {
        let mut v = json!({"id": sid, "projectID": "p1", "directory": "/proj"});
        if let Some(p) = parent {
            v["parentID"] = json!(p);
        }
        put(&s.join(format!("session/p1/{sid}.json")), &v);
        let mid = format!("msg_{sid}");
        put(
            &s.join(format!("message/{sid}/{mid}.json")),
            &json!({"id": mid, "sessionID": sid, "role": "user", "time": {"created": 1_700_000_000_000_i64}}),
        );
        put(
            &s.join(format!("part/{mid}/prt_{sid}.json")),
            &json!({"type": "text", "text": "hello"}),
        );
    }
    let store = home.join("memory.db");
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "opencode", "--db"])
        .arg(&store)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c = Connection::open(&store).unwrap();
    let mut st = c
        .prepare("SELECT id, parent_session FROM sessions WHERE records > 0 ORDER BY id")
        .unwrap();
    let got: Vec<(String, Option<String>)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        [
            ("ses_c".to_owned(), Some("opencode:ses_p".to_owned())),
            ("ses_p".to_owned(), None)
        ]
    );
    fs::remove_dir_all(home).unwrap();
}

/// A data folder of a tree and the database its 1.2 migration made of it
/// (same ids): `ses_1`, a question (`msg_1`) and an answer of two calls
/// (`msg_2`: 7+3 and 8+4 tokens).
fn tree_and_database(data: &Path) {
    let s = data.join("storage");
    put(
        &s.join("session/p1/ses_1.json"),
        &json!({"id": "ses_1", "projectID": "p1", "directory": "/proj"}),
    );
    let t0 = 1_700_000_000_000_i64;
    let msgs = [
        ("msg_1", json!({"role": "user", "time": {"created": t0}})),
        (
            "msg_2",
            json!({"role": "assistant", "modelID": "m1", "providerID": "p1",
                "time": {"created": t0 + 1000, "completed": t0 + 2000}}),
        ),
    ];
    let tokens = |i: u64, o: u64| json!({"input": i, "output": o, "reasoning": 0, "cache": {"read": 0, "write": 0}});
    let parts = [
        ("msg_1", "prt_1", json!({"type": "text", "text": "hello"})),
        ("msg_2", "prt_2", json!({"type": "text", "text": "hi"})),
        (
            "msg_2",
            "prt_3",
            json!({"type": "step-finish", "cost": 0.01, "tokens": tokens(7, 3)}),
        ),
        (
            "msg_2",
            "prt_4",
            json!({"type": "step-finish", "cost": 0.02, "tokens": tokens(8, 4)}),
        ),
    ];
    let c = Connection::open(data.join("opencode.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT,
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
    for (id, m) in &msgs {
        let mut file = m.clone();
        file["id"] = json!(id);
        file["sessionID"] = json!("ses_1");
        put(&s.join(format!("message/ses_1/{id}.json")), &file);
        c.execute(
            "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3)",
            rusqlite::params![id, m["time"]["created"].as_i64(), m.to_string()],
        )
        .unwrap();
    }
    for (mid, pid, p) in &parts {
        let mut file = p.clone();
        file["id"] = json!(pid);
        file["sessionID"] = json!("ses_1");
        file["messageID"] = json!(mid);
        put(&s.join(format!("part/{mid}/{pid}.json")), &file);
        c.execute(
            "INSERT INTO part VALUES (?1, ?2, 'ses_1', 99, 99, ?3)",
            rusqlite::params![pid, mid, p.to_string()],
        )
        .unwrap();
    }
}

#[test]
fn a_tree_message_file_touched_after_its_database_was_read_adds_no_usage() {
    let home = tmpdir("touched");
    let data = home.join(".local/share/opencode");
    tree_and_database(&data);
    let (state, stats_state) = (home.join("state"), home.join("stats.state"));
    let store = home.join("memory.db");
    let (records, usage) = (home.join("records.ndjson"), home.join("usage.ndjson"));
    let run = || {
        let o = bin(&home)
            .args(["backfill", "-q", "--agent", "opencode", "--state"])
            .arg(&state)
            .arg("-o")
            .arg(&records)
            .arg("--usage-out")
            .arg(&usage)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = bin(&home)
            .args(["backfill", "-q", "--agent", "opencode", "--db"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let read = |p: &Path| ndjson(&fs::read(p).unwrap());
        let rows = read(&usage);
        let corrections = rows.iter().filter(|u| u["correction"] == true).count();
        let c = Connection::open(&store).unwrap();
        let store: (i64, i64, i64) = c
            .query_row(
                "SELECT (SELECT COUNT(*) FROM records), COUNT(*), SUM(input) FROM usage",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let stats = bin(&home)
            .args(["stats", "--json", "-q", "--agent", "opencode", "--state"])
            .arg(&stats_state)
            .output()
            .unwrap();
        assert!(stats.status.success());
        let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
        (
            keys_and_input(&read(&records), &rows),
            corrections,
            store,
            s["usage"]["input"].as_u64(),
        )
    };
    let want = (
        (vec!["ses_1:msg_1".to_owned(), "ses_1:msg_2".to_owned()], 15),
        0,
        (2, 2, 15),
        Some(15),
    );
    assert_eq!(run(), want);
    // The answer's file touched: read again, its copies still copies.
    let f = fs::File::options()
        .append(true)
        .open(data.join("storage/message/ses_1/msg_2.json"))
        .unwrap();
    let t = f.metadata().unwrap().modified().unwrap() + std::time::Duration::from_secs(60);
    f.set_modified(t).unwrap();
    assert_eq!(run(), want);
    fs::remove_dir_all(home).unwrap();
}
