//! Secrets never reach an output (issue 46): credentials of every kind
//! planted in pi, Claude Code, Codex, Qwen Code, Copilot CLI, Gemini CLI,
//! Amp and Cline sessions (user text, tool-call arguments, tool output, a
//! `.env` dump, a private key block; a key id written with a `\u` escape,
//! the blocks with `\n` escapes) appear nowhere in the NDJSON, in the bytes
//! of the store's files (rows and full-text index, before and after its WAL
//! is checkpointed), in the dataset, or in a checkpoint (a state file, the
//! store's checkpoint rows: a Gemini CLI message held back while its file
//! is being written included); `search` finds none of them; `--no-redact`
//! keeps them all. The summary counts them by rule, and the store keeps the
//! counts.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;
use common::secrets;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("redact", name)
}

/// The agents' sessions, each holding every planted secret, laid out as
/// each agent keeps them (paths named on the command line). The Gemini CLI
/// file is still (written a minute ago: its last message is final) unless
/// `gemini_fresh`, when it was just written (its last message is held).
fn archive_with(d: &Path, gemini_fresh: bool) -> Vec<PathBuf> {
    let pi = d.join("pi/--work-secrets--/2026-03-01T10-00-00-000Z_pi-sec.jsonl");
    let claude = d.join("claude/projects/-work-secrets/cc-sec.jsonl");
    let codex = d.join("codex/sessions/2026/03/01/rollout-2026-03-01T12-00-00-cx-sec.jsonl");
    let qwen_id = "5f0c2a44-1111-4222-8333-9444555566aa";
    let qwen = d.join(format!("qwen/projects/-work-secrets/chats/{qwen_id}.jsonl"));
    let copilot_id = "7cf44517-0000-4000-8000-0000000000aa";
    let copilot = d.join(format!("copilot/session-state/{copilot_id}/events.jsonl"));
    let gemini_id = "9a8b7c6d-2222-4333-8444-555566667777";
    let gemini = d.join(format!(
        "gemini/tmp/{}/chats/session-2026-03-01T15-00-{}.jsonl",
        "0".repeat(64),
        &gemini_id[..8]
    ));
    let amp_id = "T-019b9d03-62e3-772f-9780-3e637f90aa11";
    let amp = d.join(format!("amp/threads/{amp_id}.json"));
    let cline_id = "1772380800000_secrt";
    let cline = d.join(format!(
        "cline/data/sessions/{cline_id}/{cline_id}.messages.json"
    ));
    for (p, text) in [
        (&pi, secrets::pi_session("pi-sec")),
        (&claude, secrets::claude_session("cc-sec")),
        (&codex, secrets::codex_session("cx-sec")),
        (&qwen, secrets::qwen_session(qwen_id)),
        (&copilot, secrets::copilot_session(copilot_id)),
        (&gemini, secrets::gemini_session(gemini_id)),
        (&amp, secrets::amp_thread(amp_id)),
        (&cline, secrets::cline_session(cline_id)),
    ] {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    if !gemini_fresh {
        age(&gemini, 60);
    }
    vec![pi, claude, codex, qwen, copilot, gemini, amp, cline]
}

fn archive(d: &Path) -> Vec<PathBuf> {
    archive_with(d, false)
}

/// Sets a file's modification time `secs` seconds in the past.
fn age(path: &Path, secs: u64) {
    let f = fs::File::options().write(true).open(path).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(secs))
        .unwrap();
}

/// The sessions of [`archive`].
const SESSIONS: u64 = 8;

fn run(args: &[&str], paths: &[PathBuf]) -> Output {
    let out = common::cli().args(args).args(paths).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Which of `secrets` `bytes` hold.
fn held(bytes: &[u8], secrets: &[&str]) -> Vec<String> {
    secrets
        .iter()
        .filter(|s| memchr::memmem::find(bytes, s.as_bytes()).is_some())
        .map(|s| (*s).to_owned())
        .collect()
}

/// The tokens of a secret the full-text index would hold (runs of letters
/// and digits, 8 or more), lowercased.
fn tokens(secret: &str) -> Vec<String> {
    secret
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| t.len() >= 8)
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Every string of every row of the dataset under `dir`, one per line.
fn dataset_text(dir: &Path) -> String {
    let mut out = String::new();
    let mut todo = vec![dir.to_path_buf()];
    let mut parts = 0;
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
                continue;
            }
            parts += 1;
            let r = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(&p).unwrap())
                .unwrap()
                .build()
                .unwrap();
            for b in r {
                let b = b.unwrap();
                for (f, col) in b.schema().fields().iter().zip(b.columns()) {
                    if f.data_type() == &DataType::Utf8 {
                        let s = col.as_string::<i32>();
                        for i in 0..s.len() {
                            if !s.is_null(i) {
                                out.push_str(s.value(i));
                                out.push('\n');
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(parts > 0, "no part under {}", dir.display());
    out
}

/// The summary's redaction line for `sessions` sessions of planted secrets.
fn said(sessions: u64) -> String {
    let by_rule: Vec<String> = secrets::PER_SESSION
        .iter()
        .map(|(r, n)| format!("{r} {}", n * sessions))
        .collect();
    let n: u64 = secrets::PER_SESSION.iter().map(|(_, n)| n * sessions).sum();
    format!(
        "mem-ingest: {n} secrets redacted ({})\n",
        by_rule.join(", ")
    )
}

fn search_hits(db: &Path, query: &str) -> String {
    let out = common::cli()
        .args(["search", "--db"])
        .arg(db)
        .arg(query)
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn planted_secrets_reach_no_output_and_no_redact_keeps_them() {
    let d = tmpdir("planted");
    let paths = archive(&d);
    let all = secrets::all();

    // NDJSON: the records hold none; each secret's place says its rule.
    let out = run(
        &["backfill", "-o", d.join("r.ndjson").to_str().unwrap()],
        &paths,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.ends_with(&said(SESSIONS)), "{err}");
    let ndjson = fs::read(d.join("r.ndjson")).unwrap();
    assert_eq!(held(&ndjson, &all), Vec::<String>::new());
    let text: Vec<serde_json::Value> = ndjson
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let texts: Vec<&str> = text.iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert!(
        texts.contains(
            &"deploy with [REDACTED:github-pat] and the key [REDACTED:aws-access-token] please"
        ),
        "{texts:#?}"
    );
    assert!(
        texts.contains(&"$ cat .env\nDB_PASSWORD=[REDACTED:env-secret]\nAWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-access-key]\nPORT=8080\n"),
        "{texts:#?}"
    );
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.contains("\n[REDACTED:private-key]\n"))
            .count(),
        SESSIONS as usize
    );
    // stdout: the same lines.
    let out = run(&["backfill", "-q"], &paths);
    assert_eq!(out.stdout, ndjson);

    // The store: no secret in its files' bytes, none of their tokens in the
    // index, no search finds one; it keeps the counts.
    let db = d.join("m.db");
    let out = run(&["backfill", "--db", db.to_str().unwrap()], &paths);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.ends_with(&said(SESSIONS)), "{err}");
    let store_bytes = |db: &Path| {
        let mut all = Vec::new();
        for ext in ["", "-wal", "-shm"] {
            let p = PathBuf::from(format!("{}{ext}", db.display()));
            if let Ok(b) = fs::read(&p) {
                all.extend(b);
            }
        }
        all
    };
    let lower = |b: Vec<u8>| b.to_ascii_lowercase();
    let bytes = lower(store_bytes(&db));
    let all_tokens: Vec<String> = all.iter().flat_map(|s| tokens(s)).collect();
    let all_tokens: Vec<&str> = all_tokens.iter().map(String::as_str).collect();
    assert_eq!(held(&bytes, &all_tokens), Vec::<String>::new());
    for t in &all_tokens {
        assert_eq!(search_hits(&db, t), "", "{t}");
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
    let counts = mem_ingest_store::redaction_counts(&conn).unwrap();
    drop(conn);
    let want: BTreeMap<String, u64> = secrets::PER_SESSION
        .iter()
        .map(|(r, n)| ((*r).to_owned(), n * SESSIONS))
        .collect();
    assert_eq!(counts, want);
    assert_eq!(
        held(&lower(store_bytes(&db)), &all_tokens),
        Vec::<String>::new()
    );

    // The dataset.
    let ds = d.join("ds");
    run(&["backfill", "--parquet", ds.to_str().unwrap()], &paths);
    let rows = dataset_text(&ds);
    assert_eq!(held(rows.as_bytes(), &all), Vec::<String>::new());
    assert_eq!(rows.matches("[REDACTED:").count(), 14 * SESSIONS as usize);

    // --no-redact: every secret as written, in every output.
    let out = run(
        &[
            "backfill",
            "--no-redact",
            "-o",
            d.join("raw.ndjson").to_str().unwrap(),
        ],
        &paths,
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("redacted"));
    let raw = fs::read(d.join("raw.ndjson")).unwrap();
    assert_eq!(held(&raw, &all).len(), all.len());
    assert!(memchr::memmem::find(&raw, b"REDACTED").is_none());
    let raw_db = d.join("raw.db");
    run(
        &["backfill", "--no-redact", "--db", raw_db.to_str().unwrap()],
        &paths,
    );
    for t in &all_tokens {
        assert_ne!(search_hits(&raw_db, t), "", "{t}");
    }
    let raw_ds = d.join("raw-ds");
    run(
        &[
            "backfill",
            "--no-redact",
            "--parquet",
            raw_ds.to_str().unwrap(),
        ],
        &paths,
    );
    assert_eq!(
        held(dataset_text(&raw_ds).as_bytes(), &all).len(),
        all.len()
    );
    fs::remove_dir_all(d).unwrap();
}

/// `--max-text` cuts after redaction: a secret past the cut is replaced,
/// not cut in half, and the text's full length is the redacted text's.
#[test]
fn redaction_runs_before_the_cut() {
    let d = tmpdir("cut");
    let paths = archive(&d);
    let out = run(&["backfill", "-q", "--max-text", "40"], &paths[..1]);
    let all = secrets::all();
    assert_eq!(held(&out.stdout, &all), Vec::<String>::new());
    let first: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["text"], "deploy with [REDACTED:github-pat] and th");
    assert_eq!(
        first["text_bytes"],
        "deploy with [REDACTED:github-pat] and the key [REDACTED:aws-access-token] please".len()
    );
    fs::remove_dir_all(d).unwrap();
}

/// A state or store records the choice: the other one is refused (exit 2,
/// nothing written); `redact --db` turns an unredacted store into a
/// redacted one, with no old text left in its file, and later runs redact.
#[test]
fn the_choice_is_recorded_and_redact_rewrites_a_store() {
    let d = tmpdir("choice");
    let paths = archive(&d);
    let all = secrets::all();
    let state = d.join("s.state");
    let out_file = d.join("o.ndjson");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "backfill",
            "-o",
            out_file.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let refused = |args: Vec<String>, what: &str| {
        let out = common::cli().args(&args).args(&paths).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what), "{err}");
    };
    let a = args(&["--no-redact"]);
    run(&a.iter().map(String::as_str).collect::<Vec<_>>(), &paths);
    let before = fs::read(&out_file).unwrap();
    refused(
        args(&[]),
        "--no-redact: state has its records' text as written (--no-redact), this run redacts \
         secrets: give --no-redact to go on",
    );
    assert_eq!(fs::read(&out_file).unwrap(), before);

    // A store written with --no-redact, then redacted in place.
    let db = d.join("m.db");
    run(
        &["backfill", "--no-redact", "--db", db.to_str().unwrap()],
        &paths,
    );
    refused(
        vec![
            "backfill".into(),
            "--db".into(),
            db.to_str().unwrap().into(),
        ],
        "--no-redact: store has its records' text as written (--no-redact)",
    );
    let out = common::cli()
        .args(["redact", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.starts_with(&format!(
            "mem-ingest: {}: {} records, {} rewritten, {} secrets redacted (",
            db.display(),
            5 * SESSIONS,
            5 * SESSIONS,
            14 * SESSIONS
        )),
        "{err}"
    );
    let mut bytes = Vec::new();
    for ext in ["", "-wal"] {
        if let Ok(b) = fs::read(format!("{}{ext}", db.display())) {
            bytes.extend(b);
        }
    }
    let wal = fs::metadata(format!("{}-wal", db.display())).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the WAL is truncated");
    let bytes = bytes.to_ascii_lowercase();
    let all_tokens: Vec<String> = all.iter().flat_map(|s| tokens(s)).collect();
    let all_tokens: Vec<&str> = all_tokens.iter().map(String::as_str).collect();
    assert_eq!(held(&bytes, &all_tokens), Vec::<String>::new());
    for t in &all_tokens {
        assert_eq!(search_hits(&db, t), "", "{t}");
    }
    assert_ne!(search_hits(&db, "REDACTED"), "");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let counts = mem_ingest_store::redaction_counts(&conn).unwrap();
    assert_eq!(counts.values().sum::<u64>(), 14 * SESSIONS);
    drop(conn);
    // Later runs redact: the store is redacted now, --no-redact refused.
    run(&["backfill", "--db", db.to_str().unwrap()], &paths);
    refused(
        vec![
            "backfill".into(),
            "--no-redact".into(),
            "--db".into(),
            db.to_str().unwrap().into(),
        ],
        "--no-redact: store has its records' secrets redacted, this run keeps them",
    );
    fs::remove_dir_all(d).unwrap();
}

/// A state saved before redaction existed (`fixtures/state-v11.state`) goes
/// on unredacted, without a refusal, and every run says so once, with the
/// fix; the state keeps saying it.
#[test]
fn a_state_of_before_goes_on_unredacted_and_says_so() {
    let d = tmpdir("before");
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    for name in ["hand-built.jsonl", "pi-classic.jsonl"] {
        fs::copy(common::fixtures().join(name), arch.join(name)).unwrap();
    }
    let pi = arch.join("secrets.jsonl");
    fs::write(&pi, secrets::pi_session("pi-sec")).unwrap();
    let state = d.join("s.state");
    fs::copy(common::fixtures().join("state-v11.state"), &state).unwrap();
    let said = format!(
        "warning: {}: this state was saved before redaction existed: its output holds secrets \
         as written, and this run went on without redacting; to redact, start over: a new \
         output with a new --state (or delete both and run again)\n",
        state.display()
    );
    for run_no in 0..2 {
        let out = run(
            &["backfill", "--state", state.to_str().unwrap()],
            std::slice::from_ref(&arch),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.matches(&said).count(), 1, "run {run_no}: {err}");
        if run_no == 0 {
            // The planted session is new: its records as written.
            assert_eq!(
                held(&out.stdout, &secrets::all()).len(),
                secrets::all().len()
            );
        } else {
            assert!(out.stdout.is_empty());
        }
    }
    fs::remove_dir_all(d).unwrap();
}

/// A message held back (a Gemini CLI file written to in the last seconds:
/// its last message may still be re-appended) is in no checkpoint: not in
/// the state file, not in the store's files once its WAL is checkpointed;
/// a later run hands it out, redacted, once the file is still. Amp's and
/// Cline's documents' checkpoints, and every other agent's, hold none
/// either.
#[test]
fn a_held_message_reaches_no_checkpoint() {
    let d = tmpdir("held");
    let paths = archive_with(&d, true);
    let gemini = &paths[5];
    let all = secrets::all();
    let all_tokens: Vec<String> = all.iter().flat_map(|s| tokens(s)).collect();
    let all_tokens: Vec<&str> = all_tokens.iter().map(String::as_str).collect();
    let lower = |b: &[u8]| b.to_ascii_lowercase();
    let store_bytes = |db: &Path| {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        drop(conn);
        let mut all = Vec::new();
        for ext in ["", "-wal"] {
            if let Ok(b) = fs::read(format!("{}{ext}", db.display())) {
                all.extend(b);
            }
        }
        all
    };
    let records = |b: &[u8]| b.iter().filter(|&&c| c == b'\n').count() as u64;
    let (state, out, db) = (d.join("s.state"), d.join("o.ndjson"), d.join("m.db"));
    let state_args = [
        "backfill",
        "-o",
        out.to_str().unwrap(),
        "--state",
        state.to_str().unwrap(),
    ];
    let db_args = ["backfill", "--db", db.to_str().unwrap()];
    for args in [&state_args[..], &db_args[..]] {
        // Being written: its last message (the key block) is held.
        age(gemini, 0);
        run(args, &paths);
    }
    let ndjson = fs::read(&out).unwrap();
    assert_eq!(records(&ndjson), 5 * SESSIONS - 1, "the key block is held");
    assert_eq!(held(&ndjson, &all), Vec::<String>::new());
    let state_bytes = fs::read(&state).unwrap();
    assert_eq!(held(&state_bytes, &all), Vec::<String>::new());
    assert_eq!(
        held(&lower(&state_bytes), &all_tokens),
        Vec::<String>::new()
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows as u64, 5 * SESSIONS - 1, "the key block is held");
    drop(conn);
    assert_eq!(
        held(&lower(&store_bytes(&db)), &all_tokens),
        Vec::<String>::new()
    );

    // Still: the next runs hand it out, redacted, and the checkpoints
    // hold nothing of it either.
    age(gemini, 60);
    run(&state_args, &paths);
    run(&db_args, &paths);
    let ndjson = fs::read(&out).unwrap();
    assert_eq!(records(&ndjson), 5 * SESSIONS);
    assert_eq!(held(&ndjson, &all), Vec::<String>::new());
    let last = ndjson[..ndjson.len() - 1]
        .rsplit(|&b| b == b'\n')
        .next()
        .unwrap();
    let last: serde_json::Value = serde_json::from_slice(last).unwrap();
    assert_eq!(last["id"], "t2");
    assert!(
        last["text"]
            .as_str()
            .unwrap()
            .contains("\n[REDACTED:private-key]\n"),
        "{last}"
    );
    let state_bytes = fs::read(&state).unwrap();
    assert_eq!(
        held(&lower(&state_bytes), &all_tokens),
        Vec::<String>::new()
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows as u64, 5 * SESSIONS);
    drop(conn);
    assert_eq!(
        held(&lower(&store_bytes(&db)), &all_tokens),
        Vec::<String>::new()
    );
    fs::remove_dir_all(d).unwrap();
}

/// A Gemini CLI context as the release before saved it (tag 1: each held
/// message's JSON after its id) from this release's (tag 2: a hash where
/// the JSON's length was, no JSON), the copies taken from `file` (each on
/// a line of its own).
fn context_with_text(ctx: &[u8], file: &[u8]) -> Vec<u8> {
    assert_eq!(ctx[0], 2);
    let mut rest = &ctx[1..];
    let mut out = vec![1u8];
    let u64_at = |rest: &mut &[u8]| {
        let (n, r) = rest.split_first_chunk::<8>().unwrap();
        *rest = r;
        u64::from_le_bytes(*n)
    };
    for _ in 0..2 {
        let n = u64_at(&mut rest);
        out.extend_from_slice(&n.to_le_bytes());
        for _ in 0..n {
            out.extend_from_slice(&u64_at(&mut rest).to_le_bytes());
        }
    }
    for _ in 0..2 {
        let n = u64_at(&mut rest);
        out.extend_from_slice(&n.to_le_bytes());
        for _ in 0..n {
            let (line, byte, id_len) = (u64_at(&mut rest), u64_at(&mut rest), u64_at(&mut rest));
            let _hash = u64_at(&mut rest);
            let flags = rest[0];
            let id = &rest[1..1 + id_len as usize];
            rest = &rest[1 + id_len as usize..];
            let from = &file[byte as usize..];
            let json = &from[..memchr::memchr(b'\n', from).unwrap()];
            for x in [line, byte, id_len, json.len() as u64] {
                out.extend_from_slice(&x.to_le_bytes());
            }
            out.push(flags);
            out.extend_from_slice(id);
            out.extend_from_slice(json);
        }
    }
    assert!(rest.is_empty());
    out
}

/// A store whose checkpoint an earlier release saved with a held Gemini
/// CLI message's JSON in it (its secrets as written): `redact --db` writes
/// that context again without it, and leaves none of its bytes in the
/// file; the next run hands the message out, redacted.
#[test]
fn redact_takes_a_held_message_out_of_a_stores_checkpoint() {
    let d = tmpdir("held-old");
    let paths = archive_with(&d, true);
    let gemini = &paths[5];
    let db = d.join("m.db");
    age(gemini, 0);
    run(&["backfill", "--db", db.to_str().unwrap()], &paths);
    let all = secrets::all();
    let all_tokens: Vec<String> = all.iter().flat_map(|s| tokens(s)).collect();
    let all_tokens: Vec<&str> = all_tokens.iter().map(String::as_str).collect();
    let pem_tokens: Vec<String> = secrets::PEM_BODY.iter().flat_map(|s| tokens(s)).collect();
    let store_tokens = |db: &Path| {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        drop(conn);
        let mut b = Vec::new();
        for ext in ["", "-wal"] {
            if let Ok(x) = fs::read(format!("{}{ext}", db.display())) {
                b.extend(x);
            }
        }
        held(&b.to_ascii_lowercase(), &all_tokens)
    };
    // The checkpoint as the release before saved it.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: Vec<(String, Vec<u8>)> = conn
        .prepare("SELECT path, state FROM checkpoint_files")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let (path, state) = rows
        .iter()
        .find(|(p, _)| p.ends_with(".jsonl") && p.contains("/gemini/"))
        .unwrap();
    let mut f = mem_ingest::archive::FileState::from_bytes(state).unwrap();
    f.context = context_with_text(&f.context, &fs::read(gemini).unwrap());
    conn.execute(
        "UPDATE checkpoint_files SET state = ?2 WHERE path = ?1",
        rusqlite::params![path, f.to_bytes()],
    )
    .unwrap();
    drop(conn);
    let mut leaked = store_tokens(&db);
    leaked.sort();
    let mut want = pem_tokens.clone();
    want.sort();
    assert_eq!(leaked, want, "the held key block, as it leaked");

    let out = common::cli()
        .args(["redact", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "mem-ingest: {}: {} records, 0 rewritten, 0 secrets redacted, 1 file's checkpoint \
             without its held text in ",
            db.display(),
            5 * SESSIONS - 1
        )),
        "{err}"
    );
    assert_eq!(store_tokens(&db), Vec::<String>::new());
    // Again: nothing left to take out.
    let out = common::cli()
        .args(["redact", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("checkpoint"));

    // The message, final now, is handed out from the file, redacted.
    age(gemini, 60);
    run(&["backfill", "--db", db.to_str().unwrap()], &paths);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let text: String = conn
        .query_row(
            "SELECT text FROM records WHERE format = 'gemini' AND id = 't2'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(text.contains("\n[REDACTED:private-key]\n"), "{text}");
    let rows: i64 = conn
        .query_row("SELECT COUNT(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows as u64, 5 * SESSIONS);
    drop(conn);
    assert_eq!(store_tokens(&db), Vec::<String>::new());
    fs::remove_dir_all(d).unwrap();
}
