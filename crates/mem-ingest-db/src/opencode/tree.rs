//! OpenCode's pre-1.2 JSON tree, `<data>/storage/`
//! (`../shared/spec/opencode-format.md` §11): one file per session,
//! message and part, each rewritten whole on every update:
//!
//! ```text
//! session/<projectID>/<sessionID>.json
//! message/<sessionID>/<messageID>.json
//! part/<messageID>/<partID>.json
//! project/<projectID>.json
//! ```
//!
//! A message file is a document ([`mem_ingest_parse::document`]): read
//! whole with its parts (`part/<messageID>/*.json`, by id, as OpenCode
//! ordered them before 1.2), its items the rows a database's `message`
//! row with those parts gives ([`super::Emit::emit`], the same mapping):
//! its record, each LLM call's usage, each finished tool part's
//! `tool_result`, under the same keys and fingerprints, in the same
//! lineage as the database's (`opencode`). The 1.2 migration copies the
//! tree into the database under the same ids and leaves the files: each
//! message is emitted once across both stores (and its calls counted
//! once), whichever is read first, in one run or across runs with a
//! checkpoint. Ids come from the file names (OpenCode's migration trusts
//! them over the JSON): the message's from its file, the session's from
//! its folder, a session's project from its file's folder. Only regular
//! files are read: a link (which may lead out of the archive) or a FIFO,
//! a device, a socket beside a message file is a counted skip naming it;
//! a message with its parts is at most [`MAX_DOCUMENT`] bytes held (past
//! it, a counted skip of its file, as a document past it fails). Under `--shard K/N` every shard reads the tree, each the
//! messages of its lineages (a session's `parentID`s up to its root), as
//! each reads a database's rows.
//!
//! A part's rewrite does not touch its message's file, which is what the
//! engine watches (its size and time): an assistant message is read once
//! it is final (`time.completed`, or an `error`), which OpenCode writes
//! last, after its parts' last writes; one not final yet gives nothing
//! and waits for its file's next rewrite. A user message is read as it is
//! (OpenCode writes it, then its parts, a few milliseconds apart; one
//! read in between has the parts it has then, and its file's later
//! rewrite, its summary, is a revision of its record). An item emitted
//! before whose message or part changed is a revision (a store updates
//! its row).

use std::path::{Path, PathBuf};

use bumpalo::Bump;
use mem_ingest_parse::document::{Item, Items, MapDocument, MAX_DOCUMENT};
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::line_reader::bom_len;
use mem_ingest_parse::rows::{shard_of, Row};
use mem_ingest_parse::{Header, Report, RoleFilter, SkipReason};

use super::{data, Emit, MsgRef, Out, LINEAGE};
use crate::lenient::{parse, Node};

/// The tag of a message file's header fingerprint.
pub(super) const TAG: &[u8] = b"opencode-tree";

/// Whether `path` is a message file of a JSON tree:
/// `storage/message/<sessionID>/<messageID>.json`.
pub(crate) fn is_message_file(path: &Path) -> bool {
    let name = |p: Option<&Path>, n: &str| p.and_then(Path::file_name).is_some_and(|x| x == n);
    let folder = path.parent().and_then(Path::parent);
    path.extension().is_some_and(|e| e == "json")
        && name(folder, "message")
        && name(folder.and_then(Path::parent), "storage")
}

/// The `storage/` folder of a message file.
fn storage_of(path: &Path) -> Option<&Path> {
    path.parent()?.parent()?.parent()
}

/// Whether the data folder `dir` holds a JSON tree's messages.
pub(crate) fn has_tree(dir: &Path) -> bool {
    dir.join("storage").join("message").is_dir()
}

/// A message file's reading.
pub(super) struct Tree {
    /// `--shard K/N` as `(K, N)`: only the messages of sessions whose
    /// lineage's root is shard K's ([`root_of`]), as a database's rows.
    pub shard: Option<(u32, u32)>,
}

/// A file's name without `.json`, when UTF-8.
fn stem(path: &Path) -> Option<&str> {
    path.file_stem().and_then(|s| s.to_str())
}

/// Why a file of the tree that is a symbolic link is not read: the walker
/// does not follow a link met in a folder (`--follow-links` is the
/// walker's, for the files it claims), and one inside the tree may lead
/// out of the archive.
const LINK: &str = "a symbolic link: not followed (it may lead out of the archive)";

/// Why a file of the tree that is neither a file nor a folder is not
/// read (a FIFO would block the run, a device give without end).
const SPECIAL: &str = "not a regular file (a FIFO, a device or a socket): not read";

/// Why a part, session or project file was not read.
enum Unread {
    /// It is not there (a project file never written).
    Missing,
    /// Why, for a counted skip naming it.
    Skip(String),
    /// Its message with its parts would be larger than a document may
    /// be ([`MAX_DOCUMENT`]).
    TooMuch,
}

/// Whether a file of this type is read: a regular file only.
fn readable(t: std::fs::FileType) -> Result<(), &'static str> {
    if t.is_symlink() {
        Err(LINK)
    } else if t.is_file() {
        Ok(())
    } else {
        Err(SPECIAL)
    }
}

/// A part's (or a session's, a project's) file's text, when it is a
/// regular file (not a link: [`LINK`]; not a FIFO or a device:
/// [`SPECIAL`]; asked before it is opened, and of the opened handle, so
/// that a file swapped in between is not read either) of at most `room`
/// bytes ([`Unread::TooMuch`]) and at most [`MAX_DOCUMENT`] (a larger
/// one is not read, as a larger message file is not), UTF-8.
fn read_file(path: &Path, room: u64) -> Result<String, Unread> {
    use std::io::Read;
    let too_large = || {
        Unread::Skip(format!(
            "larger than the {} MiB a document may be: not read",
            MAX_DOCUMENT >> 20
        ))
    };
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Unread::Missing),
        Err(e) => return Err(Unread::Skip(e.to_string())),
    };
    readable(m.file_type()).map_err(|why| Unread::Skip(why.to_owned()))?;
    if m.len() > MAX_DOCUMENT {
        return Err(too_large());
    }
    if m.len() > room {
        return Err(Unread::TooMuch);
    }
    let f = std::fs::File::open(path).map_err(|e| Unread::Skip(e.to_string()))?;
    let h = f.metadata().map_err(|e| Unread::Skip(e.to_string()))?;
    if !h.is_file() || !same_file(&m, &h) {
        return Err(Unread::Skip(
            "replaced while it was opened (by a link or a special file): not read".to_owned(),
        ));
    }
    // (And no more than that of a file that grew since.)
    let limit = room.min(MAX_DOCUMENT);
    let mut b = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut b)
        .map_err(|e| Unread::Skip(e.to_string()))?;
    if b.len() as u64 > limit {
        return Err(if limit < MAX_DOCUMENT {
            Unread::TooMuch
        } else {
            too_large()
        });
    }
    String::from_utf8(b).map_err(|e| Unread::Skip(format!("not UTF-8 ({})", e.utf8_error())))
}

/// Whether two metadata are of one file (its device and inode).
#[cfg(unix)]
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

/// (Elsewhere, the handle's type alone is checked.)
#[cfg(not(unix))]
fn same_file(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    true
}

/// A message's part files and their texts.
#[derive(Default)]
struct Parts {
    /// `(part id, its file, its text or why none)`, by id.
    list: Vec<(String, PathBuf, Result<String, String>)>,
    /// Entries of the part folder not read, each why, naming it (a link,
    /// a special file, a folder, a name not UTF-8): counted skips.
    skipped: Vec<String>,
}

/// A message's parts (`part/<messageID>/*.json`), by id, read while their
/// texts together stay within `room` bytes: `None` past it (the message
/// with its parts is larger than a document may be).
fn parts_of(storage: &Path, message: &str, room: u64) -> Option<Parts> {
    let mut parts = Parts::default();
    let folder = storage.join("part").join(message);
    let shown = folder.display();
    match std::fs::symlink_metadata(&folder) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(parts),
        Err(e) => {
            parts.skipped.push(format!("part folder {shown}: {e}"));
            return Some(parts);
        }
        Ok(m) if m.file_type().is_symlink() => {
            parts.skipped.push(format!("part folder {shown}: {LINK}"));
            return Some(parts);
        }
        Ok(m) if !m.is_dir() => {
            parts
                .skipped
                .push(format!("part folder {shown}: not a folder: not read"));
            return Some(parts);
        }
        Ok(_) => {}
    }
    let rd = match std::fs::read_dir(&folder) {
        Ok(rd) => rd,
        Err(e) => {
            parts.skipped.push(format!("part folder {shown}: {e}"));
            return Some(parts);
        }
    };
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for e in rd {
        let e = match e {
            Ok(e) => e,
            Err(e) => {
                parts
                    .skipped
                    .push(format!("part folder {shown}: an entry not listed ({e})"));
                continue;
            }
        };
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Some(id) = stem(&p) else {
            parts
                .skipped
                .push(format!("part file {}: its name is not UTF-8", p.display()));
            continue;
        };
        let why = match e.file_type() {
            Err(e) => Some(e.to_string()),
            Ok(t) if t.is_dir() => Some("a folder, not a part file".to_owned()),
            Ok(t) => readable(t).err().map(str::to_owned),
        };
        match why {
            Some(why) => parts
                .skipped
                .push(format!("part file {}: {why}", p.display())),
            None => found.push((id.to_owned(), p)),
        }
    }
    found.sort();
    let mut room = room;
    for (id, p) in found {
        let text = match read_file(&p, room) {
            Ok(t) => {
                room -= t.len() as u64;
                Ok(t)
            }
            Err(Unread::TooMuch) => return None,
            Err(Unread::Missing) => Err("not found (removed while read)".to_owned()),
            Err(Unread::Skip(why)) => Err(why),
        };
        parts.list.push((id, p, text));
    }
    Some(parts)
}

/// A session's or a project's file, as JSON.
type Object = serde_json::Map<String, serde_json::Value>;

/// A JSON file's object: `Ok(None)` when it is not there; `Err`: why it
/// was not read (naming it, `what` its kind), a counted skip.
fn object_of(path: &Path, what: &str) -> Result<Option<Object>, String> {
    let why = |w: String| format!("{what} {}: {w}", path.display());
    let text = match read_file(path, MAX_DOCUMENT) {
        Ok(t) => t,
        Err(Unread::Missing) => return Ok(None),
        Err(Unread::Skip(w)) => return Err(why(w)),
        Err(Unread::TooMuch) => return Err(why("too large: not read".to_owned())),
    };
    match serde_json::from_str(&text) {
        Ok(serde_json::Value::Object(o)) => Ok(Some(o)),
        Ok(_) => Err(why("not a JSON object".to_owned())),
        Err(e) => Err(why(e.to_string())),
    }
}

/// A session's file, `session/<projectID>/<sessionID>.json` (its project
/// folder not known: each is tried), and its project id: its folder's
/// name, as the migration and the spec's §11 take ids from the file
/// names (else its `projectID`). Why a file or folder met was not read
/// goes to `skipped` (a linked project folder only when the session was
/// not found elsewhere).
fn session_of(
    storage: &Path,
    session: &str,
    skipped: &mut Vec<String>,
) -> Option<(Object, Option<String>)> {
    let name = format!("{session}.json");
    let folder = storage.join("session");
    match std::fs::symlink_metadata(&folder) {
        Ok(m) if m.file_type().is_symlink() => {
            skipped.push(format!("session folder {}: {LINK}", folder.display()));
            return None;
        }
        Ok(m) if m.is_dir() => {}
        _ => return None,
    }
    let rd = match std::fs::read_dir(&folder) {
        Ok(rd) => rd,
        Err(e) => {
            skipped.push(format!("session folder {}: {e}", folder.display()));
            return None;
        }
    };
    let mut linked = Vec::new();
    for e in rd {
        let e = match e {
            Ok(e) => e,
            Err(e) => {
                skipped.push(format!(
                    "session folder {}: an entry not listed ({e})",
                    folder.display()
                ));
                continue;
            }
        };
        match e.file_type() {
            Ok(t) if t.is_symlink() => {
                linked.push(e.path());
                continue;
            }
            Ok(t) if t.is_dir() => {}
            _ => continue,
        }
        match object_of(&e.path().join(&name), "session file") {
            Ok(Some(s)) => {
                let project = e.file_name().to_str().map(str::to_owned).or_else(|| {
                    s.get("projectID")
                        .and_then(|p| p.as_str())
                        .map(str::to_owned)
                });
                return Some((s, project));
            }
            Ok(None) => {}
            Err(why) => skipped.push(why),
        }
    }
    for l in linked {
        skipped.push(format!("session folder {}: {LINK}", l.display()));
    }
    None
}

/// A session's `directory` (its file, [`session_of`]), else its
/// project's `worktree` (`project/<projectID>.json`) when the message has
/// no `cwd`; `None` when neither says one (the message's `path.cwd` is
/// taken then).
fn directory_of(
    storage: &Path,
    session: Option<&(Object, Option<String>)>,
    cwd: Option<&str>,
    skipped: &mut Vec<String>,
) -> Option<String> {
    let (s, project) = session?;
    let dir = s.get("directory").and_then(|d| d.as_str());
    if let Some(d) = dir.filter(|d| !d.is_empty()) {
        return Some(d.to_owned());
    }
    if cwd.is_some_and(|c| !c.is_empty()) {
        return None;
    }
    let file = storage
        .join("project")
        .join(format!("{}.json", project.as_ref()?));
    object_of(&file, "project file")
        .unwrap_or_else(|why| {
            skipped.push(why);
            None
        })?
        .get("worktree")
        .and_then(|w| w.as_str())
        .map(str::to_owned)
}

/// A session's lineage root, as a database's rows find it
/// ([`crate::lineage`]): its `parentID`s followed up to a session that
/// names none or has no file (that id); in a cycle, its smallest id. (A
/// 1.x fork names no parent; the database finds its source by its copied
/// first message, the tree does not: see `docs/opencode.md`.)
fn root_of(storage: &Path, session: &str) -> String {
    let mut seen = vec![session.to_owned()];
    loop {
        let at = seen.last().expect("one at least");
        // (What is not read is counted by the message's read.)
        let parent = session_of(storage, at, &mut Vec::new()).and_then(|(s, _)| {
            s.get("parentID")
                .and_then(|p| p.as_str())
                .filter(|p| !p.is_empty() && p != at)
                .map(str::to_owned)
        });
        let Some(p) = parent else {
            return at.clone();
        };
        if let Some(i) = seen.iter().position(|s| *s == p) {
            return seen[i..].iter().min().expect("one at least").clone();
        }
        seen.push(p);
    }
}

/// The items of a message file: each row [`Emit::emit`] pushes, its
/// version the hash of what it was built from (the message's: the
/// message and its parts; a part's row: that part).
struct ToItems<'i, 'a> {
    items: &'i mut Items<'a>,
    message: &'i str,
    /// The whole message's version.
    whole: u64,
    /// Each part's id and the hash of its text (a row's part found in one
    /// look-up, not a search of the list: a message of many parts).
    parts: std::collections::HashMap<&'i str, u64>,
}

impl<'a> Out<'a> for ToItems<'_, 'a> {
    fn push(&mut self, report: &mut Report, row: Row<'a>) {
        let part = row
            .key
            .strip_prefix(self.message)
            .and_then(|k| k.strip_prefix('/'))
            .and_then(|pid| self.parts.get(pid));
        let version = part.map_or(self.whole, |v| *v);
        self.items.push(
            report,
            Item {
                key: row.key,
                version,
                positional: false,
                settled: true,
                fingerprint: row.fingerprint,
                line: row.line,
                byte: row.byte,
                record: row.record,
            },
        );
    }
}

impl MapDocument for Tree {
    /// Not compared: an unchanged file (the same inode, size and time) is
    /// not opened.
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
        let header = Header {
            // The databases' lineage: a message read from either is one
            // entry, emitted once.
            id: LINEAGE.to_owned(),
            cwd: String::new(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fingerprint(&[TAG, LINEAGE.as_bytes()]),
        };
        let (Some(id), Some(session), Some(storage)) =
            (stem(path), path.parent().and_then(stem), storage_of(path))
        else {
            return Err(SkipReason::Unsupported(
                "not an OpenCode message file: its name or its session folder's is not UTF-8"
                    .to_owned(),
            ));
        };
        if let Some((k, n)) = self.shard {
            if shard_of(&format!("{LINEAGE}:{}", root_of(storage, session)), n) != k {
                // Another shard's lineage (its database rows are that
                // shard's too): nothing of it here.
                return Ok(header);
            }
        }
        let text = std::str::from_utf8(&data[bom_len(data)..])
            .map_err(|e| SkipReason::Malformed(format!("message {id}: not UTF-8 ({e})")))?;
        let msg = match parse::<data::Msg<'_>>(text) {
            Ok(Node::Obj(m)) => m,
            Ok(_) => {
                return Err(SkipReason::Malformed(format!(
                    "message {id}: not a JSON object"
                )))
            }
            Err(e) => return Err(SkipReason::Malformed(format!("message {id}: {e}"))),
        };
        if msg.role.get() == Some("assistant")
            && !(msg.time.obj().is_some_and(|t| t.completed.is_set()) || msg.error.is_set())
        {
            // Not final: read again when OpenCode rewrites it, last, as
            // final.
            return Ok(header);
        }
        // The message with its parts is a document: at most
        // MAX_DOCUMENT bytes held.
        let room = MAX_DOCUMENT.saturating_sub(data.len() as u64);
        let Some(Parts {
            list: files,
            skipped,
        }) = parts_of(storage, id, room)
        else {
            return Err(SkipReason::Unsupported(format!(
                "message {id} with its parts is larger than the {} MiB a document may be: \
                 not read (nothing of it is emitted; read again when its file changes)",
                MAX_DOCUMENT >> 20
            )));
        };
        let mut bad = Vec::new();
        let parts: Vec<data::Part<'_>> = files
            .iter()
            .map(|(_, p, t)| {
                let parsed = match t {
                    Ok(t) => parse::<data::Part<'_>>(t).map_err(|e| e.to_string()),
                    Err(e) => Err(e.clone()),
                };
                parsed.map(Node::obj_or_default).unwrap_or_else(|e| {
                    bad.push(format!("part file {}: {e}", p.display()));
                    data::Part::default()
                })
            })
            .collect();
        // Each skip beside the message file a line of its report, as
        // every item is (records + no_record + skipped == lines).
        for why in bad {
            report.lines += 1;
            report.skip(1, 0, SkipReason::Malformed(why));
        }
        let mut unread = skipped;
        let m = MsgRef {
            rowid: 1,
            id,
            session,
            data: Ok(text),
            parts: files
                .iter()
                .map(|(pid, _, t)| (pid.as_str(), t.as_deref().map_err(|_| "unreadable")))
                .collect(),
            glances: Vec::new(),
        };
        let hash = |s: &str| fingerprint(&[b"opencode-tree-version", s.as_bytes()]);
        let mut whole = vec![text];
        whole.extend(files.iter().filter_map(|(_, _, t)| t.as_deref().ok()));
        let whole = fingerprint(&whole.iter().map(|s| s.as_bytes()).collect::<Vec<&[u8]>>());
        let found = session_of(storage, session, &mut unread);
        let directory = directory_of(
            storage,
            found.as_ref(),
            msg.path.obj().and_then(|p| p.0.get()),
            &mut unread,
        );
        for why in unread {
            report.lines += 1;
            report.skip(1, 0, SkipReason::Unsupported(why));
        }
        // A child session's (a subagent's) parent, as the database's
        // `parent_id` names it.
        let parent = found
            .as_ref()
            .and_then(|(s, _)| s.get("parentID"))
            .and_then(|p| p.as_str())
            .filter(|p| !p.is_empty() && *p != session)
            .map(|p| &*arena.alloc_str(&format!("{LINEAGE}:{p}")));
        items.set_parent_session(parent);
        let mut out = ToItems {
            items,
            message: id,
            whole,
            parts: files
                .iter()
                .map(|(pid, _, t)| (pid.as_str(), hash(t.as_deref().unwrap_or(""))))
                .collect(),
        };
        let mut bytes = 0;
        Emit {
            bytes: &mut bytes,
            directory: directory.as_deref(),
        }
        .emit(&m, &msg, &parts, arena, filter, report, &mut out);
        Ok(header)
    }
}
