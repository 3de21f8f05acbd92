//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod codex;
pub mod entries;
pub mod secrets;
pub mod shared;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `mem-ingest` binary: the command-line crate's, so only its tests
/// (`crates/mem-ingest-cli/tests`, which include these helpers) run it.
pub fn bin() -> &'static str {
    match option_env!("CARGO_BIN_EXE_mem-ingest") {
        Some(bin) => bin,
        None => panic!(
            "the mem-ingest binary belongs to crates/mem-ingest-cli: a test that runs it goes there"
        ),
    }
}

/// The command line, never reading this machine's archives: every default
/// location points at an empty folder (a test that wants one sets its
/// variable again).
pub fn cli() -> Command {
    let mut c = Command::new(bin());
    c.env_remove("PI_CODING_AGENT_SESSION_DIR");
    c.env_remove("GEMINI_CLI_HOME");
    c.env_remove("GEMINI_DATA_DIR");
    c.env_remove("QWEN_RUNTIME_DIR");
    c.env_remove("QWEN_DATA_DIR");
    c.env_remove("COPILOT_HOME");
    c.env_remove("AMP_DATA_DIR");
    c.env_remove("CLINE_DIR");
    c.env_remove("CLINE_DATA_DIR");
    c.env_remove("CLINE_SESSION_DATA_DIR");
    c.env_remove("GOOSE_PATH_ROOT");
    c.env_remove("OPENCODE_DB");
    let none = no_home();
    for var in [
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "PI_CODING_AGENT_DIR",
    ] {
        c.env(var, none);
    }
    c
}

/// The empty folder every default location of [`cli`] points at, one per
/// test process: `mem-ingest-no-home-<pid>`. Those of test processes that
/// have ended are removed when it is made (if still empty), so that test
/// runs do not pile them up in the temporary folder.
fn no_home() -> &'static Path {
    static NONE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    NONE.get_or_init(|| {
        let tmp = std::env::temp_dir();
        let proc = Path::new("/proc");
        if proc.join("self").exists() {
            for e in fs::read_dir(&tmp).into_iter().flatten().flatten() {
                let name = e.file_name();
                let pid = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("mem-ingest-no-home-"));
                if pid.is_some_and(|p| !proc.join(p).exists()) {
                    // Not empty: not ours to remove.
                    let _ = fs::remove_dir(e.path());
                }
            }
        }
        let none = tmp.join(format!("mem-ingest-no-home-{}", std::process::id()));
        fs::create_dir_all(&none).unwrap();
        none
    })
}

/// Runs the command line with `args`.
pub fn run(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    cli()
        .args(args.iter().map(|a| a.as_ref()))
        .output()
        .unwrap()
}

/// ccusage 20.0.24, the reference the conformance tests compare against:
/// `$CCUSAGE`, else the copy `.ci/run` installs.
pub fn ccusage() -> PathBuf {
    let p = std::env::var_os("CCUSAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/ccusage-reference/node_modules/.bin/ccusage"));
    assert!(
        p.exists(),
        "ccusage not found at {} (set CCUSAGE, or install ../shared/ccusage-reference with npm install)",
        p.display()
    );
    p
}

/// A new, empty folder of this test process: `mem-ingest-<group>-<pid>-<name>`.
pub fn tmpdir(group: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mem-ingest-{group}-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// The project's fixtures.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A new temporary folder (named by `tag`) holding `m.db`, the store
/// `backfill --db` makes of the fixtures hand-built.jsonl, pi-1x.jsonl and
/// pi-classic.jsonl (three sessions: 22, 626 and 315 records).
pub fn three_sessions_store(tag: &str) -> PathBuf {
    let d = tmpdir("store", tag);
    let out = Command::new(bin())
        .args(["backfill", "-q", "--db"])
        .arg(d.join("m.db"))
        .args(["hand-built.jsonl", "pi-1x.jsonl", "pi-classic.jsonl"].map(|f| fixtures().join(f)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    d
}

/// Appends `text` to the file at `path`.
pub fn append(path: &Path, text: &str) {
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// Runs the command `run` makes, killing it (SIGKILL) after a delay that
/// grows from a tenth of `pace_ms` (a clean run's time) at each kill,
/// until a run finishes (it must succeed) within 240 s; the number of
/// kills, at least 3 (fewer would not test a kill mid-run). `what` names
/// the case in a failure.
pub fn kill_until_it_finishes(mut run: impl FnMut() -> Command, pace_ms: u64, what: &str) -> u32 {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut kills = 0;
    let mut delay = (pace_ms / 10).clamp(1, 5);
    let t = Instant::now();
    loop {
        let mut child = run()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(delay);
        while Instant::now() < deadline {
            if let Some(st) = child.try_wait().unwrap() {
                assert!(st.success(), "{what}: a run failed");
                assert!(kills >= 3, "{what}: only {kills} kills");
                return kills;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        kills += 1;
        delay = delay * 3 / 2 + (pace_ms / 10).clamp(1, 7);
        assert!(
            t.elapsed() < Duration::from_secs(240),
            "{what}: did not finish"
        );
    }
}

/// The SHA-256 of a file, by `sha256sum`.
pub fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// A pi user message line (with its newline) of id `id` and text `text`.
pub fn user_line(id: &str, text: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-02-01T00:00:00.000Z","message":{{"role":"user","content":"{text}","timestamp":1769904000000}}}}"#
    ) + "\n"
}

/// The command line, run as an unprivileged user: `nobody` through
/// `setpriv` when the tests run as root (root reads any file, so a test of
/// an unreadable file needs someone else), else as is.
pub fn unprivileged_cli() -> Command {
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin()]);
        c
    } else {
        Command::new(bin())
    }
}

/// A tool output of about 3 KB, distinct for each turn.
fn codex_output(turn: usize) -> String {
    let mut s = format!("turn {turn}: ");
    while s.len() < 3000 {
        s.push_str("drwxr-xr-x  2 dev dev 4096 Jan  1 00:00 src\\n");
    }
    s
}

/// A Codex rollout of session `id` whose turns fill `size` bytes, and how
/// many turns.
/// Each turn: a task start, a turn context (the model changes every 100
/// turns), a prompt and its event twin, a tool call, its output, a token
/// count (cumulative total only: its delta needs the total before), an
/// answer and its event twin. Four records a turn.
pub fn codex_rollout(id: &str, size: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(size + (64 << 10));
    out.extend_from_slice(format!(r#"{{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{{"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/a","model_provider":"openai"}}}}"#).as_bytes());
    out.push(b'\n');
    let mut turn = 0;
    while out.len() < size {
        let ts = format!(
            "2026-01-01T{:02}:{:02}:{:02}.000Z",
            turn / 3600 % 24,
            turn / 60 % 60,
            turn % 60
        );
        let model = format!("gpt-{}", turn / 100);
        let total = 1000 * (turn + 1);
        let out_text = codex_output(turn);
        let lines = [
            format!(
                r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"task_started","turn_id":"{turn}"}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"turn_context","payload":{{"cwd":"/a","model":"{model}"}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"prompt {turn}"}}]}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"user_message","message":"prompt {turn}"}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call","name":"shell","arguments":"{{\"cmd\":\"ls {turn}\"}}","call_id":"c{turn}"}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"function_call_output","call_id":"c{turn}","output":"{out_text}"}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{total},"cached_input_tokens":0,"output_tokens":{total},"reasoning_output_tokens":0,"total_tokens":{}}}}}}}}}"#,
                2 * total
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"response_item","payload":{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"answer {turn}"}}]}}}}"#
            ),
            format!(
                r#"{{"timestamp":"{ts}","type":"event_msg","payload":{{"type":"agent_message","message":"answer {turn}"}}}}"#
            ),
        ];
        for l in lines {
            out.extend_from_slice(l.as_bytes());
            out.push(b'\n');
        }
        turn += 1;
    }
    (out, turn)
}

/// Each NDJSON record's text and kinds, in order.
pub fn texts_and_kinds(ndjson: &[u8]) -> Vec<(String, Vec<String>)> {
    std::str::from_utf8(ndjson)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let kinds = v["kinds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_owned())
                .collect();
            (v["text"].as_str().unwrap().to_owned(), kinds)
        })
        .collect()
}
