//! The pinned NDJSON record line, and the one JSON string escaper.

use crate::json::ParsedLine;
use crate::record::Record;
#[cfg(test)]
use crate::record::Usage;
#[cfg(test)]
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

/// Appends `s` as a JSON string (see [`crate::json::escape`]).
#[inline]
pub fn json_str(out: &mut Vec<u8>, s: &str) {
    crate::json::escape(out, s);
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
/// values omitted, `kinds` always present. `text_bytes` is the full length
/// of a text that `max_text` cut (see [`cut_text`]). Byte for byte what
/// serde_json writes for the same fields (tested).
///
/// `line` is the line the record was parsed from, when known: a text that
/// the line holds exactly as it is written here is copied from it.
pub fn write_record(
    out: &mut Vec<u8>,
    rec: &Record<'_>,
    file: &str,
    text_bytes: Option<u64>,
    line: Option<ParsedLine<'_>>,
) {
    let text = rec.text;
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
    out.extend_from_slice(b",\"text\":");
    match line {
        Some(l) => l.write_str(text, out),
        None => json_str(out, text),
    }
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
    // Fields of formats other than pi's: absent for pi, whose lines keep
    // their bytes.
    str_field(out, b",\"agent_id\":", rec.agent_id);
    str_field(out, b",\"message_id\":", rec.message_id);
    str_field(out, b",\"request_id\":", rec.request_id);
    if rec.provisional {
        out.extend_from_slice(b",\"provisional\":true");
    }
    if let Some(n) = text_bytes {
        out.extend_from_slice(b",\"text_bytes\":");
        json_u64(out, n);
    }
    out.extend_from_slice(b"}\n");
}

/// The record with its text cut to at most `max` bytes at a UTF-8
/// boundary, and the full length when it was cut.
pub fn cut_text<'a>(rec: &Record<'a>, max: usize) -> Option<(Record<'a>, u64)> {
    if rec.text.len() <= max {
        return None;
    }
    let mut cut_rec = rec.clone();
    cut_rec.text = cut(rec.text, max);
    Some((cut_rec, rec.text.len() as u64))
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
    agent_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    provisional: bool,
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
        agent_id: rec.agent_id,
        message_id: rec.message_id,
        request_id: rec.request_id,
        provisional: rec.provisional,
        text_bytes: (text.len() < rec.text.len()).then_some(rec.text.len()),
    };
    serde_json::to_writer(&mut *out, &o).expect("writing to a Vec cannot fail");
    out.push(b'\n');
}

/// Reads the pi session `input` twice, as the engine's NDJSON writer
/// does (record text built escaped from the lines' raw strings, see
/// [`crate::line::Text`]) and with every text decoded, and writes each
/// record as a JSON line: `Ok` with the number of records when both give
/// the same bytes, `Err` with the first line that differs otherwise (or
/// the error that stopped either read). For the tests and the `line` fuzz
/// target.
#[doc(hidden)]
pub fn raw_text_agrees(input: &[u8]) -> Result<usize, String> {
    use crate::formats::pi::PiSessionSource;
    use crate::source::{RecordSource, SourceOptions};
    let write = |raw_text: bool| -> Result<(Vec<u8>, usize), String> {
        let opts = SourceOptions::default().raw_text(raw_text);
        let mut src = PiSessionSource::from_reader_with(input, "fuzz.jsonl", &opts)
            .map_err(|e| e.to_string())?;
        let (mut out, mut n) = (Vec::new(), 0);
        while let Some((entry, line)) = src.next_entry_parsed().map_err(|e| e.to_string())? {
            if let Some(rec) = &entry.record {
                write_record(&mut out, rec, "fuzz.jsonl", None, line);
                out.push(b'\n');
                n += 1;
            }
        }
        Ok((out, n))
    };
    let (raw, n) = write(true)?;
    let (decoded, _) = write(false)?;
    if raw == decoded {
        return Ok(n);
    }
    let differs = raw
        .split(|&b| b == b'\n')
        .zip(decoded.split(|&b| b == b'\n'))
        .find(|(a, b)| a != b)
        .map(|(a, b)| {
            format!(
                "built escaped {}, decoded {}",
                String::from_utf8_lossy(a),
                String::from_utf8_lossy(b)
            )
        });
    Err(differs.unwrap_or_else(|| "one output is longer".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PiSessionSource, RecordSource};

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
                    let cut = max.and_then(|m| cut_text(&rec, m));
                    let (r, full) = match &cut {
                        Some((r, full)) => (r, Some(*full)),
                        None => (&rec, None),
                    };
                    write_record(&mut a, r, "dir/\"odd\"\tname.jsonl", full, None);
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
