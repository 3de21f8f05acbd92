//! The parsing crate's Unix calls, in one place: a path's bytes as the
//! system holds them, and reads at an offset. Each is a thin wrapper; a
//! port to another system changes this file alone.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;

/// The bytes of `s`, as the system holds them.
pub fn os_bytes(s: &OsStr) -> &[u8] {
    s.as_bytes()
}

/// The name whose bytes are `b`.
pub fn os_str(b: &[u8]) -> &OsStr {
    OsStr::from_bytes(b)
}

/// The name whose bytes are `v`.
pub fn os_string(v: Vec<u8>) -> OsString {
    OsString::from_vec(v)
}

/// One read of `file` at offset `at` (`pread`): the count read.
///
/// # Errors
/// An I/O error of the file.
pub fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    file.read_at(buf, at)
}

/// Reads all of `buf` from `file` at offset `at`.
///
/// # Errors
/// An I/O error of the file, or its end before `buf` is full.
pub fn read_exact_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    file.read_exact_at(buf, at)
}
