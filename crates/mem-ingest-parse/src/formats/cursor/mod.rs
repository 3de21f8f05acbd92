//! The Cursor CLI's transcripts (`cursor-agent`): the only module that
//! knows their shape (see `docs/cursor.md` for the mapping, and
//! `shared/spec/cursor-format.md`, sections 1 and 8, for the format).
//!
//! Under `projects/<slug>/agent-transcripts/` of `$CURSOR_CONFIG_DIR`
//! (else `~/.cursor`):
//! - `<chatId>/<chatId>.jsonl`: a chat, nested layout;
//! - `<chatId>/subagents/<id>.jsonl`: a subagent's chat, whose lineage is
//!   its parent `<chatId>`'s;
//! - `<chatId>.jsonl` or `<chatId>.txt`: the older flat layout (a `.jsonl`
//!   wins over the `.txt` of the same chat, flat or nested).
//!
//! A JSONL transcript is appended to, one message a line,
//! `{"role", "message": {"content": [blocks]}}`, and control lines without
//! a `role` (`{"type":"turn_ended"}`). It has no header line, no time, no
//! model, no cwd: the file's [`Header`] is its stem (the chat id
//! `cursor-agent --resume` takes), the cwd decoded from the `<slug>`
//! folder ([`decode_slug`]), no time. The `.txt` transcripts are plain
//! text, read whole as documents ([`txt`]).
//!
//! This crate does not register the format: Cursor is one agent
//! (`--agent cursor`), whose IDE store is SQLite and lives in
//! `mem-ingest-db`; that crate's Cursor format delegates the transcripts
//! here. [`CursorCli`] alone is a complete format of the transcripts, for
//! a library that reads no SQLite.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use bumpalo::Bump;
use simd_json::Node;

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{
    as_bool, elements, fingerprint, is_blank, write_json, Fields, JsonParser, PrefixLines,
};
use crate::line::{Entry, Header, LinePos, MapLine, Parent, Text};
use crate::line_reader::bom_len;
use crate::record::{Record, Role, RoleFilter};
use crate::report::{Report, SkipReason};
use crate::source::{
    headerless_body, open_headerless, record_source, resume_headerless, FileLines, LineDriver,
    Position, RecordSource, SourceOptions,
};

pub mod txt;

/// How much of a file's start its [`Header`] is built from (bytes).
pub const PREFIX: usize = 64 << 10;

/// How much of a JSONL transcript's start (after a byte-order mark) its
/// header's fingerprint holds (bytes): a file whose first 4 KiB changed
/// was rewritten, and is read again from its start (the engine compares
/// the header it saved with the one the file gives now). A file shorter
/// than that is held whole, so one that grew is read again from its start
/// too: at most 4 KiB read again, and what was emitted is not emitted
/// again; a rewrite after the first 4 KiB is not seen.
pub const START_BYTES: usize = 4 << 10;

/// The tag of a JSONL transcript's header fingerprint.
const TAG: &[u8] = b"cursor-cli-file";

/// The Cursor CLI's transcripts (see the module's docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct CursorCli;

/// Where a transcript sits in `agent-transcripts/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// `agent-transcripts/<chatId>.jsonl` (or `.txt`).
    Flat,
    /// `agent-transcripts/<chatId>/<chatId>.jsonl`.
    Nested,
    /// `agent-transcripts/<chatId>/subagents/<id>.jsonl`: the parent chat
    /// id.
    Subagent(String),
}

fn name_of(p: Option<&Path>) -> Option<&str> {
    p.and_then(Path::file_name).and_then(|n| n.to_str())
}

/// `path` made absolute (against the current folder, without resolving
/// links or `..`): a path named relative (`.`, `agent-transcripts`,
/// `subagents/<id>.jsonl`) keeps the folders above it that its layout and
/// slug are read from. A path that cannot be made absolute (no current
/// folder) stays as it is.
fn absolute(path: &Path) -> Cow<'_, Path> {
    if path.is_absolute() {
        return Cow::Borrowed(path);
    }
    std::path::absolute(path).map_or(Cow::Borrowed(path), Cow::Owned)
}

/// Where `path` sits in an `agent-transcripts/` folder, by its name alone
/// (nothing is opened; a relative path made [`absolute`] first): a
/// `.jsonl` in one of the three layouts, or a `.txt` in the flat one;
/// `None` for any other path.
pub fn layout(path: &Path) -> Option<Layout> {
    let path = &*absolute(path);
    let ext = path.extension()?.to_str()?;
    let stem = path.file_stem()?.to_str()?;
    if ext != "jsonl" && ext != "txt" {
        return None;
    }
    let parent = path.parent();
    let up = |n: usize| {
        let mut p = parent;
        for _ in 0..n {
            p = p.and_then(Path::parent);
        }
        p
    };
    if name_of(parent) == Some("agent-transcripts") {
        return Some(Layout::Flat);
    }
    if ext != "jsonl" {
        return None;
    }
    if name_of(parent) == Some(stem) && name_of(up(1)) == Some("agent-transcripts") {
        return Some(Layout::Nested);
    }
    if name_of(parent) == Some("subagents") && name_of(up(2)) == Some("agent-transcripts") {
        return name_of(up(1)).map(|c| Layout::Subagent(c.to_owned()));
    }
    None
}

/// Whether a file met in a folder is a Cursor CLI transcript: one of the
/// [`layout`]s, and a flat `.txt` only when no `.jsonl` of its chat is
/// there, flat beside it (`<id>.jsonl`) or nested (`<id>/<id>.jsonl`):
/// the `.jsonl` wins.
pub fn is_transcript(path: &Path) -> bool {
    match layout(path) {
        None => false,
        Some(_) if is_txt(path) => !has_jsonl(path),
        Some(_) => true,
    }
}

/// Whether the chat of a flat `<id>.txt` has a `.jsonl`: `<id>.jsonl`
/// beside it, or `<id>/<id>.jsonl`.
fn has_jsonl(txt: &Path) -> bool {
    let flat = txt.with_extension("jsonl");
    if flat.is_file() {
        return true;
    }
    match (txt.parent(), txt.file_stem(), flat.file_name()) {
        (Some(dir), Some(stem), Some(name)) => dir.join(stem).join(name).is_file(),
        _ => false,
    }
}

/// Whether `path` is an older plain-text transcript (read as a document).
pub fn is_txt(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "txt")
}

/// The Cursor CLI's `projects/` folders that exist, and every place
/// tried: `$CURSOR_CONFIG_DIR/projects`, else `~/.cursor/projects`.
pub fn default_archives() -> (Vec<PathBuf>, Vec<String>) {
    let base = match std::env::var_os("CURSOR_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cursor")),
    };
    let Some(dir) = base.map(|b| b.join("projects")) else {
        return (
            Vec::new(),
            vec!["~/.cursor/projects (HOME is not set)".to_owned()],
        );
    };
    let tried = vec![dir.display().to_string()];
    if dir.is_dir() {
        (vec![dir], tried)
    } else {
        (Vec::new(), tried)
    }
}

/// The most candidate paths [`decode_slug`] tries before it gives up on
/// the folders of this machine and decodes naively (unsaid: the cwd is a
/// header's, which has no place for a warning; `docs/cursor.md` says so).
const SLUG_TRIES: usize = 4096;

/// The cwd a `projects/<slug>` folder names. The CLI writes the absolute
/// path with its leading `/` dropped and every `/` replaced by `-`, which
/// loses the `-`s of folder names: the decode walks the folders of this
/// machine, at each `-` trying a `/` first (when the path so far is a
/// folder) and else a `-` kept literal, and takes the first whole path
/// that is a folder here; when none is (the archive of another machine,
/// or the project was removed), every `-` is a `/` (the naive decode).
/// An empty slug is `""` (unknown).
pub fn decode_slug(slug: &str) -> String {
    let slug = slug.strip_prefix('-').unwrap_or(slug);
    if slug.is_empty() {
        return String::new();
    }
    let parts: Vec<&str> = slug.split('-').collect();
    let mut tries = 0;
    let mut cur = format!("/{}", parts[0]);
    if let Some(found) = walk(&mut cur, &parts[1..], &mut tries) {
        return found;
    }
    format!("/{}", slug.replace('-', "/"))
}

/// The most slugs [`project_of`] keeps decoded.
const SLUGS_KEPT: usize = 4096;

/// [`decode_slug`], once per slug in a process: every transcript of a
/// project folder gets the same cwd in a run (and in every pass of
/// `--follow`), and the folders are walked once per project, not once
/// per file opened.
fn project_of(slug: &str) -> String {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static KNOWN: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let known = KNOWN.get_or_init(Mutex::default);
    if let Some(cwd) = known.lock().unwrap_or_else(|e| e.into_inner()).get(slug) {
        return cwd.clone();
    }
    let cwd = decode_slug(slug);
    let mut k = known.lock().unwrap_or_else(|e| e.into_inner());
    if k.len() >= SLUGS_KEPT {
        k.clear();
    }
    k.insert(slug.to_owned(), cwd.clone());
    cwd
}

/// [`decode_slug`]'s walk from `cur` over the `rest` of the parts.
fn walk(cur: &mut String, rest: &[&str], tries: &mut usize) -> Option<String> {
    *tries += 1;
    if *tries > SLUG_TRIES {
        return None;
    }
    let Some((next, rest)) = rest.split_first() else {
        return Path::new(cur.as_str()).is_dir().then(|| cur.clone());
    };
    let len = cur.len();
    for sep in ['/', '-'] {
        if sep == '/' && !Path::new(cur.as_str()).is_dir() {
            continue;
        }
        cur.push(sep);
        cur.push_str(next);
        let found = walk(cur, rest, tries);
        cur.truncate(len);
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The slug folder of a transcript: the parent of its `agent-transcripts`
/// folder (a relative path made [`absolute`] first).
fn slug_of(path: &Path) -> Option<String> {
    let path = absolute(path);
    let at = path
        .ancestors()
        .skip(1)
        .find(|p| p.file_name().is_some_and(|n| n == "agent-transcripts"))?;
    name_of(at.parent()).map(str::to_owned)
}

/// A transcript's header: its stem as the id, the cwd its slug folder
/// names ([`decode_slug`], once per slug in a process; `""` outside an
/// `agent-transcripts` folder), a subagent's
/// parent chat, no time (the file has none); `start` goes into the
/// fingerprint (a JSONL file's first [`START_BYTES`]).
pub fn header_of(path: &Path, tag: &[u8], start: &[u8]) -> Header {
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = match layout(path) {
        Some(Layout::Subagent(chat)) => Some(Parent::Session(chat)),
        _ => None,
    };
    Header {
        id,
        cwd: slug_of(path).map(|s| project_of(&s)).unwrap_or_default(),
        version: 0,
        timestamp: None,
        parent,
        fingerprint: fingerprint(&[tag, crate::sys::os_bytes(path.as_os_str()), start]),
    }
}

/// The first bytes of `body` (the file after its byte-order mark), at
/// most [`START_BYTES`]: `None` while the prefix is shorter and not the
/// whole file (`whole`).
fn first_bytes(body: &[u8], whole: bool) -> Option<&[u8]> {
    let n = body.len().min(START_BYTES);
    (whole || n == START_BYTES).then(|| &body[..n])
}

/// The `<user_query>` tags the CLI wraps a prompt in, and the newline
/// just inside each, taken out; the rest of the text as written.
pub fn strip_user_query<'a>(t: &'a str, arena: &'a Bump) -> &'a str {
    const OPEN: &str = "<user_query>";
    const CLOSE: &str = "</user_query>";
    if !t.contains(OPEN) && !t.contains(CLOSE) {
        return t;
    }
    let mut out = bumpalo::collections::String::with_capacity_in(t.len(), arena);
    let mut rest = t;
    while !rest.is_empty() {
        let open = rest.find(OPEN);
        let close = rest.find(CLOSE);
        match (open, close) {
            (Some(o), c) if c.is_none_or(|c| o < c) => {
                out.push_str(&rest[..o]);
                rest = &rest[o + OPEN.len()..];
                rest = rest.strip_prefix('\n').unwrap_or(rest);
            }
            (_, Some(c)) => {
                let before = &rest[..c];
                out.push_str(before.strip_suffix('\n').unwrap_or(before));
                rest = &rest[c + CLOSE.len()..];
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out.into_bump_str()
}

impl Format for CursorCli {
    fn name(&self) -> &'static str {
        "cursor"
    }

    /// [`is_transcript`].
    fn is_session_file(&self, path: &Path) -> bool {
        is_transcript(path)
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = default_archives();
        if found.is_empty() {
            return Err(format!(
                "no Cursor CLI archive: no folder at {}",
                tried.join(", ")
            ));
        }
        Ok(found)
    }

    /// [`detect`].
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        detect(prefix, whole)
    }

    /// A file no format's content detection claims (its first line damaged
    /// or cut, a `.txt`) is Cursor's by its place: a [`layout`] of an
    /// `agent-transcripts` folder.
    fn detect_file(&self, path: &Path, _prefix: &[u8]) -> bool {
        layout(path).is_some()
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        if is_txt(path) {
            return Ok(crate::document::open(
                &txt::Txt,
                txt::TAG,
                input,
                path,
                None,
                opts,
            ));
        }
        let driver = open_headerless(input, path, opts, PREFIX, |prefix, whole| {
            let body = headerless_body(prefix, whole)?;
            let start = first_bytes(body, whole);
            Some(CursorContext::new(
                header_of(path, TAG, start.unwrap_or(&[])),
                path,
                start.is_some(),
            ))
        })?;
        Ok(Box::new(CursorSource(driver.counting(opts))))
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
        if is_txt(path) {
            return crate::document::open(
                &txt::Txt,
                txt::TAG,
                input,
                path,
                Some((header, context)),
                opts,
            );
        }
        let ctx = CursorContext::new(header.clone(), path, true);
        let driver = resume_headerless(input, path, ctx, byte, lines_before, opts);
        Box::new(CursorSource(driver.counting(opts)))
    }

    /// An older `.txt` transcript is a document.
    fn is_document(&self, path: &Path) -> bool {
        is_txt(path)
    }

    /// A subagent's chat is its parent chat's lineage.
    fn parent(&self, header: &Header) -> Option<String> {
        header
            .parent
            .as_ref()
            .and_then(Parent::session)
            .map(|p| self.lineage(p))
    }
}

/// Whether a file's first bytes are a Cursor CLI JSONL transcript's: its
/// first line that is not blank is an object with a `role` (`user`,
/// `assistant`, `system`) and a `message` object holding `content`, and
/// none of the keys of Claude Code's envelope (`type`, `sessionId`,
/// `uuid`; Claude Code keeps the role inside `message`). A first line
/// longer than the prefix is Cursor's when it starts with `{"role":"` and
/// names `"message":{"content":`.
pub fn detect(prefix: &[u8], whole: bool) -> bool {
    crate::json::with_scratch(|json, arena| detect_with(json, arena, prefix, whole))
}

fn detect_with(json: &mut JsonParser, arena: &mut Bump, prefix: &[u8], whole: bool) -> bool {
    let mut lines = PrefixLines::new(&prefix[bom_len(prefix)..], whole);
    let line = loop {
        match lines.next() {
            Some((_, l)) if is_blank(l) => {}
            Some((_, l)) => break l,
            None => {
                let rest = lines.rest();
                return rest.starts_with(b"{\"role\":\"")
                    && memchr::memmem::find(rest, b"\"message\":{\"content\":").is_some();
            }
        }
    };
    arena.reset();
    json.parse(line, arena, |parsed| {
        let Ok((nodes, _)) = parsed else { return false };
        if !matches!(nodes.first(), Some(Node::Object { .. })) {
            return false;
        }
        let f = Fields::of(nodes);
        let message = f.get("message");
        f.str("role")
            .is_some_and(|r| matches!(r, "user" | "assistant" | "system"))
            && message.is_some_and(|m| matches!(m.first(), Some(Node::Object { .. })))
            && Fields::of(message.unwrap_or(&[])).get("content").is_some()
            && ["type", "sessionId", "uuid"]
                .iter()
                .all(|k| f.get(k).is_none())
    })
}

/// A Cursor CLI source.
struct CursorSource<'d>(LineDriver<FileLines<'d>, CursorContext>);

record_source!(trait impl['d] CursorSource<'d>);

/// What the records of one transcript share.
#[derive(Debug)]
pub struct CursorContext {
    header: Header,
    /// `cursor:<file stem>`.
    source: String,
    /// A subagent's id (its file stem), for its records' `agent_id`.
    agent: Option<String>,
    /// The header's fingerprint holds the file's first bytes.
    found: bool,
}

impl CursorContext {
    fn new(header: Header, path: &Path, found: bool) -> Self {
        let agent = matches!(layout(path), Some(Layout::Subagent(_))).then(|| header.id.clone());
        CursorContext {
            source: format!("cursor:{}", header.id),
            header,
            agent,
            found,
        }
    }
}

/// A block's tool result content as text: a string as it is, text blocks
/// joined with `\n`, anything else as compact JSON.
fn result_text<'a>(v: &[Node<'a>], arena: &'a Bump) -> &'a str {
    if let Some(s) = crate::json::as_str(v) {
        return s;
    }
    if matches!(v.first(), Some(Node::Array { .. })) {
        let mut s = bumpalo::collections::String::new_in(arena);
        for b in elements(v) {
            let t = crate::json::as_str(b).or_else(|| Fields::of(b).str("text"));
            if let Some(t) = t {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(t);
            }
        }
        return s.into_bump_str();
    }
    let mut s = bumpalo::collections::String::new_in(arena);
    write_json(v, &mut s);
    s.into_bump_str()
}

/// What a message's content gives a record.
struct Body<'a> {
    text: &'a str,
    kinds: &'a [&'a str],
    tool_name: Option<&'a str>,
    tool_call_id: Option<&'a str>,
    is_error: Option<bool>,
}

/// The record of a message's `content` (a string, or blocks): text (a
/// user's `<user_query>` tags taken out), `thinking`, tool calls
/// (`tool_use`, `tool_call`, `tool-call`: `<name> <input JSON>`), tool
/// results (`tool_result`, `tool-result`), and an unknown block's `text`
/// under its own type as kind.
fn body<'a>(content: Option<&[Node<'a>]>, user: bool, arena: &'a Bump) -> Body<'a> {
    let mut text = Text::new(arena);
    let mut b = Body {
        text: "",
        kinds: &[],
        tool_name: None,
        tool_call_id: None,
        is_error: None,
    };
    let plain = |t: &'a str| if user { strip_user_query(t, arena) } else { t };
    match content {
        Some(v) if crate::json::as_str(v).is_some() => {
            text.kind("text");
            text.push_decoded(plain(crate::json::as_str(v).unwrap_or("")));
        }
        Some(v) => {
            for block in elements(v) {
                let f = Fields::of(block);
                let ty = f.str("type").unwrap_or("");
                match ty {
                    "text" => {
                        text.kind("text");
                        text.push_decoded(plain(f.str("text").unwrap_or("")));
                    }
                    "thinking" | "reasoning" => {
                        text.kind("thinking");
                        let t = f.str("thinking").or_else(|| f.str("text"));
                        text.push_decoded(t.unwrap_or(""));
                    }
                    "tool_use" | "tool_call" | "tool-call" => {
                        text.kind("toolCall");
                        let name = f.str("name").or_else(|| f.str("toolName"));
                        let args = f
                            .get("input")
                            .or_else(|| f.get("arguments"))
                            .or_else(|| f.get("args"));
                        text.call(name.unwrap_or(""), args);
                        if b.tool_name.is_none() && b.tool_call_id.is_none() {
                            b.tool_name = name;
                            b.tool_call_id = f.str("id").or_else(|| f.str("toolCallId"));
                        }
                    }
                    "tool_result" | "tool-result" => {
                        text.kind("toolResult");
                        let out = f
                            .get("content")
                            .or_else(|| f.get("output"))
                            .or_else(|| f.get("result"));
                        text.push_decoded(out.map_or("", |o| result_text(o, arena)));
                        if b.tool_call_id.is_none() && b.tool_name.is_none() {
                            b.tool_call_id = f
                                .str("tool_use_id")
                                .or_else(|| f.str("toolCallId"))
                                .or_else(|| f.str("id"));
                            b.tool_name = f.str("name").or_else(|| f.str("toolName"));
                        }
                        if let Some(e) = f.get("is_error").and_then(as_bool) {
                            b.is_error = Some(b.is_error.unwrap_or(false) || e);
                        }
                    }
                    _ => {
                        // A block of a type not known here: its kind, and
                        // its text where it has one.
                        if !ty.is_empty() {
                            text.kind(ty);
                        }
                        if let Some(t) = f.str("text") {
                            text.push_decoded(t);
                        }
                    }
                }
            }
        }
        None => {}
    }
    let (t, k) = text.finish();
    b.text = t;
    b.kinds = k;
    b
}

/// Whether a user message's blocks hold a tool result (its record is a
/// `tool_result`).
fn holds_result(content: Option<&[Node<'_>]>) -> bool {
    content.into_iter().flat_map(elements).any(|b| {
        Fields::of(b)
            .str("type")
            .is_some_and(|t| matches!(t, "tool_result" | "tool-result"))
    })
}

impl MapLine for CursorContext {
    fn header(&self) -> &Header {
        &self.header
    }

    fn header_found(&self) -> bool {
        self.found
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
        if !matches!(nodes.first(), Some(Node::Object { .. })) {
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        }
        let f = Fields::of(nodes);
        // No ids in the file: a line is known by its place and bytes
        // (two equal lines of one chat are two messages).
        let entry = |record| {
            Some(Entry {
                fingerprint: fingerprint(&[
                    b"cursor-cli",
                    self.header.id.as_bytes(),
                    &pos.line.to_le_bytes(),
                    raw,
                ]),
                line: pos.line,
                byte: pos.byte,
                record,
                revision: false,
                parent_session: None,
            })
        };
        let message = f.get("message");
        let Some(written) = f.str("role") else {
            if f.get("role").is_some() {
                // A `role` that is not a string: no message, no control
                // line.
                report.repaired -= u64::from(repaired);
                report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
                return None;
            }
            // A control line (`turn_ended`): an entry without a record.
            report.entries.add(f.str("type").unwrap_or("control"), 1);
            report.no_record += 1;
            return entry(None);
        };
        if matches!(written, "user" | "assistant" | "system")
            && !message.is_some_and(|m| matches!(m.first(), Some(Node::Object { .. })))
        {
            // A message line without its `message` object: nothing to
            // read (not an empty record).
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        }
        report.entries.add(written, 1);
        let content = Fields::of(message.unwrap_or(&[])).get("content");
        let role = match written {
            "user" if holds_result(content) => Role::ToolResult,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            other => {
                report.add_unknown_role(other);
                report.no_record += 1;
                return entry(None);
            }
        };
        if !report.count_record(role, filter) {
            return entry(None);
        }
        let b = body(content, role == Role::User, arena);
        let session = &self.header.id;
        let key = bumpalo::format!(in arena, "{}:L{}", session, pos.line);
        entry(Some(Record {
            role,
            text: b.text,
            project: &self.header.cwd,
            session,
            key: key.into_bump_str(),
            source: &self.source,
            id: None,
            parent_id: None,
            line: pos.line,
            byte: pos.byte,
            entry: written,
            message_role: Some(written),
            kinds: b.kinds,
            timestamp: None,
            provider: None,
            model: if role == Role::Assistant {
                f.str("model")
            } else {
                None
            },
            usage: None,
            stop_reason: None,
            tool_name: b.tool_name,
            tool_call_id: b.tool_call_id,
            is_error: b.is_error,
            custom_type: None,
            command: None,
            exit_code: None,
            repaired,
            agent_id: self.agent.as_deref(),
            message_id: None,
            request_id: None,
            provisional: false,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_query_tags_and_the_newlines_inside_them_go() {
        let a = Bump::new();
        assert_eq!(
            strip_user_query("<user_query>\nrun ls\n</user_query>", &a),
            "run ls"
        );
        assert_eq!(
            strip_user_query("<ctx>x</ctx>\n<user_query>hi</user_query> tail", &a),
            "<ctx>x</ctx>\nhi tail"
        );
        assert_eq!(strip_user_query("no tags", &a), "no tags");
        assert_eq!(strip_user_query("a </user_query>", &a), "a ");
    }

    #[test]
    fn layouts_by_name() {
        let p = |s: &str| layout(Path::new(s));
        let at = "/h/.cursor/projects/home-u-app/agent-transcripts";
        assert_eq!(p(&format!("{at}/c1.jsonl")), Some(Layout::Flat));
        assert_eq!(p(&format!("{at}/c1.txt")), Some(Layout::Flat));
        assert_eq!(p(&format!("{at}/c1/c1.jsonl")), Some(Layout::Nested));
        assert_eq!(
            p(&format!("{at}/c1/subagents/s9.jsonl")),
            Some(Layout::Subagent("c1".into()))
        );
        assert_eq!(p(&format!("{at}/c1/other.jsonl")), None);
        assert_eq!(p(&format!("{at}/c1/c1.txt")), None);
        assert_eq!(p(&format!("{at}/c1/c1.json")), None);
        assert_eq!(p("/h/.claude/projects/-home-u-app/c1.jsonl"), None);
    }

    #[test]
    fn a_slug_decodes_against_this_machines_folders() {
        let d = std::env::temp_dir().join(format!("mem-ingest-slug-{}", std::process::id()));
        let root = d.join("my-app").join("src");
        std::fs::create_dir_all(&root).unwrap();
        let base = d
            .to_str()
            .unwrap()
            .trim_start_matches('/')
            .replace('/', "-");
        // `my-app` exists: its `-` is kept.
        assert_eq!(
            decode_slug(&format!("{base}-my-app-src")),
            root.to_str().unwrap()
        );
        // Nothing of it exists here: the naive decode.
        assert_eq!(
            decode_slug("nowhere-at-all-x"),
            "/nowhere/at/all/x".to_owned()
        );
        assert_eq!(decode_slug(""), "");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A line whose `role` is not a string, and a message line without a
    /// `message` object, are counted skips at their line and byte (not a
    /// control line, not an empty record); a line without a `role` is a
    /// control line.
    #[test]
    fn a_role_not_a_string_and_a_message_without_message_are_skips() {
        use crate::source::{Input, SourceOptions};
        let lines = [
            r#"{"role":"user","message":{"content":"hi"}}"#,
            r#"{"role":5,"message":{"content":"x"}}"#,
            r#"{"role":"user"}"#,
            r#"{"role":"assistant","message":"text"}"#,
            r#"{"type":"turn_ended"}"#,
        ];
        let doc = lines.join("\n") + "\n";
        let path = Path::new("/x/projects/nowhere-here/agent-transcripts/c1/c1.jsonl");
        let mut src = CursorCli
            .open(Input::Bytes(doc.as_bytes()), path, &SourceOptions::new())
            .unwrap();
        let mut got = Vec::new();
        while let Some(r) = src.next_record().unwrap() {
            got.push((r.text.to_owned(), r.line));
        }
        assert_eq!(got, [("hi".to_owned(), 1)]);
        let r = src.report();
        assert_eq!((r.records, r.skipped, r.no_record, r.lines), (1, 3, 1, 5));
        let at = |n: usize| {
            lines[..n - 1]
                .iter()
                .map(|l| l.len() as u64 + 1)
                .sum::<u64>()
        };
        let skips: Vec<(u64, u64)> = r.skips.iter().map(|s| (s.line, s.byte)).collect();
        assert_eq!(skips, [(2, at(2)), (3, at(3)), (4, at(4))]);
    }

    /// A `/` tried first that leads nowhere: the walk comes back and keeps
    /// the `-` (`my` and `my-app/src` both folders: `my/app` is not one,
    /// so `my-app/src` is the cwd); a `-` kept where no `/` leads on
    /// (`my-app` a folder, `my-app/src-x` not one, `my-app/src/x` is one).
    #[test]
    fn a_slug_walk_comes_back_from_a_dead_end() {
        let d = std::env::temp_dir().join(format!("mem-ingest-slug-dead-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("my")).unwrap();
        std::fs::create_dir_all(d.join("my-app/src/x")).unwrap();
        let base = d
            .to_str()
            .unwrap()
            .trim_start_matches('/')
            .replace('/', "-");
        let want = |p: &str| d.join(p).to_str().unwrap().to_owned();
        assert_eq!(
            decode_slug(&format!("{base}-my-app-src")),
            want("my-app/src")
        );
        assert_eq!(
            decode_slug(&format!("{base}-my-app-src-x")),
            want("my-app/src/x")
        );
        // Nothing after `my` exists: no whole path is a folder, and every
        // `-` is a `/`, those of the folders found too (the naive decode).
        assert_eq!(
            decode_slug(&format!("{base}-my-gone-y")),
            format!("/{}/my/gone/y", base.replace('-', "/"))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn detection_takes_cursor_lines_and_not_claude_codes() {
        let cursor = b"{\"role\":\"user\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}}\n";
        assert!(detect(cursor, true));
        let claude = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"},\"sessionId\":\"s\",\"uuid\":\"u\"}\n";
        assert!(!detect(claude, true));
        let goose = b"{\"role\":\"user\",\"created\":1,\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}\n";
        assert!(!detect(goose, true));
        assert!(!detect(b"user:\nhello\n", true));
        assert!(!detect(b"", true));
        // A first line longer than the prefix.
        assert!(detect(
            b"{\"role\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"aaaa",
            false
        ));
    }
}
