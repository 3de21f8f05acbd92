//! The engine's errors: of a run over an archive, its state and its
//! output; a file's reading errors (the parsing crate's,
//! [`crate::SourceError`]) and a sink's own (the store's, the dataset's:
//! [`SinkFailure`]) wrapped.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An error that ends the reading of one file, or a run over an archive.
/// Its message names the path first (the file, the state or the output the
/// error is about), then the place, then the cause.
#[derive(Debug)]
pub struct Error {
    path: PathBuf,
    kind: ErrorKind,
}

/// What went wrong. A caller matches on it; the command line maps kinds to
/// its exit codes.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Opening or reading failed.
    Io(io::Error),
    /// The first non-blank line is not a session header with a string `id`.
    NoHeader {
        /// 1-based line number of that line.
        line: u64,
        /// 0-based byte offset of that line.
        byte: u64,
        /// What was found instead.
        reason: String,
    },
    /// Writing to the output failed (the path is the output's; empty for
    /// stdout).
    Write(io::Error),
    /// The state file is not one of mem-ingest's.
    StateForeign,
    /// The state file is damaged: what was wrong.
    StateDamaged(String),
    /// The state was written by a newer mem-ingest.
    StateNewer {
        /// Its layout version.
        version: u32,
        /// The newest layout this mem-ingest reads.
        reads: u32,
    },
    /// The checkpoint (a state file, a store) was written with other
    /// options than this run's.
    OptionsChanged {
        /// What holds the checkpoint: `state`, `store`.
        what: &'static str,
        /// Each difference, as `name: state has A, this run B`.
        differences: Vec<String>,
    },
    /// Another run holds the lock of the state or store.
    Locked {
        /// The lock file.
        lock: PathBuf,
        /// What is locked: `state`, `store`.
        what: &'static str,
    },
    /// A sink's own error (the store's, the dataset's, a library
    /// sink's): its message names what it is about.
    Sink(SinkFailure),
    /// The output holds bytes that the state does not cover: it is not
    /// this run's to cut, replace or append to.
    OutputNotCovered {
        /// The output.
        output: PathBuf,
        /// Its length.
        len: u64,
        /// Whether the state exists (saved by a run without this output).
        state_exists: bool,
    },
    /// The output is shorter than the state covers: changed outside
    /// mem-ingest.
    OutputShorter {
        /// Its length.
        len: u64,
        /// Bytes the state covers.
        covered: u64,
    },
    /// The state pairs with another output.
    OtherOutput {
        /// The output the state pairs with.
        paired: String,
        /// The output of this run.
        output: PathBuf,
    },
    /// The output is one of the input files.
    OutputIsInput,
    /// A checkpoint was asked to pair with an output that is not a regular
    /// file (a named pipe, a device): it counts the output's bytes, which
    /// only a regular file keeps. What it is: `a named pipe`, `a device`.
    OutputNotAFile(&'static str),
    /// No PATH was given and no default archive exists: what was tried.
    NoArchive(String),
    /// The run could not start (a signal handler, a thread): why.
    Setup(String),
    /// A pipe named as a PATH (read once, as a stream) in a run that keeps
    /// a checkpoint or follows the archive, neither of which a stream
    /// allows.
    StreamNotResumable,
}

impl Error {
    /// An error about `path`.
    pub fn new(path: &Path, kind: ErrorKind) -> Self {
        Error {
            path: path.to_path_buf(),
            kind,
        }
    }

    /// The same error, naming `path`: the name the user gave a file that
    /// was read through another (a symbolic link's target).
    pub fn naming(self, path: &Path) -> Self {
        Error {
            path: path.to_path_buf(),
            kind: self.kind,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: &Path, e: io::Error) -> Self {
        Error::new(path, ErrorKind::Io(e))
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Whether the error is the caller's to fix before a run can start
    /// (other options, a locked state, an output not this run's, the output
    /// among the inputs) rather than a failure of a file or the system.
    pub fn is_usage(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::OptionsChanged { .. }
                | ErrorKind::Locked { .. }
                | ErrorKind::OutputNotCovered { .. }
                | ErrorKind::OtherOutput { .. }
                | ErrorKind::OutputIsInput
                | ErrorKind::OutputNotAFile(_)
                | ErrorKind::StreamNotResumable
        ) || matches!(&self.kind, ErrorKind::Sink(s) if s.usage)
    }

    /// The message without the path: the place (`line:byte: `, where there
    /// is one) and the cause.
    pub fn cause(&self) -> String {
        match &self.kind {
            ErrorKind::Io(e) => e.to_string(),
            ErrorKind::NoHeader { line, byte, reason } => format!("{line}:{byte}: {reason}"),
            ErrorKind::Write(e) => format!("writing the output: {e}"),
            ErrorKind::StateForeign => "not a mem-ingest state file".to_owned(),
            ErrorKind::StateDamaged(why) => why.clone(),
            ErrorKind::StateNewer { version, reads } => {
                format!("state version {version} (this mem-ingest reads {reads} and 1)")
            }
            ErrorKind::OptionsChanged { what, differences } => format!(
                "written with other options ({}); use another {}",
                differences.join("; "),
                if *what == "state" { "state file" } else { what }
            ),
            ErrorKind::Locked { lock, what } => format!(
                "another mem-ingest run is using the {what} (lock {})",
                lock.display()
            ),
            ErrorKind::Sink(s) => s.error.to_string(),
            ErrorKind::OutputNotCovered {
                output,
                len,
                state_exists,
            } => {
                let why = if *state_exists {
                    "covers no output file (it was saved by a run that wrote to stdout)"
                } else {
                    "does not exist, so nothing covers what it holds"
                };
                format!(
                    "the output {} already holds {len} bytes and the state {} {why}: refusing \
                     to replace, cut or append to it. To go on from an earlier run, give the \
                     state that run saved; to start over on purpose, move {} away first",
                    output.display(),
                    self.path.display(),
                    output.display()
                )
            }
            ErrorKind::OutputShorter { len, covered } => format!(
                "holds {len} bytes but the state covers {covered}: it was changed outside \
                 mem-ingest (remove the state to start over)"
            ),
            ErrorKind::OtherOutput { paired, output } => format!(
                "the state pairs with the output {paired}, not {}: one state, one output",
                output.display()
            ),
            ErrorKind::OutputIsInput => "is one of the input files".to_owned(),
            ErrorKind::OutputNotAFile(what) => format!(
                "the output is {what}, not a regular file: a state counts the bytes of the \
                 outputs it pairs with, which only a regular file keeps; give a file, or leave \
                 out --state to write through it"
            ),
            ErrorKind::NoArchive(why) | ErrorKind::Setup(why) => why.clone(),
            ErrorKind::StreamNotResumable => "a pipe is read once, as a stream (no parts, no \
                 resume): it cannot be read with a checkpoint (--state, --db, --parquet) or \
                 --follow; save it to a file and name that"
                .to_owned(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.kind {
            // The place follows the path directly: `path:line:byte: why`.
            ErrorKind::NoHeader { .. } => write!(f, "{path}:{}", self.cause()),
            ErrorKind::Write(_) if self.path.as_os_str().is_empty() => f.write_str(&self.cause()),
            ErrorKind::OptionsChanged { what, .. } => {
                write!(f, "the {what} {path} was {}", self.cause())
            }
            ErrorKind::Locked { lock, what } => write!(
                f,
                "another mem-ingest run is using the {what} {path} (lock {})",
                lock.display()
            ),
            ErrorKind::Sink(s) => write!(f, "{}", s.error),
            ErrorKind::OutputIsInput => write!(f, "the output {path} {}", self.cause()),
            ErrorKind::OutputShorter { .. } => write!(f, "{path} {}", self.cause()),
            ErrorKind::OutputNotCovered { .. }
            | ErrorKind::OtherOutput { .. }
            | ErrorKind::NoArchive(_)
            | ErrorKind::Setup(_) => f.write_str(&self.cause()),
            _ => write!(f, "{path}: {}", self.cause()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) | ErrorKind::Write(e) => Some(e),
            ErrorKind::Sink(s) => Some(&*s.error),
            _ => None,
        }
    }
}

/// A sink's own error, wrapped in the engine's ([`ErrorKind::Sink`]): its
/// message, whole (it names its path), and whether it is the caller's to
/// fix before a run can start ([`Error::is_usage`]).
#[derive(Debug)]
pub struct SinkFailure {
    error: Box<dyn std::error::Error + Send + Sync>,
    usage: bool,
}

impl SinkFailure {
    /// A sink's `error`; `usage`: the caller's to fix (a store another
    /// program made, a bad query), not a failure of the system.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static, usage: bool) -> Self {
        SinkFailure {
            error: Box::new(error),
            usage,
        }
    }

    /// The sink's error.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The sink's error, when it is an `E` (the store's `StoreError`, ...).
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.error.downcast_ref()
    }
}

/// A file's reading error, as the engine reports it: the same path, kind
/// and message.
impl From<mem_ingest_parse::Error> for Error {
    fn from(e: mem_ingest_parse::Error) -> Self {
        use mem_ingest_parse::ErrorKind as K;
        let (path, kind) = e.into_parts();
        let kind = match kind {
            K::Io(e) => ErrorKind::Io(e),
            K::NoHeader { line, byte, reason } => ErrorKind::NoHeader { line, byte, reason },
        };
        Error { path, kind }
    }
}
