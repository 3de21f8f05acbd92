//! Claude Code archives (`--format claude`): a Claude Code config folder
//! with the shapes of `shared/spec/claude-code-format.md`, deterministic from
//! the seed.
//!
//! ```text
//! DIR/projects/<cwd with every non-alphanumeric char as '-'>/
//!     <session-uuid>.jsonl                       one session (no header line)
//!     <session-uuid>/subagents/agent-<id>.jsonl  2.1.x subagents, flat at every depth,
//!     <session-uuid>/subagents/agent-<id>.meta.json  with their sidecar
//!     <session-uuid>/tool-results/<toolu_id>.txt     2.1.x oversized Bash output (not a transcript)
//!     agent-<8 hex>.jsonl                        2.0.x subagents, flat beside the sessions
//! ```
//!
//! Two of the project folders hold two cwds each (`/home/dev/my_app` and
//! `/home/dev/my-app` encode alike; so do `.../café` and `.../caf-`): the
//! encoding is lossy, readers take the cwd from each line.
//!
//! # Versions
//!
//! A session's start date picks its Claude Code version, and the version its
//! key order and fields (native order from the real samples; the only real
//! 2.1.231 file is key-sorted, so its extra fields are placed by guess):
//!
//! | version | sessions | starts | what differs |
//! |---|---|---|---|
//! | 1.0.30  |  5% | 2025-06 | as 1.0.128, plus `costUSD` and `durationMs` on assistant lines and no `cache_creation` object in usage |
//! | 1.0.128 | 15% | 2025-07..09 | context keys before the body, `message.id` first; `summary` lines at the top (30%); Task sidechains inline in the session file (`isSidechain`, no `agentId`); `Running PostToolUse:...` system lines |
//! | 2.0.28  | 10% | 2025-10 | `message.model` first; subagents flat in `agent-<8 hex>.jsonl`, `Warmup` agents; `progress` lines: `hook_progress`, `bash_progress`, and `agent_progress` nesting each subagent line (usage included) |
//! | 2.0.55  | 20% | 2025-11..2026-01 | as 2.0.28 |
//! | 2.1.152 | 25% | 2026-01..05 | context keys after the body (`userType, entrypoint, cwd, sessionId, version, gitBranch`), `promptId`, `permissionMode`, `sourceToolAssistantUUID`, `stop_details`, `inference_geo`, `iterations`, `speed`; attachments; subagents in `<session>/subagents/` with `.meta.json`; each tool result right after its `tool_use` line; `last-prompt`, `ai-title` |
//! | 2.1.231 | 25% | 2026-06..08 | as 2.1.152, plus `slug`, `effort`, `attributionAgent` (subagents), `diagnostics`, tool_use `caller`, empty thinking text, `iterations` entries, `output_tokens_details`; no `toolUseResult` in subagent files |
//!
//! The first six sessions of an archive take the six versions in order, each
//! with a subagent (a fork in 2.1) and a compaction, and the seventh resumes
//! the first: a small archive holds every shape that does not need size.
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - Responses: a thinking block 60% (25% in 1.0.x), text 75%, tool calls 0
//!   (30%), 1 (50%), 2-4 (20%); at least one block. **One line per content
//!   block**, the lines sharing `message.id` and `requestId`: earlier lines
//!   carry provisional usage (`stop_reason:null`, `output_tokens` 1-8, the
//!   full input and cache counts), the last line the final usage.
//!   **Provisional-only**: 20% of responses never get their final line.
//!   `<synthetic>` lines (zero usage, no `requestId`): an API error
//!   (`isApiErrorMessage`) before 1% of responses, "No response requested."
//!   after the interrupts that end 0.5% of turns. `stop_reason` `max_tokens`
//!   0.5%; 2.1.231 final usage `speed:"fast"` 3% (ccusage's `-fast` models).
//! - Tools (weights): Read 30, Bash 25, Edit 15, Grep 8, TodoWrite 5, Glob 5,
//!   Write 4, Agent (Task before 2.1) 4, WebFetch 2, mcp 2. Output sizes:
//!   80% 0.2-3 KB, 15% 3-24 KB, 4.8% 24-128 KB, 0.2% 256 KB-2 MB (Read and
//!   Bash only); `toolUseResult` repeats Read and Bash output, Edit's holds
//!   the `originalFile`. Errors 4% (`is_error`, `toolUseResult` a string).
//!   1% of last calls are rejected: `[Request interrupted by user for tool
//!   use]` text beside the tool_result, the turn ends. Before 2.1 the results
//!   of a multi-call response share one user line 30% of the time (no
//!   `toolUseResult` then). Half of the 2.1 Bash outputs over 24 KB go to
//!   `tool-results/<id>.txt`, the transcript keeping a 2 KB preview. Images:
//!   0.2% of prompts, 30-800 KB of base64.
//! - Subagents: one per Agent/Task call, 20-600 KB (Pareto). 2.1: 30% are
//!   forks that first replay the parent's last 2-8 conversational lines
//!   (same `message.id`, one new `requestId` per response, new uuids); 10%
//!   of a subagent's Agent picks spawn a depth-2 agent (a sibling file).
//!   2.0: 25% of sessions start with a `Warmup` agent. Subagent files carry
//!   the parent's `sessionId` and their `agentId` on every line.
//! - Sessions: sizes as pi archives have them (a few of 10%, 6%, 4% of the
//!   total, Pareto below), each aiming low by what earlier ones overshot.
//!   8% resume the last session of their project: they start by replaying
//!   its first conversational lines (up to 1 MiB) with the same uuids and
//!   their own `sessionId`. Compaction after 1.5-5 MB of lines, or after
//!   0.5% of turns: `compact_boundary` (`parentUuid:null`,
//!   `logicalParentUuid`), then an `isCompactSummary` user line; 30% of
//!   them replay the last lines with new uuids but the same parentUuid and
//!   timestamp. 20% of sessions change `cwd` (in 5% of their turns). 2.x:
//!   25% are `sdk-cli` sessions that open with `enqueue`/`dequeue`; 3% of
//!   responses are followed by steering (`enqueue`, then `remove` (2.1 adds
//!   a `queued_command` attachment) or 10% `popAll`).
//! - Around prompts (2.x main sessions): a `file-history-snapshot` before
//!   each (half empty, half 1-20 files; 0.25% huge, 1-4 MB) and an
//!   `isSnapshotUpdate` after 30% of edits. Slash commands (an `isMeta`
//!   caveat, the command, its output; `local_command` system lines in 2.1)
//!   in 4% of turns. 2.1: `deferred_tools_delta` and `skill_listing` at the
//!   start (and in half of the subagents), hook attachments after 25% of
//!   prompts and 20% of edits, `stop_hook_summary` after 10% of turns,
//!   `ai-title` after the first response (then 0.5%), `permission-mode` in
//!   2% of turns, `last-prompt` at the end of 70% of sessions; `custom-title`
//!   in 3% of 2.x sessions. 2.0: `hook_progress` after 30% of edits and 20%
//!   of prompts, `bash_progress` (1-6 polls) for 20% of Bash calls.
//!
//! # Byte mix (seed 1, `--total-mb 300`: 3,965 files, 300 MB, 69,864 lines)
//!
//! | line type | lines | bytes |
//! |---|---|---|
//! | `user` tool_result | 11,672 | 54.8% |
//! | `user` prompt, meta, compact summary | 7,613 | 4.9% |
//! | `assistant` (provisional 14.3%, final 6.8%, synthetic 0.1%) | 33,270 | 21.1% |
//! | `file-history-snapshot` | 4,617 | 8.4% |
//! | `attachment` (`skill_listing` 5.8%) | 4,538 | 7.3% |
//! | `progress` (`agent_progress` 1.7%) | 2,380 | 2.8% |
//! | `queue-operation`, `system`, titles, `last-prompt`, `summary` | 5,774 | 0.6% |
//!
//! ccusage 20.0.24 (`claude daily`) counts 1.47e9 tokens in that archive;
//! summing the usage of every line would give 2.35 times as many.
//!
//! Shapes that no sample shows and were decided here: the
//! `trackedFileBackups` entries (`{backupFileName, version, backupTime}`),
//! the `tool-results/` preview text, the attachment payloads other than
//! `deferred_tools_delta`/`skill_listing`, the `progress` payloads, the
//! `custom-title`/`permission-mode` lines (keys as claude-code-log names
//! them), `<synthetic>` lines, and where 2.1 puts `toolUseResult`,
//! `sourceToolAssistantUUID`, `agentId` and `slug`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{alnum, hex, iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, B64, MB, WORDS};

// ---------------------------------------------------------------------------
// JSON writing: keys and values appended to a line, commas where needed.

/// A comma unless an object or array was just opened.
fn sep(l: &mut Vec<u8>) {
    if !matches!(l.last(), None | Some(b'{' | b'[')) {
        l.push(b',');
    }
}

fn key(l: &mut Vec<u8>, k: &str) {
    sep(l);
    json_str(l, k);
    l.push(b':');
}

fn kstr(l: &mut Vec<u8>, k: &str, v: &str) {
    key(l, k);
    json_str(l, v);
}

fn knum(l: &mut Vec<u8>, k: &str, v: u64) {
    key(l, k);
    l.extend_from_slice(v.to_string().as_bytes());
}

fn kbool(l: &mut Vec<u8>, k: &str, v: bool) {
    key(l, k);
    l.extend_from_slice(if v { b"true" } else { b"false" });
}

fn kraw(l: &mut Vec<u8>, k: &str, v: &[u8]) {
    key(l, k);
    l.extend_from_slice(v);
}

fn kopt(l: &mut Vec<u8>, k: &str, v: Option<&str>) {
    key(l, k);
    match v {
        Some(v) => json_str(l, v),
        None => l.extend_from_slice(b"null"),
    }
}

/// `"k":{`; the caller closes it.
fn kobj(l: &mut Vec<u8>, k: &str) {
    key(l, k);
    l.push(b'{');
}

/// `"k":[`; the caller closes it.
fn karr(l: &mut Vec<u8>, k: &str) {
    key(l, k);
    l.push(b'[');
}

/// A string array element.
fn istr(l: &mut Vec<u8>, v: &str) {
    sep(l);
    json_str(l, v);
}

/// `{"type":"text","text":...}` as an array element.
fn text_block(l: &mut Vec<u8>, text: &str) {
    sep(l);
    l.extend_from_slice(b"{\"type\":\"text\",\"text\":");
    json_str(l, text);
    l.push(b'}');
}

// ---------------------------------------------------------------------------
// Versions, projects, names

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Era {
    V1_0,
    V2_0,
    V2_1,
}

struct Profile {
    version: &'static str,
    era: Era,
    /// 2.1.231's additions (slug, effort, attributionAgent, diagnostics,
    /// caller, empty thinking, output_tokens_details, iterations entries).
    newest: bool,
    /// `costUSD` on assistant lines (and no `cache_creation` object).
    cost_usd: bool,
    /// Start window, days after 2025-06-01.
    first_day: u64,
    days: u64,
    /// Percent of sessions.
    weight: u64,
    models: &'static [&'static str],
    /// The model of helper subagents.
    agent_model: &'static str,
}

const PROFILES: &[Profile] = &[
    Profile {
        version: "1.0.30",
        era: Era::V1_0,
        newest: false,
        cost_usd: true,
        first_day: 0,
        days: 30,
        weight: 5,
        models: &["claude-sonnet-4-20250514", "claude-opus-4-20250514"],
        agent_model: "claude-3-5-haiku-20241022",
    },
    Profile {
        version: "1.0.128",
        era: Era::V1_0,
        newest: false,
        cost_usd: false,
        first_day: 30,
        days: 92,
        weight: 15,
        models: &["claude-sonnet-4-20250514", "claude-opus-4-1-20250805"],
        agent_model: "claude-3-5-haiku-20241022",
    },
    Profile {
        version: "2.0.28",
        era: Era::V2_0,
        newest: false,
        cost_usd: false,
        first_day: 122,
        days: 31,
        weight: 10,
        models: &["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"],
        agent_model: "claude-haiku-4-5-20251001",
    },
    Profile {
        version: "2.0.55",
        era: Era::V2_0,
        newest: false,
        cost_usd: false,
        first_day: 153,
        days: 75,
        weight: 20,
        models: &["claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101"],
        agent_model: "claude-haiku-4-5-20251001",
    },
    Profile {
        version: "2.1.152",
        era: Era::V2_1,
        newest: false,
        cost_usd: false,
        first_day: 228,
        days: 137,
        weight: 25,
        models: &["claude-opus-4-7", "claude-sonnet-4-5-20250929"],
        agent_model: "claude-haiku-4-5-20251001",
    },
    Profile {
        version: "2.1.231",
        era: Era::V2_1,
        newest: true,
        cost_usd: false,
        first_day: 365,
        days: 92,
        weight: 25,
        models: &["claude-opus-5", "claude-sonnet-4-5-20250929"],
        agent_model: "claude-haiku-4-5-20251001",
    },
];

/// 2025-06-01T00:00:00Z.
const CC_EPOCH_MS: i64 = 1_748_736_000_000;
const DAY_MS: i64 = 86_400_000;

const PROJECTS: &[&str] = &[
    "/home/dev/mem-ingest",
    "/home/dev/my_app",
    "/home/dev/my-app",
    "/home/dev/site.example.com",
    "/Users/dana/Code Projects/billing-api",
    "/Users/dana/work/infra/terraform",
    "/home/dev/café",
    "/home/dev/caf-",
    "/workspace/monorepo",
    "/home/user/BookMinder",
];

const SUBDIRS: &[&str] = &["crates/core", "web", "docs/guide", "scripts"];
const BRANCHES: &[&str] = &[
    "main",
    "main",
    "feature/streaming-reader",
    "HEAD",
    "fix/usage-dedupe",
];
const PERMISSION_MODES: &[&str] = &[
    "default",
    "default",
    "acceptEdits",
    "plan",
    "bypassPermissions",
    "dontAsk",
];
const SLUG_WORDS: &[&str] = &[
    "soft", "seeking", "ladybug", "quiet", "amber", "falcon", "gentle", "river", "brave", "otter",
    "cosmic", "maple", "lucky", "heron", "swift", "pebble",
];
const AGENT_TYPES: &[&str] = &["general-purpose", "Explore", "Plan", "worker-opus"];

/// Claude Code's project folder name: every char outside `[A-Za-z0-9]`
/// becomes `-` (lossy).
fn encode_cwd(cwd: &str) -> String {
    cwd.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn msg_id(rng: &mut Rng) -> String {
    let mut s = String::from("msg_01");
    alnum(rng, 22, &mut s);
    s
}

fn req_id(rng: &mut Rng) -> String {
    let mut s = String::from("req_011C");
    alnum(rng, 20, &mut s);
    s
}

fn toolu_id(rng: &mut Rng) -> String {
    let mut s = String::from("toolu_01");
    alnum(rng, 22, &mut s);
    s
}

fn b64(rng: &mut Rng, n: usize, out: &mut Vec<u8>) {
    let mut left = n;
    while left > 0 {
        let mut x = rng.next();
        for _ in 0..left.min(10) {
            out.push(B64[(x & 63) as usize]);
            x >>= 6;
        }
        left -= left.min(10);
    }
}

/// Size of a tool output: 80% 0.2-3 KB, 15% 3-24 KB, 4.8% 24-128 KB, 0.2%
/// 256 KB-2 MB (the last only where `large` is allowed).
fn result_size(rng: &mut Rng, large: bool) -> usize {
    (match rng.below(1000) {
        0..=799 => rng.range(200, 3 * 1024),
        800..=949 => rng.range(3 * 1024, 24 * 1024),
        950..=997 => rng.range(24 * 1024, 128 * 1024),
        _ if large => rng.range(256 * 1024, 2 * MB),
        _ => rng.range(24 * 1024, 128 * 1024),
    }) as usize
}

// ---------------------------------------------------------------------------
// Counting

/// Lines and bytes per kind of line, and the shapes written. A kind is the
/// line's `type`, refined as `tests/gen_claude.rs` classifies it.
#[derive(Default)]
pub(crate) struct Stats {
    kinds: BTreeMap<&'static str, (u64, u64)>,
    sessions: u64,
    resumed: u64,
    resumed_lines: u64,
    subagents: u64,
    meta_files: u64,
    flat_agents: u64,
    fork_agents: u64,
    fork_lines: u64,
    inline_sidechain_lines: u64,
    tool_results_files: u64,
    responses: u64,
    streamed: u64,
    provisional_only: u64,
    synthetic: u64,
    compactions: u64,
    compaction_replays: u64,
    large_results: u64,
    huge_snapshots: u64,
    cwd_changes: u64,
    progress_usage: u64,
    files: u64,
    bytes: u64,
}

impl Stats {
    fn add(&mut self, kind: &'static str, bytes: u64) {
        let e = self.kinds.entry(kind).or_default();
        e.0 += 1;
        e.1 += bytes;
    }

    fn merge(&mut self, o: Stats) {
        for (k, (n, b)) in o.kinds {
            let e = self.kinds.entry(k).or_default();
            e.0 += n;
            e.1 += b;
        }
        self.sessions += o.sessions;
        self.resumed += o.resumed;
        self.resumed_lines += o.resumed_lines;
        self.subagents += o.subagents;
        self.meta_files += o.meta_files;
        self.flat_agents += o.flat_agents;
        self.fork_agents += o.fork_agents;
        self.fork_lines += o.fork_lines;
        self.inline_sidechain_lines += o.inline_sidechain_lines;
        self.tool_results_files += o.tool_results_files;
        self.responses += o.responses;
        self.streamed += o.streamed;
        self.provisional_only += o.provisional_only;
        self.synthetic += o.synthetic;
        self.compactions += o.compactions;
        self.compaction_replays += o.compaction_replays;
        self.large_results += o.large_results;
        self.huge_snapshots += o.huge_snapshots;
        self.cwd_changes += o.cwd_changes;
        self.progress_usage += o.progress_usage;
        self.files += o.files;
        self.bytes += o.bytes;
    }

    /// The summary gen-corpus prints to stderr. `tests/gen_claude.rs` reads
    /// the table: type rows indented by two spaces, kind rows by four.
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let total: u64 = self.kinds.values().map(|v| v.1).sum();
        let lines: u64 = self.kinds.values().map(|v| v.0).sum();
        let _ = writeln!(
            err,
            "gen-corpus: claude {what}: {} files, {:.1} MB, {lines} lines, in {secs:.1}s",
            self.files,
            self.bytes as f64 / MB as f64
        );
        let _ = writeln!(
            err,
            "  sessions {} ({} resumed, replaying {} lines); subagent files {} ({} with .meta.json, {} flat; {} replay {} parent lines with a new requestId); {} inline sidechain lines; {} tool-results files",
            self.sessions,
            self.resumed,
            self.resumed_lines,
            self.subagents,
            self.meta_files,
            self.flat_agents,
            self.fork_agents,
            self.fork_lines,
            self.inline_sidechain_lines,
            self.tool_results_files
        );
        let _ = writeln!(
            err,
            "  responses {}: {} streamed over 2+ lines, {} provisional-only; {} <synthetic> lines; {} agent_progress lines with usage",
            self.responses, self.streamed, self.provisional_only, self.synthetic, self.progress_usage
        );
        let _ = writeln!(
            err,
            "  compactions {} ({} lines replayed); tool results over 256 KiB {}; snapshots over 1 MiB {}; cwd changes {}",
            self.compactions,
            self.compaction_replays,
            self.large_results,
            self.huge_snapshots,
            self.cwd_changes
        );
        let _ = writeln!(
            err,
            "  {:<34}{:>10}{:>14}{:>8}",
            "line type / kind", "lines", "bytes", "bytes%"
        );
        let pct = |b: u64| 100.0 * b as f64 / total.max(1) as f64;
        let mut types: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (k, &(n, b)) in &self.kinds {
            let e = types.entry(k.split('/').next().unwrap_or(k)).or_default();
            e.0 += n;
            e.1 += b;
        }
        for (ty, &(n, b)) in &types {
            let _ = writeln!(err, "  {ty:<34}{n:>10}{b:>14}{:>8.1}", pct(b));
            let sub = self
                .kinds
                .iter()
                .filter(|(k, _)| k.split_once('/').is_some_and(|(t, _)| t == *ty));
            for (k, &(n, b)) in sub {
                let _ = writeln!(err, "    {k:<32}{n:>10}{b:>14}{:>8.1}", pct(b));
            }
        }
        let _ = writeln!(err, "  {:<34}{lines:>10}{total:>14}{:>8.1}", "total", 100.0);
    }
}

/// Where a conversation's lines go: a file of their own or, for 1.0.x
/// inline sidechains, a buffer the parent copies into its file.
enum Sink {
    File(BufWriter<fs::File>),
    Mem(Vec<u8>),
}

struct Out {
    sink: Sink,
    bytes: u64,
}

impl Out {
    fn create(path: &Path) -> io::Result<Out> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let f = fs::File::create(path)?;
        Ok(Out {
            sink: Sink::File(BufWriter::with_capacity(1 << 20, f)),
            bytes: 0,
        })
    }

    fn mem() -> Out {
        Out {
            sink: Sink::Mem(Vec::new()),
            bytes: 0,
        }
    }

    fn write(&mut self, b: &[u8]) -> io::Result<()> {
        self.bytes += b.len() as u64;
        match &mut self.sink {
            Sink::File(w) => w.write_all(b),
            Sink::Mem(v) => {
                v.extend_from_slice(b);
                Ok(())
            }
        }
    }

    /// Flushes a file; hands back a buffer's bytes.
    fn finish(self) -> io::Result<Vec<u8>> {
        match self.sink {
            Sink::File(mut w) => {
                w.flush()?;
                Ok(Vec::new())
            }
            Sink::Mem(v) => Ok(v),
        }
    }
}

/// A line kept to be written again elsewhere: the parent's recent lines for
/// a forked subagent, a subagent's lines for 2.0.x `agent_progress`, the
/// last lines before a compaction.
#[derive(Clone)]
struct Echo {
    kind: &'static str,
    /// The `message` object.
    msg: Vec<u8>,
    request_id: Option<String>,
    uuid: String,
    parent: Option<String>,
    ts: i64,
}

/// The first conversational lines of a session, for a later resume.
struct Retained {
    session_id: String,
    lines: Vec<(&'static str, String)>,
    bytes: usize,
    full: bool,
    last_uuid: Option<String>,
    end_ms: i64,
    profile: usize,
}

const RETAIN_CAP: usize = MB as usize;

fn conversational(kind: &str) -> bool {
    kind.starts_with("user")
        || kind.starts_with("assistant")
        || kind.starts_with("system")
        || kind.starts_with("attachment")
}

/// What a file's lines share.
struct Env {
    p: &'static Profile,
    session_id: String,
    cwd: String,
    project_cwd: String,
    branch: &'static str,
    entrypoint: &'static str,
    slug: String,
    /// Subagent files: the agent's id (2.0.x, 2.1.x), type and depth.
    agent: Option<(String, &'static str, u64)>,
    sidechain: bool,
    wander: bool,
}

/// A tool call of a response.
struct Call {
    id: String,
    name: &'static str,
    path: String,
    /// Agent/Task: (description, prompt, subagent type).
    agent: Option<(String, String, &'static str)>,
}

/// A tool result: the tool_result block's `content`, `is_error`, and the
/// line's `toolUseResult`.
struct Body {
    content: Vec<u8>,
    is_error: bool,
    tur: Vec<u8>,
    /// Text beside the tool_result block (a rejected call).
    beside: Option<&'static str>,
}

struct Resp {
    id: String,
    request_id: String,
    model: &'static str,
    input: u64,
    cache_create: u64,
    /// Part of cache_create in the 1h bucket.
    cache_1h: u64,
    cache_read: u64,
    out_prov: u64,
    out_final: u64,
    fast: bool,
}

/// One conversation file being written: a session or a subagent.
struct Conv {
    env: Env,
    out: Out,
    rng: Rng,
    stats: Stats,
    line: Vec<u8>,
    msg: Vec<u8>,
    parent: Option<String>,
    now: i64,
    model: &'static str,
    prompt_id: String,
    prompt_uuid: String,
    last_prompt: String,
    project_dir: PathBuf,
    session_dir: PathBuf,
    /// Bytes written to other files on this conversation's behalf.
    other_bytes: u64,
    /// Bytes to write (here and in other files): past it, the turn ends
    /// with a closing text.
    budget: u64,
    /// The last conversational lines (main files).
    recent: Option<VecDeque<Echo>>,
    /// Every conversational line (2.0.x subagents, for `agent_progress`).
    mirror: Option<Vec<Echo>>,
    retain: Option<Retained>,
    since_compaction: u64,
    next_compaction: u64,
    tool_uses: u64,
    tokens: u64,
    titled: bool,
    /// Coverage: the next tool call spawns a subagent (a fork in 2.1).
    cover_agent: bool,
    /// Coverage: the first turn ends in a compaction.
    cover_compaction: bool,
}

impl Conv {
    fn new(
        env: Env,
        out: Out,
        rng: Rng,
        now: i64,
        project_dir: PathBuf,
        session_dir: PathBuf,
    ) -> Conv {
        let mut rng = rng;
        let helper = env.sidechain && env.agent.as_ref().is_none_or(|a| a.1 != "worker-opus");
        let model = if helper && rng.pct(60) {
            env.p.agent_model
        } else {
            rng.pick(env.p.models)
        };
        let next_compaction = rng.range(3 * MB / 2, 5 * MB);
        Conv {
            env,
            out,
            rng,
            stats: Stats::default(),
            line: Vec::with_capacity(1 << 16),
            msg: Vec::with_capacity(1 << 16),
            parent: None,
            now,
            model,
            prompt_id: String::new(),
            prompt_uuid: String::new(),
            last_prompt: String::new(),
            project_dir,
            session_dir,
            other_bytes: 0,
            budget: 0,
            recent: None,
            mirror: None,
            retain: None,
            since_compaction: 0,
            next_compaction,
            tool_uses: 0,
            tokens: 0,
            titled: false,
            cover_agent: false,
            cover_compaction: false,
        }
    }

    fn era(&self) -> Era {
        self.env.p.era
    }

    fn written(&self) -> u64 {
        self.out.bytes + self.other_bytes
    }

    fn tick(&mut self, lo: u64, hi: u64) -> i64 {
        self.now += self.rng.range(lo, hi) as i64;
        self.now
    }

    // -- envelope ----------------------------------------------------------

    /// `{"parentUuid":..,["logicalParentUuid":..,]"isSidechain":..` and, before
    /// 2.1, the session context.
    fn head(&mut self, parent: Option<&str>, logical: Option<&str>) {
        let l = &mut self.line;
        l.clear();
        l.push(b'{');
        kopt(l, "parentUuid", parent);
        if let Some(lp) = logical {
            kstr(l, "logicalParentUuid", lp);
        }
        kbool(l, "isSidechain", self.env.sidechain);
        if self.env.p.era < Era::V2_1 {
            let e = &self.env;
            kstr(l, "userType", "external");
            kstr(l, "cwd", &e.cwd);
            kstr(l, "sessionId", &e.session_id);
            kstr(l, "version", e.p.version);
            kstr(l, "gitBranch", e.branch);
            if let Some((id, _, _)) = &e.agent {
                kstr(l, "agentId", id);
            }
        }
    }

    fn ids(&mut self, uuid: &str, ts: i64) {
        kstr(&mut self.line, "uuid", uuid);
        kstr(&mut self.line, "timestamp", &iso(ts));
    }

    /// Closes a conversational line (2.1 puts the session context last) and
    /// writes it.
    fn finish(&mut self, kind: &'static str) -> io::Result<()> {
        if self.env.p.era == Era::V2_1 {
            let e = &self.env;
            let l = &mut self.line;
            kstr(l, "userType", "external");
            kstr(l, "entrypoint", e.entrypoint);
            kstr(l, "cwd", &e.cwd);
            kstr(l, "sessionId", &e.session_id);
            kstr(l, "version", e.p.version);
            kstr(l, "gitBranch", e.branch);
            if let Some((id, _, _)) = &e.agent {
                kstr(l, "agentId", id);
            }
            if e.p.newest {
                kstr(l, "slug", &e.slug);
            }
        }
        self.line.push(b'}');
        self.emit(kind)
    }

    /// Writes the line in `self.line` (without its newline), counts it, and
    /// keeps it for a resume while the retained prefix lasts.
    fn emit(&mut self, kind: &'static str) -> io::Result<()> {
        self.line.push(b'\n');
        self.out.write(&self.line)?;
        let n = self.line.len();
        self.stats.add(kind, n as u64);
        self.since_compaction += n as u64;
        if let Some(r) = &mut self.retain {
            if !r.full && conversational(kind) {
                if r.bytes + n > RETAIN_CAP {
                    r.full = true;
                } else {
                    r.bytes += n;
                    r.lines.push((
                        kind,
                        String::from_utf8(self.line.clone()).expect("lines are UTF-8"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Keeps a conversational line for forks, progress and compaction replays.
    fn echo(
        &mut self,
        kind: &'static str,
        request_id: Option<&str>,
        uuid: &str,
        parent: Option<String>,
        ts: i64,
    ) {
        let msg_len = self.msg.len();
        let e = || Echo {
            kind,
            msg: Vec::new(),
            request_id: request_id.map(str::to_owned),
            uuid: uuid.to_owned(),
            parent: parent.clone(),
            ts,
        };
        if let Some(m) = &mut self.mirror {
            let mut x = e();
            x.msg = self.msg.clone();
            m.push(x);
        }
        if let Some(r) = &mut self.recent {
            if msg_len <= 64 * 1024 {
                let mut x = e();
                x.msg = self.msg.clone();
                if r.len() == 8 {
                    r.pop_front();
                }
                r.push_back(x);
            }
        }
    }

    /// The last `n` kept lines, oldest first.
    fn last_echoes(&self, n: usize) -> Vec<Echo> {
        self.recent.as_ref().map_or_else(Vec::new, |r| {
            r.iter().skip(r.len().saturating_sub(n)).cloned().collect()
        })
    }

    /// A line without uuid or envelope (`queue-operation`, titles, ...).
    fn bare(&mut self, ty: &'static str, fields: &[(&str, &str)]) -> io::Result<()> {
        let l = &mut self.line;
        l.clear();
        l.push(b'{');
        kstr(l, "type", ty);
        for (k, v) in fields {
            kstr(l, k, v);
        }
        kstr(l, "sessionId", &self.env.session_id);
        l.push(b'}');
        self.emit(ty)
    }

    // -- user lines ----------------------------------------------------------

    /// A user line whose `message` is in `self.msg`.
    fn user_line(
        &mut self,
        kind: &'static str,
        extra: &[(&str, &[u8])],
        tail: &[(&str, &[u8])],
    ) -> io::Result<String> {
        let u = uuid(&mut self.rng);
        self.user_line_as(u, kind, extra, tail)
    }

    fn user_line_as(
        &mut self,
        u: String,
        kind: &'static str,
        extra: &[(&str, &[u8])],
        tail: &[(&str, &[u8])],
    ) -> io::Result<String> {
        let ts = self.now;
        let parent = self.parent.clone();
        self.head(parent.as_deref(), None);
        if self.era() == Era::V2_1 && !self.prompt_id.is_empty() && kind != "user/meta" {
            kstr(&mut self.line, "promptId", &self.prompt_id);
        }
        kstr(&mut self.line, "type", "user");
        kraw(&mut self.line, "message", &self.msg);
        for (k, v) in extra {
            kraw(&mut self.line, k, v);
        }
        self.ids(&u, ts);
        for (k, v) in tail {
            kraw(&mut self.line, k, v);
        }
        self.finish(kind)?;
        self.echo(kind, None, &u, parent, ts);
        self.parent = Some(u.clone());
        Ok(u)
    }

    /// A typed prompt: a string (65%) or text blocks, 1% with an image.
    fn prompt(&mut self, text: &str) -> io::Result<()> {
        let u = uuid(&mut self.rng);
        self.prompt_uuid = u.clone();
        if self.era() >= Era::V2_0 && self.env.agent.is_none() {
            self.snapshot(false)?;
        }
        self.prompt_id = uuid(&mut self.rng);
        self.tick(5_000, 600_000);
        let image = self.rng.below(500) == 0;
        let blocks = image || self.rng.pct(35);
        let m = &mut self.msg;
        m.clear();
        m.extend_from_slice(b"{\"role\":\"user\",\"content\":");
        if blocks {
            m.push(b'[');
            text_block(m, text);
            if image {
                let n = self.rng.range(30 * 1024, 800 * 1024) as usize / 4 * 4;
                m.extend_from_slice(b",{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo");
                b64(&mut self.rng, n, m);
                m.extend_from_slice(b"\"}}");
            }
            m.push(b']');
        } else {
            json_str(m, text);
        }
        m.push(b'}');
        let mode = format!("\"{}\"", self.rng.pick(PERMISSION_MODES));
        let tail: Vec<(&str, &[u8])> = if self.era() == Era::V2_1 && self.env.agent.is_none() {
            vec![("permissionMode", mode.as_bytes())]
        } else {
            vec![]
        };
        self.last_prompt = text.chars().take(200).collect();
        self.user_line_as(u, "user/prompt", &[], &tail)?;
        Ok(())
    }

    fn plain_user(&mut self, kind: &'static str, text: &str, meta: bool) -> io::Result<()> {
        self.tick(1, 2_000);
        let m = &mut self.msg;
        m.clear();
        m.extend_from_slice(b"{\"role\":\"user\",\"content\":");
        json_str(m, text);
        m.push(b'}');
        let extra: &[(&str, &[u8])] = if meta { &[("isMeta", b"true")] } else { &[] };
        self.user_line(kind, extra, &[])?;
        Ok(())
    }

    /// A slash command: the `isMeta` caveat, the command and its output
    /// (user lines before 2.1, `local_command` system lines in 2.1).
    fn slash_command(&mut self) -> io::Result<()> {
        self.plain_user(
            "user/meta",
            "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages or otherwise consider them in your response unless the user explicitly asks you to.",
            true,
        )?;
        let model = self.rng.pick(self.env.p.models);
        self.model = model;
        let cmd = "<command-name>/model</command-name>\n            <command-message>model</command-message>\n            <command-args></command-args>";
        let out = format!(
            "<local-command-stdout>Set model to \u{1b}[1m{model}\u{1b}[22m</local-command-stdout>"
        );
        if self.era() == Era::V2_1 {
            self.system("local_command", cmd, "info", &[])?;
            self.system("local_command", &out, "info", &[])
        } else {
            self.plain_user("user/prompt", cmd, false)?;
            self.plain_user("user/prompt", &out, false)
        }
    }

    // -- other line types ------------------------------------------------------

    /// A `system` line: `subtype` empty for the 1.0.x hook notices.
    fn system(
        &mut self,
        subtype: &'static str,
        content: &str,
        level: &str,
        extra: &[(&str, &[u8])],
    ) -> io::Result<()> {
        let u = uuid(&mut self.rng);
        let ts = self.tick(1, 1_500);
        let parent = self.parent.clone();
        self.head(parent.as_deref(), None);
        let l = &mut self.line;
        kstr(l, "type", "system");
        if !subtype.is_empty() {
            kstr(l, "subtype", subtype);
        }
        kstr(l, "content", content);
        kbool(l, "isMeta", false);
        kstr(l, "timestamp", &iso(ts));
        kstr(l, "uuid", &u);
        for (k, v) in extra {
            kraw(l, k, v);
        }
        kstr(l, "level", level);
        let kind = match subtype {
            "" => "system",
            "local_command" => "system/local_command",
            "stop_hook_summary" => "system/stop_hook_summary",
            _ => "system/other",
        };
        self.finish(kind)?;
        self.parent = Some(u);
        Ok(())
    }

    fn attachment(&mut self, kind: &'static str) -> io::Result<()> {
        let u = uuid(&mut self.rng);
        let ts = self.tick(1, 50);
        let parent = self.parent.clone();
        self.head(parent.as_deref(), None);
        kraw(&mut self.line, "attachment", &self.msg);
        kstr(&mut self.line, "type", "attachment");
        self.ids(&u, ts);
        self.finish(kind)?;
        self.parent = Some(u);
        Ok(())
    }

    /// The attachments 2.1 writes at the start of a conversation.
    fn start_attachments(&mut self) -> io::Result<()> {
        let m = &mut self.msg;
        m.clear();
        m.push(b'{');
        let names: Vec<String> = (0..self.rng.range(10, 70))
            .map(|i| {
                format!(
                    "mcp__github__{}_{i}",
                    self.rng.pick(WORDS).replace(['\\', '"', '\t'], "x")
                )
            })
            .collect();
        karr(m, "addedLines");
        for n in &names {
            istr(m, n);
        }
        m.push(b']');
        karr(m, "addedNames");
        for n in &names {
            istr(m, n);
        }
        m.push(b']');
        kraw(m, "readdedNames", b"[]");
        kraw(m, "removedNames", b"[]");
        kstr(m, "type", "deferred_tools_delta");
        m.push(b'}');
        self.attachment("attachment/deferred_tools_delta")?;
        let n = self.rng.range(3_000, 15_000) as usize;
        let text = prose(&mut self.rng, n);
        let m = &mut self.msg;
        m.clear();
        m.push(b'{');
        kstr(m, "content", &format!("- session-start-hook: {text}"));
        kbool(m, "isInitial", true);
        karr(m, "names");
        for n in [
            "session-start-hook",
            "pair-programming",
            "tdd-bdd",
            "skill-creator",
        ] {
            istr(m, n);
        }
        m.push(b']');
        knum(m, "skillCount", 4);
        kstr(m, "type", "skill_listing");
        m.push(b'}');
        self.attachment("attachment/skill_listing")
    }

    fn hook_attachment(
        &mut self,
        event: &str,
        name: &str,
        tool_use_id: Option<&str>,
    ) -> io::Result<()> {
        let additional = event == "UserPromptSubmit" && self.rng.pct(30);
        let m = &mut self.msg;
        m.clear();
        m.push(b'{');
        kstr(
            m,
            "type",
            if additional {
                "hook_additional_context"
            } else {
                "hook_success"
            },
        );
        kstr(m, "hookName", name);
        if let Some(t) = tool_use_id {
            kstr(m, "toolUseID", t);
        }
        kstr(m, "hookEvent", event);
        if additional {
            karr(m, "content");
            istr(
                m,
                "Project memory: the parser streams lines; never buffer whole files.",
            );
            m.push(b']');
        } else {
            kstr(m, "content", "");
            kstr(m, "stdout", "ok\n");
            kstr(m, "stderr", "");
            knum(m, "exitCode", 0);
            kstr(
                m,
                "command",
                "$CLAUDE_PROJECT_DIR/.claude/hooks/check.sh \"$FILE\"",
            );
            knum(m, "durationMs", self.rng.range(5, 900));
        }
        m.push(b'}');
        self.attachment(if additional {
            "attachment/hook_additional_context"
        } else {
            "attachment/hook_success"
        })
    }

    /// A `progress` line (2.0.x) with `data` in `self.msg`.
    fn progress(
        &mut self,
        kind: &'static str,
        tool_use_id: &str,
        parent_tool_use_id: &str,
        ts: i64,
    ) -> io::Result<()> {
        let u = uuid(&mut self.rng);
        let parent = self.parent.clone();
        self.head(parent.as_deref(), None);
        kstr(&mut self.line, "type", "progress");
        kraw(&mut self.line, "data", &self.msg);
        kstr(&mut self.line, "toolUseID", tool_use_id);
        kstr(&mut self.line, "parentToolUseID", parent_tool_use_id);
        self.ids(&u, ts);
        self.line.push(b'}');
        self.emit(kind)?;
        self.parent = Some(u);
        Ok(())
    }

    fn hook_progress(&mut self, event: &str, name: &str, tool_use_id: &str) -> io::Result<()> {
        let ts = self.tick(1, 300);
        let m = &mut self.msg;
        m.clear();
        m.push(b'{');
        kstr(m, "type", "hook_progress");
        kstr(m, "hookEvent", event);
        kstr(m, "hookName", name);
        kstr(m, "command", "$CLAUDE_PROJECT_DIR/.claude/hooks/fmt.sh");
        m.push(b'}');
        self.progress("progress/hook_progress", tool_use_id, tool_use_id, ts)
    }

    /// 2.0.x running-command progress: the tail and the output so far.
    fn bash_progress(&mut self, call_id: &str, output: &str) -> io::Result<()> {
        let polls = self.rng.range(1, 6);
        let lines_total = output.lines().count() as u64;
        for k in 1..=polls {
            let ts = self.tick(1_000, 3_000);
            let mut cut = (output.len() as u64 * k / (polls + 1)).min(30 * 1024) as usize;
            while !output.is_char_boundary(cut) {
                cut -= 1;
            }
            let full = &output[..cut];
            let mut tail_start = full.len().saturating_sub(400);
            while !full.is_char_boundary(tail_start) {
                tail_start += 1;
            }
            let m = &mut self.msg;
            m.clear();
            m.push(b'{');
            kstr(m, "type", "bash_progress");
            kstr(m, "output", &full[tail_start..]);
            kstr(m, "fullOutput", full);
            knum(m, "elapsedTimeSeconds", k * 2);
            knum(m, "totalLines", lines_total * k / (polls + 1));
            m.push(b'}');
            self.progress("progress/bash_progress", call_id, call_id, ts)?;
        }
        Ok(())
    }

    /// `file-history-snapshot` for the current prompt: half empty, half 1-20
    /// files, 0.25% huge (1-4 MB of tracked files).
    fn snapshot(&mut self, update: bool) -> io::Result<()> {
        let huge = self.rng.below(400) == 0;
        let files = if huge {
            self.rng.range(MB, 4 * MB) / 130
        } else if self.rng.pct(50) && !update {
            0
        } else {
            self.rng.range(1, 20)
        };
        let ts = iso(self.now);
        let l = &mut self.line;
        l.clear();
        l.push(b'{');
        kstr(l, "type", "file-history-snapshot");
        kstr(l, "messageId", &self.prompt_uuid);
        kobj(l, "snapshot");
        kstr(l, "messageId", &self.prompt_uuid);
        kobj(l, "trackedFileBackups");
        for i in 0..files {
            let path = format!("src/module_{}/file_{i}.rs", i % 97);
            kobj(l, &path);
            let mut name = String::with_capacity(24);
            hex(&mut self.rng, 16, &mut name);
            let v = self.rng.range(1, 9);
            name.push_str(&format!("@v{v}"));
            kstr(l, "backupFileName", &name);
            knum(l, "version", v);
            kstr(l, "backupTime", &ts);
            l.push(b'}');
        }
        l.push(b'}');
        kstr(l, "timestamp", &ts);
        l.push(b'}');
        kbool(l, "isSnapshotUpdate", update);
        l.push(b'}');
        if huge {
            self.stats.huge_snapshots += 1;
        }
        self.emit("file-history-snapshot")
    }

    fn queue_op(&mut self, op: &str, content: Option<&str>) -> io::Result<()> {
        let ts = iso(self.tick(1, 200));
        let l = &mut self.line;
        l.clear();
        l.push(b'{');
        kstr(l, "type", "queue-operation");
        kstr(l, "operation", op);
        kstr(l, "timestamp", &ts);
        let v21 = self.env.p.era == Era::V2_1;
        if v21 {
            kstr(l, "sessionId", &self.env.session_id);
        }
        if let Some(c) = content {
            if v21 || op == "remove" {
                kstr(l, "content", c);
            } else {
                karr(l, "content");
                text_block(l, c);
                l.push(b']');
            }
        }
        if !v21 {
            kstr(l, "sessionId", &self.env.session_id);
        }
        l.push(b'}');
        self.emit("queue-operation")
    }

    /// Mid-turn steering: queued input the user removes into the turn.
    fn steering(&mut self) -> io::Result<()> {
        let n = self.rng.range(20, 300) as usize;
        let text = prose(&mut self.rng, n);
        self.queue_op("enqueue", Some(&text))?;
        if self.rng.pct(10) {
            return self.queue_op("popAll", Some(&text));
        }
        self.queue_op("remove", Some(&text))?;
        if self.era() == Era::V2_1 {
            let m = &mut self.msg;
            m.clear();
            m.push(b'{');
            kstr(m, "type", "queued_command");
            kstr(m, "prompt", &text);
            m.push(b'}');
            self.attachment("attachment/queued_command")?;
        }
        Ok(())
    }

    // -- assistant lines --------------------------------------------------------

    fn new_resp(&mut self) -> Resp {
        let r = &mut self.rng;
        let input = if self.env.p.era == Era::V1_0 || r.pct(30) {
            r.range(3, 5_000)
        } else {
            r.range(1, 12)
        };
        let cache_create = if r.pct(60) {
            r.range(0, 3_000)
        } else {
            r.range(3_000, 40_000)
        };
        let cache_1h = match r.below(10) {
            0..=4 => 0,
            5..=8 => cache_create,
            _ => cache_create / 3,
        };
        let cache_read = r.range(0, 180_000);
        let out_final = match r.below(100) {
            0..=69 => r.range(20, 800),
            70..=94 => r.range(800, 4_000),
            _ => r.range(4_000, 32_000),
        };
        let out_prov = r.pick(&[1, 2, 2, 2, 3, 5, 6, 8]);
        let fast = self.env.p.newest && r.pct(3);
        Resp {
            id: msg_id(r),
            request_id: req_id(r),
            model: self.model,
            input,
            cache_create,
            cache_1h,
            cache_read,
            out_prov,
            out_final,
            fast,
        }
    }

    fn usage(&self, l: &mut Vec<u8>, r: &Resp, fin: bool) {
        let p = self.env.p;
        let out = if fin { r.out_final } else { r.out_prov };
        kobj(l, "usage");
        knum(l, "input_tokens", r.input);
        knum(l, "cache_creation_input_tokens", r.cache_create);
        knum(l, "cache_read_input_tokens", r.cache_read);
        let cache_obj = |l: &mut Vec<u8>, one_h_first: bool| {
            kobj(l, "cache_creation");
            if one_h_first {
                knum(l, "ephemeral_1h_input_tokens", r.cache_1h);
                knum(l, "ephemeral_5m_input_tokens", r.cache_create - r.cache_1h);
            } else {
                knum(l, "ephemeral_5m_input_tokens", r.cache_create - r.cache_1h);
                knum(l, "ephemeral_1h_input_tokens", r.cache_1h);
            }
            l.push(b'}');
        };
        match p.era {
            _ if p.cost_usd => {
                knum(l, "output_tokens", out);
                kstr(l, "service_tier", "standard");
            }
            Era::V1_0 | Era::V2_0 => {
                cache_obj(l, false);
                knum(l, "output_tokens", out);
                kstr(l, "service_tier", "standard");
            }
            Era::V2_1 => {
                knum(l, "output_tokens", out);
                if fin {
                    kraw(
                        l,
                        "server_tool_use",
                        b"{\"web_search_requests\":0,\"web_fetch_requests\":0}",
                    );
                }
                kstr(l, "service_tier", "standard");
                cache_obj(l, true);
                kstr(l, "inference_geo", "not_available");
                if fin {
                    karr(l, "iterations");
                    if p.newest {
                        l.push(b'{');
                        cache_obj(l, true);
                        knum(l, "cache_creation_input_tokens", r.cache_create);
                        knum(l, "cache_read_input_tokens", r.cache_read);
                        knum(l, "input_tokens", r.input);
                        knum(l, "output_tokens", out);
                        kstr(l, "type", "message");
                        l.push(b'}');
                    }
                    l.push(b']');
                    if p.newest {
                        kobj(l, "output_tokens_details");
                        knum(l, "thinking_tokens", out / 3);
                        l.push(b'}');
                    }
                    kstr(l, "speed", if r.fast { "fast" } else { "standard" });
                }
            }
        }
        l.push(b'}');
    }

    /// One line of a streamed response holding `block` (a content block's
    /// JSON); `fin` marks the line with the final usage.
    fn assistant_line(
        &mut self,
        r: &Resp,
        block: &[u8],
        fin: bool,
        stop: &str,
    ) -> io::Result<String> {
        let p = self.env.p;
        let mut m = std::mem::take(&mut self.msg);
        m.clear();
        m.push(b'{');
        if p.era == Era::V1_0 {
            kstr(&mut m, "id", &r.id);
            kstr(&mut m, "type", "message");
            kstr(&mut m, "role", "assistant");
            kstr(&mut m, "model", r.model);
        } else {
            kstr(&mut m, "model", r.model);
            kstr(&mut m, "id", &r.id);
            kstr(&mut m, "type", "message");
            kstr(&mut m, "role", "assistant");
        }
        karr(&mut m, "content");
        m.extend_from_slice(block);
        m.push(b']');
        kopt(&mut m, "stop_reason", if fin { Some(stop) } else { None });
        kraw(&mut m, "stop_sequence", b"null");
        if p.era == Era::V2_1 {
            kraw(&mut m, "stop_details", b"null");
            if p.newest {
                kraw(&mut m, "diagnostics", b"null");
            }
        }
        self.usage(&mut m, r, fin);
        m.push(b'}');
        self.msg = m;
        let u = uuid(&mut self.rng);
        let ts = self.tick(50, 1_500);
        let parent = self.parent.clone();
        self.head(parent.as_deref(), None);
        kraw(&mut self.line, "message", &self.msg);
        if p.cost_usd {
            let out = if fin { r.out_final } else { r.out_prov };
            let cost = (r.input as f64 * 3.0
                + out as f64 * 15.0
                + r.cache_create as f64 * 3.75
                + r.cache_read as f64 * 0.3)
                / 1e6;
            let l = &mut self.line;
            key(l, "costUSD");
            l.extend_from_slice(format!("{cost}").as_bytes());
            knum(l, "durationMs", self.rng.range(800, 40_000));
        }
        kstr(&mut self.line, "requestId", &r.request_id);
        kstr(&mut self.line, "type", "assistant");
        self.ids(&u, ts);
        if p.newest {
            if let Some((_, ty, _)) = &self.env.agent {
                kstr(&mut self.line, "attributionAgent", ty);
            }
            kstr(&mut self.line, "effort", "xhigh");
        }
        let kind = if fin {
            "assistant/final"
        } else {
            "assistant/provisional"
        };
        self.finish(kind)?;
        self.echo(kind, Some(&r.request_id), &u, parent, ts);
        self.parent = Some(u.clone());
        Ok(u)
    }

    /// A `<synthetic>` line: an API error stand-in or the answer to an
    /// interrupt. No requestId, zero usage.
    fn synthetic(&mut self, api_error: bool) -> io::Result<()> {
        let u = uuid(&mut self.rng);
        let id = uuid(&mut self.rng);
        let ts = self.tick(100, 30_000);
        let text = if api_error {
            "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"
        } else {
            "No response requested."
        };
        let m = &mut self.msg;
        m.clear();
        m.push(b'{');
        kstr(m, "id", &id);
        kstr(m, "model", "<synthetic>");
        kstr(m, "role", "assistant");
        kstr(m, "stop_reason", "stop_sequence");
        kstr(m, "stop_sequence", "");
        kstr(m, "type", "message");
        kraw(m, "usage", b"{\"input_tokens\":0,\"output_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,\"server_tool_use\":{\"web_search_requests\":0,\"web_fetch_requests\":0},\"service_tier\":null,\"cache_creation\":{\"ephemeral_1h_input_tokens\":0,\"ephemeral_5m_input_tokens\":0}}");
        karr(m, "content");
        text_block(m, text);
        m.extend_from_slice(b"]}");
        let parent = self.parent.clone();
        self.head(parent.as_deref(), None);
        kraw(&mut self.line, "message", &self.msg);
        kstr(&mut self.line, "type", "assistant");
        self.ids(&u, ts);
        if api_error {
            kbool(&mut self.line, "isApiErrorMessage", true);
        }
        self.finish("assistant/synthetic")?;
        self.stats.synthetic += 1;
        self.parent = Some(u);
        Ok(())
    }

    fn pick_tool(&mut self) -> &'static str {
        const TOOLS: &[(&str, u64)] = &[
            ("Read", 30),
            ("Bash", 25),
            ("Edit", 15),
            ("Grep", 8),
            ("TodoWrite", 5),
            ("Glob", 5),
            ("Write", 4),
            ("Agent", 4),
            ("WebFetch", 2),
            ("mcp__github__search_code", 2),
        ];
        if self.cover_agent {
            return if self.era() < Era::V2_1 {
                "Task"
            } else {
                "Agent"
            };
        }
        let mut x = self.rng.below(100);
        for &(t, w) in TOOLS {
            if x < w {
                // Only 2.1 agents spawn agents (depth 2 at most).
                let nested_ok = match &self.env.agent {
                    _ if !self.env.sidechain => true,
                    Some((_, _, depth)) => {
                        self.era() == Era::V2_1 && *depth == 1 && self.rng.pct(10)
                    }
                    None => false,
                };
                return match t {
                    "Agent" if !nested_ok => "Grep",
                    "Agent" if self.era() < Era::V2_1 => "Task",
                    t => t,
                };
            }
            x -= w;
        }
        "Read"
    }

    /// A tool_use block and its call.
    fn tool_use(&mut self, out: &mut Vec<u8>) -> Call {
        let name = self.pick_tool();
        let id = toolu_id(&mut self.rng);
        let path = format!(
            "{}/src/module_{}/file_{}.rs",
            self.env.cwd,
            self.rng.below(40),
            self.rng.below(60)
        );
        let mut agent = None;
        out.clear();
        out.push(b'{');
        kstr(out, "type", "tool_use");
        kstr(out, "id", &id);
        kstr(out, "name", name);
        kobj(out, "input");
        match name {
            "Read" => kstr(out, "file_path", &path),
            "Bash" => {
                kstr(
                    out,
                    "command",
                    "cargo test --all 2>&1 | grep -E \"^(test|error)\" | head -n 50",
                );
                kstr(out, "description", "Run the tests");
            }
            "Edit" => {
                let n = self.rng.range(40, 1_200) as usize;
                let old = tool_output(&mut self.rng, n);
                kstr(out, "file_path", &path);
                kstr(out, "old_string", &old);
                kstr(out, "new_string", &old.replace("value", "v2"));
            }
            "Write" => {
                let n = self.rng.range(500, 20_000) as usize;
                let body = tool_output(&mut self.rng, n);
                kstr(out, "file_path", &path);
                kstr(out, "content", &body);
            }
            "Grep" => {
                kstr(out, "pattern", "fn (parse|read)_\\w+");
                kstr(out, "path", &self.env.cwd);
                kstr(out, "output_mode", "files_with_matches");
            }
            "Glob" => kstr(out, "pattern", "**/*.rs"),
            "TodoWrite" => {
                karr(out, "todos");
                for i in 0..self.rng.range(1, 6) {
                    sep(out);
                    out.push(b'{');
                    kstr(
                        out,
                        "content",
                        &format!("Step {i}: {}", self.rng.pick(WORDS)),
                    );
                    kstr(
                        out,
                        "status",
                        self.rng.pick(&["pending", "in_progress", "completed"]),
                    );
                    kstr(out, "activeForm", &format!("Working on step {i}"));
                    out.push(b'}');
                }
                out.push(b']');
            }
            "WebFetch" => {
                kstr(out, "url", "https://docs.example.com/streaming-json");
                kstr(
                    out,
                    "prompt",
                    "Summarise the section on line-delimited JSON",
                );
            }
            "Agent" | "Task" => {
                let ty = self.rng.pick(AGENT_TYPES);
                let desc = format!(
                    "Survey the {} module",
                    self.rng.pick(&["web", "jobs", "parser", "store"])
                );
                let n = self.rng.range(200, 2_000) as usize;
                let prompt = prose(&mut self.rng, n);
                kstr(out, "description", &desc);
                kstr(out, "prompt", &prompt);
                kstr(out, "subagent_type", ty);
                agent = Some((desc, prompt, ty));
            }
            _ => kstr(out, "query", "repo:acme/mem-ingest simd"),
        }
        out.push(b'}');
        if self.env.p.newest {
            kraw(out, "caller", b"{\"type\":\"direct\"}");
        }
        out.push(b'}');
        self.tool_uses += 1;
        Call {
            id,
            name,
            path,
            agent,
        }
    }

    /// A response: one line per block, tool results after each tool_use
    /// line (2.1) or after the response. Returns whether the turn goes on
    /// (tool calls, not rejected) and the response's last text.
    fn response(&mut self, allow_tools: bool, force_text: bool) -> io::Result<(bool, String)> {
        if self.rng.below(100) == 0 {
            self.synthetic(true)?;
        }
        let r = self.new_resp();
        let prov_only = self.rng.pct(20);
        let v1 = self.era() == Era::V1_0;
        let thinking = self.rng.pct(if v1 { 25 } else { 60 });
        let calls = if !allow_tools {
            0
        } else if self.cover_agent {
            1
        } else {
            match self.rng.below(10) {
                0..=2 => 0,
                3..=7 => 1,
                _ => self.rng.range(2, 4),
            }
        };
        let text = force_text || calls == 0 || self.rng.pct(75);
        let n_blocks = u64::from(thinking) + u64::from(text) + calls;
        let stop = if calls > 0 {
            "tool_use"
        } else if self.rng.below(200) == 0 {
            "max_tokens"
        } else {
            "end_turn"
        };
        self.stats.responses += 1;
        if n_blocks > 1 {
            self.stats.streamed += 1;
        }
        if prov_only {
            self.stats.provisional_only += 1;
        }
        self.tokens += r.input + r.cache_create + r.cache_read + r.out_final;
        let mut idx = 0;
        let mut block = Vec::new();
        let mut last_text = String::new();
        if thinking {
            idx += 1;
            block.clear();
            block.extend_from_slice(b"{\"type\":\"thinking\",\"thinking\":");
            let t = if self.env.p.newest {
                String::new()
            } else {
                let n = self.rng.range(100, 3_000) as usize;
                prose(&mut self.rng, n)
            };
            json_str(&mut block, &t);
            block.extend_from_slice(b",\"signature\":\"");
            let n = self.rng.range(300, 1_200) as usize;
            b64(&mut self.rng, n / 4 * 4, &mut block);
            block.extend_from_slice(b"\"}");
            self.assistant_line(&r, &block, idx == n_blocks && !prov_only, stop)?;
        }
        if text {
            idx += 1;
            let n = self.rng.range(20, 1_500) as usize;
            last_text = prose(&mut self.rng, n);
            block.clear();
            text_block(&mut block, &last_text);
            self.assistant_line(&r, &block, idx == n_blocks && !prov_only, stop)?;
        }
        let mut pending: Vec<(Call, String)> = Vec::new();
        let mut go_on = calls > 0;
        for _ in 0..calls {
            idx += 1;
            let call = self.tool_use(&mut block);
            let u = self.assistant_line(&r, &block, idx == n_blocks && !prov_only, stop)?;
            if self.era() == Era::V2_1 {
                let last = idx == n_blocks;
                let body = self.result_body(&call, last)?;
                go_on &= body.beside.is_none();
                self.result_line(&[(call, body)], &u)?;
            } else {
                pending.push((call, u));
            }
        }
        if !pending.is_empty() {
            let grouped = pending.len() > 1 && self.rng.pct(30);
            let n = pending.len();
            let mut bodies = Vec::new();
            for (i, (call, u)) in pending.into_iter().enumerate() {
                let body = self.result_body(&call, i + 1 == n)?;
                go_on &= body.beside.is_none();
                if grouped {
                    bodies.push((call, body));
                } else {
                    self.result_line(&[(call, body)], &u)?;
                }
            }
            if grouped {
                let u = self.parent.clone().unwrap_or_default();
                self.result_line(&bodies, &u)?;
            }
        }
        Ok((go_on, last_text))
    }

    // -- tool results -----------------------------------------------------------

    /// The result of `call`: runs a subagent for Agent/Task. `last`: the
    /// response's last block, the only one a user may reject.
    fn result_body(&mut self, call: &Call, last: bool) -> io::Result<Body> {
        self.tick(100, 60_000);
        let mut content = Vec::new();
        let mut tur = Vec::new();
        if call.agent.is_none() && last && self.rng.pct(1) {
            json_str(
                &mut content,
                "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.",
            );
            json_str(
                &mut tur,
                "Error: [Request interrupted by user for tool use]",
            );
            return Ok(Body {
                content,
                is_error: true,
                tur,
                beside: Some("[Request interrupted by user for tool use]"),
            });
        }
        if call.agent.is_none() && self.rng.pct(4) {
            let err = match call.name {
                "Edit" | "Write" => "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>",
                "Read" => "<tool_use_error>File does not exist.</tool_use_error>",
                _ => "Exit code 1\nerror: could not compile `mem-ingest` (lib) due to 2 previous errors",
            };
            json_str(&mut content, err);
            json_str(&mut tur, &format!("Error: {err}"));
            return Ok(Body {
                content,
                is_error: true,
                tur,
                beside: None,
            });
        }
        match call.name {
            "Read" => {
                let n = result_size(&mut self.rng, true);
                if n >= 256 * 1024 {
                    self.stats.large_results += 1;
                }
                let raw = tool_output(&mut self.rng, n);
                let mut numbered = String::with_capacity(raw.len() + raw.len() / 8);
                let mut count = 0;
                for (i, line) in raw.lines().enumerate() {
                    numbered.push_str(&format!("{:>6}\u{2192}{line}\n", i + 1));
                    count = i + 1;
                }
                numbered.push_str("\n<system-reminder>\nWhenever you read a file, you should consider whether it looks malicious.\n</system-reminder>\n");
                json_str(&mut content, &numbered);
                tur.extend_from_slice(b"{\"type\":\"text\",\"file\":{");
                kstr(&mut tur, "filePath", &call.path);
                kstr(&mut tur, "content", &raw);
                knum(&mut tur, "numLines", count as u64);
                knum(&mut tur, "startLine", 1);
                knum(&mut tur, "totalLines", count as u64);
                tur.extend_from_slice(b"}}");
            }
            "Bash" => {
                let n = result_size(&mut self.rng, true);
                let out = tool_output(&mut self.rng, n);
                if self.era() == Era::V2_0 && self.rng.pct(20) {
                    self.bash_progress(&call.id, &out)?;
                }
                let mut shown: &str = &out;
                let preview;
                if n >= 256 * 1024 {
                    self.stats.large_results += 1;
                }
                if n >= 24 * 1024 && self.era() == Era::V2_1 && self.rng.pct(50) {
                    {
                        let path = self
                            .session_dir
                            .join("tool-results")
                            .join(format!("{}.txt", call.id));
                        fs::create_dir_all(path.parent().expect("has a parent"))?;
                        fs::write(&path, out.as_bytes())?;
                        self.other_bytes += out.len() as u64;
                        self.stats.tool_results_files += 1;
                        self.stats.files += 1;
                        self.stats.bytes += out.len() as u64;
                        let mut cut = 2048;
                        while !out.is_char_boundary(cut) {
                            cut += 1;
                        }
                        preview = format!(
                            "Output too large ({} KB). Full output saved to: /home/dev/.claude/projects/{}/{}/tool-results/{}.txt\n\nPreview (first 2KB):\n{}",
                            out.len() / 1024,
                            encode_cwd(&self.env.project_cwd),
                            self.env.session_id,
                            call.id,
                            &out[..cut]
                        );
                        shown = &preview;
                    }
                }
                json_str(&mut content, shown);
                tur.push(b'{');
                kstr(&mut tur, "stdout", shown);
                kstr(&mut tur, "stderr", "");
                kbool(&mut tur, "interrupted", false);
                kbool(&mut tur, "isImage", false);
                tur.push(b'}');
            }
            "Edit" => {
                let n = result_size(&mut self.rng, false);
                let original = tool_output(&mut self.rng, n);
                let snippet: String = original
                    .lines()
                    .take(12)
                    .enumerate()
                    .map(|(i, l)| format!("{:>6}\u{2192}{l}\n", i + 40))
                    .collect();
                json_str(
                    &mut content,
                    &format!("The file {} has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n{snippet}", call.path),
                );
                tur.push(b'{');
                kstr(&mut tur, "filePath", &call.path);
                kstr(&mut tur, "oldString", "let value = compute();");
                kstr(&mut tur, "newString", "let v2 = compute();");
                kstr(&mut tur, "originalFile", &original);
                karr(&mut tur, "structuredPatch");
                tur.extend_from_slice(b"{\"oldStart\":40,\"oldLines\":3,\"newStart\":40,\"newLines\":3,\"lines\":[\" fn main() {\",\"-    let value = compute();\",\"+    let v2 = compute();\"]}]");
                kbool(&mut tur, "userModified", false);
                kbool(&mut tur, "replaceAll", false);
                tur.push(b'}');
            }
            "Write" => {
                json_str(
                    &mut content,
                    &format!("File created successfully at: {}", call.path),
                );
                tur.push(b'{');
                kstr(&mut tur, "type", "create");
                kstr(&mut tur, "filePath", &call.path);
                kstr(&mut tur, "content", "// written by the assistant\n");
                kraw(&mut tur, "structuredPatch", b"[]");
                tur.push(b'}');
            }
            "Grep" | "Glob" => {
                let n = self.rng.range(1, 200);
                let files: Vec<String> = (0..n)
                    .map(|i| format!("{}/src/module_{}/file_{i}.rs", self.env.cwd, i % 40))
                    .collect();
                let head = if call.name == "Grep" {
                    format!("Found {n} files\n")
                } else {
                    String::new()
                };
                json_str(&mut content, &format!("{head}{}", files.join("\n")));
                tur.push(b'{');
                if call.name == "Grep" {
                    kstr(&mut tur, "mode", "files_with_matches");
                }
                karr(&mut tur, "filenames");
                for f in &files {
                    istr(&mut tur, f);
                }
                tur.push(b']');
                if call.name == "Glob" {
                    knum(&mut tur, "durationMs", self.rng.range(2, 400));
                }
                knum(&mut tur, "numFiles", n);
                if call.name == "Glob" {
                    kbool(&mut tur, "truncated", false);
                }
                tur.push(b'}');
            }
            "TodoWrite" => {
                json_str(&mut content, "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable");
                tur.extend_from_slice(b"{\"oldTodos\":[],\"newTodos\":[{\"content\":\"Stream the reader\",\"status\":\"in_progress\",\"activeForm\":\"Streaming the reader\"}]}");
            }
            "WebFetch" => {
                let n = result_size(&mut self.rng, false);
                let text = prose(&mut self.rng, n);
                json_str(&mut content, &text);
                tur.push(b'{');
                knum(&mut tur, "bytes", text.len() as u64 * 3);
                knum(&mut tur, "code", 200);
                kstr(&mut tur, "codeText", "OK");
                kstr(&mut tur, "result", &text);
                knum(&mut tur, "durationMs", self.rng.range(200, 9_000));
                kstr(&mut tur, "url", "https://docs.example.com/streaming-json");
                tur.push(b'}');
            }
            "Agent" | "Task" => return self.run_agent(call),
            _ => {
                let n = result_size(&mut self.rng, false);
                let text = tool_output(&mut self.rng, n);
                content.push(b'[');
                text_block(&mut content, &text);
                content.push(b']');
                tur = content.clone();
            }
        }
        Ok(Body {
            content,
            is_error: false,
            tur,
            beside: None,
        })
    }

    /// A user line with the tool_result blocks of `results`.
    fn result_line(&mut self, results: &[(Call, Body)], source_uuid: &str) -> io::Result<()> {
        let v21 = self.era() == Era::V2_1;
        let m = &mut self.msg;
        m.clear();
        m.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
        let mut beside = None;
        for (call, body) in results {
            sep(m);
            m.push(b'{');
            kstr(m, "tool_use_id", &call.id);
            kstr(m, "type", "tool_result");
            kraw(m, "content", &body.content);
            if body.is_error || v21 {
                kbool(m, "is_error", body.is_error);
            }
            m.push(b'}');
            beside = beside.or(body.beside);
        }
        if let Some(t) = beside {
            text_block(m, t);
        }
        m.extend_from_slice(b"]}");
        // One toolUseResult per line; none in 2.1.231 subagent files.
        let with_tur = results.len() == 1 && !(self.env.p.newest && self.env.agent.is_some());
        let mut tail: Vec<(&str, &[u8])> = Vec::new();
        if with_tur {
            tail.push(("toolUseResult", &results[0].1.tur));
        }
        let src = format!("\"{source_uuid}\"");
        if v21 {
            tail.push(("sourceToolAssistantUUID", src.as_bytes()));
        }
        self.user_line("user/tool_result", &[], &tail)?;
        let call = &results[0].0;
        if matches!(call.name, "Edit" | "Write") {
            match self.era() {
                Era::V1_0 if self.rng.pct(30) => {
                    let name = format!("\u{1b}[1mPostToolUse:{}\u{1b}[22m", call.name);
                    let tid = format!("\"{}\"", call.id);
                    self.system(
                        "",
                        &format!("Running {name}..."),
                        "info",
                        &[("toolUseID", tid.as_bytes())],
                    )?;
                }
                Era::V2_0 if self.rng.pct(30) => {
                    self.hook_progress(
                        "PostToolUse",
                        &format!("PostToolUse:{}", call.name),
                        &call.id.clone(),
                    )?;
                }
                Era::V2_1 if self.rng.pct(20) => {
                    self.hook_attachment(
                        "PostToolUse",
                        &format!("PostToolUse:{}", call.name),
                        Some(&call.id.clone()),
                    )?;
                }
                _ => {}
            }
            if self.era() >= Era::V2_0 && self.env.agent.is_none() && self.rng.pct(30) {
                self.snapshot(true)?;
            }
        }
        Ok(())
    }

    // -- subagents --------------------------------------------------------------

    /// Runs the subagent of an Agent/Task call into its file (inline before
    /// 2.0) and returns the parent's tool result.
    fn run_agent(&mut self, call: &Call) -> io::Result<Body> {
        let (desc, prompt, ty) = call.agent.clone().expect("an agent call");
        let cover = std::mem::take(&mut self.cover_agent);
        let era = self.era();
        let depth = self.env.agent.as_ref().map_or(0, |a| a.2) + 1;
        let mut id = String::new();
        let (out, path) = match era {
            Era::V1_0 => (Out::mem(), None),
            Era::V2_0 => {
                hex(&mut self.rng, 8, &mut id);
                let path = self.project_dir.join(format!("agent-{id}.jsonl"));
                (Out::create(&path)?, Some(path))
            }
            Era::V2_1 => {
                id.push('a');
                hex(&mut self.rng, 16, &mut id);
                let path = self
                    .session_dir
                    .join("subagents")
                    .join(format!("agent-{id}.jsonl"));
                (Out::create(&path)?, Some(path))
            }
        };
        let env = Env {
            p: self.env.p,
            session_id: self.env.session_id.clone(),
            cwd: self.env.cwd.clone(),
            project_cwd: self.env.project_cwd.clone(),
            branch: self.env.branch,
            entrypoint: self.env.entrypoint,
            slug: self.env.slug.clone(),
            agent: if era == Era::V1_0 {
                None
            } else {
                Some((id.clone(), ty, depth))
            },
            sidechain: true,
            wander: false,
        };
        let seed = self.rng.next();
        let mut sub = Conv::new(
            env,
            out,
            Rng::new(seed),
            self.now,
            self.project_dir.clone(),
            self.session_dir.clone(),
        );
        if era == Era::V2_0 {
            sub.mirror = Some(Vec::new());
        }
        let budget = (20_000.0 * (1.0 - self.rng.unit()).powf(-1.0 / 1.2)).min(600_000.0) as u64;
        // A fork starts from a copy of the parent's last lines.
        if era == Era::V2_1 && (self.rng.pct(30) || cover) {
            let n = self.rng.range(2, 8) as usize;
            let recent = self.last_echoes(n);
            if !recent.is_empty() {
                sub.stats.fork_agents += 1;
                // One new requestId per replayed response.
                let mut new_ids: HashMap<String, String> = HashMap::new();
                for e in &recent {
                    let request_id = e.request_id.as_ref().map(|r| {
                        new_ids
                            .entry(r.clone())
                            .or_insert_with(|| req_id(&mut sub.rng))
                            .clone()
                    });
                    let u = uuid(&mut sub.rng);
                    let parent = sub.parent.clone();
                    sub.replay(e, parent.as_deref(), &u, e.ts, request_id.as_deref())?;
                    sub.parent = Some(u);
                    sub.stats.fork_lines += 1;
                }
            }
        }
        sub.budget = budget;
        let final_text = sub.agent_body(&prompt)?;
        let mirror = sub.mirror.take();
        let (sub_bytes, tool_uses, tokens, now) =
            (sub.out.bytes, sub.tool_uses, sub.tokens, sub.now);
        let mut stats = std::mem::take(&mut sub.stats);
        let other = sub.other_bytes;
        let bytes = sub.out.finish()?;
        self.now = now.max(self.now);
        match era {
            Era::V1_0 => {
                self.out.write(&bytes)?;
                self.since_compaction += bytes.len() as u64;
                self.stats.inline_sidechain_lines += stats.kinds.values().map(|v| v.0).sum::<u64>();
            }
            _ => {
                stats.subagents += 1;
                stats.files += 1;
                stats.bytes += sub_bytes;
                self.other_bytes += sub_bytes;
                if era == Era::V2_0 {
                    stats.flat_agents += 1;
                }
            }
        }
        self.other_bytes += other;
        self.stats.merge(stats);
        if era == Era::V2_1 {
            let meta = path.expect("a subagent file").with_extension("meta.json");
            let mut m = Vec::new();
            m.push(b'{');
            kstr(&mut m, "agentType", ty);
            kstr(&mut m, "description", &desc);
            kstr(&mut m, "toolUseId", &call.id);
            knum(&mut m, "spawnDepth", depth);
            m.push(b'}');
            fs::write(&meta, &m)?;
            self.other_bytes += m.len() as u64;
            self.stats.meta_files += 1;
            self.stats.files += 1;
            self.stats.bytes += m.len() as u64;
        }
        if let Some(echoes) = mirror {
            for e in echoes {
                self.agent_progress(&e, &prompt, &id, &call.id)?;
            }
        }
        let dur = self.rng.range(4_000, 900_000);
        let mut content = Vec::new();
        content.push(b'[');
        text_block(&mut content, &final_text);
        if era == Era::V2_1 {
            text_block(
                &mut content,
                &format!("agentId: {id} (use SendMessage with to: '{id}' to continue this agent)\n<usage>total_tokens: {tokens}\ntool_uses: {tool_uses}\nduration_ms: {dur}</usage>"),
            );
        }
        content.push(b']');
        let mut tur = Vec::new();
        tur.push(b'{');
        kstr(&mut tur, "status", "completed");
        kstr(&mut tur, "prompt", &prompt);
        if era != Era::V1_0 {
            kstr(&mut tur, "agentId", &id);
        }
        kraw(&mut tur, "content", &content);
        knum(&mut tur, "totalDurationMs", dur);
        knum(&mut tur, "totalTokens", tokens);
        knum(&mut tur, "totalToolUseCount", tool_uses);
        // A usage object outside any message: not a response's usage.
        kraw(&mut tur, "usage", format!("{{\"input_tokens\":{},\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":{},\"output_tokens\":{},\"service_tier\":\"standard\"}}", tokens / 50, tokens / 2, tokens / 20).as_bytes());
        tur.push(b'}');
        Ok(Body {
            content,
            is_error: false,
            tur,
            beside: None,
        })
    }

    /// A subagent's conversation: the brief, then responses until the budget
    /// is spent, then a closing text. Returns that text.
    fn agent_body(&mut self, prompt: &str) -> io::Result<String> {
        self.prompt_id = if self.era() == Era::V2_1 {
            uuid(&mut self.rng)
        } else {
            String::new()
        };
        self.tick(10, 200);
        let m = &mut self.msg;
        m.clear();
        m.extend_from_slice(b"{\"role\":\"user\",\"content\":");
        json_str(m, prompt);
        m.push(b'}');
        if self.era() == Era::V1_0 {
            // Inline sidechains start a root of their own.
            self.parent = None;
        }
        self.user_line("user/prompt", &[], &[])?;
        if self.era() == Era::V2_1 && self.rng.pct(50) {
            self.start_attachments()?;
        }
        let mut responses = 0;
        loop {
            responses += 1;
            let closing = self.written() >= self.budget || responses >= 12;
            let (more, text) = self.response(!closing, closing)?;
            if closing || !more {
                return Ok(text);
            }
        }
    }

    /// A 2.0.x `agent_progress` line nesting a subagent line.
    fn agent_progress(
        &mut self,
        e: &Echo,
        prompt: &str,
        agent_id: &str,
        call_id: &str,
    ) -> io::Result<()> {
        let ty = if e.kind.starts_with("assistant") {
            "assistant"
        } else {
            "user"
        };
        let m = &mut self.msg;
        m.clear();
        m.push(b'{');
        kobj(m, "message");
        kstr(m, "type", ty);
        kraw(m, "message", &e.msg);
        if let Some(r) = &e.request_id {
            kstr(m, "requestId", r);
        }
        kstr(m, "uuid", &e.uuid);
        kstr(m, "timestamp", &iso(e.ts));
        m.push(b'}');
        kraw(m, "normalizedMessages", b"[]");
        kstr(m, "type", "agent_progress");
        kstr(m, "prompt", prompt);
        kstr(m, "agentId", agent_id);
        m.push(b'}');
        if ty == "assistant" {
            self.stats.progress_usage += 1;
        }
        self.progress("progress/agent_progress", call_id, call_id, e.ts)
    }

    /// Writes `e` again in this file with a new uuid (and `request_id` for an
    /// assistant line).
    fn replay(
        &mut self,
        e: &Echo,
        parent: Option<&str>,
        u: &str,
        ts: i64,
        request_id: Option<&str>,
    ) -> io::Result<()> {
        self.head(parent, None);
        if e.kind.starts_with("assistant") {
            kraw(&mut self.line, "message", &e.msg);
            if let Some(r) = request_id {
                kstr(&mut self.line, "requestId", r);
            }
            kstr(&mut self.line, "type", "assistant");
        } else {
            kstr(&mut self.line, "type", "user");
            kraw(&mut self.line, "message", &e.msg);
        }
        self.ids(u, ts);
        self.finish(e.kind)
    }

    // -- session structure ------------------------------------------------------

    /// `/compact`: the boundary, the summary and (30%) replays of the last
    /// lines with new uuids but their parentUuid and timestamp.
    fn compaction(&mut self) -> io::Result<()> {
        self.stats.compactions += 1;
        self.since_compaction = 0;
        self.next_compaction = self.rng.range(3 * MB / 2, 5 * MB);
        let logical = self.parent.clone().unwrap_or_default();
        let b = uuid(&mut self.rng);
        let ts = self.tick(1_000, 90_000);
        let pre = self.rng.range(140_000, 190_000);
        self.head(None, Some(&logical));
        let l = &mut self.line;
        kstr(l, "type", "system");
        kstr(l, "subtype", "compact_boundary");
        kstr(l, "content", "Conversation compacted");
        kbool(l, "isMeta", false);
        kstr(l, "timestamp", &iso(ts));
        kstr(l, "uuid", &b);
        kstr(l, "level", "info");
        kobj(l, "compactMetadata");
        kstr(
            l,
            "trigger",
            if self.rng.pct(80) { "auto" } else { "manual" },
        );
        knum(l, "preTokens", pre);
        if self.env.p.era == Era::V2_1 {
            knum(l, "postTokens", pre / 12);
            knum(l, "durationMs", self.rng.range(20_000, 120_000));
        }
        l.push(b'}');
        self.finish("system/compact_boundary")?;
        self.parent = Some(b);
        self.tick(100, 2_000);
        let n = self.rng.range(1_000, 8_000) as usize;
        let summary = format!(
            "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n{}",
            prose(&mut self.rng, n)
        );
        let m = &mut self.msg;
        m.clear();
        m.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
        text_block(m, &summary);
        m.extend_from_slice(b"]}");
        let summary_uuid = self.user_line(
            "user/compact_summary",
            &[("isCompactSummary", b"true")],
            &[],
        )?;
        if self.rng.pct(30) {
            let n = self.rng.range(2, 4) as usize;
            let last = self.last_echoes(n);
            for e in last.iter().filter(|e| e.kind != "user/compact_summary") {
                let u = uuid(&mut self.rng);
                self.replay(e, e.parent.as_deref(), &u, e.ts, e.request_id.as_deref())?;
                self.stats.compaction_replays += 1;
            }
        }
        self.parent = Some(summary_uuid);
        Ok(())
    }

    /// One turn: maybe a slash command, the prompt, attachments, responses
    /// until one ends without tool calls.
    fn turn(&mut self, first: bool) -> io::Result<()> {
        if self.env.wander && self.rng.pct(5) {
            self.env.cwd = if self.env.cwd == self.env.project_cwd {
                format!("{}/{}", self.env.project_cwd, self.rng.pick(SUBDIRS))
            } else {
                self.env.project_cwd.clone()
            };
            self.stats.cwd_changes += 1;
        }
        let era = self.era();
        if !first && self.rng.pct(4) {
            self.slash_command()?;
        }
        let n = if self.rng.pct(85) {
            self.rng.range(20, 600)
        } else {
            self.rng.range(600, 4_000)
        } as usize;
        let text = prose(&mut self.rng, n);
        if first && era >= Era::V2_0 && self.env.entrypoint == "sdk-cli" {
            self.queue_op("enqueue", Some(&text))?;
            self.queue_op("dequeue", None)?;
        }
        self.prompt(&text)?;
        if era == Era::V2_1 {
            if first {
                self.start_attachments()?;
            }
            if self.rng.pct(25) {
                self.hook_attachment("UserPromptSubmit", "UserPromptSubmit", None)?;
            }
            if self.rng.pct(2) {
                let mode = self.rng.pick(PERMISSION_MODES);
                self.bare("permission-mode", &[("permissionMode", mode)])?;
            }
        } else if era == Era::V2_0 && self.rng.pct(20) {
            let id = toolu_id(&mut self.rng);
            self.hook_progress("UserPromptSubmit", "UserPromptSubmit", &id)?;
        }
        let mut responses = 0;
        loop {
            responses += 1;
            let closing = responses >= 40 || self.written() >= self.budget;
            let (more, _) = self.response(!closing, closing)?;
            if era >= Era::V2_0 && self.rng.pct(3) {
                self.steering()?;
            }
            if era == Era::V2_1 && ((!self.titled && first) || self.rng.below(200) == 0) {
                self.titled = true;
                let t = format!(
                    "{} the {}",
                    self.rng.pick(&["Refactor", "Fix", "Speed up", "Document"]),
                    self.rng.pick(&["reader", "parser", "usage totals", "CLI"])
                );
                self.bare("ai-title", &[("aiTitle", &t)])?;
            }
            if !more || closing {
                break;
            }
        }
        if self.rng.below(200) == 0 {
            self.tick(1_000, 20_000);
            let m = &mut self.msg;
            m.clear();
            m.extend_from_slice(b"{\"role\":\"user\",\"content\":[");
            text_block(m, "[Request interrupted by user]");
            m.extend_from_slice(b"]}");
            self.user_line("user/prompt", &[], &[])?;
            self.synthetic(false)?;
        }
        if era == Era::V2_1 && self.rng.pct(10) {
            let tid = format!("\"{}\"", toolu_id(&mut self.rng));
            self.system(
                "stop_hook_summary",
                "",
                "suggestion",
                &[
                    ("hookCount", b"1"),
                    (
                        "hookInfos",
                        b"[{\"command\":\"$CLAUDE_PROJECT_DIR/.claude/hooks/stop.sh\"}]",
                    ),
                    ("hookErrors", b"[]"),
                    ("preventedContinuation", b"false"),
                    ("stopReason", b"\"\""),
                    ("hasOutput", b"false"),
                    ("toolUseID", tid.as_bytes()),
                ],
            )?;
        }
        if self.since_compaction >= self.next_compaction
            || self.rng.below(200) == 0
            || std::mem::take(&mut self.cover_compaction)
        {
            self.compaction()?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Sessions and archives

/// What one session is.
struct Plan {
    id: String,
    project: usize,
    profile: usize,
    start_ms: i64,
    target: u64,
    resume: Option<Retained>,
    /// Write a subagent and a compaction whatever the size.
    cover: bool,
}

/// Writes one session (and its subagent files) under `projects`. Returns
/// its stats and the lines a later session may resume.
fn write_session(
    projects: &Path,
    plan: Plan,
    seed: u64,
    path: Option<&Path>,
) -> io::Result<(Stats, Retained)> {
    let mut rng = Rng::new(seed);
    let p = &PROFILES[plan.profile];
    let cwd = PROJECTS[plan.project].to_string();
    let project_dir = match path {
        Some(f) => f.parent().map_or_else(PathBuf::new, Path::to_path_buf),
        None => projects.join(encode_cwd(&cwd)),
    };
    let file = path.map_or_else(
        || project_dir.join(format!("{}.jsonl", plan.id)),
        Path::to_path_buf,
    );
    let session_dir = file.with_extension("");
    let out = Out::create(&file)?;
    let mut slug = String::new();
    for i in 0..3 {
        if i > 0 {
            slug.push('-');
        }
        slug.push_str(rng.pick(SLUG_WORDS));
    }
    let entrypoint = if p.era >= Era::V2_0 && rng.pct(25) {
        "sdk-cli"
    } else if rng.pct(5) {
        "remote_mobile"
    } else {
        "cli"
    };
    let env = Env {
        p,
        session_id: plan.id.clone(),
        cwd: cwd.clone(),
        project_cwd: cwd,
        branch: rng.pick(BRANCHES),
        entrypoint,
        slug,
        agent: None,
        sidechain: false,
        wander: rng.pct(20),
    };
    let conv_seed = rng.next();
    let mut c = Conv::new(
        env,
        out,
        Rng::new(conv_seed),
        plan.start_ms,
        project_dir,
        session_dir,
    );
    c.recent = Some(VecDeque::new());
    c.budget = plan.target;
    c.cover_agent = plan.cover;
    c.cover_compaction = plan.cover;
    c.retain = Some(Retained {
        session_id: plan.id.clone(),
        lines: Vec::new(),
        bytes: 0,
        full: false,
        last_uuid: None,
        end_ms: 0,
        profile: plan.profile,
    });
    c.stats.sessions += 1;
    c.stats.files += 1;
    // A resumed session replays the first lines of the one it resumes.
    let mut resumed_from = None;
    if let Some(r) = &plan.resume {
        let old = format!("\"sessionId\":\"{}\"", r.session_id);
        let new = format!("\"sessionId\":\"{}\"", plan.id);
        for (kind, line) in &r.lines {
            let line = line.replace(&old, &new);
            c.out.write(line.as_bytes())?;
            c.stats.add(kind, line.len() as u64);
            c.stats.resumed_lines += 1;
        }
        c.stats.resumed += 1;
        c.parent = r.last_uuid.clone();
        resumed_from = r.last_uuid.clone();
    }
    if p.era == Era::V1_0 && c.rng.pct(30) {
        for _ in 0..c.rng.range(1, 3) {
            let leaf = resumed_from.clone().unwrap_or_else(|| uuid(&mut c.rng));
            let t = format!(
                "{} {}",
                c.rng.pick(&["Streaming", "Usage", "CLI"]),
                c.rng
                    .pick(&["Reader Refactor", "Totals Fix", "Table Layout"])
            );
            let l = &mut c.line;
            l.clear();
            l.push(b'{');
            kstr(l, "type", "summary");
            kstr(l, "summary", &t);
            kstr(l, "leafUuid", &leaf);
            l.push(b'}');
            c.emit("summary")?;
        }
    }
    if p.era >= Era::V2_0 && c.rng.pct(3) {
        c.bare(
            "custom-title",
            &[("customTitle", "usage dedupe ✨ \"fast\"")],
        )?;
    }
    if p.era == Era::V2_0 && c.rng.pct(25) {
        // A Warmup agent: the 2.0.x sidechain that primes the cache.
        let mut id = String::new();
        hex(&mut c.rng, 8, &mut id);
        let path = c.project_dir.join(format!("agent-{id}.jsonl"));
        let env = Env {
            p,
            session_id: plan.id.clone(),
            cwd: c.env.cwd.clone(),
            project_cwd: c.env.project_cwd.clone(),
            branch: c.env.branch,
            entrypoint,
            slug: String::new(),
            agent: Some((id, "general-purpose", 1)),
            sidechain: true,
            wander: false,
        };
        let s = c.rng.next();
        let mut w = Conv::new(
            env,
            Out::create(&path)?,
            Rng::new(s),
            c.now,
            c.project_dir.clone(),
            c.session_dir.clone(),
        );
        w.model = p.agent_model;
        w.agent_body("Warmup")?;
        let mut st = std::mem::take(&mut w.stats);
        st.subagents += 1;
        st.flat_agents += 1;
        st.files += 1;
        st.bytes += w.out.bytes;
        c.other_bytes += w.out.bytes;
        w.out.finish()?;
        c.stats.merge(st);
    }
    let mut first = true;
    while c.written() < c.budget || first {
        c.turn(first)?;
        first = false;
    }
    if p.era == Era::V2_1 && c.rng.pct(70) {
        let leaf = c.parent.clone().unwrap_or_default();
        let lp = c.last_prompt.clone();
        c.bare("last-prompt", &[("lastPrompt", &lp), ("leafUuid", &leaf)])?;
    }
    let mut retained = c.retain.take().expect("retained");
    retained.last_uuid = retained.lines.iter().rev().find_map(|(_, l)| {
        let i = l.rfind("\"uuid\":\"")? + 8;
        Some(l[i..i + 36].to_string())
    });
    retained.end_ms = c.now;
    c.stats.bytes += c.out.bytes;
    let stats = std::mem::take(&mut c.stats);
    c.out.finish()?;
    Ok((stats, retained))
}

fn pick_profile(rng: &mut Rng) -> usize {
    let mut x = rng.below(100);
    for (i, p) in PROFILES.iter().enumerate() {
        if x < p.weight {
            return i;
        }
        x -= p.weight;
    }
    PROFILES.len() - 1
}

/// Writes a Claude Code config folder of about `total_mb` MB under `dir`:
/// session sizes as pi archives have them, each session aiming low by what
/// the sessions before it overshot. The first six sessions take the six
/// versions in order, each with a subagent (a fork in 2.1) and a
/// compaction, and the seventh resumes the first, so that a small archive
/// holds every shape that does not depend on size.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0xC1A0);
    let total = (total_mb * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 0);
    let projects = dir.join("projects");
    fs::create_dir_all(&projects)?;
    let mut all = Stats::default();
    let mut planned = 0u64;
    let mut last: HashMap<usize, Retained> = HashMap::new();
    for (i, &size) in sizes.iter().enumerate() {
        if all.bytes >= total {
            break;
        }
        let forced_resume = i == PROFILES.len();
        let project = match i {
            _ if forced_resume => 0,
            i if i < PROJECTS.len() => i,
            _ => rng.below(PROJECTS.len() as u64) as usize,
        };
        let mut profile = if i < PROFILES.len() {
            i
        } else {
            pick_profile(&mut rng)
        };
        let p = &PROFILES[profile];
        let mut start_ms =
            CC_EPOCH_MS + (p.first_day * DAY_MS as u64 + rng.below(p.days * DAY_MS as u64)) as i64;
        let id = uuid(&mut rng);
        let mut resume = None;
        if rng.pct(8) || forced_resume {
            if let Some(r) = last.remove(&project).filter(|r| !r.lines.is_empty()) {
                profile = r.profile;
                start_ms = r.end_ms + rng.range(600_000, 3 * DAY_MS as u64) as i64;
                resume = Some(r);
            }
        }
        let excess = all.bytes.saturating_sub(planned);
        planned += size;
        let plan = Plan {
            id,
            project,
            profile,
            start_ms,
            target: size - excess.min(size / 2),
            resume,
            cover: i < PROFILES.len(),
        };
        let file_seed = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        let (stats, retained) = write_session(&projects, plan, file_seed, None)?;
        all.merge(stats);
        last.insert(project, retained);
    }
    Ok(all)
}

/// Writes one 2.1.231 session of about `size_mb` MB to `path`, its subagent
/// and tool-results files beside it in `<stem>/`, as Claude Code lays them
/// out. The lines' `sessionId` is the file stem when that is a UUID (as it
/// is for Claude Code), else a generated one.
pub(crate) fn write_file(path: &Path, size_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0x5EED);
    let generated = uuid(&mut rng);
    let stem = path.file_stem().and_then(|s| s.to_str());
    let is_uuid = |s: &&str| {
        s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            })
    };
    let plan = Plan {
        id: stem.filter(is_uuid).map_or(generated, str::to_owned),
        project: 0,
        profile: PROFILES.len() - 1,
        start_ms: CC_EPOCH_MS + 400 * DAY_MS,
        target: (size_mb * MB as f64) as u64,
        resume: None,
        cover: true,
    };
    let (stats, _) = write_session(Path::new(""), plan, seed, Some(path))?;
    Ok(stats)
}
