//! The Amp adapter: the only module that knows Amp's key names (see
//! `docs/amp.md` for the mapping, and `shared/spec/amp-format.md` for the
//! format).
//!
//! A thread is one JSON document, `threads/T-<uuid>.json` under Amp's data
//! folder, rewritten whole on every change, **without moving its
//! modification time**: a document source ([`crate::document`]) whose
//! unchanged files are hashed ([`Format::hashes_unchanged`]). Each message
//! is an item keyed by its `messageId` (its position `#<n>` without one);
//! an assistant message whose `state.type` is `running` waits for a later
//! read. A thread with a `usageLedger.events` list counts its usage from the
//! ledger alone (each event an item without a record, keyed `ledger:<id>`),
//! as ccusage does; else from `messages[].usage`.

use std::path::{Path, PathBuf};

use simd_json::Node;

use crate::document::{self, Bump, Item, Items, MapDocument};
use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{as_i64, as_str, as_u64, elements, fingerprint, Fields};
use crate::line::{Header, Text};
use crate::line_reader::bom_len;
use crate::record::{Record, Role, RoleFilter, Usage};
use crate::report::{Report, SkipReason, UsageAt};
use crate::source::{headerless_fingerprint, SourceOptions};
use crate::time::parse_iso_millis;

/// The provider usage is counted under (Amp routes to several; it does not
/// say which).
pub const PROVIDER: &str = "amp";

/// The tag of a thread's header fingerprint.
const TAG: &[u8] = b"amp-thread";

/// Amp's thread files.
///
/// - The file's [`Header`]: `id` is the thread's `id` (the file stem when
///   it has none), `cwd` the decoded `env.initial.trees[0].uri` (`""` when
///   the thread names no tree), `timestamp` its `created`.
/// - Records' keys are `<thread id>:<messageId>` (`:#<position>` for a
///   message without one).
#[derive(Debug, Clone, Copy, Default)]
pub struct Amp;

impl Format for Amp {
    fn name(&self) -> &'static str {
        "amp"
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        // Its documents never hand out a parsed line: every record's text
        // is decoded, as without the raw-text read.
        true
    }

    /// `T-*.json` in a `threads/` folder, or below one (ccusage reads the
    /// folder recursively).
    fn is_session_file(&self, path: &Path) -> bool {
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("T-") && n.ends_with(".json"));
        named
            && path
                .ancestors()
                .skip(1)
                .any(|p| p.file_name().is_some_and(|n| n == "threads"))
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let (found, tried) = default_archives();
        if found.is_empty() {
            return Err(format!("no Amp archive: no folder at {}", tried.join(", ")));
        }
        Ok(found)
    }

    /// A JSON object whose first bytes hold a `messages` key and Amp's own
    /// keys: an `"id":"T-` thread id, an `env` with `initial` trees, or a
    /// `usageLedger`.
    fn detect(&self, prefix: &[u8], _whole: bool) -> bool {
        let body = &prefix[bom_len(prefix)..];
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        let has = |k: &[u8]| memchr::memmem::find(body, k).is_some();
        first == Some(&b'{')
            && has(b"\"messages\"")
            && (has(b"\"id\":\"T-")
                || has(b"\"id\": \"T-")
                || (has(b"\"env\"") && has(b"\"initial\""))
                || has(b"\"usageLedger\""))
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

    /// Amp rewrites a thread without moving its modification time.
    fn hashes_unchanged(&self) -> bool {
        true
    }
}

/// Amp's `threads/` folders that exist, and every place tried: each entry
/// of `$AMP_DATA_DIR` (a comma list, ccusage's: the folder holding
/// `threads/`), else `$XDG_DATA_HOME/amp/threads` (Amp's own) and
/// `~/.local/share/amp/threads`.
pub fn default_archives() -> (Vec<PathBuf>, Vec<String>) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expand = |s: &str| -> PathBuf {
        match (s.strip_prefix('~'), &home) {
            (Some(rest), Some(h)) if rest.is_empty() || rest.starts_with('/') => {
                h.join(rest.trim_start_matches('/'))
            }
            _ => PathBuf::from(s),
        }
    };
    let mut candidates = Vec::new();
    if let Ok(list) = std::env::var("AMP_DATA_DIR") {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            candidates.push(expand(entry).join("threads"));
        }
    }
    if candidates.is_empty() {
        if let Ok(x) = std::env::var("XDG_DATA_HOME") {
            if !x.trim().is_empty() {
                candidates.push(expand(x.trim()).join("amp").join("threads"));
            }
        }
        candidates.extend(
            home.as_ref()
                .map(|h| h.join(".local").join("share").join("amp").join("threads")),
        );
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
        tried.push("~/.local/share/amp/threads (HOME is not set)".to_owned());
    }
    (found, tried)
}

/// A `file://` URL's path, percent-decoded (`file://localhost/x` is
/// `/x`); another string as it is.
pub fn file_url_path(uri: &str) -> String {
    let Some(rest) = uri.strip_prefix("file://") else {
        return uri.to_owned();
    };
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let b = rest.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The project of a thread: `env.initial.trees[0].uri` (a URL or a path
/// string, or an object with `fsPath` or `path`).
fn project_of(root: Fields<'_, '_>) -> String {
    let tree = root
        .get("env")
        .and_then(|e| Fields::of(e).get("initial"))
        .and_then(|i| Fields::of(i).get("trees"))
        .and_then(|t| elements(t).next());
    let Some(uri) = tree.and_then(|t| Fields::of(t).get("uri")) else {
        return String::new();
    };
    if let Some(s) = as_str(uri) {
        return file_url_path(s);
    }
    let f = Fields::of(uri);
    f.str("fsPath")
        .or_else(|| f.str("path"))
        .map(file_url_path)
        .unwrap_or_default()
}

/// A message's usage as ccusage counts it: `inputTokens` (not cached),
/// `outputTokens`, `cacheCreationInputTokens` (cache written),
/// `cacheReadInputTokens`; the total their sum (`totalInputTokens` is not
/// read; `totalTokens` only when every part is missing).
fn message_usage(u: &[Node<'_>]) -> Option<Usage> {
    if !matches!(u.first(), Some(Node::Object { .. })) {
        return None;
    }
    let f = Fields::of(u);
    let n = |k: &str| f.get(k).and_then(as_u64);
    let parts = [
        n("inputTokens"),
        n("outputTokens"),
        n("cacheCreationInputTokens"),
        n("cacheReadInputTokens"),
    ];
    let [input, output, write, read] = parts.map(|p| p.unwrap_or(0));
    let total = if parts.iter().all(Option::is_none) {
        n("totalTokens").unwrap_or(0)
    } else {
        [output, write, read]
            .into_iter()
            .fold(input, u64::saturating_add)
    };
    Some(Usage {
        input,
        output,
        cache_read: read,
        cache_write: write,
        total_tokens: total,
        cost: 0.0,
    })
}

/// The message's id as a key: a number's decimal, a string as it is.
fn message_id<'a>(v: Option<&[Node<'a>]>, arena: &'a Bump) -> Option<&'a str> {
    let v = v?;
    if let Some(s) = as_str(v) {
        return Some(s);
    }
    as_i64(v).map(|n| &*arena.alloc_str(&n.to_string()))
}

/// What one message says of its role: `user` (`tool_result` when its
/// content is only `tool_result` blocks), `assistant`, `info` (system).
fn role_of(role: &str, content: Option<&[Node<'_>]>) -> Option<Role> {
    match role {
        "user" => {
            let blocks: Vec<_> = content.into_iter().flat_map(elements).collect();
            let results = !blocks.is_empty()
                && blocks
                    .iter()
                    .all(|b| Fields::of(b).str("type") == Some("tool_result"));
            Some(if results {
                Role::ToolResult
            } else {
                Role::User
            })
        }
        "assistant" => Some(Role::Assistant),
        "info" => Some(Role::System),
        _ => None,
    }
}

/// The thread's model from `env.initial.tags` (`model:<name>`).
fn tagged_model<'a>(root: Fields<'_, 'a>) -> Option<&'a str> {
    root.get("env")
        .and_then(|e| Fields::of(e).get("initial"))
        .and_then(|i| Fields::of(i).get("tags"))
        .into_iter()
        .flat_map(elements)
        .filter_map(as_str)
        .find_map(|t| t.strip_prefix("model:"))
}

impl MapDocument for Amp {
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
            if !matches!(nodes.first(), Some(Node::Object { .. })) {
                return Err(SkipReason::Unsupported(
                    "not an Amp thread: not a JSON object".to_owned(),
                ));
            }
            let root = Fields::of(nodes);
            let Some(messages) = root
                .get("messages")
                .filter(|m| matches!(m.first(), Some(Node::Array { .. })))
            else {
                return Err(SkipReason::Unsupported(
                    "not an Amp thread: no `messages` list".to_owned(),
                ));
            };
            report.repaired += u64::from(repaired);
            let id = root
                .str("id")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    path.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default()
                });
            let created = root.get("created").and_then(as_i64);
            let header = Header {
                id,
                cwd: project_of(root),
                version: root.get("v").and_then(as_u64).unwrap_or(0),
                timestamp: created,
                parent: None,
                fingerprint: headerless_fingerprint(TAG, path),
            };
            let thread = Thread {
                session: arena.alloc_str(&header.id),
                project: arena.alloc_str(&header.cwd),
                source: arena.alloc_str(&format!(
                    "amp:{}",
                    path.file_stem().unwrap_or_default().to_string_lossy()
                )),
                model: tagged_model(root),
                repaired,
            };
            let ledger = root
                .get("usageLedger")
                .and_then(|l| Fields::of(l).get("events"))
                .filter(|e| matches!(e.first(), Some(Node::Array { .. })));
            let mut time = created;
            items.reserve(elements(messages).size_hint().1.unwrap_or(0));
            for (i, m) in elements(messages).enumerate() {
                let pos = i as u64 + 1;
                let mut item =
                    thread.message(m, pos, &mut time, ledger.is_none(), arena, filter, report);
                item.version = items.version_of(m);
                items.push(report, item);
            }
            if let Some(events) = ledger {
                let n = items.len() as u64;
                for (i, e) in elements(events).enumerate() {
                    let mut item =
                        thread.ledger_event(e, messages, n + i as u64 + 1, arena, report);
                    item.version = items.version_of(e);
                    items.push(report, item);
                }
            }
            Ok(header)
        })
    }
}

/// What a thread's records share.
struct Thread<'a> {
    session: &'a str,
    project: &'a str,
    source: &'a str,
    /// The thread's model tag.
    model: Option<&'a str>,
    repaired: bool,
}

impl<'a> Thread<'a> {
    /// The item of message `m` at `pos`, counted in `report` (its usage
    /// when `usage`: the thread has no ledger). `time` is the time of the
    /// message before (the thread's `created` for the first).
    #[allow(clippy::too_many_arguments)]
    fn message(
        &self,
        m: &[Node<'a>],
        pos: u64,
        time: &mut Option<i64>,
        usage_counted: bool,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Item<'a> {
        let f = Fields::of(m);
        let id = message_id(f.get("messageId"), arena);
        let positional = id.is_none();
        let key = id.unwrap_or_else(|| arena.alloc_str(&format!("#{pos}")));
        let fp = fingerprint(&[b"amp-msg", self.session.as_bytes(), key.as_bytes()]);
        let state = f.get("state").map(Fields::of);
        let state_type = state.and_then(|s| s.str("type"));
        let mut item = Item {
            key,
            positional,
            // Taken by the caller ([`Items::version_of`]).
            version: 0,
            settled: state_type != Some("running"),
            fingerprint: fp,
            line: pos,
            byte: 0,
            record: None,
        };
        if !matches!(m.first(), Some(Node::Object { .. })) {
            report.entries.add("(not an object)", 1);
            report.no_record += 1;
            return item;
        }
        let written = f.str("role").unwrap_or("");
        report.entries.add("message", 1);
        let content = f.get("content");
        let u = f.get("usage").map(Fields::of);
        // The message's time: a user's `meta.sentAt`, an assistant's
        // `usage.timestamp`, else the one before.
        let own = f
            .get("meta")
            .and_then(|x| Fields::of(x).get("sentAt"))
            .and_then(as_i64)
            .or_else(|| {
                u.and_then(|u| u.str("timestamp"))
                    .and_then(parse_iso_millis)
            })
            .or_else(|| f.str("timestamp").and_then(parse_iso_millis));
        if own.is_some() {
            *time = own;
        }
        let Some(role) = role_of(written, content) else {
            report.add_unknown_role(if written.is_empty() {
                "(none)"
            } else {
                written
            });
            report.no_record += 1;
            return item;
        };
        let assistant = role == Role::Assistant;
        let model = u
            .and_then(|u| u.str("model"))
            .or_else(|| f.str("model"))
            .filter(|_| assistant)
            .or(self.model.filter(|_| assistant));
        let usage = if assistant {
            f.get("usage").and_then(message_usage)
        } else {
            None
        };
        // Every usage an assistant message carries counts (ccusage drops
        // one without a `usage.timestamp` or a model: see `docs/amp.md`),
        // unless the thread has a ledger.
        if let (Some(u), true) = (&usage, usage_counted) {
            let at = UsageAt {
                seq: 0,
                line: pos,
                time: *time,
                reasoning: 0,
            };
            report.add_usage_at(Some(PROVIDER), model, u, true, at);
        }
        if !report.count_record(role, filter) {
            return item;
        }
        let mut text = Text::new(arena);
        let mut call: (Option<&'a str>, Option<&'a str>) = (None, None);
        let mut is_error = None;
        for b in content.into_iter().flat_map(elements) {
            let b = Fields::of(b);
            match b.str("type").unwrap_or("") {
                "text" => {
                    if let Some(t) = b.str("text") {
                        text.kind("text");
                        text.push_decoded(t);
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
                    let run = b.get("run").map(Fields::of);
                    let status = run.and_then(|r| r.str("status"));
                    if matches!(status, Some("error" | "cancelled" | "rejected-by-user")) {
                        is_error = Some(true);
                    } else if status.is_some() && is_error.is_none() {
                        is_error = Some(false);
                    }
                    let result = run.and_then(|r| r.get("result"));
                    let out =
                        result.and_then(|r| as_str(r).or_else(|| Fields::of(r).str("output")));
                    match (out, result, run.and_then(|r| r.get("error"))) {
                        (Some(o), _, _) => text.push_decoded(o),
                        (None, Some(r), _) if !matches!(r.first(), Some(Node::Static(_))) => {
                            let mut s = bumpalo::collections::String::new_in(arena);
                            crate::json::write_json(r, &mut s);
                            text.push(s.into_bump_str());
                        }
                        (None, _, Some(e)) => match as_str(e) {
                            Some(e) => text.push_decoded(e),
                            None => {
                                let mut s = bumpalo::collections::String::new_in(arena);
                                crate::json::write_json(e, &mut s);
                                text.push(s.into_bump_str());
                            }
                        },
                        _ => {}
                    }
                    if call.1.is_none() {
                        call.1 = b.str("toolUseID");
                    }
                }
                _ => {}
            }
        }
        // An `info` summary: a compaction's text, or the thread it was
        // summarised into.
        if let Some(s) = f.get("summary").map(Fields::of) {
            match (s.str("type"), s.str("summary"), s.str("thread")) {
                (Some("message"), Some(t), _) => {
                    text.kind("summary");
                    text.push_decoded(t);
                }
                (Some("thread"), _, Some(t)) => {
                    text.kind("summary");
                    text.push(arena.alloc_str(&format!("summarised into thread {t}")));
                }
                _ => {}
            }
        }
        if state_type == Some("cancelled") {
            text.kind("cancelled");
        }
        let (text, kinds) = text.finish();
        let key = arena.alloc_str(&format!("{}:{key}", self.session));
        item.record = Some(Record {
            role,
            text,
            project: self.project,
            session: self.session,
            key,
            source: self.source,
            id: Some(item.key),
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
            provider: None,
            model,
            usage,
            stop_reason: state.and_then(|s| s.str("stopReason")),
            tool_name: call.0,
            tool_call_id: call.1,
            is_error,
            custom_type: None,
            command: None,
            exit_code: None,
            repaired: self.repaired,
            agent_id: None,
            message_id: None,
            request_id: None,
            provisional: false,
        });
        item
    }

    /// The item of a ledger event (no record): its usage, its tokens
    /// `input` and `output`, with the cache columns of the assistant
    /// message whose `messageId` is its `toMessageId`.
    fn ledger_event(
        &self,
        e: &[Node<'a>],
        messages: &[Node<'a>],
        pos: u64,
        arena: &'a Bump,
        report: &mut Report,
    ) -> Item<'a> {
        let f = Fields::of(e);
        let (key, positional) = match message_id(f.get("id"), arena) {
            Some(id) => (arena.alloc_str(&format!("ledger:{id}")), false),
            None => (arena.alloc_str(&format!("ledger:#{pos}")), true),
        };
        report.entries.add("usageLedger event", 1);
        report.no_record += 1;
        let tokens = f.get("tokens").map(Fields::of);
        if let Some(t) = tokens {
            let n = |k: &str| t.get(k).and_then(as_u64).unwrap_or(0);
            let to = f.get("toMessageId");
            let cache = to
                .and_then(|to| {
                    elements(messages).find(|m| {
                        let m = Fields::of(m);
                        m.str("role") == Some("assistant")
                            && m.get("messageId").is_some_and(|id| same_id(id, to))
                    })
                })
                .and_then(|m| Fields::of(m).get("usage"))
                .and_then(message_usage)
                .map_or((0, 0), |u| (u.cache_write, u.cache_read));
            let (input, output) = (n("input"), n("output"));
            let u = Usage {
                input,
                output,
                cache_write: cache.0,
                cache_read: cache.1,
                total_tokens: [output, cache.0, cache.1]
                    .into_iter()
                    .fold(input, u64::saturating_add),
                cost: 0.0,
            };
            let at = UsageAt {
                seq: 0,
                line: pos,
                time: f.str("timestamp").and_then(parse_iso_millis),
                reasoning: 0,
            };
            report.add_usage_at(Some(PROVIDER), f.str("model"), &u, true, at);
        }
        Item {
            key,
            positional,
            // Taken by the caller ([`Items::version_of`]).
            version: 0,
            settled: true,
            fingerprint: fingerprint(&[b"amp-ledger", self.session.as_bytes(), key.as_bytes()]),
            line: pos,
            byte: 0,
            record: None,
        }
    }
}

/// Two `messageId`s alike (numbers or strings).
fn same_id(a: &[Node<'_>], b: &[Node<'_>]) -> bool {
    match (as_i64(a), as_i64(b)) {
        (Some(x), Some(y)) => x == y,
        _ => as_str(a).is_some() && as_str(a) == as_str(b),
    }
}
