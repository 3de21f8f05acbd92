//! The stats table.

use std::io::{self, Write};

use mem_ingest::archive::Stats;

pub fn write_table(out: &mut impl Write, s: &Stats) -> io::Result<()> {
    writeln!(
        out,
        "files      {:>12}  ({} failed, {} empty)",
        s.files, s.files_failed, s.files_empty
    )?;
    writeln!(out, "bytes      {:>12}", s.bytes)?;
    writeln!(out, "lines      {:>12}", s.lines)?;
    writeln!(out, "records    {:>12}", s.records)?;
    writeln!(out, "skipped    {:>12}", s.skipped)?;
    writeln!(out, "repaired   {:>12}", s.repaired)?;
    writeln!(out, "deduplicated {:>10}", s.deduplicated)?;
    if s.pending > 0 {
        writeln!(
            out,
            "pending    {:>12}  bytes of partial last lines",
            s.pending
        )?;
    }
    writeln!(out, "\nroles")?;
    for (role, n) in s.roles.iter() {
        writeln!(out, "  {:<22} {n:>12}", role.as_str())?;
    }
    writeln!(out, "\nentries")?;
    for (name, n) in &s.entries {
        writeln!(out, "  {name:<22} {n:>12}")?;
    }
    writeln!(out, "\nusage by model          messages        input       output   cache_read  cache_write        total       cost")?;
    for m in &s.by_model {
        writeln!(
            out,
            "  {:<22} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10.4}",
            format!("{}/{}", m.provider, m.model),
            m.messages,
            m.usage.input,
            m.usage.output,
            m.usage.cache_read,
            m.usage.cache_write,
            m.usage.total_tokens,
            m.usage.cost
        )?;
    }
    writeln!(
        out,
        "\nby project              sessions      records  total_tokens       cost"
    )?;
    for p in &s.by_project {
        writeln!(
            out,
            "  {:<22} {:>8} {:>12} {:>13} {:>10.4}",
            p.project, p.sessions, p.records, p.total_tokens, p.cost
        )?;
    }
    Ok(())
}
