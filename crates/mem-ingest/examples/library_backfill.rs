//! Backfills PATHs incrementally through the library, into a sink of its
//! own: no binary, no NDJSON parsed back.
//!
//! ```sh
//! cargo run --release --example library_backfill -- --state FILE PATH...
//! ```
//!
//! Prints the records it received by role, then `records N` as its last
//! line: N is the records this run received. A second run over an
//! unchanged archive prints `records 0`; after lines are appended to a
//! session, exactly their count.
//!
//! The sink encodes on the worker threads (here: the role and the length
//! of the text of each record, from the borrowed `Record<'_>`) and gets its
//! batches in archive order, with the indices deduplication dropped.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use mem_ingest::archive::Archive;
use mem_ingest::sink::{Encoder, Place, Sink};
use mem_ingest::{Error, Record, Role};

/// Counts records by role, and their text bytes.
#[derive(Default)]
struct Tally {
    by_role: BTreeMap<Role, u64>,
    text_bytes: u64,
}

/// What the workers keep of each record.
struct Roles;

impl Encoder for Roles {
    type Batch = Vec<(Role, usize)>;

    fn batch(&self, _bytes: u64) -> Self::Batch {
        Vec::new()
    }

    fn encode(&self, batch: &mut Self::Batch, record: &Record<'_>, _place: Place<'_>) {
        batch.push((record.role, record.text.len()));
    }
}

impl Sink for Tally {
    type Encoder = Roles;

    fn encoder(&self) -> Roles {
        Roles
    }

    fn write(&mut self, batch: Vec<(Role, usize)>, dropped: &[usize]) -> Result<bool, Error> {
        for (i, (role, len)) in batch.into_iter().enumerate() {
            if dropped.binary_search(&i).is_err() {
                *self.by_role.entry(role).or_default() += 1;
                self.text_bytes += len as u64;
            }
        }
        Ok(true)
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut state: Option<PathBuf> = None;
    let mut paths = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--state" => state = args.next().map(PathBuf::from),
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let Some(state) = state else {
        eprintln!("usage: library_backfill --state FILE PATH...");
        return ExitCode::from(2);
    };
    let archive = Archive::builder().paths(paths).state(state).build();
    let mut tally = Tally::default();
    match archive.backfill(&mut tally) {
        Ok(summary) => {
            for (p, e) in &summary.failures {
                eprintln!("error: {p}: {e}");
            }
            for (role, n) in &tally.by_role {
                println!("{:<16} {n}", role.as_str());
            }
            println!("text bytes       {}", tally.text_bytes);
            println!("records {}", summary.written);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
