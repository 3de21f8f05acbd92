//! The archive engine driven through the library API, not the binary:
//! resume, dedupe, a stop flag set mid-run, the checkpoint protocol (a sink
//! that can be cut back, a sink that keeps its own checkpoint), and the
//! state file this release writes, checked in.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mem_ingest::archive::{
    Archive, Checkpoint, CheckpointStore, FileState, LineageState, Links, State,
};
use mem_ingest::sink::{Encoder, ForEach, Mark, OwnedEncoder, Place, Sink};
use mem_ingest::{Error, OwnedRecord, Record};

mod common;

use common::{append, fixtures, user_line};

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("lib", name)
}

/// An archive of sessions under distinct ids: the fixtures, each session's
/// id made its own, one of them a fork of another (its header names the
/// parent's file, and it repeats the parent's first entries).
fn archive(dir: &Path) -> PathBuf {
    let root = dir.join("archive/--tmp-p--");
    fs::create_dir_all(&root).unwrap();
    for (i, name) in ["hand-built.jsonl", "pi-1x.jsonl", "pi-classic.jsonl"]
        .iter()
        .enumerate()
    {
        let text = fs::read_to_string(fixtures().join(name)).unwrap();
        let first_id = text
            .split("\"id\":\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        let body = text.replacen(first_id, &format!("sess-{i}"), 1);
        fs::write(
            root.join(format!("2026-01-0{}T00-00-00-000Z_sess-{i}.jsonl", i + 1)),
            body,
        )
        .unwrap();
    }
    // sess-0 forked: its header names sess-0's file, its first lines are
    // sess-0's entries again, then one of its own.
    let parent = fs::read_to_string(fixtures().join("hand-built.jsonl")).unwrap();
    let mut lines = parent
        .lines()
        .skip(1)
        .take(5)
        .map(str::to_owned)
        .collect::<Vec<_>>();
    lines.push(
        user_line("fork-own", "only in the fork")
            .trim_end()
            .to_owned(),
    );
    let header = r#"{"type":"session","version":3,"id":"fork-a","timestamp":"2026-01-05T00:00:00.000Z","cwd":"/tmp/p","parentSession":"/elsewhere/--tmp-p--/2026-01-01T00-00-00-000Z_sess-0.jsonl"}"#;
    fs::write(
        // Sorts before its parent: the engine reads the parent ahead.
        root.join("2026-01-00T00-00-00-000Z_fork-a.jsonl"),
        format!("{header}\n{}\n", lines.join("\n")),
    )
    .unwrap();
    dir.join("archive")
}

/// Keys of a clean backfill of `root`, in order.
fn clean_keys(root: &Path) -> Vec<String> {
    clean_keys_with(root, true)
}

fn clean_keys_with(root: &Path, dedupe: bool) -> Vec<String> {
    let mut keys = Vec::new();
    Archive::builder()
        .path(root)
        .jobs(2)
        .dedupe(dedupe)
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| keys.push(r.key)))
        .unwrap();
    keys
}

#[test]
fn resume_and_dedupe_through_the_api() {
    let d = tmpdir("resume");
    let root = archive(&d);
    let state = d.join("state");
    let archive = Archive::builder().path(&root).jobs(2).state(&state).build();
    let mut keys = Vec::new();
    let first = archive
        .backfill(&mut ForEach(|r: OwnedRecord| keys.push(r.key)))
        .unwrap();
    // 22 + 626 + 315 records of the three sessions, and the fork's own one:
    // its five copies of its parent's entries are dropped.
    assert_eq!(keys.len(), 22 + 626 + 315 + 1);
    assert_eq!(first.written, keys.len() as u64);
    assert_eq!(first.report.deduplicated, 5);
    assert!(keys.contains(&"fork-a:fork-own".to_owned()));
    assert_eq!(keys, clean_keys(&root));
    // Nothing new: nothing sent.
    let mut again = Vec::new();
    let second = archive
        .backfill(&mut ForEach(|r: OwnedRecord| again.push(r.key)))
        .unwrap();
    assert_eq!((second.written, second.unchanged), (0, 4));
    assert!(again.is_empty());
    // Appended lines: exactly those, in order.
    let s1 = root.join("--tmp-p--/2026-01-02T00-00-00-000Z_sess-1.jsonl");
    append(
        &s1,
        &(user_line("new-1", "one") + &user_line("new-2", "two")),
    );
    let mut new = Vec::new();
    let third = archive
        .backfill(&mut ForEach(|r: OwnedRecord| new.push((r.key, r.text))))
        .unwrap();
    assert_eq!((third.written, third.resumed, third.unchanged), (2, 1, 3));
    assert_eq!(
        new,
        [
            ("sess-1:new-1".to_owned(), "one".to_owned()),
            ("sess-1:new-2".to_owned(), "two".to_owned())
        ]
    );
    // A copy of the fork's parent entries appended to the fork: dropped,
    // since its lineage emitted them.
    let parent = fs::read_to_string(fixtures().join("hand-built.jsonl")).unwrap();
    let copied: String = parent
        .lines()
        .skip(6)
        .take(3)
        .map(|l| format!("{l}\n"))
        .collect();
    append(
        &root.join("--tmp-p--/2026-01-00T00-00-00-000Z_fork-a.jsonl"),
        &copied,
    );
    let mut none = Vec::new();
    let fourth = archive
        .backfill(&mut ForEach(|r: OwnedRecord| none.push(r.key)))
        .unwrap();
    assert_eq!((fourth.written, fourth.report.deduplicated), (0, 5 + 3));
    fs::remove_dir_all(d).unwrap();
}

/// A sink that can be cut back, as a file is: records in memory, the mark
/// their count. `torn` simulates what a killed run wrote after its last
/// checkpoint; `stop_after` sets the run's stop flag after that many
/// batches.
struct Memory {
    records: Vec<OwnedRecord>,
    syncs: usize,
    stop: Arc<AtomicBool>,
    stop_after: Option<usize>,
    batches: usize,
}

impl Sink for Memory {
    type Encoder = OwnedEncoder;

    fn encoder(&self) -> OwnedEncoder {
        OwnedEncoder
    }

    fn write(&mut self, batch: Vec<OwnedRecord>, dropped: &[usize]) -> Result<bool, Error> {
        for (i, r) in batch.into_iter().enumerate() {
            if dropped.binary_search(&i).is_err() {
                self.records.push(r);
            }
        }
        self.batches += 1;
        if self.stop_after == Some(self.batches) {
            self.stop.store(true, Ordering::SeqCst);
        }
        Ok(true)
    }

    fn sync(&mut self) -> Result<Option<Mark>, Error> {
        self.syncs += 1;
        Ok(Some(Mark::file("memory", self.records.len() as u64)))
    }

    fn resume_at(&mut self, mark: Option<&Mark>, _exists: bool) -> Result<(), Error> {
        self.records.truncate(mark.map_or(0, |m| m.bytes as usize));
        Ok(())
    }

    fn pairs_with_checkpoint(&self) -> bool {
        true
    }
}

#[test]
fn a_stop_flag_set_mid_run_then_a_rerun_gives_every_record_once() {
    let d = tmpdir("stop");
    let root = archive(&d);
    // Without dedupe, which would hide a doubled record.
    let want = clean_keys_with(&root, false);
    let state = d.join("state");
    let stop = Arc::new(AtomicBool::new(false));
    let archive = Archive::builder()
        .path(&root)
        .jobs(2)
        .dedupe(false)
        .state(&state)
        .stop_flag(stop.clone())
        .checkpoint_every(Duration::ZERO)
        .build();
    let mut sink = Memory {
        records: Vec::new(),
        syncs: 0,
        stop: stop.clone(),
        stop_after: Some(2),
        batches: 0,
    };
    let first = archive.backfill(&mut sink).unwrap();
    assert!(first.interrupted);
    let kept = sink.records.len();
    assert!(kept > 0 && kept < want.len(), "{kept} of {}", want.len());
    assert!(sink.syncs >= 2, "synced before each checkpoint");
    // What a killed run would have left past its checkpoint: cut back.
    sink.records.extend(sink.records[..3].to_vec());
    stop.store(false, Ordering::SeqCst);
    sink.stop_after = None;
    let second = archive.backfill(&mut sink).unwrap();
    assert!(!second.interrupted);
    let got: Vec<String> = sink.records.iter().map(|r| r.key.clone()).collect();
    // Exactly a clean run's records, in its order: none lost, none twice.
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    assert_eq!(second.written as usize, got.len() - kept);
    fs::remove_dir_all(d).unwrap();
}

/// A sink that keeps its own checkpoint, as a database does in the same
/// transaction as its rows: records written go to `pending`, and a
/// checkpoint commits them with the rows of what changed. It rebuilds the
/// state from those rows alone.
#[derive(Default)]
struct Store {
    pending: Vec<OwnedRecord>,
    committed: Vec<OwnedRecord>,
    options: Option<mem_ingest::archive::OutputOptions>,
    mark: Option<Mark>,
    files: BTreeMap<String, FileState>,
    fingerprints: BTreeMap<String, Vec<u64>>,
    joins: Vec<(String, String)>,
    /// Per save: files changed, fingerprints added, joins added.
    saves: Vec<(usize, usize, usize)>,
}

impl Sink for Store {
    type Encoder = OwnedEncoder;

    fn encoder(&self) -> OwnedEncoder {
        OwnedEncoder
    }

    fn write(&mut self, batch: Vec<OwnedRecord>, dropped: &[usize]) -> Result<bool, Error> {
        for (i, r) in batch.into_iter().enumerate() {
            if dropped.binary_search(&i).is_err() {
                self.pending.push(r);
            }
        }
        Ok(true)
    }

    fn checkpoints(&mut self) -> Option<&mut dyn CheckpointStore> {
        Some(self)
    }
}

impl CheckpointStore for Store {
    fn load(&mut self) -> Result<Option<State>, Error> {
        // A killed run's uncommitted rows are gone.
        self.pending.clear();
        let Some(options) = self.options.clone() else {
            return Ok(None);
        };
        let mut st = State::new(options);
        st.output = self.mark.clone().map(mem_ingest::archive::OutputState::of);
        for (k, f) in &self.files {
            st.files.insert(k.clone(), Arc::new(f.clone()));
        }
        // Lineages from the joins (a union-find) and the fingerprints of
        // each session.
        let mut root: HashMap<String, String> = HashMap::new();
        fn find(root: &mut HashMap<String, String>, s: &str) -> String {
            let p = root.get(s).cloned().unwrap_or_else(|| s.to_owned());
            if p == s {
                return p;
            }
            let r = find(root, &p);
            root.insert(s.to_owned(), r.clone());
            r
        }
        for (a, b) in &self.joins {
            let (ra, rb) = (find(&mut root, a), find(&mut root, b));
            if ra != rb {
                root.insert(rb, ra);
            }
        }
        let mut groups: BTreeMap<String, (Vec<String>, Vec<u64>)> = BTreeMap::new();
        for (s, fps) in &self.fingerprints {
            let g = groups.entry(find(&mut root, s)).or_default();
            g.0.push(s.clone());
            g.1.extend(fps);
        }
        for (a, b) in &self.joins {
            for s in [a, b] {
                let g = groups.entry(find(&mut root, s)).or_default();
                if !g.0.contains(s) {
                    g.0.push(s.clone());
                }
            }
        }
        let lineages: Vec<LineageState> = groups
            .into_values()
            .map(|(mut sessions, mut fps)| {
                sessions.sort();
                fps.sort_unstable();
                fps.dedup();
                LineageState {
                    sessions,
                    fingerprints: fps.iter().flat_map(|f| f.to_le_bytes()).collect(),
                }
            })
            .collect();
        st.set_lineages(&lineages);
        Ok(Some(st))
    }

    fn save(&mut self, cp: &mut Checkpoint<'_>) -> Result<(), Error> {
        self.options = Some(cp.options().clone());
        self.mark = cp.mark();
        let mut changed = 0;
        for (k, f) in cp.changed_files() {
            changed += 1;
            match f {
                Some(f) => self.files.insert(k.to_owned(), f.clone()),
                None => self.files.remove(k),
            };
        }
        let mut added = 0;
        for (s, fps) in cp.new_fingerprints() {
            added += fps.len();
            self.fingerprints
                .entry(s.to_owned())
                .or_default()
                .extend(fps);
        }
        self.joins.extend(cp.new_joins().iter().cloned());
        self.saves.push((changed, added, cp.new_joins().len()));
        // The commit: rows and checkpoint together.
        self.committed.append(&mut self.pending);
        Ok(())
    }
}

#[test]
fn a_sink_keeps_its_own_checkpoint_from_what_changed() {
    let d = tmpdir("store");
    let root = archive(&d);
    let want = clean_keys(&root);
    let archive = Archive::builder().path(&root).jobs(2).build();
    let mut store = Store::default();
    let first = archive.backfill(&mut store).unwrap();
    assert_eq!(first.written as usize, want.len());
    let keys = |s: &Store| {
        s.committed
            .iter()
            .map(|r| r.key.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&store), want);
    // One save at the end: four files, every entry's fingerprint, the
    // fork's join.
    let entries = first.report.lines - first.report.skipped - first.report.deduplicated;
    assert_eq!(store.saves, [(4, entries as usize, 1)]);
    // Unchanged: nothing written, nothing saved.
    let second = archive.backfill(&mut store).unwrap();
    assert_eq!((second.written, second.unchanged), (0, 4));
    assert_eq!(store.saves.len(), 1);
    // A line appended: one file changed, one fingerprint, no join.
    let s2 = root.join("--tmp-p--/2026-01-03T00-00-00-000Z_sess-2.jsonl");
    append(&s2, &user_line("new-1", "one"));
    let third = archive.backfill(&mut store).unwrap();
    assert_eq!(third.written, 1);
    assert_eq!(store.saves[1], (1, 1, 0));
    assert_eq!(store.committed.last().unwrap().key, "sess-2:new-1");
    // Rows a killed run wrote and never committed are gone, and the state
    // rebuilt from the rows still deduplicates: the parent's copies
    // appended to the fork are dropped.
    store.pending.push(store.committed[0].clone());
    let parent = fs::read_to_string(fixtures().join("hand-built.jsonl")).unwrap();
    let copied: String = parent
        .lines()
        .skip(6)
        .take(3)
        .map(|l| format!("{l}\n"))
        .collect();
    append(
        &root.join("--tmp-p--/2026-01-00T00-00-00-000Z_fork-a.jsonl"),
        &copied,
    );
    let fourth = archive.backfill(&mut store).unwrap();
    assert_eq!((fourth.written, fourth.report.deduplicated), (0, 5 + 3));
    assert_eq!(store.committed.len(), want.len() + 1);
    fs::remove_dir_all(d).unwrap();
}

/// The state file this release writes, checked in (`fixtures/state-v13.state`,
/// written by the `library_backfill` example over `hand-built.jsonl` and
/// `pi-classic.jsonl`, links not followed). File identity includes device
/// and inode, so copies of the two files here are new to it: every file is
/// read again and every entry is a copy of one its lineages hold (records
/// 0); then exactly the lines appended.
#[test]
fn the_checked_in_state_of_this_release() {
    checked_in_state(
        "state-v13.state",
        mem_ingest::archive::STATE_VERSION,
        Links::Skip,
    );
}

/// The states of the releases before (layout 12, no usage rows' file;
/// layout 11, no redaction recorded; layout 10, a parent as its text) are
/// upgraded: the same as this release's, 11 and 10 unredacted (see
/// `checked_in_state`).
#[test]
fn the_checked_in_state_of_the_release_before() {
    checked_in_state("state-v12.state", 12, Links::Skip);
    checked_in_state("state-v11.state", 11, Links::Skip);
    checked_in_state("state-v10.state", 10, Links::Skip);
}

/// The states of the releases before that (layout versions 9 to 3) are
/// upgraded: the same as this release's. They were saved before links were
/// recorded, by runs that followed every link met while walking: a run
/// that does not is refused.
#[test]
fn the_checked_in_states_of_the_releases_before() {
    for version in (3..=9).rev() {
        checked_in_state(&format!("state-v{version}.state"), version, Links::Follow);
    }
}

fn checked_in_state(name: &str, version: u32, links: Links) {
    let d = tmpdir(&format!("checked-in-{version}"));
    let arch = d.join("archive");
    fs::create_dir_all(&arch).unwrap();
    for name in ["hand-built.jsonl", "pi-classic.jsonl"] {
        fs::copy(fixtures().join(name), arch.join(name)).unwrap();
    }
    fs::copy(fixtures().join(name), d.join("state")).unwrap();
    assert_eq!(
        fs::read(d.join("state")).unwrap()[8..12],
        version.to_le_bytes()
    );
    let builder = || Archive::builder().path(&arch).state(d.join("state"));
    let mut keys = Vec::new();
    if links == Links::Follow {
        let e = builder()
            .build()
            .backfill(&mut ForEach(|r: OwnedRecord| keys.push(r.key)))
            .unwrap_err();
        assert!(
            e.to_string().contains(
                "(--follow-links: state has links followed (given -L, or saved before -L \
                 existed, when runs always followed them), this run links not followed: give \
                 -L to go on)"
            ),
            "{e}"
        );
        assert_eq!(
            fs::read(d.join("state")).unwrap(),
            fs::read(fixtures().join(name)).unwrap()
        );
    }
    let archive = builder().links(links).build();
    let first = archive
        .backfill(&mut ForEach(|r: OwnedRecord| keys.push(r.key)))
        .unwrap();
    assert_eq!((first.files, first.unchanged, first.resumed), (2, 0, 0));
    // A state saved before redaction was recorded goes on unredacted, and
    // the summary says so (every run: the state keeps saying it).
    assert_eq!(first.unredacted_checkpoint, version < 12);
    assert!(keys.is_empty(), "{keys:?}");
    assert_eq!(first.report.records, 0);
    // Every line of both files, their headers included: hand-built.jsonl
    // has 33, pi-classic.jsonl 347.
    assert_eq!(first.report.deduplicated, 33 + 347);
    assert_eq!(first.report.lines, 33 + 347);
    append(
        &arch.join("hand-built.jsonl"),
        &(user_line("fx-1", "a") + &user_line("fx-2", "b")),
    );
    let second = archive
        .backfill(&mut ForEach(|r: OwnedRecord| keys.push(r.key)))
        .unwrap();
    assert_eq!((second.written, second.resumed), (2, 1));
    assert_eq!(second.unredacted_checkpoint, version < 12);
    assert_eq!(keys, ["hand-built-0001:fx-1", "hand-built-0001:fx-2"]);
    fs::remove_dir_all(d).unwrap();
}

/// A record a sink gets through its encoder is the borrowed `Record<'_>`,
/// with where it was read.
#[test]
fn an_encoder_sees_borrowed_records_and_their_file() {
    struct Files;
    impl Encoder for Files {
        type Batch = Vec<(String, u64, Option<u64>)>;
        fn batch(&self, _: u64) -> Self::Batch {
            Vec::new()
        }
        fn encode(&self, b: &mut Self::Batch, r: &Record<'_>, p: Place<'_>) {
            b.push((format!("{}@{}", r.key, p.file), r.line, p.text_bytes));
        }
    }
    struct Collect(Vec<(String, u64, Option<u64>)>);
    impl Sink for Collect {
        type Encoder = Files;
        fn encoder(&self) -> Files {
            Files
        }
        fn write(
            &mut self,
            b: Vec<(String, u64, Option<u64>)>,
            dropped: &[usize],
        ) -> Result<bool, Error> {
            assert!(dropped.is_empty());
            self.0.extend(b);
            Ok(true)
        }
    }
    let path = fixtures().join("hand-built.jsonl");
    let mut c = Collect(Vec::new());
    let s = Archive::builder()
        .path(&path)
        .max_text(4)
        .build()
        .backfill(&mut c)
        .unwrap();
    assert_eq!((s.written, c.0.len()), (22, 22));
    let (key, line, cut) = &c.0[0];
    // The first record is line 4 (a header, a model change and a thinking
    // level change come first), its text cut to 4 bytes.
    assert_eq!(key, &format!("hand-built-0001:c0de0003@{}", path.display()));
    assert_eq!(*line, 4);
    assert!(cut.is_some_and(|n| n > 4), "{cut:?}");
}

/// A run stopped before it read anything (a `--follow` pass that the stop
/// reaches while it plans: seen under load as "0 files ... 0 records (22
/// written)") still accounts for the files that need no reading: each
/// unchanged file is counted from the state, as a whole run counts it.
#[test]
fn a_stopped_run_counts_the_unchanged_files() {
    let d = tmpdir("stopped-unchanged");
    let root = archive(&d);
    let state = d.join("state");
    let run = |stop: bool| {
        let flag = Arc::new(AtomicBool::new(stop));
        Archive::builder()
            .path(&root)
            .jobs(2)
            .state(&state)
            .stop_flag(flag)
            .build()
            .backfill(&mut ForEach(|_: OwnedRecord| {}))
            .unwrap()
    };
    let first = run(false);
    assert_eq!((first.files, first.unchanged), (4, 0));
    let stopped = run(true);
    assert_eq!(
        (
            stopped.files,
            stopped.unchanged,
            stopped.written,
            stopped.interrupted
        ),
        (4, 4, 0, true)
    );
    assert_eq!(stopped.report.records, first.report.records);
    fs::remove_dir_all(&d).unwrap();
}
