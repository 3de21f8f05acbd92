//! Amp token totals against ccusage 20.0.24 (`ccusage amp daily --json
//! --offline`, `TZ=UTC`): equal on what ccusage counts right (the ledger
//! with its messages' cache columns, `messages[].usage`), and the
//! documented differences (ccusage drops a usage without
//! `usage.timestamp` or without a model; we count them), on threads
//! written here and on generated archives, where the difference is
//! computed from the generated files. Ignored in a plain clone: they need
//! ccusage (`CCUSAGE`, else
//! `/tmp/ccusage-reference/node_modules/.bin/ccusage`, which `.ci/run`
//! installs); there a missing tool is a failure.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

/// `[input, output, cache_write, cache_read, total]`.
type Totals = [u64; 5];

/// ccusage's totals of the Amp data folder `data` (holding `threads/`),
/// over the days.
fn theirs(data: &Path) -> Totals {
    let home = data.with_extension("home");
    fs::create_dir_all(&home).unwrap();
    let out = Command::new(common::ccusage())
        .args(["amp", "daily", "--json", "--offline"])
        .env("HOME", &home)
        .env("AMP_DATA_DIR", data)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    fs::remove_dir_all(&home).unwrap();
    assert!(
        out.status.success(),
        "ccusage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut t = [0; 5];
    for day in v["daily"].as_array().unwrap() {
        for (i, k) in [
            "inputTokens",
            "outputTokens",
            "cacheCreationTokens",
            "cacheReadTokens",
            "totalTokens",
        ]
        .iter()
        .enumerate()
        {
            t[i] += day[k].as_u64().unwrap();
        }
    }
    t
}

fn ours(data: &Path) -> Totals {
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q", "--agent", "amp"])
        .env("HOME", data.with_extension("none"))
        .env_remove("XDG_DATA_HOME")
        .env("AMP_DATA_DIR", data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let u = &v["usage"];
    [
        "input",
        "output",
        "cache_write",
        "cache_read",
        "total_tokens",
    ]
    .map(|k| u[k].as_u64().unwrap())
}

fn write(data: &Path, thread: &Value) {
    let dir = data.join("threads");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join(format!("{}.json", thread["id"].as_str().unwrap())),
        thread.to_string(),
    )
    .unwrap();
}

fn usage(i: u64, o: u64, w: u64, r: u64, ts: Option<&str>, model: Option<&str>) -> Value {
    let mut u = json!({"inputTokens": i, "outputTokens": o, "cacheCreationInputTokens": w,
                       "cacheReadInputTokens": r, "totalInputTokens": i + w + r});
    if let Some(ts) = ts {
        u["timestamp"] = json!(ts);
    }
    if let Some(m) = model {
        u["model"] = json!(m);
    }
    u
}

fn assistant(id: u64, u: Value) -> Value {
    json!({"role": "assistant", "messageId": id, "content": [{"type": "text", "text": "ok"}],
           "state": {"type": "complete"}, "usage": u})
}

const M: &str = "claude-haiku-4-5-20251001";

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn equal_where_ccusage_counts_right() {
    let data = common::tmpdir("conform-amp", "equal").join("data");
    // The spec's two messages: 10/178/986/11372 and 5/42/0/12000.
    write(
        &data,
        &json!({"id": "T-a", "created": 1_767_865_803_494_i64, "messages": [
            {"role": "user", "messageId": 0, "content": []},
            assistant(1, usage(10, 178, 986, 11372, Some("2026-01-19T11:42:10.652Z"), Some(M))),
            assistant(2, usage(5, 42, 0, 12000, Some("2026-01-19T11:43:10.652Z"), Some(M))),
        ]}),
    );
    // A ledger thread: the ledger alone, with message 1's cache columns.
    write(
        &data,
        &json!({"id": "T-b", "created": 1_767_865_803_494_i64, "messages": [
            {"role": "user", "messageId": 0, "content": []},
            assistant(1, usage(7, 7, 986, 11372, Some("2026-01-19T11:42:10.652Z"), Some(M))),
            assistant(2, usage(9, 9, 1, 1, Some("2026-01-19T11:42:10.652Z"), Some(M))),
        ], "usageLedger": {"events": [
            {"id": "e1", "timestamp": "2026-01-19T11:42:10.652Z", "model": M,
             "tokens": {"input": 100, "output": 50}, "operationType": "inference",
             "fromMessageId": 0, "toMessageId": 1}]}}),
    );
    let t = theirs(&data);
    assert_eq!(
        t,
        [
            15 + 100,
            220 + 50,
            986 + 986,
            23372 + 11372,
            24593 + 100 + 50 + 986 + 11372
        ]
    );
    assert_eq!(ours(&data), t);
    fs::remove_dir_all(data.parent().unwrap()).unwrap();
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn usage_without_a_timestamp_or_a_model_dropped_by_ccusage_counted_here() {
    let data = common::tmpdir("conform-amp", "differ").join("data");
    write(
        &data,
        &json!({"id": "T-c", "created": 1_767_865_803_494_i64, "messages": [
            {"role": "user", "messageId": 0, "meta": {"sentAt": 1_767_865_803_494_i64}, "content": []},
            assistant(1, usage(10, 20, 30, 40, Some("2026-01-19T11:42:10.652Z"), Some(M))),
            assistant(2, usage(1, 2, 3, 4, None, Some(M))),
            assistant(3, usage(100, 200, 300, 400, Some("2026-01-19T11:44:10.652Z"), None)),
        ]}),
    );
    assert_eq!(theirs(&data), [10, 20, 30, 40, 100]);
    assert_eq!(ours(&data), [111, 222, 333, 444, 1110]);
    fs::remove_dir_all(data.parent().unwrap()).unwrap();
}

/// What ccusage drops of a generated archive: the usages without a
/// timestamp of threads without a ledger.
fn dropped_by_ccusage(data: &Path) -> Totals {
    let mut d = [0; 5];
    for e in fs::read_dir(data.join("threads")).unwrap() {
        let v: Value = serde_json::from_slice(&fs::read(e.unwrap().path()).unwrap()).unwrap();
        if v.get("usageLedger").is_some() {
            continue;
        }
        for m in v["messages"].as_array().unwrap() {
            let u = &m["usage"];
            if m["role"] == "assistant" && u.is_object() && u.get("timestamp").is_none() {
                let n = |k: &str| u[k].as_u64().unwrap();
                let parts = [
                    n("inputTokens"),
                    n("outputTokens"),
                    n("cacheCreationInputTokens"),
                    n("cacheReadInputTokens"),
                ];
                for (i, p) in parts.iter().enumerate() {
                    d[i] += p;
                }
                d[4] += parts.iter().sum::<u64>();
            }
        }
    }
    d
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn generated_archives_against_ccusage() {
    for seed in ["3", "11"] {
        let data = common::tmpdir("conform-amp", &format!("gen-{seed}")).join("data");
        let out = gen_corpus::GenCorpus::new()
            .args([
                "--format",
                "amp",
                "--total-mb",
                "3",
                "--seed",
                seed,
                "--archive",
            ])
            .arg(&data)
            .output()
            .expect("run gen-corpus");
        assert!(out.status.success());
        let summary = String::from_utf8_lossy(&out.stderr);
        assert!(summary.contains("with a usage ledger"), "{summary}");
        let dropped = dropped_by_ccusage(&data);
        assert!(dropped[4] > 0, "seed {seed}: no usage without a timestamp");
        let t = theirs(&data);
        let o = ours(&data);
        let mut want = t;
        for (w, d) in want.iter_mut().zip(dropped) {
            *w += d;
        }
        assert_eq!(o, want, "seed {seed}: ours = ccusage's + what it drops");
        fs::remove_dir_all(data.parent().unwrap()).unwrap();
    }
}
