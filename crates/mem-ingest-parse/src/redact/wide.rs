//! The any-keyword search 64 bytes a step, where the processor has
//! AVX-512 (BW): the slim Teddy of aho-corasick's packed searcher (8
//! buckets, the same bucket of a keyword as there) on vectors twice as
//! wide as its widest (AVX2, 32 bytes a step).
//!
//! A step takes the 64 bytes at a place and the 64 at each of the next
//! two places (three unaligned loads), and marks each byte whose three
//! bytes' nibbles are all in one bucket's masks (a keyword of the bucket
//! may start there); a marked byte is checked against the keywords that
//! start with its byte, in the search's order, so the hits are the
//! leftmost-first ones of that order, as the packed searcher gives them
//! (a test and the `redact` fuzz target compare the two).

/// The masks of 8 buckets for the first three bytes of the keywords, and
/// the keywords by their first byte.
pub(super) struct Wide {
    /// For each of the three bytes, the buckets whose keywords have a
    /// low nibble (`lo`) or high nibble (`hi`) there.
    lo: [[u8; 16]; 3],
    hi: [[u8; 16]; 3],
    /// The keywords by their first byte, in the search's order.
    by_first: Vec<Vec<&'static [u8]>>,
}

impl Wide {
    /// The search of `order` (leftmost-first, in that order), when the
    /// processor has AVX-512 (F and BW) and every keyword has three bytes.
    pub(super) fn new(order: &[&'static str]) -> Option<Wide> {
        if !Wide::available() || order.iter().any(|k| k.len() < 3) {
            return None;
        }
        Some(Wide::build(order))
    }

    #[cfg(target_arch = "x86_64")]
    fn available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn available() -> bool {
        false
    }

    fn build(order: &[&'static str]) -> Wide {
        const BUCKETS: usize = 8;
        // A keyword's bucket as aho-corasick's slim Teddy picks it: by its
        // place, counted down, unless a keyword with the same low nibbles
        // in its first three bytes came before (then that one's).
        let mut bucket_of: Vec<([u8; 3], usize)> = Vec::new();
        let mut lo = [[0u8; 16]; 3];
        let mut hi = [[0u8; 16]; 3];
        let mut by_first: Vec<Vec<&'static [u8]>> = vec![Vec::new(); 256];
        for (id, k) in order.iter().enumerate() {
            let b = k.as_bytes();
            let nibbles = [b[0] & 15, b[1] & 15, b[2] & 15];
            let bucket = match bucket_of.iter().find(|(n, _)| *n == nibbles) {
                Some(&(_, bucket)) => bucket,
                None => {
                    let bucket = BUCKETS - 1 - id % BUCKETS;
                    bucket_of.push((nibbles, bucket));
                    bucket
                }
            };
            for i in 0..3 {
                lo[i][usize::from(b[i] & 15)] |= 1 << bucket;
                hi[i][usize::from(b[i] >> 4)] |= 1 << bucket;
            }
            by_first[usize::from(b[0])].push(b);
        }
        Wide { lo, hi, by_first }
    }

    /// The end of the first keyword (in the search's order) that starts
    /// at `hay`'s byte `at`.
    #[inline]
    fn keyword_at(&self, hay: &[u8], at: usize) -> Option<usize> {
        let rest = &hay[at..];
        self.by_first[usize::from(rest[0])]
            .iter()
            .find(|k| rest.starts_with(k))
            .map(|k| at + k.len())
    }

    /// Each leftmost-first hit's start and end in `hay`, in order.
    #[allow(unsafe_code)]
    pub(super) fn each(&self, hay: &[u8], f: &mut dyn FnMut(usize, usize)) {
        if hay.len() < 3 {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a `Wide` is built only where the processor has AVX-512
        // (BW) (`Wide::new`), which is all `each_avx512` needs.
        unsafe {
            self.each_avx512(hay, f)
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.each_with(hay, f, |s, p| s.marks_scalar(p))
    }

    /// The bytes of a step (64 from `p`, which has 66 readable) that may
    /// start a keyword, as bits, computed byte by byte (what the vector
    /// step computes; for the tests and where there are no vectors).
    #[cfg(any(test, not(target_arch = "x86_64")))]
    fn marks_scalar(&self, p: &[u8]) -> u64 {
        let mut m = 0u64;
        for j in 0..64 {
            let mut buckets = 0xffu8;
            for i in 0..3 {
                let b = p[j + i];
                buckets &= self.lo[i][usize::from(b & 15)] & self.hi[i][usize::from(b >> 4)];
            }
            if buckets != 0 {
                m |= 1 << j;
            }
        }
        m
    }

    /// The search with the step `marks` (the bytes of 64 from a slice of
    /// 66 that may start a keyword, as bits).
    #[cfg(any(test, not(target_arch = "x86_64")))]
    fn each_with(
        &self,
        hay: &[u8],
        f: &mut dyn FnMut(usize, usize),
        mut marks: impl FnMut(&Self, &[u8]) -> u64,
    ) {
        let len = hay.len();
        // Where the next hit may start (after the last one's end).
        let mut next = 0;
        let mut step = 0;
        // The last bytes, padded with zeros (no keyword byte is one, so
        // a zero marks nothing where it is one of the three).
        let mut tail = [0u8; 130];
        while step < len {
            let mut m = if step + 66 <= len {
                marks(self, &hay[step..step + 66])
            } else {
                let n = len - step;
                tail[..n].copy_from_slice(&hay[step..]);
                tail[n..].fill(0);
                let m = marks(self, &tail[..66]);
                if n < 64 {
                    m & ((1 << n) - 1)
                } else {
                    m
                }
            };
            while m != 0 {
                let at = step + m.trailing_zeros() as usize;
                m &= m - 1;
                if at < next {
                    continue;
                }
                if let Some(end) = self.keyword_at(hay, at) {
                    f(at, end);
                    next = end;
                }
            }
            step += 64;
        }
    }

    /// [`Wide::each`] with AVX-512 steps (the loop of
    /// [`Wide::each_with`], the step [`step_avx512`]; a test compares the
    /// two): two steps a round while 130 bytes are left (one test of both
    /// steps' marks: most rounds mark nothing), then one, and the last
    /// bytes from a copy padded with zeros.
    ///
    /// # Safety
    /// The processor has AVX-512 (BW).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    #[allow(unsafe_code)]
    unsafe fn each_avx512(&self, hay: &[u8], f: &mut dyn FnMut(usize, usize)) {
        use std::arch::x86_64::*;
        // Each mask in the four 128-bit lanes (a shuffle looks up within
        // its lane).
        let lanes = |m: &[u8; 16]| _mm512_broadcast_i32x4(_mm_loadu_si128(m.as_ptr().cast()));
        let masks = [
            lanes(&self.lo[0]),
            lanes(&self.hi[0]),
            lanes(&self.lo[1]),
            lanes(&self.hi[1]),
            lanes(&self.lo[2]),
            lanes(&self.hi[2]),
        ];
        let len = hay.len();
        let p = hay.as_ptr();
        // Where the next hit may start (after the last one's end).
        let mut next = 0;
        let mut step = 0;
        while step + 130 <= len {
            // SAFETY: 130 bytes from `step` are in `hay`.
            let (a, b) = unsafe {
                (
                    step_avx512(&masks, p.add(step)),
                    step_avx512(&masks, p.add(step + 64)),
                )
            };
            if a | b != 0 {
                self.hits(hay, step, a, &mut next, f);
                self.hits(hay, step + 64, b, &mut next, f);
            }
            step += 128;
        }
        if step + 66 <= len {
            // SAFETY: 66 bytes from `step` are in `hay`.
            let m = unsafe { step_avx512(&masks, p.add(step)) };
            self.hits(hay, step, m, &mut next, f);
            step += 64;
        }
        if step < len {
            // Fewer than 66 bytes left: a copy, padded with zeros (no
            // keyword byte is one, so a zero marks nothing where it is one
            // of the three).
            let n = len - step;
            let mut tail = [0u8; 66];
            tail[..n].copy_from_slice(&hay[step..]);
            // SAFETY: `tail` has 66 bytes.
            let m = unsafe { step_avx512(&masks, tail.as_ptr()) };
            let m = if n < 64 { m & ((1 << n) - 1) } else { m };
            self.hits(hay, step, m, &mut next, f);
        }
    }

    /// The hits among a step's marks `m` (bits of the 64 bytes from
    /// `step`): each marked byte from `next` on where a keyword starts,
    /// `next` then moved past it.
    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn hits(
        &self,
        hay: &[u8],
        step: usize,
        mut m: u64,
        next: &mut usize,
        f: &mut dyn FnMut(usize, usize),
    ) {
        while m != 0 {
            let at = step + m.trailing_zeros() as usize;
            m &= m - 1;
            if at < *next {
                continue;
            }
            if let Some(end) = self.keyword_at(hay, at) {
                f(at, end);
                *next = end;
            }
        }
    }
}

/// The bytes of the 64 at `p` that may start a keyword, as bits: each
/// byte's three (it and the next two) looked up in `masks` (the low and
/// high nibbles' masks of each of the three bytes, in that order).
///
/// # Safety
/// The processor has AVX-512 (BW), and 66 bytes from `p` can be read.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
#[allow(unsafe_code)]
unsafe fn step_avx512(masks: &[std::arch::x86_64::__m512i; 6], p: *const u8) -> u64 {
    use std::arch::x86_64::*;
    let low = _mm512_set1_epi8(0x0f);
    let mut r = _mm512_set1_epi8(-1);
    for i in 0..3 {
        // SAFETY: 64 bytes from `p`'s byte i < 3 can be read.
        let v = unsafe { _mm512_loadu_si512(p.add(i).cast()) };
        let l = _mm512_shuffle_epi8(masks[2 * i], _mm512_and_si512(v, low));
        let h = _mm512_shuffle_epi8(
            masks[2 * i + 1],
            _mm512_and_si512(_mm512_srli_epi16::<4>(v), low),
        );
        r = _mm512_and_si512(r, _mm512_and_si512(l, h));
    }
    _mm512_test_epi8_mask(r, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts made of the keywords (whole and cut), bytes of theirs and any
    /// byte: each gives the packed searcher's hits, by the vector steps
    /// where the processor has them and by the byte-by-byte steps always.
    #[test]
    fn the_wide_search_gives_the_packed_searchers_hits() {
        let order = super::super::rules::SEARCH_ORDER;
        let wide = Wide::build(order);
        let mut c = aho_corasick::packed::Config::new();
        c.match_kind(aho_corasick::packed::MatchKind::LeftmostFirst);
        let packed = c.builder().extend(order).build().expect("packed searcher");
        let vectors = Wide::new(order);
        assert_eq!(vectors.is_some(), Wide::available());
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let letters = b"AKIXSECRTOPWD_-:/.abcxyz013\\\"\n";
        let (mut hits, mut texts) = (0, 0);
        for _ in 0..20_000 {
            let n = (rnd() % 300) as usize;
            let mut x = Vec::with_capacity(n + 16);
            while x.len() < n {
                match rnd() % 4 {
                    0 => {
                        let k = order[rnd() as usize % order.len()].as_bytes();
                        let cut = 1 + rnd() as usize % k.len();
                        x.extend_from_slice(if rnd() % 2 == 0 { k } else { &k[..cut] });
                    }
                    1 => x.push(rnd() as u8),
                    _ => x.push(letters[rnd() as usize % letters.len()]),
                }
            }
            let want: Vec<(usize, usize)> =
                packed.find_iter(&x).map(|m| (m.start(), m.end())).collect();
            let mut got = Vec::new();
            wide.each_with(&x, &mut |s, e| got.push((s, e)), |w, p| w.marks_scalar(p));
            assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&x));
            if let Some(v) = &vectors {
                got.clear();
                v.each(&x, &mut |s, e| got.push((s, e)));
                assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&x));
            }
            hits += want.len();
            texts += usize::from(!want.is_empty());
        }
        // The texts hold keywords, most of them.
        assert!(
            hits > 100_000 && texts > 15_000,
            "{hits} hits in {texts} texts"
        );
    }
}
