//! Cursor's global store read through the engine, under the reader's own
//! SQLite authorizer: the global `ItemTable` (auth tokens) and any other
//! workspace key than those listed cannot be read; a bubble of a composer
//! still generating waits until it is final; the fixture's records.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::Format;
use mem_ingest::sink::{ForEach, NdjsonFile};
use mem_ingest::Role;
use mem_ingest_db::cursor::{guard, workspace_composers, Store, WORKSPACE_KEYS};
use mem_ingest_db::CursorIde;
use rusqlite::Connection;
use serde_json::json;

#[path = "../../mem-ingest/tests/common/shared.rs"]
mod shared;

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "mem-ingest-db-cursor-{name}-{}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

const KV: &str = "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
    CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);";

fn put(c: &Connection, table: &str, key: &str, v: &serde_json::Value) {
    c.execute(
        &format!("INSERT INTO {table} VALUES (?1, ?2)"),
        [key, &v.to_string()],
    )
    .unwrap();
}

/// A user folder: the global store (with a secret in its ItemTable) and
/// one workspace store listing composer `c1` for `/w` (and a secret key).
fn user_folder(d: &Path) -> (PathBuf, PathBuf, Connection) {
    let g = d.join("User/globalStorage/state.vscdb");
    fs::create_dir_all(g.parent().unwrap()).unwrap();
    let c = Connection::open(&g).unwrap();
    c.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
        .unwrap();
    c.execute_batch(KV).unwrap();
    put(
        &c,
        "ItemTable",
        "cursorAuth/accessToken",
        &json!("SECRET-TOKEN"),
    );
    let wdir = d.join("User/workspaceStorage/abc");
    fs::create_dir_all(&wdir).unwrap();
    fs::write(
        wdir.join("workspace.json"),
        r#"{"folder": "file:///w%20x"}"#,
    )
    .unwrap();
    let w = Connection::open(wdir.join("state.vscdb")).unwrap();
    w.execute_batch(KV).unwrap();
    put(
        &w,
        "ItemTable",
        "composer.composerData",
        &json!({"allComposers": [{"composerId": "c1"}]}),
    );
    put(&w, "ItemTable", "secret://other", &json!("SECRET-TOO"));
    (g, wdir.join("state.vscdb"), c)
}

#[test]
fn the_readers_authorizer_refuses_the_global_item_table_and_other_workspace_keys() {
    let d = tmpdir("authorizer");
    let (g, w, _c) = user_folder(&d);
    let (conn, _) = guard(&g, Store::Global).unwrap();
    let err = conn
        .query_row("SELECT value FROM ItemTable", [], |r| r.get::<_, String>(0))
        .unwrap_err();
    assert!(err.to_string().contains("prohibited"), "{err}");
    // Its chats are readable.
    let n: i64 = conn
        .query_row("SELECT count(*) FROM cursorDiskKV", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    // Nothing else, not even the other table through a join.
    assert!(conn
        .query_row(
            "SELECT k.value FROM cursorDiskKV k JOIN ItemTable i ON i.key = k.key",
            [],
            |r| r.get::<_, String>(0)
        )
        .is_err());
    let (wc, ok) = guard(&w, Store::Workspace).unwrap();
    let err = wc
        .query_row(
            "SELECT value FROM ItemTable WHERE key = 'secret://other'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap_err();
    assert!(err.to_string().contains("prohibited"), "{err}");
    assert_eq!(WORKSPACE_KEYS, ["composer.composerData"]);
    assert_eq!(workspace_composers(&wc, &ok).unwrap(), ["c1"]);
    // The switch is off again: the listed statement only.
    assert!(wc
        .query_row("SELECT count(*) FROM ItemTable", [], |r| r.get::<_, i64>(0))
        .is_err());
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_bubble_of_a_composer_still_generating_is_emitted_once_it_is_final() {
    let d = tmpdir("generating");
    let (g, _w, c) = user_folder(&d);
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b1",
        &json!({"type": 1, "text": "hello", "createdAt": "2026-08-14T09:00:01.000Z"}),
    );
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b2",
        &json!({"type": 2, "text": "hi so f"}),
    );
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "generating", "generatingBubbleIds": ["b2"],
                "modelConfig": {"modelName": "m1"}, "blobEncryptionKey": "SECRET-KEY"}),
    );
    let dir = g.parent().unwrap();
    let state = d.join("out.state");
    let out = d.join("out.ndjson");
    let run = || {
        Archive::builder()
            .path(dir)
            .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
            .state(&state)
            .build()
    };
    let mut got = Vec::new();
    run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
    // The composer is generating: nothing is final yet.
    assert_eq!(got.len(), 0);
    // The bubble finished (a rewrite: a new rowid), the composer done.
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b2",
        &json!({"type": 2, "text": "hi so far", "tokenCount": {"inputTokens": 10, "outputTokens": 2}}),
    );
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "completed", "generatingBubbleIds": [],
                "modelConfig": {"modelName": "m1"}, "blobEncryptionKey": "SECRET-KEY"}),
    );
    let s = run()
        .backfill(&mut NdjsonFile::append(&out, &state))
        .unwrap();
    assert_eq!(s.written, 2);
    let text = fs::read_to_string(&out).unwrap();
    let recs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(&str, &str, &str)> = recs
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap(),
                r["text"].as_str().unwrap(),
                r["project"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("c1:b1", "hello", "/w x"), ("c1:b2", "hi so far", "/w x")]
    );
    assert_eq!(recs[1]["model"], "m1");
    assert_eq!((s.report.usage.input, s.report.usage.output), (10, 2));
    // No secret reached the output or the state.
    for f in [&out, &state] {
        let b = fs::read(f).unwrap();
        for secret in ["SECRET-TOKEN", "SECRET-TOO", "SECRET-KEY"] {
            assert!(
                !b.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{secret} in {}",
                f.display()
            );
        }
    }
    // Again: nothing.
    let s = run().backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!(s.written, 0);
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/cursor/make_fixture.py"]
fn the_fixture_store_gives_each_bubble_once_under_the_authorizer() {
    let d = tmpdir("fixture");
    let script = shared::samples().join("cursor/make_fixture.py");
    let o = Command::new("python3")
        .arg(&script)
        .arg(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let global = d.join(".config/Cursor/User/globalStorage");
    let mut got = Vec::new();
    let s = Archive::builder()
        .path(&global)
        .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
        .build()
        .backfill(&mut ForEach(|r| got.push(r)))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let rows: Vec<(Role, &str)> = got.iter().map(|r| (r.role, r.text.as_str())).collect();
    assert_eq!(
        rows,
        [
            (Role::User, "Why do bursts of 20 requests get 429s?"),
            (
                Role::Assistant,
                "The limiter config lives in src/limiter.ts.\n\nrun_terminal_cmd \
                 {\"command\": \"grep -n burst src/limiter.ts\", \"is_background\": false}"
            ),
            (Role::ToolResult, "14:  burst: 10,\n"),
            (
                Role::Assistant,
                "`burst` is hard-coded to 10 at src/limiter.ts:14."
            ),
            (Role::User, "Explain src/router.ts"),
            (
                Role::Assistant,
                "It registers cors() then json() middleware."
            ),
        ]
    );
    assert!(got.iter().all(|r| r.project == "/home/dev/src/ratelimit"));
    assert_eq!(got[1].kinds, ["thinking", "toolCall"]);
    assert_eq!(got[3].model.as_deref(), Some("claude-4.5-sonnet"));
    // The JSON null bubble: a counted skip.
    assert_eq!(s.report.skipped, 1);
    assert_eq!((s.report.usage.input, s.report.usage.output), (18_590, 422));
    fs::remove_dir_all(d).unwrap();
}

/// A bubble's key that is not UTF-8 (its text's bytes): a counted skip at
/// its rowid, the bubble after it read, not counted again by the next
/// run. (It failed the batch: nothing in or after it was ever read.)
#[test]
fn a_key_that_is_not_utf8_is_a_counted_skip_not_a_wall() {
    let d = tmpdir("bad-key");
    let (g, _w, c) = user_folder(&d);
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "completed", "generatingBubbleIds": []}),
    );
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b1",
        &json!({"type": 1, "text": "one"}),
    );
    c.execute(
        "INSERT INTO cursorDiskKV VALUES ('bubbleId:c1:' || CAST(x'ff' AS TEXT), '{}')",
        [],
    )
    .unwrap();
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b3",
        &json!({"type": 1, "text": "three"}),
    );
    let dir = g.parent().unwrap();
    let state = d.join("out.state");
    let run = || {
        Archive::builder()
            .path(dir)
            .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
            .state(&state)
            .build()
    };
    let mut got = Vec::new();
    let s = run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let texts: Vec<(&str, &str)> = got
        .iter()
        .map(|r| (r.key.as_str(), r.text.as_str()))
        .collect();
    assert_eq!(texts, [("c1:b1", "one"), ("c1:b3", "three")]);
    let skips: Vec<(u64, String)> = s
        .report
        .skips
        .iter()
        .map(|k| (k.line, k.reason.to_string()))
        .collect();
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert_eq!(skips[0].0, 3);
    assert!(skips[0].1.contains("key is not UTF-8 text"), "{skips:?}");
    let s = run().backfill(&mut ForEach(|r| panic!("{r:?}"))).unwrap();
    assert_eq!((s.written, s.report.skipped), (0, 1));
    fs::remove_dir_all(d).unwrap();
}

/// A bubble's tokenCount near u64::MAX: its total saturates rather than
/// overflows (an internal error).
#[test]
fn a_bubbles_token_sum_saturates() {
    let d = tmpdir("saturate");
    let (g, _w, c) = user_folder(&d);
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "completed", "generatingBubbleIds": []}),
    );
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b1",
        &json!({"type": 2, "text": "big", "tokenCount": {"inputTokens": u64::MAX, "outputTokens": 2}}),
    );
    let s = Archive::builder()
        .path(g.parent().unwrap())
        .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
        .build()
        .backfill(&mut ForEach(|_| {}))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    let u = &s.report.usage;
    assert_eq!((u.input, u.output, u.total_tokens), (u64::MAX, 2, u64::MAX));
    fs::remove_dir_all(d).unwrap();
}

/// A tool still running when its composer stops generating: the bubble
/// waits for the tool's final status, and its call and result are
/// emitted once, complete (the bubble was emitted with the tool loading,
/// and its rewrite with the result skipped as emitted: the result lost).
/// A tool that never finishes in a chat that ended in an error is emitted
/// as it stands.
#[test]
fn a_tool_finished_after_its_chat_stopped_generating_gives_its_result() {
    let d = tmpdir("tool-later");
    let (g, _w, c) = user_folder(&d);
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "completed", "generatingBubbleIds": []}),
    );
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b1",
        &json!({"type": 2, "text": "", "toolFormerData": {"name": "run_terminal_cmd",
                "rawArgs": "{}", "status": "loading", "toolCallId": "t1"}}),
    );
    let dir = g.parent().unwrap();
    let state = d.join("out.state");
    let run = || {
        Archive::builder()
            .path(dir)
            .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
            .state(&state)
            .build()
    };
    let mut got = Vec::new();
    run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(got.len(), 0, "{got:?}");
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b1",
        &json!({"type": 2, "text": "", "toolFormerData": {"name": "run_terminal_cmd",
                "rawArgs": "{}", "status": "completed", "result": "{\"output\":\"a b\"}",
                "toolCallId": "t1"}}),
    );
    run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
    let texts: Vec<(Role, &str, Option<&str>)> = got
        .iter()
        .map(|r| (r.role, r.text.as_str(), r.tool_call_id.as_deref()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::Assistant, "run_terminal_cmd {}", Some("t1")),
            (Role::ToolResult, "a b", Some("t1"))
        ]
    );
    // A tool left loading in a chat that ended in an error: emitted.
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b2",
        &json!({"type": 2, "text": "", "toolFormerData": {"name": "read_file",
                "rawArgs": "{}", "status": "loading", "toolCallId": "t2"}}),
    );
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "error", "generatingBubbleIds": []}),
    );
    got.clear();
    run().backfill(&mut ForEach(|r| got.push(r))).unwrap();
    let texts: Vec<(Role, Option<&str>)> = got
        .iter()
        .map(|r| (r.role, r.tool_call_id.as_deref()))
        .collect();
    assert_eq!(texts[0], (Role::Assistant, Some("t2")), "{got:?}");
    fs::remove_dir_all(d).unwrap();
}

/// The row at the mark rewritten (Cursor's REPLACE moves it to a new
/// rowid, as it does with a live composer's row at almost every write):
/// the next open reads on after the mark, not again from the start (it
/// rescanned the whole table at almost every run). A largest rowid
/// below the mark, or another key at it, still rescans.
#[test]
fn a_rewrite_of_the_row_at_the_mark_reads_on_after_it() {
    use mem_ingest_parse::rows::{self, Cursor as Rc, MapRows};
    let d = tmpdir("rewrite-at-mark");
    let (g, _w, c) = user_folder(&d);
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b1",
        &json!({"type": 1, "text": "hello"}),
    );
    let composer = json!({"composerId": "c1", "status": "completed"});
    put(&c, "cursorDiskKV", "composerData:c1", &composer);
    let opts = mem_ingest_parse::SourceOptions::new();
    let mut src = rows::open(&CursorIde, &g, None, &opts);
    while src.next_entry().unwrap().is_some() {}
    let ctx = src.running_context();
    drop(src);
    let cursor = Rc::decode(&ctx).unwrap();
    assert_eq!(cursor.marks.get("cursorDiskKV"), Some(&2));
    let mark_after_open = |cur: &Rc| {
        let mut cur = cur.clone();
        drop(MapRows::open(&CursorIde, &g, &mut cur).unwrap());
        cur.marks.get("cursorDiskKV").copied()
    };
    // The composer's row rewritten: rowid 2 gone, the key at 3.
    put(&c, "cursorDiskKV", "composerData:c1", &composer);
    assert_eq!(
        mark_after_open(&cursor),
        Some(2),
        "rescanned from the start"
    );
    // Another key at the mark: a rescan.
    c.execute(
        "INSERT INTO cursorDiskKV (rowid, key, value) VALUES (2, 'bubbleId:c1:b9', '{}')",
        [],
    )
    .unwrap();
    assert_eq!(mark_after_open(&cursor), None);
    // The largest rowid below the mark: a rescan.
    c.execute("DELETE FROM cursorDiskKV WHERE rowid >= 2", [])
        .unwrap();
    assert_eq!(mark_after_open(&cursor), None);
    fs::remove_dir_all(d).unwrap();
}

/// A composer of the older shape whose inline `conversation` holds a
/// bubble id twice (a rewrite left both): the bubble is one record, and
/// `stats`' counts (records, roles, usage) are those of the records
/// written, the repeat counted nowhere.
#[test]
fn an_inline_bubble_repeated_is_one_record_counted_once() {
    let d = tmpdir("inline-repeat");
    let (g, _w, c) = user_folder(&d);
    let answer = |text: &str| {
        json!({"bubbleId": "b2", "type": 2, "text": text,
               "tokenCount": {"inputTokens": 10, "outputTokens": 2}})
    };
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "completed", "generatingBubbleIds": [],
        "conversation": [
            {"bubbleId": "b1", "type": 1, "text": "hello"},
            answer("hi"),
            answer("hi again"),
        ]}),
    );
    let mut got = Vec::new();
    let s = Archive::builder()
        .path(g.parent().unwrap())
        .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
        .build()
        .backfill(&mut ForEach(|r: mem_ingest::OwnedRecord| {
            got.push((r.key, r.text))
        }))
        .unwrap();
    assert!(s.failures.is_empty(), "{:?}", s.failures);
    assert_eq!(
        got,
        [
            ("c1:b1".to_owned(), "hello".to_owned()),
            ("c1:b2".to_owned(), "hi".to_owned())
        ]
    );
    assert_eq!((s.written, s.report.records), (2, 2));
    assert_eq!(
        (
            s.report.roles[Role::User.index()],
            s.report.roles[Role::Assistant.index()]
        ),
        (1, 1)
    );
    let u = &s.report.usage;
    assert_eq!((u.input, u.output, u.total_tokens), (10, 2, 12));
    fs::remove_dir_all(d).unwrap();
}

/// A store whose bubbles run past a part (8 MiB of values) is handed over
/// in parts as it is read: the usage rows (`usage`'s, `--usage-out`'s)
/// are those of every part and sum to the stats' usage. (The rows of the
/// batches read after the first part's end were lost, as OpenCode's.)
#[test]
fn a_store_read_in_parts_keeps_the_usage_rows_of_every_part() {
    let d = tmpdir("parts");
    let (g, _w, c) = user_folder(&d);
    put(
        &c,
        "cursorDiskKV",
        "composerData:c1",
        &json!({"composerId": "c1", "status": "completed", "generatingBubbleIds": [],
                "modelConfig": {"modelName": "m1"}}),
    );
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:a",
        &json!({"type": 1, "text": "hello"}),
    );
    // The part ends at this bubble, in the first batch.
    let big = "x".repeat(mem_ingest::archive::PART_BYTES as usize);
    put(
        &c,
        "cursorDiskKV",
        "bubbleId:c1:b",
        &json!({"type": 1, "text": big}),
    );
    // Answers over three batches more: 1 + 2 + ... + 600 input tokens.
    c.execute_batch("BEGIN").unwrap();
    for i in 1..=600u64 {
        put(
            &c,
            "cursorDiskKV",
            &format!("bubbleId:c1:r{i:03}"),
            &json!({"type": 2, "text": format!("answer {i}"),
                    "tokenCount": {"inputTokens": i, "outputTokens": 1}}),
        );
    }
    c.execute_batch("COMMIT").unwrap();
    let dir = g.parent().unwrap();
    let archive = || {
        Archive::builder()
            .path(dir)
            .formats(vec![Arc::new(CursorIde) as Arc<dyn Format>])
            .build()
    };
    let stats = archive().stats().unwrap();
    assert!(stats.failures.is_empty(), "{:?}", stats.failures);
    assert_eq!(
        (stats.report.usage.input, stats.report.usage.output),
        (180_300, 600)
    );
    let usage = archive().usage().unwrap();
    let rows = &usage.usage;
    let input: u64 = rows.iter().map(|u| u.usage.input).sum();
    assert_eq!((rows.len(), input), (600, 180_300));
    let (out, u) = (d.join("out.ndjson"), d.join("usage.ndjson"));
    let s = archive()
        .backfill(&mut NdjsonFile::create(&out).usage_out(&u))
        .unwrap();
    assert_eq!(s.written, 602);
    let text = fs::read_to_string(&u).unwrap();
    let input: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["input"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!((input.len(), input.iter().sum::<u64>()), (600, 180_300));
    fs::remove_dir_all(d).unwrap();
}
