//! pi's line mapping: the only module that knows pi's key names.
//!
//! One line is copied into the arena, parsed in place with simd-json onto a
//! reused tape, and mapped to a [`Record`] whose strings borrow the arena
//! copy. Lines that simd-json rejects for invalid UTF-8 or lone surrogate
//! escapes (both kept by pi) are repaired from the untouched original and
//! parsed again.

use bumpalo::Bump;
use simd_json::Node;

use crate::json::{as_bool, as_f64, as_i64, as_str, as_text, as_u64, fingerprint, Fields};
use crate::line::{Entry, Header, LineParser, LinePos, MapLine, NotAHeader, Parent, Text};
use crate::record::{Record, Role, RoleFilter, Usage};
use crate::report::{Report, SkipReason};
use crate::time::parse_iso_millis;

/// The fingerprint of an entry with an id: its type, id and timestamp as
/// written. The header and a repeated copy of it (read as an entry) must
/// agree, so both come here.
fn entry_fingerprint(ty: &str, id: &str, timestamp: Option<&str>) -> u64 {
    fingerprint(&[
        ty.as_bytes(),
        id.as_bytes(),
        timestamp.unwrap_or("").as_bytes(),
    ])
}

/// What the records of one session share: header and provenance.
#[derive(Debug, Clone)]
pub struct Context {
    /// The session's header line.
    pub header: Header,
    /// `pi:<file stem>`.
    pub source: String,
}

impl MapLine for Context {
    const RAW_TEXT: bool = true;

    fn header(&self) -> &Header {
        &self.header
    }

    fn map<'a>(
        &'a self,
        nodes: &[Node<'a>],
        raw: &[u8],
        pos: LinePos,
        repaired: bool,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Option<Entry<'a>> {
        map_entry(nodes, raw, pos, repaired, arena, self, filter, report)
    }
}

/// Parses pi's session header from the first non-blank line.
pub fn parse_header(
    parser: &mut LineParser,
    line: &[u8],
    report: &mut Report,
) -> Result<Header, NotAHeader> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let arena = Bump::new();
    parser
        .json_mut()
        .parse(line, &arena, |parsed| match parsed {
            Err(reason) => Err(NotAHeader(format!("not a session header: {reason}"))),
            Ok((nodes, repaired)) => {
                let f = Fields::of(nodes);
                match (f.str("type"), f.str("id")) {
                    (Some("session"), Some(id)) => {
                        report.lines += 1;
                        report.entries.add("session", 1);
                        report.no_record += 1;
                        report.repaired += u64::from(repaired);
                        Ok(Header {
                            fingerprint: entry_fingerprint("session", id, f.str("timestamp")),
                            id: id.to_owned(),
                            cwd: f.str("cwd").unwrap_or("").to_owned(),
                            version: f.get("version").and_then(as_u64).unwrap_or(1),
                            timestamp: f.str("timestamp").and_then(parse_iso_millis),
                            parent: f
                                .str("parentSession")
                                .or_else(|| f.str("branchedFrom"))
                                .map(|p| Parent::Path(p.to_owned())),
                        })
                    }
                    (Some("session"), None) => Err(NotAHeader(
                        "session header without a string \"id\"".to_owned(),
                    )),
                    (Some(ty), _) => Err(NotAHeader(format!(
                        "not a session header: first entry has type {ty:?}"
                    ))),
                    (None, _) => Err(NotAHeader(
                        "not a session header: not an object with a string \"type\"".to_owned(),
                    )),
                }
            }
        })
}

// ---------------------------------------------------------------------------
// Mapping

/// The fields of an entry and of its message that the mapping reads, found
/// in one pass over each object.
#[derive(Default)]
struct EntryFields<'t, 'a> {
    ty: Option<&'a str>,
    id: Option<&'a str>,
    parent_id: Option<&'a str>,
    timestamp: Option<&'a str>,
    message: Option<&'t [Node<'a>]>,
    summary: Option<&'a str>,
    custom_type: Option<&'a str>,
    content: Option<&'t [Node<'a>]>,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    usage: Option<&'t [Node<'a>]>,
}

#[derive(Default)]
struct MessageFields<'t, 'a> {
    role: Option<&'a str>,
    content: Option<&'t [Node<'a>]>,
    timestamp: Option<&'t [Node<'a>]>,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    usage: Option<&'t [Node<'a>]>,
    stop_reason: Option<&'a str>,
    tool_name: Option<&'a str>,
    tool_call_id: Option<&'a str>,
    is_error: Option<bool>,
    custom_type: Option<&'a str>,
    command: Option<&'a str>,
    output: Option<&'a str>,
    exit_code: Option<i64>,
    summary: Option<&'a str>,
}

fn entry_fields<'t, 'a>(nodes: &'t [Node<'a>]) -> EntryFields<'t, 'a> {
    let mut e = EntryFields::default();
    for (k, v) in Fields::of(nodes).iter() {
        match k {
            "type" => e.ty = as_str(v),
            "id" => e.id = as_str(v),
            "parentId" => e.parent_id = as_str(v),
            "timestamp" => e.timestamp = as_str(v),
            "message" => e.message = Some(v),
            "summary" => e.summary = as_text(v),
            "customType" => e.custom_type = as_str(v),
            "content" => e.content = Some(v),
            "provider" => e.provider = as_str(v),
            "model" => e.model = as_str(v),
            "usage" => e.usage = Some(v),
            _ => {}
        }
    }
    e
}

fn message_fields<'t, 'a>(nodes: &'t [Node<'a>]) -> MessageFields<'t, 'a> {
    let mut m = MessageFields::default();
    for (k, v) in Fields::of(nodes).iter() {
        match k {
            "role" => m.role = as_str(v),
            "content" => m.content = Some(v),
            "timestamp" => m.timestamp = Some(v),
            "provider" => m.provider = as_str(v),
            "model" => m.model = as_str(v),
            "usage" => m.usage = Some(v),
            "stopReason" => m.stop_reason = as_str(v),
            "toolName" => m.tool_name = as_str(v),
            "toolCallId" => m.tool_call_id = as_str(v),
            "isError" => m.is_error = as_bool(v),
            "customType" => m.custom_type = as_str(v),
            "command" => m.command = as_str(v),
            "output" => m.output = as_text(v),
            "exitCode" => m.exit_code = as_i64(v),
            "summary" => m.summary = as_text(v),
            _ => {}
        }
    }
    m
}

fn message_role(role: &str) -> Option<Role> {
    Some(match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "toolResult" => Role::ToolResult,
        "bashExecution" => Role::BashExecution,
        "custom" | "hookMessage" => Role::Custom,
        "system" | "branchSummary" | "compactionSummary" => Role::System,
        _ => return None,
    })
}

fn entry_role(ty: &str) -> Option<Role> {
    match ty {
        "compaction" | "branch_summary" => Some(Role::System),
        "custom_message" => Some(Role::Custom),
        _ => None,
    }
}

fn usage_of(v: &[Node<'_>]) -> Option<Usage> {
    if !matches!(v.first(), Some(Node::Object { .. })) {
        return None;
    }
    let mut u = Usage::default();
    let mut total = None;
    for (k, v) in Fields::of(v).iter() {
        match k {
            "input" => u.input = as_u64(v).unwrap_or(0),
            "output" => u.output = as_u64(v).unwrap_or(0),
            "cacheRead" => u.cache_read = as_u64(v).unwrap_or(0),
            "cacheWrite" => u.cache_write = as_u64(v).unwrap_or(0),
            "totalTokens" => total = as_u64(v),
            "cost" => u.cost = Fields::of(v).get("total").and_then(as_f64).unwrap_or(0.0),
            _ => {}
        }
    }
    // The parts are any u64 a line holds: their sum stops at u64::MAX.
    u.total_tokens = total.unwrap_or_else(|| {
        [u.output, u.cache_read, u.cache_write]
            .into_iter()
            .fold(u.input, u64::saturating_add)
    });
    Some(u)
}

#[allow(clippy::too_many_arguments)]
fn map_entry<'a>(
    nodes: &[Node<'a>],
    raw: &[u8],
    pos: LinePos,
    repaired: bool,
    arena: &'a Bump,
    ctx: &'a Context,
    filter: RoleFilter,
    report: &mut Report,
) -> Option<Entry<'a>> {
    let e = entry_fields(nodes);
    let Some(ty) = e.ty else {
        report.repaired -= u64::from(repaired);
        report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
        return None;
    };
    report.entries.add(ty, 1);
    let entry = |record| {
        let fingerprint = match e.id {
            Some(id) => entry_fingerprint(ty, id, e.timestamp),
            None => fingerprint(&[raw]),
        };
        Some(Entry {
            fingerprint,
            line: pos.line,
            byte: pos.byte,
            record,
            revision: false,
            parent_session: None,
        })
    };
    let m = match (ty, e.message) {
        ("message", Some(msg)) => message_fields(msg),
        _ => MessageFields::default(),
    };
    let role = match ty {
        "message" => m.role.and_then(message_role),
        other => entry_role(other),
    };
    let usage = match ty {
        "message" => m.usage.and_then(usage_of),
        _ => e.usage.and_then(usage_of),
    };
    let at = crate::report::UsageAt {
        seq: 0,
        line: pos.line,
        // Parsed for a usage row alone (most lines carry no usage, and
        // most runs keep no row).
        time: if usage.is_some() && report.keep_usage_rows {
            e.timestamp.and_then(parse_iso_millis)
        } else {
            None
        },
        reasoning: 0,
    };
    let Some(role) = role else {
        report.no_record += 1;
        if ty == "message" {
            report.add_unknown_role(m.role.unwrap_or("(none)"));
        }
        if let Some(u) = &usage {
            report.add_usage_at(e.provider, e.model, u, false, at);
        }
        return entry(None);
    };
    let kept = report.count_record(role, filter);
    let (provider, model) = if ty == "message" {
        (m.provider, m.model)
    } else {
        (e.provider, e.model)
    };
    if let Some(u) = &usage {
        report.add_usage_at(
            provider,
            model,
            u,
            role == Role::Assistant && ty == "message",
            at,
        );
    }
    if !kept {
        return entry(None);
    }

    let (text, kinds) = record_text(ty, &e, &m, arena);

    let key = match e.id {
        Some(id) => bumpalo::format!(in arena, "{}:{}", ctx.header.id, id),
        None => bumpalo::format!(in arena, "{}:L{}", ctx.header.id, pos.line),
    };
    let timestamp = match m.timestamp {
        Some(v) => as_i64(v).or_else(|| as_str(v).and_then(parse_iso_millis)),
        None => None,
    }
    .or_else(|| e.timestamp.and_then(parse_iso_millis));
    entry(Some(Record {
        role,
        text,
        project: &ctx.header.cwd,
        session: &ctx.header.id,
        key: key.into_bump_str(),
        source: &ctx.source,
        id: e.id,
        parent_id: e.parent_id,
        line: pos.line,
        byte: pos.byte,
        entry: ty,
        message_role: if ty == "message" { m.role } else { None },
        kinds,
        timestamp,
        provider,
        model,
        usage,
        stop_reason: m.stop_reason,
        tool_name: m.tool_name,
        tool_call_id: m.tool_call_id,
        is_error: m.is_error,
        custom_type: if ty == "message" {
            m.custom_type
        } else {
            e.custom_type
        },
        command: m.command,
        exit_code: m.exit_code,
        repaired,
        agent_id: None,
        message_id: None,
        request_id: None,
        provisional: false,
    }))
}

/// The text of an entry's record, and its content block kinds (see the
/// crate docs for the rules). A message that ended in an error
/// (`stopReason: "error"`) adds its `errorMessage` after the content's
/// text, and the kind `error`.
fn record_text<'a>(
    ty: &str,
    e: &EntryFields<'_, 'a>,
    m: &MessageFields<'_, 'a>,
    arena: &'a Bump,
) -> (&'a str, &'a [&'a str]) {
    let mut text = Text::new(arena);
    match ty {
        "message" => match m.role {
            Some("bashExecution") => {
                text.bash(m.command.unwrap_or(""), m.output.unwrap_or(""));
            }
            Some("branchSummary" | "compactionSummary") => text.push(m.summary.unwrap_or("")),
            _ => text.content(m.content),
        },
        "compaction" | "branch_summary" => text.push(e.summary.unwrap_or("")),
        _ => text.content(e.content),
    }
    if m.stop_reason == Some("error") {
        // Looked up only here: no other turn pays for the key.
        let message = e.message.and_then(|v| Fields::of(v).text("errorMessage"));
        text.error(message);
    }
    text.finish()
}
