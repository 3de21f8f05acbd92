//! Reading a file entry by entry through a format, for the line-by-line
//! mapping tests of Claude Code and Codex.

use std::path::{Path, PathBuf};

use mem_ingest::format::{Format, Input};
use mem_ingest::{OwnedRecord, Report, Role, SourceOptions};

/// `samples/` of the shared folder (see [`super::shared`]).
pub fn samples() -> PathBuf {
    super::shared::samples()
}

/// `(line, record)` of each entry.
pub type Entries = Vec<(u64, Option<OwnedRecord>)>;

/// Every entry of a file read as `format`'s: `(line, record)`, and the
/// report; streamed, or from `bytes` in memory.
pub fn read(format: &dyn Format, path: &Path, bytes: Option<&[u8]>) -> (Entries, Report) {
    let opts = SourceOptions::new();
    let input = match bytes {
        Some(b) => Input::Bytes(b),
        None => Input::Reader(Box::new(std::fs::File::open(path).unwrap())),
    };
    let mut src = format.open(input, path, &opts).unwrap();
    let mut out = Vec::new();
    while let Some(e) = src.next_entry().unwrap() {
        out.push((e.line, e.record.map(|r| r.to_owned_record())));
    }
    (out, src.report().clone())
}

/// Both ways of reading (streamed, in memory) give the same.
pub fn read_both(format: &dyn Format, path: &Path) -> (Entries, Report) {
    let bytes = std::fs::read(path).unwrap();
    let a = read(format, path, None);
    let b = read(format, path, Some(&bytes));
    assert_eq!(a.0, b.0, "{}", path.display());
    assert_eq!(a.1, b.1, "{}", path.display());
    a
}

/// `(line, role, entry, kinds)` of each entry; `None` role for an entry
/// without a record.
pub type Row = (u64, Option<Role>, String, Vec<String>);

/// The rows of `entries`.
pub fn rows(entries: &[(u64, Option<OwnedRecord>)]) -> Vec<Row> {
    entries
        .iter()
        .map(|(line, r)| match r {
            Some(r) => (*line, Some(r.role), r.entry.clone(), r.kinds.clone()),
            None => (*line, None, String::new(), Vec::new()),
        })
        .collect()
}

/// A record's `(role, entry, kinds)`.
pub fn rec(role: Role, entry: &str, kinds: &[&str]) -> (Option<Role>, String, Vec<String>) {
    (
        Some(role),
        entry.into(),
        kinds.iter().map(|k| (*k).to_owned()).collect(),
    )
}

/// An entry without a record.
pub const NONE: (Option<Role>, String, Vec<String>) = (None, String::new(), Vec::new());

/// Rows numbered from line 1.
pub fn numbered(v: Vec<(Option<Role>, String, Vec<String>)>) -> Vec<Row> {
    v.into_iter()
        .enumerate()
        .map(|(i, (r, e, k))| (i as u64 + 1, r, e, k))
        .collect()
}
