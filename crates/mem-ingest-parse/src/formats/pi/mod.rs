//! The pi coding agent: its session files (a `session` header line, then
//! entries linked by `id`/`parentId`), its line mapping ([`map`]) and its
//! sources ([`PiSessionSource`], [`SliceSessionSource`],
//! [`MmapSessionSource`]).

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::format::{BoxedSource, Format, Input};
use crate::line::{Header, Parent};
use crate::source::SourceOptions;

pub mod map;
mod mmap;
mod source;

pub use mmap::MmapSessionSource;
pub use source::{PiSessionSource, SliceSessionSource};

/// The session id a `parentSession` path names: pi names files
/// `<timestamp>_<session id>.jsonl`; a name without `_` is taken whole.
pub fn session_of_path(path: &str) -> String {
    // The path comes from the machine that wrote it: `/` or `\`.
    let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let name = file.strip_suffix(".jsonl").unwrap_or(file).to_owned();
    match name.split_once('_') {
        Some((_, id)) => id.to_owned(),
        None => name,
    }
}

/// The pi coding agent's session files: `*.jsonl` under
/// `~/.pi/agent/sessions` (or `$PI_CODING_AGENT_SESSION_DIR`, or
/// `$PI_CODING_AGENT_DIR/sessions`), a session header first, entries after.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pi;

impl Format for Pi {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn records_cost(&self) -> bool {
        true
    }

    fn stats_before_sources(&self) -> bool {
        true
    }

    fn honours_raw_text(&self, _: crate::seal::Crate) -> bool {
        true
    }

    fn header_is_entry(&self) -> bool {
        true
    }

    fn is_session_file(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "jsonl")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        let dir = if let Some(d) = std::env::var_os("PI_CODING_AGENT_SESSION_DIR") {
            PathBuf::from(d)
        } else if let Some(d) = std::env::var_os("PI_CODING_AGENT_DIR") {
            PathBuf::from(d).join("sessions")
        } else if let Some(home) = std::env::var_os("HOME") {
            PathBuf::from(home).join(".pi/agent/sessions")
        } else {
            return Err("no PATH given and HOME is not set: name a session file or folder".into());
        };
        if !dir.is_dir() {
            return Err(format!(
                "no PATH given and pi's session archive {} does not exist \
                 (set PI_CODING_AGENT_SESSION_DIR or PI_CODING_AGENT_DIR, or name a PATH)",
                dir.display()
            ));
        }
        Ok(dir)
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<BoxedSource<'d>, Error> {
        Ok(match input {
            Input::Reader(r) => Box::new(PiSessionSource::from_reader_with(r, path, opts)?),
            Input::Bytes(b) => Box::new(SliceSessionSource::new(b, path, opts)?),
        })
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        _context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &SourceOptions,
    ) -> BoxedSource<'d> {
        let h = header.clone();
        match input {
            Input::Reader(r) => Box::new(PiSessionSource::resume(
                r,
                path,
                h,
                byte,
                lines_before,
                opts,
            )),
            Input::Bytes(b) => Box::new(SliceSessionSource::resume(
                b,
                path,
                h,
                byte,
                lines_before,
                opts,
            )),
        }
    }

    /// pi's session ids are the lineage ids as they are (states written
    /// before formats had namespaces hold them so); they are UUIDs, which
    /// never hold the `<format>:` prefix of the others.
    fn lineage(&self, session: &str) -> String {
        session.to_owned()
    }

    fn parent(&self, header: &Header) -> Option<String> {
        header
            .parent
            .as_ref()
            .and_then(Parent::path)
            .map(session_of_path)
    }

    /// `parentSession` is a path from the machine that wrote it: only its
    /// file name is compared (pi names files `<timestamp>_<session id>.jsonl`).
    fn parent_file_name<'h>(&self, header: &'h Header) -> Option<&'h str> {
        let parent = header.parent.as_ref()?.path()?;
        Some(parent.rsplit(['/', '\\']).next().unwrap_or(parent))
    }
}
