//! Gemini CLI token totals against ccusage 20.0.24 (`ccusage gemini daily
//! --json --offline`, `TZ=UTC`) on sessions written here: equal on one
//! copy of a session (re-appended messages, `$set`, `$rewindTo`, a late
//! copy, both cases of the cached rule), and the documented difference
//! (ccusage counts a hash folder's and a slug folder's copy of one session
//! twice; ours once, `--no-dedupe` twice). Ignored in a plain clone: they
//! need ccusage (`CCUSAGE`, else
//! `/tmp/ccusage-reference/node_modules/.bin/ccusage`, which `.ci/run`
//! installs); there a missing tool is a failure.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

fn ccusage() -> PathBuf {
    let p = std::env::var_os("CCUSAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/ccusage-reference/node_modules/.bin/ccusage"));
    assert!(
        p.exists(),
        "ccusage not found at {} (set CCUSAGE, or install ../shared/ccusage-reference with npm install)",
        p.display()
    );
    p
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-conform-gemini-{}-{name}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

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
    let out = Command::new(ccusage())
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
    let g = tmpdir("equal").join(".gemini");
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
    let g = tmpdir("copies").join(".gemini");
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
