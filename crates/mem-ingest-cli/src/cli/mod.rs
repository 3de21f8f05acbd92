//! The command line: `backfill` and `stats` over whole archives, a thin
//! user of the library's [`mem_ingest::archive`] engine.

mod mcp;
mod output;
mod safe;
mod sessions;
mod show;
mod usage;
mod when;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mem_ingest::archive::{refuse_streams, Archive, ArchiveBuilder, Links, Progress, Summary};
use mem_ingest::format::Format;
use mem_ingest::sink::{NdjsonFile, NdjsonStdout};
use mem_ingest::{parse_iso_millis, Error, ErrorKind, Role};
use mem_ingest_dataset::{ParquetDataset, Shard};
use mem_ingest_store::{Search, SqliteStore};

/// Reads the session archives of coding agents (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex, Amp, Cline, OpenCode, Cursor, Goose) into normalised records.
#[derive(Parser, Debug)]
#[command(name = "mem-ingest", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Writes one JSON object per record (NDJSON), files in sorted path
    /// order, records in file order.
    Backfill(BackfillArgs),
    /// Prints what an archive holds.
    Stats(StatsArgs),
    /// Tokens and cost by day, week, month or session, in ccusage's JSON
    /// names: every response the stats count, priced.
    Usage(usage::UsageArgs),
    /// Searches a store written by `backfill --db` (full text, best first).
    Search(SearchArgs),
    /// Redacts a store written before redaction existed (or with
    /// --no-redact), in place: each record's secrets replaced as a backfill
    /// replaces them, the full-text index rebuilt, no old text left in the
    /// file; later backfills into it redact too.
    Redact(RedactArgs),
    /// Lists the sessions of a store, newest first, each with its first
    /// prompt.
    Sessions(sessions::SessionsArgs),
    /// Prints a session of a store as a transcript: each message in time
    /// order, tool output folded to a line.
    Show(show::ShowArgs),
    /// Serves the store to agents over the Model Context Protocol on stdin
    /// and stdout: tools search, sessions and session (see the README for
    /// each agent's configuration).
    Mcp(McpArgs),
    /// Prints a shell's completion script (see the README's install
    /// section for where each shell looks for it).
    Completions(CompletionsArgs),
    /// Prints the man page, roff for `man -l -` (or, given a COMMAND,
    /// that command's page: mem-ingest-COMMAND(1)).
    Man(ManArgs),
}

#[derive(Args, Debug)]
struct McpArgs {
    /// The store (written by backfill --db). Default: $MEM_INGEST_DB, else
    /// $XDG_DATA_HOME/mem-ingest/memory.db (~/.local/share/...).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct RedactArgs {
    /// The store (written by backfill --db). Required: a store is
    /// rewritten only when named.
    #[arg(long, value_name = "FILE")]
    db: PathBuf,
    /// No summary (errors are still printed).
    #[arg(long, short = 'q')]
    quiet: bool,
}

#[derive(Args, Debug)]
struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
struct ManArgs {
    /// A command whose page to print instead of mem-ingest(1)'s.
    #[arg(value_name = "COMMAND")]
    command: Option<String>,
}

#[derive(Args, Debug)]
struct Common {
    /// Session files, or folders searched recursively for `*.jsonl`.
    /// Default: every archive that exists: pi's
    /// ($PI_CODING_AGENT_SESSION_DIR, else $PI_CODING_AGENT_DIR/sessions,
    /// else ~/.pi/agent/sessions), Gemini CLI's (tmp/ of
    /// $GEMINI_CLI_HOME/.gemini and each of $GEMINI_DATA_DIR, a comma list,
    /// else ~/.gemini/tmp), Qwen Code's (projects/ of
    /// $QWEN_RUNTIME_DIR and of each of $QWEN_DATA_DIR, a comma list, else
    /// of ~/.qwen), Copilot CLI's (session-state/ of $COPILOT_HOME, else
    /// of ~/.copilot) and Claude Code's (projects/ in each of
    /// $CLAUDE_CONFIG_DIR, a comma list, else $XDG_CONFIG_HOME/claude and
    /// ~/.claude) and Codex's (sessions/ and archived_sessions/ of
    /// $CODEX_HOME, else ~/.codex) and Amp's (threads/ of each of
    /// $AMP_DATA_DIR, a comma list, else $XDG_DATA_HOME/amp/threads and
    /// ~/.local/share/amp/threads) and Cline's (tasks/ and sessions/ of
    /// $CLINE_DATA_DIR, else $CLINE_DIR/data, else ~/.cline/data;
    /// $CLINE_SESSION_DATA_DIR; the VS Code global storage
    /// saoudrizwan.claude-dev of Code, Code - Insiders, VSCodium and
    /// Cursor).
    paths: Vec<PathBuf>,
    /// Follow symbolic links met while walking a folder (to files and
    /// folders). By default they are not followed: a link inside an
    /// archive may lead out of it. PATHs named here, and the default
    /// archives, are followed either way. A --state or --db records it and
    /// refuses a run that differs; one saved before it was recorded
    /// followed links (every run did then): give -L to go on with it.
    #[arg(long, short = 'L')]
    follow_links: bool,
    /// Worker threads (default: the number of cores). The output does not
    /// depend on it.
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: Option<u32>,
    /// No progress bar, no warnings, no summary (errors are still printed).
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Checkpoint file: a re-run reads only what is new since the last run
    /// (unchanged files are not opened, grown ones are read from where the
    /// last run stopped). It records the options that shape the output; a
    /// run with others refuses. Two runs cannot use one state at once.
    /// Exit status: a damaged or foreign state 1; other options 2; a state
    /// in use by another run 2; an -o output shorter than the state covers
    /// 1; an -o output that holds bytes the state does not cover (a new
    /// state, or one saved by a run to stdout) 2, the output left as it is.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Keep copies of an entry: by default each entry is emitted and
    /// counted once per lineage (a session, its forks, a history written
    /// twice), the copy kept being the one of the session that wrote it
    /// first.
    #[arg(long)]
    no_dedupe: bool,
    /// Read only this agent's sessions (repeatable): pi, gemini (Gemini
    /// CLI), qwen (Qwen Code), copilot (Copilot CLI), claude (Claude
    /// Code), codex (Codex), amp (Amp), cline (Cline), opencode, goose,
    /// cursor (their databases, read-only). Default: every agent's (with
    /// PATHs, each file's agent is detected from its first lines, a
    /// database by its tables; a file none claims is read as pi's). A
    /// --state or --db records the agents it reads, and a later run
    /// without --agent reads the same, also after an upgrade that reads
    /// more agents (one saved before they were recorded: the agents of
    /// the files it holds, pi when none); an --agent naming one it does
    /// not record adds it (that run reads the recorded agents too); naming
    /// fewer is refused (exit 2).
    #[arg(
        long = "agent",
        visible_alias = "source",
        value_enum,
        value_name = "AGENT"
    )]
    agents: Vec<Agent>,
    /// The permissions of the files the run creates (the output, the state,
    /// the store and its WAL and lock files, a dataset's parts), in octal,
    /// whatever the umask: by default readable and writable by their owner
    /// alone. Folders it creates get the matching execute bits (0600:
    /// 0700; 0640, for a team that shares a dataset: 0750). An output that
    /// exists keeps its own.
    #[arg(long, value_name = "MODE", default_value = "0600", value_parser = parse_file_mode)]
    file_mode: u32,
    /// Milliseconds between checkpoints of the state (tests set it low).
    /// (Default 5000; with --parquet 60000: each checkpoint closes the
    /// parts being written.)
    #[arg(long, hide = true)]
    checkpoint_ms: Option<u64>,
    /// --follow polls the files only, without file notifications (as on a
    /// file system without them; tests).
    #[arg(long, hide = true)]
    follow_poll: bool,
}

impl Common {
    /// The options of a `usage` report's pass: no state, deduplicated.
    fn for_usage(
        paths: &[PathBuf],
        agents: &[Agent],
        follow_links: bool,
        jobs: Option<u32>,
        quiet: bool,
    ) -> Common {
        Common {
            paths: paths.to_vec(),
            follow_links,
            jobs,
            quiet,
            state: None,
            no_dedupe: false,
            agents: agents.to_vec(),
            file_mode: 0o600,
            checkpoint_ms: None,
            follow_poll: false,
        }
    }
}

#[derive(Args, Debug)]
struct BackfillArgs {
    #[command(flatten)]
    common: Common,
    /// Write to FILE instead of stdout. Without --state, FILE is replaced
    /// when the run ends, whole (a temporary file renamed), and left to the
    /// system to write to disk, as cp does. With --state, FILE is appended
    /// to, run after run, every record exactly once even when a run is
    /// killed (the state and the output are one pair, and FILE is synced
    /// before the state is saved). To stdout, --state can only promise each
    /// record at least once.
    #[arg(long, short = 'o', value_name = "FILE", conflicts_with = "db")]
    output: Option<PathBuf>,
    /// With -o: write a usage row per counted response (exactly the
    /// responses `stats` counts; tokens, cost) as NDJSON into FILE, beside
    /// the records: replaced when the run ends, as -o, or with --state
    /// appended to, every row exactly once even when a run is killed (the
    /// state, -o and FILE are one set). A state that pairs with a usage file
    /// refuses a run without it (exit 2).
    #[arg(long, value_name = "FILE", requires = "output")]
    usage_out: Option<PathBuf>,
    /// Write into the SQLite store FILE (created when missing): one row
    /// per record, sessions, a full-text index, and its own checkpoint in
    /// the same transactions, so runs are incremental and exactly once
    /// without --state (which it excludes, with -o). Readable while it is
    /// written (WAL). The store is the deduplicated view: --no-dedupe is
    /// refused. A store another run writes is refused (exit 2).
    #[arg(long, value_name = "FILE", conflicts_with = "state")]
    db: Option<PathBuf>,
    /// Write a Hive-partitioned Parquet dataset into the folder DIR
    /// (created when missing) for DuckDB, Spark and the like:
    /// DIR/records/format=<pi|gemini|qwen|copilot|claude|codex|amp|cline>/date=<YYYY-MM-DD, UTC>/part-*.parquet,
    /// records without a timestamp under date=__HIVE_DEFAULT_PARTITION__
    /// (read as null), and beside them DIR/usage/format=<agent>/date=<...>/:
    /// a row per response `stats` counts (tokens, cost), in the same
    /// checkpoints. A DIR of an earlier version (records at DIR/format=...)
    /// is refused (exit 2), with how to move it. Parts are written whole (a temporary name, then a
    /// rename) and never rewritten; a run never deletes a part it did not
    /// write. Without --state, a DIR that holds parts of the same shard
    /// already is refused (exit 2). With --state, runs add parts, every
    /// record exactly once even when a run is killed (the state lists its
    /// parts; a part a killed run left is removed by the next). Excludes -o
    /// and --db, and --follow (exit 2): tiny parts every few seconds are
    /// what query engines handle worst.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["output", "db", "follow"])]
    parquet: Option<PathBuf>,
    /// Take only shard K of N of the archive (0 <= K < N), with -o or
    /// --parquet: N runs with K = 0..N-1 (on as many machines or jobs)
    /// write exactly the records of one run between them, their parts
    /// sharing one --parquet DIR if wanted. A file's shard is its lineage's
    /// (a session, its forks, other files of it: what deduplication keeps
    /// together; all of Claude Code's sessions are one lineage, and so
    /// are all of Qwen Code's), from a
    /// stable hash of the lineage's root session (FNV-1a 64 of its id,
    /// modulo N; see the README), never of a path. Every shard reads every
    /// session header. A --state records K/N and refuses another (exit 2).
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
    /// Caps the store at this many pages (tests of a full disk).
    #[arg(long, hide = true, requires = "db")]
    db_max_pages: Option<u64>,
    /// Keep only these roles (repeatable): user, assistant, tool_result,
    /// bash_execution, custom, system.
    #[arg(long, value_parser = parse_role, value_name = "ROLE")]
    role: Vec<Role>,
    /// Keep records at or after TIME (RFC 3339, or a date: its start, UTC).
    /// Records without a timestamp are dropped when a time bound is set.
    #[arg(long, value_parser = parse_time, value_name = "TIME")]
    since: Option<i64>,
    /// Keep records before TIME (RFC 3339, or a date: its start, UTC).
    #[arg(long, value_parser = parse_time, value_name = "TIME")]
    until: Option<i64>,
    /// Cut longer texts at a UTF-8 boundary; `text_bytes` then gives the
    /// full length.
    #[arg(long, value_name = "BYTES")]
    max_text: Option<usize>,
    /// Keep secrets as written. By default each secret in a record's free
    /// text (`text`, `command`) is replaced by `[REDACTED:<rule id>]`
    /// (gitleaks' rules: docs/privacy.md) before any output sees it. A
    /// --state or --db records the choice and refuses the other (exit 2).
    #[arg(long)]
    no_redact: bool,
    /// Keep running (needs --state or --db): emit each new complete line
    /// of any session under the PATHs as its agent writes it (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex, Amp, Cline, OpenCode, Cursor, Goose), pick up new session files, and stop cleanly on SIGINT
    /// or SIGTERM with the state saved. On a terminal, stderr shows the
    /// files followed and the records written so far.
    #[arg(long)]
    follow: bool,
}

#[derive(Args, Debug)]
struct StatsArgs {
    #[command(flatten)]
    common: Common,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct SearchArgs {
    /// What to find. Words as people type them: identifiers
    /// (parse_iso_millis), paths (src/cli/run.rs), error codes (E0502) and
    /// "exact phrases" find the records that contain them, all words
    /// required. With --fts, FTS5 query syntax, passed through.
    query: String,
    /// The store (written by backfill --db). Default: $MEM_INGEST_DB, else
    /// $XDG_DATA_HOME/mem-ingest/memory.db (~/.local/share/...).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Only records whose project (its cwd) holds this, ASCII case folded.
    #[arg(long, value_name = "TEXT")]
    project: Option<String>,
    /// Only records of this role.
    #[arg(long, value_parser = parse_role, value_name = "ROLE")]
    role: Option<Role>,
    /// Only records at or after TIME: RFC 3339, a date, 7d, 24h, 2w, today,
    /// yesterday (the local day's start), "last week".
    #[arg(long, value_parser = when::parse_when, value_name = "TIME")]
    since: Option<i64>,
    /// Only records before TIME (as --since).
    #[arg(long, value_parser = when::parse_when, value_name = "TIME")]
    until: Option<i64>,
    /// Only records of sessions whose id starts with this.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only records of this agent: pi, gemini, qwen, copilot, claude, codex, amp, cline, opencode,
    /// goose or cursor (the `format` column).
    #[arg(long, visible_alias = "format", value_enum, value_name = "AGENT")]
    agent: Option<Agent>,
    /// At most N hits.
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    limit: u32,
    /// One JSON object per hit (key, session, project, timestamp, role,
    /// agent, file, line, byte, snippet, rank) instead of text.
    #[arg(long)]
    json: bool,
    /// QUERY is FTS5 query syntax (NEAR, OR, prefix*, column filters).
    #[arg(long)]
    fts: bool,
    /// Times in UTC, not the local zone.
    #[arg(long)]
    utc: bool,
    /// Rank every match. By default, when more than 1,000 records match,
    /// the 1,000 stored last (the newest) are ranked: BM25 over all the
    /// matches of a common word takes a tenth of a second and more.
    #[arg(long)]
    rank_all: bool,
}

/// `--file-mode`: octal permission bits, no execute bits (the files hold
/// records, not programs), readable and writable by the owner (a run
/// reopens its own files).
fn parse_file_mode(s: &str) -> Result<u32, String> {
    let digits = s.strip_prefix("0o").unwrap_or(s);
    let mode = u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?} is not an octal mode (0600, 0640, 0644)"))?;
    if mode & 0o111 != 0 {
        return Err(format!(
            "{s}: files that hold records get no execute bits (0600, 0640, 0644)"
        ));
    }
    if mode & 0o600 != 0o600 {
        return Err(format!(
            "{s}: the owner must read and write the files a run reopens (0600, 0640, 0644)"
        ));
    }
    Ok(mode)
}

/// Makes every file and folder the process creates from here on get
/// `mode` (folders with an execute bit beside each read bit), whatever
/// the umask it was started with: the umask is set to what `mode` leaves
/// out. Called once, before any thread starts.
fn create_with_mode(mode: u32) {
    let folders = mode | ((mode & 0o444) >> 2);
    let mask = !folders & 0o777;
    // SAFETY: umask(2) takes a value and returns one; it touches no memory
    // and cannot fail. The process has one thread here.
    #[allow(unsafe_code)]
    unsafe {
        libc::umask(mask as libc::mode_t);
    }
}

fn parse_role(s: &str) -> Result<Role, String> {
    let alias = match s {
        "toolResult" => "tool_result",
        "bashExecution" => "bash_execution",
        other => other,
    };
    Role::from_name(alias).ok_or_else(|| {
        let names: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
        format!("unknown role {s:?} ({})", names.join(", "))
    })
}

fn parse_time(s: &str) -> Result<i64, String> {
    parse_iso_millis(s).ok_or_else(|| format!("{s:?} is not an RFC 3339 time or a date"))
}

/// An agent whose sessions are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Agent {
    /// The pi coding agent.
    Pi,
    /// Gemini CLI (its JSONL chat recordings).
    Gemini,
    /// Qwen Code.
    Qwen,
    /// GitHub Copilot CLI.
    Copilot,
    /// Amp (its thread files).
    Amp,
    /// Cline (its task and session files).
    Cline,
    /// Claude Code.
    Claude,
    /// OpenAI Codex CLI.
    Codex,
    /// OpenCode (its SQLite database, read-only, and its pre-1.2 storage/ JSON tree).
    Opencode,
    /// Goose (its SQLite database, read-only, and its legacy JSONL sessions).
    Goose,
    /// Cursor (the IDE's global state.vscdb, read-only, and the CLI's agent-transcripts).
    Cursor,
}

impl Agent {
    /// Its format, from the library's registry by its name (`--agent`'s
    /// value is the format's name).
    pub(crate) fn format(self) -> Arc<dyn Format> {
        use clap::ValueEnum;
        let value = self.to_possible_value().expect("every agent has a name");
        mem_ingest::formats::by_name(value.get_name())
            .unwrap_or_else(|| panic!("{} is not a registered format", value.get_name()))
    }
}

/// The formats `--agent` names, pi's first (a file no format claims is
/// the first's).
fn formats(c: &Common) -> Vec<Arc<dyn Format>> {
    let mut agents = match &c.agents[..] {
        [] => vec![
            Agent::Pi,
            Agent::Gemini,
            Agent::Qwen,
            Agent::Copilot,
            Agent::Amp,
            Agent::Cline,
            Agent::Claude,
            Agent::Codex,
            Agent::Opencode,
            Agent::Goose,
            Agent::Cursor,
        ],
        s => s.to_vec(),
    };
    agents.sort_by_key(|s| *s as u8);
    agents.dedup();
    agents.into_iter().map(Agent::format).collect()
}

/// Runs the command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    // The database agents' formats live in a crate of their own (SQLite):
    // in the registry before anything asks it.
    mem_ingest_db::register();
    create_with_mode(match &cli.command {
        Command::Backfill(a) => a.common.file_mode,
        Command::Stats(a) => a.common.file_mode,
        // A store `search` opens may get its `-shm` file from it.
        _ => 0o600,
    });
    match cli.command {
        Command::Backfill(a) => backfill(a),
        Command::Stats(a) => stats(a),
        Command::Usage(a) => usage::usage(a),
        Command::Search(a) => search(a),
        Command::Redact(a) => redact_store(a),
        Command::Sessions(a) => sessions::sessions(a),
        Command::Show(a) => show::show(a),
        Command::Mcp(a) => mcp_serve(a),
        Command::Completions(a) => completions(a),
        Command::Man(a) => man(a),
    }
}

/// `mcp`: the store served, once it is known to be there (an agent's
/// configuration pointing at no store says so on stderr, which the agent
/// shows, and exits 1).
fn mcp_serve(a: McpArgs) -> i32 {
    let (db, default) = match sessions::store_path(a.db) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if !db.is_file() {
        sessions::no_store(&db, default);
        return 1;
    }
    mcp::serve(db)
}

/// `completions SHELL`: the script clap_complete writes for the command
/// line as it is defined here, so that it names every command and flag.
fn completions(a: CompletionsArgs) -> i32 {
    use clap::CommandFactory;
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "mem-ingest", &mut script);
    print_all(&script)
}

/// `man [COMMAND]`: mem-ingest(1), which lists the commands, or a
/// command's own page, with its every option.
fn man(a: ManArgs) -> i32 {
    use clap::CommandFactory;
    let top = Cli::command();
    let page = match a.command.as_deref() {
        None => top,
        Some(name) => match top.find_subcommand(name) {
            // Titled mem-ingest-COMMAND, as the commands' list names it;
            // its synopsis the words typed.
            Some(c) => c
                .clone()
                .display_name(format!("mem-ingest-{name}"))
                .bin_name(format!("mem-ingest {name}")),
            None => {
                let names: Vec<&str> = top.get_subcommands().map(|c| c.get_name()).collect();
                eprintln!(
                    "error: man: no command {name:?}; the commands are {}",
                    names.join(", ")
                );
                return 2;
            }
        },
    };
    let mut roff = Vec::new();
    let source = format!("mem-ingest {}", env!("CARGO_PKG_VERSION"));
    if let Err(e) = clap_mangen::Man::new(page).source(source).render(&mut roff) {
        eprintln!("error: man: {e}");
        return 1;
    }
    print_all(&roff)
}

/// Writes `bytes` to stdout: 0, or 1 with the error said (a reader that
/// went away, as `| head` does, ends it quietly with 0: it had what it
/// wanted).
fn print_all(bytes: &[u8]) -> i32 {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("error: writing to stdout: {e}");
            1
        }
    }
}

/// The archive the common options describe, its stop flag taking SIGINT
/// and SIGTERM over when a checkpoint is kept (a state, or a store: `db`).
fn builder(c: &Common, db: bool, parquet: bool) -> Result<ArchiveBuilder, i32> {
    let every = c
        .checkpoint_ms
        .unwrap_or(if parquet { 60_000 } else { 5000 });
    let mut b = Archive::builder()
        .paths(c.paths.iter().cloned())
        .formats(formats(c))
        .formats_from_checkpoint(c.agents.is_empty())
        .dedupe(!c.no_dedupe)
        .links(if c.follow_links {
            Links::Follow
        } else {
            Links::Skip
        })
        .checkpoint_every(std::time::Duration::from_millis(every))
        .poll_only(c.follow_poll);
    if let Some(j) = c.jobs {
        b = b.jobs(j as usize);
    }
    if c.state.is_some() || db {
        // Before anything is touched: from here on SIGINT and SIGTERM stop
        // the run cleanly (a signal before this ends the process with
        // nothing written, which a re-run takes like a kill).
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            if let Err(e) = signal_hook::flag::register(sig, stop.clone()) {
                eprintln!("error: {e}");
                return Err(1);
            }
        }
        b = b.stop_flag(stop);
    }
    if let Some(s) = &c.state {
        b = b.state(s);
    }
    if db {
        // A store commits its rows with the checkpoint that covers them:
        // about a second apart at most.
        b = b.checkpoint_every(std::time::Duration::from_millis(every.min(1000)));
    }
    if !c.quiet && io::stderr().is_terminal() {
        b = b.progress(Arc::new(Bar(ProgressBar::hidden(), Mutex::new(None))));
    }
    Ok(b)
}

/// The progress bar on stderr; following, a line that says what is
/// followed, redrawn when that changes (the files and records it said
/// last).
struct Bar(ProgressBar, Mutex<Option<(u64, u64)>>);

/// What a `--follow` run shows on a terminal after each pass.
fn follow_line(files: u64, written: u64) -> String {
    format!(
        "following {} files: {} records written so far",
        output::count(files),
        output::count(written)
    )
}

impl Progress for Bar {
    fn start(&self, total: u64) {
        self.0.set_draw_target(ProgressDrawTarget::stderr());
        self.0.set_length(total);
        self.0.set_position(0);
        self.0.set_style(
            ProgressStyle::with_template(
                "{bar:40} {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
            )
            .expect("valid template"),
        );
    }

    fn advance(&self, bytes: u64) {
        self.0.inc(bytes);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }

    fn following(&self, files: u64, written: u64) {
        let mut said = self.1.lock().unwrap_or_else(|e| e.into_inner());
        if said.is_none() {
            self.0.set_draw_target(ProgressDrawTarget::stderr());
            self.0
                .set_style(ProgressStyle::with_template("{msg}").expect("valid template"));
        }
        if *said != Some((files, written)) {
            *said = Some((files, written));
            self.0.set_message(follow_line(files, written));
        }
    }
}

/// The exit code of an error that kept a run from completing: 2 for what
/// the user must change (other options, a locked state, an output not the
/// state's, the output among the inputs), 1 for the rest.
fn fail(e: &Error) -> i32 {
    eprintln!("error: {e}");
    if e.is_usage() {
        2
    } else {
        1
    }
}

/// Whether two paths name one file: the same spelling, or the same file
/// on the disk.
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn backfill(a: BackfillArgs) -> i32 {
    if a.db.is_some() && a.common.no_dedupe {
        eprintln!(
            "error: --no-dedupe with --db: the store is the deduplicated view of the archive \
             (each entry once per lineage); use -o for every copy"
        );
        return 2;
    }
    if a.follow && a.common.state.is_none() && a.db.is_none() {
        eprintln!("error: --follow needs --state FILE or --db FILE");
        return 2;
    }
    if a.shard.is_some() && a.output.is_none() && a.parquet.is_none() {
        eprintln!("error: --shard needs -o FILE or --parquet DIR");
        return 2;
    }
    if a.common.state.is_some() || a.db.is_some() || a.parquet.is_some() || a.follow {
        // A pipe among the PATHs: refused before the store or the dataset
        // is made.
        if let Err(e) = refuse_streams(&a.common.paths) {
            return fail(&e);
        }
    }
    let shard = a.shard.unwrap_or(Shard::ALL);
    let mut b = match builder(&a.common, a.db.is_some(), a.parquet.is_some()) {
        Ok(b) => b,
        Err(code) => return code,
    };
    b = b.roles(&a.role).shard(shard);
    if let Some(t) = a.since {
        b = b.since(t);
    }
    if let Some(t) = a.until {
        b = b.until(t);
    }
    if let Some(m) = a.max_text {
        b = b.max_text(m);
    }
    b = b.redact(!a.no_redact);
    let archive = b.build();
    // Before an output, a state or a store is made: a run that finds no
    // archive leaves nothing behind.
    if let Err(e) = archive.check_archive() {
        return fail(&e);
    }
    let started = Instant::now();
    let result = match (&a.output, &a.common.state) {
        _ if a.parquet.is_some() => {
            let dir = a.parquet.clone().expect("--parquet");
            match &a.common.state {
                Some(s) => send(&archive, false, &mut ParquetDataset::append(dir, shard, s)),
                None => ParquetDataset::create(dir, shard)
                    .and_then(|mut ds| send(&archive, false, &mut ds)),
            }
        }
        _ if a.db.is_some() => match open_store(&a) {
            Ok(mut store) => send(&archive, a.follow, &mut store),
            Err(e) => Err(e),
        },
        (None, _) => send(&archive, a.follow, &mut NdjsonStdout::new()),
        (Some(o), state) => {
            if let Some(u) = &a.usage_out {
                if same_file(o, u) || a.common.state.as_deref().is_some_and(|s| same_file(s, u)) {
                    eprintln!(
                        "error: --usage-out {}: the usage rows' file must be a file of its \
                         own (not -o's or --state's)",
                        u.display()
                    );
                    return 2;
                }
            }
            let f = match state {
                None => NdjsonFile::create(o),
                Some(s) => NdjsonFile::append(o, s),
            };
            let mut f = match &a.usage_out {
                Some(u) => f.usage_out(u),
                None => f,
            };
            send(&archive, a.follow, &mut f)
        }
    };
    match result {
        Err(e) => fail(&e),
        Ok(t) => {
            if t.closed {
                return 0;
            }
            if t.unredacted_checkpoint && !a.common.quiet {
                unredacted_checkpoint(&a);
            }
            if let (Some(r), false) = (&t.usage_reread, a.common.quiet) {
                usage_reread(&a, r);
            }
            // Revisions of records written before (messages edited after
            // they were emitted): a store's rows updated by key; counted,
            // never written twice, by NDJSON and Parquet.
            let what = match t.updated {
                0 => format!(" ({} written)", t.written),
                n => format!(" ({} written, {n} updated)", t.written),
            };
            summary(a.common.quiet, &t, started, &what);
            if !a.common.quiet && !t.redactions.is_empty() {
                let n: u64 = t.redactions.values().sum();
                let by_rule: Vec<String> = t
                    .redactions
                    .iter()
                    .map(|(rule, n)| format!("{rule} {n}"))
                    .collect();
                eprintln!("mem-ingest: {n} secrets redacted ({})", by_rule.join(", "));
            }
            exit_code(&t)
        }
    }
}

/// Says what a store made before it kept usage rows had read again for
/// them: the files and bytes, the rows, the time; each file that could not
/// be, with why (its usage is not in the store), and the responses left
/// without a time.
fn usage_reread(a: &BackfillArgs, r: &mem_ingest::archive::UsageReread) {
    let db = a.db.as_deref().unwrap_or(Path::new("")).display();
    let files = |n: usize| format!("{n} file{}", if n == 1 { "" } else { "s" });
    eprintln!(
        "mem-ingest: {db}: usage rows for what the store read before it kept them: {} \
         ({} bytes) read again, {} rows written, in {:.1} s",
        files(r.files as usize),
        r.bytes,
        r.written,
        r.seconds
    );
    for (p, why) in r.unread.iter().take(20) {
        eprintln!("warning: {p}: not read again for its usage rows: {why}");
    }
    if r.unread.len() > 20 {
        eprintln!(
            "warning: ... and {} more files not read again",
            r.unread.len() - 20
        );
    }
    if !r.unread.is_empty() {
        eprintln!(
            "warning: {db}: {} the store read before could not be read again: their usage of \
             what it read before its migration to schema 7 is not in its usage table (usage --db \
             says so)",
            files(r.unread.len())
        );
    }
    if r.untimed > 0 {
        eprintln!(
            "warning: {db}: {} Claude Code responses of files not read again have usage rows \
             without a time (their tokens from the store's checkpoint)",
            r.untimed
        );
    }
}

/// Says that the run's checkpoint was saved before redaction existed, and
/// what to do.
fn unredacted_checkpoint(a: &BackfillArgs) {
    match (&a.db, &a.common.state) {
        (Some(db), _) => eprintln!(
            "warning: {}: this store was written before redaction existed: its records hold \
             secrets as written, and this run went on without redacting; run \
             `mem-ingest redact --db {}` once to redact them, then later runs redact too",
            db.display(),
            db.display()
        ),
        (None, Some(state)) => eprintln!(
            "warning: {}: this state was saved before redaction existed: its output holds \
             secrets as written, and this run went on without redacting; to redact, start \
             over: a new output with a new --state (or delete both and run again)",
            state.display()
        ),
        (None, None) => {}
    }
}

/// `redact --db FILE`: the store rewritten ([`SqliteStore::redact_all`]).
/// A store that is not there is not made.
fn redact_store(a: RedactArgs) -> i32 {
    if !a.db.is_file() {
        eprintln!(
            "error: {}: no such store (redact rewrites a store that backfill --db wrote)",
            a.db.display()
        );
        return 1;
    }
    let started = Instant::now();
    let done = SqliteStore::open(a.db.clone()).and_then(|mut s| s.redact_all());
    match done {
        Err(e) => fail(&e),
        Ok(d) => {
            if !a.quiet {
                let n: u64 = d.secrets.values().sum();
                let by_rule: Vec<String> =
                    d.secrets.iter().map(|(r, n)| format!("{r} {n}")).collect();
                eprintln!(
                    "mem-ingest: {}: {} records, {} rewritten, {n} secrets redacted{}{} in {:.2} s",
                    a.db.display(),
                    d.records,
                    d.rewritten,
                    if by_rule.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", by_rule.join(", "))
                    },
                    match d.contexts {
                        0 => String::new(),
                        1 => ", 1 file's checkpoint without its held text".to_owned(),
                        n => format!(", {n} files' checkpoints without their held text"),
                    },
                    started.elapsed().as_secs_f64()
                );
            }
            0
        }
    }
}

fn open_store(a: &BackfillArgs) -> Result<SqliteStore, Error> {
    let mut store = SqliteStore::open(a.db.clone().expect("--db"))?;
    if let Some(n) = a.db_max_pages {
        store.max_page_count(n)?;
    }
    Ok(store)
}

fn search(a: SearchArgs) -> i32 {
    let (db, default) = match sessions::store_path(a.db.clone()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let filters = search_filters(&a);
    let query = Search {
        query: a.query.clone(),
        fts: a.fts,
        project: a.project,
        role: a.role.map(|r| r.as_str().to_owned()),
        since: a.since,
        until: a.until,
        session: a.session,
        format: a.agent.map(|x| x.format().name().to_owned()),
        limit: a.limit as usize,
        rank_all: a.rank_all,
    };
    let hits = match mem_ingest_store::search(&db, &query) {
        Ok(h) => h,
        Err(e) if is_not_found(&e) && e.path() == db => {
            sessions::no_store(&db, default);
            return 1;
        }
        Err(e) => return fail(&e),
    };
    let colour =
        io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut out = io::stdout().lock();
    let mut printed = Ok(());
    for h in &hits {
        if printed.is_err() {
            break;
        }
        printed = if a.json {
            serde_json::to_writer(&mut out, h)
                .map_err(io::Error::from)
                .and_then(|()| out.write_all(b"\n"))
        } else {
            let time = h
                .timestamp
                .map(|t| when::second(t, a.utc))
                .unwrap_or_else(|| "-".repeat(19));
            let mut snippet = safe::printable(&h.snippet.replace('\n', " ")).into_owned();
            if colour {
                snippet = snippet.replace('«', "\x1b[1;31m").replace('»', "\x1b[0m");
            }
            writeln!(
                out,
                "{time}  {}  {}  {}  {}:{}  {}\n    {snippet}",
                safe::printable(&h.agent),
                safe::printable(&sessions::short_path(&h.project)),
                safe::printable(&h.role),
                safe::printable(&sessions::short_path(&h.file)),
                h.line,
                safe::printable(&h.key),
            )
        };
    }
    match printed.and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return 0,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            return 1;
        }
    }
    if hits.is_empty() && !a.json {
        let mut says = format!("no record matches {:?}", a.query);
        if !filters.is_empty() {
            says.push_str(&format!(" with {}", filters.join(" ")));
        }
        if !a.fts {
            if let Ok(close) = mem_ingest_store::close_words(&db, &a.query) {
                let close: Vec<String> = close.iter().map(|(w, t)| format!("{w} -> {t}")).collect();
                if !close.is_empty() {
                    says.push_str(&format!("; close words in the store: {}", close.join(", ")));
                }
            }
        }
        eprintln!("{}", safe::printable(&says));
    }
    0
}

/// The filters of a search, as flags, for the line that says nothing
/// matched.
fn search_filters(a: &SearchArgs) -> Vec<String> {
    let time = |t: i64| mem_ingest::format_iso_millis(t);
    let mut f = Vec::new();
    let mut add = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            f.push(format!("--{flag} {v:?}"));
        }
    };
    add("project", a.project.clone());
    add("role", a.role.map(|r| r.as_str().to_owned()));
    add("since", a.since.map(time));
    add("until", a.until.map(time));
    add("session", a.session.clone());
    add("agent", a.agent.map(|x| x.format().name().to_owned()));
    f
}

/// The error is a file that does not exist.
fn is_not_found(e: &Error) -> bool {
    matches!(e.kind(), ErrorKind::Io(io) if io.kind() == io::ErrorKind::NotFound)
}

fn send<S: mem_ingest::sink::Sink>(
    archive: &Archive,
    follow: bool,
    sink: &mut S,
) -> Result<Summary, Error> {
    if follow {
        archive.follow(sink)
    } else {
        archive.backfill(sink)
    }
}

fn exit_code(t: &Summary) -> i32 {
    if t.interrupted && !t.follow {
        130
    } else {
        i32::from(t.files_failed > 0)
    }
}

fn stats(a: StatsArgs) -> i32 {
    let started = Instant::now();
    let archive = match builder(&a.common, false, false) {
        Ok(b) => b.build(),
        Err(code) => return code,
    };
    if let Err(e) = archive.check_archive() {
        return fail(&e);
    }
    // Every response kept, to price those whose agent records no cost.
    let (t, s) = match archive.priced_stats(mem_ingest::prices::Prices::shipped()) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let mut out = io::stdout().lock();
    // Every file and PATH failed: no table of zeros, the errors say it
    // (the JSON, which lists them, is still written).
    let nothing_read = t.files_failed > 0 && t.files == t.files_failed;
    let printed = if a.json {
        serde_json::to_writer(&mut out, &s)
            .map_err(io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
    } else if nothing_read {
        Ok(())
    } else {
        output::write_table(&mut out, &s)
    };
    match printed.and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return 0,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            return 1;
        }
    }
    summary(a.common.quiet, &t, started, "");
    exit_code(&t)
}

/// The run's errors on stderr, always (a failed file is never silent);
/// then, unless `quiet`, its warnings and the summary line.
fn summary(quiet: bool, t: &Summary, started: Instant, what: &str) {
    let mut err = io::stderr().lock();
    for (p, e) in &t.failures {
        let _ = writeln!(err, "error: {p}: {e}");
    }
    if quiet {
        return;
    }
    let secs = started.elapsed().as_secs_f64();
    let mb = t.read as f64 / 1e6;
    let r = &t.report;
    // A skip an earlier run reported (the checkpoint holds its line) is
    // said once, by that run; the summary counts it.
    let mut shown = 0;
    for s in t.skips.iter().filter(|s| !s.reported).take(20) {
        let _ = writeln!(
            err,
            "warning: {}:{}:{}: skipped: {}",
            s.path, s.line, s.byte, s.reason
        );
        shown += 1;
    }
    let new = r.skipped.saturating_sub(t.reported_skips);
    if new > shown {
        let _ = writeln!(err, "warning: ... and {} more skipped lines", new - shown);
    }
    if t.reread > 0 {
        let _ = writeln!(
            err,
            "warning: {} files shrank or were replaced since the state was saved: read again from the start{}",
            t.reread,
            if t.dedupe { " (copies of entries already emitted are dropped)" } else { "; their records are emitted again" }
        );
    }
    if !t.added_agents.is_empty() {
        let _ = writeln!(
            err,
            "mem-ingest: added {} to the agents the checkpoint reads (--agent): later runs without --agent read them too",
            t.added_agents.join(",")
        );
    }
    let state = if t.stateful {
        format!(
            ", {} unchanged, {} resumed, {} re-read",
            t.unchanged, t.resumed, t.reread
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        err,
        "mem-ingest: {} files ({} failed, {} empty{state}), {} records{what}, {} deduplicated, \
         {} skipped, {} repaired, {:.1} MB read in {:.2} s ({:.0} MB/s)",
        t.files,
        t.files_failed,
        t.files_empty,
        r.records,
        r.deduplicated,
        r.skipped,
        r.repaired,
        mb,
        secs,
        if secs > 0.0 { mb / secs } else { 0.0 },
    );
}

#[cfg(test)]
mod tests {
    /// `--agent` names exactly the library's registered formats, in the
    /// registry's order (a file no format claims is the first's).
    #[test]
    fn agents_are_the_registered_formats() {
        use clap::ValueEnum;
        mem_ingest_db::register();
        let agents: Vec<&str> = super::Agent::value_variants()
            .iter()
            .map(|a| a.format().name())
            .collect();
        let registered: Vec<&str> = mem_ingest::formats::builtin()
            .iter()
            .map(|f| f.name())
            .collect();
        assert_eq!(
            agents,
            [
                "pi", "gemini", "qwen", "copilot", "amp", "cline", "claude", "codex", "opencode",
                "goose", "cursor"
            ]
        );
        assert_eq!(agents, registered);
    }

    #[test]
    fn follow_line_exact() {
        assert_eq!(
            super::follow_line(3, 1_234_567),
            "following 3 files: 1,234,567 records written so far"
        );
        assert_eq!(
            super::follow_line(0, 0),
            "following 0 files: 0 records written so far"
        );
    }
}
