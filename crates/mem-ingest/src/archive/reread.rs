//! Usage rows for what a checkpoint covers, read again: a store made
//! before it kept usage rows (schema 6 and earlier) has none for what it
//! read then. The run that goes on from its checkpoint first reads the
//! files and bytes the checkpoint covers again, records off, and hands the
//! store the usage rows a run of this release would have written for them
//! ([`crate::checkpoint::CheckpointStore::save_reread_usage`]); then the run
//! goes on as ever.
//!
//! What is read: each file of the checkpoint from its start to where the
//! checkpoint stopped (a document whole), found at its path with the
//! header the checkpoint saved and at least as many bytes; in path order,
//! deduplicated as a run without a checkpoint is (the checkpoint's own
//! lineages were made the same way over the same bytes). The rows a store
//! holds for the files read again are replaced by the re-read's, not added
//! to: a store the release before migrated (which did not read again) has
//! rows of its runs since, keyed by the file each run read a response in,
//! and where it read a copy (a Codex fork's replay of its parent) before
//! the file this pass keeps it in, keeping them would count it twice. A message the
//! checkpoint held back at its end (Gemini CLI's last) stays held
//! ([`crate::source::SourceOptions::end_final`]): the run writes its row
//! when it is final, as it would have; one it did not hold is final. A file
//! missing, shorter, or with another header is not read: its rows are
//! missing, and the report says so, file by file
//! ([`UsageReread::unread`]); in a store that holds rows written before
//! (the release before's), so are the files of a lineage with such a
//! file, whose rows are kept as they are. Claude Code's responses are counted once
//! across the archive by the checkpoint's own table: every response in it
//! gets its row (its index the key a later, larger copy rewrites), its
//! time and one-hour cache writes taken from the copy read again (a
//! response of a file not read has no time).

use std::sync::Arc;
use std::time::Instant;

use super::config::{Config, Cover, Filter};
use super::counted::{CountedUsage, UsageReread};
use super::dedupe::Lineages;
use super::plan::{self, FoundFile};
use crate::checkpoint::model::FileState;
use crate::checkpoint::stamp::{header_digest, Identity};
use crate::checkpoint::state::State;
use crate::format::Format;
use crate::usage::{Response, Responses};

/// How a checkpoint's file is read again, or why not.
fn covered(
    cfg: &Config,
    formats: &mut Vec<Arc<dyn Format>>,
    key: &str,
    f: &crate::checkpoint::model::FileState,
) -> Result<Option<(FoundFile, bool)>, String> {
    let Some(path) = crate::path_text::path_of(key) else {
        return Err("its name spells no path".to_owned());
    };
    let i = match formats.iter().position(|x| x.name() == f.format) {
        Some(i) => i,
        None => match crate::formats::by_name(&f.format) {
            Some(x) => {
                formats.push(x);
                formats.len() - 1
            }
            None => return Err(format!("this build does not read {}", f.format)),
        },
    };
    let format = &*formats[i];
    if format.is_rows(&path) {
        return Err("a database: its rows are not read again".to_owned());
    }
    let m = std::fs::metadata(&path).map_err(|e| format!("not found ({e})"))?;
    if !m.is_file() {
        return Err("not a file".to_owned());
    }
    let mut id = Identity::of(&m);
    let document = format.is_document(&path);
    let upto = if document {
        if id.size != f.identity.size {
            return Err(format!(
                "changed since (a document of {} bytes, then {})",
                id.size, f.identity.size
            ));
        }
        id.size
    } else {
        if id.size < f.offset {
            return Err(format!(
                "shorter than what the store read ({} bytes, then {})",
                id.size, f.offset
            ));
        }
        f.offset
    };
    if upto == 0 {
        return Ok(None);
    }
    let same = plan::read_header(&path, &cfg.opts, format)
        .is_some_and(|h| header_digest(&h) == f.header_digest || plan::cwd_now_known(&h, f));
    if !same {
        return Err("another session header than the one the store read".to_owned());
    }
    let held = format.holds_back(&f.context);
    id.size = upto;
    Ok(Some(((path, id, i), held)))
}

/// Whether time `t` is inside the bounds of `filter` (none: only when
/// there are none), as a run's usage rows are.
fn inside(filter: Filter, t: Option<i64>) -> bool {
    match t {
        Some(t) => filter.since.is_none_or(|s| t >= s) && filter.until.is_none_or(|u| t < u),
        None => filter.since.is_none() && filter.until.is_none(),
    }
}

/// What a usage re-read reads: the configuration of its pass (the files
/// `st` covers, records off, no checkpoint), and what it knows before
/// reading (the files not read, the bytes to read).
///
/// `kept`: the lineages of `st`, when the store holds rows written before
/// (a store the release before migrated): a file of a lineage with a file
/// not read again is not read again either, its rows kept as they are
/// (read alone, a Codex fork whose parent is gone would count the replay
/// its parent's rows hold).
pub(super) fn prepare(
    cfg: &Config,
    st: &State,
    mut kept: Option<&mut Lineages>,
) -> (Config, UsageReread) {
    let mut out = UsageReread::default();
    let mut formats = cfg.formats.clone();
    let mut cover = Cover::default();
    let mut found = Vec::new();
    for (key, f) in &st.files {
        match covered(cfg, &mut formats, key, f) {
            Ok(Some(file)) => found.push((key, f, file)),
            Ok(None) => {}
            Err(why) => out.unread.push((key.clone(), why)),
        }
    }
    let lineage_of = |f: &FileState| match crate::formats::by_name(&f.format) {
        Some(x) => x.lineage(&f.header.id),
        None => format!("{}:{}", f.format, f.header.id),
    };
    let gone: Vec<String> = match kept {
        Some(_) => out
            .unread
            .iter()
            .filter_map(|(k, _)| st.files.get(k))
            .map(|f| lineage_of(f))
            .collect(),
        None => Vec::new(),
    };
    for (key, f, (file, held)) in found {
        if let Some(l) = kept.as_deref_mut().filter(|_| !gone.is_empty()) {
            let mine = lineage_of(f);
            if gone.iter().any(|g| l.same(&mine, g)) {
                out.unread.push((
                    key.clone(),
                    "of a lineage with a file not read again (its rows are kept as they are)"
                        .to_owned(),
                ));
                continue;
            }
        }
        if held {
            cover.held.insert(file.0.clone());
        }
        out.bytes += file.1.size;
        cover.files.push(file);
    }
    // In path order, as a run lists them.
    cover.files.sort_by(|a, b| a.0.cmp(&b.0));
    out.read = cover
        .files
        .iter()
        .map(|f| f.0.display().to_string())
        .collect();
    let mut c = cfg.clone();
    c.formats = formats;
    c.state = None;
    c.follow = false;
    c.progress = None;
    c.shard = None;
    c.costs = None;
    c.filter = Filter::default();
    c.opts = c.opts.clone().usage_rows(true);
    c.cover = Some(Arc::new(cover));
    (c, out)
}

/// The rows of a usage re-read's pass (`summary`) over what `st` covers,
/// `kept` its table of Claude Code's responses, added to `out` (from
/// [`prepare`]).
pub(super) fn rows(
    mut out: UsageReread,
    summary: super::Summary,
    st: &State,
    kept: &[Response],
    started: Instant,
) -> UsageReread {
    let filter = Filter {
        since: st.options.since,
        until: st.options.until,
        max_text: None,
    };
    out.files = summary.files.saturating_sub(summary.failures.len() as u64);
    for (path, why) in &summary.failures {
        out.unread.push((path.clone(), why.clone()));
    }
    // A file whose read failed keeps the rows it has.
    if !summary.failures.is_empty() {
        let failed: std::collections::HashSet<&str> =
            summary.failures.iter().map(|(p, _)| p.as_str()).collect();
        out.read.retain(|p| !failed.contains(p.as_str()));
    }
    out.rows = summary
        .usage
        .into_iter()
        .filter(|r| !r.file.is_empty() && inside(filter, r.time))
        .collect();
    let read = Responses::from_kept(summary.kept_responses);
    for (i, r) in kept.iter().enumerate() {
        let mut r = r.clone();
        match read.find(&r).map(|j| &read.kept()[j as usize]) {
            Some(copy) => {
                r.time = copy.time;
                if copy.usage == r.usage {
                    r.cache_write_1h = copy.cache_write_1h;
                }
            }
            None => out.untimed += 1,
        }
        if inside(filter, r.time) {
            let i = u32::try_from(i).expect("fewer than 2^32 responses");
            out.responses.push((i, CountedUsage::of_response(&r)));
        }
    }
    out.seconds = started.elapsed().as_secs_f64();
    out
}
