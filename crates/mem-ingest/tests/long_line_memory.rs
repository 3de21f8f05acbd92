//! A line over the maximum line length costs no memory (issue 42): it is
//! skipped while its end is looked for, never held. A global allocator
//! that keeps the peak of the bytes live shows it: a run over a file with
//! a line of zeros longer than the limit stays far under the limit, with
//! one job and with two (a part read into memory whole held the line),
//! for a plain pi file, a plain Codex rollout (no more than pi's peak plus
//! 10%: the part after the line looks back through it without holding
//! it) and a compressed one; the skip is reported
//! at its exact line and byte, and the records after it are read.
//!
//! Its own test binary: the allocator counts the whole process, so the
//! runs are one test, one after the other.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::formats::{Codex, Pi};
use mem_ingest::sink::ForEach;
use mem_ingest::{OwnedRecord, SourceOptions};

mod common;
#[path = "common/peak.rs"]
mod peak;

/// The maximum line length of the runs, and the long line: 64 MiB and
/// 80 MiB of NUL bytes (the default limit, 512 MiB, would need a 600 MB
/// file for the same test).
const MAX_LINE: usize = 64 << 20;
const LONG: usize = 80 << 20;

/// What a run may hold at its peak: well under the limit. The chunked
/// reader's buffer of a decompressed stream grows to 16 MiB before a line
/// is looked at without being held (its bytes are decoded again when the
/// line turns out to be within the limit).
const BOUND: usize = 40 << 20;

const PI_HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/p"}"#;
const CODEX_META: &str = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a","model_provider":"openai"}}"#;

fn codex_user(text: &str) -> String {
    format!(
        r#"{{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}]}}}}"#
    ) + "\n"
}

/// `head`, `LONG` NUL bytes and a newline, `tail`, into `w`.
fn write_file(w: &mut impl Write, head: &str, tail: &str) {
    w.write_all(head.as_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..LONG >> 20 {
        w.write_all(&zeros).unwrap();
    }
    w.write_all(b"\n").unwrap();
    w.write_all(tail.as_bytes()).unwrap();
}

/// Keys, texts and skips (`file:line:byte: reason`) of a backfill of
/// `root`, and the peak of the bytes live while it ran.
fn backfill(
    root: &Path,
    format: Arc<dyn mem_ingest::format::Format>,
    jobs: usize,
) -> (Vec<String>, Vec<String>, usize) {
    let archive = Archive::builder()
        .path(root)
        .format(format)
        .jobs(jobs)
        .source_options(SourceOptions::new().max_line(MAX_LINE))
        .build();
    let mut keys = Vec::new();
    let (summary, peak) = peak::peak_of(|| {
        archive
            .backfill(&mut ForEach(|r: OwnedRecord| {
                keys.push(format!("{} {}", r.key, r.text))
            }))
            .unwrap()
    });
    let skips = summary
        .skips
        .iter()
        .map(|s| {
            let name = Path::new(&s.path).file_name().unwrap().to_string_lossy();
            format!("{name}:{}:{}: {}", s.line, s.byte, s.reason)
        })
        .collect();
    assert_eq!(summary.report.skipped, 1);
    (keys, skips, peak)
}

#[test]
fn a_line_over_the_limit_is_skipped_without_being_held() {
    let dir = common::tmpdir("long-line", "runs");
    let mut peaks = Vec::new();

    // A pi file: the header, a message, the long line, a message.
    let pi = dir.join("pi");
    std::fs::create_dir_all(&pi).unwrap();
    let head = format!("{PI_HEADER}\n{}", common::user_line("a", "before"));
    let mut f = std::fs::File::create(pi.join("s1.jsonl")).unwrap();
    write_file(&mut f, &head, &common::user_line("b", "after"));
    drop(f);
    for jobs in [1, 2] {
        let (keys, skips, peak) = backfill(&pi, Arc::new(Pi), jobs);
        assert_eq!(keys, ["s1:a before", "s1:b after"], "jobs {jobs}");
        assert_eq!(
            skips,
            [format!(
                "s1.jsonl:3:{}: line of {LONG} bytes is longer than the maximum line length",
                head.len()
            )],
            "jobs {jobs}"
        );
        peaks.push((format!("pi, jobs {jobs}"), peak));
    }

    // A plain Codex rollout of the same shape: read in parts, the part
    // after the long line looks back through it for its running context
    // (in windows, without holding it).
    let plain = dir.join("codex-plain");
    std::fs::create_dir_all(&plain).unwrap();
    let head = format!("{CODEX_META}\n{}", codex_user("before"));
    let name = "rollout-2026-01-01T00-00-00-t1.jsonl";
    let mut f = std::fs::File::create(plain.join(name)).unwrap();
    write_file(&mut f, &head, &codex_user("after"));
    drop(f);
    for jobs in [1, 2] {
        let (keys, skips, peak) = backfill(&plain, Arc::new(Codex), jobs);
        assert_eq!(keys, ["t1:L2 before", "t1:L4 after"], "jobs {jobs}");
        assert_eq!(
            skips,
            [format!(
                "{name}:3:{}: line of {LONG} bytes is longer than the maximum line length",
                head.len()
            )],
            "jobs {jobs}"
        );
        // No more than pi's run of the same shape, plus 10%.
        let pi = peaks[jobs - 1].1;
        assert!(
            peak <= pi + pi / 10,
            "codex plain, jobs {jobs}: peak {peak} bytes live, pi {pi}"
        );
        peaks.push((format!("codex plain, jobs {jobs}"), peak));
    }

    // A compressed Codex rollout of the same shape.
    let codex = dir.join("codex");
    std::fs::create_dir_all(&codex).unwrap();
    let head = format!("{CODEX_META}\n{}", codex_user("before"));
    let path = codex.join("rollout-2026-01-01T00-00-00-t1.jsonl.zst");
    let mut z = zstd::Encoder::new(std::fs::File::create(&path).unwrap(), 3).unwrap();
    write_file(&mut z, &head, &codex_user("after"));
    z.finish().unwrap();
    for jobs in [1, 2] {
        let (keys, skips, peak) = backfill(&codex, Arc::new(Codex), jobs);
        assert_eq!(keys, ["t1:L2 before", "t1:L4 after"], "jobs {jobs}");
        assert_eq!(
            skips,
            [format!(
                "rollout-2026-01-01T00-00-00-t1.jsonl.zst:3:{}: line of {LONG} bytes is longer than the maximum line length",
                head.len()
            )],
            "jobs {jobs}"
        );
        peaks.push((format!("codex .zst, jobs {jobs}"), peak));
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Every peak under the bound (all of them in the message).
    assert!(
        peaks.iter().all(|(_, peak)| *peak < BOUND),
        "peak bytes live: {peaks:?}"
    );
}
