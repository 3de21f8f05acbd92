//! `stats` by source (`by_source` in the JSON, a `by source` table), and
//! the human table: aligned whatever the length of model and project
//! names.

use std::path::{Path, PathBuf};

use serde_json::Value;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use common::{run, tmpdir};

fn stats_json(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Value {
    let mut all: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"stats", &"--json", &"-q"];
    all.extend_from_slice(args);
    let out = run(&all);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stats --json gave no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A generated archive of `format` (`gen-corpus --format F --total-mb MB
/// --seed 7`) under `dir`; its folder `folder`.
fn generated(dir: &Path, format: &str, mb: &str, folder: &str) -> PathBuf {
    let out = gen_corpus::GenCorpus::new()
        .args(["--format", format, "--total-mb", mb, "--seed", "7"])
        .arg("--archive")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(folder)
}

/// A generated Claude Code archive (2 MB); its `projects/` folder.
fn generated_claude(dir: &Path) -> PathBuf {
    generated(dir, "claude", "2", "projects")
}

/// The stats of a run without the keys a source's stats do not have.
fn as_source(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    for k in ["failures", "skips", "by_source"] {
        o.remove(k);
    }
    v
}

/// `a + b` for every number in two values of the same shape (arrays of
/// models or projects are matched by their first string fields); costs
/// added in floating point as the run adds them.
fn add(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_u64(), y.as_u64()) {
            (Some(x), Some(y)) => Value::from(x + y),
            _ => Value::from(x.as_f64().unwrap() + y.as_f64().unwrap()),
        },
        (Value::Object(x), Value::Object(y)) => {
            let mut out = x.clone();
            for (k, v) in y {
                let sum = match x.get(k) {
                    Some(w) => add(w, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), sum);
            }
            Value::Object(out)
        }
        (Value::Array(x), Value::Array(y)) => {
            let id = |v: &Value| -> String {
                ["provider", "model", "project"]
                    .iter()
                    .filter_map(|k| v[*k].as_str())
                    .collect::<Vec<_>>()
                    .join("/")
            };
            let mut out: Vec<Value> = x.clone();
            for v in y {
                match out.iter().position(|w| id(w) == id(v)) {
                    Some(i) => {
                        let mut s = add(&out[i], v);
                        for k in ["provider", "model", "project"] {
                            if let Some(name) = v.get(k) {
                                s[k] = name.clone();
                            }
                        }
                        out[i] = s;
                    }
                    None => out.push(v.clone()),
                }
            }
            out.sort_by_key(id);
            Value::Array(out)
        }
        _ => panic!("cannot add {a} and {b}"),
    }
}

/// Floats compared to 1e-9, everything else exactly.
fn assert_close(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() < 1e-9, "{at}: {x} != {y}");
        }
        (Value::Object(x), Value::Object(y)) => {
            // The keys' order is pinned elsewhere (`add` appends).
            let mut keys = (x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>());
            keys.0.sort();
            keys.1.sort();
            assert_eq!(keys.0, keys.1, "{at}");
            for (k, v) in x {
                assert_close(v, &y[k], &format!("{at}.{k}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                assert_close(v, w, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn a_pi_archive_has_no_by_source() {
    let s = stats_json(&[&"fixtures/"]);
    assert!(s.get("by_source").is_none(), "{s}");
    assert_eq!(s["files"], 20);
}

/// Each source's part of a mixed run is what a run over that source's
/// files alone counts, and the totals are their sums (plus the PATH that
/// could not be listed, of no source); a re-run from the state gives the
/// same.
#[test]
fn by_source_is_each_source_alone_and_adds_up() {
    let d = tmpdir("stats", "mixed");
    let claude = generated_claude(&d.join("claude"));
    let missing = d.join("no-such-folder");
    let pi = stats_json(&[&"fixtures/"]);
    let cc = stats_json(&[&claude]);
    let state = d.join("state");
    let mixed = stats_json(&[&"fixtures/", &claude, &missing]);
    // A state records the sources it covers: named here (without, a new
    // state covers pi alone, as older ones do).
    let args: [&dyn AsRef<std::ffi::OsStr>; 9] = [
        &"--source",
        &"pi",
        &"--source",
        &"claude",
        &"fixtures/",
        &claude,
        &missing,
        &"--state",
        &state,
    ];
    let first = stats_json(&args);
    let again = stats_json(&args);
    assert!(first == again, "a re-run from the state differs");

    let by = mixed["by_source"].as_object().unwrap();
    assert_eq!(by.keys().collect::<Vec<_>>(), ["claude", "pi"]);
    // A Claude-only run names its one source too: its part is the totals.
    assert_eq!(
        cc["by_source"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["claude"]
    );
    assert_close(
        &cc["by_source"]["claude"],
        &as_source(cc.clone()),
        "claude alone",
    );
    assert_close(&by["pi"], &as_source(pi.clone()), "pi");
    assert_close(&by["claude"], &as_source(cc.clone()), "claude");
    // The fixtures hold three pi files without a valid header: failures
    // of pi; the missing folder is one of no source.
    assert_eq!(by["pi"]["files_failed"], 3);
    assert_eq!(mixed["files_failed"], 3 + 1);
    assert!(mixed["records"].as_u64().unwrap() > 1100);
    for (name, v) in [("without a state", &mixed), ("with a state", &first)] {
        let by = v["by_source"].as_object().unwrap();
        let mut sum = add(&by["pi"], &by["claude"]);
        for k in ["files", "files_failed"] {
            sum[k] = Value::from(sum[k].as_u64().unwrap() + 1);
        }
        assert_close(&as_source(v.clone()), &sum, name);
    }
    // With a state a partial last line waits (pending) instead of being
    // skipped: pi's part says so too.
    assert_eq!(first["by_source"]["pi"]["pending"], first["pending"]);
    assert!(first["pending"].as_u64().unwrap() > 0);
    std::fs::remove_dir_all(d).unwrap();
}

/// The `by_source` object pinned on a pi fixture and the Claude Code and
/// Codex samples.
#[test]
#[ignore = "needs ../shared/samples"]
fn by_source_exact_on_the_samples() {
    let samples = common::shared::samples();
    let s = stats_json(&[
        &"fixtures/hand-built.jsonl",
        &samples.join("claude-code"),
        &samples.join("codex"),
    ]);
    let expected: Value = serde_json::from_str(include_str!("by_source_samples.json")).unwrap();
    assert_close(&s["by_source"], &expected, "by_source");
    let mut keys: Vec<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.pop(), Some("by_source"));
    assert_eq!(keys.last(), Some(&"skips"));
}

/// The end offset of each of the last `n` whitespace-separated cells of
/// `line`.
/// `line`, in characters.
fn cell_ends(line: &str, n: usize) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut prev = ' ';
    for (i, c) in line.chars().enumerate() {
        if c == ' ' && prev != ' ' {
            ends.push(i);
        }
        prev = c;
    }
    if prev != ' ' {
        ends.push(line.chars().count());
    }
    ends.split_off(ends.len() - n)
}

/// The lines of the block that starts with the line `title` (up to the
/// next blank line).
fn block<'a>(out: &'a str, title: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(title))
        .unwrap_or_else(|| panic!("no {title:?} in\n{out}"));
    lines[at..]
        .iter()
        .take_while(|l| !l.is_empty())
        .copied()
        .collect()
}

/// Every line of a table as long as the others (in characters), each of
/// its last `n` columns ending (so, right-aligned, starting) at the same
/// offset in the header and every row, and each row's name at offset 2
/// (a session without a `cwd` has an empty one).
fn assert_aligned(table: &[&str], n: usize, with_header: bool) {
    let width = table[0].chars().count();
    let ends = cell_ends(table[0], n);
    for l in table {
        assert_eq!(l.chars().count(), width, "{l:?} in\n{}", table.join("\n"));
        assert_eq!(cell_ends(l, n), ends, "{l:?} in\n{}", table.join("\n"));
    }
    for l in &table[usize::from(with_header)..] {
        let named = l.split_whitespace().count() > n;
        assert!(
            l.starts_with("  ") && l[2..].starts_with(' ') != named,
            "{l:?}"
        );
    }
}

#[test]
fn table_columns_align_whatever_the_names() {
    let d = tmpdir("stats", "table");
    let model = "claude-sonnet-4-5-with-a-very-long-model-name-of-sixty-chars";
    assert_eq!(model.len(), 60);
    let project = "/home/someone/work/a/deeply/nested/folder/of/projects/with-a-long-project-name";
    let session = format!(
        concat!(
            r#"{{"type":"session","version":3,"id":"long-names-1","timestamp":"2026-01-15T10:00:00.000Z","cwd":"{project}"}}"#,
            "\n",
            r#"{{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-15T10:00:05.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"hi"}}],"provider":"anthropic","model":"{model}","usage":{{"input":100,"output":20,"cacheRead":3000,"cacheWrite":400,"totalTokens":3520,"cost":{{"total":1}}}},"stopReason":"stop","timestamp":1768471205000}}}}"#,
            "\n"
        ),
        project = project,
        model = model
    );
    std::fs::write(d.join("long.jsonl"), session).unwrap();
    let claude = generated_claude(&d.join("claude"));
    let out = run(&[
        &"stats",
        &"-q",
        &d.join("long.jsonl"),
        &"fixtures/hand-built.jsonl",
        &"fixtures/pi-1x.jsonl",
        &claude,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = String::from_utf8(out.stdout).unwrap();

    let models = block(&out, "usage by model");
    assert!(models.iter().any(|l| l.contains(model)), "{out}");
    assert!(models.len() >= 4, "{out}");
    assert_aligned(&models, 7, true);
    let projects = block(&out, "by project");
    assert!(projects.iter().any(|l| l.contains(project)), "{out}");
    assert_aligned(&projects, 4, true);
    let sources = block(&out, "by agent");
    assert_eq!(sources.len(), 3, "{out}");
    assert!(sources[1].starts_with("  claude ") && sources[2].starts_with("  pi "));
    assert_aligned(&sources, 7, true);
    // Roles and entries: one column of counts between them.
    let mut counts = block(&out, "roles")[1..].to_vec();
    counts.extend(&block(&out, "entries")[1..]);
    assert!(counts.iter().any(|l| l.contains("file-history-snapshot")));
    assert_aligned(&counts, 1, false);
    // The totals at the top: their values end in one column.
    let top = block(&out, "files");
    let ends: Vec<usize> = top
        .iter()
        .map(|l| cell_ends(l.split("  (").next().unwrap(), 1)[0])
        .collect();
    assert!(ends.iter().all(|e| *e == 23), "{ends:?}\n{out}");
    std::fs::remove_dir_all(d).unwrap();
}

/// A pi session of one assistant message of model `anthropic/m`.
fn one_message_session(id: &str, cwd: &str, usage: [u64; 5], cost: f64) -> String {
    let [input, output, read, write, total] = usage;
    format!(
        concat!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-15T10:00:00.000Z","cwd":"{cwd}"}}"#,
            "\n",
            r#"{{"type":"message","id":"{id}-a1","parentId":null,"timestamp":"2026-01-15T10:00:05.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"hi"}}],"provider":"anthropic","model":"m","usage":{{"input":{input},"output":{output},"cacheRead":{read},"cacheWrite":{write},"totalTokens":{total},"cost":{{"total":{cost}}}}},"stopReason":"stop","timestamp":1768471205000}}}}"#,
            "\n"
        ),
        id = id,
        cwd = cwd,
        input = input,
        output = output,
        read = read,
        write = write,
        total = total,
        cost = cost
    )
}

/// Issue 41: counts with thousands separators, a project without a name
/// as `(unknown)`, a name of double-width characters padded by its
/// display width.
#[test]
fn table_counts_unknown_projects_and_wide_names_exact() {
    let d = tmpdir("stats", "wide");
    let files = [
        (
            "wide.jsonl",
            one_message_session(
                "wide-1",
                "/home/dev/src/日本語-proj",
                [1_000_000, 200_000, 30_000, 4_567, 1_234_567],
                1.5,
            ),
        ),
        (
            "blank.jsonl",
            one_message_session("blank-1", "", [1_000, 1_000, 0, 0, 2_000], 0.25),
        ),
        (
            "plain.jsonl",
            one_message_session(
                "plain-1",
                "/home/dev/src/plain-proj",
                [10, 20, 0, 0, 30],
                0.0,
            ),
        ),
    ];
    let mut bytes = 0;
    for (name, text) in &files {
        std::fs::write(d.join(name), text).unwrap();
        bytes += text.len();
    }
    assert!((1_000..10_000).contains(&bytes));
    let out = run(&[&"stats", &"-q", &d]);
    assert_eq!(out.status.code(), Some(0));
    let out = String::from_utf8(out.stdout).unwrap();
    let b = bytes.to_string();
    let bytes_line = format!("bytes{:>18}", format!("{},{}", &b[..1], &b[1..]));
    assert_eq!(
        block(&out, "files"),
        [
            "files                 3  (0 failed, 0 empty)",
            bytes_line.as_str(),
            "lines                 6",
            "records               3",
            "skipped               0",
            "repaired              0",
            "deduplicated          0",
        ]
    );
    assert_eq!(
        block(&out, "usage by model"),
        [
            "usage by model           messages        input       output   cache_read  cache_write        total       cost",
            "  anthropic/m                   3    1,001,010      201,020       30,000        4,567    1,236,597     1.7500",
        ]
    );
    assert_eq!(
        block(&out, "by project"),
        [
            "by project                  sessions      records  total_tokens       cost",
            "  (unknown)                        1            1         2,000     0.2500",
            "  /home/dev/src/plain-proj         1            1            30     0.0000",
            "  /home/dev/src/日本語-proj        1            1     1,234,567     1.5000",
        ]
    );
    std::fs::remove_dir_all(d).unwrap();
}

/// A generated Codex home (1 MB); its `sessions/` folder.
fn generated_codex(dir: &Path) -> PathBuf {
    generated(dir, "codex", "1", "sessions")
}

/// Issue 41: Claude Code and Codex record no cost (Claude Code's older
/// lines a `costUSD`). With `--state` (whose runs do not see the responses
/// of files unchanged) `stats` shows the recorded costs alone: where no
/// usage summed had one, the cost is null in the JSON and `-` in the
/// tables, never a false zero; pi's costs, and Claude Code's where
/// recorded, stay numbers.
#[test]
fn unknown_costs_are_null_and_dashes() {
    let d = tmpdir("stats", "costs");
    let claude = generated_claude(&d.join("claude"));
    let codex = generated_codex(&d.join("codex"));
    let (state, state2) = (d.join("state"), d.join("state2"));
    let s = stats_json(&[&"--state", &state, &claude, &codex]);
    let models: Vec<(String, Value)> = s["by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                format!(
                    "{}/{}",
                    m["provider"].as_str().unwrap(),
                    m["model"].as_str().unwrap()
                ),
                m["cost"].clone(),
            )
        })
        .collect();
    let null = Value::Null;
    let expected: Vec<(String, Value)> = [
        ("anthropic/claude-haiku-4-5-20251001", null.clone()),
        ("anthropic/claude-opus-4-1-20250805", null.clone()),
        ("anthropic/claude-opus-4-20250514", Value::from(0.9039987)),
        ("anthropic/claude-opus-4-5-20251101", null.clone()),
        ("anthropic/claude-opus-4-7", null.clone()),
        ("anthropic/claude-opus-5", null.clone()),
        (
            "anthropic/claude-sonnet-4-20250514",
            Value::from(0.30498644999999996),
        ),
        ("anthropic/claude-sonnet-4-5-20250929", null.clone()),
        ("openai/gpt-5", null.clone()),
        ("openai/gpt-5-codex", null.clone()),
        ("openai/gpt-5.2", null.clone()),
    ]
    .into_iter()
    .map(|(m, c)| (m.to_owned(), c))
    .collect();
    assert_eq!(models, expected);
    assert_eq!(s["usage"]["cost"], Value::from(1.20898515));
    assert_eq!(
        s["by_source"]["claude"]["usage"]["cost"],
        Value::from(1.20898515)
    );
    assert_eq!(s["by_source"]["codex"]["usage"]["cost"], null);
    for p in s["by_project"].as_array().unwrap() {
        let known = ["/Users/dana/work/infra/terraform", "/home/dev/mem-ingest"]
            .contains(&p["project"].as_str().unwrap());
        assert_eq!(p["cost"].is_number(), known, "{p}");
        assert_eq!(p["cost"].is_null(), !known, "{p}");
    }
    for p in s["by_source"]["codex"]["by_project"].as_array().unwrap() {
        assert_eq!(p["cost"], null, "{p}");
    }

    // The tables: `-` where the JSON has null.
    let out = run(&[&"stats", &"-q", &"--state", &state2, &claude, &codex]);
    let out = String::from_utf8(out.stdout).unwrap();
    let agents = block(&out, "by agent");
    assert_eq!(agents.len(), 3, "{out}");
    assert!(
        agents[1].starts_with("  claude ") && agents[1].ends_with(" 1.2090"),
        "{out}"
    );
    assert!(
        agents[2].starts_with("  codex ") && agents[2].ends_with(" -"),
        "{out}"
    );
    for l in block(&out, "usage by model").iter().skip(1) {
        let dash = !l.contains("claude-opus-4-20250514") && !l.contains("claude-sonnet-4-20250514");
        assert_eq!(l.ends_with(" -"), dash, "{l}");
    }
    assert!(!out.contains("0.0000"), "{out}");
    std::fs::remove_dir_all(d).unwrap();
}

/// Issue 47: without `--state`, `stats` prices every response whose agent
/// records no cost from the shipped table, as `usage` does: every model's
/// cost is a number; a model whose responses all recorded theirs keeps its
/// sum to the bit, one with some recorded adds the priced others; the
/// totals are the report's.
#[test]
fn costs_are_priced_where_not_recorded() {
    let d = tmpdir("stats", "priced");
    let claude = generated_claude(&d.join("claude"));
    let codex = generated_codex(&d.join("codex"));
    let s = stats_json(&[&claude, &codex]);
    for m in s["by_model"].as_array().unwrap() {
        assert!(m["cost"].is_number(), "{m}");
    }
    let model = |name: &str| {
        s["by_model"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == name)
            .unwrap()["cost"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(model("claude-opus-4-20250514"), 0.9039987);
    assert!(model("claude-sonnet-4-20250514") > 0.30498644999999996);
    // A project with no usage has nothing priced: its cost stays unknown.
    for p in s["by_project"].as_array().unwrap() {
        let used = p["total_tokens"].as_u64().unwrap() > 0;
        assert_eq!(p["cost"].is_number(), used, "{p}");
    }
    let report = |path: &Path, agent: &str| -> f64 {
        let out = run(&[
            &"usage", &"daily", &"--json", &"-q", &"--agent", &agent, &path,
        ]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["totals"]["costUSD"].as_f64().unwrap()
    };
    let (c, x) = (report(&claude, "claude"), report(&codex, "codex"));
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
    let by = &s["by_source"];
    assert!(
        close(by["claude"]["usage"]["cost"].as_f64().unwrap(), c),
        "{c}"
    );
    assert!(
        close(by["codex"]["usage"]["cost"].as_f64().unwrap(), x),
        "{x}"
    );
    assert!(close(s["usage"]["cost"].as_f64().unwrap(), c + x));
    // The table: costs, no dash.
    let out = run(&[&"stats", &"-q", &claude, &codex]);
    let out = String::from_utf8(out.stdout).unwrap();
    for l in block(&out, "usage by model").iter().skip(1) {
        assert!(!l.ends_with(" -"), "{l}");
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// Issue 42: the human table prints a name from a transcript (a project's
/// cwd, a model) with its control characters escaped, as search does: an
/// escape sequence in a cwd is never sent to the terminal.
#[test]
fn table_names_have_their_control_characters_escaped() {
    let d = tmpdir("stats", "control-names");
    let s = d.join("s.jsonl");
    std::fs::write(
        &s,
        concat!(
            r#"{"type":"session","version":3,"id":"ctl","timestamp":"2026-01-15T10:00:00.000Z","cwd":"/work/\u001b]0;pwned\u0007proj"}"#,
            "\n",
            r#"{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-15T10:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1768471201000}}"#,
            "\n",
        ),
    )
    .unwrap();
    let out = run(&[&"stats", &"-q", &s]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        !table.contains('\u{1b}') && !table.contains('\u{7}'),
        "{table:?}"
    );
    let row = table
        .lines()
        .find(|l| l.contains("pwned"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        row.trim_start()
            .starts_with("/work/\\u{1b}]0;pwned\\u{7}proj "),
        "{row:?}"
    );
    std::fs::remove_dir_all(d).unwrap();
}
