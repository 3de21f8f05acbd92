//! The lean parse: what a run that builds no record (`stats`) parses a
//! line with. It validates the whole line as simd-json does (UTF-8, the
//! grammar, every escape) and builds the same tape, except that a value
//! string holding escapes stays as its raw bytes on the tape, decoded only
//! when it is read ([`value`]): `stats` reads a few short fields of a line
//! (type, role, ids, timestamp, usage) and never its text, which is where
//! nearly all the escapes are. simd-json unescapes every string in place,
//! and that copy was the largest part of its time.
//!
//! It takes only the lines it is sure of: an object or array at the top,
//! at most [`MAX_DEPTH`] deep, integers of at most 18 digits, finite
//! floats, no raw control byte in a string, no lone surrogate escape.
//! Anything else (rare in real sessions) is left to simd-json and the
//! repair path ([`crate::json::JsonParser`]), so that a skipped line's
//! reason and a repaired line's count are exactly as before. Where it
//! takes a line, simd-json takes it too, with the same tape once the raw
//! strings are decoded: the tests and the `line` fuzz target compare the
//! two on every input.

use std::cell::Cell;
use std::marker::PhantomData;

use bumpalo::Bump;
use simd_json::{Node, StaticNode};

/// The deepest nesting taken (simd-json's own limit is 1024; real session
/// lines nest about ten deep).
pub const MAX_DEPTH: usize = 128;

/// Parses `line`, a copy in `arena`, onto `tape`; `false` when the line is
/// not one this parse takes (the tape is then to be cleared and discarded).
///
/// With `odd`, it gets the place (after its opening quote) of each value
/// string whose escapes are not all ones [`crate::json::escape`] writes
/// itself (see [`canonical`]), in order; without, that look is not taken
/// (`stats`).
pub fn parse<'a>(
    line: &'a [u8],
    arena: &'a Bump,
    tape: &mut Vec<Node<'a>>,
    odd: Option<&mut Vec<usize>>,
) -> bool {
    parse_with(line, arena, tape, odd, scan())
}

/// [`parse`], with the block scans of `scan` ([`scan`] or a lesser one).
fn parse_with<'a>(
    line: &'a [u8],
    arena: &'a Bump,
    tape: &mut Vec<Node<'a>>,
    odd: Option<&mut Vec<usize>>,
    scan: u8,
) -> bool {
    tape.clear();
    // The AVX-512 scans check each string's UTF-8 as they scan it (the
    // only bytes of a line that may be other than ASCII: the grammar
    // takes none elsewhere); the others, the whole line first.
    if scan != SCAN_AVX512 && simdutf8::basic::from_utf8(line).is_err() {
        return false;
    }
    match odd {
        Some(odd) => {
            odd.clear();
            parse_noting::<true>(line, arena, tape, odd, scan)
        }
        None => parse_noting::<false>(line, arena, tape, &mut Vec::new(), scan),
    }
}

/// [`parse_with`] of a line that is valid UTF-8 (or, with AVX-512's
/// scans, whose strings are checked as they are scanned), noting odd
/// strings in `odd` when `NOTE`.
fn parse_noting<'a, const NOTE: bool>(
    line: &'a [u8],
    arena: &'a Bump,
    tape: &mut Vec<Node<'a>>,
    odd: &mut Vec<usize>,
    scan: u8,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if scan == SCAN_AVX512 {
        let mut p = Parser::<NOTE, SCAN_AVX512> {
            b: line,
            arena,
            tape,
            odd,
        };
        #[allow(unsafe_code)]
        // SAFETY: AVX-512 (F, BW) and AVX2 are there (`scan()`).
        return unsafe { p.run_avx512() }.is_some();
    }
    #[cfg(target_arch = "x86_64")]
    if scan == SCAN_AVX2 {
        let mut p = Parser::<NOTE, SCAN_AVX2> {
            b: line,
            arena,
            tape,
            odd,
        };
        #[allow(unsafe_code)]
        // SAFETY: AVX2 is there (`scan()`).
        return unsafe { p.run_avx2() }.is_some();
    }
    let mut p = Parser::<NOTE, SCAN_BYTES> {
        b: line,
        arena,
        tape,
        odd,
    };
    p.run().is_some()
}

/// The block scans of a parse: a byte at a time (the portable ones, and
/// the reference of the vector ones' tests), AVX2's, or AVX-512's (BW:
/// a 64-byte block's masks from one load and one compare each, where AVX2
/// takes two loads, two compares and two `movemask`s joined).
const SCAN_BYTES: u8 = 0;
const SCAN_AVX2: u8 = 1;
const SCAN_AVX512: u8 = 2;

/// The widest block scan that can run here.
fn scan() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::atomic::{AtomicU8, Ordering};
        // Asked for every line: the answer is kept (0xff: not yet asked).
        static SCAN: AtomicU8 = AtomicU8::new(0xff);
        let s = SCAN.load(Ordering::Relaxed);
        if s != 0xff {
            return s;
        }
        let s = if std::env::var_os("MEM_INGEST_NO_AVX512").is_none()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && avx2()
        {
            SCAN_AVX512
        } else if avx2() {
            SCAN_AVX2
        } else {
            SCAN_BYTES
        };
        SCAN.store(s, Ordering::Relaxed);
        s
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        SCAN_BYTES
    }
}

/// Whether the AVX2 block scan can run.
fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

thread_local! {
    /// The line a lean tape's raw strings are in (its first and one past
    /// its last byte's address) and the arena its values are decoded into,
    /// while that tape is read ([`Reading`]); `(0, 0, null)` otherwise.
    static READING: Cell<(usize, usize, *const Bump)> =
        const { Cell::new((0, 0, std::ptr::null())) };
}

/// The places of a lean tape's odd strings ([`parse`]'s `odd`), as a
/// slice's address and length.
type Odd = (*const usize, usize);

thread_local! {
    /// Whether the tape being read leaves record text raw ([`defers_text`]),
    /// and the places of its odd strings ([`canonical`]).
    static RAW_TEXT: Cell<Option<Odd>> = const { Cell::new(None) };
}

/// While it lives, [`value`] decodes the raw strings of the lean tape
/// parsed from `line` into `arena`, and with `raw_text` (the places of
/// the tape's odd strings, [`parse`]), [`defers_text`] says so; the one
/// before it is restored when it drops.
pub struct Reading<'a> {
    before: (usize, usize, *const Bump),
    raw_text_before: Option<Odd>,
    _borrows: PhantomData<&'a [usize]>,
}

impl<'a> Reading<'a> {
    pub fn new(line: &'a [u8], arena: &'a Bump, raw_text: Option<&'a [usize]>) -> Self {
        let start = line.as_ptr() as usize;
        let now = (start, start + line.len(), arena as *const Bump);
        Reading {
            before: READING.with(|r| r.replace(now)),
            raw_text_before: RAW_TEXT.with(|r| r.replace(raw_text.map(|o| (o.as_ptr(), o.len())))),
            _borrows: PhantomData,
        }
    }
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        READING.with(|r| r.set(self.before));
        RAW_TEXT.with(|r| r.set(self.raw_text_before));
    }
}

/// Whether the lean tape being read leaves a record's text raw: a
/// mapping may then build a record's text escaped, from raw strings of the
/// tape ([`crate::line::Text`]), for the writer that copies it
/// ([`crate::json::ParsedLine::write_str`]); every other string it reads
/// through [`value`]. False outside a [`Reading`] made so.
pub fn defers_text() -> bool {
    RAW_TEXT.with(Cell::get).is_some()
}

/// Whether `raw`, a raw string of the lean tape being read with raw text
/// ([`defers_text`]), holds only escapes that [`crate::json::escape`]
/// writes itself, so that it is, as it is, what that escape writes for the
/// text it decodes to: the parse noted the others ([`parse`]'s `odd`).
/// Any other string is looked at byte by byte
/// ([`crate::json::canonical`]).
pub fn canonical(raw: &str) -> bool {
    noted_written(raw).unwrap_or_else(|| super::escape::canonical(raw.as_bytes()))
}

/// Whether `s` is a raw string of the lean tape being read with raw text
/// ([`defers_text`]) that is, as it is, what [`crate::json::escape`]
/// writes (between quotes) for the text it decodes to: a writer may then
/// copy it. False for any other string.
#[inline]
pub fn raw_written(s: &str) -> bool {
    noted_written(s) == Some(true)
}

/// For a string of the line whose lean tape is being read with raw text:
/// whether the parse did not note it odd; `None` for any other string.
fn noted_written(s: &str) -> Option<bool> {
    let (start, end, _) = READING.with(Cell::get);
    let (odd, len) = RAW_TEXT.with(Cell::get)?;
    let at = s.as_ptr() as usize;
    if at < start || at >= end {
        return None;
    }
    // SAFETY: the slice that `Reading` was made with, borrowed (shared)
    // for as long as that `Reading` lives (its lifetime), which is while
    // this is set.
    #[allow(unsafe_code)]
    let odd = unsafe { std::slice::from_raw_parts(odd, len) };
    Some(odd.binary_search(&(at - start)).is_err())
}

/// A string of a tape as its value: `s` itself, or, when it is a raw
/// string of the lean tape being read that holds escapes, its decoded text
/// in that tape's arena.
#[inline]
pub fn value<'a>(s: &'a str) -> &'a str {
    let (start, end, arena) = READING.with(Cell::get);
    let at = s.as_ptr() as usize;
    if at < start || at >= end {
        return s;
    }
    let Some(first) = backslash_in(s.as_bytes()) else {
        return s;
    };
    // SAFETY: `s` lies in the line that `Reading` was made for, which is
    // borrowed for as long as the arena it was given with (one lifetime in
    // `Reading::new`), so that arena is alive and borrowed (shared) for
    // `'a`: it is neither reset nor dropped while `'a` lasts, and what is
    // allocated in it now lives as long. `Reading` lives on this thread only (`Bump` is
    // not `Sync`: the pointer never leaves the thread it was set on).
    #[allow(unsafe_code)]
    let arena: &'a Bump = unsafe { &*arena };
    unescape_at(s, first, arena, avx2())
}

/// The first backslash of `b`: eight bytes a step for the short strings
/// most reads are of (a type, a timestamp, an id), where `memchr`'s
/// dispatch and setup cost more than the bytes (a byte a step cost a
/// 24-byte timestamp about 90 instructions); `memchr` for longer ones.
#[inline(always)]
fn backslash_in(b: &[u8]) -> Option<usize> {
    if b.len() >= 32 {
        return memchr::memchr(b'\\', b);
    }
    if b.len() < 8 {
        return b.iter().position(|&c| c == b'\\');
    }
    // The words at 0, 8, 16 (those that fit), then the last 8 bytes (over
    // the one before where the length is not a multiple of 8).
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let mut at = 0;
    loop {
        if let Some(k) = backslash_in_word(word(at)) {
            return Some(at + k);
        }
        if at + 8 == b.len() {
            return None;
        }
        at = (at + 8).min(b.len() - 8);
    }
}

/// The place of the first backslash among a word's eight bytes (in
/// memory order): the lowest byte of `w ^ 0x5c5c..` that is zero. The
/// borrow of the subtraction only runs upwards, so the lowest flagged
/// byte is a true zero (a byte above it may be flagged falsely).
#[inline(always)]
fn backslash_in_word(w: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let x = w ^ (ONES * u64::from(b'\\'));
    let zero = x.wrapping_sub(ONES) & !x & HIGH;
    (zero != 0).then(|| zero.trailing_zeros() as usize / 8)
}

/// The text of a raw JSON string that the lean parse validated (its
/// escapes are all well formed, surrogates paired).
pub fn unescape<'a>(raw: &str, arena: &'a Bump) -> &'a str {
    match backslash_in(raw.as_bytes()) {
        Some(first) => unescape_at(raw, first, arena, avx2()),
        None => arena.alloc_str(raw),
    }
}

/// [`unescape`] of `raw`, whose first backslash is at `first`, into fresh
/// bytes of `arena`.
fn unescape_at<'a>(raw: &str, first: usize, arena: &'a Bump, avx2: bool) -> &'a str {
    let room = std::alloc::Layout::array::<u8>(raw.len() + 32).expect("a line's length");
    let dst = arena.alloc_layout(room).as_ptr();
    // SAFETY: `dst` has `raw.len() + 32` bytes, alive and unshared for
    // `'a`; `unescape_to` writes UTF-8 there (its first `n` bytes).
    #[allow(unsafe_code)]
    unsafe {
        let n = unescape_to(raw, first, dst, avx2);
        std::str::from_utf8_unchecked(std::slice::from_raw_parts(dst, n))
    }
}

/// Writes the text of `raw` (its first backslash at `first`) at `dst`, 32
/// bytes at a time with AVX2 (`avx2`, where it is there), else a byte at a
/// time; returns its length. The bytes written are `raw`'s runs between
/// escapes (each from and to a character boundary) and whole characters:
/// UTF-8.
///
/// # Safety
/// `dst` is valid for writes of `raw.len() + 32` bytes that overlap
/// nothing borrowed.
#[allow(unsafe_code)]
unsafe fn unescape_to(raw: &str, first: usize, dst: *mut u8, avx2: bool) -> usize {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        // SAFETY: AVX2 is there (`avx2()`); `dst` as this function's.
        return unsafe { unescape_avx2(raw.as_bytes(), first, dst) };
    }
    let _ = avx2;
    // SAFETY: as this function's.
    unsafe { unescape_bytes(raw.as_bytes(), first, dst) }
}

/// The character of the escape after a backslash (`esc` starts after it)
/// and how many of `esc`'s bytes it takes. Its UTF-8 is never longer than
/// the escape (the backslash included), which is what lets a text be
/// written over room the size of its raw string: a malformed escape
/// (never in a string the lean parse took) gives U+FFFD where its six
/// bytes are there, else the backslash itself.
#[inline(always)]
fn escape_at(esc: &[u8]) -> (char, usize) {
    match esc.first() {
        Some(&c) if SHORT[usize::from(c)] != 0 => (char::from(SHORT[usize::from(c)]), 1),
        Some(b'u') if esc.len() >= 5 => {
            let hi = hex4(esc.get(1..5)).unwrap_or(0xFFFD);
            let pair = (0xD800..0xDC00).contains(&hi) && esc.len() >= 11;
            let lo = if pair {
                hex4(esc.get(7..11)).unwrap_or(0xDC00)
            } else {
                0
            };
            let cp = if pair {
                0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF)
            } else {
                hi
            };
            (
                char::from_u32(cp).unwrap_or('\u{FFFD}'),
                if pair { 11 } else { 5 },
            )
        }
        // Another ASCII byte: no escape JSON has.
        Some(&c) if c.is_ascii() && c != b'u' => (char::from(c), 1),
        _ => ('\\', 0),
    }
}

/// The character of each two-byte escape by its letter (`\n`: `\n`), 0
/// for the others.
static SHORT: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t
};

/// [`unescape_to`] 32 bytes at a time: each block is copied whole, and
/// the copy goes on from its first backslash.
///
/// # Safety
/// AVX2 is there; `dst` as [`unescape_to`]'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn unescape_avx2(src: &[u8], first: usize, dst: *mut u8) -> usize {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
        _mm256_storeu_si256,
    };
    let n = src.len();
    let first = first.min(n);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    // SAFETY (every write below): the text is never longer than its raw
    // string (each escape's character takes fewer bytes than the escape),
    // so it is written at `j <= i <= n`: at most 32 bytes (a block, at
    // `i + 32 <= n`) or 4 (a character), within `n + 32`.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, first) };
    let (mut i, mut j) = (first, first);
    while i < n {
        // `src[i]` is a backslash.
        let short = src.get(i + 1).map_or(0, |&c| SHORT[usize::from(c)]);
        if short != 0 {
            // SAFETY: 1 byte at `j`, see above.
            unsafe { *dst.add(j) = short };
            j += 1;
            i += 2;
        } else {
            let (c, used) = escape_at(&src[i + 1..]);
            // SAFETY: 4 bytes at `j`, see above.
            let room = unsafe { std::slice::from_raw_parts_mut(dst.add(j), 4) };
            j += c.encode_utf8(room).len();
            i += 1 + used;
        }
        loop {
            if i + 32 <= n {
                // SAFETY: 32 bytes of `src` at `i`; 32 written at `j`.
                let v = unsafe { _mm256_loadu_si256(src.as_ptr().add(i).cast::<__m256i>()) };
                unsafe { _mm256_storeu_si256(dst.add(j).cast::<__m256i>(), v) };
                let m = _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, backslash)) as u32;
                if m == 0 {
                    i += 32;
                    j += 32;
                    continue;
                }
                let k = m.trailing_zeros() as usize;
                i += k;
                j += k;
            } else {
                let k = memchr::memchr(b'\\', &src[i..]).unwrap_or(n - i);
                // SAFETY: `k` bytes of `src` at `i`, written at `j <= i`.
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(j), k) };
                i += k;
                j += k;
            }
            break;
        }
    }
    j
}

/// [`unescape_to`] a byte at a time (the portable path, and the reference
/// the AVX2 one is tested against).
///
/// # Safety
/// As [`unescape_to`]'s.
#[allow(unsafe_code)]
unsafe fn unescape_bytes(src: &[u8], first: usize, dst: *mut u8) -> usize {
    let n = src.len();
    let mut i = first.min(n);
    // SAFETY (every write): at `j <= i`, as in `unescape_avx2`.
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, i) };
    let mut j = i;
    while i < n {
        // `src[i]` is a backslash.
        let (c, used) = escape_at(&src[i + 1..]);
        let mut utf8 = [0; 4];
        let c = c.encode_utf8(&mut utf8).as_bytes();
        unsafe { std::ptr::copy_nonoverlapping(c.as_ptr(), dst.add(j), c.len()) };
        j += c.len();
        i += 1 + used;
        let k = memchr::memchr(b'\\', &src[i..]).unwrap_or(n - i);
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(j), k) };
        i += k;
        j += k;
    }
    j
}

/// The value of four hex digits: each digit's value from a table, one
/// test for any byte that is not a digit (every `\u` escape is checked
/// so: terminal colours in tool output are a `\u001b` each).
#[inline]
fn hex4(b: Option<&[u8]>) -> Option<u32> {
    let &[a, b, c, d] = b? else { return None };
    let [a, b, c, d] = [a, b, c, d].map(|x| HEX[usize::from(x)]);
    if (a | b | c | d) & 0x80 != 0 {
        return None;
    }
    Some(u32::from(a) << 12 | u32::from(b) << 8 | u32::from(c) << 4 | u32::from(d))
}

/// Each byte's value as a hex digit (`0-9`, `a-f`, `A-F`); 0xff for any
/// other byte.
static HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// The parse of one line; its block scans are `SCAN`'s (a constant, not a
/// field: the scans of every string of a line, and of each 64-byte block
/// of a long one, asked a field whether AVX2 is there, and such a parser is
/// made only where its scans can run).
struct Parser<'a, 't, const NOTE: bool, const SCAN: u8> {
    b: &'a [u8],
    arena: &'a Bump,
    tape: &'t mut Vec<Node<'a>>,
    odd: &'t mut Vec<usize>,
}

#[inline(always)]
fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\r' | b'\n') = b.get(i) {
        i += 1;
    }
    i
}

/// Whether `c` may follow a scalar value inside a container.
#[inline(always)]
fn ends_scalar(c: Option<&u8>) -> bool {
    matches!(c, Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n'))
}

impl<'a, const NOTE: bool, const SCAN: u8> Parser<'a, '_, NOTE, SCAN> {
    /// [`Parser::run`] compiled for AVX-512 (F, BW), the block scans
    /// inlined in it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,avx512f,avx512bw")]
    #[allow(unsafe_code)]
    unsafe fn run_avx512(&mut self) -> Option<()> {
        self.run()
    }

    /// [`Parser::run`] compiled for AVX2, the block scans inlined in it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[allow(unsafe_code)]
    unsafe fn run_avx2(&mut self) -> Option<()> {
        self.run()
    }

    #[inline(always)]
    fn run(&mut self) -> Option<()> {
        let b = self.b;
        // The open containers are a list through the tape: the innermost
        // one's node is at `open`, and while it is open its `len` counts
        // its pairs or elements so far and its `count` is the place of the
        // one it is in (no stack to set up for each line).
        let (mut open, mut depth) = (usize::MAX, 0);
        let mut i = ws(b, 0);
        if !matches!(b.get(i), Some(b'{' | b'[')) {
            return None;
        }
        'value: loop {
            match *b.get(i)? {
                c @ (b'{' | b'[') => {
                    if depth == MAX_DEPTH {
                        return None;
                    }
                    let object = c == b'{';
                    self.tape.push(if object {
                        Node::Object {
                            len: 0,
                            count: open,
                        }
                    } else {
                        Node::Array {
                            len: 0,
                            count: open,
                        }
                    });
                    open = self.tape.len() - 1;
                    depth += 1;
                    i = ws(b, i + 1);
                    let close = if object { b'}' } else { b']' };
                    if b.get(i) == Some(&close) {
                        i += 1;
                        depth -= 1;
                        open = self.close(open);
                    } else if object {
                        i = self.key(i)?;
                        continue 'value;
                    } else {
                        continue 'value;
                    }
                }
                b'"' => {
                    let (end, _, odd) = self.string(i + 1)?;
                    if NOTE && odd {
                        self.odd.push(i + 1);
                    }
                    let s = self.str_at(i + 1, end);
                    self.tape.push(Node::String(s));
                    i = end + 1;
                }
                b't' => i = self.literal(i, b"true", StaticNode::Bool(true))?,
                b'f' => i = self.literal(i, b"false", StaticNode::Bool(false))?,
                b'n' => i = self.literal(i, b"null", StaticNode::Null)?,
                b'-' | b'0'..=b'9' => i = self.number(i)?,
                _ => return None,
            }
            // A value ended: where it leaves its container.
            loop {
                if depth == 0 {
                    return (ws(b, i) == b.len()).then_some(());
                }
                let object = match &mut self.tape[open] {
                    Node::Object { len, .. } => {
                        *len += 1;
                        true
                    }
                    Node::Array { len, .. } => {
                        *len += 1;
                        false
                    }
                    _ => return None,
                };
                i = ws(b, i);
                match (b.get(i), object) {
                    (Some(b','), object) => {
                        i = ws(b, i + 1);
                        if object {
                            i = self.key(i)?;
                        }
                        continue 'value;
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        i += 1;
                        depth -= 1;
                        open = self.close(open);
                    }
                    _ => return None,
                }
            }
        }
    }

    /// Closes the container whose node is at `at`: writes its node, and
    /// returns the place of the one it is in.
    #[inline(always)]
    fn close(&mut self, at: usize) -> usize {
        let count = self.tape.len() - at - 1;
        match &mut self.tape[at] {
            Node::Object { count: c, .. } | Node::Array { count: c, .. } => {
                std::mem::replace(c, count)
            }
            _ => usize::MAX,
        }
    }

    /// The line's bytes `from..to` (both at ASCII bytes of a line that is
    /// valid UTF-8) as a string.
    fn str_at(&self, from: usize, to: usize) -> &'a str {
        let b: &'a [u8] = self.b;
        let bytes = &b[from..to];
        // SAFETY: the bytes between are valid UTF-8: a number's are ASCII
        // (its first and end byte), a string's (after its quote, to its
        // closing one) are asked for once `string` found its end, and are
        // either part of a line checked whole first (`parse_with`) or,
        // with AVX-512's scans, checked by `string` itself ([`Utf8`]).
        #[allow(unsafe_code)]
        unsafe {
            std::str::from_utf8_unchecked(bytes)
        }
    }

    /// A key at `i` (its quote), then `:`: pushes the key, decoded, and
    /// returns where its value starts.
    #[inline(always)]
    fn key(&mut self, i: usize) -> Option<usize> {
        let b = self.b;
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (end, escaped, _) = self.string(i + 1)?;
        let raw = self.str_at(i + 1, end);
        let key = if escaped {
            unescape(raw, self.arena)
        } else {
            raw
        };
        self.tape.push(Node::String(key));
        let i = ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        Some(ws(b, i + 1))
    }

    #[inline(always)]
    fn literal(&mut self, i: usize, word: &[u8], node: StaticNode) -> Option<usize> {
        let end = i + word.len();
        if self.b.get(i..end) != Some(word) || !ends_scalar(self.b.get(end)) {
            return None;
        }
        self.tape.push(Node::Static(node));
        Some(end)
    }

    /// A number at `i`: the grammar of JSON, then the value simd-json gives
    /// it (an integer as `U64`, or `I64` when negative, `-0` too; a float
    /// correctly rounded, as simd-json's is).
    #[inline(always)]
    fn number(&mut self, i: usize) -> Option<usize> {
        let b = self.b;
        let digit = |j: usize| b.get(j).is_some_and(u8::is_ascii_digit);
        let mut j = i;
        let negative = b[j] == b'-';
        j += usize::from(negative);
        let first = j;
        let mut n: u64 = 0;
        if b.get(j) == Some(&b'0') {
            j += 1;
        } else {
            while digit(j) {
                n = n.wrapping_mul(10).wrapping_add(u64::from(b[j] - b'0'));
                j += 1;
            }
        }
        let digits = j - first;
        if digits == 0 {
            return None;
        }
        let mut float = false;
        if b.get(j) == Some(&b'.') {
            float = true;
            j += 1;
            if !digit(j) {
                return None;
            }
            while digit(j) {
                j += 1;
            }
        }
        if let Some(b'e' | b'E') = b.get(j) {
            float = true;
            j += 1;
            if let Some(b'+' | b'-') = b.get(j) {
                j += 1;
            }
            if !digit(j) {
                return None;
            }
            while digit(j) {
                j += 1;
            }
        }
        // After a leading `0`, a digit is not allowed (`01`): not a
        // terminator, so it is refused here.
        if !ends_scalar(b.get(j)) {
            return None;
        }
        let node = if float {
            let f: f64 = self.str_at(i, j).parse().ok()?;
            if f.is_infinite() {
                return None;
            }
            StaticNode::F64(f)
        } else if digits > 18 {
            return None;
        } else if negative {
            // n < 10^18: it fits.
            StaticNode::I64((n as i64).wrapping_neg())
        } else {
            StaticNode::U64(n)
        };
        self.tape.push(Node::Static(node));
        Some(j)
    }

    /// A string whose contents start at `i`: the place of its closing
    /// quote, whether it holds escapes, and (when `NOTE`) whether one is
    /// not one [`crate::json::escape`] writes (`\/`, or a `\u` other than
    /// a lowercase `\u00xx` for a control byte without a short escape).
    /// `None` for a string simd-json
    /// would refuse (no closing quote, a raw control byte, an escape it
    /// does not know, a `\u` without four hex digits, a lone surrogate) or
    /// the lean parse leaves to it.
    #[inline(always)]
    fn string(&self, i: usize) -> Option<(usize, bool, bool)> {
        let b = self.b;
        // Most strings of a line are short (keys, types, ids, times) and
        // plain: their quote is within 32 bytes, no backslash or control
        // byte before it. One 32-byte look finds such an end, where the
        // block scan below costs a 64-byte block's masks and its escape
        // arithmetic; any other string is scanned by it from the start.
        #[cfg(target_arch = "x86_64")]
        if SCAN != SCAN_BYTES {
            if let Some(head) = b.get(i..i + 32) {
                let head: &[u8; 32] = head.try_into().ok()?;
                #[allow(unsafe_code)]
                // SAFETY: AVX2 is there (a parser with `AVX2` is made only
                // where it is).
                let (quote, special, high) = unsafe { head_avx2(head) };
                // (AVX-512's scans check UTF-8 in the block scan alone.)
                let special = if SCAN == SCAN_AVX512 {
                    special | high
                } else {
                    special
                };
                if quote != 0 {
                    let end = quote.trailing_zeros();
                    if special & ((1u32 << end) - 1) == 0 {
                        return Some((i + end as usize, false, false));
                    }
                }
            }
        }
        let mut p = i;
        // Whether the block before ended inside a backslash run of odd length.
        let mut carry = 0u64;
        // The `u` of the low half of a surrogate pair already checked.
        let mut low = usize::MAX;
        let (mut escapes, mut odd) = (false, false);
        let mut tail;
        #[cfg(target_arch = "x86_64")]
        let mut utf8 = Utf8::new();
        loop {
            let block: &[u8; 64] = match b.get(p..p + 64) {
                Some(s) => s.try_into().ok()?,
                // No closing quote in the line (the last block ended in an
                // escaped quote of the padding).
                None if p >= b.len() => return None,
                None => {
                    // The line's last bytes, then quotes: a quote found
                    // past the line's end is no closing quote.
                    let rest = &b[p..];
                    tail = [b'"'; 64];
                    tail[..rest.len()].copy_from_slice(rest);
                    &tail
                }
            };
            let m = masks(block, SCAN);
            // The bytes a backslash escapes, and whether the block ends in
            // a run of odd length.
            let (escaped, over) = if (m.backslash & m.backslash << 1) | carry == 0 {
                // No backslash follows another (nor the block before's
                // run): each escapes the byte after it (most blocks of a
                // text, whose escapes are `\n`, `\"`, `\t`).
                (m.backslash << 1, m.backslash >> 63 != 0)
            } else {
                escaped_by_runs(m.backslash, carry)
            };
            let quotes = m.quote & !escaped;
            let before = if quotes == 0 {
                u64::MAX
            } else {
                (quotes & quotes.wrapping_neg()) - 1
            };
            if m.control & before != 0 {
                return None;
            }
            #[cfg(target_arch = "x86_64")]
            if SCAN == SCAN_AVX512 {
                #[allow(unsafe_code)]
                // SAFETY: AVX-512 (F, BW) is there (a parser with these
                // scans is made only where it is).
                unsafe {
                    utf8.block(block, before)
                };
            }
            let esc = escaped & before;
            if esc != 0 {
                escapes = true;
                let (known, us) = escape_chars(block, SCAN);
                if esc & !known != 0 {
                    return None;
                }
                if NOTE && !odd {
                    odd = esc & slashes(block, SCAN != SCAN_BYTES) != 0;
                }
                let mut us = esc & us;
                // Most `\u` escapes are terminal colours (`\u001b`), in
                // runs: where each of a block's has four hex digits within
                // the block and is no surrogate (its first digit is no
                // `d`), one look at the block's hex digits checks them all
                // (each alone cost a twentieth of a Codex `stats`).
                if !NOTE && us != 0 && us >> 60 == 0 {
                    let (hex, d) = hex_digits(block, SCAN);
                    let digits = us << 1 | us << 2 | us << 3 | us << 4;
                    if digits & !hex == 0 && us << 1 & d == 0 {
                        us = 0;
                        low = usize::MAX;
                    }
                }
                while us != 0 {
                    let at = p + us.trailing_zeros() as usize;
                    us &= us - 1;
                    if at != low {
                        low = self.unicode(at)?;
                        odd |= NOTE && !written_u(b.get(at + 1..at + 5));
                    }
                }
            }
            if quotes != 0 {
                let end = p + quotes.trailing_zeros() as usize;
                #[cfg(target_arch = "x86_64")]
                #[allow(unsafe_code)]
                // SAFETY: as above.
                if SCAN == SCAN_AVX512 && !unsafe { utf8.valid() } {
                    return None;
                }
                return (end < b.len()).then_some((end, escapes, odd));
            }
            carry = u64::from(over);
            p += 64;
        }
    }

    /// Checks the `\u` escape whose `u` is at `at`: four hex digits, and a
    /// high surrogate followed by a `\u` low one. Returns the place of that
    /// low one's `u` (usize::MAX when there is none).
    #[inline(always)]
    fn unicode(&self, at: usize) -> Option<usize> {
        let b = self.b;
        let cp = hex4(b.get(at + 1..at + 5))?;
        if (0xD800..0xDC00).contains(&cp) {
            if b.get(at + 5..at + 7) != Some(b"\\u") {
                return None;
            }
            let lo = hex4(b.get(at + 7..at + 11))?;
            (0xDC00..0xE000).contains(&lo).then_some(at + 6)
        } else if (0xDC00..0xE000).contains(&cp) {
            None
        } else {
            Some(usize::MAX)
        }
    }
}

/// The bytes of a block that a backslash escapes (those after a run of
/// backslashes of odd length), given its backslashes and `carry` (1: the
/// block before ended inside a run of odd length, so its first byte is
/// escaped), and whether this block ends inside such a run.
#[inline(always)]
fn escaped_by_runs(backslash: u64, carry: u64) -> (u64, bool) {
    let backslash = backslash & !carry;
    let follows = backslash << 1 | carry;
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let odd_starts = backslash & !EVEN & !follows;
    let (runs, over) = odd_starts.overflowing_add(backslash);
    ((EVEN ^ (runs << 1)) & follows, over)
}

/// Whether the four hex digits of a `\u` escape are ones
/// [`crate::json::escape`] writes: `00` then a lowercase code below `0x20`
/// with no short escape.
#[inline(always)]
fn written_u(hex: Option<&[u8]>) -> bool {
    let lower = |c: u8| matches!(c, b'0'..=b'9' | b'a'..=b'f');
    match hex {
        Some(&[b'0', b'0', h @ (b'0' | b'1'), l]) if lower(l) => {
            !(h == b'0' && matches!(l, b'8' | b'9' | b'a' | b'c' | b'd'))
        }
        _ => false,
    }
}

/// `$wide`, `$avx2` or `$bytes` (calls of a block scan's three forms),
/// as `$scan` says.
macro_rules! by_scan {
    ($scan:expr, $wide:expr, $avx2:expr, $bytes:expr) => {{
        #[cfg(target_arch = "x86_64")]
        match $scan {
            #[allow(unsafe_code)]
            // SAFETY: AVX-512 (F, BW) is there (`scan()`).
            SCAN_AVX512 => return unsafe { $wide },
            #[allow(unsafe_code)]
            // SAFETY: AVX2 is there (`scan()`).
            SCAN_AVX2 => return unsafe { $avx2 },
            _ => {}
        }
        let _ = $scan;
        $bytes
    }};
}

/// A 64-byte block's quotes, backslashes and control bytes (below 0x20),
/// one bit per byte.
struct Masks {
    quote: u64,
    backslash: u64,
    control: u64,
}

#[inline(always)]
fn masks(block: &[u8; 64], scan: u8) -> Masks {
    by_scan!(
        scan,
        masks_avx512(block),
        masks_avx2(block),
        masks_bytes(block)
    )
}

/// [`masks`] a byte at a time: the portable path, and the reference of the
/// AVX2 one's tests.
fn masks_bytes(block: &[u8; 64]) -> Masks {
    let mut m = Masks {
        quote: 0,
        backslash: 0,
        control: 0,
    };
    for (k, &c) in block.iter().enumerate() {
        m.quote |= u64::from(c == b'"') << k;
        m.backslash |= u64::from(c == b'\\') << k;
        m.control |= u64::from(c < 0x20) << k;
    }
    m
}

/// Which bytes of a block may follow a backslash (`"\/bfnrt` and `u`),
/// and which are `u`.
#[inline(always)]
fn escape_chars(block: &[u8; 64], scan: u8) -> (u64, u64) {
    by_scan!(
        scan,
        escape_chars_avx512(block),
        escape_chars_avx2(block),
        escape_chars_bytes(block)
    )
}

/// Which bytes of a block are hex digits (`0-9a-fA-F`), and which are `d`
/// or `D` (the first digit of a surrogate's escape).
#[inline(always)]
fn hex_digits(block: &[u8; 64], scan: u8) -> (u64, u64) {
    by_scan!(
        scan,
        hex_digits_avx512(block),
        hex_digits_avx2(block),
        hex_digits_bytes(block)
    )
}

fn hex_digits_bytes(block: &[u8; 64]) -> (u64, u64) {
    let (mut hex, mut d) = (0u64, 0u64);
    for (k, &c) in block.iter().enumerate() {
        hex |= u64::from(c.is_ascii_hexdigit()) << k;
        d |= u64::from(matches!(c, b'd' | b'D')) << k;
    }
    (hex, d)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
#[inline]
unsafe fn hex_digits_avx2(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8, _mm256_sub_epi8,
    };
    let p = block.as_ptr().cast::<__m256i>();
    // SAFETY: both loads' 32 bytes are in the 64-byte block.
    let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
    // `x <= n`, unsigned: min(x, n) == x.
    macro_rules! at_most {
        ($x:expr, $n:expr) => {{
            let x = $x;
            _mm256_cmpeq_epi8(_mm256_min_epu8(x, _mm256_set1_epi8($n)), x)
        }};
    }
    macro_rules! half {
        ($v:expr) => {{
            let v = $v;
            let lower = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
            let digit = at_most!(_mm256_sub_epi8(v, _mm256_set1_epi8(b'0' as i8)), 9);
            let letter = at_most!(_mm256_sub_epi8(lower, _mm256_set1_epi8(b'a' as i8)), 5);
            let d = _mm256_cmpeq_epi8(lower, _mm256_set1_epi8(b'd' as i8));
            (
                u64::from(_mm256_movemask_epi8(_mm256_or_si256(digit, letter)) as u32),
                u64::from(_mm256_movemask_epi8(d) as u32),
            )
        }};
    }
    let ((hex_lo, d_lo), (hex_hi, d_hi)) = (half!(lo), half!(hi));
    (hex_lo | hex_hi << 32, d_lo | d_hi << 32)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[allow(unsafe_code)]
#[inline]
unsafe fn hex_digits_avx512(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmple_epu8_mask, _mm512_loadu_si512,
        _mm512_or_si512, _mm512_set1_epi8, _mm512_sub_epi8,
    };
    // SAFETY: the load's 64 bytes are the block's.
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast::<__m512i>()) };
    let lower = _mm512_or_si512(v, _mm512_set1_epi8(0x20));
    let digit = _mm512_cmple_epu8_mask(
        _mm512_sub_epi8(v, _mm512_set1_epi8(b'0' as i8)),
        _mm512_set1_epi8(9),
    );
    let letter = _mm512_cmple_epu8_mask(
        _mm512_sub_epi8(lower, _mm512_set1_epi8(b'a' as i8)),
        _mm512_set1_epi8(5),
    );
    let d = _mm512_cmpeq_epi8_mask(lower, _mm512_set1_epi8(b'd' as i8));
    (digit | letter, d)
}

/// Which bytes of a block are `/` (rarely asked: only for a block with
/// an escape, of a line whose odd strings are noted).
#[inline(always)]
fn slashes(block: &[u8; 64], avx2: bool) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if avx2 {
        #[allow(unsafe_code)]
        // SAFETY: AVX2 is there (`avx2()`).
        return unsafe { slashes_avx2(block) };
    }
    let _ = avx2;
    slashes_bytes(block)
}

fn slashes_bytes(block: &[u8; 64]) -> u64 {
    let mut m = 0u64;
    for (k, &c) in block.iter().enumerate() {
        m |= u64::from(c == b'/') << k;
    }
    m
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
#[inline]
unsafe fn slashes_avx2(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let p = block.as_ptr().cast::<__m256i>();
    // SAFETY: both loads' 32 bytes are in the 64-byte block.
    let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
    let slash = _mm256_set1_epi8(b'/' as i8);
    u64::from(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, slash)) as u32)
        | u64::from(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, slash)) as u32) << 32
}

fn escape_chars_bytes(block: &[u8; 64]) -> (u64, u64) {
    let (mut known, mut u) = (0u64, 0u64);
    for (k, &c) in block.iter().enumerate() {
        known |= u64::from(matches!(
            c,
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' | b'u'
        )) << k;
        u |= u64::from(c == b'u') << k;
    }
    (known, u)
}

// The AVX2 functions use macros, not closures, for their repeated steps:
// each intrinsic is then compiled inside the function that enables AVX2.

/// 32 bytes' quotes, backslashes and control bytes (below 0x20), each a
/// byte mask (0xff where it is one): what [`masks_avx2`] takes of each half
/// of a block and [`head_avx2`] of a string's head.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
#[inline]
fn classes_avx2(v: std::arch::x86_64::__m256i) -> [std::arch::x86_64::__m256i; 3] {
    use std::arch::x86_64::{_mm256_cmpeq_epi8, _mm256_min_epu8, _mm256_set1_epi8};
    [
        _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8)),
        _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)),
        // min(v, 0x1f) == v: v <= 0x1f, unsigned.
        _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v),
    ]
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
#[inline]
unsafe fn masks_avx2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_movemask_epi8};
    let p = block.as_ptr().cast::<__m256i>();
    // SAFETY: both loads' 32 bytes are in the 64-byte block.
    let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
    let (lo, hi) = (classes_avx2(lo), classes_avx2(hi));
    macro_rules! both {
        ($k:literal) => {
            u64::from(_mm256_movemask_epi8(lo[$k]) as u32)
                | u64::from(_mm256_movemask_epi8(hi[$k]) as u32) << 32
        };
    }
    Masks {
        quote: both!(0),
        backslash: both!(1),
        control: both!(2),
    }
}

/// A string's first 32 bytes' quotes, and its backslashes and control
/// bytes (below 0x20) together, one bit per byte ([`classes_avx2`], two of
/// its masks joined).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
#[inline]
unsafe fn head_avx2(head: &[u8; 32]) -> (u32, u32, u32) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256};
    // SAFETY: the load's 32 bytes are the head's.
    let v = unsafe { _mm256_loadu_si256(head.as_ptr().cast::<__m256i>()) };
    let [quote, backslash, control] = classes_avx2(v);
    (
        _mm256_movemask_epi8(quote) as u32,
        _mm256_movemask_epi8(_mm256_or_si256(backslash, control)) as u32,
        _mm256_movemask_epi8(v) as u32,
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
#[inline]
unsafe fn escape_chars_avx2(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        _mm256_set1_epi8, _mm256_setr_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8,
        _mm256_srli_epi16,
    };
    let p = block.as_ptr().cast::<__m256i>();
    // SAFETY: both loads' 32 bytes are in the 64-byte block.
    let (lo, hi) = unsafe { (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1))) };
    // The nine bytes as a class looked up by nibble (two shuffles, not
    // nine compares): a byte is in it when the bits its low nibble selects
    // and the bits its high nibble selects meet. One bit per high nibble
    // that holds members: 1 for 0x2_ (`"` 22, `/` 2F), 2 for 0x5_ (`\`
    // 5C), 4 for 0x6_ (`b` 62, `f` 66, `n` 6E), 8 for 0x7_ (`r` 72, `t`
    // 74, `u` 75); bytes from 0x80 have high nibbles 8-F, whose bits are 0.
    #[rustfmt::skip]
    let by_low = _mm256_setr_epi8(
        0, 0, 1 | 4 | 8, 0, 8, 8, 4, 0, 0, 0, 0, 0, 2, 0, 4, 1,
        0, 0, 1 | 4 | 8, 0, 8, 8, 4, 0, 0, 0, 0, 0, 2, 0, 4, 1,
    );
    #[rustfmt::skip]
    let by_high = _mm256_setr_epi8(
        0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0,
    );
    let nibble = _mm256_set1_epi8(0x0f);
    let (zero, letter_u) = (_mm256_setzero_si256(), _mm256_set1_epi8(b'u' as i8));
    macro_rules! outside {
        ($v:expr) => {{
            let v = $v;
            let low = _mm256_shuffle_epi8(by_low, _mm256_and_si256(v, nibble));
            let high =
                _mm256_shuffle_epi8(by_high, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble));
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(low, high), zero)) as u32
        }};
    }
    let known = !(u64::from(outside!(lo)) | u64::from(outside!(hi)) << 32);
    let u = u64::from(_mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, letter_u)) as u32)
        | u64::from(_mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, letter_u)) as u32) << 32;
    (known, u)
}

/// [`masks_avx2`] with AVX-512 (BW): the block in one load, each mask one
/// compare.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[allow(unsafe_code)]
#[inline]
unsafe fn masks_avx512(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmple_epu8_mask, _mm512_loadu_si512,
        _mm512_set1_epi8,
    };
    // SAFETY: the load's 64 bytes are the block's.
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast::<__m512i>()) };
    Masks {
        quote: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8)),
        backslash: _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8)),
        control: _mm512_cmple_epu8_mask(v, _mm512_set1_epi8(0x1f)),
    }
}

/// [`escape_chars_avx2`] with AVX-512 (BW): the same class by nibble, over
/// the whole block at once.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[allow(unsafe_code)]
#[inline]
unsafe fn escape_chars_avx512(block: &[u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::{
        __m512i, _mm512_and_si512, _mm512_broadcast_i32x4, _mm512_cmpeq_epi8_mask,
        _mm512_loadu_si512, _mm512_set1_epi8, _mm512_shuffle_epi8, _mm512_srli_epi16,
        _mm512_test_epi8_mask, _mm_setr_epi8,
    };
    // SAFETY: the load's 64 bytes are the block's.
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast::<__m512i>()) };
    // The tables of `escape_chars_avx2`, in each 16-byte lane.
    let by_low = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0,
        0,
        1 | 4 | 8,
        0,
        8,
        8,
        4,
        0,
        0,
        0,
        0,
        0,
        2,
        0,
        4,
        1,
    ));
    let by_high = _mm512_broadcast_i32x4(_mm_setr_epi8(
        0, 0, 1, 0, 0, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0,
    ));
    let nibble = _mm512_set1_epi8(0x0f);
    let low = _mm512_shuffle_epi8(by_low, _mm512_and_si512(v, nibble));
    let high = _mm512_shuffle_epi8(by_high, _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble));
    let known = _mm512_test_epi8_mask(low, high);
    let u = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'u' as i8));
    (known, u)
}

/// The UTF-8 check of a string's bytes, 64 at a time as its block scan
/// reads them, with AVX-512 (BW): the lookup algorithm of simdjson and
/// simdutf8 (Keiser and Lemire, "Validating UTF-8 in less than one
/// instruction per byte", 2021), whose AVX2 form checks the whole line
/// first where the scans are AVX2's. A string's bytes are checked alone:
/// its quotes are ASCII, so a line is valid UTF-8 exactly when each of its
/// strings is (the grammar takes no other byte over 0x7f). The bytes of a
/// block from the string's closing quote on count as zeros (ASCII): a
/// sequence the quote cuts short is an error.
#[cfg(target_arch = "x86_64")]
struct Utf8 {
    /// The block before (zeros at the string's start: its quote).
    prev: std::arch::x86_64::__m512i,
    /// Where the block before ends inside a sequence (non-zero bytes).
    incomplete: std::arch::x86_64::__m512i,
    /// The errors found (non-zero bytes).
    error: std::arch::x86_64::__m512i,
}

#[cfg(target_arch = "x86_64")]
impl Utf8 {
    #[inline(always)]
    fn new() -> Self {
        #[allow(unsafe_code)]
        // SAFETY: zero bits are a vector's value (no intrinsic: this is
        // made in every parser, whatever its scans).
        let zero: std::arch::x86_64::__m512i = unsafe { std::mem::zeroed() };
        Utf8 {
            prev: zero,
            incomplete: zero,
            error: zero,
        }
    }

    /// Checks `block`'s bytes where `content` has a bit (those before the
    /// string's closing quote; the others count as zeros).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[allow(unsafe_code)]
    #[inline]
    unsafe fn block(&mut self, block: &[u8; 64], content: u64) {
        use std::arch::x86_64::{
            __m512i, _mm512_and_si512, _mm512_broadcast_i32x4, _mm512_loadu_si512,
            _mm512_maskz_mov_epi8, _mm512_movepi8_mask, _mm512_or_si512, _mm512_set1_epi8,
            _mm512_setzero_si512, _mm512_shuffle_epi8, _mm512_srli_epi16, _mm512_subs_epu8,
            _mm512_xor_si512, _mm_setr_epi8,
        };
        // SAFETY: the load's 64 bytes are the block's.
        let loaded = unsafe { _mm512_loadu_si512(block.as_ptr().cast::<__m512i>()) };
        let input = _mm512_maskz_mov_epi8(content, loaded);
        if _mm512_movepi8_mask(input) == 0 {
            // ASCII: only a sequence the block before left open is wrong.
            self.error = _mm512_or_si512(self.error, self.incomplete);
            self.incomplete = _mm512_setzero_si512();
            self.prev = input;
            return;
        }
        // Each byte's `n`th byte before it, from this block and the one
        // before (a lane's first bytes are the lane before's last ones).
        macro_rules! before {
            ($n:literal) => {{
                use std::arch::x86_64::{
                    _mm512_alignr_epi8, _mm512_permutex2var_epi64, _mm512_set_epi64,
                };
                let lanes = _mm512_permutex2var_epi64(
                    self.prev,
                    _mm512_set_epi64(13, 12, 11, 10, 9, 8, 7, 6),
                    input,
                );
                _mm512_alignr_epi8::<{ 16 - $n }>(input, lanes)
            }};
        }
        macro_rules! table {
            ($($b:expr),* $(,)?) => {
                _mm512_broadcast_i32x4(_mm_setr_epi8($($b as i8),*))
            };
        }
        const TOO_SHORT: u8 = 1 << 0;
        const TOO_LONG: u8 = 1 << 1;
        const OVERLONG_3: u8 = 1 << 2;
        const TOO_LARGE: u8 = 1 << 3;
        const SURROGATE: u8 = 1 << 4;
        const OVERLONG_2: u8 = 1 << 5;
        const TOO_LARGE_1000: u8 = 1 << 6;
        const OVERLONG_4: u8 = 1 << 6;
        const TWO_CONTS: u8 = 1 << 7;
        const CARRY: u8 = TOO_SHORT | TOO_LONG | TWO_CONTS;
        let nibble = _mm512_set1_epi8(0x0f);
        let high = |v: __m512i| _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
        let prev1 = before!(1);
        #[rustfmt::skip]
        let byte_1_high = _mm512_shuffle_epi8(table!(
            // 0___: ASCII first.
            TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG,
            TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG,
            // 10__: a continuation first.
            TWO_CONTS, TWO_CONTS, TWO_CONTS, TWO_CONTS,
            // 1100, 1101: a two-byte lead.
            TOO_SHORT | OVERLONG_2,
            TOO_SHORT,
            // 1110: a three-byte lead.
            TOO_SHORT | OVERLONG_3 | SURROGATE,
            // 1111: a four-byte lead (or more).
            TOO_SHORT | TOO_LARGE | TOO_LARGE_1000 | OVERLONG_4,
        ), high(prev1));
        #[rustfmt::skip]
        let byte_1_low = _mm512_shuffle_epi8(table!(
            CARRY | OVERLONG_3 | OVERLONG_2 | OVERLONG_4,
            CARRY | OVERLONG_2,
            CARRY,
            CARRY,
            CARRY | TOO_LARGE,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000 | SURROGATE,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
            CARRY | TOO_LARGE | TOO_LARGE_1000,
        ), _mm512_and_si512(prev1, nibble));
        #[rustfmt::skip]
        let byte_2_high = _mm512_shuffle_epi8(table!(
            // 0___: ASCII second.
            TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT,
            TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT,
            // 1000, 1001, 101_: continuations.
            TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE_1000 | OVERLONG_4,
            TOO_LONG | OVERLONG_2 | TWO_CONTS | OVERLONG_3 | TOO_LARGE,
            TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
            TOO_LONG | OVERLONG_2 | TWO_CONTS | SURROGATE | TOO_LARGE,
            // 11__: a lead second.
            TOO_SHORT, TOO_SHORT, TOO_SHORT, TOO_SHORT,
        ), high(input));
        let special = _mm512_and_si512(_mm512_and_si512(byte_1_high, byte_1_low), byte_2_high);
        // A byte two after a three- or four-byte lead, or three after a
        // four-byte one, must be a continuation: where it is, `special`
        // has TWO_CONTS, which this takes out; where it is not, this is an
        // error.
        let third = _mm512_subs_epu8(before!(2), _mm512_set1_epi8((0xe0u8 - 0x80) as i8));
        let fourth = _mm512_subs_epu8(before!(3), _mm512_set1_epi8((0xf0u8 - 0x80) as i8));
        let must = _mm512_and_si512(
            _mm512_or_si512(third, fourth),
            _mm512_set1_epi8(0x80u8 as i8),
        );
        self.error = _mm512_or_si512(self.error, _mm512_xor_si512(must, special));
        // A lead in the last three bytes that needs more than are left:
        // over these (any lead last, a three- or four-byte one second to
        // last, a four-byte one third to last).
        const LAST: [u8; 64] = {
            let mut a = [0xff; 64];
            a[61] = 0xf0 - 1;
            a[62] = 0xe0 - 1;
            a[63] = 0xc0 - 1;
            a
        };
        // SAFETY: the load's 64 bytes are the array's.
        let last = unsafe { _mm512_loadu_si512(LAST.as_ptr().cast::<__m512i>()) };
        self.incomplete = _mm512_subs_epu8(input, last);
        self.prev = input;
    }

    /// Whether no error was found (a sequence the last block left open
    /// is one: the string's quote ends it).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[allow(unsafe_code)]
    #[inline]
    unsafe fn valid(&self) -> bool {
        use std::arch::x86_64::{_mm512_or_si512, _mm512_test_epi8_mask};
        let e = _mm512_or_si512(self.error, self.incomplete);
        _mm512_test_epi8_mask(e, e) == 0
    }
}

/// Parses `line` with the lean parse (both its AVX2 and its portable block
/// scans, where AVX2 is there) and with simd-json, and compares: `Ok(true)`
/// when the lean parse took the line and simd-json gives the same tape
/// (raw strings decoded; floats bit for bit), `Ok(false)` when the lean
/// parse left it to simd-json, `Err` with what differs otherwise. For the
/// tests and the `line` fuzz target.
#[doc(hidden)]
pub fn agrees_with_simd_json(line: &[u8]) -> Result<bool, String> {
    let arena = Bump::new();
    let copy: &[u8] = arena.alloc_slice_copy(line);
    let (mut lean, mut odd) = (Vec::new(), Vec::new());
    let took = parse_with(copy, &arena, &mut lean, Some(&mut odd), scan());
    let (mut portable, mut portable_odd) = (Vec::new(), Vec::new());
    if parse_with(
        copy,
        &arena,
        &mut portable,
        Some(&mut portable_odd),
        SCAN_BYTES,
    ) != took
    {
        return Err("the vector and the portable scans disagree on taking it".to_owned());
    }
    if scan() == SCAN_AVX512 {
        let (mut narrow, mut narrow_odd) = (Vec::new(), Vec::new());
        if parse_with(copy, &arena, &mut narrow, Some(&mut narrow_odd), SCAN_AVX2) != took
            || (took && (narrow != lean || narrow_odd != odd))
        {
            return Err("the AVX-512 and the AVX2 scans differ".to_owned());
        }
    }
    let mut unnoted = Vec::new();
    if parse_with(copy, &arena, &mut unnoted, None, scan()) != took || (took && unnoted != lean) {
        return Err("the parse noting odd strings and the one not differ".to_owned());
    }
    if !took {
        return Ok(false);
    }
    if odd != portable_odd {
        return Err(format!(
            "odd strings: AVX2 {odd:?}, portable {portable_odd:?}"
        ));
    }
    let reading = Reading::new(copy, &arena, None);
    // Every string of the line (the keys without escapes too): noted odd
    // exactly when its escapes are not all the escape's own, and when they
    // are, it is what the escape writes for its text.
    let start = copy.as_ptr() as usize;
    for n in &lean {
        let Node::String(s) = n else { continue };
        let at = (s.as_ptr() as usize).wrapping_sub(start);
        if at >= copy.len() {
            continue;
        }
        let noted = odd.binary_search(&at).is_ok();
        if noted == super::escape::canonical(s.as_bytes()) {
            return Err(format!("string at {at} {s:?} noted odd: {noted}"));
        }
        if !noted {
            let mut written = Vec::new();
            super::escape::escape(&mut written, value(s));
            if written[1..written.len() - 1] != *s.as_bytes() {
                return Err(format!(
                    "{s:?} taken as written, the escape writes {written:?}"
                ));
            }
        }
    }
    let decode = |tape: &[Node<'_>]| -> Vec<String> {
        tape.iter()
            .map(|n| match n {
                Node::String(s) => format!("String({:?})", value(s)),
                Node::Static(StaticNode::F64(f)) => format!("F64({:#x})", f.to_bits()),
                other => format!("{other:?}"),
            })
            .collect()
    };
    let (lean, portable) = (decode(&lean), decode(&portable));
    drop(reading);
    if lean != portable {
        return Err(format!("AVX2 {lean:?}, portable {portable:?}"));
    }
    let mut tape = simd_json::Tape::null();
    let mut buffers = simd_json::Buffers::default();
    if let Err(e) = super::simd::parse_padded(&mut buffers, &mut tape, &arena, line) {
        return Err(format!("taken, where simd-json refuses it: {e}"));
    }
    let theirs = decode(&tape.0);
    if lean != theirs {
        return Err(format!("lean {lean:?}, simd-json {theirs:?}"));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::tests::rng;
    use crate::test_shared as shared;

    fn took(line: &[u8]) -> bool {
        agrees_with_simd_json(line)
            .unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(line)))
    }

    /// The tape of `line`, values decoded, as text.
    fn tape_of(line: &[u8]) -> Option<String> {
        let arena = Bump::new();
        let copy = arena.alloc_slice_copy(line);
        let mut tape = Vec::new();
        if !parse(copy, &arena, &mut tape, None) {
            return None;
        }
        let _reading = Reading::new(copy, &arena, None);
        let nodes: Vec<String> = tape
            .iter()
            .map(|n| match n {
                Node::String(s) => format!("{:?}", value(s)),
                Node::Static(s) => format!("{s:?}"),
                Node::Object { len, count } => format!("O{len}/{count}"),
                Node::Array { len, count } => format!("A{len}/{count}"),
            })
            .collect();
        Some(nodes.join(" "))
    }

    /// The first backslash is found at every place in strings of every
    /// length below `memchr`'s, beside any other byte (those whose
    /// difference from a backslash borrows: `[`, `]`, 0x5d..), and none in
    /// a string without one.
    #[test]
    fn backslash_in_finds_the_first_backslash() {
        for len in 0..40 {
            for fill in [b'a', b'[', b']', 0x5d, 0xdc, 0x00, 0xff] {
                let plain = vec![fill; len];
                assert_eq!(backslash_in(&plain), None, "{len} of {fill:#x}");
                for at in 0..len {
                    let mut s = plain.clone();
                    s[at] = b'\\';
                    assert_eq!(backslash_in(&s), Some(at), "{len} of {fill:#x}, at {at}");
                    // A second one after it does not move it.
                    if at + 1 < len {
                        s[len - 1] = b'\\';
                        assert_eq!(backslash_in(&s), Some(at), "{len}, at {at} and the end");
                    }
                }
            }
        }
    }

    /// Where no backslash follows another (and none is carried in), the
    /// shortcut of the block scan (each escapes the byte after it) is
    /// what the run arithmetic gives; runs of two and more, and a carry,
    /// go through that arithmetic (checked here against a byte-by-byte
    /// reading of the runs).
    #[test]
    fn lone_backslashes_escape_the_byte_after_them() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let by_bytes = |backslash: u64, carry: u64| {
            let (mut escaped, mut odd) = (0u64, carry == 1);
            for k in 0..64 {
                if odd {
                    escaped |= 1 << k;
                    odd = false;
                } else if backslash >> k & 1 == 1 {
                    odd = true;
                }
            }
            (escaped, odd)
        };
        for round in 0..20_000 {
            // Sparse and dense backslashes.
            let mut b = next() & next();
            if round % 2 == 0 {
                b &= next();
            }
            let carry = u64::from(round % 3 == 0);
            assert_eq!(
                escaped_by_runs(b, carry),
                by_bytes(b, carry),
                "{b:#x} {carry}"
            );
            let lone = b & !(b << 1);
            assert_eq!(
                (lone << 1, lone >> 63 != 0),
                escaped_by_runs(lone, 0),
                "{lone:#x}"
            );
        }
    }

    /// Four hex digits in any case are their value; any other byte in
    /// any of the four places, or another length, is none.
    #[test]
    fn hex4_takes_hex_digits_only() {
        assert_eq!(hex4(Some(b"001b")), Some(0x1b));
        assert_eq!(hex4(Some(b"D83d")), Some(0xd83d));
        assert_eq!(hex4(Some(b"ffFF")), Some(0xffff));
        assert_eq!(hex4(Some(b"0000")), Some(0));
        assert_eq!(hex4(Some(b"123")), None);
        assert_eq!(hex4(Some(b"12345")), None);
        assert_eq!(hex4(None), None);
        for at in 0..4 {
            for x in 0..=255u8 {
                let mut digits = *b"7a7A";
                digits[at] = x;
                let want = digits.iter().try_fold(0u32, |n, &c| {
                    let d = char::from(c).to_digit(16).filter(|_| c.is_ascii())?;
                    Some(n << 4 | d)
                });
                assert_eq!(hex4(Some(&digits)), want, "{x:#04x} at {at}");
            }
        }
    }

    #[test]
    fn the_tape_is_simd_jsons_with_values_decoded_on_read() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{}"#, "O0/0"),
            (br#"[]"#, "A0/0"),
            (
                br#" { "a" : [1, -2, 3.5, true, false, null, {}] , "b":"x" } "#,
                r#"O2/11 "a" A7/7 U64(1) I64(-2) F64(3.5) Bool(true) Bool(false) Null O0/0 "b" "x""#,
            ),
            (
                br#"{"k\u0041\"":"v\n\t\\\/\u00e9\ud83d\ude00"}"#,
                "O1/2 \"kA\\\"\" \"v\\n\\t\\\\/é😀\"",
            ),
            (
                br#"[-0, 0, -0.0, 1e-400, 123456789012345678]"#,
                "A5/5 I64(0) U64(0) F64(-0.0) F64(0.0) U64(123456789012345678)",
            ),
            (br#"[[[["deep"]]]]"#, r#"A1/4 A1/3 A1/2 A1/1 "deep""#),
        ];
        for (line, want) in cases {
            assert_eq!(
                tape_of(line).as_deref(),
                Some(*want),
                "{}",
                String::from_utf8_lossy(line)
            );
            assert!(took(line));
        }
        // Characters of two to four bytes in a key and across the boundary
        // of a string's 64-byte blocks, at every place about it.
        for pad in 56..70 {
            for ch in ["\u{e9}", "\u{20ac}", "\u{1f600}"] {
                let text = format!("{}{ch}z", "a".repeat(pad));
                let line = format!(r#"{{"k{ch}":"{text}"}}"#);
                let want = format!(r#"O1/2 "k{ch}" "{text}""#);
                assert_eq!(tape_of(line.as_bytes()), Some(want), "{line}");
            }
        }
    }

    /// A line's UTF-8 is checked exactly: with AVX-512's scans each
    /// string's as it is scanned, not the whole line first, and they take
    /// exactly the lines the AVX2 scans take (after simdutf8's check of the
    /// whole line), with the same tapes; with any scan, the lines taken are
    /// those `std` finds valid. For every pair of a byte over 0x7f and any
    /// byte, at a string's start and across a block's end; for sequences
    /// valid and not (overlong, surrogates, too large, cut short by the
    /// quote or the line's end, continuations alone) at every place of two
    /// blocks; and for random strings.
    #[test]
    fn utf8_is_checked_in_strings_as_the_whole_line_was() {
        let both = |line: &[u8]| {
            let arena = Bump::new();
            let copy = arena.alloc_slice_copy(line);
            let (mut wide, mut narrow) = (Vec::new(), Vec::new());
            let took = parse_with(copy, &arena, &mut wide, None, scan());
            if scan() == SCAN_AVX512 {
                let want = parse_with(copy, &arena, &mut narrow, None, SCAN_AVX2);
                assert_eq!(took, want, "{line:x?}");
                if took {
                    assert_eq!(wide, narrow, "{line:x?}");
                }
            }
            took
        };
        let line = |pad: usize, bytes: &[u8], after: &[u8]| {
            [&b"{\"k\":\""[..], &vec![b'a'; pad], bytes, after, b"\"}"].concat()
        };
        let mut taken = 0;
        for pad in [0, 61, 62, 63, 64] {
            for first in 0x80..=0xffu8 {
                for second in 0..=0xffu8 {
                    let l = line(pad, &[first, second], b"z");
                    let took = both(&l);
                    assert_eq!(took, std::str::from_utf8(&l).is_ok(), "{l:x?}");
                    taken += usize::from(took);
                }
            }
        }
        // Those valid: a two-byte character (a lead 0xc2-0xdf, then a
        // continuation), 30 * 64 pairs at each of the 5 places.
        assert_eq!(taken, 30 * 64 * 5);
        let sequences: &[&[u8]] = &[
            b"\xc2\x80",
            b"\xdf\xbf",
            b"\xe0\xa0\x80",
            b"\xed\x9f\xbf",
            b"\xee\x80\x80",
            b"\xef\xbf\xbf",
            b"\xf0\x90\x80\x80",
            b"\xf4\x8f\xbf\xbf",
            "é日本語🦀".as_bytes(),
            b"\xc0\x80",
            b"\xc1\xbf",
            b"\xe0\x9f\xbf",
            b"\xed\xa0\x80",
            b"\xf0\x8f\xbf\xbf",
            b"\xf4\x90\x80\x80",
            b"\xf5\x80\x80\x80",
            b"\x80",
            b"\xbf",
            b"\xe2\x82",
            b"\xf0\x9f\x98",
            b"\xc2",
            b"\xff",
            b"\xfe",
            b"\xe2\x82\xac\x80",
            b"\xc2\x80\x80",
        ];
        let mut valid = 0;
        for pad in 0..140 {
            for s in sequences {
                for after in [&b""[..], b"x", "é".as_bytes(), b"\xe2\x82\xac", b"\xc3"] {
                    let l = line(pad, s, after);
                    let took = both(&l);
                    assert_eq!(took, std::str::from_utf8(&l).is_ok(), "{l:x?}");
                    valid += usize::from(took);
                }
            }
        }
        // 9 valid sequences, each with 4 valid endings, at 140 places.
        assert_eq!(valid, 9 * 4 * 140);
        // Cut short by the line's end (no closing quote).
        for pad in 0..70 {
            let mut l = line(pad, b"\xe2\x82\xac", b"");
            l.truncate(l.len() - 3);
            assert!(!both(&l));
        }
        let mut next = rng(0x2545_F491_4F6C_DD1D);
        for _ in 0..20_000 {
            let len = (next() % 300) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let x = next();
                    match x % 4 {
                        0 => b'a' + (x >> 8) as u8 % 26,
                        _ => 0x80 | (x >> 8) as u8,
                    }
                })
                .filter(|&c| c != b'"' && c != b'\\')
                .collect();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let l = line(0, &bytes, b"");
            assert_eq!(both(&l), std::str::from_utf8(&l).is_ok());
            assert!(both(&line(0, text.as_bytes(), b"")));
        }
    }

    /// `\u` escapes at every place of a string's 64-byte blocks (the last
    /// four of a block among them, whose digits are in the next), alone,
    /// in runs and beside surrogate pairs: the lean parse takes those
    /// simd-json takes, with the same values, and leaves to it a lone
    /// surrogate and an escape without four hex digits.
    #[test]
    fn unicode_escapes_are_checked_at_every_place_of_a_block() {
        let escapes = [
            ("\\u001b[31m", true),
            ("\\u00e9\\u001B", true),
            ("\\uABCD\\uabcd\\uFfFf", true),
            ("\\uD83D\\uDE00", true),
            ("\\ud83d\\ude00\\u001b", true),
            ("\\udbff\\udfff", true),
            ("\\u0000\\u001b\\u001b\\u001b\\u001b\\u001b\\u001b", true),
            ("\\u001b\\uD83D", false),
            ("\\uDE00", false),
            ("\\udc00\\u001b", false),
            ("\\u00g0", false),
            ("\\u12", false),
            ("\\u001b\\u0x1b", false),
        ];
        for pad in 0..140 {
            for (escape, valid) in escapes {
                for after in ["x", "", "\\u001b"] {
                    let line = format!(r#"{{"k":"{}{escape}{after}"}}"#, "a".repeat(pad));
                    assert_eq!(agrees_with_simd_json(line.as_bytes()), Ok(valid), "{line}");
                }
            }
        }
    }

    /// Left to simd-json: what it refuses, and what the lean parse does not
    /// decide (a top-level scalar, integers of 19 digits or more, an
    /// infinite float, a raw control byte, a lone surrogate, invalid UTF-8,
    /// nesting past [`MAX_DEPTH`]).
    #[test]
    fn what_the_lean_parse_does_not_take() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n)).into_bytes();
        assert!(took(&deep(MAX_DEPTH)));
        let refused: Vec<Vec<u8>> = vec![
            b"\"top\"".to_vec(),
            b"12".to_vec(),
            b"[1234567890123456789]".to_vec(),
            b"[-1234567890123456789]".to_vec(),
            b"[1e400]".to_vec(),
            b"[01]".to_vec(),
            b"[1.]".to_vec(),
            b"[.5]".to_vec(),
            b"[1e]".to_vec(),
            b"[-]".to_vec(),
            b"[1,]".to_vec(),
            b"{\"a\"}".to_vec(),
            b"{\"a\":1,}".to_vec(),
            b"{\"a\":1}x".to_vec(),
            b"{\"a\":1}}".to_vec(),
            b"[\"tab\there\"]".to_vec(),
            b"[\"\\ud83d\"]".to_vec(),
            b"[\"\\ude00\"]".to_vec(),
            b"[\"\\ud83d\\u0041\"]".to_vec(),
            b"[\"\\x\"]".to_vec(),
            b"[\"\\u12\"]".to_vec(),
            b"[\"\\u12g4\"]".to_vec(),
            b"[\"open]".to_vec(),
            b"[\"ends in a backslash\\".to_vec(),
            // The line's last 63 bytes of a string end in a backslash: the
            // one quote of the padding after them is escaped (this hung).
            [&b"[\""[..], &[b'a'; 62], b"\\"].concat(),
            [&b"{\"k\":\""[..], &[b'a'; 62], b"\\"].concat(),
            [&b"[\""[..], &[b'a'; 126], b"\\"].concat(),
            b"[\"\xff\"]".to_vec(),
            // Invalid UTF-8 in a key, in a second block, split across two
            // blocks, cut by the closing quote, and outside a string.
            b"{\"k\xc3\":1}".to_vec(),
            [&b"[\""[..], &[b'a'; 70], b"\xe2\x82\"]"].concat(),
            [&b"[\""[..], &[b'a'; 61], b"\xf0\x9f", b"\x98x\"]"].concat(),
            [&b"[\""[..], &[b'a'; 61], b"\xc3\"]"].concat(),
            b"[\"\xed\xa0\x80\"]".to_vec(),
            b"[\"\xc0\xaf\"]".to_vec(),
            b"[1,\xc3\xa9]".to_vec(),
            b"{\"a\":1}\xc2\xa0".to_vec(),
            b"[tru]".to_vec(),
            b"[truex]".to_vec(),
            b"[nul]".to_vec(),
            b"[1 2]".to_vec(),
            b"{\"a\" 1}".to_vec(),
            b"[\"a\":1]".to_vec(),
            b"{1:2}".to_vec(),
            b"".to_vec(),
            b"[".to_vec(),
            deep(MAX_DEPTH + 1),
        ];
        for line in &refused {
            assert!(!took(line), "{}", String::from_utf8_lossy(line));
        }
    }

    /// Every line of the `*.jsonl` files below `dirs` (the damaged
    /// fixtures left out: they are the hostile catalogue's test) is taken
    /// by the lean parse exactly when simd-json takes it as read and it is
    /// an object: `(files, lines, taken)`.
    fn every_line_taken_below(dirs: &[std::path::PathBuf]) -> (usize, usize, usize) {
        let mut files = Vec::new();
        for dir in dirs {
            let mut stack = vec![dir.clone()];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
                    let p = e.unwrap().path();
                    if p.is_dir() {
                        if !p.ends_with("bad") {
                            stack.push(p);
                        }
                    } else if p.extension().is_some_and(|x| x == "jsonl") {
                        files.push(p);
                    }
                }
            }
        }
        let (mut lines, mut taken) = (0, 0);
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            for line in bytes.split(|&c| c == b'\n') {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if crate::json::is_blank(line) {
                    continue;
                }
                lines += 1;
                // What simd-json takes as read (no repair), the lean parse
                // takes.
                let as_read = crate::json::parse_padded(
                    &mut simd_json::Buffers::default(),
                    &mut simd_json::Tape::null(),
                    &Bump::new(),
                    line,
                )
                .is_ok();
                let lean =
                    agrees_with_simd_json(line).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
                taken += usize::from(lean);
                assert_eq!(
                    lean,
                    as_read && line.first() == Some(&b'{'),
                    "{}: {}",
                    f.display(),
                    String::from_utf8_lossy(line)
                );
            }
        }
        (files.len(), lines, taken)
    }

    /// Every line of the repository's fixtures is taken, as simd-json
    /// gives it.
    #[test]
    fn every_line_of_the_fixtures_is_taken() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(
            every_line_taken_below(&[root.join("fixtures")]),
            (6, 1519, 1454)
        );
    }

    /// Every line of pi's real sessions and of every agent's samples is
    /// taken, as simd-json gives it.
    #[test]
    #[ignore = "needs ../shared: real/ and samples/ (MEM_INGEST_SHARED)"]
    fn every_line_of_the_real_and_sample_files_is_taken() {
        // Each line is checked exactly above; the totals only say the walk
        // found the folders (the samples grow as agents are added: 89
        // files, 2,252 lines, 2,250 taken when this was written).
        let (files, lines, taken) =
            every_line_taken_below(&[shared::real_dir(), shared::samples()]);
        assert!(files > 20 && lines > 2000, "{files} files, {lines} lines");
        assert!(taken * 100 > lines * 95, "{taken} of {lines}");
    }

    /// Random lines built from the bytes that matter (quotes, backslashes,
    /// escape letters, hex digits, digits and signs, brackets, control and
    /// non-ASCII bytes), strings across the 64-byte block edges, and
    /// mutations of a real line: the lean parse never takes a line simd-json
    /// refuses or reads differently, and takes many.
    #[test]
    fn random_and_mutated_lines_agree_with_simd_json() {
        let mut next = rng(0x9E37_79B9_7F4A_7C15);
        let alphabet: &[&[u8]] = &[
            b"\"",
            b"\\",
            b"\\\\",
            b"\\\"",
            b"\\u",
            b"\\ud83d",
            b"\\ude00",
            b"\\n",
            b"\\/",
            b"\\x",
            b"a",
            b"u",
            b"0",
            b"1",
            b"9",
            b"-",
            b"+",
            b".",
            b"e",
            b"E",
            b"F",
            b",",
            b":",
            b"[",
            b"]",
            b"{",
            b"}",
            b" ",
            b"\t",
            b"\x01",
            b"\xc3\xa9",
            b"\xe2\x82",
            b"\xac",
            b"\xf0\x9f\x98\x80",
            b"\xff",
            b"true",
            b"null",
            b"{\"k\":",
            b"\"s\"",
            b"1e308",
            b"1e309",
            b"123456789012345678",
            b"0.1",
        ];
        let (mut taken, mut left) = (0, 0);
        for round in 0..60_000 {
            let len = (next() % 90) as usize;
            let mut line = Vec::new();
            // Half of them well on the way to valid: a string of random
            // content in an object.
            if round % 2 == 0 {
                line.extend_from_slice(b"{\"t\":\"");
                line.extend(std::iter::repeat_n(b'x', (next() % 130) as usize));
            } else {
                line.push(b'[');
            }
            for _ in 0..len {
                line.extend_from_slice(alphabet[(next() % alphabet.len() as u64) as usize]);
            }
            line.extend_from_slice(if round % 2 == 0 { b"\"}" } else { b"]" });
            if agrees_with_simd_json(&line)
                .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(&line)))
            {
                taken += 1;
            } else {
                left += 1;
            }
        }
        let base = br#"{"type":"message","id":"a1b2","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":"line\none \"q\" \\ \u00e9 \ud83d\ude00 end"}],"usage":{"input":12,"output":3.5e2,"cost":{"total":-0.000125}}}}"#;
        for _ in 0..40_000 {
            let mut line = base.to_vec();
            for _ in 0..1 + next() % 3 {
                let at = (next() % line.len() as u64) as usize;
                let piece = alphabet[(next() % alphabet.len() as u64) as usize];
                match next() % 3 {
                    0 => {
                        line.remove(at);
                    }
                    1 => {
                        line.splice(at..at, piece.iter().copied());
                    }
                    _ => line[at] = piece[0],
                }
            }
            if agrees_with_simd_json(&line)
                .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(&line)))
            {
                taken += 1;
            } else {
                left += 1;
            }
        }
        assert!(
            taken > 10_000 && left > 10_000,
            "{taken} taken, {left} left"
        );
    }

    /// Floats written in many ways (shortest, exponent forms, many digits,
    /// near the ends of the range): the same bits as simd-json's.
    #[test]
    fn floats_are_simd_jsons_to_the_bit() {
        let mut next = rng(0x2545_F491_4F6C_DD1D);
        let mut n = 0;
        for _ in 0..20_000 {
            let f = f64::from_bits(next());
            if !f.is_finite() {
                continue;
            }
            let small = (next() % 2_000_000) as f64 / 1000.0;
            for text in [
                format!("{f}"),
                format!("{f:e}"),
                format!("{f:.17e}"),
                format!("{small}"),
                format!("{small:.20}"),
                format!("{}e-{}", next() % 100_000_000_000_000_000, next() % 330),
                format!("0.{:018}", next() % 1_000_000_000_000_000_000),
            ] {
                let line = format!("[{text}]");
                // `{f}` writes a large float as an integer: one of 19
                // digits or more is left to simd-json.
                let long_integer =
                    !text.contains(['.', 'e']) && text.trim_start_matches('-').len() > 18;
                assert_eq!(took(line.as_bytes()), !long_integer, "{line}");
                n += usize::from(!long_integer);
            }
        }
        assert!(n > 100_000, "{n}");
    }

    /// The short-string look (a string's first 32 bytes) and the block
    /// scan agree with simd-json on strings of every length around it
    /// ending at every place, with a backslash, a control byte, a quote
    /// or a high byte before, at and after the 32nd byte, the line's end
    /// at every distance (a string without its closing quote too): the
    /// look takes a string only when its quote comes before any backslash
    /// or control byte.
    #[test]
    fn short_strings_end_where_simd_json_ends_them() {
        let mut n = 0;
        for len in 0..40 {
            for (at, mark) in (0..=len).flat_map(|at| {
                [
                    &b"\\"[..],
                    b"\\n",
                    b"\x01",
                    b"\\\"",
                    "é".as_bytes(),
                    b"\\u0041",
                ]
                .map(move |m| (at, m))
            }) {
                let mut s: Vec<u8> = b"abcdefghijklmnopqrstuvwxyz0123456789ABCDE"[..len].to_vec();
                s.splice(at..at, mark.iter().copied());
                for after in [&b"\"}"[..], b"\",\"k\":1}", b"\"", b""] {
                    let mut line = b"{\"k\":\"".to_vec();
                    line.extend_from_slice(&s);
                    line.extend_from_slice(after);
                    // Every such line is in the lean parse's grammar:
                    // taken exactly when simd-json takes it.
                    let want_taken = simd_json::to_borrowed_value(&mut line.clone()).is_ok();
                    match agrees_with_simd_json(&line) {
                        Ok(taken) => {
                            n += usize::from(taken);
                            assert_eq!(taken, want_taken, "{}", String::from_utf8_lossy(&line));
                        }
                        Err(e) => panic!("{}: {e}", String::from_utf8_lossy(&line)),
                    }
                }
            }
        }
        assert!(n > 4_000, "{n}");
    }

    #[test]
    fn the_first_backslash_is_found_at_every_length_and_place() {
        for len in 0..80 {
            for at in 0..=len {
                let mut b = vec![b'a'; len];
                for (k, c) in b.iter_mut().enumerate() {
                    // Bytes around the backslash's value, and high ones.
                    *c = [b'[', b']', 0x5d, 0xdc, 0x5c ^ 0x80, b'a'][k % 6];
                }
                if at < len {
                    b[at] = b'\\';
                    if at + 1 < len {
                        b[at + 1] = b'\\';
                    }
                }
                let want = (at < len).then_some(at);
                assert_eq!(backslash_in(&b), want, "length {len}, at {at}");
            }
        }
    }

    /// The vector block scans that can run here, each to be compared with
    /// the byte ones.
    fn vector_scans() -> Vec<u8> {
        match scan() {
            SCAN_AVX512 => vec![SCAN_AVX2, SCAN_AVX512],
            SCAN_AVX2 => vec![SCAN_AVX2],
            _ => Vec::new(),
        }
    }

    #[test]
    fn the_vector_masks_are_the_byte_ones() {
        if !avx2() {
            return;
        }
        let mut next = rng(0x5851_F42D_4C95_7F2D);
        for _ in 0..20_000 {
            let block: [u8; 64] = std::array::from_fn(|_| {
                let x = next();
                match x % 8 {
                    0 => b'"',
                    1 => b'\\',
                    2 => b'u',
                    3 => (x >> 8) as u8 % 0x21,
                    _ => (x >> 8) as u8,
                }
            });
            for scan in vector_scans() {
                let (a, b) = (masks(&block, scan), masks_bytes(&block));
                assert_eq!(
                    (a.quote, a.backslash, a.control),
                    (b.quote, b.backslash, b.control),
                    "scan {scan}"
                );
                assert_eq!(escape_chars(&block, scan), escape_chars_bytes(&block));
                assert_eq!(hex_digits(&block, scan), hex_digits_bytes(&block));
            }
            assert_eq!(slashes(&block, true), slashes_bytes(&block));
        }
        // Every byte value, in each of the block's halves.
        for c in 0..=255u8 {
            for half in [0..32, 32..64] {
                let mut block = [b'a'; 64];
                block[half].fill(c);
                for scan in vector_scans() {
                    assert_eq!(
                        escape_chars(&block, scan),
                        escape_chars_bytes(&block),
                        "byte {c:#04x}, scan {scan}"
                    );
                    assert_eq!(
                        hex_digits(&block, scan),
                        hex_digits_bytes(&block),
                        "byte {c:#04x}, scan {scan}"
                    );
                }
            }
        }
    }

    /// The parse notes the strings whose escapes the writer would not
    /// write as they are, and only those; `canonical` answers from the
    /// notes for the tape being read with raw text.
    #[test]
    fn odd_escapes_are_noted_where_they_are() {
        let cases: &[(&str, bool)] = &[
            (r#"plain"#, false),
            (r#"a\nb\tc\"d\\e\rf\bg\fh"#, false),
            (r#"\u001b[0m \u0000 \u000b \u001f \u0007"#, false),
            (r#"a\/b"#, true),
            (r#"caf\u00e9"#, true),
            (r#"\u001B"#, true),
            (r#"\u0008"#, true),
            (r#"\u0009"#, true),
            (r#"\u000a"#, true),
            (r#"\u000c"#, true),
            (r#"\u000d"#, true),
            (r#"\u000A"#, true),
            (r#"\u0020"#, true),
            (r#"\ud83d\ude00"#, true),
            (r#"\\u00e9 \\/"#, false),
        ];
        for (body, odd) in cases {
            // Past a 64-byte block too.
            for pad in [0, 61, 62] {
                let line = format!(
                    r#"{{"k":"{}{body}","n":1,"e":"","w":"x\/"}}"#,
                    "p".repeat(pad)
                );
                assert_eq!(agrees_with_simd_json(line.as_bytes()), Ok(true), "{line}");
                let arena = Bump::new();
                let copy = arena.alloc_slice_copy(line.as_bytes());
                let (mut tape, mut noted) = (Vec::new(), Vec::new());
                assert!(parse(copy, &arena, &mut tape, Some(&mut noted)));
                let w = line.rfind("x\\/").unwrap();
                let want: Vec<usize> = if *odd { vec![6, w] } else { vec![w] };
                assert_eq!(noted, want, "{line}");
                let strings: Vec<&str> = tape
                    .iter()
                    .filter_map(|n| match n {
                        Node::String(s) => Some(*s),
                        _ => None,
                    })
                    .collect();
                let k = strings[1];
                assert_eq!(canonical(k), !odd, "{line}: outside a reading");
                let _reading = Reading::new(copy, &arena, Some(&noted));
                assert!(defers_text());
                assert_eq!(canonical(k), !odd, "{line}");
                assert!(!canonical(strings[6]), "{line}");
                assert!(canonical(strings[4]), "{line}");
            }
        }
        assert!(!defers_text());
    }

    /// A raw value is decoded only while its tape is read, and only when
    /// it is in that tape's copy.
    #[test]
    fn values_are_decoded_while_their_tape_is_read() {
        let arena = Bump::new();
        let copy = arena.alloc_slice_copy(br#"{"a":"x\ny","b":"plain"}"#);
        let mut tape = Vec::new();
        assert!(parse(copy, &arena, &mut tape, None));
        let Node::String(raw) = tape[2] else {
            panic!("{tape:?}")
        };
        assert_eq!(raw, r"x\ny");
        assert_eq!(value(raw), r"x\ny", "no tape being read");
        {
            let _reading = Reading::new(copy, &arena, None);
            assert_eq!(value(raw), "x\ny");
            let elsewhere = arena.alloc_str(r"x\ny");
            assert_eq!(value(elsewhere), r"x\ny", "not in the copy");
            {
                let other = arena.alloc_slice_copy(b"[]");
                let _inner = Reading::new(other, &arena, None);
                assert_eq!(value(raw), r"x\ny");
            }
            assert_eq!(value(raw), "x\ny", "restored");
        }
        assert_eq!(value(raw), r"x\ny");
    }

    /// Both ways of decoding a raw string give serde_json's text, for
    /// escapes of every kind at every place around the 32-byte blocks.
    #[test]
    fn the_vector_unescape_is_the_byte_one_and_serde_jsons() {
        let pieces: &[&str] = &[
            "a",
            "é",
            "😀",
            r"\n",
            r"\t",
            r"\\",
            r#"\""#,
            r"\/",
            r"\b",
            r"\f",
            r"\r",
            r"\u0041",
            r"\u00e9",
            r"\u00E9",
            r"\u001f",
            r"\ud83d\ude00",
            r"\uFFFF",
            "xyz",
            "0123456789abcdef0123456789abcdef",
        ];
        let mut next = rng(0x2545_F491_4F6C_DD1D);
        let mut checked = 0;
        for _ in 0..20_000 {
            let mut raw = String::new();
            while raw.len() < (next() % 150) as usize {
                raw.push_str(pieces[(next() % pieces.len() as u64) as usize]);
            }
            let Some(first) = raw.find('\\') else {
                continue;
            };
            let want: String = serde_json::from_str(&format!("\"{raw}\"")).expect("valid");
            let arena = Bump::new();
            assert_eq!(unescape_at(&raw, first, &arena, false), want, "{raw}");
            assert_eq!(unescape_at(&raw, first, &arena, avx2()), want, "{raw}");
            assert_eq!(unescape(&raw, &arena), want, "{raw}");
            checked += 1;
        }
        assert!(checked > 15_000, "{checked}");
    }
}
