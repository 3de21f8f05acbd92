//! `mcp`: the store served to agents over the Model Context Protocol, on
//! stdio, through the official Rust SDK (`rmcp`). Three tools: `search`,
//! `sessions` and `session`. Each call opens the store read-only, reads,
//! and closes it: no transaction is held between calls, and a `backfill
//! --follow` writing the same store is never waited on (WAL readers do not
//! block its writer).

use std::path::PathBuf;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData as McpError, ServerHandler};
use serde::Deserialize;
use serde_json::{json, Value};

use mem_ingest_store::{Search, SessionQuery};

use super::when;

/// Messages `session` returns at most by default, and characters of text.
const MESSAGES: usize = 50;
const CHARACTERS: usize = 20_000;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SearchParams {
    /// Words as typed: every word required, "quoted phrases" kept
    /// together; identifiers, paths and error codes are found as written.
    query: String,
    /// Only records whose project (the session's working folder) holds
    /// this text (case folded).
    project: Option<String>,
    /// Only this agent's records: pi, gemini, qwen, copilot, amp, cline, claude, codex.
    agent: Option<String>,
    /// Only this role: user, assistant, tool_result, bash_execution,
    /// system, custom.
    role: Option<String>,
    /// Only records at or after this time: RFC 3339, a date, 7d, 24h, 2w,
    /// today, yesterday, "last week".
    since: Option<String>,
    /// Only records before this time (as since).
    until: Option<String>,
    /// Hits at most (default 10, at most 100).
    limit: Option<u32>,
    /// The query is FTS5 syntax (OR, NEAR, prefix*) instead of words.
    fts: Option<bool>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SessionsParams {
    /// Only sessions whose project holds this text (case folded).
    project: Option<String>,
    /// Only this agent's sessions: pi, gemini, qwen, copilot, amp, cline, claude, codex.
    agent: Option<String>,
    /// Only sessions with a record at or after this time (as search's).
    since: Option<String>,
    /// Only sessions that started before this time.
    until: Option<String>,
    /// Sessions at most, newest first (default 20, at most 200).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct SessionParams {
    /// The session's id, or the start of it when that is one session's.
    id: String,
    /// A record's key (as search returns it): the messages around it.
    around: Option<String>,
    /// Messages at most (default 50): from the start, or centred on
    /// `around`.
    limit: Option<u32>,
    /// Characters of message text at most, all messages together (default
    /// 20000): a longer text is cut, and the cut is said.
    max_chars: Option<u32>,
}

/// The server: the store it reads.
#[derive(Debug, Clone)]
pub(super) struct Memory {
    db: PathBuf,
    tool_router: ToolRouter<Self>,
}

fn bad(message: String) -> McpError {
    McpError::invalid_params(message, None)
}

fn time(s: Option<&str>) -> Result<Option<i64>, McpError> {
    s.map(|t| when::parse_when(t).map_err(bad)).transpose()
}

/// An agent's name as the store's `format` column holds it: one of the
/// registry's.
fn agent(a: Option<String>) -> Result<Option<String>, McpError> {
    let Some(name) = a else {
        return Ok(None);
    };
    if mem_ingest::formats::by_name(&name).is_some() {
        return Ok(Some(name));
    }
    let names: Vec<&str> = mem_ingest::formats::builtin()
        .iter()
        .map(|f| f.name())
        .collect();
    Err(bad(format!("unknown agent {name:?}: {}", names.join(", "))))
}

fn text_result(v: Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(v.to_string())])
}

/// A store error as the agent can act on it: a query or session it must
/// change is invalid params; anything else an internal error, said.
fn store_error(e: mem_ingest::Error) -> McpError {
    if e.is_usage() {
        bad(e.to_string())
    } else {
        McpError::internal_error(e.to_string(), None)
    }
}

/// Runs a store read off the protocol's thread.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, McpError> + Send + 'static,
) -> Result<T, McpError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?
}

fn rfc(t: Option<i64>) -> Value {
    t.map(|t| when::rfc3339(t, true)).into()
}

#[tool_router]
impl Memory {
    pub(super) fn new(db: PathBuf) -> Memory {
        Memory {
            db,
            tool_router: Self::tool_router(),
        }
    }

    /// Full-text search of everything the user and their agents did.
    #[tool(
        description = "Search the user's coding-agent history (every message, tool call and result of their coding agents' sessions: pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, Codex) by words, best matches first. Each hit has its key (pass it to the session tool's `around` to read the conversation there), agent, project, session id, time (UTC), role, file:line and a snippet with the matched words between « and »."
    )]
    async fn search(
        &self,
        Parameters(p): Parameters<SearchParams>,
    ) -> Result<CallToolResult, McpError> {
        let q = Search {
            query: p.query,
            fts: p.fts.unwrap_or(false),
            project: p.project,
            role: p.role,
            since: time(p.since.as_deref())?,
            until: time(p.until.as_deref())?,
            session: None,
            format: agent(p.agent)?,
            limit: p.limit.unwrap_or(10).clamp(1, 100) as usize,
            rank_all: false,
        };
        let db = self.db.clone();
        let hits = blocking(move || mem_ingest_store::search(&db, &q).map_err(store_error)).await?;
        let hits: Vec<Value> = hits
            .into_iter()
            .map(|h| {
                json!({
                    "key": h.key,
                    "agent": h.agent,
                    "project": h.project,
                    "session": h.session,
                    "time": rfc(h.timestamp),
                    "role": h.role,
                    "place": format!("{}:{}", h.file, h.line),
                    "snippet": h.snippet,
                })
            })
            .collect();
        Ok(text_result(json!({ "hits": hits })))
    }

    /// The user's recent sessions.
    #[tool(
        description = "List the user's recent coding-agent sessions, newest first, each with its id, agent, project, start and end (UTC), number of records and first prompt (cut at 200 characters). Filter by project, agent and time."
    )]
    async fn sessions(
        &self,
        Parameters(p): Parameters<SessionsParams>,
    ) -> Result<CallToolResult, McpError> {
        let q = SessionQuery {
            project: p.project,
            session: None,
            format: agent(p.agent)?,
            since: time(p.since.as_deref())?,
            until: time(p.until.as_deref())?,
            limit: p.limit.unwrap_or(20).clamp(1, 200) as usize,
        };
        let db = self.db.clone();
        let rows =
            blocking(move || mem_ingest_store::sessions(&db, &q).map_err(store_error)).await?;
        let rows: Vec<Value> = rows
            .into_iter()
            .map(|s| {
                let prompt = s.first_prompt.map(|t| {
                    let cut: String = t.chars().take(200).collect();
                    if cut.len() < t.len() {
                        format!("{cut}…")
                    } else {
                        cut
                    }
                });
                json!({
                    "id": s.id,
                    "agent": s.agent,
                    "project": s.project,
                    "started": rfc(s.started),
                    "ended": rfc(s.ended),
                    "records": s.records,
                    "first_prompt": prompt,
                })
            })
            .collect();
        Ok(text_result(json!({ "sessions": rows })))
    }

    /// One session's messages.
    #[tool(
        description = "Read one session's messages in order: by its id (a unique prefix is enough), optionally a window around a record key that search returned. At most `limit` messages (default 50) and `max_chars` characters of text (default 20000); what was left out is counted in `omitted`."
    )]
    async fn session(
        &self,
        Parameters(p): Parameters<SessionParams>,
    ) -> Result<CallToolResult, McpError> {
        let db = self.db.clone();
        let id = p.id.clone();
        let (session, records) = blocking(move || {
            let s = mem_ingest_store::find_session(&db, &id).map_err(store_error)?;
            let r = mem_ingest_store::session_records(&db, &s.id).map_err(store_error)?;
            Ok((s, r))
        })
        .await?;
        let limit = p.limit.map_or(MESSAGES, |l| l.max(1) as usize);
        let (start, end) = match &p.around {
            Some(key) => {
                let at = records
                    .iter()
                    .position(|r| &r.key == key)
                    .ok_or_else(|| bad(format!("session {} has no record {key:?}", session.id)))?;
                let start = at.saturating_sub(limit / 2);
                (start, (start + limit).min(records.len()))
            }
            None => (0, limit.min(records.len())),
        };
        let mut budget = p.max_chars.map_or(CHARACTERS, |c| c as usize);
        let mut cut = 0;
        let messages: Vec<Value> = records[start..end]
            .iter()
            .map(|r| {
                let n = r.text.chars().count();
                let text = if n <= budget {
                    budget -= n;
                    r.text.clone()
                } else {
                    cut += 1;
                    let kept: String = r.text.chars().take(budget).collect();
                    budget = 0;
                    format!("{kept}… [{} more characters]", n - kept.chars().count())
                };
                json!({
                    "key": r.key,
                    "role": r.role,
                    "time": rfc(r.timestamp),
                    "tool_name": r.tool_name,
                    "text": text,
                })
            })
            .collect();
        Ok(text_result(json!({
            "session": {
                "id": session.id,
                "agent": session.agent,
                "project": session.project,
                "started": rfc(session.started),
                "records": session.records,
            },
            "messages": messages,
            "omitted": {
                "before": start,
                "after": records.len() - end,
                "texts_cut": cut,
            },
        })))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Memory {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("mem-ingest", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "The user's coding-agent history (pi, Gemini CLI, Qwen Code, Copilot CLI, Claude Code, \
                 Codex), read from the \
                 mem-ingest store. Use search to find what was done or said about something, \
                 sessions to see recent work, and session to read a conversation.",
            )
    }
}

/// Serves the store at `db` on stdin and stdout until the client closes
/// stdin. Exit code.
pub(super) fn serve(db: PathBuf) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: mcp: {e}");
            return 1;
        }
    };
    runtime.block_on(async move {
        use rmcp::ServiceExt;
        let service = match Memory::new(db).serve(rmcp::transport::stdio()).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: mcp: {e}");
                return 1;
            }
        };
        match service.waiting().await {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("error: mcp: {e}");
                1
            }
        }
    })
}
