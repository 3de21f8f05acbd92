//! Entries, fingerprints, held partial tails and resume positions: what
//! incremental and deduplicating callers build on.

use mem_ingest::{PiSessionSource, Position, RecordSource, SourceOptions};

const HEADER: &str = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/p"}"#;

fn msg(id: &str, ts: &str, text: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"{ts}","message":{{"role":"user","content":"{text}"}}}}"#
    )
}

/// (line, byte, gives a record, fingerprint) of each entry.
type Seen = Vec<(u64, u64, bool, u64)>;

fn entries<'t>(text: &'t str, opts: &SourceOptions) -> (Seen, PiSessionSource<&'t [u8]>) {
    let mut src = PiSessionSource::from_reader_with(text.as_bytes(), "s.jsonl", opts).unwrap();
    let mut out = Vec::new();
    while let Some(e) = src.next_entry().unwrap() {
        out.push((e.line, e.byte, e.record.is_some(), e.fingerprint));
    }
    (out, src)
}

#[test]
fn every_entry_with_a_fingerprint_that_copies_share() {
    let a = msg("a1", "2026-01-01T00:00:01.000Z", "hi");
    let a_later = msg("a1", "2026-01-01T00:00:09.000Z", "hi");
    let mc = r#"{"type":"model_change","id":"m1","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","provider":"p","modelId":"m"}"#;
    let text = format!("{HEADER}\n{a}\n{mc}\n\nnot json\n{HEADER}\n{a}\n{a_later}\n");
    let (es, src) = entries(&text, &SourceOptions::new());
    let lines: Vec<(u64, bool)> = es.iter().map(|e| (e.0, e.2)).collect();
    // The header comes with the source; blank and skipped lines are no entry.
    assert_eq!(
        lines,
        vec![(2, true), (3, false), (6, false), (7, true), (8, true)]
    );
    let header_fp = src.header().unwrap().fingerprint;
    assert_eq!(
        es[2].3, header_fp,
        "a repeated header is a copy of the header"
    );
    assert_eq!(es[3].3, es[0].3, "the same id and timestamp");
    assert_ne!(
        es[4].3, es[0].3,
        "the same id at another time is another entry"
    );
    assert_ne!(es[1].3, es[0].3);
    assert_eq!(es[0].1, HEADER.len() as u64 + 1);
    let r = src.report();
    assert_eq!((r.lines, r.records, r.no_record, r.skipped), (7, 3, 3, 1));
}

#[test]
fn v1_entries_without_id_are_fingerprinted_by_their_bytes() {
    let v1h =
        r#"{"type":"session","id":"s-v1","timestamp":"2025-11-20T00:00:00.000Z","cwd":"/tmp/p"}"#;
    let m = r#"{"type":"message","timestamp":"2025-11-20T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#;
    let m2 = r#"{"type":"message","timestamp":"2025-11-20T00:00:01.000Z","message":{"role":"user","content":"ho","timestamp":1}}"#;
    let (es, _) = entries(&format!("{v1h}\n{m}\n{m2}\n{m}\n"), &SourceOptions::new());
    assert_eq!(es[0].3, es[2].3);
    assert_ne!(es[0].3, es[1].3);
}

#[test]
fn a_partial_tail_is_held_only_when_asked() {
    let a = msg("a1", "2026-01-01T00:00:01.000Z", "hi");
    let b = msg("b2", "2026-01-01T00:00:02.000Z", "there");
    let half = &b[..b.len() / 2];
    let text = format!("{HEADER}\n{a}\n{half}");
    let held = SourceOptions::new().hold_partial_tail(true);
    let (es, src) = entries(&text, &held);
    assert_eq!(es.len(), 1);
    let r = src.report();
    assert_eq!((r.lines, r.skipped, r.pending), (2, 0, half.len() as u64));
    let after_a = (HEADER.len() + 1 + a.len() + 1) as u64;
    assert_eq!(
        src.position(),
        Position {
            byte: after_a,
            line: 2,
            open_line: false
        }
    );
    // Without holding, it is a skip, and the position is the end, with the
    // line still open.
    let (_, src) = entries(&text, &SourceOptions::new());
    let r = src.report();
    assert_eq!((r.lines, r.skipped, r.pending), (3, 1, 0));
    assert_eq!(
        src.position(),
        Position {
            byte: text.len() as u64,
            line: 3,
            open_line: true
        }
    );
    // A whole last line without "\n" is a record either way, and the
    // position says the line is still open.
    let text = format!("{HEADER}\n{a}\n{b}");
    let (es, src) = entries(&text, &held);
    assert_eq!(es.len(), 2);
    assert_eq!(src.report().pending, 0);
    assert_eq!(
        src.position(),
        Position {
            byte: text.len() as u64,
            line: 3,
            open_line: true
        }
    );
}

#[test]
fn resuming_at_a_position_continues_exactly() {
    let a = msg("a1", "2026-01-01T00:00:01.000Z", "hi");
    let b = msg("b2", "2026-01-01T00:00:02.000Z", "there");
    let c = msg("c3", "2026-01-01T00:00:03.000Z", "again");
    let first = format!("{HEADER}\n{a}\n{}", &b[..10]);
    let held = SourceOptions::new().hold_partial_tail(true);
    let (_, src) = entries(&first, &held);
    let pos = src.position();
    let header = src.header().unwrap().clone();
    // The writer finished the line and wrote another.
    let grown = format!("{HEADER}\n{a}\n{b}\n\n{c}\n");
    let rest = &grown.as_bytes()[pos.byte as usize..];
    let mut src = PiSessionSource::resume(rest, "s.jsonl", header, pos.byte, pos.line, &held);
    let mut got = Vec::new();
    while let Some(r) = src.next_record().unwrap() {
        got.push((r.line, r.byte, r.text.to_owned()));
    }
    let b_at = (HEADER.len() + 1 + a.len() + 1) as u64;
    assert_eq!(
        got,
        vec![
            (3, b_at, "there".to_owned()),
            (5, b_at + b.len() as u64 + 2, "again".to_owned())
        ]
    );
    assert_eq!(
        src.position(),
        Position {
            byte: grown.len() as u64,
            line: 5,
            open_line: false
        }
    );
}

#[test]
fn removing_a_duplicate_takes_out_exactly_its_counts() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/hand-built.jsonl"
    ))
    .unwrap();
    let mut full = PiSessionSource::from_reader(text.as_bytes(), "h.jsonl").unwrap();
    while full.next_record().unwrap().is_some() {}
    let before = full.report().clone();
    let header = full.header().unwrap().clone();
    // Line 6: an assistant message with usage.
    let line6: String = text.lines().nth(5).unwrap().to_owned() + "\n";
    let mut one = PiSessionSource::resume(
        line6.as_bytes(),
        "h.jsonl",
        header,
        0,
        5,
        &SourceOptions::new(),
    );
    while one.next_record().unwrap().is_some() {}
    let mut r = before.clone();
    r.remove_duplicate(one.report());
    assert_eq!(r.records, before.records - 1);
    assert_eq!(r.deduplicated, 1);
    assert_eq!(r.lines, before.lines);
    assert_eq!(
        r.records + r.deduplicated + r.no_record + r.skipped,
        r.lines
    );
    assert_eq!(r.usage.total_tokens, before.usage.total_tokens - 3520);
    assert_eq!(r.by_model[0].messages, before.by_model[0].messages - 1);
    assert_eq!(r.entries.get("message"), before.entries.get("message") - 1);
}

#[test]
fn slice_source_matches_the_chunked_reader_on_every_fixture() {
    use mem_ingest::SliceSessionSource;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    for d in [
        dir.to_owned(),
        format!("{dir}/bad"),
        format!("{dir}/no-header"),
    ] {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "jsonl") {
                paths.push(p);
            }
        }
    }
    paths.sort();
    assert_eq!(paths.len(), 20);
    for p in paths {
        let bytes = std::fs::read(&p).unwrap();
        let chunked = PiSessionSource::open(&p);
        let slice = SliceSessionSource::new(&bytes, &p, &SourceOptions::new());
        let (mut a, mut b) = match (chunked, slice) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string());
                continue;
            }
            _ => panic!("{}: one source failed, the other not", p.display()),
        };
        loop {
            let (x, y) = (a.next_entry().unwrap(), b.next_entry().unwrap());
            let (x, y) = (
                x.map(|e| (e.fingerprint, e.record.map(|r| r.to_owned_record()))),
                y.map(|e| (e.fingerprint, e.record.map(|r| r.to_owned_record()))),
            );
            assert_eq!(x, y, "{}", p.display());
            if x.is_none() {
                break;
            }
        }
        assert_eq!(a.report(), b.report(), "{}", p.display());
        assert_eq!(a.position(), b.position(), "{}", p.display());
    }
}

/// `next_entry_parsed` hands out the line of each entry parsed as read,
/// with the record's text copied from it, and none for an entry whose parse
/// was in a scratch arena since dropped (after 8 MiB of lines that are not
/// entries), nor for a repaired line.
#[test]
fn an_entry_comes_with_its_line_only_while_its_parse_is_alive() {
    let filler = format!("{{\"x\":\"{}\"}}\n", "ab".repeat(300));
    let mut text = format!("{HEADER}\n{}\n", msg("a1", "2026-01-01T00:00:01Z", "first"));
    let mut fillers = 0;
    while text.len() < 10 << 20 {
        text.push_str(&filler);
        fillers += 1;
    }
    text.push_str(r#"{"type":"model_change","id":"m1","parentId":"a1","timestamp":"2026-01-01T00:00:02Z","provider":"p","modelId":"x"}"#);
    text.push('\n');
    text.push_str(&msg("a2", "2026-01-01T00:00:03Z", "second"));
    text.push('\n');
    text.push_str(&msg("a3", "2026-01-01T00:00:04Z", "bad \\ud83d surrogate"));
    text.push('\n');
    let mut src = PiSessionSource::from_reader(text.as_bytes(), "s1.jsonl").unwrap();
    let mut seen = Vec::new();
    while let Some((e, line)) = src.next_entry_parsed().unwrap() {
        let copied = match (&e.record, line) {
            (Some(r), Some(l)) => l
                .escaped(r.text)
                .map(|b| String::from_utf8(b.to_vec()).unwrap()),
            _ => None,
        };
        seen.push((e.line, e.record.is_some(), line.is_some(), copied));
    }
    let n = 3 + fillers;
    assert_eq!(
        seen,
        vec![
            (2, true, true, Some("\"first\"".to_string())),
            (n, false, false, None),
            (n + 1, true, true, Some("\"second\"".to_string())),
            (n + 2, true, false, None),
        ]
    );
    assert_eq!(src.report().repaired, 1);
}
