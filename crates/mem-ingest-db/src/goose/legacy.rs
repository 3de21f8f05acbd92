//! Goose's legacy sessions (before 1.10): `<data>/sessions/<id>.jsonl`,
//! one file per session, rewritten whole on every save (`<id>.tmp`, then
//! renamed over it): a document ([`mem_ingest_parse::document`]), never
//! read by byte offset (`../shared/spec/goose-format.md`, section 9).
//!
//! Line 1 is the session's metadata (`working_dir`, the project;
//! `description`, its title; `accumulated_*` token counts); each further
//! line is a message `{id?, role, created, content, metadata?}`, mapped
//! as a database row's `content_json` is ([`super::map`]). A damaged
//! line is a counted skip naming its line and byte. A line of any length
//! is read (within the document's limit): Goose's reader before 1.10
//! skipped lines over 5 MB, but the import of 1.10 takes them, and a
//! message the file left out would shift the places of the messages of
//! its role and second after it (their fingerprints, the import's).
//!
//! Goose 1.10, creating `sessions.db`, imports every `*.jsonl` of the
//! folder once and leaves the files. So:
//! - a file whose session is in the `sessions.db` beside it (opened
//!   read-only, as the database is read) is read from the database: its
//!   lines are counted (`in_database`), none is emitted;
//! - a file read before Goose imported it, and the database read later
//!   (or the two read in one run from places that are not beside each
//!   other): each message has the fingerprint of the database's row the
//!   import makes of it ([`super::map::Identity::Legacy`]), and the
//!   first line's usage the fingerprint of the database's growth of the
//!   imported session's accumulated columns from nothing
//!   ([`super::acc_fingerprint`]): the engine's deduplication keeps each
//!   once, in whichever order they come.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use bumpalo::Bump;
use mem_ingest_parse::document::{Item, Items, MapDocument};
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::line_reader::bom_len;
use mem_ingest_parse::report::UsageAt;
use mem_ingest_parse::rows::shard_of;
use mem_ingest_parse::source::headerless_fingerprint;
use mem_ingest_parse::{parse_iso_millis, Header, Report, RoleFilter, SkipReason, Usage};
use serde_json::Value;

use super::map::{self, millis, Identity, Message, Session};
use super::{acc_fingerprint, LINEAGE};

/// The tag of a legacy file's header fingerprint.
pub(super) const TAG: &[u8] = b"goose-jsonl";

/// Whether `path` is a legacy session file (`*.jsonl`; the database is
/// any other name).
pub fn is_legacy(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jsonl")
}

/// Whether `id` has the form of a legacy session's id, `YYYYMMDD_HHMMSS`
/// (Goose's new ids are `YYYYMMDD_N`, a counter of the day).
pub fn has_legacy_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() == 15
        && b[8] == b'_'
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[9..].iter().all(u8::is_ascii_digit)
}

/// Whether the `sessions.db` beside the legacy file at `path` holds the
/// session `id` (opened read-only, as a read opens it; any failure, or
/// no database, is a no: the file is read).
fn in_database_beside(path: &Path, id: &str) -> bool {
    let Some(db) = path.parent().map(|d| d.join("sessions.db")) else {
        return false;
    };
    if !db.is_file() {
        return false;
    }
    let Ok(conn) = crate::sqlite::open_read_only(&db) else {
        return false;
    };
    crate::sqlite::in_read(&conn, |c| {
        if !crate::sqlite::has_table(c, "sessions")? {
            return Ok(false);
        }
        c.query_row(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1)",
            [id],
            |r| r.get(0),
        )
    })
    .unwrap_or(false)
}

/// The first line of `prefix` (all of it when `whole`), if complete.
fn first_line(prefix: &[u8], whole: bool) -> Option<&[u8]> {
    let p = &prefix[bom_len(prefix)..];
    match p.iter().position(|&b| b == b'\n') {
        Some(i) => Some(&p[..i]),
        None if whole => Some(p),
        None => None,
    }
}

/// Whether a file's first bytes are a legacy session's: its first line is
/// a JSON object with Goose's metadata (`working_dir` and `description`
/// or `message_count`) or a Goose message (`role`, `created`, a
/// `content` list).
pub fn detect(prefix: &[u8], whole: bool) -> bool {
    let Some(line) = first_line(prefix, whole) else {
        return false;
    };
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(line) else {
        return false;
    };
    is_metadata(&o) || is_message(&o)
}

fn is_metadata(o: &serde_json::Map<String, Value>) -> bool {
    o.get("working_dir").is_some_and(Value::is_string)
        && (o.contains_key("description") || o.contains_key("message_count"))
}

fn is_message(o: &serde_json::Map<String, Value>) -> bool {
    o.get("role").is_some_and(Value::is_string)
        && o.get("content").is_some_and(Value::is_array)
        && o.contains_key("created")
}

/// The legacy files' reading.
pub(super) struct Legacy {
    /// Whether a session in the database beside is read from there
    /// (false for a file that emitted messages before: it is read as a
    /// document again, what it emitted staying emitted, so that its
    /// counts stay with it).
    pub(super) defer_to_database: bool,
    /// `--shard K/N` as `(K, N)`: every shard reads the file (as it
    /// reads the databases, [`mem_ingest_parse::format::Format::shards_rows`]),
    /// the session's shard alone takes its lines: the shard of
    /// `goose:<session id>`, whose database rows are that shard's too (a
    /// legacy session has no parent).
    pub(super) shard: Option<(u32, u32)>,
}

/// One non-blank line: its number (1-based), its first byte (0-based),
/// and its JSON or why it was skipped.
struct Line {
    number: u64,
    byte: u64,
    value: Result<Value, SkipReason>,
}

/// The non-blank lines of `data`.
fn lines(data: &[u8], base: u64) -> Vec<Line> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut number = 0u64;
    while at < data.len() {
        let end = data[at..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(data.len(), |i| at + i);
        let terminated = end < data.len();
        let raw = &data[at..end];
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        number += 1;
        if !raw.iter().all(|b| matches!(b, b' ' | b'\t')) {
            let value = serde_json::from_slice::<Value>(raw).map_err(|e| {
                if terminated {
                    SkipReason::Malformed(e.to_string())
                } else {
                    SkipReason::Truncated(e.to_string())
                }
            });
            out.push(Line {
                number,
                byte: base + at as u64,
                value,
            });
        }
        at = end + 1;
    }
    out
}

/// The accumulated token counts of a metadata line: input, output, total
/// (a field absent, or not a count, as 0, as the database's NULL).
fn accumulated(meta: &serde_json::Map<String, Value>) -> [u64; 3] {
    ["input", "output", "total"].map(|k| {
        meta.get(&format!("accumulated_{k}_tokens"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    })
}

impl MapDocument for Legacy {
    /// Not compared: Goose renames a new file over the old one (another
    /// inode, another time) at every save.
    fn hashes_content(&self) -> bool {
        false
    }

    #[allow(clippy::too_many_lines)]
    fn read<'a>(
        &self,
        data: &'a [u8],
        path: &Path,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        items: &mut Items<'a>,
    ) -> Result<Header, SkipReason> {
        let bom = bom_len(data);
        let lines = lines(&data[bom..], bom as u64);
        // The session's id is the file's name, as Goose's import takes it.
        let session = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Line 1 is the metadata, unless it is a message (Goose's rule).
        let meta = match lines.first().map(|l| &l.value) {
            Some(Ok(Value::Object(o))) if is_message(o) => None,
            Some(Ok(Value::Object(o))) if o.contains_key("type") => {
                // Another agent's line (pi's, Codex's, Claude Code's
                // first lines have a `type`; Goose's never).
                return Err(SkipReason::Unsupported(
                    "not a Goose session: its first line has a `type`, which Goose's \
                     metadata never has"
                        .to_owned(),
                ));
            }
            Some(Ok(Value::Object(o))) => Some(o),
            _ => None,
        };
        let text = |k: &str| meta.and_then(|m| m.get(k)?.as_str());
        let cols = Session {
            working_dir: text("working_dir").unwrap_or("").to_owned(),
            provider: None,
            model: None,
        };
        let created_of = |v: &Value| v.get("created").and_then(Value::as_i64);
        let last_created = lines
            .iter()
            .rev()
            .find_map(|l| l.value.as_ref().ok().and_then(created_of));
        let header = Header {
            id: LINEAGE.to_owned(),
            cwd: cols.working_dir.clone(),
            version: 0,
            timestamp: text("created_at").and_then(parse_iso_millis).or_else(|| {
                lines
                    .iter()
                    .skip(usize::from(meta.is_some()))
                    .find_map(|l| l.value.as_ref().ok().and_then(created_of))
                    .map(millis)
            }),
            parent: None,
            fingerprint: headerless_fingerprint(TAG, path),
        };
        if let Some((k, n)) = self.shard {
            if shard_of(&format!("{LINEAGE}:{session}"), n) != k {
                // Another shard's session: nothing of it here (nor its
                // project, in `stats`' projects).
                return Ok(Header {
                    cwd: String::new(),
                    ..header
                });
            }
        }
        if self.defer_to_database && in_database_beside(path, &session) {
            // Goose imported it: read from the database. Its lines are
            // counted, none emitted.
            for (i, _) in lines.iter().enumerate() {
                report.lines += 1;
                report.no_record += 1;
                let what = if i == 0 && meta.is_some() {
                    "session"
                } else {
                    "in_database"
                };
                report.entries.add(what, 1);
            }
            // Its records are the database's, in the database's project
            // line of `stats` (a database's header names none).
            return Ok(Header {
                cwd: String::new(),
                ..header
            });
        }
        items.reserve(lines.len());
        let mut ordinals: HashMap<(String, i64), u64> = HashMap::new();
        // The messages' ids met so far: a message under an id met before
        // is a copy (the database's reader reads a `(session,
        // message_id)` once).
        let mut ids: HashSet<&'a str> = HashSet::new();
        for (i, line) in lines.iter().enumerate() {
            let (number, byte) = (line.number, line.byte);
            let value = match &line.value {
                Err(why) => {
                    report.lines += 1;
                    report.skip(number, byte, why.clone());
                    continue;
                }
                Ok(v) => v,
            };
            if i == 0 {
                if let Some(m) = meta {
                    // The session's line: its usage, counted as a growth
                    // of the imported session's accumulated columns from
                    // nothing would be.
                    report.entries.add("session", 1);
                    report.no_record += 1;
                    let [input, output, total] = accumulated(m);
                    let (key, fp) = if input == 0 && output == 0 && total == 0 {
                        (
                            "session".to_owned(),
                            fingerprint(&[b"goose-jsonl-session", session.as_bytes()]),
                        )
                    } else {
                        let u = Usage {
                            input,
                            output,
                            total_tokens: if total > 0 {
                                total
                            } else {
                                input.saturating_add(output)
                            },
                            ..Usage::default()
                        };
                        let at = UsageAt {
                            seq: 0,
                            line: number,
                            time: text("updated_at")
                                .and_then(parse_iso_millis)
                                .or(last_created.map(millis)),
                            reasoning: 0,
                        };
                        report.add_usage_at(None, None, &u, true, at);
                        (
                            format!("session:{input}:{output}:{total}"),
                            acc_fingerprint(&session, [0, total], [0, input]),
                        )
                    };
                    items.push(
                        report,
                        Item {
                            key: arena.alloc_str(&key),
                            version: fp,
                            positional: false,
                            settled: true,
                            fingerprint: fp,
                            line: number,
                            byte,
                            record: None,
                        },
                    );
                    continue;
                }
            }
            let o = value.as_object();
            let role = o.and_then(|o| o.get("role")?.as_str());
            let content = o.and_then(|o| o.get("content")?.as_array());
            let (Some(role), Some(content)) = (role, content) else {
                report.lines += 1;
                report.skip(
                    number,
                    byte,
                    SkipReason::Malformed(
                        "not a Goose message: no `role` text or no `content` list".to_owned(),
                    ),
                );
                continue;
            };
            let created = created_of(value).unwrap_or(0);
            let n = ordinals.entry((role.to_owned(), created)).or_insert(0);
            let ordinal = *n;
            *n += 1;
            let own_id = value
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty());
            // Without an id of its own, a message is its role, its second,
            // its place among the messages of both, and its content (a
            // hash): another message there after a rewrite is another
            // key, never one written twice.
            let key: &'a str = match own_id {
                Some(id) => arena.alloc_str(id),
                None => {
                    let h = fingerprint(&[b"goose-content", content_text(value).as_bytes()]);
                    arena.alloc_str(&format!("{role}@{created}#{ordinal}~{:08x}", h >> 32))
                }
            };
            if !ids.insert(key) {
                report.lines += 1;
                report.no_record += 1;
                report.entries.add("copy", 1);
                continue;
            }
            report.entries.add("message", 1);
            let msg = Message {
                session: &session,
                id: key,
                role,
                created,
                line: number,
                metadata: value.get("metadata"),
                content,
                cols: &cols,
                identity: Identity::Legacy { ordinal },
            };
            let version = value_version(value);
            map::map(&msg, arena, filter, report, &mut |report, piece| {
                let key = match piece.part {
                    None => key,
                    Some(cid) => arena.alloc_str(&format!("{key}/{cid}")),
                };
                let record = piece.record.map(|mut r| {
                    r.byte = byte;
                    r
                });
                items.push(
                    report,
                    Item {
                        key,
                        version,
                        positional: false,
                        settled: true,
                        fingerprint: piece.fingerprint,
                        line: number,
                        byte,
                        record,
                    },
                );
            });
        }
        Ok(header)
    }
}

/// A message's `content` as JSON text (the same for another spelling of
/// it).
fn content_text(v: &Value) -> String {
    v.get("content").map(Value::to_string).unwrap_or_default()
}

/// A message's version: a hash of its JSON as parsed (another spelling of
/// the same message, after a rewrite, is the same version).
fn value_version(v: &Value) -> u64 {
    fingerprint(&[b"goose-message", v.to_string().as_bytes()])
}
