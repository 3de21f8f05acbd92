//! pi's sources: over a file or any reader (the chunked line reader), and
//! over bytes in memory; both read a session header first.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, ErrorKind};
use crate::json::is_blank;
use crate::line::{Entry, Header, LinePos, MapLine};
use crate::line_reader::LineReader;
use crate::record::Record;
use crate::report::{Report, SkipReason};
use crate::source::{
    record_source, scratch, LineDriver, Lines, Position, RecordSource, SliceLines, SourceOptions,
    Supplied,
};

use super::map::{parse_header, Context};

/// `pi:<file stem>` for a path.
fn source_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy())
        .unwrap_or_default();
    format!("pi:{stem}")
}

impl<L: Lines> LineDriver<L, Context> {
    /// Reads up to the session header; an empty file gives a session with
    /// no context.
    pub fn open(mut lines: L, path: &Path, opts: &SourceOptions) -> Result<Self, Error> {
        let (mut parser, arena) = scratch::take(opts.filter);
        parser.set_raw_text(opts.raw_text && <Context as MapLine>::RAW_TEXT);
        let mut report = opts.report();
        let mut nul_line: Option<LinePos> = None;
        let no_header = |pos: LinePos, reason: String| {
            Error::new(
                path,
                ErrorKind::NoHeader {
                    line: pos.line,
                    byte: pos.byte,
                    reason,
                },
            )
        };
        let header = loop {
            match lines.next_line().map_err(|e| Error::io(path, e))? {
                None => break None,
                Some(Supplied::TooLong { pos, len }) => {
                    return Err(no_header(pos, SkipReason::TooLong { len }.to_string()))
                }
                Some(Supplied::Line(bytes, pos)) => {
                    let bytes = match pos.byte {
                        0 => bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
                        _ => bytes,
                    };
                    if is_blank(bytes) {
                        continue;
                    }
                    if bytes.iter().all(|b| matches!(b, 0 | b' ' | b'\t' | b'\r')) {
                        nul_line.get_or_insert(pos);
                        continue;
                    }
                    if let Some(nul) = nul_line {
                        return Err(no_header(nul, "NUL bytes before the session header".into()));
                    }
                    match parse_header(&mut parser, bytes, &mut report) {
                        Ok(h) => break Some(h),
                        Err(e) => return Err(no_header(pos, e.0)),
                    }
                }
            }
        };
        report.empty = header.is_none();
        report.bytes = lines.consumed();
        let ctx = header.map(|header| Context {
            header,
            source: source_name(path),
        });
        Ok(LineDriver {
            lines,
            path: path.to_path_buf(),
            start: 0,
            parser,
            arena,
            ctx,
            report,
            hold_partial: opts.hold_partial,
            last_unterminated: false,
            counts: None,
        })
    }

    /// A session that starts after the header, at a known place: for reading
    /// a part of a file whose header was read before.
    fn resume(lines: L, path: &Path, header: Header, opts: &SourceOptions) -> Self {
        let start = lines.consumed();
        let ctx = Context {
            header,
            source: source_name(path),
        };
        LineDriver::with_context(lines, path, Some(ctx), start, opts)
    }
}

/// The pi session source over a file or any reader: the chunked line
/// reader (one fixed buffer, `memchr` splitting), so it copes with files
/// that grow while they are read and never holds more than one line.
///
/// ```
/// use mem_ingest::{PiSessionSource, RecordSource, Role};
///
/// let jsonl = concat!(
///     r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/tmp/my-project"}"#, "\n",
///     r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"hi","timestamp":1735689601000}}"#, "\n",
/// );
/// let mut src = PiSessionSource::from_reader(jsonl.as_bytes(), "s1.jsonl").unwrap();
/// let rec = src.next_record().unwrap().unwrap();
/// assert_eq!((rec.role, rec.text, rec.project, rec.key), (Role::User, "hi", "/tmp/my-project", "s1:a1"));
/// assert!(src.next_record().unwrap().is_none());
/// assert_eq!(src.report().records, 1);
/// ```
#[derive(Debug)]
pub struct PiSessionSource<R = File>(LineDriver<LineReader<R>, Context>);

record_source!(impl[R: Read] PiSessionSource<R>);

impl PiSessionSource<File> {
    /// Opens a session file (read-only) and reads up to its header.
    ///
    /// # Errors
    /// The file cannot be opened or read, or its first non-blank line is
    /// not a session header with a string `id`. An empty file (only
    /// whitespace, NULs and a BOM) is not an error: its report says
    /// `empty` and it gives no records.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, &SourceOptions::default())
    }

    /// [`PiSessionSource::open`] with options.
    ///
    /// # Errors
    /// As [`PiSessionSource::open`].
    pub fn open_with(path: impl AsRef<Path>, opts: &SourceOptions) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // A second handle reads a long line again (`pread`: the first
        // one's offset is not moved).
        let again = file
            .try_clone()
            .map(Arc::new)
            .map_err(|e| Error::io(path, e))?;
        let opts = opts.clone().read_again_from(&again);
        Self::from_reader_with(file, path, &opts)
    }
}

impl<R: Read> PiSessionSource<R> {
    /// A source over any reader; `path` names it in reports and errors and
    /// gives the source name `pi:<file stem>`.
    ///
    /// # Errors
    /// As [`PiSessionSource::open`].
    pub fn from_reader(rdr: R, path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::from_reader_with(rdr, path, &SourceOptions::default())
    }

    /// [`PiSessionSource::from_reader`] with options.
    ///
    /// # Errors
    /// As [`PiSessionSource::open`].
    pub fn from_reader_with(
        rdr: R,
        path: impl AsRef<Path>,
        opts: &SourceOptions,
    ) -> Result<Self, Error> {
        let lines = LineReader::with_capacity(rdr, opts.buffer_capacity, opts.max_line)
            .read_again(opts.again.clone());
        LineDriver::open(lines, path.as_ref(), opts).map(PiSessionSource)
    }

    /// The current length of the line buffer in bytes: the configured
    /// capacity, or the longest line read so far (up to the maximum line
    /// length plus one; a source over a file: the longest line handed out,
    /// and what was read after it) when that is longer. Never the file
    /// size.
    pub fn buffer_len(&self) -> usize {
        self.0.lines.buffer().len()
    }

    /// A source over a part of a session file whose header is known: `rdr`
    /// starts at absolute offset `byte`, at the start of a line, after
    /// `lines_before` lines (the header among them). Used to read one file
    /// on several cores, or to resume where an earlier run stopped.
    pub fn resume(
        rdr: R,
        path: impl AsRef<Path>,
        header: Header,
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> Self {
        let lines =
            LineReader::starting_at(rdr, opts.buffer_capacity, opts.max_line, byte, lines_before)
                .read_again(opts.again.clone());
        PiSessionSource(LineDriver::resume(lines, path.as_ref(), header, opts))
    }
}

/// A pi session source over bytes already in memory (a line a hook just
/// received, a buffer): lines are split in place, with no read buffer and
/// no copy but the one the parser makes. Records are identical to
/// [`PiSessionSource`]'s.
///
/// ```
/// use mem_ingest::{RecordSource, SliceSessionSource, SourceOptions};
///
/// let jsonl = br#"{"type":"session","id":"s1","cwd":"/p"}
/// {"type":"message","id":"a","message":{"role":"user","content":"hi"}}
/// "#;
/// let mut src = SliceSessionSource::new(jsonl, "s1.jsonl", &SourceOptions::new()).unwrap();
/// assert_eq!(src.next_record().unwrap().unwrap().text, "hi");
/// ```
#[derive(Debug)]
pub struct SliceSessionSource<'d>(LineDriver<SliceLines<&'d [u8]>, Context>);

record_source!(impl['d] SliceSessionSource<'d>);

impl<'d> SliceSessionSource<'d> {
    /// A source over `data`; `path` names it in reports and errors.
    ///
    /// # Errors
    /// As [`PiSessionSource::open`], less the I/O.
    pub fn new(
        data: &'d [u8],
        path: impl AsRef<Path>,
        opts: &SourceOptions,
    ) -> Result<Self, Error> {
        LineDriver::open(SliceLines::new(data, opts.max_line), path.as_ref(), opts)
            .map(SliceSessionSource)
    }

    /// A source over a part of a session file whose header is known, as
    /// [`PiSessionSource::resume`]: `data` starts at absolute offset
    /// `byte`, at the start of a line, after `lines_before` lines.
    pub fn resume(
        data: &'d [u8],
        path: impl AsRef<Path>,
        header: Header,
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> Self {
        let lines = SliceLines::starting_at(data, opts.max_line, byte, lines_before);
        SliceSessionSource(LineDriver::resume(lines, path.as_ref(), header, opts))
    }
}
