//! Throughput, side by side on one generated corpus (issue 4).
//!
//! 1. floor: read + `memchr` line split only (`LineReader`);
//! 2. baseline: serde_json into borrowed structs per line, building the
//!    same records (role, flattened text, ids) the way a careful user would;
//! 3. simd-json's own borrowed DOM per line, reused buffers, no records;
//! 4. mem-ingest: lines in memory to records (`PiSessionSource` over `&[u8]`);
//! 5. mem-ingest end to end from a file: `PiSessionSource::open` (chunked
//!    reader) and `MmapSessionSource::open` beside it.
//!
//! The corpus is generated at start by `gen-corpus` (seed 1) into a temp
//! dir: 100 MB, or `MEM_INGEST_BENCH_MB`. Every bench asserts the count it
//! produced inside the timed loop.

use std::borrow::Cow;
use std::fmt;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};
use mem_ingest::line_reader::{LineEvent, LineReader};
use mem_ingest::{
    MmapSessionSource, PiSessionSource, RecordSource, Role, SliceSessionSource, SourceOptions,
};
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;

// ---------------------------------------------------------------------------
// Corpus

struct Corpus {
    dir: PathBuf,
    path: PathBuf,
    data: Vec<u8>,
    lines: u64,
    records: u64,
}

impl Corpus {
    fn generate() -> Corpus {
        let mb: f64 = std::env::var("MEM_INGEST_BENCH_MB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100.0);
        let dir = std::env::temp_dir().join(format!("mem-ingest-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("corpus.jsonl");
        let status = gen_corpus::GenCorpus::new()
            .args(["--seed", "1", "--size-mb", &mb.to_string()])
            .arg(&path)
            .status()
            .expect("run gen-corpus");
        assert!(status.success(), "gen-corpus failed");
        let data = std::fs::read(&path).expect("read corpus");
        let lines = memchr::memchr_iter(b'\n', &data).count() as u64;
        let report = PiSessionSource::from_reader(&data[..], &path)
            .expect("header")
            .drain()
            .expect("drain");
        assert_eq!(report.skipped, 0, "the corpus must parse without skips");
        assert_eq!(report.lines, lines);
        eprintln!(
            "corpus: {} ({} bytes, {} lines, {} records)",
            path.display(),
            data.len(),
            lines,
            report.records
        );
        Corpus {
            dir,
            path,
            data,
            lines,
            records: report.records,
        }
    }
}

impl Drop for Corpus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.split(|&b| b == b'\n').filter(|l| !l.is_empty())
}

// ---------------------------------------------------------------------------
// (2) baseline: serde_json into borrowed structs

/// A string that borrows from the line unless it holds escapes.
#[derive(Deserialize)]
#[serde(transparent)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

impl Str<'_> {
    fn as_str(&self) -> &str {
        &self.0
    }
}

#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(rename = "type", borrow)]
    ty: Str<'a>,
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(rename = "parentId", borrow)]
    parent_id: Option<Str<'a>>,
    #[serde(borrow)]
    timestamp: Option<Str<'a>>,
    #[serde(borrow)]
    message: Option<Message<'a>>,
    #[serde(borrow)]
    summary: Option<Str<'a>>,
    #[serde(rename = "customType", borrow)]
    custom_type: Option<Str<'a>>,
    #[serde(borrow)]
    content: Option<Content<'a>>,
    #[serde(borrow)]
    provider: Option<Str<'a>>,
    #[serde(borrow)]
    model: Option<Str<'a>>,
    usage: Option<UsageDe>,
    // the header
    #[serde(borrow)]
    cwd: Option<Str<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message<'a> {
    #[serde(borrow)]
    role: Option<Str<'a>>,
    #[serde(borrow)]
    content: Option<Content<'a>>,
    timestamp: Option<serde_json::Value>,
    #[serde(borrow)]
    provider: Option<Str<'a>>,
    #[serde(borrow)]
    model: Option<Str<'a>>,
    usage: Option<UsageDe>,
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
    #[serde(borrow)]
    tool_name: Option<Str<'a>>,
    #[serde(borrow)]
    tool_call_id: Option<Str<'a>>,
    is_error: Option<bool>,
    #[serde(borrow)]
    custom_type: Option<Str<'a>>,
    #[serde(borrow)]
    command: Option<Str<'a>>,
    #[serde(borrow)]
    output: Option<Str<'a>>,
    exit_code: Option<i64>,
    #[serde(borrow)]
    summary: Option<Str<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct UsageDe {
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    total_tokens: Option<u64>,
    cost: Option<CostDe>,
}

#[derive(Deserialize, Default)]
struct CostDe {
    total: Option<f64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Str<'a>>,
    #[serde(borrow)]
    text: Option<Str<'a>>,
    #[serde(borrow)]
    thinking: Option<Str<'a>>,
    redacted: Option<bool>,
    #[serde(borrow)]
    name: Option<Str<'a>>,
    arguments: Option<serde_json::Value>,
    #[serde(borrow)]
    data: Option<Str<'a>>,
    #[serde(borrow)]
    mime_type: Option<Str<'a>>,
}

/// `content`: a string, an array of blocks, or anything else (empty).
enum Content<'a> {
    Text(Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("content")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::new();
                while let Some(b) = seq.next_element()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Content::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Content::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Content::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Content::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Content::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Content::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// The record the baseline builds: what a user needs from a line.
#[allow(dead_code)] // fields are built to be paid for, read through black_box
struct BaseRecord<'a> {
    role: Role,
    text: Cow<'a, str>,
    kinds: Vec<&'a str>,
    key: String,
    id: Option<&'a str>,
    parent_id: Option<&'a str>,
    timestamp: Option<i64>,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    usage: Option<[u64; 5]>,
    cost: f64,
    tool_name: Option<&'a str>,
    tool_call_id: Option<&'a str>,
    is_error: Option<bool>,
    stop_reason: Option<&'a str>,
    custom_type: Option<&'a str>,
    command: Option<&'a str>,
    exit_code: Option<i64>,
}

fn s<'x>(v: &'x Option<Str<'_>>) -> Option<&'x str> {
    v.as_ref().map(Str::as_str)
}

fn iso_ms(s: &str) -> Option<i64> {
    mem_ingest::parse_iso_millis(s)
}

/// Flattened text with the crate's rules: pieces joined with `\n`.
fn flatten<'a>(content: &'a Option<Content<'a>>, kinds: &mut Vec<&'a str>) -> Cow<'a, str> {
    let blocks = match content {
        Some(Content::Text(t)) => {
            kinds.push("text");
            return Cow::Borrowed(t);
        }
        Some(Content::Blocks(b)) => b,
        _ => return Cow::Borrowed(""),
    };
    let mut pieces: Vec<Cow<'a, str>> = Vec::new();
    for b in blocks {
        let Some(kind) = s(&b.ty) else { continue };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
        match kind {
            "text" => pieces.push(Cow::Borrowed(s(&b.text).unwrap_or(""))),
            "thinking" if b.redacted != Some(true) => {
                pieces.push(Cow::Borrowed(s(&b.thinking).unwrap_or("")))
            }
            "toolCall" => {
                let args = match &b.arguments {
                    Some(a) => serde_json::to_string(a).expect("serialise"),
                    None => "{}".to_owned(),
                };
                pieces.push(Cow::Owned(format!("{} {args}", s(&b.name).unwrap_or(""))));
            }
            "image" => {
                let n = s(&b.data).map_or(0, |d| {
                    d.bytes()
                        .filter(|b| {
                            b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
                        })
                        .count()
                        * 3
                        / 4
                });
                pieces.push(Cow::Owned(format!(
                    "[image {}, {n} bytes]",
                    s(&b.mime_type).unwrap_or("unknown")
                )));
            }
            _ => {}
        }
    }
    match pieces.len() {
        0 => Cow::Borrowed(""),
        1 => pieces.pop().expect("one"),
        _ => Cow::Owned(pieces.join("\n")),
    }
}

fn role_of(ty: &str, role: Option<&str>) -> Option<Role> {
    Some(match (ty, role) {
        ("message", Some("user")) => Role::User,
        ("message", Some("assistant")) => Role::Assistant,
        ("message", Some("toolResult")) => Role::ToolResult,
        ("message", Some("bashExecution")) => Role::BashExecution,
        ("message", Some("custom" | "hookMessage")) | ("custom_message", _) => Role::Custom,
        ("message", Some("system" | "branchSummary" | "compactionSummary"))
        | ("compaction" | "branch_summary", _) => Role::System,
        _ => return None,
    })
}

/// One line to a record, serde_json style. `session` is the header id.
fn baseline_record<'a>(e: &'a Entry<'a>, session: &str, line_no: u64) -> Option<BaseRecord<'a>> {
    let ty = e.ty.as_str();
    let m = e.message.as_ref();
    let role = role_of(ty, m.and_then(|m| s(&m.role)))?;
    let mut kinds = Vec::new();
    let text: Cow<'a, str> = match (ty, m) {
        ("message", Some(m)) => match s(&m.role) {
            Some("bashExecution") => Cow::Owned(format!(
                "$ {}\n{}",
                s(&m.command).unwrap_or(""),
                s(&m.output).unwrap_or("")
            )),
            Some("branchSummary" | "compactionSummary") => {
                Cow::Borrowed(s(&m.summary).unwrap_or(""))
            }
            _ => flatten(&m.content, &mut kinds),
        },
        ("compaction" | "branch_summary", _) => Cow::Borrowed(s(&e.summary).unwrap_or("")),
        _ => flatten(&e.content, &mut kinds),
    };
    let usage_de = match m {
        Some(m) if ty == "message" => m.usage.as_ref(),
        _ => e.usage.as_ref(),
    };
    let usage = usage_de.map(|u| {
        let (i, o, r, w) = (
            u.input.unwrap_or(0),
            u.output.unwrap_or(0),
            u.cache_read.unwrap_or(0),
            u.cache_write.unwrap_or(0),
        );
        [i, o, r, w, u.total_tokens.unwrap_or(i + o + r + w)]
    });
    let cost = usage_de
        .and_then(|u| u.cost.as_ref())
        .and_then(|c| c.total)
        .unwrap_or(0.0);
    let id = s(&e.id);
    let key = match id {
        Some(id) => format!("{session}:{id}"),
        None => format!("{session}:L{line_no}"),
    };
    let timestamp = m
        .and_then(|m| m.timestamp.as_ref())
        .and_then(|t| t.as_i64().or_else(|| t.as_str().and_then(iso_ms)))
        .or_else(|| s(&e.timestamp).and_then(iso_ms));
    let (provider, model) = match m {
        Some(m) if ty == "message" => (s(&m.provider), s(&m.model)),
        _ => (s(&e.provider), s(&e.model)),
    };
    Some(BaseRecord {
        role,
        text,
        kinds,
        key,
        id,
        parent_id: s(&e.parent_id),
        timestamp,
        provider,
        model,
        usage,
        cost,
        tool_name: m.and_then(|m| s(&m.tool_name)),
        tool_call_id: m.and_then(|m| s(&m.tool_call_id)),
        is_error: m.and_then(|m| m.is_error),
        stop_reason: m.and_then(|m| s(&m.stop_reason)),
        custom_type: match m {
            Some(m) if ty == "message" => s(&m.custom_type),
            _ => s(&e.custom_type),
        },
        command: m.and_then(|m| s(&m.command)),
        exit_code: m.and_then(|m| m.exit_code),
    })
}

/// Runs the baseline over the corpus: (records, total text bytes).
fn baseline(data: &[u8]) -> (u64, u64) {
    let mut session = String::new();
    let (mut records, mut text_bytes) = (0u64, 0u64);
    for (i, line) in lines(data).enumerate() {
        let Ok(e) = serde_json::from_slice::<Entry>(line) else {
            continue;
        };
        if e.ty.as_str() == "session" {
            session = s(&e.id).unwrap_or("").to_owned();
            black_box(s(&e.cwd));
            continue;
        }
        if let Some(r) = baseline_record(&e, &session, i as u64 + 1) {
            records += 1;
            text_bytes += r.text.len() as u64;
            black_box(&r);
        }
    }
    (records, text_bytes)
}

// ---------------------------------------------------------------------------
// The benches

fn mem_ingest_text_bytes(data: &[u8]) -> u64 {
    let mut src = PiSessionSource::from_reader(data, "corpus.jsonl").expect("header");
    let mut n = 0;
    while let Some(r) = src.next_record().expect("read") {
        n += r.text.len() as u64;
    }
    n
}

fn benches(c: &mut Criterion, corpus: &Corpus) {
    let data = &corpus.data[..];
    let (records, lines_n) = (corpus.records, corpus.lines);

    // The baseline builds the same records with the same text (sizes
    // compared; its tool-call arguments come out with sorted keys).
    let (base_records, base_text) = baseline(data);
    assert_eq!(base_records, records, "baseline record count");
    assert_eq!(
        base_text,
        mem_ingest_text_bytes(data),
        "baseline text bytes"
    );

    let mut g = c.benchmark_group("throughput");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sampling_mode(SamplingMode::Flat);

    g.bench_function("1_floor_line_split", |b| {
        b.iter(|| {
            let mut rdr = LineReader::new(data);
            let mut n = 0u64;
            while let Some(ev) = rdr.next_line().expect("read") {
                if let LineEvent::Line(l) = ev {
                    black_box(&rdr.buffer()[l.start..l.end]);
                }
                n += 1;
            }
            assert_eq!(n, lines_n);
        })
    });

    g.bench_function("2_baseline_serde_json", |b| {
        b.iter(|| {
            let (n, _) = baseline(data);
            assert_eq!(n, records);
        })
    });

    g.bench_function("3_simd_json_borrowed_dom", |b| {
        let mut buffers = simd_json::Buffers::default();
        let mut copy: Vec<u8> = Vec::new();
        b.iter(|| {
            let mut n = 0u64;
            for line in lines(data) {
                copy.clear();
                copy.extend_from_slice(line);
                let v = simd_json::to_borrowed_value_with_buffers(&mut copy, &mut buffers)
                    .expect("valid JSON");
                black_box(&v);
                n += 1;
            }
            assert_eq!(n, lines_n);
        })
    });

    g.bench_function("4_mem_ingest_in_memory", |b| {
        b.iter(|| {
            let mut src = SliceSessionSource::new(data, "corpus.jsonl", &SourceOptions::new())
                .expect("header");
            let mut n = 0u64;
            while let Some(r) = src.next_record().expect("read") {
                black_box(&r);
                n += 1;
            }
            assert_eq!(n, records);
        })
    });

    g.bench_function("5_mem_ingest_file_chunked", |b| {
        b.iter(|| {
            let mut src = PiSessionSource::open(&corpus.path).expect("open");
            let mut n = 0u64;
            while let Some(r) = src.next_record().expect("read") {
                black_box(&r);
                n += 1;
            }
            assert_eq!(n, records);
        })
    });

    g.bench_function("5_mem_ingest_file_mmap", |b| {
        let opts = SourceOptions::default();
        b.iter(|| {
            // SAFETY: the corpus is a temporary file nothing else writes.
            let mut src = unsafe { MmapSessionSource::open(&corpus.path, &opts) }.expect("open");
            let mut n = 0u64;
            while let Some(r) = src.next_record().expect("read") {
                black_box(&r);
                n += 1;
            }
            assert_eq!(n, records);
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
