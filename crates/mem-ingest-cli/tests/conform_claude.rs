//! Claude Code token totals against ccusage 20 (`ccusage claude daily
//! --json --offline`, `TZ=UTC`), by model: on every sample transcript of
//! `../shared/samples` in one `projects/` tree, and on generated archives.
//! Ignored in a plain clone: they need `../shared` and ccusage (`CCUSAGE`,
//! else `/tmp/ccusage-reference/node_modules/.bin/ccusage`, which `.ci/run`
//! installs); there a missing tool is a failure, never a skip.
//!
//! Cost is not compared: ccusage prices responses from its own table, and
//! mem-ingest reports only the `costUSD` a file records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

/// `(input, output, cache write, cache read)` by model, and in total.
type ByModel = BTreeMap<String, [u64; 4]>;

fn theirs(config: &Path) -> (ByModel, [u64; 4]) {
    let home = config.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(common::ccusage())
        .args(["claude", "daily", "--json", "--offline"])
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", config)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ccusage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let mut by = ByModel::new();
    for day in v["daily"].as_array().into_iter().flatten() {
        for b in day["modelBreakdowns"].as_array().into_iter().flatten() {
            let e = by
                .entry(b["modelName"].as_str().unwrap().to_owned())
                .or_default();
            for (i, k) in [
                "inputTokens",
                "outputTokens",
                "cacheCreationTokens",
                "cacheReadTokens",
            ]
            .iter()
            .enumerate()
            {
                e[i] += n(b, k);
            }
        }
    }
    let t = &v["totals"];
    let total = [
        n(t, "inputTokens"),
        n(t, "outputTokens"),
        n(t, "cacheCreationTokens"),
        n(t, "cacheReadTokens"),
    ];
    by.retain(|_, v| v.iter().any(|n| *n > 0));
    (by, total)
}

fn ours(projects: &Path) -> (ByModel, [u64; 4]) {
    let out = common::cli()
        .args(["stats", "--json", "-q", "--source", "claude"])
        .arg(projects)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
    let mut by = ByModel::new();
    for m in v["by_model"].as_array().unwrap() {
        let e = by
            .entry(m["model"].as_str().unwrap().to_owned())
            .or_default();
        for (i, k) in ["input", "output", "cache_write", "cache_read"]
            .iter()
            .enumerate()
        {
            e[i] += n(m, k);
        }
    }
    let u = &v["usage"];
    let total = [
        n(u, "input"),
        n(u, "output"),
        n(u, "cache_write"),
        n(u, "cache_read"),
    ];
    by.retain(|_, v| v.iter().any(|n| *n > 0));
    (by, total)
}

fn samples() -> PathBuf {
    common::shared::samples()
}

/// Copies every `*.jsonl` below `from` into `projects/<n>/`, keeping the
/// path below the sample's own folder (subagent files stay beside their
/// session).
fn copy_samples(from: &Path, projects: &Path, n: &mut usize) {
    let mut stack = vec![from.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "jsonl") {
                *n += 1;
                let rel = p.strip_prefix(from).unwrap();
                let to = projects.join(format!("-sample-{n}")).join(rel);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(&p, &to).unwrap();
            }
        }
    }
}

#[test]
#[ignore = "needs ../shared/samples and ccusage (.ci/run installs it)"]
fn totals_equal_ccusage_on_the_samples() {
    let d = common::tmpdir("conform-claude", "samples");
    let projects = d.join("projects");
    let mut n = 0;
    for sub in ["claude-code", "claude-code-log-messages/claude-code"] {
        copy_samples(&samples().join(sub), &projects, &mut n);
    }
    assert!(n >= 60, "only {n} sample transcripts");
    let (t_by, t_total) = theirs(&d);
    let (o_by, o_total) = ours(&projects);
    assert!(t_total.iter().sum::<u64>() > 0, "ccusage counted nothing");
    assert_eq!(
        o_total, t_total,
        "totals (input, output, cache write, cache read)"
    );
    assert_eq!(o_by, t_by, "by model");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ccusage (.ci/run installs it)"]
fn totals_equal_ccusage_on_generated_archives() {
    for seed in ["1", "7"] {
        let d = common::tmpdir("conform-claude", &format!("gen-{seed}"));
        let g = gen_corpus::GenCorpus::new()
            .args(["--format", "claude", "--archive"])
            .arg(&d)
            .args(["--total-mb", "15", "--seed", seed])
            .output()
            .unwrap();
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        let (t_by, t_total) = theirs(&d);
        let (o_by, o_total) = ours(&d.join("projects"));
        assert!(t_by.len() >= 5, "seed {seed}: {} models", t_by.len());
        assert_eq!(o_total, t_total, "seed {seed}: totals");
        assert_eq!(o_by, t_by, "seed {seed}: by model");
        std::fs::remove_dir_all(d).unwrap();
    }
}
