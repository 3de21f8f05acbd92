//! One Goose message as records, the same for both of its stores: a
//! `messages` row of `sessions.db` (its `content_json`, `metadata_json`)
//! and a line of a legacy `<id>.jsonl` file (its `content`, `metadata`),
//! which Goose's import copies into such a row.
//!
//! The mapping (`docs/goose.md`, "Records"): `text` parts, `thinking`
//! (and the older `reasoning`), `redactedThinking` (its kind alone),
//! each `toolRequest` as `<name> <arguments JSON>`, `image` (its kind),
//! `systemNotification`; a `user` message Goose injected for the model
//! (`userVisible` false, `agentVisible` true) is a `system` record; a
//! `user` message of `toolResponse` parts alone is one `tool_result`
//! record per part; another role is no record (`unknown_roles`).

use bumpalo::Bump;
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::{Record, Report, Role, RoleFilter};
use serde_json::Value;

use crate::opencode::record;

/// A session's columns (of `sessions`, or a legacy file's first line).
#[derive(Debug, Clone, Default)]
pub(crate) struct Session {
    pub(crate) working_dir: String,
    pub(crate) provider: Option<String>,
    pub(crate) model: Option<String>,
}

/// What a message is told apart by across files: the key the engine
/// deduplicates it by is a fingerprint of it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Identity<'m> {
    /// Its `message_id` (a session of the database that no legacy file
    /// has, or had).
    Id(&'m str),
    /// A session Goose imported from a legacy file (or one such a file
    /// holds): the import gives a message without an `id` a `message_id`
    /// of its own (`msg_<session>_<uuid v4>`, or `msg_<session>_<row id>`
    /// where migration 7 filled it), which the file cannot know; it keeps
    /// the role and `created`. The message is its role, its `created` and
    /// how many messages of that role and time come before it in the
    /// session (`ordinal`): the same in the file and in the database.
    Legacy {
        /// Messages of the same role and `created` before it.
        ordinal: u64,
    },
}

/// One message, as either store gives it.
pub(crate) struct Message<'m> {
    /// Its session's id.
    pub(crate) session: &'m str,
    /// The id its records say (`<session>:<id>` is their key).
    pub(crate) id: &'m str,
    /// Its `role`.
    pub(crate) role: &'m str,
    /// Its `created` (seconds, or milliseconds above 10^10).
    pub(crate) created: i64,
    /// The line its records say: the row id, or the file's line.
    pub(crate) line: u64,
    /// Its metadata (`userVisible`, `agentVisible`).
    pub(crate) metadata: Option<&'m Value>,
    /// Its content parts.
    pub(crate) content: &'m [Value],
    /// Its session's columns.
    pub(crate) cols: &'m Session,
    /// What tells it apart across files.
    pub(crate) identity: Identity<'m>,
}

/// One piece of a message given to the caller: `part` is the tool call id
/// of a `tool_result` (`None` for the message's own record, or for a
/// message of no record), `fingerprint` its identity across files.
pub(crate) struct Piece<'a, 'p> {
    pub(crate) part: Option<&'p str>,
    pub(crate) fingerprint: u64,
    pub(crate) record: Option<Record<'a>>,
}

/// Seconds or milliseconds (above 10^10) as milliseconds.
pub(crate) fn millis(t: i64) -> i64 {
    if t > 10_000_000_000 {
        t
    } else {
        t.saturating_mul(1000)
    }
}

impl Message<'_> {
    /// The fingerprint of the message (`part` `None`) or of one of its
    /// tool results.
    fn fingerprint(&self, part: Option<&str>) -> u64 {
        let s = self.session.as_bytes();
        match (self.identity, part) {
            (Identity::Id(id), None) => fingerprint(&[b"goose", s, id.as_bytes()]),
            (Identity::Id(id), Some(p)) => fingerprint(&[b"goose", s, id.as_bytes(), p.as_bytes()]),
            (Identity::Legacy { ordinal }, p) => fingerprint(&[
                b"goose-legacy",
                s,
                self.role.as_bytes(),
                &self.created.to_le_bytes(),
                &ordinal.to_le_bytes(),
                p.unwrap_or("").as_bytes(),
                &[u8::from(p.is_some())],
            ]),
        }
    }
}

/// Counts the records of `m` in `report` and gives each piece to `emit`
/// right after it is counted (so that the caller's tracker sees each
/// piece's counts alone).
#[allow(clippy::too_many_lines)]
pub(crate) fn map<'a>(
    m: &Message<'_>,
    arena: &'a Bump,
    filter: RoleFilter,
    report: &mut Report,
    emit: &mut dyn FnMut(&mut Report, Piece<'a, '_>),
) {
    let flag = |k: &str| m.metadata.and_then(|v| v.get(k)?.as_bool()).unwrap_or(true);
    let role = match m.role {
        "user" if !flag("userVisible") && flag("agentVisible") => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        other => {
            report.add_unknown_role(other);
            report.no_record += 1;
            let fp = m.fingerprint(None);
            emit(
                report,
                Piece {
                    part: None,
                    fingerprint: fp,
                    record: None,
                },
            );
            return;
        }
    };
    let session: &'a str = arena.alloc_str(m.session);
    let source: &'a str = arena.alloc_str(&format!("goose:{}", m.session));
    let project: &'a str = arena.alloc_str(&m.cols.working_dir);
    let id: &'a str = arena.alloc_str(m.id);
    let time = Some(millis(m.created));
    let mut body = crate::Body::default();
    let mut first_call: Option<(String, String)> = None;
    let mut results: Vec<&Value> = Vec::new();
    for c in m.content {
        match c.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => {
                if let Some(t) = c.get("text").and_then(Value::as_str) {
                    body.kind("text");
                    body.piece(t);
                }
            }
            "thinking" | "reasoning" => {
                let t = c.get("thinking").or_else(|| c.get("text"));
                if let Some(t) = t.and_then(Value::as_str) {
                    body.kind("thinking");
                    body.piece(t);
                }
            }
            "redactedThinking" => body.kind("redactedThinking"),
            "toolRequest" | "frontendToolRequest" => {
                body.kind("toolCall");
                let call = c.pointer("/toolCall/value");
                let name = call
                    .and_then(|v| v.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let args = call
                    .and_then(|v| v.get("arguments"))
                    .map(Value::to_string)
                    .unwrap_or_default();
                match c.pointer("/toolCall/error").and_then(Value::as_str) {
                    Some(e) => body.piece(e),
                    None => body.piece(&format!("{name} {args}")),
                }
                if first_call.is_none() {
                    let cid = c.get("id").and_then(Value::as_str).unwrap_or("");
                    first_call = Some((name.to_owned(), cid.to_owned()));
                }
            }
            "toolResponse" => results.push(c),
            "image" => body.kind("image"),
            "systemNotification" => {
                body.kind("notification");
                if let Some(t) = c.get("msg").and_then(Value::as_str) {
                    body.piece(t);
                }
            }
            _ => {}
        }
    }
    // A user message of tool results alone is no human turn: its results
    // are its records.
    if !(role == Role::User && body.kinds.is_empty() && !results.is_empty()) {
        let rec = report.count_record(role, filter).then(|| {
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&body.kinds);
            let key = arena.alloc_str(&format!("{}:{}", m.session, m.id));
            let mut r = record(
                role,
                arena.alloc_str(&body.text),
                kinds,
                project,
                session,
                source,
                key,
                id,
                m.line,
                time,
            );
            if role == Role::Assistant {
                r.provider = m.cols.provider.as_deref().map(|p| &*arena.alloc_str(p));
                r.model = m.cols.model.as_deref().map(|p| &*arena.alloc_str(p));
            }
            if let Some((name, call)) = &first_call {
                r.tool_name = Some(arena.alloc_str(name));
                r.tool_call_id = Some(&*arena.alloc_str(call)).filter(|c| !c.is_empty());
            }
            r
        });
        let fp = m.fingerprint(None);
        emit(
            report,
            Piece {
                part: None,
                fingerprint: fp,
                record: rec,
            },
        );
    }
    for c in results {
        let cid = c.get("id").and_then(Value::as_str).unwrap_or("");
        let res = c.get("toolResult");
        let failed = res.and_then(|r| r.get("status")).and_then(Value::as_str) == Some("error");
        let value = res.and_then(|r| r.get("value"));
        let items = value
            .and_then(|v| v.get("content").or(Some(v)))
            .and_then(Value::as_array);
        let mut out = crate::Body::default();
        for it in items.into_iter().flatten() {
            if let Some(t) = it.get("text").and_then(Value::as_str) {
                out.piece(t);
            }
        }
        if failed {
            if let Some(e) = res.and_then(|r| r.get("error")).and_then(Value::as_str) {
                out.piece(e);
            }
        }
        let is_error = failed
            || value
                .and_then(|v| v.get("isError"))
                .and_then(Value::as_bool)
                == Some(true);
        let rec = report.count_record(Role::ToolResult, filter).then(|| {
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&["toolResult"]);
            let key = arena.alloc_str(&format!("{}:{}:{cid}", m.session, m.id));
            let mut r = record(
                Role::ToolResult,
                arena.alloc_str(&out.text),
                kinds,
                project,
                session,
                source,
                key,
                id,
                m.line,
                time,
            );
            r.entry = "tool";
            r.tool_call_id = Some(&*arena.alloc_str(cid)).filter(|c| !c.is_empty());
            r.is_error = Some(is_error);
            r
        });
        let fp = m.fingerprint(Some(cid));
        emit(
            report,
            Piece {
                part: Some(cid),
                fingerprint: fp,
                record: rec,
            },
        );
    }
}
