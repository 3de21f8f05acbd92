//! The alternative source over a memmap2 mapping of the whole file.
//!
//! It gives records identical to [`crate::PiSessionSource`], and exists to be
//! measured against the chunked reader. The chunked reader stays the
//! default: a mapping dies with SIGBUS when the writer truncates the file
//! while it is read, and does not see bytes appended after it was made.

use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::Mmap;

use crate::error::Error;
use crate::pi::{Entry, Header, LinePos};
use crate::record::Record;
use crate::report::Report;
use crate::source::{
    record_source, Lines, Position, RecordSource, Session, SourceOptions, Supplied,
};

/// Lines of a mapping, split with `memchr`.
#[derive(Debug)]
pub(crate) struct MmapLines {
    map: Option<Mmap>,
    pos: usize,
    lines: u64,
    max_line: usize,
}

impl Lines for MmapLines {
    fn next_line(&mut self) -> io::Result<Option<Supplied<'_>>> {
        let data: &[u8] = self.map.as_deref().unwrap_or(&[]);
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
            byte: self.pos as u64,
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
        self.pos as u64
    }

    fn lines_read(&self) -> u64 {
        self.lines
    }
}

/// A pi session source over a memory mapping of the whole file.
#[derive(Debug)]
pub struct MmapSessionSource(Session<MmapLines>);

record_source!(MmapSessionSource);

impl MmapSessionSource {
    /// Maps a session file (read-only) and reads up to its header.
    ///
    /// # Errors
    /// As [`crate::PiSessionSource::open`].
    pub fn open(path: impl AsRef<Path>, opts: &SourceOptions) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        // An empty file cannot be mapped on every platform; it has no lines.
        #[allow(unsafe_code)]
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only and private to this source.
            // The invariant memmap2 asks for, that the file is not changed
            // while mapped, is one this source cannot enforce: a writer that
            // truncates the file makes later reads fault (SIGBUS). That is
            // why this source is the alternative, documented as such, and the
            // chunked reader is the default.
            Some(unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?)
        };
        let lines = MmapLines {
            map,
            pos: 0,
            lines: 0,
            max_line: opts.max_line_len(),
        };
        Session::open(lines, path, opts).map(MmapSessionSource)
    }
}
