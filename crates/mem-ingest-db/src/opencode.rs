//! OpenCode (1.2 and later): sessions in `opencode.db` (SQLite, WAL) in
//! its data folder, `message` and `part` rows with JSON in `data`
//! (`../shared/spec/opencode-format.md`; `docs/opencode.md`).
//!
//! Read after a cursor (see [`mem_ingest_parse::rows`]): the `message`
//! table's rowid high-water mark, guarded by the id of the row at the mark
//! (another id there, or none: the table is read again from the start,
//! the messages emitted known by id); assistant messages not yet
//! complete (no `time.completed` and no `error`, or a tool part still
//! `pending`/`running`) and user messages without parts yet are pending,
//! read again by id at every run until they are final. A final message
//! gives one record (its text, reasoning and tool calls), and each of its
//! finished tool parts a `tool_result` record of its own. Usage is counted
//! per LLM call, from the message's `step-finish` parts (the message's own
//! `tokens` are its last call's only), the message's `tokens` only where
//! it has no `step-finish` part; each call a row of its own, identified by
//! its content, so that the calls a fork copied count once.
//!
//! 2.x's `session_message` table is read after the 1.x tables ([`v2`]):
//! its rows written there alone. The pre-1.2 `storage/` JSON tree beside
//! the databases is read too ([`tree`]): its message files are documents,
//! whose messages are those of the database rows of the same ids, each
//! emitted once.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bumpalo::Bump;
use mem_ingest_parse::document;
use mem_ingest_parse::format::{BoxedSource, Format, Input};
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::report::UsageAt;
use mem_ingest_parse::rows::{self, Cursor, Database, MapRows, Row, Rows};
use mem_ingest_parse::sys;
use mem_ingest_parse::{
    Error, Header, Record, Report, Role, RoleFilter, SkipReason, SourceOptions, Usage,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::lenient::{glance, parse, Any, Glance, Node, Num};
use crate::lineage::Lineages;
use crate::sqlite::{fail, has_table, in_read, kept, open_read_only, Columns, RawRows};

mod tree;
mod v2;

/// The OpenCode format.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenCode;

/// Messages read at most in one batch (one read transaction).
const BATCH: i64 = 256;

/// The lineage of every OpenCode database: the channels' databases
/// (`opencode.db`, `opencode-<channel>.db`) hold the same messages under
/// the same ids, each emitted once.
const LINEAGE: &str = "opencode";

/// OpenCode's data folder: `$XDG_DATA_HOME/opencode`, else
/// `~/.local/share/opencode`, on every platform (its `Global.Path.data`).
pub fn data_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let base = xdg.or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local").join("share"))
    })?;
    Some(base.join("opencode"))
}

/// The database `OPENCODE_DB` names (OpenCode then writes there instead
/// of `opencode.db`): an absolute path as it is, a relative one in the
/// data folder; none when unset, empty or `:memory:` (a database that
/// never reaches the disk).
pub fn env_database() -> Option<PathBuf> {
    let v = std::env::var_os("OPENCODE_DB").filter(|v| !v.is_empty() && v != ":memory:")?;
    let p = PathBuf::from(v);
    if p.is_absolute() {
        Some(p)
    } else {
        Some(data_dir()?.join(p))
    }
}

/// Whether `name` is an OpenCode database's: `opencode.db` or a channel's
/// `opencode-<channel>.db`.
pub fn is_database_name(name: &str) -> bool {
    name == "opencode.db"
        || name
            .strip_prefix("opencode-")
            .and_then(|r| r.strip_suffix(".db"))
            .is_some_and(|c| !c.is_empty())
}

impl Format for OpenCode {
    fn name(&self) -> &'static str {
        "opencode"
    }

    fn records_cost(&self) -> bool {
        true
    }

    /// Its databases by name only, and the one `OPENCODE_DB` names: a
    /// folder walked never opens another database (nor the store) as
    /// OpenCode's; and the JSON tree's message files
    /// (`storage/message/<sessionID>/<messageID>.json`; their parts are
    /// read with them).
    fn is_session_file(&self, path: &Path) -> bool {
        path.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_database_name)
            || env_database().is_some_and(|d| d == path)
            || tree::is_message_file(path)
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    /// The data folder when it holds a database or a JSON tree's messages
    /// (`storage/message/`), and the database `OPENCODE_DB` names when it
    /// is a file outside it (one inside is found in the folder): all read,
    /// their messages deduplicated by id.
    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let dir = data_dir();
        let env = env_database();
        let mut found = Vec::new();
        let mut tried = Vec::new();
        match &dir {
            Some(d) => {
                let has_db = std::fs::read_dir(d).is_ok_and(|rd| {
                    rd.flatten().any(|e| {
                        e.file_type().is_ok_and(|t| t.is_file()) && self.is_session_file(&e.path())
                    })
                });
                if has_db || tree::has_tree(d) {
                    found.push(d.clone());
                } else {
                    tried.push(format!(
                        "no opencode.db (or opencode-<channel>.db) and no storage/message/ in {}",
                        d.display()
                    ));
                }
            }
            None => tried.push("neither XDG_DATA_HOME nor HOME is set".to_owned()),
        }
        if let Some(db) = env {
            let in_dir = !found.is_empty() && db.parent() == dir.as_deref();
            if !db.is_file() {
                tried.push(format!("no {} (OPENCODE_DB)", db.display()));
            } else if !in_dir {
                found.push(db);
            }
        }
        if found.is_empty() {
            return Err(format!("no OpenCode archive: {}", tried.join("; ")));
        }
        Ok(found)
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        if tree::is_message_file(path) {
            return Ok(document::open(
                &tree::Tree { shard: opts.shard },
                tree::TAG,
                input,
                path,
                None,
                opts,
            ));
        }
        Ok(rows::open(self, path, None, opts))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        _byte: u64,
        _lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        if tree::is_message_file(path) {
            return document::open(
                &tree::Tree { shard: opts.shard },
                tree::TAG,
                input,
                path,
                Some((header, context)),
                opts,
            );
        }
        rows::open(self, path, Some((header, context)), opts)
    }

    fn needs_running_context(&self) -> bool {
        true
    }

    /// A database; not a JSON tree's message file, a document.
    fn is_rows(&self, path: &Path) -> bool {
        !tree::is_message_file(path)
    }

    /// A JSON tree's message file ([`tree`]).
    fn is_document(&self, path: &Path) -> bool {
        tree::is_message_file(path)
    }

    /// Its sessions are lineages of their own (a root session and its
    /// children and forks): a database is read by every shard, each
    /// taking its lineages' rows.
    fn shards_rows(&self) -> bool {
        true
    }

    /// A database of this agent's tables under any name (a backup copy
    /// named as a PATH).
    fn detect_file(&self, path: &Path, prefix: &[u8]) -> bool {
        crate::sqlite::has_tables(path, prefix, &["message", "part"])
    }
}

impl MapRows for OpenCode {
    fn open(&self, path: &Path, cursor: &mut Cursor) -> Result<(Header, Box<dyn Database>), Error> {
        self.open_with(path, cursor, &SourceOptions::default())
    }

    fn open_with(
        &self,
        path: &Path,
        cursor: &mut Cursor,
        opts: &SourceOptions,
    ) -> Result<(Header, Box<dyn Database>), Error> {
        let conn = open_read_only(path)?;
        let mark = cursor.marks.get("message").copied();
        let v2_mark = cursor.marks.get(v2::TABLE).copied();
        let (tables, at_mark, v2) = in_read(&conn, |c| {
            let tables = has_table(c, "message")? && has_table(c, "part")?;
            let v2 = v2::probe(c, v2_mark)?;
            let at_mark = match (tables, mark) {
                (true, Some(m)) => c
                    .query_row("SELECT id FROM message WHERE rowid = ?1", [m], |r| {
                        r.get::<_, String>(0)
                    })
                    .optional()?,
                _ => None,
            };
            Ok((tables, at_mark, v2))
        })
        .map_err(|e| fail(path, "cannot read the database's schema", &e))?;
        if !tables {
            return Err(Error::io(
                path,
                std::io::Error::other(
                    "not an OpenCode database: no `message` and `part` tables (OpenCode 1.2 \
                     and later keep their sessions in them)",
                ),
            ));
        }
        let v2_moved = v2_mark.is_some()
            && v2.as_ref().and_then(|(_, at)| at.as_deref()).map(guard_of)
                != cursor.guards.get(v2::TABLE).copied();
        if v2_moved
            || mark.is_some()
                && at_mark.map(|id| guard_of(&id)) != cursor.guards.get("message").copied()
        {
            // Another row at the mark (a deleted row's rowid taken by a
            // new one), or none (a restored backup, a VACUUM that
            // renumbered): read again from the start; what was emitted
            // stays emitted.
            cursor.rescan();
        }
        let header = Header {
            id: LINEAGE.to_owned(),
            cwd: String::new(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fingerprint(&[b"opencode-db", LINEAGE.as_bytes()]),
        };
        let db = Db {
            conn,
            ahead: None,
            like: Sizes::default(),
            read_ahead: opts.jobs > 1,
            path: path.to_path_buf(),
            pending_read: false,
            sessions: HashMap::new(),
            bytes: 0,
            lineage: Lineages::new(LINEAGE),
            v2: v2.is_some(),
            in_v2: false,
            v2_pending_read: false,
        };
        Ok((header, Box::new(db)))
    }
}

fn guard_of(id: &str) -> u64 {
    fingerprint(&[b"opencode-guard", id.as_bytes()])
}

/// A session's columns a record takes.
#[derive(Debug, Clone)]
struct Session {
    directory: String,
}

/// A part's `data`, or what the column holds instead of text.
type PartData<'b> = Result<&'b str, &'static str>;

/// A span of a batch's text ([`Batch::text`]).
type Span = std::ops::Range<usize>;

/// A message row, as read in a batch's transaction: its texts are spans
/// of the batch's one text, so that a batch read on one thread and counted
/// on another is a few allocations, not three per row (every string freed
/// on the other thread went through the allocator's lock).
struct Msg {
    rowid: i64,
    id: Span,
    session: Span,
    /// Its `data`, or what the column holds instead of text.
    data: Result<Span, &'static str>,
    /// Its parts in [`Batch::parts`], by creation time then id.
    parts: std::ops::Range<usize>,
}

/// A part row: its id and `data` (or what the column holds instead).
struct Part {
    id: Span,
    data: Result<Span, &'static str>,
}

/// A message as the batch's text gives it.
struct MsgRef<'b> {
    rowid: i64,
    id: &'b str,
    session: &'b str,
    data: Result<&'b str, &'static str>,
    /// `(part id, data)`, by creation time then id.
    parts: Vec<(&'b str, PartData<'b>)>,
    /// Each part's glance, when the thread reading ahead took them (else
    /// empty: the counting thread glances): `None` where the glance was
    /// not sure.
    glances: Vec<Option<Glance<'b>>>,
}

/// How large a batch was: the next one is given room for as much (a
/// batch's text grown from nothing was copied over and over).
#[derive(Default, Clone, Copy)]
struct Sizes {
    text: usize,
    data: usize,
    msgs: usize,
    parts: usize,
}

/// A part's glance kept by the thread reading ahead: `type` and the tool
/// state's `status` ([`Glance`]) as spans of the batch's text.
type GlanceAt = (Option<Span>, Node<Option<Span>>);

/// A batch's messages with their parts, and the sessions they name not
/// known before.
#[derive(Default)]
struct Batch {
    /// Every id and session id of the batch, one after another.
    text: String,
    /// Every `data` of the batch, one after another, as SQLite gave it:
    /// checked as UTF-8 where it is read ([`Batch::data_str`]), on the
    /// counting thread (the reading one has the longer work).
    data: Vec<u8>,
    msgs: Vec<Msg>,
    parts: Vec<Part>,
    /// The glances (each part's `type` and tool state's `status` as spans
    /// of the text) of the batch's first parts, taken by the thread
    /// reading ahead for a read that builds no record: a [`Share`] of the
    /// counting thread's largest work done on the reading one. Empty
    /// otherwise.
    glances: Vec<Option<GlanceAt>>,
    sessions: Vec<(String, Session)>,
}

impl Batch {
    /// An empty batch with room for one as large as `like` was.
    fn sized_as(like: &Sizes) -> Batch {
        Batch {
            text: String::with_capacity(like.text + like.text / 4),
            data: Vec::with_capacity(like.data + like.data / 4),
            msgs: Vec::with_capacity(like.msgs),
            parts: Vec::with_capacity(like.parts),
            glances: Vec::new(),
            sessions: Vec::new(),
        }
    }

    /// The batch emptied, its room kept: a batch the counting thread
    /// took, given back to the reading one ([`Ahead::give_back`]) to read
    /// the next into (each batch's `data` allocated anew, the reading
    /// thread's first writes into it were page faults: half of a read's).
    fn emptied(mut self) -> Batch {
        self.text.clear();
        self.data.clear();
        self.msgs.clear();
        self.parts.clear();
        self.glances.clear();
        self.sessions.clear();
        self
    }

    fn sizes(&self) -> Sizes {
        Sizes {
            text: self.text.len(),
            data: self.data.len(),
            msgs: self.msgs.len(),
            parts: self.parts.len(),
        }
    }

    /// Column `i` of a row appended to the batch's `data`: its span, or
    /// what the column holds instead of text (as
    /// [`crate::sqlite::text_of`] says it; text that is not UTF-8 is said
    /// where it is read, [`Batch::data_str`]).
    // Inlined: one call a column (a call of its own cost the reading
    // thread 1% of its instructions).
    #[inline(always)]
    fn text_of(
        &mut self,
        r: &impl Columns,
        i: usize,
    ) -> rusqlite::Result<Result<Span, &'static str>> {
        use rusqlite::types::ValueRef;
        Ok(match r.value(i)? {
            ValueRef::Text(t) => {
                let from = self.data.len();
                self.data.extend_from_slice(t);
                Ok(from..self.data.len())
            }
            ValueRef::Null => Err("NULL"),
            ValueRef::Blob(_) => Err("a BLOB"),
            ValueRef::Integer(_) => Err("an integer"),
            ValueRef::Real(_) => Err("a real"),
        })
    }

    /// A `data` of the batch as text, or what it is instead (as
    /// [`crate::sqlite::text_of`] says it).
    fn data_str(&self, d: &Result<Span, &'static str>) -> Result<&str, &'static str> {
        let d = d.as_ref().map_err(|why| *why)?;
        simdutf8::basic::from_utf8(&self.data[d.clone()]).map_err(|_| "not UTF-8 text")
    }

    /// Column `i` (text, as `String` reads it) appended to the batch's
    /// text.
    // Inlined: one call a column (a call of its own cost the reading
    // thread 1% of its instructions).
    #[inline(always)]
    fn str_of(&mut self, r: &impl Columns, i: usize) -> rusqlite::Result<Span> {
        let from = self.text.len();
        let utf8 = match r.value(i)? {
            // An id is ASCII: a word at a time, where a UTF-8 check of a
            // short text cost ten times as much (a fifth of this thread's
            // own instructions went to ids).
            rusqlite::types::ValueRef::Text(t) if t.is_ascii() => {
                // SAFETY: ASCII is UTF-8.
                #[allow(unsafe_code)]
                Some(unsafe { std::str::from_utf8_unchecked(t) })
            }
            rusqlite::types::ValueRef::Text(t) => simdutf8::basic::from_utf8(t).ok(),
            _ => None,
        };
        match utf8 {
            Some(t) => self.text.push_str(t),
            // Not UTF-8 text: the error reading it as a `String` gives.
            None => self.text.push_str(&r.value_as::<String>(i)?),
        }
        Ok(from..self.text.len())
    }

    /// A message row (`MSG_COLS`), its parts none yet.
    fn push_msg(&mut self, r: &impl Columns) -> rusqlite::Result<()> {
        let rowid = r.value_as(0)?;
        let id = self.str_of(r, 1)?;
        let session = self.str_of(r, 2)?;
        let data = self.text_of(r, 3)?;
        let at = self.parts.len();
        self.msgs.push(Msg {
            rowid,
            id,
            session,
            data,
            parts: at..at,
        });
        Ok(())
    }

    /// Glances at the `data` ([`glance`]) of the batch's first parts,
    /// keeping spans: those of the first `share` sixteenths of the parts'
    /// bytes ([`Share`]; the counting thread glances at the rest), by
    /// whole messages.
    fn glance_parts(&mut self, share: u32) {
        let size = |p: &Part| p.data.as_ref().map_or(0, ExactSizeIterator::len);
        let total = self.parts.iter().map(size).sum::<usize>();
        let upto_bytes = total / Share::WHOLE as usize * share.min(Share::WHOLE) as usize;
        let mut upto = 0;
        let mut bytes = 0;
        for m in &self.msgs {
            if bytes >= upto_bytes {
                break;
            }
            bytes += self.parts[m.parts.clone()].iter().map(size).sum::<usize>();
            upto = m.parts.end;
        }
        let glances = self.parts[..upto]
            .iter()
            .map(|p| {
                let t = self.data_str(&p.data).ok()?;
                let at = |s: &str| {
                    let o = s.as_ptr() as usize - t.as_ptr() as usize;
                    o..o + s.len()
                };
                let g = glance(t, "type", "state", "status")?;
                Some((g.key.map(at), g.obj.map(|s| s.map(at))))
            })
            .collect();
        self.glances = glances;
    }

    fn str(&self, s: &Span) -> &str {
        &self.text[s.clone()]
    }

    /// Message `i` with its texts.
    fn msg(&self, i: usize) -> MsgRef<'_> {
        let m = &self.msgs[i];
        let parts: Vec<(&str, PartData<'_>)> = self.parts[m.parts.clone()]
            .iter()
            .map(|p| (self.str(&p.id), self.data_str(&p.data)))
            .collect();
        // A glance's spans are in its part's `data`.
        let glances = self
            .glances
            .get(m.parts.clone())
            .unwrap_or_default()
            .iter()
            .zip(&parts)
            .map(|(g, (_, d))| {
                let (key, obj) = g.as_ref()?;
                let d = d.ok()?;
                let of = |k: &Span| d.get(k.clone());
                Some(Glance {
                    key: key.as_ref().and_then(of),
                    obj: obj.clone().map(|s| s.as_ref().and_then(of)),
                })
            })
            .collect();
        MsgRef {
            rowid: m.rowid,
            id: self.str(&m.id),
            session: self.str(&m.session),
            data: self.data_str(&m.data),
            parts,
            glances,
        }
    }
}

/// An OpenCode database opened for one read.
struct Db {
    conn: Connection,
    /// The batches after the marks, read ahead on a thread of its own.
    ahead: Option<Ahead>,
    /// The size of the last batch read here.
    like: Sizes,
    /// Whether batches are read ahead (the run has several jobs).
    read_ahead: bool,
    path: PathBuf,
    pending_read: bool,
    sessions: HashMap<String, Session>,
    bytes: u64,
    /// Its sessions' lineages (parents, the shard read).
    lineage: Lineages,
    /// Whether it has 2.x's `session_message` table, read after the 1.x
    /// tables ([`v2`]), and whether the read is there.
    v2: bool,
    in_v2: bool,
    v2_pending_read: bool,
}

/// A message row's columns, as [`Batch::push_msg`] reads them.
macro_rules! msg_cols {
    () => {
        "SELECT rowid, id, session_id, data FROM message"
    };
}

const MSG_COLS: &str = msg_cols!();

/// A batch's messages after the mark.
const MSGS_AFTER: &str = concat!(msg_cols!(), " WHERE rowid > ?1 ORDER BY rowid LIMIT ?2");

/// The parts of the messages of a rowid range.
const PARTS_OF: &str = "SELECT m.rowid, p.id, p.time_created, p.data \
     FROM message m JOIN part p ON p.message_id = m.id \
     WHERE m.rowid >= ?1 AND m.rowid <= ?2";

/// The statements a read keeps prepared from batch to batch (the thread
/// reading ahead: each prepared once; a read on the caller's thread
/// prepares them at each batch).
#[derive(Default)]
struct Stmts<'c> {
    msgs: Option<RawRows<'c>>,
    parts: Option<RawRows<'c>>,
}

/// Reads the batches after a mark on a thread of its own, each in a read
/// transaction of its own on a read-only connection of its own (the
/// read's own serves the pending ids and the sessions' lineages), one
/// batch ahead of
/// the caller at most (a channel of one): while the caller counts a batch,
/// SQLite reads the next. The caller takes them in order, each starting
/// at the mark where the one before ended, as it would have read them; the
/// thread ends after the last (a batch not full) or a failure, and when
/// the caller goes (its end of the channel dropped), and is waited for
/// when the database is closed: no handle outlives the read.
struct Ahead {
    rx: Option<std::sync::mpsc::Receiver<Result<Batch, Error>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    share: std::sync::Arc<Share>,
    /// The counting thread kept on its CPU.
    kept: Apart,
    /// The batches taken, back to the reading thread ([`Ahead::give_back`]).
    given: std::sync::mpsc::SyncSender<Batch>,
}

/// How long the reading and counting threads are kept on CPUs apart at
/// the start of a read ([`sys::keep_on`]): long enough for a scheduler
/// that packs new threads together to have seen them run, short enough
/// that a CPU the system would rather give to another process is not
/// held from it for long. The generated 100 MB database's `stats --jobs
/// 2`, one sitting of 21 rounds, kept 0, 20 and 50 ms and the whole read:
/// medians 128, 125, 111 and 117 ms; in 31 rounds, not kept and kept
/// 50 ms: 88.5 and 83.0 ms.
const KEPT_APART: Duration = Duration::from_millis(50);

/// A thread kept on its CPU or off it ([`sys::keep_on`]) for
/// [`KEPT_APART`], and since when.
struct Apart(Option<(sys::Kept, Instant)>);

impl Apart {
    /// The calling thread kept on `cpu` (`apart: false`) or off it.
    fn keep(cpu: Option<usize>, apart: bool) -> Apart {
        Apart(cpu.map(|c| (sys::keep_on(c, apart), Instant::now())))
    }

    /// Lets the thread run where it could before, once kept for
    /// [`KEPT_APART`].
    fn check(&mut self) {
        if self
            .0
            .as_ref()
            .is_some_and(|(_, t)| t.elapsed() >= KEPT_APART)
        {
            self.0 = None;
        }
    }
}

/// How much of a batch's glancing the thread reading ahead takes, in
/// sixteenths of its parts' bytes, moved by whichever thread waits: the
/// reading thread finding the batch before still untaken (it is ahead:
/// one more sixteenth for it), the counting thread finding no batch ready
/// (it is ahead: one less). The two threads then end their batches at
/// about the same time on any machine and any load; a fixed half left the
/// reading thread a fifth longer than the counting one (SQLite's page
/// reads are most of its time) on the generated 100 MB database. Whichever
/// thread glances a part, its glance is the same: the output does not
/// depend on it.
struct Share(std::sync::atomic::AtomicU32);

impl Share {
    /// The whole of a batch.
    const WHOLE: u32 = 16;

    fn get(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// One sixteenth more (`up`) or less, within nothing and the whole.
    fn step(&self, up: bool) {
        let s = self.get();
        let s = if up {
            (s + 1).min(Self::WHOLE)
        } else {
            s.saturating_sub(1)
        };
        self.0.store(s, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Ahead {
    fn start(path: PathBuf, mut mark: i64, glances: bool) -> Ahead {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        // The batches taken, given back to be read into again.
        let (given, back) = std::sync::mpsc::sync_channel(2);
        let share = std::sync::Arc::new(Share(std::sync::atomic::AtomicU32::new(Share::WHOLE / 2)));
        let reading_share = share.clone();
        // The two threads start apart: the counting one kept where it is,
        // the reading one off that CPU, each for `KEPT_APART`
        // ([`sys::keep_on`]), then where the system puts them.
        let cpu = sys::current_cpu();
        let thread = std::thread::spawn(move || {
            let mut kept = Apart::keep(cpu, true);
            let conn = match open_read_only(&path) {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            // Declared after the connection: dropped (finalized) before it.
            let mut stmts = Stmts::default();
            let mut known = std::collections::HashSet::new();
            let mut like = Sizes::default();
            loop {
                let spare = back.try_recv().ok();
                let batch = read(
                    &conn,
                    &mut stmts,
                    &|s| known.contains(s),
                    None,
                    mark,
                    &like,
                    spare,
                )
                .map(|mut b| {
                    if glances {
                        b.glance_parts(reading_share.get());
                    }
                    b
                })
                .map_err(|e| fail(&path, "cannot read its messages", &e));
                let end = match &batch {
                    Ok(b) => {
                        like = b.sizes();
                        known.extend(b.sessions.iter().map(|(s, _)| s.clone()));
                        mark = b.msgs.last().map_or(mark, |m| m.rowid);
                        b.msgs.len() as i64 != BATCH
                    }
                    Err(_) => true,
                };
                kept.check();
                let sent = match tx.try_send(batch) {
                    Ok(()) => true,
                    Err(std::sync::mpsc::TrySendError::Full(batch)) => {
                        reading_share.step(true);
                        tx.send(batch).is_ok()
                    }
                    Err(std::sync::mpsc::TrySendError::Disconnected(_)) => false,
                };
                if !sent || end {
                    return;
                }
            }
        });
        Ahead {
            rx: Some(rx),
            thread: Some(thread),
            share,
            kept: Apart::keep(cpu, false),
            given,
        }
    }

    /// Gives a batch taken back to the reading thread, to read another
    /// into (dropped here when two wait already, or the thread ended).
    fn give_back(&self, b: Batch) {
        let _ = self.given.try_send(b);
    }

    /// The next batch: `None` when the thread ended before it (it ends
    /// after the last batch, which the caller does not ask past).
    fn next(&mut self) -> Option<Result<Batch, Error>> {
        self.kept.check();
        let rx = self.rx.as_ref()?;
        match rx.try_recv() {
            Ok(b) => Some(b),
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                self.share.step(false);
                rx.recv().ok()
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
        }
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // The thread, blocked sending a batch, sees the caller gone.
        self.rx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The messages of one batch with their parts, and the sessions they name
/// that `known` does not, in one read transaction: the `pending` ids, or
/// the batch after `mark`.
fn read<'c>(
    conn: &'c Connection,
    stmts: &mut Stmts<'c>,
    known: &dyn Fn(&str) -> bool,
    pending: Option<&[String]>,
    mark: i64,
    like: &Sizes,
    spare: Option<Batch>,
) -> rusqlite::Result<Batch> {
    let mut spare = spare;
    in_read(conn, |c| {
        let mut b = spare
            .take()
            .map_or_else(|| Batch::sized_as(like), Batch::emptied);
        match pending {
            Some(ids) => {
                let mut st = c.prepare_cached(&format!("{MSG_COLS} WHERE id = ?1"))?;
                for id in ids {
                    let mut rows = st.query([id])?;
                    if let Some(r) = rows.next()? {
                        b.push_msg(r)?;
                    }
                }
            }
            None => {
                // By SQLite's own calls, as the parts below.
                let mut st = kept(&mut stmts.msgs, conn, MSGS_AFTER)?;
                st.bind(1, mark)?;
                st.bind(2, BATCH)?;
                while st.step()? {
                    b.push_msg(&*st)?;
                }
            }
        }
        match (pending, b.msgs.first(), b.msgs.last()) {
            (None, Some(first), Some(last)) => {
                // The batch's parts in one statement (the batch is its
                // rowid range, in this transaction), each message's put
                // in OpenCode's order, `time_created` then `id`, as SQLite
                // orders them. Each part found by its message's rowid
                // (the batch's messages are in rowid order).
                let (lo, hi) = (first.rowid, last.rowid);
                // Read by SQLite's own calls ([`RawRows`]): a sixth of
                // this thread's instructions were rusqlite's column reads.
                let mut st = kept(&mut stmts.parts, conn, PARTS_OF)?;
                st.bind(1, lo)?;
                st.bind(2, hi)?;
                // (message, time_created, part)
                let mut found: Vec<(usize, SqlValue, Part)> = Vec::with_capacity(like.parts);
                // The join gives the rows message by message in rowid
                // order (its outer loop): each message the one at the
                // cursor or after it, else (another plan) found by search.
                let mut at = 0;
                while st.step()? {
                    let rowid: i64 = st.get_as(0)?;
                    while b.msgs.get(at).is_some_and(|m| m.rowid < rowid) {
                        at += 1;
                    }
                    let i = if b.msgs.get(at).is_some_and(|m| m.rowid == rowid) {
                        at
                    } else {
                        match b.msgs.binary_search_by_key(&rowid, |m| m.rowid) {
                            Ok(i) => i,
                            Err(_) => continue,
                        }
                    };
                    let time: SqlValue = st.get_as(2)?;
                    let id = b.str_of(&*st, 1)?;
                    let data = b.text_of(&*st, 3)?;
                    found.push((i, time, Part { id, data }));
                }
                drop(st);
                found.sort_by(|x, y| {
                    x.0.cmp(&y.0)
                        .then_with(|| sql_order(&x.1, &y.1))
                        .then_with(|| b.str(&x.2.id).cmp(b.str(&y.2.id)))
                });
                b.parts.reserve(found.len());
                let mut at = 0;
                for (i, m) in b.msgs.iter_mut().enumerate() {
                    let from = b.parts.len();
                    while found.get(at).is_some_and(|f| f.0 == i) {
                        b.parts.push(std::mem::replace(
                            &mut found[at].2,
                            Part {
                                id: 0..0,
                                data: Err(""),
                            },
                        ));
                        at += 1;
                    }
                    m.parts = from..b.parts.len();
                }
            }
            _ => {
                let mut st = c.prepare_cached(
                    "SELECT id, data FROM part WHERE message_id = ?1 ORDER BY time_created, id",
                )?;
                for i in 0..b.msgs.len() {
                    let from = b.parts.len();
                    let id = b.str(&b.msgs[i].id).to_owned();
                    let mut rows = st.query([&id])?;
                    while let Some(r) = rows.next()? {
                        let id = b.str_of(r, 0)?;
                        let data = b.text_of(r, 1)?;
                        b.parts.push(Part { id, data });
                    }
                    b.msgs[i].parts = from..b.parts.len();
                }
            }
        }
        let mut sessions: Vec<(String, Session)> = Vec::new();
        let mut st = c.prepare_cached("SELECT directory FROM session WHERE id = ?1")?;
        // A batch's messages come session by session, mostly: the one
        // before's session is looked up once (a hash of each message's
        // session was one in forty of the reading thread's instructions).
        let mut before: Option<&str> = None;
        for m in &b.msgs {
            let session = b.str(&m.session);
            if before == Some(session) {
                continue;
            }
            before = Some(session);
            if known(session) || sessions.iter().any(|(s, _)| s == session) {
                continue;
            }
            let directory: Option<String> = st.query_row([session], |r| r.get(0)).optional()?;
            sessions.push((
                session.to_owned(),
                Session {
                    directory: directory.unwrap_or_default(),
                },
            ));
        }
        b.sessions = sessions;
        Ok(b)
    })
}

/// SQLite's order of two values (its `ORDER BY` with the BINARY
/// collation): NULL, then numbers (integers and reals by value), then
/// text, then blobs (bytes compared).
fn sql_order(a: &SqlValue, b: &SqlValue) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let rank = |v: &SqlValue| match v {
        SqlValue::Null => 0,
        SqlValue::Integer(_) | SqlValue::Real(_) => 1,
        SqlValue::Text(_) => 2,
        SqlValue::Blob(_) => 3,
    };
    // An integer against a real, exactly (SQLite's sqlite3IntFloatCompare).
    #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
    let int_real = |i: i64, r: f64| -> Ordering {
        if r < -9_223_372_036_854_775_808.0 {
            return Ordering::Greater;
        }
        if r >= 9_223_372_036_854_775_808.0 {
            return Ordering::Less;
        }
        let y = r as i64;
        match i.cmp(&y) {
            Ordering::Equal => 0.0f64
                .partial_cmp(&(r - y as f64))
                .unwrap_or(Ordering::Equal),
            o => o,
        }
    };
    match (a, b) {
        (SqlValue::Integer(x), SqlValue::Integer(y)) => x.cmp(y),
        (SqlValue::Real(x), SqlValue::Real(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        (SqlValue::Integer(x), SqlValue::Real(y)) => int_real(*x, *y),
        (SqlValue::Real(x), SqlValue::Integer(y)) => int_real(*y, *x).reverse(),
        (SqlValue::Text(x), SqlValue::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (SqlValue::Blob(x), SqlValue::Blob(y)) => x.cmp(y),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A message's usage from a `tokens` object and a cost: `input` is the
/// non-cached input, `output` excludes reasoning; the total is the
/// provider's `total` where larger than the sum of the parts (as ccusage
/// 20.0.24 takes it).
fn usage_of(tokens: &Node<data::Tokens>, cost: f64) -> (Usage, u64) {
    let n = |v: Num| v.as_u64().unwrap_or(0);
    let t = tokens.obj();
    let cache = t.and_then(|t| t.cache.obj());
    let input = t.map_or(0, |t| n(t.input));
    let output = t.map_or(0, |t| n(t.output));
    let reasoning = t.map_or(0, |t| n(t.reasoning));
    let cache_read = cache.map_or(0, |c| n(c.read));
    let cache_write = cache.map_or(0, |c| n(c.write));
    let sum = input
        .saturating_add(output)
        .saturating_add(reasoning)
        .saturating_add(cache_read)
        .saturating_add(cache_write);
    let usage = Usage {
        input,
        output,
        cache_read,
        cache_write,
        total_tokens: sum.max(t.map_or(0, |t| n(t.total))),
        cost,
    };
    (usage, reasoning)
}

/// An LLM call's identity: the answer's time, the call's place in it
/// (`u64::MAX`: the message's own tokens), its tokens, cost, provider and
/// model; a fork's copy of the call has the same.
fn call_fingerprint(
    time: Option<i64>,
    n: u64,
    u: &Usage,
    reasoning: u64,
    provider: Option<&str>,
    model: Option<&str>,
) -> u64 {
    fingerprint(&[
        b"opencode-call",
        &time.unwrap_or(i64::MIN).to_le_bytes(),
        &n.to_le_bytes(),
        &u.input.to_le_bytes(),
        &u.output.to_le_bytes(),
        &reasoning.to_le_bytes(),
        &u.cache_read.to_le_bytes(),
        &u.cache_write.to_le_bytes(),
        &u.total_tokens.to_le_bytes(),
        &u.cost.to_bits().to_le_bytes(),
        provider.unwrap_or("").as_bytes(),
        model.unwrap_or("").as_bytes(),
    ])
}

fn is_zero(u: &Usage) -> bool {
    u.total_tokens == 0 && u.cost == 0.0
}

/// Whether a message is final: a user message once it has parts; an
/// assistant message once complete (`time.completed`, or an `error`) with
/// no tool part still pending or running.
fn is_final(data: &data::Msg<'_>, parts: &[data::Part<'_>]) -> bool {
    match data.role.get() {
        Some("user") => !parts.is_empty(),
        Some("assistant") => {
            let done = data.time.obj().is_some_and(|t| t.completed.is_set()) || data.error.is_set();
            done && parts.iter().all(|p| {
                p.kind() != Some("tool") || matches!(p.status(), Some("completed" | "error"))
            })
        }
        _ => true,
    }
}

/// `parts` one after another in the arena (a row's key), where a
/// `format!` then a copy cost a formatter's run and an allocation.
fn join<'a>(arena: &'a Bump, parts: &[&str]) -> &'a str {
    let mut s =
        bumpalo::collections::String::with_capacity_in(parts.iter().map(|p| p.len()).sum(), arena);
    for p in parts {
        s.push_str(p);
    }
    s.into_bump_str()
}

/// A record with the fields every OpenCode record shares.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record<'a>(
    role: Role,
    text: &'a str,
    kinds: &'a [&'a str],
    project: &'a str,
    session: &'a str,
    source: &'a str,
    key: &'a str,
    id: &'a str,
    line: u64,
    timestamp: Option<i64>,
) -> Record<'a> {
    Record {
        role,
        text,
        project,
        session,
        key,
        source,
        id: Some(id),
        parent_id: None,
        line,
        byte: 0,
        entry: "message",
        message_role: None,
        kinds,
        timestamp,
        provider: None,
        model: None,
        usage: None,
        stop_reason: None,
        tool_name: None,
        tool_call_id: None,
        is_error: None,
        custom_type: None,
        command: None,
        exit_code: None,
        repaired: false,
        agent_id: None,
        message_id: None,
        request_id: None,
        provisional: false,
    }
}

impl Db {
    /// Counts and pushes the rows of one final message ([`Emit::emit`]),
    /// its project its session's directory.
    #[allow(clippy::too_many_arguments)]
    fn emit<'a>(
        &mut self,
        m: &MsgRef<'_>,
        data: &data::Msg<'_>,
        parts: &[data::Part<'_>],
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) {
        Emit {
            bytes: &mut self.bytes,
            directory: self.sessions.get(m.session).map(|s| s.directory.as_str()),
        }
        .emit(m, data, parts, arena, filter, report, rows);
    }
}

/// Where the rows of a message go: a database's batch ([`Rows`]), or the
/// items of a JSON tree's message file ([`tree`]).
trait Out<'a> {
    /// Adds the next row, counted in `report`.
    fn push(&mut self, report: &mut Report, row: Row<'a>);
}

impl<'a> Out<'a> for Rows<'a> {
    fn push(&mut self, report: &mut Report, row: Row<'a>) {
        Rows::push(self, report, row);
    }
}

/// What the rows of one message take from where it was read: the bytes
/// read before it (grown by its own), and its session's directory.
struct Emit<'s> {
    bytes: &'s mut u64,
    /// The session's `directory` (the project; the message's `path.cwd`
    /// where none or empty).
    directory: Option<&'s str>,
}

impl Emit<'_> {
    /// Counts and pushes the rows of one final message: its record, each
    /// LLM call's usage (a row without a record), each finished tool
    /// part's `tool_result`. Its record's text is built only when the role
    /// filter keeps it (`stats` keeps none).
    #[allow(clippy::too_many_lines, clippy::too_many_arguments)]
    fn emit<'a>(
        &mut self,
        m: &MsgRef<'_>,
        data: &data::Msg<'_>,
        parts: &[data::Part<'_>],
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut impl Out<'a>,
    ) {
        let len = |d: &PartData<'_>| d.map_or(0, str::len);
        *self.bytes += (len(&m.data) + m.parts.iter().map(|p| len(&p.1)).sum::<usize>()) as u64;
        let line = u64::try_from(m.rowid).unwrap_or(0);
        let byte = *self.bytes;
        let id: &'a str = arena.alloc_str(m.id);
        let time = data.time.obj().and_then(|t| t.created.as_i64());
        let role = match data.role.get() {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                report.add_unknown_role(other.unwrap_or("(none)"));
                report.no_record += 1;
                rows.push(
                    report,
                    Row {
                        key: id,
                        fingerprint: fingerprint(&[b"opencode", id.as_bytes()]),
                        line,
                        byte,
                        record: None,
                    },
                );
                return;
            }
        };
        let assistant = role == Role::Assistant;
        let provider = data.provider.get().filter(|_| assistant);
        let model = data.model.get().filter(|_| assistant);
        // Usage: each LLM call's step-finish part, a row of its own (no
        // record) whose identity is the call: the answer's time, the
        // call's place in it, its tokens and cost. A fork (`/fork`) copies
        // the messages and parts under new ids with the same data: its
        // copied calls are the same rows, counted once in the lineage.
        let mut total: Option<Usage> = None;
        if assistant {
            let mut call = |n: u64, u: Usage, reasoning: u64, report: &mut Report, key: &'a str| {
                // Every call is at the answer's line: its place tells
                // them apart (a store's row key); the fallback of no
                // step-finish part (`u64::MAX`) is the line's one usage.
                let at = UsageAt {
                    line,
                    time,
                    reasoning,
                    seq: u32::try_from(n).unwrap_or(0),
                };
                report.add_usage_at(provider, model, &u, true, at);
                total.get_or_insert_with(Usage::default).add(&u);
                let fp = call_fingerprint(time, n, &u, reasoning, provider, model);
                rows.push(
                    report,
                    Row {
                        key,
                        fingerprint: fp,
                        line,
                        byte,
                        record: None,
                    },
                );
            };
            let mut n = 0;
            for (p, (pid, _)) in parts.iter().zip(&m.parts) {
                if p.kind() != Some("step-finish") {
                    continue;
                }
                let cost = p.cost.as_f64().unwrap_or(0.0);
                let (u, reasoning) = usage_of(&p.tokens, cost);
                call(n, u, reasoning, report, join(arena, &[m.id, "/", *pid]));
                n += 1;
            }
            if n == 0 {
                // No step-finish part (a build that wrote none): the
                // message's own tokens, its last call's.
                let cost = data.cost.as_f64().unwrap_or(0.0);
                let (u, reasoning) = usage_of(&data.tokens, cost);
                if !is_zero(&u) {
                    call(
                        u64::MAX,
                        u,
                        reasoning,
                        report,
                        join(arena, &[m.id, "/tokens"]),
                    );
                }
            }
        }
        let error = data.error.is_set().then_some(&data.error);
        let error_name = || error.and_then(|e| e.obj()).and_then(|e| e.name.get());
        // The fields every record of the message shares, in the arena once
        // a record is built.
        let mut shared: Option<(&'a str, &'a str, &'a str)> = None;
        let mut shared_of = |arena: &'a Bump| {
            *shared.get_or_insert_with(|| {
                let session: &'a str = arena.alloc_str(m.session);
                let source: &'a str = arena.alloc_str(&format!("opencode:{}", m.session));
                let directory = self
                    .directory
                    .filter(|d| !d.is_empty())
                    .or_else(|| data.path.obj().and_then(|p| p.0.get()))
                    .unwrap_or("");
                (session, source, &*arena.alloc_str(directory))
            })
        };
        let rec = report.count_record(role, filter).then(|| {
            let (session, source, project) = shared_of(arena);
            // The message's record.
            let mut body = crate::Body::default();
            let mut first_call: Option<(&str, &str)> = None;
            for p in parts {
                match p.kind().unwrap_or("") {
                    "text" => {
                        if let Some(t) = p.text.get().filter(|t| !t.is_empty()) {
                            body.kind("text");
                            body.piece(t);
                        }
                    }
                    "reasoning" => {
                        if let Some(t) = p.text.get().filter(|t| !t.is_empty()) {
                            body.kind("thinking");
                            body.piece(t);
                        }
                    }
                    "tool" => {
                        let name = p.tool.get().unwrap_or("");
                        body.kind("toolCall");
                        let input = p
                            .state()
                            .and_then(|s| s.input.as_ref())
                            .map(Value::to_string)
                            .unwrap_or_default();
                        body.piece(&format!("{name} {input}"));
                        if first_call.is_none() {
                            first_call = Some((name, p.call.get().unwrap_or("")));
                        }
                    }
                    "file" => {
                        body.kind("file");
                        let name = p
                            .filename
                            .get()
                            .or_else(|| p.source.obj().and_then(|s| s.0.get()));
                        if let Some(n) = name {
                            body.piece(&format!("[file {n}]"));
                        }
                    }
                    "compaction" => body.kind("compaction"),
                    "subtask" => {
                        body.kind("subtask");
                        if let Some(t) = p.prompt.get() {
                            body.piece(t);
                        }
                    }
                    _ => {}
                }
            }
            if data.summary == Any::True {
                body.kind("summary");
            }
            if let Some(e) = error {
                body.kind("error");
                let e = e.obj();
                let name = e.and_then(|e| e.name.get()).unwrap_or("error");
                let msg = e.and_then(|e| e.data.obj()).and_then(|d| d.0.get());
                match msg {
                    Some(msg) => body.piece(&format!("{name}: {msg}")),
                    None => body.piece(name),
                }
            }
            let key: &'a str = arena.alloc_str(&format!("{}:{}", m.session, m.id));
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&body.kinds);
            let mut r = record(
                role,
                arena.alloc_str(&body.text),
                kinds,
                project,
                session,
                source,
                key,
                id,
                line,
                time,
            );
            r.provider = provider.map(|s| &*arena.alloc_str(s));
            r.model = model.map(|s| &*arena.alloc_str(s));
            r.usage = total;
            r.parent_id = data.parent.get().map(|s| &*arena.alloc_str(s));
            r.stop_reason = data
                .finish
                .get()
                .or_else(error_name)
                .map(|s| &*arena.alloc_str(s));
            if let Some((name, call)) = first_call {
                r.tool_name = Some(arena.alloc_str(name));
                r.tool_call_id = Some(&*arena.alloc_str(call)).filter(|c| !c.is_empty());
            }
            r
        });
        rows.push(
            report,
            Row {
                key: id,
                fingerprint: fingerprint(&[b"opencode", id.as_bytes()]),
                line,
                byte,
                record: rec,
            },
        );
        // Each finished tool part: a tool_result record of its own.
        for (p, (pid, _)) in parts.iter().zip(&m.parts) {
            if p.kind() != Some("tool") {
                continue;
            }
            let is_error = match p.status() {
                Some("completed") => false,
                Some("error") => true,
                _ => continue,
            };
            let state = p.state();
            let row_key: &'a str = join(arena, &[m.id, "/", *pid]);
            let rec = report.count_record(Role::ToolResult, filter).then(|| {
                let (session, source, project) = shared_of(arena);
                let name = p.tool.get().unwrap_or("");
                let call = p.call.get().unwrap_or("");
                let out = state
                    .and_then(|s| {
                        if is_error {
                            s.error.get()
                        } else {
                            s.output.get()
                        }
                    })
                    .unwrap_or("");
                let kinds: &'a [&'a str] = arena.alloc_slice_copy(&["toolResult"]);
                let key = arena.alloc_str(&format!("{}:{}:{pid}", m.session, m.id));
                let mut r = record(
                    Role::ToolResult,
                    arena.alloc_str(out),
                    kinds,
                    project,
                    session,
                    source,
                    key,
                    arena.alloc_str(pid),
                    line,
                    state
                        .and_then(|s| s.time.obj())
                        .and_then(|t| t.end.as_i64())
                        .or(time),
                );
                r.entry = "tool";
                r.parent_id = Some(id);
                r.tool_name = Some(arena.alloc_str(name));
                r.tool_call_id = Some(&*arena.alloc_str(call)).filter(|c| !c.is_empty());
                r.is_error = Some(is_error);
                if name == "bash" {
                    r.command = state
                        .and_then(|s| s.input.as_ref())
                        .and_then(|i| i.get("command"))
                        .and_then(Value::as_str)
                        .map(|c| &*arena.alloc_str(c));
                    r.exit_code = state
                        .and_then(|s| s.metadata.obj())
                        .and_then(|m| m.exit.as_i64());
                }
                r
            });
            rows.push(
                report,
                Row {
                    key: row_key,
                    fingerprint: fingerprint(&[b"opencode", id.as_bytes(), pid.as_bytes()]),
                    line,
                    byte,
                    record: rec,
                },
            );
        }
    }
}

impl Database for Db {
    fn next_batch<'a>(
        &mut self,
        cursor: &mut Cursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<bool, Error> {
        if self.in_v2 {
            return v2::next_batch(self, cursor, arena, filter, report, rows);
        }
        let pending: Option<Vec<String>> = (!self.pending_read).then(|| {
            self.pending_read = true;
            // The 1.x messages' (2.x's are read by `v2`).
            let (v2, v1): (BTreeSet<String>, _) = std::mem::take(&mut cursor.pending)
                .into_iter()
                .partition(|p| p.starts_with(v2::PENDING));
            cursor.pending = v2;
            v1.into_iter().collect()
        });
        let mark = cursor.marks.get("message").copied().unwrap_or(0);
        let got = match &pending {
            // Read ahead after the pending ids (several jobs), starting at
            // the mark, where the batches read here would have started.
            None if self.read_ahead => {
                let path = &self.path;
                self.ahead
                    .get_or_insert_with(|| Ahead::start(path.clone(), mark, filter.builds_none()))
                    .next()
            }
            _ => {
                let known = |s: &str| self.sessions.contains_key(s);
                Some(
                    read(
                        &self.conn,
                        &mut Stmts::default(),
                        &known,
                        pending.as_deref(),
                        mark,
                        &self.like,
                        None,
                    )
                    .map_err(|e| fail(&self.path, "cannot read its messages", &e)),
                )
            }
        };
        let got = got.unwrap_or_else(|| {
            Err(Error::io(
                &self.path,
                std::io::Error::other(
                    "cannot read its messages: the thread reading ahead ended before the \
                     last batch",
                ),
            ))
        });
        let mut batch = match got {
            Ok(r) => {
                self.like = r.sizes();
                r
            }
            Err(e) => {
                if let Some(p) = pending {
                    // Not read: still pending.
                    cursor.pending.extend(p);
                }
                return Err(e);
            }
        };
        self.sessions.extend(std::mem::take(&mut batch.sessions));
        // The sessions' lineages: each record's parent session, and the
        // shard's sessions under `--shard` (read when a session of the
        // batch is new to this read).
        let records = !filter.builds_none();
        let lineages = self.lineage.needed(records);
        let named = || batch.msgs.iter().map(|m| batch.str(&m.session));
        if lineages && !self.lineage.knows(named()) {
            match in_read(&self.conn, Lineages::opencode) {
                Ok(found) => self.lineage.learn(found, named()),
                Err(e) => {
                    if let Some(p) = pending {
                        cursor.pending.extend(p);
                    }
                    return Err(fail(&self.path, "cannot read its sessions", &e));
                }
            }
        }
        let full = pending.is_none() && batch.msgs.len() as i64 == BATCH;
        if let (None, Some(last)) = (&pending, batch.msgs.last()) {
            // The mark at the batch's last message (each message moved it
            // there in turn before).
            cursor.marks.insert("message".into(), last.rowid);
            cursor
                .guards
                .insert("message".into(), guard_of(batch.str(&last.id)));
        }
        for i in 0..batch.msgs.len() {
            let m = batch.msg(i);
            if cursor.was_emitted(m.id) || (lineages && !self.lineage.in_shard(m.session)) {
                // Emitted, or another shard's lineage: passed over.
                continue;
            }
            let data = match m.data {
                Ok(d) => data::Msg::pluck(d)
                    .map(Node::Obj)
                    .map_or_else(|| parse::<data::Msg<'_>>(d), Ok)
                    .map_err(|e| e.to_string()),
                Err(why) => Err(format!("data is {why}")),
            };
            let data = match data {
                Ok(v) => v.obj_or_default(),
                Err(e) => {
                    // A damaged row: counted and skipped once, by its rowid.
                    let line = u64::try_from(m.rowid).unwrap_or(0);
                    report.skip(
                        line,
                        0,
                        SkipReason::Malformed(format!("message {}: {e}", m.id)),
                    );
                    rows.push(
                        report,
                        Row {
                            key: arena.alloc_str(m.id),
                            fingerprint: fingerprint(&[b"opencode", m.id.as_bytes()]),
                            line,
                            byte: self.bytes,
                            record: None,
                        },
                    );
                    continue;
                }
            };
            let mut bad = Vec::new();
            // A part whose fields no record takes (the role filter keeps
            // neither the message's record nor, for a tool part, its
            // result: `stats`) is only glanced at, for its type and its
            // tool state's status; a step-finish part is always read (its
            // usage), and every text the glance is not sure of is parsed
            // (its error, when refused, the parse's).
            let keeps = |r: &str| match r {
                "user" => filter.allows(Role::User),
                "assistant" => filter.allows(Role::Assistant),
                _ => false,
            };
            let glance_parts = !data.role.get().is_some_and(keeps);
            let keeps_tool = filter.allows(Role::ToolResult);
            let parts: Vec<data::Part<'_>> = m
                .parts
                .iter()
                .enumerate()
                .map(|(j, &(id, d))| {
                    let d = match d {
                        Ok(d) => match glance_parts
                            .then(|| match m.glances.get(j) {
                                Some(g) => g.clone(),
                                None => glance(d, "type", "state", "status"),
                            })
                            .flatten()
                            .filter(|g| match g.key {
                                Some("step-finish") => false,
                                Some("tool") => !keeps_tool,
                                _ => true,
                            }) {
                            Some(g) => Ok(Node::Obj(data::Part::glanced(&g))),
                            None => data::Part::pluck(d)
                                .map(Node::Obj)
                                .map_or_else(|| parse::<data::Part<'_>>(d), Ok)
                                .map_err(|e| e.to_string()),
                        },
                        Err(why) => Err(format!("data is {why}")),
                    };
                    match d {
                        Ok(p) => p.obj_or_default(),
                        Err(e) => {
                            bad.push(format!("part {id} of message {}: {e}", m.id));
                            data::Part::default()
                        }
                    }
                })
                .collect();
            if !is_final(&data, &parts) {
                cursor.pending.insert(m.id.to_owned());
                continue;
            }
            // A damaged part of a final message: counted and skipped (the
            // message's other parts are read).
            for why in bad {
                report.skip(
                    u64::try_from(m.rowid).unwrap_or(0),
                    0,
                    SkipReason::Malformed(why),
                );
            }
            let parent = self
                .lineage
                .parent_session(m.session)
                .filter(|_| records)
                .map(|p| &*arena.alloc_str(&p));
            rows.set_parent_session(parent);
            self.emit(&m, &data, &parts, arena, filter, report, rows);
        }
        if let Some(a) = &self.ahead {
            a.give_back(batch);
        }
        let more = pending.is_some() || full;
        if !more && self.v2 {
            // The 1.x tables read: 2.x's rows next.
            self.in_v2 = true;
            return Ok(true);
        }
        Ok(more)
    }

    fn only_shard(&mut self, k: u32, n: u32) {
        self.lineage.only_shard(k, n);
    }
}

/// The fields of a message's and a part's `data` this reader takes, read
/// typed and borrowed from the column's text ([`crate::lenient`]): what
/// `serde_json::Value`'s accessors gave, without the tree.
mod data {
    use serde::de::MapAccess;
    use serde_json::Value;

    use crate::lenient::{pluck, skip, Any, Fields, Glance, Node, Num, Pluck, Str};

    /// `time`: `created`, `completed` (set or not); a tool state's `end`.
    #[derive(Debug, Default)]
    pub(super) struct Time {
        pub created: Num,
        pub completed: Any,
        pub end: Num,
    }

    impl<'de> Fields<'de> for Time {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "created" => self.created = m.next_value()?,
                "completed" => self.completed = m.next_value()?,
                "end" => self.end = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// `tokens.cache`.
    #[derive(Debug, Default)]
    pub(super) struct Cache {
        pub read: Num,
        pub write: Num,
    }

    impl<'de> Fields<'de> for Cache {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "read" => self.read = m.next_value()?,
                "write" => self.write = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// `tokens`.
    #[derive(Debug, Default)]
    pub(super) struct Tokens {
        pub input: Num,
        pub output: Num,
        pub reasoning: Num,
        pub total: Num,
        pub cache: Node<Cache>,
    }

    impl<'de> Fields<'de> for Tokens {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "input" => self.input = m.next_value()?,
                "output" => self.output = m.next_value()?,
                "reasoning" => self.reasoning = m.next_value()?,
                "total" => self.total = m.next_value()?,
                "cache" => self.cache = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// A field holding only `message` (an error's `data`) or only `cwd`
    /// (a message's `path`) or only `path` (a file part's `source`).
    #[derive(Debug, Default)]
    pub(super) struct One<'a, const K: u8>(pub Str<'a>);

    /// An error's `data.message`.
    pub(super) const MESSAGE: u8 = 0;
    /// A message's `path.cwd`.
    pub(super) const CWD: u8 = 1;
    /// A file part's `source.path`.
    pub(super) const PATH: u8 = 2;

    impl<'de, const K: u8> Fields<'de> for One<'de, K> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            let name = match K {
                MESSAGE => "message",
                CWD => "cwd",
                _ => "path",
            };
            if key == name {
                self.0 = m.next_value()?;
            } else {
                skip(m)?;
            }
            Ok(())
        }
    }

    /// A message's `error`.
    #[derive(Debug, Default)]
    pub(super) struct Error<'a> {
        pub name: Str<'a>,
        pub data: Node<One<'a, MESSAGE>>,
    }

    impl<'de> Fields<'de> for Error<'de> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "name" => self.name = m.next_value()?,
                "data" => self.data = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// A message's `data`.
    #[derive(Debug, Default)]
    pub(super) struct Msg<'a> {
        pub role: Str<'a>,
        pub time: Node<Time>,
        pub error: Node<Error<'a>>,
        pub provider: Str<'a>,
        pub model: Str<'a>,
        pub summary: Any,
        pub finish: Str<'a>,
        pub parent: Str<'a>,
        pub cost: Num,
        pub tokens: Node<Tokens>,
        pub path: Node<One<'a, CWD>>,
    }

    impl<'de> Fields<'de> for Msg<'de> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "role" => self.role = m.next_value()?,
                "time" => self.time = m.next_value()?,
                "error" => self.error = m.next_value()?,
                "providerID" => self.provider = m.next_value()?,
                "modelID" => self.model = m.next_value()?,
                "summary" => self.summary = m.next_value()?,
                "finish" => self.finish = m.next_value()?,
                "parentID" => self.parent = m.next_value()?,
                "cost" => self.cost = m.next_value()?,
                "tokens" => self.tokens = m.next_value()?,
                "path" => self.path = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// A tool part's `state.metadata`.
    #[derive(Debug, Default)]
    pub(super) struct Meta {
        pub exit: Num,
    }

    impl<'de> Fields<'de> for Meta {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "exit" => self.exit = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// A tool part's `state`; its `input` a `Value` (small; written out
    /// as JSON in the call's record).
    #[derive(Debug, Default)]
    pub(super) struct State<'a> {
        pub status: Str<'a>,
        pub input: Option<Value>,
        pub output: Str<'a>,
        pub error: Str<'a>,
        pub time: Node<Time>,
        pub metadata: Node<Meta>,
    }

    impl<'de> Fields<'de> for State<'de> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "status" => self.status = m.next_value()?,
                "input" => self.input = Some(m.next_value()?),
                "output" => self.output = m.next_value()?,
                "error" => self.error = m.next_value()?,
                "time" => self.time = m.next_value()?,
                "metadata" => self.metadata = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// A part's `data`.
    #[derive(Debug, Default)]
    pub(super) struct Part<'a> {
        pub kind: Str<'a>,
        pub text: Str<'a>,
        pub tool: Str<'a>,
        pub call: Str<'a>,
        pub filename: Str<'a>,
        pub source: Node<One<'a, PATH>>,
        pub prompt: Str<'a>,
        pub state: Node<State<'a>>,
        pub cost: Num,
        pub tokens: Node<Tokens>,
    }

    impl<'de> Fields<'de> for Part<'de> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "type" => self.kind = m.next_value()?,
                "text" => self.text = m.next_value()?,
                "tool" => self.tool = m.next_value()?,
                "callID" => self.call = m.next_value()?,
                "filename" => self.filename = m.next_value()?,
                "source" => self.source = m.next_value()?,
                "prompt" => self.prompt = m.next_value()?,
                "state" => self.state = m.next_value()?,
                "cost" => self.cost = m.next_value()?,
                "tokens" => self.tokens = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    // The fields as `pluck` reads them: each key's value read as its
    // `Fields` above reads it (the same methods, the same types), a
    // state's `input` (a `Value`) left to the parse.

    fn time(p: &mut Pluck<'_>, t: &mut Time, k: &[u8]) -> Option<()> {
        match k {
            b"created" => t.created = p.num()?,
            b"completed" => t.completed = p.any()?,
            b"end" => t.end = p.num()?,
            _ => p.skip()?,
        }
        Some(())
    }

    fn cache(p: &mut Pluck<'_>, c: &mut Cache, k: &[u8]) -> Option<()> {
        match k {
            b"read" => c.read = p.num()?,
            b"write" => c.write = p.num()?,
            _ => p.skip()?,
        }
        Some(())
    }

    fn tokens(p: &mut Pluck<'_>, t: &mut Tokens, k: &[u8]) -> Option<()> {
        match k {
            b"input" => t.input = p.num()?,
            b"output" => t.output = p.num()?,
            b"reasoning" => t.reasoning = p.num()?,
            b"total" => t.total = p.num()?,
            b"cache" => t.cache = p.node(cache)?,
            _ => p.skip()?,
        }
        Some(())
    }

    fn one<'a, const K: u8>(p: &mut Pluck<'a>, o: &mut One<'a, K>, k: &[u8]) -> Option<()> {
        let name: &[u8] = match K {
            MESSAGE => b"message",
            CWD => b"cwd",
            _ => b"path",
        };
        if k == name {
            o.0 = p.str()?;
        } else {
            p.skip()?;
        }
        Some(())
    }

    fn error<'a>(p: &mut Pluck<'a>, e: &mut Error<'a>, k: &[u8]) -> Option<()> {
        match k {
            b"name" => e.name = p.str()?,
            b"data" => e.data = p.node(one::<MESSAGE>)?,
            _ => p.skip()?,
        }
        Some(())
    }

    impl<'a> Msg<'a> {
        /// A message's `data` as [`parse`](crate::lenient::parse) reads
        /// it, where [`pluck`] is sure of it.
        pub fn pluck(text: &'a str) -> Option<Msg<'a>> {
            pluck(text, |p, m: &mut Msg<'a>, k| {
                match k {
                    b"role" => m.role = p.str()?,
                    b"time" => m.time = p.node(time)?,
                    b"error" => m.error = p.node(error)?,
                    b"providerID" => m.provider = p.str()?,
                    b"modelID" => m.model = p.str()?,
                    b"summary" => m.summary = p.any()?,
                    b"finish" => m.finish = p.str()?,
                    b"parentID" => m.parent = p.str()?,
                    b"cost" => m.cost = p.num()?,
                    b"tokens" => m.tokens = p.node(tokens)?,
                    b"path" => m.path = p.node(one::<CWD>)?,
                    _ => p.skip()?,
                }
                Some(())
            })
        }
    }

    impl<'a> Part<'a> {
        /// A part's `data` as [`parse`](crate::lenient::parse) reads it,
        /// where [`pluck`] is sure of it and it has no `state` (whose
        /// `input` is a `Value`: the parse's).
        pub fn pluck(text: &'a str) -> Option<Part<'a>> {
            pluck(text, |p, t: &mut Part<'a>, k| {
                match k {
                    b"type" => t.kind = p.str()?,
                    b"text" => t.text = p.str()?,
                    b"tool" => t.tool = p.str()?,
                    b"callID" => t.call = p.str()?,
                    b"filename" => t.filename = p.str()?,
                    b"source" => t.source = p.node(one::<PATH>)?,
                    b"prompt" => t.prompt = p.str()?,
                    b"state" => return None,
                    b"cost" => t.cost = p.num()?,
                    b"tokens" => t.tokens = p.node(tokens)?,
                    _ => p.skip()?,
                }
                Some(())
            })
        }
    }

    impl<'a> Part<'a> {
        /// A part as [`glance`](crate::lenient::glance) saw it: its type,
        /// and its state's status (the fields a reader that builds no
        /// record of it takes).
        pub fn glanced(g: &Glance<'a>) -> Part<'a> {
            let borrowed = |s: Option<&'a str>| Str(s.map(std::borrow::Cow::Borrowed));
            Part {
                kind: borrowed(g.key),
                state: g.obj.clone().map(|status| State {
                    status: borrowed(status),
                    ..State::default()
                }),
                ..Part::default()
            }
        }

        /// `type`.
        pub fn kind(&self) -> Option<&str> {
            self.kind.get()
        }
        /// `state`, when an object.
        pub fn state(&self) -> Option<&State<'_>> {
            self.state.obj()
        }
        /// `state.status`.
        pub fn status(&self) -> Option<&str> {
            self.state().and_then(|s| s.status.get())
        }
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::{data, glance, parse, sql_order, Batch, Msg, Node, Part, Share, SqlValue};

    /// A batch of three messages whose parts' `data` are 100, 300 and 100
    /// bytes long (one part each, the second message two of 150).
    fn batch() -> Batch {
        let mut b = Batch::default();
        let span = |b: &mut Batch, t: &str| {
            let from = b.text.len();
            b.text.push_str(t);
            from..b.text.len()
        };
        let data_span = |b: &mut Batch, t: &str| {
            let from = b.data.len();
            b.data.extend_from_slice(t.as_bytes());
            from..b.data.len()
        };
        let part = |ty: &str, n: usize| {
            let body = format!(r#"{{"type":"{ty}","text":""}}"#);
            let pad = "x".repeat(n - body.len());
            format!(r#"{{"type":"{ty}","text":"{pad}"}}"#)
        };
        for (i, sizes) in [vec![100], vec![150, 150], vec![100]]
            .into_iter()
            .enumerate()
        {
            let id = span(&mut b, &format!("m{i}"));
            let session = span(&mut b, "s");
            let data = data_span(&mut b, "{}");
            let from = b.parts.len();
            for (j, n) in sizes.into_iter().enumerate() {
                let pid = span(&mut b, &format!("p{i}{j}"));
                let d = data_span(&mut b, &part(if j == 0 { "text" } else { "tool" }, n));
                b.parts.push(Part {
                    id: pid,
                    data: Ok(d),
                });
            }
            b.msgs.push(Msg {
                rowid: i as i64 + 1,
                id,
                session,
                data: Ok(data),
                parts: from..b.parts.len(),
            });
        }
        b
    }

    /// The reading thread's share of the glances ends at a message's
    /// end, grows with the share (nothing at 0, every part at the whole),
    /// and each glance it keeps is the one the counting thread takes of
    /// that part: whichever thread glances, the same.
    #[test]
    fn a_share_of_the_glances_is_whole_messages_and_the_same_glances() {
        let mut ends = Vec::new();
        for share in 0..=Share::WHOLE + 1 {
            let mut b = batch();
            b.glance_parts(share);
            ends.push(b.glances.len());
            for (p, g) in b.parts.iter().zip(&b.glances) {
                let t = b.data_str(&p.data).unwrap();
                let want = glance(t, "type", "state", "status").map(|g| g.key.map(str::to_owned));
                let got = g.as_ref().map(|(k, _)| k.clone().map(|k| t[k].to_owned()));
                assert_eq!(got, want, "share {share}");
            }
        }
        // 500 bytes, a sixteenth 31: messages are taken while the bytes
        // taken are below the share's, so the first (100 bytes) from
        // share 1, the second (to 400) from share 4 (124), the third from
        // share 13 (403); past the whole, the whole.
        assert_eq!(ends, [0, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4]);
    }

    /// The share moves a sixteenth a step, within nothing and the whole.
    #[test]
    fn the_share_stays_within_nothing_and_the_whole() {
        let s = Share(std::sync::atomic::AtomicU32::new(Share::WHOLE / 2));
        for _ in 0..20 {
            s.step(true);
        }
        assert_eq!(s.get(), Share::WHOLE);
        s.step(false);
        assert_eq!(s.get(), Share::WHOLE - 1);
        for _ in 0..20 {
            s.step(false);
        }
        assert_eq!(s.get(), 0);
    }

    /// `sql_order` sorts as SQLite's `ORDER BY` does, across types.
    #[test]
    fn orders_values_as_sqlite_does() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE t (v);
             INSERT INTO t VALUES (5), (5.5), (-5.5), (-5), (NULL), ('10'), ('9'), (x'00'),
               (9223372036854775807), (9.3e18), (-9.3e18), (4.999999), (5.0), ('a'), (x'0001');",
        )
        .unwrap();
        let want: Vec<SqlValue> = c
            .prepare("SELECT v FROM t ORDER BY v, rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let mut got: Vec<SqlValue> = c
            .prepare("SELECT v FROM t ORDER BY rowid DESC")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        got.sort_by(sql_order);
        // 5 and 5.0 are equal: compared by value only.
        let show = |v: &[SqlValue]| format!("{v:?}").replace("Real(5.0)", "Integer(5)");
        assert_eq!(show(&got), show(&want));
    }

    /// Texts of objects whose keys are the message's and part's fields (at
    /// every depth), each holding every kind of value, the sure and the
    /// unsure, and each text damaged: a byte left out, one put in.
    fn data_texts() -> Vec<String> {
        const ATOMS: [&str; 22] = [
            r#""assistant""#,
            r#""""#,
            r#""a\nb""#,
            r#""\u00e9""#,
            "\"caf\u{e9} \u{1f600}\"",
            "0",
            "-0",
            "-7",
            "1785542402040",
            "18446744073709551616",
            "1.5",
            "-0.0",
            "0.166457",
            "1e5",
            "123456789012345.123456789",
            "true",
            "false",
            "null",
            "[]",
            "{}",
            "[1,\"x\",{\"a\":null}]",
            "12345678901234567",
        ];
        const KEYS: [&str; 36] = [
            "role",
            "time",
            "created",
            "completed",
            "end",
            "error",
            "name",
            "data",
            "message",
            "providerID",
            "modelID",
            "summary",
            "finish",
            "parentID",
            "cost",
            "tokens",
            "input",
            "output",
            "reasoning",
            "total",
            "cache",
            "read",
            "write",
            "path",
            "cwd",
            "type",
            "text",
            "tool",
            "callID",
            "filename",
            "source",
            "prompt",
            "state",
            "x",
            "status",
            "a b",
        ];
        fn value(next: &mut dyn FnMut(usize) -> usize, depth: u32) -> String {
            match next(if depth > 3 { 22 } else { 30 }) {
                k @ 0..=21 => ATOMS[k].to_owned(),
                _ => object(next, depth + 1),
            }
        }
        fn object(next: &mut dyn FnMut(usize) -> usize, depth: u32) -> String {
            let items: Vec<String> = (0..next(7))
                .map(|_| {
                    let ws = [" ", "", "\n "][next(3)];
                    format!("\"{}\"{ws}:{ws}{}", KEYS[next(36)], value(next, depth))
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % n as u64).expect("below n")
        };
        let mut out = Vec::new();
        for _ in 0..6000 {
            let t = object(&mut next, 0);
            let b = t.as_bytes();
            let mut cut = b.to_vec();
            cut.remove(next(b.len()));
            let mut put = b.to_vec();
            put.insert(next(b.len() + 1), b",:]}\"0 x"[next(8)]);
            for d in [cut, put] {
                if let Ok(d) = String::from_utf8(d) {
                    out.push(d);
                }
            }
            out.push(t);
        }
        out
    }

    /// Where `pluck` reads a message's or a part's `data`, it reads what
    /// the parse reads (every field, compared whole), and it reads most of
    /// the texts the parse reads; a part with a `state` is the parse's.
    #[test]
    fn a_plucked_message_or_part_is_the_parsed_one() {
        let texts = data_texts();
        let (mut msgs, mut parts, mut parsed) = (0, 0, 0);
        for text in &texts {
            let full = parse::<data::Msg<'_>>(text);
            if full.is_ok() {
                parsed += 1;
            }
            if let Some(m) = data::Msg::pluck(text) {
                msgs += 1;
                assert_eq!(
                    format!("{:?}", Ok::<_, ()>(Node::Obj(m))),
                    format!("{:?}", full.map_err(|_| ())),
                    "{text}"
                );
            }
            if let Some(p) = data::Part::pluck(text) {
                parts += 1;
                assert!(matches!(p.state, Node::Absent), "{text}");
                assert_eq!(
                    format!("{:?}", Ok::<_, ()>(Node::Obj(p))),
                    format!("{:?}", parse::<data::Part<'_>>(text).map_err(|_| ())),
                    "{text}"
                );
            }
        }
        assert_eq!(
            (texts.len(), parsed, msgs, parts),
            (17_902, 11_465, 4_695, 4_452)
        );
    }
}
