//! Delivery, in task order: each part's copies decided (deduplication,
//! parents read ahead), its records handed to the sink, its usage, totals
//! and the file's state kept.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use super::config::Config;
use super::ctx::{a_handed, checkpoint, file_state, key_of, lineages, Assembling, Ctx};
use super::dedupe::{Emitter, FpSet, Lineages};
use super::plan::{Mode, Plan, PlannedFile, Task};
use super::summary::Summary;
use super::task::{parent_file_of, reread, ByName, PartResult};
use crate::counts::Removal;
use crate::error::{Error, ErrorKind};
use crate::format::{open_at, At, BoxedSource, Format, Input, ParentCopies};
use crate::line::Header;
use crate::record::Usage;
use crate::report::Report;
use crate::sink::{DocumentUsage, Encoder, Sink, UsageCorrection};
use crate::source::SourceOptions;

/// Delivers one task's result, in task order: deduplication, the sink,
/// totals, state. Ok(false) to stop (the sink's reader is gone).
#[allow(clippy::too_many_arguments)]
pub(super) fn deliver<S: Sink>(
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
                totals.updated += res.revised;
                if let Some(batch) = res.batch.take() {
                    // Revisions update records written before: not new.
                    let kept = res.kept - dropped.len() - res.revised_kept;
                    ctx.wrote |= kept + res.revised_kept > 0;
                    if ctx.sink.write(batch, &dropped)? {
                        totals.written += kept as u64;
                        // The secrets of the records written (not of the
                        // copies dropped).
                        // (The rules compiled only by a run that redacted.)
                        let ids = if res.redacted.is_empty() {
                            &[][..]
                        } else {
                            crate::redact::Redactor::get().rule_ids()
                        };
                        for &(i, r) in &res.redacted {
                            if dropped.binary_search(&i).is_err() {
                                *totals.redactions.entry(ids[r]).or_insert(0) += 1;
                            }
                        }
                    } else {
                        totals.closed = true;
                        going = false;
                    }
                }
                let document =
                    going && ctx.sink.wants_usage() && format_of(ctx, f).is_document(&f.path);
                if document {
                    // Also when it has no rows now (a rewind of them all,
                    // a version that does not parse): they replace those
                    // handed over before.
                    document_usage(ctx, f, a.header.as_ref(), &mut res)?;
                } else if going && ctx.sink.wants_usage() && !res.report.usage_rows.is_empty() {
                    let rows = usage_rows(
                        f,
                        format_of(ctx, f),
                        a.header.as_ref(),
                        &mut res.report,
                        ctx.cfg.filter,
                    );
                    if !rows.is_empty() {
                        ctx.sink.write_usage(&rows)?;
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

fn format_of<'c, S: Sink>(ctx: &Ctx<'c, S>, f: &PlannedFile) -> &'c dyn Format {
    &*ctx.cfg.formats[f.format]
}

/// A document's usage rows, read whole (see [`Sink::write_document_usage`]):
/// all of them now; the fresh ones (the entries this read emitted, or
/// every row at a first read); and, where the checkpoint saved the
/// document's counts of its read before, per provider and model, what
/// the rows handed over so far need to sum to its counts now.
fn document_usage<S: Sink>(
    ctx: &mut Ctx<'_, S>,
    f: &PlannedFile,
    header: Option<&Header>,
    res: &mut PartResult<<S::Encoder as Encoder>::Batch>,
) -> Result<(), Error> {
    let format = format_of(ctx, f);
    let filter = ctx.cfg.filter;
    let rows = usage_rows(f, format, header, &mut res.report, filter);
    let before = f.reread.as_deref().map(|p| &p.report);
    let (fresh, corrections) = match before {
        None => (rows.clone(), Vec::new()),
        Some(before) => {
            let fresh: Vec<super::CountedUsage> = rows
                .iter()
                .filter(|r| res.fresh_lines.binary_search(&r.line).is_ok())
                .cloned()
                .collect();
            let corrections = if filter.since.is_none() && filter.until.is_none() {
                corrections(&rows, &fresh, &res.report, before, format, header, f)
            } else {
                Vec::new()
            };
            (fresh, corrections)
        }
    };
    let file = f.path.display().to_string();
    ctx.sink.write_document_usage(&DocumentUsage {
        file: &file,
        rows: &rows,
        fresh: &fresh,
        corrections: &corrections,
    })
}

/// Per provider and model (and one for usage naming neither), the
/// document's usage now (`now`, its report) against what its rows handed
/// over sum to: its report before (the rows written before sum to it) and
/// the fresh rows. Only those that differ.
fn corrections(
    rows: &[super::CountedUsage],
    fresh: &[super::CountedUsage],
    now: &Report,
    before: &Report,
    format: &dyn Format,
    header: Option<&Header>,
    f: &PlannedFile,
) -> Vec<UsageCorrection> {
    type Key = Option<(String, String)>;
    // (now, before) per key, in the order first met.
    let mut sums: Vec<(Key, Usage, Usage)> = Vec::new();
    let mut add = |k: Key, is_now: bool, u: &Usage| {
        let i = match sums.iter().position(|s| s.0 == k) {
            Some(i) => i,
            None => {
                sums.push((k, Usage::default(), Usage::default()));
                sums.len() - 1
            }
        };
        if is_now {
            sums[i].1.add(u);
        } else {
            sums[i].2.add(u);
        }
    };
    for (report, is_now) in [(now, true), (before, false)] {
        // What no model takes: the rest of the report's total.
        let mut rest = report.usage;
        for m in &report.by_model {
            rest.sub(&m.usage);
            add(
                Some((m.provider.clone(), m.model.clone())),
                is_now,
                &m.usage,
            );
        }
        add(None, is_now, &rest);
    }
    for r in fresh {
        let k = match (&r.provider, &r.model) {
            (Some(p), Some(m)) => Some((p.clone(), m.clone())),
            _ => None,
        };
        add(k, false, &r.usage);
    }
    let (session, project) = header.map_or((String::new(), String::new()), |h| {
        (h.id.clone(), h.cwd.clone())
    });
    let time = rows.iter().filter_map(|r| r.time).max();
    let file = f.path.display().to_string();
    let recorded = format.records_cost();
    let row = |k: &Key, usage: Usage| super::CountedUsage {
        agent: format.name(),
        session: session.clone(),
        project: project.clone(),
        file: file.clone(),
        line: 0,
        seq: 0,
        time,
        provider: k.as_ref().map(|(p, _)| p.clone()),
        model: k.as_ref().map(|(_, m)| m.clone()),
        usage,
        reasoning: 0,
        cache_write_1h: 0,
        recorded,
    };
    let same = |a: &Usage, b: &Usage| {
        (a.input, a.output, a.cache_read, a.cache_write, a.total_tokens)
            == (b.input, b.output, b.cache_read, b.cache_write, b.total_tokens)
            // (Recorded costs summed in another order.)
            && (a.cost - b.cost).abs() <= 1e-9 * a.cost.abs().max(1.0)
    };
    sums.iter()
        .filter(|(_, n, b)| !same(n, b))
        .map(|(k, n, b)| UsageCorrection {
            now: row(k, *n),
            before: row(k, *b),
        })
        .collect()
}

/// A part's usage rows (taken out of its report), as the sink takes them:
/// with their file, session and project, those in the time bounds.
fn usage_rows(
    f: &PlannedFile,
    format: &dyn Format,
    header: Option<&Header>,
    report: &mut Report,
    filter: super::config::Filter,
) -> Vec<super::CountedUsage> {
    let file = f.path.display().to_string();
    let (session, project) = header.map_or((String::new(), String::new()), |h| {
        (h.id.clone(), h.cwd.clone())
    });
    let recorded = format.records_cost();
    report
        .usage_rows
        .drain(..)
        .filter(|r| match r.at.time {
            Some(t) => filter.since.is_none_or(|s| t >= s) && filter.until.is_none_or(|u| t < u),
            None => filter.since.is_none() && filter.until.is_none(),
        })
        .map(|r| super::CountedUsage {
            agent: format.name(),
            session: session.clone(),
            project: project.clone(),
            file: file.clone(),
            line: r.at.line,
            seq: r.at.seq,
            time: r.at.time,
            provider: r.provider.as_deref().map(str::to_owned),
            model: r.model.as_deref().map(str::to_owned),
            usage: r.usage,
            reasoning: r.at.reasoning,
            cache_write_1h: 0,
            recorded,
        })
        .collect()
}

/// The last part of a file was delivered: its totals, and its entry in the
/// state.
pub(super) fn file_delivered<S: Sink>(
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
pub(super) struct Delivered<'a, B> {
    pub(super) format: &'a dyn Format,
    pub(super) path: &'a Path,
    pub(super) header: &'a Header,
    pub(super) task: &'a Task,
    pub(super) res: &'a mut PartResult<B>,
    pub(super) opts: &'a SourceOptions,
    /// Its lines that are its parent's under other bytes.
    pub(super) copies: &'a ParentCopies,
}

/// Decides which of a part's entries are copies: returns the indices of
/// their records in the batch, and the read-ahead parents (their lineage
/// ids) that made any a copy; takes their counts out of the part's report.
pub(super) fn dedupe<B>(
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
pub(super) fn decide_copies<B>(
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
    // The copies' usage rows, which go with their counts: a database's
    // rows by line and place (see below), else every row at the copy's
    // line.
    let (mut copy_lines, mut copy_rows) = (Vec::new(), Vec::new());
    let rows = format.is_rows(path);
    // Opened once for the part, at its first duplicate.
    let file: std::cell::OnceCell<File> = std::cell::OnceCell::new();
    // A run of duplicates that are consecutive entries (a fork's or a
    // subagent's replayed prefix) is read again by one source: its counts
    // so far, and how many entries they are. Only for formats with a
    // running context (Codex, whose usage has no cost): others take each
    // entry's counts out alone, so that sums of costs round as they did.
    let batch = format.needs_running_context();
    // A document's copies, noted in its context (see
    // [`crate::document::mark_copies`]).
    let mut doc_copies = Vec::new();
    let document = format.is_document(path);
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
        if document && !note.revision {
            doc_copies.push(note.fingerprint);
        }
        // A revision that another file made already (the same version).
        res.revised -= u64::from(note.revision);
        if let Some(i) = note.record {
            res.revised_kept -= usize::from(note.revision);
            dropped.push(i);
        }
        if res.report.keep_usage_rows {
            match (&note.counts, rows) {
                // A database's row: its counts are complete when it is
                // pushed, and name the usage rows it added, by line and
                // place: those go, and none of another's at its line (an
                // OpenCode call is one of its answer's line's rows;
                // Goose's ledger ids and message row ids share numbers).
                (Some(c), true) => copy_rows.extend(c.usage_rows()),
                // A line format may count a held entry's usage at a later
                // line: every row at the copy's line.
                _ => copy_lines.push(note.line),
            }
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
    if !doc_copies.is_empty() {
        res.context = crate::document::mark_copies(&res.context, &doc_copies);
    }
    removal.apply(&mut res.report);
    res.report
        .remove_usage_rows_at(&mut copy_lines, &mut copy_rows);
    Ok(dropped)
}

/// Fingerprints of parents that are delivered after a fork of theirs, so
/// the fork's copies are dropped and the parent's kept: read ahead, when the
/// fork is delivered, from the parent's file.
pub(super) struct ParentsAhead<'p> {
    pub(super) sets: &'p mut HashMap<String, FpSet>,
    /// Each read-ahead set's parent, by its plan file index.
    pub(super) parent_file: &'p mut HashMap<String, usize>,
    /// Files of the plan by the name a parent is found by.
    pub(super) by_name: &'p ByName,
}

impl ParentsAhead<'_> {
    /// When `header` names a parent whose file comes later in the plan,
    /// reads that file's fingerprints now.
    pub(super) fn read(
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
