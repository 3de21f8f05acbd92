//! The format seam: what the engine needs to know of one agent's session
//! files, behind one trait. The engine names no format; [`Pi`] is the pi
//! agent's.
//!
//! A format says which files are its session files, where its archive lives
//! by default, and opens a [`RecordSource`] over a file from its start or
//! over a part of it whose identity (the [`Header`]) is known. Formats that
//! do not resemble pi fit too:
//! - a file without a header line: the source builds its [`Header`] from
//!   its first lines or its path;
//! - a per-file running context that a later line needs from an earlier one
//!   (the current model, a cumulative token total): the source hands it out
//!   with [`RecordSource::running_context`], the engine saves it with the
//!   file's checkpoint and gives it back to [`Format::resume`]; a part of
//!   a large file finds it from the lines before it
//!   ([`Format::context_before`]: Claude Code's cwd in force, Codex's
//!   model, token total and messages waiting for their twin), so that
//!   parts are read in parallel; a format that cannot says
//!   [`Format::needs_running_context`], and its files are read in one
//!   task;
//! - lineage ids are namespaced by format ([`Format::lineage`]), so sessions
//!   of two agents never meet in deduplication.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::line::Header;
pub use crate::source::Input;
use crate::source::{RecordSource, SourceOptions};

/// The most bytes of a file's start that [`Format::detect`] is shown.
pub const DETECT_BYTES: usize = 64 << 10;

/// The index of the format of a file named as a PATH: the first of
/// `formats` that detects it from its first bytes, else the first that
/// claims its name, else the first (so that a file no format claims is
/// read by the first, pi, and fails as it always did). With one format,
/// the file is not opened.
pub fn detect_format(formats: &[std::sync::Arc<dyn Format>], path: &Path) -> usize {
    if formats.len() > 1 {
        if let Ok(mut f) = std::fs::File::open(path) {
            let (prefix, whole) = detect_prefix(&mut f);
            return detect_in(formats, &prefix, whole, path);
        }
    }
    by_name(formats, path)
}

/// The first bytes of `r` that detection is shown (at most
/// [`DETECT_BYTES`]: a small read first, most files have a short first
/// line), and whether they are all of it. A stream's bytes are read once:
/// the caller keeps them for the source.
pub fn detect_prefix(r: &mut impl Read) -> (Vec<u8>, bool) {
    let mut prefix = Vec::new();
    let mut f = r.take(DETECT_BYTES as u64);
    for want in [4096, DETECT_BYTES] {
        let mut chunk = (&mut f).take((want - prefix.len()) as u64);
        match chunk.read_to_end(&mut prefix) {
            Ok(_) if prefix.len() < want => return (prefix, true),
            Ok(_) if memchr::memchr(b'\n', &prefix).is_some() => break,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    (prefix, false)
}

/// [`detect_format`] from a file's first bytes (`whole`: they are all of
/// it).
pub fn detect_in(
    formats: &[std::sync::Arc<dyn Format>],
    prefix: &[u8],
    whole: bool,
    path: &Path,
) -> usize {
    match formats.iter().position(|x| x.detect(prefix, whole)) {
        Some(i) => i,
        None => formats
            .iter()
            .position(|x| x.detect_file(path, prefix))
            .unwrap_or_else(|| by_name(formats, path)),
    }
}

/// The first format that claims `path` by its name, else the first.
fn by_name(formats: &[std::sync::Arc<dyn Format>], path: &Path) -> usize {
    formats
        .iter()
        .position(|f| f.is_session_file(path))
        .unwrap_or(0)
}

/// A source the engine drives, boxed: one virtual call per entry.
pub type BoxedSource<'d> = Box<dyn RecordSource + Send + 'd>;

/// Where a source starts: a file's start (it reads the file's identity), or
/// a known place after it.
pub struct At<'h> {
    /// The file's identity, when read before: the source resumes.
    pub header: Option<&'h Header>,
    /// The running context there.
    pub context: &'h [u8],
    /// Absolute offset of `input`'s first byte.
    pub byte: u64,
    /// Lines before it.
    pub lines_before: u64,
}

/// The one place a source is opened, from a file's start or resumed.
///
/// # Errors
/// From the start: the file has no identity the format accepts, or
/// reading failed (the cause, without the path).
pub fn open_at<'d>(
    format: &dyn Format,
    input: Input<'d>,
    path: &Path,
    at: At<'_>,
    opts: &SourceOptions,
) -> Result<BoxedSource<'d>, String> {
    match at.header {
        None => format.open(input, path, opts).map_err(|e| e.cause()),
        Some(h) => Ok(format.resume(input, path, h, at.context, at.byte, at.lines_before, opts)),
    }
}

/// A session format.
pub trait Format: Send + Sync {
    /// Its short name: `pi`. Names sources (`pi:<file stem>`) and lineage
    /// namespaces.
    fn name(&self) -> &'static str;

    /// Whether the sources this format opens honour the crate-private
    /// raw-text read of [`SourceOptions`] (a pi source then builds each
    /// record's text escaped and hands every entry's line with it, which
    /// the crate's NDJSON encoder alone knows to copy; the crate's other
    /// formats ignore it). The engine asks for that read only when every
    /// format of a run is one of the crate's: a format written outside it,
    /// even one that wraps [`Pi`], gets decoded text. Not for other
    /// formats: its argument cannot be named outside the crate.
    #[doc(hidden)]
    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        false
    }

    /// Whether the agent records the cost of its usage itself (pi: every
    /// usage has one, 0 a known zero). Default: no (Claude Code records a
    /// `costUSD` on some older lines only, Codex never): a sum of its
    /// usage with no cost in it is unknown, not 0 (the stats JSON's
    /// `null`).
    fn records_cost(&self) -> bool {
        false
    }

    /// The provider of the usage this format's sources hand over as
    /// responses ([`crate::Report::responses`]) rather than in their
    /// reports' sums: usage the engine counts once per response across the
    /// whole archive, as the agent's own tools do (Claude Code streams one
    /// response over several lines and files: `anthropic`). Default: `None`,
    /// the sources hand over no responses.
    fn responses_provider(&self) -> Option<&'static str> {
        None
    }

    /// Whether a run over this format's files alone writes its stats
    /// without a `by_source` table: pi's, whose stats JSON was pinned before
    /// other formats were read. Every other format's stats name it.
    #[doc(hidden)]
    fn stats_before_sources(&self) -> bool {
        false
    }

    /// Whether a file met in a folder is one of this format's session files
    /// (by its name: folders are walked without opening files).
    fn is_session_file(&self, path: &Path) -> bool;

    /// The archive the agent itself uses, when no PATH is given.
    ///
    /// # Errors
    /// None exists: a message naming every place tried.
    fn default_archive(&self) -> Result<PathBuf, String>;

    /// Every archive the agent itself uses that exists (default: the one of
    /// [`Format::default_archive`]).
    ///
    /// # Errors
    /// None exists: a message naming every place tried.
    fn default_archives(&self) -> Result<Vec<PathBuf>, String> {
        self.default_archive().map(|p| vec![p])
    }

    /// Whether a file named as a PATH is this format's, from its first
    /// bytes (at most [`DETECT_BYTES`]; `whole`: they are the whole file).
    /// Default false: the file is then the first enabled format's.
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        let _ = (prefix, whole);
        false
    }

    /// Whether a file named as a PATH, whose first bytes no format's
    /// [`Format::detect`] claims, is this format's from the file at
    /// `path` itself, where its first bytes cannot tell (a database: its
    /// tables, read read-only). Asked before the formats' names decide
    /// ([`Format::is_session_file`]). Default false.
    fn detect_file(&self, path: &Path, prefix: &[u8]) -> bool {
        let _ = (path, prefix);
        false
    }

    /// A source over a whole file, from its start (it reads the file's
    /// identity: a header line, or its first lines).
    ///
    /// # Errors
    /// The file has no identity this format accepts (pi: no session
    /// header), or reading failed.
    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error>;

    /// A source over a part of a file whose identity is known: `input`
    /// starts at absolute offset `byte`, at the start of a line, after
    /// `lines_before` lines; `context` is what [`RecordSource::running_context`]
    /// said at that place (empty for formats that need none).
    #[allow(clippy::too_many_arguments)]
    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d>;

    /// Whether a part of a file needs the running context of the lines
    /// before it (default false: parts of a large file are read in
    /// parallel, each finding what it needs with
    /// [`Format::context_before`]).
    fn needs_running_context(&self) -> bool {
        false
    }

    /// Whether a large region of the file at `path` is cut into parts read
    /// in parallel, each finding the running context where it starts with
    /// [`Format::context_before`] (default: unless the format
    /// [`Format::needs_running_context`]; a compressed file is a stream,
    /// never cut).
    fn splits(&self, path: &Path) -> bool {
        let _ = path;
        !self.needs_running_context()
    }

    /// The running context at `byte` of `file` (the start of a line after
    /// the file's identity `header`), for a read that starts there with
    /// none saved: a part of a large file (read in parallel with the parts
    /// before it), or a file resumed from a checkpoint that saved none.
    /// Found from the lines before `byte`; it is what
    /// [`RecordSource::running_context`] would say there after a read from
    /// the start. `None` when it is not found within `reach` bytes before
    /// `byte` (`None`: no limit, always found): the engine then waits for
    /// the part before to say it. Default: empty (pi has none).
    ///
    /// # Errors
    /// Reading the file failed.
    fn context_before(
        &self,
        file: &std::fs::File,
        header: &Header,
        byte: u64,
        reach: Option<u64>,
        opts: &SourceOptions,
    ) -> std::io::Result<Option<Vec<u8>>> {
        let _ = (file, header, byte, reach, opts);
        Ok(Some(Vec::new()))
    }

    /// Whether the [`Header`] is a line of the file counted as an entry
    /// (pi's session line), so that the header of a second file of the
    /// same session is deduplicated as a copy (default false: formats
    /// without a header line build it from their first lines).
    fn header_is_entry(&self) -> bool {
        false
    }

    /// Whether the usage counted of a file whose running context at the
    /// end of what was read is `context` is partial: the agent had not
    /// written the usage of all it did (Copilot CLI: output counted from
    /// messages whose segment has no `session.shutdown`, after a crash or
    /// while the session runs). `stats` counts such files. Default: never.
    fn partial_usage(&self, context: &[u8]) -> bool {
        let _ = context;
        false
    }

    /// Whether a file whose saved running context is `context` holds
    /// records back that a later read may hand out though the file did not
    /// change (Gemini CLI: the message written last, held until the file is
    /// still): the engine then reads such a file again from where it
    /// stopped rather than skipping it as unchanged. Default: never.
    fn holds_back(&self, context: &[u8]) -> bool {
        let _ = context;
        false
    }

    /// A saved running context that holds record text, as an earlier
    /// release wrote it (Gemini CLI's held message as its JSON), rewritten
    /// without it, meaning the same to a later read; `None` when it holds
    /// none (the default). `redact --db` rewrites such contexts in a
    /// store's checkpoint: a context is never redacted, so it must hold no
    /// text.
    fn context_without_text(&self, context: &[u8]) -> Option<Vec<u8>> {
        let _ = context;
        None
    }

    /// Whether this format's file at `path` is a JSON document rewritten
    /// whole in place (Amp threads, Cline tasks, Gemini CLI's legacy
    /// `.json` sessions beside its `.jsonl` ones; see
    /// [`crate::document`]): a changed one (its identity, size or
    /// modification time differ from the checkpoint's) is read whole
    /// again, from its start, its saved running context (what it
    /// emitted) handed to [`Format::resume`] at byte 0; it is never cut
    /// into parts, and its report replaces the one saved. Default: no
    /// (appended lines).
    fn is_document(&self, path: &Path) -> bool {
        let _ = path;
        false
    }

    /// Whether this format's file at `path` is a database whose rows it
    /// reads (OpenCode, Cursor, Goose; see [`crate::rows`]): the engine
    /// never reads its bytes and never cuts it into parts; it opens it at
    /// every run (a write in WAL mode changes the `-wal` file beside it,
    /// not the database's size or time), handing the format its saved
    /// header and running context (the cursor) at byte 0, and adds the
    /// read's report to the one saved. Default: no.
    fn is_rows(&self, path: &Path) -> bool {
        let _ = path;
        false
    }

    /// Whether this format's databases ([`Format::is_rows`]) hold many
    /// lineages (a root session and its descendants) and are read by
    /// lineage under `--shard K/N`: such a database is read by every
    /// shard, each taking only its lineages' rows
    /// ([`crate::rows::Database::only_shard`]). Its documents
    /// ([`Format::is_document`]: OpenCode's JSON tree beside its
    /// databases, whose messages the databases hold too) are then every
    /// shard's as well, each reading those of its shard's lineages
    /// ([`SourceOptions::shard`]). Default: no (a database is its
    /// header's lineage, read whole by that lineage's shard).
    fn shards_rows(&self) -> bool {
        false
    }

    /// Whether the agent may rewrite a document keeping its size and
    /// modification time (Amp does not move a thread's mtime): a document
    /// whose identity, size and time are unchanged is then hashed when the
    /// run is planned ([`crate::document::content_hash`] of its bytes,
    /// read whole) and read again when the hash differs from the one its
    /// context saved. Default: no (an unchanged document is not opened).
    fn hashes_unchanged(&self) -> bool {
        false
    }

    /// The lineage id of a session id of this format: ids of two formats
    /// never meet. Default `<name>:<id>`.
    fn lineage(&self, session: &str) -> String {
        format!("{}:{session}", self.name())
    }

    /// The session a file names as its parent (a fork), as a lineage id.
    fn parent(&self, header: &Header) -> Option<String> {
        let _ = header;
        None
    }

    /// The file name of the parent's file, when a fork names it: the
    /// engine then reads the parent ahead when it comes later in the
    /// archive, so that the parent's copies are the ones kept.
    fn parent_file_name<'h>(&self, header: &'h Header) -> Option<&'h str> {
        let _ = header;
        None
    }

    /// What [`Format::parent_file_name`] is compared with for a file of
    /// this format named `file_name`: the name itself by default.
    fn parent_lookup_name<'n>(&self, file_name: &'n str) -> &'n str {
        file_name
    }

    /// The lines of a child's file (one that names a [`Format::parent`])
    /// that are its parent's though their bytes differ from the parent's
    /// (a Codex subagent replays its parent's history with the timestamps
    /// rewritten): `parent` is the parent's file when the archive holds
    /// it. The engine asks, with deduplication, on the thread that read a
    /// part from the file's start, after it; the answer may read both
    /// files (default: none, nothing read).
    fn parent_copies(
        &self,
        child: &Path,
        header: &Header,
        parent: Option<&Path>,
        opts: &SourceOptions,
    ) -> ParentCopies {
        let _ = (child, header, parent, opts);
        ParentCopies::default()
    }
}

/// What [`Format::parent_copies`] found in a child's file: line numbers
/// (1-based), ascending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParentCopies {
    /// Lines that replay a line of the parent's file, with the fingerprint
    /// the entry of that line has there: such a line's entry is a copy
    /// when its lineage holds that fingerprint (or the parent's file,
    /// later in the archive, is read ahead), else an entry of its own.
    pub replayed: Vec<(u64, u64)>,
    /// Lines whose entries are left to the parent though its file is not
    /// found (or does not hold them): copies, their fingerprints not
    /// recorded in the lineage.
    pub left_to_parent: Vec<u64>,
}

impl ParentCopies {
    /// Neither lines replayed nor left to the parent.
    pub fn is_empty(&self) -> bool {
        self.replayed.is_empty() && self.left_to_parent.is_empty()
    }
}
