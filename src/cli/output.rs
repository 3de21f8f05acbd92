//! The stats table.
//!
//! Columns are as wide as their widest cell (header included), never
//! narrower than they always were: with short names the table is the one
//! it has always been, with a long model or project name every row's
//! columns still start where the header's do.

use std::io::{self, Write};

use mem_ingest::archive::Stats;

/// One table: a title over its left-aligned name column (rows indented by
/// two spaces), then right-aligned columns, each cell after one space.
struct Table<'a> {
    title: &'a str,
    /// Each right-aligned column: its header and its narrowest width.
    columns: &'a [(&'a str, usize)],
    /// The narrowest width of the name column (without the indent).
    name_width: usize,
    rows: Vec<(String, Vec<String>)>,
}

impl Table<'_> {
    fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let name = self
            .rows
            .iter()
            .map(|(n, _)| n.chars().count())
            .chain([
                self.name_width,
                self.title.chars().count().saturating_sub(2),
            ])
            .max()
            .unwrap_or(0);
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (header, min))| {
                self.rows
                    .iter()
                    .map(|(_, cells)| cells[i].chars().count())
                    .chain([*min, header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        if !self.title.is_empty() {
            write!(out, "{:<w$}", self.title, w = name + 2)?;
            for ((header, _), w) in self.columns.iter().zip(&widths) {
                write!(out, " {header:>w$}")?;
            }
            writeln!(out)?;
        }
        for (n, cells) in &self.rows {
            write!(out, "  {n:<name$}")?;
            for (cell, w) in cells.iter().zip(&widths) {
                write!(out, " {cell:>w$}")?;
            }
            writeln!(out)?;
        }
        Ok(())
    }
}

/// Label and value lines, the values' right ends in one column (at 23 or
/// further when a value is longer).
fn write_counts(out: &mut impl Write, lines: &[(&str, u64, &str)]) -> io::Result<()> {
    let cells: Vec<String> = lines.iter().map(|(_, v, _)| v.to_string()).collect();
    let end = lines
        .iter()
        .zip(&cells)
        .map(|((label, _, _), v)| label.len() + 1 + v.len())
        .chain([23])
        .max()
        .unwrap_or(23);
    for ((label, _, tail), v) in lines.iter().zip(&cells) {
        writeln!(out, "{label}{v:>w$}{tail}", w = end - label.len())?;
    }
    Ok(())
}

fn cost(c: f64) -> String {
    format!("{c:.4}")
}

pub fn write_table(out: &mut impl Write, s: &Stats) -> io::Result<()> {
    let files_tail = format!("  ({} failed, {} empty)", s.files_failed, s.files_empty);
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
    write_counts(out, &counts)?;

    // Roles and entries share their columns.
    let roles: Vec<(String, Vec<String>)> = s
        .roles
        .iter()
        .map(|(role, n)| (role.as_str().to_owned(), vec![n.to_string()]))
        .collect();
    let entries: Vec<(String, Vec<String>)> = s
        .entries
        .iter()
        .map(|(name, n)| (name.clone(), vec![n.to_string()]))
        .collect();
    let name_width = roles
        .iter()
        .chain(&entries)
        .map(|(n, _)| n.chars().count())
        .chain([22])
        .max()
        .unwrap_or(22);
    let width = roles
        .iter()
        .chain(&entries)
        .map(|(_, c)| c[0].len())
        .chain([12])
        .max()
        .unwrap_or(12);
    for (title, rows) in [("roles", roles), ("entries", entries)] {
        writeln!(out, "\n{title}")?;
        Table {
            title: "",
            columns: &[("", width)],
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
                    format!("{}/{}", m.provider, m.model),
                    vec![
                        m.messages.to_string(),
                        m.usage.input.to_string(),
                        m.usage.output.to_string(),
                        m.usage.cache_read.to_string(),
                        m.usage.cache_write.to_string(),
                        m.usage.total_tokens.to_string(),
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
                    p.project.clone(),
                    vec![
                        p.sessions.to_string(),
                        p.records.to_string(),
                        p.total_tokens.to_string(),
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
                .map(|(name, x)| {
                    (
                        name.clone(),
                        vec![
                            x.files.to_string(),
                            x.lines.to_string(),
                            x.records.to_string(),
                            x.deduplicated.to_string(),
                            x.skipped.to_string(),
                            x.usage.total_tokens.to_string(),
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
