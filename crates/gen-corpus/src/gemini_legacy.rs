//! Gemini CLI homes of the legacy sessions (`--format gemini-legacy`): a
//! `.gemini` folder with the whole-file JSON sessions of
//! `shared/spec/gemini-cli-format.md` §3 (before v0.39), deterministic from
//! the seed.
//!
//! ```text
//! DIR/projects.json                      {"projects": {"<path>": "<slug>"}}
//! DIR/trustedFolders.json                {"<path>": "TRUST_FOLDER"}
//! DIR/tmp/<sha256 of the path>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.json   (before v0.29)
//! DIR/tmp/<slug>/.project_root           the project's path
//! DIR/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.json                 (v0.29 to v0.38)
//! DIR/tmp/<folder>/chats/<parent sessionId>/<sessionId>.json                 (subagents)
//! DIR/tmp/<folder>/chats/session-....jsonl   a resumed session's migrated successor
//! DIR/tmp/<folder>/logs.json             the prompts (an array: no session)
//! ```
//!
//! Each session is one object as `JSON.stringify(conversation, null, 2)`
//! writes it (`sessionId`, `projectHash`, `startTime`, `lastUpdated`,
//! `messages`, then `directories` and `kind`), written once.
//!
//! # Rates (stated; the summary on stderr counts what a run wrote)
//!
//! - Projects: `/home/dev/api` (35%) and `/home/dev/web.app` (25%) in hash
//!   folders until 2026-02-01, slug folders with `.project_root` after;
//!   `/srv/projects/Data Pipeline` (25%, a hash folder, its path in
//!   `trustedFolders.json`), `/tmp/scratch` (15%, a hash folder, its path
//!   nowhere: unknown). The first four sessions one each.
//! - A turn: a `user` prompt (`[{text}]`, `displayContent` 3%), then 1-5
//!   `gemini` responses (content a string, `thoughts[]` 50%, `tokens`
//!   with `input` growing with the history, `cached` 60% of the time
//!   inside it, `thoughts` when thoughts were written, `tool` 10%,
//!   `total` = `input + output + thoughts + tool`; `tokens: null` 1%, its
//!   usage never attached), each but the last with a `toolCalls[]` entry
//!   holding its result (`success`, `error` 5%; 0.2-3 KB 80%, 3-24 KB
//!   18%, 24-128 KB 2%). The model is the session's, `gemini-2.5-flash`
//!   10% of responses.
//! - Notices: an `info` 2% of turns, an `error` 1%, a `warning` 0.5%.
//! - A subagent: 3% of turns, a `codebase_investigator` call whose
//!   `agentId` is a session of its own in `chats/<sessionId>/` (`kind:
//!   "subagent"`, `directories`), of 1-3 responses.
//! - Resumed after v0.39 (5% of main sessions, the second always): a
//!   `.jsonl` beside the `.json` (its name and `l`) holding a metadata
//!   line, every message of the `.json` (one line each), `{"$set":
//!   {"sessionId"}}`, then 1-3 more turns (a prompt, `$set` of
//!   `lastUpdated`, an answer with its tokens); the `.json` stays.
//! - Each file's modification time is its session's end (long past).

use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::cline::pretty;
use super::gemini::{sha256_hex, slug};
use super::{iso, json_str, plan_sizes, prose, tool_output, uuid, Rng, MB};

/// 2025-10-01T00:00:00Z.
const EPOCH_MS: i64 = 1_759_276_800_000;
const DAY_MS: i64 = 86_400_000;
/// 2026-02-01T00:00:00Z: slug folders from here (v0.29).
const SLUG_MS: i64 = 1_769_904_000_000;

const MODELS: [&str; 2] = ["gemini-2.5-pro", "gemini-3-pro-preview"];
const TOOLS: [&str; 5] = [
    "read_file",
    "run_shell_command",
    "replace",
    "write_file",
    "search_file_content",
];

/// `(path, weight %, slug folders after SLUG_MS)`.
const PROJECTS: [(&str, u64, bool); 4] = [
    ("/home/dev/api", 35, true),
    ("/home/dev/web.app", 25, true),
    ("/srv/projects/Data Pipeline", 25, false),
    ("/tmp/scratch", 15, false),
];

/// What a run wrote.
#[derive(Default)]
pub(crate) struct Stats {
    files: u64,
    bytes: u64,
    sessions: u64,
    subagents: u64,
    resumed: u64,
    turns: u64,
    messages: u64,
    responses: u64,
    without_tokens: u64,
    notices: u64,
}

impl Stats {
    pub(crate) fn print(&self, err: &mut dyn std::io::Write, what: &str, secs: f64) {
        let _ = writeln!(
            err,
            "gen-corpus: {what}: {} files ({} sessions, {} subagents, {} resumed into a .jsonl), \
             {:.1} MB, {} turns, {} messages ({} responses, {} without tokens; {} notices), in \
             {secs:.1}s",
            self.files,
            self.sessions,
            self.subagents,
            self.resumed,
            self.bytes as f64 / MB as f64,
            self.turns,
            self.messages,
            self.responses,
            self.without_tokens,
            self.notices,
        );
    }
}

fn js(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    json_str(&mut v, s);
    String::from_utf8(v).expect("UTF-8")
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

/// A session being written: its messages (compact JSON).
struct Session {
    id: String,
    model: &'static str,
    messages: Vec<String>,
    bytes: u64,
    start: i64,
    ms: i64,
    /// The history's size in tokens.
    context: u64,
}

impl Session {
    fn push(&mut self, m: String, stats: &mut Stats) {
        self.bytes += m.len() as u64;
        self.messages.push(m);
        stats.messages += 1;
    }

    fn user(&mut self, rng: &mut Rng, stats: &mut Stats) {
        self.ms += rng.range(20_000, 600_000) as i64;
        let n = rng.range(40, 600) as usize;
        let text = prose(rng, n);
        let display = if rng.pct(3) {
            format!(
                r#","displayContent":[{{"text":{}}}]"#,
                js("@src/main.rs explain")
            )
        } else {
            String::new()
        };
        let m = format!(
            r#"{{"id":"{}","timestamp":"{}","type":"user","content":[{{"text":{}}}]{display}}}"#,
            uuid(rng),
            iso(self.ms),
            js(&text)
        );
        self.push(m, stats);
    }

    /// A response; `call`: its tool call's name and agent id (a subagent).
    fn gemini(&mut self, rng: &mut Rng, call: Option<(&str, Option<&str>)>, stats: &mut Stats) {
        stats.responses += 1;
        self.ms += rng.range(2_000, 40_000) as i64;
        let ts = iso(self.ms);
        let n = rng.range(30, 1_500) as usize;
        let mut m = format!(
            r#"{{"id":"{}","timestamp":"{ts}","type":"gemini","content":{}"#,
            uuid(rng),
            js(&prose(rng, n))
        );
        let thoughts = rng.pct(50);
        if thoughts {
            let n = rng.range(80, 900) as usize;
            m.push_str(&format!(
                r#","thoughts":[{{"subject":"Planning the change","description":{},"timestamp":"{}"}}]"#,
                js(&prose(rng, n)),
                iso(self.ms - 300)
            ));
        }
        if rng.pct(1) {
            stats.without_tokens += 1;
            m.push_str(r#","tokens":null"#);
        } else {
            let output = rng.range(5, 2_000);
            let input = self.context + rng.range(10, 3_000);
            let cached = if rng.pct(60) { self.context / 2 } else { 0 };
            let th = if thoughts { rng.range(10, 900) } else { 0 };
            let tool = if rng.pct(10) { rng.range(1, 200) } else { 0 };
            self.context = input + output;
            m.push_str(&format!(
                r#","tokens":{{"input":{input},"output":{output},"cached":{cached},"thoughts":{th},"tool":{tool},"total":{}}}"#,
                input + output + th + tool
            ));
        }
        let model = if rng.pct(10) {
            "gemini-2.5-flash"
        } else {
            self.model
        };
        m.push_str(&format!(r#","model":"{model}""#));
        if let Some((name, agent)) = call {
            let call_id = format!("{name}-{}-{}", self.ms, &uuid(rng)[..8]);
            let error = rng.pct(5);
            let n = result_size(rng);
            let out = tool_output(rng, n);
            let response = if error {
                format!(r#"{{"error":{}}}"#, js(&out))
            } else {
                format!(r#"{{"output":{}}}"#, js(&out))
            };
            let agent_field = agent
                .map(|a| format!(r#","agentId":"{a}""#))
                .unwrap_or_default();
            m.push_str(&format!(
                r#","toolCalls":[{{"id":"{call_id}","name":"{name}","args":{{"path":"src/mod_{}.rs"}},"result":[{{"functionResponse":{{"id":"{call_id}","name":"{name}","response":{response}}}}}],"status":"{}","timestamp":"{ts}"{agent_field},"displayName":"{name}","description":{},"resultDisplay":"done","renderOutputAsMarkdown":true}}]"#,
                rng.below(40),
                if error { "error" } else { "success" },
                js(&prose(rng, 40))
            ));
        }
        m.push('}');
        self.push(m, stats);
    }

    fn notice(&mut self, rng: &mut Rng, ty: &str, stats: &mut Stats) {
        stats.notices += 1;
        self.ms += rng.range(100, 5_000) as i64;
        let m = format!(
            r#"{{"id":"{}","timestamp":"{}","type":"{ty}","content":{}}}"#,
            uuid(rng),
            iso(self.ms),
            js(&prose(rng, 80))
        );
        self.push(m, stats);
    }

    /// The file's JSON, as Gemini CLI writes it.
    fn document(&self, path: &str, subagent: bool) -> String {
        let tail = if subagent {
            format!(r#","directories":[{}],"kind":"subagent""#, js(path))
        } else {
            r#","kind":"main""#.to_owned()
        };
        pretty(
            &format!(
                r#"{{"sessionId":"{}","projectHash":"{}","startTime":"{}","lastUpdated":"{}","messages":[{}]{tail}}}"#,
                self.id,
                sha256_hex(path.as_bytes()),
                iso(self.start),
                iso(self.ms),
                self.messages.join(",")
            ),
            "  ",
        )
    }
}

fn write(path: &Path, text: &str, mtime_ms: i64, stats: &mut Stats) -> io::Result<()> {
    fs::create_dir_all(path.parent().expect("has a parent"))?;
    let mut f = fs::File::create(path)?;
    f.write_all(text.as_bytes())?;
    f.set_modified(UNIX_EPOCH + Duration::from_millis(u64::try_from(mtime_ms).unwrap_or(0)))?;
    stats.bytes += text.len() as u64;
    stats.files += 1;
    Ok(())
}

/// Writes a legacy Gemini CLI home (a `.gemini` folder) of about
/// `total_mb` MB under `dir`.
pub(crate) fn write_archive(dir: &Path, total_mb: f64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::new(seed ^ 0x6c65_6761_6379);
    // Sessions are planned at 65% of the total: the indentation, the last
    // turn past a session's size, subagents and migrated copies make up
    // the rest.
    let total = (total_mb * 0.65 * MB as f64) as u64;
    let sizes = plan_sizes(&mut rng, total, 2_000);
    let mut stats = Stats::default();
    let mut folders_used: Vec<(String, usize)> = Vec::new();
    for (i, size) in sizes.into_iter().enumerate() {
        let p = if i < PROJECTS.len() {
            i
        } else {
            let mut r = rng.below(100);
            let mut p = 0;
            while r >= PROJECTS[p].1 {
                r -= PROJECTS[p].1;
                p += 1;
            }
            p
        };
        let (path, _, slugs) = PROJECTS[p];
        // The second session starts in the slug era, to have both.
        let start = if i == 1 {
            SLUG_MS + rng.below(DAY_MS as u64) as i64
        } else {
            EPOCH_MS + (i as i64 % 180) * DAY_MS + rng.below(DAY_MS as u64 / 2) as i64
        };
        let folder = if slugs && start >= SLUG_MS {
            slug(path)
        } else {
            sha256_hex(path.as_bytes())
        };
        if !folders_used.iter().any(|(f, _)| *f == folder) {
            folders_used.push((folder.clone(), p));
        }
        let chats = dir.join("tmp").join(&folder).join("chats");
        let mut s = Session {
            id: uuid(&mut rng),
            model: rng.pick(&MODELS),
            messages: Vec::new(),
            bytes: 0,
            start,
            ms: start,
            context: rng.range(2_000, 9_000),
        };
        let mut subagents: Vec<Session> = Vec::new();
        while s.bytes < size {
            stats.turns += 1;
            s.user(&mut rng, &mut stats);
            let responses = rng.range(1, 5);
            for r in 0..responses {
                let last = r + 1 == responses;
                if !last && rng.pct(3) {
                    // A subagent's session, run by this call.
                    let mut sub = Session {
                        id: uuid(&mut rng),
                        model: s.model,
                        messages: Vec::new(),
                        bytes: 0,
                        start: s.ms,
                        ms: s.ms,
                        context: rng.range(1_000, 4_000),
                    };
                    sub.user(&mut rng, &mut stats);
                    let k = rng.range(1, 3);
                    for j in 0..k {
                        let call = (j + 1 < k).then(|| (rng.pick(&TOOLS), None));
                        sub.gemini(&mut rng, call, &mut stats);
                    }
                    let agent = sub.id.clone();
                    s.gemini(
                        &mut rng,
                        Some(("codebase_investigator", Some(&agent))),
                        &mut stats,
                    );
                    subagents.push(sub);
                } else {
                    let call = (!last).then(|| (rng.pick(&TOOLS), None));
                    s.gemini(&mut rng, call, &mut stats);
                }
            }
            let n = rng.below(1000);
            if n < 20 {
                s.notice(&mut rng, "info", &mut stats);
            } else if n < 30 {
                s.notice(&mut rng, "error", &mut stats);
            } else if n < 35 {
                s.notice(&mut rng, "warning", &mut stats);
            }
        }
        let t = iso(start);
        let name = format!("session-{}-{}.json", t[..16].replace(':', "-"), &s.id[..8]);
        let doc = s.document(path, false);
        write(&chats.join(&name), &doc, s.ms + 2_000, &mut stats)?;
        stats.sessions += 1;
        for sub in &subagents {
            let doc = sub.document(path, true);
            write(
                &chats.join(&s.id).join(format!("{}.json", sub.id)),
                &doc,
                sub.ms + 1_000,
                &mut stats,
            )?;
            stats.subagents += 1;
        }
        if i == 1 || (i > 1 && rng.pct(5)) {
            // Resumed after v0.39: migrated into `<name>l`, the `.json`
            // left as it was.
            stats.resumed += 1;
            let mut lines = vec![format!(
                r#"{{"sessionId":"{}","projectHash":"{}","startTime":"{}","lastUpdated":"{}","kind":"main"}}"#,
                s.id,
                sha256_hex(path.as_bytes()),
                iso(start),
                iso(s.ms)
            )];
            lines.extend(s.messages.iter().cloned());
            lines.push(format!(r#"{{"$set":{{"sessionId":"{}"}}}}"#, s.id));
            let before = s.messages.len();
            s.ms += rng.range(3_600_000, 20 * DAY_MS as u64) as i64;
            for _ in 0..rng.range(1, 3) {
                stats.turns += 1;
                s.user(&mut rng, &mut stats);
                lines.push(s.messages.last().expect("pushed").clone());
                lines.push(format!(r#"{{"$set":{{"lastUpdated":"{}"}}}}"#, iso(s.ms)));
                s.gemini(&mut rng, None, &mut stats);
                lines.push(s.messages.last().expect("pushed").clone());
            }
            debug_assert!(s.messages.len() > before);
            let mut text = lines.join("\n");
            text.push('\n');
            write(
                &chats.join(format!("{name}l")),
                &text,
                s.ms + 2_000,
                &mut stats,
            )?;
        }
    }
    // What tells a folder's project: `.project_root` in a slug folder,
    // `projects.json` for the slugs, `trustedFolders.json` for the hash
    // folders of every project but the unknown one.
    let mut registry = Vec::new();
    for (folder, p) in &folders_used {
        let (path, _, slugs) = PROJECTS[*p];
        let tmp = dir.join("tmp").join(folder);
        if slugs && *folder == slug(path) {
            write(&tmp.join(".project_root"), path, EPOCH_MS, &mut stats)?;
            registry.push(format!("{}:{}", js(path), js(folder)));
        }
        write(
            &tmp.join("logs.json"),
            &format!(
                r#"[{{"sessionId":"x","messageId":0,"type":"user","message":"hi","timestamp":"{}"}}]"#,
                iso(EPOCH_MS)
            ),
            EPOCH_MS,
            &mut stats,
        )?;
    }
    write(
        &dir.join("projects.json"),
        &format!(r#"{{"projects":{{{}}}}}"#, registry.join(",")),
        EPOCH_MS,
        &mut stats,
    )?;
    let trusted: Vec<String> = PROJECTS
        .iter()
        .filter(|(p, _, _)| *p != "/tmp/scratch")
        .map(|(p, _, _)| format!(r#"{}:"TRUST_FOLDER""#, js(p)))
        .collect();
    write(
        &dir.join("trustedFolders.json"),
        &format!("{{{}}}", trusted.join(",")),
        EPOCH_MS,
        &mut stats,
    )?;
    Ok(stats)
}
