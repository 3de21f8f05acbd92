//! A child rollout's copies of its parent that are not byte for byte
//! (issue 41): what [`super::Codex`]'s `Format::parent_copies` answers.
//!
//! A fork or a subagent usually replays its parent's lines as they are,
//! timestamps included, and the lineage's fingerprints find them. But a
//! subagent (`thread_spawn`) may replay its parent's history with every
//! timestamp rewritten into the spawn's second: its line 1 is its own
//! `session_meta`, line 2 its parent's, then the parent's lines up to the
//! spawn, all within a second. Two rules, after ccusage 20.0.24's
//! (`shared/spec/codex-format.md` §7), decide what of a file with a parent
//! is the parent's:
//!
//! 1. **The parent's lines.** When line 2 is the parent's `session_meta`
//!    and its timestamp is no older than a second before the child's own
//!    `session_meta`'s (a verbatim replay's is the parent's start, older),
//!    the *burst* of lines from line 2, each at most a second from the one
//!    before, is looked up in the parent's rollout by content less the
//!    timestamp (and less an `ordinal`): a line found is a copy of that
//!    parent line, under the fingerprint it has there. Only the parent's
//!    lines up to a second after the burst are read. A line not found (the
//!    child's own, or the parent absent) is the child's.
//! 2. **The leading-counts rule**, when no `token_count` of the file was
//!    found so (ccusage's fallback when the parent does not match; it
//!    applies to every file with a parent, a verbatim fork too): if the
//!    file's first two `token_count` events that carry usage (an `info`
//!    with a total or a last usage) are at most a second apart, the leading
//!    run of such events, each at most a second after the one before, is
//!    the parent's: not counted (their totals remain the baseline of the
//!    next count). They make no record. (The spec's step 5 says "the same
//!    second"; the 20.0.24 binary compares milliseconds, as here.)
//!
//! So with the parent's rollout in the archive the replay is emitted and
//! counted once, as the parent's; without it, the replay's records are the
//! child's (their text is nowhere else) and its usage is not counted, as
//! ccusage does. Only files with a parent are read here, once more, up to
//! the end of the burst and of the leading counts; their parent up to the
//! burst's end, only when rule 1 applies.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use simd_json::Node;

use super::{envelope, line_fingerprint};
use crate::format::ParentCopies;
use crate::json::{fingerprint, write_json, Fields, LineHash};
use crate::pi::Header;
use crate::source::bom_len;
use crate::time::parse_iso_millis;

/// The most milliseconds between two lines of a burst (rule 1), or two
/// leading counts (rule 2).
const BURST_MS: i64 = 1000;

/// The lines of a child's file that are its parent's (see the module).
pub(crate) fn parent_copies(
    child: &Path,
    header: &Header,
    parent: Option<&Path>,
    hash: LineHash,
) -> ParentCopies {
    let Some(parent_id) = header.parent_session.as_deref() else {
        return ParentCopies::default();
    };
    let Some(lines) = Lines::open(child) else {
        return ParentCopies::default();
    };
    let scan = scan_child(lines, parent_id, hash);
    let mut out = ParentCopies::default();
    let mut counts_found = false;
    if let (Some(last), Some(parent)) = (scan.burst_last, parent) {
        let keys = parent_keys(parent, last + BURST_MS, hash);
        for w in &scan.burst {
            if let Some(&fp) = keys.get(&w.key) {
                out.replayed.push((w.line, fp));
                counts_found |= w.token_count;
            }
        }
    }
    if !counts_found {
        out.left_to_parent = scan.leading_counts;
    }
    out
}

/// A line of the burst.
struct BurstLine {
    line: u64,
    key: u64,
    token_count: bool,
}

/// What one pass over a child's lines finds.
#[derive(Default)]
struct ChildScan {
    /// Rule 1's burst, and the time of its last line (Unix ms).
    burst: Vec<BurstLine>,
    burst_last: Option<i64>,
    /// The lines of rule 2's leading counts.
    leading_counts: Vec<u64>,
}

/// Rule 2's progress.
enum Leading {
    /// The first count with usage, when seen: its line and time.
    Looking(Option<(u64, i64)>),
    /// The run so far, and the time of its last count.
    Within(Vec<u64>, i64),
    Done(Vec<u64>),
}

/// Whether `ms` follows `prev` within [`BURST_MS`].
fn follows(prev: i64, ms: i64) -> bool {
    (0..=BURST_MS).contains(&(ms - prev))
}

fn scan_child(mut lines: Lines, parent_id: &str, hash: LineHash) -> ChildScan {
    let mut scan = ChildScan::default();
    let mut leading = Leading::Looking(None);
    let mut child_start = None;
    // Rule 1's burst: open while its lines come.
    let mut burst_open = false;
    let mut n = 0u64;
    while let Some(raw) = lines.next() {
        n += 1;
        let raw = if n == 1 { &raw[bom_len(raw)..] } else { raw };
        let count = is_token_count(raw);
        // The timestamp, only where it is needed.
        let stamp = (n <= 2 || burst_open || count.is_some())
            .then(|| Stamp::of(raw))
            .flatten();
        let ms = stamp.as_ref().and_then(|s| s.ms);
        if n == 1 {
            child_start = ms;
        } else if n == 2 {
            if let (Some(start), Some(ms)) = (child_start, ms) {
                burst_open = ms >= start - BURST_MS && is_meta_of(raw, parent_id);
            }
        }
        if burst_open {
            match (ms, scan.burst_last) {
                (Some(ms), last) if last.is_none_or(|l| (ms - l).abs() <= BURST_MS) => {
                    scan.burst.push(BurstLine {
                        line: n,
                        key: content_key(raw, stamp.as_ref(), hash),
                        token_count: count.is_some(),
                    });
                    scan.burst_last = Some(ms);
                }
                // A line without a timestamp: not the parent's.
                (None, _) => {}
                _ => burst_open = false,
            }
        }
        if let (Some(true), Some(ms)) = (count, ms) {
            leading = leading.next(n, ms);
        }
        if !burst_open && n >= 2 && matches!(leading, Leading::Done(_)) {
            break;
        }
    }
    scan.leading_counts = match leading {
        Leading::Within(v, _) | Leading::Done(v) => v,
        Leading::Looking(_) => Vec::new(),
    };
    scan
}

impl Leading {
    /// After a count with usage at `line`, at `ms`.
    fn next(self, line: u64, ms: i64) -> Leading {
        match self {
            Leading::Looking(None) => Leading::Looking(Some((line, ms))),
            Leading::Looking(Some((first, at))) if follows(at, ms) => {
                Leading::Within(vec![first, line], ms)
            }
            Leading::Looking(Some(_)) => Leading::Done(Vec::new()),
            Leading::Within(mut lines, at) if follows(at, ms) => {
                lines.push(line);
                Leading::Within(lines, ms)
            }
            Leading::Within(lines, _) => Leading::Done(lines),
            done @ Leading::Done(_) => done,
        }
    }
}

/// The content keys of the parent's lines before `end` (Unix ms), with
/// each line's fingerprint as its source computes it (the first of lines
/// with one key).
fn parent_keys(parent: &Path, end: i64, hash: LineHash) -> HashMap<u64, u64> {
    let mut keys = HashMap::new();
    let Some(mut lines) = Lines::open(parent) else {
        return keys;
    };
    let mut n = 0u64;
    while let Some(raw) = lines.next() {
        n += 1;
        let raw = if n == 1 { &raw[bom_len(raw)..] } else { raw };
        let Some(stamp) = Stamp::of(raw) else {
            continue;
        };
        match stamp.ms {
            Some(ms) if ms > end => break,
            Some(_) => {}
            None => continue,
        }
        let key = content_key(raw, Some(&stamp), hash);
        keys.entry(key)
            .or_insert_with(|| parent_fingerprint(raw, n, &stamp, hash));
    }
    keys
}

/// A line's envelope timestamp.
struct Stamp {
    ms: Option<i64>,
    /// Where the line goes on after the timestamp's value, when it starts
    /// with it (`{"timestamp":"..."`, as Codex writes every line) and has
    /// no `ordinal`: its content key and fingerprint are then of bytes.
    rest: Option<usize>,
}

const LEAD: &[u8] = br#"{"timestamp":""#;

impl Stamp {
    fn of(raw: &[u8]) -> Option<Stamp> {
        let from_str = |ts: &str, rest| Stamp {
            ms: parse_iso_millis(ts),
            rest,
        };
        if let Some(after) = raw.strip_prefix(LEAD) {
            if let Some(q) = memchr::memchr2(b'"', b'\\', after) {
                if after[q] == b'"' && memchr::memmem::find(raw, br#""ordinal":"#).is_none() {
                    let ts = std::str::from_utf8(&after[..q]).ok()?;
                    return Some(from_str(ts, Some(LEAD.len() + q)));
                }
            }
        }
        crate::json::with_scratch(|json, arena| {
            json.parse(raw, arena, |parsed| {
                let (nodes, _) = parsed.ok()?;
                let ts = envelope(nodes)?.timestamp?;
                Some(from_str(ts, None))
            })
        })
    }
}

/// A line's content less its timestamp (and `ordinal`): a hash of the
/// rest of its bytes, or of its fields as parsed (keys of one run, never
/// saved).
fn content_key(raw: &[u8], stamp: Option<&Stamp>, hash: LineHash) -> u64 {
    if let Some(rest) = stamp.and_then(|s| s.rest) {
        return hash.of(&raw[rest..]);
    }
    crate::json::with_scratch(|json, arena| {
        json.parse(raw, arena, |parsed| {
            let Ok((nodes, _)) = parsed else {
                return fingerprint(&[b"codex-replay-unparsed", raw]);
            };
            let mut s = bumpalo::collections::String::new_in(arena);
            for (k, v) in Fields::of(nodes).iter() {
                if k != "timestamp" && k != "ordinal" {
                    s.push_str(k);
                    s.push('\0');
                    write_json(v, &mut s);
                    s.push('\0');
                }
            }
            fingerprint(&[b"codex-replay-fields", s.as_bytes()])
        })
    })
}

/// The fingerprint a Codex source gives the entry of the parent's line
/// `raw` (line `n`), as `line_fingerprint`.
fn parent_fingerprint(raw: &[u8], n: u64, stamp: &Stamp, hash: LineHash) -> u64 {
    if stamp.rest.is_some() {
        return hash.of(raw);
    }
    crate::json::with_scratch(|json, arena| {
        json.parse(raw, arena, |parsed| match parsed {
            Ok((nodes, _)) => match envelope(nodes) {
                Some(e) => line_fingerprint(&e, nodes, raw, n, arena, hash),
                None => hash.of(raw),
            },
            Err(_) => hash.of(raw),
        })
    })
}

/// Whether a line is a `session_meta` of the session `id`.
fn is_meta_of(raw: &[u8], id: &str) -> bool {
    if memchr::memmem::find(raw, b"session_meta").is_none() {
        return false;
    }
    crate::json::with_scratch(|json, arena| {
        json.parse(raw, arena, |parsed| {
            let Ok((nodes, _)) = parsed else { return false };
            envelope(nodes)
                .is_some_and(|e| e.ty == "session_meta" && e.payload.str("id") == Some(id))
        })
    })
}

/// Whether a line is a `token_count` event: `Some(true)` when it carries
/// usage (`info` with a `total_token_usage` or a `last_token_usage`).
fn is_token_count(raw: &[u8]) -> Option<bool> {
    memchr::memmem::find(raw, b"token_count")?;
    crate::json::with_scratch(|json, arena| {
        json.parse(raw, arena, |parsed| {
            let (nodes, _) = parsed.ok()?;
            let e = envelope(nodes)?;
            if e.ty != "event_msg" || e.item != Some("token_count") {
                return None;
            }
            let info = Fields::of(e.payload.get("info").unwrap_or(&[]));
            let usage = |k| {
                info.get(k)
                    .is_some_and(|v| matches!(v.first(), Some(Node::Object { .. })))
            };
            Some(usage("total_token_usage") || usage("last_token_usage"))
        })
    })
}

/// A file's lines, without their `\n` (a compressed rollout decompressed).
struct Lines {
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
}

impl Lines {
    fn open(path: &Path) -> Option<Lines> {
        let file = std::fs::File::open(path).ok()?;
        let reader: Box<dyn BufRead> = if super::compressed(path) {
            #[cfg(feature = "zstd")]
            {
                let mut d = zstd::stream::read::Decoder::new(file).ok()?;
                d.window_log_max(super::zst::WINDOW_LOG_MAX).ok()?;
                Box::new(BufReader::new(d))
            }
            #[cfg(not(feature = "zstd"))]
            return None;
        } else {
            Box::new(BufReader::with_capacity(64 << 10, file))
        };
        Some(Lines {
            reader,
            buf: Vec::new(),
        })
    }

    fn next(&mut self) -> Option<&[u8]> {
        self.buf.clear();
        match self.reader.read_until(b'\n', &mut self.buf) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if self.buf.last() == Some(&b'\n') {
                    self.buf.pop();
                }
                Some(&self.buf)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The leading run's lines for counts with usage at these times (ms
    /// after some second): each case checked against ccusage 20.0.24
    /// (which counted the counts not listed).
    #[test]
    fn leading_counts_are_a_run_each_at_most_a_second_apart() {
        let run = |times: &[i64]| {
            let mut l = Leading::Looking(None);
            for (i, &ms) in times.iter().enumerate() {
                l = l.next(i as u64 + 1, ms);
            }
            match l {
                Leading::Within(v, _) | Leading::Done(v) => v,
                Leading::Looking(_) => Vec::new(),
            }
        };
        let far = 3_000_000;
        assert_eq!(run(&[800, 900, far]), [1, 2]);
        assert_eq!(run(&[0, 1000, 30_000, far]), [1, 2]);
        assert_eq!(run(&[0, 1001, 30_000, far]), [] as [u64; 0]);
        // A chain: each within a second of the one before.
        assert_eq!(run(&[800, 1500, 2300, far]), [1, 2, 3]);
        assert_eq!(run(&[0, 900, 1900, far]), [1, 2, 3]);
        assert_eq!(run(&[0, 900, 1901, far]), [1, 2]);
        // The first two apart: none, whatever follows.
        assert_eq!(run(&[800, 40_000, 40_500, far]), [] as [u64; 0]);
        // Backwards: not a run.
        assert_eq!(run(&[1500, 800, far]), [] as [u64; 0]);
        // One count: none.
        assert_eq!(run(&[800]), [] as [u64; 0]);
    }

    /// Codex's lines: the timestamp found by its bytes, the content key
    /// the same under another timestamp, and the fingerprint the source's
    /// (the line's hash); with an `ordinal`, both from the fields.
    #[test]
    fn keys_leave_out_the_timestamp_and_the_ordinal() {
        let h = LineHash::Wide;
        let a = br#"{"timestamp":"2026-01-01T10:00:07.000Z","type":"event_msg","payload":{"type":"agent_message","message":"x"}}"#;
        let b = br#"{"timestamp":"2026-01-01T10:01:00.009Z","type":"event_msg","payload":{"type":"agent_message","message":"x"}}"#;
        let c = br#"{"timestamp":"2026-01-01T10:01:00.009Z","type":"event_msg","payload":{"type":"agent_message","message":"y"}}"#;
        let key = |raw: &[u8]| content_key(raw, Stamp::of(raw).as_ref(), h);
        let sa = Stamp::of(a).unwrap();
        assert_eq!(sa.ms, parse_iso_millis("2026-01-01T10:00:07.000Z"));
        assert!(sa.rest.is_some());
        assert_eq!(key(a), key(b));
        assert_ne!(key(b), key(c));
        assert_eq!(parent_fingerprint(a, 3, &sa, h), h.of(a));
        let o1 = br#"{"timestamp":"2026-01-01T10:00:07.000Z","ordinal":4,"type":"event_msg","payload":{"type":"agent_message","message":"x"}}"#;
        let o2 = br#"{"timestamp":"2026-01-01T10:01:00.001Z","ordinal":9,"type":"event_msg","payload":{"type":"agent_message","message":"x"}}"#;
        let so = Stamp::of(o1).unwrap();
        assert!(so.rest.is_none());
        assert_eq!(so.ms, sa.ms);
        assert_eq!(key(o1), key(o2));
        assert_ne!(key(o1), key(a));
        // As the source fingerprints a line with an ordinal.
        let fp = crate::json::with_scratch(|json, arena| {
            json.parse(o1, arena, |p| {
                let (nodes, _) = p.unwrap();
                line_fingerprint(&envelope(nodes).unwrap(), nodes, o1, 3, arena, h)
            })
        });
        assert_eq!(parent_fingerprint(o1, 3, &so, h), fp);
    }
}
