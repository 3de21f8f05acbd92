//! The stats JSON of a run, field names and order pinned.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::{Role, Usage};

/// Records by role, serialised as an object of the roles' schema names
/// in the order of [`Role::ALL`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roles(pub [u64; 6]);

impl Roles {
    /// From counts indexed by [`Role::index`].
    pub fn from_counts(c: &[u64; 6]) -> Self {
        Roles(*c)
    }

    /// Each role with its count, in the order of [`Role::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (Role, u64)> + '_ {
        Role::ALL.into_iter().map(|r| (r, self.0[r.index()]))
    }
}

impl Serialize for Roles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(Role::ALL.len()))?;
        for (role, n) in self.iter() {
            m.serialize_entry(role.as_str(), &n)?;
        }
        m.end()
    }
}

/// Usage summed, as the stats give it: [`Usage`]'s fields in its order,
/// the cost None (`null`) where no usage summed had one (see
/// [`crate::format::Format::records_cost`]), never a false 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[allow(missing_docs)]
pub struct UsageLine {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub cost: Option<f64>,
}

impl UsageLine {
    /// `u`, its cost known when `priced` (an agent that records costs
    /// counted here) or when it is not 0 (one that records them at times).
    pub fn of(u: &Usage, priced: bool) -> Self {
        UsageLine {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            total_tokens: u.total_tokens,
            cost: known_cost(u.cost, priced),
        }
    }
}

/// A cost summed: known when `priced` or when not 0.
pub(crate) fn known_cost(cost: f64, priced: bool) -> Option<f64> {
    (priced || cost != 0.0).then_some(cost)
}

/// Usage of one provider and model.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct ModelLine {
    pub provider: String,
    pub model: String,
    pub messages: u64,
    #[serde(flatten)]
    pub usage: UsageLine,
}

/// One project: its sessions, records, tokens and cost.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct ProjectLine {
    pub project: String,
    /// Distinct session ids.
    pub sessions: u64,
    pub records: u64,
    pub total_tokens: u64,
    /// None (`null`) where unknown (see [`UsageLine`]).
    pub cost: Option<f64>,
}

/// A file or PATH that failed, with why.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct FailureLine {
    pub path: String,
    pub error: String,
}

/// A skipped line, with its file.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct SkipLine {
    pub path: String,
    pub line: u64,
    pub byte: u64,
    pub reason: String,
}

/// The stats JSON, field names and order pinned: the totals' fields
/// ([`SourceStats`], flattened), then the failures and skips, then the
/// sources.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct Stats {
    #[serde(flatten)]
    pub totals: SourceStats,
    pub failures: Vec<FailureLine>,
    pub skips: Vec<SkipLine>,
    /// The same counts for each source (`pi`, `claude`, `codex`) that had
    /// a file, by name; only when a source other than pi had one, so that
    /// a pi archive's stats keep their shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_source: Option<BTreeMap<String, SourceStats>>,
}

impl std::ops::Deref for Stats {
    type Target = SourceStats;

    /// The totals' fields, as `stats.records`.
    fn deref(&self) -> &SourceStats {
        &self.totals
    }
}

/// One source's stats, or the run's totals: the fields of the stats JSON
/// up to `by_project` (failures and skips name their files in the run's
/// lists).
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct SourceStats {
    pub files: u64,
    pub files_failed: u64,
    pub files_empty: u64,
    pub bytes: u64,
    pub lines: u64,
    pub records: u64,
    pub skipped: u64,
    pub repaired: u64,
    /// Entries dropped as copies (forks, a history written twice).
    pub deduplicated: u64,
    /// Bytes of partial last lines waiting for their writer (with --state).
    pub pending: u64,
    pub roles: Roles,
    pub entries: BTreeMap<String, u64>,
    /// The usage summed: its field names are the schema's; the cost null
    /// where unknown (see [`UsageLine`]).
    pub usage: UsageLine,
    /// Files whose usage is partial (Copilot CLI sessions without a
    /// `session.shutdown` for their last segment: their messages' output
    /// alone); absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    pub partial_usage: u64,
    pub by_model: Vec<ModelLine>,
    pub by_project: Vec<ProjectLine>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
