//! The README and the pages of `docs/` kept true where they show a command
//! or a schema: the README stays a page (under 200 lines) whose links reach
//! every page; every command a page shows is one the binary takes, with
//! flags it knows; the store's and the dataset's pages name every table,
//! column and field their schemas have. (The library's page runs as the
//! crate's doctests: `crates/mem-ingest/src/lib.rs` includes it.)

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

fn root() -> PathBuf {
    common::shared::repo_root()
}

/// The README and every page of `docs/`, as (path from the root, text).
fn pages() -> Vec<(String, String)> {
    let mut out = vec![(
        "README.md".to_owned(),
        std::fs::read_to_string(root().join("README.md")).unwrap(),
    )];
    let mut names: Vec<_> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    for n in names {
        let text = std::fs::read_to_string(root().join("docs").join(&n)).unwrap();
        out.push((format!("docs/{n}"), text));
    }
    out
}

/// The targets of a page's relative Markdown links (`](target)`), without
/// an anchor.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") {
            out.push(target.to_owned());
        }
    }
    out
}

#[test]
fn the_readme_is_a_page_that_links_every_doc() {
    let all = pages();
    let readme = &all[0].1;
    let lines = readme.lines().count();
    assert!(lines < 200, "README.md has {lines} lines");
    let linked: BTreeSet<String> = links(readme).into_iter().collect();
    for (path, _) in &all[1..] {
        assert!(linked.contains(path), "README.md does not link {path}");
    }
    // Every relative link of every page reaches a file.
    for (path, text) in &all {
        let dir = root().join(path).parent().unwrap().to_path_buf();
        for target in links(text) {
            assert!(
                dir.join(&target).exists(),
                "{path} links {target}, which does not exist"
            );
        }
    }
}

/// The command lines of a page's `sh` blocks, continuation lines joined,
/// comments left out.
fn shell_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut joined = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = !in_sh && t == "```sh";
            continue;
        }
        if !in_sh || t.starts_with('#') {
            continue;
        }
        let t = match t.find("  #") {
            Some(at) => t[..at].trim_end(),
            None => t,
        };
        match t.strip_suffix('\\') {
            Some(part) => joined.push_str(part),
            None => {
                joined.push_str(t);
                out.push(std::mem::take(&mut joined));
            }
        }
    }
    out
}

/// The mem-ingest invocations of a command line: the words after the
/// binary (`mem-ingest`, `./target/release/mem-ingest`) where a command
/// starts (the line's start, after a pipe, `&&`, `;`, or the `--` of a
/// command that runs it: `claude mcp add mem-ingest -- mem-ingest mcp`),
/// or after `cargo run --release --` (not `--bin gen-corpus`'s), to the
/// end of the command (a pipe, a redirection, `&&`).
fn invocations(line: &str) -> Vec<Vec<String>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let at_start = i == 0 || ["|", "&&", ";", "--"].contains(&words[i - 1]);
        let start = if at_start && (w == "mem-ingest" || w.ends_with("/mem-ingest")) {
            Some(i + 1)
        } else if words[i..].starts_with(&["cargo", "run", "--release", "--"]) {
            Some(i + 4)
        } else {
            None
        };
        match start {
            Some(s) => {
                let args: Vec<String> = words[s..]
                    .iter()
                    .take_while(|a| !["|", ">", "&&", ";", "2>"].contains(a))
                    .map(|a| (*a).to_owned())
                    .collect();
                i = s + args.len();
                out.push(args);
            }
            None => i += 1,
        }
    }
    out
}

#[test]
fn every_command_a_page_shows_is_one_the_binary_takes() {
    let mut checked = 0;
    for (path, text) in pages() {
        for line in shell_lines(&text) {
            for args in invocations(&line) {
                let Some(sub) = args.first() else { continue };
                let help = Command::new(common::bin())
                    .args([sub.as_str(), "--help"])
                    .output()
                    .unwrap();
                assert!(
                    help.status.success(),
                    "{path}: `{line}`: mem-ingest has no subcommand {sub:?}"
                );
                let help = String::from_utf8(help.stdout).unwrap();
                for flag in args.iter().filter(|a| a.starts_with('-')) {
                    let flag = flag.split('=').next().unwrap();
                    let known = if flag.starts_with("--") {
                        help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n"))
                    } else {
                        help.contains(&format!("{flag}, "))
                    };
                    assert!(
                        known,
                        "{path}: `{line}`: `mem-ingest {sub}` has no flag {flag}"
                    );
                }
                checked += 1;
            }
        }
    }
    // The README's two commands and five examples, and the pages' own.
    assert!(checked >= 21, "only {checked} commands found in the pages");
}

/// The tables of an SQL schema, each with its columns (an FTS5 table's
/// none).
fn tables(sql: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in sql.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("CREATE TABLE ") {
            let name = rest.split([' ', '(']).next().unwrap().to_owned();
            current = Some((name, Vec::new()));
        } else if let Some(rest) = line.strip_prefix("CREATE VIRTUAL TABLE ") {
            out.push((rest.split(' ').next().unwrap().to_owned(), Vec::new()));
        } else if line.starts_with(')') {
            out.extend(current.take());
        } else if let Some((_, cols)) = current.as_mut() {
            let word = line.split_whitespace().next().unwrap_or("");
            if !word.is_empty() && !["PRIMARY", "UNIQUE", "FOREIGN", "CHECK"].contains(&word) {
                cols.push(word.to_owned());
            }
        }
    }
    out
}

#[test]
fn the_store_page_names_every_table_and_column_of_the_schema() {
    let page = std::fs::read_to_string(root().join("docs/store.md")).unwrap();
    let version = format!("Schema (version {},", mem_ingest_store::SCHEMA_VERSION);
    assert!(
        page.contains(&version),
        "docs/store.md does not say {version:?}"
    );
    let tables = tables(mem_ingest_store::SCHEMA);
    let names: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "records",
            "records_fts",
            "sessions",
            "session_files",
            "checkpoint_meta",
            "checkpoint_files",
            "checkpoint_fingerprints",
            "checkpoint_joins",
            "checkpoint_responses",
            "usage",
        ]
    );
    for (table, cols) in &tables {
        assert!(
            page.contains(&format!("`{table}`")),
            "docs/store.md: no `{table}`"
        );
        // The checkpoint's tables are described as a group, not column by
        // column: they are the store's own, not the contract.
        if table.starts_with("checkpoint_") {
            continue;
        }
        for c in cols {
            assert!(
                page.contains(&format!("`{c}`")),
                "docs/store.md: no column `{c}` of `{table}`"
            );
        }
    }
}

#[test]
fn the_dataset_page_names_every_field_of_the_schema() {
    let page = std::fs::read_to_string(root().join("docs/dataset.md")).unwrap();
    let schema = mem_ingest_dataset::schema();
    let fields: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    assert!(fields.len() > 30, "{fields:?}");
    for f in &fields {
        assert!(
            page.contains(&format!("`{f}`")),
            "docs/dataset.md: no field `{f}`"
        );
    }
    let usage = &page[page.find("\n## Usage\n").expect("a usage section")..];
    for f in mem_ingest_dataset::usage_schema().fields() {
        assert!(
            usage.contains(&format!("`{}`", f.name())),
            "docs/dataset.md, ## Usage: no field `{}`",
            f.name()
        );
    }
}

#[test]
fn the_pages_parse_what_they_are_checked_by() {
    // The checks above must see what they check: a command with its flags,
    // a schema with its columns.
    let line = "mem-ingest backfill --db x.db --follow | head";
    assert_eq!(
        invocations(line),
        vec![["backfill", "--db", "x.db", "--follow"]
            .map(String::from)
            .to_vec()]
    );
    // Where a command starts only: `mem-ingest` as another's argument is
    // not one.
    assert_eq!(
        invocations("claude mcp add mem-ingest -- mem-ingest mcp --db m.db"),
        vec![["mcp", "--db", "m.db"].map(String::from).to_vec()]
    );
    let sh = "```sh\n./target/release/mem-ingest stats \\\n    --json > s.json  # the same\n# a comment\n```\n";
    assert_eq!(
        shell_lines(sh),
        vec!["./target/release/mem-ingest stats --json > s.json"]
    );
    let t = tables("CREATE TABLE t (\n    a TEXT,\n    b INT,\n    PRIMARY KEY (a)\n);\nCREATE VIRTUAL TABLE f USING fts5(x);\n");
    assert_eq!(
        t,
        vec![
            ("t".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
            ("f".to_owned(), vec![])
        ]
    );
}
