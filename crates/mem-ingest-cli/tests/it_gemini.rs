//! Gemini CLI's JSONL chat recordings: the mapping of `docs/gemini-cli.md`
//! on lines written here (re-appended messages, `$set` checkpoints,
//! `$rewindTo`), messages held until final, the project recovered,
//! hash and slug copies, detection, discovery, hostile lines and
//! incremental runs through the command line; the samples of
//! `../shared/samples/gemini-cli` (ignored in a plain clone).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use mem_ingest::format::{Format, Input};
use mem_ingest::formats::Gemini;
use mem_ingest::{OwnedRecord, Report, Role, SourceOptions};
use serde_json::{json, Value};

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use common::entries::{rec, rows, samples, Entries};

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("gemini", name)
}

const SID: &str = "3c1d2f4e-aaaa-4bbb-8ccc-0123456789ab";
const PROJECT: &str = "/home/me/app";

fn sha256(s: &str) -> String {
    mem_ingest::formats::gemini::sha256_hex(s)
}

fn msg(id: &str, ts: &str, ty: &str, more: Value) -> String {
    let mut v = json!({"id": id, "timestamp": format!("2026-09-01T10:00:{ts}.000Z"), "type": ty});
    for (k, x) in more.as_object().unwrap() {
        v[k] = x.clone();
    }
    v.to_string()
}

fn tokens(input: u64, output: u64, cached: u64, thoughts: u64, tool: u64, total: u64) -> Value {
    json!({"input": input, "output": output, "cached": cached, "thoughts": thoughts,
           "tool": tool, "total": total})
}

/// A session written as Gemini CLI writes one (line numbers in comments).
fn session_lines() -> Vec<String> {
    let g1 = |more: Value| {
        let mut base = json!({
            "content": "Reading it.", "model": "gemini-2.5-pro",
            "thoughts": [{"subject": "Plan", "description": "Read the file first",
                          "timestamp": "2026-09-01T10:00:02.500Z"}],
            "tokens": tokens(1000, 50, 600, 20, 0, 1070)});
        for (k, x) in more.as_object().unwrap() {
            base[k] = x.clone();
        }
        msg("g1", "02", "gemini", base)
    };
    let call = json!([{"id": "c1", "name": "read_file", "args": {"path": "src/p.rs"},
                       "status": "success", "timestamp": "2026-09-01T10:00:03.000Z",
                       "result": [{"functionResponse": {"id": "c1", "name": "read_file",
                                   "response": {"output": "fn main() {}"}}}]}]);
    vec![
        // 1
        json!({"sessionId": SID, "projectHash": sha256(PROJECT),
               "startTime": "2026-09-01T10:00:00.000Z",
               "lastUpdated": "2026-09-01T10:00:00.000Z", "kind": "main"})
        .to_string(),
        // 2
        msg(
            "u1",
            "01",
            "user",
            json!({"content": [{"text": "Fix the parser"}]}),
        ),
        // 3
        json!({"$set": {"lastUpdated": "2026-09-01T10:00:01.000Z"}}).to_string(),
        // 4: recorded before its usage
        msg(
            "g1",
            "02",
            "gemini",
            json!({"content": "", "model": "gemini-2.5-pro", "tokens": null}),
        ),
        // 5: its usage
        g1(json!({})),
        // 6: its tool call
        g1(json!({"toolCalls": call})),
        // 7: the tool's response
        msg(
            "t1",
            "04",
            "user",
            json!({"content": [{"functionResponse": {"id": "c1", "name": "read_file",
                               "response": {"output": "fn main() {}"}}}]}),
        ),
        // 8
        msg(
            "g2",
            "05",
            "gemini",
            json!({"content": "Done.", "model": "gemini-2.5-pro",
                   "tokens": tokens(1200, 10, 0, 0, 5, 1215)}),
        ),
        // 9
        msg(
            "i1",
            "06",
            "info",
            json!({"content": "Compressing chat history"}),
        ),
        // 10: a checkpoint with a synthetic summary and the info message
        json!({"$set": {"messages": [
            {"id": "s1", "timestamp": "2026-09-01T10:00:07.000Z", "type": "user",
             "content": [{"text": "Summary of the earlier chat"}]},
            {"id": "i1", "timestamp": "2026-09-01T10:00:06.000Z", "type": "info",
             "content": "Compressing chat history"}],
            "lastUpdated": "2026-09-01T10:00:07.000Z"}})
        .to_string(),
        // 11
        msg(
            "u2",
            "08",
            "user",
            json!({"content": [{"text": "Now the tests"}]}),
        ),
        // 12
        msg(
            "g3",
            "09",
            "gemini",
            json!({"content": "Writing tests", "model": "gemini-2.5-flash",
                   "tokens": tokens(300, 7, 100, 0, 0, 307)}),
        ),
        // 13: the user rewinds to before u2
        json!({"$rewindTo": "u2"}).to_string(),
        // 14
        msg(
            "u3",
            "10",
            "user",
            json!({"content": [{"text": "Try again"}]}),
        ),
        // 15: a late copy of g1 (its tool call's status again)
        g1(json!({"toolCalls": call})),
        // 16
        msg(
            "g4",
            "11",
            "gemini",
            json!({"content": [{"text": "Second try"}], "model": "gemini-2.5-flash",
                   "tokens": tokens(400, 9, 0, 1, 0, 410)}),
        ),
    ]
}

/// Sets a file's modification time `secs` seconds in the past.
fn age(path: &Path, secs: u64) {
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs))
        .unwrap();
}

/// `tmp/<dir>/chats/session-...jsonl` under `gemini` (a `.gemini` folder).
fn write_session(gemini: &Path, dir: &str, lines: &[String]) -> PathBuf {
    let chats = gemini.join("tmp").join(dir).join("chats");
    fs::create_dir_all(&chats).unwrap();
    let p = chats.join(format!("session-2026-09-01T10-00-{}.jsonl", &SID[..8]));
    fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// The entries with a record of a file, with the report and the running
/// context at its end, and the revisions (late copies of messages handed
/// out before); the entries without one (every line's) are as many as the
/// report's `no_record`, and a read of records alone gives the same,
/// without the revisions.
fn read(path: &Path) -> (Entries, Report, Vec<u8>, Entries) {
    let opts = SourceOptions::new();
    let input = Input::Reader(Box::new(fs::File::open(path).unwrap()));
    let mut src = Gemini.open(input, path, &opts).unwrap();
    let mut out = Vec::new();
    let mut revisions = Vec::new();
    let mut lines = 0;
    while let Some(e) = src.next_entry().unwrap() {
        let revision = e.revision;
        match e.record {
            Some(r) if revision => revisions.push((r.line, Some(r.to_owned_record()))),
            // The record's line: its last copy's.
            Some(r) => out.push((r.line, Some(r.to_owned_record()))),
            None => lines += 1,
        }
    }
    let ctx = src.running_context();
    let report = src.take_report();
    assert_eq!(lines, report.no_record);
    let bytes = fs::read(path).unwrap();
    let mut src = Gemini.open(Input::Bytes(&bytes), path, &opts).unwrap();
    let mut records = Vec::new();
    while let Some(r) = src.next_record().unwrap() {
        records.push(Some(r.to_owned_record()));
    }
    assert_eq!(
        records,
        out.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>()
    );
    assert_eq!(src.report(), &report);
    (out, report, ctx, revisions)
}

fn record<'e>(entries: &'e Entries, id: &str) -> &'e OwnedRecord {
    entries
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .find(|r| r.id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no record {id}"))
}

#[test]
fn every_message_once_with_its_last_copy() {
    let dir = tmpdir("shapes");
    let p = write_session(&dir.join(".gemini"), "app", &session_lines());
    fs::write(dir.join(".gemini/tmp/app/.project_root"), PROJECT).unwrap();
    age(&p, 60);
    let (entries, report, _, revisions) = read(&p);
    // Line 15, a late copy of g1 (handed out at line 6): a revision of its
    // record, with the late copy's content, counted in no report.
    let (role, entry, kinds) = rec(Role::Assistant, "gemini", &["thought", "text", "toolCall"]);
    assert_eq!(rows(&revisions), [(15, role, entry, kinds)]);
    assert_eq!(revisions[0].1.as_ref().unwrap().key, format!("{SID}:g1"));
    use Role::*;
    assert_eq!(
        rows(&entries),
        vec![
            (2, rec(User, "user", &["text"])),
            (
                6,
                rec(Assistant, "gemini", &["thought", "text", "toolCall"])
            ),
            (7, rec(ToolResult, "user", &["text"])),
            (8, rec(Assistant, "gemini", &["text"])),
            (10, rec(User, "user", &["text", "checkpoint"])),
            (10, rec(System, "info", &["text"])),
            (11, rec(User, "user", &["text"])),
            (12, rec(Assistant, "gemini", &["text", "rewound"])),
            (14, rec(User, "user", &["text"])),
            (16, rec(Assistant, "gemini", &["text"])),
        ]
        .into_iter()
        .map(|(l, (r, e, k))| (l, r, e, k))
        .collect::<Vec<_>>()
    );
    let texts: Vec<&str> = entries
        .iter()
        .map(|(_, r)| r.as_ref().unwrap().text.as_str())
        .collect();
    assert_eq!(
        texts,
        [
            "Fix the parser",
            "Plan: Read the file first\nReading it.\nread_file {\"path\":\"src/p.rs\"}",
            "fn main() {}",
            "Done.",
            "Summary of the earlier chat",
            "Compressing chat history",
            "Now the tests",
            "Writing tests",
            "Try again",
            "Second try",
        ]
    );
    let g1 = record(&entries, "g1");
    assert_eq!(g1.key, format!("{SID}:g1"));
    assert_eq!((g1.session.as_str(), g1.project.as_str()), (SID, PROJECT));
    assert_eq!(
        g1.source,
        format!("gemini:session-2026-09-01T10-00-{}", &SID[..8])
    );
    assert_eq!(g1.model.as_deref(), Some("gemini-2.5-pro"));
    assert_eq!(
        (g1.tool_name.as_deref(), g1.tool_call_id.as_deref()),
        (Some("read_file"), Some("c1"))
    );
    let u = g1.usage.unwrap();
    assert_eq!(
        (u.input, u.cache_read, u.output, u.total_tokens),
        (400, 600, 50, 1070)
    );
    let t1 = record(&entries, "t1");
    assert_eq!(
        (t1.tool_name.as_deref(), t1.tool_call_id.as_deref()),
        (Some("read_file"), Some("c1"))
    );
    // tool tokens are input; cached 0: all input.
    let u = record(&entries, "g2").usage.unwrap();
    assert_eq!(
        (u.input, u.cache_read, u.output, u.total_tokens),
        (1205, 0, 10, 1215)
    );
    let u = record(&entries, "g3").usage.unwrap();
    assert_eq!(
        (u.input, u.cache_read, u.output, u.total_tokens),
        (200, 100, 7, 307)
    );
    assert_eq!(record(&entries, "u1").timestamp, Some(1_788_256_801_000));
    // The report: lines by shape, records by role, usage once per message.
    assert_eq!(report.lines, 16);
    assert_eq!(report.records, 10);
    assert_eq!(report.no_record, 16);
    assert_eq!(report.skipped, 0);
    let e = |k: &str| report.entries.get(k);
    assert_eq!(
        (e("metadata"), e("message"), e("$set"), e("$rewindTo")),
        (1, 12, 2, 1)
    );
    assert_eq!(
        (
            report.roles[Role::User.index()],
            report.roles[Role::Assistant.index()],
            report.roles[Role::ToolResult.index()],
            report.roles[Role::System.index()]
        ),
        (4, 4, 1, 1)
    );
    assert_eq!(
        (
            report.usage.input,
            report.usage.cache_read,
            report.usage.output,
            report.usage.total_tokens
        ),
        (2205, 700, 76, 3002)
    );
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_message_written_last_waits_until_the_file_is_still() {
    let dir = tmpdir("held");
    let p = write_session(&dir.join(".gemini"), "app", &session_lines());
    // Just written: g4 may still be re-appended.
    let (entries, report, ctx, _) = read(&p);
    assert_eq!(entries.len(), 9);
    assert_eq!(
        entries.last().unwrap().1.as_ref().unwrap().id.as_deref(),
        Some("u3")
    );
    assert_eq!(report.records, 9);
    assert_eq!(report.usage.total_tokens, 3002 - 410);
    assert!(Gemini.holds_back(&ctx));
    // The context keeps where the held copy is, not its text (a checkpoint
    // is not redacted).
    assert!(memchr::memmem::find(&ctx, b"Second try").is_none());
    // Still: a read from the end with that context hands it out alone.
    age(&p, 60);
    let size = fs::metadata(&p).unwrap().len();
    let header = mem_ingest::format::open_at(
        &Gemini,
        Input::Bytes(&fs::read(&p).unwrap()),
        &p,
        mem_ingest::format::At {
            header: None,
            context: &[],
            byte: 0,
            lines_before: 0,
        },
        &SourceOptions::new(),
    )
    .unwrap()
    .header()
    .cloned()
    .unwrap();
    let opts = SourceOptions::new();
    let mut src = Gemini.resume(Input::Bytes(&[]), &p, &header, &ctx, size, 16, &opts);
    let e = src.next_entry().unwrap().unwrap();
    let r = e.record.unwrap();
    assert_eq!(
        (e.line, r.line, r.key),
        (16, 16, format!("{SID}:g4").as_str())
    );
    assert_eq!(r.usage.unwrap().total_tokens, 410);
    assert!(src.next_entry().unwrap().is_none());
    assert!(!Gemini.holds_back(&src.running_context()));
    // The project: unknown without .project_root or projects.json.
    assert_eq!(header.cwd, "");
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_project_is_recovered_never_decoded() {
    let dir = tmpdir("project");
    let gemini = dir.join(".gemini");
    let lines = &session_lines()[..2];
    let cwd = |p: &Path| {
        age(p, 60);
        let (entries, ..) = read(p);
        entries[0].1.as_ref().unwrap().project.clone()
    };
    // .project_root in the slug folder.
    let p = write_session(&gemini, "app", lines);
    fs::write(gemini.join("tmp/app/.project_root"), "/home/me/app\n").unwrap();
    assert_eq!(cwd(&p), PROJECT);
    // projects.json's slug.
    let p = write_session(&gemini, "web-1", lines);
    fs::write(
        gemini.join("projects.json"),
        json!({"projects": {"/home/me/web": "web-1", PROJECT: "app"}}).to_string(),
    )
    .unwrap();
    assert_eq!(cwd(&p), "/home/me/web");
    // A hash folder: a path of projects.json whose SHA-256 it is.
    let p = write_session(&gemini, &sha256(PROJECT), lines);
    assert_eq!(cwd(&p), PROJECT);
    // The projectHash of a known path, in a folder of no known path.
    let p = write_session(&gemini, "not-registered", lines);
    assert_eq!(cwd(&p), PROJECT);
    // A hash of no known path, a slug nobody registered, a projectHash of
    // no known path: unknown, never the folder's name.
    let other = [
        lines[0].replace(&sha256(PROJECT), &sha256("/elsewhere")),
        lines[1].clone(),
    ];
    let p = write_session(&gemini, &sha256("/elsewhere"), &other);
    assert_eq!(cwd(&p), "");
    let p = write_session(&gemini, "home-me-other", &other);
    assert_eq!(cwd(&p), "");
    // A trusted folder's hash.
    fs::write(
        gemini.join("trustedFolders.json"),
        json!({"/elsewhere": "TRUST_FOLDER"}).to_string(),
    )
    .unwrap();
    let p = write_session(&gemini, &sha256("/elsewhere"), &other);
    assert_eq!(cwd(&p), "/elsewhere");
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn detection_and_file_names() {
    let detect = |text: &str| Gemini.detect(text.as_bytes(), true);
    assert!(detect(&(session_lines()[..2].join("\n") + "\n")));
    assert!(detect("{\"$set\":{\"messages\":[]}}\n"));
    assert!(detect(
        "{\"sessionId\":\"s\",\"startTime\":\"2026-01-01T00:00:00Z\"}\n"
    ));
    // Claude Code's and Qwen Code's lines have a type.
    assert!(!detect(
        "{\"type\":\"user\",\"sessionId\":\"s\",\"timestamp\":\"2026-01-01T00:00:00Z\"}\n"
    ));
    assert!(!detect("{\"id\":\"x\",\"type\":\"session\"}\n"));
    let named = |p: &str| Gemini.is_session_file(Path::new(p));
    assert!(named(
        "/h/.gemini/tmp/app/chats/session-2026-09-01T10-00-3c1d2f4e.jsonl"
    ));
    assert!(named("/h/.gemini/tmp/app/chats/3c1d2f4e-aaaa/9f00.jsonl"));
    // The legacy `.json` sessions (issue 45, documents).
    assert!(named(
        "/h/.gemini/tmp/app/chats/session-2026-09-01T10-00-3c1d2f4e.json"
    ));
    assert!(named("/h/.gemini/tmp/app/chats/3c1d2f4e-aaaa/9f00.json"));
    assert!(!named("/h/.gemini/tmp/app/chats/other.json"));
    assert!(!named("/h/.gemini/tmp/app/logs.json"));
    assert!(!named("/h/.gemini/tmp/app/chats/other.jsonl"));
    assert!(!named("/h/.gemini/tmp/app/chats/session-x.jsonl.tmp-12"));
    assert!(!named("/h/src/package.jsonl"));
    // A file named as a PATH is Gemini's by its content.
    let dir = tmpdir("detect");
    let p = dir.join("x.jsonl");
    fs::write(&p, session_lines().join("\n") + "\n").unwrap();
    let formats = mem_ingest::formats::builtin();
    let i = mem_ingest::format::detect_format(&formats, &p);
    assert_eq!(formats[i].name(), "gemini");
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn hostile_lines_are_counted_located_skips() {
    let dir = tmpdir("hostile");
    let mut lines = session_lines()[..3].to_vec();
    lines.push("{\"id\":\"broken\",\"type\":\"gem".into()); // 4: cut
    lines.push("\0\0\0\0".into()); // 5: NUL run
    lines.push("[1,2]".into()); // 6: not an object
    lines.push("{\"nothing\":true}".into()); // 7: no shape
    lines.push(format!("{}{}", session_lines()[1], session_lines()[1])); // 8: glued
    lines.push(msg("u9", "20", "user", json!({"content": "a\u{2028}b"}))); // 9
    let p = write_session(&dir.join(".gemini"), "app", &lines);
    let mut bytes = fs::read(&p).unwrap();
    bytes.extend_from_slice(b"{\"id\":\"bad\",\"type\":\"user\",\"content\":\"\xff\"}\n"); // 10
    fs::write(&p, &bytes).unwrap();
    age(&p, 60);
    let (entries, report, ..) = read(&p);
    let ids: Vec<(u64, &str)> = entries
        .iter()
        .map(|(l, r)| (*l, r.as_ref().unwrap().id.as_deref().unwrap()))
        .collect();
    assert_eq!(ids, [(2, "u1"), (9, "u9"), (10, "bad")]);
    assert_eq!(record(&entries, "u9").text, "a\u{2028}b");
    assert_eq!(record(&entries, "bad").text, "\u{fffd}");
    assert!(record(&entries, "bad").repaired);
    let skipped: Vec<u64> = report.skips.iter().map(|s| s.line).collect();
    assert_eq!(skipped, [4, 5, 6, 7, 8]);
    assert_eq!((report.skipped, report.repaired, report.records), (5, 1, 3));
    fs::remove_dir_all(dir).unwrap();
}

#[test]
#[ignore = "needs ../shared: samples/gemini-cli"]
fn deja_vu_samples() {
    let base = samples().join("gemini-cli/deja-vu/fixtures/registry/gemini");
    let (entries, report, ..) = read(&base.join("session-set-snapshot.jsonl"));
    let got: Vec<(u64, Role, &str, Vec<String>)> = entries
        .iter()
        .map(|(l, r)| {
            let r = r.as_ref().unwrap();
            (*l, r.role, r.text.as_str(), r.kinds.clone())
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                2,
                Role::User,
                "gemini set-snapshot conformance question",
                vec!["text".to_owned(), "checkpoint".to_owned()]
            ),
            (
                2,
                Role::Assistant,
                "gemini set-snapshot conformance answer",
                vec!["text".to_owned(), "checkpoint".to_owned()]
            ),
        ]
    );
    assert_eq!(
        record(&entries, "m2").model.as_deref(),
        Some("gemini-2.5-pro")
    );
    assert_eq!(record(&entries, "m1").session, "reg-gem-set-001");
    assert_eq!((report.records, report.usage.total_tokens), (2, 0));
    let (entries, report, ..) = read(&base.join("session.jsonl"));
    let got: Vec<(u64, Role, &str)> = entries
        .iter()
        .map(|(l, r)| {
            let r = r.as_ref().unwrap();
            (*l, r.role, r.text.as_str())
        })
        .collect();
    assert_eq!(
        got,
        [
            (2, Role::User, "inspect the gemini session"),
            (3, Role::Assistant, "the session is readable"),
        ]
    );
    assert_eq!(
        record(&entries, "message-user").key,
        "registry-gemini:message-user"
    );
    assert_eq!((report.lines, report.skipped), (3, 0));
}

// ---------------------------------------------------------------------------
// The command line

fn bin(home: &Path) -> std::process::Command {
    let mut c = common::cli();
    c.env("HOME", home);
    c
}

fn ndjson(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn keys(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

fn all_keys() -> Vec<String> {
    ["u1", "g1", "t1", "g2", "s1", "i1", "u2", "g3", "u3", "g4"]
        .iter()
        .map(|k| format!("{SID}:{k}"))
        .collect()
}

#[test]
fn hash_and_slug_copies_give_each_message_once() {
    let home = tmpdir("copies");
    let gemini = home.join(".gemini");
    let a = write_session(&gemini, "app", &session_lines());
    let b = write_session(&gemini, &sha256(PROJECT), &session_lines());
    fs::write(gemini.join("tmp/app/.project_root"), PROJECT).unwrap();
    fs::write(
        gemini.join("projects.json"),
        json!({"projects": {PROJECT: "app"}}).to_string(),
    )
    .unwrap();
    // Not sessions: the walk leaves logs.json; a legacy session's name
    // holding no session is read, one counted skip.
    fs::write(gemini.join("tmp/app/logs.json"), "[]").unwrap();
    fs::write(a.with_extension("json"), "{}").unwrap();
    age(&a, 60);
    age(&b, 60);
    let out = bin(&home).args(["backfill", "-q"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = ndjson(&out.stdout);
    assert_eq!(keys(&recs), all_keys());
    assert!(recs.iter().all(|r| r["project"] == PROJECT));
    let out = bin(&home)
        .args(["stats", "--json", "-q", "--agent", "gemini"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&v["files"], &v["skipped"]), (&json!(3), &json!(1)));
    assert_eq!(v["records"], 10);
    assert_eq!(v["usage"]["total_tokens"], 3002);
    assert_eq!(v["usage"]["input"], 2205);
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn discovery_by_gemini_cli_home_and_gemini_data_dir() {
    let home = tmpdir("discovery");
    let lines = session_lines();
    let a = write_session(&home.join("cli-home/.gemini"), "app", &lines[..2]);
    let b = write_session(&home.join("data/.gemini"), "web", &lines[..2]);
    age(&a, 60);
    age(&b, 60);
    let run = |vars: &[(&str, PathBuf)]| {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "gemini"]);
        for (k, v) in vars {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        (
            o.status.code(),
            ndjson(&o.stdout),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, recs, _) = run(&[("GEMINI_CLI_HOME", home.join("cli-home"))]);
    assert_eq!((code, recs.len()), (Some(0), 1));
    let (code, recs, _) = run(&[("GEMINI_DATA_DIR", home.join("data/.gemini/tmp/web/chats"))]);
    assert_eq!((code, recs.len()), (Some(0), 1));
    // Both: each once (they are one session: the same message once).
    let (code, recs, _) = run(&[
        ("GEMINI_CLI_HOME", home.join("cli-home")),
        ("GEMINI_DATA_DIR", home.join("data")),
    ]);
    assert_eq!((code, recs.len()), (Some(0), 1));
    let (code, _, err) = run(&[]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            "no Gemini CLI archive: no folder at {}/.gemini/tmp",
            home.display()
        )),
        "{err}"
    );
    fs::remove_dir_all(home).unwrap();
}

/// A later copy of a message emitted in an earlier run (Gemini CLI writes
/// a message again after the next one): the store's row updated by key,
/// its row id kept; NDJSON and Parquet count it and write nothing; its
/// tokens are not counted again.
#[test]
fn a_late_copy_updates_the_stores_row_and_is_counted_by_ndjson_and_parquet() {
    let home = tmpdir("late-copy");
    let gemini = home.join(".gemini");
    let lines = session_lines();
    // Lines 1 to 8: u1, g1, t1, g2 final (g2 held until still).
    let path = write_session(&gemini, "app", &lines[..8]);
    age(&path, 60);
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
        assert!(err.contains(" records (4 written), "), "{err}");
    }
    let row = || -> (i64, String, i64) {
        rusqlite::Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT row_id, text, usage_output FROM records WHERE key = ?1",
                [format!("{SID}:g1")],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    };
    let before = row();
    assert_eq!(
        before.1,
        "Plan: Read the file first\nReading it.\nread_file {\"path\":\"src/p.rs\"}"
    );
    // g1 written again, its text and tokens changed, then a message after
    // it (g1's copy is final at once: g1 was handed out).
    let late = {
        let mut v: Value = serde_json::from_str(&lines[5]).unwrap();
        v["content"] = json!("Read it twice.");
        v["tokens"] = tokens(1000, 70, 600, 20, 0, 1090);
        v.to_string()
    };
    common::append(&path, &(late + "\n"));
    age(&path, 60);
    for err in all_runs() {
        assert!(err.contains(" records (0 written, 1 updated), "), "{err}");
    }
    let out_text = fs::read_to_string(&out).unwrap();
    assert_eq!(out_text.lines().count(), 4, "NDJSON writes no record twice");
    assert!(!out_text.contains("Read it twice."));
    let after = row();
    assert_eq!(
        after,
        (
            before.0,
            "Plan: Read the file first\nRead it twice.\nread_file {\"path\":\"src/p.rs\"}"
                .to_owned(),
            70
        ),
        "the row updated by key, its row id kept"
    );
    let count: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 4);
    // Parquet: no part for it.
    let mut rows = 0;
    let mut stack = vec![ds.join("records")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    fs::File::open(&p).unwrap(),
                )
                .unwrap()
                .build()
                .unwrap();
                rows += r.map(|b| b.unwrap().num_rows()).sum::<usize>();
            }
        }
    }
    assert_eq!(rows, 4);
    // Its tokens are counted once, with the copy that was final.
    let stats = bin(&home)
        .args(["stats", "--agent", "gemini", "--json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(v["usage"]["output"], 50 + 10, "{v}");
    fs::remove_dir_all(home).unwrap();
}

#[test]
fn incremental_runs_emit_each_message_once_when_final() {
    let home = tmpdir("incremental");
    let gemini = home.join(".gemini");
    let lines = session_lines();
    let path = write_session(&gemini, "app", &lines[..8]);
    age(&path, 60);
    let state = home.join("state");
    let out = home.join("out.ndjson");
    let db = home.join("memory.db");
    let ds = home.join("ds");
    let pstate = home.join("pstate");
    let run = |extra: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = bin(&home);
        c.args(["backfill", "-q", "--agent", "gemini"]);
        for a in extra {
            c.arg(a);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let all_runs = || {
        run(&[&"--state", &state, &"-o", &out]);
        run(&[&"--db", &db]);
        run(&[&"--parquet", &ds, &"--state", &pstate]);
    };
    all_runs();
    let first = ndjson(&fs::read(&out).unwrap());
    assert_eq!(keys(&first), all_keys()[..4]);
    // The rest, just written: every message but the last is final.
    common::append(&path, &(lines[8..].join("\n") + "\n"));
    let written = SystemTime::now();
    all_runs();
    let second = ndjson(&fs::read(&out).unwrap());
    assert_eq!(keys(&second), all_keys()[..9]);
    // Unchanged, and still now: the last one, once.
    let wait = Duration::from_millis(5200).saturating_sub(written.elapsed().unwrap());
    std::thread::sleep(wait);
    all_runs();
    all_runs();
    let all = ndjson(&fs::read(&out).unwrap());
    assert_eq!(keys(&all), all_keys());
    assert_eq!(all[9]["line"], 16);
    // A fresh run gives the same records.
    let fresh = bin(&home)
        .args(["backfill", "-q", "--agent", "gemini"])
        .output()
        .unwrap();
    assert_eq!(ndjson(&fresh.stdout), all);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (n, fmt): (i64, String) = conn
        .query_row("select count(*), min(format) from records", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((n, fmt.as_str()), (10, "gemini"));
    let mut rows = 0;
    let mut stack = vec![ds.join("records")];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                assert!(
                    p.to_string_lossy().contains("format=gemini/"),
                    "{}",
                    p.display()
                );
                let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    fs::File::open(&p).unwrap(),
                )
                .unwrap()
                .build()
                .unwrap();
                rows += r.map(|b| b.unwrap().num_rows()).sum::<usize>();
            }
        }
    }
    assert_eq!(rows, 10);
    fs::remove_dir_all(home).unwrap();
}

/// `--follow`: a message goes out within a second of the next message's
/// line; the message written last once its file has been still for 5
/// seconds (the passes reopen the file until then).
#[test]
fn follow_emits_a_message_when_final() {
    use std::process::Stdio;
    use std::time::Instant;
    let home = tmpdir("follow");
    let lines = session_lines();
    let path = write_session(&home.join(".gemini"), "app", &lines[..2]);
    let (state, out) = (home.join("state"), home.join("out.ndjson"));
    let mut child = bin(&home)
        .args(["backfill", "-q", "--follow", "--agent", "gemini", "--state"])
        .arg(&state)
        .arg("-o")
        .arg(&out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait_for = |n: usize| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(15) {
            if fs::read(&out).map(|b| ndjson(&b).len()).unwrap_or(0) >= n {
                return t.elapsed();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no {n} records after 15 s");
    };
    // u1, written last, is held; the next message's line makes it final.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(fs::read(&out).map(|b| ndjson(&b).len()).unwrap_or(0), 0);
    common::append(&path, &format!("{}\n", lines[3]));
    let latency = wait_for(1);
    assert!(latency < Duration::from_secs(1), "latency {latency:?}");
    // g1 once the file is still.
    let waited = wait_for(2);
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(8),
        "waited {waited:?}"
    );
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let recs = ndjson(&fs::read(&out).unwrap());
    assert_eq!(keys(&recs), [format!("{SID}:u1"), format!("{SID}:g1")]);
    assert_eq!(recs[1]["line"], 3);
    fs::remove_dir_all(home).unwrap();
}

/// A run killed (-9) at any moment, then run again, gives every record
/// exactly once, with `--state` and with `--db`: the messages held in a
/// file's running context go with its checkpoint.
#[test]
fn killed_at_any_moment_every_record_exactly_once() {
    use std::process::Stdio;
    use std::time::Instant;
    let d = tmpdir("kill");
    let gemini = d.join(".gemini");
    for f in 0..30 {
        let sid = format!("{f:08x}-0000-4000-8000-000000000000");
        let chats = gemini.join(format!("tmp/p{f}/chats"));
        fs::create_dir_all(&chats).unwrap();
        let mut text = json!({"sessionId": sid, "projectHash": "h",
                              "startTime": "2026-09-01T10:00:00.000Z"})
        .to_string()
            + "\n";
        for m in 0..400 {
            let ts = format!("{:02}", m % 60);
            text += &(msg(
                &format!("u{m}"),
                &ts,
                "user",
                json!({"content": [{"text": format!("prompt {m} of {f}")}]}),
            ) + "\n");
            text += &(msg(
                &format!("g{m}"),
                &ts,
                "gemini",
                json!({"content": "", "tokens": null}),
            ) + "\n");
            text += &(msg(
                &format!("g{m}"),
                &ts,
                "gemini",
                json!({"content": format!("answer {m}"), "model": "gemini-2.5-pro", "tokens": tokens(100, 10, 0, 0, 0, 110)}),
            ) + "\n");
            text +=
                &(json!({"$set": {"lastUpdated": "2026-09-01T10:00:00.000Z"}}).to_string() + "\n");
        }
        let p = chats.join(format!("session-2026-09-01T10-00-{}.jsonl", &sid[..8]));
        fs::write(&p, text).unwrap();
        age(&p, 60);
    }
    let started = Instant::now();
    let clean = bin(&d)
        .args(["backfill", "-q", "--jobs", "2", "--agent", "gemini"])
        .output()
        .unwrap();
    let pace = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    assert!(clean.status.success());
    let want = keys(&ndjson(&clean.stdout));
    assert_eq!(want.len(), 30 * 800);
    let (state, out, db) = (d.join("state"), d.join("out.ndjson"), d.join("store.db"));
    for sink in ["state", "db"] {
        let run = || {
            let mut c = bin(&d);
            c.args([
                "backfill",
                "-q",
                "--jobs",
                "2",
                "--agent",
                "gemini",
                "--checkpoint-ms",
                "1",
            ]);
            match sink {
                "state" => c.arg("--state").arg(&state).arg("-o").arg(&out),
                _ => c.arg("--db").arg(&db),
            };
            c
        };
        let mut kills = 0;
        let mut delay = (pace / 10).clamp(1, 5);
        let t = Instant::now();
        loop {
            let mut child = run()
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_millis(delay);
            let mut done = None;
            while Instant::now() < deadline {
                if let Some(st) = child.try_wait().unwrap() {
                    done = Some(st);
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            if let Some(st) = done {
                assert!(st.success(), "{sink}: a run failed");
                break;
            }
            child.kill().unwrap();
            child.wait().unwrap();
            kills += 1;
            delay = delay * 3 / 2 + (pace / 10).clamp(1, 7);
            assert!(
                t.elapsed() < Duration::from_secs(240),
                "{sink}: did not finish"
            );
        }
        assert!(kills >= 3, "{sink}: only {kills} kills");
        let mut got: Vec<String> = match sink {
            "state" => keys(&ndjson(&fs::read(&out).unwrap())),
            _ => {
                let c = rusqlite::Connection::open(&db).unwrap();
                let mut st = c.prepare("SELECT key FROM records").unwrap();
                st.query_map([], |r| r.get(0))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
        };
        let mut w = want.clone();
        if sink == "state" {
            assert_eq!(got, want, "{sink}: after {kills} kills");
        } else {
            got.sort();
            w.sort();
            assert_eq!(got, w, "{sink}: after {kills} kills");
        }
        assert!(run().output().unwrap().status.success());
    }
    fs::remove_dir_all(d).unwrap();
}

/// A generated Gemini CLI home (messages re-appended and late copies,
/// checkpoints, rewinds, subagents, damaged lines, a hash folder's session
/// copied into its slug folder): `backfill --state -o` and `backfill --db`
/// killed (SIGKILL) after growing delays until a run finishes give
/// exactly a clean run's records, each once; a re-run adds nothing.
#[test]
fn generated_home_killed_at_any_moment_every_record_exactly_once() {
    use std::time::Instant;
    let d = tmpdir("kill-generated");
    let gemini = d.join(".gemini");
    let g = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "gemini",
            "--total-mb",
            "12",
            "--seed",
            "5",
            "--archive",
        ])
        .arg(&gemini)
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let started = Instant::now();
    let clean = bin(&d)
        .args(["backfill", "-q", "--jobs", "2", "--agent", "gemini"])
        .output()
        .unwrap();
    let pace = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    assert!(clean.status.success());
    let want = keys(&ndjson(&clean.stdout));
    assert!(want.len() > 1_500, "{}", want.len());
    let unique: std::collections::BTreeSet<&String> = want.iter().collect();
    assert_eq!(unique.len(), want.len());
    let (state, out, db) = (d.join("state"), d.join("out.ndjson"), d.join("store.db"));
    for sink in ["state", "db"] {
        let run = || {
            let mut c = bin(&d);
            c.args([
                "backfill",
                "-q",
                "--jobs",
                "2",
                "--agent",
                "gemini",
                "--checkpoint-ms",
                "1",
            ]);
            match sink {
                "state" => c.arg("--state").arg(&state).arg("-o").arg(&out),
                _ => c.arg("--db").arg(&db),
            };
            c
        };
        let kills = common::kill_until_it_finishes(run, pace, sink);
        let stored = || -> Vec<String> {
            let c = rusqlite::Connection::open(&db).unwrap();
            let mut st = c.prepare("SELECT key FROM records ORDER BY key").unwrap();
            st.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let got: Vec<String> = match sink {
            "state" => keys(&ndjson(&fs::read(&out).unwrap())),
            _ => stored(),
        };
        let (mut g, mut w) = (got.clone(), want.clone());
        if sink == "state" {
            assert_eq!(got, want, "{sink}: after {kills} kills");
        } else {
            g.sort();
            w.sort();
            assert_eq!(g, w, "{sink}: after {kills} kills");
        }
        let again = run().output().unwrap();
        assert!(again.status.success());
        if sink == "state" {
            assert_eq!(keys(&ndjson(&fs::read(&out).unwrap())), want);
        } else {
            assert_eq!(stored(), g, "db: the re-run adds nothing");
        }
    }
    fs::remove_dir_all(d).unwrap();
}

/// The header of the file at `p` (as a read from its start finds it).
fn header_of(p: &Path) -> mem_ingest::Header {
    mem_ingest::format::open_at(
        &Gemini,
        Input::Bytes(&fs::read(p).unwrap()),
        p,
        mem_ingest::format::At {
            header: None,
            context: &[],
            byte: 0,
            lines_before: 0,
        },
        &SourceOptions::new(),
    )
    .unwrap()
    .header()
    .cloned()
    .unwrap()
}

/// The entries with a record of a read of `p` resumed at its end with
/// `ctx` (the file has `lines` lines), and the report.
fn resumed(p: &Path, ctx: &[u8], lines: u64) -> (Vec<(u64, OwnedRecord)>, Report) {
    let size = fs::metadata(p).unwrap().len();
    let opts = SourceOptions::new();
    let header = header_of(p);
    let mut src = Gemini.resume(Input::Bytes(&[]), p, &header, ctx, size, lines, &opts);
    let mut out = Vec::new();
    while let Some(e) = src.next_entry().unwrap() {
        if let Some(r) = e.record {
            out.push((e.line, r.to_owned_record()));
        }
    }
    assert!(!Gemini.holds_back(&src.running_context()));
    (out, src.take_report())
}

/// A message held inside a `$set` checkpoint (written on no line of its
/// own) is read again from that line's list when it becomes final.
#[test]
fn a_message_held_in_a_checkpoint_is_read_again_from_its_list() {
    let dir = tmpdir("held-set");
    let mut lines = session_lines()[..9].to_vec();
    // 10: a checkpoint whose last message is new (held).
    lines.push(
        json!({"$set": {"messages": [
            {"id": "i1", "timestamp": "2026-09-01T10:00:06.000Z", "type": "info",
             "content": "Compressing chat history"},
            {"id": "s1", "timestamp": "2026-09-01T10:00:07.000Z", "type": "user",
             "content": [{"text": "Summary of the earlier chat"}]}]}})
        .to_string(),
    );
    let p = write_session(&dir.join(".gemini"), "app", &lines);
    let (entries, _, ctx, _) = read(&p);
    assert!(entries
        .iter()
        .all(|(_, r)| r.as_ref().unwrap().id.as_deref() != Some("s1")));
    assert!(Gemini.holds_back(&ctx));
    assert!(memchr::memmem::find(&ctx, b"Summary of the earlier").is_none());
    age(&p, 60);
    let (out, report) = resumed(&p, &ctx, 10);
    assert_eq!(out.len(), 1);
    let r = &out[0].1;
    assert_eq!(
        (r.id.as_deref(), r.text.as_str(), r.line, r.role),
        (Some("s1"), "Summary of the earlier chat", 10, Role::User)
    );
    assert_eq!(r.kinds, ["text", "checkpoint"]);
    assert!(report.skips.is_empty());
    fs::remove_dir_all(dir).unwrap();
}

/// A held message whose copy was changed in place before the next read (a
/// file that is not appended to) is not handed out from other bytes: a
/// skip located at its line and byte.
#[test]
fn a_held_copy_changed_in_place_is_a_located_skip() {
    let dir = tmpdir("held-changed");
    let p = write_session(&dir.join(".gemini"), "app", &session_lines());
    let (_, _, ctx, _) = read(&p);
    let mut bytes = fs::read(&p).unwrap();
    let at = memchr::memmem::rfind(&bytes, b"Second try").unwrap();
    bytes[at..at + 10].copy_from_slice(b"Third try!");
    let byte = bytes[..at].iter().rposition(|&b| b == b'\n').unwrap() as u64 + 1;
    fs::write(&p, &bytes).unwrap();
    age(&p, 60);
    let (out, report) = resumed(&p, &ctx, 16);
    assert!(out.is_empty());
    assert_eq!(report.skipped, 1);
    assert_eq!((report.skips[0].line, report.skips[0].byte), (16, byte));
    assert_eq!(
        report.skips[0].reason.to_string(),
        "malformed JSON (message \"g4\", held back by the last run, is not at its place any \
         more: the file was changed in place, not appended to)"
    );
    fs::remove_dir_all(dir).unwrap();
}
