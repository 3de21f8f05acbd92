//! GitHub Copilot CLI session logs (`events.jsonl`): the mapping line by
//! line on the samples in `../shared/samples` (ignored in a plain clone)
//! and on lines written here; usage from `session.shutdown` (segments
//! reset and cumulative, a crash's messages), detection and discovery.

use std::fs;
use std::path::{Path, PathBuf};

use mem_ingest::format::{detect_format, Format, Input};
use mem_ingest::formats::Copilot;
use mem_ingest::{OwnedRecord, Report, Role, SkipReason, SourceOptions};
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use common::entries::{numbered, rec, rows, samples, Entries, NONE};

fn read_both(path: &Path) -> (Entries, Report) {
    common::entries::read_both(&Copilot, path)
}

fn record(entries: &Entries, line: u64) -> &OwnedRecord {
    entries
        .iter()
        .find(|(l, _)| *l == line)
        .and_then(|(_, r)| r.as_ref())
        .unwrap_or_else(|| panic!("no record on line {line}"))
}

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("copilot", name)
}

const SID: &str = "7cf44517-0000-4000-8000-000000000001";

fn ev(ty: &str, id: &str, ts: &str, data: Value) -> String {
    json!({"type": ty, "data": data, "id": id, "timestamp": ts, "parentId": null}).to_string()
}

fn shutdown(id: &str, ts: &str, model: &str, t: [u64; 4]) -> String {
    ev(
        "session.shutdown",
        id,
        ts,
        json!({"shutdownType": "routine", "modelMetrics": {model: {
        "requests": {"count": 1},
        "usage": {"inputTokens": t[0], "outputTokens": t[1], "cacheReadTokens": t[2], "cacheWriteTokens": t[3]}}}}),
    )
}

fn session_lines() -> Vec<String> {
    vec![
        ev(
            "session.start",
            "e1",
            "2026-04-01T10:00:00.000Z",
            json!({"sessionId": SID, "version": 1, "producer": "copilot-agent", "copilotVersion": "1.0.80", "startTime": "2026-04-01T10:00:00.000Z", "selectedModel": "gpt-5-mini", "context": {"cwd": "/home/me/app"}}),
        ),
        ev(
            "session.model_change",
            "e2",
            "2026-04-01T10:00:01.000Z",
            json!({"newModel": "claude-sonnet-4.5"}),
        ),
        ev(
            "system.message",
            "e3",
            "2026-04-01T10:00:02.000Z",
            json!({"role": "system", "content": "You are the GitHub Copilot CLI"}),
        ),
        ev(
            "user.message",
            "e4",
            "2026-04-01T10:00:03.000Z",
            json!({"content": "why is the pool exhausted"}),
        ),
        ev(
            "assistant.turn_start",
            "e5",
            "2026-04-01T10:00:04.000Z",
            json!({"turnId": "0"}),
        ),
        ev(
            "assistant.message",
            "e6",
            "2026-04-01T10:00:05.000Z",
            json!({"messageId": "m1", "content": "", "reasoningText": "check the scan loop", "toolRequests": [{"toolCallId": "c1", "name": "bash", "arguments": {"command": "grep -n rows ."}}], "outputTokens": 40, "requestId": "r1"}),
        ),
        ev(
            "tool.execution_start",
            "e7",
            "2026-04-01T10:00:06.000Z",
            json!({"toolCallId": "c1", "toolName": "bash", "arguments": {"command": "grep -n rows ."}}),
        ),
        ev(
            "tool.execution_complete",
            "e8",
            "2026-04-01T10:00:07.000Z",
            json!({"toolCallId": "c1", "success": true, "result": {"content": "poller.go:12: rows, _ := db.Query()"}}),
        ),
        ev(
            "tool.execution_complete",
            "e9",
            "2026-04-01T10:00:08.000Z",
            json!({"toolCallId": "c2", "success": false, "error": {"message": "permission denied"}}),
        ),
        ev(
            "session.context_changed",
            "e10",
            "2026-04-01T10:00:09.000Z",
            json!({"cwd": "/home/me/app/db"}),
        ),
        ev(
            "assistant.message",
            "e11",
            "2026-04-01T10:00:10.000Z",
            json!({"messageId": "m2", "content": "Add rows.Close()", "outputTokens": 60}),
        ),
        ev(
            "session.compaction_complete",
            "e12",
            "2026-04-01T10:00:11.000Z",
            json!({"success": true, "summaryContent": "Fixed the poller leak"}),
        ),
        ev("hook.start", "e13", "2026-04-01T10:00:12.000Z", json!({})),
        shutdown(
            "e14",
            "2026-04-01T10:00:13.000Z",
            "claude-sonnet-4.5",
            [10_000, 500, 8_000, 1_000],
        ),
    ]
}

fn write_session(home: &Path, dir: &str, lines: &[String]) -> PathBuf {
    let d = home.join("session-state").join(dir);
    fs::create_dir_all(&d).unwrap();
    let p = d.join("events.jsonl");
    fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

#[test]
fn every_event_shape_line_by_line() {
    let dir = tmpdir("shapes");
    let p = write_session(&dir, SID, &session_lines());
    let (entries, report) = read_both(&p);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE, // session.start
            NONE, // session.model_change
            rec(System, "system.message", &["text"]),
            rec(User, "user.message", &["text"]),
            NONE, // assistant.turn_start
            rec(Assistant, "assistant.message", &["thinking", "toolCall"]),
            NONE, // tool.execution_start
            rec(ToolResult, "tool.execution_complete", &["text"]),
            rec(ToolResult, "tool.execution_complete", &["text"]),
            NONE, // session.context_changed
            rec(Assistant, "assistant.message", &["text"]),
            rec(System, "session.compaction_complete", &["text"]),
            NONE, // hook.start
            NONE, // session.shutdown
        ])
    );
    let u = record(&entries, 4);
    assert_eq!(u.key, format!("{SID}:e4"));
    assert_eq!(
        (u.project.as_str(), u.text.as_str()),
        ("/home/me/app", "why is the pool exhausted")
    );
    assert_eq!(u.source, format!("copilot:{SID}"));
    let a = record(&entries, 6);
    assert_eq!(
        a.text,
        "check the scan loop\nbash {\"command\":\"grep -n rows .\"}"
    );
    assert_eq!(a.model.as_deref(), Some("claude-sonnet-4.5"));
    assert_eq!(
        (a.tool_name.as_deref(), a.tool_call_id.as_deref()),
        (Some("bash"), Some("c1"))
    );
    assert_eq!(
        (a.message_id.as_deref(), a.request_id.as_deref()),
        (Some("m1"), Some("r1"))
    );
    assert_eq!(a.usage.map(|u| (u.output, u.total_tokens)), Some((40, 40)));
    let t = record(&entries, 8);
    assert_eq!(
        (t.text.as_str(), t.is_error, t.tool_call_id.as_deref()),
        (
            "poller.go:12: rows, _ := db.Query()",
            Some(false),
            Some("c1")
        )
    );
    let t = record(&entries, 9);
    assert_eq!(
        (t.text.as_str(), t.is_error),
        ("permission denied", Some(true))
    );
    // The cwd in force after session.context_changed.
    assert_eq!(record(&entries, 11).project, "/home/me/app/db");
    assert_eq!(record(&entries, 12).text, "Fixed the poller leak");
    assert_eq!(
        (
            report.lines,
            report.records,
            report.no_record,
            report.skipped
        ),
        (14, 7, 7, 0)
    );
    // Usage: the shutdown's segment: input 10000 less 8000 read and 1000
    // written; its output 500, of which the messages' 100 were counted as
    // they came.
    let u = report.usage;
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens
        ),
        (1_000, 500, 8_000, 1_000, 10_500)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Usage by segment (the spec's rule, section 4): a snapshot covers its
/// own segment, and segments add up; a snapshot is cumulative (only its
/// growth counts) when every field is at least the last one's and the
/// file has `session.usage_checkpoint` lines (newer CLIs). A segment
/// without a shutdown (a crash) keeps the output its messages carry.
#[test]
fn usage_by_segment_reset_cumulative_and_crashed() {
    let dir = tmpdir("segments");
    let m = "gpt-5.4";
    let start = ev(
        "session.start",
        "s",
        "2026-04-01T10:00:00.000Z",
        json!({"sessionId": SID, "selectedModel": m, "context": {"cwd": "/w"}}),
    );
    let resume = |id: &str, ts: &str| ev("session.resume", id, ts, json!({"resumeTime": ts}));
    let msg = |id: &str, ts: &str, n: u64| {
        ev(
            "assistant.message",
            id,
            ts,
            json!({"messageId": id, "content": "x", "outputTokens": n}),
        )
    };
    let checkpoint = |id: &str, ts: &str| {
        ev(
            "session.usage_checkpoint",
            id,
            ts,
            json!({"totalNanoAiu": 1}),
        )
    };
    let total = |lines: Vec<String>| {
        let p = write_session(&dir, SID, &lines);
        let (_, r) = read_both(&p);
        let u = r.usage;
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens,
        )
    };
    // Reset segments (older CLIs): 100 then 40 input, summed.
    let reset = vec![
        start.clone(),
        shutdown("d1", "2026-04-01T11:00:00.000Z", m, [100, 10, 0, 0]),
        resume("r1", "2026-04-02T10:00:00.000Z"),
        shutdown("d2", "2026-04-02T11:00:00.000Z", m, [40, 5, 0, 0]),
    ];
    assert_eq!(total(reset), (140, 15, 0, 0, 155));
    // Cumulative (checkpoints written, every field grew): the growth.
    let cumulative = vec![
        start.clone(),
        checkpoint("c1", "2026-04-01T10:30:00.000Z"),
        shutdown("d1", "2026-04-01T11:00:00.000Z", m, [100, 10, 20, 0]),
        resume("r1", "2026-04-02T10:00:00.000Z"),
        checkpoint("c2", "2026-04-02T10:30:00.000Z"),
        shutdown("d2", "2026-04-02T11:00:00.000Z", m, [160, 15, 30, 0]),
    ];
    assert_eq!(total(cumulative), (130, 15, 30, 0, 175));
    // Checkpoints, but a field went down: a reset after all.
    let fell = vec![
        start.clone(),
        checkpoint("c1", "2026-04-01T10:30:00.000Z"),
        shutdown("d1", "2026-04-01T11:00:00.000Z", m, [100, 10, 0, 0]),
        shutdown("d2", "2026-04-02T11:00:00.000Z", m, [90, 20, 0, 0]),
    ];
    assert_eq!(total(fell), (190, 30, 0, 0, 220));
    // A crash: no shutdown; the messages' output alone.
    let crashed = vec![
        start.clone(),
        msg("a1", "2026-04-01T10:01:00.000Z", 7),
        msg("a2", "2026-04-01T10:02:00.000Z", 8),
    ];
    assert_eq!(total(crashed.clone()), (0, 15, 0, 0, 15));
    // Crashed, then resumed and shut down: the crashed segment's output
    // stays; the next segment's shutdown less its own messages' output.
    let mut then = crashed;
    then.push(resume("r1", "2026-04-02T10:00:00.000Z"));
    then.push(msg("a3", "2026-04-02T10:01:00.000Z", 4));
    then.push(shutdown("d1", "2026-04-02T11:00:00.000Z", m, [50, 9, 0, 0]));
    assert_eq!(total(then), (50, 15 + 9, 0, 0, 74));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/copilot-cli"]
fn samples_line_by_line() {
    let root = samples().join("copilot-cli");
    let dv = root.join(
        "deja-vu/fixtures/registry/copilot/7cf44517-55ca-435c-893a-3fde1973a44e/events.jsonl",
    );
    let (entries, report) = read_both(&dv);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE,
            NONE,
            rec(System, "system.message", &["text"]),
            rec(User, "user.message", &["text"]),
            NONE,
            rec(Assistant, "assistant.message", &["text"]),
            NONE,
        ])
    );
    let a = record(&entries, 6);
    assert_eq!(
        a.text,
        "the metrics poller leaks rows; add rows.Close in the scan loop"
    );
    assert_eq!(
        (a.model.as_deref(), a.project.as_str()),
        (Some("gpt-5-mini"), "/Users/x/coding/gateway")
    );
    assert_eq!(a.key, "7cf44517-55ca-435c-893a-3fde1973a44e:a1");
    assert_eq!(
        (report.lines, report.records, report.usage.total_tokens),
        (7, 3, 0)
    );
    let ccu = root.join("ccusage/rust/adapters/copilot/tests/fixtures/session-state");
    // A non-JSON first line (skipped), a start without a sessionId (the
    // folder's name), two shutdowns without checkpoints: two segments.
    let (entries, report) = read_both(&ccu.join("session-a/events.jsonl"));
    assert_eq!(
        rows(&entries),
        vec![
            (2, None, String::new(), vec![]),
            (3, None, String::new(), vec![]),
            (4, None, String::new(), vec![])
        ]
    );
    assert_eq!(
        (report.lines, report.skipped, report.skips[0].line),
        (4, 1, 1)
    );
    let u = report.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.cache_write),
        (70 + 150, 130, 30, 50)
    );
    assert_eq!(report.by_model[0].model, "claude-opus-4.6");
    let (_, report) = read_both(&ccu.join("session-credits/events.jsonl"));
    let u = report.usage;
    assert_eq!((u.input, u.output, u.total_tokens), (40, 10, 50));
}

#[test]
fn detection_from_content() {
    let dir = tmpdir("detect");
    let formats = mem_ingest::formats::builtin();
    let detect = |name: &str, text: &str| {
        let p = dir.join(name);
        fs::write(&p, text).unwrap();
        formats[detect_format(&formats, &p)].name()
    };
    assert_eq!(
        detect("a.jsonl", &(session_lines().join("\n") + "\n")),
        "copilot"
    );
    // A damaged first line, then an event.
    assert_eq!(
        detect("b.jsonl", &format!("not json\n{}\n", session_lines()[3])),
        "copilot"
    );
    // A first line longer than the detection prefix.
    let long = ev(
        "session.start",
        "e1",
        "2026-04-01T10:00:00.000Z",
        json!({"sessionId": SID, "pad": "y".repeat(70_000)}),
    );
    assert_eq!(detect("c.jsonl", &long), "copilot");
    // Codex's and Claude Code's lines are theirs.
    let codex = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t","cwd":"/a"}}"#;
    assert_eq!(detect("d.jsonl", &format!("{codex}\n")), "codex");
    let claude = r#"{"type":"user","uuid":"u1","sessionId":"s","cwd":"/a","message":{"role":"user","content":"hi"}}"#;
    assert_eq!(detect("e.jsonl", &format!("{claude}\n")), "claude");
    fs::remove_dir_all(dir).unwrap();
}

fn bin(home: &Path) -> std::process::Command {
    let mut c = common::cli();
    c.env("HOME", home);
    c
}

fn stats(c: &mut std::process::Command) -> (Option<i32>, Value, String) {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v, err)
}

fn ndjson(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn keys(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn default_archive_and_copilot_home() {
    let home = tmpdir("defaults");
    let (code, _, err) = stats(bin(&home).args(["stats", "--json", "-q", "--agent", "copilot"]));
    assert_eq!(code, Some(1));
    assert!(err.contains(".copilot/session-state"), "{err}");
    let cop = home.join(".copilot");
    write_session(&cop, SID, &session_lines());
    // Not sessions: workspace.yaml beside it, the OTel files.
    fs::write(
        cop.join("session-state").join(SID).join("workspace.yaml"),
        "id: x\n",
    )
    .unwrap();
    fs::create_dir_all(cop.join("otel")).unwrap();
    fs::write(
        cop.join("otel/trace.jsonl"),
        "{\"type\":\"span\",\"attributes\":{}}\n",
    )
    .unwrap();
    let (code, v, err) = stats(bin(&home).args(["stats", "--json", "-q"]));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        (v["files"].as_u64(), v["records"].as_u64()),
        (Some(1), Some(7)),
        "{v}"
    );
    assert_eq!(v["by_source"]["copilot"]["files"].as_u64(), Some(1), "{v}");
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(10_500));
    // COPILOT_HOME moves it.
    let other = home.join("elsewhere");
    write_session(&other, "s2", &session_lines()[..4]);
    let (code, v, err) = stats(
        bin(&home)
            .args(["stats", "--json", "-q", "--agent", "copilot"])
            .env("COPILOT_HOME", &other),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        (v["files"].as_u64(), v["records"].as_u64()),
        (Some(1), Some(2))
    );
    fs::remove_dir_all(home).unwrap();
}

/// Copilot's reported damage (spec section 6): NULs after a crash, a cut
/// prefix glued to a whole event, raw U+2028 inside a string, invalid
/// UTF-8, a cut last line: counted, located skips; every other event read.
#[test]
fn hostile_lines_are_counted_located_skips() {
    let l = session_lines();
    let mut text = Vec::new();
    for line in &l[..4] {
        text.extend_from_slice(line.as_bytes());
        text.push(b'\n');
    }
    // 5: a cut prefix glued to a whole event (after a resume).
    text.extend_from_slice(&l[5].as_bytes()[..50]);
    text.extend_from_slice(l[5].as_bytes());
    text.push(b'\n');
    // 6: a raw U+2028 and invalid UTF-8 in a message.
    let odd = ev(
        "user.message",
        "e20",
        "2026-04-01T10:01:00.000Z",
        json!({"content": "a\u{2028}b X"}),
    );
    let mut odd = odd.into_bytes();
    let at = odd.windows(2).position(|w| w == b" X").unwrap();
    odd[at + 1] = 0xff;
    text.extend_from_slice(&odd);
    text.push(b'\n');
    // 7: a cut last line, then NULs (a crash).
    text.extend_from_slice(&l[10].as_bytes()[..40]);
    text.extend_from_slice(b"\0\0\0\0\0\0\0\0");
    let path = Path::new("session-state/s/events.jsonl");
    let opts = SourceOptions::new();
    let read = |input: Input<'_>| {
        let mut src = Copilot.open(input, path, &opts).unwrap();
        let mut recs = Vec::new();
        while let Some(e) = src.next_entry().unwrap() {
            recs.push((e.line, e.record.map(|r| r.text.to_owned())));
        }
        (recs, src.report().clone())
    };
    let a = read(Input::Bytes(&text));
    let b = read(Input::Reader(Box::new(std::io::Cursor::new(text.clone()))));
    assert_eq!(a, b);
    let (recs, r) = a;
    let with_text: Vec<(u64, String)> = recs
        .into_iter()
        .filter_map(|(l, t)| Some((l, t?)))
        .collect();
    assert_eq!(
        with_text,
        vec![
            (3, "You are the GitHub Copilot CLI".to_owned()),
            (4, "why is the pool exhausted".to_owned()),
            (6, "a\u{2028}b \u{fffd}".to_owned()),
        ]
    );
    assert_eq!((r.lines, r.records, r.skipped, r.repaired), (7, 3, 2, 1));
    let at: Vec<(u64, u64)> = r.skips.iter().map(|s| (s.line, s.byte)).collect();
    let b5: u64 = l[..4].iter().map(|x| x.len() as u64 + 1).sum();
    let b7 = b5 + 50 + l[5].len() as u64 + 1 + odd.len() as u64 + 1;
    assert_eq!(at, vec![(5, b5), (7, b7)]);
    assert!(
        matches!(r.skips[0].reason, SkipReason::Malformed(_)),
        "{:?}",
        r.skips[0]
    );
    assert_eq!(r.skips[1].reason, SkipReason::Nul);
}

/// A session written in steps, a run after each: with `--state -o`,
/// `--db` and `--parquet`, each run adds exactly the new records, and the
/// usage after the last equals a fresh run's (the shutdown after a resumed
/// read takes out the output its segment's messages counted in an
/// earlier run).
#[test]
fn incremental_runs_emit_only_what_is_new() {
    let home = tmpdir("incremental");
    let arch = home.join("archive");
    let lines = session_lines();
    let path = write_session(&arch, SID, &lines[..6]);
    let (state, out, db, ds, pstate, sstate) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("memory.db"),
        home.join("ds"),
        home.join("pstate"),
        home.join("sstate"),
    );
    let run = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = bin(&home);
        c.arg(args[0]).args(["-q", "--agent", "copilot"]);
        for a in &args[1..] {
            c.arg(a);
        }
        c.arg(&arch);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o
    };
    let all = |step: usize| {
        run(&[&"backfill", &"--state", &state, &"-o", &out]);
        run(&[&"backfill", &"--db", &db]);
        run(&[&"backfill", &"--parquet", &ds, &"--state", &pstate]);
        let o = run(&[&"stats", &"--json", &"--state", &sstate]);
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            step,
            v["usage"]["output"].as_u64(),
            v["usage"]["total_tokens"].as_u64(),
        )
    };
    assert_eq!(all(1), (1, Some(40), Some(40)));
    common::append(&path, &format!("{}\n", lines[6..].join("\n")));
    assert_eq!(all(2), (2, Some(500), Some(10_500)));
    let got = keys(&ndjson(&fs::read(&out).unwrap()));
    let fresh = bin(&home)
        .args(["backfill", "-q", "--agent", "copilot"])
        .arg(&arch)
        .output()
        .unwrap();
    assert_eq!(got, keys(&ndjson(&fresh.stdout)));
    assert_eq!(got.len(), 7);
    let c = rusqlite::Connection::open(&db).unwrap();
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM records WHERE format = 'copilot'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 7);
    let mut rows = 0;
    let mut stack = vec![ds.join("records")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                assert!(p.to_string_lossy().contains("format=copilot/"));
                let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    fs::File::open(&p).unwrap(),
                )
                .unwrap()
                .build()
                .unwrap();
                rows += r.map(|b| b.unwrap().num_rows()).sum::<usize>();
            }
        }
    }
    assert_eq!(rows, 7);
    fs::remove_dir_all(home).unwrap();
}

/// A generated Copilot home (resumed sessions, cumulative snapshots,
/// crashes), backfilled with `--state -o` and with `--db`, killed with
/// SIGKILL after growing delays until a run finishes: exactly a clean
/// run's records, once each; and `stats --state` stopped so gives a clean
/// run's usage (the running context saved with each checkpoint).
#[test]
fn killed_at_any_moment_every_record_exactly_once() {
    use std::time::Instant;
    let d = tmpdir("kill");
    let arch = d.join("copilot");
    let g = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "copilot",
            "--total-mb",
            "12",
            "--seed",
            "5",
            "--archive",
        ])
        .arg(&arch)
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let started = Instant::now();
    let clean = bin(&d)
        .args(["backfill", "-q", "--jobs", "2"])
        .arg(&arch)
        .output()
        .unwrap();
    let pace = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    assert!(clean.status.success());
    let want = keys(&ndjson(&clean.stdout));
    assert!(want.len() > 2_000, "{}", want.len());
    let usage = |o: &std::process::Output| {
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["usage"].clone()
    };
    // A clean run with a state of its own: its costs are those recorded
    // (none), as a stateful run's (stats prices responses without one).
    let clean_usage = usage(
        &bin(&d)
            .args(["stats", "--json", "-q", "--state"])
            .arg(d.join("clean.state"))
            .arg(&arch)
            .output()
            .unwrap(),
    );
    let (state, out, db, sstate) = (
        d.join("state"),
        d.join("out.ndjson"),
        d.join("store.db"),
        d.join("sstate"),
    );
    for sink in ["state", "db", "stats"] {
        let run = || {
            let mut c = bin(&d);
            match sink {
                "state" => c
                    .args([
                        "backfill",
                        "-q",
                        "--jobs",
                        "2",
                        "--checkpoint-ms",
                        "1",
                        "--state",
                    ])
                    .arg(&state)
                    .arg("-o")
                    .arg(&out),
                "db" => c
                    .args([
                        "backfill",
                        "-q",
                        "--jobs",
                        "2",
                        "--checkpoint-ms",
                        "1",
                        "--db",
                    ])
                    .arg(&db),
                _ => c
                    .args([
                        "stats",
                        "--json",
                        "-q",
                        "--jobs",
                        "2",
                        "--checkpoint-ms",
                        "1",
                        "--state",
                    ])
                    .arg(&sstate),
            };
            c.arg(&arch);
            c
        };
        let kills = common::kill_until_it_finishes(run, pace, sink);
        match sink {
            "state" => assert_eq!(
                keys(&ndjson(&fs::read(&out).unwrap())),
                want,
                "after {kills} kills"
            ),
            "db" => {
                let c = rusqlite::Connection::open(&db).unwrap();
                let mut st = c.prepare("SELECT key FROM records").unwrap();
                let mut got: Vec<String> = st
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let mut w = want.clone();
                got.sort();
                w.sort();
                assert_eq!(got, w, "after {kills} kills");
            }
            _ => {
                let again = run().output().unwrap();
                assert_eq!(usage(&again), clean_usage, "after {kills} kills");
            }
        }
    }
    fs::remove_dir_all(d).unwrap();
}

/// `--follow` emits an appended event within a second; SIGTERM stops it.
#[test]
fn follow_emits_appended_events_within_a_second() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let d = tmpdir("follow");
    let lines = session_lines();
    let arch = d.join("home");
    let path = write_session(&arch, SID, &lines[..4]);
    let (state, out) = (d.join("state"), d.join("out.ndjson"));
    let mut child = bin(&d)
        .args([
            "backfill", "-q", "--follow", "--agent", "copilot", "--state",
        ])
        .arg(&state)
        .arg("-o")
        .arg(&out)
        .arg(&arch)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait_for = |n: usize| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if fs::read(&out).map(|b| ndjson(&b).len()).unwrap_or(0) >= n {
                return t.elapsed();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no {n} records after 10 s");
    };
    wait_for(2);
    common::append(&path, &format!("{}\n", lines[10]));
    let latency = wait_for(3);
    assert!(latency < Duration::from_secs(1), "latency {latency:?}");
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        keys(&ndjson(&fs::read(&out).unwrap())),
        [
            format!("{SID}:e3"),
            format!("{SID}:e4"),
            format!("{SID}:e11")
        ]
    );
    fs::remove_dir_all(d).unwrap();
}

/// A session whose last segment has no shutdown (a crash, or still
/// running) is counted as partial usage in `stats` (JSON and table); once
/// its shutdown is written, a run with the same `--state` no longer counts
/// it, and its usage is the shutdown's.
#[test]
fn a_session_without_shutdown_is_partial_in_stats() {
    let home = tmpdir("partial");
    let arch = home.join("archive");
    let lines = session_lines();
    write_session(&arch, SID, &lines);
    // Another session (its own id): its last segment not shut down.
    let other: Vec<String> = lines.iter().map(|l| l.replace(SID, "s2")).collect();
    let open = write_session(&arch, "s2", &other[..11]);
    let state = home.join("state");
    let run = |json: bool| {
        let mut c = bin(&home);
        c.args(["stats", "-q", "--agent", "copilot", "--state"])
            .arg(&state);
        if json {
            c.arg("--json");
        }
        let o = c.arg(&arch).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let v: Value = serde_json::from_slice(&run(true)).unwrap();
    assert_eq!(v["partial_usage"].as_u64(), Some(1), "{v}");
    // The open session's messages' output: 40 + 60.
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(10_500 + 100));
    let table = String::from_utf8(run(false)).unwrap();
    assert!(
        table.contains("partial usage")
            && table.contains("files (no session.shutdown yet: output only)"),
        "{table}"
    );
    common::append(&open, &format!("{}\n", other[13]));
    let v: Value = serde_json::from_slice(&run(true)).unwrap();
    assert!(v.get("partial_usage").is_none(), "{v}");
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(2 * 10_500));
    fs::remove_dir_all(home).unwrap();
}
