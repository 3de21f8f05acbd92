//! A task's reading, on a worker: a part or a whole file read into memory
//! or streamed, its records encoded for the sink, its entries noted for
//! deduplication, and its results handed to delivery ([`PartResult`]).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use super::config::Config;
use super::plan::{self, Plan, Task};
use crate::counts::LineCounts;
use crate::format::{open_at, At, BoxedSource, Format, Input, ParentCopies};
use crate::line::Header;
use crate::line_reader::FileAt;
use crate::ndjson::cut_text;
use crate::record::Record;
use crate::redact::Redactor;
use crate::report::Report;
use crate::sink::{Encoder, Place};
use crate::source::{Position, SourceOptions};

/// The run's files by format and the name a parent is found by
/// (`Format::parent_lookup_name`), built when a child first asks for its
/// parent, on any thread.
pub(super) type ByName = std::sync::OnceLock<HashMap<(usize, String), usize>>;

/// The plan's index of the file of the parent `header` names (a file of
/// `file`'s format, not `file`), when the plan holds it.
pub(super) fn parent_file_of(
    plan: &Plan,
    by_name: &ByName,
    file: usize,
    header: &Header,
    formats: &[Arc<dyn Format>],
) -> Option<usize> {
    let format = &*formats[plan.files[file].format];
    let name = format.parent_file_name(header)?;
    let by_name = by_name.get_or_init(|| {
        let mut by_name = HashMap::new();
        for (i, f) in plan.files.iter().enumerate() {
            let name = f.path.file_name().unwrap_or_default().to_string_lossy();
            let format = &*formats[f.format];
            let key = (f.format, format.parent_lookup_name(&name).to_owned());
            by_name.entry(key).or_insert(i);
        }
        by_name
    });
    let key = (plan.files[file].format, name.to_owned());
    by_name.get(&key).copied().filter(|&j| j != file)
}

/// The pipe `path` as format detection left it (opened, its first bytes
/// read), when it did.
pub(super) fn take_stream(cfg: &Config, path: &Path) -> Option<(File, Vec<u8>)> {
    let mut streams = cfg.streams.lock().unwrap_or_else(|e| e.into_inner());
    let i = streams.iter().position(|(p, ..)| p == path)?;
    let (_, f, prefix) = streams.swap_remove(i);
    Some((f, prefix))
}

/// One entry of a task, for deduplication at delivery.
pub(super) struct EntryNote {
    pub(super) fingerprint: u64,
    pub(super) line: u64,
    pub(super) byte: u64,
    /// The running context before its line (formats that need one and
    /// whose source keeps no counts).
    pub(super) context: Vec<u8>,
    /// What it added to the part's report, when its source says.
    pub(super) counts: Option<LineCounts>,
    /// Its record's index in the task's batch.
    pub(super) record: Option<usize>,
    /// It revises an entry handed out before ([`crate::line::Entry::revision`]).
    pub(super) revision: bool,
}

/// The result of one task.
pub(super) struct PartResult<B> {
    pub(super) report: Report,
    pub(super) batch: Option<B>,
    /// Records encoded into the batch.
    pub(super) kept: usize,
    /// Revisions of records handed out before (encoded for a sink that
    /// takes them, else only counted).
    pub(super) revised: u64,
    /// Of the records encoded into the batch, the revisions.
    pub(super) revised_kept: usize,
    /// The secrets redacted, as (the record's index in the batch, the
    /// rule's index in [`Redactor::rule_ids`]), in record order.
    pub(super) redacted: Vec<(usize, usize)>,
    pub(super) error: Option<String>,
    pub(super) header: Option<Header>,
    pub(super) position: Option<Position>,
    /// The running context at `position`.
    pub(super) context: Vec<u8>,
    pub(super) notes: Vec<EntryNote>,
    /// A child's lines that are its parent's under other bytes (read
    /// here, in parallel, for delivery to decide on).
    pub(super) copies: ParentCopies,
    /// A part of a task's read handed over before its end ([`Handing`]):
    /// no position, and its file is not done with it.
    pub(super) partial: bool,
    /// A document's entries emitted by this read that are not revisions
    /// (ascending lines), when usage rows are kept: their rows are the
    /// fresh ones ([`crate::sink::DocumentUsage::fresh`]).
    pub(super) fresh_lines: Vec<u64>,
}

impl<B> Default for PartResult<B> {
    fn default() -> Self {
        PartResult {
            report: Report::default(),
            batch: None,
            kept: 0,
            revised: 0,
            revised_kept: 0,
            redacted: Vec::new(),
            error: None,
            header: None,
            position: None,
            context: Vec::new(),
            notes: Vec::new(),
            copies: ParentCopies::default(),
            partial: false,
            fresh_lines: Vec::new(),
        }
    }
}

/// How a task that reads to its file's end hands its results over while
/// it reads ([`exec::run_ordered`]), at every [`plan::PART_BYTES`] of lines:
/// a stream (a compressed rollout, a pipe) or a region that grew is one
/// task, whose records would otherwise all wait for its end.
pub(super) struct Handing<'h, B> {
    pub(super) emit: &'h mut dyn FnMut(PartResult<B>) -> bool,
    /// A child's lines that are its parent's under other bytes, for the
    /// first part handed over (read from the file's start).
    pub(super) copies: &'h dyn Fn(&Header) -> ParentCopies,
}

/// Newline counts of the parts of large files, published by each part as
/// soon as it has read its bytes, so that the parts after it know where
/// their lines start without a second pass over the file.
#[derive(Default)]
pub(crate) struct PartLines {
    counts: Mutex<HashMap<usize, u64>>,
    published: Condvar,
    /// The running context at the end of parts, published by each part
    /// that ends before its file does, for a part after it whose start
    /// the lines within a part's reach do not say it for (see
    /// [`Format::context_before`]); taken by that part.
    contexts: Mutex<HashMap<usize, Vec<u8>>>,
    ended: Condvar,
    /// The tasks whose next task runs after them on the same worker (a
    /// span of [`super::exec::run_ordered`]): nothing runs ahead of that
    /// one, which learns its lines when this one ends.
    followed: Vec<bool>,
}

impl PartLines {
    /// For a run whose task `i` is followed by task `i + 1` on the same
    /// worker where `followed[i]` says so.
    pub(super) fn with_followed(followed: Vec<bool>) -> Self {
        PartLines {
            followed,
            ..PartLines::default()
        }
    }

    /// Whether task `i + 1` runs after task `i` on the same worker.
    fn followed(&self, i: usize) -> bool {
        self.followed.get(i).copied().unwrap_or(false)
    }

    /// Publishes a part's newlines; the first count published stays (a
    /// part that failed after publishing publishes 0 again).
    fn publish(&self, task: usize, newlines: u64) {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(task)
            .or_insert(newlines);
        self.published.notify_all();
    }

    /// Publishes the running context at the end of part `task` (empty when
    /// it failed: its file fails, and the parts after it must not wait).
    fn publish_context(&self, task: usize, context: Vec<u8>) {
        self.contexts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(task)
            .or_insert(context);
        self.ended.notify_all();
    }

    /// The running context at the end of part `task`, once it is read.
    fn context_after(&self, task: usize) -> Vec<u8> {
        let mut contexts = self.contexts.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(c) = contexts.remove(&task) {
                return c;
            }
            contexts = self.ended.wait(contexts).unwrap_or_else(|e| e.into_inner());
        }
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

/// Reads one task ([`read_task`]). A panic while reading it (a bug of
/// mem-ingest, or of a format a library user added) fails its file with
/// the panic's message, as an I/O error does, instead of ending the run:
/// the other files are read, and the failure is reported with the file's
/// path. The file's records of the task are not written and its
/// checkpoint does not move.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_task<E: Encoder>(
    plan: &Plan,
    i: usize,
    cfg: &Config,
    opts: &SourceOptions,
    encoder: &E,
    bases: &PartLines,
    by_name: &ByName,
    emit: Option<&mut dyn FnMut(PartResult<E::Batch>) -> bool>,
) -> PartResult<E::Batch> {
    let read = std::panic::AssertUnwindSafe(|| {
        read_task(plan, i, cfg, opts, encoder, bases, by_name, emit)
    });
    std::panic::catch_unwind(read).unwrap_or_else(|panic| {
        // Parts after this one must not wait for it.
        bases.publish(i, 0);
        if plan.tasks[i].end.is_some() {
            bases.publish_context(i, Vec::new());
        }
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        PartResult {
            error: Some(format!(
                "internal error while reading it (please report it): {why}"
            )),
            ..PartResult::default()
        }
    })
}

/// Reads one task through the chunked reader. With several jobs, a part
/// that ends before its file does and whose next part may run beside it
/// counts its newlines first, for the parts after it; a task that reads
/// to its file's end hands its results over in parts as it reads
/// ([`Handing`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn read_task<E: Encoder>(
    plan: &Plan,
    i: usize,
    cfg: &Config,
    opts: &SourceOptions,
    encoder: &E,
    bases: &PartLines,
    by_name: &ByName,
    mut emit: Option<&mut dyn FnMut(PartResult<E::Batch>) -> bool>,
) -> PartResult<E::Batch> {
    let task = &plan.tasks[i];
    let path = &plan.files[task.file].path;
    let format = &*cfg.formats[plan.files[task.file].format];
    let file = crate::path_text::spell(path);
    let mut res = PartResult::default();
    // A child read from its start: its lines that are its parent's under
    // other bytes.
    let copies_of = |h: &Header| {
        if cfg.dedupe && task.start == 0 && format.parent(h).is_some() {
            let parent = parent_file_of(plan, by_name, task.file, h, &cfg.formats);
            let parent = parent.map(|j| plan.files[j].path.as_path());
            format.parent_copies(path, h, parent, opts)
        } else {
            ParentCopies::default()
        }
    };
    let len = task.end.map_or(u64::MAX, |e| e - task.start);
    let size = plan.files[task.file]
        .size()
        .saturating_sub(task.start)
        .min(len);
    if encoder.wants_records() {
        res.batch = Some(encoder.batch(size));
    }
    if cfg.dedupe {
        // A note for each entry: room for one a KiB (Codex lines average
        // 1.5 KB, pi's 5), rather than a dozen moves of a growing list.
        res.notes
            .reserve(usize::try_from(size / 1024).unwrap_or(0).min(1 << 16));
    }
    // With several jobs, a part that ends before its file counts its
    // newlines first (a pass over its bytes in chunks that stay in cache),
    // so that the parts after it learn where their lines start without
    // waiting for it to be parsed; then it is streamed through the chunked
    // reader as every task is. With one job nothing runs ahead of it.
    // Read into memory instead (8 MiB, then parsed from there), a part took
    // 4-8 ms to read where its count takes 2 (the part after it waiting as
    // long), copied from the page cache into memory out of cache, and each
    // worker held a buffer of 8-32 MiB: a two-job `stats` of the held-out
    // Codex home peaked at 36 MB, and took 22 after (29 with spans: what
    // the files read beside a span found waits for its delivery).
    // A part whose next part runs after it on the same worker counts
    // nothing either (see `run_ordered`).
    let counts_first = cfg.jobs > 1 && task.end.is_some() && !bases.followed(i);
    let published = std::cell::Cell::new(false);
    let publish = |n: u64| {
        if task.end.is_some() && !published.replace(true) {
            bases.publish(i, n);
        }
    };
    let result = (|| -> Result<(), String> {
        if format.is_rows(path) {
            // A database: its format opens it (read-only) and reads its
            // rows after the saved cursor; its bytes are never read here.
            let src = open(
                format,
                Input::Bytes(&[]),
                task,
                &task.context,
                path,
                opts,
                0,
            )?;
            let handing = emit.as_mut().map(|emit| Handing {
                emit: &mut **emit,
                copies: &copies_of,
            });
            return drain(src, format, &mut res, cfg, encoder, &file, handing);
        }
        // A pipe that format detection opened goes on after what it read.
        let (handle, prefix) = match take_stream(cfg, path) {
            Some(stream) => stream,
            None => (File::open(path).map_err(|e| e.to_string())?, Vec::new()),
        };
        let handle = Arc::new(handle);
        // A long line of a regular file is read again from it, not held.
        // Anything else is a pipe: read once, as a stream, never into
        // memory by its size (which says nothing).
        let again = FileAt::of(Arc::clone(&handle));
        let stream = again.is_none();
        // A usage re-read ends what its checkpoint ended, holds what it held.
        let end_final = cfg.cover.as_ref().map(|c| !c.held.contains(path));
        let opts = &opts.clone().read_again(again).end_final(end_final);
        // Counted before the context is looked for, which may wait for the
        // part before to end. A region read again later (the file changed
        // since the count) fails its file, below, rather than number the
        // lines of the parts after it wrong.
        let counted = if counts_first && !stream {
            let n = count_newlines_at(&handle, task.start, size).map_err(|e| e.to_string())?;
            publish(n);
            Some(n)
        } else {
            None
        };
        // A part after the first, or a file resumed from a checkpoint
        // that saved no context: the format finds it from the lines
        // before (pi has none). A part after another of its region looks
        // back a part's bytes at most, then waits for that one to say it
        // (it started before this one, and waits for none after it).
        let found;
        let context: &[u8] = match &task.header {
            Some(h) if task.start > 0 && task.context.is_empty() => {
                let after_part = task.first_task < i;
                let reach = after_part.then_some(plan::PART_BYTES);
                found = match format
                    .context_before(&handle, h, task.start, reach, opts)
                    .map_err(|e| e.to_string())?
                {
                    Some(c) => c,
                    None => bases.context_after(i - 1),
                };
                &found
            }
            _ => &task.context,
        };
        let mut f = &*handle;
        if task.start > 0 {
            f.seek(SeekFrom::Start(task.start))
                .map_err(|e| e.to_string())?;
        }
        let f = f.take(len);
        // A read to the file's end hands its parts over as it reads: a
        // stream, or a compressed file read into memory (of any length
        // decompressed).
        let handing = emit
            .as_mut()
            .filter(|_| task.end.is_none())
            .map(|emit| Handing {
                emit: &mut **emit,
                copies: &copies_of,
            });
        // Lines before its start: none when it reads its header itself.
        let before = match task.header {
            Some(_) => task.lines.unwrap_or_else(|| bases.lines_before(plan, i)),
            None => 0,
        };
        // A file smaller than the reader's buffer gets a buffer of its
        // size (it grows for a line longer): a one-job run over
        // thousands of small files zeroed 256 KiB for each.
        let small;
        let opts = match usize::try_from(size) {
            Ok(s) if s < opts.buffer_bytes() && !stream => {
                small = opts.clone().buffer_capacity((s + 1).max(4096));
                &small
            }
            _ => opts,
        };
        let input: Box<dyn Read + Send> = if prefix.is_empty() {
            Box::new(f)
        } else {
            Box::new(std::io::Cursor::new(prefix).chain(f))
        };
        let src = open(
            format,
            Input::Reader(input),
            task,
            context,
            path,
            opts,
            before,
        )?;
        let drained = drain(src, format, &mut res, cfg, encoder, &file, handing);
        // The part's newlines, for the parts after it, when it did not
        // count them first (one job: they wait for it anyway).
        let read = res.position.map_or(0, |p| p.line.saturating_sub(before));
        publish(read);
        match counted {
            Some(n) if n != read && drained.is_ok() => Err(format!(
                "bytes {}..{} changed while they were read ({n} lines counted, then {read} read): run again",
                task.start,
                task.start + size
            )),
            _ => drained,
        }
    })();
    if let Err(e) = result {
        // Parts after a failed one must not wait for it: the file fails.
        publish(0);
        res.error = Some(e);
    }
    if task.end.is_some() {
        bases.publish_context(i, res.context.clone());
    }
    // Read from its start, and no part handed over (which took them).
    if let (None, Some(h)) = (&res.error, &res.header) {
        res.copies = copies_of(h);
    }
    res
}

/// What a part counts its newlines in at a time: small enough to be
/// counted from the cache the kernel copied it into, and to stay there.
pub(super) const COUNT_CHUNK: u64 = 256 << 10;

/// The newlines of `len` bytes of `file` from `at` (of fewer when the file
/// ends before), read [`COUNT_CHUNK`] bytes at a time into one buffer per
/// thread and counted while they are in cache.
pub(super) fn count_newlines_at(file: &File, at: u64, len: u64) -> io::Result<u64> {
    thread_local! {
        static CHUNK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    CHUNK.with_borrow_mut(|buf| {
        buf.resize(COUNT_CHUNK as usize, 0);
        let (mut done, mut newlines) = (0u64, 0u64);
        while done < len {
            let want = (len - done).min(COUNT_CHUNK) as usize;
            let got = crate::line_reader::read_full_at(file, &mut buf[..want], at + done)?;
            newlines += memchr::memchr_iter(b'\n', &buf[..got]).count() as u64;
            done += got as u64;
            if got < want {
                break;
            }
        }
        Ok(newlines)
    })
}

/// A source over a task's `input`: from the start of its file, or resumed
/// after a header read before, in the running `context` there, after
/// `lines_before` lines (0 for a task that reads its header itself).
pub(super) fn open<'d>(
    format: &dyn Format,
    input: Input<'d>,
    task: &Task,
    context: &[u8],
    path: &Path,
    opts: &SourceOptions,
    lines_before: u64,
) -> Result<BoxedSource<'d>, String> {
    let at = At {
        header: task.header.as_ref(),
        context,
        byte: task.start,
        lines_before,
    };
    open_at(format, input, path, at, opts)
}

pub(super) fn drain<E: Encoder>(
    mut src: BoxedSource<'_>,
    format: &dyn Format,
    res: &mut PartResult<E::Batch>,
    cfg: &Config,
    encoder: &E,
    file: &str,
    mut handing: Option<Handing<'_, E::Batch>>,
) -> Result<(), String> {
    let keep = cfg.filter;
    // Only a run that builds records compiles the rules (`stats` never).
    let redactor = (cfg.redact && res.batch.is_some()).then(Redactor::get);
    let ids_of = redactor.map_or(&[][..], |r| r.rule_ids());
    // The rules of one record's redactions, and their ids.
    let mut rules: Vec<usize> = Vec::new();
    let mut ids: Vec<&'static str> = Vec::new();
    // The first line of the part being read (handing over), and whether a
    // part was handed over.
    let mut part_from: Option<u64> = None;
    let mut handed = false;
    let needs_context = cfg.dedupe && format.needs_running_context();
    let parent = src.header().and_then(|h| format.parent(h));
    // The source keeps each entry's counts: no re-read, no context needed.
    let mut counted = false;
    // A document's fresh lines, for its usage rows.
    let fresh = src.report().keep_usage_rows && format.is_document(Path::new(file));
    let r = loop {
        // What a re-read of this entry's line alone would need.
        let context = if needs_context && !counted {
            src.running_context()
        } else {
            Vec::new()
        };
        let (entry, parsed) = match src.next_entry_parsed() {
            Ok(Some(e)) => e,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.cause()),
        };
        let (fingerprint, line, byte) = (entry.fingerprint, entry.line, entry.byte);
        if fresh && !entry.revision {
            res.fresh_lines.push(line);
        }
        let revision = entry.revision && entry.record.is_some();
        res.revised += u64::from(revision);
        let mut record = None;
        let batch = res
            .batch
            .as_mut()
            .filter(|_| !revision || encoder.takes_revisions());
        if let (Some(batch), Some(rec)) = (batch, &entry.record) {
            let in_time = match rec.timestamp {
                Some(t) => keep.since.is_none_or(|s| t >= s) && keep.until.is_none_or(|u| t < u),
                None => keep.since.is_none() && keep.until.is_none(),
            };
            if in_time {
                // Secrets out first, from the decoded text, then the cut.
                let redacted = match redactor {
                    Some(r) => redact(r, rec, parsed, &mut rules),
                    None => None,
                };
                let with_redactions;
                let rec = match &redacted {
                    Some((text, command)) => {
                        let mut r = rec.clone();
                        r.text = text;
                        if let Some(c) = command {
                            r.command = Some(c);
                        }
                        with_redactions = r;
                        &with_redactions
                    }
                    None => rec,
                };
                let cut = keep.max_text.and_then(|m| cut_text(rec, m));
                ids.clear();
                ids.extend(rules.iter().map(|&r| ids_of[r]));
                let place = Place {
                    file,
                    text_bytes: cut.as_ref().map(|c| c.1),
                    fingerprint: entry.fingerprint,
                    format: format.name(),
                    parent_session: entry.parent_session.or(parent.as_deref()),
                    // A cut or redacted text is not the line's string.
                    line: if cut.is_some() || redacted.is_some() {
                        None
                    } else {
                        parsed
                    },
                    revision,
                    redactions: &ids,
                };
                match &cut {
                    Some((cut, _)) => encoder.encode(batch, cut, place),
                    None => encoder.encode(batch, rec, place),
                }
                res.redacted.extend(rules.drain(..).map(|r| (res.kept, r)));
                record = Some(res.kept);
                res.kept += 1;
                res.revised_kept += usize::from(revision);
            }
        }
        if cfg.dedupe {
            let counts = src.entry_counts().cloned();
            counted = counts.is_some();
            res.notes.push(EntryNote {
                fingerprint,
                line,
                byte,
                context,
                counts,
                record,
                revision,
            });
        }
        if let Some(h) = handing.as_mut() {
            let from = *part_from.get_or_insert(byte);
            // (A source whose places go back is not cut short: saturated.)
            if byte.saturating_sub(from) >= plan::PART_BYTES {
                let Some(report) = src.take_report_so_far() else {
                    // Not here (a database's batch not all handed out),
                    // or never (a source that cannot: its read is handed
                    // over whole): asked again after the next entry.
                    continue;
                };
                let mut part = PartResult {
                    report,
                    batch: res
                        .batch
                        .as_mut()
                        .map(|b| std::mem::replace(b, encoder.batch(plan::PART_BYTES))),
                    kept: std::mem::take(&mut res.kept),
                    revised: std::mem::take(&mut res.revised),
                    revised_kept: std::mem::take(&mut res.revised_kept),
                    redacted: std::mem::take(&mut res.redacted),
                    notes: std::mem::take(&mut res.notes),
                    partial: true,
                    ..PartResult::default()
                };
                if !handed {
                    part.header = src.header().cloned();
                    if let Some(header) = &part.header {
                        part.copies = (h.copies)(header);
                    }
                }
                handed = true;
                part_from = None;
                if !(h.emit)(part) {
                    // The run stops.
                    break Ok(());
                }
            }
        }
    };
    // The header goes with the first part delivered.
    res.header = if handed { None } else { src.header().cloned() };
    res.position = Some(src.position());
    res.context = src.running_context();
    // Last: the position reads the report's held tail.
    res.report = src.take_report();
    r
}

/// The text and command of a record with its secrets redacted, when
/// either held any (the command None when it held none); each secret's
/// rule pushed to `rules`. The text is searched as it was built: decoded,
/// or escaped for the NDJSON writer (a raw-text read,
/// [`crate::json::ParsedLine::text_built_escaped`]), decoded then only when
/// a keyword is in it; the text returned is decoded.
fn redact(
    r: &Redactor,
    rec: &Record<'_>,
    line: Option<crate::json::ParsedLine<'_>>,
    rules: &mut Vec<usize>,
) -> Option<(String, Option<String>)> {
    let escaped = line.is_some_and(|l| l.text_built_escaped());
    let text = if escaped {
        r.redact_escaped(rec.text, rules)
    } else {
        r.redact(rec.text, rules)
    };
    let command = rec.command.and_then(|c| r.redact(c, rules));
    if text.is_none() && command.is_none() {
        return None;
    }
    let text = match text {
        Some(t) => t,
        // Written through no line now: decoded.
        None if escaped => crate::redact::unescape(rec.text),
        None => rec.text.to_owned(),
    };
    Some((text, command))
}

/// A source that has read one entry's line again (only for a duplicate):
/// its report holds the counts that entry adds, and it reads on from there.
pub(super) fn reread<'f>(
    mut f: &'f File,
    format: &dyn Format,
    path: &Path,
    header: &Header,
    note: &EntryNote,
    opts: &SourceOptions,
) -> Result<BoxedSource<'f>, String> {
    f.seek(SeekFrom::Start(note.byte))
        .map_err(|e| e.to_string())?;
    // A small buffer: few lines are wanted (it grows for a long one).
    let opts = opts.clone().buffer_capacity(4096);
    let at = At {
        header: Some(header),
        context: &note.context,
        byte: note.byte,
        lines_before: note.line - 1,
    };
    let mut src = open_at(format, Input::Reader(Box::new(f)), path, at, &opts)?;
    match src.next_entry().map_err(|e| e.cause())? {
        Some(e) if e.line == note.line => {}
        _ => return Err(format!("line {} changed while it was read", note.line)),
    }
    Ok(src)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count_newlines_at` counts the newlines of the bytes asked for:
    /// from any offset, across its chunks of 256 KiB, of fewer bytes when
    /// the file ends before, and of none past its end.
    #[test]
    fn count_newlines_at_counts_the_bytes_asked_for() {
        let input: Vec<u8> = (0..700_000u32)
            .map(|i| {
                if i % 97 == 0 {
                    b'\n'
                } else {
                    b'a' + (i % 26) as u8
                }
            })
            .collect();
        let path = std::env::temp_dir().join(format!("mem-ingest-count-{}", std::process::id()));
        std::fs::write(&path, &input).unwrap();
        let file = File::open(&path).unwrap();
        let want = |at: usize, len: usize| {
            let end = (at + len).min(input.len());
            input[at.min(end)..end]
                .iter()
                .filter(|&&b| b == b'\n')
                .count() as u64
        };
        // 700,000 / 97 rounded up: 7,217 newlines (the first at 0).
        assert_eq!(count_newlines_at(&file, 0, 700_000).unwrap(), 7_217);
        for (at, len) in [
            (0, 0),
            (0, 1),
            (1, 96),
            (1, 97),
            (5, COUNT_CHUNK as usize),
            (COUNT_CHUNK as usize - 3, COUNT_CHUNK as usize + 7),
            (100, 2 * COUNT_CHUNK as usize + 1),
            (600_000, 1 << 20),
            (700_000, 10),
            (800_000, 10),
        ] {
            assert_eq!(
                count_newlines_at(&file, at as u64, len as u64).unwrap(),
                want(at, len),
                "{at} {len}"
            );
        }
        std::fs::remove_file(&path).unwrap();
    }
}
