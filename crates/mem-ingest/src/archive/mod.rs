//! The archive engine: whole archives of session files into a [`Sink`],
//! on every core, incrementally, exactly once.
//!
//! ```
//! use mem_ingest::archive::Archive;
//! use mem_ingest::sink::ForEach;
//!
//! let dir = std::env::temp_dir().join(format!("mem-ingest-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let state = dir.join("state");
//! let archive = Archive::builder()
//!     .path("fixtures/hand-built.jsonl")
//!     .state(&state)
//!     .build();
//! let mut texts = Vec::new();
//! let summary = archive.backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| texts.push(r.text)))?;
//! assert_eq!((summary.written, texts.len()), (22, 22));
//! // A second run over the unchanged archive reads nothing and sends nothing.
//! let again = archive.backfill(&mut ForEach(|_| panic!("nothing is new")))?;
//! assert_eq!((again.written, again.unchanged), (0, 1));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Invariants
//!
//! - **Archive order.** Files come in sorted path order (a file reached
//!   twice keeps its first path), records in file order; a large file is
//!   read in parts on several cores and its parts are delivered in order.
//!   Nothing a sink receives depends on the number of jobs.
//! - **Output before checkpoint.** A checkpoint is saved only after the sink
//!   made everything it covers durable ([`Sink::sync`]); a checkpoint taken
//!   inside a file covers the lines delivered of it. A killed run leaves a
//!   checkpoint that covers a prefix of what was written: the next run cuts
//!   the sink back to it (or, for a sink that keeps its own checkpoint,
//!   never committed the rest) and goes on from there.
//! - **Exactly once.** With a checkpoint and a sink that can be resumed
//!   (a file, a database), each record reaches the sink exactly once over
//!   any sequence of runs, killed or not. Deduplication keeps each entry
//!   once per lineage (a session, its forks, a history written twice); it
//!   is decided from entry fingerprints before the sink sees a batch. What
//!   exactly-once does not cover: a sink that cannot be cut back (stdout:
//!   at least once), files changed behind a run's back in ways that keep
//!   their identity and size, and entries pi itself wrote twice with
//!   different ids.
//! - **Bad input.** A damaged line is a counted skip with its place; a file
//!   that cannot be read fails alone, after the others are read. Input files
//!   are never written.

mod config;
pub(crate) mod counted;
mod ctx;
pub(crate) mod dedupe;
mod deliver;
pub(crate) mod discover;
mod exec;
mod listing;
pub(crate) mod plan;
mod reread;
mod run;
mod stats;
mod summary;
mod task;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::format::Format;
use crate::formats::Pi;
use crate::record::Role;
use crate::record::RoleFilter;
use crate::sink::{Discard, Sink};
use crate::source::SourceOptions;

pub use crate::formats::pi::session_of_path;
pub use config::Progress;
pub(crate) use config::{Command, Config, Filter};
pub use counted::{CountedUsage, UsageReread};
pub use discover::{refuse_streams, Links};
pub use summary::{FileTotals, SkipAt, Summary};
// The checkpoint's types, where they were before they had a folder of
// their own (`crate::checkpoint`).
#[doc(hidden)]
pub use crate::checkpoint::respell_keys;
pub use crate::checkpoint::{
    fnv1a, lock_file, real_path, response_rows, shard_of, Checkpoint, CheckpointStore, FileState,
    Identity, LineageState, Lock, OutputOptions, OutputState, Shard, State, StateFile,
    RECORD_FORMAT, STATE_VERSION,
};
pub use plan::PART_BYTES;
pub use stats::{
    FailureLine, ModelLine, ProjectLine, Roles, SkipLine, SourceStats, Stats, UsageLine,
};

/// Builds an [`Archive`]: what to read and how. Every setter documents its
/// default.
#[derive(Clone)]
pub struct ArchiveBuilder {
    cfg: Config,
    roles: Vec<Role>,
}

impl Default for ArchiveBuilder {
    fn default() -> Self {
        ArchiveBuilder {
            cfg: Config {
                formats: vec![Arc::new(Pi)],
                formats_from_checkpoint: false,
                paths: Vec::new(),
                links: Links::Skip,
                jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
                state: None,
                dedupe: true,
                opts: SourceOptions::new(),
                filter: Filter::default(),
                roles: Vec::new(),
                follow: false,
                checkpoint: Duration::from_secs(5),
                stop: Arc::new(AtomicBool::new(false)),
                progress: None,
                poll_only: false,
                shard: None,
                redact: true,
                costs: None,
                streams: Arc::default(),
                cover: None,
            },
            roles: Vec::new(),
        }
    }
}

impl ArchiveBuilder {
    /// A builder with the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a PATH: a session file, or a folder searched recursively for
    /// `*.jsonl` (a PATH that is a link followed; links inside it as
    /// [`ArchiveBuilder::links`] says, loops survived, a file reached twice
    /// read once). Default: none, which reads pi's own archive
    /// (`$PI_CODING_AGENT_SESSION_DIR`, else `$PI_CODING_AGENT_DIR/sessions`,
    /// else `~/.pi/agent/sessions`).
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.cfg.paths.push(path.into());
        self
    }

    /// Adds PATHs (see [`ArchiveBuilder::path`]).
    pub fn paths<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.cfg.paths.extend(paths.into_iter().map(Into::into));
        self
    }

    /// What a walk does with a link it meets in a folder (default
    /// [`Links::Skip`]: not followed). PATHs, and the agents' default
    /// archives, are followed whatever this says. A checkpoint records it
    /// ([`OutputOptions::links`]) and refuses a run that differs; one saved
    /// before it was recorded says [`Links::Follow`].
    pub fn links(mut self, links: Links) -> Self {
        self.cfg.links = links;
        self
    }

    /// The session format read (default [`Pi`]). Replaces the formats set
    /// before.
    pub fn format(mut self, format: Arc<dyn Format>) -> Self {
        self.cfg.formats = vec![format];
        self
    }

    /// The session formats read, in order of preference (default [`Pi`]
    /// alone): a file found in a folder is the first's that claims its
    /// name; a file named as a PATH that none claims is the first's.
    pub fn formats(mut self, formats: Vec<Arc<dyn Format>>) -> Self {
        if !formats.is_empty() {
            self.cfg.formats = formats;
        }
        self
    }

    /// Whether a checkpoint chooses among the formats (default false).
    ///
    /// Set: the formats given are the ones a run may read. A run with a
    /// checkpoint reads those the checkpoint records (one saved before
    /// mem-ingest recorded them: the formats of the files it holds, pi
    /// when none), a first run all of them; a checkpoint that records one
    /// not given is refused. Unset: the run reads the formats given, and a
    /// checkpoint that records other ones is refused
    /// ([`ErrorKind::OptionsChanged`](crate::ErrorKind::OptionsChanged)).
    pub fn formats_from_checkpoint(mut self, yes: bool) -> Self {
        self.cfg.formats_from_checkpoint = yes;
        self
    }

    /// Worker threads for reading, planning and listing (default: the
    /// number of cores; at least 1). The output does not depend on it.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.cfg.jobs = jobs.max(1);
        self
    }

    /// Whether each entry is kept once per lineage, the copy of the session
    /// that wrote it first (default true). Off, every copy is kept.
    pub fn dedupe(mut self, dedupe: bool) -> Self {
        self.cfg.dedupe = dedupe;
        self
    }

    /// Options of every source (default [`SourceOptions::new`]); their role
    /// filter is replaced by [`ArchiveBuilder::roles`] when that is set,
    /// and their line hash ([`SourceOptions::line_hash`]) by the one a
    /// checkpoint, or a store, records.
    pub fn source_options(mut self, opts: SourceOptions) -> Self {
        self.cfg.opts = opts;
        self
    }

    /// Keeps only records of these roles (default: all). Other records are
    /// counted, and their text never built.
    pub fn roles(mut self, roles: &[Role]) -> Self {
        self.roles = roles.to_vec();
        self
    }

    /// Keeps records at or after this time, Unix ms (default: no bound).
    /// Records without a timestamp are dropped when a bound is set.
    pub fn since(mut self, ms: i64) -> Self {
        self.cfg.filter.since = Some(ms);
        self
    }

    /// Keeps records before this time, Unix ms (default: no bound).
    pub fn until(mut self, ms: i64) -> Self {
        self.cfg.filter.until = Some(ms);
        self
    }

    /// Whether secrets in the records' free text (`text` and `command`)
    /// are replaced by `[REDACTED:<rule id>]` before the sink sees them
    /// (default: true; see [`crate::redact`] for the rules). Redaction
    /// works on the decoded text and runs before [`ArchiveBuilder::max_text`]
    /// cuts; the summary counts what it replaced by rule
    /// ([`Summary::redactions`]). A checkpoint records the choice: a run
    /// with the other one is refused; one saved before it was recorded
    /// goes on unredacted ([`Summary::unredacted_checkpoint`]).
    pub fn redact(mut self, on: bool) -> Self {
        self.cfg.redact = on;
        self
    }

    /// Cuts longer texts to at most this many bytes at a UTF-8 boundary
    /// (default: whole); the sink is told the full length.
    pub fn max_text(mut self, bytes: usize) -> Self {
        self.cfg.filter.max_text = Some(bytes);
        self
    }

    /// A checkpoint file (default: none): a re-run reads only what is new
    /// since the last run. It records the options that shape the output (a
    /// run with others is refused) and is locked while a run uses it. A sink
    /// that keeps its own checkpoint takes none.
    pub fn state(mut self, path: impl Into<PathBuf>) -> Self {
        self.cfg.state = Some(path.into());
        self
    }

    /// Time between checkpoints within a run (default 5 s).
    pub fn checkpoint_every(mut self, every: Duration) -> Self {
        self.cfg.checkpoint = every;
        self
    }

    /// A flag that stops a run cleanly when set, checkpoint saved (default:
    /// a flag of its own, never set). Signal handlers set it.
    pub fn stop_flag(mut self, stop: Arc<AtomicBool>) -> Self {
        self.cfg.stop = stop;
        self
    }

    /// Reports progress of each pass (default: none). Not called while
    /// following.
    pub fn progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.cfg.progress = Some(progress);
        self
    }

    /// Following, poll the files only, without file notifications (default
    /// false: notifications where the platform has them, polling as the
    /// fallback).
    pub fn poll_only(mut self, poll: bool) -> Self {
        self.cfg.poll_only = poll;
        self
    }

    /// Reads only shard `shard.k` of `shard.n` of the archive (default:
    /// all of it): the files whose lineage's root is that shard's (see
    /// [`Shard`] and [`shard_of`]). N runs with K = 0..N-1 read every
    /// record of the archive once between them. Recorded in the
    /// checkpoint: a run with another shard refuses it.
    pub fn shard(mut self, shard: Shard) -> Self {
        self.cfg.shard = (shard.n > 1).then_some(shard);
        self
    }

    /// The archive.
    pub fn build(mut self) -> Archive {
        if !self.roles.is_empty() {
            self.cfg.opts = self.cfg.opts.roles(RoleFilter::only(&self.roles));
        }
        let mut names: Vec<String> = self.roles.iter().map(|r| r.as_str().to_owned()).collect();
        names.sort();
        names.dedup();
        self.cfg.roles = names;
        Archive { cfg: self.cfg }
    }
}

/// An archive to read: [`Archive::backfill`] into a sink, [`Archive::stats`],
/// or [`Archive::follow`].
#[derive(Clone)]
pub struct Archive {
    cfg: Config,
}

impl Archive {
    /// A builder with the defaults.
    pub fn builder() -> ArchiveBuilder {
        ArchiveBuilder::new()
    }

    /// Reads what is new in the archive into `sink`, in archive order.
    ///
    /// # Errors
    /// The run could not start (a state that is unreadable, of other
    /// options or locked; an output the state does not cover; no archive),
    /// or the sink or the checkpoint failed. Files that fail are not errors:
    /// they are in the summary's `failures`.
    pub fn backfill<S: Sink>(&self, sink: &mut S) -> Result<Summary, Error> {
        run::run(&self.cfg, Command::Backfill, sink)
    }

    /// [`Archive::backfill`], then keeps going: each new complete line of
    /// any session under the PATHs goes to the sink as it is written, until
    /// the stop flag is set. Needs a checkpoint.
    ///
    /// # Errors
    /// As [`Archive::backfill`].
    pub fn follow<S: Sink>(&self, sink: &mut S) -> Result<Summary, Error> {
        let mut cfg = self.cfg.clone();
        cfg.follow = true;
        run::run(&cfg, Command::Backfill, sink)
    }

    /// Whether there is an archive to read: PATHs were given, or one of
    /// the formats' default archives exists. What a run checks first,
    /// for a caller to check before it creates an output, a state or a
    /// store that a run finding no archive would leave behind.
    ///
    /// # Errors
    /// `NoArchive`: no PATH and no default archive, each one tried named.
    pub fn check_archive(&self) -> Result<(), Error> {
        listing::roots(&self.cfg).map(|_| ())
    }

    /// Counts what the archive holds: no records are built. With a
    /// checkpoint, files unchanged since are not opened.
    ///
    /// # Errors
    /// As [`Archive::backfill`].
    pub fn stats(&self) -> Result<Summary, Error> {
        run::run(&self.cfg, Command::Stats, &mut Discard)
    }

    /// As [`Archive::stats`], and each response counted as a row
    /// ([`Summary::usage`]): exactly the responses the stats count, with
    /// their times. Their usages sum to the stats' usage.
    ///
    /// # Errors
    /// As [`Archive::backfill`].
    pub fn usage(&self) -> Result<Summary, Error> {
        let mut cfg = self.cfg.clone();
        cfg.opts = cfg.opts.usage_rows(true);
        run::run(&cfg, Command::Stats, &mut Discard)
    }

    /// As [`Archive::stats`], and the stats with every cost priced from
    /// `prices` ([`Summary::to_stats_priced`]): each response is priced
    /// as it is counted and its cost summed by line, none kept
    /// ([`Summary::usage`] stays empty), the sums those of
    /// [`Archive::usage`]'s rows priced, to the bit.
    ///
    /// # Errors
    /// As [`Archive::backfill`].
    pub fn priced_stats(&self, prices: &crate::prices::Prices) -> Result<(Summary, Stats), Error> {
        let mut cfg = self.cfg.clone();
        cfg.costs = Some(Arc::new(prices.clone()));
        let summary = run::run(&cfg, Command::Stats, &mut Discard)?;
        let stats = summary.to_stats_priced(prices);
        Ok((summary, stats))
    }
}
