//! Codex token totals against ccusage 20 (`ccusage codex daily --json
//! --offline`, `TZ=UTC`), by model, on the samples and on lines written
//! here. Ignored in a plain clone: they need `../shared` and ccusage
//! (`CCUSAGE`, else `/tmp/ccusage-reference/node_modules/.bin/ccusage`,
//! which `.ci/run` installs); there a missing tool is a failure.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::codex::{write_family, ParentFile};
use common::shared;

/// `(input, cache_read, output, total)` by model.
type ByModel = BTreeMap<String, [u64; 4]>;

/// ccusage's totals over the days, by model (its input is the non-cached
/// input, as ours).
fn theirs(codex_home: &Path) -> ByModel {
    let home = codex_home.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(common::ccusage())
        .args(["codex", "daily", "--json", "--offline"])
        .env("HOME", &home)
        .env("CODEX_HOME", codex_home)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ccusage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut by = ByModel::new();
    for day in v["daily"].as_array().into_iter().flatten() {
        for (model, m) in day["models"].as_object().into_iter().flatten() {
            let e = by.entry(model.clone()).or_default();
            for (i, k) in [
                "inputTokens",
                "cacheReadTokens",
                "outputTokens",
                "totalTokens",
            ]
            .iter()
            .enumerate()
            {
                e[i] += m[k].as_u64().unwrap_or(0);
            }
        }
    }
    by
}

fn ours(codex_home: &Path) -> ByModel {
    let home = codex_home.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q", "--source", "codex"])
        .env("HOME", &home)
        .env("CODEX_HOME", codex_home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mem-ingest: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut by = ByModel::new();
    for m in v["by_model"].as_array().into_iter().flatten() {
        let e = by
            .entry(m["model"].as_str().unwrap().to_owned())
            .or_default();
        for (i, k) in ["input", "cache_read", "output", "total_tokens"]
            .iter()
            .enumerate()
        {
            e[i] += m[k].as_u64().unwrap_or(0);
        }
    }
    by
}

/// Copies every sample rollout under `sessions/` of a fresh Codex home,
/// renamed `rollout-*.jsonl` where it is not.
fn sample_home() -> PathBuf {
    let home = common::tmpdir("conform-codex", "samples");
    let root = shared::shared("samples/codex");
    let mut stack = vec![root.clone()];
    let mut n = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let rel = p.strip_prefix(&root).unwrap();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let name = if name.starts_with("rollout-") {
                    name
                } else {
                    format!("rollout-{name}")
                };
                let to = home.join("sessions").join(rel.parent().unwrap()).join(name);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(&p, &to).unwrap();
                n += 1;
            }
        }
    }
    assert!(n >= 8, "{n} samples");
    home
}

#[test]
#[ignore = "needs ../shared/samples and ccusage; run by .ci/run with --include-ignored"]
fn samples_equal_ccusage_by_model() {
    let home = sample_home();
    let (a, b) = (ours(&home), theirs(&home));
    assert!(!b.is_empty());
    assert_eq!(a, b);
    std::fs::remove_dir_all(home).unwrap();
}

fn count(ts: &str, total: [u64; 5], last: Option<[u64; 5]>) -> String {
    let u = |t: [u64; 5]| {
        format!(
            r#"{{"input_tokens":{},"cached_input_tokens":{},"output_tokens":{},"reasoning_output_tokens":{},"total_tokens":{}}}"#,
            t[0], t[1], t[2], t[3], t[4]
        )
    };
    let last = last.map_or(String::new(), |l| {
        format!(r#","last_token_usage":{}"#, u(l))
    });
    format!(
        r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{}{last}}}}}}}"#,
        u(total)
    )
}

/// Model changes, `info: null`, repeated totals, totals without a last, a
/// total that goes down, and a fork replaying its parent's counts.
#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn token_count_shapes_equal_ccusage() {
    let home = common::tmpdir("conform-codex", "shapes");
    let day = home.join("sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    let meta = |id: &str, ts: &str, fork: &str| {
        format!(
            r#"{{"timestamp":"{ts}","type":"session_meta","payload":{{"id":"{id}","timestamp":"{ts}","cwd":"/w"{fork}}}}}"#
        )
    };
    let turn = |ts: &str, model: &str| {
        format!(
            r#"{{"timestamp":"{ts}","type":"turn_context","payload":{{"cwd":"/w","model":"{model}"}}}}"#
        )
    };
    let parent = [
        meta("p1", "2026-01-01T00:00:00.000Z", ""),
        turn("2026-01-01T00:00:01.000Z", "gpt-5"),
        r#"{"timestamp":"2026-01-01T00:00:01.500Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":null}}}"#.to_owned(),
        count("2026-01-01T00:00:02.000Z", [1000, 800, 50, 20, 1050], Some([1000, 800, 50, 20, 1050])),
        count("2026-01-01T00:00:02.100Z", [1000, 800, 50, 20, 1050], Some([1000, 800, 50, 20, 1050])),
        turn("2026-01-01T00:01:00.000Z", "gpt-5-codex"),
        count("2026-01-01T00:01:02.000Z", [3000, 2400, 90, 30, 3090], None),
        count("2026-01-01T00:01:03.000Z", [2500, 2000, 100, 30, 2600], Some([700, 100, 10, 0, 710])),
        count("2026-01-01T00:01:04.000Z", [3300, 2500, 120, 40, 3420], Some([800, 500, 20, 10, 820])),
    ]
    .join("\n")
        + "\n";
    std::fs::write(day.join("rollout-2026-01-01T00-00-00-p1.jsonl"), &parent).unwrap();
    let fork = format!(
        "{}\n{}{}\n",
        meta(
            "f1",
            "2026-01-01T00:02:00.000Z",
            r#","forked_from_id":"p1""#
        ),
        parent,
        count(
            "2026-01-01T00:02:05.000Z",
            [4300, 3000, 150, 40, 4450],
            Some([1000, 500, 30, 0, 1030])
        )
    );
    std::fs::write(day.join("rollout-2026-01-01T00-02-00-f1.jsonl"), &fork).unwrap();
    let (a, b) = (ours(&home), theirs(&home));
    assert_eq!(a, b);
    std::fs::remove_dir_all(home).unwrap();
}

/// A subagent that replays its parent's history with the timestamps
/// rewritten into the spawn's second (issue 41,
/// [`common::codex::same_second_family`]): the parent's file before the
/// child's, after it, or absent (ccusage then skips the replayed counts by
/// their shared second).
#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn same_second_subagents_equal_ccusage() {
    for parent in [ParentFile::Before, ParentFile::After, ParentFile::Absent] {
        let home = common::tmpdir("conform-codex", &format!("same-second-{parent:?}"));
        write_family(&home, parent);
        let (a, b) = (ours(&home), theirs(&home));
        assert!(!b.is_empty());
        assert_eq!(a, b, "{parent:?}");
        std::fs::remove_dir_all(home).unwrap();
    }
}

/// Rollouts with a parent (a subagent, a fork) whose counts ccusage's
/// two rules decide: the subagent's own count in the spawn's second (its
/// parent present: counted; absent: left to the parent with the replay's);
/// a subagent that replays nothing, its first two counts in one second,
/// its parent present; a fork replaying its parent verbatim, the parent's
/// first two counts in one second, the parent absent.
#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn counts_of_children_equal_ccusage() {
    let (parent, child) = common::codex::same_second_family();
    let own_in_spawn_second = child.replace("10:01:05.000Z", "10:01:00.900Z");
    let day = "sessions/2026/01/01";
    let parent_file = format!("{day}/rollout-2026-01-01T10-00-00-p1.jsonl");
    let child_file = format!("{day}/rollout-2026-01-01T10-01-00-c1.jsonl");
    let spawned = |id: &str, ts: &str| {
        format!(
            r#"{{"timestamp":"{ts}","type":"session_meta","payload":{{"id":"{id}","timestamp":"{ts}","cwd":"/w","source":{{"subagent":{{"thread_spawn":{{"parent_thread_id":"p1","depth":1}}}}}}}}}}"#
        )
    };
    let turn = r#"{"timestamp":"2026-01-01T10:05:00.100Z","type":"turn_context","payload":{"cwd":"/w","model":"gpt-5"}}"#;
    let no_replay = [
        spawned("c2", "2026-01-01T10:05:00.000Z"),
        turn.to_owned(),
        count(
            "2026-01-01T10:05:03.100Z",
            [100, 0, 10, 0, 110],
            Some([100, 0, 10, 0, 110]),
        ),
        count(
            "2026-01-01T10:05:03.600Z",
            [300, 0, 30, 0, 330],
            Some([200, 0, 20, 0, 220]),
        ),
        count(
            "2026-01-01T10:05:09.000Z",
            [700, 0, 70, 0, 770],
            Some([400, 0, 40, 0, 440]),
        ),
    ]
    .join("\n")
        + "\n";
    // A parent whose first two counts share a second, and its fork.
    let early = parent.replace("10:00:07.000Z", "10:00:06.800Z");
    let fork_meta = r#"{"timestamp":"2026-01-01T10:09:00.000Z","type":"session_meta","payload":{"id":"f1","timestamp":"2026-01-01T10:09:00.000Z","cwd":"/w","forked_from_id":"p1"}}"#;
    let fork = format!(
        "{fork_meta}\n{early}{}\n",
        count(
            "2026-01-01T10:09:05.000Z",
            [4500, 1500, 160, 20, 4660],
            Some([500, 0, 10, 0, 510])
        )
    );
    let cases: [(&str, Vec<(String, &str)>); 4] = [
        (
            "own count in the spawn's second",
            vec![
                (parent_file.clone(), &parent),
                (child_file.clone(), &own_in_spawn_second),
            ],
        ),
        (
            "own count in the spawn's second, parent absent",
            vec![(child_file.clone(), &own_in_spawn_second)],
        ),
        (
            "no replay, parent present",
            vec![
                (parent_file.clone(), &parent),
                (
                    format!("{day}/rollout-2026-01-01T10-05-00-c2.jsonl"),
                    &no_replay,
                ),
            ],
        ),
        (
            "verbatim fork, parent absent",
            vec![(format!("{day}/rollout-2026-01-01T10-09-00-f1.jsonl"), &fork)],
        ),
    ];
    for (i, (name, files)) in cases.iter().enumerate() {
        let home = common::tmpdir("conform-codex", &format!("children-{i}"));
        for (rel, text) in files {
            let p = home.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let (a, b) = (ours(&home), theirs(&home));
        // With its parent absent, all of that subagent's counts are left
        // to the parent: none.
        assert_eq!(b.is_empty(), i == 1, "{name}");
        assert_eq!(a, b, "{name}");
        std::fs::remove_dir_all(home).unwrap();
    }
}
