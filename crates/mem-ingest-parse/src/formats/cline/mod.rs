//! The Cline adapter: the only module that knows Cline's key names (see
//! `docs/cline.md` for the mapping, and `shared/spec/cline-format.md` for
//! the format).
//!
//! Cline rewrites each of its files whole, through a temporary file
//! renamed over it: a document source ([`crate::document`]). Two
//! generations are read:
//! - legacy tasks: `tasks/<taskId>/api_conversation_history.json`, a JSON
//!   array of messages (the task's cwd is in `state/taskHistory.json`
//!   beside `tasks/`);
//! - SDK sessions: `sessions/<sessionId>/<sessionId>.messages.json` (an
//!   object with `messages`) and a subagent's `<agentId>.messages.json` in
//!   its root session's folder (the cwd is in the manifest
//!   `<sessionId>.json`).
//!
//! Never `ui_messages.json`, `taskHistory.json` (per-task totals),
//! `*.compaction.json` copies or temporary files
//! (`<file>.tmp.<ms>.<rand>.json`): files are picked by name. Each message
//! is an item keyed by its `id` (its position `#<n>` without one).

mod manifest;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use simd_json::Node;

use crate::document::{self, Bump, Item, Items, MapDocument};
use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{as_bool, as_f64, as_i64, as_str, as_u64, elements, fingerprint, Fields};
use crate::line::{Header, Parent, Text};
use crate::line_reader::bom_len;
use crate::record::{Record, Role, RoleFilter, Usage};
use crate::report::{Report, SkipReason, UsageAt};
use crate::source::{headerless_fingerprint, SourceOptions};
use crate::time::parse_iso_millis;

const TAG: &[u8] = b"cline-file";

/// The file name of a legacy task's transcript.
pub const LEGACY_FILE: &str = "api_conversation_history.json";

/// The tools of Cline's older XML-style tool calls (a tool as text in an
/// assistant message: `<read_file>...</read_file>`).
const XML_TOOLS: [&str; 16] = [
    "read_file",
    "write_to_file",
    "replace_in_file",
    "execute_command",
    "search_files",
    "list_files",
    "list_code_definition_names",
    "browser_action",
    "use_mcp_tool",
    "access_mcp_resource",
    "ask_followup_question",
    "attempt_completion",
    "plan_mode_respond",
    "new_task",
    "load_mcp_documentation",
    "web_fetch",
];

/// Cline's task and session files.
///
/// - The file's [`Header`]: a legacy task's `id` is its folder's name
///   (the `taskId`, its start in epoch ms, the `timestamp`), its `cwd` the
///   `cwdOnTaskInitialization` of `state/taskHistory.json`; an SDK file's
///   `id` its `sessionId` (the file stem without `.messages` when none),
///   its `cwd` the session manifest's `cwd` (else `workspace_root`), its
///   `timestamp` the manifest's `started_at` (else the first message's
///   `ts`). `""` when unknown.
/// - Records' keys are `<session id>:<message id>` (`:#<position>` for a
///   message without one).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cline;

/// Whether `path` is a legacy task's transcript.
fn is_legacy(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == LEGACY_FILE)
        && path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|n| n == "tasks")
}

impl Format for Cline {
    fn name(&self) -> &'static str {
        "cline"
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        // Its documents never hand out a parsed line: every record's text
        // is decoded, as without the raw-text read.
        true
    }

    /// `tasks/<taskId>/api_conversation_history.json`, or a
    /// `*.messages.json` below a `sessions/` folder or a
    /// `saoudrizwan.claude-dev` storage folder.
    fn is_session_file(&self, path: &Path) -> bool {
        if is_legacy(path) {
            return true;
        }
        let sdk = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".messages.json") && n.len() > ".messages.json".len());
        sdk && path.ancestors().skip(1).any(|p| {
            p.file_name()
                .is_some_and(|n| n == "sessions" || n == "saoudrizwan.claude-dev")
                || session_dir().is_some_and(|d| p == d)
        })
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = default_archives();
        if found.is_empty() {
            return Err(format!(
                "no Cline archive: no folder at {}",
                tried.join(", ")
            ));
        }
        Ok(found)
    }

    /// An SDK transcript: an object whose first bytes hold `"messages"` and
    /// Cline's contract keys (`"agent"` and a `"sessionId"` beside a
    /// `"version"`).
    fn detect(&self, prefix: &[u8], _whole: bool) -> bool {
        let body = &prefix[bom_len(prefix)..];
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        let has = |k: &[u8]| memchr::memmem::find(body, k).is_some();
        first == Some(&b'{')
            && has(b"\"messages\"")
            && has(b"\"agent\"")
            && has(b"\"sessionId\"")
            && has(b"\"version\"")
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        Ok(document::open(self, TAG, input, path, None, opts))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        _byte: u64,
        _lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        document::open(self, TAG, input, path, Some((header, context)), opts)
    }

    fn needs_running_context(&self) -> bool {
        true
    }

    fn is_document(&self, _path: &Path) -> bool {
        true
    }

    fn records_cost(&self) -> bool {
        false
    }

    /// A fork's parent session (its manifest's
    /// `metadata.fork.forkedFromSessionId`): the fork's copies of the
    /// parent's messages are the parent's (one lineage).
    fn parent(&self, header: &Header) -> Option<String> {
        header
            .parent
            .as_ref()
            .and_then(Parent::session)
            .map(|p| self.lineage(p))
    }

    /// The parent's session id: its transcript is found by its name
    /// (`<id>.messages.json`, [`Cline::parent_lookup_name`]), so that a
    /// parent that sorts after its fork is read ahead and its copies are
    /// the ones kept.
    fn parent_file_name<'h>(&self, header: &'h Header) -> Option<&'h str> {
        header.parent.as_ref().and_then(Parent::session)
    }

    fn parent_lookup_name<'n>(&self, file_name: &'n str) -> &'n str {
        file_name
            .strip_suffix(".messages.json")
            .unwrap_or(file_name)
    }
}

/// Cline's folders that exist, and every place tried: the data folder
/// (`$CLINE_DATA_DIR`, else `${CLINE_DIR:-~/.cline}/data`) with its
/// `tasks/`, its sessions folder (`$CLINE_SESSION_DATA_DIR`, else
/// `<data>/sessions`), and the VS Code extension's global storage
/// (`saoudrizwan.claude-dev`) of Code, Code - Insiders, VSCodium and
/// Cursor, on Linux (`$XDG_CONFIG_HOME`, else `~/.config`) and macOS
/// (`~/Library/Application Support`).
pub fn default_archives() -> (Vec<PathBuf>, Vec<String>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut candidates = Vec::new();
    let data = var("CLINE_DATA_DIR").or_else(|| {
        var("CLINE_DIR")
            .or_else(|| home.as_ref().map(|h| h.join(".cline")))
            .map(|d| d.join("data"))
    });
    if let Some(d) = &data {
        candidates.push(d.join("tasks"));
    }
    if let Some(s) =
        var("CLINE_SESSION_DATA_DIR").or_else(|| data.as_ref().map(|d| d.join("sessions")))
    {
        candidates.push(s);
    }
    let config = var("XDG_CONFIG_HOME").or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mac = home
        .as_ref()
        .map(|h| h.join("Library").join("Application Support"));
    for root in [config, mac].into_iter().flatten() {
        for editor in ["Code", "Code - Insiders", "VSCodium", "Cursor"] {
            candidates.push(
                root.join(editor)
                    .join("User")
                    .join("globalStorage")
                    .join("saoudrizwan.claude-dev"),
            );
        }
    }
    let mut found = Vec::new();
    let mut tried = Vec::new();
    for c in candidates {
        if c.is_dir() {
            if !found.contains(&c) {
                found.push(c);
            }
        } else {
            tried.push(c.display().to_string());
        }
    }
    if found.is_empty() && tried.is_empty() {
        tried.push("~/.cline/data (HOME is not set)".to_owned());
    }
    (found, tried)
}

/// `$CLINE_SESSION_DATA_DIR`, read once: a sessions folder of another
/// name, whose `*.messages.json` are Cline's too.
fn session_dir() -> Option<&'static Path> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        std::env::var_os("CLINE_SESSION_DATA_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
    .as_deref()
}

/// `state/taskHistory.json` beside a `tasks/` folder, read once per
/// version of it (its size and time): task id to `cwdOnTaskInitialization`.
fn task_cwd(tasks: &Path, id: &str) -> Option<String> {
    type Cache = HashMap<
        PathBuf,
        (
            (u64, Option<std::time::SystemTime>),
            HashMap<String, String>,
        ),
    >;
    static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
    let file = tasks.parent()?.join("state").join("taskHistory.json");
    let meta = std::fs::metadata(&file).ok()?;
    let stamp = (meta.len(), meta.modified().ok());
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.get(&file).is_none_or(|(s, _)| *s != stamp) {
        let mut map = HashMap::new();
        if let Ok(serde_json::Value::Array(items)) =
            serde_json::from_slice::<serde_json::Value>(&std::fs::read(&file).ok()?)
        {
            for i in items {
                if let (Some(id), Some(cwd)) = (
                    i.get("id").and_then(|v| v.as_str()),
                    i.get("cwdOnTaskInitialization").and_then(|v| v.as_str()),
                ) {
                    map.insert(id.to_owned(), cwd.to_owned());
                }
            }
        }
        cache.insert(file.clone(), (stamp, map));
    }
    cache.get(&file)?.1.get(id).cloned()
}

/// What an SDK session's manifest says: its cwd, its start, and the
/// session its lineage starts at (a fork's `metadata.fork.forkedFromSessionId`,
/// followed through the parents' manifests; None for a session that is no
/// fork).
#[derive(Debug, Default)]
struct Manifest {
    cwd: Option<String>,
    start: Option<i64>,
    /// The session it was forked from.
    parent: Option<String>,
    root: Option<String>,
}

/// The session a manifest's fork names, if any.
fn forked_from(m: &manifest::ManifestDoc) -> Option<&str> {
    m.forked_from
        .as_deref()
        .filter(|s| !s.is_empty() && !s.contains(['/', '\\']) && *s != "." && *s != "..")
}

/// An SDK session's manifest (`<sessionId>.json` in the session's folder,
/// named after the folder: a subagent's file is in its root session's):
/// its cwd, start and lineage (a fork's parents' manifests are in their
/// folders beside it; at most 32 are followed).
fn manifest(path: &Path) -> Manifest {
    let Some(dir) = path.parent() else {
        return Manifest::default();
    };
    let Some(name) = dir.file_name() else {
        return Manifest::default();
    };
    let Some(v) = manifest::read(dir, name) else {
        return Manifest::default();
    };
    fn s(x: &Option<String>) -> Option<&str> {
        x.as_deref().filter(|x| !x.is_empty())
    }
    let cwd = s(&v.cwd)
        .or_else(|| s(&v.workspace_root))
        .map(str::to_owned);
    let start = s(&v.started_at)
        .or_else(|| s(&v.created_at))
        .and_then(parse_iso_millis);
    let parent = forked_from(&v).map(str::to_owned);
    let mut root = None;
    let mut next = parent.clone();
    let sessions = dir.parent();
    for _ in 0..32 {
        let Some(id) = next.take() else {
            break;
        };
        next = sessions
            .and_then(|d| manifest::read(&d.join(&id), std::ffi::OsStr::new(&id)))
            .and_then(|p| forked_from(&p).map(str::to_owned));
        if next.as_deref() == Some(id.as_str()) {
            next = None;
        }
        root = Some(id);
    }
    Manifest {
        cwd,
        start,
        parent,
        root,
    }
}

/// The file stem without `.messages`.
fn stem(path: &Path) -> String {
    let n = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    n.strip_suffix(".messages.json")
        .or_else(|| n.strip_suffix(".json"))
        .unwrap_or(&n)
        .to_owned()
}

impl MapDocument for Cline {
    /// Not compared: the format does not hash unchanged files
    /// ([`crate::format::Format::hashes_unchanged`]; a file of the same
    /// inode, size and time is unchanged), so none is kept.
    fn hashes_content(&self) -> bool {
        false
    }

    fn read<'a>(
        &self,
        data: &'a [u8],
        path: &Path,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
        items: &mut Items<'a>,
    ) -> Result<Header, SkipReason> {
        let data = &data[bom_len(data)..];
        // The thread's parser, kept from document to document.
        let mut json = crate::document::parser();
        // `stats` builds no record: the lean parse, which leaves escaped
        // strings raw (item versions then hash them raw, in every run of
        // a checkpoint alike: a checkpoint keeps its command).
        json.set_lean(filter.builds_none());
        json.parse(data, arena, |parsed| {
            let (nodes, repaired) = parsed?;
            let legacy = is_legacy(path);
            let mut lineage: Option<String> = None;
            let mut forked_from: Option<String> = None;
            let (messages, header, agent) = if legacy {
                if !matches!(nodes.first(), Some(Node::Array { .. })) {
                    return Err(SkipReason::Unsupported(
                        "not a Cline task history: not a JSON array".to_owned(),
                    ));
                }
                let id = path
                    .parent()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let tasks = path.parent().and_then(Path::parent);
                let cwd = tasks.and_then(|t| task_cwd(t, &id)).unwrap_or_default();
                let timestamp = id.parse::<i64>().ok();
                (nodes, (id, cwd, timestamp), None)
            } else {
                let root = Fields::of(nodes);
                let Some(messages) = root
                    .get("messages")
                    .filter(|m| matches!(m.first(), Some(Node::Array { .. })))
                else {
                    return Err(SkipReason::Unsupported(
                        "not a Cline session transcript: no `messages` list".to_owned(),
                    ));
                };
                let id = root
                    .str("sessionId")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| stem(path));
                let Manifest {
                    cwd,
                    start,
                    parent,
                    root: lineage_root,
                } = manifest(path);
                let first_ts =
                    elements(messages).find_map(|m| Fields::of(m).get("ts").and_then(as_i64));
                // A subagent's or teammate's file: its agent id is its stem.
                let agent = root
                    .str("agent")
                    .filter(|a| *a != "lead")
                    .map(|_| &*arena.alloc_str(&stem(path)));
                // A fork's transcript (the session's own, not a subagent's)
                // starts with copies of its parent's messages under their
                // ids: its messages are known by its lineage's first
                // session, so that the copies are the parent's.
                let own = path
                    .parent()
                    .and_then(Path::file_name)
                    .is_some_and(|d| d.to_string_lossy() == stem(path));
                lineage = lineage_root.filter(|_| own && agent.is_none());
                forked_from = parent.filter(|_| lineage.is_some());
                (
                    messages,
                    (id, cwd.unwrap_or_default(), start.or(first_ts)),
                    agent,
                )
            };
            report.repaired += u64::from(repaired);
            let (id, cwd, timestamp) = header;
            let header = Header {
                fingerprint: headerless_fingerprint(TAG, path),
                id,
                cwd,
                version: 0,
                timestamp,
                parent: forked_from.map(Parent::Session),
            };
            let session = arena.alloc_str(&header.id);
            let file = CFile {
                session,
                lineage: lineage.map_or(&*session, |l| &*arena.alloc_str(&l)),
                project: arena.alloc_str(&header.cwd),
                source: arena.alloc_str(&format!("cline:{}", stem(path))),
                agent,
                repaired,
            };
            let mut time = header.timestamp;
            items.reserve(elements(messages).size_hint().1.unwrap_or(0));
            for (i, m) in elements(messages).enumerate() {
                let mut item = file.message(m, i as u64 + 1, &mut time, arena, filter, report);
                item.version = items.version_of(m);
                items.push(report, item);
            }
            Ok(header)
        })
    }
}

/// What a file's records share.
struct CFile<'a> {
    session: &'a str,
    /// The session its messages are known by: the first of a fork's
    /// lineage, else its own.
    lineage: &'a str,
    project: &'a str,
    source: &'a str,
    agent: Option<&'a str>,
    repaired: bool,
}

/// The first tool of an older XML-style call in an assistant's text.
fn xml_tool(text: &str) -> Option<&'static str> {
    XML_TOOLS.iter().copied().find(|t| {
        let open = format!("<{t}>");
        text.contains(&open)
    })
}

/// A message's usage from its `metrics`: the SDK's (`inputTokens`
/// counting the cache reads and writes, `outputTokens`,
/// `cacheReadTokens`, `cacheWriteTokens`, `cost`) or legacy v3.40's
/// (`tokens.prompt` counting `tokens.cached`, `tokens.completion`,
/// `cost`). Input is the tokens not read from or written to the cache;
/// the total is input + output as Cline counts them (every token once).
fn usage_of(m: &[Node<'_>]) -> Option<Usage> {
    if !matches!(m.first(), Some(Node::Object { .. })) {
        return None;
    }
    let f = Fields::of(m);
    let n = |f: Fields<'_, '_>, k: &str| f.get(k).and_then(as_u64).unwrap_or(0);
    let cost = f.get("cost").and_then(as_f64).unwrap_or(0.0);
    if let Some(t) = f.get("tokens").map(Fields::of) {
        let (prompt, out, cached) = (n(t, "prompt"), n(t, "completion"), n(t, "cached"));
        return Some(Usage {
            input: prompt.saturating_sub(cached),
            output: out,
            cache_read: cached,
            cache_write: 0,
            total_tokens: prompt.saturating_add(out),
            cost,
        });
    }
    let (input, out, read, write) = (
        n(f, "inputTokens"),
        n(f, "outputTokens"),
        n(f, "cacheReadTokens"),
        n(f, "cacheWriteTokens"),
    );
    Some(Usage {
        input: input.saturating_sub(read).saturating_sub(write),
        output: out,
        cache_read: read,
        cache_write: write,
        total_tokens: input.saturating_add(out),
        cost,
    })
}

impl<'a> CFile<'a> {
    /// The item of message `m` at `pos`, counted in `report`.
    fn message(
        &self,
        m: &[Node<'a>],
        pos: u64,
        time: &mut Option<i64>,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Item<'a> {
        // The fields read, found in one pass (the first of each name).
        let [id, ts, role, content, metadata, model_info, metrics] =
            Fields::of(m).first_of::<7>(|k| match k {
                "id" => Some(0),
                "ts" => Some(1),
                "role" => Some(2),
                "content" => Some(3),
                "metadata" => Some(4),
                "modelInfo" => Some(5),
                "metrics" => Some(6),
                _ => None,
            });
        let id = id.and_then(as_str).filter(|s| !s.is_empty());
        let key = id.unwrap_or_else(|| arena.alloc_str(&format!("#{pos}")));
        let mut item = Item {
            key,
            positional: id.is_none(),
            // Taken by the caller ([`Items::version_of`]).
            version: 0,
            settled: true,
            fingerprint: fingerprint(&[b"cline-msg", self.lineage.as_bytes(), key.as_bytes()]),
            line: pos,
            byte: 0,
            record: None,
        };
        if !matches!(m.first(), Some(Node::Object { .. })) {
            report.entries.add("(not an object)", 1);
            report.no_record += 1;
            return item;
        }
        report.entries.add("message", 1);
        if let Some(ts) = ts.and_then(as_i64) {
            *time = Some(ts);
        }
        let written = role.and_then(as_str).unwrap_or("");
        let compaction = metadata.map(Fields::of).and_then(|x| x.str("kind")) == Some("compaction");
        // (Walked again where needed: collected, they would cost an
        // allocation a message.)
        let blocks = || content.into_iter().flat_map(elements);
        let role = match written {
            _ if compaction => Role::System,
            "user"
                if blocks().next().is_some()
                    && blocks().all(|b| Fields::of(b).str("type") == Some("tool_result")) =>
            {
                Role::ToolResult
            }
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => {
                report.add_unknown_role(if other.is_empty() { "(none)" } else { other });
                report.no_record += 1;
                return item;
            }
        };
        let assistant = role == Role::Assistant;
        let info = model_info.map(Fields::of);
        let model = info
            .and_then(|i| i.str("id").or_else(|| i.str("modelId")))
            .filter(|_| assistant);
        let provider = info
            .and_then(|i| i.str("provider").or_else(|| i.str("providerId")))
            .filter(|_| assistant);
        let usage = if assistant {
            metrics.and_then(usage_of)
        } else {
            None
        };
        if let Some(u) = &usage {
            let at = UsageAt {
                seq: 0,
                line: pos,
                time: *time,
                reasoning: 0,
            };
            report.add_usage_at(provider, model, u, true, at);
        }
        if !report.count_record(role, filter) {
            return item;
        }
        let mut text = Text::new(arena);
        let mut call: (Option<&'a str>, Option<&'a str>) = (None, None);
        let mut is_error = None;
        if compaction {
            text.kind("compaction");
        }
        let plain =
            |text: &mut Text<'a>, t: &'a str, call: &mut (Option<&'a str>, Option<&'a str>)| {
                text.kind("text");
                if t.contains("<task>") {
                    text.kind("task");
                }
                if t.contains("<environment_details>") {
                    text.kind("harness");
                }
                if assistant {
                    if let Some(tool) = xml_tool(t) {
                        text.kind("toolCall");
                        if call.0.is_none() {
                            call.0 = Some(tool);
                        }
                    }
                }
                text.push_decoded(t);
            };
        if let Some(s) = content.and_then(as_str) {
            plain(&mut text, s, &mut call);
        }
        for b in blocks() {
            let b = Fields::of(b);
            match b.str("type").unwrap_or("") {
                "text" => {
                    if let Some(t) = b.str("text") {
                        plain(&mut text, t, &mut call);
                    }
                }
                "thinking" => {
                    if let Some(t) = b.str("thinking").or_else(|| b.str("text")) {
                        text.kind("thinking");
                        text.push_decoded(t);
                    }
                }
                "tool_use" => {
                    let name = b.str("name").unwrap_or("");
                    text.kind("toolCall");
                    text.call(name, b.get("input"));
                    if call.0.is_none() {
                        call = (Some(name), b.str("id"));
                    }
                }
                "tool_result" => {
                    text.kind("toolResult");
                    if call.1.is_none() {
                        call.1 = b.str("tool_use_id");
                    }
                    if let Some(e) = b.get("is_error").and_then(as_bool) {
                        is_error = Some(is_error.unwrap_or(false) || e);
                    }
                    match b.get("content") {
                        Some(c) if as_str(c).is_some() => {
                            text.push_decoded(as_str(c).unwrap_or(""));
                        }
                        Some(c) => {
                            for p in elements(c) {
                                let p = Fields::of(p);
                                if let Some(t) = p.str("text") {
                                    text.push_decoded(t);
                                }
                            }
                        }
                        None => {}
                    }
                }
                "image" => {
                    let src = b.get("source").map(Fields::of);
                    text.kind("image");
                    text.image(
                        src.and_then(|s| s.str("media_type")),
                        src.and_then(|s| s.str("data")),
                    );
                }
                "file" => {
                    text.kind("file");
                    if let Some(p) = b.str("path") {
                        text.push(arena.alloc_str(&format!("[file {p}]")));
                    }
                    if let Some(c) = b.str("content") {
                        text.push_decoded(c);
                    }
                }
                "redacted_thinking" => text.kind("redacted_thinking"),
                // Another block type: accepted, nothing of it in the text.
                _ => {}
            }
        }
        if self.agent.is_some() {
            text.kind("subagent");
        }
        let (text, kinds) = text.finish();
        item.record = Some(Record {
            role,
            text,
            project: self.project,
            session: self.session,
            key: arena.alloc_str(&format!("{}:{key}", self.session)),
            source: self.source,
            id: Some(key),
            parent_id: None,
            line: pos,
            byte: 0,
            entry: if written.is_empty() {
                "message"
            } else {
                written
            },
            message_role: None,
            kinds,
            timestamp: *time,
            provider,
            model,
            usage,
            stop_reason: None,
            tool_name: call.0,
            tool_call_id: call.1,
            is_error,
            custom_type: None,
            command: None,
            exit_code: None,
            repaired: self.repaired,
            agent_id: self.agent,
            message_id: None,
            request_id: None,
            provisional: false,
        });
        item
    }
}
