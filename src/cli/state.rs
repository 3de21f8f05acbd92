//! Checkpoints: what earlier runs consumed, per session file, and the
//! deduplication sets, so a re-run reads only what is new.
//!
//! The state file is `MEMINGST`, the format version (u32, little endian),
//! then the state in postcard's compact encoding: it describes every file
//! of the archive and is read on every run, so it must load in
//! milliseconds. It is written atomically (temporary file, fsync, rename,
//! fsync of the folder) and only after the output it covers is durable. A
//! lock file beside it keeps two runs off one state.

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
/// entries emitted, sorted, as little-endian u64 bytes (8 bytes each).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LineageState {
    pub sessions: Vec<String>,
    pub fingerprints: Vec<u8>,
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

const MAGIC: &[u8; 8] = b"MEMINGST";

/// Loads the state; `Ok(None)` when there is none yet.
pub fn load(path: &Path) -> Result<Option<State>, String> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let not_ours = || format!("{}: not a mem-ingest state file", path.display());
    let (Some(magic), Some(version)) = (bytes.get(..8), bytes.get(8..12)) else {
        return Err(not_ours());
    };
    if magic != MAGIC {
        return Err(not_ours());
    }
    let version = u32::from_le_bytes(version.try_into().expect("4 bytes"));
    if version != STATE_VERSION {
        return Err(format!(
            "{}: state version {version} (this mem-ingest reads {STATE_VERSION})",
            path.display()
        ));
    }
    let state: State = postcard::from_bytes(&bytes[12..])
        .map_err(|e| format!("{}: damaged state ({e})", path.display()))?;
    Ok(Some(state))
}

/// Writes the state atomically: a temporary file beside it, fsync, rename,
/// fsync of the folder.
pub fn save(path: &Path, state: &State) -> io::Result<()> {
    let body = postcard::to_stdvec(state).map_err(io::Error::other)?;
    let tmp = sibling(path, &format!(".{}.tmp", std::process::id()));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(MAGIC)?;
        f.write_all(&STATE_VERSION.to_le_bytes())?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

/// Sorted fingerprints as their little-endian bytes.
pub fn encode_fingerprints(fps: &[u64]) -> Vec<u8> {
    fps.iter().flat_map(|f| f.to_le_bytes()).collect()
}

pub fn decode_fingerprints(b: &[u8]) -> Result<Vec<u64>, String> {
    if !b.len().is_multiple_of(8) {
        return Err("corrupt fingerprint set in the state".to_owned());
    }
    Ok(b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
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
        assert!(decode_fingerprints(&[0; 7]).is_err());
    }

    #[test]
    fn state_round_trips_and_refuses_what_is_not_one() {
        let dir = std::env::temp_dir().join(format!("mem-ingest-st-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.state");
        let st = State {
            version: STATE_VERSION,
            shape: Shape {
                command: "backfill".into(),
                roles: vec!["user".into()],
                since: Some(-5),
                until: None,
                max_text: Some(9),
                no_dedupe: false,
                record_format: RECORD_FORMAT,
            },
            output: Some(OutputState {
                path: "o".into(),
                len: 42,
            }),
            files: BTreeMap::new(),
            lineages: vec![LineageState {
                sessions: vec!["a".into(), "b".into()],
                fingerprints: encode_fingerprints(&[1, 2]),
            }],
        };
        save(&p, &st).unwrap();
        let back = load(&p).unwrap().unwrap();
        assert_eq!(back.shape, st.shape);
        assert_eq!(back.output, st.output);
        assert_eq!(
            decode_fingerprints(&back.lineages[0].fingerprints).unwrap(),
            [1, 2]
        );
        assert_eq!(load(&dir.join("none")).unwrap().map(|s| s.version), None);
        fs::write(&p, b"{\"json\": true}").unwrap();
        assert!(load(&p)
            .unwrap_err()
            .ends_with("not a mem-ingest state file"));
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&99u32.to_le_bytes());
        fs::write(&p, &bytes).unwrap();
        assert!(load(&p).unwrap_err().contains("state version 99"));
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&STATE_VERSION.to_le_bytes());
        bytes.extend_from_slice(&[0xff; 3]);
        fs::write(&p, &bytes).unwrap();
        assert!(load(&p).unwrap_err().contains("damaged state"));
        fs::remove_dir_all(dir).unwrap();
    }
}
