//! Real, permissively licensed Claude Code and Codex session files from
//! public repositories (`tests/real/<agent>/<name>/`, each folder with its
//! PROVENANCE.md and LICENSE). Token totals are the ones ccusage 20.0.24
//! reports for the same files (`ccusage claude daily` / `ccusage codex daily`,
//! `--json --offline`, `TZ=UTC`), except for the Bedrock session, where the
//! binary counts streamed splits without a `requestId` again (see its test);
//! record and line counts are mem-ingest's.
//! Each file's every line is an entry (`entries` adds up to `lines`), and
//! nothing is skipped, repaired or failed.

use std::path::PathBuf;

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn real(agent: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/real")
        .join(agent)
        .join(name)
}

fn stats(agent: &str, name: &str) -> Value {
    let out = common::run(&[
        &"stats",
        &"--json",
        &"-q",
        &"--source",
        &agent,
        &real(agent, name),
    ]);
    assert!(
        out.status.success(),
        "{agent}/{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What one fixture folder must give.
struct Want {
    files: u64,
    lines: u64,
    records: u64,
    /// `(input, output, cache_write, cache_read)`, as ccusage reports them
    /// (for Codex, `input` is the non-cached input and `cache_write` is 0).
    usage: [u64; 4],
    /// `(model, input, output, cache_write, cache_read)`, sorted by model.
    by_model: &'static [(&'static str, [u64; 4])],
}

fn check(agent: &str, name: &str, want: &Want) {
    let v = stats(agent, name);
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{name}: no {k}"));
    let at = format!("{agent}/{name}");
    assert_eq!(n(&v, "files"), want.files, "{at}: files");
    assert_eq!(n(&v, "lines"), want.lines, "{at}: lines");
    assert_eq!(n(&v, "records"), want.records, "{at}: records");
    for k in [
        "files_failed",
        "files_empty",
        "skipped",
        "repaired",
        "deduplicated",
        "pending",
    ] {
        assert_eq!(n(&v, k), 0, "{at}: {k}");
    }
    assert_eq!(v["failures"], serde_json::json!([]), "{at}: failures");
    assert_eq!(v["skips"], serde_json::json!([]), "{at}: skips");
    let entries: u64 = v["entries"]
        .as_object()
        .unwrap()
        .values()
        .map(|e| e.as_u64().unwrap())
        .sum();
    assert_eq!(entries, want.lines, "{at}: entries account for every line");
    let keys = ["input", "output", "cache_write", "cache_read"];
    let four = |u: &Value| keys.map(|k| n(u, k));
    assert_eq!(
        four(&v["usage"]),
        want.usage,
        "{at}: (input, output, cache write, cache read)"
    );
    let mut by: Vec<(String, [u64; 4])> = v["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["model"].as_str().unwrap().to_owned(), four(m)))
        .filter(|(_, u)| u.iter().any(|n| *n > 0))
        .collect();
    by.sort();
    let want_by: Vec<(String, [u64; 4])> = want
        .by_model
        .iter()
        .map(|(m, u)| ((*m).to_owned(), *u))
        .collect();
    assert_eq!(by, want_by, "{at}: by model");
}

#[test]
fn spotter_short_streamed_response() {
    check(
        "claude",
        "spotter-short",
        &Want {
            files: 1,
            lines: 15,
            records: 11,
            usage: [3, 13, 13835, 11515],
            by_model: &[("claude-opus-4-6", [3, 13, 13835, 11515])],
        },
    );
}

#[test]
fn spotter_tool_heavy() {
    check(
        "claude",
        "spotter-tool-heavy",
        &Want {
            files: 1,
            lines: 39,
            records: 23,
            usage: [54, 212, 17696, 88231],
            by_model: &[("claude-opus-4-6", [54, 212, 17696, 88231])],
        },
    );
}

/// The subagent's usage is only in the parent's `agent_progress` lines
/// (`data.message.message.usage`), which ccusage's daily report counts.
#[test]
fn spotter_subagent_usage_in_progress_lines() {
    check(
        "claude",
        "spotter-subagent-progress",
        &Want {
            files: 1,
            lines: 96,
            records: 48,
            usage: [1600, 1593, 40127, 522629],
            by_model: &[
                ("claude-haiku-4-5-20251001", [24, 7, 14285, 95343]),
                ("claude-opus-4-6", [1576, 1586, 25842, 427286]),
            ],
        },
    );
}

/// A `subagents/` agent and the auto-compaction agent (`acompact-…`), whose
/// only response has provisional usage.
#[test]
fn spotter_subagent_and_compaction_agent() {
    check(
        "claude",
        "spotter-subagents-compact",
        &Want {
            files: 2,
            lines: 42,
            records: 30,
            usage: [2411, 15, 140503, 47116],
            by_model: &[
                ("claude-opus-4-6", [3, 8, 121689, 17842]),
                ("claude-sonnet-4-5-20250929", [2408, 7, 18814, 29274]),
            ],
        },
    );
}

/// Bedrock lines carry no `requestId`. A response streamed over several
/// lines (main-file lines 3 to 6, `msg_bdrk_013SYvCzWGkVVXBeihWmL3gF`) is
/// one response by `(message.id, no requestId)`, as the spec's section 8
/// and ccusage's source (`push_deduped_entry`) key it: counted once, with
/// its final line's usage. The ccusage 20.0.24 binary counts lines 3, 4
/// and 5 as well (input 16923, output 1058, cache write 159346, cache read
/// 214627: three times 3, 4 and 35066 more); a difference on purpose,
/// documented in the README.
#[test]
fn codemie_bedrock_without_request_ids() {
    check(
        "claude",
        "codemie-bedrock-2.0.64",
        &Want {
            files: 3,
            lines: 29,
            records: 23,
            usage: [16914, 1046, 54148, 214627],
            by_model: &[
                ("claude-sonnet-4-5-20250929", [36, 809, 54148, 214627]),
                (
                    "converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0",
                    [16878, 237, 0, 0],
                ),
            ],
        },
    );
}

#[test]
fn codemie_codex_exec_0_77() {
    check(
        "codex",
        "codemie-exec-0.77.0",
        &Want {
            files: 1,
            lines: 26,
            records: 10,
            usage: [7626, 300, 0, 14848],
            by_model: &[("gpt-5-1-codex-2025-11-13", [7626, 300, 0, 14848])],
        },
    );
    assert_eq!(
        stats("codex", "codemie-exec-0.77.0")["usage"]["total_tokens"],
        22774
    );
}

#[test]
fn codemie_codex_tui_0_125_prefix() {
    check(
        "codex",
        "codemie-tui-0.125.0",
        &Want {
            files: 1,
            lines: 95,
            records: 55,
            usage: [251204, 2157, 0, 128896],
            by_model: &[("gpt-5.5", [251204, 2157, 0, 128896])],
        },
    );
    assert_eq!(
        stats("codex", "codemie-tui-0.125.0")["usage"]["total_tokens"],
        382257
    );
}
