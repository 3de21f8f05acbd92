//! The format-neutral JSON layer: a line copied into the arena and parsed
//! in place with simd-json onto a reused tape, lines simd-json rejects for
//! invalid UTF-8 or lone surrogate escapes repaired (as JavaScript readers
//! keep them), field access on the tape, compact JSON out of it, the one
//! JSON string escaper, and the fingerprint hash. No format's key names
//! are known here.

use bumpalo::Bump;
use simd_json::{Node, Tape};

use crate::report::SkipReason;

mod escape;
pub mod hash;
pub mod lean;
mod simd;
mod tape;

pub use escape::*;
pub use hash::LineHash;
pub use hash::{fingerprint, keyed, FingerprintHasher};
pub use simd::*;
pub use tape::*;

/// simd-json's scratch space, reused from line to line.
pub struct JsonParser {
    buffers: simd_json::Buffers,
    tape: Option<Tape<'static>>,
    /// The longest line parsed: simd-json's buffers (which do not tell
    /// their size) grow with it.
    longest: usize,
    /// Where the last line's strings are, when it parsed as read (not
    /// repaired): see [`ParsedLine`].
    copy: Option<Strings>,
    /// Whether lines are parsed with the lean parse first ([`crate::json::lean`]:
    /// for runs that build no record and so write no string of the line).
    lean: bool,
    /// Whether lines are parsed with the lean parse first and read with
    /// record text left raw ([`JsonParser::set_raw_text`]).
    raw_text: bool,
    /// The odd strings of the last line the lean parse took
    /// ([`crate::json::lean::parse`]).
    odd: Vec<usize>,
}

impl Default for JsonParser {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonParser {
    pub fn new() -> Self {
        JsonParser {
            buffers: simd_json::Buffers::default(),
            tape: Some(Tape::null()),
            longest: 0,
            copy: None,
            lean: false,
            raw_text: false,
            odd: Vec::new(),
        }
    }

    /// Parses with the lean parse first, or not. A lean tape's value
    /// strings are raw until read through [`as_str`] or [`write_json`],
    /// and no line parsed so is [`JsonParser::parsed`] (its strings are not
    /// where simd-json's would be).
    pub fn set_lean(&mut self, lean: bool) {
        self.lean = lean;
    }

    /// Parses with the lean parse first, and reads a lean tape with record
    /// text left raw ([`crate::json::lean::defers_text`]), or not: for a run
    /// whose only reader of a record's text is the NDJSON writer. The
    /// mapping then builds the text escaped, as the writer writes it, from
    /// the line's raw strings ([`crate::line::Text`]), and the writer copies
    /// it ([`ParsedLine::write_str`]). A line taken by the lean parse is
    /// then [`JsonParser::parsed`], with [`Strings::Raw`].
    pub fn set_raw_text(&mut self, raw_text: bool) {
        self.raw_text = raw_text;
    }

    /// Bytes of scratch space held, at most: the tape, and simd-json's
    /// string buffer (a line's length) and structural indexes (up to four
    /// bytes per byte of the line) for the longest line.
    pub fn capacity(&self) -> usize {
        let tape = self
            .tape
            .as_ref()
            .map_or(0, |t| t.0.capacity() * std::mem::size_of::<Node<'_>>());
        tape + 5 * self.longest
    }

    /// Parses `line` and calls `f` with its tape and whether it needed
    /// repair. simd-json parses a copy in its own buffers (it unescapes in
    /// place); the lean parse reads `line` itself, which its raw strings
    /// then point into (so it lives as long as the tape).
    pub fn parse<'a, T>(
        &mut self,
        line: &'a [u8],
        arena: &'a Bump,
        f: impl FnOnce(Result<(&[Node<'a>], bool), SkipReason>) -> T,
    ) -> T {
        self.longest = self.longest.max(line.len());
        let mut tape = self.tape.take().unwrap_or_else(Tape::null).reset();
        let lean = (self.lean || self.raw_text)
            && crate::json::lean::parse(
                line,
                arena,
                &mut tape.0,
                self.raw_text.then_some(&mut self.odd),
            );
        let (out, copy) = if lean {
            let odd = self.raw_text.then_some(&self.odd[..]);
            let _reading = crate::json::lean::Reading::new(line, arena, odd);
            // Without raw text, not `parsed`: the lean tape's strings are
            // not where `ParsedLine` would look for them.
            let copy = self.raw_text.then_some(Strings::Raw);
            (f(Ok((&tape.0, false))), copy)
        } else {
            tape.0.clear();
            match parse_into(&mut self.buffers, &mut tape, arena, line) {
                Ok(Parsed::AsRead(copy)) => (f(Ok((&tape.0, false))), Some(Strings::Copy(copy))),
                Ok(Parsed::Repaired) => (f(Ok((&tape.0, true))), None),
                Err(e) => (f(Err(e)), None),
            }
        };
        self.copy = copy;
        self.tape = Some(tape.reset());
        out
    }

    /// `line`, when it is the line [`JsonParser::parse`] last parsed as
    /// read, and since then [`JsonParser::forget`] was not called.
    pub fn parsed<'l>(&self, line: &'l [u8]) -> Option<ParsedLine<'l>> {
        self.copy.map(|copy| ParsedLine { bytes: line, copy })
    }

    /// Forgets the last line parsed (a line handed out without a parse).
    pub fn forget(&mut self) {
        self.copy = None;
    }
}

/// A line as read, and where simd-json parsed its copy: the strings of the
/// line's entry that point into that copy start where their bytes start in
/// the line, so that such a string can be written as the line's own bytes
/// when those bytes are exactly what [`escape`] writes for it
/// ([`ParsedLine::escaped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedLine<'l> {
    bytes: &'l [u8],
    copy: Strings,
}

/// Where the strings of a line's entry are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strings {
    /// In simd-json's copy of the line, which starts at this address
    /// (compared, never read).
    Copy(usize),
    /// In the line itself, as the lean parse read it with record text left
    /// raw ([`JsonParser::set_raw_text`]): the record's text was built
    /// escaped, exactly as [`escape`] writes it between the quotes.
    Raw,
}

impl<'l> ParsedLine<'l> {
    /// The JSON string `s` as the line holds it, quotes included, when `s`
    /// is a whole string of the line that the line writes exactly as
    /// [`escape`] would (its escapes `\"`, `\\`, `\b`, `\f`, `\n`, `\r`,
    /// `\t`, and `\u00xx` in lowercase for the other control bytes);
    /// `None` for any other string, which is then escaped.
    ///
    /// Why the bytes are then `escape(s)`: `s` starts at offset `o` of the
    /// copy, and the line's byte before `o` is a quote no backslash escapes,
    /// so a string of the line starts at `o` (a quote inside a string is
    /// escaped) and `s` is its start. `n`, the length of `escape(s)`, ends
    /// at an unescaped quote of the line: that string's end. Its raw bytes
    /// are then exactly `n` long, where every other way of writing a
    /// character is longer than the canonical one (`\/`, `\u0041`, a
    /// surrogate pair; simd-json rejects raw control bytes) and `escape`'s
    /// length grows with every character of a prefix: so `s` is the whole
    /// string and each of its characters is written canonically, or in the
    /// one other way of the same length, a `\u00XX` escape with an
    /// uppercase hex digit, which the bytes are searched for when `s` holds
    /// such a control byte.
    pub fn escaped(&self, s: &str) -> Option<&'l [u8]> {
        let b = self.bytes;
        // A raw string is not `s`'s text: see `write_str`.
        let Strings::Copy(copy) = self.copy else {
            return None;
        };
        let o = (s.as_ptr() as usize).checked_sub(copy)?;
        if o == 0 || o > b.len() || s.len() > b.len() - o || b[o - 1] != b'"' {
            return None;
        }
        let (n, hex) = escaped_len(s.as_bytes());
        let end = o + n;
        if end >= b.len() || b[end] != b'"' {
            return None;
        }
        let even = |run: &[u8]| run.iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0;
        if !(even(&b[..o - 1]) && even(&b[o..end])) {
            return None;
        }
        if hex && maybe_upper_hex(&b[o..end]) {
            return None;
        }
        Some(&b[o - 1..=end])
    }
}

impl ParsedLine<'_> {
    /// Whether the record's text was built escaped (a raw-text read,
    /// [`Strings::Raw`]): the writer must then copy it as it is.
    pub fn text_built_escaped(&self) -> bool {
        self.copy == Strings::Raw
    }

    /// Appends the JSON string of `s`, the text of the record mapped from
    /// this line, as [`escape`] writes it: the line's own bytes when they
    /// are exactly that; a text built escaped (a line read with raw text,
    /// [`crate::line::Text`]) as it is, in quotes; else escaped.
    pub fn write_str(&self, s: &str, out: &mut Vec<u8>) {
        match self.copy {
            Strings::Copy(_) => match self.escaped(s) {
                Some(raw) => out.extend_from_slice(raw),
                None => escape(out, s),
            },
            Strings::Raw => {
                out.reserve(s.len() + 2);
                out.push(b'"');
                out.extend_from_slice(s.as_bytes());
                out.push(b'"');
            }
        }
    }
}

/// A parser and an arena for a short parse outside a source (a format's
/// detection, a file's header lines), kept per thread: opening thousands of
/// files allocated fresh simd-json buffers and an arena for each, and
/// faulted their pages in. `f` gets the arena reset; the pair is kept
/// unless it grew past 64 MiB. The parser parses with the lean parse first
/// ([`JsonParser::set_lean`]): a caller reads strings only in
/// [`JsonParser::parse`]'s callback, where raw ones are decoded on read,
/// and keeps owned copies.
pub fn with_scratch<T>(f: impl FnOnce(&mut JsonParser, &mut Bump) -> T) -> T {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Option<(JsonParser, Bump)>> =
            const { std::cell::RefCell::new(None) };
    }
    let spare = SCRATCH.try_with(|s| s.borrow_mut().take()).ok().flatten();
    let (mut json, mut arena) = spare.unwrap_or_else(|| {
        // Its callers read a few fields of a first line (a `session_meta`
        // line holds the base instructions: tens of KB of text).
        let mut json = JsonParser::new();
        json.set_lean(true);
        (json, Bump::new())
    });
    let out = f(&mut json, &mut arena);
    arena.reset();
    if arena.allocated_bytes() + json.capacity() <= 64 << 20 {
        let _ = SCRATCH.try_with(|s| *s.borrow_mut() = Some((json, arena)));
    }
    out
}

/// Whether a line holds only spaces, tabs and `\r`.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// The lines of a file's first bytes, each with its offset in `prefix`:
/// the complete ones, and the last one too when `whole` (the prefix is the
/// file). When it ends, [`PrefixLines::rest`] is the incomplete line left.
pub struct PrefixLines<'p> {
    prefix: &'p [u8],
    rest: &'p [u8],
    whole: bool,
}

impl<'p> PrefixLines<'p> {
    pub fn new(prefix: &'p [u8], whole: bool) -> Self {
        PrefixLines {
            prefix,
            rest: prefix,
            whole,
        }
    }

    /// What is not yet handed out.
    pub fn rest(&self) -> &'p [u8] {
        self.rest
    }
}

impl<'p> Iterator for PrefixLines<'p> {
    type Item = (usize, &'p [u8]);

    fn next(&mut self) -> Option<(usize, &'p [u8])> {
        let rest = self.rest;
        if rest.is_empty() {
            return None;
        }
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None if self.whole => (rest, &rest[rest.len()..]),
            None => return None,
        };
        self.rest = next;
        Some((self.prefix.len() - rest.len(), line))
    }
}

#[cfg(test)]
pub mod tests {
    use super::escape::*;
    use super::hash::*;
    use super::*;

    /// xorshift64: the tests' reproducible random numbers.
    pub fn rng(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    const CODEX_LINE: &[u8] = br#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}"#;

    /// Checkpoints hold these values: a change to either hash would leave
    /// every saved fingerprint unmatched (every entry emitted again).
    #[test]
    fn the_hashes_are_pinned() {
        assert_eq!(LineHash::Serial.of(CODEX_LINE), 0x2448_7e84_02c4_e6ac);
        assert_eq!(LineHash::Wide.of(CODEX_LINE), 0xc47e_6bc2_730c_106b);
        assert_eq!(LineHash::Wide.of(b""), 0x05fb_491f_258a_6999);
        assert_eq!(LineHash::Wide.of(&CODEX_LINE[..48]), 0xa0f5_fff0_b76f_9f63);
        assert_eq!(fingerprint(&[b"a", b"bc"]), 0x2d64_a40a_d432_c549);
        assert_eq!(LineHash::Serial.of(CODEX_LINE), fingerprint(&[CODEX_LINE]));
        // XXH3-64 as the `xxhash` Python package (the reference C code)
        // gives it: short, middle and long inputs (the long ones through
        // the vector loop and its tail).
        assert_eq!(LineHash::Xxh3.of(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(LineHash::Xxh3.of(CODEX_LINE), 0x92f1_35c4_f3f4_1491);
        assert_eq!(LineHash::Xxh3.of(&CODEX_LINE[..48]), 0x5bec_a2f0_8c0e_f898);
        let long: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        assert_eq!(LineHash::Xxh3.of(&long), 0x799a_addd_7339_581d);
        assert_eq!(LineHash::Xxh3.of(&long[..1025]), 0x806c_2072_ed71_3576);
        assert_eq!(
            (
                LineHash::from_id(1),
                LineHash::from_id(2),
                LineHash::from_id(3),
                LineHash::from_id(4)
            ),
            (
                Some(LineHash::Serial),
                Some(LineHash::Wide),
                Some(LineHash::Xxh3),
                None
            )
        );
        assert_eq!(
            (
                LineHash::Serial.id(),
                LineHash::Wide.id(),
                LineHash::Xxh3.id()
            ),
            (1, 2, 3)
        );
        assert_eq!(LineHash::default(), LineHash::Xxh3);
    }

    /// Every byte and the length reach the wide hash: each prefix of a
    /// buffer hashes differently, and so does every one-bit change, in the
    /// three lanes, the 16-byte steps and the tail alike.
    #[test]
    fn the_wide_hash_sees_every_byte_and_the_length() {
        // Lanes that fold alike do not cancel: with the second lane's
        // words (x, c) and the third's (x ^ K2 ^ K3, c), both lanes take
        // the same multiply when seeded alike, and an XOR of the lanes
        // would then drop x (any two x collide). Seeded apart and folded
        // by multiplies, they do not.
        let with = |x: u64| {
            let mut b = [b'a'; 68];
            let c = 0x0123_4567_89ab_cdefu64;
            b[16..24].copy_from_slice(&x.to_le_bytes());
            b[24..32].copy_from_slice(&c.to_le_bytes());
            b[32..40].copy_from_slice(&(x ^ WIDE_K[2] ^ WIDE_K[3]).to_le_bytes());
            b[40..48].copy_from_slice(&c.to_le_bytes());
            LineHash::Wide.of(&b)
        };
        assert_ne!(with(1), with(2));
        let buf: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut seen = std::collections::HashSet::new();
        for n in 0..=buf.len() {
            assert!(seen.insert(LineHash::Wide.of(&buf[..n])), "prefix {n}");
        }
        for n in [1, 15, 16, 17, 32, 47, 48, 49, 64, 96, 97, 145, 200] {
            let h = LineHash::Wide.of(&buf[..n]);
            for i in 0..n {
                for bit in 0..8 {
                    let mut b = buf[..n].to_vec();
                    b[i] ^= 1 << bit;
                    assert_ne!(LineHash::Wide.of(&b), h, "length {n}, byte {i}, bit {bit}");
                }
            }
        }
        assert_ne!(LineHash::Wide.of(b"ab"), LineHash::Wide.of(b"ab\0"));
        assert_ne!(
            LineHash::Wide.of(CODEX_LINE),
            LineHash::Serial.of(CODEX_LINE)
        );
    }

    fn repaired(line: &[u8]) -> Vec<u8> {
        let arena = Bump::new();
        let mut out = bumpalo::collections::Vec::new_in(&arena);
        repair(line, &mut out);
        out.to_vec()
    }

    #[test]
    fn repair_replaces_lone_surrogates_only() {
        assert_eq!(repaired(br#""\ud83d""#), br#""\ufffd""#);
        assert_eq!(repaired(br#""\ud83d\ude00""#), br#""\ud83d\ude00""#);
        assert_eq!(repaired(br#""\ude00x\uD83D""#), br#""\ufffdx\ufffd""#);
        assert_eq!(repaired(br#""\\ud83d""#), br#""\\ud83d""#);
        assert_eq!(repaired(br#""\\\ud83d""#), br#""\\\ufffd""#);
        assert_eq!(repaired(b"\"a\xffb\""), "\"a\u{FFFD}b\"".as_bytes());
        assert_eq!(repaired(b"\"\xe2\x82\""), "\"\u{FFFD}\"".as_bytes());
        assert_eq!(repaired(b"\xe4\\"), "\u{FFFD}\\".as_bytes());
    }

    /// Every escaped byte at every place of strings of 0 to 70 bytes (the
    /// 16- and 8-byte scans and their tails), and multibyte characters:
    /// what serde_json writes.
    #[test]
    fn escape_writes_what_serde_json_writes() {
        let specials = [
            '"', '\\', '\n', '\r', '\t', '\u{0}', '\u{1f}', '\u{8}', '\u{c}',
        ];
        let mut texts = Vec::new();
        for len in 0..70 {
            let plain: String = "abcdéfgh€ij😀".chars().cycle().take(len).collect();
            texts.push(plain.clone());
            let n = plain.chars().count();
            for at in 0..n {
                for sp in specials {
                    let mut t: Vec<char> = plain.chars().collect();
                    t[at] = sp;
                    texts.push(t.iter().collect());
                }
            }
            texts.push(std::iter::repeat_n('\n', len).collect());
            texts.push("\u{7f}~ \u{2028}".repeat(len));
        }
        for t in &texts {
            let mut out = Vec::new();
            escape(&mut out, t);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(t).unwrap(),
                "{t:?}"
            );
        }
    }

    /// Long texts (several chunks of the SSE2 escape, a char cut by every
    /// chunk boundary) of every escape density, into both outputs, from a
    /// non-empty output: the bytes serde_json writes, and the same as the
    /// portable path's.
    #[test]
    fn long_texts_escape_as_serde_json_into_both_outputs() {
        let mut next = rng(0x2545_F491_4F6C_DD1Du64);
        let pieces = [
            "a", "é", "€", "😀", "\"", "\\", "\n", "\u{1}", "\u{1f}", " ", "\u{7f}",
        ];
        for (len, every) in [
            (4095, 3),
            (4096, 1000),
            (4097, 11),
            (9000, 2),
            (13000, 40),
            (20000, 1),
        ] {
            let mut t = String::new();
            while t.len() < len {
                let r = next();
                let p = if r.is_multiple_of(every) {
                    pieces[4 + (r >> 8) as usize % 7]
                } else {
                    pieces[(r >> 8) as usize % 4]
                };
                t.push_str(p);
            }
            let want = serde_json::to_string(&t).unwrap();
            let mut out = b"x".to_vec();
            escape(&mut out, &t);
            assert_eq!(&out[..1], b"x");
            assert_eq!(
                std::str::from_utf8(&out[1..]).unwrap(),
                want,
                "{len} {every}"
            );
            let arena = Bump::new();
            let mut a = bumpalo::collections::String::from_str_in("x", &arena);
            escape(&mut a, &t);
            assert_eq!(&a[1..], want, "{len} {every}");
            let mut parts = b"x".to_vec();
            parts.push(b'"');
            escape_parts(&mut parts, &t);
            parts.push(b'"');
            assert_eq!(parts, out, "{len} {every}");
        }
    }

    /// A random string, and a line `{"k":"…","t":"…"}` holding it written
    /// in each way JSON allows for each character (`canonical` alone: the
    /// way serde_json and JavaScript write it).
    fn encoded_line(next: &mut impl FnMut() -> u64, canonical: bool) -> (String, Vec<u8>) {
        let chars = [
            'a', 'Z', '/', ' ', '"', '\\', '\n', '\t', '\r', '\u{8}', '\u{c}', '\u{0}', '\u{1}',
            '\u{b}', '\u{1b}', '\u{1f}', '\u{7f}', 'é', '€', '😀', 'A', 'f', '\u{2028}',
        ];
        let len = next() % 90;
        let mut s = String::new();
        let mut raw = String::new();
        for _ in 0..len {
            let c = chars[(next() % chars.len() as u64) as usize];
            s.push(c);
            let canon = serde_json::to_string(&c.to_string()).unwrap();
            let canon = &canon[1..canon.len() - 1];
            let way = if canonical { 0 } else { next() % 5 };
            let u = c as u32;
            match way {
                1 if c == '/' => raw.push_str("\\/"),
                2 if u <= 0xffff => raw.push_str(&format!("\\u{u:04X}")),
                3 if u <= 0xffff => raw.push_str(&format!("\\u{u:04x}")),
                4 if u > 0xffff => {
                    let v = u - 0x10000;
                    let (hi, lo) = (0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
                    raw.push_str(&format!("\\u{hi:04x}\\u{lo:04x}"));
                }
                _ => raw.push_str(canon),
            }
        }
        let line = format!(r#"{{"k":"\"{raw}","t":"{raw}","n":["{raw}"]}}"#);
        (s, line.into_bytes())
    }

    /// What `escaped` gives for every string of a line's tape, and for
    /// each one's prefixes and suffixes: a copy of the line's bytes only
    /// when they are what `escape` writes, and for a canonically written
    /// line, the whole strings (here, all but `k`'s, which starts with an
    /// escape of its own, also canonical) always.
    #[test]
    fn a_string_is_copied_from_its_line_exactly_when_the_line_writes_it_as_escape_does() {
        let mut next = rng(0x51_7CC1_B727_220Au64);
        let (mut copied, mut escaped_again) = (0, 0);
        let mut json = JsonParser::new();
        for round in 0..6000 {
            let canonical = round % 3 == 0;
            let (want, line) = encoded_line(&mut next, canonical);
            let arena = Bump::new();
            let strings: Vec<&str> = json.parse(&line, &arena, |parsed| {
                let (nodes, repaired) = parsed.unwrap();
                assert!(!repaired);
                let strings = nodes.iter().filter_map(|n| match n {
                    Node::String(s) => Some(*s),
                    _ => None,
                });
                strings.collect()
            });
            let parsed = json.parsed(&line).expect("parsed as read");
            let mut got = Vec::new();
            for s in strings {
                let mut cuts: Vec<&str> = vec![s];
                for (i, _) in s.char_indices().skip(1) {
                    cuts.push(&s[..i]);
                    cuts.push(&s[i..]);
                }
                for c in cuts {
                    match parsed.escaped(c) {
                        Some(b) => {
                            assert_eq!(b, serde_json::to_string(c).unwrap().as_bytes(), "{c:?}");
                            assert!(std::ptr::eq(c, s), "a part of a string: {c:?}");
                            copied += 1;
                        }
                        None => escaped_again += 1,
                    }
                }
                got.push((s.to_string(), parsed.escaped(s).is_some()));
            }
            // Keys k, t, n, then the strings.
            let strings: Vec<_> = got
                .iter()
                .filter(|(s, _)| !["k", "t", "n"].contains(&s.as_str()))
                .collect();
            assert_eq!(strings.len(), 3, "{}", String::from_utf8_lossy(&line));
            assert_eq!(strings[0].0, format!("\"{want}"));
            assert_eq!((&strings[1].0, &strings[2].0), (&want, &want));
            if canonical {
                assert!(
                    got.iter().all(|(_, c)| *c),
                    "{}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
        assert!(
            copied > 10_000 && escaped_again > 10_000,
            "{copied} {escaped_again}"
        );
    }

    /// Other strings than the line's: in the arena, after the line's copy;
    /// or the line's, after a repair.
    #[test]
    fn strings_not_in_the_lines_copy_are_escaped_again() {
        let mut json = JsonParser::new();
        let arena = Bump::new();
        let line = br#"{"t":"abc","u":"x\ud83dy"}"#;
        let t = json.parse(line, &arena, |parsed| {
            let (nodes, repaired) = parsed.unwrap();
            assert!(repaired);
            let Node::String(t) = nodes[2] else { panic!() };
            t
        });
        assert_eq!(t, "abc");
        assert_eq!(json.parsed(line), None, "repaired: not parsed as read");
        let line = br#"{"t":"abc"}"#;
        let t = json.parse(line, &arena, |parsed| {
            let Node::String(t) = parsed.unwrap().0[2] else {
                panic!()
            };
            t
        });
        let parsed = json.parsed(line).unwrap();
        assert_eq!(parsed.escaped(t), Some(&br#""abc""#[..]));
        let elsewhere = arena.alloc_str("abc");
        assert_eq!(parsed.escaped(elsewhere), None);
        json.forget();
        assert_eq!(json.parsed(line), None);
    }

    #[test]
    fn the_vector_scans_count_as_the_byte_ones() {
        let mut next = rng(0x2545_F491_4F6C_DD1Du64);
        for len in 0..400 {
            for _ in 0..30 {
                let b: Vec<u8> = (0..len)
                    .map(|_| {
                        let x = next();
                        match x % 12 {
                            0 => b'"',
                            1 => b'\\',
                            2 => (x >> 8) as u8 % 0x20,
                            3 => b'u',
                            4 => b'A' + (x >> 8) as u8 % 7,
                            _ => (x >> 8) as u8,
                        }
                    })
                    .collect();
                assert_eq!(escaped_len(&b), escaped_len_bytes(&b), "{b:?}");
                assert_eq!(maybe_upper_hex(&b), maybe_upper_hex_bytes(&b, 0), "{b:?}");
            }
        }
        assert_eq!(
            escaped_len(b"a\"\\\n\x1b\x08\x0b"),
            (1 + 2 + 2 + 2 + 6 + 2 + 6, true)
        );
        assert_eq!(escaped_len("é\t".as_bytes()), (4, false));
        assert!(maybe_upper_hex(b"xx\\u001Bxx"));
        assert!(!maybe_upper_hex(b"xx\\u001bxx"));
    }

    #[test]
    fn prefix_lines_are_the_complete_ones_and_the_last_when_whole() {
        let lines = |whole| PrefixLines::new(b"a\n\nbc\nde", whole).collect::<Vec<_>>();
        let complete: Vec<(usize, &[u8])> = vec![(0, b"a"), (2, b""), (3, b"bc")];
        assert_eq!(lines(false), complete);
        let mut all = complete.clone();
        all.push((6, b"de"));
        assert_eq!(lines(true), all);
        let mut it = PrefixLines::new(b"a\nbc", false);
        assert_eq!(it.next(), Some((0, &b"a"[..])));
        assert_eq!(it.next(), None);
        assert_eq!(it.rest(), b"bc");
        assert_eq!(PrefixLines::new(b"", true).next(), None);
    }

    #[test]
    fn the_scans_find_the_first_escaped_byte() {
        let mut next = rng(0x9E37_79B9_7F4A_7C15u64);
        for len in 0..300 {
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    let x = next();
                    // Mostly bytes that need no escape.
                    match x % 40 {
                        0 => b'"',
                        1 => b'\\',
                        2 => (x >> 8) as u8 % 0x20,
                        _ => 0x20 + (x >> 8) as u8 % 0xe0,
                    }
                })
                .collect();
            for i in 0..=len {
                let naive = i + b[i..].iter().take_while(|c| !special(**c)).count();
                assert_eq!(next_special(&b, i), naive, "{len} {i}");
            }
        }
    }

    #[test]
    fn compact_json_like_javascript() {
        let mut line = r#"{"a":[1,-2,1.5,true,null,"x\"\n\u0001é"],"b":{}}"#
            .as_bytes()
            .to_vec();
        let len = line.len();
        line.resize(len + simd_json::INPUT_PADDING, b' ');
        let mut tape = Tape::null();
        let mut buffers = simd_json::Buffers::default();
        simd_json::fill_tape_padded(&mut line, len, &mut buffers, &mut tape).unwrap();
        let arena = Bump::new();
        let mut s = bumpalo::collections::String::new_in(&arena);
        write_json(&tape.0, &mut s);
        assert_eq!(
            s.as_str(),
            r#"{"a":[1,-2,1.5,true,null,"x\"\n\u0001é"],"b":{}}"#
        );
    }
}
