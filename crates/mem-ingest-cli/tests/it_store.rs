//! The embedded store: `backfill --db` and `search`. Rows equal `stats`,
//! exactly once under kill -9, incremental, row identity, faults that leave
//! the file untouched, a full disk, readers while `--follow` writes, a
//! second writer refused, the search examples, real clients (the `sqlite3`
//! shell and Python's `sqlite3` module) reading the documented schema, and
//! the checked-in store of each schema version.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{append, fixtures, run, sha256, user_line};

/// The schema version this release writes.
const SCHEMA: i64 = mem_ingest_store::SCHEMA_VERSION;

fn bin() -> Command {
    common::cli()
}

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("store", name)
}

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

/// What the `sqlite3` shell answers to `sql` in its list mode (one row a
/// line, `|` between columns, NULL empty), read in this process through
/// SQLite itself (rusqlite's bundled library), so that the tests need no
/// shell on the machine; a statement that returns no rows (`DELETE`, a
/// `PRAGMA` set) runs as well. The shell itself is checked against it in
/// [`the_sqlite3_shell_reads_what_the_tests_read`].
fn sqlite3(db: &Path, sql: &str) -> String {
    use rusqlite::types::ValueRef;
    let c = rusqlite::Connection::open(db).unwrap_or_else(|e| panic!("{}: {e}", db.display()));
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    let mut out = Vec::new();
    // Statement by statement, as the shell runs a list of them.
    let mut batch = rusqlite::Batch::new(&c, sql);
    use rusqlite::fallible_iterator::FallibleIterator;
    while let Some(mut st) = batch.next().unwrap_or_else(|e| panic!("{sql}: {e}")) {
        let n = st.column_count();
        let mut rows = st.query([]).unwrap_or_else(|e| panic!("{sql}: {e}"));
        while let Some(r) = rows.next().unwrap_or_else(|e| panic!("{sql}: {e}")) {
            let cols: Vec<String> = (0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    ValueRef::Null => String::new(),
                    ValueRef::Integer(v) => v.to_string(),
                    ValueRef::Real(v) => format!("{v:?}"),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        String::from_utf8_lossy(t).into_owned()
                    }
                })
                .collect();
            out.push(cols.join("|"));
        }
    }
    out.join("\n").trim_end().to_owned()
}

/// The `sqlite3` shell, a client of its own, reads the documented schema
/// as the tests' reader does: counts, keys and texts, the full-text index,
/// the schema version.
#[test]
#[ignore = "needs a reference tool: the sqlite3 shell (apt-get install sqlite3; .ci/run installs it)"]
fn the_sqlite3_shell_reads_what_the_tests_read() {
    let d = tmpdir("shell");
    let db = d.join("m.db");
    let o = backfill_db(&db, &[&searchable(&d)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for sql in [
        "SELECT count(*) FROM records",
        "SELECT key, role, text FROM records ORDER BY row_id",
        "SELECT r.key FROM records_fts JOIN records r ON r.row_id = records_fts.rowid \
         WHERE records_fts MATCH '\"parse_iso_millis\"'",
        "SELECT count(*), sum(records) FROM sessions",
        "PRAGMA user_version",
    ] {
        let out = Command::new("sqlite3")
            .arg(&db)
            .arg(sql)
            .output()
            .expect("the sqlite3 shell (apt-get install sqlite3)");
        assert!(
            out.status.success(),
            "sqlite3 {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shell = String::from_utf8(out.stdout).unwrap();
        assert_eq!(shell.trim_end(), sqlite3(&db, sql), "{sql}");
    }
    assert_eq!(sqlite3(&db, "SELECT count(*) FROM records"), "6");
    fs::remove_dir_all(d).unwrap();
}

fn count(db: &Path) -> u64 {
    sqlite3(db, "SELECT count(*) FROM records").parse().unwrap()
}

fn stats(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Value {
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"stats", &"--json", &"-q"];
    all.extend_from_slice(args);
    let out = run(&all);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn backfill_db(db: &Path, paths: &[&Path]) -> Output {
    let mut c = bin();
    c.args(["backfill", "-q", "--db"]).arg(db).args(paths);
    c.output().unwrap()
}

/// [`backfill_db`] following links met while walking (`-L`), as every run
/// did before the checkpoint recorded it: what a store saved then goes on
/// with.
fn backfill_db_following(db: &Path, paths: &[&Path]) -> Output {
    let mut c = bin();
    c.args(["backfill", "-q", "-L", "--db"]).arg(db).args(paths);
    c.output().unwrap()
}

/// Rows by role as the store holds them.
fn roles(db: &Path) -> Value {
    let text = sqlite3(db, "SELECT role, count(*) FROM records GROUP BY role");
    let mut m = serde_json::Map::new();
    for role in [
        "user",
        "assistant",
        "tool_result",
        "bash_execution",
        "custom",
        "system",
    ] {
        m.insert(role.into(), 0.into());
    }
    for l in text.lines() {
        let (r, n) = l.split_once('|').unwrap();
        m.insert(r.into(), n.parse::<u64>().unwrap().into());
    }
    Value::Object(m)
}

#[test]
fn rows_equal_stats_on_the_fixtures_and_a_generated_archive() {
    let d = tmpdir("rows");
    let fix = fixtures();
    let mut inputs: Vec<PathBuf> = fs::read_dir(&fix)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    inputs.sort();
    inputs.push(fix.join("bad"));
    let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let db = d.join("fixtures.db");
    let out = backfill_db(&db, &refs);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args: Vec<&dyn AsRef<std::ffi::OsStr>> = inputs
        .iter()
        .map(|p| p as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    let s = stats(&args);
    assert_eq!(s["records"], 1100);
    assert_eq!(count(&db), 1100);
    assert_eq!(roles(&db), s["roles"]);
    // Sessions: distinct ids, their record counts summing to the rows.
    assert_eq!(
        sqlite3(&db, "SELECT count(*), sum(records) FROM sessions"),
        "6|1100"
    );
    // The bad/ variants share one session id: one session, its files all
    // listed, those whose entries were all copies of another's too.
    let names: Vec<String> = sqlite3(
        &db,
        "SELECT file FROM session_files WHERE session = '01a229a8-a806-70aa-8697-32dd52d39d57' ORDER BY file",
    )
    .lines()
    .map(|f| f.rsplit('/').next().unwrap().to_owned())
    .collect();
    assert_eq!(
        names,
        [
            "blank-lines-between.jsonl",
            "bom-prefixed.jsonl",
            "crlf.jsonl",
            "duplicate-header.jsonl",
            "header-only.jsonl",
            "malformed-middle-line.jsonl",
            "nul-bytes-tail.jsonl",
            "sample-all-types.jsonl",
            "truncated-last-line-no-newline-valid.jsonl",
            "truncated-last-line.jsonl"
        ]
    );
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
    // A generated archive.
    let arch = d.join("archive");
    let g = gen_corpus::GenCorpus::new()
        .args(["--archive"])
        .arg(&arch)
        .args(["--total-mb", "6", "--seed", "3"])
        .output()
        .unwrap();
    assert!(g.status.success());
    let gdb = d.join("gen.db");
    assert!(backfill_db(&gdb, &[&arch]).status.success());
    let gs = stats(&[&arch]);
    assert_eq!(count(&gdb), gs["records"].as_u64().unwrap());
    assert_eq!(roles(&gdb), gs["roles"]);
    let fts: u64 = sqlite3(&gdb, "SELECT count(*) FROM records_fts")
        .parse()
        .unwrap();
    assert_eq!(fts, count(&gdb), "every row is in the index");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn incremental_and_row_identity() {
    let d = tmpdir("incremental");
    let s = d.join("2026-01-01T00-00-00-000Z_s.jsonl");
    fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
    let db = d.join("s.db");
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(count(&db), 22);
    // Unchanged: nothing added.
    let again = backfill_db(&db, &[&s]);
    assert!(again.status.success());
    assert_eq!(count(&db), 22);
    // Appended lines: exactly their rows.
    append(
        &s,
        &(user_line("new-1", "one more") + &user_line("new-2", "and two")),
    );
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(count(&db), 24);
    assert_eq!(
        sqlite3(
            &db,
            "SELECT text FROM records WHERE key = 'hand-built-0001:new-2'"
        ),
        "and two"
    );
    // A replaced session file (a new inode, its history rewritten with one
    // more entry): read again, copies dropped, the new entry added.
    let body = fs::read_to_string(&s).unwrap() + &user_line("new-3", "three");
    fs::remove_file(&s).unwrap();
    fs::write(&s, body).unwrap();
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(count(&db), 25);
    // The same entry again (the checkpoint's rows deleted by hand, so
    // nothing says the entries were stored): every row updated in place.
    let before = sqlite3(&db, "SELECT group_concat(row_id || key, ',') FROM records");
    sqlite3(
        &db,
        "DELETE FROM checkpoint_files; DELETE FROM checkpoint_fingerprints; DELETE FROM checkpoint_joins",
    );
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(count(&db), 25);
    assert_eq!(
        sqlite3(&db, "SELECT group_concat(row_id || key, ',') FROM records"),
        before,
        "same rows, same row ids"
    );
    // A different entry under a key already stored: pi 0.x (v1) keys are
    // per line, so two files of one session each have an `:L2`. The second
    // is stored under the key and its fingerprint.
    let v1 = |text: &str| {
        format!(
            "{{\"type\":\"session\",\"id\":\"v1-sess\",\"timestamp\":\"2025-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}}\n\
             {{\"type\":\"message\",\"timestamp\":\"2025-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n"
        )
    };
    let (a, b) = (d.join("v1-a.jsonl"), d.join("v1-b.jsonl"));
    fs::write(&a, v1("first text")).unwrap();
    fs::write(&b, v1("other text")).unwrap();
    let vdb = d.join("v1.db");
    assert!(backfill_db(&vdb, &[&a, &b]).status.success());
    let rows = sqlite3(&vdb, "SELECT key, text FROM records ORDER BY row_id");
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], "v1-sess:L2|first text");
    let fp: i64 = sqlite3(
        &vdb,
        "SELECT fingerprint FROM records WHERE text = 'other text'",
    )
    .parse()
    .unwrap();
    assert_eq!(
        lines[1],
        format!("v1-sess:L2~{:016x}|other text", fp as u64)
    );
    // Deterministic: a store built again gives the same keys.
    let vdb2 = d.join("v1-again.db");
    assert!(backfill_db(&vdb2, &[&a, &b]).status.success());
    assert_eq!(
        sqlite3(&vdb2, "SELECT key, text FROM records ORDER BY row_id"),
        rows
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn flags_that_do_not_go_with_db_are_refused() {
    let d = tmpdir("flags");
    let s = fixtures().join("hand-built.jsonl");
    let db = d.join("s.db");
    for (extra, says) in [
        (vec!["-o", "x.ndjson"], "cannot be used with"),
        (vec!["--state", "st"], "cannot be used with"),
        (vec!["--no-dedupe"], "the store is the deduplicated view"),
    ] {
        let mut c = bin();
        c.args(["backfill", "-q", "--db"])
            .arg(&db)
            .args(&extra)
            .arg(&s);
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!db.exists());
    }
    let out = run(&[&"backfill", &"--follow", &s]);
    assert_eq!(out.status.code(), Some(2));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn files_that_are_not_our_store_are_refused_untouched() {
    let d = tmpdir("faults");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
    let s = d.join("s.jsonl");
    fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
    fs::set_permissions(&s, fs::Permissions::from_mode(0o644)).unwrap();
    // Not SQLite at all.
    let text = d.join("notes.db");
    fs::write(&text, "these are my notes, not a database\n").unwrap();
    // Shorter than SQLite's 16-byte header (issue 42: it said "cannot be
    // read (failed to fill whole buffer)").
    let short = d.join("short.db");
    fs::write(&short, "hello").unwrap();
    // SQLite of someone else's schema.
    let other = d.join("other.db");
    sqlite3(
        &other,
        "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada')",
    );
    // Ours, of a newer schema version.
    let newer = d.join("newer.db");
    fs::copy(fixtures().join("store-v1.sqlite"), &newer).unwrap();
    sqlite3(&newer, "PRAGMA user_version = 99");
    let newer_says = format!("has schema version 99; this mem-ingest writes {SCHEMA}");
    for (db, says) in [
        (&text, "is not a SQLite database"),
        (
            &short,
            "is not a SQLite database (5 bytes, shorter than its header)",
        ),
        (&other, "is a SQLite database of another schema"),
        (&newer, newer_says.as_str()),
    ] {
        let before = sha256(db);
        let out = backfill_db(db, &[&s]);
        assert_eq!(out.status.code(), Some(2), "{}", db.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("the store {} {says}", db.display())),
            "{err}"
        );
        assert_eq!(sha256(db), before, "{} untouched", db.display());
        // Search refuses them as well.
        let q = run(&[&"search", &"x", &"--db", db]);
        assert_eq!(q.status.code(), Some(2), "search {}", db.display());
        assert_eq!(sha256(db), before);
    }
    // A store that cannot be written (as a user without the right: the
    // tests run as root, who may write anything).
    let ro = d.join("ro.db");
    fs::copy(fixtures().join("store-v1.sqlite"), &ro).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o444)).unwrap();
    let before = sha256(&ro);
    let out = common::unprivileged_cli()
        .args(["backfill", "-q", "--db"])
        .arg(&ro)
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("the store {} cannot be written", ro.display())),
        "{err}"
    );
    assert_eq!(sha256(&ro), before);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_full_disk_leaves_a_consistent_store_that_a_rerun_completes() {
    let d = tmpdir("full");
    let s = fixtures().join("pi-1x.jsonl");
    let want = stats(&[&s])["records"].as_u64().unwrap();
    let db = d.join("s.db");
    // About 1.6 MB of records; 60 pages of 4 KiB cannot hold them.
    let out = bin()
        .args(["backfill", "-q", "--db-max-pages", "60", "--db"])
        .arg(&db)
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("store failed") && err.contains("full"),
        "{err}"
    );
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
    let kept = count(&db);
    assert!(kept < want, "{kept} of {want}");
    // Space is back: the re-run completes, every record exactly once.
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(count(&db), want);
    assert_eq!(
        sqlite3(&db, "SELECT count(DISTINCT key), count(*) FROM records_fts JOIN records ON row_id = records_fts.rowid"),
        format!("{want}|{want}")
    );
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn killed_at_any_moment_every_record_exactly_once() {
    let d = tmpdir("kill");
    let arch = d.join("archive");
    let g = gen_corpus::GenCorpus::new()
        .arg("--archive")
        .arg(&arch)
        .args(["--total-mb", "40", "--seed", "5"])
        .output()
        .unwrap();
    assert!(g.status.success());
    let clean = d.join("clean.db");
    assert!(backfill_db(&clean, &[&arch]).status.success());
    let want = sqlite3(
        &clean,
        "SELECT group_concat(key, ',') FROM (SELECT key FROM records ORDER BY key)",
    );
    let db = d.join("s.db");
    let mut kills = 0;
    let mut delay_ms = 20u64;
    let started = Instant::now();
    loop {
        let mut child = bin()
            .args([
                "backfill",
                "-q",
                "--jobs",
                "2",
                "--checkpoint-ms",
                "1",
                "--db",
            ])
            .arg(&db)
            .arg(&arch)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(delay_ms);
        let mut done = None;
        while Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                done = Some(st);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match done {
            Some(st) => {
                assert!(st.success());
                break;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                // What a kill left is consistent at any moment.
                assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
            }
        }
        delay_ms = delay_ms * 3 / 2 + 10;
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "did not finish"
        );
    }
    assert!(kills >= 3, "only {kills} kills");
    assert_eq!(
        sqlite3(
            &db,
            "SELECT group_concat(key, ',') FROM (SELECT key FROM records ORDER BY key)"
        ),
        want,
        "after {kills} kills"
    );
    assert_eq!(
        sqlite3(&db, "SELECT sum(records) FROM sessions"),
        sqlite3(&clean, "SELECT count(*) FROM records")
    );
    // Usage rows too: each response's once, as a run not killed wrote them.
    let usage = "SELECT count(*), group_concat(key || '=' || total_tokens, ',') \
        FROM (SELECT key, total_tokens FROM usage ORDER BY key)";
    assert_eq!(
        sqlite3(&db, usage),
        sqlite3(&clean, usage),
        "after {kills} kills"
    );
    let total = stats(&[&arch])["usage"]["total_tokens"].to_string();
    assert_eq!(sqlite3(&db, "SELECT sum(total_tokens) FROM usage"), total);
    fs::remove_dir_all(d).unwrap();
}

/// `select sum(total_tokens) from usage` equals `stats`' total for every
/// agent, over one store of every agent's generated archive.
#[test]
fn usage_rows_sum_to_the_stats_of_every_agent() {
    let d = tmpdir("usage-sums");
    let mut paths = Vec::new();
    for agent in ["pi", "gemini", "qwen", "copilot", "amp", "claude", "codex"] {
        let a = d.join(agent);
        let g = gen_corpus::GenCorpus::new()
            .args(["--format", agent, "--archive"])
            .arg(&a)
            .args(["--total-mb", "2", "--seed", "4"])
            .output()
            .unwrap();
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        paths.push(a);
    }
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let db = d.join("s.db");
    let out = backfill_db(&db, &paths);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args: Vec<&dyn AsRef<std::ffi::OsStr>> = paths
        .iter()
        .map(|p| p as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    let s = stats(&args);
    let by = s["by_source"].as_object().unwrap();
    assert_eq!(by.len(), 7, "{:?}", by.keys());
    for (agent, st) in by {
        let want = st["usage"]["total_tokens"].as_u64().unwrap();
        assert!(want > 0, "{agent}");
        assert_eq!(
            sqlite3(
                &db,
                &format!("SELECT sum(total_tokens) FROM usage WHERE agent = '{agent}'")
            ),
            want.to_string(),
            "{agent}"
        );
    }
    assert_eq!(
        sqlite3(&db, "SELECT sum(total_tokens) FROM usage"),
        s["usage"]["total_tokens"].to_string()
    );
    // `usage --db` gives what `usage` over the archive gives.
    let report = |args: &[&dyn AsRef<std::ffi::OsStr>]| -> Value {
        let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"usage", &"daily", &"--json", &"-q", &"--timezone", &"UTC"];
        all.extend_from_slice(args);
        let out = run(&all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let (mut from_archive, mut from_db) = (report(&args), report(&[&"--db", &db]));
    // Costs are summed in another order: equal to the last bits or so.
    let costs = |v: &mut Value| -> Vec<f64> {
        let mut c = Vec::new();
        for d in v["daily"].as_array_mut().unwrap() {
            c.push(d["costUSD"].as_f64().unwrap_or(-1.0));
            d["costUSD"] = Value::Null;
            for m in d["models"].as_object_mut().unwrap().values_mut() {
                m["costUSD"] = Value::Null;
            }
        }
        c
    };
    let (a, b) = (costs(&mut from_archive), costs(&mut from_db));
    assert_eq!(from_db["daily"], from_archive["daily"]);
    assert_eq!(
        from_db["totals"]["totalTokens"],
        from_archive["totals"]["totalTokens"]
    );
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() <= 1e-9 * x.abs().max(1.0), "{x} against {y}");
    }
    // A second run reads nothing new and writes no row again.
    let rows = sqlite3(&db, "SELECT count(*), sum(total_tokens) FROM usage");
    assert!(backfill_db(&db, &paths).status.success());
    assert_eq!(
        sqlite3(&db, "SELECT count(*), sum(total_tokens) FROM usage"),
        rows
    );
    fs::remove_dir_all(d).unwrap();
}

/// Goose sessions without ledger rows: their usage is the growth of the
/// accumulated columns, counted at each run. A series of runs with growth
/// between them (two sessions of one model, each grown) leaves in the
/// store's usage table every growth, summing to what `stats` counts over
/// the database (each growth was one row at line 0, keyed by file, line
/// and model: the later replaced the earlier).
#[test]
fn goose_accumulated_growth_over_runs_keeps_a_row_each() {
    let d = tmpdir("goose-growth");
    let s = d.join("sessions");
    fs::create_dir_all(&s).unwrap();
    let goose = s.join("sessions.db");
    let c = rusqlite::Connection::open(&goose).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
           accumulated_input_tokens INTEGER, accumulated_output_tokens INTEGER,
           accumulated_total_tokens INTEGER, provider_name TEXT, model_config_json TEXT,
           updated_at TEXT);
         CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
           session_id TEXT NOT NULL, role TEXT NOT NULL, content_json TEXT NOT NULL,
           created_timestamp INTEGER NOT NULL, metadata_json TEXT);
         INSERT INTO sessions VALUES ('s1', '/w', 100, 10, 110, 'p',
           '{\"model_name\":\"m\"}', '2026-01-01 00:00:00');
         INSERT INTO sessions VALUES ('s2', '/w', 1000, 100, 1100, 'p',
           '{\"model_name\":\"m\"}', '2026-01-01 00:00:00');",
    )
    .unwrap();
    let store = d.join("store.db");
    let run = || {
        let out = bin()
            .args(["backfill", "-q", "--agent", "goose", "--db"])
            .arg(&store)
            .arg(&goose)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run();
    c.execute_batch(
        "UPDATE sessions SET accumulated_input_tokens = 250, accumulated_output_tokens = 30,
           accumulated_total_tokens = 280 WHERE id = 's1';",
    )
    .unwrap();
    run();
    c.execute_batch(
        "UPDATE sessions SET accumulated_input_tokens = 400, accumulated_output_tokens = 50,
           accumulated_total_tokens = 450 WHERE id = 's1';
         UPDATE sessions SET accumulated_input_tokens = 3000, accumulated_output_tokens = 300,
           accumulated_total_tokens = 3300 WHERE id = 's2';",
    )
    .unwrap();
    run();
    // A run with nothing grown adds no row.
    run();
    let st = stats(&[&"--agent", &"goose", &goose]);
    assert_eq!(
        (&st["usage"]["input"], &st["usage"]["output"]),
        (&Value::from(3400), &Value::from(350))
    );
    // Five growths: s1 and s2 at first, s1 twice more, s2 once more.
    assert_eq!(
        sqlite3(
            &store,
            "SELECT count(*), sum(input), sum(output), sum(total_tokens) FROM usage"
        ),
        "5|3400|350|3750"
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn readers_while_follow_writes_and_a_second_writer_refused() {
    let d = tmpdir("follow");
    let proj = d.join("archive/--tmp-p--");
    fs::create_dir_all(&proj).unwrap();
    let s = proj.join("2026-01-01T00-00-00-000Z_s.jsonl");
    fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
    let db = d.join("live.db");
    let mut child = bin()
        .args(["backfill", "-q", "--follow", "--db"])
        .arg(&db)
        .arg(d.join("archive"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wait_for = |n: u64| {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            // Another connection, opened read-only each time: a reader
            // beside the writer.
            let rows = rusqlite::Connection::open_with_flags(
                &db,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .and_then(|c| c.query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0)));
            if db.exists() && rows.is_ok_and(|r| r == n as i64) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("no {n} rows after 10 s");
    };
    // A reader sees the rows while the writer holds the store.
    wait_for(22);
    assert_eq!(count(&db), 22);
    // A second writer refuses at once.
    let t = Instant::now();
    let second = backfill_db(&db, &[&s]);
    assert_eq!(second.status.code(), Some(2));
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(String::from_utf8_lossy(&second.stderr).contains(&format!(
        "another mem-ingest run is using the store {}",
        db.display()
    )));
    // A line written: its row appears, readable at once.
    append(&s, &user_line("live-1", "written while following"));
    wait_for(23);
    let py = Command::new("python3")
        .arg("-c")
        .arg("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute(\"SELECT text FROM records WHERE key = 'hand-built-0001:live-1'\").fetchone()[0])")
        .arg(&db)
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "written while following"
    );
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(count(&db), 23);
    fs::remove_dir_all(d).unwrap();
}

/// A session whose texts hold what people search for.
fn searchable(dir: &Path) -> PathBuf {
    let s = dir.join("2026-01-01T00-00-00-000Z_search.jsonl");
    let header = r#"{"type":"session","version":3,"id":"search-s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work/proj"}"#;
    let mut body = format!("{header}\n");
    for (i, text) in [
        "the bug is in parse_iso_millis when the offset is negative",
        "see src/cli/run.rs line 40 for the pass loop",
        "error[E0502]: cannot borrow `x` as mutable because it is also borrowed as immutable",
        "this is an exact phrase to find",
        "phrase exact, not in order this time",
        "nothing of interest here: the parse of iso dates is elsewhere",
    ]
    .iter()
    .enumerate()
    {
        body.push_str(&user_line(&format!("m{i}"), text));
    }
    fs::write(&s, body).unwrap();
    s
}

#[test]
fn search_finds_identifiers_paths_codes_and_phrases() {
    let d = tmpdir("search");
    let s = searchable(&d);
    let db = d.join("s.db");
    assert!(backfill_db(&db, &[&s]).status.success());
    let keys = |args: &[&str]| -> Vec<String> {
        let mut c = bin();
        c.args(["search", "--json", "--db"]).arg(&db).args(args);
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["key"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(keys(&["parse_iso_millis"]), ["search-s:m0"]);
    assert_eq!(keys(&["src/cli/run.rs"]), ["search-s:m1"]);
    assert_eq!(keys(&["E0502"]), ["search-s:m2"]);
    assert_eq!(keys(&["e0502"]), ["search-s:m2"]);
    assert_eq!(keys(&["\"exact phrase\""]), ["search-s:m3"]);
    let mut both = keys(&["exact phrase"]);
    both.sort();
    assert_eq!(both, ["search-s:m3", "search-s:m4"]);
    assert_eq!(keys(&["--fts", "exact NOT phrase"]).len(), 0);
    assert_eq!(keys(&["--fts", "negat*"]), ["search-s:m0"]);
    assert!(keys(&["--project", "/other", "parse_iso_millis"]).is_empty());
    assert_eq!(
        keys(&["--role", "user", "--session", "search-s", "E0502"]),
        ["search-s:m2"]
    );
    assert!(keys(&["--role", "assistant", "E0502"]).is_empty());
    assert!(keys(&["--since", "2027-01-01", "E0502"]).is_empty());
    assert!(keys(&["--format", "claude", "E0502"]).is_empty());
    assert_eq!(keys(&["--limit", "1", "exact phrase"]).len(), 1);
    // One hit's fields.
    let out = bin()
        .args(["search", "--json", "--db"])
        .arg(&db)
        .arg("E0502")
        .output()
        .unwrap();
    let hit: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(hit["session"], "search-s");
    assert_eq!(hit["project"], "/work/proj");
    assert_eq!(hit["role"], "user");
    assert_eq!(hit["timestamp"], 1769904000000i64);
    assert!(
        hit["snippet"].as_str().unwrap().contains("«E0502»"),
        "{hit}"
    );
    // Text output.
    let out = bin()
        .args(["search", "--utc", "--db"])
        .arg(&db)
        .arg("E0502")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "2026-02-01 00:00:00  pi  /work/proj  user  {}:4  search-s:m2\n",
            s.display()
        )),
        "{text}"
    );
    // A malformed FTS5 query: a clear error, exit 2.
    let bad = bin()
        .args(["search", "--fts", "--db"])
        .arg(&db)
        .arg("\"unclosed")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.starts_with("error: malformed FTS5 query \"\\\"unclosed\": "),
        "{err}"
    );
    assert!(!err.contains("panicked"));
    fs::remove_dir_all(d).unwrap();
}

/// A session of one record per text (`m0`, `m1`, ...), its id `id`, its
/// `cwd` as given (JSON-escaped both, as `user_line` takes its text).
fn texts_session(dir: &Path, id: &str, cwd: &str, texts: &[&str]) -> PathBuf {
    let s = dir.join(format!("2026-01-01T00-00-00-000Z_{id}.jsonl"));
    let mut body = format!(
        r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
    ) + "\n";
    for (i, text) in texts.iter().enumerate() {
        body.push_str(&user_line(&format!("m{i}"), text));
    }
    fs::write(&s, body).unwrap();
    s
}

/// Each hit's key and snippet, as the library's `search` gives them.
fn snippets(db: &Path, query: &str) -> Vec<(String, String)> {
    use mem_ingest_store::{search, Search};
    let s = Search {
        query: query.to_owned(),
        limit: 20,
        ..Search::default()
    };
    search(db, &s)
        .unwrap()
        .into_iter()
        .map(|h| (h.key, h.snippet))
        .collect()
}

/// A snippet is cut from a bounded window of the text, 64 KiB from the
/// first match on, so that it costs what a snippet is worth however many
/// matches the record holds: FTS5's `snippet()` scored every match against
/// every other, 6 s for a record of 256 KB of one word, 97 s for 1 MB
/// (issue 42). Within the window the snippet is FTS5's, to the byte (the
/// store's unit tests compare them); a better one further on (here both
/// words together, 105 KB after the first) is not looked for.
#[test]
fn a_snippet_is_cut_from_a_window_at_the_first_match() {
    let d = tmpdir("snippet-window");
    let far = format!(
        "alpha {}alpha beta{}",
        "filler ".repeat(15_000),
        " filler".repeat(20)
    );
    let many = vec!["word"; 100_000].join(" ");
    let s = texts_session(&d, "window", "/work/proj", &[&far, &many]);
    let db = d.join("w.db");
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(
        snippets(&db, "alpha beta"),
        [(
            "window:m0".to_owned(),
            format!("«alpha»{}…", " filler".repeat(15))
        )]
    );
    // 100,000 matches in one record: the first 16 tokens.
    assert_eq!(
        snippets(&db, "word"),
        [(
            "window:m1".to_owned(),
            format!("«word»{}…", " «word»".repeat(15))
        )]
    );
    fs::remove_dir_all(d).unwrap();
}

/// A NUL in a text is a character like any other: FTS5's `snippet()`
/// joined its pieces as C strings, so that the text from a NUL to the
/// match was dropped, and everything after a NUL past it (issue 42).
#[test]
fn a_snippet_keeps_the_text_after_a_nul() {
    let d = tmpdir("snippet-nul");
    let s = texts_session(
        &d,
        "nul",
        "/work/proj",
        &[r"before\u0000after the needle, then\u0000the end"],
    );
    let db = d.join("n.db");
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(
        snippets(&db, "needle"),
        [(
            "nul:m0".to_owned(),
            "before\0after the «needle», then\0the end".to_owned()
        )]
    );
    fs::remove_dir_all(d).unwrap();
}

/// The text output is for a terminal: what a transcript holds (a tool's
/// colours, a title sequence in a path, a bell, a bidi override) is
/// printed escaped, never as the control characters themselves (issue
/// 42); a newline of a snippet is a space, as it was.
#[test]
fn search_prints_control_characters_escaped() {
    let d = tmpdir("search-controls");
    let s = texts_session(
        &d,
        "ctl",
        r"/work/\u001b]0;pwned\u0007proj",
        &[
            r"bell\u0007 esc\u001b[31mred\u001b[0m needle\ttab\r\nnext del\u007f c1\u0085 bidi\u202eend",
        ],
    );
    let db = d.join("c.db");
    assert!(backfill_db(&db, &[&s]).status.success());
    let out = bin()
        .args(["search", "--utc", "--db"])
        .arg(&db)
        .arg("needle")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!(
            "2026-02-01 00:00:00  pi  /work/\\u{{1b}}]0;pwned\\u{{7}}proj  user  {}:2  ctl:m0\n    \
             bell\\u{{7}} esc\\u{{1b}}[31mred\\u{{1b}}[0m «needle»\\ttab\\r next del\\u{{7f}} \
             c1\\u{{85}} bidi\\u{{202e}}end\n",
            s.display()
        )
    );
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn real_clients_read_the_documented_schema() {
    let d = tmpdir("clients");
    let s = searchable(&d);
    let db = d.join("s.db");
    assert!(backfill_db(&db, &[&s, &fixtures().join("pi-1x.jsonl")])
        .status
        .success());
    // The columns the README pins, in order.
    let columns = sqlite3(
        &db,
        "SELECT group_concat(name, ',') FROM pragma_table_info('records')",
    );
    assert_eq!(
        columns,
        "key,row_id,format,project,session,file,source,line,byte,id,parent_id,entry,role,kinds,\
         timestamp,text,provider,model,usage_input,usage_output,usage_cache_read,\
         usage_cache_write,usage_total_tokens,usage_cost,stop_reason,tool_name,tool_call_id,\
         is_error,custom_type,command,exit_code,text_bytes,agent_id,message_id,request_id,\
         provisional,fingerprint,redactions"
    );
    assert_eq!(
        sqlite3(
            &db,
            "SELECT group_concat(name, ',') FROM pragma_table_info('sessions')"
        ),
        "id,format,project,first_timestamp,last_timestamp,parent_session,records"
    );
    assert_eq!(sqlite3(&db, "PRAGMA user_version"), SCHEMA.to_string());
    assert_eq!(
        sqlite3(
            &db,
            "SELECT group_concat(name, ',') FROM pragma_table_info('checkpoint_responses')"
        ),
        "seq,response"
    );
    // The sqlite3 shell queries the index.
    assert_eq!(
        sqlite3(
            &db,
            "SELECT r.key FROM records_fts JOIN records r ON r.row_id = records_fts.rowid \
             WHERE records_fts MATCH '\"parse_iso_millis\"'"
        ),
        "search-s:m0"
    );
    // Python's sqlite3 module too: rows, usage columns, kinds as JSON.
    let script = r#"
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
hits = c.execute("SELECT r.key FROM records_fts JOIN records r ON r.row_id = records_fts.rowid WHERE records_fts MATCH ? ORDER BY bm25(records_fts)", ('"src/cli/run.rs"',)).fetchall()
usage = c.execute("SELECT sum(usage_total_tokens) FROM records WHERE role = 'assistant'").fetchone()[0]
kinds = set()
for (k,) in c.execute("SELECT kinds FROM records"):
    kinds.update(json.loads(k))
print(hits[0][0], usage > 0, ",".join(sorted(kinds)))
"#;
    let py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&db)
        .output()
        .expect("python3");
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "search-s:m1 True error,image,text,thinking,toolCall"
    );
    fs::remove_dir_all(d).unwrap();
}

/// The store of each schema version, checked in
/// (`fixtures/store-v1.sqlite` to `fixtures/store-v5.sqlite`: `backfill --db` over
/// `fixtures/hand-built.jsonl`): opened and brought to this version in
/// place, its rows kept; a copy of the session is new to it and adds
/// nothing; appended lines add exactly their rows. Each was saved before
/// the checkpoint recorded whether links are followed, when every walk
/// followed them: a run without `-L` is refused, one with it goes on.
/// Version 5 recorded links not followed: it goes on without. Those before
/// version 6 were written before redaction existed: each run over them goes
/// on unredacted and says so, with the fix; this release's (version 6)
/// says nothing. Those before version 7 kept no usage rows: the run that
/// migrates them reads the file their checkpoint covers again
/// (`fixtures/hand-built.jsonl`, found from the crate's folder, where the
/// tests run, through its `fixtures` link) for usage alone, and writes the
/// rows this release's store of the same command holds, key by key.
#[test]
fn the_checked_in_stores_are_migrated_and_go_on() {
    let rows =
        "SELECT group_concat(key || '=' || total_tokens || '=' || timestamp || '=' || cost, \
                ',') FROM (SELECT * FROM usage ORDER BY key)";
    let v7 = tmpdir("migrate-v7-rows").join("v7.db");
    fs::copy(fixtures().join(format!("store-v{SCHEMA}.sqlite")), &v7).unwrap();
    let want_rows = sqlite3(&v7, rows);
    assert_eq!(want_rows.matches('=').count(), 3 * 8, "{want_rows}");
    let covered = stats(&[&fixtures().join("hand-built.jsonl")]);
    assert_eq!(covered["usage"]["total_tokens"], 18624);
    for version in 1..=SCHEMA {
        let d = tmpdir(&format!("migrate-{version}"));
        let db = d.join("store.db");
        fs::copy(fixtures().join(format!("store-v{version}.sqlite")), &db).unwrap();
        assert_eq!(sqlite3(&db, "PRAGMA user_version"), version.to_string());
        assert_eq!(count(&db), 22);
        let s = d.join("hand-built.jsonl");
        fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
        // Not quiet: what the run says of the usage it read again.
        let loud = |follow: bool| {
            bin()
                .arg("backfill")
                .args(follow.then_some("-L"))
                .arg("--db")
                .arg(&db)
                .arg(&s)
                .output()
                .unwrap()
        };
        let out = loud(false);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let mut migrated = err.clone();
        let go_on: fn(&Path, &[&Path]) -> Output = if version < 5 {
            assert_eq!(out.status.code(), Some(2), "{err}");
            assert!(
                err.contains(
                    "(--follow-links: store has links followed (given -L, or saved before -L \
                     existed, when runs always followed them), this run links not followed: \
                     give -L to go on); use another store"
                ),
                "{err}"
            );
            assert_eq!(count(&db), 22);
            // Refused before anything is read again.
            assert!(!err.contains("read again"), "{err}");
            assert_eq!(sqlite3(&db, "SELECT count(*) FROM usage"), "0");
            let out = loud(true);
            migrated = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{migrated}");
            backfill_db_following
        } else {
            assert!(out.status.success(), "{err}");
            backfill_db
        };
        assert_eq!(sqlite3(&db, "PRAGMA user_version"), SCHEMA.to_string());
        assert_eq!(count(&db), 22);
        // The usage rows of what the store read before: the same as this
        // release's, summing to `stats` over the bytes its checkpoint
        // covers (the whole file), the migration's marks gone.
        let marks = "SELECT count(*) FROM checkpoint_meta \
                     WHERE name IN ('usage_since', 'usage_reread')";
        let sums = "SELECT count(*), sum(total_tokens), sum(cost) FROM usage";
        assert_eq!(sqlite3(&db, sums), "8|18624|13.5625", "version {version}");
        assert_eq!(sqlite3(&db, rows), want_rows, "version {version}");
        assert_eq!(sqlite3(&db, marks), "0");
        let said = format!(
            "mem-ingest: {}: usage rows for what the store read before it kept them: 1 file \
             (9517 bytes) read again, 8 rows written, in ",
            db.display()
        );
        assert_eq!(
            migrated.matches(&said).count(),
            usize::from(version < 7),
            "{migrated}"
        );
        append(&s, &user_line("after-1", "after the migration"));
        let out = go_on(&db, &[&s]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        // Read again once only.
        assert!(!err.contains("read again"), "{err}");
        assert_eq!(count(&db), 23);
        // The appended line is a user message: no usage row.
        assert_eq!(sqlite3(&db, rows), want_rows, "version {version}");
        said_unredacted(&db, &s, version);
        assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
        fs::remove_dir_all(d).unwrap();
    }
}

/// Whether a run (not quiet) over the store of schema `version` says, once,
/// that the store was written before redaction existed, and how to redact
/// it; the store still says nothing of redaction then.
fn said_unredacted(db: &Path, session: &Path, version: i64) {
    let out = bin()
        .arg("backfill")
        .args((version < 5).then_some("-L"))
        .arg("--db")
        .arg(db)
        .arg(session)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let redact = "SELECT coalesce(json_extract(value, '$.redact'), 'none') FROM checkpoint_meta \
                  WHERE name = 'options'";
    assert_eq!(
        sqlite3(db, redact),
        if version < 6 { "none" } else { "1" },
        "{err}"
    );
    let said = format!(
        "warning: {}: this store was written before redaction existed: its records hold \
         secrets as written, and this run went on without redacting; run `mem-ingest redact \
         --db {}` once to redact them, then later runs redact too\n",
        db.display(),
        db.display()
    );
    assert_eq!(
        err.matches(&said).count(),
        usize::from(version < 6),
        "{err}"
    );
}

/// A store before version 7 whose checkpoint's file is not where it was
/// (the run is in a folder without `fixtures/hand-built.jsonl`, the path the
/// checkpoint holds): the run that migrates it says which file could not
/// be read again and why, counts it, and goes on (exit 0) with no usage
/// rows for it; the store records it, `usage --db` warns with it, and later
/// runs do not try again.
#[test]
fn a_store_whose_files_are_gone_says_what_its_usage_lacks_and_goes_on() {
    for version in 1..SCHEMA {
        let d = tmpdir(&format!("usage-gone-{version}"));
        let db = d.join("store.db");
        fs::copy(fixtures().join(format!("store-v{version}.sqlite")), &db).unwrap();
        let s = d.join("hand-built.jsonl");
        fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
        let go = || {
            bin()
                .current_dir(&d)
                .arg("backfill")
                .args((version < 5).then_some("-L"))
                .arg("--db")
                .arg(&db)
                .arg(&s)
                .output()
                .unwrap()
        };
        let out = go();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let said = [
            format!(
                "mem-ingest: {}: usage rows for what the store read before it kept them: 0 \
                 files (0 bytes) read again, 0 rows written, in ",
                db.display()
            ),
            "warning: fixtures/hand-built.jsonl: not read again for its usage rows: not found \
             (No such file or directory (os error 2))\n"
                .to_owned(),
            format!(
                "warning: {}: 1 file the store read before could not be read again: their usage \
                 of what it read before its migration to schema 7 is not in its usage table (usage \
                 --db says so)\n",
                db.display()
            ),
        ];
        for line in &said {
            assert_eq!(err.matches(line.as_str()).count(), 1, "{line}\n{err}");
        }
        assert_eq!(count(&db), 22);
        assert_eq!(sqlite3(&db, "SELECT count(*) FROM usage"), "0");
        assert_eq!(
            sqlite3(
                &db,
                "SELECT value FROM checkpoint_meta WHERE name = 'usage_reread'"
            ),
            "1 of them, fixtures/hand-built.jsonl (not found (No such file or directory (os \
             error 2)))"
        );
        let out = bin()
            .args(["usage", "daily", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let uerr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{uerr}");
        assert!(
            uerr.starts_with(&format!(
                "warning: {} has no usage rows for files it read before ",
                db.display()
            )) && uerr.ends_with(
                " (its migration to schema 7) that could not be read again: 1 of them, \
                 fixtures/hand-built.jsonl (not found (No such file or directory (os error \
                 2)))\n"
            ),
            "{uerr}"
        );
        // Not tried again.
        let out = go();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("read again"), "{err}");
        assert_eq!(sqlite3(&db, "SELECT count(*) FROM usage"), "0");
        fs::remove_dir_all(d).unwrap();
    }
}

/// A store the release before migrated to version 7 (stop 55's: its
/// migration left `usage_since` and no `usage_reread`, and its runs wrote
/// usage rows keyed as this release keys them), where that release read a
/// Codex fork before its parent: the fork alone first (the replay's counts
/// its own but for the leading run ccusage leaves to the absent parent),
/// the parent in a later run (its copies then count only that leading
/// run). This release reads such a store again, from the start, in path
/// order with a fresh dedupe: the parent first, the replay the parent's.
/// The rows that release wrote for the files read again are dropped in the
/// transaction that writes the re-read's, so the replay is counted once:
/// the sums equal `stats` and a fresh store's rows key by key.
#[test]
fn a_store_the_release_before_migrated_counts_a_forks_replay_once() {
    let d = tmpdir("usage-reread-fork-first");
    let day = d.join("codex/sessions/2026/01/01");
    fs::create_dir_all(&day).unwrap();
    let (parent_text, _) = common::codex::same_second_family();
    let parent = day.join("rollout-2026-01-01T10-00-00-p1.jsonl");
    let fork = day.join("rollout-2026-01-01T11-00-00-f1.jsonl");
    let archive = d.join("codex");
    fs::write(&fork, common::codex::fork_of_parent()).unwrap();
    let db = d.join("s.db");
    let sums = "SELECT count(*), sum(total_tokens) FROM usage";
    let rows = "SELECT group_concat(key || '=' || total_tokens || '=' || \
                coalesce(timestamp, '-') || '=' || coalesce(cost, '-'), ',') \
                FROM (SELECT * FROM usage ORDER BY key)";
    let o = backfill_db(&db, &[&archive]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(sqlite3(&db, sums), "3|3320");
    fs::write(&parent, &parent_text).unwrap();
    let o = backfill_db(&db, &[&archive]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The fork's replay its own, the parent's leading count the parent's.
    let f = fork.display().to_string();
    let p = parent.display().to_string();
    assert_eq!(
        sqlite3(
            &db,
            "SELECT file, line, total_tokens FROM usage ORDER BY file, line"
        ),
        format!("{p}|9|1050\n{f}|14|2070\n{f}|17|1030\n{f}|19|220")
    );
    let total = stats(&[&archive])["usage"]["total_tokens"].as_u64();
    assert_eq!(total, Some(4150 + 220));
    assert_eq!(sqlite3(&db, sums), "4|4370");
    // As the release before left it: migrated (when, Unix ms), not read
    // again.
    sqlite3(
        &db,
        "INSERT INTO checkpoint_meta (name, value) VALUES ('usage_since', '1796000000000')",
    );
    let o = bin()
        .arg("backfill")
        .arg("--db")
        .arg(&db)
        .arg(&archive)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.matches(&format!(
            "mem-ingest: {}: usage rows for what the store read before it kept them: 2 files \
             ({} bytes) read again, 4 rows written, in ",
            db.display(),
            parent_text.len() + common::codex::fork_of_parent().len()
        ))
        .count(),
        1,
        "{err}"
    );
    let fresh = d.join("fresh.db");
    assert!(backfill_db(&fresh, &[&archive]).status.success());
    assert_eq!(sqlite3(&fresh, sums), "4|4370");
    assert_eq!(sqlite3(&db, sums), "4|4370");
    assert_eq!(sqlite3(&db, rows), sqlite3(&fresh, rows));
    assert_eq!(
        sqlite3(
            &db,
            "SELECT count(*) FROM checkpoint_meta WHERE name IN ('usage_since', 'usage_reread')"
        ),
        "0"
    );
    // Read again once only.
    let o = backfill_db(&db, &[&archive]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(sqlite3(&db, rows), sqlite3(&fresh, rows));
    fs::remove_dir_all(d).unwrap();
}

/// A store the release before migrated (rows, `usage_since`), which read
/// a Codex parent and its fork in one run (the replay the parent's rows,
/// the fork's own 220 tokens its row), the parent's file gone since: the
/// fork, read again alone, would count the replay as a fork alone does
/// (3,100 tokens more) beside the parent's rows. A file of a lineage with
/// a file not read again is not read again either: its rows are kept as
/// they are, and it is named with why, counted with the files not read.
#[test]
fn a_store_the_release_before_migrated_keeps_a_gone_parents_fork_as_it_is() {
    let d = tmpdir("usage-reread-parent-gone");
    let day = d.join("codex/sessions/2026/01/01");
    fs::create_dir_all(&day).unwrap();
    let (parent_text, _) = common::codex::same_second_family();
    let parent = day.join("rollout-2026-01-01T10-00-00-p1.jsonl");
    let fork = day.join("rollout-2026-01-01T11-00-00-f1.jsonl");
    let archive = d.join("codex");
    fs::write(&parent, &parent_text).unwrap();
    fs::write(&fork, common::codex::fork_of_parent()).unwrap();
    let db = d.join("s.db");
    let rows = "SELECT group_concat(key || '=' || total_tokens, ',') \
                FROM (SELECT * FROM usage ORDER BY key)";
    assert!(backfill_db(&db, &[&archive]).status.success());
    let before = sqlite3(&db, rows);
    assert_eq!(
        sqlite3(&db, "SELECT count(*), sum(total_tokens) FROM usage"),
        "4|4370"
    );
    sqlite3(
        &db,
        "INSERT INTO checkpoint_meta (name, value) VALUES ('usage_since', '1796000000000')",
    );
    fs::remove_file(&parent).unwrap();
    let o = bin()
        .arg("backfill")
        .arg("--db")
        .arg(&db)
        .arg(&archive)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let said = [
        format!(
            "mem-ingest: {}: usage rows for what the store read before it kept them: 0 files \
             (0 bytes) read again, 0 rows written, in ",
            db.display()
        ),
        format!(
            "warning: {}: not read again for its usage rows: of a lineage with a file not read \
             again (its rows are kept as they are)\n",
            fork.display()
        ),
        format!(
            "warning: {}: 2 files the store read before could not be read again: their usage \
             of what it read before its migration to schema 7 is not in its usage table (usage \
             --db says so)\n",
            db.display()
        ),
    ];
    for line in &said {
        assert_eq!(err.matches(line.as_str()).count(), 1, "{line}\n{err}");
    }
    assert_eq!(sqlite3(&db, rows), before);
    fs::remove_dir_all(d).unwrap();
}

/// A store of version 6 (this release's store of three agents' generated
/// archives with its usage table taken away and its version set back: the
/// same tables and rows a version 6 release wrote) is migrated by a run
/// killed at growing delays while it reads its files again for their
/// usage: after every kill the store is consistent, with either no usage
/// row and the re-read still to do or every row; the run that finishes
/// leaves each row once, equal key by key (tokens, time and cost) to the
/// rows the store had, and `stats`' total by agent. Then the same store as
/// the release before left it after migrating (every row, and its mark
/// `usage_since`): killed while it reads again, it has every row, the
/// same, after every kill (the rows of the files read again are dropped
/// and written anew in one transaction), and the mark gone at the end.
#[test]
fn killed_while_reading_again_for_usage_each_row_once() {
    let d = tmpdir("usage-reread-kill");
    let mut paths = Vec::new();
    for agent in ["pi", "claude", "codex"] {
        let a = d.join(agent);
        let g = gen_corpus::GenCorpus::new()
            .args(["--format", agent, "--archive"])
            .arg(&a)
            .args(["--total-mb", "12", "--seed", "6"])
            .output()
            .unwrap();
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        paths.push(a);
    }
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let clean = d.join("clean.db");
    assert!(backfill_db(&clean, &paths).status.success());
    let rows = "SELECT count(*), group_concat(key || '=' || total_tokens || '=' || \
                coalesce(timestamp, '-') || '=' || coalesce(cost, '-'), ',') \
                FROM (SELECT * FROM usage ORDER BY key)";
    let want = sqlite3(&clean, rows);
    let old = d.join("old.db");
    sqlite3(&clean, &format!("VACUUM INTO '{}'", old.display()));
    sqlite3(
        &old,
        "DROP TABLE usage; DELETE FROM checkpoint_meta WHERE name LIKE 'usage%'; \
         PRAGMA user_version = 6;",
    );
    let records = sqlite3(&old, "SELECT count(*) FROM records");
    let db = d.join("s.db");
    fs::copy(&old, &db).unwrap();
    let pending = "SELECT count(*) FROM checkpoint_meta WHERE name = 'usage_reread'";
    let (kills, pendings) = kill_until_done(&db, &paths, |kills| {
        // Once the version is 7, the rows are all there or none is.
        if sqlite3(&db, "PRAGMA user_version") != "7" {
            return false;
        }
        if sqlite3(&db, pending) == "1" {
            assert_eq!(sqlite3(&db, "SELECT count(*) FROM usage"), "0");
            return true;
        }
        assert_eq!(sqlite3(&db, rows), want, "after {kills} kills");
        false
    });
    assert!(
        kills >= 3 && pendings >= 1,
        "{kills} kills, {pendings} pending"
    );
    assert_eq!(sqlite3(&db, rows), want, "after {kills} kills");
    assert_eq!(sqlite3(&db, pending), "0");
    assert_eq!(sqlite3(&db, "SELECT count(*) FROM records"), records);
    let args: Vec<&dyn AsRef<std::ffi::OsStr>> = paths
        .iter()
        .map(|p| p as &dyn AsRef<std::ffi::OsStr>)
        .collect();
    let s = stats(&args);
    for (agent, st) in s["by_source"].as_object().unwrap() {
        assert_eq!(
            sqlite3(
                &db,
                &format!("SELECT sum(total_tokens) FROM usage WHERE agent = '{agent}'")
            ),
            st["usage"]["total_tokens"].to_string(),
            "{agent}"
        );
    }
    // A store the release before migrated (its mark, `usage_since`, no
    // `usage_reread`; its rows those of this release): read again with
    // its rows of the files read again dropped and written anew in one
    // transaction, so after every kill the rows are all there, the same.
    let db = d.join("before.db");
    sqlite3(&clean, &format!("VACUUM INTO '{}'", db.display()));
    sqlite3(
        &db,
        "INSERT INTO checkpoint_meta (name, value) VALUES ('usage_since', '1796000000000')",
    );
    let marked = "SELECT count(*) FROM checkpoint_meta WHERE name = 'usage_since'";
    let (kills, pendings) = kill_until_done(&db, &paths, |kills| {
        assert_eq!(sqlite3(&db, rows), want, "after {kills} kills");
        sqlite3(&db, marked) == "1"
    });
    assert!(
        kills >= 3 && pendings >= 1,
        "{kills} kills, {pendings} pending"
    );
    assert_eq!(sqlite3(&db, rows), want, "after {kills} kills");
    assert_eq!(sqlite3(&db, marked), "0");
    fs::remove_dir_all(d).unwrap();
}

/// Runs `backfill --jobs 2 --db DB PATHS...`, killed (SIGKILL) at growing
/// delays until a run finishes; after each kill the store is checked
/// (`PRAGMA integrity_check`) and handed to `after` (with the number of
/// kills so far), which says whether the re-read was still to do. The
/// kills, and how many of them left it to do.
fn kill_until_done(db: &Path, paths: &[&Path], mut after: impl FnMut(u32) -> bool) -> (u32, u32) {
    let (mut kills, mut pendings) = (0, 0);
    let mut delay_ms = 20u64;
    let started = Instant::now();
    loop {
        let mut child = bin()
            .args(["backfill", "--jobs", "2", "--db"])
            .arg(db)
            .args(paths)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(delay_ms);
        let mut done = None;
        while Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                done = Some(st);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(st) = done {
            let out = child.wait_with_output().unwrap();
            assert!(st.success(), "{}", String::from_utf8_lossy(&out.stderr));
            return (kills, pendings);
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        assert_eq!(sqlite3(db, "PRAGMA integrity_check"), "ok");
        if after(kills) {
            pendings += 1;
        }
        delay_ms = delay_ms * 3 / 2 + 10;
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "did not finish"
        );
    }
}

/// A real Codex rollout in the repository (26 lines, 10 records; MIT,
/// `tests/real/codex/codemie-exec-0.77.0/PROVENANCE.md`).
const REAL_CODEX: &str = "tests/real/codex/codemie-exec-0.77.0/rollout-2026-01-02T18-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl";

/// A store made before stores recorded their line hash
/// (`fixtures/store-v2-codex.sqlite`: the release before, a6548c0,
/// `backfill --db` of [`REAL_CODEX`]) holds the serial hash's
/// fingerprints, and keeps it: migrated to version 3 with hash 1, a copy
/// of the rollout (a new file to the store) adds nothing, its 26 lines
/// deduplicated (with `-L`: it was saved when links were always followed).
/// A store of the releases that hashed with three lanes
/// (`fixtures/store-v7-codex-wide.sqlite`, ba3f0fe's) keeps that hash (2)
/// likewise. A new store records XXH3 (3) and deduplicates a copy the
/// same way. (Codex keys are per line, so a copy
/// that deduplicated nothing would upsert the same 10 rows: the run's own
/// count is what tells.)
#[test]
fn a_store_keeps_the_line_hash_it_was_made_with() {
    let d = tmpdir("line-hash");
    let name = Path::new(REAL_CODEX).file_name().unwrap();
    let copy = |dir: &str| {
        let p = d.join(dir).join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join(REAL_CODEX), &p).unwrap();
        p
    };
    let backfill = |db: &Path, path: &Path| {
        let out = bin()
            .args(["backfill", "--db"])
            .arg(db)
            .args(db.ends_with("old.db").then_some("-L"))
            .arg(path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        err
    };
    let hash = "SELECT coalesce((SELECT value FROM checkpoint_meta WHERE name = 'line_hash'), 'none'), \
        coalesce(json_extract(value, '$.line_hash'), 'none') FROM checkpoint_meta WHERE name = 'options'";
    let all_copies = "0 records (0 written), 26 deduplicated, 0 skipped";
    let old = d.join("old.db");
    fs::copy(fixtures().join("store-v2-codex.sqlite"), &old).unwrap();
    assert_eq!(sqlite3(&old, hash), "none|none");
    assert_eq!(count(&old), 10);
    for dir in ["a", "b"] {
        let err = backfill(&old, &copy(dir));
        assert!(err.contains(all_copies), "{err}");
        assert_eq!(sqlite3(&old, "PRAGMA user_version"), SCHEMA.to_string());
        assert_eq!(sqlite3(&old, hash), "1|1");
        assert_eq!(count(&old), 10);
    }
    // The checkpoint lost, the rows kept: the store's own record of the
    // hash still holds, so the rows read again are the same entries
    // (their fingerprints equal), updated in place rather than stored
    // again under `<key>~<fingerprint>`.
    sqlite3(
        &old,
        "DELETE FROM checkpoint_meta WHERE name = 'options'; DELETE FROM checkpoint_files; \
         DELETE FROM checkpoint_fingerprints; DELETE FROM checkpoint_joins",
    );
    let err = backfill(&old, &copy("e"));
    assert!(
        err.contains("10 records (10 written), 0 deduplicated"),
        "{err}"
    );
    assert_eq!(count(&old), 10);
    assert_eq!(sqlite3(&old, hash), "1|1");
    let wide = d.join("wide.db");
    fs::copy(fixtures().join("store-v7-codex-wide.sqlite"), &wide).unwrap();
    assert_eq!(sqlite3(&wide, hash), "2|2");
    for dir in ["g", "h"] {
        let err = backfill(&wide, &copy(dir));
        assert!(err.contains(all_copies), "{err}");
        assert_eq!(sqlite3(&wide, hash), "2|2");
        assert_eq!(count(&wide), 10);
    }
    let new = d.join("new.db");
    let err = backfill(&new, &copy("c"));
    assert!(
        err.contains("10 records (10 written), 0 deduplicated"),
        "{err}"
    );
    assert_eq!(sqlite3(&new, hash), "3|3");
    let err = backfill(&new, &copy("d"));
    assert!(err.contains(all_copies), "{err}");
    assert_eq!(count(&new), 10);
    // A hash this release does not know: refused, the store untouched.
    sqlite3(
        &new,
        "UPDATE checkpoint_meta SET value = '4' WHERE name = 'line_hash'",
    );
    let before = sha256(&new);
    let out = bin()
        .args(["backfill", "--db"])
        .arg(&new)
        .arg(copy("f"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("holds fingerprints of line hash 4, which this mem-ingest does not know"),
        "{err}"
    );
    assert_eq!(sha256(&new), before);
    assert_eq!(sqlite3(&old, "PRAGMA integrity_check"), "ok");
    fs::remove_dir_all(d).unwrap();
}

/// `tests/data/claude-usage.jsonl`, a Claude Code session of three usage
/// responses (one streamed as two lines, one without a request id).
fn claude_usage() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/claude-usage.jsonl")
}

/// A later copy of `msg_01C` (no request id: the same response within the
/// session) with more output tokens than the file's.
const MSG_01C_AGAIN: &str = r#"{"parentUuid":"c7","isSidechain":false,"cwd":"/tmp/claude-fixture","sessionId":"fx-claude-1","type":"assistant","uuid":"c8","timestamp":"2026-03-02T09:01:08.000Z","message":{"id":"msg_01C","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Fixed, and tested."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":9}},"costUSD":0.25}
"#;

/// The store of schema version 1 that kept the usage responses as one
/// value (`fixtures/store-v1-claude.sqlite`: the release before over
/// `claude-usage.jsonl`): the backfill that migrates it (with `-L`: it was
/// saved when links were always followed) moves them to one row each,
/// drops the value, and sets version 2; a copy of the session
/// adds nothing; a later copy of one response with more usage rewrites
/// that response's row alone. The same run writes the usage rows of the
/// three responses the store read before (version 7), read again from the
/// file its checkpoint names (`tests/data/claude-usage.jsonl`, from the
/// crate's folder): keyed by their index in its table, with the times of
/// their lines, summing to `stats` of the file; the later copy rewrites
/// its response's row, and the sums are `stats`' of the file grown.
#[test]
fn a_version_1_store_moves_its_responses_to_rows() {
    let d = tmpdir("responses-v1");
    let db = d.join("v1.db");
    fs::copy(fixtures().join("store-v1-claude.sqlite"), &db).unwrap();
    let meta = "SELECT count(*) FROM checkpoint_meta WHERE name = 'responses'";
    assert_eq!(sqlite3(&db, "PRAGMA user_version"), "1");
    assert_eq!(sqlite3(&db, meta), "1");
    let s = d.join("claude-usage.jsonl");
    fs::copy(claude_usage(), &s).unwrap();
    let out = backfill_db_following(&db, &[&s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sqlite3(&db, "PRAGMA user_version"), SCHEMA.to_string());
    assert_eq!(sqlite3(&db, meta), "0");
    assert_eq!(count(&db), 7);
    let rows = || {
        sqlite3(
            &db,
            "SELECT seq, hex(response) FROM checkpoint_responses ORDER BY seq",
        )
    };
    let before = rows();
    let seqs: Vec<&str> = before.lines().map(|l| &l[..l.find('|').unwrap()]).collect();
    assert_eq!(seqs, ["0", "1", "2"]);
    let usage = "SELECT key, timestamp, input, output, cache_read, cache_write, total_tokens, \
                 cost FROM usage ORDER BY key";
    assert_eq!(
        sqlite3(&db, usage),
        "claude#0|1772442003000|10|25|100|50|185|0.0006225\n\
         claude#1|1772442062000|20|8|0|0|28|0.00018\n\
         claude#2|1772442067000|5|3|0|0|8|0.25"
    );
    let sums = "SELECT sum(total_tokens), round(sum(cost), 10) FROM usage";
    let of = |p: &Path| {
        let st = stats(&[&"--agent", &"claude", &p]);
        format!("{}|{}", st["usage"]["total_tokens"], st["usage"]["cost"])
    };
    assert_eq!(sqlite3(&db, sums), "221|0.2508025");
    assert_eq!(of(&claude_usage()), "221|0.2508025");
    append(&s, MSG_01C_AGAIN);
    assert!(backfill_db_following(&db, &[&s]).status.success());
    assert_eq!(count(&db), 8);
    assert_eq!(
        sqlite3(
            &db,
            "SELECT key, timestamp, total_tokens FROM usage WHERE key = 'claude#2'"
        ),
        "claude#2|1772442068000|14"
    );
    assert_eq!(sqlite3(&db, sums), "227|0.2508025");
    assert_eq!(of(&s), "227|0.2508025");
    let after = rows();
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    assert_eq!(a.len(), 3);
    assert_eq!(a[..2], b[..2]);
    assert_ne!(a[2], b[2]);
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
    // A row gone would shift the responses after it: the checkpoint is
    // damaged, said so, and the store left as it is.
    sqlite3(&db, "DELETE FROM checkpoint_responses WHERE seq = 1");
    let hash = sha256(&db);
    let out = backfill_db_following(&db, &[&s]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("damaged usage responses (row 1 has seq 2)"),
        "{err}"
    );
    assert_eq!(sha256(&db), hash);
    fs::remove_dir_all(d).unwrap();
}

/// Usage counts once per response across runs into a store, as into a
/// state: the provisional line read first is replaced by the final one
/// read in the next run, an unchanged re-run counts the same, and each
/// equals a fresh `stats` of the whole file; the store holds one row per
/// response.
#[test]
fn a_store_counts_each_response_once_across_runs() {
    use mem_ingest::archive::Archive;
    use mem_ingest::format::Format;
    use mem_ingest::formats::Claude;
    use mem_ingest_store::SqliteStore;
    use std::sync::Arc;
    let d = tmpdir("responses-runs");
    let s = d.join("claude-usage.jsonl");
    let all = fs::read_to_string(claude_usage()).unwrap();
    let lines: Vec<&str> = all.split_inclusive('\n').collect();
    fs::write(&s, lines[..2].concat()).unwrap();
    let db = d.join("s.db");
    let formats: Vec<Arc<dyn Format>> = vec![Arc::new(Claude)];
    let backfill = || {
        let mut store = SqliteStore::open(&db).unwrap();
        Archive::builder()
            .path(&s)
            .formats(formats.clone())
            .build()
            .backfill(&mut store)
            .unwrap()
    };
    let usage = || sqlite3(&db, "SELECT count(*), sum(total_tokens) FROM usage");
    // msg_01A's first, provisional line: 10 + 1 + 100.
    assert_eq!(backfill().report.usage.total_tokens, 111);
    assert_eq!(usage(), "1|111");
    fs::write(&s, &all).unwrap();
    let second = backfill();
    // Its row replaced by the final line's: the sums are a fresh run's.
    assert_eq!(usage(), "3|221");
    // msg_01A final (10 + 25 + 100 + 50), msg_01B (28), msg_01C (8).
    assert_eq!(second.report.usage.total_tokens, 185 + 28 + 8);
    let third = backfill();
    assert_eq!((third.written, third.unchanged), (0, 1));
    assert_eq!(third.report.usage, second.report.usage);
    assert_eq!(third.report.by_model, second.report.by_model);
    let fresh = stats(&[&s]);
    assert_eq!(fresh["usage"]["total_tokens"], 221);
    // msg_01C's `costUSD`, and the two others priced (a fresh `stats`).
    let cost = fresh["usage"]["cost"].as_f64().unwrap();
    assert!((cost - 0.2508025).abs() < 1e-12, "{cost}");
    assert_eq!(third.report.usage.cost, 0.25);
    assert_eq!(
        sqlite3(&db, "SELECT count(*) FROM checkpoint_responses"),
        "3"
    );
    assert_eq!(usage(), "3|221");
    assert_eq!(
        sqlite3(&db, "SELECT key, total_tokens FROM usage ORDER BY key"),
        "claude#0|185\nclaude#1|28\nclaude#2|8"
    );
    // --since selects the rows by their response's time: msg_01B's and
    // msg_01C's (each response still kept, under its index).
    let since = d.join("since.db");
    let out = bin()
        .args(["backfill", "-q", "--since", "2026-03-02T09:01:00Z", "--db"])
        .arg(&since)
        .arg(&s)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sqlite3(&since, "SELECT key, total_tokens FROM usage ORDER BY key"),
        "claude#1|28\nclaude#2|8"
    );
    fs::remove_dir_all(d).unwrap();
}

/// Another client's writes keep the index right: an indexed row updated or
/// deleted is re-indexed or dropped by the triggers; a row it inserts is
/// indexed by the next backfill that commits.
#[test]
fn other_writers_keep_the_index_right() {
    let d = tmpdir("writers");
    let s = searchable(&d);
    let db = d.join("s.db");
    assert!(backfill_db(&db, &[&s]).status.success());
    let hits = |q: &str| -> String {
        sqlite3(
            &db,
            &format!(
                "SELECT group_concat(r.key, ',') FROM records_fts JOIN records r ON r.row_id = records_fts.rowid WHERE records_fts MATCH '{q}'"
            ),
        )
    };
    sqlite3(
        &db,
        "UPDATE records SET text = 'rewritten by hand' WHERE key = 'search-s:m0'",
    );
    assert_eq!(hits("rewritten"), "search-s:m0");
    assert_eq!(hits("negative"), "");
    sqlite3(&db, "DELETE FROM records WHERE key = 'search-s:m1'");
    assert_eq!(hits("loop"), "");
    sqlite3(
        &db,
        "INSERT INTO records (key, row_id, format, project, session, file, source, line, byte, entry, role, kinds, text, fingerprint) \
         VALUES ('hand:1', (SELECT max(row_id) + 1 FROM records), 'pi', '/p', 'hand', 'f', 'pi:f', 1, 0, 'message', 'user', '[]', 'inserted by hand', 7)",
    );
    assert_eq!(hits("inserted"), "");
    append(&s, &user_line("m9", "appended later"));
    assert!(backfill_db(&db, &[&s]).status.success());
    assert_eq!(hits("inserted"), "hand:1");
    assert_eq!(hits("appended"), "search-s:m9");
    assert_eq!(
        sqlite3(
            &db,
            "INSERT INTO records_fts(records_fts) VALUES('integrity-check'); SELECT 'ok'"
        ),
        "ok"
    );
    fs::remove_dir_all(d).unwrap();
}

/// `search` ranks as FTS5's `bm25()` does, to the bit, whichever way it
/// takes the phrases' counts: a phrase whose every match the walk saw, a
/// phrase of more matches than are ranked, several phrases, filters, and
/// the FTS5 syntax that `bm25()` itself ranks.
#[test]
fn search_ranks_as_fts5_bm25_to_the_bit() {
    use mem_ingest_store::{search, Search, RANKED};
    let d = tmpdir("bm25");
    let arch = d.join("archive");
    let g = gen_corpus::GenCorpus::new()
        .args(["--total-mb", "12", "--seed", "5", "--archive"])
        .arg(&arch)
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    let s = searchable(&d);
    let db = d.join("r.db");
    let out = backfill_db(&db, &[&arch, &s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    // What FTS5 says: the same walk and order as `search`, `bm25()` ranks.
    // (And each hit's snippet, taken row by row.)
    let fts5 = |fts: &str, filter: &str, limit: usize| -> Vec<(String, f64, String)> {
        let mut st = conn
            .prepare(&format!(
                "SELECT records_fts.rowid, r.key, bm25(records_fts) FROM records_fts
                 JOIN records r ON r.row_id = records_fts.rowid
                 WHERE records_fts MATCH ?1{filter} ORDER BY records_fts.rowid DESC LIMIT {RANKED}"
            ))
            .unwrap();
        let mut all: Vec<(i64, String, f64)> = st
            .query_map([fts], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        all.sort_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)));
        let mut snippet = conn
            .prepare(
                "SELECT snippet(records_fts, 0, '«', '»', '…', 16) FROM records_fts
                 WHERE records_fts MATCH ?1 AND rowid = ?2",
            )
            .unwrap();
        // FTS5's snippet() cuts its pieces at a NUL (issue 42), the search's
        // keeps it: a text holding one is snippeted by FTS5 as one row of a
        // table of its own with each NUL read as U+0001, which the
        // tokenizer takes for a separator too.
        let text = |rowid: i64| -> String {
            conn.query_row("SELECT text FROM records WHERE row_id = ?1", [rowid], |r| {
                r.get(0)
            })
            .unwrap()
        };
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.one
             USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')",
        )
        .unwrap();
        all.into_iter()
            .take(limit)
            .map(|(rowid, k, r)| {
                let t = text(rowid);
                if !t.contains('\0') {
                    let s: String = snippet
                        .query_row(rusqlite::params![fts, rowid], |r| r.get(0))
                        .unwrap();
                    return (k, r, s);
                }
                assert!(!t.contains('\u{1}'), "{k}");
                conn.execute("DELETE FROM temp.one", []).unwrap();
                conn.execute(
                    "INSERT INTO temp.one (text) VALUES (?1)",
                    [t.replace('\0', "\u{1}")],
                )
                .unwrap();
                let s: String = conn
                    .query_row(
                        "SELECT snippet(one, 0, '«', '»', '…', 16) FROM temp.one
                         WHERE one MATCH ?1",
                        [fts],
                        |r| r.get(0),
                    )
                    .unwrap();
                (k, r, s.replace('\u{1}', "\0"))
            })
            .collect()
    };
    let ours = |q: &Search| -> Vec<(String, f64, String)> {
        search(&db, q)
            .unwrap()
            .into_iter()
            .map(|h| (h.key, h.rank, h.snippet))
            .collect()
    };
    let words = |query: &str| Search {
        query: query.to_owned(),
        limit: 20,
        ..Search::default()
    };
    let matches = |fts: &str| -> usize {
        conn.query_row(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?1",
            [fts],
            |r| r.get::<_, i64>(0),
        )
        .unwrap() as usize
    };
    // One phrase seen whole, one past what is ranked, several phrases.
    let cases = [
        ("src/cli/run.rs", r#""src/cli/run.rs""#),
        ("parser", r#""parser""#),
        ("\"truncated last line\"", r#""truncated last line""#),
        ("buffer stream", r#""buffer" "stream""#),
        (
            "src/pi.rs parser parser",
            r#""src/pi.rs" "parser" "parser""#,
        ),
        ("naïve", r#""naïve""#),
    ];
    assert_eq!(matches(cases[0].1), 1);
    assert!(matches(cases[1].1) > RANKED, "{}", matches(cases[1].1));
    assert!(matches(cases[4].1) > 0);
    for (query, fts) in cases {
        let want = fts5(fts, "", 20);
        assert!(!want.is_empty(), "{query}");
        let got = ours(&words(query));
        assert_eq!(got.len(), want.len(), "{query}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.0, w.0, "{query}");
            assert_eq!(g.1.to_bits(), w.1.to_bits(), "{query}: {} vs {}", g.1, w.1);
            assert_eq!(g.2, w.2, "{query}: snippet");
        }
    }
    // Filtered: the counts are still the whole index's.
    let q = Search {
        role: Some("assistant".into()),
        ..words("parser")
    };
    assert_eq!(
        ours(&q),
        fts5(r#""parser""#, " AND r.role = 'assistant'", 20)
    );
    let q = Search {
        role: Some("assistant".into()),
        ..words("src/pi.rs")
    };
    let want = fts5(r#""src/pi.rs""#, " AND r.role = 'assistant'", 20);
    assert_eq!(want.len(), 20);
    assert_eq!(ours(&q), want);
    // FTS5 syntax: FTS5's own bm25().
    let q = Search {
        fts: true,
        ..words("parser OR stream")
    };
    assert_eq!(ours(&q), fts5("parser OR stream", "", 20));
    fs::remove_dir_all(d).unwrap();
}

/// Issue 41: a store refused for other options is named, as a store (not
/// a nameless "state file").
#[test]
fn a_store_of_other_agents_is_named_as_a_store() {
    let d = tmpdir("other-agents");
    let db = d.join("memory.db");
    let hand = fixtures().join("hand-built.jsonl");
    assert_eq!(backfill_db(&db, &[&hand]).status.code(), Some(0));
    let out = bin()
        .args(["backfill", "-q", "--source", "pi", "--db"])
        .arg(&db)
        .arg(&hand)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(out.stdout, b"");
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: the store {} was written with other options (--agent: store has \
             pi,gemini,qwen,copilot,amp,cline,claude,codex,opencode,goose,cursor, this run pi); use another store\n",
            db.display()
        )
    );
    fs::remove_dir_all(d).unwrap();
}

/// Issue 41: a store that cannot be made names the missing folder and
/// creates nothing; a store that does not exist says how one is made; a
/// run that finds no archive creates no store.
#[test]
fn missing_folders_stores_and_archives_create_nothing() {
    let d = tmpdir("missing");
    let db = d.join("missing/dir/m.db");
    let out = backfill_db(&db, &[&fixtures().join("hand-built.jsonl")]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: the store {} cannot be created: the folder {} does not exist\n",
            db.display(),
            d.join("missing/dir").display()
        )
    );
    assert!(!d.join("missing").exists());

    let nope = d.join("nope.db");
    let out = bin()
        .args(["search", "x", "--db"])
        .arg(&nope)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: {}: no such store (`mem-ingest backfill --db {}` creates one)\n",
            nope.display(),
            nope.display()
        )
    );
    assert!(!nope.exists());

    // No PATH and no default archive: the error, and no e.db, no lock.
    let home = d.join("home");
    fs::create_dir_all(&home).unwrap();
    let mut c = bin();
    for var in [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "PI_CODING_AGENT_DIR",
        "CURSOR_CONFIG_DIR",
    ] {
        c.env(var, &home);
    }
    let out = c
        .args(["backfill", "-q", "--db", "e.db"])
        .current_dir(&d)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let h = home.display();
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "error: no PATH given and pi's session archive {h}/sessions does not exist (set \
             PI_CODING_AGENT_SESSION_DIR or PI_CODING_AGENT_DIR, or name a PATH); no Gemini \
             CLI archive: no folder at {h}/.gemini/tmp; no Qwen \
             Code archive: no projects/ folder in {h}/.qwen/projects; no Copilot CLI archive: \
             no {h}/.copilot/session-state; no Amp archive: no folder at {h}/amp/threads, \
             {h}/.local/share/amp/threads; no Cline archive: no folder at {h}/.cline/data/tasks, \
             {h}/.cline/data/sessions, {h}/Code/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/Code - Insiders/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/VSCodium/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/Cursor/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/Library/Application Support/Code - Insiders/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/Library/Application Support/VSCodium/User/globalStorage/saoudrizwan.claude-dev, \
             {h}/Library/Application Support/Cursor/User/globalStorage/saoudrizwan.claude-dev; \
             no Claude Code archive: no projects/ folder in \
             {h}/projects; no Codex archive: no {h}/sessions nor {h}/archived_sessions; \
             no OpenCode archive: no opencode.db (or opencode-<channel>.db) and no storage/message/ \
             in {h}/opencode; \
             no Goose archive: no {h}/goose/sessions/sessions.db, \
             {h}/.local/share/goose/sessions/sessions.db, \
             {h}/Library/Application Support/Block/goose/sessions/sessions.db, \
             {h}/Library/Application Support/goose/sessions/sessions.db, \
             {h}/.local/share/Block/goose/sessions/sessions.db (nor a legacy *.jsonl \
             session beside one); no Cursor archive: no {h}/Cursor/User/globalStorage/state.vscdb, \
             {h}/.config/Cursor/User/globalStorage/state.vscdb, \
             {h}/Library/Application Support/Cursor/User/globalStorage/state.vscdb, \
             {h}/projects\n"
        )
    );
    let mut left: Vec<String> = fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["home"]);
    fs::remove_dir_all(d).unwrap();
}

/// Issue 42: a store whose pages are damaged (as a `-wal` deleted after a
/// kill leaves it) is an error that says so and what to do, for backfill
/// and search alike, and the file is left as it is.
#[test]
fn a_damaged_store_says_what_happened_and_what_to_do() {
    let d = tmpdir("damaged");
    let db = d.join("m.db");
    let s = d.join("s.jsonl");
    fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
    assert!(backfill_db(&db, &[&s]).status.success());
    // Every page but the first (the header and the schema) overwritten.
    let mut bytes = fs::read(&db).unwrap();
    assert!(bytes.len() > 3 * 4096);
    for b in &mut bytes[4096..] {
        *b = 0xA5;
    }
    fs::write(&db, &bytes).unwrap();
    let before = sha256(&db);
    // SQLite's own words in the parentheses: "database disk image is
    // malformed" for the rows, the full-text index's for the index.
    let (opens, says) = (
        format!("error: the store {} is damaged (", db.display()),
        "): a -wal file deleted after a crash or kill, or a failing disk, does this; restore \
         it from a backup, or move it aside and run backfill --db again to read the archive \
         anew (`sqlite3 FILE .recover` saves what is left of it)",
    );
    append(&s, &user_line("after-1", "after the damage"));
    let out = backfill_db(&db, &[&s]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(&opens) && err.contains("(database disk image is malformed)"),
        "{err}"
    );
    assert!(err.trim_end().ends_with(says), "{err}");
    let out = run(&[&"search", &"green", &"--db", &db]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with(&opens), "{err}");
    assert!(err.trim_end().ends_with(says), "{err}");
    assert_eq!(sha256(&db), before);
    fs::remove_dir_all(d).unwrap();
}

/// Issue 42: `search` by a user who cannot write the store's folder (WAL
/// mode wants its `-shm` beside the store): with no `-wal` holding rows
/// (none after a run that ended), the store is read as immutable and the
/// search answers; with one, the error says why and what to do. Runs the
/// search as `nobody` (setpriv), which needs root.
#[test]
#[ignore = "needs root, to search as another user (setpriv); .ci/run runs it"]
fn search_in_a_folder_the_user_cannot_write() {
    let d = tmpdir("read-only");
    let dir = d.join("ro");
    fs::create_dir_all(&dir).unwrap();
    let db = dir.join("m.db");
    let s = d.join("s.jsonl");
    fs::copy(fixtures().join("hand-built.jsonl"), &s).unwrap();
    // Shared with other users on purpose: a store is its owner's alone
    // (0600) unless --file-mode says otherwise.
    let out = bin()
        .args(["backfill", "-q", "--file-mode", "0644", "--db"])
        .arg(&db)
        .arg(&s)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.join("m.db-wal").exists());
    // A copy of the binary where `nobody` can run it, whatever folder the
    // build is in.
    let bin = d.join("mem-ingest");
    fs::copy(env!("CARGO_BIN_EXE_mem-ingest"), &bin).unwrap();
    let search = || {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["search", "--json", "build is green", "--db"])
            .arg(&db)
            .output()
            .expect("setpriv")
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    mode(&d, 0o755);
    mode(&dir, 0o555);
    let out = search();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let keys: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(keys, ["hand-built-0001:c0de000d"]);
    assert!(!dir.join("m.db-shm").exists());
    // A -wal that holds rows: they cannot be read without a -shm.
    mode(&dir, 0o755);
    fs::write(dir.join("m.db-wal"), [0u8; 32]).unwrap();
    mode(&dir, 0o555);
    let out = search();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: the store {} cannot be searched by this user: its folder cannot be written \
             and its -wal holds rows not yet in it, which SQLite reads only with a -shm file \
             beside it; search as a user who can write the folder, or let one run a backfill \
             --db (or `sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)'`) first",
            db.display()
        )
    );
    mode(&dir, 0o755);
    fs::remove_dir_all(d).unwrap();
}
