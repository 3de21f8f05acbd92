//! Usage counted once per API response, across the whole archive, as
//! ccusage 20 counts Claude Code's (`ccusage claude daily`).
//!
//! Claude Code writes one line per content block of a streamed response
//! (the same `message.id` and `requestId`, provisional usage on all but the
//! last), copies lines into subagent files and resumed sessions, and
//! replays a parent's responses in sidechains with a new `requestId`:
//! summing usage per line counts a response two or three times. So a
//! format hands the engine every usage-bearing line as a [`Response`], in
//! archive order, and [`Responses`] keeps the best copy of each:
//!
//! - Copies are the same response when they have the same message id and
//!   request id; when they have no request id, the same message id within
//!   one session; and a copy that is a sidechain's (or meets one) matches
//!   an earlier copy with its message id within one session whatever its
//!   request id. A line without a message id is a response of its own.
//! - Of two copies the kept one is the non-sidechain one, else the one with
//!   the larger token total (the last streamed line: provisional-only
//!   responses count with their largest provisional usage), else the one
//!   that records the larger `costUSD`, else the one that names a `speed`;
//!   on a tie the earlier stays.
//!
//! These are ccusage 20.0.24's rules, found by running it (the README says
//! where they differ from its source). The table is the whole truth: the
//! checkpoint saves it ([`Responses::to_bytes`]), so a response seen in an
//! earlier run is never counted again and a larger copy seen later replaces
//! the earlier one; the totals are summed from it, in the order its
//! responses were first seen, whatever the number of jobs.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::record::Usage;

/// One usage-bearing line, as the dedupe sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// `message.id`.
    pub message_id: Option<String>,
    /// `requestId`.
    pub request_id: Option<String>,
    /// The line's `sessionId`, else the session its path names.
    pub session: String,
    /// `isSidechain: true`.
    pub sidechain: bool,
    /// The line names a `speed`.
    pub speed: bool,
    /// The model, `-fast` appended for `speed: "fast"`; none for
    /// `<synthetic>` lines (counted in the totals, under no model).
    pub model: Option<String>,
    /// The project of the file it was read from.
    pub project: String,
    /// Its usage (`cost` is `costUSD`, 0 when absent).
    pub usage: Usage,
    /// The line's `timestamp`, Unix milliseconds (None when read back
    /// from a checkpoint, which does not keep it).
    pub time: Option<i64>,
    /// Of the cache writes, those kept an hour (`ephemeral_1h`), priced
    /// higher (not kept by a checkpoint either).
    pub cache_write_1h: u64,
}

impl Response {
    fn total(&self) -> u64 {
        self.usage.total_tokens
    }

    /// Whether `self`, a later copy, replaces `kept`.
    fn replaces(&self, kept: &Response) -> bool {
        if self.sidechain != kept.sidechain {
            return kept.sidechain;
        }
        if self.total() != kept.total() {
            return self.total() > kept.total();
        }
        if self.usage.cost != kept.usage.cost {
            return self.usage.cost > kept.usage.cost;
        }
        self.speed && !kept.speed
    }
}

/// The kept copy of each response, in the order responses were first
/// seen, with the indexes that find a copy's response.
#[derive(Debug, Default)]
pub struct Responses {
    kept: Vec<Response>,
    /// Hash of (message id, request id, the session when no request id).
    exact: ByHash,
    /// Hash of (message id, session).
    by_message: ByHash,
    /// Indexes of `kept` added or replaced since [`Responses::saved`].
    changed: Vec<u32>,
    /// How many responses there were at [`Responses::saved`].
    saved_len: u32,
    /// Of the responses there then, those replaced since: the copy kept
    /// then (see [`Responses::replaced_since_saved`]).
    prior: Vec<(u32, Response)>,
}

/// A hash of ids, only to find candidates (each is compared in full);
/// never saved. `None` is a byte no UTF-8 string holds.
fn hash_of(parts: &[Option<&str>]) -> u64 {
    let mut bytes: [&[u8]; 3] = [&[]; 3];
    for (b, p) in bytes.iter_mut().zip(parts) {
        *b = p.map_or(&[0xff], str::as_bytes);
    }
    crate::json::hash::fingerprint(&bytes[..parts.len().min(3)])
}

/// The indexes are keyed by [`hash_of`] values: hashed as themselves.
type ByHash = HashMap<u64, Slot, BuildHasherDefault<crate::json::hash::FingerprintHasher>>;

/// The responses of one hash: nearly always one, held without an
/// allocation of its own (two per response were most of building the
/// table).
#[derive(Debug)]
enum Slot {
    One(u32),
    Many(Vec<u32>),
}

impl Slot {
    fn indexes(&self) -> &[u32] {
        match self {
            Slot::One(i) => std::slice::from_ref(i),
            Slot::Many(v) => v,
        }
    }

    /// Adds `i` unless it is there.
    fn add(&mut self, i: u32) {
        match self {
            Slot::One(j) if *j == i => {}
            Slot::One(j) => *self = Slot::Many(vec![*j, i]),
            Slot::Many(v) if v.contains(&i) => {}
            Slot::Many(v) => v.push(i),
        }
    }
}

/// Adds `i` under `key`.
fn index(by: &mut ByHash, key: u64, i: u32) {
    by.entry(key)
        .and_modify(|s| s.add(i))
        .or_insert(Slot::One(i));
}

/// The responses under `key`.
fn under(by: &ByHash, key: u64) -> impl Iterator<Item = u32> + '_ {
    by.get(&key).map_or(&[][..], Slot::indexes).iter().copied()
}

impl Responses {
    /// A table of these kept responses (from [`Responses::kept`]).
    pub fn from_kept(kept: Vec<Response>) -> Responses {
        let mut t = Responses::default();
        for r in kept {
            t.insert(r);
        }
        t.saved();
        t
    }

    /// Indexes into [`Responses::kept`] of the copies added or replaced
    /// since the last [`Responses::saved`], ascending: what a checkpoint
    /// kept as one row per response writes.
    pub fn changed(&self) -> Vec<u32> {
        let mut c = self.changed.clone();
        c.sort_unstable();
        c.dedup();
        c
    }

    /// The changes so far are saved.
    pub fn saved(&mut self) {
        self.changed.clear();
        self.prior.clear();
        self.saved_len = u32::try_from(self.kept.len()).expect("fewer than 2^32 responses");
    }

    /// The copy kept at the last [`Responses::saved`] of response `i`, when
    /// it was there then and has been replaced since: what an output that
    /// never rewrites a row wrote of it (it writes the difference).
    pub fn replaced_since_saved(&self, i: u32) -> Option<&Response> {
        self.prior.iter().find(|(j, _)| *j == i).map(|(_, r)| r)
    }

    /// The kept copies, in the order first seen.
    pub fn kept(&self) -> &[Response] {
        &self.kept
    }

    fn exact_key(r: &Response, message: &str) -> u64 {
        match &r.request_id {
            Some(q) => hash_of(&[Some(message), Some(q)]),
            None => hash_of(&[Some(message), None, Some(&r.session)]),
        }
    }

    fn insert(&mut self, r: Response) {
        let i = u32::try_from(self.kept.len()).expect("fewer than 2^32 responses");
        if let Some(m) = r.message_id.as_deref() {
            let exact = Self::exact_key(&r, m);
            let by = hash_of(&[Some(m), Some(&r.session)]);
            index(&mut self.exact, exact, i);
            index(&mut self.by_message, by, i);
        }
        self.changed.push(i);
        self.kept.push(r);
    }

    /// The index of the response `r` is a copy of, when the table has it
    /// (by the module's rules; a line without a message id is a response
    /// of its own: None).
    pub fn find(&self, r: &Response) -> Option<u32> {
        let m = r.message_id.as_deref()?;
        self.find_of(r, m)
    }

    fn find_of(&self, r: &Response, m: &str) -> Option<u32> {
        under(&self.exact, Self::exact_key(r, m))
            .find(|&i| {
                let k = &self.kept[i as usize];
                k.message_id.as_deref() == Some(m)
                    && k.request_id == r.request_id
                    && (r.request_id.is_some() || k.session == r.session)
            })
            .or_else(|| {
                under(&self.by_message, hash_of(&[Some(m), Some(&r.session)])).find(|&i| {
                    let k = &self.kept[i as usize];
                    k.message_id.as_deref() == Some(m)
                        && k.session == r.session
                        && (r.sidechain || k.sidechain)
                })
            })
    }

    /// Adds one copy (see the module's rules).
    pub fn add(&mut self, r: Response) {
        let Some(m) = r.message_id.as_deref() else {
            self.insert(r);
            return;
        };
        let found = self.find_of(&r, m);
        match found {
            Some(i) => {
                if r.replaces(&self.kept[i as usize]) {
                    // The kept copy is now found by its own keys too.
                    let keys = [
                        (true, Self::exact_key(&r, m)),
                        (false, hash_of(&[Some(m), Some(&r.session)])),
                    ];
                    for (exact, k) in keys {
                        let by = if exact {
                            &mut self.exact
                        } else {
                            &mut self.by_message
                        };
                        index(by, k, i);
                    }
                    self.changed.push(i);
                    let old = std::mem::replace(&mut self.kept[i as usize], r);
                    if i < self.saved_len && self.replaced_since_saved(i).is_none() {
                        self.prior.push((i, old));
                    }
                }
            }
            None => self.insert(r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(m: Option<&str>, q: Option<&str>, s: &str, sidechain: bool, tokens: u64) -> Response {
        Response {
            message_id: m.map(str::to_owned),
            request_id: q.map(str::to_owned),
            session: s.to_owned(),
            sidechain,
            speed: false,
            model: Some("x".into()),
            project: String::new(),
            usage: Usage {
                input: tokens,
                total_tokens: tokens,
                ..Usage::default()
            },
            time: None,
            cache_write_1h: 0,
        }
    }

    fn total(rs: &[Response]) -> u64 {
        let mut t = Responses::default();
        for x in rs {
            t.add(x.clone());
        }
        t.kept().iter().map(|k| k.usage.total_tokens).sum()
    }

    /// Each case checked against `ccusage claude daily` 20.0.24.
    #[test]
    fn copies_count_once_as_ccusage_counts_them() {
        let (m, r1, r3) = (Some("m"), Some("r1"), Some("r3"));
        // Streamed lines of one response: the largest.
        assert_eq!(
            total(&[r(m, r1, "s", false, 5), r(m, r1, "t", false, 20)]),
            20
        );
        // A sidechain replay with a new request id, in its session.
        assert_eq!(
            total(&[r(m, r1, "s", false, 5), r(m, r3, "s", true, 50)]),
            5
        );
        assert_eq!(
            total(&[r(m, r3, "s", true, 50), r(m, r1, "s", false, 5)]),
            5
        );
        // ... but not in another session.
        assert_eq!(
            total(&[r(m, r1, "s", false, 5), r(m, r3, "t", true, 50)]),
            55
        );
        // The same key: the non-sidechain copy, across sessions.
        assert_eq!(
            total(&[r(m, r1, "s", true, 50), r(m, r1, "t", false, 5)]),
            5
        );
        // No request id: one response per session.
        assert_eq!(
            total(&[r(m, None, "s", false, 5), r(m, None, "s", false, 50)]),
            50
        );
        assert_eq!(
            total(&[r(m, None, "s", false, 5), r(m, None, "t", false, 50)]),
            55
        );
        // No message id: never a copy.
        assert_eq!(
            total(&[r(None, r1, "s", false, 5), r(None, r1, "s", false, 5)]),
            10
        );
        // An exact copy found before the sidechain match.
        let three = [
            r(m, r3, "s", true, 50),
            r(m, r1, "t", false, 5),
            r(m, r3, "t", true, 60),
        ];
        assert_eq!(total(&three), 65);
        // A sidechain copy first, replaced by the parent's first streamed
        // line: the parent's later lines still find it (a subagent file
        // sorts before its parent's).
        let sub_first = [
            r(m, r3, "s", true, 2),
            r(m, r1, "s", false, 5),
            r(m, r1, "s", false, 20),
        ];
        assert_eq!(total(&sub_first), 20);
    }

    /// What an output that never rewrites a row needs: the copy it wrote of
    /// each response replaced since the last save, once (the first), and
    /// none for responses new since.
    #[test]
    fn the_copy_saved_of_a_replaced_response_is_kept_until_the_next_save() {
        let (m, n, r1) = (Some("m"), Some("n"), Some("r1"));
        let mut t = Responses::from_kept(vec![r(m, r1, "s", false, 5)]);
        assert_eq!(t.changed(), Vec::<u32>::new());
        t.add(r(m, r1, "s", false, 20));
        t.add(r(m, r1, "s", false, 30));
        t.add(r(n, r1, "s", false, 7));
        t.add(r(n, r1, "s", false, 9));
        assert_eq!(t.changed(), vec![0, 1]);
        assert_eq!(t.kept()[0].usage.total_tokens, 30);
        assert_eq!(t.replaced_since_saved(0).unwrap().usage.total_tokens, 5);
        assert_eq!(t.replaced_since_saved(1), None);
        t.saved();
        assert_eq!(t.replaced_since_saved(0), None);
        t.add(r(n, r1, "s", false, 11));
        assert_eq!(t.changed(), vec![1]);
        assert_eq!(t.replaced_since_saved(1).unwrap().usage.total_tokens, 9);
    }
}
