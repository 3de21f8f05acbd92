//! A database's sessions as lineages, as the other agents' files are: a
//! root session and its descendants (subagent children, forks). A
//! session's parent is what its database says (OpenCode's
//! `session.parent_id`, 2.x's `fork_session_id`; Goose's
//! `parent_session_id`) or, for an OpenCode 1.x fork, which names none,
//! the session it was copied from (see [`Lineages::opencode`]). The
//! lineage gives each record its `parent_session` and, under `--shard
//! K/N`, the shard of the session's rows: its root's
//! ([`mem_ingest_parse::rows::shard_of`] of `<format>:<root id>`), so
//! that a fork's copies, deduplicated against its source's, are read by
//! the same shard.

use std::collections::HashMap;

use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::rows::shard_of;
use rusqlite::Connection;

/// The parent of every session of one database known so far, by session
/// id (`None`: a root), and the shard to read.
pub(crate) struct Lineages {
    format: &'static str,
    parent: HashMap<String, Option<String>>,
    shard: Option<(u32, u32)>,
    /// Each session's root and whether it is the shard's, as found.
    roots: HashMap<String, (String, bool)>,
}

/// Whether `conn`'s table `table` has the column `column`.
fn has_column(conn: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        [table, column],
        |r| r.get(0),
    )
}

/// A column's text, or none (NULL, another type: SQLite keeps any type
/// in any column).
fn text(r: &rusqlite::Row<'_>, i: usize) -> Option<String> {
    match r.get_ref(i) {
        Ok(rusqlite::types::ValueRef::Text(t)) => std::str::from_utf8(t).ok().map(str::to_owned),
        _ => None,
    }
}

impl Lineages {
    /// No session known yet, of format `format` (the lineage ids'
    /// namespace: `opencode`, `goose`).
    pub(crate) fn new(format: &'static str) -> Lineages {
        Lineages {
            format,
            parent: HashMap::new(),
            shard: None,
            roots: HashMap::new(),
        }
    }

    /// Reads only shard `k` of `n`.
    pub(crate) fn only_shard(&mut self, k: u32, n: u32) {
        self.shard = (n > 1).then_some((k, n));
    }

    /// Whether a session's parent or shard is needed at all: records are
    /// built (their `parent_session`) or a shard is read.
    pub(crate) fn needed(&self, records: bool) -> bool {
        records || self.shard.is_some()
    }

    /// Whether every session of `ids` is known.
    pub(crate) fn knows<'s>(&self, mut ids: impl Iterator<Item = &'s str>) -> bool {
        ids.all(|s| self.parent.contains_key(s))
    }

    /// Takes the sessions read (all of the database's, in one statement),
    /// then marks `ids` known (a session no longer in the database, or
    /// not there yet: a root of its own).
    pub(crate) fn learn<'s>(
        &mut self,
        found: Vec<(String, Option<String>)>,
        ids: impl Iterator<Item = &'s str>,
    ) {
        self.parent.extend(found);
        for id in ids {
            self.parent.entry(id.to_owned()).or_insert(None);
        }
        self.roots.clear();
    }

    /// OpenCode's sessions and their parents: `parent_id` (a subagent's
    /// child session), else 2.x's `fork_session_id`, else, for a 1.x fork
    /// (`/fork` copies a session's first messages under new ids and names
    /// no parent), the earliest session created before it whose first
    /// message (by `time_created`, then id) has the same `data`, byte for
    /// byte: a fork's first message is its source's, copied (its
    /// `time.created` in it, so two sessions started apart never match).
    ///
    /// # Errors
    /// A statement failed (a busy database).
    pub(crate) fn opencode(c: &Connection) -> rusqlite::Result<Vec<(String, Option<String>)>> {
        // Columns read when the table has them (a database of another
        // version or a damaged one may not): NULL, the rowid instead.
        let col = |table: &str, name: &str, alias: &str, or: &str| -> rusqlite::Result<String> {
            Ok(if has_column(c, table, name)? {
                format!("{alias}.{name}")
            } else {
                or.to_owned()
            })
        };
        let parent = col("session", "parent_id", "s", "NULL")?;
        let fork = col("session", "fork_session_id", "s", "NULL")?;
        let created = col("session", "time_created", "s", "s.rowid")?;
        let m_created = col("message", "time_created", "m", "m.rowid")?;
        let sql = format!(
            "SELECT s.id, {parent}, {fork}, (SELECT m.data FROM message m \
             WHERE m.session_id = s.id ORDER BY {m_created}, m.id LIMIT 1) \
             FROM session s ORDER BY {created}, s.id"
        );
        let mut st = c.prepare(&sql)?;
        let mut rows = st.query([])?;
        let mut first: HashMap<u64, String> = HashMap::new();
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let Some(id) = text(r, 0) else { continue };
            // An empty parent (a hostile or damaged row) names none, as
            // the JSON tree's `parentID: ""` does (opencode/tree.rs): the
            // session's root is then the same in both stores (`--shard`).
            let some = |p: Option<String>| p.filter(|p| !p.is_empty());
            let named = some(text(r, 1))
                .or_else(|| some(text(r, 2)))
                .filter(|p| *p != id);
            let copied = text(r, 3).and_then(|data| {
                let h = fingerprint(&[b"opencode-first", data.as_bytes()]);
                match first.get(&h) {
                    Some(source) => Some(source.clone()),
                    None => {
                        first.insert(h, id.clone());
                        None
                    }
                }
            });
            out.push((id.clone(), named.or(copied)));
        }
        Ok(out)
    }

    /// Goose's sessions and their `parent_session_id` (schema 15 and
    /// later; none before: every session a root).
    ///
    /// # Errors
    /// A statement failed (a busy database).
    pub(crate) fn goose(c: &Connection) -> rusqlite::Result<Vec<(String, Option<String>)>> {
        if !has_column(c, "sessions", "parent_session_id")? {
            return Ok(Vec::new());
        }
        let mut st = c.prepare("SELECT id, parent_session_id FROM sessions")?;
        let mut rows = st.query([])?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            if let Some(id) = text(r, 0) {
                let p = text(r, 1).filter(|p| !p.is_empty() && *p != id);
                out.push((id, p));
            }
        }
        Ok(out)
    }

    /// The lineage id of session `id`'s parent (`<format>:<parent id>`),
    /// when it has one.
    pub(crate) fn parent_session(&self, id: &str) -> Option<String> {
        self.parent
            .get(id)?
            .as_ref()
            .map(|p| format!("{}:{p}", self.format))
    }

    /// Whether session `id`'s rows are the shard's (always, unsharded).
    pub(crate) fn in_shard(&mut self, id: &str) -> bool {
        let Some((k, n)) = self.shard else {
            return true;
        };
        if let Some((_, ours)) = self.roots.get(id) {
            return *ours;
        }
        let root = self.root(id);
        let ours = shard_of(&format!("{}:{root}", self.format), n) == k;
        self.roots.insert(id.to_owned(), (root, ours));
        ours
    }

    /// Session `id`'s root: its parents followed up to a session that
    /// names none or is not in the database (that parent's id); in a
    /// cycle, its smallest id (as the engine's lineages of files).
    pub(crate) fn root(&self, id: &str) -> String {
        let mut seen: Vec<&str> = vec![id];
        let mut at = id;
        loop {
            let Some(Some(p)) = self.parent.get(at) else {
                return at.to_owned();
            };
            if let Some(i) = seen.iter().position(|s| *s == p.as_str()) {
                return seen[i..].iter().min().copied().unwrap_or(at).to_owned();
            }
            seen.push(p);
            at = p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lineages(pairs: &[(&str, Option<&str>)]) -> Lineages {
        let mut l = Lineages::new("opencode");
        l.learn(
            pairs
                .iter()
                .map(|(s, p)| ((*s).to_owned(), p.map(str::to_owned)))
                .collect(),
            std::iter::empty(),
        );
        l
    }

    #[test]
    fn roots_follow_parents_and_stop_at_a_missing_one_or_a_cycle() {
        let l = lineages(&[
            ("a", None),
            ("b", Some("a")),
            ("c", Some("b")),
            ("d", Some("gone")),
            ("x", Some("y")),
            ("y", Some("x")),
        ]);
        assert_eq!(l.root("c"), "a");
        assert_eq!(l.root("a"), "a");
        assert_eq!(l.root("d"), "gone");
        assert_eq!(l.root("x"), "x");
        assert_eq!(l.root("y"), "x");
        assert_eq!(l.root("unknown"), "unknown");
        assert_eq!(l.parent_session("c").as_deref(), Some("opencode:b"));
        assert_eq!(l.parent_session("a"), None);
    }

    #[test]
    fn a_shard_takes_whole_lineages() {
        let mut l = lineages(&[("a", None), ("b", Some("a")), ("c", Some("b")), ("z", None)]);
        l.only_shard(0, 2);
        let a = shard_of("opencode:a", 2) == 0;
        let z = shard_of("opencode:z", 2) == 0;
        assert_eq!([l.in_shard("a"), l.in_shard("b"), l.in_shard("c")], [a; 3]);
        assert_eq!(l.in_shard("z"), z);
        let mut other = lineages(&[("a", None), ("b", Some("a")), ("c", Some("b")), ("z", None)]);
        other.only_shard(1, 2);
        for s in ["a", "b", "c", "z"] {
            assert_ne!(l.in_shard(s), other.in_shard(s), "{s} in exactly one shard");
        }
        // Unsharded: every session.
        assert!(lineages(&[("a", None)]).in_shard("a"));
    }

    #[test]
    fn opencode_forks_are_found_by_their_copied_first_message() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE session (id TEXT PRIMARY KEY, parent_id TEXT, time_created INTEGER);
             CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
                                   data TEXT);
             INSERT INTO session VALUES ('ses_a', NULL, 1), ('ses_child', 'ses_a', 2),
                                        ('ses_fork', NULL, 3), ('ses_fork2', NULL, 4),
                                        ('ses_other', NULL, 5), ('ses_empty', NULL, 6);
             INSERT INTO message VALUES
               ('m1', 'ses_a', 10, '{\"role\":\"user\",\"time\":{\"created\":10}}'),
               ('m2', 'ses_a', 11, '{\"role\":\"assistant\",\"time\":{\"created\":11}}'),
               ('m3', 'ses_child', 12, '{\"role\":\"user\",\"time\":{\"created\":12}}'),
               ('m4', 'ses_fork', 20, '{\"role\":\"user\",\"time\":{\"created\":10}}'),
               ('m5', 'ses_fork2', 21, '{\"role\":\"user\",\"time\":{\"created\":10}}'),
               ('m6', 'ses_other', 22, '{\"role\":\"user\",\"time\":{\"created\":22}}');",
        )
        .unwrap();
        let found = Lineages::opencode(&c).unwrap();
        let got: Vec<(&str, Option<&str>)> = found
            .iter()
            .map(|(s, p)| (s.as_str(), p.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("ses_a", None),
                ("ses_child", Some("ses_a")),
                ("ses_fork", Some("ses_a")),
                ("ses_fork2", Some("ses_a")),
                ("ses_other", None),
                ("ses_empty", None),
            ]
        );
        // 2.x names the fork's source: taken.
        c.execute_batch(
            "ALTER TABLE session ADD COLUMN fork_session_id TEXT;
             UPDATE session SET fork_session_id = 'ses_child' WHERE id = 'ses_other';",
        )
        .unwrap();
        let found = Lineages::opencode(&c).unwrap();
        assert_eq!(found[4], ("ses_other".into(), Some("ses_child".into())));
        // An empty parent names none: the fork's source found by its first
        // message, as with none.
        c.execute_batch("UPDATE session SET parent_id = '' WHERE id = 'ses_fork2';")
            .unwrap();
        let found = Lineages::opencode(&c).unwrap();
        assert_eq!(found[3], ("ses_fork2".into(), Some("ses_a".into())));

        // A database without the columns (another version, a damaged
        // one): forks by the first message in rowid order, no failure.
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT);
             CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, data TEXT);
             INSERT INTO session VALUES ('s1', '/p'), ('s2', '/p'), ('s3', '/p');
             INSERT INTO message VALUES ('m1', 's1', 'a'), ('m2', 's1', 'b'), ('m3', 's2', 'c'),
                                        ('m4', 's3', 'a');",
        )
        .unwrap();
        let found = Lineages::opencode(&c).unwrap();
        assert_eq!(
            found,
            [
                ("s1".to_owned(), None),
                ("s2".to_owned(), None),
                ("s3".to_owned(), Some("s1".to_owned()))
            ]
        );
    }
}
