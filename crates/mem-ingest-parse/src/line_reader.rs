//! The line reader: one rolling buffer over any [`io::Read`], complete lines
//! found with `memchr`.
//!
//! This is the only module that knows about buffers. It hands out byte
//! ranges into its buffer, not borrows, so the caller can take
//! `&mut buf[start..end]` for an in-place parser.
//!
//! Positions: byte offsets are absolute, 0-based `u64`; line numbers are
//! 1-based and count every line, blank or not, including a line skipped for
//! being too long. Lines are split on `\n` only; the `\n` is not part of the
//! line (a `\r` before it is, and left to the parser).
//!
//! Long lines: the buffer grows for a line longer than it, up to the
//! maximum line length, and a line longer than that is skipped. A reader
//! that can read its input's bytes again (`ReadAt`, crate-internal: a
//! regular file, or a compressed file decoded again) holds a pending line
//! only up to `ReadAt::hold`: past it, the line is looked at in the fixed buffer
//! until its end is found, without being held; a line over the maximum is
//! then skipped having cost nothing, and one within it is read again, whole,
//! into a buffer of its length.

use std::fmt;
use std::io::{self, Read};
use std::sync::Arc;

/// Default buffer capacity: 256 KiB.
pub const DEFAULT_BUFFER_CAPACITY: usize = 256 * 1024;
/// Default maximum line length: 512 MiB (pi writes single lines of several
/// MB for inline images; a 4 MB limit is known to break viewers).
pub const DEFAULT_MAX_LINE: usize = 512 * 1024 * 1024;

/// The bytes a line reader reads, read again by absolute offset: what lets
/// the reader look for the end of a long line without holding it.
pub trait ReadAt: fmt::Debug + Send + Sync {
    /// Reads the bytes at absolute offset `at` into `buf`: all of `buf`
    /// unless the input ends first (the count read is returned).
    ///
    /// # Errors
    /// An I/O error of the input.
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize>;

    /// The longest a pending line is held (the buffer grows up to this for
    /// it) before it is looked at without being held; 0: never grow the
    /// buffer for a line not known to be within the maximum (reading
    /// again costs a copy).
    fn hold(&self) -> usize;
}

/// A regular file, read again with `pread`; nothing is held.
#[derive(Debug)]
pub struct FileAt(pub Arc<std::fs::File>);

impl FileAt {
    /// `file` when it is a regular file (a pipe or a device cannot be read
    /// again).
    pub fn of(file: Arc<std::fs::File>) -> Option<Arc<dyn ReadAt>> {
        let regular = file.metadata().is_ok_and(|m| m.is_file());
        regular.then(|| Arc::new(FileAt(file)) as Arc<dyn ReadAt>)
    }
}

/// Reads the bytes of `file` at offset `at` into `buf`: all of `buf`
/// unless the file ends first (the count read is returned).
///
/// # Errors
/// An I/O error of the file.
pub fn read_full_at(file: &std::fs::File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match crate::sys::read_at(file, &mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl ReadAt for FileAt {
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        read_full_at(&self.0, buf, at)
    }

    fn hold(&self) -> usize {
        0
    }
}

/// The buffer of a dropped reader, kept per thread for the next reader on
/// that thread: a run over thousands of files then faults in no fresh pages
/// for each (the buffers of files of 128-256 KiB came from `mmap` every
/// time). Its bytes are initialized: a reader truncates it or zero-extends
/// it to the length it asks for.
mod spare {
    use std::cell::RefCell;

    /// A buffer larger than this is freed, not kept.
    const KEEP_AT_MOST: usize = 16 << 20;

    thread_local! {
        /// Two: a file's first bytes and the reader after them.
        static SPARE: RefCell<[Vec<u8>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
    }

    /// The larger spare buffer, or an empty one.
    pub fn take() -> Vec<u8> {
        take_by(|a, b| a > b)
    }

    /// The smaller spare buffer, or an empty one: for a file's first bytes,
    /// so that the reader after them gets the larger, which is already
    /// its length (a reader that got the smaller zeroed the rest of its
    /// 256 KiB for every file: 1.7% of a Claude Code run's instructions).
    pub fn take_smaller() -> Vec<u8> {
        take_by(|a, b| a < b)
    }

    /// Spare 1 when `second(capacity 1, capacity 0)`, else spare 0.
    fn take_by(second: impl Fn(usize, usize) -> bool) -> Vec<u8> {
        SPARE
            .try_with(|s| {
                let mut s = s.borrow_mut();
                let i = usize::from(second(s[1].capacity(), s[0].capacity()));
                std::mem::take(&mut s[i])
            })
            .unwrap_or_default()
    }

    /// Keeps `buf` in place of the smaller spare when it is larger.
    pub fn give(buf: Vec<u8>) {
        if buf.capacity() <= KEEP_AT_MOST {
            // After the thread's locals are gone nothing is kept.
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                let i = usize::from(s[1].capacity() < s[0].capacity());
                if buf.capacity() > s[i].capacity() {
                    s[i] = buf;
                }
            });
        }
    }
}

/// A byte buffer from the per-thread spares, given back when dropped.
#[derive(Default)]
pub struct Pooled(Vec<u8>);

impl Pooled {
    /// An empty buffer (of the smaller spare's capacity).
    pub fn take() -> Self {
        let mut v = spare::take_smaller();
        v.clear();
        Pooled(v)
    }
}

impl std::ops::Deref for Pooled {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        spare::give(std::mem::take(&mut self.0));
    }
}

impl<R> Drop for LineReader<R> {
    fn drop(&mut self) {
        spare::give(std::mem::take(&mut self.buf));
    }
}

/// One event of the line reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineEvent {
    /// A complete line, in `buffer()[start..end]`.
    Line(Line),
    /// A line longer than the maximum line length. Its bytes were read and
    /// discarded (held up to the maximum, unless the reader reads its input
    /// again); the reader resumed after its `\n` (or at the end of the
    /// input).
    TooLong {
        /// Absolute offset of the line's first byte (0-based).
        byte: u64,
        /// Line number (1-based).
        number: u64,
        /// Length of the line in bytes, without its `\n`.
        len: u64,
        /// Whether the line ended with `\n` (false: it ran to the end of input).
        terminated: bool,
    },
}

/// A complete line, as a range of the reader's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    /// Start of the line in the buffer.
    pub start: usize,
    /// End of the line in the buffer (exclusive; the `\n` is not included).
    pub end: usize,
    /// Absolute offset of the line's first byte (0-based).
    pub byte: u64,
    /// Line number (1-based).
    pub number: u64,
    /// Whether the line ended with `\n`; false only for a last line that
    /// runs to the end of the input.
    pub terminated: bool,
}

impl Line {
    /// The line's length in bytes, without its `\n`.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// Whether the line has no bytes.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// A line reader over any [`io::Read`]: one fixed-size buffer, grown only for
/// a line longer than it, up to the maximum line length.
///
/// Memory use is the buffer capacity, or the longest line (up to the
/// maximum line length) when that is longer; never the file size. A line
/// over the maximum is held up to the maximum before it is skipped, unless
/// the reader can read its input again (a crate-internal setting: the
/// engine's files), which holds it not at all.
#[derive(Debug)]
pub struct LineReader<R> {
    rdr: R,
    /// Valid data is `buf[pos..end]`. Every byte of `buf` is initialised:
    /// it may be longer than the capacity in use, `cap` (a spare buffer
    /// keeps the length it had, so that no reader zeroes it again).
    buf: Vec<u8>,
    /// The capacity in use. Invariant: `cap <= buf.len()`.
    cap: usize,
    /// Start of the unconsumed data in `buf`.
    pos: usize,
    /// End of the valid data in `buf`. Invariant: `pos <= scan <= end <= cap`.
    end: usize,
    /// `buf[pos..scan]` is known to hold no `\n`.
    scan: usize,
    /// Absolute offset of `buf[0]`.
    base: u64,
    /// Number of lines handed out so far.
    lines: u64,
    eof: bool,
    max_line: usize,
    /// The input, read again by offset: a long line is then not held.
    again: Option<Arc<dyn ReadAt>>,
}

impl<R: Read> LineReader<R> {
    /// A reader with the default buffer capacity and maximum line length.
    pub fn new(rdr: R) -> Self {
        Self::with_capacity(rdr, DEFAULT_BUFFER_CAPACITY, DEFAULT_MAX_LINE)
    }

    /// A reader with the given buffer capacity (at least 1 byte) and
    /// maximum line length (lines longer than this are skipped).
    pub fn with_capacity(rdr: R, capacity: usize, max_line: usize) -> Self {
        Self::starting_at(rdr, capacity, max_line, 0, 0)
    }

    /// A reader whose first byte is at absolute offset `byte` and whose
    /// first line has number `lines + 1` (to read a part of a file whose
    /// earlier lines are known).
    pub fn starting_at(rdr: R, capacity: usize, max_line: usize, byte: u64, lines: u64) -> Self {
        let capacity = capacity.max(1);
        let mut buf = spare::take();
        if buf.len() < capacity {
            buf.resize(capacity, 0);
        }
        LineReader {
            rdr,
            buf,
            cap: capacity,
            pos: 0,
            end: 0,
            scan: 0,
            base: byte,
            lines,
            eof: false,
            max_line,
            again: None,
        }
    }

    /// The reader, reading a long line's bytes again from `again` (the
    /// same bytes as the reader's, at the same absolute offsets) instead
    /// of holding it while its end is looked for.
    pub fn read_again(mut self, again: Option<Arc<dyn ReadAt>>) -> Self {
        self.again = again;
        self
    }

    /// The buffer that [`Line`] ranges index into.
    pub fn buffer(&self) -> &[u8] {
        &self.buf[..self.cap]
    }

    /// The buffer, mutable, for an in-place parser.
    pub fn buffer_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.cap]
    }

    /// The last line handed out, `len` bytes (its `\n`, when `terminated`,
    /// left out), while no other call has been made since.
    pub fn last_line(&self, len: usize, terminated: bool) -> &[u8] {
        let end = self.pos - usize::from(terminated);
        &self.buf[end - len..end]
    }

    /// Absolute offset just after the last line handed out (its `\n`
    /// included).
    pub fn consumed(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Number of lines handed out so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.rdr
    }

    /// The next line, `Ok(None)` at the end of the input.
    ///
    /// # Errors
    /// An I/O error of the underlying reader (`Interrupted` is retried).
    pub fn next_line(&mut self) -> io::Result<Option<LineEvent>> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.scan..self.end]) {
                let nl = self.scan + i;
                return Ok(Some(self.take_line(nl, true)));
            }
            self.scan = self.end;
            if self.end - self.pos > self.max_line {
                return self.long_line().map(Some);
            }
            if self.eof {
                if self.pos < self.end {
                    let end = self.end;
                    return Ok(Some(self.take_line(end, false)));
                }
                return Ok(None);
            }
            if self.end - self.pos == self.cap
                && self.again.as_ref().is_some_and(|a| self.cap >= a.hold())
            {
                // The buffer is full of one line, and holds no more of it.
                return self.long_line().map(Some);
            }
            self.fill()?;
        }
    }

    fn take_line(&mut self, end: usize, terminated: bool) -> LineEvent {
        self.lines += 1;
        let (start, byte, number) = (self.pos, self.base + self.pos as u64, self.lines);
        self.pos = if terminated { end + 1 } else { end };
        self.scan = self.pos;
        if end - start > self.max_line {
            // Only possible when the buffer is larger than the maximum.
            let len = (end - start) as u64;
            return LineEvent::TooLong {
                byte,
                number,
                len,
                terminated,
            };
        }
        LineEvent::Line(Line {
            start,
            end,
            byte,
            number,
            terminated,
        })
    }

    /// Makes room and reads more bytes; sets `eof` on a read of 0 bytes.
    fn fill(&mut self) -> io::Result<()> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.scan -= self.pos;
            self.pos = 0;
        }
        if self.end == self.cap {
            // The pending line fills the buffer: grow, up to one byte past
            // the maximum line length (so that a too-long line is seen).
            let limit = self.max_line.saturating_add(1);
            self.cap = self.cap.saturating_mul(2).min(limit).max(self.end + 1);
            self.grow_to(self.cap);
        }
        loop {
            match self.rdr.read(&mut self.buf[self.end..self.cap]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes the buffer at least `len` bytes long (exactly `len` when it
    /// grows: a doubling `Vec` made a 64 MiB buffer 128 MiB for one byte).
    fn grow_to(&mut self, len: usize) {
        if self.buf.len() < len {
            self.buf.reserve_exact(len - self.buf.len());
            self.buf.resize(len, 0);
        }
    }

    /// The pending line, longer than the buffer holds: looked at through
    /// the buffer, without growing it, up to its `\n` (or the end of the
    /// input). A line over the maximum is skipped; one within it (only
    /// when the reader can read its input again) is read again, whole.
    fn long_line(&mut self) -> io::Result<LineEvent> {
        let byte = self.base + self.pos as u64;
        let mut len = 0u64;
        let terminated = loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.pos..self.end]) {
                len += i as u64;
                self.pos += i + 1;
                break true;
            }
            len += (self.end - self.pos) as u64;
            self.base += self.end as u64;
            self.pos = 0;
            self.end = 0;
            if self.eof {
                break false;
            }
            self.fill()?;
        };
        self.scan = self.pos;
        match &self.again {
            Some(again) if len <= self.max_line as u64 => {
                let again = Arc::clone(again);
                self.line_again(&*again, byte, len as usize, terminated)
            }
            _ => {
                // Without a reader again, only a line over the maximum
                // comes here.
                self.lines += 1;
                Ok(LineEvent::TooLong {
                    byte,
                    number: self.lines,
                    len,
                    terminated,
                })
            }
        }
    }

    /// The line of `len` bytes at `byte`, read again into the buffer's
    /// start, before the bytes read after it.
    fn line_again(
        &mut self,
        again: &dyn ReadAt,
        byte: u64,
        len: usize,
        terminated: bool,
    ) -> io::Result<LineEvent> {
        let after = self.end - self.pos;
        let line_end = len + usize::from(terminated);
        if line_end + after > self.cap {
            self.cap = line_end + after;
            self.grow_to(self.cap);
        }
        self.buf.copy_within(self.pos..self.end, line_end);
        if again.read_at(&mut self.buf[..len], byte)? < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the input shrank while the line at byte {byte} was read"),
            ));
        }
        if terminated {
            self.buf[len] = b'\n';
        }
        self.base = byte;
        self.pos = 0;
        self.end = line_end + after;
        Ok(self.take_line(len, terminated))
    }
}

/// Where [`lines_back`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Back {
    /// Its callback said so.
    Stopped,
    /// Every line before the offset was looked at.
    Start,
    /// The lines before the offset looked at span its reach.
    Reach,
}

/// The bytes a long line is looked at in, from its end back to its start,
/// without being held.
const BACK_CHUNK: usize = 64 << 10;

/// A line longer than this (or than the maximum line length) is looked at
/// in [`BACK_CHUNK`] windows while its start is looked for, not held; its
/// bytes are read again, whole, only when it names a needle and is within
/// the maximum (a look back through a long line of NULs costs a window).
const HOLD_BACK: usize = BACK_CHUNK;

/// Calls `each` with the lines of `file` before `byte` (the start of a
/// line) that name one of `needles` (their bytes hold one), the last one
/// first, until it returns true, every line was looked at, or the lines
/// looked at span more than `reach` bytes (`None`: no limit). A line that
/// names no needle cannot say what the caller looks for (a needle that an
/// escape could spell is one of them: `\\u`), and a line longer than
/// `max_line` is not one a read of the file parses: neither is passed.
/// Lines are read back in chunks, the first of `first` bytes, each next
/// one twice as large, so that a line costs reads and copies of about
/// twice its bytes; one longer than [`HOLD_BACK`] is looked at in windows
/// without being held (its bytes read whole only to be passed). A line is
/// passed without its `\n`; the file's first line without its byte-order
/// mark.
///
/// # Errors
/// Reading the file failed.
pub fn lines_back(
    file: &std::fs::File,
    byte: u64,
    first: usize,
    max_line: usize,
    reach: Option<u64>,
    needles: &[&[u8]],
    mut each: impl FnMut(&[u8]) -> bool,
) -> io::Result<Back> {
    let finders: Vec<memchr::memmem::Finder<'_>> =
        needles.iter().map(memchr::memmem::Finder::new).collect();
    let names = |b: &[u8]| finders.iter().any(|f| f.find(b).is_some());
    // A needle across two windows: the end of one and the start of the next.
    let overlap = needles.iter().map(|n| n.len()).max().unwrap_or(1).max(1) - 1;
    let beyond = |lo: u64| reach.is_some_and(|r| byte - lo >= r);
    // The bytes `lo..lo + buf.len()` not looked at yet: they end where a
    // line ends (at `byte`, or after a `\n`).
    let mut buf: Vec<u8> = Vec::new();
    let mut lo = byte;
    let mut chunk = first.max(1);
    loop {
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = match memchr::memrchr(b'\n', body) {
            Some(i) => &body[i + 1..],
            None if lo == 0 => {
                let line = &body[bom_len(body)..];
                let stopped = line.len() <= max_line && names(line) && each(line);
                return Ok(if stopped { Back::Stopped } else { Back::Start });
            }
            None if beyond(lo) => return Ok(Back::Reach),
            None if body.len() > HOLD_BACK.min(max_line) => {
                // A long line: find where it starts in windows looked at
                // and let go, and whether it names a needle.
                let end = lo + body.len() as u64;
                let mut named = names(body);
                // The line's first bytes seen so far.
                let mut head = body[..overlap.min(body.len())].to_vec();
                let mut window = vec![0u8; BACK_CHUNK];
                let start = loop {
                    if lo == 0 {
                        buf.clear();
                        break 0;
                    }
                    if beyond(lo) {
                        return Ok(Back::Reach);
                    }
                    let n = BACK_CHUNK.min(usize::try_from(lo).unwrap_or(usize::MAX));
                    crate::sys::read_exact_at(file, &mut window[..n], lo - n as u64)?;
                    lo -= n as u64;
                    let nl = memchr::memrchr(b'\n', &window[..n]);
                    let part = &window[nl.map_or(0, |i| i + 1)..n];
                    if !named {
                        let mut across = part[part.len().saturating_sub(overlap)..].to_vec();
                        across.extend_from_slice(&head);
                        named = names(part) || names(&across);
                        head = part[..overlap.min(part.len())].to_vec();
                    }
                    if let Some(i) = nl {
                        // The lines before it, to the `\n` that ends them.
                        buf.clear();
                        buf.extend_from_slice(&window[..=i]);
                        break lo + i as u64 + 1;
                    }
                };
                let len = usize::try_from(end - start).unwrap_or(usize::MAX);
                if named && len <= max_line {
                    let mut whole = vec![0u8; len];
                    crate::sys::read_exact_at(file, &mut whole, start)?;
                    let line = if start == 0 {
                        &whole[bom_len(&whole)..]
                    } else {
                        &whole[..]
                    };
                    if each(line) {
                        return Ok(Back::Stopped);
                    }
                }
                if start == 0 {
                    return Ok(Back::Start);
                }
                continue;
            }
            None => {
                // The line starts before `lo`: read more.
                let n = chunk.min(usize::try_from(lo).unwrap_or(usize::MAX));
                let mut more = vec![0u8; n + buf.len()];
                crate::sys::read_exact_at(file, &mut more[..n], lo - n as u64)?;
                more[n..].copy_from_slice(&buf);
                buf = more;
                lo -= n as u64;
                chunk = chunk.saturating_mul(2);
                continue;
            }
        };
        if line.len() <= max_line && names(line) && each(line) {
            return Ok(Back::Stopped);
        }
        // Down to the `\n` that ends the line before.
        let keep = body.len() - line.len();
        buf.truncate(keep);
    }
}

/// The length of a UTF-8 byte-order mark at the start of `prefix` (0 or 3).
pub fn bom_len(prefix: &[u8]) -> usize {
    if prefix.starts_with(b"\xEF\xBB\xBF") {
        3
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive reference: split the whole input at once.
    fn reference(input: &[u8]) -> Vec<(u64, u64, Vec<u8>, bool)> {
        let mut out = Vec::new();
        let mut byte = 0u64;
        let mut parts: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
        let last_terminated = parts.last().is_some_and(|p| p.is_empty());
        if last_terminated {
            parts.pop();
        }
        let n = parts.len();
        for (i, p) in parts.into_iter().enumerate() {
            let terminated = i + 1 < n || last_terminated;
            out.push((byte, i as u64 + 1, p.to_vec(), terminated));
            byte += p.len() as u64 + 1;
        }
        out
    }

    fn collect(input: &[u8], cap: usize, max_line: usize) -> Vec<(u64, u64, Vec<u8>, bool)> {
        let mut r = LineReader::with_capacity(input, cap, max_line);
        let mut out = Vec::new();
        while let Some(ev) = r.next_line().unwrap() {
            match ev {
                LineEvent::Line(l) => out.push((
                    l.byte,
                    l.number,
                    r.buffer()[l.start..l.end].to_vec(),
                    l.terminated,
                )),
                LineEvent::TooLong { .. } => panic!("unexpected too-long line"),
            }
        }
        out
    }

    /// A reader that returns at most `n` bytes per read.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn every_capacity_matches_splitting_at_once() {
        let mut input = Vec::new();
        for i in 0..200u32 {
            let len = (i * 37 % 301) as usize;
            input.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            input.push(b'\n');
            if i % 17 == 0 {
                input.extend_from_slice(b"\r\n\n");
            }
        }
        input.extend_from_slice(b"tail without newline");
        let want = reference(&input);
        assert_eq!(want.len(), 200 + 2 * 12 + 1);
        for cap in (1..=600).chain([1024, 4096, 5000]) {
            assert_eq!(collect(&input, cap, usize::MAX), want, "capacity {cap}");
        }
        for step in [1, 2, 3, 7, 64] {
            let mut r = LineReader::with_capacity(Trickle(&input, step), 5, usize::MAX);
            let mut got = Vec::new();
            while let Some(LineEvent::Line(l)) = r.next_line().unwrap() {
                got.push((
                    l.byte,
                    l.number,
                    r.buffer()[l.start..l.end].to_vec(),
                    l.terminated,
                ));
            }
            assert_eq!(got, want, "short reads of {step}");
        }
    }

    #[test]
    fn edge_inputs() {
        assert!(collect(b"", 4, 100).is_empty());
        assert_eq!(collect(b"\n", 1, 100), vec![(0, 1, vec![], true)]);
        assert_eq!(collect(b"a", 1, 100), vec![(0, 1, b"a".to_vec(), false)]);
        assert_eq!(
            collect(b"ab\n\ncd", 1, 100),
            vec![
                (0, 1, b"ab".to_vec(), true),
                (3, 2, vec![], true),
                (4, 3, b"cd".to_vec(), false)
            ]
        );
    }

    #[test]
    fn offsets_after_every_step_with_one_byte_capacity() {
        let mut r = LineReader::with_capacity(&b"xy\nz\n"[..], 1, 100);
        let Some(LineEvent::Line(l)) = r.next_line().unwrap() else {
            panic!()
        };
        assert_eq!((l.byte, l.number, l.len()), (0, 1, 2));
        assert_eq!(r.consumed(), 3);
        let Some(LineEvent::Line(l)) = r.next_line().unwrap() else {
            panic!()
        };
        assert_eq!((l.byte, l.number, l.len()), (3, 2, 1));
        assert_eq!(r.consumed(), 5);
        assert_eq!(r.next_line().unwrap(), None);
        assert_eq!(r.lines(), 2);
    }

    #[test]
    fn too_long_line_is_skipped_and_reader_resyncs() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend_from_slice(b"\nafter\n");
        input.extend(std::iter::repeat_n(b'y', 11));
        for cap in [1, 3, 8, 64, 20_000] {
            let mut r = LineReader::with_capacity(&input[..], cap, 10);
            let mut events = Vec::new();
            while let Some(ev) = r.next_line().unwrap() {
                events.push(match ev {
                    LineEvent::Line(l) => format!(
                        "line {} @{} {:?}",
                        l.number,
                        l.byte,
                        String::from_utf8_lossy(&r.buffer()[l.start..l.end])
                    ),
                    LineEvent::TooLong {
                        byte,
                        number,
                        len,
                        terminated,
                    } => {
                        format!("long {number} @{byte} len {len} {terminated}")
                    }
                });
                // Memory stays bounded by the maximum line length.
                assert!(
                    r.buffer().len() <= cap.max(11),
                    "cap {cap}: {}",
                    r.buffer().len()
                );
            }
            assert_eq!(
                events,
                vec![
                    "line 1 @0 \"short\"".to_string(),
                    "long 2 @6 len 10000 true".to_string(),
                    "line 3 @10007 \"after\"".to_string(),
                    "long 4 @10013 len 11 false".to_string(),
                ],
                "capacity {cap}"
            );
        }
    }

    #[test]
    fn line_exactly_max_is_kept() {
        let input = b"0123456789\n0123456789A\n";
        let mut r = LineReader::with_capacity(&input[..], 2, 10);
        assert!(matches!(r.next_line().unwrap(), Some(LineEvent::Line(l)) if l.len() == 10));
        assert!(matches!(
            r.next_line().unwrap(),
            Some(LineEvent::TooLong {
                len: 11,
                number: 2,
                byte: 11,
                terminated: true
            })
        ));
        assert_eq!(r.next_line().unwrap(), None);
    }

    /// A slice read again, holding up to `1`.
    #[derive(Debug)]
    struct SliceAt(Vec<u8>, usize);
    impl ReadAt for SliceAt {
        fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
            let rest = self.0.get(at as usize..).unwrap_or_default();
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            Ok(n)
        }

        fn hold(&self) -> usize {
            self.1
        }
    }

    /// Every event, with a line's bytes, and the buffer length after it
    /// and the line's length (0 for a skip).
    fn events<R: Read>(mut r: LineReader<R>) -> Vec<(String, usize, usize)> {
        let mut out = Vec::new();
        while let Some(ev) = r.next_line().unwrap() {
            let len = match &ev {
                LineEvent::Line(l) => l.len(),
                LineEvent::TooLong { .. } => 0,
            };
            let text = match ev {
                LineEvent::Line(l) => format!(
                    "line {} @{} {:?} {}",
                    l.number,
                    l.byte,
                    String::from_utf8_lossy(&r.buffer()[l.start..l.end]),
                    l.terminated
                ),
                LineEvent::TooLong {
                    byte,
                    number,
                    len,
                    terminated,
                } => format!("long {number} @{byte} len {len} {terminated}"),
            };
            out.push((text, r.buffer().len(), len));
        }
        out
    }

    /// A reader that reads again holds no line over the maximum and no
    /// line longer than its hold but what it hands out: the same lines
    /// and skips as the reader that holds, for every capacity, hold and
    /// read size; its buffer never longer than its capacity or hold (twice:
    /// it doubles), or the longest line handed out, its `\n` and what was
    /// read after it.
    #[test]
    fn reading_again_gives_the_same_lines_without_holding_a_long_one() {
        let mut input = b"short\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 10_000));
        input.extend_from_slice(b"\nafter\n");
        input.extend(std::iter::repeat_n(b'z', 40));
        input.extend_from_slice(b"\n\n");
        input.extend(std::iter::repeat_n(b'y', 30));
        for max_line in [50, 20_000] {
            let want: Vec<String> = events(LineReader::with_capacity(&input[..], 4, max_line))
                .into_iter()
                .map(|(e, _, _)| e)
                .collect();
            for cap in [1, 3, 8, 64, 20_000] {
                for hold in [0, 1, 16, 100] {
                    for step in [1, 7, 4096] {
                        let again: Arc<dyn ReadAt> = Arc::new(SliceAt(input.clone(), hold));
                        let r = LineReader::with_capacity(Trickle(&input, step), cap, max_line)
                            .read_again(Some(again));
                        let got = events(r);
                        let what = format!("max {max_line} cap {cap} hold {hold} step {step}");
                        let texts: Vec<&String> = got.iter().map(|(e, _, _)| e).collect();
                        assert!(texts == want.iter().collect::<Vec<_>>(), "{what}");
                        let mut longest = 0;
                        for (e, buffer, len) in &got {
                            longest = longest.max(*len);
                            let bound = longest + 1 + cap.max(2 * hold);
                            assert!(*buffer <= bound, "{what}: {:.40} {buffer}", e);
                        }
                    }
                }
            }
        }
        // The lines, with a maximum of 50: the long line skipped.
        let r = LineReader::with_capacity(&input[..], 8, 50)
            .read_again(Some(Arc::new(SliceAt(input.clone(), 0))));
        let got: Vec<String> = events(r).into_iter().map(|(e, _, _)| e).collect();
        assert_eq!(
            got,
            [
                "line 1 @0 \"short\" true",
                "long 2 @6 len 10000 true",
                "line 3 @10007 \"after\" true",
                &format!("line 4 @10013 {:?} true", "z".repeat(40)),
                "line 5 @10054 \"\" true",
                &format!("line 6 @10055 {:?} false", "y".repeat(30)),
            ]
        );
    }

    /// A line that reading again finds shorter than it was: an error, not
    /// a line of stale bytes.
    #[test]
    fn input_shrunk_before_reading_again_is_an_error() {
        let input = b"0123456789abcdef\n".to_vec();
        let again: Arc<dyn ReadAt> = Arc::new(SliceAt(input[..8].to_vec(), 0));
        let mut r = LineReader::with_capacity(&input[..], 4, 100).read_again(Some(again));
        let e = r.next_line().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(
            e.to_string(),
            "the input shrank while the line at byte 0 was read"
        );
    }

    /// `lines_back` passes exactly the lines that name a needle and are
    /// within the maximum, the last first, whatever the first chunk: a
    /// needle in a short line, at either end of a long line (looked at in
    /// windows), across two windows of one, a long line naming none, one
    /// over the maximum naming one, a byte-order mark; and stops at the
    /// reach when a long line spans it.
    #[test]
    fn lines_back_passes_the_lines_naming_a_needle() {
        const N: &[u8] = b"NEEDLE";
        let mib = 1 << 20;
        let long = |len: usize, at: Option<usize>| {
            let mut l = vec![b'a'; len];
            if let Some(at) = at {
                l[at..at + N.len()].copy_from_slice(N);
            }
            l
        };
        // The end of the file is `byte`; with a first chunk of
        // HOLD_BACK + 2 (the last line's HOLD_BACK + 1 bytes and its `\n`),
        // the windows of the last line end at byte - HOLD_BACK - 2 -
        // BACK_CHUNK * j: offset last_len - HOLD_BACK - 1 - BACK_CHUNK * j
        // in the line.
        let last_len = 3 * mib;
        let boundary = last_len - (HOLD_BACK + 1) - BACK_CHUNK; // j = 1
        let lines: Vec<Vec<u8>> = vec![
            [b"\xEF\xBB\xBF".as_slice(), b"{NEEDLE first}"].concat(),
            b"{no needle here}".to_vec(),
            long(2 * mib, Some(5)),
            long(2 * mib, None),
            long(5 * mib, Some(100)), // over the maximum
            b"short NEEDLE".to_vec(),
            long(2 * mib, Some(2 * mib - N.len())),
            b"".to_vec(),
            long(last_len, Some(boundary - 3)),
        ];
        let max_line = 4 * mib;
        let mut text = Vec::new();
        for l in &lines {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        let dir = std::env::temp_dir().join(format!("mem-ingest-back-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, &text).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let want: Vec<Vec<u8>> = lines
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, l)| l.len() <= max_line && memchr::memmem::find(l, N).is_some())
            .map(|(i, l)| if i == 0 { l[3..].to_vec() } else { l.clone() })
            .collect();
        assert_eq!(want.len(), 5);
        for first in [1, 4096, HOLD_BACK + 2] {
            let mut got = Vec::new();
            let back = lines_back(&file, text.len() as u64, first, max_line, None, &[N], |l| {
                got.push(l.to_vec());
                false
            })
            .unwrap();
            assert_eq!(back, Back::Start, "first {first}");
            assert!(got == want, "first {first}: {} lines passed", got.len());
        }
        // A reach within the last line: it is not passed.
        let back = lines_back(
            &file,
            text.len() as u64,
            4096,
            max_line,
            Some(mib as u64),
            &[N],
            |_| panic!("nothing within the reach"),
        )
        .unwrap();
        assert_eq!(back, Back::Reach);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
