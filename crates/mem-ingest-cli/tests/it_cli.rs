//! The command line, run as a user runs it, on the committed fixtures.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn bin() -> Command {
    common::cli()
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("runs")
}

fn stats_json(args: &[&str]) -> (Value, Output) {
    let mut all = vec!["stats", "--json", "--quiet"];
    all.extend_from_slice(args);
    let out = run(&all);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stats --json gave no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out)
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mem-ingest-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn stats_over_the_fixtures_exact() {
    // Without deduplication: every file counted as if alone, as pi's loader
    // sees each.
    let (s, out) = stats_json(&["--no-dedupe", "fixtures/"]);
    // Three files lack a valid header (garbage before it, no id, no header):
    // each is a failure naming the path; the others are read.
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(s["files"], 20);
    assert_eq!(s["files_failed"], 3);
    assert_eq!(s["files_empty"], 2);
    // pi's oracle counts over the same files, plus bom-prefixed.jsonl which
    // pi 1.x rejects and we accept (147 entries: 123 messages, ...).
    let entries = serde_json::json!({
        "session": 16, "model_change": 31, "thinking_level_change": 31,
        "message": 2040, "session_info": 22, "custom": 86, "usage": 17,
        "compaction": 34, "context_edit": 18, "label": 50, "branch_summary": 23,
        "custom_message": 44, "future_entry": 1
    });
    assert_eq!(s["entries"], entries);
    assert_eq!(
        s["roles"],
        serde_json::json!({"user": 408, "assistant": 753, "tool_result": 777,
            "bash_execution": 42, "custom": 64, "system": 96})
    );
    assert_eq!(s["lines"], 2417);
    assert_eq!(s["records"], 2140);
    assert_eq!(s["skipped"], 4);
    assert_eq!(s["repaired"], 118);
    let failures: Vec<(&str, &str)> = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["error"].as_str().unwrap()))
        .collect();
    assert_eq!(
        failures,
        vec![
            (
                "fixtures/no-header/garbage-then-header.jsonl",
                "1:0: not a session header: malformed JSON (unexpected bytes after the value or invalid structure)"
            ),
            ("fixtures/no-header/header-without-id.jsonl", "1:0: session header without a string \"id\""),
            (
                "fixtures/no-header/no-header-first-line-message.jsonl",
                "1:0: not a session header: first entry has type \"model_change\""
            ),
        ]
    );
    assert_eq!(s["deduplicated"], 0);
    let skips: Vec<String> = s["skips"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            format!(
                "{}:{}:{}",
                k["path"].as_str().unwrap(),
                k["line"],
                k["byte"]
            )
        })
        .collect();
    assert_eq!(
        skips,
        vec![
            "fixtures/bad/malformed-middle-line.jsonl:11:58976",
            "fixtures/bad/malformed-middle-line.jsonl:12:59011",
            "fixtures/bad/nul-bytes-tail.jsonl:148:239260",
            "fixtures/bad/truncated-last-line.jsonl:147:239126",
        ]
    );
}

#[test]
fn stats_over_the_fixtures_deduplicated() {
    // By default each entry counts once per lineage. The damaged variants
    // in fixtures/bad are copies of one session (same id): together they
    // hold sample-all-types once. Six sessions: hand-built, pi-1x,
    // pi-classic, sample-all-types, s-v1, s-v2.
    let (s, out) = stats_json(&["fixtures/"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(s["entries"]["session"], 6);
    // 22 + 626 + 315 (pi-classic) + 130 (sample) + 4 (v1) + 3 (v2)
    assert_eq!(s["records"], 1100);
    assert_eq!(s["entries"]["message"], 19 + 605 + 303 + 123 + 3 + 3);
    assert_eq!(s["deduplicated"], 1177);
    assert_eq!(s["lines"], 2417);
    // The invariant: records + deduplicated + entries without a record +
    // skipped = non-blank lines.
    let no_record: u64 = s["entries"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum::<u64>()
        - s["records"].as_u64().unwrap();
    assert_eq!(1100 + 1177 + no_record + 4, 2417);
    assert_eq!(s["skipped"], 4);
    // Sessions are distinct ids: the damaged copies are one session.
    assert_eq!(s["by_project"][0]["project"], "/tmp/my-project");
    assert_eq!(s["by_project"][0]["sessions"], 6);
    assert_eq!(s["by_project"][0]["records"], 1100);
}

#[test]
fn stats_json_schema_and_usage_of_hand_built() {
    let (s, out) = stats_json(&["fixtures/hand-built.jsonl"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        keys(&s),
        [
            "files",
            "files_failed",
            "files_empty",
            "bytes",
            "lines",
            "records",
            "skipped",
            "repaired",
            "deduplicated",
            "pending",
            "roles",
            "entries",
            "usage",
            "by_model",
            "by_project",
            "failures",
            "skips"
        ]
    );
    assert_eq!(
        keys(&s["roles"]),
        [
            "user",
            "assistant",
            "tool_result",
            "bash_execution",
            "custom",
            "system"
        ]
    );
    assert_eq!(
        (s["files"].as_u64(), s["bytes"].as_u64()),
        (Some(1), Some(9517))
    );
    assert_eq!(
        (s["lines"].as_u64(), s["records"].as_u64()),
        (Some(33), Some(22))
    );
    // Assistant messages (A1..A6, A4 without totalTokens: 360 computed),
    // the toolResult usage and the 1.x usage entry.
    assert_eq!(
        s["usage"],
        serde_json::json!({"input": 2015, "output": 209, "cache_read": 14000,
            "cache_write": 2400, "total_tokens": 18624, "cost": 13.5625})
    );
    let m = &s["by_model"][0];
    assert_eq!(
        keys(m),
        [
            "provider",
            "model",
            "messages",
            "input",
            "output",
            "cache_read",
            "cache_write",
            "total_tokens",
            "cost"
        ]
    );
    assert_eq!(
        (m["provider"].as_str(), m["model"].as_str()),
        (Some("anthropic"), Some("claude-sonnet-4-5"))
    );
    assert_eq!(m["messages"], 6);
    assert_eq!(m["total_tokens"], 18613);
    assert_eq!(
        s["by_project"],
        serde_json::json!([{"project": "/tmp/my-project", "sessions": 1, "records": 22,
            "total_tokens": 18624, "cost": 13.5625}])
    );
}

/// `-q` silences the progress bar, the warnings and the summary, never an
/// error: a file that fails is named on stderr, exit 1, the other files'
/// records still written.
#[test]
fn quiet_runs_still_name_failed_files() {
    let out = run(&[
        "backfill",
        "-q",
        "fixtures/hand-built.jsonl",
        "fixtures/no-header/header-without-id.jsonl",
        "fixtures/bad/malformed-middle-line.jsonl",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: fixtures/no-header/header-without-id.jsonl: 1:0: "),
        "{err}"
    );
    let records = out.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    assert_eq!(records.count(), 22 + 130);
}

#[test]
fn backfill_schema_and_filters() {
    let out = run(&["backfill", "-q", "fixtures/hand-built.jsonl"]);
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 22);
    let a = &lines[2];
    assert_eq!(
        keys(a),
        [
            "key",
            "project",
            "session",
            "file",
            "source",
            "line",
            "byte",
            "id",
            "parent_id",
            "entry",
            "role",
            "kinds",
            "timestamp",
            "text",
            "provider",
            "model",
            "usage",
            "stop_reason"
        ]
    );
    assert_eq!(a["key"], "hand-built-0001:c0de0005");
    assert_eq!(a["file"], "fixtures/hand-built.jsonl");
    assert_eq!(a["source"], "pi:hand-built");
    assert_eq!(
        (a["line"].as_u64(), a["byte"].as_u64()),
        (Some(6), Some(1128))
    );
    assert_eq!(
        a["kinds"],
        serde_json::json!(["thinking", "text", "toolCall"])
    );
    assert_eq!(
        a["text"],
        "Let me look at the files first.\nI'll list the project \u{1F600} first.\nbash {\"command\":\"ls -la /tmp/my-project\",\"timeout\":30}"
    );
    assert_eq!(
        keys(&a["usage"]),
        [
            "input",
            "output",
            "cache_read",
            "cache_write",
            "total_tokens",
            "cost"
        ]
    );
    // Records without content still carry kinds, as [].
    assert!(lines.iter().all(|l| l["kinds"].is_array()));
    assert!(lines
        .iter()
        .all(|l| !l.as_object().unwrap().values().any(Value::is_null)));

    let out = run(&[
        "backfill",
        "-q",
        "--role",
        "bash_execution",
        "--max-text",
        "5",
        "fixtures/hand-built.jsonl",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (rows[0]["text"].as_str(), rows[0]["text_bytes"].as_u64()),
        (Some("$ car"), Some(44))
    );
    assert_eq!(
        (rows[1]["text"].as_str(), rows[1]["text_bytes"].as_u64()),
        (Some("$ sle"), Some(12))
    );

    // A cut never splits a character: "é" is two bytes.
    let out = run(&[
        "backfill",
        "-q",
        "--max-text",
        "24",
        "--role",
        "user",
        "fixtures/hand-built.jsonl",
    ]);
    let first: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["text"], "Fix the \"bug\" in C:\\User");

    // Time bounds: since inclusive, until exclusive, in Unix ms on the record.
    let out = run(&[
        "backfill",
        "-q",
        "--since",
        "2026-01-15T10:00:05Z",
        "--until",
        "2026-01-15T10:00:07.000Z",
        "fixtures/hand-built.jsonl",
    ]);
    let ts: Vec<i64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["timestamp"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(ts, vec![1_768_471_205_000, 1_768_471_206_000]);
}

#[test]
fn exit_codes() {
    assert_eq!(run(&["backfill", "--no-such-flag"]).status.code(), Some(2));
    assert_eq!(
        run(&["backfill", "--since", "yesterday", "fixtures/"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["backfill", "--role", "robot", "fixtures/"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        run(&["stats", "--jobs", "0", "fixtures/"]).status.code(),
        Some(2)
    );
    // A PATH that does not exist fails that PATH, after the others are read.
    let (s, out) = stats_json(&["fixtures/hand-built.jsonl", "no/such/path"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        (
            s["files"].as_u64(),
            s["files_failed"].as_u64(),
            s["records"].as_u64()
        ),
        (Some(2), Some(1), Some(22))
    );
    assert_eq!(s["failures"][0]["path"], "no/such/path");
    let out = run(&["stats", "fixtures/hand-built.jsonl", "no/such/path"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("error: no/such/path: No such file or directory"),
        "{err}"
    );
}

#[test]
fn missing_archive_is_a_clear_error() {
    let d = tmpdir("noarchive");
    let out = bin()
        .args(["stats"])
        .env("PI_CODING_AGENT_SESSION_DIR", d.join("gone"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("session archive") && err.contains("gone"),
        "{err}"
    );
    // PI_CODING_AGENT_DIR/sessions when only that is set.
    std::fs::create_dir_all(d.join("agent/sessions/--tmp-p--")).unwrap();
    std::fs::copy(
        "fixtures/hand-built.jsonl",
        d.join("agent/sessions/--tmp-p--/x.jsonl"),
    )
    .unwrap();
    let out = bin()
        .args(["stats", "--json", "-q"])
        .env("PI_CODING_AGENT_DIR", d.join("agent"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["records"], 22);
    std::fs::remove_dir_all(d).unwrap();
}

/// A session of more than one part (8 MiB): header, pi-written lines
/// repeated, blank lines and a damaged line in each round.
fn big_session(dir: &Path) -> PathBuf {
    let src = std::fs::read("fixtures/pi-1x.jsonl").unwrap();
    let mut lines = src.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    let header = lines.next().unwrap();
    let body: Vec<&[u8]> = lines.collect();
    let mut out = header.to_vec();
    out.push(b'\n');
    while out.len() < 20_000_000 {
        for l in &body {
            out.extend_from_slice(l);
            out.push(b'\n');
        }
        out.extend_from_slice(b"\n \r\n{\"type\":\"message\", broken\n");
    }
    let p = dir.join("big.jsonl");
    std::fs::write(&p, out).unwrap();
    p
}

#[test]
fn output_identical_whatever_the_jobs_and_offsets_exact() {
    let d = tmpdir("jobs");
    let big = big_session(&d);
    let data = std::fs::read(&big).unwrap();
    let args = |j: &'static str, dedupe: &'static str| {
        vec![
            "backfill",
            "-q",
            dedupe,
            "--jobs",
            j,
            "fixtures/",
            big.to_str().unwrap(),
        ]
        .into_iter()
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect::<Vec<_>>()
    };
    // Deduplicated (the default): the repeated rounds of the large file
    // are copies of its first round.
    let one = bin().args(args("1", "")).output().unwrap();
    let two = bin().args(args("2", "")).output().unwrap();
    let five = bin().args(args("5", "")).output().unwrap();
    assert_eq!(one.status.code(), Some(1)); // the three header-less fixtures
    assert!(
        one.stdout == two.stdout && one.stdout == five.stdout,
        "deduplicated output differs with --jobs"
    );
    let big_name = big.to_str().unwrap();
    let from_big = |out: &[u8]| {
        out.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter(|l| serde_json::from_slice::<Value>(l).unwrap()["file"] == big_name)
            .count()
    };
    assert_eq!(from_big(&one.stdout), 626);
    let one = bin().args(args("1", "--no-dedupe")).output().unwrap();
    let two = bin().args(args("2", "--no-dedupe")).output().unwrap();
    let five = bin().args(args("5", "--no-dedupe")).output().unwrap();
    assert!(
        one.stdout == two.stdout && one.stdout == five.stdout,
        "output differs with --jobs"
    );
    // Every record of the large file points at the start of its line.
    let starts: Vec<usize> = std::iter::once(0)
        .chain(
            data.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    let mut n = 0;
    for l in one.stdout.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let r: Value = serde_json::from_slice(l).unwrap();
        if r["file"] == big.to_str().unwrap() {
            let (line, byte) = (
                r["line"].as_u64().unwrap() as usize,
                r["byte"].as_u64().unwrap() as usize,
            );
            assert_eq!(starts[line - 1], byte, "line {line}");
            assert_eq!(data[byte], b'{');
            n += 1;
        }
    }
    let bad: &[u8] = b"{\"type\":\"message\", broken\n";
    let rounds = data.windows(bad.len()).filter(|w| *w == bad).count();
    assert!(rounds >= 2);
    // pi-1x has 626 records per round (605 messages, 3 compactions, 2 branch summaries, 16 custom_message entries).
    assert_eq!(n, 626 * rounds);
    let (s1, _) = stats_json(&["--no-dedupe", "--jobs", "1", big.to_str().unwrap()]);
    let (s2, _) = stats_json(&["--no-dedupe", "--jobs", "2", big.to_str().unwrap()]);
    let (d1, _) = stats_json(&["--jobs", "1", big.to_str().unwrap()]);
    let (d2, _) = stats_json(&["--jobs", "2", big.to_str().unwrap()]);
    assert_eq!(d1, d2);
    assert_eq!(d1["records"], 626);
    assert_eq!(d1["deduplicated"].as_u64(), Some((rounds as u64 - 1) * 697));
    assert_eq!(s1, s2);
    assert_eq!(s1["skipped"].as_u64(), Some(rounds as u64));
    assert_eq!(s1["records"].as_u64(), Some(626 * rounds as u64));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn folders_links_and_damaged_files() {
    let d = tmpdir("tree");
    let proj = d.join("--tmp-my-project--");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::copy("fixtures/hand-built.jsonl", proj.join("a.jsonl")).unwrap();
    std::fs::copy(
        "fixtures/bad/truncated-last-line.jsonl",
        proj.join("b.jsonl"),
    )
    .unwrap();
    std::fs::copy(
        "fixtures/no-header/no-header-first-line-message.jsonl",
        proj.join("c.jsonl"),
    )
    .unwrap();
    std::fs::write(proj.join("notes.txt"), "not a session").unwrap();
    // A symlink loop, and the same file reached through a link.
    std::os::unix::fs::symlink(&d, proj.join("loop")).unwrap();
    std::os::unix::fs::symlink(proj.join("a.jsonl"), d.join("link.jsonl")).unwrap();
    let (s, out) = stats_json(&[d.to_str().unwrap(), proj.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(s["files"], 3);
    assert_eq!(s["files_failed"], 1);
    // a: 22 records; b: 130 (its damaged last line skipped).
    assert_eq!(s["records"].as_u64(), Some(22 + 130));
    assert_eq!(s["skipped"], 1);
    assert!(s["failures"][0]["path"]
        .as_str()
        .unwrap()
        .ends_with("c.jsonl"));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn closed_stdout_ends_quietly() {
    let mut child = bin()
        .args(["backfill", "fixtures/"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: the pipe is closed.
    assert!(first.starts_with("{\"key\":"));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "");
}

#[test]
fn output_file_replaced_and_inputs_never_written() {
    let d = tmpdir("out");
    let o = d.join("out.ndjson");
    std::fs::write(&o, "old content\n").unwrap();
    let before = std::fs::read("fixtures/hand-built.jsonl").unwrap();
    let out = run(&[
        "backfill",
        "-q",
        "-o",
        o.to_str().unwrap(),
        "fixtures/hand-built.jsonl",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(&o).unwrap();
    assert_eq!(written.lines().count(), 22);
    assert!(written.starts_with("{\"key\":\"hand-built-0001:c0de0003\""));
    assert_eq!(std::fs::read("fixtures/hand-built.jsonl").unwrap(), before);
    // The output may not be one of the inputs.
    let copy = d.join("s.jsonl");
    std::fs::copy("fixtures/hand-built.jsonl", &copy).unwrap();
    let out = run(&[
        "backfill",
        "-q",
        "-o",
        copy.to_str().unwrap(),
        d.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    // Nor a session file the listing would find, though it does not exist
    // yet (the listing may be taken before the output is created), with a
    // state or without; a refused run leaves nothing behind.
    let names = || {
        // (The lock file beside a state stays, as after any run.)
        let mut n: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "state.lock")
            .collect();
        n.sort();
        n
    };
    let files = names();
    let new = d.join("new.jsonl");
    let state = d.join("state");
    for with_state in [false, true, true, true] {
        let mut args = vec!["backfill", "-q", "-o", new.to_str().unwrap()];
        if with_state {
            args.extend(["--state", state.to_str().unwrap()]);
        }
        args.push(d.to_str().unwrap());
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "state: {with_state}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "error: the output {} is one of the input files\n",
                new.display()
            )
        );
        assert_eq!(names(), files, "state: {with_state}");
    }
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn summary_on_stderr() {
    let out = run(&["stats", "fixtures/bad/truncated-last-line.jsonl"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("warning: fixtures/bad/truncated-last-line.jsonl:147:239126: skipped: truncated last line"),
        "{err}"
    );
    assert!(
        err.contains("mem-ingest: 1 files (0 failed, 0 empty), 130 records, 0 deduplicated, 1 skipped, 9 repaired"),
        "{err}"
    );
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("records             130"), "{table}");
}

/// A session whose texts hold every kind of escape: the ones the writer
/// writes itself and others (`\/`, `\u00e9`, uppercase hex, `\u0008` for
/// a byte with a short escape, a surrogate pair), in one-piece texts,
/// joined blocks, tool-call arguments, a bash execution, a summary and an
/// image's type; one line the lean parse leaves to simd-json (a 20-digit
/// integer) and one repaired (a lone surrogate).
const ESCAPES: &str = concat!(
    r#"{"type":"session","version":3,"id":"esc-1","timestamp":"2026-01-15T10:00:00.000Z","cwd":"/tmp/p"}"#,
    "\n",
    r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-15T10:00:01.000Z","message":{"role":"user","content":"a\/b caf\u00e9 \u001B[1m \u001b[0m \u0008 \ud83d\ude00 \u000b line\nq\"b\\"}}"#,
    "\n",
    r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-15T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm\u00e9"},{"type":"text","text":"x\ny"},{"type":"toolCall","id":"t1","name":"ed\u0069t","arguments":{"path":"a\/b","s":"\u00e9\n","c":"q\"\\\tz","n":[1,"\n"]}},{"type":"text","text":"\u001b!"}],"provider":"p","model":"m"}}"#,
    "\n",
    r#"{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-01-15T10:00:03.000Z","message":{"role":"bashExecution","command":"ls \u00e9\t","output":"\u001B[0m\/x\nok","exitCode":0}}"#,
    "\n",
    r#"{"type":"compaction","id":"e4","parentId":"e3","timestamp":"2026-01-15T10:00:04.000Z","summary":"s\/um\u00e9\n","firstKeptEntryId":"e1","tokensBefore":10}"#,
    "\n",
    r#"{"type":"message","id":"e5","parentId":"e4","timestamp":"2026-01-15T10:00:05.000Z","message":{"role":"user","content":[{"type":"text","text":"see\/"},{"type":"image","mimeType":"image\/p\u006eg","data":"aGVsbG8="}]}}"#,
    "\n",
    r#"{"type":"message","id":"e6","parentId":"e5","timestamp":"2026-01-15T10:00:06.000Z","message":{"role":"user","content":"plain\ttab \u001f\n"}}"#,
    "\n",
    r#"{"type":"message","id":"e7","parentId":"e6","timestamp":"2026-01-15T10:00:07.000Z","big":12345678901234567890,"message":{"role":"user","content":"big caf\u00e9\n"}}"#,
    "\n",
    r#"{"type":"message","id":"e8","parentId":"e7","timestamp":"2026-01-15T10:00:08.000Z","message":{"role":"user","content":"bad \ud800 x\n"}}"#,
    "\n",
);

/// `backfill` of `f` to a file in `dir` (text built escaped), to stdout,
/// and with `--max-text` (decoded and escaped by the writer): the same
/// bytes, returned.
fn same_three_outputs(dir: &Path, f: &str) -> Vec<u8> {
    let out_file = dir.join("out.ndjson");
    let to_file = run(&["backfill", "-q", "-o", out_file.to_str().unwrap(), f]);
    assert_eq!(to_file.status.code(), Some(0));
    let raw = std::fs::read(&out_file).unwrap();
    let stdout = run(&["backfill", "-q", f]).stdout;
    let decoded = run(&["backfill", "-q", "--max-text", "1000000000", f]).stdout;
    assert_eq!(
        String::from_utf8_lossy(&raw),
        String::from_utf8_lossy(&decoded)
    );
    assert_eq!(
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&decoded)
    );
    raw
}

#[test]
fn record_text_built_escaped_is_what_the_writer_writes_exact() {
    // `backfill` to a file or to stdout builds a pi record's text escaped,
    // from the line's raw strings (`pi::Text`); with `--max-text` it is
    // decoded and escaped by the writer. The three outputs are the same
    // bytes, and the texts are these.
    let dir = tmpdir("escapes");
    let file = dir.join("esc.jsonl");
    std::fs::write(&file, ESCAPES).unwrap();
    let f = file.to_str().unwrap();
    let raw = same_three_outputs(&dir, f);
    let rows: Vec<Value> = std::str::from_utf8(&raw)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let texts: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(
        texts,
        [
            "a/b café \u{1b}[1m \u{1b}[0m \u{8} 😀 \u{b} line\nq\"b\\",
            concat!(
                "hmé\nx\ny\n",
                r#"edit {"path":"a/b","s":"é\n","c":"q\"\\\tz","n":[1,"\n"]}"#,
                "\n\u{1b}!"
            ),
            "$ ls é\t\n\u{1b}[0m/x\nok",
            "s/umé\n",
            "see/\n[image image/png, 5 bytes]",
            "plain\ttab \u{1f}\n",
            "big café\n",
            "bad \u{fffd} x\n",
        ]
    );
    // Each text as serde_json writes it (the writer's own escapes).
    for (line, text) in std::str::from_utf8(&raw).unwrap().lines().zip(&texts) {
        let written = serde_json::to_string(text).unwrap();
        assert!(line.contains(&format!(",\"text\":{written}")), "{line}");
    }

    // The same on every fixture (the README's main job's files).
    let out_file = dir.join("out.ndjson");
    let mut args = vec!["backfill", "-q", "-o", out_file.to_str().unwrap()];
    let fixtures: Vec<String> = std::fs::read_dir("fixtures")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| p.to_str().unwrap().to_owned())
        .collect();
    args.extend(fixtures.iter().map(String::as_str));
    args.push("fixtures/bad/");
    run(&args);
    let raw = std::fs::read(&out_file).unwrap();
    args.splice(2..4, ["--max-text", "1000000000"]);
    let decoded = run(&args).stdout;
    assert_eq!(raw.iter().filter(|b| **b == b'\n').count(), 1100);
    assert!(raw == decoded, "fixtures: -o and --max-text differ");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 41: a run that read no file prints no table of zeros: the error
/// and the summary alone.
#[test]
fn stats_of_a_missing_path_prints_only_its_error() {
    let out = run(&["stats", "no/such/path"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert_eq!(
        lines[0],
        "error: no/such/path: No such file or directory (os error 2)"
    );
    assert_eq!(
        lines[1].split(" MB read in ").next().unwrap(),
        "mem-ingest: 1 files (1 failed, 0 empty), 0 records, 0 deduplicated, 0 skipped, 0 \
         repaired, 0.0"
    );
}

/// Issue 41: `--agent` names the agents read everywhere; `--source`
/// (backfill, stats) and search's `--format` stay as aliases.
#[test]
fn agent_is_the_flag_everywhere() {
    let hand = "fixtures/hand-built.jsonl";
    let by_agent = run(&["backfill", "--agent", "pi", "-q", hand]);
    assert_eq!(by_agent.status.code(), Some(0));
    let by_source = run(&["backfill", "--source", "pi", "-q", hand]);
    assert_eq!(by_agent.stdout, by_source.stdout);
    assert_eq!(by_agent.stdout.iter().filter(|b| **b == b'\n').count(), 22);
    let (s, out) = stats_json(&["--agent", "pi", hand]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(s["records"], 22);

    let d = tmpdir("agent");
    let db = d.join("s.db");
    let db = db.to_str().unwrap();
    assert_eq!(
        run(&["backfill", "-q", "--db", db, hand]).status.code(),
        Some(0)
    );
    let hits = |flag: &str, agent: &str| {
        let out = run(&["search", "--json", "--db", db, flag, agent, "project"]);
        assert_eq!(out.status.code(), Some(0), "{flag} {agent}");
        out.stdout.iter().filter(|b| **b == b'\n').count()
    };
    let all = hits("--agent", "pi");
    assert!(all > 0);
    assert_eq!(hits("--format", "pi"), all);
    assert_eq!(hits("--agent", "codex"), 0);

    for (cmd, alias) in [
        ("backfill", "--source"),
        ("stats", "--source"),
        ("search", "--format"),
    ] {
        let help = String::from_utf8(run(&[cmd, "--help"]).stdout).unwrap();
        assert!(help.contains("--agent <AGENT>"), "{cmd}: {help}");
        assert!(help.contains(&format!("[alias: {alias}]")), "{cmd}: {help}");
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// Issue 41: the package, the help and the README name every agent read,
/// and the state file for what it is (binary, not JSON).
#[test]
fn descriptions_name_every_agent() {
    assert_eq!(
        env!("CARGO_PKG_DESCRIPTION"),
        "Streams the session archives of coding agents (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex, Amp, Cline, OpenCode, Cursor, Goose) into \
         normalised, zero-copy records"
    );
    let top = String::from_utf8(run(&["--help"]).stdout).unwrap();
    assert_eq!(
        top.lines().next(),
        Some("Reads the session archives of coding agents (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex, Amp, Cline, OpenCode, Cursor, Goose) into normalised records")
    );
    let search = String::from_utf8(run(&["search", "--help"]).stdout).unwrap();
    assert!(!search.contains("(pi)"), "{search}");
    assert!(
        search.contains(
            "Only records of this agent: pi, gemini, qwen, copilot, claude, codex, amp, cline, opencode, goose or cursor"
        ),
        "{search}"
    );
    let backfill = String::from_utf8(run(&["backfill", "--help"]).stdout).unwrap();
    assert!(!backfill.contains("as pi writes it"), "{backfill}");
    assert!(
        backfill.contains(
            "as its agent writes it (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex, Amp, Cline, OpenCode, Cursor, Goose)"
        ),
        "{backfill}"
    );
    let readme = include_str!("../../../README.md");
    assert!(!readme.contains("state.json"));
}

/// A pi session whose assistant turns ended in an error (`stopReason`
/// `"error"`), with and without content, with and without a message; the
/// last turn did not fail.
const ERROR_TURNS: &str = concat!(
    r#"{"type":"session","version":3,"id":"err","timestamp":"2026-01-15T10:00:00.000Z","cwd":"/tmp/err"}"#,
    "\n",
    r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-15T10:00:01.000Z","message":{"role":"user","content":"go"}}"#,
    "\n",
    r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-15T10:00:02.000Z","message":{"role":"assistant","content":[],"provider":"anthropic","model":"m","stopReason":"error","errorMessage":"429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"Rate limited\"}}"}}"#,
    "\n",
    r#"{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-01-15T10:00:03.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"partial \u00e9"}],"stopReason":"error","errorMessage":"500 overloaded\n\tcaf\u00e9 \/ done"}}"#,
    "\n",
    r#"{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-01-15T10:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":""}],"stopReason":"error","errorMessage":"terminated"}}"#,
    "\n",
    r#"{"type":"message","id":"e5","parentId":"e4","timestamp":"2026-01-15T10:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"cut"}],"stopReason":"error"}}"#,
    "\n",
    r#"{"type":"message","id":"e6","parentId":"e5","timestamp":"2026-01-15T10:00:06.000Z","message":{"role":"assistant","content":[{"type":"text","text":"fine"}],"stopReason":"stop","errorMessage":"not an error"}}"#,
    "\n",
);

/// `(text, kinds)` of each record of [`ERROR_TURNS`].
fn error_turns_want() -> Vec<(String, Vec<String>)> {
    let k = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        ("go".into(), k(&["text"])),
        (
            r#"429 {"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}"#
                .into(),
            k(&["error"]),
        ),
        (
            "hm\npartial é\n500 overloaded\n\tcafé / done".into(),
            k(&["thinking", "text", "error"]),
        ),
        ("terminated".into(), k(&["text", "error"])),
        ("cut".into(), k(&["text", "error"])),
        ("fine".into(), k(&["text"])),
    ]
}

#[test]
fn an_error_turn_is_its_content_then_its_error_message_on_every_output() {
    // pi: `stopReason: "error"`: the content's text, "\n", `errorMessage`
    // (alone when the content has no text); kind `error` last. The same
    // from `-o` (text built escaped), stdout and `--max-text` (decoded),
    // and from the library.
    let dir = tmpdir("error-turns");
    let file = dir.join("err.jsonl");
    std::fs::write(&file, ERROR_TURNS).unwrap();
    let f = file.to_str().unwrap();
    let raw = same_three_outputs(&dir, f);
    assert_eq!(common::texts_and_kinds(&raw), error_turns_want());
    let mut src = mem_ingest::PiSessionSource::from_reader(ERROR_TURNS.as_bytes(), f).unwrap();
    let mut lib = Vec::new();
    while let Some(r) = mem_ingest::RecordSource::next_record(&mut src).unwrap() {
        let kinds = r.kinds.iter().map(|k| (*k).to_owned()).collect();
        lib.push((r.text.to_owned(), kinds));
    }
    assert_eq!(lib, error_turns_want());
    assert_eq!(mem_ingest::raw_text_agrees(ERROR_TURNS.as_bytes()), Ok(6));
    // The store: a phrase of an error message finds its turn.
    let db = dir.join("err.db");
    let db = db.to_str().unwrap();
    assert!(run(&["backfill", "-q", "--db", db, f]).status.success());
    let found = run(&["search", "--json", "--db", db, "\"rate limited\""]);
    assert!(found.status.success());
    let keys: Vec<String> = std::str::from_utf8(&found.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(keys, ["err:e2"]);
    std::fs::remove_dir_all(&dir).unwrap();
}
