//! Claude Code transcripts: the mapping of the README's "Claude Code"
//! table, line by line, on the samples in `../shared/samples` (ignored in a
//! plain clone, where they are absent) and on lines written here.

use std::path::{Path, PathBuf};

use mem_ingest::format::{Format, Input};
use mem_ingest::formats::Claude;
use mem_ingest::{OwnedRecord, Report, Role, SourceOptions};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use common::entries::{numbered, rec, rows, samples, Entries, NONE};

/// Every entry of a file read as Claude's (see [`common::entries::read`]).
fn read(path: &Path, bytes: Option<&[u8]>) -> (Entries, Report) {
    common::entries::read(&Claude, path, bytes)
}

/// Both ways of reading give the same (see [`common::entries::read_both`]).
fn read_both(path: &Path) -> (Entries, Report) {
    common::entries::read_both(&Claude, path)
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn real_session_line_by_line() {
    let p = samples()
        .join("claude-code/agent-history/tests/fixtures/real_sessions/claude/session-01.jsonl");
    let (entries, report) = read_both(&p);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE, // queue-operation enqueue
            NONE, // queue-operation dequeue
            rec(User, "user", &["text"]),
            rec(Assistant, "assistant", &["text"]),
            NONE, // last-prompt
        ])
    );
    let sid = "06090cb1-3e64-433a-bc7e-a621c0f596d2";
    let user = entries[2].1.as_ref().unwrap();
    assert_eq!(
        user.key,
        format!("{sid}:e6781268-0d8b-4756-a547-6b89a7d7193e")
    );
    assert_eq!(user.session, sid);
    assert_eq!(
        user.project,
        "/tmp/agent-history-real-agent/claude/workspace"
    );
    assert_eq!(user.text, "[REDACTED_PROMPT]");
    assert_eq!(user.source, "claude:session-01");
    let a = entries[3].1.as_ref().unwrap();
    assert_eq!(a.model.as_deref(), Some("claude-opus-4-7"));
    assert_eq!(a.message_id.as_deref(), Some("[REDACTED_MESSAGE_ID]"));
    assert_eq!(a.request_id.as_deref(), Some("[REDACTED_REQUESTID]"));
    assert_eq!(a.stop_reason.as_deref(), Some("end_turn"));
    assert!(!a.provisional);
    let u = a.usage.unwrap();
    // cache writes: ephemeral_5m (0) + ephemeral_1h (1045).
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_read,
            u.cache_write,
            u.total_tokens
        ),
        (6, 16, 3057, 1045, 6 + 16 + 3057 + 1045)
    );
    assert_eq!(
        a.parent_id.as_deref(),
        Some("e6781268-0d8b-4756-a547-6b89a7d7193e")
    );
    // The header: the first line with a sessionId (a queue operation: no cwd).
    assert_eq!(report.entries.get("queue-operation"), 2);
    assert_eq!(report.entries.get("last-prompt"), 1);
    assert_eq!((report.records, report.no_record, report.lines), (2, 3, 5));
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn real_subagent_streamed_responses() {
    let p = samples().join(
        "claude-code/bookminder/cloud-2026/a42b9c92-c0e6-588e-bc6f-3d5e4f37b895/subagents/agent-a22c1677686fe0444.jsonl",
    );
    let (entries, report) = read_both(&p);
    assert_eq!((report.lines, report.records, report.skipped), (26, 24, 0));
    assert_eq!(report.entries.get("attachment"), 2);
    assert_eq!(report.role(Role::ToolResult), 8);
    assert_eq!(report.role(Role::Assistant), 15);
    let recs: Vec<&OwnedRecord> = entries.iter().filter_map(|(_, r)| r.as_ref()).collect();
    for r in &recs {
        // A subagent file carries its parent's sessionId and its agentId.
        assert_eq!(r.session, "a42b9c92-c0e6-588e-bc6f-3d5e4f37b895");
        assert_eq!(r.agent_id.as_deref(), Some("a22c1677686fe0444"));
        assert_eq!(r.source, "claude:agent-a22c1677686fe0444");
        assert_eq!(r.project, "/home/user/BookMinder");
    }
    // msg_011Ce1XzAtJV2AHdBG4Uqmzu spans three lines: thinking, tool_use,
    // tool_use; provisional usage (output 2) then the final (285).
    let parts: Vec<(Vec<String>, bool, u64)> = recs
        .iter()
        .filter(|r| r.message_id.as_deref() == Some("msg_011Ce1XzAtJV2AHdBG4Uqmzu"))
        .map(|r| (r.kinds.clone(), r.provisional, r.usage.unwrap().output))
        .collect();
    assert_eq!(
        parts,
        [
            (vec!["thinking".to_owned()], true, 2),
            (vec!["toolCall".to_owned()], true, 2),
            (vec!["toolCall".to_owned()], false, 285),
        ]
    );
    // Empty thinking text is normal: the record's text is empty.
    let thinking = recs.iter().find(|r| r.kinds == ["thinking"]).unwrap();
    assert_eq!(thinking.text, "");
    // A tool call: `<name> <input as compact JSON>`.
    let call = recs.iter().find(|r| r.kinds == ["toolCall"]).unwrap();
    assert!(
        call.text.starts_with("Read {\"file_path\":"),
        "{}",
        call.text
    );
    // The last response has only provisional lines.
    let last = recs.last().unwrap();
    assert_eq!(
        last.message_id.as_deref(),
        Some("msg_011Ce1Y23Vc82ihs5ntmkm4x")
    );
    assert!(last.provisional);
    // Tool results: the tool_use_id, is_error when written.
    let result = recs.iter().find(|r| r.role == Role::ToolResult).unwrap();
    assert_eq!(
        result.tool_call_id.as_deref(),
        Some("toolu_01PRiiQYJ4XgbXi867MF8LMK")
    );
    assert!(result.text.starts_with("1\t---\n"));
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn compaction_and_rewind() {
    let p =
        samples().join("claude-code/claude-code-log/test/test_data/dag_compact_after_rewind.jsonl");
    let (entries, _) = read_both(&p);
    use Role::*;
    let (u, a) = (
        rec(User, "user", &["text"]),
        rec(Assistant, "assistant", &["text"]),
    );
    assert_eq!(
        rows(&entries),
        numbered(vec![
            u.clone(),
            a.clone(),
            u.clone(),
            a.clone(),
            u.clone(),
            a.clone(),
            u.clone(),
            a.clone(),
            rec(System, "system", &["text"]),
            rec(System, "user", &["text"]),
            u,
            a,
        ])
    );
    let boundary = entries[8].1.as_ref().unwrap();
    assert_eq!(boundary.custom_type.as_deref(), Some("compact_boundary"));
    assert_eq!(boundary.text, "Conversation compacted");
    assert_eq!(boundary.key, "s1:cb");
    assert!(entries[9]
        .1
        .as_ref()
        .unwrap()
        .text
        .starts_with("This session is being continued"));
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn showcase_session_and_its_agents() {
    let dir = samples().join("claude-code/claude-code-log/test/test_data/minimal_showcase");
    let (entries, report) = read_both(&dir.join("55550000-0000-4000-8000-000000000001.jsonl"));
    assert_eq!((report.records, report.role(Role::ToolResult)), (11, 5));
    // A multi-block assistant line: blocks joined with \n.
    let a1 = entries[1].1.as_ref().unwrap();
    assert_eq!(a1.kinds, ["text", "toolCall"]);
    assert!(a1
        .text
        .starts_with("Let me inspect the repository structure first.\nmcp__plugin_showcase_example__inspect_repository_structure {"));
    // A tool_result whose content is an array of text blocks.
    let r4 = entries[8].1.as_ref().unwrap();
    assert_eq!(r4.tool_call_id.as_deref(), Some("toolu_sc_showcol1"));
    assert!(r4.text.contains("\nagentId: showcol1"));
    for agent in ["agent-showcol1", "agent-showcol2"] {
        let p = dir.join(format!(
            "55550000-0000-4000-8000-000000000001/subagents/{agent}.jsonl"
        ));
        let (entries, report) = read_both(&p);
        assert_eq!(report.skipped, 0);
        for (_, r) in &entries {
            let r = r.as_ref().unwrap();
            assert_eq!(r.session, "55550000-0000-4000-8000-000000000001");
            assert_eq!(Some(&agent[6..]), r.agent_id.as_deref());
        }
    }
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn ccusage_fixtures_without_type() {
    let p = samples().join(
        "claude-code/ccusage/apps/ccusage/test/fixtures/claude/projects/project-alpha/session-alpha/chat.jsonl",
    );
    let (entries, report) = read_both(&p);
    // Lines without `type` whose message is an assistant's: assistant lines.
    assert_eq!(report.role(Role::Assistant), 3);
    let r = entries[0].1.as_ref().unwrap();
    assert_eq!(r.key, "session-alpha:chat:L1");
    assert_eq!(r.usage.unwrap().cost, 0.12);
    assert_eq!(r.usage.unwrap().cache_write, 25);
}

/// Every single-line sample of claude-code-log: its role.
#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn single_line_samples() {
    let dir = samples().join("claude-code-log-messages/claude-code");
    let expect: &[(&str, Option<Role>)] = &[
        ("assistant/assistant.jsonl", Some(Role::Assistant)),
        ("assistant/assistant_sidechain.jsonl", Some(Role::Assistant)),
        ("assistant/thinking.jsonl", Some(Role::Assistant)),
        ("system/file_history_snapshot.jsonl", None),
        ("system/queue_operation.jsonl", None),
        ("system/summary.jsonl", None),
        ("system/system_info.jsonl", Some(Role::System)),
        ("user/bash_input.jsonl", Some(Role::User)),
        ("user/bash_output.jsonl", Some(Role::User)),
        ("user/command_output.jsonl", Some(Role::User)),
        ("user/image.jsonl", Some(Role::User)),
        ("user/user.jsonl", Some(Role::User)),
        ("user/user_command.jsonl", Some(Role::User)),
        ("user/user_sidechain.jsonl", Some(Role::User)),
        // isMeta: a harness caveat.
        ("user/user_slash_command.jsonl", None),
    ];
    for (file, role) in expect {
        let (entries, report) = read_both(&dir.join(file));
        assert_eq!(report.skipped, 0, "{file}");
        let roles: Vec<Option<Role>> = entries
            .iter()
            .map(|(_, r)| r.as_ref().map(|r| r.role))
            .collect();
        assert!(roles.iter().all(|r| r == role), "{file}: {roles:?}");
    }
    let mut tools = 0;
    for e in std::fs::read_dir(dir.join("tools")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let (entries, _) = read_both(&p);
        let want = if name.contains("tool_use") {
            Role::Assistant
        } else {
            Role::ToolResult
        };
        for (_, r) in &entries {
            let r = r.as_ref().unwrap();
            assert_eq!(r.role, want, "{name}");
            if want == Role::Assistant {
                assert_eq!(r.kinds, ["toolCall"], "{name}");
            } else {
                assert!(r.tool_call_id.is_some(), "{name}");
            }
        }
        tools += 1;
    }
    assert_eq!(tools, 44);
    // An image: its placeholder, never the base64.
    let (entries, _) = read_both(&dir.join("user/image.jsonl"));
    let r = entries[0].1.as_ref().unwrap();
    assert!(
        r.text.starts_with("[image image/png, "),
        "{}",
        &r.text[..40]
    );
    assert!(r.text.len() < 1000);
}

// ---------------------------------------------------------------------------
// Lines written here (no ../shared needed)

fn lines(text: &str) -> (Vec<(u64, Option<OwnedRecord>)>, Report) {
    let p = Path::new("/x/projects/-p/s.jsonl");
    let a = read(p, Some(text.as_bytes()));
    let b = {
        let opts = SourceOptions::new().buffer_capacity(7);
        let mut src = Claude
            .open(Input::Reader(Box::new(text.as_bytes())), p, &opts)
            .unwrap();
        let mut out = Vec::new();
        while let Some(e) = src.next_entry().unwrap() {
            out.push((e.line, e.record.map(|r| r.to_owned_record())));
        }
        (out, src.report().clone())
    };
    assert_eq!(a, b);
    a
}

#[test]
fn queue_remove_is_steering_input() {
    let (entries, report) = lines(concat!(
        r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-01-01T00:00:00Z","sessionId":"s","content":"also do X"}"#,
        "\n",
        r#"{"type":"queue-operation","operation":"remove","timestamp":"2026-01-01T00:00:01Z","sessionId":"s","content":"also do X"}"#,
        "\n",
        r#"{"type":"queue-operation","operation":"popAll","timestamp":"2026-01-01T00:00:02Z","sessionId":"s","content":"y"}"#,
        "\n",
    ));
    assert_eq!(report.entries.get("queue-operation"), 3);
    assert!(entries[0].1.is_none() && entries[2].1.is_none());
    let r = entries[1].1.as_ref().unwrap();
    assert_eq!(
        (r.role, r.text.as_str(), r.key.as_str()),
        (Role::User, "also do X", "s:s:L2")
    );
}

#[test]
fn tool_results_with_text_beside_them() {
    let (entries, _) = lines(concat!(
        r#"{"type":"user","uuid":"u1","sessionId":"s","cwd":"/a","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out 1"},{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"out 2"}],"is_error":true},{"type":"text","text":"[Request interrupted by user for tool use]"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u2","sessionId":"s","cwd":"/b","isMeta":true,"message":{"role":"user","content":"Caveat"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","sessionId":"s","requestId":"r","message":{"id":"m","role":"assistant","model":"x","stop_reason":null,"content":[{"type":"redacted_thinking","data":"zz"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":1,"output_tokens":2,"cache_creation_input_tokens":9,"cache_read_input_tokens":4}}}"#,
        "\n",
        r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{},"isSnapshotUpdate":false}"#,
        "\n",
        r#"{"type":"mystery","uuid":"z"}"#,
        "\n",
        "not json\n",
    ));
    let r = entries[0].1.as_ref().unwrap();
    assert_eq!(r.role, Role::ToolResult);
    assert_eq!(
        r.text,
        "out 1\nout 2\n[Request interrupted by user for tool use]"
    );
    assert_eq!(
        (r.tool_call_id.as_deref(), r.is_error),
        (Some("t1"), Some(true))
    );
    assert_eq!(r.project, "/a");
    assert!(entries[1].1.is_none(), "isMeta");
    let a = entries[2].1.as_ref().unwrap();
    assert_eq!(a.kinds, ["thinking", "toolCall"]);
    assert_eq!(a.text, "Bash {\"command\":\"ls\"}");
    assert!(a.provisional);
    // No cwd of its own: the last one seen before it (the isMeta line's,
    // which gives no record).
    assert_eq!(a.project, "/b");
    let u = a.usage.unwrap();
    assert_eq!((u.cache_write, u.total_tokens), (9, 16));
    assert!(entries[3].1.is_none() && entries[4].1.is_none());
    assert_eq!(entries.len(), 5);
}

#[test]
fn header_from_the_first_lines() {
    // No sessionId in the file: the session folder of a subagent file.
    let p = Path::new("/x/projects/-p/sess-1/subagents/agent-a.jsonl");
    let text = "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";
    let mut src = Claude
        .open(Input::Bytes(text.as_bytes()), p, &SourceOptions::new())
        .unwrap();
    assert_eq!(src.header().unwrap().id, "sess-1");
    let r = src.next_record().unwrap().unwrap();
    assert_eq!((r.session, r.key), ("sess-1", "sess-1:agent-a:L1"));
    // Empty: no header, no records.
    let mut src = Claude
        .open(
            Input::Bytes(b"\xEF\xBB\xBF \n\0\n"),
            p,
            &SourceOptions::new(),
        )
        .unwrap();
    assert!(src.header().is_none());
    assert!(src.next_record().unwrap().is_none());
    assert!(src.report().empty);
    // A BOM before the first line.
    let (entries, _) = lines("\u{feff}{\"type\":\"user\",\"uuid\":\"u\",\"sessionId\":\"s\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n");
    assert_eq!(entries[0].1.as_ref().unwrap().key, "s:u");
    // Files a walk takes as transcripts.
    for (path, yes) in [
        ("p/s.jsonl", true),
        ("p/s/subagents/agent-a.jsonl", true),
        ("p/s/subagents/workflows/r/agent-a.jsonl", true),
        ("p/s/subagents/workflows/r/journal.jsonl", false),
        ("p/s/tool-results/t.jsonl", false),
        ("p/s/subagents/agent-a.meta.json", false),
    ] {
        assert_eq!(Claude.is_session_file(Path::new(path)), yes, "{path}");
    }
}

// ---------------------------------------------------------------------------
// Discovery and detection, through the command line

/// The binary with every default archive pointed into `home` (never this
/// machine's).
fn bin(home: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mem-ingest"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("xdg"))
        .env("CODEX_HOME", home.join("codex"))
        .env("PI_CODING_AGENT_DIR", home.join("pi"));
    c
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mem-ingest-claude-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

const SESSION: &str = concat!(
    r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-01-01T00:00:00Z","sessionId":"s1","content":"hi"}"#,
    "\n",
    r#"{"type":"user","uuid":"u1","sessionId":"s1","cwd":"/w","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":"hi"}}"#,
    "\n",
    r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s1","cwd":"/w","requestId":"r1","timestamp":"2026-01-01T00:00:02Z","message":{"id":"m1","role":"assistant","model":"claude-x","stop_reason":"end_turn","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":1,"output_tokens":2}}}"#,
    "\n",
);

fn stats(c: &mut std::process::Command) -> (Option<i32>, serde_json::Value, String) {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, err)
}

#[test]
fn default_archives_of_every_agent() {
    let home = tmpdir("defaults");
    // No archive at all: exit 1, every place tried named.
    let (code, _, err) = stats(bin(&home).args(["stats", "--json", "-q"]));
    assert_eq!(code, Some(1));
    for place in ["pi/sessions", "xdg/claude/projects", ".claude/projects"] {
        assert!(err.contains(place), "{place}: {err}");
    }
    // Claude's archives: ~/.claude and $XDG_CONFIG_HOME/claude, subagent
    // files included, tool results and workflow journals not.
    let p = home.join(".claude/projects/-w");
    std::fs::create_dir_all(p.join("s1/subagents")).unwrap();
    std::fs::create_dir_all(p.join("s1/tool-results")).unwrap();
    std::fs::create_dir_all(p.join("s1/subagents/workflows/r1")).unwrap();
    std::fs::write(p.join("s1.jsonl"), SESSION).unwrap();
    let agent = SESSION
        .replace("\"u1\"", "\"u9\"")
        .replace("\"a1\"", "\"a9\"");
    std::fs::write(p.join("s1/subagents/agent-x.jsonl"), agent).unwrap();
    std::fs::write(p.join("s1/tool-results/t.jsonl"), "junk\n").unwrap();
    std::fs::write(p.join("s1/subagents/workflows/r1/journal.jsonl"), "junk\n").unwrap();
    let x = home.join("xdg/claude/projects/-v");
    std::fs::create_dir_all(&x).unwrap();
    std::fs::write(
        x.join("s2.jsonl"),
        SESSION
            .replace("s1", "s2")
            .replace("\"u1\"", "\"u2\"")
            .replace("\"a1\"", "\"a2\""),
    )
    .unwrap();
    let (code, v, err) = stats(bin(&home).args(["stats", "--json", "-q"]));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        (v["files"].as_u64(), v["records"].as_u64()),
        (Some(3), Some(6))
    );
    // pi's beside them: both read; --source narrows.
    std::fs::create_dir_all(home.join("pi/sessions/--p--")).unwrap();
    std::fs::copy(
        "fixtures/hand-built.jsonl",
        home.join("pi/sessions/--p--/x.jsonl"),
    )
    .unwrap();
    let (_, v, _) = stats(bin(&home).args(["stats", "--json", "-q"]));
    assert_eq!(
        (v["files"].as_u64(), v["records"].as_u64()),
        (Some(4), Some(28))
    );
    let (_, v, _) = stats(bin(&home).args(["stats", "--json", "-q", "--source", "pi"]));
    assert_eq!(v["records"].as_u64(), Some(22));
    let (_, v, _) = stats(bin(&home).args(["stats", "--json", "-q", "--source", "claude"]));
    assert_eq!(v["records"].as_u64(), Some(6));
    // CLAUDE_CONFIG_DIR replaces the defaults (a comma list; an entry may
    // name projects/ itself).
    let (_, v, _) = stats(
        bin(&home)
            .args(["stats", "--json", "-q", "--source", "claude"])
            .env(
                "CLAUDE_CONFIG_DIR",
                format!(
                    "{} , {}",
                    home.join("nothing").display(),
                    home.join("xdg/claude/projects").display()
                ),
            ),
    );
    assert_eq!(v["records"].as_u64(), Some(2));
    std::fs::remove_dir_all(home).unwrap();
}

#[test]
fn paths_detected_by_content() {
    let home = tmpdir("detect");
    let d = home.join("mixed");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("a-claude.jsonl"), SESSION).unwrap();
    std::fs::copy("fixtures/hand-built.jsonl", d.join("b-pi.jsonl")).unwrap();
    // A first line longer than the detection prefix: a snapshot.
    let big = format!(
        "{{\"type\":\"file-history-snapshot\",\"messageId\":\"m\",\"snapshot\":{{\"x\":\"{}\"}}}}\n{}",
        "y".repeat(200_000),
        SESSION.replace("s1", "s3").replace("\"u1\"", "\"u3\"").replace("\"a1\"", "\"a3\"")
    );
    std::fs::write(d.join("c-claude.jsonl"), big).unwrap();
    // A prompt longer than the prefix, its sessionId after it (2.1's key
    // order): the envelope's first keys tell.
    std::fs::write(
        d.join("d-claude.jsonl"),
        format!(
            "{{\"parentUuid\":null,\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":\"{}\"}},\"uuid\":\"u4\",\"sessionId\":\"s4\"}}\n",
            "z".repeat(100_000)
        ),
    )
    .unwrap();
    let (code, v, err) = stats(bin(&home).args(["stats", "--json", "-q"]).arg(&d));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        (v["files"].as_u64(), v["records"].as_u64()),
        (Some(4), Some(27))
    );
    // A headerless pi file is still pi's, failing as it always did.
    let (code, _, err) = stats(bin(&home).args(["stats", "-q", "fixtures/no-header/"]));
    let (code_pi, _, err_pi) =
        stats(bin(&home).args(["stats", "-q", "--source", "pi", "fixtures/no-header/"]));
    assert_eq!((code, &err), (code_pi, &err_pi));
    assert_eq!(code, Some(1));
    // Forced: the Claude file read as pi's fails (no session header).
    let (code, _, _) = stats(
        bin(&home)
            .args(["stats", "-q", "--source", "pi"])
            .arg(d.join("a-claude.jsonl")),
    );
    assert_eq!(code, Some(1));
    std::fs::remove_dir_all(home).unwrap();
}

// ---------------------------------------------------------------------------
// The cwd in force: a line without `cwd` (a `queue-operation`) takes the
// last one seen before it, else the first within the header prefix

/// A `queue-operation` `remove` (steering input: a record, no `cwd`) of
/// session `s`, its content `text`.
fn steer(text: &str) -> String {
    format!(
        r#"{{"type":"queue-operation","operation":"remove","timestamp":"2026-01-01T00:00:00Z","sessionId":"s","content":"{text}"}}"#
    ) + "\n"
}

/// A user line of session `s` with its own `cwd`.
fn user_in(uuid: &str, cwd: &str, text: &str) -> String {
    format!(
        r#"{{"type":"user","uuid":"{uuid}","sessionId":"s","cwd":"{cwd}","timestamp":"2026-01-01T00:00:01Z","message":{{"role":"user","content":"{text}"}}}}"#
    ) + "\n"
}

/// `(line, project)` of each record.
fn projects(entries: &[(u64, Option<OwnedRecord>)]) -> Vec<(u64, String)> {
    entries
        .iter()
        .filter_map(|(l, r)| r.as_ref().map(|r| (*l, r.project.clone())))
        .collect()
}

#[test]
fn a_line_without_cwd_takes_the_cwd_in_force() {
    // Line 1 is a queue-operation: before any cwd, the first cwd of the
    // header prefix ("/first", line 3's); after a line with a cwd, that
    // one; a cwd change mid-file holds from its line on.
    let text = [
        r#"{"type":"queue-operation","operation":"enqueue","timestamp":"2026-01-01T00:00:00Z","sessionId":"s","content":"steer 1"}"#.to_owned() + "\n",
        steer("steer 1"),
        user_in("u1", "/first", "one"),
        steer("steer 2"),
        user_in("u2", "/second", "two"),
        steer("steer 3"),
        r#"{"type":"assistant","uuid":"a1","sessionId":"s","message":{"id":"m","role":"assistant","model":"x","stop_reason":"end_turn","content":[{"type":"text","text":"ok"}]}}"#.to_owned() + "\n",
    ]
    .concat();
    let (entries, report) = lines(&text);
    assert_eq!((entries.len(), report.records), (7, 6));
    let want = [
        (2, "/first"),
        (3, "/first"),
        (4, "/first"),
        (5, "/second"),
        (6, "/second"),
        (7, "/second"),
    ]
    .map(|(l, p)| (l, p.to_owned()));
    assert_eq!(projects(&entries), want);
    let p = Path::new("/x/projects/-p/s.jsonl");
    let src = Claude
        .open(Input::Bytes(text.as_bytes()), p, &SourceOptions::new())
        .unwrap();
    assert_eq!(src.header().unwrap().cwd, "/first");

    // The first cwd 70 KB in, past the header prefix: the lines before it
    // have none in force (""), the lines after it have it.
    let snapshot = format!(
        r#"{{"type":"file-history-snapshot","messageId":"m","snapshot":{{"pad":"{}"}},"isSnapshotUpdate":false}}"#,
        "p".repeat(70_000)
    ) + "\n";
    let late = [
        steer("early"),
        snapshot,
        user_in("u1", "/late", "one"),
        steer("after"),
    ]
    .concat();
    let (entries, _) = lines(&late);
    let want = [(1, ""), (3, "/late"), (4, "/late")].map(|(l, p)| (l, p.to_owned()));
    assert_eq!(projects(&entries), want);

    // No cwd on any line: "".
    let none = [steer("a"), steer("b")].concat();
    let (entries, _) = lines(&none);
    assert_eq!(projects(&entries), [(1, String::new()), (2, String::new())]);
}

/// A Claude Code transcript of about 20 MiB (three parts): line 1 a
/// queue-operation, then blocks of about 3 MiB, each a user line with its
/// own cwd (`/dir<k>`) followed by steering lines without one, so that
/// every part after the first starts in a run of lines without a cwd. The
/// text, and `(key, project)` of each record as the rule gives it, its
/// lines numbered after `lines_before` lines.
fn long_transcript(
    blocks: usize,
    from: usize,
    lines_before: usize,
) -> (String, Vec<(String, String)>) {
    let filler = "f".repeat(1000);
    let mut text = String::new();
    let mut want = Vec::new();
    for k in from..from + blocks {
        let cwd = format!("/dir{k}");
        let block_start = text.len();
        text.push_str(&user_in(&format!("u{k}"), &cwd, "here"));
        want.push((format!("s:u{k}"), cwd.clone()));
        let mut i = 0;
        while text.len() - block_start < 3 << 20 {
            text.push_str(&steer(&format!("b{k} s{i} {filler}")));
            i += 1;
        }
        // Keys of lines without a uuid: `<session>:<stem>:L<line>`.
        let first_line = lines_before + text[..block_start].matches('\n').count() + 2;
        for l in first_line..first_line + i {
            want.push((format!("s:s:L{l}"), cwd.clone()));
        }
    }
    (text, want)
}

/// `(key, project)` of every record a backfill of `root` writes.
fn key_projects(root: &Path, jobs: usize, state: Option<&Path>) -> Vec<(String, String)> {
    key_projects_and_summary(root, jobs, state).0
}

/// [`key_projects`], and the run's summary.
fn key_projects_and_summary(
    root: &Path,
    jobs: usize,
    state: Option<&Path>,
) -> (Vec<(String, String)>, mem_ingest::archive::Summary) {
    let mut got = Vec::new();
    let mut b = mem_ingest::archive::Archive::builder()
        .path(root)
        .format(std::sync::Arc::new(Claude))
        .jobs(jobs);
    if let Some(s) = state {
        b = b.state(s);
    }
    let summary = b
        .build()
        .backfill(&mut mem_ingest::sink::ForEach(|r: OwnedRecord| {
            got.push((r.key, r.project))
        }))
        .unwrap();
    assert_eq!(summary.files_failed, 0);
    (got, summary)
}

/// A record's `(key, project)`.
type KeyProject = (String, String);

/// `got` is `want`, record by record; else how many differ and where.
fn same(got: &[KeyProject], want: &[KeyProject], what: &str) {
    let wrong: Vec<(usize, &KeyProject, &KeyProject)> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| g != w)
        .map(|(i, (g, w))| (i, g, w))
        .collect();
    assert!(
        got.len() == want.len() && wrong.is_empty(),
        "{what}: {} records for {}, {} differ; the first (index, got, want): {:?}",
        got.len(),
        want.len(),
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
}

#[test]
fn the_cwd_in_force_across_parts_jobs_and_resumed_runs() {
    let d = tmpdir("cwd-parts");
    let root = d.join("projects/-p");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("s.jsonl");
    // Line 1 without a cwd: the header prefix's first ("/dir0").
    let head = steer("first of all");
    let (body, mut want) = long_transcript(7, 0, 1);
    want.insert(0, ("s:s:L1".to_owned(), "/dir0".to_owned()));
    let text = head.clone() + &body;
    assert!(text.len() as u64 > 2 * mem_ingest::archive::PART_BYTES);
    std::fs::write(&file, &text).unwrap();
    for jobs in [1, 2] {
        same(
            &key_projects(&root, jobs, None),
            &want,
            &format!("--jobs {jobs}"),
        );
    }

    // Resumed: the first run reads up to a cwd change ("/dir1") and the
    // lines without a cwd after it; the lines appended take "/dir1" (then
    // their own blocks' cwds), in parts again.
    for jobs in [1, 2] {
        let state = d.join(format!("state-{jobs}"));
        let _ = std::fs::remove_file(&state);
        let small = [
            steer("first of all"),
            user_in("v0", "/dir0", "here"),
            steer("v s0"),
            user_in("v1", "/dir1", "here"),
            steer("v s1"),
        ]
        .concat();
        std::fs::write(&file, &small).unwrap();
        let first = key_projects(&root, jobs, Some(&state));
        let expect_first: Vec<(String, String)> = [
            ("s:s:L1", "/dir0"),
            ("s:v0", "/dir0"),
            ("s:s:L3", "/dir0"),
            ("s:v1", "/dir1"),
            ("s:s:L5", "/dir1"),
        ]
        .iter()
        .map(|(k, p)| ((*k).to_owned(), (*p).to_owned()))
        .collect();
        assert_eq!(first, expect_first, "--jobs {jobs}");
        // Appended: lines without a cwd, then blocks of their own.
        let more = [steer("after 1"), steer("after 2")].concat();
        let (blocks, block_want) = long_transcript(3, 5, 7);
        common::append(&file, &(more + &blocks));
        let (second, summary) = key_projects_and_summary(&root, jobs, Some(&state));
        // Read on from the checkpoint (its header unchanged), in two parts.
        assert_eq!((summary.resumed, summary.reread), (1, 0), "--jobs {jobs}");
        let mut expect_second = vec![
            ("s:s:L6".to_owned(), "/dir1".to_owned()),
            ("s:s:L7".to_owned(), "/dir1".to_owned()),
        ];
        expect_second.extend(block_want);
        same(&second, &expect_second, &format!("--jobs {jobs}, resumed"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

// ---------------------------------------------------------------------------
// API error stand-ins: the error is the text a user searches for

/// Assistant lines Claude Code wrote in the model's place
/// (`isApiErrorMessage`), with an `error` string, an `error` object, none;
/// then a line that is no stand-in (its `error` is not read).
const API_ERRORS: &str = concat!(
    r#"{"type":"assistant","uuid":"e1","sessionId":"s","cwd":"/w","isApiErrorMessage":true,"error":"rate_limit","apiErrorStatus":429,"message":{"id":"x1","role":"assistant","model":"<synthetic>","stop_reason":"stop_sequence","content":[{"type":"text","text":"API Error: 429 \"rate limited\""}]}}"#,
    "\n",
    r#"{"type":"assistant","uuid":"e2","sessionId":"s","cwd":"/w","isApiErrorMessage":true,"error":{"status":529,"message":"Overloaded \u00e9"},"message":{"id":"x2","role":"assistant","model":"<synthetic>","content":[]}}"#,
    "\n",
    r#"{"type":"assistant","uuid":"e3","sessionId":"s","cwd":"/w","isApiErrorMessage":true,"message":{"id":"x3","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"API Error: Connection closed"}]}}"#,
    "\n",
    r#"{"type":"assistant","uuid":"e4","sessionId":"s","cwd":"/w","error":"ignored","message":{"id":"x4","role":"assistant","model":"m","stop_reason":"end_turn","content":[{"type":"text","text":"fine"}]}}"#,
    "\n",
);

/// `(text, kinds)` of each record of [`API_ERRORS`].
fn api_errors_want() -> Vec<(String, Vec<String>)> {
    let k = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    vec![
        (
            "API Error: 429 \"rate limited\"\nrate_limit".into(),
            k(&["text", "error"]),
        ),
        ("Overloaded é".into(), k(&["error"])),
        ("API Error: Connection closed".into(), k(&["text", "error"])),
        ("fine".into(), k(&["text"])),
    ]
}

#[test]
fn an_api_error_stand_in_is_its_content_then_its_error() {
    // The library, in memory and streamed.
    let (entries, _) = lines(API_ERRORS);
    let got: Vec<(String, Vec<String>)> = entries
        .iter()
        .map(|(_, r)| {
            let r = r.as_ref().unwrap();
            (r.text.clone(), r.kinds.clone())
        })
        .collect();
    assert_eq!(got, api_errors_want());
    // The command line: to a file and to stdout.
    let d = tmpdir("api-errors");
    let file = d.join("projects/-w/s.jsonl");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, API_ERRORS).unwrap();
    let out = d.join("out.ndjson");
    let to_file = bin(&d)
        .args(["backfill", "-q", "-o"])
        .arg(&out)
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(to_file.status.code(), Some(0));
    let stdout = bin(&d)
        .args(["backfill", "-q"])
        .arg(&file)
        .output()
        .unwrap()
        .stdout;
    let written = std::fs::read(&out).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&stdout)
    );
    assert_eq!(common::texts_and_kinds(&written), api_errors_want());
    std::fs::remove_dir_all(&d).unwrap();
}

/// A live session read before its first `cwd` was written (only steering
/// input so far): when the cwd comes, the file is read on from its
/// checkpoint, not again from the start (its header's cwd was unknown,
/// not another), so nothing is emitted twice even without deduplication;
/// the lines read on take the cwd as a read from the start gives it.
#[test]
fn a_cwd_written_after_the_first_run_reads_on() {
    let d = tmpdir("cwd-late");
    let root = d.join("projects/-p");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("s.jsonl");
    std::fs::write(&file, [steer("early 1"), steer("early 2")].concat()).unwrap();
    let state = d.join("state");
    let run = |jobs: usize| {
        let mut got = Vec::new();
        let summary = mem_ingest::archive::Archive::builder()
            .path(&root)
            .format(std::sync::Arc::new(Claude))
            .jobs(jobs)
            .dedupe(false)
            .state(&state)
            .build()
            .backfill(&mut mem_ingest::sink::ForEach(|r: OwnedRecord| {
                got.push((r.key, r.project))
            }))
            .unwrap();
        (got, summary)
    };
    let (first, _) = run(1);
    let pairs = |v: &[(&str, &str)]| -> Vec<KeyProject> {
        v.iter()
            .map(|(k, p)| ((*k).to_owned(), (*p).to_owned()))
            .collect()
    };
    assert_eq!(first, pairs(&[("s:s:L1", ""), ("s:s:L2", "")]));
    common::append(
        &file,
        &[
            steer("late 1"),
            user_in("u1", "/now", "here"),
            steer("late 2"),
        ]
        .concat(),
    );
    let (second, summary) = run(1);
    assert_eq!((summary.resumed, summary.reread), (1, 0));
    assert_eq!(
        second,
        pairs(&[("s:s:L3", "/now"), ("s:u1", "/now"), ("s:s:L5", "/now")])
    );
    std::fs::remove_dir_all(d).unwrap();
}
