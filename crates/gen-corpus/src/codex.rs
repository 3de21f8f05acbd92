//! Codex archives (`--format codex`): a Codex home with the shapes of
//! `shared/spec/codex-format.md`, deterministic from the seed.
//!
//! ```text
//! DIR/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl   current rollouts
//! DIR/archived_sessions/YYYY/MM/DD/rollout-...jsonl                  10% of them, archived
//! DIR/sessions/rollout-<uuid>.jsonl                                  legacy flat rollouts
//! ```
//!
//! The first sessions hold every shape: the first is forked, the second
//! spawns a subagent, the third is compacted after its first turn and holds
//! future items, the fourth is a legacy flat rollout.
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - A rollout: `session_meta` (8-24 KB of `base_instructions`), then
//!   turns. The first turn opens with a `developer` permissions message,
//!   an `<environment_context>` user message and, 40% of the time, an
//!   AGENTS.md one. Each turn: `task_started`, `turn_context` (the model
//!   changes in 10% of turns, the cwd in 3%), the prompt written twice
//!   (`response_item` and `event_msg` `user_message`, either first), 1-6
//!   responses, `task_complete`.
//! - A response: a reasoning item 70% (a summary, `encrypted_content` of
//!   0.5-3 KB), then a tool call (`exec_command` 60%, `apply_patch` custom
//!   call 20%, an MCP call 20%) with its output (0.2-3 KB 80%, 3-24 KB 18%,
//!   24-128 KB 2%), or for the last one the answer written twice
//!   (`agent_message` event, then the `response_item`). After each a
//!   `token_count` with `last_token_usage` and the cumulative
//!   `total_token_usage`; 10% repeated at once (same totals), 5% preceded
//!   by one with `info: null` (rate limits only).
//! - Compaction: after 2% of turns past the fifth, a `compacted` line
//!   (a summary and a `replacement_history` of the last 2-6 items) and a
//!   `context_compacted` event.
//! - Unknown future item types: 0.5% of turns carry a `world_state` line
//!   and a `response_item` of type `future_item`.
//! - Subagents: 5% of turns spawn one (`spawn_agent` call, a
//!   `collab_tool_call` event, its output); the child file replays the
//!   parent's lines so far verbatim after its own `session_meta`
//!   (`source.subagent.thread_spawn.parent_thread_id`), then 1-3 turns of
//!   its own, totals going on from the replayed ones.
//! - Forks: 5% of sessions are followed by a fork: a file whose
//!   `session_meta` names `forked_from_id`, replaying the whole parent,
//!   then 1-4 turns of its own.
//! - Legacy flat rollouts: 3% of sessions, a bare meta line and bare
//!   messages (no envelope, no token counts).

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2025-09-01T00:00:00Z.
const EPOCH_MS: i64 = 1_756_684_800_000;
const DAY_MS: i64 = 86_400_000;

const MODELS: [&str; 4] = ["gpt-5", "gpt-5-codex", "gpt-5.1-codex-max", "gpt-5.2"];
const CWDS: [&str; 4] = [
    "/home/dev/api",
    "/home/dev/web-app",
    "/home/dev/tools/cli",
    "/srv/projects/data-pipeline",
];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    lines: u64,
    sessions: u64,
    archived: u64,
    legacy: u64,
    forks: u64,
    subagents: u64,
    replayed_lines: u64,
    turns: u64,
    model_changes: u64,
    token_counts: u64,
    repeated_counts: u64,
    null_counts: u64,
    compactions: u64,
    future_items: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} files ({} sessions, {} archived, {} legacy, {} forks, {} subagents), \
             {:.1} MB, {} lines ({} replayed), {} turns, {} model changes, {} token counts \
             ({} repeated, {} with info null), {} compactions, {} future items, in {secs:.1}s",
            self.files,
            self.sessions,
            self.archived,
            self.legacy,
            self.forks,
            self.subagents,
            self.bytes as f64 / MB as f64,
            self.lines,
            self.replayed_lines,
            self.turns,
            self.model_changes,
            self.token_counts,
            self.repeated_counts,
            self.null_counts,
            self.compactions,
            self.future_items,
        );
    }
}

/// Prose of `lo..=hi` bytes.
fn words(rng: &mut Rng, lo: u64, hi: u64) -> String {
    let n = rng.range(lo, hi) as usize;
    prose(rng, n)
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
}

/// Token counts: input (cached included), cached, output (reasoning
/// included), reasoning, total.
type Tokens = [u64; 5];

fn usage(t: Tokens) -> String {
    format!(
        r#"{{"input_tokens":{},"cached_input_tokens":{},"output_tokens":{},"reasoning_output_tokens":{},"total_tokens":{}}}"#,
        t[0], t[1], t[2], t[3], t[4]
    )
}

/// One thread being written: its lines, clock, model, cwd and totals.
struct Thread {
    lines: Vec<String>,
    bytes: u64,
    ms: i64,
    model: &'static str,
    cwd: &'static str,
    total: Tokens,
    /// Items of the model-visible history, for a compaction's replacement.
    recent: Vec<String>,
    /// The CLI era that writes it: 0.29 writes no rate limits; the others
    /// as [`Thread::token_count`] shows.
    era: Era,
}

/// The Codex CLI that wrote a rollout, as `session_meta.cli_version` says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    /// 0.29: token counts with `rate_limits: null`.
    V029,
    /// 0.77, the default archive's only one.
    V077,
    /// 0.13x: as 0.77, its version said.
    V013x,
}

impl Era {
    fn version(self) -> &'static str {
        match self {
            Era::V029 => "0.29.0",
            Era::V077 => "0.77.0",
            Era::V013x => "0.135.0",
        }
    }
}

impl Thread {
    fn line(&mut self, ty: &str, payload: &str) {
        let l = format!(
            r#"{{"timestamp":"{}","type":"{ty}","payload":{payload}}}"#,
            iso(self.ms)
        );
        self.bytes += l.len() as u64 + 1;
        self.lines.push(l);
    }

    fn item(&mut self, payload: String) {
        self.line("response_item", &payload);
        self.recent.push(payload);
        if self.recent.len() > 8 {
            self.recent.remove(0);
        }
    }

    fn tick(&mut self, rng: &mut Rng, lo: u64, hi: u64) {
        self.ms += rng.range(lo, hi) as i64;
    }

    fn message(&mut self, role: &str, kind: &str, text: &str) {
        self.item(format!(
            r#"{{"type":"message","role":"{role}","content":[{{"type":"{kind}","text":{}}}]}}"#,
            js(text)
        ));
    }

    fn token_count(&mut self, rng: &mut Rng, stats: &mut Stats) {
        if rng.pct(5) {
            self.line(
                "event_msg",
                r#"{"type":"token_count","info":null,"rate_limits":{"primary":{"used_percent":12.0,"window_minutes":300,"resets_at":1780638395},"secondary":null}}"#,
            );
            stats.null_counts += 1;
        }
        let context = self.total[0] / 8 + rng.range(4_000, 30_000);
        let input = context.min(250_000);
        let cached = input * rng.range(50, 95) / 100;
        let reasoning = if rng.pct(70) { rng.range(0, 2_000) } else { 0 };
        let output = reasoning + rng.range(10, 3_000);
        let last = [input, cached, output, reasoning, input + output];
        for (t, l) in self.total.iter_mut().zip(last) {
            *t += l;
        }
        let used = rng.below(100);
        let payload = if self.era == Era::V029 {
            format!(
                r#"{{"type":"token_count","info":{{"total_token_usage":{},"last_token_usage":{},"model_context_window":272000}},"rate_limits":null}}"#,
                usage(self.total),
                usage(last),
            )
        } else {
            format!(
                r#"{{"type":"token_count","info":{{"total_token_usage":{},"last_token_usage":{},"model_context_window":272000}},"rate_limits":{{"primary":{{"used_percent":{used}.0,"window_minutes":300,"resets_at":1780638395}},"secondary":null,"credits":null,"plan_type":"pro"}}}}"#,
                usage(self.total),
                usage(last),
            )
        };
        self.line("event_msg", &payload);
        stats.token_counts += 1;
        if rng.pct(10) {
            self.ms += 1;
            self.line("event_msg", &payload);
            stats.token_counts += 1;
            stats.repeated_counts += 1;
        }
    }

    /// One turn; returns the call id of a subagent spawned in it.
    fn turn(
        &mut self,
        rng: &mut Rng,
        stats: &mut Stats,
        first: bool,
        spawn: bool,
    ) -> Option<String> {
        stats.turns += 1;
        let turn_id = uuid(rng);
        self.tick(rng, 20_000, 900_000);
        self.line(
            "event_msg",
            &format!(
                r#"{{"type":"task_started","turn_id":"{turn_id}","model_context_window":272000}}"#
            ),
        );
        if first {
            self.message(
                "developer",
                "input_text",
                "<permissions instructions>Filesystem sandboxing: workspace-write. Approvals: on-request.</permissions instructions>",
            );
            let env = format!(
                "<environment_context>\n  <cwd>{}</cwd>\n  <shell>bash</shell>\n</environment_context>",
                self.cwd
            );
            self.message("user", "input_text", &env);
            if rng.pct(40) {
                let agents = format!(
                    "# AGENTS.md instructions for {}\n\n<INSTRUCTIONS>\n{}\n</INSTRUCTIONS>",
                    self.cwd,
                    prose(rng, 1500)
                );
                self.message("user", "input_text", &agents);
            }
        } else if rng.pct(10) {
            let m = MODELS[rng.below(MODELS.len() as u64) as usize];
            if m != self.model {
                self.model = m;
                stats.model_changes += 1;
            }
        }
        if !first && rng.pct(3) {
            self.cwd = CWDS[rng.below(CWDS.len() as u64) as usize];
        }
        self.line(
            "turn_context",
            &format!(
                r#"{{"turn_id":"{turn_id}","cwd":{},"approval_policy":"on-request","sandbox_policy":{{"type":"workspace-write"}},"model":"{}","effort":"medium","summary":"auto"}}"#,
                js(self.cwd),
                self.model
            ),
        );
        let prompt = words(rng, 20, 600);
        let event = format!(
            r#"{{"type":"user_message","message":{},"images":[]}}"#,
            js(&prompt)
        );
        if rng.pct(50) {
            self.message("user", "input_text", &prompt);
            self.line("event_msg", &event);
        } else {
            self.line("event_msg", &event);
            self.tick(rng, 1, 5);
            self.message("user", "input_text", &prompt);
        }
        let responses = rng.range(1, 6);
        let mut spawned = None;
        for r in 0..responses {
            self.tick(rng, 1_000, 40_000);
            if rng.pct(70) {
                let mut enc = String::new();
                let n = rng.range(500, 3_000) as usize;
                super::alnum(rng, n, &mut enc);
                self.item(format!(
                    r#"{{"type":"reasoning","summary":[{{"type":"summary_text","text":{}}}],"content":null,"encrypted_content":"{enc}"}}"#,
                    js(&format!("**{}**", prose(rng, 60)))
                ));
            }
            if r + 1 < responses {
                let call = format!("call_{}", uuid(rng).replace('-', ""));
                if spawn && spawned.is_none() {
                    self.item(format!(
                        r#"{{"type":"function_call","name":"spawn_agent","arguments":{},"call_id":"{call}"}}"#,
                        js(r#"{"task_name":"researcher","message":"Inspect the failing tests."}"#)
                    ));
                    spawned = Some(call);
                } else {
                    let k = rng.below(100);
                    let (ty, body, out_ty) = if k < 60 {
                        let args = format!(
                            r#"{{"cmd":"rg -n {} src","yield_time_ms":1000}}"#,
                            super::WORDS[rng.below(20) as usize]
                        );
                        (
                            "function_call",
                            format!(r#""name":"exec_command","arguments":{}"#, js(&args)),
                            "function_call_output",
                        )
                    } else if k < 80 {
                        let patch = format!("*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-{}\n+{}\n*** End Patch", prose(rng, 80), prose(rng, 80));
                        (
                            "custom_tool_call",
                            format!(r#""name":"apply_patch","input":{}"#, js(&patch)),
                            "custom_tool_call_output",
                        )
                    } else {
                        (
                            "function_call",
                            format!(
                                r#""name":"mcp__docs__search","arguments":{}"#,
                                js(r#"{"query":"token usage"}"#)
                            ),
                            "function_call_output",
                        )
                    };
                    self.item(format!(r#"{{"type":"{ty}",{body},"call_id":"{call}"}}"#));
                    self.tick(rng, 100, 20_000);
                    let size = match rng.below(100) {
                        0..=79 => rng.range(200, 3_000),
                        80..=97 => rng.range(3_000, 24_000),
                        _ => rng.range(24_000, 128_000),
                    };
                    let output = tool_output(rng, size as usize);
                    self.item(format!(
                        r#"{{"type":"{out_ty}","call_id":"{call}","output":{}}}"#,
                        js(&output)
                    ));
                }
            } else {
                let answer = words(rng, 40, 2_000);
                self.line(
                    "event_msg",
                    &format!(
                        r#"{{"type":"agent_message","message":{},"phase":"final_answer"}}"#,
                        js(&answer)
                    ),
                );
                self.tick(rng, 1, 5);
                self.message("assistant", "output_text", &answer);
            }
            self.tick(rng, 5, 50);
            self.token_count(rng, stats);
        }
        if let Some(call) = &spawned {
            self.line(
                "event_msg",
                &format!(
                    r#"{{"type":"collab_tool_call","call_id":"{call}","tool":"spawn_agent"}}"#
                ),
            );
            self.item(format!(
                r#"{{"type":"function_call_output","call_id":"{call}","output":"agent spawned"}}"#
            ));
        }
        if rng.below(200) == 0 {
            self.line("world_state", r#"{"version":2,"facts":[]}"#);
            self.item(r#"{"type":"future_item","data":{"x":1}}"#.to_owned());
            stats.future_items += 1;
        }
        self.tick(rng, 10, 100);
        self.line(
            "event_msg",
            &format!(
                r#"{{"type":"task_complete","turn_id":"{turn_id}","last_agent_message":null}}"#
            ),
        );
        spawned
    }

    fn compact(&mut self, rng: &mut Rng, stats: &mut Stats) {
        self.tick(rng, 1_000, 10_000);
        let n = rng.range(2, 6) as usize;
        let keep: Vec<String> = self.recent.iter().rev().take(n).rev().cloned().collect();
        let payload = format!(
            r#"{{"message":{},"replacement_history":[{}]}}"#,
            js(&format!("**Progress**\n\n{}", prose(rng, 800))),
            keep.join(",")
        );
        self.line("compacted", &payload);
        self.line("event_msg", r#"{"type":"context_compacted"}"#);
        stats.compactions += 1;
    }
}

fn meta(id: &str, ms: i64, cwd: &str, extra: &str, era: Era, rng: &mut Rng) -> String {
    format!(
        r#"{{"timestamp":"{t}","type":"session_meta","payload":{{"id":"{id}","timestamp":"{t}","cwd":{},"originator":"codex_cli_rs","cli_version":"{}","source":{extra},"model_provider":"openai","base_instructions":{{"text":{}}}}}}}"#,
        js(cwd),
        era.version(),
        js(&words(rng, 8_000, 24_000)),
        t = iso(ms)
    )
}

/// `sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`.
fn rel_path(ms: i64, id: &str) -> String {
    let t = iso(ms);
    format!(
        "{}/{}/{}/rollout-{}-{}.jsonl",
        &t[0..4],
        &t[5..7],
        &t[8..10],
        t[..19].replace(':', "-"),
        id
    )
}

fn write_lines(path: &Path, lines: &[String], stats: &mut Stats) -> io::Result<()> {
    fs::create_dir_all(path.parent().expect("has a parent"))?;
    let mut w = BufWriter::new(fs::File::create(path)?);
    for l in lines {
        w.write_all(l.as_bytes())?;
        w.write_all(b"\n")?;
        stats.bytes += l.len() as u64 + 1;
    }
    stats.lines += lines.len() as u64;
    stats.files += 1;
    w.flush()
}

/// A child thread (a subagent or a fork): its meta, the parent's lines
/// replayed, then turns of its own, totals going on from the parent's.
/// With `same_second`, the replayed lines' timestamps are rewritten into
/// the second of the child's own `session_meta` (a subagent spawned so
/// replays its parent's history in `codex-format.md` §7's shape).
#[allow(clippy::too_many_arguments)]
fn write_child(
    dir: &Path,
    parent: &Thread,
    upto: usize,
    source: &str,
    fork_of: Option<&str>,
    turns: u64,
    same_second: bool,
    rng: &mut Rng,
    stats: &mut Stats,
) -> io::Result<()> {
    let id = uuid(rng);
    let ms = parent.ms + rng.range(1_000, 60_000) as i64;
    let extra = match fork_of {
        Some(p) => format!(r#"{source},"forked_from_id":"{p}""#),
        None => source.to_owned(),
    };
    let mut child = Thread {
        lines: vec![meta(&id, ms, parent.cwd, &extra, parent.era, rng)],
        bytes: 0,
        ms,
        model: parent.model,
        cwd: parent.cwd,
        total: parent.total,
        recent: Vec::new(),
        era: parent.era,
    };
    if same_second {
        // `{"timestamp":"` then 24 bytes of ISO time: the spawn's second,
        // milliseconds kept in order.
        let second = ms - ms.rem_euclid(1000);
        for (k, l) in parent.lines[..upto].iter().enumerate() {
            let t = iso(second + (k as i64 * 999 / upto.max(1) as i64));
            let mut l = l.clone();
            l.replace_range(14..38, &t);
            child.lines.push(l);
        }
    } else {
        child.lines.extend_from_slice(&parent.lines[..upto]);
    }
    stats.replayed_lines += upto as u64;
    for _ in 0..turns {
        child.turn(rng, stats, false, false);
    }
    write_lines(
        &dir.join("sessions").join(rel_path(ms, &id)),
        &child.lines,
        stats,
    )
}

/// A subagent of thread `id` spawned now: its parent's lines so far
/// replayed, then 1-2 turns of its own.
fn write_subagent(
    dir: &Path,
    parent: &Thread,
    id: &str,
    same_second: bool,
    rng: &mut Rng,
    stats: &mut Stats,
) -> io::Result<()> {
    stats.subagents += 1;
    let src =
        format!(r#"{{"subagent":{{"thread_spawn":{{"parent_thread_id":"{id}","depth":1}}}}}}"#);
    let turns = rng.range(1, 3);
    let upto = parent.lines.len();
    write_child(
        dir,
        parent,
        upto,
        &src,
        None,
        turns,
        same_second,
        rng,
        stats,
    )
}

/// A fork of thread `id`: the whole parent replayed, then 1-3 turns of its
/// own.
fn write_fork(
    dir: &Path,
    parent: &Thread,
    id: &str,
    rng: &mut Rng,
    stats: &mut Stats,
) -> io::Result<()> {
    stats.forks += 1;
    let turns = rng.range(1, 4);
    let all = parent.lines.len();
    write_child(
        dir,
        parent,
        all,
        r#""cli""#,
        Some(id),
        turns,
        false,
        rng,
        stats,
    )
}

fn write_legacy(
    dir: &Path,
    target: u64,
    ms: i64,
    rng: &mut Rng,
    stats: &mut Stats,
) -> io::Result<()> {
    let id = uuid(rng);
    let mut lines = vec![format!(r#"{{"id":"{id}","timestamp":"{}"}}"#, iso(ms))];
    let mut bytes = 0u64;
    while bytes < target {
        for (role, kind) in [("user", "input_text"), ("assistant", "output_text")] {
            let l = format!(
                r#"{{"type":"message","role":"{role}","content":[{{"type":"{kind}","text":{}}}]}}"#,
                js(&words(rng, 40, 1_500))
            );
            bytes += l.len() as u64;
            lines.push(l);
        }
    }
    stats.legacy += 1;
    write_lines(
        &dir.join(format!("sessions/rollout-{id}.jsonl")),
        &lines,
        stats,
    )
}

/// Writes a Codex home of about `total_mb` MB under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0xC0DE);
    let total = (total_mb * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 0);
    let mut stats = Stats::default();
    for (i, &size) in sizes.iter().enumerate() {
        if stats.bytes >= total {
            break;
        }
        let start = EPOCH_MS + rng.below(300 * DAY_MS as u64) as i64;
        // The first sessions hold every shape: a legacy one, a fork, a
        // subagent.
        if i == 3 || (i > 3 && rng.pct(3)) {
            write_legacy(dir, size, start, &mut rng, &mut stats)?;
            continue;
        }
        stats.sessions += 1;
        let id = uuid(&mut rng);
        let cwd = CWDS[rng.below(CWDS.len() as u64) as usize];
        let mut t = Thread {
            lines: vec![meta(&id, start, cwd, r#""cli""#, Era::V077, &mut rng)],
            bytes: 0,
            ms: start,
            model: MODELS[rng.below(MODELS.len() as u64) as usize],
            cwd,
            total: [0; 5],
            recent: Vec::new(),
            era: Era::V077,
        };
        let mut n = 0;
        while t.bytes < size {
            let spawn = (i == 1 && n == 1) || rng.pct(5);
            if let Some(_call) = t.turn(&mut rng, &mut stats, n == 0, spawn) {
                write_subagent(dir, &t, &id, false, &mut rng, &mut stats)?;
            }
            n += 1;
            if (n > 5 && rng.pct(2)) || (i == 2 && n == 1) {
                t.compact(&mut rng, &mut stats);
            }
            if i == 2 && n == 1 {
                t.line("world_state", r#"{"version":2,"facts":[]}"#);
                t.item(r#"{"type":"future_item","data":{"x":1}}"#.to_owned());
                stats.future_items += 1;
            }
        }
        let archived = i > 6 && rng.pct(10);
        let root = if archived {
            "archived_sessions"
        } else {
            "sessions"
        };
        stats.archived += u64::from(archived);
        write_lines(
            &dir.join(root).join(rel_path(start, &id)),
            &t.lines,
            &mut stats,
        )?;
        if i == 0 || rng.pct(5) {
            write_fork(dir, &t, &id, &mut rng, &mut stats)?;
        }
    }
    Ok(stats)
}

/// Issue 41's held-out Codex home, by the parameters it states (at
/// `--total-mb 329`, that archive's size): 177 files, which are 150
/// threads, 18 forks of them, 8 subagents (4 whose replay of the parent's
/// history is rewritten into the spawn's second, 4 with the original
/// timestamps) and one legacy pre-envelope rollout; thread sizes
/// Pareto-like from 5 KB to 11.5% of the total (38 MB of 329); 2% of the
/// files (4) with a damaged line (a `response_item` cut in half, which
/// ccusage's byte filter never reads); three CLI eras, 0.29, 0.77 and
/// 0.13x, in proportion 12/33/55 of the threads (`--shape held-out`).
pub(crate) fn write_held_out(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    // 150 threads and the legacy rollout.
    const THREADS: usize = 151;
    let mut rng = Rng::new(seed ^ 0x4E1D);
    let total = (total_mb * MB as f64) as u64;
    // The children replay their parents: the threads' own bytes are about
    // nine tenths of the total, the largest 11.5% of it.
    let own = total / 10 * 9;
    let largest = total * 115 / 1000;
    let draws: Vec<f64> = (1..THREADS)
        .map(|_| (1.0 - rng.unit()).powf(-1.0 / 0.7))
        .collect();
    let mut sizes: Vec<u64> = std::iter::once(largest)
        .chain(super::scaled_to_fill(&draws, own - largest, 5_000, largest))
        .collect();
    for i in (1..sizes.len()).rev() {
        sizes.swap(i, rng.below(i as u64 + 1) as usize);
    }
    // Which threads are what: children of threads under 1% of the total,
    // so that their replays stay in proportion.
    let mut order: Vec<usize> = (0..THREADS).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let small: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&i| sizes[i] < total / 100)
        .collect();
    let legacy = small[0];
    let forked = &small[1..19];
    let spawning = &small[19..27];
    let damaged: Vec<usize> = order
        .iter()
        .copied()
        .filter(|i| *i != legacy && !small[..27].contains(i))
        .take(4)
        .collect();
    let mut stats = Stats::default();
    for (i, &size) in sizes.iter().enumerate() {
        let start = EPOCH_MS + rng.below(300 * DAY_MS as u64) as i64;
        if i == legacy {
            write_legacy(dir, size, start, &mut rng, &mut stats)?;
            continue;
        }
        let era = match i * 100 / THREADS {
            0..=11 => Era::V029,
            12..=44 => Era::V077,
            _ => Era::V013x,
        };
        stats.sessions += 1;
        let id = uuid(&mut rng);
        let cwd = CWDS[rng.below(CWDS.len() as u64) as usize];
        let mut t = Thread {
            lines: vec![meta(&id, start, cwd, r#""cli""#, era, &mut rng)],
            bytes: 0,
            ms: start,
            model: MODELS[rng.below(MODELS.len() as u64) as usize],
            cwd,
            total: [0; 5],
            recent: Vec::new(),
            era,
        };
        let spawn_at = spawning.iter().position(|&s| s == i);
        let (mut n, mut spawned) = (0, false);
        // A spawning thread spawns in its second turn, or the first after
        // it with two responses, and runs until it has.
        while t.bytes < size || (spawn_at.is_some() && !spawned) {
            let spawn = spawn_at.is_some() && !spawned && n >= 1;
            if let Some(_call) = t.turn(&mut rng, &mut stats, n == 0, spawn) {
                spawned = true;
                let same_second = spawn_at.is_some_and(|k| k % 2 == 0);
                write_subagent(dir, &t, &id, same_second, &mut rng, &mut stats)?;
            }
            n += 1;
            if n > 5 && rng.pct(2) {
                t.compact(&mut rng, &mut stats);
            }
        }
        if damaged.contains(&i) {
            // A response_item in the middle, cut in half (its `\n` kept).
            let mid = t.lines.len() / 2;
            if let Some(k) =
                (mid..t.lines.len()).find(|&k| t.lines[k].contains(r#""type":"response_item""#))
            {
                let l = &mut t.lines[k];
                let mut cut = l.len() / 2;
                while !l.is_char_boundary(cut) {
                    cut -= 1;
                }
                l.truncate(cut);
            }
        }
        write_lines(
            &dir.join("sessions").join(rel_path(start, &id)),
            &t.lines,
            &mut stats,
        )?;
        if forked.contains(&i) {
            write_fork(dir, &t, &id, &mut rng, &mut stats)?;
        }
    }
    Ok(stats)
}
