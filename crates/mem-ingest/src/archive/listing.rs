//! The run's files: the PATHs or the formats' default archives, walked;
//! each file's format, from the checkpoint or detected from its first
//! bytes; and the formats a checkpoint chose.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::Config;
use super::discover;
use super::plan::{self, FoundFile};
use crate::checkpoint::model::FileState;
use crate::error::{Error, ErrorKind};
use crate::format::Format;

/// The formats of a run whose `--agent` names agents that the checkpoint
/// (which records `sources`) did not read: the checkpoint's agents and
/// the run's together, in the registry's order (a format not in the
/// registry after those), and the names added. None when the run names
/// no new agent (the same agents, or fewer: refused as another option).
///
/// # Errors
/// The checkpoint names an agent this build does not know.
pub(super) fn widen_formats(
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
pub(super) type Adopted = (Config, Vec<Option<usize>>);

/// The formats of `cfg` a checkpoint that records `sources` chooses: None
/// when it chooses all of them, else the run's configuration with those
/// alone (in `cfg`'s order) and each of `cfg`'s formats as an index into
/// them.
///
/// # Errors
/// The checkpoint names a format `cfg` cannot read: why, naming it
/// (`what`: `state`, `store`).
pub(super) fn adopt_formats(
    cfg: &Config,
    sources: &[String],
    what: &str,
) -> Result<Option<Adopted>, String> {
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
pub(super) fn relist(cfg: &Config, map: &[Option<usize>], listed: Listed) -> Listing {
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
pub(super) fn detect_formats(
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
pub(super) fn detect_format(cfg: &Config, path: &Path) -> usize {
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

/// What discovery found, or why it could not start.
pub(super) type Listing = Result<Listed, Error>;

/// The format of a file found under a PATH, before [`detect_formats`]
/// decides it.
pub(super) const UNDETECTED: usize = usize::MAX;

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
pub(super) struct Listed {
    pub(super) found: discover::Found,
    pub(super) files: Vec<FoundFile>,
}

/// The session files under the PATHs (the formats' archives when none),
/// folders walked on up to `--jobs` threads. A file in a format's default
/// archive is that format's (when it claims the file's name); a file under
/// a PATH is [`UNDETECTED`] until [`detect_formats`] decides it.
pub(super) fn find_files(cfg: &Config) -> Listing {
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
