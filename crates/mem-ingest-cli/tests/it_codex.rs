//! Codex rollouts: the mapping of the README's "Codex" table, line by line,
//! on the samples in `../shared/samples` (ignored in a plain clone, where
//! they are absent) and on lines written here; token accounting, the
//! running context across parts, lineages, discovery and detection.

use std::path::{Path, PathBuf};

use mem_ingest::format::{Format, Input};
use mem_ingest::formats::Codex;
use mem_ingest::{OwnedRecord, Report, Role, SourceOptions};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use common::entries::{numbered, rec, rows, samples, Entries, NONE};

/// Every entry of a file read as Codex's (see [`common::entries::read`]).
fn read(path: &Path, bytes: Option<&[u8]>) -> (Entries, Report) {
    common::entries::read(&Codex, path, bytes)
}

/// Both ways of reading give the same (see [`common::entries::read_both`]).
fn read_both(path: &Path) -> (Entries, Report) {
    common::entries::read_both(&Codex, path)
}

fn record(entries: &Entries, line: u64) -> &OwnedRecord {
    entries
        .iter()
        .find(|(l, _)| *l == line)
        .and_then(|(_, r)| r.as_ref())
        .unwrap_or_else(|| panic!("no record on line {line}"))
}

/// `(input, output, cache_read, total_tokens)` of a report's usage.
fn tokens(r: &Report) -> (u64, u64, u64, u64) {
    let u = r.usage;
    (u.input, u.output, u.cache_read, u.total_tokens)
}

const CCL: &str = "codex/claude-code-log/test/test_data/codex";

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn real_session_line_by_line() {
    let p =
        samples().join("codex/agent-history/tests/fixtures/real_sessions/codex/session-01.jsonl");
    let (entries, report) = read_both(&p);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE,                                            // session_meta
            NONE,                                            // event_msg task_started
            rec(System, "response_item/message", &["text"]), // developer
            rec(System, "response_item/message", &["text"]), // <environment_context>
            NONE,                                            // turn_context
            rec(User, "response_item/message", &["text"]),
            NONE, // event_msg user_message: the twin of line 6
            rec(Assistant, "event_msg/agent_message", &["text"]),
            NONE, // response_item assistant message: the twin of line 8
            NONE, // token_count
            NONE, // task_complete
        ])
    );
    let sid = "019e9625-802f-7e91-840a-cfe88d14117a";
    let env = record(&entries, 4);
    assert_eq!(env.custom_type.as_deref(), Some("environment_context"));
    let user = record(&entries, 6);
    assert_eq!(
        (user.key.as_str(), user.session.as_str(), user.text.as_str()),
        (format!("{sid}:L6").as_str(), sid, "[REDACTED_PROMPT]")
    );
    assert_eq!(
        user.project,
        "/tmp/agent-history-real-agent/codex/workspace"
    );
    assert_eq!(user.source, "codex:session-01");
    assert_eq!(user.message_role.as_deref(), Some("user"));
    let a = record(&entries, 8);
    assert_eq!(a.model.as_deref(), Some("gpt-5.5"));
    assert_eq!(a.provider.as_deref(), Some("openai"));
    assert_eq!(a.text, "[REDACTED_ASSISTANT_TEXT]");
    // Usage: input 22539 of which 20864 cached; output 10; total as written.
    assert_eq!(tokens(&report), (22539 - 20864, 10, 20864, 22549));
    assert_eq!(report.by_model.len(), 1);
    assert_eq!(
        (
            report.by_model[0].model.as_str(),
            report.by_model[0].messages
        ),
        ("gpt-5.5", 1)
    );
    assert_eq!(report.entries.get("event_msg/token_count"), 1);
    assert_eq!(report.entries.get("session_meta"), 1);
    assert_eq!((report.records, report.no_record, report.lines), (4, 7, 11));
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn compaction_reasoning_and_tools() {
    let p = samples()
        .join("codex/agent-history/tests/fixtures/compaction/codex/session_with_compaction.jsonl");
    let (entries, report) = read_both(&p);
    use Role::*;
    let msg = |r| rec(r, "response_item/message", &["text"]);
    let reasoning = || rec(Assistant, "response_item/reasoning", &["thinking"]);
    let call = || rec(Assistant, "response_item/function_call", &["toolCall"]);
    let out = || rec(ToolResult, "response_item/function_call_output", &["text"]);
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE, // session_meta
            NONE, // turn_context
            msg(User),
            reasoning(),
            msg(Assistant),
            call(),
            out(),
            msg(Assistant),
            msg(User),
            msg(Assistant),
            msg(User),
            msg(Assistant),
            rec(System, "compacted", &["text"]),
            msg(User),
            reasoning(),
            msg(Assistant),
            call(),
            // An empty output: a record with empty text.
            rec(ToolResult, "response_item/function_call_output", &["text"]),
            msg(Assistant),
            NONE, // token_count
        ])
    );
    assert_eq!(
        record(&entries, 6).text,
        r#"shell {"command": "cat src/routes.py"}"#
    );
    assert_eq!(
        record(&entries, 7).tool_call_id.as_deref(),
        Some("call_compact_001")
    );
    assert_eq!(record(&entries, 6).tool_name.as_deref(), Some("shell"));
    assert!(record(&entries, 13)
        .text
        .starts_with("**Progress + Plan Status**"));
    assert_eq!(record(&entries, 4).text, "Planning API endpoint structure");
    assert_eq!(record(&entries, 5).model.as_deref(), Some("gpt-4.5-turbo"));
    // One count, no total before it: its last_token_usage.
    assert_eq!(tokens(&report), (1500, 1000, 500, 3200));
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn synthetic_tools_twins_and_future_types() {
    let p = samples().join(format!(
        "{CCL}/sessions/2026/01/02/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
    ));
    let (entries, report) = read_both(&p);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE, // session_meta
            NONE, // turn_context
            rec(User, "event_msg/user_message", &["text"]),
            NONE, // response_item user message: the twin of line 3
            rec(Assistant, "response_item/reasoning", &["thinking"]),
            rec(Assistant, "response_item/function_call", &["toolCall"]),
            rec(ToolResult, "response_item/function_call_output", &["text"]),
            rec(Assistant, "response_item/custom_tool_call", &["toolCall"]),
            rec(
                ToolResult,
                "response_item/custom_tool_call_output",
                &["text"]
            ),
            rec(Assistant, "response_item/function_call", &["toolCall"]),
            rec(ToolResult, "response_item/function_call_output", &["text"]),
            rec(Assistant, "event_msg/agent_message", &["text"]),
            NONE, // the twin of line 12
            NONE, // future_synthetic_record
        ])
    );
    for (_, r) in &entries {
        if let Some(r) = r {
            assert!(!r.text.contains("SYNTHETIC_ENCRYPTED"), "{r:?}");
        }
    }
    assert_eq!(
        record(&entries, 8).text,
        "apply_patch *** Begin Patch\n*** Add File: gamma.txt\n+synthetic\n*** End Patch"
    );
    assert_eq!(record(&entries, 9).text, "Done!");
    assert_eq!(
        record(&entries, 10).text,
        r#"mcp__synthetic__lookup {"query":"fixture"}"#
    );
    assert_eq!(
        record(&entries, 6).model.as_deref(),
        Some("synthetic-model")
    );
    assert_eq!(record(&entries, 6).provider.as_deref(), Some("synthetic"));
    assert_eq!(report.entries.get("future_synthetic_record"), 1);
    assert_eq!(
        (report.records, report.no_record, report.skipped),
        (9, 5, 0)
    );
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn subagent_legacy_and_malformed() {
    let dir = samples().join(format!("{CCL}/sessions/2026/01/03"));
    let child = dir.join("rollout-2026-01-03T04-05-10-33333333-3333-4333-8333-333333333333.jsonl");
    let (entries, _) = read_both(&child);
    use Role::*;
    // The replayed parent prefix: an event without a twin is a record.
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE,
            rec(User, "event_msg/user_message", &["text"]),
            rec(Assistant, "response_item/function_call", &["toolCall"]),
            rec(User, "event_msg/user_message", &["text"]),
            rec(Assistant, "event_msg/agent_message", &["text"]),
        ])
    );
    let bytes = std::fs::read(&child).unwrap();
    let src = Codex
        .open(Input::Bytes(&bytes), &child, &SourceOptions::new())
        .unwrap();
    let h = src.header().unwrap();
    assert_eq!(h.id, "33333333-3333-4333-8333-333333333333");
    assert_eq!(
        Codex.parent(h).as_deref(),
        Some("codex:22222222-2222-4222-8222-222222222222")
    );

    let legacy = samples().join(format!(
        "{CCL}/sessions/rollout-44444444-4444-4444-8444-444444444444.jsonl"
    ));
    let (entries, report) = read_both(&legacy);
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE,
            rec(User, "response_item/message", &["text"]),
            rec(Assistant, "response_item/message", &["text"]),
        ])
    );
    assert_eq!(
        record(&entries, 2).session,
        "44444444-4444-4444-8444-444444444444"
    );
    assert_eq!(report.entries.get("session_meta"), 1);

    let bad = samples().join(format!(
        "{CCL}/malformed/rollout-66666666-6666-4666-8666-666666666666.jsonl"
    ));
    let (entries, report) = read_both(&bad);
    assert_eq!(entries.len(), 2);
    assert_eq!((report.records, report.skipped, report.lines), (1, 1, 3));
}

#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn ccusage_fixture_without_session_meta() {
    let p = samples().join(
        "codex/ccusage/apps/ccusage/test/fixtures/codex/sessions/project-alpha/session-alpha.jsonl",
    );
    let (entries, report) = read_both(&p);
    assert!(entries.iter().all(|(_, r)| r.is_none()));
    // Models from the counts themselves (info.model) over turn_context.
    let by: Vec<(&str, u64)> = report
        .by_model
        .iter()
        .map(|m| (m.model.as_str(), m.usage.total_tokens))
        .collect();
    assert_eq!(by, vec![("gpt-5.2-codex", 1200), ("gpt-5.3-codex", 3000)]);
    assert_eq!(tokens(&report), (750 + 2000, 125 + 300, 250 + 500, 4200));
}

// ---------------------------------------------------------------------------
// Lines written here

/// Lines read in memory and streamed: the same.
fn lines(name: &str, text: &str) -> (Entries, Report) {
    let p = PathBuf::from(format!("{name}.jsonl"));
    let a = read(&p, Some(text.as_bytes()));
    let opts = SourceOptions::new();
    let cursor = std::io::Cursor::new(text.as_bytes().to_vec());
    let mut src = Codex
        .open(Input::Reader(Box::new(cursor)), &p, &opts)
        .unwrap();
    let mut b = Vec::new();
    while let Some(e) = src.next_entry().unwrap() {
        b.push((e.line, e.record.map(|r| r.to_owned_record())));
    }
    assert_eq!(a, (b, src.report().clone()));
    a
}

const META: &str = r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a","model_provider":"openai"}}"#;

fn turn(ts: &str, cwd: &str, model: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"turn_context","payload":{{"cwd":"{cwd}","model":"{model}"}}}}"#
    )
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

fn user(ts: &str, text: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{text}"}}]}}}}"#
    )
}

fn event_user(ts: &str, text: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"user_message","message":"{text}"}}}}"#
    )
}

fn agent(ts: &str, text: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{text}"}}]}}}}"#
    )
}

/// A session with model and cwd changes, counts of every shape, twins in
/// both orders.
fn session() -> String {
    let mut v = vec![
        META.to_owned(),
        turn("2026-01-01T00:00:01.000Z", "/a", "m1"),
        user("2026-01-01T00:00:02.000Z", "hello"),
        event_user("2026-01-01T00:00:02.001Z", "hello"),
        agent("2026-01-01T00:00:03.000Z", "hi"),
        // info null: rate limits only.
        r#"{"timestamp":"2026-01-01T00:00:03.500Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{}}}"#.to_owned(),
        count("2026-01-01T00:00:04.000Z", [100, 40, 10, 5, 110], Some([100, 40, 10, 5, 110])),
        // Repeated, total unchanged (and a last): nothing.
        count("2026-01-01T00:00:04.100Z", [100, 40, 10, 5, 110], Some([100, 40, 10, 5, 110])),
        turn("2026-01-01T00:01:00.000Z", "/b", "m2"),
        event_user("2026-01-01T00:01:01.000Z", "again"),
        user("2026-01-01T00:01:01.001Z", "again"),
        // No last: the delta of the totals.
        count("2026-01-01T00:01:02.000Z", [300, 140, 30, 5, 330], None),
    ];
    v.push(String::new());
    v.join("\n")
}

#[test]
fn tokens_models_and_twins() {
    let (entries, report) = lines("rollout-x", &session());
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE,
            NONE,
            rec(User, "response_item/message", &["text"]),
            NONE,
            rec(Assistant, "response_item/message", &["text"]),
            NONE,
            NONE,
            NONE,
            NONE,
            rec(User, "event_msg/user_message", &["text"]),
            NONE,
            NONE,
        ])
    );
    assert_eq!(record(&entries, 3).project, "/a");
    assert_eq!(record(&entries, 5).model.as_deref(), Some("m1"));
    assert_eq!(record(&entries, 10).project, "/b");
    type ByModel<'r> = Vec<(&'r str, (u64, u64, u64, u64))>;
    let by: ByModel = report
        .by_model
        .iter()
        .map(|m| {
            let u = m.usage;
            (
                m.model.as_str(),
                (u.input, u.output, u.cache_read, u.total_tokens),
            )
        })
        .collect();
    assert_eq!(
        by,
        vec![("m1", (60, 10, 40, 110)), ("m2", (100, 20, 100, 220))]
    );
    assert_eq!(report.entries.get("event_msg/token_count"), 4);
    assert_eq!(
        report.records + report.no_record + report.skipped,
        report.lines
    );
}

/// A token count that names its model (`model`, `model_name`,
/// `metadata.model`, on the payload before its `info`; the first of each
/// name, when a string) is counted for that model; one that names none,
/// or only as a non-string, for the last `turn_context`'s.
#[test]
fn a_token_count_names_its_own_model() {
    let tc = |ts: &str, payload_extra: &str, info_extra: &str, n: u64| {
        format!(
            r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"token_count"{payload_extra},"info":{{"last_token_usage":{{"input_tokens":{n},"cached_input_tokens":0,"output_tokens":1,"reasoning_output_tokens":0,"total_tokens":{t}}}{info_extra}}}}}}}"#,
            t = n + 1
        )
    };
    let mut v = vec![
        META.to_owned(),
        turn("2026-01-01T00:00:01.000Z", "/a", "ctx"),
        tc(
            "2026-01-01T00:00:02.000Z",
            r#","model":"p-model""#,
            r#","model":"i-model""#,
            10,
        ),
        tc(
            "2026-01-01T00:00:03.000Z",
            r#","model_name":"p-name","metadata":{"model":"p-meta"}"#,
            "",
            20,
        ),
        tc(
            "2026-01-01T00:00:04.000Z",
            r#","metadata":{"model":"p-meta"}"#,
            r#","model":"i-model""#,
            30,
        ),
        tc(
            "2026-01-01T00:00:05.000Z",
            "",
            r#","metadata":{"model":"i-meta"},"model_name":"i-name""#,
            40,
        ),
        tc(
            "2026-01-01T00:00:06.000Z",
            r#","model":7,"model":"second""#,
            "",
            50,
        ),
        tc(
            "2026-01-01T00:00:07.000Z",
            r#","model":null,"model_name":"p-name""#,
            "",
            60,
        ),
        tc("2026-01-01T00:00:08.000Z", "", "", 70),
    ];
    v.push(String::new());
    let (_, report) = lines("rollout-m", &v.join("\n"));
    let by: Vec<(&str, u64, u64)> = report
        .by_model
        .iter()
        .map(|m| (m.model.as_str(), m.usage.input, m.usage.total_tokens))
        .collect();
    assert_eq!(
        by,
        vec![
            ("p-model", 10, 11),
            ("p-name", 80, 82),
            ("p-meta", 30, 31),
            ("i-name", 40, 41),
            ("ctx", 120, 122),
        ]
    );
}

/// Read in two parts at every line, the second resumed with the running
/// context the first handed out: the same records and usage.
#[test]
fn running_context_carries_across_parts() {
    let text = session();
    let path = Path::new("rollout-x.jsonl");
    let opts = SourceOptions::new();
    let (whole, whole_report) = lines("rollout-x", &text);
    let n = whole.len();
    for k in 0..=n {
        let mut src = Codex
            .open(Input::Bytes(text.as_bytes()), path, &opts)
            .unwrap();
        let mut got = Vec::new();
        for _ in 0..k {
            let e = src.next_entry().unwrap().unwrap();
            got.push((e.line, e.record.map(|r| r.to_owned_record())));
        }
        let pos = src.position();
        let ctx = src.running_context();
        let header = src.header().unwrap().clone();
        let mut report = src.report().clone();
        let rest = &text.as_bytes()[pos.byte as usize..];
        let mut src = Codex.resume(
            Input::Bytes(rest),
            path,
            &header,
            &ctx,
            pos.byte,
            pos.line,
            &opts,
        );
        while let Some(e) = src.next_entry().unwrap() {
            got.push((e.line, e.record.map(|r| r.to_owned_record())));
        }
        report.merge(src.report());
        assert_eq!(got, whole, "split after {k} entries");
        assert_eq!(report.usage, whole_report.usage, "split after {k}");
        assert_eq!(report.by_model, whole_report.by_model, "split after {k}");
    }
}

#[test]
fn harness_context_and_output_shapes() {
    let text = [
        META.to_owned(),
        user("2026-01-01T00:00:01.000Z", "<environment_context><cwd>/a</cwd></environment_context>"),
        user("2026-01-01T00:00:02.000Z", "# AGENTS.md instructions for /a"),
        r#"{"timestamp":"2026-01-01T00:00:03.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,aGVsbG8="}]}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:04.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":{"content":"denied","success":false}}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:05.000Z","type":"response_item","payload":{"type":"local_shell_call","call_id":"c2","status":"completed","action":{"type":"exec","command":["ls"]}}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:06.000Z","type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":"SECRET"}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:07.000Z","type":"response_item","payload":{"type":"compaction","encrypted_content":"SECRET"}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:08.000Z","type":"response_item","payload":{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>x"}]}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:09.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c3","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}}"#.to_owned(),
        r#"[1,2]"#.to_owned(),
        String::new(),
    ]
    .join("\n");
    let (entries, report) = lines("rollout-h", &text);
    use Role::*;
    assert_eq!(
        rows(&entries),
        numbered(vec![
            NONE,
            rec(System, "response_item/message", &["text"]),
            rec(System, "response_item/message", &["text"]),
            rec(User, "response_item/message", &["text", "image"]),
            rec(ToolResult, "response_item/function_call_output", &["text"]),
            rec(Assistant, "response_item/local_shell_call", &["toolCall"]),
            NONE, // reasoning with nothing readable
            NONE, // compaction: encrypted only
            rec(System, "response_item/message", &["text"]),
            rec(ToolResult, "response_item/function_call_output", &["text"]),
        ])
    );
    assert_eq!(
        record(&entries, 2).custom_type.as_deref(),
        Some("environment_context")
    );
    assert_eq!(
        record(&entries, 3).custom_type.as_deref(),
        Some("user_instructions")
    );
    assert_eq!(record(&entries, 4).text, "look\n[image image/png, 5 bytes]");
    assert_eq!(record(&entries, 5).is_error, Some(true));
    assert_eq!(record(&entries, 5).text, "denied");
    assert_eq!(
        record(&entries, 6).text,
        r#"local_shell_call {"type":"exec","command":["ls"]}"#
    );
    assert_eq!(record(&entries, 9).custom_type, None);
    assert_eq!(record(&entries, 10).text, "a\nb");
    assert_eq!(report.skipped, 1);
    assert_eq!(
        report.records + report.no_record + report.skipped,
        report.lines
    );
}

#[test]
fn detection_from_content() {
    let d = |s: &str| Codex.detect(s.as_bytes(), true);
    assert!(d(&session()));
    assert!(d(&turn("2026-01-01T00:00:00Z", "/a", "m")));
    assert!(d(
        "{\"id\":\"x\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n{\"type\":\"message\",\"role\":\"user\",\"content\":[]}\n"
    ));
    assert!(!d(r#"{"type":"session","version":3,"id":"s1","cwd":"/p"}"#));
    assert!(!d(
        r#"{"type":"user","uuid":"u","sessionId":"s","message":{"role":"user","content":"hi"}}"#
    ));
    assert!(!d(r#"{"type":"message","role":"user","content":"hi"}"#));
    // A first line longer than the prefix: the envelope's start tells.
    let long = format!(
        r#"{{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{{"id":"x","base_instructions":{{"text":"{}"#,
        "y".repeat(100)
    );
    assert!(Codex.detect(long.as_bytes(), false));
}

/// The newest Codex numbers lines (`ordinal`): a replayed line keeps its
/// fingerprint whatever its number.
#[test]
fn ordinals_stay_out_of_fingerprints() {
    let fp = |line: &str| {
        let text = format!("{META}\n{line}\n");
        let mut src = Codex
            .open(
                Input::Bytes(text.as_bytes()),
                Path::new("rollout-o.jsonl"),
                &SourceOptions::new(),
            )
            .unwrap();
        src.next_entry().unwrap();
        src.next_entry().unwrap().unwrap().fingerprint
    };
    let a = fp(
        r#"{"timestamp":"2026-01-01T00:00:01Z","ordinal":3,"type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
    );
    let b = fp(
        r#"{"timestamp":"2026-01-01T00:00:01Z","ordinal":9,"type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
    );
    let c = fp(
        r#"{"timestamp":"2026-01-01T00:00:02Z","ordinal":9,"type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#,
    );
    assert_eq!(a, b);
    assert_ne!(b, c);
}

// ---------------------------------------------------------------------------
// Discovery, lineages and usage through the command line

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
    let d = std::env::temp_dir().join(format!("mem-ingest-codex-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stats(c: &mut std::process::Command) -> (Option<i32>, serde_json::Value, String) {
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, err)
}

/// A parent, and a fork of it that replays its lines then adds its own.
fn parent_and_fork() -> (String, String) {
    let parent = session();
    let fork_meta = r#"{"timestamp":"2026-01-02T00:00:00.000Z","type":"session_meta","payload":{"id":"f1","timestamp":"2026-01-02T00:00:00.000Z","cwd":"/a","forked_from_id":"t1"}}"#;
    let mut fork = format!("{fork_meta}\n{parent}");
    fork.push_str(&user("2026-01-02T00:00:01.000Z", "forked"));
    fork.push('\n');
    fork.push_str(&count(
        "2026-01-02T00:00:02.000Z",
        [400, 140, 35, 5, 435],
        Some([100, 0, 5, 0, 105]),
    ));
    fork.push('\n');
    (parent, fork)
}

#[test]
fn default_archive_forks_and_archived_copies() {
    let home = tmpdir("defaults");
    let (code, _, err) = stats(bin(&home).args(["stats", "--json", "-q", "--source", "codex"]));
    assert_eq!(code, Some(1));
    assert!(err.contains("codex/sessions"), "{err}");
    let day = home.join("codex/sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    let (parent, fork) = parent_and_fork();
    std::fs::write(day.join("rollout-2026-01-01T00-00-00-t1.jsonl"), &parent).unwrap();
    std::fs::write(day.join("rollout-2026-01-02T00-00-00-f1.jsonl"), &fork).unwrap();
    // Not rollouts: never read.
    std::fs::write(day.join("notes.jsonl"), "junk\n").unwrap();
    // The same relative path archived: the active copy wins; another
    // archived file is read.
    let arch = home.join("codex/archived_sessions/2026/01/01");
    std::fs::create_dir_all(&arch).unwrap();
    std::fs::write(arch.join("rollout-2026-01-01T00-00-00-t1.jsonl"), &parent).unwrap();
    let other = session().replace("\"t1\"", "\"t2\"");
    std::fs::write(arch.join("rollout-2026-01-03T00-00-00-t2.jsonl"), &other).unwrap();
    let (code, v, err) = stats(bin(&home).args(["stats", "--json", "-q"]));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["files"].as_u64(), Some(3), "{v}");
    // The fork's replayed prefix (its parent's 12 lines) counted once: 3
    // records of each session, and the fork's own prompt.
    assert_eq!(v["records"].as_u64(), Some(3 + 3 + 1), "{v}");
    assert_eq!(v["deduplicated"].as_u64(), Some(12), "{v}");
    // Tokens: each session's 330, the fork's own 105.
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(330 + 330 + 105));
    // Records of the fork's own lines are the fork's; the replayed ones
    // the parent's.
    let out = bin(&home)
        .args(["backfill", "-q", "--source", "codex"])
        .output()
        .unwrap();
    let keys: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(keys.contains(&"f1:L14".to_owned()), "{keys:?}");
    assert_eq!(keys.iter().filter(|k| k.starts_with("f1:")).count(), 1);
    // Without deduplication every copy counts.
    let (_, v, _) = stats(bin(&home).args(["stats", "--json", "-q", "--no-dedupe"]));
    assert_eq!(
        v["usage"]["total_tokens"].as_u64(),
        Some(330 + 330 + 330 + 105)
    );
    std::fs::remove_dir_all(home).unwrap();
}

#[test]
fn resumed_runs_carry_the_running_context() {
    let home = tmpdir("resume");
    let dir = home.join("a");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rollout-2026-01-01T00-00-00-t1.jsonl");
    let text = session();
    let cut = text
        .find("{\"timestamp\":\"2026-01-01T00:01:00.000Z\"")
        .unwrap();
    std::fs::write(&file, &text[..cut]).unwrap();
    let state = home.join("state");
    let run = || {
        stats(
            bin(&home)
                .args(["stats", "--json", "-q", "--source", "codex", "--state"])
                .arg(&state)
                .arg(&dir),
        )
    };
    let (code, v, err) = run();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(110));
    std::fs::write(&file, &text).unwrap();
    let (_, v, _) = run();
    // The delta of the last count needs the total before the cut, and its
    // model the turn after it.
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(330));
    let models: Vec<(String, u64)> = v["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_owned(),
                m["total_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(models, vec![("m1".into(), 110), ("m2".into(), 220)]);
    std::fs::remove_dir_all(home).unwrap();
}

/// The stdout lines of a command as JSON, and its stderr.
fn json_lines(c: &mut std::process::Command) -> (Vec<serde_json::Value>, String) {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (v, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A record's fields less its file (a compressed copy's path ends in
/// `.zst`).
fn without_file(mut v: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    for r in &mut v {
        r.as_object_mut().unwrap().remove("file");
    }
    v
}

/// Compressed rollouts are read as a stream: the same records and totals
/// as their plain copies (a fork's copies deduplicated against its parent
/// across a plain and a compressed file), a plain `.jsonl` beside one
/// wins, a state finds them unchanged, and frames appended are read on.
#[test]
fn compressed_rollouts_are_read() {
    let plain = tmpdir("zst-plain");
    let packed = tmpdir("zst");
    let (parent, fork) = parent_and_fork();
    let files = [
        ("rollout-2026-01-01T00-00-00-t1.jsonl", parent.as_str()),
        ("rollout-2026-01-02T00-00-00-f1.jsonl", fork.as_str()),
    ];
    for (home, compress) in [(&plain, false), (&packed, true)] {
        let day = home.join("codex/sessions/2026/01/01");
        std::fs::create_dir_all(&day).unwrap();
        for (i, (name, text)) in files.iter().enumerate() {
            if compress && i == 1 {
                let z = zstd::encode_all(text.as_bytes(), 3).unwrap();
                std::fs::write(day.join(format!("{name}.zst")), z).unwrap();
            } else {
                std::fs::write(day.join(name), text).unwrap();
            }
        }
    }
    // A plain copy beside a compressed one wins (the compressed one is
    // not read: it holds nothing a rollout could).
    let day = packed.join("codex/sessions/2026/01/01");
    std::fs::write(
        day.join("rollout-2026-01-03T00-00-00-t3.jsonl"),
        session().replace("\"t1\"", "\"t3\""),
    )
    .unwrap();
    std::fs::write(
        day.join("rollout-2026-01-03T00-00-00-t3.jsonl.zst"),
        b"not zstd",
    )
    .unwrap();
    std::fs::write(
        plain.join("codex/sessions/2026/01/01/rollout-2026-01-03T00-00-00-t3.jsonl"),
        session().replace("\"t1\"", "\"t3\""),
    )
    .unwrap();
    for jobs in ["1", "2"] {
        let args = ["stats", "--json", "-q", "--source", "codex", "--jobs", jobs];
        let (code, a, err) = stats(bin(&plain).args(args));
        assert_eq!(code, Some(0), "{err}");
        let (code, b, err) = stats(bin(&packed).args(args));
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(a, b);
        assert_eq!(
            (
                b["files"].as_u64(),
                b["records"].as_u64(),
                b["deduplicated"].as_u64(),
                b["skipped"].as_u64()
            ),
            (Some(3), Some(3 + 1 + 3), Some(12), Some(0)),
            "{b}"
        );
        assert_eq!(b["usage"]["total_tokens"].as_u64(), Some(330 + 105 + 330));
        let args = ["backfill", "-q", "--source", "codex", "--jobs", jobs];
        let (a, _) = json_lines(bin(&plain).args(args));
        let (b, _) = json_lines(bin(&packed).args(args));
        assert_eq!(without_file(a), without_file(b.clone()));
        let fork_file = b.iter().find(|r| r["key"] == "f1:L14").unwrap()["file"].clone();
        assert!(
            fork_file.as_str().unwrap().ends_with("f1.jsonl.zst"),
            "{fork_file}"
        );
        assert_eq!(
            b.iter().find(|r| r["key"] == "f1:L14").unwrap()["source"],
            "codex:rollout-2026-01-02T00-00-00-f1"
        );
    }
    // A state: the re-run finds every file unchanged; a frame appended to
    // the compressed file is read on from there.
    let state = packed.join("state");
    let run = || {
        stats(
            bin(&packed)
                .args(["stats", "--json", "--source", "codex", "--state"])
                .arg(&state),
        )
    };
    let (code, v, err) = run();
    assert_eq!((code, v["records"].as_u64()), (Some(0), Some(7)), "{err}");
    let (_, v, err) = run();
    assert!(err.contains("3 unchanged"), "{err}");
    assert_eq!(v["records"].as_u64(), Some(7));
    let zst = day.join("rollout-2026-01-02T00-00-00-f1.jsonl.zst");
    let more = user("2026-01-02T00:00:03.000Z", "more") + "\n";
    let mut f = std::fs::OpenOptions::new().append(true).open(&zst).unwrap();
    std::io::Write::write_all(&mut f, &zstd::encode_all(more.as_bytes(), 3).unwrap()).unwrap();
    drop(f);
    let (_, v, err) = run();
    assert!(err.contains("2 unchanged, 1 resumed"), "{err}");
    assert_eq!(v["records"].as_u64(), Some(8), "{v}");
    // Damaged: the file fails, its error naming it (exit 1); the others
    // are read.
    std::fs::write(&zst, b"\x28\xb5\x2f\xfd\x00\x58\x01\x02\x03").unwrap();
    let (code, v, err) = stats(bin(&packed).args(["stats", "--json", "-q", "--source", "codex"]));
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(v["files_failed"].as_u64(), Some(1), "{v}");
    assert!(
        v["failures"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("f1.jsonl.zst"),
        "{v}"
    );
    assert_eq!(v["records"].as_u64(), Some(3 + 3), "{v}");
    std::fs::remove_dir_all(plain).unwrap();
    std::fs::remove_dir_all(packed).unwrap();
}

/// A real rollout compressed (in the test: no binary copy of a sample is
/// kept) gives its plain copy's records and counts.
#[test]
#[ignore = "reads ../shared/samples; run with --include-ignored"]
fn compressed_real_session() {
    let p =
        samples().join("codex/agent-history/tests/fixtures/real_sessions/codex/session-01.jsonl");
    let text = std::fs::read(&p).unwrap();
    let home = tmpdir("zst-real");
    let day = home.join("codex/sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    let name = "rollout-2026-01-01T00-00-00-real.jsonl";
    std::fs::write(day.join(name), &text).unwrap();
    let args = ["backfill", "-q", "--source", "codex"];
    let (plain, _) = json_lines(bin(&home).args(args));
    let (_, plain_stats, _) =
        stats(bin(&home).args(["stats", "--json", "-q", "--source", "codex"]));
    std::fs::remove_file(day.join(name)).unwrap();
    // Level 19 with a long window, and a stream of several frames.
    let mut z = zstd::encode_all(&text[..text.len() / 2], 19).unwrap();
    z.extend(zstd::encode_all(&text[text.len() / 2..], 1).unwrap());
    std::fs::write(day.join(format!("{name}.zst")), z).unwrap();
    let (packed, _) = json_lines(bin(&home).args(args));
    let (_, packed_stats, _) =
        stats(bin(&home).args(["stats", "--json", "-q", "--source", "codex"]));
    assert!(!plain.is_empty());
    assert_eq!(without_file(plain), without_file(packed));
    assert_eq!(plain_stats, packed_stats);
    std::fs::remove_dir_all(home).unwrap();
}

/// A fork whose file sorts before its parent's (its `forked_from_id`
/// names a rollout later in path order): one lineage still, the replayed
/// prefix counted once, with --jobs 1 and 2, and across runs with a state
/// when the parent comes in a later run.
#[test]
fn fork_sorting_before_its_parent() {
    let home = tmpdir("fork-first");
    let day = home.join("codex/sessions/2026/01/01");
    std::fs::create_dir_all(&day).unwrap();
    let (parent, fork) = parent_and_fork();
    let fork_path = day.join("rollout-2025-12-31T00-00-00-f1.jsonl");
    let parent_path = day.join("rollout-2026-01-01T00-00-00-t1.jsonl");
    std::fs::write(&fork_path, &fork).unwrap();
    std::fs::write(&parent_path, &parent).unwrap();
    let totals = |v: &serde_json::Value| {
        (
            v["files"].as_u64(),
            v["records"].as_u64(),
            v["deduplicated"].as_u64(),
            v["usage"]["total_tokens"].as_u64(),
        )
    };
    for jobs in ["1", "2"] {
        let (code, v, err) =
            stats(bin(&home).args(["stats", "--json", "-q", "--source", "codex", "--jobs", jobs]));
        assert_eq!(code, Some(0), "{err}");
        assert_eq!(
            totals(&v),
            (Some(2), Some(3 + 1), Some(12), Some(330 + 105)),
            "{v}"
        );
        let (recs, _) =
            json_lines(bin(&home).args(["backfill", "-q", "--source", "codex", "--jobs", jobs]));
        let mut keys: Vec<&str> = recs.iter().map(|r| r["key"].as_str().unwrap()).collect();
        keys.sort();
        // Each record once: the parent's three (its file is read ahead
        // when the fork's is delivered, so its copies are the ones kept),
        // and the fork's own prompt.
        assert_eq!(keys, ["f1:L14", "t1:L10", "t1:L3", "t1:L5"], "{keys:?}");
    }
    // Compressed, the parent is found the same way.
    let zst_path = day.join("rollout-2026-01-01T00-00-00-t1.jsonl.zst");
    std::fs::write(&zst_path, zstd::encode_all(parent.as_bytes(), 3).unwrap()).unwrap();
    std::fs::remove_file(&parent_path).unwrap();
    let (recs, _) = json_lines(bin(&home).args(["backfill", "-q", "--source", "codex"]));
    let mut keys: Vec<&str> = recs.iter().map(|r| r["key"].as_str().unwrap()).collect();
    keys.sort();
    assert_eq!(keys, ["f1:L14", "t1:L10", "t1:L3", "t1:L5"], "{keys:?}");
    std::fs::remove_file(&zst_path).unwrap();
    std::fs::write(&parent_path, &parent).unwrap();
    // The fork first, alone; its parent in the next run: still once (the
    // fork's copies kept, read first). Alone, the fork's first two counts
    // with usage (the parent's 110 and its repeat, 100 ms apart) lead a run
    // ccusage leaves to the absent parent: not counted, not recorded, so
    // the parent's own copies count them in the next run.
    std::fs::remove_file(&parent_path).unwrap();
    let state = home.join("state");
    let run = || {
        stats(
            bin(&home)
                .args(["stats", "--json", "-q", "--source", "codex", "--state"])
                .arg(&state),
        )
    };
    let (_, v, err) = run();
    assert_eq!(
        totals(&v),
        (Some(1), Some(3 + 1), Some(2), Some(330 - 110 + 105)),
        "{err}"
    );
    std::fs::write(&parent_path, &parent).unwrap();
    let (_, v, err) = run();
    assert_eq!(
        totals(&v),
        (Some(2), Some(3 + 1), Some(12), Some(330 + 105)),
        "{err}"
    );
    std::fs::remove_dir_all(home).unwrap();
}

/// The hostile catalogue on Codex lines: lines cut after `"type":` (which
/// abort ccusage), NUL runs, invalid UTF-8, a file cut inside a UTF-8
/// character, interleaved partial writes, a line over the maximum length,
/// unknown types: counted, never fatal, every line accounted for.
#[test]
fn hostile_codex_lines() {
    let mut text = session().into_bytes();
    text.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:02:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\n");
    text.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:02:00.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"\n");
    text.extend_from_slice(b"\0\0\0\0\0\0\n");
    text.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:02:01.000Z\",\"type\":\"response_item\",\"payload\":{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"caf\xe9 \xff\"}]}}\n");
    // Two writers' halves on one line.
    text.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:02:02.000Z\",\"type\":\"event_msg\",\"pay{\"timestamp\":\"2026-01-01T00:02:03.000Z\",\"type\":\"turn_context\",\"payload\":{}}\n");
    text.extend_from_slice(format!("{{\"timestamp\":\"2026-01-01T00:02:04.000Z\",\"type\":\"response_item\",\"payload\":{{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"{}\"}}}}\n", "x".repeat(5000)).as_bytes());
    text.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:02:05.000Z\",\"type\":\"inter_agent_communication\",\"payload\":{\"x\":1}}\n");
    text.extend_from_slice(b"{\"timestamp\":\"2026-01-01T00:02:06.000Z\",\"type\":\"event_msg\",\"payload\":{\"type\":\"agent_message\",\"message\":\"\xc3");
    let path = Path::new("rollout-hostile.jsonl");
    let opts = SourceOptions::new().max_line(4096);
    let read = |input: Input<'_>| {
        let mut src = Codex.open(input, path, &opts).unwrap();
        let mut n = 0;
        while src.next_entry().unwrap().is_some() {
            n += 1;
        }
        (n, src.report().clone())
    };
    let a = read(Input::Bytes(&text));
    let b = read(Input::Reader(Box::new(std::io::Cursor::new(text.clone()))));
    assert_eq!(a, b);
    let r = a.1;
    assert_eq!(r.records + r.no_record + r.skipped, r.lines);
    // Cut after "type": (two), NULs, the interleaved line, the long one,
    // the cut last line.
    assert_eq!(r.skipped, 6, "{:?}", r.skips);
    assert_eq!(r.repaired, 1);
    assert_eq!(r.entries.get("inter_agent_communication"), 1);
    // The usage before them is intact.
    assert_eq!(r.usage.total_tokens, 330);
}

/// A rollout is found as a parent by the session id its name ends with.
#[test]
fn parents_are_found_by_the_id_a_name_ends_with() {
    let id = "5973b6c0-94b8-487b-a530-2aeb6098ae0e";
    for name in [
        format!("rollout-2025-05-07T17-24-21-{id}.jsonl"),
        format!("rollout-2025-05-07T17-24-21-{id}.jsonl.zst"),
        format!("rollout-{id}.jsonl"),
    ] {
        assert_eq!(Codex.parent_lookup_name(&name), id, "{name}");
    }
    // Not a time: kept whole.
    assert_eq!(
        Codex.parent_lookup_name("rollout-2025-05-07X17-24-21-a.jsonl"),
        "2025-05-07X17-24-21-a"
    );
    let h = |parent: Option<&str>| mem_ingest::Header {
        fingerprint: 0,
        id: "f1".into(),
        cwd: String::new(),
        version: 0,
        timestamp: None,
        parent: parent.map(|p| mem_ingest::Parent::Session(p.to_owned())),
    };
    assert_eq!(Codex.parent_file_name(&h(Some(id))), Some(id));
    assert_eq!(Codex.parent_file_name(&h(None)), None);
}

/// A real rollout (26 lines, 10 records) in the repository, MIT
/// (`tests/real/codex/codemie-exec-0.77.0/PROVENANCE.md`).
const REAL_EXEC: &str = "tests/real/codex/codemie-exec-0.77.0/rollout-2026-01-02T18-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl";

/// The line hash a checkpoint's state records: `(layout version, hash)`.
fn state_line_hash(state: &Path) -> (u32, u32) {
    use mem_ingest::archive::{CheckpointStore, StateFile};
    let version = u32::from_le_bytes(std::fs::read(state).unwrap()[8..12].try_into().unwrap());
    let s = StateFile::open(state).unwrap().load().unwrap().unwrap();
    (version, s.options.line_hash)
}

/// A state saved before the line hash was recorded
/// (`fixtures/state-v6-codex.state`: the release before, a6548c0,
/// `backfill --state` of [`REAL_EXEC`]) holds the serial hash's
/// fingerprints. A copy of the rollout (new to the state by its inode) is
/// then every line a copy its lineage holds: no record, 26 deduplicated,
/// because the run hashes as the state did, and still does once the state
/// is saved in the new layout (with `-L`: it was saved when links were
/// always followed). A state of the releases that hashed with three lanes
/// (`fixtures/state-v13-codex-wide.state`, ba3f0fe's) keeps that hash
/// (2) likewise. A new state records XXH3 (3), and deduplicates a copy
/// the same way.
#[test]
fn checkpoints_keep_the_line_hash_they_were_made_with() {
    let home = tmpdir("line-hash");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let name = Path::new(REAL_EXEC).file_name().unwrap();
    let run = |copy: &str, state: &Path| {
        let dir = home.join(copy);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(root.join(REAL_EXEC), dir.join(name)).unwrap();
        let old = state.ends_with("old.state");
        json_lines(
            bin(&home)
                .args(["backfill", "--state"])
                .arg(state)
                .args(old.then_some("-L"))
                .arg(dir.join(name)),
        )
    };
    let all_copies = "0 resumed, 0 re-read), 0 records (0 written), 26 deduplicated, 0 skipped";
    let old = home.join("old.state");
    std::fs::copy(root.join("fixtures/state-v6-codex.state"), &old).unwrap();
    assert_eq!(state_line_hash(&old), (6, 1));
    for copy in ["a", "b"] {
        let (records, err) = run(copy, &old);
        assert_eq!(records.len(), 0, "{err}");
        assert!(err.contains(all_copies), "{err}");
        assert_eq!(
            state_line_hash(&old),
            (mem_ingest::archive::STATE_VERSION, 1)
        );
    }
    let wide = home.join("wide.state");
    std::fs::copy(root.join("fixtures/state-v13-codex-wide.state"), &wide).unwrap();
    assert_eq!(state_line_hash(&wide), (13, 2));
    for copy in ["e", "f"] {
        let (records, err) = run(copy, &wide);
        assert_eq!(records.len(), 0, "{err}");
        assert!(err.contains(all_copies), "{err}");
        assert_eq!(
            state_line_hash(&wide),
            (mem_ingest::archive::STATE_VERSION, 2)
        );
    }
    let new = home.join("new.state");
    let (records, err) = run("c", &new);
    assert_eq!(records.len(), 10, "{err}");
    assert!(
        err.contains("10 records (10 written), 0 deduplicated"),
        "{err}"
    );
    assert_eq!(
        state_line_hash(&new),
        (mem_ingest::archive::STATE_VERSION, 3)
    );
    let (records, err) = run("d", &new);
    assert_eq!(records.len(), 0, "{err}");
    assert!(err.contains(all_copies), "{err}");
    std::fs::remove_dir_all(home).unwrap();
}

/// A run that builds no records (`stats`) knows a long tool call, tool
/// output or reasoning line from its bytes once it has mapped it (a
/// replayed copy is not parsed again): reading the same lines twice, and
/// a third time in another file after a different first line, gives
/// entries (fingerprint, line, byte, counts) and a report equal to the
/// first reading's, and to those of a reading that builds records, less
/// the records held back.
#[test]
fn a_long_item_known_by_its_bytes_counts_as_parsing_it_would() {
    use mem_ingest::{EntryCounts, RoleFilter};
    let pad = |n: usize| "x\\n".repeat(n);
    // One of each: a tool call, its output, reasoning with and without a
    // readable summary (the second makes no record), all over 1 KiB; then
    // short ones and a message, which are always parsed.
    let lines = [
        META.to_owned(),
        turn("2026-01-01T00:00:01.000Z", "/a", "gpt-5"),
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}}}}"#,
            pad(500)
        ),
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:03.000Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"c1","output":"{}"}}}}"#,
            pad(900)
        ),
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:04.000Z","type":"response_item","payload":{{"type":"reasoning","summary":[{{"type":"summary_text","text":"{}"}}],"encrypted_content":"e"}}}}"#,
            pad(400)
        ),
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:05.000Z","type":"response_item","payload":{{"type":"reasoning","summary":[],"encrypted_content":"{}"}}}}"#,
            "A".repeat(2000)
        ),
        user("2026-01-01T00:00:06.000Z", "short"),
        count("2026-01-01T00:00:07.000Z", [10, 2, 5, 1, 15], None),
        // A parent's replayed meta line (no record) and a compaction (a
        // system record), over 1 KiB.
        format!(
            r#"{{"timestamp":"2025-12-31T00:00:00.000Z","type":"session_meta","payload":{{"id":"p0","timestamp":"2025-12-31T00:00:00.000Z","cwd":"/p","instructions":"{}"}}}}"#,
            pad(400)
        ),
        format!(
            r#"{{"timestamp":"2026-01-01T00:00:08.000Z","type":"compacted","payload":{{"message":"{}","replacement_history":[]}}}}"#,
            pad(400)
        ),
    ];
    let text = lines.join("\n") + "\n";
    type Entry = (u64, u64, u64, bool, (u64, u64, [u64; 6], u64, EntryCounts));
    let read = |text: &str, filter: RoleFilter| -> (Vec<Entry>, Report) {
        let opts = SourceOptions::new().roles(filter);
        let p = PathBuf::from("rollout-2026-01-01T00-00-00-memo.jsonl");
        let mut src = Codex
            .open(Input::Bytes(text.as_bytes()), &p, &opts)
            .unwrap();
        let mut entries = Vec::new();
        while let Some(e) = src.next_entry().unwrap() {
            let (fp, line, byte, rec) = (e.fingerprint, e.line, e.byte, e.record.is_some());
            // The counts after each line.
            let r = src.report();
            let counts = (r.lines, r.records, r.roles, r.no_record, r.entries.clone());
            entries.push((fp, line, byte, rec, counts));
        }
        (entries, src.report().clone())
    };
    let (first, report) = read(&text, RoleFilter::NONE);
    assert_eq!(first.len(), 10);
    assert!(first.iter().all(|e| !e.3), "no record is built");
    assert_eq!(
        report.records, 5,
        "tool call, output, readable reasoning, prompt, compaction"
    );
    assert_eq!(report.no_record, 5);
    assert_eq!(report.filtered, 5);
    assert_eq!(
        report.roles,
        [1, 2, 1, 0, 0, 1],
        "user, assistant, tool result, system"
    );
    assert_eq!(report.entries.get("response_item/reasoning"), 2);
    assert_eq!(report.entries.get("response_item/function_call_output"), 1);
    assert_eq!(report.entries.get("session_meta"), 2);
    assert_eq!(report.entries.get("compacted"), 1);
    // Again: the four long lines are now known by their bytes.
    assert_eq!(
        read(&text, RoleFilter::NONE),
        (first.clone(), report.clone())
    );
    // In another file, after another first line: the same counts, the
    // entries one line and its bytes further on.
    let other = format!("{}\n{}", lines[1], text);
    let (shifted, again) = read(&other, RoleFilter::NONE);
    let skip = lines[1].len() as u64 + 1;
    let place = |v: &[Entry]| v.iter().map(|e| (e.0, e.1, e.2, e.3)).collect::<Vec<_>>();
    let moved: Vec<_> = place(&first)
        .into_iter()
        .map(|(fp, line, byte, rec)| (fp, line + 1, byte + skip, rec))
        .collect();
    assert_eq!(place(&shifted[1..]), moved);
    assert_eq!(again.records, report.records);
    assert_eq!(again.entries.get("turn_context"), 2);
    // Building records: the same entries and counts, none held back.
    let (built, all) = read(&text, RoleFilter::ALL);
    assert_eq!(built.iter().filter(|e| e.3).count(), 5);
    let counts = |v: &[Entry]| {
        v.iter()
            .map(|e| (e.0, e.1, e.2, e.4 .0, e.4 .1, e.4 .2, e.4 .4.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&built), counts(&first));
    assert_eq!((all.records, all.no_record, all.filtered), (5, 5, 0));
    assert_eq!(all.entries, report.entries);
    assert_eq!(all.roles, report.roles);
}

/// Issue 42: a `.zst` rollout whose compressed bytes are damaged fails
/// with an error that says it is a damaged zstd file and what to do, not
/// the decoder's bare words ("Unknown frame descriptor").
#[test]
fn a_damaged_zst_rollout_says_so() {
    let d = std::env::temp_dir().join(format!("mem-ingest-codex-zst-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let dir = d.join("sessions/2026/01/01");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("rollout-2026-01-01T00-00-00-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl.zst");
    // zstd's magic number, then a frame header no decoder accepts.
    std::fs::write(&f, b"\x28\xb5\x2f\xfd\xff\xff\xff\xff\xff\xff\xff\xff").unwrap();
    let out = common::run(&[&"stats", &"-q", &"--agent", &"codex", &d.join("sessions")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.lines().next().unwrap(),
        format!(
            "error: {}: a zstd file that is damaged (incomplete frame): restore it, or \
             decompress what is left of it (`zstd -d`) and read that",
            f.display()
        )
    );
    std::fs::remove_dir_all(d).unwrap();
}

// ---------------------------------------------------------------------------
// A subagent replaying its parent in the spawn's second (issue 41)

/// Total tokens by model.
type ByModel = Vec<(String, u64)>;

/// `stats --json` of the Codex home `home/codex`: `(files, records,
/// deduplicated, total tokens)`, and the total tokens by model.
fn family_stats(home: &Path, jobs: &str) -> ((u64, u64, u64, u64), ByModel) {
    let (code, v, err) =
        stats(bin(home).args(["stats", "--json", "-q", "--source", "codex", "--jobs", jobs]));
    assert_eq!(code, Some(0), "{err}");
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
    let mut models: ByModel = v["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_owned(),
                n(&m["total_tokens"]),
            )
        })
        .collect();
    models.sort();
    (
        (
            n(&v["files"]),
            n(&v["records"]),
            n(&v["deduplicated"]),
            n(&v["usage"]["total_tokens"]),
        ),
        models,
    )
}

/// The keys of the records `backfill` writes, sorted.
fn family_keys(home: &Path, jobs: &str) -> Vec<String> {
    let (recs, _) =
        json_lines(bin(home).args(["backfill", "-q", "--source", "codex", "--jobs", jobs]));
    let mut keys: Vec<String> = recs
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

/// The parent's seven records, and the subagent's own two.
const FAMILY_KEYS: [&str; 9] = [
    "c1:L17", "c1:L18", "p1:L12", "p1:L14", "p1:L15", "p1:L3", "p1:L5", "p1:L6", "p1:L7",
];

/// A subagent whose line 2 is its parent's `session_meta`, then the
/// parent's history with the timestamps rewritten into the spawn's second
/// ([`common::codex::same_second_family`]), with the parent's rollout in
/// the archive, sorting before the child's or after it: the replayed lines
/// are copies of the parent's (14 deduplicated), so the records are the
/// parent's seven and the child's own two, and the tokens the parent's
/// 4150 and the child's own 540, as ccusage counts them (its parent-match
/// rule; `conform_codex.rs` compares), with one job or two, the files
/// compressed or not.
#[test]
fn same_second_subagent_with_its_parent() {
    use common::codex::{write_family, ParentFile};
    // The two files as written, then compressed (`.jsonl.zst`).
    for (parent, zst) in [
        (ParentFile::Before, false),
        (ParentFile::After, false),
        (ParentFile::Before, true),
    ] {
        let home = tmpdir(&format!("same-second-{parent:?}-{zst}"));
        let (p, c) = write_family(&home.join("codex"), parent);
        if zst {
            for f in [p.unwrap(), c] {
                let text = std::fs::read(&f).unwrap();
                let to = f.with_extension("jsonl.zst");
                std::fs::write(to, zstd::encode_all(&text[..], 3).unwrap()).unwrap();
                std::fs::remove_file(f).unwrap();
            }
        }
        for jobs in ["1", "2"] {
            let (totals, models) = family_stats(&home, jobs);
            assert_eq!(totals, (2, 9, 14, 4150 + 540), "{parent:?}, --jobs {jobs}");
            assert_eq!(
                models,
                [
                    ("gpt-5".to_owned(), 1050),
                    ("gpt-5-codex".to_owned(), 3100),
                    ("gpt-5-mini".to_owned(), 540)
                ],
                "{parent:?}, --jobs {jobs}"
            );
            assert_eq!(
                family_keys(&home, jobs),
                FAMILY_KEYS,
                "{parent:?}, --jobs {jobs}"
            );
        }
        std::fs::remove_dir_all(home).unwrap();
    }
}

/// The same subagent with its parent's rollout absent: the replay's six
/// records are the child's (their text is nowhere else in the archive),
/// and its token counts are not counted (ccusage's rule for a child its
/// parent does not match: the file's first two counts with usage are at
/// most a second apart, so the leading run of such counts, three, are
/// the parent's): the child's own 540 tokens only.
#[test]
fn same_second_subagent_without_its_parent() {
    use common::codex::{write_family, ParentFile};
    let home = tmpdir("same-second-absent");
    write_family(&home.join("codex"), ParentFile::Absent);
    for jobs in ["1", "2"] {
        let (totals, models) = family_stats(&home, jobs);
        assert_eq!(totals, (1, 8, 3, 540), "--jobs {jobs}");
        assert_eq!(models, [("gpt-5-mini".to_owned(), 540)], "--jobs {jobs}");
        assert_eq!(
            family_keys(&home, jobs),
            ["c1:L13", "c1:L15", "c1:L17", "c1:L18", "c1:L4", "c1:L6", "c1:L7", "c1:L8"],
            "--jobs {jobs}"
        );
    }
    std::fs::remove_dir_all(home).unwrap();
}

/// Across runs with a state: the parent first, its subagent in the next
/// run (the replay copies of what the state's lineage holds); and the
/// subagent first, alone, its parent in the next run (the replay's
/// records were the child's, and stay so: the parent's lines are then
/// records of their own, as said in the README; the tokens are
/// ccusage's either way).
#[test]
fn same_second_subagent_across_runs() {
    use common::codex::{write_family, ParentFile};
    let home = tmpdir("same-second-runs");
    let codex = home.join("codex");
    let (parent, child) = write_family(&codex, ParentFile::Before);
    let parent = parent.unwrap();
    let (parent_text, child_text) = common::codex::same_second_family();
    let state = home.join("state");
    let run = || {
        let (recs, err) = json_lines(
            bin(&home)
                .args(["backfill", "-q", "--source", "codex", "--state"])
                .arg(&state),
        );
        let (code, v, e) = stats(
            bin(&home)
                .args(["stats", "--json", "-q", "--source", "codex", "--state"])
                .arg(home.join("stats.state")),
        );
        assert_eq!(code, Some(0), "{e}");
        (recs.len(), v["usage"]["total_tokens"].as_u64(), err)
    };
    std::fs::remove_file(&child).unwrap();
    assert_eq!(run().0, 7);
    std::fs::write(&child, &child_text).unwrap();
    let (written, tokens, err) = run();
    assert_eq!((written, tokens), (2, Some(4150 + 540)), "{err}");
    // The subagent first.
    std::fs::remove_dir_all(&home).unwrap();
    std::fs::create_dir_all(child.parent().unwrap()).unwrap();
    std::fs::write(&child, &child_text).unwrap();
    assert_eq!(run().0, 8);
    std::fs::write(&parent, &parent_text).unwrap();
    let (written, tokens, err) = run();
    assert_eq!((written, tokens), (7, Some(4150 + 540)), "{err}");
    std::fs::remove_dir_all(home).unwrap();
}

/// A state saved before same-second replays were matched with their
/// parent (`fixtures/state-v8-codex-same-second.state`: `backfill
/// --source codex --state` of [`common::codex::same_second_family`], the
/// parent's file before the child's, by the release before, which wrote
/// the replay's six records twice, 15 in all). Copies of the files (new to
/// the state by their inodes, read whole) are then every line a copy its
/// lineage holds, whichever file sorts first and with the parent absent:
/// no record is written again. Matching a replay with its parent changes
/// no line's fingerprint, only which lines are compared, so the state's
/// fingerprints are those this release makes. (With `-L`: the state was
/// saved when links were always followed.)
#[test]
fn a_state_saved_before_same_second_matching_gains_no_duplicate() {
    use common::codex::{write_family, ParentFile};
    let home = tmpdir("same-second-old-state");
    let old = home.join("old.state");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(root.join("fixtures/state-v8-codex-same-second.state"), &old).unwrap();
    for (parent, lines) in [
        (ParentFile::Before, 16 + 19),
        (ParentFile::After, 16 + 19),
        (ParentFile::Absent, 19),
    ] {
        let codex = home.join(format!("{parent:?}"));
        write_family(&codex, parent);
        let (records, err) = json_lines(
            bin(&home)
                .args(["backfill", "-L", "--source", "codex", "--state"])
                .arg(&old)
                .arg(&codex),
        );
        assert_eq!(records.len(), 0, "{parent:?}: {err}");
        assert!(
            err.contains(&format!("0 records (0 written), {lines} deduplicated")),
            "{parent:?}: {err}"
        );
    }
    std::fs::remove_dir_all(home).unwrap();
}

/// The running context of a read of `text` from its start up to `at`.
fn context_read_to(path: &Path, text: &[u8], at: usize, opts: &SourceOptions) -> Vec<u8> {
    let mut src = Codex.open(Input::Bytes(&text[..at]), path, opts).unwrap();
    while src.next_entry().unwrap().is_some() {}
    src.running_context()
}

/// At every line start, [`Format::context_before`] (reading back from
/// there) says what a source that read the file from its start says there:
/// the provider of the first `session_meta` (not a replayed parent's), the
/// model and cwd of the last `turn_context` naming them (a model only in
/// the collaboration mode, a cwd alone), the last cumulative total (a count
/// with no info, or only a last, leaves it), the messages waiting for
/// their twin since the last `task_started` (more than the eight kept, in
/// both orders), and no more than that: a damaged line, a line longer than
/// the maximum, an escaped type, a byte-order mark, blank lines, long
/// lines a look back reads in several chunks. Within a reach too short to
/// find them all: `None` (the part before says it).
#[test]
fn looking_back_finds_the_context_a_read_from_the_start_has() {
    let long = "l".repeat(40 << 10);
    let over = "o".repeat(80 << 10);
    let mut lines = vec![
        "\u{feff}".to_owned()
            + r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a","model_provider":"azure"}}"#,
        event_user("2026-01-01T00:00:00.500Z", "before any start"),
        r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"task_started"}}"#.to_owned(),
        String::new(),
        r#"{"timestamp":"2026-01-01T00:00:01.100Z","type":"turn_context","payload":{"collaboration_mode":{"settings":{"model":"m-collab"}}}}"#.to_owned(),
        user("2026-01-01T00:00:02.000Z", "hello"),
        r#"{"timestamp":"2026-01-01T00:00:02.500Z","type":"session_meta","payload":{"id":"p0","cwd":"/parent","model_provider":"other"}}"#.to_owned(),
        event_user("2026-01-01T00:00:02.001Z", "hello"),
        r#"{"timestamp":"2026-01-01T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":null}}"#.to_owned(),
        count("2026-01-01T00:00:04.000Z", [100, 40, 10, 5, 110], None),
        r#"{"timestamp":"2026-01-01T00:00:04.500Z","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":1,"reasoning_output_tokens":0,"total_tokens":2}}}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:05.000Z","type":"turn_context","payload":{"cwd":"/only-cwd"}}"#.to_owned(),
        r#"{"timestamp":"2026-01-01T00:00:05.500Z","type":"turn_context","payload":{"cwd":"/damaged","model":"#.to_owned(),
        format!(r#"{{"timestamp":"2026-01-01T00:00:06.000Z","type":"turn_context","payload":{{"cwd":"/over","model":"m-over","x":"{over}"}}}}"#),
        r#"{"timestamp":"2026-01-01T00:00:07.000Z","type":"\u0074urn_context","payload":{"cwd":"/esc","model":"m-\u00e9"}}"#.to_owned(),
        format!(r#"{{"timestamp":"2026-01-01T00:00:08.000Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"c","output":"{long}"}}}}"#),
        r#"{"timestamp":"2026-01-01T00:00:09.000Z","type":"event_msg","payload":{"type":"task_started"}}"#.to_owned(),
    ];
    // Ten messages without their twins (two dropped), then some twins.
    for k in 0..10 {
        lines.push(agent(
            &format!("2026-01-01T00:00:1{k}.000Z"),
            &format!("a{k}"),
        ));
    }
    lines.push(event_user("2026-01-01T00:00:20.000Z", "late"));
    lines.push(user("2026-01-01T00:00:20.001Z", "late"));
    lines.push(r#"{"timestamp":"2026-01-01T00:00:21.000Z","type":"event_msg","payload":{"type":"agent_message","message":"a9"}}"#.to_owned());
    lines.push(r#"{"timestamp":"2026-01-01T00:00:21.500Z","type":"event_msg","payload":{"type":"agent_message","message":"a0"}}"#.to_owned());
    lines.push(count(
        "2026-01-01T00:00:22.000Z",
        [300, 140, 30, 5, 330],
        None,
    ));
    lines.push(turn("2026-01-01T00:00:23.000Z", "/z", "m-z"));
    lines.push(format!(r#"{{"timestamp":"2026-01-01T00:00:24.000Z","type":"response_item","payload":{{"type":"function_call_output","call_id":"d","output":"{long}"}}}}"#));
    lines.push(String::new());
    let text = lines.join("\n");
    let bytes = text.as_bytes();
    let dir = common::tmpdir("codex", "look-back");
    let path = dir.join("rollout-2026-01-01T00-00-00-t1.jsonl");
    std::fs::write(&path, bytes).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let opts = SourceOptions::new().max_line(64 << 10);
    let header = Codex
        .open(Input::Bytes(bytes), &path, &opts)
        .unwrap()
        .header()
        .unwrap()
        .clone();
    let starts: Vec<usize> = memchr::memchr_iter(b'\n', bytes).map(|i| i + 1).collect();
    let mut distinct = std::collections::BTreeSet::new();
    for &at in &starts[..starts.len() - 1] {
        let want = context_read_to(&path, bytes, at, &opts);
        let found = Codex
            .context_before(&file, &header, at as u64, None, &opts)
            .unwrap();
        assert_eq!(found.as_ref(), Some(&want), "looking back from {at}");
        distinct.insert(want);
    }
    // The contexts differ along the file: the test sees each change.
    assert!(distinct.len() >= 15, "{} distinct contexts", distinct.len());

    // At the end: the last task start is behind a 40 KiB output. A reach
    // of 1 KiB ends inside it (found nothing); 64 KiB finds it.
    let end = bytes.len();
    let want = context_read_to(&path, bytes, end, &opts);
    for (reach, found) in [(1 << 10, None), (64 << 10, Some(want))] {
        assert_eq!(
            Codex
                .context_before(&file, &header, end as u64, Some(reach), &opts)
                .unwrap(),
            found,
            "reach {reach}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
