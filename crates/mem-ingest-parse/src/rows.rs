//! Rows: sessions kept in a database the agent rewrites while it works
//! (OpenCode, Cursor, Goose), the third kind of source on the format seam
//! beside appended lines and rewritten documents.
//!
//! A database has no byte offset to resume from, and the engine never
//! reads its bytes: the format opens it ([`MapRows::open`], read-only,
//! through whatever reads that database: this crate holds no SQLite) and
//! reads its rows after a [`Cursor`], in batches ([`Database::next_batch`],
//! each in a short read transaction of its own). The cursor is the
//! database's running context, saved with its checkpoint in the same
//! transaction as the output it covers, as a file's byte offset is: the
//! high-water marks of the tables read (rowids), the ids of messages seen
//! unfinished (re-read by id until they are final), guards the format uses
//! to tell a table rewritten under its marks (a VACUUM, a restored backup,
//! a deleted row's rowid taken by a new one: it then reads again from the
//! start), and the keys of every message emitted, so that a read from the
//! start (a rescan, a compaction that re-inserts a conversation) emits
//! none of them again.
//!
//! The engine opens a database at every run (a write in WAL mode changes
//! the `-wal` file beside it, not the database's size or time): a read
//! with nothing new after the cursor costs the queries of one batch.
//! Its report adds to the one saved, as a grown file's does.
//!
//! Memory is bounded by a batch: the records of one batch are built in an
//! arena that is emptied before the next batch is read.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::BuildHasherDefault;
use std::path::Path;

pub use bumpalo::Bump;

use crate::counts::{LineCounts, Tracker};
use crate::error::Error;
use crate::format::BoxedSource;
use crate::json::fingerprint;
use crate::json::hash::FingerprintHasher;
use crate::line::{Entry, Header};
use crate::record::{Record, RoleFilter};
use crate::report::{Report, SkipReason};
use crate::source::{Position, RecordSource, SourceOptions};

/// One final message (or a tool result, a part of its own) read from a
/// database.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    /// Its stable key in the database (a message id; Goose's
    /// `(session_id, message_id)`): a key emitted once is never emitted
    /// again.
    pub key: &'a str,
    /// Its identity for deduplication.
    pub fingerprint: u64,
    /// The place said for it: the row's rowid, or its position.
    pub line: u64,
    /// The place said for it, growing as the read goes on (the bytes of
    /// the rows read before it): the engine hands a long read over in
    /// parts by it.
    pub byte: u64,
    /// Its record, when it gives one the role filter lets through.
    pub record: Option<Record<'a>>,
}

/// The rows a [`Database`] reads in one batch, each pushed after the
/// format counted it in the report.
pub struct Rows<'a> {
    /// Each `Some` when pushed, taken (`None`) when handed out: the list
    /// is kept from batch to batch, its room with it.
    list: Vec<Option<(Row<'a>, LineCounts, Option<&'a str>)>>,
    tracker: Tracker,
    parent: Option<&'a str>,
}

impl<'a> Rows<'a> {
    /// Adds the next row. `report` is the report the format counts the
    /// database in, with the row counted (its record or `no_record`, its
    /// usage); the driver counts its line. A row whose key the cursor
    /// says was emitted ([`Cursor::was_emitted`]) is not pushed (nor
    /// counted) by the format.
    pub fn push(&mut self, report: &mut Report, row: Row<'a>) {
        report.lines += 1;
        self.tracker.after_line(report, true);
        self.list
            .push(Some((row, self.tracker.take_last(), self.parent)));
    }

    /// The session the rows pushed from now on belong to was forked from
    /// or started by (its parent's lineage id, `opencode:<id>`), or none:
    /// a database holds many sessions, each its own lineage or a
    /// descendant's ([`crate::line::Entry::parent_session`]).
    pub fn set_parent_session(&mut self, parent: Option<&'a str>) {
        self.parent = parent;
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none was pushed.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// Where a read of a database stands: its running context (see the
/// module's docs). The format moves its marks, pending ids and guards; the
/// driver records each key it emits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    /// Per table read: the highest rowid read.
    pub marks: BTreeMap<String, i64>,
    /// Ids of messages seen unfinished, read again until they are final.
    pub pending: BTreeSet<String>,
    /// What the format checks before it trusts its marks (a hash of the
    /// row at a mark, a table's first rowid, the database's id).
    pub guards: BTreeMap<String, u64>,
    /// Keys emitted (hashed), whatever their rowid (in order when
    /// encoded).
    emitted: KeySet,
}

/// A set of key hashes, each its own hash ([`FingerprintHasher`]): one
/// lookup for each row handed out, where a tree's were a fifth of the
/// time the driver took over a row.
type KeySet = HashSet<u64, BuildHasherDefault<FingerprintHasher>>;

/// The first byte of an encoded [`Cursor`].
const CURSOR_TAG: u8 = b'R';

fn key_hash(key: &str) -> u64 {
    fingerprint(&[b"row-key", key.as_bytes()])
}

impl Cursor {
    /// Whether the message of `key` was emitted (by this read or one
    /// before).
    pub fn was_emitted(&self, key: &str) -> bool {
        self.emitted.contains(&key_hash(key))
    }

    /// How many keys were emitted.
    pub fn emitted_count(&self) -> usize {
        self.emitted.len()
    }

    /// Forgets the marks, pending ids and guards (a rescan from the
    /// start); the keys emitted stay emitted.
    pub fn rescan(&mut self) {
        self.marks.clear();
        self.pending.clear();
        self.guards.clear();
    }

    /// Its bytes: the tag, then each part as counts and values
    /// (little-endian; strings as their length and bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![CURSOR_TAG];
        let put_str = |b: &mut Vec<u8>, s: &str| {
            b.extend_from_slice(&(s.len() as u64).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
        };
        b.extend_from_slice(&(self.marks.len() as u64).to_le_bytes());
        for (t, m) in &self.marks {
            put_str(&mut b, t);
            b.extend_from_slice(&m.to_le_bytes());
        }
        b.extend_from_slice(&(self.pending.len() as u64).to_le_bytes());
        for p in &self.pending {
            put_str(&mut b, p);
        }
        b.extend_from_slice(&(self.guards.len() as u64).to_le_bytes());
        for (g, v) in &self.guards {
            put_str(&mut b, g);
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(self.emitted.len() as u64).to_le_bytes());
        let mut emitted: Vec<u64> = self.emitted.iter().copied().collect();
        emitted.sort_unstable();
        for k in emitted {
            b.extend_from_slice(&k.to_le_bytes());
        }
        b
    }

    /// `None` for an empty or damaged context (a read from the start).
    pub fn decode(b: &[u8]) -> Option<Cursor> {
        let (&tag, rest) = b.split_first()?;
        if tag != CURSOR_TAG {
            return None;
        }
        let mut r = Reader(rest);
        let mut c = Cursor::default();
        // Each string is bounded by the bytes left, and each count by
        // what its items take, so a damaged count fails rather than
        // allocates.
        for _ in 0..r.word()? {
            let t = r.string()?;
            c.marks.insert(t, r.word()? as i64);
        }
        for _ in 0..r.word()? {
            c.pending.insert(r.string()?);
        }
        for _ in 0..r.word()? {
            let g = r.string()?;
            c.guards.insert(g, r.word()?);
        }
        for _ in 0..r.word()? {
            c.emitted.insert(r.word()?);
        }
        r.0.is_empty().then_some(c)
    }
}

/// The encoded cursor's bytes not read yet.
struct Reader<'b>(&'b [u8]);

impl Reader<'_> {
    fn word(&mut self) -> Option<u64> {
        let (w, r) = self.0.split_first_chunk::<8>()?;
        self.0 = r;
        Some(u64::from_le_bytes(*w))
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.word()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (s, r) = self.0.split_at(len);
        self.0 = r;
        String::from_utf8(s.to_vec()).ok()
    }
}

/// One database, opened read-only by its format for one read.
pub trait Database: Send {
    /// Reads the next batch after `cursor`, in one short read transaction
    /// of its own (none is kept open between batches): the pending ids
    /// (first), then rows after the marks, at most a bounded number. Each
    /// final message not emitted before is counted in `report` and pushed
    /// to `rows`; one still unfinished goes to `cursor.pending`, and is
    /// neither counted nor pushed. The marks move past what was read.
    /// `Ok(false)`: nothing more after this batch.
    ///
    /// # Errors
    /// Reading failed (a database busy beyond its retries): the error
    /// names the database and says what to do; the cursor is left as it
    /// was before the batch. A failure after rows of the read were handed
    /// out ends the read there, as a counted skip (the checkpoint then
    /// covers exactly what was handed out); a failure before fails the
    /// database for this run.
    fn next_batch<'a>(
        &mut self,
        cursor: &mut Cursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<bool, Error>;

    /// Reads only the rows of shard `k` of `n` (`--shard K/N`): those of
    /// sessions whose lineage root's id is that shard's ([`shard_of`]);
    /// the others are passed over (the marks move past them, nothing is
    /// counted or emitted). Called once, before the first batch, by a
    /// format that says [`crate::format::Format::shards_rows`]; the
    /// default reads every row.
    fn only_shard(&mut self, k: u32, n: u32) {
        let _ = (k, n);
    }
}

/// FNV-1a, 64 bits, of `s`'s UTF-8 bytes: offset basis
/// 0xcbf29ce484222325, prime 0x100000001b3.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The shard, of `n`, of a lineage root: [`fnv1a`] of its lineage id
/// modulo `n` (the engine's `--shard K/N`, for files and database rows
/// alike).
pub fn shard_of(root: &str, n: u32) -> u32 {
    (fnv1a(root) % u64::from(n.max(1))) as u32
}

/// A format's reading of its databases.
pub trait MapRows: Send + Sync {
    /// Opens the database at `path` read-only for a read after `cursor`,
    /// and says its header (the database's identity: its sessions are
    /// in its records). The format checks its guards here and calls
    /// [`Cursor::rescan`] when the marks no longer hold.
    ///
    /// # Errors
    /// It cannot be opened, or is not this format's database.
    fn open(&self, path: &Path, cursor: &mut Cursor) -> Result<(Header, Box<dyn Database>), Error>;

    /// [`MapRows::open`] for a read with `opts` (a format that reads on a
    /// thread of its own when the run has several jobs looks at
    /// [`SourceOptions::jobs`]); by default `open`.
    ///
    /// # Errors
    /// As [`MapRows::open`].
    fn open_with(
        &self,
        path: &Path,
        cursor: &mut Cursor,
        opts: &SourceOptions,
    ) -> Result<(Header, Box<dyn Database>), Error> {
        let _ = opts;
        self.open(path, cursor)
    }
}

/// The source over a database: batches read one at a time.
struct RowsSource {
    // Declared first, dropped first: the rows borrow the arena.
    /// The rows of the batch read last; the list is kept from batch to
    /// batch, so that it grows only to the largest batch (made anew for
    /// each batch, a list grown from the last batch's size was copied at
    /// most batches, each copy of rows of some 500 bytes).
    ready: Vec<Option<(Row<'static>, LineCounts, Option<&'static str>)>>,
    /// The next row of `ready` to hand out.
    at: usize,
    db: Option<Box<dyn Database>>,
    last_counts: Option<LineCounts>,
    header: Option<Header>,
    report: Report,
    cursor: Cursor,
    filter: RoleFilter,
    error: Option<Error>,
    /// Rows handed out by this read.
    handed: u64,
    arena: Box<Bump>,
}

/// A source over the database at `path`, read with `map` after the
/// cursor its checkpoint saved (`prior`: its header and running context).
pub fn open<'d>(
    map: &dyn MapRows,
    path: &Path,
    prior: Option<(&Header, &[u8])>,
    opts: &SourceOptions,
) -> BoxedSource<'d> {
    let mut cursor = prior
        .and_then(|(_, c)| Cursor::decode(c))
        .unwrap_or_default();
    let mut src = RowsSource {
        ready: Vec::new(),
        at: 0,
        db: None,
        last_counts: None,
        header: prior.map(|(h, _)| h.clone()),
        report: opts.report(),
        cursor: Cursor::default(),
        filter: opts.filter,
        error: None,
        handed: 0,
        arena: Box::new(Bump::new()),
    };
    match map.open_with(path, &mut cursor, opts) {
        Ok((h, mut db)) => {
            if let Some((k, n)) = opts.shard {
                db.only_shard(k, n);
            }
            src.header = Some(h);
            src.db = Some(db);
        }
        Err(e) => src.error = Some(e),
    }
    src.cursor = cursor;
    Box::new(src)
}

impl RowsSource {
    /// Reads batches until one gives rows or the database has no more.
    fn fill(&mut self) -> Result<bool, Error> {
        loop {
            if self.at < self.ready.len() {
                return Ok(true);
            }
            let Some(db) = self.db.as_mut() else {
                return Ok(false);
            };
            // Nothing borrows the arena: the rows of the batch before
            // were all handed out, each borrowing the source mutably (the
            // list, kept for its room, holds none).
            let mut list = std::mem::take(&mut self.ready);
            list.clear();
            self.at = 0;
            self.arena.reset();
            // SAFETY: the rows built below borrow the arena, boxed in
            // `self` at an address that does not move; they live in
            // `ready`, which is emptied before the arena is reset (above)
            // and is declared before it (dropped first), and each is
            // handed out borrowing the source mutably (shortened to that
            // borrow), so none outlives a reset.
            #[allow(unsafe_code)]
            let arena: &'static Bump = unsafe { &*std::ptr::from_ref::<Bump>(&self.arena) };
            let mut rows = Rows {
                list,
                tracker: Tracker::new(&self.report),
                parent: None,
            };
            let more = db.next_batch(
                &mut self.cursor,
                arena,
                self.filter,
                &mut self.report,
                &mut rows,
            )?;
            if !more {
                // Closed now: no handle is kept while the rows are sent.
                self.db = None;
            }
            self.ready = rows.list;
        }
    }

    /// The next row to hand out: a row not emitted before (its key is
    /// then emitted).
    fn take(&mut self) -> Result<Option<(Row<'static>, Option<&'static str>)>, Error> {
        if let Some(e) = self.error.take() {
            self.db = None;
            return Err(e);
        }
        loop {
            match self.fill() {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) if self.handed > 0 => {
                    // A batch failed after rows of this read were handed
                    // out (a writer's lock beyond the retries): the read
                    // ends here, its cursor just after them, so that the
                    // checkpoint covers exactly what was handed out (a
                    // failure would leave the cursor before them, and the
                    // next run would emit them again). Counted and said,
                    // with the database's message; the rest is read by the
                    // next run.
                    self.db = None;
                    let line = self.report.lines;
                    self.report.skip(
                        line,
                        0,
                        SkipReason::Unsupported(format!(
                            "the read stopped after {} rows: {}",
                            self.handed,
                            e.cause()
                        )),
                    );
                    return Ok(None);
                }
                Err(e) => {
                    self.db = None;
                    return Err(e);
                }
            }
            let (row, counts, parent) = self.ready[self.at].take().expect("filled");
            self.at += 1;
            if !self.cursor.emitted.insert(key_hash(row.key)) {
                // Emitted before (a format that pushed it anyway): not
                // handed out again.
                continue;
            }
            self.cursor.pending.remove(row.key);
            self.last_counts = Some(counts);
            self.handed += 1;
            return Ok(Some((row, parent)));
        }
    }
}

impl RecordSource for RowsSource {
    fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
        while let Some((row, _)) = self.take()? {
            if row.record.is_some() {
                return Ok(row.record);
            }
        }
        Ok(None)
    }

    fn report(&self) -> &Report {
        &self.report
    }

    fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
        Ok(self.take()?.map(|(row, parent)| Entry {
            fingerprint: row.fingerprint,
            line: row.line,
            byte: row.byte,
            record: row.record,
            revision: false,
            parent_session: parent,
        }))
    }

    fn position(&self) -> Position {
        // No byte offset: the cursor (the running context) is where a
        // later read resumes.
        Position {
            byte: 0,
            line: 0,
            open_line: false,
        }
    }

    fn running_context(&self) -> Vec<u8> {
        self.cursor.encode()
    }

    fn entry_counts(&self) -> Option<&LineCounts> {
        self.last_counts.as_ref()
    }

    fn take_report(&mut self) -> Report {
        // The report after it counts as this one did: its usage rows kept
        // (or not) and its skips bounded alike.
        let fresh = Report {
            max_skips: self.report.max_skips,
            keep_usage_rows: self.report.keep_usage_rows,
            ..Report::default()
        };
        std::mem::replace(&mut self.report, fresh)
    }

    fn take_report_so_far(&mut self) -> Option<Report> {
        // A batch is counted when it is read, before its rows are handed
        // out: the report covers exactly the rows handed out only once
        // the batch's last one was (the next batch is read at the next
        // entry asked for, into the report left here).
        if self.at < self.ready.len() {
            return None;
        }
        Some(self.take_report())
    }
}
