//! Where redaction's time goes on an NDJSON output (`backfill
//! --no-redact -o FILE`): the keyword search over every text, how many
//! texts a keyword sends to the rules' regexes (by rule), and the time of
//! those. `cargo run --release -p mem-ingest-parse --example redact_scan -- FILE`
use std::time::Instant;

use mem_ingest_parse::redact::Redactor;

fn main() {
    let path = std::env::args().nth(1).expect("an NDJSON file");
    let data = std::fs::read_to_string(&path).expect("readable");
    let texts: Vec<String> = data
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a record line");
            v["text"].as_str().unwrap_or("").to_owned()
        })
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let r = Redactor::get();
    let t = Instant::now();
    let hits = texts.iter().filter(|t| r.may_hold(t.as_bytes())).count();
    let scan = t.elapsed();
    let t = Instant::now();
    let mut found = Vec::new();
    let mut n = 0;
    let mut hit_bytes = 0;
    for x in texts.iter().filter(|t| r.may_hold(t.as_bytes())) {
        hit_bytes += x.len();
        r.find(x, &mut found);
        n += found.len();
    }
    let find = t.elapsed();
    println!(
        "{} texts, {} MB; keyword search {:.3} s ({:.0} MB/s); {} texts hit ({} MB); find over them {:.3} s; {} secrets",
        texts.len(),
        bytes / 1_000_000,
        scan.as_secs_f64(),
        bytes as f64 / 1e6 / scan.as_secs_f64(),
        hits,
        hit_bytes / 1_000_000,
        find.as_secs_f64(),
        n
    );
    for (rule, hits, secs) in r.profile(&texts) {
        println!("{rule:32} {hits:8} windows {secs:.3} s");
    }
}
