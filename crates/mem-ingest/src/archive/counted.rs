//! Usage as data: one [`CountedUsage`] per response the stats count,
//! after the same deduplication (a fork's copy, a subagent's replay, a
//! streamed response's lines), with where it was read, when, and what it
//! cost.

use crate::prices::{Prices, Resolved};
use crate::record::Usage;

/// One response's usage, as counted ([`super::Archive::usage`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CountedUsage {
    /// The agent (format name): `pi`, `claude`, `codex`, ...
    pub agent: &'static str,
    /// The session id (Claude Code: the line's `sessionId`).
    pub session: String,
    /// The project (the session's cwd).
    pub project: String,
    /// The file it was read from (empty for Claude Code's responses,
    /// counted once across the archive: see `line`).
    pub file: String,
    /// The 1-based line of the entry that carries it (0 for Claude Code's).
    pub line: u64,
    /// Its place among the usages of that line where it carries several
    /// (an OpenCode answer's calls), else 0 ([`crate::UsageAt::seq`]).
    pub seq: u32,
    /// The response's time, Unix milliseconds.
    pub time: Option<i64>,
    /// The provider, when named.
    pub provider: Option<String>,
    /// The model, when named.
    pub model: Option<String>,
    /// Its tokens; `cost` the cost the agent recorded (0 when none).
    pub usage: Usage,
    /// Reasoning output tokens, where the agent reports them.
    pub reasoning: u64,
    /// Of the cache writes, those kept an hour (Claude Code's
    /// `ephemeral_1h`), priced at twice the input price as ccusage does.
    pub cache_write_1h: u64,
    /// The agent recorded this cost (pi; Claude Code's `costUSD`): it is
    /// the cost, not priced again.
    pub recorded: bool,
}

impl CountedUsage {
    /// A Claude Code response kept by the engine's table (its cost, when
    /// the line had one, `costUSD`).
    pub fn of_response(r: &crate::usage::Response) -> CountedUsage {
        CountedUsage {
            agent: "claude",
            session: r.session.clone(),
            project: r.project.clone(),
            file: String::new(),
            line: 0,
            seq: 0,
            time: r.time,
            provider: Some("anthropic".to_owned()),
            model: r.model.clone(),
            usage: r.usage,
            reasoning: 0,
            cache_write_1h: r.cache_write_1h,
            recorded: r.usage.cost != 0.0,
        }
    }

    /// Its cost: the one the agent recorded, else its model's price in
    /// `prices` (0 for no tokens); None when neither (a model with no
    /// price, or none named).
    ///
    /// Everything in the total beyond input and cache is priced as output
    /// (Gemini CLI's and Qwen Code's thoughts, as ccusage prices them).
    pub fn cost(&self, prices: &Prices) -> Option<f64> {
        cost_of(&self.usage, self.cache_write_1h, self.recorded, || {
            prices.resolve(self.model.as_deref()?)
        })
    }
}

/// [`CountedUsage::cost`] of a response's usage, `hour` of its cache
/// writes kept an hour, `recorded` when its cost is the agent's: its
/// model's price from `resolve`, asked only when it is needed.
pub(crate) fn cost_of(
    u: &Usage,
    hour: u64,
    recorded: bool,
    resolve: impl FnOnce() -> Option<Resolved>,
) -> Option<f64> {
    if recorded {
        return Some(u.cost);
    }
    if u.total_tokens == 0 {
        // Nothing to price (Claude Code's `<synthetic>` lines).
        return Some(0.0);
    }
    let priced = Usage {
        output: u
            .total_tokens
            .saturating_sub(
                u.input
                    .saturating_add(u.cache_read)
                    .saturating_add(u.cache_write),
            )
            .max(u.output),
        ..*u
    };
    Some(resolve()?.cost(&priced, hour))
}

/// What a usage re-read found: the rows to write, and what it read.
#[derive(Debug, Default, Clone)]
pub struct UsageReread {
    /// Each response counted in the files' covered bytes (Claude Code's
    /// aside), in the order read, inside the checkpoint's
    /// `--since/--until`.
    pub rows: Vec<CountedUsage>,
    /// Claude Code's responses, each with its index in the checkpoint's
    /// table, inside its `--since/--until`.
    pub responses: Vec<(u32, CountedUsage)>,
    /// Files read again.
    pub files: u64,
    /// The files read again, as their rows name them
    /// ([`CountedUsage::file`]): rows a store holds for them from before
    /// (a store the release before migrated wrote some, keyed by the file
    /// that run read a copy in) are the re-read's to replace, not to add
    /// to (Claude Code's aside, keyed by response).
    pub read: Vec<String>,
    /// Bytes read again.
    pub bytes: u64,
    /// Files of the checkpoint not read again, each with why (missing,
    /// shorter, another header, its agent not read, a read that failed).
    pub unread: Vec<(String, String)>,
    /// Of Claude Code's responses, those no file read again had a copy
    /// of: their rows have no time.
    pub untimed: u64,
    /// Rows written (in a run's summary, where [`UsageReread::rows`] and
    /// [`UsageReread::responses`] are left empty).
    pub written: u64,
    /// Seconds the reading took.
    pub seconds: f64,
}
