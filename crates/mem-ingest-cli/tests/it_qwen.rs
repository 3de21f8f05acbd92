//! Qwen Code chat files: the mapping of `docs/qwen-code.md`, line by line,
//! on the sample in `../shared/samples` (ignored in a plain clone, where it
//! is absent) and on lines written here; usage, detection, discovery,
//! forks, hostile input and incremental runs through the command line.

use std::fs;
use std::path::{Path, PathBuf};

use mem_ingest::format::{detect_format, Format, Input};
use mem_ingest::formats::Qwen;
use mem_ingest::{OwnedRecord, Report, Role, SourceOptions};
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use common::entries::{numbered, rec, rows, samples, Entries, NONE};

fn read_both(path: &Path) -> (Entries, Report) {
    common::entries::read_both(&Qwen, path)
}

fn record(entries: &Entries, line: u64) -> &OwnedRecord {
    entries
        .iter()
        .find(|(l, _)| *l == line)
        .and_then(|(_, r)| r.as_ref())
        .unwrap_or_else(|| panic!("no record on line {line}"))
}

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("qwen", name)
}

const SID: &str = "5f0c2a44-1111-4222-8333-944455556666";

/// A record of the session `SID` in `/home/me/app`, its fields after the
/// envelope's.
fn line(uuid: &str, parent: Option<&str>, ts: &str, ty: &str, more: Value) -> String {
    let mut v = json!({
        "uuid": uuid,
        "parentUuid": parent,
        "sessionId": SID,
        "timestamp": ts,
        "type": ty,
        "cwd": "/home/me/app",
        "version": "0.15.2",
    });
    for (k, x) in more.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

fn usage(prompt: u64, cached: u64, out: u64, thoughts: u64) -> Value {
    json!({
        "promptTokenCount": prompt,
        "cachedContentTokenCount": cached,
        "candidatesTokenCount": out,
        "thoughtsTokenCount": thoughts,
        "totalTokenCount": prompt + out + thoughts,
    })
}

/// Every record shape of the spec, one a line.
fn session_lines() -> Vec<String> {
    vec![
        // 1: the user's prompt.
        line(
            "u1",
            None,
            "2026-03-01T10:00:00.000Z",
            "user",
            json!({
            "message": {"role": "user", "parts": [{"text": "Fix the parser"}]}}),
        ),
        // 2: a thought, text and a tool call, with usage.
        line(
            "a1",
            Some("u1"),
            "2026-03-01T10:00:01.000Z",
            "assistant",
            json!({
            "model": "qwen3-coder-plus",
            "message": {"role": "model", "parts": [
                {"text": "Look at the file first", "thought": true},
                {"text": "Reading it."},
                {"functionCall": {"id": "call_1", "name": "read_file", "args": {"path": "src/p.rs"}}}
            ]},
            "usageMetadata": usage(1000, 600, 50, 20),
            "contextWindowSize": 131072}),
        ),
        // 3: its result.
        line(
            "t1",
            Some("a1"),
            "2026-03-01T10:00:02.000Z",
            "tool_result",
            json!({
            "message": {"role": "user", "parts": [
                {"functionResponse": {"id": "call_1", "name": "read_file", "response": {"output": "fn main() {}"}}}
            ]},
            "toolCallResult": {"callId": "call_1", "status": "success", "resultDisplay": "1 line"}}),
        ),
        // 4: a failed tool.
        line(
            "t2",
            Some("t1"),
            "2026-03-01T10:00:03.000Z",
            "tool_result",
            json!({
            "message": {"role": "user", "parts": [
                {"functionResponse": {"id": "call_2", "name": "run_shell_command", "response": {"error": "exit 1"}}}
            ]},
            "toolCallResult": {"callId": "call_2", "status": "error", "error": {"message": "exit 1"}}}),
        ),
        // 5: telemetry, with token counts that must not be added.
        line(
            "s1",
            Some("t2"),
            "2026-03-01T10:00:04.000Z",
            "system",
            json!({
            "subtype": "ui_telemetry",
            "systemPayload": {"uiEvent": {"event.name": "qwen-code.api_response", "input_token_count": 999, "output_token_count": 999}}}),
        ),
        // 6: the title, re-anchored.
        line(
            "s2",
            Some("s1"),
            "2026-03-01T10:00:05.000Z",
            "system",
            json!({
            "subtype": "custom_title", "systemPayload": {"customTitle": "Parser fix", "titleSource": "auto"}}),
        ),
        // 7: compression.
        line(
            "s3",
            Some("s2"),
            "2026-03-01T10:00:06.000Z",
            "system",
            json!({
            "subtype": "chat_compression",
            "systemPayload": {
                "info": {"originalTokenCount": 1000, "newTokenCount": 200, "compressionStatus": 1},
                "compressedHistory": [
                    {"role": "user", "parts": [{"text": "<state_snapshot>parser work</state_snapshot>"}]},
                    {"role": "model", "parts": [{"text": "Got it."}]}
                ]}}),
        ),
        // 8: a rewind.
        line(
            "s4",
            Some("s3"),
            "2026-03-01T10:00:07.000Z",
            "system",
            json!({
            "subtype": "rewind", "systemPayload": {"truncatedCount": 3}}),
        ),
        // 9: a notification Qwen injected as user input.
        line(
            "u2",
            Some("u1"),
            "2026-03-01T10:00:08.000Z",
            "user",
            json!({
            "subtype": "notification",
            "message": {"role": "user", "parts": [{"text": "Background task done"}]}}),
        ),
        // 10: an answer without usage, an image part.
        line(
            "a2",
            Some("u2"),
            "2026-03-01T10:00:09.000Z",
            "assistant",
            json!({
            "model": "qwen3-coder-plus",
            "message": {"role": "model", "parts": [
                {"text": "Done."},
                {"inlineData": {"mimeType": "image/png", "data": "aGVsbG8="}}
            ]}}),
        ),
        // 11: the fork marker.
        line(
            "s5",
            Some("a2"),
            "2026-03-01T10:00:10.000Z",
            "system",
            json!({
            "subtype": "parent_session", "systemPayload": {"parentSessionId": "0000"}}),
        ),
        // 12: a type of a later release.
        line(
            "x1",
            Some("s5"),
            "2026-03-01T10:00:11.000Z",
            "goal_marker",
            json!({}),
        ),
    ]
}

fn write_session(dir: &Path, lines: &[String]) -> PathBuf {
    let chats = dir.join("projects/-home-me-app/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let p = chats.join(format!("{SID}.jsonl"));
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

#[test]
fn every_record_shape_line_by_line() {
    let dir = tmpdir("shapes");
    let p = write_session(&dir, &session_lines());
    let (entries, report) = read_both(&p);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            rec(User, "user", &["text"]),
            rec(Assistant, "assistant", &["thinking", "text", "toolCall"]),
            rec(ToolResult, "tool_result", &["text"]),
            rec(ToolResult, "tool_result", &["text"]),
            NONE, // system/ui_telemetry
            NONE, // system/custom_title
            rec(System, "system/chat_compression", &["text"]),
            rec(System, "system/rewind", &[]),
            rec(System, "user/notification", &["text"]),
            rec(Assistant, "assistant", &["text", "image"]),
            NONE, // system/parent_session
            NONE, // goal_marker
        ])
    );
    let u = record(&entries, 1);
    assert_eq!(u.key, format!("{SID}:u1"));
    assert_eq!(
        (u.session.as_str(), u.project.as_str()),
        (SID, "/home/me/app")
    );
    assert_eq!(u.source, format!("qwen:{SID}"));
    assert_eq!((u.text.as_str(), u.line, u.byte), ("Fix the parser", 1, 0));
    assert_eq!(u.timestamp, Some(1_772_359_200_000));
    assert_eq!(u.message_role.as_deref(), Some("user"));
    let a = record(&entries, 2);
    assert_eq!(
        a.text,
        "Look at the file first\nReading it.\nread_file {\"path\":\"src/p.rs\"}"
    );
    assert_eq!(a.byte, session_lines()[0].len() as u64 + 1);
    assert_eq!(
        (a.id.as_deref(), a.parent_id.as_deref()),
        (Some("a1"), Some("u1"))
    );
    assert_eq!(a.model.as_deref(), Some("qwen3-coder-plus"));
    assert_eq!(a.provider, None);
    assert_eq!(
        (a.tool_name.as_deref(), a.tool_call_id.as_deref()),
        (Some("read_file"), Some("call_1"))
    );
    let us = a.usage.unwrap();
    // The prompt's 1000 include the 600 cached; thoughts are in the total.
    assert_eq!(
        (
            us.input,
            us.cache_read,
            us.output,
            us.cache_write,
            us.total_tokens
        ),
        (400, 600, 50, 0, 1070)
    );
    let t = record(&entries, 3);
    assert_eq!(t.text, "fn main() {}");
    assert_eq!(
        (
            t.tool_name.as_deref(),
            t.tool_call_id.as_deref(),
            t.is_error
        ),
        (Some("read_file"), Some("call_1"), Some(false))
    );
    let t = record(&entries, 4);
    assert_eq!(t.text, "exit 1");
    assert_eq!(
        (
            t.tool_name.as_deref(),
            t.tool_call_id.as_deref(),
            t.is_error
        ),
        (Some("run_shell_command"), Some("call_2"), Some(true))
    );
    let c = record(&entries, 7);
    assert_eq!(c.text, "<state_snapshot>parser work</state_snapshot>");
    assert_eq!(c.custom_type.as_deref(), Some("chat_compression"));
    let r = record(&entries, 8);
    assert_eq!(
        (r.text.as_str(), r.custom_type.as_deref()),
        ("[rewind: 3 truncated]", Some("rewind"))
    );
    let n = record(&entries, 9);
    assert_eq!(
        (n.text.as_str(), n.custom_type.as_deref()),
        ("Background task done", Some("notification"))
    );
    let a2 = record(&entries, 10);
    assert_eq!(a2.text, "Done.\n[image image/png, 5 bytes]");
    assert_eq!((a2.usage, a2.tool_name.as_deref()), (None, None));
    // Counts: every line accounted for, by entry type.
    assert_eq!(
        (
            report.lines,
            report.records,
            report.no_record,
            report.skipped
        ),
        (12, 8, 4, 0)
    );
    for (ty, n) in [
        ("user", 1),
        ("assistant", 2),
        ("tool_result", 2),
        ("system/ui_telemetry", 1),
        ("system/custom_title", 1),
        ("system/chat_compression", 1),
        ("system/rewind", 1),
        ("system/parent_session", 1),
        ("user/notification", 1),
        ("goal_marker", 1),
    ] {
        assert_eq!(report.entries.get(ty), n, "{ty}");
    }
    // Usage: the one assistant usage, never the telemetry's.
    let u = report.usage;
    assert_eq!(
        (u.input, u.output, u.cache_read, u.total_tokens),
        (400, 50, 600, 1070)
    );
    assert_eq!(report.by_model.len(), 1);
    let m = &report.by_model[0];
    assert_eq!(
        (m.provider.as_str(), m.model.as_str(), m.messages),
        ("qwen", "qwen3-coder-plus", 1)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn usage_shapes() {
    let dir = tmpdir("usage");
    let lines = vec![
        // No cache, no thoughts, no total: the sum.
        line(
            "a1",
            None,
            "2026-03-01T10:00:00.000Z",
            "assistant",
            json!({"model": "m",
            "message": {"role": "model", "parts": [{"text": "x"}]},
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5}}),
        ),
        // Only a total: output, as ccusage counts it.
        line(
            "a2",
            None,
            "2026-03-01T10:00:01.000Z",
            "assistant",
            json!({"model": "m",
            "message": {"role": "model", "parts": [{"text": "x"}]},
            "usageMetadata": {"totalTokenCount": 15}}),
        ),
        // Cached above the prompt: input 0, not a wrap.
        line(
            "a3",
            None,
            "2026-03-01T10:00:02.000Z",
            "assistant",
            json!({"model": "m",
            "message": {"role": "model", "parts": [{"text": "x"}]},
            "usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 20, "candidatesTokenCount": 1, "totalTokenCount": 11}}),
        ),
        // Usage on a user line: not counted (ccusage reads assistant lines).
        line(
            "u1",
            None,
            "2026-03-01T10:00:03.000Z",
            "user",
            json!({
            "message": {"role": "user", "parts": [{"text": "x"}]},
            "usageMetadata": {"promptTokenCount": 100}}),
        ),
        // No model: the totals only.
        line(
            "a4",
            None,
            "2026-03-01T10:00:04.000Z",
            "assistant",
            json!({
            "message": {"role": "model", "parts": [{"text": "x"}]},
            "usageMetadata": usage(7, 0, 3, 0)}),
        ),
    ];
    let p = write_session(&dir, &lines);
    let (entries, report) = read_both(&p);
    let t = |l: u64| {
        let u = record(&entries, l).usage.unwrap();
        (u.input, u.cache_read, u.output, u.total_tokens)
    };
    assert_eq!(t(1), (10, 0, 5, 15));
    assert_eq!(t(2), (0, 0, 15, 15));
    assert_eq!(t(3), (0, 10, 1, 11));
    assert_eq!(record(&entries, 4).usage, None);
    assert_eq!(t(5), (7, 0, 3, 10));
    let u = report.usage;
    assert_eq!(
        (u.input, u.cache_read, u.output, u.total_tokens),
        (17, 10, 24, 51)
    );
    assert_eq!(report.by_model.len(), 1);
    assert_eq!(
        (
            report.by_model[0].messages,
            report.by_model[0].usage.total_tokens
        ),
        (3, 41)
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A session whose lines name no `cwd` is counted under project `""` in
/// `by_project`, shown as `(unknown)` in the table.
#[test]
fn a_session_without_a_cwd_is_of_the_unknown_project() {
    let dir = tmpdir("no-cwd");
    let lines: Vec<String> = session_lines()[..2]
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v.as_object_mut().unwrap().remove("cwd");
            v.to_string()
        })
        .collect();
    write_session(&dir, &lines);
    let (code, v, err) = stats(bin(&dir).args(["stats", "--json", "-q"]).arg(&dir));
    assert_eq!(code, Some(0), "{err}");
    let p = &v["by_project"][0];
    assert_eq!(
        (p["project"].as_str(), p["records"].as_u64()),
        (Some(""), Some(2)),
        "{v}"
    );
    let out = bin(&dir).args(["stats", "-q"]).arg(&dir).output().unwrap();
    let table = String::from_utf8(out.stdout).unwrap();
    let line = table
        .lines()
        .find(|l| l.contains("(unknown)"))
        .unwrap_or_default();
    assert!(line.trim_start().starts_with("(unknown)"), "{table}");
    fs::remove_dir_all(dir).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/qwen-code"]
fn deja_vu_sample_line_by_line() {
    let p = samples().join(
        "qwen-code/deja-vu/fixtures/registry/qwen/projects/-workspace-registry-demo/chats/registry-qwen.jsonl",
    );
    let (entries, report) = read_both(&p);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            rec(User, "user", &["text"]),
            rec(Assistant, "assistant", &["text"]),
        ])
    );
    // No uuid, no cwd: keys by line, the project unknown.
    let u = record(&entries, 1);
    assert_eq!(u.key, "registry-qwen:registry-qwen:L1");
    assert_eq!(
        (u.session.as_str(), u.project.as_str()),
        ("registry-qwen", "")
    );
    assert_eq!(u.text, "Inspect the sample parser.");
    assert_eq!((u.byte, u.timestamp), (0, Some(1_784_278_800_000)));
    let a = record(&entries, 2);
    assert_eq!(
        (a.key.as_str(), a.byte),
        ("registry-qwen:registry-qwen:L2", 153)
    );
    assert_eq!(a.text, "I found the parser fixture.");
    assert_eq!(a.message_role.as_deref(), Some("model"));
    assert_eq!(
        (report.lines, report.records, report.skipped, report.bytes),
        (2, 2, 0, 313)
    );
    assert_eq!(report.usage.total_tokens, 0);
    // Found among every agent's formats by its content.
    let formats = mem_ingest::formats::builtin();
    assert_eq!(formats[detect_format(&formats, &p)].name(), "qwen");
}

#[test]
fn detection_from_content() {
    let dir = tmpdir("detect");
    let formats = mem_ingest::formats::builtin();
    let detect = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        formats[detect_format(&formats, &p)].name()
    };
    let qwen = session_lines().join("\n") + "\n";
    assert_eq!(detect("a.jsonl", &qwen), "qwen");
    // A telemetry line first: its systemPayload says so.
    assert_eq!(
        detect("b.jsonl", &(session_lines()[4].clone() + "\n")),
        "qwen"
    );
    // A first line longer than the detection prefix.
    let long = line(
        "u9",
        None,
        "2026-03-01T10:00:00.000Z",
        "user",
        json!({
        "message": {"role": "user", "parts": [{"text": "y".repeat(70_000)}]}}),
    );
    assert_eq!(detect("c.jsonl", &long), "qwen");
    // Claude Code's lines share the envelope, not the Gemini shapes.
    let claude = r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","cwd":"/a","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}"#;
    assert_eq!(detect("d.jsonl", &format!("{claude}\n")), "claude");
    std::fs::remove_dir_all(dir).unwrap();
}

// ---------------------------------------------------------------------------
// The command line

/// The binary with every default archive pointed into `home`.
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

/// A fork made by `/branch` after line 2 of [`session_lines`]: the copies
/// keep their `uuid`s, timestamps and usage under the fork's `sessionId`,
/// with `forkedFrom`; then a line of its own with usage.
fn fork_lines() -> Vec<String> {
    let fid = "99999999-aaaa-4bbb-8ccc-dddddddddddd";
    let mut out: Vec<String> = session_lines()[..2]
        .iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let uuid = v["uuid"].clone();
            v["sessionId"] = json!(fid);
            v["forkedFrom"] = json!({"sessionId": SID, "messageUuid": uuid});
            v.to_string()
        })
        .collect();
    let mut own: Value = serde_json::from_str(&line(
        "f1",
        Some("a1"),
        "2026-03-02T10:00:00.000Z",
        "assistant",
        json!({
        "model": "qwen3-coder-plus",
        "message": {"role": "model", "parts": [{"text": "forked"}]},
        "usageMetadata": usage(100, 0, 10, 0)}),
    ))
    .unwrap();
    own["sessionId"] = json!(fid);
    out.push(own.to_string());
    out
}

#[test]
fn default_archives_and_forks() {
    let home = tmpdir("defaults");
    // None yet: the error names the place tried.
    let (code, _, err) = stats(bin(&home).args(["stats", "--json", "-q", "--agent", "qwen"]));
    assert_eq!(code, Some(1));
    assert!(err.contains(".qwen/projects"), "{err}");
    let qwen = home.join(".qwen");
    let parent = write_session(&qwen, &session_lines());
    let fork = parent.with_file_name("99999999-aaaa-4bbb-8ccc-dddddddddddd.jsonl");
    std::fs::write(&fork, fork_lines().join("\n") + "\n").unwrap();
    // Not session files: a file beside chats/, one a level deeper.
    std::fs::write(qwen.join("projects/-home-me-app/notes.jsonl"), "junk\n").unwrap();
    std::fs::create_dir_all(qwen.join("projects/-home-me-app/chats/old")).unwrap();
    std::fs::write(qwen.join("projects/-home-me-app/chats/old/x.json"), "{}").unwrap();
    let (code, v, err) = stats(bin(&home).args(["stats", "--json", "-q"]));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["files"].as_u64(), Some(2), "{v}");
    // The fork's two copies are its parent's records.
    assert_eq!(v["records"].as_u64(), Some(8 + 1), "{v}");
    assert_eq!(v["deduplicated"].as_u64(), Some(2), "{v}");
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(1070 + 110));
    assert_eq!(v["by_source"]["qwen"]["files"].as_u64(), Some(2), "{v}");
    let (_, v, _) = stats(bin(&home).args(["stats", "--json", "-q", "--no-dedupe"]));
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(1070 + 1070 + 110));
    // The copies kept are those of the file first in path order (the
    // parent's here: 5f0c... < 9999...).
    let out = bin(&home)
        .args(["backfill", "-q", "--agent", "qwen"])
        .output()
        .unwrap();
    let k = keys(&ndjson(&out.stdout));
    assert_eq!(k.len(), 9);
    assert_eq!(k[0], format!("{SID}:u1"));
    assert_eq!(k[8], "99999999-aaaa-4bbb-8ccc-dddddddddddd:f1");
    // Another agent named alone: not read.
    let (code, _, err) = stats(bin(&home).args(["stats", "--json", "-q", "--agent", "codex"]));
    assert_eq!(code, Some(1), "{err}");
    // QWEN_RUNTIME_DIR moves it (and ~/.qwen is then not read) ...
    let rt = home.join("runtime");
    write_session(&rt, &session_lines()[..1]);
    let (code, v, err) = stats(
        bin(&home)
            .args(["stats", "--json", "-q", "--agent", "qwen"])
            .env("QWEN_RUNTIME_DIR", &rt),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        (v["files"].as_u64(), v["records"].as_u64()),
        (Some(1), Some(1))
    );
    // ... and so does ccusage's QWEN_DATA_DIR, a comma list of folders
    // holding projects/ (an entry may name projects/ itself).
    let list = format!("{},{}", qwen.display(), rt.join("projects").display());
    let (code, v, err) = stats(
        bin(&home)
            .args(["stats", "--json", "-q", "--agent", "qwen"])
            .env("QWEN_DATA_DIR", &list),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["files"].as_u64(), Some(3), "{v}");
    // The runtime file's copy of u1 is the parent's record.
    assert_eq!(v["records"].as_u64(), Some(9), "{v}");
    std::fs::remove_dir_all(home).unwrap();
}

#[test]
fn hostile_lines_are_counted_located_skips() {
    let mut text = Vec::new();
    let l = session_lines();
    text.extend_from_slice(l[0].as_bytes());
    text.push(b'\n');
    // 2: cut mid-line.
    text.extend_from_slice(&l[1].as_bytes()[..60]);
    text.push(b'\n');
    // 3: NULs.
    text.extend_from_slice(b"\0\0\0\0\0\0\0\0\n");
    // 4: two lines glued together (no newline between).
    text.extend_from_slice(l[2].as_bytes());
    text.extend_from_slice(l[3].as_bytes());
    text.push(b'\n');
    // 5: a raw U+2028 and invalid UTF-8 in a text: kept, repaired.
    let odd = line(
        "u3",
        None,
        "2026-03-01T10:01:00.000Z",
        "user",
        json!({
        "message": {"role": "user", "parts": [{"text": "a\u{2028}b"}]}}),
    );
    let odd = odd
        .replace("a\u{2028}b", "a\u{2028}b \u{1}")
        .replace("\\u0001", "\u{1}");
    let mut odd = odd.into_bytes();
    let at = odd.windows(2).position(|w| w == b" \x01").unwrap();
    odd.splice(at..at + 2, *b" \xff");
    text.extend_from_slice(&odd);
    text.push(b'\n');
    // 6: valid JSON, not an object with a type.
    text.extend_from_slice(b"[1,2,3]\n");
    // 7: a partial last line, no newline.
    text.extend_from_slice(&l[4].as_bytes()[..40]);
    let path = Path::new("projects/p/chats/hostile.jsonl");
    let opts = SourceOptions::new();
    let read = |input: Input<'_>| {
        let mut src = Qwen.open(input, path, &opts).unwrap();
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
    assert_eq!(
        recs,
        vec![
            (1, Some("Fix the parser".to_owned())),
            (5, Some("a\u{2028}b \u{fffd}".to_owned())),
        ]
    );
    assert_eq!((r.lines, r.records, r.skipped, r.repaired), (7, 2, 5, 1));
    let at: Vec<(u64, u64)> = r.skips.iter().map(|s| (s.line, s.byte)).collect();
    let b2 = l[0].len() as u64 + 1;
    let b3 = b2 + 61;
    let b4 = b3 + 9;
    let b6 = b4 + (l[2].len() + l[3].len()) as u64 + 1 + odd.len() as u64 + 1;
    assert_eq!(at, vec![(2, b2), (3, b3), (4, b4), (6, b6), (7, b6 + 8)]);
    assert_eq!(
        r.skips[4].reason.to_string().split(':').next(),
        Some("truncated last line")
    );
    assert_eq!(r.skips[1].reason, mem_ingest::SkipReason::Nul);
    assert_eq!(r.usage.total_tokens, 0);
}

/// The shapes written in steps: a run after each step emits exactly the
/// new records, with `--state` and `-o`, with `--db` and with `--parquet`.
#[test]
fn incremental_runs_emit_only_what_is_new() {
    let home = tmpdir("incremental");
    let lines = session_lines();
    let archive = home.join("archive");
    let path = write_session(&archive, &lines[..3]);
    // A partial last line waits for its end.
    let mut partial = lines[3].clone();
    let tail = partial.split_off(30);
    common::append(&path, &partial);
    let state = home.join("state");
    let out = home.join("out.ndjson");
    let db = home.join("memory.db");
    let ds = home.join("ds");
    let pstate = home.join("pstate");
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "qwen"]);
        for a in extra {
            c.arg(a);
        }
        c.arg(&archive);
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let all_runs = || {
        run(&[&"--state", &state, &"-o", &out]);
        run(&[&"--db", &db]);
        run(&[&"--parquet", &ds, &"--state", &pstate]);
    };
    all_runs();
    let first = ndjson(&std::fs::read(&out).unwrap());
    assert_eq!(
        keys(&first),
        [
            format!("{SID}:u1"),
            format!("{SID}:a1"),
            format!("{SID}:t1")
        ]
    );
    // The rest of the line, then the other lines.
    common::append(&path, &format!("{tail}\n{}\n", lines[4..].join("\n")));
    all_runs();
    let all = ndjson(&std::fs::read(&out).unwrap());
    assert_eq!(all.len(), 8);
    assert_eq!(all[3]["key"].as_str(), Some(format!("{SID}:t2").as_str()));
    assert_eq!(all[3]["line"].as_u64(), Some(4));
    // A fresh run gives the same records.
    let fresh = bin(&home)
        .args(["backfill", "-q", "--agent", "qwen"])
        .arg(&archive)
        .output()
        .unwrap();
    assert_eq!(ndjson(&fresh.stdout), all);
    // The store holds each once.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (n, fmt): (i64, String) = conn
        .query_row("select count(*), min(format) from records", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((n, fmt.as_str()), (8, "qwen"));
    // The dataset too, under format=qwen.
    let mut rows = 0;
    let mut stack = vec![ds.join("records")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                assert!(
                    p.to_string_lossy().contains("format=qwen/"),
                    "{}",
                    p.display()
                );
                let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    std::fs::File::open(&p).unwrap(),
                )
                .unwrap()
                .build()
                .unwrap();
                rows += r.map(|b| b.unwrap().num_rows()).sum::<usize>();
            }
        }
    }
    assert_eq!(rows, 8);
    std::fs::remove_dir_all(home).unwrap();
}

/// The checked-in checkpoints (a state of layout 10 recording pi, a store
/// of schema 4 recording pi, claude and codex; both of
/// `hand-built.jsonl`): a run naming
/// `--agent qwen` reads pi's files and the Qwen session, says it added the
/// agent, and records it; a later run without `--agent` reads both; a run
/// naming pi alone is refused (fewer agents than recorded).
#[test]
fn a_checkpoint_gains_the_agent_agent_names() {
    let d = tmpdir("checkpoint-agents");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    let hand = arch.join("hand-built.jsonl");
    fs::copy(common::fixtures().join("hand-built.jsonl"), &hand).unwrap();
    let qwen = write_session(&arch, &session_lines()[..4]);
    let state = d.join("state");
    fs::copy(common::fixtures().join("state-v10.state"), &state).unwrap();
    let db = d.join("store.sqlite");
    fs::copy(common::fixtures().join("store-v4.sqlite"), &db).unwrap();
    let cases: [(&str, &Path, &[&str]); 2] = [("state", &state, &["-o"]), ("store", &db, &[])];
    for (what, checkpoint, _) in cases {
        let flag = if what == "state" { "--state" } else { "--db" };
        let out = d.join(format!("{what}.ndjson"));
        let run = |agents: &[&str], quiet: bool| {
            let mut c = bin(&d);
            c.arg("backfill");
            if what == "store" {
                // Stores before schema 5 recorded links followed.
                c.arg("-L");
            }
            if quiet {
                c.arg("-q");
            }
            for a in agents {
                c.args(["--agent", a]);
            }
            c.arg(flag).arg(checkpoint);
            if what == "state" {
                c.arg("-o").arg(&out);
            }
            c.arg(&arch).output().unwrap()
        };
        // Without --agent: the agents recorded (the copy of the pi session
        // is new by its inode: every entry a copy). The state's are pi
        // alone: the Qwen file, read as pi's, fails (exit 1) and adds
        // nothing. The store's are pi, claude and codex (a run of the
        // release before without --agent): the Qwen file is another
        // agent's, left out, never read as Claude Code's.
        let o = run(&[], true);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        if what == "state" {
            assert_eq!(o.status.code(), Some(1), "{what}: {err}");
            assert_eq!(
                err,
                format!(
                    "error: {}: 1:0: not a session header: first entry has type \"user\"\n",
                    qwen.display()
                ),
                "{what}"
            );
        } else {
            assert_eq!((o.status.code(), err.as_str()), (Some(0), ""), "{what}");
            let c = rusqlite::Connection::open(checkpoint).unwrap();
            let n: i64 = c
                .query_row(
                    "SELECT count(*) FROM records WHERE format <> 'pi'",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(n, 0, "{what}");
        }
        let o = run(&["qwen"], false);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{what}: {err}");
        assert!(
            err.contains("added qwen to the agents the checkpoint reads (--agent)"),
            "{what}: {err}"
        );
        let written: Vec<String> = match what {
            "state" => keys(&ndjson(&fs::read(&out).unwrap())),
            _ => {
                let c = rusqlite::Connection::open(checkpoint).unwrap();
                let mut st = c
                    .prepare("SELECT key FROM records WHERE format = 'qwen' ORDER BY line")
                    .unwrap();
                st.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
        };
        let want: Vec<String> = ["u1", "a1", "t1", "t2"]
            .iter()
            .map(|u| format!("{SID}:{u}"))
            .collect();
        assert_eq!(written, want, "{what}");
        // Later runs without --agent read both agents: a line appended to
        // each file is exactly what the next run adds.
        common::append(&hand, &common::user_line(&format!("p-{what}"), "pi again"));
        common::append(&qwen, &format!("{}\n", session_lines()[8]));
        let o = run(&[], true);
        assert!(
            o.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let new = match what {
            "state" => {
                let all = keys(&ndjson(&fs::read(&out).unwrap()));
                all[want.len()..].to_vec()
            }
            _ => {
                let c = rusqlite::Connection::open(checkpoint).unwrap();
                let mut st = c
                    .prepare("SELECT key FROM records WHERE key LIKE '%p-store' OR key LIKE '%:u2' ORDER BY format")
                    .unwrap();
                st.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
        };
        assert_eq!(new.len(), 2, "{what}: {new:?}");
        assert!(
            new.iter().any(|k| k.ends_with(&format!(":p-{what}"))),
            "{what}: {new:?}"
        );
        assert!(new.contains(&format!("{SID}:u2")), "{what}: {new:?}");
        // Fewer agents than recorded: refused, as before.
        let o = run(&["pi"], true);
        assert_eq!(o.status.code(), Some(2), "{what}");
        let err = String::from_utf8_lossy(&o.stderr);
        let recorded = if what == "state" {
            "pi,qwen"
        } else {
            "pi,qwen,claude,codex"
        };
        assert!(
            err.contains(&format!("has {recorded}, this run pi")),
            "{what}: {err}"
        );
        // For the next case, the same appended lines are new again.
        fs::copy(common::fixtures().join("hand-built.jsonl"), &hand).unwrap();
        fs::remove_file(&qwen).unwrap();
        write_session(&arch, &session_lines()[..4]);
    }
    fs::remove_dir_all(d).unwrap();
}

/// A generated Qwen runtime folder (forks and their copies, telemetry,
/// compression): `backfill --state -o` and `backfill --db` killed (SIGKILL)
/// after growing delays until a run finishes give exactly a clean run's
/// records, each once; a re-run adds nothing.
#[test]
fn killed_at_any_moment_every_record_exactly_once() {
    use std::time::Instant;
    let d = tmpdir("kill");
    let arch = d.join("qwen");
    let g = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "qwen",
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
    let (state, out, db) = (d.join("state"), d.join("out.ndjson"), d.join("store.db"));
    for sink in ["state", "db"] {
        let run = || {
            let mut c = bin(&d);
            c.args(["backfill", "-q", "--jobs", "2", "--checkpoint-ms", "1"]);
            match sink {
                "state" => c.arg("--state").arg(&state).arg("-o").arg(&out),
                _ => c.arg("--db").arg(&db),
            };
            c.arg(&arch);
            c
        };
        let kills = common::kill_until_it_finishes(run, pace, sink);
        let got: Vec<String> = match sink {
            "state" => keys(&ndjson(&fs::read(&out).unwrap())),
            _ => {
                let c = rusqlite::Connection::open(&db).unwrap();
                let mut st = c.prepare("SELECT key FROM records").unwrap();
                st.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
        };
        let mut g = got.clone();
        let mut w = want.clone();
        if sink == "state" {
            assert_eq!(got, want, "{sink}: after {kills} kills");
        } else {
            g.sort();
            w.sort();
            assert_eq!(g, w, "{sink}: after {kills} kills");
        }
        let again = run().output().unwrap();
        assert!(again.status.success());
        if sink == "state" {
            assert_eq!(keys(&ndjson(&fs::read(&out).unwrap())), want);
        }
    }
    fs::remove_dir_all(d).unwrap();
}

/// `--follow` emits a line Qwen Code appends within a second, and a new
/// chat file's records; SIGTERM stops it with the state saved.
#[test]
fn follow_emits_appended_lines_within_a_second() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let d = tmpdir("follow");
    let lines = session_lines();
    let arch = d.join("archive");
    let path = write_session(&arch, &lines[..1]);
    let (state, out) = (d.join("state"), d.join("out.ndjson"));
    let mut child = bin(&d)
        .args(["backfill", "-q", "--follow", "--agent", "qwen", "--state"])
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
    wait_for(1);
    common::append(&path, &format!("{}\n", lines[1]));
    let latency = wait_for(2);
    assert!(latency < Duration::from_secs(1), "latency {latency:?}");
    let other = path.with_file_name("77777777-0000-4000-8000-000000000000.jsonl");
    let own = lines[2].replace(SID, "77777777-0000-4000-8000-000000000000");
    fs::write(&other, format!("{own}\n")).unwrap();
    wait_for(3);
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(
        keys(&ndjson(&fs::read(&out).unwrap())),
        [
            format!("{SID}:u1"),
            format!("{SID}:a1"),
            "77777777-0000-4000-8000-000000000000:t1".to_owned()
        ]
    );
    fs::remove_dir_all(d).unwrap();
}

/// With no PATH, `stats` reads every agent's own archive (pi's, Gemini
/// CLI's, Qwen Code's, Copilot CLI's, Claude Code's and Codex's, each at its default
/// place), each counted under its own source; `--agent` narrows it.
#[test]
fn no_path_reads_every_agent_and_agent_narrows() {
    let home = tmpdir("all-agents");
    let pi = home.join(".pi/agent/sessions/--p--");
    fs::create_dir_all(&pi).unwrap();
    fs::copy(
        common::fixtures().join("hand-built.jsonl"),
        pi.join("2026-01-01T00-00-00-000Z_hand.jsonl"),
    )
    .unwrap();
    write_session(&home.join(".qwen"), &session_lines());
    let claude = home.join(".claude/projects/-p");
    fs::create_dir_all(&claude).unwrap();
    fs::write(
        claude.join("cs.jsonl"),
        r#"{"type":"user","uuid":"c1","parentUuid":null,"sessionId":"cs","cwd":"/p","timestamp":"2026-03-01T00:00:00.000Z","message":{"role":"user","content":"hi"}}"#.to_owned() + "\n",
    )
    .unwrap();
    let codex = home.join(".codex/sessions/2026/01/01");
    fs::create_dir_all(&codex).unwrap();
    let (rollout, _) = common::codex_rollout("t9", 4_000);
    fs::write(codex.join("rollout-2026-01-01T00-00-00-t9.jsonl"), rollout).unwrap();
    let copilot = home.join(".copilot/session-state/c9");
    fs::create_dir_all(&copilot).unwrap();
    fs::write(
        copilot.join("events.jsonl"),
        r#"{"type":"user.message","data":{"content":"hi"},"id":"e1","timestamp":"2026-03-01T00:00:00.000Z","parentId":null}"#.to_owned() + "\n",
    )
    .unwrap();
    let gemini = home.join(".gemini/tmp/g/chats");
    fs::create_dir_all(&gemini).unwrap();
    let g = gemini.join("session-2026-03-01T00-00-g9.jsonl");
    fs::write(
        &g,
        r#"{"sessionId":"g9","projectHash":"h","startTime":"2026-03-01T00:00:00.000Z"}
{"id":"m1","timestamp":"2026-03-01T00:00:00.000Z","type":"user","content":"hi"}
"#,
    )
    .unwrap();
    // Still: its message written last is final.
    fs::File::options()
        .write(true)
        .open(&g)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    let with_defaults = |c: &mut std::process::Command| {
        c.env("HOME", &home)
            .env_remove("PI_CODING_AGENT_DIR")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .env_remove("XDG_CONFIG_HOME");
    };
    let mut c = bin(&home);
    with_defaults(&mut c);
    let (code, v, err) = stats(c.args(["stats", "--json", "-q"]));
    assert_eq!(code, Some(0), "{err}");
    let sources: Vec<&str> = v["by_source"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        sources,
        ["claude", "codex", "copilot", "gemini", "pi", "qwen"],
        "{v}"
    );
    assert_eq!(v["by_source"]["qwen"]["records"].as_u64(), Some(8));
    assert_eq!(v["by_source"]["gemini"]["records"].as_u64(), Some(1));
    assert_eq!(v["by_source"]["claude"]["records"].as_u64(), Some(1));
    assert_eq!(v["by_source"]["copilot"]["records"].as_u64(), Some(1));
    assert_eq!(v["files"].as_u64(), Some(6));
    let mut c = bin(&home);
    with_defaults(&mut c);
    let (code, v, err) = stats(c.args([
        "stats", "--json", "-q", "--agent", "qwen", "--agent", "claude",
    ]));
    assert_eq!(code, Some(0), "{err}");
    let sources: Vec<&str> = v["by_source"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(sources, ["claude", "qwen"], "{v}");
    assert_eq!(v["files"].as_u64(), Some(2));
    fs::remove_dir_all(home).unwrap();
}
