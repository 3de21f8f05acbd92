//! The GitHub Copilot CLI adapter: the only module that knows Copilot
//! CLI's key names (see `docs/copilot-cli.md` for the mapping, and
//! `shared/spec/copilot-cli-format.md` for the format).
//!
//! A session is `session-state/<sessionId>/events.jsonl` under Copilot's
//! home: an append-only log of events `{type, data, id, timestamp,
//! parentId}`. It has no header line: the file's [`Header`] is its first
//! `session.start` event within the first 64 KiB. A line's mapping needs
//! what earlier lines said (the cwd and model in force, the usage of the
//! segment so far): the running context, saved in the checkpoint; a file
//! is read in one task ([`Format::needs_running_context`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bumpalo::Bump;
use simd_json::Node;

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{
    as_bool, as_str, as_u64, elements, fingerprint, is_blank, Fields, JsonParser, PrefixLines,
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

/// The provider usage is counted under: the models are served through
/// GitHub Copilot.
pub const PROVIDER: &str = "github-copilot";

/// GitHub Copilot CLI's session logs: `events.jsonl` in a session's
/// folder under `session-state/` of `$COPILOT_HOME` (else `~/.copilot`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Copilot;

impl Format for Copilot {
    fn name(&self) -> &'static str {
        "copilot"
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        true
    }

    /// A file named `events.jsonl` (the OTel files under `otel/` are
    /// spans and metrics, not sessions: not read).
    fn is_session_file(&self, path: &Path) -> bool {
        path.file_name().is_some_and(|n| n == "events.jsonl")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let home = match std::env::var_os("COPILOT_HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => match std::env::var_os("HOME") {
                Some(h) => PathBuf::from(h).join(".copilot"),
                None => {
                    return Err(
                        "no Copilot CLI archive: neither COPILOT_HOME nor HOME is set".into(),
                    )
                }
            },
        };
        let dir = home.join("session-state");
        if dir.is_dir() {
            Ok(vec![dir])
        } else {
            Err(format!("no Copilot CLI archive: no {}", dir.display()))
        }
    }

    /// One of the first lines (up to five) is a Copilot CLI event: an
    /// object with a `data` object and a string `type` of an event family
    /// Copilot writes (`session.`, `user.`, `assistant.`, `tool.`,
    /// `system.`, `subagent.`, `hook.`, `skill.`, or `abort`). A first line
    /// longer than the prefix is Copilot's when it starts with
    /// `{"type":"session.start"`.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        crate::json::with_scratch(|json, arena| detect_copilot(json, arena, prefix, whole))
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        let session = open_headerless(input, path, opts, PREFIX, |prefix, whole| {
            let body = headerless_body(prefix, whole)?;
            Some(CopilotContext::new(header_of(body, whole, path), path, &[]))
        })?;
        Ok(Box::new(CopilotSource(session.counting(opts))))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        let ctx = CopilotContext::new(header.clone(), path, context);
        let session = resume_headerless(input, path, ctx, byte, lines_before, opts);
        Box::new(CopilotSource(session.counting(opts)))
    }

    /// Output counted from messages of a segment not shut down (yet).
    fn partial_usage(&self, context: &[u8]) -> bool {
        Running::decode(context).is_some_and(|r| !r.partial.is_empty())
    }

    /// The usage of a `session.shutdown` depends on the shutdowns and
    /// messages before it in the file: read from the start, in one task.
    fn needs_running_context(&self) -> bool {
        true
    }
}

/// A Copilot CLI source.
struct CopilotSource<'d>(LineDriver<FileLines<'d>, CopilotContext>);

record_source!(trait impl['d] CopilotSource<'d>);

const FAMILIES: [&str; 8] = [
    "session.",
    "user.",
    "assistant.",
    "tool.",
    "system.",
    "subagent.",
    "hook.",
    "skill.",
];

fn is_event_type(t: &str) -> bool {
    t == "abort" || FAMILIES.iter().any(|f| t.starts_with(f))
}

fn detect_copilot(json: &mut JsonParser, arena: &mut Bump, prefix: &[u8], whole: bool) -> bool {
    let mut lines = PrefixLines::new(&prefix[bom_len(prefix)..], whole);
    let mut seen = 0;
    while seen < 5 {
        let Some((_, line)) = lines.next() else {
            return seen == 0 && lines.rest().starts_with(b"{\"type\":\"session.start\"");
        };
        if is_blank(line) {
            continue;
        }
        seen += 1;
        arena.reset();
        let copilot = json.parse(line, arena, |parsed| {
            let Ok((nodes, _)) = parsed else { return false };
            let f = Fields::of(nodes);
            f.str("type").is_some_and(is_event_type)
                && f.get("data")
                    .is_some_and(|d| matches!(d.first(), Some(Node::Object { .. })))
        });
        if copilot {
            return true;
        }
    }
    false
}

/// The session folder's name: the id when no `session.start` says it.
fn folder_id(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The header from the first `session.start` of `prefix` (only complete
/// lines, and the last one when `whole`): its `sessionId` (else the
/// session folder's name), `context.cwd` (`""` when none) and timestamp.
fn header_of(prefix: &[u8], whole: bool, path: &Path) -> Header {
    crate::json::with_scratch(|json, arena| {
        // (session id, cwd, timestamp) of the first session.start.
        let mut found: Option<(Option<String>, String, Option<i64>)> = None;
        for (_, line) in PrefixLines::new(prefix, whole) {
            if is_blank(line) || memchr::memmem::find(line, b"session.start").is_none() {
                continue;
            }
            arena.reset();
            json.parse(line, arena, |parsed| {
                let Ok((nodes, _)) = parsed else { return };
                let f = Fields::of(nodes);
                if f.str("type") != Some("session.start") {
                    return;
                }
                let d = Fields::of(f.get("data").unwrap_or(&[]));
                let cwd = Fields::of(d.get("context").unwrap_or(&[])).str("cwd");
                found = Some((
                    d.str("sessionId")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                    cwd.unwrap_or("").to_owned(),
                    f.str("timestamp").and_then(parse_iso_millis),
                ));
            });
            if found.is_some() {
                break;
            }
        }
        let (id, cwd, timestamp) = found.unwrap_or_default();
        Header {
            id: id.unwrap_or_else(|| folder_id(path)),
            cwd,
            version: 0,
            timestamp,
            parent: None,
            fingerprint: headerless_fingerprint(b"copilot-file", path),
        }
    })
}

/// Token fields of a `modelMetrics` entry's `usage`: input (cache reads
/// and writes included), output (reasoning included), cache reads, cache
/// writes.
type Tokens = [u64; 4];

/// What a later line's mapping needs of the lines before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Running {
    /// The cwd in force (`session.start`, `session.resume`,
    /// `session.context_changed`).
    cwd: String,
    /// The model in force (`session.model_change`, `selectedModel`, an
    /// `assistant.message`'s own).
    model: String,
    /// Each model's last `session.shutdown` snapshot.
    last: BTreeMap<String, Tokens>,
    /// A `session.usage_checkpoint` line was seen (newer CLIs, whose
    /// snapshots are cumulative).
    checkpoints: bool,
    /// Output tokens counted from `assistant.message` lines since the last
    /// shutdown or segment start, by model.
    partial: BTreeMap<String, u64>,
}

/// The version byte of the running context.
const CONTEXT_VERSION: u8 = 1;

fn put(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_le_bytes());
}

fn take<'b>(b: &mut &'b [u8], n: usize) -> Option<&'b [u8]> {
    if b.len() < n {
        return None;
    }
    let (h, t) = b.split_at(n);
    *b = t;
    Some(h)
}

fn take_u64(b: &mut &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(take(b, 8)?.try_into().ok()?))
}

fn take_str(b: &mut &[u8]) -> Option<String> {
    let n = u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize;
    String::from_utf8(take(b, n)?.to_vec()).ok()
}

impl Running {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![CONTEXT_VERSION];
        put(&mut out, &self.cwd);
        put(&mut out, &self.model);
        out.push(u8::from(self.checkpoints));
        put_u64(&mut out, self.last.len() as u64);
        for (m, t) in &self.last {
            put(&mut out, m);
            for n in t {
                put_u64(&mut out, *n);
            }
        }
        put_u64(&mut out, self.partial.len() as u64);
        for (m, n) in &self.partial {
            put(&mut out, m);
            put_u64(&mut out, *n);
        }
        out
    }

    /// `None` for an empty or foreign context.
    fn decode(mut b: &[u8]) -> Option<Running> {
        let b = &mut b;
        if take(b, 1)? != [CONTEXT_VERSION] {
            return None;
        }
        let mut r = Running {
            cwd: take_str(b)?,
            model: take_str(b)?,
            checkpoints: take(b, 1)?[0] != 0,
            ..Running::default()
        };
        for _ in 0..take_u64(b)? {
            let m = take_str(b)?;
            let mut t = [0; 4];
            for n in &mut t {
                *n = take_u64(b)?;
            }
            r.last.insert(m, t);
        }
        for _ in 0..take_u64(b)? {
            let m = take_str(b)?;
            r.partial.insert(m, take_u64(b)?);
        }
        b.is_empty().then_some(r)
    }
}

/// What the records of one file share.
#[derive(Debug)]
pub struct CopilotContext {
    header: Header,
    /// `copilot:<session folder>`.
    source: String,
    running: RefCell<Running>,
}

impl CopilotContext {
    fn new(header: Header, path: &Path, context: &[u8]) -> Self {
        let running = Running::decode(context).unwrap_or_else(|| Running {
            cwd: header.cwd.clone(),
            ..Running::default()
        });
        CopilotContext {
            source: format!("copilot:{}", folder_id(path)),
            header,
            running: RefCell::new(running),
        }
    }
}

/// A model id as ccusage names it: without the `-1m` / `-1m-internal`
/// suffix of long-context variants.
fn model_name(m: &str) -> &str {
    m.strip_suffix("-1m-internal")
        .or_else(|| m.strip_suffix("-1m"))
        .unwrap_or(m)
}

/// A `modelMetrics` entry's tokens.
fn tokens(v: &[Node<'_>]) -> Tokens {
    let u = Fields::of(Fields::of(v).get("usage").unwrap_or(&[]));
    let n = |k: &str| u.get(k).and_then(as_u64).unwrap_or(0);
    [
        n("inputTokens"),
        n("outputTokens"),
        n("cacheReadTokens"),
        n("cacheWriteTokens"),
    ]
}

/// Our usage of tokens `t` (input less cache reads and writes).
fn usage(t: Tokens) -> Usage {
    let [input, output, cache_read, cache_write] = t;
    let input = input.saturating_sub(cache_read).saturating_sub(cache_write);
    Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: [output, cache_read, cache_write]
            .into_iter()
            .fold(input, u64::saturating_add),
        cost: 0.0,
    }
}

impl CopilotContext {
    /// Counts a `session.shutdown`'s `modelMetrics` (see the docs: a
    /// snapshot is its segment's, unless cumulative), less the output
    /// already counted from the segment's messages.
    fn shutdown(&self, data: Fields<'_, '_>, report: &mut Report, at: crate::report::UsageAt) {
        let mut run = self.running.borrow_mut();
        let Some(metrics) = data.get("modelMetrics") else {
            run.partial.clear();
            return;
        };
        for (model, v) in Fields::of(metrics).iter() {
            let model = model_name(model);
            let now = tokens(v);
            let prev = run.last.get(model).copied();
            let cumulative =
                run.checkpoints && prev.is_some_and(|p| now.iter().zip(p).all(|(a, b)| *a >= b));
            let mut own = match (cumulative, prev) {
                (true, Some(p)) => [now[0] - p[0], now[1] - p[1], now[2] - p[2], now[3] - p[3]],
                _ => now,
            };
            let counted = run.partial.remove(model).unwrap_or(0);
            own[1] = own[1].saturating_sub(counted);
            if own != [0; 4] {
                report.add_usage_at(Some(PROVIDER), Some(model), &usage(own), false, at);
            }
            run.last.insert(model.to_owned(), now);
        }
        run.partial.clear();
    }
}

/// What an event becomes, if a record.
fn role_of(ty: &str) -> Option<Role> {
    match ty {
        "user.message" => Some(Role::User),
        "assistant.message" | "assistant.reasoning" => Some(Role::Assistant),
        "tool.execution_complete" => Some(Role::ToolResult),
        "system.message"
        | "session.compaction_complete"
        | "session.task_complete"
        | "session.error"
        | "abort" => Some(Role::System),
        _ => None,
    }
}

impl MapLine for CopilotContext {
    fn header(&self) -> &Header {
        &self.header
    }

    fn running_context(&self) -> Vec<u8> {
        self.running.borrow().encode()
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
        let f = Fields::of(nodes);
        let [ty, data, id, timestamp, parent, agent] = f.first_of(|k| match k {
            "type" => Some(0),
            "data" => Some(1),
            "id" => Some(2),
            "timestamp" => Some(3),
            "parentId" => Some(4),
            "agentId" => Some(5),
            _ => None,
        });
        let Some(ty) = ty.and_then(as_str) else {
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        };
        report.entries.add(ty, 1);
        let id = id.and_then(as_str);
        let timestamp = timestamp.and_then(as_str);
        let entry = |record| {
            let fingerprint = match id {
                Some(id) => fingerprint(&[
                    b"copilot",
                    ty.as_bytes(),
                    id.as_bytes(),
                    timestamp.unwrap_or("").as_bytes(),
                ]),
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
        let d = Fields::of(data.unwrap_or(&[]));
        let at = crate::report::UsageAt {
            seq: 0,
            line: pos.line,
            // Parsed for a usage row alone (only shutdown and message
            // events carry usage, and most runs keep no row).
            time: if report.keep_usage_rows
                && matches!(ty, "session.shutdown" | "assistant.message")
            {
                timestamp.and_then(parse_iso_millis)
            } else {
                None
            },
            reasoning: 0,
        };
        // The running context first: what this event says of the cwd, the
        // model, the segment.
        let mut usage = None;
        match ty {
            "session.start" | "session.resume" | "session.context_changed" => {
                let mut run = self.running.borrow_mut();
                let cwd = match ty {
                    "session.context_changed" => d.str("cwd"),
                    _ => Fields::of(d.get("context").unwrap_or(&[])).str("cwd"),
                };
                if let Some(cwd) = cwd {
                    run.cwd = cwd.to_owned();
                }
                if let Some(m) = d.str("selectedModel") {
                    run.model = m.to_owned();
                }
                if ty != "session.context_changed" {
                    // A new segment: output counted from a crashed one's
                    // messages stays counted.
                    run.partial.clear();
                }
            }
            "session.model_change" => {
                if let Some(m) = d.str("newModel") {
                    self.running.borrow_mut().model = m.to_owned();
                }
            }
            "session.usage_checkpoint" => self.running.borrow_mut().checkpoints = true,
            "session.shutdown" => self.shutdown(d, report, at),
            "assistant.message" => {
                if let Some(n) = d.get("outputTokens").and_then(as_u64) {
                    let mut run = self.running.borrow_mut();
                    let model = model_name(d.str("model").unwrap_or(&run.model)).to_owned();
                    *run.partial.entry(model.clone()).or_default() += n;
                    drop(run);
                    let u = Usage {
                        output: n,
                        total_tokens: n,
                        ..Usage::default()
                    };
                    let model = (!model.is_empty()).then_some(model.as_str());
                    report.add_usage_at(Some(PROVIDER), model, &u, true, at);
                    usage = Some(u);
                }
            }
            _ => {}
        }
        let Some(role) = role_of(ty) else {
            report.no_record += 1;
            return entry(None);
        };
        if !report.count_record(role, filter) {
            return entry(None);
        }
        let mut text = Text::new(arena);
        let (mut tool_name, mut tool_call_id, mut is_error, mut custom_type) =
            (None, None, None, None);
        match ty {
            "user.message" => {
                text.kind("text");
                text.push(d.str("content").unwrap_or(""));
                custom_type = d.str("source");
            }
            "assistant.message" => {
                if let Some(r) = d.str("reasoningText").filter(|r| !r.is_empty()) {
                    text.kind("thinking");
                    text.push(r);
                }
                if let Some(c) = d.str("content").filter(|c| !c.is_empty()) {
                    text.kind("text");
                    text.push(c);
                }
                for req in d.get("toolRequests").into_iter().flat_map(elements) {
                    let r = Fields::of(req);
                    let name = r.str("name").unwrap_or("");
                    text.kind("toolCall");
                    text.call(name, r.get("arguments"));
                    if tool_call_id.is_none() {
                        (tool_name, tool_call_id) = (Some(name), r.str("toolCallId"));
                    }
                }
            }
            "assistant.reasoning" => {
                text.kind("thinking");
                text.push(d.str("content").unwrap_or(""));
            }
            "tool.execution_complete" => {
                tool_call_id = d.str("toolCallId");
                let result = Fields::of(d.get("result").unwrap_or(&[]));
                let err = Fields::of(d.get("error").unwrap_or(&[]));
                is_error = match (d.get("success").and_then(as_bool), err.str("message")) {
                    (_, Some(_)) => Some(true),
                    (Some(s), None) => Some(!s),
                    (None, None) => None,
                };
                text.kind("text");
                match (result.str("content"), err.str("message")) {
                    (Some(c), _) => text.push(c),
                    (None, Some(m)) => text.push(m),
                    (None, None) => {}
                }
            }
            "system.message" => {
                text.kind("text");
                text.push(d.str("content").unwrap_or(""));
                custom_type = d.str("role");
            }
            "session.compaction_complete" => {
                text.kind("text");
                text.push(d.str("summaryContent").unwrap_or(""));
                custom_type = Some("compaction");
            }
            "session.task_complete" => {
                text.kind("text");
                text.push(d.str("summary").unwrap_or(""));
                custom_type = Some("task_complete");
            }
            "session.error" => {
                text.error(d.str("message"));
                custom_type = d.str("errorType");
            }
            _ => {
                // abort
                text.push(d.str("reason").unwrap_or(""));
                custom_type = Some("abort");
            }
        }
        let (text, kinds) = text.finish();
        let run = self.running.borrow();
        let project = arena.alloc_str(&run.cwd);
        let model = match (ty, d.str("model")) {
            ("assistant.message" | "assistant.reasoning", Some(m)) => Some(m),
            ("assistant.message" | "assistant.reasoning", None) if !run.model.is_empty() => {
                Some(&*arena.alloc_str(&run.model))
            }
            _ => None,
        };
        let session = &self.header.id;
        let key = match id {
            Some(id) => bumpalo::format!(in arena, "{}:{}", session, id),
            None => bumpalo::format!(in arena, "{}:L{}", session, pos.line),
        };
        let assistant = ty == "assistant.message";
        entry(Some(Record {
            role,
            text,
            project,
            session,
            key: key.into_bump_str(),
            source: &self.source,
            id,
            parent_id: parent.and_then(as_str),
            line: pos.line,
            byte: pos.byte,
            entry: ty,
            message_role: None,
            kinds,
            timestamp: timestamp.and_then(parse_iso_millis),
            provider: if assistant { Some(PROVIDER) } else { None },
            model,
            usage,
            stop_reason: None,
            tool_name,
            tool_call_id,
            is_error,
            custom_type,
            command: None,
            exit_code: None,
            repaired,
            agent_id: agent.and_then(as_str),
            message_id: if assistant { d.str("messageId") } else { None },
            request_id: if assistant { d.str("requestId") } else { None },
            provisional: false,
        }))
    }
}
