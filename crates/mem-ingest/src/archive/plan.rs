//! Cutting the archive into tasks: what of each file is new (all of it, or
//! what grew since the saved state), small regions whole, large ones in
//! parts at newline boundaries, so one file of several GB keeps every core
//! busy.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::format::{open_at, At, Format, Input};
use crate::line::Header;
use crate::source::SourceOptions;
use rayon::prelude::*;

use crate::checkpoint::model::FileState;
use crate::checkpoint::shard::{root_of, shard_of, Shard};
use crate::checkpoint::stamp::{header_digest, Identity};

/// Regions larger than this are read in parts of about this size. It does
/// not depend on `--jobs`, so neither does the order of any sum.
pub const PART_BYTES: u64 = 8 << 20;

/// Reads the header of a file: a small buffer (it grows for a long header
/// line), so that planning does not read whole small files.
pub(super) fn read_header(
    path: &Path,
    opts: &SourceOptions,
    format: &dyn Format,
) -> Option<Header> {
    let file = Arc::new(File::open(path).ok()?);
    // A long line before the header is read again, not held.
    let opts = opts.clone().buffer_capacity(4096).read_again_from(&file);
    let at = At {
        header: None,
        context: &[],
        byte: 0,
        lines_before: 0,
    };
    open_at(format, Input::Reader(Box::new(&*file)), path, at, &opts)
        .ok()
        .and_then(|s| s.header().cloned())
}

/// One unit of work: bytes `start..end` of a file (`end` = `None`: to its
/// end as it is when read). Without a header the task starts at 0 and reads
/// the header itself.
#[derive(Debug)]
pub struct Task {
    /// Index into the plan's files.
    pub file: usize,
    pub start: u64,
    pub end: Option<u64>,
    /// Lines before `start`, for the first part of a region. Later parts
    /// learn theirs when the parts before them have counted their
    /// newlines (while they read: no second pass over the file).
    pub lines: Option<u64>,
    /// Index of the file's first task.
    pub first_task: usize,
    pub header: Option<Header>,
    /// The format's running context at `start` (see
    /// [`crate::format::Format::needs_running_context`]).
    pub context: Vec<u8>,
}

/// How a file is read in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// New to the state, or no state.
    New,
    /// Unchanged since the state was saved: not opened.
    Unchanged,
    /// Grown: read from the saved offset.
    Resumed,
    /// Shrunk or replaced: read again from the start.
    Reread,
}

/// A file of the plan.
#[derive(Debug)]
pub struct PlannedFile {
    pub path: PathBuf,
    /// Index of its format in the run's formats.
    pub format: usize,
    /// Identity and size when found.
    pub identity: Identity,
    /// Number of tasks of this file (none when it is unchanged).
    pub tasks: usize,
    pub mode: Mode,
    /// What earlier runs consumed, when the file is resumed or unchanged.
    pub prior: Option<Arc<FileState>>,
    /// A document read again: what the checkpoint saved of its read
    /// before (its report: what its usage rows handed over sum to).
    pub reread: Option<Arc<FileState>>,
}

impl PlannedFile {
    pub fn size(&self) -> u64 {
        self.identity.size
    }
}

#[derive(Debug, Default)]
pub struct Plan {
    pub files: Vec<PlannedFile>,
    pub tasks: Vec<Task>,
    /// Files found that the state has an entry for (so the state's other
    /// entries are of files not found).
    pub known: usize,
}

/// The first `\n` at or after `from`, or `None`.
fn next_newline(file: &File, mut from: u64, size: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 * 1024];
    while from < size {
        let n = crate::sys::read_at(file, &mut buf, from)?;
        if n == 0 {
            break;
        }
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Ok(Some(from + i as u64));
        }
        from += n as u64;
    }
    Ok(None)
}

/// Part boundaries of `start..size`: each starts just after a `\n`.
fn boundaries(path: &Path, start: u64, size: u64) -> io::Result<Vec<u64>> {
    let file = File::open(path)?;
    let mut cuts = vec![start];
    let mut k = 1;
    while start + k * PART_BYTES < size {
        let last = *cuts.last().expect("non-empty");
        let from = (start + k * PART_BYTES - 1).max(last);
        match next_newline(&file, from, size)? {
            Some(nl) if nl + 1 < size => {
                if nl + 1 > last {
                    cuts.push(nl + 1);
                }
            }
            _ => break,
        }
        k += 1;
    }
    cuts.push(size);
    Ok(cuts)
}

/// The header differs from the one saved only by a cwd that was unknown
/// then: a format that finds the cwd in the file's first lines (Claude
/// Code's, whose first lines may be steering input without one) read the
/// file before the first line with a cwd was written. The file grew; it
/// was not rewritten, and is read on.
pub(super) fn cwd_now_known(h: &Header, p: &FileState) -> bool {
    p.header.cwd.is_empty()
        && !h.cwd.is_empty()
        && header_digest(&Header {
            cwd: String::new(),
            ..h.clone()
        }) == p.header_digest
}

/// Where the new bytes of a file start.
struct Region {
    start: u64,
    lines: u64,
    header: Option<Header>,
    mode: Mode,
    /// A document read again: its saved running context (what it
    /// emitted), handed to the format with its saved header at byte 0.
    document: Option<Vec<u8>>,
}

/// Unchanged: the same file, size and time, and all of it consumed (a
/// checkpoint taken inside a file covers only a part of it).
fn unchanged(p: &FileState, id: &Identity) -> bool {
    p.identity == *id && p.offset + p.pending >= id.size
}

/// The same file as when the state was saved (device and inode).
pub(super) fn same_file(p: &FileState, id: &Identity) -> bool {
    p.identity.dev == id.dev && p.identity.ino == id.ino
}

/// Whether planning a file reads from it: to check the header of a file
/// that grew, or to cut a large region into parts.
fn reads(p: Option<&FileState>, id: &Identity, path: &Path, format: &dyn Format) -> bool {
    if format.is_rows(path) {
        // A database is opened by its format, never read here.
        return false;
    }
    if format.is_document(path) {
        // An unchanged document whose writer keeps its time is hashed.
        return p.is_some_and(|p| unchanged(p, id) && format.hashes_unchanged());
    }
    match p {
        Some(p) if unchanged(p, id) => false,
        Some(p) if same_file(p, id) => true,
        _ => id.size > PART_BYTES,
    }
}

/// The state's entry for a file, looked up by its key, the path's
/// spelling ([`crate::path_text`], see `ctx::key_of`): borrowed, not built,
/// for a UTF-8 path without a backslash.
pub(super) fn entry<'s>(
    prior: &'s BTreeMap<String, Arc<FileState>>,
    path: &Path,
) -> Option<&'s Arc<FileState>> {
    prior.get(&*crate::path_text::spell(path))
}

fn region(
    path: &Path,
    id: &Identity,
    prior: Option<&FileState>,
    opts: &SourceOptions,
    format: &dyn Format,
) -> Region {
    let fresh = |mode| Region {
        start: 0,
        lines: 0,
        header: None,
        mode,
        document: None,
    };
    let Some(p) = prior else {
        return fresh(Mode::New);
    };
    if format.is_rows(path) {
        // A database: opened again at every run (its `-wal` holds writes
        // its own size and time do not show), its format handed the saved
        // cursor; the read's report adds to the saved one.
        return Region {
            start: 0,
            lines: 0,
            header: Some(p.header.clone()),
            mode: Mode::Resumed,
            document: Some(p.context.clone()),
        };
    }
    if format.is_document(path) {
        return document_region(path, id, p, format);
    }
    if unchanged(p, id) && format.holds_back(&p.context) {
        // Unchanged, but its context holds records back until the file is
        // still (Gemini CLI): read from where it stopped, nothing new.
        return Region {
            start: p.offset,
            lines: p.line,
            header: Some(p.header.clone()),
            mode: Mode::Resumed,
            document: None,
        };
    }
    if unchanged(p, id) {
        // No task: the header is not needed.
        return Region {
            start: p.offset,
            lines: p.line,
            header: None,
            mode: Mode::Unchanged,
            document: None,
        };
    }
    if !same_file(p, id) || id.size < p.offset + p.pending {
        return fresh(Mode::Reread);
    }
    // Same file, not shrunk below what was consumed: the header must be the
    // same too, or it was rewritten in place.
    let header = read_header(path, opts, format);
    match header {
        Some(h) if header_digest(&h) == p.header_digest || cwd_now_known(&h, p) => {
            let mut start = p.offset;
            if p.open_line {
                // The line consumed last had no "\n": one that follows
                // now ends it.
                let mut b = [0u8; 1];
                if File::open(path)
                    .and_then(|f| crate::sys::read_at(&f, &mut b, start))
                    .ok()
                    == Some(1)
                    && b[0] == b'\n'
                {
                    start += 1;
                }
            }
            Region {
                start,
                lines: p.line,
                header: Some(h),
                mode: Mode::Resumed,
                document: None,
            }
        }
        _ => fresh(Mode::Reread),
    }
}

/// A document the state knows: unchanged (not opened) when its identity,
/// size and time are the saved ones and, for a format whose writer keeps
/// the time ([`Format::hashes_unchanged`]), the hash of its bytes, taken
/// now, is the one saved; else read whole again (the saved context says
/// what it emitted).
fn document_region(path: &Path, id: &Identity, p: &FileState, format: &dyn Format) -> Region {
    let same = unchanged(p, id)
        && (!format.hashes_unchanged() || {
            let saved = crate::document::saved_hash(&p.context);
            saved.is_some() && saved == hash_of(path, id.size)
        });
    if same {
        return Region {
            start: p.offset,
            lines: p.line,
            header: None,
            mode: Mode::Unchanged,
            document: None,
        };
    }
    Region {
        start: 0,
        lines: 0,
        header: Some(p.header.clone()),
        mode: Mode::Reread,
        document: Some(p.context.clone()),
    }
}

/// The content hash of a document of `size` bytes (`None`: it could not
/// be read, or is larger than a document may be: read again, and the task
/// says why).
fn hash_of(path: &Path, size: u64) -> Option<u64> {
    use std::io::Read;
    if size > crate::document::MAX_DOCUMENT {
        return None;
    }
    let mut data = Vec::with_capacity(usize::try_from(size).ok()?);
    File::open(path)
        .ok()?
        .take(crate::document::MAX_DOCUMENT + 1)
        .read_to_end(&mut data)
        .ok()?;
    Some(crate::document::content_hash(&data))
}

struct Split {
    cuts: Vec<u64>,
    header: Option<Header>,
}

/// Plans the work over the files found (with their identity when found),
/// given what earlier runs consumed.
/// A file found: its path, identity, and format (an index into the run's
/// formats).
pub type FoundFile = (PathBuf, Identity, usize);

pub fn plan(
    found: Vec<FoundFile>,
    prior: &BTreeMap<String, Arc<FileState>>,
    opts: &SourceOptions,
    jobs: usize,
    formats: &[Arc<dyn Format>],
) -> Plan {
    let entries: Vec<Option<&Arc<FileState>>> =
        found.iter().map(|(path, ..)| entry(prior, path)).collect();
    let one = |((path, id, format), p): (&FoundFile, &Option<&Arc<FileState>>)| {
        let format = &*formats[*format];
        let r = region(path, id, p.map(|a| &**a), opts, format);
        if r.mode == Mode::Unchanged || r.start >= id.size {
            let split = Split {
                cuts: vec![],
                header: r.header.clone(),
            };
            return (r, split);
        }
        let split = split(path, &r, id.size, opts, format);
        (r, split)
    };
    // Files are read from on the pool (headers, part boundaries); when
    // none is (an unchanged archive, small new files), the pool is not
    // even started.
    let io = found
        .iter()
        .zip(&entries)
        .any(|((path, id, format), p)| reads(p.map(|a| &**a), id, path, &*formats[*format]));
    let pool = io
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(jobs)
                .build()
                .ok()
        })
        .flatten();
    let regions: Vec<(Region, Split)> = if let Some(pool) = pool {
        // On a pool of `--jobs` threads, as every pool of the run.
        pool.install(|| found.par_iter().zip(entries.par_iter()).map(one).collect())
    } else {
        found.iter().zip(&entries).map(one).collect()
    };
    let mut plan = Plan {
        known: entries.iter().filter(|p| p.is_some()).count(),
        ..Plan::default()
    };
    for (i, (((path, identity, format), (r, split)), entry)) in
        found.into_iter().zip(regions).zip(entries).enumerate()
    {
        let prior = match r.mode {
            Mode::Unchanged | Mode::Resumed => entry.cloned(),
            Mode::New | Mode::Reread => None,
        };
        let reread = match r.mode {
            Mode::Reread if r.document.is_some() => entry.cloned(),
            _ => None,
        };
        let mut f = PlannedFile {
            path,
            format,
            identity,
            tasks: 0,
            mode: r.mode,
            prior,
            reread,
        };
        if r.mode != Mode::Unchanged {
            // One region read to the end is one part from its start.
            let cuts = if split.cuts.len() < 2 {
                vec![r.start, identity.size.max(r.start)]
            } else {
                split.cuts
            };
            let first_task = plan.tasks.len();
            let last = cuts.len() - 2;
            for (k, w) in cuts.windows(2).enumerate() {
                plan.tasks.push(Task {
                    file: i,
                    start: w[0],
                    // The last part reads to the end as it is then.
                    end: (k < last).then_some(w[1]),
                    lines: (k == 0).then_some(r.lines),
                    first_task,
                    // A part from 0 reads the header itself (a document
                    // read again is given its saved one, with its context).
                    header: if w[0] == 0 && r.document.is_none() {
                        None
                    } else {
                        split.header.clone()
                    },
                    // A resumed file's first part goes on from the saved
                    // context; later parts exist only for formats that need
                    // none.
                    context: match (&f.prior, k, &r.document) {
                        (_, 0, Some(c)) => c.clone(),
                        (Some(p), 0, _) if r.mode == Mode::Resumed => p.context.clone(),
                        _ => Vec::new(),
                    },
                });
                f.tasks += 1;
            }
        }
        plan.files.push(f);
    }
    plan
}

/// Cuts a region of more than one part (reading its header when not
/// known); a region that is small, or whose header cannot be read here (the
/// task reports why), stays whole.
fn split(path: &Path, r: &Region, size: u64, opts: &SourceOptions, format: &dyn Format) -> Split {
    let whole = Split {
        cuts: vec![],
        header: r.header.clone(),
    };
    // A file whose parts cannot find the context of the lines before them
    // (a stream), or a document, is read in one task.
    if size - r.start <= PART_BYTES
        || !format.splits(path)
        || format.is_document(path)
        || format.is_rows(path)
    {
        return whole;
    }
    let header = match &r.header {
        Some(h) => h.clone(),
        None => match read_header(path, opts, format) {
            Some(h) => h,
            None => return whole,
        },
    };
    let Ok(cuts) = boundaries(path, r.start, size) else {
        return whole;
    };
    Split {
        cuts,
        header: Some(header),
    }
}

/// The files of the archive that are shard `shard`'s, and the root of
/// every lineage their headers name, to be recorded for the next run.
/// `prior` gives the headers of files unchanged since the state was saved
/// (not opened), `recorded` the roots the state recorded.
pub(crate) fn select_shard(
    files: Vec<FoundFile>,
    prior: &BTreeMap<String, Arc<FileState>>,
    recorded: &BTreeMap<String, String>,
    opts: &SourceOptions,
    formats: &[Arc<dyn Format>],
    shard: Shard,
    jobs: usize,
) -> (Vec<FoundFile>, BTreeMap<String, String>) {
    if shard.n <= 1 {
        return (files, BTreeMap::new());
    }
    // A database whose rows are many lineages is every shard's: its
    // reader takes its shard's rows (`SourceOptions::shard`); its header
    // is not read here. So is a document of such a format (OpenCode's
    // JSON tree beside its databases): its reader takes it when its
    // session's lineage is the shard's.
    let every = |(path, _, format): &FoundFile| {
        let f = &*formats[*format];
        f.shards_rows() && (f.is_rows(path) || f.is_document(path))
    };
    let header = |file: &FoundFile| {
        if every(file) {
            return None;
        }
        let (path, id, format) = file;
        let key = crate::path_text::spell(path);
        match prior.get(&*key) {
            Some(p) if p.identity == *id => Some(p.header.clone()),
            _ => read_header(path, opts, &*formats[*format]),
        }
    };
    let headers: Vec<_> = match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
        Ok(pool) => pool.install(|| files.par_iter().map(header).collect()),
        Err(_) => files.iter().map(header).collect(),
    };
    // Each lineage id's parent: the smallest named by its files (files of
    // one session naming different parents are rare; the choice must not
    // depend on the order of paths).
    let mut parent: HashMap<String, String> = HashMap::new();
    let mut lineage: Vec<Option<String>> = Vec::with_capacity(files.len());
    for ((_, _, format), h) in files.iter().zip(&headers) {
        let Some(h) = h else {
            lineage.push(None);
            continue;
        };
        let f = &*formats[*format];
        let id = f.lineage(&h.id);
        if let Some(p) = f.parent(h).filter(|p| *p != id) {
            let e = parent.entry(id.clone()).or_insert_with(|| p.clone());
            if p < *e {
                *e = p;
            }
        }
        lineage.push(Some(id));
    }
    // Every session with a file gets its root; the settled ones are
    // recorded, beside all recorded before (never dropped: an id whose file
    // cannot be read for a run, or is moved away and back, keeps its root).
    let has_file: HashSet<&str> = lineage.iter().flatten().map(String::as_str).collect();
    let mut roots = recorded.clone();
    let mut root: HashMap<&str, String> = HashMap::with_capacity(has_file.len());
    for &id in &has_file {
        let (r, settled) = root_of(id, &parent, &has_file, recorded);
        if settled && !recorded.contains_key(id) {
            roots.insert(id.to_owned(), r.clone());
        }
        root.insert(id, r);
    }
    let files = files
        .into_iter()
        .zip(&lineage)
        .filter(|(f, l)| {
            let k = match l {
                Some(id) => shard_of(&root[id.as_str()], shard.n),
                None if every(f) => return true,
                None => 0,
            };
            k == shard.k
        })
        .map(|(f, _)| f)
        .collect();
    (files, roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(identity: Identity, offset: u64) -> Arc<FileState> {
        Arc::new(FileState {
            identity,
            format: "pi".into(),
            context: Vec::new(),
            header: Header {
                id: "s".into(),
                cwd: "/p".into(),
                version: 3,
                timestamp: None,
                parent: None,
                fingerprint: 0,
            },
            header_digest: 0,
            offset,
            line: 2,
            open_line: false,
            pending: 0,
            report: crate::Report::default(),
        })
    }

    /// `reads` decides whether planning may skip the pool: it must say yes
    /// for a file that grew (its header is read) and for a region larger
    /// than a part (its boundaries are read), and no for the rest, which
    /// are planned from the state and the listing alone (here the files do
    /// not even exist).
    #[test]
    fn planning_reads_only_where_reads_says_so() {
        let id = |ino, size| Identity {
            dev: 1,
            ino,
            size,
            mtime_ns: 7,
        };
        let big = PART_BYTES + 1;
        let grown = Identity {
            mtime_ns: 8,
            ..id(1, 200)
        };
        // Name, state entry, identity found, whether planning reads, mode.
        type Case = (&'static str, Option<Arc<FileState>>, Identity, bool, Mode);
        let cases: [Case; 6] = [
            (
                "unchanged",
                Some(state(id(1, 100), 100)),
                id(1, 100),
                false,
                Mode::Unchanged,
            ),
            ("new, small", None, id(2, 100), false, Mode::New),
            (
                "replaced, small",
                Some(state(id(1, 100), 100)),
                id(3, 50),
                false,
                Mode::Reread,
            ),
            ("new, large", None, id(4, big), true, Mode::New),
            (
                "grown",
                Some(state(id(1, 100), 100)),
                grown,
                true,
                Mode::Reread,
            ),
            (
                "unchanged, large",
                Some(state(id(5, big), big)),
                id(5, big),
                false,
                Mode::Unchanged,
            ),
        ];
        let opts = SourceOptions::new();
        for (name, prior, identity, expect_reads, mode) in cases {
            let pi: Arc<dyn Format> = Arc::new(crate::formats::Pi);
            let path = PathBuf::from(format!("/nonexistent/mem-ingest/{name}.jsonl"));
            assert_eq!(
                reads(prior.as_deref(), &identity, &path, &*pi),
                expect_reads,
                "{name}"
            );
            let mut map = BTreeMap::new();
            if let Some(p) = &prior {
                map.insert(crate::path_text::spell(&path).into_owned(), p.clone());
            }
            let plan = plan(vec![(path, identity, 0)], &map, &opts, 2, &[pi]);
            assert_eq!(plan.known, usize::from(prior.is_some()), "{name}");
            // A grown file whose header cannot be read is read again.
            assert_eq!(plan.files[0].mode, mode, "{name}");
            let tasks = usize::from(mode != Mode::Unchanged);
            assert_eq!(plan.tasks.len(), tasks, "{name}: one whole region");
        }
    }
}
