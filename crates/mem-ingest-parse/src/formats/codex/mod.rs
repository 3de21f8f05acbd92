//! The Codex adapter: the only module that knows the key names of OpenAI
//! Codex CLI rollouts (see the README's "Codex" section for the mapping,
//! and `shared/spec/codex-format.md` for the format).
//!
//! A rollout has no header line in pi's sense: the file's [`Header`] is
//! built from its first `session_meta` line within its first [`PREFIX`]
//! bytes (a legacy flat rollout: its bare meta line). Lines are read,
//! parsed and accounted for by the machinery pi's sources use; only the
//! mapping of a parsed line is this module's, with a running context (the
//! current model and cwd, the last cumulative token total, the visible
//! messages still waiting for their twin) that the engine carries between
//! parts of a file and across runs.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};

use bumpalo::Bump;
use simd_json::{Node, StaticNode};

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::json::{as_bool, as_str, as_u64, elements, fingerprint, is_blank, write_json, Fields};
use crate::json::{JsonParser, LineHash, PrefixLines};
use crate::line::{Entry, Header, LinePos, MapLine, Parent, Text};
use crate::line_reader::bom_len;
use crate::record::{Record, Role, RoleFilter, Usage};
use crate::report::{Report, SkipReason};
use crate::source::{
    headerless_body, headerless_fingerprint, open_headerless, record_source, resume_headerless,
    FileLines, LineDriver, Position, RecordSource, SourceOptions,
};
use crate::time::parse_iso_millis;

mod replay;

/// How much of a file's start its [`Header`] is looked for in (bytes):
/// a `session_meta` line holds the base instructions, tens of KiB.
pub const PREFIX: usize = 1 << 20;

/// Lines of a file's start its header is looked for in.
const HEADER_LINES: usize = 64;

/// The provider of a session whose `session_meta` names none: Codex's
/// default (`model_provider = "openai"`).
const DEFAULT_PROVIDER: &str = "openai";

/// Envelope types of current rollouts that detection accepts.
const ENVELOPE_TYPES: [&str; 5] = [
    "session_meta",
    "turn_context",
    "response_item",
    "event_msg",
    "compacted",
];

/// OpenAI Codex CLI rollouts: `rollout-*.jsonl` under `sessions/` and
/// `archived_sessions/` of `$CODEX_HOME` (else `~/.codex`), one
/// `{timestamp, type, payload}` envelope a line.
///
/// - The file's [`Header`]: the first `session_meta`'s `id`, `cwd` and
///   `timestamp` (later `session_meta` lines are a parent's, replayed); a
///   file without one takes its file stem as id. Its parent: the
///   subagent's `source.subagent.thread_spawn.parent_thread_id`, else a
///   top-level `parent_thread_id`, else `forked_from_id`.
/// - Records carry the current `turn_context` `cwd` (the header's before
///   the first) and model; keys are `<session>:L<line>` (lines have no
///   ids, and rollouts are only appended to).
/// - A thread, its forks and its subagents are one lineage: a line a child
///   replays from its parent is byte-identical to the parent's (the same
///   timestamp), so its fingerprint is the same and it is emitted and
///   counted once.
#[derive(Debug, Clone, Copy, Default)]
pub struct Codex;

impl Format for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        // Its sources never read raw text.
        true
    }

    /// `rollout-*.jsonl`, and `rollout-*.jsonl.zst` without a plain
    /// `.jsonl` beside it (reported as skipped, see `Compressed`); an
    /// `archived_sessions/` file whose relative path is also under
    /// `sessions/` is not (the active copy wins).
    fn is_session_file(&self, path: &Path) -> bool {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        if !name.starts_with("rollout-") {
            return false;
        }
        if name.ends_with(".jsonl.zst") {
            if path.with_extension("").is_file() {
                return false;
            }
        } else if !name.ends_with(".jsonl") {
            return false;
        }
        active_copy(path).is_none_or(|p| !p.is_file())
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        self.default_archives()
            .map(|v| v.into_iter().next().expect("one at least"))
    }

    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        let home = match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => match std::env::var_os("HOME") {
                Some(h) => PathBuf::from(h).join(".codex"),
                None => return Err("no Codex archive: neither CODEX_HOME nor HOME is set".into()),
            },
        };
        let dirs = [home.join("sessions"), home.join("archived_sessions")];
        let found: Vec<PathBuf> = dirs.iter().filter(|d| d.is_dir()).cloned().collect();
        if found.is_empty() {
            return Err(format!(
                "no Codex archive: no {} nor {}",
                dirs[0].display(),
                dirs[1].display()
            ));
        }
        Ok(found)
    }

    /// The first non-blank line is a Codex envelope (an object with a
    /// `payload` and a `type` of a current rollout: `session_meta`,
    /// `turn_context`, `response_item`, `event_msg`, `compacted`; pi's and
    /// Claude Code's lines have no `payload`), or a legacy flat rollout's
    /// meta line (a string `id`, no `type`, no `payload`). A first line
    /// longer than the prefix is Codex's when it starts with an envelope's
    /// `"timestamp"` and names `"type":"session_meta"`.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        let body = &prefix[bom_len(prefix)..];
        let start = body
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .unwrap_or(body.len());
        let rest = &body[start..];
        let line = match memchr::memchr(b'\n', rest) {
            Some(i) => &rest[..i],
            None if whole => rest,
            None => {
                return rest.starts_with(b"{\"timestamp\":")
                    && memchr::memmem::find(rest, b"\"type\":\"session_meta\"").is_some();
            }
        };
        if is_blank(line) {
            return false;
        }
        crate::json::with_scratch(|json, arena| {
            json.parse(line, arena, |parsed| {
                let Ok((nodes, _)) = parsed else { return false };
                let f = Fields::of(nodes);
                match (f.str("type"), f.get("payload")) {
                    (Some(ty), Some(_)) => ENVELOPE_TYPES.contains(&ty),
                    (None, None) => f.str("id").is_some() && f.get("role").is_none(),
                    _ => false,
                }
            })
        })
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        if compressed(path) {
            #[cfg(feature = "zstd")]
            return zst::open(input, path, opts);
            #[cfg(not(feature = "zstd"))]
            return Ok(Box::new(Compressed::new(input, path, 0, 0)));
        }
        let session = open_headerless(input, path, opts, PREFIX, |prefix, whole| {
            context(prefix, whole, path, opts.line_hash_scheme())
        })?;
        Ok(Box::new(CodexSource(session.counting(opts))))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        let ctx = CodexContext::new(
            header.clone(),
            path,
            Running::decode(context),
            opts.line_hash_scheme(),
        );
        if compressed(path) {
            #[cfg(feature = "zstd")]
            return zst::resume(input, path, ctx, byte, lines_before, opts);
            #[cfg(not(feature = "zstd"))]
            return Box::new(Compressed::new(input, path, byte, lines_before));
        }
        let session = resume_headerless(input, path, ctx, byte, lines_before, opts);
        Box::new(CodexSource(session.counting(opts)))
    }

    /// A token count's usage is the delta from the last cumulative total;
    /// records carry the current model and cwd.
    fn needs_running_context(&self) -> bool {
        true
    }

    /// A plain rollout is cut into parts, each finding its context from
    /// the lines before it; a compressed one is a stream.
    fn splits(&self, path: &Path) -> bool {
        !compressed(path)
    }

    /// The running context at `byte`: the session's provider (from the
    /// file's first `session_meta`), the model and cwd of the last
    /// `turn_context` that names them, the cumulative total of the last
    /// token count that has one, and the visible messages waiting for their
    /// twin since the last `task_started` (which empties them), found by
    /// reading back from `byte` until each is known (or the file's start,
    /// where none is); `None` when the lines within `reach` do not say them
    /// all.
    fn context_before(
        &self,
        file: &std::fs::File,
        _header: &Header,
        byte: u64,
        reach: Option<u64>,
        opts: &SourceOptions,
    ) -> std::io::Result<Option<Vec<u8>>> {
        let hash = opts.line_hash_scheme();
        let Some(mut run) = running_before(file, byte, opts.max_line_len(), hash, reach)? else {
            return Ok(None);
        };
        run.provider = provider_of(file, hash)?;
        Ok(Some(run.encode()))
    }

    /// A fork (`forked_from_id`) or a subagent (`parent_thread_id`) is of
    /// its parent's lineage.
    fn parent(&self, header: &Header) -> Option<String> {
        header
            .parent
            .as_ref()
            .and_then(Parent::session)
            .map(|p| self.lineage(p))
    }

    /// The parent's session id: a rollout is found by the id its name
    /// ends with ([`Codex::parent_lookup_name`]), so that a parent whose
    /// file sorts after its fork's is read ahead and its copies are the
    /// ones kept.
    fn parent_file_name<'h>(&self, header: &'h Header) -> Option<&'h str> {
        header.parent.as_ref().and_then(Parent::session)
    }

    /// `rollout-<YYYY-MM-DDThh-mm-ss>-<id>.jsonl` (or `.jsonl.zst`, or
    /// without the time): the id.
    fn parent_lookup_name<'n>(&self, file_name: &'n str) -> &'n str {
        let rest = file_name.strip_prefix("rollout-").unwrap_or(file_name);
        let rest = rest
            .strip_suffix(".jsonl.zst")
            .or_else(|| rest.strip_suffix(".jsonl"))
            .unwrap_or(rest);
        let b = rest.as_bytes();
        let timed = b.len() > 20
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b'T'
            && b[13] == b'-'
            && b[16] == b'-'
            && b[19] == b'-'
            && b[..19]
                .iter()
                .enumerate()
                .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16) || c.is_ascii_digit());
        if timed {
            &rest[20..]
        } else {
            rest
        }
    }

    /// A subagent that replays its parent with the timestamps rewritten
    /// into the spawn's second: its replayed lines are the parent's lines
    /// they match by content, and, where none of its counts match (its
    /// parent absent), the leading counts of one second are left to the
    /// parent, as ccusage 20.0.24 counts them (see [`replay`]). With the
    /// parent absent, the replay's records are the child's.
    fn parent_copies(
        &self,
        child: &Path,
        header: &Header,
        parent: Option<&Path>,
        opts: &SourceOptions,
    ) -> crate::format::ParentCopies {
        replay::parent_copies(child, header, parent, opts.line_hash_scheme())
    }
}

fn compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

/// Compressed rollouts (`rollout-*.jsonl.zst`, newer Codex), read as a
/// stream: the file goes through zstd's streaming decoder (bounded memory:
/// the decoder's window, which a frame may ask for up to [`zst::WINDOW_LOG_MAX`],
/// and the line reader's buffer), and the decompressed lines are read as a
/// plain rollout's. Lines' offsets are offsets in the decompressed stream;
/// the source's [`Position`] is the compressed bytes read, so that a later
/// run finds the file unchanged, or reads on from there when whole frames
/// were appended to it.
#[cfg(feature = "zstd")]
mod zst {
    use std::io::{BufRead, Read};
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use super::{context, CodexContext, CodexSource, PREFIX};
    use crate::counts::LineCounts;
    use crate::error::Error;
    use crate::format::{BoxedSource, Input};
    use crate::line::{Entry, Header};
    use crate::line_reader::ReadAt;
    use crate::record::Record;
    use crate::report::Report;
    use crate::source::{
        open_headerless, resume_headerless, Position, RecordSource, SourceOptions,
    };

    /// The largest window a frame may ask for: 2^27 bytes (128 MiB), zstd's
    /// own default limit; Codex's frames (level 3) use a few MiB.
    pub const WINDOW_LOG_MAX: u32 = 27;

    /// A reader that counts the bytes read through it.
    struct Counted<R> {
        inner: R,
        read: Arc<AtomicU64>,
    }

    impl<R: Read> Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
    }

    /// The decompressed stream of `input`, and the count of compressed
    /// bytes read.
    fn decoder<'d>(input: Input<'d>, path: &Path) -> Result<(Input<'d>, Arc<AtomicU64>), Error> {
        let read = Arc::new(AtomicU64::new(0));
        let raw: Box<dyn Read + Send + 'd> = match input {
            Input::Bytes(b) => Box::new(b),
            Input::Reader(r) => r,
        };
        let mut counted = std::io::BufReader::new(Counted {
            inner: raw,
            read: Arc::clone(&read),
        });
        // Nothing to read (a file resumed at its end): no frame either.
        if counted
            .fill_buf()
            .map_err(|e| Error::io(path, e))?
            .is_empty()
        {
            return Ok((Input::Reader(Box::new(std::io::empty())), read));
        }
        let mut d =
            zstd::stream::read::Decoder::with_buffer(counted).map_err(|e| Error::io(path, e))?;
        d.window_log_max(WINDOW_LOG_MAX)
            .map_err(|e| Error::io(path, e))?;
        Ok((Input::Reader(Box::new(super::Damaged(d))), read))
    }

    /// A compressed file is never appended to line by line: a last line
    /// without `\n` is what it holds, not a line being written. Its lines
    /// are read again by decoding the file again, from `from` compressed
    /// bytes (where the stream read starts).
    fn options(opts: &SourceOptions, from: u64) -> SourceOptions {
        let again = opts.reading_again().map(|file| {
            Arc::new(Decoded {
                file: Arc::clone(file),
                from,
            }) as Arc<dyn ReadAt>
        });
        opts.clone().hold_partial_tail(false).read_again(again)
    }

    /// The longest decompressed line held while its end is looked for: a
    /// longer one is looked at without being held, and decoded again when
    /// it is within the maximum line length (from the start of the stream:
    /// a cost paid only for lines this long).
    const HOLD: usize = 16 << 20;

    /// The decompressed stream, decoded again to read a long line.
    #[derive(Debug)]
    struct Decoded {
        /// The compressed file, by its offsets.
        file: Arc<dyn ReadAt>,
        /// Where the stream starts in it.
        from: u64,
    }

    /// The compressed bytes from an offset, as a reader.
    struct From<'a> {
        file: &'a dyn ReadAt,
        at: u64,
    }

    impl Read for From<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.file.read_at(buf, self.at)?;
            self.at += n as u64;
            Ok(n)
        }
    }

    impl ReadAt for Decoded {
        fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
            let from = From {
                file: &*self.file,
                at: self.from,
            };
            let mut d = zstd::stream::read::Decoder::new(from)?;
            d.window_log_max(WINDOW_LOG_MAX)?;
            let skipped = std::io::copy(&mut (&mut d).take(at), &mut std::io::sink())?;
            if skipped < at {
                return Ok(0);
            }
            let mut n = 0;
            while n < buf.len() {
                match d.read(&mut buf[n..])? {
                    0 => break,
                    k => n += k,
                }
            }
            Ok(n)
        }

        fn hold(&self) -> usize {
            HOLD
        }
    }

    pub(super) fn open<'d>(
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        let opts = options(opts, 0);
        let (input, read) = decoder(input, path)?;
        let session = open_headerless(input, path, &opts, PREFIX, |prefix, whole| {
            context(prefix, whole, path, opts.line_hash_scheme())
        })?;
        Ok(Box::new(Zst {
            inner: CodexSource(session.counting(&opts)),
            start: 0,
            read,
        }))
    }

    /// Reads on after `byte` compressed bytes (whole frames appended).
    pub(super) fn resume<'d>(
        input: Input<'d>,
        path: &Path,
        ctx: CodexContext,
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        let opts = options(opts, byte);
        match decoder(input, path) {
            Ok((input, read)) => {
                let session = resume_headerless(input, path, ctx, 0, lines_before, &opts);
                Box::new(Zst {
                    inner: CodexSource(session.counting(&opts)),
                    start: byte,
                    read,
                })
            }
            Err(e) => Box::new(Failed(Some(e), Report::default())),
        }
    }

    /// A Codex source over a decompressed stream.
    struct Zst<'d> {
        inner: CodexSource<'d>,
        /// Compressed bytes before the stream read.
        start: u64,
        read: Arc<AtomicU64>,
    }

    impl RecordSource for Zst<'_> {
        fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
            self.inner.next_record()
        }

        fn report(&self) -> &Report {
            self.inner.report()
        }

        fn header(&self) -> Option<&Header> {
            self.inner.header()
        }

        fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
            self.inner.next_entry()
        }

        fn next_entry_parsed(
            &mut self,
        ) -> Result<Option<(Entry<'_>, Option<crate::ParsedLine<'_>>)>, Error> {
            self.inner.next_entry_parsed()
        }

        fn position(&self) -> Position {
            Position {
                byte: self.start + self.read.load(Ordering::Relaxed),
                line: self.inner.position().line,
                open_line: false,
            }
        }

        fn running_context(&self) -> Vec<u8> {
            self.inner.running_context()
        }

        fn entry_counts(&self) -> Option<&LineCounts> {
            self.inner.entry_counts()
        }

        fn take_report(&mut self) -> Report {
            self.inner.take_report()
        }

        fn take_report_so_far(&mut self) -> Option<Report> {
            self.inner.take_report_so_far()
        }
    }

    /// A decoder that could not be made: the error, at the first read.
    struct Failed(Option<Error>, Report);

    impl RecordSource for Failed {
        fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
            self.next_entry().map(|_| None)
        }

        fn report(&self) -> &Report {
            &self.1
        }

        fn header(&self) -> Option<&Header> {
            None
        }

        fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
            match self.0.take() {
                Some(e) => Err(e),
                None => Ok(None),
            }
        }

        fn position(&self) -> Position {
            Position {
                byte: 0,
                line: 0,
                open_line: false,
            }
        }
    }
}

/// Without the `zstd` feature, a compressed rollout is not read. Its
/// bytes are consumed (so that a later run finds it unchanged) and it
/// counts as one skipped line, with the reason; no records.
#[cfg(not(feature = "zstd"))]
struct Compressed<'d> {
    input: Option<Input<'d>>,
    path: PathBuf,
    header: Header,
    report: Report,
    position: Position,
}

#[cfg(not(feature = "zstd"))]
impl<'d> Compressed<'d> {
    fn new(input: Input<'d>, path: &Path, byte: u64, lines_before: u64) -> Self {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let id = name.as_deref().unwrap_or("");
        let id = id.strip_suffix(".jsonl.zst").unwrap_or(id).to_owned();
        Compressed {
            input: Some(input),
            path: path.to_path_buf(),
            header: Header {
                fingerprint: file_fingerprint(path),
                id,
                cwd: String::new(),
                version: 0,
                timestamp: None,
                parent: None,
            },
            report: Report::default(),
            position: Position {
                byte,
                line: lines_before,
                open_line: false,
            },
        }
    }
}

#[cfg(not(feature = "zstd"))]
impl RecordSource for Compressed<'_> {
    fn next_record(&mut self) -> Result<Option<Record<'_>>, Error> {
        self.next_entry().map(|_| None)
    }

    fn report(&self) -> &Report {
        &self.report
    }

    fn header(&self) -> Option<&Header> {
        Some(&self.header)
    }

    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, Error> {
        let Some(input) = self.input.take() else {
            return Ok(None);
        };
        let n = match input {
            Input::Bytes(b) => b.len() as u64,
            Input::Reader(mut r) => {
                std::io::copy(&mut r, &mut std::io::sink()).map_err(|e| Error::io(&self.path, e))?
            }
        };
        if n > 0 {
            self.report.bytes = n;
            self.report.lines = 1;
            self.report.skip(
                self.position.line + 1,
                self.position.byte,
                SkipReason::Unsupported(
                    "a zstd-compressed Codex rollout: this mem-ingest was built without \
                     its zstd feature (decompress it with `zstd -d` beside it and the plain \
                     file is read)"
                        .into(),
                ),
            );
            self.position.byte += n;
            self.position.line += 1;
        } else {
            self.report.empty = true;
        }
        Ok(None)
    }

    fn position(&self) -> Position {
        self.position
    }
}

/// `<home>/sessions/<rel>` for a path `<home>/archived_sessions/<rel>`
/// (the last such component).
fn active_copy(path: &Path) -> Option<PathBuf> {
    let comps: Vec<_> = path.components().collect();
    let i = comps
        .iter()
        .rposition(|c| c.as_os_str() == "archived_sessions")?;
    let mut p = PathBuf::new();
    for c in &comps[..i] {
        p.push(c);
    }
    p.push("sessions");
    for c in &comps[i + 1..] {
        p.push(c);
    }
    Some(p)
}

/// A Codex source.
struct CodexSource<'d>(LineDriver<FileLines<'d>, CodexContext>);

record_source!(trait impl['d] CodexSource<'d>);

/// The file's context from its first bytes; `None` for a file that holds
/// nothing but whitespace, NULs and a BOM (`whole`: `prefix` is the file).
fn context(prefix: &[u8], whole: bool, path: &Path, hash: LineHash) -> Option<CodexContext> {
    let body = headerless_body(prefix, whole)?;
    let (header, provider, meta) = header_of(body, whole, path, hash);
    let run = Running {
        provider,
        ..Running::default()
    };
    let mut ctx = CodexContext::new(header, path, run, hash);
    ctx.meta = meta.map(|m| HeaderLine {
        byte: m.byte + bom_len(prefix) as u64,
        ..m
    });
    Some(ctx)
}

/// The line the header was read from, parsed once: the source counts it
/// without parsing it again (a `session_meta` line holds the base
/// instructions, a tenth of a generated archive's bytes).
#[derive(Debug, Clone, Copy)]
struct HeaderLine {
    /// Its absolute offset and length.
    byte: u64,
    len: usize,
    /// The hash of its bytes, to check that it is the line read.
    raw: u64,
    /// Its fingerprint when it is not the hash of its bytes (an
    /// `ordinal`, a legacy line: see [`line_fingerprint`]).
    fingerprint: Option<u64>,
    legacy: bool,
    repaired: bool,
}

/// The header from the first `session_meta` line (or legacy meta line) of
/// the first lines of `prefix` (complete lines, and the last one when
/// `whole`), with the session's provider.
fn header_of(
    prefix: &[u8],
    whole: bool,
    path: &Path,
    hash: LineHash,
) -> (Header, Option<String>, Option<HeaderLine>) {
    crate::json::with_scratch(|json, arena| header_with(json, arena, prefix, whole, path, hash))
}

fn header_with(
    json: &mut JsonParser,
    arena: &mut Bump,
    prefix: &[u8],
    whole: bool,
    path: &Path,
    hash: LineHash,
) -> (Header, Option<String>, Option<HeaderLine>) {
    let mut seen = 0;
    for (at, line) in PrefixLines::new(prefix, whole) {
        if seen == HEADER_LINES {
            break;
        }
        if is_blank(line) {
            continue;
        }
        seen += 1;
        arena.reset();
        let arena = &*arena;
        let found = json.parse(line, arena, |parsed| {
            let (nodes, repaired) = parsed.ok()?;
            let f = Fields::of(nodes);
            let meta = match (f.str("type"), f.get("payload")) {
                (Some("session_meta"), Some(p)) => Fields::of(p),
                (None, None) if f.str("id").is_some() => f,
                _ => return None,
            };
            let id = meta.str("id").filter(|s| !s.is_empty())?;
            let ts = meta.str("timestamp").or_else(|| f.str("timestamp"));
            let spawn = Fields::of(meta.get("source").unwrap_or(&[]));
            let spawn = Fields::of(spawn.get("subagent").unwrap_or(&[]));
            let spawn = Fields::of(spawn.get("thread_spawn").unwrap_or(&[]));
            let parent = spawn
                .str("parent_thread_id")
                .or_else(|| meta.str("parent_thread_id"))
                .or_else(|| meta.str("forked_from_id"))
                .filter(|p| !p.is_empty() && *p != id);
            Some((
                Header {
                    fingerprint: file_fingerprint(path),
                    id: id.to_owned(),
                    cwd: meta.str("cwd").unwrap_or("").to_owned(),
                    version: 0,
                    timestamp: ts.and_then(parse_iso_millis),
                    parent: parent.map(|p| Parent::Session(p.to_owned())),
                },
                meta.str("model_provider").map(str::to_owned),
                envelope(nodes).map(|e| HeaderLine {
                    byte: at as u64,
                    len: line.len(),
                    raw: hash.of(line),
                    fingerprint: (e.ordinal && e.timestamp.is_some())
                        .then(|| line_fingerprint(&e, nodes, line, 0, arena, hash)),
                    legacy: e.timestamp.is_none(),
                    repaired,
                }),
            ))
        });
        if let Some(h) = found {
            return h;
        }
    }
    let header = Header {
        fingerprint: file_fingerprint(path),
        id: stem(path),
        cwd: String::new(),
        version: 0,
        timestamp: None,
        parent: None,
    };
    (header, None, None)
}

/// A file's name less `.jsonl` (and `.zst`: a compressed rollout's
/// records are its plain copy's).
fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".zst").unwrap_or(&name);
    Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A header's fingerprint: the file's own (the `session_meta` line is an
/// entry of its own, with its line's fingerprint).
fn file_fingerprint(path: &Path) -> u64 {
    headerless_fingerprint(b"codex-file", path)
}

// ---------------------------------------------------------------------------
// The running context

/// Token counts as Codex writes them: input (cached included), cached
/// input, output (reasoning included), reasoning output, total.
type Tokens = [u64; 5];

/// How many visible messages wait for their twin at most.
const TWINS: usize = 8;

/// Visible messages (a user prompt, an assistant message) seen in one of
/// their two copies (`response_item` message, `event_msg`
/// `user_message`/`agent_message`) and waiting for the other: a hash of
/// side and text, its lowest bit the copy (0 response item, 1 event).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Twins {
    fps: [u64; TWINS],
    len: usize,
}

impl Twins {
    /// Whether `fp` (of one copy) is the twin of a waiting message: then
    /// that one stops waiting. Else `fp` waits (the oldest dropped when
    /// full).
    fn meet(&mut self, fp: u64) -> bool {
        let other = fp ^ 1;
        if let Some(i) = self.fps[..self.len].iter().position(|f| *f == other) {
            self.fps.copy_within(i + 1..self.len, i);
            self.len -= 1;
            return true;
        }
        if self.len == TWINS {
            self.fps.copy_within(1.., 0);
            self.len -= 1;
        }
        self.fps[self.len] = fp;
        self.len += 1;
        false
    }
}

/// What a line needs from the lines before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Running {
    /// The session's `model_provider`.
    provider: Option<String>,
    /// The last `turn_context`'s model.
    model: Option<String>,
    /// The last `turn_context`'s cwd.
    cwd: Option<String>,
    /// The last cumulative `total_token_usage`.
    total: Option<Tokens>,
    twins: Twins,
}

const CONTEXT_VERSION: u8 = 1;

impl Running {
    /// Version, three optional strings, an optional total, the twins.
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        out.push(CONTEXT_VERSION);
        for s in [&self.provider, &self.model, &self.cwd] {
            match s {
                Some(s) => {
                    out.push(1);
                    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                    out.extend_from_slice(s.as_bytes());
                }
                None => out.push(0),
            }
        }
        match &self.total {
            Some(t) => {
                out.push(1);
                for n in t {
                    out.extend_from_slice(&n.to_le_bytes());
                }
            }
            None => out.push(0),
        }
        out.push(self.twins.len as u8);
        for f in &self.twins.fps[..self.twins.len] {
            out.extend_from_slice(&f.to_le_bytes());
        }
        out
    }

    /// The context [`Running::encode`] wrote; empty or damaged: none.
    fn decode(b: &[u8]) -> Running {
        Self::try_decode(b).unwrap_or_default()
    }

    fn try_decode(b: &[u8]) -> Option<Running> {
        let mut b = b;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (h, t) = (b.get(..n)?, b.get(n..)?);
            b = t;
            Some(h)
        };
        if take(1)? != [CONTEXT_VERSION] {
            return None;
        }
        let mut strings: [Option<String>; 3] = Default::default();
        for s in &mut strings {
            if take(1)?[0] == 1 {
                let len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
                *s = Some(String::from_utf8(take(len)?.to_vec()).ok()?);
            }
        }
        let u64_of = |s: &[u8]| u64::from_le_bytes(s.try_into().expect("8 bytes"));
        let mut total = None;
        if take(1)?[0] == 1 {
            let mut t = [0u64; 5];
            for n in &mut t {
                *n = u64_of(take(8)?);
            }
            total = Some(t);
        }
        let mut twins = Twins {
            len: usize::from(take(1)?[0]).min(TWINS),
            ..Twins::default()
        };
        for f in &mut twins.fps[..twins.len] {
            *f = u64_of(take(8)?);
        }
        let [provider, model, cwd] = strings;
        Some(Running {
            provider,
            model,
            cwd,
            total,
            twins,
        })
    }
}

/// The first look back from a place in a rollout reads this much before
/// it (bytes), each next one twice as much: a turn's lines hold its
/// `task_started`, `turn_context` and token counts, a few KB apart.
const LOOK_BACK_FIRST: usize = 16 << 10;

/// What a line that may change the running context names: one of the
/// envelope types that do, or a name spelled with an escape.
const CONTEXT_NEEDLES: [&[u8]; 5] = [
    b"turn_context",
    b"token_count",
    b"task_started",
    b"message",
    b"\\u",
];

/// The running context at `byte` (the start of a line) but the provider,
/// as a read of the file from its start has it there (lines that parse,
/// lines longer than `max_line` not read): read back from `byte` until
/// the model, cwd and total are found and a `task_started` is passed (the
/// messages waiting for their twin are those after it), or the file's
/// start; `None` when the lines within `reach` do not say them all.
fn running_before(
    file: &std::fs::File,
    byte: u64,
    max_line: usize,
    hash: LineHash,
    reach: Option<u64>,
) -> std::io::Result<Option<Running>> {
    use crate::line_reader::{lines_back, Back};
    let (mut model, mut cwd, mut total) = (None, None, None);
    let mut started = false;
    // The twins' fingerprints since the last task start, the last first.
    let mut fps = Vec::new();
    let back = crate::json::with_scratch(|json, arena| {
        lines_back(
            file,
            byte,
            LOOK_BACK_FIRST,
            max_line,
            reach,
            &CONTEXT_NEEDLES,
            |line| {
                arena.reset();
                let arena = &*arena;
                json.parse(line, arena, |parsed| {
                    let Some(e) = parsed.ok().and_then(|(nodes, _)| envelope(nodes)) else {
                        return;
                    };
                    let p = e.payload;
                    match (e.ty, e.item) {
                        ("turn_context", _) => {
                            let (m, c) = turn_context_of(p);
                            if model.is_none() {
                                model = m.map(str::to_owned);
                            }
                            if cwd.is_none() {
                                cwd = c.map(str::to_owned);
                            }
                        }
                        ("event_msg", Some("token_count")) if total.is_none() => {
                            total = totals(Fields::of(p.get("info").unwrap_or(&[]))).0;
                        }
                        ("event_msg", Some("task_started")) => started = true,
                        ("event_msg", Some(item @ ("user_message" | "agent_message")))
                            if !started =>
                        {
                            let text = p.str("message").unwrap_or("");
                            fps.push(twin_fp(hash, item == "agent_message", text, true));
                        }
                        ("response_item", Some("message")) if !started => {
                            if let Some(role @ ("user" | "assistant")) = p.str("role") {
                                let text = visible_text(p.get("content"), arena);
                                fps.push(twin_fp(hash, role == "assistant", text, false));
                            }
                        }
                        _ => {}
                    }
                });
                model.is_some() && cwd.is_some() && total.is_some() && started
            },
        )
    })?;
    if back == Back::Reach {
        return Ok(None);
    }
    let mut twins = Twins::default();
    for fp in fps.iter().rev() {
        twins.meet(*fp);
    }
    Ok(Some(Running {
        provider: None,
        model,
        cwd,
        total,
        twins,
    }))
}

/// The session's provider, as the file's first bytes name it (see
/// [`context`]): looked for in its first 64 KiB, then in its [`PREFIX`].
fn provider_of(file: &std::fs::File, hash: LineHash) -> std::io::Result<Option<String>> {
    for limit in [64 << 10, PREFIX] {
        let mut prefix = vec![0u8; limit];
        let n = crate::line_reader::read_full_at(file, &mut prefix, 0)?;
        let whole = n < limit;
        let body = &prefix[bom_len(&prefix[..n])..n];
        let (_, provider, meta) = header_of(body, whole, Path::new(""), hash);
        if meta.is_some() || whole {
            return Ok(provider);
        }
    }
    Ok(None)
}

/// What the records of one file share, and the running context.
pub struct CodexContext {
    header: Header,
    /// `codex:<file stem>`.
    source: String,
    run: RefCell<Running>,
    /// The twins before the line last mapped, and its offset plus one: a
    /// record line is mapped twice when the arena is full (see
    /// `LineParser::line`), and the second time must see what the first
    /// did. Only the twins change on record lines.
    before: Cell<(u64, Twins)>,
    /// The line the header was read from, when it was read from this
    /// source's first lines.
    meta: Option<HeaderLine>,
    /// How line bytes are hashed into fingerprints (the checkpoint's).
    hash: LineHash,
    /// The offset plus one of the line [`MapLine::premapped`] hashed last
    /// without finding it in the [`memo`], and that hash: its fingerprint,
    /// when it is mapped.
    hashed: Cell<(u64, u64)>,
}

impl CodexContext {
    fn new(header: Header, path: &Path, run: Running, hash: LineHash) -> Self {
        CodexContext {
            header,
            source: format!("codex:{}", stem(path)),
            run: RefCell::new(run),
            before: Cell::new((0, Twins::default())),
            meta: None,
            hash,
            hashed: Cell::new((0, 0)),
        }
    }
}

/// What a run that builds no records (`stats`) knows of a line from its
/// bytes alone, after mapping it once: a forked or subagent rollout
/// replays its parent's lines byte for byte (two in five of a generated
/// archive's bytes), and each copy is otherwise parsed again only for the
/// engine to take its counts back out as a duplicate.
///
/// Only lines whose mapping changes no running context are kept: the
/// response items that are tool calls, their outputs and reasoning, a
/// later `session_meta` (a parent's, replayed) and `compacted` summaries
/// (messages meet their twins, events and `turn_context` update the
/// context), at least [`memo::MIN_LEN`] bytes long, with a `timestamp`
/// and no `ordinal` (their fingerprint is the hash of their bytes), read
/// without repair. Such a line's mapping, when no record is built, is its
/// entry type, whether it is a record and of which role, and that
/// fingerprint: the same bytes map the same way in any file, so a copy is
/// counted exactly as parsing it would count it, and it parses as its
/// first did (a malformed line never enters the memo).
///
/// The memo is one direct-mapped table of `2^18` words for the process
/// (2 MiB, content-addressed, so valid across runs), a line's slot chosen
/// by a few of its bytes and its length (known before its hash, so that
/// the slot is fetched while the line is hashed): each word holds 28 bits
/// of the line's hash mixed with its length and 28 bits of its hash under
/// a key drawn for the process, beside its 8-bit mapping, read and written
/// whole (a slot taken by another line is a miss: that line is parsed),
/// and a byte beside it, 7 of those bits, answers most looks without the
/// word. The keyed bits are there because the line hash is not keyed:
/// collisions with it can be crafted, and a crafted line must not be
/// counted as another (a malformed one as valid) from the table.
pub mod memo {
    use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

    use crate::json::LineHash;
    use crate::record::Role;

    /// The shortest line kept (shorter ones cost little more to parse
    /// than to look up).
    pub const MIN_LEN: usize = 1024;

    const BITS: u32 = 18;

    /// The slots, aligned to a page (see [`WRITTEN`]).
    #[repr(C, align(4096))]
    struct Table([AtomicU64; 1 << BITS]);

    static TABLE: Table = Table([const { AtomicU64::new(0) }; 1 << BITS]);

    /// A byte for each slot: the low 7 of its word's check bits, and the
    /// high bit once written; 0 while empty. A look is at the byte before
    /// the word: nearly every line looked for is in no slot (read once),
    /// and its byte (of 256 KiB, in cache) answers where its word (of
    /// 2 MiB, mostly not) was a miss to memory for each line (a twentieth
    /// of a Codex `stats`). Written after the word: a look that sees a
    /// byte and another line's word, or the reverse, misses.
    #[repr(C, align(4096))]
    struct Tags([AtomicU8; 1 << BITS]);

    static TAGS: Tags = Tags([const { AtomicU8::new(0) }; 1 << BITS]);

    /// A slot's byte in [`TAGS`], from its word's check bits.
    fn tag(check: u64) -> u8 {
        (check >> 8) as u8 & 0x7f | 0x80
    }

    /// The table's slots a page (of 4 KiB: the table is aligned to one).
    const PAGE_SLOTS: usize = 4096 / 8;

    /// A bit for each of the table's pages that has been written: a slot
    /// of a page never written is empty, and is not read. The first touch
    /// of each page is then a write: reading it first mapped the shared
    /// zero page, and the write that followed replaced it, which flushes
    /// the other threads' TLBs (2-3% of a two-job Codex `stats`, in
    /// `smp_call_function_many_cond`).
    static WRITTEN: [AtomicU64; (1 << BITS) / PAGE_SLOTS / 64] =
        [const { AtomicU64::new(0) }; (1 << BITS) / PAGE_SLOTS / 64];

    /// The word of [`WRITTEN`] of slot `i`'s page, and its bit.
    fn page_bit(i: usize) -> (&'static AtomicU64, u64) {
        let page = i / PAGE_SLOTS;
        (&WRITTEN[page / 64], 1 << (page % 64))
    }

    /// The entry types kept, by index: response items, then the envelope
    /// types (the first of the counted types, [`super::TYPES`]).
    pub const ITEMS: &[&str] = super::TYPES.split_at(12).0;

    /// A kept line's mapping: its entry type (an index of [`ITEMS`]) and
    /// its record's role (`None`: no record).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Mapped {
        /// The entry type, an index of [`ITEMS`].
        pub item: usize,
        /// The record's role; `None`: the line makes no record.
        pub role: Option<Role>,
    }

    impl Mapped {
        fn code(self) -> u64 {
            let role = match self.role {
                None => 0,
                Some(Role::Assistant) => 1,
                Some(Role::ToolResult) => 2,
                Some(Role::System) => 3,
                Some(_) => unreachable!("a kept line is an assistant's, a tool result or system"),
            };
            // Never 0: an empty slot.
            1 + ((self.item as u64) << 2 | role)
        }

        fn of(code: u64) -> Option<Mapped> {
            let c = code.checked_sub(1)?;
            let role = match c & 3 {
                0 => None,
                1 => Some(Role::Assistant),
                2 => Some(Role::ToolResult),
                _ => Some(Role::System),
            };
            let item = usize::try_from(c >> 2).ok().filter(|&i| i < ITEMS.len())?;
            Some(Mapped { item, role })
        }
    }

    /// Check bits of a word: 28 from the line's hash (beyond the slot's)
    /// mixed with its length, then 28 from its hash under this process's
    /// key ([`crate::json::keyed`]), above the 8 of its mapping.
    const CHECK: u64 = (1 << 28) - 1;

    /// The slot of a line, and its check bits from its (unkeyed) hash.
    fn slot(scheme: LineHash, hash: u64, line: &[u8]) -> (usize, u64) {
        let k = hash ^ u64::from(scheme.id()).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mixed = (k >> BITS) ^ (line.len() as u64).wrapping_mul(0xff51_afd7_ed55_8ccd) >> BITS;
        (index(line), (mixed & CHECK) << 8)
    }

    /// The slot of a line, from a few of its bytes and its length: known
    /// before its hash (a pass over all its bytes), so that the look for it
    /// can be fetched from memory while that hash is computed
    /// ([`prefetch`]). The bytes are those that differ most from line to
    /// line: after a Codex line's first 24 (`{"timestamp":"2026-01-23`),
    /// its time to the millisecond and what follows, and its last 16. Lines
    /// alike there and as long share a slot (the last one kept wins it):
    /// a miss, parsed, never another line's mapping (the check bits are
    /// from the whole line's hash).
    fn index(line: &[u8]) -> usize {
        let n = line.len();
        let word = |at: usize| {
            line.get(at..at + 8)
                .map_or(0, |w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        };
        let x = word(24)
            ^ word(32).rotate_left(16)
            ^ word(n.saturating_sub(16)).rotate_left(32)
            ^ word(n.saturating_sub(8)).rotate_left(48)
            ^ (n as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
        (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - BITS)) as usize
    }

    /// Asks for the memory of `line`'s slot to be brought into cache,
    /// without waiting for it: each line looked for is in a slot of its
    /// own, and that look was a miss to memory (a twentieth of a Codex
    /// `stats`), now taken while the line is hashed.
    pub fn prefetch(line: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let i = index(line);
            #[allow(unsafe_code)]
            // SAFETY: SSE is there on every x86-64; a prefetch reads
            // nothing and faults on no address.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(&TAGS.0[i]).cast::<i8>());
                _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(&TABLE.0[i]).cast::<i8>());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = line;
    }

    /// The check bits of a line from its keyed hash.
    fn keyed(line: &[u8]) -> u64 {
        (crate::json::keyed(line) >> 36) << 36
    }

    /// The mapping of `line` (hashed to `hash`), when kept. The keyed hash
    /// is computed only when the unkeyed check bits match: a line crafted
    /// to collide with another's fingerprint still meets 28 bits it cannot
    /// know in advance.
    pub fn get(scheme: LineHash, hash: u64, line: &[u8]) -> Option<Mapped> {
        let (i, check) = slot(scheme, hash, line);
        let (written, bit) = page_bit(i);
        // (A page of the table never written: neither is any byte of its
        // slots, nor read.)
        if written.load(Ordering::Relaxed) & bit == 0
            || TAGS.0[i].load(Ordering::Relaxed) != tag(check)
        {
            return None;
        }
        let w = TABLE.0[i].load(Ordering::Relaxed);
        if w & (CHECK << 8) != check || w >> 36 << 36 != keyed(line) {
            return None;
        }
        Mapped::of(w & 0xff)
    }

    /// Keeps a line's mapping (in the slot of its hash, in place of any).
    pub fn put(scheme: LineHash, hash: u64, line: &[u8], m: Mapped) {
        let (i, check) = slot(scheme, hash, line);
        TABLE.0[i].store(keyed(line) | check | m.code(), Ordering::Relaxed);
        TAGS.0[i].store(tag(check), Ordering::Relaxed);
        let (written, bit) = page_bit(i);
        if written.load(Ordering::Relaxed) & bit == 0 {
            written.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// The index of a kept entry type (as `map` names it: `ty`, or
    /// `ty/item` for response items; a later `session_meta`, a parent's
    /// replayed, makes no record; a `compacted` summary is a system record).
    pub fn kept(entry_type: &str) -> Option<usize> {
        ITEMS.iter().position(|t| *t == entry_type)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The counted types' table names each type as `map` counts it,
        /// is found again by its envelope and payload types, and begins
        /// with the kept types in the memo's order.
        #[test]
        fn every_counted_type_is_found_by_its_index() {
            use super::super::{type_index, SESSION_META, TYPES};
            for (i, t) in TYPES.iter().enumerate() {
                let found = match t.split_once('/') {
                    Some((ty, item)) => type_index(ty, Some(item)),
                    None => type_index(t, None),
                };
                assert_eq!(found, Some(i), "{t}");
            }
            assert_eq!(ITEMS.last(), Some(&"compacted"));
            assert_eq!(TYPES[SESSION_META], "session_meta");
            assert_eq!(type_index("response_item", Some("future_item")), None);
            assert_eq!(type_index("event_msg", None), None);
            assert_eq!(type_index("turn_context", Some("x")), None);
            assert_eq!(type_index("world_state", None), None);
        }

        /// Every mapping reads back as written; a line of another length,
        /// another hash scheme, or another hash in the same slot, is not
        /// found (the slot's last line wins).
        #[test]
        fn a_slot_answers_for_its_own_line_only() {
            let line = vec![b'a'; 4096];
            let longer = vec![b'a'; 4097];
            let mut forged = line.clone();
            forged[100] = b'b';
            let roles = [
                None,
                Some(Role::Assistant),
                Some(Role::ToolResult),
                Some(Role::System),
            ];
            for (n, item) in (0..ITEMS.len()).enumerate() {
                for role in roles {
                    let m = Mapped { item, role };
                    assert_eq!(Mapped::of(m.code()), Some(m));
                    assert!(m.code() > 0 && m.code() <= 0xff);
                }
                // A hash no other test writes (bits from the test's own
                // numbers).
                let h = 0x5eed_0000_0000_0000 | (n as u64) << 40 | 0x2_1234;
                let m = Mapped {
                    item,
                    role: Some(Role::ToolResult),
                };
                put(LineHash::Wide, h, &line, m);
                assert_eq!(get(LineHash::Wide, h, &line), Some(m));
                assert_eq!(get(LineHash::Wide, h, &longer), None);
                assert_eq!(get(LineHash::Serial, h, &line), None);
                // Other bytes under the same (unkeyed) hash and length, as
                // a crafted collision would be: the keyed check refuses
                // them (but for a chance of 2^-28).
                assert_eq!(get(LineHash::Wide, h, &forged), None);
                // Same slot (same bytes where the slot is read from, same
                // length), another line: it takes the slot.
                let mut second = line.clone();
                second[2000] = b'c';
                assert_eq!(index(&second), index(&line));
                let other = h ^ 1 << 30;
                assert_eq!(get(LineHash::Wide, other, &second), None);
                put(LineHash::Wide, other, &second, Mapped { item, role: None });
                assert_eq!(get(LineHash::Wide, h, &line), None);
                assert_eq!(
                    get(LineHash::Wide, other, &second),
                    Some(Mapped { item, role: None })
                );
            }
            assert_eq!(Mapped::of(0), None);
            assert_eq!(kept("response_item/reasoning"), Some(9));
            assert_eq!(kept("response_item/message"), None);
            assert_eq!(kept("response_item"), None);
            assert_eq!(kept("session_meta"), Some(10));
            assert_eq!(kept("compacted"), Some(11));
            assert_eq!(kept("event_msg/token_count"), None);
            assert_eq!(kept("turn_context"), None);
        }
    }
}

/// The entry types Codex writes (spec §3-§6), as `map` counts them (`ty`,
/// or `ty/item` for response items and events): the counts find one
/// again by its index here ([`EntryCounts::add_indexed`]), without
/// comparing text. The first are the [`memo`]'s kept types, in its order.
///
/// [`EntryCounts::add_indexed`]: crate::report::EntryCounts
const TYPES: [&str; 31] = [
    "response_item/function_call",
    "response_item/custom_tool_call",
    "response_item/local_shell_call",
    "response_item/web_search_call",
    "response_item/image_generation_call",
    "response_item/tool_search_call",
    "response_item/function_call_output",
    "response_item/custom_tool_call_output",
    "response_item/tool_search_output",
    "response_item/reasoning",
    "session_meta",
    "compacted",
    "response_item/message",
    "response_item/compaction",
    "response_item/ghost_snapshot",
    "event_msg/token_count",
    "event_msg/user_message",
    "event_msg/agent_message",
    "event_msg/agent_reasoning",
    "event_msg/task_started",
    "event_msg/task_complete",
    "event_msg/turn_aborted",
    "event_msg/context_compacted",
    "event_msg/collab_tool_call",
    "event_msg/thread_rolled_back",
    "event_msg/patch_apply_end",
    "event_msg/mcp_tool_call_end",
    "event_msg/web_search_end",
    "event_msg/exec_command_end",
    "event_msg/sub_agent_activity",
    "turn_context",
];

/// `session_meta`'s index in [`TYPES`].
const SESSION_META: usize = 10;

/// The index in [`TYPES`] of an envelope type and its payload's `type`;
/// `None` for any other (counted by its text).
fn type_index(ty: &str, item: Option<&str>) -> Option<usize> {
    Some(match (ty, item) {
        ("response_item", Some(item)) => match item {
            "function_call" => 0,
            "custom_tool_call" => 1,
            "local_shell_call" => 2,
            "web_search_call" => 3,
            "image_generation_call" => 4,
            "tool_search_call" => 5,
            "function_call_output" => 6,
            "custom_tool_call_output" => 7,
            "tool_search_output" => 8,
            "reasoning" => 9,
            "message" => 12,
            "compaction" => 13,
            "ghost_snapshot" => 14,
            _ => return None,
        },
        ("event_msg", Some(item)) => match item {
            "token_count" => 15,
            "user_message" => 16,
            "agent_message" => 17,
            "agent_reasoning" => 18,
            "task_started" => 19,
            "task_complete" => 20,
            "turn_aborted" => 21,
            "context_compacted" => 22,
            "collab_tool_call" => 23,
            "thread_rolled_back" => 24,
            "patch_apply_end" => 25,
            "mcp_tool_call_end" => 26,
            "web_search_end" => 27,
            "exec_command_end" => 28,
            "sub_agent_activity" => 29,
            _ => return None,
        },
        ("session_meta", None) => 10,
        ("compacted", None) => 11,
        ("turn_context", None) => 30,
        _ => return None,
    })
}

// ---------------------------------------------------------------------------
// Mapping

/// What a line becomes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A human prompt.
    Prompt,
    /// Harness context sent as a user message (`<environment_context>`,
    /// instructions): `system`, its tag as `custom_type`.
    Harness(&'static str),
    /// Model output: a message, a reasoning summary, a tool call.
    Assistant,
    /// A tool call's output.
    ToolResult,
    /// A developer or system message, a compaction summary.
    System,
}

impl Shape {
    fn role(self) -> Role {
        match self {
            Shape::Prompt => Role::User,
            Shape::Assistant => Role::Assistant,
            Shape::ToolResult => Role::ToolResult,
            Shape::Harness(_) | Shape::System => Role::System,
        }
    }
}

/// The harness context Codex sends as user messages, by the tag its text
/// starts with (after whitespace), and the `custom_type` it gets.
const HARNESS: [(&str, &str); 9] = [
    ("<environment_context>", "environment_context"),
    ("<user_instructions>", "user_instructions"),
    ("# AGENTS.md instructions", "user_instructions"),
    ("<INSTRUCTIONS>", "user_instructions"),
    ("<permissions instructions>", "permissions"),
    ("<developer_instructions>", "developer_instructions"),
    ("<collaboration_mode>", "collaboration_mode"),
    ("<user_shell_command>", "user_shell_command"),
    ("<turn_aborted>", "turn_aborted"),
];

fn harness(text: &str) -> Option<&'static str> {
    let t = text.trim_start();
    HARNESS
        .iter()
        .find(|(tag, _)| t.starts_with(tag))
        .map(|(_, name)| *name)
}

/// The fields of an envelope.
struct Envelope<'t, 'a> {
    ty: &'a str,
    timestamp: Option<&'a str>,
    payload: Fields<'t, 'a>,
    /// The payload's `type`.
    item: Option<&'a str>,
    /// The line has an `ordinal` (newest Codex): a per-file number, left
    /// out of the fingerprint.
    ordinal: bool,
}

/// A line's envelope: current (`{timestamp, type, payload}`), or legacy (a
/// bare response item with a `type`, or the bare meta line with an `id`).
fn envelope<'t, 'a>(nodes: &'t [Node<'a>]) -> Option<Envelope<'t, 'a>> {
    let (mut ty, mut timestamp, mut payload, mut ordinal, mut id) =
        (None, None, None, false, false);
    for (k, v) in Fields::of(nodes).iter() {
        match k {
            "type" => ty = as_str(v),
            "timestamp" => timestamp = as_str(v),
            "payload" => payload = Some(v),
            "ordinal" => ordinal = true,
            "id" => id = as_str(v).is_some(),
            _ => {}
        }
    }
    let (ty, payload) = match (ty, payload) {
        (Some(ty), Some(p)) => (ty, Fields::of(p)),
        // Legacy: a bare response item, or the bare meta line.
        (Some(_), None) => ("response_item", Fields::of(nodes)),
        (None, None) if id => ("session_meta", Fields::of(nodes)),
        _ => return None,
    };
    let item = match ty {
        "response_item" | "event_msg" => payload.str("type"),
        _ => None,
    };
    Some(Envelope {
        ty,
        timestamp,
        payload,
        item,
        ordinal,
    })
}

/// Codex's token counts of a usage object.
fn tokens(v: Option<&[Node<'_>]>) -> Option<Tokens> {
    let v = v?;
    if !matches!(v.first(), Some(Node::Object { .. })) {
        return None;
    }
    // One pass over the fields, as `Fields::get` finds each; not a
    // number: 0.
    let found = Fields::of(v).first_of::<5>(|k| match k {
        "input_tokens" => Some(0),
        "cached_input_tokens" => Some(1),
        "output_tokens" => Some(2),
        "reasoning_output_tokens" => Some(3),
        "total_tokens" => Some(4),
        _ => None,
    });
    Some(found.map(|v| v.and_then(as_u64).unwrap_or(0)))
}

/// The usage of one response in our fields: `input` the non-cached input
/// (input − cached), `cache_read` the cached input (at most the input),
/// `output` the output (reasoning included), `total_tokens` the total as
/// written (input + output when absent).
fn usage_of(d: Tokens) -> Usage {
    let [input, cached, output, _reasoning, total] = d;
    let cached = cached.min(input);
    Usage {
        input: input - cached,
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: if total > 0 {
            total
        } else {
            input.saturating_add(output)
        },
        cost: 0.0,
    }
}

/// The usage a `token_count` event adds, updating the last cumulative
/// total: none when its total equals the last one (a repeated count) or
/// when it has no usage; else `last_token_usage`, else the delta of the
/// cumulative totals (field by field, at least 0); all zero: none.
fn token_delta(info: Fields<'_, '_>, last_total: &mut Option<Tokens>) -> Option<Tokens> {
    let (total, last) = totals(info);
    let prev = *last_total;
    if total.is_some() {
        *last_total = total;
    }
    let d = match (total, last) {
        (Some(t), _) if prev == Some(t) => return None,
        (_, Some(l)) => l,
        (Some(t), None) => {
            let p = prev.unwrap_or_default();
            std::array::from_fn(|i| t[i].saturating_sub(p[i]))
        }
        (None, None) => return None,
    };
    (d != [0; 5]).then_some(d)
}

/// A token count's cumulative `total_token_usage` and its
/// `last_token_usage` (of its `info`).
fn totals(info: Fields<'_, '_>) -> (Option<Tokens>, Option<Tokens>) {
    let [total, last] = info.first_of::<2>(|k| match k {
        "total_token_usage" => Some(0),
        "last_token_usage" => Some(1),
        _ => None,
    });
    (tokens(total), tokens(last))
}

/// A `turn_context`'s model (its own, else its collaboration mode's) and
/// cwd.
fn turn_context_of<'a>(p: Fields<'_, 'a>) -> (Option<&'a str>, Option<&'a str>) {
    let settings = Fields::of(p.get("collaboration_mode").unwrap_or(&[]));
    let settings = Fields::of(settings.get("settings").unwrap_or(&[]));
    (
        p.str("model").or_else(|| settings.str("model")),
        p.str("cwd"),
    )
}

/// The model a token count names itself (`model`, `model_name`,
/// `metadata.model`, on the payload or its `info`).
fn named_model<'a>(payload: Fields<'_, 'a>, info: Fields<'_, 'a>) -> Option<&'a str> {
    [payload, info].into_iter().find_map(|f| {
        // One pass over the fields, as `Fields::get` finds each.
        let [model, model_name, metadata] = f.first_of::<3>(|k| match k {
            "model" => Some(0),
            "model_name" => Some(1),
            "metadata" => Some(2),
            _ => None,
        });
        model
            .and_then(as_str)
            .or_else(|| model_name.and_then(as_str))
            .or_else(|| Fields::of(metadata.unwrap_or(&[])).str("model"))
    })
}

/// The texts of a message's `input_text`/`output_text` blocks (or a string
/// content), joined with `\n`, for matching twins.
fn visible_text<'a>(content: Option<&[Node<'a>]>, arena: &'a Bump) -> &'a str {
    let Some(v) = content else { return "" };
    if let Some(s) = as_str(v) {
        return s;
    }
    let mut text = Text::new(arena);
    for b in elements(v) {
        let f = Fields::of(b);
        if matches!(f.str("type"), Some("input_text" | "output_text" | "text")) {
            text.push(f.str("text").unwrap_or(""));
        }
    }
    text.finish().0
}

/// A message's text and side, the lowest bit saying whether the line is
/// the event (`event_msg`) or the item; with [`LineHash::Wide`] or
/// [`LineHash::Xxh3`] the text is hashed by it and folded with the side.
fn twin_fp(hash: LineHash, assistant: bool, text: &str, event: bool) -> u64 {
    let side: &[u8] = if assistant { b"assistant" } else { b"user" };
    let fp = match hash {
        LineHash::Serial => fingerprint(&[b"codex-twin", side, text.as_bytes()]),
        LineHash::Wide | LineHash::Xxh3 => {
            let t = hash.of(text.as_bytes()).to_le_bytes();
            fingerprint(&[b"codex-twin", side, &t])
        }
    };
    (fp & !1) | u64::from(event)
}

/// A line's fingerprint: its bytes (hashed by `hash`); with an `ordinal`
/// (a per-file number), its fields less that one; a legacy line (no
/// timestamp), its bytes and line number (two equal lines are two).
fn line_fingerprint(
    e: &Envelope<'_, '_>,
    nodes: &[Node<'_>],
    raw: &[u8],
    line: u64,
    arena: &Bump,
    hash: LineHash,
) -> u64 {
    match (e.timestamp, e.ordinal) {
        (Some(_), false) => hash.of(raw),
        (Some(ts), true) => {
            let mut s = bumpalo::collections::String::new_in(arena);
            for (k, v) in Fields::of(nodes).iter().filter(|(k, _)| *k != "ordinal") {
                s.push_str(k);
                s.push('\0');
                write_json(v, &mut s);
                s.push('\0');
            }
            fingerprint(&[ts.as_bytes(), s.as_bytes()])
        }
        (None, _) => fingerprint(&[raw, &line.to_le_bytes()]),
    }
}

impl CodexContext {
    /// A line found in the [`memo`] (only when no record is built), counted
    /// as [`MapLine::map`] counted its first copy.
    fn remembered<'a>(
        &'a self,
        raw: &[u8],
        pos: LinePos,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Option<Entry<'a>> {
        if !filter.builds_none() || raw.len() < memo::MIN_LEN {
            return None;
        }
        memo::prefetch(raw);
        let hash = self.hash.of(raw);
        let Some(m) = memo::get(self.hash, hash, raw) else {
            self.hashed.set((pos.byte + 1, hash));
            return None;
        };
        report.entries.add_indexed(m.item, memo::ITEMS[m.item], 1);
        match m.role {
            Some(role) => {
                report.count_record(role, filter);
            }
            None => report.no_record += 1,
        }
        Some(Entry {
            fingerprint: hash,
            line: pos.line,
            byte: pos.byte,
            record: None,
            revision: false,
            parent_session: None,
        })
    }
}

impl MapLine for CodexContext {
    fn header(&self) -> &Header {
        &self.header
    }

    /// The running state ([`Running::encode`]): a later read from here
    /// starts from it.
    fn running_context(&self) -> Vec<u8> {
        self.run.borrow().encode()
    }

    /// Its `session_meta` line was found among the prefix's lines.
    fn header_found(&self) -> bool {
        self.meta.is_some()
    }

    /// The header's own line: a `session_meta` entry that makes no record
    /// and changes no running context, counted as [`MapLine::map`] counts
    /// it; any other line, when no record is built, from the [`memo`].
    fn premapped<'a>(
        &'a self,
        raw: &[u8],
        pos: LinePos,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Option<Entry<'a>> {
        let Some(m) = self
            .meta
            .as_ref()
            .filter(|m| pos.byte == m.byte && raw.len() == m.len)
        else {
            return self.remembered(raw, pos, filter, report);
        };
        let hash = self.hash.of(raw);
        if hash != m.raw {
            return None;
        }
        report.repaired += u64::from(m.repaired);
        report
            .entries
            .add_indexed(SESSION_META, TYPES[SESSION_META], 1);
        report.no_record += 1;
        let fingerprint = match (m.fingerprint, m.legacy) {
            (Some(fp), _) => fp,
            (None, true) => fingerprint(&[raw, &pos.line.to_le_bytes()]),
            (None, false) => hash,
        };
        Some(Entry {
            fingerprint,
            line: pos.line,
            byte: pos.byte,
            record: None,
            revision: false,
            parent_session: None,
        })
    }

    fn map<'a>(
        &'a self,
        nodes: &[Node<'a>],
        raw: &[u8],
        pos: LinePos,
        repaired: bool,
        arena: &'a Bump,
        filter: RoleFilter,
        report: &mut Report,
    ) -> Option<Entry<'a>> {
        let Some(e) = envelope(nodes) else {
            report.repaired -= u64::from(repaired);
            report.skip(pos.line, pos.byte, SkipReason::NotAnEntry);
            return None;
        };
        let mut run = self.run.borrow_mut();
        // A line mapped a second time sees the twins the first time saw.
        let (at, twins) = self.before.get();
        if at == pos.byte + 1 {
            run.twins = twins;
        } else {
            self.before.set((pos.byte + 1, run.twins));
        }
        let entry_type: &'a str = match type_index(e.ty, e.item) {
            Some(i) => {
                report.entries.add_indexed(i, TYPES[i], 1);
                TYPES[i]
            }
            None => {
                let t = match e.item {
                    Some(item) => {
                        let mut s = bumpalo::collections::String::with_capacity_in(
                            e.ty.len() + 1 + item.len(),
                            arena,
                        );
                        s.push_str(e.ty);
                        s.push('/');
                        s.push_str(item);
                        s.into_bump_str()
                    }
                    None => e.ty,
                };
                report.entries.add(t, 1);
                t
            }
        };
        let (at, hashed) = self.hashed.get();
        let by_bytes = e.timestamp.is_some() && !e.ordinal;
        let fp = if by_bytes && at == pos.byte + 1 {
            hashed
        } else {
            line_fingerprint(&e, nodes, raw, pos.line, arena, self.hash)
        };
        let entry = |record| {
            Some(Entry {
                fingerprint: fp,
                line: pos.line,
                byte: pos.byte,
                record,
                revision: false,
                parent_session: None,
            })
        };
        let p = e.payload;
        let mut twin = None;
        let shape = match (e.ty, e.item) {
            ("turn_context", _) => {
                let (model, cwd) = turn_context_of(p);
                if let Some(m) = model {
                    if run.model.as_deref() != Some(m) {
                        run.model = Some(m.to_owned());
                    }
                }
                if let Some(c) = cwd {
                    if run.cwd.as_deref() != Some(c) {
                        run.cwd = Some(c.to_owned());
                    }
                }
                None
            }
            ("compacted", _) => Some(Shape::System),
            ("event_msg", Some("token_count")) => {
                let info = Fields::of(p.get("info").unwrap_or(&[]));
                if let Some(d) = token_delta(info, &mut run.total) {
                    let model = named_model(p, info).or(run.model.as_deref());
                    let provider = run.provider.as_deref().unwrap_or(DEFAULT_PROVIDER);
                    let at = crate::report::UsageAt {
                        seq: 0,
                        line: pos.line,
                        time: e.timestamp.and_then(crate::time::parse_iso_millis),
                        reasoning: d[3],
                    };
                    report.add_usage_at(Some(provider), model, &usage_of(d), true, at);
                }
                None
            }
            ("event_msg", Some("task_started")) => {
                run.twins = Twins::default();
                None
            }
            ("event_msg", Some(item @ ("user_message" | "agent_message"))) => {
                let text = p.str("message").unwrap_or("");
                let assistant = item == "agent_message";
                if run.twins.meet(twin_fp(self.hash, assistant, text, true)) {
                    None
                } else {
                    twin = Some(text);
                    Some(match (assistant, harness(text)) {
                        (true, _) => Shape::Assistant,
                        (false, Some(tag)) => Shape::Harness(tag),
                        (false, None) => Shape::Prompt,
                    })
                }
            }
            ("response_item", Some("message")) => match p.str("role") {
                Some(role @ ("user" | "assistant")) => {
                    let text = visible_text(p.get("content"), arena);
                    let assistant = role == "assistant";
                    if run.twins.meet(twin_fp(self.hash, assistant, text, false)) {
                        None
                    } else {
                        Some(match (assistant, harness(text)) {
                            (true, _) => Shape::Assistant,
                            (false, Some(tag)) => Shape::Harness(tag),
                            (false, None) => Shape::Prompt,
                        })
                    }
                }
                Some("developer" | "system") => Some(Shape::System),
                other => {
                    report.add_unknown_role(other.unwrap_or("(none)"));
                    None
                }
            },
            ("response_item", Some("reasoning")) => {
                let readable = |k| {
                    elements(p.get(k).unwrap_or(&[]))
                        .any(|b| Fields::of(b).str("text").is_some_and(|t| !t.is_empty()))
                };
                (readable("summary") || readable("content")).then_some(Shape::Assistant)
            }
            (
                "response_item",
                Some(
                    "function_call"
                    | "custom_tool_call"
                    | "local_shell_call"
                    | "web_search_call"
                    | "image_generation_call"
                    | "tool_search_call",
                ),
            ) => Some(Shape::Assistant),
            (
                "response_item",
                Some("function_call_output" | "custom_tool_call_output" | "tool_search_output"),
            ) => Some(Shape::ToolResult),
            _ => None,
        };
        if by_bytes && !repaired && filter.builds_none() && raw.len() >= memo::MIN_LEN {
            if let Some(item) = memo::kept(entry_type) {
                let role = shape.map(Shape::role);
                memo::put(self.hash, fp, raw, memo::Mapped { item, role });
            }
        }
        let Some(shape) = shape else {
            report.no_record += 1;
            return entry(None);
        };
        let role = shape.role();
        if !report.count_record(role, filter) {
            return entry(None);
        }
        let mut text = Text::new(arena);
        let (mut tool_name, mut tool_call_id, mut is_error) = (None, None, None);
        match (e.ty, e.item) {
            ("compacted", _) => {
                text.kind("text");
                text.push(p.str("message").unwrap_or(""));
            }
            ("event_msg", _) => {
                text.kind("text");
                text.push(twin.unwrap_or(""));
            }
            (_, Some("message")) => content(&mut text, p.get("content")),
            (_, Some("reasoning")) => {
                text.kind("thinking");
                for k in ["summary", "content"] {
                    for b in elements(p.get(k).unwrap_or(&[])) {
                        if let Some(t) = Fields::of(b).str("text").filter(|t| !t.is_empty()) {
                            text.push(t);
                        }
                    }
                }
            }
            (_, Some(item @ ("function_call" | "custom_tool_call"))) => {
                text.kind("toolCall");
                let name = p.str("name").unwrap_or("");
                let key = if item == "function_call" {
                    "arguments"
                } else {
                    "input"
                };
                let mut s = bumpalo::collections::String::new_in(arena);
                s.push_str(name);
                s.push(' ');
                match p.get(key) {
                    Some(v) => match as_str(v) {
                        Some(a) => s.push_str(a),
                        None => write_json(v, &mut s),
                    },
                    None => s.push_str("{}"),
                }
                text.push(s.into_bump_str());
                tool_name = Some(name);
                tool_call_id = p.str("call_id");
            }
            (_, Some(item)) if role == Role::Assistant => {
                // Built-in tool calls: `<type> <action JSON>`.
                text.kind("toolCall");
                let mut s = bumpalo::collections::String::new_in(arena);
                s.push_str(item);
                s.push(' ');
                match p.get("action") {
                    Some(a) => write_json(a, &mut s),
                    None => s.push_str("{}"),
                }
                text.push(s.into_bump_str());
                tool_call_id = p.str("call_id");
            }
            (_, _) => {
                tool_call_id = p.str("call_id");
                output(&mut text, p.get("output"), &mut is_error);
            }
        }
        let (text, kinds) = text.finish();
        let key = bumpalo::format!(in arena, "{}:L{}", self.header.id, pos.line);
        let project: &'a str = match &run.cwd {
            Some(c) => arena.alloc_str(c),
            None => &self.header.cwd,
        };
        let assistant = role == Role::Assistant;
        let model: Option<&'a str> = match (&run.model, assistant) {
            (Some(m), true) => Some(arena.alloc_str(m)),
            _ => None,
        };
        let provider: Option<&'a str> = assistant.then(|| -> &'a str {
            match &run.provider {
                Some(p) => arena.alloc_str(p),
                None => DEFAULT_PROVIDER,
            }
        });
        entry(Some(Record {
            role,
            text,
            project,
            session: &self.header.id,
            key: key.into_bump_str(),
            source: &self.source,
            id: None,
            parent_id: None,
            line: pos.line,
            byte: pos.byte,
            entry: entry_type,
            message_role: if e.item == Some("message") {
                p.str("role")
            } else {
                None
            },
            kinds,
            timestamp: e.timestamp.and_then(parse_iso_millis),
            provider,
            model,
            usage: None,
            stop_reason: None,
            tool_name,
            tool_call_id,
            is_error,
            custom_type: match shape {
                Shape::Harness(tag) => Some(tag),
                _ => None,
            },
            command: None,
            exit_code: None,
            repaired,
            agent_id: None,
            message_id: None,
            request_id: None,
            provisional: false,
        }))
    }
}

/// A message's content: a string as is; `input_text`/`output_text`
/// blocks as text (kind `text`), `input_image` as its placeholder (kind
/// `image`), other blocks by their kind only.
fn content<'a>(text: &mut Text<'a>, content: Option<&[Node<'a>]>) {
    let Some(v) = content else { return };
    if let Some(s) = as_str(v) {
        text.kind("text");
        text.push(s);
        return;
    }
    for b in elements(v) {
        let f = Fields::of(b);
        match f.str("type") {
            Some("input_text" | "output_text" | "text") => {
                text.kind("text");
                text.push(f.str("text").unwrap_or(""));
            }
            Some("input_image") => {
                text.kind("image");
                let url = f.str("image_url").unwrap_or("");
                let (mime, data) = match url.strip_prefix("data:") {
                    Some(rest) => match rest.split_once(";base64,") {
                        Some((m, d)) => (Some(m), Some(d)),
                        None => (None, None),
                    },
                    None => (None, None),
                };
                text.image(mime, data);
            }
            Some(other) => text.kind(other),
            None => {}
        }
    }
}

/// A tool call's `output`: a string as is; an array of content items as a
/// message's content; an object `{content, success}` (older files) as its
/// content, `success: false` an error.
fn output<'a>(text: &mut Text<'a>, v: Option<&[Node<'a>]>, is_error: &mut Option<bool>) {
    let Some(v) = v else { return };
    match v.first() {
        Some(Node::Object { .. }) => {
            let f = Fields::of(v);
            if let Some(ok) = f.get("success").and_then(as_bool) {
                *is_error = Some(!ok);
            }
            content(text, f.get("content"));
        }
        Some(Node::Static(StaticNode::Null)) | None => {}
        _ => content(text, Some(v)),
    }
}

/// A zstd stream whose decoding errors say that the file is a damaged
/// zstd file and what to do, not the decoder's bare words ("Unknown frame
/// descriptor", "incomplete frame"). Errors of the file itself (the
/// system's) pass as they are.
#[cfg(feature = "zstd")]
struct Damaged<R>(R);

#[cfg(feature = "zstd")]
impl<R: std::io::Read> std::io::Read for Damaged<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            use std::io::ErrorKind::{Other, UnexpectedEof};
            if e.raw_os_error().is_none() && matches!(e.kind(), Other | UnexpectedEof) {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "a zstd file that is damaged ({e}): restore it, or decompress what \
                         is left of it (`zstd -d`) and read that"
                    ),
                )
            } else {
                e
            }
        })
    }
}
