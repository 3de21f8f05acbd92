//! One run of `backfill` or `stats`: discovery, the plan, tasks on every
//! core, and, in task order, deduplication, output, totals and checkpoints.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, IsTerminal, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mem_ingest::{
    Header, PiSessionSource, Position, RecordSource, Report, SliceSessionSource, SourceOptions,
};

use super::dedupe::{session_of_path, FpSet, Lineages};
use super::output::{self, FailureLine, ModelLine, ProjectLine, Roles, SkipLine, Stats};
use super::plan::{self, Mode, Plan, PlannedFile, Task};
use super::state::{self, FileState, LineageState, OutputState, Shape, State};
use super::{discover, exec};

/// What backfill keeps of the records, beyond roles (default: all, whole).
#[derive(Debug, Clone, Copy, Default)]
pub struct Keep {
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub max_text: Option<usize>,
}

/// Where records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    /// Nowhere: `stats`.
    None,
    /// NDJSON to stdout or `-o`.
    Records,
}

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub command: String,
    pub paths: Vec<PathBuf>,
    pub jobs: usize,
    pub quiet: bool,
    pub state: Option<PathBuf>,
    pub dedupe: bool,
    pub opts: SourceOptions,
    pub keep: Option<Keep>,
    /// `--role` names, sorted, for the state's shape.
    pub roles: Vec<String>,
    pub output: Option<PathBuf>,
    pub follow: bool,
    pub checkpoint: Duration,
}

/// A skip as reported, with its file.
#[derive(Debug, Clone)]
pub struct SkipAt {
    pub path: String,
    pub line: u64,
    pub byte: u64,
    pub reason: String,
}

const MAX_SKIPS: usize = 1000;

/// Everything a run found, aggregated in file order.
#[derive(Default)]
pub struct Totals {
    pub files: u64,
    pub files_failed: u64,
    pub files_empty: u64,
    /// Bytes of the files read (all of them, over every run with a state).
    pub bytes: u64,
    /// Bytes read in this run.
    pub read: u64,
    /// Records written in this run.
    pub written: u64,
    pub report: Report,
    /// Per project: its sessions (distinct ids: a history written twice
    /// into two files is one session), records, tokens and cost.
    by_project: BTreeMap<String, (HashSet<String>, u64, u64, f64)>,
    pub failures: Vec<(String, String)>,
    pub skips: Vec<SkipAt>,
    pub unchanged: u64,
    pub resumed: u64,
    pub reread: u64,
    pub stateful: bool,
    pub dedupe: bool,
    /// The output was closed by its reader (`| head`).
    pub closed: bool,
    /// Stopped by SIGINT or SIGTERM.
    pub interrupted: bool,
    pub follow: bool,
}

impl Totals {
    fn fail(&mut self, path: &Path, size: u64, error: String) {
        self.files += 1;
        self.files_failed += 1;
        self.bytes += size;
        self.failures.push((path.display().to_string(), error));
    }

    fn file_done(&mut self, path: &Path, report: &Report, header: Option<&Header>) {
        self.files += 1;
        self.bytes += report.bytes + report.pending;
        self.files_empty += u64::from(report.empty);
        let pending = self.report.pending + report.pending;
        self.report.merge(report);
        self.report.pending = pending;
        let room = MAX_SKIPS.saturating_sub(self.skips.len());
        if room > 0 && !report.skips.is_empty() {
            let p = path.display().to_string();
            self.skips
                .extend(report.skips.iter().take(room).map(|s| SkipAt {
                    path: p.clone(),
                    line: s.line,
                    byte: s.byte,
                    reason: s.reason.to_string(),
                }));
        }
        if let Some(h) = header {
            // Keys are cloned only when new: this runs for every file.
            if !self.by_project.contains_key(&h.cwd) {
                self.by_project.insert(h.cwd.clone(), Default::default());
            }
            let e = self.by_project.get_mut(&h.cwd).expect("inserted");
            if !e.0.contains(&h.id) {
                e.0.insert(h.id.clone());
            }
            e.1 += report.records;
            e.2 += report.usage.total_tokens;
            e.3 += report.usage.cost;
        }
    }

    pub fn to_stats(&self) -> Stats {
        let r = &self.report;
        let mut by_model: Vec<ModelLine> = r
            .by_model
            .iter()
            .map(|m| ModelLine {
                provider: m.provider.clone(),
                model: m.model.clone(),
                messages: m.messages,
                usage: m.usage,
            })
            .collect();
        by_model.sort_by(|a, b| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)));
        Stats {
            files: self.files,
            files_failed: self.files_failed,
            files_empty: self.files_empty,
            bytes: self.bytes,
            lines: r.lines,
            records: r.records,
            skipped: r.skipped,
            repaired: r.repaired,
            deduplicated: r.deduplicated,
            pending: r.pending,
            roles: Roles::from_counts(&r.roles),
            entries: r.entries.iter().map(|(k, n)| (k.to_owned(), n)).collect(),
            usage: r.usage,
            by_model,
            by_project: self
                .by_project
                .iter()
                .map(|(p, (sessions, records, tokens, cost))| ProjectLine {
                    project: p.clone(),
                    sessions: sessions.len() as u64,
                    records: *records,
                    total_tokens: *tokens,
                    cost: *cost,
                })
                .collect(),
            failures: self
                .failures
                .iter()
                .map(|(p, e)| FailureLine {
                    path: p.clone(),
                    error: e.clone(),
                })
                .collect(),
            skips: self
                .skips
                .iter()
                .map(|s| SkipLine {
                    path: s.path.clone(),
                    line: s.line,
                    byte: s.byte,
                    reason: s.reason.clone(),
                })
                .collect(),
        }
    }
}

/// One entry of a task, for deduplication at delivery.
struct Note {
    fingerprint: u64,
    line: u64,
    byte: u64,
    /// Its record line in the task's output.
    out: Option<(usize, usize)>,
}

/// The result of one task.
#[derive(Default)]
struct PartResult {
    report: Report,
    out: Vec<u8>,
    error: Option<String>,
    header: Option<Header>,
    position: Option<Position>,
    notes: Vec<Note>,
    kept: u64,
}

/// The output and how much of it is written.
enum Out {
    Stdout(BufWriter<io::Stdout>),
    File {
        w: BufWriter<File>,
        len: u64,
        /// Length known to be on the disk (`len` after the last sync).
        durable: u64,
        /// This run created the file.
        created: bool,
        path: PathBuf,
        tmp: Option<PathBuf>,
    },
}

impl Out {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Out::Stdout(w) => w.write_all(bytes),
            Out::File { w, len, .. } => {
                w.write_all(bytes)?;
                *len += bytes.len() as u64;
                Ok(())
            }
        }
    }

    /// Flushes, and for a file a state pairs with makes it durable. A file
    /// written without a state is only flushed: it is renamed into place
    /// when complete (readers see all of it or none of it), and nothing
    /// claims to cover it, so waiting for the disk (`fdatasync` of the
    /// whole output: 0.18 s for 318 MB here, a third of the run) would buy
    /// nothing a re-run could use.
    fn sync(&mut self) -> io::Result<()> {
        match self {
            Out::Stdout(w) => w.flush(),
            Out::File {
                w,
                tmp,
                len,
                durable,
                ..
            } => {
                w.flush()?;
                if tmp.is_some() || *len == *durable {
                    return Ok(());
                }
                w.get_ref().sync_data()?;
                *durable = *len;
                Ok(())
            }
        }
    }
}

/// Output buffers handed back by delivery for the next tasks.
static OUT_BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// The capacity every output buffer gets at least: enough for the records
/// of any task read in memory (at most two parts, and records a quarter
/// larger than their lines), so that any pooled buffer serves any task.
/// Untouched capacity costs address space only; a buffer that had to grow
/// would be moved by `mremap` (a TLB shootdown on every core) or come back
/// as fresh pages to fault in and clear.
const OUT_CAPACITY: usize = (2 * plan::PART_BYTES as usize) / 4 * 5 + (1 << 20);

/// Buffers kept in the pool at most: about the tasks in flight.
const OUT_POOLED: usize = 96;

/// A buffer for `need` bytes of records: the most recently returned one
/// that is large enough (its pages are still mapped and warm), or a new one.
fn take_out_buffer(need: usize) -> Vec<u8> {
    let mut pool = OUT_BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
    match pool.iter().rposition(|b| b.capacity() >= need) {
        Some(i) => pool.remove(i),
        None => {
            drop(pool);
            Vec::with_capacity(need.max(OUT_CAPACITY))
        }
    }
}

fn give_out_buffer(mut buf: Vec<u8>) {
    if buf.capacity() > 64 << 20 {
        return;
    }
    buf.clear();
    let mut pool = OUT_BUFFERS.lock().unwrap_or_else(|e| e.into_inner());
    if pool.len() < OUT_POOLED {
        pool.push(buf);
    }
}

/// The deduplication lineages, restored from the state when a file is
/// first read: a re-run that reads nothing never needs them (decoding and
/// indexing them was a tenth of such a run).
fn lineages<'l>(
    slot: &'l mut Option<Lineages>,
    state: Option<&State>,
) -> Result<&'l mut Lineages, String> {
    if slot.is_none() {
        let saved = state.map(State::lineages).transpose()?;
        let groups = saved
            .unwrap_or_default()
            .into_iter()
            .map(|l| (l.sessions, state::decode_fingerprints(&l.fingerprints)))
            .collect();
        *slot = Some(Lineages::import(groups));
    }
    Ok(slot.as_mut().expect("restored"))
}

/// Everything a run carries from pass to pass.
struct Ctx {
    cfg: RunConfig,
    state: Option<State>,
    /// With deduplication, once a file is read (see [`lineages`]).
    lineages: Option<Lineages>,
    out: Option<Out>,
    stop: Arc<AtomicBool>,
    /// The listing of the archive started with the run, for its first pass.
    listing: Option<std::thread::JoinHandle<Listing>>,
    last_checkpoint: Instant,
    /// The state changed since it was loaded or last saved.
    dirty: bool,
}

type Fail = (i32, String);

/// Runs the command; `Err((exit code, message))` when it cannot start.
pub fn run(cfg: RunConfig, sink: Sink) -> Result<Totals, Fail> {
    let shape = Shape {
        command: cfg.command.clone(),
        roles: cfg.roles.clone(),
        since: cfg.keep.and_then(|k| k.since),
        until: cfg.keep.and_then(|k| k.until),
        max_text: cfg.keep.and_then(|k| k.max_text),
        no_dedupe: !cfg.dedupe,
        record_format: state::RECORD_FORMAT,
    };
    // Before anything is touched: from here on SIGINT and SIGTERM stop the
    // run cleanly (a signal before this ends the process with nothing
    // written, which a re-run takes like a kill).
    let stop = Arc::new(AtomicBool::new(false));
    if cfg.state.is_some() {
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register(sig, stop.clone()).map_err(|e| (1, e.to_string()))?;
        }
    }
    let _lock = match &cfg.state {
        Some(p) => Some(state::lock(p).map_err(|e| (2, e))?),
        None => None,
    };
    // The archive is listed on another thread while the state is read and
    // decoded here: a re-run over an unchanged archive is little more than
    // these two. Not before the lock: a run that saved the state between
    // this listing and our reading of it would leave us sizes older than
    // the state's offsets, and files read again from the start.
    let (paths, jobs) = (cfg.paths.clone(), cfg.jobs);
    let listing = std::thread::spawn(move || find_files(&paths, jobs));
    let mut saved = match &cfg.state {
        Some(p) => state::load(p).map_err(|e| (1, e))?,
        None => None,
    };
    if let Some(s) = &saved {
        let diff = s.shape.differences(&shape);
        if !diff.is_empty() {
            return Err((
                2,
                format!(
                    "the state {} was written with other options ({}); use another state file",
                    cfg.state.as_ref().expect("state").display(),
                    diff.join("; ")
                ),
            ));
        }
    }
    let out = if sink == Sink::Records {
        Some(open_output(&cfg, saved.as_ref())?)
    } else {
        None
    };
    // A state of an older layout is saved in the current one at the end.
    let upgraded = saved.as_mut().is_some_and(|s| {
        std::mem::replace(&mut s.version, state::STATE_VERSION) != state::STATE_VERSION
    });
    let fresh = cfg.state.is_some() && saved.is_none();
    if fresh {
        saved = Some(State::new(shape));
    }
    let mut ctx = Ctx {
        cfg,
        state: saved,
        lineages: None,
        out,
        stop,
        listing: Some(listing),
        last_checkpoint: Instant::now(),
        dirty: fresh || upgraded,
    };
    // An output no state covers yet (a first run, or a state saved by a run
    // to stdout) is paired with the state, covering 0 bytes of it, before
    // the first byte is written: a run killed at any moment after this
    // leaves an output the next run knows for its own and cuts back.
    let pairs = ctx
        .state
        .as_ref()
        .is_some_and(|s| s.output.is_none() && matches!(ctx.out, Some(Out::File { .. })));
    if pairs {
        checkpoint(&mut ctx, None).map_err(|e| (1, e))?;
        ctx.dirty = true;
    }
    let result = passes(&mut ctx).and_then(|t| finish(&mut ctx, t));
    if result.is_err() {
        discard(ctx.out.as_ref());
        // A state this run created and that covers nothing written goes
        // too: a failed first run leaves nothing behind.
        let nothing_written = matches!(&ctx.out, Some(Out::File { len: 0, .. }));
        if fresh && nothing_written {
            if let Some(p) = &ctx.cfg.state {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    // The process ends right after: freeing the state's thousands of small
    // allocations one by one would cost a re-run about a tenth of its time.
    // The output is synced and the state saved by now; the lock goes with
    // the process.
    std::mem::forget(ctx);
    result
}

/// The passes of a run: one, or with `--follow` one after each change until
/// stopped.
fn passes(ctx: &mut Ctx) -> Result<Totals, Fail> {
    let (watcher, events) = if ctx.cfg.follow {
        watch(&ctx.cfg.paths)
    } else {
        (None, None)
    };
    let (mut read, mut written) = (0, 0);
    loop {
        let mut totals = pass(ctx)?;
        read += totals.read;
        written += totals.written;
        totals.read = read;
        totals.written = written;
        if totals.closed || !ctx.cfg.follow || ctx.stop.load(Ordering::SeqCst) {
            totals.interrupted = ctx.stop.load(Ordering::SeqCst);
            return Ok(totals);
        }
        if totals.read > 0 {
            // What this pass found goes out now, and the state with it.
            checkpoint(ctx, None).map_err(|e| (1, e))?;
        }
        // Following: wake on a file notification, or after a short poll
        // (the fallback, for file systems without notifications), which
        // keeps the latency from a line written to its record under a
        // second either way.
        let poll = if watcher.is_some() {
            Duration::from_millis(500)
        } else {
            Duration::from_millis(200)
        };
        let until = Instant::now() + poll;
        while Instant::now() < until && !ctx.stop.load(Ordering::SeqCst) {
            if let Some(rx) = &events {
                if rx.recv_timeout(Duration::from_millis(20)).is_ok() {
                    // Let a burst of writes settle, then read them at once.
                    std::thread::sleep(Duration::from_millis(5));
                    while rx.try_recv().is_ok() {}
                    break;
                }
            } else {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// After a run that failed: what it created of the output goes (the
/// temporary file of `-o` without a state; with one, an output this run
/// created and wrote nothing to).
fn discard(out: Option<&Out>) {
    if let Some(Out::File {
        tmp,
        path,
        created,
        len,
        ..
    }) = out
    {
        match tmp {
            Some(t) => {
                let _ = std::fs::remove_file(t);
            }
            None if *created && *len == 0 => {
                let _ = std::fs::remove_file(path);
            }
            None => {}
        }
    }
}

/// File notifications for the PATHs (pi's archive when none), when the
/// platform gives them.
fn watch(
    paths: &[PathBuf],
) -> (
    Option<notify::RecommendedWatcher>,
    Option<std::sync::mpsc::Receiver<()>>,
) {
    use notify::Watcher;
    // Polling alone, as on a file system without notifications (tests).
    if std::env::var_os("MEM_INGEST_FOLLOW_POLL").is_some() {
        return (None, None);
    }
    let roots = if paths.is_empty() {
        discover::default_archive()
            .map(|p| vec![p])
            .unwrap_or_default()
    } else {
        paths.to_vec()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if e.is_ok() {
            let _ = tx.send(());
        }
    });
    let Ok(mut watcher) = watcher else {
        return (None, None);
    };
    for r in &roots {
        if watcher.watch(r, notify::RecursiveMode::Recursive).is_err() {
            return (None, None);
        }
    }
    (Some(watcher), Some(rx))
}

fn finish(ctx: &mut Ctx, mut totals: Totals) -> Result<Totals, Fail> {
    if totals.closed {
        return Ok(totals);
    }
    match ctx.out.as_mut().map(Out::sync) {
        Some(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
            totals.closed = true;
            return Ok(totals);
        }
        Some(Err(e)) => return Err((1, format!("writing the output: {e}"))),
        _ => {}
    }
    // An unchanged archive leaves the state as it was: nothing to save.
    if ctx.dirty {
        checkpoint(ctx, None).map_err(|e| (1, e))?;
    }
    if let Some(Out::File {
        tmp: Some(tmp),
        path,
        ..
    }) = &ctx.out
    {
        std::fs::rename(tmp, path).map_err(|e| (1, format!("{}: {e}", path.display())))?;
    }
    totals.follow = ctx.cfg.follow;
    Ok(totals)
}

/// Opens the output. With a state, `-o` is appended to and cut back to the
/// length the state covers; without one, it is written to a temporary file
/// renamed at the end.
fn open_output(cfg: &RunConfig, saved: Option<&State>) -> Result<Out, Fail> {
    let Some(path) = &cfg.output else {
        return Ok(Out::Stdout(BufWriter::with_capacity(1 << 20, io::stdout())));
    };
    let err = |e: io::Error| (1, format!("{}: {e}", path.display()));
    if cfg.state.is_none() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let f = File::create(&tmp).map_err(|e| (1, format!("{}: {e}", tmp.display())))?;
        let w = BufWriter::with_capacity(1 << 20, f);
        return Ok(Out::File {
            w,
            len: 0,
            durable: 0,
            created: true,
            path: path.clone(),
            tmp: Some(tmp),
        });
    }
    let state_path = cfg.state.as_deref().expect("a state");
    let covered = match saved.and_then(|s| s.output.as_ref()) {
        Some(o) if Path::new(&o.path) != path.as_path() => {
            return Err((
                2,
                format!(
                    "the state pairs with the output {}, not {}: one state, one output",
                    o.path,
                    path.display()
                ),
            ))
        }
        Some(o) => Some(o.len),
        // No state, or one saved by a run to stdout: it covers nothing of
        // this output. A first run saves its state, covering an output of
        // length 0, before it writes a byte, so an output that holds bytes
        // here was never written under this state.
        None => None,
    };
    if covered.is_none() {
        refuse_uncovered(path, state_path, saved.is_some())?;
    }
    let covered = covered.unwrap_or(0);
    let created = std::fs::symlink_metadata(path).is_err();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(err)?;
    let len = f.metadata().map_err(err)?.len();
    if len < covered {
        return Err((
            1,
            format!(
                "{} holds {len} bytes but the state covers {covered}: it was changed outside mem-ingest \
                 (remove the state to start over)",
                path.display()
            ),
        ));
    }
    if len > covered {
        // The torn tail of a run that was killed before its checkpoint.
        f.set_len(covered).map_err(err)?;
        f.sync_data().map_err(err)?;
    }
    f.seek(SeekFrom::Start(covered)).map_err(err)?;
    // What the state covers was made durable before the state was saved
    // (or just now, when cut back).
    Ok(Out::File {
        w: BufWriter::with_capacity(1 << 20, f),
        len: covered,
        durable: covered,
        created,
        path: path.clone(),
        tmp: None,
    })
}

/// Refuses an output that holds bytes no state covers: they are not this
/// state's to cut, replace or append to (records of sessions pruned from
/// the archive since would be lost, silently).
fn refuse_uncovered(output: &Path, state: &Path, state_exists: bool) -> Result<(), Fail> {
    let len = match std::fs::metadata(output) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err((1, format!("{}: {e}", output.display()))),
    };
    if len == 0 {
        return Ok(());
    }
    let why = if state_exists {
        format!(
            "the state {} covers no output file (it was saved by a run that wrote to stdout)",
            state.display()
        )
    } else {
        format!(
            "the state {} does not exist, so nothing covers what it holds",
            state.display()
        )
    };
    Err((
        2,
        format!(
            "the output {} already holds {len} bytes and {why}: refusing to replace, cut or \
             append to it. To go on from an earlier run, give the state that run saved; to \
             start over on purpose, move {} away first",
            output.display(),
            output.display()
        ),
    ))
}

/// Writes the state, after making the output it covers durable.
fn checkpoint(ctx: &mut Ctx, in_progress: Option<(String, FileState)>) -> Result<(), String> {
    ctx.last_checkpoint = Instant::now();
    ctx.dirty = false;
    let (Some(path), Some(st)) = (&ctx.cfg.state, ctx.state.as_mut()) else {
        return Ok(());
    };
    if let Some(out) = ctx.out.as_mut() {
        match out.sync() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(format!("writing the output: {e}")),
        }
        if let Out::File { len, path, .. } = out {
            st.output = Some(OutputState {
                path: path.to_string_lossy().into_owned(),
                len: *len,
            });
        }
    }
    if let Some(l) = ctx.lineages.as_mut() {
        let snapshot: Vec<LineageState> = l
            .snapshot()
            .into_iter()
            .map(|(sessions, fps)| LineageState {
                sessions,
                fingerprints: state::encode_fingerprints(&fps),
            })
            .collect();
        st.set_lineages(&snapshot);
    }
    let saved = match in_progress {
        None => state::save(path, st),
        Some((key, fs)) => {
            let old = st.files.insert(key.clone(), Arc::new(fs));
            let r = state::save(path, st);
            match old {
                Some(o) => st.files.insert(key, o),
                None => st.files.remove(&key),
            };
            r
        }
    };
    saved.map_err(|e| format!("{}: {e}", path.display()))
}

fn progress(quiet: bool, total: u64) -> ProgressBar {
    if quiet || !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template(
            "{bar:40} {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
        )
        .expect("valid template"),
    );
    pb
}

/// Newline counts of the parts of large files, published by each part as
/// soon as it has read its bytes, so that the parts after it know where
/// their lines start without a second pass over the file.
#[derive(Default)]
pub(crate) struct Bases {
    counts: Mutex<HashMap<usize, u64>>,
    published: Condvar,
}

impl Bases {
    fn publish(&self, task: usize, newlines: u64) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(task, newlines);
        self.published.notify_all();
    }

    /// Lines before task `i`: its region's lines and the newlines of the
    /// parts before it, once they are all published.
    fn lines_before(&self, plan: &Plan, i: usize) -> u64 {
        let t = &plan.tasks[i];
        let base = plan.tasks[t.first_task].lines.unwrap_or(0);
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let sum: Option<u64> = (t.first_task..i).map(|j| counts.get(&j).copied()).sum();
            if let Some(sum) = sum {
                return base + sum;
            }
            counts = self
                .published
                .wait(counts)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Reads one task. A part that ends before the file does is read into
/// memory (about [`plan::PART_BYTES`]), counts its newlines for the parts
/// after it, and is parsed from there; a region too large to hold is
/// streamed through the chunked reader.
fn run_task(plan: &Plan, i: usize, cfg: &RunConfig, emit: bool, bases: &Bases) -> PartResult {
    let task = &plan.tasks[i];
    let path = &plan.files[task.file].path;
    let file = path.to_string_lossy();
    let mut res = PartResult::default();
    let len = task.end.map_or(u64::MAX, |e| e - task.start);
    let size = plan.files[task.file]
        .size()
        .saturating_sub(task.start)
        .min(len);
    if emit {
        // A buffer from earlier tasks, sized for this one's records: no
        // growth copies, no fresh pages.
        res.out = take_out_buffer(usize::try_from(size + size / 4).unwrap_or(0).min(64 << 20));
    }
    let in_memory = task.end.is_some() || size <= 2 * plan::PART_BYTES;
    let published = std::cell::Cell::new(false);
    let publish = |n: u64| {
        if task.end.is_some() && !published.replace(true) {
            bases.publish(i, n);
        }
    };
    let result = (|| -> Result<(), String> {
        let mut f = File::open(path).map_err(|e| e.to_string())?;
        if task.start > 0 {
            f.seek(SeekFrom::Start(task.start))
                .map_err(|e| e.to_string())?;
        }
        let mut f = f.take(len);
        let lines = || task.lines.unwrap_or_else(|| bases.lines_before(plan, i));
        if !in_memory {
            let src = open(
                &task.header,
                f,
                |f| PiSessionSource::from_reader_with(f, path, &cfg.opts),
                |f, h| PiSessionSource::resume(f, path, h, task.start, lines(), &cfg.opts),
            )?;
            return drain(src, &mut res, cfg, emit, &file);
        }
        // One buffer per worker thread, reused from task to task: no fresh
        // pages to fault in for every file.
        thread_local! {
            static DATA: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        DATA.with_borrow_mut(|data| {
            data.clear();
            data.reserve(usize::try_from(size).unwrap_or(0) + 1);
            let read = f.read_to_end(data).map_err(|e| e.to_string());
            publish(memchr::memchr_iter(b'\n', data).count() as u64);
            read?;
            let src = open(
                &task.header,
                &data[..],
                |d| SliceSessionSource::new(d, path, &cfg.opts),
                |d, h| SliceSessionSource::resume(d, path, h, task.start, lines(), &cfg.opts),
            );
            let drained = src.and_then(|src| drain(src, &mut res, cfg, emit, &file));
            if data.capacity() > 4 * plan::PART_BYTES as usize {
                // Keep no more than about a part between tasks.
                data.clear();
                data.shrink_to(2 * plan::PART_BYTES as usize);
            }
            drained
        })
    })();
    if let Err(e) = result {
        // Parts after a failed one must not wait for it: the file fails.
        publish(0);
        res.error = Some(e);
    }
    res
}

/// A source over `input`: from the start of a file (it reads the header),
/// or resumed after a header read before.
fn open<R, S>(
    header: &Option<Header>,
    input: R,
    fresh: impl FnOnce(R) -> Result<S, mem_ingest::Error>,
    resume: impl FnOnce(R, Header) -> S,
) -> Result<S, String> {
    match header {
        None => fresh(input).map_err(|e| e.cause()),
        Some(h) => Ok(resume(input, h.clone())),
    }
}

fn drain(
    mut src: impl RecordSource,
    res: &mut PartResult,
    cfg: &RunConfig,
    emit: bool,
    file: &str,
) -> Result<(), String> {
    let keep = cfg.keep.unwrap_or_default();
    let r = loop {
        let entry = match src.next_entry() {
            Ok(Some(e)) => e,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.cause()),
        };
        let mut out = None;
        if let (true, Some(rec)) = (emit, &entry.record) {
            let in_time = match rec.timestamp {
                Some(t) => keep.since.is_none_or(|s| t >= s) && keep.until.is_none_or(|u| t < u),
                None => keep.since.is_none() && keep.until.is_none(),
            };
            if in_time {
                let start = res.out.len();
                output::write_record(&mut res.out, rec, file, keep.max_text);
                out = Some((start, res.out.len()));
                res.kept += 1;
            }
        }
        if cfg.dedupe {
            res.notes.push(Note {
                fingerprint: entry.fingerprint,
                line: entry.line,
                byte: entry.byte,
                out,
            });
        }
    };
    res.header = src.header().cloned();
    res.report = src.report().clone();
    res.position = Some(src.position());
    r
}

/// The counts one entry adds, from reading its line again (a rare path:
/// only for a duplicate).
fn counts_of(
    mut f: &File,
    path: &Path,
    header: &Header,
    note: &Note,
    opts: &SourceOptions,
) -> Result<Report, String> {
    f.seek(SeekFrom::Start(note.byte))
        .map_err(|e| e.to_string())?;
    // A small buffer: only this line is wanted (it grows for a long one).
    let opts = opts.clone().buffer_capacity(4096);
    let mut src = PiSessionSource::resume(f, path, header.clone(), note.byte, note.line - 1, &opts);
    match src.next_entry().map_err(|e| e.cause())? {
        Some(e) if e.line == note.line => {}
        _ => return Err(format!("line {} changed while it was read", note.line)),
    }
    Ok(src.report().clone())
}

/// The file being assembled from its parts, in delivery.
struct Assembling {
    file: usize,
    report: Option<Report>,
    header: Option<Header>,
    error: Option<String>,
    parts: usize,
    position: Option<Position>,
}

/// What discovery found, or why it could not start.
type Listing = Result<discover::Found, Fail>;

/// The session files under the PATHs (pi's archive when none), folders
/// walked on up to `threads` threads.
fn find_files(paths: &[PathBuf], threads: usize) -> Listing {
    if paths.is_empty() {
        let archive = discover::default_archive().map_err(|e| (1, e))?;
        return Ok(discover::discover(&[archive], threads));
    }
    Ok(discover::discover(paths, threads))
}

/// One pass over the archive.
fn pass(ctx: &mut Ctx) -> Result<Totals, Fail> {
    let mut totals = Totals {
        stateful: ctx.state.is_some(),
        dedupe: ctx.cfg.dedupe,
        ..Totals::default()
    };
    let listing = match ctx.listing.take() {
        Some(l) => l
            .join()
            .unwrap_or_else(|_| Err((1, "listing the archive failed".to_owned()))),
        None => find_files(&ctx.cfg.paths, ctx.cfg.jobs),
    };
    let found = listing?;
    for (p, e) in &found.failures {
        totals.fail(p, 0, e.clone());
    }
    let files = found.files;
    // Never write the output over an input: one listed, or a session file
    // to the listing, which may have been taken before the output existed.
    if let Some(Out::File { path: o, .. }) = &ctx.out {
        let listed = std::fs::metadata(o).is_ok_and(|om| {
            files
                .iter()
                .any(|(_, id)| id.dev == om.dev() && id.ino == om.ino())
        });
        let inside = o.extension().is_some_and(|e| e == "jsonl") && {
            let dir = o
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            std::fs::metadata(dir).is_ok_and(|m| found.dirs.contains(&(m.dev(), m.ino())))
        };
        if listed || inside {
            return Err((
                2,
                format!("the output {} is one of the input files", o.display()),
            ));
        }
    }
    let empty = BTreeMap::new();
    let prior = ctx.state.as_ref().map_or(&empty, |s| &s.files);
    let mut opts = ctx.cfg.opts.clone();
    if ctx.state.is_some() {
        opts = opts.hold_partial_tail(true);
    }
    let plan = plan::plan(files, prior, &opts);
    if let Some(st) = ctx.state.as_mut().filter(|st| st.files.len() > plan.known) {
        // Files gone from the disk leave the state (their entries stay in
        // the lineages, so a copy elsewhere is still known).
        let found: HashSet<&Path> = plan.files.iter().map(|f| f.path.as_path()).collect();
        let before = st.files.len();
        st.files
            .retain(|p, _| found.contains(Path::new(p)) || Path::new(p).exists());
        ctx.dirty |= st.files.len() != before;
    }
    // Files by name, built when a fork first asks for its parent.
    let by_name = std::cell::OnceCell::new();
    let mut reserved: HashMap<String, FpSet> = HashMap::new();
    let emit = ctx.out.is_some();
    let pb = progress(
        ctx.cfg.quiet || ctx.cfg.follow,
        plan.tasks.iter().map(|t| task_bytes(&plan, t)).sum(),
    );
    let cfg_opts = std::mem::replace(&mut ctx.cfg.opts, opts);
    let mut current: Option<Assembling> = None;
    let mut next_file = 0usize;
    let mut failure: Option<Fail> = None;
    // Tasks run on the pool with their own copy of the configuration;
    // delivery runs in order on this thread.
    let work_cfg = ctx.cfg.clone();
    let bases = Bases::default();
    // Bytes of input in flight: a few parts per worker and 64 MiB of small
    // files; what waits to be delivered holds their records.
    let budget = 64 * (1 << 20) + 2 * plan::PART_BYTES * ctx.cfg.jobs as u64;
    exec::run_ordered(
        plan.tasks.len(),
        ctx.cfg.jobs,
        |i| task_bytes(&plan, &plan.tasks[i]),
        budget,
        |i| {
            let r = run_task(&plan, i, &work_cfg, emit, &bases);
            pb.inc(task_bytes(&plan, &plan.tasks[i]));
            r
        },
        |i, res| {
            let task = &plan.tasks[i];
            settle_files_before(&plan, task.file, &mut next_file, &mut totals);
            let going = deliver(
                ctx,
                &plan,
                task,
                res,
                &mut current,
                &mut Reserved {
                    sets: &mut reserved,
                    by_name: &by_name,
                },
                &mut totals,
            );
            match going {
                Ok(true) => !ctx.stop.load(Ordering::SeqCst),
                Ok(false) => false,
                Err(f) => {
                    failure = Some(f);
                    false
                }
            }
        },
    );
    pb.finish_and_clear();
    ctx.cfg.opts = cfg_opts;
    if let Some(f) = failure {
        return Err(f);
    }
    if !totals.closed && !ctx.stop.load(Ordering::SeqCst) {
        settle_files_before(&plan, plan.files.len(), &mut next_file, &mut totals);
    } else if let Some(a) = current.take() {
        // Stopped inside a file: the state says what was delivered of it,
        // which is what the output holds.
        if let (Some(st), Some(fs)) = (ctx.state.as_mut(), file_state(&plan.files[a.file], &a)) {
            st.files.insert(key_of(&plan.files[a.file]), Arc::new(fs));
            ctx.dirty = true;
        }
    }
    Ok(totals)
}

fn task_bytes(plan: &Plan, t: &Task) -> u64 {
    let size = plan.files[t.file].size();
    t.end.unwrap_or(size).saturating_sub(t.start)
}

fn key_of(f: &PlannedFile) -> String {
    f.path.to_string_lossy().into_owned()
}

/// Files with no task before `upto` (unchanged since the state was saved)
/// are accounted in order, from what the state says of them.
fn settle_files_before(plan: &Plan, upto: usize, next: &mut usize, totals: &mut Totals) {
    while *next < upto {
        let f = &plan.files[*next];
        if let (0, Some(p)) = (f.tasks, &f.prior) {
            totals.unchanged += 1;
            totals.file_done(&f.path, &p.report, Some(&p.header));
        }
        *next += 1;
    }
}

/// The state of a file after what was delivered of it.
fn file_state(f: &PlannedFile, a: &Assembling) -> Option<FileState> {
    if a.error.is_some() {
        return None;
    }
    let (report, header, position) = (a.report.clone()?, a.header.clone()?, a.position?);
    Some(FileState {
        identity: f.identity,
        header_digest: plan::header_digest(&header),
        header,
        offset: position.byte,
        line: position.line,
        open_line: position.open_line,
        pending: report.pending,
        report,
    })
}

/// Delivers one task's result, in task order: deduplication, output,
/// totals, state. Ok(false) to stop (closed output).
fn deliver(
    ctx: &mut Ctx,
    plan: &Plan,
    task: &Task,
    mut res: PartResult,
    current: &mut Option<Assembling>,
    reserved: &mut Reserved<'_>,
    totals: &mut Totals,
) -> Result<bool, Fail> {
    let f = &plan.files[task.file];
    ctx.dirty = true;
    let a = current.get_or_insert_with(|| Assembling {
        file: task.file,
        report: f
            .prior
            .clone()
            .filter(|_| f.mode == Mode::Resumed)
            .map(|p| p.report.clone()),
        header: f.prior.as_ref().map(|p| p.header.clone()),
        error: None,
        parts: 0,
        position: None,
    });
    a.parts += 1;
    totals.read += res.report.bytes;
    if let Some(e) = res.error.take() {
        a.error.get_or_insert(e);
    }
    if a.header.is_none() {
        a.header = res.header.clone();
    }
    let mut going = true;
    if a.error.is_none() {
        let cuts = match (ctx.cfg.dedupe, a.header.clone()) {
            (true, Some(h)) => {
                let l = lineages(&mut ctx.lineages, ctx.state.as_ref()).map_err(|e| {
                    let path = ctx.cfg.state.as_deref().unwrap_or(Path::new(""));
                    (1, format!("{}: {e}", path.display()))
                })?;
                reserved.parent_ahead(plan, task.file, &h, &ctx.cfg.opts);
                dedupe(l, reserved.sets, &f.path, &h, task, &mut res, &ctx.cfg.opts)
            }
            _ => Ok(Vec::new()),
        };
        match cuts {
            Err(e) => {
                a.error = Some(e);
            }
            Ok(cuts) => {
                if let Some(out) = ctx.out.as_mut() {
                    let mut at = 0;
                    let mut written = Ok(());
                    for (s, e) in cuts.iter().copied().chain([(res.out.len(), res.out.len())]) {
                        if written.is_ok() && s > at {
                            written = out.write(&res.out[at..s]);
                        }
                        at = e;
                    }
                    give_out_buffer(std::mem::take(&mut res.out));
                    match written {
                        Ok(()) => totals.written += res.kept - cuts.len() as u64,
                        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                            totals.closed = true;
                            going = false;
                        }
                        Err(e) => return Err((1, format!("writing the output: {e}"))),
                    }
                }
                match a.report.as_mut() {
                    Some(r) => r.merge(&res.report),
                    None => a.report = Some(res.report),
                }
                a.position = res.position;
            }
        }
    }
    if a.parts == f.tasks {
        let a = current.take().expect("set above");
        reserved
            .sets
            .remove(&a.header.as_ref().map(|h| h.id.clone()).unwrap_or_default());
        match (&a.error, &a.report) {
            (None, Some(report)) => {
                match f.mode {
                    Mode::Resumed => totals.resumed += 1,
                    Mode::Reread => totals.reread += 1,
                    _ => {}
                }
                totals.file_done(&f.path, report, a.header.as_ref());
                if let (Some(st), Some(fs)) = (ctx.state.as_mut(), file_state(f, &a)) {
                    st.files.insert(key_of(f), Arc::new(fs));
                }
            }
            (e, _) => totals.fail(&f.path, f.size(), e.clone().unwrap_or_default()),
        }
        if going && ctx.last_checkpoint.elapsed() >= ctx.cfg.checkpoint {
            checkpoint(ctx, None).map_err(|e| (1, e))?;
        }
    } else if going && ctx.last_checkpoint.elapsed() >= ctx.cfg.checkpoint {
        let fs = current.as_ref().and_then(|a| file_state(f, a));
        checkpoint(ctx, fs.map(|fs| (key_of(f), fs))).map_err(|e| (1, e))?;
    }
    Ok(going)
}

/// Drops the copies among a part's entries: returns the output ranges to
/// cut, and takes their counts out of the part's report.
fn dedupe(
    l: &mut Lineages,
    reserved: &HashMap<String, FpSet>,
    path: &Path,
    header: &Header,
    task: &Task,
    res: &mut PartResult,
    opts: &SourceOptions,
) -> Result<Vec<(usize, usize)>, String> {
    let session = header.id.as_str();
    if let Some(parent) = &header.parent_session {
        l.join(session, &session_of_path(parent));
    }
    // Entries that a session which wrote them first will emit later in
    // this run (a fork that sorts before its parent).
    let mut earlier: Vec<&FpSet> = Vec::new();
    for (s, set) in reserved {
        if s != session && l.same(s, session) {
            earlier.push(set);
        }
    }
    let dup = |l: &mut Lineages, fp: u64| {
        earlier.iter().any(|s| s.contains(fp)) || !l.insert(session, fp)
    };
    if task.header.is_none() && res.header.is_some() && dup(l, header.fingerprint) {
        // A second file of the same session (a history written twice).
        let mut h = Report::default();
        h.entries.add("session", 1);
        h.no_record = 1;
        res.report.remove_duplicate(&h);
    }
    let mut cuts = Vec::new();
    // Opened once for the part, at its first duplicate.
    let mut file: Option<File> = None;
    for note in &res.notes {
        if dup(l, note.fingerprint) {
            let f = match &file {
                Some(f) => f,
                None => file.insert(File::open(path).map_err(|e| e.to_string())?),
            };
            let counts = counts_of(f, path, header, note, opts)?;
            res.report.remove_duplicate(&counts);
            if let Some(range) = note.out {
                cuts.push(range);
            }
        }
    }
    Ok(cuts)
}

/// Fingerprints of parents that are delivered after a fork of theirs, so
/// the fork's copies are dropped and the parent's kept: read ahead, when the
/// fork is delivered, from the parent's file.
pub(crate) struct Reserved<'p> {
    sets: &'p mut HashMap<String, FpSet>,
    /// Files of the plan by file name, built on first use.
    by_name: &'p std::cell::OnceCell<HashMap<String, usize>>,
}

impl Reserved<'_> {
    /// When `header` names a parent whose file comes later in the plan,
    /// reads that file's fingerprints now.
    fn parent_ahead(&mut self, plan: &Plan, file: usize, header: &Header, opts: &SourceOptions) {
        let Some(parent) = &header.parent_session else {
            return;
        };
        let session = session_of_path(parent);
        let name = parent.rsplit(['/', '\\']).next().unwrap_or(parent);
        // pi names files `<timestamp>_<session id>.jsonl`; `parentSession`
        // is a path from the machine that wrote it, so only its file name
        // is compared.
        let by_name = self.by_name.get_or_init(|| {
            let mut by_name = HashMap::new();
            for (i, f) in plan.files.iter().enumerate() {
                let name = f.path.file_name().unwrap_or_default();
                by_name
                    .entry(name.to_string_lossy().into_owned())
                    .or_insert(i);
            }
            by_name
        });
        let Some(&j) = by_name.get(name) else {
            return;
        };
        if j <= file || plan.files[j].tasks == 0 || self.sets.contains_key(&session) {
            return;
        }
        let f = &plan.files[j];
        let mut set = FpSet::default();
        // The parent's new region, from its first task to its end, in one
        // read (line numbers do not enter fingerprints).
        if let Some(t) = plan.tasks.iter().find(|t| t.file == j) {
            if let Ok(mut fh) = File::open(&f.path) {
                let src = match &t.header {
                    None => PiSessionSource::from_reader_with(fh, &f.path, opts).ok(),
                    Some(h) => fh
                        .seek(SeekFrom::Start(t.start))
                        .ok()
                        .map(|_| PiSessionSource::resume(fh, &f.path, h.clone(), t.start, 0, opts)),
                };
                if let Some(mut src) = src {
                    if let Some(h) = src.header() {
                        set.insert(h.fingerprint);
                    }
                    while let Ok(Some(e)) = src.next_entry() {
                        set.insert(e.fingerprint);
                    }
                }
            }
        }
        self.sets.insert(session, set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stats` over `dir` on two threads, with deduplication.
    fn stats_config(dir: &Path, state: Option<&Path>) -> RunConfig {
        RunConfig {
            command: "stats".into(),
            paths: vec![dir.to_path_buf()],
            jobs: 2,
            quiet: true,
            state: state.map(Path::to_path_buf),
            dedupe: true,
            opts: SourceOptions::new(),
            keep: None,
            roles: vec![],
            output: None,
            follow: false,
            checkpoint: Duration::from_secs(5),
        }
    }

    /// A state of version 1 is read, and a run that reads nothing saves it
    /// in version 2, with the same files and lineages: the next run finds
    /// the archive unchanged and still deduplicates against them.
    #[test]
    fn a_version_1_state_is_saved_anew() {
        let d = std::env::temp_dir().join(format!("mem-ingest-upgrade-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let arch = d.join("arch");
        std::fs::create_dir_all(&arch).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl");
        std::fs::copy(&fixture, arch.join("a.jsonl")).unwrap();
        let state_path = d.join("state");
        let cfg = || stats_config(&arch, Some(&state_path));
        let first = run(cfg(), Sink::None).unwrap();
        assert_eq!(first.report.records, 22);
        let saved = state::load(&state_path).unwrap().unwrap();
        state::save_v1(&state_path, &saved);
        let version = || std::fs::read(&state_path).unwrap()[8..12].to_vec();
        assert_eq!(version(), 1u32.to_le_bytes());
        let again = run(cfg(), Sink::None).unwrap();
        assert_eq!((again.unchanged, again.report.records), (1, 22));
        assert_eq!(version(), state::STATE_VERSION.to_le_bytes());
        let upgraded = state::load(&state_path).unwrap().unwrap();
        assert_eq!(
            upgraded.lineages().unwrap().len(),
            saved.lineages().unwrap().len()
        );
        assert_eq!(
            upgraded.files.keys().collect::<Vec<_>>(),
            saved.files.keys().collect::<Vec<_>>()
        );
        // A copy of the session under another name: all of its 33 entries
        // are duplicates of what the upgraded lineages hold.
        std::fs::copy(&fixture, arch.join("b.jsonl")).unwrap();
        let copy = run(cfg(), Sink::None).unwrap();
        assert_eq!((copy.report.records, copy.report.deduplicated), (22, 33));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn file_deleted_between_discovery_and_open_fails_alone() {
        let d = std::env::temp_dir().join(format!("mem-ingest-del-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl");
        for name in ["a.jsonl", "b.jsonl", "c.jsonl"] {
            std::fs::copy(&fixture, d.join(name)).unwrap();
        }
        let cfg = stats_config(&d, None);
        let mut ctx = Ctx {
            cfg,
            state: None,
            lineages: Some(Lineages::default()),
            out: None,
            stop: Arc::new(AtomicBool::new(false)),
            listing: None,
            last_checkpoint: Instant::now(),
            dirty: false,
        };
        let mut totals = Totals::default();
        let files = find_files(&ctx.cfg.paths, 2).unwrap().files;
        let plan = plan::plan(files, &BTreeMap::new(), &ctx.cfg.opts);
        assert_eq!(plan.tasks.len(), 3);
        std::fs::remove_file(d.join("b.jsonl")).unwrap();
        let mut current = None;
        let mut sets = HashMap::new();
        let by_name = std::cell::OnceCell::new();
        for (i, task) in plan.tasks.iter().enumerate() {
            let res = run_task(&plan, i, &ctx.cfg, false, &Bases::default());
            deliver(
                &mut ctx,
                &plan,
                task,
                res,
                &mut current,
                &mut Reserved {
                    sets: &mut sets,
                    by_name: &by_name,
                },
                &mut totals,
            )
            .unwrap();
        }
        // The three copies are one session: the two read are one lineage,
        // so the second is all duplicates.
        assert_eq!((totals.files, totals.files_failed), (3, 1));
        assert_eq!(totals.report.records, 22);
        assert_eq!(totals.report.deduplicated, 33);
        assert_eq!(
            totals.failures[0].0,
            d.join("b.jsonl").display().to_string()
        );
        assert_eq!(
            totals.failures[0].1,
            "No such file or directory (os error 2)"
        );
        std::fs::remove_dir_all(d).unwrap();
    }
}
