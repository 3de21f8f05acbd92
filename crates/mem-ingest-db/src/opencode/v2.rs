//! OpenCode 2.x's `session_message` table, read after the 1.x tables of
//! the same database: one row per message, its role in `type`, its
//! content inline in `data` (no part rows). 2.x's migration copies the
//! 1.x rows into it under the same ids and leaves the 1.x tables as they
//! were: a row whose id was emitted from `message` (read first, so it
//! wins) is passed over, and only messages written there alone are read.
//!
//! The shapes are those of `../shared/spec/opencode-format.md` §5 (from
//! OpenCode's `packages/core/src/session/message.ts`; not checked against a
//! 2.x build there). The cursor is the 1.x one's: the table's rowid
//! high-water mark and the id at it (guards), the messages seen
//! unfinished (an assistant without `time.completed` and without `error`,
//! or with a tool still `pending` or `running`), kept in the cursor's
//! pending set as `v2:<id>` and read again by id, and the keys emitted.
//! `data` is read through `serde_json::Value` (2.x rows are few beside
//! the 1.x tables; the 1.x reader's typed reading is not needed here).

use bumpalo::Bump;
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::report::UsageAt;
use mem_ingest_parse::rows::{Cursor, Row, Rows};
use mem_ingest_parse::{Error, Report, Role, RoleFilter, SkipReason, Usage};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::{call_fingerprint, guard_of, is_zero, record, Db, Session, BATCH};
use crate::lineage::Lineages;
use crate::sqlite::{fail, has_table, in_read, text_of};

/// The place of a 2.x message's one usage among the usages of its line
/// ([`UsageAt::seq`]). Its line is its `session_message` rowid, a number a
/// 1.x answer's `message` rowid can be too, whose calls are at places 0,
/// 1, ...: at this place, none of theirs (no answer makes 2^32 - 1 calls),
/// the two never name one row (a store's usage key, `<file>:<line>:<model>
/// #4294967295`; the rows a dropped copy takes out with it).
pub(super) const V2_SEQ: u32 = u32::MAX;

/// The table.
pub(super) const TABLE: &str = "session_message";

/// The prefix of a 2.x message's id in the cursor's pending set.
pub(super) const PENDING: &str = "v2:";

/// Whether the database has the table, and the id of its row at `mark`.
pub(super) fn probe(
    c: &Connection,
    mark: Option<i64>,
) -> rusqlite::Result<Option<(bool, Option<String>)>> {
    if !has_table(c, TABLE)? {
        return Ok(None);
    }
    let at = match mark {
        Some(m) => c
            .query_row(
                &format!("SELECT id FROM {TABLE} WHERE rowid = ?1"),
                [m],
                |r| r.get::<_, String>(0),
            )
            .optional()?,
        None => None,
    };
    Ok(Some((true, at)))
}

/// A `session_message` row.
struct Msg {
    rowid: i64,
    id: String,
    session: String,
    /// Its `type` (the role), or what the column holds instead of text.
    kind: Result<String, &'static str>,
    /// Its `data`, or what the column holds instead of text.
    data: Result<String, &'static str>,
}

/// A batch's rows, and the sessions they name not known before.
type Batch = (Vec<Msg>, Vec<(String, Session)>);

const COLS: &str = "SELECT rowid, id, session_id, type, data FROM session_message";

fn msg_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Msg> {
    Ok(Msg {
        rowid: r.get(0)?,
        id: r.get(1)?,
        session: r.get(2)?,
        kind: text_of(r, 3)?,
        data: text_of(r, 4)?,
    })
}

/// The rows of one batch (the pending ids, else after the mark) and the
/// sessions they name not known before, in one read transaction.
fn read(db: &Db, pending: Option<&[String]>, mark: i64) -> rusqlite::Result<Batch> {
    in_read(&db.conn, |c| {
        let mut msgs = Vec::new();
        match pending {
            Some(ids) => {
                let mut st = c.prepare_cached(&format!("{COLS} WHERE id = ?1"))?;
                for id in ids {
                    if let Some(m) = st.query_row([id], msg_of).optional()? {
                        msgs.push(m);
                    }
                }
            }
            None => {
                let mut st =
                    c.prepare_cached(&format!("{COLS} WHERE rowid > ?1 ORDER BY rowid LIMIT ?2"))?;
                for m in st.query_map(rusqlite::params![mark, BATCH], msg_of)? {
                    msgs.push(m?);
                }
            }
        }
        let mut sessions: Vec<(String, Session)> = Vec::new();
        let mut st = c.prepare_cached("SELECT directory FROM session WHERE id = ?1")?;
        for m in &msgs {
            if db.sessions.contains_key(&m.session) || sessions.iter().any(|(s, _)| *s == m.session)
            {
                continue;
            }
            let directory: Option<String> = st
                .query_row([&m.session], |r| r.get(0))
                .optional()
                .unwrap_or(None);
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

/// `v[k]` as text.
fn s<'v>(v: &'v Value, k: &str) -> Option<&'v str> {
    v.get(k).and_then(Value::as_str)
}

/// Whether a message of `kind` is final: an assistant once it has
/// `time.completed` or an `error`, and no tool `pending` or `running`;
/// every other kind when written.
fn is_final(kind: &str, data: &Value) -> bool {
    if kind != "assistant" {
        return true;
    }
    let done = data
        .pointer("/time/completed")
        .is_some_and(|t| !t.is_null())
        || data.get("error").is_some_and(|e| !e.is_null());
    let running = content(data).iter().any(|c| {
        s(c, "type") == Some("tool")
            && matches!(
                c.pointer("/state/status").and_then(Value::as_str),
                Some("pending" | "running")
            )
    });
    done && !running
}

fn content(data: &Value) -> &[Value] {
    data.get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `tokens` and `cost` as a call's usage (as the 1.x `step-finish`), and
/// its reasoning tokens.
fn usage_of(data: &Value) -> (Usage, u64) {
    let n = |p: &str| data.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let (input, output, reasoning) = (
        n("/tokens/input"),
        n("/tokens/output"),
        n("/tokens/reasoning"),
    );
    let (cache_read, cache_write) = (n("/tokens/cache/read"), n("/tokens/cache/write"));
    let sum = input
        .saturating_add(output)
        .saturating_add(reasoning)
        .saturating_add(cache_read)
        .saturating_add(cache_write);
    let u = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: sum.max(n("/tokens/total")),
        cost: data.get("cost").and_then(Value::as_f64).unwrap_or(0.0),
    };
    (u, reasoning)
}

/// An error's text: `<name>: <message>` (the message in `data.message`
/// or `message`), a string as it is.
fn error_text(e: &Value) -> Option<String> {
    if let Some(t) = e.as_str() {
        return Some(t.to_owned());
    }
    let name = s(e, "name");
    let msg = e
        .pointer("/data/message")
        .and_then(Value::as_str)
        .or_else(|| s(e, "message"));
    match (name, msg) {
        (Some(n), Some(m)) => Some(format!("{n}: {m}")),
        (Some(t), None) | (None, Some(t)) => Some(t.to_owned()),
        (None, None) => (!e.is_null()).then(|| e.to_string()),
    }
}

/// The text of a tool's result: its `content[]` texts, else `result`, else
/// `error`.
fn tool_output(state: &Value, is_error: bool) -> String {
    if is_error {
        return state.get("error").and_then(error_text).unwrap_or_default();
    }
    let texts: Vec<&str> = state
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|c| s(c, "text"))
        .collect();
    if !texts.is_empty() {
        return texts.join("\n");
    }
    match state.get("result") {
        Some(Value::String(t)) => t.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => String::new(),
    }
}

/// Reads the next batch of 2.x rows (see [`super::Db`]'s `next_batch`).
pub(super) fn next_batch<'a>(
    db: &mut Db,
    cursor: &mut Cursor,
    arena: &'a Bump,
    filter: RoleFilter,
    report: &mut Report,
    rows: &mut Rows<'a>,
) -> Result<bool, Error> {
    let pending: Option<Vec<String>> = (!db.v2_pending_read).then(|| {
        db.v2_pending_read = true;
        let ids = cursor
            .pending
            .iter()
            .filter_map(|p| p.strip_prefix(PENDING))
            .map(str::to_owned)
            .collect();
        cursor.pending.retain(|p| !p.starts_with(PENDING));
        ids
    });
    let mark = cursor.marks.get(TABLE).copied().unwrap_or(0);
    let (msgs, sessions) = match read(db, pending.as_deref(), mark) {
        Ok(r) => r,
        Err(e) => {
            if let Some(p) = pending {
                cursor
                    .pending
                    .extend(p.into_iter().map(|p| format!("{PENDING}{p}")));
            }
            return Err(fail(&db.path, "cannot read its session_message rows", &e));
        }
    };
    db.sessions.extend(sessions);
    let records = !filter.builds_none();
    let lineages = db.lineage.needed(records);
    let named = || msgs.iter().map(|m| m.session.as_str());
    if lineages && !db.lineage.knows(named()) {
        let found = in_read(&db.conn, Lineages::opencode)
            .map_err(|e| fail(&db.path, "cannot read its sessions", &e))?;
        db.lineage.learn(found, named());
    }
    let full = pending.is_none() && msgs.len() as i64 == BATCH;
    for m in &msgs {
        if pending.is_none() {
            cursor.marks.insert(TABLE.into(), m.rowid);
            cursor.guards.insert(TABLE.into(), guard_of(&m.id));
        }
        if cursor.was_emitted(&m.id) || (lineages && !db.lineage.in_shard(&m.session)) {
            // Emitted (from the 1.x tables, or before), or another
            // shard's lineage.
            continue;
        }
        let line = u64::try_from(m.rowid).unwrap_or(0);
        let parsed = match (&m.kind, &m.data) {
            (Err(why), _) => Err(format!("type is {why}")),
            (_, Err(why)) => Err(format!("data is {why}")),
            (Ok(k), Ok(d)) => match serde_json::from_str::<Value>(d) {
                Ok(v @ Value::Object(_)) => Ok((k.as_str(), v)),
                Ok(_) => Err("data is not a JSON object".to_owned()),
                Err(e) => Err(e.to_string()),
            },
        };
        let (kind, data) = match parsed {
            Ok(p) => p,
            Err(e) => {
                // A damaged row: counted and skipped once, by its rowid.
                report.skip(
                    line,
                    0,
                    SkipReason::Malformed(format!("{TABLE} row {}: {e}", m.id)),
                );
                rows.push(
                    report,
                    Row {
                        key: arena.alloc_str(&m.id),
                        fingerprint: fingerprint(&[b"opencode", m.id.as_bytes()]),
                        line,
                        byte: db.bytes,
                        record: None,
                    },
                );
                continue;
            }
        };
        if !is_final(kind, &data) {
            cursor.pending.insert(format!("{PENDING}{}", m.id));
            continue;
        }
        let parent = db
            .lineage
            .parent_session(&m.session)
            .filter(|_| records)
            .map(|p| &*arena.alloc_str(&p));
        rows.set_parent_session(parent);
        db.bytes += m.data.as_ref().map_or(0, String::len) as u64;
        emit(db, m, kind, &data, arena, filter, report, rows);
    }
    Ok(pending.is_some() || full)
}

/// Counts and pushes the rows of one final 2.x message.
#[allow(clippy::too_many_lines, clippy::too_many_arguments)]
fn emit<'a>(
    db: &Db,
    m: &Msg,
    kind: &str,
    data: &Value,
    arena: &'a Bump,
    filter: RoleFilter,
    report: &mut Report,
    rows: &mut Rows<'a>,
) {
    let line = u64::try_from(m.rowid).unwrap_or(0);
    let byte = db.bytes;
    let id: &'a str = arena.alloc_str(&m.id);
    let time = data.pointer("/time/created").and_then(Value::as_i64);
    let role = match kind {
        "user" | "synthetic" | "shell" | "compaction" => Role::User,
        "assistant" => Role::Assistant,
        "system" | "agent-switched" | "model-switched" | "location-switched" => Role::System,
        other => {
            report.add_unknown_role(other);
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
    let provider = data
        .pointer("/model/providerID")
        .and_then(Value::as_str)
        .filter(|_| assistant);
    let model = data
        .pointer("/model/id")
        .and_then(Value::as_str)
        .filter(|_| assistant);
    // Usage: the message's tokens, its one count in 2.x (as a 1.x message
    // without step-finish parts), identified as the 1.x call is.
    let mut total = None;
    if assistant {
        let (u, reasoning) = usage_of(data);
        if !is_zero(&u) {
            let at = UsageAt {
                line,
                time,
                reasoning,
                seq: V2_SEQ,
            };
            report.add_usage_at(provider, model, &u, true, at);
            total = Some(u);
            rows.push(
                report,
                Row {
                    key: arena.alloc_str(&format!("{}/tokens", m.id)),
                    fingerprint: call_fingerprint(time, u64::MAX, &u, reasoning, provider, model),
                    line,
                    byte,
                    record: None,
                },
            );
        }
    }
    let session: &'a str = arena.alloc_str(&m.session);
    let source: &'a str = arena.alloc_str(&format!("opencode:{}", m.session));
    let project: &'a str = arena.alloc_str(
        db.sessions
            .get(&m.session)
            .map(|s| s.directory.as_str())
            .unwrap_or(""),
    );
    let rec = report.count_record(role, filter).then(|| {
        let mut body = crate::Body::default();
        let mut first_call: Option<(&str, &str)> = None;
        let mut command = None;
        match kind {
            "assistant" => {
                for c in content(data) {
                    match s(c, "type").unwrap_or("") {
                        "text" => {
                            if let Some(t) = s(c, "text").filter(|t| !t.is_empty()) {
                                body.kind("text");
                                body.piece(t);
                            }
                        }
                        "reasoning" => {
                            if let Some(t) = s(c, "text").filter(|t| !t.is_empty()) {
                                body.kind("thinking");
                                body.piece(t);
                            }
                        }
                        "tool" => {
                            let name = s(c, "name").unwrap_or("");
                            body.kind("toolCall");
                            let input = c
                                .pointer("/state/input")
                                .map(Value::to_string)
                                .unwrap_or_default();
                            body.piece(&format!("{name} {input}"));
                            if first_call.is_none() {
                                first_call = Some((name, s(c, "id").unwrap_or("")));
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(e) = data.get("error").and_then(error_text) {
                    body.kind("error");
                    body.piece(&e);
                }
            }
            "user" | "synthetic" | "system" => {
                if kind != "user" {
                    body.kind(if kind == "system" {
                        "system"
                    } else {
                        "synthetic"
                    });
                }
                if let Some(t) = s(data, "text").filter(|t| !t.is_empty()) {
                    body.kind("text");
                    body.piece(t);
                }
                for f in data
                    .get("files")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
                {
                    body.kind("file");
                    let name = s(f, "filename")
                        .or_else(|| s(f, "name"))
                        .or_else(|| s(f, "path"))
                        .or_else(|| s(f, "url"))
                        .or_else(|| f.as_str());
                    if let Some(n) = name {
                        body.piece(&format!("[file {n}]"));
                    }
                }
            }
            "shell" => {
                body.kind("shell");
                let cmd = s(data, "command").unwrap_or("");
                command = Some(cmd);
                body.piece(&format!("$ {cmd}"));
                if let Some(o) = s(data, "output").filter(|o| !o.is_empty()) {
                    body.piece(o);
                }
            }
            "compaction" => {
                body.kind("compaction");
                if let Some(t) = s(data, "summary").filter(|t| !t.is_empty()) {
                    body.kind("summary");
                    body.piece(t);
                }
            }
            switched => {
                // `agent-switched`, `model-switched`, `location-switched`:
                // what it switched to.
                body.kind("switch");
                let to = data
                    .as_object()
                    .into_iter()
                    .flatten()
                    .find(|(k, _)| *k != "time")
                    .map(|(_, v)| match v {
                        Value::String(t) => t.clone(),
                        Value::Object(o) => o
                            .get("id")
                            .or_else(|| o.get("name"))
                            .and_then(Value::as_str)
                            .map_or_else(|| v.to_string(), str::to_owned),
                        v => v.to_string(),
                    })
                    .unwrap_or_default();
                body.piece(&format!("{switched} {to}"));
            }
        }
        let key: &'a str = arena.alloc_str(&format!("{}:{}", m.session, m.id));
        let kinds: &'a [&'a str] = arena.alloc_slice_copy(&body.kinds);
        let mut r = record(
            role,
            arena.alloc_str(&body.text),
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
        r.stop_reason = s(data, "finish")
            .or_else(|| data.pointer("/error/name").and_then(Value::as_str))
            .map(|s| &*arena.alloc_str(s));
        r.command = command.map(|c| &*arena.alloc_str(c));
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
    if !assistant {
        return;
    }
    // Each finished tool: a tool_result record of its own.
    for c in content(data) {
        if s(c, "type") != Some("tool") {
            continue;
        }
        let state = c.get("state").unwrap_or(&Value::Null);
        let is_error = match s(state, "status") {
            Some("completed") => false,
            Some("error") => true,
            _ => continue,
        };
        let call = s(c, "id").unwrap_or("");
        let row_key: &'a str = arena.alloc_str(&format!("{}/{call}", m.id));
        let rec = report.count_record(Role::ToolResult, filter).then(|| {
            let name = s(c, "name").unwrap_or("");
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&["toolResult"]);
            let key = arena.alloc_str(&format!("{}:{}:{call}", m.session, m.id));
            let mut r = record(
                Role::ToolResult,
                arena.alloc_str(&tool_output(state, is_error)),
                kinds,
                project,
                session,
                source,
                key,
                arena.alloc_str(call),
                line,
                c.pointer("/time/completed")
                    .and_then(Value::as_i64)
                    .or(time),
            );
            r.entry = "tool";
            r.parent_id = Some(id);
            r.tool_name = Some(arena.alloc_str(name));
            r.tool_call_id = Some(&*arena.alloc_str(call)).filter(|c| !c.is_empty());
            r.is_error = Some(is_error);
            if matches!(name, "bash" | "shell") {
                r.command = state
                    .pointer("/input/command")
                    .and_then(Value::as_str)
                    .map(|c| &*arena.alloc_str(c));
            }
            r
        });
        rows.push(
            report,
            Row {
                key: row_key,
                fingerprint: fingerprint(&[b"opencode", id.as_bytes(), call.as_bytes()]),
                line,
                byte,
                record: rec,
            },
        );
    }
}
