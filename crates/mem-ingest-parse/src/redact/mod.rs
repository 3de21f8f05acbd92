//! Redaction: secrets in a record's free text replaced by
//! `[REDACTED:<rule id>]` before any sink sees it.
//!
//! The rules are gitleaks' published ones, as data ([`rules`], which names
//! their licence and version), plus three of mem-ingest's own where
//! gitleaks has only its `generic-api-key`. A text is searched once for
//! every rule's keywords (case-sensitive, each keyword written in the case
//! its regex needs); a rule's regex runs only in a window around its
//! keywords' hits (from `back` bytes before a hit to `reach` bytes after
//! it, the windows of nearby hits joined), never over a text none of its
//! keywords is in (whether a text holds any is one leftmost-first search
//! by SIMD, Teddy, [`AnyKeyword`]; the windows of a text that does come
//! from a second, overlapping one, an Aho-Corasick automaton). A match's
//! secret (the first group that took part, else the whole match) is kept
//! when its Shannon entropy is below the rule's, or an allowlist regex of
//! the rule's or gitleaks' global ones matches it, or it holds a global
//! stopword. Matches that overlap keep the one that starts first (the
//! longer when they start together).
//!
//! A rule's regex and allowlist are compiled when a text first needs them
//! (a keyword of the rule hit, a match to check), once per process: most
//! runs hit a few rules' keywords, and compiling all of them cost more than
//! searching a small archive.

mod rules;
mod wide;

use std::sync::OnceLock;

use aho_corasick::{packed, AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex_automata::meta::{self, Regex};
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
    /// The keywords, for whether a text holds any (leftmost-first).
    any_keyword: AnyKeyword,
    /// The keywords, every occurrence (overlapping): a text's windows
    /// (built at the first hit).
    keywords: OnceLock<AhoCorasick>,
    /// The keywords, in the rules' order (the patterns of `keywords`).
    patterns: Vec<&'static str>,
    /// The rules of each keyword (distinct), by the keyword's pattern
    /// index.
    keyword_rules: Vec<Vec<usize>>,
    /// The longest keyword's length.
    longest: usize,
    /// Each rule's regex, compiled at its first window.
    regexes: Vec<OnceLock<Regex>>,
    /// Each rule's allowlist as one regex, if it has one (compiled at the
    /// rule's first match).
    allow: Vec<OnceLock<Option<Regex>>>,
    global_allow: OnceLock<Regex>,
    stopwords: OnceLock<AhoCorasick>,
}

/// The leftmost-first search for the keywords: Teddy (aho-corasick's
/// packed searcher), slim (8 buckets, 32 bytes a step with AVX2: twice
/// the bytes of fat Teddy's step, which aho-corasick picks for more than
/// 32 patterns) in [`rules::SEARCH_ORDER`], which puts look-alikes in a
/// bucket; the same 64 bytes a step where the processor has AVX-512
/// ([`wide`]); the automaton where the packed searcher cannot be built.
enum AnyKeyword {
    Wide(wide::Wide),
    Teddy(packed::Searcher),
    Automaton(AhoCorasick),
}

impl AnyKeyword {
    fn new(order: &[&'static str]) -> AnyKeyword {
        if let Some(w) = wide::Wide::new(order) {
            return AnyKeyword::Wide(w);
        }
        let mut c = packed::Config::new();
        c.match_kind(packed::MatchKind::LeftmostFirst)
            .only_teddy_fat(Some(false));
        match c.builder().extend(order).build() {
            Some(s) => AnyKeyword::Teddy(s),
            None => AnyKeyword::Automaton(
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(order)
                    .expect("the rules' keywords build an automaton"),
            ),
        }
    }

    /// Each hit's start and end, in order, not overlapping.
    #[inline]
    fn each(&self, hay: &[u8], mut f: impl FnMut(usize, usize)) {
        match self {
            AnyKeyword::Wide(w) => w.each(hay, &mut f),
            AnyKeyword::Teddy(s) => s.find_iter(hay).for_each(|m| f(m.start(), m.end())),
            AnyKeyword::Automaton(a) => a.find_iter(hay).for_each(|m| f(m.start(), m.end())),
        }
    }

    fn is_match(&self, hay: &[u8]) -> bool {
        match self {
            AnyKeyword::Wide(w) => {
                let mut any = false;
                w.each(hay, &mut |_, _| any = true);
                any
            }
            AnyKeyword::Teddy(s) => s.find(hay).is_some(),
            AnyKeyword::Automaton(a) => a.is_match(hay),
        }
    }
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

/// An allowlist: asked only whether a secret (a few hundred bytes at
/// most) matches, which the PikeVM answers at once; without the engines
/// that search long texts fast (lazy DFA, one-pass DFA, backtracker), the
/// regex compiles in half the time.
fn compile_many(patterns: &[&str]) -> Regex {
    Regex::builder()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(
            meta::Config::new()
                .hybrid(false)
                .onepass(false)
                .backtrack(false),
        )
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
        let any_keyword = AnyKeyword::new(&search_order(&patterns, rules::SEARCH_ORDER));
        Redactor {
            rules,
            ids: rules.iter().map(|r| r.id).collect(),
            any_keyword,
            keywords: OnceLock::new(),
            patterns,
            keyword_rules,
            longest,
            regexes: rules.iter().map(|_| OnceLock::new()).collect(),
            allow: rules.iter().map(|_| OnceLock::new()).collect(),
            global_allow: OnceLock::new(),
            stopwords: OnceLock::new(),
        }
    }

    /// The overlapping search for the keywords.
    fn keywords(&self) -> &AhoCorasick {
        self.keywords.get_or_init(|| {
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .build(&self.patterns)
                .expect("the rules' keywords build an automaton")
        })
    }

    /// Rule `r`'s regex.
    fn regex(&self, r: usize) -> &Regex {
        self.regexes[r].get_or_init(|| compile(self.rules[r].regex))
    }

    /// Rule `r`'s allowlist, if it has one.
    fn allow(&self, r: usize) -> Option<&Regex> {
        self.allow[r]
            .get_or_init(|| {
                let allow = self.rules[r].allow;
                (!allow.is_empty()).then(|| compile_many(allow))
            })
            .as_ref()
    }

    /// Every rule's regex and allowlist, the global allowlist and the
    /// stopwords compiled now (a test that they all compile).
    #[doc(hidden)]
    pub fn compile_all(&self) {
        for r in 0..self.rules.len() {
            self.regex(r);
            self.allow(r);
        }
        self.global_allow();
        self.stopwords();
        self.keywords();
    }

    fn global_allow(&self) -> &Regex {
        self.global_allow
            .get_or_init(|| compile_many(rules::GLOBAL_ALLOW))
    }

    fn stopwords(&self) -> &AhoCorasick {
        self.stopwords
            .get_or_init(|| AhoCorasick::new(rules::GLOBAL_STOPWORDS).expect("stopwords build"))
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

    /// Whether the keyword search gives `hay` the hits that aho-corasick's
    /// packed searcher (leftmost-first, the same order) gives it: the
    /// search is that searcher, or the same 64 bytes a step ([`wide`]).
    /// For the `redact` fuzz target.
    #[doc(hidden)]
    pub fn keyword_search_agrees(&self, hay: &[u8]) -> bool {
        static PACKED: OnceLock<packed::Searcher> = OnceLock::new();
        let packed = PACKED.get_or_init(|| {
            let mut c = packed::Config::new();
            c.match_kind(packed::MatchKind::LeftmostFirst);
            c.builder()
                .extend(search_order(&self.patterns, rules::SEARCH_ORDER))
                .build()
                .expect("the packed searcher builds")
        });
        let want: Vec<(usize, usize)> = packed
            .find_iter(hay)
            .map(|m| (m.start(), m.end()))
            .collect();
        let mut got = Vec::new();
        self.any_keyword.each(hay, |s, e| got.push((s, e)));
        got == want
    }

    /// Each rule's windows in `hay` (none: no keyword), joined where they
    /// meet, in order.
    fn windows(&self, hay: &[u8]) -> Vec<Vec<(usize, usize)>> {
        let mut windows = self.windows_of(hay, Some);
        clip(&mut windows, hay.len());
        windows
    }

    /// Each rule's windows in a text whose keywords are searched for in
    /// `hay` (the text itself, or the text as escaped), a hit at `hay`'s
    /// byte `i` being at the text's byte `at(i)` (None: not a hit in the
    /// text, a keyword's first byte inside an escape); not cut at the
    /// text's end ([`clip`]). `at` is asked nothing when there is no hit.
    ///
    /// Every occurrence of every keyword counts, also those that overlap:
    /// the leftmost-first search (fast) finds the first of each run of
    /// overlapping ones, and the overlapping search looks only at the
    /// bytes where others can start, those of the hit (and as many after
    /// as the longest keyword reaches).
    #[inline]
    fn windows_of(
        &self,
        hay: &[u8],
        mut at: impl FnMut(usize) -> Option<usize>,
    ) -> Vec<Vec<(usize, usize)>> {
        let mut windows: Vec<Vec<(usize, usize)>> = Vec::new();
        self.any_keyword.each(hay, |s, e| {
            let end = (e + self.longest).min(hay.len());
            for m in self.keywords().find_overlapping_iter(&hay[s..end]) {
                if m.start() >= e - s {
                    // Found by the leftmost-first search, after this hit.
                    continue;
                }
                let Some(ks) = at(s + m.start()) else {
                    continue;
                };
                // No keyword holds a byte that is escaped: its bytes are
                // the text's.
                let ke = ks + m.len();
                if windows.is_empty() {
                    windows.resize_with(self.rules.len(), Vec::new);
                }
                for &r in &self.keyword_rules[m.pattern().as_usize()] {
                    let rule = &self.rules[r];
                    let from = ks.saturating_sub(rule.back);
                    let to = ke.saturating_add(rule.reach);
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
        });
        windows
    }

    /// The secrets of `text`, in order, not overlapping, appended to
    /// `found` (cleared first).
    pub fn find(&self, text: &str, found: &mut Vec<Found>) {
        found.clear();
        let windows = self.windows(text.as_bytes());
        let whole = [(0, text.as_bytes())];
        for (r, ws) in windows.iter().enumerate() {
            // The whole text: it never wants more.
            self.find_rule(r, &whole, text.len(), ws, found);
        }
        settle(found);
    }

    /// Rule `r`'s secrets in its windows `ws` of a text of `len` bytes,
    /// pushed to `found`; the text's bytes are those of `pieces`, each
    /// with its first byte's place in the text, in order, each window
    /// inside one (the whole text, or pieces around the windows that hold
    /// the bytes a regex looks at beside a window: [`MARGIN`]). Each window
    /// is searched for a match (the regex's fastest engine); only a match
    /// is searched again for its groups. False (`found` then incomplete)
    /// when a match that the window cuts must be searched again up to the
    /// text's end and the pieces do not reach it.
    fn find_rule(
        &self,
        r: usize,
        pieces: &[(usize, &[u8])],
        len: usize,
        ws: &[(usize, usize)],
        found: &mut Vec<Found>,
    ) -> bool {
        if ws.is_empty() {
            return true;
        }
        let re = self.regex(r);
        let mut caps = None;
        let mut done = 0;
        for &(from, to) in ws {
            // The piece that holds the window.
            let (base, hay) = pieces[pieces.partition_point(|p| p.0 <= from) - 1];
            debug_assert!(to <= base + hay.len(), "a window outside its piece");
            let mut at = from.max(done);
            while at < to {
                let Some(m) = re.search(&Input::new(hay).range(at - base..to - base)) else {
                    break;
                };
                let start = m.start();
                // Cut by the window: the match as the whole text has it,
                // from the same start.
                let end = if base + m.end() == to && to < len {
                    if base + hay.len() < len {
                        return false;
                    }
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
                let next = base + if e > s { e } else { s + 1 };
                if !self.rules[r].whole {
                    if let Some(g) = (1..caps.group_len()).find_map(|g| caps.get_group(g)) {
                        (s, e) = (g.start, g.end);
                    }
                }
                if e > s && self.is_secret(r, &hay[s..e]) {
                    // A secret's bytes as whole characters (a piece's
                    // margin holds the character a secret starts or ends
                    // in).
                    while s > 0 && !starts_char(hay[s]) {
                        s -= 1;
                    }
                    while e < hay.len() && !starts_char(hay[e]) {
                        e += 1;
                    }
                    found.push(Found {
                        rule: r,
                        start: base + s,
                        end: base + e,
                    });
                }
                at = next;
                done = next;
            }
        }
        true
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
            let whole = [(0, t.as_bytes())];
            for (r, ws) in windows.iter().enumerate() {
                let at = std::time::Instant::now();
                self.find_rule(r, &whole, t.len(), ws, &mut found);
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
        if self.allow(r).is_some_and(|a| a.is_match(input.clone())) {
            return false;
        }
        !(self.global_allow().is_match(input) || self.stopwords().is_match(secret))
    }

    /// `text` with each of its secrets replaced by `[REDACTED:<rule id>]`,
    /// or None when it holds none; each secret's rule index is pushed to
    /// `rules`.
    pub fn redact(&self, text: &str, rules: &mut Vec<usize>) -> Option<String> {
        // One keyword search: a text without a keyword gives no window.
        self.redact_held(text, rules)
    }

    /// [`Redactor::redact`], searching the whole text.
    fn redact_held(&self, text: &str, rules: &mut Vec<usize>) -> Option<String> {
        let mut found = Vec::new();
        self.find(text, &mut found);
        self.replace(text, &found, rules)
    }

    /// `text` with the secrets `found` replaced (None when there are
    /// none); each one's rule pushed to `rules`.
    fn replace(&self, text: &str, found: &[Found], rules: &mut Vec<usize>) -> Option<String> {
        if found.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for f in found {
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
    /// contents (a raw-text read: `\"`, `\\`, `\n`, `\u00XX`, ...): the
    /// redacted text is returned decoded.
    ///
    /// The text is searched as it is for keywords (no keyword holds a byte
    /// that is escaped), and only the bytes around their hits are decoded
    /// for the rules' regexes ([`Redactor::find_escaped`]); the whole text
    /// is decoded only when it holds a secret, or an escape the NDJSON
    /// writer never writes (`\u0041`, `\/`: a keyword may hide behind one),
    /// or a match that its window cuts.
    pub fn redact_escaped(&self, escaped: &str, rules: &mut Vec<usize>) -> Option<String> {
        let mut found = Vec::new();
        if !self.find_escaped(escaped.as_bytes(), &mut found) {
            let decoded = unescape(escaped);
            return self.redact_held(&decoded, rules);
        }
        if found.is_empty() {
            return None;
        }
        self.replace(&unescape(escaped), &found, rules)
    }

    /// The secrets of the text `escaped` decodes to, as [`Redactor::find`]
    /// finds them in it (places in the decoded text), decoding only the
    /// rules' windows (and [`MARGIN`] bytes either side); false when it
    /// cannot tell that way (`found` is then incomplete): an escape that is
    /// not one of [`crate::json::escape`]'s, or a match that its window
    /// cuts (searched again to the text's end).
    #[doc(hidden)]
    pub fn find_escaped(&self, escaped: &[u8], found: &mut Vec<Found>) -> bool {
        found.clear();
        // Where the escapes are, read at the first hit (a text without a
        // keyword is searched once, and no further).
        let mut esc: Option<Option<Escapes>> = None;
        let mut windows = self.windows_of(escaped, |i| {
            esc.get_or_insert_with(|| Escapes::of(escaped))
                .as_ref()
                .and_then(|e| e.decoded(escaped, i))
        });
        let esc = match esc {
            // No keyword: no secret.
            None => return true,
            Some(None) => return false,
            Some(Some(e)) => e,
        };
        clip(&mut windows, esc.decoded_len);
        // Every window, MARGIN bytes wider on each side, the ones that
        // meet joined: the pieces of the text decoded.
        let mut spans: Vec<(usize, usize)> = windows
            .iter()
            .flatten()
            .map(|&(f, t)| {
                (
                    f.saturating_sub(MARGIN),
                    t.saturating_add(MARGIN).min(esc.decoded_len),
                )
            })
            .collect();
        if spans.is_empty() {
            return true;
        }
        spans.sort_unstable();
        let mut joined: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
        for (f, t) in spans {
            match joined.last_mut() {
                Some(last) if f <= last.1 => last.1 = last.1.max(t),
                _ => joined.push((f, t)),
            }
        }
        let mut buf = Vec::new();
        let mut starts = Vec::with_capacity(joined.len());
        for &(f, t) in &joined {
            starts.push(buf.len());
            esc.decode(escaped, f, t, &mut buf);
            debug_assert_eq!(buf.len() - starts[starts.len() - 1], t - f);
        }
        let pieces: Vec<(usize, &[u8])> = joined
            .iter()
            .zip(&starts)
            .map(|(&(f, t), &at)| (f, &buf[at..at + (t - f)]))
            .collect();
        for (r, ws) in windows.iter().enumerate() {
            if !self.find_rule(r, &pieces, esc.decoded_len, ws, found) {
                return false;
            }
        }
        settle(found);
        true
    }
}

/// How many bytes of a text beside a window a piece decoded for it holds:
/// a regex looks at one beside its search (a word boundary, a line's
/// start), a secret widened to whole characters at three.
const MARGIN: usize = 8;

/// The keywords `patterns` in the any-keyword search's order: `order`
/// when it holds each of them once and keeps every keyword that starts
/// another before it (the leftmost-first search then gives the same hits
/// as in the rules' order), else the rules' order.
fn search_order<'k>(patterns: &[&'k str], order: &[&'k str]) -> Vec<&'k str> {
    let mut a = patterns.to_vec();
    let mut b = order.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    let at = |k: &str, list: &[&str]| list.iter().position(|p| *p == k);
    let same_ties = patterns.iter().all(|x| {
        patterns.iter().all(|y| {
            x == y
                || !y.starts_with(x)
                || (at(x, patterns) < at(y, patterns)) == (at(x, order) < at(y, order))
        })
    });
    if a == b && same_ties {
        order.to_vec()
    } else {
        patterns.to_vec()
    }
}

/// Windows cut at the end of a text of `len` bytes (each starts in it).
fn clip(windows: &mut [Vec<(usize, usize)>], len: usize) {
    for w in windows.iter_mut().flatten() {
        w.1 = w.1.min(len);
    }
}

/// Whether `b` starts a character (is no UTF-8 continuation byte).
#[inline]
fn starts_char(b: u8) -> bool {
    (b as i8) >= -0x40
}

/// Secrets found, sorted and without overlaps: of overlapping ones, the
/// first (the longest of those that start together).
fn settle(found: &mut Vec<Found>) {
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

/// Where the escapes of a text escaped as [`crate::json::escape`] escapes
/// (quotes, backslashes and control bytes; each escape one byte of the
/// decoded text) are: each escape's backslash, and the byte it decodes to
/// in the decoded text.
struct Escapes {
    at: Vec<(u32, u32)>,
    decoded_len: usize,
}

impl Escapes {
    /// None when `s` holds an escape that is not one of those (or is 4 GiB
    /// or longer).
    fn of(s: &[u8]) -> Option<Escapes> {
        if u32::try_from(s.len()).is_err() {
            return None;
        }
        let mut at = Vec::new();
        let mut from = 0;
        let mut shrunk = 0;
        while let Some(i) = memchr::memchr(b'\\', &s[from..]) {
            let i = from + i;
            let len = escape_len(s, i)?;
            at.push((i as u32, (i - shrunk) as u32));
            shrunk += len - 1;
            from = i + len;
        }
        Some(Escapes {
            at,
            decoded_len: s.len() - shrunk,
        })
    }

    /// The decoded text's byte of `s`'s byte `i`; None when `i` is inside
    /// an escape (after its backslash).
    fn decoded(&self, s: &[u8], i: usize) -> Option<usize> {
        let k = self.at.partition_point(|&(e, _)| (e as usize) < i);
        let Some(&(e, d)) = k.checked_sub(1).map(|k| &self.at[k]) else {
            return Some(i);
        };
        let (e, d) = (e as usize, d as usize);
        // The escapes were read: their lengths are known.
        let end = e + escape_len(s, e).unwrap_or(2);
        (i >= end).then(|| d + 1 + (i - end))
    }

    /// The byte of `s` where the decoded text's byte `j` is written.
    fn escaped(&self, s: &[u8], j: usize) -> usize {
        let k = self.at.partition_point(|&(_, d)| (d as usize) < j);
        let Some(&(e, d)) = k.checked_sub(1).map(|k| &self.at[k]) else {
            return j;
        };
        let (e, d) = (e as usize, d as usize);
        e + escape_len(s, e).unwrap_or(2) + (j - d - 1)
    }

    /// Appends the decoded text's bytes `from..to` to `out`.
    fn decode(&self, s: &[u8], from: usize, to: usize, out: &mut Vec<u8>) {
        let (mut i, end) = (self.escaped(s, from), self.escaped(s, to));
        while let Some(b) = memchr::memchr(b'\\', &s[i..end]).map(|b| b + i) {
            out.extend_from_slice(&s[i..b]);
            let (byte, len) = match s[b + 1] {
                b'b' => (0x08, 2),
                b'f' => (0x0c, 2),
                b'n' => (b'\n', 2),
                b'r' => (b'\r', 2),
                b't' => (b'\t', 2),
                // \u00XX (checked by `of`).
                b'u' => (hex(s[b + 4]) << 4 | hex(s[b + 5]), 6),
                c => (c, 2),
            };
            out.push(byte);
            i = b + len;
        }
        out.extend_from_slice(&s[i..end]);
    }
}

/// The length of the escape at `s`'s byte `i` (a backslash): 2, or 6 for
/// `\u00XX` below 0x20; None for any other (one that may stand for a
/// keyword's byte, or decode to more than one byte).
#[inline]
fn escape_len(s: &[u8], i: usize) -> Option<usize> {
    match s.get(i + 1)? {
        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => Some(2),
        b'u' => match s.get(i + 2..i + 6)? {
            [b'0', b'0', h, l] if matches!(h, b'0' | b'1') && l.is_ascii_hexdigit() => Some(6),
            _ => None,
        },
        _ => None,
    }
}

/// A hex digit's value.
#[inline]
fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
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
