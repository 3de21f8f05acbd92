//! `mem-ingest`: backfill, stats and search over the session archives of
//! coding agents (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex, Amp, Cline, OpenCode, Cursor, Goose).

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    std::process::exit(cli::run(args));
}
