//! The human tables, and how every one of them writes a value.
//!
//! Columns are as wide as their widest cell (header included), in display
//! columns (a double-width character takes two), never narrower than they
//! always were: with short names the table is the one it has always been,
//! with a long model or project name every row's columns still start where
//! the header's do. Every value goes through [`Cell`]: counts with
//! thousands separators, what is not known as `-`, never a false zero.

use std::fmt;
use std::io::{self, Write};

use mem_ingest::archive::Stats;
use unicode_width::UnicodeWidthStr;

/// One value of a human table (or of a line like one), as every table
/// writes it.
pub enum Cell<'a> {
    /// A count: `1,234,567`.
    Count(u64),
    /// A cost in dollars to four places: `13.5625`; `-` when unknown.
    Cost(Option<f64>),
    /// A name (a project, a model): `(unknown)` when empty, its control
    /// characters escaped (`super::safe::printable`).
    Name(&'a str),
}

impl fmt::Display for Cell<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Count(n) => {
                let digits = n.to_string();
                for (i, d) in digits.chars().enumerate() {
                    if i > 0 && (digits.len() - i) % 3 == 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{d}")?;
                }
                Ok(())
            }
            Cell::Cost(Some(c)) => write!(f, "{c:.4}"),
            Cell::Cost(None) => f.write_str("-"),
            Cell::Name("") => f.write_str("(unknown)"),
            Cell::Name(n) => f.write_str(&super::safe::printable(n)),
        }
    }
}

/// A count as every table writes it.
pub fn count(n: u64) -> String {
    Cell::Count(n).to_string()
}

/// The columns `s` takes on a terminal.
fn width(s: &str) -> usize {
    s.width()
}

/// `s` then spaces up to `w` display columns.
fn left(out: &mut impl Write, s: &str, w: usize) -> io::Result<()> {
    write!(out, "{s}{:pad$}", "", pad = w.saturating_sub(width(s)))
}

/// Spaces up to `w` display columns, then `s`.
fn right(out: &mut impl Write, s: &str, w: usize) -> io::Result<()> {
    write!(out, "{:pad$}{s}", "", pad = w.saturating_sub(width(s)))
}

/// One table: a title over its left-aligned name column (rows indented by
/// two spaces), then right-aligned columns, each cell after one space.
pub(crate) struct Table<'a> {
    pub(crate) title: &'a str,
    /// Each right-aligned column: its header and its narrowest width.
    pub(crate) columns: &'a [(&'a str, usize)],
    /// The narrowest width of the name column (without the indent).
    pub(crate) name_width: usize,
    pub(crate) rows: Vec<(String, Vec<String>)>,
}

impl Table<'_> {
    pub(crate) fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let name = self
            .rows
            .iter()
            .map(|(n, _)| width(n))
            .chain([self.name_width, width(self.title).saturating_sub(2)])
            .max()
            .unwrap_or(0);
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (header, min))| {
                self.rows
                    .iter()
                    .map(|(_, cells)| width(&cells[i]))
                    .chain([*min, width(header)])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        if !self.title.is_empty() {
            left(out, self.title, name + 2)?;
            for ((header, _), w) in self.columns.iter().zip(&widths) {
                write!(out, " ")?;
                right(out, header, *w)?;
            }
            writeln!(out)?;
        }
        for (n, cells) in &self.rows {
            write!(out, "  ")?;
            left(out, n, name)?;
            for (cell, w) in cells.iter().zip(&widths) {
                write!(out, " ")?;
                right(out, cell, *w)?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// Label and value lines, the values' right ends in one column (at 23 or
/// further when a value is longer).
fn write_counts(out: &mut impl Write, lines: &[(&str, u64, &str)]) -> io::Result<()> {
    let cells: Vec<String> = lines.iter().map(|(_, v, _)| count(*v)).collect();
    let end = lines
        .iter()
        .zip(&cells)
        .map(|((label, _, _), v)| width(label) + 1 + width(v))
        .chain([23])
        .max()
        .unwrap_or(23);
    for ((label, _, tail), v) in lines.iter().zip(&cells) {
        write!(out, "{label}")?;
        right(out, v, end - width(label))?;
        writeln!(out, "{tail}")?;
    }
    Ok(())
}

fn cost(c: Option<f64>) -> String {
    Cell::Cost(c).to_string()
}

fn name(n: &str) -> String {
    Cell::Name(n).to_string()
}

pub fn write_table(out: &mut impl Write, s: &Stats) -> io::Result<()> {
    let files_tail = format!(
        "  ({} failed, {} empty)",
        count(s.files_failed),
        count(s.files_empty)
    );
    let mut counts = vec![
        ("files", s.files, files_tail.as_str()),
        ("bytes", s.bytes, ""),
        ("lines", s.lines, ""),
        ("records", s.records, ""),
        ("skipped", s.skipped, ""),
        ("repaired", s.repaired, ""),
        ("deduplicated", s.deduplicated, ""),
    ];
    if s.pending > 0 {
        counts.push(("pending", s.pending, "  bytes of partial last lines"));
    }
    if s.partial_usage > 0 {
        counts.push((
            "partial usage",
            s.partial_usage,
            "  files (no session.shutdown yet: output only)",
        ));
    }
    write_counts(out, &counts)?;

    // Roles and entries share their columns.
    let roles: Vec<(String, Vec<String>)> = s
        .roles
        .iter()
        .map(|(role, n)| (role.as_str().to_owned(), vec![count(n)]))
        .collect();
    let entries: Vec<(String, Vec<String>)> = s
        .entries
        .iter()
        .map(|(n, c)| (name(n), vec![count(*c)]))
        .collect();
    let name_width = roles
        .iter()
        .chain(&entries)
        .map(|(n, _)| width(n))
        .chain([22])
        .max()
        .unwrap_or(22);
    let cell_width = roles
        .iter()
        .chain(&entries)
        .map(|(_, c)| width(&c[0]))
        .chain([12])
        .max()
        .unwrap_or(12);
    for (title, rows) in [("roles", roles), ("entries", entries)] {
        writeln!(out, "\n{title}")?;
        Table {
            title: "",
            columns: &[("", cell_width)],
            name_width,
            rows,
        }
        .write(out)?;
    }

    writeln!(out)?;
    Table {
        title: "usage by model",
        columns: &[
            ("messages", 8),
            ("input", 12),
            ("output", 12),
            ("cache_read", 12),
            ("cache_write", 12),
            ("total", 12),
            ("cost", 10),
        ],
        name_width: 22,
        rows: s
            .by_model
            .iter()
            .map(|m| {
                (
                    format!("{}/{}", name(&m.provider), name(&m.model)),
                    vec![
                        count(m.messages),
                        count(m.usage.input),
                        count(m.usage.output),
                        count(m.usage.cache_read),
                        count(m.usage.cache_write),
                        count(m.usage.total_tokens),
                        cost(m.usage.cost),
                    ],
                )
            })
            .collect(),
    }
    .write(out)?;

    writeln!(out)?;
    Table {
        title: "by project",
        columns: &[
            ("sessions", 8),
            ("records", 12),
            ("total_tokens", 13),
            ("cost", 10),
        ],
        name_width: 22,
        rows: s
            .by_project
            .iter()
            .map(|p| {
                (
                    name(&p.project),
                    vec![
                        count(p.sessions),
                        count(p.records),
                        count(p.total_tokens),
                        cost(p.cost),
                    ],
                )
            })
            .collect(),
    }
    .write(out)?;

    if let Some(by_source) = &s.by_source {
        writeln!(out)?;
        Table {
            title: "by agent",
            columns: &[
                ("files", 8),
                ("lines", 12),
                ("records", 12),
                ("deduplicated", 12),
                ("skipped", 12),
                ("total_tokens", 13),
                ("cost", 10),
            ],
            name_width: 22,
            rows: by_source
                .iter()
                .map(|(n, x)| {
                    (
                        name(n),
                        vec![
                            count(x.files),
                            count(x.lines),
                            count(x.records),
                            count(x.deduplicated),
                            count(x.skipped),
                            count(x.usage.total_tokens),
                            cost(x.usage.cost),
                        ],
                    )
                })
                .collect(),
        }
        .write(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_exact() {
        let shown = |c: Cell<'_>| c.to_string();
        assert_eq!(shown(Cell::Count(0)), "0");
        assert_eq!(shown(Cell::Count(999)), "999");
        assert_eq!(shown(Cell::Count(1_000)), "1,000");
        assert_eq!(shown(Cell::Count(1_234_567)), "1,234,567");
        assert_eq!(shown(Cell::Count(u64::MAX)), "18,446,744,073,709,551,615");
        assert_eq!(shown(Cell::Cost(Some(13.5625))), "13.5625");
        assert_eq!(shown(Cell::Cost(Some(0.0))), "0.0000");
        assert_eq!(shown(Cell::Cost(None)), "-");
        assert_eq!(shown(Cell::Name("")), "(unknown)");
        assert_eq!(shown(Cell::Name("/tmp/p")), "/tmp/p");
    }

    #[test]
    fn names_are_padded_by_display_width() {
        assert_eq!(width("/home/dev/src/日本語-proj"), 25);
        assert_eq!(width("café"), 4);
        let mut out = Vec::new();
        Table {
            title: "t",
            columns: &[("n", 3)],
            name_width: 4,
            rows: vec![
                ("日本".to_owned(), vec![count(1)]),
                ("ab".to_owned(), vec![count(1_000)]),
            ],
        }
        .write(&mut out)
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "t          n\n  日本     1\n  ab   1,000\n"
        );
    }
}
