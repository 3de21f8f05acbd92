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
use crate::line::{Entry, Header};
use crate::record::Record;
use crate::report::Report;
use crate::source::{record_source, LineDriver, Position, RecordSource, SliceLines, SourceOptions};

/// A mapping, or nothing for an empty file (which cannot be mapped on
/// every platform).
#[derive(Debug)]
pub struct MappedBytes(Option<Mmap>);

impl AsRef<[u8]> for MappedBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_deref().unwrap_or_default()
    }
}

/// A pi session source over a memory mapping of the whole file.
#[derive(Debug)]
pub struct MmapSessionSource(LineDriver<SliceLines<MappedBytes>, super::map::Context>);

record_source!(impl[] MmapSessionSource);

impl MmapSessionSource {
    /// Maps a session file (read-only) and reads up to its header.
    ///
    /// # Safety
    /// The file must not be truncated or changed while the source (and
    /// any record it lends) lives: a writer that truncates it makes later
    /// reads fault (SIGBUS), and changed bytes change records under their
    /// borrows. Nothing here can enforce that of another process; the
    /// caller accepts it (a closed archive, a copy), as ripgrep's `unsafe
    /// fn MmapChoice::auto` asks its caller to. The chunked
    /// [`crate::PiSessionSource`] has no such condition.
    ///
    /// # Errors
    /// As [`crate::PiSessionSource::open`].
    #[allow(unsafe_code)]
    pub unsafe fn open(path: impl AsRef<Path>, opts: &SourceOptions) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        // An empty file cannot be mapped on every platform; it has no lines.
        #[allow(unsafe_code)]
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only and private to this source;
            // that the file is not changed while mapped, which memmap2 asks
            // for, is this function's own safety condition, accepted by its
            // caller.
            Some(unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?)
        };
        let lines = SliceLines::new(MappedBytes(map), opts.max_line_len());
        LineDriver::open(lines, path, opts).map(MmapSessionSource)
    }
}
