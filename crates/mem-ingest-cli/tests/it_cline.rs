//! Cline: SDK sessions (`<id>.messages.json`, a subagent's
//! `<agentId>.messages.json`, the manifest's cwd) and legacy tasks
//! (`api_conversation_history.json`, the cwd from `taskHistory.json`, XML
//! tool calls), the files never read, discovery, rewrites with `--state`,
//! `--db` and `--parquet`, and the samples, with usage checked against
//! counts computed here from the files (ccusage 20.0.24 reads no Cline).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;
mod usage_sums;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("cline", name)
}

const SID: &str = "1784094124598_rruoq";

fn metrics(i: u64, o: u64, r: u64, w: u64) -> Value {
    json!({"inputTokens": i, "outputTokens": o, "cacheReadTokens": r, "cacheWriteTokens": w,
           "cost": 0.01})
}

/// An SDK transcript (positions in comments).
fn session() -> Value {
    json!({"version": 1, "updated_at": "2026-04-22T17:42:10.123Z", "agent": "lead",
           "sessionId": SID, "messages": [
        // 1
        {"id": "m1", "role": "user", "ts": 1_784_094_124_600_i64,
         "content": [{"type": "text", "text": "Inspect the README"},
                     {"type": "file", "path": "/p/README.md", "content": "# P"}]},
        // 2
        {"id": "m2", "role": "assistant", "ts": 1_784_094_125_000_i64,
         "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
         "metrics": metrics(21, 8, 3, 1),
         "content": [{"type": "thinking", "thinking": "Read it first"},
                     {"type": "tool_use", "id": "t1", "name": "read_files",
                      "input": {"path": "/p/README.md"}}]},
        // 3
        {"id": "m3", "role": "user",
         "content": [{"type": "tool_result", "tool_use_id": "t1",
                      "content": [{"type": "text", "text": "# P"}], "is_error": false}]},
        // 4: a compaction summary: its cumulative usageBefore is not counted
        {"id": "m4", "role": "user", "content": [{"type": "text", "text": "Summary so far"}],
         "metadata": {"kind": "compaction", "displayRole": "system",
                      "usageBefore": {"inputTokens": 999, "outputTokens": 999}}},
        // 5
        {"id": "m5", "role": "assistant", "ts": 1_784_094_126_000_i64,
         "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
         "metrics": metrics(40, 12, 20, 0),
         "content": [{"type": "text", "text": "A small project."},
                     {"type": "unknown_block", "x": 1}]}
    ]})
}

fn write(path: &Path, v: &Value) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_extension("tmp.1.x.json");
    fs::write(&tmp, v.to_string()).unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// A Cline data folder with a session, its subagent and a legacy task,
/// and every file that is not a transcript.
fn data_folder(data: &Path) {
    let s = data.join("sessions").join(SID);
    write(&s.join(format!("{SID}.messages.json")), &session());
    write(
        &s.join(format!("{SID}.json")),
        &json!({"version": 1, "session_id": SID, "cwd": "/home/me/app",
                "started_at": "2026-07-15T10:00:00.000Z"}),
    );
    write(
        &s.join("agent_7.messages.json"),
        &json!({"version": 1, "agent": "subagent", "sessionId": SID, "messages": [
            {"id": "s1", "role": "assistant", "ts": 1_784_094_127_000_i64,
             "modelInfo": {"id": "claude-haiku-4-5", "provider": "anthropic"},
             "metrics": metrics(5, 5, 0, 0),
             "content": [{"type": "text", "text": "Subagent done"}]}]}),
    );
    // Never read: the compaction copy, a temporary file, hook telemetry.
    fs::write(
        s.join(format!("{SID}.compaction.json")),
        session().to_string(),
    )
    .unwrap();
    fs::write(
        s.join(format!("{SID}.messages.json.tmp.1784094124598.ab12.json")),
        session().to_string(),
    )
    .unwrap();
    fs::write(s.join("hooks.jsonl"), "{}\n").unwrap();
    // A legacy task (older: only role and content; an XML tool call; a
    // v3.40 message with metrics).
    let t = data.join("tasks").join("1767225600000");
    write(
        &t.join("api_conversation_history.json"),
        &json!([
            {"role": "user", "content": [{"type": "text",
                "text": "<task>\nRead main.rs\n</task>\n<environment_details>cwd</environment_details>"}]},
            {"role": "assistant", "content": "I will read it.\n<read_file>\n<path>src/main.rs</path>\n</read_file>"},
            {"role": "user", "content": [{"type": "text", "text": "[read_file for 'src/main.rs'] Result:\nfn main() {}"}]},
            {"role": "assistant", "id": "resp_1", "ts": 1_767_225_660_000_i64,
             "modelInfo": {"modelId": "claude-sonnet-4-5", "providerId": "anthropic", "mode": "act"},
             "metrics": {"tokens": {"prompt": 1000, "completion": 50, "cached": 600}, "cost": 0.02},
             "content": [{"type": "text", "text": "Done."}]}
        ]),
    );
    write(
        &t.join("ui_messages.json"),
        &json!([{"ts": 1, "type": "say", "say": "api_req_started",
                 "text": "{\"tokensIn\":999,\"tokensOut\":999}"}]),
    );
    write(
        &data.join("state").join("taskHistory.json"),
        &json!([{"id": "1767225600000", "ts": 1_767_225_600_000_i64, "task": "Read main.rs",
                 "tokensIn": 999, "tokensOut": 999, "totalCost": 1,
                 "cwdOnTaskInitialization": "/home/me/legacy"}]),
    );
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
fn sessions_subagents_and_legacy_tasks_map_to_records() {
    let home = tmpdir("shapes");
    let data = home.join(".cline").join("data");
    data_folder(&data);
    let o = bin(&home)
        .args(["backfill", "--agent", "cline"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let recs = ndjson(&o.stdout);
    let rows: Vec<(String, String, String, String, Vec<String>)> = recs
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["role"].as_str().unwrap().to_owned(),
                r["project"].as_str().unwrap().to_owned(),
                r["text"].as_str().unwrap().to_owned(),
                r["kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|k| k.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect();
    let row = |k: &str, role: &str, p: &str, t: &str, kinds: &[&str]| {
        (
            k.to_owned(),
            role.to_owned(),
            p.to_owned(),
            t.to_owned(),
            kinds.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
        )
    };
    let s = |id: &str| format!("{SID}:{id}");
    // In path order: sessions/ before tasks/, the session's own file
    // before its subagent's.
    assert_eq!(
        rows,
        [
            row(
                &s("m1"),
                "user",
                "/home/me/app",
                "Inspect the README\n[file /p/README.md]\n# P",
                &["text", "file"]
            ),
            row(
                &s("m2"),
                "assistant",
                "/home/me/app",
                "Read it first\nread_files {\"path\":\"/p/README.md\"}",
                &["thinking", "toolCall"]
            ),
            row(
                &s("m3"),
                "tool_result",
                "/home/me/app",
                "# P",
                &["toolResult"]
            ),
            row(
                &s("m4"),
                "system",
                "/home/me/app",
                "Summary so far",
                &["compaction", "text"]
            ),
            row(
                &s("m5"),
                "assistant",
                "/home/me/app",
                "A small project.",
                &["text"]
            ),
            row(
                &s("s1"),
                "assistant",
                "/home/me/app",
                "Subagent done",
                &["text", "subagent"]
            ),
            row(
                "1767225600000:#1",
                "user",
                "/home/me/legacy",
                "<task>\nRead main.rs\n</task>\n<environment_details>cwd</environment_details>",
                &["text", "task", "harness"]
            ),
            row(
                "1767225600000:#2",
                "assistant",
                "/home/me/legacy",
                "I will read it.\n<read_file>\n<path>src/main.rs</path>\n</read_file>",
                &["text", "toolCall"]
            ),
            row(
                "1767225600000:#3",
                "user",
                "/home/me/legacy",
                "[read_file for 'src/main.rs'] Result:\nfn main() {}",
                &["text"]
            ),
            row(
                "1767225600000:resp_1",
                "assistant",
                "/home/me/legacy",
                "Done.",
                &["text"]
            ),
        ]
    );
    // The XML call's tool, the native call's, the subagent's id.
    assert_eq!(recs[7]["tool_name"], "read_file");
    assert_eq!(recs[1]["tool_name"], "read_files");
    assert_eq!(recs[2]["tool_call_id"], "t1");
    assert_eq!(recs[5]["agent_id"], "agent_7");
    assert_eq!(recs[9]["model"], "claude-sonnet-4-5");
    assert_eq!(recs[9]["timestamp"], 1_767_225_660_000_i64);
    // Usage: each assistant message's metrics once (input counting the
    // cache, as Cline writes it, split into the input not cached and the
    // cache columns); ui_messages.json, taskHistory.json totals and the
    // compaction's usageBefore are not counted.
    let o = bin(&home)
        .args(["stats", "--json", "-q", "--agent", "cline"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let u = &v["usage"];
    let (inputs, outputs, reads, writes) = (21 + 40 + 5 + 1000, 8 + 12 + 5 + 50, 3 + 20 + 600, 1);
    assert_eq!(u["input"], inputs - reads - writes, "{v}");
    assert_eq!(u["output"], outputs);
    assert_eq!(u["cache_read"], reads);
    assert_eq!(u["cache_write"], writes);
    assert_eq!(u["total_tokens"], inputs + outputs);
    assert_eq!(v["files"], 3, "three transcripts, nothing else: {v}");
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn discovery_by_cline_variables_and_vs_code_storage() {
    let home = tmpdir("discovery");
    let count = |env: &[(&str, PathBuf)]| {
        let mut c = bin(&home);
        c.args(["backfill", "--agent", "cline"]);
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
    let (code, _, err) = count(&[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no Cline archive: no folder at "), "{err}");
    assert!(
        err.contains(&format!("{}/.cline/data/tasks", home.display())),
        "{err}"
    );
    // VS Code's global storage (Linux), legacy tasks.
    let vscode = home.join(".config/Code/User/globalStorage/saoudrizwan.claude-dev");
    data_folder(&vscode);
    assert_eq!(count(&[("XDG_CONFIG_HOME", home.join(".config"))]).1, 10);
    fs::remove_dir_all(&vscode).unwrap();
    // Cursor's, on macOS.
    let cursor =
        home.join("Library/Application Support/Cursor/User/globalStorage/saoudrizwan.claude-dev");
    data_folder(&cursor);
    assert_eq!(count(&[]).1, 10);
    fs::remove_dir_all(home.join("Library")).unwrap();
    // CLINE_DIR (data under it), CLINE_DATA_DIR, CLINE_SESSION_DATA_DIR.
    let dir = home.join("cdir");
    data_folder(&dir.join("data"));
    assert_eq!(count(&[("CLINE_DIR", dir.clone())]).1, 10);
    assert_eq!(count(&[("CLINE_DATA_DIR", dir.join("data"))]).1, 10);
    let sessions = home.join("elsewhere");
    fs::rename(dir.join("data/sessions"), &sessions).unwrap();
    assert_eq!(count(&[("CLINE_DATA_DIR", dir.join("data"))]).1, 4);
    assert_eq!(
        count(&[
            ("CLINE_DATA_DIR", dir.join("data")),
            ("CLINE_SESSION_DATA_DIR", sessions.clone())
        ])
        .1,
        10
    );
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn a_rewrite_that_adds_one_message_emits_exactly_it() {
    let home = tmpdir("rewrite");
    let data = home.join(".cline").join("data");
    data_folder(&data);
    let (state, out, db) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("m.db"),
    );
    let (ds, pstate) = (home.join("ds"), home.join("pstate"));
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| -> String {
        let mut c = bin(&home);
        c.args(["backfill", "--agent", "cline"]);
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
        assert!(err.contains(" records (10 written), "), "{err}");
    }
    let mut s = session();
    s["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "m6", "role": "user", "content": [{"type": "text", "text": "Thanks"}]}));
    write(
        &data
            .join("sessions")
            .join(SID)
            .join(format!("{SID}.messages.json")),
        &s,
    );
    for err in all_runs() {
        assert!(err.contains(" records (1 written), "), "{err}");
        assert!(err.contains("2 unchanged"), "{err}");
    }
    let all = ndjson(&fs::read(&out).unwrap());
    assert_eq!(all.len(), 11);
    assert_eq!(all[10]["key"], format!("{SID}:m6"));
    fs::remove_dir_all(home).unwrap();
}

/// A legacy message has no id before v3.40: its key is its place. A
/// rewrite that puts another message in a place emitted before (a resumed
/// task replaces its trailing user message; a restore truncates and the
/// later messages take the places again) emits that message, as a new
/// record beside the one emitted before: it is not a revision of it.
#[test]
fn a_message_taking_the_place_of_one_emitted_is_emitted() {
    let home = tmpdir("replaced");
    let data = home.join(".cline").join("data");
    data_folder(&data);
    let (state, out, db) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("m.db"),
    );
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| -> String {
        let mut c = bin(&home);
        c.args(["backfill", "--agent", "cline"]);
        for a in extra {
            c.arg(a);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let both = || {
        [
            run(&[&"--state", &state, &"-o", &out]),
            run(&[&"--db", &db]),
        ]
    };
    for err in both() {
        assert!(err.contains(" records (10 written), "), "{err}");
    }
    let task = data
        .join("tasks")
        .join("1767225600000")
        .join("api_conversation_history.json");
    let mut h: Value = serde_json::from_slice(&fs::read(&task).unwrap()).unwrap();
    let msgs = h.as_array_mut().unwrap();
    msgs[2] = json!({"role": "user", "content": [{"type": "text",
        "text": "[TASK RESUMPTION] The task was interrupted; read it again"}]});
    msgs.push(json!({"role": "assistant", "content": "Reading it again."}));
    write(&task, &h);
    for err in both() {
        assert!(err.contains(" records (2 written), "), "{err}");
    }
    let texts: Vec<String> = ndjson(&fs::read(&out).unwrap())
        .iter()
        .map(|r| r["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(texts.len(), 12);
    assert_eq!(
        texts[10..],
        [
            "[TASK RESUMPTION] The task was interrupted; read it again".to_owned(),
            "Reading it again.".to_owned()
        ]
    );
    assert!(texts[..10].iter().any(|t| t.contains("fn main() {}")));
    let c = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = c
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 12);
    let kept: i64 = c
        .query_row(
            "SELECT count(*) FROM records WHERE text LIKE '%fn main() {}%' OR text LIKE '[TASK RESUMPTION]%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 2);
    fs::remove_dir_all(home).unwrap();
}

/// Each assistant message's metrics once, summed from a transcript here.
fn metrics_sum(v: &Value) -> (u64, u64, u64, u64) {
    let mut t = (0, 0, 0, 0);
    for m in v["messages"].as_array().unwrap() {
        if m["role"] == "assistant" {
            if let Some(x) = m.get("metrics") {
                let n = |k: &str| x[k].as_u64().unwrap_or(0);
                t.0 += n("inputTokens");
                t.1 += n("outputTokens");
                t.2 += n("cacheReadTokens");
                t.3 += n("cacheWriteTokens");
            }
        }
    }
    t
}

#[test]
#[ignore = "needs ../shared: samples/cline"]
fn samples_usage_by_the_specs_count() {
    let base = common::shared::samples().join("cline");
    let home = tmpdir("samples");
    for (file, records) in [
        ("cline/sdk/packages/core/fixtures/messages/success.messages.json", 4),
        ("cline/sdk/packages/core/fixtures/session/session.messages.json", 0),
        (
            "deja-vu/fixtures/registry/cline/modern/sessions/session_synthetic_01/session_synthetic_01.messages.json",
            2,
        ),
    ] {
        let p = base.join(file);
        let v: Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        let n = v["messages"].as_array().unwrap().len();
        if records > 0 {
            assert_eq!(n, records, "{file}");
        }
        let (i, o, r, w) = metrics_sum(&v);
        let out = bin(&home)
            .args(["stats", "--json", "-q", "--agent", "cline"])
            .arg(&p)
            .output()
            .unwrap();
        let s: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(s["records"], n, "{file}");
        let u = &s["usage"];
        assert_eq!(
            [&u["input"], &u["output"], &u["cache_read"], &u["cache_write"], &u["total_tokens"]],
            [i - r - w, o, r, w, i + o].map(|x| json!(x)).each_ref(),
            "{file}"
        );
    }
    // The legacy sample: the cwd from its taskHistory.json.
    let legacy = base.join(
        "deja-vu/fixtures/registry/cline/legacy/tasks/1767225600000/api_conversation_history.json",
    );
    let out = bin(&home)
        .args(["backfill", "--agent", "cline"])
        .arg(&legacy)
        .output()
        .unwrap();
    let recs = ndjson(&out.stdout);
    let got: Vec<(&str, &str, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap(),
                r["project"].as_str().unwrap(),
                r["text"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "1767225600000:#1",
                "/home/example/work/demo",
                "<task>\nSay hello\n</task>"
            ),
            ("1767225600000:#2", "/home/example/work/demo", "Hello!")
        ]
    );
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn hostile_documents_are_counted_outcomes() {
    let home = tmpdir("hostile");
    let sessions = home.join(".cline/data/sessions/s");
    let tasks = home.join(".cline/data/tasks");
    let good = session().to_string();
    let cases: [(PathBuf, Vec<u8>, &str); 5] = [
        (
            sessions.join("cut.messages.json"),
            good.as_bytes()[..good.len() / 2].to_vec(),
            "malformed JSON",
        ),
        (
            sessions.join("array.messages.json"),
            b"[1, 2]".to_vec(),
            "file not read: not a Cline session transcript: no `messages` list",
        ),
        (
            sessions.join("null.messages.json"),
            br#"{"sessionId": "n", "messages": null}"#.to_vec(),
            "file not read: not a Cline session transcript: no `messages` list",
        ),
        (
            tasks.join("1/api_conversation_history.json"),
            br#"{"role": "user"}"#.to_vec(),
            "file not read: not a Cline task history: not a JSON array",
        ),
        (
            tasks.join("2/api_conversation_history.json"),
            b"[null, {\"role\": \"user\", \"content\": \"a\xffb\"}]".to_vec(),
            "",
        ),
    ];
    for (p, bytes, _) in &cases {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }
    let o = bin(&home)
        .args(["backfill", "--agent", "cline"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let recs = ndjson(&o.stdout);
    let got: Vec<(&str, &str)> = recs
        .iter()
        .map(|r| (r["key"].as_str().unwrap(), r["text"].as_str().unwrap()))
        .collect();
    // The null message counted without a record; the invalid UTF-8
    // repaired.
    assert_eq!(got, [("2:#2", "a\u{fffd}b")]);
    for (p, _, why) in &cases {
        if !why.is_empty() {
            let want = format!("{}:1:0: skipped: {why}", p.display());
            assert!(err.contains(&want), "{want}\n{err}");
        }
    }
    assert!(err.contains(" 4 skipped, 1 repaired"), "{err}");
    fs::remove_dir_all(home).unwrap();
}

/// A fork (`metadata.fork.forkedFromSessionId` in its manifest) starts with
/// copies of its parent's messages under their ids: each message of the
/// lineage is emitted and counted once (the parent's and the fork's own),
/// as copies are for other agents' lineages, and a fork of a fork too;
/// `--no-dedupe` counts the copies.
#[test]
fn a_forks_copies_of_its_parents_messages_count_once() {
    let home = tmpdir("fork");
    let data = home.join("data");
    let parent = session();
    let fork_of = |id: &str, from: &str, extra: &[Value]| {
        let s = data.join("sessions").join(id);
        let mut v = parent.clone();
        v["sessionId"] = json!(id);
        let list = v["messages"].as_array_mut().unwrap();
        list.extend(extra.iter().cloned());
        write(&s.join(format!("{id}.messages.json")), &v);
        write(
            &s.join(format!("{id}.json")),
            &json!({"version": 1, "session_id": id, "cwd": "/home/me/app",
                    "metadata": {"title": "t (fork)", "fork": {"forkedFromSessionId": from,
                                 "forkedAt": "2026-07-15T10:05:00.000Z", "source": "cli"}}}),
        );
    };
    let s = data.join("sessions").join(SID);
    write(&s.join(format!("{SID}.messages.json")), &parent);
    write(
        &s.join(format!("{SID}.json")),
        &json!({"version": 1, "session_id": SID, "cwd": "/home/me/app"}),
    );
    let own = |id: &str, i: u64| {
        json!({"id": id, "role": "assistant", "ts": 1_784_094_200_000_i64,
               "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
               "metrics": metrics(i, 1, 0, 0), "content": [{"type": "text", "text": id}]})
    };
    fork_of("1784094300000_fork1", SID, &[own("f1", 100)]);
    // A fork of the fork: its parent's copies, and the fork's own.
    let mut second = vec![own("f1", 100)];
    second.push(own("f2", 1000));
    fork_of("1784094400000_fork2", "1784094300000_fork1", &second);
    let stats = |extra: &[&str]| -> Value {
        let o = bin(&home)
            .args(["stats", "--json", "-q", "--agent", "cline"])
            .args(extra)
            .env("CLINE_DATA_DIR", &data)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    // The parent's 5 messages (two with metrics: 21 + 8, 40 + 12) and the
    // forks' own two (100 + 1, 1000 + 1).
    let v = stats(&[]);
    assert_eq!(v["records"], 7, "{v}");
    assert_eq!(v["usage"]["total_tokens"], 29 + 52 + 101 + 1001, "{v}");
    assert_eq!(v["deduplicated"], 5 + 6, "{v}");
    let all = stats(&["--no-dedupe"]);
    assert_eq!(all["records"], 5 + 6 + 7, "{all}");
    assert_eq!(
        all["usage"]["total_tokens"],
        3 * (29 + 52) + 2 * 101 + 1001,
        "{all}"
    );
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "cline"])
        .env("CLINE_DATA_DIR", &data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let recs = ndjson(&o.stdout);
    let mut ids: Vec<&str> = recs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["f1", "f2", "m1", "m2", "m3", "m4", "m5"]);
    fs::remove_dir_all(home).unwrap();
}

/// A rewind (Cline's "restore": the transcript rewritten without its last
/// messages), then a new message in the place of one dropped: the store's
/// usage rows of the transcript are what the transcript holds now, as
/// `stats` counts it (each message's metrics once), neither the dropped
/// message's row kept beside them nor a row taken over by the message now
/// at its place.
#[test]
fn a_rewound_documents_usage_rows_are_what_it_holds_now() {
    let home = tmpdir("rewound-usage");
    let data = home.join(".cline").join("data");
    data_folder(&data);
    let db = home.join("m.db");
    let transcript = data
        .join("sessions")
        .join(SID)
        .join(format!("{SID}.messages.json"));
    let backfill = || {
        let o = bin(&home)
            .args(["backfill", "-q", "--agent", "cline", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    // (line, input, output, total) of the transcript's rows.
    let rows = || -> Vec<(i64, i64, i64, i64)> {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut q = c
            .prepare(
                "SELECT line, input, output, total_tokens FROM usage WHERE file = ?1 ORDER BY line",
            )
            .unwrap();
        q.query_map([transcript.to_str().unwrap()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    backfill();
    // m2 (21 in of which 3 read and 1 written, 8 out) and m5 (40 in of
    // which 20 read, 12 out): input the tokens not read or written.
    assert_eq!(rows(), [(2, 17, 8, 29), (5, 20, 12, 52)]);
    // Rewound to m3, then a new answer m6 at position 4.
    let mut s = session();
    let msgs = s["messages"].as_array_mut().unwrap();
    msgs.truncate(3);
    msgs.push(
        json!({"id": "m6", "role": "assistant", "ts": 1_784_094_129_000_i64,
        "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
        "metrics": metrics(7, 3, 0, 0),
        "content": [{"type": "text", "text": "Again, shorter."}]}),
    );
    write(&transcript, &s);
    backfill();
    assert_eq!(rows(), [(2, 17, 8, 29), (4, 7, 3, 10)]);
    // `stats` of the transcript counts the same.
    let o = bin(&home)
        .args(["stats", "--json", "-q"])
        .arg(&transcript)
        .output()
        .unwrap();
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["usage"]["total_tokens"], 39);
    fs::remove_dir_all(home).unwrap();
}

/// A series of rewrites of one transcript (a rewind and a new answer, an
/// edit of an answer's metrics, an unchanged re-run, a rewind of every
/// answer), each run with a state writing `--usage-out`, one with
/// `--parquet` and one with `--db`: after every run each sink's usage
/// rows sum to `stats`. The store holds the transcript's rows as it is
/// now; NDJSON and the dataset, which never rewrite a row, add the new
/// messages' rows and a correction row per model for the rest.
#[test]
fn every_sinks_usage_sums_to_stats_across_rewinds_and_edits() {
    let home = tmpdir("rewind-sinks");
    let data = home.join(".cline").join("data");
    data_folder(&data);
    let transcript = data
        .join("sessions")
        .join(SID)
        .join(format!("{SID}.messages.json"));
    let (state, out, usage) = (
        home.join("state"),
        home.join("out.ndjson"),
        home.join("usage.ndjson"),
    );
    let (ds, pstate, db) = (home.join("ds"), home.join("pstate"), home.join("m.db"));
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "cline"]);
        for a in extra {
            c.arg(a);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let stats = || -> [i64; 5] {
        let o = bin(&home)
            .args(["stats", "--json", "-q", "--agent", "cline"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        usage_sums::of_stats(&serde_json::from_slice(&o.stdout).unwrap())
    };
    let rows_of_transcript = || -> Vec<(i64, i64)> {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut q = c
            .prepare("SELECT line, total_tokens FROM usage WHERE file = ?1 ORDER BY line")
            .unwrap();
        q.query_map([transcript.to_str().unwrap()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    // After each run: (stats' total, corrections in --usage-out so far,
    // the store's rows of the transcript).
    let check = |total: i64, corrections: usize, rows: &[(i64, i64)]| {
        run(&[&"--state", &state, &"-o", &out, &"--usage-out", &usage]);
        run(&[&"--parquet", &ds, &"--state", &pstate]);
        run(&[&"--db", &db]);
        let s = stats();
        assert_eq!(s[4], total);
        let (n, c) = usage_sums::of_ndjson(&usage);
        assert_eq!((n, c), (s, corrections));
        assert_eq!(usage_sums::of_dataset(&ds), s);
        assert_eq!(usage_sums::of_store(&db), s);
        assert_eq!(rows_of_transcript(), rows);
    };
    // m2 29, m5 52; the subagent 10, the legacy task 1,050.
    check(1_141, 0, &[(2, 29), (5, 52)]);
    // Rewound to m3, then a new answer m6 at position 4: m6's row, and a
    // correction taking m5's 52 out.
    let mut s = session();
    let msgs = s["messages"].as_array_mut().unwrap();
    msgs.truncate(3);
    msgs.push(
        json!({"id": "m6", "role": "assistant", "ts": 1_784_094_129_000_i64,
        "modelInfo": {"id": "claude-sonnet-4-6", "provider": "anthropic"},
        "metrics": metrics(7, 3, 0, 0),
        "content": [{"type": "text", "text": "Again, shorter."}]}),
    );
    write(&transcript, &s);
    check(1_099, 1, &[(2, 29), (4, 10)]);
    // m2 edited (a revision): its metrics grow by 11 tokens.
    s["messages"][1]["metrics"] = metrics(30, 10, 3, 1);
    write(&transcript, &s);
    check(1_110, 2, &[(2, 40), (4, 10)]);
    // Unchanged: nothing written anywhere.
    let before = fs::read(&usage).unwrap();
    check(1_110, 2, &[(2, 40), (4, 10)]);
    assert_eq!(fs::read(&usage).unwrap(), before);
    // Rewound to the first message: no answer left, no row of it.
    s["messages"].as_array_mut().unwrap().truncate(1);
    write(&transcript, &s);
    check(1_060, 3, &[]);
    fs::remove_dir_all(home).unwrap();
}
