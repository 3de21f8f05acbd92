//! Copilot CLI token totals against ccusage 20.0.24 (`ccusage copilot
//! daily --json --offline`, `TZ=UTC`): equal where it counts right (one
//! shutdown per segment of a session that was not resumed, and
//! cumulative snapshots), and the documented differences: segments that
//! reset on resume (ccusage takes each later snapshot as cumulative and
//! adds only its growth) and a crashed session (ccusage counts nothing;
//! ours the output its messages carry). Ignored without ccusage
//! (`CCUSAGE`, else `/tmp/ccusage-reference/node_modules/.bin/ccusage`).

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

/// `(input, output, cache_read, cache_write, total)`.
type Totals = [u64; 5];

fn theirs(home: &Path) -> Totals {
    let h = home.with_extension("home");
    fs::create_dir_all(&h).unwrap();
    let out = Command::new(common::ccusage())
        .args(["copilot", "daily", "--json", "--offline"])
        .env("HOME", &h)
        .env("COPILOT_HOME", home)
        .env_remove("COPILOT_OTEL_FILE_EXPORTER_PATH")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    fs::remove_dir_all(&h).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["totals"];
    let n = |k: &str| t[k].as_u64().unwrap_or(0);
    [
        n("inputTokens"),
        n("outputTokens"),
        n("cacheReadTokens"),
        n("cacheCreationTokens"),
        n("totalTokens"),
    ]
}

fn ours(home: &Path) -> Totals {
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q", "--agent", "copilot"])
        .env("HOME", home.with_extension("none"))
        .env("COPILOT_HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let u = &v["usage"];
    let n = |k: &str| u[k].as_u64().unwrap();
    [
        n("input"),
        n("output"),
        n("cache_read"),
        n("cache_write"),
        n("total_tokens"),
    ]
}

fn ev(ty: &str, id: &str, ts: &str, data: Value) -> String {
    json!({"type": ty, "data": data, "id": id, "timestamp": ts, "parentId": null}).to_string()
}

fn shutdown(id: &str, ts: &str, model: &str, t: [u64; 4]) -> String {
    ev(
        "session.shutdown",
        id,
        ts,
        json!({"modelMetrics": {model: {"usage": {
        "inputTokens": t[0], "outputTokens": t[1], "cacheReadTokens": t[2], "cacheWriteTokens": t[3], "reasoningTokens": 3}}}}),
    )
}

fn write(home: &Path, sid: &str, lines: &[String]) {
    let d = home.join("session-state").join(sid);
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn start(sid: &str, ts: &str) -> String {
    ev(
        "session.start",
        "s0",
        ts,
        json!({"sessionId": sid, "selectedModel": "gpt-5.4", "context": {"cwd": "/w"}}),
    )
}

#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn equal_where_ccusage_counts_right() {
    let home = common::tmpdir("conform-copilot", "equal");
    // One shutdown a session; two models; a `-1m` model id; messages
    // with output before the shutdown (counted once: the shutdown's).
    write(
        &home,
        "s1",
        &[
            start("s1", "2026-04-01T10:00:00.000Z"),
            ev(
                "assistant.message",
                "a1",
                "2026-04-01T10:00:01.000Z",
                json!({"content": "x", "outputTokens": 30}),
            ),
            ev(
                "session.shutdown",
                "d1",
                "2026-04-01T11:00:00.000Z",
                json!({"modelMetrics": {
            "gpt-5.4": {"usage": {"inputTokens": 10_000, "outputTokens": 500, "cacheReadTokens": 8_000, "cacheWriteTokens": 1_000, "reasoningTokens": 100}},
            "claude-opus-4.6-1m": {"usage": {"inputTokens": 300, "outputTokens": 20, "cacheReadTokens": 0, "cacheWriteTokens": 0}}}}),
            ),
        ],
    );
    // Cumulative snapshots (checkpoints written, every field grew).
    write(
        &home,
        "s2",
        &[
            start("s2", "2026-04-02T10:00:00.000Z"),
            ev(
                "session.usage_checkpoint",
                "c1",
                "2026-04-02T10:10:00.000Z",
                json!({"totalNanoAiu": 1}),
            ),
            shutdown(
                "d1",
                "2026-04-02T11:00:00.000Z",
                "gpt-5.4",
                [100, 10, 20, 5],
            ),
            ev(
                "session.resume",
                "r1",
                "2026-04-03T10:00:00.000Z",
                json!({}),
            ),
            shutdown(
                "d2",
                "2026-04-03T11:00:00.000Z",
                "gpt-5.4",
                [250, 30, 40, 5],
            ),
        ],
    );
    let (t, o) = (theirs(&home), ours(&home));
    assert_eq!(o, t);
    fs::remove_dir_all(home).unwrap();
}

#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn the_documented_differences() {
    // Segments that reset on resume: ccusage counts the second only where
    // it grew past the first (here not at all); ours add both.
    let home = common::tmpdir("conform-copilot", "reset");
    write(
        &home,
        "s1",
        &[
            start("s1", "2026-04-01T10:00:00.000Z"),
            shutdown("d1", "2026-04-01T11:00:00.000Z", "gpt-5.4", [100, 10, 0, 0]),
            ev(
                "session.resume",
                "r1",
                "2026-04-02T10:00:00.000Z",
                json!({}),
            ),
            shutdown("d2", "2026-04-02T11:00:00.000Z", "gpt-5.4", [40, 5, 0, 0]),
        ],
    );
    assert_eq!(theirs(&home), [100, 10, 0, 0, 110]);
    assert_eq!(ours(&home), [140, 15, 0, 0, 155]);
    fs::remove_dir_all(home).unwrap();
    // A crash: no shutdown. ccusage counts nothing; ours the output the
    // messages carry.
    let home = common::tmpdir("conform-copilot", "crash");
    write(
        &home,
        "s1",
        &[
            start("s1", "2026-04-01T10:00:00.000Z"),
            ev(
                "assistant.message",
                "a1",
                "2026-04-01T10:00:01.000Z",
                json!({"content": "x", "outputTokens": 30}),
            ),
        ],
    );
    assert_eq!(theirs(&home), [0, 0, 0, 0, 0]);
    assert_eq!(ours(&home), [0, 30, 0, 0, 30]);
    fs::remove_dir_all(home).unwrap();
}

// ---------------------------------------------------------------------------
// Generated archives

fn generate(dir: &Path, mb: &str, seed: &str) {
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "copilot",
            "--total-mb",
            mb,
            "--seed",
            seed,
            "--archive",
        ])
        .arg(dir)
        .output()
        .expect("run gen-corpus");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each session's file: its folder name and its lines.
fn sessions(dir: &Path) -> Vec<(String, Vec<Value>)> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir.join("session-state")).unwrap() {
        let p = e.unwrap().path();
        let text = fs::read_to_string(p.join("events.jsonl")).unwrap();
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        out.push((p.file_name().unwrap().to_string_lossy().into_owned(), lines));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every line valid JSON, the same seed the same bytes, every shape (a
/// resumed session, cumulative snapshots, a crash), read without a skip.
#[test]
fn generated_archive_is_valid_and_deterministic() {
    let (a, b) = (
        common::tmpdir("conform-copilot", "gen-a"),
        common::tmpdir("conform-copilot", "gen-b"),
    );
    generate(&a, "2", "7");
    generate(&b, "2", "7");
    let (sa, sb) = (sessions(&a), sessions(&b));
    assert_eq!(sa, sb);
    let has = |s: &[Value], t: &str| s.iter().any(|v| v["type"] == t);
    assert!(sa.iter().any(|(_, s)| has(s, "session.resume")));
    assert!(sa.iter().any(|(_, s)| has(s, "session.usage_checkpoint")));
    assert!(sa.iter().any(|(_, s)| !has(s, "session.shutdown")));
    assert!(sa
        .iter()
        .any(|(_, s)| has(s, "session.compaction_complete")));
    let lines: usize = sa.iter().map(|(_, s)| s.len()).sum();
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["lines"].as_u64(), Some(lines as u64));
    assert_eq!(
        (v["skipped"].as_u64(), v["files"].as_u64()),
        (Some(0), Some(sa.len() as u64))
    );
    fs::remove_dir_all(a).unwrap();
    fs::remove_dir_all(b).unwrap();
}

/// On a generated home, the sessions ccusage counts right (shut down, and
/// either never resumed or with cumulative snapshots), copied to a home of
/// their own, give its totals exactly.
#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn generated_archive_against_ccusage() {
    let all = common::tmpdir("conform-copilot", "gen-all");
    generate(&all, "3", "11");
    let right = common::tmpdir("conform-copilot", "gen-right");
    let mut n = 0;
    for (id, lines) in sessions(&all) {
        let has = |t: &str| lines.iter().any(|v| v["type"] == t);
        let counted_right =
            has("session.shutdown") && (!has("session.resume") || has("session.usage_checkpoint"));
        if counted_right {
            n += 1;
            let d = right.join("session-state").join(&id);
            fs::create_dir_all(&d).unwrap();
            fs::copy(
                all.join("session-state").join(&id).join("events.jsonl"),
                d.join("events.jsonl"),
            )
            .unwrap();
        }
    }
    assert!(n > 5);
    assert_eq!(ours(&right), theirs(&right));
    // The whole home: ours count more (reset segments, crashes).
    let (o, t) = (ours(&all), theirs(&all));
    assert!(o[4] > t[4], "{o:?} {t:?}");
    fs::remove_dir_all(all).unwrap();
    fs::remove_dir_all(right).unwrap();
}
