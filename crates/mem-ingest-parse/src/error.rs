//! Errors of reading one session file: the parsing crate's own. The
//! engine (`mem_ingest::Error`) wraps them, beside its errors of runs,
//! states and outputs.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An error that ends the reading of one file. Its message names the path
/// first, then the place, then the cause.
#[derive(Debug)]
pub struct Error {
    path: PathBuf,
    kind: ErrorKind,
}

/// What went wrong. Exhaustive: the engine's error mirrors each kind
/// (`mem_ingest::ErrorKind`), so a new one is a change there too.
#[derive(Debug)]
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

    /// Its path and kind, for a wrapping error (the engine's).
    pub fn into_parts(self) -> (PathBuf, ErrorKind) {
        (self.path, self.kind)
    }

    /// The message without the path: the place (`line:byte: `, where there
    /// is one) and the cause.
    pub fn cause(&self) -> String {
        match &self.kind {
            ErrorKind::Io(e) => e.to_string(),
            ErrorKind::NoHeader { line, byte, reason } => format!("{line}:{byte}: {reason}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.kind {
            // The place follows the path directly: `path:line:byte: why`.
            ErrorKind::NoHeader { .. } => write!(f, "{path}:{}", self.cause()),
            ErrorKind::Io(_) => write!(f, "{path}: {}", self.cause()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            ErrorKind::NoHeader { .. } => None,
        }
    }
}
