//! The Gemini CLI adapter: the only module that knows Gemini CLI's key
//! names (see `docs/gemini-cli.md` for the mapping, and
//! `shared/spec/gemini-cli-format.md` for the format).
//!
//! A chat file (`tmp/<project id>/chats/session-<time>-<id8>.jsonl` under
//! Gemini's home, a subagent's one folder deeper) is event-sourced: a
//! metadata line, then message lines that are re-appended whole under the
//! same `id` whenever their tokens or tool calls change (the last copy
//! wins), `{"$set": {...}}` lines (with `messages`: a checkpoint replacing
//! the list) and `{"$rewindTo": id}` lines dropping a tail of the list.
//!
//! Every message id ever written is one record, with the content of its
//! last copy, handed out once, when final:
//! - a message is *held* while it is the last one written (a later copy
//!   may still replace it); a line that writes another message makes every
//!   held message final, and a `$rewindTo` makes the messages it drops
//!   final (their records say `rewound`);
//! - at the end of what a run reads, the held message is final when the
//!   file has been still (not modified) for [`STILL`]; else it stays held
//!   in the file's running context, which the engine saves with the file's
//!   checkpoint, and a later run (or the next pass of `--follow`) hands it
//!   out when it is final ([`Format::holds_back`] makes the engine open a
//!   file whose context holds one though the file is unchanged); the
//!   context keeps where its copy is (line and byte) and a hash of it,
//!   never its text (a checkpoint is not redacted: a secret in a held
//!   message would reach the state file and the store's checkpoint rows),
//!   and the later read takes the copy from the file again, the file being
//!   append-only (a copy that is not there any more, changed in place, is
//!   a counted skip at its line and byte);
//! - a later copy of a message already handed out is a *revision* of its
//!   record ([`Entry::revision`]): a store updates the message's row by
//!   key; NDJSON and Parquet count it (the run's `updated`) and write
//!   nothing; its usage is not counted again (the message's usage is
//!   counted once, with the copy that was final).
//!
//! Lines themselves are entries without a record (counted by their shape:
//! `metadata`, `message`, `$set`, `$rewindTo`); the records are entries of
//! their own, fingerprinted by session and message id, so that a hash
//! folder's copy and a slug folder's copy of one session give each message
//! once.

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bumpalo::Bump;
use simd_json::Node;

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{
    as_bool, as_str, as_u64, elements, fingerprint, is_blank, write_json, Fields, JsonParser,
    ParsedLine, PrefixLines,
};
use crate::line::{Entry, Header, LinePos, MapLine, Text};
use crate::line_reader::{bom_len, FileAt, ReadAt};
use crate::record::{Record, Role, RoleFilter, Usage};
use crate::report::{Report, SkipReason};
use crate::source::{
    headerless_body, headerless_fingerprint, open_headerless, resume_headerless, FileLines,
    LineDriver, Position, RecordSource, SourceOptions,
};
use crate::time::parse_iso_millis;

pub mod legacy;

/// How much of a file's start its [`Header`] is looked for in (bytes).
pub const PREFIX: usize = 64 << 10;

/// The provider usage is counted under.
pub const PROVIDER: &str = "google";

/// How long a file must have been still (its modification time that far
/// in the past) for the message written last to be final at the end of a
/// read. Gemini CLI re-appends a message as its tokens and tool calls
/// arrive, within a turn; five seconds without a write ends the turn's
/// writes in practice. `--follow` waits the same: its passes reopen a file
/// whose context holds a message ([`Format::holds_back`]).
pub const STILL: Duration = Duration::from_secs(5);

/// Gemini CLI's JSONL chat recordings.
///
/// - The file's [`Header`]: `id` is the `sessionId` of the first line that
///   has one (the file stem when none does), `timestamp` its `startTime`,
///   `cwd` the project recovered from the files beside the session's
///   folder (`.project_root`, `projects.json`, a known path whose SHA-256
///   is the folder's name or the `projectHash`), else a subagent's first
///   `directories` entry, else `""` (unknown): never a decoded folder name.
/// - Records' keys are `<sessionId>:<message id>`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gemini;

impl Format for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        // Its sources never read raw text.
        true
    }

    /// `session-*.jsonl` directly in a `chats/` folder (a main session),
    /// or `*.jsonl` in a folder of a `chats/` folder (a subagent's,
    /// `chats/<parent session id>/<session id>.jsonl`); and the legacy
    /// `.json` documents of the same names ([`legacy`]).
    fn is_session_file(&self, path: &Path) -> bool {
        if path.extension().is_none_or(|e| e != "jsonl" && e != "json") {
            return false;
        }
        let parent = path.parent();
        let named = |p: Option<&Path>| p.and_then(Path::file_name).is_some_and(|n| n == "chats");
        if named(parent) {
            return path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("session-"));
        }
        named(parent.and_then(Path::parent))
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = default_archives();
        if found.is_empty() {
            return Err(format!(
                "no Gemini CLI archive: no folder at {}",
                tried.join(", ")
            ));
        }
        Ok(found)
    }

    /// The first line that is not blank is Gemini CLI's metadata line: an
    /// object with a string `sessionId`, no `type`, and a `projectHash`,
    /// `startTime` or `lastUpdated`; or a `$set` / `$rewindTo` line.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        crate::json::with_scratch(|json, arena| {
            let mut lines = PrefixLines::new(&prefix[bom_len(prefix)..], whole);
            loop {
                let Some((_, line)) = lines.next() else {
                    return false;
                };
                if is_blank(line) {
                    continue;
                }
                arena.reset();
                return json.parse(line, arena, |parsed| {
                    let Ok((nodes, _)) = parsed else { return false };
                    let f = Fields::of(nodes);
                    (f.str("sessionId").is_some()
                        && f.get("type").is_none()
                        && ["projectHash", "startTime", "lastUpdated"]
                            .iter()
                            .any(|k| f.get(k).is_some()))
                        || f.get("$set").is_some()
                        || f.str("$rewindTo").is_some()
                });
            }
        }) || legacy_prefix(prefix)
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        if legacy::is_legacy(path) {
            return Ok(crate::document::open(
                &legacy::Legacy,
                legacy::TAG,
                input,
                path,
                None,
                opts,
            ));
        }
        let driver = open_headerless(input, path, opts, PREFIX, |prefix, whole| {
            let body = headerless_body(prefix, whole)?;
            Some(GeminiContext::new(
                header_of(body, whole, path),
                path,
                Running::default(),
                (0, 0),
            ))
        })?;
        Ok(Box::new(GeminiSource::new(driver.counting(opts), opts)))
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
        if legacy::is_legacy(path) {
            return crate::document::open(
                &legacy::Legacy,
                legacy::TAG,
                input,
                path,
                Some((header, context)),
                opts,
            );
        }
        let running = Running::decode(context).unwrap_or_default();
        let ctx = GeminiContext::new(header.clone(), path, running, (lines_before, byte));
        let driver = resume_headerless(input, path, ctx, byte, lines_before, opts);
        Box::new(GeminiSource::new(driver.counting(opts), opts))
    }

    /// A file's messages are held until final: its parts are read in one
    /// task, in order.
    fn needs_running_context(&self) -> bool {
        true
    }

    /// A legacy `.json` session is a document.
    fn is_document(&self, path: &Path) -> bool {
        legacy::is_legacy(path)
    }

    fn holds_back(&self, context: &[u8]) -> bool {
        Running::decode(context).is_some_and(|r| !r.held.is_empty() || !r.ready.is_empty())
    }

    /// A context of before ([`CONTEXT_TAG_WITH_TEXT`]: the held messages'
    /// JSON) as this release saves it (their places and hashes).
    fn context_without_text(&self, context: &[u8]) -> Option<Vec<u8>> {
        if context.first() != Some(&CONTEXT_TAG_WITH_TEXT) {
            return None;
        }
        Running::decode(context).map(|r| r.encode())
    }
}

/// A legacy session's first bytes (pretty-printed, its first line is
/// `{`): an object with `sessionId`, `projectHash` and `messages` keys.
fn legacy_prefix(prefix: &[u8]) -> bool {
    let body = &prefix[bom_len(prefix)..];
    let has = |k: &[u8]| memchr::memmem::find(body, k).is_some();
    body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
        && has(b"\"sessionId\"")
        && has(b"\"projectHash\"")
        && has(b"\"messages\"")
}

/// Gemini's `tmp/` folders that exist, and every place tried:
/// `$GEMINI_CLI_HOME/.gemini/tmp` (Gemini CLI's own variable replaces the
/// home folder) and each entry of `$GEMINI_DATA_DIR` (a comma list,
/// ccusage's: a folder searched as given), else `~/.gemini/tmp`.
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
    if let Ok(dir) = std::env::var("GEMINI_CLI_HOME") {
        if !dir.trim().is_empty() {
            candidates.push(expand(dir.trim()).join(".gemini").join("tmp"));
        }
    }
    if let Ok(list) = std::env::var("GEMINI_DATA_DIR") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            candidates.push(expand(entry));
        }
    }
    if candidates.is_empty() {
        candidates.extend(home.as_ref().map(|h| h.join(".gemini").join("tmp")));
    }
    let mut found = Vec::new();
    let mut tried = Vec::new();
    for c in candidates {
        if c.is_dir() {
            if !found.contains(&c) {
                found.push(c);
            }
        } else {
            tried.push(c.display().to_string());
        }
    }
    if found.is_empty() && tried.is_empty() {
        tried.push("~/.gemini/tmp (HOME is not set)".to_owned());
    }
    (found, tried)
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What the metadata line says: the session id, its start, the project
/// hash, a subagent's first workspace folder.
type Metadata = (String, Option<i64>, Option<String>, Option<String>);

/// The header from the first lines of `prefix`.
fn header_of(prefix: &[u8], whole: bool, path: &Path) -> Header {
    crate::json::with_scratch(|json, arena| {
        let mut meta: Option<Metadata> = None;
        for (_, line) in PrefixLines::new(prefix, whole) {
            if is_blank(line) {
                continue;
            }
            arena.reset();
            json.parse(line, arena, |parsed| {
                let Ok((nodes, _)) = parsed else { return };
                let f = Fields::of(nodes);
                if f.get("$set").is_some() || f.get("$rewindTo").is_some() || f.get("id").is_some()
                {
                    return;
                }
                if let Some(s) = f.str("sessionId").filter(|s| !s.is_empty()) {
                    let ts = f
                        .str("startTime")
                        .and_then(parse_iso_millis)
                        .or_else(|| f.str("lastUpdated").and_then(parse_iso_millis));
                    let dir = f
                        .get("directories")
                        .into_iter()
                        .flat_map(elements)
                        .find_map(as_str)
                        .map(str::to_owned);
                    meta = Some((
                        s.to_owned(),
                        ts,
                        f.str("projectHash").map(str::to_owned),
                        dir,
                    ));
                }
            });
            if meta.is_some() {
                break;
            }
        }
        let (id, timestamp, hash, dir) =
            meta.unwrap_or_else(|| (file_stem(path), None, None, None));
        Header {
            id,
            cwd: project_of(path, hash.as_deref(), dir),
            version: 0,
            timestamp,
            parent: None,
            fingerprint: headerless_fingerprint(b"gemini-file", path),
        }
    })
}

/// The project folder of a session file (see [`Gemini`]): `""` when it
/// cannot be known.
pub fn project_of(path: &Path, project_hash: Option<&str>, directory: Option<String>) -> String {
    let chats = path
        .ancestors()
        .skip(1)
        .take(2)
        .find(|p| p.file_name().is_some_and(|n| n == "chats"));
    let from_home = chats
        .and_then(Path::parent)
        .and_then(|id_dir| project_in_home(id_dir, project_hash));
    from_home.or(directory).unwrap_or_default()
}

/// The project of `tmp/<id>/`: its `.project_root`, else the path
/// `projects.json` gives the slug `<id>`, else a path of `projects.json` or
/// `trustedFolders.json` whose SHA-256 is `<id>` or `project_hash`.
fn project_in_home(id_dir: &Path, project_hash: Option<&str>) -> Option<String> {
    if let Ok(s) = std::fs::read_to_string(id_dir.join(".project_root")) {
        let s = s.trim_end_matches(['\n', '\r']);
        if !s.is_empty() {
            return Some(s.to_owned());
        }
    }
    let id = id_dir.file_name()?.to_str()?;
    let home = id_dir.parent()?.parent()?;
    let read = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(home.join(name)).ok()?).ok()
    };
    let projects = read("projects.json");
    let registry = projects
        .as_ref()
        .and_then(|v| v.get("projects"))
        .and_then(serde_json::Value::as_object);
    if let Some(map) = registry {
        if let Some((p, _)) = map.iter().find(|(_, v)| v.as_str() == Some(id)) {
            return Some(p.clone());
        }
    }
    let trusted = read("trustedFolders.json");
    let mut candidates: Vec<&String> = registry.into_iter().flat_map(|m| m.keys()).collect();
    if let Some(m) = trusted.as_ref().and_then(serde_json::Value::as_object) {
        candidates.extend(m.keys());
    }
    // A path's hash is its SHA-256 as 64 lower-case hex digits: compared
    // as the 32 bytes those digits spell (a name that is not such digits
    // is no path's hash).
    let wanted: Vec<[u8; 32]> = [Some(id), project_hash]
        .into_iter()
        .flatten()
        .filter_map(hex32)
        .collect();
    if wanted.is_empty() {
        return None;
    }
    candidates
        .into_iter()
        .find(|p| {
            use sha2::Digest;
            let d = sha2::Sha256::digest(p.as_bytes());
            wanted.iter().any(|w| d[..] == w[..])
        })
        .cloned()
}

/// The 32 bytes that 64 lower-case hex digits spell.
fn hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        *o = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// SHA-256 of a path as 64 lower-case hex digits (Gemini CLI's
/// `getProjectHash`).
pub fn sha256_hex(s: &str) -> String {
    use sha2::Digest;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let d = sha2::Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(64);
    for b in d {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

// ---------------------------------------------------------------------------
// The running state: messages held, the list's order, what was handed out

/// A message not handed out yet: its last copy, as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    id: String,
    /// The copy (empty while `reread` says it is to be read again).
    json: Vec<u8>,
    line: u64,
    /// Where the line that holds the copy starts (the line itself, or a
    /// `$set` line whose `messages` hold it).
    byte: u64,
    /// Decoded from a saved context, which keeps no text: the copy is read
    /// again from the file (at `byte`), and is the one whose [`json_hash`]
    /// this is.
    reread: Option<u64>,
    rewound: bool,
    /// Written only inside a `$set` checkpoint (no line of its own).
    checkpoint_only: bool,
    /// A later copy of a message handed out before: a revision.
    revision: bool,
    /// What a read that builds no record of it counts, taken from the copy
    /// when it was parsed on its line (`None` after a checkpoint's
    /// context is decoded: the JSON is parsed again then).
    counted: Option<Counted>,
}

/// What a message counts without its record: its type (for a type that
/// makes no record), its role (`None` for such a type), its model, usage
/// and time (an assistant's). A read whose filter builds no record of the
/// role (`stats`) counts a final message from it instead of parsing its
/// JSON a second time.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Counted {
    ty: String,
    role: Option<Role>,
    model: Option<String>,
    /// `input`, `output`, `cache_read`, `cache_write`, `total_tokens`.
    usage: Option<[u64; 5]>,
    /// The message's `timestamp` (the session's start when it has none).
    time: Option<i64>,
}

impl Counted {
    /// As [`record_of`] counts the message `nodes`.
    fn of(nodes: &[Node<'_>]) -> Counted {
        let f = Fields::of(nodes);
        let ty = f.str("type").unwrap_or("");
        let role = role_of(ty, f.get("content"));
        let assistant = role == Some(Role::Assistant);
        let usage = if assistant {
            f.get("tokens").and_then(usage_of)
        } else {
            None
        };
        Counted {
            // Named only for a type that makes no record.
            ty: if role.is_none() {
                ty.to_owned()
            } else {
                String::new()
            },
            role,
            model: f
                .str("model")
                .filter(|m| assistant && !m.is_empty())
                .map(str::to_owned),
            usage: usage.map(|u| {
                [
                    u.input,
                    u.output,
                    u.cache_read,
                    u.cache_write,
                    u.total_tokens,
                ]
            }),
            time: usage
                .is_some()
                .then(|| f.str("timestamp").and_then(parse_iso_millis))
                .flatten(),
        }
    }
}

/// What a later read of the file needs: the messages handed out (by id
/// hash), the list's order (by id hash, for rewinds), the messages held,
/// and those final but not handed out yet.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Running {
    done: HashSet<u64>,
    list: Vec<u64>,
    held: Vec<Held>,
    ready: VecDeque<Held>,
}

/// The context of a release before this one, which saved the held
/// messages' JSON (read back as it was; written again as
/// [`CONTEXT_TAG`]).
const CONTEXT_TAG_WITH_TEXT: u8 = 1;
/// The context: the held messages' places and hashes, no text.
const CONTEXT_TAG: u8 = 2;

/// The hash a saved context keeps of a held message's copy.
fn json_hash(json: &[u8]) -> u64 {
    fingerprint(&[b"gemini-copy", json])
}

fn id_hash(id: &str) -> u64 {
    fingerprint(&[b"gemini-id", id.as_bytes()])
}

impl Running {
    fn encode(&self) -> Vec<u8> {
        let mut b = vec![CONTEXT_TAG];
        let mut done: Vec<u64> = self.done.iter().copied().collect();
        done.sort_unstable();
        for set in [&done, &self.list] {
            b.extend_from_slice(&(set.len() as u64).to_le_bytes());
            for h in set {
                b.extend_from_slice(&h.to_le_bytes());
            }
        }
        for held in [
            self.held.iter().collect::<Vec<_>>(),
            self.ready.iter().collect(),
        ] {
            b.extend_from_slice(&(held.len() as u64).to_le_bytes());
            for h in held {
                let hash = h.reread.unwrap_or_else(|| json_hash(&h.json));
                for n in [h.line, h.byte, h.id.len() as u64, hash] {
                    b.extend_from_slice(&n.to_le_bytes());
                }
                b.push(
                    u8::from(h.rewound)
                        | (u8::from(h.checkpoint_only) << 1)
                        | (u8::from(h.revision) << 2),
                );
                b.extend_from_slice(h.id.as_bytes());
            }
        }
        b
    }

    /// `None` for an empty or damaged context. A context of before
    /// ([`CONTEXT_TAG_WITH_TEXT`]) has its messages' JSON; this one's are
    /// to be read again.
    fn decode(b: &[u8]) -> Option<Running> {
        let (&tag, mut rest) = b.split_first()?;
        if tag != CONTEXT_TAG && tag != CONTEXT_TAG_WITH_TEXT {
            return None;
        }
        let with_text = tag == CONTEXT_TAG_WITH_TEXT;
        let mut u64_at = || -> Option<u64> {
            let (n, r) = rest.split_first_chunk::<8>()?;
            rest = r;
            Some(u64::from_le_bytes(*n))
        };
        let mut r = Running::default();
        let n = u64_at()?;
        for _ in 0..n {
            r.done.insert(u64_at()?);
        }
        let n = u64_at()?;
        for _ in 0..n {
            r.list.push(u64_at()?);
        }
        for ready in [false, true] {
            let n = {
                let (c, r2) = rest.split_first_chunk::<8>()?;
                rest = r2;
                u64::from_le_bytes(*c)
            };
            for _ in 0..n {
                let mut nums = [0u64; 4];
                for x in &mut nums {
                    let (c, r2) = rest.split_first_chunk::<8>()?;
                    rest = r2;
                    *x = u64::from_le_bytes(*c);
                }
                let (&flags, r2) = rest.split_first()?;
                rest = r2;
                let id_len = usize::try_from(nums[2]).ok()?;
                let (json_len, reread) = if with_text {
                    (usize::try_from(nums[3]).ok()?, None)
                } else {
                    (0, Some(nums[3]))
                };
                if rest.len() < id_len.checked_add(json_len)? {
                    return None;
                }
                let id = std::str::from_utf8(&rest[..id_len]).ok()?.to_owned();
                let json = rest[id_len..id_len + json_len].to_vec();
                rest = &rest[id_len + json_len..];
                let h = Held {
                    id,
                    json,
                    line: nums[0],
                    byte: nums[1],
                    reread,
                    rewound: flags & 1 != 0,
                    checkpoint_only: flags & 2 != 0,
                    revision: flags & 4 != 0,
                    counted: None,
                };
                if ready {
                    r.ready.push_back(h);
                } else {
                    r.held.push(h);
                }
            }
        }
        rest.is_empty().then_some(r)
    }

    /// Every held message but `keep` is final.
    fn finalize_except(&mut self, keep: Option<u64>) {
        let (kept, fin): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| Some(id_hash(&h.id)) == keep);
        self.held = kept;
        for h in fin {
            self.done.insert(id_hash(&h.id));
            self.ready.push_back(h);
        }
    }

    /// A copy of message `id` (its JSON), written on a line of its own or
    /// inside a checkpoint; whether it is a late copy (of a message handed
    /// out): a copy on a line of its own is then a revision, ready at once
    /// (a checkpoint's copies of messages handed out revise nothing: they
    /// repeat the list).
    fn copy(
        &mut self,
        id: &str,
        json: &[u8],
        counted: Option<Counted>,
        (line, byte): (u64, u64),
        own_line: bool,
    ) -> bool {
        let h = id_hash(id);
        if self.done.contains(&h) {
            if own_line {
                self.ready.push_back(Held {
                    id: id.to_owned(),
                    json: json.to_vec(),
                    line,
                    byte,
                    reread: None,
                    rewound: false,
                    checkpoint_only: false,
                    revision: true,
                    counted,
                });
            }
            return true;
        }
        if let Some(held) = self.held.iter_mut().find(|x| x.id == id) {
            held.json.clear();
            held.json.extend_from_slice(json);
            held.reread = None;
            (held.line, held.byte) = (line, byte);
            held.checkpoint_only &= !own_line;
            held.counted = counted;
        } else {
            self.held.push(Held {
                id: id.to_owned(),
                json: json.to_vec(),
                line,
                byte,
                reread: None,
                rewound: false,
                checkpoint_only: !own_line,
                revision: false,
                counted,
            });
        }
        false
    }

    /// `$rewindTo`: `id` and every message after it leave the list; those
    /// held are final, rewound. An unknown id empties the list.
    fn rewind(&mut self, id: &str) {
        let h = id_hash(id);
        let at = self.list.iter().position(|x| *x == h).unwrap_or(0);
        let dropped: HashSet<u64> = self.list.drain(at..).collect();
        for held in &mut self.held {
            if dropped.contains(&id_hash(&held.id)) {
                held.rewound = true;
            }
        }
        let (rewound, kept): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|x| x.rewound);
        self.held = kept;
        for x in rewound {
            self.done.insert(id_hash(&x.id));
            self.ready.push_back(x);
        }
    }
}

// ---------------------------------------------------------------------------
// Lines

/// What the records of one file share, and the running state.
#[derive(Debug)]
pub struct GeminiContext {
    header: Header,
    /// `gemini:<file stem>`.
    source: String,
    running: RefCell<Running>,
    /// The line and byte of the last line mapped (where the read started,
    /// before one): the place of the entries of the messages it made final,
    /// so that entries come in the file's order (their records keep their
    /// last copy's line and byte).
    at: std::cell::Cell<(u64, u64)>,
}

impl GeminiContext {
    fn new(header: Header, path: &Path, running: Running, at: (u64, u64)) -> Self {
        GeminiContext {
            header,
            source: format!("gemini:{}", file_stem(path)),
            running: RefCell::new(running),
            at: std::cell::Cell::new(at),
        }
    }
}

impl MapLine for GeminiContext {
    fn header(&self) -> &Header {
        &self.header
    }

    fn running_context(&self) -> Vec<u8> {
        self.running.borrow().encode()
    }

    /// Every line is an entry without a record, counted by its shape
    /// (`$rewindTo`, `message`, `$set`, `metadata`, in the reader's order
    /// of tests); what it does to the messages goes to the running state.
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
        // A read that builds no record counts final messages from what
        // their copies count, taken here (no second parse).
        let counted = |m: &[Node<'_>]| filter.builds_none().then(|| Counted::of(m));
        if !matches!(nodes.first(), Some(Node::Object { .. })) {
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        }
        self.at.set((pos.line, pos.byte));
        let mut run = self.running.borrow_mut();
        let ty = if let Some(to) = f.str("$rewindTo") {
            run.rewind(to);
            "$rewindTo"
        } else if let Some(id) = f.str("id") {
            if !run.copy(id, raw, counted(nodes), (pos.line, pos.byte), true) {
                let h = id_hash(id);
                // A copy of the message written last, most often: the
                // list's end is looked at before the whole list.
                if run.list.last() != Some(&h) && !run.list.contains(&h) {
                    run.list.push(h);
                }
                run.finalize_except(Some(h));
            }
            "message"
        } else if let Some(set) = f
            .get("$set")
            .filter(|v| matches!(v.first(), Some(Node::Object { .. })))
        {
            if let Some(list) = Fields::of(set)
                .get("messages")
                .filter(|v| matches!(v.first(), Some(Node::Array { .. })))
            {
                let mut ids = Vec::new();
                let mut last = None;
                for m in elements(list) {
                    let Some(id) = Fields::of(m).str("id") else {
                        continue;
                    };
                    let mut json = bumpalo::collections::String::new_in(arena);
                    write_json(m, &mut json);
                    let h = id_hash(id);
                    ids.push(h);
                    last =
                        (!run.copy(id, json.as_bytes(), counted(m), (pos.line, pos.byte), false))
                            .then_some(h);
                }
                run.list = ids;
                run.finalize_except(last);
            }
            "$set"
        } else if f.str("sessionId").is_some() {
            "metadata"
        } else {
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        };
        report.entries.add(ty, 1);
        report.no_record += 1;
        Some(Entry {
            fingerprint: line_fingerprint(raw, pos),
            line: pos.line,
            byte: pos.byte,
            record: None,
            revision: false,
            parent_session: None,
        })
    }
}

/// A line's fingerprint: its place (line, byte, length) and its first and
/// last 64 bytes, which tell a copy of a session's line (a hash folder's
/// and a slug folder's copy of one file) from another line at the same
/// place. A line's entry carries no record (the messages' records have
/// fingerprints of their own, by session and message id), so only line
/// counts rest on it; hashing every byte of every line took a fifth of
/// `stats`' time on a generated home.
fn line_fingerprint(raw: &[u8], pos: LinePos) -> u64 {
    const ENDS: usize = 64;
    let head = &raw[..raw.len().min(ENDS)];
    let tail = &raw[raw.len().saturating_sub(ENDS)..];
    fingerprint(&[
        b"gemini-line",
        &pos.line.to_le_bytes(),
        &pos.byte.to_le_bytes(),
        &(raw.len() as u64).to_le_bytes(),
        head,
        tail,
    ])
}

// ---------------------------------------------------------------------------
// The source

/// A Gemini CLI source: the lines' entries, and between them the records
/// of the messages that became final.
struct GeminiSource<'d> {
    driver: LineDriver<FileLines<'d>, GeminiContext>,
    /// The records' scratch: a held message's JSON parsed again.
    json: JsonParser,
    arena: Bump,
    filter: RoleFilter,
    /// The lines are all read.
    ended: bool,
    /// The file's bytes by offset, when the engine gives them (else the
    /// file is opened by its path): where a held message's copy is read
    /// again.
    again: Option<Arc<dyn ReadAt>>,
    max_line: usize,
    /// Whether the held messages are final at the input's end, when the
    /// engine says ([`SourceOptions::end_final`]; else by the file's
    /// stillness).
    end_final: Option<bool>,
}

impl<'d> GeminiSource<'d> {
    fn new(driver: LineDriver<FileLines<'d>, GeminiContext>, opts: &SourceOptions) -> Self {
        GeminiSource {
            driver,
            json: JsonParser::new(),
            arena: Bump::new(),
            filter: opts.filter,
            ended: false,
            again: opts.again.clone(),
            max_line: opts.max_line_len(),
            end_final: opts.end_final,
        }
    }

    /// The line that starts at byte `at` of the file (without its `\n`);
    /// `None` when it is longer than the maximum line length.
    fn line_at(&self, at: u64) -> std::io::Result<Option<Vec<u8>>> {
        let input: Arc<dyn ReadAt> = match &self.again {
            Some(a) => Arc::clone(a),
            None => Arc::new(FileAt(Arc::new(std::fs::File::open(&self.driver.path)?))),
        };
        let mut buf = vec![0; 64 << 10];
        let mut line = Vec::new();
        let mut pos = at;
        loop {
            let n = input.read_at(&mut buf, pos)?;
            if let Some(end) = memchr::memchr(b'\n', &buf[..n]) {
                line.extend_from_slice(&buf[..end]);
                break;
            }
            line.extend_from_slice(&buf[..n]);
            if n < buf.len() || line.len() > self.max_line {
                break;
            }
            pos += n as u64;
        }
        Ok((line.len() <= self.max_line).then_some(line))
    }

    /// The copy of a held message decoded from a saved context, read
    /// again from the file: the line at its byte (a copy on a line of its
    /// own), or the message of that id in the line's `$set` list, whichever
    /// has the hash saved; `None` when neither has (the file was changed
    /// in place, not appended to).
    ///
    /// # Errors
    /// The file cannot be read.
    fn read_again(&mut self, h: &Held, hash: u64) -> Result<Option<Vec<u8>>, Error> {
        let Some(line) = self
            .line_at(h.byte)
            .map_err(|e| Error::io(&self.driver.path, e))?
        else {
            return Ok(None);
        };
        if json_hash(&line) == hash {
            return Ok(Some(line));
        }
        let arena = Bump::new();
        let bytes = arena.alloc_slice_copy(&line);
        Ok(self.json.parse(bytes, &arena, |parsed| {
            let (nodes, _) = parsed.ok()?;
            let set = Fields::of(nodes)
                .get("$set")
                .filter(|v| matches!(v.first(), Some(Node::Object { .. })))?;
            let list = Fields::of(set)
                .get("messages")
                .filter(|v| matches!(v.first(), Some(Node::Array { .. })))?;
            elements(list)
                .filter(|m| Fields::of(m).str("id") == Some(h.id.as_str()))
                .find_map(|m| {
                    let mut json = bumpalo::collections::String::new_in(&arena);
                    write_json(m, &mut json);
                    (json_hash(json.as_bytes()) == hash).then(|| json.as_bytes().to_vec())
                })
        }))
    }

    fn ready(&self) -> Option<Held> {
        let ctx = self.driver.ctx.as_ref()?;
        let h = ctx.running.borrow_mut().ready.pop_front();
        h
    }

    /// At the end of the lines: the held messages are final when the file
    /// is still.
    fn end(&mut self) {
        if self.ended {
            return;
        }
        self.ended = true;
        let still = self.end_final.unwrap_or_else(|| {
            std::fs::metadata(&self.driver.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|age| age >= STILL)
        });
        if let Some(ctx) = self.driver.ctx.as_ref() {
            if still && self.driver.report.pending == 0 {
                ctx.running.borrow_mut().finalize_except(None);
            }
        }
    }

    /// The entry of a final message, counted in the report.
    fn emit(&mut self, held: Held) -> Entry<'_> {
        self.arena.reset();
        let arena = &self.arena;
        let ctx = self.driver.ctx.as_ref().expect("a context");
        let report = &mut self.driver.report;
        let filter = self.filter;
        let mut fp = fingerprint(&[b"gemini-msg", ctx.header.id.as_bytes(), held.id.as_bytes()]);
        // A revision is counted in no report: the message was, once.
        let mut scratch = Report::default();
        let report = if held.revision {
            fp = crate::document::revision_fingerprint(fp, fingerprint(&[&held.json]));
            &mut scratch
        } else {
            report
        };
        let record = match &held.counted {
            // Counted as `record_of` counts it, whose record this read
            // does not build.
            Some(c) if c.role.is_none_or(|r| !filter.allows(r)) => {
                match c.role {
                    None => report.add_unknown_role(&c.ty),
                    Some(role) => {
                        if let Some([input, output, cache_read, cache_write, total_tokens]) =
                            c.usage
                        {
                            let u = Usage {
                                input,
                                output,
                                cache_read,
                                cache_write,
                                total_tokens,
                                ..Usage::default()
                            };
                            let at = crate::report::UsageAt {
                                seq: 0,
                                line: held.line,
                                time: c.time.or(ctx.header.timestamp),
                                reasoning: total_tokens.saturating_sub(
                                    [output, cache_read, cache_write]
                                        .into_iter()
                                        .fold(input, u64::saturating_add),
                                ),
                            };
                            report.add_usage_at(Some(PROVIDER), c.model.as_deref(), &u, true, at);
                        }
                        report.count_record(role, filter);
                    }
                }
                None
            }
            _ => {
                let json = arena.alloc_slice_copy(&held.json);
                self.json.parse(json, arena, |parsed| {
                    let (nodes, repaired) = parsed.ok()?;
                    record_of(ctx, nodes, &held, repaired, arena, filter, report)
                })
            }
        };
        if let Some(t) = self.driver.counts.as_mut() {
            t.after_line(&self.driver.report, true);
        }
        let (line, byte) = ctx.at.get();
        Entry {
            fingerprint: fp,
            line,
            byte,
            record,
            revision: held.revision,
            parent_session: None,
        }
    }

    /// Whether the record of `held` is handed out by the role filter
    /// (for a read of records alone).
    fn keeps(&mut self, held: &Held) -> bool {
        let arena = Bump::new();
        let json = arena.alloc_slice_copy(&held.json);
        self.json
            .parse(json, &arena, |parsed| {
                parsed.ok().and_then(|(nodes, _)| {
                    let f = Fields::of(nodes);
                    role_of(f.str("type")?, f.get("content"))
                })
            })
            .is_some_and(|r| self.filter.allows(r))
    }

    /// The next entry: a final message's record first, else the next
    /// line's entry (`all`; lines give no record), else, at the end of the
    /// lines, the messages the file's stillness makes final.
    fn next(&mut self, all: bool) -> Result<Option<Entry<'_>>, Error> {
        loop {
            if let Some(mut h) = self.ready() {
                if let Some(hash) = h.reread {
                    match self.read_again(&h, hash)? {
                        Some(json) => (h.json, h.reread) = (json, None),
                        None => {
                            // Made final, never handed out: a located,
                            // counted skip.
                            self.driver.report.skip(
                                h.line,
                                h.byte,
                                SkipReason::Malformed(format!(
                                    "message {:?}, held back by the last run, is not at its \
                                     place any more: the file was changed in place, not \
                                     appended to",
                                    h.id
                                )),
                            );
                            continue;
                        }
                    }
                }
                // A revision is an entry's (a read of records alone has
                // the record as it was first handed out).
                if all || (!h.revision && self.keeps(&h)) {
                    return Ok(Some(self.emit(h)));
                }
                // Counted, not handed out.
                let _ = self.emit(h);
                continue;
            }
            if self.ended {
                return Ok(None);
            }
            let driver: *mut LineDriver<FileLines<'d>, GeminiContext> = &mut self.driver;
            // SAFETY: the borrow checker cannot see that an entry returned
            // here ends the loop, while a `None` (no entry, nothing
            // borrowed) goes on with `self` (the case NLL rejects and
            // Polonius accepts). `driver` points into `self`, which this
            // call borrows mutably for as long as the returned entry lives;
            // nothing else touches the driver while the entry is alive.
            #[allow(unsafe_code)]
            let line = unsafe { (*driver).next_entry()? };
            match line {
                Some(e) if all => return Ok(Some(e)),
                Some(_) => {}
                None => self.end(),
            }
        }
    }
}

impl RecordSource for GeminiSource<'_> {
    fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
        Ok(self.next(false)?.and_then(|e| e.record))
    }

    fn report(&self) -> &Report {
        &self.driver.report
    }

    fn header(&self) -> Option<&Header> {
        self.driver.ctx.as_ref().map(MapLine::header)
    }

    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
        self.next(true)
    }

    fn next_entry_parsed(&mut self) -> Result<Option<(Entry<'_>, Option<ParsedLine<'_>>)>, Error> {
        Ok(self.next(true)?.map(|e| (e, None)))
    }

    fn position(&self) -> Position {
        self.driver.position()
    }

    fn running_context(&self) -> Vec<u8> {
        self.driver
            .ctx
            .as_ref()
            .map(MapLine::running_context)
            .unwrap_or_default()
    }

    fn entry_counts(&self) -> Option<&crate::LineCounts> {
        self.driver.entry_counts()
    }

    fn take_report(&mut self) -> Report {
        self.driver.take_report()
    }
}

// ---------------------------------------------------------------------------
// Records

/// The role of a message: `user` (`tool_result` when its content is only
/// `functionResponse` parts), `gemini` assistant, `info`, `error` and
/// `warning` system; another type makes no record.
fn role_of(ty: &str, content: Option<&[Node<'_>]>) -> Option<Role> {
    match ty {
        "user" => {
            let parts: Vec<&[Node<'_>]> = content
                .filter(|c| matches!(c.first(), Some(Node::Array { .. })))
                .into_iter()
                .flat_map(elements)
                .collect();
            let responses = !parts.is_empty()
                && parts
                    .iter()
                    .all(|p| Fields::of(p).get("functionResponse").is_some());
            Some(if responses {
                Role::ToolResult
            } else {
                Role::User
            })
        }
        "gemini" => Some(Role::Assistant),
        "info" | "error" | "warning" => Some(Role::System),
        _ => None,
    }
}

/// A `tokens` object in our fields, as ccusage counts it: `cached` is the
/// cache read; when `cached` is more than 0 and `total` is
/// `input + output + thoughts + tool` (the cached tokens inside the
/// input), `input` less `cached` is the input, else `input` is all input
/// (the total then counts the cached tokens beside it); `tool` is added to
/// the input; `output` the candidates (the thoughts are in the total
/// only); `total_tokens` the `total` written.
pub fn usage_of(v: &[Node<'_>]) -> Option<Usage> {
    if !matches!(v.first(), Some(Node::Object { .. })) {
        return None;
    }
    let f = Fields::of(v);
    let n = |k: &str| f.get(k).and_then(as_u64).unwrap_or(0);
    let (input, output, cached, thoughts, tool) = (
        n("input"),
        n("output"),
        n("cached"),
        n("thoughts"),
        n("tool"),
    );
    let total = f.get("total").and_then(as_u64).unwrap_or_else(|| {
        [output, thoughts, tool]
            .into_iter()
            .fold(input, u64::saturating_add)
    });
    let sum = [output, thoughts, tool]
        .into_iter()
        .fold(input, u64::saturating_add);
    let mut u = Usage::default();
    u.cache_read = cached;
    u.input = if cached > 0 && total == sum && Some(total) != sum.checked_add(cached) {
        input.saturating_sub(cached)
    } else {
        input
    };
    u.input = u.input.saturating_add(tool);
    u.output = output;
    u.total_tokens = total;
    Some(u)
}

/// The record of a final message (its last copy's JSON parsed), counted in
/// `report`; `None` when its type makes none or the filter holds it back.
fn record_of<'a>(
    ctx: &'a GeminiContext,
    nodes: &[Node<'a>],
    held: &Held,
    repaired: bool,
    arena: &'a Bump,
    filter: RoleFilter,
    report: &mut Report,
) -> Option<Record<'a>> {
    let f = Fields::of(nodes);
    let ty = f.str("type").unwrap_or("");
    let content = f.get("content");
    let Some(role) = role_of(ty, content) else {
        report.add_unknown_role(ty);
        return None;
    };
    let assistant = role == Role::Assistant;
    let model = f.str("model").filter(|m| assistant && !m.is_empty());
    let usage = if assistant {
        f.get("tokens").and_then(usage_of)
    } else {
        None
    };
    if let Some(u) = &usage {
        let at = crate::report::UsageAt {
            seq: 0,
            line: held.line,
            time: f
                .str("timestamp")
                .and_then(parse_iso_millis)
                .or(ctx.header.timestamp),
            // Thoughts: in the total, not in the output.
            reasoning: u.total_tokens.saturating_sub(
                [u.output, u.cache_read, u.cache_write]
                    .into_iter()
                    .fold(u.input, u64::saturating_add),
            ),
        };
        report.add_usage_at(Some(PROVIDER), model, u, true, at);
    }
    if !report.count_record(role, filter) {
        return None;
    }
    let mut text = Text::new(arena);
    let mut call: (Option<&'a str>, Option<&'a str>) = (None, None);
    let mut is_error = None;
    for t in f.get("thoughts").into_iter().flat_map(elements) {
        let t = Fields::of(t);
        let piece = match (t.str("subject"), t.str("description")) {
            (Some(s), Some(d)) => bumpalo::format!(in arena, "{}: {}", s, d).into_bump_str(),
            (Some(s), None) | (None, Some(s)) => s,
            (None, None) => continue,
        };
        text.kind("thought");
        text.push_decoded(piece);
    }
    match content {
        Some(c) if matches!(c.first(), Some(Node::Object { .. })) => {
            crate::formats::qwen::part(&mut text, c, &mut call, &mut is_error);
        }
        c => crate::formats::qwen::parts(&mut text, c, &mut call, &mut is_error),
    }
    let mut agent_id = None;
    for c in f.get("toolCalls").into_iter().flat_map(elements) {
        let c = Fields::of(c);
        let name = c.str("name").unwrap_or("");
        text.kind("toolCall");
        text.call(name, c.get("args"));
        if call.0.is_none() {
            call = (Some(name), c.str("id"));
        }
        if agent_id.is_none() {
            agent_id = c.str("agentId");
        }
        if c.str("status") == Some("error") {
            is_error = Some(true);
        }
    }
    if held.rewound {
        text.kind("rewound");
    }
    if held.checkpoint_only {
        text.kind("checkpoint");
    }
    if f.get("thought").and_then(as_bool) == Some(true) {
        text.kind("thinking");
    }
    let (text, kinds) = text.finish();
    let session = ctx.header.id.as_str();
    let id = arena.alloc_str(&held.id);
    let key = bumpalo::format!(in arena, "{}:{}", session, id).into_bump_str();
    Some(Record {
        role,
        text,
        project: &ctx.header.cwd,
        session,
        key,
        source: &ctx.source,
        id: Some(id),
        parent_id: None,
        line: held.line,
        byte: held.byte,
        entry: if ty.is_empty() { "message" } else { ty },
        message_role: None,
        kinds,
        timestamp: f
            .str("timestamp")
            .and_then(parse_iso_millis)
            .or(ctx.header.timestamp),
        provider: None,
        model,
        usage,
        stop_reason: None,
        tool_name: call.0,
        tool_call_id: call.1,
        is_error,
        custom_type: None,
        command: None,
        exit_code: None,
        repaired,
        agent_id,
        message_id: None,
        request_id: None,
        provisional: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project hash is SHA-256's lower-case hex digits: those digits
    /// read back as the digest's bytes; upper-case or other names are no
    /// hash.
    #[test]
    fn project_hashes_as_digits_and_bytes() {
        use sha2::Digest;
        let h = sha256_hex("abc");
        assert_eq!(
            h,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let d = sha2::Sha256::digest(b"abc");
        assert_eq!(hex32(&h).map(|b| b.to_vec()), Some(d.to_vec()));
        assert_eq!(hex32(&h.to_uppercase()), None);
        assert_eq!(hex32(&h[..62]), None);
        assert_eq!(hex32(&format!("{}g", &h[..63])), None);
    }

    fn held(id: &str, json: &[u8], line: u64, byte: u64) -> Held {
        Held {
            id: id.to_owned(),
            json: json.to_vec(),
            line,
            byte,
            reread: None,
            rewound: false,
            checkpoint_only: false,
            revision: false,
            counted: None,
        }
    }

    /// A context as the release before wrote it ([`CONTEXT_TAG_WITH_TEXT`]:
    /// the held messages' JSON after their ids).
    fn encode_with_text(r: &Running) -> Vec<u8> {
        let mut b = vec![CONTEXT_TAG_WITH_TEXT];
        let mut done: Vec<u64> = r.done.iter().copied().collect();
        done.sort_unstable();
        for set in [&done, &r.list] {
            b.extend_from_slice(&(set.len() as u64).to_le_bytes());
            for h in set {
                b.extend_from_slice(&h.to_le_bytes());
            }
        }
        for held in [r.held.iter().collect::<Vec<_>>(), r.ready.iter().collect()] {
            b.extend_from_slice(&(held.len() as u64).to_le_bytes());
            for h in held {
                for n in [h.line, h.byte, h.id.len() as u64, h.json.len() as u64] {
                    b.extend_from_slice(&n.to_le_bytes());
                }
                b.push(u8::from(h.rewound) | (u8::from(h.checkpoint_only) << 1));
                b.extend_from_slice(h.id.as_bytes());
                b.extend_from_slice(&h.json);
            }
        }
        b
    }

    #[test]
    fn a_context_keeps_places_and_hashes_never_text() {
        let json = br#"{"id":"g4","type":"gemini","content":"sk_live_OGAGOn80VSYfM9uoz02oPgfE"}"#;
        let mut r = Running::default();
        r.done.insert(id_hash("u1"));
        r.list = vec![id_hash("u1"), id_hash("g4")];
        r.held.push(held("g4", json, 16, 1234));
        r.ready.push_back(held("u3", br#"{"id":"u3"}"#, 14, 999));
        let b = r.encode();
        assert_eq!(b[0], CONTEXT_TAG);
        assert!(memchr::memmem::find(&b, b"sk_live").is_none());
        assert!(memchr::memmem::find(&b, br#""id":"u3""#).is_none());
        let back = Running::decode(&b).unwrap();
        assert_eq!(back.done, r.done);
        assert_eq!(back.list, r.list);
        let g4 = &back.held[0];
        assert_eq!(
            (g4.id.as_str(), g4.json.len(), g4.line, g4.byte, g4.reread),
            ("g4", 0, 16, 1234, Some(json_hash(json)))
        );
        assert_eq!(back.ready[0].reread, Some(json_hash(br#"{"id":"u3"}"#)));
        // Saved again before it is read again: the same bytes.
        assert_eq!(back.encode(), b);
    }

    /// A context of the release before reads back with its JSON (nothing
    /// to read again) and is written again without it.
    #[test]
    fn a_context_of_before_reads_back_and_is_written_without_text() {
        let json = br#"{"id":"g4","type":"gemini","content":"sk_live_OGAGOn80VSYfM9uoz02oPgfE"}"#;
        let r = Running {
            list: vec![id_hash("g4")],
            held: vec![held("g4", json, 16, 1234)],
            ..Running::default()
        };
        let old = encode_with_text(&r);
        let back = Running::decode(&old).unwrap();
        assert_eq!(back, r);
        let new = back.encode();
        assert!(memchr::memmem::find(&new, b"sk_live").is_none());
        assert_eq!(Gemini.context_without_text(&old), Some(new.clone()));
        assert_eq!(Gemini.context_without_text(&new), None);
        assert_eq!(
            Running::decode(&new).unwrap().held[0].reread,
            Some(json_hash(json))
        );
        // A damaged one is none (the file is read as if nothing were held).
        assert_eq!(Running::decode(&old[..old.len() - 1]), None);
        assert_eq!(Running::decode(&[3]), None);
    }
}
