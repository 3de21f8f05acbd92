//! `mem-ingest`: backfill and stats over pi session archives.

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    std::process::exit(cli::run(args));
}
