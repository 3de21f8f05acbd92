//! Search latency on a record that repeats its word: a store of one
//! session whose one record holds `WORD` N times (default `word`, 100,000
//! times: 500 KB of text; another record holds it once), built through
//! the library in a temporary folder, then `store::search` for that word
//! timed REPS times (default 5) after one untimed run. `BEFORE=M` puts M
//! other words (`filler`) before them: a first match that far into the
//! text. Prints the build, the median and the longest search, and the
//! first hit's snippet.
//!
//! ```sh
//! cargo run --release --example search_repeated -- [N [WORD]]
//! ```
//!
//! (Issue 42: FTS5's `snippet()` was quadratic in the matches inside one
//! record, 6 s for 256 KB of one word.)

use std::path::PathBuf;
use std::time::Instant;

use mem_ingest::archive::Archive;
use mem_ingest_store::{search, Search, SqliteStore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = match args.next() {
        Some(a) => a.parse()?,
        None => 100_000,
    };
    let word = args.next().unwrap_or_else(|| "word".to_owned());
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("search-repeated-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let session = dir.join("2026-01-01T00-00-00-000Z_repeated.jsonl");
    let before: usize = std::env::var("BEFORE")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let text = "filler ".repeat(before) + &vec![word.as_str(); n].join(" ");
    let line = |id: &str, text: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z","message":{{"role":"user","content":"{text}","timestamp":1769904000000}}}}"#
        ) + "\n"
    };
    let header = r#"{"type":"session","version":3,"id":"repeated","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work/proj"}"#;
    let body = format!(
        "{header}\n{}{}",
        line("m0", &text),
        line("m1", "another record, without the word")
    );
    std::fs::write(&session, body)?;
    let db: PathBuf = dir.join("repeated.db");
    let t = Instant::now();
    let mut store = SqliteStore::open(&db)?;
    Archive::builder()
        .paths(vec![session])
        .build()
        .backfill(&mut store)?;
    drop(store);
    println!(
        "store of one record holding {word:?} {n} times after {before} other words \
         ({} bytes): {:.2} s",
        text.len(),
        t.elapsed().as_secs_f64()
    );
    let s = Search {
        query: word.clone(),
        limit: 20,
        ..Search::default()
    };
    let t = Instant::now();
    let hits = search(&db, &s)?;
    println!(
        "first search: {:.2} ms, {} hits",
        t.elapsed().as_secs_f64() * 1000.0,
        hits.len()
    );
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        let again = search(&db, &s)?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(again.len(), hits.len());
    }
    times.sort_by(f64::total_cmp);
    if let Some(max) = times.last() {
        println!(
            "median {:.2} ms, longest {max:.2} ms over {reps} runs",
            times[times.len() / 2]
        );
    }
    if let Some(h) = hits.first() {
        println!("snippet: {}", h.snippet);
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
