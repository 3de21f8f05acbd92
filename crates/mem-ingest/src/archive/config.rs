//! What a run is configured with, which the builder fills in and the run
//! reads.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::discover::Links;
use crate::checkpoint::shard::Shard;
use crate::format::Format;
use crate::source::SourceOptions;

/// Reports how far a run is, for a progress bar. Called from worker threads.
pub trait Progress: Send + Sync {
    /// A pass starts: `total` bytes to read.
    fn start(&self, total: u64);
    /// `bytes` more were read.
    fn advance(&self, bytes: u64);
    /// The pass is over (following: the run is).
    fn finish(&self);
    /// Following ([`super::Archive::follow`]): a pass is over, `files` followed,
    /// `written` records sent to the sink since the run began. Default:
    /// nothing (a follow run reports no bytes to read).
    fn following(&self, files: u64, written: u64) {
        let _ = (files, written);
    }
}

/// Which records a backfill keeps, beyond roles (default: all, whole).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Filter {
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub max_text: Option<usize>,
}

/// What a run does; recorded in the checkpoint's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    Backfill,
    Stats,
}

/// Everything a run is configured with.
#[derive(Clone)]
pub(crate) struct Config {
    /// The formats read, in order of preference: a file is the first's
    /// that claims it (a file named as a PATH and claimed by none is the
    /// first's).
    pub formats: Vec<Arc<dyn Format>>,
    /// A checkpoint chooses among `formats` (see
    /// [`super::ArchiveBuilder::formats_from_checkpoint`]).
    pub formats_from_checkpoint: bool,
    pub paths: Vec<PathBuf>,
    /// Links met while walking a folder.
    pub links: Links,
    pub jobs: usize,
    pub state: Option<PathBuf>,
    pub dedupe: bool,
    pub opts: SourceOptions,
    pub filter: Filter,
    /// Role names, sorted and distinct, for the checkpoint's options.
    pub roles: Vec<String>,
    pub follow: bool,
    pub checkpoint: Duration,
    pub stop: Arc<AtomicBool>,
    pub progress: Option<Arc<dyn Progress>>,
    pub poll_only: bool,
    /// The share of the archive read (None: all of it).
    pub shard: Option<Shard>,
    /// Secrets in the records' free text are redacted (issue 46; default
    /// on): see [`crate::redact`].
    pub redact: bool,
    /// Each response counted is priced from these prices, its cost summed
    /// by line of the stats ([`super::Archive::priced_stats`]).
    pub costs: Option<Arc<crate::prices::Prices>>,
    /// Pipes named as PATHs that format detection opened and read the
    /// first bytes of: the reading task takes each (a pipe is opened and
    /// read once).
    pub streams: Arc<Streams>,
    /// A usage re-read ([`super::reread`]): the files read, each to where
    /// a checkpoint stopped, instead of the PATHs' listing.
    pub cover: Option<Arc<Cover>>,
}

/// Pipes opened, each with the bytes already read from it, by path.
pub(crate) type Streams = std::sync::Mutex<Vec<(PathBuf, std::fs::File, Vec<u8>)>>;

/// The files a usage re-read reads, each to where its checkpoint stopped.
#[derive(Debug, Default)]
pub(crate) struct Cover {
    /// The files, each with its format, its identity's size the bytes
    /// covered.
    pub files: Vec<super::plan::FoundFile>,
    /// Those whose checkpoint held something back at its end, until final
    /// (Gemini CLI's message written last): held at the end of this read
    /// too; what it did not hold is final there, whatever the file is now.
    pub held: std::collections::HashSet<PathBuf>,
}
