//! Documents: session files that are one JSON document rewritten whole
//! whenever the agent writes (Amp threads, Cline tasks, Gemini CLI's
//! legacy sessions), the second kind of source on the format seam beside
//! appended lines.
//!
//! A document has no byte offset to resume from: a changed document is
//! read whole again, and what was emitted before is known by its items'
//! keys. A format says how a document reads ([`MapDocument`]): its
//! [`Header`] and its items in order, each an [`Item`] with a key (the
//! message's id, or a stable position where the shape has none), a
//! version (a hash of the item as written) and its record. The source
//! ([`open`]) hands out:
//! - every item whose key was not emitted before, once it is settled (a
//!   message still being written, Amp's `running`, waits for a later
//!   read);
//! - every item emitted before whose version changed (edited after it was
//!   emitted) as a *revision* ([`Entry::revision`]): a store updates its
//!   row by key; NDJSON and Parquet count it and write nothing;
//! - nothing for an item emitted before with the same version.
//!
//! What was emitted is the file's running context ([`DocState`]: each
//! emitted key with its version, and the document's content hash where
//! the format compares it, [`MapDocument::hashes_content`]), saved with
//! the file's checkpoint in the same transaction as the output it covers:
//! exactly once across rewrites, runs and kills. A run that keeps no
//! checkpoint ([`SourceOptions::checkpointed`] false) takes neither
//! versions nor the hash: nothing would compare them.
//!
//! A document's report is always that of its whole current content (a
//! re-read document's report replaces the one saved): its usage is what
//! the document holds now, each message's last version, as the agents'
//! own tools count it. A key that leaves the document (a rewind, an edit
//! that drops a message) stays emitted: its record stays where it was
//! written, and the key is never emitted again.
//!
//! Memory is bounded by the document: it is read whole (at most
//! [`MAX_DOCUMENT`] bytes; a larger one is a failure of its file, naming
//! it), parsed once, and its records built in one arena that lives as
//! long as the source. The engine reads at most `--jobs` files at once, so
//! at most `--jobs` documents are held. A thread keeps the buffer a
//! document was read into and its parser for its next document, while
//! each is at most [`SPARE_MAX`] (16 MiB): the next read goes into pages
//! already faulted in, with a tape already grown.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

pub use bumpalo::Bump;
use simd_json::Node;

use crate::counts::{LineCounts, Tracker};
use crate::error::Error;
use crate::format::BoxedSource;
use crate::json::{fingerprint, value_hash, JsonParser};
use crate::line::{Entry, Header};
use crate::record::{Record, RoleFilter};
use crate::report::{Report, SkipReason};
use crate::source::{Input, Position, RecordSource, SourceOptions};

/// The largest document read (256 MiB): a larger one fails its file,
/// named, with this limit in the message; the run goes on.
pub const MAX_DOCUMENT: u64 = 256 << 20;

/// The hash of a document's bytes that says whether it changed though its
/// size and modification time did not (see
/// [`crate::format::Format::hashes_unchanged`]).
pub fn content_hash(data: &[u8]) -> u64 {
    crate::json::LineHash::Wide.of(data)
}

/// One item of a document, in the document's order.
#[derive(Debug, Clone)]
pub struct Item<'a> {
    /// Its key, unique within the document: the message's id, or its
    /// position where the shape has none (a key repeated in one document
    /// is told apart by the driver: its n-th copy is `<key>#<n>`).
    pub key: &'a str,
    /// A hash of the item as written: another version, after it was
    /// emitted, is a revision.
    pub version: u64,
    /// Whether its key is its place (the shape gave it no id): another
    /// item in a place emitted before is not a revision of the one there
    /// (Cline's resumes and restores put other messages in places), but an
    /// item of its own, emitted beside it; an item with an id edited after
    /// it was emitted is a revision.
    pub positional: bool,
    /// Whether it is written to its end (default true): an item still
    /// being written (Amp's `running` message) is emitted by a later read.
    pub settled: bool,
    /// Its identity for deduplication: copies of it in another file
    /// (Gemini CLI's legacy `.json` and its `.jsonl` successor) share it.
    pub fingerprint: u64,
    /// The place said for it: the item's 1-based position in the
    /// document.
    pub line: u64,
    /// The place said for it: a byte offset (0 where the format knows
    /// none).
    pub byte: u64,
    /// Its record, when it gives one the role filter lets through.
    pub record: Option<Record<'a>>,
}

/// The items a [`MapDocument`] reads, each pushed after the format
/// counted it in the report.
pub struct Items<'a> {
    /// Each item, what it added to the report, and its session's parent
    /// ([`Items::set_parent_session`]).
    list: Vec<(Item<'a>, LineCounts, Option<&'a str>)>,
    parent: Option<&'a str>,
    tracker: Tracker,
    /// Values the items' records borrow that own heap memory (an arena
    /// never runs a value's drop): given to the source, dropped after its
    /// entries. Declared after `list`, so dropped after it.
    held: Vec<Box<dyn std::any::Any + Send>>,
    /// Whether items' versions are taken ([`Items::version_of`]).
    versions: bool,
}

impl<'a> Items<'a> {
    /// Adds the next item. `report` is the report the format counts the
    /// document in, with the item counted (its record or `no_record`,
    /// its usage); the driver counts its line.
    pub fn push(&mut self, report: &mut Report, item: Item<'a>) {
        report.lines += 1;
        self.tracker.after_line(report, true);
        self.list
            .push((item, self.tracker.take_last(), self.parent));
    }

    /// The session the items pushed from now on belong to was forked from
    /// or started by (its parent's lineage id, `<format>:<id>`), or none
    /// (the default): for a format whose documents are not one session
    /// each but parts of sessions told apart inside a lineage (OpenCode's
    /// message files), as [`crate::rows::Rows::set_parent_session`]
    /// ([`crate::line::Entry::parent_session`]).
    pub fn set_parent_session(&mut self, parent: Option<&'a str>) {
        self.parent = parent;
    }

    /// Keeps `value` as long as the records (the document's source), and
    /// lends it for that long: for what records borrow that owns heap
    /// memory, which a value put in the arena would never give back.
    pub fn hold<T: Send + 'static>(&mut self, value: T) -> &'a T {
        let b = Box::new(value);
        let ptr: *const T = &raw const *b;
        self.held.push(b);
        // SAFETY: the value is on the heap, at an address that does not move
        // when its box moves; the box is dropped only with `held`, which
        // goes from these items to the document's source and is declared
        // after what borrows it there (the entries) and here (`list`), so
        // it outlives every borrow of `'a` handed out through them.
        #[allow(unsafe_code)]
        unsafe {
            &*ptr
        }
    }

    /// The version of an item whose JSON is `value` ([`value_hash`]), or
    /// 0 when this read keeps none: a run without a checkpoint reading a
    /// document for the first time compares no version and saves none
    /// (a version hashes the whole item: a tenth of such a read).
    pub fn version_of(&self, value: &[Node<'_>]) -> u64 {
        if self.versions {
            value_hash(value)
        } else {
            0
        }
    }

    /// Room for `n` more items (a document's count of messages), at most
    /// [`RESERVE_MAX`]: pushing them then moves none.
    pub fn reserve(&mut self, n: usize) {
        self.list.reserve(n.min(RESERVE_MAX));
    }

    /// Items pushed so far.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether none was pushed.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// The most items [`Items::reserve`] makes room for at once (a hostile
/// document's count is not trusted with memory ahead of its items).
const RESERVE_MAX: usize = 4096;

/// A format's reading of its documents.
pub trait MapDocument: Send + Sync {
    /// Whether a checkpoint keeps the document's [`content_hash`]
    /// (default true): for a format whose writer may rewrite a document
    /// without moving its modification time (Amp,
    /// [`crate::format::Format::hashes_unchanged`]), the only one that
    /// compares it. Otherwise [`DocState::hash`] is 0.
    fn hashes_content(&self) -> bool {
        true
    }

    /// The document's identity and items: `data` is the whole document
    /// (its bytes as read), `arena` lives as long as the records. Each
    /// item is counted in `report` (a record with
    /// [`Report::count_record`], else `no_record`; its usage) and then
    /// pushed. `Err`: the document is not one of this format's shape (or
    /// does not parse), the reason of the counted skip of the file's one
    /// "line".
    ///
    /// # Errors
    /// The reason the document was skipped.
    fn read<'a>(
        &self,
        data: &'a [u8],
        path: &Path,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        items: &mut Items<'a>,
    ) -> Result<Header, SkipReason>;
}

/// What a document's checkpoint keeps (its running context): the hash of
/// the content last read (0 for a format that does not compare it,
/// [`MapDocument::hashes_content`]), and each key emitted with its
/// version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocState {
    /// [`content_hash`] of the bytes last read (0 where the format does
    /// not hash its documents).
    pub hash: u64,
    /// Emitted keys (hashed) and their versions, sorted by key.
    pub emitted: Vec<(u64, u64)>,
}

/// The first byte of an encoded [`DocState`].
const STATE_TAG: u8 = b'D';

impl DocState {
    /// Its bytes: the tag, the hash, the count, the pairs (little-endian).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(17 + 16 * self.emitted.len());
        b.push(STATE_TAG);
        b.extend_from_slice(&self.hash.to_le_bytes());
        b.extend_from_slice(&(self.emitted.len() as u64).to_le_bytes());
        for (k, v) in &self.emitted {
            b.extend_from_slice(&k.to_le_bytes());
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// `None` for an empty or damaged context (nothing emitted known).
    pub fn decode(b: &[u8]) -> Option<DocState> {
        let (&tag, rest) = b.split_first()?;
        if tag != STATE_TAG || rest.len() < 16 {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(rest[i..i + 8].try_into().expect("8 bytes"));
        let (hash, n) = (word(0), word(8));
        let n = usize::try_from(n).ok()?;
        if rest.len() != 16 + n.checked_mul(16)? {
            return None;
        }
        let emitted = (0..n)
            .map(|i| (word(16 + 16 * i), word(24 + 16 * i)))
            .collect();
        Some(DocState { hash, emitted })
    }
}

/// The content hash a document's saved context holds, if any.
pub fn saved_hash(context: &[u8]) -> Option<u64> {
    DocState::decode(context).map(|s| s.hash)
}

fn key_hash(key: &str) -> u64 {
    fingerprint(&[b"doc-key", key.as_bytes()])
}

/// The pair a document's context keeps for an item that was a copy of
/// another file's entry when it was emitted (its fingerprint's), beside
/// its key's ([`mark_copies`]).
fn copy_hash(fp: u64) -> u64 {
    fingerprint(&[b"doc-copy", &fp.to_le_bytes()])
}

/// `context` (a document's, [`DocState`]) with the items of fingerprints
/// `fps` noted as copies: the engine found them emitted by another file
/// of their lineage and took their counts out of the document's report.
/// A later read of the document hands each out again while its version
/// is the one emitted (not a revision), for the engine to find it a copy
/// again and take its counts out of that read's report, which replaces
/// the one saved; else a re-read (a touched file) would count them again.
/// (Pairs of their own, which an earlier release's reading ignores: the
/// context's layout is the same.) A context that is not a document's is
/// given back as it is.
pub fn mark_copies(context: &[u8], fps: &[u64]) -> Vec<u8> {
    let Some(mut st) = DocState::decode(context) else {
        return context.to_vec();
    };
    let before = st.emitted.len();
    for &fp in fps {
        let h = copy_hash(fp);
        if st.emitted[..before]
            .binary_search_by_key(&h, |p| p.0)
            .is_err()
        {
            st.emitted.push((h, 0));
        }
    }
    st.emitted.sort_unstable();
    st.emitted.dedup_by_key(|p| p.0);
    st.encode()
}

/// The fingerprint of a revision of the item of fingerprint `fp` at
/// `version`.
pub fn revision_fingerprint(fp: u64, version: u64) -> u64 {
    fingerprint(&[b"revision", &fp.to_le_bytes(), &version.to_le_bytes()])
}

/// A header for a document that does not say one (it failed to parse):
/// the file's stem, no project.
pub fn fallback_header(tag: &[u8], path: &Path) -> Header {
    Header {
        id: path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cwd: String::new(),
        version: 0,
        timestamp: None,
        parent: None,
        fingerprint: crate::source::headerless_fingerprint(tag, path),
    }
}

/// One entry to hand out, with what its item added to the report.
struct Ready<'a> {
    entry: Entry<'a>,
    counts: LineCounts,
}

/// A source over a whole document (see the module's docs).
struct DocumentSource<'d> {
    // Declared first, dropped first: the entries borrow the arena and the
    // data below.
    ready: std::vec::IntoIter<Ready<'static>>,
    last_counts: Option<LineCounts>,
    header: Option<Header>,
    report: Report,
    state: DocState,
    position: Position,
    error: Option<Error>,
    /// What the entries borrow beside the arena ([`Items::hold`]).
    held: Vec<Box<dyn std::any::Any + Send>>,
    arena: Box<Bump>,
    data: Cow<'d, [u8]>,
}

/// The largest buffer a thread keeps for its next document
/// ([`give_back`]): a larger one (a document of more) is freed with its
/// source.
const SPARE_MAX: usize = 16 << 20;

thread_local! {
    /// The buffer the thread's next document is read into: the one of the
    /// document read before, given back when its source was dropped. A
    /// fresh buffer for each document cost its pages' faults every time
    /// (a one-job run over thousands of documents).
    static SPARE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

thread_local! {
    /// The thread's JSON parser for documents ([`parser`]).
    static PARSER: std::cell::RefCell<Option<JsonParser>> = const { std::cell::RefCell::new(None) };
}

/// The thread's parser for documents, kept from document to document
/// (its tape grown once, not again for each document) while its scratch
/// space stays within [`SPARE_MAX`]: given back when dropped.
pub(crate) fn parser() -> Parser {
    Parser(
        PARSER
            .try_with(|p| p.borrow_mut().take())
            .ok()
            .flatten()
            .unwrap_or_default(),
    )
}

/// See [`parser`].
pub(crate) struct Parser(JsonParser);

impl std::ops::Deref for Parser {
    type Target = JsonParser;
    fn deref(&self) -> &JsonParser {
        &self.0
    }
}

impl std::ops::DerefMut for Parser {
    fn deref_mut(&mut self) -> &mut JsonParser {
        &mut self.0
    }
}

impl Drop for Parser {
    fn drop(&mut self) {
        if self.0.capacity() <= SPARE_MAX {
            let json = std::mem::take(&mut self.0);
            let _ = PARSER.try_with(|p| *p.borrow_mut() = Some(json));
        }
    }
}

/// Keeps `buf` for the thread's next document, unless it is larger than
/// [`SPARE_MAX`] or the thread keeps a larger one.
fn give_back(mut buf: Vec<u8>) {
    if buf.capacity() > SPARE_MAX {
        return;
    }
    buf.clear();
    // (A thread being torn down keeps nothing.)
    let _ = SPARE.try_with(|s| {
        let mut s = s.borrow_mut();
        if s.capacity() < buf.capacity() {
            *s = buf;
        }
    });
}

/// Reads `input` whole (at most [`MAX_DOCUMENT`] bytes), into the
/// thread's spare buffer ([`SPARE`]) grown to `capacity` bytes first (the
/// engine gives a file smaller than its reader's buffer a buffer of its
/// size and one byte: read in one call, never grown).
fn read_input<'d>(input: Input<'d>, path: &Path, capacity: usize) -> Result<Cow<'d, [u8]>, Error> {
    let too_large = |what: String| {
        Error::io(
            path,
            std::io::Error::other(format!(
                "a document of {what} is larger than the {} MiB a document may be: not read \
                 (nothing of it is emitted; the file stays failed until it is smaller)",
                MAX_DOCUMENT >> 20
            )),
        )
    };
    match input {
        Input::Bytes(b) if b.len() as u64 > MAX_DOCUMENT => {
            Err(too_large(format!("{} bytes", b.len())))
        }
        Input::Bytes(b) => Ok(Cow::Borrowed(b)),
        Input::Reader(r) => {
            let cap = capacity.min(usize::try_from(MAX_DOCUMENT + 1).unwrap_or(usize::MAX));
            let mut data = SPARE.try_with(std::cell::RefCell::take).unwrap_or_default();
            data.clear();
            data.reserve(cap);
            let read = r.take(MAX_DOCUMENT + 1).read_to_end(&mut data);
            if let Err(e) = read {
                give_back(data);
                return Err(Error::io(path, e));
            }
            if data.len() as u64 > MAX_DOCUMENT {
                give_back(data);
                return Err(too_large(format!("more than {MAX_DOCUMENT} bytes")));
            }
            Ok(Cow::Owned(data))
        }
    }
}

/// A source over the document `input`, read whole with `map`. `prior`:
/// the header and running context its checkpoint saved (the keys emitted
/// before), for a document read again.
pub fn open<'d>(
    map: &dyn MapDocument,
    tag: &'static [u8],
    input: Input<'d>,
    path: &Path,
    prior: Option<(&Header, &[u8])>,
    opts: &SourceOptions,
) -> BoxedSource<'d> {
    let before = prior
        .and_then(|(_, c)| DocState::decode(c))
        .unwrap_or_default();
    let mut src = DocumentSource {
        ready: Vec::new().into_iter(),
        last_counts: None,
        header: None,
        report: opts.report(),
        state: before.clone(),
        position: Position {
            byte: 0,
            line: 0,
            open_line: false,
        },
        error: None,
        held: Vec::new(),
        arena: Box::new(Bump::new()),
        data: Cow::Borrowed(&[]),
    };
    match read_input(input, path, opts.buffer_bytes()) {
        Ok(d) => src.data = d,
        Err(e) => {
            // Nothing emitted: the saved context stays as it was.
            src.error = Some(e);
            return Box::new(src);
        }
    }
    let data: &[u8] = &src.data;
    src.report.bytes = data.len() as u64;
    src.position.byte = data.len() as u64;
    // What a later read compares: kept when a checkpoint saves this
    // read's context, or when a saved one is compared now.
    let keeps = opts.checkpointed || prior.is_some();
    let hash = if keeps && map.hashes_content() {
        content_hash(data)
    } else {
        0
    };
    let body = &data[crate::line_reader::bom_len(data)..];
    if body
        .iter()
        .all(|b| matches!(b, 0 | b' ' | b'\t' | b'\r' | b'\n'))
    {
        // Nothing but whitespace (a document being replaced): nothing
        // emitted, read again when it changes. One read before keeps its
        // header and what it emitted (its checkpoint entry stays).
        src.report.empty = true;
        src.state.hash = hash;
        src.header = prior.map(|(h, _)| h.clone());
        return Box::new(src);
    }
    // SAFETY: the records built below borrow `data` and the arena. Both
    // live in `src` as long as the entries do, at addresses that do not
    // move with `src`: the arena is boxed and its chunks are on the heap;
    // `data` is either borrowed for `'d` (which `src` cannot outlive) or
    // an owned buffer on the heap, never changed after this point. The
    // entries are declared before them in `DocumentSource`, so they are
    // dropped first, and each is handed out borrowing the source mutably
    // (shortened to that borrow), so none outlives it.
    #[allow(unsafe_code)]
    let (data, arena): (&'static [u8], &'static Bump) = unsafe {
        (
            std::slice::from_raw_parts(data.as_ptr(), data.len()),
            &*std::ptr::from_ref::<Bump>(&src.arena),
        )
    };
    let mut items = Items {
        list: Vec::new(),
        parent: None,
        tracker: Tracker::new(&src.report),
        held: Vec::new(),
        versions: keeps,
    };
    let read = map.read(data, path, arena, opts.filter, &mut src.report, &mut items);
    let header = match read {
        Ok(h) => h,
        Err(reason) => {
            // The whole document is one skipped line; what was emitted of
            // it stays emitted, and a later version is read again.
            src.report.lines = 1;
            src.report.skip(1, 0, reason);
            src.position.line = 1;
            src.state.hash = hash;
            src.header = Some(match prior {
                Some((h, _)) => h.clone(),
                None => fallback_header(tag, path),
            });
            return Box::new(src);
        }
    };
    src.position.line = items.list.len() as u64;
    src.held = std::mem::take(&mut items.held);
    src.header = Some(header);
    if !keeps {
        // Nothing emitted before, nothing saved: every settled item is
        // new (its key's copies too, each its own item), as below.
        src.state = DocState::default();
        src.ready = items
            .list
            .into_iter()
            .filter(|(item, _, _)| item.settled)
            .map(|(item, counts, parent)| Ready {
                entry: Entry {
                    fingerprint: item.fingerprint,
                    line: item.line,
                    byte: item.byte,
                    record: item.record,
                    revision: false,
                    parent_session: parent,
                },
                counts,
            })
            .collect::<Vec<_>>()
            .into_iter();
        return Box::new(src);
    }
    let emitted: HashMap<u64, u64> = before.emitted.iter().copied().collect();
    let mut now: HashMap<u64, u64> = emitted.clone();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut ready = Vec::with_capacity(items.list.len());
    for (item, counts, parent) in items.list {
        let mut kh = key_hash(item.key);
        let copies = seen.entry(kh).or_insert(0);
        *copies += 1;
        if *copies > 1 {
            let n = *copies;
            kh = key_hash(&format!("{}#{n}", item.key));
        }
        if !item.settled {
            continue;
        }
        let entry = |fingerprint, revision| Entry {
            fingerprint,
            line: item.line,
            byte: item.byte,
            record: item.record,
            revision,
            parent_session: parent,
        };
        match emitted.get(&kh) {
            Some(v) if *v == item.version => {
                if emitted.contains_key(&copy_hash(item.fingerprint)) {
                    // A copy of another file's entry when it was emitted
                    // ([`mark_copies`]): again, for the engine to take its
                    // counts out of this read's report as it did then.
                    ready.push(Ready {
                        entry: entry(item.fingerprint, false),
                        counts,
                    });
                }
            }
            Some(_) if item.positional => {
                // Another item in a place emitted before: its own key (the
                // place and its version), emitted once, beside the first.
                let own = key_hash(&format!("{}@{:016x}", item.key, item.version));
                if !emitted.contains_key(&own) {
                    now.insert(own, item.version);
                    ready.push(Ready {
                        entry: entry(revision_fingerprint(item.fingerprint, item.version), false),
                        counts,
                    });
                }
            }
            Some(_) => {
                now.insert(kh, item.version);
                // Counted with the document: taking it out as a copy
                // takes nothing out.
                ready.push(Ready {
                    entry: entry(revision_fingerprint(item.fingerprint, item.version), true),
                    counts: LineCounts::default(),
                });
            }
            None => {
                now.insert(kh, item.version);
                ready.push(Ready {
                    entry: entry(item.fingerprint, false),
                    counts,
                });
            }
        }
    }
    let mut emitted: Vec<(u64, u64)> = now.into_iter().collect();
    emitted.sort_unstable();
    src.state = DocState { hash, emitted };
    src.ready = ready.into_iter();
    Box::new(src)
}

impl Drop for DocumentSource<'_> {
    /// The entries go first (they borrow the data), then the data's buffer
    /// goes back to the thread for its next document ([`give_back`]).
    fn drop(&mut self) {
        self.ready = Vec::new().into_iter();
        if let Cow::Owned(buf) = std::mem::replace(&mut self.data, Cow::Borrowed(&[])) {
            give_back(buf);
        }
    }
}

impl RecordSource for DocumentSource<'_> {
    /// The records of new items (a revision is an entry's, for the
    /// engine: see [`Entry::revision`]).
    fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for r in self.ready.by_ref() {
            self.last_counts = Some(r.counts);
            if let (Some(rec), false) = (r.entry.record, r.entry.revision) {
                return Ok(Some(rec));
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
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        Ok(self.ready.next().map(|r| {
            self.last_counts = Some(r.counts);
            r.entry
        }))
    }

    fn position(&self) -> Position {
        self.position
    }

    fn running_context(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn entry_counts(&self) -> Option<&LineCounts> {
        self.last_counts.as_ref()
    }

    fn take_report(&mut self) -> Report {
        std::mem::take(&mut self.report)
    }
}
