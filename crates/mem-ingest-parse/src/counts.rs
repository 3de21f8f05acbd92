//! What one entry's line added to its source's report, kept by the source
//! as it reads, so that deduplication can take a copy's counts out of the
//! report without reading its line again.
//!
//! A fork or a subagent replays its parent's history: most of such a file
//! is copies. Reading each copy's line a second time in the engine's serial
//! delivery (to learn its counts) cost about a third of a run over a Codex
//! archive; the source, which has just counted the line, knows them
//! already. The counts are differences of the report's counters taken
//! around each line, so they are exactly what reading that line alone
//! (with the context before it) adds.

use crate::record::Usage;
use crate::report::{EntryCounts, Report, KNOWN_ENTRY_TYPES};

/// The counters a line adds to besides entry types, unknown roles and
/// usage: `records`, `filtered`, `no_record`, `repaired`, then `roles`.
const SCALARS: usize = 10;

fn scalars(r: &Report) -> [u64; SCALARS] {
    let mut s = [0; SCALARS];
    s[0] = r.records;
    s[1] = r.filtered;
    s[2] = r.no_record;
    s[3] = r.repaired;
    s[4..].copy_from_slice(&r.roles);
    s
}

/// One counter a line changed beyond what [`LineCounts`] holds in place.
/// Indices are those of the source's report.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    /// A scalar counter ([`SCALARS`] order) by more than `u8::MAX`.
    Scalar(u8, u64),
    /// An entry type: `< KNOWN_ENTRY_TYPES` a known one, else the
    /// others' index plus `KNOWN_ENTRY_TYPES`.
    Entry(u32, u64),
    /// A `message` of an unknown role, by its index.
    UnknownRole(u32, u64),
    /// The report's usage.
    Usage(Usage),
    /// A model's messages and usage.
    Model(u32, u64, Usage),
    /// A usage row the line added ([`Report::usage_rows`]): its line and
    /// its place on it (`UsageAt::line`, `UsageAt::seq`).
    Row(u64, u32),
}

/// What one entry's line added to the report of the source that read it
/// (opaque: the engine's deduplication takes a copy's counts out with it;
/// see [`crate::RecordSource::entry_counts`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LineCounts {
    /// Additions to the scalar counters, when at most `u8::MAX`.
    small: [u8; SCALARS],
    /// The entry type counted once (index plus 1 as in [`Change::Entry`];
    /// 0: none).
    entry: u32,
    /// Everything else (no allocation for a line without usage).
    more: Vec<Change>,
    /// The usage rows ([`Report::usage_rows`]) the line added.
    usage_rows: u32,
}

impl LineCounts {
    /// Whether the line added usage rows (exact for a database's rows,
    /// each counted whole when it is pushed: a copy that added none takes
    /// none out, though a database's rows may share a line number, Goose's
    /// ledger ids and message row ids; a line format may count a held
    /// entry's usage at a later line).
    pub fn adds_usage_rows(&self) -> bool {
        self.usage_rows > 0
    }
}

/// Follows a source's report line by line: the counters as they were after
/// the last line, and what the last entry's line added.
#[derive(Debug, Default)]
pub struct Tracker {
    scalars: [u64; SCALARS],
    known: [u64; KNOWN_ENTRY_TYPES],
    other: Vec<u64>,
    unknown: Vec<u64>,
    usage: Usage,
    models: Vec<(u64, Usage)>,
    /// The type counters' moves seen ([`EntryCounts::moves`]).
    moves: u64,
    /// The usage rows the report held after the last line.
    rows: usize,
    last: LineCounts,
}

fn usage_changed(a: &Usage, b: &Usage) -> bool {
    a.input != b.input
        || a.output != b.output
        || a.cache_read != b.cache_read
        || a.cache_write != b.cache_write
        || a.total_tokens != b.total_tokens
        || a.cost.to_bits() != b.cost.to_bits()
}

/// `now - before`, field by field (counters only grow within a line; a
/// sum stuck at `u64::MAX` gives what it could still add).
fn usage_delta(now: &Usage, before: &Usage) -> Usage {
    Usage {
        input: now.input.saturating_sub(before.input),
        output: now.output.saturating_sub(before.output),
        cache_read: now.cache_read.saturating_sub(before.cache_read),
        cache_write: now.cache_write.saturating_sub(before.cache_write),
        total_tokens: now.total_tokens.saturating_sub(before.total_tokens),
        cost: now.cost - before.cost,
    }
}

impl Tracker {
    /// A tracker of `report` as it stands.
    pub fn new(report: &Report) -> Self {
        let mut t = Tracker::default();
        // The type counters as they stand, compared in full (they may
        // hold counts that no move the tracker could follow made).
        t.compare_entries(&report.entries, &mut LineCounts::default());
        t.moves = report.entries.moves().0;
        // The usage rows as they stand: the line counted below adds none
        // (walked, each was a change of a line no one takes: a batch's
        // tracker walked every row of the batches before it).
        t.rows = report.usage_rows.len();
        t.after_line(report, false);
        t
    }

    /// What the last entry's line added.
    pub fn last(&self) -> &LineCounts {
        &self.last
    }

    /// What the last entry's line added, taken (the tracker keeps none
    /// after): a source that keeps each entry's counts moves them instead
    /// of copying them (their changes are a list of their own).
    pub fn take_last(&mut self) -> LineCounts {
        std::mem::take(&mut self.last)
    }

    /// Learns what moved among the type counters since the last line.
    /// Most lines move one type's count once: that move, which the
    /// counters keep, is all there is to learn. After any other change
    /// (several moves, or a count taken down), one pass over them, each
    /// compared with what it was.
    fn entries_moved(&mut self, entries: &EntryCounts, c: &mut LineCounts) {
        let (moves, last) = entries.moves();
        match last {
            _ if moves == self.moves => {}
            Some((slot, n)) if moves == self.moves + 1 => {
                let slot = slot as usize;
                match slot.checked_sub(KNOWN_ENTRY_TYPES) {
                    None => self.known[slot] += n,
                    Some(j) => {
                        if self.other.len() <= j {
                            self.other.resize(j + 1, 0);
                        }
                        self.other[j] += n;
                    }
                }
                if n == 1 {
                    c.entry = slot as u32 + 1;
                } else if n > 0 {
                    c.more.push(Change::Entry(slot as u32, n));
                }
            }
            _ => self.compare_entries(entries, c),
        }
        self.moves = moves;
        debug_assert_eq!(&self.known, entries.known(), "known types followed");
        debug_assert!(
            self.other.len() == entries.others().len()
                && self
                    .other
                    .iter()
                    .zip(entries.others())
                    .all(|(a, (_, b))| a == b),
            "other types followed"
        );
    }

    /// One pass over the type counters, each compared with what it was
    /// and brought up to date where it moved.
    fn compare_entries(&mut self, entries: &EntryCounts, c: &mut LineCounts) {
        let (known, other) = (entries.known(), entries.others());
        let mut first = true;
        let mut moved = |i: usize, d: u64, c: &mut LineCounts| {
            if d == 0 {
                return;
            }
            if std::mem::take(&mut first) && d == 1 {
                c.entry = i as u32 + 1;
            } else {
                c.more.push(Change::Entry(i as u32, d));
            }
        };
        for (i, (b, n)) in self.known.iter_mut().zip(known).enumerate() {
            if *n != *b {
                moved(i, n.saturating_sub(*b), c);
                *b = *n;
            }
        }
        if self.other.len() != other.len() {
            self.other.resize(other.len(), 0);
        }
        for (j, (b, (_, n))) in self.other.iter_mut().zip(other).enumerate() {
            if *n != *b {
                moved(KNOWN_ENTRY_TYPES + j, n.saturating_sub(*b), c);
                *b = *n;
            }
        }
    }

    /// Called after every line: learns what it added to `report`, and,
    /// when it was an entry, keeps that as [`Tracker::last`].
    pub fn after_line(&mut self, report: &Report, entry: bool) {
        let mut c = LineCounts::default();
        let now = scalars(report);
        let d: [u64; SCALARS] = std::array::from_fn(|i| now[i].saturating_sub(self.scalars[i]));
        if d.iter().fold(0, |big, d| big | d >> 8) == 0 {
            // The usual line: every counter moved by less than 256.
            for (s, d) in c.small.iter_mut().zip(d) {
                *s = d as u8;
            }
        } else {
            for (i, d) in d.into_iter().enumerate() {
                match u8::try_from(d) {
                    Ok(d) => c.small[i] = d,
                    Err(_) => c.more.push(Change::Scalar(i as u8, d)),
                }
            }
        }
        self.scalars = now;
        self.entries_moved(&report.entries, &mut c);
        self.unknown.resize(report.unknown_roles.len(), 0);
        for (i, (b, (_, n))) in self
            .unknown
            .iter_mut()
            .zip(&report.unknown_roles)
            .enumerate()
        {
            if *n > *b {
                c.more.push(Change::UnknownRole(i as u32, n - *b));
            }
            *b = *n;
        }
        if usage_changed(&report.usage, &self.usage) {
            c.more
                .push(Change::Usage(usage_delta(&report.usage, &self.usage)));
            self.usage = report.usage;
            self.models
                .resize(report.by_model.len(), (0, Usage::default()));
            for (i, (b, m)) in self.models.iter_mut().zip(&report.by_model).enumerate() {
                if m.messages != b.0 || usage_changed(&m.usage, &b.1) {
                    c.more.push(Change::Model(
                        i as u32,
                        m.messages.saturating_sub(b.0),
                        usage_delta(&m.usage, &b.1),
                    ));
                    *b = (m.messages, m.usage);
                }
            }
        } else if self.models.len() < report.by_model.len() {
            // A model named with zero usage.
            for m in &report.by_model[self.models.len()..] {
                self.models.push((m.messages, m.usage));
            }
        }
        let rows = report.usage_rows.len();
        c.usage_rows = u32::try_from(rows.saturating_sub(self.rows)).unwrap_or(u32::MAX);
        // Each row the line added, by its line and place on it (none
        // when the report was taken so far: its rows start again).
        for r in report.usage_rows.get(self.rows..).unwrap_or_default() {
            c.more.push(Change::Row(r.at.line, r.at.seq));
        }
        self.rows = rows;
        if entry {
            self.last = c;
        }
    }
}

impl LineCounts {
    /// The usage rows the line added, by their line and place on it
    /// (`UsageAt::line`, `UsageAt::seq`), when the report kept rows.
    pub fn usage_rows(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.more.iter().filter_map(|c| match c {
            Change::Row(line, seq) => Some((*line, *seq)),
            _ => None,
        })
    }
}

/// The counts of the copies found in one part, summed, to be taken out of
/// that part's report at once (the report of the source whose
/// [`LineCounts`] they are).
#[derive(Debug, Default)]
pub struct Removal {
    entries: u64,
    scalars: [u64; SCALARS],
    types: Vec<u64>,
    unknown: Vec<u64>,
    usage: Usage,
    models: Vec<(u64, Usage)>,
}

fn at<T: Default + Clone>(v: &mut Vec<T>, i: usize) -> &mut T {
    if v.len() <= i {
        v.resize(i + 1, T::default());
    }
    &mut v[i]
}

impl Removal {
    /// Adds one copy's counts.
    pub fn add(&mut self, c: &LineCounts) {
        self.entries += 1;
        for (s, d) in self.scalars.iter_mut().zip(c.small) {
            *s += u64::from(d);
        }
        if c.entry > 0 {
            *at(&mut self.types, c.entry as usize - 1) += 1;
        }
        for ch in &c.more {
            match *ch {
                Change::Scalar(i, d) => self.scalars[usize::from(i)] += d,
                Change::Entry(i, d) => *at(&mut self.types, i as usize) += d,
                Change::UnknownRole(i, d) => *at(&mut self.unknown, i as usize) += d,
                Change::Usage(u) => self.usage.add(&u),
                Change::Model(i, n, u) => {
                    let m = at(&mut self.models, i as usize);
                    m.0 += n;
                    m.1.add(&u);
                }
                // Taken out by the engine, by line and place.
                Change::Row(..) => {}
            }
        }
    }

    /// Takes the copies out of `report`, as [`Report::remove_duplicate`]
    /// does for each: they stay lines, counted in `deduplicated`.
    pub fn apply(self, report: &mut Report) {
        if self.entries == 0 {
            return;
        }
        let s = self.scalars;
        report.records = report.records.saturating_sub(s[0]);
        report.filtered = report.filtered.saturating_sub(s[1]);
        report.no_record = report.no_record.saturating_sub(s[2]);
        report.repaired = report.repaired.saturating_sub(s[3]);
        for (r, d) in report.roles.iter_mut().zip(&s[4..]) {
            *r = r.saturating_sub(*d);
        }
        if self.types.iter().any(|d| *d > 0) {
            let (mut known, other) = report.entries.parts();
            let mut other = other.to_vec();
            for (i, d) in self.types.iter().enumerate() {
                match i.checked_sub(KNOWN_ENTRY_TYPES) {
                    None => known[i] = known[i].saturating_sub(*d),
                    Some(j) => {
                        if let Some(o) = other.get_mut(j) {
                            o.1 = o.1.saturating_sub(*d);
                        }
                    }
                }
            }
            report.entries = EntryCounts::from_parts(known, other);
        }
        for (r, d) in report.unknown_roles.iter_mut().zip(&self.unknown) {
            r.1 = r.1.saturating_sub(*d);
        }
        report.usage.sub(&self.usage);
        for (m, (n, u)) in report.by_model.iter_mut().zip(&self.models) {
            m.messages = m.messages.saturating_sub(*n);
            m.usage.sub(u);
        }
        report.deduplicated += self.entries;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::format::{Format, Input};
    use crate::formats::Codex;
    use crate::source::SourceOptions;

    /// A rollout with a line of each kind that counts something: the
    /// header, a model, usage (twice for one model, once for another, one
    /// repeated total), records of three roles and their twin, a message
    /// of an unknown role, a damaged line and a line repaired.
    fn rollout() -> Vec<u8> {
        let lines = [
            r#"{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1","cwd":"/a","model_provider":"openai"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:01.000Z","type":"turn_context","payload":{"cwd":"/a","model":"gpt-5"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:02.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:02.500Z","type":"event_msg","payload":{"type":"user_message","message":"hi"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:03.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"reasoning_output_tokens":1,"total_tokens":13}}}}"#,
            "not json",
            r#"{"timestamp":"2026-01-01T00:00:04.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"reasoning_output_tokens":1,"total_tokens":13}}}}"#,
            r#"{"timestamp":"2026-01-01T00:00:05.000Z","type":"response_item","payload":{"type":"message","role":"robot","content":[]}}"#,
            r#"{"timestamp":"2026-01-01T00:00:06.000Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"caf\uD800"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:07.000Z","type":"turn_context","payload":{"cwd":"/b","model":"gpt-5.2"}}"#,
            r#"{"timestamp":"2026-01-01T00:00:08.000Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":30,"cached_input_tokens":4,"output_tokens":9,"reasoning_output_tokens":1,"total_tokens":39}}}}"#,
            r#"{"timestamp":"2026-01-01T00:00:09.000Z","type":"response_item","payload":{"type":"function_call","name":"f","arguments":"{}","call_id":"c2"}}"#,
        ];
        let mut b = lines.join("\n").into_bytes();
        b.push(b'\n');
        b
    }

    /// Each entry's counts, and the final report, of reading `data`.
    fn entries(data: &[u8]) -> (Vec<LineCounts>, Report) {
        let opts = SourceOptions::new().count_entries(true);
        let path = Path::new("rollout-2026-01-01T00-00-00-t1.jsonl");
        let mut src = Codex.open(Input::Bytes(data), path, &opts).unwrap();
        let mut all = Vec::new();
        while src.next_entry().unwrap().is_some() {
            all.push(src.entry_counts().expect("counts kept").clone());
        }
        (all, src.report().clone())
    }

    /// The tracker follows the type counters' single moves, by text or by
    /// index, and learns the rest by comparing: each line's counts are
    /// what it added, also after a count taken down, several moves in a
    /// line, or a tracker made over counts it did not see made.
    #[test]
    fn a_tracker_follows_moves_and_changes_alike() {
        let mut r = Report::default();
        r.entries.add("message", 2);
        r.entries.add("future", 1);
        let mut t = Tracker::new(&r);
        assert_eq!(t.last(), &LineCounts::default());
        let line = |t: &mut Tracker, r: &Report| {
            t.after_line(r, true);
            t.last().clone()
        };
        // One move of a known type, of a new type by index, then the same
        // type by index and by its text.
        r.entries.add("message", 1);
        assert_eq!(line(&mut t, &r).entry, 2);
        r.entries.add_indexed(3, "event_msg/token_count", 1);
        assert_eq!(line(&mut t, &r).entry, KNOWN_ENTRY_TYPES as u32 + 2);
        r.entries.add_indexed(3, "event_msg/token_count", 1);
        assert_eq!(line(&mut t, &r).entry, KNOWN_ENTRY_TYPES as u32 + 2);
        r.entries.add("event_msg/token_count", 1);
        assert_eq!(line(&mut t, &r).entry, KNOWN_ENTRY_TYPES as u32 + 2);
        assert_eq!(r.entries.get("event_msg/token_count"), 3);
        // A move by more than one; no move.
        r.entries.add_indexed(0, "future", 4);
        let c = line(&mut t, &r);
        assert_eq!(
            (c.entry, c.more.clone()),
            (0, vec![Change::Entry(KNOWN_ENTRY_TYPES as u32, 4)])
        );
        assert_eq!(line(&mut t, &r), LineCounts::default());
        // Two moves in a line; a count taken down, then one up.
        r.entries.add("session", 1);
        r.entries.add("future", 1);
        let c = line(&mut t, &r);
        assert_eq!(
            (c.entry, c.more.clone()),
            (1, vec![Change::Entry(KNOWN_ENTRY_TYPES as u32, 1)])
        );
        r.entries.sub("message", 1);
        r.entries.add("label", 1);
        assert_eq!(line(&mut t, &r).entry, 9);
        r.entries.add("label", 1);
        assert_eq!(line(&mut t, &r).entry, 9);
        // Counts replaced whole: a tracker made over them starts from them.
        let (known, other) = r.entries.parts();
        r.entries = EntryCounts::from_parts(known, other.to_vec());
        let mut t = Tracker::new(&r);
        r.entries.add("future", 1);
        assert_eq!(line(&mut t, &r).entry, KNOWN_ENTRY_TYPES as u32 + 1);
        assert_eq!(r.entries.get("future"), 7);
    }

    #[test]
    fn every_entry_taken_out_leaves_nothing() {
        let (all, mut report) = entries(&rollout());
        assert_eq!(all.len(), 11);
        assert_eq!((report.skipped, report.repaired), (1, 1));
        assert_eq!(report.by_model.len(), 2);
        let mut removal = Removal::default();
        for c in &all {
            removal.add(c);
        }
        removal.apply(&mut report);
        assert_eq!(report.records, 0);
        assert_eq!(report.roles, [0; 6]);
        assert_eq!((report.no_record, report.repaired), (0, 0));
        assert_eq!(report.entries.total(), 0);
        assert_eq!(report.usage, Usage::default());
        assert!(report.unknown_roles.iter().all(|(_, n)| *n == 0));
        for m in &report.by_model {
            assert_eq!((m.messages, m.usage), (0, Usage::default()), "{}", m.model);
        }
        // Lines and skips stay: copies are lines, counted as deduplicated.
        assert_eq!(
            (report.lines, report.skipped, report.deduplicated),
            (12, 1, 11)
        );
    }

    #[test]
    fn an_entry_counts_what_reading_its_line_alone_counts() {
        let data = rollout();
        let (all, whole) = entries(&data);
        // Every entry but the first two, taken out of the whole, leaves
        // what reading the first two lines alone counts.
        let cut = data
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(1)
            .unwrap()
            .0
            + 1;
        let (_, first_two) = entries(&data[..cut]);
        let mut rest = whole.clone();
        let mut removal = Removal::default();
        for c in &all[2..] {
            removal.add(c);
        }
        removal.apply(&mut rest);
        assert_eq!(rest.records, first_two.records);
        assert_eq!(rest.no_record, first_two.no_record);
        assert_eq!(rest.entries.total(), 2);
        assert_eq!(rest.entries.get("session_meta"), 1);
        assert_eq!(rest.entries.get("turn_context"), 1);
        assert_eq!(rest.usage, Usage::default());
        // The third line alone: a user record, its twin none; the fifth a
        // usage of 6 input, 4 cached, 3 output for gpt-5.
        let mut one = Removal::default();
        one.add(&all[4]);
        let mut r = whole.clone();
        one.apply(&mut r);
        let gpt5 = |r: &Report| {
            r.by_model.iter().find(|m| m.model == "gpt-5").map(|m| {
                (
                    m.messages,
                    m.usage.input,
                    m.usage.cache_read,
                    m.usage.output,
                )
            })
        };
        assert_eq!(gpt5(&whole), Some((1, 6, 4, 3)));
        assert_eq!(gpt5(&r), Some((0, 0, 0, 0)));
        assert_eq!(whole.usage.input - r.usage.input, 6);
        assert_eq!(all[2].small[4 + crate::record::Role::User.index()], 1);
        assert_eq!(
            all[3],
            LineCounts {
                small: [0, 0, 1, 0, 0, 0, 0, 0, 0, 0],
                ..all[3].clone()
            }
        );
    }
}
