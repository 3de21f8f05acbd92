//! The store's floor: SQLite itself. Inserts the records of PATHs into the
//! store's schema with a bare rusqlite loop: one prepared statement, one
//! writer, a commit about every second as `backfill --db` commits, each
//! commit indexing its rows (FTS5) in one statement as the store does. The
//! records are read into memory first, untimed; only the loop is timed.
//!
//! A commit's time is mostly its indexing, which only the commit does, so
//! the rows of a transaction are counted, not timed: each transaction holds
//! as many rows as the one before did per second of its whole time
//! (inserts, index, commit), so that each takes about a second, as the
//! store's do (it commits about every second of the writer's time, which
//! is nearly all SQLite's). A check of the time since the last commit
//! alone never fired: the inserts of a 300 MB archive take under a second,
//! and the loop was one transaction.
//!
//! ```sh
//! cargo run --release --example store_floor -- OUT.db PATH...
//! ```
//!
//! Prints `rows N`, `insert seconds S`, `commits C`.

use std::path::PathBuf;
use std::time::Instant;

use mem_ingest::archive::Archive;
use mem_ingest::sink::ForEach;
use mem_ingest::OwnedRecord;
use mem_ingest_store::{SCHEMA, SCHEMA_VERSION};
use rusqlite::{params, Connection};

/// What each commit of the store indexes.
const INDEX: &str = "INSERT INTO records_fts (rowid, text) SELECT row_id, text FROM records
        WHERE row_id > (SELECT CAST(value AS INTEGER) FROM checkpoint_meta WHERE name = 'indexed_up_to');
    UPDATE checkpoint_meta SET value = (SELECT COALESCE(MAX(row_id), 0) FROM records)
        WHERE name = 'indexed_up_to';";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: store_floor OUT.db PATH...")?);
    let paths: Vec<PathBuf> = args.map(PathBuf::from).collect();
    let mut records = Vec::new();
    Archive::builder()
        .paths(paths)
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| records.push(r)))?;
    let _ = std::fs::remove_file(&out);
    let conn = Connection::open(&out)?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")?;

    conn.execute_batch(&format!(
        "BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    ))?;
    let started = Instant::now();
    let mut commits = 0;
    let mut last = Instant::now();
    // Rows of the next transaction, and of this one so far.
    let mut batch: usize = 1000;
    let mut rows = 0usize;
    conn.execute_batch("BEGIN")?;
    {
        let mut st = conn.prepare(
            "INSERT INTO records (key, row_id, format, project, session, file, source, line, byte,
                id, parent_id, entry, role, kinds, timestamp, text, provider, model, usage_input,
                usage_output, usage_cache_read, usage_cache_write, usage_total_tokens, usage_cost,
                stop_reason, tool_name, tool_call_id, is_error, custom_type, command, exit_code,
                text_bytes, agent_id, message_id, request_id, provisional, fingerprint)
             VALUES (?1, ?2, 'pi', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, NULL,
                NULL, NULL, NULL, NULL, ?31)",
        )?;
        for (i, r) in records.iter().enumerate() {
            let u = r.usage.as_ref();
            let kinds = serde_json::to_string(&r.kinds)?;
            st.execute(params![
                r.key,
                i as i64 + 1,
                r.project,
                r.session,
                r.source,
                r.source,
                r.line as i64,
                r.byte as i64,
                r.id,
                r.parent_id,
                r.entry,
                r.role.as_str(),
                kinds,
                r.timestamp,
                r.text,
                r.provider,
                r.model,
                u.map(|u| u.input as i64),
                u.map(|u| u.output as i64),
                u.map(|u| u.cache_read as i64),
                u.map(|u| u.cache_write as i64),
                u.map(|u| u.total_tokens as i64),
                u.map(|u| u.cost),
                r.stop_reason,
                r.tool_name,
                r.tool_call_id,
                r.is_error,
                r.custom_type,
                r.command,
                r.exit_code,
                i as i64,
            ])?;
            rows += 1;
            if rows >= batch {
                conn.execute_batch(INDEX)?;
                conn.execute_batch("COMMIT; BEGIN")?;
                commits += 1;
                let took = last.elapsed().as_secs_f64().max(1e-3);
                batch = ((rows as f64 / took) as usize).max(1);
                rows = 0;
                last = Instant::now();
            }
        }
    }
    conn.execute_batch(INDEX)?;
    conn.execute_batch("COMMIT")?;
    commits += 1;
    // As the store ends a run: the write-ahead log folded back.
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
    let secs = started.elapsed().as_secs_f64();
    println!("rows {}", records.len());
    println!("insert seconds {secs:.3}");
    println!("commits {commits}");
    Ok(())
}
