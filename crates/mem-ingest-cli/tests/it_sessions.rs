//! `sessions`, the default store of the reading commands, and `search`'s
//! project (a substring) and session (a prefix) filters and relative
//! times: exact output over the fixtures' three sessions.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// `mem-ingest ARGS` in `dir`, TZ as given, no store named by the
/// environment, HOME set to `dir`.
fn run(dir: &Path, tz: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(common::bin());
    c.args(args)
        .current_dir(dir)
        .env("TZ", tz)
        .env("HOME", dir)
        .env_remove("MEM_INGEST_DB")
        .env_remove("XDG_DATA_HOME");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

const ALL: &str = "\
2026-05-01 10:00  pi      /tmp/my-project  315 records  01a229a8-a761-76d0-bf2d-9410f7fd8a06
    Hello pi! Please look at ./src in /tmp/my-project — \"quotes\", back\\slash…
2026-05-01 10:00  pi      /tmp/my-project  626 records  01a229a8-a694-717d-ada9-2fc296ed4e4b
    Hello pi! Please look at ./src in /tmp/my-project — \"quotes\", back\\slash…
2026-01-15 10:00  pi      /tmp/my-project  22 records  hand-built-0001
    Fix the \"bug\" in C:\\Users\\me\\tnow…
";

#[test]
fn sessions_newest_first_with_their_first_prompt() {
    let d = common::three_sessions_store("list");
    assert_eq!(
        stdout(&run(&d, "UTC", &[], &["sessions", "--db", "m.db"])),
        ALL
    );
    // The local zone: 10:00Z is 15:30 in Kolkata; --utc prints UTC anyway.
    let kolkata = stdout(&run(&d, "Asia/Kolkata", &[], &["sessions", "--db", "m.db"]));
    assert_eq!(kolkata, ALL.replace("10:00  pi", "15:30  pi"));
    let utc = stdout(&run(
        &d,
        "Asia/Kolkata",
        &[],
        &["sessions", "--db", "m.db", "--utc"],
    ));
    assert_eq!(utc, ALL);
    assert_eq!(
        stdout(&run(
            &d,
            "UTC",
            &[],
            &["sessions", "--db", "m.db", "--limit", "1"]
        )),
        ALL.lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn sessions_as_json_keep_the_prompt_whole() {
    let d = common::three_sessions_store("json");
    let args = ["sessions", "--db", "m.db", "--json", "--session", "hand"];
    assert_eq!(
        stdout(&run(&d, "Asia/Kolkata", &[], &args)),
        "{\"id\":\"hand-built-0001\",\"agent\":\"pi\",\"project\":\"/tmp/my-project\",\
         \"started\":\"2026-01-15T15:30:03+05:30\",\"ended\":\"2026-01-15T15:30:32+05:30\",\
         \"records\":22,\"first_prompt\":\"Fix the \\\"bug\\\" in C:\\\\Users\\\\me\\tnow\\n\
         Line 2: café 🚀 中文测试 日本語\"}\n"
    );
    let utc = stdout(&run(
        &d,
        "Asia/Kolkata",
        &[],
        &[&args[..], &["--utc"]].concat(),
    ));
    assert!(
        utc.contains("\"started\":\"2026-01-15T10:00:03Z\",\"ended\":\"2026-01-15T10:00:32Z\""),
        "{utc}"
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn filters_take_part_of_a_project_the_start_of_an_id_and_times() {
    let d = common::three_sessions_store("filters");
    let count = |args: &[&str]| {
        let o = run(
            &d,
            "UTC",
            &[],
            &[&["sessions", "--db", "m.db"], args].concat(),
        );
        stdout(&o)
            .lines()
            .filter(|l| !l.starts_with("    "))
            .count()
    };
    assert_eq!(count(&["--project", "MY-PROJ"]), 3);
    // `%` and `_` are themselves, not LIKE's wildcards.
    assert_eq!(count(&["--project", "my%project"]), 0);
    assert_eq!(count(&["--project", "my_project"]), 0);
    assert_eq!(count(&["--session", "01A229A8-a7"]), 1);
    assert_eq!(count(&["--session", "01a229a8"]), 2);
    assert_eq!(count(&["--session", "built"]), 0);
    assert_eq!(count(&["--agent", "pi"]), 3);
    assert_eq!(count(&["--agent", "codex"]), 0);
    // The pi sessions end on 2026-11-29; the hand-built one on 2026-01-15.
    assert_eq!(count(&["--since", "2026-06-01"]), 2);
    assert_eq!(count(&["--until", "2026-02-01"]), 1);
    // Relative: everything is after a time 100,000 days ago, and nothing
    // started before it.
    assert_eq!(count(&["--since", "100000d"]), 3);
    assert_eq!(count(&["--until", "100000d"]), 0);
    let none = run(
        &d,
        "UTC",
        &[],
        &["sessions", "--db", "m.db", "--agent", "codex"],
    );
    assert_eq!(
        String::from_utf8_lossy(&none.stderr),
        "no session matches\n"
    );
    let bad = run(
        &d,
        "UTC",
        &[],
        &["sessions", "--db", "m.db", "--since", "soon"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains(
            "\"soon\" is not a time: RFC 3339 (2026-12-01T09:00:00Z), a date (2026-12-01), \
             7d, 24h, 2w, today, yesterday or \"last week\""
        ),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn search_takes_part_of_a_project_and_the_start_of_a_session() {
    let d = common::three_sessions_store("search");
    let hits = |args: &[&str]| {
        let o = run(
            &d,
            "UTC",
            &[],
            &[&["search", "--db", "m.db", "bug"], args].concat(),
        );
        stdout(&o)
            .lines()
            .filter(|l| !l.starts_with("    "))
            .map(|l| l.split("  ").last().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let all = hits(&[]);
    assert_eq!(
        all,
        ["hand-built-0001:c0de0017", "hand-built-0001:c0de0004"],
        "{all:?}"
    );
    assert_eq!(hits(&["--project", "My-Project"]), all);
    assert_eq!(hits(&["--project", "/tmp/my"]), all);
    assert_eq!(hits(&["--project", "my%"]), Vec::<String>::new());
    assert_eq!(hits(&["--session", "hand-"]), all);
    assert_eq!(hits(&["--session", "hand-built-0001"]), all);
    assert_eq!(hits(&["--session", "01a2"]), Vec::<String>::new());
    assert_eq!(hits(&["--since", "100000d"]), all);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn the_reading_commands_find_the_default_store() {
    let d = common::three_sessions_store("default");
    let data = d.join("data");
    fs::create_dir_all(data.join("mem-ingest")).unwrap();
    fs::copy(d.join("m.db"), data.join("mem-ingest/memory.db")).unwrap();
    let home_share = d.join(".local/share/mem-ingest");
    fs::create_dir_all(&home_share).unwrap();
    // $MEM_INGEST_DB first.
    let o = run(&d, "UTC", &[("MEM_INGEST_DB", "m.db")], &["sessions"]);
    assert_eq!(stdout(&o), ALL);
    // Then $XDG_DATA_HOME/mem-ingest/memory.db.
    let xdg = data.to_str().unwrap();
    let o = run(&d, "UTC", &[("XDG_DATA_HOME", xdg)], &["sessions"]);
    assert_eq!(stdout(&o), ALL);
    let o = run(&d, "UTC", &[("XDG_DATA_HOME", xdg)], &["search", "bug"]);
    assert_eq!(stdout(&o).lines().count(), 4);
    // Then ~/.local/share/mem-ingest/memory.db: not there yet.
    let o = run(&d, "UTC", &[], &["sessions"]);
    assert_eq!(o.status.code(), Some(1));
    let path = home_share.join("memory.db");
    let p = path.display();
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "error: {p}: no such store (the default store, which --db FILE or $MEM_INGEST_DB \
             changes; `mem-ingest backfill --db {p}` creates one)\n"
        )
    );
    let o = run(&d, "UTC", &[], &["search", "bug"]);
    assert_eq!(o.status.code(), Some(1));
    fs::copy(d.join("m.db"), &path).unwrap();
    assert_eq!(stdout(&run(&d, "UTC", &[], &["sessions"])), ALL);
    // A store named by --db that is not there says no more than that.
    let o = run(&d, "UTC", &[], &["sessions", "--db", "gone.db"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "error: gone.db: no such store (`mem-ingest backfill --db gone.db` creates one)\n"
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn show_prints_a_session_around_a_record_tool_output_folded() {
    let d = common::three_sessions_store("show");
    let around = |extra: &[&str]| {
        let args = [
            &[
                "show",
                "--db",
                "m.db",
                "hand",
                "--around",
                "hand-built-0001:c0de0006",
            ],
            extra,
        ]
        .concat();
        stdout(&run(&d, "UTC", &[], &args))
    };
    assert_eq!(
        around(&["--format", "text"]),
        "\
hand-built-0001 · pi · /tmp/my-project · 22 records, 2026-01-15 10:00:03 to 2026-01-15 10:00:32

2026-01-15 10:00:03  system
    You are pi, a coding agent.
    Work in /tmp/my-project.

2026-01-15 10:00:04  user
    Fix the \"bug\" in C:\\Users\\me\\tnow
    Line 2: café 🚀 中文测试 日本語

2026-01-15 10:00:05  assistant
    Let me look at the files first.
    I'll list the project 😀 first.
    bash {\"command\":\"ls -la /tmp/my-project\",\"timeout\":30}

2026-01-15 10:00:06  tool_result (bash): total 8 [+2 lines]

2026-01-15 10:00:07  user
    Here is a screenshot:
    [image image/png, 12 bytes]

2026-01-15 10:00:08  assistant
    Reading the file now.
    read {\"path\":\"/tmp/my-project/missing.rs\"}

2026-01-15 10:00:09  tool_result (read): ENOENT: no such file or directory, open '/tmp/my-project/missing.rs'

2026-01-15 10:00:10  assistant: (no text)

2026-01-15 10:00:11  bash_execution (exit 0): $ cargo test [+2 lines]
"
    );
    // Three records before it (the session's first) and five after.
    // Markdown (the default off a terminal), the tool's output whole with
    // --full, fenced.
    let md = around(&["--full"]);
    assert!(
        md.contains(
            "\n## tool_result (bash) · 2026-01-15 10:00:06\n\n```\ntotal 8\n\
             -rw-r--r-- 1 me me 42 Cargo.toml\nsrc/\n```\n"
        ),
        "{md}"
    );
    assert!(
        md.starts_with("# hand-built-0001 · pi · /tmp/my-project"),
        "{md}"
    );
    assert_eq!(md.matches("\n## ").count(), 9);
    let folded = around(&[]);
    assert!(
        folded.contains("\n## tool_result (bash) · 2026-01-15 10:00:06\n\n> total 8 [+2 lines]\n"),
        "{folded}"
    );
    // JSON: a record a line, whole, its place in the archive with it.
    let json = around(&["--format", "json", "--utc"]);
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 9);
    let file = common::fixtures().join("hand-built.jsonl");
    assert_eq!(
        lines[3],
        format!(
            "{{\"key\":\"hand-built-0001:c0de0006\",\"role\":\"tool_result\",\
             \"time\":\"2026-01-15T10:00:06Z\",\"tool_name\":\"bash\",\"command\":null,\
             \"exit_code\":null,\"file\":{},\"line\":7,\"text\":\"total 8\\n-rw-r--r-- 1 me me \
             42 Cargo.toml\\nsrc/\"}}",
            serde_json::Value::from(file.to_str().unwrap())
        )
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn show_names_the_session_it_cannot_choose() {
    let d = common::three_sessions_store("show-refused");
    for (session, extra, says) in [
        (
            "01a229a8",
            &[][..],
            "error: \"01a229a8\" starts the ids of several sessions \
             (01a229a8-a761-76d0-bf2d-9410f7fd8a06, 01a229a8-a694-717d-ada9-2fc296ed4e4b): \
             give more of it\n",
        ),
        (
            "zz",
            &[][..],
            "error: no session's id starts with \"zz\" (`mem-ingest sessions` lists them)\n",
        ),
        (
            "hand",
            &["--around", "nope"][..],
            "error: --around: session hand-built-0001 has no record \"nope\" (search prints \
             the keys)\n",
        ),
    ] {
        let args = [&["show", "--db", "m.db", session], extra].concat();
        let o = run(&d, "UTC", &[], &args);
        assert_eq!(o.status.code(), Some(2), "{session}");
        assert_eq!(String::from_utf8_lossy(&o.stderr), says);
        assert!(o.stdout.is_empty());
    }
    // A whole id that starts others' too is its own session.
    let o = run(
        &d,
        "UTC",
        &[],
        &[
            "show",
            "--db",
            "m.db",
            "hand-built-0001",
            "--format",
            "json",
        ],
    );
    assert_eq!(stdout(&o).lines().count(), 22);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_search_that_finds_nothing_says_its_filters_and_close_words() {
    let d = common::three_sessions_store("hint");
    let o = run(
        &d,
        "UTC",
        &[],
        &[
            "search",
            "--db",
            "m.db",
            "scrreenshot of tnow",
            "--agent",
            "pi",
            "--since",
            "2026-01-01",
        ],
    );
    assert_eq!(stdout(&o), "");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "no record matches \"scrreenshot of tnow\" with --since \"2026-01-01T00:00:00.000Z\" \
         --agent \"pi\"; close words in the store: scrreenshot -> screenshot\n"
    );
    // Every word held: no close word to offer, the filters said.
    let o = run(
        &d,
        "UTC",
        &[],
        &["search", "--db", "m.db", "screenshot", "--role", "system"],
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "no record matches \"screenshot\" with --role \"system\"\n"
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn search_prints_the_place_of_each_hit_in_the_local_zone() {
    let d = common::three_sessions_store("hit-lines");
    let file = common::fixtures().join("hand-built.jsonl");
    let args = ["search", "--db", "m.db", "screenshot", "--session", "hand"];
    let o = run(&d, "Asia/Kolkata", &[], &args);
    assert_eq!(
        stdout(&o),
        format!(
            "2026-01-15 15:30:07  pi  /tmp/my-project  user  {}:8  hand-built-0001:c0de0007\n    \
             Here is a «screenshot»: [image image/png, 12 bytes]\n",
            file.display()
        )
    );
    fs::remove_dir_all(d).unwrap();
}

/// The reading commands read a store of every schema version as it is
/// (no migration: they never write), the checked-in stores of versions 1
/// to 5 (`backfill --db` of hand-built.jsonl).
#[test]
fn sessions_and_show_read_the_stores_of_every_version() {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-sessions-{}-versions",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    for v in 1..=mem_ingest_store::SCHEMA_VERSION {
        let db = d.join(format!("store-v{v}.sqlite"));
        fs::copy(common::fixtures().join(format!("store-v{v}.sqlite")), &db).unwrap();
        let before = fs::read(&db).unwrap();
        let db = db.to_str().unwrap();
        assert_eq!(
            stdout(&run(&d, "UTC", &[], &["sessions", "--db", db])),
            "2026-01-15 10:00  pi      /tmp/my-project  22 records  hand-built-0001\n    \
             Fix the \"bug\" in C:\\Users\\me\\tnow…\n",
            "version {v}"
        );
        let shown = stdout(&run(
            &d,
            "UTC",
            &[],
            &["show", "--db", db, "hand", "--format", "json"],
        ));
        assert_eq!(shown.lines().count(), 22, "version {v}");
        assert_eq!(
            fs::read(db).unwrap(),
            before,
            "version {v}: the store was written"
        );
    }
    fs::remove_dir_all(d).unwrap();
}

/// Counts in the listing and the transcript's header have thousands
/// separators, as every human table.
#[test]
fn counts_are_grouped_by_thousands() {
    let d = std::env::temp_dir().join(format!("mem-ingest-sessions-{}-big", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    let s = d.join("2026-01-01T00-00-00-000Z_big.jsonl");
    let mut body = r#"{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#.to_owned() + "\n";
    for i in 0..1_234 {
        body.push_str(&common::user_line(&format!("m{i}"), &format!("line {i}")));
    }
    fs::write(&s, body).unwrap();
    let out = Command::new(common::bin())
        .args(["backfill", "-q", "--db"])
        .arg(d.join("m.db"))
        .arg(&s)
        .output()
        .unwrap();
    assert!(out.status.success());
    let list = stdout(&run(&d, "UTC", &[], &["sessions", "--db", "m.db"]));
    assert_eq!(
        list,
        "2026-02-01 00:00  pi      /p  1,234 records  big\n    line 0\n"
    );
    let shown = stdout(&run(
        &d,
        "UTC",
        &[],
        &["show", "--db", "m.db", "big", "--format", "text"],
    ));
    assert_eq!(
        shown.lines().next().unwrap(),
        "big · pi · /p · 1,234 records, 2026-02-01 00:00:00 to 2026-02-01 00:00:00"
    );
    fs::remove_dir_all(d).unwrap();
}
