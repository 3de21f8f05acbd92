//! The checks behind the database fuzz targets `opencode`, `goose` and
//! `cursor`: the JSON (and the other columns) an agent keeps in its
//! database's rows, from the fuzzer's input, read by the real reader
//! (`mem_ingest_db`) end to end through the engine (`Archive::backfill`
//! into an NDJSON file appended to, with a checkpoint), as a user's
//! `backfill --state` reads it.
//!
//! Each target's input is one or two versions of the database's rows (the
//! bytes before `\n--\n` and those after): the database is built with the
//! agent's schema (the columns of `../shared/samples/<agent>/make_fixture.py`)
//! on a tmpfs (`/dev/shm` when there is one) in WAL mode, its writer's
//! connection kept open while the reader reads (as the agent keeps it),
//! with no automatic checkpoint, so that the database file and its `-wal`
//! change only by the writer's hand. A version is lines, each a tag byte
//! then a value (see [`check_opencode`], [`check_goose`],
//! [`check_cursor`]); a value is a column's text as it is (any bytes, not
//! UTF-8 included), or after a type byte: `\x01` NULL, `\x02` a BLOB of the
//! bytes, `\x03` an integer, `\x04` a real. Columns of INTEGER affinity
//! (Goose's tokens and times) turn a numeric text into a number, as SQLite
//! does for the agent: huge numbers become reals.
//!
//! The first version is read from an empty checkpoint; the second is
//! written (rows updated in place, deleted, inserted, as the agent writes)
//! and read resumed from that checkpoint; then the database is read once
//! more with nothing changed. Every run:
//! - completes, with no failure of the database (a row of any content or
//!   type is a record, a pending message or a counted skip, never a batch
//!   or a database failed);
//! - writes only lines that read back as JSON objects with a string `key`,
//!   as many as it says it wrote, and no key that any run before wrote
//!   (nothing doubled across the resumed runs);
//! - locates each skip at a row (line >= 1); in the first run, each row the
//!   reader cannot read (its JSON column not text, not UTF-8, not JSON)
//!   is a skip at its rowid;
//! - leaves the database file and its `-wal` byte for byte as they were;
//! - the last run, with nothing changed, writes nothing.
//!
//! Cursor's stores also hold secrets in tables and keys the reader must
//! never read (the global `ItemTable`, other keys of a workspace's, a
//! composer's encryption-key fields): each holds a marker the input cannot
//! know (drawn per process), which no output line and no checkpoint may
//! hold.
//!
//! This file is its own module: the targets include it with `#[path]`,
//! and `crates/mem-ingest-db/tests/fuzz_db.rs` includes it too, so that a
//! saved input replays on stable `cargo test` through the same code.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mem_ingest::archive::{Archive, Summary};
use mem_ingest::format::Format;
use mem_ingest::sink::NdjsonFile;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, ToSql};

/// What separates the two versions of the database in an input.
pub const REWRITE: &[u8] = b"\n--\n";

/// Rows (lines) of a version read at most: each input stays fast.
pub const MAX_ROWS: usize = 40;

/// A column's value, from the input.
#[derive(Debug, Clone, PartialEq)]
pub enum Col {
    /// SQL NULL.
    Null,
    /// A BLOB.
    Blob(Vec<u8>),
    /// An integer.
    Int(i64),
    /// A real.
    Real(f64),
    /// Text, as it is (not UTF-8 too).
    Text(Vec<u8>),
}

impl ToSql for Col {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Col::Null => ValueRef::Null,
            Col::Blob(b) => ValueRef::Blob(b),
            Col::Int(i) => ValueRef::Integer(*i),
            Col::Real(r) => ValueRef::Real(*r),
            Col::Text(t) => ValueRef::Text(t),
        }))
    }
}

/// A value: the text as it is, or a type byte and its bytes.
pub fn col(v: &[u8]) -> Col {
    let num = |b: &[u8]| String::from_utf8_lossy(b).trim().to_owned();
    match v.split_first() {
        Some((1, _)) => Col::Null,
        Some((2, rest)) => Col::Blob(rest.to_vec()),
        Some((3, rest)) => Col::Int(num(rest).parse::<i64>().unwrap_or(i64::MAX)),
        Some((4, rest)) => Col::Real(num(rest).parse::<f64>().unwrap_or(f64::MAX)),
        _ => Col::Text(v.to_vec()),
    }
}

/// The input's versions: the bytes before [`REWRITE`], and those after.
pub fn versions(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    match data.windows(REWRITE.len()).position(|w| w == REWRITE) {
        Some(i) => (&data[..i], Some(&data[i + REWRITE.len()..])),
        None => (data, None),
    }
}

/// A version's lines, each its tag and value (blank lines left out), at
/// most [`MAX_ROWS`].
pub fn lines(v: &[u8]) -> Vec<(u8, &[u8])> {
    v.split(|&b| b == b'\n')
        .filter_map(|l| l.split_first().map(|(t, r)| (*t, r)))
        .take(MAX_ROWS)
        .collect()
}

/// A folder removed when dropped (a failed check's too).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A fresh folder for one input, on a tmpfs when there is one.
fn scratch(name: &str) -> Scratch {
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    // One per input, and per test thread when `cargo test` replays.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = base.join(format!("mem-ingest-fuzz-{name}-{}-{n}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("a scratch folder");
    Scratch(d)
}

/// A writer's connection, as the agent's: WAL, no automatic checkpoint
/// (the database file changes only when the writer checkpoints, which it
/// does not while the reader reads).
fn writer(path: &Path) -> Connection {
    let c = Connection::open(path).expect("the writer's connection");
    let mode: String = c
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("WAL");
    assert_eq!(mode, "wal");
    c.execute_batch("PRAGMA wal_autocheckpoint = 0")
        .expect("no automatic checkpoint");
    c
}

/// The bytes of a database and its `-wal`.
fn bytes_of(db: &Path) -> (Vec<u8>, Vec<u8>) {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    (
        fs::read(db).unwrap_or_default(),
        fs::read(PathBuf::from(wal)).unwrap_or_default(),
    )
}

/// A reading of one input: the checkpoint, the output, the keys written.
struct Reading {
    format: Arc<dyn Format>,
    archive: PathBuf,
    state: PathBuf,
    out: PathBuf,
    /// The databases the run must leave as they were.
    dbs: Vec<PathBuf>,
    keys: BTreeSet<String>,
    /// Output bytes read back so far.
    seen: usize,
    /// A marker no output or checkpoint may hold (Cursor's secrets).
    secret: Option<String>,
}

impl Reading {
    fn new(format: Arc<dyn Format>, dir: &Path, archive: PathBuf, dbs: Vec<PathBuf>) -> Self {
        Reading {
            format,
            archive,
            state: dir.join("out.state"),
            out: dir.join("out.ndjson"),
            dbs,
            keys: BTreeSet::new(),
            seen: 0,
            secret: None,
        }
    }

    /// One run, resumed from the checkpoint; its checks (see the module's
    /// docs). Returns its summary.
    fn run(&mut self, what: &str) -> Summary {
        let before: Vec<_> = self.dbs.iter().map(|d| bytes_of(d)).collect();
        let s = Archive::builder()
            .path(&self.archive)
            .formats(vec![Arc::clone(&self.format)])
            .jobs(1)
            .state(&self.state)
            .build()
            .backfill(&mut NdjsonFile::append(&self.out, &self.state))
            .unwrap_or_else(|e| panic!("{what}: the run failed: {e}"));
        let after: Vec<_> = self.dbs.iter().map(|d| bytes_of(d)).collect();
        for ((b, a), d) in before.iter().zip(&after).zip(&self.dbs) {
            assert!(b.0 == a.0, "{what}: the read changed {}", d.display());
            assert!(
                b.1 == a.1,
                "{what}: the read changed the -wal of {}",
                d.display()
            );
        }
        assert!(
            s.failures.is_empty(),
            "{what}: a database failed: {:?}",
            s.failures
        );
        let out = fs::read(&self.out).unwrap_or_default();
        let new = &out[self.seen.min(out.len())..];
        self.seen = out.len();
        let mut n = 0;
        for l in new.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            n += 1;
            let v: serde_json::Value = serde_json::from_slice(l).unwrap_or_else(|e| {
                panic!(
                    "{what}: an output line is not JSON ({e}): {}",
                    String::from_utf8_lossy(l)
                )
            });
            let key = v
                .get("key")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_else(|| panic!("{what}: a line without a key: {v}"));
            assert!(
                self.keys.insert(key.to_owned()),
                "{what}: the key {key} written twice"
            );
        }
        assert!(new.is_empty() || new.ends_with(b"\n"), "{what}: a cut line");
        assert_eq!(n, s.written, "{what}: lines written");
        for k in &s.report.skips {
            assert!(k.line >= 1, "{what}: a skip not located: {k:?}");
        }
        if let Some(secret) = &self.secret {
            let state = fs::read(&self.state).unwrap_or_default();
            for (name, b) in [("the output", &out), ("the checkpoint", &state)] {
                assert!(
                    !b.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{what}: a secret in {name}"
                );
            }
        }
        s
    }

    /// The first run, the second version's (when there is one), then one
    /// with nothing changed, which writes nothing. `first` checks the
    /// first run's summary, `change` writes the second version.
    fn all(&mut self, first: impl FnOnce(&Summary), change: Option<impl FnOnce()>) {
        let s = self.run("the first run");
        first(&s);
        if let Some(change) = change {
            change();
            self.run("the run after the change");
        }
        let s = self.run("a run with nothing changed");
        assert_eq!(s.written, 0, "a run with nothing changed wrote records");
    }
}

/// Whether a column (its type and bytes, as `SELECT typeof(c), c` gives
/// them) is JSON text the reader can read, and when `array`, an array.
fn readable(ty: &str, v: &ValueRef<'_>, array: bool) -> bool {
    let ValueRef::Text(t) = v else { return false };
    ty == "text"
        && std::str::from_utf8(t).is_ok_and(|t| {
            serde_json::from_str::<serde_json::Value>(t).is_ok_and(|j| !array || j.is_array())
        })
}

/// The skips' rows (lines) of a run.
fn skip_lines(s: &Summary) -> BTreeSet<u64> {
    s.report.skips.iter().map(|k| k.line).collect()
}

// ---------------------------------------------------------------- OpenCode

/// OpenCode's tables, as its first migration makes them (the fixture's).
pub const OPENCODE_DDL: &str = "
CREATE TABLE `project` (`id` text PRIMARY KEY, `worktree` text NOT NULL, `vcs` text, `name` text,
  `icon_url` text, `icon_color` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `time_initialized` integer, `sandboxes` text NOT NULL, `commands` text);
CREATE TABLE `session` (`id` text PRIMARY KEY, `project_id` text NOT NULL, `workspace_id` text,
  `parent_id` text, `slug` text NOT NULL, `directory` text NOT NULL, `path` text, `title` text NOT NULL,
  `version` text NOT NULL, `share_url` text, `summary_additions` integer, `summary_deletions` integer,
  `summary_files` integer, `summary_diffs` text, `cost` real DEFAULT 0 NOT NULL,
  `tokens_input` integer DEFAULT 0 NOT NULL, `tokens_output` integer DEFAULT 0 NOT NULL,
  `tokens_reasoning` integer DEFAULT 0 NOT NULL, `tokens_cache_read` integer DEFAULT 0 NOT NULL,
  `tokens_cache_write` integer DEFAULT 0 NOT NULL, `revert` text, `permission` text, `agent` text,
  `model` text, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `time_compacting` integer, `time_archived` integer);
CREATE TABLE `message` (`id` text PRIMARY KEY, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL,
  CONSTRAINT `fk_message_session_id_session_id_fk` FOREIGN KEY (`session_id`)
    REFERENCES `session`(`id`) ON DELETE CASCADE);
CREATE TABLE `part` (`id` text PRIMARY KEY, `message_id` text NOT NULL, `session_id` text NOT NULL,
  `time_created` integer NOT NULL, `time_updated` integer NOT NULL, `data` text NOT NULL,
  CONSTRAINT `fk_part_message_id_message_id_fk` FOREIGN KEY (`message_id`)
    REFERENCES `message`(`id`) ON DELETE CASCADE);
CREATE INDEX `session_project_idx` ON `session` (`project_id`);
CREATE INDEX `session_parent_idx` ON `session` (`parent_id`);
CREATE INDEX `message_session_time_created_id_idx` ON `message` (`session_id`,`time_created`,`id`);
CREATE INDEX `part_message_id_id_idx` ON `part` (`message_id`,`id`);
CREATE INDEX `part_session_idx` ON `part` (`session_id`);
CREATE TABLE `session_message` (`id` text PRIMARY KEY, `session_id` text NOT NULL, `type` text NOT NULL,
  `seq` integer NOT NULL, `time_created` integer NOT NULL, `time_updated` integer NOT NULL,
  `data` text NOT NULL);
CREATE UNIQUE INDEX `session_message_session_seq_idx` ON `session_message` (`session_id`,`seq`);
INSERT INTO project VALUES ('p1', '/fuzz/worktree', 'git', NULL, NULL, NULL, 1, 1, NULL, '[]', NULL);
INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated)
  VALUES ('ses_1', 'p1', 's', '/fuzz/one', 't', '1.2.0', 1, 1),
         ('ses_2', 'p1', 's', '', 't (fork #1)', '1.2.0', 2, 2);
";

/// An OpenCode message of the input: its session (1 or 2), `data`, and
/// its parts' `data`.
#[derive(Debug, Clone, PartialEq)]
struct OcMsg {
    session: u8,
    data: Col,
    parts: Vec<Col>,
}

/// A 2.x `session_message` row of the input: its `type` and `data`.
type OcV2 = (Col, Col);

fn oc_version(v: &[u8]) -> (Vec<OcMsg>, Vec<OcV2>) {
    let mut msgs: Vec<OcMsg> = Vec::new();
    let mut v2 = Vec::new();
    for (tag, v) in lines(v) {
        match tag {
            b'v' => {
                let mut f = fields(v).into_iter();
                let kind = f.next().unwrap_or(Col::Text(Vec::new()));
                v2.push((kind, f.next().unwrap_or(Col::Text(Vec::new()))));
            }
            b'm' | b'n' => msgs.push(OcMsg {
                session: if tag == b'm' { 1 } else { 2 },
                data: col(v),
                parts: Vec::new(),
            }),
            b'p' => {
                if let Some(m) = msgs.last_mut() {
                    m.parts.push(col(v));
                }
            }
            _ => {}
        }
    }
    (msgs, v2)
}

/// Writes 2.x's rows `new` over `old` as OpenCode does: the row at the
/// same place upserted (its rowid kept) where it changed, one gone
/// deleted, a new one inserted. The i-th row's id is the i-th 1.x
/// message's (`msg_<i>`, as 2.x's migration copies them): a row over a
/// 1.x message is its copy, the others written there alone.
fn oc_write_v2(c: &Connection, old: &[OcV2], new: &[OcV2]) {
    for i in 0..old.len().max(new.len()) {
        let id = format!("msg_{i:03}");
        match (old.get(i), new.get(i)) {
            (Some(o), Some(n)) if o == n => {}
            (_, Some((kind, data))) => {
                let _ = c.execute(
                    "INSERT INTO session_message VALUES (?1, 'ses_1', ?2, ?3, ?3, ?3, ?4) \
                     ON CONFLICT(id) DO UPDATE SET type = excluded.type, data = excluded.data",
                    params![id, kind, i as i64, data],
                );
            }
            (Some(_), None) => {
                c.execute("DELETE FROM session_message WHERE id = ?1", [id])
                    .unwrap();
            }
            (None, None) => {}
        }
    }
}

/// The messages (of ids `ids`) as the pre-1.2 JSON tree beside the
/// database holds them, as its 1.2 migration leaves it: each message whose
/// `data` is text a file `storage/message/<session>/<id>.json` of those
/// bytes, each part of text a file `storage/part/<id>/<part id>.json`
/// (the message's part folder written anew). The tree's messages are the
/// database's under the same ids: read beside it, none is written twice.
fn oc_tree(home: &Path, ids: &[String], msgs: &[OcMsg]) {
    let s = home.join("storage");
    for (id, m) in ids.iter().zip(msgs) {
        let Col::Text(data) = &m.data else { continue };
        let dir = s.join(format!("message/ses_{}", m.session));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(format!("{id}.json")), data).unwrap();
        let parts = s.join("part").join(id);
        let _ = fs::remove_dir_all(&parts);
        for (j, p) in m.parts.iter().enumerate() {
            if let Col::Text(b) = p {
                fs::create_dir_all(&parts).unwrap();
                fs::write(parts.join(format!("prt_{}_{j:02}.json", &id[4..])), b).unwrap();
            }
        }
    }
}

/// Writes `new` over `old` (the rows of the version before, `ids` their
/// message ids) as OpenCode does: a message of the same session at the
/// same place upserted (its rowid kept) where it changed, its parts
/// upserted, inserted or deleted; a message gone (or of another session
/// there now) deleted, with its parts; the others inserted under new ids
/// (after the deletes: a deleted last row's rowid is taken again).
/// A row SQLite refuses (NULL in a NOT NULL column) is left out.
#[allow(clippy::needless_range_loop)] // the place indexes three lists
fn oc_write(c: &Connection, old: &[OcMsg], ids: &mut Vec<String>, new: &[OcMsg], gen: u32) {
    let ses = |m: &OcMsg| format!("ses_{}", m.session);
    let part_id = |id: &str, j: usize| format!("prt_{}_{j:02}", &id[4..]);
    let mut next_ids = Vec::new();
    let mut inserts = Vec::new();
    for i in 0..old.len().max(new.len()) {
        match (old.get(i), new.get(i)) {
            (Some(o), Some(n)) if o.session == n.session => {
                let id = ids[i].clone();
                let t = 1000 * (i as i64 + 1);
                if o.data != n.data {
                    let _ = c.execute(
                        "INSERT INTO message VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(id) DO \
                         UPDATE SET data = excluded.data, time_updated = excluded.time_updated",
                        params![id, ses(n), t, t + i64::from(gen), n.data],
                    );
                }
                for j in 0..o.parts.len().max(n.parts.len()) {
                    let pid = part_id(&id, j);
                    match (o.parts.get(j), n.parts.get(j)) {
                        (Some(a), Some(b)) if a == b => {}
                        (_, Some(b)) => {
                            let _ = c.execute(
                                "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5) ON CONFLICT(id) \
                                 DO UPDATE SET data = excluded.data, time_updated = excluded.time_updated",
                                params![pid, id, ses(n), t + j as i64, b],
                            );
                        }
                        (Some(_), None) => {
                            c.execute("DELETE FROM part WHERE id = ?1", [pid]).unwrap();
                        }
                        (None, None) => {}
                    }
                }
                next_ids.push(id);
            }
            (o, n) => {
                if o.is_some() {
                    c.execute("DELETE FROM part WHERE message_id = ?1", [&ids[i]])
                        .unwrap();
                    c.execute("DELETE FROM message WHERE id = ?1", [&ids[i]])
                        .unwrap();
                }
                if let Some(n) = n {
                    let id = format!("msg_{i:03}{}", ["", "b"][gen.min(1) as usize]);
                    inserts.push((i, id.clone(), n));
                    next_ids.push(id);
                }
            }
        }
    }
    for (i, id, n) in inserts {
        let t = 1000 * (i as i64 + 1);
        let _ = c.execute(
            "INSERT INTO message VALUES (?1, ?2, ?3, ?3, ?4)",
            params![id, ses(n), t, n.data],
        );
        for (j, p) in n.parts.iter().enumerate() {
            let _ = c.execute(
                "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                params![part_id(&id, j), id, ses(n), t + j as i64, p],
            );
        }
    }
    *ids = next_ids;
}

/// `opencode`: arbitrary bytes as the rows of an OpenCode database
/// (`opencode.db`, the schema of 1.2), one version or two. Lines: `m` a
/// message of session `ses_1` (directory `/fuzz/one`) and its `data`, `n`
/// one of `ses_2` (no directory: the message's `path.cwd`), `p` a part's
/// `data` of the message before, `v` a 2.x `session_message` row of
/// `ses_1`, its `type` and `data` (a tab between), the i-th under the
/// i-th message's id. Beside the database, the pre-1.2 JSON tree its
/// migration left ([`oc_tree`]): the messages and parts of text as files
/// under the same ids, rewritten with the second version. The checks of
/// the module's docs (no key written twice: a message in both stores is
/// written once); in the first run, every message whose `data` is not
/// JSON text is a skip at its rowid.
pub fn check_opencode(data: &[u8]) {
    let (a, b) = versions(data);
    let ((old, old_v2), new) = (oc_version(a), b.map(oc_version));
    let dir = scratch("opencode");
    let home = dir.join("opencode");
    fs::create_dir_all(&home).unwrap();
    let db = home.join("opencode.db");
    let c = writer(&db);
    c.execute_batch(OPENCODE_DDL).unwrap();
    let mut ids = Vec::new();
    oc_write(&c, &[], &mut ids, &old, 0);
    oc_write_v2(&c, &[], &old_v2);
    oc_tree(&home, &ids, &old);
    let bad = |c: &Connection| -> BTreeSet<u64> {
        let mut st = c
            .prepare("SELECT rowid, typeof(data), data FROM message")
            .unwrap();
        let rows = st
            .query_map([], |r| {
                let ty: String = r.get(1)?;
                Ok((r.get::<_, i64>(0)?, readable(&ty, &r.get_ref(2)?, false)))
            })
            .unwrap();
        rows.map(Result::unwrap)
            .filter(|(_, ok)| !ok)
            .map(|(id, _)| id as u64)
            .collect()
    };
    let bad1 = bad(&c);
    let mut reading = Reading::new(
        Arc::new(mem_ingest_db::OpenCode),
        &dir,
        home.clone(),
        vec![db.clone()],
    );
    let first = |s: &Summary| {
        let lines = skip_lines(s);
        assert!(
            bad1.is_subset(&lines),
            "unreadable messages at rowids {bad1:?}, skips at {lines:?}"
        );
    };
    let change = new.map(|(new, new_v2)| {
        let c = &c;
        let ids = &mut ids;
        let (old, old_v2) = (&old, &old_v2);
        let home = &home;
        move || {
            oc_write(c, old, ids, &new, 1);
            oc_write_v2(c, old_v2, &new_v2);
            oc_tree(home, ids, &new);
        }
    });
    reading.all(first, change);
    drop(c);
}

// ------------------------------------------------------------------- Goose

/// Goose's tables at schema 17 (`create_schema`, the fixture's).
pub const GOOSE_DDL: &str = "
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE sessions (id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '',
  description TEXT NOT NULL DEFAULT '', user_set_name BOOLEAN DEFAULT FALSE,
  session_type TEXT NOT NULL DEFAULT 'user', working_dir TEXT NOT NULL,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  extension_data TEXT DEFAULT '{}', total_tokens INTEGER, input_tokens INTEGER,
  output_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER,
  accumulated_total_tokens INTEGER, accumulated_input_tokens INTEGER,
  accumulated_output_tokens INTEGER, accumulated_cache_read_tokens INTEGER,
  accumulated_cache_write_tokens INTEGER, accumulated_cost REAL, schedule_id TEXT,
  recipe_json TEXT, user_recipe_values_json TEXT, provider_name TEXT, model_config_json TEXT,
  goose_mode TEXT NOT NULL DEFAULT 'auto', archived_at TIMESTAMP, project_id TEXT,
  parent_session_id TEXT, parent_delegation TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
  session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL, content_json TEXT NOT NULL,
  created_timestamp INTEGER NOT NULL, timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  tokens INTEGER, metadata_json TEXT);
CREATE TABLE usage_ledger (id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  created_timestamp INTEGER NOT NULL, model TEXT, input_tokens INTEGER, output_tokens INTEGER,
  total_tokens INTEGER, cache_read_tokens INTEGER, cache_write_tokens INTEGER, cost REAL,
  cost_source TEXT, is_compaction INTEGER DEFAULT 0);
CREATE INDEX idx_messages_session ON messages(session_id);
CREATE INDEX idx_messages_message_id ON messages(message_id);
CREATE INDEX idx_messages_session_created ON messages(session_id, created_timestamp, id);
CREATE INDEX idx_usage_ledger_session ON usage_ledger(session_id);
INSERT INTO schema_version (version, applied_at) VALUES (17, '2026-08-01 08:00:00');
INSERT INTO sessions (id, name, working_dir, created_at, updated_at, provider_name, model_config_json)
  VALUES ('20260101_1', 'one', '/fuzz/one', '2026-01-01 10:00:00', '2026-01-01 10:00:00',
          'anthropic', '{\"model_name\":\"claude-sonnet-4-5\"}'),
         ('20260101_2', 'two', '/fuzz/two', '2026-01-01T11:00:00+00:00', '2026-01-01 11:00:00',
          NULL, NULL);
";

/// A Goose message of the input.
#[derive(Debug, Clone, PartialEq)]
struct GMsg {
    session: u8,
    role: Col,
    content: Col,
    created: Col,
    metadata: Col,
}

/// A Goose version: its messages, ledger rows (session, columns), the
/// sessions' columns set (session, columns), and whether it rewrites
/// session 1's conversation (`replace_conversation`).
#[derive(Debug, Default)]
struct GVersion {
    msgs: Vec<GMsg>,
    ledger: Vec<(u8, Vec<Col>)>,
    sessions: Vec<(u8, Vec<Col>)>,
    replace: bool,
}

fn fields(v: &[u8]) -> Vec<Col> {
    v.split(|&b| b == b'\t').map(col).collect()
}

fn g_version(v: &[u8]) -> GVersion {
    let mut g = GVersion::default();
    for (tag, v) in lines(v) {
        let text = |s: &str| Col::Text(s.as_bytes().to_vec());
        let msg = |session, role: Col, content| GMsg {
            session,
            role,
            content,
            created: Col::Null,
            metadata: Col::Null,
        };
        match tag {
            b'u' => g.msgs.push(msg(1, text("user"), col(v))),
            b'a' => g.msgs.push(msg(1, text("assistant"), col(v))),
            b'U' => g.msgs.push(msg(2, text("user"), col(v))),
            b'A' => g.msgs.push(msg(2, text("assistant"), col(v))),
            b'r' => {
                let mut f = v.splitn(2, |&b| b == b'\t');
                let role = col(f.next().unwrap_or_default());
                g.msgs.push(msg(1, role, col(f.next().unwrap_or_default())));
            }
            b'x' => {
                if let Some(m) = g.msgs.last_mut() {
                    m.metadata = col(v);
                }
            }
            b't' => {
                if let Some(m) = g.msgs.last_mut() {
                    m.created = col(v);
                }
            }
            b'l' | b'L' => g.ledger.push((if tag == b'l' { 1 } else { 2 }, fields(v))),
            b's' | b'S' => g
                .sessions
                .push((if tag == b's' { 1 } else { 2 }, fields(v))),
            b'R' => g.replace = true,
            _ => {}
        }
    }
    g
}

const LEDGER_COLS: [&str; 9] = [
    "created_timestamp",
    "model",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
    "cost_source",
];

const SESSION_COLS: [&str; 9] = [
    "accumulated_input_tokens",
    "accumulated_output_tokens",
    "accumulated_cache_read_tokens",
    "accumulated_cache_write_tokens",
    "accumulated_total_tokens",
    "accumulated_cost",
    "updated_at",
    "model_config_json",
    "working_dir",
];

fn g_session(s: u8) -> String {
    format!("20260101_{s}")
}

fn g_insert(c: &Connection, i: usize, m: &GMsg) {
    let created = match &m.created {
        Col::Null => Col::Int(1_767_225_600 + i as i64),
        other => other.clone(),
    };
    let _ = c.execute(
        "INSERT INTO messages (message_id, session_id, role, content_json, created_timestamp, \
         metadata_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            format!("msg_{}_{i}", g_session(m.session)),
            g_session(m.session),
            m.role,
            m.content,
            created,
            m.metadata
        ],
    );
}

/// Writes a version's ledger rows after the first `from` (append-only),
/// and its sessions' columns.
fn g_usage(c: &Connection, v: &GVersion, from: usize) {
    for (s, f) in v.ledger.iter().skip(from) {
        let n = f.len().min(LEDGER_COLS.len());
        let sql = format!(
            "INSERT INTO usage_ledger (session_id, created_timestamp{}{}) VALUES (?1, {}{}{})",
            if n > 1 { ", " } else { "" },
            LEDGER_COLS[1..n.max(1)].join(", "),
            if n == 0 { "1767225600" } else { "?2" },
            if n > 1 { ", " } else { "" },
            (3..=n + 1)
                .map(|k| format!("?{k}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut args: Vec<&dyn ToSql> = Vec::new();
        let session = g_session(*s);
        args.push(&session);
        for x in &f[..n] {
            args.push(x);
        }
        let _ = c.execute(&sql, args.as_slice());
    }
    for (s, f) in &v.sessions {
        for (col, x) in SESSION_COLS.iter().zip(f) {
            let _ = c.execute(
                &format!("UPDATE sessions SET {col} = ?1 WHERE id = ?2"),
                params![x, g_session(*s)],
            );
        }
    }
}

/// `goose`: arbitrary bytes as the rows of a Goose `sessions.db` (schema
/// 17), one version or two. Lines: `u`/`a` a user/assistant message of
/// session `20260101_1` and its `content_json` (`U`/`A`: session
/// `20260101_2`), `r` a message whose role is the bytes before a tab and
/// content those after, `x` the message before's `metadata_json`, `t` its
/// `created_timestamp`; `l`/`L` a `usage_ledger` row of session 1/2, its
/// columns (created_timestamp, model, input, output, total, cache read,
/// cache write, cost, cost_source) separated by tabs; `s`/`S` session 1/2's
/// columns (accumulated input, output, cache read, cache write, total,
/// cost, `updated_at`, `model_config_json`, `working_dir`); `R` (in the
/// second version) session 1's conversation deleted and inserted again
/// under new row ids (Goose's `replace_conversation`). The second version
/// updates a message changed at the same place in place, deletes those
/// gone, inserts the new ones, appends its further ledger rows and sets
/// its sessions' columns. The checks of the module's docs; in the first
/// run, every message whose role or `content_json` the reader cannot read
/// is a skip at its id.
pub fn check_goose(data: &[u8]) {
    let (a, b) = versions(data);
    let (old, new) = (g_version(a), b.map(g_version));
    let dir = scratch("goose");
    let home = dir.join("sessions");
    fs::create_dir_all(&home).unwrap();
    let db = home.join("sessions.db");
    let c = writer(&db);
    c.execute_batch(GOOSE_DDL).unwrap();
    for (i, m) in old.msgs.iter().enumerate() {
        g_insert(&c, i, m);
    }
    g_usage(&c, &old, 0);
    let bad1: BTreeSet<u64> = {
        let mut st = c
            .prepare(
                "SELECT id, typeof(role), role, typeof(content_json), content_json FROM messages",
            )
            .unwrap();
        let rows = st
            .query_map([], |r| {
                let (rt, ct): (String, String) = (r.get(1)?, r.get(3)?);
                let ok = rt == "text"
                    && r.get_ref(2)?.as_str().is_ok()
                    && readable(&ct, &r.get_ref(4)?, true);
                Ok((r.get::<_, i64>(0)?, ok))
            })
            .unwrap();
        rows.map(Result::unwrap)
            .filter(|(_, ok)| !ok)
            .map(|(id, _)| id as u64)
            .collect()
    };
    let mut reading = Reading::new(
        Arc::new(mem_ingest_db::Goose),
        &dir,
        home.clone(),
        vec![db.clone()],
    );
    let first = |s: &Summary| {
        let lines = skip_lines(s);
        assert!(
            bad1.is_subset(&lines),
            "unreadable messages at ids {bad1:?}, skips at {lines:?}"
        );
    };
    let change = new.map(|new| {
        let c = &c;
        let old = &old;
        move || {
            if new.replace {
                c.execute("DELETE FROM messages WHERE session_id = '20260101_1'", [])
                    .unwrap();
            }
            // Row ids of the first version's messages, by place.
            let mut ids: Vec<i64> = c
                .prepare("SELECT id FROM messages ORDER BY id")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            if new.replace {
                ids.clear();
            }
            for i in 0..old.msgs.len().max(new.msgs.len()) {
                let (o, n) = (old.msgs.get(i), new.msgs.get(i));
                let at = if new.replace {
                    None
                } else {
                    ids.get(i).copied()
                };
                match (o, n, at) {
                    (Some(o), Some(n), Some(id)) if o.session == n.session => {
                        if o != n {
                            let _ = c.execute(
                                "UPDATE messages SET role = ?1, content_json = ?2, \
                                 metadata_json = ?3 WHERE id = ?4",
                                params![n.role, n.content, n.metadata, id],
                            );
                        }
                    }
                    (_, n, at) => {
                        if let Some(id) = at {
                            c.execute("DELETE FROM messages WHERE id = ?1", [id])
                                .unwrap();
                        }
                        if let Some(n) = n {
                            g_insert(c, i, n);
                        }
                    }
                }
            }
            g_usage(c, &new, old.ledger.len());
        }
    });
    reading.all(first, change);
    drop(c);
}

// ------------------------------------------------------------------ Cursor

/// A marker for this process's secrets: the input cannot hold it.
fn secret() -> String {
    use std::hash::BuildHasher;
    let h = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!("SECRET-{h:016x}")
}

const KV: &str = "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);";

/// The keys and values of a Cursor version: `cursorDiskKV` rows in order,
/// the global `ItemTable`'s, and the workspace's `composer.composerData`.
#[derive(Debug, Default)]
struct CVersion {
    kv: Vec<(Vec<u8>, Col)>,
    items: Vec<(Vec<u8>, Col)>,
    workspace: Option<Col>,
}

/// A composer's value with the encryption-key fields a real one has,
/// holding the secret (spliced in after the opening brace, so that the
/// rest stays the input's bytes).
fn with_keys(v: Col, secret: &str) -> Col {
    let Col::Text(t) = &v else { return v };
    if t.first() != Some(&b'{') {
        return v;
    }
    let rest = &t[1..];
    let empty = rest
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'}');
    let mut out = format!(
        "{{\"blobEncryptionKey\":\"{secret}\",\"speculativeSummarizationEncryptionKey\":\"{secret}\""
    )
    .into_bytes();
    if !empty {
        out.push(b',');
    }
    out.extend_from_slice(rest);
    Col::Text(out)
}

fn c_version(v: &[u8], secret: &str) -> CVersion {
    let mut c = CVersion::default();
    let mut composer = 0usize;
    let mut composers = 0usize;
    let mut bubbles = 0usize;
    let kv = |v: &[u8]| {
        let mut f = v.splitn(2, |&b| b == b'\t');
        (
            f.next().unwrap_or_default().to_vec(),
            col(f.next().unwrap_or_default()),
        )
    };
    for (tag, v) in lines(v) {
        match tag {
            b'c' => {
                composer = composers;
                composers += 1;
                c.kv.push((
                    format!("composerData:c{composer}").into_bytes(),
                    with_keys(col(v), secret),
                ));
            }
            b'b' => {
                c.kv.push((
                    format!("bubbleId:c{composer}:b{bubbles}").into_bytes(),
                    col(v),
                ));
                bubbles += 1;
            }
            b'k' => c.kv.push(kv(v)),
            b'i' => {
                let (k, v) = kv(v);
                c.items.push((k, v));
            }
            b'w' => c.workspace = Some(col(v)),
            _ => {}
        }
    }
    c
}

fn c_write(g: &Connection, w: &Connection, old: &CVersion, new: &CVersion, secret: &str) {
    // Gone: deleted first (their rowids may be taken again).
    for (k, _) in &old.kv {
        if !new.kv.iter().any(|(n, _)| n == k) {
            let _ = g.execute(
                "DELETE FROM cursorDiskKV WHERE key = ?1",
                [Col::Text(k.clone())],
            );
        }
    }
    // New or changed: an INSERT into the ON CONFLICT REPLACE table (a new
    // rowid), as VS Code's storage writes.
    for (k, v) in &new.kv {
        if !old.kv.iter().any(|(o, ov)| o == k && ov == v) {
            let _ = g.execute(
                "INSERT INTO cursorDiskKV VALUES (?1, ?2)",
                params![Col::Text(k.clone()), v],
            );
        }
    }
    for (k, v) in &new.items {
        // The global ItemTable: every value holds the secret.
        let v = match v {
            Col::Text(t) | Col::Blob(t) => [t.as_slice(), secret.as_bytes()].concat(),
            _ => secret.as_bytes().to_vec(),
        };
        let _ = g.execute(
            "INSERT INTO ItemTable VALUES (?1, ?2)",
            params![Col::Text(k.clone()), Col::Text(v)],
        );
    }
    if new.workspace != old.workspace {
        if let Some(v) = &new.workspace {
            let _ = w.execute(
                "INSERT INTO ItemTable VALUES ('composer.composerData', ?1)",
                [v],
            );
        }
    }
}

/// `cursor`: arbitrary bytes as the chats of Cursor's global store
/// (`globalStorage/state.vscdb`) and a workspace store beside it, one
/// version or two. Lines: `c` a composer's `composerData:c<N>` value (N
/// counts the composers; its encryption-key fields added, holding the
/// secret, when it is a JSON object), `b` a bubble of the composer before
/// (`bubbleId:c<N>:b<M>`, M counts the bubbles), `k` any `cursorDiskKV`
/// key, a tab, its value; `i` a key of the global `ItemTable`, a tab, its
/// value (the secret added); `w` the workspace's `composer.composerData`
/// (else one listing composers c0 to c3; the workspace's other keys hold
/// the secret). The second version inserts again (a new rowid, as Cursor's
/// REPLACE) each key new or changed, and deletes those gone. The checks of
/// the module's docs, and no secret in any output or checkpoint.
pub fn check_cursor(data: &[u8]) {
    let secret = secret();
    let (a, b) = versions(data);
    let (old, new) = (c_version(a, &secret), b.map(|b| c_version(b, &secret)));
    let dir = scratch("cursor");
    let user = dir.join("User");
    let gdir = user.join("globalStorage");
    let wdir = user.join("workspaceStorage").join("0123abcd");
    fs::create_dir_all(&gdir).unwrap();
    fs::create_dir_all(&wdir).unwrap();
    fs::write(
        wdir.join("workspace.json"),
        br#"{"folder":"file:///fuzz/ws%20one"}"#,
    )
    .unwrap();
    let (gdb, wdb) = (gdir.join("state.vscdb"), wdir.join("state.vscdb"));
    let g = writer(&gdb);
    g.execute_batch(KV).unwrap();
    for k in [
        "cursorAuth/accessToken",
        "cursorAuth/refreshToken",
        "secret://fuzz",
    ] {
        g.execute("INSERT INTO ItemTable VALUES (?1, ?2)", [k, &secret])
            .unwrap();
    }
    // The workspace store: rollback journal, as VS Code leaves it.
    let w = Connection::open(&wdb).unwrap();
    w.execute_batch(KV).unwrap();
    w.execute(
        "INSERT INTO ItemTable VALUES ('composer.composerData', ?1)",
        [r#"{"allComposers":[{"composerId":"c0"},{"composerId":"c1"},{"composerId":"c2"},{"composerId":"c3"}]}"#],
    )
    .unwrap();
    for k in [
        "cursorAuth/accessToken",
        "aiService.prompts",
        "interactive.sessions",
    ] {
        w.execute("INSERT INTO ItemTable VALUES (?1, ?2)", [k, &secret])
            .unwrap();
    }
    c_write(&g, &w, &CVersion::default(), &old, &secret);
    let mut reading = Reading::new(
        Arc::new(mem_ingest_db::CursorIde),
        &dir,
        user.clone(),
        vec![gdb.clone(), wdb.clone()],
    );
    reading.secret = Some(secret.clone());
    let first = |s: &Summary| {
        // Every skip at a row of cursorDiskKV.
        let rowids: BTreeSet<u64> = g
            .prepare("SELECT rowid FROM cursorDiskKV")
            .unwrap()
            .query_map([], |r| r.get::<_, i64>(0))
            .unwrap()
            .map(|r| r.unwrap() as u64)
            .collect();
        let lines = skip_lines(s);
        assert!(
            lines.is_subset(&rowids),
            "skips at {lines:?}, rows at {rowids:?}"
        );
    };
    let change = new.map(|new| {
        let (g, w, old, secret) = (&g, &w, &old, &secret);
        move || c_write(g, w, old, &new, secret)
    });
    reading.all(first, change);
    drop((g, w));
}

// ------------------------------------------------------------ Goose legacy

/// Arbitrary bytes as a Goose legacy session file (before 1.10:
/// `sessions/<id>.jsonl`, read by `mem_ingest_db::Goose` as a document):
/// the first version written, the second written to `<id>.tmp` and
/// renamed over it as Goose saves, each read with the checks of every
/// run above (no key twice across the runs, as many lines as said,
/// nothing written by the run with nothing changed); in the first run,
/// every skip within the file's lines, and every line of the file
/// accounted for (`records + no_record + skipped + deduplicated ==
/// lines`).
pub fn check_goose_legacy(data: &[u8]) {
    let (a, b) = versions(data);
    let dir = scratch("goose-legacy");
    let home = dir.join("sessions");
    fs::create_dir_all(&home).unwrap();
    let file = home.join("20250101_120000.jsonl");
    fs::write(&file, a).unwrap();
    let mut reading = Reading::new(Arc::new(mem_ingest_db::Goose), &dir, home.clone(), vec![]);
    let lines_a = a.split(|&c| c == b'\n').count() as u64;
    let first = |s: &Summary| {
        for k in &s.report.skips {
            assert!(
                k.line <= lines_a,
                "a skip past the file's {lines_a} lines: {k:?}"
            );
        }
        let r = &s.report;
        assert_eq!(
            r.records + r.no_record + r.skipped + r.deduplicated,
            r.lines,
            "every line accounted for: {r:?}"
        );
    };
    let change = b.map(|b| {
        let (home, file) = (&home, &file);
        move || {
            let tmp = home.join("20250101_120000.tmp");
            fs::write(&tmp, b).unwrap();
            fs::rename(&tmp, file).unwrap();
        }
    });
    reading.all(first, change);
}
