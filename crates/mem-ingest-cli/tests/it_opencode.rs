//! `--agent opencode` on the command line: OpenCode's database found in
//! its data folder with no PATH, its records and usage, a re-run that adds
//! nothing, and a database locked by a writer longer than the retry (exit
//! 1, named, read by the next run). The format's own cases are
//! `crates/mem-ingest-db/tests/it_opencode.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::Connection;
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("opencode", name)
}

fn bin(home: &Path) -> Command {
    let mut c = common::cli();
    c.env("HOME", home).env_remove("XDG_DATA_HOME");
    c
}

/// OpenCode's database in `home`'s data folder (`journal`: `WAL` or
/// `DELETE`): one session in `/proj`, a user message and its answer.
fn database(home: &Path, journal: &str) -> (PathBuf, Connection) {
    let dir = home.join(".local/share/opencode");
    fs::create_dir_all(&dir).unwrap();
    let db = dir.join("opencode.db");
    let c = Connection::open(&db).unwrap();
    c.query_row(&format!("PRAGMA journal_mode = {journal}"), [], |_| Ok(()))
        .unwrap();
    c.execute_batch(
        "CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT NOT NULL);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
           time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
           session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         INSERT INTO session VALUES ('ses_1', '/proj');",
    )
    .unwrap();
    let msg = |id: &str, data: Value| {
        c.execute(
            "INSERT INTO message VALUES (?1, 'ses_1', 1, 1, ?2)",
            [id, &data.to_string()],
        )
        .unwrap();
    };
    let part = |id: &str, m: &str, data: Value| {
        c.execute(
            "INSERT INTO part VALUES (?1, ?2, 'ses_1', 1, 1, ?3)",
            [id, m, &data.to_string()],
        )
        .unwrap();
    };
    msg(
        "msg_1",
        json!({"role": "user", "time": {"created": 1_780_000_000_000_i64}}),
    );
    part("prt_1", "msg_1", json!({"type": "text", "text": "hello"}));
    msg(
        "msg_2",
        json!({"role": "assistant", "time": {"created": 1_780_000_001_000_i64,
            "completed": 1_780_000_002_000_i64}, "modelID": "m1", "providerID": "p1"}),
    );
    part("prt_2", "msg_2", json!({"type": "text", "text": "hi"}));
    part(
        "prt_3",
        "msg_2",
        json!({"type": "step-finish", "cost": 0.01, "tokens": {"input": 7, "output": 3,
            "reasoning": 0, "cache": {"read": 0, "write": 0}}}),
    );
    (db, c)
}

fn ndjson(b: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(b)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn agent_opencode_reads_the_database_in_its_data_folder_once() {
    let home = tmpdir("data-folder");
    let (_db, _c) = database(&home, "WAL");
    let state = home.join("state");
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "opencode", "--state"])
        .arg(&state)
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
    assert_eq!(
        got,
        [
            ("ses_1:msg_1", "user", "hello", "/proj"),
            ("ses_1:msg_2", "assistant", "hi", "/proj")
        ]
    );
    // Again with the state: nothing new.
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "opencode", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(ndjson(&o.stdout).len(), 0);
    // stats: the records and the usage of the step-finish part.
    let o = bin(&home)
        .args(["stats", "--json", "-q", "--agent", "opencode"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"], 2, "{v}");
    assert_eq!(v["usage"]["input"], 7, "{v}");
    assert_eq!(v["usage"]["output"], 3, "{v}");
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn a_database_locked_longer_than_the_retry_exits_1_naming_it_and_the_next_run_reads_it() {
    let home = tmpdir("locked");
    let (db, c) = database(&home, "DELETE");
    let state = home.join("state");
    c.execute_batch("BEGIN EXCLUSIVE; UPDATE session SET directory = '/proj';")
        .unwrap();
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "opencode", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(err.contains("locked by a writer"), "{err}");
    assert_eq!(ndjson(&o.stdout).len(), 0);
    c.execute_batch("COMMIT").unwrap();
    let o = bin(&home)
        .args(["backfill", "-q", "--agent", "opencode", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(ndjson(&o.stdout).len(), 2);
    fs::remove_dir_all(home).unwrap();
}

/// `OPENCODE_DB` names the database OpenCode writes instead of
/// `opencode.db`: with no PATH, one outside the data folder is read beside
/// the folder's databases (a message in both once), a relative name is in
/// the data folder (found there under any name), `:memory:` and a file
/// that is not there add nothing.
#[test]
fn opencode_db_names_a_database_read_with_no_path() {
    let home = tmpdir("opencode-db");
    let (db, c) = database(&home, "WAL");
    drop(c);
    // Elsewhere under another name: a copy with a message of its own.
    let other = home.join("elsewhere/custom.sqlite");
    fs::create_dir_all(other.parent().unwrap()).unwrap();
    fs::copy(&db, &other).unwrap();
    let c = Connection::open(&other).unwrap();
    user_row(&c, "msg_9", "only here");
    drop(c);
    let run = |env: Option<&dyn AsRef<std::ffi::OsStr>>| -> Vec<String> {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "opencode"]);
        if let Some(v) = env {
            c.env("OPENCODE_DB", v);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        ndjson(&o.stdout)
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["key"].as_str().unwrap(),
                    r["file"].as_str().unwrap()
                )
            })
            .collect()
    };
    let (db_s, other_s) = (db.display().to_string(), other.display().to_string());
    let folder = vec![format!("ses_1:msg_1 {db_s}"), format!("ses_1:msg_2 {db_s}")];
    assert_eq!(run(None), folder);
    let mut both = folder.clone();
    both.push(format!("ses_1:msg_9 {other_s}"));
    assert_eq!(run(Some(&other)), both);
    assert_eq!(run(Some(&":memory:")), folder);
    assert_eq!(run(Some(&home.join("elsewhere/none.db"))), folder);
    // A name relative to the data folder, found in it under that name.
    let inside = db.parent().unwrap().join("custom.sqlite");
    fs::rename(&other, &inside).unwrap();
    let got = run(Some(&"custom.sqlite"));
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(
        got.contains(&format!("ses_1:msg_9 {}", inside.display())),
        "{got:?}"
    );
    // Without the variable, a database of another name in the folder is
    // not opened.
    assert_eq!(run(None), folder);
    // The variable's database alone (the folder's moved away).
    fs::rename(&db, home.join("elsewhere/old.db")).unwrap();
    let got = run(Some(&"custom.sqlite"));
    assert_eq!(
        got,
        [
            format!("ses_1:msg_1 {}", inside.display()),
            format!("ses_1:msg_2 {}", inside.display()),
            format!("ses_1:msg_9 {}", inside.display())
        ]
    );
    fs::remove_dir_all(home).unwrap();
}

fn user_row(c: &Connection, id: &str, text: &str) {
    c.execute(
        "INSERT INTO message VALUES (?1, 'ses_1', 1, 1, ?2)",
        [
            id,
            &json!({"role": "user", "time": {"created": 1_780_000_000_000_i64}}).to_string(),
        ],
    )
    .unwrap();
    c.execute(
        "INSERT INTO part VALUES (?1, ?2, 'ses_1', 1, 1, ?3)",
        [
            &format!("prt_{id}"),
            id,
            &json!({"type": "text", "text": text}).to_string(),
        ],
    )
    .unwrap();
}

fn keys_once(out: &Path) -> std::collections::BTreeSet<String> {
    let mut keys = std::collections::BTreeSet::new();
    for r in ndjson(&fs::read(out).unwrap_or_default()) {
        let k = r["key"].as_str().unwrap().to_owned();
        assert!(keys.insert(k.clone()), "{k} written twice");
    }
    keys
}

/// `backfill --follow` beside a writer process that inserts messages and
/// fills in an assistant message it inserted empty: every final message
/// exactly once, and the writer (no busy wait at all) never fails. The
/// writer makes each change in a copy of the database too, which nothing
/// reads: once both are checkpointed, the read database's bytes are the
/// copy's (the reader wrote nothing of its own into it).
#[test]
fn follow_beside_a_writer_gives_every_final_message_once_and_never_fails_it() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let home = tmpdir("follow");
    let (db, c) = database(&home, "WAL");
    drop(c);
    // The copy, outside the folders the reader walks.
    let copy = home.join("copy.db");
    fs::copy(&db, &copy).unwrap();
    let (db2, copy2) = (db.clone(), copy.clone());
    let (state, out) = (home.join("state"), home.join("out.ndjson"));
    let mut child = bin(&home)
        .args([
            "backfill", "-q", "--follow", "--agent", "opencode", "--state",
        ])
        .arg(&state)
        .arg("-o")
        .arg(&out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let n = 300;
    let writer = std::thread::spawn(move || {
        let both = [
            Connection::open(&db2).unwrap(),
            Connection::open(&copy2).unwrap(),
        ];
        for c in &both {
            c.busy_timeout(Duration::ZERO).unwrap();
        }
        // One transaction, made the same in the database and its copy.
        let each = |change: &dyn Fn(&Connection)| {
            for c in &both {
                c.execute_batch("BEGIN IMMEDIATE").unwrap();
                change(c);
                c.execute_batch("COMMIT").unwrap();
            }
        };
        each(&|c| {
            c.execute(
                "INSERT INTO message VALUES ('msg_late', 'ses_1', 1, 1, ?1)",
                [json!({"role": "assistant", "time": {"created": 1}}).to_string()],
            )
            .unwrap();
        });
        for i in 0..n {
            each(&|c| user_row(c, &format!("msg_w{i:04}"), &format!("written {i}")));
            std::thread::sleep(Duration::from_millis(5));
        }
        each(&|c| {
            c.execute(
                "UPDATE message SET data = ?1 WHERE id = 'msg_late'",
                [
                    json!({"role": "assistant", "time": {"created": 1, "completed": 2}})
                        .to_string(),
                ],
            )
            .unwrap();
            c.execute(
                "INSERT INTO part VALUES ('prt_late', 'msg_late', 'ses_1', 1, 1, ?1)",
                [json!({"type": "text", "text": "filled in"}).to_string()],
            )
            .unwrap();
        });
    });
    let want = n + 3;
    let t = Instant::now();
    while fs::read(&out).map(|b| ndjson(&b).len()).unwrap_or(0) < want {
        assert!(t.elapsed() < Duration::from_secs(30), "not all after 30 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    writer.join().expect("the writer never failed on a lock");
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let keys = keys_once(&out);
    assert_eq!(keys.len(), want);
    assert!(keys.contains("ses_1:msg_late"));
    // Both checkpointed by a connection of the test's own (the reader is
    // gone, and being read-only it could not have): the same bytes.
    for f in [&db, &copy] {
        let c = Connection::open(f).unwrap();
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            assert_eq!(r.get::<_, i64>(0)?, 0, "{} busy", f.display());
            Ok(())
        })
        .unwrap();
    }
    let (read, copied) = (fs::read(&db).unwrap(), fs::read(&copy).unwrap());
    assert_eq!(read.len(), copied.len());
    assert!(read == copied, "the database read differs from its copy");
    fs::remove_dir_all(home).unwrap();
}

/// A backfill killed (-9) at any moment, then run again, writes every
/// message exactly once.
#[test]
fn killed_at_any_moment_then_run_again_every_message_exactly_once() {
    let home = tmpdir("kill");
    let (_db, c) = database(&home, "WAL");
    c.execute_batch("BEGIN").unwrap();
    for i in 0..6000 {
        user_row(
            &c,
            &format!("msg_k{i:05}"),
            &format!("message {i} {}", "words ".repeat(30)),
        );
    }
    c.execute_batch("COMMIT").unwrap();
    let (state, out) = (home.join("state"), home.join("out.ndjson"));
    let child = || {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "opencode", "--state"])
            .arg(&state)
            .arg("-o")
            .arg(&out);
        c
    };
    let t = std::time::Instant::now();
    assert!(child().status().unwrap().success());
    let pace = t.elapsed().as_millis() as u64;
    assert_eq!(keys_once(&out).len(), 6002);
    fs::remove_file(&out).unwrap();
    fs::remove_file(&state).unwrap();
    let kills = common::kill_until_it_finishes(child, pace, "opencode");
    assert!(kills >= 3);
    assert_eq!(keys_once(&out).len(), 6002);
    fs::remove_dir_all(home).unwrap();
}

/// `--db`: the store keeps the database's cursor with its rows; a message
/// filled in later is added by the next run, nothing twice.
#[test]
fn the_store_keeps_the_cursor_and_adds_a_message_once_it_is_final() {
    let home = tmpdir("store");
    let (_db, c) = database(&home, "WAL");
    c.execute(
        "INSERT INTO message VALUES ('msg_3', 'ses_1', 1, 1, ?1)",
        [json!({"role": "assistant", "time": {"created": 1}}).to_string()],
    )
    .unwrap();
    let store = home.join("memory.db");
    let run = || {
        let o = bin(&home)
            .args(["backfill", "-q", "--agent", "opencode", "--db"])
            .arg(&store)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let keys = || -> Vec<String> {
        let s = Connection::open(&store).unwrap();
        let mut st = s.prepare("SELECT key FROM records ORDER BY key").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    run();
    assert_eq!(keys(), ["ses_1:msg_1", "ses_1:msg_2"]);
    run();
    assert_eq!(keys().len(), 2);
    c.execute(
        "UPDATE message SET data = ?1 WHERE id = 'msg_3'",
        [json!({"role": "assistant", "time": {"created": 1, "completed": 2}}).to_string()],
    )
    .unwrap();
    run();
    assert_eq!(keys(), ["ses_1:msg_1", "ses_1:msg_2", "ses_1:msg_3"]);
    fs::remove_dir_all(home).unwrap();
}

/// The usage report's totals equal `stats`' for each database agent's
/// fixture (`../shared/samples/{opencode,goose,cursor}/make_fixture.py`):
/// every usage counted is a dated row of the report.
#[test]
#[ignore = "needs ../shared: samples/{opencode,goose,cursor}/make_fixture.py"]
fn usage_totals_equal_stats_for_each_database_agent() {
    let d = tmpdir("usage-stats");
    let samples = common::shared::samples();
    let make = |agent: &str, out: &Path, extra: &[&str]| {
        let o = Command::new("python3")
            .arg(samples.join(agent).join("make_fixture.py"))
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
    };
    make("opencode", &d.join("oc"), &["--no-legacy-json"]);
    make("goose", &d.join("goose"), &[]);
    make("cursor", &d.join("home"), &[]);
    for (agent, path, input) in [
        ("opencode", d.join("oc"), 70_052),
        ("goose", d.join("goose/sessions/sessions.db"), 64_800),
        (
            "cursor",
            d.join("home/.config/Cursor/User/globalStorage"),
            18_590,
        ),
    ] {
        let stats = bin(&d)
            .args(["stats", "--json", "-q", "--agent", agent])
            .arg(&path)
            .output()
            .unwrap();
        assert!(stats.status.success(), "{agent}: {stats:?}");
        let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
        let usage = bin(&d)
            .args(["usage", "daily", "--json", "-q", "--agent", agent])
            .arg(&path)
            .output()
            .unwrap();
        assert!(usage.status.success(), "{agent}: {usage:?}");
        let u: Value = serde_json::from_slice(&usage.stdout).unwrap();
        assert_eq!(s["usage"]["input"], input, "{agent}: {s}");
        assert_eq!(u["totals"]["inputTokens"], s["usage"]["input"], "{agent}");
        assert_eq!(u["totals"]["outputTokens"], s["usage"]["output"], "{agent}");
        assert_eq!(
            u["totals"]["cacheReadTokens"], s["usage"]["cache_read"],
            "{agent}"
        );
        assert_eq!(
            u["totals"]["cacheCreationTokens"], s["usage"]["cache_write"],
            "{agent}"
        );
    }
    fs::remove_dir_all(d).unwrap();
}

/// Cursor's global store found with no PATH beside Cline's tasks, which
/// Cline keeps inside Cursor's `globalStorage`: each read once, by its own
/// agent.
#[test]
fn cursors_store_and_clines_tasks_in_its_folder_are_each_read_once() {
    let home = tmpdir("cursor-cline");
    let global = home.join(".config/Cursor/User/globalStorage");
    let task = global.join("saoudrizwan.claude-dev/tasks/1767225600000");
    fs::create_dir_all(&task).unwrap();
    fs::write(
        task.join("api_conversation_history.json"),
        json!([{"role": "user", "content": [{"type": "text", "text": "from cline"}]}]).to_string(),
    )
    .unwrap();
    let c = Connection::open(global.join("state.vscdb")).unwrap();
    c.execute_batch(
        "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
    )
    .unwrap();
    for (k, v) in [
        ("bubbleId:c1:b1", json!({"type": 1, "text": "from cursor"})),
        (
            "composerData:c1",
            json!({"composerId": "c1", "status": "completed"}),
        ),
    ] {
        c.execute(
            "INSERT INTO cursorDiskKV VALUES (?1, ?2)",
            [k, &v.to_string()],
        )
        .unwrap();
    }
    let o = bin(&home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .args(["backfill", "-q", "--agent", "cline", "--agent", "cursor"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut got: Vec<(String, String)> = ndjson(&o.stdout)
        .iter()
        .map(|r| {
            (
                r["source"]
                    .as_str()
                    .unwrap()
                    .split(':')
                    .next()
                    .unwrap()
                    .to_owned(),
                r["text"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("cline".to_owned(), "from cline".to_owned()),
            ("cursor".to_owned(), "from cursor".to_owned())
        ]
    );
    fs::remove_dir_all(home).unwrap();
}

/// A 1.x answer (`message`) and a 2.x one written in `session_message`
/// alone, at the same rowid and of the same model, are two usage rows in
/// every sink; and a 2.x fork copy dropped at the rowid of another 1.x
/// answer takes only its own row out, not that answer's. (A 2.x row was
/// at seq 0 of its rowid, the place of a 1.x answer's first call: the
/// store kept one row of the first two, and the copy took the 1.x
/// answer's row out of every sink.)
#[test]
fn usage_rows_of_2x_messages_never_meet_the_1x_rows_at_their_rowid() {
    let d = tmpdir("v2-rows");
    let dir = d.join(".local/share/opencode");
    fs::create_dir_all(&dir).unwrap();
    let db = dir.join("opencode.db");
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT,
           directory TEXT NOT NULL, title TEXT NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL);
         CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
           time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL,
           session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         CREATE TABLE session_message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
           type TEXT NOT NULL, seq INTEGER NOT NULL, time_created INTEGER NOT NULL,
           time_updated INTEGER NOT NULL, data TEXT NOT NULL);
         INSERT INTO session VALUES ('ses_1', 'p', NULL, '/proj', 't', 1, 1);
         INSERT INTO session VALUES ('ses_2', 'p', 'ses_1', '/proj', 'fork', 2, 2);",
    )
    .unwrap();
    let tokens = |i: u64, o: u64| json!({"input": i, "output": o, "reasoning": 0, "cache": {"read": 0, "write": 0}});
    // 1.x: a question (rowid 1), answers of model m1 (rowid 2) and m2
    // (rowid 3), each of one call.
    let v1 = |id: &str, t: i64, data: Value, parts: &[Value]| {
        c.execute(
            "INSERT INTO message VALUES (?1, 'ses_1', ?2, ?2, ?3)",
            rusqlite::params![id, t, data.to_string()],
        )
        .unwrap();
        for (n, p) in parts.iter().enumerate() {
            c.execute(
                "INSERT INTO part VALUES (?1, ?2, 'ses_1', ?3, ?3, ?4)",
                rusqlite::params![format!("{id}_p{n}"), id, t, p.to_string()],
            )
            .unwrap();
        }
    };
    v1(
        "msg_1",
        1000,
        json!({"role": "user", "time": {"created": 1000}}),
        &[json!({"type": "text", "text": "hello"})],
    );
    for (id, t, model, i) in [("msg_2", 2000, "m1", 100), ("msg_3", 2500, "m2", 50)] {
        v1(
            id,
            t,
            json!({"role": "assistant", "time": {"created": t, "completed": t + 10},
                   "modelID": model, "providerID": "p1", "tokens": tokens(i, 1), "cost": 0}),
            &[
                json!({"type": "text", "text": format!("answer {id}")}),
                json!({"type": "step-finish", "cost": 0, "tokens": tokens(i, 1)}),
            ],
        );
    }
    // 2.x alone: a question (rowid 1), an answer of model m1 (rowid 2,
    // the rowid of the 1.x answer of m1), and its copy in a fork (rowid
    // 3, the rowid of the 1.x answer of m2), dropped.
    let v2 = |id: &str, session: &str, seq: i64, kind: &str, data: &Value| {
        c.execute(
            "INSERT INTO session_message VALUES (?1, ?2, ?3, ?4, ?4, ?4, ?5)",
            rusqlite::params![id, session, kind, seq, data.to_string()],
        )
        .unwrap();
    };
    v2(
        "msg_8",
        "ses_1",
        3,
        "user",
        &json!({"text": "and now?", "files": [], "agents": [], "references": [],
                "time": {"created": 3000}}),
    );
    let answer = json!({"agent": "build", "model": {"id": "m1", "providerID": "p1"},
        "content": [{"type": "text", "id": "t9", "text": "now this"}], "cost": 0,
        "tokens": tokens(7, 1), "time": {"created": 3100, "completed": 3110}});
    v2("msg_9", "ses_1", 4, "assistant", &answer);
    v2("msg_10", "ses_2", 1, "assistant", &answer);
    drop(c);

    let ok = |c: &mut Command| {
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let s: Value = serde_json::from_slice(&ok(
        bin(&d).args(["stats", "--json", "-q", "--agent", "opencode"])
    ))
    .unwrap();
    assert_eq!(
        (&s["usage"]["input"], &s["usage"]["output"]),
        (&json!(157), &json!(3))
    );
    // --usage-out: the three answers' rows.
    let (o, u) = (d.join("out.ndjson"), d.join("usage.ndjson"));
    ok(bin(&d)
        .args(["backfill", "-q", "--agent", "opencode", "-o"])
        .arg(&o)
        .arg("--usage-out")
        .arg(&u));
    let mut rows: Vec<(u64, String, u64)> = ndjson(&fs::read(&u).unwrap())
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap(),
                r["model"].as_str().unwrap().to_owned(),
                r["input"].as_u64().unwrap(),
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            (2, "m1".to_owned(), 7),
            (2, "m1".to_owned(), 100),
            (3, "m2".to_owned(), 50)
        ]
    );
    // The store: the same three rows, and `usage --db` the stats' sum.
    let store = d.join("store.db");
    ok(bin(&d)
        .args(["backfill", "-q", "--agent", "opencode", "--db"])
        .arg(&store));
    let conn = Connection::open(&store).unwrap();
    let (n, input): (i64, i64) = conn
        .query_row("SELECT count(*), sum(input) FROM usage", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((n, input), (3, 157));
    let daily: Value = serde_json::from_slice(&ok(bin(&d)
        .env("TZ", "UTC")
        .args(["usage", "daily", "--json", "-q", "--db"])
        .arg(&store)))
    .unwrap();
    assert_eq!(daily["totals"]["inputTokens"], 157);
    fs::remove_dir_all(d).unwrap();
}
