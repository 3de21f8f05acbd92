//! The agents a checkpoint covers (issue 13): a `--state` or `--db`
//! records them; a later run without `--source` reads the same; a
//! `--source` naming agents it does not record adds them (issue 44), one
//! naming fewer is refused; a checkpoint saved before they were recorded
//! covers the agents of the files it holds (pi when none), so a state of
//! pi's archive gains no records of another agent.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::Output;

use common::{append, fixtures, run, tmpdir, user_line};

/// A Claude Code transcript of two lines (a prompt and its answer), session
/// `cs-1`, project `/tmp/claude-proj`.
fn claude_session(path: &Path) {
    let line = |uuid: &str, parent: &str, role: &str, text: &str, t: &str| {
        format!(
            r#"{{"type":"{role}","uuid":"{uuid}","parentUuid":{parent},"sessionId":"cs-1","isSidechain":false,"cwd":"/tmp/claude-proj","timestamp":"2026-03-01T00:00:0{t}.000Z","message":{{"role":"{role}","content":[{{"type":"text","text":"{text}"}}]}}}}"#
        ) + "\n"
    };
    fs::write(
        path,
        line("u-1", "null", "user", "hello from claude", "0")
            + &line("u-2", r#""u-1""#, "assistant", "hello back", "1"),
    )
    .unwrap();
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `key` of each NDJSON record in `out`.
fn keys(out: &str) -> Vec<String> {
    out.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["key"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The state file of the release before (layout 4, pi's two files) over
/// an archive that now also holds a Claude Code session: a run without
/// `--source` reads pi's files only (the appended pi line, not the Claude
/// session), and saves the state in this release's layout recording pi; `--source
/// claude` with it adds Claude Code (its session read), and `--source pi`
/// is then refused, naming both sets.
#[test]
fn a_state_saved_before_sources_were_recorded_stays_pis() {
    let d = tmpdir("sources", "legacy-state");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    for name in ["hand-built.jsonl", "pi-classic.jsonl"] {
        fs::copy(fixtures().join(name), arch.join(name)).unwrap();
    }
    claude_session(&arch.join("claude-session.jsonl"));
    let state = d.join("state");
    fs::copy(fixtures().join("state-v4.state"), &state).unwrap();
    assert_eq!(fs::read(&state).unwrap()[8..12], 4u32.to_le_bytes());
    // The copies are new to the state (inode): every entry a copy. The
    // Claude Code file is read as pi's, as a run of pi alone always did:
    // it fails, naming itself (exit 1), and adds nothing. (-L: the state
    // was saved when links were always followed.)
    let claude_fails = format!(
        "error: {}: 1:0: not a session header: first entry has type \"user\"\n",
        arch.join("claude-session.jsonl").display()
    );
    let first = run(&[&"backfill", &"-q", &"-L", &"--state", &state, &arch]);
    let (out, err) = text(&first);
    assert_eq!(first.status.code(), Some(1), "{err}");
    assert_eq!(err, claude_fails);
    assert_eq!(keys(&out), Vec::<String>::new());
    assert_eq!(
        fs::read(&state).unwrap()[8..12],
        mem_ingest::archive::STATE_VERSION.to_le_bytes()
    );
    append(
        &arch.join("hand-built.jsonl"),
        &user_line("p-new", "pi again"),
    );
    let second = run(&[&"backfill", &"-q", &"-L", &"--state", &state, &arch]);
    let (out, err) = text(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert_eq!(err, claude_fails);
    assert_eq!(keys(&out), ["hand-built-0001:p-new"]);
    let other = run(&[
        &"backfill",
        &"-q",
        &"-L",
        &"--source",
        &"claude",
        &"--state",
        &state,
        &arch,
    ]);
    // A new agent named adds it (issue 44): the run reads pi's files and
    // the Claude Code session, which is now Claude Code's.
    let (out, err) = text(&other);
    assert_eq!(other.status.code(), Some(0), "{err}");
    assert_eq!(keys(&out), ["cs-1:u-1", "cs-1:u-2"]);
    let again = run(&[&"backfill", &"-L", &"--state", &state, &arch]);
    let (out, err) = text(&again);
    assert_eq!(again.status.code(), Some(0), "{err}");
    assert_eq!(out, "");
    assert!(!err.contains("added"), "{err}");
    // Fewer agents than it records: refused, naming both sets.
    let fewer = run(&[
        &"backfill",
        &"-q",
        &"-L",
        &"--source",
        &"pi",
        &"--state",
        &state,
        &arch,
    ]);
    let (out, err) = text(&fewer);
    assert_eq!(fewer.status.code(), Some(2), "{err}");
    assert_eq!(out, "");
    assert!(
        err.contains("--agent: state has pi,claude, this run pi"),
        "{err}"
    );
    fs::remove_dir_all(d).unwrap();
}

/// A first run with `--state` and no `--source` reads every agent and
/// records them all: a Claude Code session added later is read by the
/// next run; `--source pi` with that state is refused.
#[test]
fn a_new_state_reads_and_records_every_agent() {
    let d = tmpdir("sources", "new-state");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    fs::copy(
        fixtures().join("hand-built.jsonl"),
        arch.join("hand-built.jsonl"),
    )
    .unwrap();
    let state = d.join("state");
    let first = run(&[&"backfill", &"-q", &"--state", &state, &arch]);
    assert!(first.status.success(), "{}", text(&first).1);
    assert_eq!(keys(&text(&first).0).len(), 22);
    claude_session(&arch.join("claude-session.jsonl"));
    let second = run(&[&"backfill", &"-q", &"--state", &state, &arch]);
    let (out, err) = text(&second);
    assert!(second.status.success(), "{err}");
    assert_eq!(keys(&out), ["cs-1:u-1", "cs-1:u-2"]);
    let narrowed = run(&[
        &"backfill",
        &"-q",
        &"--source",
        &"pi",
        &"--state",
        &state,
        &arch,
    ]);
    let err = text(&narrowed).1;
    assert_eq!(narrowed.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "--agent: state has pi,gemini,qwen,copilot,amp,cline,claude,codex,opencode,goose,cursor, this run pi"
        ),
        "{err}"
    );
    fs::remove_dir_all(d).unwrap();
}

/// A state made with `--source claude` reads Claude Code's files alone
/// when later runs name no agent: the pi session beside them stays out.
#[test]
fn a_state_keeps_the_agents_named_when_it_was_made() {
    let d = tmpdir("sources", "named");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    claude_session(&arch.join("claude-session.jsonl"));
    let state = d.join("state");
    let first = run(&[
        &"backfill",
        &"-q",
        &"--source",
        &"claude",
        &"--state",
        &state,
        &arch,
    ]);
    assert!(first.status.success(), "{}", text(&first).1);
    assert_eq!(keys(&text(&first).0), ["cs-1:u-1", "cs-1:u-2"]);
    fs::copy(
        fixtures().join("hand-built.jsonl"),
        arch.join("hand-built.jsonl"),
    )
    .unwrap();
    let second = run(&[&"backfill", &"-q", &"--state", &state, &arch]);
    let (out, err) = text(&second);
    assert!(second.status.success(), "{err}");
    assert_eq!(keys(&out), Vec::<String>::new());
    fs::remove_dir_all(d).unwrap();
}

/// The store of schema version 1 (pi's hand-built session, no sources in
/// its options) covers pi alone: a Claude Code session beside the pi file
/// is read as pi's and fails, naming itself, and adds no row (with `-L`:
/// the store was saved when links were always followed); a new store reads
/// both.
#[test]
fn a_store_saved_before_sources_were_recorded_stays_pis() {
    let d = tmpdir("sources", "legacy-store");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    fs::copy(
        fixtures().join("hand-built.jsonl"),
        arch.join("hand-built.jsonl"),
    )
    .unwrap();
    claude_session(&arch.join("claude-session.jsonl"));
    // Each format's rows, as the sqlite3 shell lists them.
    let count = |db: &Path| -> String {
        let c = rusqlite::Connection::open(db).unwrap();
        let mut st = c
            .prepare("SELECT format, count(*) FROM records GROUP BY format ORDER BY format")
            .unwrap();
        let rows = st
            .query_map([], |r| {
                Ok(format!(
                    "{}|{}\n",
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?
                ))
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
    };
    let old = d.join("old.db");
    fs::copy(fixtures().join("store-v1.sqlite"), &old).unwrap();
    let o = run(&[&"backfill", &"-q", &"-L", &"--db", &old, &arch]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o).1);
    assert!(
        text(&o)
            .1
            .contains("claude-session.jsonl: 1:0: not a session header"),
        "{}",
        text(&o).1
    );
    assert_eq!(count(&old), "pi|22\n");
    let new = d.join("new.db");
    let o = run(&[&"backfill", &"-q", &"--db", &new, &arch]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(count(&new), "claude|2\npi|22\n");
    let o = run(&[&"backfill", &"-q", &"--source", &"pi", &"--db", &new, &arch]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    fs::remove_dir_all(d).unwrap();
}
