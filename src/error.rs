//! Errors that end the reading of a file.

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

/// What went wrong.
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
}

impl Error {
    pub(crate) fn new(path: &Path, kind: ErrorKind) -> Self {
        Error {
            path: path.to_path_buf(),
            kind,
        }
    }

    pub(crate) fn io(path: &Path, e: io::Error) -> Self {
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
        write!(f, "{}:", self.path.display())?;
        if matches!(self.kind, ErrorKind::Io(_)) {
            f.write_str(" ")?;
        }
        f.write_str(&self.cause())
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
