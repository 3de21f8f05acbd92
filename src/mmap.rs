//! The alternative source over a memmap2 mapping of the whole file.
//!
//! It gives records identical to [`crate::PiSessionSource`], and exists to be
//! measured against the chunked reader. The chunked reader stays the
//! default: a mapping dies with SIGBUS when the writer truncates the file
//! while it is read, and does not see bytes appended after it was made.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::Error;
use crate::pi::{Entry, Header};
use crate::record::Record;
use crate::report::Report;
use crate::source::{record_source, Position, RecordSource, Session, SliceLines, SourceOptions};

/// A mapping, or nothing for an empty file (which cannot be mapped on
/// every platform).
#[derive(Debug)]
pub(crate) struct MappedBytes(Option<Mmap>);

impl AsRef<[u8]> for MappedBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or_default()
    }
}

/// A pi session source over a memory mapping of the whole file.
#[derive(Debug)]
pub struct MmapSessionSource(Session<SliceLines<MappedBytes>>);

record_source!(impl[] MmapSessionSource);

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
        let lines = SliceLines::new(MappedBytes(map), opts.max_line_len());
        Session::open(lines, path, opts).map(MmapSessionSource)
    }
}
