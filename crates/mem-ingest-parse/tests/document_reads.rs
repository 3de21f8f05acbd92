//! What a document read keeps for a checkpoint, and what it reads with:
//! - a read for a run without a checkpoint
//!   ([`SourceOptions::checkpointed`] false) hands out the same entries and
//!   report as one with, and keeps no item versions and no content hash
//!   (its running context is empty); with a checkpoint, each item's
//!   version, and the content hash only for Amp, whose unchanged files are
//!   hashed;
//! - documents read one after another on one thread through a reader
//!   (the engine's one-job read, into the thread's spare buffer) give what
//!   each gives read from memory.

use std::io::Cursor;
use std::path::Path;

use mem_ingest_parse::document::{content_hash, DocState};
use mem_ingest_parse::format::{Format, Input};
use mem_ingest_parse::formats::{Amp, Cline, Gemini};
use mem_ingest_parse::{RoleFilter, SourceOptions};

const AMP: &str = r#"{"v":3,"id":"T-1","created":1767865803494,"env":{"initial":{"trees":[{"uri":"file:///p"}],"tags":["model:claude-sonnet-4-5"]}},"messages":[{"role":"user","messageId":0,"content":[{"type":"text","text":"TEXT_U"}],"meta":{"sentAt":1767865803494}},{"role":"assistant","messageId":1,"content":[{"type":"text","text":"TEXT_A"}],"state":{"type":"complete","stopReason":"end_turn"},"usage":{"model":"claude-sonnet-4-5","inputTokens":5,"outputTokens":7,"timestamp":"2026-01-08T09:50:04.000Z"}}]}"#;
const CLINE: &str = r#"{"version":1,"agent":"lead","sessionId":"s","messages":[{"id":"m1","role":"user","content":[{"type":"text","text":"TEXT_U"}]},{"id":"m2","role":"assistant","ts":1745343730123,"modelInfo":{"id":"claude-sonnet-4-6","provider":"anthropic"},"metrics":{"inputTokens":21,"outputTokens":8,"cacheReadTokens":3,"cacheWriteTokens":1,"cost":0.1},"content":[{"type":"text","text":"TEXT_A"}]}]}"#;
const GEMINI: &str = r#"{"sessionId":"s","projectHash":"h","startTime":"2026-01-01T00:00:00.000Z","lastUpdated":"2026-01-01T00:00:02.000Z","messages":[{"id":"u1","timestamp":"2026-01-01T00:00:01.000Z","type":"user","content":[{"text":"TEXT_U"}]},{"id":"g1","timestamp":"2026-01-01T00:00:02.000Z","type":"gemini","content":"TEXT_A","tokens":{"input":100,"output":5,"cached":60,"thoughts":2,"tool":1,"total":108},"model":"gemini-2.5-pro"}],"kind":"main"}"#;

/// The three agents' documents (the user's and the assistant's texts
/// `u` and `a`, as written in JSON), with a path each reads under, and
/// whether the format hashes its documents' content.
fn cases(u: &str, a: &str) -> [(&'static dyn Format, &'static str, String, bool); 3] {
    let doc = |d: &str| d.replace("TEXT_U", u).replace("TEXT_A", a);
    [
        (
            &Amp,
            "/nonexistent/mem-ingest-test/threads/T-1.json",
            doc(AMP),
            true,
        ),
        (
            &Cline,
            "/nonexistent/mem-ingest-test/sessions/s/s.messages.json",
            doc(CLINE),
            false,
        ),
        (
            &Gemini,
            "/nonexistent/mem-ingest-test/.gemini/tmp/p/chats/session-2026-01-01T00-00-s.json",
            doc(GEMINI),
            false,
        ),
    ]
}

/// The entries (as printed), the report (as printed) and the running
/// context of a read of `doc` from `input`.
fn read(
    format: &dyn Format,
    path: &str,
    input: Input<'_>,
    opts: &SourceOptions,
) -> (Vec<String>, String, DocState) {
    let mut src = format.open(input, Path::new(path), opts).expect("opens");
    let mut entries = Vec::new();
    while let Some(e) = src.next_entry().expect("reads") {
        entries.push(format!("{e:?}"));
    }
    let state = DocState::decode(&src.running_context()).expect("a document's context");
    (entries, format!("{:?}", src.report()), state)
}

#[test]
fn a_read_without_a_checkpoint_keeps_no_versions_and_hands_out_the_same() {
    for (format, path, doc, hashes) in cases(r#"hi \"there\""#, r"yo\n") {
        for roles in [RoleFilter::ALL, RoleFilter::NONE] {
            let with = SourceOptions::new().roles(roles);
            let (entries, report, kept) = read(format, path, Input::Bytes(doc.as_bytes()), &with);
            let without = with.clone().checkpointed(false);
            let (entries2, report2, none) =
                read(format, path, Input::Bytes(doc.as_bytes()), &without);
            let name = format.name();
            assert_eq!(entries.len(), 2, "{name}");
            assert_eq!(entries2, entries, "{name}");
            assert_eq!(report2, report, "{name}");
            assert_eq!(none, DocState::default(), "{name}");
            // With a checkpoint: both messages' keys, each with a version
            // (a hash of the message), and Amp's content hash.
            assert_eq!(kept.emitted.len(), 2, "{name}");
            assert!(kept.emitted.iter().all(|&(_, v)| v != 0), "{name}");
            let hash = if hashes {
                content_hash(doc.as_bytes())
            } else {
                0
            };
            assert_eq!(kept.hash, hash, "{name}");
        }
    }
}

#[test]
fn documents_read_through_a_reader_one_after_another_are_each_their_own() {
    // A long document first (its buffer kept by the thread), then shorter
    // ones into that buffer, then a long one again.
    let long = "x".repeat(300_000);
    let texts = [
        (long.as_str(), "first"),
        ("short", "one"),
        ("", "two"),
        ("again", long.as_str()),
    ];
    for (u, a) in texts {
        for (format, path, doc, _) in cases(u, a) {
            // A buffer smaller than the document (grown as it is read), and
            // one of its size and a byte, as the engine gives a small file.
            for capacity in [4096, doc.len() + 1] {
                let opts = SourceOptions::new().buffer_capacity(capacity);
                let from_memory = read(format, path, Input::Bytes(doc.as_bytes()), &opts);
                let reader = Box::new(Cursor::new(doc.clone().into_bytes()));
                let through_reader = read(format, path, Input::Reader(reader), &opts);
                assert_eq!(through_reader, from_memory, "{}", format.name());
                assert!(
                    from_memory.0[1].contains(&format!("{a:?}")),
                    "{}: {:?}",
                    format.name(),
                    from_memory.0[1]
                );
            }
        }
    }
}
