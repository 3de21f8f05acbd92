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
//! ccusage does.
//!
//! Only files with a parent are read here, once more, by the worker that
//! read them: a verbatim replay whose parent is in the archive up to its
//! line 2 (the lineage's fingerprints find its copies, its leading counts
//! among them), any other up to the end of its burst and of its leading
//! counts; the parent up to the burst's end, only when rule 1 applies.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use simd_json::Node;

use super::{envelope, line_fingerprint};
use crate::format::ParentCopies;
use crate::json::{fingerprint, write_json, Fields, LineHash};
use crate::line::{Header, Parent};
use crate::line_reader::bom_len;
use crate::time::parse_iso_millis;

/// The most milliseconds between two lines of a burst (rule 1), or two
/// leading counts (rule 2).
const BURST_MS: i64 = 1000;

/// The lines of a child's file that are its parent's (see the module).
pub fn parent_copies(
    child: &Path,
    header: &Header,
    parent: Option<&Path>,
    hash: LineHash,
) -> ParentCopies {
    let Some(parent_id) = header.parent.as_ref().and_then(Parent::session) else {
        return ParentCopies::default();
    };
    let Some(lines) = Lines::open(child) else {
        return ParentCopies::default();
    };
    let scan = scan_child(lines, parent_id, parent.is_some(), hash);
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

/// One pass over a child's lines, up to the end of its burst and of its
/// leading counts. A child whose line 2 is an older `session_meta` (a
/// verbatim replay) with its parent in the archive is left at line 2:
/// the lineage's fingerprints find its copies, its leading counts among
/// them.
fn scan_child(mut lines: Lines, parent_id: &str, parent_found: bool, hash: LineHash) -> ChildScan {
    let mut scan = ChildScan::default();
    let mut leading = Leading::Looking(None);
    let mut child_start = None;
    // Rule 1's burst: open while its lines come.
    let mut burst_open = false;
    let mut n = 0u64;
    while let Some(raw) = lines.next() {
        n += 1;
        let raw = if n == 1 { &raw[bom_len(raw)..] } else { raw };
        let mut stamp = None;
        if n <= 2 {
            stamp = Stamp::of(raw);
            let ms = stamp.as_ref().and_then(|s| s.ms);
            if n == 1 {
                child_start = ms;
            } else if is_session_meta(raw, stamp.as_ref()) {
                match (child_start, ms) {
                    (Some(start), Some(ms)) if ms >= start - BURST_MS => {
                        burst_open = is_meta_of(raw, parent_id);
                    }
                    _ if parent_found => return scan,
                    _ => {}
                }
            }
        }
        let count = is_token_count(raw);
        // The timestamp, only where it is needed.
        if n > 2 && (burst_open || count.is_some()) {
            stamp = Stamp::of(raw);
        }
        let ms = stamp.as_ref().and_then(|s| s.ms);
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
    /// Where the line goes on after the timestamp's value (its closing
    /// quote), when it starts with it (`{"timestamp":"..."`, as Codex
    /// writes every line).
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
                if after[q] == b'"' {
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

    /// [`Stamp::rest`] when the line has no `ordinal` (a key of a JSON
    /// object: in a string, its quotes would be escaped): its content key
    /// and fingerprint are then of its bytes.
    fn bytes_rest(&self, raw: &[u8]) -> Option<usize> {
        self.rest
            .filter(|_| memchr::memmem::find(raw, br#""ordinal":"#).is_none())
    }
}

/// Whether a line is a `session_meta` (by its bytes after the timestamp,
/// else parsed).
fn is_session_meta(raw: &[u8], stamp: Option<&Stamp>) -> bool {
    if let Some(rest) = stamp.and_then(|s| s.rest) {
        if raw[rest..].starts_with(br#"","type":""#) {
            return raw[rest..].starts_with(br#"","type":"session_meta""#);
        }
    }
    crate::json::with_scratch(|json, arena| {
        json.parse(raw, arena, |parsed| {
            parsed
                .ok()
                .and_then(|(nodes, _)| envelope(nodes))
                .is_some_and(|e| e.ty == "session_meta")
        })
    })
}

/// A line's content less its timestamp (and `ordinal`): a hash of the
/// rest of its bytes, or of its fields as parsed (keys of one run, never
/// saved).
fn content_key(raw: &[u8], stamp: Option<&Stamp>, hash: LineHash) -> u64 {
    if let Some(rest) = stamp.and_then(|s| s.bytes_rest(raw)) {
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
    if stamp.bytes_rest(raw).is_some() {
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

thread_local! {
    /// The buffer of the [`Lines`] this thread read last.
    static SPARE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Lines {
    /// Its buffer to [`SPARE`], unless it grew past 1 MiB.
    fn drop(&mut self) {
        if self.buf.len() <= 1 << 20 {
            let buf = std::mem::take(&mut self.buf);
            let _ = SPARE.try_with(|s| *s.borrow_mut() = buf);
        }
    }
}

/// A file's lines, without their `\n` (a compressed rollout decompressed),
/// read into one buffer that rolls forward (a line is handed out where it
/// was read), a read at a time: doubled when a line does not fit.
struct Lines {
    reader: Box<dyn Read>,
    buf: Vec<u8>,
    /// The bytes read and not handed out are `buf[at..end]`; of them,
    /// `buf[at..scanned]` hold no `\n`.
    at: usize,
    scanned: usize,
    end: usize,
    eof: bool,
}

impl Lines {
    fn open(path: &Path) -> Option<Lines> {
        let file = std::fs::File::open(path).ok()?;
        let reader: Box<dyn Read> = if super::compressed(path) {
            #[cfg(feature = "zstd")]
            {
                let mut d = zstd::stream::read::Decoder::new(file).ok()?;
                d.window_log_max(super::zst::WINDOW_LOG_MAX).ok()?;
                Box::new(d)
            }
            #[cfg(not(feature = "zstd"))]
            return None;
        } else {
            Box::new(file)
        };
        Some(Lines::new(reader, 64 << 10))
    }

    /// Lines of `reader`, in a buffer of `capacity` bytes at first: this
    /// thread's, kept from the file before (zeroing 64 KiB for each child
    /// was a third of this module's time).
    fn new(reader: Box<dyn Read>, capacity: usize) -> Lines {
        let mut buf = SPARE.with_borrow_mut(std::mem::take);
        buf.resize(capacity.max(1), 0);
        Lines {
            reader,
            buf,
            at: 0,
            scanned: 0,
            end: 0,
            eof: false,
        }
    }

    fn next(&mut self) -> Option<&[u8]> {
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[self.scanned..self.end]) {
                let line = self.at..self.scanned + i;
                self.at = self.scanned + i + 1;
                self.scanned = self.at;
                return Some(&self.buf[line]);
            }
            self.scanned = self.end;
            if self.eof {
                if self.at == self.end {
                    return None;
                }
                let line = self.at..self.end;
                self.at = self.end;
                return Some(&self.buf[line]);
            }
            // The partial line to the front, room after it.
            self.buf.copy_within(self.at..self.end, 0);
            (self.end, self.scanned) = (self.end - self.at, self.scanned - self.at);
            self.at = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.reader.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => self.eof = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines handed out are those of splitting on `\n` (a last line
    /// without one included, an empty last piece not), whatever the
    /// buffer's first size.
    #[test]
    fn lines_are_the_pieces_between_newlines() {
        let texts: [&[u8]; 6] = [
            b"",
            b"\n",
            b"a\nbb\n\nccc",
            b"one line without end",
            b"x\ny\n",
            &[b'z'; 300],
        ];
        for text in texts {
            let mut want: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
            if want.last() == Some(&&b""[..]) {
                want.pop();
            }
            for capacity in [1, 2, 3, 7, 64, 1 << 16] {
                let mut lines = Lines::new(Box::new(std::io::Cursor::new(text.to_vec())), capacity);
                let mut got = Vec::new();
                while let Some(l) = lines.next() {
                    got.push(l.to_vec());
                }
                assert_eq!(got, want, "{text:?}, capacity {capacity}");
            }
        }
    }

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
        assert!(sa.bytes_rest(a).is_some());
        assert_eq!(key(a), key(b));
        assert_ne!(key(b), key(c));
        assert_eq!(parent_fingerprint(a, 3, &sa, h), h.of(a));
        let o1 = br#"{"timestamp":"2026-01-01T10:00:07.000Z","ordinal":4,"type":"event_msg","payload":{"type":"agent_message","message":"x"}}"#;
        let o2 = br#"{"timestamp":"2026-01-01T10:01:00.001Z","ordinal":9,"type":"event_msg","payload":{"type":"agent_message","message":"x"}}"#;
        let so = Stamp::of(o1).unwrap();
        assert!(so.rest.is_some() && so.bytes_rest(o1).is_none());
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
