//! Goose's legacy `<id>.jsonl` sessions (before 1.10) read through the
//! engine: exact records, skips with their places, the first line's
//! accumulated usage, a rewrite (a new file renamed over the old one) that
//! emits only its new message, and each message and each usage once
//! across the file and the `sessions.db` Goose imports it into, in every
//! order: the file read in an earlier run before the import, both in one
//! run (beside each other, or apart), the database read first.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mem_ingest::archive::{Archive, Summary};
use mem_ingest::format::Format;
use mem_ingest::sink::ForEach;
use mem_ingest::{OwnedRecord, Role};
use mem_ingest_db::Goose;
use rusqlite::Connection;
use serde_json::Value;

#[path = "../../mem-ingest/tests/common/shared.rs"]
mod shared;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-db-goose-legacy-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn run(path: &Path, state: Option<&Path>) -> (Summary, Vec<OwnedRecord>) {
    let b = Archive::builder()
        .path(path)
        .formats(vec![Arc::new(Goose) as Arc<dyn Format>]);
    let a = match state {
        Some(s) => b.state(s).build(),
        None => b.build(),
    };
    let mut got = Vec::new();
    let s = a.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    (s, got)
}

const SESSION: &str = "20250101_120000";

/// The first line: the project, the title, the last call's tokens and the
/// session's accumulated ones.
const META: &str = r#"{"working_dir":"/home/u/proj","description":"Fix the build","schedule_id":null,"message_count":6,"total_tokens":300,"input_tokens":250,"output_tokens":50,"accumulated_total_tokens":1200,"accumulated_input_tokens":1000,"accumulated_output_tokens":200}"#;

/// The messages, as Goose before 1.10 wrote them (`id` null or absent,
/// or an id of its own), one damaged line among them.
const MESSAGES: [&str; 7] = [
    r#"{"id":null,"role":"user","created":1735732800,"content":[{"type":"text","text":"Why is the build red?"}],"metadata":{"userVisible":true,"agentVisible":true}}"#,
    r#"{"role":"assistant","created":1735732805,"content":[{"type":"thinking","thinking":"Look at CI.","signature":"s"},{"type":"text","text":"Let me look."},{"type":"toolRequest","id":"call_1","toolCall":{"status":"success","value":{"name":"developer__shell","arguments":{"command":"make"}}}}]}"#,
    r#"{"role":"user","created":1735732806,"content":[{"type":"toolResponse","id":"call_1","toolResult":{"status":"success","value":[{"type":"text","text":"error[E0308]: mismatched types"}]}}]}"#,
    r#"{"role":"assistant","created":1735732806,"content":[{"type":"text","text":"A type mis"#,
    r#"{"role":"assistant","created":1735732806,"content":[{"type":"text","text":"A type mismatch in main.rs."}]}"#,
    r#"{"id":"msg_own","role":"assistant","created":1735732806,"content":[{"type":"text","text":"Fixed: the build is green."}]}"#,
    r#"{"role":"user","created":1735732811,"content":[{"type":"text","text":"<ctx>cwd=/home/u/proj</ctx>"}],"metadata":{"userVisible":false,"agentVisible":true}}"#,
];

/// The file's text: the first line, then `messages`.
fn text_of(meta: &str, messages: &[&str]) -> String {
    let mut s = String::new();
    for l in std::iter::once(meta).chain(messages.iter().copied()) {
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// Writes a session file as Goose does: `<id>.tmp`, renamed over it.
fn save(dir: &Path, text: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let tmp = dir.join(format!("{SESSION}.tmp"));
    fs::write(&tmp, text).unwrap();
    let to = dir.join(format!("{SESSION}.jsonl"));
    fs::rename(&tmp, &to).unwrap();
    to
}

fn want_records() -> Vec<(Role, String)> {
    [
        (Role::User, "Why is the build red?"),
        (
            Role::Assistant,
            "Look at CI.\n\nLet me look.\n\ndeveloper__shell {\"command\":\"make\"}",
        ),
        (Role::ToolResult, "error[E0308]: mismatched types"),
        (Role::Assistant, "A type mismatch in main.rs."),
        (Role::Assistant, "Fixed: the build is green."),
        (Role::System, "<ctx>cwd=/home/u/proj</ctx>"),
    ]
    .into_iter()
    .map(|(r, t)| (r, t.to_owned()))
    .collect()
}

fn roles_texts(got: &[OwnedRecord]) -> Vec<(Role, String)> {
    got.iter().map(|r| (r.role, r.text.clone())).collect()
}

/// The lines counted as read from the database (`in_database`).
fn in_database(s: &Summary) -> u64 {
    let o = s.report.entries.others();
    o.iter()
        .find(|(k, _)| k == "in_database")
        .map_or(0, |(_, n)| *n)
}

fn usage(s: &Summary) -> (u64, u64, u64) {
    let u = &s.report.usage;
    (u.input, u.output, u.total_tokens)
}

#[test]
fn a_legacy_file_gives_each_message_as_the_database_would_and_its_usage() {
    let d = tmpdir("map");
    let dir = d.join("sessions");
    // A line over 5 MB: read (Goose's reader before 1.10 skipped it, the
    // import of 1.10 takes it, and so must the file's reading: leaving it
    // out would shift the places of the messages after it).
    let long = format!(
        r#"{{"role":"user","created":1735732900,"content":[{{"type":"text","text":"{}"}}]}}"#,
        "x".repeat(5 << 20)
    );
    let mut messages = MESSAGES.to_vec();
    messages.push(&long);
    let file = save(&dir, &text_of(META, &messages));
    let (s, got) = run(&dir, None);
    let mut want = want_records();
    want.push((Role::User, "x".repeat(5 << 20)));
    assert_eq!(roles_texts(&got), want);
    for r in &got {
        assert_eq!(
            (r.project.as_str(), r.session.as_str(), r.source.as_str()),
            ("/home/u/proj", SESSION, "goose:20250101_120000")
        );
    }
    assert_eq!(
        got.iter().map(|r| r.line).collect::<Vec<_>>(),
        [2, 3, 4, 6, 7, 8, 9]
    );
    // A message without an id is keyed by its role, second, place among
    // the messages of both, and a hash of its content.
    let keys: Vec<String> = got
        .iter()
        .map(|r| match r.key.split_once('~') {
            Some((k, h)) => {
                let (h, rest) = h.split_at(8);
                assert!(h.bytes().all(|b| b.is_ascii_hexdigit()), "{}", r.key);
                format!("{k}~{rest}")
            }
            None => r.key.clone(),
        })
        .collect();
    assert_eq!(
        keys,
        [
            "20250101_120000:user@1735732800#0~",
            "20250101_120000:assistant@1735732805#0~",
            "20250101_120000:user@1735732806#0~:call_1",
            "20250101_120000:assistant@1735732806#0~",
            "20250101_120000:msg_own",
            "20250101_120000:user@1735732811#0~",
            "20250101_120000:user@1735732900#0~",
        ]
    );
    assert_eq!(got[1].kinds, ["thinking", "text", "toolCall"]);
    assert_eq!(got[1].tool_name.as_deref(), Some("developer__shell"));
    assert_eq!(got[1].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(got[2].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(got[2].is_error, Some(false));
    assert_eq!(got[0].timestamp, Some(1_735_732_800_000));
    // No model in a legacy file.
    assert_eq!(
        (got[1].provider.as_deref(), got[1].model.as_deref()),
        (None, None)
    );
    // The damaged line, at its line and byte.
    let text = fs::read_to_string(&file).unwrap();
    let byte_of = |n: usize| -> u64 {
        text.split_inclusive('\n')
            .take(n - 1)
            .map(|l| l.len() as u64)
            .sum()
    };
    let skips: Vec<(u64, u64)> = s.skips.iter().map(|k| (k.line, k.byte)).collect();
    assert_eq!(skips, [(5, byte_of(5))]);
    assert!(
        s.skips[0].reason.contains("malformed JSON"),
        "{}",
        s.skips[0].reason
    );
    assert!(s.skips[0].path.ends_with("20250101_120000.jsonl"));
    // The accumulated tokens of the first line (not its last call's).
    assert_eq!(usage(&s), (1000, 200, 1200));
    assert_eq!(
        (s.report.records, s.report.no_record, s.report.skipped),
        (7, 1, 1)
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_rewrite_emits_only_its_new_message_and_counts_the_usage_it_holds_now() {
    let d = tmpdir("rewrite");
    let dir = d.join("sessions");
    let state = d.join("state");
    save(&dir, &text_of(META, &MESSAGES));
    let (first, got) = run(&dir, Some(&state));
    assert_eq!(got.len(), 6);
    assert_eq!(usage(&first), (1000, 200, 1200));
    // Goose saves the session again, one message more, the counts grown.
    let meta = META
        .replace(
            "\"accumulated_total_tokens\":1200",
            "\"accumulated_total_tokens\":1750",
        )
        .replace(
            "\"accumulated_input_tokens\":1000",
            "\"accumulated_input_tokens\":1500",
        )
        .replace(
            "\"accumulated_output_tokens\":200",
            "\"accumulated_output_tokens\":250",
        );
    let more =
        r#"{"role":"assistant","created":1735732900,"content":[{"type":"text","text":"Pushed."}]}"#;
    let mut messages = MESSAGES.to_vec();
    messages.push(more);
    save(&dir, &text_of(&meta, &messages));
    let (second, got) = run(&dir, Some(&state));
    assert_eq!(roles_texts(&got), [(Role::Assistant, "Pushed.".to_owned())]);
    assert_eq!(got[0].line, 9);
    assert_eq!(second.written, 1);
    assert_eq!(usage(&second), (1500, 250, 1750));
    // Nothing moved: nothing more.
    let (third, got) = run(&dir, Some(&state));
    assert!(got.is_empty());
    assert_eq!(usage(&third), (1500, 250, 1750));
    fs::remove_dir_all(d).unwrap();
}

/// Goose 1.10's import of the legacy file at `file` into the
/// `sessions.db` of `dir` (created when missing, schema 17's tables):
/// the session row with the file's accumulated columns and no model, its
/// messages in the file's order, each with a `message_id` the import
/// makes up when the message has no `id` (`msg_<session>_<uuid>`), its
/// `created`, its content as Goose writes it again; a line Goose cannot
/// read is left out.
fn import(dir: &Path, file: &Path) -> Connection {
    fs::create_dir_all(dir).unwrap();
    let c = Connection::open(dir.join("sessions.db")).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP);
         CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
           description TEXT NOT NULL DEFAULT '', session_type TEXT NOT NULL DEFAULT 'user',
           working_dir TEXT NOT NULL, created_at TIMESTAMP, updated_at TIMESTAMP,
           total_tokens INTEGER, input_tokens INTEGER, output_tokens INTEGER,
           cache_read_tokens INTEGER, cache_write_tokens INTEGER,
           accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
           accumulated_output_tokens INTEGER, accumulated_cache_read_tokens INTEGER,
           accumulated_cache_write_tokens INTEGER, accumulated_cost REAL,
           provider_name TEXT, model_config_json TEXT, parent_session_id TEXT);
         CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP, tokens INTEGER, metadata_json TEXT);
         CREATE TABLE IF NOT EXISTS usage_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT,
           session_id TEXT NOT NULL, created_timestamp INTEGER NOT NULL, model TEXT,
           input_tokens INTEGER, output_tokens INTEGER, total_tokens INTEGER,
           cache_read_tokens INTEGER, cache_write_tokens INTEGER, cost REAL, cost_source TEXT,
           is_compaction INTEGER DEFAULT 0);
         INSERT OR IGNORE INTO schema_version VALUES (17, '2026-01-01 00:00:00');",
    )
    .unwrap();
    let text = fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    let meta: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let sid = file.file_stem().unwrap().to_str().unwrap();
    c.execute(
        "INSERT INTO sessions (id, description, working_dir, created_at, updated_at, total_tokens,
           input_tokens, output_tokens, accumulated_total_tokens, accumulated_input_tokens,
           accumulated_output_tokens)
         VALUES (?1, ?2, ?3, '2025-01-01T12:00:00+00:00', '2025-01-01T12:05:00+00:00',
           ?4, ?5, ?6, ?7, ?8, ?9)",
        rusqlite::params![
            sid,
            meta["description"].as_str(),
            meta["working_dir"].as_str(),
            meta["total_tokens"].as_i64(),
            meta["input_tokens"].as_i64(),
            meta["output_tokens"].as_i64(),
            meta["accumulated_total_tokens"].as_i64(),
            meta["accumulated_input_tokens"].as_i64(),
            meta["accumulated_output_tokens"].as_i64(),
        ],
    )
    .unwrap();
    for (n, l) in lines.enumerate() {
        let Ok(m) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        let mid = match m["id"].as_str() {
            Some(id) => id.to_owned(),
            None => format!("msg_{sid}_{:08x}-6b3f-4c1e-9a2d-{n:012x}", n * 7919),
        };
        let meta = match &m["metadata"] {
            Value::Null => r#"{"userVisible":true,"agentVisible":true}"#.to_owned(),
            v => v.to_string(),
        };
        c.execute(
            "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp,
               metadata_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                mid,
                sid,
                m["role"].as_str().unwrap(),
                m["content"].to_string(),
                m["created"].as_i64().unwrap(),
                meta
            ],
        )
        .unwrap();
    }
    c
}

/// Goose 1.10 goes on with the imported session: a message more.
fn continue_session(c: &Connection) {
    c.execute(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp,
           metadata_json) VALUES ('msg_6a1f0c2e-after-import', ?1, 'user',
           '[{\"type\":\"text\",\"text\":\"Now the release notes.\"}]', 1767225600,
           '{\"userVisible\":true,\"agentVisible\":true}')",
        [SESSION],
    )
    .unwrap();
}

/// The session's messages, the one after the import last.
fn want_all() -> Vec<(Role, String)> {
    let mut w = want_records();
    w.push((Role::User, "Now the release notes.".to_owned()));
    w
}

/// The file read in an earlier run, before Goose imported it; then the
/// database (the file still beside it, unchanged): only the message
/// written after the import is new, and the session's usage is counted
/// once; then the session grows (no ledger): the growth alone.
#[test]
fn a_file_read_before_the_import_is_not_emitted_again_from_the_database() {
    let d = tmpdir("earlier-run");
    let dir = d.join("sessions");
    let state = d.join("state");
    let file = save(&dir, &text_of(META, &MESSAGES));
    let (first, got) = run(&dir, Some(&state));
    assert_eq!(roles_texts(&got), want_records());
    assert_eq!(usage(&first), (1000, 200, 1200));
    let c = import(&dir, &file);
    continue_session(&c);
    let (second, got) = run(&dir, Some(&state));
    assert_eq!(
        roles_texts(&got),
        [(Role::User, "Now the release notes.".to_owned())]
    );
    assert_eq!(usage(&second), (1000, 200, 1200));
    assert_eq!(second.report.records, 7);
    c.execute_batch(
        "UPDATE sessions SET accumulated_input_tokens = 1300, accumulated_output_tokens = 240,
           accumulated_total_tokens = 1540;",
    )
    .unwrap();
    let (third, got) = run(&dir, Some(&state));
    assert!(got.is_empty());
    assert_eq!(usage(&third), (1300, 240, 1540));
    fs::remove_dir_all(d).unwrap();
}

/// The file read before the import; Goose 1.10 then records the
/// session's next call in the ledger, first a `carried_forward` row of
/// what the session had (what the file's first line counted): only the
/// new call is counted.
#[test]
fn the_ledgers_carried_forward_row_of_a_file_read_before_is_not_counted_again() {
    let d = tmpdir("carried");
    let dir = d.join("sessions");
    let state = d.join("state");
    let file = save(&dir, &text_of(META, &MESSAGES));
    let (first, _) = run(&dir, Some(&state));
    assert_eq!(usage(&first), (1000, 200, 1200));
    let c = import(&dir, &file);
    continue_session(&c);
    c.execute_batch(
        "INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens,
           output_tokens, total_tokens, cost_source)
           VALUES ('20250101_120000', 1767225601, 'gpt-5', 1000, 200, 1200, 'carried_forward');
         INSERT INTO usage_ledger (session_id, created_timestamp, model, input_tokens,
           output_tokens, total_tokens, cost_source)
           VALUES ('20250101_120000', 1767225602, 'gpt-5', 300, 40, 340, 'estimated');
         UPDATE sessions SET accumulated_input_tokens = 1300, accumulated_output_tokens = 240,
           accumulated_total_tokens = 1540;",
    )
    .unwrap();
    let (second, got) = run(&dir, Some(&state));
    assert_eq!(got.len(), 1);
    assert_eq!(usage(&second), (1300, 240, 1540));
    fs::remove_dir_all(d).unwrap();
}

/// The file and the database that imported it, read in one run: beside
/// each other (the file is read from the database), and apart (a copy of
/// the legacy folder elsewhere under the PATH: deduplicated).
#[test]
fn a_file_and_its_import_read_in_one_run_give_each_message_once() {
    let d = tmpdir("one-run");
    let dir = d.join("a/sessions");
    let file = save(&dir, &text_of(META, &MESSAGES));
    let c = import(&dir, &file);
    continue_session(&c);
    let (s, got) = run(&dir, None);
    // Read from the database, in its row order.
    assert_eq!(roles_texts(&got), want_all());
    assert_eq!(
        got[0].key,
        format!("{SESSION}:msg_{SESSION}_00000000-6b3f-4c1e-9a2d-000000000000")
    );
    assert_eq!(usage(&s), (1000, 200, 1200));
    assert_eq!(in_database(&s), 7);
    // A copy of the legacy file in another Goose folder: the same
    // messages, once.
    save(&d.join("b/sessions"), &text_of(META, &MESSAGES));
    let (s, got) = run(&d, None);
    let mut texts = roles_texts(&got);
    texts.sort();
    let mut want = want_all();
    want.sort();
    assert_eq!(texts, want);
    assert_eq!(usage(&s), (1000, 200, 1200));
    assert_eq!(s.report.deduplicated, 7);
    fs::remove_dir_all(d).unwrap();
}

/// The database read first, the legacy file met later: beside the
/// database (put back from a backup), it is read from the database; in
/// another folder, its messages and usage are copies.
#[test]
fn a_file_met_after_its_database_was_read_adds_nothing() {
    let d = tmpdir("db-first");
    let state = d.join("state");
    let src = d.join("legacy");
    let file = save(&src, &text_of(META, &MESSAGES));
    let root = d.join("root");
    let dir = root.join("a/sessions");
    let c = import(&dir, &file);
    continue_session(&c);
    let (first, got) = run(&root, Some(&state));
    assert_eq!(roles_texts(&got), want_all());
    assert_eq!(usage(&first), (1000, 200, 1200));
    // Beside the database.
    fs::copy(&file, dir.join(format!("{SESSION}.jsonl"))).unwrap();
    let (second, got) = run(&root, Some(&state));
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(usage(&second), (1000, 200, 1200));
    assert_eq!(second.report.records, 7);
    // In another folder.
    save(&root.join("b/sessions"), &text_of(META, &MESSAGES));
    let (third, got) = run(&root, Some(&state));
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(usage(&third), (1000, 200, 1200));
    assert_eq!(third.report.records, 7);
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/goose/deja-vu"]
fn the_shared_sample_reads_as_a_legacy_session() {
    let sample = shared::samples().join("goose/deja-vu/fixtures/registry/goose/sessions");
    let (s, got) = run(&sample, None);
    assert_eq!(
        roles_texts(&got),
        [
            (Role::User, "Say hello".to_owned()),
            (Role::Assistant, "Hello from Goose!".to_owned())
        ]
    );
    assert_eq!(
        got.iter()
            .map(|r| (r.key.as_str(), r.project.as_str(), r.line))
            .collect::<Vec<_>>(),
        [
            ("20250724_1:msg1", "/workspace/demo", 2),
            ("20250724_1:msg2", "/workspace/demo", 3)
        ]
    );
    assert_eq!(got[0].timestamp, Some(1_784_278_801_000));
    assert_eq!(
        (s.report.records, s.report.no_record, s.report.skipped),
        (2, 1, 0)
    );
    // No accumulated tokens in it: no usage.
    assert_eq!(usage(&s), (0, 0, 0));
}

#[test]
#[ignore = "needs ../shared: samples/goose/make_fixture.py"]
fn the_fixtures_legacy_file_is_read_from_its_database() {
    let d = tmpdir("fixture");
    let data = d.join("data");
    let out = std::process::Command::new("python3")
        .arg(shared::samples().join("goose/make_fixture.py"))
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let sessions = data.join("sessions");
    let (s, got) = run(&sessions, None);
    assert_eq!(got.len(), 13);
    assert_eq!(in_database(&s), 2);
    assert_eq!(s.report.usage.input, 64_800);
    // Alone (its database elsewhere): its two messages and its usage;
    // with the database under the same PATH, once.
    let apart = d.join("apart/sessions");
    fs::create_dir_all(&apart).unwrap();
    fs::rename(
        sessions.join("20250724_153012.jsonl"),
        apart.join("20250724_153012.jsonl"),
    )
    .unwrap();
    let (s, got) = run(&apart, None);
    assert_eq!(
        roles_texts(&got),
        [
            (Role::User, "Say hello".to_owned()),
            (Role::Assistant, "Hello from Goose!".to_owned())
        ]
    );
    assert_eq!(usage(&s), (1100, 100, 1200));
    let (s, got) = run(&d, None);
    assert_eq!(got.len(), 13);
    assert_eq!((s.report.usage.input, s.report.deduplicated), (64_800, 3));
    fs::remove_dir_all(d).unwrap();
}

/// Under `--shard K/N` every shard reads the legacy files (as it reads
/// the database), each taking the sessions of its shard: the file of a
/// session read before Goose imported it, and the database's rows of it
/// afterwards, are the same shard's, so each message is once across all
/// shards, in both runs.
#[test]
fn shards_take_each_legacy_session_once_and_with_its_import() {
    use mem_ingest::archive::{shard_of, Shard};
    let d = tmpdir("shards");
    let dir = d.join("sessions");
    // Two sessions of different shards (of 2).
    let ids: Vec<String> = (0..20)
        .map(|i| format!("2025010{}_1200{i:02}", 1 + i % 2))
        .collect();
    let a = ids[0].clone();
    let b = ids
        .iter()
        .find(|i| shard_of(&format!("goose:{i}"), 2) != shard_of(&format!("goose:{a}"), 2))
        .unwrap()
        .clone();
    for id in [&a, &b] {
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join(format!("{id}.jsonl")),
            text_of(META, &MESSAGES).replace("/home/u/proj", id),
        )
        .unwrap();
    }
    let shard_run = |k: u32| {
        let mut got = Vec::new();
        let s = Archive::builder()
            .path(&dir)
            .formats(vec![Arc::new(Goose) as Arc<dyn Format>])
            .shard(Shard::parse(&format!("{k}/2")).unwrap())
            .state(d.join(format!("state-{k}")))
            .build()
            .backfill(&mut ForEach(|r| got.push(r)))
            .unwrap();
        (s, got)
    };
    let mut all = Vec::new();
    let mut input = 0;
    for k in 0..2 {
        let (s, got) = shard_run(k);
        // One session a shard, whole.
        assert_eq!(got.len(), 6, "shard {k}");
        assert_eq!(s.report.usage.input, 1000, "shard {k}");
        all.extend(got.into_iter().map(|r| r.key));
        input += s.report.usage.input;
    }
    all.sort();
    all.dedup();
    assert_eq!((all.len(), input), (12, 2000));
    // Goose imports both; a message more in a's session.
    let c = import(&dir, &dir.join(format!("{a}.jsonl")));
    drop(c);
    let c = import(&dir, &dir.join(format!("{b}.jsonl")));
    c.execute(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp)
         VALUES ('msg_new', ?1, 'user', '[{\"type\":\"text\",\"text\":\"more\"}]', 1767225600)",
        [&a],
    )
    .unwrap();
    let mut new = Vec::new();
    let mut input = 0;
    for k in 0..2 {
        let (s, got) = shard_run(k);
        new.extend(got.into_iter().map(|r| (r.session, r.text)));
        input += s.report.usage.input;
    }
    assert_eq!((new, input), (vec![(a.clone(), "more".to_owned())], 2000));
    fs::remove_dir_all(d).unwrap();
}

/// A session named by `goose session -n myproj` (not the legacy id form)
/// imported into a database, and the same database in a second Goose
/// folder without the file beside it (an older store): each message once,
/// its usage once. Its messages are keyed by their ids in both databases;
/// a file beside one of them made that one key them by their places, and
/// the session was written twice (8 records for 4).
#[test]
fn a_named_session_in_two_databases_one_with_its_file_is_written_once() {
    let d = tmpdir("named-two");
    let src = d.join("src");
    let file = src.join("myproj.jsonl");
    fs::create_dir_all(&src).unwrap();
    fs::write(&file, text_of(META, &MESSAGES)).unwrap();
    let a = d.join("root/a/sessions");
    drop(import(&a, &file));
    fs::copy(&file, a.join("myproj.jsonl")).unwrap();
    let b = d.join("root/b/sessions");
    fs::create_dir_all(&b).unwrap();
    fs::copy(a.join("sessions.db"), b.join("sessions.db")).unwrap();
    let (s, got) = run(&d.join("root"), None);
    assert_eq!(roles_texts(&got), want_records());
    assert!(got.iter().all(|r| r.session == "myproj"), "{got:?}");
    assert_eq!(usage(&s), (1000, 200, 1200));
    assert_eq!(in_database(&s), 7);
    // The second database's copies: its six messages and its usage.
    assert_eq!(s.report.deduplicated, 7);
    fs::remove_dir_all(d).unwrap();
}
