//! What a run carries from pass to pass ([`Ctx`]): its configuration, sink,
//! checkpoint and lineages; the file being assembled from its parts; and
//! the checkpoint saved from them.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::config::Config;
use super::dedupe::Lineages;
use super::listing::Listing;
use super::plan::PlannedFile;
use super::summary::Reported;
use crate::checkpoint::model::{FileState, OutputState};
use crate::checkpoint::state::{self, Checkpoint, CheckpointStore, State, StateFile};
use crate::error::Error;
use crate::format::{Format, ParentCopies};
use crate::line::Header;
use crate::report::Report;
use crate::sink::Sink;
use crate::source::Position;
use crate::usage::Responses;

/// The deduplication lineages, restored from the state when a file is
/// first read: a re-run that reads nothing never needs them (decoding and
/// indexing them was a tenth of such a run).
pub(super) fn lineages<'l>(
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
pub(super) struct Ctx<'r, S: Sink> {
    pub(super) cfg: &'r Config,
    pub(super) sink: &'r mut S,
    /// The checkpoint file, when the sink keeps no checkpoint of its own.
    pub(super) state_file: Option<StateFile>,
    pub(super) state: Option<State>,
    /// With deduplication, once a file is read (see [`lineages`]).
    pub(super) lineages: Option<Lineages>,
    /// Keys of files whose entry changed since the last checkpoint.
    pub(super) changed: BTreeSet<String>,
    /// The listing of the archive started with the run, for its first pass.
    pub(super) listing: Option<std::thread::JoinHandle<Listing>>,
    /// When the checkpoint chose fewer formats than the listing was made
    /// with: each of the listing's formats as an index into this run's.
    pub(super) listed_formats: Option<Vec<Option<usize>>>,
    pub(super) last_checkpoint: Instant,
    /// The state changed since it was loaded or last saved.
    pub(super) dirty: bool,
    /// The sink was handed a record.
    pub(super) wrote: bool,
    /// Usage by response across the archive, restored from the state.
    pub(super) responses: Responses,
    /// The skipped lines of each file (by key) in the checkpoint the run
    /// started from, where it has any: reported by an earlier run (a
    /// file read again from the start loses its entry).
    pub(super) reported: HashMap<String, Reported>,
    /// The agents this run added to the checkpoint's (`--agent` naming
    /// agents it did not read).
    pub(super) added_agents: Vec<&'static str>,
}

impl<S: Sink> Ctx<'_, S> {
    pub(super) fn store(&mut self) -> Option<&mut dyn CheckpointStore> {
        match self.state_file.as_mut() {
            Some(f) => Some(f),
            None => self.sink.checkpoints(),
        }
    }

    /// The path errors about the checkpoint name (a state file's, a
    /// store's).
    pub(super) fn state_path(&mut self) -> PathBuf {
        self.checkpoint_place().1
    }

    /// What holds the checkpoint (`state`, `store`) and its path, for
    /// errors.
    pub(super) fn checkpoint_place(&mut self) -> (&'static str, PathBuf) {
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
    pub(super) fn keep_delivered(&mut self, f: &PlannedFile, a: &Assembling) {
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

/// Hands Claude Code's usage responses added or replaced since the last
/// checkpoint to a sink that wants usage rows and keeps no checkpoint of
/// its own ([`Sink::write_response_usage`]), with the copy it was handed
/// before of each one replaced since; those outside `--since/--until` (by
/// their time) are left out, as the files' rows are.
pub(super) fn hand_response_usage<S: Sink>(ctx: &mut Ctx<'_, S>) -> Result<(), Error> {
    use crate::archive::counted::CountedUsage;
    if !ctx.sink.wants_usage() || ctx.sink.checkpoints().is_some() {
        return Ok(());
    }
    let changed = ctx.responses.changed();
    if changed.is_empty() {
        return Ok(());
    }
    let (since, until) = (ctx.cfg.filter.since, ctx.cfg.filter.until);
    let inside = |t: Option<i64>| match t {
        Some(t) => since.is_none_or(|s| t >= s) && until.is_none_or(|u| t < u),
        None => since.is_none() && until.is_none(),
    };
    let kept = ctx.responses.kept();
    let rows: Vec<crate::sink::ResponseUsage> = changed
        .into_iter()
        .filter_map(|i| {
            let now = &kept[i as usize];
            let now_in = inside(now.time);
            // A copy read back from a checkpoint has no time: it was
            // handed over when the response's time was in bounds.
            let before = ctx.responses.replaced_since_saved(i).filter(|b| {
                if b.time.is_some() {
                    inside(b.time)
                } else {
                    now_in
                }
            });
            if !now_in && before.is_none() {
                return None;
            }
            let mut r = crate::sink::ResponseUsage::new(i);
            r.row = now_in.then(|| CountedUsage::of_response(now));
            r.written = before.map(CountedUsage::of_response);
            Some(r)
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    ctx.sink.write_response_usage(&rows)
}

/// Saves a checkpoint, after the sink made the output it covers durable.
/// `in_progress` is the entry of a file delivered in part, saved with this
/// checkpoint only.
pub(super) fn checkpoint<S: Sink>(
    ctx: &mut Ctx<'_, S>,
    in_progress: Option<(String, FileState)>,
) -> Result<(), Error> {
    ctx.last_checkpoint = Instant::now();
    ctx.dirty = false;
    if ctx.state.is_none() {
        return Ok(());
    }
    hand_response_usage(ctx)?;
    let mark = ctx.sink.sync()?;
    if ctx.sink.closed() {
        return Ok(());
    }
    let st = ctx.state.as_mut().expect("checked");
    if let Some(mut m) = mark {
        if let Some((path, len)) = m.usage.take() {
            st.usage_output = Some(OutputState {
                path,
                len,
                id: 0,
                parts: Vec::new(),
            });
        }
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
pub(super) struct Assembling {
    pub(super) file: usize,
    /// The running context after the last part delivered.
    pub(super) context: Vec<u8>,
    pub(super) report: Option<Report>,
    pub(super) header: Option<Header>,
    pub(super) error: Option<String>,
    pub(super) parts: usize,
    pub(super) position: Option<Position>,
    /// A child's lines that are its parent's under other bytes, found by
    /// its first part, for every part.
    pub(super) copies: ParentCopies,
    /// A task of it handed parts over ([`Handing`]).
    pub(super) handed: bool,
}

/// Whether the file being assembled had parts handed over.
pub(super) fn a_handed(current: &Option<Assembling>) -> bool {
    current.as_ref().is_some_and(|a| a.handed)
}

/// A file's key in the checkpoint: its path's spelling
/// ([`crate::path_text`]), distinct for every path.
pub(super) fn key_of(f: &PlannedFile) -> String {
    crate::path_text::spell(&f.path).into_owned()
}

/// The state of a file after what was delivered of it: its parts up to
/// the first that failed, if one did (a failed part delivers nothing, and
/// neither do the parts after it), so that a re-run resumes where what the
/// output holds of it ends. None when nothing of it was delivered.
pub(super) fn file_state(
    f: &PlannedFile,
    format: &dyn Format,
    a: &Assembling,
) -> Option<FileState> {
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
