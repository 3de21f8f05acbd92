//! What every format whose sessions are lines shares: a session's
//! header, the entries its lines give, the seam a format maps parsed lines
//! through ([`MapLine`]), the line parser that parses and accounts for
//! each line ([`LineParser`]), and the text a record's pieces are joined
//! into ([`Text`]).

use bumpalo::Bump;
use simd_json::Node;

use crate::json::{
    as_bool, as_text, elements, is_blank, write_json, Fields, JsonParser, ParsedLine, PushStr,
};
use crate::record::{Record, RoleFilter};
use crate::report::{Report, SkipReason};

/// The session header (first non-blank line), owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Session id (the header's `id`).
    pub id: String,
    /// The project: the header's `cwd` (empty when absent).
    pub cwd: String,
    /// Format version (`version`; 1 when absent).
    pub version: u64,
    /// The header's timestamp in Unix ms, when it parses.
    pub timestamp: Option<i64>,
    /// The session this one was forked, branched or spawned from, as the
    /// format names it: a path (pi) or a session id (Codex).
    pub parent: Option<Parent>,
    /// The header's entry fingerprint (see [`Entry::fingerprint`]), which a
    /// repeated copy of the header shares.
    pub fingerprint: u64,
}

/// A session's parent, as its format names it: the kind is part of the
/// value, so that no reader takes a path for an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    /// The parent session's file, as the machine that wrote the child
    /// spelled its path (pi's `parentSession`; v1: `branchedFrom`).
    Path(String),
    /// The parent session's id (Codex's `forked_from_id`, a subagent's
    /// `parent_thread_id`).
    Session(String),
}

impl Parent {
    /// The parent as written, whatever its kind.
    pub fn as_str(&self) -> &str {
        match self {
            Parent::Path(s) | Parent::Session(s) => s,
        }
    }

    /// The parent's path, when it is named by one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Parent::Path(p) => Some(p),
            Parent::Session(_) => None,
        }
    }

    /// The parent's session id, when it is named by one.
    pub fn session(&self) -> Option<&str> {
        match self {
            Parent::Session(id) => Some(id),
            Parent::Path(_) => None,
        }
    }
}

/// One parsed entry: every line that parses to an object with a string
/// `type`, whether it gives a record or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    /// Identity of the entry for deduplication: a hash of its type, `id`
    /// and `timestamp` as written; for entries without an id (format v1),
    /// a hash of the line's bytes. Copies of an entry (forks, a history
    /// written twice) share it.
    pub fingerprint: u64,
    /// 1-based line number.
    pub line: u64,
    /// 0-based byte offset of the line.
    pub byte: u64,
    /// The record, when the entry gives one that the role filter lets
    /// through.
    pub record: Option<Record<'a>>,
    /// The entry revises one handed out before under the same record key
    /// (a message edited after it was emitted: a document rewritten, a
    /// Gemini CLI message written again after it was final): a store
    /// updates its row by key; NDJSON and Parquet count it (the run's
    /// `updated`) and write nothing. False for every entry of lines.
    pub revision: bool,
    /// The session its session was forked from or started by (a lineage
    /// id, as [`crate::format::Format::parent`] says for a file), when
    /// it differs entry by entry: a database holds many sessions
    /// ([`crate::rows`]). `None`: the file's parent, if any.
    pub parent_session: Option<&'a str>,
}

/// A format's mapping of parsed lines, with what the records of one file
/// share (its header, its source name): [`LineParser::line`] parses and
/// accounts for a line, then hands its tape here.
pub trait MapLine {
    /// Whether the mapping reads a record's text through
    /// [`crate::json::as_text`] and [`Text`] alone, so that a source asked
    /// for raw text ([`crate::SourceOptions`]' `raw_text`) may read its
    /// lines so (default false: the text is always decoded).
    const RAW_TEXT: bool = false;

    /// The file's identity.
    fn header(&self) -> &Header;

    /// What a later read from the place after the lines mapped so far
    /// needs of them (see [`crate::RecordSource::running_context`]); empty
    /// by default.
    fn running_context(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Whether a header-less file's context, built from a prefix of its
    /// start, is what the whole prefix would build (its header line found
    /// among the prefix's complete lines), so that no more of the start is
    /// read (see `source::open_headerless`); default false: the whole
    /// prefix is read.
    fn header_found(&self) -> bool {
        false
    }

    /// Maps one parsed line: counts it in `report` (its entry type, record
    /// or not, its role) and returns the entry, `None` for a line that is
    /// not an entry (counted as skipped). `raw` is the line as read.
    #[allow(clippy::too_many_arguments)]
    fn map<'a>(
        &'a self,
        nodes: &[Node<'a>],
        raw: &[u8],
        pos: LinePos,
        repaired: bool,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Option<Entry<'a>>;

    /// The entry of a line this context knows without parsing it (a header
    /// read from the file's first lines; with `filter` building no record,
    /// a Codex line whose bytes were mapped before), counted in `report` as
    /// [`MapLine::map`] would count it; `None` (the default): the line is
    /// parsed and mapped.
    fn premapped<'a>(
        &'a self,
        _raw: &[u8],
        _pos: LinePos,
        _filter: RoleFilter,
        _report: &mut Report,
    ) -> Option<Entry<'a>> {
        None
    }
}

/// Where a line sits in its file.
#[derive(Debug, Clone, Copy)]
pub struct LinePos {
    pub line: u64,
    pub byte: u64,
    pub terminated: bool,
}

/// The first line that is not blank is not a session header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAHeader(pub String);

/// Arena bytes after which lines are first parsed into the parser's own
/// scratch buffer, so that a long run of lines without a record cannot grow
/// the arena (a record line is then parsed a second time, into the arena).
const ARENA_SOFT_LIMIT: usize = 8 << 20;

/// Line parser: simd-json scratch space reused from line to line.
pub struct LineParser {
    json: JsonParser,
    filter: RoleFilter,
}

impl std::fmt::Debug for LineParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineParser")
            .field("filter", &self.filter)
            .finish_non_exhaustive()
    }
}

impl LineParser {
    pub fn new(filter: RoleFilter) -> Self {
        let mut json = JsonParser::new();
        json.set_lean(filter.builds_none());
        LineParser { json, filter }
    }

    /// The role filter; one that builds no record parses lines with the
    /// lean parse ([`crate::json::lean`]).
    pub fn set_filter(&mut self, filter: RoleFilter) {
        self.filter = filter;
        self.json.set_lean(filter.builds_none());
    }

    /// Reads records' text raw or not (see [`JsonParser::set_raw_text`]).
    /// Its JSON parser, for a format's own parse of a header line.
    pub fn json_mut(&mut self) -> &mut JsonParser {
        &mut self.json
    }

    pub fn set_raw_text(&mut self, raw_text: bool) {
        self.json.set_raw_text(raw_text);
    }

    /// Bytes of scratch space held (see [`JsonParser::capacity`]).
    pub fn capacity(&self) -> usize {
        self.json.capacity()
    }

    /// Parses and maps one line. Counts it in `report`; returns the entry
    /// (with its record when it gives one that the role filter lets
    /// through), `None` for a blank or skipped line. With `hold_partial`, a
    /// last line without `\n` that does not parse is neither counted nor
    /// skipped: its length goes to `report.pending`.
    pub fn line<'a, C: MapLine>(
        &mut self,
        line: &'a [u8],
        pos: LinePos,
        arena: &'a Bump,
        ctx: &'a C,
        report: &mut Report,
        hold_partial: bool,
    ) -> Option<Entry<'a>> {
        self.json.forget();
        if is_blank(line) {
            return None;
        }
        report.lines += 1;
        if let Some(entry) = ctx.premapped(line, pos, self.filter, report) {
            return Some(entry);
        }
        let hold = hold_partial && !pos.terminated;
        if arena.allocated_bytes() - arena.chunk_capacity() > ARENA_SOFT_LIMIT {
            // A long run of lines without a record filled the arena: parse
            // into a short-lived one, and only a record line, counted there,
            // is parsed again into the arena (with its counts discarded).
            let local = Bump::new();
            let entry = self.parse_and_map(line, pos, &local, ctx, report, hold)?;
            if entry.record.is_none() {
                // The copy parsed is gone with `local`.
                self.json.forget();
                return Some(Entry {
                    record: None,
                    parent_session: None,
                    ..entry
                });
            }
            return self.parse_and_map(line, pos, arena, ctx, &mut Report::default(), false);
        }
        self.parse_and_map(line, pos, arena, ctx, report, hold)
    }

    /// `line`, when it is the line [`LineParser::line`] was last given and
    /// its entry came from parsing it as read: where the entry's strings
    /// are in it (see [`ParsedLine`]).
    pub fn parsed<'l>(&self, line: &'l [u8]) -> Option<ParsedLine<'l>> {
        self.json.parsed(line)
    }

    fn parse_and_map<'a, C: MapLine>(
        &mut self,
        line: &'a [u8],
        pos: LinePos,
        arena: &'a Bump,
        ctx: &'a C,
        report: &mut Report,
        hold: bool,
    ) -> Option<Entry<'a>> {
        let filter = self.filter;
        self.json.parse(line, arena, |parsed| match parsed {
            Err(_) if hold => {
                report.lines -= 1;
                report.pending = line.len() as u64;
                None
            }
            Err(reason) => {
                let reason = match reason {
                    SkipReason::Malformed(e) if !pos.terminated => SkipReason::Truncated(e),
                    r => r,
                };
                report.skip(pos.line, pos.byte, reason);
                None
            }
            Ok((nodes, repaired)) => {
                report.repaired += u64::from(repaired);
                ctx.map(nodes, line, pos, repaired, arena, filter, report)
            }
        })
    }
}

/// Flattened text: one borrowed piece stays borrowed; several are joined
/// with `\n` in the arena.
///
/// Read from a lean tape that leaves record text raw
/// ([`crate::json::lean::defers_text`]), the text is built escaped instead: what
/// [`crate::json::escape`] writes between the quotes for the text, which
/// the NDJSON writer then copies ([`crate::json::ParsedLine::write_str`]).
/// A piece read with [`crate::json::as_text`] is then a raw string of the
/// line: it stays as it is when its escapes are all ones the escape
/// writes itself, else it is decoded and escaped again; every other piece
/// is escaped, and pieces are joined with the two bytes `\` `n`.
pub struct Text<'a> {
    arena: &'a Bump,
    escaped: bool,
    first: Option<&'a str>,
    joined: Option<bumpalo::collections::String<'a>>,
    kinds: bumpalo::collections::Vec<'a, &'a str>,
}

impl<'a> Text<'a> {
    pub fn new(arena: &'a Bump) -> Self {
        Text {
            arena,
            escaped: crate::json::lean::defers_text(),
            first: None,
            joined: None,
            kinds: bumpalo::collections::Vec::new_in(arena),
        }
    }

    pub fn kind(&mut self, kind: &'a str) {
        if !self.kinds.contains(&kind) {
            self.kinds.push(kind);
        }
    }

    /// Starts a new piece in the joined buffer and returns it.
    fn joined(&mut self) -> &mut bumpalo::collections::String<'a> {
        let arena = self.arena;
        let first = self.first.take();
        let s = self.joined.get_or_insert_with(|| {
            let mut s = bumpalo::collections::String::new_in(arena);
            if let Some(f) = first {
                s.push_str(f);
            }
            s
        });
        if first.is_some() || !s.is_empty() {
            s.push_str(if self.escaped { "\\n" } else { "\n" });
        }
        s
    }

    /// Starts a new piece, in the joined buffer, and returns that buffer.
    fn new_piece(&mut self) -> &mut bumpalo::collections::String<'a> {
        if self.has_piece() {
            self.joined()
        } else {
            self.joined
                .insert(bumpalo::collections::String::new_in(self.arena))
        }
    }

    fn has_piece(&self) -> bool {
        self.first.is_some() || self.joined.is_some()
    }

    /// Whether a piece was appended (an empty one counts).
    pub fn has_text(&self) -> bool {
        self.has_piece()
    }

    /// The arena the text is built in.
    pub fn arena(&self) -> &'a Bump {
        self.arena
    }

    /// `piece`, a string read with [`crate::json::as_text`] (or one
    /// without a character to escape), as the text holds it: itself, or,
    /// escaped, the raw string as the escape writes it.
    fn as_held(&self, piece: &'a str) -> &'a str {
        if !self.escaped || crate::json::lean::canonical(piece) {
            return piece;
        }
        // The lean parse validated its escapes.
        let decoded = crate::json::lean::unescape(piece, self.arena);
        let mut s = bumpalo::collections::String::new_in(self.arena);
        s.push_escaped(decoded);
        s.into_bump_str()
    }

    /// Appends a piece read with [`crate::json::as_text`].
    pub fn push(&mut self, piece: &'a str) {
        let piece = self.as_held(piece);
        self.push_held(piece);
    }

    /// Appends a piece of decoded text (one the mapping built).
    pub fn push_decoded(&mut self, piece: &'a str) {
        if !self.escaped {
            return self.push(piece);
        }
        self.new_piece().push_escaped(piece);
    }

    /// A bash execution as a piece: `$ <command>\n<output>`; the command
    /// is decoded text, the output read with [`crate::json::as_text`].
    pub fn bash(&mut self, command: &str, output: &'a str) {
        let mut s = bumpalo::collections::String::new_in(self.arena);
        s.push_str("$ ");
        if self.escaped {
            s.push_escaped(command);
            s.push_str("\\n");
        } else {
            s.push_str(command);
            s.push('\n');
        }
        s.push_str(self.as_held(output));
        self.push_held(s.into_bump_str());
    }

    /// Appends a piece already as the text holds it.
    pub fn push_held(&mut self, piece: &'a str) {
        if self.has_piece() {
            self.joined().push_str(piece);
        } else {
            self.first = Some(piece);
        }
    }

    /// A turn that ended in an error: the kind `error`, and its message
    /// (read with [`crate::json::as_text`]; none or empty adds no text) as
    /// a piece after the content's text, or alone when that is empty.
    pub fn error(&mut self, message: Option<&'a str>) {
        self.kind("error");
        let Some(message) = message.filter(|m| !m.is_empty()) else {
            return;
        };
        if self.first == Some("") {
            // Empty content text: no newline before the message.
            self.first = None;
        }
        self.push(message);
    }

    /// Flattens a `content` value: a string as is; an array of blocks in
    /// order; anything else is empty.
    pub fn content(&mut self, content: Option<&[Node<'a>]>) {
        let Some(v) = content else { return };
        if let Some(s) = as_text(v) {
            self.kind("text");
            self.push(s);
            return;
        }
        for block in elements(v) {
            let f = Fields::of(block);
            let Some(kind) = f.str("type") else { continue };
            self.kind(kind);
            match kind {
                "text" => self.push(f.text("text").unwrap_or("")),
                // Redacted thinking gives no text (its kind is kept).
                "thinking" if f.get("redacted").and_then(as_bool) != Some(true) => {
                    self.push(f.text("thinking").unwrap_or(""));
                }
                "toolCall" => self.call(f.str("name").unwrap_or(""), f.get("arguments")),
                "image" => self.image(f.str("mimeType"), f.str("data")),
                _ => {}
            }
        }
    }

    /// A tool call as a piece: `<name> <arguments as compact JSON>` (`{}`
    /// when absent).
    pub fn call(&mut self, name: &str, args: Option<&[Node<'_>]>) {
        let (escaped, arena) = (self.escaped, self.arena);
        let s = self.new_piece();
        if escaped {
            s.push_escaped(name);
        } else {
            s.push_str(name);
        }
        s.push(' ');
        match args {
            Some(a) if escaped => {
                let mut json = bumpalo::collections::String::new_in(arena);
                write_json(a, &mut json);
                s.push_escaped(&json);
            }
            Some(a) => write_json(a, s),
            None => s.push_str("{}"),
        }
    }

    /// An image as a piece: `[image <mime>, <decoded size> bytes]`, never
    /// its data.
    pub fn image(&mut self, mime: Option<&str>, data: Option<&str>) {
        let mime = mime.unwrap_or("unknown");
        let size = data.map_or(0, base64_decoded_len);
        let piece = bumpalo::format!(in self.arena, "[image {}, {} bytes]", mime, size);
        self.push_decoded(piece.into_bump_str());
    }

    pub fn finish(self) -> (&'a str, &'a [&'a str]) {
        let text = match (self.first, self.joined) {
            (Some(f), _) => f,
            (None, Some(s)) => s.into_bump_str(),
            (None, None) => "",
        };
        (text, self.kinds.into_bump_slice())
    }
}

/// Decoded size of base64 data (padding and whitespace not counted).
fn base64_decoded_len(data: &str) -> usize {
    let b = data.as_bytes();
    let is_space = |c: &u8| matches!(c, b'\n' | b'\r' | b' ' | b'\t');
    // Images are megabytes of base64 without whitespace: count nothing
    // byte by byte then (two SIMD scans instead).
    let n =
        if memchr::memchr3(b'\n', b'\r', b' ', b).is_none() && memchr::memchr(b'\t', b).is_none() {
            b.len() - b.iter().rev().take_while(|c| **c == b'=').count()
        } else {
            b.iter().filter(|c| !is_space(c) && **c != b'=').count()
        };
    n * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_sizes() {
        assert_eq!(base64_decoded_len("aGVsbG8gd29ybGQh"), 12);
        assert_eq!(base64_decoded_len("aGk="), 2);
        assert_eq!(base64_decoded_len("aA=="), 1);
        assert_eq!(base64_decoded_len(""), 0);
        assert_eq!(base64_decoded_len("aGVs\nbG8="), 5);
        assert_eq!(base64_decoded_len("aGVs bG8gd29y\r\nbGQh"), 12);
    }
}
