//! Cursor: the IDE's chats in the global `state.vscdb` (SQLite, WAL) of
//! its user folder, `cursorDiskKV` rows `composerData:<composer>` (a chat)
//! and `bubbleId:<composer>:<bubble>` (a message), JSON values
//! (`../shared/spec/cursor-format.md`; `docs/cursor.md`).
//!
//! Guarded reads: every connection this module opens carries an SQLite
//! authorizer ([`guard`]) that fails any statement reading another table
//! than those listed, or the global store's `ItemTable` at all (it holds
//! auth tokens), or a workspace store's `ItemTable` by any statement but
//! the one reading [`WORKSPACE_KEYS`]. A composer's fields are taken with
//! `json_extract`, so its encryption-key fields never leave SQLite.
//!
//! Read after a cursor (see [`mem_ingest_parse::rows`]): the high-water
//! mark of `cursorDiskKV`'s rowid over chat keys (an `INSERT` into its
//! `ON CONFLICT REPLACE` table moves a rewritten key to a new rowid),
//! guarded by the key at the mark; a bubble whose composer is still
//! `generating` (or lists it in `generatingBubbleIds`) is pending, read
//! again by key until final. A bubble is emitted once, keyed by
//! `(composerId, bubbleId)`; a later rewrite of a final bubble is not
//! emitted again.
//!
//! The CLI's transcripts (`~/.cursor/projects/*/agent-transcripts/`,
//! lines and older `.txt` documents) are the same agent's: this format
//! serves them too, read by the parsing crate's
//! [`mem_ingest_parse::formats::cursor`] (no SQLite in them); a path is a
//! transcript by its extension (`.jsonl`, `.txt`), else a store.
//!
//! Not read (said in `docs/cursor.md`): the CLI's `chats/*/store.db`, and
//! workspace stores' older `aichat` chats.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bumpalo::Bump;
use mem_ingest_parse::format::{BoxedSource, Format, Input};
use mem_ingest_parse::formats::cursor::{self as cli, CursorCli};
use mem_ingest_parse::json::fingerprint;
use mem_ingest_parse::report::UsageAt;
use mem_ingest_parse::rows::{self, Cursor as RowCursor, Database, MapRows, Row, Rows};
use mem_ingest_parse::{Error, Header, Report, Role, RoleFilter, SkipReason, SourceOptions, Usage};
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::opencode::record;
use crate::sqlite::{fail, in_read, open_read_only};

/// The Cursor format.
#[derive(Debug, Clone, Copy, Default)]
pub struct CursorIde;

/// The keys of a workspace store's `ItemTable` that are read: the
/// composers of that folder. No other key, and nothing of the global
/// store's `ItemTable`, is ever read.
pub const WORKSPACE_KEYS: &[&str] = &["composer.composerData"];

/// Chat keys read at most in one batch.
const BATCH: i64 = 256;

const LINEAGE: &str = "cursor";

/// Which store a guarded connection reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// `globalStorage/state.vscdb`: `cursorDiskKV` only.
    Global,
    /// `workspaceStorage/<id>/state.vscdb`: its `ItemTable`'s
    /// [`WORKSPACE_KEYS`] only.
    Workspace,
}

/// A connection to a Cursor store, read-only, with the authorizer of
/// `store` (see the module's docs), and the switch that lets the one
/// `ItemTable` statement be prepared.
///
/// # Errors
/// It cannot be opened.
pub fn guard(path: &Path, store: Store) -> Result<(Connection, Arc<AtomicBool>), Error> {
    let mut conn = open_read_only(path)?;
    let item_ok = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&item_ok);
    let hook = move |ctx: AuthContext<'_>| match ctx.action {
        AuthAction::Select | AuthAction::Transaction { .. } => Authorization::Allow,
        AuthAction::Function { function_name } => {
            if matches!(function_name, "json_extract" | "count") {
                Authorization::Allow
            } else {
                Authorization::Deny
            }
        }
        AuthAction::Read {
            table_name,
            column_name,
        } => {
            let ok = match (store, table_name) {
                (_, "sqlite_master" | "sqlite_schema") => true,
                (Store::Global, "cursorDiskKV") => {
                    matches!(column_name, "key" | "value" | "ROWID" | "rowid" | "")
                }
                (Store::Workspace, "ItemTable") => {
                    flag.load(Ordering::SeqCst) && matches!(column_name, "key" | "value")
                }
                _ => false,
            };
            if ok {
                Authorization::Allow
            } else {
                Authorization::Deny
            }
        }
        _ => Authorization::Deny,
    };
    conn.authorizer(Some(hook))
        .map_err(|e| fail(path, "cannot guard the connection", &e))?;
    Ok((conn, item_ok))
}

/// The composers a workspace store lists, through its guarded connection.
///
/// # Errors
/// Reading failed (or the guard refused).
pub fn workspace_composers(
    conn: &Connection,
    item_ok: &AtomicBool,
) -> rusqlite::Result<Vec<String>> {
    // The one statement allowed to read the ItemTable: prepared with the
    // switch on, run with it off.
    item_ok.store(true, Ordering::SeqCst);
    let st = conn.prepare(&format!(
        "SELECT value FROM ItemTable WHERE key = '{}'",
        WORKSPACE_KEYS[0]
    ));
    item_ok.store(false, Ordering::SeqCst);
    let mut st = st?;
    let v: Option<Vec<u8>> = in_read(conn, |_| {
        st.query_row([], |r| {
            Ok(r.get_ref(0)?.as_bytes().map(<[u8]>::to_vec).ok())
        })
        .optional()
        .map(Option::flatten)
    })?;
    let v: Option<Value> = v.and_then(|b| serde_json::from_slice(&b).ok());
    Ok(v.as_ref()
        .and_then(|v| v.get("allComposers"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("composerId")?.as_str().map(str::to_owned))
        .collect())
}

/// A `file://` (or `vscode-remote://host`) URI's path, percent-decoded.
fn uri_path(uri: &str) -> String {
    let rest = uri
        .strip_prefix("file://")
        .or_else(|| {
            uri.strip_prefix("vscode-remote://")
                .map(|r| r.find('/').map_or("", |i| &r[i..]))
        })
        .unwrap_or(uri);
    let b = rest.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Cursor's user folders that exist: `$XDG_CONFIG_HOME/Cursor/User` (when
/// it exists), `~/.config/Cursor/User`, `~/Library/Application
/// Support/Cursor/User`; each one's `globalStorage`.
pub fn global_dirs() -> (Vec<PathBuf>, Vec<String>) {
    let mut c = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        c.push(PathBuf::from(x).join("Cursor/User/globalStorage"));
    }
    if let Some(h) = std::env::var_os("HOME").map(PathBuf::from) {
        c.push(h.join(".config/Cursor/User/globalStorage"));
        c.push(h.join("Library/Application Support/Cursor/User/globalStorage"));
    }
    c.dedup();
    let tried = c
        .iter()
        .map(|p| p.join("state.vscdb").display().to_string())
        .collect();
    (
        c.into_iter()
            .filter(|p| p.join("state.vscdb").is_file())
            .collect(),
        tried,
    )
}

/// Whether `path` is a CLI transcript's (its lines or its `.txt`
/// document) rather than a store's, as detection tells them apart: a
/// file named as the CLI names its transcripts (`.jsonl`, `.txt`) is one
/// (nothing is opened: every transcript of an archive, at every run);
/// any other is a store when its first bytes are SQLite's header, else a
/// transcript (one under another name, `chat.log`, that detection claimed
/// by its content). An empty file, or one that cannot be read, is a
/// store (as before: reading it says why, naming it). Only a regular file
/// is opened to look: a pipe named as a PATH (`/dev/stdin`) would lose
/// the bytes looked at (the first line of a session read from it), and a
/// FIFO with no writer would block the open; either is not a store, as
/// before the look was taken.
fn is_cli(path: &Path) -> bool {
    if path.extension().is_some_and(|e| e == "jsonl" || e == "txt") {
        return true;
    }
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    use std::io::Read;
    let header = crate::sqlite::SQLITE_HEADER;
    let mut head = Vec::with_capacity(header.len());
    let read =
        std::fs::File::open(path).and_then(|f| f.take(header.len() as u64).read_to_end(&mut head));
    match read {
        Ok(n) => n > 0 && !head.starts_with(header),
        Err(_) => false,
    }
}

impl Format for CursorIde {
    fn name(&self) -> &'static str {
        "cursor"
    }

    /// The global store: `state.vscdb` in a `globalStorage` folder
    /// (workspace stores are read by it, for the composers' folders; a
    /// `.backup` copy is never read); and the CLI's transcripts in an
    /// `agent-transcripts` folder ([`cli::is_transcript`]).
    fn is_session_file(&self, path: &Path) -> bool {
        let store = path.file_name().is_some_and(|n| n == "state.vscdb")
            && path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|n| n == "globalStorage");
        store || cli::is_transcript(path)
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    /// The IDE's global stores' folders and the CLI's `projects/` folder,
    /// each that exists.
    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (mut found, mut tried) = global_dirs();
        let (cli_found, cli_tried) = cli::default_archives();
        found.extend(cli_found);
        tried.extend(cli_tried);
        if found.is_empty() {
            return Err(format!("no Cursor archive: no {}", tried.join(", ")));
        }
        Ok(found)
    }

    /// A CLI transcript's first line ([`cli::detect`]); a store is found
    /// by [`Format::detect_file`].
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        cli::detect(prefix, whole)
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        if is_cli(path) {
            return CursorCli.open(input, path, opts);
        }
        Ok(rows::open(self, path, None, opts))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        if is_cli(path) {
            return CursorCli.resume(input, path, header, context, byte, lines_before, opts);
        }
        rows::open(self, path, Some((header, context)), opts)
    }

    /// A store is read in one task; so is a transcript (small, and read
    /// in order).
    fn needs_running_context(&self) -> bool {
        true
    }

    fn is_rows(&self, path: &Path) -> bool {
        !is_cli(path)
    }

    /// An older `.txt` transcript.
    fn is_document(&self, path: &Path) -> bool {
        is_cli(path) && CursorCli.is_document(path)
    }

    /// A CLI subagent's chat is its parent chat's lineage.
    fn parent(&self, header: &Header) -> Option<String> {
        CursorCli.parent(header)
    }

    /// A database of this agent's tables under any name (a backup copy
    /// named as a PATH), through the reader's own authorizer, as every
    /// read of the store; or a CLI transcript by its place
    /// ([`cli::layout`]: one whose first line no format's detection
    /// claims, damaged or cut, or a `.txt`).
    fn detect_file(&self, path: &Path, prefix: &[u8]) -> bool {
        if is_cli(path) {
            return CursorCli.detect_file(path, prefix);
        }
        crate::sqlite::is_database_file(path, prefix)
            && guard(path, Store::Global)
                .is_ok_and(|(c, _)| crate::sqlite::tables_in(&c, &["cursorDiskKV"]))
    }
}

fn guard_of(key: &[u8]) -> u64 {
    fingerprint(&[b"cursor-guard", key])
}

/// Whether a bubble's tool call is still running: its
/// `toolFormerData.status` is there and not final (`completed`,
/// `success`, `error`, `cancelled`; `../shared/spec/cursor-format.md`).
fn tool_running(b: &Value) -> bool {
    b.pointer("/toolFormerData/status")
        .and_then(Value::as_str)
        .is_some_and(|s| !matches!(s, "completed" | "success" | "error" | "cancelled"))
}

/// A key's bytes, whatever its type (a key not UTF-8 is still a row's
/// key, guarded and skipped as such).
fn key_bytes(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Vec<u8>> {
    Ok(match r.get_ref(i)? {
        rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => t.to_vec(),
        _ => Vec::new(),
    })
}

/// The folder of each composer, from the workspace stores beside the
/// global one (`../workspaceStorage/*/`): the folder `workspace.json`
/// names. A workspace store that cannot be read is passed over (its
/// composers' folders come from their bubbles).
fn folders(global: &Path) -> HashMap<String, String> {
    let mut map = HashMap::new();
    let Some(user) = global.parent().and_then(Path::parent) else {
        return map;
    };
    let Ok(rd) = std::fs::read_dir(user.join("workspaceStorage")) else {
        return map;
    };
    for e in rd.flatten() {
        let dir = e.path();
        let folder = std::fs::read(dir.join("workspace.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| {
                v.get("folder")
                    .or_else(|| v.get("workspace"))
                    .and_then(Value::as_str)
                    .map(uri_path)
            });
        let (Some(folder), true) = (folder, dir.join("state.vscdb").is_file()) else {
            continue;
        };
        let Ok((conn, ok)) = guard(&dir.join("state.vscdb"), Store::Workspace) else {
            continue;
        };
        if let Ok(ids) = workspace_composers(&conn, &ok) {
            for id in ids {
                map.insert(id, folder.clone());
            }
        }
    }
    map
}

impl MapRows for CursorIde {
    fn open(
        &self,
        path: &Path,
        cursor: &mut RowCursor,
    ) -> Result<(Header, Box<dyn Database>), Error> {
        let (conn, _) = guard(path, Store::Global)?;
        let mark = cursor.marks.get("cursorDiskKV").copied();
        let (table, at_mark, max) = in_read(&conn, |c| {
            let table: i64 = c.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'cursorDiskKV'",
                [],
                |r| r.get(0),
            )?;
            let at = match (table > 0, mark) {
                (true, Some(m)) => c
                    .query_row("SELECT key FROM cursorDiskKV WHERE rowid = ?1", [m], |r| {
                        key_bytes(r, 0)
                    })
                    .optional()?,
                _ => None,
            };
            // The largest rowid (the end of the rowid b-tree: no
            // function, which the authorizer refuses).
            let max: Option<i64> = if table > 0 && mark.is_some() {
                c.query_row(
                    "SELECT rowid FROM cursorDiskKV ORDER BY rowid DESC LIMIT 1",
                    [],
                    |r| r.get(0),
                )
                .optional()?
            } else {
                None
            };
            Ok((table > 0, at, max))
        })
        .map_err(|e| fail(path, "cannot read the database's schema", &e))?;
        if !table {
            return Err(Error::io(
                path,
                std::io::Error::other("not Cursor's global store: no `cursorDiskKV` table"),
            ));
        }
        // The spec's guard (`../shared/spec/cursor-format.md`, section 7):
        // a largest rowid below the mark, or another key at it (a restored
        // backup, a VACUUM, the top rows deleted and their rowids taken
        // again), reads again from the start. No row at the mark with
        // rows after it is the usual case, not a sign: Cursor rewrites a
        // key by REPLACE, which moves it to a new rowid, and the row read
        // last is most often the live composer's.
        let moved = at_mark.is_some_and(|k| {
            cursor
                .guards
                .get("cursorDiskKV")
                .is_some_and(|&g| g != guard_of(&k))
        });
        if mark.is_some_and(|m| max.unwrap_or(0) < m) || moved {
            cursor.rescan();
        }
        let header = Header {
            id: LINEAGE.to_owned(),
            cwd: String::new(),
            version: 1,
            timestamp: None,
            parent: None,
            fingerprint: fingerprint(&[b"cursor-db", LINEAGE.as_bytes()]),
        };
        let db = Db {
            conn,
            path: path.to_path_buf(),
            folders: folders(path),
            pending_read: false,
            bytes: 0,
        };
        Ok((header, Box::new(db)))
    }
}

/// What a record takes of a composer (fields read with `json_extract`).
#[derive(Debug, Clone, Default)]
struct Composer {
    generating: bool,
    /// Its chat ended without finishing (`error`, `aborted`): a tool
    /// still running in it never finishes.
    ended: bool,
    generating_ids: Vec<String>,
    model: Option<String>,
    inline: Option<Vec<Value>>,
    /// Its value is not JSON to SQLite (`json_extract` failed on it): a
    /// counted skip at its row; its bubbles read as a chat's not
    /// generating.
    unreadable: Option<String>,
}

struct Db {
    conn: Connection,
    path: PathBuf,
    folders: HashMap<String, String>,
    pending_read: bool,
    /// The bytes of the bubbles read so far (the rows' places, by which
    /// the engine hands a long read over in parts).
    bytes: u64,
}

const COMPOSER_SQL: &str = "SELECT json_extract(value, '$.status'), \
     json_extract(value, '$.generatingBubbleIds'), json_extract(value, '$.modelConfig.modelName'), \
     json_extract(value, '$.conversation') FROM cursorDiskKV WHERE key = ?1";

fn composer_of(c: &Connection, id: &str) -> rusqlite::Result<Option<Composer>> {
    let mut st = c.prepare_cached(COMPOSER_SQL)?;
    let r = st
        .query_row([format!("composerData:{id}")], |r| {
            let status: Option<String> = r.get(0).unwrap_or(None);
            let ids: Option<String> = r.get(1).unwrap_or(None);
            let inline: Option<String> = r.get(3).unwrap_or(None);
            Ok(Composer {
                generating: status.as_deref() == Some("generating"),
                ended: matches!(status.as_deref(), Some("error" | "aborted")),
                generating_ids: ids
                    .and_then(|s| serde_json::from_str::<Vec<String>>(&s).ok())
                    .unwrap_or_default(),
                model: r.get::<_, Option<String>>(2).unwrap_or(None),
                inline: inline.and_then(|s| serde_json::from_str::<Vec<Value>>(&s).ok()),
                unreadable: None,
            })
        })
        .optional();
    match r {
        // A value that is not JSON (cut, damaged, a BLOB that is no JSONB,
        // nested too deep): `json_extract` raises an error, which is this
        // composer's, not the batch's. A busy database is still the
        // batch's (retried, then said).
        Err(rusqlite::Error::SqliteFailure(e, msg))
            if !matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Ok(Some(Composer {
                unreadable: Some(msg.unwrap_or_else(|| e.to_string())),
                ..Composer::default()
            }))
        }
        r => r,
    }
}

/// A chat key read in a batch, with its value (bubbles) and composer.
struct Item {
    rowid: i64,
    composer_id: String,
    /// `None`: a composer's own row.
    bubble: Option<(String, Vec<u8>)>,
    composer: Option<Composer>,
    /// A key that is not UTF-8 text (its bytes): a counted skip.
    bad: Option<Vec<u8>>,
}

impl Db {
    fn read(&self, pending: Option<&[String]>, mark: i64) -> rusqlite::Result<Vec<Item>> {
        in_read(&self.conn, |c| {
            let mut keys: Vec<(i64, Vec<u8>)> = Vec::new();
            match pending {
                Some(p) => {
                    let mut st =
                        c.prepare_cached("SELECT rowid FROM cursorDiskKV WHERE key = ?1")?;
                    for k in p {
                        if let Some(r) = st
                            .query_row([format!("bubbleId:{k}")], |r| r.get(0))
                            .optional()?
                        {
                            keys.push((r, format!("bubbleId:{k}").into_bytes()));
                        }
                    }
                }
                None => {
                    let mut st = c.prepare_cached(
                        "SELECT rowid, key FROM cursorDiskKV WHERE rowid > ?1 AND \
                         ((key >= 'composerData:' AND key < 'composerData;') OR \
                          (key >= 'bubbleId:' AND key < 'bubbleId;')) ORDER BY rowid LIMIT ?2",
                    )?;
                    let rows = st.query_map(rusqlite::params![mark, BATCH], |r| {
                        Ok((r.get(0)?, key_bytes(r, 1)?))
                    })?;
                    for k in rows {
                        keys.push(k?);
                    }
                }
            }
            let mut value = c.prepare_cached("SELECT value FROM cursorDiskKV WHERE key = ?1")?;
            let mut composers: HashMap<String, Option<Composer>> = HashMap::new();
            let mut items = Vec::new();
            for (rowid, key) in keys {
                let key = match String::from_utf8(key) {
                    Ok(k) => k,
                    Err(e) => {
                        items.push(Item {
                            rowid,
                            composer_id: String::new(),
                            bubble: None,
                            composer: None,
                            bad: Some(e.into_bytes()),
                        });
                        continue;
                    }
                };
                let (composer_id, bubble) = if let Some(rest) = key.strip_prefix("bubbleId:") {
                    let Some((cid, bid)) = rest.split_once(':') else {
                        continue;
                    };
                    let v: Vec<u8> = value
                        .query_row([&key], |r| {
                            Ok(match r.get_ref(0)? {
                                rusqlite::types::ValueRef::Text(t)
                                | rusqlite::types::ValueRef::Blob(t) => t.to_vec(),
                                _ => Vec::new(),
                            })
                        })
                        .optional()?
                        .unwrap_or_default();
                    (cid.to_owned(), Some((bid.to_owned(), v)))
                } else {
                    (key["composerData:".len()..].to_owned(), None)
                };
                if !composers.contains_key(&composer_id) {
                    composers.insert(composer_id.clone(), composer_of(c, &composer_id)?);
                }
                let composer = composers[&composer_id].clone();
                items.push(Item {
                    rowid,
                    composer_id,
                    bubble,
                    composer,
                    bad: None,
                });
            }
            Ok(items)
        })
    }

    /// Counts and pushes the rows of one final bubble.
    #[allow(clippy::too_many_arguments)]
    fn bubble<'a>(
        &self,
        cid: &str,
        bid: &str,
        b: &Value,
        comp: &Composer,
        rowid: i64,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) {
        let line = u64::try_from(rowid).unwrap_or(0);
        let row_key: &'a str = arena.alloc_str(&format!("{cid}:{bid}"));
        let fp = fingerprint(&[b"cursor", cid.as_bytes(), bid.as_bytes()]);
        let role = match b.get("type").and_then(Value::as_i64) {
            Some(1) => Role::User,
            _ => Role::Assistant,
        };
        let s = |k: &str| b.get(k).and_then(Value::as_str).filter(|t| !t.is_empty());
        let mut text = String::new();
        let mut kinds: Vec<&'static str> = Vec::new();
        let mut piece = |t: &str, k: &'static str, kinds: &mut Vec<&'static str>| {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(t);
        };
        if let Some(t) = b
            .pointer("/thinking/text")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            piece(t, "thinking", &mut kinds);
        }
        if let Some(t) = s("text")
            .or_else(|| s("rawText"))
            .or_else(|| s("content"))
            .or_else(|| s("message"))
        {
            piece(t, "text", &mut kinds);
        }
        let tool = b.get("toolFormerData").filter(|t| t.is_object());
        if let Some(t) = tool {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("");
            let args = t
                .get("rawArgs")
                .or_else(|| t.get("params"))
                .and_then(Value::as_str)
                .unwrap_or("");
            piece(&format!("{name} {args}"), "toolCall", &mut kinds);
        }
        let project = self
            .folders
            .get(cid)
            .cloned()
            .or_else(|| s("workspaceProjectDir").map(str::to_owned))
            .or_else(|| {
                b.get("workspaceUris")
                    .and_then(|u| u.get(0))
                    .and_then(Value::as_str)
                    .map(uri_path)
            })
            .unwrap_or_default();
        let project: &'a str = arena.alloc_str(&project);
        let session: &'a str = arena.alloc_str(cid);
        let source: &'a str = arena.alloc_str(&format!("cursor:{cid}"));
        let time = b
            .get("timestamp")
            .and_then(Value::as_i64)
            .or_else(|| s("createdAt").and_then(mem_ingest_parse::parse_iso_millis));
        let n = |k: &str| {
            b.pointer(&format!("/tokenCount/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let usage = Usage {
            input: n("inputTokens"),
            output: n("outputTokens"),
            total_tokens: n("inputTokens").saturating_add(n("outputTokens")),
            ..Usage::default()
        };
        let has_usage = usage.total_tokens > 0;
        if has_usage {
            let at = UsageAt {
                seq: 0,
                line,
                time,
                reasoning: 0,
            };
            report.add_usage_at(None, comp.model.as_deref(), &usage, true, at);
        }
        let id: &'a str = arena.alloc_str(bid);
        let rec = report.count_record(role, filter).then(|| {
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&kinds);
            let mut r = record(
                role,
                arena.alloc_str(&text),
                kinds,
                project,
                session,
                source,
                row_key,
                id,
                line,
                time,
            );
            if role == Role::Assistant {
                r.model = comp.model.as_deref().map(|m| &*arena.alloc_str(m));
                r.usage = has_usage.then_some(usage);
            }
            if let Some(t) = tool {
                r.tool_name = t
                    .get("name")
                    .and_then(Value::as_str)
                    .map(|n| &*arena.alloc_str(n));
                r.tool_call_id = t
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .map(|n| &*arena.alloc_str(n));
            }
            r
        });
        rows.push(
            report,
            Row {
                key: row_key,
                fingerprint: fp,
                line,
                byte: self.bytes,
                record: rec,
            },
        );
        // The tool's result, once the call is finished.
        let Some(t) = tool else { return };
        let status = t.get("status").and_then(Value::as_str).unwrap_or("");
        if !matches!(status, "completed" | "success" | "error") {
            return;
        }
        let is_error = status == "error"
            || t.pointer("/additionalData/status").and_then(Value::as_str) == Some("error");
        let result = t.get("result").and_then(Value::as_str).unwrap_or("");
        let out = serde_json::from_str::<Value>(result)
            .ok()
            .and_then(|v| v.get("output").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| result.to_owned());
        let rkey: &'a str = arena.alloc_str(&format!("{cid}:{bid}:result"));
        let rec = report.count_record(Role::ToolResult, filter).then(|| {
            let kinds: &'a [&'a str] = arena.alloc_slice_copy(&["toolResult"]);
            let mut r = record(
                Role::ToolResult,
                arena.alloc_str(&out),
                kinds,
                project,
                session,
                source,
                rkey,
                id,
                line,
                time,
            );
            r.entry = "tool";
            r.tool_name = t
                .get("name")
                .and_then(Value::as_str)
                .map(|n| &*arena.alloc_str(n));
            r.tool_call_id = t
                .get("toolCallId")
                .and_then(Value::as_str)
                .map(|n| &*arena.alloc_str(n));
            r.is_error = Some(is_error);
            r
        });
        rows.push(
            report,
            Row {
                key: rkey,
                fingerprint: fingerprint(&[b"cursor-result", cid.as_bytes(), bid.as_bytes()]),
                line,
                byte: self.bytes,
                record: rec,
            },
        );
    }
}

impl Database for Db {
    fn next_batch<'a>(
        &mut self,
        cursor: &mut RowCursor,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        rows: &mut Rows<'a>,
    ) -> Result<bool, Error> {
        let pending: Option<Vec<String>> = (!self.pending_read).then(|| {
            self.pending_read = true;
            std::mem::take(&mut cursor.pending).into_iter().collect()
        });
        let mark = cursor.marks.get("cursorDiskKV").copied().unwrap_or(0);
        let items = match self.read(pending.as_deref(), mark) {
            Ok(i) => i,
            Err(e) => {
                if let Some(p) = pending {
                    cursor.pending.extend(p);
                }
                return Err(fail(&self.path, "cannot read its chats", &e));
            }
        };
        let full = pending.is_none() && items.len() as i64 == BATCH;
        for it in &items {
            if pending.is_none() {
                cursor.marks.insert("cursorDiskKV".into(), it.rowid);
                let key = match (&it.bad, &it.bubble) {
                    (Some(raw), _) => raw.clone(),
                    (None, Some((bid, _))) => format!("bubbleId:{}:{bid}", it.composer_id).into(),
                    (None, None) => format!("composerData:{}", it.composer_id).into(),
                };
                cursor.guards.insert("cursorDiskKV".into(), guard_of(&key));
            }
            if it.bad.is_some() {
                // A key not UTF-8: counted and skipped once, by its rowid.
                let key = format!("#bad-key:{}", it.rowid);
                if cursor.was_emitted(&key) {
                    continue;
                }
                let line = u64::try_from(it.rowid).unwrap_or(0);
                report.skip(
                    line,
                    0,
                    SkipReason::Malformed(format!("row {}: key is not UTF-8 text", it.rowid)),
                );
                rows.push(
                    report,
                    Row {
                        key: arena.alloc_str(&key),
                        fingerprint: fingerprint(&[b"cursor-bad-key", key.as_bytes()]),
                        line,
                        byte: self.bytes,
                        record: None,
                    },
                );
                continue;
            }
            let comp = it.composer.clone().unwrap_or_default();
            if let (None, Some(why)) = (&it.bubble, &comp.unreadable) {
                // A composer's own row whose value is not JSON: counted
                // and skipped once, by its rowid.
                let key = format!("#bad-composer:{}", it.rowid);
                if !cursor.was_emitted(&key) {
                    let line = u64::try_from(it.rowid).unwrap_or(0);
                    report.skip(
                        line,
                        0,
                        SkipReason::Malformed(format!(
                            "composer {}: its value is not JSON ({why})",
                            it.composer_id
                        )),
                    );
                    rows.push(
                        report,
                        Row {
                            key: arena.alloc_str(&key),
                            fingerprint: fingerprint(&[b"cursor-bad-composer", key.as_bytes()]),
                            line,
                            byte: self.bytes,
                            record: None,
                        },
                    );
                }
                continue;
            }
            let bubbles: Vec<(String, Result<Value, String>)> = match &it.bubble {
                Some((bid, v)) => vec![(
                    bid.clone(),
                    serde_json::from_slice::<Value>(v)
                        .map_err(|e| e.to_string())
                        .and_then(|v| {
                            if v.is_object() {
                                Ok(v)
                            } else {
                                Err("not a JSON object (a JSON null bubble)".to_owned())
                            }
                        }),
                )],
                // A composer of the older shape: its bubbles inline, each
                // id once (the first; the driver would drop a repeat's
                // row, but not the counts it made in the report).
                None => {
                    let mut seen = std::collections::HashSet::new();
                    comp.inline
                        .iter()
                        .flatten()
                        .filter_map(|b| {
                            let bid = b.get("bubbleId")?.as_str()?;
                            seen.insert(bid).then(|| (bid.to_owned(), Ok(b.clone())))
                        })
                        .collect()
                }
            };
            for (bid, b) in bubbles {
                let key = format!("{}:{bid}", it.composer_id);
                if cursor.was_emitted(&key) {
                    continue;
                }
                // No composer yet, or one still generating it, or its tool
                // still running (a tool may finish after its chat stopped
                // generating; its call and result are one object, emitted
                // once final, as OpenCode's tool parts): pending.
                if it.composer.is_none()
                    || comp.generating
                    || comp.generating_ids.contains(&bid)
                    || (!comp.ended && b.as_ref().is_ok_and(tool_running))
                {
                    if it.bubble.is_some() {
                        cursor.pending.insert(key);
                    }
                    continue;
                }
                if let Some((_, v)) = &it.bubble {
                    self.bytes += v.len() as u64;
                }
                match b {
                    Ok(b) => self.bubble(
                        &it.composer_id,
                        &bid,
                        &b,
                        &comp,
                        it.rowid,
                        arena,
                        filter,
                        report,
                        rows,
                    ),
                    Err(why) => {
                        let line = u64::try_from(it.rowid).unwrap_or(0);
                        report.skip(
                            line,
                            0,
                            SkipReason::Malformed(format!("bubble {key}: {why}")),
                        );
                        rows.push(
                            report,
                            Row {
                                key: arena.alloc_str(&key),
                                fingerprint: fingerprint(&[b"cursor", key.as_bytes()]),
                                line,
                                byte: self.bytes,
                                record: None,
                            },
                        );
                    }
                }
            }
        }
        Ok(pending.is_some() || full)
    }
}
