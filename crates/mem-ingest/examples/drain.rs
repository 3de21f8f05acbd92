//! Drains one session file through `PiSessionSource` (or, with `--mmap`,
//! `MmapSessionSource`) and prints the counts: the smallest program that
//! reads a file the way the library does, for peak-memory measurements.
//!
//! ```text
//! cargo run --release --example drain -- [--mmap] FILE...
//! ```

use std::process::ExitCode;
use std::time::Instant;

use mem_ingest::{MmapSessionSource, PiSessionSource, SourceOptions};

fn main() -> ExitCode {
    let mut mmap = false;
    let mut files = Vec::new();
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--mmap" => mmap = true,
            _ => files.push(a),
        }
    }
    if files.is_empty() {
        eprintln!("usage: drain [--mmap] FILE...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for f in &files {
        let t = Instant::now();
        let report = if mmap {
            // SAFETY: the caller of this example names files no one writes
            // while it reads (a closed archive).
            unsafe { MmapSessionSource::open(f, &SourceOptions::default()) }.and_then(|s| s.drain())
        } else {
            PiSessionSource::open(f).and_then(|s| s.drain())
        };
        match report {
            Ok(r) => {
                let secs = t.elapsed().as_secs_f64();
                println!(
                    "{f}: {} bytes, {} lines, {} records, {} skipped, {} repaired, {:.1} MB/s",
                    r.bytes,
                    r.lines,
                    r.records,
                    r.skipped,
                    r.repaired,
                    r.bytes as f64 / 1e6 / secs
                );
                failed |= r.skipped > 0;
            }
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
