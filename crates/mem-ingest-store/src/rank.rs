//! BM25 exactly as FTS5's `bm25()` computes it, for the default word
//! queries of [`super::search`], with its one slow part done faster.
//!
//! `bm25()` needs, for each phrase of the query, how many rows of the whole
//! index hold it (its IDF), and counts them before the first row is
//! ranked. For a phrase of several tokens (a path, an identifier, a quoted
//! phrase) that count checks the tokens' positions in every row holding
//! them all: 77 ms for `src/pi.rs` in the store of the 1 GB generated
//! archive (91,544 rows), where the 1,000 rows ranked take 1 ms. Here:
//! - a query of one such phrase, unfiltered, whose every match the walk
//!   saw (fewer than [`super::RANKED`]) has its count from the walk: the
//!   rows walked;
//! - else such a phrase is counted by `count(*)` over slices of the rowid
//!   range, and its walk is cut the same way, a slice per thread, each
//!   with a read-only connection of its own ([`on_threads`]);
//! - a phrase of one token is counted as `bm25()` counts it, by FTS5's
//!   `xQueryPhrase`, once per statement: in the walk itself when no
//!   phrase has several tokens (one statement, as with `bm25()`).
//!
//! What a row contributes (the phrase frequencies, the row's length in
//! tokens, the table's row and token counts, the counts asked for) comes
//! from `mi_bm25_parts(records_fts, mask)`, an FTS5 auxiliary function
//! registered through SQLite's C API, the only way to reach them: hence
//! the `unsafe` of this module. The score is then the formula of FTS5's
//! `fts5Bm25Function` (SQLite 3.54), operation for operation, so that the
//! rank is the same `f64`: `tests/it_store.rs` compares them bit for bit.
//! The caller checks `PRAGMA data_version` before and after, so that every
//! connection read the same store.

use std::ffi::{c_int, c_void, CStr};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use rusqlite::{ffi, Connection, OpenFlags};

/// The per-row data `mi_bm25_parts` returns, decoded.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Parts {
    /// Rows in the index.
    pub rows: i64,
    /// Tokens in the index.
    pub tokens: i64,
    /// Tokens in this row.
    pub row_tokens: i64,
    /// Instances of each phrase of the query in this row.
    pub freq: Vec<u32>,
    /// Rows of the index holding each phrase, for the phrases the call
    /// was asked to count (-1 for the others).
    pub hits: Vec<i64>,
}

impl Parts {
    /// Decodes a blob of `mi_bm25_parts`: three little-endian i64, then a
    /// u32 per phrase (its instances), then an i64 per phrase (its rows).
    pub(super) fn decode(b: &[u8]) -> Option<Parts> {
        let i64_at = |i: usize| Some(i64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        let (rows, tokens, row_tokens) = (i64_at(0)?, i64_at(8)?, i64_at(16)?);
        let rest = b.get(24..)?;
        if rest.len() % 12 != 0 {
            return None;
        }
        let (freq, hits) = rest.split_at(rest.len() / 12 * 4);
        Some(Parts {
            rows,
            tokens,
            row_tokens,
            freq: freq
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            hits: hits
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        })
    }
}

/// FTS5's IDF of a phrase that `hits` of `rows` rows hold.
pub(super) fn idf(rows: i64, hits: i64) -> f64 {
    let idf = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
    if idf <= 0.0 {
        1e-6
    } else {
        idf
    }
}

/// FTS5's BM25 of a row (lower is better), from its parts and the IDF of
/// each phrase: `fts5Bm25Function` with no column weights.
pub(super) fn bm25(p: &Parts, idf: &[f64]) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let avgdl = p.tokens as f64 / p.rows as f64;
    let d = p.row_tokens as f64;
    let mut score = 0.0;
    for (f, idf) in p.freq.iter().zip(idf) {
        let f = f64::from(*f);
        score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * d / avgdl)));
    }
    -score
}

/// The store's rowids cut into `n` ranges (at most 16), newest first: the
/// walks and counts of a query run one range per connection and thread.
pub(super) fn slices(conn: &Connection, n: usize) -> rusqlite::Result<Vec<(i64, i64)>> {
    let (lo, hi): (Option<i64>, Option<i64>) =
        // Two subqueries: SQLite reads min() or max() alone from the
        // index, both in one query with a scan of the table.
        conn.query_row(
            "SELECT (SELECT min(row_id) FROM records), (SELECT max(row_id) FROM records)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return Ok(vec![(i64::MIN, i64::MAX)]);
    };
    let n = n.clamp(1, 16) as i64;
    let span = hi.saturating_sub(lo) / n + 1;
    let at = |k: i64| lo.saturating_add(k.saturating_mul(span));
    Ok((0..n)
        .rev()
        .map(|k| {
            let a = if k == 0 { i64::MIN } else { at(k) };
            let b = if k == n - 1 { i64::MAX } else { at(k + 1) - 1 };
            (a, b)
        })
        .collect())
}

/// `f` over each of `tasks` on `threads` threads (this one with `conn`,
/// each other with a read-only connection of its own to `path`, with the
/// functions here registered, opened when it takes its first task), each
/// thread taking the next task not yet taken; results in the order of
/// `tasks`.
pub(super) fn on_threads<T: Sync, R: Send>(
    path: &Path,
    conn: &Connection,
    threads: usize,
    tasks: &[T],
    f: impl Fn(&Connection, &T) -> rusqlite::Result<R> + Sync,
) -> rusqlite::Result<Vec<R>> {
    let next = AtomicUsize::new(0);
    let take = |c: &Connection| -> rusqlite::Result<Vec<(usize, R)>> {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(t) = tasks.get(i) else {
                return Ok(out);
            };
            out.push((i, f(c, t)?));
        }
    };
    let (take, next) = (&take, &next);
    let mut all = std::thread::scope(|s| {
        let others: Vec<_> = (1..threads.min(tasks.len()))
            .map(|_| {
                s.spawn(move || {
                    if next.load(Ordering::Relaxed) >= tasks.len() {
                        return Ok(Vec::new());
                    }
                    let c = Connection::open_with_flags(
                        path,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?;
                    register(&c)?;
                    take(&c)
                })
            })
            .collect();
        let mut all = take(conn)?;
        for t in others {
            all.extend(t.join().unwrap_or_else(|_| {
                Err(rusqlite::Error::SqliteFailure(
                    ffi::Error::new(ffi::SQLITE_ERROR),
                    Some("a search thread failed".into()),
                ))
            })?);
        }
        Ok::<_, rusqlite::Error>(all)
    })?;
    all.sort_unstable_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, r)| r).collect())
}

/// Registers `mi_bm25_parts` with the FTS5 of `conn`.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    create_function(conn, c"mi_bm25_parts", Some(bm25_parts))
}

/// Registers the FTS5 auxiliary function `f` as `name` with the FTS5 of
/// `conn`.
pub(super) fn create_function(
    conn: &Connection,
    name: &CStr,
    f: ffi::fts5_extension_function,
) -> rusqlite::Result<()> {
    let failed = |rc: c_int, what: &str| {
        rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(what.to_owned()))
    };
    // SAFETY: `handle` is the open connection's, used on this thread while
    // `conn` is borrowed. The statement is prepared, stepped and finalized
    // here; the pointer it binds is a local that outlives the step, which
    // is when FTS5 writes the API's address into it (the documented way to
    // reach `fts5_api`: "SELECT fts5(?1)" with `sqlite3_bind_pointer` and
    // the type "fts5_api_ptr"). The API object lives as long as the
    // connection; `xCreateFunction` copies the name.
    #[allow(unsafe_code)]
    unsafe {
        let db = conn.handle();
        let mut stmt: *mut ffi::sqlite3_stmt = ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(failed(rc, "no FTS5 API"));
        }
        let mut api: *mut ffi::fts5_api = ptr::null_mut();
        let bound = ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&raw mut api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        let stepped = ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        if bound != ffi::SQLITE_OK || stepped != ffi::SQLITE_ROW || api.is_null() {
            return Err(failed(ffi::SQLITE_ERROR, "no FTS5 API"));
        }
        if (*api).iVersion < 2 {
            return Err(failed(ffi::SQLITE_ERROR, "FTS5 API too old"));
        }
        let Some(create) = (*api).xCreateFunction else {
            return Err(failed(ffi::SQLITE_ERROR, "no FTS5 xCreateFunction"));
        };
        let rc = create(api, name.as_ptr(), ptr::null_mut(), f, None);
        if rc != ffi::SQLITE_OK {
            return Err(failed(rc, "registering an FTS5 function"));
        }
    }
    Ok(())
}

/// `mi_bm25_parts(records_fts, mask)`: what BM25 needs of the current
/// row, as a blob for [`Parts::decode`]: the same calls as
/// `fts5Bm25Function` and `fts5Bm25GetData` make, the rows of each phrase
/// counted (by `xQueryPhrase`, as there) only for the phrases whose bit is
/// set in `mask`, once per statement.
#[allow(unsafe_code)]
unsafe extern "C" fn bm25_parts(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    unsafe extern "C" fn one(
        _api: *const ffi::Fts5ExtensionApi,
        _fts: *mut ffi::Fts5Context,
        hits: *mut c_void,
    ) -> c_int {
        // SAFETY: `hits` is the `i64` passed to the `xQueryPhrase` call
        // that calls this, alive for all of it.
        unsafe { *hits.cast::<i64>() += 1 };
        ffi::SQLITE_OK
    }
    /// What a statement's first call finds, for its other calls: the
    /// table's rows and tokens, and the phrases' rows counted.
    struct Once {
        rows: i64,
        tokens: i64,
        hits: Vec<i64>,
    }
    unsafe extern "C" fn free_once(p: *mut c_void) {
        // SAFETY: `p` is the `Box<Once>` given to `xSetAuxdata`, which
        // SQLite hands back once, when the statement is done with it.
        drop(unsafe { Box::from_raw(p.cast::<Once>()) });
    }
    // SAFETY: FTS5 calls this with its own API object and the context of
    // the row being returned, both valid for the call, and `n` values;
    // every function pointer is checked before it is called, and every
    // out-parameter is a local or the auxiliary data this function set.
    let parts = unsafe {
        (|| -> Result<Vec<u8>, c_int> {
            let api = api.as_ref().ok_or(ffi::SQLITE_MISUSE)?;
            let ok = |rc: c_int| {
                if rc == ffi::SQLITE_OK {
                    Ok(())
                } else {
                    Err(rc)
                }
            };
            let missing = ffi::SQLITE_MISUSE;
            let phrases = usize::try_from((api.xPhraseCount.ok_or(missing)?)(fts)).unwrap_or(0);
            let mut once = (api.xGetAuxdata.ok_or(missing)?)(fts, 0).cast::<Once>();
            if once.is_null() {
                let mut rows: i64 = 0;
                ok((api.xRowCount.ok_or(missing)?)(fts, &mut rows))?;
                let mut tokens: i64 = 0;
                ok((api.xColumnTotalSize.ok_or(missing)?)(fts, -1, &mut tokens))?;
                let mask = if n >= 1 && !values.is_null() {
                    ffi::sqlite3_value_int64(*values) as u64
                } else {
                    0
                };
                let query = api.xQueryPhrase.ok_or(missing)?;
                let mut counted = vec![-1i64; phrases];
                for (i, h) in counted.iter_mut().enumerate().take(64) {
                    if mask & (1 << i) != 0 {
                        let mut n: i64 = 0;
                        ok(query(
                            fts,
                            i as c_int,
                            (&raw mut n).cast::<c_void>(),
                            Some(one),
                        ))?;
                        *h = n;
                    }
                }
                let b = Box::into_raw(Box::new(Once {
                    rows,
                    tokens,
                    hits: counted,
                }));
                // On failure SQLite frees `b` itself, with `free_once`.
                ok((api.xSetAuxdata.ok_or(missing)?)(
                    fts,
                    b.cast::<c_void>(),
                    Some(free_once),
                ))?;
                once = b;
            }
            let Once { rows, tokens, hits } = once.as_ref().ok_or(missing)?;
            let mut insts: c_int = 0;
            ok((api.xInstCount.ok_or(missing)?)(fts, &mut insts))?;
            let mut freq = vec![0u32; phrases];
            let inst = api.xInst.ok_or(missing)?;
            for i in 0..insts {
                let (mut phrase, mut col, mut off) = (0, 0, 0);
                ok(inst(fts, i, &mut phrase, &mut col, &mut off))?;
                if let Some(f) = usize::try_from(phrase).ok().and_then(|p| freq.get_mut(p)) {
                    *f += 1;
                }
            }
            let mut row_tokens: c_int = 0;
            ok((api.xColumnSize.ok_or(missing)?)(fts, -1, &mut row_tokens))?;
            let mut b = Vec::with_capacity(24 + 12 * phrases);
            b.extend_from_slice(&rows.to_le_bytes());
            b.extend_from_slice(&tokens.to_le_bytes());
            b.extend_from_slice(&i64::from(row_tokens).to_le_bytes());
            for f in &freq {
                b.extend_from_slice(&f.to_le_bytes());
            }
            for h in hits.iter().chain(std::iter::repeat(&-1)).take(phrases) {
                b.extend_from_slice(&h.to_le_bytes());
            }
            Ok(b)
        })()
    };
    // SAFETY: `ctx` is the call's; SQLITE_TRANSIENT has SQLite copy the
    // blob before `parts` is dropped.
    unsafe {
        match parts {
            Ok(b) => ffi::sqlite3_result_blob(
                ctx,
                b.as_ptr().cast::<c_void>(),
                c_int::try_from(b.len()).unwrap_or(0),
                ffi::SQLITE_TRANSIENT(),
            ),
            Err(rc) => ffi::sqlite3_result_error_code(ctx, rc),
        }
    }
}
