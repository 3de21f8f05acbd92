//! A file's stamp: its identity (device, inode) and size and modification
//! time when last seen, which says whether it changed, and the digest of
//! its header, which says whether it must be read from the start again.
//! The engine's one use of Unix file metadata.

use std::fs;

use serde::{Deserialize, Serialize};

use crate::line::Header;

/// A file's identity and size when last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

impl Identity {
    /// The identity of a file from its metadata.
    pub fn of(m: &fs::Metadata) -> Self {
        let (dev, ino) = crate::sys::file_id(m);
        Identity {
            dev,
            ino,
            size: crate::sys::size(m),
            mtime_ns: crate::sys::mtime_ns(m),
        }
    }
}

/// The header digest kept in the state: a re-run reads a file from the
/// start again when its header changed. A hash of the header's fields
/// themselves (not of a serialised form, which a new field would change).
pub fn header_digest(h: &Header) -> u64 {
    let opt = |v: Option<&[u8]>| match v {
        Some(b) => [&[1u8][..], b].concat(),
        None => vec![0],
    };
    let ts = h.timestamp.map(i64::to_le_bytes);
    crate::json::fingerprint(&[
        h.id.as_bytes(),
        h.cwd.as_bytes(),
        &h.version.to_le_bytes(),
        &opt(ts.as_ref().map(|t| &t[..])),
        &opt(h.parent.as_ref().map(|p| p.as_str().as_bytes())),
        &h.fingerprint.to_le_bytes(),
    ])
}
