//! One run over an archive: its passes (one, or with `--follow` one after
//! each change), and in each the listing ([`super::listing`]), the plan,
//! tasks on every core and, in task order, their delivery
//! ([`super::deliver`]) and checkpoints ([`super::ctx`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{Command, Config};
use super::ctx::{a_handed, checkpoint, key_of, Assembling, Ctx};
use super::dedupe::FpSet;
use super::deliver::{deliver, ParentsAhead};
use super::listing::{
    adopt_formats, detect_formats, find_files, relist, roots, widen_formats, Listed,
};
use super::plan::{self, FoundFile, Plan, Task};
use super::summary::{Keep, Reported, Summary};
use super::task::{run_task, ByName, PartLines, PartResult};
use super::{discover, exec};
use crate::checkpoint::model::{OutputOptions, OutputState};
use crate::checkpoint::state::{self, State, StateFile};
use crate::error::{Error, ErrorKind};
use crate::format::Format;
use crate::json::LineHash;
use crate::record::RoleFilter;
use crate::sink::{Encoder, Sink};
use crate::usage::Responses;

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
                    "damaged state (line hash {}: this mem-ingest knows {}, {} and {})",
                    s.options.line_hash,
                    LineHash::Serial.id(),
                    LineHash::Wide.id(),
                    LineHash::Xxh3.id()
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
    // A checkpoint saved before redaction was recorded covers records
    // written unredacted: the run goes on unredacted (the output stays of
    // one kind; services keep running), and says so.
    let unredacted: Config;
    let legacy =
        command == Command::Backfill && saved.as_ref().is_some_and(|s| s.options.redact.is_none());
    if legacy && ctx.cfg.redact {
        let mut c = ctx.cfg.clone();
        c.redact = false;
        unredacted = c;
        ctx.cfg = &unredacted;
    }
    let mut shape = output_options(ctx.cfg, command);
    if legacy {
        // Still of before: every run over it says so.
        shape.redact = None;
    }
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
        let mark = saved.as_ref().and_then(|s| {
            let mut m = s.output.as_ref().map(OutputState::mark)?;
            m.usage = s.usage_mark();
            Some(m)
        });
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
    let pairs = ctx.sink.pairs_with_checkpoint()
        && ctx
            .state
            .as_ref()
            .is_some_and(|s| s.output.is_none() || ctx.sink.unpaired());
    let mut reread = None;
    let result = (|| {
        if pairs {
            checkpoint(&mut ctx, None)?;
            ctx.dirty = true;
        }
        if command == Command::Backfill {
            reread = reread_usage(&mut ctx, fresh)?;
        }
        passes(&mut ctx).and_then(|t| finish(&mut ctx, t))
    })()
    .map(|mut t| {
        t.unredacted_checkpoint = legacy && cfg.redact;
        t.usage_reread = reread.take();
        t
    });
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

/// One pass of a usage re-read ([`super::reread`]): the files its
/// configuration covers, no checkpoint, nothing written.
pub(super) fn reread_pass(cfg: &Config) -> Result<Summary, Error> {
    let mut sink = crate::sink::Discard;
    let mut ctx = Ctx {
        cfg,
        sink: &mut sink,
        state_file: None,
        state: None,
        lineages: None,
        changed: BTreeSet::new(),
        listing: None,
        listed_formats: None,
        last_checkpoint: Instant::now(),
        dirty: false,
        wrote: false,
        responses: Responses::default(),
        reported: HashMap::new(),
        added_agents: Vec::new(),
    };
    pass(&mut ctx)
}

/// A store made before it kept usage rows: what its checkpoint covers read
/// again for them, written to it in a transaction of their own, before
/// the run goes on ([`super::reread`]). None when the store needs none, or
/// a stop stopped it (the next run does it).
fn reread_usage<S: Sink>(
    ctx: &mut Ctx<'_, S>,
    fresh: bool,
) -> Result<Option<super::UsageReread>, Error> {
    let pending = match ctx.sink.checkpoints() {
        Some(store) => store.usage_reread_pending()?,
        None => false,
    };
    if !pending || !ctx.sink.wants_usage() {
        return Ok(None);
    }
    let kept_rows = match ctx.sink.checkpoints() {
        Some(store) => store.usage_rows_before_reread()?,
        None => false,
    };
    let kept = match (kept_rows, fresh) {
        (true, false) => {
            let state_path = ctx.state_path();
            Some(
                super::ctx::lineages(&mut ctx.lineages, ctx.state.as_ref())
                    .map_err(|e| Error::new(&state_path, ErrorKind::StateDamaged(e)))?,
            )
        }
        _ => None,
    };
    let done = match ctx.state.as_ref().filter(|_| !fresh) {
        Some(st) => {
            let started = Instant::now();
            let (cfg, out) = super::reread::prepare(ctx.cfg, st, kept);
            let summary = reread_pass(&cfg)?;
            if ctx.cfg.stop.load(Ordering::SeqCst) {
                // Stopped: the next run reads again.
                return Ok(None);
            }
            super::reread::rows(out, summary, st, ctx.responses.kept(), started)
        }
        // Nothing read before: nothing to read again.
        None => super::UsageReread::default(),
    };
    let mut done = done;
    if let Some(store) = ctx.sink.checkpoints() {
        store.save_reread_usage(&done)?;
    }
    if fresh {
        return Ok(None);
    }
    // The rows are the store's now; the summary says how many.
    done.written = (done.rows.len() + done.responses.len()) as u64;
    done.rows = Vec::new();
    done.responses = Vec::new();
    Ok(Some(done))
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
        // `stats` builds no text: nothing to record.
        redact: match command {
            Command::Backfill => Some(cfg.redact),
            Command::Stats => None,
        },
    }
}

/// The passes of a run: one, or when following one after each change until
/// stopped.
fn passes<S: Sink>(ctx: &mut Ctx<'_, S>) -> Result<Summary, Error> {
    let (watcher, events) = if ctx.cfg.follow && !ctx.cfg.poll_only {
        watch(ctx.cfg)
    } else {
        (None, None)
    };
    let (mut read, mut written, mut updated) = (0, 0, 0);
    let mut redactions = BTreeMap::new();
    loop {
        let mut totals = pass(ctx)?;
        read += totals.read;
        written += totals.written;
        updated += totals.updated;
        totals.read = read;
        totals.written = written;
        totals.updated = updated;
        for (rule, n) in std::mem::take(&mut totals.redactions) {
            *redactions.entry(rule).or_insert(0) += n;
        }
        totals.redactions = redactions.clone();
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
    if ctx.state.is_none() {
        // Without a checkpoint, the responses' rows go once, at the end.
        super::ctx::hand_response_usage(ctx)?;
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

/// One pass over the archive.
fn pass<S: Sink>(ctx: &mut Ctx<'_, S>) -> Result<Summary, Error> {
    let keep = match &ctx.cfg.costs {
        _ if ctx.cfg.opts.usage_rows => Keep::Rows,
        Some(prices) => Keep::Costs(Arc::clone(prices)),
        None => Keep::Nothing,
    };
    let mut totals = Summary::of_pass(&ctx.cfg.formats, ctx.state.is_some(), ctx.cfg.dedupe, keep);
    let listing = match (&ctx.cfg.cover, ctx.listing.take()) {
        // A usage re-read: the files a checkpoint covers, no listing.
        (Some(c), _) => Ok(Listed {
            found: discover::Found::default(),
            files: c.files.clone(),
        }),
        (None, Some(l)) => l.join().unwrap_or_else(|_| {
            Err(Error::new(
                Path::new(""),
                ErrorKind::Setup("listing the archive failed".to_owned()),
            ))
        }),
        (None, None) => find_files(ctx.cfg),
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
    let mut opts = ctx
        .cfg
        .opts
        .clone()
        .count_entries(ctx.cfg.dedupe)
        .jobs(ctx.cfg.jobs);
    // A database holding many lineages reads its shard's rows itself.
    opts.shard = ctx.cfg.shard.map(|s| (s.k, s.n));
    if ctx.state.is_some() {
        opts = opts.hold_partial_tail(true);
    } else {
        // No checkpoint: no running context is saved (a document's item
        // versions and content hash are not taken).
        opts = opts.checkpointed(false);
    }
    if ctx.sink.wants_usage() || ctx.cfg.costs.is_some() {
        // A row per response counted, handed to the sink with its part,
        // or priced for the stats.
        opts = opts.usage_rows(true);
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
    let mut plan = plan::plan(files, prior, &opts, ctx.cfg.jobs, &ctx.cfg.formats);
    if ctx.cfg.cover.is_some() {
        // A usage re-read reads each file to where its checkpoint stopped
        // (its planned size), not to its end as it is then.
        for t in &mut plan.tasks {
            t.end = t.end.or(Some(plan.files[t.file].identity.size));
        }
    }
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
    // Bytes of input in flight: a few parts per worker and 64 MiB of small
    // files; what waits to be delivered holds their records.
    let budget = 64 * (1 << 20) + 2 * plan::PART_BYTES * ctx.cfg.jobs as u64;
    let (spans, early) = spans(&plan, ctx.cfg.jobs, budget);
    let bases = PartLines::with_followed(followed(&spans));
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
            |i| spans[i],
            &early,
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
        if cfg.cover.is_some() {
            totals.kept_responses = ctx.responses.kept().to_vec();
        }
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

/// How many tasks from each run on the worker that takes it, one after
/// the other (see [`exec::run_ordered`]): 1 but for the first part of a
/// file read in parts whose parts all run as one span; and the spans
/// taken before the others (`early`). With several jobs, a file's parts
/// are one span where the tasks after them hold bytes enough to keep the
/// other workers busy meanwhile, and what those read ahead of the span's
/// delivery fits half the `budget` of bytes in flight: each part then
/// starts its lines where the part before it ended, with no count of its
/// newlines first (a second read of its bytes, a tenth of a two-job run's
/// work on a Codex home whose large rollouts made 151 of its 330 MB parts
/// that end before their file). A file too near the run's end for that,
/// whose parts the tasks before it would keep the others busy for, is a
/// span taken early (its worker reads it from the run's start), while
/// the spans taken early fit that half budget together and start within
/// the window of tasks that may run ahead of delivery. The other files'
/// parts are tasks of their own, read by every worker at once (a file of
/// several GB). The parts are the same either way ([`plan::PART_BYTES`]):
/// what a run writes does not depend on its spans.
fn spans(plan: &Plan, jobs: usize, budget: u64) -> (Vec<usize>, Vec<usize>) {
    let mut spans = vec![1; plan.tasks.len()];
    let mut early = Vec::new();
    let Some(others) = (jobs as u64).checked_sub(1).filter(|&o| o > 0) else {
        return (spans, early);
    };
    let total: u64 = plan.tasks.iter().map(|t| task_bytes(plan, t)).sum();
    // The files from the last: the bytes of the tasks after each.
    let (mut end, mut after, mut early_bytes) = (plan.tasks.len(), 0u64, 0u64);
    while end > 0 {
        let first = plan.tasks[end - 1].first_task;
        let bytes: u64 = plan.tasks[first..end]
            .iter()
            .map(|t| task_bytes(plan, t))
            .sum();
        let ahead = bytes.saturating_mul(others);
        if end - first > 1 && ahead <= budget / 2 {
            if ahead <= after {
                spans[first] = end - first;
            } else if ahead <= total - after - bytes
                && early_bytes.saturating_add(ahead) <= budget / 2
                && end <= exec::WINDOW
            {
                spans[first] = end - first;
                early_bytes += ahead;
                early.push(first);
            }
        }
        after += bytes;
        end = first;
    }
    // Early spans nearest the run's end first: its last tasks wait for it.
    (spans, early)
}

/// Whether each task is followed on its worker by the next one.
fn followed(spans: &[usize]) -> Vec<bool> {
    let mut followed = vec![false; spans.len()];
    for (i, &n) in spans.iter().enumerate().filter(|&(_, &n)| n > 1) {
        followed[i..(i + n).min(spans.len()) - 1].fill(true);
    }
    followed
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::archive::dedupe::Lineages;
    use crate::archive::Archive;
    use crate::sink::Discard;
    use crate::source::SourceOptions;

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

    /// A plan of files of these sizes in MiB, each cut in parts of
    /// [`plan::PART_BYTES`] (8 MiB) as planning cuts them.
    fn plan_of(mib: &[u64]) -> Plan {
        let mut plan = Plan::default();
        for (file, &m) in mib.iter().enumerate() {
            let size = m << 20;
            let first_task = plan.tasks.len();
            let mut start = 0;
            while start < size {
                let end = (start + plan::PART_BYTES).min(size);
                plan.tasks.push(Task {
                    file,
                    start,
                    end: (end < size).then_some(end),
                    lines: (start == 0).then_some(0),
                    first_task,
                    header: None,
                    context: Vec::new(),
                });
                start = end;
            }
            plan.files.push(plan::PlannedFile {
                path: PathBuf::from(format!("{file}.jsonl")),
                format: 0,
                identity: crate::checkpoint::stamp::Identity {
                    dev: 1,
                    ino: file as u64,
                    size,
                    mtime_ns: 0,
                },
                tasks: plan.tasks.len() - first_task,
                mode: plan::Mode::New,
                prior: None,
                reread: None,
            });
        }
        plan
    }

    /// A file's parts are one span when the files after it hold as many
    /// bytes for each other worker and half the budget holds as many:
    /// 20 MiB (3 parts) before 33 MiB of files with two jobs; not with
    /// three (40 MiB for the others), nor under a budget of 30 MiB; never
    /// with one job. A file near the end is a span taken early when the
    /// files before it hold as many bytes for the others (not C, 30 MiB
    /// after 21; D, 30 MiB after 51); the early spans fit half the budget
    /// together (E, 30 MiB after 75, and not D, 35 MiB after 40, with 48).
    /// Spans say which tasks are followed on their worker.
    #[test]
    fn a_file_is_one_span_where_the_files_after_it_keep_the_others_busy() {
        // Tasks: A 0-2, B 3, C 4-7, D 8.
        let plan = plan_of(&[20, 1, 30, 2]);
        assert_eq!(plan.tasks.len(), 9);
        let budget = 96 << 20;
        let none: Vec<usize> = Vec::new();
        assert_eq!(
            spans(&plan, 2, budget),
            (vec![3, 1, 1, 1, 1, 1, 1, 1, 1], none.clone())
        );
        assert_eq!(
            followed(&spans(&plan, 2, budget).0),
            [true, true, false, false, false, false, false, false, false]
        );
        assert_eq!(spans(&plan, 3, budget), (vec![1; 9], none.clone()));
        assert_eq!(spans(&plan, 2, 30 << 20), (vec![1; 9], none.clone()));
        assert_eq!(spans(&plan, 1, budget), (vec![1; 9], none.clone()));
        assert_eq!(followed(&[1; 9]), [false; 9]);
        // C is a span once 30 MiB follow it; A then has 63 MiB after it;
        // D, at the end, is taken early.
        let plan = plan_of(&[20, 1, 30, 30]);
        assert_eq!(
            spans(&plan, 2, budget),
            (vec![3, 1, 1, 1, 4, 1, 1, 1, 4, 1, 1, 1], vec![8])
        );
        assert_eq!(
            followed(&spans(&plan, 2, budget).0),
            [true, true, false, false, true, true, true, false, true, true, true, false]
        );
        // Tasks: A 0-4, D 5-9, E 10-13 (40, 35 and 30 MiB). E is taken
        // early (30 MiB after 75); so would D be (35 after 40), but both
        // take 65 MiB of the 48: D's parts are read by both workers.
        let plan = plan_of(&[40, 35, 30]);
        let mut want = vec![1; 14];
        (want[0], want[10]) = (5, 4);
        assert_eq!(spans(&plan, 2, budget), (want.clone(), vec![10]));
        // A budget for both: E, then D.
        want[5] = 5;
        assert_eq!(spans(&plan, 2, 160 << 20), (want, vec![10, 5]));
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
