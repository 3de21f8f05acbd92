//! Deterministic generator of pi-shaped session files (format v3) and of
//! Claude Code archives, for benchmarks and for trying the tool on a big
//! archive. No network, no randomness beyond the seed: the same arguments
//! give the same bytes.
//!
//! ```text
//! gen-corpus [--format pi|claude|codex] [--size-mb N] [--seed S] OUT.jsonl
//! gen-corpus [--format pi|claude|codex|qwen|copilot|gemini|gemini-legacy|amp|cline] --archive DIR [--total-mb N] [--seed S]
//! ```
//!
//! `--format pi` (the default) is described here; `--format claude` writes
//! a Claude Code config folder, `DIR/projects/...`, described in `claude.rs`
//! with its rates and byte mix, and prints a summary of what it wrote;
//! `--format codex --archive DIR` a Codex home, `DIR/sessions/...`,
//! described in `codex.rs`; with `--shape held-out`, the shape of issue
//! 41's held-out Codex home (`codex::write_held_out`); `--format qwen
//! --archive DIR` a Qwen Code runtime folder, `DIR/projects/...`,
//! described in `qwen.rs`; `--format copilot --archive DIR` a Copilot CLI
//! home, `DIR/session-state/...` (`copilot.rs`); `--format gemini
//! --archive DIR` a Gemini CLI home (a `.gemini` folder), `DIR/tmp/...`,
//! described in `gemini.rs`; `--format gemini-legacy --archive DIR` one of
//! its legacy whole-file `session-*.json` sessions (`gemini_legacy.rs`);
//! `--format amp --archive DIR` an Amp data folder (`amp.rs`); `--format
//! cline --archive DIR` a Cline data folder, `DIR/sessions/...` and
//! `DIR/tasks/...` (`cline.rs`).
//!
//! One file: a session header, then entries with ids and parentIds, ISO
//! entry timestamps and numeric message timestamps, as pi 1.x writes them:
//! about 43% tool results (multi-KB outputs full of escapes, ANSI codes and
//! unicode), assistants with thinking, text, tool calls and usage, users,
//! some base64 images of 1-3 MB, and the other entry types pi writes. It
//! stops after the line that reaches `--size-mb` (default 100).
//!
//! Archive: many files in pi's folder layout,
//! `DIR/--tmp-projX--/<timestamp>_<uuid>.jsonl`, sizes skewed (a few large,
//! many small), `--total-mb` in all (default 300). `--files N` (pi only)
//! writes exactly N files: the same three large ones and N - 3 sizes of a
//! wider Pareto spread scaled to fill the rest, so 500 MB in 200 files
//! range from a few KB to tens of MB.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

mod amp;
mod claude;
mod cline;
mod codex;
mod copilot;
mod gemini;
mod gemini_legacy;
mod qwen;

const MB: u64 = 1024 * 1024;

/// xorshift64*: small, fast and good enough for test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that close seeds diverge at once.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `pct` percent.
    fn pct(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------------------
// Text material

const PROSE: &[&str] = &[
    "The quick brown fox jumps over the lazy dog.",
    "Refactor the session manager so that the loader streams lines instead of buffering the whole file.",
    "I will read the file first, then apply a minimal edit and run the tests.",
    "The failing test expects the parser to keep lone surrogates as U+FFFD.",
    "Let me check how the tape is reused between lines before changing anything.",
    "Quotes: \"double\" 'single' `back` and escaped \\\"inner\\\" plus JSON {\"k\":\"v\"}",
    "Backslashes: C:\\Users\\me\\proj\\file.ts and regex /\\d+\\.\\w*/ and trailing \\",
    "Unicode: naïve café — Ωμέγα, 日本語のテキスト, 中文, 한국어, עברית, Ünïcödé.",
    "Emoji: 🎉🚀 👋🏽 family 👨‍👩‍👧‍👦 flag 🇩🇪 keycap 1️⃣ astral 𝕏 𝄞",
    "Newlines:\nline2\r\nline3 (CRLF)\n\ttabbed\n\nblank lines",
    "Control chars: NUL[\u{0}] BEL[\u{7}] ESC[\u{1b}[31mred\u{1b}[0m] VT[\u{b}] FF[\u{c}] BS[\u{8}]",
    "Performance matters here: the archive is several gigabytes and users wait on it.",
    "Next I'll add a regression test for the truncated last line.",
];

const WORDS: &[&str] = &[
    "value",
    "compute",
    "parser",
    "session",
    "buffer",
    "tape",
    "line",
    "record",
    "arena",
    "stream",
    "header",
    "entry",
    "message",
    "tool",
    "result",
    "usage",
    "token",
    "cache",
    "const",
    "let",
    "fn",
    "impl",
    "struct",
    "return",
    "async",
    "await",
    "match",
    "Some",
    "None",
    "Ok",
    "Err",
    "self",
    "café",
    "naïve",
    "日本語",
    "中文",
    "한국어",
    "Ωμέγα",
    "🚀",
    "✓",
    "→",
    "…",
    "“quoted”",
    "\"q\"",
    "a\\b",
    "\t",
    "path/to/file.ts",
    "0x1f",
];

const TOOLS: &[&str] = &["bash", "read", "edit", "write", "grep", "find", "ls"];

const MODELS: &[(&str, &str, &str)] = &[
    ("anthropic", "claude-sonnet-4-5", "anthropic-messages"),
    ("anthropic", "claude-opus-4-1", "anthropic-messages"),
    ("openai", "gpt-5.1-codex", "openai-responses"),
    ("google", "gemini-2.5-pro", "google-generative-ai"),
];

const ANSI: &[&str] = &[
    "\u{1b}[32m✓\u{1b}[0m",
    "\u{1b}[31m✗\u{1b}[0m",
    "\u{1b}[1;33mwarning\u{1b}[0m",
    "\u{1b}[1;31merror[E0502]\u{1b}[0m",
    "\u{1b}[2m",
    "\u{1b}[0m",
    "\u{1b}[36m",
    "\u{1b}[38;5;208m",
];

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends `s` as a JSON string, escaped as `JSON.stringify` does.
fn json_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn hex(rng: &mut Rng, n: usize, out: &mut String) {
    const H: &[u8; 16] = b"0123456789abcdef";
    for _ in 0..n {
        out.push(H[rng.below(16) as usize] as char);
    }
}

fn uuid(rng: &mut Rng) -> String {
    let mut s = String::with_capacity(36);
    for (i, n) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 {
            s.push('-');
        }
        hex(rng, n, &mut s);
    }
    s
}

fn alnum(rng: &mut Rng, n: usize, out: &mut String) {
    for _ in 0..n {
        out.push(B64[rng.below(62) as usize] as char);
    }
}

/// ISO 8601 with milliseconds, UTC, from Unix ms.
fn iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

/// Prose of about `n` bytes.
fn prose(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n + 128);
    while s.len() < n {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(rng.pick(PROSE));
    }
    s
}

/// Tool output of about `n` bytes: grep/compiler/test lines with ANSI
/// codes, quotes, backslashes, tabs, unicode and the odd CRLF.
fn tool_output(rng: &mut Rng, n: usize) -> String {
    let mut s = String::with_capacity(n + 256);
    let mut i = 0u64;
    while s.len() < n {
        i += 1;
        match rng.below(6) {
            0 => {
                s.push_str(&format!(
                    "src/module_{i}/file_{}.ts:{}:{}  const value{i} = compute(\"",
                    rng.below(50),
                    rng.range(1, 999),
                    rng.range(1, 80)
                ));
                hex(rng, 12, &mut s);
                s.push_str("\"); // ");
                for _ in 0..rng.range(2, 8) {
                    s.push_str(rng.pick(WORDS));
                    s.push(' ');
                }
            }
            1 => {
                s.push_str(rng.pick(ANSI));
                s.push_str(&format!(" test {i} "));
                s.push_str(rng.pick(&["passed", "ok", "FAILED", "ignored"]));
                s.push_str(" — \"ok\" \\ path\\to\\file ");
                hex(rng, 8, &mut s);
                s.push_str("\u{1b}[0m");
            }
            2 => {
                s.push_str(&format!(
                    "-rw-r--r--\t1 user staff\t{}\tNov 29 23:34\t",
                    rng.below(100_000)
                ));
                s.push_str(rng.pick(WORDS));
                s.push_str("_datei_ü.rs");
            }
            3 => {
                s.push_str(rng.pick(ANSI));
                s.push_str(" --> src/pi.rs:");
                s.push_str(&rng.range(1, 900).to_string());
                s.push_str("\n    |\n    | let s = \"a\\\\b\";  // ");
                s.push_str(rng.pick(WORDS));
                s.push('\r');
            }
            4 => {
                for _ in 0..rng.range(4, 16) {
                    s.push_str(rng.pick(WORDS));
                    s.push(' ');
                }
            }
            _ => s.push_str(rng.pick(PROSE)),
        }
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------
// Session writer

struct Session<'w, W: Write> {
    out: &'w mut W,
    rng: Rng,
    line: Vec<u8>,
    written: u64,
    target: u64,
    /// Unix ms of the last entry.
    now: i64,
    parent: Option<String>,
    model: usize,
    /// Tool calls of the last assistant message, answered in order.
    pending: Vec<(String, &'static str)>,
    next_image: u64,
    images: u64,
    lines: u64,
}

impl<'w, W: Write> Session<'w, W> {
    fn entry_start(&mut self, ty: &str) -> String {
        self.now += self.rng.range(5, 40_000) as i64;
        let mut id = String::with_capacity(8);
        hex(&mut self.rng, 8, &mut id);
        let l = &mut self.line;
        l.clear();
        l.extend_from_slice(b"{\"type\":");
        json_str(l, ty);
        l.extend_from_slice(b",\"id\":");
        json_str(l, &id);
        l.extend_from_slice(b",\"parentId\":");
        match &self.parent {
            Some(p) => json_str(l, p),
            None => l.extend_from_slice(b"null"),
        }
        l.extend_from_slice(b",\"timestamp\":");
        json_str(l, &iso(self.now));
        self.parent = Some(id.clone());
        id
    }

    fn key(&mut self, k: &str) {
        self.line.push(b',');
        json_str(&mut self.line, k);
        self.line.push(b':');
    }

    fn kv_str(&mut self, k: &str, v: &str) {
        self.key(k);
        json_str(&mut self.line, v);
    }

    fn kv_raw(&mut self, k: &str, v: &str) {
        self.key(k);
        self.line.extend_from_slice(v.as_bytes());
    }

    fn finish_line(&mut self) -> io::Result<()> {
        self.line.extend_from_slice(b"}\n");
        self.out.write_all(&self.line)?;
        self.written += self.line.len() as u64;
        self.lines += 1;
        Ok(())
    }

    fn message_start(&mut self, role: &str) {
        self.entry_start("message");
        self.line.extend_from_slice(b",\"message\":{\"role\":");
        json_str(&mut self.line, role);
    }

    fn message_end(&mut self) -> io::Result<()> {
        let ts = self.now + self.rng.range(0, 3000) as i64;
        self.kv_raw("timestamp", &ts.to_string());
        self.line.push(b'}');
        self.finish_line()
    }

    fn usage(&mut self, with_reasoning: bool) {
        let r = &mut self.rng;
        let (input, output) = (r.range(10, 9000), r.range(1, 8000));
        let (cache_read, cache_write) = (r.range(0, 200_000), r.range(0, 30_000));
        let total = input + output + cache_read + cache_write;
        let cost = |tokens: u64, per_m: f64| tokens as f64 * per_m / 1e6;
        let (ci, co, cr, cw) = (
            cost(input, 3.0),
            cost(output, 15.0),
            cost(cache_read, 0.3),
            cost(cache_write, 3.75),
        );
        let reasoning = if with_reasoning {
            format!(",\"reasoning\":{}", output / 3)
        } else {
            String::new()
        };
        let v = format!(
            "{{\"input\":{input},\"output\":{output},\"cacheRead\":{cache_read},\"cacheWrite\":{cache_write}{reasoning},\"totalTokens\":{total},\"cost\":{{\"input\":{ci},\"output\":{co},\"cacheRead\":{cr},\"cacheWrite\":{cw},\"total\":{}}}}}",
            ci + co + cr + cw
        );
        self.kv_raw("usage", &v);
    }

    fn image_block(&mut self, len: usize) {
        let l = &mut self.line;
        l.extend_from_slice(b"{\"type\":\"image\",\"data\":\"iVBORw0KGgoAAAANSUhEUgAA");
        let mut left = len / 4 * 4 - 24;
        while left > 0 {
            let mut x = self.rng.next();
            for _ in 0..left.min(10) {
                l.push(B64[(x & 63) as usize]);
                x >>= 6;
            }
            left -= left.min(10);
        }
        l.extend_from_slice(b"\",\"mimeType\":\"image/png\"}");
        self.images += 1;
    }

    /// Whether an image is due (one every 10-20 MB written).
    fn image_due(&mut self) -> Option<usize> {
        if self.written < self.next_image {
            return None;
        }
        self.next_image = self.written + self.rng.range(10 * MB, 20 * MB);
        Some(self.rng.range(MB, 3 * MB) as usize)
    }

    fn user(&mut self) -> io::Result<()> {
        self.message_start("user");
        let image = self.image_due();
        let n = if self.rng.pct(80) {
            self.rng.range(20, 600)
        } else {
            self.rng.range(600, 4000)
        } as usize;
        let text = prose(&mut self.rng, n);
        self.key("content");
        if image.is_none() && self.rng.pct(60) {
            json_str(&mut self.line, &text);
        } else {
            self.line
                .extend_from_slice(b"[{\"type\":\"text\",\"text\":");
            json_str(&mut self.line, &text);
            self.line.push(b'}');
            if let Some(len) = image {
                self.line.push(b',');
                self.image_block(len);
            }
            self.line.push(b']');
        }
        self.message_end()
    }

    fn assistant(&mut self) -> io::Result<()> {
        if self.rng.pct(3) {
            self.model = self.rng.below(MODELS.len() as u64) as usize;
        }
        let (provider, model, api) = MODELS[self.model];
        self.message_start("assistant");
        self.key("content");
        self.line.push(b'[');
        let mut first = true;
        let mut sep = |line: &mut Vec<u8>| {
            if !first {
                line.push(b',');
            }
            first = false;
        };
        if self.rng.pct(70) {
            sep(&mut self.line);
            let n = self.rng.range(100, 3000) as usize;
            let t = prose(&mut self.rng, n);
            let mut sig = String::new();
            let n = self.rng.range(300, 1200) as usize;
            alnum(&mut self.rng, n, &mut sig);
            self.line
                .extend_from_slice(b"{\"type\":\"thinking\",\"thinking\":");
            json_str(&mut self.line, &t);
            self.line.extend_from_slice(b",\"thinkingSignature\":");
            json_str(&mut self.line, &sig);
            self.line.push(b'}');
        }
        if self.rng.pct(85) {
            sep(&mut self.line);
            let n = self.rng.range(20, 1500) as usize;
            let t = prose(&mut self.rng, n);
            self.line.extend_from_slice(b"{\"type\":\"text\",\"text\":");
            json_str(&mut self.line, &t);
            self.line.push(b'}');
        }
        let calls = match self.rng.below(10) {
            0..=2 => 0,
            3..=7 => 1,
            _ => self.rng.range(2, 4),
        };
        self.pending.clear();
        for i in 0..calls {
            sep(&mut self.line);
            let tool = self.rng.pick(TOOLS);
            let mut id = String::from("toolu_01");
            alnum(&mut self.rng, 22, &mut id);
            self.line
                .extend_from_slice(b"{\"type\":\"toolCall\",\"id\":");
            json_str(&mut self.line, &id);
            self.line.extend_from_slice(b",\"name\":");
            json_str(&mut self.line, tool);
            self.line.extend_from_slice(b",\"arguments\":{\"path\":");
            json_str(&mut self.line, &format!("/tmp/proj/src/lib-{i}.rs"));
            match tool {
                "bash" => {
                    self.line.extend_from_slice(b",\"command\":");
                    json_str(
                        &mut self.line,
                        "cargo test --all 2>&1 | grep -E \"^(test|error)\" | head -n 50",
                    );
                    self.line.extend_from_slice(b",\"timeout\":120");
                }
                "edit" | "write" => {
                    let n = self.rng.range(40, 1200) as usize;
                    let old = tool_output(&mut self.rng, n);
                    self.line.extend_from_slice(b",\"oldText\":");
                    json_str(&mut self.line, &old);
                    self.line.extend_from_slice(b",\"newText\":");
                    json_str(&mut self.line, &old.replace("value", "v2"));
                }
                _ => self.line.extend_from_slice(b",\"limit\":200,\"offset\":1"),
            }
            self.line.extend_from_slice(b"}}");
            self.pending.push((id, tool));
        }
        self.line.push(b']');
        self.kv_str("api", api);
        self.kv_str("provider", provider);
        self.kv_str("model", model);
        let mut rid = String::from("msg_");
        alnum(&mut self.rng, 22, &mut rid);
        self.kv_str("responseId", &rid);
        let reasoning = self.rng.pct(50);
        self.usage(reasoning);
        let stop = if calls > 0 {
            "toolUse"
        } else if self.rng.pct(97) {
            "stop"
        } else {
            "aborted"
        };
        self.kv_str("stopReason", stop);
        self.kv_str("thinkingLevel", "medium");
        let dur = self.rng.range(500, 90_000);
        self.kv_raw("durationMs", &dur.to_string());
        self.message_end()
    }

    fn tool_result(&mut self) -> io::Result<()> {
        let (id, tool) = if self.pending.is_empty() {
            let mut id = String::from("toolu_01");
            alnum(&mut self.rng, 22, &mut id);
            (id, self.rng.pick(TOOLS))
        } else {
            self.pending.remove(0)
        };
        let image = if tool == "read" {
            self.image_due()
        } else {
            None
        };
        self.message_start("toolResult");
        self.kv_str("toolCallId", &id);
        self.kv_str("toolName", tool);
        let n = match self.rng.below(100) {
            0..=81 => self.rng.range(1024, 8 * 1024),
            82..=96 => self.rng.range(8 * 1024, 32 * 1024),
            _ => self.rng.range(32 * 1024, 128 * 1024),
        } as usize;
        let out = tool_output(&mut self.rng, n);
        self.key("content");
        self.line
            .extend_from_slice(b"[{\"type\":\"text\",\"text\":");
        json_str(&mut self.line, &out);
        self.line.push(b'}');
        if let Some(len) = image {
            self.line.push(b',');
            self.image_block(len);
        }
        self.line.push(b']');
        let k = self.rng.range(1, 900);
        match tool {
            "edit" => self.kv_raw(
                "details",
                &format!(
                    "{{\"diff\":\"--- a\\n+++ b\\n@@ -1,1 +1,1 @@\\n-let x = \\\"a\\\";\\n+let x = \\\"b\\\\n\\\";\\n\",\"firstChangedLine\":{k}}}"
                ),
            ),
            "bash" => self.kv_raw(
                "details",
                &format!("{{\"truncation\":null,\"exitCode\":{}}}", k % 3),
            ),
            _ => {}
        }
        let err = self.rng.pct(5);
        self.kv_raw("isError", if err { "true" } else { "false" });
        let dur = self.rng.range(5, 30_000);
        self.kv_raw("durationMs", &dur.to_string());
        self.message_end()
    }

    fn bash_execution(&mut self) -> io::Result<()> {
        self.message_start("bashExecution");
        self.kv_str(
            "command",
            "ls -la 'dir with spaces' && echo \"ok\" | tee /tmp/out\\ file",
        );
        let n = self.rng.range(100, 6000) as usize;
        let out = tool_output(&mut self.rng, n);
        self.kv_str("output", &out);
        let code = self.rng.below(3);
        self.kv_raw("exitCode", &code.to_string());
        self.kv_raw("cancelled", "false");
        self.kv_raw("truncated", "false");
        self.message_end()
    }

    fn custom_message(&mut self) -> io::Result<()> {
        self.entry_start("custom_message");
        self.kv_str("customType", "my-ext");
        let n = self.rng.range(40, 800) as usize;
        let t = prose(&mut self.rng, n);
        self.kv_str("content", &t);
        self.kv_raw("display", "true");
        let n = self.rng.below(100);
        self.kv_raw("details", &format!("{{\"source\":\"ext\",\"n\":{n}}}"));
        self.finish_line()
    }

    fn custom_role(&mut self) -> io::Result<()> {
        self.message_start("custom");
        self.kv_str("customType", "legacy-hook");
        let n = self.rng.range(40, 400) as usize;
        let t = prose(&mut self.rng, n);
        self.kv_str("content", &t);
        self.kv_raw("display", "true");
        self.message_end()
    }

    fn compaction(&mut self) -> io::Result<()> {
        self.entry_start("compaction");
        let n = self.rng.range(400, 4000) as usize;
        let s = format!(
            "## Goal\nRefactor parser.\n\n## Progress\n{}",
            prose(&mut self.rng, n)
        );
        self.kv_str("summary", &s);
        let first = self.parent.clone().unwrap_or_default();
        self.kv_str("firstKeptEntryId", &first);
        let t = self.rng.range(50_000, 190_000);
        self.kv_raw("tokensBefore", &t.to_string());
        self.kv_raw(
            "details",
            "{\"readFiles\":[\"/tmp/proj/src/a.rs\"],\"modifiedFiles\":[\"/tmp/proj/src/b.rs\"]}",
        );
        self.usage(false);
        self.finish_line()
    }

    fn branch_summary(&mut self) -> io::Result<()> {
        self.entry_start("branch_summary");
        let from = self.parent.clone().unwrap_or_default();
        self.kv_str("fromId", &from);
        let n = self.rng.range(100, 1500) as usize;
        let s = prose(&mut self.rng, n);
        self.kv_str("summary", &s);
        self.finish_line()
    }

    fn model_change(&mut self) -> io::Result<()> {
        self.model = self.rng.below(MODELS.len() as u64) as usize;
        let (provider, model, _) = MODELS[self.model];
        self.entry_start("model_change");
        self.kv_str("provider", provider);
        self.kv_str("modelId", model);
        self.finish_line()
    }

    fn small(&mut self, ty: &str) -> io::Result<()> {
        let target = self.parent.clone().unwrap_or_default();
        self.entry_start(ty);
        match ty {
            "thinking_level_change" => {
                let l = self.rng.pick(&["low", "medium", "high"]);
                self.kv_str("thinkingLevel", l);
            }
            "label" => {
                self.kv_str("targetId", &target);
                let n = self.rng.below(100);
                self.kv_str("label", &format!("checkpoint-{n}"));
            }
            "custom" => {
                self.kv_str("customType", "my-ext-state");
                let n = self.rng.below(1000);
                self.kv_raw("data", &format!("{{\"counter\":{n},\"name\":\"état ✨\"}}"));
            }
            "session_info" => self.kv_str("name", "Refactor: session parser ✨ \"fast\""),
            "usage" => {
                let (provider, model, _) = MODELS[self.model];
                self.kv_str("kind", "cache_warm");
                self.kv_str("provider", provider);
                self.kv_str("model", model);
                self.usage(true);
            }
            _ => {
                // context_edit
                self.kv_str("targetId", &target);
                self.kv_raw(
                    "replacement",
                    "{\"content\":[{\"type\":\"text\",\"text\":\"[edited block] ok\"}]}",
                );
            }
        }
        self.finish_line()
    }

    fn entry(&mut self) -> io::Result<()> {
        // Weights per mille; tool results first so that they follow their calls.
        if !self.pending.is_empty() && self.rng.pct(90) {
            return self.tool_result();
        }
        let x = self.rng.below(1000);
        match x {
            0..=159 => self.tool_result(),
            160..=619 => self.assistant(),
            620..=879 => self.user(),
            880..=909 => self.bash_execution(),
            910..=929 => self.custom_message(),
            930..=939 => self.custom_role(),
            940..=944 => self.compaction(),
            945..=947 => self.branch_summary(),
            948..=955 => self.model_change(),
            956..=961 => self.small("thinking_level_change"),
            962..=975 => self.small("label"),
            976..=987 => self.small("custom"),
            988..=990 => self.small("session_info"),
            991..=995 => self.small("usage"),
            _ => self.small("context_edit"),
        }
    }
}

/// What one generated file holds.
struct Written {
    bytes: u64,
    lines: u64,
    images: u64,
}

/// Writes one session of at least `target` bytes (the line that reaches it
/// is the last).
fn write_session(
    out: &mut impl Write,
    seed: u64,
    target: u64,
    id: &str,
    cwd: &str,
    start_ms: i64,
) -> io::Result<Written> {
    let mut rng = Rng::new(seed);
    let next_image = rng.range(2 * MB, 12 * MB);
    let mut s = Session {
        out,
        rng,
        line: Vec::with_capacity(1 << 20),
        written: 0,
        target,
        now: start_ms,
        parent: None,
        model: 0,
        pending: Vec::new(),
        next_image,
        images: 0,
        lines: 0,
    };
    s.line
        .extend_from_slice(b"{\"type\":\"session\",\"version\":3,\"id\":");
    json_str(&mut s.line, id);
    s.line.extend_from_slice(b",\"timestamp\":");
    json_str(&mut s.line, &iso(start_ms));
    s.kv_str("cwd", cwd);
    s.finish_line()?;
    s.model_change()?;
    s.small("thinking_level_change")?;
    while s.written < s.target {
        s.entry()?;
    }
    s.out.flush()?;
    Ok(Written {
        bytes: s.written,
        lines: s.lines,
        images: s.images,
    })
}

/// 2026-01-01T00:00:00Z.
const EPOCH_MS: i64 = 1_767_225_600_000;

fn write_file(path: &Path, size_mb: f64, seed: u64) -> io::Result<Written> {
    let mut rng = Rng::new(seed ^ 0x5EED);
    let id = uuid(&mut rng);
    let file = fs::File::create(path)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let target = (size_mb * MB as f64) as u64;
    write_session(&mut w, seed, target, &id, "/tmp/my-project", EPOCH_MS)
}

/// File sizes for an archive of `total` bytes: a few large files (10%, 6%,
/// 4% of the total), then Pareto sizes (alpha 1.1: many small, a long tail)
/// of at least 8 KiB and at most 2% of the total, in a deterministic
/// shuffled order. Each file overshoots its size by part of a line, so the
/// sum aims `overshoot` bytes low per file.
fn plan_sizes(rng: &mut Rng, total: u64, overshoot: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = [10, 6, 4]
        .iter()
        .map(|p| total * p / 100)
        .filter(|&s| s >= 64 * 1024)
        .collect();
    let mut sum: u64 = sizes.iter().sum();
    let cap = (total / 50).max(64 * 1024);
    while sum < total {
        let u = rng.unit();
        let s = (12_288.0 * (1.0 - u).powf(-1.0 / 1.1)) as u64;
        let s = s.min(cap).min(total - sum).max(8192);
        sizes.push(s);
        sum += s + overshoot;
    }
    for i in (1..sizes.len()).rev() {
        sizes.swap(i, rng.below(i as u64 + 1) as usize);
    }
    sizes
}

/// Sizes for exactly `files` files (at least 4): [`plan_sizes`]'s three
/// large files, then `files - 3` Pareto sizes of a wider spread (alpha
/// 0.4), each of 4 KiB to 4% of the total, scaled to fill the rest of
/// `total`.
fn plan_sizes_of(rng: &mut Rng, total: u64, files: usize, overshoot: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = [10, 6, 4].iter().map(|p| total * p / 100).collect();
    let draws: Vec<f64> = (3..files)
        .map(|_| (1.0 - rng.unit()).powf(-1.0 / 0.4))
        .collect();
    let rest = (total - sizes.iter().sum::<u64>()).saturating_sub(overshoot * files as u64);
    let cap = (total / 25).max(4096);
    sizes.extend(scaled_to_fill(&draws, rest, 4096, cap));
    for i in (1..sizes.len()).rev() {
        sizes.swap(i, rng.below(i as u64 + 1) as usize);
    }
    sizes
}

/// Sizes proportional to `draws`, each clamped to `min..=max`, at the
/// scale (found by bisection) at which they fill `rest` bytes.
fn scaled_to_fill(draws: &[f64], rest: u64, min: u64, max: u64) -> Vec<u64> {
    let size = |d: f64, scale: f64| ((d * scale) as u64).clamp(min, max);
    let (mut lo, mut hi) = (0.0f64, rest as f64);
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if draws.iter().map(|&d| size(d, mid)).sum::<u64>() < rest {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    draws.iter().map(|&d| size(d, lo)).collect()
}

fn write_archive(
    dir: &Path,
    total_mb: f64,
    files: Option<usize>,
    seed: u64,
) -> io::Result<(u64, u64, Written)> {
    let mut rng = Rng::new(seed ^ 0xA2C7);
    let total = (total_mb * MB as f64) as u64;
    let sizes = match files {
        Some(n) => plan_sizes_of(&mut rng, total, n, 6000),
        None => plan_sizes(&mut rng, total, 6000),
    };
    let projects = 12.min(sizes.len().max(1));
    let mut all = Written {
        bytes: 0,
        lines: 0,
        images: 0,
    };
    for (i, &size) in sizes.iter().enumerate() {
        let p = if i < projects {
            i as u64
        } else {
            rng.below(projects as u64)
        };
        let cwd = format!("/tmp/proj{p}");
        let folder = dir.join(format!(
            "--{}--",
            cwd.trim_start_matches('/').replace('/', "-")
        ));
        fs::create_dir_all(&folder)?;
        let start = EPOCH_MS + rng.below(300 * 86_400_000) as i64;
        let id = uuid(&mut rng);
        let name = format!("{}_{id}.jsonl", iso(start).replace([':', '.'], "-"));
        let file = fs::File::create(folder.join(name))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        let file_seed = seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
        let wr = write_session(&mut w, file_seed, size, &id, &cwd, start)?;
        all.bytes += wr.bytes;
        all.lines += wr.lines;
        all.images += wr.images;
    }
    Ok((sizes.len() as u64, projects as u64, all))
}

const USAGE: &str = "usage: gen-corpus [--format pi|claude|codex] [--size-mb N] [--seed S] OUT.jsonl\n       gen-corpus [--format pi|claude|codex|qwen|copilot|gemini|gemini-legacy|amp|cline] --archive DIR [--total-mb N] [--seed S]\n       gen-corpus --format codex --shape held-out --archive DIR [--total-mb N] [--seed S]\n       gen-corpus --archive DIR [--total-mb N] --files N [--seed S]";

/// What `--format` asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    /// pi sessions (format v3); the default.
    Pi,
    /// A Claude Code config folder (`claude.rs`).
    Claude,
    /// A Codex home (`codex.rs`), `--archive` only.
    Codex,
    /// A Qwen Code runtime folder (`qwen.rs`), `--archive` only.
    Qwen,
    /// A Copilot CLI home (`copilot.rs`), `--archive` only.
    Copilot,
    /// A Gemini CLI home, a `.gemini` folder (`gemini.rs`), `--archive`
    /// only.
    Gemini,
    /// An Amp data folder (`amp.rs`), `--archive` only.
    Amp,
    /// A Cline data folder (`cline.rs`), `--archive` only.
    Cline,
    /// A Gemini CLI home of legacy `session-*.json` sessions
    /// (`gemini_legacy.rs`), `--archive` only.
    GeminiLegacy,
}

/// Runs gen-corpus with `args` (without the program's name), its summary
/// and errors written to `err` and its usage (`--help`) to `out`, as the
/// `gen-corpus` binary does; returns its exit code (0, or 2 for bad
/// arguments and failed writes).
pub fn run<I: IntoIterator<Item = String>>(
    args: I,
    stdout: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let mut size_mb = 100.0;
    let mut total_mb = 300.0;
    let mut files: Option<usize> = None;
    let mut seed = 1u64;
    let mut format = Format::Pi;
    let mut archive: Option<PathBuf> = None;
    let mut shape: Option<String> = None;
    let mut out: Option<PathBuf> = None;
    let mut args = args.into_iter();
    let fail = |err: &mut dyn Write, msg: &str| {
        let _ = writeln!(err, "gen-corpus: {msg}\n{USAGE}");
        2
    };
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let r: Result<(), String> = (|| {
            match a.as_str() {
                "--size-mb" => size_mb = val("--size-mb")?.parse().map_err(|e| format!("{e}"))?,
                "--total-mb" => {
                    total_mb = val("--total-mb")?.parse().map_err(|e| format!("{e}"))?
                }
                "--seed" => seed = val("--seed")?.parse().map_err(|e| format!("{e}"))?,
                "--files" => {
                    let n: usize = val("--files")?.parse().map_err(|e| format!("{e}"))?;
                    if n < 4 {
                        return Err("--files needs at least 4".into());
                    }
                    files = Some(n);
                }
                "--format" => {
                    format = match val("--format")?.as_str() {
                        "pi" => Format::Pi,
                        "claude" => Format::Claude,
                        "codex" => Format::Codex,
                        "qwen" => Format::Qwen,
                        "copilot" => Format::Copilot,
                        "gemini" => Format::Gemini,
                        "amp" => Format::Amp,
                        "cline" => Format::Cline,
                        "gemini-legacy" => Format::GeminiLegacy,
                        f => {
                            return Err(format!(
                                "unknown format {f:?} (pi, claude, codex, qwen, copilot, \
                                 gemini, gemini-legacy, amp or cline)"
                            ))
                        }
                    }
                }
                "--archive" => archive = Some(val("--archive")?.into()),
                "--shape" => shape = Some(val("--shape")?),
                "-h" | "--help" => return Err(String::new()),
                s if !s.starts_with('-') && out.is_none() => out = Some(s.into()),
                s => return Err(format!("unexpected argument {s:?}")),
            }
            Ok(())
        })();
        if let Err(e) = r {
            if e.is_empty() {
                let _ = writeln!(stdout, "{USAGE}");
                return 0;
            }
            return fail(err, &e);
        }
    }
    let t = std::time::Instant::now();
    if shape.is_some() && format != Format::Codex {
        return fail(err, "--shape is for a Codex home (--format codex)");
    }
    if files.is_some() && (format != Format::Pi || archive.is_none()) {
        return fail(err, "--files is for a pi archive (--archive DIR)");
    }
    if format == Format::Codex {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(err, "--format codex writes an archive: give --archive DIR");
        };
        let written = match shape.as_deref() {
            None => codex::write_archive(&dir, total_mb, seed),
            Some("held-out") => codex::write_held_out(&dir, total_mb, seed),
            Some(s) => return fail(err, &format!("unknown --shape {s:?} (codex: held-out)")),
        };
        return match written {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::Copilot {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(
                err,
                "--format copilot writes an archive: give --archive DIR",
            );
        };
        return match copilot::write_archive(&dir, total_mb, seed) {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::Amp {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(err, "--format amp writes an archive: give --archive DIR");
        };
        return match amp::write_archive(&dir, total_mb, seed) {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::Cline {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(err, "--format cline writes an archive: give --archive DIR");
        };
        return match cline::write_archive(&dir, total_mb, seed) {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::GeminiLegacy {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(
                err,
                "--format gemini-legacy writes an archive: give --archive DIR",
            );
        };
        return match gemini_legacy::write_archive(&dir, total_mb, seed) {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::Gemini {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(err, "--format gemini writes an archive: give --archive DIR");
        };
        return match gemini::write_archive(&dir, total_mb, seed) {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::Qwen {
        let Some(dir) = archive.filter(|_| out.is_none()) else {
            return fail(err, "--format qwen writes an archive: give --archive DIR");
        };
        return match qwen::write_archive(&dir, total_mb, seed) {
            Ok(stats) => {
                stats.print(err, &dir.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        };
    }
    if format == Format::Claude {
        let (what, r) = match (&archive, &out) {
            (Some(dir), None) => (dir, claude::write_archive(dir, total_mb, seed)),
            (None, Some(path)) => (path, claude::write_file(path, size_mb, seed)),
            _ => return fail(err, "give either OUT.jsonl or --archive DIR"),
        };
        return match r {
            Ok(stats) => {
                stats.print(err, &what.display().to_string(), t.elapsed().as_secs_f64());
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", what.display())),
        };
    }
    match (archive, out) {
        (Some(dir), None) => match write_archive(&dir, total_mb, files, seed) {
            Ok((files, projects, w)) => {
                let _ = writeln!(
                    err,
                    "gen-corpus: {} files in {} projects, {:.1} MB, {} lines, {} images, in {:.1}s",
                    files,
                    projects,
                    w.bytes as f64 / MB as f64,
                    w.lines,
                    w.images,
                    t.elapsed().as_secs_f64()
                );
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", dir.display())),
        },
        (None, Some(path)) => match write_file(&path, size_mb, seed) {
            Ok(w) => {
                let _ = writeln!(
                    err,
                    "gen-corpus: {}: {:.1} MB, {} lines, {} images, in {:.1}s",
                    path.display(),
                    w.bytes as f64 / MB as f64,
                    w.lines,
                    w.images,
                    t.elapsed().as_secs_f64()
                );
                0
            }
            Err(e) => fail(err, &format!("{}: {e}", path.display())),
        },
        _ => fail(err, "give either OUT.jsonl or --archive DIR"),
    }
}

/// gen-corpus run in this process, built as a [`std::process::Command`]
/// for its binary is (`GenCorpus::new().args([...]).arg(dir).output()`):
/// the workspace's tests and benches generate their archives with it, as
/// they cannot name another crate's binary.
#[cfg(unix)]
#[derive(Debug, Default, Clone)]
pub struct GenCorpus {
    args: Vec<String>,
}

#[cfg(unix)]
impl GenCorpus {
    /// No arguments yet.
    pub fn new() -> Self {
        GenCorpus::default()
    }

    /// Adds an argument (panics on one that is not UTF-8: gen-corpus
    /// takes only UTF-8 arguments).
    pub fn arg<S: AsRef<std::ffi::OsStr>>(&mut self, arg: S) -> &mut Self {
        let a = arg.as_ref();
        let a = a
            .to_str()
            .unwrap_or_else(|| panic!("gen-corpus takes UTF-8 arguments, not {a:?}"));
        self.args.push(a.to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        for a in args {
            self.arg(a);
        }
        self
    }

    /// Runs it: what it wrote to its stdout and stderr, and its exit code
    /// as a process's status.
    pub fn output(&mut self) -> io::Result<std::process::Output> {
        use std::os::unix::process::ExitStatusExt;
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let code = run(self.args.clone(), &mut stdout, &mut stderr);
        Ok(std::process::Output {
            status: std::process::ExitStatus::from_raw(i32::from(code) << 8),
            stdout,
            stderr,
        })
    }

    /// Runs it, its stderr passed on to this process's: its status.
    pub fn status(&mut self) -> io::Result<std::process::ExitStatus> {
        let out = self.output()?;
        io::stderr().write_all(&out.stderr)?;
        Ok(out.status)
    }
}
