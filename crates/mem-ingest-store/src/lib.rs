//! The embedded store: records in one SQLite file, with a full-text index,
//! that any language, the `sqlite3` shell and Datasette can open; a
//! [`Sink`] that keeps its own checkpoint in the same database, committed
//! in the same transaction as the rows it covers.
//!
//! # Schema (version [`SCHEMA_VERSION`], `PRAGMA user_version`)
//!
//! - `records`: one row per record, `key` its primary key, every field of
//!   the NDJSON record as a column (usage as `usage_*` columns, `kinds` as
//!   a JSON array in text), plus `format`, `fingerprint` (the entry's, as a
//!   signed 64-bit integer) and `row_id` (the integer the full-text index
//!   refers to: a column of its own, so `VACUUM` never renumbers it), and
//!   columns reserved for Claude Code and Codex (`agent_id`, `message_id`,
//!   `request_id`, `provisional`), null for pi, and `redactions`: the rule
//!   ids of the secrets redacted in the record's `text` and `command`, one
//!   per secret, as a JSON array (null when none; see
//!   [`redaction_counts`]).
//! - `records_fts`: FTS5 over `records.text`, external content (the text is
//!   stored once, in `records`). Tokenizer `unicode61 remove_diacritics 2`.
//!   Rows up to `checkpoint_meta.indexed_up_to` (a `row_id`) are indexed:
//!   each commit indexes the rows above it in one statement (a fifth of the
//!   time a trigger per row takes) and moves it; triggers keep the index
//!   right when any client updates or deletes an indexed row, and a row a
//!   client inserts itself is indexed by the next commit of a backfill.
//! - `sessions`: one row per session (`id`, `format`, `project`,
//!   `first_timestamp`, `last_timestamp`, `parent_session`, `records`), and
//!   `session_files` (`session`, `file`): a session can span several files.
//! - `checkpoint_meta`, `checkpoint_files`, `checkpoint_fingerprints`,
//!   `checkpoint_joins`, `checkpoint_responses` (the kept copy of each
//!   usage-bearing response, by its index `seq`, see the `usage` module):
//!   the engine's checkpoint as rows, appended or updated by each commit,
//!   never one blob rewritten. `checkpoint_meta` holds, by `name`, the
//!   options (`options`, JSON by name: a key a release before did not
//!   write reads back as what its runs did, `links` as `"follow"`, see
//!   [`OutputOptions::links`]), `indexed_up_to`, `line_hash`, and while any fork
//!   waits for a parent read ahead, those forks (`pending_forks`, JSON: the
//!   forks' paths by the parent's), and with a shard (library use; the
//!   command line has no `--shard` with `--db`) the roots it recorded
//!   (`shard_roots`, JSON); a release before keeps neither and reads the
//!   same rows.
//!
//! Version 1 kept the responses as one value (`checkpoint_meta`, name
//! `responses`), rewritten by each commit; a backfill into a version 1
//! store moves it to `checkpoint_responses` in the transaction that sets
//! version 2. Version 3 records how line bytes were hashed into its
//! fingerprints (`checkpoint_meta`, name `line_hash`: see
//! [`mem_ingest::LineHash`]), 3 (XXH3) for a store it creates (2, the
//! three-lane hash, in one made by the releases before); a store of version 1 or
//! 2 hashed them serially and is migrated with 1, which it keeps (and an
//! older mem-ingest, which knows only the serial hash, refuses version
//! 3). The row belongs to the store, not to its checkpoint: a checkpoint
//! lost leaves the rows' fingerprints comparable. Version 4 keys
//! `checkpoint_files` by a path's spelling. Version 5 writes each
//! `checkpoint_files.state` in the state file's layout 11 (a header says
//! whether its parent is a path or a session id); the migration rewrites
//! every row of an earlier store, in one transaction. Version 6 adds
//! `records.redactions`; the rows of before are null, and the checkpoint's
//! options (without `redact`) say they were written unredacted until
//! `mem-ingest redact --db` rewrites them ([`redact_store`]). Version 7
//! adds `usage`, a row per response counted; the migration marks what the
//! store read before as to be read again for its rows (`checkpoint_meta`,
//! `usage_reread`; `usage_since` says when it ran), which the next
//! backfill does before it goes on
//! ([`CheckpointStore::save_reread_usage`]).
//!
//! # Row identity
//!
//! A record whose key is already in `records`: the same entry again (the
//! same fingerprint) updates its row in place; a different entry under the
//! same key (pi 0.x keys are per line; an entry rewritten with the same id
//! and another timestamp) is stored under `<key>~<fingerprint, 16 hex
//! digits>`: deterministic, so a re-run finds it again.
#![deny(unsafe_code)]
#![deny(missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use mem_ingest::archive::{
    Checkpoint, CheckpointStore, CountedUsage, FileState, OutputOptions, State,
};
use mem_ingest::sink::{Encoder, Place, Sink};
use mem_ingest::Record;
use mem_ingest::{Error, ErrorKind};

mod hint;
mod rank;
mod sessions;
mod snippet;

pub use hint::close_words;
pub use sessions::{
    find_session, session_records, sessions, SessionQuery, SessionRow, ShownRecord,
};

/// The schema version this mem-ingest writes (`PRAGMA user_version`).
/// Stores of earlier versions are migrated in place; newer ones refused.
pub const SCHEMA_VERSION: i64 = 7;

/// The schema of version [`SCHEMA_VERSION`], as SQL (for tools that build the
/// same tables: the store's floor in `examples/store_floor.rs`).
pub const SCHEMA: &str = r#"
CREATE TABLE records (
    key TEXT PRIMARY KEY,
    row_id INTEGER NOT NULL UNIQUE,
    format TEXT NOT NULL,
    project TEXT NOT NULL,
    session TEXT NOT NULL,
    file TEXT NOT NULL,
    source TEXT NOT NULL,
    line INTEGER NOT NULL,
    byte INTEGER NOT NULL,
    id TEXT,
    parent_id TEXT,
    entry TEXT NOT NULL,
    role TEXT NOT NULL,
    kinds TEXT NOT NULL,
    timestamp INTEGER,
    text TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    usage_input INTEGER,
    usage_output INTEGER,
    usage_cache_read INTEGER,
    usage_cache_write INTEGER,
    usage_total_tokens INTEGER,
    usage_cost REAL,
    stop_reason TEXT,
    tool_name TEXT,
    tool_call_id TEXT,
    is_error INTEGER,
    custom_type TEXT,
    command TEXT,
    exit_code INTEGER,
    text_bytes INTEGER,
    agent_id TEXT,
    message_id TEXT,
    request_id TEXT,
    provisional INTEGER,
    fingerprint INTEGER NOT NULL,
    redactions TEXT
);
CREATE INDEX records_session_time ON records(session, timestamp);
CREATE INDEX records_project_time ON records(project, timestamp);
CREATE INDEX records_time ON records(timestamp);
CREATE VIRTUAL TABLE records_fts USING fts5(
    text,
    content = 'records',
    content_rowid = 'row_id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER records_fts_delete AFTER DELETE ON records
WHEN old.row_id <= (SELECT CAST(value AS INTEGER) FROM checkpoint_meta WHERE name = 'indexed_up_to')
BEGIN
    INSERT INTO records_fts(records_fts, rowid, text) VALUES ('delete', old.row_id, old.text);
END;
CREATE TRIGGER records_fts_update AFTER UPDATE OF text, row_id ON records
WHEN old.row_id <= (SELECT CAST(value AS INTEGER) FROM checkpoint_meta WHERE name = 'indexed_up_to')
BEGIN
    INSERT INTO records_fts(records_fts, rowid, text) VALUES ('delete', old.row_id, old.text);
    INSERT INTO records_fts(rowid, text) VALUES (new.row_id, new.text);
END;
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    format TEXT NOT NULL,
    project TEXT NOT NULL,
    first_timestamp INTEGER,
    last_timestamp INTEGER,
    parent_session TEXT,
    records INTEGER NOT NULL
);
CREATE TABLE session_files (
    session TEXT NOT NULL,
    file TEXT NOT NULL,
    PRIMARY KEY (session, file)
) WITHOUT ROWID;
CREATE TABLE checkpoint_meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO checkpoint_meta (name, value) VALUES ('indexed_up_to', '0');
INSERT INTO checkpoint_meta (name, value) VALUES ('line_hash', '3');
CREATE TABLE checkpoint_files (
    path TEXT PRIMARY KEY,
    state BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE checkpoint_fingerprints (
    session TEXT NOT NULL,
    fingerprint INTEGER NOT NULL
);
CREATE TABLE checkpoint_joins (
    a TEXT NOT NULL,
    b TEXT NOT NULL
);
CREATE TABLE checkpoint_responses (
    seq INTEGER PRIMARY KEY,
    response BLOB NOT NULL
);
CREATE TABLE usage (
    key TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    session TEXT NOT NULL,
    project TEXT NOT NULL,
    file TEXT NOT NULL,
    line INTEGER NOT NULL,
    timestamp INTEGER,
    provider TEXT,
    model TEXT,
    input INTEGER NOT NULL,
    output INTEGER NOT NULL,
    cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    cache_write_1h INTEGER NOT NULL,
    reasoning INTEGER NOT NULL,
    total_tokens INTEGER NOT NULL,
    cost REAL,
    cost_recorded INTEGER NOT NULL
);
CREATE INDEX usage_time ON usage(timestamp);
"#;

/// The `usage` table, as version 7 added it (the last statements of
/// [`SCHEMA`]).
fn usage_table() -> &'static str {
    &SCHEMA[SCHEMA.find("CREATE TABLE usage (").expect("in the schema")..]
}

/// Upserts one usage row by its key.
const USAGE_UPSERT: &str = "INSERT INTO usage (key, agent, session, project, file, line, timestamp,
    provider, model, input, output, cache_read, cache_write, cache_write_1h, reasoning,
    total_tokens, cost, cost_recorded)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
    ON CONFLICT (key) DO UPDATE SET agent = excluded.agent, session = excluded.session,
    project = excluded.project, file = excluded.file, line = excluded.line,
    timestamp = excluded.timestamp, provider = excluded.provider, model = excluded.model,
    input = excluded.input, output = excluded.output, cache_read = excluded.cache_read,
    cache_write = excluded.cache_write, cache_write_1h = excluded.cache_write_1h,
    reasoning = excluded.reasoning, total_tokens = excluded.total_tokens, cost = excluded.cost,
    cost_recorded = excluded.cost_recorded";

/// Writes a usage row under `key`, its cost from the prices shipped.
fn upsert_usage(conn: &Connection, key: &str, r: &CountedUsage) -> rusqlite::Result<()> {
    let u = &r.usage;
    let big = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    conn.prepare_cached(USAGE_UPSERT)?.execute(params![
        key,
        r.agent,
        r.session,
        r.project,
        r.file,
        big(r.line),
        r.time,
        r.provider,
        r.model,
        big(u.input),
        big(u.output),
        big(u.cache_read),
        big(u.cache_write),
        big(r.cache_write_1h),
        big(r.reasoning),
        big(u.total_tokens),
        r.cost(mem_ingest::prices::Prices::shipped()),
        i64::from(r.recorded),
    ])?;
    Ok(())
}

/// Deletes every usage row of `file`: by their keys, which start with
/// `<file>:` ([`usage_key`]; `;` is the character after `:`), so that the
/// key's index finds them.
fn delete_usage_of(conn: &Connection, file: &str) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM usage WHERE key >= ?1 || ':' AND key < ?1 || ';' AND file = ?1",
    )?
    .execute([file])
}

/// A usage row's key: its file, line and model, and its place on the
/// line where a line carries several of one model (an OpenCode answer's
/// calls: `#1`, `#2`, ...; the first keeps the key without it, as the
/// releases before wrote it); Claude Code's, counted once across the
/// archive, its response's index.
fn usage_key(r: &CountedUsage) -> String {
    let model = r.model.as_deref().unwrap_or("");
    match r.seq {
        0 => format!("{}:{}:{model}", r.file, r.line),
        n => format!("{}:{}:{model}#{n}", r.file, r.line),
    }
}

/// Tables of our schema in every version: a store without them is someone
/// else's.
const TABLES: [&str; 8] = [
    "records",
    "records_fts",
    "sessions",
    "session_files",
    "checkpoint_meta",
    "checkpoint_files",
    "checkpoint_fingerprints",
    "checkpoint_joins",
];

/// Brings a store of schema version `from` to [`SCHEMA_VERSION`], each
/// step in a transaction of its own that sets the version it reaches.
fn migrate(conn: &Connection, from: i64) -> rusqlite::Result<Result<(), String>> {
    if from < 2 {
        // Version 2: the usage responses as one row each.
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(
            "CREATE TABLE checkpoint_responses (
                seq INTEGER PRIMARY KEY,
                response BLOB NOT NULL
            );",
        )?;
        let one: Option<Vec<u8>> = tx
            .query_row(
                "SELECT value FROM checkpoint_meta WHERE name = 'responses'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let rows = match mem_ingest::archive::response_rows(&one.unwrap_or_default()) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        {
            let mut st =
                tx.prepare("INSERT INTO checkpoint_responses (seq, response) VALUES (?1, ?2)")?;
            for (i, r) in rows.iter().enumerate() {
                st.execute(params![i as i64, r])?;
            }
        }
        tx.execute("DELETE FROM checkpoint_meta WHERE name = 'responses'", [])?;
        tx.pragma_update(None, "user_version", 2)?;
        tx.commit()?;
    }
    if from < 3 {
        // Version 3: the line hash recorded; what came before hashed
        // serially.
        let tx = conn.unchecked_transaction()?;
        tx.execute(
            "INSERT INTO checkpoint_meta (name, value) VALUES ('line_hash', ?1)
             ON CONFLICT (name) DO NOTHING",
            [mem_ingest::LineHash::Serial.id().to_string()],
        )?;
        tx.pragma_update(None, "user_version", 3)?;
        tx.commit()?;
    }
    if from < 4 {
        // Version 4: checkpoint files keyed by their path's spelling
        // (`mem_ingest::path_text`), not the path made UTF-8 lossily; the forks
        // waiting for a parent likewise.
        let tx = conn.unchecked_transaction()?;
        let mut files = BTreeMap::new();
        match files_before_5(&tx)? {
            Ok(rows) => files.extend(rows.into_iter().map(|(p, f)| (p, Arc::new(f)))),
            Err(e) => return Ok(Err(e)),
        }
        let forks: Option<String> = tx
            .query_row(
                "SELECT value FROM checkpoint_meta WHERE name = 'pending_forks'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let mut pending: BTreeMap<String, Vec<String>> =
            match forks.as_deref().map(serde_json::from_str) {
                None => BTreeMap::new(),
                Some(Ok(p)) => p,
                Some(Err(e)) => return Ok(Err(format!("damaged pending_forks ({e})"))),
            };
        let old: Vec<String> = files.keys().cloned().collect();
        let renamed = mem_ingest::archive::respell_keys(&mut files, &mut pending);
        for key in old {
            match renamed.get(&key) {
                Some(new) if *new == key => {}
                Some(new) => {
                    tx.execute(
                        "UPDATE checkpoint_files SET path = ?2 WHERE path = ?1",
                        params![key, new],
                    )?;
                }
                None => {
                    tx.execute("DELETE FROM checkpoint_files WHERE path = ?1", [key])?;
                }
            }
        }
        if forks.is_some() {
            tx.execute(
                "UPDATE checkpoint_meta SET value = ?1 WHERE name = 'pending_forks'",
                [serde_json::to_string(&pending).expect("strings")],
            )?;
        }
        tx.pragma_update(None, "user_version", 4)?;
        tx.commit()?;
    }
    if from < 5 {
        // Version 5: a file's row in state layout 11, whose header says
        // whether its parent is a path or a session id.
        let tx = conn.unchecked_transaction()?;
        let rows = match files_before_5(&tx)? {
            Ok(rows) => rows,
            Err(e) => return Ok(Err(e)),
        };
        {
            let mut st = tx.prepare("UPDATE checkpoint_files SET state = ?2 WHERE path = ?1")?;
            for (path, f) in rows {
                st.execute(params![path, f.to_bytes()])?;
            }
        }
        tx.pragma_update(None, "user_version", 5)?;
        tx.commit()?;
    }
    if from < 6 {
        // Version 6: the rule ids of each record's redacted secrets. The
        // records of before were written unredacted: the column is null,
        // and the checkpoint's options say nothing of redaction (a run
        // goes on unredacted until `mem-ingest redact --db` rewrites them).
        let tx = conn.unchecked_transaction()?;
        // (A store that has it already, its version set back by hand, keeps
        // it.)
        let has: bool = tx.query_row(
            "SELECT count(*) > 0 FROM pragma_table_info('records') WHERE name = 'redactions'",
            [],
            |r| r.get(0),
        )?;
        if !has {
            tx.execute_batch("ALTER TABLE records ADD COLUMN redactions TEXT;")?;
        }
        tx.pragma_update(None, "user_version", 6)?;
        tx.commit()?;
    }
    if from < 7 {
        // Version 7: a usage row per response. What the store read before
        // has none yet: the migration records when it ran
        // (`checkpoint_meta`, name `usage_since`, Unix ms) and that what
        // the checkpoint covers is to be read again for its usage rows
        // (`usage_reread`, `pending`): the next backfill does it before it
        // goes on ([`CheckpointStore::save_reread_usage`]).
        let tx = conn.unchecked_transaction()?;
        // (A store another tool set back to an earlier version may have
        // the table already.)
        tx.execute_batch(
            &usage_table()
                .replace("CREATE TABLE usage", "CREATE TABLE IF NOT EXISTS usage")
                .replace(
                    "CREATE INDEX usage_time",
                    "CREATE INDEX IF NOT EXISTS usage_time",
                ),
        )?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        tx.execute(
            "INSERT INTO checkpoint_meta (name, value) VALUES ('usage_since', ?1)
             ON CONFLICT (name) DO NOTHING",
            [now.to_string()],
        )?;
        tx.execute(
            "INSERT INTO checkpoint_meta (name, value) VALUES ('usage_reread', 'pending')
             ON CONFLICT (name) DO NOTHING",
            [],
        )?;
        tx.pragma_update(None, "user_version", 7)?;
        tx.commit()?;
    }
    Ok(Ok(()))
}

/// The state layout of a file's row in schemas 1 to 4 (see
/// [`FileState::from_bytes_of`]).
const LAYOUT_BEFORE_5: u32 = 10;

/// Every file's checkpoint row of a store before schema 5, decoded; Err
/// naming the first that is not one.
fn files_before_5(conn: &Connection) -> rusqlite::Result<Result<Vec<(String, FileState)>, String>> {
    let rows: Vec<(String, Vec<u8>)> = conn
        .prepare("SELECT path, state FROM checkpoint_files")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows
        .into_iter()
        .map(
            |(path, bytes)| match FileState::from_bytes_of(&bytes, LAYOUT_BEFORE_5) {
                Ok(f) => Ok((path, f)),
                Err(e) => Err(format!("{path}: {e}")),
            },
        )
        .collect())
}

/// The insert of a row, or its update where its key is taken (see
/// [`UPSERT`] and [`UPSERT_BY_KEY`]).
macro_rules! upsert_sql {
    () => {
        "INSERT INTO records (key, row_id, format, project, session, file, source,
    line, byte, id, parent_id, entry, role, kinds, timestamp, text, provider, model,
    usage_input, usage_output, usage_cache_read, usage_cache_write, usage_total_tokens,
    usage_cost, stop_reason, tool_name, tool_call_id, is_error, custom_type, command,
    exit_code, text_bytes, agent_id, message_id, request_id, provisional, fingerprint,
    redactions)
VALUES (?1, ?37, ?2, ?3, ?4, ?5, ?6, ?7, ?8,
    ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26,
    ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?38)
ON CONFLICT (key) DO UPDATE SET format = excluded.format, project = excluded.project,
    session = excluded.session, file = excluded.file, source = excluded.source,
    line = excluded.line, byte = excluded.byte, id = excluded.id,
    parent_id = excluded.parent_id, entry = excluded.entry, role = excluded.role,
    kinds = excluded.kinds, timestamp = excluded.timestamp, text = excluded.text,
    provider = excluded.provider, model = excluded.model,
    usage_input = excluded.usage_input, usage_output = excluded.usage_output,
    usage_cache_read = excluded.usage_cache_read,
    usage_cache_write = excluded.usage_cache_write,
    usage_total_tokens = excluded.usage_total_tokens, usage_cost = excluded.usage_cost,
    stop_reason = excluded.stop_reason, tool_name = excluded.tool_name,
    tool_call_id = excluded.tool_call_id, is_error = excluded.is_error,
    custom_type = excluded.custom_type, command = excluded.command,
    exit_code = excluded.exit_code, text_bytes = excluded.text_bytes,
    agent_id = excluded.agent_id, message_id = excluded.message_id,
    request_id = excluded.request_id, provisional = excluded.provisional,
    redactions = excluded.redactions
"
    };
}

/// A row inserted, or updated in place when its key holds the same entry
/// (its fingerprint): another entry under a taken key makes no change
/// (the writer stores it under a key of its own).
const UPSERT: &str = concat!(
    upsert_sql!(),
    "WHERE records.fingerprint = excluded.fingerprint\nRETURNING row_id"
);

/// A revision of a record written before (a message edited after it was
/// emitted): the row of its key updated in place, whatever entry it holds
/// (its row id and fingerprint kept), else inserted.
const UPSERT_BY_KEY: &str = concat!(upsert_sql!(), "RETURNING row_id");

/// One record, owned, as the workers encode it for the store.
#[derive(Debug, Clone)]
pub struct Row {
    key: String,
    format: String,
    project: String,
    session: String,
    file: String,
    source: String,
    line: i64,
    byte: i64,
    id: Option<String>,
    parent_id: Option<String>,
    entry: String,
    role: &'static str,
    kinds: String,
    timestamp: Option<i64>,
    text: String,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<mem_ingest::Usage>,
    stop_reason: Option<String>,
    tool_name: Option<String>,
    tool_call_id: Option<String>,
    is_error: Option<bool>,
    custom_type: Option<String>,
    command: Option<String>,
    exit_code: Option<i64>,
    text_bytes: Option<i64>,
    agent_id: Option<String>,
    message_id: Option<String>,
    request_id: Option<String>,
    provisional: bool,
    fingerprint: u64,
    parent_session: Option<String>,
    /// It revises the record written before under its key.
    revision: bool,
    /// The rule ids of the secrets redacted, as a JSON array (None: none).
    redactions: Option<String>,
}

/// Encodes records into [`Row`]s on the workers.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowEncoder;

fn sat(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Encoder for RowEncoder {
    type Batch = Vec<Row>;

    fn batch(&self, _bytes: u64) -> Vec<Row> {
        Vec::new()
    }

    fn encode(&self, batch: &mut Vec<Row>, r: &Record<'_>, place: Place<'_>) {
        let s = |v: Option<&str>| v.map(str::to_owned);
        let mut kinds = Vec::with_capacity(2 + 10 * r.kinds.len());
        kinds.push(b'[');
        for (i, k) in r.kinds.iter().enumerate() {
            if i > 0 {
                kinds.push(b',');
            }
            mem_ingest::write_json_string(&mut kinds, k);
        }
        kinds.push(b']');
        batch.push(Row {
            key: r.key.to_owned(),
            format: place.format.to_owned(),
            project: r.project.to_owned(),
            session: r.session.to_owned(),
            file: place.file.to_owned(),
            source: r.source.to_owned(),
            line: sat(r.line),
            byte: sat(r.byte),
            id: s(r.id),
            parent_id: s(r.parent_id),
            entry: r.entry.to_owned(),
            role: r.role.as_str(),
            kinds: String::from_utf8(kinds).expect("escaped JSON is UTF-8"),
            timestamp: r.timestamp,
            text: r.text.to_owned(),
            provider: s(r.provider),
            model: s(r.model),
            usage: r.usage,
            stop_reason: s(r.stop_reason),
            tool_name: s(r.tool_name),
            tool_call_id: s(r.tool_call_id),
            is_error: r.is_error,
            custom_type: s(r.custom_type),
            command: s(r.command),
            exit_code: r.exit_code,
            text_bytes: place.text_bytes.map(sat),
            agent_id: s(r.agent_id),
            message_id: s(r.message_id),
            request_id: s(r.request_id),
            provisional: r.provisional,
            fingerprint: place.fingerprint,
            parent_session: place.parent_session.map(str::to_owned),
            revision: place.revision,
            redactions: rule_list(place.redactions),
        });
    }

    /// A revision updates its key's row.
    fn takes_revisions(&self) -> bool {
        true
    }
}

/// Rule ids as the `redactions` column holds them: a JSON array, None for
/// none.
fn rule_list(ids: &[&str]) -> Option<String> {
    if ids.is_empty() {
        return None;
    }
    let mut out = vec![b'['];
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        mem_ingest::write_json_string(&mut out, id);
    }
    out.push(b']');
    Some(String::from_utf8(out).expect("escaped JSON is UTF-8"))
}

/// What a batch did to a session, applied to `sessions` at the commit.
#[derive(Debug, Default)]
struct SessionTouch {
    format: String,
    project: String,
    parent: Option<String>,
    files: BTreeSet<String>,
}

/// The embedded store, a [`Sink`] that keeps its own checkpoint.
///
/// Records are written in a transaction that the next checkpoint commits
/// with the checkpoint's rows: a run killed at any moment leaves the store
/// at its last commit, every record in it exactly once, and the next run
/// goes on from there. The database is in WAL mode (readers are never
/// blocked by the writer); a lock file beside it keeps a second writer
/// off.
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    _lock: mem_ingest::archive::Lock,
    in_tx: bool,
    /// The `row_id` the next new row gets: read when a transaction begins
    /// (no other writer can insert while it is open).
    next_row_id: i64,
    sessions: BTreeMap<String, SessionTouch>,
    /// How line bytes were hashed into the fingerprints the store holds
    /// (`checkpoint_meta.line_hash`).
    line_hash: mem_ingest::LineHash,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// `file:` URI of `path` opened immutable (SQLite takes no lock and makes
/// no `-shm`): every byte but the unreserved ones and `/` percent-encoded.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// The store's own errors, each naming the store; the engine's
/// [`Error`] wraps them ([`ErrorKind::Sink`]), as `From` does here, so
/// every function of the store returns the engine's error, and a caller
/// finds this one with [`mem_ingest::SinkFailure::downcast_ref`].
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be used, and is left as it is: why (not SQLite,
    /// another schema, a newer version, not writable).
    Refused {
        /// The store.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A search query that cannot be run: why.
    BadQuery {
        /// The store.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The store failed while a run wrote it (a full disk): SQLite's
    /// message. What was committed before stays, consistent.
    Failed {
        /// The store.
        path: PathBuf,
        /// SQLite's message.
        why: String,
    },
    /// The store's pages are damaged (SQLite's `SQLITE_CORRUPT`: a `-wal`
    /// deleted after a crash or a kill, a failing disk): SQLite's message.
    /// The file is left as it is.
    Damaged {
        /// The store.
        path: PathBuf,
        /// SQLite's message.
        why: String,
    },
}

impl StoreError {
    /// The store the error is about.
    pub fn path(&self) -> &Path {
        match self {
            StoreError::Refused { path, .. }
            | StoreError::BadQuery { path, .. }
            | StoreError::Failed { path, .. }
            | StoreError::Damaged { path, .. } => path,
        }
    }

    /// Whether it is the caller's to fix (another store, a bad query)
    /// rather than a failure of the store or the system.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            StoreError::Refused { .. } | StoreError::BadQuery { .. }
        )
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Refused { path, why } => write!(f, "the store {} {why}", path.display()),
            StoreError::BadQuery { why, .. } => f.write_str(why),
            StoreError::Failed { path, why } => {
                write!(f, "{}: store failed: {why}", path.display())
            }
            StoreError::Damaged { path, why } => write!(
                f,
                "the store {} is damaged ({why}): a -wal file deleted after a crash or kill, \
                 or a failing disk, does this; restore it from a backup, or move it aside and \
                 run backfill --db again to read the archive anew (`sqlite3 FILE .recover` \
                 saves what is left of it)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        let (path, usage) = (e.path().to_path_buf(), e.is_usage());
        Error::new(
            &path,
            ErrorKind::Sink(mem_ingest::SinkFailure::new(e, usage)),
        )
    }
}

fn refused(path: &Path, why: impl Into<String>) -> Error {
    StoreError::Refused {
        path: path.to_path_buf(),
        why: why.into(),
    }
    .into()
}

fn bad_query(path: &Path, why: String) -> Error {
    StoreError::BadQuery {
        path: path.to_path_buf(),
        why,
    }
    .into()
}

fn failed(path: &Path, e: rusqlite::Error) -> Error {
    let (path, why) = (path.to_path_buf(), e.to_string());
    if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt) {
        return StoreError::Damaged { path, why }.into();
    }
    StoreError::Failed { path, why }.into()
}

impl SqliteStore {
    /// Opens the store at `path`, created when missing, migrated when of
    /// an earlier schema version, and takes its lock.
    ///
    /// # Errors
    /// `StoreRefused`, the file left untouched: not a SQLite file, a SQLite
    /// file of another schema, a newer schema version, a file that cannot
    /// be written; a missing file whose folder does not exist (nothing is
    /// created). `Locked`: another run writes the store.
    pub fn open(path: impl Into<PathBuf>) -> Result<SqliteStore, Error> {
        let path = path.into();
        // Looked at before SQLite touches anything.
        let existing = match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => return Err(refused(&path, "is a folder, not a store")),
            Ok(m) => m.len() > 0,
            Err(_) => false,
        };
        if !existing {
            // A store is created in a folder that exists: never the
            // folder, and not its lock file before saying so.
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
            if let Some(dir) = folder {
                match std::fs::metadata(dir) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        return Err(refused(
                            &path,
                            format!("cannot be created: {} is not a folder", dir.display()),
                        ))
                    }
                    Err(_) => {
                        return Err(refused(
                            &path,
                            format!(
                                "cannot be created: the folder {} does not exist",
                                dir.display()
                            ),
                        ))
                    }
                }
            }
        }
        if existing {
            let mut magic = [0u8; 16];
            let mut f =
                File::open(&path).map_err(|e| refused(&path, format!("cannot be read ({e})")))?;
            let mut got = 0;
            while got < magic.len() {
                match f.read(&mut magic[got..]) {
                    Ok(0) => {
                        return Err(refused(
                            &path,
                            format!(
                                "is not a SQLite database ({got} bytes, shorter than its header)"
                            ),
                        ))
                    }
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(refused(&path, format!("cannot be read ({e})"))),
                }
            }
            if &magic != b"SQLite format 3\0" {
                return Err(refused(&path, "is not a SQLite database"));
            }
            if let Err(e) = std::fs::OpenOptions::new().write(true).open(&path) {
                return Err(refused(&path, format!("cannot be written ({e})")));
            }
        }
        let lock = mem_ingest::archive::lock_file(&path, "store")?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        // The file the name stands for: its `-wal` and `-shm` beside it, as
        // any other name for it finds them.
        let real = mem_ingest::archive::real_path(&path);
        let conn = Connection::open_with_flags(&real, flags).map_err(|e| failed(&path, e))?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| refused(&path, format!("is not a readable SQLite database ({e})")))?;
        let tables: Vec<String> = {
            let mut st = conn
                .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")
                .map_err(|e| failed(&path, e))?;
            let names = st
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(|e| failed(&path, e))?;
            names
                .collect::<Result<_, _>>()
                .map_err(|e| failed(&path, e))?
        };
        let ours = TABLES.iter().all(|t| tables.iter().any(|n| n == t));
        match version {
            0 if tables.is_empty() => {
                conn.execute_batch("PRAGMA journal_mode = WAL;")
                    .map_err(|e| failed(&path, e))?;
                conn.execute_batch(&format!(
                    "BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                ))
                .map_err(|e| failed(&path, e))?;
            }
            0 => {
                return Err(refused(
                    &path,
                    "is a SQLite database of another schema (no mem-ingest version)",
                ))
            }
            v if v > SCHEMA_VERSION => {
                return Err(refused(
                    &path,
                    format!(
                        "has schema version {v}; this mem-ingest writes {SCHEMA_VERSION} and \
                         reads no newer one"
                    ),
                ))
            }
            _ if !ours => {
                return Err(refused(
                    &path,
                    format!("has schema version {version} but not the tables of mem-ingest's"),
                ))
            }
            v => {
                if let Err(e) = migrate(&conn, v).map_err(|e| failed(&path, e))? {
                    return Err(refused(&path, format!("holds a damaged checkpoint: {e}")));
                }
            }
        }
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(|e| failed(&path, e))?;
        conn.set_prepared_statement_cache_capacity(32);
        let recorded: Option<String> = conn
            .query_row(
                "SELECT value FROM checkpoint_meta WHERE name = 'line_hash'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| failed(&path, e))?;
        let Some(line_hash) = recorded
            .as_deref()
            .and_then(|v| v.parse().ok())
            .and_then(mem_ingest::LineHash::from_id)
        else {
            return Err(refused(
                &path,
                format!(
                    "holds fingerprints of line hash {}, which this mem-ingest does not know",
                    recorded.as_deref().unwrap_or("(none recorded)")
                ),
            ));
        };
        Ok(SqliteStore {
            conn,
            path,
            _lock: lock,
            in_tx: false,
            next_row_id: 0,
            sessions: BTreeMap::new(),
            line_hash,
        })
    }

    /// The store's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Caps the database at `pages` pages (SQLite's `max_page_count`): a
    /// write past it fails as a full disk would (for tests of that fault).
    ///
    /// # Errors
    /// SQLite refused the setting.
    pub fn max_page_count(&mut self, pages: u64) -> Result<(), Error> {
        self.conn
            .pragma_update(None, "max_page_count", sat(pages))
            .map_err(|e| failed(&self.path, e))
    }

    fn err(&self, e: rusqlite::Error) -> Error {
        failed(&self.path, e)
    }

    fn begin(&mut self) -> Result<(), Error> {
        if !self.in_tx {
            self.conn
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(|e| self.err(e))?;
            self.in_tx = true;
            self.next_row_id = self
                .conn
                .query_row(
                    "SELECT COALESCE(MAX(row_id), 0) + 1 FROM records",
                    [],
                    |r| r.get(0),
                )
                .map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// Inserts the row under `key`, or updates the row stored under it when
    /// it is the same entry: its `row_id`, or None when `key` holds another
    /// entry.
    fn upsert(&self, r: &Row, key: &str) -> rusqlite::Result<Option<i64>> {
        let sql = if r.revision { UPSERT_BY_KEY } else { UPSERT };
        let mut st = self.conn.prepare_cached(sql)?;
        let u = r.usage.as_ref();
        st.query_row(
            params![
                key,
                r.format,
                r.project,
                r.session,
                r.file,
                r.source,
                r.line,
                r.byte,
                r.id,
                r.parent_id,
                r.entry,
                r.role,
                r.kinds,
                r.timestamp,
                r.text,
                r.provider,
                r.model,
                u.map(|u| sat(u.input)),
                u.map(|u| sat(u.output)),
                u.map(|u| sat(u.cache_read)),
                u.map(|u| sat(u.cache_write)),
                u.map(|u| sat(u.total_tokens)),
                u.map(|u| u.cost),
                r.stop_reason,
                r.tool_name,
                r.tool_call_id,
                r.is_error,
                r.custom_type,
                r.command,
                r.exit_code,
                r.text_bytes,
                r.agent_id,
                r.message_id,
                r.request_id,
                r.provisional.then_some(1),
                r.fingerprint as i64,
                self.next_row_id,
                r.redactions,
            ],
            |row| row.get(0),
        )
        .optional()
    }

    /// Indexes the rows above `indexed_up_to`, in one statement, and moves
    /// it to the last row.
    fn index_new_rows(&mut self) -> rusqlite::Result<()> {
        self.conn.execute_batch(
            "INSERT INTO records_fts (rowid, text) SELECT row_id, text FROM records
                 WHERE row_id > (SELECT CAST(value AS INTEGER) FROM checkpoint_meta
                                 WHERE name = 'indexed_up_to');
             UPDATE checkpoint_meta SET value = (SELECT COALESCE(MAX(row_id), 0) FROM records)
                 WHERE name = 'indexed_up_to';",
        )
    }

    /// The sessions the batches since the last commit touched, brought up
    /// to date from their rows.
    fn update_sessions(&mut self) -> rusqlite::Result<()> {
        for (id, t) in std::mem::take(&mut self.sessions) {
            let (records, first, last): (i64, Option<i64>, Option<i64>) = self
                .conn
                .prepare_cached(
                    "SELECT count(*), min(timestamp), max(timestamp) FROM records WHERE session = ?1",
                )?
                .query_row([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            self.conn
                .prepare_cached(
                    "INSERT INTO sessions (id, format, project, first_timestamp, last_timestamp,
                        parent_session, records) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (id) DO UPDATE SET first_timestamp = excluded.first_timestamp,
                        last_timestamp = excluded.last_timestamp, records = excluded.records,
                        parent_session = COALESCE(sessions.parent_session, excluded.parent_session)",
                )?
                .execute(params![id, t.format, t.project, first, last, t.parent, records])?;
            let mut st = self.conn.prepare_cached(
                "INSERT OR IGNORE INTO session_files (session, file) VALUES (?1, ?2)",
            )?;
            for f in &t.files {
                st.execute(params![id, f])?;
            }
        }
        Ok(())
    }

    /// Files the checkpoint saw complete: each is a file of its session,
    /// whether it added rows or held only copies (a history written twice).
    fn touch_files(&mut self, cp: &Checkpoint<'_>) {
        for (path, f) in cp.changed_files() {
            let Some(f) = f else { continue };
            let t = self.sessions.entry(f.header.id.clone()).or_default();
            if t.format.is_empty() {
                t.format = f.format.clone();
                t.project = f.header.cwd.clone();
            }
            if !t.files.contains(path) {
                t.files.insert(path.to_owned());
            }
        }
    }

    fn save_checkpoint(&mut self, cp: &mut Checkpoint<'_>) -> rusqlite::Result<()> {
        let options = serde_json::to_string(cp.options()).expect("options serialise");
        self.conn
            .prepare_cached(
                "INSERT INTO checkpoint_meta (name, value) VALUES ('options', ?1)
                 ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            )?
            .execute([&options])?;
        // Claude Code's usage responses added or replaced: their usage
        // rows, by index.
        for (i, r) in cp.changed_response_usage() {
            upsert_usage(&self.conn, &format!("claude#{i}"), &r)?;
        }
        // The usage responses added or replaced, a row each.
        {
            let mut st = self.conn.prepare_cached(
                "INSERT INTO checkpoint_responses (seq, response) VALUES (?1, ?2)
                 ON CONFLICT (seq) DO UPDATE SET response = excluded.response",
            )?;
            for (i, r) in cp.changed_responses() {
                st.execute(params![i, r])?;
            }
        }
        for (path, f) in cp.changed_files() {
            match f {
                Some(f) => {
                    self.conn
                        .prepare_cached(
                            "INSERT INTO checkpoint_files (path, state) VALUES (?1, ?2)
                             ON CONFLICT (path) DO UPDATE SET state = excluded.state",
                        )?
                        .execute(params![path, f.to_bytes()])?;
                }
                None => {
                    self.conn
                        .prepare_cached("DELETE FROM checkpoint_files WHERE path = ?1")?
                        .execute([path])?;
                }
            }
        }
        {
            let mut st = self.conn.prepare_cached(
                "INSERT INTO checkpoint_fingerprints (session, fingerprint) VALUES (?1, ?2)",
            )?;
            for (session, fps) in cp.new_fingerprints() {
                for fp in fps {
                    st.execute(params![session, *fp as i64])?;
                }
            }
        }
        {
            let mut st = self
                .conn
                .prepare_cached("INSERT INTO checkpoint_joins (a, b) VALUES (?1, ?2)")?;
            for (a, b) in cp.new_joins() {
                st.execute(params![a, b])?;
            }
        }
        // Forks waiting for a parent read ahead, and a shard's roots: a row
        // only while there are any (a store of a release before keeps none,
        // and reads the same).
        let pending = (!cp.pending_forks().is_empty())
            .then(|| serde_json::to_string(cp.pending_forks()).expect("strings serialise"));
        self.set_meta("pending_forks", pending.as_deref())?;
        let roots = (!cp.shard_roots().is_empty())
            .then(|| serde_json::to_string(cp.shard_roots()).expect("strings serialise"));
        self.set_meta("shard_roots", roots.as_deref())?;
        Ok(())
    }

    /// Sets (or, with None, removes) the `checkpoint_meta` row `name`.
    fn set_meta(&self, name: &str, value: Option<&str>) -> rusqlite::Result<()> {
        match value {
            None => self
                .conn
                .prepare_cached("DELETE FROM checkpoint_meta WHERE name = ?1")?
                .execute([name])?,
            Some(v) => self
                .conn
                .prepare_cached(
                    "INSERT INTO checkpoint_meta (name, value) VALUES (?1, ?2)
                     ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                )?
                .execute([name, v])?,
        };
        Ok(())
    }

    /// The JSON value of the `checkpoint_meta` row `name`, if any: Err
    /// with why when it is damaged.
    fn meta_json<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> rusqlite::Result<Result<Option<T>, String>> {
        let v: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM checkpoint_meta WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()?;
        Ok(v.map(|v| serde_json::from_str(&v))
            .transpose()
            .map_err(|e| format!("damaged checkpoint {name} ({e})")))
    }

    fn load_checkpoint(&self) -> rusqlite::Result<Option<Result<State, String>>> {
        let options: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM checkpoint_meta WHERE name = 'options'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let Some(options) = options else {
            return Ok(None);
        };
        let options: OutputOptions = match serde_json::from_str(&options) {
            Ok(o) => o,
            Err(e) => return Ok(Some(Err(format!("damaged checkpoint options ({e})")))),
        };
        let mut st = State::new(options);
        let responses: Vec<(i64, Vec<u8>)> = self
            .conn
            .prepare("SELECT seq, response FROM checkpoint_responses ORDER BY seq")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        // Each row is the response of its index: a gap would shift the
        // ones after it.
        if let Some((at, (seq, _))) = responses
            .iter()
            .enumerate()
            .find(|(i, (seq, _))| *seq != *i as i64)
        {
            return Ok(Some(Err(format!(
                "damaged usage responses (row {at} has seq {seq})"
            ))));
        }
        st.set_response_rows(responses.into_iter().map(|(_, r)| r));
        let mut files = self
            .conn
            .prepare("SELECT path, state FROM checkpoint_files")?;
        let rows = files.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (path, bytes) = row?;
            match FileState::from_bytes(&bytes) {
                Ok(f) => {
                    st.files.insert(path, Arc::new(f));
                }
                Err(e) => return Ok(Some(Err(format!("{path}: {e}")))),
            }
        }
        let joins: Vec<(String, String)> = self
            .conn
            .prepare("SELECT a, b FROM checkpoint_joins ORDER BY rowid")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let fps: Vec<(String, u64)> = self
            .conn
            .prepare("SELECT session, fingerprint FROM checkpoint_fingerprints")?
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))?
            .collect::<Result<_, _>>()?;
        st.set_lineages_from_rows(fps, &joins);
        match self.meta_json("pending_forks")? {
            Ok(p) => st.set_pending_forks(p.unwrap_or_default()),
            Err(e) => return Ok(Some(Err(e))),
        }
        match self.meta_json("shard_roots")? {
            Ok(r) => st.set_shard_roots(r.unwrap_or_default()),
            Err(e) => return Ok(Some(Err(e))),
        }
        Ok(Some(Ok(st)))
    }
}

/// What [`SqliteStore::redact_all`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redacted {
    /// Records read.
    pub records: u64,
    /// Records whose text or command was rewritten.
    pub rewritten: u64,
    /// Secrets replaced, by rule id.
    pub secrets: BTreeMap<&'static str, u64>,
    /// Files' checkpoint rows whose running context held record text (a
    /// Gemini CLI message held back, saved by an earlier release as its
    /// JSON), rewritten without it
    /// ([`mem_ingest::format::Format::context_without_text`]).
    pub contexts: u64,
}

impl SqliteStore {
    /// Redacts a store written before redaction existed (or with
    /// `--no-redact`), in place: every record's `text` and `command` as a
    /// backfill would have written them, and the full-text index with
    /// them, in one transaction that also records in the checkpoint's
    /// options that the store is redacted (later backfills redact, and
    /// refuse `--no-redact`). Then it leaves no old text in the file:
    /// `secure_delete` on while rows change, the full-text index rebuilt
    /// from the rewritten rows (its old segments dropped), `VACUUM`
    /// (outside the transaction) and `wal_checkpoint(TRUNCATE)`.
    ///
    /// # Errors
    /// The store failed; the transaction is rolled back (nothing
    /// changed).
    pub fn redact_all(&mut self) -> Result<Redacted, Error> {
        let r = mem_ingest::redact::Redactor::get();
        let ids = r.rule_ids();
        let mut done = Redacted::default();
        let run = |done: &mut Redacted| -> rusqlite::Result<()> {
            self.conn.execute_batch("PRAGMA secure_delete = ON")?;
            let tx = self.conn.unchecked_transaction()?;
            {
                let mut read = tx.prepare("SELECT row_id, text, command FROM records")?;
                let mut write = tx.prepare(
                    "UPDATE records SET text = ?2, command = ?3, redactions = ?4
                     WHERE row_id = ?1",
                )?;
                let mut rows = read.query([])?;
                let mut rules = Vec::new();
                while let Some(row) = rows.next()? {
                    done.records += 1;
                    let text: String = row.get(1)?;
                    let command: Option<String> = row.get(2)?;
                    rules.clear();
                    let t = r.redact(&text, &mut rules);
                    let c = command.as_deref().and_then(|c| r.redact(c, &mut rules));
                    if rules.is_empty() {
                        continue;
                    }
                    done.rewritten += 1;
                    let names: Vec<&str> = rules.iter().map(|&i| ids[i]).collect();
                    for n in &names {
                        *done.secrets.entry(n).or_insert(0) += 1;
                    }
                    let row_id: i64 = row.get(0)?;
                    write.execute(params![
                        row_id,
                        t.as_deref().unwrap_or(&text),
                        c.as_deref().or(command.as_deref()),
                        rule_list(&names),
                    ])?;
                }
            }
            // The checkpoint's running contexts hold no text: one an
            // earlier release saved with a held message's JSON is written
            // again without it (a row this release cannot decode is left
            // for the next backfill to refuse, naming it).
            {
                let rows: Vec<(rusqlite::types::Value, Vec<u8>)> = tx
                    .prepare("SELECT path, state FROM checkpoint_files")?
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<_, _>>()?;
                let mut write =
                    tx.prepare("UPDATE checkpoint_files SET state = ?2 WHERE path = ?1")?;
                for (path, bytes) in rows {
                    let Ok(mut f) = FileState::from_bytes(&bytes) else {
                        continue;
                    };
                    let Some(context) = mem_ingest::formats::by_name(&f.format)
                        .and_then(|format| format.context_without_text(&f.context))
                    else {
                        continue;
                    };
                    f.context = context;
                    write.execute(params![path, f.to_bytes()])?;
                    done.contexts += 1;
                }
            }
            // The index anew from the rows: its old segments (which hold
            // the old text's tokens until merged) go, every row indexed.
            tx.execute_batch(
                "INSERT INTO records_fts (records_fts) VALUES ('rebuild');
                 UPDATE checkpoint_meta SET value = (SELECT COALESCE(MAX(row_id), 0) FROM records)
                     WHERE name = 'indexed_up_to';",
            )?;
            let options: Option<String> = tx
                .query_row(
                    "SELECT value FROM checkpoint_meta WHERE name = 'options'",
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(o) = options {
                // Kept as written but for `redact` (a key this release may
                // not know stays).
                if let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str(&o) {
                    m.insert("redact".into(), serde_json::Value::Bool(true));
                    let o = serde_json::Value::Object(m).to_string();
                    tx.execute(
                        "UPDATE checkpoint_meta SET value = ?1 WHERE name = 'options'",
                        [o],
                    )?;
                }
            }
            tx.commit()?;
            self.conn.execute_batch("VACUUM")?;
            self.conn
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
            Ok(())
        };
        run(&mut done).map_err(|e| self.err(e))?;
        Ok(done)
    }
}

/// The secrets redacted in a store's records, by rule id (from
/// `records.redactions`): what its backfills and `redact --db` replaced in
/// the records it holds.
///
/// # Errors
/// The store cannot be read.
pub fn redaction_counts(conn: &Connection) -> rusqlite::Result<BTreeMap<String, u64>> {
    let mut counts = BTreeMap::new();
    let mut st = conn.prepare(
        "SELECT j.value, count(*) FROM records, json_each(records.redactions) AS j
         WHERE records.redactions IS NOT NULL GROUP BY j.value",
    )?;
    let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (rule, n) = row?;
        counts.insert(rule, n as u64);
    }
    Ok(counts)
}

impl Sink for SqliteStore {
    type Encoder = RowEncoder;

    fn encoder(&self) -> RowEncoder {
        RowEncoder
    }

    fn write(&mut self, batch: Vec<Row>, dropped: &[usize]) -> Result<bool, Error> {
        self.begin()?;
        let mut dropped = dropped.iter().peekable();
        for (i, r) in batch.iter().enumerate() {
            if dropped.peek() == Some(&&i) {
                dropped.next();
                continue;
            }
            // Another entry under this key: under its own, derived from its
            // fingerprint.
            let mut stored = self.upsert(r, &r.key).map_err(|e| self.err(e))?;
            if stored.is_none() {
                let key = format!("{}~{:016x}", r.key, r.fingerprint);
                stored = self.upsert(r, &key).map_err(|e| self.err(e))?;
            }
            // A new row took the row id (an update in place keeps its own).
            if stored == Some(self.next_row_id) {
                self.next_row_id += 1;
            }
            if !self.sessions.contains_key(&r.session) {
                self.sessions
                    .insert(r.session.clone(), SessionTouch::default());
            }
            let t = self.sessions.get_mut(&r.session).expect("inserted");
            if t.format.is_empty() {
                t.format = r.format.clone();
                t.project = r.project.clone();
                t.parent = r.parent_session.clone();
            }
            if !t.files.contains(&r.file) {
                t.files.insert(r.file.clone());
            }
        }
        Ok(true)
    }

    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        Some(self)
    }

    /// Folds the write-ahead log back into the database, when no reader
    /// holds it (never waiting for one).
    fn finish(&mut self) -> Result<(), Error> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(|e| self.err(e))
    }

    fn output_file(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn wants_usage(&self) -> bool {
        true
    }

    /// In the transaction of the records they came with.
    fn write_usage(&mut self, rows: &[CountedUsage]) -> Result<(), Error> {
        self.begin()?;
        for r in rows {
            upsert_usage(&self.conn, &usage_key(r), r).map_err(|e| self.err(e))?;
        }
        Ok(())
    }

    /// The document's rows replaced by those it holds now, in the
    /// transaction of its records and of the checkpoint that moves past
    /// them: a row of a message a rewind or an edit dropped goes, and no
    /// row of the message now in its place is taken over.
    fn write_document_usage(
        &mut self,
        doc: &mem_ingest::sink::DocumentUsage<'_>,
    ) -> Result<(), Error> {
        self.begin()?;
        delete_usage_of(&self.conn, doc.file).map_err(|e| self.err(e))?;
        for r in doc.rows {
            upsert_usage(&self.conn, &usage_key(r), r).map_err(|e| self.err(e))?;
        }
        Ok(())
    }
}

impl CheckpointStore for SqliteStore {
    fn load(&mut self) -> Result<Option<State>, Error> {
        match self.load_checkpoint().map_err(|e| self.err(e))? {
            None => Ok(None),
            Some(Ok(mut st)) => {
                // The store's own record of it wins over the options'.
                st.options.line_hash = self.line_hash.id();
                Ok(Some(st))
            }
            Some(Err(why)) => Err(Error::new(&self.path, ErrorKind::StateDamaged(why))),
        }
    }

    /// One transaction: the rows written since the last commit, their
    /// index, the sessions they touched and the checkpoint that moves past
    /// them.
    fn line_hash(&self) -> Option<mem_ingest::LineHash> {
        Some(self.line_hash)
    }

    fn describe(&self) -> (&'static str, &Path) {
        ("store", &self.path)
    }

    /// Pending from the migration to schema 7 until a backfill has read
    /// again; also for a store that the release before migrated, which
    /// did not read again (its `usage_since` without `usage_reread`): rows
    /// are keyed as a run keys them, so those it wrote since are written
    /// again the same, not twice.
    fn usage_reread_pending(&mut self) -> Result<bool, Error> {
        let v: Option<(Option<String>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT (SELECT value FROM checkpoint_meta WHERE name = 'usage_since'),
                        (SELECT value FROM checkpoint_meta WHERE name = 'usage_reread')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(match v {
            Some((_, Some(r))) => r == "pending",
            Some((Some(_), None)) => true,
            _ => false,
        })
    }

    /// A store the release before migrated: `usage_since` without
    /// `usage_reread`.
    fn usage_rows_before_reread(&mut self) -> Result<bool, Error> {
        let v: Option<(Option<String>, Option<String>)> = self
            .conn
            .query_row(
                "SELECT (SELECT value FROM checkpoint_meta WHERE name = 'usage_since'),
                        (SELECT value FROM checkpoint_meta WHERE name = 'usage_reread')",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        Ok(matches!(v, Some((Some(_), None))))
    }

    /// One transaction: the rows, keyed as a run keys them (a row a run
    /// writes later for the same response rewrites it), and the record
    /// that they are written: `usage_reread` gone, or, when files could
    /// not be read again, saying how many (and `usage_since` kept, for
    /// `usage --db` to warn); `usage_since` gone when every file was read.
    fn save_reread_usage(
        &mut self,
        reread: &mem_ingest::archive::UsageReread,
    ) -> Result<(), Error> {
        if self.in_tx {
            return Err(refused(
                &self.path,
                "usage rows read again inside another write (please report it)",
            ));
        }
        let conn = &self.conn;
        let saved = (|| -> rusqlite::Result<()> {
            let tx = conn.unchecked_transaction()?;
            // The rows of the files read again that a run wrote before
            // (a store the release before migrated, which did not read
            // again, has them): the re-read's replace them, not add to
            // them (where that run read a Codex fork's replay before its
            // parent, the replay is the fork's there and the parent's
            // here). Claude Code's are keyed by response: rewritten below.
            if !reread.read.is_empty() {
                let read: std::collections::HashSet<&str> =
                    reread.read.iter().map(String::as_str).collect();
                let mut gone = Vec::new();
                {
                    let mut st =
                        tx.prepare("SELECT key, file FROM usage WHERE key NOT LIKE 'claude#%'")?;
                    let mut rows = st.query([])?;
                    while let Some(r) = rows.next()? {
                        let file: Option<String> = r.get(1)?;
                        if file.is_some_and(|f| read.contains(f.as_str())) {
                            gone.push(r.get::<_, String>(0)?);
                        }
                    }
                }
                let mut del = tx.prepare("DELETE FROM usage WHERE key = ?1")?;
                for k in &gone {
                    del.execute([k])?;
                }
            }
            for r in &reread.rows {
                upsert_usage(&tx, &usage_key(r), r)?;
            }
            for (i, r) in &reread.responses {
                upsert_usage(&tx, &format!("claude#{i}"), r)?;
            }
            if reread.unread.is_empty() {
                tx.execute(
                    "DELETE FROM checkpoint_meta WHERE name IN ('usage_reread', 'usage_since')",
                    [],
                )?;
            } else {
                let bytes: String = format!(
                    "{} of them, {}",
                    reread.unread.len(),
                    reread
                        .unread
                        .iter()
                        .take(3)
                        .map(|(p, why)| format!("{p} ({why})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                tx.execute(
                    "INSERT INTO checkpoint_meta (name, value) VALUES ('usage_reread', ?1)
                     ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                    [bytes],
                )?;
            }
            tx.commit()
        })();
        saved.map_err(|e| self.err(e))
    }

    fn save(&mut self, cp: &mut Checkpoint<'_>) -> Result<(), Error> {
        self.begin()?;
        self.touch_files(cp);
        let saved = self
            .index_new_rows()
            .and_then(|()| self.update_sessions())
            .and_then(|()| self.save_checkpoint(cp))
            .and_then(|()| self.conn.execute_batch("COMMIT"));
        if let Err(e) = saved {
            let _ = self.conn.execute_batch("ROLLBACK");
            self.in_tx = false;
            return Err(self.err(e));
        }
        self.in_tx = false;
        Ok(())
    }
}

impl Drop for SqliteStore {
    /// What was written since the last commit is not covered by a
    /// checkpoint: rolled back.
    fn drop(&mut self) {
        if self.in_tx {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

// ---------------------------------------------------------------------------
// Search

/// A full-text search of a store. Every filter defaults to none.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// Words as people type them (see [`words_query`]), or with `fts`,
    /// FTS5 query syntax passed through unchanged.
    pub query: String,
    /// Whether `query` is FTS5 syntax.
    pub fts: bool,
    /// Only projects that hold this (ASCII case folded; `%` and `_` are
    /// themselves).
    pub project: Option<String>,
    /// Only this role (its schema name).
    pub role: Option<String>,
    /// Only records at or after this time, Unix ms.
    pub since: Option<i64>,
    /// Only records before this time, Unix ms.
    pub until: Option<i64>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
    /// Only this format (`pi`).
    pub format: Option<String>,
    /// Hits at most (0: 20).
    pub limit: usize,
    /// Rank every match (default: past [`RANKED`] matches, the last
    /// `RANKED` stored).
    pub rank_all: bool,
}

/// Matches ranked at most, unless [`Search::rank_all`]: the last stored
/// (the newest rows). BM25 costs a lookup per ranked match.
pub const RANKED: usize = 1000;

/// One hit, best first.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    /// The record's key.
    pub key: String,
    /// Its session.
    pub session: String,
    /// Its project.
    pub project: String,
    /// Its time, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Its role.
    pub role: String,
    /// The agent that wrote it (the format's name: `pi`).
    pub agent: String,
    /// The file it was read from.
    pub file: String,
    /// Its line there (1-based).
    pub line: i64,
    /// Its line's byte offset there.
    pub byte: i64,
    /// The text around the match, matches between `«` and `»`.
    pub snippet: String,
    /// BM25 (lower is better, as FTS5 gives it).
    pub rank: f64,
}

/// FTS5 query syntax for words as people type them: each word, and each
/// `"quoted phrase"`, becomes an FTS5 string (quotes inside doubled), all
/// of them required. An identifier (`parse_iso_millis`), a path
/// (`src/cli/run.rs`) or an error code (`E0502`) is then a phrase of the
/// tokens the index holds for it, found wherever the text has it.
///
/// # Errors
/// Nothing in `q` has a letter or digit to search for.
pub fn words_query(q: &str) -> Result<String, String> {
    Ok(words_phrases(q)?.join(" "))
}

/// The FTS5 strings of [`words_query`], one per word or quoted phrase.
fn words_phrases(q: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut rest = q;
    while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
        rest = &rest[start..];
        let (piece, next) = if let Some(body) = rest.strip_prefix('"') {
            match body.find('"') {
                Some(end) => (&body[..end], &body[end + 1..]),
                None => (body, ""),
            }
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        if piece.chars().any(char::is_alphanumeric) {
            parts.push(format!("\"{}\"", piece.replace('"', "\"\"")));
        }
        rest = next;
    }
    if parts.is_empty() {
        return Err(format!("the query {q:?} has no words to search for"));
    }
    Ok(parts)
}

/// Searches the store at `path` (opened read-only: a writer running at the
/// same time is not disturbed), best hits first (BM25).
///
/// # Errors
/// `StoreRefused` when `path` is not a store of this schema version;
/// `BadQuery` for a query FTS5 cannot parse (with `fts`) or one with no
/// words.
pub fn search(path: &Path, s: &Search) -> Result<Vec<Hit>, Error> {
    let phrases = if s.fts {
        None
    } else {
        Some(words_phrases(&s.query).map_err(|e| bad_query(path, e))?)
    };
    let query = phrases
        .as_ref()
        .map_or_else(|| s.query.clone(), |p| p.join(" "));
    let conn = open_to_read(path, "search")?;
    let mut filters = String::new();
    let mut args: Vec<rusqlite::types::Value> = vec![query.clone().into()];
    let mut filter = |column: &str, op: &str, v: rusqlite::types::Value| {
        args.push(v);
        filters.push_str(&format!(" AND r.{column} {op} ?{}", args.len()));
        if op == "LIKE" {
            filters.push_str(" ESCAPE '\\'");
        }
    };
    if let Some(p) = &s.project {
        let pattern = format!("%{}%", sessions::like_literal(p));
        filter("project", "LIKE", pattern.into());
    }
    if let Some(r) = &s.role {
        filter("role", "=", r.clone().into());
    }
    if let Some(t) = s.since {
        filter("timestamp", ">=", t.into());
    }
    if let Some(t) = s.until {
        filter("timestamp", "<", t.into());
    }
    if let Some(x) = &s.session {
        let pattern = format!("{}%", sessions::like_literal(x));
        filter("session", "LIKE", pattern.into());
    }
    if let Some(f) = &s.format {
        filter("format", "=", f.clone().into());
    }
    let limit = if s.limit == 0 { 20 } else { s.limit };
    if s.fts {
        check_fts(&query)
            .map_err(|e| bad_query(path, format!("malformed FTS5 query {query:?}: {e}")))?;
    }
    let bad_query = |e: rusqlite::Error| failed(path, e);
    let matches = "FROM records_fts JOIN records r ON r.row_id = records_fts.rowid
         WHERE records_fts MATCH ?1";
    // BM25 needs each match's length: a lookup per match, 90 ms for the
    // 180,000 matches of a common word. Past RANKED matches, only the last
    // RANKED stored are ranked: FTS5 walks the matches newest first and
    // stops there, in one pass.
    let bound = if s.rank_all {
        String::new()
    } else {
        format!(" LIMIT {RANKED}")
    };
    // Words: FTS5's BM25, its IDF counts taken in parallel (see `rank`);
    // FTS5's own `bm25()` for FTS5 syntax, or when that cannot be used.
    let fast = match &phrases {
        Some(p) => ranked_words(&conn, path, p, &filters, &args, &bound)?,
        None => None,
    };
    let mut best: Vec<(i64, f64)> = match fast {
        Some(b) => b,
        None => conn
            .prepare(&format!(
                "SELECT records_fts.rowid, bm25(records_fts) {matches}{filters}
                 ORDER BY records_fts.rowid DESC{bound}"
            ))
            .map_err(bad_query)?
            .query_map(rusqlite::params_from_iter(args.iter()), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(bad_query)?
            .collect::<Result<_, _>>()
            .map_err(bad_query)?,
    };
    // The walk stopped at the newest `RANKED` matches: every match from
    // the oldest of them on was walked, so walking that range again is
    // cheap (see below).
    let stopped = !s.rank_all && best.len() >= RANKED;
    // Best first (BM25 is lower for better), ties newest first.
    best.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
    best.truncate(limit);
    // Snippets for the hits only: a snippet tokenizes its row's text.
    // (Shared out among threads, each with a connection of its own, they
    // took longer: 15.7 ms against 11.5 for `buffer stream`.)
    // Each cut from a bounded window of its text (see `snippet`): FTS5's
    // own `snippet()` is quadratic in the matches of a row. FTS5's, when
    // that cannot be had.
    let snippet = if snippet::register(&conn).is_ok() {
        "mi_snippet(records_fts)"
    } else {
        "snippet(records_fts, 0, '«', '»', '…', 16)"
    };
    let columns = format!(
        "SELECT records_fts.rowid, r.key, r.session, r.project, r.timestamp, r.role, {snippet},
                r.format, r.file, r.line, r.byte
         FROM records_fts JOIN records r ON r.row_id = records_fts.rowid
         WHERE records_fts MATCH ?1"
    );
    let hit = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, Hit)> {
        Ok((
            r.get(0)?,
            Hit {
                key: r.get(1)?,
                session: r.get(2)?,
                project: r.get(3)?,
                timestamp: r.get(4)?,
                role: r.get(5)?,
                snippet: r.get(6)?,
                agent: r.get(7)?,
                file: r.get(8)?,
                line: r.get(9)?,
                byte: r.get(10)?,
                rank: 0.0,
            },
        ))
    };
    // A hit's row gone since the walk: as a statement of its own finds it.
    let gone = || failed(path, rusqlite::Error::QueryReturnedNoRows);
    if stopped && best.len() > 1 {
        // One statement for them all: the matches between the oldest and
        // the newest hit, those of the hits kept (`+`: a filter, not the
        // walk's key). Each hit a statement of its own parsed and set up
        // the query again: 3.4 against 2.5 ms for 20 hits of `compute`,
        // 4.9 against 1.5 ms of `"regression test"`.
        let lo = best.iter().map(|b| b.0).min().unwrap_or(0);
        let hi = best.iter().map(|b| b.0).max().unwrap_or(0);
        let list: Vec<String> = best.iter().map(|b| b.0.to_string()).collect();
        let mut found: BTreeMap<i64, Hit> = conn
            .prepare(&format!(
                "{columns} AND records_fts.rowid >= ?2 AND records_fts.rowid <= ?3
                 AND +records_fts.rowid IN ({})",
                list.join(",")
            ))
            .map_err(bad_query)?
            .query_map(params![query, lo, hi], hit)
            .map_err(bad_query)?
            .collect::<Result<_, _>>()
            .map_err(bad_query)?;
        return best
            .into_iter()
            .map(|(rowid, rank)| {
                let h = found.remove(&rowid).ok_or_else(gone)?;
                Ok(Hit { rank, ..h })
            })
            .collect();
    }
    let mut one = conn
        .prepare(&format!("{columns} AND records_fts.rowid = ?2"))
        .map_err(bad_query)?;
    best.into_iter()
        .map(|(rowid, rank)| {
            let (_, h) = one
                .query_row(params![query, rowid], hit)
                .map_err(bad_query)?;
            Ok(Hit { rank, ..h })
        })
        .collect()
}

/// Opens a store to read it, never to write (see `search`): read-only, or
/// immutable when its folder cannot be written and no `-wal` holds rows;
/// refused when it is not a store of a schema version this release reads.
/// `what` is the command, for the refusal.
pub(crate) fn open_to_read(path: &Path, what: &str) -> Result<Connection, Error> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() > 0 => {}
        Ok(_) => return Err(refused(path, "is not a store (empty, or not a file)")),
        Err(e) => return Err(Error::io(path, e)),
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| failed(path, e))?;
    let version = |c: &Connection| c.pragma_query_value(None, "user_version", |r| r.get(0));
    let not_readable = |e| refused(path, format!("is not a readable SQLite database ({e})"));
    let version: i64 = match version(&conn) {
        Ok(v) => v,
        // A store in WAL mode is read with a `-shm` beside it, which a
        // user who cannot write the folder cannot make. With no `-wal`
        // holding rows (none after a backfill that ended), the file holds
        // every row: read it as immutable (no lock, no -shm).
        Err(e)
            if matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)
            ) =>
        {
            let mut wal_name = mem_ingest::archive::real_path(path).into_os_string();
            wal_name.push("-wal");
            if std::fs::metadata(&wal_name).is_ok_and(|m| m.len() > 0) {
                return Err(Error::new(
                    path,
                    ErrorKind::Setup(format!(
                        "the store {} cannot be searched by this user: its folder cannot be \
                         written and its -wal holds rows not yet in it, which SQLite reads only \
                         with a -shm file beside it; search as a user who can write the folder, \
                         or let one run a backfill --db (or `sqlite3 FILE 'PRAGMA \
                         wal_checkpoint(TRUNCATE)'`) first",
                        path.display()
                    )),
                ));
            }
            conn = Connection::open_with_flags(
                immutable_uri(path),
                flags | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(|e| failed(path, e))?;
            version(&conn).map_err(not_readable)?
        }
        Err(e) => return Err(not_readable(e)),
    };
    // Versions 1 and 2 differ in the checkpoint's tables only.
    if !(1..=SCHEMA_VERSION).contains(&version) {
        return Err(refused(
            path,
            format!("has schema version {version}; {what} reads 1 to {SCHEMA_VERSION}"),
        ));
    }
    Ok(conn)
}

/// The matches of a word query, newest first (the last `bound` stored at
/// most, as the `LIMIT` clause `bound` says), each with the rank FTS5's
/// `bm25()` gives it, bit for bit (see `rank`); None when that cannot be
/// had this way (no FTS5 API, more than 64 phrases, a query FTS5 reads as
/// other phrases than `phrases`) or the store changed while it was taken.
fn ranked_words(
    conn: &Connection,
    path: &Path,
    phrases: &[String],
    filters: &str,
    args: &[rusqlite::types::Value],
    bound: &str,
) -> Result<Option<Vec<(i64, f64)>>, Error> {
    if phrases.len() > 63 || rank::register(conn).is_err() {
        return Ok(None);
    }
    let failed = |e: rusqlite::Error| failed(path, e);
    let version = || -> Result<i64, Error> {
        conn.pragma_query_value(None, "data_version", |r| r.get(0))
            .map_err(failed)
    };
    let before = version()?;
    // A phrase of several tokens (a path, an identifier, a quoted phrase)
    // costs a check of the tokens' positions in every row that holds them
    // all: its walk and its count are cut into slices of rowids. The walk,
    // and the counts known to be needed, are tasks that `threads` threads
    // take in turn, each on a connection of its own.
    let several = |p: &str| {
        p.split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
            .nth(1)
            .is_some()
    };
    // Without one, a query is one statement, as with `bm25()`: the walk,
    // which counts each phrase at its first row.
    let sliced = phrases.iter().any(|p| several(p));
    let threads = if sliced {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
    } else {
        1
    };
    let slices = if sliced {
        rank::slices(conn, threads).map_err(failed)?
    } else {
        vec![(i64::MIN, i64::MAX)]
    };
    // A query of one phrase of several tokens (or of it repeated),
    // unfiltered: when the walk sees its every match, their count is the
    // phrase's, else it is counted after the walk. Else a phrase of one
    // token is counted as FTS5 counts it; one of several, a slice at a
    // time.
    let alone =
        phrases.iter().all(|q| *q == phrases[0]) && filters.is_empty() && several(&phrases[0]);
    let firsts: Vec<usize> = (0..phrases.len())
        .filter(|&i| !phrases[..i].contains(&phrases[i]))
        .collect();
    let mut tasks: Vec<Task> = slices.iter().map(|&s| Task::Walk(s)).collect();
    let mut mask = 0u64;
    for &i in &firsts {
        if !several(&phrases[i]) {
            if sliced {
                tasks.push(Task::Hits(i));
            } else {
                mask |= 1 << i;
            }
        } else if !alone {
            tasks.extend(slices.iter().map(|&s| Task::Count(i, s)));
        }
    }
    // The walk: each slice newest first, the newest `RANKED` of them all
    // kept. Unfiltered, it needs no row of `records`.
    let (from, rowid) = if filters.is_empty() {
        ("FROM records_fts", "rowid")
    } else {
        (
            "FROM records_fts JOIN records r ON r.row_id = records_fts.rowid",
            "records_fts.rowid",
        )
    };
    let n = args.len();
    let walk = format!(
        "SELECT {rowid}, mi_bm25_parts(records_fts, {mask}) {from}
         WHERE records_fts MATCH ?1{filters} AND {rowid} >= ?{a} AND {rowid} <= ?{b}
         ORDER BY {rowid} DESC{bound}",
        mask = mask as i64,
        a = n + 1,
        b = n + 2
    );
    let run = |c: &Connection, t: &Task| -> rusqlite::Result<Done> {
        match *t {
            Task::Walk((a, b)) => {
                let mut st = c.prepare_cached(&walk)?;
                let all = args.iter().cloned().chain([a.into(), b.into()]);
                let rows = st
                    .query_map(rusqlite::params_from_iter(all), |r| {
                        Ok((r.get(0)?, r.get(1)?))
                    })?
                    .collect::<rusqlite::Result<Vec<(i64, Vec<u8>)>>>();
                rows.map(Done::Walked)
            }
            // The whole query, so that its phrase `i` is this one; counted
            // at its first match (none: no row holds them all, and the
            // count is not used).
            Task::Hits(i) => c
                .prepare_cached(
                    "SELECT mi_bm25_parts(records_fts, ?2) FROM records_fts
                     WHERE records_fts MATCH ?1 LIMIT 1",
                )?
                .query_row(params![args[0], 1i64 << i], |r| r.get::<_, Vec<u8>>(0))
                .optional()
                .map(|b| {
                    Done::Rows(
                        b.and_then(|b| rank::Parts::decode(&b))
                            .and_then(|p| p.hits.get(i).copied())
                            .unwrap_or(-1),
                    )
                }),
            Task::Count(i, (a, b)) => c
                .prepare_cached(
                    "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?1
                     AND rowid >= ?2 AND rowid <= ?3",
                )?
                .query_row(params![phrases[i], a, b], |r| r.get(0))
                .map(Done::Rows),
        }
    };
    let mut done = rank::on_threads(path, conn, threads, &tasks, run).map_err(failed)?;
    let mut parts = Vec::new();
    for d in &done {
        if let Done::Walked(rows) = d {
            for (rowid, blob) in rows {
                match rank::Parts::decode(blob) {
                    Some(p) if p.freq.len() == phrases.len() && p.rows > 0 => {
                        parts.push((*rowid, p));
                    }
                    _ => return Ok(None),
                }
            }
        }
    }
    let complete = bound.is_empty() || parts.len() < RANKED;
    if !bound.is_empty() {
        parts.truncate(RANKED);
    }
    let Some((_, first)) = parts.first() else {
        return Ok(Some(Vec::new()));
    };
    if alone && !complete {
        // Not every match seen: counted after all.
        let more: Vec<Task> = slices.iter().map(|&s| Task::Count(0, s)).collect();
        done.extend(rank::on_threads(path, conn, threads, &more, run).map_err(failed)?);
        tasks.extend(more);
    }
    let mut hits = vec![0i64; phrases.len()];
    for (i, h) in first.hits.iter().enumerate() {
        if mask & (1 << i) != 0 {
            hits[i] = *h;
        }
    }
    for (t, d) in tasks.iter().zip(&done) {
        if let (Task::Hits(i) | Task::Count(i, _), Done::Rows(n)) = (t, d) {
            hits[*i] += n;
        }
    }
    if alone && complete {
        hits[0] = parts.len() as i64;
    }
    for i in 0..phrases.len() {
        if let Some(j) = phrases[..i].iter().position(|q| *q == phrases[i]) {
            hits[i] = hits[j];
        }
    }
    if hits.iter().any(|&h| h < 0) || version()? != before {
        return Ok(None);
    }
    let idf: Vec<f64> = hits.iter().map(|&h| rank::idf(first.rows, h)).collect();
    Ok(Some(
        parts
            .iter()
            .map(|(rowid, p)| (*rowid, rank::bm25(p, &idf)))
            .collect(),
    ))
}

/// What a thread of [`ranked_words`] does: walk a slice of rowids; count a
/// phrase of one token (as FTS5 counts it); count a phrase in a slice.
#[derive(Debug, Clone, Copy)]
enum Task {
    Walk((i64, i64)),
    Hits(usize),
    Count(usize, (i64, i64)),
}

/// What a task found: the walk's rows and their `mi_bm25_parts`, or rows
/// counted (-1: not counted).
enum Done {
    Walked(Vec<(i64, Vec<u8>)>),
    Rows(i64),
}

/// Whether FTS5 can parse `query`: run against an empty index of the same
/// columns in memory, so that what fails there is the query, and what fails
/// on the store is the store.
fn check_fts(query: &str) -> Result<(), String> {
    let conn = Connection::open_in_memory().map_err(|e| e.to_string())?;
    conn.execute_batch("CREATE VIRTUAL TABLE q USING fts5(text)")
        .map_err(|e| e.to_string())?;
    let mut st = conn
        .prepare("SELECT rowid FROM q WHERE q MATCH ?1")
        .map_err(|e| e.to_string())?;
    let mut rows = st.query([query]).map_err(|e| e.to_string())?;
    rows.next().map(|_| ()).map_err(|e| e.to_string())
}

/// What a store's usage rows lack of what it read (see [`usage_rows`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageGap {
    /// A store before schema 7: no usage rows at all.
    Before7,
    /// Migrated to schema 7 at this time (Unix ms), and what it read
    /// before is not read again yet: the next `backfill --db` writes it.
    Pending(i64),
    /// Migrated at this time; read again then, except some files (why,
    /// in words: how many, and the first ones).
    Unread(i64, String),
}

/// Every usage row of the store at `path` (`usage --db`), in the order
/// written, with what they lack: None when they cover everything the
/// store read (a store made with usage rows, or one migrated to schema 7
/// whose earlier files were all read again by its next backfill).
///
/// # Errors
/// The store cannot be read (see `search`), or a row is not one.
pub fn usage_rows(path: &Path) -> Result<(Vec<CountedUsage>, Option<UsageGap>), Error> {
    let conn = open_to_read(path, "usage")?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| failed(path, e))?;
    if version < 7 {
        return Ok((Vec::new(), Some(UsageGap::Before7)));
    }
    let meta = |name: &str| -> Result<Option<String>, Error> {
        conn.query_row(
            "SELECT value FROM checkpoint_meta WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| failed(path, e))
    };
    let since = meta("usage_since")?.map(|t| t.parse::<i64>().unwrap_or(0));
    let since = match (since, meta("usage_reread")?) {
        (None, _) => None,
        (Some(t), Some(v)) if v != "pending" => Some(UsageGap::Unread(t, v)),
        // (A store migrated by the release before, which did not read
        // again, has no `usage_reread`: its next backfill reads again too.)
        (Some(t), _) => Some(UsageGap::Pending(t)),
    };
    let mut st = conn
        .prepare(
            "SELECT agent, session, project, file, line, timestamp, provider, model, input,
                output, cache_read, cache_write, cache_write_1h, reasoning, total_tokens, cost,
                cost_recorded
             FROM usage ORDER BY rowid",
        )
        .map_err(|e| failed(path, e))?;
    let n = |r: &rusqlite::Row<'_>, i: usize| -> rusqlite::Result<u64> {
        Ok(r.get::<_, i64>(i)?.max(0) as u64)
    };
    let rows = st
        .query_map([], |r| {
            let agent: String = r.get(0)?;
            let cost: Option<f64> = r.get(15)?;
            Ok((
                agent,
                CountedUsage {
                    agent: "",
                    session: r.get(1)?,
                    project: r.get(2)?,
                    file: r.get(3)?,
                    line: n(r, 4)?,
                    // Only a row's key holds it (read back: not needed).
                    seq: 0,
                    time: r.get(5)?,
                    provider: r.get(6)?,
                    model: r.get(7)?,
                    usage: mem_ingest::Usage {
                        input: n(r, 8)?,
                        output: n(r, 9)?,
                        cache_read: n(r, 10)?,
                        cache_write: n(r, 11)?,
                        total_tokens: n(r, 14)?,
                        cost: cost.unwrap_or(0.0),
                    },
                    cache_write_1h: n(r, 12)?,
                    reasoning: n(r, 13)?,
                    recorded: r.get::<_, i64>(16)? != 0,
                },
            ))
        })
        .map_err(|e| failed(path, e))?;
    let mut out = Vec::new();
    for row in rows {
        let (agent, mut u) = row.map_err(|e| failed(path, e))?;
        // The agent as the registry names it (a row of an agent this
        // release does not know keeps the name "unknown").
        u.agent = mem_ingest::formats::by_name(&agent).map_or("unknown", |f| f.name());
        out.push(u);
    }
    Ok((out, since))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `.cargo/config.toml` builds SQLite without memory statistics (a
    /// mutex per allocation that the search's threads queue on).
    #[test]
    fn sqlite_is_built_without_memory_statistics() {
        let conn = Connection::open_in_memory().unwrap();
        let on: bool = conn
            .query_row(
                "SELECT sqlite_compileoption_used('DEFAULT_MEMSTATUS=0')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            on,
            "LIBSQLITE3_FLAGS of .cargo/config.toml not applied: one set in the \
             environment replaces it, a system SQLite ignores it, and cargo run \
             from outside this repository does not read it"
        );
    }

    #[test]
    fn malformed_fts5_queries_are_told_apart() {
        assert_eq!(check_fts("a OR b"), Ok(()));
        assert_eq!(check_fts("text: a*"), Ok(()));
        assert_eq!(check_fts("\"unclosed").unwrap_err(), "unterminated string");
        assert_eq!(
            check_fts("a AND").unwrap_err(),
            "fts5: syntax error near \"\""
        );
        assert_eq!(check_fts("nocol: x").unwrap_err(), "no such column: nocol");
    }

    #[test]
    fn words_become_fts5_strings() {
        assert_eq!(
            words_query("parse_iso_millis").unwrap(),
            r#""parse_iso_millis""#
        );
        assert_eq!(
            words_query(r#"  src/cli/run.rs E0502 "exact phrase" "#).unwrap(),
            r#""src/cli/run.rs" "E0502" "exact phrase""#
        );
        assert_eq!(words_query(r#"say "a""#).unwrap(), r#""say" "a""#);
        assert_eq!(
            words_query(r#"it's AND OR NOT"#).unwrap(),
            r#""it's" "AND" "OR" "NOT""#
        );
        assert_eq!(
            words_query(r#"unclosed "quo te"#).unwrap(),
            r#""unclosed" "quo te""#
        );
        assert_eq!(words_query(r#"a"b"#).unwrap(), r#""a""b""#);
        assert!(words_query(" -- ... \"\" ").is_err());
    }
}
