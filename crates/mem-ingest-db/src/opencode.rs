//! OpenCode (1.2 and later): sessions in `opencode.db` (SQLite, WAL) in
//! its data folder, `message` and `part` rows with JSON in `data`
//! (`../shared/spec/opencode-format.md`; `docs/opencode.md`).
//!
//! Read after a cursor (see [`mem_ingest_parse::rows`]): the `message`
//! table's rowid high-water mark, guarded by the id of the row at the mark
//! (another id there, or none: the table is read again from the start,
//! the messages emitted known by id); assistant messages not yet
//! complete (no `time.completed` and no `error`, or a tool part still
//! `pending`/`running`) and user messages without parts yet are pending,
//! read again by id at every run until they are final. A final message
//! gives one record (its text, reasoning and tool calls), and each of its
//! finished tool parts a `tool_result` record of its own. Usage is counted
//! per LLM call, from the message's `step-finish` parts (the message's own
//! `tokens` are its last call's only), the message's `tokens` only where
//! it has no `step-finish` part.
//!
//! Not read (said in `docs/opencode.md`): the pre-1.2 `storage/` JSON
//! tree, and 2.x's `session_message` table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bumpalo::Bump;
use mem_ingest_parse::format::{BoxedSource, Format, Input};
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::report::UsageAt;
use mem_ingest_parse::rows::{self, Cursor, Database, MapRows, Row, Rows};
use mem_ingest_parse::{
    Error, Header, Record, Report, Role, RoleFilter, SkipReason, SourceOptions, Usage,
};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::sqlite::{fail, has_table, in_read, open_read_only, text_of};

/// The OpenCode format.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenCode;

/// Messages read at most in one batch (one read transaction).
const BATCH: i64 = 256;

/// The lineage of every OpenCode database: the channels' databases
/// (`opencode.db`, `opencode-<channel>.db`) hold the same messages under
/// the same ids, each emitted once.
const LINEAGE: &str = "opencode";

/// OpenCode's data folder: `$XDG_DATA_HOME/opencode`, else
/// `~/.local/share/opencode`, on every platform (its `Global.Path.data`).
pub fn data_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let base = xdg.or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("share"))
    })?;
    Some(base.join("opencode"))
}

/// Whether `name` is an OpenCode database's: `opencode.db` or a channel's
/// `opencode-<channel>.db`.
pub fn is_database_name(name: &str) -> bool {
    name == "opencode.db"
        || name
            .strip_prefix("opencode-")
            .and_then(|r| r.strip_suffix(".db"))
            .is_some_and(|c| !c.is_empty())
}

impl Format for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn records_cost(&self) -> bool {
        true
    }

    /// Its databases by name only: a folder walked never opens another
    /// database (nor the store) as OpenCode's.
    fn is_session_file(&self, path: &Path) -> bool {
        path.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_database_name)
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        let Some(dir) = data_dir() else {
            return Err("no OpenCode archive: neither XDG_DATA_HOME nor HOME is set".into());
        };
        let has_db = std::fs::read_dir(&dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_str().is_some_and(is_database_name))
        });
        if has_db {
            Ok(dir)
        } else {
            Err(format!(
                "no OpenCode archive: no opencode.db (or opencode-<channel>.db) in {}",
                dir.display()
            ))
        }
    }

    fn open<'d>(
        &self,
        _input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        Ok(rows::open(self, path, None, opts))
    }

    fn resume<'d>(
        &self,
        _input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        _byte: u64,
        _lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        rows::open(self, path, Some((header, context)), opts)
    }

    fn needs_running_context(&self) -> bool {
        true
    }

    fn is_rows(&self, _path: &Path) -> bool {
        true
    }

    /// A database of this agent's tables under any name (a backup copy
    /// named as a PATH).
    fn detect_file(&self, path: &Path, prefix: &[u8]) -> bool {
        crate::sqlite::has_tables(path, prefix, &["message", "part"])
    }
}

impl MapRows for OpenCode {
    fn open(&self, path: &Path, cursor: &mut Cursor) -> Result<(Header, Box<dyn Database>), Error> {
        let conn = open_read_only(path)?;
        let mark = cursor.marks.get("message").copied();
        let (tables, at_mark) = in_read(&conn, |c| {
            let tables = has_table(c, "message")? && has_table(c, "part")?;
            let at_mark = match (tables, mark) {
                (true, Some(m)) => c
                    .query_row("SELECT id FROM message WHERE rowid = ?1", [m], |r| {
                        r.get::<_, String>(0)
                    })
                    .optional()?,
                _ => None,
            };
            Ok((tables, at_mark))
        })
        .map_err(|e| fail(path, "cannot read the database's schema", &e))?;
        if !tables {
            return Err(Error::io(
                path,
                std::io::Error::other(
                    "not an OpenCode database: no `message` and `part` tables (OpenCode 1.2 \
                     and later keep their sessions in them)",
                ),
            ));
        }
        if mark.is_some()
            && at_mark.map(|id| guard_of(&id)) != cursor.guards.get("message").copied()
        {
            // Another row at the mark (a deleted row's rowid taken by a
            // new one), or none (a restored backup, a VACUUM that
            // renumbered): read again from the start; what was emitted
            // stays emitted.
            cursor.rescan();
        }
        let header = Header {
            id: LINEAGE.to_owned(),
            cwd: String::new(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fingerprint(&[b"opencode-db", LINEAGE.as_bytes()]),
        };
        let db = Db {
            conn,
            path: path.to_path_buf(),
            pending_read: false,
            sessions: HashMap::new(),
            bytes: 0,
        };
        Ok((header, Box::new(db)))
    }
}

fn guard_of(id: &str) -> u64 {
    fingerprint(&[b"opencode-guard", id.as_bytes()])
}

/// A session's columns a record takes.
#[derive(Debug, Clone)]
struct Session {
    directory: String,
}

/// A message row and its parts, as read in a batch's transaction.
struct Msg {
    rowid: i64,
    id: String,
    session: String,
    /// Its `data`, or what the column holds instead of text.
    data: Result<String, &'static str>,
    /// `(part id, data)`, by creation time then id.
    parts: Vec<(String, Result<String, &'static str>)>,
}

/// An OpenCode database opened for one read.
struct Db {
    conn: Connection,
    path: PathBuf,
    pending_read: bool,
    sessions: HashMap<String, Session>,
    bytes: u64,
}

/// A batch's messages, and the sessions they name not known before.
type Batch = (Vec<Msg>, Vec<(String, Session)>);

const MSG_COLS: &str = "SELECT rowid, id, session_id, data FROM message";

fn msg_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Msg> {
    Ok(Msg {
        rowid: r.get(0)?,
        id: r.get(1)?,
        session: r.get(2)?,
        data: text_of(r, 3)?,
        parts: Vec::new(),
    })
}

impl Db {
    /// The messages of one batch with their parts, and the sessions they
    /// name not known yet, in one read transaction.
    fn read(&self, pending: Option<&[String]>, mark: i64) -> rusqlite::Result<Batch> {
        in_read(&self.conn, |c| {
            let mut msgs = Vec::new();
            match pending {
                Some(ids) => {
                    let mut st = c.prepare_cached(&format!("{MSG_COLS} WHERE id = ?1"))?;
                    for id in ids {
                        if let Some(m) = st.query_row([id], msg_of).optional()? {
                            msgs.push(m);
                        }
                    }
                }
                None => {
                    let mut st = c.prepare_cached(&format!(
                        "{MSG_COLS} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"
                    ))?;
                    let rows = st.query_map(rusqlite::params![mark, BATCH], msg_of)?;
                    for m in rows {
                        msgs.push(m?);
                    }
                }
            }
            let mut parts = c.prepare_cached(
                "SELECT id, data FROM part WHERE message_id = ?1 ORDER BY time_created, id",
            )?;
            for m in &mut msgs {
                let rows = parts.query_map([&m.id], |r| Ok((r.get(0)?, text_of(r, 1)?)))?;
                for p in rows {
                    m.parts.push(p?);
                }
            }
            let mut sessions = Vec::new();
            let mut st = c.prepare_cached("SELECT directory FROM session WHERE id = ?1")?;
            for m in &msgs {
                if self.sessions.contains_key(&m.session)
                    || sessions.iter().any(|(s, _)| *s == m.session)
                {
                    continue;
                }
                let directory: Option<String> =
                    st.query_row([&m.session], |r| r.get(0)).optional()?;
                sessions.push((
                    m.session.clone(),
                    Session {
                        directory: directory.unwrap_or_default(),
                    },
                ));
            }
            Ok((msgs, sessions))
        })
    }
}

/// A message's usage from a `tokens` object and a cost: `input` is the
/// non-cached input, `output` excludes reasoning; the total is the
/// provider's `total` where larger than the sum of the parts (as ccusage
/// 20.0.24 takes it).
fn usage_of(tokens: &Value, cost: f64) -> (Usage, u64) {
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cache = tokens.get("cache");
    let input = n(tokens.get("input"));
    let output = n(tokens.get("output"));
    let reasoning = n(tokens.get("reasoning"));
    let cache_read = n(cache.and_then(|c| c.get("read")));
    let cache_write = n(cache.and_then(|c| c.get("write")));
    let sum = input
        .saturating_add(output)
        .saturating_add(reasoning)
        .saturating_add(cache_read)
        .saturating_add(cache_write);
    let usage = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: sum.max(n(tokens.get("total"))),
        cost,
    };
    (usage, reasoning)
}

fn is_zero(u: &Usage) -> bool {
    u.total_tokens == 0 && u.cost == 0.0
}

fn str_of<'v>(v: &'v Value, k: &str) -> Option<&'v str> {
    v.get(k).and_then(Value::as_str)
}

/// Whether a message is final: a user message once it has parts; an
/// assistant message once complete (`time.completed`, or an `error`) with
/// no tool part still pending or running.
fn is_final(data: &Value, parts: &[Value]) -> bool {
    match str_of(data, "role") {
        Some("user") => !parts.is_empty(),
        Some("assistant") => {
            let done = data
                .pointer("/time/completed")
                .is_some_and(|v| !v.is_null())
                || data.get("error").is_some_and(|v| !v.is_null());
            done && parts.iter().all(|p| {
                str_of(p, "type") != Some("tool")
                    || matches!(
                        p.pointer("/state/status").and_then(Value::as_str),
                        Some("completed" | "error")
                    )
            })
        }
        _ => true,
    }
}

/// A record with the fields every OpenCode record shares.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record<'a>(
    role: Role,
    text: &'a str,
    kinds: &'a [&'a str],
    project: &'a str,
    session: &'a str,
    source: &'a str,
    key: &'a str,
    id: &'a str,
    line: u64,
    timestamp: Option<i64>,
) -> Record<'a> {
    Record {
        role,
        text,
        project,
        session,
        key,
        source,
        id: Some(id),
        parent_id: None,
        line,
        byte: 0,
        entry: "message",
        message_role: None,
        kinds,
        timestamp,
        provider: None,
        model: None,
        usage: None,
        stop_reason: None,
        tool_name: None,
        tool_call_id: None,
        is_error: None,
        custom_type: None,
        command: None,
        exit_code: None,
        repaired: false,
        agent_id: None,
        message_id: None,
        request_id: None,
        provisional: false,
    }
}

impl Db {
    /// Counts and pushes the rows of one final message.
    #[allow(clippy::too_many_lines, clippy::too_many_arguments)]
    fn emit<'a>(
        &mut self,
        m: &Msg,
        data: &Value,
        parts: &[Value],
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) {
        let len = |d: &Result<String, &str>| d.as_ref().map_or(0, String::len);
        self.bytes += (len(&m.data) + m.parts.iter().map(|p| len(&p.1)).sum::<usize>()) as u64;
        let line = u64::try_from(m.rowid).unwrap_or(0);
        let byte = self.bytes;
        let session: &'a str = arena.alloc_str(&m.session);
        let source: &'a str = arena.alloc_str(&format!("opencode:{}", m.session));
        let directory = self
            .sessions
            .get(&m.session)
            .map(|s| s.directory.as_str())
            .filter(|d| !d.is_empty())
            .or_else(|| data.pointer("/path/cwd").and_then(Value::as_str))
            .unwrap_or("");
        let project: &'a str = arena.alloc_str(directory);
        let id: &'a str = arena.alloc_str(&m.id);
        let time = data.pointer("/time/created").and_then(Value::as_i64);
        let role = match str_of(data, "role") {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                report.add_unknown_role(other.unwrap_or("(none)"));
                report.no_record += 1;
                rows.push(
                    report,
                    Row {
                        key: id,
                        fingerprint: fingerprint(&[b"opencode", id.as_bytes()]),
                        line,
                        byte,
                        record: None,
                    },
                );
                return;
            }
        };
        let assistant = role == Role::Assistant;
        let provider = str_of(data, "providerID").filter(|_| assistant);
        let model = str_of(data, "modelID").filter(|_| assistant);
        // Usage: each LLM call's step-finish part.
        let mut total: Option<Usage> = None;
        if assistant {
            for p in parts
                .iter()
                .filter(|p| str_of(p, "type") == Some("step-finish"))
            {
                let cost = p.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
                let (u, reasoning) = usage_of(p.get("tokens").unwrap_or(&Value::Null), cost);
                let at = UsageAt {
                    line,
                    time,
                    reasoning,
                };
                report.add_usage_at(provider, model, &u, true, at);
                total.get_or_insert_with(Usage::default).add(&u);
            }
            if total.is_none() {
                // No step-finish part (a build that wrote none): the
                // message's own tokens, its last call's.
                let cost = data.get("cost").and_then(Value::as_f64).unwrap_or(0.0);
                let (u, reasoning) = usage_of(data.get("tokens").unwrap_or(&Value::Null), cost);
                if !is_zero(&u) {
                    let at = UsageAt {
                        line,
                        time,
                        reasoning,
                    };
                    report.add_usage_at(provider, model, &u, true, at);
                    total = Some(u);
                }
            }
        }
        // The message's record.
        let mut text = String::new();
        let mut kinds: Vec<&'static str> = Vec::new();
        let kind = |k: &'static str, kinds: &mut Vec<&'static str>| {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        };
        let piece = |s: &str, text: &mut String| {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(s);
        };
        let mut first_call: Option<(&str, &str)> = None;
        for p in parts {
            match str_of(p, "type").unwrap_or("") {
                "text" => {
                    if let Some(t) = str_of(p, "text").filter(|t| !t.is_empty()) {
                        kind("text", &mut kinds);
                        piece(t, &mut text);
                    }
                }
                "reasoning" => {
                    if let Some(t) = str_of(p, "text").filter(|t| !t.is_empty()) {
                        kind("thinking", &mut kinds);
                        piece(t, &mut text);
                    }
                }
                "tool" => {
                    let name = str_of(p, "tool").unwrap_or("");
                    kind("toolCall", &mut kinds);
                    let input = p
                        .pointer("/state/input")
                        .map(Value::to_string)
                        .unwrap_or_default();
                    piece(&format!("{name} {input}"), &mut text);
                    if first_call.is_none() {
                        first_call = Some((name, str_of(p, "callID").unwrap_or("")));
                    }
                }
                "file" => {
                    kind("file", &mut kinds);
                    let name = str_of(p, "filename")
                        .or_else(|| p.pointer("/source/path").and_then(Value::as_str));
                    if let Some(n) = name {
                        piece(&format!("[file {n}]"), &mut text);
                    }
                }
                "compaction" => kind("compaction", &mut kinds),
                "subtask" => {
                    kind("subtask", &mut kinds);
                    if let Some(t) = str_of(p, "prompt") {
                        piece(t, &mut text);
                    }
                }
                _ => {}
            }
        }
        if data.get("summary") == Some(&Value::Bool(true)) {
            kind("summary", &mut kinds);
        }
        let error = data.get("error").filter(|e| !e.is_null());
        if let Some(e) = error {
            kind("error", &mut kinds);
            let name = str_of(e, "name").unwrap_or("error");
            let msg = e.pointer("/data/message").and_then(Value::as_str);
            match msg {
                Some(msg) => piece(&format!("{name}: {msg}"), &mut text),
                None => piece(name, &mut text),
            }
        }
        let key: &'a str = arena.alloc_str(&format!("{}:{}", m.session, m.id));
        let rec = report.count_record(role, filter).then(|| {
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&kinds);
            let mut r = record(
                role,
                arena.alloc_str(&text),
                kinds,
                project,
                session,
                source,
                key,
                id,
                line,
                time,
            );
            r.provider = provider.map(|s| &*arena.alloc_str(s));
            r.model = model.map(|s| &*arena.alloc_str(s));
            r.usage = total;
            r.parent_id = str_of(data, "parentID").map(|s| &*arena.alloc_str(s));
            r.stop_reason = str_of(data, "finish")
                .or_else(|| error.and_then(|e| str_of(e, "name")))
                .map(|s| &*arena.alloc_str(s));
            if let Some((name, call)) = first_call {
                r.tool_name = Some(arena.alloc_str(name));
                r.tool_call_id = Some(&*arena.alloc_str(call)).filter(|c| !c.is_empty());
            }
            r
        });
        rows.push(
            report,
            Row {
                key: id,
                fingerprint: fingerprint(&[b"opencode", id.as_bytes()]),
                line,
                byte,
                record: rec,
            },
        );
        // Each finished tool part: a tool_result record of its own.
        for (p, (pid, _)) in parts.iter().zip(&m.parts) {
            if str_of(p, "type") != Some("tool") {
                continue;
            }
            let status = p.pointer("/state/status").and_then(Value::as_str);
            let is_error = match status {
                Some("completed") => false,
                Some("error") => true,
                _ => continue,
            };
            let name = str_of(p, "tool").unwrap_or("");
            let call = str_of(p, "callID").unwrap_or("");
            let out = if is_error {
                p.pointer("/state/error").and_then(Value::as_str)
            } else {
                p.pointer("/state/output").and_then(Value::as_str)
            }
            .unwrap_or("");
            let row_key: &'a str = arena.alloc_str(&format!("{}/{pid}", m.id));
            let rec = report.count_record(Role::ToolResult, filter).then(|| {
                let kinds: &'a [&'a str] = arena.alloc_slice_copy(&["toolResult"]);
                let key = arena.alloc_str(&format!("{}:{}:{pid}", m.session, m.id));
                let mut r = record(
                    Role::ToolResult,
                    arena.alloc_str(out),
                    kinds,
                    project,
                    session,
                    source,
                    key,
                    arena.alloc_str(pid),
                    line,
                    p.pointer("/state/time/end")
                        .and_then(Value::as_i64)
                        .or(time),
                );
                r.entry = "tool";
                r.parent_id = Some(id);
                r.tool_name = Some(arena.alloc_str(name));
                r.tool_call_id = Some(&*arena.alloc_str(call)).filter(|c| !c.is_empty());
                r.is_error = Some(is_error);
                if name == "bash" {
                    r.command = p
                        .pointer("/state/input/command")
                        .and_then(Value::as_str)
                        .map(|c| &*arena.alloc_str(c));
                    r.exit_code = p.pointer("/state/metadata/exit").and_then(Value::as_i64);
                }
                r
            });
            rows.push(
                report,
                Row {
                    key: row_key,
                    fingerprint: fingerprint(&[b"opencode", id.as_bytes(), pid.as_bytes()]),
                    line,
                    byte,
                    record: rec,
                },
            );
        }
    }
}

impl Database for Db {
    fn next_batch<'a>(
        &mut self,
        cursor: &mut Cursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<bool, Error> {
        let pending: Option<Vec<String>> = (!self.pending_read).then(|| {
            self.pending_read = true;
            std::mem::take(&mut cursor.pending).into_iter().collect()
        });
        let mark = cursor.marks.get("message").copied().unwrap_or(0);
        let (msgs, sessions) = match self.read(pending.as_deref(), mark) {
            Ok(r) => r,
            Err(e) => {
                if let Some(p) = pending {
                    // Not read: still pending.
                    cursor.pending.extend(p);
                }
                return Err(fail(&self.path, "cannot read its messages", &e));
            }
        };
        self.sessions.extend(sessions);
        let full = pending.is_none() && msgs.len() as i64 == BATCH;
        for m in &msgs {
            if pending.is_none() {
                cursor.marks.insert("message".into(), m.rowid);
                cursor.guards.insert("message".into(), guard_of(&m.id));
            }
            if cursor.was_emitted(&m.id) {
                continue;
            }
            let data = match &m.data {
                Ok(d) => serde_json::from_str::<Value>(d).map_err(|e| e.to_string()),
                Err(why) => Err(format!("data is {why}")),
            };
            let data: Value = match data {
                Ok(v) => v,
                Err(e) => {
                    // A damaged row: counted and skipped once, by its rowid.
                    let line = u64::try_from(m.rowid).unwrap_or(0);
                    report.skip(
                        line,
                        0,
                        SkipReason::Malformed(format!("message {}: {e}", m.id)),
                    );
                    rows.push(
                        report,
                        Row {
                            key: arena.alloc_str(&m.id),
                            fingerprint: fingerprint(&[b"opencode", m.id.as_bytes()]),
                            line,
                            byte: self.bytes,
                            record: None,
                        },
                    );
                    continue;
                }
            };
            let mut bad = Vec::new();
            let parts: Vec<Value> = m
                .parts
                .iter()
                .map(|(id, d)| {
                    let d = match d {
                        Ok(d) => serde_json::from_str(d).map_err(|e| e.to_string()),
                        Err(why) => Err(format!("data is {why}")),
                    };
                    d.unwrap_or_else(|e| {
                        bad.push(format!("part {id} of message {}: {e}", m.id));
                        Value::Null
                    })
                })
                .collect();
            if !is_final(&data, &parts) {
                cursor.pending.insert(m.id.clone());
                continue;
            }
            // A damaged part of a final message: counted and skipped (the
            // message's other parts are read).
            for why in bad {
                report.skip(
                    u64::try_from(m.rowid).unwrap_or(0),
                    0,
                    SkipReason::Malformed(why),
                );
            }
            self.emit(m, &data, &parts, arena, filter, report, rows);
        }
        Ok(pending.is_some() || full)
    }
}
