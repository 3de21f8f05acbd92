//! Shards: a run that takes only shard K of N of an archive, so that N runs
//! (on N machines, or N jobs of any job runner) share the work with no
//! coordinator, and together write exactly the records of one run.
//!
//! A file's shard is that of its lineage's root: everything deduplicated
//! together (a session, its forks, other files of the same session) is in
//! one shard, since deduplication never looks across shards. The root of a
//! session is found by following the parents its files' headers name
//! ([`crate::format::Format::parent`]) up to a session that names none, or
//! whose files are not found (in a cycle, the smallest lineage id of the
//! cycle). Every Claude Code session names the one lineage of all Claude
//! Code sessions (`claude:*`): a Claude Code archive is one shard's.
//!
//! A lineage keeps the root it was first given: a run with `--state` (or
//! a store) records the root of every session whose walk ends at a session
//! with a file that names no parent (or at a recorded root, or in a
//! cycle), this shard's files and every other shard's, since every shard
//! reads every header; and the next run takes a recorded root as it is,
//! and follows a new session's parents only up to a recorded one. Recorded
//! roots are never dropped. So a fork of a fork stays in its shard when
//! the fork between them goes, or when its file is unreadable or away for
//! a run. A walk that ends at a parent whose file is not found (yet) is not
//! recorded: shards that ran at different moments of a changing archive
//! agree again once they read the same one. Left as before: a session
//! whose parent's file comes only after it moves to its root's shard then,
//! and is emitted there too.
//!
//! The shard of a root is [`shard_of`]: FNV-1a (64 bits) of the root's
//! lineage id in UTF-8, modulo N. It depends on the headers only, never on
//! a path, so it is the same on every machine whatever the spelling of the
//! PATHs. A file whose header cannot be read (empty, unreadable, not a
//! session) is shard 0's: it gives no records, and its failure or skip is
//! reported once.

use std::collections::{BTreeMap, HashMap, HashSet};

/// Which share of an archive a run takes: shard `k` of `n` (`0 <= k < n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// This run's shard.
    pub k: u32,
    /// The number of shards.
    pub n: u32,
}

impl Shard {
    /// The whole archive: shard 0 of 1.
    pub const ALL: Shard = Shard { k: 0, n: 1 };

    /// Parses `K/N`.
    ///
    /// # Errors
    /// Not two whole numbers with `0 <= K < N`: why.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not K/N"))?;
        let (k, n): (u32, u32) = match (k.parse(), n.parse()) {
            (Ok(k), Ok(n)) => (k, n),
            _ => return Err(format!("{s:?} is not K/N (two whole numbers)")),
        };
        if n == 0 || k >= n {
            return Err(format!("{s:?}: K must be at least 0 and less than N"));
        }
        Ok(Shard { k, n })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

// The parsing crate's, so that a database's reader shards its rows as
// the engine shards files.
pub use mem_ingest_parse::rows::{fnv1a, shard_of};

/// The root of lineage `id`, given each id's parent, the ids that have a
/// file and the roots recorded at earlier runs: a recorded root as it is,
/// else the parents followed up to an id that names none or has a recorded
/// root. Settled (to be recorded) when the walk ends at a recorded root, in
/// a cycle, or at an id with a file that names no parent; not when it ends
/// at a parent whose file is not found (yet): that root is taken for this
/// run only, so shards that saw the archive at different moments agree
/// again once they see the same one.
pub(crate) fn root_of(
    id: &str,
    parent: &HashMap<String, String>,
    has_file: &HashSet<&str>,
    recorded: &BTreeMap<String, String>,
) -> (String, bool) {
    let mut walk: Vec<&str> = vec![id];
    let mut at = id;
    loop {
        if let Some(r) = recorded.get(at) {
            return (r.clone(), true);
        }
        let Some(p) = parent.get(at) else {
            return (at.to_owned(), has_file.contains(at));
        };
        if let Some(i) = walk.iter().position(|w| *w == p.as_str()) {
            // A cycle: its smallest id.
            return (
                walk[i..].iter().min().copied().unwrap_or(at).to_owned(),
                true,
            );
        }
        walk.push(p);
        at = p;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse() {
        assert_eq!(Shard::parse("0/1"), Ok(Shard { k: 0, n: 1 }));
        assert_eq!(Shard::parse("3/4"), Ok(Shard { k: 3, n: 4 }));
        for bad in ["4/4", "0/0", "1", "a/2", "-1/2", "1/2/3", ""] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fnv1a_vectors() {
        // The reference vectors of FNV-1a 64.
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn roots_follow_parents() {
        let mut parent = HashMap::new();
        parent.insert("fork2".to_owned(), "fork1".to_owned());
        parent.insert("fork1".to_owned(), "root".to_owned());
        parent.insert("x".to_owned(), "y".to_owned());
        parent.insert("y".to_owned(), "x".to_owned());
        let files: HashSet<&str> = ["fork2", "fork1", "root", "x", "y"].into();
        let none = BTreeMap::new();
        let root = |id, parent: &HashMap<String, String>, files, recorded| {
            let (r, settled) = root_of(id, parent, files, recorded);
            (r, settled)
        };
        let settled = |r: &str| (r.to_owned(), true);
        assert_eq!(root("fork2", &parent, &files, &none), settled("root"));
        assert_eq!(root("root", &parent, &files, &none), settled("root"));
        assert_eq!(root("x", &parent, &files, &none), settled("x"));
        assert_eq!(root("y", &parent, &files, &none), settled("x"));
        // fork1's file went: fork2's walk ends at a parent with no file,
        // not settled; with the root recorded before, fork2 keeps it, and a
        // new fork of fork2 follows it up to that one.
        parent.remove("fork1");
        parent.insert("fork3".to_owned(), "fork2".to_owned());
        let files: HashSet<&str> = ["fork3", "fork2", "root"].into();
        assert_eq!(
            root("fork2", &parent, &files, &none),
            ("fork1".to_owned(), false)
        );
        let recorded: BTreeMap<String, String> = [("fork2", "root"), ("fork1", "root")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        assert_eq!(root("fork2", &parent, &files, &recorded), settled("root"));
        assert_eq!(root("fork3", &parent, &files, &recorded), settled("root"));
        // A recorded root is kept even when a parent of it appears.
        parent.insert("fork1".to_owned(), "root".to_owned());
        parent.insert("root".to_owned(), "older".to_owned());
        let recorded: BTreeMap<String, String> = [("root", "root")]
            .into_iter()
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .collect();
        assert_eq!(root("fork3", &parent, &files, &recorded), settled("root"));
        assert_eq!(
            root("fork3", &parent, &files, &none),
            ("older".to_owned(), false)
        );
    }
}
