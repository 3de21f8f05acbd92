//! Search latency on a store: each query run REPS times (default 5) in
//! this process through `store::search` (`--limit 20`), after one untimed
//! run each; prints every query's median and hits, then p50 and p95 over
//! all timed runs.
//!
//! ```sh
//! cargo run --release --example search_latency -- STORE.db QUERY...
//! ```

use std::path::PathBuf;
use std::time::Instant;

use mem_ingest_store::{search, Search};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let db = PathBuf::from(
        args.next()
            .ok_or("usage: search_latency STORE.db QUERY...")?,
    );
    let queries: Vec<String> = args.collect();
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let mut all = Vec::new();
    for q in &queries {
        let s = Search {
            query: q.clone(),
            limit: 20,
            ..Search::default()
        };
        let hits = search(&db, &s)?.len();
        let mut times = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            let n = search(&db, &s)?.len();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(n, hits);
        }
        times.sort_by(f64::total_cmp);
        println!("{:>9.2} ms  {hits:>3} hits  {q}", times[times.len() / 2]);
        all.extend(times);
    }
    all.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        all[((all.len() as f64 * p).ceil() as usize)
            .saturating_sub(1)
            .min(all.len() - 1)]
    };
    println!(
        "p50 {:.2} ms  p95 {:.2} ms  over {} runs",
        pct(0.50),
        pct(0.95),
        all.len()
    );
    Ok(())
}
