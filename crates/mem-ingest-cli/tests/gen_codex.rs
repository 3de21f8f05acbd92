//! `gen-corpus --format codex`: every line valid JSON, two runs with the
//! same seed byte-identical, every shape present, and the archive read
//! without a skip; its token totals equal ccusage's by model (ignored
//! without ccusage).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn generate(dir: &Path) -> String {
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "codex",
            "--total-mb",
            "3",
            "--seed",
            "7",
            "--archive",
        ])
        .arg(dir)
        .output()
        .expect("run gen-corpus");
    assert!(
        out.status.success(),
        "gen-corpus failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).expect("UTF-8 summary")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mem-ingest-gen-codex-{}-{name}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).expect("read dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn stats(dir: &Path) -> Value {
    let home = dir.with_extension("home");
    fs::create_dir_all(&home).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q", "--source", "codex"])
        .env("HOME", &home)
        .env("CODEX_HOME", dir)
        .output()
        .unwrap();
    fs::remove_dir_all(&home).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn generated_codex_archive() {
    let (a, b) = (temp_dir("a"), temp_dir("b"));
    let summary = generate(&a);
    generate(&b);
    let (fa, fb) = (files(&a), files(&b));
    assert_eq!(fa, fb, "same seed, same bytes");
    let mut types = BTreeMap::<String, u64>::new();
    let (mut forks, mut spawns, mut legacy, mut archived) = (0, 0, 0, 0);
    for (rel, bytes) in &fa {
        assert!(rel.ends_with(".jsonl"), "{rel}");
        archived += u64::from(rel.starts_with("archived_sessions/"));
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let v: Value =
                serde_json::from_slice(line).unwrap_or_else(|e| panic!("{rel}:{}: {e}", i + 1));
            let ty = match (v["type"].as_str(), v["payload"]["type"].as_str()) {
                (Some(t), Some(p)) if t == "response_item" || t == "event_msg" => {
                    format!("{t}/{p}")
                }
                (Some(t), _) => t.to_owned(),
                (None, _) => "legacy_meta".to_owned(),
            };
            if i == 0 {
                let p = &v["payload"];
                forks += u64::from(p["forked_from_id"].is_string());
                spawns += u64::from(p["source"]["subagent"]["thread_spawn"].is_object());
                legacy += u64::from(v["payload"].is_null());
            }
            *types.entry(ty).or_default() += 1;
        }
    }
    assert!(
        forks > 0 && spawns > 0 && legacy > 0 && archived > 0,
        "{summary}"
    );
    for t in [
        "session_meta",
        "turn_context",
        "compacted",
        "world_state",
        "response_item/future_item",
        "response_item/reasoning",
        "response_item/custom_tool_call",
        "event_msg/token_count",
        "event_msg/user_message",
        "event_msg/agent_message",
    ] {
        assert!(types.contains_key(t), "{t}: {types:?}");
    }
    let v = stats(&a);
    assert_eq!(v["skipped"].as_u64(), Some(0), "{v}");
    assert_eq!(v["files"].as_u64(), Some(fa.len() as u64));
    assert!(v["deduplicated"].as_u64().unwrap() > 0);
    fs::remove_dir_all(&a).unwrap();
    fs::remove_dir_all(&b).unwrap();
}

#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn generated_codex_archive_equals_ccusage() {
    let dir = temp_dir("ccusage");
    generate(&dir);
    assert_equals_ccusage(&dir);
}

/// Our token totals of the Codex home `dir` by model equal ccusage's; the
/// folder is removed.
fn assert_equals_ccusage(dir: &Path) {
    let dir = dir.to_path_buf();
    let ccusage = std::env::var_os("CCUSAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/ccusage-reference/node_modules/.bin/ccusage"));
    assert!(
        ccusage.exists(),
        "ccusage not found at {}",
        ccusage.display()
    );
    let home = dir.with_extension("home");
    fs::create_dir_all(&home).unwrap();
    let out = Command::new(ccusage)
        .args(["codex", "daily", "--json", "--offline"])
        .env("HOME", &home)
        .env("CODEX_HOME", &dir)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    fs::remove_dir_all(&home).unwrap();
    assert!(out.status.success());
    let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut by = BTreeMap::<String, [u64; 4]>::new();
    for day in theirs["daily"].as_array().unwrap() {
        for (m, u) in day["models"].as_object().unwrap() {
            let e = by.entry(m.clone()).or_default();
            for (i, k) in [
                "inputTokens",
                "cacheReadTokens",
                "outputTokens",
                "totalTokens",
            ]
            .iter()
            .enumerate()
            {
                e[i] += u[k].as_u64().unwrap();
            }
        }
    }
    let v = stats(&dir);
    let mut ours = BTreeMap::<String, [u64; 4]>::new();
    for m in v["by_model"].as_array().unwrap() {
        let e = ours
            .entry(m["model"].as_str().unwrap().to_owned())
            .or_default();
        for (i, k) in ["input", "cache_read", "output", "total_tokens"]
            .iter()
            .enumerate()
        {
            e[i] += m[k].as_u64().unwrap();
        }
    }
    assert_eq!(ours, by);
    fs::remove_dir_all(&dir).unwrap();
}

/// Writes the held-out shape (12 MB, seed 3) into `d`; gen-corpus's
/// summary line.
fn held_out(d: &Path) -> String {
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "codex",
            "--shape",
            "held-out",
            "--total-mb",
            "12",
            "--seed",
            "3",
            "--archive",
        ])
        .arg(d)
        .output()
        .expect("run gen-corpus");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}

/// `--shape held-out`: issue 41's held-out Codex home by its parameters:
/// 177 files of 150 threads (18 forks, 8 subagents, one legacy rollout),
/// four subagents replaying their parent within the spawn's second, four
/// with the original timestamps, four files with one damaged line, three
/// CLI eras; the same bytes for the same seed.
#[test]
fn the_held_out_shape_holds_what_it_says() {
    let dir = temp_dir("held-out");
    let summary = held_out(&dir);
    assert!(
        summary.contains("177 files (150 sessions, 0 archived, 1 legacy, 18 forks, 8 subagents)"),
        "{summary}"
    );
    let all = files(&dir);
    assert_eq!(all.len(), 177);
    let (mut same_second, mut original, mut damaged) = (0, 0, 0);
    let mut eras = BTreeMap::new();
    for bytes in all.values() {
        let lines: Vec<&[u8]> = bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        damaged += lines
            .iter()
            .filter(|l| serde_json::from_slice::<Value>(l).is_err())
            .count();
        let first: Value = serde_json::from_slice(lines[0]).unwrap();
        if let Some(v) = first["payload"]["cli_version"].as_str() {
            *eras.entry(v.to_owned()).or_insert(0) += 1;
        }
        if first["payload"]["source"]["subagent"].is_object() {
            // Line 2 is the parent's session_meta, replayed.
            let second: Value = serde_json::from_slice(lines[1]).unwrap();
            assert_eq!(second["type"], "session_meta");
            let spawned = &first["timestamp"].as_str().unwrap()[..19];
            if second["timestamp"].as_str().unwrap().starts_with(spawned) {
                same_second += 1;
            } else {
                original += 1;
            }
        }
    }
    assert_eq!((same_second, original, damaged), (4, 4, 4));
    // Files by era (the threads 12/33/55 of 151 by index; children take
    // their parent's).
    assert_eq!(eras.len(), 3, "{eras:?}");
    assert_eq!(eras.values().sum::<u64>(), 176, "{eras:?}");
    let again = temp_dir("held-out-again");
    // The same summary but for the folder and the time taken.
    let counts = |s: &str| s[s.rfind(": ").unwrap()..s.rfind(", in ").unwrap()].to_owned();
    assert_eq!(counts(&held_out(&again)), counts(&summary));
    assert!(files(&again) == all, "the same seed gives the same bytes");
    let _ = fs::remove_dir_all(dir);
    let _ = fs::remove_dir_all(again);
}

/// The held-out shape's token totals equal ccusage's by model: its four
/// subagents that replay their parent within the spawn's second are
/// counted once (issue 41).
#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn the_held_out_shape_equals_ccusage() {
    let dir = temp_dir("held-out-ccusage");
    held_out(&dir);
    assert_equals_ccusage(&dir);
}
