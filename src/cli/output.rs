//! The pinned output schemas: one NDJSON line per record, the stats JSON.

use std::collections::BTreeMap;
use std::io::{self, Write};

use mem_ingest::{Record, Role, Usage};
use serde::Serialize;

#[derive(Serialize)]
struct OutUsage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total_tokens: u64,
    cost: f64,
}

impl From<&Usage> for OutUsage {
    fn from(u: &Usage) -> Self {
        OutUsage {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            total_tokens: u.total_tokens,
            cost: u.cost,
        }
    }
}

/// One record line, field names and order pinned. Absent values are
/// omitted; `kinds` is always present.
#[derive(Serialize)]
struct OutRecord<'a> {
    key: &'a str,
    project: &'a str,
    session: &'a str,
    file: &'a str,
    source: &'a str,
    line: u64,
    byte: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<&'a str>,
    entry: &'a str,
    role: &'a str,
    kinds: &'a [&'a str],
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<i64>,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<OutUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    custom_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_bytes: Option<usize>,
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char
/// boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Appends one record as a JSON line. `max_text` cuts longer texts at a
/// UTF-8 boundary; `text_bytes` then keeps the full length.
pub fn write_record(out: &mut Vec<u8>, rec: &Record<'_>, file: &str, max_text: Option<usize>) {
    let text = max_text.map_or(rec.text, |m| cut(rec.text, m));
    let o = OutRecord {
        key: rec.key,
        project: rec.project,
        session: rec.session,
        file,
        source: rec.source,
        line: rec.line,
        byte: rec.byte,
        id: rec.id,
        parent_id: rec.parent_id,
        entry: rec.entry,
        role: rec.role.as_str(),
        kinds: rec.kinds,
        timestamp: rec.timestamp,
        text,
        provider: rec.provider,
        model: rec.model,
        usage: rec.usage.as_ref().map(OutUsage::from),
        stop_reason: rec.stop_reason,
        tool_name: rec.tool_name,
        tool_call_id: rec.tool_call_id,
        is_error: rec.is_error,
        custom_type: rec.custom_type,
        command: rec.command,
        exit_code: rec.exit_code,
        text_bytes: (text.len() < rec.text.len()).then_some(rec.text.len()),
    };
    serde_json::to_writer(&mut *out, &o).expect("writing to a Vec cannot fail");
    out.push(b'\n');
}

#[derive(Serialize, Default)]
pub struct Roles {
    pub user: u64,
    pub assistant: u64,
    pub tool_result: u64,
    pub bash_execution: u64,
    pub custom: u64,
    pub system: u64,
}

impl Roles {
    pub fn from_counts(c: &[u64; 6]) -> Self {
        let r = |role: Role| c[role.index()];
        Roles {
            user: r(Role::User),
            assistant: r(Role::Assistant),
            tool_result: r(Role::ToolResult),
            bash_execution: r(Role::BashExecution),
            custom: r(Role::Custom),
            system: r(Role::System),
        }
    }
}

#[derive(Serialize)]
pub struct ModelLine {
    pub provider: String,
    pub model: String,
    pub messages: u64,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: f64,
}

#[derive(Serialize)]
pub struct ProjectLine {
    pub project: String,
    pub sessions: u64,
    pub records: u64,
    pub total_tokens: u64,
    pub cost: f64,
}

#[derive(Serialize)]
pub struct FailureLine {
    pub path: String,
    pub error: String,
}

#[derive(Serialize)]
pub struct SkipLine {
    pub path: String,
    pub line: u64,
    pub byte: u64,
    pub reason: String,
}

/// The stats JSON, field names and order pinned.
#[derive(Serialize)]
pub struct Stats {
    pub files: u64,
    pub files_failed: u64,
    pub files_empty: u64,
    pub bytes: u64,
    pub lines: u64,
    pub records: u64,
    pub skipped: u64,
    pub repaired: u64,
    /// Entries dropped as copies (forks, a history written twice).
    pub deduplicated: u64,
    /// Bytes of partial last lines waiting for their writer (with --state).
    pub pending: u64,
    pub roles: Roles,
    pub entries: BTreeMap<String, u64>,
    pub usage: OutUsageTotals,
    pub by_model: Vec<ModelLine>,
    pub by_project: Vec<ProjectLine>,
    pub failures: Vec<FailureLine>,
    pub skips: Vec<SkipLine>,
}

#[derive(Serialize)]
pub struct OutUsageTotals(OutUsage);

impl From<&Usage> for OutUsageTotals {
    fn from(u: &Usage) -> Self {
        OutUsageTotals(OutUsage::from(u))
    }
}

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
    let r = &s.roles;
    for (name, n) in [
        ("user", r.user),
        ("assistant", r.assistant),
        ("tool_result", r.tool_result),
        ("bash_execution", r.bash_execution),
        ("custom", r.custom),
        ("system", r.system),
    ] {
        writeln!(out, "  {name:<22} {n:>12}")?;
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
            m.input,
            m.output,
            m.cache_read,
            m.cache_write,
            m.total_tokens,
            m.cost
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
