//! Goose's legacy `<id>.jsonl` sessions on the command line: found with
//! no PATH in Goose's folders (a folder of legacy files alone, and beside
//! a database), and a legacy file named as a PATH told from the other
//! agents' JSONL by its first line. The format's own cases are
//! `crates/mem-ingest-db/tests/it_goose_legacy.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::Connection;
use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("goose-legacy", name)
}

fn bin(home: &Path) -> Command {
    let mut c = common::cli();
    c.env("HOME", home).env_remove("XDG_DATA_HOME");
    c
}

/// A legacy session file `<dir>/<id>.jsonl`: in `/p/<id>`, one user
/// message and its answer, 1,000 input and 200 output tokens accumulated.
fn legacy(dir: &Path, id: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let f = dir.join(format!("{id}.jsonl"));
    fs::write(
        &f,
        format!(
            "{{\"working_dir\":\"/p/{id}\",\"description\":\"t\",\"message_count\":2,\
             \"accumulated_total_tokens\":1200,\"accumulated_input_tokens\":1000,\
             \"accumulated_output_tokens\":200}}\n\
             {{\"role\":\"user\",\"created\":1735732800,\"content\":[{{\"type\":\"text\",\"text\":\"q {id}\"}}]}}\n\
             {{\"role\":\"assistant\",\"created\":1735732801,\"content\":[{{\"type\":\"text\",\"text\":\"a {id}\"}}]}}\n"
        ),
    )
    .unwrap();
    f
}

/// A database of one session `s1` in `/db` with one message, no usage.
fn database(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let c = Connection::open(dir.join("sessions.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_total_tokens INTEGER, provider_name TEXT, model_config_json TEXT,
           updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         INSERT INTO sessions VALUES ('20260101_1', '/db', NULL, NULL, NULL, NULL, NULL, NULL);
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)
           VALUES ('msg_a', '20260101_1', 'user', '[{\"type\":\"text\",\"text\":\"from db\"}]',
           1767225600);",
    )
    .unwrap();
}

fn texts(out: &[u8]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let r: Value = serde_json::from_slice(l).unwrap();
            (
                r["project"].as_str().unwrap().to_owned(),
                r["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    v.sort();
    v
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[test]
fn agent_goose_reads_the_legacy_files_of_its_folders_with_no_path() {
    let home = tmpdir("no-path");
    // `$GOOSE_PATH_ROOT/data/sessions`: legacy files alone, no database.
    let root = home.join("root");
    legacy(&root.join("data/sessions"), "20250101_120000");
    let o = bin(&home)
        .env("GOOSE_PATH_ROOT", &root)
        .args(["backfill", "-q", "--agent", "goose"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        texts(&o.stdout),
        pairs(&[
            ("/p/20250101_120000", "a 20250101_120000"),
            ("/p/20250101_120000", "q 20250101_120000")
        ])
    );
    // The XDG place: a database with legacy files beside it, and an older
    // store's folder of legacy files alone.
    let share = home.join(".local/share");
    database(&share.join("goose/sessions"));
    legacy(&share.join("goose/sessions"), "20250102_090000");
    legacy(&share.join("Block/goose/sessions"), "20250103_090000");
    // The legacy file of the database's session: read from the database
    // (its lines counted, none emitted, its project not one of `stats`').
    legacy(&share.join("goose/sessions"), "20260101_1");
    let stats = bin(&home)
        .args(["stats", "--json", "-q", "--agent", "goose"])
        .output()
        .unwrap();
    assert!(stats.status.success(), "{stats:?}");
    let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(
        (s["files"].as_u64(), s["records"].as_u64()),
        (Some(4), Some(5))
    );
    assert_eq!(s["entries"]["in_database"].as_u64(), Some(2), "{s}");
    let projects: Vec<&str> = s["by_project"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["project"].as_str().unwrap())
        .collect();
    assert!(!projects.contains(&"/p/20260101_1"), "{s}");
    assert_eq!(
        (s["usage"]["input"].as_u64(), s["usage"]["output"].as_u64()),
        (Some(2000), Some(400))
    );
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "goose"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        texts(&o.stdout),
        pairs(&[
            ("/db", "from db"),
            ("/p/20250102_090000", "a 20250102_090000"),
            ("/p/20250102_090000", "q 20250102_090000"),
            ("/p/20250103_090000", "a 20250103_090000"),
            ("/p/20250103_090000", "q 20250103_090000"),
        ])
    );
    fs::remove_dir_all(home).unwrap();
}

/// Named as a PATH, among every agent: its first line says it is Goose's
/// (a pi session beside it stays pi's).
#[test]
fn a_legacy_file_named_as_a_path_is_read_as_gooses() {
    let home = tmpdir("detect");
    let f = legacy(&home.join("anywhere"), "20250101_120000");
    let stats = bin(&home)
        .args(["stats", "--json", "-q"])
        .arg(&f)
        .arg(common::fixtures().join("hand-built.jsonl"))
        .output()
        .unwrap();
    assert!(stats.status.success(), "{stats:?}");
    let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let by = &s["by_source"];
    assert_eq!(by["goose"]["records"].as_u64(), Some(2), "{s}");
    assert_eq!(by["goose"]["usage"]["input"].as_u64(), Some(1000), "{s}");
    assert!(by["pi"]["records"].as_u64().unwrap() > 0, "{s}");
    fs::remove_dir_all(home).unwrap();
}
