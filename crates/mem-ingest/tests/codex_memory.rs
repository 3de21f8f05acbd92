//! A Codex rollout costs the memory a pi file of its size costs (issue
//! 42: "memory does not depend on file size" holds for every agent). A
//! global allocator that keeps the peak of the bytes live shows it: a
//! backfill of a 64 MiB rollout (plain, then compressed) into owned
//! records, with one job and with two, peaks no higher than the same
//! backfill of a pi file of the same size and longest line, plus 10%,
//! plus what deduplication keeps for each distinct entry. Before, a rollout was read as one task whose records
//! were all held until its end: the peak grew with the file.
//!
//! The records are checked too: a rollout read in parts finds the running
//! context (model, cumulative token total, messages waiting for their
//! twin) where each part starts, so the records, their models and the
//! usage are those of a read from the start.
//!
//! Its own test binary: the allocator counts the whole process, so the
//! runs are one test, one after the other.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::Format;
use mem_ingest::formats::{Codex, Pi};
use mem_ingest::sink::ForEach;
use mem_ingest::{OwnedRecord, Role};

mod common;
#[path = "common/peak.rs"]
mod peak;

/// The size of the files: eight parts of 8 MiB.
const SIZE: usize = 64 << 20;

/// What deduplication keeps per distinct entry, at most (bytes): its
/// fingerprint in the lineage's set, with the set's room to grow.
const PER_ENTRY: usize = 48;

/// A pi file of about `size` bytes whose longest line is `longest` bytes.
fn pi_file(size: usize, longest: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + (64 << 10));
    out.extend_from_slice(br#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a"}"#);
    out.push(b'\n');
    let mut i = 0;
    while out.len() < size {
        let line = common::user_line(&format!("e{i}"), &format!("prompt {i}"));
        let pad = if i % 9 == 5 {
            longest.saturating_sub(line.len())
        } else {
            150
        };
        let line = common::user_line(&format!("e{i}"), &format!("prompt {i} {}", "x".repeat(pad)));
        out.extend_from_slice(line.as_bytes());
        i += 1;
    }
    out
}

struct Run {
    records: usize,
    by_role: [usize; 4],
    models: Vec<(String, usize)>,
    tokens: u64,
    distinct: u64,
    peak: usize,
}

fn backfill(root: &Path, format: Arc<dyn Format>, jobs: usize) -> Run {
    let archive = Archive::builder()
        .path(root)
        .format(format)
        .jobs(jobs)
        .build();
    let mut by_role = [0; 4];
    let mut models: Vec<(String, usize)> = Vec::new();
    let mut records = 0;
    let (summary, peak) = peak::peak_of(|| {
        archive
            .backfill(&mut ForEach(|r: OwnedRecord| {
                records += 1;
                by_role[match r.role {
                    Role::User => 0,
                    Role::Assistant => 1,
                    Role::ToolResult => 2,
                    _ => 3,
                }] += 1;
                let m = r.model.clone().unwrap_or_default();
                match models.last_mut() {
                    Some((last, n)) if *last == m => *n += 1,
                    _ => models.push((m, 1)),
                }
            }))
            .unwrap()
    });
    assert_eq!(summary.files_failed, 0);
    Run {
        records,
        by_role,
        models,
        tokens: summary.report.usage.total_tokens,
        distinct: summary.report.entries.total(),
        peak,
    }
}

#[test]
fn a_rollout_costs_what_a_pi_file_of_its_size_costs() {
    let dir = common::tmpdir("codex-memory", "runs");
    let (text, turns) = common::codex_rollout("t1", SIZE);
    let longest = text.split(|b| *b == b'\n').map(<[u8]>::len).max().unwrap();
    let pi = dir.join("pi");
    std::fs::create_dir_all(&pi).unwrap();
    std::fs::write(pi.join("s1.jsonl"), pi_file(text.len(), longest)).unwrap();
    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::write(plain.join("rollout-2026-01-01T00-00-00-t1.jsonl"), &text).unwrap();
    let zst = dir.join("zst");
    std::fs::create_dir_all(&zst).unwrap();
    let mut z = zstd::Encoder::new(
        std::fs::File::create(zst.join("rollout-2026-01-01T00-00-00-t1.jsonl.zst")).unwrap(),
        3,
    )
    .unwrap();
    z.write_all(&text).unwrap();
    z.finish().unwrap();
    drop(text);

    // What a read from the start gives: four records a turn, the model
    // of each turn's context on its assistant records, the last total.
    let models: Vec<(String, usize)> = (0..turns.div_ceil(100))
        .map(|k| {
            let n = (turns - 100 * k).min(100);
            (format!("gpt-{k}"), n)
        })
        .collect();
    let mut peaks = Vec::new();
    for jobs in [1, 2] {
        let p = backfill(&pi, Arc::new(Pi), jobs);
        peaks.push((format!("pi, jobs {jobs}"), p.peak));
        for (what, root) in [("plain", &plain), ("zst", &zst)] {
            let r = backfill(root, Arc::new(Codex), jobs);
            let at = format!("{what}, jobs {jobs}");
            assert_eq!(r.records, 4 * turns, "{at}");
            assert_eq!(r.by_role, [turns, 2 * turns, turns, 0], "{at}");
            // Assistant records carry the model: two a turn; user and tool
            // records none, between them.
            let with_model: Vec<(String, usize)> = r
                .models
                .iter()
                .filter(|(m, _)| !m.is_empty())
                .cloned()
                .collect();
            let merged = models
                .iter()
                .map(|(m, n)| (m.clone(), 2 * n))
                .collect::<Vec<_>>();
            let mut got: Vec<(String, usize)> = Vec::new();
            for (m, n) in with_model {
                match got.last_mut() {
                    Some((last, k)) if *last == m => *k += n,
                    _ => got.push((m, n)),
                }
            }
            assert_eq!(got, merged, "{at}");
            assert_eq!(r.tokens, 2 * 1000 * turns as u64, "{at}");
            assert_eq!(r.distinct, 1 + 9 * turns as u64, "{at}");
            let bound = p.peak + p.peak / 10 + PER_ENTRY * (1 + 9 * turns);
            peaks.push((at.clone(), r.peak));
            assert!(
                r.peak <= bound,
                "{at}: peak {} bytes, bound {bound} (pi {}); all: {peaks:?}",
                r.peak,
                p.peak
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("peak bytes live: {peaks:?}");
}
