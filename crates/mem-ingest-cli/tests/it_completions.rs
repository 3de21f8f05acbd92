//! `completions SHELL` and `man [COMMAND]`: produced for every shell and
//! command, naming every command and flag `--help` lists.

#[path = "../../mem-ingest/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(common::bin()).args(args).output().unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "mem-ingest {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The commands `mem-ingest --help` lists (clap's own `help` aside).
fn commands() -> Vec<String> {
    let help = stdout(&["--help"]);
    let list = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .next()
        .unwrap();
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags `mem-ingest COMMAND --help` lists (`--help` aside).
fn long_flags(command: &str) -> Vec<String> {
    stdout(&[command, "--help"])
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .strip_prefix('-')
                .filter(|r| !r.starts_with('-'))
                .map_or(l, |r| r.split_once(", ").map_or(l, |(_, f)| f));
            l.strip_prefix("--")
                .map(|f| f.split([' ', '=', '<']).next().unwrap().to_owned())
        })
        .filter(|f| f != "help")
        .collect()
}

#[test]
fn the_help_lists_what_the_tests_below_check() {
    assert_eq!(
        commands(),
        [
            "backfill",
            "stats",
            "usage",
            "search",
            "redact",
            "sessions",
            "show",
            "mcp",
            "completions",
            "man"
        ]
    );
    let flags = long_flags("search");
    for f in ["db", "json", "limit"] {
        assert!(flags.iter().any(|g| g == f), "{flags:?}");
    }
}

#[test]
fn every_shell_gets_a_script_naming_every_command() {
    let commands = commands();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        assert!(script.len() > 1000, "{shell}: {} bytes", script.len());
        for c in &commands {
            assert!(script.contains(c.as_str()), "{shell}: no {c}");
        }
        // A flag of a command's, as the script completes it.
        assert!(
            script.contains("follow-links"),
            "{shell}: no --follow-links"
        );
    }
    let bash = stdout(&["completions", "bash"]);
    assert!(
        bash.contains("complete -F _mem__ingest -o nosort -o bashdefault -o default mem-ingest"),
        "{bash}"
    );
    let fish = stdout(&["completions", "fish"]);
    assert!(
        fish.contains(
            "complete -c mem-ingest -n \"__fish_mem_ingest_needs_command\" -f -a \"backfill\""
        ),
        "{fish}"
    );
}

#[test]
fn an_unknown_shell_is_refused_with_the_ones_there_are() {
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_man_page_names_every_command_and_each_page_every_flag() {
    let page = stdout(&["man"]);
    assert!(page.starts_with(".ie \\n(.g .ds Aq \\(aq"), "{page}");
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        page.contains(&format!(".TH mem-ingest 1  \"mem-ingest {version}\"")),
        "{page}"
    );
    for c in commands() {
        assert!(
            page.contains(&format!("mem\\-ingest\\-{c}(1)")),
            "no {c}: {page}"
        );
        let sub = stdout(&["man", &c]);
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            sub.contains(&format!(".TH mem-ingest-{c} 1  \"mem-ingest {version}\"")),
            "{sub}"
        );
        assert!(sub.contains(&format!("\\fBmem\\-ingest {c}\\fR")), "{sub}");
        for f in long_flags(&c) {
            let roff = f.replace('-', "\\-");
            assert!(sub.contains(&format!("\\-\\-{roff}")), "{c}: no --{f}");
        }
    }
}

#[test]
fn an_unknown_command_has_no_page() {
    let out = run(&["man", "frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: man: no command \"frobnicate\"; the commands are backfill, stats, usage, \
         search, redact, sessions, show, mcp, completions, man\n"
    );
    assert!(out.stdout.is_empty());
}
