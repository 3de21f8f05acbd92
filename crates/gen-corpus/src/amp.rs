//! Amp archives (`--format amp`): an Amp data folder with the thread
//! shapes of `shared/spec/amp-format.md`, deterministic from the seed.
//!
//! ```text
//! DIR/threads/T-<uuid>.json
//! ```
//!
//! Each thread is one JSON document, as Amp writes it (rewritten whole;
//! here written once).
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - A thread: `v`, `id` (`T-<uuid>`), `created`, `title`, `env.initial`
//!   with one tree (`file://` URI, percent-encoded where the path has a
//!   space) and a `model:` tag, then messages with integer `messageId`s.
//!   Turns: a user prompt (`meta.sentAt`), then 1-5 assistant responses.
//! - An assistant response: a `thinking` block 40% of the time, text, a
//!   `tool_use` block 60% (the last response of a turn: text only), a
//!   `state` (`complete`, `stopReason` `tool_use` or `end_turn`), and
//!   `usage` (`model`, `inputTokens`, `outputTokens`,
//!   `cacheCreationInputTokens`, `cacheReadInputTokens`,
//!   `totalInputTokens`, `credits`, `timestamp`). 2% of usages have no
//!   `timestamp` (ccusage drops them; we count them). A tool call's
//!   result: a user message of one `tool_result` block (`run.status`
//!   `done` 93%, `error` 5%, `cancelled` 2%; `result` `{output,
//!   exitCode}` 0.2-3 KB 80%, 3-24 KB 18%, 24-128 KB 2%).
//! - `info` compaction summaries after 2% of turns past the fifth.
//! - 10% of threads are of the legacy shape: a `usageLedger.events` list,
//!   one event per assistant response (`tokens.input`/`output`,
//!   `toMessageId` the response's id), which alone counts.
//! - 1% of threads end with an assistant message still `running`.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2026-01-05T00:00:00Z.
const EPOCH_MS: i64 = 1_767_571_200_000;
const DAY_MS: i64 = 86_400_000;

const MODELS: [&str; 3] = [
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-5-20251101",
];
const TREES: [&str; 4] = [
    "/home/dev/api",
    "/home/dev/web app",
    "/home/dev/tools/cli",
    "/srv/projects/data-pipeline",
];
const TOOLS: [&str; 5] = ["Bash", "Read", "edit_file", "create_file", "Grep"];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    messages: u64,
    turns: u64,
    responses: u64,
    ledger_threads: u64,
    no_timestamp: u64,
    running: u64,
    summaries: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} threads ({} with a usage ledger, {} ending running), {:.1} \
             MB, {} messages, {} turns, {} responses ({} usages without a timestamp), {} \
             summaries, in {secs:.1}s",
            self.files,
            self.ledger_threads,
            self.running,
            self.bytes as f64 / MB as f64,
            self.messages,
            self.turns,
            self.responses,
            self.no_timestamp,
            self.summaries,
        );
    }
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
}

/// A path as a `file://` URI (a space percent-encoded).
fn file_uri(path: &str) -> String {
    format!("file://{}", path.replace(' ', "%20"))
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

/// One thread of about `size` bytes, its JSON.
fn thread(rng: &mut Rng, size: u64, start: i64, stats: &mut Stats) -> (String, String) {
    let id = format!("T-{}", uuid(rng));
    let tree = rng.pick(&TREES);
    let model = rng.pick(&MODELS);
    let ledger = rng.pct(10);
    let mut ms = start;
    let mut messages: Vec<String> = Vec::new();
    let mut events: Vec<String> = Vec::new();
    let mut bytes = 0u64;
    let mut next_id = 0u64;
    let mut context = rng.range(2_000, 9_000);
    let mut turn = 0u64;
    while bytes < size {
        turn += 1;
        stats.turns += 1;
        ms += rng.range(20_000, 600_000) as i64;
        let n = rng.range(40, 600) as usize;
        let prompt = prose(rng, n);
        let m = format!(
            r#"{{"role":"user","messageId":{next_id},"content":[{{"type":"text","text":{}}}],"meta":{{"sentAt":{ms}}}}}"#,
            js(&prompt)
        );
        next_id += 1;
        bytes += m.len() as u64;
        messages.push(m);
        let responses = rng.range(1, 5);
        for r in 0..responses {
            stats.responses += 1;
            ms += rng.range(2_000, 40_000) as i64;
            let last = r + 1 == responses;
            let mut blocks = Vec::new();
            if rng.pct(40) {
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
            let call = !last && rng.pct(60);
            let call_id = format!("toolu_{}", uuid(rng).replace('-', ""));
            let tool = rng.pick(&TOOLS);
            if call {
                blocks.push(format!(
                    r#"{{"type":"tool_use","id":"{call_id}","name":"{tool}","input":{{"cmd":{},"path":"src/mod_{}.rs"}}}}"#,
                    js(&prose(rng, 40)),
                    rng.below(40)
                ));
            }
            let input = rng.range(1, 40);
            let output = rng.range(20, 2_000);
            let write = if rng.pct(30) {
                rng.range(200, 4_000)
            } else {
                0
            };
            let read = context;
            context += output + rng.range(100, 3_000);
            let stamp = if rng.pct(2) {
                stats.no_timestamp += 1;
                String::new()
            } else {
                format!(r#","timestamp":"{}""#, iso(ms))
            };
            let usage = format!(
                r#"{{"model":"{model}","inputTokens":{input},"outputTokens":{output},"cacheCreationInputTokens":{write},"cacheReadInputTokens":{read},"totalInputTokens":{},"maxInputTokens":200000,"credits":{}{stamp}}}"#,
                input + write + read,
                rng.below(40)
            );
            let stop = if call { "tool_use" } else { "end_turn" };
            let m = format!(
                r#"{{"role":"assistant","messageId":{next_id},"content":[{}],"state":{{"type":"complete","stopReason":"{stop}"}},"usage":{usage}}}"#,
                blocks.join(",")
            );
            if ledger {
                events.push(format!(
                    r#"{{"id":"evt-{}","timestamp":"{}","model":"{model}","credits":{},"tokens":{{"input":{input},"output":{output}}},"operationType":"inference","fromMessageId":{},"toMessageId":{next_id}}}"#,
                    uuid(rng),
                    iso(ms),
                    rng.below(40),
                    next_id.saturating_sub(1)
                ));
            }
            next_id += 1;
            bytes += m.len() as u64;
            messages.push(m);
            if call {
                ms += rng.range(100, 20_000) as i64;
                let s = rng.below(100);
                let status = if s < 93 {
                    "done"
                } else if s < 98 {
                    "error"
                } else {
                    "cancelled"
                };
                let n = result_size(rng);
                let out = tool_output(rng, n);
                let m = format!(
                    r#"{{"role":"user","messageId":{next_id},"content":[{{"type":"tool_result","toolUseID":"{call_id}","run":{{"status":"{status}","result":{{"output":{},"exitCode":{}}}}}}}]}}"#,
                    js(&out),
                    if status == "done" { 0 } else { 1 }
                );
                next_id += 1;
                bytes += m.len() as u64;
                messages.push(m);
            }
        }
        if turn > 5 && rng.pct(2) {
            stats.summaries += 1;
            let n = rng.range(300, 2_000) as usize;
            let m = format!(
                r#"{{"role":"info","messageId":{next_id},"content":[],"summary":{{"type":"message","summary":{}}}}}"#,
                js(&prose(rng, n))
            );
            next_id += 1;
            bytes += m.len() as u64;
            messages.push(m);
        }
    }
    if rng.pct(1) {
        stats.running += 1;
        let m = format!(
            r#"{{"role":"assistant","messageId":{next_id},"content":[{{"type":"text","text":{}}}],"state":{{"type":"running"}}}}"#,
            js(&prose(rng, 200))
        );
        messages.push(m);
    }
    stats.messages += messages.len() as u64;
    stats.ledger_threads += u64::from(ledger);
    let ledger_json = if ledger {
        format!(r#","usageLedger":{{"events":[{}]}}"#, events.join(","))
    } else {
        String::new()
    };
    let json = format!(
        r#"{{"v":{},"id":"{id}","created":{start},"title":{},"agentMode":"smart","env":{{"initial":{{"trees":[{{"displayName":"proj","uri":{}}}],"platform":{{"os":"linux","client":"CLI"}},"tags":["model:{model}"]}}}},"messages":[{}]{ledger_json},"meta":{{}}}}"#,
        messages.len(),
        js(&prose(rng, 40)),
        js(&file_uri(tree)),
        messages.join(",")
    );
    (id, json)
}

/// Writes an Amp data folder of about `total_mb` MB under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0x616d_7000);
    let threads = dir.join("threads");
    fs::create_dir_all(&threads)?;
    let total = (total_mb * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 2_000);
    let mut stats = Stats::default();
    for (i, size) in sizes.into_iter().enumerate() {
        let start = EPOCH_MS + (i as i64 % 60) * DAY_MS + rng.below(DAY_MS as u64 / 2) as i64;
        let (id, json) = thread(&mut rng, size, start, &mut stats);
        let path = threads.join(format!("{id}.json"));
        let mut f = fs::File::create(&path)?;
        f.write_all(json.as_bytes())?;
        stats.files += 1;
        stats.bytes += json.len() as u64;
    }
    Ok(stats)
}
