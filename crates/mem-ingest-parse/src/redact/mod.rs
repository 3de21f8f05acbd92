//! Redaction: secrets in a record's free text replaced by
//! `[REDACTED:<rule id>]` before any sink sees it.
//!
//! The rules are gitleaks' published ones, as data ([`rules`], which names
//! their licence and version), plus three of mem-ingest's own where
//! gitleaks has only its `generic-api-key`. A text is searched once for
//! every rule's keywords (one Aho-Corasick automaton, case-sensitive, each
//! keyword written in the case its regex needs); a rule's regex runs only
//! in a window around its keywords' hits (from `back` bytes before a hit
//! to `reach` bytes after it, the windows of nearby hits joined), never
//! over a text none of its keywords is in (whether a text holds any is one
//! leftmost-first search, which runs on the automaton's SIMD prefilter; the
//! windows of a text that does come from a second, overlapping one). A match's secret (the first
//! group that took part, else the whole match) is kept when its Shannon
//! entropy is below the rule's, or an allowlist regex of the rule's or
//! gitleaks' global ones matches it, or it holds a global stopword.
//! Matches that overlap keep the one that starts first (the longer when
//! they start together).

mod rules;

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::Input;

/// One rule: a gitleaks rule's fields, and where a match lies around its
/// keywords.
#[derive(Debug)]
pub(crate) struct Rule {
    /// gitleaks' `id`: what the replacement names.
    pub(crate) id: &'static str,
    /// gitleaks' `regex` (RE2 syntax, which the regex engine reads the same
    /// for these; classes are ASCII, as Go's are).
    pub(crate) regex: &'static str,
    /// Literal strings one of which every match holds.
    pub(crate) keywords: &'static [&'static str],
    /// The least Shannon entropy (bits a byte) of a secret (0: any).
    pub(crate) entropy: f32,
    /// Regexes of secrets that are not secrets (any one matching keeps it).
    pub(crate) allow: &'static [&'static str],
    /// The whole match is the secret even when the regex has groups.
    pub(crate) whole: bool,
    /// How many bytes before a keyword's hit a match can start.
    pub(crate) back: usize,
    /// How many bytes after a keyword's hit a match can end, at most.
    pub(crate) reach: usize,
}

/// A secret found: the rule (its index in [`Redactor::rule_ids`]) and its
/// bytes in the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// The rule's index.
    pub rule: usize,
    /// Where the secret starts (a char boundary).
    pub start: usize,
    /// Where it ends (a char boundary).
    pub end: usize,
}

/// The compiled rules ([`Redactor::get`]).
pub struct Redactor {
    rules: &'static [Rule],
    ids: Vec<&'static str>,
    /// The keywords, for whether a text holds any: leftmost-first, which
    /// lets the automaton search with its SIMD prefilter (Teddy) at
    /// gigabytes a second (standard matching cannot: a quarter of that).
    any_keyword: AhoCorasick,
    /// The keywords, every occurrence (overlapping): a text's windows.
    keywords: AhoCorasick,
    /// The rules of each keyword (distinct), by the keyword's pattern
    /// index.
    keyword_rules: Vec<Vec<usize>>,
    /// The longest keyword's length.
    longest: usize,
    regexes: Vec<Regex>,
    /// Each rule's allowlist as one regex, if it has one.
    allow: Vec<Option<Regex>>,
    global_allow: Regex,
    stopwords: AhoCorasick,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.ids)
            .finish()
    }
}

/// The regex syntax of gitleaks' rules (Go's RE2): ASCII classes and word
/// boundaries, on bytes.
fn compile(pattern: &str) -> Regex {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .build(pattern)
        .unwrap_or_else(|e| panic!("redaction rule regex {pattern:?}: {e}"))
}

fn compile_many(patterns: &[&str]) -> Regex {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .build_many(patterns)
        .unwrap_or_else(|e| panic!("redaction allowlist regexes {patterns:?}: {e}"))
}

impl Redactor {
    /// The shipped rules, compiled once per process.
    pub fn get() -> &'static Redactor {
        static ONE: OnceLock<Redactor> = OnceLock::new();
        ONE.get_or_init(|| Redactor::new(rules::RULES))
    }

    fn new(rules: &'static [Rule]) -> Redactor {
        let mut patterns: Vec<&str> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            for k in r.keywords {
                match patterns.iter().position(|p| p == k) {
                    Some(j) => keyword_rules[j].push(i),
                    None => {
                        patterns.push(k);
                        keyword_rules.push(vec![i]);
                    }
                }
            }
        }
        let longest = patterns.iter().map(|p| p.len()).max().unwrap_or(0);
        let keywords = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .expect("the rules' keywords build an automaton");
        let any_keyword = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&patterns)
            .expect("the rules' keywords build an automaton");
        let stopwords = AhoCorasick::new(rules::GLOBAL_STOPWORDS).expect("stopwords build");
        Redactor {
            rules,
            ids: rules.iter().map(|r| r.id).collect(),
            any_keyword,
            keywords,
            keyword_rules,
            longest,
            regexes: rules.iter().map(|r| compile(r.regex)).collect(),
            allow: rules
                .iter()
                .map(|r| (!r.allow.is_empty()).then(|| compile_many(r.allow)))
                .collect(),
            global_allow: compile_many(rules::GLOBAL_ALLOW),
            stopwords,
        }
    }

    /// The rules' ids, in the order of [`Found::rule`].
    pub fn rule_ids(&self) -> &[&'static str] {
        &self.ids
    }

    /// The index of the rule `id`.
    pub fn rule_index(&self, id: &str) -> Option<usize> {
        self.ids.iter().position(|r| *r == id)
    }

    /// Whether `text` holds any rule's keyword: when not, it holds no
    /// secret. A text built escaped (JSON string escapes) holds every
    /// keyword its decoded text holds (no keyword has a quote, backslash
    /// or control byte).
    pub fn may_hold(&self, text: &[u8]) -> bool {
        self.any_keyword.is_match(text)
    }

    /// Each rule's windows in `hay` (none: no keyword), joined where they
    /// meet, in order.
    ///
    /// Every occurrence of every keyword counts, also those that overlap:
    /// the leftmost-first search (fast) finds the first of each run of
    /// overlapping ones, and the overlapping search looks only at the
    /// bytes where others can start, those of the hit (and as many after
    /// as the longest keyword reaches).
    fn windows(&self, hay: &[u8]) -> Vec<Vec<(usize, usize)>> {
        let mut windows: Vec<Vec<(usize, usize)>> = Vec::new();
        for hit in self.any_keyword.find_iter(hay) {
            let (s, e) = (hit.start(), hit.end());
            let end = (e + self.longest).min(hay.len());
            for m in self.keywords.find_overlapping_iter(&hay[s..end]) {
                if m.start() >= e - s {
                    // Found by the leftmost-first search, after this hit.
                    continue;
                }
                let (ks, ke) = (s + m.start(), s + m.end());
                if windows.is_empty() {
                    windows.resize_with(self.rules.len(), Vec::new);
                }
                for &r in &self.keyword_rules[m.pattern().as_usize()] {
                    let rule = &self.rules[r];
                    let from = ks.saturating_sub(rule.back);
                    let to = ke.saturating_add(rule.reach).min(hay.len());
                    let w = &mut windows[r];
                    match w.last_mut() {
                        Some(last) if from <= last.1 => {
                            last.0 = last.0.min(from);
                            last.1 = last.1.max(to);
                        }
                        _ => w.push((from, to)),
                    }
                }
            }
        }
        windows
    }

    /// The secrets of `text`, in order, not overlapping, appended to
    /// `found` (cleared first).
    pub fn find(&self, text: &str, found: &mut Vec<Found>) {
        found.clear();
        let windows = self.windows(text.as_bytes());
        for (r, ws) in windows.iter().enumerate() {
            self.find_rule(r, text, ws, found);
        }
        // In order; of overlapping ones, the first (the longest of those
        // that start together).
        found.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end), f.rule));
        let mut kept = 0;
        for i in 0..found.len() {
            if kept > 0 && found[i].start < found[kept - 1].end {
                continue;
            }
            found[kept] = found[i];
            kept += 1;
        }
        found.truncate(kept);
    }

    /// Rule `r`'s secrets in its windows `ws` of `text`, pushed to `found`.
    /// Each window is searched for a match (the regex's fastest engine);
    /// only a match is searched again for its groups.
    fn find_rule(&self, r: usize, text: &str, ws: &[(usize, usize)], found: &mut Vec<Found>) {
        if ws.is_empty() {
            return;
        }
        let hay = text.as_bytes();
        let re = &self.regexes[r];
        let mut caps = None;
        let mut done = 0;
        for &(from, to) in ws {
            let mut at = from.max(done);
            while at < to {
                let Some(m) = re.search(&Input::new(hay).range(at..to)) else {
                    break;
                };
                let start = m.start();
                // Cut by the window: the match as the whole text has it,
                // from the same start.
                let end = if m.end() == to && to < hay.len() {
                    hay.len()
                } else {
                    m.end()
                };
                let caps = caps.get_or_insert_with(|| re.create_captures());
                re.search_captures(
                    &Input::new(hay)
                        .range(start..end)
                        .anchored(regex_automata::Anchored::Yes),
                    caps,
                );
                let Some(m) = caps.get_match() else { break };
                let (mut s, mut e) = (m.start(), m.end());
                let next = if e > s { e } else { s + 1 };
                if !self.rules[r].whole {
                    if let Some(g) = (1..caps.group_len()).find_map(|g| caps.get_group(g)) {
                        (s, e) = (g.start, g.end);
                    }
                }
                if e > s && self.is_secret(r, &hay[s..e]) {
                    // A secret's bytes as whole characters.
                    while !text.is_char_boundary(s) {
                        s -= 1;
                    }
                    while !text.is_char_boundary(e) {
                        e += 1;
                    }
                    found.push(Found {
                        rule: r,
                        start: s,
                        end: e,
                    });
                }
                at = next;
                done = next;
            }
        }
    }

    /// For measuring: each rule's id, how many windows `texts` give it, and
    /// the seconds its searches of them take.
    #[doc(hidden)]
    pub fn profile(&self, texts: &[String]) -> Vec<(&'static str, usize, f64)> {
        let mut out: Vec<(&'static str, usize, f64)> =
            self.ids.iter().map(|id| (*id, 0, 0.0)).collect();
        let mut found = Vec::new();
        for t in texts {
            let windows = self.windows(t.as_bytes());
            for (r, ws) in windows.iter().enumerate() {
                let at = std::time::Instant::now();
                self.find_rule(r, t, ws, &mut found);
                out[r].1 += ws.len();
                out[r].2 += at.elapsed().as_secs_f64();
            }
        }
        out
    }

    /// Whether a match's secret is one: entropy, allowlists, stopwords.
    fn is_secret(&self, r: usize, secret: &[u8]) -> bool {
        let rule = &self.rules[r];
        if rule.entropy > 0.0 && shannon(secret) < f64::from(rule.entropy) {
            return false;
        }
        let input = Input::new(secret);
        if self.allow[r]
            .as_ref()
            .is_some_and(|a| a.is_match(input.clone()))
        {
            return false;
        }
        !(self.global_allow.is_match(input) || self.stopwords.is_match(secret))
    }

    /// `text` with each of its secrets replaced by `[REDACTED:<rule id>]`,
    /// or None when it holds none; each secret's rule index is pushed to
    /// `rules`.
    pub fn redact(&self, text: &str, rules: &mut Vec<usize>) -> Option<String> {
        if !self.may_hold(text.as_bytes()) {
            return None;
        }
        self.redact_held(text, rules)
    }

    /// [`Redactor::redact`] of a text known to hold a keyword.
    fn redact_held(&self, text: &str, rules: &mut Vec<usize>) -> Option<String> {
        let mut found = Vec::new();
        self.find(text, &mut found);
        if found.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for f in &found {
            out.push_str(&text[at..f.start]);
            out.push_str("[REDACTED:");
            out.push_str(self.ids[f.rule]);
            out.push(']');
            at = f.end;
            rules.push(f.rule);
        }
        out.push_str(&text[at..]);
        Some(out)
    }

    /// [`Redactor::redact`] of a text built escaped, as a JSON string's
    /// contents (a raw-text read: `\"`, `\\`, `\n`, `\u00XX`, ...): searched
    /// as it is for keywords, decoded only where one is; the redacted text
    /// is returned decoded.
    pub fn redact_escaped(&self, escaped: &str, rules: &mut Vec<usize>) -> Option<String> {
        if !self.may_hold(escaped.as_bytes()) {
            return None;
        }
        let decoded = unescape(escaped);
        self.redact_held(&decoded, rules)
    }
}

/// The Shannon entropy of `s`'s bytes, in bits a byte (gitleaks' measure).
fn shannon(s: &[u8]) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut n = [0u32; 256];
    for &b in s {
        n[b as usize] += 1;
    }
    let len = s.len() as f64;
    n.iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

/// The text of a JSON string's contents (without its quotes). Escapes that
/// are not JSON's are kept as written; a lone surrogate becomes U+FFFD.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut at = 0;
    let hex4 = |i: usize| -> Option<u32> {
        let h = s.get(i..i + 4)?;
        if !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(h, 16).ok()
    };
    while let Some(i) = memchr::memchr(b'\\', &b[at..]).map(|i| i + at) {
        out.push_str(&s[at..i]);
        let Some(&c) = b.get(i + 1) else {
            out.push('\\');
            at = i + 1;
            break;
        };
        at = i + 2;
        match c {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => match hex4(i + 2) {
                Some(hi) => {
                    at = i + 6;
                    let ch = if (0xD800..0xDC00).contains(&hi)
                        && b.get(i + 6) == Some(&b'\\')
                        && b.get(i + 7) == Some(&b'u')
                    {
                        match hex4(i + 8).filter(|lo| (0xDC00..0xE000).contains(lo)) {
                            Some(lo) => {
                                at = i + 12;
                                char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                            }
                            None => None,
                        }
                    } else {
                        char::from_u32(hi)
                    };
                    out.push(ch.unwrap_or('\u{FFFD}'));
                }
                None => out.push_str("\\u"),
            },
            _ => {
                // Not an escape of JSON's: as written (a multi-byte
                // character after the backslash stays whole).
                out.push('\\');
                at = i + 1;
            }
        }
    }
    out.push_str(&s[at..]);
    out
}

#[cfg(test)]
mod tests;
