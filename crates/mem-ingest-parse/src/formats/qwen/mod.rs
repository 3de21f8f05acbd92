//! The Qwen Code adapter: the only module that knows Qwen Code's key names
//! (see `docs/qwen-code.md` for the mapping, and
//! `shared/spec/qwen-code-format.md` for the format).
//!
//! A chat file (`projects/<sanitised cwd>/chats/<sessionId>.jsonl` under
//! Qwen's runtime folder) is an append-only tree of records linked by
//! `uuid`/`parentUuid`, each carrying its `sessionId` and `cwd`, the
//! message in the Gemini API's shape (`message: {role, parts}`), usage as
//! Gemini's `usageMetadata`. It has no header line: the file's [`Header`]
//! is built from its first lines, as Claude Code's is, and lines are read,
//! parsed and accounted for by the shared line machinery; only the mapping
//! of a parsed line is this module's.

use std::path::{Path, PathBuf};

use bumpalo::Bump;
use simd_json::Node;

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{
    as_bool, as_str, as_u64, elements, fingerprint, is_blank, write_json, Fields, JsonParser,
    PrefixLines,
};
use crate::line::{Entry, Header, LinePos, MapLine, Text};
use crate::line_reader::bom_len;
use crate::record::{Record, Role, RoleFilter, Usage};
use crate::report::{Report, SkipReason};
use crate::source::{
    headerless_body, headerless_fingerprint, open_headerless, record_source, resume_headerless,
    FileLines, LineDriver, Position, RecordSource, SourceOptions,
};
use crate::time::parse_iso_millis;

/// How much of a file's start its [`Header`] is looked for in (bytes).
pub const PREFIX: usize = 64 << 10;

/// The provider usage is counted under: Qwen Code's records name none (its
/// default endpoint is DashScope, but any OpenAI-compatible one may be
/// configured), so the agent's name stands for it.
pub const PROVIDER: &str = "qwen";

/// The lineage every Qwen Code session joins: a `/branch` fork copies its
/// parent's records with their `uuid`s under its own `sessionId`, and the
/// parent is named only by a record somewhere in the fork's file.
const LINEAGE_ROOT: &str = "qwen:*";

/// Record types Qwen Code writes.
const TYPES: [&str; 4] = ["user", "assistant", "tool_result", "system"];

/// Qwen Code's chat files: `<sessionId>.jsonl` in a `chats/` folder, under
/// `projects/` of Qwen's runtime folder.
///
/// - The file's [`Header`]: `id` is the `sessionId` of the first line
///   within the first 64 KiB that has one (the file stem when none does),
///   `timestamp` that line's, `cwd` the first `cwd` a line of those 64 KiB
///   has (`""` when none: the project is then unknown).
/// - Records carry their own line's `sessionId` and `cwd` (the header's
///   when the line has none); keys are `<sessionId>:<uuid>`.
/// - Every Qwen Code session is of one lineage: a record is emitted once
///   by its `uuid` across the archive (a fork's copies of its parent's
///   records are one record), the first copy in path order kept.
#[derive(Debug, Clone, Copy, Default)]
pub struct Qwen;

impl Format for Qwen {
    fn name(&self) -> &'static str {
        "qwen"
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        // Its sources never read raw text.
        true
    }

    /// `*.jsonl` directly in a `chats/` folder (ccusage reads
    /// `projects/<dir>/chats/<file>.jsonl` exactly; Qwen writes nothing
    /// else there).
    fn is_session_file(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "jsonl")
            && path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "chats")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = default_archives();
        if found.is_empty() {
            return Err(format!(
                "no Qwen Code archive: no projects/ folder in {}",
                tried.join(", ")
            ));
        }
        Ok(found)
    }

    /// One of the first lines (up to five) is Qwen Code's: an object with
    /// a string `sessionId`, a `type` Qwen writes, and one of the keys
    /// only its records have (`message.parts`, `usageMetadata`,
    /// `systemPayload`, `toolCallResult`). A first line longer than the
    /// prefix is Qwen Code's when the prefix names `"sessionId"` and one of
    /// those keys. Claude Code's lines share the envelope but never those
    /// keys, so this format is asked before Claude Code's.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        crate::json::with_scratch(|json, arena| detect_qwen(json, arena, prefix, whole))
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        let session = open_headerless(input, path, opts, PREFIX, |prefix, whole| {
            let body = headerless_body(prefix, whole)?;
            Some(QwenContext::new(header_of(body, whole, path), path))
        })?;
        Ok(Box::new(QwenSource(session.counting(opts))))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        _context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        let ctx = QwenContext::new(header.clone(), path);
        let session = resume_headerless(input, path, ctx, byte, lines_before, opts);
        Box::new(QwenSource(session.counting(opts)))
    }

    /// Every session joins one lineage (see [`LINEAGE_ROOT`]).
    fn parent(&self, _header: &Header) -> Option<String> {
        Some(LINEAGE_ROOT.to_owned())
    }
}

/// Qwen's runtime folders that hold a `projects/` folder, each as its
/// `projects/` folder, and every place tried: `$QWEN_RUNTIME_DIR` (Qwen
/// Code's own; `~` expanded) and each entry of `$QWEN_DATA_DIR` (a comma
/// list, ccusage's), else `~/.qwen`. An entry may name `projects/` itself.
pub fn default_archives() -> (Vec<PathBuf>, Vec<String>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expand = |s: &str| -> PathBuf {
        match (s.strip_prefix('~'), &home) {
            (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => {
                h.join(rest.trim_start_matches('/'))
            }
            _ => PathBuf::from(s),
        }
    };
    let mut candidates = Vec::new();
    if let Ok(dir) = std::env::var("QWEN_RUNTIME_DIR") {
        if !dir.trim().is_empty() {
            candidates.push(expand(dir.trim()));
        }
    }
    if let Ok(list) = std::env::var("QWEN_DATA_DIR") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            candidates.push(expand(entry));
        }
    }
    if candidates.is_empty() {
        candidates.extend(home.as_ref().map(|h| h.join(".qwen")));
    }
    let mut found = Vec::new();
    let mut tried = Vec::new();
    for c in candidates {
        let projects = if c.file_name().is_some_and(|n| n == "projects") {
            c
        } else {
            c.join("projects")
        };
        if projects.is_dir() {
            if !found.contains(&projects) {
                found.push(projects);
            }
        } else {
            tried.push(projects.display().to_string());
        }
    }
    if found.is_empty() && tried.is_empty() {
        tried.push("~/.qwen/projects (HOME is not set)".to_owned());
    }
    (found, tried)
}

/// A Qwen Code source.
struct QwenSource<'d>(LineDriver<FileLines<'d>, QwenContext>);

record_source!(trait impl['d] QwenSource<'d>);

/// Keys only Qwen Code's records have (Claude Code's share the rest of the
/// envelope).
const MARKS: [&str; 3] = ["usageMetadata", "systemPayload", "toolCallResult"];

/// [`Format::detect`] for Qwen Code (see there), with a kept parser.
fn detect_qwen(json: &mut JsonParser, arena: &mut Bump, prefix: &[u8], whole: bool) -> bool {
    let mut lines = PrefixLines::new(&prefix[bom_len(prefix)..], whole);
    let mut seen = 0;
    while seen < 5 {
        let Some((_, line)) = lines.next() else {
            // A first line longer than the prefix.
            let rest = lines.rest();
            let has = |n: &[u8]| memchr::memmem::find(rest, n).is_some();
            return seen == 0
                && has(b"\"sessionId\"")
                && (has(b"\"parts\":[")
                    || MARKS.iter().any(|m| has(format!("\"{m}\"").as_bytes())));
        };
        if is_blank(line) {
            continue;
        }
        seen += 1;
        arena.reset();
        let qwen = json.parse(line, arena, |parsed| {
            let Ok((nodes, _)) = parsed else { return false };
            let f = Fields::of(nodes);
            let parts = || {
                f.get("message")
                    .and_then(|m| Fields::of(m).get("parts"))
                    .is_some_and(|p| matches!(p.first(), Some(Node::Array { .. })))
            };
            f.str("sessionId").is_some()
                && f.str("type").is_some_and(|t| TYPES.contains(&t))
                && (parts() || MARKS.iter().any(|m| f.get(m).is_some()))
        });
        if qwen {
            return true;
        }
    }
    false
}

/// The header from the first lines of `prefix` (only complete lines, and
/// the last one when `whole`).
fn header_of(prefix: &[u8], whole: bool, path: &Path) -> Header {
    crate::json::with_scratch(|json, arena| {
        let mut id: Option<(String, Option<i64>)> = None;
        let mut cwd: Option<String> = None;
        for (_, line) in PrefixLines::new(prefix, whole) {
            if is_blank(line) {
                continue;
            }
            arena.reset();
            json.parse(line, arena, |parsed| {
                let Ok((nodes, _)) = parsed else { return };
                let f = Fields::of(nodes);
                if id.is_none() {
                    if let Some(s) = f.str("sessionId").filter(|s| !s.is_empty()) {
                        let ts = f.str("timestamp").and_then(parse_iso_millis);
                        id = Some((s.to_owned(), ts));
                    }
                }
                if cwd.is_none() {
                    cwd = f.str("cwd").map(str::to_owned);
                }
            });
            if id.is_some() && cwd.is_some() {
                break;
            }
        }
        let (id, timestamp) = id.unwrap_or_else(|| (file_stem(path), None));
        Header {
            id,
            cwd: cwd.unwrap_or_default(),
            version: 0,
            timestamp,
            parent: None,
            fingerprint: headerless_fingerprint(b"qwen-file", path),
        }
    })
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the records of one file share.
#[derive(Debug, Clone)]
pub struct QwenContext {
    header: Header,
    /// `qwen:<file stem>`.
    source: String,
    /// The file stem, for the keys of lines without a `uuid`.
    stem: String,
}

impl QwenContext {
    fn new(header: Header, path: &Path) -> Self {
        let stem = file_stem(path);
        QwenContext {
            header,
            source: format!("qwen:{stem}"),
            stem,
        }
    }
}

// ---------------------------------------------------------------------------
// Mapping

/// The fields of a line that the mapping reads, found in one pass.
#[derive(Default)]
struct LineFields<'t, 'a> {
    ty: Option<&'a str>,
    subtype: Option<&'a str>,
    uuid: Option<&'a str>,
    parent_uuid: Option<&'a str>,
    session_id: Option<&'a str>,
    cwd: Option<&'a str>,
    timestamp: Option<&'a str>,
    model: Option<&'a str>,
    agent_id: Option<&'a str>,
    message: Option<&'t [Node<'a>]>,
    usage: Option<&'t [Node<'a>]>,
    tool_call_result: Option<&'t [Node<'a>]>,
    system_payload: Option<&'t [Node<'a>]>,
}

fn line_fields<'t, 'a>(nodes: &'t [Node<'a>]) -> LineFields<'t, 'a> {
    let mut l = LineFields::default();
    for (k, v) in Fields::of(nodes).iter() {
        match k {
            "type" => l.ty = as_str(v),
            "subtype" => l.subtype = as_str(v),
            "uuid" => l.uuid = as_str(v),
            "parentUuid" => l.parent_uuid = as_str(v),
            "sessionId" => l.session_id = as_str(v).filter(|s| !s.is_empty()),
            "cwd" => l.cwd = as_str(v),
            "timestamp" => l.timestamp = as_str(v),
            "model" => l.model = as_str(v).filter(|s| !s.is_empty()),
            "agentId" => l.agent_id = as_str(v),
            "message" => l.message = Some(v),
            "usageMetadata" => l.usage = Some(v),
            "toolCallResult" => l.tool_call_result = Some(v),
            "systemPayload" => l.system_payload = Some(v),
            _ => {}
        }
    }
    l
}

/// The entry type a line is counted under: its `type`, and for a `system`
/// line or a `user` line with a `subtype`, `<type>/<subtype>`.
fn entry_type<'a>(ty: &'a str, subtype: Option<&'a str>, arena: &'a Bump) -> &'a str {
    match (ty, subtype) {
        ("system" | "user", Some(s)) => bumpalo::format!(in arena, "{}/{}", ty, s).into_bump_str(),
        _ => ty,
    }
}

/// The role a line's record has, if it makes one.
fn role_of(ty: &str, subtype: Option<&str>) -> Option<Role> {
    match (ty, subtype) {
        ("user", None | Some("mid_turn_user_message")) => Some(Role::User),
        // Input Qwen Code injected (a notification, a cron prompt, a goal
        // runtime message): not typed by the user.
        ("user", Some(_)) => Some(Role::System),
        ("assistant", _) => Some(Role::Assistant),
        ("tool_result", _) => Some(Role::ToolResult),
        ("system", Some("chat_compression" | "rewind")) => Some(Role::System),
        // `ui_telemetry`, `custom_title`, `parent_session`,
        // `session_source`, `slash_command`, snapshots, the managed
        // session log, ...: bookkeeping, counted by type.
        _ => None,
    }
}

/// An assistant line's usage in our fields (Gemini's `usageMetadata`,
/// whose prompt count includes the cached tokens): `input` the prompt
/// less the cached tokens, `cache_read` the cached tokens, `output` the
/// candidates (thoughts are in the total only, as ccusage counts them),
/// `total_tokens` `totalTokenCount` as written, else the sum of the
/// parts with the thoughts. A usage with none of the parts but a total
/// is counted as output, as ccusage does.
pub fn usage_of(v: &[Node<'_>]) -> Option<Usage> {
    if !matches!(v.first(), Some(Node::Object { .. })) {
        return None;
    }
    let (mut prompt, mut cached, mut candidates, mut thoughts, mut total) =
        (None, None, None, None, None);
    for (k, v) in Fields::of(v).iter() {
        match k {
            "promptTokenCount" => prompt = as_u64(v),
            "cachedContentTokenCount" => cached = as_u64(v),
            "candidatesTokenCount" => candidates = as_u64(v),
            "thoughtsTokenCount" => thoughts = as_u64(v),
            "totalTokenCount" => total = as_u64(v),
            _ => {}
        }
    }
    let mut u = Usage::default();
    if prompt.is_none() && cached.is_none() && candidates.is_none() && thoughts.is_none() {
        u.output = total.unwrap_or(0);
        u.total_tokens = u.output;
        return Some(u);
    }
    let (prompt, cached) = (prompt.unwrap_or(0), cached.unwrap_or(0));
    u.cache_read = cached.min(prompt);
    u.input = prompt - u.cache_read;
    u.output = candidates.unwrap_or(0);
    u.total_tokens = total.unwrap_or_else(|| {
        prompt
            .saturating_add(u.output)
            .saturating_add(thoughts.unwrap_or(0))
    });
    Some(u)
}

impl MapLine for QwenContext {
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
        let l = line_fields(nodes);
        let Some(ty) = l.ty else {
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        };
        let entry_ty = entry_type(ty, l.subtype, arena);
        report.entries.add(entry_ty, 1);
        let entry = |record| {
            let fingerprint = match l.uuid {
                Some(uuid) => fingerprint(&[b"qwen-uuid", uuid.as_bytes()]),
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
        let role = if TYPES.contains(&ty) {
            role_of(ty, l.subtype)
        } else {
            None
        };
        let usage = match (role, l.usage) {
            (Some(Role::Assistant), Some(u)) => usage_of(u),
            _ => None,
        };
        let Some(role) = role else {
            report.no_record += 1;
            return entry(None);
        };
        if let Some(u) = &usage {
            let at = crate::report::UsageAt {
                seq: 0,
                line: pos.line,
                time: l.timestamp.and_then(parse_iso_millis),
                reasoning: 0,
            };
            report.add_usage_at(Some(PROVIDER), l.model, u, true, at);
        }
        if !report.count_record(role, filter) {
            return entry(None);
        }
        let mut text = Text::new(arena);
        let mut call: (Option<&'a str>, Option<&'a str>) = (None, None);
        let mut is_error = None;
        let message = Fields::of(l.message.unwrap_or(&[]));
        match (ty, l.subtype) {
            ("system", Some("chat_compression")) => compression(&mut text, l.system_payload),
            ("system", Some("rewind")) => {
                let n = Fields::of(l.system_payload.unwrap_or(&[]))
                    .get("truncatedCount")
                    .and_then(as_u64);
                let piece = match n {
                    Some(n) => {
                        bumpalo::format!(in arena, "[rewind: {} truncated]", n).into_bump_str()
                    }
                    None => "[rewind]",
                };
                text.push_decoded(piece);
            }
            _ => parts(&mut text, message.get("parts"), &mut call, &mut is_error),
        }
        let (mut tool_name, mut tool_call_id) = call;
        if ty == "tool_result" {
            let r = Fields::of(l.tool_call_result.unwrap_or(&[]));
            if let Some(id) = r.str("callId") {
                tool_call_id = Some(id);
            }
            match r.str("status") {
                Some("error") => is_error = Some(true),
                Some("success") if is_error.is_none() => is_error = Some(false),
                _ => {}
            }
            if r.get("error").is_some_and(|e| {
                !matches!(e.first(), Some(Node::Static(simd_json::StaticNode::Null)))
            }) {
                is_error = Some(true);
            }
            if !text.has_text() {
                if let Some(d) = r.str("resultDisplay") {
                    text.kind("text");
                    text.push(d);
                }
            }
        } else if ty != "assistant" {
            (tool_name, tool_call_id) = (None, None);
        }
        let (text, kinds) = text.finish();
        let session = l.session_id.unwrap_or(&self.header.id);
        let key = match l.uuid {
            Some(uuid) => bumpalo::format!(in arena, "{}:{}", session, uuid),
            None => bumpalo::format!(in arena, "{}:{}:L{}", session, self.stem, pos.line),
        };
        let assistant = role == Role::Assistant;
        entry(Some(Record {
            role,
            text,
            project: l.cwd.unwrap_or(&self.header.cwd),
            session,
            key: key.into_bump_str(),
            source: &self.source,
            id: l.uuid,
            parent_id: l.parent_uuid,
            line: pos.line,
            byte: pos.byte,
            entry: entry_ty,
            message_role: message.str("role"),
            kinds,
            timestamp: l.timestamp.and_then(parse_iso_millis),
            provider: None,
            model: if assistant { l.model } else { None },
            usage,
            stop_reason: None,
            tool_name,
            tool_call_id,
            is_error,
            custom_type: l.subtype,
            command: None,
            exit_code: None,
            repaired,
            agent_id: l.agent_id,
            message_id: None,
            request_id: None,
            provisional: false,
        }))
    }
}

/// Flattens Gemini `parts`: `text` (kind `text`, or `thinking` when
/// `thought`), `functionCall` as `<name> <args JSON>` (kind `toolCall`;
/// the first call's name and id kept), `functionResponse` as its
/// `response.output` (a string; other values as JSON), or `response.error`
/// (then `is_error`), kind `text`; `inlineData` as an image placeholder;
/// `fileData` as `[file <mime>, <uri>]` (kind `file`); others their first
/// key as kind, no text.
pub(crate) fn parts<'a>(
    text: &mut Text<'a>,
    parts: Option<&[Node<'a>]>,
    call: &mut (Option<&'a str>, Option<&'a str>),
    is_error: &mut Option<bool>,
) {
    let Some(v) = parts else { return };
    if let Some(s) = as_str(v) {
        text.kind("text");
        text.push(s);
        return;
    }
    for p in elements(v) {
        part(text, p, call, is_error);
    }
}

/// One Gemini part (see [`parts`]).
pub(crate) fn part<'a>(
    text: &mut Text<'a>,
    part: &[Node<'a>],
    call: &mut (Option<&'a str>, Option<&'a str>),
    is_error: &mut Option<bool>,
) {
    {
        let f = Fields::of(part);
        if let Some(t) = f.get("text").and_then(as_str) {
            let thought = f.get("thought").and_then(as_bool) == Some(true);
            text.kind(if thought { "thinking" } else { "text" });
            text.push(t);
        } else if let Some(c) = f.get("functionCall") {
            let c = Fields::of(c);
            let name = c.str("name").unwrap_or("");
            text.kind("toolCall");
            text.call(name, c.get("args"));
            if call.0.is_none() {
                *call = (Some(name), c.str("id"));
            }
        } else if let Some(r) = f.get("functionResponse") {
            let r = Fields::of(r);
            if call.0.is_none() {
                *call = (r.str("name"), r.str("id"));
            }
            let resp = Fields::of(r.get("response").unwrap_or(&[]));
            text.kind("text");
            match (resp.get("output"), resp.get("error")) {
                (Some(o), _) => value(text, o),
                (None, Some(e)) => {
                    *is_error = Some(true);
                    value(text, e);
                }
                (None, None) => {
                    if let Some(whole) = r.get("response") {
                        value(text, whole);
                    }
                }
            }
        } else if let Some(d) = f.get("inlineData") {
            let d = Fields::of(d);
            text.kind("image");
            text.image(d.str("mimeType"), d.str("data"));
        } else if let Some(d) = f.get("fileData") {
            let d = Fields::of(d);
            text.kind("file");
            let piece = bumpalo::format!(in text.arena(), "[file {}, {}]",
                d.str("mimeType").unwrap_or("unknown"),
                d.str("fileUri").unwrap_or(""));
            text.push_decoded(piece.into_bump_str());
        } else if let Some((k, _)) = f.iter().next() {
            if k != "thought" && k != "thoughtSignature" {
                text.kind(k);
            }
        }
    }
}

/// A value as a piece: a string as is, anything else as compact JSON.
fn value<'a>(text: &mut Text<'a>, v: &[Node<'a>]) {
    if let Some(s) = as_str(v) {
        text.push(s);
    } else {
        let mut s = bumpalo::collections::String::new_in(text.arena());
        write_json(v, &mut s);
        text.push_decoded(s.into_bump_str());
    }
}

/// A `chat_compression` record's text: the text parts of the first
/// content of `compressedHistory` (the summary the model is given in
/// place of the history; the contents after it repeat later history).
fn compression<'a>(text: &mut Text<'a>, payload: Option<&[Node<'a>]>) {
    let history = Fields::of(payload.unwrap_or(&[])).get("compressedHistory");
    let Some(first) = history.into_iter().flat_map(elements).next() else {
        return;
    };
    let mut none = (None, None);
    let mut no_err = None;
    parts(text, Fields::of(first).get("parts"), &mut none, &mut no_err);
}
