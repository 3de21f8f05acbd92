//! Finding session files: PATHs, folders searched recursively for `*.jsonl`,
//! pi's own archive when no PATH is given.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::state::Identity;

/// What discovery found.
#[derive(Debug, Default)]
pub struct Found {
    /// Session files in sorted path order, each read once (a file reached
    /// twice through links or overlapping PATHs keeps its first path), with
    /// their identity and size when found.
    pub files: Vec<(PathBuf, Identity)>,
    /// PATHs (or folders below them) that could not be read.
    pub failures: Vec<(PathBuf, String)>,
}

/// The archive pi itself would use.
pub fn default_archive() -> Result<PathBuf, String> {
    let dir = if let Some(d) = std::env::var_os("PI_CODING_AGENT_SESSION_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("PI_CODING_AGENT_DIR") {
        PathBuf::from(d).join("sessions")
    } else if let Some(home) = std::env::var_os("HOME") {
        PathBuf::from(home).join(".pi/agent/sessions")
    } else {
        return Err("no PATH given and HOME is not set: name a session file or folder".into());
    };
    if !dir.is_dir() {
        return Err(format!(
            "no PATH given and pi's session archive {} does not exist \
             (set PI_CODING_AGENT_SESSION_DIR or PI_CODING_AGENT_DIR, or name a PATH)",
            dir.display()
        ));
    }
    Ok(dir)
}

/// Finds the session files under `paths`.
pub fn discover(paths: &[PathBuf]) -> Found {
    let mut found = Found::default();
    let mut candidates = Vec::new();
    let mut seen_dirs = HashSet::new();
    for p in paths {
        match fs::metadata(p) {
            Err(e) => found.failures.push((p.clone(), e.to_string())),
            Ok(m) if m.is_dir() => walk(p, &m, &mut seen_dirs, &mut candidates, &mut found),
            Ok(m) => candidates.push((p.clone(), Identity::of(&m))),
        }
    }
    // Path order (component by component), as byte order with the
    // separator below every other byte: one key per path, not a component
    // walk per comparison.
    candidates.sort_by_cached_key(|(p, _)| {
        use std::os::unix::ffi::OsStrExt;
        let mut k = p.as_os_str().as_bytes().to_vec();
        k.iter_mut().filter(|b| **b == b'/').for_each(|b| *b = 0);
        k
    });
    let mut seen_files = HashSet::new();
    for (path, id) in candidates {
        if seen_files.insert((id.dev, id.ino)) {
            found.files.push((path, id));
        }
    }
    found.failures.sort();
    found
}

fn walk(
    dir: &Path,
    meta: &fs::Metadata,
    seen: &mut HashSet<(u64, u64)>,
    out: &mut Vec<(PathBuf, Identity)>,
    found: &mut Found,
) {
    // A folder reached again (a symlink loop, or overlapping PATHs) is
    // not walked twice.
    if !seen.insert((meta.dev(), meta.ino())) {
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return found.failures.push((dir.to_path_buf(), e.to_string())),
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                found.failures.push((dir.to_path_buf(), e.to_string()));
                continue;
            }
        };
        let path = entry.path();
        let jsonl = path.extension().is_some_and(|e| e == "jsonl");
        let symlink = match entry.file_type() {
            // Other plain files are not even looked at.
            Ok(t) if t.is_file() && !jsonl => continue,
            Ok(t) => t.is_symlink(),
            Err(_) => true,
        };
        // Follow symlinks (a dangling one is not a session file); anything
        // else is looked up from its folder, not by its whole path.
        let m = if symlink {
            fs::metadata(&path)
        } else {
            entry.metadata()
        };
        let Ok(m) = m else { continue };
        if m.is_dir() {
            walk(&path, &m, seen, out, found);
        } else if m.is_file() && jsonl {
            out.push((path, Identity::of(&m)));
        }
    }
}
