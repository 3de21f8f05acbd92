//! Gemini CLI's legacy sessions (before v0.39): `session-*.json` (a
//! subagent's `chats/<parent>/<id>.json`), one object rewritten whole on
//! every change (`{sessionId, projectHash, startTime, lastUpdated,
//! messages, kind?, directories?}`): a document ([`crate::document`]).
//!
//! Each message is an item keyed by its `id`, whose record is built as a
//! JSONL message's is (the same mapping, the same key), and whose entry has
//! the fingerprint of the JSONL's record of that id: a legacy `.json` and
//! the `.jsonl` Gemini CLI migrates it to when the session is resumed (it
//! copies every message, and leaves the `.json`) are one lineage, and each
//! message is emitted once. A rewind truncates the legacy file in place: a
//! message that leaves the file stays emitted.

use std::path::Path;

use bumpalo::Bump;
use simd_json::Node;

use super::{project_of, record_of, GeminiContext, Held, Running};
use crate::document::{Item, Items, MapDocument};
use crate::json::{as_str, elements, fingerprint, Fields};
use crate::line::Header;
use crate::line_reader::bom_len;
use crate::record::RoleFilter;
use crate::report::{Report, SkipReason};
use crate::source::headerless_fingerprint;
use crate::time::parse_iso_millis;

/// The tag of a legacy file's header fingerprint (the JSONL files':
/// `gemini-file`, with the path).
pub(super) const TAG: &[u8] = b"gemini-file";

/// Whether `path` is a legacy `.json` session.
pub fn is_legacy(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "json")
}

/// The legacy documents' reading.
pub(super) struct Legacy;

impl MapDocument for Legacy {
    /// Not compared: the format does not hash unchanged files
    /// ([`crate::format::Format::hashes_unchanged`]; a file of the same
    /// inode, size and time is unchanged), so none is kept.
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
        let data = &data[bom_len(data)..];
        // The thread's parser, kept from document to document.
        let mut json = crate::document::parser();
        // `stats` builds no record: the lean parse, which leaves escaped
        // strings raw (item versions then hash them raw, in every run of
        // a checkpoint alike: a checkpoint keeps its command).
        json.set_lean(filter.builds_none());
        json.parse(data, arena, |parsed| {
            let (nodes, repaired) = parsed?;
            let root = Fields::of(nodes);
            let messages = root
                .get("messages")
                .filter(|m| matches!(m.first(), Some(Node::Array { .. })));
            let (Some(messages), true) =
                (messages, matches!(nodes.first(), Some(Node::Object { .. })))
            else {
                return Err(SkipReason::Unsupported(
                    "not a Gemini CLI session: no `messages` list".to_owned(),
                ));
            };
            report.repaired += u64::from(repaired);
            let id = root
                .str("sessionId")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    path.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default()
                });
            let dir = root
                .get("directories")
                .into_iter()
                .flat_map(elements)
                .find_map(as_str)
                .map(str::to_owned);
            let header = Header {
                id,
                cwd: project_of(path, root.str("projectHash"), dir),
                version: 0,
                timestamp: root
                    .str("startTime")
                    .and_then(parse_iso_millis)
                    .or_else(|| root.str("lastUpdated").and_then(parse_iso_millis)),
                parent: None,
                fingerprint: headerless_fingerprint(TAG, path),
            };
            // Held by the source, not put in the arena: the context owns
            // heap memory (its header, source name and state), which an
            // arena never gives back.
            let ctx: &'a GeminiContext = items.hold(GeminiContext::new(
                header.clone(),
                path,
                Running::default(),
                (0, 0),
            ));
            items.reserve(elements(messages).size_hint().1.unwrap_or(0));
            for (i, m) in elements(messages).enumerate() {
                let pos = i as u64 + 1;
                let f = Fields::of(m);
                let id = f.str("id").filter(|s| !s.is_empty());
                let key: &'a str = match id {
                    Some(id) => id,
                    None => arena.alloc_str(&format!("#{pos}")),
                };
                report.entries.add("message", 1);
                let before = report.records;
                let record = if matches!(m.first(), Some(Node::Object { .. })) {
                    let held = Held {
                        id: key.to_owned(),
                        json: Vec::new(),
                        line: pos,
                        byte: 0,
                        reread: None,
                        rewound: false,
                        checkpoint_only: false,
                        revision: false,
                        counted: None,
                    };
                    record_of(ctx, m, &held, repaired, arena, filter, report)
                } else {
                    None
                };
                // A message of no record (an unknown type, not an object)
                // is counted as an entry without one.
                if report.records == before {
                    report.no_record += 1;
                }
                items.push(
                    report,
                    Item {
                        key,
                        positional: id.is_none(),
                        version: items.version_of(m),
                        settled: true,
                        fingerprint: fingerprint(&[
                            b"gemini-msg",
                            header.id.as_bytes(),
                            key.as_bytes(),
                        ]),
                        line: pos,
                        byte: 0,
                        record,
                    },
                );
            }
            Ok(header)
        })
    }
}
