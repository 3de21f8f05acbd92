//! The pinned output schemas: one NDJSON line per record, the stats JSON.

use std::collections::BTreeMap;
use std::io::{self, Write};

use mem_ingest::{Record, Role, Usage};
use serde::Serialize;

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

/// Escape of each byte in a JSON string: 0 for none, `u` for `\u00XX`,
/// else the character after the backslash.
const ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = b'u';
        c += 1;
    }
    t[b'\n' as usize] = b'n';
    t[b'\r' as usize] = b'r';
    t[b'\t' as usize] = b't';
    t[0x08] = b'b';
    t[0x0c] = b'f';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t
};

/// Appends `s` as a JSON string, escaped as serde_json (and JavaScript's
/// JSON.stringify) escape: `"`, `\\` and control characters. Eight bytes
/// are checked at a time; most text needs no escape.
fn json_str(out: &mut Vec<u8>, s: &str) {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // High bits of the bytes of `w` below 0x20, quotes or backslashes (the
    // lowest one exact; above it, maybe false positives).
    let special = |w: u64| {
        let q = w ^ (LO * u64::from(b'"'));
        let b = w ^ (LO * u64::from(b'\\'));
        let below = w.wrapping_sub(LO * 0x20) & !w;
        (below | (q.wrapping_sub(LO) & !q) | (b.wrapping_sub(LO) & !b)) & HI
    };
    let b = s.as_bytes();
    out.reserve(b.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let escape = |out: &mut Vec<u8>, k: usize, start: &mut usize| {
        let e = ESCAPE[usize::from(b[k])];
        if e == 0 {
            return;
        }
        out.extend_from_slice(&b[*start..k]);
        if e == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let c = b[k];
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(c >> 4)],
                HEX[usize::from(c & 0xf)],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', e]);
        }
        *start = k + 1;
    };
    let mut i = 0;
    while i + 8 <= b.len() {
        let m = special(u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes")));
        if m == 0 {
            i += 8;
            continue;
        }
        // The lowest flagged byte is exact (higher ones may be false
        // positives of the borrow): escape it and look again after it.
        let k = i + (m.trailing_zeros() / 8) as usize;
        escape(out, k, &mut start);
        i = k + 1;
    }
    for k in i..b.len() {
        escape(out, k, &mut start);
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

fn json_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn json_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    json_u64(out, n.unsigned_abs());
}

/// Appends one record as a JSON line, field names and order pinned; absent
/// values omitted, `kinds` always present. `max_text` cuts longer texts at
/// a UTF-8 boundary; `text_bytes` then keeps the full length. Byte for byte
/// what serde_json writes for the same fields (tested).
pub fn write_record(out: &mut Vec<u8>, rec: &Record<'_>, file: &str, max_text: Option<usize>) {
    let text = max_text.map_or(rec.text, |m| cut(rec.text, m));
    let str_field = |out: &mut Vec<u8>, name: &[u8], v: Option<&str>| {
        if let Some(v) = v {
            out.extend_from_slice(name);
            json_str(out, v);
        }
    };
    out.extend_from_slice(b"{\"key\":");
    json_str(out, rec.key);
    str_field(out, b",\"project\":", Some(rec.project));
    str_field(out, b",\"session\":", Some(rec.session));
    str_field(out, b",\"file\":", Some(file));
    str_field(out, b",\"source\":", Some(rec.source));
    out.extend_from_slice(b",\"line\":");
    json_u64(out, rec.line);
    out.extend_from_slice(b",\"byte\":");
    json_u64(out, rec.byte);
    str_field(out, b",\"id\":", rec.id);
    str_field(out, b",\"parent_id\":", rec.parent_id);
    str_field(out, b",\"entry\":", Some(rec.entry));
    str_field(out, b",\"role\":", Some(rec.role.as_str()));
    out.extend_from_slice(b",\"kinds\":[");
    for (i, k) in rec.kinds.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json_str(out, k);
    }
    out.push(b']');
    if let Some(t) = rec.timestamp {
        out.extend_from_slice(b",\"timestamp\":");
        json_i64(out, t);
    }
    str_field(out, b",\"text\":", Some(text));
    str_field(out, b",\"provider\":", rec.provider);
    str_field(out, b",\"model\":", rec.model);
    if let Some(u) = &rec.usage {
        for (name, v) in [
            (&b",\"usage\":{\"input\":"[..], u.input),
            (b",\"output\":", u.output),
            (b",\"cache_read\":", u.cache_read),
            (b",\"cache_write\":", u.cache_write),
            (b",\"total_tokens\":", u.total_tokens),
        ] {
            out.extend_from_slice(name);
            json_u64(out, v);
        }
        out.extend_from_slice(b",\"cost\":");
        // Floats as serde_json writes them (shortest round trip, NaN null).
        serde_json::to_writer(&mut *out, &u.cost).expect("writing to a Vec cannot fail");
        out.push(b'}');
    }
    str_field(out, b",\"stop_reason\":", rec.stop_reason);
    str_field(out, b",\"tool_name\":", rec.tool_name);
    str_field(out, b",\"tool_call_id\":", rec.tool_call_id);
    if let Some(e) = rec.is_error {
        out.extend_from_slice(if e {
            b",\"is_error\":true"
        } else {
            b",\"is_error\":false"
        });
    }
    str_field(out, b",\"custom_type\":", rec.custom_type);
    str_field(out, b",\"command\":", rec.command);
    if let Some(c) = rec.exit_code {
        out.extend_from_slice(b",\"exit_code\":");
        json_i64(out, c);
    }
    if text.len() < rec.text.len() {
        out.extend_from_slice(b",\"text_bytes\":");
        json_u64(out, rec.text.len() as u64);
    }
    out.extend_from_slice(b"}\n");
}

/// The record line through serde: the reference the hand-written writer
/// is tested against.
#[cfg(test)]
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
    usage: Option<Usage>,
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

/// Appends one record as a JSON line. `max_text` cuts longer texts at a
/// UTF-8 boundary; `text_bytes` then keeps the full length.
#[cfg(test)]
fn write_record_serde(out: &mut Vec<u8>, rec: &Record<'_>, file: &str, max_text: Option<usize>) {
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
        usage: rec.usage,
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
    #[serde(flatten)]
    pub usage: Usage,
}

#[derive(Serialize)]
pub struct ProjectLine {
    pub project: String,
    /// Distinct session ids.
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
    /// pi's usage summed: its field names are the schema's.
    pub usage: Usage,
    pub by_model: Vec<ModelLine>,
    pub by_project: Vec<ProjectLine>,
    pub failures: Vec<FailureLine>,
    pub skips: Vec<SkipLine>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use mem_ingest::{PiSessionSource, RecordSource};

    #[test]
    fn hand_written_lines_equal_serde_json_on_every_fixture_record() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
        let mut n = 0;
        for name in [
            "hand-built.jsonl",
            "pi-1x.jsonl",
            "pi-classic.jsonl",
            "bad/v1-minimal.jsonl",
        ] {
            let mut src = PiSessionSource::open(format!("{dir}/{name}")).unwrap();
            while let Some(rec) = src.next_record().unwrap() {
                for max in [None, Some(0), Some(7), Some(100)] {
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    write_record(&mut a, &rec, "dir/\"odd\"\tname.jsonl", max);
                    write_record_serde(&mut b, &rec, "dir/\"odd\"\tname.jsonl", max);
                    assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
                    n += 1;
                }
            }
        }
        assert_eq!(n, 4 * (22 + 626 + 315 + 4));
    }

    #[test]
    fn escapes_random_strings_like_serde_json() {
        let alphabet = [
            'a', '"', '\\', '\n', '\u{1b}', '\u{1}', 'é', '😀', ' ', '\u{7f}', '\u{1f}', '}',
        ];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for len in 0..200 {
            for _ in 0..20 {
                let s: String = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        alphabet[(x % alphabet.len() as u64) as usize]
                    })
                    .collect();
                let mut a = Vec::new();
                json_str(&mut a, &s);
                assert_eq!(
                    String::from_utf8(a).unwrap(),
                    serde_json::to_string(&s).unwrap()
                );
            }
        }
    }

    #[test]
    fn escapes_like_serde_json() {
        for s in [
            "",
            "plain",
            "\"",
            "\\",
            "a\u{1}b\u{1f}c\u{7f}",
            "é😀\n\r\t\u{8}\u{c}",
            "12345678\"12345678",
            "1234567\\",
        ] {
            let mut a = Vec::new();
            json_str(&mut a, s);
            assert_eq!(
                String::from_utf8(a).unwrap(),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
        }
    }
}
