//! The line hash and the fingerprint hash: what the checkpoint's
//! fingerprints and the engine's sets of them are made of.

use std::hash::Hasher;

/// A 64-bit hash of byte strings (a multiply-fold mix; not for security).
pub fn fingerprint(parts: &[&[u8]]) -> u64 {
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
/// (the engine's `archive::OutputOptions::line_hash`):
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
    Wide,
    /// XXH3-64 (seed 0, its default secret), as `xxhsum -H3` gives it:
    /// a frozen algorithm whose long-input loop takes 32 bytes a vector
    /// step where AVX2 is there (a third of [`LineHash::Wide`]'s
    /// instructions on a Codex archive's lines), the same value without.
    #[default]
    Xxh3,
}

impl LineHash {
    /// Its number in a checkpoint.
    pub fn id(self) -> u32 {
        match self {
            LineHash::Serial => 1,
            LineHash::Wide => 2,
            LineHash::Xxh3 => 3,
        }
    }

    /// The scheme of number `id`; `None` for one this release does not know.
    pub fn from_id(id: u32) -> Option<LineHash> {
        match id {
            1 => Some(LineHash::Serial),
            2 => Some(LineHash::Wide),
            3 => Some(LineHash::Xxh3),
            _ => None,
        }
    }

    /// The hash of `line`'s bytes.
    pub fn of(self, line: &[u8]) -> u64 {
        match self {
            LineHash::Serial => fingerprint(&[line]),
            LineHash::Wide => wide(line),
            LineHash::Xxh3 => twox_hash::XxHash3_64::oneshot(line),
        }
    }
}

/// The wide hash's constants (wyhash's).
pub(super) const WIDE_K: [u64; 4] = [
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
    let k = WIDE_K;
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

/// XXH3-64 under this process's own random secret (192 bytes drawn once,
/// from the standard library's per-process hasher seed; XXH3's secret is
/// what every input word is mixed with): a collision with it cannot be
/// searched for without the secret. What a line is checked by where
/// trusting its fingerprint alone would let crafted bytes pass for
/// another line's (see `codex::memo`). Never saved: a process's own.
pub fn keyed(bytes: &[u8]) -> u64 {
    static SECRET: std::sync::OnceLock<[u8; 192]> = std::sync::OnceLock::new();
    let secret = SECRET.get_or_init(|| {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new();
        let mut secret = [0u8; 192];
        for (i, word) in secret.chunks_exact_mut(8).enumerate() {
            word.copy_from_slice(&seed.hash_one(i).to_le_bytes());
        }
        secret
    });
    twox_hash::XxHash3_64::oneshot_with_secret(secret, bytes)
        .expect("192 bytes: above XXH3's least secret, 136")
}

/// The hasher of maps and sets keyed by fingerprints: they are hashes
/// already, so each is hashed as itself.
#[derive(Default)]
pub struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
