//! Sums of the usage rows each sink holds (`--usage-out`'s NDJSON, the
//! dataset's `usage/` parts, the store's `usage` table), to compare with
//! `stats`: the tests of documents read again after a rewind or an edit.

use std::fs;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;

/// The counts compared: input, output, cache read, cache write, total.
pub const FIELDS: [&str; 5] = [
    "input",
    "output",
    "cache_read",
    "cache_write",
    "total_tokens",
];

/// `stats --json`'s counts of [`FIELDS`] (its `usage`).
pub fn of_stats(stats: &Value) -> [i64; 5] {
    FIELDS.map(|f| stats["usage"][f].as_i64().unwrap())
}

/// The sums over `--usage-out`'s rows, and how many rows are
/// corrections.
pub fn of_ndjson(path: &Path) -> ([i64; 5], usize) {
    let mut sums = [0; 5];
    let mut corrections = 0;
    for l in fs::read_to_string(path).unwrap().lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        for (s, f) in sums.iter_mut().zip(FIELDS) {
            *s += v[f].as_i64().unwrap();
        }
        corrections += usize::from(v["correction"] == Value::Bool(true));
    }
    (sums, corrections)
}

/// The sums over the dataset's usage parts (every part under
/// `DIR/usage/`).
pub fn of_dataset(dir: &Path) -> [i64; 5] {
    fn walk(d: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    let mut parts = Vec::new();
    if dir.join("usage").exists() {
        walk(&dir.join("usage"), &mut parts);
    }
    let mut sums = [0; 5];
    for p in parts {
        let r = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&p).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for b in r {
            let b = b.unwrap();
            for (s, f) in sums.iter_mut().zip(FIELDS) {
                let c = b.column_by_name(f).unwrap().as_primitive::<Int64Type>();
                *s += c.values().iter().sum::<i64>();
            }
        }
    }
    sums
}

/// The sums over the store's `usage` table.
pub fn of_store(db: &Path) -> [i64; 5] {
    let c = rusqlite::Connection::open(db).unwrap();
    let q = format!(
        "SELECT {} FROM usage",
        FIELDS.map(|f| format!("coalesce(sum({f}), 0)")).join(", ")
    );
    c.query_row(&q, [], |r| {
        Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])
    })
    .unwrap()
}
