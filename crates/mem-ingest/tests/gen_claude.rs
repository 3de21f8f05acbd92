//! `gen-corpus --format claude`: the layout of a small generated archive,
//! every line valid JSON, the summary's counts equal to what the files hold,
//! and two runs with the same seed byte-identical.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Runs the generator for a 3 MB archive (seed 7) into `dir`; returns its
/// stderr summary.
fn generate(dir: &Path) -> String {
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "claude",
            "--total-mb",
            "3",
            "--seed",
            "7",
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

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mem-ingest-gen-claude-{}-{name}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// Every file under `dir`, by path relative to it.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).expect("read dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs::read(&p).expect("read file"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The integers of a summary line, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("a number"))
        .collect()
}

/// The summary line that starts with `prefix` (after its indent).
fn summary_line<'a>(summary: &'a str, prefix: &str) -> &'a str {
    summary
        .lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in\n{summary}"))
}

/// The kind of a line, as the generator counts it.
fn kind(v: &Value) -> String {
    let ty = v["type"].as_str().expect("a type").to_string();
    match ty.as_str() {
        "user" if v["isCompactSummary"] == true => "user/compact_summary".into(),
        "user" if v["isMeta"] == true => "user/meta".into(),
        "user" => {
            let results = v["message"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
            if results {
                "user/tool_result"
            } else {
                "user/prompt"
            }
            .into()
        }
        "assistant" if v["message"]["model"] == "<synthetic>" => "assistant/synthetic".into(),
        "assistant" if v["message"]["stop_reason"].is_null() => "assistant/provisional".into(),
        "assistant" => "assistant/final".into(),
        "system" => match v["subtype"].as_str() {
            Some(s) => format!("system/{s}"),
            None => ty,
        },
        "progress" => format!(
            "progress/{}",
            v["data"]["type"].as_str().expect("data.type")
        ),
        "attachment" => format!(
            "attachment/{}",
            v["attachment"]["type"].as_str().expect("attachment.type")
        ),
        _ => ty,
    }
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts
            .iter()
            .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where a transcript sits: a session, or a subagent of a session (2.1.x)
/// or of the project (flat, 2.0.x).
enum Place {
    Session(String),
    Subagent {
        session: Option<String>,
        agent: String,
    },
}

/// Checks the path against the layout and says what the file is; `None`
/// for the files that are not transcripts (`.meta.json`, `tool-results/`).
fn place(rel: &str, all: &BTreeMap<String, Vec<u8>>) -> Option<Place> {
    let parts: Vec<&str> = rel.split('/').collect();
    assert_eq!(parts[0], "projects", "{rel}");
    let project = parts[1];
    assert!(
        project.starts_with('-')
            && project
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-'),
        "project folder {project:?}"
    );
    match parts[2..] {
        [f] if f.starts_with("agent-") => {
            let agent = f
                .strip_prefix("agent-")
                .and_then(|s| s.strip_suffix(".jsonl"))
                .expect("agent-<id>.jsonl");
            assert!(is_hex(agent, 8), "{rel}");
            Some(Place::Subagent {
                session: None,
                agent: agent.into(),
            })
        }
        [f] => {
            let session = f.strip_suffix(".jsonl").expect("<session>.jsonl");
            assert!(is_uuid(session), "{rel}");
            Some(Place::Session(session.into()))
        }
        [session, folder, f] => {
            assert!(
                all.contains_key(&format!("projects/{project}/{session}.jsonl")),
                "{rel} without its session file"
            );
            match folder {
                "subagents" => {
                    let (stem, meta) = match f.strip_suffix(".meta.json") {
                        Some(stem) => (stem, true),
                        None => (f.strip_suffix(".jsonl").expect("agent-<id>.jsonl"), false),
                    };
                    let agent = stem.strip_prefix("agent-").expect("agent-<id>");
                    assert!(agent.starts_with('a') && is_hex(&agent[1..], 16), "{rel}");
                    let twin = format!(
                        "projects/{project}/{session}/subagents/{stem}.{}",
                        if meta { "jsonl" } else { "meta.json" }
                    );
                    assert!(all.contains_key(&twin), "{rel} without {twin}");
                    if meta {
                        let m: Value = serde_json::from_slice(&all[rel]).expect("meta JSON");
                        let keys: Vec<&str> = m
                            .as_object()
                            .expect("an object")
                            .keys()
                            .map(String::as_str)
                            .collect();
                        assert_eq!(
                            keys,
                            ["agentType", "description", "toolUseId", "spawnDepth"],
                            "{rel}"
                        );
                        return None;
                    }
                    Some(Place::Subagent {
                        session: Some(session.into()),
                        agent: agent.into(),
                    })
                }
                "tool-results" => {
                    assert!(f.starts_with("toolu_") && f.ends_with(".txt"), "{rel}");
                    None
                }
                _ => panic!("unexpected folder in {rel}"),
            }
        }
        _ => panic!("unexpected path {rel}"),
    }
}

#[test]
fn claude_archive_layout_lines_and_summary() {
    let dir = temp_dir("a");
    let summary = generate(&dir);
    let all = files(&dir);
    let first = summary_line(&summary, "gen-corpus: claude");
    let n_files: u64 = first
        .split(" files,")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .expect("N files");
    assert_eq!(n_files, all.len() as u64, "{summary}");

    let mut types: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut kinds: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let (mut sessions, mut subagents, mut flat, mut meta, mut tool_results) = (0, 0, 0, 0, 0);
    let mut versions = BTreeSet::new();
    // uuid -> the session files it is on; message id -> (requestId, stop_reason set) per copy.
    let mut uuids: HashMap<String, Vec<String>> = HashMap::new();
    let mut main_requests: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut sub_requests: Vec<(String, String)> = Vec::new();
    let mut finished: HashMap<String, bool> = HashMap::new();
    let mut progress_usage = 0;
    let mut inline_sidechain = 0;
    for (rel, bytes) in &all {
        if rel.ends_with(".meta.json") {
            meta += 1;
        } else if rel.contains("/tool-results/") {
            tool_results += 1;
        }
        let Some(place) = place(rel, &all) else {
            continue;
        };
        assert!(bytes.ends_with(b"\n"), "{rel}: no final newline");
        match &place {
            Place::Session(_) => sessions += 1,
            Place::Subagent { session, .. } => {
                subagents += 1;
                flat += u64::from(session.is_none());
            }
        }
        let mut session_ids = BTreeSet::new();
        for line in bytes.split_inclusive(|&b| b == b'\n') {
            let v: Value = serde_json::from_slice(line)
                .unwrap_or_else(|e| panic!("{rel}: {e}: {}", String::from_utf8_lossy(line)));
            let k = kind(&v);
            let ty = v["type"].as_str().expect("type").to_string();
            for (map, key) in [(&mut types, ty.clone()), (&mut kinds, k.clone())] {
                let e = map.entry(key).or_default();
                e.0 += 1;
                e.1 += line.len() as u64;
            }
            if let Some(s) = v["sessionId"].as_str() {
                session_ids.insert(s.to_string());
            }
            if let Some(ver) = v["version"].as_str() {
                versions.insert(ver.to_string());
            }
            let conversational = matches!(ty.as_str(), "user" | "assistant");
            if let (Place::Subagent { agent, .. }, true) = (&place, conversational) {
                assert_eq!(v["isSidechain"], true, "{rel}");
                assert_eq!(v["agentId"].as_str(), Some(agent.as_str()), "{rel}");
            }
            if matches!(place, Place::Session(_)) && v["isSidechain"] == true {
                inline_sidechain += 1;
            }
            if let (Place::Session(_), Some(u)) = (&place, v["uuid"].as_str()) {
                uuids.entry(u.to_string()).or_default().push(rel.clone());
            }
            if ty == "assistant" && v["message"]["model"] != "<synthetic>" {
                let id = v["message"]["id"].as_str().expect("message.id").to_string();
                let req = v["requestId"].as_str().expect("requestId").to_string();
                *finished.entry(id.clone()).or_default() |= !v["message"]["stop_reason"].is_null();
                match &place {
                    Place::Session(_) if v["isSidechain"] == false => {
                        main_requests.entry(id).or_default().insert(req);
                    }
                    Place::Subagent { .. } => sub_requests.push((id, req)),
                    Place::Session(_) => {}
                }
            }
            if k == "progress/agent_progress" && v["data"]["message"]["type"] == "assistant" {
                progress_usage += 1;
            }
        }
        match &place {
            Place::Session(s) => assert_eq!(session_ids, BTreeSet::from([s.clone()]), "{rel}"),
            Place::Subagent {
                session: Some(s), ..
            } => assert_eq!(session_ids, BTreeSet::from([s.clone()]), "{rel}"),
            Place::Subagent { session: None, .. } => assert_eq!(session_ids.len(), 1, "{rel}"),
        }
    }

    // The table: type rows indented by two spaces, kind rows by four.
    let mut printed_types = BTreeMap::new();
    let mut printed_kinds = BTreeMap::new();
    let table = summary
        .lines()
        .skip_while(|l| !l.contains("line type / kind"))
        .skip(1);
    for l in table {
        let cols: Vec<&str> = l.split_whitespace().collect();
        let (name, lines, bytes) = (
            cols[0].to_string(),
            cols[1].parse::<u64>().unwrap(),
            cols[2].parse::<u64>().unwrap(),
        );
        if name == "total" {
            let sum: u64 = all.values().map(|b| b.len() as u64).sum();
            assert_eq!(lines, types.values().map(|v| v.0).sum::<u64>());
            assert!(
                bytes <= sum,
                "transcript bytes {bytes} over the archive's {sum}"
            );
        } else if l.starts_with("    ") {
            printed_kinds.insert(name, (lines, bytes));
        } else {
            printed_types.insert(name, (lines, bytes));
        }
    }
    kinds.retain(|k, _| k.contains('/'));
    assert_eq!(printed_types, types, "{summary}");
    assert_eq!(printed_kinds, kinds, "{summary}");

    // Files and replays.
    let s = numbers(summary_line(&summary, "sessions "));
    let [n_sessions, resumed, resumed_lines, n_sub, n_meta, n_flat, _forks, fork_lines, inline, n_results] =
        s[..]
    else {
        panic!("sessions line {s:?}")
    };
    assert_eq!(
        (n_sessions, n_sub, n_meta, n_flat, n_results),
        (sessions, subagents, meta, flat, tool_results)
    );
    let shared: Vec<&Vec<String>> = uuids.values().filter(|f| f.len() > 1).collect();
    let pairs: BTreeSet<&Vec<String>> = shared.iter().copied().collect();
    assert!(
        shared.iter().all(|f| f.len() == 2 && f[0] != f[1]),
        "a uuid twice in one file or in three"
    );
    assert_eq!(resumed_lines, shared.len() as u64);
    assert_eq!(resumed, pairs.len() as u64);
    assert!(resumed >= 1, "the seventh session resumes the first");
    // Subagent copies of a parent's response carry a new requestId.
    let forked: Vec<_> = sub_requests
        .iter()
        .filter(|(id, _)| main_requests.contains_key(id))
        .collect();
    assert!(forked.len() as u64 <= fork_lines);
    assert!(!forked.is_empty(), "no subagent replays a parent response");
    assert!(forked
        .iter()
        .all(|(id, req)| !main_requests[id].contains(req)));
    assert_eq!(inline, inline_sidechain);
    // Responses: one message id each (replays keep it), one requestId per
    // response in its own file.
    let r = numbers(summary_line(&summary, "responses "));
    let [responses, _streamed, 2, provisional_only, synthetic, with_usage] = r[..] else {
        panic!("responses line {r:?}")
    };
    assert_eq!(responses, finished.len() as u64);
    assert_eq!(
        provisional_only,
        finished.values().filter(|f| !**f).count() as u64
    );
    assert_eq!(
        synthetic,
        kinds.get("assistant/synthetic").map_or(0, |v| v.0)
    );
    assert_eq!(with_usage, progress_usage);
    assert!(main_requests.values().all(|r| r.len() == 1));
    // Every version, and the shapes a small archive always has.
    let expected = [
        "1.0.128", "1.0.30", "2.0.28", "2.0.55", "2.1.152", "2.1.231",
    ];
    assert_eq!(
        versions.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
    let always = [
        "assistant/provisional",
        "assistant/final",
        "user/prompt",
        "user/tool_result",
        "attachment/skill_listing",
        "progress/agent_progress",
        "system/compact_boundary",
        "user/compact_summary",
    ];
    for k in always {
        assert!(kinds.contains_key(k), "no {k} line");
    }
    for t in ["file-history-snapshot", "queue-operation", "last-prompt"] {
        assert!(types.contains_key(t), "no {t} line");
    }
    assert!(meta > 0 && flat > 0, "subagents in both layouts");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn claude_archive_is_deterministic() {
    let (a, b) = (temp_dir("b1"), temp_dir("b2"));
    generate(&a);
    generate(&b);
    let (fa, fb) = (files(&a), files(&b));
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(v == &fb[k], "{k} differs between two runs");
    }
    let _ = fs::remove_dir_all(&a);
    let _ = fs::remove_dir_all(&b);
}
