//! `mem-ingest mcp`: the store served over the Model Context Protocol on
//! stdio. A client speaking JSON-RPC line by line, as MCP's stdio
//! transport does, and the Python SDK's own client (ignored where it is
//! not installed; `.ci/run` installs it), get exact results from each
//! tool, and errors an agent can act on; the store is never written.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

/// A server and a client's end of its stdio.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Client {
    fn start(db: &Path) -> Client {
        let mut child = Command::new(common::bin())
            .args(["mcp", "--db"])
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = Client {
            child,
            stdin,
            stdout,
            next: 0,
        };
        let init = c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "it_mcp", "version": "1"}}),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "mem-ingest", "{init}");
        assert!(
            init["result"]["capabilities"]["tools"].is_object(),
            "{init}"
        );
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.stdin, "{v}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The response to a request, whole.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the server closed"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// A tool's result, its text parsed as the JSON it is.
    fn call(&mut self, tool: &str, args: Value) -> Result<Value, (i64, String)> {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        if let Some(e) = r.get("error") {
            return Err((
                e["code"].as_i64().unwrap(),
                e["message"].as_str().unwrap().to_owned(),
            ));
        }
        assert_eq!(r["result"]["isError"], json!(false), "{r}");
        let text = r["result"]["content"][0]["text"].as_str().unwrap();
        Ok(serde_json::from_str(text).unwrap())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn place(line: u32) -> String {
    format!(
        "{}:{line}",
        common::fixtures().join("hand-built.jsonl").display()
    )
}

#[test]
fn every_tool_answers_exactly_over_stdio() {
    let d = common::three_sessions_store("tools");
    let db = d.join("m.db");
    let before = fs::read(&db).unwrap();
    let mut c = Client::start(&db);

    let list = c.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search", "session", "sessions"]);
    for t in tools {
        assert!(t["description"].as_str().unwrap().len() > 100, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
    }
    let required = |i: usize| tools[i]["inputSchema"]["required"].clone();
    assert_eq!(required(0), json!(["query"]));
    assert_eq!(required(1), json!(["id"]));
    assert_eq!(required(2), json!(null));
    let props = |i: usize| {
        let mut p: Vec<String> = tools[i]["inputSchema"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        p.sort();
        p
    };
    assert_eq!(
        props(0),
        ["agent", "fts", "limit", "project", "query", "role", "since", "until"]
    );
    assert_eq!(props(1), ["around", "id", "limit", "max_chars"]);
    assert_eq!(props(2), ["agent", "limit", "project", "since", "until"]);

    assert_eq!(
        c.call("search", json!({"query": "bug", "limit": 2})),
        Ok(json!({"hits": [
            {"key": "hand-built-0001:c0de0017", "agent": "pi", "project": "/tmp/my-project",
             "session": "hand-built-0001", "time": "2026-01-15T10:00:23Z", "role": "system",
             "place": place(24),
             "snippet": "## Goal\nFix the «bug».\n\n## Progress\n- listed files"},
            {"key": "hand-built-0001:c0de0004", "agent": "pi", "project": "/tmp/my-project",
             "session": "hand-built-0001", "time": "2026-01-15T10:00:04Z", "role": "user",
             "place": place(5),
             "snippet": "Fix the \"«bug»\" in C:\\Users\\me\tnow\nLine 2: café 🚀 中文测试 日本語"},
        ]}))
    );
    assert_eq!(
        c.call(
            "search",
            json!({"query": "bug", "role": "user", "since": "2026-01-15T10:00:04Z",
                                "until": "100000d"})
        ),
        Ok(json!({"hits": []}))
    );

    let sessions = c.call(
        "sessions",
        json!({"project": "MY-PROJECT", "since": "2026-06-01"}),
    );
    let prompt = "Hello pi! Please look at ./src in /tmp/my-project — \"quotes\", \
                  back\\slash, emoji 🎉, newline\nsecond line";
    assert_eq!(
        sessions,
        Ok(json!({"sessions": [
            {"id": "01a229a8-a761-76d0-bf2d-9410f7fd8a06", "agent": "pi",
             "project": "/tmp/my-project", "started": "2026-05-01T10:00:05Z",
             "ended": "2026-11-29T23:34:08Z", "records": 315, "first_prompt": prompt},
            {"id": "01a229a8-a694-717d-ada9-2fc296ed4e4b", "agent": "pi",
             "project": "/tmp/my-project", "started": "2026-05-01T10:00:01Z",
             "ended": "2026-11-29T23:34:08Z", "records": 626, "first_prompt": prompt},
        ]}))
    );

    // A window of three around a key, its texts cut at 40 characters in all.
    let window = c.call(
        "session",
        json!({"id": "hand", "around": "hand-built-0001:c0de0006", "limit": 3,
               "max_chars": 40}),
    );
    assert_eq!(
        window,
        Ok(json!({
            "session": {"id": "hand-built-0001", "agent": "pi", "project": "/tmp/my-project",
                        "started": "2026-01-15T10:00:03Z", "records": 22},
            "messages": [
                {"key": "hand-built-0001:c0de0005", "role": "assistant",
                 "time": "2026-01-15T10:00:05Z", "tool_name": null,
                 "text": "Let me look at the files first.\nI'll lis… [77 more characters]"},
                {"key": "hand-built-0001:c0de0006", "role": "tool_result",
                 "time": "2026-01-15T10:00:06Z", "tool_name": "bash",
                 "text": "… [45 more characters]"},
                {"key": "hand-built-0001:c0de0007", "role": "user",
                 "time": "2026-01-15T10:00:07Z", "tool_name": null,
                 "text": "… [49 more characters]"},
            ],
            "omitted": {"before": 2, "after": 17, "texts_cut": 3},
        }))
    );
    // By default: from the start, 50 messages, 20,000 characters.
    let whole = c.call("session", json!({"id": "hand-built-0001"})).unwrap();
    assert_eq!(whole["messages"].as_array().unwrap().len(), 22);
    assert_eq!(
        whole["omitted"],
        json!({"before": 0, "after": 0, "texts_cut": 0})
    );
    let big = c.call("session", json!({"id": "01a229a8-a694"})).unwrap();
    assert_eq!(big["messages"].as_array().unwrap().len(), 50);
    assert_eq!(big["omitted"]["after"], json!(626 - 50));

    // Errors: invalid params, with what to change.
    for (tool, args, message) in [
        (
            "session",
            json!({"id": "01a229a8"}),
            "\"01a229a8\" starts the ids of several sessions \
             (01a229a8-a761-76d0-bf2d-9410f7fd8a06, 01a229a8-a694-717d-ada9-2fc296ed4e4b): \
             give more of it",
        ),
        (
            "session",
            json!({"id": "nope"}),
            "no session's id starts with \"nope\" (`mem-ingest sessions` lists them)",
        ),
        (
            "session",
            json!({"id": "hand", "around": "k"}),
            "session hand-built-0001 has no record \"k\"",
        ),
        (
            "search",
            json!({"query": "bug", "agent": "windsurf"}),
            "unknown agent \"windsurf\": pi, gemini, qwen, copilot, amp, cline, claude, codex, \
             opencode, goose, cursor",
        ),
        (
            "sessions",
            json!({"since": "soon"}),
            "\"soon\" is not a time: RFC 3339 (2026-12-01T09:00:00Z), a date (2026-12-01), \
             7d, 24h, 2w, today, yesterday or \"last week\"",
        ),
        (
            "search",
            json!({"query": "!!"}),
            "the query \"!!\" has no words to search for",
        ),
    ] {
        let got = c.call(tool, args.clone());
        let (code, said) = got.expect_err(&format!("{tool} {args}"));
        assert_eq!(code, -32602, "{tool} {args}");
        assert!(said.contains(message), "{tool} {args}: {said}");
    }
    drop(c);
    assert!(fs::read(&db).unwrap() == before, "the store was written");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn no_store_no_server() {
    let d = std::env::temp_dir().join(format!("mem-ingest-mcp-{}-none", std::process::id()));
    let out = Command::new(common::bin())
        .args(["mcp", "--db"])
        .arg(d.join("gone.db"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let p = d.join("gone.db");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: {}: no such store (`mem-ingest backfill --db {}` creates one)\n",
            p.display(),
            p.display()
        )
    );
    assert!(out.stdout.is_empty());
}

/// The Python interpreter with the MCP SDK (`mcp` 2.3.0): `.ci/run` makes
/// one at /tmp/mcp-venv and names it in `MEM_INGEST_MCP_PYTHON`.
fn python() -> String {
    std::env::var("MEM_INGEST_MCP_PYTHON").unwrap_or_else(|_| "/tmp/mcp-venv/bin/python".into())
}

#[test]
#[ignore = "needs the Python MCP SDK (mcp 2.3.0, MEM_INGEST_MCP_PYTHON): .ci/run installs it"]
fn the_python_sdk_client_lists_and_calls_every_tool() {
    let d = common::three_sessions_store("python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(common::bin())
        .arg(d.join("m.db"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    assert_eq!(lines[0], json!({"server": "mem-ingest"}));
    assert_eq!(
        lines[1],
        json!({"tools": ["search", "session", "sessions"],
               "required": {"search": ["query"], "session": ["id"], "sessions": []}})
    );
    let result = |i: usize| {
        assert_eq!(lines[i]["error"], json!(false), "{}", lines[i]);
        lines[i]["result"].clone()
    };
    let keys = |v: Value, list: &str, field: &str| -> Vec<String> {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x[field].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        keys(result(2), "hits", "key"),
        ["hand-built-0001:c0de0017", "hand-built-0001:c0de0004"]
    );
    assert_eq!(
        keys(result(3), "sessions", "id"),
        [
            "01a229a8-a761-76d0-bf2d-9410f7fd8a06",
            "01a229a8-a694-717d-ada9-2fc296ed4e4b"
        ]
    );
    assert_eq!(
        keys(result(4), "messages", "key"),
        [
            "hand-built-0001:c0de0005",
            "hand-built-0001:c0de0006",
            "hand-built-0001:c0de0007"
        ]
    );
    assert_eq!(lines[5]["code"], json!(-32602));
    assert_eq!(
        lines[6],
        json!({"tool": "search", "code": -32602,
               "message": "unknown agent \"windsurf\": pi, gemini, qwen, copilot, amp, cline, claude, \
                           codex, opencode, goose, cursor"})
    );
    fs::remove_dir_all(d).unwrap();
}

/// The server beside a `backfill --follow` writing the same store: the
/// writer is never held up (each line it is given is in the store, and
/// found through the server, within seconds, while the server stays up
/// between calls), and it stops when asked as ever.
#[test]
fn the_server_and_a_following_writer_share_the_store() {
    use std::time::{Duration, Instant};
    let d = std::env::temp_dir().join(format!("mem-ingest-mcp-{}-follow", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    let proj = d.join("archive/--tmp-p--");
    fs::create_dir_all(&proj).unwrap();
    let s = proj.join("2026-01-01T00-00-00-000Z_s.jsonl");
    fs::copy(common::fixtures().join("hand-built.jsonl"), &s).unwrap();
    let db = d.join("live.db");
    /// The writer, killed if the test fails before it is stopped.
    struct Writer(Child);
    impl Drop for Writer {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut writer = Writer(
        Command::new(common::bin())
            .args(["backfill", "-q", "--follow", "--db"])
            .arg(&db)
            .arg(d.join("archive"))
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    while !db.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut c = Client::start(&db);
    let found = |c: &mut Client, word: &str| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            // Until the writer has made the store's schema, a search is
            // an error that says the file is not a store yet.
            let Ok(hits) = c.call("search", json!({"query": word})) else {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            let keys: Vec<String> = hits["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["key"].as_str().unwrap().to_owned())
                .collect();
            if !keys.is_empty() {
                return keys;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{word} not found through the server within 10 s");
    };
    assert_eq!(found(&mut c, "screenshot"), ["hand-built-0001:c0de0007"]);
    for (i, word) in ["zebrafish", "quokka"].into_iter().enumerate() {
        common::append(
            &s,
            &common::user_line(&format!("live-{i}"), &format!("a {word} here")),
        );
        assert_eq!(found(&mut c, word), [format!("hand-built-0001:live-{i}")]);
    }
    let sessions = c.call("sessions", json!({})).unwrap();
    assert_eq!(sessions["sessions"][0]["records"], json!(24));
    Command::new("kill")
        .arg("-TERM")
        .arg(writer.0.id().to_string())
        .status()
        .unwrap();
    assert_eq!(writer.0.wait().unwrap().code(), Some(0));
    drop(c);
    fs::remove_dir_all(d).unwrap();
}
