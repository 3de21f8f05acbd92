//! Finding session files: PATHs, folders searched recursively for the
//! files a format claims by name (pi: `*.jsonl`). A PATH is followed when
//! it is a link; a link met while walking a folder is followed only when
//! [`Links::Follow`] says so (ripgrep's convention).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::checkpoint::stamp::Identity;
use crate::sys::os_bytes;

/// What discovery found.
#[derive(Debug, Default)]
pub struct Found {
    /// Session files in sorted path order, each read once (a file reached
    /// twice through links or overlapping PATHs keeps its first path), with
    /// their identity and size when found.
    pub files: Vec<(PathBuf, Identity)>,
    /// PATHs (or folders below them) that could not be read.
    pub failures: Vec<(PathBuf, String)>,
    /// Every folder walked, by device and inode: a `*.jsonl` file in one of
    /// them is a session file to this listing, even one created after it.
    pub dirs: Seen,
}

/// Whether a file met in a folder is a session file (by its name).
pub type Wanted = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// What a walk does with a symbolic link it meets in a folder. A PATH
/// itself (one named, or an agent's default archive) is always followed.
/// A checkpoint records it ([`super::OutputOptions::links`]): a store's
/// options as `"skip"` or `"follow"`, a state file through its layout's
/// own mirror.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Links {
    /// Left alone (the default): a link inside an archive that leads out
    /// of it (`passwd.jsonl -> /etc/passwd`) is not read.
    #[default]
    Skip,
    /// Followed, to a file or a folder (`--follow-links`); loops are
    /// survived and a file reached twice is read once.
    Follow,
}

/// Finds the session files under `paths`, the folders of a PATH walked on
/// up to `threads` threads, links met in them treated as `links` says.
pub fn discover(paths: &[PathBuf], threads: usize, wanted: &Wanted, links: Links) -> Found {
    let mut found = Found::default();
    let mut candidates = Vec::new();
    let mut unreadable = Vec::new();
    for p in paths {
        match fs::metadata(p) {
            Err(e) => found.failures.push((p.clone(), e.to_string())),
            Ok(m) if m.is_dir() => {
                // Each PATH is walked on its own: with overlapping PATHs,
                // what each finds does not depend on their order (the sort
                // below keeps a file's first path).
                let mut w = Walk::new(wanted, links);
                let mut seen = Seen::new();
                if let Some(items) = w.list(p, &m, &mut seen) {
                    w.items(items, &mut seen, threads);
                }
                candidates.append(&mut w.files);
                unreadable.append(&mut w.failures);
                found.dirs.extend(seen);
            }
            Ok(m) if crate::sys::device_kind(&m.file_type()).is_some() => {
                // `/dev/zero` has no end: it is never opened.
                let kind = crate::sys::device_kind(&m.file_type()).unwrap_or_default();
                let why = format!("a {kind} device, not a session file or folder");
                found.failures.push((p.clone(), why));
            }
            Ok(m) => candidates.push((p.clone(), Identity::of(&m))),
        }
    }
    // A folder that could not be read is reported once, under its first
    // path (walks may each have reached it).
    unreadable.sort_by(|a, b| path_order(&a.0, &b.0));
    let mut failed_dirs = HashSet::new();
    for (path, e, dir) in unreadable {
        if failed_dirs.insert(dir) {
            found.failures.push((path, e));
        }
    }
    // One walk lists in path order already; several PATHs may not.
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

/// Whether `path` is a pipe (a FIFO, `/dev/stdin` or `<(...)` fed by one,
/// a socket): read once, as a stream, never in parts, never again.
pub fn is_stream(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| crate::sys::is_fifo_or_socket(&m.file_type()))
}

/// Refuses the first PATH that is a pipe ([`is_stream`]), for a run that
/// keeps a checkpoint or follows the archive: a stream has no offsets to
/// resume from and cannot be read again. Nothing is opened.
///
/// # Errors
/// [`ErrorKind::StreamNotResumable`](crate::ErrorKind::StreamNotResumable),
/// naming the PATH as given.
pub fn refuse_streams(paths: &[PathBuf]) -> Result<(), crate::Error> {
    match paths.iter().find(|p| is_stream(p)) {
        Some(p) => Err(crate::Error::new(p, crate::ErrorKind::StreamNotResumable)),
        None => Ok(()),
    }
}

/// Path order (component by component): byte order with the separator
/// below every other byte.
fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let key = |c: &u8| if *c == b'/' { 0 } else { *c };
    let (a, b) = (os_bytes(a.as_os_str()), os_bytes(b.as_os_str()));
    a.iter().map(key).cmp(b.iter().map(key))
}

/// Folders, by device and inode.
pub type Seen = HashSet<(u64, u64)>;

/// What a walk found.
struct Walk {
    wanted: Wanted,
    links: Links,
    files: Vec<(PathBuf, Identity)>,
    /// Folders that could not be read, with their identity.
    failures: Vec<(PathBuf, String, (u64, u64))>,
}

/// An entry of a folder, looked up.
enum Item {
    File(PathBuf, Identity),
    Dir(PathBuf, fs::Metadata),
}

impl Walk {
    fn new(wanted: &Wanted, links: Links) -> Walk {
        Walk {
            wanted: wanted.clone(),
            links,
            files: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The session files and subfolders of `dir`, in name order, looked up;
    /// `None` for a folder already seen (a symlink loop, or a folder reached
    /// again). Name order makes a walk list files in path order, and a file
    /// or folder reached twice keep its first path in that order, whatever
    /// order the system lists folders in.
    fn list(&mut self, dir: &Path, meta: &fs::Metadata, seen: &mut Seen) -> Option<Vec<Item>> {
        let id = crate::sys::file_id(meta);
        if !seen.insert(id) {
            return None;
        }
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) => {
                self.failures.push((dir.to_path_buf(), e.to_string(), id));
                return None;
            }
        };
        let mut wanted = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    self.failures.push((dir.to_path_buf(), e.to_string(), id));
                    continue;
                }
            };
            let path = entry.path();
            let jsonl = (self.wanted)(&path);
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
        wanted.sort_unstable_by(|a, b| os_bytes(a.1.as_os_str()).cmp(os_bytes(b.1.as_os_str())));
        let mut items = Vec::new();
        for (entry, path, jsonl, symlink) in wanted {
            // Follow symlinks when asked (a dangling one is not a session
            // file; one not followed is neither a file nor a folder);
            // anything else is looked up from its folder, not by its whole
            // path.
            let m = match (symlink, self.links) {
                (true, Links::Follow) => fs::metadata(&path),
                (true, Links::Skip) => fs::symlink_metadata(&path),
                (false, _) => entry.metadata(),
            };
            let Ok(m) = m else { continue };
            if m.is_dir() {
                items.push(Item::Dir(path, m));
            } else if m.is_file() && jsonl {
                items.push(Item::File(path, Identity::of(&m)));
            }
        }
        Some(items)
    }

    /// Walks `items` of a folder and all below them, depth first in name
    /// order: with a stack, not recursion, so no depth of folders runs a
    /// thread out of stack.
    fn walk(&mut self, items: Vec<Item>, seen: &mut Seen) {
        let mut stack: Vec<Item> = items.into_iter().rev().collect();
        while let Some(item) = stack.pop() {
            match item {
                Item::File(path, id) => self.files.push((path, id)),
                Item::Dir(path, m) => {
                    if let Some(items) = self.list(&path, &m, seen) {
                        stack.extend(items.into_iter().rev());
                    }
                }
            }
        }
    }

    /// Walks the `items` of a PATH's folder. With `threads` > 1, its
    /// subfolders are walked on that many threads, each with its own
    /// record of the folders seen (starting from `seen`), so that what
    /// each finds does not depend on which thread walked what before: a
    /// folder reached from two subfolders is then walked twice, and its
    /// files, found under two paths, keep the first one when the listing
    /// is sorted and its duplicates dropped, as one walk in path order
    /// would have found them.
    fn items(&mut self, mut items: Vec<Item>, seen: &mut Seen, threads: usize) {
        // A folder alone (a Codex home's `sessions/`): the threads split
        // the folders below it (its years), as one walk would list them.
        if threads >= 2 {
            while let [Item::Dir(path, m)] = &items[..] {
                let (path, m) = (path.clone(), m.clone());
                match self.list(&path, &m, seen) {
                    Some(below) => items = below,
                    None => return,
                }
            }
        }
        let dirs = items.iter().filter(|i| matches!(i, Item::Dir(..))).count();
        if threads < 2 || dirs < 2 {
            return self.walk(items, seen);
        }
        // One walk per subfolder, taken in turn by the threads; results in
        // entry order.
        let next = AtomicUsize::new(0);
        let walks: Vec<Mutex<Option<(Walk, Seen)>>> =
            items.iter().map(|_| Mutex::new(None)).collect();
        let start: &Seen = seen;
        std::thread::scope(|s| {
            let walker = || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { return };
                if let Item::Dir(path, m) = item {
                    let mut w = Walk::new(&self.wanted, self.links);
                    let mut own = start.clone();
                    if let Some(below) = w.list(path, m, &mut own) {
                        w.walk(below, &mut own);
                    }
                    *walks[i].lock().unwrap_or_else(|e| e.into_inner()) = Some((w, own));
                }
            };
            for _ in 1..threads.min(dirs) {
                s.spawn(walker);
            }
            walker();
        });
        for (item, walk) in items.into_iter().zip(walks) {
            match item {
                Item::File(path, id) => self.files.push((path, id)),
                Item::Dir(..) => {
                    let walk = walk.into_inner().unwrap_or_else(|e| e.into_inner());
                    if let Some((mut w, own)) = walk {
                        self.files.append(&mut w.files);
                        self.failures.append(&mut w.failures);
                        seen.extend(own);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::symlink;

    fn jsonl() -> Wanted {
        Arc::new(|p: &Path| p.extension().is_some_and(|e| e == "jsonl"))
    }

    /// The files found, as paths below `dir`.
    fn relative(dir: &Path, found: &Found) -> Vec<String> {
        found
            .files
            .iter()
            .map(|(p, _)| p.strip_prefix(dir).unwrap().display().to_string())
            .collect()
    }

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
        let rel = |f: &Found| relative(&d, f);
        // Path order puts a folder's files before its subfolders' ("a/1"
        // before "a/x/2": the separator sorts first); the folder reached
        // again through d/a-again, the loop and the link to b/3 add nothing.
        let one = discover(std::slice::from_ref(&d), 1, &jsonl(), Links::Follow);
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
        let both = discover(&[d.join("e"), d.clone()], 2, &jsonl(), Links::Follow);
        assert_eq!(rel(&both), rel(&one));
        // A link that sorts before the folder it names: its path is first.
        symlink(d.join("c"), d.join("0-c")).unwrap();
        let one = discover(std::slice::from_ref(&d), 1, &jsonl(), Links::Follow);
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
        // Links not followed: each folder under its own path only, the
        // link to a file and the dangling one not read.
        let skip = discover(std::slice::from_ref(&d), 1, &jsonl(), Links::Skip);
        assert_eq!(
            rel(&skip),
            [
                "a/1.jsonl",
                "a/x/2.jsonl",
                "b/3.jsonl",
                "c/y/z/4.jsonl",
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
        let one = discover(std::slice::from_ref(&d), 1, &jsonl(), Links::Follow);
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
        // On several threads: the same, though folders reached from two
        // subfolders are walked by each.
        for threads in [2, 3, 8] {
            let many = discover(std::slice::from_ref(&d), threads, &jsonl(), Links::Follow);
            assert_eq!(rel(&many), rel(&one), "{threads} threads");
            assert_eq!(
                many.files.iter().map(|(_, id)| *id).collect::<Vec<_>>(),
                one.files.iter().map(|(_, id)| *id).collect::<Vec<_>>()
            );
        }
        // Overlapping PATHs in either order: the same listing.
        let ab = discover(&[d.join("a"), d.clone()], 2, &jsonl(), Links::Follow);
        let ba = discover(&[d.clone(), d.join("a")], 2, &jsonl(), Links::Follow);
        assert_eq!(rel(&ab), rel(&one));
        assert_eq!(rel(&ba), rel(&one));
        // A folder holding one folder (as a Codex home holds `sessions/`):
        // the threads split the folders below that one, and list the same.
        let wrap = d.join("g/sessions");
        fs::create_dir_all(&wrap).unwrap();
        symlink(&d, wrap.join("all")).unwrap();
        fs::create_dir_all(wrap.join("2026/01")).unwrap();
        fs::write(wrap.join("2026/01/r.jsonl"), "{}\n").unwrap();
        let alone = discover(&[d.join("g")], 1, &jsonl(), Links::Follow);
        // The one file below it, then every file of the tree through the
        // link, the tree's own loop back to it met once more.
        assert_eq!(alone.files.len(), 158);
        assert_eq!(
            alone
                .files
                .last()
                .map(|(p, _)| p.strip_prefix(&d).unwrap().to_owned()),
            Some(PathBuf::from("g/sessions/all/top.jsonl"))
        );
        for threads in [2, 3] {
            let many = discover(&[d.join("g")], threads, &jsonl(), Links::Follow);
            assert_eq!(rel(&many), rel(&alone), "{threads} threads");
        }
        fs::remove_dir_all(&d).unwrap();
    }

    /// Overlapping PATHs where one reaches the other's files through a
    /// link: each file keeps its first path in path order, whichever PATH
    /// comes first.
    #[test]
    fn overlapping_paths_in_any_order() {
        let d = std::env::temp_dir().join(format!("mem-ingest-overlap-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join("b")).unwrap();
        fs::write(d.join("b/3.jsonl"), "{}\n").unwrap();
        symlink(d.join("b"), d.join("a")).unwrap();
        let rel = |f: &Found| relative(&d, f);
        for threads in [1, 2] {
            assert_eq!(
                rel(&discover(
                    std::slice::from_ref(&d),
                    threads,
                    &jsonl(),
                    Links::Follow
                )),
                ["a/3.jsonl"]
            );
            assert_eq!(
                rel(&discover(
                    &[d.join("b"), d.clone()],
                    threads,
                    &jsonl(),
                    Links::Follow
                )),
                ["a/3.jsonl"]
            );
            assert_eq!(
                rel(&discover(
                    &[d.clone(), d.join("b")],
                    threads,
                    &jsonl(),
                    Links::Follow
                )),
                ["a/3.jsonl"]
            );
        }
        fs::remove_dir_all(&d).unwrap();
    }

    /// Folders nested deeper than a thread's stack would take recursion
    /// through: the walk keeps its own stack.
    #[test]
    fn deep_folders() {
        let d = std::env::temp_dir().join(format!("mem-ingest-deep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let mut deep = d.join("top");
        for _ in 0..1500 {
            deep.push("d");
        }
        fs::create_dir_all(&deep).unwrap();
        fs::write(deep.join("x.jsonl"), "{}\n").unwrap();
        fs::write(d.join("top/y.jsonl"), "{}\n").unwrap();
        for threads in [1, 2] {
            // On a thread with a small stack (64 KiB), as the listing is.
            let paths = [d.clone()];
            let found = std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || discover(&paths, threads, &jsonl(), Links::Follow))
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(found.files.len(), 2, "{threads} threads");
            assert_eq!(found.files[0].0, deep.join("x.jsonl"));
            assert_eq!(found.files[1].0, d.join("top/y.jsonl"));
            assert!(found.failures.is_empty(), "{:?}", found.failures);
        }
        fs::remove_dir_all(&d).unwrap();
    }
}
