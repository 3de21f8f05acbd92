//! The Cursor CLI's transcripts (`projects/<slug>/agent-transcripts/`),
//! read by `--agent cursor` beside the IDE's store: JSONL lines (resumed
//! by byte offset, a partial last line held back), the older `.txt`
//! documents (a `.jsonl` of the same stem wins), the cwd from the slug
//! folder, a subagent in its parent chat's lineage; and the shared
//! folder's samples (agent-sessions' and deja-vu's fixtures).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::checkpoint::{shard_of, Shard};
use mem_ingest::format::{detect_format, Format};
use mem_ingest::sink::ForEach;
use mem_ingest::{Header, OwnedRecord, Parent, Role};
use mem_ingest_db::CursorIde;

#[path = "../../mem-ingest/tests/common/shared.rs"]
mod shared;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-db-cursor-cli-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn cursor() -> Vec<Arc<dyn Format>> {
    vec![Arc::new(CursorIde) as Arc<dyn Format>]
}

/// Every format this build reads, the database agents' registered.
fn all() -> Vec<Arc<dyn Format>> {
    mem_ingest_db::register();
    mem_ingest_parse::formats::builtin()
}

/// The `agent-transcripts` folder of a project whose slug names `project`
/// (a folder of this machine, made here).
fn transcripts(d: &Path, project: &Path) -> PathBuf {
    fs::create_dir_all(project).unwrap();
    let slug = project
        .to_str()
        .unwrap()
        .trim_start_matches('/')
        .replace('/', "-");
    let t = d
        .join("cursor/projects")
        .join(slug)
        .join("agent-transcripts");
    fs::create_dir_all(&t).unwrap();
    t
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

const CHAT: &str = concat!(
    r#"{"role":"user","message":{"content":[{"type":"text","text":"<user_query>\nrun ls\n</user_query>"}]}}"#,
    "\n",
    r#"{"role":"assistant","message":{"content":[{"type":"thinking","thinking":"list it"},{"type":"text","text":"Running it."},{"type":"tool_use","name":"Shell","input":{"command":"ls"}}]}}"#,
    "\n",
    r#"{"type":"turn_ended","status":"success"}"#,
    "\n",
    r#"{"role":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt","is_error":false}]}}"#,
    "\n",
    r#"{"role":"assistant","message":{"content":[{"type":"text","text":"One file."}]}}"#,
    "\n",
);

/// A checkpointed backfill of the projects folder `d/cursor/projects` with
/// Cursor's format alone, its records pushed to `got`.
fn backfill_projects(
    d: &Path,
    state: &Path,
    got: &mut Vec<OwnedRecord>,
) -> mem_ingest::archive::Summary {
    Archive::builder()
        .path(d.join("cursor/projects"))
        .formats(cursor())
        .state(state)
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
        .unwrap()
}

/// The byte offset of 1-based line `n` of `text`.
fn byte_of(text: &str, n: usize) -> u64 {
    text.split_inclusive('\n')
        .take(n - 1)
        .map(str::len)
        .sum::<usize>() as u64
}

fn rows(got: &[OwnedRecord]) -> Vec<(Role, &str, String, &str, &str, u64, u64)> {
    got.iter()
        .map(|r| {
            (
                r.role,
                r.text.as_str(),
                r.kinds.join(","),
                r.session.as_str(),
                r.key.as_str(),
                r.line,
                r.byte,
            )
        })
        .collect()
}

#[test]
fn a_nested_chat_and_its_subagent_give_their_records_with_the_slugs_cwd() {
    let d = tmpdir("nested");
    let project = d.join("src/my-app");
    let t = transcripts(&d, &project);
    write(&t.join("c1/c1.jsonl"), CHAT);
    write(
        &t.join("c1/subagents/s9.jsonl"),
        concat!(
            r#"{"role":"user","message":{"content":[{"type":"text","text":"look"}]}}"#,
            "\n"
        ),
    );
    // Not transcripts: another file in the chat's folder, a store.
    write(&t.join("c1/notes.jsonl"), CHAT);
    let mut got = Vec::new();
    let s = Archive::builder()
        .path(d.join("cursor/projects"))
        .formats(cursor())
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    got.sort_by(|a, b| (&a.session, a.line).cmp(&(&b.session, b.line)));
    assert_eq!(
        rows(&got),
        [
            (Role::User, "run ls", "text".into(), "c1", "c1:L1", 1, 0),
            (
                Role::Assistant,
                "list it\nRunning it.\nShell {\"command\":\"ls\"}",
                "thinking,text,toolCall".into(),
                "c1",
                "c1:L2",
                2,
                byte_of(CHAT, 2)
            ),
            (
                Role::ToolResult,
                "a.txt",
                "toolResult".into(),
                "c1",
                "c1:L4",
                4,
                byte_of(CHAT, 4)
            ),
            (
                Role::Assistant,
                "One file.",
                "text".into(),
                "c1",
                "c1:L5",
                5,
                byte_of(CHAT, 5)
            ),
            (Role::User, "look", "text".into(), "s9", "s9:L1", 1, 0),
        ]
    );
    // The cwd: `my-app`'s `-` kept, since `src/my` does not exist here.
    assert!(got.iter().all(|r| r.project == project.to_str().unwrap()));
    assert!(got
        .iter()
        .all(|r| r.timestamp.is_none() && r.usage.is_none()));
    assert_eq!(got[1].tool_name.as_deref(), Some("Shell"));
    assert_eq!(
        (got[2].tool_call_id.as_deref(), got[2].is_error),
        (Some("t1"), Some(false))
    );
    assert_eq!(got[4].agent_id.as_deref(), Some("s9"));
    assert_eq!(got[0].source, "cursor:c1");
    // The control line is an entry without a record, not a skip.
    assert_eq!(
        (s.report.records, s.report.no_record, s.report.skipped),
        (5, 1, 0)
    );
    assert_eq!(s.report.usage.total_tokens, 0);
    fs::remove_dir_all(d).unwrap();
}

/// The subagent's file is read by the shard of its parent chat: its
/// lineage is the parent's. Its own id hashes to the other shard, so a
/// subagent not linked would be read by that one.
#[test]
fn a_subagent_is_in_its_parent_chats_lineage() {
    let d = tmpdir("lineage");
    let t = transcripts(&d, &d.join("p"));
    let parent = "c1";
    let home = shard_of(&format!("cursor:{parent}"), 2);
    let child = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"]
        .into_iter()
        .find(|c| shard_of(&format!("cursor:{c}"), 2) != home)
        .unwrap();
    write(&t.join(format!("{parent}/{parent}.jsonl")), CHAT);
    write(
        &t.join(format!("{parent}/subagents/{child}.jsonl")),
        concat!(
            r#"{"role":"user","message":{"content":[{"type":"text","text":"look"}]}}"#,
            "\n"
        ),
    );
    for k in 0..2 {
        let mut sessions = Vec::new();
        Archive::builder()
            .path(d.join("cursor/projects"))
            .formats(cursor())
            .shard(Shard { k, n: 2 })
            .build()
            .backfill(&mut ForEach(|r: OwnedRecord| sessions.push(r.session)))
            .unwrap();
        sessions.dedup();
        if k == home {
            assert_eq!(sessions, [parent, child]);
        } else {
            assert_eq!(sessions, Vec::<String>::new());
        }
    }
    let h = Header {
        id: child.into(),
        cwd: String::new(),
        version: 0,
        timestamp: None,
        parent: Some(Parent::Session(parent.into())),
        fingerprint: 0,
    };
    assert_eq!(CursorIde.parent(&h).as_deref(), Some("cursor:c1"));
    assert_eq!(CursorIde.parent(&Header { parent: None, ..h }), None);
    fs::remove_dir_all(d).unwrap();
}

/// A damaged line is a counted skip naming its file, line and byte; a
/// partial last line is held back by a checkpointed run and read once
/// completed (resumed: the first line is longer than the 4 KiB the
/// header holds, which stay the same); a run over an unchanged file
/// writes nothing.
#[test]
fn a_damaged_line_is_skipped_and_a_partial_last_line_waits() {
    let d = tmpdir("partial");
    let t = transcripts(&d, &d.join("w"));
    let f = t.join("c2.jsonl");
    let hello = format!("hello {}", "x".repeat(5000));
    let first = format!(r#"{{"role":"user","message":{{"content":"{hello}"}}}}"#);
    let last = r#"{"role":"assistant","message":{"content":[{"type":"text","text":"hi back"}]}}"#;
    write(
        &f,
        &format!("{first}\n{{\"role\":\"assistant\",\"mess\n{}", &last[..30]),
    );
    let state = d.join("s.state");
    let run = |got: &mut Vec<OwnedRecord>| backfill_projects(&d, &state, got);
    let mut got = Vec::new();
    let s = run(&mut got);
    assert_eq!(
        rows(&got),
        [(Role::User, &*hello, "text".into(), "c2", "c2:L1", 1, 0)]
    );
    assert_eq!(s.report.skipped, 1);
    let skip = &s.skips[0];
    assert_eq!(
        (skip.path.as_str(), skip.line, skip.byte),
        (f.to_str().unwrap(), 2, first.len() as u64 + 1)
    );
    // The writer finishes the last line.
    fs::OpenOptions::new()
        .append(true)
        .open(&f)
        .unwrap()
        .write_all(format!("{}\n", &last[30..]).as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let s = run(&mut got);
    let at = (first.len() + 1 + "{\"role\":\"assistant\",\"mess\n".len()) as u64;
    assert_eq!(
        rows(&got),
        [(
            Role::Assistant,
            "hi back",
            "text".into(),
            "c2",
            "c2:L3",
            3,
            at
        )]
    );
    // Resumed; the damaged line stays counted once.
    assert_eq!((s.resumed, s.report.skipped), (1, 1));
    // Again: nothing new.
    let mut got = Vec::new();
    let s = run(&mut got);
    assert_eq!((got.len(), s.written, s.unchanged), (0, 0, 1));
    fs::remove_dir_all(d).unwrap();
}

/// A transcript whose first line was rewritten in place (grown, same
/// file) is read again from its start: the lines it shares with what was
/// read are not emitted again, the new first line is.
#[test]
fn a_transcript_whose_start_changed_is_read_again() {
    let d = tmpdir("start");
    let t = transcripts(&d, &d.join("w"));
    let f = t.join("c3.jsonl");
    let second = r#"{"role":"assistant","message":{"content":"two"}}"#;
    write(
        &f,
        &format!(
            "{}\n{second}\n",
            r#"{"role":"user","message":{"content":"one"}}"#
        ),
    );
    let state = d.join("s.state");
    let run = |got: &mut Vec<OwnedRecord>| backfill_projects(&d, &state, got);
    let mut got = Vec::new();
    run(&mut got);
    assert_eq!(got.len(), 2);
    // Rewritten through the same inode, longer.
    let mut w = fs::OpenOptions::new().write(true).open(&f).unwrap();
    w.write_all(
        format!(
            "{}\n{second}\n",
            r#"{"role":"user","message":{"content":"ONE, edited"}}"#
        )
        .as_bytes(),
    )
    .unwrap();
    drop(w);
    let mut got = Vec::new();
    let s = run(&mut got);
    assert_eq!(s.reread, 1);
    assert_eq!(
        rows(&got),
        [(
            Role::User,
            "ONE, edited",
            "text".into(),
            "c3",
            "c3:L1",
            1,
            0
        )]
    );
    fs::remove_dir_all(d).unwrap();
}

/// A transcript rewritten in place with its first line kept (the second
/// regenerated longer, a third added) is read again from its start, its
/// first 4 KiB having changed: the regenerated line and the new one are
/// emitted at their own lines, the line kept is not emitted again, and no
/// line is read from the middle (the old resume offset).
#[test]
fn a_transcript_rewritten_after_its_first_line_is_read_again() {
    let d = tmpdir("rewrite");
    let t = transcripts(&d, &d.join("w"));
    let f = t.join("c1.jsonl");
    let one = r#"{"role":"user","message":{"content":"one"}}"#;
    write(
        &f,
        &format!(
            "{one}\n{}\n",
            r#"{"role":"assistant","message":{"content":"two"}}"#
        ),
    );
    let state = d.join("s.state");
    let run = |got: &mut Vec<OwnedRecord>| backfill_projects(&d, &state, got);
    let mut got = Vec::new();
    run(&mut got);
    assert_eq!(got.len(), 2);
    let two = r#"{"role":"assistant","message":{"content":"TWO regenerated, much longer"}}"#;
    let three = r#"{"role":"user","message":{"content":"three"}}"#;
    let mut w = fs::OpenOptions::new().write(true).open(&f).unwrap();
    w.write_all(format!("{one}\n{two}\n{three}\n").as_bytes())
        .unwrap();
    drop(w);
    let mut got = Vec::new();
    let s = run(&mut got);
    assert!(s.skips.is_empty(), "{:?}", s.skips);
    assert_eq!((s.reread, s.report.skipped), (1, 0));
    let at = (one.len() + 1) as u64;
    assert_eq!(
        rows(&got),
        [
            (
                Role::Assistant,
                "TWO regenerated, much longer",
                "text".into(),
                "c1",
                "c1:L2",
                2,
                at
            ),
            (
                Role::User,
                "three",
                "text".into(),
                "c1",
                "c1:L3",
                3,
                at + two.len() as u64 + 1
            ),
        ]
    );
    fs::remove_dir_all(d).unwrap();
}

const TXT: &str = "user:\n<user_query>\nold question\n</user_query>\n\nassistant:\nold answer\n";

#[test]
fn a_jsonl_wins_over_the_txt_of_its_stem_and_a_txt_alone_is_read() {
    let d = tmpdir("txt");
    let t = transcripts(&d, &d.join("w"));
    write(&t.join("c4.jsonl"), CHAT);
    write(&t.join("c4.txt"), TXT);
    write(&t.join("c5.txt"), TXT);
    let state = d.join("s.state");
    let run = |got: &mut Vec<OwnedRecord>| backfill_projects(&d, &state, got);
    let mut got = Vec::new();
    let s = run(&mut got);
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let mut sessions: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.session.as_str(), r.text.as_str()))
        .collect();
    sessions.sort();
    assert_eq!(
        sessions,
        [
            ("c4", "One file."),
            ("c4", "a.txt"),
            ("c4", "list it\nRunning it.\nShell {\"command\":\"ls\"}"),
            ("c4", "run ls"),
            ("c5", "old answer"),
            ("c5", "old question"),
        ]
    );
    // The document again, unchanged: nothing; rewritten with one more
    // message: that message alone.
    let mut got = Vec::new();
    assert_eq!(run(&mut got).written, 0);
    write(&t.join("c5.txt"), &format!("{TXT}user:\nnew question\n"));
    let mut got = Vec::new();
    run(&mut got);
    assert_eq!(
        rows(&got),
        [(
            Role::User,
            "new question",
            "text".into(),
            "c5",
            "c5:L8",
            3,
            TXT.len() as u64
        )]
    );
    fs::remove_dir_all(d).unwrap();
}

/// A `.txt` transcript whose last message is appended to (the CLI
/// writing it) gives that message once: each longer version a revision
/// of its key (a store updates its row; nothing more is written), not a
/// record of its own; a message that follows is new.
#[test]
fn a_txt_transcripts_last_message_written_on_is_one_record() {
    let d = tmpdir("txtlast");
    let t = transcripts(&d, &d.join("w"));
    let f = t.join("c2.txt");
    let start = "user:\nhi\n\nassistant:\n";
    write(&f, &format!("{start}part"));
    let state = d.join("s.state");
    let run = |got: &mut Vec<OwnedRecord>| backfill_projects(&d, &state, got);
    let mut got = Vec::new();
    run(&mut got);
    let at = "user:\nhi\n\n".len() as u64;
    assert_eq!(
        rows(&got),
        [
            (Role::User, "hi", "text".into(), "c2", "c2:L1", 1, 0),
            (Role::Assistant, "part", "text".into(), "c2", "c2:L4", 2, at),
        ]
    );
    for more in [" longer", " and whole\n"] {
        fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .unwrap()
            .write_all(more.as_bytes())
            .unwrap();
        let mut got = Vec::new();
        let s = run(&mut got);
        assert_eq!(rows(&got), []);
        assert_eq!((s.written, s.updated), (0, 1));
    }
    fs::OpenOptions::new()
        .append(true)
        .open(&f)
        .unwrap()
        .write_all(b"user:\nthanks\n")
        .unwrap();
    let mut got = Vec::new();
    let s = run(&mut got);
    assert_eq!(
        rows(&got),
        [(
            Role::User,
            "thanks",
            "text".into(),
            "c2",
            "c2:L6",
            3,
            (start.len() + "part longer and whole\n".len()) as u64
        )]
    );
    assert_eq!((s.written, s.updated), (1, 0));
    fs::remove_dir_all(d).unwrap();
}

/// Paths named relative to the current folder keep their layout: the
/// `agent-transcripts` folder as `.`, from the slug folder as
/// `agent-transcripts`, a subagent as `subagents/<id>.jsonl` from its
/// chat's folder. The only test of this binary that changes the process's
/// current folder (every other names absolute paths).
#[test]
fn relative_paths_keep_the_folder_layout() {
    let d = tmpdir("relative");
    let project = d.join("rel");
    let t = transcripts(&d, &project);
    write(&t.join("c1/c1.jsonl"), CHAT);
    write(
        &t.join("c1/subagents/s9.jsonl"),
        concat!(
            r#"{"role":"user","message":{"content":[{"type":"text","text":"look"}]}}"#,
            "\n"
        ),
    );
    let run = |from: &Path, path: &str| {
        std::env::set_current_dir(from).unwrap();
        let mut got = Vec::new();
        let s = Archive::builder()
            .path(path)
            .formats(cursor())
            .build()
            .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
            .unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        let mut seen: Vec<(String, String, Option<String>)> = got
            .into_iter()
            .map(|r| (r.session, r.project, r.agent_id))
            .collect();
        seen.dedup();
        (s.files, seen)
    };
    let cwd = project.to_str().unwrap().to_owned();
    let both = vec![
        ("c1".to_owned(), cwd.clone(), None),
        ("s9".to_owned(), cwd.clone(), Some("s9".to_owned())),
    ];
    assert_eq!(run(&t, "."), (2, both.clone()));
    assert_eq!(run(t.parent().unwrap(), "agent-transcripts"), (2, both));
    assert_eq!(
        run(&t.join("c1"), "subagents/s9.jsonl"),
        (1, vec![("s9".to_owned(), cwd, Some("s9".to_owned()))])
    );
    std::env::set_current_dir(std::env::temp_dir()).unwrap();
    fs::remove_dir_all(d).unwrap();
}

/// A flat `<id>.txt` loses to the nested `<id>/<id>.jsonl` of the same
/// chat as to a flat `<id>.jsonl`: the chat's records once.
#[test]
fn a_nested_jsonl_wins_over_the_flat_txt_of_its_chat() {
    let d = tmpdir("txtnested");
    let t = transcripts(&d, &d.join("w"));
    write(&t.join("c4/c4.jsonl"), CHAT);
    write(&t.join("c4.txt"), TXT);
    let mut got = Vec::new();
    let s = Archive::builder()
        .path(d.join("cursor/projects"))
        .formats(cursor())
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(s.files, 1);
    let keys: Vec<&str> = got.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["c4:L1", "c4:L2", "c4:L4", "c4:L5"]);
    fs::remove_dir_all(d).unwrap();
}

/// A transcript under another name (`chat.log`) named as a PATH: its
/// content makes it Cursor's, and it is read as a transcript (not opened
/// as a database: it has no SQLite header), incrementally too.
#[test]
fn a_transcript_under_another_extension_is_read_as_one() {
    let d = tmpdir("log");
    let log = d.join("s5/chat.log");
    write(&log, CHAT);
    assert_eq!(all()[detect_format(&all(), &log)].name(), "cursor");
    let state = d.join("s.state");
    for formats in [cursor(), all()] {
        let _ = fs::remove_file(&state);
        let mut got = Vec::new();
        let s = Archive::builder()
            .path(&log)
            .formats(formats)
            .state(&state)
            .build()
            .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
            .unwrap();
        assert!(s.failures.is_empty(), "{:?}", s.failures);
        let keys: Vec<&str> = got.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["chat:L1", "chat:L2", "chat:L4", "chat:L5"]);
    }
    fs::remove_dir_all(d).unwrap();
}

/// Named as PATHs among every format: a transcript is Cursor's by its
/// first line anywhere; one whose first line is damaged, and a `.txt`,
/// by its place in an `agent-transcripts` folder; Claude Code's and pi's
/// files stay theirs.
#[test]
fn a_transcript_named_as_a_path_is_cursors_and_no_other_agents_file_is() {
    let d = tmpdir("detect");
    let name_of = |p: &Path| all()[detect_format(&all(), p)].name();
    let loose = d.join("elsewhere/chat.jsonl");
    write(&loose, CHAT);
    let t = transcripts(&d, &d.join("w"));
    let damaged = t.join("c6.jsonl");
    write(&damaged, &format!("{{\"role\":\n{CHAT}"));
    let txt = t.join("c7.txt");
    write(&txt, TXT);
    let claude = d.join("claude.jsonl");
    write(
        &claude,
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"},\"sessionId\":\"s\",\"uuid\":\"u\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"cwd\":\"/w\"}\n",
    );
    let pi = d.join("pi.jsonl");
    write(
        &pi,
        "{\"type\":\"session\",\"id\":\"p1\",\"timestamp\":\"2026-01-01T00:00:00Z\",\"cwd\":\"/w\"}\n",
    );
    assert_eq!(
        [&loose, &damaged, &txt, &claude, &pi].map(|p| name_of(p)),
        ["cursor", "cursor", "cursor", "claude", "pi"]
    );
    // Read with every format: the loose file's records, the cwd unknown.
    let mut got = Vec::new();
    let s = Archive::builder()
        .path(&loose)
        .formats(all())
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(got.len(), 4);
    assert!(got
        .iter()
        .all(|r| r.project.is_empty() && r.session == "chat"));
    fs::remove_dir_all(d).unwrap();
}

fn samples(sub: &str) -> PathBuf {
    shared::samples().join("cursor").join(sub)
}

/// The shared folder's CLI transcripts, copied into the layouts the CLI
/// writes (a chat nested, its subagent, a flat chat) and read with every
/// format from the `projects/` folder.
#[test]
#[ignore = "needs ../shared: samples/cursor/ (agent-sessions and deja-vu fixtures)"]
fn the_shared_samples_give_their_messages() {
    let d = tmpdir("samples");
    let fx = samples("agent-sessions/AgentSessionsTests/Fixtures/Cursor");
    let t = d.join("cursor/projects/Users-dev-Repository-Codex-History/agent-transcripts");
    let copy = |from: &Path, to: &Path| {
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(from, to).unwrap();
    };
    copy(&fx.join("test-session.jsonl"), &t.join("a1/a1.jsonl"));
    copy(
        &fx.join("subagent-session.jsonl"),
        &t.join("a1/subagents/b2.jsonl"),
    );
    copy(
        &samples("agent-sessions/Resources/Fixtures/stage0/agents/cursor/schema_drift.jsonl"),
        &t.join("d3.jsonl"),
    );
    copy(
        &samples(
            "deja-vu/fixtures/registry/cursor/projects/registry-demo/agent-transcripts/registry-cursor.jsonl",
        ),
        &t.join("e4.jsonl"),
    );
    let mut got = Vec::new();
    let s = Archive::builder()
        .path(d.join("cursor/projects"))
        .formats(all())
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| got.push(r)))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    got.sort_by(|a, b| (&a.session, a.line).cmp(&(&b.session, b.line)));
    let got: Vec<(&str, u64, Role, &str, String)> = got
        .iter()
        .map(|r| {
            (
                r.session.as_str(),
                r.line,
                r.role,
                r.text.as_str(),
                r.kinds.join(","),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "a1",
                1,
                Role::User,
                "run ls command",
                "text".to_owned()
            ),
            (
                "a1",
                2,
                Role::Assistant,
                "Running the ls command for you.\nShell {\"command\":\"ls -la /tmp\",\"description\":\"List directory contents\"}",
                "text,toolCall".to_owned()
            ),
            (
                "a1",
                3,
                Role::Assistant,
                "Here are the directory contents:\n\n```\ntotal 0\ndrwxrwxrwt  12 root  wheel  384 Jan  1 00:00 .\ndrwxr-xr-x   6 root  wheel  192 Jan  1 00:00 ..\n```",
                "text".to_owned()
            ),
            (
                "a1",
                4,
                Role::User,
                "now show me the git status",
                "text".to_owned()
            ),
            (
                "a1",
                5,
                Role::Assistant,
                "[REDACTED]\nShell {\"command\":\"git status\",\"description\":\"Check git status\"}",
                "text,toolCall".to_owned()
            ),
            (
                "a1",
                6,
                Role::Assistant,
                "The repository is clean \u{2014} no uncommitted changes.",
                "text".to_owned()
            ),
            (
                "b2",
                1,
                Role::User,
                "Run ls -la in the workspace directory and return the output.",
                "text".to_owned()
            ),
            (
                "b2",
                2,
                Role::Assistant,
                "Shell {\"command\":\"ls -la /tmp\",\"description\":\"List workspace files\"}",
                "toolCall".to_owned()
            ),
            (
                "b2",
                3,
                Role::Assistant,
                "Done. The directory has 12 entries.",
                "text".to_owned()
            ),
            (
                "d3",
                1,
                Role::User,
                "Use the repo context and explain the latest build issue.",
                "text".to_owned()
            ),
            (
                "d3",
                2,
                Role::Assistant,
                "I should inspect the build log before answering.\nread_file {\"path\":\"build.log\"}\nCursor added an unknown block with visible text.",
                "thinking,toolCall,custom_block".to_owned()
            ),
            (
                "d3",
                3,
                Role::ToolResult,
                "Compile failed in Example.swift:42",
                "toolResult".to_owned()
            ),
            (
                "d3",
                4,
                Role::Assistant,
                "The build issue is in Example.swift:42.",
                "text".to_owned()
            ),
            (
                "e4",
                1,
                Role::User,
                "inspect the cursor transcript",
                "text".to_owned()
            ),
            (
                "e4",
                2,
                Role::Assistant,
                "the transcript is readable",
                "text".to_owned()
            ),
        ]
    );
    // deja-vu's `turn_ended` line: an entry without a record.
    assert_eq!(
        (s.report.records, s.report.no_record, s.report.skipped),
        (15, 1, 0)
    );
    fs::remove_dir_all(d).unwrap();
}

/// Each sample named as a PATH, with every format: Cursor's.
#[test]
#[ignore = "needs ../shared: samples/cursor/ (agent-sessions and deja-vu fixtures)"]
fn each_shared_sample_named_as_a_path_is_cursors() {
    for f in [
        "agent-sessions/AgentSessionsTests/Fixtures/Cursor/test-session.jsonl",
        "agent-sessions/AgentSessionsTests/Fixtures/Cursor/subagent-session.jsonl",
        "agent-sessions/Resources/Fixtures/stage0/agents/cursor/schema_drift.jsonl",
        "deja-vu/fixtures/registry/cursor/projects/registry-demo/agent-transcripts/registry-cursor.jsonl",
    ] {
        let p = samples(f);
        assert_eq!(all()[detect_format(&all(), &p)].name(), "cursor", "{f}");
    }
}
