//! The one JSON string escaper, and whether a raw string is what it
//! writes.

/// Whether the raw bytes of a JSON string (a string the lean parse took:
/// no raw control byte, every escape well formed) are exactly what
/// [`escape`] writes for the text they decode to: every escape is `\"`,
/// `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, or `\u00xx` in lowercase for a control
/// byte without a short escape. Unescaped bytes are all ones `escape`
/// leaves as they are (it escapes only control bytes, quotes and
/// backslashes). Escape by escape: the lean parse notes the same as it
/// reads a line ([`crate::json::lean::canonical`]); this is for a string it did
/// not read, and the reference its tests compare with.
pub fn canonical(raw: &[u8]) -> bool {
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
pub(super) fn maybe_upper_hex(raw: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[allow(unsafe_code)]
        // SAFETY: AVX2 is there.
        return unsafe { maybe_upper_hex_avx2(raw) };
    }
    maybe_upper_hex_bytes(raw, 0)
}

/// [`maybe_upper_hex`] for the escapes starting at `from` or later.
pub(super) fn maybe_upper_hex_bytes(raw: &[u8], from: usize) -> bool {
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
pub(super) fn escaped_len(s: &[u8]) -> (usize, bool) {
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
pub(super) fn escaped_len_bytes(s: &[u8]) -> (usize, bool) {
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

/// Where escaped JSON goes: an output buffer, or a string in the arena.
pub trait PushStr {
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
pub fn escape(out: &mut impl PushStr, s: &str) {
    out.reserve(s.len() + 2);
    out.push_ascii(b"\"");
    out.push_escaped(s);
    out.push_ascii(b"\"");
}

/// The escape of `s` (no quotes) as the parts between the bytes to escape
/// and their escapes, pushed one by one: the portable path, and the
/// reference of the SSE2 one's tests.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn escape_parts(out: &mut impl PushStr, s: &str) {
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
pub(super) fn special(c: u8) -> bool {
    ESCAPE[usize::from(c)] != 0
}

/// The index of the first byte from `i` on that is escaped, else
/// `b.len()`; eight bytes at a time, in a u64 (the portable path: x86_64
/// escapes with [`escape_chunk_sse2`]).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn next_special(b: &[u8], mut i: usize) -> usize {
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
