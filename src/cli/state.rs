//! Checkpoints: what earlier runs consumed, per session file, and the
//! deduplication sets, so a re-run reads only what is new.
//!
//! The state file is JSON, written atomically (temporary file, fsync,
//! rename, fsync of the folder) and only after the output it covers is
//! durable. A lock file beside it keeps two runs off one state.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mem_ingest::{Header, Report};
use serde::{Deserialize, Serialize};

/// Version of the state file's layout.
pub const STATE_VERSION: u32 = 1;
/// Version of what a record line holds; a state written for another one is
/// refused, since re-runs append to the same output.
pub const RECORD_FORMAT: u32 = 1;

/// The options that shape the output: a run with other ones refuses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub command: String,
    pub roles: Vec<String>,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub max_text: Option<usize>,
    pub no_dedupe: bool,
    pub record_format: u32,
}

impl Shape {
    /// What differs from `other`, for a message.
    pub fn differences(&self, other: &Shape) -> Vec<String> {
        let mut d = Vec::new();
        let mut cmp = |name: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{name}: state has {a}, this run {b}"));
            }
        };
        cmp("command", self.command.clone(), other.command.clone());
        cmp(
            "--role",
            format!("{:?}", self.roles),
            format!("{:?}", other.roles),
        );
        cmp(
            "--since",
            format!("{:?}", self.since),
            format!("{:?}", other.since),
        );
        cmp(
            "--until",
            format!("{:?}", self.until),
            format!("{:?}", other.until),
        );
        cmp(
            "--max-text",
            format!("{:?}", self.max_text),
            format!("{:?}", other.max_text),
        );
        cmp(
            "--no-dedupe",
            self.no_dedupe.to_string(),
            other.no_dedupe.to_string(),
        );
        cmp(
            "record format",
            self.record_format.to_string(),
            other.record_format.to_string(),
        );
        d
    }
}

/// A file's identity and size when last seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
}

impl Identity {
    pub fn of(m: &fs::Metadata) -> Self {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
        }
    }
}

/// What earlier runs consumed of one session file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileState {
    pub identity: Identity,
    pub header: Header,
    /// Digest of the header's fields; a file whose header changed is read
    /// again from the start.
    pub header_digest: u64,
    /// Byte offset and line number after the last complete line consumed.
    pub offset: u64,
    pub line: u64,
    /// The last line consumed had no `\n`.
    pub open_line: bool,
    /// Bytes of a partial last line waiting for the writer.
    pub pending: u64,
    /// Everything read of this file so far.
    pub report: Report,
}

/// One deduplication lineage: its sessions and the fingerprints of the
/// entries emitted, sorted, as little-endian u64 in base64.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LineageState {
    pub sessions: Vec<String>,
    pub fingerprints: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    pub shape: Shape,
    /// Bytes of the output file the state covers (`-o`), if any.
    pub output: Option<OutputState>,
    /// Shared with the plan, which reads them without copying.
    pub files: BTreeMap<String, Arc<FileState>>,
    pub lineages: Vec<LineageState>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputState {
    pub path: String,
    pub len: u64,
}

/// The lock that keeps a second run off the state while this one runs.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

pub fn lock(state: &Path) -> Result<Lock, String> {
    let path = sibling(state, ".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Lock { _file: file }),
        Err(fs::TryLockError::WouldBlock) => Err(format!(
            "another mem-ingest run is using the state {} (lock {})",
            state.display(),
            path.display()
        )),
        Err(fs::TryLockError::Error(e)) => Err(format!("{}: {e}", path.display())),
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Loads the state; `Ok(None)` when there is none yet.
pub fn load(path: &Path) -> Result<Option<State>, String> {
    let mut bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    // simd-json's serde front end: states hold thousands of files.
    let state: State = simd_json::serde::from_slice(&mut bytes)
        .map_err(|e| format!("{}: not a mem-ingest state ({e})", path.display()))?;
    if state.version != STATE_VERSION {
        return Err(format!(
            "{}: state version {} (this mem-ingest writes {STATE_VERSION})",
            path.display(),
            state.version
        ));
    }
    Ok(Some(state))
}

/// Writes the state atomically: a temporary file beside it, fsync, rename,
/// fsync of the folder.
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    let tmp = sibling(path, &format!(".{}.tmp", std::process::id()));
    {
        let mut f = File::create(&tmp)?;
        serde_json::to_writer(io::BufWriter::new(&mut f), state)?;
        f.flush()?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Sorted fingerprints as base64 of their little-endian bytes.
pub fn encode_fingerprints(fps: &[u64]) -> String {
    let bytes: Vec<u8> = fps.iter().flat_map(|f| f.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= c.len() {
                B64[(n >> shift) as usize & 63] as char
            } else {
                '='
            });
        }
    }
    out
}

pub fn decode_fingerprints(s: &str) -> Result<Vec<u64>, String> {
    const INVALID: u8 = 0xff;
    const VAL: [u8; 256] = {
        let mut t = [INVALID; 256];
        let mut i = 0;
        while i < 64 {
            t[B64[i] as usize] = i as u8;
            i += 1;
        }
        t
    };
    let corrupt = || "corrupt fingerprint set in the state".to_owned();
    let b = s.as_bytes();
    if !b.len().is_multiple_of(4) {
        return Err(corrupt());
    }
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    let mut bytes = Vec::with_capacity(b.len() / 4 * 3);
    for (k, c) in b.chunks_exact(4).enumerate() {
        let last = (k + 1) * 4 == b.len();
        let mut n = 0u32;
        for (j, ch) in c.iter().enumerate() {
            let v = if last && j >= 4 - pad {
                0
            } else {
                VAL[usize::from(*ch)]
            };
            if v == INVALID {
                return Err(corrupt());
            }
            n = (n << 6) | u32::from(v);
        }
        let keep = if last { 3 - pad.min(2) } else { 3 };
        bytes.extend_from_slice(&n.to_be_bytes()[1..1 + keep]);
    }
    if !bytes.len().is_multiple_of(8) {
        return Err(corrupt());
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_round_trip() {
        for n in [0usize, 1, 2, 3, 7, 100] {
            let fps: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .collect();
            assert_eq!(
                decode_fingerprints(&encode_fingerprints(&fps)).unwrap(),
                fps
            );
        }
        assert!(decode_fingerprints("abc").is_err());
        assert!(decode_fingerprints("ab!d").is_err());
        assert!(decode_fingerprints("AAAAAAAA").is_err()); // 6 bytes: no whole fingerprint
        assert_eq!(decode_fingerprints("AAAAAAAAAAA=").unwrap(), [0]);
    }
}
