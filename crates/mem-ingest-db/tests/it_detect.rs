//! A database named as a PATH under a name its agent never gives it (a
//! backup copy) is probed by its schema: the SQLite header and the
//! agent's tables, read read-only. It fell through to pi, the first
//! format ("not a session header: line holds NUL bytes").

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::{detect_format, Format};
use mem_ingest::sink::ForEach;
use rusqlite::Connection;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-db-detect-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// Every format this build reads, the database agents' registered.
fn all() -> Vec<Arc<dyn Format>> {
    mem_ingest_db::register();
    mem_ingest_parse::formats::builtin()
}

fn db(path: &Path, sql: &str) {
    let c = Connection::open(path).unwrap();
    c.execute_batch(sql).unwrap();
}

/// The keys of the records read from `path` named as a PATH with every
/// format, and the run's failures.
fn read(path: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let mut keys = Vec::new();
    let s = Archive::builder()
        .path(path)
        .formats(all())
        .build()
        .backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| keys.push(r.key)))
        .unwrap();
    let failures = s
        .failures
        .iter()
        .map(|(p, m)| (p.to_string(), m.to_string()))
        .collect();
    (keys, failures)
}

fn name_of(path: &Path) -> &'static str {
    all()[detect_format(&all(), path)].name()
}

#[test]
fn a_database_under_another_name_is_its_agents_by_its_tables() {
    let d = tmpdir("names");
    let opencode = d.join("backup-copy.db");
    db(
        &opencode,
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, parent_id TEXT,
           directory TEXT, title TEXT, time_created INTEGER, time_updated INTEGER);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
           time_updated INTEGER, data TEXT);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,
           time_created INTEGER, time_updated INTEGER, data TEXT);
         INSERT INTO session VALUES ('ses_1', 'p', NULL, '/proj', 't', 1, 1);
         INSERT INTO message VALUES ('msg_1', 'ses_1', 1, 1,
           '{\"role\":\"user\",\"time\":{\"created\":1}}');
         INSERT INTO part VALUES ('prt_1', 'msg_1', 'ses_1', 1, 1,
           '{\"type\":\"text\",\"text\":\"hi\"}');",
    );
    let goose = d.join("goose-backup.sqlite");
    db(
        &goose,
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_total_tokens INTEGER, provider_name TEXT, model_config_json TEXT,
           updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         INSERT INTO sessions VALUES ('s1', '/w', NULL, NULL, NULL, 'p', NULL, NULL);
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)
           VALUES ('a', 's1', 'user', '[{\"type\":\"text\",\"text\":\"x\"}]', 1767225600);",
    );
    let cursor = d.join("state-copy.vscdb");
    db(
        &cursor,
        "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         INSERT INTO cursorDiskKV VALUES ('bubbleId:c1:b1', '{\"type\":1,\"text\":\"hello\"}');
         INSERT INTO cursorDiskKV VALUES ('composerData:c1',
           '{\"composerId\":\"c1\",\"status\":\"completed\"}');",
    );
    // Another SQLite database, of no agent: no agent's, as before (pi's,
    // failing named).
    let other = d.join("other.db");
    db(&other, "CREATE TABLE t (x INTEGER);");
    assert_eq!(
        [&opencode, &goose, &cursor, &other].map(|p| name_of(p)),
        ["opencode", "goose", "cursor", "pi"]
    );
    assert_eq!(read(&opencode), (vec!["ses_1:msg_1".to_owned()], vec![]));
    assert_eq!(read(&goose), (vec!["s1:a".to_owned()], vec![]));
    assert_eq!(read(&cursor), (vec!["c1:b1".to_owned()], vec![]));
    let (keys, failures) = read(&other);
    assert_eq!((keys.len(), failures.len()), (0, 1));
    fs::remove_dir_all(d).unwrap();
}
