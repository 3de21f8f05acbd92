//! `sessions`: the sessions of a store, newest first; and the store the
//! reading commands use when `--db` names none.

use std::io::{self, Write};
use std::path::PathBuf;

use clap::Args;
use mem_ingest_store::{SessionQuery, SessionRow};

use super::{fail, is_not_found, safe, when, Agent};

/// The store of `--db`, else `$MEM_INGEST_DB`, else
/// `$XDG_DATA_HOME/mem-ingest/memory.db`, else
/// `~/.local/share/mem-ingest/memory.db`; and whether it was the default.
pub(super) fn store_path(db: Option<PathBuf>) -> Result<(PathBuf, bool), String> {
    if let Some(db) = db {
        return Ok((db, false));
    }
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(db) = var("MEM_INGEST_DB") {
        return Ok((PathBuf::from(db), true));
    }
    let data = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .ok_or("no store: give --db FILE (neither $MEM_INGEST_DB nor $HOME is set)")?;
    Ok((data.join("mem-ingest/memory.db"), true))
}

/// The error for a store that is not there: how to make one, and, when it
/// was the default, how to name another.
pub(super) fn no_store(db: &std::path::Path, default: bool) {
    let db = db.display();
    let other = if default {
        "the default store, which --db FILE or $MEM_INGEST_DB changes; "
    } else {
        ""
    };
    eprintln!("error: {db}: no such store ({other}`mem-ingest backfill --db {db}` creates one)");
}

#[derive(Args, Debug)]
pub(super) struct SessionsArgs {
    /// The store (written by backfill --db). Default: $MEM_INGEST_DB, else
    /// $XDG_DATA_HOME/mem-ingest/memory.db (~/.local/share/...).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Only sessions whose project (its cwd) holds this, ASCII case
    /// folded.
    #[arg(long, value_name = "TEXT")]
    project: Option<String>,
    /// Only sessions whose id starts with this.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only sessions of this agent.
    #[arg(long, value_enum, value_name = "AGENT")]
    agent: Option<Agent>,
    /// Only sessions with a record at or after TIME: RFC 3339, a date,
    /// 7d, 24h, 2w, today, yesterday, "last week".
    #[arg(long, value_parser = when::parse_when, value_name = "TIME")]
    since: Option<i64>,
    /// Only sessions that started before TIME (as --since).
    #[arg(long, value_parser = when::parse_when, value_name = "TIME")]
    until: Option<i64>,
    /// At most N sessions.
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    limit: u32,
    /// One JSON object per session (id, agent, project, started, ended,
    /// records, first_prompt; times RFC 3339) instead of text.
    #[arg(long)]
    json: bool,
    /// Times in UTC, not the local zone.
    #[arg(long)]
    utc: bool,
}

/// The first prompt as a line of the listing: its first line, at most 72
/// characters (`…` where cut), made printable.
fn prompt_line(text: Option<&str>) -> String {
    let Some(text) = text else {
        return "(no prompt)".to_owned();
    };
    let first = text.trim_start().lines().next().unwrap_or("").trim_end();
    let mut cut: String = first.chars().take(72).collect();
    if cut.len() < first.len() || text.trim().lines().nth(1).is_some() {
        cut.push('…');
    }
    safe::printable(&cut).into_owned()
}

/// A path (a project, a file) as the listings print it: `~` for the home
/// folder; `(unknown)` for none.
pub(super) fn short_path(path: &str) -> String {
    if path.is_empty() {
        return "(unknown)".to_owned();
    }
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/" => match path.strip_prefix(&home) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
            _ => path.to_owned(),
        },
        _ => path.to_owned(),
    }
}

fn json_row(s: &SessionRow, utc: bool) -> String {
    // Keys in this order (serde_json's map would sort them).
    let v = |x: serde_json::Value| x.to_string();
    let time = |t: Option<i64>| v(t.map(|t| when::rfc3339(t, utc)).into());
    format!(
        "{{\"id\":{},\"agent\":{},\"project\":{},\"started\":{},\"ended\":{},\"records\":{},\"first_prompt\":{}}}",
        v(s.id.as_str().into()),
        v(s.agent.as_str().into()),
        v(s.project.as_str().into()),
        time(s.started),
        time(s.ended),
        s.records,
        v(s.first_prompt.as_deref().into()),
    )
}

pub(super) fn sessions(a: SessionsArgs) -> i32 {
    let (db, default) = match store_path(a.db) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let q = SessionQuery {
        project: a.project,
        session: a.session,
        format: a.agent.map(|x| x.format().name().to_owned()),
        since: a.since,
        until: a.until,
        limit: a.limit as usize,
    };
    let rows = match mem_ingest_store::sessions(&db, &q) {
        Ok(r) => r,
        Err(e) if is_not_found(&e) && e.path() == db => {
            no_store(&db, default);
            return 1;
        }
        Err(e) => return fail(&e),
    };
    let mut out = io::stdout().lock();
    let printed = rows.iter().try_for_each(|s| {
        if a.json {
            writeln!(out, "{}", json_row(s, a.utc))
        } else {
            let started = s
                .started
                .map_or_else(|| "-".repeat(16), |t| when::minute(t, a.utc));
            writeln!(
                out,
                "{started}  {:<6}  {}  {} records  {}\n    {}",
                s.agent,
                safe::printable(&short_path(&s.project)),
                super::output::count(s.records.max(0) as u64),
                safe::printable(&s.id),
                prompt_line(s.first_prompt.as_deref())
            )
        }
    });
    match printed.and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return 0,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            return 1;
        }
    }
    if rows.is_empty() && !a.json {
        eprintln!("no session matches");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_one_cut_line() {
        assert_eq!(prompt_line(None), "(no prompt)");
        assert_eq!(prompt_line(Some("  fix the test\n")), "fix the test");
        assert_eq!(prompt_line(Some("fix it\nthen run")), "fix it…");
        let long = "x".repeat(80);
        assert_eq!(prompt_line(Some(&long)), format!("{}…", "x".repeat(72)));
        assert_eq!(prompt_line(Some("a\u{1b}[31mb")), "a\\u{1b}[31mb");
    }
}
