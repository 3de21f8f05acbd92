//! Snippets: FTS5's `snippet(records_fts, 0, '«', '»', '…', 16)` cut from
//! a bounded window of the text, so that a snippet costs what a snippet is
//! worth.
//!
//! FTS5's `snippet()` scores a window at every match of the row by
//! walking every match of the row: quadratic in the matches, 97 s for a
//! record of 1 MB of one word (issue 42). It also joins its pieces as C
//! strings, so that a NUL in the text drops what follows it. Here:
//! - the matches (each phrase's instances, as FTS5's `xInst` gives them,
//!   so every query syntax, the tokenizer's folding, prefixes, `NEAR` and
//!   `NOT` included) and the tokens (FTS5's own tokenizer, `xTokenize`)
//!   are taken from the first match on, up to [`WINDOW`] bytes of text
//!   further (and the few tokens a snippet at its end may show); the text
//!   before the first match is tokenized, its tokens only counted;
//! - FTS5's choice among those matches is made as `fts5SnippetFunction`
//!   and `fts5SnippetScore` (SQLite 3.54) make it, operation for
//!   operation, each window's score from the matches inside it found by a
//!   binary search ([`cut`]), and the text is cut and marked as
//!   `fts5HighlightCb` cuts and marks it, with the bytes as they are.
//!
//! So a snippet is FTS5's, byte for byte, but where the text holds a NUL
//! (kept here), or where FTS5 would have picked a better window more than
//! [`WINDOW`] bytes after the first match (not looked for here).
//! `mi_snippet(records_fts)` is registered through SQLite's C API, as
//! `rank`'s function is: hence the `unsafe` of its glue.

use std::ffi::{c_char, c_int, c_void};
use std::ptr;

use rusqlite::{ffi, Connection};

/// What opens a match.
const OPEN: &[u8] = "«".as_bytes();
/// What closes a match.
const CLOSE: &[u8] = "»".as_bytes();
/// What stands for the text left out before or after the snippet.
const ELLIPSIS: &[u8] = "…".as_bytes();
/// Tokens in a snippet (FTS5's fifth argument).
const TOKENS: i64 = 16;
/// Bytes of text after the first match whose matches are looked at.
pub(super) const WINDOW: usize = 64 * 1024;

/// Registers `mi_snippet(records_fts)` with the FTS5 of `conn`.
pub(super) fn register(conn: &Connection) -> rusqlite::Result<()> {
    super::rank::create_function(conn, c"mi_snippet", Some(snippet))
}

/// One token of the text: its bytes, and whether it begins a sentence as
/// FTS5's `fts5SentenceFinderCb` says (the first token, or one after `.`
/// or `:` and then whitespace).
#[derive(Debug, Clone, Copy)]
struct Token {
    start: usize,
    end: usize,
    sentence: bool,
}

/// One instance of a phrase of the query in the text: the phrase and the
/// index of its first token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Inst {
    pub phrase: usize,
    pub offset: i64,
}

/// The tokens a snippet is cut from, taken as the tokenizer hands them
/// out ([`Window::token`]).
#[derive(Debug)]
pub(super) struct Window<'t> {
    text: &'t [u8],
    /// The first match's token (0 when none).
    first: i64,
    /// The longest phrase of the query, in tokens.
    longest: i64,
    /// The index of the next token the tokenizer hands out.
    next: i64,
    /// The tokens from `first - TOKENS` on (those before cannot be shown
    /// nor begin a sentence that wins: see [`cut`]).
    tokens: Vec<Token>,
    /// The index of `tokens[0]`.
    base: i64,
    /// Where the first match begins in the text.
    first_at: Option<usize>,
    /// The first token past the window: matches from there on are not
    /// looked at.
    past: Option<i64>,
}

impl<'t> Window<'t> {
    /// A window for `text` whose first match is at token `first`, for a
    /// query whose longest phrase has `longest` tokens.
    pub(super) fn new(text: &'t [u8], first: i64, longest: i64) -> Window<'t> {
        let base = (first - TOKENS).max(0);
        Window {
            text,
            first,
            longest: longest.max(1),
            next: 0,
            tokens: Vec::new(),
            base,
            first_at: None,
            past: None,
        }
    }

    /// Takes the next token of the text, `start..end` in bytes; false when
    /// the window needs no more.
    pub(super) fn token(&mut self, start: usize, end: usize) -> bool {
        let i = self.next;
        self.next += 1;
        if i >= self.base {
            // fts5SentenceFinderCb: whitespace, at least one byte of it,
            // after a `.` or a `:`.
            let before = self.text.get(..start).unwrap_or_default();
            let gap = before
                .iter()
                .rev()
                .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
                .count();
            let sentence = i == 0
                || (gap > 0
                    && start > gap
                    && matches!(before.get(start - gap - 1), Some(b'.' | b':')));
            self.tokens.push(Token {
                start,
                end,
                sentence,
            });
        }
        if i == self.first {
            self.first_at = Some(start);
        }
        if self.past.is_none() && self.first_at.is_some_and(|at| start >= at + WINDOW) {
            self.past = Some(i);
        }
        // Tokens past the window that a snippet of a match before it can
        // show: a window is at most TOKENS long, and starts at most a
        // phrase's length after the match it is cut for.
        self.past
            .is_none_or(|p| self.next < p + TOKENS + self.longest)
    }

    /// The tokens taken end here: matches at this token and past it are
    /// not looked at.
    pub(super) fn end(&self) -> i64 {
        self.base + self.tokens.len() as i64
    }
}

/// The snippet of the text of `w`, its matches `insts` (those before
/// [`Window::end`], in FTS5's order: by token, then phrase), each phrase's
/// length in tokens in `sizes`, the text being `doc_tokens` tokens long:
/// `fts5SnippetFunction` with `'«', '»', '…', 16`, on the matches of the
/// window (those before [`Window::past`] as places to start).
pub(super) fn cut(w: &Window<'_>, insts: &[Inst], sizes: &[i64], doc_tokens: i64) -> Vec<u8> {
    let size = |p: usize| sizes.get(p).copied().unwrap_or(1);
    // Each phrase's last scoring, for fts5SnippetScore's `aSeen`.
    let mut seen = vec![usize::MAX; sizes.len()];
    let mut scorings = 0usize;
    // fts5SnippetScore: the matches in TOKENS tokens from `at`, 1000 for
    // a phrase's first, 1 for each other; and where a snippet around
    // them starts.
    let mut score = |at: i64| -> (i64, i64) {
        scorings += 1;
        let from = insts.partition_point(|m| m.offset < at);
        let to = insts.partition_point(|m| m.offset < at + TOKENS);
        let mut score = 0;
        for m in &insts[from..to] {
            match seen.get_mut(m.phrase) {
                Some(s) if *s == scorings => score += 1,
                Some(s) => {
                    *s = scorings;
                    score += 1000;
                }
                None => score += 1000,
            }
        }
        let (first, last) = match (insts[from..to].first(), insts[from..to].last()) {
            (Some(f), Some(l)) => (f.offset, l.offset + size(l.phrase)),
            _ => (-1, 0),
        };
        let mut adj = first - (TOKENS - (last - first)) / 2;
        if adj + TOKENS > doc_tokens {
            adj = doc_tokens - TOKENS;
        }
        (score, adj.max(0))
    };
    let sentences: Vec<i64> = w
        .tokens
        .iter()
        .zip(w.base..)
        .filter(|(t, _)| t.sentence)
        .map(|(_, i)| i)
        .collect();
    let last = w.past.unwrap_or(i64::MAX);
    let (mut best, mut start) = (0, 0);
    for m in insts.iter().take_while(|m| m.offset < last) {
        let (s, adj) = score(m.offset);
        if s > best {
            (best, start) = (s, adj);
        }
        // The sentence the match is in, when it begins before the match.
        // (One that begins before the tokens kept holds no match in its
        // TOKENS tokens: it scores 100 or 120, less than the match's own
        // window scored first.)
        if doc_tokens > TOKENS {
            let k = sentences.partition_point(|&s| s <= m.offset);
            if let Some(&s) = k.checked_sub(1).and_then(|k| sentences.get(k)) {
                if s < m.offset {
                    let (n, _) = score(s);
                    let n = n + if s == 0 { 120 } else { 100 };
                    if n > best {
                        (best, start) = (n, s);
                    }
                }
            }
        }
    }
    highlight(w, insts, sizes, doc_tokens, start)
}

/// The text of tokens `start..start + TOKENS` of `w`, its matches marked:
/// `fts5HighlightCb` over them, then the end of `fts5SnippetFunction`.
fn highlight(
    w: &Window<'_>,
    insts: &[Inst],
    sizes: &[i64],
    doc_tokens: i64,
    start: i64,
) -> Vec<u8> {
    let end = start + TOKENS - 1;
    let text = w.text;
    let mut out = Vec::new();
    let copy = |out: &mut Vec<u8>, from: usize, to: usize| {
        out.extend_from_slice(text.get(from..to).unwrap_or_default());
    };
    // fts5CInstIterNext: the matches coalesced where they overlap, as
    // (first token, last token), from the first one at `start` or after.
    let mut groups = {
        let mut i = 0;
        std::iter::from_fn(move || {
            let m = insts.get(i)?;
            let size = |p: usize| sizes.get(p).copied().unwrap_or(1);
            let (first, mut last) = (m.offset, m.offset - 1 + size(m.phrase));
            i += 1;
            while let Some(n) = insts.get(i).filter(|n| n.offset <= last) {
                last = last.max(n.offset - 1 + size(n.phrase));
                i += 1;
            }
            Some((first, last))
        })
        .skip_while(|g| g.0 < start)
    };
    let mut group = groups.next();
    if start > 0 {
        out.extend_from_slice(ELLIPSIS);
    }
    let (mut off, mut open) = (0usize, false);
    let first = usize::try_from(start - w.base).unwrap_or(0);
    for (t, pos) in w.tokens.iter().skip(first).zip(start..=end) {
        if start > 0 && pos == start {
            off = t.start;
        }
        if open && group.is_none_or(|g| pos <= g.0) && t.start > off {
            out.extend_from_slice(CLOSE);
            open = false;
        }
        if group.is_some_and(|g| pos == g.0) && !open {
            copy(&mut out, off, t.start);
            out.extend_from_slice(OPEN);
            off = t.start;
            open = true;
        }
        if group.is_some_and(|g| pos == g.1) {
            if !open {
                out.extend_from_slice(OPEN);
                open = true;
            }
            copy(&mut out, off, t.end);
            off = t.end;
            group = groups.next();
        }
        if pos == end {
            if open {
                if group.is_some_and(|g| pos >= g.0) {
                    copy(&mut out, off, t.end);
                    off = t.end;
                }
                out.extend_from_slice(CLOSE);
                open = false;
            }
            copy(&mut out, off, t.end);
            off = t.end;
        }
    }
    if open {
        out.extend_from_slice(CLOSE);
    }
    if end >= doc_tokens - 1 {
        copy(&mut out, off, text.len());
    } else {
        out.extend_from_slice(ELLIPSIS);
    }
    out
}

/// `mi_snippet(records_fts)`: the snippet of the current row (column 0),
/// as [`cut`] makes it.
#[allow(unsafe_code)]
unsafe extern "C" fn snippet(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    _n: c_int,
    _values: *mut *mut ffi::sqlite3_value,
) {
    unsafe extern "C" fn token(
        w: *mut c_void,
        flags: c_int,
        _token: *const c_char,
        _len: c_int,
        start: c_int,
        end: c_int,
    ) -> c_int {
        if flags & ffi::FTS5_TOKEN_COLOCATED != 0 {
            return ffi::SQLITE_OK;
        }
        // SAFETY: `w` is the `Window` passed to the `xTokenize` call that
        // calls this, alive and borrowed by nothing else for all of it.
        let w = unsafe { &mut *w.cast::<Window<'_>>() };
        let (Ok(start), Ok(end)) = (usize::try_from(start), usize::try_from(end)) else {
            return ffi::SQLITE_CORRUPT;
        };
        if w.token(start, end) {
            ffi::SQLITE_OK
        } else {
            // Stops the tokenizer, which then returns SQLITE_OK.
            ffi::SQLITE_DONE
        }
    }
    // SAFETY: FTS5 calls this with its own API object and the context of
    // the row being returned, both valid for the call; every function
    // pointer is checked before it is called; the text FTS5 hands out
    // stays valid and unchanged for the call (it is the row's), and every
    // out-parameter is a local.
    let out = unsafe {
        (|| -> Result<Vec<u8>, c_int> {
            let api = api.as_ref().ok_or(ffi::SQLITE_MISUSE)?;
            let missing = ffi::SQLITE_MISUSE;
            let ok = |rc: c_int| {
                if rc == ffi::SQLITE_OK {
                    Ok(())
                } else {
                    Err(rc)
                }
            };
            let (mut z, mut n): (*const c_char, c_int) = (ptr::null(), 0);
            ok((api.xColumnText.ok_or(missing)?)(fts, 0, &mut z, &mut n))?;
            let text: &[u8] = match usize::try_from(n) {
                Ok(n) if !z.is_null() && n > 0 => std::slice::from_raw_parts(z.cast::<u8>(), n),
                _ => &[],
            };
            let mut doc_tokens: c_int = 0;
            ok((api.xColumnSize.ok_or(missing)?)(fts, 0, &mut doc_tokens))?;
            let phrases = (api.xPhraseCount.ok_or(missing)?)(fts);
            let phrase_size = api.xPhraseSize.ok_or(missing)?;
            let sizes: Vec<i64> = (0..phrases)
                .map(|p| i64::from(phrase_size(fts, p)))
                .collect();
            let mut count: c_int = 0;
            ok((api.xInstCount.ok_or(missing)?)(fts, &mut count))?;
            let inst = api.xInst.ok_or(missing)?;
            let nth = |i: c_int| -> Result<Option<Inst>, c_int> {
                let (mut phrase, mut col, mut off) = (0, 0, 0);
                ok(inst(fts, i, &mut phrase, &mut col, &mut off))?;
                Ok((col == 0).then(|| Inst {
                    phrase: usize::try_from(phrase).unwrap_or(usize::MAX),
                    offset: i64::from(off),
                }))
            };
            let mut first = 0;
            for i in 0..count {
                if let Some(m) = nth(i)? {
                    first = m.offset;
                    break;
                }
            }
            let longest = sizes.iter().copied().max().unwrap_or(1);
            let mut w = Window::new(text, first, longest);
            if !text.is_empty() {
                let rc = (api.xTokenize.ok_or(missing)?)(
                    fts,
                    z,
                    n,
                    (&raw mut w).cast::<c_void>(),
                    Some(token),
                );
                if rc != ffi::SQLITE_DONE {
                    ok(rc)?;
                }
            }
            let end = w.end();
            let mut insts = Vec::new();
            for i in 0..count {
                match nth(i)? {
                    Some(m) if m.offset >= end => break,
                    Some(m) => insts.push(m),
                    None => {}
                }
            }
            Ok(cut(&w, &insts, &sizes, i64::from(doc_tokens)))
        })()
    };
    // SAFETY: `ctx` is the call's; SQLITE_TRANSIENT has SQLite copy the
    // text (its length given: a NUL in it is kept) before `out` is
    // dropped.
    unsafe {
        match out {
            Ok(b) => match c_int::try_from(b.len()) {
                Ok(len) => ffi::sqlite3_result_text(
                    ctx,
                    b.as_ptr().cast::<c_char>(),
                    len,
                    ffi::SQLITE_TRANSIENT(),
                ),
                Err(_) => ffi::sqlite3_result_error_toobig(ctx),
            },
            Err(rc) => ffi::sqlite3_result_error_code(ctx, rc),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text of `len` tokens of a few words (one with a diacritic, in
    /// both cases), joined by separators among which sentence ends.
    fn text(seed: &mut u64, len: usize) -> String {
        let mut next = move || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed
        };
        const WORDS: [&str; 9] = [
            "alpha", "beta", "Gamma", "ÉTÉ", "été", "naïve", "x1", "a", "b",
        ];
        const SEPS: [&str; 10] = [" ", "  ", ". ", ": ", ", ", "\n", ".\n\n", "-", "/", "::"];
        let mut s = String::new();
        if next() % 4 == 0 {
            s.push_str("> ");
        }
        for i in 0..len {
            if i > 0 {
                s.push_str(SEPS[(next() % SEPS.len() as u64) as usize]);
            }
            s.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
        }
        if next() % 3 == 0 {
            s.push_str(" ...\n");
        }
        s
    }

    /// On texts of a few to a hundred tokens (all inside the window), the
    /// snippets are FTS5's `snippet()`, byte for byte, for every kind of
    /// query: words, phrases, prefixes, OR, NOT, NEAR, an initial token.
    #[test]
    fn snippets_are_fts5s_inside_the_window() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'unicode61 remove_diacritics 2')",
        )
        .unwrap();
        register(&conn).unwrap();
        // Matches that overlap (coalesced into one mark), a phrase longer
        // than a snippet, a text of whitespace and punctuation around.
        for t in [
            "a b a b a b a x1 a b a",
            "x1 a b a b a. alpha beta gamma: a b a",
            "  \n a b a a b a b a b.  ",
        ] {
            conn.execute("INSERT INTO t (text) VALUES (?1)", [t])
                .unwrap();
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for len in (1..=100).chain([3, 5, 8, 15, 16, 17, 31, 33]) {
            for _ in 0..6 {
                let t = text(&mut seed, len);
                conn.execute("INSERT INTO t (text) VALUES (?1)", [&t])
                    .unwrap();
            }
        }
        let queries = [
            "alpha",
            "ete",
            "\"alpha beta\"",
            "alpha beta",
            "alpha beta gamma naive",
            "\"a b a\"",
            "al*",
            "x1 OR b",
            "alpha NOT beta",
            "alpha NOT \"beta gamma\"",
            "NEAR(alpha beta, 2)",
            "NEAR(ete naive, 0) OR x1",
            "^alpha",
            "\"alpha beta gamma ete naive x1 a b alpha beta gamma ete naive x1 a b alpha beta\"",
            "a* b* g*",
        ];
        let mut compared = 0;
        for q in queries {
            let mut st = conn
                .prepare(
                    "SELECT rowid, snippet(t, 0, '«', '»', '…', 16), mi_snippet(t)
                     FROM t WHERE t MATCH ?1",
                )
                .unwrap();
            let rows: Vec<(i64, String, String)> = st
                .query_map([q], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            for (rowid, fts5, ours) in rows {
                assert_eq!(ours, fts5, "{q}, row {rowid}");
                compared += 1;
            }
        }
        assert!(compared > 2000, "{compared}");
    }
}
