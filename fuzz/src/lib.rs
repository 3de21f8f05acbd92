//! The checks behind the fuzz targets `line`, `reader`, `claude`,
//! `codex`, `qwen`, `copilot`, `redact`, `gemini`, `cursor_cli` (lines and
//! `.txt` documents), and the documents' `amp`, `cline` and `gemini_legacy`.
//!
//! `tests/fuzz_regressions.rs` includes this very file with `#[path]`, so a
//! crash input replays on stable `cargo test` through exactly the code the
//! fuzzer ran. That is why it depends on `mem_ingest_parse`, serde_json
//! (to read an output line back) and std only: the
//! reader target's parameters are decoded from the input by hand
//! ([`ReaderCase`]) rather than with `arbitrary`.

use std::io::{self, Read};

use mem_ingest_parse::{
    Header, OwnedRecord, PiSessionSource, RecordSource, Report, Skip, SourceOptions,
};

/// The valid header line that `line` puts before its input.
pub const HEADER: &[u8] = br#"{"type":"session","version":3,"id":"fuzz-session","timestamp":"2025-01-01T00:00:00Z","cwd":"/fuzz/project"}"#;

/// The path sources are given (so the source name is `pi:fuzz`).
pub const PATH: &str = "fuzz.jsonl";

/// Everything a source gave for one input.
#[derive(Debug)]
pub struct Outcome {
    /// The header, `None` for an empty file.
    pub header: Option<Header>,
    /// Every record, owned.
    pub records: Vec<OwnedRecord>,
    /// The final report.
    pub report: Report,
}

/// Reads a whole session; `Err` holds the error's `Display` text.
pub fn read_all<R: Read>(rdr: R, opts: &SourceOptions) -> Result<Outcome, String> {
    let mut src = PiSessionSource::from_reader_with(rdr, PATH, opts).map_err(|e| e.to_string())?;
    let mut records = Vec::new();
    while let Some(rec) = src.next_record().map_err(|e| e.to_string())? {
        records.push(rec.to_owned_record());
    }
    Ok(Outcome {
        header: src.header().cloned(),
        records,
        report: src.report().clone(),
    })
}

/// `line`: `data` as the second line of a session whose first line is
/// [`HEADER`]. Never panics; the outcome is consistent with the input
/// ([`check_consistent`]); when `data` holds no `\n`, every record sits at
/// line 2, byte `HEADER.len() + 1`, and the report counts 2 lines (1 when
/// `data` is blank); the lean parse of each of its lines agrees with
/// simd-json ([`mem_ingest_parse::agrees_with_simd_json`]); the NDJSON lines
/// written from record text built escaped are the ones written from
/// decoded text ([`mem_ingest_parse::raw_text_agrees`]).
pub fn check_line(data: &[u8]) {
    let mut input = Vec::with_capacity(HEADER.len() + 1 + data.len());
    input.extend_from_slice(HEADER);
    input.push(b'\n');
    input.extend_from_slice(data);
    let out = read_all(&input[..], &SourceOptions::default())
        .unwrap_or_else(|e| panic!("a valid header was rejected: {e}"));
    let header = out.header.as_ref().expect("a header");
    assert_eq!(
        (header.id.as_str(), header.cwd.as_str(), header.version),
        ("fuzz-session", "/fuzz/project", 3)
    );
    check_consistent(&input, &out);
    check_copied_strings(&input);
    for line in data.split(|&c| c == b'\n') {
        if let Err(e) = mem_ingest_parse::agrees_with_simd_json(line) {
            panic!("the lean parse and simd-json differ on {line:?}: {e}");
        }
    }
    match mem_ingest_parse::raw_text_agrees(&input) {
        Ok(n) => assert_eq!(n, out.records.len(), "records read with raw text"),
        Err(e) => panic!("record text built escaped differs: {e}"),
    }
    for r in &out.records {
        check_redaction(&r.text);
        if let Some(c) = &r.command {
            check_redaction(c);
        }
    }
    if !data.contains(&b'\n') {
        assert!(out.records.len() <= 1, "one line gave several records");
        for r in &out.records {
            assert_eq!((r.line, r.byte), (2, HEADER.len() as u64 + 1), "{r:?}");
        }
        let want = if is_blank(data) { 1 } else { 2 };
        assert_eq!(out.report.lines, want, "{:?}", out.report);
    }
}

/// Every string of every record that its line's bytes would give as
/// written ([`mem_ingest_parse::ParsedLine::escaped`]) is exactly what a JSON
/// writer writes for it.
pub fn check_copied_strings(input: &[u8]) {
    let mut src = PiSessionSource::from_reader_with(input, PATH, &SourceOptions::default())
        .unwrap_or_else(|e| panic!("a valid header was rejected: {e}"));
    while let Some((entry, line)) = src.next_entry_parsed().expect("read from memory") {
        let (Some(r), Some(line)) = (&entry.record, line) else {
            continue;
        };
        let fields = [r.text, r.project, r.session, r.key, r.source, r.entry];
        let optional = [
            r.id,
            r.parent_id,
            r.message_role,
            r.provider,
            r.model,
            r.stop_reason,
            r.tool_name,
            r.tool_call_id,
            r.custom_type,
            r.command,
        ];
        let kinds = r.kinds.iter().copied();
        for s in fields
            .into_iter()
            .chain(optional.into_iter().flatten())
            .chain(kinds)
        {
            if let Some(b) = line.escaped(s) {
                assert_eq!(b, json_string(s), "{s:?}");
            }
        }
    }
}

/// `s` as a JSON string, as serde_json and JavaScript write it.
pub fn json_string(s: &str) -> Vec<u8> {
    let mut out = vec![b'"'];
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.push(b'"');
    out
}

/// The input of `reader`, decoded: bytes 0..2 (little-endian) choose the
/// buffer capacity (`1 + n % 4096`), byte 2 the length of the read plan
/// (`n % 33`), the plan follows, and the rest is the file. Short inputs
/// give what they have (capacity 1, no plan).
#[derive(Debug, Clone, Copy)]
pub struct ReaderCase<'a> {
    /// Buffer capacity for `SourceOptions::buffer_capacity`, 1..=4096.
    pub capacity: usize,
    /// Sizes of successive reads, cycled (see [`ShortReads`]).
    pub plan: &'a [u8],
    /// The session file.
    pub file: &'a [u8],
}

impl<'a> ReaderCase<'a> {
    /// Decodes a fuzz input.
    pub fn decode(data: &'a [u8]) -> Self {
        let cap = u16::from_le_bytes([
            data.first().copied().unwrap_or(0),
            data.get(1).copied().unwrap_or(0),
        ]);
        let rest = data.get(2..).unwrap_or(&[]);
        let (plan, file) = match rest.split_first() {
            None => (&[][..], &[][..]),
            Some((n, rest)) => rest.split_at(usize::from(*n % 33).min(rest.len())),
        };
        ReaderCase {
            capacity: 1 + usize::from(cap % 4096),
            plan,
            file,
        }
    }

    /// Encodes a case (capacity 1..=4096, plan of at most 32 bytes), for
    /// building inputs by hand.
    pub fn encode(capacity: usize, plan: &[u8], file: &[u8]) -> Vec<u8> {
        assert!((1..=4096).contains(&capacity) && plan.len() <= 32);
        let cap = u16::try_from(capacity - 1).expect("capacity").to_le_bytes();
        let mut out = vec![cap[0], cap[1], plan.len() as u8];
        out.extend_from_slice(plan);
        out.extend_from_slice(file);
        out
    }
}

/// A reader driven by a plan: each read takes the next plan byte `b`
/// (cycling) and returns at most `b + 1` bytes; `0xFF` returns
/// `ErrorKind::Interrupted` instead, unless the read before was interrupted
/// too (then it returns up to 256 bytes). An empty plan fills the buffer.
#[derive(Debug)]
pub struct ShortReads<'a> {
    data: &'a [u8],
    plan: &'a [u8],
    step: usize,
    interrupted: bool,
}

impl<'a> ShortReads<'a> {
    /// A reader over `data` following `plan`.
    pub fn new(data: &'a [u8], plan: &'a [u8]) -> Self {
        ShortReads {
            data,
            plan,
            step: 0,
            interrupted: false,
        }
    }
}

impl Read for ShortReads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = buf.len();
        if !self.plan.is_empty() {
            let b = self.plan[self.step % self.plan.len()];
            self.step += 1;
            if b == 0xFF && !self.interrupted {
                self.interrupted = true;
                return Err(io::ErrorKind::Interrupted.into());
            }
            n = n.min(usize::from(b) + 1);
        }
        self.interrupted = false;
        let n = n.min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// `reader`: the file read with the case's capacity through
/// [`ShortReads`] gives exactly what reading it in one piece with the
/// default options gives: header, records, report (skips, repairs, counts,
/// usage) or the same error; and that outcome is consistent with the file.
pub fn check_reader(data: &[u8]) {
    let case = ReaderCase::decode(data);
    let whole = read_all(case.file, &SourceOptions::default());
    let opts = SourceOptions::default().buffer_capacity(case.capacity);
    let pieces = read_all(ShortReads::new(case.file, case.plan), &opts);
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.header, b.header, "header differs");
            // Debug text, so that a NaN cost compares equal to itself.
            assert_eq!(
                format!("{:?}", a.records),
                format!("{:?}", b.records),
                "records differ ({case:?})"
            );
            assert_eq!(
                format!("{:?}", a.report),
                format!("{:?}", b.report),
                "reports differ ({case:?})"
            );
            check_consistent(case.file, a);
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "errors differ"),
        _ => panic!("one piece: {whole:?}\nshort reads: {pieces:?}\n{case:?}"),
    }
}

/// Whether `data` (a file or a line) can hit a bug that is known and not
/// fixed yet, so that the fuzz targets can step around it and look for
/// others. The regression tests do not call it: they fail until the fix.
/// None at present (the `repair` panic of
/// `fuzz/regressions/line/repair-trailing-backslash` was fixed in 10cbe9a).
pub fn hits_known_bug(_data: &[u8]) -> bool {
    false
}

/// A blank line holds only spaces, tabs and `\r` (the library's rule).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// The lines of `input` split on `\n` with their offsets (a last empty
/// piece after a final `\n` is no line).
fn lines_of(input: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut byte = 0u64;
    for piece in input.split(|b| *b == b'\n') {
        out.push((byte, piece));
        byte += piece.len() as u64 + 1;
    }
    if out.last().is_some_and(|(_, p)| p.is_empty()) {
        out.pop();
    }
    out
}

/// What must hold for any outcome of a successful read of `input`:
/// the report's invariant (`records + no_record + skipped == lines`),
/// `lines` equal to the non-blank lines of the input (a BOM at byte 0 is
/// ignored), every byte read, and each record and skip at the offset of a
/// non-blank line, in order, with the header's session, project and a key
/// made of the session id and the entry id (or `L<line>`).
pub fn check_consistent(input: &[u8], out: &Outcome) {
    let r = &out.report;
    assert_eq!(
        r.records + r.no_record + r.skipped,
        r.lines,
        "records + no_record + skipped != lines: {r:?}"
    );
    assert_eq!(r.bytes, input.len() as u64, "bytes read");
    let lines = lines_of(input);
    let non_blank = lines
        .iter()
        .filter(|(byte, l)| {
            let l = match byte {
                0 => l.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(l),
                _ => l,
            };
            !is_blank(l)
        })
        .count() as u64;
    let Some(header) = &out.header else {
        assert!(r.empty && r.lines == 0 && out.records.is_empty(), "{r:?}");
        return;
    };
    assert!(!r.empty);
    assert_eq!(r.lines, non_blank, "non-blank lines: {r:?}");
    assert_eq!(r.records, out.records.len() as u64 + r.filtered);
    assert_eq!(r.roles.iter().sum::<u64>(), r.records);
    assert_eq!(r.entries.total(), r.records + r.no_record, "{r:?}");
    assert_eq!(r.skips.len() as u64, r.skipped.min(1000));
    let repaired = out.records.iter().filter(|x| x.repaired).count() as u64;
    assert!(repaired <= r.repaired, "{r:?}");

    let at = |line: u64, byte: u64| {
        let (start, text) = usize::try_from(line)
            .ok()
            .and_then(|n| lines.get(n.checked_sub(1)?))
            .unwrap_or_else(|| panic!("line {line} is past the end"));
        assert_eq!(*start, byte, "line {line} starts at {start}, not {byte}");
        assert!(!is_blank(text), "line {line} is blank");
    };
    let mut last = 0;
    for rec in &out.records {
        at(rec.line, rec.byte);
        assert!(rec.line > last.max(1), "record lines out of order");
        last = rec.line;
        assert_eq!(rec.session, header.id);
        assert_eq!(rec.project, header.cwd);
        assert_eq!(rec.source, "pi:fuzz");
        let key = match &rec.id {
            Some(id) => format!("{}:{id}", header.id),
            None => format!("{}:L{}", header.id, rec.line),
        };
        assert_eq!(rec.key, key);
    }
    let mut last = 0;
    for Skip { line, byte, .. } in &r.skips {
        at(*line, *byte);
        assert!(*line > last, "skips out of order");
        last = *line;
    }
}

/// `claude`: arbitrary bytes as a whole Claude Code transcript (see
/// [`check_headerless`]).
pub fn check_claude(data: &[u8]) {
    use mem_ingest_parse::formats::Claude;
    check_headerless(&Claude, "fuzz-claude.jsonl", data);
}

/// `qwen`: arbitrary bytes as a whole Qwen Code chat file: the checks of
/// [`check_headerless`]; the usage counted is the sum of the records'
/// (only assistant records carry usage, and every usage counted is a
/// record's); the file read in two parts (split after the line that ends
/// past its middle), the second resumed with the first's header, gives
/// the same records and counts as one reading; and a reading that builds
/// no records gives the same entries and counts.
pub fn check_qwen(data: &[u8]) {
    use mem_ingest_parse::format::{Format, Input};
    use mem_ingest_parse::formats::Qwen;
    use mem_ingest_parse::RoleFilter;
    let path = std::path::Path::new("projects/p/chats/fuzz.jsonl");
    let Some((records, whole, full)) = check_headerless(&Qwen, "projects/p/chats/fuzz.jsonl", data)
    else {
        return;
    };
    let mut sum = mem_ingest_parse::Usage::default();
    for r in &records {
        if let Some(u) = &r.usage {
            assert_eq!(r.role, mem_ingest_parse::Role::Assistant, "{r:?}");
            sum.add(u);
        }
    }
    assert_eq!(sum, whole.usage, "usage counted is the records'");
    let opts = SourceOptions::default();
    let none = {
        let o = SourceOptions::default().roles(RoleFilter::NONE);
        let mut src = Qwen.open(Input::Bytes(data), path, &o).expect("in memory");
        let mut n = 0;
        while src.next_entry().expect("in memory").is_some() {
            n += 1;
        }
        (n, src.report().clone())
    };
    assert_eq!(
        codex_counts(&none.1),
        codex_counts(&whole),
        "counts differ when no record is built"
    );
    let Some(nl) = memchr(b'\n', data, data.len() / 2) else {
        return;
    };
    let split = nl + 1;
    let mut first = Qwen
        .open(Input::Bytes(&data[..split]), path, &opts)
        .expect("in memory");
    let mut parts = Vec::new();
    while let Some(r) = first.next_record().expect("in memory") {
        parts.push(r.to_owned_record());
    }
    let (Some(header), Some(full)) = (first.header().cloned(), full) else {
        return;
    };
    if header != full {
        // The header was found past the first part (or not at all in it).
        return;
    }
    let at = first.position();
    assert_eq!(at.byte, split as u64, "the first part read to its end");
    let mut rest = Qwen.resume(
        Input::Bytes(&data[split..]),
        path,
        &header,
        &first.running_context(),
        at.byte,
        at.line,
        &opts,
    );
    while let Some(r) = rest.next_record().expect("in memory") {
        parts.push(r.to_owned_record());
    }
    let mut merged = first.report().clone();
    merged.merge(rest.report());
    assert_eq!(
        format!("{parts:?}"),
        format!("{records:?}"),
        "records differ when read in two parts"
    );
    assert_eq!(
        codex_counts(&merged),
        codex_counts(&whole),
        "counts differ when read in two parts"
    );
}

/// `copilot`: arbitrary bytes as a whole Copilot CLI `events.jsonl`: the
/// checks of [`check_headerless`]; the file read in two parts (split after
/// the line that ends past its middle), the second resumed with the
/// first's header and running context (the cwd and model in force, the
/// last usage snapshots, the output counted in the segment: what a
/// checkpoint saves), gives the same records and counts as one reading;
/// and a reading that builds no records gives the same counts
/// ([`check_lines_resumed`]).
pub fn check_copilot(data: &[u8]) {
    check_lines_resumed(
        &mem_ingest_parse::formats::Copilot,
        "session-state/s/events.jsonl",
        data,
    );
}

/// The path of a Cursor CLI transcript (nested layout) whose slug folder
/// names no folder of any machine: its cwd is the naive decode.
pub const CURSOR_CLI_PATH: &str = "/nonexistent/mem-ingest-fuzz/.cursor/projects/\
                                   nonexistent-fuzz/agent-transcripts/c/c.jsonl";

/// An older plain-text Cursor CLI transcript beside it.
pub const CURSOR_TXT_PATH: &str = "/nonexistent/mem-ingest-fuzz/.cursor/projects/\
                                   nonexistent-fuzz/agent-transcripts/t.txt";

/// `cursor_cli`: arbitrary bytes as a whole Cursor CLI JSONL transcript
/// (`formats::CursorCli`; [`check_lines_resumed`]: three readings alike,
/// a reading in two parts alike, one without records alike), and as an
/// older `.txt` transcript ([`check_document`]).
pub fn check_cursor_cli(data: &[u8]) {
    check_lines_resumed(&mem_ingest_parse::formats::CursorCli, CURSOR_CLI_PATH, data);
    check_document(&mem_ingest_parse::formats::CursorCli, CURSOR_TXT_PATH, data);
}

/// Arbitrary bytes as a whole file of a line format whose context comes
/// from its first bytes: the checks of [`check_headerless`]; a reading
/// that builds no records gives the same counts; and the file read in two
/// parts (split after the line that ends past its middle), the second
/// resumed with the first's header and running context (what a
/// checkpoint saves), gives the same records and counts as one reading.
pub fn check_lines_resumed(format: &dyn mem_ingest_parse::format::Format, name: &str, data: &[u8]) {
    use mem_ingest_parse::format::Input;
    use mem_ingest_parse::RoleFilter;
    let path = std::path::Path::new(name);
    let Some((records, whole, full)) = check_headerless(format, name, data) else {
        return;
    };
    let none = {
        let o = SourceOptions::default().roles(RoleFilter::NONE);
        let mut src = format
            .open(Input::Bytes(data), path, &o)
            .expect("in memory");
        while src.next_entry().expect("in memory").is_some() {}
        src.report().clone()
    };
    assert_eq!(
        codex_counts(&none),
        codex_counts(&whole),
        "counts differ when no record is built"
    );
    let Some(nl) = memchr(b'\n', data, data.len() / 2) else {
        return;
    };
    let split = nl + 1;
    let opts = SourceOptions::default();
    let mut first = format
        .open(Input::Bytes(&data[..split]), path, &opts)
        .expect("in memory");
    let mut parts = Vec::new();
    while let Some(r) = first.next_record().expect("in memory") {
        parts.push(r.to_owned_record());
    }
    let (Some(header), Some(full)) = (first.header().cloned(), full) else {
        return;
    };
    if header != full {
        return;
    }
    let at = first.position();
    assert_eq!(at.byte, split as u64, "the first part read to its end");
    let mut rest = format.resume(
        Input::Bytes(&data[split..]),
        path,
        &header,
        &first.running_context(),
        at.byte,
        at.line,
        &opts,
    );
    while let Some(r) = rest.next_record().expect("in memory") {
        parts.push(r.to_owned_record());
    }
    let mut merged = first.report().clone();
    merged.merge(rest.report());
    assert_eq!(
        format!("{parts:?}"),
        format!("{records:?}"),
        "records differ when read in two parts"
    );
    assert_eq!(
        codex_counts(&merged),
        codex_counts(&whole),
        "counts differ when read in two parts"
    );
}

/// The path of a Gemini CLI chat file that does not exist: a reading
/// takes it as still (every message held at the end is final).
pub const GEMINI_STILL: &str =
    "/nonexistent/mem-ingest-fuzz/.gemini/tmp/fuzz/chats/session-2026-01-01T00-00-fuzz.jsonl";

/// A Gemini CLI chat file of the same name as [`GEMINI_STILL`] holding
/// the bytes read, just written (its modification time now) or still (a
/// day old), in a temporary folder of its own removed when dropped: a
/// reading of a file just written holds the message written last; a held
/// message, once final, is read again from the file (issue 46: its copy
/// is never kept in a checkpoint).
struct GeminiFresh {
    root: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl GeminiFresh {
    fn new(data: &[u8], still: bool) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let root = std::env::temp_dir().join(format!(
            "mem-ingest-fuzz-gemini-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let dir = root.join(".gemini/tmp/fuzz/chats");
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let path = dir.join("session-2026-01-01T00-00-fuzz.jsonl");
        std::fs::write(&path, data).expect("a temporary file");
        if still {
            let day = std::time::Duration::from_secs(86_400);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(std::time::SystemTime::now() - day))
                .expect("a day-old modification time");
        }
        GeminiFresh { root, path }
    }
}

impl Drop for GeminiFresh {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `gemini`: arbitrary bytes as a whole Gemini CLI chat file (messages
/// re-appended under one id, `$set` checkpoints, `$rewindTo`, each message
/// one record when final):
/// - read as a still file, streamed (one byte at a time, one read) and
///   from memory alike ([`three_readings`]); every line an entry without a
///   record or a skip (`lines = no_record + skipped`: the records are
///   counted beside the lines), each record's key `<session>:<id>` once,
///   its line and byte in the file; the usage counted the records' (only
///   assistant records carry usage);
/// - a reading that builds no records gives the same counts and usage
///   rows (the `usage` report's);
/// - read as a file just written, the records are the still reading's
///   first ones (the message written last held), and that reading resumed
///   at its end, with its running context, once the file is still hands
///   out the rest with the same counts;
/// - read in two parts as a file just written (split after the line that
///   ends past the middle), the second resumed with the first's header and
///   running context, the same records and counts as one reading.
pub fn check_gemini(data: &[u8]) {
    use mem_ingest_parse::format::{Format, Input};
    use mem_ingest_parse::formats::Gemini;
    use mem_ingest_parse::RoleFilter;
    let still = std::path::Path::new(GEMINI_STILL);
    let Some((records, whole, _)) = three_readings(&Gemini, GEMINI_STILL, data) else {
        return;
    };
    assert_eq!(records.len() as u64, whole.records, "records handed out");
    assert_eq!(
        whole.no_record + whole.skipped,
        whole.lines,
        "every line accounted for: {whole:?}"
    );
    let mut keys = std::collections::HashSet::new();
    let mut sum = mem_ingest_parse::Usage::default();
    for r in &records {
        assert!(keys.insert(r.key.clone()), "a message twice: {r:?}");
        assert!(r.line >= 1 && r.byte < data.len() as u64 + 1, "{r:?}");
        if let Some(u) = &r.usage {
            assert_eq!(r.role, mem_ingest_parse::Role::Assistant, "{r:?}");
            sum.add(u);
        }
    }
    assert_eq!(sum, whole.usage, "usage counted is the records'");
    let opts = SourceOptions::default();
    // With the usage rows (`usage`), built and not.
    let rows = |o: SourceOptions| {
        let mut src = Gemini
            .open(Input::Bytes(data), still, &o.usage_rows(true))
            .expect("in memory");
        while src.next_entry().expect("in memory").is_some() {}
        src.report().clone()
    };
    let none = rows(SourceOptions::default().roles(RoleFilter::NONE));
    let all = rows(SourceOptions::default());
    assert_eq!(
        codex_counts(&none),
        codex_counts(&whole),
        "counts differ when no record is built"
    );
    assert_eq!(
        format!("{:?}", none.usage_rows),
        format!("{:?}", all.usage_rows),
        "usage rows differ when no record is built"
    );
    // Just written: the message written last is held.
    let fresh = GeminiFresh::new(data, false);
    let fresh = &fresh.path;
    // The same file once still: where a held message is read again.
    let still_copy = GeminiFresh::new(data, true);
    let read_all = |src: &mut mem_ingest_parse::format::BoxedSource<'_>| {
        let mut out = Vec::new();
        while let Some(r) = src.next_record().expect("in memory") {
            out.push(r.to_owned_record());
        }
        out
    };
    let mut held = Gemini
        .open(Input::Bytes(data), fresh, &opts)
        .expect("in memory");
    let mut first = read_all(&mut held);
    assert!(first.len() <= records.len());
    assert_eq!(
        format!("{first:?}"),
        format!("{:?}", &records[..first.len()]),
        "a file just written gives the first records of a still one"
    );
    let (Some(header), at, context) = (
        held.header().cloned(),
        held.position(),
        held.running_context(),
    ) else {
        return;
    };
    let mut merged = held.report().clone();
    let mut later = Gemini.resume(
        Input::Bytes(&data[at.byte as usize..]),
        &still_copy.path,
        &header,
        &context,
        at.byte,
        at.line,
        &opts,
    );
    first.extend(read_all(&mut later));
    merged.merge(later.report());
    assert_eq!(
        format!("{first:?}"),
        format!("{records:?}"),
        "the held messages handed out once the file is still"
    );
    assert_eq!(codex_counts(&merged), codex_counts(&whole));
    // In two parts, just written.
    let Some(nl) = memchr(b'\n', data, data.len() / 2) else {
        return;
    };
    let split = nl + 1;
    let mut one = Gemini
        .open(Input::Bytes(data), fresh, &opts)
        .expect("in memory");
    let one_records = read_all(&mut one);
    let mut a = Gemini
        .open(Input::Bytes(&data[..split]), fresh, &opts)
        .expect("in memory");
    let mut parts = read_all(&mut a);
    let Some(header) = a.header().cloned() else {
        return;
    };
    if Some(&header) != one.header() {
        // The header was found past the first part (or not at all in it).
        return;
    }
    let at = a.position();
    assert_eq!(at.byte, split as u64, "the first part read to its end");
    let mut b = Gemini.resume(
        Input::Bytes(&data[split..]),
        fresh,
        &header,
        &a.running_context(),
        at.byte,
        at.line,
        &opts,
    );
    parts.extend(read_all(&mut b));
    let mut merged = a.report().clone();
    merged.merge(b.report());
    assert_eq!(
        format!("{parts:?}"),
        format!("{one_records:?}"),
        "records differ when read in two parts"
    );
    assert_eq!(
        codex_counts(&merged),
        codex_counts(one.report()),
        "counts differ when read in two parts"
    );
}

/// `codex`: arbitrary bytes as a whole Codex rollout: the checks of
/// [`check_headerless`], and the file read in two parts, the second
/// resumed with the header and the running context the first handed out
/// (as the engine reads a large file, or a file that grew), gives the same
/// records and counts as one reading; read without records, twice (see
/// [`check_codex_without_records`]), the same entries and counts.
pub fn check_codex(data: &[u8]) {
    use mem_ingest_parse::format::{Format, Input};
    use mem_ingest_parse::formats::Codex;
    let path = "rollout-2026-01-01T00-00-00-fuzz.jsonl";
    check_codex_without_records(data, std::path::Path::new(path));
    let Some((records, whole, full)) = check_headerless(&Codex, path, data) else {
        return;
    };
    // Split after the line that ends past the middle.
    let Some(nl) = memchr(b'\n', data, data.len() / 2) else {
        return;
    };
    let split = nl + 1;
    let opts = SourceOptions::default();
    let path = std::path::Path::new(path);
    let mut first = Codex
        .open(Input::Bytes(&data[..split]), path, &opts)
        .expect("in memory");
    let mut parts = Vec::new();
    while let Some(r) = first.next_record().expect("in memory") {
        parts.push(r.to_owned_record());
    }
    let (Some(header), Some(full)) = (first.header().cloned(), full) else {
        return;
    };
    if header != full {
        // The header was found past the first part (or not at all in it).
        return;
    }
    let at = first.position();
    assert_eq!(at.byte, split as u64, "the first part read to its end");
    let context = first.running_context();
    let mut rest = Codex.resume(
        Input::Bytes(&data[split..]),
        path,
        &header,
        &context,
        at.byte,
        at.line,
        &opts,
    );
    while let Some(r) = rest.next_record().expect("in memory") {
        parts.push(r.to_owned_record());
    }
    let mut merged = first.report().clone();
    merged.merge(rest.report());
    assert_eq!(
        format!("{parts:?}"),
        format!("{records:?}"),
        "records differ when read in two parts"
    );
    assert_eq!(
        codex_counts(&merged),
        codex_counts(&whole),
        "counts differ when read in two parts"
    );
}

/// What two readings of a Codex rollout are compared by: every count of
/// their reports (less `filtered`, which the role filter sets).
fn codex_counts(r: &Report) -> String {
    format!(
        "{:?}",
        (
            (r.bytes, r.lines, r.records, r.roles, r.no_record),
            (r.skipped, r.repaired, &r.skips, &r.entries),
            (r.usage, &r.by_model, &r.unknown_roles)
        )
    )
}

/// A Codex reading that builds no records (`stats`), twice: the second
/// knows long tool calls, outputs and reasoning by their bytes (the first
/// put them in the process's memo, as any reading before may have). Both
/// give the entries (fingerprint, line, byte) and counts of a reading that
/// builds records, every record held back; a reading fails as it does.
fn check_codex_without_records(data: &[u8], path: &std::path::Path) {
    use mem_ingest_parse::format::{Format, Input};
    use mem_ingest_parse::formats::Codex;
    use mem_ingest_parse::RoleFilter;
    type Read = (Vec<(u64, u64, u64)>, Report);
    let read = |opts: &SourceOptions| -> Option<Read> {
        let mut src = Codex.open(Input::Bytes(data), path, opts).ok()?;
        let mut entries = Vec::new();
        while let Some(e) = src.next_entry().ok()? {
            entries.push((e.fingerprint, e.line, e.byte));
        }
        Some((entries, src.report().clone()))
    };
    let all = read(&SourceOptions::default());
    for _ in 0..2 {
        let none = read(&SourceOptions::default().roles(RoleFilter::NONE));
        match (&all, &none) {
            (Some((ea, ra)), Some((en, rn))) => {
                assert_eq!(ea, en, "entries differ when no record is built");
                assert_eq!(
                    codex_counts(ra),
                    codex_counts(rn),
                    "counts differ when no record is built"
                );
                assert_eq!((ra.filtered, rn.filtered), (0, rn.records));
            }
            (None, None) => {}
            _ => panic!("a reading failed only when no record is built"),
        }
    }
}

fn memchr(b: u8, data: &[u8], from: usize) -> Option<usize> {
    data.get(from..)?
        .iter()
        .position(|c| *c == b)
        .map(|i| i + from)
}

/// Arbitrary bytes as a whole file of a format whose context comes from
/// the file's first bytes (Claude Code, Codex), read through the format
/// streamed (one byte at a time and in one read) and from memory. Never
/// panics; all three readings give the same records, report and header
/// (or the same error); every non-blank line is accounted for. Returns the
/// records, report and header read.
pub fn check_headerless(
    format: &dyn mem_ingest_parse::format::Format,
    path: &str,
    data: &[u8],
) -> Option<Reading> {
    let (records, r, header) = three_readings(format, path, data)?;
    assert_eq!(records.len() as u64, r.records, "records handed out");
    assert_eq!(
        r.records + r.deduplicated + r.no_record + r.skipped,
        r.lines,
        "every line accounted for: {r:?}"
    );
    for rec in &records {
        assert!(rec.line >= 1 && rec.byte < data.len() as u64 + 1, "{rec:?}");
    }
    Some((records, r, header))
}

/// `data` read through `format` as the file `path` streamed (one byte at
/// a time and in one read) and from memory: never a panic, the same
/// records, report and header (or the same error) all three times; the
/// reading, or `None` for an error.
pub fn three_readings(
    format: &dyn mem_ingest_parse::format::Format,
    path: &str,
    data: &[u8],
) -> Option<Reading> {
    use mem_ingest_parse::format::Input;
    type Read3 = Result<Reading, String>;
    let opts = SourceOptions::default();
    let path = std::path::Path::new(path);
    let read = |input: Input<'_>| -> Read3 {
        let mut src = format.open(input, path, &opts).map_err(|e| e.to_string())?;
        let mut records = Vec::new();
        while let Some(r) = src.next_record().map_err(|e| e.to_string())? {
            records.push(r.to_owned_record());
        }
        Ok((records, src.report().clone(), src.header().cloned()))
    };
    let bytes = read(Input::Bytes(data));
    let whole = read(Input::Reader(Box::new(data)));
    let trickle = read(Input::Reader(Box::new(OneByte(data))));
    assert_eq!(bytes, whole, "streamed and in memory differ");
    assert_eq!(bytes, trickle, "one byte at a time differs");
    bytes.ok()
}

/// What a source gave: its records, its report, its header.
pub type Reading = (Vec<OwnedRecord>, Report, Option<Header>);

/// A reader that hands out one byte per read.
struct OneByte<'d>(&'d [u8]);

impl Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((b, rest)), Some(out)) => {
                *out = *b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

/// `redact`, and the records of `line`: redaction of any text never
/// panics; it inserts one `[REDACTED:<rule id>]` for each secret it
/// reports, whose id is a rule's (a marker the text held may go inside a
/// secret); the text it gives, written by the
/// crate's one JSON escaper into an output line, reads back as JSON to
/// exactly that text; and a text built escaped (the NDJSON writer's raw
/// read) redacts to the same text as the decoded one.
pub fn check_redaction(text: &str) {
    use mem_ingest_parse::redact::{unescape, Redactor};
    let r = Redactor::get();
    // The keyword search (64 bytes a step where the processor has
    // AVX-512) finds what aho-corasick's packed searcher finds.
    assert!(r.keyword_search_agrees(text.as_bytes()), "{text:?}");
    let mut rules = Vec::new();
    let out = r.redact(text, &mut rules);
    let got = out.as_deref().unwrap_or(text);
    assert_eq!(out.is_some(), !rules.is_empty(), "{text:?}");
    // One marker for each secret: a marker the text held may lie inside a
    // secret (and go with it), never more than that.
    let marks = |s: &str| s.matches("[REDACTED:").count();
    assert!(
        marks(got) >= rules.len() && marks(got) <= marks(text) + rules.len(),
        "{text:?} -> {got:?}"
    );
    for &i in &rules {
        let id = r.rule_ids()[i];
        assert!(
            got.contains(&format!("[REDACTED:{id}]")),
            "{got:?} lacks {id}"
        );
    }
    // Into an output line, and back.
    let mut line = b"{\"text\":".to_vec();
    mem_ingest_parse::write_json_string(&mut line, got);
    line.extend_from_slice(b"}\n");
    let v: serde_json::Value = serde_json::from_slice(&line)
        .unwrap_or_else(|e| panic!("redacted text broke its line ({e}): {line:?}"));
    assert_eq!(v["text"].as_str(), Some(got));
    // Built escaped, as the NDJSON writer's raw read builds it.
    let mut escaped = Vec::new();
    mem_ingest_parse::write_json_string(&mut escaped, text);
    let escaped = std::str::from_utf8(&escaped[1..escaped.len() - 1]).expect("escaped is UTF-8");
    assert_eq!(unescape(escaped), text);
    let mut again = Vec::new();
    let from_escaped = r.redact_escaped(escaped, &mut again);
    assert_eq!(from_escaped.as_deref(), out.as_deref(), "{text:?}");
    assert_eq!(again, rules);
}

/// `redact`: arbitrary bytes (lossily UTF-8) as a record's text, alone and
/// after a planted secret of each kind's prefix (so that the fuzzer starts
/// inside the rules' windows).
pub fn check_redact(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    check_redaction(&text);
    for prefix in [
        "AKIA",
        "ghp_",
        "sk-ant-api03-",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "postgres://u:",
        "DB_PASSWORD=",
        "eyJ",
        "xoxb-1234567890-",
        "sk_live_",
    ] {
        check_redaction(&format!("{prefix}{text}"));
    }
}

// ---------------------------------------------------------------------------
// Documents (issue 45): Amp threads, Cline transcripts, Gemini CLI's legacy
// sessions, each one JSON document rewritten whole.

/// Where the document targets' inputs are read from (paths that do not
/// exist: no manifest, task history or project file beside them).
pub const AMP_PATH: &str = "/nonexistent/mem-ingest-fuzz/amp/threads/T-fuzz.json";
/// A Cline SDK transcript's path.
pub const CLINE_SDK_PATH: &str =
    "/nonexistent/mem-ingest-fuzz/cline/sessions/1784094124598_fuzz/1784094124598_fuzz.messages.json";
/// A Cline legacy task's transcript's path.
pub const CLINE_LEGACY_PATH: &str =
    "/nonexistent/mem-ingest-fuzz/cline/tasks/1767225600000/api_conversation_history.json";
/// A Gemini CLI legacy session's path.
pub const GEMINI_LEGACY_PATH: &str =
    "/nonexistent/mem-ingest-fuzz/.gemini/tmp/fuzz/chats/session-2026-01-01T00-00-fuzz.json";

/// What separates two versions of a document in a document target's
/// input (never inside valid JSON: a raw newline only comes between
/// tokens, and `--` is no token).
pub const REWRITE: &[u8] = b"\n--\n";

/// An entry handed out, owned: fingerprint, line, revision, record.
type Handed = (u64, u64, bool, Option<OwnedRecord>);

/// A document source's entries, report, header and running context.
type DocReading = (Vec<Handed>, Report, Option<Header>, Vec<u8>);

fn drain(mut src: mem_ingest_parse::format::BoxedSource<'_>) -> Option<DocReading> {
    let mut out = Vec::new();
    while let Some(e) = src.next_entry().ok()? {
        out.push((
            e.fingerprint,
            e.line,
            e.revision,
            e.record.map(|r| r.to_owned_record()),
        ));
    }
    Some((
        out,
        src.report().clone(),
        src.header().cloned(),
        src.running_context(),
    ))
}

/// The message's key within its document: the record's key less its
/// session (`<session>:<key>`).
fn item_key(r: &OwnedRecord) -> &str {
    r.key
        .strip_prefix(r.session.as_str())
        .and_then(|k| k.strip_prefix(':'))
        .unwrap_or(&r.key)
}

/// Arbitrary bytes as a document of `format` at `path`; with
/// [`REWRITE`] in them, the bytes before it are a first version and those
/// after a rewrite of it. For each version ([`check_document_alone`]),
/// and for the rewrite read with the first version's running context
/// (as a checkpoint resumes it):
/// - the same report as the rewrite read alone (a document's counts are
///   always its whole current content's);
/// - each entry handed out is the rewrite's entry at its line (the same
///   record), each line at most once: nothing doubled;
/// - every message of the rewrite with a record whose key the first
///   version did not hand out is handed out: nothing lost;
/// - read again with the context it leaves, nothing is handed out.
pub fn check_document(format: &dyn mem_ingest_parse::format::Format, path: &str, data: &[u8]) {
    use mem_ingest_parse::format::Input;
    let (a, b) = match data.windows(REWRITE.len()).position(|w| w == REWRITE) {
        Some(i) => (&data[..i], &data[i + REWRITE.len()..]),
        None => (data, data),
    };
    check_document_alone(format, path, a);
    if a != b {
        check_document_alone(format, path, b);
    }
    let opts = SourceOptions::default();
    let p = std::path::Path::new(path);
    let Some((first, _, Some(header), context)) =
        format.open(Input::Bytes(a), p, &opts).ok().and_then(drain)
    else {
        return;
    };
    let Some((fresh, fresh_report, _, _)) =
        format.open(Input::Bytes(b), p, &opts).ok().and_then(drain)
    else {
        return;
    };
    let resumed = format.resume(Input::Bytes(b), p, &header, &context, 0, 0, &opts);
    let Some((again, report, header_b, context_b)) = drain(resumed) else {
        return;
    };
    assert_eq!(
        codex_counts(&report),
        codex_counts(&fresh_report),
        "a rewrite read with a context counts as read alone"
    );
    let at_line: std::collections::HashMap<u64, &Handed> = fresh.iter().map(|e| (e.1, e)).collect();
    let mut lines = std::collections::HashSet::new();
    for e in &again {
        assert!(
            lines.insert(e.1),
            "line {} handed out twice: {again:?}",
            e.1
        );
        let f = at_line
            .get(&e.1)
            .unwrap_or_else(|| panic!("an entry at no line of the rewrite: {e:?}"));
        assert_eq!(
            format!("{:?}", e.3),
            format!("{:?}", f.3),
            "not the rewrite's record at its line"
        );
    }
    let before: std::collections::HashSet<&str> = first
        .iter()
        .filter_map(|e| e.3.as_ref())
        .map(item_key)
        .collect();
    for f in &fresh {
        if let Some(r) = &f.3 {
            if !before.contains(item_key(r)) {
                assert!(lines.contains(&f.1), "a new message not handed out: {r:?}");
            }
        }
    }
    // Read once more with what that left: nothing.
    // A blank rewrite keeps the header read before.
    let header_b = header_b.unwrap_or(header);
    let (nothing, ..) =
        drain(format.resume(Input::Bytes(b), p, &header_b, &context_b, 0, 0, &opts))
            .expect("read before");
    assert!(nothing.is_empty(), "handed out again: {nothing:?}");
}

/// One version of a document: read from memory, streamed in one read and
/// one byte at a time alike ([`three_readings`]); every message counted
/// once (`records + no_record + skipped == lines`); at most the records
/// counted handed out (a message still being written waits), each at a
/// line of the document; with every counted record handed out, the usage
/// counted is theirs (Amp's ledger aside); a reading that builds no
/// records gives the same counts; read again with its own running
/// context, nothing is handed out and the counts are the same.
pub fn check_document_alone(
    format: &dyn mem_ingest_parse::format::Format,
    path: &str,
    data: &[u8],
) {
    use mem_ingest_parse::format::Input;
    use mem_ingest_parse::RoleFilter;
    let Some((records, r, _)) = three_readings(format, path, data) else {
        return;
    };
    assert_eq!(
        r.records + r.no_record + r.skipped,
        r.lines,
        "every message accounted for: {r:?}"
    );
    assert!(records.len() as u64 <= r.records, "{r:?}");
    for rec in &records {
        assert!(rec.line >= 1 && rec.line <= r.lines, "{rec:?}");
    }
    if records.len() as u64 == r.records && format.name() != "amp" {
        let mut sum = mem_ingest_parse::Usage::default();
        for rec in &records {
            if let Some(u) = &rec.usage {
                sum.add(u);
            }
        }
        assert_eq!(sum, r.usage, "usage counted is the records'");
    }
    let p = std::path::Path::new(path);
    let none = format
        .open(
            Input::Bytes(data),
            p,
            &SourceOptions::default().roles(RoleFilter::NONE),
        )
        .ok()
        .and_then(drain)
        .expect("read before");
    assert_eq!(
        codex_counts(&none.1),
        codex_counts(&r),
        "counts differ when no record is built"
    );
    let opts = SourceOptions::default();
    let (_, _, header, context) = format
        .open(Input::Bytes(data), p, &opts)
        .ok()
        .and_then(drain)
        .expect("read before");
    let Some(header) = header else {
        // Blank: nothing read, nothing to resume.
        assert!(records.is_empty() && r.empty, "no header: {r:?}");
        return;
    };
    let (again, report, ..) =
        drain(format.resume(Input::Bytes(data), p, &header, &context, 0, 0, &opts))
            .expect("read before");
    assert!(again.is_empty(), "handed out again: {again:?}");
    assert_eq!(codex_counts(&report), codex_counts(&r));
}

/// `amp`: arbitrary bytes as an Amp thread ([`check_document`]).
pub fn check_amp(data: &[u8]) {
    check_document(&mem_ingest_parse::formats::Amp, AMP_PATH, data);
}

/// `cline`: arbitrary bytes as a Cline SDK transcript and as a legacy
/// task's transcript ([`check_document`]).
pub fn check_cline(data: &[u8]) {
    check_document(&mem_ingest_parse::formats::Cline, CLINE_SDK_PATH, data);
    check_document(&mem_ingest_parse::formats::Cline, CLINE_LEGACY_PATH, data);
}

/// `gemini_legacy`: arbitrary bytes as a Gemini CLI legacy session
/// ([`check_document`]).
pub fn check_gemini_legacy(data: &[u8]) {
    check_document(&mem_ingest_parse::formats::Gemini, GEMINI_LEGACY_PATH, data);
}
