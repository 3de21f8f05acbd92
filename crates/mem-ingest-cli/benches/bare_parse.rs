//! The bare parse: the fixed reference for issue 15's one-thread target
//! (`mem-ingest stats --jobs 1` at least 1.0 times its throughput on the
//! same file). **Do not change `bare_parse`**: it is the yardstick, and a
//! ratio is only comparable across runs while it stays the same.
//!
//! `bare_parse` reads the corpus file from disk (page cache warm) with a
//! plain `std::fs::File`, 64 KiB per `read` into one buffer; splits it into
//! lines with `memchr` (the partial last line of a chunk is carried to the
//! front of the buffer and completed by the next reads; empty lines are
//! skipped); copies each line into one reused buffer with
//! `simd_json::INPUT_PADDING` bytes of padding and parses it with
//! `simd_json::fill_tape_padded` into one reused `Buffers` and `Tape`; then
//! walks the tape once: the top-level object's `type`, `id`, `parentId`,
//! `timestamp` (a string, not decoded) and `message`, and in the message
//! object `role`, `timestamp` (a number) and `usage` (also read at the top
//! level): `input`, `output`, `cacheRead`, `cacheWrite`, `totalTokens` and
//! `cost.total`, into a small struct that is `black_box`ed. No records, no
//! counting, no text, no deduplication. It asserts inside the timed loop
//! that it parsed every non-blank line of the corpus and found a `type` in
//! each.
//!
//! `mem_ingest_stats_jobs1` runs `mem-ingest stats --json --jobs 1 -q
//! CORPUS` as a subprocess per iteration (process start included) and
//! asserts its line count and that it skipped nothing. The binary is
//! `$MEM_INGEST_BIN` when set (`scripts/bench-ratios.sh` sets it to the
//! release build), else the one cargo built for this bench.
//!
//! The corpus is the one `benches/throughput.rs` uses: `gen-corpus --seed 1`
//! of `MEM_INGEST_BENCH_MB` MB (default 100) in a temp dir.

use std::fs::File;
use std::hint::black_box;
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};
use simd_json::{Node, StaticNode, Tape};

// ---------------------------------------------------------------------------
// Corpus

struct Corpus {
    dir: PathBuf,
    path: PathBuf,
    bytes: u64,
    /// Non-empty lines (the corpus holds no blank ones: checked against
    /// `stats`).
    lines: u64,
}

impl Corpus {
    fn generate() -> Corpus {
        let mb: f64 = std::env::var("MEM_INGEST_BENCH_MB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100.0);
        let dir = std::env::temp_dir().join(format!("mem-ingest-bare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("corpus.jsonl");
        let status = gen_corpus::GenCorpus::new()
            .args(["--seed", "1", "--size-mb", &mb.to_string()])
            .arg(&path)
            .status()
            .expect("run gen-corpus");
        assert!(status.success(), "gen-corpus failed");
        let data = std::fs::read(&path).expect("read corpus");
        let lines = data
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count() as u64;
        eprintln!(
            "corpus: {} ({} bytes, {} lines)",
            path.display(),
            data.len(),
            lines
        );
        Corpus {
            dir,
            path,
            bytes: data.len() as u64,
            lines,
        }
    }
}

impl Drop for Corpus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------
// The bare parse

/// What the walk picks out of one line.
#[derive(Default, Debug)]
struct Bare<'a> {
    ty: &'a str,
    role: &'a str,
    id: &'a str,
    parent_id: &'a str,
    timestamp: &'a str,
    message_timestamp: i64,
    /// input, output, cacheRead, cacheWrite, totalTokens
    usage: [u64; 5],
    cost: f64,
}

/// Tape nodes a value spans.
fn span(n: &Node<'_>) -> usize {
    match n {
        Node::Object { count, .. } | Node::Array { count, .. } => count + 1,
        _ => 1,
    }
}

/// Calls `f(key, value nodes)` for each field of the object at `nodes[0]`.
fn fields<'t, 'a>(nodes: &'t [Node<'a>], mut f: impl FnMut(&'a str, &'t [Node<'a>])) {
    let Some(&Node::Object { len, .. }) = nodes.first() else {
        return;
    };
    let mut i = 1;
    for _ in 0..len {
        let (Node::String(k), Some(v)) = (nodes[i], nodes.get(i + 1)) else {
            return;
        };
        let end = i + 1 + span(v);
        f(k, &nodes[i + 1..end]);
        i = end;
    }
}

fn str_of<'a>(v: &[Node<'a>]) -> &'a str {
    match v[0] {
        Node::String(s) => s,
        _ => "",
    }
}

fn u64_of(v: &[Node<'_>]) -> u64 {
    match v[0] {
        Node::Static(StaticNode::U64(n)) => n,
        Node::Static(StaticNode::I64(n)) => n as u64,
        Node::Static(StaticNode::F64(n)) => n as u64,
        _ => 0,
    }
}

fn f64_of(v: &[Node<'_>]) -> f64 {
    match v[0] {
        Node::Static(StaticNode::U64(n)) => n as f64,
        Node::Static(StaticNode::I64(n)) => n as f64,
        Node::Static(StaticNode::F64(n)) => n,
        _ => 0.0,
    }
}

fn usage(v: &[Node<'_>], out: &mut Bare<'_>) {
    fields(v, |k, v| match k {
        "input" => out.usage[0] = u64_of(v),
        "output" => out.usage[1] = u64_of(v),
        "cacheRead" => out.usage[2] = u64_of(v),
        "cacheWrite" => out.usage[3] = u64_of(v),
        "totalTokens" => out.usage[4] = u64_of(v),
        "cost" => fields(v, |k, v| {
            if k == "total" {
                out.cost = f64_of(v);
            }
        }),
        _ => {}
    });
}

fn walk<'a>(tape: &[Node<'a>]) -> Bare<'a> {
    let mut out = Bare::default();
    fields(tape, |k, v| match k {
        "type" => out.ty = str_of(v),
        "id" => out.id = str_of(v),
        "parentId" => out.parent_id = str_of(v),
        "timestamp" => out.timestamp = str_of(v),
        "usage" => usage(v, &mut out),
        "message" => fields(v, |k, v| match k {
            "role" => out.role = str_of(v),
            "timestamp" => out.message_timestamp = u64_of(v) as i64,
            "usage" => usage(v, &mut out),
            _ => {}
        }),
        _ => {}
    });
    out
}

/// One pass over the file: (lines parsed, lines with a `type`).
fn bare_parse(
    path: &std::path::Path,
    buf: &mut Vec<u8>,
    padded: &mut Vec<u8>,
    buffers: &mut simd_json::Buffers,
    tape_store: &mut Option<Tape<'static>>,
) -> (u64, u64) {
    const CHUNK: usize = 64 << 10;
    let mut file = File::open(path).expect("open corpus");
    let (mut lines, mut typed) = (0u64, 0u64);
    let mut filled = 0; // bytes of `buf` holding data; a partial line from 0
    let mut eof = false;
    while !eof {
        if buf.len() < filled + CHUNK {
            buf.resize(filled + CHUNK, 0);
        }
        let n = file.read(&mut buf[filled..filled + CHUNK]).expect("read");
        let scan_from = filled;
        filled += n;
        eof = n == 0;
        // Complete lines: up to the last newline (everything at EOF).
        let end = if eof {
            filled
        } else {
            match memchr::memrchr(b'\n', &buf[scan_from..filled]) {
                Some(i) => scan_from + i + 1,
                None => continue,
            }
        };
        let mut start = 0;
        while start < end {
            let stop = memchr::memchr(b'\n', &buf[start..end]).map_or(end, |i| start + i);
            let line = &buf[start..stop];
            start = stop + 1;
            if line.is_empty() {
                continue;
            }
            padded.clear();
            padded.extend_from_slice(line);
            padded.extend_from_slice(&[b' '; simd_json::INPUT_PADDING]);
            let mut tape = tape_store.take().unwrap_or_else(Tape::null).reset();
            simd_json::fill_tape_padded(padded, line.len(), buffers, &mut tape)
                .expect("valid JSON");
            let bare = walk(&tape.0);
            typed += u64::from(!bare.ty.is_empty());
            black_box(&bare);
            lines += 1;
            *tape_store = Some(tape.reset());
        }
        buf.copy_within(end..filled, 0);
        filled -= end;
    }
    (lines, typed)
}

// ---------------------------------------------------------------------------
// mem-ingest stats --jobs 1, as a user runs it

fn stats_bin() -> PathBuf {
    std::env::var_os("MEM_INGEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_mem-ingest")))
}

/// Runs `stats --json --jobs 1 -q` on the corpus: (lines, skipped).
fn stats_jobs1(bin: &std::path::Path, corpus: &std::path::Path) -> (u64, u64) {
    let out = Command::new(bin)
        .args(["stats", "--json", "--jobs", "1", "-q"])
        .arg(corpus)
        .output()
        .expect("run mem-ingest");
    assert!(out.status.success(), "mem-ingest stats failed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats JSON");
    let n = |k: &str| v[k].as_u64().expect("a count");
    (n("lines"), n("skipped"))
}

// ---------------------------------------------------------------------------
// The benches

fn benches(c: &mut Criterion, corpus: &Corpus) {
    let bin = stats_bin();
    eprintln!("mem-ingest: {}", bin.display());
    // Both count the same lines.
    assert_eq!(stats_jobs1(&bin, &corpus.path), (corpus.lines, 0));

    let mut g = c.benchmark_group("bare_parse");
    g.throughput(Throughput::Bytes(corpus.bytes));
    g.sampling_mode(SamplingMode::Flat);

    g.bench_function("bare_parse", |b| {
        let mut buf = Vec::new();
        let mut padded = Vec::new();
        let mut buffers = simd_json::Buffers::default();
        let mut tape = Some(Tape::null());
        b.iter(|| {
            let n = bare_parse(&corpus.path, &mut buf, &mut padded, &mut buffers, &mut tape);
            assert_eq!(n, (corpus.lines, corpus.lines));
        })
    });

    g.bench_function("mem_ingest_stats_jobs1", |b| {
        b.iter(|| {
            assert_eq!(stats_jobs1(&bin, &corpus.path), (corpus.lines, 0));
        })
    });

    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
        .configure_from_args();
    let corpus = Corpus::generate();
    benches(&mut c, &corpus);
    c.final_summary();
}
