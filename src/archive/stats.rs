//! The stats JSON of a run, field names and order pinned.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::{Role, Usage};

/// Records by role.
#[derive(Debug, Clone, Serialize, Default)]
#[allow(missing_docs)]
pub struct Roles {
    pub user: u64,
    pub assistant: u64,
    pub tool_result: u64,
    pub bash_execution: u64,
    pub custom: u64,
    pub system: u64,
}

impl Roles {
    /// From counts indexed by [`Role::index`].
    pub fn from_counts(c: &[u64; 6]) -> Self {
        let r = |role: Role| c[role.index()];
        Roles {
            user: r(Role::User),
            assistant: r(Role::Assistant),
            tool_result: r(Role::ToolResult),
            bash_execution: r(Role::BashExecution),
            custom: r(Role::Custom),
            system: r(Role::System),
        }
    }
}

/// Usage of one provider and model.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct ModelLine {
    pub provider: String,
    pub model: String,
    pub messages: u64,
    #[serde(flatten)]
    pub usage: Usage,
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
    pub cost: f64,
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

/// The stats JSON, field names and order pinned.
#[derive(Debug, Clone, Serialize)]
#[allow(missing_docs)]
pub struct Stats {
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
    /// pi's usage summed: its field names are the schema's.
    pub usage: Usage,
    pub by_model: Vec<ModelLine>,
    pub by_project: Vec<ProjectLine>,
    pub failures: Vec<FailureLine>,
    pub skips: Vec<SkipLine>,
}
