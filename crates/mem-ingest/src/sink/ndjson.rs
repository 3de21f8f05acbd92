//! The NDJSON sinks: a file (`-o`, its checkpoint the file's length) and
//! standard output, and their encoder, which writes each record's line on
//! the worker that read it into pooled buffers.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::seam::{Encoder, Place, Sink};
use crate::checkpoint::Mark;
use crate::error::{Error, ErrorKind};
use crate::ndjson;
use crate::record::Record;

/// The capacity every output buffer gets at least: enough for the records
/// of any task read in memory (at most two parts, and records a quarter
/// larger than their lines), so that any pooled buffer serves any task.
/// Untouched capacity costs address space only; a buffer that had to grow
/// would be moved by `mremap` (a TLB shootdown on every core) or come back
/// as fresh pages to fault in and clear.
const OUT_CAPACITY: usize = (2 * crate::archive::plan::PART_BYTES as usize) / 4 * 5 + (1 << 20);

/// Bytes of written pages the pool keeps at most, over all its buffers.
const OUT_POOLED_BYTES: usize = 128 << 20;

/// Output buffers handed back after writing, for the next tasks of the run,
/// each with how many of its bytes were written before (their pages are
/// mapped): a task takes the buffer whose written pages just cover what it
/// needs, else the one with the most if it has the room, so that pages are
/// faulted in and cleared once for the run, not once for each task.
#[derive(Debug, Default, Clone)]
struct BufferPool(Arc<Mutex<Pooled>>);

#[derive(Debug, Default)]
struct Pooled {
    /// By written bytes, ascending.
    free: Vec<(usize, Vec<u8>)>,
    /// The sum of their written bytes.
    warm: usize,
}

impl Drop for Pooled {
    /// Unmapping hundreds of buffers one by one (each a shootdown of the
    /// page tables on every core the process ran on) took a `backfill -o`
    /// of 3,207 files 10-18 ms after its output was complete: they go on a
    /// thread of their own, which a process that exits right after does
    /// not wait for.
    fn drop(&mut self) {
        let free = std::mem::take(&mut self.free);
        if free.len() > 8 {
            let _ = std::thread::Builder::new().spawn(move || drop(free));
        }
    }
}

impl BufferPool {
    /// A buffer for `need` bytes of records (room for them), and how many of
    /// its bytes were written before.
    fn take(&self, need: usize) -> (Vec<u8>, usize) {
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = pool.free.partition_point(|(w, _)| *w < need);
        let last = pool.free.len().checked_sub(1);
        let at = if at < pool.free.len() {
            at
        } else if let Some(last) = last.filter(|&i| pool.free[i].1.capacity() >= need) {
            last
        } else {
            drop(pool);
            return (Vec::with_capacity(need.max(OUT_CAPACITY)), 0);
        };
        let (w, buf) = pool.free.remove(at);
        pool.warm -= w;
        (buf, w)
    }

    fn give(&self, mut buf: Vec<u8>, warm: usize) {
        if buf.capacity() > 64 << 20 {
            return;
        }
        let w = warm.max(buf.len()).min(buf.capacity());
        buf.clear();
        let mut pool = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if pool.warm + w <= OUT_POOLED_BYTES {
            let at = pool.free.partition_point(|(x, _)| *x < w);
            pool.free.insert(at, (w, buf));
            pool.warm += w;
        }
    }
}

/// Record lines of one task: the bytes, and where each record's line ends.
#[derive(Debug, Default)]
pub struct NdjsonBatch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Bytes of `bytes`' buffer written before this batch.
    warm: usize,
}

impl NdjsonBatch {
    /// The encoded lines, one record a line.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Writes the lines but the dropped ones.
    fn write_kept(&self, w: &mut impl Write, dropped: &[usize]) -> io::Result<()> {
        let mut at = 0;
        for &i in dropped {
            let start = if i == 0 { 0 } else { self.ends[i - 1] };
            if start > at {
                w.write_all(&self.bytes[at..start])?;
            }
            at = self.ends[i];
        }
        if self.bytes.len() > at {
            w.write_all(&self.bytes[at..])?;
        }
        Ok(())
    }
}

/// Encodes records as the pinned NDJSON lines (see the README's table).
#[derive(Debug, Clone)]
pub struct NdjsonEncoder {
    pool: BufferPool,
}

impl Encoder for NdjsonEncoder {
    type Batch = NdjsonBatch;

    fn batch(&self, bytes: u64) -> NdjsonBatch {
        // Records are about a quarter larger than their lines: sized so
        // that no buffer grows.
        let need = usize::try_from(bytes + bytes / 4)
            .unwrap_or(0)
            .min(64 << 20);
        let (bytes, warm) = self.pool.take(need);
        NdjsonBatch {
            bytes,
            ends: Vec::new(),
            warm,
        }
    }

    fn takes_raw_text(&self, _: crate::seal::Crate) -> bool {
        true
    }

    fn encode(&self, batch: &mut NdjsonBatch, record: &Record<'_>, place: Place<'_>) {
        ndjson::write_record(
            &mut batch.bytes,
            record,
            place.file,
            place.text_bytes,
            place.line,
        );
        batch.ends.push(batch.bytes.len());
    }
}

/// NDJSON to standard output. A closed pipe (`| head`) ends the run
/// quietly. It cannot be resumed: with a checkpoint, each record is written
/// at least once.
#[derive(Debug)]
pub struct NdjsonStdout {
    w: BufWriter<io::Stdout>,
    pool: BufferPool,
    closed: bool,
}

impl NdjsonStdout {
    /// Standard output, buffered.
    pub fn new() -> Self {
        NdjsonStdout {
            w: BufWriter::with_capacity(1 << 20, io::stdout()),
            pool: BufferPool::default(),
            closed: false,
        }
    }

    fn result(&mut self, r: io::Result<()>) -> Result<bool, Error> {
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(false)
            }
            Err(e) => Err(Error::new(Path::new(""), ErrorKind::Write(e))),
        }
    }
}

impl Default for NdjsonStdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Sink for NdjsonStdout {
    type Encoder = NdjsonEncoder;

    fn encoder(&self) -> NdjsonEncoder {
        NdjsonEncoder {
            pool: self.pool.clone(),
        }
    }

    fn write(&mut self, batch: NdjsonBatch, dropped: &[usize]) -> Result<bool, Error> {
        let r = batch.write_kept(&mut self.w, dropped);
        self.pool.give(batch.bytes, batch.warm);
        self.result(r)
    }

    fn sync(&mut self) -> Result<Option<Mark>, Error> {
        let r = self.w.flush();
        self.result(r).map(|_| None)
    }

    fn closed(&self) -> bool {
        self.closed
    }
}

/// NDJSON into a file.
///
/// Without a checkpoint, the file is written under a temporary name beside
/// it and renamed into place when the run completes (readers see all of it
/// or none of it); it is left to the system to write back, as `cp` does,
/// since nothing claims to cover it. With a checkpoint, the file is
/// appended to, run after run: the checkpoint records how many bytes are
/// its own, a killed run's torn tail is cut back to that, the file is
/// synced before each checkpoint, and a file holding bytes no checkpoint
/// covers is refused.
///
/// With [`NdjsonFile::usage_out`], a second file beside it takes a row per
/// counted response (`--usage-out`), written, synced and covered by the
/// checkpoint with the records' file.
#[derive(Debug)]
pub struct NdjsonFile {
    path: PathBuf,
    /// The checkpoint file's path, for messages.
    state: Option<PathBuf>,
    out: Option<OpenFile>,
    pool: BufferPool,
    /// The usage rows' file, when there is one.
    usage: Option<Box<NdjsonFile>>,
    /// The usage rows' file is new to the checkpoint (see
    /// [`Sink::unpaired`]).
    usage_unpaired: bool,
}

#[derive(Debug)]
struct OpenFile {
    w: BufWriter<File>,
    len: u64,
    /// Length known to be on the disk (`len` after the last sync).
    durable: u64,
    /// This run created the file.
    created: bool,
    /// Without a checkpoint: the temporary file written, and the file it
    /// is renamed over when the run completes.
    tmp: Option<(PathBuf, PathBuf)>,
    /// Written in place, not a regular file (a pipe, a device): never
    /// synced.
    special: bool,
}

impl NdjsonFile {
    /// Replaces `path` when the run completes (no checkpoint).
    pub fn create(path: impl Into<PathBuf>) -> Self {
        NdjsonFile {
            path: path.into(),
            state: None,
            out: None,
            pool: BufferPool::default(),
            usage: None,
            usage_unpaired: false,
        }
    }

    /// Appends to `path`, paired with the checkpoint at `state` (named in
    /// messages): the engine calls [`Sink::resume_at`] before writing.
    pub fn append(path: impl Into<PathBuf>, state: impl Into<PathBuf>) -> Self {
        NdjsonFile {
            path: path.into(),
            state: Some(state.into()),
            out: None,
            pool: BufferPool::default(),
            usage: None,
            usage_unpaired: false,
        }
    }

    /// Writes a row per counted response (exactly the responses `stats`
    /// counts) as NDJSON into `path`, beside the records: replaced when
    /// the run completes, as the records' file, or with a checkpoint
    /// appended to, its length covered by the same checkpoint (see
    /// [`usage_line`] for a row's fields).
    pub fn usage_out(mut self, path: impl Into<PathBuf>) -> Self {
        self.usage = Some(Box::new(NdjsonFile {
            path: path.into(),
            state: self.state.clone(),
            out: None,
            pool: BufferPool::default(),
            usage: None,
            usage_unpaired: false,
        }));
        self
    }

    /// The usage rows' file, when there is one.
    pub fn usage_path(&self) -> Option<&Path> {
        self.usage.as_deref().map(NdjsonFile::path)
    }

    /// Appends lines as they are.
    fn write_lines(&mut self, lines: &[u8]) -> Result<(), Error> {
        let out = self.open()?;
        out.w
            .write_all(lines)
            .map_err(|e| Error::new(&self.path, ErrorKind::Write(e)))?;
        self.out.as_mut().expect("opened").len += lines.len() as u64;
        Ok(())
    }

    /// The output's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the output written (with a checkpoint, from the start of
    /// the file).
    pub fn len(&self) -> u64 {
        self.out.as_ref().map_or(0, |o| o.len)
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn io(&self, e: io::Error) -> Error {
        Error::io(&self.path, e)
    }

    /// Opens the temporary file of a run without a checkpoint. It takes
    /// the place of an output that exists, and takes its permissions too:
    /// an output keeps its mode, whatever the process would create. A link
    /// is written through (the file it names is replaced, the link stays);
    /// what is not a regular file (a named pipe, `/dev/null`) is written in
    /// place: renamed over, the node itself would be replaced.
    fn open_temporary(&mut self) -> Result<(), Error> {
        // The kernel follows the links itself: `/dev/stdout` or
        // `/dev/fd/N` read by `readlink` name `pipe:[N]`, no path at all.
        if not_a_file(&self.path).is_some() {
            let f = OpenOptions::new()
                .write(true)
                .open(&self.path)
                .map_err(|e| self.io(e))?;
            self.out = Some(OpenFile {
                w: BufWriter::with_capacity(BUFFERED, f),
                len: 0,
                durable: 0,
                created: false,
                tmp: None,
                special: true,
            });
            return Ok(());
        }
        let real = crate::checkpoint::state::real_path(&self.path);
        let found = std::fs::metadata(&real).ok();
        let tmp = crate::atomic::temporary_beside(&real);
        let f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        if let Some(m) = found.filter(|m| m.is_file()) {
            f.set_permissions(m.permissions())
                .map_err(|e| Error::io(&tmp, e))?;
        }
        self.out = Some(OpenFile {
            w: BufWriter::with_capacity(BUFFERED, f),
            len: 0,
            durable: 0,
            created: true,
            tmp: Some((tmp, real)),
            special: false,
        });
        Ok(())
    }

    fn open(&mut self) -> Result<&mut OpenFile, Error> {
        if self.out.is_none() {
            match self.state.clone() {
                None => self.open_temporary()?,
                Some(_) => self.resume_at(None, false)?,
            }
        }
        Ok(self.out.as_mut().expect("opened"))
    }

    /// Refuses an output that holds bytes no checkpoint covers: they are not
    /// this run's to cut, replace or append to (records of sessions pruned
    /// from the archive since would be lost, silently).
    fn refuse_uncovered(&self, checkpoint_exists: bool) -> Result<(), Error> {
        let len = match std::fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(self.io(e)),
        };
        if len == 0 {
            return Ok(());
        }
        let state = self.state.clone().unwrap_or_default();
        Err(Error::new(
            &state,
            ErrorKind::OutputNotCovered {
                output: self.path.clone(),
                len,
                state_exists: checkpoint_exists,
            },
        ))
    }
}

/// What the output at `path` is when it is there and not a regular file,
/// for a message (`None` for a regular file, a folder, which opening
/// names, or nothing there). Links are followed, as the kernel does.
fn not_a_file(path: &Path) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path).ok()?.file_type();
    if t.is_fifo() {
        Some("a named pipe")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        None
    }
}

/// The output file's buffer: a batch at least this long is written
/// straight from the batch, not copied into the buffer first (most are: a
/// batch is a file's or a part's records).
const BUFFERED: usize = 64 << 10;

impl Sink for NdjsonFile {
    type Encoder = NdjsonEncoder;

    fn encoder(&self) -> NdjsonEncoder {
        NdjsonEncoder {
            pool: self.pool.clone(),
        }
    }

    fn write(&mut self, batch: NdjsonBatch, dropped: &[usize]) -> Result<bool, Error> {
        let out = self.open()?;
        let mut counter = Counter {
            w: &mut out.w,
            n: 0,
        };
        let r = batch.write_kept(&mut counter, dropped);
        out.len += counter.n;
        self.pool.give(batch.bytes, batch.warm);
        r.map_err(|e| Error::new(&self.path, ErrorKind::Write(e)))?;
        Ok(true)
    }

    /// Flushes, and for a file a checkpoint pairs with makes it durable. A
    /// file written without one is only flushed: it is renamed into place
    /// when complete, and nothing claims to cover it, so waiting for the
    /// disk (`fdatasync` of the whole output: 0.18 s for 318 MB here, a
    /// third of the run) would buy nothing a re-run could use.
    fn sync(&mut self) -> Result<Option<Mark>, Error> {
        let usage = match self.usage.as_deref_mut() {
            Some(u) => u.sync()?.map(|m| (m.path, m.bytes)),
            None => None,
        };
        self.usage_unpaired = false;
        let path = self.path.to_string_lossy().into_owned();
        let out = self.open()?;
        let write_err = |e| ErrorKind::Write(e);
        out.w
            .flush()
            .map_err(write_err)
            .map_err(|k| Error::new(Path::new(&path), k))?;
        if out.tmp.is_none() && !out.special && out.len != out.durable {
            out.w
                .get_ref()
                .sync_data()
                .map_err(|e| Error::new(Path::new(&path), ErrorKind::Write(e)))?;
            out.durable = out.len;
        }
        let mut mark = Mark::file(path, out.len);
        mark.usage = usage;
        Ok(Some(mark))
    }

    fn resume_at(&mut self, mark: Option<&Mark>, checkpoint_exists: bool) -> Result<(), Error> {
        let state = self.state.clone().unwrap_or_default();
        let paired_usage = mark.and_then(|m| m.usage.as_ref());
        match (self.usage.as_deref_mut(), paired_usage) {
            (Some(u), Some((path, len))) => {
                u.resume_at(Some(&Mark::file(path.clone(), *len)), checkpoint_exists)?;
            }
            (Some(u), None) => {
                // New to this checkpoint: saved with it, covering 0 bytes,
                // before a row is written (refused when it holds bytes).
                u.resume_at(None, checkpoint_exists)?;
                self.usage_unpaired = mark.is_some();
            }
            (None, Some((path, _))) => {
                let why = format!(
                    "the state pairs with the usage rows' file {path} as well: give \
                     --usage-out {path} (one state, one pair of outputs)"
                );
                return Err(Error::new(
                    &state,
                    ErrorKind::Sink(crate::error::SinkFailure::new(io::Error::other(why), true)),
                ));
            }
            (None, None) => {}
        }
        let covered = match mark {
            Some(o) if Path::new(&o.path) != self.path.as_path() => {
                return Err(Error::new(
                    &state,
                    ErrorKind::OtherOutput {
                        paired: o.path.clone(),
                        output: self.path.clone(),
                    },
                ))
            }
            Some(o) => o.bytes,
            // No checkpoint, or one saved by a run to stdout: it covers
            // nothing of this output. A first run saves its checkpoint,
            // covering 0 bytes, before it writes one, so an output that
            // holds bytes here was never written under this checkpoint.
            None => {
                self.refuse_uncovered(checkpoint_exists)?;
                0
            }
        };
        let created = std::fs::symlink_metadata(&self.path).is_err();
        if let Some(what) = not_a_file(&self.path) {
            return Err(Error::new(&self.path, ErrorKind::OutputNotAFile(what)));
        }
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .map_err(|e| self.io(e))?;
        let len = f.metadata().map_err(|e| self.io(e))?.len();
        if len < covered {
            return Err(Error::new(
                &self.path,
                ErrorKind::OutputShorter { len, covered },
            ));
        }
        if len > covered {
            // The torn tail of a run that was killed before its checkpoint.
            f.set_len(covered).map_err(|e| self.io(e))?;
            f.sync_data().map_err(|e| self.io(e))?;
        }
        f.seek(SeekFrom::Start(covered)).map_err(|e| self.io(e))?;
        // What the checkpoint covers was made durable before it was saved
        // (or just now, when cut back).
        self.out = Some(OpenFile {
            w: BufWriter::with_capacity(BUFFERED, f),
            len: covered,
            durable: covered,
            created,
            tmp: None,
            special: false,
        });
        Ok(())
    }

    fn pairs_with_checkpoint(&self) -> bool {
        self.state.is_some()
    }

    fn unpaired(&self) -> bool {
        self.usage_unpaired
    }

    fn output_file(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn wants_usage(&self) -> bool {
        self.usage.is_some()
    }

    fn write_usage(&mut self, rows: &[crate::archive::counted::CountedUsage]) -> Result<(), Error> {
        let Some(u) = self.usage.as_deref_mut() else {
            return Ok(());
        };
        let mut lines = Vec::new();
        for r in rows {
            usage_line(&mut lines, &UsageLine::of(r, None));
        }
        u.write_lines(&lines)
    }

    fn write_document_usage(&mut self, doc: &super::seam::DocumentUsage<'_>) -> Result<(), Error> {
        let Some(u) = self.usage.as_deref_mut() else {
            return Ok(());
        };
        let mut lines = Vec::new();
        for r in doc.fresh {
            usage_line(&mut lines, &UsageLine::of(r, None));
        }
        for c in doc.corrections {
            let d = UsageLine::of(&c.before, None).difference(Some(UsageLine::of(&c.now, None)));
            if let Some(d) = d {
                usage_line(&mut lines, &d);
            }
        }
        if lines.is_empty() {
            return Ok(());
        }
        u.write_lines(&lines)
    }

    fn write_response_usage(&mut self, rows: &[super::seam::ResponseUsage]) -> Result<(), Error> {
        let Some(u) = self.usage.as_deref_mut() else {
            return Ok(());
        };
        let mut lines = Vec::new();
        for r in rows {
            if let Some(l) = UsageLine::of_response(r) {
                usage_line(&mut lines, &l);
            }
        }
        u.write_lines(&lines)
    }

    fn finish(&mut self) -> Result<(), Error> {
        if let Some(u) = self.usage.as_deref_mut() {
            u.finish()?;
        }
        self.open()?;
        let out = self.out.as_mut().expect("opened");
        out.w
            .flush()
            .map_err(|e| Error::new(&self.path, ErrorKind::Write(e)))?;
        if let Some((tmp, real)) = out.tmp.take() {
            // Nothing claims to cover it: not synced (see `sync`).
            crate::atomic::rename_into_place(&tmp, &real, false)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }

    fn abandon(&mut self) {
        if let Some(u) = self.usage.as_deref_mut() {
            u.abandon();
        }
        match &self.out {
            Some(OpenFile {
                tmp: Some((t, _)), ..
            }) => {
                let _ = std::fs::remove_file(t);
            }
            Some(OpenFile {
                created: true,
                len: 0,
                ..
            }) => {
                let _ = std::fs::remove_file(&self.path);
            }
            _ => {}
        }
    }
}

/// A usage row as `--usage-out` writes it: one JSON object a line, with
/// the fields of the store's `usage` table and the dataset's (`timestamp`
/// in Unix milliseconds, `cost` null when the model has no price;
/// `response`: Claude Code's response index, absent for the others;
/// `correction`: the difference for a response replaced after its row was
/// written, see `docs/usage.md`).
#[derive(Debug, Clone, serde::Serialize)]
struct UsageLine<'a> {
    agent: &'a str,
    session: &'a str,
    project: &'a str,
    file: &'a str,
    line: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    response: Option<u32>,
    timestamp: Option<i64>,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    input: i64,
    output: i64,
    cache_read: i64,
    cache_write: i64,
    cache_write_1h: i64,
    reasoning: i64,
    total_tokens: i64,
    cost: Option<f64>,
    cost_recorded: bool,
    correction: bool,
}

impl<'a> UsageLine<'a> {
    fn of(r: &'a crate::archive::counted::CountedUsage, response: Option<u32>) -> UsageLine<'a> {
        let u = &r.usage;
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        UsageLine {
            agent: r.agent,
            session: &r.session,
            project: &r.project,
            file: &r.file,
            line: r.line,
            response,
            timestamp: r.time,
            provider: r.provider.as_deref(),
            model: r.model.as_deref(),
            input: n(u.input),
            output: n(u.output),
            cache_read: n(u.cache_read),
            cache_write: n(u.cache_write),
            cache_write_1h: n(r.cache_write_1h),
            reasoning: n(r.reasoning),
            total_tokens: n(u.total_tokens),
            cost: r.cost(crate::prices::Prices::shipped()),
            cost_recorded: r.recorded,
            correction: false,
        }
    }

    /// A Claude Code response's row: its usage now less what was written
    /// of it before (None when that is nothing).
    fn of_response(r: &'a super::seam::ResponseUsage) -> Option<UsageLine<'a>> {
        let now = r.row.as_ref().map(|u| UsageLine::of(u, Some(r.index)));
        let before = r.written.as_ref().map(|u| UsageLine::of(u, Some(r.index)));
        match (now, before) {
            (Some(now), None) => Some(now),
            (now, Some(b)) => b.difference(now),
            (None, None) => None,
        }
    }

    /// The correction row from this row written before to `now` (None:
    /// the response left the run's bounds): `now`'s names and time (this
    /// one's when none), its counts and cost less this one's; None when
    /// that is nothing.
    fn difference(self, now: Option<UsageLine<'a>>) -> Option<UsageLine<'a>> {
        let b = self;
        let mut d = now.clone().unwrap_or_else(|| b.clone());
        let get = |l: &UsageLine<'_>| {
            [
                l.input,
                l.output,
                l.cache_read,
                l.cache_write,
                l.cache_write_1h,
                l.reasoning,
                l.total_tokens,
            ]
        };
        let n = now.as_ref().map_or([0; 7], get);
        let o = get(&b);
        let diff: Vec<i64> = (0..7).map(|k| n[k].saturating_sub(o[k])).collect();
        [
            d.input,
            d.output,
            d.cache_read,
            d.cache_write,
            d.cache_write_1h,
            d.reasoning,
            d.total_tokens,
        ] = diff.try_into().expect("seven");
        d.cost = match (now.as_ref().map_or(Some(0.0), |n| n.cost), b.cost) {
            (Some(x), Some(y)) => Some(x - y),
            _ => None,
        };
        d.correction = true;
        let same = get(&d) == [0; 7] && d.cost == Some(0.0);
        (!same).then_some(d)
    }
}

/// Appends a usage row's line.
fn usage_line(out: &mut Vec<u8>, l: &UsageLine<'_>) {
    serde_json::to_writer(&mut *out, l).expect("a usage row serialises");
    out.push(b'\n');
}

/// Counts the bytes written through it.
struct Counter<'w, W> {
    w: &'w mut W,
    n: u64,
}

impl<W: Write> Write for Counter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.w.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.w.write_all(buf)?;
        self.n += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_takes_the_buffer_whose_written_pages_cover_it_else_the_warmest() {
        let pool = BufferPool::default();
        // Three buffers handed back, written to 100, 3,000 and 50,000 bytes
        // (the last one before: `warm` counts what earlier batches wrote).
        for (len, warm) in [(3_000, 0), (100, 0), (20, 50_000)] {
            let mut b = Vec::with_capacity(64 << 10);
            b.resize(len, b'x');
            pool.give(b, warm);
        }
        let (b, warm) = pool.take(2_000);
        assert_eq!((b.len(), warm), (0, 3_000));
        let (_, warm) = pool.take(60_000);
        assert_eq!(warm, 50_000);
        let (_, warm) = pool.take(10);
        assert_eq!(warm, 100);
        // Empty: a new buffer, no page written.
        let (b, warm) = pool.take(10);
        assert_eq!((b.capacity() >= OUT_CAPACITY, warm), (true, 0));
        // The warmest buffer only when it has the room.
        pool.give(b, 70_000);
        let (b, warm) = pool.take(OUT_CAPACITY + 1);
        assert_eq!((b.capacity() > OUT_CAPACITY, warm), (true, 0));
        let (_, warm) = pool.take(OUT_CAPACITY);
        assert_eq!(warm, 70_000);
        // What the pool keeps is bounded by the bytes written, not by count
        // (capacity alone costs address space: these pages are untouched).
        let big = |w| {
            pool.give(Vec::with_capacity(64 << 20), w);
            pool.0.lock().unwrap().free.len()
        };
        assert_eq!(big(OUT_POOLED_BYTES - (64 << 20)), 1);
        assert_eq!(big(64 << 20), 2);
        assert_eq!(big(1), 2);
    }

    #[test]
    fn a_batch_writes_all_but_the_dropped_lines() {
        let mut b = NdjsonBatch::default();
        for l in ["a\n", "bb\n", "ccc\n", "d\n"] {
            b.bytes.extend_from_slice(l.as_bytes());
            b.ends.push(b.bytes.len());
        }
        for (dropped, want) in [
            (&[][..], "a\nbb\nccc\nd\n"),
            (&[0][..], "bb\nccc\nd\n"),
            (&[1, 2][..], "a\nd\n"),
            (&[3][..], "a\nbb\nccc\n"),
            (&[0, 1, 2, 3][..], ""),
        ] {
            let mut out = Vec::new();
            b.write_kept(&mut out, dropped).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), want, "{dropped:?}");
        }
    }
}
