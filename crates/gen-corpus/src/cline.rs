//! Cline data folders (`--format cline`): the task and session files of
//! `shared/spec/cline-format.md`, both generations, deterministic from the
//! seed.
//!
//! ```text
//! DIR/sessions/<sid>/<sid>.json                  the manifest (cwd, started_at, title)
//! DIR/sessions/<sid>/<sid>.messages.json         the transcript (contract v1)
//! DIR/sessions/<sid>/<agentId>.messages.json     a subagent's transcript
//! DIR/sessions/<sid>/<sid>.compaction.json       compaction state (never read)
//! DIR/sessions/<sid>/<sid>.messages.json.tmp.<ms>.<rand>.json   a stray temp file (never read)
//! DIR/tasks/<taskId>/api_conversation_history.json   a legacy task's transcript
//! DIR/tasks/<taskId>/ui_messages.json            its UI log (never read)
//! DIR/state/taskHistory.json                     the legacy tasks' index (their cwd)
//! ```
//!
//! DIR is a Cline data folder (`CLINE_DATA_DIR`). Every file is one JSON
//! document, as Cline rewrites it whole (here written once). SDK files are
//! indented with tabs, as the samples are; legacy files are compact.
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - 75% of documents are SDK sessions, 25% legacy tasks. Projects: four
//!   paths, one a task's cwd unknown 10% of the time (no `taskHistory`
//!   entry).
//! - An SDK session: turns of a user prompt (`ts` 90%, an expanded `@file`
//!   block 10%), then 1-5 assistant messages, each but the last with a
//!   `tool_use` and its `tool_result` user message (`content` a string
//!   70%, a list of text parts 30%, `is_error` 4%); a `thinking` block 30%.
//!   Each assistant message has `modelInfo` and, 95% of the time,
//!   `metrics` (`inputTokens` counting the cache reads and writes,
//!   `outputTokens`, `cacheReadTokens` the context before, 80%,
//!   `cacheWriteTokens` 25%, `cost`). A compaction summary (a user message
//!   with `metadata.kind: "compaction"` and a cumulative `usageBefore`,
//!   never counted) after 2% of turns past the fifth (and the first
//!   session's first). A subagent's file
//!   (`agent: "subagent"`, 1-3 assistant messages) for 3% of turns. A
//!   compaction copy of the transcript's first messages (10% of sessions)
//!   and a stray temp file (2%) lie beside it.
//! - A legacy task (`taskId` its start in epoch ms): half of the shape
//!   before v3.40 (`role` and `content` only: the first prompt in
//!   `<task>`, `<environment_details>` blocks, user content a string 20%,
//!   XML-style tool calls in the assistant's text, their results as user
//!   text), half of v3.40's (`id` and `ts`, `modelInfo` `{modelId,
//!   providerId, mode}`, `metrics` `{tokens: {prompt, completion,
//!   cached}, cost}` on assistant messages, native `tool_use` and
//!   `tool_result` blocks).
//! - Tool results: 0.2-3 KB 80%, 3-24 KB 18%, 24-128 KB 2%.
//!
//! Forks (`metadata.fork`) are not generated.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2026-03-01T00:00:00Z.
const EPOCH_MS: i64 = 1_772_323_200_000;
const DAY_MS: i64 = 86_400_000;

const MODELS: [(&str, &str, &str); 3] = [
    ("claude-sonnet-4-6", "anthropic", "claude-sonnet-4"),
    ("anthropic/claude-opus-4.8-fast", "cline", "claude-opus"),
    ("gpt-5.1-codex", "openai", "gpt-5"),
];
const PROJECTS: [&str; 4] = [
    "/home/dev/api",
    "/home/dev/web app",
    "/Users/example/dev/cline",
    "/srv/projects/data-pipeline",
];
const TOOLS: [&str; 5] = [
    "read_files",
    "editor",
    "run_commands",
    "search_codebase",
    "fetch_web_content",
];
const XML_TOOLS: [&str; 4] = [
    "read_file",
    "execute_command",
    "replace_in_file",
    "search_files",
];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    sessions: u64,
    subagents: u64,
    tasks: u64,
    old_tasks: u64,
    messages: u64,
    turns: u64,
    responses: u64,
    with_metrics: u64,
    compactions: u64,
    unread: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} documents ({} sessions, {} subagents, {} legacy tasks, {} \
             of them before v3.40), {:.1} MB, {} messages, {} turns, {} assistant messages ({} \
             with metrics), {} compaction summaries, {} files not to read, in {secs:.1}s",
            self.sessions + self.subagents + self.tasks,
            self.sessions,
            self.subagents,
            self.tasks,
            self.old_tasks,
            self.bytes as f64 / MB as f64,
            self.messages,
            self.turns,
            self.responses,
            self.with_metrics,
            self.compactions,
            self.unread,
        );
    }
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
}

/// Compact JSON `json` indented with `indent`, as `JSON.stringify(v,
/// null, indent)` writes it (empty lists and objects stay `[]` and `{}`).
pub(crate) fn pretty(json: &str, indent: &str) -> String {
    let b = json.as_bytes();
    let mut out = String::with_capacity(json.len() + json.len() / 4);
    let mut depth = 0usize;
    let mut start = 0;
    let mut i = 0;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    };
    while i < b.len() {
        match b[i] {
            b'"' => {
                let mut j = i + 1;
                while b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                i = j + 1;
                continue;
            }
            b'{' | b'[' => {
                out.push_str(&json[start..=i]);
                start = i + 1;
                if matches!(b.get(i + 1), Some(b'}' | b']')) {
                    out.push(b[i + 1] as char);
                    start = i + 2;
                    i += 2;
                    continue;
                }
                depth += 1;
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                out.push_str(&json[start..i]);
                depth -= 1;
                newline(&mut out, depth);
                out.push(b[i] as char);
                start = i + 1;
            }
            b',' => {
                out.push_str(&json[start..=i]);
                start = i + 1;
                newline(&mut out, depth);
            }
            b':' => {
                out.push_str(&json[start..=i]);
                out.push(' ');
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push_str(&json[start..]);
    out
}

/// A tool result's size: 0.2-3 KB 80%, 3-24 KB 18%, 24-128 KB 2%.
fn result_size(rng: &mut Rng) -> usize {
    let r = rng.below(100);
    (if r < 80 {
        rng.range(200, 3_000)
    } else if r < 98 {
        rng.range(3_000, 24_000)
    } else {
        rng.range(24_000, 128_000)
    }) as usize
}

fn short_id(rng: &mut Rng) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    (0..8).map(|_| A[rng.below(64) as usize] as char).collect()
}

/// An SDK session's messages and what it needs beside them.
struct Sdk {
    messages: Vec<String>,
    subagents: Vec<(String, Vec<String>)>,
    bytes: u64,
}

/// One assistant message of an SDK transcript, its tool call if any.
fn sdk_assistant(
    rng: &mut Rng,
    ms: i64,
    model: (&str, &str, &str),
    context: &mut u64,
    call: bool,
    stats: &mut Stats,
) -> (String, Option<(String, &'static str)>) {
    stats.responses += 1;
    let mut blocks = Vec::new();
    if rng.pct(30) {
        let n = rng.range(80, 900) as usize;
        blocks.push(format!(
            r#"{{"type":"thinking","thinking":{}}}"#,
            js(&prose(rng, n))
        ));
    }
    let n = rng.range(30, 1_500) as usize;
    blocks.push(format!(
        r#"{{"type":"text","text":{}}}"#,
        js(&prose(rng, n))
    ));
    let tool = if call {
        let id = format!("toolu_01{}", uuid(rng).replace('-', "")[..22].to_owned());
        let name = rng.pick(&TOOLS);
        blocks.push(format!(
            r#"{{"type":"tool_use","id":"{id}","name":"{name}","input":{{"path":"src/mod_{}.rs","query":{}}}}}"#,
            rng.below(40),
            js(&prose(rng, 40))
        ));
        Some((id, name))
    } else {
        None
    };
    let metrics = if rng.pct(95) {
        stats.with_metrics += 1;
        let output = rng.range(10, 2_000);
        let read = if rng.pct(80) { *context } else { 0 };
        let write = if rng.pct(25) {
            rng.range(200, 4_000)
        } else {
            0
        };
        let fresh = rng.range(1, 3_000);
        let input = read + write + fresh;
        *context = input + output;
        format!(
            r#","metrics":{{"inputTokens":{input},"outputTokens":{output},"cacheReadTokens":{read},"cacheWriteTokens":{write},"cost":{}.{:05}}}"#,
            rng.below(2),
            rng.below(100_000)
        )
    } else {
        String::new()
    };
    let (id, provider, family) = model;
    let m = format!(
        r#"{{"id":"msg_{}","role":"assistant","ts":{ms},"modelInfo":{{"id":"{id}","provider":"{provider}","family":"{family}"}}{metrics},"content":[{}]}}"#,
        short_id(rng),
        blocks.join(",")
    );
    (m, tool)
}

/// A tool's result as an SDK user message.
fn sdk_result(rng: &mut Rng, ms: i64, call: &(String, &str)) -> String {
    let n = result_size(rng);
    let out = tool_output(rng, n);
    let content = if rng.pct(70) {
        js(&out)
    } else {
        format!(r#"[{{"type":"text","text":{}}}]"#, js(&out))
    };
    let error = if rng.pct(4) {
        r#","is_error":true"#
    } else {
        ""
    };
    format!(
        r#"{{"id":"msg_{}_tool_{}","role":"user","ts":{ms},"content":[{{"type":"tool_result","tool_use_id":"{}","name":"{}","content":{content}{error}}}]}}"#,
        short_id(rng),
        call.0,
        call.0,
        call.1
    )
}

/// An SDK session's messages of about `size` bytes.
/// The first session has a compaction summary after its first turn.
fn sdk_session(rng: &mut Rng, size: u64, start: i64, first: bool, stats: &mut Stats) -> Sdk {
    let model = rng.pick(&MODELS);
    let mut s = Sdk {
        messages: Vec::new(),
        subagents: Vec::new(),
        bytes: 0,
    };
    let mut ms = start;
    let mut context = rng.range(2_000, 9_000);
    let mut turn = 0u64;
    let mut spent = (0u64, 0u64);
    let prompt_id = short_id(rng);
    while s.bytes < size {
        turn += 1;
        stats.turns += 1;
        ms += rng.range(20_000, 600_000) as i64;
        let n = rng.range(40, 600) as usize;
        let mut blocks = vec![format!(
            r#"{{"type":"text","text":{}}}"#,
            js(&prose(rng, n))
        )];
        if rng.pct(10) {
            let n = rng.range(500, 6_000) as usize;
            blocks.push(format!(
                r#"{{"type":"file","path":"/home/dev/src/mod_{}.rs","content":{}}}"#,
                rng.below(40),
                js(&tool_output(rng, n))
            ));
        }
        let ts = if rng.pct(90) {
            format!(r#","ts":{ms}"#)
        } else {
            String::new()
        };
        let m = format!(
            r#"{{"id":"msg_{prompt_id}_{turn}","role":"user"{ts},"content":[{}]}}"#,
            blocks.join(",")
        );
        s.bytes += m.len() as u64;
        s.messages.push(m);
        let responses = rng.range(1, 5);
        for r in 0..responses {
            ms += rng.range(2_000, 40_000) as i64;
            let call = r + 1 < responses;
            let before = context;
            let (m, tool) = sdk_assistant(rng, ms, model, &mut context, call, stats);
            spent.0 += context.saturating_sub(before);
            spent.1 += 1;
            s.bytes += m.len() as u64;
            s.messages.push(m);
            if let Some(t) = tool {
                ms += rng.range(100, 20_000) as i64;
                let m = sdk_result(rng, ms, &t);
                s.bytes += m.len() as u64;
                s.messages.push(m);
            }
        }
        if rng.pct(3) {
            // A subagent: its own transcript in this session's folder.
            let agent = format!("{}_{}", ms + 7, short_id(rng).to_lowercase());
            let mut sub = Vec::new();
            let mut sub_context = rng.range(1_000, 4_000);
            let n = rng.range(60, 400) as usize;
            sub.push(format!(
                r#"{{"id":"msg_{}_1","role":"user","ts":{ms},"content":[{{"type":"text","text":{}}}]}}"#,
                short_id(rng),
                js(&prose(rng, n))
            ));
            let k = rng.range(1, 3);
            for i in 0..k {
                let call = i + 1 < k;
                let (m, tool) =
                    sdk_assistant(rng, ms + 1 + i as i64, model, &mut sub_context, call, stats);
                sub.push(m);
                if let Some(t) = tool {
                    sub.push(sdk_result(rng, ms + 2 + i as i64, &t));
                }
            }
            s.subagents.push((agent, sub));
        }
        if (turn > 5 && rng.pct(2)) || (first && turn == 1) {
            stats.compactions += 1;
            let n = rng.range(300, 2_000) as usize;
            let m = format!(
                r#"{{"id":"msg_{}","role":"user","ts":{ms},"content":[{{"type":"text","text":{}}}],"metadata":{{"kind":"compaction","reason":"auto","displayRole":"system","messagesRemoved":{},"usageBefore":{{"inputTokens":{},"outputTokens":{}}}}}}}"#,
                short_id(rng),
                js(&prose(rng, n)),
                s.messages.len(),
                spent.0,
                spent.1 * 300
            );
            s.bytes += m.len() as u64;
            s.messages.push(m);
        }
    }
    s
}

/// A legacy task's messages (compact JSON) of about `size` bytes, of the
/// shape before v3.40 when `old`.
fn legacy_task(rng: &mut Rng, size: u64, start: i64, old: bool, stats: &mut Stats) -> Vec<String> {
    let (model, provider, _) = rng.pick(&MODELS);
    let mut messages = Vec::new();
    let mut bytes = 0u64;
    let mut ms = start;
    let mut context = rng.range(2_000, 9_000);
    let mut turn = 0u64;
    let env = |rng: &mut Rng, ms: i64| {
        format!(
            "<environment_details>\n# VSCode Visible Files\nsrc/mod_{}.rs\n\n# Current Time\n{}\n</environment_details>",
            rng.below(40),
            iso(ms)
        )
    };
    while bytes < size {
        turn += 1;
        stats.turns += 1;
        ms += rng.range(20_000, 600_000) as i64;
        let n = rng.range(40, 600) as usize;
        let text = prose(rng, n);
        let text = if turn == 1 {
            format!("<task>\n{text}\n</task>")
        } else {
            format!("<feedback>\n{text}\n</feedback>")
        };
        let m = if old && rng.pct(20) {
            format!(r#"{{"role":"user","content":{}}}"#, js(&text))
        } else {
            format!(
                r#"{{"role":"user","content":[{{"type":"text","text":{}}},{{"type":"text","text":{}}}]}}"#,
                js(&text),
                js(&env(rng, ms))
            )
        };
        bytes += m.len() as u64;
        messages.push(m);
        let responses = rng.range(1, 5);
        for r in 0..responses {
            stats.responses += 1;
            ms += rng.range(2_000, 40_000) as i64;
            let call = r + 1 < responses;
            let n = rng.range(30, 1_500) as usize;
            let said = prose(rng, n);
            let file = format!("src/mod_{}.rs", rng.below(40));
            let n = result_size(rng);
            let out = tool_output(rng, n);
            let (m, result) = if old {
                let tool = rng.pick(&XML_TOOLS);
                let text = if call {
                    format!("<thinking>\n{said}\n</thinking>\n\n<{tool}>\n<path>{file}</path>\n</{tool}>")
                } else {
                    format!(
                        "<attempt_completion>\n<result>\n{said}\n</result>\n</attempt_completion>"
                    )
                };
                let m = format!(
                    r#"{{"role":"assistant","content":[{{"type":"text","text":{}}}]}}"#,
                    js(&text)
                );
                let result = format!(
                    r#"{{"role":"user","content":[{{"type":"text","text":{}}},{{"type":"text","text":{}}}]}}"#,
                    js(&format!("[{tool} for '{file}'] Result:")),
                    js(&out)
                );
                (m, result)
            } else {
                stats.with_metrics += 1;
                let id = format!("toolu_01{}", uuid(rng).replace('-', "")[..22].to_owned());
                let name = rng.pick(&XML_TOOLS);
                let mut blocks = vec![format!(r#"{{"type":"text","text":{}}}"#, js(&said))];
                if call {
                    blocks.push(format!(
                        r#"{{"type":"tool_use","id":"{id}","name":"{name}","input":{{"path":"{file}"}}}}"#
                    ));
                }
                let output = rng.range(10, 2_000);
                let cached = if rng.pct(80) { context } else { 0 };
                let prompt = cached + rng.range(1, 3_000);
                context = prompt + output;
                let m = format!(
                    r#"{{"role":"assistant","content":[{}],"id":"msg_01{}","ts":{ms},"modelInfo":{{"modelId":"{model}","providerId":"{provider}","mode":"{}"}},"metrics":{{"tokens":{{"prompt":{prompt},"completion":{output},"cached":{cached}}},"cost":0.{:05}}}}}"#,
                    blocks.join(","),
                    uuid(rng).replace('-', "")[..24].to_owned(),
                    if rng.pct(20) { "plan" } else { "act" },
                    rng.below(100_000)
                );
                let result = format!(
                    r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":{}}}],"ts":{}}}"#,
                    js(&out),
                    ms + 1
                );
                (m, result)
            };
            bytes += m.len() as u64;
            messages.push(m);
            if call {
                bytes += result.len() as u64;
                messages.push(result);
            }
        }
    }
    messages
}

fn write(path: &Path, text: &str, stats: &mut Stats) -> io::Result<()> {
    fs::create_dir_all(path.parent().expect("has a parent"))?;
    let mut f = fs::File::create(path)?;
    f.write_all(text.as_bytes())?;
    stats.bytes += text.len() as u64;
    Ok(())
}

/// A transcript file of the SDK contract.
fn transcript(id: &str, agent: &str, ms: i64, messages: &[String]) -> String {
    pretty(
        &format!(
            r#"{{"version":1,"updated_at":"{}","agent":"{agent}","sessionId":"{id}","messages":[{}]}}"#,
            iso(ms),
            messages.join(",")
        ),
        "\t",
    )
}

/// Writes a Cline data folder of about `total_mb` MB under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0x636c_696e);
    // Documents are planned at 70% of the total: the indentation, the
    // last turn past a document's size, subagents and the files not read
    // make up the rest (measured: 20 MB asked, 19.8 written, seed 1).
    let total = (total_mb * 0.70 * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 2_000);
    let mut stats = Stats::default();
    let mut history = Vec::new();
    for (i, size) in sizes.into_iter().enumerate() {
        let start = EPOCH_MS + (i as i64 % 90) * DAY_MS + rng.below(DAY_MS as u64 / 2) as i64;
        let cwd = if i < PROJECTS.len() {
            PROJECTS[i]
        } else {
            rng.pick(&PROJECTS)
        };
        // The first document is a session, the next two legacy tasks of
        // each shape: every shape in a small archive.
        let legacy = i == 1 || i == 2 || (i > 2 && rng.pct(25));
        if legacy {
            let old = i == 1 || (i > 2 && rng.pct(50));
            let messages = legacy_task(&mut rng, size, start, old, &mut stats);
            let task = start.to_string();
            let folder = dir.join("tasks").join(&task);
            write(
                &folder.join("api_conversation_history.json"),
                &format!("[{}]", messages.join(",")),
                &mut stats,
            )?;
            stats.tasks += 1;
            stats.messages += messages.len() as u64;
            stats.old_tasks += u64::from(old);
            write(
                &folder.join("ui_messages.json"),
                &format!(
                    r#"[{{"ts":{start},"type":"say","say":"task","text":"task"}},{{"ts":{},"type":"say","say":"api_req_started","text":"{{\"request\":\"...\",\"tokensIn\":1000,\"tokensOut\":10,\"cacheWrites\":0,\"cacheReads\":0,\"cost\":0.01}}"}}]"#,
                    start + 1
                ),
                &mut stats,
            )?;
            stats.unread += 1;
            if !rng.pct(10) || i == 1 {
                history.push(format!(
                    r#"{{"id":"{task}","ts":{start},"task":"task {i}","tokensIn":{},"tokensOut":{},"totalCost":0,"cwdOnTaskInitialization":{}}}"#,
                    rng.below(100_000),
                    rng.below(10_000),
                    js(cwd)
                ));
            }
            continue;
        }
        let sid = format!("{start}_{}", short_id(&mut rng).to_lowercase());
        let s = sdk_session(&mut rng, size, start, i == 0, &mut stats);
        let folder = dir.join("sessions").join(&sid);
        let end = start + 3_600_000;
        write(
            &folder.join(format!("{sid}.json")),
            &pretty(
                &format!(
                    r#"{{"version":1,"session_id":"{sid}","source":"cli","pid":{},"started_at":"{}","ended_at":"{}","exit_code":0,"status":"completed","interactive":true,"provider":"anthropic","model":"{}","cwd":{},"workspace_root":{},"metadata":{{"title":{},"mode":"act","checkpointEnabled":true,"messagesPath":{}}},"messages_path":{}}}"#,
                    rng.range(1_000, 99_999),
                    iso(start),
                    iso(end),
                    MODELS[0].0,
                    js(cwd),
                    js(cwd),
                    js(&prose(&mut rng, 40)),
                    js(&format!(
                        "/home/dev/.cline/data/sessions/{sid}/{sid}.messages.json"
                    )),
                    js(&format!(
                        "/home/dev/.cline/data/sessions/{sid}/{sid}.messages.json"
                    )),
                ),
                "\t",
            ),
            &mut stats,
        )?;
        stats.unread += 1;
        let text = transcript(&sid, "lead", end, &s.messages);
        write(
            &folder.join(format!("{sid}.messages.json")),
            &text,
            &mut stats,
        )?;
        stats.sessions += 1;
        stats.messages += s.messages.len() as u64;
        for (agent, messages) in &s.subagents {
            let text = transcript(agent, "subagent", end, messages);
            write(
                &folder.join(format!("{agent}.messages.json")),
                &text,
                &mut stats,
            )?;
            stats.subagents += 1;
            stats.messages += messages.len() as u64;
        }
        if i == 0 || rng.pct(10) {
            let k = s.messages.len().min(4);
            let copy = transcript(&sid, "lead", end, &s.messages[..k]);
            write(
                &folder.join(format!("{sid}.compaction.json")),
                &copy,
                &mut stats,
            )?;
            stats.unread += 1;
        }
        if i == 0 || rng.pct(2) {
            let k = s.messages.len().min(2);
            let copy = transcript(&sid, "lead", end, &s.messages[..k]);
            let name = format!("{sid}.messages.json.tmp.{end}.{}.json", short_id(&mut rng));
            write(&folder.join(name), &copy, &mut stats)?;
            stats.unread += 1;
        }
    }
    if !history.is_empty() {
        write(
            &dir.join("state").join("taskHistory.json"),
            &format!("[{}]", history.join(",")),
            &mut stats,
        )?;
        stats.unread += 1;
    }
    stats.files = stats.sessions + stats.subagents + stats.tasks + stats.unread;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::pretty;

    #[test]
    fn pretty_indents_as_json_stringify_does() {
        assert_eq!(
            pretty(r#"{"a":[1,{"b":"x,{:}\"y"}],"c":[],"d":{}}"#, "\t"),
            "{\n\t\"a\": [\n\t\t1,\n\t\t{\n\t\t\t\"b\": \"x,{:}\\\"y\"\n\t\t}\n\t],\n\t\"c\": [],\n\t\"d\": {}\n}"
        );
        assert_eq!(pretty("[]", "  "), "[]");
    }
}
