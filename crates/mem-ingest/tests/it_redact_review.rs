//! False positives of redaction, measured (issue 46): every redaction made
//! over pi's real sessions, every agent's samples (`../shared`) and a
//! generated archive of each agent, as (rule, file, line), never the
//! secret, against the reviewed list `tests/redactions-reviewed.tsv`.
//! The list may only shrink: a redaction not in it fails the test, to be
//! reviewed (a secret, or a rule that redacts what it should not) and,
//! when right, added. `MEM_INGEST_WRITE_REVIEW=1` writes the list anew from
//! what a run finds (then review its diff).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mem_ingest::archive::Archive;
use mem_ingest::formats;
use mem_ingest::sink::{Encoder, Place, Sink};
use mem_ingest::{Error, Record};

/// Redactions of one rule on one line: rule, file (relative to what was
/// read), line, how many.
type Found = (String, String, u64, u64);

struct Collect(Mutex<Vec<Found>>);

struct ByPlace;
impl Encoder for ByPlace {
    type Batch = Vec<(String, u64, Vec<&'static str>)>;
    fn batch(&self, _: u64) -> Self::Batch {
        Vec::new()
    }
    fn encode(&self, b: &mut Self::Batch, r: &Record<'_>, p: Place<'_>) {
        b.push((p.file.to_owned(), r.line, p.redactions.to_vec()));
    }
}

impl Sink for Collect {
    type Encoder = ByPlace;
    fn encoder(&self) -> ByPlace {
        ByPlace
    }
    fn write(
        &mut self,
        b: Vec<(String, u64, Vec<&'static str>)>,
        dropped: &[usize],
    ) -> Result<bool, Error> {
        let mut found = self.0.lock().unwrap();
        for (i, (file, line, rules)) in b.into_iter().enumerate() {
            if dropped.binary_search(&i).is_ok() {
                continue;
            }
            for r in rules {
                found.push((r.to_owned(), file.clone(), line, 1));
            }
        }
        Ok(true)
    }
}

/// The redactions a run over `paths` makes, files named from `root`
/// (`label/...`).
fn redactions(paths: &[PathBuf], root: &Path, label: &str) -> Vec<Found> {
    let mut sink = Collect(Mutex::new(Vec::new()));
    Archive::builder()
        .paths(paths.iter().cloned())
        .formats(formats::builtin())
        .jobs(2)
        .build()
        .backfill(&mut sink)
        .unwrap();
    let root = root.display().to_string();
    sink.0
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|(r, f, l, n)| {
            let rel = f.strip_prefix(&root).unwrap_or(&f).trim_start_matches('/');
            (r, format!("{label}/{rel}"), l, n)
        })
        .collect()
}

fn generated(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for format in ["pi", "claude", "codex", "qwen", "copilot"] {
        let a = dir.join(format);
        let status = gen_corpus::GenCorpus::new()
            .args(["--format", format, "--archive"])
            .arg(&a)
            .args(["--total-mb", "5", "--seed", "46"])
            .status()
            .unwrap();
        assert!(status.success(), "gen-corpus --format {format}");
        out.push(a);
    }
    out
}

fn list() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redactions-reviewed.tsv")
}

#[test]
#[ignore = "needs ../shared: pi's real sessions and every agent's samples"]
fn redactions_over_real_sessions_samples_and_generated_archives_do_not_grow() {
    let real = common::shared::real_dir();
    let samples = common::shared::samples();
    let tmp = common::tmpdir("review", "generated");
    // Counted by rule, file and line.
    let mut counts: BTreeMap<(String, String, u64), u64> = BTreeMap::new();
    let all = redactions(std::slice::from_ref(&real), &real, "real")
        .into_iter()
        .chain(redactions(
            std::slice::from_ref(&samples),
            &samples,
            "samples",
        ))
        .chain(redactions(&generated(&tmp), &tmp, "generated"));
    for (r, f, l, n) in all {
        *counts.entry((r, f, l)).or_insert(0) += n;
    }
    let found: BTreeSet<Found> = counts
        .into_iter()
        .map(|((r, f, l), n)| (r, f, l, n))
        .collect();
    let _ = fs::remove_dir_all(&tmp);
    let text: String = found
        .iter()
        .map(|(r, f, l, n)| format!("{r}\t{f}\t{l}\t{n}\n"))
        .collect();
    if std::env::var_os("MEM_INGEST_WRITE_REVIEW").is_some() {
        let head = "# rule\tfile\tline\tcount: every redaction over ../shared's real sessions and \
             samples and generated archives (seed 46), reviewed (see docs/privacy.md)\n";
        fs::write(list(), format!("{head}{text}")).unwrap();
    }
    let reviewed: BTreeSet<Found> = fs::read_to_string(list())
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut it = l.split('\t');
            let mut next = || it.next().unwrap();
            let (r, f, l, n) = (next(), next(), next(), next());
            (
                r.to_owned(),
                f.to_owned(),
                l.parse().unwrap(),
                n.parse().unwrap(),
            )
        })
        .collect();
    let new: Vec<&Found> = found.difference(&reviewed).collect();
    assert!(
        new.is_empty(),
        "redactions not in {} (review each: a secret, or a rule to fix):\n{new:#?}",
        list().display()
    );
    // And what the list holds is still found (a shrink is reviewed too:
    // the list says what a run does).
    let gone: Vec<&Found> = reviewed.difference(&found).collect();
    assert!(
        gone.is_empty(),
        "reviewed redactions no longer made: {gone:#?}"
    );
}
