//! Amp threads: every shape of the spec as small threads written here
//! (exact records, texts, keys, times and usage), the ledger, discovery,
//! rewrites with `--state`, `--db` and `--parquet` (one that keeps the
//! size and time caught by the hash), hostile documents, and the sample.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use mem_ingest::format::{Format, Input};
use mem_ingest::formats::Amp;
use mem_ingest::{OwnedRecord, Role, SourceOptions};
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;
mod usage_sums;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("amp", name)
}

const TID: &str = "T-019b9d03-62e3-772f-9780-3e637f90eaec";

/// A thread with every message shape (positions in comments).
fn thread() -> Value {
    json!({
        "v": 12,
        "id": TID,
        "created": 1_767_865_803_494_i64,
        "title": "Fix the parser",
        "env": {"initial": {
            "trees": [{"displayName": "my app", "uri": "file:///home/me/my%20app"}],
            "tags": ["model:claude-opus-4-5"]}},
        "messages": [
            // 1: a prompt
            {"role": "user", "messageId": 0, "meta": {"sentAt": 1_767_865_810_000_i64},
             "content": [{"type": "text", "text": "Fix the parser"}]},
            // 2: thinking, text, a call, usage with a time
            {"role": "assistant", "messageId": 1,
             "content": [{"type": "thinking", "thinking": "Read it first"},
                         {"type": "text", "text": "Reading it."},
                         {"type": "tool_use", "id": "toolu_1", "name": "Read",
                          "input": {"path": "src/p.rs"}}],
             "state": {"type": "complete", "stopReason": "tool_use"},
             "usage": {"model": "claude-haiku-4-5-20251001", "inputTokens": 10,
                       "outputTokens": 178, "cacheCreationInputTokens": 986,
                       "cacheReadInputTokens": 11372, "totalInputTokens": 12368,
                       "credits": 3, "timestamp": "2026-01-08T10:00:20.000Z"}},
            // 3: its result
            {"role": "user", "messageId": 2,
             "content": [{"type": "tool_result", "toolUseID": "toolu_1",
                          "run": {"status": "done",
                                  "result": {"output": "fn main() {}", "exitCode": 0}}}]},
            // 4: usage without a time (ccusage drops it) and without a model
            {"role": "assistant", "messageId": 3,
             "content": [{"type": "text", "text": "Done."}],
             "state": {"type": "complete", "stopReason": "end_turn"},
             "usage": {"inputTokens": 5, "outputTokens": 42,
                       "cacheCreationInputTokens": 0, "cacheReadInputTokens": 12000}},
            // 5: a failed call's result, a string error
            {"role": "user", "messageId": 4,
             "content": [{"type": "tool_result", "toolUseID": "toolu_2",
                          "run": {"status": "error", "error": "permission denied"}}]},
            // 6: a compaction summary
            {"role": "info", "messageId": 5, "content": [],
             "summary": {"type": "message", "summary": "Earlier: the parser was fixed"}},
            // 7: no messageId, cancelled
            {"role": "assistant", "content": [{"type": "text", "text": "Stopping"}],
             "state": {"type": "cancelled"}},
            // 8: an unknown role
            {"role": "narrator", "messageId": 7, "content": []},
            // 9: still being written
            {"role": "assistant", "messageId": 8,
             "content": [{"type": "text", "text": "Partial"}], "state": {"type": "running"}}
        ]
    })
}

fn write_thread(dir: &Path, v: &Value) -> PathBuf {
    let threads = dir.join("threads");
    fs::create_dir_all(&threads).unwrap();
    let p = threads.join(format!("{}.json", v["id"].as_str().unwrap()));
    let tmp = p.with_extension("tmp");
    fs::write(&tmp, v.to_string()).unwrap();
    fs::rename(&tmp, &p).unwrap();
    p
}

fn records(path: &Path) -> (Vec<OwnedRecord>, mem_ingest::Report) {
    let opts = SourceOptions::new();
    let bytes = fs::read(path).unwrap();
    let mut src = Amp.open(Input::Bytes(&bytes), path, &opts).unwrap();
    let mut out = Vec::new();
    while let Some(r) = src.next_record().unwrap() {
        out.push(r.to_owned_record());
    }
    // Streamed, the same.
    let mut again = Amp
        .open(
            Input::Reader(Box::new(fs::File::open(path).unwrap())),
            path,
            &opts,
        )
        .unwrap();
    let mut n = 0;
    while let Some(r) = again.next_record().unwrap() {
        assert_eq!(r.to_owned_record(), out[n]);
        n += 1;
    }
    assert_eq!(n, out.len());
    (out, src.report().clone())
}

/// `(key after the thread id, role, entry, kinds, text, timestamp)`.
type Row<'a> = (&'a str, Role, &'a str, Vec<&'a str>, &'a str, Option<i64>);

#[test]
fn every_message_shape_maps_to_its_record() {
    let d = tmpdir("shapes");
    let p = write_thread(&d, &thread());
    let (recs, report) = records(&p);
    let rows: Vec<Row> = recs
        .iter()
        .map(|r| {
            (
                r.key.strip_prefix(&format!("{TID}:")).unwrap(),
                r.role,
                r.entry.as_str(),
                r.kinds.iter().map(String::as_str).collect(),
                r.text.as_str(),
                r.timestamp,
            )
        })
        .collect();
    use Role::*;
    assert_eq!(
        rows,
        [
            (
                "0",
                User,
                "user",
                vec!["text"],
                "Fix the parser",
                Some(1_767_865_810_000)
            ),
            (
                "1",
                Assistant,
                "assistant",
                vec!["thinking", "text", "toolCall"],
                "Read it first\nReading it.\nRead {\"path\":\"src/p.rs\"}",
                Some(1_767_866_420_000)
            ),
            (
                "2",
                ToolResult,
                "user",
                vec!["toolResult"],
                "fn main() {}",
                Some(1_767_866_420_000)
            ),
            (
                "3",
                Assistant,
                "assistant",
                vec!["text"],
                "Done.",
                Some(1_767_866_420_000)
            ),
            (
                "4",
                ToolResult,
                "user",
                vec!["toolResult"],
                "permission denied",
                Some(1_767_866_420_000)
            ),
            (
                "5",
                System,
                "info",
                vec!["summary"],
                "Earlier: the parser was fixed",
                Some(1_767_866_420_000)
            ),
            (
                "#7",
                Assistant,
                "assistant",
                vec!["text", "cancelled"],
                "Stopping",
                Some(1_767_866_420_000)
            ),
        ]
    );
    let r = &recs[1];
    assert_eq!(
        (r.session.as_str(), r.project.as_str()),
        (TID, "/home/me/my app")
    );
    assert_eq!(r.source, format!("amp:{TID}"));
    assert_eq!(r.model.as_deref(), Some("claude-haiku-4-5-20251001"));
    assert_eq!(r.stop_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        (r.tool_name.as_deref(), r.tool_call_id.as_deref()),
        (Some("Read"), Some("toolu_1"))
    );
    let u = r.usage.unwrap();
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_write,
            u.cache_read,
            u.total_tokens
        ),
        (10, 178, 986, 11372, 12546)
    );
    assert_eq!(recs[2].tool_call_id.as_deref(), Some("toolu_1"));
    assert_eq!(recs[2].is_error, Some(false));
    assert_eq!(recs[4].is_error, Some(true));
    // No model of its own: the thread's tag.
    assert_eq!(recs[3].model.as_deref(), Some("claude-opus-4-5"));
    assert_eq!(recs[3].id.as_deref(), Some("3"));
    // Every message counted (the running one too, as ccusage would count
    // its usage); the narrator's role unknown.
    assert_eq!(
        (
            report.lines,
            report.records,
            report.no_record,
            report.skipped
        ),
        (9, 8, 1, 0)
    );
    assert_eq!(report.unknown_roles, [("narrator".to_owned(), 1)]);
    // Usage: both assistant usages (the second without a time).
    assert_eq!(
        (
            report.usage.input,
            report.usage.output,
            report.usage.cache_read
        ),
        (15, 220, 23372)
    );
    assert_eq!(report.usage.total_tokens, 24593);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_ledger_alone_counts_with_its_messages_cache() {
    let d = tmpdir("ledger");
    let mut t = thread();
    t["usageLedger"] = json!({"events": [
        {"id": "e1", "timestamp": "2026-01-08T10:00:20.000Z", "model": "claude-haiku-4-5-20251001",
         "credits": 2, "tokens": {"input": 100, "output": 50}, "operationType": "inference",
         "fromMessageId": 0, "toMessageId": 1}
    ]});
    let p = write_thread(&d, &t);
    let (recs, report) = records(&p);
    assert_eq!(recs.len(), 7);
    // The ledger's tokens, the cache of message 1; messages' usage unread.
    let u = report.usage;
    assert_eq!(
        (
            u.input,
            u.output,
            u.cache_write,
            u.cache_read,
            u.total_tokens
        ),
        (100, 50, 986, 11372, 12508)
    );
    assert_eq!(report.lines, 10);
    assert_eq!(report.entries.get("usageLedger event"), 1);
    fs::remove_dir_all(d).unwrap();
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

#[test]
fn discovery_by_amp_data_dir_xdg_data_home_and_the_default() {
    let home = tmpdir("discovery");
    let run = |env: &[(&str, PathBuf)]| {
        let mut c = bin(&home);
        c.args(["backfill", "--agent", "amp"]);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            ndjson(&o.stdout).len(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("error: no Amp archive: no folder at "),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}/.local/share/amp/threads", home.display())),
        "{err}"
    );
    write_thread(&home.join(".local/share/amp"), &thread());
    let (code, n, _) = run(&[]);
    assert_eq!((code, n), (Some(0), 7));
    // Not a session file: another name under threads/, or outside it.
    fs::write(home.join(".local/share/amp/threads/other.json"), "{}").unwrap();
    fs::write(home.join(".local/share/amp/history.jsonl"), "{}\n").unwrap();
    assert_eq!(run(&[]).1, 7);
    let data = home.join("data");
    let mut t = thread();
    t["id"] = json!("T-second");
    write_thread(&data, &t);
    // AMP_DATA_DIR (the folder holding threads/) replaces the default.
    assert_eq!(run(&[("AMP_DATA_DIR", data.clone())]).1, 7);
    // XDG_DATA_HOME is read beside the default.
    let xdg = home.join("xdg");
    write_thread(&xdg.join("amp"), &t);
    assert_eq!(run(&[("XDG_DATA_HOME", xdg.clone())]).1, 14);
    // Named as a PATH: detected from its first bytes, wherever it is.
    let loose = home.join("thread.json");
    fs::write(&loose, thread().to_string()).unwrap();
    let o = bin(&home).args(["backfill"]).arg(&loose).output().unwrap();
    assert_eq!(ndjson(&o.stdout).len(), 7);
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn rewrites_emit_exactly_the_new_messages_with_state_db_and_parquet() {
    let home = tmpdir("rewrites");
    let data = home.join("data");
    let mut t = thread();
    let path = write_thread(&data, &t);
    let (state, out, db) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("m.db"),
    );
    let (ds, pstate) = (home.join("ds"), home.join("pstate"));
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| -> String {
        let mut c = bin(&home);
        c.args(["backfill", "--agent", "amp"])
            .env("AMP_DATA_DIR", &data);
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
        assert!(err.contains(" records (7 written), "), "{err}");
    }
    // The running message completes, a message is added: exactly those.
    let msgs = t["messages"].as_array_mut().unwrap();
    msgs[8]["state"] = json!({"type": "complete", "stopReason": "end_turn"});
    msgs[8]["content"][0]["text"] = json!("Partial, then whole");
    msgs.push(
        json!({"role": "user", "messageId": 9, "meta": {"sentAt": 1_767_866_500_000_i64},
                     "content": [{"type": "text", "text": "Thanks"}]}),
    );
    write_thread(&data, &t);
    for err in all_runs() {
        assert!(err.contains(" records (2 written), "), "{err}");
        assert!(err.contains("1 re-read"), "{err}");
    }
    let all = ndjson(&fs::read(&out).unwrap());
    let keys: Vec<&str> = all.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 9);
    assert_eq!(keys[7..], [format!("{TID}:8"), format!("{TID}:9")]);
    assert_eq!(all[7]["text"], "Partial, then whole");
    // Rewritten in place, size and time kept: a message's text changed
    // (an edit of the same length). Caught by the hash: a revision.
    let before = fs::read_to_string(&path).unwrap();
    let mtime = fs::metadata(&path).unwrap().modified().unwrap();
    let after = before.replace("\"Thanks\"", "\"Thonks\"");
    assert_eq!(before.len(), after.len());
    fs::write(&path, &after).unwrap();
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    for err in all_runs() {
        assert!(err.contains(" records (0 written, 1 updated), "), "{err}");
    }
    assert_eq!(ndjson(&fs::read(&out).unwrap()).len(), 9);
    let text: String = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT text FROM records WHERE key = ?1",
            [format!("{TID}:9")],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(text, "Thonks");
    // Unchanged now: hashed, not read.
    for err in all_runs() {
        assert!(err.contains("1 unchanged"), "{err}");
        assert!(err.contains(" records (0 written), "), "{err}");
    }
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn hostile_documents_are_counted_outcomes() {
    let home = tmpdir("hostile");
    let data = home.join("data");
    let threads = data.join("threads");
    fs::create_dir_all(&threads).unwrap();
    let good = thread().to_string();
    let cases: [(&str, Vec<u8>, &str); 5] = [
        (
            "T-truncated.json",
            good.as_bytes()[..good.len() / 2].to_vec(),
            "malformed JSON",
        ),
        (
            "T-array.json",
            b"[{\"role\":\"user\"}]".to_vec(),
            "file not read: not an Amp thread: not a JSON object",
        ),
        (
            "T-null.json",
            br#"{"id":"T-null","messages":null}"#.to_vec(),
            "file not read: not an Amp thread: no `messages` list",
        ),
        (
            "T-utf8.json",
            {
                let mut b = br#"{"id":"T-utf8","messages":[{"role":"user","messageId":0,"content":[{"type":"text","text":"a"#.to_vec();
                b.extend_from_slice(b"\xff\xfe");
                b.extend_from_slice(br#"b"}]}]}"#);
                b
            },
            "",
        ),
        (
            "T-nullmsg.json",
            br#"{"id":"T-nullmsg","messages":[null,{"role":"user","messageId":1,"content":null}]}"#
                .to_vec(),
            "",
        ),
    ];
    for (name, bytes, _) in &cases {
        fs::write(threads.join(name), bytes).unwrap();
    }
    let o = bin(&home)
        .args(["backfill", "--agent", "amp"])
        .env("AMP_DATA_DIR", &data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let recs = ndjson(&o.stdout);
    // The repaired line's text, and the null message's empty one.
    let texts: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["key"].as_str().unwrap(), r["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [("T-nullmsg:1", ""), ("T-utf8:0", "a\u{fffd}\u{fffd}b")]
    );
    assert!(err.contains(" 1 repaired"), "{err}");
    for (name, _, why) in &cases {
        if why.is_empty() {
            continue;
        }
        let want = format!("{}:1:0: skipped: {why}", threads.join(name).display());
        assert!(err.contains(&want), "{want}\n{err}");
    }
    assert!(err.contains("3 skipped"), "{err}");
    fs::remove_dir_all(home).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/amp"]
fn deja_vu_sample() {
    let p = common::shared::samples().join("amp/deja-vu/fixtures/registry/amp/thread.json");
    let (recs, report) = records(&p);
    let got: Vec<(&str, Role, &str, &str)> = recs
        .iter()
        .map(|r| (r.key.as_str(), r.role, r.text.as_str(), r.project.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "registry-amp:#1",
                Role::User,
                "synthetic Amp question",
                "/workspace/amp-demo"
            ),
            (
                "registry-amp:#2",
                Role::Assistant,
                "synthetic Amp answer",
                "/workspace/amp-demo"
            ),
        ]
    );
    assert_eq!(recs[0].timestamp, Some(1_767_337_445_000));
    assert_eq!((report.records, report.usage.total_tokens), (2, 0));
}

/// A thread rewound (the answer with usage naming no model dropped, the
/// messages after it too) then answered again, then read unchanged: after
/// every run, `--usage-out`'s rows, the dataset's and the store's sum to
/// `stats`; the store holds the thread's rows as it is now.
#[test]
fn a_rewound_threads_usage_sums_to_stats_in_every_sink() {
    let home = tmpdir("rewound-usage");
    let data = home.join("data");
    let mut t = thread();
    let path = write_thread(&data, &t);
    let (state, out, usage) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("usage.ndjson"),
    );
    let (ds, pstate, db) = (home.join("ds"), home.join("pstate"), home.join("m.db"));
    let cmd = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = bin(&home);
        c.env("AMP_DATA_DIR", &data);
        for a in args {
            c.arg(a);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let b = ["backfill", "-q", "--agent", "amp"];
    let check = |total: i64, corrections: usize, lines: &[i64]| {
        cmd(&[
            &b[0],
            &b[1],
            &b[2],
            &b[3],
            &"--state",
            &state,
            &"-o",
            &out,
            &"--usage-out",
            &usage,
        ]);
        cmd(&[
            &b[0],
            &b[1],
            &b[2],
            &b[3],
            &"--parquet",
            &ds,
            &"--state",
            &pstate,
        ]);
        cmd(&[&b[0], &b[1], &b[2], &b[3], &"--db", &db]);
        let stats: Value =
            serde_json::from_slice(&cmd(&[&"stats", &"--json", &"-q", &"--agent", &"amp"]))
                .unwrap();
        let s = usage_sums::of_stats(&stats);
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
    // Message 2: 10 + 178 + 986 + 11,372; message 4 (no model): 5 + 42 +
    // 12,000.
    check(12_546 + 12_047, 0, &[2, 4]);
    // Rewound to message 3, then an answer at position 4 (another model).
    let msgs = t["messages"].as_array_mut().unwrap();
    msgs.truncate(3);
    msgs.push(json!({"role": "assistant", "messageId": 10,
        "content": [{"type": "text", "text": "Again."}],
        "state": {"type": "complete", "stopReason": "end_turn"},
        "usage": {"model": "claude-sonnet-4-5-20250929", "inputTokens": 7,
                  "outputTokens": 3, "cacheCreationInputTokens": 0,
                  "cacheReadInputTokens": 0, "timestamp": "2026-01-08T10:05:00.000Z"}}));
    write_thread(&data, &t);
    // The new answer's row, and a correction taking message 4's out.
    check(12_546 + 10, 1, &[2, 4]);
    let before = fs::read(&usage).unwrap();
    check(12_546 + 10, 1, &[2, 4]);
    assert_eq!(fs::read(&usage).unwrap(), before);
    fs::remove_dir_all(home).unwrap();
}
