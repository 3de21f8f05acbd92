//! Claude Code message counts against claude-code-log 1.7.0 (the Python
//! package), file by file, on every sample transcript of `../shared` and on
//! generated archives.
//!
//! What is compared: claude-code-log's reader, `load_transcript(path)`,
//! returns a file's lines as typed entries (user, assistant, system,
//! summary, ai-title, queue-operation, attachment, and a pass-through entry
//! for other lines with a `uuid` and `sessionId`, such as `progress`); its
//! projects index counts messages from that list. We count them by `type`
//! and compare with the `entries` of `mem-ingest stats --json --no-dedupe
//! --source claude FILE`, which counts every parsed line by its type. Each
//! file is loaded alone: the other files of the tree are passed as already
//! loaded (`_loaded_files`), so a session does not splice its subagent
//! files in and every line is counted once, in its own file. Both sides
//! count without deduplication (claude-code-log deduplicates after
//! loading, by rules of its own, when it renders).
//!
//! Differences on purpose, every one asserted below:
//! - Line types claude-code-log drops without a word (its
//!   `SILENT_SKIP_TYPES`: `file-history-snapshot`, `last-prompt`,
//!   `permission-mode`, `mode`, `custom-title`, `agent-name`,
//!   `agent-color`, `frame-link`) we count as entries of their type,
//!   making no record: every non-blank line is accounted for.
//! - Lines without a `type` whose `message.role` is `assistant` (ccusage's
//!   fixtures): claude-code-log drops them (no type it knows, no `uuid`);
//!   we read them as assistant messages, as ccusage counts their usage.
//! - Lines its pydantic models reject: the `Artifact` tool samples have no
//!   `userType`, which claude-code-log requires; it prints a validation
//!   error and drops the line. We read them (`userType` is not a field a
//!   record needs).
//!
//! Ignored in a plain clone: they need `../shared` and claude-code-log
//! (`CLAUDE_CODE_LOG_PYTHON`, a Python with claude-code-log 1.7.0, else
//! `/tmp/ccl-venv/bin/python`, which `.ci/run` makes); there a missing tool
//! is a failure, never a skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

/// The line types claude-code-log 1.7.0 drops silently
/// (`converter.SILENT_SKIP_TYPES`).
const SILENT: [&str; 8] = [
    "file-history-snapshot",
    "last-prompt",
    "permission-mode",
    "mode",
    "custom-title",
    "agent-name",
    "agent-color",
    "frame-link",
];

/// Loads each file named on the command line alone and prints, by path,
/// its entries by type and what claude-code-log printed while loading it.
const COUNT: &str = r#"
import collections, contextlib, importlib.metadata, io, json, sys
from pathlib import Path
version = importlib.metadata.version("claude-code-log")
if version != "1.7.0":
    sys.exit(f"claude-code-log {version}, not 1.7.0")
from claude_code_log.converter import load_transcript
files = [Path(p) for p in sys.argv[1:]]
out = {}
for f in files:
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        entries = load_transcript(f, silent=True, _loaded_files=set(files) - {f})
    types = collections.Counter(e.type for e in entries)
    out[str(f)] = {"types": dict(types), "said": said.getvalue()}
print(json.dumps(out))
"#;

fn python() -> PathBuf {
    let p = std::env::var_os("CLAUDE_CODE_LOG_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/ccl-venv/bin/python"));
    assert!(
        p.exists(),
        "no Python with claude-code-log at {} (set CLAUDE_CODE_LOG_PYTHON, or: \
         python3 -m venv /tmp/ccl-venv && /tmp/ccl-venv/bin/pip install claude-code-log==1.7.0)",
        p.display()
    );
    p
}

type Counts = BTreeMap<String, u64>;

/// Per file: its entries by type, and what claude-code-log said.
fn theirs(files: &[PathBuf]) -> BTreeMap<PathBuf, (Counts, String)> {
    let out = Command::new(python())
        .args(["-c", COUNT])
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "claude-code-log: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_object()
        .unwrap()
        .iter()
        .map(|(p, e)| {
            let types = e["types"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(t, n)| (t.clone(), n.as_u64().unwrap()))
                .collect();
            let said = e["said"].as_str().unwrap().to_owned();
            (PathBuf::from(p), (types, said))
        })
        .collect()
}

/// A file's entries by type, read alone without deduplication.
fn ours(file: &Path) -> Counts {
    let out = common::cli()
        .args(["stats", "--json", "-q", "--no-dedupe", "--source", "claude"])
        .arg(file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", file.display());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["skipped"], 0, "{}", file.display());
    v["entries"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, n)| (t.clone(), n.as_u64().unwrap()))
        .collect()
}

/// Every `*.jsonl` below `dir`, sorted.
fn transcripts(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "jsonl") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A file whose every line claude-code-log drops for a reason of its own.
struct Dropped {
    /// The end of its path.
    file: &'static str,
    /// Our entries of it.
    ours: &'static [(&'static str, u64)],
    /// What claude-code-log says of it ("" for nothing).
    says: &'static str,
}

/// Ours, less what claude-code-log drops on purpose (see the module):
/// what it must count, file by file, but for the files it drops whole.
/// Returns the entries compared.
fn compare(files: &[PathBuf], dropped: &[Dropped]) -> u64 {
    let theirs = theirs(files);
    assert_eq!(theirs.len(), files.len());
    let mut seen = vec![false; dropped.len()];
    let mut compared = 0;
    for f in files {
        let (t, said) = &theirs[f];
        let mut expected = ours(f);
        expected.retain(|ty, _| !SILENT.contains(&ty.as_str()));
        let name = f.to_string_lossy();
        let mut says = "";
        if let Some(i) = dropped.iter().position(|d| name.ends_with(d.file)) {
            seen[i] = true;
            let ours: Counts = dropped[i]
                .ours
                .iter()
                .map(|(t, n)| ((*t).to_owned(), *n))
                .collect();
            assert_eq!(expected, ours, "{name}");
            expected.clear();
            says = dropped[i].says;
        }
        assert_eq!(t, &expected, "{name}");
        assert!(
            said.contains(says) && said.is_empty() == says.is_empty(),
            "{name}: claude-code-log said {said:?}"
        );
        compared += t.values().sum::<u64>();
    }
    assert!(seen.iter().all(|s| *s), "a dropped file was not found");
    compared
}

#[test]
#[ignore = "needs ../shared/samples and claude-code-log (.ci/run installs it)"]
fn message_counts_equal_claude_code_log_on_the_samples() {
    let samples = common::shared::samples();
    let mut files = transcripts(&samples.join("claude-code"));
    files.extend(transcripts(
        &samples.join("claude-code-log-messages/claude-code"),
    ));
    assert_eq!(files.len(), 8 + 59);
    let compared = compare(
        &files,
        &[
            // Lines without `type` (usage only).
            Dropped {
                file: "project-alpha/session-alpha/chat.jsonl",
                ours: &[("assistant", 3)],
                says: "",
            },
            Dropped {
                file: "project-beta/session-beta/chat.jsonl",
                ours: &[("assistant", 2)],
                says: "",
            },
            // No `userType`: its models reject the line.
            Dropped {
                file: "tools/Artifact-tool_result.jsonl",
                ours: &[("user", 1)],
                says: "validation errors for UserTranscriptEntry\nuserType\n  Field required",
            },
            Dropped {
                file: "tools/Artifact-tool_use.jsonl",
                ours: &[("assistant", 1)],
                says: "validation errors for AssistantTranscriptEntry\nuserType\n  Field required",
            },
        ],
    );
    // The transcripts: 4 entries (session-01, its `last-prompt` aside), 26
    // (BookMinder), 12 and 11 (claude-code-log's), 2 and 4 (its subagent
    // files); of the 59 single lines, all but the snapshot and the two
    // Artifact lines.
    assert_eq!(compared, 4 + 26 + 12 + 11 + 2 + 4 + 56);
}

#[test]
#[ignore = "needs claude-code-log (.ci/run installs it)"]
fn message_counts_equal_claude_code_log_on_generated_archives() {
    for seed in ["1", "7"] {
        let d = common::tmpdir("conform-ccl", &format!("gen-{seed}"));
        let g = gen_corpus::GenCorpus::new()
            .args(["--format", "claude", "--archive"])
            .arg(&d)
            .args(["--total-mb", "5", "--seed", seed])
            .output()
            .unwrap();
        assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
        let files = transcripts(&d.join("projects"));
        assert!(files.len() >= 20, "seed {seed}: {} files", files.len());
        let compared = compare(&files, &[]);
        assert!(compared >= 300, "seed {seed}: {compared} entries compared");
        std::fs::remove_dir_all(d).unwrap();
    }
}
