//! The format seam proved by a second format that lives here, in a test,
//! and plugs into the engine with no edit to it: `*.notes` files with no
//! header line (the session is the file's stem, the project its folder's
//! name) and a running context (a `{"model": ...}` line sets the model of
//! the notes after it, across parts and across runs). Read beside pi's
//! files in one archive, with one state.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mem_ingest::archive::Archive;
use mem_ingest::format::{BoxedSource, Format, Input};
use mem_ingest::formats::Pi;
use mem_ingest::sink::ForEach;

mod common;

use common::append;

fn tmpdir(name: &str) -> PathBuf {
    common::tmpdir("fmt", name)
}
use mem_ingest::{
    Entry, Error, Header, OwnedRecord, Position, Record, RecordSource, Report, Role, Skip,
    SkipReason, SourceError,
};

/// The notes format.
struct Notes;

impl Format for Notes {
    fn name(&self) -> &'static str {
        "notes"
    }

    fn is_session_file(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "notes")
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        Err("notes have no default archive".into())
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        _opts: &mem_ingest::SourceOptions,
    ) -> Result<BoxedSource<'d>, SourceError> {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let project = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let header = Header {
            fingerprint: 0,
            id: stem.clone(),
            cwd: project,
            version: 1,
            timestamp: None,
            parent: None,
        };
        Ok(Box::new(NotesSource::new(
            input,
            path,
            header,
            String::new(),
            0,
            0,
        )))
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        _opts: &mem_ingest::SourceOptions,
    ) -> BoxedSource<'d> {
        let model = String::from_utf8(context.to_vec()).unwrap();
        Box::new(NotesSource::new(
            input,
            path,
            header.clone(),
            model,
            byte,
            lines_before,
        ))
    }

    fn needs_running_context(&self) -> bool {
        true
    }
}

/// Reads notes line by line, keeping the current model.
struct NotesSource<'d> {
    lines: Box<dyn BufRead + Send + 'd>,
    header: Header,
    source: String,
    model: String,
    report: Report,
    byte: u64,
    line: u64,
    /// The record handed out last: its strings.
    key: String,
    text: String,
    model_of_record: String,
    record_place: (u64, u64),
}

impl<'d> NotesSource<'d> {
    fn new(
        input: Input<'d>,
        path: &Path,
        header: Header,
        model: String,
        byte: u64,
        line: u64,
    ) -> Self {
        let lines: Box<dyn BufRead + Send + 'd> = match input {
            Input::Reader(r) => Box::new(BufReader::new(r)),
            Input::Bytes(b) => Box::new(b),
        };
        NotesSource {
            lines,
            source: format!("notes:{}", path.file_stem().unwrap().to_string_lossy()),
            header,
            model,
            report: Report::default(),
            byte,
            line,
            key: String::new(),
            text: String::new(),
            model_of_record: String::new(),
            record_place: (0, 0),
        }
    }
}

impl RecordSource for NotesSource<'_> {
    fn next_record(&mut self) -> Result<Option<Record<'_>>, SourceError> {
        loop {
            match self.next_entry()? {
                None => return Ok(None),
                Some(e) if e.record.is_some() => break,
                Some(_) => {}
            }
        }
        Ok(Some(self.record()))
    }

    fn report(&self) -> &Report {
        &self.report
    }

    fn header(&self) -> Option<&Header> {
        Some(&self.header)
    }

    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, SourceError> {
        loop {
            let mut buf = String::new();
            let n = self.lines.read_line(&mut buf).map_err(|e| {
                SourceError::new(Path::new(&self.source), mem_ingest::SourceErrorKind::Io(e))
            })?;
            if n == 0 {
                return Ok(None);
            }
            let (at, line) = (self.byte, self.line + 1);
            self.byte += n as u64;
            self.line += 1;
            self.report.bytes += n as u64;
            if buf.trim().is_empty() {
                continue;
            }
            self.report.lines += 1;
            let v: serde_json::Value = match serde_json::from_str(&buf) {
                Ok(v) => v,
                Err(e) => {
                    self.report.skipped += 1;
                    self.report.skips.push(Skip {
                        line,
                        byte: at,
                        reason: SkipReason::Malformed(e.to_string()),
                    });
                    continue;
                }
            };
            let fingerprint = fnv(buf.trim_end().as_bytes());
            if let Some(m) = v.get("model").and_then(|m| m.as_str()) {
                self.model = m.to_owned();
                self.report.no_record += 1;
                self.report.entries.add("model", 1);
                return Ok(Some(Entry {
                    fingerprint,
                    line,
                    byte: at,
                    record: None,
                    revision: false,
                    parent_session: None,
                }));
            }
            let text = v.get("text").and_then(|t| t.as_str()).unwrap_or("");
            self.report.records += 1;
            self.report.roles[Role::User.index()] += 1;
            self.report.entries.add("note", 1);
            self.key = format!("{}:L{line}", self.header.id);
            self.text = text.to_owned();
            self.model_of_record = self.model.clone();
            self.record_place = (line, at);
            let rec = self.record();
            return Ok(Some(Entry {
                fingerprint,
                line,
                byte: at,
                record: Some(rec),
                revision: false,
                parent_session: None,
            }));
        }
    }

    fn position(&self) -> Position {
        Position {
            byte: self.byte,
            line: self.line,
            open_line: false,
        }
    }

    fn running_context(&self) -> Vec<u8> {
        self.model.as_bytes().to_vec()
    }
}

impl NotesSource<'_> {
    /// The record handed out last.
    fn record(&self) -> Record<'_> {
        let (line, byte) = self.record_place;
        Record {
            role: Role::User,
            text: &self.text,
            project: &self.header.cwd,
            session: &self.header.id,
            key: &self.key,
            source: &self.source,
            id: None,
            parent_id: None,
            line,
            byte,
            entry: "note",
            message_role: None,
            kinds: &["text"],
            timestamp: None,
            provider: None,
            model: (!self.model_of_record.is_empty()).then_some(self.model_of_record.as_str()),
            usage: None,
            stop_reason: None,
            tool_name: None,
            tool_call_id: None,
            is_error: None,
            custom_type: None,
            command: None,
            exit_code: None,
            repaired: false,
            agent_id: None,
            message_id: None,
            request_id: None,
            provisional: false,
        }
    }
}

/// A small hash of a line (the fingerprint of an entry, as a format
/// chooses it: here its bytes).
fn fnv(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
        (h ^ u64::from(*c)).wrapping_mul(0x100_0000_01b3)
    })
}

#[test]
fn a_second_format_plugs_in_beside_pi() {
    let d = tmpdir("notes");
    let proj = d.join("archive/my-notes");
    fs::create_dir_all(&proj).unwrap();
    let notes = proj.join("monday.notes");
    fs::write(
        &notes,
        "{\"model\":\"m-1\"}\n{\"text\":\"first\"}\nnot json\n{\"model\":\"m-2\"}\n{\"text\":\"second\"}\n",
    )
    .unwrap();
    // A copy of a note in another session of the same format: a session
    // of its own, not deduplicated against the first.
    fs::write(proj.join("tuesday.notes"), "{\"text\":\"first\"}\n").unwrap();
    // pi's files in the same archive, read by pi's format.
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl"),
        d.join("archive/pi.jsonl"),
    )
    .unwrap();
    // Neither format's: not read.
    fs::write(proj.join("readme.txt"), "hello\n").unwrap();
    let formats: Vec<Arc<dyn Format>> = vec![Arc::new(Pi), Arc::new(Notes)];
    let archive = Archive::builder()
        .path(d.join("archive"))
        .formats(formats)
        .state(d.join("state"))
        .build();
    let mut got: Vec<OwnedRecord> = Vec::new();
    let first = archive.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(first.files, 3);
    assert_eq!(first.report.skipped, 1);
    assert_eq!(first.skips[0].line, 3);
    let notes_got: Vec<(String, String, Option<String>, String)> = got
        .iter()
        .filter(|r| r.source.starts_with("notes:"))
        .map(|r| {
            (
                r.key.clone(),
                r.text.clone(),
                r.model.clone(),
                r.project.clone(),
            )
        })
        .collect();
    assert_eq!(
        notes_got,
        [
            (
                "monday:L2".into(),
                "first".into(),
                Some("m-1".into()),
                "my-notes".into()
            ),
            (
                "monday:L5".into(),
                "second".into(),
                Some("m-2".into()),
                "my-notes".into()
            ),
            ("tuesday:L1".into(), "first".into(), None, "my-notes".into()),
        ]
    );
    assert_eq!(
        got.iter().filter(|r| r.source.starts_with("pi:")).count(),
        22
    );
    // The running context is saved with the file's checkpoint: a note
    // appended later carries the model set before it, in an earlier run.
    append(&notes, "{\"text\":\"third\"}\n");
    got.clear();
    let second = archive.backfill(&mut ForEach(|r| got.push(r))).unwrap();
    assert_eq!(
        (second.written, second.resumed, second.unchanged),
        (1, 1, 2)
    );
    assert_eq!(got[0].key, "monday:L6");
    assert_eq!(got[0].model.as_deref(), Some("m-2"));
    // A copy of a line already emitted in the same session: deduplicated
    // by the format's fingerprint.
    append(&notes, "{\"text\":\"third\"}\n");
    let third = archive
        .backfill(&mut ForEach(|_| panic!("a copy")))
        .unwrap();
    assert_eq!((third.written, third.report.deduplicated), (0, 1));
    let mut rest = String::new();
    fs::File::open(&notes)
        .unwrap()
        .read_to_string(&mut rest)
        .unwrap();
    assert_eq!(rest.lines().count(), 7, "the input is never written");
    fs::remove_dir_all(d).unwrap();
}

/// What [`Faulty`] does wrong.
enum Fault {
    /// A bug: opening `bomb.jsonl`, or resuming `big-bomb.jsonl` after its
    /// start (a part of a large file), panics.
    Panics,
    /// Keeps no counts per entry (so a copy's line is read again to take
    /// its counts out), and a source resumed at this byte counts one line
    /// too many: reading a copy's line again there finds another line
    /// number, as when the file changed, and deduplication fails.
    ShiftedAt(u64),
    /// The file of this name fails when a worker opens it (its task), not
    /// when the delivering thread reads it ahead as a fork's parent.
    FailsOnWorker(&'static str),
    /// When the context at the first offset (the start of a part) is looked
    /// for, the byte at the second (a newline) of the file at the path
    /// becomes a space: the part's bytes change after a two-job run counted its
    /// newlines, before they are read.
    JoinsAt(u64, u64, PathBuf),
}

/// Pi's format (its sessions, lineages and forks), with a [`Fault`].
struct Faulty(Fault);

impl Format for Faulty {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn is_session_file(&self, path: &Path) -> bool {
        Pi.is_session_file(path)
    }

    fn default_archive(&self) -> Result<PathBuf, String> {
        Err("none".into())
    }

    fn header_is_entry(&self) -> bool {
        Pi.header_is_entry()
    }

    fn lineage(&self, session: &str) -> String {
        Pi.lineage(session)
    }

    fn parent(&self, header: &Header) -> Option<String> {
        Pi.parent(header)
    }

    fn parent_file_name<'h>(&self, header: &'h Header) -> Option<&'h str> {
        Pi.parent_file_name(header)
    }

    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &mem_ingest::SourceOptions,
    ) -> Result<BoxedSource<'d>, SourceError> {
        match &self.0 {
            Fault::Panics => assert!(!path.ends_with("bomb.jsonl"), "a bug in this format"),
            Fault::ShiftedAt(_) => return Ok(Box::new(NoCounts(Pi.open(input, path, opts)?))),
            Fault::FailsOnWorker(name) => {
                let worker = std::thread::current().name().is_none();
                if worker && path.file_name().is_some_and(|n| n == *name) {
                    return Err(SourceError::new(
                        path,
                        mem_ingest::SourceErrorKind::Io(std::io::Error::other("flaky read")),
                    ));
                }
            }
            Fault::JoinsAt(..) => {}
        }
        Pi.open(input, path, opts)
    }

    fn context_before(
        &self,
        file: &std::fs::File,
        header: &Header,
        byte: u64,
        reach: Option<u64>,
        opts: &mem_ingest::SourceOptions,
    ) -> std::io::Result<Option<Vec<u8>>> {
        if let Fault::JoinsAt(at, newline, path) = &self.0 {
            if byte == *at {
                use std::os::unix::fs::FileExt;
                let f = fs::OpenOptions::new().write(true).open(path)?;
                f.write_all_at(b" ", *newline)?;
            }
        }
        Pi.context_before(file, header, byte, reach, opts)
    }

    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &mem_ingest::SourceOptions,
    ) -> BoxedSource<'d> {
        match self.0 {
            Fault::Panics if path.ends_with("big-bomb.jsonl") && byte > 0 => {
                panic!("a bug at byte {byte}")
            }
            Fault::ShiftedAt(at) => {
                let lines = lines_before + u64::from(byte == at);
                Box::new(NoCounts(
                    Pi.resume(input, path, header, context, byte, lines, opts),
                ))
            }
            _ => Pi.resume(input, path, header, context, byte, lines_before, opts),
        }
    }
}

/// A pi source that keeps no counts per entry.
struct NoCounts<'d>(BoxedSource<'d>);

impl RecordSource for NoCounts<'_> {
    fn next_record(&mut self) -> Result<Option<Record<'_>>, SourceError> {
        self.0.next_record()
    }
    fn report(&self) -> &Report {
        self.0.report()
    }
    fn header(&self) -> Option<&Header> {
        self.0.header()
    }
    fn next_entry(&mut self) -> Result<Option<Entry<'_>>, SourceError> {
        self.0.next_entry()
    }
    fn position(&self) -> Position {
        self.0.position()
    }
    fn take_report(&mut self) -> Report {
        self.0.take_report()
    }
}

/// The keys `backfill` emits from `root` read as `format` with `jobs`
/// jobs, deduplicating or not, with the checkpoint `state` if any; and
/// the run's summary.
fn keys_of(
    root: &Path,
    format: Arc<dyn Format>,
    jobs: usize,
    dedupe: bool,
    state: Option<&Path>,
) -> (Vec<String>, mem_ingest::archive::Summary) {
    let mut got = Vec::new();
    let mut b = Archive::builder()
        .path(root)
        .format(format)
        .jobs(jobs)
        .dedupe(dedupe);
    if let Some(s) = state {
        b = b.state(s);
    }
    let summary = b
        .build()
        .backfill(&mut ForEach(|r: OwnedRecord| got.push(r.key)))
        .unwrap();
    (got, summary)
}

/// A pi session `big` of 20 MiB (three parts): its header, then user
/// lines `b0`, `b1`, ... of 1,000 bytes of text; with `copy_past`, right
/// after the first line that ends past that byte, a copy of it.
struct BigSession {
    text: String,
    /// Lines after the header, the copy not counted.
    n: usize,
    /// Where the copy starts.
    copy_at: Option<u64>,
    /// Lines after the header that the first part holds: its lines end
    /// at the first newline from its last byte on.
    first: usize,
    /// The keys of `b0` ... in order.
    keys: Vec<String>,
}

fn big_session(copy_past: Option<usize>) -> BigSession {
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"big","timestamp":"2026-02-01T00:00:00.000Z","cwd":"/big"}"#,
    );
    text.push('\n');
    let filler = "x".repeat(1000);
    let (mut n, mut copy_at) = (0, None);
    while text.len() < 20 << 20 {
        text.push_str(&common::user_line(&format!("b{n}"), &filler));
        n += 1;
        if copy_at.is_none() && copy_past.is_some_and(|c| text.len() > c) {
            copy_at = Some(text.len() as u64);
            text.push_str(&common::user_line(&format!("b{}", n - 1), &filler));
        }
    }
    let part = mem_ingest::archive::PART_BYTES as usize;
    let end = part - 1 + text[part - 1..].find('\n').unwrap();
    let first = text[..=end].matches('\n').count() - 1;
    let keys = (0..n).map(|i| format!("big:b{i}")).collect();
    BigSession {
        text,
        n,
        copy_at,
        first,
        keys,
    }
}

/// A panic while reading a file (a bug of a format, here one a library
/// user added) fails that file with the panic's message, as an I/O error
/// does: the run goes on, and every other file's records come exactly as
/// without it. Of the failed files, only the parts delivered before the
/// failing one came (as with an I/O error in a later part): none of
/// `bomb.jsonl`, the first part's of `big-bomb.jsonl`. The part that
/// panics does not leave the parts after it waiting for its line count.
#[test]
fn a_panic_in_a_format_fails_its_file_and_the_run_goes_on() {
    let d = tmpdir("bomb");
    let good = d.join("good");
    fs::create_dir_all(&good).unwrap();
    for f in ["hand-built.jsonl", "pi-classic.jsonl"] {
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures")
                .join(f),
            good.join(f),
        )
        .unwrap();
    }
    let with_bombs = d.join("with");
    fs::create_dir_all(&with_bombs).unwrap();
    for f in ["hand-built.jsonl", "pi-classic.jsonl"] {
        fs::copy(good.join(f), with_bombs.join(f)).unwrap();
    }
    fs::copy(good.join("hand-built.jsonl"), with_bombs.join("bomb.jsonl")).unwrap();
    // Over two parts of 8 MiB: its second part panics.
    let whole = big_session(None);
    fs::write(with_bombs.join("big-bomb.jsonl"), &whole.text).unwrap();
    let keys = |root: &Path, jobs| keys_of(root, Arc::new(Faulty(Fault::Panics)), jobs, true, None);
    let (want, clean) = keys(&good, 2);
    assert_eq!(clean.files_failed, 0);
    assert_eq!(want.len() as u64, clean.written);
    assert!(want.len() > 50, "{}", want.len());
    for jobs in [1, 2] {
        let (got, summary) = keys(&with_bombs, jobs);
        let (big, rest): (Vec<String>, Vec<String>) =
            got.into_iter().partition(|k| k.starts_with("big:"));
        assert_eq!(rest, want, "--jobs {jobs}");
        // The first part's records, in order (the header is no record).
        let lines = whole.first;
        assert!(lines > 1000 && lines < whole.n, "{lines} of {}", whole.n);
        assert_eq!(big, whole.keys[..lines], "--jobs {jobs}");
        assert_eq!(
            (summary.files, summary.files_failed),
            (4, 2),
            "--jobs {jobs}"
        );
        let failures = failures_by_name(&summary);
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert_eq!(failures[0].0, "big-bomb.jsonl");
        assert!(
            failures[0]
                .1
                .starts_with("internal error while reading it (please report it): a bug at byte "),
            "{failures:?}"
        );
        assert_eq!(
            failures[1],
            (
                "bomb.jsonl".to_owned(),
                "internal error while reading it (please report it): a bug in this format"
                    .to_owned()
            )
        );
    }
    fs::remove_dir_all(d).unwrap();
}

/// A run's failures in the order of their paths, each as its file's name
/// and its message.
fn failures_by_name(summary: &mem_ingest::archive::Summary) -> Vec<(String, String)> {
    let mut failures = summary.failures.clone();
    failures.sort();
    failures
        .iter()
        .map(|(p, e)| {
            let name = Path::new(p).file_name().unwrap().to_string_lossy();
            (name.into_owned(), e.clone())
        })
        .collect()
}

/// With several jobs, a part that ends before its file counts its
/// newlines first, so that the parts after it number their lines without
/// waiting for it to be parsed. A part whose bytes change between that
/// count and its read (a newline of the file's second part made a space
/// when its context is looked for) fails its file with its bytes and both
/// counts, rather than number the lines of the parts after it wrong: the
/// first part's records come, and every other file's. With one job the
/// parts are read one after the other, and the changed bytes are read as
/// they are: the joined line is skipped, and the file does not fail.
#[test]
fn a_part_whose_bytes_change_after_its_count_fails_its_file() {
    let d = tmpdir("changes");
    let whole = big_session(None);
    let newlines: Vec<u64> = whole
        .text
        .match_indices('\n')
        .map(|(i, _)| i as u64)
        .collect();
    let part = mem_ingest::archive::PART_BYTES;
    // The second part: after the first part's last line, to the first
    // newline from its size on.
    let start = newlines[whole.first] + 1;
    let last = newlines.iter().position(|&n| n >= 2 * part - 1).unwrap();
    let end = newlines[last] + 1;
    let counted = (last - whole.first) as u64;
    let joined = newlines[whole.first + 10];
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hand-built.jsonl");
    let (want_other, _) = {
        let other = d.join("other");
        fs::create_dir_all(&other).unwrap();
        fs::copy(&fixture, other.join("hand-built.jsonl")).unwrap();
        let r = keys_of(&other, Arc::new(Pi), 1, true, None);
        fs::remove_dir_all(&other).unwrap();
        r
    };
    assert_eq!(want_other.len(), 22, "hand-built.jsonl's records");
    let run = |jobs| {
        let root = d.join(format!("jobs-{jobs}"));
        fs::create_dir_all(&root).unwrap();
        fs::copy(&fixture, root.join("hand-built.jsonl")).unwrap();
        let big = root.join("big.jsonl");
        fs::write(&big, &whole.text).unwrap();
        let fault = Faulty(Fault::JoinsAt(start, joined, big.clone()));
        let r = keys_of(&root, Arc::new(fault), jobs, true, None);
        assert_eq!(
            fs::read(&big).unwrap()[joined as usize],
            b' ',
            "--jobs {jobs}"
        );
        r
    };
    let (got, summary) = run(2);
    let (big_keys, rest): (Vec<String>, Vec<String>) =
        got.into_iter().partition(|k| k.starts_with("big:"));
    assert_eq!(rest, want_other);
    assert_eq!(big_keys, whole.keys[..whole.first]);
    assert_eq!((summary.files, summary.files_failed), (2, 1));
    assert_eq!(
        failures_by_name(&summary),
        [(
            "big.jsonl".to_owned(),
            format!(
                "bytes {start}..{end} changed while they were read ({counted} lines counted, then {} read): run again",
                counted - 1
            )
        )]
    );
    // One job: the line joined to the next is skipped, the file read.
    let (got, summary) = run(1);
    let (big_keys, rest): (Vec<String>, Vec<String>) =
        got.into_iter().partition(|k| k.starts_with("big:"));
    assert_eq!(rest, want_other);
    assert_eq!((summary.files, summary.files_failed), (2, 0));
    // The joined newline ends line `whole.first + 10` after the header
    // (key b{first + 9}): that line and the next are one line now.
    let lost = [whole.first + 9, whole.first + 10];
    let want: Vec<String> = (0..whole.n)
        .filter(|i| !lost.contains(i))
        .map(|i| format!("big:b{i}"))
        .collect();
    assert_eq!(big_keys, want);
    assert_eq!(summary.report.skipped, 1);
    fs::remove_dir_all(d).unwrap();
}

/// With several jobs, a file whose parts the files after it leave time
/// for (here 20 MiB, before another of 20 MiB) is read by one job, part
/// after part, each numbering its lines from where the part before it
/// ended: no part counts its newlines first; so is the file at the end,
/// which the file before it leaves time for (a span taken early, from
/// the run's start). The bytes that change between a count and a read in
/// the test above change here too, in one file or the other, and are
/// read as they are, as with one job: the joined line is one skip, no
/// file fails, and both jobs give the same records, in order.
#[test]
fn a_file_read_part_after_part_by_one_job_counts_nothing_first() {
    let d = tmpdir("span");
    let whole = big_session(None);
    // As long as it: each leaves the other time enough.
    let later = whole
        .text
        .replace(r#""id":"big""#, r#""id":"end""#)
        .replace(&"x".repeat(1000), &"y".repeat(1000));
    assert_eq!(later.len(), whole.text.len());
    let texts = [("big", &whole.text), ("end", &later)];
    for (changed, text) in texts {
        let newlines: Vec<u64> = text.match_indices('\n').map(|(i, _)| i as u64).collect();
        let start = newlines[whole.first] + 1;
        let joined = newlines[whole.first + 10];
        let lost = [whole.first + 9, whole.first + 10];
        let mut want = Vec::new();
        for (name, _) in texts {
            want.extend(
                (0..whole.n)
                    .filter(|i| name != changed || !lost.contains(i))
                    .map(|i| format!("{name}:b{i}")),
            );
        }
        for jobs in [2, 1] {
            let why = format!("{changed}.jsonl changed, --jobs {jobs}");
            let root = d.join(format!("{changed}-{jobs}"));
            fs::create_dir_all(&root).unwrap();
            for (name, text) in texts {
                fs::write(root.join(format!("{name}.jsonl")), text).unwrap();
            }
            let path = root.join(format!("{changed}.jsonl"));
            let fault = Faulty(Fault::JoinsAt(start, joined, path.clone()));
            let (got, summary) = keys_of(&root, Arc::new(fault), jobs, true, None);
            assert_eq!(fs::read(&path).unwrap()[joined as usize], b' ', "{why}");
            assert_eq!(
                (summary.files, summary.files_failed),
                (2, 0),
                "{why}: {:?}",
                summary.failures
            );
            assert_eq!(summary.report.skipped, 1, "{why}");
            assert_eq!(got.len(), 2 * whole.n - 2, "{why}");
            assert!(got == want, "{why}");
        }
    }
    fs::remove_dir_all(d).unwrap();
}

/// A file that fails after some of its parts were delivered (here a panic
/// in its second part; an I/O error goes the same way) with a checkpoint
/// kept (a state, or a store): the checkpoint moves past the parts the
/// output holds, so that the next run resumes after them and every record
/// comes exactly once, in order. Before, the file's entry stayed as it
/// was, and the re-run read the file from its start: it emitted the first
/// part's 7,283 records again without deduplication, and with it dropped
/// them as copies (deduplicated 7,283, not resumed).
#[test]
fn a_file_failing_in_a_later_part_resumes_after_what_was_delivered() {
    let d = tmpdir("bomb-state");
    let root = d.join("archive");
    fs::create_dir_all(&root).unwrap();
    let big = big_session(None);
    fs::write(root.join("big-bomb.jsonl"), &big.text).unwrap();
    let (n, first, all) = (big.n, big.first, &big.keys);
    let expect_failed = |s: &mem_ingest::archive::Summary, why: &str| {
        assert_eq!((s.files, s.files_failed), (1, 1), "{why}");
        assert!(
            s.failures[0]
                .1
                .starts_with("internal error while reading it"),
            "{why}: {:?}",
            s.failures
        );
    };
    for dedupe in [true, false] {
        for jobs in [1, 2] {
            let why = format!("dedupe {dedupe}, --jobs {jobs}");
            let state = d.join(format!("state-{dedupe}-{jobs}"));
            let run = |f| keys_of(&root, f, jobs, dedupe, Some(&state));
            // Counts first: a failure then names them, not 18,199 keys.
            let (a, sa) = run(Arc::new(Faulty(Fault::Panics)));
            expect_failed(&sa, &why);
            assert_eq!(a.len(), first, "{why}");
            assert!(a == all[..first], "{why}");
            let (b, sb) = run(Arc::new(Pi));
            assert_eq!(b.len(), n - first, "{why}");
            assert!(b == all[first..], "{why}");
            assert_eq!(
                (sb.files_failed, sb.resumed, sb.report.deduplicated),
                (0, 1, 0),
                "{why}"
            );
            let (c, sc) = run(Arc::new(Pi));
            assert_eq!((c.len(), sc.unchanged), (0, 1), "{why}");
        }
    }
    // The store: its checkpoint, committed with the rows.
    let db = d.join("store.db");
    let run = |f: Arc<dyn Format>| {
        let mut store = mem_ingest_store::SqliteStore::open(&db).unwrap();
        Archive::builder()
            .path(&root)
            .format(f)
            .jobs(2)
            .build()
            .backfill(&mut store)
            .unwrap()
    };
    let sa = run(Arc::new(Faulty(Fault::Panics)));
    expect_failed(&sa, "store");
    assert_eq!(sa.written, first as u64);
    let sb = run(Arc::new(Pi));
    assert_eq!(
        (sb.files_failed, sb.resumed, sb.written),
        (0, 1, (n - first) as u64)
    );
    let rows: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, n as i64);
    fs::remove_dir_all(d).unwrap();
}

/// Deduplication that fails in a later part (a copy's line read again
/// and found changed) fails the file; the fingerprints that part had
/// added to its lineage are taken back with it. Before, they stayed (and
/// were saved), so the re-run, resuming at that part, took its first 910
/// entries for copies of themselves: never emitted.
#[test]
fn a_part_whose_deduplication_fails_leaves_no_fingerprints() {
    let d = tmpdir("dedupe-fails");
    let root = d.join("archive");
    fs::create_dir_all(&root).unwrap();
    // A copy of a line 1 MiB into the second part, right after it.
    let part = mem_ingest::archive::PART_BYTES as usize;
    let big = big_session(Some(part + (1 << 20)));
    fs::write(root.join("big.jsonl"), &big.text).unwrap();
    let (n, first, all, copy_at) = (big.n, big.first, &big.keys, big.copy_at);
    for jobs in [1, 2] {
        let state = d.join(format!("state-{jobs}"));
        let run = |f| keys_of(&root, f, jobs, true, Some(&state));
        let (a, sa) = run(Arc::new(Faulty(Fault::ShiftedAt(copy_at.unwrap()))));
        assert_eq!((sa.files, sa.files_failed), (1, 1), "--jobs {jobs}");
        assert!(
            sa.failures[0].1.contains("changed while it was read"),
            "--jobs {jobs}: {:?}",
            sa.failures
        );
        assert_eq!(a.len(), first, "--jobs {jobs}");
        assert!(a == all[..first], "--jobs {jobs}");
        let (b, sb) = run(Arc::new(Pi));
        assert_eq!(
            (sb.files_failed, sb.resumed, sb.report.deduplicated),
            (0, 1, 1),
            "--jobs {jobs}"
        );
        assert_eq!(b.len(), n - first, "--jobs {jobs}");
        assert!(b == all[first..], "--jobs {jobs}");
    }
    fs::remove_dir_all(d).unwrap();
}

/// The parent of [`fork_before_parent`], by its file name.
const PARENT: &str = "2026-01-01T00-00-00-000Z_sess-a.jsonl";

/// An archive of a fork (`sess-b`: copies `a1`, `a2` of its parent's
/// entries, then `b1`) in a folder that sorts before its parent's
/// (`sess-a`: `a1`, `a2`, `a3`): the fork's root, the parent's path and
/// text.
fn fork_before_parent(d: &Path) -> (PathBuf, PathBuf, String) {
    let header = |id: &str, ts: &str, parent: Option<&str>| {
        let p = parent
            .map(|p| format!(r#","parentSession":"/elsewhere/{p}""#))
            .unwrap_or_default();
        format!(r#"{{"type":"session","version":3,"id":"{id}","timestamp":"{ts}","cwd":"/p"{p}}}"#)
            + "\n"
    };
    let lines = |ids: &[&str]| -> String {
        ids.iter()
            .map(|i| common::user_line(i, &format!("t{i}")))
            .collect()
    };
    let root = d.join("archive");
    let (fa, fb) = (root.join("--a--"), root.join("--b--"));
    fs::create_dir_all(&fa).unwrap();
    fs::create_dir_all(&fb).unwrap();
    let fork =
        header("sess-b", "2026-01-02T00:00:00.000Z", Some(PARENT)) + &lines(&["a1", "a2", "b1"]);
    fs::write(fa.join("2026-01-02T00-00-00-000Z_sess-b.jsonl"), fork).unwrap();
    let parent = header("sess-a", "2026-01-01T00:00:00.000Z", None) + &lines(&["a1", "a2", "a3"]);
    fs::write(fb.join(PARENT), &parent).unwrap();
    (root, fb.join(PARENT), parent)
}

/// A fork listed before its parent drops its copies of the parent's
/// entries, for the parent (read ahead) to emit. When the parent's own
/// read then fails, the fork is read again at the next run: were the
/// parent gone by then, the fork's copies are its to emit; were it back,
/// they are its copies again and the parent emits them. Either way the
/// two runs emit what one run over the final archive does. Before, the
/// fork's entry stayed complete, and with the parent gone its entries
/// `a1` and `a2` were in no output.
#[test]
fn a_fork_whose_parent_fails_is_read_again() {
    for (jobs, parent_back) in [(1, false), (2, false), (1, true), (2, true)] {
        let why = format!("--jobs {jobs}, parent back: {parent_back}");
        let d = tmpdir(&format!("fork-parent-fails-{jobs}-{parent_back}"));
        let (root, parent_path, parent) = fork_before_parent(&d);
        let run = |state: &Path, f| keys_of(&root, f, jobs, true, Some(state));
        let state = d.join("state");
        let (first, s1) = run(&state, Arc::new(Faulty(Fault::FailsOnWorker(PARENT))));
        assert_eq!(first, ["sess-b:b1"], "{why}");
        assert_eq!(s1.files_failed, 1, "{why}");
        assert!(
            s1.failures[0].1.contains("flaky read"),
            "{why}: {:?}",
            s1.failures
        );
        fs::remove_file(&parent_path).unwrap();
        if parent_back {
            fs::write(&parent_path, &parent).unwrap();
        }
        let (second, s2) = run(&state, Arc::new(Pi));
        let want_second: &[&str] = if parent_back {
            &["sess-a:a1", "sess-a:a2", "sess-a:a3"]
        } else {
            &["sess-b:a1", "sess-b:a2"]
        };
        assert_eq!(second, want_second, "{why}");
        assert_eq!(s2.files_failed, 0, "{why}");
        // A third run reads nothing; one run over the final archive emits
        // what the two did.
        let (third, s3) = run(&state, Arc::new(Pi));
        assert_eq!((third.len(), s3.unchanged), (0, s3.files), "{why}");
        let (mut fresh, _) = run(&d.join("fresh"), Arc::new(Pi));
        let mut both = [first, second].concat();
        both.sort();
        fresh.sort();
        assert_eq!(both, fresh, "{why}");
        fs::remove_dir_all(d).unwrap();
    }
}

/// As above, but the run stops (Ctrl-C, its checkpoint saved) after the
/// fork is delivered and before its parent is: the checkpoint records the
/// fork as waiting for its parent. When the next run's read of the parent
/// fails, the fork is read again after it: with the parent gone, the fork
/// emits its copies `a1`, `a2` (`b1` a copy of itself then); with the
/// parent back, the parent emits them. When the parent is gone at the next
/// run, the fork is read again at once. Before, the waiting was not saved,
/// the fork's entry stayed complete, and with the parent gone `a1` and
/// `a2` were in no output.
#[test]
fn a_fork_left_waiting_for_its_parent_by_a_stopped_run_is_read_again() {
    use std::sync::atomic::{AtomicBool, Ordering};
    for jobs in [1, 2] {
        for (fails, parent_back) in [(true, false), (true, true), (false, false)] {
            let why = format!("--jobs {jobs}, fails: {fails}, parent back: {parent_back}");
            let d = tmpdir(&format!("fork-left-waiting-{jobs}-{fails}-{parent_back}"));
            let (root, parent_path, parent) = fork_before_parent(&d);
            let state = d.join("state");
            let run = |f| keys_of(&root, f, jobs, true, Some(&state));
            // The run stops once the fork's records are written.
            let stop = Arc::new(AtomicBool::new(false));
            let mut first = Vec::new();
            let s1 = Archive::builder()
                .path(&root)
                .format(Arc::new(Pi))
                .jobs(jobs)
                .state(&state)
                .stop_flag(stop.clone())
                .build()
                .backfill(&mut ForEach(|r: OwnedRecord| {
                    first.push(r.key);
                    stop.store(true, Ordering::SeqCst);
                }))
                .unwrap();
            assert!(s1.interrupted, "{why}");
            assert_eq!(first, ["sess-b:b1"], "{why}");
            if fails {
                let (second, s2) = run(Arc::new(Faulty(Fault::FailsOnWorker(PARENT))));
                assert_eq!(second, Vec::<String>::new(), "{why}");
                assert_eq!(s2.files_failed, 1, "{why}");
            }
            fs::remove_file(&parent_path).unwrap();
            if parent_back {
                fs::write(&parent_path, &parent).unwrap();
            }
            let (third, s3) = run(Arc::new(Pi));
            let want_third: &[&str] = if parent_back {
                &["sess-a:a1", "sess-a:a2", "sess-a:a3"]
            } else {
                &["sess-b:a1", "sess-b:a2"]
            };
            assert_eq!(third, want_third, "{why}");
            assert_eq!(s3.files_failed, 0, "{why}");
            let (fourth, s4) = run(Arc::new(Pi));
            assert_eq!((fourth.len(), s4.unchanged), (0, s4.files), "{why}");
            let (mut fresh, _) = keys_of(&root, Arc::new(Pi), jobs, true, Some(&d.join("fresh")));
            let mut all = [first, third].concat();
            all.sort();
            fresh.sort();
            assert_eq!(all, fresh, "{why}");
            fs::remove_dir_all(d).unwrap();
        }
    }
    // The store keeps the waiting fork with its checkpoint.
    let d = tmpdir("fork-left-waiting-store");
    let (root, parent_path, _) = fork_before_parent(&d);
    let db = d.join("store.db");
    let run = |f: Arc<dyn Format>, stop: Option<Arc<AtomicBool>>| {
        let mut store = StopAfterWrite(mem_ingest_store::SqliteStore::open(&db).unwrap(), stop);
        let mut b = Archive::builder().path(&root).format(f).jobs(2);
        if let Some(s) = &store.1 {
            b = b.stop_flag(s.clone());
        }
        b.build().backfill(&mut store).unwrap()
    };
    let keys = || -> Vec<String> {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut st = c
            .prepare("SELECT key FROM records ORDER BY row_id")
            .unwrap();
        let rows = st.query_map([], |r| r.get(0)).unwrap();
        rows.map(Result::unwrap).collect()
    };
    let s1 = run(Arc::new(Pi), Some(Arc::new(AtomicBool::new(false))));
    assert!(s1.interrupted);
    assert_eq!(keys(), ["sess-b:b1"]);
    let s2 = run(Arc::new(Faulty(Fault::FailsOnWorker(PARENT))), None);
    assert_eq!((s2.files_failed, s2.written), (1, 0));
    fs::remove_file(&parent_path).unwrap();
    let s3 = run(Arc::new(Pi), None);
    assert_eq!((s3.files_failed, s3.written), (0, 2));
    assert_eq!(keys(), ["sess-b:b1", "sess-b:a1", "sess-b:a2"]);
    fs::remove_dir_all(d).unwrap();
}

/// A sink that sets a run's stop flag once it has written a batch.
struct StopAfterWrite<S>(S, Option<Arc<std::sync::atomic::AtomicBool>>);

impl<S: mem_ingest::sink::Sink> mem_ingest::sink::Sink for StopAfterWrite<S> {
    type Encoder = S::Encoder;

    fn encoder(&self) -> S::Encoder {
        self.0.encoder()
    }
    fn write(
        &mut self,
        batch: <S::Encoder as mem_ingest::sink::Encoder>::Batch,
        dropped: &[usize],
    ) -> Result<bool, Error> {
        let going = self.0.write(batch, dropped)?;
        if let Some(s) = &self.1 {
            s.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(going)
    }
    fn sync(&mut self) -> Result<Option<mem_ingest::sink::Mark>, Error> {
        self.0.sync()
    }
    fn resume_at(
        &mut self,
        mark: Option<&mem_ingest::sink::Mark>,
        exists: bool,
    ) -> Result<(), Error> {
        self.0.resume_at(mark, exists)
    }
    fn pairs_with_checkpoint(&self) -> bool {
        self.0.pairs_with_checkpoint()
    }
    fn checkpoints(&mut self) -> Option<&mut dyn mem_ingest::archive::CheckpointStore> {
        self.0.checkpoints()
    }
    fn finish(&mut self) -> Result<(), Error> {
        self.0.finish()
    }
    fn abandon(&mut self) {
        self.0.abandon()
    }
}

#[test]
fn a_format_of_its_own_wrapping_pi_gets_decoded_text_in_ndjson_exact() {
    // `backfill` to an NDJSON file reads the crate's own formats with record
    // text built escaped, which only the crate's writer, handed each
    // entry's line, knows to copy. A format written outside the crate
    // (`Faulty`, whose `NoCounts` source wraps pi's and hands no line) gets
    // decoded text: its output is pi's, byte for byte.
    let root = tmpdir("wrapped-ndjson");
    fs::create_dir_all(&root).unwrap();
    let header = r#"{"type":"session","version":3,"id":"w1","timestamp":"2026-01-15T10:00:00.000Z","cwd":"/tmp/w"}"#;
    let user = r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-15T10:00:01.000Z","message":{"role":"user","content":"a\nb \"q\" caf\u00e9 \/"}}"#;
    let asst = r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-01-15T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"x\ty"},{"type":"toolCall","id":"t","name":"ls","arguments":{"p":"a\nb"}}]}}"#;
    fs::write(root.join("w.jsonl"), format!("{header}\n{user}\n{asst}\n")).unwrap();
    let write = |format: Arc<dyn Format>, name: &str| -> String {
        let out = root.join(name);
        Archive::builder()
            .path(root.join("w.jsonl"))
            .format(format)
            .build()
            .backfill(&mut mem_ingest::sink::NdjsonFile::create(&out))
            .unwrap();
        fs::read_to_string(out).unwrap()
    };
    let ours = write(Arc::new(Pi), "pi.ndjson");
    let theirs = write(
        Arc::new(Faulty(Fault::ShiftedAt(u64::MAX))),
        "wrapped.ndjson",
    );
    assert_eq!(theirs, ours);
    let texts: Vec<String> = ours
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(texts, ["a\nb \"q\" café /", "x\ty\nls {\"p\":\"a\\nb\"}"]);
    assert!(ours.contains(r#""text":"a\nb \"q\" café /""#), "{ours}");
    fs::remove_dir_all(&root).unwrap();
}

/// A format written outside the library that wraps a built-in one under
/// a name of its own (as a user's fork of Claude Code's or pi's reader
/// would), answering every question as the built-in does.
struct Renamed(&'static str, Arc<dyn Format>);

impl Format for Renamed {
    fn name(&self) -> &'static str {
        self.0
    }
    fn records_cost(&self) -> bool {
        self.1.records_cost()
    }
    fn responses_provider(&self) -> Option<&'static str> {
        self.1.responses_provider()
    }
    fn is_session_file(&self, path: &Path) -> bool {
        self.1.is_session_file(path)
    }
    fn default_archive(&self) -> Result<PathBuf, String> {
        self.1.default_archive()
    }
    fn detect(&self, prefix: &[u8], whole: bool) -> bool {
        self.1.detect(prefix, whole)
    }
    fn open<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        opts: &mem_ingest::SourceOptions,
    ) -> Result<BoxedSource<'d>, SourceError> {
        self.1.open(input, path, opts)
    }
    fn resume<'d>(
        &self,
        input: Input<'d>,
        path: &Path,
        header: &Header,
        context: &[u8],
        byte: u64,
        lines_before: u64,
        opts: &mem_ingest::SourceOptions,
    ) -> BoxedSource<'d> {
        self.1
            .resume(input, path, header, context, byte, lines_before, opts)
    }
    fn needs_running_context(&self) -> bool {
        self.1.needs_running_context()
    }
    fn splits(&self, path: &Path) -> bool {
        self.1.splits(path)
    }
    fn context_before(
        &self,
        file: &fs::File,
        header: &Header,
        byte: u64,
        reach: Option<u64>,
        opts: &mem_ingest::SourceOptions,
    ) -> std::io::Result<Option<Vec<u8>>> {
        self.1.context_before(file, header, byte, reach, opts)
    }
    fn header_is_entry(&self) -> bool {
        self.1.header_is_entry()
    }
    fn lineage(&self, session: &str) -> String {
        self.1.lineage(session)
    }
    fn parent(&self, header: &Header) -> Option<String> {
        self.1.parent(header)
    }
    fn parent_file_name<'h>(&self, header: &'h Header) -> Option<&'h str> {
        self.1.parent_file_name(header)
    }
    fn parent_lookup_name<'n>(&self, file_name: &'n str) -> &'n str {
        self.1.parent_lookup_name(file_name)
    }
    fn parent_copies(
        &self,
        child: &Path,
        header: &Header,
        parent: Option<&Path>,
        opts: &mem_ingest::SourceOptions,
    ) -> mem_ingest::format::ParentCopies {
        self.1.parent_copies(child, header, parent, opts)
    }
}

/// The stats of `root` read with `format` alone: the totals' tokens, and
/// the `by_source` table as (name, tokens) pairs, `None` when the stats
/// have none.
fn tokens_by_source(root: &Path, format: Arc<dyn Format>) -> (u64, Option<Vec<(String, u64)>>) {
    let stats = Archive::builder()
        .path(root)
        .format(format)
        .jobs(2)
        .build()
        .stats()
        .unwrap()
        .to_stats();
    let by_source = stats.by_source.as_ref().map(|b| {
        b.iter()
            .map(|(name, s)| (name.clone(), s.usage.total_tokens))
            .collect()
    });
    (stats.usage.total_tokens, by_source)
}

/// The engine names no format: Claude Code's usage, counted once per
/// response across the archive, is its format's (whatever its name:
/// `Format::responses_provider`), and the stats of a run over one format
/// name it in `by_source` unless the format is pi, whose stats shape was
/// pinned before other formats (`stats_before_sources`, which a wrapper
/// does not inherit).
#[test]
fn stats_name_the_format_that_read_the_usage_whatever_its_name() {
    let d = tmpdir("renamed");
    let claude = d.join("claude");
    let out = gen_corpus::GenCorpus::new()
        .args([
            "--format",
            "claude",
            "--total-mb",
            "1",
            "--seed",
            "7",
            "--archive",
        ])
        .arg(&claude)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let builtin: Arc<dyn Format> = Arc::new(mem_ingest::formats::Claude);
    let (total, by) = tokens_by_source(&claude, builtin.clone());
    assert!(total > 0, "the generated archive has usage");
    assert_eq!(by, Some(vec![("claude".to_owned(), total)]));
    let (wrapped, by) = tokens_by_source(&claude, Arc::new(Renamed("my-claude", builtin)));
    assert_eq!(wrapped, total);
    assert_eq!(by, Some(vec![("my-claude".to_owned(), total)]));

    let pi = d.join("pi");
    fs::create_dir_all(&pi).unwrap();
    fs::copy(
        common::fixtures().join("pi-classic.jsonl"),
        pi.join("s.jsonl"),
    )
    .unwrap();
    let (total, by) = tokens_by_source(&pi, Arc::new(Pi));
    assert!(total > 0, "the fixture has usage");
    assert_eq!(by, None);
    let (wrapped, by) = tokens_by_source(&pi, Arc::new(Renamed("my-pi", Arc::new(Pi))));
    assert_eq!(wrapped, total);
    assert_eq!(by, Some(vec![("my-pi".to_owned(), total)]));
}
