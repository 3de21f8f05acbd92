//! GitHub Copilot CLI archives (`--format copilot`): a Copilot home with
//! the shapes of `shared/spec/copilot-cli-format.md`, deterministic from
//! the seed.
//!
//! ```text
//! DIR/session-state/<sessionId>/events.jsonl
//! ```
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - A session: `session.start` (`context.cwd`, `selectedModel`), a
//!   `session.model_change` 30% of the time, a `system.message` (2-6 KB),
//!   then turns: a `user.message`, `assistant.turn_start`, 1-6
//!   `assistant.message`s (`reasoningText` 40%, `toolRequests` 70% but on
//!   the last, `outputTokens`), each call's `tool.execution_start` and
//!   `tool.execution_complete` (output 0.2-3 KB 80%, 3-24 KB 18%, 24-128
//!   KB 2%; a failure 5%), `assistant.turn_end`; a `session.context_changed`
//!   3% of turns, a compaction (`session.compaction_start` /
//!   `_complete` with a summary) 2% of turns past the fifth.
//! - Segments: the session ends with a `session.shutdown` (`modelMetrics`
//!   of its segment's models) 85% of the time; 20% of sessions are resumed
//!   once (`session.resume`, more turns, another shutdown); newer CLIs
//!   (40% of sessions) write `session.usage_checkpoint` lines and
//!   cumulative snapshots, older ones reset on resume; 15% crash (no
//!   shutdown: the messages' output alone).

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2025-11-01T00:00:00Z.
const EPOCH_MS: i64 = 1_761_955_200_000;
const DAY_MS: i64 = 86_400_000;

const MODELS: [&str; 3] = ["claude-sonnet-4.5", "gpt-5.4", "claude-opus-4.6-1m"];
const CWDS: [&str; 3] = [
    "/home/dev/api",
    "/home/dev/web-app",
    "/srv/projects/data-pipeline",
];
const TOOLS: [&str; 4] = ["bash", "view", "edit", "create"];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    lines: u64,
    turns: u64,
    messages: u64,
    shutdowns: u64,
    resumed: u64,
    cumulative: u64,
    crashed: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} sessions, {:.1} MB, {} lines, {} turns, {} assistant messages, \
             {} shutdowns ({} resumed sessions, {} cumulative, {} crashed), in {secs:.1}s",
            self.files,
            self.bytes as f64 / MB as f64,
            self.lines,
            self.turns,
            self.messages,
            self.shutdowns,
            self.resumed,
            self.cumulative,
            self.crashed,
        );
    }
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
}

struct Session {
    lines: Vec<String>,
    bytes: u64,
    ms: i64,
    last: Option<String>,
    model: &'static str,
    /// This segment's tokens by model: input (cache included), output,
    /// cache read, cache write.
    segment: Vec<(&'static str, [u64; 4])>,
    /// Every segment's, for cumulative snapshots.
    all: Vec<(&'static str, [u64; 4])>,
    /// The archive's first session: a compaction in its second turn.
    every_shape: bool,
}

impl Session {
    fn event(&mut self, rng: &mut Rng, ty: &str, data: &str) {
        let id = uuid(rng);
        let parent = self.last.as_deref().map_or("null".to_owned(), js);
        let l = format!(
            r#"{{"type":"{ty}","data":{data},"id":"{id}","timestamp":"{}","parentId":{parent}}}"#,
            iso(self.ms)
        );
        self.bytes += l.len() as u64 + 1;
        self.lines.push(l);
        self.last = Some(id);
    }

    fn tick(&mut self, rng: &mut Rng, lo: u64, hi: u64) {
        self.ms += rng.range(lo, hi) as i64;
    }

    fn add(&mut self, t: [u64; 4]) {
        for list in [&mut self.segment, &mut self.all] {
            match list.iter_mut().find(|(m, _)| *m == self.model) {
                Some((_, u)) => {
                    for (a, b) in u.iter_mut().zip(t) {
                        *a += b;
                    }
                }
                None => list.push((self.model, t)),
            }
        }
    }

    fn turn(&mut self, rng: &mut Rng, stats: &mut Stats, n: u64) {
        stats.turns += 1;
        self.tick(rng, 20_000, 900_000);
        if n > 0 && rng.pct(3) {
            let cwd = CWDS[rng.below(CWDS.len() as u64) as usize];
            self.event(
                rng,
                "session.context_changed",
                &format!(r#"{{"cwd":{}}}"#, js(cwd)),
            );
        }
        let len = rng.range(20, 600) as usize;
        let prompt = prose(rng, len);
        let data = format!(
            r#"{{"content":{},"interactionId":"{}"}}"#,
            js(&prompt),
            uuid(rng)
        );
        self.event(rng, "user.message", &data);
        let turn = format!("{n}");
        self.event(
            rng,
            "assistant.turn_start",
            &format!(r#"{{"turnId":"{turn}"}}"#),
        );
        let responses = rng.range(1, 6);
        for r in 0..responses {
            stats.messages += 1;
            self.tick(rng, 2_000, 60_000);
            let call = r + 1 < responses && rng.pct(70);
            let out = rng.range(20, 2_000);
            let prompt = rng.range(8_000, 60_000);
            let cached = prompt * rng.range(40, 95) / 100;
            let written = rng.range(0, 2_000).min(prompt - cached);
            self.add([prompt, out, cached, written]);
            let reasoning = if rng.pct(40) {
                let n = rng.range(80, 1_500) as usize;
                format!(r#","reasoningText":{}"#, js(&prose(rng, n)))
            } else {
                String::new()
            };
            let call_id = format!("toolu_{}", &uuid(rng)[..18]);
            let tool = TOOLS[rng.below(TOOLS.len() as u64) as usize];
            let path = format!("src/module_{}/file_{}.rs", rng.below(40), rng.below(90));
            let args = format!(r#"{{"path":{}}}"#, js(&path));
            let requests = if call {
                format!(
                    r#","toolRequests":[{{"toolCallId":"{call_id}","name":"{tool}","arguments":{args},"type":"function"}}]"#
                )
            } else {
                String::new()
            };
            let n = rng.range(20, 1_200) as usize;
            let content = if call { String::new() } else { prose(rng, n) };
            let data = format!(
                r#"{{"messageId":"{}","content":{}{reasoning}{requests},"model":"{}","outputTokens":{out},"interactionId":"{}","turnId":"{turn}"}}"#,
                uuid(rng),
                js(&content),
                self.model,
                uuid(rng)
            );
            self.event(rng, "assistant.message", &data);
            if call {
                self.event(rng, "tool.execution_start", &format!(r#"{{"toolCallId":"{call_id}","toolName":"{tool}","arguments":{args},"turnId":"{turn}"}}"#));
                self.tick(rng, 100, 20_000);
                let n = match rng.below(100) {
                    0..=79 => rng.range(200, 3_000),
                    80..=97 => rng.range(3_000, 24_000),
                    _ => rng.range(24_000, 128_000),
                } as usize;
                let data = if rng.pct(5) {
                    format!(
                        r#"{{"toolCallId":"{call_id}","success":false,"error":{{"message":"Command failed with exit code 1","code":"failure"}}}}"#
                    )
                } else {
                    format!(
                        r#"{{"toolCallId":"{call_id}","success":true,"result":{{"content":{}}}}}"#,
                        js(&tool_output(rng, n))
                    )
                };
                self.event(rng, "tool.execution_complete", &data);
            }
        }
        self.event(
            rng,
            "assistant.turn_end",
            &format!(r#"{{"turnId":"{turn}"}}"#),
        );
        if (n > 5 && rng.pct(2)) || (self.every_shape && n == 1) {
            self.event(rng, "session.compaction_start", "{}");
            let n = rng.range(400, 3_000) as usize;
            let summary = prose(rng, n);
            self.event(
                rng,
                "session.compaction_complete",
                &format!(r#"{{"success":true,"summaryContent":{},"preCompactionTokens":120000,"postCompactionTokens":9000}}"#, js(&summary)),
            );
        }
    }

    fn shutdown(&mut self, rng: &mut Rng, stats: &mut Stats, cumulative: bool) {
        stats.shutdowns += 1;
        self.tick(rng, 1_000, 60_000);
        let which = if cumulative { &self.all } else { &self.segment };
        let metrics: Vec<String> = which
            .iter()
            .map(|(m, t)| {
                format!(
                    r#""{m}":{{"requests":{{"count":{}}},"usage":{{"inputTokens":{},"outputTokens":{},"cacheReadTokens":{},"cacheWriteTokens":{},"reasoningTokens":0}}}}"#,
                    1 + t[1] % 7,
                    t[0],
                    t[1],
                    t[2],
                    t[3]
                )
            })
            .collect();
        let data = format!(
            r#"{{"shutdownType":"routine","totalPremiumRequests":3,"totalApiDurationMs":51234,"sessionStartTime":{},"modelMetrics":{{{}}},"currentModel":"{}","codeChanges":{{"linesAdded":12,"linesRemoved":3,"filesModified":["src/a.rs"]}}}}"#,
            self.ms - 3_600_000,
            metrics.join(","),
            self.model
        );
        self.event(rng, "session.shutdown", &data);
        self.segment.clear();
    }
}

/// Writes a Copilot home of about `total_mb` MB under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0xC0_9110);
    let total = (total_mb * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 0);
    let mut stats = Stats::default();
    for (i, &size) in sizes.iter().enumerate() {
        if stats.bytes >= total {
            break;
        }
        let id = uuid(&mut rng);
        let cwd = CWDS[rng.below(CWDS.len() as u64) as usize];
        let mut s = Session {
            lines: Vec::new(),
            bytes: 0,
            ms: EPOCH_MS + rng.below(200 * DAY_MS as u64) as i64,
            last: None,
            model: MODELS[rng.below(MODELS.len() as u64) as usize],
            segment: Vec::new(),
            all: Vec::new(),
            every_shape: i == 0,
        };
        let data = format!(
            r#"{{"sessionId":"{id}","version":1,"producer":"copilot-agent","copilotVersion":"1.0.80","startTime":"{}","selectedModel":"{}","context":{{"cwd":{},"gitRoot":{},"branch":"main"}}}}"#,
            iso(s.ms),
            s.model,
            js(cwd),
            js(cwd)
        );
        s.event(&mut rng, "session.start", &data);
        if rng.pct(30) {
            s.model = MODELS[rng.below(MODELS.len() as u64) as usize];
            let data = format!(r#"{{"newModel":"{}"}}"#, s.model);
            s.event(&mut rng, "session.model_change", &data);
        }
        let n = rng.range(2_000, 6_000) as usize;
        let system = prose(&mut rng, n);
        s.event(
            &mut rng,
            "system.message",
            &format!(r#"{{"role":"system","content":{}}}"#, js(&system)),
        );
        let cumulative = i == 1 || rng.pct(40);
        let resumed = i <= 1 || rng.pct(20);
        let crashed = i == 2 || (i > 2 && rng.pct(15));
        stats.cumulative += u64::from(cumulative);
        stats.resumed += u64::from(resumed);
        stats.crashed += u64::from(crashed);
        let mut n = 0;
        let half = if resumed { size / 2 } else { size };
        while s.bytes < half || n < 2 {
            s.turn(&mut rng, &mut stats, n);
            if cumulative && rng.pct(10) {
                s.event(
                    &mut rng,
                    "session.usage_checkpoint",
                    r#"{"totalNanoAiu":5000000000}"#,
                );
            }
            n += 1;
        }
        if resumed {
            if cumulative {
                s.event(
                    &mut rng,
                    "session.usage_checkpoint",
                    r#"{"totalNanoAiu":5000000000}"#,
                );
            }
            s.shutdown(&mut rng, &mut stats, cumulative);
            s.tick(&mut rng, 3_600_000, DAY_MS as u64);
            let data = format!(
                r#"{{"resumeTime":"{}","eventCount":{}}}"#,
                iso(s.ms),
                s.lines.len()
            );
            s.event(&mut rng, "session.resume", &data);
            while s.bytes < size {
                s.turn(&mut rng, &mut stats, n);
                n += 1;
            }
        }
        if !crashed {
            s.shutdown(&mut rng, &mut stats, cumulative);
        }
        let path = dir.join("session-state").join(&id).join("events.jsonl");
        fs::create_dir_all(path.parent().expect("has a parent"))?;
        let mut w = BufWriter::new(fs::File::create(&path)?);
        for l in &s.lines {
            w.write_all(l.as_bytes())?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
        stats.bytes += s.bytes;
        stats.lines += s.lines.len() as u64;
        stats.files += 1;
    }
    Ok(stats)
}
