//! Incremental backfill: checkpoints, resume, exactly once under kill -9,
//! deduplication of forks and repeated histories, following live sessions.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{append, sha256};

fn bin() -> Command {
    common::cli()
}

fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    common::run(args)
}

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("state", name)
}

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn records(bytes: &[u8]) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

fn keys(bytes: &[u8]) -> Vec<String> {
    records(bytes)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_owned())
        .collect()
}

const HEADER_A: &str = r#"{"type":"session","version":3,"id":"sess-a","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/p"}"#;

fn msg(id: &str, second: u32, text: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:{second:02}.000Z","message":{{"role":"user","content":"{text}","timestamp":{}}}}}"#,
        1_767_225_600_000u64 + u64::from(second) * 1000
    )
}

fn stats(state: &Path, dir: &Path) -> Value {
    let out = run(&[&"stats", &"--json", &"-q", &"--state", &state, &dir]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn rerun_reads_only_what_is_new() {
    let d = tmpdir("rerun");
    let archive = d.join("sessions");
    fs::create_dir_all(archive.join("--tmp-p--")).unwrap();
    let s = archive.join("--tmp-p--/2026-01-01T00-00-00-000Z_sess-a.jsonl");
    fs::write(
        &s,
        format!(
            "{HEADER_A}\n{}\n{}\n",
            msg("a1", 1, "one"),
            msg("a2", 2, "two")
        ),
    )
    .unwrap();
    fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/hand-built.jsonl"),
        archive.join("--tmp-p--/hand.jsonl"),
    )
    .unwrap();
    let (state, out) = (d.join("state.json"), d.join("out.ndjson"));
    let backfill = || {
        run(&[
            &"backfill",
            &"-q",
            &"--state",
            &state,
            &"-o",
            &out,
            &archive,
        ])
    };

    let r = backfill();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(keys(&fs::read(&out).unwrap()).len(), 2 + 22);

    // Unchanged: nothing new, and the files are not even opened (made
    // unreadable: a run that opened them would fail).
    let summary = bin()
        .args(["backfill", "--state"])
        .arg(&state)
        .arg("-o")
        .arg(&out)
        .arg(&archive)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&summary.stderr);
    assert!(err.contains("2 unchanged, 0 resumed, 0 re-read"), "{err}");
    assert!(err.contains("24 records (0 written)"), "{err}");
    assert_eq!(keys(&fs::read(&out).unwrap()).len(), 24);

    // Grown: a whole line, then half of one.
    let third = msg("a3", 3, "three");
    let fourth = msg("a4", 4, "four");
    append(&s, &format!("{third}\n{}", &fourth[..20]));
    let r = backfill();
    assert!(r.status.success());
    let got = keys(&fs::read(&out).unwrap());
    assert_eq!(got.len(), 25);
    assert_eq!(got[24], "sess-a:a3");
    // The partial line waits: stats shows it as pending.
    let st = stats(&d.join("stats-state.json"), &archive);
    assert_eq!(st["pending"], 20);
    assert_eq!(st["skipped"], 0);
    assert_eq!(st["records"], 25);
    // The writer finishes the line.
    append(&s, &format!("{}\n", &fourth[20..]));
    let r = backfill();
    assert!(r.status.success());
    let got = keys(&fs::read(&out).unwrap());
    assert_eq!(got[25..], ["sess-a:a4".to_owned()]);
    let st = stats(&d.join("stats-state.json"), &archive);
    assert_eq!(
        (st["pending"].as_u64(), st["records"].as_u64()),
        (Some(0), Some(26))
    );
    // The resumed record carries its true line and byte.
    let last = records(&fs::read(&out).unwrap()).pop().unwrap();
    let text = fs::read_to_string(&s).unwrap();
    assert_eq!(last["line"], 5);
    assert_eq!(
        last["byte"].as_u64().unwrap() as usize,
        text.find(&fourth).unwrap()
    );

    // The same records as one run over the final archive, each once (in
    // the order the runs found them).
    let fresh = run(&[&"backfill", &"-q", &archive]);
    let sorted = |b: &[u8]| {
        let mut v: Vec<Vec<u8>> = b.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
        v.sort();
        v
    };
    assert!(sorted(&fs::read(&out).unwrap()) == sorted(&fresh.stdout));
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn unchanged_files_are_not_opened() {
    let d = tmpdir("noopen");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
    let s = d.join("s.jsonl");
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let state = d.join("state.json");
    let as_user = |args: &[&dyn AsRef<std::ffi::OsStr>]| {
        let mut c = common::unprivileged_cli();
        c.args(args.iter().map(|a| a.as_ref())).output().unwrap()
    };
    fs::set_permissions(&s, fs::Permissions::from_mode(0o644)).unwrap();
    let first = as_user(&[&"stats", &"--json", &"-q", &"--state", &state, &d]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    // chmod leaves size and mtime alone: the file is unchanged, unreadable.
    fs::set_permissions(&s, fs::Permissions::from_mode(0o000)).unwrap();
    let second = as_user(&[&"stats", &"--json", &"-q", &"--state", &state, &d]);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(first.stdout, second.stdout);
    // Without the state it must open the file, and cannot.
    let third = as_user(&[&"stats", &"--json", &"-q", &d]);
    assert_eq!(third.status.code(), Some(1));
    fs::set_permissions(&s, fs::Permissions::from_mode(0o644)).unwrap();
    fs::remove_dir_all(d).unwrap();
}

/// A file gone from the archive leaves the state: a new file at its path
/// later is new, not "replaced", and the others stay unchanged.
#[test]
fn deleted_file_leaves_the_state() {
    let d = tmpdir("deleted");
    let arch = d.join("arch");
    fs::create_dir_all(&arch).unwrap();
    for (name, id) in [("a.jsonl", "a1"), ("b.jsonl", "b1"), ("c.jsonl", "c1")] {
        fs::write(arch.join(name), format!("{HEADER_A}\n{}\n", msg(id, 1, id))).unwrap();
    }
    let state = d.join("state");
    let backfill = || {
        let out = run(&[&"backfill", &"--no-dedupe", &"--state", &state, &arch]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (keys(&out.stdout), String::from_utf8(out.stderr).unwrap())
    };
    let (first, _) = backfill();
    assert_eq!(first.len(), 3);
    let size_before = fs::metadata(&state).unwrap().len();
    fs::remove_file(arch.join("b.jsonl")).unwrap();
    let (second, summary) = backfill();
    assert!(second.is_empty(), "{second:?}");
    assert!(
        summary.contains(", 2 unchanged, 0 resumed, 0 re-read"),
        "{summary}"
    );
    assert!(fs::metadata(&state).unwrap().len() < size_before);
    // Another file at b's path: new to the state, so not a re-read.
    fs::write(
        arch.join("b.jsonl"),
        format!(
            "{HEADER_A}\n{}\n{}\n",
            msg("b2", 2, "again"),
            msg("b3", 3, "more")
        ),
    )
    .unwrap();
    let (third, summary) = backfill();
    assert_eq!(third.len(), 2, "{third:?}");
    assert!(
        summary.contains(", 2 unchanged, 0 resumed, 0 re-read"),
        "{summary}"
    );
    assert!(!summary.contains("replaced"), "{summary}");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn replaced_file_is_read_again_and_copies_dropped() {
    let d = tmpdir("replace");
    let s = d.join("s.jsonl");
    fs::write(
        &s,
        format!(
            "{HEADER_A}\n{}\n{}\n",
            msg("a1", 1, "one"),
            msg("a2", 2, "two")
        ),
    )
    .unwrap();
    let (state, out) = (d.join("state.json"), d.join("out.ndjson"));
    let r = run(&[&"backfill", &"-q", &"--state", &state, &"-o", &out, &s]);
    assert!(r.status.success());
    // Replaced by a new file (new inode): a rewrite that kept a1 and changed
    // the rest.
    let tmp = d.join("new.tmp");
    fs::write(
        &tmp,
        format!(
            "{HEADER_A}\n{}\n{}\n",
            msg("a1", 1, "one"),
            msg("b2", 2, "new")
        ),
    )
    .unwrap();
    fs::rename(&tmp, &s).unwrap();
    let r = run(&[&"backfill", &"--state", &state, &"-o", &out, &s]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("1 files shrank or were replaced"), "{err}");
    assert!(err.contains("0 unchanged, 0 resumed, 1 re-read"), "{err}");
    assert_eq!(
        keys(&fs::read(&out).unwrap()),
        ["sess-a:a1", "sess-a:a2", "sess-a:b2"]
    );
    // Shrunk: read again too.
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let r = run(&[&"backfill", &"--state", &state, &"-o", &out, &s]);
    assert!(String::from_utf8_lossy(&r.stderr).contains("1 re-read"));
    assert_eq!(keys(&fs::read(&out).unwrap()).len(), 3);
    // Without deduplication, the records of a re-read file come again.
    let (state2, out2) = (d.join("state2.json"), d.join("out2.ndjson"));
    run(&[
        &"backfill",
        &"-q",
        &"--no-dedupe",
        &"--state",
        &state2,
        &"-o",
        &out2,
        &s,
    ]);
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("z1", 1, "x"))).unwrap();
    run(&[
        &"backfill",
        &"-q",
        &"--no-dedupe",
        &"--state",
        &state2,
        &"-o",
        &out2,
        &s,
    ]);
    assert_eq!(keys(&fs::read(&out2).unwrap()), ["sess-a:a1", "sess-a:z1"]);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn other_options_and_a_second_run_refuse() {
    let d = tmpdir("refuse");
    let s = d.join("s.jsonl");
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let (state, out) = (d.join("state.json"), d.join("out.ndjson"));
    assert!(run(&[
        &"backfill",
        &"-q",
        &"--state",
        &state,
        &"-o",
        &out,
        &"--role",
        &"user",
        &s
    ])
    .status
    .success());
    let r = run(&[&"backfill", &"-q", &"--state", &state, &"-o", &out, &s]);
    assert_eq!(r.status.code(), Some(2));
    // Issue 41: no roles is "all roles", not `[]`.
    assert_eq!(
        String::from_utf8_lossy(&r.stderr),
        format!(
            "error: the state {} was written with other options (--role: state has user, \
             this run all roles); use another state file\n",
            state.display()
        )
    );
    let r = run(&[
        &"backfill",
        &"-q",
        &"--state",
        &state,
        &"-o",
        &out,
        &"--role",
        &"user",
        &"--max-text",
        &"9",
        &s,
    ]);
    assert_eq!(r.status.code(), Some(2));
    let r = run(&[&"stats", &"-q", &"--state", &state, &s]);
    assert_eq!(r.status.code(), Some(2));
    // Another output than the one the state pairs with.
    let r = run(&[
        &"backfill",
        &"-q",
        &"--state",
        &state,
        &"-o",
        &d.join("other"),
        &"--role",
        &"user",
        &s,
    ]);
    assert_eq!(r.status.code(), Some(2));
    // A lock held by another run.
    let lock = fs::OpenOptions::new()
        .write(true)
        .open(d.join("state.json.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    let r = run(&[
        &"backfill",
        &"-q",
        &"--state",
        &state,
        &"-o",
        &out,
        &"--role",
        &"user",
        &s,
    ]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("another mem-ingest run is using the state")
    );
    drop(lock);
    assert!(run(&[
        &"backfill",
        &"-q",
        &"--state",
        &state,
        &"-o",
        &out,
        &"--role",
        &"user",
        &s
    ])
    .status
    .success());
    // An output longer than the state says (a torn tail) is cut back.
    append(&out, "{\"torn\":");
    assert!(run(&[
        &"backfill",
        &"-q",
        &"--state",
        &state,
        &"-o",
        &out,
        &"--role",
        &"user",
        &s
    ])
    .status
    .success());
    assert_eq!(keys(&fs::read(&out).unwrap()), ["sess-a:a1"]);
    fs::remove_dir_all(d).unwrap();
}

/// An archive of pi-written sessions under distinct session ids, some
/// large enough to be read in parts.
fn archive(dir: &Path) -> PathBuf {
    let root = dir.join("archive");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for (i, name) in [
        "pi-1x.jsonl",
        "pi-classic.jsonl",
        "hand-built.jsonl",
        "pi-1x.jsonl",
        "pi-classic.jsonl",
    ]
    .iter()
    .enumerate()
    {
        let text = fs::read_to_string(fixtures.join(name)).unwrap();
        let first_id = text
            .split("\"id\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_owned();
        let mut body = text.replacen(&first_id, &format!("kill-{i}"), 1);
        if i == 3 {
            // One session over 8 MiB: read in parts, entries made distinct.
            let lines: Vec<&str> = text.lines().skip(1).collect();
            let mut big = body.lines().next().unwrap().to_owned() + "\n";
            let mut round = 0;
            while big.len() < 20_000_000 {
                for l in &lines {
                    big.push_str(&l.replace("\"id\":\"", &format!("\"id\":\"r{round}-")));
                    big.push('\n');
                }
                round += 1;
            }
            body = big;
        }
        let folder = root.join(format!("--tmp-p{}--", i % 2));
        fs::create_dir_all(&folder).unwrap();
        fs::write(
            folder.join(format!("2026-01-0{}T00-00-00-000Z_kill-{i}.jsonl", i + 1)),
            body,
        )
        .unwrap();
    }
    // A compressed Codex rollout of 20 MB: one stream, its records handed
    // over every 8 MiB of lines as it is read (with deduplication).
    let codex = root.join("rollout-2026-01-06T00-00-00-kill-z.jsonl.zst");
    let (text, _) = common::codex_rollout("kill-z", 20_000_000);
    fs::write(&codex, zstd::encode_all(&text[..], 3).unwrap()).unwrap();
    root
}

/// How long until `out` holds `n` records (a follow run writing them);
/// fails after 10 s.
fn records_within_10s(out: &Path, n: usize) -> Duration {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if fs::read(out).map(|b| keys(&b).len()).unwrap_or(0) >= n {
            return t.elapsed();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no {n} records after 10 s");
}

#[test]
fn killed_at_any_moment_every_record_exactly_once() {
    // Without deduplication: the state and the output alone must keep each
    // record once (deduplication would hide a doubled one).
    killed_runs("kill", "--no-dedupe", false);
}

#[test]
fn interrupted_at_any_moment_every_record_exactly_once() {
    // SIGINT and SIGTERM stop a run cleanly, state saved, also inside a
    // file. No deduplication to hide a double.
    killed_runs("interrupt", "--no-dedupe", true);
}

#[test]
fn killed_while_deduplicating_every_record_exactly_once() {
    // With deduplication, a compressed rollout hands its records over as it
    // is read: no checkpoint may say they are written before its end.
    killed_runs("kill-dedupe", "--jobs", false);
}

#[test]
fn stopped_while_deduplicating_every_record_exactly_once() {
    // The same with deduplication on (the lineages are saved with the
    // state).
    killed_runs("interrupt-dedupe", "--jobs", true);
}

/// Runs backfill --state -o over a generated archive, stopping it after
/// growing delays until one run finishes; the output must then be exactly a
/// clean run's. `extra` is one more argument (`--jobs` is harmless).
fn killed_runs(name: &str, extra: &str, polite: bool) {
    let d = tmpdir(name);
    let root = archive(&d);
    let extra_args: Vec<&str> = if extra == "--jobs" {
        vec![]
    } else {
        vec![extra]
    };
    let clean_started = Instant::now();
    let clean = bin()
        .args(["backfill", "-q", "--jobs", "2"])
        .args(&extra_args)
        .arg(&root)
        .output()
        .unwrap();
    // The steps between stops are cut to the run's pace: an optimised
    // build on a fast machine finishes within two steps of a debug build's.
    let pace = u64::try_from(clean_started.elapsed().as_millis()).unwrap_or(u64::MAX);
    assert!(clean.status.success());
    let want = clean.stdout;
    assert!(keys(&want).len() > 8_000);
    let (state, out) = (d.join("state.json"), d.join("out.ndjson"));
    // backfill of the archive into the state and output pair.
    let backfill = || {
        let mut c = bin();
        c.args(["backfill", "-q", "--jobs", "2"])
            .args(&extra_args)
            .arg("--state")
            .arg(&state)
            .arg("-o")
            .arg(&out)
            .arg(&root);
        c
    };
    // A loaded machine can let a run finish before it is stopped often
    // enough: the whole sequence is tried again from nothing (a fresh state
    // and output) at a finer pace, up to four times; every sequence's
    // output is checked.
    let mut pace = pace;
    let mut kills = 0;
    for _try in 0..4 {
        let _ = fs::remove_file(&state);
        let _ = fs::remove_file(&out);
        kills = 0;
        let mut delay_ms = (pace / 10).clamp(1, 5);
        let started = Instant::now();
        loop {
            // Killed runs checkpoint as often as they can; a clean stop must
            // save the state itself (no checkpoint in between to lean on).
            let checkpoint = if polite { "5000" } else { "1" };
            let mut child = backfill()
                .args(["--checkpoint-ms", checkpoint])
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
            match done {
                Some(st) => {
                    assert!(st.success(), "a run failed");
                    break;
                }
                None => {
                    if polite {
                        let sig = if kills % 2 == 0 { "-INT" } else { "-TERM" };
                        Command::new("kill")
                            .arg(sig)
                            .arg(child.id().to_string())
                            .status()
                            .unwrap();
                        let st = child.wait().unwrap();
                        // Stopped cleanly (130), or it had just finished; or the
                        // signal came while the process was still starting, before
                        // it could take signals over, and ended it like a kill.
                        use std::os::unix::process::ExitStatusExt;
                        let started_up = matches!(st.code(), Some(130) | Some(0));
                        let too_early = matches!(st.signal(), Some(2) | Some(15));
                        assert!(started_up || too_early, "{st:?}");
                    } else {
                        child.kill().unwrap(); // SIGKILL
                        child.wait().unwrap();
                    }
                    kills += 1;
                }
            }
            // Stop at many points: early, in the middle of files, late (a
            // clean stop resumes where it stopped, so it steps more finely).
            delay_ms = if polite {
                delay_ms + (pace / 6).clamp(1, 20)
            } else {
                delay_ms * 3 / 2 + (pace / 10).clamp(1, 7)
            };
            assert!(
                started.elapsed() < Duration::from_secs(240),
                "did not finish"
            );
        }
        let got = fs::read(&out).unwrap();
        let (g, w) = (keys(&got), keys(&want));
        assert_eq!(
            g.len(),
            w.len(),
            "records lost or doubled after {kills} stops"
        );
        assert!(
            got == want,
            "output differs from a clean run after {kills} stops"
        );
        if kills >= 3 {
            break;
        }
        pace = (pace / 2).max(1);
    }
    assert!(
        kills >= 3,
        "only {kills} stops in four tries: the runs were too fast to test anything"
    );
    // And a re-run adds nothing.
    let again = backfill().output().unwrap();
    assert!(again.status.success());
    assert!(fs::read(&out).unwrap() == want);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn forks_and_repeated_histories_once_per_lineage() {
    let d = tmpdir("forks");
    let proj = d.join("--tmp-p--");
    let other = d.join("--a-other-project--"); // sorts before the parent's folder
    fs::create_dir_all(&proj).unwrap();
    fs::create_dir_all(&other).unwrap();
    let parent_path = proj.join("2026-01-01T00-00-00-000Z_sess-a.jsonl");
    let history: Vec<String> = (1..=4)
        .map(|i| msg(&format!("a{i}"), i, &format!("m{i}")))
        .collect();
    fs::write(
        &parent_path,
        format!("{HEADER_A}\n{}\n", history.join("\n")),
    )
    .unwrap();
    // A fork, written on another machine: parentSession is a foreign path.
    let fork_header = r#"{"type":"session","version":3,"id":"sess-b","timestamp":"2026-01-02T00:00:00.000Z","cwd":"/tmp/p","parentSession":"/Users/someone/.pi/agent/sessions/--tmp-p--/2026-01-01T00-00-00-000Z_sess-a.jsonl"}"#;
    let fork = format!(
        "{fork_header}\n{}\n{}\n{}\n",
        history[0],
        history[1],
        msg("b1", 30, "fork's own")
    );
    fs::write(other.join("2026-01-02T00-00-00-000Z_sess-b.jsonl"), &fork).unwrap();
    // pi's bug: a whole history written twice into one file.
    let twice_header = r#"{"type":"session","version":3,"id":"sess-c","timestamp":"2026-01-03T00:00:00.000Z","cwd":"/tmp/q"}"#;
    let once = format!(
        "{twice_header}\n{}\n{}\n",
        msg("c1", 1, "x"),
        msg("c2", 2, "y")
    );
    fs::write(
        proj.join("2026-01-03T00-00-00-000Z_sess-c.jsonl"),
        format!("{once}{once}{}\n", msg("c3", 3, "z")),
    )
    .unwrap();
    // An unrelated session that happens to reuse an entry id: kept.
    let unrelated = r#"{"type":"session","version":3,"id":"sess-d","timestamp":"2026-01-04T00:00:00.000Z","cwd":"/tmp/p"}"#;
    fs::write(
        proj.join("2026-01-04T00-00-00-000Z_sess-d.jsonl"),
        format!("{unrelated}\n{}\n", history[0]),
    )
    .unwrap();

    let out = run(&[&"backfill", &"-q", &d]);
    assert!(out.status.success());
    let recs = records(&out.stdout);
    let got: Vec<(String, String)> = recs
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_owned(),
                r["session"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // The fork (first in path order) keeps only its own entry: the copies
    // are kept where they were written first, in the parent.
    let want: Vec<(String, String)> = [
        ("sess-b:b1", "sess-b"),
        ("sess-a:a1", "sess-a"),
        ("sess-a:a2", "sess-a"),
        ("sess-a:a3", "sess-a"),
        ("sess-a:a4", "sess-a"),
        ("sess-c:c1", "sess-c"),
        ("sess-c:c2", "sess-c"),
        ("sess-c:c3", "sess-c"),
        ("sess-d:a1", "sess-d"),
    ]
    .iter()
    .map(|(k, s)| (k.to_string(), s.to_string()))
    .collect();
    assert_eq!(got, want);
    let st: Value = serde_json::from_slice(&run(&[&"stats", &"--json", &"-q", &d]).stdout).unwrap();
    // Deduplicated: the fork's 2 copies; sess-c's repeated header and 2
    // entries.
    assert_eq!(st["deduplicated"], 2 + 3);
    assert_eq!(st["records"], 9);
    assert_eq!(st["lines"], 5 + 4 + 7 + 2);
    assert_eq!(st["entries"]["session"], 4);
    let plain: Value =
        serde_json::from_slice(&run(&[&"stats", &"--json", &"-q", &"--no-dedupe", &d]).stdout)
            .unwrap();
    assert_eq!(
        (plain["records"].as_u64(), plain["deduplicated"].as_u64()),
        (Some(13), Some(0))
    );

    // Later runs dedupe against earlier ones: a fork made after the first
    // run copies the parent's history.
    let state = d.join("state.json");
    let o = d.join("out.ndjson");
    assert!(
        run(&[&"backfill", &"-q", &"--state", &state, &"-o", &o, &d])
            .status
            .success()
    );
    let late_header = fork_header
        .replace("sess-b", "sess-e")
        .replace("2026-01-02", "2026-01-05");
    fs::write(
        proj.join("2026-01-05T00-00-00-000Z_sess-e.jsonl"),
        format!(
            "{late_header}\n{}\n{}\n",
            history.join("\n"),
            msg("e1", 40, "late")
        ),
    )
    .unwrap();
    assert!(
        run(&[&"backfill", &"-q", &"--state", &state, &"-o", &o, &d])
            .status
            .success()
    );
    let keys_now = keys(&fs::read(&o).unwrap());
    assert_eq!(keys_now.len(), 10);
    assert_eq!(keys_now[9], "sess-e:e1");
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn follow_emits_new_lines_and_files_then_stops_cleanly() {
    follow(false);
}

#[test]
fn follow_by_polling_alone() {
    follow(true);
}

fn follow(poll: bool) {
    let d = tmpdir(if poll { "follow-poll" } else { "follow" });
    let proj = d.join("archive/--tmp-p--");
    fs::create_dir_all(&proj).unwrap();
    let s = proj.join("2026-01-01T00-00-00-000Z_sess-a.jsonl");
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let (state, out) = (d.join("state.json"), d.join("out.ndjson"));
    let mut cmd = bin();
    cmd.args(["backfill", "-q", "--follow"]);
    if poll {
        cmd.arg("--follow-poll");
    }
    let mut child = cmd
        .arg("--state")
        .arg(&state)
        .arg("-o")
        .arg(&out)
        .arg(d.join("archive"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wait_for = |n: usize| records_within_10s(&out, n);
    // -o is written as records come: the first pass.
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10)
        && fs::metadata(&out).map(|m| m.len()).unwrap_or(0) == 0
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_for(1);
    append(&s, &format!("{}\n", msg("a2", 2, "two")));
    let latency = wait_for(2);
    assert!(latency < Duration::from_secs(1), "latency {latency:?}");
    let s2 = proj.join("2026-01-02T00-00-00-000Z_sess-b.jsonl");
    let hb = HEADER_A.replace("sess-a", "sess-b");
    fs::write(&s2, format!("{hb}\n{}\n", msg("b1", 1, "new file"))).unwrap();
    wait_for(3);
    // SIGTERM: a clean stop, state saved.
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(0));
    assert_eq!(
        keys(&fs::read(&out).unwrap()),
        ["sess-a:a1", "sess-a:a2", "sess-b:b1"]
    );
    let again = run(&[
        &"backfill",
        &"--state",
        &state,
        &"-o",
        &out,
        &d.join("archive"),
    ]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("2 unchanged"));
    assert_eq!(keys(&fs::read(&out).unwrap()).len(), 3);
    fs::remove_dir_all(d).unwrap();
}

#[test]
fn runs_while_pi_writes_emit_each_record_once() {
    // A writer appends whole lines and lines in two halves while backfill
    // --state runs again and again; when the writer is done, one last run.
    let d = tmpdir("concurrent");
    let s = d.join("2026-01-01T00-00-00-000Z_sess-a.jsonl");
    fs::write(&s, format!("{HEADER_A}\n")).unwrap();
    let (state, out) = (d.join("state.json"), d.join("out.ndjson"));
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || {
            let mut f = OpenOptions::new().append(true).open(&s).unwrap();
            for i in 0..2000u32 {
                let line = format!(
                    "{}\n",
                    msg(&format!("w{i:05}"), i % 60, &"t".repeat((i % 97) as usize))
                );
                if i % 4 == 0 {
                    let (a, b) = line.split_at(line.len() / 3);
                    f.write_all(a.as_bytes()).unwrap();
                    f.flush().unwrap();
                    std::thread::sleep(Duration::from_micros(300));
                    f.write_all(b.as_bytes()).unwrap();
                } else {
                    f.write_all(line.as_bytes()).unwrap();
                }
                if i % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        })
    };
    let backfill = || {
        let r = run(&[
            &"backfill",
            &"-q",
            &"--no-dedupe",
            &"--state",
            &state,
            &"-o",
            &out,
            &s,
        ]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    };
    let mut runs = 0;
    while !writer.is_finished() {
        backfill();
        runs += 1;
    }
    writer.join().unwrap();
    backfill();
    let got = keys(&fs::read(&out).unwrap());
    let want: Vec<String> = (0..2000).map(|i| format!("sess-a:w{i:05}")).collect();
    assert_eq!(got, want, "after {runs} runs during the writes");
    assert!(runs >= 2, "only {runs} runs overlapped the writer");
    // No line was ever taken for damaged.
    let st = stats(&d.join("stats.json"), &s);
    assert_eq!(
        (st["skipped"].as_u64(), st["records"].as_u64()),
        (Some(0), Some(2000))
    );
    fs::remove_dir_all(d).unwrap();
}

/// `backfill --state S -o OUT` where nothing covers what OUT holds: a new
/// state (a typo, a lost state), or one saved by a run to stdout. The run
/// refuses, names both files and leaves OUT as it was.
#[test]
fn an_output_no_state_covers_is_never_touched() {
    let d = tmpdir("uncovered");
    let s = d.join("s.jsonl");
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let (state, out) = (d.join("new.state"), d.join("out.ndjson"));
    // Records of an earlier run, of a session since pruned from the archive.
    fs::write(&out, "{\"key\":\"gone:x1\",\"text\":\"kept\"}\n").unwrap();
    let before = sha256(&out);
    let backfill = |state: &Path| run(&[&"backfill", &"-q", &"--state", &state, &"-o", &out, &s]);
    let r = backfill(&state);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!(
            "the output {} already holds 32 bytes and the state {} does not exist",
            out.display(),
            state.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("move {} away first", out.display())),
        "{err}"
    );
    assert_eq!(sha256(&out), before);
    assert!(!state.exists());
    // A state saved by a run to stdout covers no output file.
    let stdout_state = d.join("stdout.state");
    let first = run(&[&"backfill", &"-q", &"--state", &stdout_state, &s]);
    assert!(first.status.success());
    assert_eq!(keys(&first.stdout), ["sess-a:a1"]);
    let saved = fs::read(&stdout_state).unwrap();
    let r = backfill(&stdout_state);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains(&format!(
            "the state {} covers no output file (it was saved by a run that wrote to stdout)",
            stdout_state.display()
        )),
        "{err}"
    );
    assert_eq!(sha256(&out), before);
    assert!(fs::read(&stdout_state).unwrap() == saved);
    // Moved away, the same state pairs with a new output: only what is new
    // since the stdout run goes there, and a re-run adds nothing.
    fs::rename(&out, d.join("moved.ndjson")).unwrap();
    append(&s, &format!("{}\n", msg("a2", 2, "two")));
    assert!(backfill(&stdout_state).status.success());
    assert!(backfill(&stdout_state).status.success());
    assert_eq!(keys(&fs::read(&out).unwrap()), ["sess-a:a2"]);
    // An empty output holds nothing to lose: a new state takes it.
    fs::write(&out, "").unwrap();
    assert!(backfill(&state).status.success());
    assert_eq!(keys(&fs::read(&out).unwrap()), ["sess-a:a1", "sess-a:a2"]);
    fs::remove_dir_all(d).unwrap();
}

/// The exit codes a state gives, pinned: a damaged or foreign state 1,
/// other options 2, a locked state 2 (both in
/// `other_options_and_a_second_run_refuse`), an output shorter than the
/// state covers 1, an output the state does not cover 2.
#[test]
fn state_exit_codes() {
    let d = tmpdir("codes");
    let s = d.join("s.jsonl");
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let (state, out) = (d.join("s.state"), d.join("out.ndjson"));
    let backfill = || run(&[&"backfill", &"-q", &"--state", &state, &"-o", &out, &s]);
    assert!(backfill().status.success());
    let good = fs::read(&state).unwrap();
    // Shorter than covered: changed outside mem-ingest.
    let full = fs::read(&out).unwrap();
    fs::write(&out, &full[..10]).unwrap();
    let r = backfill();
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains(&format!(
        "{} holds 10 bytes but the state covers {}",
        out.display(),
        full.len()
    )));
    assert_eq!(fs::read(&out).unwrap(), &full[..10]);
    fs::write(&out, &full).unwrap();
    // Foreign, then damaged.
    for (bytes, says) in [
        (b"{\"json\": true}".to_vec(), "not a mem-ingest state file"),
        ([&good[..12], &[0xff; 3][..]].concat(), "damaged state"),
    ] {
        fs::write(&state, &bytes).unwrap();
        let r = backfill();
        assert_eq!(r.status.code(), Some(1));
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            err.contains(&format!("{}: {says}", state.display())),
            "{err}"
        );
        assert_eq!(fs::read(&state).unwrap(), bytes);
        assert_eq!(fs::read(&out).unwrap(), full);
    }
    fs::write(&state, &good).unwrap();
    assert!(backfill().status.success());
    assert_eq!(fs::read(&out).unwrap(), full);
    fs::remove_dir_all(d).unwrap();
}

/// A first run killed at growing delays, from before its first state save
/// to after it wrote records: each time a re-run from what it left (the
/// state, or none, and its output) gives every record exactly once.
#[test]
fn a_first_run_killed_before_or_after_its_first_save_resumes() {
    first_run_killed("first-killed", false);
}

/// The same with `--follow` for the killed first run and the re-run.
#[test]
fn a_first_follow_run_killed_before_or_after_its_first_save_resumes() {
    first_run_killed("first-killed-follow", true);
}

fn first_run_killed(name: &str, follow: bool) {
    let d = tmpdir(name);
    let root = archive(&d);
    let clean = bin()
        .args(["backfill", "-q", "--no-dedupe", "--jobs", "2"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(clean.status.success());
    let want = clean.stdout;
    let (state, out) = (d.join("state"), d.join("out.ndjson"));
    let backfill = || {
        let mut c = bin();
        c.args(["backfill", "-q", "--no-dedupe", "--jobs", "2"])
            .args(["--checkpoint-ms", "1"])
            .arg("--state")
            .arg(&state)
            .arg("-o")
            .arg(&out)
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if follow {
            c.arg("--follow");
        }
        c
    };
    // How long a first run takes to its end here (debug builds on a loaded
    // machine take seconds): the kills are placed across that span, from
    // its start to near its end, and the span grows by half after each
    // round of them, so that both outcomes come within a few rounds
    // whatever the machine (growing from a fixed 0.5 ms took most of the
    // test's four minutes on two cores).
    let t = Instant::now();
    let mut first = backfill();
    if follow {
        // A follow run does not end: it is timed to its first full output.
        let mut child = first.spawn().unwrap();
        while fs::read(&out).map(|b| b.len()).unwrap_or(0) < want.len() {
            assert!(t.elapsed() < Duration::from_secs(60), "follow stalled");
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    } else {
        assert!(first.status().unwrap().success());
    }
    let mut span_us = t.elapsed().as_micros() as u64;
    const AT: [u64; 6] = [0, 5, 20, 45, 70, 95];
    // What each killed first run left: no state, a state and an empty
    // output, a state and records.
    let (mut no_state, mut empty, mut written) = (0, 0, 0);
    let mut kills = 0usize;
    let started = Instant::now();
    while written == 0 || no_state + empty == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "left: {no_state} without state, {empty} empty, {written} written"
        );
        let delay_us = span_us * AT[kills % AT.len()] / 100;
        kills += 1;
        if kills.is_multiple_of(AT.len()) {
            span_us = span_us * 3 / 2;
        }
        let _ = fs::remove_file(&state);
        let _ = fs::remove_file(&out);
        let mut child = backfill().spawn().unwrap();
        std::thread::sleep(Duration::from_micros(delay_us));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let len = fs::metadata(&out).map_or(0, |m| m.len());
        match (state.exists(), len) {
            (false, 0) => no_state += 1,
            (false, _) => panic!("{len} bytes written before the state was saved"),
            (true, 0) => empty += 1,
            (true, _) => written += 1,
        }
        // The re-run: to its end, or with --follow until it has caught up.
        if follow {
            let mut child = backfill().spawn().unwrap();
            let t = Instant::now();
            // The killed run may have left the whole output: the re-run is
            // also given the time to take SIGTERM over (a signal before
            // that ends it as a kill would, the CLI's documented race).
            while fs::read(&out).map(|b| b.len()).unwrap_or(0) < want.len()
                || t.elapsed() < Duration::from_millis(300)
            {
                assert!(t.elapsed() < Duration::from_secs(30), "follow stalled");
                std::thread::sleep(Duration::from_millis(10));
            }
            Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status()
                .unwrap();
            let st = child.wait().unwrap();
            assert_eq!(st.code(), Some(0));
        } else {
            let r = backfill().output().unwrap();
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        }
        let got = fs::read(&out).unwrap();
        assert_eq!(keys(&got).len(), keys(&want).len(), "after {delay_us} us");
        assert!(got == want, "output differs from a clean run");
    }
    fs::remove_dir_all(d).unwrap();
}

/// The lines of `stderr` but its last (the summary line), and the summary
/// line without its timing (`... MB read in S s (R MB/s)`).
fn warnings_and_summary(stderr: &[u8]) -> (Vec<String>, String) {
    let text = String::from_utf8(stderr.to_vec()).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let last = lines.pop().unwrap_or_default();
    let summary = last.split(" MB read in ").next().unwrap().to_owned();
    (lines, summary)
}

/// Issue 41: with a checkpoint (a state, a store), the skip warning of a
/// damaged line is said by the run that read the line, not again by every
/// run after it while the file is unchanged; the summary counts it as
/// before. A line damaged in what a file grew by is warned of alone.
#[test]
fn a_damaged_line_is_warned_of_once() {
    let d = tmpdir("skip-once");
    let m = d.join("m.jsonl");
    fs::copy(
        common::fixtures().join("bad/malformed-middle-line.jsonl"),
        &m,
    )
    .unwrap();
    let warned = |line: u64, byte: u64, why: &str| {
        format!("warning: {}:{line}:{byte}: skipped: {why}", m.display())
    };
    let first = [
        warned(11, 58976, "malformed JSON (syntax error)"),
        warned(12, 59011, "malformed JSON (parser error ExpectedNull)"),
    ];
    let state = d.join("state");
    let stats = || run(&[&"stats", &"--state", &state, &m]);
    let r = stats();
    assert_eq!(r.status.code(), Some(0));
    assert_eq!(
        warnings_and_summary(&r.stderr),
        (
            first.to_vec(),
            "mem-ingest: 1 files (0 failed, 0 empty, 0 unchanged, 0 resumed, 0 re-read), 130 \
             records, 0 deduplicated, 2 skipped, 9 repaired, 0.2"
                .to_owned()
        )
    );
    let r = stats();
    assert_eq!(
        warnings_and_summary(&r.stderr),
        (
            vec![],
            "mem-ingest: 1 files (0 failed, 0 empty, 1 unchanged, 0 resumed, 0 re-read), 130 \
             records, 0 deduplicated, 2 skipped, 9 repaired, 0.0"
                .to_owned()
        )
    );
    // The file grows by a damaged line: that line alone is warned of.
    let len = fs::metadata(&m).unwrap().len();
    append(&m, "{\"type\":\"message\",\n");
    let r = stats();
    assert_eq!(
        warnings_and_summary(&r.stderr),
        (
            vec![warned(150, len, "malformed JSON (syntax error)")],
            "mem-ingest: 1 files (0 failed, 0 empty, 0 unchanged, 1 resumed, 0 re-read), 130 \
             records, 0 deduplicated, 3 skipped, 9 repaired, 0.0"
                .to_owned()
        )
    );

    // The same with a store.
    let db = d.join("m.db");
    let backfill = || run(&[&"backfill", &"--db", &db, &m]);
    let r = backfill();
    assert_eq!(r.status.code(), Some(0));
    let (warnings, _) = warnings_and_summary(&r.stderr);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert_eq!(warnings[..2], first);
    let r = backfill();
    assert_eq!(
        warnings_and_summary(&r.stderr),
        (
            vec![],
            "mem-ingest: 1 files (0 failed, 0 empty, 1 unchanged, 0 resumed, 0 re-read), 130 \
             records (0 written), 0 deduplicated, 3 skipped, 9 repaired, 0.0"
                .to_owned()
        )
    );
    fs::remove_dir_all(d).unwrap();
}

/// Issue 41: the summary of a `--follow` run adds up: the files it
/// followed, the records they hold, those it wrote.
#[test]
fn the_summary_of_follow_adds_up() {
    let d = tmpdir("follow-summary");
    let proj = d.join("archive/--tmp-p--");
    fs::create_dir_all(&proj).unwrap();
    let s = proj.join("2026-01-01T00-00-00-000Z_sess-a.jsonl");
    fs::write(&s, format!("{HEADER_A}\n{}\n", msg("a1", 1, "one"))).unwrap();
    let (state, out) = (d.join("state"), d.join("out.ndjson"));
    let child = bin()
        .args(["backfill", "--follow", "--state"])
        .arg(&state)
        .arg("-o")
        .arg(&out)
        .arg(d.join("archive"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wait_for = |n: usize| {
        records_within_10s(&out, n);
    };
    wait_for(1);
    append(&s, &format!("{}\n", msg("a2", 2, "two")));
    wait_for(2);
    // A pass or two with nothing new before the stop.
    std::thread::sleep(Duration::from_millis(1200));
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let st = child.wait_with_output().unwrap();
    assert_eq!(st.status.code(), Some(0));
    let (warnings, summary) = warnings_and_summary(&st.stderr);
    assert_eq!(warnings, Vec::<String>::new());
    assert_eq!(
        summary,
        "mem-ingest: 1 files (0 failed, 0 empty, 1 unchanged, 0 resumed, 0 re-read), 2 \
         records (2 written), 0 deduplicated, 0 skipped, 0 repaired, 0.0"
    );
    fs::remove_dir_all(d).unwrap();
}

/// Issue 41: on a terminal (a pty, through `script`), `--follow` says on
/// stderr what it follows and how many records it wrote so far; the last
/// line is the summary, which adds up.
#[test]
fn follow_on_a_terminal_says_what_it_follows() {
    let d = tmpdir("follow-tty");
    let archive = d.join("archive");
    fs::create_dir_all(&archive).unwrap();
    fs::copy(
        common::fixtures().join("hand-built.jsonl"),
        archive.join("a.jsonl"),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_mem-ingest");
    let line = format!(
        "timeout -s INT 2 '{bin}' backfill --follow --state '{}' -o '{}' '{}'",
        d.join("state").display(),
        d.join("out.ndjson").display(),
        archive.display()
    );
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .output()
        .expect("script (util-linux) runs a command on a pty");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(
        tty.contains("following 1 files: 22 records written so far"),
        "{tty:?}"
    );
    // The line after the progress line's (cleared: `ESC [2K`).
    let last = tty.trim_end().rsplit(['\r', '\n']).next().unwrap();
    let last = last.trim_start_matches("\u{1b}[2K");
    assert_eq!(
        last.split(" MB read in ").next().unwrap(),
        "mem-ingest: 1 files (0 failed, 0 empty, 1 unchanged, 0 resumed, 0 re-read), \
         22 records (22 written), 0 deduplicated, 0 skipped, 0 repaired, 0.0"
    );
    fs::remove_dir_all(d).unwrap();
}
