//! `scripts/gen-db.py`, the generator of OpenCode and Goose databases for
//! volume: two runs with the same seed give the same bytes, and `stats` on
//! a generated database equals the counts the script computes from the
//! rows with Python's sqlite3 and json (records by role, messages, usage),
//! exactly, channel databases, fork copies, pending answers and a second
//! Goose store included. The comparison with ccusage on the same
//! databases is `conform_db.rs`.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Runs `scripts/gen-db.py` with `args`; its stdout.
pub fn gen_db(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<u8> {
    let script = common::shared::repo_root().join("scripts/gen-db.py");
    let mut c = Command::new("python3");
    c.arg(&script);
    for a in args {
        c.arg(a);
    }
    let out = c.output().expect("python3 scripts/gen-db.py");
    assert!(
        out.status.success(),
        "gen-db.py {:?}: {}",
        args.iter()
            .map(|a| a.as_ref().to_owned())
            .collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn count(agent: &str, dir: &Path) -> Value {
    serde_json::from_slice(&gen_db(&[&"count", &agent, &dir])).unwrap()
}

fn stats(agent: &str, home: &Path, path: Option<&Path>) -> Value {
    let mut c = common::cli();
    c.args(["stats", "--json", "-q", "--agent", agent])
        .env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("GOOSE_PATH_ROOT");
    if let Some(p) = path {
        c.arg(p);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// `stats`' roles, usage and records equal the script's count.
fn assert_stats_equal(s: &Value, want: &Value, roles: &[&str]) {
    for r in roles {
        assert_eq!(s["roles"][r], want["records"][r], "records of role {r}");
    }
    let records: u64 = roles
        .iter()
        .map(|r| want["records"][r].as_u64().unwrap())
        .sum();
    assert_eq!(s["records"], records);
    for k in [
        "input",
        "output",
        "cache_read",
        "cache_write",
        "total_tokens",
    ] {
        assert_eq!(s["usage"][k], want["usage"][k], "usage {k}");
    }
    assert_eq!(s["skipped"], 0);
    assert_eq!(s["files_failed"], 0);
}

#[test]
fn generated_opencode_databases_are_reproducible_and_stats_equals_their_rows() {
    let d = common::tmpdir("gen-db", "opencode");
    let (a, b) = (d.join("a"), d.join("b"));
    for dir in [&a, &b] {
        gen_db(&[
            &"opencode",
            dir,
            &"--mb",
            &"2",
            &"--seed",
            &"11",
            &"--forks",
            &"--channel",
            &"local",
        ]);
    }
    let fa = files(&a);
    let names: Vec<_> = fa
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["opencode-local.db", "opencode.db"]);
    let fb = files(&b);
    assert!(
        fa.iter().zip(&fb).all(|(x, y)| x.1 == y.1),
        "two runs with one seed differ"
    );
    let size = fa[1].1.len() as f64 / 1048576.0;
    assert!((1.6..2.4).contains(&size), "opencode.db is {size} MB");

    let want = count("opencode", &a);
    let w = &want["ours"];
    // Every shape is there: pending answers, tool results, multi-call
    // answers, a channel's own messages.
    assert!(w["pending"].as_u64().unwrap() > 0, "{want}");
    assert!(
        w["records"]["tool_result"].as_u64().unwrap() > 100,
        "{want}"
    );
    assert!(want["input_difference"]["later_calls"].as_u64().unwrap() > 0);
    assert!(want["input_difference"]["channel_only"].as_u64().unwrap() > 0);
    assert!(want["input_difference"]["fork_copies"].as_u64().unwrap() > 0);

    // The data folder found with no PATH (both databases), and named.
    let home = d.join("home");
    let data = home.join(".local/share/opencode");
    fs::create_dir_all(data.parent().unwrap()).unwrap();
    fs::rename(&a, &data).unwrap();
    let roles = ["user", "assistant", "tool_result"];
    let s = stats("opencode", &home, None);
    assert_stats_equal(&s, w, &roles);
    assert_eq!(s["files"], 2);
    let named = stats("opencode", &d, Some(&data));
    assert_eq!(named["usage"], s["usage"]);
    assert_eq!(named["roles"], s["roles"]);
    // The store's usage table holds every call's row: an answer's calls
    // are at its line, told apart by their place (the key's `#n`).
    let store = d.join("store.db");
    let out = common::cli()
        .args(["backfill", "-q", "--agent", "opencode", "--db"])
        .arg(&store)
        .env("HOME", &home)
        .env_remove("XDG_DATA_HOME")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let db = rusqlite::Connection::open(&store).unwrap();
    let (n, sums) = store_usage_sums(&db);
    let usage = |k: &str| s["usage"][k].as_i64().unwrap();
    assert_eq!(
        sums,
        [
            usage("input"),
            usage("output"),
            usage("cache_read"),
            usage("cache_write"),
            usage("total_tokens")
        ]
    );
    let later: i64 = db
        .query_row(
            "SELECT count(*) FROM usage WHERE key LIKE '%#_%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(later > 0 && later < n, "{later} of {n} rows");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn generated_goose_databases_are_reproducible_and_stats_equals_their_rows() {
    let d = common::tmpdir("gen-db", "goose");
    let (a, b) = (d.join("a"), d.join("b"));
    for dir in [&a, &b] {
        gen_db(&[&"goose", dir, &"--mb", &"2", &"--seed", &"5", &"--second"]);
    }
    let fa = files(&a);
    let fb = files(&b);
    assert_eq!(fa.len(), 2);
    assert!(
        fa.iter().zip(&fb).all(|(x, y)| x.1 == y.1),
        "two runs with one seed differ"
    );
    let main = a.join(".local/share/goose/sessions/sessions.db");
    let size = fs::metadata(&main).unwrap().len() as f64 / 1048576.0;
    assert!((1.6..2.4).contains(&size), "sessions.db is {size} MB");

    let want = count("goose", &a);
    let w = &want["ours"];
    assert!(w["records"]["system"].as_u64().unwrap() > 0, "{want}");
    assert!(
        w["records"]["tool_result"].as_u64().unwrap() > 100,
        "{want}"
    );
    assert!(want["input_difference"]["twice"].as_u64().unwrap() > 0);

    // Both stores found with no PATH: the copied sessions once.
    let roles = ["user", "assistant", "tool_result", "system"];
    let s = stats("goose", &a, None);
    assert_stats_equal(&s, w, &roles);
    assert_eq!(s["files"], 2);
    // The usage rows written (`--usage-out`) are the same usage: a copied
    // message, at the row id a ledger row of that database has for its
    // id, takes none of the ledger's rows out with it.
    let (o, u) = (d.join("goose.ndjson"), d.join("goose.usage"));
    let out = common::cli()
        .args(["backfill", "-q", "--agent", "goose", "-o"])
        .arg(&o)
        .arg("--usage-out")
        .arg(&u)
        .env("HOME", &a)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sums = [0u64; 5];
    let keys = [
        "input",
        "output",
        "cache_read",
        "cache_write",
        "total_tokens",
    ];
    for l in fs::read_to_string(&u).unwrap().lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        for (i, k) in keys.iter().enumerate() {
            sums[i] += r[*k].as_u64().unwrap();
        }
    }
    assert_eq!(sums, keys.map(|k| s["usage"][k].as_u64().unwrap()));
    // The current store alone: its own rows.
    let only = d.join("only");
    fs::create_dir_all(only.join(".local/share/goose/sessions")).unwrap();
    fs::copy(&main, only.join(".local/share/goose/sessions/sessions.db")).unwrap();
    let s = stats("goose", &only, None);
    assert_stats_equal(&s, &count("goose", &only)["ours"], &roles);
    assert_eq!(s["usage"], stats("goose", &d, Some(&main))["usage"]);
    fs::remove_dir_all(d).unwrap();
}

/// The number of rows of a store's `usage` table, and the sums of their
/// `input`, `output`, `cache_read`, `cache_write` and `total_tokens`.
fn store_usage_sums(db: &rusqlite::Connection) -> (i64, [i64; 5]) {
    db.query_row(
        "SELECT count(*), sum(input), sum(output), sum(cache_read), sum(cache_write), \
         sum(total_tokens) FROM usage",
        [],
        |r| {
            Ok((
                r.get(0)?,
                [r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?],
            ))
        },
    )
    .unwrap()
}

/// Sums of `input`, `output`, `cache_read`, `cache_write` and
/// `total_tokens` over a `--usage-out` file's rows, and their number.
fn usage_out_sums(path: &Path) -> ([u64; 5], usize) {
    let mut sums = [0u64; 5];
    let mut n = 0;
    for l in fs::read_to_string(path).unwrap().lines() {
        let r: Value = serde_json::from_str(l).unwrap();
        for (i, k) in USAGE_KEYS.iter().enumerate() {
            sums[i] += r[*k].as_u64().unwrap();
        }
        n += 1;
    }
    (sums, n)
}

const USAGE_KEYS: [&str; 5] = [
    "input",
    "output",
    "cache_read",
    "cache_write",
    "total_tokens",
];

/// `usage daily --json`'s totals, in `USAGE_KEYS`' order.
fn usage_daily_totals(args: &[&dyn AsRef<std::ffi::OsStr>], home: &Path) -> [u64; 5] {
    let mut c = common::cli();
    c.args(["usage", "daily", "--json", "-q", "--agent", "opencode"])
        .env("HOME", home)
        .env("TZ", "UTC")
        .env_remove("XDG_DATA_HOME");
    for a in args {
        c.arg(a);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    [
        "inputTokens",
        "outputTokens",
        "cacheReadTokens",
        "cacheCreationTokens",
        "totalTokens",
    ]
    .map(|k| v["totals"][k].as_u64().unwrap())
}

/// A database whose rows run past a part (8 MiB of rows, here about 17 MB
/// of database) is handed over in parts as it is read: every sink's and
/// report's usage rows are those of every part, and sum to `stats`' usage
/// and the script's count exactly. (The rows of the batches read after
/// the first part's end were lost: 51,115,048 input tokens in the rows
/// where `stats` said 55,548,596.)
#[test]
fn a_database_read_in_parts_has_every_usage_row_in_every_sink() {
    let d = common::tmpdir("gen-db", "parts");
    let a = d.join("a");
    gen_db(&[&"opencode", &a, &"--mb", &"17", &"--forks"]);
    let db = a.join("opencode.db");
    let want = count("opencode", &a);
    let s = stats("opencode", &d, Some(&db));
    assert_stats_equal(&s, &want["ours"], &["user", "assistant", "tool_result"]);
    assert_eq!(s["usage"]["input"], 55_548_596);
    // And each model's share: the answers' calls counted in the part that
    // read them, under their own model (the split was off before, the
    // totals right).
    let by_model: std::collections::BTreeMap<String, u64> = s["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_owned(),
                m["input"].as_u64().unwrap(),
            )
        })
        .collect();
    let want_by_model: std::collections::BTreeMap<String, u64> = want["ours"]["input_by_model"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(by_model.len(), 4);
    assert_eq!(by_model, want_by_model, "stats' input by model");
    let want = USAGE_KEYS.map(|k| s["usage"][k].as_u64().unwrap());
    let backfill = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = common::cli();
        c.args(["backfill", "-q", "--agent", "opencode"])
            .env("HOME", &d)
            .env_remove("XDG_DATA_HOME");
        for a in args {
            c.arg(a);
        }
        let out = c.arg(&db).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // --usage-out: one row per counted call.
    let (o, u) = (d.join("out.ndjson"), d.join("usage.ndjson"));
    backfill(&[&"-o", &o, &"--usage-out", &u]);
    let (sums, rows) = usage_out_sums(&u);
    assert_eq!(sums, want, "--usage-out's rows");
    // The store's usage table: the same rows.
    let store = d.join("store.db");
    backfill(&[&"--db", &store]);
    let (n, sums) = store_usage_sums(&rusqlite::Connection::open(&store).unwrap());
    assert_eq!(n as usize, rows);
    assert_eq!(sums.map(|v| v as u64), want, "the store's usage table");
    // `usage daily --json`, from the database and from the store.
    assert_eq!(usage_daily_totals(&[&db], &d), want, "usage daily");
    assert_eq!(
        usage_daily_totals(&[&"--db", &store], &d),
        want,
        "usage daily --db"
    );
    fs::remove_dir_all(d).unwrap();
}
