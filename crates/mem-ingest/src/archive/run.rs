//! One run over an archive: discovery, the plan, tasks on every core, and,
//! in task order, deduplication, the sink, totals and checkpoints.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{Command, Config};
use super::dedupe::{Emitter, FpSet, Lineages};
use super::plan::{self, FoundFile, Mode, Plan, PlannedFile, Task};
use super::summary::{Reported, Summary};
use super::task::{parent_file_of, reread, run_task, ByName, PartLines, PartResult};
use super::{discover, exec};
use crate::checkpoint::model::{FileState, OutputOptions, OutputState};
use crate::checkpoint::state::{self, Checkpoint, CheckpointStore, State, StateFile};
use crate::counts::Removal;
use crate::error::{Error, ErrorKind};
use crate::format::{open_at, At, BoxedSource, Format, Input, ParentCopies};
use crate::json::LineHash;
use crate::line::Header;
use crate::record::RoleFilter;
use crate::report::Report;
use crate::sink::{Encoder, Sink};
use crate::source::{Position, SourceOptions};
use crate::usage::Responses;

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
        let l = Lineages::import(groups);
        // Without a state no checkpoint reads what changed.
        *slot = Some(if state.is_none() { l.untracked() } else { l });
    }
    Ok(slot.as_mut().expect("restored"))
}

/// Everything a run carries from pass to pass.
struct Ctx<'r, S: Sink> {
    cfg: &'r Config,
    sink: &'r mut S,
    /// The checkpoint file, when the sink keeps no checkpoint of its own.
    state_file: Option<StateFile>,
    state: Option<State>,
    /// With deduplication, once a file is read (see [`lineages`]).
    lineages: Option<Lineages>,
    /// Keys of files whose entry changed since the last checkpoint.
    changed: BTreeSet<String>,
    /// The listing of the archive started with the run, for its first pass.
    listing: Option<std::thread::JoinHandle<Listing>>,
    /// When the checkpoint chose fewer formats than the listing was made
    /// with: each of the listing's formats as an index into this run's.
    listed_formats: Option<Vec<Option<usize>>>,
    last_checkpoint: Instant,
    /// The state changed since it was loaded or last saved.
    dirty: bool,
    /// The sink was handed a record.
    wrote: bool,
    /// Usage by response across the archive, restored from the state.
    responses: Responses,
    /// The skipped lines of each file (by key) in the checkpoint the run
    /// started from, where it has any: reported by an earlier run (a
    /// file read again from the start loses its entry).
    reported: HashMap<String, Reported>,
    /// The agents this run added to the checkpoint's (`--agent` naming
    /// agents it did not read).
    added_agents: Vec<&'static str>,
}

impl<S: Sink> Ctx<'_, S> {
    fn store(&mut self) -> Option<&mut dyn CheckpointStore> {
        match self.state_file.as_mut() {
            Some(f) => Some(f),
            None => self.sink.checkpoints(),
        }
    }

    /// The path errors about the checkpoint name (a state file's, a
    /// store's).
    fn state_path(&mut self) -> PathBuf {
        self.checkpoint_place().1
    }

    /// What holds the checkpoint (`state`, `store`) and its path, for
    /// errors.
    fn checkpoint_place(&mut self) -> (&'static str, PathBuf) {
        match self.store() {
            Some(s) => {
                let (what, path) = s.describe();
                (what, path.to_path_buf())
            }
            None => ("state", PathBuf::new()),
        }
    }

    /// Puts what was delivered of the file `f` ([`file_state`]) in the
    /// state, when there is one and something was.
    fn keep_delivered(&mut self, f: &PlannedFile, a: &Assembling) {
        let format = &*self.cfg.formats[f.format];
        // Not built without a state (a clone of the file's report and
        // header for each file of a `stats` run).
        let Some(st) = self.state.as_mut() else {
            return;
        };
        if let Some(fs) = file_state(f, format, a) {
            let key = key_of(f);
            self.changed.insert(key.clone());
            st.files.insert(key, Arc::new(fs));
            self.dirty = true;
        }
    }
}

/// Runs `command`; an error when the run cannot start or its sink or
/// checkpoint fails.
pub(crate) fn run<S: Sink>(cfg: &Config, command: Command, sink: &mut S) -> Result<Summary, Error> {
    if cfg.state.is_some() || cfg.follow || sink.checkpoints().is_some() {
        discover::refuse_streams(&cfg.paths)?;
    }
    cfg.streams
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    if cfg.state.is_some() && sink.checkpoints().is_some() {
        return Err(Error::new(
            cfg.state.as_deref().unwrap_or(Path::new("")),
            ErrorKind::Setup("this sink keeps its own checkpoint: it takes no state file".into()),
        ));
    }
    let state_file = cfg.state.as_ref().map(StateFile::open).transpose()?;
    // The archive is listed on another thread while the state is read and
    // decoded here: a re-run over an unchanged archive is little more than
    // these two. Not before the lock: a run that saved the state between
    // this listing and our reading of it would leave us sizes older than
    // the state's offsets, and files read again from the start.
    let listing = {
        let cfg = cfg.clone();
        std::thread::spawn(move || find_files(&cfg))
    };
    // The formats the checkpoint chooses, when it does: declared before
    // the run's context, which borrows it.
    let adopted: Config;
    // The checkpoint's line hash, when it is not the run's (likewise).
    let hashed: Config;
    // The checkpoint's agents and the new ones --agent names (likewise).
    let widened: Config;
    let mut ctx = Ctx {
        cfg,
        sink,
        state_file,
        state: None,
        lineages: None,
        changed: BTreeSet::new(),
        listing: Some(listing),
        listed_formats: None,
        last_checkpoint: Instant::now(),
        dirty: false,
        wrote: false,
        responses: Responses::default(),
        reported: HashMap::new(),
        added_agents: Vec::new(),
    };
    let stateful = ctx.store().is_some();
    let mut saved = match ctx.store() {
        Some(store) => store.load()?,
        None => None,
    };
    if let Some(s) = &mut saved {
        let known: Vec<&str> = cfg.formats.iter().map(|f| f.name()).collect();
        s.options
            .recorded_sources(s.files.values().map(|f| &**f), &known);
    }
    if !cfg.formats_from_checkpoint {
        if let Some(s) = &mut saved {
            let widen = widen_formats(cfg, &s.options.sources);
            let (what, path) = ctx.checkpoint_place();
            let widen = widen.map_err(|e| {
                Error::new(
                    &path,
                    ErrorKind::OptionsChanged {
                        what,
                        differences: vec![e],
                    },
                )
            })?;
            if let Some((c, added)) = widen {
                widened = c;
                ctx.cfg = &widened;
                // Listed with fewer formats: listed again by the pass.
                ctx.listing = None;
                s.options.sources = widened
                    .formats
                    .iter()
                    .map(|f| f.name().to_owned())
                    .collect();
                ctx.added_agents = added;
            }
        }
    }
    if cfg.formats_from_checkpoint {
        if let Some(s) = &saved {
            let (what, path) = ctx.checkpoint_place();
            if let Some((c, map)) = adopt_formats(cfg, &s.options.sources, what).map_err(|e| {
                Error::new(
                    &path,
                    ErrorKind::OptionsChanged {
                        what,
                        differences: vec![e],
                    },
                )
            })? {
                adopted = c;
                ctx.cfg = &adopted;
                ctx.listed_formats = Some(map);
            }
        }
    }
    // The fingerprints the checkpoint holds (or the store, without one)
    // were made with its line hash: the run's must be made the same way
    // to meet them.
    let recorded = match &saved {
        Some(s) => Some(LineHash::from_id(s.options.line_hash).ok_or_else(|| {
            Error::new(
                &ctx.state_path(),
                ErrorKind::StateDamaged(format!(
                    "damaged state (line hash {}: this mem-ingest knows {} and {})",
                    s.options.line_hash,
                    LineHash::Serial.id(),
                    LineHash::Wide.id()
                )),
            )
        })?),
        None => ctx.store().and_then(|s| s.line_hash()),
    };
    if let Some(hash) = recorded {
        if hash != ctx.cfg.opts.line_hash_scheme() {
            let mut c = ctx.cfg.clone();
            c.opts = c.opts.line_hash(hash);
            hashed = c;
            ctx.cfg = &hashed;
        }
    }
    let shape = output_options(ctx.cfg, command);
    if let Some(s) = &saved {
        let (what, path) = ctx.checkpoint_place();
        let differences = s.options.differences(&shape, what);
        if !differences.is_empty() {
            return Err(Error::new(
                &path,
                ErrorKind::OptionsChanged { what, differences },
            ));
        }
    }
    if stateful {
        let mark = saved
            .as_ref()
            .and_then(|s| s.output.as_ref())
            .map(OutputState::mark);
        ctx.sink.resume_at(mark.as_ref(), saved.is_some())?;
    }
    // A state of an older layout is saved in the current one at the end.
    let upgraded = saved.as_mut().is_some_and(|s| {
        std::mem::replace(&mut s.version, state::STATE_VERSION) != state::STATE_VERSION
    });
    if let Some(s) = &saved {
        let kept = s
            .responses()
            .map_err(|e| Error::new(&ctx.state_path(), ErrorKind::StateDamaged(e)))?;
        ctx.responses = Responses::from_kept(kept);
    }
    if let Some(s) = &saved {
        ctx.reported = s
            .files
            .iter()
            .filter(|(_, f)| f.report.skipped > 0)
            .map(|(k, f)| (k.clone(), (f.report.skipped, f.report.skips.len())))
            .collect();
    }
    let fresh = stateful && saved.is_none();
    if fresh {
        saved = Some(State::new(shape));
    }
    ctx.state = saved;
    ctx.dirty = fresh || upgraded || !ctx.added_agents.is_empty();
    // An output no checkpoint covers yet (a first run, or a state saved by
    // a run to stdout) is paired with the checkpoint, covering 0 bytes of
    // it, before the first byte is written: a run killed at any moment
    // after this leaves an output the next run knows for its own and cuts
    // back.
    let pairs =
        ctx.sink.pairs_with_checkpoint() && ctx.state.as_ref().is_some_and(|s| s.output.is_none());
    let result = (|| {
        if pairs {
            checkpoint(&mut ctx, None)?;
            ctx.dirty = true;
        }
        passes(&mut ctx).and_then(|t| finish(&mut ctx, t))
    })();
    if result.is_err() {
        ctx.sink.abandon();
        // A checkpoint this run created and that covers nothing written
        // goes too: a failed first run leaves nothing behind.
        if fresh && !ctx.wrote {
            if let Some(store) = ctx.store() {
                store.abandon_new();
            }
        }
    }
    // Freeing the state's thousands of small allocations one by one would
    // cost a re-run about a tenth of its time: they go on a thread of their
    // own, which a process that exits right after does not wait for.
    // So do the usage table's (a Claude Code archive's responses).
    let (st, l) = (ctx.state.take(), ctx.lineages.take());
    let rs = std::mem::take(&mut ctx.responses);
    if st.is_some() || l.is_some() || !rs.kept().is_empty() {
        let _ = std::thread::Builder::new().spawn(move || drop((st, l, rs)));
    }
    result
}

/// The options of a run that shape its output, as a checkpoint records them.
fn output_options(cfg: &Config, command: Command) -> OutputOptions {
    OutputOptions {
        command: match command {
            Command::Backfill => "backfill",
            Command::Stats => "stats",
        }
        .to_owned(),
        roles: cfg.roles.clone(),
        since: cfg.filter.since,
        until: cfg.filter.until,
        max_text: cfg.filter.max_text,
        no_dedupe: !cfg.dedupe,
        record_format: state::RECORD_FORMAT,
        sources: cfg.formats.iter().map(|f| f.name().to_owned()).collect(),
        shard: cfg.shard,
        line_hash: cfg.opts.line_hash_scheme().id(),
        links: cfg.links,
    }
}

/// The formats of a run whose `--agent` names agents that the checkpoint
/// (which records `sources`) did not read: the checkpoint's agents and
/// the run's together, in the registry's order (a format not in the
/// registry after those), and the names added. None when the run names
/// no new agent (the same agents, or fewer: refused as another option).
///
/// # Errors
/// The checkpoint names an agent this build does not know.
fn widen_formats(
    cfg: &Config,
    sources: &[String],
) -> Result<Option<(Config, Vec<&'static str>)>, String> {
    let added: Vec<&'static str> = cfg
        .formats
        .iter()
        .map(|f| f.name())
        .filter(|n| !sources.iter().any(|s| s == n))
        .collect();
    if added.is_empty() {
        return Ok(None);
    }
    let mut c = cfg.clone();
    for s in sources {
        if c.formats.iter().any(|f| f.name() == s) {
            continue;
        }
        let f = crate::formats::by_name(s).ok_or_else(|| {
            format!(
                "--agent: the checkpoint has {}, and this mem-ingest does not read {s}",
                sources.join(",")
            )
        })?;
        c.formats.push(f);
    }
    let registry: Vec<&'static str> = crate::formats::builtin().iter().map(|f| f.name()).collect();
    c.formats.sort_by_key(|f| {
        registry
            .iter()
            .position(|n| *n == f.name())
            .unwrap_or(usize::MAX)
    });
    Ok(Some((c, added)))
}

/// A run's configuration with fewer formats, and each format of the
/// configuration it came from as an index into its own.
type Adopted = (Config, Vec<Option<usize>>);

/// The formats of `cfg` a checkpoint that records `sources` chooses: None
/// when it chooses all of them, else the run's configuration with those
/// alone (in `cfg`'s order) and each of `cfg`'s formats as an index into
/// them.
///
/// # Errors
/// The checkpoint names a format `cfg` cannot read: why, naming it
/// (`what`: `state`, `store`).
fn adopt_formats(cfg: &Config, sources: &[String], what: &str) -> Result<Option<Adopted>, String> {
    let names: Vec<&str> = cfg.formats.iter().map(|f| f.name()).collect();
    if let Some(s) = sources.iter().find(|s| !names.contains(&s.as_str())) {
        return Err(format!(
            "--agent: {what} has {}, this run reads {} (no {s})",
            sources.join(","),
            names.join(",")
        ));
    }
    if names.iter().all(|n| sources.iter().any(|s| s == n)) {
        return Ok(None);
    }
    let mut c = cfg.clone();
    c.formats.clear();
    let mut map = Vec::with_capacity(names.len());
    for (f, n) in cfg.formats.iter().zip(&names) {
        if sources.iter().any(|s| s == n) {
            map.push(Some(c.formats.len()));
            c.formats.push(f.clone());
        } else {
            map.push(None);
        }
    }
    Ok(Some((c, map)))
}

/// The listing made with more formats than the run reads (see
/// [`adopt_formats`]), brought to the run's: a file of a default archive
/// of a format not read goes; a file under a PATH stays when one of the
/// run's formats claims its name (it is detected among them later).
fn relist(cfg: &Config, map: &[Option<usize>], listed: Listed) -> Listing {
    if cfg.paths.is_empty() {
        // No archive of the formats read: the error a run of them alone
        // gives, naming every place tried.
        roots(cfg)?;
    }
    let Listed { found, files } = listed;
    let files = files
        .into_iter()
        .filter_map(|(path, id, f)| match f {
            UNDETECTED if cfg.formats.iter().any(|f| f.is_session_file(&path)) => {
                Some((path, id, f))
            }
            UNDETECTED => None,
            f => map[f].map(|i| (path, id, i)),
        })
        .collect();
    Ok(Listed { found, files })
}

/// Decides the format of each file found under a PATH (see
/// [`crate::format::detect_format`]): a file the checkpoint holds, the
/// same file and not shrunk, keeps the format it was read in, without
/// being opened; the others are detected from their first bytes, on up to
/// `--jobs` threads.
/// Detecting every file of an unchanged archive of thousands was most of
/// a re-run.
fn detect_formats(
    cfg: &Config,
    prior: &BTreeMap<String, Arc<FileState>>,
    mut files: Vec<FoundFile>,
) -> Vec<FoundFile> {
    let known = |path: &Path, id: &crate::checkpoint::stamp::Identity| {
        // The same file, not shrunk below what was read: unchanged, or
        // grown (a live session, every pass of --follow).
        let p = plan::entry(prior, path)
            .filter(|p| plan::same_file(p, id) && id.size >= p.offset + p.pending)?;
        cfg.formats.iter().position(|f| f.name() == p.format)
    };
    let mut todo: Vec<&mut FoundFile> = Vec::new();
    for f in files.iter_mut().filter(|f| f.2 == UNDETECTED) {
        match known(&f.0, &f.1) {
            Some(i) => f.2 = i,
            None if cfg.formats.len() == 1 => f.2 = 0,
            None => todo.push(f),
        }
    }
    let detect = |f: &mut &mut FoundFile| f.2 = detect_format(cfg, &f.0);
    let pool = (cfg.jobs > 1 && todo.len() > 1)
        .then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(cfg.jobs)
                .build()
                .ok()
        })
        .flatten();
    match pool {
        Some(pool) => pool.install(|| {
            use rayon::iter::{IntoParallelRefMutIterator, ParallelIterator};
            todo.par_iter_mut().for_each(detect)
        }),
        None => todo.iter_mut().for_each(detect),
    }
    files.retain(|f| f.2 != OTHER_AGENT);
    files
}

/// What [`detect_format`] says of a file of an agent the run does not
/// read: it is left out of the run (neither read nor recorded).
const OTHER_AGENT: usize = usize::MAX - 1;

/// Whether a file with these first bytes is another agent's than the
/// run's: when the run reads fewer of the registry's agents than this
/// build knows (an `--agent`, or a checkpoint recording fewer), and none
/// but the registry's (a library's own format decides its files itself),
/// the first of the registry's formats that detects it is one the run
/// does not read. So a
/// Qwen Code file under a PATH is not read as Claude Code's (whose
/// detection takes any line with a `sessionId`) by a run of a checkpoint
/// that records the agents read before Qwen Code was one of them.
fn another_agents(cfg: &Config, prefix: &[u8], whole: bool) -> bool {
    let registry = crate::formats::builtin();
    let reads = |name: &str| cfg.formats.iter().any(|f| f.name() == name);
    let own = |f: &Arc<dyn Format>| registry.iter().any(|r| r.name() == f.name());
    if registry.iter().all(|f| reads(f.name())) || !cfg.formats.iter().all(own) {
        return false;
    }
    registry
        .iter()
        .find(|f| f.detect(prefix, whole))
        .is_some_and(|f| !reads(f.name()))
}

/// [`crate::format::detect_format`], but a pipe's first bytes, read once,
/// are kept with it for the task that reads it ([`super::config::Streams`]).
fn detect_format(cfg: &Config, path: &Path) -> usize {
    use crate::format::{detect_in, detect_prefix};
    let Ok(mut f) = File::open(path) else {
        return crate::format::detect_format(&cfg.formats, path);
    };
    let (prefix, whole) = detect_prefix(&mut f);
    let format = if another_agents(cfg, &prefix, whole) {
        OTHER_AGENT
    } else {
        detect_in(&cfg.formats, &prefix, whole, path)
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        let mut streams = cfg.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.push((path.to_path_buf(), f, prefix));
    }
    format
}

/// The passes of a run: one, or when following one after each change until
/// stopped.
fn passes<S: Sink>(ctx: &mut Ctx<'_, S>) -> Result<Summary, Error> {
    let (watcher, events) = if ctx.cfg.follow && !ctx.cfg.poll_only {
        watch(ctx.cfg)
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
        if totals.closed || !ctx.cfg.follow || ctx.cfg.stop.load(Ordering::SeqCst) {
            totals.interrupted = ctx.cfg.stop.load(Ordering::SeqCst);
            if let Some(p) = ctx.cfg.progress.as_ref().filter(|_| ctx.cfg.follow) {
                p.finish();
            }
            return Ok(totals);
        }
        if totals.read > 0 {
            // What this pass found goes out now, and the state with it.
            checkpoint(ctx, None)?;
        }
        if let Some(p) = &ctx.cfg.progress {
            p.following(totals.files, written);
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
        while Instant::now() < until && !ctx.cfg.stop.load(Ordering::SeqCst) {
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
        if ctx.cfg.stop.load(Ordering::SeqCst) {
            // Stopped while waiting: the last pass, whole, is the run's
            // account (a pass begun now would stop at its first file and
            // count none of the others).
            if let Some(p) = &ctx.cfg.progress {
                p.finish();
            }
            totals.interrupted = true;
            return Ok(totals);
        }
    }
}

/// File notifications for the PATHs (the formats' archives when none),
/// when the platform gives them.
fn watch(
    cfg: &Config,
) -> (
    Option<notify::RecommendedWatcher>,
    Option<std::sync::mpsc::Receiver<()>>,
) {
    use notify::Watcher;
    let roots = roots(cfg).unwrap_or_default();
    let (tx, rx) = std::sync::mpsc::channel();
    let watcher = notify::recommended_watcher(move |e: notify::Result<notify::Event>| {
        if e.is_ok() {
            let _ = tx.send(());
        }
    });
    let Ok(mut watcher) = watcher else {
        return (None, None);
    };
    for (r, _) in &roots {
        if watcher.watch(r, notify::RecursiveMode::Recursive).is_err() {
            return (None, None);
        }
    }
    (Some(watcher), Some(rx))
}

fn finish<S: Sink>(ctx: &mut Ctx<'_, S>, mut totals: Summary) -> Result<Summary, Error> {
    if totals.closed {
        return Ok(totals);
    }
    ctx.sink.sync()?;
    if ctx.sink.closed() {
        totals.closed = true;
        return Ok(totals);
    }
    // An unchanged archive leaves the state as it was: nothing to save.
    if ctx.dirty {
        checkpoint(ctx, None)?;
    }
    ctx.sink.finish()?;
    totals.follow = ctx.cfg.follow;
    totals.added_agents = ctx.added_agents.clone();
    Ok(totals)
}

/// Saves a checkpoint, after the sink made the output it covers durable.
/// `in_progress` is the entry of a file delivered in part, saved with this
/// checkpoint only.
fn checkpoint<S: Sink>(
    ctx: &mut Ctx<'_, S>,
    in_progress: Option<(String, FileState)>,
) -> Result<(), Error> {
    ctx.last_checkpoint = Instant::now();
    ctx.dirty = false;
    if ctx.state.is_none() {
        return Ok(());
    }
    let mark = ctx.sink.sync()?;
    if ctx.sink.closed() {
        return Ok(());
    }
    let st = ctx.state.as_mut().expect("checked");
    if let Some(m) = mark {
        st.output = Some(OutputState::of(m));
    }
    let key = in_progress.as_ref().map(|(k, _)| k.clone());
    let old = in_progress.map(|(k, fs)| {
        ctx.changed.insert(k.clone());
        st.files.insert(k, Arc::new(fs))
    });
    let Ctx {
        state,
        lineages,
        changed,
        state_file,
        sink,
        responses,
        ..
    } = ctx;
    let st = state.as_mut().expect("checked");
    let mut cp = Checkpoint {
        state: st,
        lineages: lineages.as_mut(),
        changed,
        responses,
    };
    let saved = match state_file.as_mut() {
        Some(f) => f.save(&mut cp),
        None => match sink.checkpoints() {
            Some(store) => store.save(&mut cp),
            None => Ok(()),
        },
    };
    if let (Some(k), Some(old)) = (&key, old) {
        match old {
            Some(o) => st.files.insert(k.clone(), o),
            None => st.files.remove(k),
        };
    }
    saved?;
    changed.clear();
    responses.saved();
    if let Some(l) = lineages.as_mut() {
        l.saved();
    }
    // The store holds the in-progress entry; the state here the one before
    // it: the next checkpoint sends it again.
    if let Some(k) = key {
        changed.insert(k);
    }
    Ok(())
}

/// The file being assembled from its parts, in delivery.
struct Assembling {
    file: usize,
    /// The running context after the last part delivered.
    context: Vec<u8>,
    report: Option<Report>,
    header: Option<Header>,
    error: Option<String>,
    parts: usize,
    position: Option<Position>,
    /// A child's lines that are its parent's under other bytes, found by
    /// its first part, for every part.
    copies: ParentCopies,
    /// A task of it handed parts over ([`Handing`]).
    handed: bool,
}

/// Whether the file being assembled had parts handed over.
fn a_handed(current: &Option<Assembling>) -> bool {
    current.as_ref().is_some_and(|a| a.handed)
}

/// What discovery found, or why it could not start.
type Listing = Result<Listed, Error>;

/// The format of a file found under a PATH, before [`detect_formats`]
/// decides it.
const UNDETECTED: usize = usize::MAX;

/// The PATHs, or the formats' default archives when none, each default
/// archive with the index of its format.
pub(super) fn roots(cfg: &Config) -> Result<Vec<(PathBuf, Option<usize>)>, Error> {
    if !cfg.paths.is_empty() {
        return Ok(cfg.paths.iter().map(|p| (p.clone(), None)).collect());
    }
    let mut roots = Vec::new();
    let mut tried = Vec::new();
    for (i, f) in cfg.formats.iter().enumerate() {
        match f.default_archives() {
            Ok(p) => roots.extend(p.into_iter().map(|p| (p, Some(i)))),
            Err(e) => tried.push(e),
        }
    }
    if roots.is_empty() {
        return Err(Error::new(
            Path::new(""),
            ErrorKind::NoArchive(tried.join("; ")),
        ));
    }
    Ok(roots)
}

/// What discovery found, each file with its format.
struct Listed {
    found: discover::Found,
    files: Vec<FoundFile>,
}

/// The session files under the PATHs (the formats' archives when none),
/// folders walked on up to `--jobs` threads. A file in a format's default
/// archive is that format's (when it claims the file's name); a file under
/// a PATH is [`UNDETECTED`] until [`detect_formats`] decides it.
fn find_files(cfg: &Config) -> Listing {
    let roots = roots(cfg)?;
    let formats = cfg.formats.clone();
    let wanted: discover::Wanted =
        Arc::new(move |p: &Path| formats.iter().any(|f| f.is_session_file(p)));
    let paths: Vec<PathBuf> = roots.iter().map(|(p, _)| p.clone()).collect();
    let mut found = discover::discover(&paths, cfg.jobs, &wanted, cfg.links);
    let files = std::mem::take(&mut found.files)
        .into_iter()
        .filter_map(|(path, id)| {
            let default = roots
                .iter()
                .find_map(|(root, f)| f.filter(|_| path.starts_with(root)));
            let format = match default {
                Some(i) if cfg.formats[i].is_session_file(&path) => i,
                Some(_) => return None,
                None => UNDETECTED,
            };
            Some((path, id, format))
        })
        .collect();
    Ok(Listed { found, files })
}

/// One pass over the archive.
fn pass<S: Sink>(ctx: &mut Ctx<'_, S>) -> Result<Summary, Error> {
    let mut totals = Summary::of_pass(&ctx.cfg.formats, ctx.state.is_some(), ctx.cfg.dedupe);
    let listing = match ctx.listing.take() {
        Some(l) => l.join().unwrap_or_else(|_| {
            Err(Error::new(
                Path::new(""),
                ErrorKind::Setup("listing the archive failed".to_owned()),
            ))
        }),
        None => find_files(ctx.cfg),
    };
    let listing = match ctx.listed_formats.take() {
        Some(map) => listing.and_then(|l| relist(ctx.cfg, &map, l)),
        None => listing,
    };
    let Listed { found, files } = listing?;
    for (p, e) in &found.failures {
        totals.fail(p, 0, e.clone(), None);
    }
    forget_forks_of_gone_parents(ctx, &files);
    if let Some(o) = ctx.sink.output_file() {
        refuse_output_among_inputs(o, &files, &found.dirs, &ctx.cfg.formats)?;
    }
    let empty = BTreeMap::new();
    let prior = ctx.state.as_ref().map_or(&empty, |s| &s.files);
    let files = detect_formats(ctx.cfg, prior, files);
    // Sources that can keep each entry's counts do, so that a copy's
    // counts are taken out without reading its line again.
    let mut opts = ctx.cfg.opts.clone().count_entries(ctx.cfg.dedupe);
    if ctx.state.is_some() {
        opts = opts.hold_partial_tail(true);
    }
    if !ctx.sink.encoder().wants_records() {
        // Records are counted, never built: no text is flattened, no tool
        // call written back as JSON (`stats`).
        opts = opts.roles(RoleFilter::NONE);
    }
    if ctx.sink.encoder().takes_raw_text(crate::seal::Crate)
        && ctx.cfg.filter.max_text.is_none()
        && ctx
            .cfg
            .formats
            .iter()
            .all(|f| f.honours_raw_text(crate::seal::Crate))
    {
        // The NDJSON writer alone reads each text, through its line: a pi
        // line is parsed lean and its record's text built escaped, from
        // the line's strings as written where they are what the writer
        // writes (nearly all), and copied (a cut text, `--max-text`, needs
        // it decoded).
        opts = opts.raw_text(true);
    }
    let mut shard_roots = None;
    let files = match ctx.cfg.shard {
        Some(s) => {
            let empty = BTreeMap::new();
            let recorded = ctx.state.as_ref().map_or(&empty, |st| &st.shard_roots);
            let (files, roots) = super::plan::select_shard(
                files,
                prior,
                recorded,
                &opts,
                &ctx.cfg.formats,
                s,
                ctx.cfg.jobs,
            );
            shard_roots = Some(roots);
            files
        }
        None => files,
    };
    let plan = plan::plan(files, prior, &opts, ctx.cfg.jobs, &ctx.cfg.formats);
    settle_pending_forks(ctx, &plan);
    if let Some(roots) = shard_roots {
        if let Some(st) = ctx.state.as_mut().filter(|st| st.shard_roots != roots) {
            st.shard_roots = roots;
            ctx.dirty = true;
        }
    }
    sweep_gone(ctx, &plan);
    // Files by name, built when a child first asks for its parent.
    let by_name = ByName::new();
    let mut reserved: HashMap<String, FpSet> = HashMap::new();
    let mut parent_file = HashMap::new();
    let progress = ctx.cfg.progress.as_deref().filter(|_| !ctx.cfg.follow);
    if let Some(p) = progress {
        p.start(plan.tasks.iter().map(|t| task_bytes(&plan, t)).sum());
    }
    let mut current: Option<Assembling> = None;
    let mut next_file = 0usize;
    let mut failure: Option<Error> = None;
    let bases = PartLines::default();
    // Bytes of input in flight: a few parts per worker and 64 MiB of small
    // files; what waits to be delivered holds their records.
    let budget = 64 * (1 << 20) + 2 * plan::PART_BYTES * ctx.cfg.jobs as u64;
    let cfg = ctx.cfg;
    // The workers share an encoder of their own while delivery holds the
    // context.
    let encoder = ctx.sink.encoder();
    // Parts of a long read are handed over as it reads (bounded memory),
    // except where a run stopped while it does would emit them again:
    // with a checkpoint and no deduplication (the stop waits for its
    // end; a run killed meanwhile cuts its output back to the last
    // checkpoint, before them; a file failing after them is read again).
    let hand_over = cfg.dedupe || ctx.state.is_none();
    let work = |i: usize, emit: &mut dyn FnMut(PartResult<_>) -> bool| {
        let emit = hand_over.then_some(emit);
        let r = run_task(&plan, i, cfg, &opts, &encoder, &bases, &by_name, emit);
        if let Some(p) = progress {
            p.advance(task_bytes(&plan, &plan.tasks[i]));
        }
        r
    };
    // (`deliver` inside is the function of that name.)
    let deliver_task = |i: usize, res| {
        let task = &plan.tasks[i];
        settle_files_before(
            &plan,
            &cfg.formats,
            task.file,
            &mut next_file,
            &mut totals,
            &ctx.reported,
        );
        let going = deliver(
            ctx,
            &plan,
            task,
            res,
            &mut current,
            &mut ParentsAhead {
                sets: &mut reserved,
                parent_file: &mut parent_file,
                by_name: &by_name,
            },
            &opts,
            &mut totals,
        );
        match going {
            // A stop waits for the end of a file handing its parts over.
            Ok(true) => !cfg.stop.load(Ordering::SeqCst) || a_handed(&current),
            Ok(false) => false,
            Err(f) => {
                failure = Some(f);
                false
            }
        }
    };
    // One job and nothing to write: each task delivered where it ran.
    if cfg.jobs <= 1 && !encoder.wants_records() {
        exec::run_inline(plan.tasks.len(), work, deliver_task);
    } else {
        exec::run_ordered(
            plan.tasks.len(),
            cfg.jobs,
            |i| task_bytes(&plan, &plan.tasks[i]),
            budget,
            work,
            deliver_task,
        );
    }
    if let Some(p) = progress {
        p.finish();
    }
    if let Some(f) = failure {
        return Err(f);
    }
    if !totals.closed {
        // The unchanged files need no reading: counted from the state
        // whether or not the run was stopped (a stop while a `--follow`
        // pass planned counted none of them).
        settle_files_before(
            &plan,
            &ctx.cfg.formats,
            plan.files.len(),
            &mut next_file,
            &mut totals,
            &ctx.reported,
        );
    }
    if !totals.closed && !cfg.stop.load(Ordering::SeqCst) {
        totals.add_responses(&ctx.responses);
    } else if let Some(a) = current.take() {
        // Stopped inside a file: the state says what was delivered of it,
        // which is what the output holds.
        ctx.keep_delivered(&plan.files[a.file], &a);
    }
    Ok(totals)
}

/// Never write the output over an input: one listed, or a session file to
/// the listing (in a folder it walked), which may have been taken before
/// the output existed.
fn refuse_output_among_inputs(
    o: &Path,
    files: &[FoundFile],
    dirs: &discover::Seen,
    formats: &[Arc<dyn Format>],
) -> Result<(), Error> {
    let listed = std::fs::metadata(o).is_ok_and(|om| {
        files
            .iter()
            .any(|(_, id, _)| (id.dev, id.ino) == crate::sys::file_id(&om))
    });
    let inside = formats.iter().any(|f| f.is_session_file(o)) && {
        let dir = o
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::metadata(dir).is_ok_and(|m| dirs.contains(&crate::sys::file_id(&m)))
    };
    if listed || inside {
        return Err(Error::new(o, ErrorKind::OutputIsInput));
    }
    Ok(())
}

/// Forks that a run which stopped before their read-ahead parent was
/// delivered left waiting for it, when that parent is not found now: they
/// leave the state, to be read again (their entries that were emitted are
/// copies then, the ones they left to the parent theirs to emit).
fn forget_forks_of_gone_parents<S: Sink>(ctx: &mut Ctx<'_, S>, files: &[FoundFile]) {
    let Some(st) = ctx.state.as_mut().filter(|st| !st.pending_forks.is_empty()) else {
        return;
    };
    let listed: HashSet<&Path> = files.iter().map(|(p, ..)| p.as_path()).collect();
    let gone: Vec<String> = st
        .pending_forks
        .keys()
        .filter(|k| !listed.contains(Path::new(k.as_str())))
        .cloned()
        .collect();
    for parent in gone {
        for fork in st.pending_forks.remove(&parent).unwrap_or_default() {
            if st.files.remove(&fork).is_some() {
                ctx.changed.insert(fork);
            }
        }
        ctx.dirty = true;
    }
}

/// The forks still waiting for a parent (see
/// [`forget_forks_of_gone_parents`]) keep waiting only for one this run
/// reads, as the run's own read-ahead adds them: if that parent fails,
/// they are read again at the next run. A parent with nothing to read was
/// delivered: its forks wait no more.
fn settle_pending_forks<S: Sink>(ctx: &mut Ctx<'_, S>, plan: &Plan) {
    let Some(st) = ctx.state.as_mut().filter(|st| !st.pending_forks.is_empty()) else {
        return;
    };
    let reading: HashSet<String> = plan
        .files
        .iter()
        .filter(|f| f.tasks > 0)
        .map(key_of)
        .collect();
    let before = st.pending_forks.len();
    st.pending_forks
        .retain(|parent, _| reading.contains(parent));
    ctx.dirty |= st.pending_forks.len() != before;
}

/// Files gone from the disk leave the state (their entries stay in the
/// lineages, so a copy elsewhere is still known). Only when the state has
/// entries the listing did not match.
fn sweep_gone<S: Sink>(ctx: &mut Ctx<'_, S>, plan: &Plan) {
    let Some(st) = ctx.state.as_mut().filter(|st| st.files.len() > plan.known) else {
        return;
    };
    let found: HashSet<&Path> = plan.files.iter().map(|f| f.path.as_path()).collect();
    let before = st.files.len();
    let changed = &mut ctx.changed;
    st.files.retain(|p, _| {
        let keep = found.contains(Path::new(p)) || Path::new(p).exists();
        if !keep {
            changed.insert(p.clone());
        }
        keep
    });
    ctx.dirty |= st.files.len() != before;
}

fn task_bytes(plan: &Plan, t: &Task) -> u64 {
    let size = plan.files[t.file].size();
    t.end.unwrap_or(size).saturating_sub(t.start)
}

/// A file's key in the checkpoint: its path's spelling
/// ([`crate::path_text`]), distinct for every path.
fn key_of(f: &PlannedFile) -> String {
    crate::path_text::spell(&f.path).into_owned()
}

/// Files with no task before `upto` (unchanged since the state was saved)
/// are accounted in order, from what the state says of them.
fn settle_files_before(
    plan: &Plan,
    formats: &[Arc<dyn Format>],
    upto: usize,
    next: &mut usize,
    totals: &mut Summary,
    reported: &HashMap<String, Reported>,
) {
    while *next < upto {
        let f = &plan.files[*next];
        if let (0, Some(p)) = (f.tasks, &f.prior) {
            totals.unchanged += 1;
            let r = reported.get(&key_of(f)).copied().unwrap_or_default();
            totals.file_done(
                &f.path,
                &p.report,
                Some(&p.header),
                &*formats[f.format],
                &p.context,
                r,
            );
        }
        *next += 1;
    }
}

/// The state of a file after what was delivered of it: its parts up to
/// the first that failed, if one did (a failed part delivers nothing, and
/// neither do the parts after it), so that a re-run resumes where what the
/// output holds of it ends. None when nothing of it was delivered.
fn file_state(f: &PlannedFile, format: &dyn Format, a: &Assembling) -> Option<FileState> {
    let (report, header, position) = (a.report.clone()?, a.header.clone()?, a.position?);
    Some(FileState {
        identity: f.identity,
        format: format.name().to_owned(),
        context: a.context.clone(),
        header_digest: crate::checkpoint::stamp::header_digest(&header),
        header,
        offset: position.byte,
        line: position.line,
        open_line: position.open_line,
        pending: report.pending,
        report,
    })
}

/// Delivers one task's result, in task order: deduplication, the sink,
/// totals, state. Ok(false) to stop (the sink's reader is gone).
#[allow(clippy::too_many_arguments)]
fn deliver<S: Sink>(
    ctx: &mut Ctx<'_, S>,
    plan: &Plan,
    task: &Task,
    mut res: PartResult<<S::Encoder as Encoder>::Batch>,
    current: &mut Option<Assembling>,
    ahead: &mut ParentsAhead<'_>,
    opts: &SourceOptions,
    totals: &mut Summary,
) -> Result<bool, Error> {
    let f = &plan.files[task.file];
    ctx.dirty = true;
    let a = current.get_or_insert_with(|| Assembling {
        file: task.file,
        context: Vec::new(),
        report: f
            .prior
            .clone()
            .filter(|_| f.mode == Mode::Resumed)
            .map(|p| p.report.clone()),
        header: f.prior.as_ref().map(|p| p.header.clone()),
        error: None,
        parts: 0,
        position: None,
        copies: ParentCopies::default(),
        handed: false,
    });
    // A part handed over before its task's end is not one of the file's
    // tasks.
    let partial = res.partial;
    if partial {
        a.handed = true;
    } else {
        a.parts += 1;
    }
    totals.read += res.report.bytes;
    if let Some(e) = res.error.take() {
        a.error.get_or_insert(e);
    }
    if a.header.is_none() {
        a.header = res.header.clone();
    }
    let mut going = true;
    if a.error.is_none() {
        let dropped = match (ctx.cfg.dedupe, a.header.clone()) {
            (true, Some(h)) => {
                let state_path = ctx.state_path();
                let l = lineages(&mut ctx.lineages, ctx.state.as_ref())
                    .map_err(|e| Error::new(&state_path, ErrorKind::StateDamaged(e)))?;
                let format = &*ctx.cfg.formats[f.format];
                ahead.read(plan, task.file, format, &h, ctx.cfg, opts);
                if !res.copies.is_empty() {
                    a.copies = std::mem::take(&mut res.copies);
                }
                let part = Delivered {
                    format,
                    path: &f.path,
                    header: &h,
                    task,
                    res: &mut res,
                    opts,
                    copies: &a.copies,
                };
                dedupe(l, ahead.sets, part)
            }
            _ => Ok((Vec::new(), Vec::new())),
        };
        match dropped {
            Err(e) => {
                a.error = Some(e);
            }
            Ok((dropped, relied)) => {
                for parent in relied {
                    // Saved with the fork's entry: were the run to stop
                    // before the parent is delivered, the next one still
                    // knows. Without a state there is nothing to read again.
                    let j = ahead.parent_file.get(&parent);
                    if let (Some(&j), Some(st)) = (j, ctx.state.as_mut()) {
                        let key = key_of(f);
                        let forks = st.pending_forks.entry(key_of(&plan.files[j])).or_default();
                        if !forks.contains(&key) {
                            forks.push(key);
                        }
                    }
                }
                if let Some(batch) = res.batch.take() {
                    let kept = res.kept - dropped.len();
                    ctx.wrote |= kept > 0;
                    if ctx.sink.write(batch, &dropped)? {
                        totals.written += kept as u64;
                    } else {
                        totals.closed = true;
                        going = false;
                    }
                }
                // In delivery order: the table does not depend on --jobs.
                for r in res.report.responses.drain(..) {
                    ctx.responses.add(r);
                }
                match a.report.as_mut() {
                    Some(r) => r.merge(&res.report),
                    None => a.report = Some(res.report),
                }
                if !partial {
                    a.position = res.position;
                    a.context = std::mem::take(&mut res.context);
                }
            }
        }
    }
    if a.parts == f.tasks {
        let a = current.take().expect("set above");
        file_delivered(ctx, f, a, ahead, totals);
        if going && ctx.last_checkpoint.elapsed() >= ctx.cfg.checkpoint {
            checkpoint(ctx, None)?;
        }
    } else if going && !a_handed(current) && ctx.last_checkpoint.elapsed() >= ctx.cfg.checkpoint {
        // Not while a task hands its parts over: what they wrote is after
        // the position saved, and a run stopped now reads them again
        // (the output cut back to the checkpoint's end).
        let format = &*ctx.cfg.formats[f.format];
        let fs = current.as_ref().and_then(|a| file_state(f, format, a));
        checkpoint(ctx, fs.map(|fs| (key_of(f), fs)))?;
    }
    Ok(going)
}

/// The last part of a file was delivered: its totals, and its entry in the
/// state.
fn file_delivered<S: Sink>(
    ctx: &mut Ctx<'_, S>,
    f: &PlannedFile,
    a: Assembling,
    ahead: &mut ParentsAhead<'_>,
    totals: &mut Summary,
) {
    let format = &*ctx.cfg.formats[f.format];
    // Forks that dropped copies of this file's entries for it to emit.
    let forks = ctx
        .state
        .as_mut()
        .and_then(|st| st.pending_forks.remove(&key_of(f)));
    ctx.dirty |= forks.is_some();
    ahead.sets.remove(
        &a.header
            .as_ref()
            .map(|h| format.lineage(&h.id))
            .unwrap_or_default(),
    );
    // What was delivered of it is in the output, also when a later part
    // failed: the state moves past it, else a re-run would emit it again.
    ctx.keep_delivered(f, &a);
    match (&a.error, &a.report) {
        (None, Some(report)) => {
            let key = key_of(f);
            match f.mode {
                Mode::Resumed => totals.resumed += 1,
                Mode::Reread => {
                    totals.reread += 1;
                    ctx.reported.remove(&key);
                }
                _ => {}
            }
            // A new file (or one new to this run) reported nothing before.
            let reported = match f.mode {
                Mode::New => None,
                _ => ctx.reported.get(&key).copied(),
            };
            totals.file_done(
                &f.path,
                report,
                a.header.as_ref(),
                format,
                &a.context,
                reported.unwrap_or_default(),
            );
        }
        (e, _) => {
            // Forks delivered before it dropped copies of its entries for it
            // to emit, which it did not: they are read again at the next run
            // (their entries that were emitted are copies then, the others
            // theirs to emit, were this file gone by then).
            if let Some(st) = ctx.state.as_mut() {
                for key in forks.unwrap_or_default() {
                    if st.files.remove(&key).is_some() {
                        ctx.changed.insert(key);
                        ctx.dirty = true;
                    }
                }
            }
            totals.fail(
                &f.path,
                f.size(),
                e.clone().unwrap_or_default(),
                Some(format.name()),
            );
        }
    }
}

/// A part being delivered, as [`dedupe`] sees it.
struct Delivered<'a, B> {
    format: &'a dyn Format,
    path: &'a Path,
    header: &'a Header,
    task: &'a Task,
    res: &'a mut PartResult<B>,
    opts: &'a SourceOptions,
    /// Its lines that are its parent's under other bytes.
    copies: &'a ParentCopies,
}

/// Decides which of a part's entries are copies: returns the indices of
/// their records in the batch, and the read-ahead parents (their lineage
/// ids) that made any a copy; takes their counts out of the part's report.
fn dedupe<B>(
    l: &mut Lineages,
    ahead: &HashMap<String, FpSet>,
    part: Delivered<'_, B>,
) -> Result<(Vec<usize>, Vec<String>), String> {
    let (format, header) = (part.format, part.header);
    let session = format.lineage(&header.id);
    let session = session.as_str();
    if let Some(parent) = format.parent(header) {
        l.join(session, &parent);
    }
    // Entries that a session which wrote them first will emit later in
    // this run (a fork that sorts before its parent).
    let mut earlier: Vec<(&str, &FpSet)> = Vec::new();
    for (s, set) in ahead {
        if s != session && l.same(s, session) {
            earlier.push((s, set));
        }
    }
    // What this part adds to its lineage: taken back if the part fails
    // below (it then delivers nothing; were they kept, its entries would be
    // copies of themselves when it is read again, and lost).
    let mut inserted = Vec::with_capacity(part.res.notes.len());
    let mut relied = Vec::new();
    let decided = decide_copies(
        l.emitter(session),
        &earlier,
        &mut inserted,
        &mut relied,
        part,
    );
    if decided.is_err() {
        l.forget(session, &inserted);
    }
    decided.map(|d| (d, relied))
}

/// [`dedupe`]'s decisions, each fingerprint new to the lineage recorded
/// in `emitted` and listed in `inserted`, each read-ahead parent that made
/// an entry a copy listed in `relied`.
fn decide_copies<B>(
    mut emitted: Emitter<'_>,
    earlier: &[(&str, &FpSet)],
    inserted: &mut Vec<u64>,
    relied: &mut Vec<String>,
    part: Delivered<'_, B>,
) -> Result<Vec<usize>, String> {
    let Delivered {
        format,
        path,
        header,
        task,
        res,
        opts,
        copies,
    } = part;
    emitted.expect(res.notes.len());
    // Whether `fp` was emitted in the lineage (or is a read-ahead
    // parent's); when not and `record`, it is now.
    let mut seen = |fp: u64, record: bool| {
        if let Some((parent, _)) = earlier.iter().find(|(_, s)| s.contains(fp)) {
            if !relied.iter().any(|r| r == parent) {
                relied.push((*parent).to_owned());
            }
            return true;
        }
        if !record {
            return emitted.contains(fp);
        }
        let new = emitted.insert(fp);
        if new {
            inserted.push(fp);
        }
        !new
    };
    if format.header_is_entry()
        && task.header.is_none()
        && res.header.is_some()
        && seen(header.fingerprint, true)
    {
        // A second file of the same session (a history written twice).
        let mut h = Report::default();
        h.entries.add("session", 1);
        h.no_record = 1;
        res.report.remove_duplicate(&h);
    }
    let mut dropped = Vec::new();
    // Opened once for the part, at its first duplicate.
    let file: std::cell::OnceCell<File> = std::cell::OnceCell::new();
    // A run of duplicates that are consecutive entries (a fork's or a
    // subagent's replayed prefix) is read again by one source: its counts
    // so far, and how many entries they are. Only for formats with a
    // running context (Codex, whose usage has no cost): others take each
    // entry's counts out alone, so that sums of costs round as they did.
    let batch = format.needs_running_context();
    let mut run: Option<(BoxedSource<'_>, u64)> = None;
    let flush = |run: &mut Option<(BoxedSource<'_>, u64)>, report: &mut Report| {
        if let Some((src, n)) = run.take() {
            report.remove_duplicate(src.report());
            report.deduplicated += n - 1;
        }
    };
    // Copies whose counts their source kept, taken out at once at the end.
    let mut removal = Removal::default();
    // The parent's lines (ascending, as the notes are).
    let (mut replayed, mut left) = (
        copies.replayed.iter().peekable(),
        copies.left_to_parent.iter().peekable(),
    );
    for note in &res.notes {
        let copy = if copies.is_empty() {
            seen(note.fingerprint, true)
        } else {
            while replayed.next_if(|(l, _)| *l < note.line).is_some() {}
            while left.next_if(|l| **l < note.line).is_some() {}
            if left.next_if(|l| **l == note.line).is_some() {
                true
            } else {
                match replayed.next_if(|(l, _)| *l == note.line) {
                    // A copy of the parent's line, when that one is known.
                    Some(&(_, parent)) => seen(parent, false) || seen(note.fingerprint, true),
                    None => seen(note.fingerprint, true),
                }
            }
        };
        if !copy {
            flush(&mut run, &mut res.report);
            continue;
        }
        if let Some(i) = note.record {
            dropped.push(i);
        }
        if let Some(c) = &note.counts {
            flush(&mut run, &mut res.report);
            removal.add(c);
            continue;
        }
        if let Some((src, n)) = run.as_mut() {
            // The entries of the part are consecutive: the next one read
            // is this one, unless the file changed.
            match src.next_entry().map_err(|e| e.cause())? {
                Some(e) if e.line == note.line => {
                    *n += 1;
                    continue;
                }
                _ => return Err(format!("line {} changed while it was read", note.line)),
            }
        }
        if file.get().is_none() {
            let _ = file.set(File::open(path).map_err(|e| e.to_string())?);
        }
        let f = file.get().expect("opened above");
        run = Some((reread(f, format, path, header, note, opts)?, 1));
        if !batch {
            flush(&mut run, &mut res.report);
        }
    }
    flush(&mut run, &mut res.report);
    removal.apply(&mut res.report);
    Ok(dropped)
}

/// Fingerprints of parents that are delivered after a fork of theirs, so
/// the fork's copies are dropped and the parent's kept: read ahead, when the
/// fork is delivered, from the parent's file.
struct ParentsAhead<'p> {
    sets: &'p mut HashMap<String, FpSet>,
    /// Each read-ahead set's parent, by its plan file index.
    parent_file: &'p mut HashMap<String, usize>,
    /// Files of the plan by the name a parent is found by.
    by_name: &'p ByName,
}

impl ParentsAhead<'_> {
    /// When `header` names a parent whose file comes later in the plan,
    /// reads that file's fingerprints now.
    fn read(
        &mut self,
        plan: &Plan,
        file: usize,
        format: &dyn Format,
        header: &Header,
        cfg: &Config,
        opts: &SourceOptions,
    ) {
        let Some(session) = format.parent(header) else {
            return;
        };
        let Some(j) = parent_file_of(plan, self.by_name, file, header, &cfg.formats) else {
            return;
        };
        if j <= file || plan.files[j].tasks == 0 || self.sets.contains_key(&session) {
            return;
        }
        let f = &plan.files[j];
        let mut set = FpSet::default();
        // The parent's new region, from its first task to its end, in one
        // read (line numbers do not enter fingerprints).
        let parent_format = &*cfg.formats[f.format];
        if let Some(t) = plan.tasks.iter().find(|t| t.file == j) {
            if let Ok(fh) = File::open(&f.path) {
                let fh = Arc::new(fh);
                let opts = &opts.clone().read_again_from(&fh);
                let mut fh = &*fh;
                let at = At {
                    header: t.header.as_ref(),
                    context: &t.context,
                    byte: t.start,
                    lines_before: 0,
                };
                let src = fh.seek(SeekFrom::Start(t.start)).ok().and_then(|_| {
                    open_at(
                        parent_format,
                        Input::Reader(Box::new(fh)),
                        &f.path,
                        at,
                        opts,
                    )
                    .ok()
                });
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
        self.parent_file.insert(session.clone(), j);
        self.sets.insert(session, set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::Archive;
    use crate::sink::Discard;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl")
    }

    /// A new archive folder (`arch`, in a folder of its own) holding
    /// hand-built.jsonl as a.jsonl and `more` fixtures as b.jsonl, c.jsonl,
    /// ..., and stats of it on two jobs with a state (`state`), following
    /// links as the runs that saved states of layouts before 10 did (the
    /// folder holds none).
    fn upgrade_setup(tag: &str, more: &[&str]) -> (PathBuf, PathBuf, PathBuf, Archive) {
        let d = std::env::temp_dir().join(format!("mem-ingest-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let arch = d.join("arch");
        std::fs::create_dir_all(&arch).unwrap();
        std::fs::copy(fixture(), arch.join("a.jsonl")).unwrap();
        for (name, to) in more.iter().zip(["b", "c", "d"]) {
            let from = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures")
                .join(name);
            std::fs::copy(from, arch.join(format!("{to}.jsonl"))).unwrap();
        }
        let state_path = d.join("state");
        let archive = Archive::builder()
            .path(&arch)
            .jobs(2)
            .state(&state_path)
            .links(crate::archive::Links::Follow)
            .build();
        (d, arch, state_path, archive)
    }

    /// A state of version 1 is read, and a run that reads nothing saves it
    /// in version 2, with the same files and lineages: the next run finds
    /// the archive unchanged and still deduplicates against them.
    #[test]
    fn a_version_1_state_is_saved_anew() {
        let (d, arch, state_path, archive) = upgrade_setup("upgrade", &[]);
        let first = archive.stats().unwrap();
        assert_eq!(first.report.records, 22);
        let saved = state::load(&state_path).unwrap().unwrap();
        state::save_v1(&state_path, &saved);
        let version = || std::fs::read(&state_path).unwrap()[8..12].to_vec();
        assert_eq!(version(), 1u32.to_le_bytes());
        let again = archive.stats().unwrap();
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
        std::fs::copy(fixture(), arch.join("b.jsonl")).unwrap();
        let copy = archive.stats().unwrap();
        assert_eq!((copy.report.records, copy.report.deduplicated), (22, 33));
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A state of version 2 (the layout before this one) is upgraded
    /// without reading grown files from the start: a file that grew since
    /// is resumed where the old state stopped.
    #[test]
    fn a_version_2_state_upgrades_without_reading_again() {
        let (d, arch, state_path, archive) = upgrade_setup("up2", &["pi-1x.jsonl"]);
        let first = archive.stats().unwrap();
        assert_eq!(first.report.records, 22 + 626);
        let saved = state::load(&state_path).unwrap().unwrap();
        state::save_v2(&state_path, &saved);
        assert_eq!(
            std::fs::read(&state_path).unwrap()[8..12],
            2u32.to_le_bytes()
        );
        let line = r#"{"type":"message","id":"new-1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"more","timestamp":1767225600000}}"#;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(arch.join("a.jsonl"))
            .unwrap();
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
        let again = archive.stats().unwrap();
        assert_eq!(
            (again.resumed, again.reread, again.unchanged),
            (1, 0, 1),
            "the grown file is resumed"
        );
        assert_eq!(
            again.read,
            line.len() as u64 + 1,
            "only the new line is read"
        );
        assert_eq!(again.report.records, 22 + 626 + 1);
        assert_eq!(
            std::fs::read(&state_path).unwrap()[8..12],
            state::STATE_VERSION.to_le_bytes()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A state of version 3 is upgraded to version 4 without reading grown
    /// files from the start, and saved anew with (no) responses.
    #[test]
    fn a_version_3_state_upgrades_without_reading_again() {
        let (d, arch, state_path, archive) = upgrade_setup("up3", &[]);
        let first = archive.stats().unwrap();
        let saved = state::load(&state_path).unwrap().unwrap();
        state::save_v3(&state_path, &saved);
        assert_eq!(
            std::fs::read(&state_path).unwrap()[8..12],
            3u32.to_le_bytes()
        );
        let line = r#"{"type":"message","id":"new-1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"more","timestamp":1767225600000}}"#;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(arch.join("a.jsonl"))
            .unwrap();
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
        let again = archive.stats().unwrap();
        assert_eq!(
            (again.resumed, again.reread),
            (1, 0),
            "the grown file is resumed"
        );
        assert_eq!(
            again.read,
            line.len() as u64 + 1,
            "only the new line is read"
        );
        assert_eq!(again.report.records, first.report.records + 1);
        assert_eq!(again.report.usage, first.report.usage);
        assert_eq!(
            std::fs::read(&state_path).unwrap()[8..12],
            state::STATE_VERSION.to_le_bytes()
        );
        let upgraded = state::load(&state_path).unwrap().unwrap();
        assert_eq!(upgraded.responses().unwrap(), vec![]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A Claude Code line of response `m`/`r` with these output tokens.
    fn claude_line(uuid: &str, m: &str, r: &str, sidechain: bool, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","uuid":"{uuid}","isSidechain":{sidechain},"sessionId":"s1","cwd":"/w","requestId":"{r}","timestamp":"2026-01-01T00:00:02Z","message":{{"id":"{m}","role":"assistant","model":"claude-x","stop_reason":null,"content":[{{"type":"text","text":"t"}}],"usage":{{"input_tokens":10,"output_tokens":{output},"cache_read_input_tokens":100}}}}}}"#
        ) + "\n"
    }

    /// Usage counts once per response across runs with a state: the
    /// provisional line read first is replaced by the final one read in the
    /// next run, a sidechain replay (another file, a new request id) is not
    /// counted, and the totals are a fresh run's, whatever the jobs.
    #[test]
    fn claude_usage_counts_once_per_response_across_runs() {
        let d = std::env::temp_dir().join(format!("mem-ingest-ccu-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let proj = d.join("projects/p");
        std::fs::create_dir_all(proj.join("s1/subagents")).unwrap();
        let main = proj.join("s1.jsonl");
        std::fs::write(&main, claude_line("a1", "m1", "r1", false, 2)).unwrap();
        let claude: Vec<Arc<dyn Format>> = vec![Arc::new(crate::formats::claude::Claude)];
        let build = |jobs: usize, state: Option<&Path>| {
            let b = Archive::builder()
                .path(d.join("projects"))
                .formats(claude.clone())
                .jobs(jobs);
            match state {
                Some(s) => b.state(s).build(),
                None => b.build(),
            }
        };
        let state_path = d.join("state");
        let first = build(2, Some(&state_path)).stats().unwrap();
        assert_eq!(first.report.usage.total_tokens, 112);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&main)
            .unwrap();
        std::io::Write::write_all(&mut f, claude_line("a2", "m1", "r1", false, 40).as_bytes())
            .unwrap();
        std::io::Write::write_all(&mut f, claude_line("a3", "m2", "r2", false, 5).as_bytes())
            .unwrap();
        std::fs::write(
            proj.join("s1/subagents/agent-x.jsonl"),
            claude_line("b1", "m1", "r9", true, 90),
        )
        .unwrap();
        let second = build(1, Some(&state_path)).stats().unwrap();
        // m1 with its final usage (10 + 40 + 100), m2 (10 + 5 + 100).
        assert_eq!(second.report.usage.total_tokens, 150 + 115);
        let third = build(2, Some(&state_path)).stats().unwrap();
        assert_eq!(third.unchanged, 2);
        for jobs in [1, 3] {
            let fresh = build(jobs, None).stats().unwrap();
            for s in [&second, &third] {
                assert_eq!(fresh.report.usage, s.report.usage);
                assert_eq!(fresh.report.by_model, s.report.by_model);
            }
        }
        let m = &third.to_stats().by_model;
        assert_eq!(
            (m.len(), m[0].model.as_str(), m[0].messages),
            (1, "claude-x", 2)
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn file_deleted_between_discovery_and_open_fails_alone() {
        let d = std::env::temp_dir().join(format!("mem-ingest-del-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        for name in ["a.jsonl", "b.jsonl", "c.jsonl"] {
            std::fs::copy(fixture(), d.join(name)).unwrap();
        }
        let archive = Archive::builder().path(&d).jobs(2).build();
        let mut sink = Discard;
        let mut ctx = Ctx {
            cfg: &archive.cfg,
            sink: &mut sink,
            state_file: None,
            state: None,
            lineages: Some(Lineages::default()),
            changed: BTreeSet::new(),
            listing: None,
            last_checkpoint: Instant::now(),
            dirty: false,
            wrote: false,
            responses: Responses::default(),
            listed_formats: None,
            reported: HashMap::new(),
            added_agents: Vec::new(),
        };
        let mut totals = Summary::default();
        let files = detect_formats(
            ctx.cfg,
            &BTreeMap::new(),
            find_files(ctx.cfg).unwrap().files,
        );
        let opts = SourceOptions::new();
        let plan = plan::plan(files, &BTreeMap::new(), &opts, 2, &ctx.cfg.formats);
        assert_eq!(plan.tasks.len(), 3);
        std::fs::remove_file(d.join("b.jsonl")).unwrap();
        let mut current = None;
        let mut sets = HashMap::new();
        let by_name = ByName::new();
        let encoder = ctx.sink.encoder();
        for (i, task) in plan.tasks.iter().enumerate() {
            let res = run_task(
                &plan,
                i,
                ctx.cfg,
                &opts,
                &encoder,
                &PartLines::default(),
                &by_name,
                None,
            );
            deliver(
                &mut ctx,
                &plan,
                task,
                res,
                &mut current,
                &mut ParentsAhead {
                    sets: &mut sets,
                    parent_file: &mut HashMap::new(),
                    by_name: &by_name,
                },
                &opts,
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
