//! Reading an agent's live database as a guest: read-only, never
//! `immutable` (the file changes), short read transactions, a writer's
//! lock waited for a bounded time, then a failure naming the database.
//!
//! What a reader leaves: SQLite may create the `-wal` and `-shm` files
//! beside a WAL database when they are missing (as for any reader; the
//! agent uses them too); the database file itself is never written, no
//! checkpoint, VACUUM or journal-mode change is ever run, and
//! `query_only` is set on the connection. In a folder the reader may not
//! write, a WAL database whose `-wal` and `-shm` do not exist cannot be
//! opened read-only (SQLite's rule): it fails, named, with that said.

use std::path::Path;
use std::time::Duration;

use mem_ingest_parse::Error;
use rusqlite::{Connection, ErrorCode, OpenFlags};

/// How long one statement waits for a writer's lock (SQLite's busy
/// handler), and how many times a batch is tried before the database
/// fails for this run.
pub const BUSY_WAIT: Duration = Duration::from_millis(500);
/// See [`BUSY_WAIT`].
pub const BUSY_TRIES: u32 = 3;

/// An error of the database at `path`, with what to do.
pub fn fail(path: &Path, what: &str, e: &rusqlite::Error) -> Error {
    let busy = matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    );
    let msg = if busy {
        format!(
            "{what}: the database is locked by a writer (waited {} ms, {BUSY_TRIES} times): \
             nothing more of it read this run; the next run (or --follow's next poll) \
             reads it from where this one stopped",
            BUSY_WAIT.as_millis()
        )
    } else {
        format!("{what}: {e}")
    };
    Error::io(path, std::io::Error::other(msg))
}

/// Opens the database at `path` read-only (never `immutable`, never
/// creating it), its statements waiting [`BUSY_WAIT`] for a writer.
///
/// # Errors
/// It cannot be opened: the error names it.
pub fn open_read_only(path: &Path) -> Result<Connection, Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        fail(
            path,
            "cannot open the database read-only (a WAL database in a folder this user may \
             not write needs its -wal and -shm files to exist)",
            &e,
        )
    })?;
    // The query planner's stability guarantee: a statement's plan does not
    // depend on the values bound to it, so a kept statement is not
    // prepared again at each new mark bound (SQLite's STAT4 re-prepares
    // one whose range the values bound could narrow: once a batch).
    conn.busy_timeout(BUSY_WAIT)
        .and_then(|()| {
            conn.set_db_config(
                rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
                true,
            )
            .map(drop)
        })
        .and_then(|()| conn.pragma_update(None, "query_only", 1))
        .map_err(|e| fail(path, "cannot set up the read-only connection", &e))?;
    Ok(conn)
}

/// Runs `read` in one read transaction of its own (begun and ended here:
/// none is kept open between batches), tried [`BUSY_TRIES`] times while a
/// writer holds the database.
///
/// # Errors
/// The database stayed busy, or reading failed.
pub fn in_read<T>(
    conn: &Connection,
    mut read: impl FnMut(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let mut tries = 0;
    loop {
        tries += 1;
        // Both statements kept prepared (a batch's read is a few
        // statements: preparing these two at each was one in a hundred of
        // the reading thread's instructions).
        let r = conn
            .prepare_cached("BEGIN DEFERRED")
            .and_then(|mut s| s.execute([]))
            .and_then(|_| read(conn));
        // Ended whatever happened: a read transaction holds nothing after.
        let _ = conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]));
        match r {
            Err(e)
                if tries < BUSY_TRIES
                    && matches!(
                        e.sqlite_error_code(),
                        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    ) =>
            {
                std::thread::sleep(BUSY_WAIT / 4);
            }
            r => return r,
        }
    }
}

/// Whether the database has the table `name`.
///
/// # Errors
/// Reading its schema failed.
pub fn has_table(conn: &Connection, name: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Column `i` of a row as UTF-8 text, or what it holds instead (`NULL`,
/// `a BLOB`, `an integer`, `a real`, `not UTF-8 text`): a row of the
/// wrong type is its format's counted skip, located by its row, never a
/// batch failed (SQLite keeps any type in any column).
///
/// # Errors
/// No column `i`.
pub fn text_of(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Result<String, &'static str>> {
    use rusqlite::types::ValueRef;
    Ok(match r.get_ref(i)? {
        ValueRef::Text(t) => std::str::from_utf8(t)
            .map(str::to_owned)
            .map_err(|_| "not UTF-8 text"),
        ValueRef::Null => Err("NULL"),
        ValueRef::Blob(_) => Err("a BLOB"),
        ValueRef::Integer(_) => Err("an integer"),
        ValueRef::Real(_) => Err("a real"),
    })
}

/// The first bytes of every SQLite database file.
pub(crate) const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";

/// Whether the regular file at `path`, whose first bytes are `prefix`, is
/// a SQLite database with every table of `tables`: a database named as a
/// PATH under a name its agent never gives it (a backup copy) is probed
/// by its schema, opened read-only as for a read (only `sqlite_master` is
/// read). Any failure is a no.
pub fn has_tables(path: &Path, prefix: &[u8], tables: &[&str]) -> bool {
    if !is_database_file(path, prefix) {
        return false;
    }
    let Ok(conn) = open_read_only(path) else {
        return false;
    };
    tables_in(&conn, tables)
}

/// Whether `path` is a regular file whose first bytes, `prefix`, are a
/// SQLite database's header.
pub fn is_database_file(path: &Path, prefix: &[u8]) -> bool {
    prefix.starts_with(SQLITE_HEADER) && path.metadata().is_ok_and(|m| m.is_file())
}

/// Whether the database of `conn` has every table of `tables` (any
/// failure is a no).
pub fn tables_in(conn: &Connection, tables: &[&str]) -> bool {
    in_read(conn, |c| {
        for t in tables {
            if !has_table(c, t)? {
                return Ok(false);
            }
        }
        Ok(true)
    })
    .unwrap_or(false)
}
