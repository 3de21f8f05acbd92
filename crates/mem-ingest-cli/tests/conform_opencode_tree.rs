//! OpenCode's pre-1.2 `storage/` JSON tree against ccusage 20.0.24
//! (`ccusage opencode daily --json --offline`, `TZ=UTC`), which reads
//! `storage/message/**/*.json` beside the database: a database row wins
//! over a message file of the same id, and the files' own ids are added
//! (`../shared/spec/opencode-format.md` §13). Equal where it counts right
//! (a tree beside the database that holds the same messages, and a
//! message in the tree alone, of one call each); different by exactly
//! the calls before the last of an answer, where it counts the message's
//! own `tokens` (its last call's only) and we count every `step-finish`.
//!
//! Ignored in a plain clone: they need ccusage (`CCUSAGE`, else
//! `/tmp/ccusage-reference/node_modules/.bin/ccusage`, which `.ci/run`
//! installs).

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use rusqlite::Connection;
use serde_json::{json, Value};

const KEYS: [(&str, &str); 5] = [
    ("input", "inputTokens"),
    ("output", "outputTokens"),
    ("cache_read", "cacheReadTokens"),
    ("cache_write", "cacheCreationTokens"),
    ("total_tokens", "totalTokens"),
];

/// ccusage's totals (by our names) for the data folder `data`.
fn theirs(data: &Path, home: &Path) -> Value {
    let out = Command::new(common::ccusage())
        .args(["opencode", "daily", "--json", "--offline"])
        .env("TZ", "UTC")
        .env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env("OPENCODE_DATA_DIR", data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ccusage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    KEYS.iter()
        .map(|(ours, theirs)| (ours.to_string(), v["totals"][theirs].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Our `stats` usage (tokens only) for the data folder `data`.
fn ours(data: &Path) -> Value {
    let out = common::cli()
        .args(["stats", "--json", "-q", "--agent", "opencode"])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    KEYS.iter()
        .map(|(k, _)| (k.to_string(), s["usage"][k].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// 2026-01-01T00:00:00Z, plus `s` seconds.
fn at(s: i64) -> i64 {
    1_767_225_600_000 + s * 1000
}

fn tokens(i: u64, o: u64, r: u64, w: u64) -> Value {
    json!({"input": i, "output": o, "reasoning": 0, "cache": {"read": r, "write": w}})
}

/// An answer of session `ses_1` made of `calls` (each a step-finish
/// part), its own `tokens` its last call's, as OpenCode writes it.
fn answer(t: i64, calls: &[(u64, u64, u64, u64)]) -> (Value, Vec<Value>) {
    let last = calls.last().copied().unwrap_or_default();
    let msg = json!({"role": "assistant", "time": {"created": at(t), "completed": at(t + 5)},
        "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "cost": 0,
        "tokens": tokens(last.0, last.1, last.2, last.3)});
    let parts = calls
        .iter()
        .map(|c| json!({"type": "step-finish", "cost": 0, "tokens": tokens(c.0, c.1, c.2, c.3)}))
        .collect();
    (msg, parts)
}

/// Writes the message (and its parts) into the tree under `data`.
fn in_tree(data: &Path, id: &str, msg: &Value, parts: &[Value]) {
    let put = |p: &Path, v: &Value| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    };
    let s = data.join("storage");
    let mut m = msg.clone();
    m["id"] = json!(id);
    m["sessionID"] = json!("ses_1");
    put(&s.join(format!("message/ses_1/{id}.json")), &m);
    for (i, p) in parts.iter().enumerate() {
        let pid = format!("prt_{id}_{i}");
        let mut p = p.clone();
        p["id"] = json!(pid);
        p["sessionID"] = json!("ses_1");
        p["messageID"] = json!(id);
        put(&s.join(format!("part/{id}/{pid}.json")), &p);
    }
}

/// Writes the message (and its parts) into `data/opencode.db`.
fn in_db(data: &Path, id: &str, msg: &Value, parts: &[Value]) {
    let c = Connection::open(data.join("opencode.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE IF NOT EXISTS session (id TEXT PRIMARY KEY, directory TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
           time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
           session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         INSERT OR IGNORE INTO session VALUES ('ses_1', '/proj');",
    )
    .unwrap();
    let t = msg["time"]["created"].as_i64().unwrap();
    c.execute(
        "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3)",
        rusqlite::params![id, t, msg.to_string()],
    )
    .unwrap();
    for (i, p) in parts.iter().enumerate() {
        c.execute(
            "INSERT INTO part VALUES (?1, ?2, 'ses_1', ?3, ?3, ?4)",
            rusqlite::params![format!("prt_{id}_{i}"), id, t, p.to_string()],
        )
        .unwrap();
    }
}

fn n(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn a_tree_beside_its_database_and_a_message_in_the_tree_alone_equal_ccusage() {
    let d = common::tmpdir("conform-opencode-tree", "equal");
    let data = d.join("data");
    fs::create_dir_all(&data).unwrap();
    // Two answers in both stores (the migration's copies), one in the
    // tree alone (lost by the migration, issue #13818), one in the
    // database alone; one call each.
    for (id, t, call, tree, db) in [
        ("msg_a", 10, (1000, 100, 50, 20), true, true),
        ("msg_b", 20, (2000, 200, 0, 40), true, true),
        ("msg_c", 30, (300, 30, 5, 0), true, false),
        ("msg_d", 40, (4000, 400, 0, 0), false, true),
    ] {
        let (m, p) = answer(t, &[call]);
        if tree {
            in_tree(&data, id, &m, &p);
        }
        if db {
            in_db(&data, id, &m, &p);
        }
    }
    let t = theirs(&data, &d);
    assert_eq!(n(&t, "input"), 7300, "{t}");
    assert_eq!(ours(&data), t);
    // The tree alone.
    fs::remove_file(data.join("opencode.db")).unwrap();
    let t = theirs(&data, &d);
    assert_eq!(n(&t, "input"), 3300, "{t}");
    assert_eq!(ours(&data), t);
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn a_tree_answer_of_several_calls_is_counted_whole_where_ccusage_counts_its_last() {
    let d = common::tmpdir("conform-opencode-tree", "differ");
    let data = d.join("data");
    fs::create_dir_all(&data).unwrap();
    let calls = [(400, 40, 10, 0), (500, 50, 20, 5), (600, 60, 30, 0)];
    let (m, p) = answer(10, &calls);
    in_tree(&data, "msg_a", &m, &p);
    let (m, p) = answer(20, &[(70, 7, 0, 0)]);
    in_tree(&data, "msg_b", &m, &p);
    let t = theirs(&data, &d);
    let o = ours(&data);
    // Theirs: msg_a's last call and msg_b; ours: every call.
    assert_eq!(
        (
            n(&t, "input"),
            n(&t, "output"),
            n(&t, "cache_read"),
            n(&t, "cache_write")
        ),
        (670, 67, 30, 0),
        "{t}"
    );
    for (k, before) in [
        ("input", 900),
        ("output", 90),
        ("cache_read", 30),
        ("cache_write", 5),
    ] {
        assert_eq!(n(&o, k) - n(&t, k), before, "{k}: {o} {t}");
    }
    assert_eq!(
        n(&o, "total_tokens") - n(&t, "total_tokens"),
        900 + 90 + 30 + 5
    );
    fs::remove_dir_all(d).unwrap();
}
