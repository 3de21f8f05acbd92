//! Goose's database read through the engine: exact records, usage from the
//! ledger (and the growth of the accumulated columns where a session has
//! no ledger rows), a compaction that inserts a conversation again, the
//! same session in two databases counted once, the database's bytes
//! untouched.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::Format;
use mem_ingest::sink::ForEach;
use mem_ingest::Role;
use mem_ingest_db::Goose;
use rusqlite::Connection;

#[path = "../../mem-ingest/tests/common/shared.rs"]
mod shared;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mem-ingest-db-goose-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn archive(dir: &Path, state: Option<&Path>) -> Archive {
    let b = Archive::builder()
        .path(dir)
        .formats(vec![Arc::new(Goose) as Arc<dyn Format>]);
    match state {
        Some(s) => b.state(s).build(),
        None => b.build(),
    }
}

fn sha(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// A database of a schema before 14 (no ledger, no cache columns): one
/// session, its accumulated input and output.
#[test]
fn without_a_ledger_the_growth_of_the_accumulated_columns_is_counted_once() {
    let d = tmpdir("accumulated");
    let s = d.join("sessions");
    fs::create_dir_all(&s).unwrap();
    let c = Connection::open(s.join("sessions.db")).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_total_tokens INTEGER, provider_name TEXT, model_config_json TEXT,
           updated_at TIMESTAMP);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         INSERT INTO sessions VALUES ('20260101_1', '/w', 100, 10, 110, 'p',
           '{\"model_name\":\"m\"}', '2026-01-01 10:00:00');
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)
           VALUES ('msg_a', '20260101_1', 'user', '[{\"type\":\"text\",\"text\":\"hi\"}]', 1767225600);",
    )
    .unwrap();
    let state = d.join("state");
    let mut got = Vec::new();
    let first = archive(&s, Some(&state))
        .backfill(&mut ForEach(|r| got.push(r)))
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].key.as_str(), got[0].project.as_str()),
        ("20260101_1:msg_a", "/w")
    );
    assert_eq!(
        (
            first.report.usage.input,
            first.report.usage.output,
            first.report.usage.total_tokens
        ),
        (100, 10, 110)
    );
    // Nothing moved: nothing more.
    let again = archive(&s, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!(again.report.usage.input, 100);
    // A call more: its growth alone.
    c.execute(
        "UPDATE sessions SET accumulated_input_tokens = 150, accumulated_output_tokens = 25, \
         accumulated_total_tokens = 175",
        [],
    )
    .unwrap();
    let third = archive(&s, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!(
        (
            third.report.usage.input,
            third.report.usage.output,
            third.report.usage.total_tokens
        ),
        (150, 25, 175)
    );
    fs::remove_dir_all(d).unwrap();
}

/// A Goose data folder built by the shared fixture script.
fn fixture(dir: &Path) -> PathBuf {
    let script = shared::samples().join("goose/make_fixture.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dir.join("sessions/sessions.db")
}

fn roles_texts(got: &[mem_ingest::OwnedRecord]) -> Vec<(Role, String)> {
    got.iter().map(|r| (r.role, r.text.clone())).collect()
}

#[test]
#[ignore = "needs ../shared: samples/goose/make_fixture.py"]
fn the_fixture_database_gives_each_message_once_and_the_ledgers_usage() {
    let d = tmpdir("fixture");
    let data = d.join("data");
    let db = fixture(&data);
    let before = sha(&db);
    let state = d.join("state");
    let run = archive(&data.join("sessions"), Some(&state));
    let mut got = Vec::new();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(sha(&db), before, "the database file is never written");
    let want: Vec<(Role, &str)> =
        vec![
        (Role::User, "Why do bursts of 20 requests get 429s?"),
        (Role::System, "<turn-context>cwd=/home/dev/src/ratelimit</turn-context>"),
        (
            Role::Assistant,
            "The limiter config is probably in src/limiter.ts.\n\nLet me look at the limiter.\n\n\
             developer__shell {\"command\":\"grep -n burst src/limiter.ts\"}",
        ),
        (Role::ToolResult, "14:  burst: 10,\n"),
        (
            Role::Assistant,
            "`burst` is hard-coded to 10 at src/limiter.ts:14; bursts above 10 are rejected.",
        ),
        (Role::User, "Report how the bucket refills."),
        (Role::Assistant, "It refills once per second by `rate`."),
        (Role::User, "Rename Handler to RouteHandler everywhere."),
        (Role::Assistant, "Done for src/; tests next."),
        (Role::User, "Go on."),
        (Role::Assistant, "Tests updated."),
        (Role::User, "Say hello"),
        (Role::Assistant, "Hello from Goose!"),
    ];
    let want: Vec<(Role, String)> = want.into_iter().map(|(r, t)| (r, t.to_owned())).collect();
    assert_eq!(roles_texts(&got), want);
    assert_eq!(got[2].kinds, ["thinking", "text", "toolCall"]);
    assert_eq!(got[2].model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        got[3].tool_call_id.as_deref(),
        Some("toolu_01HxQ2fJ8kM3nP4rS5tU6vW7")
    );
    assert_eq!(got[7].project, "/home/dev/src/api");
    assert_eq!(
        got[0].key,
        "20260814_1:msg_8a4d1e2f-0b5c-4e8a-9d1f-1c2b3a4d5e6f"
    );
    // Usage: the five ledger rows, and the imported session's accumulated
    // columns (it has no ledger row).
    let u = &s.report.usage;
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens
        ),
        (64_800, 1_870, 18_000, 17_900, 66_670)
    );
    assert!((u.cost - 0.1322).abs() < 1e-9, "{}", u.cost);

    // A compaction: the session's conversation deleted and inserted again
    // under new row ids, with a summary message more.
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "BEGIN IMMEDIATE;
         CREATE TEMP TABLE keep AS SELECT message_id, session_id, role, content_json,
           created_timestamp, timestamp, metadata_json FROM messages
           WHERE session_id = '20260813_1' ORDER BY id;
         DELETE FROM messages WHERE session_id = '20260813_1';
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp,
           timestamp, metadata_json) SELECT * FROM keep;
         INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp,
           metadata_json) VALUES ('msg_summary', '20260813_1', 'user',
           '[{\"type\":\"text\",\"text\":\"Summary: renamed, tests updated.\"}]', 1786667000,
           '{\"userVisible\":true,\"agentVisible\":true}');
         COMMIT;",
    )
    .unwrap();
    drop(c);
    got.clear();
    let s = run.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        roles_texts(&got),
        [(Role::User, "Summary: renamed, tests updated.".to_owned())]
    );
    assert_eq!(s.written, 1);

    // The same database under an older place too: each message once, its
    // usage once (ccusage 20.0.24 counts such a session twice).
    let old = d.join("two/Block/goose/sessions");
    fs::create_dir_all(&old).unwrap();
    let new = d.join("two/goose/sessions");
    fs::create_dir_all(&new).unwrap();
    for to in [&old, &new] {
        Connection::open(&db)
            .unwrap()
            .execute("VACUUM INTO ?1", [to.join("sessions.db").to_str().unwrap()])
            .unwrap();
    }
    got.clear();
    let s = archive(&d.join("two"), None)
        .backfill(&mut ForEach(|r| got.push(r)))
        .unwrap();
    assert_eq!(got.len(), 14);
    assert_eq!(
        (s.report.usage.input, s.report.usage.output),
        (64_800, 1_870)
    );
    fs::remove_dir_all(d).unwrap();
}

/// A database of schema 14 (no ledger) with one session of 100 input
/// tokens accumulated, and no messages yet.
fn accumulated_db(s: &Path) -> Connection {
    fs::create_dir_all(s).unwrap();
    let c = Connection::open(s.join("sessions.db")).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_total_tokens INTEGER, provider_name TEXT, model_config_json TEXT,
           updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         INSERT INTO sessions VALUES ('s1', '/w', 100, 10, 110, 'p',
           '{\"model_name\":\"m\"}', '2026-01-01 00:00:00');",
    )
    .unwrap();
    c
}

/// Adds a user message `mid` ("x") to session s1.
fn add_message(c: &Connection, mid: &str) {
    c.execute(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)
         VALUES (?1, 's1', 'user', '[{\"type\":\"text\",\"text\":\"x\"}]', 1767225600)",
        [mid],
    )
    .unwrap();
}

/// The newest message deleted makes Goose read again from the start: the
/// session's accumulated usage, counted by the first run, is not counted
/// again (it was 200 after the rescan).
#[test]
fn a_rescan_does_not_count_the_accumulated_usage_again() {
    let d = tmpdir("acc-rescan");
    let s = d.join("sessions");
    let c = accumulated_db(&s);
    add_message(&c, "a");
    add_message(&c, "b");
    let state = d.join("state");
    let first = archive(&s, Some(&state))
        .backfill(&mut ForEach(|_| {}))
        .unwrap();
    assert_eq!((first.written, first.report.usage.input), (2, 100));
    c.execute("DELETE FROM messages WHERE message_id = 'b'", [])
        .unwrap();
    let again = archive(&s, Some(&state))
        .backfill(&mut ForEach(|_| {}))
        .unwrap();
    assert_eq!((again.written, again.report.usage.input), (0, 100));
    // Grown after the rescan: only the growth is new.
    c.execute("UPDATE sessions SET accumulated_input_tokens = 150", [])
        .unwrap();
    let grown = archive(&s, Some(&state))
        .backfill(&mut ForEach(|_| {}))
        .unwrap();
    assert_eq!(grown.report.usage.input, 150);
    fs::remove_dir_all(d).unwrap();
}

/// Messages a, b, c read; a backup holding a alone restored; Goose writes
/// d, e, f as ids 2-4 (past the old mark of 3): all three are read (the
/// row at the mark is another message), not f alone.
#[test]
fn a_restored_backup_then_new_messages_past_the_mark_are_all_read() {
    let d = tmpdir("backup");
    let s = d.join("sessions");
    let db = s.join("sessions.db");
    let c = accumulated_db(&s);
    c.execute_batch("PRAGMA journal_mode = DELETE").unwrap();
    add_message(&c, "a");
    let backup = d.join("backup.db");
    c.execute("VACUUM INTO ?1", [backup.to_str().unwrap()])
        .unwrap();
    add_message(&c, "b");
    add_message(&c, "c");
    drop(c);
    let state = d.join("state");
    let mut got: Vec<String> = Vec::new();
    archive(&s, Some(&state))
        .backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| got.push(r.key)))
        .unwrap();
    assert_eq!(got, ["s1:a", "s1:b", "s1:c"]);
    fs::copy(&backup, &db).unwrap();
    let c = Connection::open(&db).unwrap();
    for m in ["d", "e", "f"] {
        add_message(&c, m);
    }
    drop(c);
    got.clear();
    let again = archive(&s, Some(&state))
        .backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| got.push(r.key)))
        .unwrap();
    assert_eq!(got, ["s1:d", "s1:e", "s1:f"]);
    assert_eq!(again.report.usage.input, 100);
    fs::remove_dir_all(d).unwrap();
}

/// A message whose `role` is NULL and one whose `content_json` is a BLOB
/// (a schema without NOT NULL): each a counted skip at its id, the
/// messages after them read, none counted again by the next run. (They
/// failed the batch: nothing in or after it was ever read.)
#[test]
fn a_row_of_the_wrong_type_is_a_counted_skip_not_a_wall() {
    let d = tmpdir("null-role");
    let s = d.join("sessions");
    fs::create_dir_all(&s).unwrap();
    let c = Connection::open(s.join("sessions.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_total_tokens INTEGER, provider_name TEXT, model_config_json TEXT,
           updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT, content_json TEXT,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         INSERT INTO sessions VALUES ('s1', '/w', NULL, NULL, NULL, 'p', NULL, NULL);",
    )
    .unwrap();
    add_message(&c, "a");
    c.execute(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)
         VALUES ('b', 's1', NULL, '[]', 1), ('c', 's1', 'user', x'5b5d', 1)",
        [],
    )
    .unwrap();
    add_message(&c, "d");
    let state = d.join("state");
    let mut got = Vec::new();
    let r = archive(&s, Some(&state))
        .backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| got.push(r.key)))
        .unwrap();
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    assert_eq!(got, ["s1:a", "s1:d"]);
    let skips: Vec<(u64, String)> = r
        .report
        .skips
        .iter()
        .map(|k| (k.line, k.reason.to_string()))
        .collect();
    assert_eq!(skips.iter().map(|k| k.0).collect::<Vec<_>>(), [2, 3]);
    assert!(skips[0].1.contains("message 2: role is NULL"), "{skips:?}");
    assert!(
        skips[1].1.contains("message 3: content_json is a BLOB"),
        "{skips:?}"
    );
    let again = archive(&s, Some(&state))
        .backfill(&mut ForEach(|r| panic!("{r:?}")))
        .unwrap();
    assert_eq!((again.written, again.report.skipped), (0, 2));
    fs::remove_dir_all(d).unwrap();
}

/// A session's `updated_at` with multi-byte characters where its zone is
/// looked for: no date, no panic (the database failed at every run with
/// an internal error).
#[test]
fn a_malformed_updated_at_is_no_date_and_no_panic() {
    let d = tmpdir("updated-at");
    let s = d.join("sessions");
    let c = accumulated_db(&s);
    c.execute("UPDATE sessions SET updated_at = '\u{20ac}a\u{20ac}'", [])
        .unwrap();
    let u = archive(&s, None).usage().unwrap();
    assert!(u.failures.is_empty(), "{:?}", u.failures);
    assert_eq!(u.report.usage.input, 100);
    fs::remove_dir_all(d).unwrap();
}

/// Token counts near i64::MAX (a ledger row without total_tokens, and a
/// session's accumulated columns without a total): their sums saturate at
/// u64::MAX rather than overflow (an internal error).
#[test]
fn token_sums_saturate() {
    let d = tmpdir("saturate");
    let s = d.join("sessions");
    fs::create_dir_all(&s).unwrap();
    let c = Connection::open(s.join("sessions.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_cache_read_tokens INTEGER, accumulated_cache_write_tokens INTEGER,
           accumulated_total_tokens INTEGER, accumulated_cost REAL, provider_name TEXT,
           model_config_json TEXT, updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         CREATE TABLE usage_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
           created_timestamp INTEGER, model TEXT, input_tokens INTEGER, output_tokens INTEGER,
           total_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
           cost REAL, cost_source TEXT);
         INSERT INTO sessions VALUES ('s1', '/w', NULL, NULL, NULL, NULL, NULL, NULL, 'p', NULL,
           '2026-01-01 00:00:00');
         INSERT INTO sessions VALUES ('s2', '/w', 9223372036854775807, 9223372036854775807,
           9223372036854775807, 0, 0, 0, 'p', NULL, '2026-01-01 00:00:00');
         INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens,
           output_tokens, total_tokens, cache_read_tokens, cache_write_tokens, cost, cost_source)
           VALUES ('s1', 1767225600, 'm', 9223372036854775807, 9223372036854775807, NULL,
           9223372036854775807, 0, 0, NULL);",
    )
    .unwrap();
    let u = archive(&s, None).usage().unwrap();
    assert!(u.failures.is_empty(), "{:?}", u.failures);
    let totals: Vec<u64> = u.usage.iter().map(|r| r.usage.total_tokens).collect();
    assert_eq!(totals, [u64::MAX, u64::MAX]);
    assert_eq!(u.report.usage.total_tokens, u64::MAX);
    fs::remove_dir_all(d).unwrap();
}

/// A session counted by its accumulated columns, then given ledger rows
/// (Goose's migration carries what it had accumulated into a
/// `carried_forward` row): the carried row is not counted, before or
/// after a rescan (the newest message deleted), and the ledger's own rows
/// are counted once.
#[test]
fn a_carried_forward_row_is_not_counted_again_after_a_rescan() {
    let d = tmpdir("carried");
    let s = d.join("sessions");
    fs::create_dir_all(&s).unwrap();
    let c = Connection::open(s.join("sessions.db")).unwrap();
    c.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_cache_read_tokens INTEGER, accumulated_cache_write_tokens INTEGER,
           accumulated_total_tokens INTEGER, accumulated_cost REAL, provider_name TEXT,
           model_config_json TEXT, updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         CREATE TABLE usage_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
           created_timestamp INTEGER, model TEXT, input_tokens INTEGER, output_tokens INTEGER,
           total_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
           cost REAL, cost_source TEXT);
         INSERT INTO sessions VALUES ('s1', '/w', 100, 10, 0, 0, 110, 0, 'p', NULL,
           '2026-01-01 00:00:00');",
    )
    .unwrap();
    add_message(&c, "a");
    add_message(&c, "b");
    let state = d.join("state");
    let input = || {
        archive(&s, Some(&state))
            .backfill(&mut ForEach(|_| {}))
            .unwrap()
            .report
            .usage
            .input
    };
    assert_eq!(input(), 100);
    c.execute_batch(
        "INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens,
           output_tokens, total_tokens, cache_read_tokens, cache_write_tokens, cost, cost_source)
           VALUES ('s1', 1767225600, 'm', 100, 10, 110, 0, 0, 0, 'carried_forward'),
                  ('s1', 1767225601, 'm', 5, 1, 6, 0, 0, 0, NULL);",
    )
    .unwrap();
    assert_eq!(input(), 105);
    c.execute("DELETE FROM messages WHERE message_id = 'b'", [])
        .unwrap();
    assert_eq!(input(), 105);
    fs::remove_dir_all(d).unwrap();
}
