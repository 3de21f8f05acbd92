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

/// A statement stepped by SQLite's own calls, for a loop over many rows
/// (OpenCode's parts): each column read as one value (SQLite's
/// `sqlite3_column_value`, then the value's type, text and length),
/// where rusqlite's `Row::get_ref` makes three column calls, each
/// checking the statement and taking the connection's mutex, and checks
/// the column's index (a column read cost about twice as many
/// instructions: a sixth of the reading thread's). Only for a
/// connection used by one thread at a time (every connection here is
/// opened `SQLITE_OPEN_NO_MUTEX`): SQLite's values read this way are
/// "unprotected", which is safe where no other thread uses the
/// connection. Finalized when dropped, before its connection (it borrows
/// it).
pub struct RawRows<'c> {
    stmt: std::ptr::NonNull<rusqlite::ffi::sqlite3_stmt>,
    db: *mut rusqlite::ffi::sqlite3,
    columns: i32,
    _conn: std::marker::PhantomData<&'c Connection>,
}

impl<'c> RawRows<'c> {
    /// `sql` prepared on `conn`.
    ///
    /// # Errors
    /// SQLite's, as rusqlite gives them (an empty statement: misuse).
    #[allow(unsafe_code)]
    pub fn prepare(conn: &'c Connection, sql: &str) -> rusqlite::Result<RawRows<'c>> {
        use rusqlite::ffi;
        let len = i32::try_from(sql.len()).map_err(|_| failure(ffi::SQLITE_TOOBIG, None))?;
        // SAFETY: the handle is the open connection's, used on this
        // thread only while `conn` is borrowed; `sql` is `len` bytes
        // (SQLite reads no further, no NUL needed); `stmt` is written
        // (null when the text holds no statement).
        unsafe {
            let db = conn.handle();
            let mut stmt = std::ptr::null_mut();
            let rc = ffi::sqlite3_prepare_v2(
                db,
                sql.as_ptr().cast(),
                len,
                &mut stmt,
                std::ptr::null_mut(),
            );
            if rc != ffi::SQLITE_OK {
                return Err(error_of(db, rc));
            }
            let stmt =
                std::ptr::NonNull::new(stmt).ok_or_else(|| failure(ffi::SQLITE_MISUSE, None))?;
            Ok(RawRows {
                stmt,
                db,
                columns: ffi::sqlite3_column_count(stmt.as_ptr()),
                _conn: std::marker::PhantomData,
            })
        }
    }

    /// Binds `v` to parameter `i` (from 1).
    ///
    /// # Errors
    /// No parameter `i`.
    #[allow(unsafe_code)]
    pub fn bind(&mut self, i: i32, v: i64) -> rusqlite::Result<()> {
        // SAFETY: the statement is live (finalized only when dropped).
        let rc = unsafe { rusqlite::ffi::sqlite3_bind_int64(self.stmt.as_ptr(), i, v) };
        match rc {
            rusqlite::ffi::SQLITE_OK => Ok(()),
            rc => Err(self.error(rc)),
        }
    }

    /// Steps to the next row: `Ok(false)` after the last.
    ///
    /// # Errors
    /// SQLite's (a writer's lock beyond the busy wait among them, as
    /// rusqlite says it: [`in_read`] retries it).
    #[allow(unsafe_code)]
    pub fn step(&mut self) -> rusqlite::Result<bool> {
        // SAFETY: the statement is live.
        match unsafe { rusqlite::ffi::sqlite3_step(self.stmt.as_ptr()) } {
            rusqlite::ffi::SQLITE_ROW => Ok(true),
            rusqlite::ffi::SQLITE_DONE => Ok(false),
            rc => Err(self.error(rc)),
        }
    }

    /// Column `i` of the row stepped to, as rusqlite's `Row::get_ref`
    /// gives it (text in UTF-8, as SQLite converts a UTF-16 database's).
    ///
    /// # Errors
    /// No column `i`; SQLite out of memory converting a text.
    #[allow(unsafe_code)]
    pub fn get(&self, i: usize) -> rusqlite::Result<rusqlite::types::ValueRef<'_>> {
        use rusqlite::ffi;
        use rusqlite::types::ValueRef;
        let i = match i32::try_from(i) {
            Ok(c) if c < self.columns => c,
            _ => return Err(rusqlite::Error::InvalidColumnIndex(i)),
        };
        // SAFETY: the statement is live and on a row (the caller stepped
        // to one: else SQLite gives NULL); `i` is one of its columns. The
        // value, and the text or blob it points to, stay SQLite's until
        // the statement is stepped, reset or finalized, each of which
        // takes `self` mutably: the slice borrows `self`. A text is read
        // (converted) before its length, as SQLite asks.
        unsafe {
            let v = ffi::sqlite3_column_value(self.stmt.as_ptr(), i);
            Ok(match ffi::sqlite3_value_type(v) {
                ffi::SQLITE_INTEGER => ValueRef::Integer(ffi::sqlite3_value_int64(v)),
                ffi::SQLITE_FLOAT => ValueRef::Real(ffi::sqlite3_value_double(v)),
                ffi::SQLITE_TEXT => {
                    let p = ffi::sqlite3_value_text(v);
                    let n = usize::try_from(ffi::sqlite3_value_bytes(v)).unwrap_or(0);
                    if p.is_null() {
                        return Err(failure(ffi::SQLITE_NOMEM, None));
                    }
                    ValueRef::Text(std::slice::from_raw_parts(p, n))
                }
                ffi::SQLITE_BLOB => {
                    let p = ffi::sqlite3_value_blob(v);
                    let n = usize::try_from(ffi::sqlite3_value_bytes(v)).unwrap_or(0);
                    if p.is_null() || n == 0 {
                        ValueRef::Blob(&[])
                    } else {
                        ValueRef::Blob(std::slice::from_raw_parts(p.cast(), n))
                    }
                }
                _ => ValueRef::Null,
            })
        }
    }

    /// Column `i` of the row stepped to as a `T`, or the error
    /// rusqlite's `Row::get` gives (the same kinds, the same column).
    ///
    /// # Errors
    /// As [`RawRows::get`]; a value `T` cannot take.
    pub fn get_as<T: rusqlite::types::FromSql>(&self, i: usize) -> rusqlite::Result<T> {
        use rusqlite::types::FromSqlError;
        use rusqlite::Error;
        let v = self.get(i)?;
        T::column_result(v).map_err(|err| match err {
            FromSqlError::InvalidType => {
                Error::InvalidColumnType(i, self.column_name(i), v.data_type())
            }
            FromSqlError::OutOfRange(n) => Error::IntegralValueOutOfRange(i, n),
            FromSqlError::Utf8Error(e) => Error::Utf8Error(i, e),
            FromSqlError::Other(e) => Error::FromSqlConversionFailure(i, v.data_type(), e),
            e @ FromSqlError::InvalidBlobSize { .. } => {
                Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e))
            }
            e => Error::FromSqlConversionFailure(i, v.data_type(), Box::new(e)),
        })
    }

    #[allow(unsafe_code)]
    fn column_name(&self, i: usize) -> String {
        let Ok(i) = i32::try_from(i) else {
            return String::new();
        };
        // SAFETY: the statement is live; SQLite's name is a NUL-ended
        // string it keeps (null when out of memory).
        unsafe {
            let p = rusqlite::ffi::sqlite3_column_name(self.stmt.as_ptr(), i);
            if p.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        }
    }

    fn error(&self, rc: i32) -> rusqlite::Error {
        error_of(self.db, rc)
    }
}

/// A [`RawRows`] being stepped ([`RawRows::stepping`]): reset when
/// dropped, whatever ended its rows (the last, an error, a `?`), so a
/// statement kept for the next batch holds nothing of the read
/// transaction it ran in (an active statement would fail that
/// transaction's `COMMIT`, and leave it open).
pub struct Stepping<'s, 'c>(&'s mut RawRows<'c>);

impl<'c> std::ops::Deref for Stepping<'_, 'c> {
    type Target = RawRows<'c>;
    fn deref(&self) -> &RawRows<'c> {
        self.0
    }
}

impl<'c> std::ops::DerefMut for Stepping<'_, 'c> {
    fn deref_mut(&mut self) -> &mut RawRows<'c> {
        self.0
    }
}

impl Drop for Stepping<'_, '_> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: the statement is live; a reset cannot fail in a way
        // that leaves it running (its result repeats the last step's).
        unsafe {
            rusqlite::ffi::sqlite3_reset(self.0.stmt.as_ptr());
        }
    }
}

impl<'c> RawRows<'c> {
    /// The statement to bind and step, reset when the [`Stepping`] is
    /// dropped: a statement prepared once and stepped batch after batch.
    pub fn stepping(&mut self) -> Stepping<'_, 'c> {
        Stepping(self)
    }
}

/// The statement kept in `slot`, `sql` prepared on `conn` at its first
/// use (the caller keeps the text the same for the slot), to step: a
/// statement prepared once for a read's batches.
///
/// # Errors
/// As [`RawRows::prepare`].
pub fn kept<'s, 'c>(
    slot: &'s mut Option<RawRows<'c>>,
    conn: &'c Connection,
    sql: &str,
) -> rusqlite::Result<Stepping<'s, 'c>> {
    if slot.is_none() {
        *slot = Some(RawRows::prepare(conn, sql)?);
    }
    Ok(slot.as_mut().expect("prepared above").stepping())
}

/// A row's columns, as rusqlite's rows and [`RawRows`] give them: one
/// reading of a row (a batch's, `opencode::Batch`) for both.
pub trait Columns {
    /// Column `i`'s value (rusqlite's `Row::get_ref`).
    ///
    /// # Errors
    /// No column `i`.
    fn value(&self, i: usize) -> rusqlite::Result<rusqlite::types::ValueRef<'_>>;

    /// Column `i` as a `T` (rusqlite's `Row::get`, its errors).
    ///
    /// # Errors
    /// No column `i`, or a value `T` cannot take.
    fn value_as<T: rusqlite::types::FromSql>(&self, i: usize) -> rusqlite::Result<T>;
}

impl Columns for rusqlite::Row<'_> {
    fn value(&self, i: usize) -> rusqlite::Result<rusqlite::types::ValueRef<'_>> {
        self.get_ref(i)
    }

    fn value_as<T: rusqlite::types::FromSql>(&self, i: usize) -> rusqlite::Result<T> {
        self.get(i)
    }
}

impl Columns for RawRows<'_> {
    fn value(&self, i: usize) -> rusqlite::Result<rusqlite::types::ValueRef<'_>> {
        self.get(i)
    }

    fn value_as<T: rusqlite::types::FromSql>(&self, i: usize) -> rusqlite::Result<T> {
        self.get_as(i)
    }
}

impl Drop for RawRows<'_> {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: finalized once, here; the connection outlives it.
        unsafe {
            rusqlite::ffi::sqlite3_finalize(self.stmt.as_ptr());
        }
    }
}

/// The error of result code `rc` on `db`, with SQLite's message, as
/// rusqlite makes it.
#[allow(unsafe_code)]
fn error_of(db: *mut rusqlite::ffi::sqlite3, rc: i32) -> rusqlite::Error {
    // SAFETY: `db` is an open connection; its message is a NUL-ended
    // string SQLite keeps until the next call on it (copied here).
    let message = unsafe {
        let p = rusqlite::ffi::sqlite3_errmsg(db);
        (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
    };
    // The extended code (SQLITE_BUSY_SNAPSHOT, ...) where SQLite has one.
    // SAFETY: as above.
    let extended = unsafe { rusqlite::ffi::sqlite3_extended_errcode(db) };
    let rc = if extended & 0xff == rc & 0xff {
        extended
    } else {
        rc
    };
    failure(rc, message)
}

fn failure(rc: i32, message: Option<String>) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rc), message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::types::{Value, ValueRef};

    /// Every kind of value, in a UTF-8 and a UTF-16 database: `RawRows`
    /// reads what rusqlite's rows read (text in UTF-8, converted), and
    /// fails where they fail with the same error (text not UTF-8 read as
    /// a `String`, a real read as an integer, a column past the last).
    #[test]
    fn raw_rows_read_what_rusqlite_reads() {
        for encoding in ["UTF-8", "UTF-16le"] {
            let c = Connection::open_in_memory().unwrap();
            c.pragma_update(None, "encoding", encoding).unwrap();
            c.execute_batch(
                "CREATE TABLE t (a);
                 INSERT INTO t VALUES (NULL), (-7), (2.5), ('é ok'), (x'00ff'), (x''),
                   (''), (CAST(x'6d73675fff' AS TEXT)), (9223372036854775807);",
            )
            .unwrap();
            let sql = "SELECT rowid, a FROM t WHERE rowid >= ?1 ORDER BY rowid";
            let mut theirs = Vec::new();
            let mut st = c.prepare(sql).unwrap();
            let mut rows = st.query([2_i64]).unwrap();
            while let Some(r) = rows.next().unwrap() {
                let v = format!("{:?}", r.get_ref(1).unwrap());
                theirs.push((
                    r.get::<_, i64>(0).unwrap(),
                    v,
                    format!("{:?}", r.get::<_, String>(1)),
                    format!("{:?}", r.get::<_, i64>(1)),
                    format!("{:?}", r.get::<_, Value>(1)),
                    format!("{:?}", r.get_ref(2).err()),
                ));
            }
            let mut ours = Vec::new();
            let mut raw = RawRows::prepare(&c, sql).unwrap();
            raw.bind(1, 2).unwrap();
            while raw.step().unwrap() {
                let v = format!("{:?}", raw.get(1).unwrap());
                ours.push((
                    raw.get_as::<i64>(0).unwrap(),
                    v,
                    format!("{:?}", raw.get_as::<String>(1)),
                    format!("{:?}", raw.get_as::<i64>(1)),
                    format!("{:?}", raw.get_as::<Value>(1)),
                    format!("{:?}", raw.get(2).err()),
                ));
            }
            assert_eq!(ours.len(), 8, "{encoding}");
            assert_eq!(ours, theirs, "{encoding}");
            // The UTF-8 text, as text; the damaged one fails as a String.
            assert_eq!(
                ours[2].1,
                format!("{:?}", ValueRef::Text("é ok".as_bytes())),
                "{encoding}"
            );
            if encoding == "UTF-8" {
                assert!(ours[6].2.contains("Utf8Error"), "{}", ours[6].2);
            }
            // After the last row: no value (NULL), as rusqlite's rows end.
            assert!(matches!(raw.get(0), Ok(ValueRef::Null)), "{:?}", raw.get(0));
        }
    }

    /// A kept statement left in the middle of its rows (an error, a `?`)
    /// is reset when its `Stepping` goes: after the `COMMIT` the
    /// connection holds no read transaction (a statement left active
    /// keeps one, on a WAL database a snapshot the agent's checkpoints
    /// cannot pass, until it is reset), and it steps again from the first
    /// row.
    #[test]
    fn a_kept_statement_left_midway_holds_nothing() {
        use rusqlite::TransactionState;
        let d = std::env::temp_dir().join(format!("mi-kept-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&d);
        let w = Connection::open(&d).unwrap();
        w.pragma_update(None, "journal_mode", "wal").unwrap();
        w.execute_batch("CREATE TABLE t (a); INSERT INTO t VALUES (1), (2), (3);")
            .unwrap();
        let c = open_read_only(&d).unwrap();
        let state = || c.transaction_state(Some("main")).unwrap();
        let mut slot = None;
        for _ in 0..2 {
            c.execute_batch("BEGIN DEFERRED").unwrap();
            {
                let mut st = kept(&mut slot, &c, "SELECT a FROM t WHERE a >= ?1").unwrap();
                st.bind(1, 1).unwrap();
                assert!(st.step().unwrap());
                assert_eq!(st.get_as::<i64>(0).unwrap(), 1);
                assert_eq!(state(), TransactionState::Read);
                // Left here, two rows unread.
            }
            c.execute_batch("COMMIT").unwrap();
            assert_eq!(state(), TransactionState::None);
        }
        // A statement stepped without a `Stepping` keeps its read
        // transaction past the COMMIT, until it goes.
        let mut raw = RawRows::prepare(&c, "SELECT a FROM t").unwrap();
        c.execute_batch("BEGIN DEFERRED").unwrap();
        assert!(raw.step().unwrap());
        c.execute_batch("COMMIT").unwrap();
        assert_eq!(state(), TransactionState::Read);
        drop(raw);
        assert_eq!(state(), TransactionState::None);
        drop(slot);
        drop((c, w));
        for f in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{f}", d.display()));
        }
    }

    /// A statement that fails says SQLite's error as rusqlite does: the
    /// code and the message (a busy database is told by its code).
    #[test]
    fn raw_rows_fail_as_rusqlite_fails() {
        let c = Connection::open_in_memory().unwrap();
        let e = RawRows::prepare(&c, "SELECT nope FROM nowhere")
            .err()
            .unwrap();
        let r = c.prepare("SELECT nope FROM nowhere").err().unwrap();
        assert_eq!(e.sqlite_error_code(), r.sqlite_error_code());
        assert_eq!(format!("{e}"), format!("{r}"));
        assert!(format!("{e}").contains("no such table: nowhere"), "{e}");
        let mut st = RawRows::prepare(&c, "SELECT ?1").unwrap();
        assert!(st.bind(2, 1).is_err());
        assert!(RawRows::prepare(&c, "  ").is_err());
    }
}
