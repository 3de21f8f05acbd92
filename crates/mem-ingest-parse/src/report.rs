//! What happened while reading one session file (or part of one).

use std::fmt;
use std::sync::Arc;

use crate::record::{Role, Usage};
use crate::usage::Response;

/// How many skips a report keeps in detail by default (all are counted).
pub const DEFAULT_MAX_SKIPS: usize = 1000;

/// Why a line was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// Not valid JSON; the parser's message.
    Malformed(String),
    /// The last line, without `\n`, is not valid JSON: a partial write.
    Truncated(String),
    /// Valid JSON, but not an object with a string `type`.
    NotAnEntry,
    /// Nested deeper than the parser's limit.
    TooDeep,
    /// Longer than the maximum line length; its bytes were not held.
    TooLong {
        /// Length of the line in bytes.
        len: u64,
    },
    /// The line holds NUL bytes.
    Nul,
    /// A file this reader does not read (a compressed rollout), counted
    /// as one skipped line; why.
    Unsupported(String),
}

/// A [`SkipReason`] seen exhaustively, borrowing its text: for the
/// engine's state layout, which writes each reason in a place of its own.
/// `SkipReason` is non-exhaustive for everyone else; a new reason added
/// here fails to compile in the layout until it has its place there.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReasonParts<'a> {
    Malformed(&'a str),
    Truncated(&'a str),
    NotAnEntry,
    TooDeep,
    TooLong { len: u64 },
    Nul,
    Unsupported(&'a str),
}

impl SkipReason {
    /// The reason seen exhaustively ([`SkipReasonParts`]).
    #[doc(hidden)]
    pub fn parts(&self) -> SkipReasonParts<'_> {
        match self {
            SkipReason::Malformed(e) => SkipReasonParts::Malformed(e),
            SkipReason::Truncated(e) => SkipReasonParts::Truncated(e),
            SkipReason::NotAnEntry => SkipReasonParts::NotAnEntry,
            SkipReason::TooDeep => SkipReasonParts::TooDeep,
            SkipReason::TooLong { len } => SkipReasonParts::TooLong { len: *len },
            SkipReason::Nul => SkipReasonParts::Nul,
            SkipReason::Unsupported(why) => SkipReasonParts::Unsupported(why),
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Malformed(e) => write!(f, "malformed JSON ({e})"),
            SkipReason::Truncated(e) => {
                write!(
                    f,
                    "truncated last line: no newline and not valid JSON ({e})"
                )
            }
            SkipReason::NotAnEntry => {
                f.write_str("valid JSON but not an object with a string \"type\"")
            }
            SkipReason::TooDeep => f.write_str("nested deeper than the parser's limit (1024)"),
            SkipReason::TooLong { len } => {
                write!(
                    f,
                    "line of {len} bytes is longer than the maximum line length"
                )
            }
            SkipReason::Nul => f.write_str("line holds NUL bytes"),
            SkipReason::Unsupported(why) => write!(f, "file not read: {why}"),
        }
    }
}

/// One skipped line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// 1-based line number.
    pub line: u64,
    /// 0-based byte offset of the line.
    pub byte: u64,
    /// Why it was skipped.
    pub reason: SkipReason,
}

/// Usage summed for one provider and model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelUsage {
    /// Provider as written.
    pub provider: String,
    /// Model as written.
    pub model: String,
    /// Assistant messages of this model.
    pub messages: u64,
    /// Usage summed over assistant messages and other usage-bearing
    /// entries that name this provider and model.
    pub usage: Usage,
}

/// How many entry types [`EntryCounts`] counts in place.
pub const KNOWN_ENTRY_TYPES: usize = 13;

const KNOWN_ENTRIES: [&str; KNOWN_ENTRY_TYPES] = [
    "session",
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
    "usage",
    "context_edit",
    "hookMessage",
];

/// The most unknown entry types, and the most unknown roles, a report
/// counts each under its own name: past them, a new one is counted under
/// [`MORE_TYPES`] or [`MORE_ROLES`]. Each line's type was looked for among
/// every name before it: a file of 100,000 lines each of a type of its own
/// (6 MB) took 42 s to count.
pub const MAX_NAMED: usize = 256;

/// Where entries of unknown types past the [`MAX_NAMED`] first are counted.
pub const MORE_TYPES: &str = "(more types)";

/// Where messages of unknown roles past the [`MAX_NAMED`] first are counted.
pub const MORE_ROLES: &str = "(more roles)";

/// Parsed lines counted by their `type`, unknown types under their own name
/// (the [`MAX_NAMED`] first; later ones under [`MORE_TYPES`]).
#[derive(Clone, Default)]
pub struct EntryCounts {
    known: [u64; KNOWN_ENTRIES.len()],
    other: Vec<(String, u64)>,
    /// The slots (see [`EntryCounts::slot`]) of types a format counts by
    /// their index in a table of its own, plus 1 (0: not yet seen), by
    /// index: found again without comparing text (see
    /// [`EntryCounts::add_indexed`]).
    indexed: Vec<u32>,
    /// How many times a count moved (`add` and `sub` calls), and the last
    /// move: its slot and amount (`None` after a `sub`). What lets a
    /// tracker of the counts (`crate::counts`) learn a line's one move
    /// without comparing every count.
    moves: u64,
    last: Option<(u32, u64)>,
}

/// The counts alone (not what finds or follows them).
impl PartialEq for EntryCounts {
    fn eq(&self, o: &Self) -> bool {
        self.known == o.known && self.other == o.other
    }
}

impl Eq for EntryCounts {}

/// The counts alone, as `PartialEq` compares them.
impl fmt::Debug for EntryCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryCounts")
            .field("known", &self.known)
            .field("other", &self.other)
            .finish()
    }
}

impl EntryCounts {
    /// The counts of the known types in their order, and the others.
    pub fn parts(&self) -> ([u64; KNOWN_ENTRY_TYPES], &[(String, u64)]) {
        (self.known, &self.other)
    }

    /// The known types' counts.
    pub fn known(&self) -> &[u64; KNOWN_ENTRY_TYPES] {
        &self.known
    }

    /// The other types' counts, in order of first appearance.
    pub fn others(&self) -> &[(String, u64)] {
        &self.other
    }

    /// How many times a count moved, and the last move (slot and amount;
    /// `None` when the last was a `sub`).
    pub fn moves(&self) -> (u64, Option<(u32, u64)>) {
        (self.moves, self.last)
    }

    /// Counts from [`EntryCounts::parts`].
    pub fn from_parts(known: [u64; KNOWN_ENTRY_TYPES], other: Vec<(String, u64)>) -> Self {
        EntryCounts {
            known,
            other,
            ..EntryCounts::default()
        }
    }

    /// A type's slot: `< KNOWN_ENTRY_TYPES` a known type's index, else
    /// `KNOWN_ENTRY_TYPES` plus its index among the others (added when
    /// new).
    fn slot(&mut self, ty: &str) -> u32 {
        let i = match KNOWN_ENTRIES.iter().position(|k| *k == ty) {
            Some(i) => i,
            None => KNOWN_ENTRY_TYPES + place(&mut self.other, ty, MORE_TYPES),
        };
        i as u32
    }

    fn add_at(&mut self, slot: u32, n: u64) {
        let i = slot as usize;
        match i.checked_sub(KNOWN_ENTRY_TYPES) {
            None => self.known[i] += n,
            Some(j) => self.other[j].1 += n,
        }
        self.moves += 1;
        self.last = Some((slot, n));
    }

    /// Counts one entry of type `ty`.
    pub fn add(&mut self, ty: &str, n: u64) {
        let slot = self.slot(ty);
        self.add_at(slot, n);
    }

    /// As [`EntryCounts::add`], for a type that is entry `key` of a table
    /// of the format's own (only Codex's: a report counts one format's
    /// lines): found again by `key`, without comparing text.
    pub fn add_indexed(&mut self, key: usize, ty: &str, n: u64) {
        let slot = match self.indexed.get(key) {
            Some(&s) if s > 0 => s - 1,
            _ => {
                let slot = self.slot(ty);
                if self.indexed.len() <= key {
                    self.indexed.resize(key + 1, 0);
                }
                self.indexed[key] = slot + 1;
                slot
            }
        };
        self.add_at(slot, n);
    }

    pub fn sub(&mut self, ty: &str, n: u64) {
        match KNOWN_ENTRIES.iter().position(|k| *k == ty) {
            Some(i) => self.known[i] -= n,
            None => {
                if let Some(j) = counted_at(&self.other, ty, MORE_TYPES) {
                    self.other[j].1 -= n;
                }
            }
        }
        self.moves += 1;
        self.last = None;
    }

    /// The count for one type.
    pub fn get(&self, ty: &str) -> u64 {
        self.iter().find(|(k, _)| *k == ty).map_or(0, |(_, n)| n)
    }

    /// Every type seen, with its count (known types first).
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        KNOWN_ENTRIES
            .iter()
            .zip(self.known)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (*k, n))
            .chain(
                self.other
                    .iter()
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, n)| (k.as_str(), *n)),
            )
    }

    /// The total over all types.
    pub fn total(&self) -> u64 {
        self.iter().map(|(_, n)| n).sum()
    }
}

/// Counts and findings for one session file (or a part of one).
///
/// Invariant: `records + deduplicated + no_record + skipped == lines`.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Bytes read.
    pub bytes: u64,
    /// Non-blank lines (a blank line holds only spaces, tabs and `\r`).
    pub lines: u64,
    /// Records produced, including those a role filter then dropped.
    pub records: u64,
    /// Records by role, indexed by [`Role::index`].
    pub roles: [u64; 6],
    /// Records a role filter dropped (counted in `records` too).
    pub filtered: u64,
    /// Every parsed line by its `type`, the header included.
    pub entries: EntryCounts,
    /// Parsed lines that give no record (header, `model_change`, unknown
    /// types and roles, ...).
    pub no_record: u64,
    /// Lines skipped; the first of them are in `skips`.
    pub skipped: u64,
    /// Lines kept after repair (invalid UTF-8, lone surrogate escapes).
    pub repaired: u64,
    /// The first skipped lines (up to the source's limit).
    pub skips: Vec<Skip>,
    /// Bytes of a last line without `\n` that does not parse yet, held
    /// back (not counted) when the source was told to wait for the rest.
    pub pending: u64,
    /// Entries dropped as copies of an entry seen before (counted by
    /// callers that deduplicate; the sources themselves never drop one).
    pub deduplicated: u64,
    /// The file holds nothing but whitespace, NULs and a BOM.
    pub empty: bool,
    /// Usage summed over assistant messages, pi 1.x `usage` entries, and
    /// the usage on compaction, branch_summary and toolResult entries.
    pub usage: Usage,
    /// Usage by provider and model, in order of first appearance.
    pub by_model: Vec<ModelUsage>,
    /// `message` entries whose role is unknown (or missing: `(none)`), by
    /// role; they give no record.
    pub unknown_roles: Vec<(String, u64)>,
    /// Usage-bearing lines of formats whose usage is counted once per
    /// response across the archive (Claude Code), in line order: the
    /// engine takes them out at delivery (see [`crate::usage`]); never
    /// saved with a file's report.
    pub responses: Vec<Response>,
    /// Each usage counted in `usage`, one row per response, when
    /// [`Report::keep_usage_rows`] (the `usage` report and the sinks'
    /// usage rows ask for them); never saved with a file's report.
    /// Invariant: their usages sum to `usage` (deduplication takes a
    /// copy's rows out with its counts).
    pub usage_rows: Vec<UsageRow>,
    /// Whether [`Report::add_usage_at`] keeps rows ([`SourceOptions`]'s
    /// `usage_rows`).
    ///
    /// [`SourceOptions`]: crate::source::SourceOptions
    pub keep_usage_rows: bool,
    pub max_skips: usize,
}

/// Where and when a usage was reported: the line of the entry that
/// carries it, its time, and what the agent reports beyond [`Usage`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsageAt {
    /// The 1-based line of the entry it is counted with (deduplication
    /// takes it out with that entry).
    pub line: u64,
    /// Its response's time, Unix milliseconds.
    pub time: Option<i64>,
    /// Reasoning output tokens, where the agent reports them apart
    /// (counted in `output` already).
    pub reasoning: u64,
    /// Its place among the usages of its entry's line, where a line
    /// carries several (an OpenCode answer's calls: 0, 1, ...); 0 where
    /// it carries one. A sink that keys usage rows by line tells them
    /// apart by it.
    pub seq: u32,
}

/// One response's usage, as counted: a row of the `usage` report and of
/// the sinks' usage tables.
///
/// Its names are shared: a row naming the provider and model of the row
/// before it holds that row's (a file's responses are mostly of one
/// model), so that keeping a row allocates nothing for them.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    /// Where and when.
    pub at: UsageAt,
    /// The provider, when named.
    pub provider: Option<Arc<str>>,
    /// The model, when named.
    pub model: Option<Arc<str>>,
    /// Its tokens (and the cost the agent recorded, 0 when none).
    pub usage: Usage,
}

/// `name` as a shared string: `last`'s when it is the same name.
fn shared(name: Option<&str>, last: Option<&Arc<str>>) -> Option<Arc<str>> {
    let name = name?;
    match last {
        Some(l) if **l == *name => Some(Arc::clone(l)),
        _ => Some(Arc::from(name)),
    }
}

impl Default for Report {
    fn default() -> Self {
        Report {
            bytes: 0,
            lines: 0,
            records: 0,
            roles: [0; 6],
            filtered: 0,
            entries: EntryCounts::default(),
            no_record: 0,
            skipped: 0,
            repaired: 0,
            skips: Vec::new(),
            pending: 0,
            deduplicated: 0,
            empty: false,
            usage: Usage::default(),
            by_model: Vec::new(),
            unknown_roles: Vec::new(),
            responses: Vec::new(),
            usage_rows: Vec::new(),
            keep_usage_rows: false,
            max_skips: DEFAULT_MAX_SKIPS,
        }
    }
}

impl Report {
    /// Records of one role.
    pub fn role(&self, role: Role) -> u64 {
        self.roles[role.index()]
    }

    pub fn skip(&mut self, line: u64, byte: u64, reason: SkipReason) {
        self.skipped += 1;
        if self.skips.len() < self.max_skips {
            self.skips.push(Skip { line, byte, reason });
        }
    }

    /// Counts a record of `role`, and whether `filter` hands it out (one
    /// it holds back is counted as filtered).
    pub fn count_record(&mut self, role: Role, filter: crate::record::RoleFilter) -> bool {
        self.records += 1;
        self.roles[role.index()] += 1;
        let kept = filter.allows(role);
        if !kept {
            self.filtered += 1;
        }
        kept
    }

    pub fn add_unknown_role(&mut self, role: &str) {
        add_count(&mut self.unknown_roles, role, 1);
    }

    /// Adds usage, under a model when one is named. A format counting a
    /// response calls [`Report::add_usage_at`], which keeps its row for
    /// the `usage` report and the sinks' usage tables.
    pub fn add_usage(
        &mut self,
        provider: Option<&str>,
        model: Option<&str>,
        usage: &Usage,
        assistant: bool,
    ) {
        self.add_usages(provider, model, std::iter::once(usage), assistant);
    }

    /// [`Report::add_usage`] of one response, kept as a row when rows are
    /// kept.
    pub fn add_usage_at(
        &mut self,
        provider: Option<&str>,
        model: Option<&str>,
        usage: &Usage,
        assistant: bool,
        at: UsageAt,
    ) {
        self.add_usage(provider, model, usage, assistant);
        if self.keep_usage_rows {
            let last = self.usage_rows.last();
            let provider = shared(provider, last.and_then(|r| r.provider.as_ref()));
            let model = shared(model, last.and_then(|r| r.model.as_ref()));
            self.usage_rows.push(UsageRow {
                at,
                provider,
                model,
                usage: *usage,
            });
        }
    }

    /// Takes out the rows of copies that deduplication took out: every
    /// row at each line of `lines`, and each row of `rows` by its line and
    /// its place on it (`UsageAt::seq`: one call of an OpenCode answer,
    /// not the answer's other calls). Both in any order.
    pub fn remove_usage_rows_at(&mut self, lines: &mut [u64], rows: &mut [(u64, u32)]) {
        if (lines.is_empty() && rows.is_empty()) || self.usage_rows.is_empty() {
            return;
        }
        lines.sort_unstable();
        rows.sort_unstable();
        self.usage_rows.retain(|r| {
            lines.binary_search(&r.at.line).is_err()
                && rows.binary_search(&(r.at.line, r.at.seq)).is_err()
        });
    }

    /// Adds usages of one model, one by one: the sums are those of as many
    /// [`Report::add_usage`] calls, the model looked up once.
    pub fn add_usages<'u>(
        &mut self,
        provider: Option<&str>,
        model: Option<&str>,
        usages: impl Iterator<Item = &'u Usage> + Clone,
        assistant: bool,
    ) {
        for u in usages.clone() {
            self.usage.add(u);
        }
        let (Some(provider), Some(model)) = (provider, model) else {
            return;
        };
        // Few models per file: a linear search, most recent first, costs
        // less than hashing and allocates nothing in steady state.
        let m = match self
            .by_model
            .iter()
            .rposition(|m| m.provider == provider && m.model == model)
        {
            Some(i) => &mut self.by_model[i],
            None => {
                self.by_model.push(ModelUsage {
                    provider: provider.to_owned(),
                    model: model.to_owned(),
                    messages: 0,
                    usage: Usage::default(),
                });
                self.by_model.last_mut().expect("just pushed")
            }
        };
        for u in usages {
            m.usage.add(u);
            m.messages += u64::from(assistant);
        }
    }

    /// Takes out one entry's counts (the report of reading that entry's
    /// line alone) as a duplicate: it stays a line, counted in
    /// `deduplicated` instead.
    pub fn remove_duplicate(&mut self, entry: &Report) {
        self.records -= entry.records;
        for (a, b) in self.roles.iter_mut().zip(entry.roles) {
            *a -= b;
        }
        self.filtered -= entry.filtered;
        for (ty, n) in entry.entries.iter() {
            self.entries.sub(ty, n);
        }
        self.no_record -= entry.no_record;
        self.repaired -= entry.repaired;
        self.usage.sub(&entry.usage);
        for (role, n) in &entry.unknown_roles {
            if let Some(j) = counted_at(&self.unknown_roles, role, MORE_ROLES) {
                self.unknown_roles[j].1 -= n;
            }
        }
        for m in &entry.by_model {
            if let Some(x) = self
                .by_model
                .iter_mut()
                .find(|x| x.provider == m.provider && x.model == m.model)
            {
                x.messages -= m.messages;
                x.usage.sub(&m.usage);
            }
        }
        self.deduplicated += 1;
    }

    /// Adds a later part's report to this one (parts in file order).
    pub fn merge(&mut self, other: &Report) {
        self.merge_counts(other);
        self.usage_rows.extend(other.usage_rows.iter().cloned());
    }

    /// [`Report::merge`] without `other`'s usage rows: for sums that never
    /// hand rows out (a run's totals, each source's), which would
    /// otherwise copy every response's row twice more.
    pub fn merge_counts(&mut self, other: &Report) {
        self.bytes += other.bytes;
        self.lines += other.lines;
        self.records += other.records;
        for (a, b) in self.roles.iter_mut().zip(other.roles) {
            *a += b;
        }
        self.filtered += other.filtered;
        for (ty, n) in other.entries.iter() {
            self.entries.add(ty, n);
        }
        self.no_record += other.no_record;
        self.skipped += other.skipped;
        self.repaired += other.repaired;
        let room = self.max_skips.saturating_sub(self.skips.len());
        self.skips.extend(other.skips.iter().take(room).cloned());
        self.pending = other.pending;
        self.deduplicated += other.deduplicated;
        self.empty &= other.empty;
        self.usage.add(&other.usage);
        for (role, n) in &other.unknown_roles {
            add_count(&mut self.unknown_roles, role, *n);
        }
        for m in &other.by_model {
            match self
                .by_model
                .iter_mut()
                .find(|x| x.provider == m.provider && x.model == m.model)
            {
                Some(x) => {
                    x.messages += m.messages;
                    x.usage.add(&m.usage);
                }
                None => self.by_model.push(m.clone()),
            }
        }
    }
}

fn add_count(counts: &mut Vec<(String, u64)>, name: &str, n: u64) {
    let j = place(counts, name, MORE_ROLES);
    counts[j].1 += n;
}

/// The place `name` is counted at among `names`: its own, found or added
/// while fewer than [`MAX_NAMED`] are named, else `more`'s (added once).
fn place(names: &mut Vec<(String, u64)>, name: &str, more: &str) -> usize {
    if let Some(j) = counted_at(names, name, more) {
        return j;
    }
    let new = if names.len() < MAX_NAMED { name } else { more };
    names.push((new.to_owned(), 0));
    names.len() - 1
}

/// The place `name` is counted at among `names`, as [`place`] gives it,
/// when there is one.
fn counted_at(names: &[(String, u64)], name: &str, more: &str) -> Option<usize> {
    let at = |n: &str| names.iter().position(|(k, _)| k == n);
    match at(name) {
        Some(j) => Some(j),
        None if names.len() < MAX_NAMED => None,
        None => at(more),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the first [`MAX_NAMED`] unknown types, each new one is counted
    /// under [`MORE_TYPES`]; a named one stays where it is, and taking a
    /// count out finds the place it was put in.
    #[test]
    fn unknown_types_past_the_named_ones_are_counted_together() {
        let mut e = EntryCounts::default();
        for i in 0..300 {
            e.add(&format!("t{i}"), 1);
        }
        e.add("t0", 1);
        e.add("message", 1);
        let others = e.others();
        assert_eq!(others.len(), MAX_NAMED + 1);
        assert_eq!(others[0], ("t0".to_owned(), 2));
        assert_eq!(others[255], ("t255".to_owned(), 1));
        assert_eq!(others[256], (MORE_TYPES.to_owned(), 44));
        assert_eq!(e.get("message"), 1);
        assert_eq!(e.total(), 302);
        e.sub("t280", 1);
        e.sub("t5", 1);
        assert_eq!(e.get(MORE_TYPES), 43);
        assert_eq!(e.get("t5"), 0);
        assert_eq!(e.total(), 300);
    }

    /// The same for unknown roles ([`MORE_ROLES`]), and for a report that
    /// adds another's counts: the names it has room for, then the rest
    /// together.
    #[test]
    fn unknown_roles_past_the_named_ones_are_counted_together() {
        let (mut a, mut b) = (Report::default(), Report::default());
        for i in 0..200 {
            a.add_unknown_role(&format!("a{i}"));
            b.add_unknown_role(&format!("b{i}"));
            b.entries.add(&format!("x{i}"), 2);
        }
        a.entries.add("y", 1);
        a.merge_counts(&b);
        assert_eq!(a.unknown_roles.len(), MAX_NAMED + 1);
        assert_eq!(a.unknown_roles[200], ("b0".to_owned(), 1));
        assert_eq!(a.unknown_roles[255], ("b55".to_owned(), 1));
        assert_eq!(a.unknown_roles[256], (MORE_ROLES.to_owned(), 144));
        assert_eq!(a.entries.others().len(), 201);
        assert_eq!(a.entries.total(), 401);
        let mut c = Report::default();
        for i in 0..300 {
            c.add_unknown_role(&format!("c{i}"));
        }
        assert_eq!(c.unknown_roles[256], (MORE_ROLES.to_owned(), 44));
    }
}
