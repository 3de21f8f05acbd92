//! Cutting the archive into tasks: small files whole, large files in parts
//! at newline boundaries, so one file of several GB keeps every core busy.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use mem_ingest::{Header, PiSessionSource, RecordSource, SourceOptions};
use rayon::prelude::*;

/// Files larger than this are read in parts of about this size. It does
/// not depend on `--jobs`, so neither does the order of any sum.
pub const PART_BYTES: u64 = 8 << 20;

/// One unit of work.
#[derive(Debug)]
pub struct Task {
    /// Index into the plan's files.
    pub file: usize,
    pub kind: TaskKind,
}

#[derive(Debug)]
pub enum TaskKind {
    /// The whole file, header included, to its end.
    Whole,
    /// Bytes `start..end` of a file whose header is known, after `lines`
    /// lines. Part 0 starts at 0 and reads the header itself.
    Part {
        start: u64,
        end: u64,
        lines: u64,
        header: Option<Header>,
    },
}

/// A file of the plan.
#[derive(Debug)]
pub struct PlannedFile {
    pub path: PathBuf,
    /// Size when planned (0 when it could not be read).
    pub size: u64,
    /// Set when the file failed while planning (it gets no task).
    pub error: Option<String>,
    /// Number of tasks of this file.
    pub tasks: usize,
}

#[derive(Debug, Default)]
pub struct Plan {
    pub files: Vec<PlannedFile>,
    pub tasks: Vec<Task>,
}

/// The first `\n` at or after `from`, or `None`.
fn next_newline(file: &File, mut from: u64, size: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 * 1024];
    while from < size {
        let n = file.read_at(&mut buf, from)?;
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

/// Number of `\n` in `start..end`.
fn count_newlines(path: &PathBuf, start: u64, end: u64) -> io::Result<u64> {
    let file = File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut pos, mut count) = (start, 0u64);
    while pos < end {
        let want = ((end - pos) as usize).min(buf.len());
        let n = file.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            break;
        }
        count += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        pos += n as u64;
    }
    Ok(count)
}

/// Part boundaries of a large file: each starts just after a `\n`.
fn boundaries(path: &PathBuf, size: u64) -> io::Result<Vec<u64>> {
    let file = File::open(path)?;
    let mut cuts = vec![0];
    let mut k = 1;
    while k * PART_BYTES < size {
        let from = (k * PART_BYTES - 1).max(*cuts.last().expect("non-empty"));
        match next_newline(&file, from, size)? {
            Some(nl) if nl + 1 < size => {
                if nl + 1 > *cuts.last().expect("non-empty") {
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

struct Split {
    cuts: Vec<u64>,
    counts: Vec<u64>,
    header: Header,
}

/// Plans the work. Large files are cut, their newlines counted (in
/// parallel), and their header read once.
pub fn plan(paths: Vec<PathBuf>, opts: &SourceOptions) -> Plan {
    let mut files: Vec<PlannedFile> = paths
        .into_iter()
        .map(|path| {
            let (size, error) = match std::fs::metadata(&path) {
                Ok(m) => (m.len(), None),
                Err(e) => (0, Some(e.to_string())),
            };
            PlannedFile {
                path,
                size,
                error,
                tasks: 0,
            }
        })
        .collect();
    let splits: Vec<Option<Result<Split, String>>> = files
        .par_iter()
        .map(|f| {
            if f.error.is_some() || f.size <= PART_BYTES {
                return None;
            }
            Some(split(f, opts))
        })
        .collect();
    let mut tasks = Vec::new();
    for (i, (f, split)) in files.iter_mut().zip(splits).enumerate() {
        if f.error.is_some() {
            continue;
        }
        match split {
            None => tasks.push(Task {
                file: i,
                kind: TaskKind::Whole,
            }),
            // A header that fails is reported by the whole-file task.
            Some(Err(_)) => tasks.push(Task {
                file: i,
                kind: TaskKind::Whole,
            }),
            Some(Ok(s)) => {
                let mut lines = 0;
                for (k, w) in s.cuts.windows(2).enumerate() {
                    let header = (k > 0).then(|| s.header.clone());
                    tasks.push(Task {
                        file: i,
                        kind: TaskKind::Part {
                            start: w[0],
                            end: w[1],
                            lines,
                            header,
                        },
                    });
                    lines += s.counts[k];
                    f.tasks += 1;
                }
                continue;
            }
        }
        f.tasks = 1;
    }
    Plan { files, tasks }
}

fn split(f: &PlannedFile, opts: &SourceOptions) -> Result<Split, String> {
    let src = PiSessionSource::open_with(&f.path, opts).map_err(|e| e.to_string())?;
    let header = src.header().cloned().ok_or("empty")?;
    drop(src);
    let cuts = boundaries(&f.path, f.size).map_err(|e| e.to_string())?;
    let counts = cuts
        .par_windows(2)
        .map(|w| count_newlines(&f.path, w[0], w[1]))
        .collect::<io::Result<Vec<u64>>>()
        .map_err(|e| e.to_string())?;
    Ok(Split {
        cuts,
        counts,
        header,
    })
}
