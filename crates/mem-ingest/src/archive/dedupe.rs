//! Deduplication: each entry once per lineage (a session, the files that
//! name it as parent, and repeated headers of it), never across unrelated
//! sessions.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use crate::json::FingerprintHasher;

type FastSet = HashSet<u64, BuildHasherDefault<FingerprintHasher>>;

/// A set of fingerprints in about 8 to 11 bytes each: a sorted vector, and
/// a hash set of recent ones that is merged into it when it reaches an
/// eighth of the vector's size.
#[derive(Default)]
pub struct FpSet {
    sorted: Vec<u64>,
    recent: FastSet,
}

impl FpSet {
    pub fn from_sorted(sorted: Vec<u64>) -> Self {
        debug_assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        FpSet {
            sorted,
            recent: FastSet::default(),
        }
    }

    pub fn contains(&self, fp: u64) -> bool {
        self.recent.contains(&fp) || sorted_contains(&self.sorted, fp)
    }

    /// Inserts; false when it was there. The recent set is probed once,
    /// by its insert (a look before it probed it twice for every new
    /// fingerprint, the many).
    pub fn insert(&mut self, fp: u64) -> bool {
        if sorted_contains(&self.sorted, fp) || !self.recent.insert(fp) {
            return false;
        }
        if self.recent.len() >= self.merge_at() {
            self.compact();
        }
        true
    }

    /// Makes room for `n` more, as many as fit before the next merge.
    pub fn reserve(&mut self, n: usize) {
        let room = self.merge_at().saturating_sub(self.recent.len());
        self.recent.reserve(n.min(room));
    }

    /// The size of `recent` at which it is merged into `sorted`.
    fn merge_at(&self) -> usize {
        (self.sorted.len() / 8).max(4096)
    }

    fn compact(&mut self) {
        let mut recent: Vec<u64> = self.recent.drain().collect();
        recent.sort_unstable();
        let old = std::mem::take(&mut self.sorted);
        let mut merged = Vec::with_capacity(old.len() + recent.len());
        let (mut i, mut j) = (0, 0);
        while i < old.len() && j < recent.len() {
            if old[i] < recent[j] {
                merged.push(old[i]);
                i += 1;
            } else {
                merged.push(recent[j]);
                j += 1;
            }
        }
        merged.extend_from_slice(&old[i..]);
        merged.extend_from_slice(&recent[j..]);
        self.sorted = merged;
    }

    /// Takes `fp` out (a delivery that failed: rare, so a removal from the
    /// sorted vector may shift it).
    pub fn remove(&mut self, fp: u64) {
        if !self.recent.remove(&fp) {
            if let Ok(i) = self.sorted.binary_search(&fp) {
                self.sorted.remove(i);
            }
        }
    }

    pub fn merge(&mut self, other: FpSet) {
        self.recent.extend(other.recent);
        self.recent.extend(other.sorted);
        self.compact();
    }

    #[cfg(test)]
    pub fn into_sorted(mut self) -> Vec<u64> {
        self.compact();
        self.sorted
    }

    /// Bytes of heap held (hash set buckets counted with their control
    /// bytes).
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.sorted.capacity() * 8 + self.recent.capacity() * 9 * 8 / 7
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sorted.len() + self.recent.len()
    }
}

/// Whether `sorted` holds `fp`. Fingerprints are spread evenly over the
/// u64s, so the search starts where `fp` would stand and widens from
/// there (a few cache lines), rather than halving the whole vector (a
/// cache miss a step once it is large). Any order of values is found all
/// the same, only slower.
fn sorted_contains(sorted: &[u64], fp: u64) -> bool {
    let n = sorted.len();
    if n == 0 {
        return false;
    }
    let guess = ((u128::from(fp) * n as u128) >> 64) as usize;
    let at = sorted[guess];
    if at == fp {
        return true;
    }
    let mut step = 1;
    if at < fp {
        // In (guess, n).
        let mut lo = guess + 1;
        loop {
            let hi = lo + step;
            if hi >= n {
                return sorted[lo..].binary_search(&fp).is_ok();
            }
            if sorted[hi] >= fp {
                return sorted[lo..=hi].binary_search(&fp).is_ok();
            }
            lo = hi + 1;
            step *= 2;
        }
    } else {
        // In [0, guess).
        let mut hi = guess;
        loop {
            if hi <= step {
                return sorted[..hi].binary_search(&fp).is_ok();
            }
            let lo = hi - step;
            if sorted[lo] <= fp {
                return sorted[lo..hi].binary_search(&fp).is_ok();
            }
            hi = lo;
            step *= 2;
        }
    }
}

/// Inserts into one session's lineage: see [`Lineages::emitter`].
pub struct Emitter<'l> {
    session: &'l str,
    at: At<'l>,
    /// See [`Emitter::expect`].
    expected: usize,
}

/// How far an [`Emitter`] has looked its session up.
enum At<'l> {
    Unresolved(&'l mut Lineages),
    /// The lineage's set; the session has no new fingerprints listed yet
    /// (`None`: none are, see [`Lineages::untracked`]).
    Set(&'l mut FpSet, Option<&'l mut HashMap<String, Vec<u64>>>),
    /// The lineage's set and the session's list of new fingerprints.
    Both(&'l mut FpSet, &'l mut Vec<u64>),
    /// Only while moving from one state to the next.
    Moving,
}

impl Emitter<'_> {
    /// Records `fp` as emitted in the session's lineage; false when it was
    /// already (as [`Lineages::insert`]).
    pub fn insert(&mut self, fp: u64) -> bool {
        if !self.set().insert(fp) {
            return false;
        }
        match std::mem::replace(&mut self.at, At::Moving) {
            At::Set(set, None) => self.at = At::Set(set, None),
            At::Set(set, Some(new_fps)) => {
                // The session's name is copied only when it is new.
                if !new_fps.contains_key(self.session) {
                    new_fps.insert(self.session.to_owned(), Vec::new());
                }
                let list = new_fps.get_mut(self.session).expect("inserted above");
                list.push(fp);
                self.at = At::Both(set, list);
            }
            At::Both(set, list) => {
                list.push(fp);
                self.at = At::Both(set, list);
            }
            At::Unresolved(_) | At::Moving => unreachable!("resolved above"),
        }
        true
    }

    /// Whether `fp` was emitted in the session's lineage (nothing recorded).
    pub fn contains(&mut self, fp: u64) -> bool {
        self.set().contains(fp)
    }

    /// Says that about `n` fingerprints are to be inserted: room is made
    /// for them in the lineage's set at the first insert, at once (up to
    /// its next merge). A part's fingerprints, inserted one by one into a
    /// lineage's new set, grew it a dozen times.
    pub fn expect(&mut self, n: usize) {
        self.expected = n;
    }

    /// The lineage's set, looked up at the first call. Inlined into
    /// [`Emitter::insert`], once per entry delivered, as when it was its
    /// only caller (a call there cost 2% of a Codex `stats`).
    #[inline(always)]
    fn set(&mut self) -> &mut FpSet {
        if let At::Unresolved(_) = self.at {
            let At::Unresolved(l) = std::mem::replace(&mut self.at, At::Moving) else {
                unreachable!("matched above")
            };
            let r = l.root(self.session);
            let Lineages {
                sets,
                new_fps,
                untracked,
                ..
            } = l;
            let set = sets.entry(r).or_default();
            set.reserve(self.expected);
            self.at = At::Set(set, (!*untracked).then_some(new_fps));
        }
        match &mut self.at {
            At::Set(set, _) | At::Both(set, _) => set,
            At::Unresolved(_) | At::Moving => unreachable!("resolved above"),
        }
    }
}

/// Lineages: a union-find over session ids, each root owning the set of
/// fingerprints emitted in its lineage.
#[derive(Default)]
pub struct Lineages {
    parent: HashMap<String, String>,
    sets: HashMap<String, FpSet>,
    /// What changed since the last checkpoint: fingerprints by the session
    /// that emitted them, and joins.
    new_fps: HashMap<String, Vec<u64>>,
    new_joins: Vec<(String, String)>,
    /// No checkpoint is kept: new fingerprints are not listed.
    untracked: bool,
}

impl Lineages {
    /// These lineages without [`Lineages::new_fingerprints`] (always
    /// empty), for a run that keeps no checkpoint: listing them cost a
    /// `stats` run's delivery a push (and the list's growth) for each.
    pub fn untracked(mut self) -> Self {
        self.untracked = true;
        self
    }

    fn root(&mut self, s: &str) -> String {
        let mut cur = s.to_owned();
        let mut path = Vec::new();
        while let Some(p) = self.parent.get(&cur) {
            if *p == cur {
                break;
            }
            path.push(cur.clone());
            cur = p.clone();
        }
        for n in path {
            self.parent.insert(n, cur.clone());
        }
        self.parent
            .entry(cur.clone())
            .or_insert_with(|| cur.clone());
        cur
    }

    /// Joins two sessions into one lineage.
    pub fn join(&mut self, a: &str, b: &str) {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra == rb {
            return;
        }
        self.new_joins.push((a.to_owned(), b.to_owned()));
        self.parent.insert(rb.clone(), ra.clone());
        if let Some(set) = self.sets.remove(&rb) {
            match self.sets.get_mut(&ra) {
                Some(into) => into.merge(set),
                None => {
                    self.sets.insert(ra, set);
                }
            }
        }
    }

    /// Whether the lineage of `session` has emitted `fp`.
    #[cfg(test)]
    pub fn contains(&mut self, session: &str, fp: u64) -> bool {
        let r = self.root(session);
        self.sets.get(&r).is_some_and(|s| s.contains(fp))
    }

    /// Records `fp` as emitted in the lineage of `session`; false when it
    /// was already.
    pub fn insert(&mut self, session: &str, fp: u64) -> bool {
        self.emitter(session).insert(fp)
    }

    /// [`Lineages::insert`] for many fingerprints of one session, with its
    /// lineage looked up once, at the first (a part's entries are all of
    /// one session: looking up its root and its sets by name for each was
    /// a third of the delivery's time on Claude Code archives).
    pub fn emitter<'l>(&'l mut self, session: &'l str) -> Emitter<'l> {
        Emitter {
            session,
            at: At::Unresolved(self),
            expected: 0,
        }
    }

    /// Takes back `fps`, the last fingerprints inserted for `session`, in
    /// the order they were (with no checkpoint since): a part whose
    /// delivery failed after its copies were decided emits nothing, and
    /// its entries must not be copies when it is read again.
    pub fn forget(&mut self, session: &str, fps: &[u64]) {
        if fps.is_empty() {
            return;
        }
        let r = self.root(session);
        if let Some(set) = self.sets.get_mut(&r) {
            for &fp in fps {
                set.remove(fp);
            }
        }
        if let Some(list) = self.new_fps.get_mut(session) {
            let keep = list.len().saturating_sub(fps.len());
            debug_assert_eq!(&list[keep..], fps);
            list.truncate(keep);
            if list.is_empty() {
                self.new_fps.remove(session);
            }
        }
    }

    /// Fingerprints inserted since [`Lineages::saved`], by session, sessions
    /// sorted.
    pub fn new_fingerprints(&self) -> Vec<(&str, &[u64])> {
        let mut v: Vec<(&str, &[u64])> = self
            .new_fps
            .iter()
            .map(|(s, f)| (s.as_str(), f.as_slice()))
            .collect();
        v.sort_unstable_by_key(|(s, _)| *s);
        v
    }

    /// Joins since [`Lineages::saved`], in order.
    pub fn new_joins(&self) -> &[(String, String)] {
        &self.new_joins
    }

    /// A checkpoint saved what changed.
    pub fn saved(&mut self) {
        self.new_fps.clear();
        self.new_joins.clear();
    }

    /// Every lineage: its sessions and its sorted fingerprints.
    pub fn snapshot(&mut self) -> Vec<(Vec<String>, Vec<u64>)> {
        let sessions: Vec<String> = self.parent.keys().cloned().collect();
        let mut groups: HashMap<String, Vec<String>> = HashMap::new();
        for s in sessions {
            let r = self.root(&s);
            groups.entry(r).or_default().push(s);
        }
        let mut out: Vec<(Vec<String>, Vec<u64>)> = groups
            .into_iter()
            .filter_map(|(r, mut members)| {
                members.sort();
                let set = self.sets.get_mut(&r)?;
                set.compact();
                Some((members, set.sorted.clone()))
            })
            .filter(|(_, fps)| !fps.is_empty())
            .collect();
        out.sort();
        out
    }

    /// Whether two sessions are of one lineage.
    pub fn same(&mut self, a: &str, b: &str) -> bool {
        self.root(a) == self.root(b)
    }

    /// Restores exported lineages.
    pub fn import(groups: Vec<(Vec<String>, Vec<u64>)>) -> Self {
        let mut l = Lineages::default();
        for (members, fps) in groups {
            let Some(first) = members.first() else {
                continue;
            };
            for m in &members[1..] {
                l.join(first, m);
            }
            let r = l.root(first);
            l.sets.insert(r, FpSet::from_sorted(fps));
        }
        l.saved();
        l
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pi::session_of_path;

    /// What `forget` takes back is gone from the lineage's set (whether
    /// still among the recent or merged into the sorted vector) and from
    /// the session's new fingerprints; what came before stays.
    #[test]
    fn forget_takes_back_the_last_inserted() {
        let mut l = Lineages::default();
        l.join("a", "b");
        let before: Vec<u64> = (0..5000u64).map(|i| i * 7 + 1).collect();
        for &fp in &before {
            assert!(l.insert("b", fp));
        }
        l.saved();
        // Enough to merge the recent ones into the sorted vector midway.
        let part: Vec<u64> = (0..5000u64).map(|i| i * 7 + 3).collect();
        let mut e = l.emitter("b");
        for &fp in &part {
            assert!(e.insert(fp));
        }
        assert!(l.insert("a", 2));
        l.forget("b", &part);
        for &fp in &part {
            assert!(!l.contains("a", fp), "{fp}");
        }
        assert!(before.iter().all(|&fp| l.contains("b", fp)));
        assert!(l.contains("b", 2));
        assert_eq!(l.new_fingerprints(), vec![("a", &[2u64][..])]);
        // Inserted again, they are new.
        assert!(part.iter().all(|&fp| l.insert("b", fp)));
    }

    #[test]
    fn fp_set_agrees_with_a_hash_set() {
        let mut s = FpSet::default();
        let mut reference = HashSet::new();
        let mut x = 1u64;
        for i in 0..100_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = if i % 5 == 0 { i } else { x % 200_000 };
            assert_eq!(s.insert(v), reference.insert(v));
        }
        assert_eq!(s.len(), reference.len());
        let sorted = s.into_sorted();
        assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(sorted.len(), reference.len());
    }

    #[test]
    fn sorted_search_finds_what_binary_search_finds() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Spread evenly, bunched at either end, and at the extremes.
        let shapes: [fn(u64) -> u64; 3] = [|v| v, |v| v >> 40, |v| u64::MAX - (v >> 40)];
        for shape in shapes {
            for n in [0usize, 1, 2, 3, 17, 1000, 50_000] {
                let mut v: Vec<u64> = (0..n).map(|_| shape(next())).collect();
                v.extend([0, u64::MAX].iter().take(n.min(2)));
                v.sort_unstable();
                v.dedup();
                for &fp in &v {
                    assert!(sorted_contains(&v, fp), "{fp} of {n}");
                }
                for probe in (0..2000)
                    .map(|_| shape(next()))
                    .chain([0, 1, u64::MAX - 1, u64::MAX])
                {
                    assert_eq!(
                        sorted_contains(&v, probe),
                        v.binary_search(&probe).is_ok(),
                        "{probe} of {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn at_most_16_bytes_per_fingerprint() {
        let mut s = FpSet::default();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for n in 1..=1_000_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            s.insert(x);
            if n % 50_000 == 0 {
                assert!(
                    s.heap_bytes() <= 16 * s.len() + 4096 * 20,
                    "{} bytes for {}",
                    s.heap_bytes(),
                    s.len()
                );
            }
        }
        assert!(
            s.heap_bytes() <= 16 * s.len(),
            "{} bytes for {}",
            s.heap_bytes(),
            s.len()
        );
    }

    #[test]
    fn lineages_join_and_survive_export() {
        let mut l = Lineages::default();
        assert!(l.insert("parent", 1));
        assert!(l.insert("other", 1), "unrelated sessions never share");
        assert!(l.insert("fork", 2));
        l.join("parent", "fork");
        assert!(l.contains("fork", 1) && l.contains("parent", 2));
        assert!(!l.insert("fork", 1));
        let mut back = Lineages::import(l.snapshot());
        assert!(back.contains("parent", 2) && back.contains("fork", 1));
        assert!(!back.contains("other", 2));
        assert!(back.contains("other", 1));
    }

    /// Untracked lineages decide copies as tracked ones do and list no new
    /// fingerprints; an emitter told to expect many inserts the same, and
    /// makes no set when it inserts none.
    #[test]
    fn untracked_and_expecting_emitters_decide_the_same() {
        let mut tracked = Lineages::default();
        let mut untracked = Lineages::default().untracked();
        for l in [&mut tracked, &mut untracked] {
            let mut e = l.emitter("a");
            e.expect(10_000);
            let fresh: Vec<bool> = [5, 6, 5, 7, 6].iter().map(|&fp| e.insert(fp)).collect();
            assert_eq!(fresh, [true, true, false, true, false]);
            l.emitter("b").expect(3);
            assert_eq!(l.sets.len(), 1, "no set for b, which inserted nothing");
            l.join("a", "c");
            assert!(!l.insert("c", 7) && l.insert("c", 8) && l.insert("b", 5));
        }
        assert_eq!(
            tracked.new_fingerprints(),
            [("a", &[5u64, 6, 7][..]), ("b", &[5][..]), ("c", &[8][..])]
        );
        assert!(untracked.new_fingerprints().is_empty());
        assert_eq!(tracked.snapshot(), untracked.snapshot());
        assert_eq!(
            untracked.snapshot(),
            [
                (vec!["a".to_owned(), "c".to_owned()], vec![5, 6, 7, 8]),
                (vec!["b".to_owned()], vec![5])
            ]
        );
        // A part whose every entry failed is taken back the same way.
        untracked.forget("c", &[8]);
        assert!(untracked.insert("c", 8));
    }

    #[test]
    fn parent_session_from_pi_file_names() {
        assert_eq!(
            session_of_path(
                "/Users/x/.pi/agent/sessions/--p--/2025-11-20T23-33-50-805Z_d703a1a9-1b7b.jsonl"
            ),
            "d703a1a9-1b7b"
        );
        assert_eq!(
            session_of_path("C:\\imported\\session-7.jsonl"),
            "session-7"
        );
    }
}
