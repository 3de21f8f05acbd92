//! Gemini CLI's legacy `session-*.json` sessions (before v0.39), read as
//! documents with `--agent gemini`: the mapping of the JSONL messages, a
//! legacy file and its migrated `.jsonl` giving each message once, rewrites
//! (one more message, a rewind's truncation) with `--state`, `--db` and
//! `--parquet`, and the real sample.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;
mod usage_sums;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("gemini-legacy", name)
}

const SID: &str = "dcbe78d3-ea75-4786-929e-d6cff0fc00ed";

fn msg(id: &str, ty: &str, sec: u32, more: Value) -> Value {
    let mut v =
        json!({"id": id, "timestamp": format!("2026-06-05T04:59:{sec:02}.000Z"), "type": ty});
    for (k, x) in more.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn tokens(input: u64, output: u64, total: u64) -> Value {
    json!({"input": input, "output": output, "cached": 0, "thoughts": total - input - output,
           "tool": 0, "total": total})
}

/// A legacy session of `n` messages (user and gemini in turn).
fn legacy(n: usize) -> Value {
    let messages: Vec<Value> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                msg(
                    &format!("u{i}"),
                    "user",
                    i as u32,
                    json!({"content": [{"text": format!("ask {i}")}]}),
                )
            } else {
                msg(
                    &format!("g{i}"),
                    "gemini",
                    i as u32,
                    json!({"content": format!("answer {i}"), "model": "gemini-2.5-flash",
                           "tokens": tokens(100, 10, 115)}),
                )
            }
        })
        .collect();
    json!({"sessionId": SID, "projectHash": "abc", "startTime": "2026-06-05T04:59:00.000Z",
           "lastUpdated": "2026-06-05T04:59:44.839Z", "messages": messages, "kind": "main"})
}

fn chats(home: &Path) -> PathBuf {
    let c = home.join(".gemini/tmp/app/chats");
    fs::create_dir_all(&c).unwrap();
    fs::write(home.join(".gemini/tmp/app/.project_root"), "/home/me/app").unwrap();
    c
}

fn bin(home: &Path) -> Command {
    let mut c = common::cli();
    c.env("HOME", home);
    c
}

fn ndjson(b: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stats(home: &Path) -> Value {
    let o = bin(home)
        .args(["stats", "--json", "-q", "--agent", "gemini"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn a_legacy_session_maps_as_its_jsonl_messages_do() {
    let home = tmpdir("shapes");
    let c = chats(&home);
    fs::write(
        c.join("session-2026-06-05T04-59-dcbe78d3.json"),
        serde_json::to_string_pretty(&legacy(4)).unwrap(),
    )
    .unwrap();
    // Not a session: skipped, counted, named.
    fs::write(c.join("session-notes.json"), "[1, 2]").unwrap();
    let o = bin(&home)
        .args(["backfill", "--agent", "gemini"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let recs = ndjson(&o.stdout);
    let got: Vec<(&str, &str, &str, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap(),
                r["role"].as_str().unwrap(),
                r["text"].as_str().unwrap(),
                r["project"].as_str().unwrap(),
            )
        })
        .collect();
    let k = |id: &str| format!("{SID}:{id}");
    assert_eq!(
        got,
        [
            (k("u0").as_str(), "user", "ask 0", "/home/me/app"),
            (k("g1").as_str(), "assistant", "answer 1", "/home/me/app"),
            (k("u2").as_str(), "user", "ask 2", "/home/me/app"),
            (k("g3").as_str(), "assistant", "answer 3", "/home/me/app"),
        ]
    );
    assert_eq!(recs[1]["model"], "gemini-2.5-flash");
    assert_eq!(
        recs[1]["source"],
        "gemini:session-2026-06-05T04-59-dcbe78d3"
    );
    assert!(
        err.contains(&format!(
            "{}:1:0: skipped: file not read: not a Gemini CLI session: no `messages` list",
            c.join("session-notes.json").display()
        )),
        "{err}"
    );
    let v = stats(&home);
    assert_eq!(
        (
            &v["usage"]["input"],
            &v["usage"]["output"],
            &v["usage"]["total_tokens"]
        ),
        (&json!(200), &json!(20), &json!(230))
    );
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn a_legacy_file_and_its_migrated_jsonl_give_each_message_once() {
    let home = tmpdir("migrated");
    let c = chats(&home);
    let name = "session-2026-06-05T04-59-dcbe78d3";
    let old = legacy(4);
    fs::write(
        c.join(format!("{name}.json")),
        serde_json::to_string_pretty(&old).unwrap(),
    )
    .unwrap();
    // Resumed: the writer appends a metadata line and every old message
    // to `<name>.jsonl`, then goes on there.
    let mut lines = vec![json!({"sessionId": SID, "projectHash": "abc",
                                "startTime": "2026-06-05T04:59:00.000Z",
                                "lastUpdated": "2026-06-05T05:10:00.000Z", "kind": "main"})
    .to_string()];
    for m in old["messages"].as_array().unwrap() {
        lines.push(m.to_string());
    }
    lines.push(msg("u4", "user", 50, json!({"content": [{"text": "ask 4"}]})).to_string());
    lines.push(
        msg(
            "g5",
            "gemini",
            55,
            json!({"content": "answer 5", "model": "gemini-2.5-flash",
                                       "tokens": tokens(100, 10, 115)}),
        )
        .to_string(),
    );
    let jsonl = c.join(format!("{name}.jsonl"));
    fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let f = fs::File::options().write(true).open(&jsonl).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    let o = bin(&home)
        .args(["backfill", "--agent", "gemini"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let keys: Vec<String> = ndjson(&o.stdout)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    let want: Vec<String> = ["u0", "g1", "u2", "g3", "u4", "g5"]
        .iter()
        .map(|k| format!("{SID}:{k}"))
        .collect();
    assert_eq!(keys, want);
    // Three answers' tokens, once (ccusage 20.0.24 counts the two copied
    // answers twice: five).
    let v = stats(&home);
    assert_eq!(v["usage"]["total_tokens"], 3 * 115, "{v}");
    assert_eq!(v["records"], 6);
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn rewrites_emit_exactly_the_new_messages_with_state_db_and_parquet() {
    let home = tmpdir("rewrites");
    let c = chats(&home);
    let path = c.join("session-2026-06-05T04-59-dcbe78d3.json");
    fs::write(&path, serde_json::to_string_pretty(&legacy(2)).unwrap()).unwrap();
    let (state, out, db) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("m.db"),
    );
    let (ds, pstate) = (home.join("ds"), home.join("pstate"));
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| -> String {
        let mut c = bin(&home);
        c.args(["backfill", "--agent", "gemini"]);
        for a in extra {
            c.arg(a);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let all_runs = || {
        [
            run(&[&"--state", &state, &"-o", &out]),
            run(&[&"--db", &db]),
            run(&[&"--parquet", &ds, &"--state", &pstate]),
        ]
    };
    for err in all_runs() {
        assert!(err.contains(" records (2 written), "), "{err}");
    }
    // Rewritten in place (writeFileSync: the same file) with a message
    // more: exactly it.
    fs::write(&path, serde_json::to_string_pretty(&legacy(3)).unwrap()).unwrap();
    for err in all_runs() {
        assert!(err.contains(" records (1 written), "), "{err}");
    }
    // A rewind truncates the file: nothing new, nothing emitted again.
    fs::write(&path, serde_json::to_string_pretty(&legacy(1)).unwrap()).unwrap();
    for err in all_runs() {
        assert!(err.contains(" records (0 written), "), "{err}");
    }
    let keys: Vec<String> = ndjson(&fs::read(&out).unwrap())
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys, ["u0", "g1", "u2"].map(|k| format!("{SID}:{k}")));
    fs::remove_dir_all(home).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/gemini-cli"]
fn the_real_legacy_sample() {
    let home = tmpdir("sample");
    let c = chats(&home);
    fs::copy(
        common::shared::samples()
            .join("gemini-cli/agent-history/tests/fixtures/real_sessions/gemini/session-01.json"),
        c.join("session-01.json"),
    )
    .unwrap();
    let o = bin(&home)
        .args(["backfill", "--agent", "gemini"])
        .output()
        .unwrap();
    let recs = ndjson(&o.stdout);
    let got: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["role"].as_str().unwrap(), r["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("user", "[REDACTED_PROMPT]"),
            (
                "assistant",
                "Generating Specific Response: [REDACTED_THOUGHT]\n[REDACTED_ASSISTANT_TEXT]"
            )
        ]
    );
    // ccusage's figures for it (spec §10): input 4383, output 8, total 4419.
    let v = stats(&home);
    let u = &v["usage"];
    assert_eq!(
        (&u["input"], &u["output"], &u["total_tokens"]),
        (&json!(4383), &json!(8), &json!(4419))
    );
    fs::remove_dir_all(home).unwrap();
}

/// ccusage 20.0.24 on a legacy file and its migrated `.jsonl`: the copied
/// answers counted twice there, once here (the test above).
#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn ccusage_counts_a_migrated_session_twice() {
    let home = tmpdir("ccusage");
    let c = chats(&home);
    let name = "session-2026-06-05T04-59-dcbe78d3";
    let old = legacy(4);
    fs::write(c.join(format!("{name}.json")), old.to_string()).unwrap();
    let mut lines = vec![json!({"sessionId": SID, "projectHash": "abc"}).to_string()];
    for m in old["messages"].as_array().unwrap() {
        lines.push(m.to_string());
    }
    fs::write(c.join(format!("{name}.jsonl")), lines.join("\n") + "\n").unwrap();
    let cc = std::env::var_os("CCUSAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/ccusage-reference/node_modules/.bin/ccusage"));
    assert!(cc.exists(), "ccusage not found at {}", cc.display());
    let none = home.join("none");
    fs::create_dir_all(&none).unwrap();
    let o = Command::new(cc)
        .args(["gemini", "daily", "--json", "--offline"])
        .env("HOME", &none)
        .env("GEMINI_DATA_DIR", home.join(".gemini/tmp"))
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["totals"]["totalTokens"], 4 * 115, "{v}");
    assert_eq!(stats(&home)["usage"]["total_tokens"], 2 * 115);
    fs::remove_dir_all(home).unwrap();
}

/// A legacy session grown, rewound (Gemini CLI truncates the file), its
/// answer's tokens edited, then read unchanged: after every run,
/// `--usage-out`'s rows, the dataset's and the store's sum to `stats`;
/// the store holds the session's rows as the file is now.
#[test]
fn a_rewound_sessions_usage_sums_to_stats_in_every_sink() {
    let home = tmpdir("rewound-usage");
    let c = chats(&home);
    let path = c.join("session-2026-06-05T04-59-dcbe78d3.json");
    let (state, out, usage) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("usage.ndjson"),
    );
    let (ds, pstate, db) = (home.join("ds"), home.join("pstate"), home.join("m.db"));
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "gemini"]);
        for a in extra {
            c.arg(a);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let check = |v: &Value, total: i64, corrections: usize, lines: &[i64]| {
        fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
        run(&[&"--state", &state, &"-o", &out, &"--usage-out", &usage]);
        run(&[&"--parquet", &ds, &"--state", &pstate]);
        run(&[&"--db", &db]);
        let s = usage_sums::of_stats(&stats(&home));
        assert_eq!(s[4], total);
        assert_eq!(usage_sums::of_ndjson(&usage), (s, corrections));
        assert_eq!(usage_sums::of_dataset(&ds), s);
        assert_eq!(usage_sums::of_store(&db), s);
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut q = c
            .prepare("SELECT line FROM usage WHERE file = ?1 ORDER BY line")
            .unwrap();
        let got: Vec<i64> = q
            .query_map([path.to_str().unwrap()], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(got, lines);
    };
    // Answers g1 and g3 (115 each), then g5 too.
    check(&legacy(4), 230, 0, &[2, 4]);
    check(&legacy(6), 345, 0, &[2, 4, 6]);
    // Rewound to g1: a correction takes g3's and g5's 230 out.
    check(&legacy(2), 115, 1, &[2]);
    // g1's tokens edited (a revision): a correction adds the 900 more.
    let mut v = legacy(2);
    v["messages"][1]["tokens"] = tokens(1_000, 10, 1_015);
    check(&v, 1_015, 2, &[2]);
    let before = fs::read(&usage).unwrap();
    check(&v, 1_015, 2, &[2]);
    assert_eq!(fs::read(&usage).unwrap(), before);
    fs::remove_dir_all(home).unwrap();
}
