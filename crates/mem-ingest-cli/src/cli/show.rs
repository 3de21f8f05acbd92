//! `show SESSION`: a session of the store as a transcript to read.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use mem_ingest_store::{SessionRow, ShownRecord};

use super::sessions::{no_store, store_path};
use super::{fail, is_not_found, safe, when};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Shape {
    /// Markdown: a heading a message.
    Md,
    /// One JSON object a record (key, role, time, tool, command, exit
    /// code, file, line, text).
    Json,
    /// Plain text for a terminal.
    Text,
}

#[derive(Args, Debug)]
pub(super) struct ShowArgs {
    /// The session: its id, or the start of it when that is one session's.
    session: String,
    /// The store (written by backfill --db). Default: $MEM_INGEST_DB, else
    /// $XDG_DATA_HOME/mem-ingest/memory.db (~/.local/share/...).
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// How to print it. Default: text on a terminal, Markdown otherwise.
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<Shape>,
    /// Tool results and shell executions whole (by default each is folded
    /// to its first line and a count of the rest).
    #[arg(long)]
    full: bool,
    /// Only the records around this one (a key, as search prints it): the
    /// five before it and the five after.
    #[arg(long, value_name = "KEY")]
    around: Option<String>,
    /// Times in UTC, not the local zone.
    #[arg(long)]
    utc: bool,
}

/// Records each side of `--around`'s.
const AROUND: usize = 5;

/// Whether a record is a tool's output, folded unless `--full`.
fn folded(r: &ShownRecord) -> bool {
    matches!(r.role.as_str(), "tool_result" | "bash_execution")
}

/// A record's label: its role, and the tool or command it is of.
fn label(r: &ShownRecord) -> String {
    let mut l = r.role.clone();
    if let Some(t) = &r.tool_name {
        l.push_str(&format!(" ({t})"));
    }
    if let Some(c) = &r.exit_code {
        l.push_str(&format!(" (exit {c})"));
    }
    l
}

/// A folded text: its first line that is not blank, at most 100
/// characters, and how many lines were left out.
fn fold(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(first) = lines.iter().position(|l| !l.trim().is_empty()) else {
        return String::new();
    };
    let line = lines[first].trim();
    let mut out: String = line.chars().take(100).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    let rest = lines.len() - first - 1;
    if rest > 0 {
        out.push_str(&format!(" [+{rest} lines]"));
    }
    out
}

fn header(s: &SessionRow, utc: bool) -> String {
    let span = match (s.started, s.ended) {
        (Some(a), Some(b)) => format!(", {} to {}", when::second(a, utc), when::second(b, utc)),
        _ => String::new(),
    };
    format!(
        "{} · {} · {} · {} records{span}",
        s.id,
        s.agent,
        if s.project.is_empty() {
            "(unknown)"
        } else {
            &s.project
        },
        super::output::count(s.records.max(0) as u64)
    )
}

fn write_text(
    out: &mut impl Write,
    s: &SessionRow,
    rs: &[ShownRecord],
    a: &ShowArgs,
) -> io::Result<()> {
    writeln!(out, "{}", safe::printable(&header(s, a.utc)))?;
    for r in rs {
        let time = r
            .timestamp
            .map(|t| when::second(t, a.utc))
            .unwrap_or_default();
        let text = r
            .command
            .as_ref()
            .filter(|_| r.text.is_empty())
            .unwrap_or(&r.text);
        if folded(r) && !a.full {
            writeln!(
                out,
                "\n{time}  {}: {}",
                label(r),
                safe::printable(&fold(text))
            )?;
        } else if text.is_empty() {
            writeln!(out, "\n{time}  {}: (no text)", label(r))?;
        } else {
            writeln!(out, "\n{time}  {}", label(r))?;
            for l in text.lines() {
                writeln!(out, "    {}", safe::printable(l))?;
            }
        }
    }
    Ok(())
}

fn write_md(
    out: &mut impl Write,
    s: &SessionRow,
    rs: &[ShownRecord],
    a: &ShowArgs,
) -> io::Result<()> {
    writeln!(out, "# {}", header(s, a.utc))?;
    for r in rs {
        let time = r
            .timestamp
            .map(|t| when::second(t, a.utc))
            .unwrap_or_default();
        let text = r
            .command
            .as_ref()
            .filter(|_| r.text.is_empty())
            .unwrap_or(&r.text);
        writeln!(out, "\n## {} · {time}\n", label(r))?;
        if text.is_empty() {
            writeln!(out, "(no text)")?;
        } else if folded(r) && !a.full {
            writeln!(out, "> {}", fold(text))?;
        } else if folded(r) {
            // Tool output as it was: fenced, the fence longer than any
            // run of backticks in it.
            let ticks = text
                .split(|c| c != '`')
                .map(str::len)
                .max()
                .unwrap_or(0)
                .max(2)
                + 1;
            let fence = "`".repeat(ticks);
            writeln!(out, "{fence}\n{text}\n{fence}")?;
        } else {
            writeln!(out, "{text}")?;
        }
    }
    Ok(())
}

fn json_line(r: &ShownRecord, utc: bool) -> String {
    let v = |x: serde_json::Value| x.to_string();
    format!(
        "{{\"key\":{},\"role\":{},\"time\":{},\"tool_name\":{},\"command\":{},\"exit_code\":{},\"file\":{},\"line\":{},\"text\":{}}}",
        v(r.key.as_str().into()),
        v(r.role.as_str().into()),
        v(r.timestamp.map(|t| when::rfc3339(t, utc)).into()),
        v(r.tool_name.as_deref().into()),
        v(r.command.as_deref().into()),
        v(r.exit_code.into()),
        v(r.file.as_str().into()),
        r.line,
        v(r.text.as_str().into()),
    )
}

pub(super) fn show(a: ShowArgs) -> i32 {
    let (db, default) = match store_path(a.db.clone()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let found = mem_ingest_store::find_session(&db, &a.session)
        .and_then(|s| mem_ingest_store::session_records(&db, &s.id).map(|r| (s, r)));
    let (session, mut records) = match found {
        Ok(x) => x,
        Err(e) if is_not_found(&e) && e.path() == db => {
            no_store(&db, default);
            return 1;
        }
        Err(e) => return fail(&e),
    };
    if let Some(key) = &a.around {
        let Some(at) = records.iter().position(|r| &r.key == key) else {
            eprintln!(
                "error: --around: session {} has no record {key:?} (search prints the keys)",
                session.id
            );
            return 2;
        };
        let end = (at + AROUND + 1).min(records.len());
        records = records.drain(at.saturating_sub(AROUND)..end).collect();
    }
    let shape = a.format.unwrap_or(if io::stdout().is_terminal() {
        Shape::Text
    } else {
        Shape::Md
    });
    let mut out = io::BufWriter::new(io::stdout().lock());
    let written = match shape {
        Shape::Text => write_text(&mut out, &session, &records, &a),
        Shape::Md => write_md(&mut out, &session, &records, &a),
        Shape::Json => records
            .iter()
            .try_for_each(|r| writeln!(out, "{}", json_line(r, a.utc))),
    };
    match written.and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("error: writing the output: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fold;

    #[test]
    fn a_fold_is_the_first_line_and_a_count() {
        assert_eq!(fold(""), "");
        assert_eq!(fold("\n\n  ok  \n"), "ok");
        assert_eq!(fold("total 8\na\nb"), "total 8 [+2 lines]");
        let long = "y".repeat(120);
        assert_eq!(fold(&long), format!("{}…", "y".repeat(100)));
    }
}
