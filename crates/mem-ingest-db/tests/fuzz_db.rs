//! Replays the database fuzz targets' checks (`fuzz/src/db.rs`, included
//! here) on the stable toolchain: every input saved under
//! `fuzz/regressions/{opencode,goose,goose_legacy,cursor}/`, and generated inputs (the
//! agents' rows as their fixtures hold them, then damaged, cut, of the
//! wrong types, NULL, BLOBs, huge numbers, deep nesting, and rewritten in a
//! second version), a stable stand-in for the fuzzer.

#[path = "../../../fuzz/src/db.rs"]
#[allow(dead_code)]
mod checks;

use std::fs;
use std::path::Path;

fn check(target: &str) -> fn(&[u8]) {
    match target {
        "opencode" => checks::check_opencode,
        "goose" => checks::check_goose,
        "goose_legacy" => checks::check_goose_legacy,
        "cursor" => checks::check_cursor,
        other => panic!("no database fuzz target {other}"),
    }
}

fn replay(target: &str, name: &str) {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("fuzz/regressions")
        .join(target)
        .join(name);
    let data = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    check(target)(&data);
}

#[test]
fn every_saved_input_replays() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fuzz/regressions");
    for target in ["opencode", "goose", "goose_legacy", "cursor"] {
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

/// OpenCode's rows as its fixture holds them (`../shared/samples/opencode/
/// make_fixture.py`): a user message, an assistant message still running
/// a tool, a message of the other session; 2.x `session_message` rows
/// (a copy of the first message, a user message and an answer written
/// there alone); the second version finishes the tool and the message,
/// and the 2.x answer, and adds one of each.
const OPENCODE: &str = r#"m{"role":"user","time":{"created":1000},"agent":"build","model":{"providerID":"anthropic","modelID":"claude-sonnet-4-5"}}
p{"type":"text","text":"Why do bursts of 20 requests get 429s?"}
m{"role":"assistant","time":{"created":2000},"parentID":"msg_000","modelID":"claude-sonnet-4-5","providerID":"anthropic","mode":"build","agent":"build","path":{"cwd":"/fuzz/one","root":"/fuzz/one"},"cost":0,"tokens":{"input":0,"output":0,"reasoning":0,"cache":{"read":0,"write":0}}}
p{"type":"step-start","snapshot":"4b825dc6"}
p{"type":"reasoning","text":"The limiter lives in src/limiter.ts.","time":{"start":2001,"end":2002}}
p{"type":"tool","callID":"toolu_01","tool":"bash","state":{"status":"running","input":{"command":"grep -n burst src/limiter.ts"},"time":{"start":2003}}}
n{"role":"user","time":{"created":3000},"agent":"build","model":{"providerID":"anthropic","modelID":"claude-sonnet-4-5"},"summary":{"diffs":[]}}
p{"type":"text","text":"fork: make it configurable","synthetic":false}
p{"type":"file","mime":"text/plain","filename":"limiter.ts","url":"file:///fuzz/one/src/limiter.ts"}
vuser	{"text":"Why do bursts of 20 requests get 429s?","files":[],"agents":[],"references":[],"time":{"created":1000}}
vuser	{"text":"only in 2.x","files":[{"filename":"limiter.ts"}],"time":{"created":5000}}
vassistant	{"agent":"build","model":{"id":"claude-sonnet-4-5","providerID":"anthropic"},"content":[{"type":"tool","id":"toolu_02","name":"bash","state":{"status":"running","input":{"command":"ls"},"content":[],"structured":{}},"time":{"created":6001}}],"time":{"created":6000}}
--
m{"role":"user","time":{"created":1000},"agent":"build","model":{"providerID":"anthropic","modelID":"claude-sonnet-4-5"}}
p{"type":"text","text":"Why do bursts of 20 requests get 429s?"}
m{"role":"assistant","time":{"created":2000,"completed":2100},"parentID":"msg_000","modelID":"claude-sonnet-4-5","providerID":"anthropic","mode":"build","agent":"build","path":{"cwd":"/fuzz/one","root":"/fuzz/one"},"cost":0.0123,"tokens":{"input":1200,"output":80,"reasoning":10,"cache":{"read":4000,"write":0}},"finish":"stop"}
p{"type":"step-start","snapshot":"4b825dc6"}
p{"type":"reasoning","text":"The limiter lives in src/limiter.ts.","time":{"start":2001,"end":2002}}
p{"type":"tool","callID":"toolu_01","tool":"bash","state":{"status":"completed","input":{"command":"grep -n burst src/limiter.ts"},"output":"14:  burst: 10,\n","title":"grep","metadata":{"exit":0},"time":{"start":2003,"end":2004}}}
p{"type":"step-finish","reason":"stop","cost":0.0123,"tokens":{"input":1200,"output":80,"reasoning":10,"cache":{"read":4000,"write":0}}}
n{"role":"user","time":{"created":3000},"agent":"build","model":{"providerID":"anthropic","modelID":"claude-sonnet-4-5"},"summary":{"diffs":[]}}
p{"type":"text","text":"fork: make it configurable","synthetic":false}
p{"type":"file","mime":"text/plain","filename":"limiter.ts","url":"file:///fuzz/one/src/limiter.ts"}
m{"role":"assistant","time":{"created":4000},"error":{"name":"MessageAbortedError","data":{"message":"aborted"}},"modelID":"claude-sonnet-4-5","providerID":"anthropic","tokens":{"input":5,"output":0,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0}
p{"type":"compaction","auto":true}
vuser	{"text":"Why do bursts of 20 requests get 429s?","files":[],"agents":[],"references":[],"time":{"created":1000}}
vuser	{"text":"only in 2.x","files":[{"filename":"limiter.ts"}],"time":{"created":5000}}
vassistant	{"agent":"build","model":{"id":"claude-sonnet-4-5","providerID":"anthropic"},"content":[{"type":"reasoning","id":"r1","text":"list it"},{"type":"tool","id":"toolu_02","name":"bash","state":{"status":"completed","input":{"command":"ls"},"content":[{"type":"text","text":"src"}],"structured":{}},"time":{"created":6001,"completed":6002}},{"type":"text","id":"t1","text":"one folder"}],"cost":0.01,"tokens":{"input":30,"output":4,"reasoning":0,"cache":{"read":0,"write":0}},"finish":"stop","time":{"created":6000,"completed":6010}}
vidle	{}"#;

/// Goose's rows as its fixture holds them (`../shared/samples/goose/
/// make_fixture.py`): a tool call and its result, thinking, a ledger row;
/// session 2 counted by its accumulated columns. The second version
/// rewrites session 1's conversation (a compaction) with one more message,
/// and adds a ledger row.
const GOOSE: &str = "u[{\"type\":\"text\",\"text\":\"Why do bursts of 20 requests get 429s?\"}]
t1767225601
a[{\"type\":\"text\",\"text\":\"Let me look.\"},{\"type\":\"toolRequest\",\"id\":\"call_1\",\"toolCall\":{\"status\":\"success\",\"value\":{\"name\":\"developer__shell\",\"arguments\":{\"command\":\"rg -n burst src\"}}}}]
u[{\"type\":\"toolResponse\",\"id\":\"call_1\",\"toolResult\":{\"status\":\"success\",\"value\":{\"content\":[{\"type\":\"text\",\"text\":\"14:  burst: 10,\"}],\"isError\":false}}}]
x{\"userVisible\":true,\"agentVisible\":true}
a[{\"type\":\"thinking\",\"thinking\":\"hard-coded\",\"signature\":\"sig\"},{\"type\":\"text\",\"text\":\"burst is hard-coded to 10.\"}]
l1767225700\tclaude-sonnet-4-5\t1200\t80\t1280\t4000\t0\t0.0042\tprovider_reported
U[{\"type\":\"text\",\"text\":\"hello\"},{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"}]
S100\t20\t0\t0\t120\t0.001\t2026-01-01 11:05:00
--
R
u[{\"type\":\"text\",\"text\":\"Why do bursts of 20 requests get 429s?\"}]
a[{\"type\":\"text\",\"text\":\"Let me look.\"},{\"type\":\"toolRequest\",\"id\":\"call_1\",\"toolCall\":{\"status\":\"success\",\"value\":{\"name\":\"developer__shell\",\"arguments\":{\"command\":\"rg -n burst src\"}}}}]
u[{\"type\":\"toolResponse\",\"id\":\"call_1\",\"toolResult\":{\"status\":\"success\",\"value\":{\"content\":[{\"type\":\"text\",\"text\":\"14:  burst: 10,\"}],\"isError\":false}}}]
x{\"userVisible\":false,\"agentVisible\":true}
a[{\"type\":\"thinking\",\"thinking\":\"hard-coded\",\"signature\":\"sig\"},{\"type\":\"text\",\"text\":\"burst is hard-coded to 10.\"}]
u[{\"type\":\"text\",\"text\":\"summary of the conversation\"}]
l1767225700\tclaude-sonnet-4-5\t1200\t80\t1280\t4000\t0\t0.0042\tprovider_reported
l1767225800\tclaude-sonnet-4-5\t300\t20\t\t0\t0\t0.001\testimated
U[{\"type\":\"text\",\"text\":\"hello\"},{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"}]
S150\t30\t0\t0\t180\t0.0015\t2026-01-01T11:09:00+00:00";

/// Cursor's chats as its fixture holds them (`../shared/samples/cursor/
/// make_fixture.py`): bubbles (a tool call, thinking, tokens, a JSON null)
/// of a composer first generating, a legacy composer with its bubbles
/// inline, a draft; the second version finishes the first composer.
const CURSOR: &str = r#"b{"_v":3,"type":1,"bubbleId":"b0","text":"Why do bursts of 20 requests get 429s?","createdAt":"2026-08-14T09:00:01.000Z","workspaceProjectDir":"/fuzz/one","workspaceUris":["file:///fuzz/one"],"tokenCount":{"inputTokens":0,"outputTokens":0}}
b{"_v":3,"type":2,"bubbleId":"b1","text":"","thinking":{"text":"The limiter config lives in src/limiter.ts."},"toolFormerData":{"tool":15,"name":"run_terminal_cmd","toolCallId":"toolu_01","rawArgs":"{\"command\":\"grep -n burst src/limiter.ts\"}","result":"{\"output\":\"14:  burst: 10,\\n\",\"exitCode\":0}","status":"completed"}}
b{"_v":3,"type":2,"bubbleId":"b2","text":"`burst` is hard-coded to 10.","timestamp":1786698009000,"tokenCount":{"inputTokens":18590,"outputTokens":422}}
bnull
c{"_v":10,"composerId":"c0","name":"Limiter 429s","createdAt":1786698000000,"lastUpdatedAt":1786698125731,"status":"generating","generatingBubbleIds":["b2"],"modelConfig":{"modelName":"claude-4.5-sonnet","maxMode":false},"fullConversationHeadersOnly":[{"bubbleId":"b0","type":1},{"bubbleId":"b1","type":2},{"bubbleId":"b2","type":2}]}
c{"_v":3,"composerId":"c1","createdAt":1735725600000,"status":"completed","conversation":[{"type":1,"bubbleId":"i0","text":"Explain src/router.ts"},{"type":2,"bubbleId":"i1","text":"It registers cors() then json()."}]}
c{"_v":10,"composerId":"c2","text":"","fullConversationHeadersOnly":[],"status":"none","createdAt":1786700000000}
kmessageRequestContext:c0:b0	{"gitStatus":""}
iworkbench.panel.width	300
--
b{"_v":3,"type":1,"bubbleId":"b0","text":"Why do bursts of 20 requests get 429s?","createdAt":"2026-08-14T09:00:01.000Z","workspaceProjectDir":"/fuzz/one","workspaceUris":["file:///fuzz/one"],"tokenCount":{"inputTokens":0,"outputTokens":0}}
b{"_v":3,"type":2,"bubbleId":"b1","text":"","thinking":{"text":"The limiter config lives in src/limiter.ts."},"toolFormerData":{"tool":15,"name":"run_terminal_cmd","toolCallId":"toolu_01","rawArgs":"{\"command\":\"grep -n burst src/limiter.ts\"}","result":"{\"output\":\"14:  burst: 10,\\n\",\"exitCode\":0}","status":"completed"}}
b{"_v":3,"type":2,"bubbleId":"b2","text":"`burst` is hard-coded to 10 at src/limiter.ts:14.","timestamp":1786698009000,"tokenCount":{"inputTokens":18590,"outputTokens":422}}
bnull
c{"_v":10,"composerId":"c0","name":"Limiter 429s","createdAt":1786698000000,"lastUpdatedAt":1786698125731,"status":"completed","modelConfig":{"modelName":"claude-4.5-sonnet","maxMode":false},"fullConversationHeadersOnly":[{"bubbleId":"b0","type":1},{"bubbleId":"b1","type":2},{"bubbleId":"b2","type":2}]}
c{"_v":3,"composerId":"c1","createdAt":1735725600000,"status":"completed","conversation":[{"type":1,"bubbleId":"i0","text":"Explain src/router.ts"},{"type":2,"bubbleId":"i1","text":"It registers cors() then json()."}]}
c{"_v":10,"composerId":"c2","text":"","fullConversationHeadersOnly":[],"status":"none","createdAt":1786700000000}
w{"allComposers":[{"composerId":"c0"},{"composerId":"c1"}]}"#;

/// The values a line's value is replaced by: damaged, cut, of the wrong
/// types, NULL, BLOBs, huge numbers, deep nesting.
fn replacements(v: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(v);
    let mut damaged = v.to_vec();
    for k in (0..damaged.len()).step_by(13) {
        damaged[k] = [b'{', b'"', 0xff, b']', 0, b'\\'][k % 6];
    }
    let huge = text
        .split(|c: char| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .join("99999999999999999999999");
    let negative = text
        .split(|c: char| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .join("-1.5e400");
    vec![
        v[..v.len() / 2].to_vec(),
        damaged,
        [&[1u8][..], v].concat(),
        [&[2u8][..], v].concat(),
        b"\x0399999999999999999999".to_vec(),
        b"\x041e308".to_vec(),
        huge.into_bytes(),
        negative.into_bytes(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        b"\"text\"".to_vec(),
        b"[\"\xff\xfe\"]".to_vec(),
        "[".repeat(3000).into_bytes(),
        [
            "{\"a\":".repeat(1500).as_str(),
            "1",
            "}".repeat(1500).as_str(),
        ]
        .concat()
        .into_bytes(),
    ]
}

/// `check` on `input` and on inputs made of it: each line of a version
/// replaced (see [`replacements`]), and cut; each version alone, the
/// first rewritten to the second, the damaged version rewritten to the
/// sound one and back.
fn check_generated(target: &str, input: &str) {
    let check = check(target);
    check(input.as_bytes());
    let (a, b) = checks::versions(input.as_bytes());
    let b = b.expect("two versions");
    let mut n = 0;
    for (which, v) in [(0, a), (1, b)] {
        let lines: Vec<&[u8]> = v.split(|&c| c == b'\n').collect();
        for (i, l) in lines.iter().enumerate() {
            let Some((&tag, val)) = l.split_first() else {
                continue;
            };
            for r in replacements(val) {
                let mut ls = lines.clone();
                let line = [&[tag][..], &r].concat();
                ls[i] = &line;
                let bad = ls.join(&b'\n');
                let (first, second) = if which == 0 {
                    (&bad[..], b)
                } else {
                    (a, &bad[..])
                };
                check(&bad);
                check(&[first, checks::REWRITE, second].concat());
                n += 2;
            }
        }
        // Cut at every tenth of it.
        for k in 1..10 {
            let cut = &v[..v.len() * k / 10];
            check(cut);
            check(&[cut, checks::REWRITE, v].concat());
            n += 2;
        }
    }
    assert!(n > 200, "{n} inputs");
}

#[test]
fn opencode_check_holds_on_rows_damaged_cut_of_the_wrong_types() {
    check_generated("opencode", OPENCODE);
}

#[test]
fn goose_check_holds_on_rows_damaged_cut_of_the_wrong_types() {
    check_generated("goose", GOOSE);
}

/// A Goose legacy session file (`../shared/spec/goose-format.md`, section
/// 9): its metadata line, a message without an id, one with an id (a
/// thinking part and a tool call), its tool result, injected context,
/// one of another role; the second version (renamed over the first) has
/// the counts grown, one message edited, one more message, and a copy of
/// a message's id. (Each line's first byte is taken as a tag by
/// `check_generated`: the JSON after it is what it damages.)
const GOOSE_LEGACY: &str = r#"{"working_dir":"/fuzz/one","description":"Fix the build","message_count":5,"total_tokens":300,"input_tokens":250,"output_tokens":50,"accumulated_total_tokens":1200,"accumulated_input_tokens":1000,"accumulated_output_tokens":200}
{"id":null,"role":"user","created":1735732800,"content":[{"type":"text","text":"Why is the build red?"}],"metadata":{"userVisible":true,"agentVisible":true}}
{"id":"m2","role":"assistant","created":1735732805,"content":[{"type":"thinking","thinking":"Look at CI.","signature":"s"},{"type":"toolRequest","id":"c1","toolCall":{"status":"success","value":{"name":"developer__shell","arguments":{"command":"make"}}}}]}
{"role":"user","created":1735732806,"content":[{"type":"toolResponse","id":"c1","toolResult":{"status":"success","value":[{"type":"text","text":"error"}]}}]}
{"role":"user","created":1735732806,"content":[{"type":"text","text":"<ctx>"}],"metadata":{"userVisible":false,"agentVisible":true}}
{"role":"system","created":1735732807,"content":[]}
--
{"working_dir":"/fuzz/one","description":"Fix the build","message_count":6,"accumulated_total_tokens":1750,"accumulated_input_tokens":1500,"accumulated_output_tokens":250}
{"id":null,"role":"user","created":1735732800,"content":[{"type":"text","text":"Why is the build red?"}],"metadata":{"userVisible":true,"agentVisible":true}}
{"id":"m2","role":"assistant","created":1735732805,"content":[{"type":"text","text":"Edited."}]}
{"role":"user","created":1735732806,"content":[{"type":"toolResponse","id":"c1","toolResult":{"status":"error","error":"-32603: failed"}}]}
{"role":"assistant","created":1735732810,"content":[{"type":"text","text":"Fixed."}]}
{"id":"m2","role":"assistant","created":1735732811,"content":[{"type":"text","text":"a copy's id"}]}"#;

#[test]
fn goose_legacy_check_holds_on_lines_damaged_cut_of_the_wrong_types() {
    check_generated("goose_legacy", GOOSE_LEGACY);
}

#[test]
fn cursor_check_holds_on_rows_damaged_cut_of_the_wrong_types() {
    check_generated("cursor", CURSOR);
}

/// `goose`, from the generated inputs (a ledger row's `total_tokens`
/// empty): a `usage_ledger` row whose `total_tokens` holds text (`x`;
/// INTEGER affinity keeps a text that is no number as text) fails the
/// whole database, at every run: "cannot read its usage: Invalid column
/// type Text at index: 6, name: total_tokens".
///
/// Root cause: `Db::read_usage` (crates/mem-ingest-db/src/goose.rs) read
/// the ledger's columns with `r.get::<_, Option<i64>>(..)?`, which fails
/// on any other type than an integer or NULL, and the error failed the
/// batch; SQLite keeps any type in any column. Fix: the ledger's columns
/// are read as the sessions' accumulated columns already were, a value of
/// another type as NULL.
#[test]
fn goose_ledger_total_tokens_text() {
    replay("goose", "ledger-total-tokens-text");
}

/// `goose`, from the generated inputs (huge numbers): a message whose
/// `created_timestamp` is a real (`1e300`: INTEGER affinity keeps a number
/// too large for an integer as a real) fails the whole database, at every
/// run: "cannot read its messages: Invalid column type Real".
///
/// Root cause: `Db::read_messages` read `created_timestamp` with
/// `r.get::<_, Option<i64>>(5)?`. Fix: a value of another type reads as
/// NULL (the message without a time, as one whose column is NULL).
#[test]
fn goose_created_timestamp_real() {
    replay("goose", "created-timestamp-real");
}

/// `cursor`, from the generated inputs (a composer's value cut): a
/// `composerData` value that is not JSON fails the whole database, at every
/// run: "cannot read its chats: malformed JSON".
///
/// Root cause: `composer_of` (crates/mem-ingest-db/src/cursor.rs) takes a
/// composer's fields with SQLite's `json_extract`, which raises an error
/// on a value that is not JSON, and the error failed the batch. Fix: a
/// composer whose value SQLite cannot read as JSON is a counted skip at
/// its row; its bubbles are read as those of a chat not generating.
#[test]
fn cursor_composer_not_json() {
    replay("cursor", "composer-not-json");
}

/// `goose`, found by the fuzzer in its first minute (2026-12-05, 51 runs;
/// written again by hand): a session whose `working_dir` is not UTF-8
/// (a Linux path may be any bytes) fails the whole database, at every run:
/// "cannot read its sessions: invalid utf-8 sequence of 1 bytes from index
/// 3".
///
/// Root cause: `Db::session_of` (crates/mem-ingest-db/src/goose.rs) read
/// `working_dir` with `r.get::<_, String>(0)?`, which fails on text that
/// is not UTF-8 (and on any other type). Fix: read as its bytes, invalid
/// UTF-8 as U+FFFD (as the records' other texts), another type as no
/// folder.
#[test]
fn goose_working_dir_not_utf8() {
    replay("goose", "working-dir-not-utf8");
}
