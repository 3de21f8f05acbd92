//! Goose (1.10 and later): sessions in `sessions/sessions.db` (SQLite,
//! WAL) of its data folder, `messages` rows with the content as JSON, usage
//! per LLM call in `usage_ledger` (`../shared/spec/goose-format.md`;
//! `docs/goose.md`).
//!
//! Read after a cursor (see [`mem_ingest_parse::rows`]): the high-water
//! marks of `messages.id` and `usage_ledger.id` (AUTOINCREMENT: never
//! reused; a largest id below the mark, or another message at the mark,
//! is a restored backup, read again from the start). Goose inserts messages complete, and rewrites a whole
//! conversation (compaction, `replace_conversation`) under new row ids
//! with the same `message_id`s: a message is keyed by `(session_id,
//! message_id)`, emitted once. Usage is each `usage_ledger` row; a session
//! without ledger rows (a database before schema 15, a session imported
//! from JSONL) counts the growth of its `accumulated_*` columns, and a
//! ledger's `carried_forward` row for a session counted so is not counted
//! again.
//!
//! The legacy `<id>.jsonl` files (before 1.10) beside the database are
//! documents of the same format ([`legacy`]), their messages mapped as the
//! rows are ([`map`]): a session Goose imported is read from the
//! database, and a message is one across the file and the database in
//! whichever order they are read (a legacy session's messages are told
//! apart by role, `created` and their order, in both). Not read (said in
//! `docs/goose.md`): `threads` / `thread_messages` (the UI's second copy
//! of the chat).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bumpalo::Bump;
use mem_ingest_parse::document::{self, DocState};
use mem_ingest_parse::format::{BoxedSource, Format, Input};
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::report::UsageAt;
use mem_ingest_parse::rows::{self, Cursor, Database, MapRows, Row, Rows};
use mem_ingest_parse::{Error, Header, Report, RoleFilter, SkipReason, SourceOptions, Usage};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use map::{millis, Identity, Session};

pub mod legacy;
mod map;

use crate::lineage::Lineages;
use crate::sqlite::{fail, has_table, in_read, open_read_only, text_of};

/// The Goose format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Goose;

/// Messages read at most in one batch (one read transaction).
const BATCH: i64 = 512;

/// The lineage of every Goose database: the same session found in two
/// databases (an older `Block/goose` store beside the current one) is one.
const LINEAGE: &str = "goose";

/// Goose's session folders that hold a `sessions.db` or a legacy
/// `*.jsonl` file, in order: `$GOOSE_PATH_ROOT/data/sessions` (an
/// absolute root) alone when set, else `$XDG_DATA_HOME/goose/sessions`,
/// `~/.local/share/goose/sessions`, and the older places ccusage probes
/// too.
pub fn session_dirs() -> (Vec<PathBuf>, Vec<String>) {
    let mut candidates = Vec::new();
    match std::env::var_os("GOOSE_PATH_ROOT").map(PathBuf::from) {
        Some(root) if root.is_absolute() => candidates.push(root.join("data/sessions")),
        _ => {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
                candidates.push(PathBuf::from(x).join("goose/sessions"));
            }
            if let Some(h) = home {
                candidates.push(h.join(".local/share/goose/sessions"));
                candidates.push(h.join("Library/Application Support/Block/goose/sessions"));
                candidates.push(h.join("Library/Application Support/goose/sessions"));
                candidates.push(h.join(".local/share/Block/goose/sessions"));
            }
        }
    }
    candidates.dedup();
    let tried = candidates
        .iter()
        .map(|c| c.join("sessions.db").display().to_string())
        .collect();
    let found = candidates
        .into_iter()
        .filter(|c| c.join("sessions.db").is_file() || has_legacy_file(c))
        .collect();
    (found, tried)
}

/// Whether the folder `dir` holds a legacy session file.
fn has_legacy_file(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten()
            .any(|e| e.file_type().is_ok_and(|t| t.is_file()) && legacy::is_legacy(&e.path()))
    })
}

impl Format for Goose {
    fn name(&self) -> &'static str {
        "goose"
    }

    /// `sessions.db`, and the legacy `*.jsonl` files, in a `sessions`
    /// folder: a folder walked never opens another database as Goose's
    /// (the store is never named so).
    fn is_session_file(&self, path: &Path) -> bool {
        (path.file_name().is_some_and(|n| n == "sessions.db") || legacy::is_legacy(path))
            && path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "sessions")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = session_dirs();
        if found.is_empty() {
            return Err(format!(
                "no Goose archive: no {} (nor a legacy *.jsonl session beside one)",
                tried.join(", ")
            ));
        }
        Ok(found)
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        if legacy::is_legacy(path) {
            let map = legacy::Legacy {
                defer_to_database: true,
                shard: opts.shard,
            };
            return Ok(document::open(&map, legacy::TAG, input, path, None, opts));
        }
        Ok(rows::open(self, path, None, opts))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        _byte: u64,
        _lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        if legacy::is_legacy(path) {
            // A file that emitted messages before is read as a document
            // again (what it emitted stays emitted, its counts stay its
            // own), also when Goose imported it since.
            let emitted = DocState::decode(context).is_some_and(|s| !s.emitted.is_empty());
            let map = legacy::Legacy {
                defer_to_database: !emitted,
                shard: opts.shard,
            };
            let prior = Some((header, context));
            return document::open(&map, legacy::TAG, input, path, prior, opts);
        }
        rows::open(self, path, Some((header, context)), opts)
    }

    fn needs_running_context(&self) -> bool {
        true
    }

    /// The database (any name but `*.jsonl`).
    fn is_rows(&self, path: &Path) -> bool {
        !legacy::is_legacy(path)
    }

    /// A legacy `*.jsonl` session, rewritten whole at every save.
    fn is_document(&self, path: &Path) -> bool {
        legacy::is_legacy(path)
    }

    /// A legacy session's first line.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        legacy::detect(prefix, whole)
    }

    /// Its sessions are lineages of their own (a root session and its
    /// subagents' sessions): a database is read by every shard, each
    /// taking its lineages' rows.
    fn shards_rows(&self) -> bool {
        true
    }

    /// A database of this agent's tables under any name (a backup copy
    /// named as a PATH).
    fn detect_file(&self, path: &Path, prefix: &[u8]) -> bool {
        crate::sqlite::has_tables(path, prefix, &["messages", "sessions"])
    }
}

impl MapRows for Goose {
    fn open(&self, path: &Path, cursor: &mut Cursor) -> Result<(Header, Box<dyn Database>), Error> {
        let conn = open_read_only(path)?;
        let mark = cursor.marks.get("messages").copied();
        let (tables, ledger, max_id, at_mark) = in_read(&conn, |c| {
            let tables = has_table(c, "messages")? && has_table(c, "sessions")?;
            let ledger = tables && has_table(c, "usage_ledger")?;
            let max_id: Option<i64> = if tables {
                c.query_row("SELECT max(id) FROM messages", [], |r| r.get(0))?
            } else {
                None
            };
            // The message at the mark, as its key (read leniently: a row
            // of the wrong types is no key).
            let at_mark = match (tables, mark) {
                (true, Some(m)) => c
                    .query_row(
                        "SELECT session_id, message_id FROM messages WHERE id = ?1",
                        [m],
                        |r| {
                            Ok((
                                r.get::<_, String>(0).ok(),
                                r.get::<_, Option<String>>(1).unwrap_or(None),
                            ))
                        },
                    )
                    .optional()?
                    .map(|(session, mid)| {
                        message_key(session.as_deref().unwrap_or(""), mid.as_deref(), m)
                    }),
                _ => None,
            };
            Ok((tables, ledger, max_id, at_mark))
        })
        .map_err(|e| fail(path, "cannot read the database's schema", &e))?;
        if !tables {
            return Err(Error::io(
                path,
                std::io::Error::other(
                    "not a Goose database: no `sessions` and `messages` tables (Goose 1.10 \
                     and later keep their sessions in them)",
                ),
            ));
        }
        let moved = at_mark.is_some_and(|k| {
            cursor
                .guards
                .get("messages")
                .is_some_and(|&g| g != guard_of(&k))
        });
        if mark.is_some_and(|m| max_id.unwrap_or(0) < m) || moved {
            // Fewer rows than read before, or another message at the mark
            // (a restored backup, then messages written past the old
            // mark; a database made again): read again from the start;
            // what was emitted stays emitted. (A mark's row deleted with
            // later ones kept is a compaction: ids are never reused, the
            // rows after it are new.)
            rescan(cursor);
        }
        let header = Header {
            id: LINEAGE.to_owned(),
            cwd: String::new(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fingerprint(&[b"goose-db", LINEAGE.as_bytes()]),
        };
        let db = Db {
            conn,
            path: path.to_path_buf(),
            ledger,
            usage_read: false,
            sessions: HashMap::new(),
            bytes: 0,
            lineage: Lineages::new(LINEAGE),
        };
        Ok((header, Box::new(db)))
    }
}

/// A message's key: `(session_id, message_id)`, or its row id where it
/// has no `message_id`.
fn message_key(session: &str, message_id: Option<&str>, id: i64) -> String {
    match message_id {
        Some(mid) => format!("{session}/{mid}"),
        None => format!("{session}/#{id}"),
    }
}

/// The guard of the message at the `messages` mark: its key's hash.
fn guard_of(key: &str) -> u64 {
    fingerprint(&[b"goose-guard", key.as_bytes()])
}

/// Reads again from the start ([`Cursor::rescan`]), keeping each
/// session's accumulated values counted (the `acc:` guards): they are
/// what was counted, not marks of the rows, and a rescan forgetting them
/// would count a session's whole accumulated usage again (and a ledger's
/// `carried_forward` row for it).
fn rescan(cursor: &mut Cursor) {
    let kept: Vec<(String, u64)> = cursor
        .guards
        .iter()
        .filter(|(k, _)| k.starts_with("acc:"))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    cursor.rescan();
    cursor.guards.extend(kept);
}

/// A Goose database opened for one read.
struct Db {
    conn: Connection,
    path: PathBuf,
    ledger: bool,
    usage_read: bool,
    sessions: HashMap<String, Session>,
    /// The bytes of the messages read so far (the rows' places, by which
    /// the engine hands a long read over in parts).
    bytes: u64,
    /// Its sessions' lineages (parents, the shard read).
    lineage: Lineages,
}

/// A `messages` row.
struct Msg {
    id: i64,
    message_id: Option<String>,
    session: String,
    /// Its `role`, or what the column holds instead of text.
    role: Result<String, &'static str>,
    /// Its `content_json`, or what the column holds instead of text.
    content: Result<String, &'static str>,
    created: i64,
    metadata: Option<String>,
    /// For a legacy session's message, the messages of its role and
    /// `created` before it ([`Identity::Legacy`]).
    ordinal: Option<u64>,
}

/// A `usage_ledger` row.
struct Ledger {
    id: i64,
    session: String,
    created: i64,
    model: Option<String>,
    usage: Usage,
    carried: bool,
}

/// A session's accumulated columns: input, output, cache read, cache
/// write, total; cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Acc {
    n: [u64; 5],
    cost: f64,
    /// When the session was last written (`updated_at`): the time its
    /// growth is dated by (never compared).
    time: Option<i64>,
}

/// `updated_at` as Unix milliseconds: SQLite's `YYYY-MM-DD HH:MM:SS`
/// (UTC) or RFC 3339.
fn instant(s: &str) -> Option<i64> {
    let t = s.trim().replacen(' ', "T", 1);
    // The zone is in the last 6 bytes (`+01:00`): compared as bytes, as
    // a character may straddle that boundary in a malformed value.
    let tail = &t.as_bytes()[t.len().saturating_sub(6)..];
    let zoned = t.ends_with('Z') || tail.iter().any(|b| matches!(b, b'+' | b'-'));
    let t = if zoned && t.len() > 19 {
        t
    } else {
        format!("{t}Z")
    };
    mem_ingest_parse::parse_iso_millis(&t)
}

fn to_u64(v: Option<i64>) -> u64 {
    v.and_then(|n| u64::try_from(n).ok()).unwrap_or(0)
}

impl Db {
    fn session_of(c: &Connection, id: &str) -> rusqlite::Result<Session> {
        let row: Option<(String, Option<String>, Option<String>)> = c
            .query_row(
                "SELECT working_dir, provider_name, model_config_json FROM sessions WHERE id = ?1",
                [id],
                |r| {
                    // A folder not UTF-8 (a Linux path is any bytes) as
                    // U+FFFD, of another type as none: never a failed read.
                    let dir = match r.get_ref(0)? {
                        rusqlite::types::ValueRef::Text(t) => {
                            String::from_utf8_lossy(t).into_owned()
                        }
                        _ => String::new(),
                    };
                    Ok((dir, r.get(1).unwrap_or(None), r.get(2).unwrap_or(None)))
                },
            )
            .optional()?;
        Ok(row
            .map(|(working_dir, provider, config)| Session {
                working_dir,
                provider,
                model: config
                    .and_then(|j| serde_json::from_str::<Value>(&j).ok())
                    .and_then(|v| v.get("model_name")?.as_str().map(str::to_owned))
                    .filter(|m| !m.is_empty()),
            })
            .unwrap_or_default())
    }

    /// The usage not counted yet: ledger rows after the mark, and the
    /// growth of the accumulated columns of sessions without ledger rows.
    #[allow(clippy::type_complexity)]
    fn read_usage(&self, mark: i64) -> rusqlite::Result<(Vec<Ledger>, Vec<(String, Acc, bool)>)> {
        in_read(&self.conn, |c| {
            let mut ledger = Vec::new();
            if self.ledger {
                let mut st = c.prepare_cached(
                    "SELECT id, session_id, created_timestamp, model, input_tokens, output_tokens, \
                     total_tokens, cache_read_tokens, cache_write_tokens, cost, cost_source \
                     FROM usage_ledger WHERE id > ?1 ORDER BY id",
                )?;
                let rows = st.query_map([mark], |r| {
                    // Read leniently, as the sessions' accumulated
                    // columns: a value of another type (SQLite keeps any
                    // type in any column) as NULL, never a failed read.
                    let int = |i| r.get::<_, Option<i64>>(i).unwrap_or(None);
                    let (i, o, t, cr, cw) = (
                        to_u64(int(4)),
                        to_u64(int(5)),
                        int(6),
                        to_u64(int(7)),
                        to_u64(int(8)),
                    );
                    Ok(Ledger {
                        id: r.get(0)?,
                        session: r.get(1)?,
                        created: int(2).unwrap_or(0),
                        model: r.get(3).unwrap_or(None),
                        usage: Usage {
                            input: i,
                            output: o,
                            cache_read: cr,
                            cache_write: cw,
                            total_tokens: t.map_or(
                                i.saturating_add(o).saturating_add(cr).saturating_add(cw),
                                |t| to_u64(Some(t)),
                            ),
                            cost: r.get::<_, Option<f64>>(9).unwrap_or(None).unwrap_or(0.0),
                        },
                        carried: r.get::<_, Option<String>>(10).unwrap_or(None).as_deref()
                            == Some("carried_forward"),
                    })
                })?;
                for l in rows {
                    ledger.push(l?);
                }
            }
            // Sessions without ledger rows: their accumulated columns.
            let sql = if self.ledger {
                "SELECT id, accumulated_input_tokens, accumulated_output_tokens, \
                 accumulated_cache_read_tokens, accumulated_cache_write_tokens, \
                 accumulated_total_tokens, accumulated_cost, updated_at, \
                 EXISTS (SELECT 1 FROM usage_ledger l WHERE l.session_id = sessions.id) \
                 FROM sessions"
            } else {
                "SELECT id, accumulated_input_tokens, accumulated_output_tokens, \
                 NULL, NULL, accumulated_total_tokens, NULL, updated_at, 0 FROM sessions"
            };
            let mut st = c.prepare(sql)?;
            let rows = st.query_map([], |r| {
                let n = |i| -> rusqlite::Result<u64> {
                    Ok(to_u64(r.get::<_, Option<i64>>(i).unwrap_or(None)))
                };
                let acc = Acc {
                    n: [n(1)?, n(2)?, n(3)?, n(4)?, n(5)?],
                    cost: r.get::<_, Option<f64>>(6).unwrap_or(None).unwrap_or(0.0),
                    time: None,
                };
                let updated: Option<String> = r.get(7).unwrap_or(None);
                let acc = Acc {
                    time: updated.as_deref().and_then(instant),
                    ..acc
                };
                Ok((r.get::<_, String>(0)?, acc, r.get::<_, bool>(8)?))
            })?;
            let mut acc = Vec::new();
            for a in rows {
                acc.push(a?);
            }
            Ok((ledger, acc))
        })
    }

    fn read_messages(&self, mark: i64) -> rusqlite::Result<Vec<Msg>> {
        in_read(&self.conn, |c| {
            let mut st = c.prepare_cached(
                "SELECT id, message_id, session_id, role, content_json, created_timestamp, \
                 metadata_json FROM messages WHERE id > ?1 ORDER BY id LIMIT ?2",
            )?;
            let rows = st.query_map(rusqlite::params![mark, BATCH], |r| {
                Ok(Msg {
                    id: r.get(0)?,
                    message_id: r.get(1).unwrap_or(None),
                    session: r.get(2)?,
                    role: text_of(r, 3)?,
                    content: text_of(r, 4)?,
                    // Another type than an integer: as NULL (no time).
                    created: r.get::<_, Option<i64>>(5).unwrap_or(None).unwrap_or(0),
                    metadata: r.get(6).unwrap_or(None),
                    ordinal: None,
                })
            })?;
            let mut msgs = rows.collect::<rusqlite::Result<Vec<Msg>>>()?;
            // A legacy session's messages are told apart as its file's
            // are (`Identity::Legacy`): by role, `created` and the
            // messages of both before them, counted in the same read.
            let mut ord = c.prepare_cached(
                "SELECT count(*) FROM messages WHERE session_id = ?1 AND role = ?2 \
                 AND created_timestamp = ?3 AND id < ?4",
            )?;
            for m in &mut msgs {
                if let (true, Ok(role)) = (Self::is_legacy(&m.session), &m.role) {
                    let n: i64 = ord
                        .query_row(rusqlite::params![m.session, role, m.created, m.id], |r| {
                            r.get(0)
                        })?;
                    m.ordinal = Some(u64::try_from(n).unwrap_or(0));
                }
            }
            Ok(msgs)
        })
    }

    /// Whether `session` is one Goose may have imported from a legacy
    /// file: its id has the legacy form (`YYYYMMDD_HHMMSS`, which Goose's
    /// new ids take only on a day a legacy session of a later time was
    /// imported). By its id alone, never by a file beside the database:
    /// the same session in two databases, one with its file beside and
    /// one without, is then told apart the same way in both (by a file
    /// beside, a session named `myproj` by `goose session -n` was keyed by
    /// its messages' ids in one and by their places in the other, and
    /// written twice).
    fn is_legacy(session: &str) -> bool {
        legacy::has_legacy_id(session)
    }

    fn sessions_for<'m>(&mut self, ids: impl Iterator<Item = &'m str>) -> rusqlite::Result<()> {
        let missing: Vec<String> = ids
            .filter(|s| !self.sessions.contains_key(*s))
            .map(str::to_owned)
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let got = in_read(&self.conn, |c| {
            missing
                .iter()
                .map(|s| Ok((s.clone(), Self::session_of(c, s)?)))
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        self.sessions.extend(got);
        Ok(())
    }

    /// Reads the sessions' parents when `ids` names one new to this read
    /// and they are needed (records built, `records`, or a shard read):
    /// whether they are.
    fn lineages_for<'m>(
        &mut self,
        ids: impl Iterator<Item = &'m str> + Clone,
        records: bool,
    ) -> Result<bool, Error> {
        if !self.lineage.needed(records) {
            return Ok(false);
        }
        if !self.lineage.knows(ids.clone()) {
            let found = in_read(&self.conn, Lineages::goose)
                .map_err(|e| fail(&self.path, "cannot read its sessions", &e))?;
            self.lineage.learn(found, ids);
        }
        Ok(true)
    }
}

/// The growths of accumulated columns counted so far in the database, in
/// the cursor's guards (an `acc:` key: kept by a rescan; no session's
/// keys, which end in a column's name).
const ACC_SEQ: &str = "acc:#growths";

/// The fingerprint of a growth of a session's accumulated columns, from
/// and to: `total` its `accumulated_total_tokens`, `input` its
/// `accumulated_input_tokens`. A legacy file's first line counts its
/// session's accumulated usage as a growth from nothing, with this
/// fingerprint: the database's growth of the imported session from
/// nothing is then a copy of it.
pub(crate) fn acc_fingerprint(session: &str, total: [u64; 2], input: [u64; 2]) -> u64 {
    fingerprint(&[
        b"goose-acc",
        session.as_bytes(),
        &total[0].to_le_bytes(),
        &total[1].to_le_bytes(),
        &input[0].to_le_bytes(),
        &input[1].to_le_bytes(),
    ])
}

/// The keys of a session's accumulated columns in the cursor's guards.
fn acc_keys(session: &str) -> [String; 6] {
    ["i", "o", "cr", "cw", "t", "cost"].map(|k| format!("acc:{session}:{k}"))
}

fn usage_row<'a>(
    report: &mut Report,
    rows: &mut Rows<'a>,
    arena: &'a Bump,
    key: String,
    fp: u64,
    line: u64,
    byte: u64,
) {
    rows.push(
        report,
        Row {
            key: arena.alloc_str(&key),
            fingerprint: fp,
            line,
            byte,
            record: None,
        },
    );
}

impl Db {
    /// Counts the usage not counted yet (see [`Db::read_usage`]).
    fn usage<'a>(
        &mut self,
        cursor: &mut Cursor,
        arena: &'a Bump,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<(), Error> {
        let mark = cursor.marks.get("usage_ledger").copied().unwrap_or(0);
        let (ledger, acc) = self
            .read_usage(mark)
            .map_err(|e| fail(&self.path, "cannot read its usage", &e))?;
        let named = ledger.iter().map(|l| l.session.as_str());
        let named: Vec<&str> = named.chain(acc.iter().map(|a| a.0.as_str())).collect();
        self.sessions_for(named.iter().copied())
            .map_err(|e| fail(&self.path, "cannot read its sessions", &e))?;
        let sharded = self.lineages_for(named.iter().copied(), false)?;
        for l in &ledger {
            cursor.marks.insert("usage_ledger".into(), l.id);
            let key = format!("ledger:{}", l.id);
            if cursor.was_emitted(&key) || (sharded && !self.lineage.in_shard(&l.session)) {
                // Counted, or another shard's lineage.
                continue;
            }
            // The difference carried into the ledger for a session whose
            // accumulated columns were counted already.
            if l.carried && cursor.guards.contains_key(&acc_keys(&l.session)[4]) {
                continue;
            }
            let s = &self.sessions[&l.session];
            let model = l.model.as_deref().or(s.model.as_deref());
            let at = UsageAt {
                seq: 0,
                line: u64::try_from(l.id).unwrap_or(0),
                time: Some(millis(l.created)),
                reasoning: 0,
            };
            report.add_usage_at(s.provider.as_deref(), model, &l.usage, true, at);
            let u = &l.usage;
            let fp = if l.carried {
                // What the session had counted before the ledger (its
                // accumulated columns, or its legacy file's first line,
                // read before Goose imported it): the fingerprint of that
                // count from nothing, so that it is counted once.
                acc_fingerprint(&l.session, [0, u.total_tokens], [0, u.input])
            } else {
                fingerprint(&[
                    b"goose-ledger",
                    l.session.as_bytes(),
                    &l.created.to_le_bytes(),
                    model.unwrap_or("").as_bytes(),
                    &u.input.to_le_bytes(),
                    &u.output.to_le_bytes(),
                    &u.cache_read.to_le_bytes(),
                    &u.cache_write.to_le_bytes(),
                ])
            };
            usage_row(report, rows, arena, key, fp, at.line, 0);
        }
        for (sid, now, has_ledger) in acc {
            if has_ledger || (sharded && !self.lineage.in_shard(&sid)) {
                continue;
            }
            let keys = acc_keys(&sid);
            let before = Acc {
                n: [0, 1, 2, 3, 4].map(|i| cursor.guards.get(&keys[i]).copied().unwrap_or(0)),
                cost: f64::from_bits(cursor.guards.get(&keys[5]).copied().unwrap_or(0)),
                time: now.time,
            };
            if now == before {
                continue;
            }
            for (i, k) in keys.iter().enumerate().take(5) {
                cursor.guards.insert(k.clone(), now.n[i]);
            }
            cursor.guards.insert(keys[5].clone(), now.cost.to_bits());
            if now.n.iter().zip(before.n).any(|(a, b)| *a < b) {
                // Less than counted before (an import, a rewrite):
                // counted from here on, nothing emitted.
                continue;
            }
            let d = |i: usize| now.n[i] - before.n[i];
            let u = Usage {
                input: d(0),
                output: d(1),
                cache_read: d(2),
                cache_write: d(3),
                total_tokens: if now.n[4] > 0 {
                    d(4)
                } else {
                    d(0).saturating_add(d(1))
                        .saturating_add(d(2))
                        .saturating_add(d(3))
                },
                cost: (now.cost - before.cost).max(0.0),
            };
            let key = format!("acc:{sid}:{}:{}", now.n[0], now.n[4]);
            if cursor.was_emitted(&key) {
                // This growth was counted (a cursor from before the
                // baselines were kept across a rescan).
                continue;
            }
            let s = &self.sessions[&sid];
            // No row carries a growth: each is at line 0, told apart by a
            // place of its own among the database's growths (counted in
            // the cursor, which a rescan keeps), from 1, so that the
            // store keeps a row per growth (`file:0:model#n`) and none
            // replaces another, or a row a release before wrote (`#0`).
            let n = cursor.guards.get(ACC_SEQ).copied().unwrap_or(0) + 1;
            cursor.guards.insert(ACC_SEQ.to_owned(), n);
            let at = UsageAt {
                seq: u32::try_from(n).unwrap_or(u32::MAX),
                line: 0,
                time: now.time,
                reasoning: 0,
            };
            report.add_usage_at(s.provider.as_deref(), s.model.as_deref(), &u, true, at);
            let fp = acc_fingerprint(&sid, [before.n[4], now.n[4]], [before.n[0], now.n[0]]);
            usage_row(report, rows, arena, key, fp, 0, 0);
        }
        Ok(())
    }

    /// Counts and pushes the rows of one message (see [`map::map`]):
    /// keyed `key` (a tool result `<key>/<call id>`).
    #[allow(clippy::too_many_arguments)]
    fn message<'a>(
        &self,
        m: &Msg,
        key: &str,
        content: &[Value],
        ordinal: Option<u64>,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) {
        let line = u64::try_from(m.id).unwrap_or(0);
        let cols = self.sessions.get(&m.session).cloned().unwrap_or_default();
        let id = m.message_id.as_deref().unwrap_or(key);
        let meta: Option<Value> = m
            .metadata
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok());
        let msg = map::Message {
            session: &m.session,
            id,
            role: m.role.as_deref().unwrap_or(""),
            created: m.created,
            line,
            metadata: meta.as_ref(),
            content,
            cols: &cols,
            identity: match ordinal {
                Some(ordinal) => Identity::Legacy { ordinal },
                None => Identity::Id(id),
            },
        };
        let byte = self.bytes;
        map::map(&msg, arena, filter, report, &mut |report, piece| {
            let key = match piece.part {
                None => arena.alloc_str(key),
                Some(cid) => arena.alloc_str(&format!("{key}/{cid}")),
            };
            rows.push(
                report,
                Row {
                    key,
                    fingerprint: piece.fingerprint,
                    line,
                    byte,
                    record: piece.record,
                },
            );
        });
    }
}

impl Database for Db {
    fn next_batch<'a>(
        &mut self,
        cursor: &mut Cursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<bool, Error> {
        if !self.usage_read {
            self.usage_read = true;
            self.usage(cursor, arena, report, rows)?;
            return Ok(true);
        }
        let mark = cursor.marks.get("messages").copied().unwrap_or(0);
        let msgs = self
            .read_messages(mark)
            .map_err(|e| fail(&self.path, "cannot read its messages", &e))?;
        self.sessions_for(msgs.iter().map(|m| m.session.as_str()))
            .map_err(|e| fail(&self.path, "cannot read its sessions", &e))?;
        let records = !filter.builds_none();
        let lineages = self.lineages_for(msgs.iter().map(|m| m.session.as_str()), records)?;
        let full = msgs.len() as i64 == BATCH;
        for m in &msgs {
            // Keyed by (session, message_id): a conversation inserted
            // again under new row ids is not emitted again.
            let key = message_key(&m.session, m.message_id.as_deref(), m.id);
            cursor.marks.insert("messages".into(), m.id);
            cursor.guards.insert("messages".into(), guard_of(&key));
            if cursor.was_emitted(&key) || (lineages && !self.lineage.in_shard(&m.session)) {
                // Emitted, or another shard's lineage: passed over.
                continue;
            }
            let content = match (&m.role, &m.content) {
                (Err(why), _) => Err(format!("role is {why}")),
                (_, Err(why)) => Err(format!("content_json is {why}")),
                (Ok(_), Ok(t)) => match serde_json::from_str::<Value>(t) {
                    Ok(Value::Array(a)) => Ok(a),
                    Ok(_) | Err(_) => Err("content_json is not a JSON array".to_owned()),
                },
            };
            let content: Vec<Value> = match content {
                Ok(a) => a,
                Err(why) => {
                    let line = u64::try_from(m.id).unwrap_or(0);
                    report.skip(
                        line,
                        0,
                        SkipReason::Malformed(format!("message {}: {why}", m.id)),
                    );
                    usage_row(
                        report,
                        rows,
                        arena,
                        key,
                        fingerprint(&[b"goose-bad", &m.id.to_le_bytes()]),
                        line,
                        self.bytes,
                    );
                    continue;
                }
            };
            self.bytes += m.content.as_ref().map_or(0, String::len) as u64;
            let parent = self
                .lineage
                .parent_session(&m.session)
                .filter(|_| records)
                .map(|p| &*arena.alloc_str(&p));
            rows.set_parent_session(parent);
            self.message(m, &key, &content, m.ordinal, arena, filter, report, rows);
        }
        Ok(full)
    }

    fn only_shard(&mut self, k: u32, n: u32) {
        self.lineage.only_shard(k, n);
    }
}
