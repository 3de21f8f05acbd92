//! Finding session files: PATHs, folders searched recursively for `*.jsonl`,
//! pi's own archive when no PATH is given.

use std::collections::HashSet;
use std::fs;
use std::os::unix::ffi::OsStrExt;
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
            Ok(m) if m.is_dir() => {
                let mut w = Walk::default();
                w.dir(p, &m, &mut seen_dirs);
                candidates.append(&mut w.files);
                found.failures.append(&mut w.failures);
            }
            Ok(m) => candidates.push((p.clone(), Identity::of(&m))),
        }
    }
    // A walk lists in path order already; several PATHs may not.
    if !candidates.is_sorted_by(|a, b| path_order(&a.0, &b.0).is_le()) {
        candidates.sort_by(|a, b| path_order(&a.0, &b.0));
    }
    let mut seen_files = HashSet::new();
    for (path, id) in candidates {
        if seen_files.insert((id.dev, id.ino)) {
            found.files.push((path, id));
        }
    }
    found.failures.sort();
    found
}

/// Path order (component by component): byte order with the separator
/// below every other byte.
fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let key = |c: &u8| if *c == b'/' { 0 } else { *c };
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    a.iter().map(key).cmp(b.iter().map(key))
}

/// What a walk found.
#[derive(Default)]
struct Walk {
    files: Vec<(PathBuf, Identity)>,
    failures: Vec<(PathBuf, String)>,
}

impl Walk {
    /// Walks `dir`, its entries in name order, so that files come out in
    /// path order and a file or folder reached twice keeps its first path
    /// in that order, whatever order the system lists them in.
    fn dir(&mut self, dir: &Path, meta: &fs::Metadata, seen: &mut HashSet<(u64, u64)>) {
        // A folder reached again (a symlink loop, or overlapping PATHs) is
        // not walked twice.
        if !seen.insert((meta.dev(), meta.ino())) {
            return;
        }
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => return self.failures.push((dir.to_path_buf(), e.to_string())),
        };
        let mut wanted = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    self.failures.push((dir.to_path_buf(), e.to_string()));
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
            wanted.push((entry, path, jsonl, symlink));
        }
        // Paths in one folder differ only in their names: byte order of the
        // paths is name order, and path order.
        wanted.sort_unstable_by(|a, b| a.1.as_os_str().as_bytes().cmp(b.1.as_os_str().as_bytes()));
        for (entry, path, jsonl, symlink) in wanted {
            // Follow symlinks (a dangling one is not a session file);
            // anything else is looked up from its folder, not by its whole
            // path.
            let m = if symlink {
                fs::metadata(&path)
            } else {
                entry.metadata()
            };
            let Ok(m) = m else { continue };
            if m.is_dir() {
                self.dir(&path, &m, seen);
            } else if m.is_file() && jsonl {
                self.files.push((path, Identity::of(&m)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Every session file once, under its first path in path order,
    /// through loops and links, whatever order the folders list in.
    #[test]
    fn lists_each_file_once_in_path_order() {
        let d = std::env::temp_dir().join(format!("mem-ingest-walk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        for p in ["a/x", "b", "c/y/z", "d", "e"] {
            fs::create_dir_all(d.join(p)).unwrap();
        }
        for f in [
            "a/1.jsonl",
            "a/x/2.jsonl",
            "b/3.jsonl",
            "c/y/z/4.jsonl",
            "e/5.jsonl",
            "top.jsonl",
        ] {
            fs::write(d.join(f), "{}\n").unwrap();
        }
        fs::write(d.join("b/notes.txt"), "not a session").unwrap();
        // A loop back to the root, a second path to a folder, a link to a
        // file, and a dangling link.
        symlink(&d, d.join("c/y/loop")).unwrap();
        symlink(d.join("a"), d.join("d/a-again")).unwrap();
        symlink(d.join("b/3.jsonl"), d.join("e/3-link.jsonl")).unwrap();
        symlink(d.join("gone"), d.join("e/dangling.jsonl")).unwrap();
        let rel = |f: &Found| -> Vec<String> {
            f.files
                .iter()
                .map(|(p, _)| p.strip_prefix(&d).unwrap().display().to_string())
                .collect()
        };
        // Path order puts a folder's files before its subfolders' ("a/1"
        // before "a/x/2": the separator sorts first); the folder reached
        // again through d/a-again, the loop and the link to b/3 add nothing.
        let one = discover(std::slice::from_ref(&d));
        assert_eq!(
            rel(&one),
            [
                "a/1.jsonl",
                "a/x/2.jsonl",
                "b/3.jsonl",
                "c/y/z/4.jsonl",
                "e/5.jsonl",
                "top.jsonl"
            ]
        );
        assert!(one.failures.is_empty(), "{:?}", one.failures);
        // Several PATHs, overlapping, listed first: the same files, each
        // still under its first path.
        let both = discover(&[d.join("e"), d.clone()]);
        assert_eq!(rel(&both), rel(&one));
        // A link that sorts before the folder it names: its path is first.
        symlink(d.join("c"), d.join("0-c")).unwrap();
        let one = discover(std::slice::from_ref(&d));
        assert_eq!(
            rel(&one),
            [
                "0-c/y/z/4.jsonl",
                "a/1.jsonl",
                "a/x/2.jsonl",
                "b/3.jsonl",
                "e/5.jsonl",
                "top.jsonl"
            ]
        );
        // A folder of 300 entries, with a subfolder, and a link to it that
        // sorts first.
        fs::create_dir_all(d.join("f/sub")).unwrap();
        for i in 0..150 {
            fs::write(d.join(format!("f/{i:03}.jsonl")), "{}\n").unwrap();
            fs::write(d.join(format!("f/{i:03}.txt")), "").unwrap();
        }
        fs::write(d.join("f/sub/s.jsonl"), "{}\n").unwrap();
        symlink(d.join("f/sub"), d.join("f/000-sub")).unwrap();
        let one = discover(std::slice::from_ref(&d));
        let f: Vec<String> = rel(&one)
            .into_iter()
            .filter(|p| p.starts_with("f/") || p.starts_with("0-c/"))
            .collect();
        assert_eq!(f.len(), 152);
        assert_eq!(
            f[..4],
            [
                "0-c/y/z/4.jsonl",
                "f/000-sub/s.jsonl",
                "f/000.jsonl",
                "f/001.jsonl"
            ]
        );
        assert_eq!(f[151], "f/149.jsonl");
        fs::remove_dir_all(&d).unwrap();
    }
}
