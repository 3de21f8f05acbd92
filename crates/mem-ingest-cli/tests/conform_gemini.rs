//! Gemini CLI token totals against ccusage 20.0.24 (`ccusage gemini daily
//! --json --offline`, `TZ=UTC`) on sessions written here: equal on one
//! copy of a session (re-appended messages, `$set`, `$rewindTo`, a late
//! copy, both cases of the cached rule), and the documented difference
//! (ccusage counts a hash folder's and a slug folder's copy of one session
//! twice; ours once, `--no-dedupe` twice); and on generated homes (the
//! generator's shapes checked line by line, ours without deduplication
//! equal to ccusage's totals, with it lower by the migration copies).
//! Ignored in a plain clone: they need ccusage (`CCUSAGE`, else
//! `/tmp/ccusage-reference/node_modules/.bin/ccusage`, which `.ci/run`
//! installs); there a missing tool is a failure. The generator's own
//! checks run everywhere.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

/// `(input, cache_read, output)` by model, and the total tokens.
#[derive(Debug, PartialEq, Eq, Default, Clone)]
struct Totals {
    by_model: BTreeMap<String, [u64; 3]>,
    total: u64,
    input: u64,
    cache_read: u64,
    output: u64,
}

/// ccusage's totals of the Gemini folder `gemini` (a `.gemini` folder),
/// over the days.
fn theirs(gemini: &Path) -> Totals {
    let home = gemini.with_extension("home");
    fs::create_dir_all(&home).unwrap();
    let out = Command::new(common::ccusage())
        .args(["gemini", "daily", "--json", "--offline"])
        .env("HOME", &home)
        .env("GEMINI_DATA_DIR", gemini.join("tmp"))
        .env("TZ", "UTC")
        .output()
        .unwrap();
    fs::remove_dir_all(&home).unwrap();
    assert!(
        out.status.success(),
        "ccusage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut t = Totals::default();
    for day in v["daily"].as_array().unwrap() {
        for m in day["modelBreakdowns"].as_array().unwrap() {
            let e = t
                .by_model
                .entry(m["modelName"].as_str().unwrap().to_owned())
                .or_default();
            for (i, k) in ["inputTokens", "cacheReadTokens", "outputTokens"]
                .iter()
                .enumerate()
            {
                e[i] += m[k].as_u64().unwrap();
            }
        }
    }
    let tot = &v["totals"];
    t.total = tot["totalTokens"].as_u64().unwrap();
    t.input = tot["inputTokens"].as_u64().unwrap();
    t.cache_read = tot["cacheReadTokens"].as_u64().unwrap();
    t.output = tot["outputTokens"].as_u64().unwrap();
    t
}

/// Ours, from `stats --json` (with `extra` arguments).
fn ours(gemini: &Path, extra: &[&str]) -> Totals {
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q", "--agent", "gemini"])
        .args(extra)
        .env("HOME", gemini.with_extension("none"))
        .env_remove("GEMINI_CLI_HOME")
        .env("GEMINI_DATA_DIR", gemini.join("tmp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mem-ingest: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut t = Totals::default();
    for m in v["by_model"].as_array().unwrap() {
        let e = t
            .by_model
            .entry(m["model"].as_str().unwrap().to_owned())
            .or_default();
        for (i, k) in ["input", "cache_read", "output"].iter().enumerate() {
            e[i] += m[k].as_u64().unwrap();
        }
    }
    let u = &v["usage"];
    t.total = u["total_tokens"].as_u64().unwrap();
    t.input = u["input"].as_u64().unwrap();
    t.cache_read = u["cache_read"].as_u64().unwrap();
    t.output = u["output"].as_u64().unwrap();
    t
}

fn msg(id: &str, ts: &str, ty: &str, more: Value) -> String {
    let mut v = json!({"id": id, "timestamp": ts, "type": ty});
    for (k, x) in more.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

fn tokens(input: u64, output: u64, cached: u64, thoughts: u64, tool: u64, total: u64) -> Value {
    json!({"input": input, "output": output, "cached": cached, "thoughts": thoughts,
           "tool": tool, "total": total})
}

/// A session of every shape: a message re-appended (tokens null, then
/// tokens, then its tool call), a `$set` checkpoint, a rewind of an
/// answered turn, a late copy with the same tokens; the cached rule's
/// both cases (cached inside the input; a total that counts the cached
/// tokens again, where the input is all input); two days, two models.
fn session(sid: &str) -> Vec<String> {
    let g1 = json!({"content": "a", "model": "gemini-2.5-pro",
                    "tokens": tokens(1000, 50, 600, 20, 0, 1070)});
    let mut g1_call = g1.clone();
    g1_call["toolCalls"] = json!([{"id": "c1", "name": "ls", "args": {}, "status": "success"}]);
    vec![
        json!({"sessionId": sid, "projectHash": "0".repeat(64),
               "startTime": "2026-09-01T10:00:00.000Z", "lastUpdated": "2026-09-01T10:00:00.000Z"})
        .to_string(),
        msg("u1", "2026-09-01T10:00:01.000Z", "user", json!({"content": [{"text": "go"}]})),
        msg("g1", "2026-09-01T10:00:02.000Z", "gemini", json!({"content": "", "model": "gemini-2.5-pro", "tokens": null})),
        msg("g1", "2026-09-01T10:00:02.000Z", "gemini", g1.clone()),
        msg("g1", "2026-09-01T10:00:02.000Z", "gemini", g1_call.clone()),
        json!({"$set": {"lastUpdated": "2026-09-01T10:00:03.000Z"}}).to_string(),
        msg("g2", "2026-09-01T10:00:04.000Z", "gemini", json!({"content": "b", "model": "gemini-2.5-pro",
            "tokens": tokens(1200, 10, 0, 0, 5, 1215)})),
        json!({"$set": {"messages": [{"id": "x1", "timestamp": "2026-09-01T10:00:05.000Z", "type": "user", "content": [{"text": "summary"}]}]}}).to_string(),
        msg("u2", "2026-09-02T23:59:59.000Z", "user", json!({"content": [{"text": "again"}]})),
        msg("g3", "2026-09-02T23:59:59.500Z", "gemini", json!({"content": "c", "model": "gemini-2.5-flash",
            "tokens": tokens(300, 7, 100, 0, 0, 307)})),
        json!({"$rewindTo": "u2"}).to_string(),
        msg("g1", "2026-09-01T10:00:02.000Z", "gemini", g1_call),
        msg("g4", "2026-09-03T00:00:01.000Z", "gemini", json!({"content": "d", "model": "gemini-2.5-flash",
            "tokens": tokens(400, 9, 50, 1, 0, 460)})),
    ]
}

/// `tmp/<dir>/chats/session-...jsonl` under `gemini`, still for a minute.
fn write(gemini: &Path, dir: &str, sid: &str, lines: &[String]) {
    let chats = gemini.join("tmp").join(dir).join("chats");
    fs::create_dir_all(&chats).unwrap();
    let p = chats.join(format!("session-2026-09-01T10-00-{}.jsonl", &sid[..8]));
    fs::write(&p, lines.join("\n") + "\n").unwrap();
    fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
}

#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn equal_on_one_copy_of_each_session() {
    let g = common::tmpdir("conform-gemini", "equal").join(".gemini");
    write(&g, "app", "11111111-aaaa", &session("11111111-aaaa"));
    write(&g, "web", "22222222-bbbb", &session("22222222-bbbb")[..7]);
    let theirs = theirs(&g);
    let ours = ours(&g, &[]);
    assert_eq!(ours, theirs);
    // g1 400+600 cached, g2 1205, g3 200+100 cached, g4 400 and 50 cached
    // (its total counts the cached tokens beside the input: all of its
    // input is input); twice g1 and g2.
    assert_eq!(ours.total, 2 * (1070 + 1215) + 307 + 460);
    assert_eq!(
        (ours.input, ours.cache_read, ours.output),
        (
            2 * (400 + 1205) + 200 + 400,
            2 * 600 + 100 + 50,
            2 * 60 + 7 + 9
        )
    );
    fs::remove_dir_all(g.parent().unwrap()).unwrap();
}

#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn hash_and_slug_copies_counted_twice_by_ccusage_once_here() {
    let g = common::tmpdir("conform-gemini", "copies").join(".gemini");
    let lines = session("33333333-cccc");
    write(&g, "app", "33333333-cccc", &lines);
    let one = ours(&g, &[]);
    assert_eq!(theirs(&g), one);
    write(&g, &"a".repeat(64), "33333333-cccc", &lines);
    let theirs_both = theirs(&g);
    assert_eq!(theirs_both.total, 2 * one.total);
    assert_eq!(ours(&g, &[]), one);
    assert_eq!(ours(&g, &["--no-dedupe"]), theirs_both);
    fs::remove_dir_all(g.parent().unwrap()).unwrap();
}

// ---------------------------------------------------------------------------
// Generated archives

/// A generated Gemini CLI home (a `.gemini` folder) of `mb` MB.
fn generate(dir: &Path, mb: &str, seed: &str) -> String {
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "gemini",
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

/// What a generated home holds, read here from its files as the spec
/// says (not through mem-ingest).
#[derive(Default, Debug)]
struct Archive {
    /// Session files by path under `tmp/`, with their session id.
    sessions: BTreeMap<String, String>,
    /// Their lines, and those that are not JSON (cut or glued).
    lines: u64,
    damaged: u64,
    /// Line shapes: `user`, `gemini`, ... (a message line by its type,
    /// `tool_result` for a `user` one of `functionResponse` parts),
    /// `$set/lastUpdated`, `$set/messages`, `$set/sessionId`,
    /// `$rewindTo`, `metadata`, `late copy`.
    shapes: BTreeMap<String, u64>,
    /// Every (session, message id) once, its last copy's total tokens
    /// (0 without), and each file's sum of those (ccusage's count).
    messages: BTreeMap<(String, String), u64>,
    by_file: BTreeMap<String, u64>,
    /// The session files that are byte copies of another (the slug
    /// folder's copy of a hash folder's file), and their lines.
    copies: Vec<String>,
    copied_lines: u64,
}

fn read_archive(dir: &Path) -> Archive {
    let mut a = Archive::default();
    let all = files(dir);
    let mut by_name: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for (rel, bytes) in &all {
        let parts: Vec<&str> = rel.split('/').collect();
        if !rel.ends_with(".jsonl") {
            assert!(
                matches!(
                    parts.as_slice(),
                    ["projects.json" | "trustedFolders.json"]
                        | ["tmp", _, ".project_root" | "logs.json"]
                ),
                "{rel}"
            );
            continue;
        }
        assert_eq!((parts[0], parts[2]), ("tmp", "chats"), "{rel}");
        let text = std::str::from_utf8(bytes).unwrap();
        let mut lines = text.lines();
        let meta: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        let sid = meta["sessionId"].as_str().unwrap().to_owned();
        let name = parts[parts.len() - 1];
        match parts.len() {
            4 => {
                assert!(name.starts_with("session-2026-"), "{rel}");
                assert!(name.ends_with(&format!("-{}.jsonl", &sid[..8])), "{rel}");
                assert_ne!(meta["kind"], "subagent");
            }
            5 => {
                assert_eq!(name, format!("{sid}.jsonl"));
                assert_eq!(meta["kind"], "subagent");
                assert!(meta["directories"][0].is_string());
            }
            _ => panic!("{rel}"),
        }
        let hash = meta["projectHash"].as_str().unwrap();
        assert_eq!(hash.len(), 64);
        if parts[1].len() == 64 {
            assert_eq!(parts[1], hash, "{rel}");
        }
        by_name.entry(parts[2..].join("/")).or_default().push(rel);
        a.sessions.insert(rel.clone(), sid.clone());
        *a.shapes.entry("metadata".into()).or_default() += 1;
        a.lines += 1;
        // The last copy of each message id, and the order they came in.
        let mut last: BTreeMap<String, Value> = BTreeMap::new();
        let mut current: Option<String> = None;
        for l in lines {
            a.lines += 1;
            let Ok(v) = serde_json::from_str::<Value>(l) else {
                a.damaged += 1;
                continue;
            };
            let shape = if v.get("$rewindTo").is_some() {
                "$rewindTo".to_owned()
            } else if let Some(id) = v["id"].as_str() {
                if last.contains_key(id) && current.as_deref() != Some(id) {
                    *a.shapes.entry("late copy".into()).or_default() += 1;
                }
                current = Some(id.to_owned());
                last.insert(id.to_owned(), v.clone());
                let parts = v["content"].as_array();
                let responses = parts.is_some_and(|p| {
                    !p.is_empty() && p.iter().all(|x| x.get("functionResponse").is_some())
                });
                if v["type"] == "user" && responses {
                    "tool_result".to_owned()
                } else {
                    v["type"].as_str().unwrap().to_owned()
                }
            } else {
                let set = v["$set"].as_object().unwrap();
                assert_eq!(set.len(), 1 + usize::from(set.contains_key("messages")));
                if let Some(list) = set.get("messages") {
                    for m in list.as_array().unwrap() {
                        let id = m["id"].as_str().unwrap();
                        last.insert(id.to_owned(), m.clone());
                    }
                    current = None;
                    "$set/messages".to_owned()
                } else {
                    format!("$set/{}", set.keys().next().unwrap())
                }
            };
            *a.shapes.entry(shape).or_default() += 1;
        }
        let mut sum = 0;
        for (id, m) in last {
            let total = m["tokens"]["total"].as_u64().unwrap_or(0);
            sum += total;
            a.messages.insert((sid.clone(), id), total);
        }
        a.by_file.insert(rel.clone(), sum);
    }
    for (name, rels) in by_name {
        if rels.len() > 1 {
            assert_eq!(rels.len(), 2, "{name}");
            assert_eq!(all[rels[0]], all[rels[1]], "{name}");
            // The copy is the slug folder's (the hash folder's name sorts
            // either way: the slug is the shorter).
            let copy = if rels[0].len() < rels[1].len() {
                rels[0]
            } else {
                rels[1]
            };
            a.copied_lines += std::str::from_utf8(&all[copy]).unwrap().lines().count() as u64;
            a.copies.push(copy.clone());
        }
    }
    a
}

/// Every line of a generated home is one of the spec's shapes but the
/// damaged ones, every shape is there, the same seed gives the same
/// bytes, and `stats` reads it: every message id once per session (the
/// migration copies deduplicated), the damaged lines skipped, each
/// project's cwd recovered as the spec says (unknown for the one no file
/// names), usage the last copies' tokens.
#[test]
fn generated_archive_is_valid_and_deterministic() {
    let a = common::tmpdir("conform-gemini", "gen-a").join(".gemini");
    let b = common::tmpdir("conform-gemini", "gen-b").join(".gemini");
    let summary = generate(&a, "2", "7");
    generate(&b, "2", "7");
    assert_eq!(files(&a), files(&b));
    let seen = read_archive(&a);
    for s in [
        "metadata",
        "user",
        "tool_result",
        "gemini",
        "info",
        "error",
        "warning",
        "late copy",
        "$set/lastUpdated",
        "$set/messages",
        "$set/sessionId",
        "$rewindTo",
    ] {
        assert!(
            seen.shapes.get(s).copied().unwrap_or(0) > 0,
            "{s}: {:?}",
            seen.shapes
        );
    }
    assert!(seen.damaged >= 2, "{}", seen.damaged);
    assert!(!seen.copies.is_empty());
    assert!(seen.sessions.keys().any(|r| r.split('/').count() == 5));
    assert!(
        summary.contains(&format!(": {} files (", seen.sessions.len()))
            && summary.contains(&format!("{} migration copies", seen.copies.len())),
        "{summary}"
    );
    // Written still: the files' times are their sessions' ends.
    for rel in seen.sessions.keys() {
        let age = fs::metadata(a.join(rel))
            .unwrap()
            .modified()
            .unwrap()
            .elapsed()
            .unwrap();
        assert!(age > Duration::from_secs(86_400), "{rel}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
        .args(["stats", "--json", "-q", "--agent", "gemini"])
        .env("HOME", a.with_extension("none"))
        .env_remove("GEMINI_CLI_HOME")
        .env("GEMINI_DATA_DIR", a.join("tmp"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let total: u64 = seen.messages.values().sum();
    assert_eq!(v["records"].as_u64(), Some(seen.messages.len() as u64));
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(total));
    assert_eq!(v["lines"].as_u64(), Some(seen.lines));
    assert_eq!(v["skipped"].as_u64(), Some(seen.damaged));
    assert_eq!(
        v["by_source"]["gemini"]["files"].as_u64(),
        Some(seen.sessions.len() as u64)
    );
    let projects: Vec<&str> = v["by_project"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["project"].as_str().unwrap())
        .collect();
    let mut projects = projects;
    projects.sort_unstable();
    assert_eq!(
        projects,
        [
            "",
            "/home/dev/api",
            "/home/dev/other/api",
            "/home/dev/tools/cli",
            "/home/dev/web.app",
            "/srv/projects/Data Pipeline"
        ]
    );
    fs::remove_dir_all(a.parent().unwrap()).unwrap();
    fs::remove_dir_all(b.parent().unwrap()).unwrap();
}

/// On a generated home (re-appended messages, late copies, checkpoints,
/// rewinds, subagents, damaged lines, migration copies), ours without
/// deduplication equal ccusage's totals by model; with it, lower by the
/// migration copies' tokens alone (ccusage counts a session in a hash
/// folder and its copy in the slug folder twice).
#[test]
#[ignore = "needs ccusage; run by .ci/run with --include-ignored"]
fn generated_archive_against_ccusage() {
    let g = common::tmpdir("conform-gemini", "gen-ccusage").join(".gemini");
    generate(&g, "3", "11");
    let seen = read_archive(&g);
    let theirs = theirs(&g);
    let all = ours(&g, &["--no-dedupe"]);
    assert_eq!(all, theirs);
    assert_eq!(theirs.total, seen.by_file.values().sum::<u64>());
    let copied: u64 = seen.copies.iter().map(|c| seen.by_file[c]).sum();
    assert!(copied > 0);
    let once = ours(&g, &[]);
    assert_eq!(all.total - once.total, copied);
    assert_eq!(once.total, seen.messages.values().sum::<u64>());
    fs::remove_dir_all(g.parent().unwrap()).unwrap();
}
