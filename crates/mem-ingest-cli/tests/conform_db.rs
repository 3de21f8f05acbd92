//! OpenCode and Goose token totals against ccusage 20.0.24, run on
//! databases of `scripts/gen-db.py` (`ccusage opencode|goose daily --json
//! --offline`, `TZ=UTC`): equal where ccusage counts right, and different
//! by exactly the documented amounts where it does not, each amount
//! computed by the script from the rows (`gen-db.py count`):
//!
//! - OpenCode: ccusage counts a message's own `tokens`, its last LLM
//!   call's only (we count every call's `step-finish`), reads one
//!   database per data folder (`opencode.db`; we read the channels'
//!   `opencode-<channel>.db` too, each message once), and counts the
//!   calls a fork copied again (we count each call once);
//! - Goose: ccusage counts a session found in two stores twice (we count
//!   it once), and no cache tokens.
//!
//! Ignored in a plain clone: they need ccusage (`CCUSAGE`, else
//! `/tmp/ccusage-reference/node_modules/.bin/ccusage`, which `.ci/run`
//! installs); there a missing tool is a failure.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const KEYS: [(&str, &str); 5] = [
    ("input", "inputTokens"),
    ("output", "outputTokens"),
    ("cache_read", "cacheReadTokens"),
    ("cache_write", "cacheCreationTokens"),
    ("total_tokens", "totalTokens"),
];

fn gen_db(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<u8> {
    let mut c = Command::new("python3");
    c.arg(common::shared::repo_root().join("scripts/gen-db.py"));
    for a in args {
        c.arg(a);
    }
    let out = c.output().expect("python3 scripts/gen-db.py");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn count(agent: &str, dir: &Path) -> Value {
    serde_json::from_slice(&gen_db(&[&"count", &agent, &dir])).unwrap()
}

/// ccusage's totals (by our names), `env` pointing it at the data.
fn theirs(agent: &str, env: &[(&str, &Path)]) -> Value {
    let mut c = Command::new(common::ccusage());
    c.args([agent, "daily", "--json", "--offline"])
        .env("TZ", "UTC")
        .env_remove("XDG_DATA_HOME")
        .env_remove("OPENCODE_DATA_DIR")
        .env_remove("GOOSE_PATH_ROOT");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "ccusage: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["totals"];
    KEYS.iter()
        .map(|(ours, theirs)| (ours.to_string(), t[theirs].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Our `stats` usage (tokens only).
fn ours(agent: &str, home: &Path) -> Value {
    let out = common::cli()
        .args(["stats", "--json", "-q", "--agent", agent])
        .env("HOME", home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("GOOSE_PATH_ROOT")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Value = serde_json::from_slice(&out.stdout).unwrap();
    KEYS.iter()
        .map(|(k, _)| (k.to_string(), s["usage"][k].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn n(v: &Value, k: &str) -> i64 {
    v[k].as_i64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// An OpenCode data folder generated under `home`'s XDG place.
fn opencode(home: &Path, extra: &[&str]) -> std::path::PathBuf {
    let data = home.join(".local/share/opencode");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"opencode", &data, &"--mb", &"3"];
    for e in extra {
        args.push(e);
    }
    gen_db(&args);
    data
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn opencode_answers_of_one_call_each_equal_ccusage() {
    let d = common::tmpdir("conform-db", "opencode-equal");
    let home = d.join("home");
    let data = opencode(&home, &["--steps", "1", "--seed", "3"]);
    let t = theirs("opencode", &[("OPENCODE_DATA_DIR", &data), ("HOME", &d)]);
    assert!(n(&t, "input") > 1_000_000, "{t}");
    assert_eq!(ours("opencode", &home), t);
    assert_eq!(count("opencode", &data)["ccusage"], t);
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn opencode_later_calls_and_a_channels_database_are_what_ccusage_misses() {
    let d = common::tmpdir("conform-db", "opencode-differ");
    let home = d.join("home");
    let data = opencode(
        &home,
        &[
            "--steps",
            "4",
            "--seed",
            "9",
            "--forks",
            "--channel",
            "local",
        ],
    );
    let want = count("opencode", &data);
    let t = theirs("opencode", &[("OPENCODE_DATA_DIR", &data), ("HOME", &d)]);
    // ccusage's totals are the script's account of what it reads: each
    // message's own tokens in opencode.db.
    assert_eq!(want["ccusage"], t);
    let o = ours("opencode", &home);
    assert_eq!(o, want["ours"]["usage"]);
    // The input tokens we count and ccusage does not: every call of an
    // answer but its last, and the channel database's own messages; and
    // those ccusage counts again: the calls a fork copied.
    let diff = &want["input_difference"];
    let (later, channel, forks) = (
        n(diff, "later_calls"),
        n(diff, "channel_only"),
        n(diff, "fork_copies"),
    );
    assert!(later > 0 && channel > 0 && forks > 0, "{diff}");
    assert_eq!(n(&o, "input") - n(&t, "input"), later + channel - forks);
    fs::remove_dir_all(d).unwrap();
}

#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn goose_one_store_equals_ccusage_and_a_session_in_two_stores_is_counted_once() {
    let d = common::tmpdir("conform-db", "goose");
    // One store: input and output equal; ccusage reads no cache tokens.
    let one = d.join("one");
    gen_db(&[&"goose", &one, &"--mb", &"3", &"--seed", &"4"]);
    let t = theirs("goose", &[("HOME", &one)]);
    let o = ours("goose", &one);
    assert!(n(&t, "input") > 1_000_000, "{t}");
    assert_eq!(o["input"], t["input"]);
    assert_eq!(o["output"], t["output"]);
    assert_eq!((n(&t, "cache_read"), n(&t, "cache_write")), (0, 0));
    assert!(n(&o, "cache_read") > 0 && n(&o, "cache_write") > 0, "{o}");
    assert_eq!(count("goose", &one)["ccusage"], t);
    // The same sessions in an older store too: twice there, once here.
    let two = d.join("two");
    gen_db(&[&"goose", &two, &"--mb", &"3", &"--seed", &"4", &"--second"]);
    let want = count("goose", &two);
    let t2 = theirs("goose", &[("HOME", &two)]);
    assert_eq!(want["ccusage"], t2);
    assert_eq!(ours("goose", &two), o);
    let twice = n(&want["input_difference"], "twice");
    assert!(twice > 0);
    assert_eq!(n(&t2, "input") - n(&o, "input"), twice);
    fs::remove_dir_all(d).unwrap();
}

/// Goose's legacy `<id>.jsonl` sessions (before 1.10), in the place
/// ccusage looks, with no database: ccusage 20.0.24 reads no JSONL file
/// and reports nothing; we count each session's accumulated tokens.
#[test]
#[ignore = "needs ccusage 20.0.24 (CCUSAGE)"]
fn goose_legacy_files_are_read_here_and_not_by_ccusage() {
    let home = common::tmpdir("conform-db", "goose-legacy");
    let dir = home.join(".local/share/goose/sessions");
    fs::create_dir_all(&dir).unwrap();
    for (id, i, o) in [("20250101_120000", 1000, 200), ("20250102_120000", 30, 7)] {
        fs::write(
            dir.join(format!("{id}.jsonl")),
            format!(
                "{{\"working_dir\":\"/p\",\"description\":\"t\",\"message_count\":1,\
                 \"total_tokens\":5,\"input_tokens\":4,\"output_tokens\":1,\
                 \"accumulated_total_tokens\":{},\"accumulated_input_tokens\":{i},\
                 \"accumulated_output_tokens\":{o}}}\n\
                 {{\"role\":\"user\",\"created\":1735732800,\"content\":[{{\"type\":\"text\",\"text\":\"hi\"}}]}}\n",
                i + o
            ),
        )
        .unwrap();
    }
    let t = theirs("goose", &[("HOME", &home)]);
    for (k, _) in KEYS {
        assert_eq!(n(&t, k), 0, "{t}");
    }
    let o = ours("goose", &home);
    assert_eq!(
        (n(&o, "input"), n(&o, "output"), n(&o, "total_tokens")),
        (1030, 207, 1237)
    );
    fs::remove_dir_all(home).unwrap();
}
