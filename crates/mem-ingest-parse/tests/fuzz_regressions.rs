//! Replays fuzz inputs on the stable toolchain through the fuzz targets'
//! own checks (`fuzz/src/lib.rs`, included here).
//!
//! Every crash the fuzzer finds is minimised (`cargo fuzz tmin`), copied to
//! `fuzz/regressions/<target>/<name>` and gets a test below with a paragraph
//! on its root cause. `every_saved_input_replays` replays the whole folder,
//! so a saved input is never forgotten.

#[path = "../../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod checks;

use std::fs;
use std::path::Path;

fn replay(target: &str, name: &str) {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("fuzz/regressions")
        .join(target)
        .join(name);
    let data = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    match target {
        "line" => checks::check_line(&data),
        "reader" => checks::check_reader(&data),
        "claude" => checks::check_claude(&data),
        "codex" => checks::check_codex(&data),
        "qwen" => checks::check_qwen(&data),
        "copilot" => checks::check_copilot(&data),
        "cursor_cli" => checks::check_cursor_cli(&data),
        "redact" => checks::check_redact(&data),
        "gemini" => checks::check_gemini(&data),
        "amp" => checks::check_amp(&data),
        "cline" => checks::check_cline(&data),
        "gemini_legacy" => checks::check_gemini_legacy(&data),
        other => panic!("no fuzz target {other}"),
    }
}

/// `line`, found in the first 20 s: the two bytes `E4 5C` (an invalid UTF-8
/// byte, then a backslash that ends the line) panic with "range start index
/// 5 out of range for slice of length 4" (the fuzzer's input: index 12 of
/// 11).
///
/// Root cause: simd-json rejects the line as invalid UTF-8, so
/// `parse_into` calls `repair` (then src/pi.rs, now src/json.rs). After replacing invalid
/// UTF-8, `repair` scans for lone surrogate escapes with
/// `memchr(b'\\', &out[i..])` and skips an escaped character with
/// `i = at + 2`. When the backslash is the last byte there is no escaped
/// character, `i` is `out.len() + 1`, and `&out[i..]` panics. Any line that
/// needs repair (invalid UTF-8 or a lone surrogate escape) and ends with a
/// backslash kills the reader: pi keeps both kinds of line, and a line cut by
/// a crash can end anywhere. Fix: in the loop condition, take
/// `out.get(i..).unwrap_or_default()` instead of `&out[i..]` (or clamp,
/// `i = (at + 2).min(out.len())`).
///
/// Fixed in 10cbe9a ("Fix pi::repair panic on a repaired line ending in a
/// backslash"), exactly so.
#[test]
fn repair_trailing_backslash() {
    replay("line", "repair-trailing-backslash");
    // The same line in a whole file, read in pieces.
    let file = [checks::HEADER, b"\n\xE4\\"].concat();
    checks::check_reader(&checks::ReaderCase::encode(3, &[0], &file));
}

/// `reader`, found after about 400,000 runs of an hour-long run (the
/// fuzzer's input minimised to 123 bytes): a message whose usage holds
/// `"input":6E19,"cacheRead":30` and no `totalTokens` panics with "attempt
/// to add with overflow" in a debug build, and wraps in a release build.
///
/// Root cause: `pi::usage_of` (src/pi.rs) fills `totalTokens`, when absent,
/// with `input + output + cache_read + cache_write`. The parts are whatever
/// u64 the line holds (6E19 reads as `u64::MAX`), so the sum overflows;
/// `Usage::add` (src/record.rs), which sums usage into reports and into
/// `by_model`, and `Usage::sub`, which takes a duplicate's usage out, would
/// overflow the same way on two large values. A crafted or damaged line
/// could kill a debug build's reader, and a release build reported wrapped
/// token totals. Fix: the sum and `Usage::add` saturate at `u64::MAX`,
/// `Usage::sub` at 0.
#[test]
fn usage_sum_overflow() {
    replay("reader", "usage-sum-overflow");
    // The same usage in a whole file, read in one piece: totals saturate.
    let file = [
        checks::HEADER,
        br#"
{"type":"message","id":"m1","message":{"role":"assistant","content":"x","usage":{"input":18446744073709551615,"cacheRead":30}}}
{"type":"message","id":"m2","message":{"role":"assistant","content":"y","usage":{"input":18446744073709551615,"totalTokens":18446744073709551615}}}
"#,
    ]
    .concat();
    use mem_ingest_parse::RecordSource;
    let mut src =
        mem_ingest_parse::SliceSessionSource::new(&file[..], "u.jsonl", &Default::default())
            .expect("a header");
    let mut totals = Vec::new();
    while let Some(r) = src.next_record().expect("no error") {
        totals.push(r.usage.map(|u| u.total_tokens));
    }
    assert_eq!(totals, [Some(u64::MAX), Some(u64::MAX)]);
    let report = src.report();
    assert_eq!(report.usage.input, u64::MAX);
    assert_eq!(report.usage.cache_read, 30);
    assert_eq!(report.usage.total_tokens, u64::MAX);
}

/// `line`, found after about 450,000 runs of a ten-minute run (written out
/// by hand: the fuzzer hung on it, so saved nothing): the 65 bytes `["`,
/// 62 `a`, and a backslash that ends the line never return.
///
/// Root cause: the lean parse (src/lean.rs, what `stats` reads with) scans
/// a string 64 bytes at a time, and the last, partial block is copied into
/// a 64-byte buffer filled with quotes, so that the string always ends:
/// a closing quote past the line's end is reported as a string without
/// one. When the string's last 63 bytes end in a backslash, the one quote
/// of the padding is escaped; no quote ends the block, the scan went on to
/// the next, and with nothing left of the line it reused the buffer as it
/// was: the same block, forever. A damaged line that ends in a backslash
/// anywhere near a block's end hung `stats`. Fix: a scan past the line's
/// end returns "no closing quote" at once, and the buffer is filled with
/// quotes afresh for each partial block.
#[test]
fn lean_escaped_padding_quote() {
    replay("line", "lean-escaped-padding-quote");
    assert_eq!(
        mem_ingest_parse::agrees_with_simd_json(&[&b"[\""[..], &[b'a'; 62], b"\\"].concat()),
        Ok(false)
    );
}

#[test]
fn every_saved_input_replays() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fuzz/regressions");
    for target in [
        "line",
        "reader",
        "claude",
        "codex",
        "qwen",
        "copilot",
        "cursor_cli",
        "gemini",
        "amp",
        "cline",
        "gemini_legacy",
    ] {
        let Ok(dir) = fs::read_dir(root.join(target)) else {
            continue;
        };
        for entry in dir {
            let name = entry.unwrap().file_name();
            let name = name.to_str().expect("ASCII names");
            if !name.starts_with('.') {
                replay(target, name);
            }
        }
    }
}

/// `gemini`, written by hand from reading `record_of` (issue 44): a
/// message whose `tokens` hold `input` and `output` near `u64::MAX` panics
/// with "attempt to add with overflow" in a debug build (the fuzzer's
/// builds, the tests), and wraps in a release build.
///
/// Root cause: the usage row's reasoning tokens (`UsageAt::reasoning`, the
/// thoughts: the total less the other counts) summed `input + output +
/// cache_read + cache_write` unchecked, where `usage_of` saturates each
/// count: two large counts overflow the sum. Fix: the sum saturates too.
#[test]
fn gemini_usage_reasoning_overflow() {
    replay("gemini", "usage-reasoning-overflow");
}

/// The fixtures pass both checks: the line check for every line, the reader
/// check for every file with a few capacities and read plans (the checks
/// themselves are sound on known-good input).
#[test]
fn fixtures_pass_the_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut files = Vec::new();
    for dir in [root.clone(), root.join("bad"), root.join("no-header")] {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 10, "fixtures missing: {files:?}");
    for path in &files {
        let file = fs::read(path).unwrap();
        for line in file.split(|b| *b == b'\n') {
            checks::check_line(line);
        }
        for (cap, plan) in [
            (1, &[][..]),
            (7, &[2, 0xFF, 10][..]),
            (64, &[0xFF][..]),
            (4096, &[][..]),
        ] {
            checks::check_reader(&checks::ReaderCase::encode(cap, plan, &file));
        }
    }
}

/// The reader's input decoding round-trips, and short inputs decode.
#[test]
fn reader_case_decoding() {
    let data = checks::ReaderCase::encode(4096, &[1, 2, 3], b"file");
    let case = checks::ReaderCase::decode(&data);
    assert_eq!(
        (case.capacity, case.plan, case.file),
        (4096, &[1, 2, 3][..], &b"file"[..])
    );
    for short in [&[][..], &[5][..], &[5, 0][..], &[5, 0, 9][..]] {
        let case = checks::ReaderCase::decode(short);
        assert!(case.plan.is_empty() && case.file.is_empty());
    }
}

/// A file the generator writes for `format`, cut at many places and with
/// bytes damaged, passes `check` (a stable stand-in for the fuzzer on
/// realistic input: every shape the generator writes).
fn check_generated_cut_and_damaged(format: &str, check: fn(&[u8])) {
    let dir = std::env::temp_dir().join(format!("mem-ingest-fuzz-{format}-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let out = dir.join("t.jsonl");
    let mut gen = gen_corpus::GenCorpus::new();
    gen.args(["--format", format, "--seed", "11"]);
    // Codex rollouts and Qwen chat files come as a home (forks replay
    // their parent): its largest file.
    match format {
        "codex" | "qwen" | "copilot" | "gemini" => gen
            .args(["--total-mb", "1", "--archive"])
            .arg(dir.join("home")),
        _ => gen.args(["--size-mb", "0.3"]).arg(&out),
    };
    let st = gen.output().unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    if ["codex", "qwen", "copilot", "gemini"].contains(&format) {
        let largest = walk(&dir.join("home"))
            .into_iter()
            .max_by_key(|p| (fs::metadata(p).unwrap().len(), p.clone()))
            .unwrap();
        fs::copy(largest, &out).unwrap();
    }
    let data = fs::read(&out).unwrap();
    assert!(data.len() > 100_000);
    check(&data);
    let step = data.len() / 40;
    for cut in (0..data.len()).step_by(step) {
        check(&data[..cut]);
        let mut damaged = data[..(cut + step).min(data.len())].to_vec();
        for k in (cut..damaged.len()).step_by(61) {
            damaged[k] = [b'{', b'"', 0xff, b'\n', 0, b'\\'][k % 6];
        }
        check(&damaged);
    }
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn claude_check_holds_on_generated_transcripts_cut_and_damaged() {
    check_generated_cut_and_damaged("claude", checks::check_claude);
}

/// The same for Codex rollouts (the `codex` check: three readings alike,
/// and a reading in two parts, the second resumed with the first's running
/// context, alike).
#[test]
fn codex_check_holds_on_generated_rollouts_cut_and_damaged() {
    check_generated_cut_and_damaged("codex", checks::check_codex);
}

/// The same for Qwen Code chat files (the `qwen` check: three readings
/// alike, usage the records', a reading in two parts alike, and one
/// without records alike).
#[test]
fn qwen_check_holds_on_generated_chats_cut_and_damaged() {
    check_generated_cut_and_damaged("qwen", checks::check_qwen);
}

/// The same for Copilot CLI session logs (the `copilot` check: three
/// readings alike, a reading in two parts with the running context
/// alike, one without records alike).
#[test]
fn copilot_check_holds_on_generated_logs_cut_and_damaged() {
    check_generated_cut_and_damaged("copilot", checks::check_copilot);
}

/// The `cursor_cli` check (a JSONL transcript: three readings alike, a
/// reading in two parts alike, one without records alike; the same bytes
/// as a `.txt` document: readings alike, nothing handed out twice) holds
/// on transcripts of every shape the spec gives (text, `<user_query>`,
/// thinking, the three tool-call spellings, tool results, an unknown
/// block, control lines, a string content) and on a `.txt` transcript,
/// cut anywhere and damaged.
#[test]
fn cursor_cli_check_holds_on_transcripts_cut_and_damaged() {
    let lines = [
        r#"{"role":"user","message":{"content":[{"type":"text","text":"<user_query>\nrun ls\n</user_query>"}]}}"#,
        r#"{"role":"assistant","message":{"content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"ok"},{"type":"tool_use","name":"Shell","input":{"command":"ls"}}]}}"#,
        r#"{"type":"turn_ended","status":"success"}"#,
        r#"{"role":"assistant","message":{"content":[{"type":"tool_call","name":"read_file","input":{"path":"a"}},{"type":"tool-call","toolName":"w","args":[1]},{"type":"custom_block","text":"x"}]},"model":"m"}"#,
        r#"{"role":"user","message":{"content":[{"type":"tool-result","name":"read_file","content":[{"type":"text","text":"r"}],"is_error":true}]}}"#,
        r#"{"role":"system","message":{"content":"s"}}"#,
        r#"{"role":"other","message":{"content":"o"}}"#,
    ];
    let mut jsonl = String::new();
    for i in 0..30 {
        jsonl.push_str(lines[i % lines.len()]);
        jsonl.push('\n');
    }
    let mut txt = String::new();
    for _ in 0..10 {
        txt.push_str(
            "user:\n<user_query>\nq\n</user_query>\n\nassistant:\n[Thinking]\n  t\nok\n\
             [Tool call] Shell\n  command=ls\n[Tool result]\n  a\nafter\n",
        );
    }
    for data in [jsonl.as_bytes(), txt.as_bytes()] {
        checks::check_cursor_cli(data);
        let step = (data.len() / 40).max(1);
        for cut in (0..data.len()).step_by(step) {
            checks::check_cursor_cli(&data[..cut]);
            let mut damaged = data[..(cut + step).min(data.len())].to_vec();
            for k in (cut..damaged.len()).step_by(61) {
                damaged[k] = [b'{', b'"', 0xff, b'\n', 0, b'\\'][k % 6];
            }
            checks::check_cursor_cli(&damaged);
        }
    }
}

/// The same for Gemini CLI chat files (the `gemini` check: three
/// readings alike, every line an entry or a skip, each message once, usage
/// the records', one without records alike, a file just written holding
/// its last message until resumed when still, a reading in two parts
/// alike).
#[test]
fn gemini_check_holds_on_generated_chats_cut_and_damaged() {
    check_generated_cut_and_damaged("gemini", checks::check_gemini);
}

/// The document checks (`amp`, `cline`, `gemini_legacy`) on a generated
/// document of each agent (the smallest of more than 20 KB), whole, cut at
/// 20 places and damaged there, alone and as the rewrite of the whole
/// document (`whole + REWRITE + variant`, and the reverse: a version
/// before it).
#[test]
fn document_checks_hold_on_generated_documents_cut_and_damaged() {
    for (format, check, name) in [
        ("amp", checks::check_amp as fn(&[u8]), "T-"),
        ("cline", checks::check_cline, ".messages.json"),
        (
            "cline",
            checks::check_cline,
            "api_conversation_history.json",
        ),
        ("gemini-legacy", checks::check_gemini_legacy, ".json"),
    ] {
        let dir = std::env::temp_dir().join(format!(
            "mem-ingest-fuzz-doc-{format}-{}",
            std::process::id()
        ));
        let st = gen_corpus::GenCorpus::new()
            .args([
                "--format",
                format,
                "--seed",
                "11",
                "--total-mb",
                "1",
                "--archive",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let file = walk(&dir)
            .into_iter()
            .filter(|p| {
                let n = p.file_name().unwrap().to_str().unwrap();
                n.contains(name) && n.ends_with(".json") && !n.contains(".tmp.")
            })
            .map(|p| (fs::metadata(&p).unwrap().len(), p))
            .filter(|(len, _)| *len > 20_000)
            .min()
            .unwrap_or_else(|| panic!("{format}: no {name} document over 20 KB"))
            .1;
        let doc = fs::read(&file).unwrap();
        check(&doc);
        // Earlier versions: the first half of its messages, and all with
        // the second message's text changed.
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        let mut half = v.clone();
        let msgs = messages(&mut half);
        let n = msgs.len();
        msgs.truncate(n / 2);
        let mut edited = v.clone();
        messages(&mut edited)[1]["edited"] = serde_json::json!("yes");
        for earlier in [&half, &edited] {
            let earlier = serde_json::to_vec(earlier).unwrap();
            check(&[&earlier[..], checks::REWRITE, &doc[..]].concat());
            check(&[&doc[..], checks::REWRITE, &earlier[..]].concat());
        }
        let step = doc.len() / 20;
        for cut in (0..doc.len()).step_by(step) {
            let mut damaged = doc[..(cut + step).min(doc.len())].to_vec();
            for k in (cut..damaged.len()).step_by(61) {
                damaged[k] = [b'{', b'"', 0xff, b'\n', 0, b'\\'][k % 6];
            }
            for variant in [&doc[..cut], &damaged[..]] {
                check(variant);
                check(&[&doc[..], checks::REWRITE, variant].concat());
                check(&[variant, checks::REWRITE, &doc[..]].concat());
            }
        }
        fs::remove_dir_all(dir).unwrap();
    }
}

/// A document's messages: the list itself (a legacy Cline task) or its
/// `messages`.
fn messages(v: &mut serde_json::Value) -> &mut Vec<serde_json::Value> {
    if v.is_array() {
        v.as_array_mut().unwrap()
    } else {
        v["messages"].as_array_mut().unwrap()
    }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The fuzz checks' reference JSON string writer writes what serde_json
/// writes, for every character class.
#[test]
fn the_reference_json_string_is_serde_jsons() {
    let chars = [
        'a', '"', '\\', '\n', '\r', '\t', '\u{8}', '\u{c}', '\u{0}', '\u{1b}', '\u{1f}', '\u{7f}',
        'é', '😀', '/',
    ];
    let mut s = String::new();
    for (i, a) in chars.iter().enumerate() {
        for b in &chars[i..] {
            s.push(*a);
            s.push(*b);
        }
    }
    assert_eq!(checks::json_string(&s), serde_json::to_vec(&s).unwrap());
}

/// A text its line writes as JSON writers do is copied from the line; one
/// written otherwise (an uppercase `\u001B`, `\/`, `\u00e9`) is not.
#[test]
fn a_text_is_copied_only_when_written_as_json_writers_write_it() {
    use mem_ingest_parse::RecordSource;
    let line = |content: &str| {
        format!(
            r#"{{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{{"role":"user","content":"{content}","timestamp":1}}}}"#
        )
    };
    for (content, copied) in [
        (r#"x\u001b[0m\n\"q\"\\"#, true),
        (r#"x\u001B[0m"#, false),
        (r#"a\/b"#, false),
        (r#"caf\u00e9"#, false),
        ("café", true),
    ] {
        let mut input = checks::HEADER.to_vec();
        input.push(b'\n');
        input.extend_from_slice(line(content).as_bytes());
        checks::check_copied_strings(&input);
        let mut src =
            mem_ingest_parse::PiSessionSource::from_reader(&input[..], "t.jsonl").unwrap();
        let (entry, parsed) = src.next_entry_parsed().unwrap().unwrap();
        let text = entry.record.unwrap().text;
        let got = parsed.expect("parsed as read").escaped(text);
        let want = format!("\"{content}\"");
        assert_eq!(got, copied.then_some(want.as_bytes()), "{content}");
    }
}

/// `redact`'s checks on texts that reach every rule: the planted
/// credentials of the end-to-end tests, a private key block never closed,
/// escapes around secrets, and a text cut inside a multi-byte character
/// right after a keyword.
#[test]
fn redaction_checks_hold_on_planted_secrets() {
    let texts = [
        "deploy with ghp_lKaRT4l3tzKQ89bHPUcmXpx8fezCPliWyIX2 and AKIAEZCOJCBEUDBISVFZ",
        "-----BEGIN RSA PRIVATE KEY-----\nBdq3qlaLfLt2wWHAQ0w+VW0TxYGAm1vro1MrkJ1RrgzaAmZPTnAyIh4eSe8NOHgB",
        "\"DB_PASSWORD=hunter2hunter\"\n\tAWS_SECRET_ACCESS_KEY=9Ut87j6o3CR4JtnTiQ6ZxXMTAoFOiKoVxUvyiYmR\u{1}",
        "postgres://app:Zq8\u{e9}vTr4pLm77@db/app xoxb-8460277237-8369865801842-9pZ15Srhh\u{1F600}",
        "sk_live_\u{7f}\u{0}OGAGOn80VSYfM9uoz02oPgfE eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.x",
    ];
    for t in texts {
        checks::check_redact(t.as_bytes());
    }
    checks::check_redact(b"AKIA\xe4\xb8");
}

/// `redact`, found in the first 20 s of its first run: `DB_PASSWORD=`
/// then a value that holds a marker already (`SWORD=[REDACTED:env-s`):
/// the value, marker and all, is one secret, so the text has as many
/// markers after as before, not one more. Not a fault of redaction (a
/// secret's bytes are replaced whole, a marker among them too) but of the
/// check, which counted a marker per secret on top of the text's own; it
/// now allows a marker the text held to go inside a secret.
#[test]
fn a_marker_inside_a_secret() {
    replay("redact", "marker-inside-a-secret");
}
