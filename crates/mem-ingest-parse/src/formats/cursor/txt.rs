//! The Cursor CLI's older plain-text transcripts
//! (`agent-transcripts/<chatId>.txt`), read whole as documents
//! ([`crate::document`]: no JSON in them, and nothing says they are only
//! appended to).
//!
//! A line `user:` or `assistant:` alone starts a message. In an
//! assistant's message, a line starting `[Thinking]`, `[Tool call]
//! <name>` or `[Tool result]` starts a part whose body is the indented
//! (or blank) lines after it; the first line at the left margin ends it
//! (prose again, or another marker). A message is one record (a user's
//! `<user_query>` tags taken out; an assistant's thinking, text and tool
//! calls, `<name>` and its body, in order), except that each `[Tool
//! result]` is a `tool_result` record of its own between the assistant's
//! parts before and after it. No ids: an item is known by its first
//! line (`L<line>`); its record's `line` is its place among the items (as
//! every document's), its `byte` that of its first line.
//!
//! A message whose text changed after it was emitted is a *revision* of
//! its key ([`Item::positional`] false): the last message, which the CLI
//! writes on, is one record whose longer versions a store updates (NDJSON
//! and Parquet count them and write nothing), not a record a version. It
//! is not held back until another message follows: a document unchanged
//! since a read is not read again, so a last message held back by the
//! read that saw it finished would never be emitted. An edit that moves
//! messages to other lines (one taken out or put in before them) makes
//! each key that stays name the message now starting there: a revision of
//! it; a key new to the document is a new record; a key no message starts
//! at any more stays where it was written.

use std::path::Path;

use bumpalo::Bump;

use super::{header_of, strip_user_query};
use crate::document::{Item, Items, MapDocument};
use crate::json::fingerprint;
use crate::line::{Header, Text};
use crate::line_reader::bom_len;
use crate::record::{Record, Role, RoleFilter};
use crate::report::{Report, SkipReason};

/// The tag of a `.txt` transcript's header fingerprint.
pub(super) const TAG: &[u8] = b"cursor-cli-txt";

/// The `.txt` transcripts' reading.
pub(super) struct Txt;

/// What a part's body lines are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Text,
    Thinking,
    Call,
    Result,
}

/// One record being gathered: its role, first line and byte, and its
/// pieces (kind, lines).
struct Message<'t> {
    role: Role,
    line: u64,
    byte: u64,
    pieces: Vec<(Part, String, Vec<&'t str>)>,
    /// A line of it held bytes that are not UTF-8 (replaced).
    repaired: bool,
}

impl<'t> Message<'t> {
    fn new(role: Role, line: u64, byte: u64) -> Self {
        Message {
            role,
            line,
            byte,
            pieces: Vec::new(),
            repaired: false,
        }
    }

    /// Starts a piece of `part` (a tool call's `name`).
    fn start(&mut self, part: Part, name: &str) {
        self.pieces.push((part, name.to_owned(), Vec::new()));
    }

    /// Adds a line to the piece being written (a text piece when none).
    fn add(&mut self, part: Part, line: &'t str) {
        match self.pieces.last_mut() {
            Some((p, _, lines)) if *p == part => lines.push(line),
            _ => self.pieces.push((part, String::new(), vec![line])),
        }
    }

    fn is_empty(&self) -> bool {
        self.pieces.iter().all(|(p, n, l)| {
            *p != Part::Call && n.is_empty() && l.iter().all(|s| s.trim().is_empty())
        }) && self.role != Role::ToolResult
    }
}

/// A body line without its indentation (two spaces, or one tab).
fn unindent(l: &str) -> &str {
    l.strip_prefix("  ")
        .or_else(|| l.strip_prefix('\t'))
        .unwrap_or(l)
}

/// Lines joined with `\n`, blank lines at either end dropped.
fn joined(lines: &[&str]) -> String {
    let start = lines.iter().position(|l| !l.trim().is_empty());
    let end = lines.iter().rposition(|l| !l.trim().is_empty());
    match (start, end) {
        (Some(s), Some(e)) => lines[s..=e].join("\n"),
        _ => String::new(),
    }
}

impl MapDocument for Txt {
    /// Not compared: the format does not hash unchanged files.
    fn hashes_content(&self) -> bool {
        false
    }

    fn read<'a>(
        &self,
        data: &'a [u8],
        path: &Path,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        items: &mut Items<'a>,
    ) -> Result<Header, SkipReason> {
        // Each line with its offset in the file's bytes (a byte-order
        // mark counted), decoded alone: bytes that are not UTF-8 are
        // replaced in its text, and the offsets stay those of the file.
        let bom = bom_len(data);
        let mut lines: Vec<(u64, &'a str, bool)> = Vec::new();
        let mut byte = bom as u64;
        for raw in data[bom..].split_inclusive(|b| *b == b'\n') {
            let (l, repaired) = match std::str::from_utf8(raw) {
                Ok(t) => (t, false),
                Err(_) => (&*arena.alloc_str(&String::from_utf8_lossy(raw)), true),
            };
            lines.push((byte, l, repaired));
            byte += raw.len() as u64;
        }
        let marker = |l: &str| matches!(l.trim(), "user:" | "assistant:");
        if !lines.iter().any(|(_, l, _)| marker(l)) {
            return Err(SkipReason::Unsupported(
                "not a Cursor transcript: no `user:` or `assistant:` line".to_owned(),
            ));
        }
        let header = header_of(path, TAG, &[]);
        let session: &'a str = arena.alloc_str(&header.id);
        let project: &'a str = arena.alloc_str(&header.cwd);
        let source: &'a str = arena.alloc_str(&format!("cursor:{}", header.id));
        let mut messages: Vec<Message<'a>> = Vec::new();
        let mut cur: Option<Message<'a>> = None;
        let mut part = Part::Text;
        // Text before the first `user:`/`assistant:` line (its line and
        // byte): a counted skip, once.
        let mut preamble: Option<(u64, u64)> = None;
        for (i, &(at, raw, bad)) in lines.iter().enumerate() {
            'line: {
                let line = i as u64 + 1;
                let l = raw.trim_end_matches(['\n', '\r']);
                let t = l.trim();
                if t == "user:" || t == "assistant:" {
                    messages.extend(cur.take());
                    let role = if t == "user:" {
                        Role::User
                    } else {
                        Role::Assistant
                    };
                    cur = Some(Message::new(role, line, at));
                    part = Part::Text;
                    break 'line;
                }
                let Some(m) = cur.as_mut() else {
                    if !t.is_empty() && preamble.is_none() {
                        preamble = Some((line, at));
                    }
                    break 'line;
                };
                if m.role == Role::User {
                    m.add(Part::Text, l);
                    break 'line;
                }
                if let Some(rest) = t.strip_prefix("[Thinking]") {
                    if m.role == Role::ToolResult {
                        messages.extend(cur.take());
                        cur = Some(Message::new(Role::Assistant, line, at));
                    }
                    let m = cur.as_mut().expect("a message");
                    part = Part::Thinking;
                    m.start(part, "");
                    if !rest.trim().is_empty() {
                        m.add(part, rest.trim());
                    }
                    break 'line;
                }
                if let Some(name) = t.strip_prefix("[Tool call]") {
                    if m.role == Role::ToolResult {
                        messages.extend(cur.take());
                        cur = Some(Message::new(Role::Assistant, line, at));
                    }
                    part = Part::Call;
                    cur.as_mut().expect("a message").start(part, name.trim());
                    break 'line;
                }
                if let Some(rest) = t.strip_prefix("[Tool result]") {
                    // The tool's name: the call before it, in this message.
                    let name = m
                        .pieces
                        .iter()
                        .rev()
                        .find(|(p, _, _)| *p == Part::Call)
                        .map(|(_, n, _)| n.clone())
                        .unwrap_or_default();
                    messages.extend(cur.take());
                    let mut r = Message::new(Role::ToolResult, line, at);
                    part = Part::Result;
                    r.start(part, &name);
                    if !rest.trim().is_empty() {
                        r.add(part, rest.trim());
                    }
                    cur = Some(r);
                    break 'line;
                }
                let body = l.starts_with([' ', '\t']) || t.is_empty();
                if part != Part::Text && body {
                    m.add(part, unindent(l));
                    break 'line;
                }
                // Prose at the left margin: the part before it ended.
                part = Part::Text;
                if m.role == Role::ToolResult {
                    messages.extend(cur.take());
                    cur = Some(Message::new(Role::Assistant, line, at));
                }
                cur.as_mut().expect("a message").add(part, l);
            }
            // The message this line went into holds its replaced bytes.
            if bad {
                if let Some(m) = cur.as_mut() {
                    m.repaired = true;
                }
            }
        }
        messages.extend(cur.take());
        if let Some((line, at)) = preamble {
            report.lines += 1;
            report.skip(
                line,
                at,
                SkipReason::Malformed(
                    "text before the first `user:` or `assistant:` line".to_owned(),
                ),
            );
        }
        for (i, m) in messages.into_iter().filter(|m| !m.is_empty()).enumerate() {
            let pos = i as u64 + 1;
            let mut t = Text::new(arena);
            let (mut tool_name, mut is_result) = (None, false);
            for (p, name, lines) in &m.pieces {
                let body = joined(lines);
                let piece: String = match p {
                    Part::Text if m.role == Role::User => {
                        t.kind("text");
                        strip_user_query(&body, arena).trim().to_owned()
                    }
                    Part::Text => {
                        if body.is_empty() {
                            continue;
                        }
                        t.kind("text");
                        body
                    }
                    Part::Thinking => {
                        t.kind("thinking");
                        body
                    }
                    Part::Call => {
                        t.kind("toolCall");
                        if tool_name.is_none() {
                            tool_name = Some(&*arena.alloc_str(name));
                        }
                        if body.is_empty() {
                            name.clone()
                        } else {
                            format!("{name} {body}")
                        }
                    }
                    Part::Result => {
                        t.kind("toolResult");
                        is_result = true;
                        if !name.is_empty() {
                            tool_name = Some(&*arena.alloc_str(name));
                        }
                        body
                    }
                };
                t.push_decoded(arena.alloc_str(&piece));
            }
            let (body, kinds) = t.finish();
            let role = m.role;
            let written = match role {
                Role::User => "user",
                Role::ToolResult => "tool_result",
                _ => "assistant",
            };
            report.entries.add(written, 1);
            let key: &'a str = arena.alloc_str(&format!("L{}", m.line));
            let repaired = m.repaired;
            report.repaired += u64::from(repaired);
            let record = report.count_record(role, filter).then(|| Record {
                role,
                text: body,
                project,
                session,
                key: arena.alloc_str(&format!("{session}:{key}")),
                source,
                id: None,
                parent_id: None,
                line: pos,
                byte: m.byte,
                entry: written,
                message_role: Some(written),
                kinds,
                timestamp: None,
                provider: None,
                model: None,
                usage: None,
                stop_reason: None,
                tool_name: if is_result || role == Role::Assistant {
                    tool_name
                } else {
                    None
                },
                tool_call_id: None,
                is_error: None,
                custom_type: None,
                command: None,
                exit_code: None,
                repaired,
                agent_id: None,
                message_id: None,
                request_id: None,
                provisional: false,
            });
            items.push(
                report,
                Item {
                    key,
                    version: fingerprint(&[body.as_bytes()]),
                    // Another version at a key emitted before is a
                    // revision of it (see the module's docs).
                    positional: false,
                    settled: true,
                    fingerprint: fingerprint(&[b"cursor-txt", session.as_bytes(), key.as_bytes()]),
                    line: pos,
                    byte: m.byte,
                    record,
                },
            );
        }
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Format;
    use crate::source::{Input, SourceOptions};

    #[test]
    fn a_txt_transcript_gives_a_record_per_message_and_tool_result() {
        let doc = "user:\n<user_query>\nlist the files\n</user_query>\n\nassistant:\n\
                   [Thinking]\n  I should run ls.\nLet me look.\n[Tool call] Shell\n  command=ls\n\
                   [Tool result]\n  a.txt\n  b.txt\nTwo files.\n";
        let path = Path::new("/x/projects/nowhere-here/agent-transcripts/c7.txt");
        let mut src = super::super::CursorCli
            .open(Input::Bytes(doc.as_bytes()), path, &SourceOptions::new())
            .unwrap();
        let mut got = Vec::new();
        while let Some(r) = src.next_record().unwrap() {
            got.push((
                r.role,
                r.text.to_owned(),
                r.kinds.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>(),
                r.key.to_owned(),
                r.line,
                r.byte,
                r.tool_name.map(str::to_owned),
            ));
        }
        let k = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            got,
            [
                (
                    Role::User,
                    "list the files".to_owned(),
                    k(&["text"]),
                    "c7:L1".to_owned(),
                    1,
                    0,
                    None
                ),
                (
                    Role::Assistant,
                    "I should run ls.\nLet me look.\nShell command=ls".to_owned(),
                    k(&["thinking", "text", "toolCall"]),
                    "c7:L6".to_owned(),
                    2,
                    49,
                    Some("Shell".to_owned())
                ),
                (
                    Role::ToolResult,
                    "a.txt\nb.txt".to_owned(),
                    k(&["toolResult"]),
                    "c7:L12".to_owned(),
                    3,
                    134,
                    Some("Shell".to_owned())
                ),
                (
                    Role::Assistant,
                    "Two files.".to_owned(),
                    k(&["text"]),
                    "c7:L15".to_owned(),
                    4,
                    164,
                    None
                ),
            ]
        );
        let h = src.header().unwrap();
        assert_eq!((h.id.as_str(), h.cwd.as_str()), ("c7", "/nowhere/here"));
        assert_eq!(src.report().records, 4);
        assert_eq!(src.report().skipped, 0);
    }

    /// A record's `byte` is its first line's offset in the file's bytes:
    /// after a byte-order mark (counted), after bytes that are not UTF-8
    /// (replaced in the text, counted as written); only the record that
    /// holds such bytes says it was repaired.
    #[test]
    fn byte_offsets_are_the_files_own() {
        let path = Path::new("/x/projects/nowhere-here/agent-transcripts/c9.txt");
        let read = |doc: &[u8]| {
            let mut src = super::super::CursorCli
                .open(Input::Bytes(doc), path, &SourceOptions::new())
                .unwrap();
            let mut got = Vec::new();
            while let Some(r) = src.next_record().unwrap() {
                got.push((r.text.to_owned(), r.line, r.byte, r.repaired));
            }
            (got, src.report().repaired)
        };
        let bom = b"\xef\xbb\xbfuser:\nhi\n\nassistant:\nyo\n";
        assert_eq!(
            read(bom),
            (
                vec![
                    ("hi".to_owned(), 1, 3, false),
                    ("yo".to_owned(), 2, 13, false)
                ],
                0
            )
        );
        let bad = b"user:\nbad \xff\xfe bytes\n\nassistant:\nyo\n";
        assert_eq!(
            read(bad),
            (
                vec![
                    ("bad \u{fffd}\u{fffd} bytes".to_owned(), 1, 0, true),
                    ("yo".to_owned(), 2, 20, false)
                ],
                1
            )
        );
    }

    /// Text before the first `user:` line: one counted skip at its line
    /// and byte, the messages after it read; a file without a `user:` or
    /// `assistant:` line is not a transcript (its one "line" skipped).
    #[test]
    fn text_before_the_first_message_is_a_counted_skip() {
        let path = Path::new("/x/projects/nowhere-here/agent-transcripts/c8.txt");
        let doc = "\n  note\nmore\nuser:\nhi\n";
        let mut src = super::super::CursorCli
            .open(Input::Bytes(doc.as_bytes()), path, &SourceOptions::new())
            .unwrap();
        let mut got = Vec::new();
        while let Some(r) = src.next_record().unwrap() {
            got.push((r.text.to_owned(), r.line, r.byte));
        }
        assert_eq!(got, [("hi".to_owned(), 1, 13)]);
        let r = src.report();
        assert_eq!((r.records, r.skipped, r.lines), (1, 1, 2));
        assert_eq!((r.skips[0].line, r.skips[0].byte), (2, 1));
        let mut src = super::super::CursorCli
            .open(Input::Bytes(b"just text\n"), path, &SourceOptions::new())
            .unwrap();
        assert!(src.next_record().unwrap().is_none());
        assert_eq!((src.report().skipped, src.report().lines), (1, 1));
    }
}
