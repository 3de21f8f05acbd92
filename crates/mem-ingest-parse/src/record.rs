//! The normalised record: what one pi entry becomes.

use std::fmt;

/// The normalised role of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// pi `user` messages.
    User,
    /// pi `assistant` messages.
    Assistant,
    /// pi `toolResult` messages.
    ToolResult,
    /// pi `bashExecution` messages.
    BashExecution,
    /// pi `custom` (v2 `hookMessage`) messages and `custom_message` entries.
    Custom,
    /// pi 1.x `system` messages, `branchSummary`/`compactionSummary`
    /// messages, `compaction` and `branch_summary` entries.
    System,
}

impl Role {
    /// Every role, in the order of [`Role::index`].
    pub const ALL: [Role; 6] = [
        Role::User,
        Role::Assistant,
        Role::ToolResult,
        Role::BashExecution,
        Role::Custom,
        Role::System,
    ];

    /// The role's name in the output schema (`user`, `assistant`,
    /// `tool_result`, `bash_execution`, `custom`, `system`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "tool_result",
            Role::BashExecution => "bash_execution",
            Role::Custom => "custom",
            Role::System => "system",
        }
    }

    /// A dense index, `0..6`, in the order of [`Role::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Parses a role name of the output schema.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token usage and cost as pi recorded them.
/// Serialised in the stats JSON (field names are the schema's).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Usage {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Tokens read from the cache.
    pub cache_read: u64,
    /// Tokens written to the cache.
    pub cache_write: u64,
    /// pi's `totalTokens`; when absent, `input + output + cache_read +
    /// cache_write` (`cacheWrite1h` and `reasoning` are parts of those),
    /// at most `u64::MAX`.
    pub total_tokens: u64,
    /// pi's `cost.total` (0 when absent).
    pub cost: f64,
}

impl Usage {
    /// Takes another usage out of this one. Counts stop at 0 (see
    /// [`Usage::add`]).
    pub fn sub(&mut self, other: &Usage) {
        self.input = self.input.saturating_sub(other.input);
        self.output = self.output.saturating_sub(other.output);
        self.cache_read = self.cache_read.saturating_sub(other.cache_read);
        self.cache_write = self.cache_write.saturating_sub(other.cache_write);
        self.total_tokens = self.total_tokens.saturating_sub(other.total_tokens);
        self.cost -= other.cost;
    }

    /// Adds another usage to this one. Token counts come from the files,
    /// any u64 a line holds: sums stop at `u64::MAX` rather than wrap.
    pub fn add(&mut self, other: &Usage) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cost += other.cost;
    }
}

/// One normalised record, borrowing its text from the parsed line or from
/// the source's arena. It lives until the source is asked for the next
/// record; [`Record::to_owned_record`] keeps it longer.
///
/// Names of lifetimes: `'a` is the source's line buffer and arena.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// Normalised role.
    pub role: Role,
    /// Flattened text (see the crate docs for the rules).
    pub text: &'a str,
    /// The project: the session header's `cwd`.
    pub project: &'a str,
    /// The session id (the header's `id`).
    pub session: &'a str,
    /// Stable key: `<session id>:<entry id>`, or `<session id>:L<line>` for
    /// entries without an id (format v1).
    pub key: &'a str,
    /// Provenance: `pi:<file stem>`.
    pub source: &'a str,
    /// The entry's `id` (absent in format v1).
    pub id: Option<&'a str>,
    /// The entry's `parentId` (absent in v1 and on a root).
    pub parent_id: Option<&'a str>,
    /// 1-based line number of the entry.
    pub line: u64,
    /// 0-based byte offset of the entry's line.
    pub byte: u64,
    /// The entry type as written (`message`, `compaction`, ...).
    pub entry: &'a str,
    /// The original message role as written (`toolResult`, ...), for
    /// `message` entries.
    pub message_role: Option<&'a str>,
    /// The content block kinds present, distinct, in order of first
    /// appearance: `["text"]` for string content, `[]` for none; then
    /// `error` for a turn that ended in an error.
    pub kinds: &'a [&'a str],
    /// Unix milliseconds: the message's `timestamp` (a number, or an ISO
    /// string), else the entry's ISO `timestamp`.
    pub timestamp: Option<i64>,
    /// Assistant (and 1.x usage-bearing entries): the provider.
    pub provider: Option<&'a str>,
    /// Assistant: the model.
    pub model: Option<&'a str>,
    /// Token usage, where pi recorded one.
    pub usage: Option<Usage>,
    /// Assistant: `stopReason`.
    pub stop_reason: Option<&'a str>,
    /// Tool result: `toolName`.
    pub tool_name: Option<&'a str>,
    /// Tool result: `toolCallId`.
    pub tool_call_id: Option<&'a str>,
    /// Tool result: `isError`.
    pub is_error: Option<bool>,
    /// Custom messages and `custom_message` entries: `customType`.
    pub custom_type: Option<&'a str>,
    /// Bash execution: the command.
    pub command: Option<&'a str>,
    /// Bash execution: the exit code.
    pub exit_code: Option<i64>,
    /// Whether the line needed repair (invalid UTF-8 or lone surrogate
    /// escapes became U+FFFD).
    pub repaired: bool,
    /// The subagent that wrote the line (formats with subagents; none for
    /// pi).
    pub agent_id: Option<&'a str>,
    /// The API message id of the model response the line is part of.
    pub message_id: Option<&'a str>,
    /// The API request id of that response.
    pub request_id: Option<&'a str>,
    /// The usage is provisional: the response was not finished on this
    /// line (a streamed response written one content block a line).
    pub provisional: bool,
}

/// An owned copy of a [`Record`], for callers that keep records.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct OwnedRecord {
    pub role: Role,
    pub text: String,
    pub project: String,
    pub session: String,
    pub key: String,
    pub source: String,
    pub id: Option<String>,
    pub parent_id: Option<String>,
    pub line: u64,
    pub byte: u64,
    pub entry: String,
    pub message_role: Option<String>,
    pub kinds: Vec<String>,
    pub timestamp: Option<i64>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub stop_reason: Option<String>,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub is_error: Option<bool>,
    pub custom_type: Option<String>,
    pub command: Option<String>,
    pub exit_code: Option<i64>,
    pub repaired: bool,
    pub agent_id: Option<String>,
    pub message_id: Option<String>,
    pub request_id: Option<String>,
    pub provisional: bool,
}

impl Record<'_> {
    /// Copies the record into owned strings.
    pub fn to_owned_record(&self) -> OwnedRecord {
        let s = |v: Option<&str>| v.map(str::to_owned);
        OwnedRecord {
            role: self.role,
            text: self.text.to_owned(),
            project: self.project.to_owned(),
            session: self.session.to_owned(),
            key: self.key.to_owned(),
            source: self.source.to_owned(),
            id: s(self.id),
            parent_id: s(self.parent_id),
            line: self.line,
            byte: self.byte,
            entry: self.entry.to_owned(),
            message_role: s(self.message_role),
            kinds: self.kinds.iter().map(|k| (*k).to_owned()).collect(),
            timestamp: self.timestamp,
            provider: s(self.provider),
            model: s(self.model),
            usage: self.usage,
            stop_reason: s(self.stop_reason),
            tool_name: s(self.tool_name),
            tool_call_id: s(self.tool_call_id),
            is_error: self.is_error,
            custom_type: s(self.custom_type),
            command: s(self.command),
            exit_code: self.exit_code,
            repaired: self.repaired,
            agent_id: s(self.agent_id),
            message_id: s(self.message_id),
            request_id: s(self.request_id),
            provisional: self.provisional,
        }
    }
}

/// A role filter: which roles a source hands out.
///
/// Records of other roles are still counted in the report (`records`,
/// `roles`, `filtered`), but their text is never built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoleFilter(u8);

impl RoleFilter {
    /// Every role.
    pub const ALL: RoleFilter = RoleFilter(0b11_1111);

    /// No role: every record is counted (`records`, `roles`, `filtered`)
    /// and none is built. What a run that writes no records (`stats`) reads
    /// with.
    pub const NONE: RoleFilter = RoleFilter(0);

    /// Only the given roles.
    pub fn only(roles: &[Role]) -> RoleFilter {
        RoleFilter(roles.iter().fold(0, |m, r| m | 1 << r.index()))
    }

    /// Whether `role` passes.
    pub fn allows(self, role: Role) -> bool {
        self.0 & (1 << role.index()) != 0
    }

    /// Whether no role passes ([`RoleFilter::NONE`]: no record is built).
    pub fn builds_none(self) -> bool {
        self.0 == 0
    }
}

impl Default for RoleFilter {
    fn default() -> Self {
        RoleFilter::ALL
    }
}
