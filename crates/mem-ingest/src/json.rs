//! The format-neutral JSON layer: a line copied into the arena and parsed
//! in place with simd-json onto a reused tape, lines simd-json rejects for
//! invalid UTF-8 or lone surrogate escapes repaired (as JavaScript readers
//! keep them), field access on the tape, compact JSON out of it, the one
//! JSON string escaper, and the fingerprint hash. No format's key names
//! are known here.

use bumpalo::Bump;
use simd_json::{ErrorType, Node, StaticNode, Tape};

use crate::report::SkipReason;

/// A 64-bit hash of byte strings (a multiply-fold mix; not for security).
pub(crate) fn fingerprint(parts: &[&[u8]]) -> u64 {
    const K: [u64; 3] = [
        0xa076_1d64_78bd_642f,
        0xe703_7ed1_a0b4_28db,
        0x8ebc_6af0_9c88_c6e3,
    ];
    let mix = |a: u64, b: u64| {
        let r = u128::from(a) * u128::from(b);
        (r as u64) ^ ((r >> 64) as u64)
    };
    let mut h = K[2];
    for part in parts {
        let mut chunks = part.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
            h = mix(h ^ w, K[0]);
        }
        let mut tail = [0u8; 8];
        tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        h = mix(h ^ u64::from_le_bytes(tail), K[1] ^ part.len() as u64);
    }
    mix(h, K[0] ^ parts.len() as u64)
}

/// How a whole line's bytes are hashed into its entry's fingerprint, where
/// a format knows a line by its bytes (a Codex line has no id: a replayed
/// copy is byte-identical). Checkpoints record it
/// ([`OutputOptions::line_hash`](crate::archive::OutputOptions::line_hash)):
/// the fingerprints they hold were made with it, so a run adopts theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LineHash {
    /// The fingerprint hash's one multiply-fold chain, 8 bytes a step: what
    /// checkpoints saved before the scheme was recorded hold.
    Serial,
    /// Three independent multiply-fold chains, 48 bytes a round (the shape
    /// of wyhash's bulk loop): about five times [`LineHash::Serial`]'s
    /// speed on long lines.
    #[default]
    Wide,
}

impl LineHash {
    /// Its number in a checkpoint.
    pub fn id(self) -> u32 {
        match self {
            LineHash::Serial => 1,
            LineHash::Wide => 2,
        }
    }

    /// The scheme of number `id`; `None` for one this release does not know.
    pub fn from_id(id: u32) -> Option<LineHash> {
        match id {
            1 => Some(LineHash::Serial),
            2 => Some(LineHash::Wide),
            _ => None,
        }
    }

    /// The hash of `line`'s bytes.
    pub(crate) fn of(self, line: &[u8]) -> u64 {
        match self {
            LineHash::Serial => fingerprint(&[line]),
            LineHash::Wide => wide(line),
        }
    }
}

/// The wide hash's constants (wyhash's).
const WIDE_K: [u64; 4] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
];

/// [`LineHash::Wide`]: three 16-byte lanes a round, each folded by one
/// 64x64->128 multiply independent of the others (one chain's multiply
/// waits for the one before it: the serial hash is bound by its latency),
/// each lane seeded apart and the three folded together by multiplies (an
/// XOR of lanes would let two equal lanes cancel), then 16 bytes a step,
/// then the zero-padded tail with its length. Not for security: like any
/// unkeyed 64-bit hash, collisions can be searched for.
fn wide(bytes: &[u8]) -> u64 {
    wide_with(bytes, &WIDE_K)
}

/// [`wide`] under this process's own random key (drawn once, from the
/// standard library's per-process hasher seed): a collision with it cannot
/// be searched for without the key. What a line is checked by where
/// trusting its fingerprint alone would let crafted bytes pass for
/// another line's (see `codex::memo`).
pub(crate) fn keyed(bytes: &[u8]) -> u64 {
    static KEY: std::sync::OnceLock<[u64; 4]> = std::sync::OnceLock::new();
    let key = KEY.get_or_init(|| {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new();
        // Odd words: no lane's multiply by a key word is by zero.
        std::array::from_fn(|i| seed.hash_one(i) | 1)
    });
    wide_with(bytes, key)
}

#[inline(always)]
fn wide_with(bytes: &[u8], k: &[u64; 4]) -> u64 {
    let k = *k;
    #[inline(always)]
    fn mix(a: u64, b: u64) -> u64 {
        let r = u128::from(a) * u128::from(b);
        (r as u64) ^ ((r >> 64) as u64)
    }
    #[inline(always)]
    fn word(b: &[u8], i: usize) -> u64 {
        u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
    }
    let len = bytes.len() as u64;
    let seed = k[2] ^ mix(k[0] ^ len, k[1]);
    let (mut s0, mut s1, mut s2) = (seed, seed ^ k[0], seed ^ k[3]);
    let mut rest = bytes;
    while rest.len() > 48 {
        s0 = mix(word(rest, 0) ^ k[1], word(rest, 8) ^ s0);
        s1 = mix(word(rest, 16) ^ k[2], word(rest, 24) ^ s1);
        s2 = mix(word(rest, 32) ^ k[3], word(rest, 40) ^ s2);
        rest = &rest[48..];
    }
    let mut h = mix(s0 ^ k[1], s1 ^ k[2]) ^ mix(s2 ^ k[3], seed);
    while rest.len() > 16 {
        h = mix(word(rest, 0) ^ k[1], word(rest, 8) ^ h);
        rest = &rest[16..];
    }
    let mut tail = [0u8; 16];
    tail[..rest.len()].copy_from_slice(rest);
    h = mix(
        word(&tail, 0) ^ k[1],
        word(&tail, 8) ^ h ^ rest.len() as u64,
    );
    mix(h ^ k[0], k[3] ^ len)
}

/// simd-json's scratch space, reused from line to line.
pub(crate) struct JsonParser {
    buffers: simd_json::Buffers,
    tape: Option<Tape<'static>>,
    /// The longest line parsed: simd-json's buffers (which do not tell
    /// their size) grow with it.
    longest: usize,
    /// Where the last line's strings are, when it parsed as read (not
    /// repaired): see [`ParsedLine`].
    copy: Option<Strings>,
    /// Whether lines are parsed with the lean parse first ([`crate::lean`]:
    /// for runs that build no record and so write no string of the line).
    lean: bool,
    /// Whether lines are parsed with the lean parse first and read with
    /// record text left raw ([`JsonParser::set_raw_text`]).
    raw_text: bool,
    /// The odd strings of the last line the lean parse took
    /// ([`crate::lean::parse`]).
    odd: Vec<usize>,
}

impl JsonParser {
    pub(crate) fn new() -> Self {
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
    pub(crate) fn set_lean(&mut self, lean: bool) {
        self.lean = lean;
    }

    /// Parses with the lean parse first, and reads a lean tape with record
    /// text left raw ([`crate::lean::defers_text`]), or not: for a run
    /// whose only reader of a record's text is the NDJSON writer. The
    /// mapping then builds the text escaped, as the writer writes it, from
    /// the line's raw strings ([`crate::pi::Text`]), and the writer copies
    /// it ([`ParsedLine::write_str`]). A line taken by the lean parse is
    /// then [`JsonParser::parsed`], with [`Strings::Raw`].
    pub(crate) fn set_raw_text(&mut self, raw_text: bool) {
        self.raw_text = raw_text;
    }

    /// Bytes of scratch space held, at most: the tape, and simd-json's
    /// string buffer (a line's length) and structural indexes (up to four
    /// bytes per byte of the line) for the longest line.
    pub(crate) fn capacity(&self) -> usize {
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
    pub(crate) fn parse<'a, T>(
        &mut self,
        line: &'a [u8],
        arena: &'a Bump,
        f: impl FnOnce(Result<(&[Node<'a>], bool), SkipReason>) -> T,
    ) -> T {
        self.longest = self.longest.max(line.len());
        let mut tape = self.tape.take().unwrap_or_else(Tape::null).reset();
        let lean = (self.lean || self.raw_text)
            && crate::lean::parse(
                line,
                arena,
                &mut tape.0,
                self.raw_text.then_some(&mut self.odd),
            );
        let (out, copy) = if lean {
            let odd = self.raw_text.then_some(&self.odd[..]);
            let _reading = crate::lean::Reading::new(line, arena, odd);
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
    pub(crate) fn parsed<'l>(&self, line: &'l [u8]) -> Option<ParsedLine<'l>> {
        self.copy.map(|copy| ParsedLine { bytes: line, copy })
    }

    /// Forgets the last line parsed (a line handed out without a parse).
    pub(crate) fn forget(&mut self) {
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
    pub(crate) fn text_built_escaped(&self) -> bool {
        self.copy == Strings::Raw
    }

    /// Appends the JSON string of `s`, the text of the record mapped from
    /// this line, as [`escape`] writes it: the line's own bytes when they
    /// are exactly that; a text built escaped (a line read with raw text,
    /// [`crate::pi::Text`]) as it is, in quotes; else escaped.
    pub(crate) fn write_str(&self, s: &str, out: &mut Vec<u8>) {
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

/// Whether the raw bytes of a JSON string (a string the lean parse took:
/// no raw control byte, every escape well formed) are exactly what
/// [`escape`] writes for the text they decode to: every escape is `\"`,
/// `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, or `\u00xx` in lowercase for a control
/// byte without a short escape. Unescaped bytes are all ones `escape`
/// leaves as they are (it escapes only control bytes, quotes and
/// backslashes). Escape by escape: the lean parse notes the same as it
/// reads a line ([`crate::lean::canonical`]); this is for a string it did
/// not read, and the reference its tests compare with.
pub(crate) fn canonical(raw: &[u8]) -> bool {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'\\', &raw[from..]) {
        let i = from + i;
        match raw.get(i + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => from = i + 2,
            Some(b'u') => {
                let hex = |c: u8| match c {
                    b'0'..=b'9' => Some(c - b'0'),
                    b'a'..=b'f' => Some(c - b'a' + 10),
                    _ => None,
                };
                let code = match raw.get(i + 2..i + 6) {
                    Some([b'0', b'0', h, l]) => hex(*h).zip(hex(*l)).map(|(h, l)| h * 16 + l),
                    _ => None,
                };
                match code {
                    Some(c) if c < 0x20 && !matches!(c, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) => {
                        from = i + 6;
                    }
                    _ => return false,
                }
            }
            _ => return false,
        }
    }
    true
}

/// Whether `raw` may hold a `\u00XX` escape with an uppercase hex digit:
/// a backslash, `u` and, five bytes after the backslash, `A` to `F` (a
/// superset: a string is then escaped again).
fn maybe_upper_hex(raw: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: AVX2 is there.
        return unsafe { maybe_upper_hex_avx2(raw) };
    }
    maybe_upper_hex_bytes(raw, 0)
}

/// [`maybe_upper_hex`] for the escapes starting at `from` or later.
fn maybe_upper_hex_bytes(raw: &[u8], from: usize) -> bool {
    (from..raw.len().saturating_sub(5))
        .any(|i| raw[i] == b'\\' && raw[i + 1] == b'u' && matches!(raw[i + 5], b'A'..=b'F'))
}

/// [`maybe_upper_hex`] 32 escapes' starts at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn maybe_upper_hex_avx2(raw: &[u8]) -> bool {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_set1_epi8, _mm256_sub_epi8,
    };
    let at = |i: usize| raw.as_ptr().wrapping_add(i).cast::<__m256i>();
    let (backslash, u) = (_mm256_set1_epi8(b'\\' as i8), _mm256_set1_epi8(b'u' as i8));
    let (a, five) = (_mm256_set1_epi8(b'A' as i8), _mm256_set1_epi8(5));
    let mut p = 0;
    while p + 37 <= raw.len() {
        // SAFETY: each load's 32 bytes end by `p + 37 <= raw.len()`.
        let (v0, v1, v5) = unsafe {
            (
                _mm256_loadu_si256(at(p)),
                _mm256_loadu_si256(at(p + 1)),
                _mm256_loadu_si256(at(p + 5)),
            )
        };
        // v5 - 'A' <= 5, unsigned: `A` to `F`.
        let d = _mm256_sub_epi8(v5, a);
        let hit = _mm256_and_si256(
            _mm256_and_si256(_mm256_cmpeq_epi8(v0, backslash), _mm256_cmpeq_epi8(v1, u)),
            _mm256_cmpeq_epi8(_mm256_min_epu8(d, five), d),
        );
        if _mm256_movemask_epi8(hit) != 0 {
            return true;
        }
        p += 32;
    }
    maybe_upper_hex_bytes(raw, p)
}

/// The length of [`escape`]'s bytes for `s`, quotes left out, and whether
/// it writes a `\u00xx` escape.
fn escaped_len(s: &[u8]) -> (usize, bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: AVX2 is there.
        return unsafe { escaped_len_avx2(s) };
    }
    escaped_len_bytes(s)
}

/// [`escaped_len`] a byte at a time: the portable path, and the reference
/// of the AVX2 one's tests.
fn escaped_len_bytes(s: &[u8]) -> (usize, bool) {
    let (mut n, mut hex) = (s.len(), false);
    for &c in s {
        match ESCAPE[usize::from(c)] {
            0 => {}
            b'u' => {
                n += 5;
                hex = true;
            }
            _ => n += 1,
        }
    }
    (n, hex)
}

/// [`escaped_len`] 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn escaped_len_avx2(s: &[u8]) -> (usize, bool) {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_andnot_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256,
        _mm256_min_epu8, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_setr_epi8,
        _mm256_shuffle_epi8,
    };
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    let (below_20, below_10) = (_mm256_set1_epi8(0x1f), _mm256_set1_epi8(0x0f));
    // The control bytes with a short escape (`\b \t \n \f \r`), by low
    // nibble, in each 16-byte lane.
    #[rustfmt::skip]
    let named = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, 0, -1, -1, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, 0, -1, -1, 0, 0,
    );
    // Bytes escaped (one more byte each), and those as `\u00xx` (four more).
    let (mut escaped, mut hex) = (0usize, 0usize);
    let mut p = 0;
    while p + 32 <= s.len() {
        // SAFETY: `p + 32 <= s.len()`.
        let v = unsafe { _mm256_loadu_si256(s.as_ptr().add(p).cast::<__m256i>()) };
        // min(v, n) == v: v <= n, unsigned.
        let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, below_20), v);
        let low = _mm256_cmpeq_epi8(_mm256_min_epu8(v, below_10), v);
        let short = _mm256_and_si256(_mm256_shuffle_epi8(named, v), low);
        let m = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(v, quote), _mm256_cmpeq_epi8(v, backslash)),
            control,
        );
        escaped += (_mm256_movemask_epi8(m) as u32).count_ones() as usize;
        hex += (_mm256_movemask_epi8(_mm256_andnot_si256(short, control)) as u32).count_ones()
            as usize;
        p += 32;
    }
    let (n, tail_hex) = escaped_len_bytes(&s[p..]);
    (n + p + escaped + 4 * hex, hex > 0 || tail_hex)
}

/// A parser and an arena for a short parse outside a source (a format's
/// detection, a file's header lines), kept per thread: opening thousands of
/// files allocated fresh simd-json buffers and an arena for each, and
/// faulted their pages in. `f` gets the arena reset; the pair is kept
/// unless it grew past 64 MiB. The parser parses with the lean parse first
/// ([`JsonParser::set_lean`]): a caller reads strings only in
/// [`JsonParser::parse`]'s callback, where raw ones are decoded on read,
/// and keeps owned copies.
pub(crate) fn with_scratch<T>(f: impl FnOnce(&mut JsonParser, &mut Bump) -> T) -> T {
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
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// The lines of a file's first bytes, each with its offset in `prefix`:
/// the complete ones, and the last one too when `whole` (the prefix is the
/// file). When it ends, [`PrefixLines::rest`] is the incomplete line left.
pub(crate) struct PrefixLines<'p> {
    prefix: &'p [u8],
    rest: &'p [u8],
    whole: bool,
}

impl<'p> PrefixLines<'p> {
    pub(crate) fn new(prefix: &'p [u8], whole: bool) -> Self {
        PrefixLines {
            prefix,
            rest: prefix,
            whole,
        }
    }

    /// What is not yet handed out.
    pub(crate) fn rest(&self) -> &'p [u8] {
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

/// How a line parsed.
pub(crate) enum Parsed {
    /// As read, in a copy at this address.
    AsRead(usize),
    /// After repair (invalid UTF-8 or lone surrogate escapes).
    Repaired,
}

/// Copies `line` into the arena with simd-json's padding and parses it in
/// place.
pub(crate) fn parse_into<'a>(
    buffers: &mut simd_json::Buffers,
    tape: &mut Tape<'a>,
    arena: &'a Bump,
    line: &[u8],
) -> Result<Parsed, SkipReason> {
    let err = match parse_padded(buffers, tape, arena, line) {
        Ok(copy) => return Ok(Parsed::AsRead(copy)),
        Err(e) => e,
    };
    match err.error() {
        ErrorType::InvalidUtf8 | ErrorType::InvalidUnicodeCodepoint => {}
        _ => return Err(reason_for(line, &err)),
    }
    let mut fixed = bumpalo::collections::Vec::with_capacity_in(line.len() + 16, arena);
    repair(line, &mut fixed);
    match parse_padded(buffers, tape, arena, &fixed) {
        Ok(_) => Ok(Parsed::Repaired),
        Err(e) => Err(reason_for(line, &e)),
    }
}

/// Returns the address of the copy parsed.
pub(crate) fn parse_padded<'a>(
    buffers: &mut simd_json::Buffers,
    tape: &mut Tape<'a>,
    arena: &'a Bump,
    line: &[u8],
) -> Result<usize, simd_json::Error> {
    let len = line.len();
    // Each byte written once, by memcpy (bumpalo's `extend_from_slice`
    // copies byte by byte: it was a third of all instructions; a space-filled
    // slice then a copy writes the line twice).
    const PADDING: [u8; simd_json::INPUT_PADDING] = [b' '; simd_json::INPUT_PADDING];
    let mut buf = bumpalo::collections::Vec::with_capacity_in(len + PADDING.len(), arena);
    buf.extend_from_slices_copy(&[line, &PADDING]);
    let copy = buf.into_bump_slice_mut();
    let at = copy.as_ptr() as usize;
    simd_json::fill_tape_padded(copy, len, buffers, tape).map(|()| at)
}

fn reason_for(line: &[u8], err: &simd_json::Error) -> SkipReason {
    if memchr::memchr(0, line).is_some() {
        return SkipReason::Nul;
    }
    match err.error() {
        ErrorType::DepthLimitExceeded => SkipReason::TooDeep,
        other => SkipReason::Malformed(error_text(other)),
    }
}

fn error_text(err: &ErrorType) -> String {
    match err {
        ErrorType::InternalError | ErrorType::TrailingData => {
            "unexpected bytes after the value or invalid structure".to_owned()
        }
        ErrorType::Syntax => "syntax error".to_owned(),
        ErrorType::Eof => "unexpected end of line".to_owned(),
        ErrorType::InvalidUtf8 => "invalid UTF-8 outside a string".to_owned(),
        ErrorType::InvalidUnicodeCodepoint => "invalid unicode escape".to_owned(),
        other => format!("parser error {other:?}"),
    }
}

/// Replaces invalid UTF-8 with U+FFFD (one per maximal invalid subpart, as
/// pi's decoder does) and lone surrogate escapes with `\ufffd`.
pub(crate) fn repair(line: &[u8], out: &mut bumpalo::collections::Vec<'_, u8>) {
    for chunk in line.utf8_chunks() {
        out.extend_from_slice_copy(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            out.extend_from_slice_copy("\u{FFFD}".as_bytes());
        }
    }
    let hex4 = |b: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    let mut i = 0;
    // `i` may pass the end by one after a backslash that ends the line.
    while let Some(k) = memchr::memchr(b'\\', out.get(i..).unwrap_or_default()) {
        let at = i + k;
        if out.get(at + 1) != Some(&b'u') {
            i = at + 2; // an escaped character, `\\` included
            continue;
        }
        let Some(cp) = hex4(&out[at + 2..]) else {
            i = at + 2;
            continue;
        };
        let low_follows = || {
            out.get(at + 6..at + 8) == Some(b"\\u")
                && hex4(&out[at + 8..]).is_some_and(|c| (0xDC00..0xE000).contains(&c))
        };
        if (0xD800..0xDC00).contains(&cp) && low_follows() {
            i = at + 12;
        } else if (0xD800..0xE000).contains(&cp) {
            out[at + 2..at + 6].copy_from_slice(b"fffd");
            i = at + 6;
        } else {
            i = at + 6;
        }
    }
}

// ---------------------------------------------------------------------------
// Tape access

/// Number of tape nodes a value spans.
pub(crate) fn span(n: &Node<'_>) -> usize {
    match n {
        Node::Object { count, .. } | Node::Array { count, .. } => count + 1,
        _ => 1,
    }
}

/// The top-level fields of an object on the tape (empty for a non-object).
#[derive(Clone, Copy)]
pub(crate) struct Fields<'t, 'a> {
    nodes: &'t [Node<'a>],
    len: usize,
}

impl<'t, 'a> Fields<'t, 'a> {
    pub(crate) fn of(nodes: &'t [Node<'a>]) -> Self {
        match nodes.first() {
            Some(Node::Object { len, .. }) => Fields { nodes, len: *len },
            _ => Fields { nodes: &[], len: 0 },
        }
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a str, &'t [Node<'a>])> {
        let mut idx = 1;
        (0..self.len).map_while(move |_| {
            let Node::String(k) = *self.nodes.get(idx)? else {
                return None;
            };
            let v = self.nodes.get(idx + 1)?;
            let value = &self.nodes[idx + 1..idx + 1 + span(v)];
            idx += 1 + span(v);
            Some((k, value))
        })
    }

    pub(crate) fn get(self, key: &str) -> Option<&'t [Node<'a>]> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// What [`Fields::get`] finds for each of several names, in one pass:
    /// `slot` gives a name's place (a `match`: a length, then one
    /// comparison), the first field of each name counting.
    pub(crate) fn first_of<const N: usize>(
        self,
        slot: impl Fn(&str) -> Option<usize>,
    ) -> [Option<&'t [Node<'a>]>; N] {
        let mut found = [None; N];
        for (k, v) in self.iter() {
            if let Some(f @ None) = slot(k).and_then(|i| found.get_mut(i)) {
                *f = Some(v);
            }
        }
        found
    }

    pub(crate) fn str(self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(as_str)
    }

    /// [`as_text`] of a field.
    pub(crate) fn text(self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(as_text)
    }
}

/// A string value as a piece of a record's text: as [`as_str`], except
/// that a raw string of a lean tape read with record text left raw
/// ([`crate::lean::defers_text`]) stays raw, for [`crate::pi::Text`] to
/// keep as it is or escape again ([`crate::lean::canonical`]).
pub(crate) fn as_text<'a>(v: &[Node<'a>]) -> Option<&'a str> {
    match v.first() {
        Some(Node::String(s)) if crate::lean::defers_text() => Some(s),
        Some(Node::String(s)) => Some(crate::lean::value(s)),
        _ => None,
    }
}

pub(crate) fn as_str<'a>(v: &[Node<'a>]) -> Option<&'a str> {
    match v.first() {
        Some(Node::String(s)) => Some(crate::lean::value(s)),
        _ => None,
    }
}

pub(crate) fn as_u64(v: &[Node<'_>]) -> Option<u64> {
    match v.first()? {
        Node::Static(StaticNode::U64(n)) => Some(*n),
        Node::Static(StaticNode::I64(n)) => u64::try_from(*n).ok(),
        Node::Static(StaticNode::F64(f)) if f.is_finite() && *f >= 0.0 => Some(*f as u64),
        _ => None,
    }
}

pub(crate) fn as_i64(v: &[Node<'_>]) -> Option<i64> {
    match v.first()? {
        Node::Static(StaticNode::I64(n)) => Some(*n),
        Node::Static(StaticNode::U64(n)) => i64::try_from(*n).ok(),
        Node::Static(StaticNode::F64(f)) if f.is_finite() => Some(*f as i64),
        _ => None,
    }
}

pub(crate) fn as_f64(v: &[Node<'_>]) -> Option<f64> {
    match v.first()? {
        Node::Static(StaticNode::I64(n)) => Some(*n as f64),
        Node::Static(StaticNode::U64(n)) => Some(*n as f64),
        Node::Static(StaticNode::F64(f)) => Some(*f),
        _ => None,
    }
}

pub(crate) fn as_bool(v: &[Node<'_>]) -> Option<bool> {
    match v.first()? {
        Node::Static(StaticNode::Bool(b)) => Some(*b),
        _ => None,
    }
}

/// The elements of an array on the tape (none for a non-array).
pub(crate) fn elements<'t, 'a>(v: &'t [Node<'a>]) -> impl Iterator<Item = &'t [Node<'a>]> {
    let len = match v.first() {
        Some(Node::Array { len, .. }) => *len,
        _ => 0,
    };
    let mut idx = 1;
    (0..len).map_while(move |_| {
        let n = v.get(idx)?;
        let e = &v[idx..idx + span(n)];
        idx += span(n);
        Some(e)
    })
}

// ---------------------------------------------------------------------------
// Writing JSON

/// Writes a value of the tape as compact JSON (as `JSON.stringify` does).
pub(crate) fn write_json(v: &[Node<'_>], out: &mut bumpalo::collections::String<'_>) {
    use std::fmt::Write;
    match v.first() {
        // A raw string of a line read with raw text, when it is what the
        // escape writes: copied, not decoded then escaped again.
        Some(Node::String(s)) if crate::lean::raw_written(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Some(Node::String(s)) => write_json_str(crate::lean::value(s), out),
        Some(Node::Static(StaticNode::Null)) | None => out.push_str("null"),
        Some(Node::Static(StaticNode::Bool(b))) => out.push_str(if *b { "true" } else { "false" }),
        Some(Node::Static(StaticNode::I64(n))) => {
            let _ = write!(out, "{n}");
        }
        Some(Node::Static(StaticNode::U64(n))) => {
            let _ = write!(out, "{n}");
        }
        Some(Node::Static(StaticNode::F64(f))) => {
            if f.is_finite() {
                let _ = write!(out, "{f}");
            } else {
                out.push_str("null");
            }
        }
        Some(Node::Array { .. }) => {
            out.push('[');
            for (i, e) in elements(v).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(e, out);
            }
            out.push(']');
        }
        Some(Node::Object { .. }) => {
            out.push('{');
            for (i, (k, e)) in Fields::of(v).iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_str(k, out);
                out.push(':');
                write_json(e, out);
            }
            out.push('}');
        }
    }
}

fn write_json_str(s: &str, out: &mut bumpalo::collections::String<'_>) {
    escape(out, s);
}

/// Where escaped JSON goes: an output buffer, or a string in the arena.
pub(crate) trait PushStr {
    /// Appends `s[start..end]`; both are char boundaries of `s`.
    fn push_part(&mut self, s: &str, start: usize, end: usize);
    /// Appends ASCII bytes.
    fn push_ascii(&mut self, b: &[u8]);
    fn reserve(&mut self, n: usize);
    /// Appends the escaped bytes of `s`, without quotes.
    fn push_escaped(&mut self, s: &str);
}

impl PushStr for Vec<u8> {
    #[inline(always)]
    fn push_part(&mut self, s: &str, start: usize, end: usize) {
        self.extend_from_slice(&s.as_bytes()[start..end]);
    }
    #[inline(always)]
    fn push_ascii(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }
    #[inline]
    fn push_escaped(&mut self, s: &str) {
        #[cfg(target_arch = "x86_64")]
        for chunk in s.as_bytes().chunks(ESCAPE_CHUNK) {
            self.reserve(escaped_room(chunk.len()));
            let len = self.len();
            #[allow(unsafe_code)]
            // SAFETY: the spare capacity after `len` holds at least
            // `escaped_room(chunk.len())` bytes, all that the escape may
            // write; it writes `n` initialised bytes from `len` on, which
            // the new length covers. SSE2 is part of every x86_64 target.
            unsafe {
                let n = escape_chunk_sse2(chunk, self.as_mut_ptr().add(len));
                self.set_len(len + n);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        escape_parts(self, s);
    }
}

impl PushStr for bumpalo::collections::String<'_> {
    fn push_part(&mut self, s: &str, start: usize, end: usize) {
        self.push_str(&s[start..end]);
    }
    fn push_ascii(&mut self, b: &[u8]) {
        for c in b {
            self.push(char::from(*c));
        }
    }
    fn reserve(&mut self, n: usize) {
        bumpalo::collections::String::reserve(self, n);
    }
    #[inline]
    fn push_escaped(&mut self, s: &str) {
        #[cfg(target_arch = "x86_64")]
        for chunk in char_chunks(s, ARENA_ESCAPE_CHUNK) {
            self.reserve(escaped_room(chunk.len()));
            #[allow(unsafe_code)]
            // SAFETY: as for `Vec<u8>` above. The bytes appended are the
            // chunk's, whole chars, with ASCII escapes in place of ASCII
            // bytes: the string is UTF-8 after each chunk.
            unsafe {
                let v = self.as_mut_vec();
                let len = v.len();
                let n = escape_chunk_sse2(chunk.as_bytes(), v.as_mut_ptr().add(len));
                v.set_len(len + n);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        escape_parts(self, s);
    }
}

/// The input escaped per reservation of the output: a bound on the room
/// reserved at a time (six times as much, at worst), whatever the length
/// of a text.
#[cfg(target_arch = "x86_64")]
const ESCAPE_CHUNK: usize = 4096;

/// The same for a string in the arena, which never gives room back: the
/// room left unused after a short value is a few hundred bytes, not 24 KiB.
#[cfg(target_arch = "x86_64")]
const ARENA_ESCAPE_CHUNK: usize = 256;

/// `s` cut into pieces of at most `max` bytes (at least 4), each ending
/// on a char boundary.
#[cfg(target_arch = "x86_64")]
fn char_chunks(s: &str, max: usize) -> impl Iterator<Item = &str> {
    let mut rest = s;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (chunk, after) = rest.split_at(end);
        rest = after;
        Some(chunk)
    })
}

/// The room the escape of `n` bytes may write: six bytes for each
/// (`\u00XX`), and the sixteen of one store past them.
#[cfg(target_arch = "x86_64")]
fn escaped_room(n: usize) -> usize {
    6 * n + 16
}

/// Escapes `src` into `dst`, returning the bytes written. Sixteen bytes
/// are checked at a time; in a block with bytes to escape, the bytes
/// between them are stored sixteen at a time from the input (each store
/// covers the run up to the next escape, later stores write over the
/// rest), and each escape is written from [`ESCAPED`], eight bytes at once,
/// of which its length counts. Text with code in it has an escape every
/// ten to twenty bytes: an escape loop that pushed the parts between them
/// was a sixth of a `backfill`, and one that loaded the input again after
/// each escape waited on that load.
///
/// # Safety
/// `dst` is valid for writes of [`escaped_room`]`(src.len())` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[allow(unsafe_code)]
unsafe fn escape_chunk_sse2(src: &[u8], dst: *mut u8) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_storeu_si128,
    };
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let below = _mm_set1_epi8(0x1f);
    let n = src.len();
    let at = |i: usize| src.as_ptr().wrapping_add(i).cast::<__m128i>();
    // Written bytes `o` never pass six per byte read (`p + from`): a store
    // of 16 at `o` ends by `6 * i + 16`, one of 8 by `6 * i + 8`, both
    // within `escaped_room(n)` while `i <= n`.
    let (mut p, mut o) = (0, 0);
    // Blocks whose runs may be loaded 16 bytes from anywhere in them.
    while p + 32 <= n {
        // SAFETY: `p + 16 <= n`; room for 16 at `o` (above).
        let v = unsafe { _mm_loadu_si128(at(p)) };
        unsafe { _mm_storeu_si128(dst.add(o).cast::<__m128i>(), v) };
        let m = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
            // min(v, 0x1f) == v: v <= 0x1f, unsigned.
            _mm_cmpeq_epi8(_mm_min_epu8(v, below), v),
        );
        let mut mask = _mm_movemask_epi8(m) as u32;
        if mask == 0 {
            p += 16;
            o += 16;
            continue;
        }
        // The block's bytes from `from` are not written yet.
        let mut from = 0;
        loop {
            let k = mask.trailing_zeros() as usize;
            o += k - from;
            let (bytes, len) = ESCAPED[usize::from(src[p + k])];
            // SAFETY: room for 8 at `o` (above).
            unsafe { dst.add(o).cast::<u64>().write_unaligned(bytes) };
            o += usize::from(len);
            from = k + 1;
            // SAFETY: `p + from + 16 <= p + 32 <= n`; room for 16 at `o`.
            unsafe {
                _mm_storeu_si128(dst.add(o).cast::<__m128i>(), _mm_loadu_si128(at(p + from)))
            };
            mask &= mask - 1;
            if mask == 0 {
                break;
            }
        }
        o += 16 - from;
        p += 16;
    }
    for &c in &src[p..] {
        let (bytes, len) = ESCAPED[usize::from(c)];
        // SAFETY: room for 8 at `o` (above: this byte is before `n`).
        unsafe { dst.add(o).cast::<u64>().write_unaligned(bytes) };
        o += usize::from(len);
    }
    o
}

/// Each byte as it is written in a JSON string: its bytes (little-endian,
/// the first in the low byte) and their number: the byte itself, or its
/// escape.
#[cfg(target_arch = "x86_64")]
const ESCAPED: [(u64, u8); 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut t = [(0u64, 0u8); 256];
    let mut c = 0;
    while c < 256 {
        let e = ESCAPE[c];
        t[c] = match e {
            0 => (c as u64, 1),
            b'u' => (
                u64::from_le_bytes([b'\\', b'u', b'0', b'0', HEX[c >> 4], HEX[c & 0xf], 0, 0]),
                6,
            ),
            _ => (u64::from_le_bytes([b'\\', e, 0, 0, 0, 0, 0, 0]), 2),
        };
        c += 1;
    }
    t
};

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
/// JSON.stringify) escape: `"`, `\\` and control characters; on x86_64
/// sixteen bytes at a time ([`escape_chunk_sse2`]), elsewhere by
/// [`escape_parts`]. The one escaper of the crate: record lines and
/// tool-call arguments alike.
pub(crate) fn escape(out: &mut impl PushStr, s: &str) {
    out.reserve(s.len() + 2);
    out.push_ascii(b"\"");
    out.push_escaped(s);
    out.push_ascii(b"\"");
}

/// The escape of `s` (no quotes) as the parts between the bytes to escape
/// and their escapes, pushed one by one: the portable path, and the
/// reference of the SSE2 one's tests.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn escape_parts(out: &mut impl PushStr, s: &str) {
    let b = s.as_bytes();
    let mut start = 0;
    let mut i = next_special(b, 0);
    while i < b.len() {
        escape_at(out, s, i, &mut start);
        i = next_special(b, i + 1);
    }
    out.push_part(s, start, b.len());
}

/// Whether byte `c` is escaped: below 0x20, a quote or a backslash.
fn special(c: u8) -> bool {
    ESCAPE[usize::from(c)] != 0
}

/// The index of the first byte from `i` on that is escaped, else
/// `b.len()`; eight bytes at a time, in a u64 (the portable path: x86_64
/// escapes with [`escape_chunk_sse2`]).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn next_special(b: &[u8], mut i: usize) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // High bits of the bytes of `w` below 0x20, quotes or backslashes (the
    // lowest one exact; above it, maybe false positives).
    let flagged = |w: u64| {
        let q = w ^ (LO * u64::from(b'"'));
        let b = w ^ (LO * u64::from(b'\\'));
        let below = w.wrapping_sub(LO * 0x20) & !w;
        (below | (q.wrapping_sub(LO) & !q) | (b.wrapping_sub(LO) & !b)) & HI
    };
    while let Some(c) = b.get(i..i + 8) {
        let m = flagged(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + b[i.min(b.len())..]
        .iter()
        .take_while(|c| !special(**c))
        .count()
}

/// Escapes byte `k` of `s` when it needs it, after the bytes from `start`.
/// Escaped bytes are ASCII: every cut is a char boundary.
#[inline(always)]
fn escape_at(out: &mut impl PushStr, s: &str, k: usize, start: &mut usize) {
    let c = s.as_bytes()[k];
    let e = ESCAPE[usize::from(c)];
    if e == 0 {
        return;
    }
    out.push_part(s, *start, k);
    if e == b'u' {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let hex = [
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(c >> 4)],
            HEX[usize::from(c & 0xf)],
        ];
        out.push_ascii(&hex);
    } else {
        out.push_ascii(&[b'\\', e]);
    }
    *start = k + 1;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// xorshift64: the tests' reproducible random numbers.
    pub(crate) fn rng(mut x: u64) -> impl FnMut() -> u64 {
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
        assert_eq!(
            (
                LineHash::from_id(1),
                LineHash::from_id(2),
                LineHash::from_id(3)
            ),
            (Some(LineHash::Serial), Some(LineHash::Wide), None)
        );
        assert_eq!((LineHash::Serial.id(), LineHash::Wide.id()), (1, 2));
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
