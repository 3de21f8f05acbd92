//! The engine's Unix calls, in one place: a file's identity (device,
//! inode, size, modification time) and kind, and, from the parsing
//! crate's own (`mem_ingest_parse::sys`), a path's bytes and reads at an
//! offset. A port to another system changes this file and that one.

use std::fs::{FileType, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};

pub use mem_ingest_parse::sys::{os_bytes, read_at};
// The tests' own: names of any bytes, and links.
#[cfg(test)]
pub use mem_ingest_parse::sys::os_str;
#[cfg(test)]
pub use std::os::unix::fs::symlink;

/// The file's device and inode: the same pair, the same file.
pub fn file_id(m: &Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// Its size in bytes.
pub fn size(m: &Metadata) -> u64 {
    m.size()
}

/// Its modification time, ns since the epoch (saturating).
pub fn mtime_ns(m: &Metadata) -> i64 {
    m.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.mtime_nsec())
}

/// `"character"` or `"block"` for a device, else `None`.
pub fn device_kind(t: &FileType) -> Option<&'static str> {
    if t.is_char_device() {
        Some("character")
    } else if t.is_block_device() {
        Some("block")
    } else {
        None
    }
}

/// Whether it is a pipe (a FIFO) or a socket.
pub fn is_fifo_or_socket(t: &FileType) -> bool {
    t.is_fifo() || t.is_socket()
}
