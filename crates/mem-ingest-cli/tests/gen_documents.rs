//! Generated archives of the document agents (`gen-corpus --format cline`
//! and `--format gemini-legacy`): the same seed gives the same bytes,
//! every shape the generator states is there, and `stats` and `backfill`
//! read them as the files say, each count computed here from the files
//! (serde_json, the spec's rules), not through mem-ingest.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn generate(format: &str, dir: &Path, mb: &str, seed: &str) -> String {
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            format,
            "--total-mb",
            mb,
            "--seed",
            seed,
            "--archive",
        ])
        .arg(dir)
        .output()
        .expect("run gen-corpus");
    assert!(
        out.status.success(),
        "gen-corpus failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).expect("UTF-8 summary")
}

/// Every file under `dir` by its path relative to it.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).expect("read dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What a run's counts should be, from the files.
#[derive(Debug, Default)]
struct Want {
    /// Session files read.
    files: u64,
    /// Record keys, in file order within each file.
    keys: BTreeSet<String>,
    /// Items (a document's messages; a JSONL file's lines).
    lines: u64,
    /// `[input, output, cache_read, cache_write, total_tokens]`.
    usage: [u64; 5],
    projects: BTreeSet<String>,
    /// Shapes seen (see each reader).
    shapes: BTreeMap<&'static str, u64>,
}

impl Want {
    fn saw(&mut self, shape: &'static str) {
        *self.shapes.entry(shape).or_default() += 1;
    }

    fn add_usage(&mut self, u: [u64; 5]) {
        for (a, b) in self.usage.iter_mut().zip(u) {
            *a += b;
        }
    }
}

fn stats(envs: &[(&str, &Path)], agent: &str, home: &Path) -> Value {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mem-ingest"));
    c.args(["stats", "--json", "-q", "--agent", agent])
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("CLINE_DIR")
        .env_remove("CLINE_SESSION_DATA_DIR");
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn backfill_keys(envs: &[(&str, &Path)], agent: &str, home: &Path) -> BTreeSet<String> {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mem-ingest"));
    c.args(["backfill", "-q", "--agent", agent])
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("GEMINI_CLI_HOME")
        .env_remove("CLINE_DIR")
        .env_remove("CLINE_SESSION_DATA_DIR");
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut keys = BTreeSet::new();
    for l in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let k = v["key"].as_str().unwrap().to_owned();
        assert!(keys.insert(k.clone()), "{k} twice");
    }
    keys
}

fn check(v: &Value, want: &Want, agent: &str) {
    assert_eq!(
        v["records"].as_u64(),
        Some(want.keys.len() as u64),
        "records"
    );
    assert_eq!(v["lines"].as_u64(), Some(want.lines), "lines");
    assert_eq!(v["skipped"].as_u64(), Some(0), "skipped");
    assert_eq!(v["files_failed"].as_u64(), Some(0), "failed");
    assert_eq!(
        v["by_source"][agent]["files"].as_u64(),
        Some(want.files),
        "files"
    );
    let u = &v["usage"];
    let got = [
        "input",
        "output",
        "cache_read",
        "cache_write",
        "total_tokens",
    ]
    .map(|k| u[k].as_u64().unwrap());
    assert_eq!(got, want.usage, "usage");
    let projects: BTreeSet<String> = v["by_project"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["project"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(projects, want.projects);
}

// ---------------------------------------------------------------------------
// Cline

/// A Cline data folder read as `shared/spec/cline-format.md` says: the
/// transcripts by exact name (never `ui_messages.json`, `taskHistory.json`,
/// manifests, `*.compaction.json` or temp files), each message a record
/// keyed `<session>:<id>` (`#<position>` without one), usage each assistant
/// message's metrics once (SDK `inputTokens` counting the cache; legacy
/// `tokens.prompt` counting `cached`), the cwd from the manifest or
/// `taskHistory.json`.
fn read_cline(dir: &Path) -> Want {
    let all = files(dir);
    let mut w = Want::default();
    let history: Value = all
        .get("state/taskHistory.json")
        .map(|b| serde_json::from_slice(b).unwrap())
        .unwrap_or(Value::Null);
    let task_cwd = |id: &str| {
        history
            .as_array()
            .into_iter()
            .flatten()
            .find(|h| h["id"] == id)
            .map(|h| h["cwdOnTaskInitialization"].as_str().unwrap().to_owned())
    };
    for (rel, bytes) in &all {
        let parts: Vec<&str> = rel.split('/').collect();
        let name = *parts.last().unwrap();
        let (session, project, messages, legacy) = match parts.as_slice() {
            ["tasks", id, "api_conversation_history.json"] => {
                let v: Value = serde_json::from_slice(bytes).unwrap();
                let cwd = task_cwd(id);
                if cwd.is_none() {
                    w.saw("task without history");
                }
                (
                    (*id).to_owned(),
                    cwd.unwrap_or_default(),
                    v.as_array().unwrap().clone(),
                    true,
                )
            }
            ["sessions", sid, _] if name.ends_with(".messages.json") => {
                let v: Value = serde_json::from_slice(bytes).unwrap();
                let manifest: Value =
                    serde_json::from_slice(&all[&format!("sessions/{sid}/{sid}.json")]).unwrap();
                assert_eq!(manifest["session_id"], *sid);
                if name != format!("{sid}.messages.json") {
                    assert_eq!(v["agent"], "subagent", "{rel}");
                    w.saw("subagent");
                } else {
                    assert_eq!(v["agent"], "lead", "{rel}");
                }
                assert!(bytes.starts_with(b"{\n\t\"version\": 1,"), "{rel}");
                (
                    v["sessionId"].as_str().unwrap().to_owned(),
                    manifest["cwd"].as_str().unwrap().to_owned(),
                    v["messages"].as_array().unwrap().clone(),
                    false,
                )
            }
            ["tasks", _, "ui_messages.json"] => {
                w.saw("ui_messages");
                continue;
            }
            ["sessions", sid, _] if name == format!("{sid}.json") => continue,
            ["sessions", _, _] if name.ends_with(".compaction.json") => {
                w.saw("compaction file");
                continue;
            }
            ["sessions", _, _] if name.contains(".messages.json.tmp.") => {
                w.saw("temp file");
                continue;
            }
            ["state", "taskHistory.json"] => continue,
            _ => panic!("{rel}: not a file the generator says it writes"),
        };
        w.files += 1;
        w.projects.insert(project);
        if legacy {
            w.saw(if messages[1].get("id").is_some() {
                "legacy v3.40"
            } else {
                "legacy before v3.40"
            });
        }
        for (i, m) in messages.iter().enumerate() {
            w.lines += 1;
            let key = m["id"]
                .as_str()
                .map_or_else(|| format!("#{}", i + 1), str::to_owned);
            assert!(w.keys.insert(format!("{session}:{key}")), "{rel}: {key}");
            let blocks = m["content"].as_array();
            if m["content"].is_string() {
                w.saw("string content");
            }
            for b in blocks.into_iter().flatten() {
                match b["type"].as_str().unwrap() {
                    "tool_result" if b["content"].is_array() => w.saw("tool_result list"),
                    "tool_result" => w.saw("tool_result"),
                    "file" => w.saw("file block"),
                    "thinking" => w.saw("thinking"),
                    "tool_use" => w.saw("tool_use"),
                    "text" if b["text"].as_str().unwrap().contains("</read_file>") => {
                        w.saw("xml tool")
                    }
                    _ => {}
                }
            }
            if m["metadata"]["kind"] == "compaction" {
                w.saw("compaction summary");
            }
            let metrics = &m["metrics"];
            if m["role"] != "assistant" || !metrics.is_object() {
                continue;
            }
            let n = |v: &Value| v.as_u64().unwrap();
            if let Some(t) = metrics.get("tokens") {
                let (prompt, out, cached) = (n(&t["prompt"]), n(&t["completion"]), n(&t["cached"]));
                w.add_usage([prompt - cached, out, cached, 0, prompt + out]);
            } else {
                let (input, out, read, write) = (
                    n(&metrics["inputTokens"]),
                    n(&metrics["outputTokens"]),
                    n(&metrics["cacheReadTokens"]),
                    n(&metrics["cacheWriteTokens"]),
                );
                w.add_usage([input - read - write, out, read, write, input + out]);
            }
        }
    }
    w
}

/// A generated Cline data folder: deterministic, every stated shape there,
/// and `stats` and `backfill` (`--agent cline`, `CLINE_DATA_DIR`) read
/// exactly its transcripts' messages, usage and projects.
#[test]
fn generated_cline_archive_is_valid_and_read_exactly() {
    let root = common::tmpdir("gen-documents", "cline");
    let (a, b) = (root.join("a"), root.join("b"));
    let summary = generate("cline", &a, "3", "7");
    generate("cline", &b, "3", "7");
    assert_eq!(files(&a), files(&b), "the same seed, the same bytes");
    let want = read_cline(&a);
    for s in [
        "subagent",
        "legacy v3.40",
        "legacy before v3.40",
        "task without history",
        "string content",
        "tool_result",
        "tool_result list",
        "file block",
        "thinking",
        "tool_use",
        "xml tool",
        "compaction summary",
        "compaction file",
        "temp file",
        "ui_messages",
    ] {
        assert!(
            want.shapes.get(s).copied().unwrap_or(0) > 0,
            "{s}: {:?}",
            want.shapes
        );
    }
    assert!(
        summary.contains(&format!(": {} documents (", want.files))
            && summary.contains(&format!(", {} messages,", want.lines)),
        "{summary}"
    );
    let home = root.join("home");
    fs::create_dir_all(&home).unwrap();
    let envs = [("CLINE_DATA_DIR", a.as_path())];
    let v = stats(&envs, "cline", &home);
    check(&v, &want, "cline");
    assert!(want.projects.contains(""));
    assert_eq!(want.projects.len(), 5);
    assert_eq!(backfill_keys(&envs, "cline", &home), want.keys);
    fs::remove_dir_all(root).unwrap();
}

// ---------------------------------------------------------------------------
// Gemini CLI's legacy sessions

const TRUSTED: [&str; 3] = [
    "/home/dev/api",
    "/home/dev/web.app",
    "/srv/projects/Data Pipeline",
];

/// A legacy Gemini CLI home read as `shared/spec/gemini-cli-format.md`
/// says: `chats/**/*.json(l)` sessions, each message id once per session
/// (a `.json` and its migrated `.jsonl` copy share theirs), usage each
/// message's `tokens.total` (null: none), the project from `.project_root`
/// or the hash of a trusted path (unknown: `""`).
fn read_gemini_legacy(dir: &Path) -> Want {
    let all = files(dir);
    let mut w = Want::default();
    let hashes: BTreeMap<String, &str> = TRUSTED
        .iter()
        .map(|p| (sha256_hex(p.as_bytes()), *p))
        .collect();
    let mut messages: BTreeMap<String, Value> = BTreeMap::new();
    for (rel, bytes) in &all {
        let parts: Vec<&str> = rel.split('/').collect();
        let name = *parts.last().unwrap();
        match parts.as_slice() {
            ["projects.json" | "trustedFolders.json"]
            | ["tmp", _, ".project_root" | "logs.json"] => continue,
            ["tmp", folder, "chats", ..] => {
                w.files += 1;
                let project = match all.get(&format!("tmp/{folder}/.project_root")) {
                    Some(p) => String::from_utf8(p.clone()).unwrap(),
                    None => hashes
                        .get(*folder)
                        .map(|p| (*p).to_owned())
                        .unwrap_or_default(),
                };
                let list: Vec<Value> = if name.ends_with(".jsonl") {
                    w.projects.insert(project);
                    w.saw("migrated jsonl");
                    let text = std::str::from_utf8(bytes).unwrap();
                    let mut list = Vec::new();
                    for l in text.lines() {
                        w.lines += 1;
                        let v: Value = serde_json::from_str(l).unwrap();
                        if v["id"].is_string() {
                            list.push(v);
                        }
                    }
                    list
                } else {
                    assert!(bytes.starts_with(b"{\n  \"sessionId\": \""), "{rel}");
                    let v: Value = serde_json::from_slice(bytes).unwrap();
                    assert_eq!(v["projectHash"].as_str().unwrap().len(), 64);
                    // A subagent's `directories` tells a project its folder
                    // does not.
                    let dir = v["directories"][0].as_str().unwrap_or("");
                    w.projects.insert(if project.is_empty() {
                        dir.to_owned()
                    } else {
                        project
                    });
                    if parts.len() == 5 {
                        assert_eq!(v["kind"], "subagent");
                        assert!(!dir.is_empty());
                        assert_eq!(name, format!("{}.json", v["sessionId"].as_str().unwrap()));
                        w.saw("subagent");
                    } else {
                        assert_eq!(v["kind"], "main");
                        assert!(name.starts_with("session-") && name.ends_with(".json"));
                    }
                    if folder.len() == 64 {
                        w.saw("hash folder");
                    } else {
                        w.saw("slug folder");
                    }
                    let list = v["messages"].as_array().unwrap().clone();
                    w.lines += list.len() as u64;
                    list.into_iter()
                        .map(|mut m| {
                            m["sessionId"] = v["sessionId"].clone();
                            m
                        })
                        .collect()
                };
                let sid = list
                    .first()
                    .and_then(|m| m["sessionId"].as_str().map(str::to_owned));
                // A .jsonl's session id is its metadata line's.
                let sid = sid.unwrap_or_else(|| {
                    let first = std::str::from_utf8(bytes).unwrap().lines().next().unwrap();
                    serde_json::from_str::<Value>(first).unwrap()["sessionId"]
                        .as_str()
                        .unwrap()
                        .to_owned()
                });
                for m in list {
                    match m["type"].as_str().unwrap() {
                        "info" | "error" | "warning" => w.saw("notice"),
                        "gemini" if m["tokens"].is_null() => w.saw("tokens null"),
                        "gemini" if m["toolCalls"].is_array() => w.saw("tool call"),
                        _ => {}
                    }
                    let key = format!("{sid}:{}", m["id"].as_str().unwrap());
                    if let Some(before) = messages.get(&key) {
                        w.saw("copied message");
                        let mut m2 = m.clone();
                        m2["sessionId"] = before["sessionId"].clone();
                        assert_eq!(before, &m2, "{key}: a copy differs");
                        continue;
                    }
                    let mut m = m;
                    m["sessionId"] = Value::String(sid.clone());
                    messages.insert(key, m);
                }
            }
            _ => panic!("{rel}: not a file the generator says it writes"),
        }
    }
    for (key, m) in messages {
        w.keys.insert(key);
        let t = &m["tokens"];
        if m["type"] != "gemini" || !t.is_object() {
            continue;
        }
        let n = |k: &str| t[k].as_u64().unwrap();
        let (input, output, cached, thoughts, tool, total) = (
            n("input"),
            n("output"),
            n("cached"),
            n("thoughts"),
            n("tool"),
            n("total"),
        );
        assert_eq!(total, input + output + thoughts + tool);
        // The cached tokens inside the input (the spec's §10 rule: total
        // is the sum without them).
        w.add_usage([input - cached + tool, output, cached, 0, total]);
    }
    w
}

fn sha256_hex(data: &[u8]) -> String {
    // The SHA-256 of the three trusted paths, as `sha256sum` prints them
    // (gen-corpus writes its own; computed here by the system's tool so
    // the test does not take the generator's word).
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// A generated legacy Gemini CLI home: deterministic, every stated shape
/// there, and `stats` and `backfill` (`--agent gemini`,
/// `GEMINI_DATA_DIR`) read each message once (a resumed session's `.json`
/// and `.jsonl` together), its usage and its project.
#[test]
fn generated_gemini_legacy_home_is_valid_and_read_exactly() {
    let root = common::tmpdir("gen-documents", "gemini-legacy");
    let (a, b) = (root.join("a/.gemini"), root.join("b/.gemini"));
    let summary = generate("gemini-legacy", &a, "3", "7");
    generate("gemini-legacy", &b, "3", "7");
    assert_eq!(files(&a), files(&b), "the same seed, the same bytes");
    let want = read_gemini_legacy(&a);
    for s in [
        "subagent",
        "hash folder",
        "slug folder",
        "migrated jsonl",
        "copied message",
        "notice",
        "tokens null",
        "tool call",
    ] {
        assert!(
            want.shapes.get(s).copied().unwrap_or(0) > 0,
            "{s}: {:?}",
            want.shapes
        );
    }
    assert!(summary.contains(" resumed into a .jsonl"), "{summary}");
    let home = root.join("home");
    fs::create_dir_all(&home).unwrap();
    let tmp = a.join("tmp");
    let envs = [("GEMINI_DATA_DIR", tmp.as_path())];
    let v = stats(&envs, "gemini", &home);
    check(&v, &want, "gemini");
    for p in ["", TRUSTED[0], TRUSTED[1], TRUSTED[2]] {
        assert!(want.projects.contains(p), "{p}: {:?}", want.projects);
    }
    assert_eq!(backfill_keys(&envs, "gemini", &home), want.keys);
    fs::remove_dir_all(root).unwrap();
}
