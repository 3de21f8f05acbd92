//! Integration tests of the pi session source: the task card's acceptance
//! tests a1 to a7, conformance against pi's own loader (numbers written
//! from `fixtures/oracle/*.json`, produced by `shared/pi-reference/oracle.mjs`
//! with pi 1.6.0), the pinned text rules on the hand-built fixture, the
//! equivalence of sources and buffer sizes, and damage built from strings.
//!
//! Everything sits in `mod pi_source` so that `cargo test -p mem-ingest
//! pi_source` (a filter on test paths) selects every test of this file.

#[path = "common/shared.rs"]
mod shared;

mod pi_source {
    use std::collections::BTreeMap;
    use std::io::{self, Read};
    use std::path::{Path, PathBuf};

    // A source's errors are the parsing crate's (`SourceError`), which the
    // engine's `mem_ingest::Error` wraps.
    use mem_ingest::{
        MmapSessionSource, OwnedRecord, PiSessionSource, RecordSource, Report, Role, SkipReason,
        SourceError as Error, SourceErrorKind as ErrorKind, SourceOptions, Usage,
    };

    // -----------------------------------------------------------------------
    // Helpers

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join(name)
    }

    /// The folder holding the two real sessions: `MEM_INGEST_REAL_DIR`,
    /// else `real/` of the shared folder (`tests/common/shared.rs`).
    fn real_dir() -> PathBuf {
        super::shared::real_dir()
    }

    /// A real session; panics (fails the test) when it is missing, so an
    /// `--include-ignored` run without the files cannot pass.
    fn real(name: &str) -> PathBuf {
        let p = real_dir().join(name);
        assert!(
            p.is_file(),
            "real session {} is missing: set MEM_INGEST_REAL_DIR to the folder holding it",
            p.display()
        );
        p
    }

    /// A fresh temporary folder for one test (std only: no tempfile crate).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let p =
                std::env::temp_dir().join(format!("mem-ingest-it-{}-{}", std::process::id(), name));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn drain<S: RecordSource>(mut src: S) -> (Vec<OwnedRecord>, Report) {
        let mut out = Vec::new();
        while let Some(r) = src.next_record().expect("read error") {
            out.push(r.to_owned_record());
        }
        (out, src.report().clone())
    }

    fn read_path(path: &Path) -> Result<(Vec<OwnedRecord>, Report), Error> {
        read_path_with(path, &SourceOptions::default())
    }

    fn read_path_with(
        path: &Path,
        opts: &SourceOptions,
    ) -> Result<(Vec<OwnedRecord>, Report), Error> {
        PiSessionSource::open_with(path, opts).map(drain)
    }

    fn read_bytes(bytes: &[u8]) -> Result<(Vec<OwnedRecord>, Report), Error> {
        read_bytes_with(bytes, &SourceOptions::default())
    }

    fn read_bytes_with(
        bytes: &[u8],
        opts: &SourceOptions,
    ) -> Result<(Vec<OwnedRecord>, Report), Error> {
        PiSessionSource::from_reader_with(bytes, "mem/test-session.jsonl", opts).map(drain)
    }

    fn read_mmap(path: &Path) -> Result<(Vec<OwnedRecord>, Report), Error> {
        // SAFETY: fixtures and temporary files, not written while mapped.
        unsafe { MmapSessionSource::open(path, &SourceOptions::default()) }.map(drain)
    }

    /// What the oracle says for one file, in our terms.
    struct Expect {
        /// `entryCountsByType`, as pi reports it.
        entries: &'static [(&'static str, u64)],
        /// Our roles in the order of `Role::ALL`: user, assistant,
        /// tool_result, bash_execution, custom, system (see `roles`).
        roles: [u64; 6],
        /// Non-blank lines.
        lines: u64,
        skipped: u64,
        repaired: u64,
    }

    /// Our role counts from pi's: `toolResult` is our tool_result; our
    /// custom is pi's `custom` role plus `custom_message` entries; our
    /// system is pi's `system` role plus `compaction` and `branch_summary`
    /// entries.
    #[allow(clippy::too_many_arguments)]
    fn roles(
        user: u64,
        assistant: u64,
        tool_result: u64,
        bash: u64,
        custom_role: u64,
        custom_message: u64,
        system_role: u64,
        compaction: u64,
        branch_summary: u64,
    ) -> [u64; 6] {
        [
            user,
            assistant,
            tool_result,
            bash,
            custom_role + custom_message,
            system_role + compaction + branch_summary,
        ]
    }

    fn entries_of(report: &Report) -> BTreeMap<String, u64> {
        report
            .entries
            .iter()
            .map(|(k, n)| (k.to_owned(), n))
            .collect()
    }

    fn assert_invariant(report: &Report, what: &str) {
        assert_eq!(
            report.records + report.no_record + report.skipped,
            report.lines,
            "{what}: records + no_record + skipped == lines"
        );
        assert_eq!(
            report.roles.iter().sum::<u64>(),
            report.records,
            "{what}: roles sum to records"
        );
        assert_eq!(
            report.entries.total(),
            report.records + report.no_record,
            "{what}: every parsed line has an entry type"
        );
    }

    fn check(report: &Report, records: &[OwnedRecord], e: &Expect, what: &str) {
        let want: BTreeMap<String, u64> = e
            .entries
            .iter()
            .map(|(k, n)| ((*k).to_owned(), *n))
            .collect();
        assert_eq!(entries_of(report), want, "{what}: entries by type");
        assert_eq!(report.roles, e.roles, "{what}: records by role");
        assert_eq!(report.lines, e.lines, "{what}: lines");
        assert_eq!(report.skipped, e.skipped, "{what}: skipped");
        assert_eq!(report.repaired, e.repaired, "{what}: repaired");
        assert_eq!(report.records, records.len() as u64, "{what}: records out");
        assert!(!report.empty, "{what}: not empty");
        assert_invariant(report, what);
        for role in Role::ALL {
            let n = records.iter().filter(|r| r.role == role).count() as u64;
            assert_eq!(n, report.role(role), "{what}: handed-out {role}");
        }
    }

    /// Line numbers and byte offsets as a naive split sees them:
    /// `(line, byte, bytes)` for every line.
    fn split_lines(bytes: &[u8]) -> Vec<(u64, u64, &[u8])> {
        let mut out = Vec::new();
        let mut byte = 0u64;
        for (i, l) in bytes.split(|b| *b == b'\n').enumerate() {
            out.push((i as u64 + 1, byte, l));
            byte += l.len() as u64 + 1;
        }
        out
    }

    fn is_surrogate_line(text: &str) -> bool {
        text.contains('\u{FFFD}')
    }

    // Lines with a lone surrogate escape, from fixtures/README.md.
    const PI_1X_SURROGATE_LINES: [u64; 27] = [
        22, 50, 165, 166, 196, 228, 236, 239, 242, 243, 255, 289, 299, 323, 354, 413, 416, 448,
        477, 479, 483, 521, 550, 583, 649, 672, 673,
    ];
    const PI_CLASSIC_SURROGATE_LINES: [u64; 10] = [33, 47, 75, 123, 135, 148, 152, 186, 241, 274];
    const SAMPLE_SURROGATE_LINES: [u64; 9] = [26, 27, 31, 46, 50, 124, 125, 131, 138];

    /// Every record of a surrogate line is marked repaired and holds
    /// U+FFFD; no other record is repaired.
    fn check_surrogates(records: &[OwnedRecord], lines: &[u64], shift: u64, what: &str) {
        let lines: Vec<u64> = lines.iter().map(|l| l + shift).collect();
        for r in records {
            let listed = lines.contains(&r.line);
            assert_eq!(r.repaired, listed, "{what}: line {} repaired", r.line);
            if listed {
                // The lone surrogate sits in the text of every such line
                // that gives a record (a message's content or a summary).
                assert!(
                    is_surrogate_line(&r.text),
                    "{what}: line {} keeps U+FFFD in its text",
                    r.line
                );
            }
        }
    }

    // -----------------------------------------------------------------------
    // Oracle numbers (fixtures/oracle/*.json), written out.

    // oracle/pi-1x.json: entryCountsByType, messageCountsByRole
    // {system 10, user 113, assistant 221, toolResult 241, bashExecution 14,
    // custom 6}; 698 lines, none skipped; 27 lone-surrogate lines.
    const PI_1X: Expect = Expect {
        entries: &[
            ("session", 1),
            ("model_change", 7),
            ("thinking_level_change", 7),
            ("message", 605),
            ("session_info", 2),
            ("custom", 26),
            ("usage", 7),
            ("context_edit", 7),
            ("label", 15),
            ("custom_message", 16),
            ("compaction", 3),
            ("branch_summary", 2),
        ],
        roles: [113, 221, 241, 14, 6 + 16, 10 + 3 + 2],
        lines: 698,
        skipped: 0,
        repaired: 27,
    };

    // oracle/pi-classic.json: roles {user 62, assistant 119, toolResult 111,
    // bashExecution 8, custom 3}; 347 lines; 10 lone-surrogate lines.
    const PI_CLASSIC: Expect = Expect {
        entries: &[
            ("session", 1),
            ("model_change", 4),
            ("thinking_level_change", 4),
            ("message", 303),
            ("session_info", 2),
            ("custom", 14),
            ("label", 7),
            ("custom_message", 8),
            ("compaction", 2),
            ("branch_summary", 2),
        ],
        roles: [62, 119, 111, 8, 3 + 8, 2 + 2],
        lines: 347,
        skipped: 0,
        repaired: 10,
    };

    // oracle/sample-all-types.json (= bad-sample-all-types.json): roles
    // {system 3, user 25, assistant 45, toolResult 47, bashExecution 2,
    // custom 1}; 147 lines; 9 lone-surrogate lines.
    const SAMPLE_ENTRIES: &[(&str, u64)] = &[
        ("session", 1),
        ("model_change", 2),
        ("thinking_level_change", 2),
        ("message", 123),
        ("session_info", 2),
        ("custom", 5),
        ("usage", 1),
        ("compaction", 3),
        ("context_edit", 1),
        ("label", 3),
        ("branch_summary", 2),
        ("custom_message", 2),
    ];
    const SAMPLE_ROLES: [u64; 6] = [25, 45, 47, 2, 1 + 2, 3 + 3 + 2];
    const SAMPLE: Expect = Expect {
        entries: SAMPLE_ENTRIES,
        roles: SAMPLE_ROLES,
        lines: 147,
        skipped: 0,
        repaired: 9,
    };

    // oracle/hand-built.json: roles {system 2, user 5, assistant 6,
    // toolResult 2, bashExecution 2, custom 1, futureRole 1}.
    const HAND_BUILT: Expect = Expect {
        entries: &[
            ("session", 1),
            ("model_change", 1),
            ("thinking_level_change", 1),
            ("message", 19),
            ("custom_message", 2),
            ("custom", 1),
            ("label", 1),
            ("session_info", 1),
            ("usage", 1),
            ("context_edit", 2),
            ("compaction", 1),
            ("branch_summary", 1),
            ("future_entry", 1),
        ],
        roles: [5, 6, 2, 2, 1 + 2, 2 + 1 + 1],
        lines: 33,
        skipped: 0,
        repaired: 0,
    };

    const SAMPLE_SESSION: &str = "01a229a8-a806-70aa-8697-32dd52d39d57";

    // -----------------------------------------------------------------------
    // Acceptance tests of the task card

    /// The project is the header's `cwd`, never the decoded folder name:
    /// the file sits in `--tmp-my-project--`, which would decode to
    /// `/tmp/my/project`.
    #[test]
    fn a1_project_from_cwd() {
        let tmp = TempDir::new("a1");
        let dir = tmp.0.join("--tmp-my-project--");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("2026-01-15T10-00-00-000Z_hand-built-0001.jsonl");
        std::fs::copy(fixture("hand-built.jsonl"), &path).unwrap();

        let src = PiSessionSource::open(&path).unwrap();
        assert_eq!(src.header().unwrap().cwd, "/tmp/my-project");
        let (records, report) = drain(src);
        assert_eq!(records.len(), 22);
        assert_eq!(report.records, 22);
        for r in &records {
            assert_eq!(r.project, "/tmp/my-project", "line {}", r.line);
            assert_eq!(r.session, "hand-built-0001");
            assert_eq!(r.source, "pi:2026-01-15T10-00-00-000Z_hand-built-0001");
        }

        // The pi-written fixture says the same.
        let src = PiSessionSource::open(fixture("pi-1x.jsonl")).unwrap();
        assert_eq!(src.header().unwrap().cwd, "/tmp/my-project");
        assert_eq!(
            src.header().unwrap().id,
            "01a229a8-a694-717d-ada9-2fc296ed4e4b"
        );
    }

    /// Exact counts per role on the volume fixture written by pi's own
    /// writer (oracle/pi-1x.json).
    #[test]
    fn a2_role_counts() {
        let (records, report) = read_path(&fixture("pi-1x.jsonl")).unwrap();
        assert_eq!(report.role(Role::User), 113);
        assert_eq!(report.role(Role::Assistant), 221);
        assert_eq!(report.role(Role::ToolResult), 241);
        assert_eq!(report.role(Role::BashExecution), 14);
        // 6 `custom` messages + 16 `custom_message` entries.
        assert_eq!(report.role(Role::Custom), 6 + 16);
        // 10 `system` messages + 3 compaction + 2 branch_summary entries.
        assert_eq!(report.role(Role::System), 10 + 3 + 2);
        assert_eq!(report.records, 626);
        check(&report, &records, &PI_1X, "pi-1x");
        // The original roles, as pi counts them (messageCountsByRole).
        let mut by_role: BTreeMap<&str, u64> = BTreeMap::new();
        for r in &records {
            if let Some(m) = r.message_role.as_deref() {
                *by_role.entry(m).or_default() += 1;
            }
        }
        let want: BTreeMap<&str, u64> = [
            ("system", 10),
            ("user", 113),
            ("assistant", 221),
            ("toolResult", 241),
            ("bashExecution", 14),
            ("custom", 6),
        ]
        .into_iter()
        .collect();
        assert_eq!(by_role, want);
        assert!(report.unknown_roles.is_empty());
    }

    /// String content, block arrays and structured tool results all flatten
    /// to non-empty text.
    #[test]
    fn a3_content_shapes() {
        let (records, _) = read_path(&fixture("hand-built.jsonl")).unwrap();
        let at = |line: u64| records.iter().find(|r| r.line == line).unwrap();
        // String content.
        assert_eq!(at(5).kinds, ["text"]);
        assert!(at(5).text.starts_with("Fix the \"bug\""));
        // Block array: thinking, text, toolCall.
        assert_eq!(at(6).kinds, ["thinking", "text", "toolCall"]);
        assert!(at(6).text.contains("bash {\"command\":"));
        // Structured tool result: two text blocks.
        assert_eq!(at(7).role, Role::ToolResult);
        assert_eq!(
            at(7).text,
            "total 8\n-rw-r--r-- 1 me me 42 Cargo.toml\nsrc/"
        );
        // Text + image.
        assert_eq!(
            at(8).text,
            "Here is a screenshot:\n[image image/png, 12 bytes]"
        );

        // On pi's own output: every record with a text-bearing block has
        // text; images never leak their base64.
        let (records, _) = read_path(&fixture("pi-1x.jsonl")).unwrap();
        let mut shapes = BTreeMap::new();
        for r in &records {
            *shapes.entry(r.kinds.join(",")).or_insert(0u64) += 1;
            let has_text = r.kinds.iter().any(|k| k == "text" || k == "toolCall");
            let shape_role = matches!(r.role, Role::User | Role::Assistant | Role::ToolResult);
            if (has_text && shape_role) || r.role == Role::BashExecution {
                assert!(!r.text.is_empty(), "line {} has empty text", r.line);
            }
            assert!(r.text.len() < 70_000, "line {}: base64 leaked", r.line);
            if r.kinds.iter().any(|k| k == "image") {
                assert!(r.text.contains("[image image/"), "line {}", r.line);
            }
        }
        let n = |k: &str| shapes.get(k).copied().unwrap_or(0);
        // messageContentShapes of oracle/pi-1x.json (block kinds in first
        // appearance order, where pi sorts them).
        assert_eq!(
            n("thinking,text,toolCall") + n("text,thinking,toolCall") + n("thinking,toolCall,text"),
            104
        );
        assert_eq!(n("thinking"), 5);
    }

    /// A real fixture plus half a JSON object: every prior record, and
    /// exactly one skip, Truncated, at the exact line and byte.
    #[test]
    fn a4_truncated_tail() {
        let clean = std::fs::read(fixture("pi-1x.jsonl")).unwrap();
        let (want, want_report) = read_bytes(&clean).unwrap();
        let mut bytes = clean.clone();
        bytes.extend_from_slice(br#"{"type":"message","id":"ffff0001","parentId":"aec5"#);
        let (got, report) = read_bytes(&bytes).unwrap();
        assert_eq!(got.len(), 626);
        assert_eq!(got, want);
        assert_eq!(report.skipped, 1);
        assert_eq!(report.skips.len(), 1);
        let s = &report.skips[0];
        assert_eq!((s.line, s.byte), (699, 1_585_717));
        assert_eq!(s.byte, clean.len() as u64);
        assert!(
            matches!(s.reason, SkipReason::Truncated(_)),
            "{:?}",
            s.reason
        );
        assert_eq!(report.lines, want_report.lines + 1);
        assert_eq!(report.records, want_report.records);
        assert_eq!(report.bytes, bytes.len() as u64);
        assert_invariant(&report, "a4");

        // The same cut in the middle of a line followed by more lines is
        // Malformed, not Truncated: only a last line without `\n` is a
        // partial write.
        let mut mid = clean.clone();
        mid.extend_from_slice(b"{\"type\":\"mess\n");
        mid.extend_from_slice(clean.split(|b| *b == b'\n').nth(4).unwrap());
        mid.push(b'\n');
        let (_, report) = read_bytes(&mid).unwrap();
        assert_eq!(report.skipped, 1);
        assert!(matches!(report.skips[0].reason, SkipReason::Malformed(_)));
        assert_eq!(report.records, 627);
    }

    /// A file whose first line is a `message`: an error naming the path.
    #[test]
    fn a5_missing_header() {
        let path = fixture("no-header/no-header-first-line-message.jsonl");
        let err = PiSessionSource::open(&path).unwrap_err();
        assert_eq!(err.path(), path);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}:1:0: ", path.display())),
            "{msg}"
        );
        assert!(msg.contains("\"model_change\""), "{msg}");
        assert!(matches!(
            err.kind(),
            ErrorKind::NoHeader {
                line: 1,
                byte: 0,
                ..
            }
        ));
        // SAFETY: a temporary file of this test, not written while mapped.
        let err = unsafe { MmapSessionSource::open(&path, &SourceOptions::default()) }.unwrap_err();
        assert_eq!(err.path(), path);

        // A file whose first line is a `message` (hand-built without its
        // first three lines), on disk and from a reader.
        let text = std::fs::read_to_string(fixture("hand-built.jsonl")).unwrap();
        let from_message: String = text.split_inclusive('\n').skip(3).collect();
        assert!(from_message.starts_with(r#"{"type":"message""#));
        let tmp = TempDir::new("a5");
        let path = tmp.0.join("headless.jsonl");
        std::fs::write(&path, &from_message).unwrap();
        let err = PiSessionSource::open(&path).unwrap_err();
        assert_eq!(err.path(), path);
        assert_eq!(
            err.to_string(),
            format!(
                "{}:1:0: not a session header: first entry has type \"message\"",
                path.display()
            )
        );
        // From a reader too: the given path is named.
        let err =
            read_bytes(br#"{"type":"message","id":"a","message":{"role":"user","content":"x"}}"#)
                .unwrap_err();
        assert!(err.to_string().starts_with("mem/test-session.jsonl:1:0:"));
    }

    /// Compaction entries come out as System records carrying their summary.
    #[test]
    fn a6_compaction_emitted() {
        let (records, report) = read_path(&fixture("pi-1x.jsonl")).unwrap();
        let compactions: Vec<_> = records.iter().filter(|r| r.entry == "compaction").collect();
        assert_eq!(compactions.len(), 3);
        assert_eq!(report.entries.get("compaction"), 3);
        for c in &compactions {
            assert_eq!(c.role, Role::System);
            assert!(!c.text.is_empty(), "line {}", c.line);
            assert!(c.id.is_some());
            assert_eq!(c.message_role, None);
        }
        let (records, _) = read_path(&fixture("hand-built.jsonl")).unwrap();
        let c = records.iter().find(|r| r.entry == "compaction").unwrap();
        assert_eq!(
            (c.role, c.line, c.text.as_str()),
            (
                Role::System,
                24,
                "## Goal\nFix the bug.\n\n## Progress\n- listed files"
            )
        );
    }

    /// A `Read` that counts the bytes it hands out.
    struct Counting<R> {
        inner: R,
        read: std::rc::Rc<std::cell::Cell<u64>>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }

    fn memchr_all(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
        b.iter()
            .enumerate()
            .filter(|(_, c)| **c == b'\n')
            .map(|(i, _)| i)
    }

    /// Writes a ~50 MB session: pi-1x's header, then its other lines
    /// repeated with fresh ids. Returns the path and the number of copies.
    fn write_big_session(dir: &Path) -> (PathBuf, u64) {
        use std::io::Write;
        let text = std::fs::read_to_string(fixture("pi-1x.jsonl")).unwrap();
        let (header, body) = text.split_once('\n').unwrap();
        let path = dir.join("big.jsonl");
        let mut w = io::BufWriter::new(std::fs::File::create(&path).unwrap());
        writeln!(w, "{header}").unwrap();
        let copies = 32;
        for k in 0..copies {
            let body = body
                .replace("\"id\":\"", &format!("\"id\":\"r{k}-"))
                .replace("\"parentId\":\"", &format!("\"parentId\":\"r{k}-"));
            w.write_all(body.as_bytes()).unwrap();
        }
        w.flush().unwrap();
        (path, copies)
    }

    /// A source over a 50 MB file yields its first record after reading at
    /// most one buffer capacity, and its buffer stays bounded by the
    /// longest line, not the file size.
    #[test]
    fn a7_stream_is_lazy() {
        const CAP: usize = 64 * 1024;
        let tmp = TempDir::new("a7");
        let (path, copies) = write_big_session(&tmp.0);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size > 50_000_000, "{size} bytes");

        let read = std::rc::Rc::new(std::cell::Cell::new(0u64));
        let rdr = Counting {
            inner: std::fs::File::open(&path).unwrap(),
            read: read.clone(),
        };
        let opts = SourceOptions::new().buffer_capacity(CAP);
        let mut src = PiSessionSource::from_reader_with(rdr, &path, &opts).unwrap();
        let first = src.next_record().unwrap().unwrap().to_owned_record();
        // The first record is line 4 (pi-1x's first message, about 3 KB
        // in), well inside the first buffer: at most one buffer capacity
        // was read.
        let mut head = vec![0; CAP];
        io::Read::read_exact(&mut std::fs::File::open(&path).unwrap(), &mut head).unwrap();
        let nls: Vec<usize> = memchr_all(&head).take(4).collect();
        assert_eq!((first.line, first.byte), (4, nls[2] as u64 + 1));
        assert!(nls[3] < CAP);
        assert!(
            read.get() <= CAP as u64,
            "{} bytes read before the first record",
            read.get()
        );
        assert!(read.get() > nls[3] as u64);
        assert_eq!(src.buffer_len(), CAP);

        // Drain the rest: the buffer only ever grows to hold the longest
        // line (68,004 bytes: one doubling), never towards the file size,
        // and every byte is read exactly once.
        let mut records = 1u64;
        let mut max_buf = src.buffer_len();
        while let Some(r) = src.next_record().unwrap() {
            assert!(r.key.contains(":r"));
            records += 1;
            max_buf = max_buf.max(src.buffer_len());
        }
        assert_eq!(max_buf, 2 * CAP);
        assert_eq!(read.get(), size);
        let report = src.report();
        assert_eq!(records, 626 * copies);
        assert_eq!(report.records, 626 * copies);
        assert_eq!(report.lines, 1 + 697 * copies);
        assert_eq!(report.repaired, 27 * copies);
        assert_eq!(report.skipped, 0);
        assert_eq!(report.bytes, size);
        assert_invariant(report, "a7");
    }

    // -----------------------------------------------------------------------
    // Conformance with pi's loader (numbers from fixtures/oracle)

    #[test]
    fn conformance_pi_1x() {
        let (records, report) = read_path(&fixture("pi-1x.jsonl")).unwrap();
        check(&report, &records, &PI_1X, "pi-1x");
        check_surrogates(&records, &PI_1X_SURROGATE_LINES, 0, "pi-1x");
        assert_eq!(report.bytes, 1_585_717);
        for r in &records {
            assert_eq!(
                r.key,
                format!(
                    "01a229a8-a694-717d-ada9-2fc296ed4e4b:{}",
                    r.id.as_deref().unwrap()
                )
            );
        }
    }

    #[test]
    fn conformance_pi_classic() {
        let (records, report) = read_path(&fixture("pi-classic.jsonl")).unwrap();
        check(&report, &records, &PI_CLASSIC, "pi-classic");
        check_surrogates(&records, &PI_CLASSIC_SURROGATE_LINES, 0, "pi-classic");
        assert_eq!(report.bytes, 641_475);
    }

    #[test]
    fn conformance_hand_built() {
        let (records, report) = read_path(&fixture("hand-built.jsonl")).unwrap();
        check(&report, &records, &HAND_BUILT, "hand-built");
        // pi's `futureRole` message gives no record; it is counted by name.
        assert_eq!(report.unknown_roles, vec![("futureRole".to_owned(), 1)]);
        assert_eq!(report.no_record, 11);
    }

    #[test]
    fn conformance_sample_all_types() {
        let (records, report) = read_path(&fixture("bad/sample-all-types.jsonl")).unwrap();
        check(&report, &records, &SAMPLE, "sample-all-types");
        check_surrogates(&records, &SAMPLE_SURROGATE_LINES, 0, "sample-all-types");
    }

    fn sample() -> Vec<OwnedRecord> {
        read_path(&fixture("bad/sample-all-types.jsonl")).unwrap().0
    }

    /// Records equal except where the file layout moved them and for the
    /// source name (`pi:<file stem>`).
    fn same_but_position(a: &[OwnedRecord], b: &[OwnedRecord], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (x, y) in a.iter().zip(b) {
            assert_eq!(y.source, format!("pi:{what}"));
            let mut y = y.clone();
            y.line = x.line;
            y.byte = x.byte;
            y.source.clone_from(&x.source);
            assert_eq!(x, &y, "{what}");
        }
    }

    #[test]
    fn conformance_bad_blank_lines_between() {
        // 295 raw lines, 148 blank (not counted); 147 entries.
        let (records, report) = read_path(&fixture("bad/blank-lines-between.jsonl")).unwrap();
        check(&report, &records, &SAMPLE, "blank-lines-between");
        same_but_position(&sample(), &records, "blank-lines-between");
    }

    #[test]
    fn conformance_bad_bom_prefixed() {
        // Differs from pi 1.6 by design: pi 1.x rejects a BOM before the
        // header (0 entries, oracle/bad-bom-prefixed.json); 0.73 accepted
        // it and such files exist, so we accept it. Compared with the file
        // without the BOM (sample-all-types): same counts, same records,
        // every byte offset 3 further.
        let (records, report) = read_path(&fixture("bad/bom-prefixed.jsonl")).unwrap();
        check(&report, &records, &SAMPLE, "bom-prefixed");
        let want = sample();
        same_but_position(&want, &records, "bom-prefixed");
        for (a, b) in want.iter().zip(&records) {
            assert_eq!((b.line, b.byte), (a.line, a.byte + 3));
        }
    }

    #[test]
    fn conformance_bad_crlf() {
        // 147 CRLF lines, all kept; the `\r` never reaches the text.
        let (records, report) = read_path(&fixture("bad/crlf.jsonl")).unwrap();
        check(&report, &records, &SAMPLE, "crlf");
        same_but_position(&sample(), &records, "crlf");
        for (a, b) in sample().iter().zip(&records) {
            assert_eq!(a.line, b.line);
            assert_eq!(b.byte, a.byte + a.line - 1);
        }
    }

    #[test]
    fn conformance_bad_duplicate_header() {
        // Two `session` headers (line 1 and 21), both counted; the second
        // gives no record.
        let (records, report) = read_path(&fixture("bad/duplicate-header.jsonl")).unwrap();
        let mut entries = SAMPLE_ENTRIES.to_vec();
        entries[0] = ("session", 2);
        let e = Expect {
            entries: Box::leak(entries.into_boxed_slice()),
            roles: SAMPLE_ROLES,
            lines: 148,
            skipped: 0,
            repaired: 9,
        };
        check(&report, &records, &e, "duplicate-header");
        check_surrogates(
            &records,
            &SAMPLE_SURROGATE_LINES.map(|l| l + u64::from(l >= 21)),
            0,
            "duplicate-header",
        );
        same_but_position(&sample(), &records, "duplicate-header");
    }

    #[test]
    fn conformance_bad_empty_and_whitespace_only() {
        for name in ["bad/empty.jsonl", "bad/whitespace-only.jsonl"] {
            // pi: 0 entries, not rejected. Ours: empty, no error, no record.
            let src = PiSessionSource::open(fixture(name)).unwrap();
            assert!(src.header().is_none(), "{name}");
            let (records, report) = drain(src);
            assert!(records.is_empty(), "{name}");
            assert!(report.empty, "{name}");
            assert_eq!(report.lines, 0, "{name}: blank lines are not counted");
            assert_eq!(report.skipped, 0, "{name}");
            assert_eq!(report.entries.total(), 0, "{name}");
            assert_invariant(&report, name);
        }
    }

    #[test]
    fn conformance_bad_garbage_then_header() {
        // Differs from pi by design: pi skips the garbage line and accepts
        // the header on line 2 (147 entries); we fail the file with an
        // error naming the path, since the first line not being a header
        // is the signature of a file recreated without one.
        let path = fixture("no-header/garbage-then-header.jsonl");
        let err = PiSessionSource::open(&path).unwrap_err();
        assert_eq!(err.path(), path);
        assert!(err
            .to_string()
            .starts_with(&format!("{}:1:0:", path.display())));
        assert!(matches!(
            err.kind(),
            ErrorKind::NoHeader {
                line: 1,
                byte: 0,
                ..
            }
        ));
    }

    #[test]
    fn conformance_bad_header_only() {
        // pi: 1 entry (the header). Ours: a good file with no records.
        let src = PiSessionSource::open(fixture("bad/header-only.jsonl")).unwrap();
        assert_eq!(src.header().unwrap().id, SAMPLE_SESSION);
        let (records, report) = drain(src);
        assert!(records.is_empty());
        assert!(!report.empty);
        assert_eq!(entries_of(&report), [("session".to_owned(), 1)].into());
        assert_eq!((report.lines, report.no_record, report.skipped), (1, 1, 0));
        assert_invariant(&report, "header-only");
    }

    #[test]
    fn conformance_bad_header_without_id() {
        // pi rejects it too (0 entries).
        let path = fixture("no-header/header-without-id.jsonl");
        let err = PiSessionSource::open(&path).unwrap_err();
        assert_eq!(err.path(), path);
        assert!(err
            .to_string()
            .starts_with(&format!("{}:1:0:", path.display())));
        assert!(err.to_string().contains("\"id\""), "{err}");
    }

    #[test]
    fn conformance_bad_no_header_first_line_message() {
        // pi rejects it too (0 entries).
        let path = fixture("no-header/no-header-first-line-message.jsonl");
        let err = PiSessionSource::open(&path).unwrap_err();
        assert_eq!(err.path(), path);
        assert!(err
            .to_string()
            .starts_with(&format!("{}:1:0:", path.display())));
    }

    #[test]
    fn conformance_bad_malformed_middle_line() {
        // pi drops lines 11 and 12 silently; we count and report them.
        let (records, report) = read_path(&fixture("bad/malformed-middle-line.jsonl")).unwrap();
        let e = Expect {
            entries: SAMPLE_ENTRIES,
            roles: SAMPLE_ROLES,
            lines: 149,
            skipped: 2,
            repaired: 9,
        };
        check(&report, &records, &e, "malformed-middle-line");
        let skips: Vec<_> = report.skips.iter().map(|s| (s.line, s.byte)).collect();
        assert_eq!(skips, [(11, 58_976), (12, 59_011)]);
        for s in &report.skips {
            assert!(
                matches!(s.reason, SkipReason::Malformed(_)),
                "{:?}",
                s.reason
            );
        }
        same_but_position(&sample(), &records, "malformed-middle-line");
    }

    #[test]
    fn conformance_bad_nul_bytes_tail() {
        // A run of 64 NULs after the last `\n`, no final newline: line 148
        // skipped (pi: skipped too; its loader then appends `\n` to the
        // file, we never write).
        let path = fixture("bad/nul-bytes-tail.jsonl");
        let before = std::fs::read(&path).unwrap();
        let (records, report) = read_path(&path).unwrap();
        let e = Expect {
            entries: SAMPLE_ENTRIES,
            roles: SAMPLE_ROLES,
            lines: 148,
            skipped: 1,
            repaired: 9,
        };
        check(&report, &records, &e, "nul-bytes-tail");
        assert_eq!(report.skips.len(), 1);
        let s = &report.skips[0];
        assert_eq!(
            (s.line, s.byte, &s.reason),
            (148, 239_260, &SkipReason::Nul)
        );
        same_but_position(&sample(), &records, "nul-bytes-tail");
        assert_eq!(
            records.iter().map(|r| (r.line, r.byte)).collect::<Vec<_>>(),
            sample()
                .iter()
                .map(|r| (r.line, r.byte))
                .collect::<Vec<_>>()
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "input untouched");
    }

    #[test]
    fn conformance_bad_truncated_last_line() {
        // The cut `session_info` on line 147 (no `\n`): one Truncated skip.
        let (records, report) = read_path(&fixture("bad/truncated-last-line.jsonl")).unwrap();
        let mut entries = SAMPLE_ENTRIES.to_vec();
        for e in &mut entries {
            if e.0 == "session_info" {
                e.1 = 1;
            }
        }
        let e = Expect {
            entries: Box::leak(entries.into_boxed_slice()),
            roles: SAMPLE_ROLES,
            lines: 147,
            skipped: 1,
            repaired: 9,
        };
        check(&report, &records, &e, "truncated-last-line");
        assert_eq!(report.skips.len(), 1);
        let s = &report.skips[0];
        assert_eq!((s.line, s.byte), (147, 239_126));
        assert!(
            matches!(s.reason, SkipReason::Truncated(_)),
            "{:?}",
            s.reason
        );
        // Line 147 (a session_info) gives no record anyway.
        same_but_position(&sample(), &records, "truncated-last-line");
    }

    #[test]
    fn conformance_bad_truncated_last_line_no_newline_valid() {
        // A valid last line without `\n` is kept, as pi keeps it.
        let (records, report) =
            read_path(&fixture("bad/truncated-last-line-no-newline-valid.jsonl")).unwrap();
        check(&report, &records, &SAMPLE, "no-newline-valid");
        same_but_position(&sample(), &records, "truncated-last-line-no-newline-valid");
        assert_eq!(report.bytes, 239_259);
    }

    #[test]
    fn conformance_bad_v1_minimal() {
        // pi migrates v1 to v3 with random ids; ours have none and the key
        // uses the line. pi: session 1, message 3, thinking_level_change 1,
        // model_change 1, compaction 1; roles user 2, assistant 1.
        let path = fixture("bad/v1-minimal.jsonl");
        let src = PiSessionSource::open(&path).unwrap();
        assert_eq!(src.header().unwrap().version, 1);
        let (records, report) = drain(src);
        let e = Expect {
            entries: &[
                ("session", 1),
                ("message", 3),
                ("thinking_level_change", 1),
                ("model_change", 1),
                ("compaction", 1),
            ],
            roles: roles(2, 1, 0, 0, 0, 0, 0, 1, 0),
            lines: 7,
            skipped: 0,
            repaired: 0,
        };
        check(&report, &records, &e, "v1-minimal");
        let keys: Vec<_> = records.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["s-v1:L2", "s-v1:L3", "s-v1:L6", "s-v1:L7"]);
        for r in &records {
            assert_eq!((r.id.as_deref(), r.parent_id.as_deref()), (None, None));
        }
        let texts: Vec<_> = records.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["hi", "hello", "sum", "after"]);
        // v1 usage without totalTokens: the sum.
        assert_eq!(
            records[1].usage,
            Some(Usage {
                input: 1,
                output: 1,
                cache_read: 0,
                cache_write: 0,
                total_tokens: 2,
                cost: 0.0
            })
        );
        assert_eq!(records[2].timestamp, Some(1_763_596_805_000));
    }

    #[test]
    fn conformance_bad_v2_hook_message() {
        // pi: v2 -> v3 migration turns `hookMessage` into `custom`; ours
        // maps it to Custom directly. Roles user 1, custom 1, assistant 1.
        let (records, report) = read_path(&fixture("bad/v2-hookMessage.jsonl")).unwrap();
        let e = Expect {
            entries: &[("session", 1), ("message", 3)],
            roles: roles(1, 1, 0, 0, 1, 0, 0, 0, 0),
            lines: 4,
            skipped: 0,
            repaired: 0,
        };
        check(&report, &records, &e, "v2-hookMessage");
        let h = &records[1];
        assert_eq!(
            (
                h.role,
                h.message_role.as_deref(),
                h.custom_type.as_deref(),
                h.text.as_str()
            ),
            (Role::Custom, Some("hookMessage"), Some("h"), "from hook")
        );
        assert_eq!(h.key, "s-v2:aaaa0002");
        assert_eq!(h.parent_id.as_deref(), Some("aaaa0001"));
    }

    /// The real sessions (format v1, migrated to v3 by pi): numbers from
    /// oracle/real-pi-mono_before-compaction.json.
    #[test]
    #[ignore = "reads ../shared/real (MEM_INGEST_REAL_DIR); run with --include-ignored"]
    fn conformance_real_before_compaction() {
        let path = real("pi-mono_before-compaction.jsonl");
        let (records, report) = read_path(&path).unwrap();
        let e = Expect {
            entries: &[
                ("session", 1),
                ("message", 990),
                ("thinking_level_change", 5),
                ("compaction", 2),
                ("model_change", 5),
            ],
            // pi: user 55, assistant 484, toolResult 448, bashExecution 3.
            roles: roles(55, 484, 448, 3, 0, 0, 0, 2, 0),
            lines: 1003,
            skipped: 0,
            repaired: 0,
        };
        check(&report, &records, &e, "real before-compaction");
        check_real(&path, &records, &report);
        // The two compactions come out as System records.
        let c: Vec<_> = records.iter().filter(|r| r.entry == "compaction").collect();
        assert_eq!(c.len(), 2);
        assert!(c
            .iter()
            .all(|r| r.role == Role::System && !r.text.is_empty()));
    }

    /// oracle/real-pi-mono_large-session.json.
    #[test]
    #[ignore = "reads ../shared/real (MEM_INGEST_REAL_DIR); run with --include-ignored"]
    fn conformance_real_large_session() {
        let path = real("pi-mono_large-session.jsonl");
        let (records, report) = read_path(&path).unwrap();
        let e = Expect {
            entries: &[
                ("session", 1),
                ("message", 914),
                ("model_change", 1),
                ("thinking_level_change", 103),
            ],
            // pi: user 88, assistant 453, toolResult 373.
            roles: roles(88, 453, 373, 0, 0, 0, 0, 0, 0),
            lines: 1019,
            skipped: 0,
            repaired: 0,
        };
        check(&report, &records, &e, "real large-session");
        check_real(&path, &records, &report);
    }

    /// Checks shared by both real sessions: v1 keys, the project with a
    /// literal `-`, identical output from the mapping and small buffers.
    fn check_real(path: &Path, records: &[OwnedRecord], report: &Report) {
        let src = PiSessionSource::open(path).unwrap();
        let header = src.header().unwrap().clone();
        assert_eq!(header.version, 1);
        assert_eq!(header.cwd, "/Users/badlogic/workspaces/pi-mono");
        for r in records {
            assert_eq!(r.project, "/Users/badlogic/workspaces/pi-mono");
            assert_eq!(r.id, None);
            assert_eq!(r.key, format!("{}:L{}", header.id, r.line));
            if matches!(r.role, Role::User | Role::Assistant | Role::ToolResult) {
                assert!(r.timestamp.is_some(), "line {}", r.line);
            }
        }
        let (m, mr) = read_mmap(path).unwrap();
        assert_eq!(m, records);
        assert_eq!(&mr, report);
        let (c, cr) = read_path_with(path, &SourceOptions::new().buffer_capacity(7)).unwrap();
        assert_eq!(c, records);
        assert_eq!(&cr, report);
    }

    // -----------------------------------------------------------------------
    // hand-built.jsonl, record by record

    fn usage(input: u64, output: u64, cr: u64, cw: u64, total: u64, cost: f64) -> Option<Usage> {
        Some(Usage {
            input,
            output,
            cache_read: cr,
            cache_write: cw,
            total_tokens: total,
            cost,
        })
    }

    #[test]
    fn hand_built_records_exact() {
        let path = fixture("hand-built.jsonl");
        let bytes = std::fs::read(&path).unwrap();
        let offsets = split_lines(&bytes);
        let (records, report) = read_path(&path).unwrap();

        // The fields every record of line `line` shares.
        let base = |line: u64, role: Role, entry: &str, mrole: Option<&str>| {
            let id = format!("c0de{:04x}", line - 1);
            OwnedRecord {
                role,
                text: String::new(),
                project: "/tmp/my-project".into(),
                session: "hand-built-0001".into(),
                key: format!("hand-built-0001:{id}"),
                source: "pi:hand-built".into(),
                id: Some(id),
                parent_id: Some(format!("c0de{:04x}", line - 2)),
                line,
                byte: offsets[line as usize - 1].1,
                entry: entry.into(),
                message_role: mrole.map(Into::into),
                kinds: Vec::new(),
                // Message timestamps (Unix ms; line 26 an ISO string) and
                // entry timestamps agree: 2026-01-15T10:00:00Z + line - 1 s.
                timestamp: Some(1_768_471_200_000 + 1000 * (line as i64 - 1)),
                provider: None,
                model: None,
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
        };
        let msg = |line: u64, role: Role, mrole: &str| base(line, role, "message", Some(mrole));
        let kinds = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let t = |s: &str| s.to_owned();
        let assistant =
            |line: u64, text: &str, k: &[&str], u: Option<Usage>, stop: &str| OwnedRecord {
                text: t(text),
                kinds: kinds(k),
                provider: Some(t("anthropic")),
                model: Some(t("claude-sonnet-4-5")),
                usage: u,
                stop_reason: Some(t(stop)),
                ..msg(line, Role::Assistant, "assistant")
            };
        let tc = ["thinking", "text", "toolCall"];

        let want = vec![
            OwnedRecord {
                text: t("You are pi, a coding agent.\nWork in /tmp/my-project."),
                kinds: kinds(&["text"]),
                ..msg(4, Role::System, "system")
            },
            OwnedRecord {
                text: t("Fix the \"bug\" in C:\\Users\\me\tnow\nLine 2: café 🚀 中文测试 日本語"),
                kinds: kinds(&["text"]),
                ..msg(5, Role::User, "user")
            },
            assistant(
                6,
                "Let me look at the files first.\nI'll list the project 😀 first.\n\
                 bash {\"command\":\"ls -la /tmp/my-project\",\"timeout\":30}",
                &tc,
                usage(100, 20, 3000, 400, 3520, 1.0),
                "toolUse",
            ),
            OwnedRecord {
                text: t("total 8\n-rw-r--r-- 1 me me 42 Cargo.toml\nsrc/"),
                kinds: kinds(&["text"]),
                usage: usage(5, 6, 0, 0, 11, 0.0625),
                tool_name: Some(t("bash")),
                tool_call_id: Some(t("toolu_hand_01")),
                is_error: Some(false),
                ..msg(7, Role::ToolResult, "toolResult")
            },
            OwnedRecord {
                text: t("Here is a screenshot:\n[image image/png, 12 bytes]"),
                kinds: kinds(&["text", "image"]),
                ..msg(8, Role::User, "user")
            },
            // Redacted thinking gives no text, but its kind is present.
            assistant(
                9,
                "Reading the file now.\nread {\"path\":\"/tmp/my-project/missing.rs\"}",
                &tc,
                usage(200, 40, 5000, 0, 5240, 1.75),
                "toolUse",
            ),
            OwnedRecord {
                text: t("ENOENT: no such file or directory, open '/tmp/my-project/missing.rs'"),
                kinds: kinds(&["text"]),
                tool_name: Some(t("read")),
                tool_call_id: Some(t("toolu_hand_02")),
                is_error: Some(true),
                ..msg(10, Role::ToolResult, "toolResult")
            },
            assistant(11, "", &[], usage(0, 0, 0, 0, 0, 0.0), "aborted"),
            OwnedRecord {
                text: t("$ cargo test\nrunning 3 tests\ntest ok ... ok\n"),
                command: Some(t("cargo test")),
                exit_code: Some(0),
                ..msg(12, Role::BashExecution, "bashExecution")
            },
            OwnedRecord {
                text: t("$ sleep 100\n"),
                command: Some(t("sleep 100")),
                ..msg(13, Role::BashExecution, "bashExecution")
            },
            OwnedRecord {
                text: t("Extension note: build is green ✅"),
                kinds: kinds(&["text"]),
                custom_type: Some(t("my-ext")),
                ..msg(14, Role::Custom, "custom")
            },
            OwnedRecord {
                text: t("Patch: the grep tool is now available."),
                kinds: kinds(&["text"]),
                ..msg(15, Role::System, "system")
            },
            OwnedRecord {
                text: t("Injected context: tab\there, quote \" and backslash \\"),
                kinds: kinds(&["text"]),
                custom_type: Some(t("my-ext")),
                ..base(16, Role::Custom, "custom_message", None)
            },
            OwnedRecord {
                text: t("Block context 中文\n[image image/jpeg, 12 bytes]"),
                kinds: kinds(&["text", "image"]),
                custom_type: Some(t("my-ext")),
                ..base(17, Role::Custom, "custom_message", None)
            },
            OwnedRecord {
                text: t("## Goal\nFix the bug.\n\n## Progress\n- listed files"),
                ..base(24, Role::System, "compaction", None)
            },
            OwnedRecord {
                text: t("The abandoned branch tried \"sleep\"; it was cancelled."),
                ..base(25, Role::System, "branch_summary", None)
            },
            OwnedRecord {
                text: t("Continue please (ISO timestamp in message)."),
                kinds: kinds(&["text"]),
                ..msg(26, Role::User, "user")
            },
            // totalTokens absent: input + output + cacheRead + cacheWrite.
            assistant(
                27,
                "Old-style usage without totalTokens.",
                &["text"],
                usage(300, 60, 0, 0, 360, 1.25),
                "stop",
            ),
            // content null, missing, a number: empty text, no kinds.
            msg(30, Role::User, "user"),
            assistant(31, "", &[], usage(10, 2, 0, 0, 12, 0.0), "stop"),
            msg(32, Role::User, "user"),
            assistant(
                33,
                "Done. Résumé: all good 👍",
                &["text"],
                usage(400, 80, 6000, 0, 6480, 3.5),
                "stop",
            ),
        ];
        assert_eq!(records.len(), want.len());
        for (got, want) in records.iter().zip(&want) {
            assert_eq!(got, want, "line {}", want.line);
        }

        // Usage totals: assistant messages, the toolResult's 1.x usage
        // (U-T) and the `usage` entry (U-E); A4's total computed as 360.
        assert_eq!(
            report.usage,
            usage(2015, 209, 14_000, 2400, 18_624, 13.5625).unwrap()
        );
        // By model: the six assistant messages and the usage entry (which
        // names the model); the toolResult's usage names none.
        assert_eq!(report.by_model.len(), 1);
        let m = &report.by_model[0];
        assert_eq!(
            (m.provider.as_str(), m.model.as_str(), m.messages),
            ("anthropic", "claude-sonnet-4-5", 6)
        );
        assert_eq!(
            m.usage,
            usage(
                1010 + 1000,
                202 + 1,
                14_000,
                400 + 2000,
                15_612 + 3001,
                7.5 + 6.0
            )
            .unwrap()
        );
    }

    // -----------------------------------------------------------------------
    // Equivalence: mapping vs chunked reader, and buffer capacities

    fn all_fixtures() -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in [fixture(""), fixture("bad"), fixture("no-header")] {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == "jsonl") {
                    out.push(p);
                }
            }
        }
        out.sort();
        assert_eq!(out.len(), 20, "{out:?}");
        out
    }

    type Outcome = Result<(Vec<OwnedRecord>, Report), String>;

    fn outcome(r: Result<(Vec<OwnedRecord>, Report), Error>) -> Outcome {
        r.map_err(|e| e.to_string())
    }

    #[test]
    fn mmap_source_matches_chunked_source() {
        for path in all_fixtures() {
            let chunked = outcome(read_path(&path));
            let mapped = outcome(read_mmap(&path));
            assert_eq!(mapped, chunked, "{}", path.display());
        }
    }

    #[test]
    fn buffer_capacities_give_identical_output() {
        for path in all_fixtures() {
            let want = outcome(read_path(&path));
            for cap in [1, 7, 64, 4096] {
                let opts = SourceOptions::new().buffer_capacity(cap);
                let got = outcome(read_path_with(&path, &opts));
                assert_eq!(got, want, "{} with capacity {cap}", path.display());
            }
        }
    }

    // -----------------------------------------------------------------------
    // Damage built from strings

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/p"}"#;

    fn user_line(id: &str, content: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":{content},"timestamp":1767225601000}}}}"#
        )
    }

    fn session(lines: &[&[u8]]) -> Vec<u8> {
        let mut out = HEADER.as_bytes().to_vec();
        out.push(b'\n');
        for l in lines {
            out.extend_from_slice(l);
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn damage_invalid_utf8_inside_string_is_repaired() {
        let mut line = user_line("m1", "\"a\u{1}b\"").into_bytes();
        // Replace the placeholder byte by an invalid UTF-8 sequence.
        let at = line.iter().position(|b| *b == 1).unwrap();
        line.splice(at..=at, [0xff, 0xfe]);
        let bytes = session(&[&line, user_line("m2", "\"ok\"").as_bytes()]);
        let (records, report) = read_bytes(&bytes).unwrap();
        assert_eq!(records.len(), 2);
        // One U+FFFD per maximal invalid subpart, as pi's decoder does.
        assert_eq!(records[0].text, "a\u{FFFD}\u{FFFD}b");
        assert!(records[0].repaired);
        assert!(!records[1].repaired);
        assert_eq!((report.repaired, report.skipped), (1, 0));
        assert_invariant(&report, "utf8");

        // A truncated multi-byte sequence becomes one U+FFFD.
        let mut line = user_line("m3", "\"x\u{1}y\"").into_bytes();
        let at = line.iter().position(|b| *b == 1).unwrap();
        line.splice(at..=at, [0xe2, 0x82]);
        let (records, report) = read_bytes(&session(&[&line])).unwrap();
        assert_eq!(records[0].text, "x\u{FFFD}y");
        assert_eq!(report.repaired, 1);
    }

    #[test]
    fn damage_lone_surrogate_is_repaired() {
        let lines = [
            user_line("m1", r#""x\ud83dy""#),
            user_line("m2", r#""\ude00 low first""#),
            user_line("m3", r#""pair \ud83d\ude00 ok""#),
            user_line("m4", r#""escaped \\ud83d is text""#),
        ];
        let refs: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let (records, report) = read_bytes(&session(&refs)).unwrap();
        let texts: Vec<_> = records
            .iter()
            .map(|r| (r.text.as_str(), r.repaired))
            .collect();
        assert_eq!(
            texts,
            [
                ("x\u{FFFD}y", true),
                ("\u{FFFD} low first", true),
                ("pair 😀 ok", false),
                ("escaped \\ud83d is text", false),
            ]
        );
        assert_eq!((report.repaired, report.skipped, report.records), (2, 0, 4));
    }

    #[test]
    fn damage_deep_nesting_is_skipped_without_overflow() {
        let deep = "[".repeat(100_000);
        let deep_obj = format!(r#"{{"type":"message","x":{}"#, "[".repeat(100_000));
        let closed = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let bytes = session(&[
            deep.as_bytes(),
            deep_obj.as_bytes(),
            closed.as_bytes(),
            user_line("m1", "\"after\"").as_bytes(),
        ]);
        let (records, report) = read_bytes(&bytes).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].text, "after");
        assert_eq!(report.skipped, 3);
        let skips: Vec<_> = report
            .skips
            .iter()
            .map(|s| (s.line, s.reason.clone()))
            .collect();
        assert_eq!(
            skips,
            [
                (2, SkipReason::TooDeep),
                (3, SkipReason::TooDeep),
                (4, SkipReason::TooDeep)
            ]
        );
        assert_invariant(&report, "deep");
    }

    /// A user line of exactly `len` bytes (without its `\n`).
    fn line_of_len(id: &str, len: usize) -> String {
        let empty = user_line(id, "\"\"");
        assert!(len >= empty.len(), "{len} < {}", empty.len());
        user_line(id, &format!("\"{}\"", "x".repeat(len - empty.len())))
    }

    #[test]
    fn damage_lines_around_buffer_capacity() {
        for cap in [200usize, 256, 1000] {
            for delta in [-2i64, -1, 0, 1, 2] {
                let len = (cap as i64 + delta) as usize;
                let a = line_of_len("m1", len);
                let b = line_of_len("m2", len);
                assert_eq!(a.len(), len);
                let bytes = session(&[a.as_bytes(), b.as_bytes()]);
                for terminated in [true, false] {
                    let input = if terminated {
                        &bytes[..]
                    } else {
                        &bytes[..bytes.len() - 1]
                    };
                    let opts = SourceOptions::new().buffer_capacity(cap);
                    let (records, report) = read_bytes_with(input, &opts).unwrap();
                    let what = format!("cap {cap} len {len} terminated {terminated}");
                    assert_eq!(records.len(), 2, "{what}");
                    let first = HEADER.len() as u64 + 1;
                    assert_eq!((records[0].line, records[0].byte), (2, first), "{what}");
                    assert_eq!(
                        (records[1].line, records[1].byte),
                        (3, first + len as u64 + 1),
                        "{what}"
                    );
                    let body = len - user_line("m1", "\"\"").len();
                    assert!(records.iter().all(|r| r.text.len() == body), "{what}");
                    assert_eq!(
                        (report.skipped, report.bytes),
                        (0, input.len() as u64),
                        "{what}"
                    );
                }
            }
        }
    }

    #[test]
    fn damage_line_longer_than_max_line_is_skipped() {
        let long = line_of_len("m2", 300);
        let exact = line_of_len("m3", 200);
        let bytes = session(&[
            user_line("m1", "\"before\"").as_bytes(),
            long.as_bytes(),
            exact.as_bytes(),
            user_line("m4", "\"after\"").as_bytes(),
            long.as_bytes(),
        ]);
        let long_byte = (HEADER.len() + 1 + user_line("m1", "\"before\"").len() + 1) as u64;
        for cap in [16, 199, 200, 201, 4096] {
            for terminated in [true, false] {
                let input = if terminated {
                    &bytes[..]
                } else {
                    &bytes[..bytes.len() - 1]
                };
                let opts = SourceOptions::new().buffer_capacity(cap).max_line(200);
                let what = format!("cap {cap} terminated {terminated}");
                let src = PiSessionSource::from_reader_with(input, "long.jsonl", &opts).unwrap();
                let (records, report) = drain(src);
                let ids: Vec<_> = records.iter().map(|r| r.id.as_deref().unwrap()).collect();
                assert_eq!(ids, ["m1", "m3", "m4"], "{what}");
                assert_eq!(report.skipped, 2, "{what}");
                let last_byte = input.len() as u64 - 300 - u64::from(terminated);
                assert_eq!(
                    report.skips,
                    [
                        mem_ingest::Skip {
                            line: 3,
                            byte: long_byte,
                            reason: SkipReason::TooLong { len: 300 }
                        },
                        mem_ingest::Skip {
                            line: 6,
                            byte: last_byte,
                            reason: SkipReason::TooLong { len: 300 }
                        }
                    ],
                    "{what}"
                );
                assert_eq!(report.lines, 6, "{what}");
                assert_eq!(report.bytes, input.len() as u64, "{what}");
                assert_invariant(&report, &what);
            }
        }
        // A header longer than the maximum: an error naming the path.
        let opts = SourceOptions::new().max_line(20);
        let err = read_bytes_with(&bytes, &opts).unwrap_err();
        assert!(
            err.to_string().starts_with("mem/test-session.jsonl:1:0:"),
            "{err}"
        );
    }

    #[test]
    fn damage_crlf_and_blank_lines() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b" \t\r\n\r\n\n");
        bytes.extend_from_slice(HEADER.as_bytes());
        bytes.extend_from_slice(b"\r\n   \n\t\t\r\n");
        bytes.extend_from_slice(user_line("m1", "\"one\"").as_bytes());
        bytes.extend_from_slice(b"\r\n \r \t\n");
        bytes.extend_from_slice(user_line("m2", "\"two\\r\\n\"").as_bytes());
        bytes.extend_from_slice(b"\r\n\r");
        let (records, report) = read_bytes(&bytes).unwrap();
        let got: Vec<_> = records.iter().map(|r| (r.line, r.text.as_str())).collect();
        assert_eq!(got, [(7, "one"), (9, "two\r\n")]);
        // Blank lines are not counted: header + 2 messages.
        assert_eq!((report.lines, report.records, report.skipped), (3, 2, 0));
        assert_invariant(&report, "crlf");
    }

    #[test]
    fn damage_valid_json_that_is_not_an_entry() {
        let bytes = session(&[
            b"[1]",
            b"\"x\"",
            br#"{"type":1}"#,
            b"42",
            b"null",
            b"{}",
            br#"{"type":null,"id":"x"}"#,
            user_line("m1", "\"ok\"").as_bytes(),
        ]);
        let (records, report) = read_bytes(&bytes).unwrap();
        assert_eq!(records.len(), 1);
        let skips: Vec<_> = report
            .skips
            .iter()
            .map(|s| (s.line, s.reason.clone()))
            .collect();
        let want: Vec<_> = (2..=8).map(|l| (l, SkipReason::NotAnEntry)).collect();
        assert_eq!(skips, want);
        assert_eq!((report.lines, report.skipped, report.no_record), (9, 7, 1));
        assert_invariant(&report, "not an entry");
    }

    #[test]
    fn damage_content_of_the_wrong_type_is_empty_text() {
        let lines = [
            user_line("m1", "12.5"),
            user_line("m2", r#"{"type":"text","text":"inside an object"}"#),
            user_line("m3", "null"),
            user_line("m4", "true"),
            user_line("m5", r#"[1,"s",null,{"text":"no type"}]"#),
        ];
        let refs: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let (records, report) = read_bytes(&session(&refs)).unwrap();
        assert_eq!(records.len(), 5);
        for r in &records {
            assert_eq!((r.text.as_str(), r.kinds.len()), ("", 0), "line {}", r.line);
            assert_eq!(r.role, Role::User);
        }
        assert_eq!(report.skipped, 0);
    }

    #[test]
    fn damage_nul_bytes() {
        let mut nul_line = user_line("m1", "\"a\u{1}b\"").into_bytes();
        let at = nul_line.iter().position(|b| *b == 1).unwrap();
        nul_line[at] = 0;
        let bytes = session(&[&nul_line, b"\0\0\0\0", user_line("m2", "\"ok\"").as_bytes()]);
        let (records, report) = read_bytes(&bytes).unwrap();
        assert_eq!(records.len(), 1);
        let skips: Vec<_> = report
            .skips
            .iter()
            .map(|s| (s.line, s.reason.clone()))
            .collect();
        assert_eq!(skips, [(2, SkipReason::Nul), (3, SkipReason::Nul)]);
        // An escaped NUL inside a string is text, not damage.
        let (records, _) =
            read_bytes(&session(&[user_line("m3", r#""a\u0000b""#).as_bytes()])).unwrap();
        assert_eq!(records[0].text, "a\0b");
    }

    #[test]
    fn damage_empty_inputs_are_empty_not_errors() {
        for input in [
            &b""[..],
            b"\n\n  \n",
            b"\xEF\xBB\xBF",
            b"\xEF\xBB\xBF\n \0\0\0\n\0",
            b"\t\r\n",
        ] {
            let src = PiSessionSource::from_reader(input, "e.jsonl").unwrap();
            assert!(src.header().is_none(), "{input:?}");
            let (records, report) = drain(src);
            assert!(records.is_empty());
            assert!(report.empty, "{input:?}");
            assert_eq!((report.lines, report.skipped), (0, 0), "{input:?}");
        }
        // A BOM then a header is a good file.
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend_from_slice(&session(&[user_line("m1", "\"hi\"").as_bytes()]));
        let (records, report) = read_bytes(&bom).unwrap();
        assert_eq!((records.len(), report.empty), (1, false));
        assert_eq!(records[0].byte, 3 + HEADER.len() as u64 + 1);
    }

    /// Reading never writes to its input: the bad fixtures are unchanged
    /// after every source read them (pi 1.6's loader appends `\n`).
    #[test]
    fn inputs_are_never_written() {
        for path in all_fixtures() {
            let before = std::fs::read(&path).unwrap();
            let _ = read_path(&path);
            let _ = read_mmap(&path);
            assert_eq!(std::fs::read(&path).unwrap(), before, "{}", path.display());
        }
    }

    /// More than 8 MB of lines without a record between two records: the
    /// source parses them into a short-lived arena (so its own arena stays
    /// bounded) and the record after them is still exact, counted once.
    #[test]
    fn long_run_without_records_keeps_counts_and_records() {
        let custom = |i: usize| {
            format!(
                r#"{{"type":"custom","id":"c{i}","parentId":null,"timestamp":"2026-01-01T00:00:02.000Z","customType":"state","data":{{"blob":"{}"}}}}"#,
                "z".repeat(64 * 1024)
            )
        };
        let mut lines: Vec<String> = vec![user_line("m1", r#""first""#)];
        lines.extend((0..200).map(custom));
        lines.push(user_line("m2", r#""x\ud83dy""#));
        lines.extend((200..400).map(custom));
        lines.push(user_line("m3", r#""third""#));
        let refs: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
        let bytes = session(&refs);
        assert!(bytes.len() > 2 * 8 * 1024 * 1024);
        let (records, report) = read_bytes(&bytes).unwrap();
        let got: Vec<_> = records
            .iter()
            .map(|r| (r.line, r.text.as_str(), r.repaired))
            .collect();
        assert_eq!(
            got,
            [
                (2, "first", false),
                (203, "x\u{FFFD}y", true),
                (404, "third", false)
            ]
        );
        assert_eq!(report.records, 3);
        assert_eq!(report.roles, [3, 0, 0, 0, 0, 0]);
        assert_eq!(report.entries.get("custom"), 400);
        assert_eq!(report.entries.get("message"), 3);
        assert_eq!(
            (report.repaired, report.no_record, report.lines),
            (1, 401, 404)
        );
        assert_invariant(&report, "long run");
        let tmp = TempDir::new("longrun");
        let path = tmp.0.join("long-run.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            outcome(read_mmap(&path)).map(|(r, _)| r.len()),
            Ok(3),
            "mapping"
        );
    }

    /// A role filter hands out only its roles, counts the others, and
    /// leaves every other number of the report as it was.
    #[test]
    fn role_filter_counts_what_it_drops() {
        let path = fixture("pi-1x.jsonl");
        let (all, all_report) = read_path(&path).unwrap();
        let opts =
            SourceOptions::new().roles(mem_ingest::RoleFilter::only(&[Role::User, Role::System]));
        let (some, report) = read_path_with(&path, &opts).unwrap();
        let want: Vec<_> = all
            .iter()
            .filter(|r| matches!(r.role, Role::User | Role::System))
            .cloned()
            .collect();
        assert_eq!(some, want);
        assert_eq!(report.filtered, 626 - 113 - 15);
        let mut report = report;
        report.filtered = 0;
        assert_eq!(report, all_report);
    }

    /// Reading a file in two parts (the second resumed at a line start with
    /// the header known) gives the records and report of one pass.
    #[test]
    fn resume_in_two_parts_matches_one_pass() {
        let path = fixture("pi-1x.jsonl");
        let bytes = std::fs::read(&path).unwrap();
        let (all, all_report) = read_path(&path).unwrap();
        let header = PiSessionSource::open(&path)
            .unwrap()
            .header()
            .unwrap()
            .clone();
        let lines = split_lines(&bytes);
        let (line_no, cut, _) = lines[350];
        let first = &bytes[..cut as usize];
        let opts = SourceOptions::default();
        let (mut recs, mut report) = read_bytes_with(first, &opts).unwrap();
        let rest = PiSessionSource::resume(
            &bytes[cut as usize..],
            &path,
            header,
            cut,
            line_no - 1,
            &opts,
        );
        let (more, more_report) = drain(rest);
        recs.extend(more);
        report.merge(&more_report);
        for r in &mut recs {
            r.source = "pi:pi-1x".into();
        }
        assert_eq!(recs, all);
        // Float sums of costs depend on the order of addition: compare
        // them to 1e-9, everything else exactly.
        let close = |a: &mut Usage, b: &Usage| {
            assert!((a.cost - b.cost).abs() < 1e-9, "{} vs {}", a.cost, b.cost);
            a.cost = b.cost;
        };
        close(&mut report.usage, &all_report.usage);
        assert_eq!(report.by_model.len(), all_report.by_model.len());
        for (a, b) in report.by_model.iter_mut().zip(&all_report.by_model) {
            close(&mut a.usage, &b.usage);
        }
        assert_eq!(report, all_report);
    }

    /// Usage totals and per-model sums, checked against sums computed
    /// independently (Python over the raw JSON: every `usage` object of a
    /// message or entry; `totalTokens`, when absent, the sum of the four).
    /// Tokens exact; costs to 1e-6 (float sums).
    fn check_usage(
        report: &Report,
        total: [u64; 5],
        cost: f64,
        models: &[(&str, &str, u64, [u64; 5], f64)],
    ) {
        let tokens = |u: &Usage| {
            [
                u.input,
                u.output,
                u.cache_read,
                u.cache_write,
                u.total_tokens,
            ]
        };
        assert_eq!(tokens(&report.usage), total);
        assert!(
            (report.usage.cost - cost).abs() < 1e-6,
            "{}",
            report.usage.cost
        );
        let got: Vec<_> = report
            .by_model
            .iter()
            .map(|m| {
                (
                    m.provider.as_str(),
                    m.model.as_str(),
                    m.messages,
                    tokens(&m.usage),
                )
            })
            .collect();
        let want: Vec<_> = models.iter().map(|m| (m.0, m.1, m.2, m.3)).collect();
        assert_eq!(got, want);
        for (m, w) in report.by_model.iter().zip(models) {
            assert!(
                (m.usage.cost - w.4).abs() < 1e-6,
                "{}: {}",
                m.model,
                m.usage.cost
            );
        }
    }

    #[test]
    fn usage_totals_pi_written() {
        let (_, report) = read_path(&fixture("pi-1x.jsonl")).unwrap();
        check_usage(
            &report,
            [609_405, 496_880, 18_400_161, 2_477_033, 21_983_479],
            24.090_337_05,
            &[
                (
                    "anthropic",
                    "claude-sonnet-4-5",
                    94,
                    [242_344, 186_861, 7_254_760, 983_923, 8_667_888],
                    9.396_086_25,
                ),
                (
                    "openai",
                    "gpt-5.1-codex",
                    62,
                    [150_147, 123_421, 4_670_807, 725_731, 5_670_106],
                    6.424_489_35,
                ),
                (
                    "google",
                    "gemini-2.5-pro",
                    65,
                    [167_426, 146_207, 4_775_563, 590_487, 5_679_683],
                    6.342_378_15,
                ),
            ],
        );
        let (_, report) = read_path(&fixture("pi-classic.jsonl")).unwrap();
        check_usage(
            &report,
            [302_308, 230_917, 8_703_518, 1_049_214, 10_285_957],
            10.916_286_9,
            &[
                (
                    "anthropic",
                    "claude-sonnet-4-5",
                    54,
                    [144_869, 104_532, 4_244_259, 483_297, 4_976_957],
                    5.088_228_45,
                ),
                (
                    "openai",
                    "gpt-5.1-codex",
                    33,
                    [76_538, 64_117, 2_196_812, 280_384, 2_617_851],
                    2.901_852_6,
                ),
                (
                    "google",
                    "gemini-2.5-pro",
                    32,
                    [80_901, 62_268, 2_262_447, 285_533, 2_691_149],
                    2.926_205_85,
                ),
            ],
        );
    }

    #[test]
    #[ignore = "reads ../shared/real (MEM_INGEST_REAL_DIR); run with --include-ignored"]
    fn usage_totals_real() {
        let (_, report) = read_path(&real("pi-mono_before-compaction.jsonl")).unwrap();
        check_usage(
            &report,
            [3689, 187_895, 54_693_675, 1_685_320, 56_570_579],
            42.595_907_5,
            &[(
                "anthropic",
                "claude-opus-4-5",
                484,
                [3689, 187_895, 54_693_675, 1_685_320, 56_570_579],
                42.595_907_5,
            )],
        );
        let (_, report) = read_path(&real("pi-mono_large-session.jsonl")).unwrap();
        check_usage(
            &report,
            [1049, 83_156, 43_229_469, 4_296_232, 47_609_906],
            30.330_197_7,
            &[
                ("openai", "gpt-5.1-codex", 1, [0; 5], 0.0),
                (
                    "anthropic",
                    "claude-sonnet-4-5",
                    452,
                    [1049, 83_156, 43_229_469, 4_296_232, 47_609_906],
                    30.330_197_7,
                ),
            ],
        );
    }

    /// A live writer's partial last line often ends inside a multi-byte
    /// character or a lone surrogate escape: still one Truncated skip, and
    /// no repair counted for a line that was not kept.
    #[test]
    fn damage_truncated_inside_a_character() {
        let full = user_line("m2", r#""café 🚀 \ud83d tail""#);
        let cuts = [
            full.find('é').unwrap() + 1,
            full.find('🚀').unwrap() + 2,
            full.find("\\ud83d").unwrap() + 4,
        ];
        for cut in cuts {
            let mut bytes = session(&[user_line("m1", r#""ok""#).as_bytes()]);
            bytes.extend_from_slice(&full.as_bytes()[..cut]);
            let (records, report) = read_bytes(&bytes).unwrap();
            assert_eq!(records.len(), 1, "cut {cut}");
            assert_eq!(report.skipped, 1, "cut {cut}");
            assert_eq!(report.repaired, 0, "cut {cut}");
            let s = &report.skips[0];
            assert_eq!(s.line, 3);
            assert!(
                matches!(s.reason, SkipReason::Truncated(_)),
                "cut {cut}: {:?}",
                s.reason
            );
        }
        // A repaired line that is not an entry is skipped, not repaired.
        let (_, report) = read_bytes(&session(&[br#""\ud83d""#, b"[\"\xff\"]"])).unwrap();
        assert_eq!((report.skipped, report.repaired), (2, 0));
    }
}
