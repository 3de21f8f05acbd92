//! Qwen Code archives (`--format qwen`): a Qwen runtime folder with the
//! shapes of `shared/spec/qwen-code-format.md`, deterministic from the
//! seed.
//!
//! ```text
//! DIR/projects/<sanitised cwd>/chats/<sessionId>.jsonl
//! ```
//!
//! The first session holds every shape and is forked.
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - A session: records linked by `uuid`/`parentUuid`, each with the
//!   envelope Qwen writes (`sessionId`, `timestamp`, `cwd`, `version`,
//!   `gitBranch`). Turns: a user prompt (`real_user`), then 1-6 model
//!   responses.
//! - A response: an `assistant` record with a `thought` part 50% of the
//!   time, text, and a `functionCall` 70% (the last response of a turn:
//!   text only), `model`, `usageMetadata` (prompt growing with the
//!   history, cached tokens 60% of the time, thoughts when a thought was
//!   written, `totalTokenCount` = prompt + candidates + thoughts) and
//!   `contextWindowSize`; after it a `system` `ui_telemetry` record 50%
//!   (an `api_response` event repeating the token counts, which must not
//!   be counted). A call's `tool_result` (its `functionResponse` output
//!   0.2-3 KB 80%, 3-24 KB 18%, 24-128 KB 2%; an error 5%).
//! - Bookkeeping: a `custom_title` record after the first turn, written
//!   again after each 32 KiB; `chat_compression` after 2% of turns past
//!   the fifth (a summary and the last records' contents); a `rewind` 1%
//!   (the next prompt's parent an earlier record); a `user` `notification`
//!   1%; a subagent's records (`agentId`, `isSidechain`) 3% of turns.
//! - Forks: 5% of sessions are followed by a `/branch` fork: a file of a
//!   new `sessionId` copying the parent's records up to a point (same
//!   `uuid`, timestamp and usage, with `forkedFrom`), a `parent_session`
//!   record, then 1-3 turns of its own.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2025-10-01T00:00:00Z.
const EPOCH_MS: i64 = 1_759_276_800_000;
const DAY_MS: i64 = 86_400_000;

const MODELS: [&str; 3] = ["qwen3-coder-plus", "qwen3-coder-flash", "qwen3-max"];
const CWDS: [&str; 4] = [
    "/home/dev/api",
    "/home/dev/web.app",
    "/home/dev/tools/cli",
    "/srv/projects/data-pipeline",
];
const TOOLS: [&str; 5] = [
    "read_file",
    "run_shell_command",
    "replace",
    "write_file",
    "search_file_content",
];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    lines: u64,
    sessions: u64,
    forks: u64,
    copied_lines: u64,
    turns: u64,
    responses: u64,
    telemetry: u64,
    compressions: u64,
    rewinds: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} files ({} sessions, {} forks), {:.1} MB, {} lines ({} copied \
             by forks), {} turns, {} responses, {} telemetry records, {} compressions, {} rewinds, \
             in {secs:.1}s",
            self.files,
            self.sessions,
            self.forks,
            self.bytes as f64 / MB as f64,
            self.lines,
            self.copied_lines,
            self.turns,
            self.responses,
            self.telemetry,
            self.compressions,
            self.rewinds,
        );
    }
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
}

/// Qwen's folder name for a cwd: every character not `[A-Za-z0-9]` a `-`.
fn sanitise(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// One session being written.
struct Session {
    id: String,
    cwd: &'static str,
    model: &'static str,
    lines: Vec<String>,
    bytes: u64,
    ms: i64,
    /// The last record's uuid, and every record's (for rewinds).
    last: Option<String>,
    uuids: Vec<String>,
    /// The prompt grows with the history.
    context: u64,
    since_title: u64,
    title: String,
    /// The archive's first session: every shape at least once.
    every_shape: bool,
}

impl Session {
    fn new(rng: &mut Rng, start: i64) -> Self {
        Session {
            id: uuid(rng),
            cwd: CWDS[rng.below(CWDS.len() as u64) as usize],
            model: MODELS[rng.below(MODELS.len() as u64) as usize],
            lines: Vec::new(),
            bytes: 0,
            ms: start,
            last: None,
            uuids: Vec::new(),
            context: rng.range(8_000, 14_000),
            since_title: 0,
            title: String::new(),
            every_shape: false,
        }
    }

    /// Appends a record of type `ty` whose fields after the envelope are
    /// `rest` (JSON members, no braces); returns its uuid.
    fn record(&mut self, rng: &mut Rng, ty: &str, rest: &str) -> String {
        let id = uuid(rng);
        let parent = match &self.last {
            Some(p) => js(p),
            None => "null".to_owned(),
        };
        let l = format!(
            r#"{{"uuid":"{id}","parentUuid":{parent},"sessionId":"{}","timestamp":"{}","type":"{ty}","cwd":{},"version":"0.15.2","gitBranch":"main",{rest}}}"#,
            self.id,
            iso(self.ms),
            js(self.cwd)
        );
        self.bytes += l.len() as u64 + 1;
        self.since_title += l.len() as u64 + 1;
        self.lines.push(l);
        self.last = Some(id.clone());
        self.uuids.push(id.clone());
        id
    }

    fn tick(&mut self, rng: &mut Rng, lo: u64, hi: u64) {
        self.ms += rng.range(lo, hi) as i64;
    }

    fn user(&mut self, rng: &mut Rng, subtype: Option<&str>, text: &str) {
        let sub = subtype.map_or(String::new(), |s| format!(r#""subtype":"{s}","#));
        let prov = if subtype.is_some() {
            "system"
        } else {
            "real_user"
        };
        let rest = format!(
            r#"{sub}"provenance":"{prov}","promptId":"{}","message":{{"role":"user","parts":[{{"text":{}}}]}}"#,
            uuid(rng),
            js(text)
        );
        self.record(rng, "user", &rest);
    }

    /// One model response; with `call`, a tool call and its result.
    fn response(&mut self, rng: &mut Rng, stats: &mut Stats, call: bool, agent: Option<&str>) {
        stats.responses += 1;
        self.tick(rng, 2_000, 60_000);
        let mut parts = Vec::new();
        let thought = rng.pct(50);
        if thought {
            let n = rng.range(80, 1_500) as usize;
            parts.push(format!(
                r#"{{"text":{},"thought":true}}"#,
                js(&prose(rng, n))
            ));
        }
        let n = rng.range(20, 1_200) as usize;
        parts.push(format!(r#"{{"text":{}}}"#, js(&prose(rng, n))));
        let tool = TOOLS[rng.below(TOOLS.len() as u64) as usize];
        let call_id = format!("call_{}", &uuid(rng)[..18]);
        if call {
            let path = format!("src/module_{}/file_{}.rs", rng.below(40), rng.below(90));
            parts.push(format!(
                r#"{{"functionCall":{{"id":"{call_id}","name":"{tool}","args":{{"absolute_path":{}}}}}}}"#,
                js(&format!("{}/{path}", self.cwd))
            ));
        }
        let prompt = self.context;
        let cached = if rng.pct(60) {
            prompt * rng.range(30, 95) / 100
        } else {
            0
        };
        let out = rng.range(20, 2_000);
        let thoughts = if thought { rng.range(10, 800) } else { 0 };
        let total = prompt + out + thoughts;
        let cached_field = if cached > 0 {
            format!(r#""cachedContentTokenCount":{cached},"#)
        } else {
            String::new()
        };
        let thoughts_field = if thought {
            format!(r#""thoughtsTokenCount":{thoughts},"#)
        } else {
            String::new()
        };
        let agent_fields = match agent {
            Some(a) => format!(r#""agentId":"{a}","agentName":"explorer","isSidechain":true,"#),
            None => String::new(),
        };
        let rest = format!(
            r#"{agent_fields}"provenance":"assistant_output","model":"{}","message":{{"role":"model","parts":[{}]}},"usageMetadata":{{"promptTokenCount":{prompt},{cached_field}"candidatesTokenCount":{out},{thoughts_field}"totalTokenCount":{total}}},"contextWindowSize":131072"#,
            self.model,
            parts.join(",")
        );
        self.record(rng, "assistant", &rest);
        self.context += out + rng.range(50, 400);
        if rng.pct(50) {
            stats.telemetry += 1;
            let rest = format!(
                r#""subtype":"ui_telemetry","systemPayload":{{"uiEvent":{{"event.name":"qwen-code.api_response","model":"{}","duration_ms":{},"input_token_count":{prompt},"output_token_count":{out},"cached_content_token_count":{cached},"thoughts_token_count":{thoughts},"total_token_count":{total}}}}}"#,
                self.model,
                rng.range(300, 30_000)
            );
            self.record(rng, "system", &rest);
        }
        if call {
            self.tick(rng, 100, 20_000);
            let n = match rng.below(100) {
                0..=79 => rng.range(200, 3_000),
                80..=97 => rng.range(3_000, 24_000),
                _ => rng.range(24_000, 128_000),
            } as usize;
            let error = rng.pct(5);
            let (response, status) = if error {
                (
                    format!(r#"{{"error":{}}}"#, js("Command exited with code 1")),
                    r#""status":"error","error":{"message":"Command exited with code 1"}"#,
                )
            } else {
                (
                    format!(r#"{{"output":{}}}"#, js(&tool_output(rng, n))),
                    r#""status":"success""#,
                )
            };
            let rest = format!(
                r#"{agent_fields}"provenance":"tool_result","message":{{"role":"user","parts":[{{"functionResponse":{{"id":"{call_id}","name":"{tool}","response":{response}}}}}]}},"toolCallResult":{{"callId":"{call_id}",{status},"resultDisplay":"done"}}"#
            );
            self.record(rng, "tool_result", &rest);
            self.context += (n as u64) / 4;
        }
    }

    fn turn(&mut self, rng: &mut Rng, stats: &mut Stats, n: u64) {
        stats.turns += 1;
        self.tick(rng, 20_000, 900_000);
        let shapes = self.every_shape && n == 2;
        if n > 0 && (shapes || rng.pct(1)) {
            // A rewind: the record, then the next prompt's parent an
            // earlier record.
            stats.rewinds += 1;
            let back = rng.range(1, 4.min(self.uuids.len() as u64 - 1));
            self.record(
                rng,
                "system",
                &format!(r#""subtype":"rewind","systemPayload":{{"truncatedCount":{back}}}"#),
            );
            let to = self.uuids.len() - 1 - back as usize;
            self.last = Some(self.uuids[to].clone());
        }
        if n > 0 && (shapes || rng.pct(1)) {
            self.user(
                rng,
                Some("notification"),
                "Background task finished: cargo test",
            );
        }
        let len = rng.range(20, 600) as usize;
        let prompt = prose(rng, len);
        self.user(rng, None, &prompt);
        let responses = rng.range(1, 6);
        for r in 0..responses {
            let call = r + 1 < responses && rng.pct(70);
            self.response(rng, stats, call, None);
        }
        if shapes || rng.pct(3) {
            let agent = format!("agent-{}", &uuid(rng)[..8]);
            for r in 0..rng.range(1, 3) {
                self.response(rng, stats, r == 0, Some(&agent));
            }
        }
        if n == 0 || self.since_title > 32 << 10 {
            if self.title.is_empty() {
                self.title = prose(rng, 30).chars().take(40).collect();
            }
            let rest = format!(
                r#""subtype":"custom_title","systemPayload":{{"customTitle":{},"titleSource":"auto"}}"#,
                js(&self.title)
            );
            self.record(rng, "system", &rest);
            self.since_title = 0;
        }
        if (n > 5 && rng.pct(2)) || shapes {
            stats.compressions += 1;
            let n = rng.range(400, 3_000) as usize;
            let summary = prose(rng, n);
            let rest = format!(
                r#""subtype":"chat_compression","systemPayload":{{"info":{{"originalTokenCount":{},"newTokenCount":{},"compressionStatus":1}},"compressedHistory":[{{"role":"user","parts":[{{"text":{}}}]}},{{"role":"model","parts":[{{"text":"Got it. Thanks for the additional context!"}}]}}]}}"#,
                self.context,
                self.context / 5,
                js(&format!("<state_snapshot>{summary}</state_snapshot>"))
            );
            self.record(rng, "system", &rest);
            self.context /= 5;
        }
    }
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

fn file_of(dir: &Path, s: &Session) -> std::path::PathBuf {
    dir.join("projects")
        .join(sanitise(s.cwd))
        .join("chats")
        .join(format!("{}.jsonl", s.id))
}

/// A `/branch` fork of `parent`: its records up to a point copied under
/// a new session id with `forkedFrom`, a `parent_session` record, then
/// turns of its own.
fn write_fork(dir: &Path, parent: &Session, rng: &mut Rng, stats: &mut Stats) -> io::Result<()> {
    stats.forks += 1;
    let start = parent.ms + rng.range(60_000, DAY_MS as u64) as i64;
    let mut fork = Session::new(rng, start);
    fork.cwd = parent.cwd;
    fork.model = parent.model;
    let upto = rng.range(1, parent.lines.len() as u64) as usize;
    for (l, id) in parent.lines[..upto].iter().zip(&parent.uuids) {
        // The envelope's sessionId is the fourth key; copies keep the rest.
        let own = l.replacen(
            &format!(r#""sessionId":"{}""#, parent.id),
            &format!(r#""sessionId":"{}""#, fork.id),
            1,
        );
        let own = format!(
            r#"{},"forkedFrom":{{"sessionId":"{}","messageUuid":"{id}"}}}}"#,
            &own[..own.len() - 1],
            parent.id
        );
        fork.bytes += own.len() as u64 + 1;
        fork.lines.push(own);
        fork.uuids.push(id.clone());
    }
    stats.copied_lines += upto as u64;
    fork.last = Some(parent.uuids[upto - 1].clone());
    fork.record(
        rng,
        "system",
        &format!(
            r#""subtype":"parent_session","systemPayload":{{"parentSessionId":"{}"}}"#,
            parent.id
        ),
    );
    for n in 0..rng.range(1, 3) {
        fork.turn(rng, stats, n + 1);
    }
    write_lines(&file_of(dir, &fork), &fork.lines, stats)
}

/// Writes a Qwen runtime folder of about `total_mb` MB under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0x0E11_C0DE);
    let total = (total_mb * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 0);
    let mut stats = Stats::default();
    for (i, &size) in sizes.iter().enumerate() {
        if stats.bytes >= total {
            break;
        }
        stats.sessions += 1;
        let start = EPOCH_MS + rng.below(200 * DAY_MS as u64) as i64;
        let mut s = Session::new(&mut rng, start);
        s.every_shape = i == 0;
        let mut n = 0;
        while s.bytes < size || n < 3 {
            s.turn(&mut rng, &mut stats, n);
            n += 1;
        }
        write_lines(&file_of(dir, &s), &s.lines, &mut stats)?;
        if i == 0 || rng.pct(5) {
            write_fork(dir, &s, &mut rng, &mut stats)?;
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_qwens() {
        assert_eq!(sanitise("/home/me/my.app"), "-home-me-my-app");
    }
}
