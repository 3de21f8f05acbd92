//! Codex rollouts written by the tests: a thread, and a subagent of it
//! that replays its history with the timestamps rewritten into the
//! spawn's second (issue 41), in a Codex home with the parent's file
//! sorting before the child's, after it, or absent.

use std::fs;
use std::path::{Path, PathBuf};

/// The parent thread's id.
pub const PARENT: &str = "p1";
/// The subagent's id.
pub const CHILD: &str = "c1";

fn usage(t: [u64; 5]) -> String {
    format!(
        r#"{{"input_tokens":{},"cached_input_tokens":{},"output_tokens":{},"reasoning_output_tokens":{},"total_tokens":{}}}"#,
        t[0], t[1], t[2], t[3], t[4]
    )
}

/// A `token_count` event: a cumulative total, and a last usage or none.
pub fn count(ts: &str, total: [u64; 5], last: Option<[u64; 5]>) -> String {
    let last = last.map_or(String::new(), |l| {
        format!(r#","last_token_usage":{}"#, usage(l))
    });
    format!(
        r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{}{last}}},"rate_limits":{{"primary":{{"used_percent":3.0}}}}}}}}"#,
        usage(total)
    )
}

fn turn(ts: &str, model: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"turn_context","payload":{{"cwd":"/w","approval_policy":"never","model":"{model}"}}}}"#
    )
}

fn message(ts: &str, role: &str, text: &str) -> String {
    let kind = if role == "user" {
        "input_text"
    } else {
        "output_text"
    };
    format!(
        r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"{role}","content":[{{"type":"{kind}","text":"{text}"}}]}}}}"#
    )
}

fn event(ts: &str, item: &str, text: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"{item}","message":"{text}"}}}}"#
    )
}

fn call(ts: &str, name: &str, args: &str, id: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call","name":"{name}","arguments":"{args}","call_id":"{id}"}}}}"#
    )
}

fn output(ts: &str, id: &str, text: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call_output","call_id":"{id}","output":"{text}"}}}}"#
    )
}

fn meta(ts: &str, id: &str, source: &str) -> String {
    format!(
        r#"{{"timestamp":"{ts}","type":"session_meta","payload":{{"id":"{id}","timestamp":"{ts}","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.80.0","source":{source},"model_provider":"openai"}}}}"#
    )
}

/// The parent's lines up to the spawn (14), and after it (2).
fn parent_lines() -> (Vec<String>, Vec<String>) {
    let d = "2026-01-01T10:00";
    let before = vec![
        meta(&format!("{d}:00.000Z"), PARENT, r#""cli""#),
        turn(&format!("{d}:01.000Z"), "gpt-5"),
        message(&format!("{d}:02.000Z"), "user", "parent question"),
        event(&format!("{d}:02.001Z"), "user_message", "parent question"),
        message(&format!("{d}:03.000Z"), "assistant", "parent answer"),
        call(&format!("{d}:04.000Z"), "exec_command", "{\\\"cmd\\\":\\\"ls\\\"}", "call-1"),
        output(&format!("{d}:05.000Z"), "call-1", "src tests"),
        r#"{"timestamp":"2026-01-01T10:00:06.000Z","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":3.0}}}}"#.to_owned(),
        count(&format!("{d}:07.000Z"), [1000, 200, 50, 10, 1050], Some([1000, 200, 50, 10, 1050])),
        // Repeated at once: nothing.
        count(&format!("{d}:07.500Z"), [1000, 200, 50, 10, 1050], Some([1000, 200, 50, 10, 1050])),
        turn(&format!("{d}:30.000Z"), "gpt-5-codex"),
        message(&format!("{d}:31.000Z"), "user", "spawn a helper"),
        // No last: the delta of the totals, 2070.
        count(&format!("{d}:40.000Z"), [3000, 1200, 120, 20, 3120], None),
        call(&format!("{d}:50.000Z"), "spawn_agent", "{\\\"task\\\":\\\"helper task\\\"}", "spawn-1"),
    ];
    let after = vec![
        message("2026-01-01T10:01:30.000Z", "assistant", "helper spawned"),
        count(
            "2026-01-01T10:01:40.000Z",
            [4000, 1500, 150, 20, 4150],
            Some([1000, 300, 30, 0, 1030]),
        ),
    ];
    (before, after)
}

/// The parent rollout `p1` (16 lines, 7 records, 4150 tokens: 1050 of
/// `gpt-5`, 3100 of `gpt-5-codex`), and its subagent `c1`, spawned at
/// 10:01:00: its own `session_meta`
/// (`source.subagent.thread_spawn.parent_thread_id`), the parent's 14
/// lines before the spawn (the parent's `session_meta` first) with their
/// timestamps rewritten to 10:01:00.001-.014, then a turn of its own
/// (lines 16-19: a prompt and an answer, 2 records, and a count of 540
/// tokens of `gpt-5-mini`).
pub fn same_second_family() -> (String, String) {
    let (before, after) = parent_lines();
    let mut parent = before.join("\n");
    parent.push('\n');
    parent.push_str(&after.join("\n"));
    parent.push('\n');
    let source =
        format!(r#"{{"subagent":{{"thread_spawn":{{"parent_thread_id":"{PARENT}","depth":1}}}}}}"#);
    let mut child = vec![meta("2026-01-01T10:01:00.000Z", CHILD, &source)];
    for (i, l) in before.iter().enumerate() {
        let rest = &l[l.find("Z\",").expect("a timestamp") + 1..];
        child.push(format!(
            r#"{{"timestamp":"2026-01-01T10:01:00.{:03}Z{rest}"#,
            i + 1
        ));
    }
    child.extend([
        turn("2026-01-01T10:01:02.000Z", "gpt-5-mini"),
        message("2026-01-01T10:01:03.000Z", "user", "helper task"),
        message("2026-01-01T10:01:04.000Z", "assistant", "helper done"),
        count(
            "2026-01-01T10:01:05.000Z",
            [3500, 1200, 160, 20, 3660],
            Some([500, 0, 40, 0, 540]),
        ),
    ]);
    let mut child = child.join("\n");
    child.push('\n');
    (parent, child)
}

/// A fork `f1` of the parent rollout `p1` of [`same_second_family`]
/// (`session_meta.forked_from_id`): its own `session_meta`, the parent's
/// 16 lines as they are, then a prompt and a count of its own (220 tokens
/// of `gpt-5-codex`). Alone, it counts the parent's 4150 but for the
/// leading run of counts a second apart (1050, ccusage's rule for a copy
/// whose parent is absent): 3100 + 220; with its parent, the parent's 4150
/// are the parent's and its own 220 its own.
pub fn fork_of_parent() -> String {
    let (parent, _) = same_second_family();
    let mut fork = meta("2026-01-01T11:00:00.000Z", "f1", r#""cli""#);
    fork = fork.replace(
        r#""source":"cli""#,
        &format!(r#""source":"cli","forked_from_id":"{PARENT}""#),
    );
    fork.push('\n');
    fork.push_str(&parent);
    fork.push_str(&message(
        "2026-01-01T11:00:01.000Z",
        "user",
        "forked question",
    ));
    fork.push('\n');
    fork.push_str(&count(
        "2026-01-01T11:00:02.000Z",
        [4200, 1500, 170, 20, 4370],
        Some([200, 0, 20, 0, 220]),
    ));
    fork.push('\n');
    fork
}

/// Where the parent's file is, beside the child's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentFile {
    /// In `sessions/`, sorting before the child's (it started first).
    Before,
    /// In `sessions/`, with the child archived (`archived_sessions/`
    /// sorts before `sessions/`).
    After,
    /// Not in the archive.
    Absent,
}

/// Writes [`same_second_family`] into the Codex home `codex`: the paths
/// of the parent's file (`None` when absent) and the child's.
pub fn write_family(codex: &Path, parent: ParentFile) -> (Option<PathBuf>, PathBuf) {
    let (p, c) = same_second_family();
    let day = "2026/01/01";
    let child_root = match parent {
        ParentFile::After => "archived_sessions",
        _ => "sessions",
    };
    let child = codex
        .join(child_root)
        .join(day)
        .join(format!("rollout-2026-01-01T10-01-00-{CHILD}.jsonl"));
    fs::create_dir_all(child.parent().unwrap()).unwrap();
    fs::write(&child, c).unwrap();
    let parent_path = (parent != ParentFile::Absent).then(|| {
        let path = codex
            .join("sessions")
            .join(day)
            .join(format!("rollout-2026-01-01T10-00-00-{PARENT}.jsonl"));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, p).unwrap();
        path
    });
    (parent_path, child)
}
