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
//! its folder. Under `--shard K/N` every shard reads the tree, each the
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

/// A message's parts: `(part id, its file, its text or why none)`, by id.
fn parts_of(storage: &Path, message: &str) -> Vec<(String, PathBuf, Result<String, String>)> {
    let Ok(rd) = std::fs::read_dir(storage.join("part").join(message)) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
        .filter_map(|p| Some((stem(&p)?.to_owned(), p)))
        .collect();
    found.sort();
    found
        .into_iter()
        .map(|(id, p)| {
            let text = read_part(&p);
            (id, p, text)
        })
        .collect()
}

/// A part's (or a session's, a project's) file's text: at most
/// [`MAX_DOCUMENT`] bytes (a larger one is not read, as a larger message
/// file is not), UTF-8.
fn read_part(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let too_large = || {
        format!(
            "larger than the {} MiB a document may be: not read",
            MAX_DOCUMENT >> 20
        )
    };
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if f.metadata().is_ok_and(|m| m.len() > MAX_DOCUMENT) {
        return Err(too_large());
    }
    // (And no more than that of a file that grew since.)
    let mut b = Vec::new();
    f.take(MAX_DOCUMENT + 1)
        .read_to_end(&mut b)
        .map_err(|e| e.to_string())?;
    if b.len() as u64 > MAX_DOCUMENT {
        return Err(too_large());
    }
    String::from_utf8(b).map_err(|e| format!("not UTF-8 ({})", e.utf8_error()))
}

/// A JSON file's object, when it is one.
fn object_of(path: &Path) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::from_str(&read_part(path).ok()?).ok()? {
        serde_json::Value::Object(o) => Some(o),
        _ => None,
    }
}

/// A session's file, `session/<projectID>/<sessionID>.json` (its project
/// folder not known: each is tried), and its project id (`projectID`, else
/// its folder's name).
fn session_of(
    storage: &Path,
    session: &str,
) -> Option<(serde_json::Map<String, serde_json::Value>, Option<String>)> {
    let name = format!("{session}.json");
    let rd = std::fs::read_dir(storage.join("session")).ok()?;
    rd.flatten().find_map(|e| {
        let s = object_of(&e.path().join(&name))?;
        let project = s
            .get("projectID")
            .and_then(|p| p.as_str())
            .map(str::to_owned)
            .or_else(|| e.file_name().to_str().map(str::to_owned));
        Some((s, project))
    })
}

/// A session's `directory` (its file, [`session_of`]), else its
/// project's `worktree` (`project/<projectID>.json`) when the message has
/// no `cwd`; `None` when neither says one (the message's `path.cwd` is
/// taken then).
fn directory_of(
    storage: &Path,
    session: Option<&(serde_json::Map<String, serde_json::Value>, Option<String>)>,
    cwd: Option<&str>,
) -> Option<String> {
    let (s, project) = session?;
    let dir = s.get("directory").and_then(|d| d.as_str());
    if let Some(d) = dir.filter(|d| !d.is_empty()) {
        return Some(d.to_owned());
    }
    if cwd.is_some_and(|c| !c.is_empty()) {
        return None;
    }
    object_of(
        &storage
            .join("project")
            .join(format!("{}.json", project.as_ref()?)),
    )?
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
        let parent = session_of(storage, at).and_then(|(s, _)| {
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
    /// Each part's id and the hash of its text.
    parts: Vec<(&'i str, u64)>,
}

impl<'a> Out<'a> for ToItems<'_, 'a> {
    fn push(&mut self, report: &mut Report, row: Row<'a>) {
        let part = row
            .key
            .strip_prefix(self.message)
            .and_then(|k| k.strip_prefix('/'))
            .and_then(|pid| self.parts.iter().find(|(p, _)| *p == pid));
        let version = part.map_or(self.whole, |(_, v)| *v);
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
        let files = parts_of(storage, id);
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
        for why in bad {
            report.skip(1, 0, SkipReason::Malformed(why));
        }
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
        let found = session_of(storage, session);
        let directory = directory_of(
            storage,
            found.as_ref(),
            msg.path.obj().and_then(|p| p.0.get()),
        );
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
