//! Record sources: a session file as a lending stream of records.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bumpalo::Bump;

use crate::counts::{LineCounts, Tracker};
use crate::error::Error;
use crate::json::{LineHash, ParsedLine};
use crate::line::{Entry, Header, LineParser, LinePos, MapLine};
use crate::line_reader::{
    bom_len, FileAt, LineEvent, LineReader, Pooled, ReadAt, DEFAULT_BUFFER_CAPACITY,
    DEFAULT_MAX_LINE,
};
use crate::record::Record;
use crate::record::RoleFilter;
use crate::report::{Report, SkipReason, DEFAULT_MAX_SKIPS};
/// What a source reads: a reader (streamed through the chunked line reader)
/// or bytes already in memory (split in place).
pub enum Input<'d> {
    /// A reader, at the start of the file or of a part.
    Reader(Box<dyn Read + Send + 'd>),
    /// Bytes in memory: the whole file, or a part.
    Bytes(&'d [u8]),
}

/// A stream of records.
///
/// The stream *lends*: each record borrows the source (its line copy and
/// arena) until the next call. That is what makes records zero-copy and
/// allocation-free in steady state: the arena is reset at every call, so
/// memory stays at one line however long the file is. A batch interface
/// would have to keep a whole batch of parsed lines alive at once for no
/// gain. Callers that keep records call [`Record::to_owned_record`].
pub trait RecordSource {
    /// The next record, `Ok(None)` at the end of the stream. Damaged lines
    /// are skipped and counted in the report, never returned as errors.
    ///
    /// # Errors
    /// An I/O error while reading; the error names the file.
    fn next_record(&mut self) -> Result<Option<Record<'_>>, Error>;

    /// What happened so far (complete once `next_record` returned `None`).
    fn report(&self) -> &Report;

    /// The session header; `None` for an empty file.
    fn header(&self) -> Option<&Header>;

    /// The next entry, with or without a record: every line that parses
    /// to an object with a string `type` after the header, for callers that
    /// deduplicate or track what they consumed. Mixing it with
    /// `next_record` is fine: each line is handed out once.
    ///
    /// # Errors
    /// As `next_record`.
    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error>;

    /// [`RecordSource::next_entry`], with the line the entry was parsed
    /// from when the source has it (the line as read, parsed without
    /// repair): an encoder may copy a string of the record from it instead
    /// of escaping it again ([`ParsedLine::escaped`]). The default hands
    /// out no line.
    ///
    /// # Errors
    /// As `next_record`.
    fn next_entry_parsed(&mut self) -> Result<Option<(Entry<'_>, Option<ParsedLine<'_>>)>, Error> {
        Ok(self.next_entry()?.map(|e| (e, None)))
    }

    /// Where a later read of the same file would resume: just after the
    /// last line consumed (a held partial tail excluded).
    fn position(&self) -> Position;

    /// What a later part of the file needs from the lines before
    /// [`RecordSource::position`] (the current model, a running total),
    /// encoded by the format (see [`crate::format::Format::resume`]).
    /// Empty by default: pi needs none.
    fn running_context(&self) -> Vec<u8> {
        Vec::new()
    }

    /// What the last entry handed out added to [`RecordSource::report`]
    /// (exactly what reading its line alone would count), for sources
    /// that keep it: the engine then takes a duplicate's counts out
    /// without reading its line again. `None` by default (the engine
    /// reads a duplicate's line again).
    fn entry_counts(&self) -> Option<&LineCounts> {
        None
    }

    /// The report, taken out of a source that is done: what
    /// [`RecordSource::report`] held, leaving an empty one. The default
    /// clones it; the crate's sources move it (a Claude Code report holds
    /// every usage line's response).
    fn take_report(&mut self) -> Report {
        self.report().clone()
    }

    /// The report so far, leaving a fresh one that counts what is read
    /// after it: a long read is handed over in parts, each with its own
    /// report, which must count exactly the entries handed out before it
    /// (deduplication takes a copy's counts and usage rows out of the
    /// report of the part that holds the copy). `None` when the source
    /// cannot here: the engine asks again after the next entry. The
    /// default never can: its read is handed over whole, at its end.
    fn take_report_so_far(&mut self) -> Option<Report> {
        None
    }
}

/// A place in a session file, after a whole number of lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Absolute byte offset.
    pub byte: u64,
    /// Lines before it (blank lines included).
    pub line: u64,
    /// The last line consumed had no `\n` (and was not held back): when
    /// the file has grown, a `\n` at `byte` ends that line.
    pub open_line: bool,
}

/// Options of a source (`Clone`, so one set serves many files). Every setter documents its default.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    pub buffer_capacity: usize,
    pub max_line: usize,
    pub filter: RoleFilter,
    pub max_skips: usize,
    pub hold_partial: bool,
    pub count_entries: bool,
    pub line_hash: LineHash,
    pub raw_text: bool,
    /// Whether reports keep a row per usage counted
    /// ([`Report::usage_rows`]).
    pub usage_rows: bool,
    /// Whether what is held back until final is final at the input's end
    /// (see [`SourceOptions::end_final`]).
    pub end_final: Option<bool>,
    /// The input's bytes, read again by offset: a line longer than the
    /// buffer is then looked at without being held (set per file by the
    /// engine and by [`PiSessionSource::open_with`]).
    pub again: Option<Arc<dyn ReadAt>>,
    /// Whether what a source reads is checkpointed
    /// ([`SourceOptions::checkpointed`]).
    pub checkpointed: bool,
    /// `--shard K/N` as `(K, N)`, for a database that holds many
    /// lineages and reads only its shard's rows
    /// ([`crate::rows::Database::only_shard`]); files are chosen by the
    /// engine instead. `None`: every row.
    pub shard: Option<(u32, u32)>,
    /// The run's jobs ([`SourceOptions::jobs`]).
    pub jobs: usize,
}

impl Default for SourceOptions {
    fn default() -> Self {
        SourceOptions {
            buffer_capacity: DEFAULT_BUFFER_CAPACITY,
            max_line: DEFAULT_MAX_LINE,
            filter: RoleFilter::ALL,
            max_skips: DEFAULT_MAX_SKIPS,
            hold_partial: false,
            count_entries: false,
            line_hash: LineHash::default(),
            raw_text: false,
            usage_rows: false,
            end_final: None,
            again: None,
            checkpointed: true,
            shard: None,
            jobs: 1,
        }
    }
}

impl SourceOptions {
    /// Default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Read buffer capacity in bytes (default 256 KiB, at least 1). The
    /// buffer grows for a longer line, up to the maximum line length.
    pub fn buffer_capacity(mut self, bytes: usize) -> Self {
        self.buffer_capacity = bytes.max(1);
        self
    }

    /// Maximum line length in bytes (default 512 MiB). A longer line is
    /// skipped (reason `TooLong`). A source over a file
    /// ([`PiSessionSource::open_with`], the archive engine's) looks for its
    /// end without holding it; one over any other reader holds up to the
    /// maximum before it can tell.
    pub fn max_line(mut self, bytes: usize) -> Self {
        self.max_line = bytes;
        self
    }

    /// Which roles are handed out (default: all). Others are counted, and
    /// their text is never built.
    pub fn roles(mut self, filter: RoleFilter) -> Self {
        self.filter = filter;
        self
    }

    /// How many skips the report keeps in detail (default 1000; all are
    /// counted).
    pub fn max_skips(mut self, n: usize) -> Self {
        self.max_skips = n;
        self
    }

    /// Whether a last line without `\n` that does not parse (yet) is held
    /// back instead of skipped (default false): it is then neither counted
    /// nor skipped, its length is `Report::pending`, and
    /// [`RecordSource::position`] stops before it, for a later read to
    /// resume from when the writer has finished the line. A last line that
    /// parses is a record either way.
    pub fn hold_partial_tail(mut self, hold: bool) -> Self {
        self.hold_partial = hold;
        self
    }

    /// How a format that knows a line by its bytes (Codex) hashes them
    /// into the entry's fingerprint (default [`LineHash::Xxh3`]). An
    /// archive run takes its checkpoint's: the fingerprints a checkpoint
    /// holds compare only with ones made the same way.
    pub fn line_hash(mut self, hash: LineHash) -> Self {
        self.line_hash = hash;
        self
    }

    /// See [`SourceOptions::line_hash`].
    pub fn line_hash_scheme(&self) -> LineHash {
        self.line_hash
    }

    pub fn buffer_bytes(&self) -> usize {
        self.buffer_capacity
    }

    pub fn max_line_len(&self) -> usize {
        self.max_line
    }

    /// Whether sources that can keep each entry's counts
    /// ([`RecordSource::entry_counts`]) do (default false: the engine
    /// asks for them when it deduplicates).
    pub fn count_entries(mut self, on: bool) -> Self {
        self.count_entries = on;
        self
    }

    /// Whether reports keep a row per usage counted, with its line and
    /// time ([`Report::usage_rows`]; default false).
    pub fn usage_rows(mut self, on: bool) -> Self {
        self.usage_rows = on;
        self
    }

    /// Whether what a format holds back until a later line follows
    /// (Gemini CLI's message written last) is final at the input's end:
    /// None (the default) when the file has been still a few seconds;
    /// Some as given. For a read of a file up to where a checkpoint
    /// stopped, decided as the run that saved it decided then (what it held
    /// stays held, whatever the file has become).
    pub fn end_final(mut self, end_final: Option<bool>) -> Self {
        self.end_final = end_final;
        self
    }

    /// Whether a pi record's text may be built escaped, as the NDJSON
    /// writer writes it, from its line's raw strings (default false): only
    /// for the engine's NDJSON writer, which reads the text through the
    /// entry's [`ParsedLine`] alone
    /// ([`crate::json::JsonParser::set_raw_text`]).
    pub fn raw_text(mut self, on: bool) -> Self {
        self.raw_text = on;
        self
    }

    /// Where a source reads its input's bytes again (the input read from
    /// its start, or from where a part starts, at the same offsets), so
    /// that a long line is looked at without being held; `None` (the
    /// default): a line is held up to the maximum line length.
    pub fn read_again(mut self, again: Option<Arc<dyn ReadAt>>) -> Self {
        self.again = again;
        self
    }

    /// See [`SourceOptions::read_again`] (a compressed rollout's source
    /// reads its file again by decoding it).
    #[cfg(feature = "zstd")]
    pub fn reading_again(&self) -> Option<&Arc<dyn ReadAt>> {
        self.again.as_ref()
    }

    /// Whether a checkpoint keeps what the source reads (default true):
    /// false for a run with no state, store or dataset, whose sources'
    /// running contexts nobody saves. A document source then takes no
    /// item versions and no content hash ([`crate::document`]): only a
    /// checkpoint's next read compares them.
    pub fn checkpointed(mut self, on: bool) -> Self {
        self.checkpointed = on;
        self
    }

    /// The run's jobs (`--jobs`; default 1): a source may read on a
    /// thread of its own beside the caller's when more than one (a
    /// database's next batch read ahead while the caller takes the one
    /// before).
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    /// [`SourceOptions::read_again`] from `file`, when it is a regular
    /// file.
    pub fn read_again_from(self, file: &Arc<File>) -> Self {
        self.read_again(FileAt::of(Arc::clone(file)))
    }

    pub fn report(&self) -> Report {
        Report {
            max_skips: self.max_skips,
            keep_usage_rows: self.usage_rows,
            ..Report::default()
        }
    }
}

/// One line as a line supplier hands it out.
pub enum Supplied<'b> {
    Line(&'b [u8], LinePos),
    TooLong { pos: LinePos, len: u64 },
}

/// Where a source gets its lines: the chunked reader or a mapping.
pub trait Lines {
    fn next_line(&mut self) -> io::Result<Option<Supplied<'_>>>;
    /// Absolute offset after the last line handed out.
    fn consumed(&self) -> u64;
    /// Lines handed out, counted from the first line of the file.
    fn lines_read(&self) -> u64;
    /// The last line handed out (`len` bytes, its `\n` when `terminated`
    /// left out), while `next_line` has not been called since.
    fn last_line(&self, len: usize, terminated: bool) -> &[u8];
}

impl<R: Read> Lines for LineReader<R> {
    fn next_line(&mut self) -> io::Result<Option<Supplied<'_>>> {
        Ok(match LineReader::next_line(self)? {
            None => None,
            Some(LineEvent::Line(l)) => {
                let pos = LinePos {
                    line: l.number,
                    byte: l.byte,
                    terminated: l.terminated,
                };
                Some(Supplied::Line(&self.buffer()[l.start..l.end], pos))
            }
            Some(LineEvent::TooLong {
                byte,
                number,
                len,
                terminated,
            }) => Some(Supplied::TooLong {
                pos: LinePos {
                    line: number,
                    byte,
                    terminated,
                },
                len,
            }),
        })
    }

    fn consumed(&self) -> u64 {
        LineReader::consumed(self)
    }

    fn lines_read(&self) -> u64 {
        LineReader::lines(self)
    }

    fn last_line(&self, len: usize, terminated: bool) -> &[u8] {
        LineReader::last_line(self, len, terminated)
    }
}

/// The reader a streamed source reads: the prefix read for the context,
/// then the rest.
type Chained<'d> = std::io::Chain<io::Cursor<Pooled>, Box<dyn Read + Send + 'd>>;

/// The lines of a file of a format without a header line of pi's kind
/// (Claude Code, Codex: the context comes from the file's first bytes):
/// bytes in memory, a file read whole with its prefix, or the chunked
/// reader over the prefix and the rest.
pub enum FileLines<'d> {
    Slice(SliceLines<&'d [u8]>),
    Owned(SliceLines<Pooled>),
    Reader(LineReader<Chained<'d>>),
}

impl Lines for FileLines<'_> {
    fn next_line(&mut self) -> io::Result<Option<Supplied<'_>>> {
        match self {
            FileLines::Slice(l) => l.next_line(),
            FileLines::Owned(l) => l.next_line(),
            FileLines::Reader(l) => Lines::next_line(l),
        }
    }

    fn consumed(&self) -> u64 {
        match self {
            FileLines::Slice(l) => l.consumed(),
            FileLines::Owned(l) => l.consumed(),
            FileLines::Reader(l) => Lines::consumed(l),
        }
    }

    fn lines_read(&self) -> u64 {
        match self {
            FileLines::Slice(l) => l.lines_read(),
            FileLines::Owned(l) => l.lines_read(),
            FileLines::Reader(l) => Lines::lines_read(l),
        }
    }

    fn last_line(&self, len: usize, terminated: bool) -> &[u8] {
        match self {
            FileLines::Slice(l) => l.last_line(len, terminated),
            FileLines::Owned(l) => l.last_line(len, terminated),
            FileLines::Reader(l) => Lines::last_line(l, len, terminated),
        }
    }
}

/// The first step of a header-less file's prefix read from a stream (see
/// [`open_headerless`]).
const PREFIX_STEP: usize = 64 << 10;

/// A header-less file's prefix after its byte-order mark, where its
/// context is looked for; `None` for a file (`whole`: the prefix is the
/// whole file) that holds nothing but whitespace, NULs and the mark: it
/// has no context and gives no records.
pub fn headerless_body(prefix: &[u8], whole: bool) -> Option<&[u8]> {
    let body = &prefix[bom_len(prefix)..];
    let blank = whole
        && body
            .iter()
            .all(|b| matches!(b, 0 | b' ' | b'\t' | b'\r' | b'\n'));
    (!blank).then_some(body)
}

/// A header-less file's header fingerprint: its format's `tag` and its
/// path, the file's own (no other file's header has it).
pub fn headerless_fingerprint(tag: &[u8], path: &Path) -> u64 {
    crate::json::fingerprint(&[tag, crate::sys::os_bytes(path.as_os_str())])
}

/// A session over a whole file whose mapping context `context(prefix,
/// whole)` builds from its first `limit` bytes (`prefix`, a byte-order
/// mark included; `whole`: `prefix` is the whole file): the lines start
/// after the mark. A reader's prefix is read once and handed to the lines
/// (a file shorter than `limit` is then read from memory, never copied
/// again).
///
/// # Errors
/// An I/O error while reading the prefix.
pub fn open_headerless<'d, C: MapLine>(
    input: Input<'d>,
    path: &Path,
    opts: &SourceOptions,
    limit: usize,
    context: impl Fn(&[u8], bool) -> Option<C>,
) -> Result<LineDriver<FileLines<'d>, C>, Error> {
    let max_line = opts.max_line_len();
    let (lines, ctx) = match input {
        Input::Bytes(b) => {
            let prefix = &b[..b.len().min(limit)];
            let bom = bom_len(prefix);
            let ctx = context(prefix, b.len() <= limit);
            let lines = SliceLines::starting_at(&b[bom..], max_line, bom as u64, 0);
            (FileLines::Slice(lines), ctx)
        }
        Input::Reader(mut r) => {
            // A spare buffer: no fresh pages for every file. Read in steps
            // (64 KiB, then four times as much) until the context says its
            // header is found: the prefix is held while the file is read.
            let mut prefix = Pooled::take();
            let mut step = limit.min(PREFIX_STEP);
            let (whole, ctx) = loop {
                let want = step - prefix.len();
                prefix.reserve(want);
                (&mut r)
                    .take(want as u64)
                    .read_to_end(&mut prefix)
                    .map_err(|e| Error::io(path, e))?;
                let whole = prefix.len() < step;
                let ctx = context(&prefix, whole);
                if whole || step == limit || ctx.as_ref().is_some_and(MapLine::header_found) {
                    break (whole, ctx);
                }
                step = step.saturating_mul(4).min(limit);
            };
            let bom = bom_len(&prefix);
            prefix.drain(..bom);
            let lines = if whole {
                FileLines::Owned(SliceLines::starting_at(prefix, max_line, bom as u64, 0))
            } else {
                let rdr: Chained<'d> = io::Cursor::new(prefix).chain(r);
                FileLines::Reader(
                    LineReader::starting_at(rdr, opts.buffer_bytes(), max_line, bom as u64, 0)
                        .read_again(opts.again.clone()),
                )
            };
            (lines, ctx)
        }
    };
    Ok(LineDriver::with_context(lines, path, ctx, 0, opts))
}

/// A session over a part of such a file, from `byte` (after `lines_before`
/// lines), whose context is known.
pub fn resume_headerless<'d, C: MapLine>(
    input: Input<'d>,
    path: &Path,
    ctx: C,
    byte: u64,
    lines_before: u64,
    opts: &SourceOptions,
) -> LineDriver<FileLines<'d>, C> {
    let max_line = opts.max_line_len();
    let lines = match input {
        Input::Bytes(b) => {
            FileLines::Slice(SliceLines::starting_at(b, max_line, byte, lines_before))
        }
        Input::Reader(r) => {
            let rdr: Chained<'d> = io::Cursor::new(Pooled::default()).chain(r);
            FileLines::Reader(
                LineReader::starting_at(rdr, opts.buffer_bytes(), max_line, byte, lines_before)
                    .read_again(opts.again.clone()),
            )
        }
    };
    LineDriver::with_context(lines, path, Some(ctx), byte, opts)
}

/// Lines of bytes in memory (a slice, a mapping), split with `memchr`: no
/// copy into a read buffer.
#[derive(Debug)]
pub struct SliceLines<D> {
    data: D,
    pos: usize,
    /// Absolute offset of the first byte of `data`.
    base: u64,
    lines: u64,
    max_line: usize,
}

impl<D: AsRef<[u8]>> SliceLines<D> {
    pub fn new(data: D, max_line: usize) -> Self {
        Self::starting_at(data, max_line, 0, 0)
    }

    pub fn starting_at(data: D, max_line: usize, base: u64, lines: u64) -> Self {
        SliceLines {
            data,
            pos: 0,
            base,
            lines,
            max_line,
        }
    }
}

impl<D: AsRef<[u8]>> Lines for SliceLines<D> {
    fn next_line(&mut self) -> io::Result<Option<Supplied<'_>>> {
        let data = self.data.as_ref();
        if self.pos >= data.len() {
            return Ok(None);
        }
        let rest = &data[self.pos..];
        let (len, terminated) = match memchr::memchr(b'\n', rest) {
            Some(i) => (i, true),
            None => (rest.len(), false),
        };
        self.lines += 1;
        let pos = LinePos {
            line: self.lines,
            byte: self.base + self.pos as u64,
            terminated,
        };
        self.pos += len + usize::from(terminated);
        if len > self.max_line {
            return Ok(Some(Supplied::TooLong {
                pos,
                len: len as u64,
            }));
        }
        Ok(Some(Supplied::Line(&rest[..len], pos)))
    }

    fn consumed(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn last_line(&self, len: usize, terminated: bool) -> &[u8] {
        let end = self.pos - usize::from(terminated);
        &self.data.as_ref()[end - len..end]
    }

    fn lines_read(&self) -> u64 {
        self.lines
    }
}

/// The line driver: what every source over some line supplier `L` shares
/// (reading lines, parsing each, mapping it with the format's `C`,
/// counting, skipping, positions), for a format's line mapping `C`. Not a
/// session: one drives the lines of a file or of a part of one.
#[derive(Debug)]
pub struct LineDriver<L, C> {
    pub lines: L,
    pub path: PathBuf,
    /// Absolute offset where reading started (report.bytes counts from it).
    pub start: u64,
    pub parser: LineParser,
    pub arena: Bump,
    pub ctx: Option<C>,
    pub report: Report,
    pub hold_partial: bool,
    /// The last line handed out had no `\n`.
    pub last_unterminated: bool,
    /// What each line adds to the report, when the source keeps each
    /// entry's counts.
    pub counts: Option<Tracker>,
}

/// Parser scratch space (simd-json's buffers, the tape, the arena) kept per
/// thread when a source is dropped, for the next source on that thread:
/// reading thousands of small files then allocates nothing per file.
pub mod scratch {
    use std::cell::RefCell;

    use bumpalo::Bump;

    use crate::line::LineParser;
    use crate::record::RoleFilter;

    /// Scratch space above this is not kept.
    const KEEP_AT_MOST: usize = 64 << 20;

    thread_local! {
        static SPARE: RefCell<Option<(LineParser, Bump)>> = const { RefCell::new(None) };
    }

    pub fn take(filter: RoleFilter) -> (LineParser, Bump) {
        match SPARE.with_borrow_mut(Option::take) {
            Some((mut parser, arena)) => {
                parser.set_filter(filter);
                (parser, arena)
            }
            None => (LineParser::new(filter), Bump::new()),
        }
    }

    pub fn give(parser: LineParser, mut arena: Bump) {
        arena.reset();
        if arena.allocated_bytes() + parser.capacity() <= KEEP_AT_MOST {
            SPARE.with_borrow_mut(|s| *s = Some((parser, arena)));
        }
    }
}

impl<L, C> Drop for LineDriver<L, C> {
    fn drop(&mut self) {
        let parser = std::mem::replace(&mut self.parser, LineParser::new(RoleFilter::ALL));
        scratch::give(parser, std::mem::take(&mut self.arena));
    }
}

impl<L: Lines, C: MapLine> LineDriver<L, C> {
    /// A session whose mapping context is known (`None`: an empty file,
    /// which gives nothing), reading from where `lines` stands; `start` is
    /// the absolute offset that `report.bytes` counts from.
    pub fn with_context(
        lines: L,
        path: &Path,
        ctx: Option<C>,
        start: u64,
        opts: &SourceOptions,
    ) -> Self {
        let (mut parser, arena) = scratch::take(opts.filter);
        parser.set_raw_text(opts.raw_text && C::RAW_TEXT);
        let mut report = opts.report();
        report.empty = ctx.is_none();
        LineDriver {
            start,
            lines,
            path: path.to_path_buf(),
            parser,
            arena,
            ctx,
            report,
            hold_partial: opts.hold_partial,
            last_unterminated: false,
            counts: None,
        }
    }

    /// The report so far, leaving a fresh one for what is read from here
    /// on (a read handed over in parts): its bytes counted from here, its
    /// skips kept up to the same limit, each entry's counts tracked
    /// against it.
    pub fn take_report(&mut self) -> Report {
        let fresh = Report {
            max_skips: self.report.max_skips,
            keep_usage_rows: self.report.keep_usage_rows,
            ..Report::default()
        };
        let taken = std::mem::replace(&mut self.report, fresh);
        self.start += taken.bytes;
        if let Some(t) = self.counts.as_mut() {
            *t = Tracker::new(&self.report);
        }
        taken
    }

    /// Keeps each entry's counts ([`RecordSource::entry_counts`]) when
    /// `opts` asks for them.
    pub fn counting(mut self, opts: &SourceOptions) -> Self {
        if opts.count_entries {
            self.counts = Some(Tracker::new(&self.report));
        }
        self
    }

    /// What the last entry's line added, when kept.
    pub fn entry_counts(&self) -> Option<&LineCounts> {
        self.counts.as_ref().map(Tracker::last)
    }

    /// Where a later read would resume.
    pub fn position(&self) -> Position {
        let held = self.report.pending > 0;
        Position {
            byte: self.lines.consumed() - self.report.pending,
            line: self.lines.lines_read() - u64::from(held),
            open_line: !held && self.last_unterminated,
        }
    }

    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
        Ok(self.advance(false)?.and_then(|(e, _)| e.record))
    }

    pub fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
        Ok(self.advance(true)?.map(|(e, _)| e))
    }

    pub fn next_entry_parsed(
        &mut self,
    ) -> Result<Option<(Entry<'_>, Option<ParsedLine<'_>>)>, Error> {
        self.advance(true)
    }

    /// The next entry with a record, or with `all`, the next entry; with
    /// the line it was parsed from, when parsed as read.
    #[allow(clippy::type_complexity)]
    fn advance(&mut self, all: bool) -> Result<Option<(Entry<'_>, Option<ParsedLine<'_>>)>, Error> {
        let LineDriver {
            lines,
            path,
            start,
            parser,
            arena,
            ctx,
            report,
            hold_partial,
            last_unterminated,
            counts,
        } = self;
        let start = *start;
        arena.reset();
        let arena = &*arena;
        let Some(ctx) = ctx.as_ref() else {
            return Ok(None);
        };
        loop {
            let next = lines.next_line().map_err(|e| Error::io(path, e));
            let supplied = match next {
                Ok(Some(s)) => s,
                Ok(None) => {
                    report.bytes = lines.consumed() - start;
                    return Ok(None);
                }
                Err(e) => {
                    report.bytes = lines.consumed() - start;
                    return Err(e);
                }
            };
            match supplied {
                Supplied::TooLong { pos, len } => {
                    *last_unterminated = !pos.terminated;
                    report.lines += 1;
                    report.skip(pos.line, pos.byte, SkipReason::TooLong { len });
                }
                Supplied::Line(bytes, pos) => {
                    *last_unterminated = !pos.terminated;
                    let (at, len) = (bytes.as_ptr() as usize, bytes.len());
                    // The lean parse reads the line where it lies, and an
                    // entry it maps may borrow the line's bytes: they are
                    // given the arena's lifetime, which the borrow checker
                    // cannot see is sound across the loop (an entry of this
                    // line returned ends the loop; one not returned is
                    // dropped in this iteration).
                    //
                    // SAFETY: `bytes` lies in `lines`' buffer (or the input
                    // it borrows), which stays as it is until `lines` is
                    // next used mutably. That is the next iteration's
                    // `next_line`, after this iteration's entry is dropped,
                    // or, when the entry is returned, a later call on this
                    // session, which the returned entry's borrow of `self`
                    // keeps from happening while it lives. Nothing else
                    // keeps the line: `ctx` holds no borrowed data (`C` has
                    // no lifetime), and the arena is reset before the next
                    // line is read.
                    #[allow(unsafe_code)]
                    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(bytes.as_ptr(), len) };
                    let entry = parser.line(bytes, pos, arena, ctx, report, *hold_partial);
                    if let Some(t) = counts.as_mut() {
                        t.after_line(report, entry.is_some());
                    }
                    if let Some(entry) = entry {
                        if all || entry.record.is_some() {
                            report.bytes = lines.consumed() - start;
                            // The same bytes again (the borrow of `bytes`
                            // cannot be returned from the loop).
                            let line = lines.last_line(len, pos.terminated);
                            // A record text built escaped (a raw-text read)
                            // needs its line to say so, wherever it lies.
                            let parsed = parser
                                .parsed(line)
                                .filter(|p| p.text_built_escaped() || line.as_ptr() as usize == at);
                            return Ok(Some((entry, parsed)));
                        }
                    }
                }
            }
        }
    }
}

/// `RecordSource` and the shared methods for a source wrapping a
/// `LineDriver`: `record_source!(impl[generics] Type)`; `record_source!(trait
/// impl[generics] Type)` for `RecordSource` alone (a source that is not
/// public).
macro_rules! record_source {
    (impl[$($g:tt)*] $ty:ty) => {
        record_source!(trait impl[$($g)*] $ty);

        impl<$($g)*> $ty {
            /// The path the source reads (as given).
            pub fn path(&self) -> &Path {
                &self.0.path
            }

            /// Reads to the end, counting; returns the final report.
            ///
            /// # Errors
            /// An I/O error while reading.
            pub fn drain(mut self) -> Result<Report, Error> {
                while self.next_record()?.is_some() {}
                Ok(std::mem::take(&mut self.0.report))
            }
        }
    };
    (trait impl[$($g:tt)*] $ty:ty) => {
        impl<$($g)*> RecordSource for $ty {
            fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
                self.0.next_record()
            }

            fn report(&self) -> &Report {
                &self.0.report
            }

            fn header(&self) -> Option<&Header> {
                self.0.ctx.as_ref().map(crate::line::MapLine::header)
            }

            fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
                self.0.next_entry()
            }

            fn next_entry_parsed(
                &mut self,
            ) -> Result<Option<(Entry<'_>, Option<crate::ParsedLine<'_>>)>, Error> {
                self.0.next_entry_parsed()
            }

            fn position(&self) -> Position {
                self.0.position()
            }

            fn running_context(&self) -> Vec<u8> {
                self.0
                    .ctx
                    .as_ref()
                    .map(crate::line::MapLine::running_context)
                    .unwrap_or_default()
            }

            fn entry_counts(&self) -> Option<&crate::LineCounts> {
                self.0.entry_counts()
            }

            fn take_report(&mut self) -> Report {
                self.0.take_report()
            }

            fn take_report_so_far(&mut self) -> Option<Report> {
                Some(self.0.take_report())
            }
        }
    };
}

pub(crate) use record_source;
