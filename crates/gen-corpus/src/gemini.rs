//! Gemini CLI homes (`--format gemini`): a `.gemini` folder with the JSONL
//! chat recordings of `shared/spec/gemini-cli-format.md` (v0.39 and
//! later), deterministic from the seed.
//!
//! ```text
//! DIR/projects.json                      {"projects": {"<path>": "<slug>"}}
//! DIR/trustedFolders.json                {"<path>": "TRUST_FOLDER"}
//! DIR/tmp/<slug>/.project_root           the project's path
//! DIR/tmp/<slug>/logs.json               the prompts (an array: no session)
//! DIR/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl
//! DIR/tmp/<slug>/chats/<parent sessionId>/<sessionId>.jsonl   (subagents)
//! DIR/tmp/<sha256 of the path>/chats/...  (legacy hash folders)
//! ```
//!
//! Projects, each session in one drawn by weight (the first six sessions
//! one each, in this order):
//!
//! | path | folder | how its cwd is known |
//! |---|---|---|
//! | `/home/dev/api` (30%) | hash folder until day 90, copied into slug `api` (migration), `api` after | `.project_root` |
//! | `/home/dev/web.app` (25%) | `web-app` | `.project_root` |
//! | `/home/dev/tools/cli` (15%) | `cli` (no `.project_root`) | `projects.json` |
//! | `/home/dev/other/api` (10%) | `api-1` (a slug collision) | `.project_root` |
//! | `/srv/projects/Data Pipeline` (10%) | hash folder only | its SHA-256 in `trustedFolders.json` |
//! | `/tmp/scratch` (10%) | hash folder only | unknown |
//!
//! The migration copies (every session of `/home/dev/api` that started
//! before day 90, subagents included) are the same bytes in both folders:
//! one session twice, as Gemini CLI's `storageMigration` leaves it.
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - A session: the metadata line (`sessionId`, `projectHash` the SHA-256
//!   of the path, `startTime`, `lastUpdated`, `kind: "main"`, absent 20% of
//!   the time), then turns: a `user` prompt (`[{text}]`; an expanded
//!   `@file` with `displayContent` 3%, a slash command 2%) and
//!   `{"$set":{"lastUpdated"}}`, then 1-5 `gemini` responses, each but
//!   the last with a tool call.
//! - A response is written 2-4 times under one `id` (the last copy wins):
//!   its text (a string) with `thoughts[]` 50% and `tokens: null`, a
//!   `$set` `lastUpdated`; again with `tokens` (`input` growing with the
//!   history, `cached` 60% of the time inside it, `thoughts` when thoughts
//!   were written, `tool` 10%, `total` = `input + output + thoughts +
//!   tool`); with its tool call (`toolCalls[]` `executing`, then again
//!   `success` with its `result`, 5% `error`), and
//!   the call's output as a `user` message of `functionResponse` parts
//!   (0.2-3 KB 80%, 3-24 KB 18%, 24-128 KB 2%). The model is the
//!   session's, `gemini-2.5-flash` 10% of responses (a fallback).
//! - A late copy: 3% of tool calls write the call's `success` copy after
//!   the output's message (the same tokens).
//! - A subagent: 3% of turns, a `codebase_investigator` call whose
//!   `agentId` is a session of its own in `chats/<sessionId>/`
//!   (`kind: "subagent"`, `directories`), of 1-3 responses.
//! - Notices: an `info` 2% of turns (an `inlineData` image one time in
//!   four), an `error` 1%, a `warning` 0.5%.
//! - Compression: 2% of turns past the fifth, an `info` notice then a
//!   `$set` whose `messages` is a summary `user` message and a `gemini`
//!   acknowledgement (written on no other line, no tokens) and copies of
//!   the last two messages.
//! - Rewinds: 1% of turns past the first, a `{"$rewindTo"}` naming the
//!   previous turn's prompt (its messages leave the list; their tokens
//!   were spent).
//! - Resumes: 5% of sessions, after a gap of hours,
//!   `{"$set":{"sessionId"}}` then more turns.
//! - Damage: 0.1% of a main session's lines (neither its first nor its
//!   last, never two in a row) are cut where a crash would leave them, half of them followed by a newline (a cut line),
//!   half glued to the next line (the next write after a crash); the
//!   first session has one of each.
//! - Each file's modification time is its last line's timestamp (a few
//!   seconds after): the sessions are over, so a reader waiting for a
//!   still file reads every message.
//!
//! The first session holds every shape.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2026-05-01T00:00:00Z (JSONL recordings began with v0.39, Apr 2026).
const EPOCH_MS: i64 = 1_777_593_600_000;
const DAY_MS: i64 = 86_400_000;
/// The day `/home/dev/api`'s hash folder was copied into its slug folder.
const MIGRATION_MS: i64 = EPOCH_MS + 90 * DAY_MS;

const MODELS: [&str; 3] = ["gemini-2.5-pro", "gemini-3-pro-preview", "gemini-2.5-flash"];
const TOOLS: [&str; 5] = [
    "read_file",
    "run_shell_command",
    "replace",
    "write_file",
    "search_file_content",
];

/// Where a project's sessions go and how its path can be known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// The hash folder before [`MIGRATION_MS`] (copied into the slug
    /// folder), the slug folder after.
    Migrated,
    /// A slug folder with `.project_root`.
    Slug,
    /// A slug folder without `.project_root`: `projects.json` alone.
    SlugRegistryOnly,
    /// A hash folder; the path in `trustedFolders.json`.
    HashTrusted,
    /// A hash folder; the path nowhere.
    HashUnknown,
}

/// `(path, layout, weight %)`; the slugs are [`slugs`]'.
const PROJECTS: [(&str, Layout, u64); 6] = [
    ("/home/dev/api", Layout::Migrated, 30),
    ("/home/dev/web.app", Layout::Slug, 25),
    ("/home/dev/tools/cli", Layout::SlugRegistryOnly, 15),
    ("/home/dev/other/api", Layout::Slug, 10),
    ("/srv/projects/Data Pipeline", Layout::HashTrusted, 10),
    ("/tmp/scratch", Layout::HashUnknown, 10),
];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    lines: u64,
    sessions: u64,
    subagents: u64,
    copied_files: u64,
    turns: u64,
    messages: u64,
    reappended: u64,
    late_copies: u64,
    checkpoints: u64,
    rewinds: u64,
    resumes: u64,
    cut: u64,
    glued: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} files ({} sessions, {} subagents, {} migration copies), \
             {:.1} MB, {} lines, {} turns, {} messages ({} lines re-appending one, {} late \
             copies), {} checkpoints, {} rewinds, {} resumes, {} damaged lines ({} cut, {} glued), \
             in {secs:.1}s",
            self.files,
            self.sessions,
            self.subagents,
            self.copied_files,
            self.bytes as f64 / MB as f64,
            self.lines,
            self.turns,
            self.messages,
            self.reappended,
            self.late_copies,
            self.checkpoints,
            self.rewinds,
            self.resumes,
            self.cut + self.glued,
            self.cut,
            self.glued,
        );
    }
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
}

/// Gemini CLI's short id of a project (`ProjectRegistry.getShortId`): the
/// path's base name, lower-cased, each run of characters not `[a-z0-9]`
/// one `-`, edge `-` trimmed, `project` when nothing is left.
pub(crate) fn slug(path: &str) -> String {
    let base = path.rsplit('/').find(|s| !s.is_empty()).unwrap_or("");
    let mut s = String::new();
    for c in base.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let s = s.trim_matches('-');
    if s.is_empty() {
        "project".to_owned()
    } else {
        s.to_owned()
    }
}

/// The projects' slugs, as `ProjectRegistry` gives them in turn: a slug
/// taken already gets `-1`, `-2`, ...
fn slugs() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (path, _, _) in PROJECTS {
        let base = slug(path);
        let mut s = base.clone();
        let mut n = 0;
        while out.contains(&s) {
            n += 1;
            s = format!("{base}-{n}");
        }
        out.push(s);
    }
    out
}

/// SHA-256 as 64 lower-case hex digits (Gemini CLI's `getProjectHash`).
/// The generator depends on no crate, so it is written out here (FIPS
/// 180-4).
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, c) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}

/// One message's fields as Gemini CLI's `MessageRecord` writes them, in
/// its key order; each member already JSON.
#[derive(Clone)]
struct Msg {
    id: String,
    ms: i64,
    ty: &'static str,
    content: String,
    display: Option<String>,
    thoughts: Option<String>,
    tokens: Option<String>,
    model: Option<&'static str>,
    tool_calls: Option<String>,
}

impl Msg {
    fn new(rng: &mut Rng, ms: i64, ty: &'static str, content: String) -> Msg {
        Msg {
            id: uuid(rng),
            ms,
            ty,
            content,
            display: None,
            thoughts: None,
            tokens: None,
            model: None,
            tool_calls: None,
        }
    }

    fn json(&self) -> String {
        let mut l = format!(
            r#"{{"id":"{}","timestamp":"{}","type":"{}","content":{}"#,
            self.id,
            iso(self.ms),
            self.ty,
            self.content
        );
        if let Some(d) = &self.display {
            l.push_str(&format!(r#","displayContent":{d}"#));
        }
        if let Some(t) = &self.thoughts {
            l.push_str(&format!(r#","thoughts":{t}"#));
        }
        if self.ty == "gemini" {
            let tokens = self.tokens.as_deref().unwrap_or("null");
            l.push_str(&format!(r#","tokens":{tokens}"#));
        }
        if let Some(m) = self.model {
            l.push_str(&format!(r#","model":"{m}""#));
        }
        if let Some(c) = &self.tool_calls {
            l.push_str(&format!(r#","toolCalls":{c}"#));
        }
        l.push('}');
        l
    }
}

/// One session file being written.
struct Session {
    id: String,
    cwd: &'static str,
    model: &'static str,
    lines: Vec<String>,
    bytes: u64,
    ms: i64,
    /// The message list's last copies, in order (for checkpoints), and
    /// the prompts' positions in it (for rewinds).
    list: Vec<Msg>,
    prompts: Vec<usize>,
    /// The prompt grows with the history.
    context: u64,
    /// Subagents' sessions written beside this one.
    subagents: Vec<Session>,
    /// The archive's first session: every shape at least once.
    every_shape: bool,
}

impl Session {
    fn new(rng: &mut Rng, start: i64, cwd: &'static str, kind: Option<&str>) -> Self {
        let mut s = Session {
            id: uuid(rng),
            cwd,
            model: MODELS[rng.below(2) as usize],
            lines: Vec::new(),
            bytes: 0,
            ms: start,
            list: Vec::new(),
            prompts: Vec::new(),
            context: rng.range(6_000, 14_000),
            subagents: Vec::new(),
            every_shape: false,
        };
        let kind = match kind {
            Some("subagent") => format!(r#","kind":"subagent","directories":[{}]"#, js(cwd)),
            Some(k) => format!(r#","kind":"{k}""#),
            None => String::new(),
        };
        let meta = format!(
            r#"{{"sessionId":"{}","projectHash":"{}","startTime":"{}","lastUpdated":"{}"{kind}}}"#,
            s.id,
            sha256_hex(cwd.as_bytes()),
            iso(start),
            iso(start)
        );
        s.push(meta);
        s
    }

    fn push(&mut self, l: String) {
        self.bytes += l.len() as u64 + 1;
        self.lines.push(l);
    }

    fn tick(&mut self, rng: &mut Rng, lo: u64, hi: u64) {
        self.ms += rng.range(lo, hi) as i64;
    }

    fn last_updated(&mut self) {
        let l = format!(r#"{{"$set":{{"lastUpdated":"{}"}}}}"#, iso(self.ms));
        self.push(l);
    }

    /// Writes `m` (a new message, or a new copy of the list's last).
    fn write(&mut self, stats: &mut Stats, m: &Msg) {
        match self.list.last_mut() {
            Some(last) if last.id == m.id => {
                stats.reappended += 1;
                *last = m.clone();
            }
            _ => {
                stats.messages += 1;
                self.list.push(m.clone());
            }
        }
        self.push(m.json());
    }

    /// A message of the list rewritten (a late copy): its line, the
    /// list's copy updated.
    fn write_late(&mut self, stats: &mut Stats, m: &Msg) {
        stats.late_copies += 1;
        if let Some(x) = self.list.iter_mut().rev().find(|x| x.id == m.id) {
            *x = m.clone();
        }
        self.push(m.json());
    }

    fn notice(&mut self, rng: &mut Rng, stats: &mut Stats, ty: &'static str, text: &str) {
        self.tick(rng, 100, 5_000);
        let m = Msg::new(rng, self.ms, ty, js(text));
        self.write(stats, &m);
    }

    /// One model response; with `call`, a tool call, its output as a
    /// message, and perhaps a subagent's session.
    fn response(&mut self, rng: &mut Rng, stats: &mut Stats, call: bool, subagent: bool) {
        self.tick(rng, 2_000, 60_000);
        let n = rng.range(20, 1_200) as usize;
        let text = js(&prose(rng, n));
        let mut m = Msg::new(rng, self.ms, "gemini", text);
        m.model = Some(if rng.pct(10) {
            "gemini-2.5-flash"
        } else {
            self.model
        });
        let thought = rng.pct(50);
        if thought {
            let mut items = Vec::new();
            for _ in 0..rng.range(1, 3) {
                let n = rng.range(60, 900) as usize;
                items.push(format!(
                    r#"{{"subject":{},"description":{},"timestamp":"{}"}}"#,
                    js(&prose(rng, 24).chars().take(40).collect::<String>()),
                    js(&prose(rng, n)),
                    iso(self.ms)
                ));
            }
            m.thoughts = Some(format!("[{}]", items.join(",")));
        }
        // Recorded, then its tokens when the usage arrives.
        self.write(stats, &m);
        self.last_updated();
        let input = self.context;
        let cached = if rng.pct(60) {
            input * rng.range(30, 95) / 100
        } else {
            0
        };
        let output = rng.range(20, 2_000);
        let thoughts = if thought { rng.range(10, 800) } else { 0 };
        let tool = if rng.pct(10) { rng.range(5, 200) } else { 0 };
        let total = input + output + thoughts + tool;
        m.tokens = Some(format!(
            r#"{{"input":{input},"output":{output},"cached":{cached},"thoughts":{thoughts},"tool":{tool},"total":{total}}}"#
        ));
        self.write(stats, &m);
        self.context += output + rng.range(50, 400);
        if !call {
            return;
        }
        let call_id = format!(
            "{}-{}",
            if subagent {
                "codebase_investigator"
            } else {
                "call"
            },
            &uuid(rng)[..13]
        );
        let (name, args) = if subagent {
            (
                "codebase_investigator",
                format!(
                    r#"{{"objective":{}}}"#,
                    js(&prose(rng, 80).chars().take(120).collect::<String>())
                ),
            )
        } else {
            let name = TOOLS[rng.below(TOOLS.len() as u64) as usize];
            let path = format!(
                "{}/src/module_{}/file_{}.rs",
                self.cwd,
                rng.below(40),
                rng.below(90)
            );
            (name, format!(r#"{{"absolute_path":{}}}"#, js(&path)))
        };
        let started = self.ms;
        let executing = format!(
            r#"[{{"id":"{call_id}","name":"{name}","args":{args},"result":null,"status":"executing","timestamp":"{}"}}]"#,
            iso(started)
        );
        m.tool_calls = Some(executing);
        self.write(stats, &m);
        let mut agent = None;
        if subagent {
            let mut sub = Session::new(rng, self.ms + 500, self.cwd, Some("subagent"));
            sub.model = self.model;
            sub.context = rng.range(3_000, 8_000);
            let prompt = prose(rng, 200);
            let responses = rng.range(1, 3);
            sub.turn_with(rng, stats, &prompt, responses);
            self.ms = sub.ms + rng.range(500, 5_000) as i64;
            agent = Some(sub.id.clone());
            self.subagents.push(sub);
            stats.subagents += 1;
        } else {
            self.tick(rng, 100, 20_000);
        }
        let n = match rng.below(100) {
            0..=79 => rng.range(200, 3_000),
            80..=97 => rng.range(3_000, 24_000),
            _ => rng.range(24_000, 128_000),
        } as usize;
        let error = rng.pct(5);
        let response = if error {
            format!(r#"{{"error":{}}}"#, js("Command exited with code 1"))
        } else {
            format!(r#"{{"output":{}}}"#, js(&tool_output(rng, n)))
        };
        let part = format!(
            r#"{{"functionResponse":{{"id":"{call_id}","name":"{name}","response":{response}}}}}"#
        );
        let agent_field = agent.map_or(String::new(), |a| format!(r#","agentId":"{a}""#));
        let status = if error { "error" } else { "success" };
        m.tool_calls = Some(format!(
            r#"[{{"id":"{call_id}","name":"{name}","args":{args},"result":[{part}],"status":"{status}","timestamp":"{}"{agent_field},"displayName":"{name}","resultDisplay":"done"}}]"#,
            iso(started)
        ));
        let late = (self.every_shape && !subagent && stats.late_copies == 0) || rng.pct(3);
        if !late {
            self.write(stats, &m);
        }
        let out = Msg::new(rng, self.ms, "user", format!("[{part}]"));
        self.write(stats, &out);
        if late {
            self.write_late(stats, &m);
        }
        self.last_updated();
        self.context += (n as u64) / 4;
    }

    /// A prompt and `responses` responses (the last one text only).
    fn turn_with(&mut self, rng: &mut Rng, stats: &mut Stats, prompt: &str, responses: u64) {
        let m = Msg::new(
            rng,
            self.ms,
            "user",
            format!(r#"[{{"text":{}}}]"#, js(prompt)),
        );
        self.prompts.push(self.list.len());
        self.write(stats, &m);
        self.last_updated();
        for r in 0..responses {
            self.response(rng, stats, r + 1 < responses, false);
        }
    }

    fn turn(&mut self, rng: &mut Rng, stats: &mut Stats, n: u64) {
        stats.turns += 1;
        self.tick(rng, 20_000, 900_000);
        let shapes = self.every_shape && n == 2;
        if n > 0 && !self.prompts.is_empty() && (shapes || rng.pct(1)) {
            // The previous turn rewound: its prompt and what followed leave
            // the list.
            stats.rewinds += 1;
            let at = *self.prompts.last().expect("a prompt");
            let id = self.list[at].id.clone();
            self.list.truncate(at);
            self.prompts.pop();
            self.push(format!(r#"{{"$rewindTo":"{id}"}}"#));
        }
        let len = rng.range(20, 600) as usize;
        let text = prose(rng, len);
        let mut prompt = Msg::new(rng, self.ms, "user", String::new());
        if shapes || rng.pct(3) {
            let file = format!("src/module_{}/file_{}.rs", rng.below(40), rng.below(90));
            let n = rng.range(500, 4_000) as usize;
            let body = tool_output(rng, n);
            prompt.content = format!(
                r#"[{{"text":{}}},{{"text":{}}}]"#,
                js(&format!("{text} @{file}")),
                js(&format!("--- Content from referenced files ---\nContent from @{file}:\n{body}\n--- End of content ---"))
            );
            prompt.display = Some(js(&format!("{text} @{file}")));
        } else if (self.every_shape && n == 1) || rng.pct(2) {
            prompt.content = format!(
                r#"[{{"text":"/{}"}}]"#,
                ["memory show", "stats", "tools"][rng.below(3) as usize]
            );
        } else {
            prompt.content = format!(r#"[{{"text":{}}}]"#, js(&text));
        }
        self.prompts.push(self.list.len());
        self.write(stats, &prompt);
        self.last_updated();
        let responses = rng.range(1, 5).max(if shapes { 2 } else { 1 });
        let subagent_at = if shapes || rng.pct(3) {
            Some(rng.below(responses.max(2) - 1))
        } else {
            None
        };
        for r in 0..responses {
            let sub = subagent_at == Some(r) && r + 1 < responses;
            self.response(rng, stats, r + 1 < responses, sub);
        }
        if shapes || rng.pct(2) {
            if shapes || rng.pct(25) {
                let mut m = Msg::new(rng, self.ms + 10, "info", String::new());
                m.content = r#"[{"text":"Binary content received (image/png)."},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}}]"#.to_owned();
                self.write(stats, &m);
            } else {
                self.notice(
                    rng,
                    stats,
                    "info",
                    "Switched to fallback model gemini-2.5-flash",
                );
            }
        }
        if shapes || rng.pct(1) {
            self.notice(
                rng,
                stats,
                "error",
                "[API Error: 503 The model is overloaded. Please try again later.]",
            );
        }
        if shapes || rng.below(1000) < 5 {
            self.notice(rng, stats, "warning", "Loop detected, stopping execution");
        }
        if (n > 5 && rng.pct(2)) || (self.every_shape && n == 3) {
            stats.checkpoints += 1;
            let before = self.context;
            self.context /= 5;
            self.notice(
                rng,
                stats,
                "info",
                &format!(
                    "Chat history compressed from {before} to {} tokens.",
                    self.context
                ),
            );
            let n = rng.range(400, 3_000) as usize;
            let summary = prose(rng, n);
            let s = Msg::new(
                rng,
                self.ms,
                "user",
                format!(
                    r#"[{{"text":{}}}]"#,
                    js(&format!("<state_snapshot>{summary}</state_snapshot>"))
                ),
            );
            let ack = Msg::new(
                rng,
                self.ms,
                "gemini",
                js("Got it. Thanks for the additional context!"),
            );
            stats.messages += 2;
            let keep = self.list.len().saturating_sub(2);
            let mut list = vec![s, ack];
            list.extend(self.list.drain(keep..));
            let l = format!(
                r#"{{"$set":{{"messages":[{}],"lastUpdated":"{}"}}}}"#,
                list.iter().map(Msg::json).collect::<Vec<_>>().join(","),
                iso(self.ms)
            );
            self.list = list;
            self.prompts.clear();
            self.push(l);
        }
    }
}

/// Writes `lines` to `path`, `damage` (line index, cut at byte, glued)
/// applied; its modification time `mtime_ms`.
fn write_file(
    path: &Path,
    lines: &[String],
    damage: &[(usize, usize, bool)],
    mtime_ms: i64,
) -> io::Result<(u64, u64)> {
    fs::create_dir_all(path.parent().expect("has a parent"))?;
    let file = fs::File::create(path)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let (mut bytes, mut written) = (0u64, 0u64);
    let mut d = damage.iter().peekable();
    for (i, l) in lines.iter().enumerate() {
        match d.next_if(|x| x.0 == i) {
            Some(&(_, cut, glued)) => {
                w.write_all(&l.as_bytes()[..cut])?;
                bytes += cut as u64;
                if !glued {
                    w.write_all(b"\n")?;
                    bytes += 1;
                    written += 1;
                }
            }
            None => {
                w.write_all(l.as_bytes())?;
                w.write_all(b"\n")?;
                bytes += l.len() as u64 + 1;
                written += 1;
            }
        }
    }
    let file = w.into_inner().map_err(io::IntoInnerError::into_error)?;
    let when = UNIX_EPOCH + Duration::from_millis(u64::try_from(mtime_ms).unwrap_or(0));
    file.set_modified(when)?;
    Ok((bytes, written))
}

/// Damage for `lines`: 0.1% after the first, or, for the first session,
/// one cut and one glued line at least.
fn damage_of(
    rng: &mut Rng,
    lines: &[String],
    first: bool,
    stats: &mut Stats,
) -> Vec<(usize, usize, bool)> {
    let mut out: Vec<(usize, usize, bool)> = Vec::new();
    for (i, l) in lines.iter().enumerate().skip(1) {
        // Not the last line: a glued line needs one after it, and a cut
        // line ends no file (a reader waits for a last line's rest).
        if i + 1 == lines.len() {
            break;
        }
        let forced = first && (i == 3 || i == 9);
        // Not after a damaged line (a glued line takes the next whole).
        if out.last().is_some_and(|d| d.0 + 1 == i) {
            continue;
        }
        if forced || rng.below(1000) == 0 {
            let cut = rng.range(1, l.len() as u64 - 1) as usize;
            let cut = (1..=cut)
                .rev()
                .find(|&c| l.is_char_boundary(c))
                .unwrap_or(1);
            let glued = if forced { i == 9 } else { rng.pct(50) };
            if glued {
                stats.glued += 1;
            } else {
                stats.cut += 1;
            }
            out.push((i, cut, glued));
        }
    }
    out
}

/// The folders of a project's session started at `start`: the first is
/// where it is written, a second (the slug folder) holds a copy.
fn folders(p: usize, start: i64) -> Vec<String> {
    let (path, layout, _) = PROJECTS[p];
    let hash = sha256_hex(path.as_bytes());
    let slug = slugs().swap_remove(p);
    match layout {
        Layout::Migrated if start < MIGRATION_MS => vec![hash, slug],
        Layout::Migrated | Layout::Slug | Layout::SlugRegistryOnly => vec![slug],
        Layout::HashTrusted | Layout::HashUnknown => vec![hash],
    }
}

/// `session-<YYYY-MM-DDTHH-MM>-<first 8 of the id>.jsonl`.
fn file_name(s: &Session, start: i64) -> String {
    let t = iso(start);
    format!("session-{}-{}.jsonl", t[..16].replace(':', "-"), &s.id[..8])
}

/// Writes a Gemini CLI home (a `.gemini` folder) of about `total_mb` MB
/// under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0x6E31_1C11);
    let total = (total_mb * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 0);
    let mut stats = Stats::default();
    fs::create_dir_all(dir.join("tmp"))?;
    let mut registry = Vec::new();
    for ((path, layout, _), slug) in PROJECTS.into_iter().zip(slugs()) {
        if matches!(
            layout,
            Layout::Migrated | Layout::Slug | Layout::SlugRegistryOnly
        ) {
            registry.push(format!("{}:{}", js(path), js(&slug)));
            if layout != Layout::SlugRegistryOnly {
                let d = dir.join("tmp").join(&slug);
                fs::create_dir_all(&d)?;
                fs::write(d.join(".project_root"), path)?;
            }
        }
    }
    fs::write(
        dir.join("projects.json"),
        format!("{{\"projects\":{{{}}}}}\n", registry.join(",")),
    )?;
    fs::write(
        dir.join("trustedFolders.json"),
        format!(
            "{{{}:\"TRUST_FOLDER\",{}:\"TRUST_FOLDER\"}}\n",
            js(PROJECTS[0].0),
            js(PROJECTS[4].0)
        ),
    )?;
    let mut logs: Vec<Vec<String>> = vec![Vec::new(); PROJECTS.len()];
    for (i, &size) in sizes.iter().enumerate() {
        if stats.bytes >= total {
            break;
        }
        stats.sessions += 1;
        let p = if i < PROJECTS.len() {
            i
        } else {
            let mut w = rng.below(100);
            PROJECTS
                .iter()
                .position(|x| {
                    let hit = w < x.2;
                    w = w.saturating_sub(x.2);
                    hit
                })
                .unwrap_or(0)
        };
        let start = if i == 0 {
            EPOCH_MS + 3 * DAY_MS + rng.below(DAY_MS as u64) as i64
        } else {
            EPOCH_MS + rng.below(200 * DAY_MS as u64) as i64
        };
        let kind = if rng.pct(20) && i > 0 {
            None
        } else {
            Some("main")
        };
        let mut s = Session::new(&mut rng, start, PROJECTS[p].0, kind);
        s.every_shape = i == 0;
        let resume = i == 0 || rng.pct(5);
        let mut n = 0;
        while s.bytes < size || n < 4 {
            if resume && n == 3 {
                stats.resumes += 1;
                s.tick(&mut rng, 3_600_000, 20 * 3_600_000);
                let l = format!(r#"{{"$set":{{"sessionId":"{}"}}}}"#, s.id);
                s.push(l);
            }
            s.turn(&mut rng, &mut stats, n);
            n += 1;
        }
        logs[p].push(format!(
            r#"{{"sessionId":"{}","messageId":0,"type":"user","message":"hello","timestamp":"{}"}}"#,
            s.id,
            iso(start)
        ));
        let damage = damage_of(&mut rng, &s.lines, i == 0, &mut stats);
        let mut written = Vec::new();
        for (k, folder) in folders(p, start).iter().enumerate() {
            let chats = dir.join("tmp").join(folder).join("chats");
            let path = chats.join(file_name(&s, start));
            let mtime = s.ms + 2_000;
            let (b, l) = write_file(&path, &s.lines, &damage, mtime)?;
            written.push((b, l));
            for sub in &s.subagents {
                // Subagents' files are not damaged.
                let p = chats.join(&s.id).join(format!("{}.jsonl", sub.id));
                let (b, l) = write_file(&p, &sub.lines, &[], sub.ms + 2_000)?;
                written.push((b, l));
            }
            if k > 0 {
                stats.copied_files += 1 + s.subagents.len() as u64;
            }
        }
        for (b, l) in written {
            stats.bytes += b;
            stats.lines += l;
            stats.files += 1;
        }
    }
    for (p, entries) in logs.iter().enumerate() {
        if entries.is_empty() {
            continue;
        }
        let start = if PROJECTS[p].1 == Layout::Migrated {
            MIGRATION_MS
        } else {
            0
        };
        let folder = folders(p, start).pop().expect("a folder");
        fs::write(
            dir.join("tmp").join(folder).join("logs.json"),
            format!("[{}]\n", entries.join(",")),
        )?;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_gemini_clis() {
        assert_eq!(slug("/home/dev/web.app"), "web-app");
        assert_eq!(slug("/srv/projects/Data  Pipeline/"), "data-pipeline");
        assert_eq!(slug("/tmp/--x--"), "x");
        assert_eq!(slug("/tmp/..."), "project");
        assert_eq!(
            slugs(),
            ["api", "web-app", "cli", "api-1", "data-pipeline", "scratch"]
        );
    }

    #[test]
    fn sha256_of_the_standards_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }
}
