//! The Claude Code adapter: the only module that knows Claude Code's key
//! names (see the README's "Claude Code" section for the mapping, and
//! `shared/spec/claude-code-format.md` for the format).
//!
//! A transcript has no header line: the file's [`Header`] is built from the
//! first line, within its first [`PREFIX`] bytes, that carries a
//! `sessionId`. Lines are read, parsed and accounted for by the machinery
//! pi's sources use (the line reader or in-place splitting, the arena, the
//! line parser); only the mapping of a parsed line is this module's.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use bumpalo::Bump;
use simd_json::{Node, StaticNode};

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{
    as_bool, as_f64, as_str, as_u64, elements, fingerprint, is_blank, Fields, JsonParser,
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

/// How much of a file's start its [`Header`] is looked for in (bytes): a
/// first line longer than this (a file-history snapshot) is not waited for.
pub const PREFIX: usize = 64 << 10;

/// Claude Code's session transcripts: `*.jsonl` under `projects/` of
/// Claude's config folders, one JSON object a line and no header line.
///
/// - The file's [`Header`]: `id` is the `sessionId` of the first line
///   within the first 64 KiB that has one, `timestamp` that line's own
///   (none when absent, as on a `queue-operation`), `cwd` the first any
///   line of those 64 KiB has (`""` when none has one); a file without a
///   `sessionId` takes its id from its path (the session folder of a
///   `subagents/` file, else the file stem). The header is fixed once
///   those lines are written, so a growing file keeps it.
/// - Records carry their own line's `sessionId` (the header's when the
///   line has none) and `cwd`; a line without one takes the cwd in force
///   (the last a line before it had, else the header's): the running
///   context, saved in the checkpoint, and found by reading back from the
///   start of a part ([`Format::context_before`]), so that parts are
///   still read in parallel. Keys are `<sessionId>:<uuid>`.
/// - Every Claude Code session is of one lineage (see [`Format::parent`]
///   below): a line is emitted once by its `uuid` across the archive, the
///   first copy in path order kept.
#[derive(Debug, Clone, Copy, Default)]
pub struct Claude;

/// Line types only Claude Code writes (pi's are others).
const CLAUDE_TYPES: [&str; 16] = [
    "user",
    "assistant",
    "system",
    "summary",
    "queue-operation",
    "file-history-snapshot",
    "progress",
    "attachment",
    "last-prompt",
    "ai-title",
    "custom-title",
    "permission-mode",
    "agent-setting",
    "pr-link",
    "mode",
    "worktree-state",
];

/// The lineage every Claude Code session joins.
const LINEAGE_ROOT: &str = "claude:*";

impl Format for Claude {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn responses_provider(&self) -> Option<&'static str> {
        Some("anthropic")
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        // Its sources never read raw text.
        true
    }

    /// `*.jsonl`, but not a workflow's `journal.jsonl` nor anything under a
    /// session's `tool-results/` folder.
    fn is_session_file(&self, path: &Path) -> bool {
        if path.extension().is_none_or(|e| e != "jsonl") {
            return false;
        }
        let parent = path.parent();
        let in_dir = |name: &str| {
            parent
                .into_iter()
                .flat_map(Path::components)
                .any(|c| c.as_os_str() == name)
        };
        let journal = path.file_name().is_some_and(|n| n == "journal.jsonl");
        let journal = journal && in_dir("workflows");
        !(journal || in_dir("tool-results"))
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        let (found, tried) = default_archives();
        found.into_iter().next().ok_or_else(|| {
            format!(
                "no Claude Code archive: no projects/ folder in {}",
                tried.join(", ")
            )
        })
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = default_archives();
        if found.is_empty() {
            return Err(format!(
                "no Claude Code archive: no projects/ folder in {}",
                tried.join(", ")
            ));
        }
        Ok(found)
    }

    /// One of the first lines (up to five) is Claude Code's: an object
    /// with a string `sessionId`, or a `type` only Claude Code writes, or
    /// an assistant message without a `type`; a first line longer than the
    /// prefix is Claude Code's when the prefix names a key of Claude Code's
    /// envelope (`sessionId`, `parentUuid`, `isSidechain`; pi's are
    /// others) or a file-history snapshot.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        crate::json::with_scratch(|json, arena| detect_claude(json, arena, prefix, whole))
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        let session = open_headerless(input, path, opts, PREFIX, |prefix, whole| {
            context(prefix, whole, path)
        })?;
        // Each entry's counts kept: a replayed copy's are taken out without
        // reading its line again (a Claude Code line adds no usage or cost
        // to its report, so a sum of removals is exactly what removing each
        // would leave).
        Ok(Box::new(ClaudeSource(session.counting(opts))))
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
        let ctx = ClaudeContext::new(header.clone(), path, decode_cwd(context));
        let session = resume_headerless(input, path, ctx, byte, lines_before, opts);
        Box::new(ClaudeSource(session.counting(opts)))
    }

    /// The cwd in force at `byte`: the last line before it with a `cwd`
    /// (found by reading back from there), else the header's. A part of a
    /// large file is read in parallel with the parts before it, and finds
    /// the cwd so; a part read on from a checkpoint has it saved.
    fn context_before(
        &self,
        file: &std::fs::File,
        header: &Header,
        byte: u64,
        _reach: Option<u64>,
        opts: &SourceOptions,
    ) -> std::io::Result<Option<Vec<u8>>> {
        // Nearly every line names one: no reach.
        let cwd = cwd_before(file, byte, opts.max_line_len())?;
        Ok(Some(encode_cwd(cwd.as_deref().unwrap_or(&header.cwd))))
    }

    /// Every session joins one lineage: a resumed session replays lines of
    /// another session (another `sessionId`) with their `uuid`s, and
    /// subagent files carry their parent's `sessionId`.
    fn parent(&self, _header: &Header) -> Option<String> {
        Some(LINEAGE_ROOT.to_owned())
    }
}

/// Claude Code's config folders that hold a `projects/` folder, each as
/// its `projects/` folder, and every place tried: `$CLAUDE_CONFIG_DIR` (a
/// comma list; an entry may name the config folder or its `projects/`),
/// else `$XDG_CONFIG_HOME/claude` (default `~/.config/claude`) and
/// `~/.claude`, as Claude Code and ccusage look for them.
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
    match std::env::var("CLAUDE_CONFIG_DIR") {
        Ok(list) if !list.trim().is_empty() => {
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                candidates.push(expand(entry));
            }
        }
        _ => {
            let xdg = std::env::var_os("XDG_CONFIG_HOME")
                .filter(|x| !x.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config")));
            candidates.extend(xdg.map(|x| x.join("claude")));
            candidates.extend(home.as_ref().map(|h| h.join(".claude")));
        }
    }
    let mut found = Vec::new();
    let mut tried = Vec::new();
    for c in candidates {
        let projects = if c.file_name().is_some_and(|n| n == "projects") {
            c
        } else {
            c.join("projects")
        };
        if projects.is_dir() && !found.contains(&projects) {
            found.push(projects);
        } else {
            tried.push(projects.display().to_string());
        }
    }
    (found, tried)
}

/// A Claude Code source.
struct ClaudeSource<'d>(LineDriver<FileLines<'d>, ClaudeContext>);

record_source!(trait impl['d] ClaudeSource<'d>);

/// The file's context from its first bytes; `None` for a file that holds
/// nothing but whitespace, NULs and a BOM (`whole`: `prefix` is the file).
fn context(prefix: &[u8], whole: bool, path: &Path) -> Option<ClaudeContext> {
    let body = headerless_body(prefix, whole)?;
    Some(ClaudeContext::new(header_of(body, whole, path), path, None))
}

/// [`Format::detect`] for Claude Code (see there), with a kept parser.
fn detect_claude(json: &mut JsonParser, arena: &mut Bump, prefix: &[u8], whole: bool) -> bool {
    let mut lines = PrefixLines::new(&prefix[bom_len(prefix)..], whole);
    let mut seen = 0;
    while seen < 5 {
        let Some((_, line)) = lines.next() else {
            // A first line longer than the prefix.
            let rest = lines.rest();
            let finder = |n: &str| memchr::memmem::find(rest, n.as_bytes()).is_some();
            return seen == 0
                && !rest.is_empty()
                && [
                    "sessionId",
                    "parentUuid",
                    "isSidechain",
                    "file-history-snapshot",
                ]
                .iter()
                .any(|k| finder(&format!("\"{k}\"")));
        };
        if is_blank(line) {
            continue;
        }
        seen += 1;
        arena.reset();
        let claude = json.parse(line, arena, |parsed| {
            let Ok((nodes, _)) = parsed else { return false };
            let f = Fields::of(nodes);
            let role = || Fields::of(f.get("message").unwrap_or(&[])).str("role");
            f.str("sessionId").is_some()
                || f.str("type").is_some_and(|t| CLAUDE_TYPES.contains(&t))
                || (f.get("type").is_none() && role() == Some("assistant"))
        });
        if claude {
            return true;
        }
    }
    false
}

/// The header from the first line of `prefix` that carries a `sessionId`
/// (only complete lines, and the last one when `whole`).
fn header_of(prefix: &[u8], whole: bool, path: &Path) -> Header {
    crate::json::with_scratch(|json, arena| header_with(json, arena, prefix, whole, path))
}

/// Whether `line` may hold the object key `key` (quoted): it has it as
/// written, or a `\u` escape that could spell it. A line that may not is
/// not parsed for it (a file-history snapshot, often a file's first line,
/// is megabytes without a `sessionId`).
fn may_name(line: &[u8], key: &[u8]) -> bool {
    memchr::memmem::find(line, key).is_some() || memchr::memmem::find(line, b"\\u").is_some()
}

fn header_with(
    json: &mut JsonParser,
    arena: &mut Bump,
    prefix: &[u8],
    whole: bool,
    path: &Path,
) -> Header {
    let mut found: Option<Header> = None;
    let mut first_cwd: Option<String> = None;
    for (_, line) in PrefixLines::new(prefix, whole) {
        if is_blank(line) {
            continue;
        }
        let want_id = found.is_none() && may_name(line, b"\"sessionId\"");
        let want_cwd = first_cwd.is_none() && may_name(line, b"\"cwd\"");
        if !want_id && !want_cwd {
            continue;
        }
        arena.reset();
        json.parse(line, arena, |parsed| {
            let Ok((nodes, _)) = parsed else { return };
            if first_cwd.is_none() {
                first_cwd = line_cwd(nodes).map(str::to_owned);
            }
            let f = Fields::of(nodes);
            if let Some(id) = f.str("sessionId").filter(|s| !s.is_empty()) {
                found.get_or_insert_with(|| Header {
                    fingerprint: file_fingerprint(path),
                    id: id.to_owned(),
                    cwd: String::new(),
                    version: 0,
                    timestamp: f.str("timestamp").and_then(parse_iso_millis),
                    parent: None,
                });
            }
        });
        if found.is_some() && first_cwd.is_some() {
            break;
        }
    }
    let mut header = found.unwrap_or_else(|| Header {
        fingerprint: file_fingerprint(path),
        id: session_of_path(path),
        cwd: String::new(),
        version: 0,
        timestamp: None,
        parent: None,
    });
    header.cwd = first_cwd.unwrap_or_default();
    header
}

/// A parsed line's `cwd` as the mapping reads it (the last `cwd` key, when
/// a string).
fn line_cwd<'a>(nodes: &[Node<'a>]) -> Option<&'a str> {
    let mut cwd = None;
    for (k, v) in Fields::of(nodes).iter() {
        if k == "cwd" {
            cwd = as_str(v);
        }
    }
    cwd
}

/// The first look back from a place in a file reads this much before it
/// (bytes), each next one twice as much (so that a line of any length,
/// or a long run of lines without a `cwd`, costs reads and copies of
/// about twice its bytes): a Claude Code line is a few KB, and nearly
/// every one has a `cwd`.
const LOOK_BACK_FIRST: usize = 16 << 10;

/// The `cwd` of the last line before `byte` (the start of a line) that
/// has one, as a read of the file from its start would have seen it
/// (lines that parse, the first one after its byte-order mark, lines
/// longer than `max_line` not read): read backwards from `byte`, in
/// chunks, parsing only lines whose bytes may name a `cwd`. `None` when
/// no line before `byte` has one.
fn cwd_before(file: &std::fs::File, byte: u64, max_line: usize) -> std::io::Result<Option<String>> {
    let mut cwd = None;
    crate::json::with_scratch(|json, arena| {
        // The lines whose bytes may name a `cwd` (see [`may_name`]).
        let needles: [&[u8]; 2] = [b"\"cwd\"", b"\\u"];
        crate::line_reader::lines_back(
            file,
            byte,
            LOOK_BACK_FIRST,
            max_line,
            None,
            &needles,
            |line| {
                arena.reset();
                cwd = json.parse(line, arena, |parsed| {
                    parsed
                        .ok()
                        .and_then(|(nodes, _)| line_cwd(nodes))
                        .map(str::to_owned)
                });
                cwd.is_some()
            },
        )
    })?;
    Ok(cwd)
}

/// A header's fingerprint: the file's own (no line of the file is the
/// header, so no copy of it is ever deduplicated).
fn file_fingerprint(path: &Path) -> u64 {
    headerless_fingerprint(b"claude-file", path)
}

/// The session a file without a `sessionId` in its first bytes belongs to:
/// the session folder of `<session>/subagents/agent-*.jsonl`, else the
/// file stem (`<session>.jsonl`).
fn session_of_path(path: &Path) -> String {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
    };
    let parent = path.parent();
    if name(parent).as_deref() == Some("subagents") {
        if let Some(s) = name(parent.and_then(Path::parent)) {
            return s;
        }
    }
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the records of one file share.
#[derive(Debug, Clone)]
pub struct ClaudeContext {
    header: Header,
    /// `claude:<file stem>`.
    source: String,
    /// The file stem, for the keys of lines without a `uuid`.
    stem: String,
    /// The session its path names, for usage lines without a `sessionId`
    /// (as ccusage names it: see [`path_session`]).
    path_session: String,
    /// The cwd in force after the lines mapped so far: the last one a line
    /// had, else the header's (the first of the file's prefix). The running
    /// context, as [`encode_cwd`] writes it.
    cwd: RefCell<String>,
}

impl ClaudeContext {
    /// The context of a file read from its start, or from a place where
    /// the cwd in force is `cwd` (else the header's).
    fn new(header: Header, path: &Path, cwd: Option<&str>) -> Self {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        // An empty cwd saved: none was known then, not even the header's
        // (the first line with one was not yet written); the header's now.
        let cwd = RefCell::new(
            cwd.filter(|c| !c.is_empty())
                .unwrap_or(&header.cwd)
                .to_owned(),
        );
        ClaudeContext {
            header,
            source: format!("claude:{stem}"),
            stem,
            path_session: path_session(path),
            cwd,
        }
    }

    /// A line's own `cwd`, now in force.
    fn saw_cwd(&self, cwd: &str) {
        let mut run = self.cwd.borrow_mut();
        if *run != cwd {
            run.clear();
            run.push_str(cwd);
        }
    }
}

/// The version byte of the running context: the cwd in force follows, as
/// UTF-8.
const CONTEXT_VERSION: u8 = 1;

fn encode_cwd(cwd: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + cwd.len());
    out.push(CONTEXT_VERSION);
    out.extend_from_slice(cwd.as_bytes());
    out
}

/// The cwd a running context holds; `None` for an empty one (a state
/// saved before Claude Code had one) or one of another version.
fn decode_cwd(context: &[u8]) -> Option<&str> {
    match context.split_first() {
        Some((&CONTEXT_VERSION, cwd)) => std::str::from_utf8(cwd).ok(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Mapping

/// The fields of a line that the mapping reads, found in one pass.
#[derive(Default)]
struct LineFields<'t, 'a> {
    ty: Option<&'a str>,
    uuid: Option<&'a str>,
    parent_uuid: Option<&'a str>,
    session_id: Option<&'a str>,
    cwd: Option<&'a str>,
    timestamp: Option<&'a str>,
    agent_id: Option<&'a str>,
    request_id: Option<&'a str>,
    subtype: Option<&'a str>,
    operation: Option<&'a str>,
    message: Option<&'t [Node<'a>]>,
    content: Option<&'t [Node<'a>]>,
    is_meta: bool,
    is_compact_summary: bool,
    /// `isApiErrorMessage`: Claude Code wrote the line in the model's
    /// place, for an API error.
    is_api_error: bool,
    /// `error`, read on such a line only.
    error: Option<&'t [Node<'a>]>,
    cost_usd: Option<f64>,
}

#[derive(Default)]
struct MessageFields<'t, 'a> {
    role: Option<&'a str>,
    content: Option<&'t [Node<'a>]>,
    model: Option<&'a str>,
    id: Option<&'a str>,
    stop_reason: Option<&'a str>,
    /// `stop_reason` is there and `null`: a streamed response not finished
    /// on this line.
    stop_reason_null: bool,
    usage: Option<&'t [Node<'a>]>,
}

fn line_fields<'t, 'a>(nodes: &'t [Node<'a>]) -> LineFields<'t, 'a> {
    let mut l = LineFields::default();
    for (k, v) in Fields::of(nodes).iter() {
        match k {
            "type" => l.ty = as_str(v),
            "uuid" => l.uuid = as_str(v),
            "parentUuid" => l.parent_uuid = as_str(v),
            "sessionId" => l.session_id = as_str(v).filter(|s| !s.is_empty()),
            "cwd" => l.cwd = as_str(v),
            "timestamp" => l.timestamp = as_str(v),
            "agentId" => l.agent_id = as_str(v),
            "requestId" => l.request_id = as_str(v),
            "subtype" => l.subtype = as_str(v),
            "operation" => l.operation = as_str(v),
            "message" => l.message = Some(v),
            "content" => l.content = Some(v),
            "isMeta" => l.is_meta = as_bool(v) == Some(true),
            "isCompactSummary" => l.is_compact_summary = as_bool(v) == Some(true),
            "isApiErrorMessage" => l.is_api_error = as_bool(v) == Some(true),
            "error" => l.error = Some(v),
            "costUSD" => l.cost_usd = as_f64(v),
            _ => {}
        }
    }
    l
}

fn message_fields<'t, 'a>(nodes: &'t [Node<'a>]) -> MessageFields<'t, 'a> {
    let mut m = MessageFields::default();
    for (k, v) in Fields::of(nodes).iter() {
        match k {
            "role" => m.role = as_str(v),
            "content" => m.content = Some(v),
            "model" => m.model = as_str(v),
            "id" => m.id = as_str(v),
            "stop_reason" => {
                m.stop_reason = as_str(v);
                m.stop_reason_null = matches!(v.first(), Some(Node::Static(StaticNode::Null)));
            }
            "usage" => m.usage = Some(v),
            _ => {}
        }
    }
    m
}

/// What a line becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A human prompt (a `user` line, or steering input a `queue-operation`
    /// `remove` carries).
    Prompt,
    /// A `user` line holding `tool_result` blocks.
    ToolResult,
    /// Model output.
    Assistant,
    /// A `system` line, or a compaction summary.
    System,
}

impl Shape {
    fn role(self) -> Role {
        match self {
            Shape::Prompt => Role::User,
            Shape::ToolResult => Role::ToolResult,
            Shape::Assistant => Role::Assistant,
            Shape::System => Role::System,
        }
    }
}

/// What a line of type `ty` becomes, if a record.
fn shape(ty: &str, l: &LineFields<'_, '_>, m: &MessageFields<'_, '_>) -> Option<Shape> {
    match ty {
        "user" if l.is_meta || l.message.is_none() => None,
        "user" if l.is_compact_summary => Some(Shape::System),
        "user" => {
            let results = m
                .content
                .into_iter()
                .flat_map(elements)
                .any(|b| Fields::of(b).str("type") == Some("tool_result"));
            Some(if results {
                Shape::ToolResult
            } else {
                Shape::Prompt
            })
        }
        "assistant" if l.message.is_some() => Some(Shape::Assistant),
        "system" => Some(Shape::System),
        "queue-operation" if l.operation == Some("remove") && l.content.is_some() => {
            Some(Shape::Prompt)
        }
        _ => None,
    }
}

/// A line's usage in our fields: cache writes are the 5-minute plus the
/// 1-hour field when `cache_creation` splits them, else
/// `cache_creation_input_tokens`; the total is the sum of the four; cost
/// only where the line records it (`costUSD`).
pub fn usage_of(v: &[Node<'_>], cost: Option<f64>) -> Option<Usage> {
    if !matches!(v.first(), Some(Node::Object { .. })) {
        return None;
    }
    let mut u = Usage::default();
    let mut split: Option<u64> = None;
    for (k, v) in Fields::of(v).iter() {
        match k {
            "input_tokens" => u.input = as_u64(v).unwrap_or(0),
            "output_tokens" => u.output = as_u64(v).unwrap_or(0),
            "cache_read_input_tokens" => u.cache_read = as_u64(v).unwrap_or(0),
            "cache_creation_input_tokens" => u.cache_write = as_u64(v).unwrap_or(0),
            "cache_creation" if matches!(v.first(), Some(Node::Object { .. })) => {
                let c = Fields::of(v);
                let part = |k| c.get(k).and_then(as_u64).unwrap_or(0);
                split = Some(
                    part("ephemeral_5m_input_tokens")
                        .saturating_add(part("ephemeral_1h_input_tokens")),
                );
            }
            _ => {}
        }
    }
    if let Some(s) = split {
        u.cache_write = s;
    }
    u.total_tokens = [u.output, u.cache_read, u.cache_write]
        .into_iter()
        .fold(u.input, u64::saturating_add);
    u.cost = cost.unwrap_or(0.0);
    Some(u)
}

impl MapLine for ClaudeContext {
    fn header(&self) -> &Header {
        &self.header
    }

    fn running_context(&self) -> Vec<u8> {
        encode_cwd(&self.cwd.borrow())
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
        if let Some(r) = self.response_of(nodes, raw) {
            report.responses.push(r);
        }
        let l = line_fields(nodes);
        if let Some(cwd) = l.cwd {
            self.saw_cwd(cwd);
        }
        let m = l.message.map(message_fields).unwrap_or_default();
        // ccusage's own fixtures write assistant lines without a `type`.
        let ty = match l.ty {
            Some(ty) => ty,
            None if m.role == Some("assistant") => "assistant",
            None => {
                report.repaired -= u64::from(repaired);
                report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
                return None;
            }
        };
        report.entries.add(ty, 1);
        let entry = |record| {
            let fingerprint = match l.uuid {
                Some(uuid) => fingerprint(&[b"uuid", uuid.as_bytes()]),
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
        let Some(shape) = shape(ty, &l, &m) else {
            report.no_record += 1;
            return entry(None);
        };
        let role = shape.role();
        if !report.count_record(role, filter) {
            return entry(None);
        }
        let mut text = Text::new(arena);
        let content = match shape {
            Shape::Prompt if ty == "queue-operation" => l.content,
            Shape::System if ty == "system" => l.content,
            _ => m.content,
        };
        let (mut tool_call_id, mut is_error) = (None, None);
        blocks(&mut text, content, &mut tool_call_id, &mut is_error);
        if l.is_api_error && shape == Shape::Assistant {
            // Its message: `error` as a string (`rate_limit`), or an
            // object's `message`.
            let message = l
                .error
                .and_then(|v| as_str(v).or_else(|| Fields::of(v).str("message")));
            text.error(message);
        }
        let (text, kinds) = text.finish();
        let session = l.session_id.unwrap_or(&self.header.id);
        let key = match l.uuid {
            Some(uuid) => bumpalo::format!(in arena, "{}:{}", session, uuid),
            None => bumpalo::format!(in arena, "{}:{}:L{}", session, self.stem, pos.line),
        };
        let assistant = shape == Shape::Assistant;
        entry(Some(Record {
            role,
            text,
            // A line without its own: the one in force.
            project: match l.cwd {
                Some(cwd) => cwd,
                None => arena.alloc_str(&self.cwd.borrow()),
            },
            session,
            key: key.into_bump_str(),
            source: &self.source,
            id: l.uuid,
            parent_id: l.parent_uuid,
            line: pos.line,
            byte: pos.byte,
            entry: ty,
            message_role: m.role,
            kinds,
            timestamp: l.timestamp.and_then(parse_iso_millis),
            provider: None,
            model: m.model,
            usage: if assistant {
                m.usage.and_then(|u| usage_of(u, l.cost_usd))
            } else {
                None
            },
            stop_reason: m.stop_reason,
            tool_name: None,
            tool_call_id,
            is_error,
            custom_type: if ty == "system" { l.subtype } else { None },
            command: None,
            exit_code: None,
            repaired,
            agent_id: l.agent_id,
            message_id: if assistant { m.id } else { None },
            request_id: if assistant { l.request_id } else { None },
            provisional: assistant && m.stop_reason_null,
        }))
    }
}

/// Flattens a `content` value: a string as is; blocks in order (`text`,
/// `thinking`, `tool_use` as a tool call, `image` as its placeholder, the
/// content of each `tool_result`), kinds under our schema's names. The
/// first `tool_result`'s `tool_use_id` goes to `tool_call_id`; `is_error`
/// is whether any `tool_result` says so, when one has the field.
fn blocks<'a>(
    text: &mut Text<'a>,
    content: Option<&[Node<'a>]>,
    tool_call_id: &mut Option<&'a str>,
    is_error: &mut Option<bool>,
) {
    let Some(v) = content else { return };
    if let Some(s) = as_str(v) {
        text.kind("text");
        text.push(s);
        return;
    }
    for block in elements(v) {
        let f = Fields::of(block);
        let Some(kind) = f.str("type") else { continue };
        match kind {
            "text" => {
                text.kind("text");
                text.push(f.str("text").unwrap_or(""));
            }
            "thinking" => {
                text.kind("thinking");
                text.push(f.str("thinking").unwrap_or(""));
            }
            // Its text is encrypted: the kind only.
            "redacted_thinking" => text.kind("thinking"),
            "tool_use" | "server_tool_use" => {
                text.kind("toolCall");
                text.call(f.str("name").unwrap_or(""), f.get("input"));
            }
            "image" => {
                text.kind("image");
                let src = Fields::of(f.get("source").unwrap_or(&[]));
                text.image(src.str("media_type"), src.str("data"));
            }
            "tool_result" => {
                if tool_call_id.is_none() {
                    *tool_call_id = f.str("tool_use_id");
                }
                if let Some(e) = f.get("is_error").and_then(as_bool) {
                    *is_error = Some(is_error.unwrap_or(false) || e);
                }
                let (mut no_id, mut no_err) = (None, None);
                blocks(text, f.get("content"), &mut no_id, &mut no_err);
            }
            other => text.kind(other),
        }
    }
}

// ---------------------------------------------------------------------------
// Usage, as ccusage reads it

/// The session a file's path names, as ccusage names it for lines without
/// a `sessionId`: below the `projects/` folder, `<project>/<stem>.jsonl`
/// is `<stem>`, `.../<session>/subagents/<file>.jsonl` is `<session>`, and
/// anything else the name of the file's folder.
fn path_session(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let rel = match parts.iter().position(|p| p == "projects") {
        Some(i) => &parts[i + 1..],
        None => &parts[..],
    };
    let stem = rel
        .last()
        .and_then(|n| n.strip_suffix(".jsonl"))
        .filter(|s| !s.is_empty());
    match (rel.len(), stem) {
        (2, Some(s)) => s.to_owned(),
        (n, _) if n >= 4 && rel[n - 2] == "subagents" => rel[n - 3].clone(),
        (n, _) if n >= 2 => rel[n - 2].clone(),
        _ => "unknown".to_owned(),
    }
}

/// Keys that ccusage refuses a whole line for when one is written `:null`
/// (its own byte scan, repeated here so the same lines count).
const NULL_REFUSED: [&str; 11] = [
    "id",
    "cwd",
    "model",
    "speed",
    "costUSD",
    "version",
    "sessionId",
    "requestId",
    "isApiErrorMessage",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
];

/// ccusage's scan for `"<key>":null` with a refused key.
fn null_refused(line: &[u8]) -> bool {
    let mut offset = 0;
    while let Some(rel) = memchr::memmem::find(&line[offset..], b":null") {
        let at = offset + rel;
        let mut end = at.saturating_sub(1);
        if line.get(end) != Some(&b'"') {
            while end > 0 && line[end] != b'"' {
                end -= 1;
            }
        }
        if line.get(end) == Some(&b'"') {
            let mut start = end.saturating_sub(1);
            while start > 0 && line[start] != b'"' {
                start -= 1;
            }
            if line.get(start) == Some(&b'"') {
                let key = std::str::from_utf8(&line[start + 1..end]).unwrap_or("");
                if NULL_REFUSED.contains(&key) {
                    return true;
                }
            }
        }
        offset = at + b":null".len();
    }
    false
}

fn is_null(v: &[Node<'_>]) -> bool {
    matches!(v.first(), Some(Node::Static(StaticNode::Null)))
}

/// An unsigned JSON integer (serde's `u64`: not a float).
fn int(v: &[Node<'_>]) -> Option<u64> {
    match v.first()? {
        Node::Static(StaticNode::U64(n)) => Some(*n),
        Node::Static(StaticNode::I64(n)) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// A field's value (looked up already) that is absent, null or a string:
/// `Ok(the string)`; `Err` for another type (serde refuses the line).
fn opt_str<'a>(v: Option<&[Node<'a>]>) -> Result<Option<&'a str>, ()> {
    match v {
        None => Ok(None),
        Some(v) if is_null(v) => Ok(None),
        Some(v) => as_str(v).map(Some).ok_or(()),
    }
}

/// `version` starts like semver: digits, `.`, digits, `.`, a digit.
fn semver_prefix(v: &str) -> bool {
    let b = v.as_bytes();
    let digits = |i: &mut usize| {
        let s = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > s
    };
    let mut i = 0;
    if !digits(&mut i) || b.get(i) != Some(&b'.') {
        return false;
    }
    i += 1;
    if !digits(&mut i) || b.get(i) != Some(&b'.') {
        return false;
    }
    b.get(i + 1).is_some_and(u8::is_ascii_digit)
}

/// A line's usage envelope as ccusage's `claude daily` reads one: the
/// line's own (`timestamp`, `message`, `version`, `sessionId`, `costUSD`,
/// `requestId`, `isSidechain`), else that of an agent progress line
/// (`data.message`, without `version` and `sessionId`).
struct Envelope<'t, 'a> {
    timestamp: &'a str,
    message: Fields<'t, 'a>,
    usage: Fields<'t, 'a>,
    version: Option<&'a str>,
    session_id: Option<&'a str>,
    cost: Option<f64>,
    request_id: Option<&'a str>,
    sidechain: bool,
}

fn envelope<'t, 'a>(f: Fields<'t, 'a>, direct: bool) -> Option<Envelope<'t, 'a>> {
    // One pass over the line's fields and one over its message's, the
    // first of each name counting (as `Fields::get` finds it); any check
    // failing gives None, so their order does not matter.
    let [timestamp, message, version, session_id, cost, sidechain, request_id] =
        f.first_of(|k| match k {
            "timestamp" => Some(0),
            "message" => Some(1),
            "version" => Some(2),
            "sessionId" => Some(3),
            "costUSD" => Some(4),
            "isSidechain" => Some(5),
            "requestId" => Some(6),
            _ => None,
        });
    let timestamp = as_str(timestamp?)?;
    let message = message?;
    if !matches!(message.first(), Some(Node::Object { .. })) {
        return None;
    }
    let message = Fields::of(message);
    let [usage, model, id] = message.first_of(|k| match k {
        "usage" => Some(0),
        "model" => Some(1),
        "id" => Some(2),
        _ => None,
    });
    let usage = usage?;
    if !matches!(usage.first(), Some(Node::Object { .. })) {
        return None;
    }
    opt_str(model).ok()?;
    opt_str(id).ok()?;
    let (version, session_id) = if direct {
        (opt_str(version).ok()?, opt_str(session_id).ok()?)
    } else {
        (None, None)
    };
    let cost = match cost {
        None => None,
        Some(v) if is_null(v) => None,
        Some(v) => Some(as_f64(v)?),
    };
    let sidechain = match sidechain {
        None => false,
        Some(v) if is_null(v) => false,
        Some(v) => as_bool(v)?,
    };
    Some(Envelope {
        timestamp,
        message,
        usage: Fields::of(usage),
        version,
        session_id,
        cost,
        request_id: opt_str(request_id).ok()?,
        sidechain,
    })
}

impl ClaudeContext {
    /// The usage a line holds, when ccusage counts it: a line whose bytes
    /// hold `"usage":{`, no refused `:null`, that reads as a usage envelope
    /// with a valid timestamp, a semver-like `version` and no empty ids or
    /// model (ccusage's checks, whatever the line's `type`).
    fn response_of(&self, nodes: &[Node<'_>], raw: &[u8]) -> Option<crate::usage::Response> {
        let f = Fields::of(nodes);
        // The envelope first, from the tape: only a line that has one is
        // scanned for what ccusage's reading of the raw line refuses (most
        // lines have no usage; a scan of every line's bytes was 2.5% of a
        // run).
        let e = match envelope(f, true) {
            Some(e) => e,
            None => envelope(
                Fields::of(Fields::of(f.get("data")?).get("message")?),
                false,
            )?,
        };
        if memchr::memmem::find(raw, b"\"usage\":{").is_none() || null_refused(raw) {
            return None;
        }
        let read = |e: Envelope<'_, '_>| -> Option<crate::usage::Response> {
            let u = e.usage;
            let tokens = |k: &str| match u.get(k) {
                None => Some(0),
                Some(v) => int(v),
            };
            let (input, output) = (int(u.get("input_tokens")?)?, int(u.get("output_tokens")?)?);
            let (cache_write, cache_read) = (
                tokens("cache_creation_input_tokens")?,
                tokens("cache_read_input_tokens")?,
            );
            let speed = match u.get("speed") {
                None => None,
                Some(v) if is_null(v) => None,
                Some(v) => Some(as_str(v).filter(|s| matches!(*s, "standard" | "fast"))?),
            };
            let (cache_write, cache_write_1h) = match u.get("cache_creation") {
                None => (cache_write, 0),
                Some(v) if is_null(v) => (cache_write, 0),
                Some(v) if matches!(v.first(), Some(Node::Object { .. })) => {
                    let c = Fields::of(v);
                    let part = |k: &str| match c.get(k) {
                        None => Some(0),
                        Some(v) => int(v),
                    };
                    let hour = part("ephemeral_1h_input_tokens")?;
                    (
                        part("ephemeral_5m_input_tokens")?.saturating_add(hour),
                        hour,
                    )
                }
                Some(_) => return None,
            };
            let time = parse_iso_millis(e.timestamp)?;
            if e.version.is_some_and(|v| !semver_prefix(v)) {
                return None;
            }
            let model = e.message.str("model");
            let id = e.message.str("id");
            if [e.session_id, e.request_id, id, model].contains(&Some("")) {
                return None;
            }
            let model = match model {
                Some("<synthetic>") | None => None,
                Some(m) if speed == Some("fast") => Some(format!("{m}-fast")),
                Some(m) => Some(m.to_owned()),
            };
            let usage = Usage {
                input,
                output,
                cache_read,
                cache_write,
                total_tokens: [output, cache_read, cache_write]
                    .into_iter()
                    .fold(input, u64::saturating_add),
                cost: e.cost.unwrap_or(0.0),
            };
            Some(crate::usage::Response {
                message_id: id.map(str::to_owned),
                request_id: e.request_id.map(str::to_owned),
                session: e.session_id.unwrap_or(&self.path_session).to_owned(),
                sidechain: e.sidechain,
                speed: speed.is_some(),
                model,
                project: self.header.cwd.clone(),
                usage,
                time: Some(time),
                cache_write_1h,
            })
        };
        read(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cwd in force at byte `at` (a line start) of `text`, as a naive
    /// reading says: the last line before it that is an object with a
    /// string `cwd` (serde_json: the last of duplicate keys), the first
    /// line after its byte-order mark; else `fallback`.
    fn naive(text: &[u8], at: usize, fallback: &str) -> String {
        let mut cwd = None;
        for (i, line) in text[..at].split(|b| *b == b'\n').enumerate() {
            let line = if i == 0 {
                line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
            } else {
                line
            };
            if let Ok(serde_json::Value::Object(o)) = serde_json::from_slice(line) {
                if let Some(serde_json::Value::String(s)) = o.get("cwd") {
                    cwd = Some(s.clone());
                }
            }
        }
        cwd.unwrap_or_else(|| fallback.to_owned())
    }

    /// At every line start, [`Format::context_before`] (reading back, in
    /// chunks a long line spans) and the running context of a source that
    /// read the file from its start to there say what the naive reading
    /// says: a byte-order mark, blank lines, a damaged line naming a cwd,
    /// a cwd only inside a nested object, an escaped cwd, a cwd change.
    #[test]
    fn looking_back_finds_what_a_read_from_the_start_saw() {
        let long = "l".repeat(3 * LOOK_BACK_FIRST);
        let text = [
            "\u{feff}{\"type\":\"queue-operation\",\"operation\":\"remove\",\"sessionId\":\"s\",\"content\":\"q0\"}".to_owned(),
            r#"{"type":"user","uuid":"u1","sessionId":"s","cwd":"/a","message":{"role":"user","content":"x"}}"#.to_owned(),
            String::new(),
            r#"{"type":"user","uuid":"u2","cwd":"/damaged","#.to_owned(),
            r#"{"type":"queue-operation","operation":"remove","sessionId":"s","content":"q1"}"#.to_owned(),
            r#"{"type":"assistant","uuid":"a1","message":{"role":"assistant","content":[{"type":"tool_use","name":"Bash","input":{"cwd":"/nested"}}]}}"#.to_owned(),
            r#"{"type":"user","uuid":"u3","cwd":"/caf\u00e9","message":{"role":"user","content":"y"}}"#.to_owned(),
            format!(r#"{{"type":"user","uuid":"u4","cwd":"/b","message":{{"role":"user","content":"{long}"}}}}"#),
            format!(r#"{{"type":"queue-operation","operation":"remove","sessionId":"s","content":"{long}"}}"#),
            r#"{"type":"queue-operation","operation":"remove","sessionId":"s","content":"q2"}"#.to_owned(),
        ]
        .join("\n")
            + "\n";
        let bytes = text.as_bytes();
        let dir =
            std::env::temp_dir().join(format!("mem-ingest-claude-look-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let opts = SourceOptions::new();
        let mut src = Claude.open(Input::Bytes(bytes), &path, &opts).unwrap();
        let header = src.header().unwrap().clone();
        assert_eq!(header.cwd, "/a");
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
        for &at in &starts[..starts.len() - 1] {
            let want = naive(bytes, at, &header.cwd);
            let found = Claude
                .context_before(&file, &header, at as u64, None, &opts)
                .unwrap()
                .unwrap();
            assert_eq!(
                decode_cwd(&found),
                Some(want.as_str()),
                "looking back from {at}"
            );
        }
        // Read from the start: after each entry, the context at its end.
        let mut seen = 0;
        while src.next_entry().unwrap().is_some() {
            let at = src.position().byte as usize;
            let want = naive(bytes, at, &header.cwd);
            assert_eq!(
                decode_cwd(&src.running_context()),
                Some(want.as_str()),
                "read to {at}"
            );
            seen += 1;
        }
        assert_eq!(seen, 8);
        // Resumed with a context, a line without a cwd takes it; with none
        // (a state saved before there was one), the header's.
        let last = starts[starts.len() - 2];
        for (context, want) in [(encode_cwd("/saved"), "/saved"), (Vec::new(), "/a")] {
            let mut src = Claude.resume(
                Input::Bytes(&bytes[last..]),
                &path,
                &header,
                &context,
                last as u64,
                9,
                &opts,
            );
            let r = src.next_record().unwrap().unwrap();
            assert_eq!((r.line, r.text, r.project), (10, "q2", want));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
