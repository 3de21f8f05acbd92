//! `backfill -o FILE --usage-out USAGE`: a usage row per counted response
//! as NDJSON beside the records. Its sums equal `stats` for every agent, in
//! one run and in runs with a state; kill -9 at any moment and a re-run
//! leave each response's counts once; Claude Code's streamed responses
//! read across runs get correction rows that keep the sums right; the
//! state, -o and the usage file are one set.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("usage-out", name)
}

fn generate(dir: &Path, agent: &str, mb: u32, seed: u32) -> PathBuf {
    let arch = dir.join(agent);
    let g = gen_corpus::GenCorpus::new()
        .args(["--format", agent, "--archive"])
        .arg(&arch)
        .args(["--total-mb", &mb.to_string(), "--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    arch
}

fn backfill(args: &[&Path], flags: &[&str], paths: &[PathBuf]) -> Output {
    // args: -o, --usage-out and, when given, --state.
    let mut c = common::cli();
    c.args(["backfill", "-q"]).args(flags);
    c.arg("-o").arg(args[0]).arg("--usage-out").arg(args[1]);
    if let Some(s) = args.get(2) {
        c.arg("--state").arg(s);
    }
    c.args(paths).output().unwrap()
}

fn stats(paths: &[PathBuf]) -> Value {
    let o = common::cli()
        .args(["stats", "--json", "-q"])
        .args(paths)
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap()
}

fn rows(path: &Path) -> Vec<serde_json::Map<String, Value>> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| match serde_json::from_str(l).unwrap() {
            Value::Object(m) => m,
            v => panic!("{v}"),
        })
        .collect()
}

const COUNTS: [&str; 7] = [
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cache_write_1h",
    "reasoning",
    "total_tokens",
];

/// Each response's counts (rows summed by agent, session, file, line and
/// response: corrections included).
type ByResponse = BTreeMap<(String, String, String, i64, i64), [i64; 7]>;

fn by_response(path: &Path) -> ByResponse {
    let mut by = BTreeMap::new();
    for m in rows(path) {
        let s = |k: &str| m[k].as_str().unwrap().to_owned();
        let key = (
            s("agent"),
            s("session"),
            s("file"),
            m["line"].as_i64().unwrap(),
            m.get("response").map_or(-1, |r| r.as_i64().unwrap()),
        );
        let e: &mut [i64; 7] = by.entry(key).or_insert([0; 7]);
        for (k, n) in COUNTS.iter().enumerate() {
            e[k] += m[*n].as_i64().unwrap();
        }
    }
    by
}

/// Sums by agent of `input`, `output`, `cache_read`, `cache_write`,
/// `total_tokens`.
fn sums(path: &Path) -> BTreeMap<String, [i64; 5]> {
    let mut by = BTreeMap::new();
    for m in rows(path) {
        let e: &mut [i64; 5] = by
            .entry(m["agent"].as_str().unwrap().to_owned())
            .or_insert([0; 5]);
        for (k, n) in [
            "input",
            "output",
            "cache_read",
            "cache_write",
            "total_tokens",
        ]
        .iter()
        .enumerate()
        {
            e[k] += m[*n].as_i64().unwrap();
        }
    }
    by
}

/// The usage rows of every agent sum to `stats`' counts, written by one
/// run and by runs with a state that each read one agent more; a re-run
/// over an unchanged archive adds no row.
#[test]
fn usage_rows_sum_to_the_stats_of_every_agent() {
    let d = tmpdir("sums");
    let agents = ["pi", "gemini", "qwen", "copilot", "amp", "claude", "codex"];
    let ins: Vec<PathBuf> = agents.iter().map(|a| generate(&d, a, 2, 4)).collect();
    let (o, u) = (d.join("o.ndjson"), d.join("u.ndjson"));
    let out = backfill(&[&o, &u], &[], &ins);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (so, su, st) = (d.join("so.ndjson"), d.join("su.ndjson"), d.join("st"));
    for n in 1..=ins.len() {
        let out = backfill(&[&so, &su, &st], &[], &ins[..n]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = stats(&ins);
    let by = s["by_source"].as_object().unwrap();
    assert_eq!(by.len(), agents.len());
    for path in [&u, &su] {
        let got = sums(path);
        assert_eq!(got.len(), agents.len(), "{got:?}");
        for (agent, c) in &got {
            let w = &by[agent]["usage"];
            assert!(c[4] > 0, "{agent}");
            for (k, n) in [
                "input",
                "output",
                "cache_read",
                "cache_write",
                "total_tokens",
            ]
            .iter()
            .enumerate()
            {
                assert_eq!(
                    Some(c[k]),
                    w[*n].as_i64(),
                    "{agent} {n} in {}",
                    path.display()
                );
            }
        }
    }
    // The same responses, whichever way they were written.
    assert_eq!(by_response(&u), by_response(&su));
    // The records are those of a run without --usage-out.
    let plain = d.join("plain.ndjson");
    let c = common::cli()
        .args(["backfill", "-q", "-o"])
        .arg(&plain)
        .args(&ins)
        .output()
        .unwrap();
    assert!(c.status.success());
    assert_eq!(fs::read(&plain).unwrap(), fs::read(&o).unwrap());
    let before = fs::read(&su).unwrap();
    assert!(backfill(&[&so, &su, &st], &[], &ins).status.success());
    assert_eq!(fs::read(&su).unwrap(), before);
    fs::remove_dir_all(d).unwrap();
}

/// kill -9 at growing delays, then a run to the end: each response's
/// counts once, as a run not killed wrote them, and the records too.
#[test]
fn killed_at_any_moment_every_usage_row_exactly_once() {
    let d = tmpdir("kill");
    let ins = [generate(&d, "pi", 8, 5), generate(&d, "claude", 3, 5)];
    let (co, cu) = (d.join("co.ndjson"), d.join("cu.ndjson"));
    let t = std::time::Instant::now();
    assert!(backfill(&[&co, &cu], &["--jobs", "2"], &ins)
        .status
        .success());
    let pace = t.elapsed().as_millis() as u64;
    let (o, u, st) = (d.join("o.ndjson"), d.join("u.ndjson"), d.join("st"));
    let kills = common::kill_until_it_finishes(
        || {
            let mut c = common::cli();
            c.args([
                "backfill",
                "-q",
                "--jobs",
                "2",
                "--checkpoint-ms",
                "5",
                "-o",
            ])
            .arg(&o)
            .arg("--usage-out")
            .arg(&u)
            .arg("--state")
            .arg(&st)
            .args(&ins);
            c
        },
        pace,
        "usage-out",
    );
    let want = by_response(&cu);
    let got = by_response(&u);
    assert_eq!(got.len(), want.len(), "after {kills} kills");
    assert!(got == want, "after {kills} kills");
    let mut a: Vec<String> = fs::read_to_string(&o)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let mut b: Vec<String> = fs::read_to_string(&co)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    a.sort();
    b.sort();
    assert!(a == b, "records after {kills} kills");
    let s = stats(&ins);
    let total: i64 = got.values().map(|c| c[6]).sum();
    assert_eq!(Some(total), s["usage"]["total_tokens"].as_i64());
    fs::remove_dir_all(d).unwrap();
}

/// A later copy of `msg_01C` (no request id: the same response within the
/// session) with more output tokens than the file's.
const MSG_01C_AGAIN: &str = r#"{"parentUuid":"c7","isSidechain":false,"cwd":"/tmp/claude-fixture","sessionId":"fx-claude-1","type":"assistant","uuid":"c8","timestamp":"2026-03-02T09:01:08.000Z","message":{"id":"msg_01C","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"Fixed, and tested."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":9}},"costUSD":0.25}
"#;

/// Claude Code's streamed responses across runs: the first, provisional
/// line's row, then a correction row of the difference when the final one
/// is read, and one for a larger copy later; the sums after each run are
/// a fresh `stats`', by response a fresh run's.
#[test]
fn claude_streamed_responses_sum_to_stats_across_runs() {
    let d = tmpdir("claude-runs");
    let s = d.join("claude-usage.jsonl");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/claude-usage.jsonl");
    let all = fs::read_to_string(data).unwrap();
    let lines: Vec<&str> = all.split_inclusive('\n').collect();
    fs::write(&s, lines[..2].concat()).unwrap();
    let (o, u, st) = (d.join("o.ndjson"), d.join("u.ndjson"), d.join("st"));
    let run = || {
        let out = backfill(&[&o, &u, &st], &[], std::slice::from_ref(&s));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stats(std::slice::from_ref(&s))["usage"]["total_tokens"]
            .as_i64()
            .unwrap()
    };
    let got = || {
        rows(&u)
            .iter()
            .map(|m| {
                (
                    m["response"].as_i64().unwrap(),
                    m["total_tokens"].as_i64().unwrap(),
                    m["correction"].as_bool().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), 111);
    assert_eq!(got(), [(0, 111, false)]);
    fs::write(&s, &all).unwrap();
    assert_eq!(run(), 221);
    assert_eq!(
        got(),
        [
            (0, 111, false),
            (0, 74, true),
            (1, 28, false),
            (2, 8, false)
        ]
    );
    let before = fs::read(&u).unwrap();
    assert_eq!(run(), 221);
    assert_eq!(fs::read(&u).unwrap(), before);
    common::append(&s, MSG_01C_AGAIN);
    assert_eq!(run(), 227);
    let third = got();
    assert_eq!(third[4], (2, 6, true));
    assert_eq!(third.iter().map(|r| r.1).sum::<i64>(), 227);
    let cost: f64 = rows(&u).iter().map(|m| m["cost"].as_f64().unwrap()).sum();
    let want = stats(std::slice::from_ref(&s))["usage"]["cost"]
        .as_f64()
        .unwrap();
    assert!((cost - want).abs() < 1e-9, "{cost} against {want}");
    let (fo, fu) = (d.join("fo.ndjson"), d.join("fu.ndjson"));
    assert!(backfill(&[&fo, &fu], &[], std::slice::from_ref(&s))
        .status
        .success());
    assert_eq!(rows(&fu).len(), 3);
    assert_eq!(by_response(&fu), by_response(&u));
    fs::remove_dir_all(d).unwrap();
}

/// A Claude Code line of session `fx-side`, `uuid` `u`, of `kind` (`user`,
/// or `assistant` with message `msg_S`, request `req_S` and `output`
/// tokens), a sidechain's or not.
fn side_line(u: &str, kind: &str, sidechain: bool, output: u64, at: &str) -> String {
    let message = if kind == "assistant" {
        format!(
            r#"{{"id":"msg_S","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"part {u}"}}],"stop_reason":null,"usage":{{"input_tokens":10,"output_tokens":{output}}}}},"requestId":"req_S""#
        )
    } else {
        format!(r#"{{"role":"user","content":"line {u}"}}"#)
    };
    format!(
        r#"{{"parentUuid":null,"isSidechain":{sidechain},"cwd":"/tmp/side","sessionId":"fx-side","type":"{kind}","uuid":"{u}","timestamp":"2026-03-02T10:00:{at}.000Z","message":{message}}}"#
    ) + "\n"
}

/// Why a Claude Code response's row is not held until its response is
/// final in its file (docs/usage.md, "Why Claude Code's rows are
/// corrected, not held"): a response is counted once across the archive,
/// and a copy that is final in its own file (a later line follows it:
/// here a subagent's sidechain copy of the response's first streamed
/// line) is replaced by a larger copy in another file that a later run
/// reads (the main session's, with the final usage). A row held until
/// final would be the same first row; the correction row after it keeps
/// the sums. After each run of a series the NDJSON rows and the store's
/// sum to a fresh `stats`', and response by response to a fresh run's.
#[test]
fn a_response_final_in_its_file_is_corrected_by_a_larger_copy_in_another() {
    let d = tmpdir("claude-cross-file");
    let arch = d.join("arch");
    fs::create_dir_all(&arch).unwrap();
    let side = arch.join("agent-a1.jsonl");
    let main = arch.join("main.jsonl");
    fs::write(
        &side,
        side_line("s1", "assistant", true, 1, "01") + &side_line("s2", "user", true, 0, "02"),
    )
    .unwrap();
    let (o, u, st) = (d.join("o.ndjson"), d.join("u.ndjson"), d.join("st"));
    let db = d.join("s.db");
    let paths = [side.clone(), main.clone()];
    let run = |n: usize| {
        let out = backfill(&[&o, &u, &st], &[], &paths[..n]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = common::cli()
            .args(["backfill", "-q", "--db"])
            .arg(&db)
            .args(&paths[..n])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stats(&paths[..n])["usage"]["total_tokens"]
            .as_i64()
            .unwrap()
    };
    let got = || {
        rows(&u)
            .iter()
            .map(|m| {
                (
                    m["response"].as_i64().unwrap(),
                    m["total_tokens"].as_i64().unwrap(),
                    m["correction"].as_bool().unwrap(),
                )
            })
            .collect::<Vec<_>>()
    };
    let db_sum = || {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.query_row(
            "SELECT count(*) || '|' || sum(total_tokens) FROM usage",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap()
    };
    // The sidechain's copy: final in its file (a line follows it).
    assert_eq!(run(1), 11);
    assert_eq!(got(), [(0, 11, false)]);
    assert_eq!(db_sum(), "1|11");
    // The main session's copy, larger, in a file the next run reads.
    fs::write(
        &main,
        side_line("m1", "user", false, 0, "00")
            + &side_line("m2", "assistant", false, 40, "03")
            + &side_line("m3", "user", false, 0, "04"),
    )
    .unwrap();
    assert_eq!(run(2), 50);
    assert_eq!(got(), [(0, 11, false), (0, 39, true)]);
    assert_eq!(db_sum(), "1|50");
    // Unchanged: nothing more.
    assert_eq!(run(2), 50);
    assert_eq!(got().len(), 2);
    let (fo, fu) = (d.join("fo.ndjson"), d.join("fu.ndjson"));
    assert!(backfill(&[&fo, &fu], &[], &paths).status.success());
    assert_eq!(rows(&fu).len(), 1);
    assert_eq!(by_response(&fu), by_response(&u));
    fs::remove_dir_all(d).unwrap();
}

/// The state, -o and the usage file are one set: a usage file added to a
/// state that had none is paired from then on (its rows from then); a run
/// without it is refused, as is one with another, or a usage file holding
/// bytes the state does not cover; nothing is written by a refused run.
#[test]
fn the_state_and_its_usage_file_are_one_pair() {
    let d = tmpdir("pair");
    let f = common::fixtures();
    let one = d.join("one.jsonl");
    fs::copy(f.join("hand-built.jsonl"), &one).unwrap();
    let (o, u, st) = (d.join("o.ndjson"), d.join("u.ndjson"), d.join("st"));
    let plain = |args: &[&str]| {
        common::cli()
            .args(["backfill", "-q", "-o"])
            .arg(&o)
            .arg("--state")
            .arg(&st)
            .args(args)
            .arg(&one)
            .output()
            .unwrap()
    };
    assert!(plain(&[]).status.success());
    // Added later: rows for what is read from then on.
    common::append(&one, &common::user_line("x1", "one more"));
    let out = plain(&["--usage-out", u.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(&u).unwrap(), b"");
    let hand = f.join("pi-classic.jsonl");
    let two = d.join("two.jsonl");
    fs::copy(&hand, &two).unwrap();
    let out = common::cli()
        .args(["backfill", "-q", "-o"])
        .arg(&o)
        .arg("--state")
        .arg(&st)
        .arg("--usage-out")
        .arg(&u)
        .arg(&one)
        .arg(&two)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n = rows(&u).len();
    let s = stats(std::slice::from_ref(&two));
    assert_eq!(
        Some(
            rows(&u)
                .iter()
                .map(|m| m["total_tokens"].as_i64().unwrap())
                .sum::<i64>()
        ),
        s["usage"]["total_tokens"].as_i64()
    );
    assert!(n > 0);
    let (oh, uh, sh) = (common::sha256(&o), common::sha256(&u), common::sha256(&st));
    // Without it: refused, exit 2.
    common::append(&two, &common::user_line("x2", "again"));
    let out = plain(&[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "the state pairs with the usage rows' file {} as well: give --usage-out {}",
            u.display(),
            u.display()
        )),
        "{err}"
    );
    // Another one: refused.
    let other = d.join("other.ndjson");
    let out = plain(&["--usage-out", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "the state pairs with the output {}, not {}",
            u.display(),
            other.display()
        )),
        "{err}"
    );
    assert_eq!(
        (common::sha256(&o), common::sha256(&u), common::sha256(&st)),
        (oh, uh.clone(), sh)
    );
    // A new state with a usage file that holds rows of another: refused.
    let st2 = d.join("st2");
    let o2 = d.join("o2.ndjson");
    let out = backfill(&[&o2, &u, &st2], &[], std::slice::from_ref(&one));
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(common::sha256(&u), uh);
    // Its own file, whatever the spelling: refused before anything.
    let out = backfill(&[&o, &o], &[], std::slice::from_ref(&one));
    assert_eq!(out.status.code(), Some(2));
    fs::remove_dir_all(d).unwrap();
}
