//! The rules redaction applies: data, one [`Rule`] each.
//!
//! Taken from gitleaks' published rule set, `config/gitleaks.toml` of
//! <https://github.com/gitleaks/gitleaks> at commit
//! b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b (v8.30.0-27-gb58d3f10,
//! 2026-07-22), MIT License, Copyright (c) 2019 Zachary Rice: each rule's
//! `id`, `regex`, `entropy` and allowlist regexes as published there, and
//! the global allowlist's regexes ([`GLOBAL_ALLOW`]). Its keywords, which
//! gitleaks matches in a lowercased copy of the text, are written here in
//! the case its rule's regex requires (both cases for a rule that ignores
//! case), so that one case-sensitive search finds them; a few are
//! shortened to what several rules share, so that the search has fewer
//! to look for (Slack's `xox`, Stripe's `k_live_`, `PASSW` for PASSWORD
//! and PASSWD): each keyword still lies in every match of its rules.
//!
//! Left out: `generic-api-key` (the words key, token and secret are all
//! through coding transcripts: it would redact code and cost speed), and
//! the rules that are neither in issue 46's list nor cheap to look for.
//! Where gitleaks has no rule of its own (its `generic-api-key` covers
//! them), three are mem-ingest's: `aws-secret-access-key`, `url-password`
//! and `env-secret` (marked below).
//!
//! Adding a rule: copy its `id`, `regex`, `entropy` and allowlist from
//! gitleaks.toml into a new entry, write its keywords in the case its
//! regex matches, set `back`/`reach` to how far before and after a
//! keyword a match can start and end, and add a test of its exact output
//! to `super::tests` (docs/privacy.md).

use super::Rule;

/// gitleaks' global allowlist regexes, applied to every secret found: a
/// secret they match is kept (booleans, runs of one letter, `$VAR`,
/// `${VAR}`, `{{ template }}`, `%VAR%`, format verbs, paths).
pub(super) const GLOBAL_ALLOW: &[&str] = &[
    r"(?i)^true|false|null$",
    r"^(?i:a+|b+|c+|d+|e+|f+|g+|h+|i+|j+|k+|l+|m+|n+|o+|p+|q+|r+|s+|t+|u+|v+|w+|x+|y+|z+|\*+|\.+)$",
    r"^\$(?:\d+|\{\d+\})$",
    r"^\$(?:[A-Z_]+|[a-z_]+)$",
    r"^\$\{(?:[A-Z_]+|[a-z_]+)\}$",
    r"^\{\{[ \t]*[\w ().|]+[ \t]*\}\}$",
    r#"^\$\{\{[ \t]*(?:(?:env|github|secrets|vars)(?:\.[A-Za-z]\w+)+[\w "'&./=|]*)[ \t]*\}\}$"#,
    r"^%(?:[A-Z_]+|[a-z_]+)%$",
    r"^%[+\-# 0]?[bcdeEfFgGoOpqstTUvxX]$",
    r"^\{\d{0,2}\}$",
    r"^@(?:[A-Z_]+|[a-z_]+)@$",
    r"^/Users/(?i)[a-z0-9]+/[\w .-/]+$",
    r"^/(?:bin|etc|home|opt|tmp|usr|var)/[\w ./-]+$",
];

/// gitleaks' global stopwords, then mem-ingest's: a secret that holds one
/// is kept. mem-ingest's are the runs of a placeholder in documentation
/// (`sk_live_xxxxxxxx`, `ghp_XXXXXXXX...`, `********`).
pub(super) const GLOBAL_STOPWORDS: &[&str] = &[
    "014df517-39d1-4453-b7b3-9930c563627c",
    "abcdefghijklmnopqrstuvwxyz",
    "xxxxxxxx",
    "XXXXXXXX",
    "********",
];

/// Placeholders a person writes where a password goes, for mem-ingest's
/// own rules: `<password>`, `[token]`, `your-...`, `changeme`, `xxxx`,
/// `****`, the word itself, and a short start cut with an ellipsis
/// (`sk-ant-...`, as READMEs show a key's shape: at most 12 characters
/// before it; a longer value that ends in dots or an ellipsis is a secret,
/// or a real one a display cut).
const PLACEHOLDER: &str = r"(?i)^(?:<[^>]*>|\[[^\]]*\]|\{[^}]*\}|your[_-].*|.*[_-]here|changeme|change_me|password|passwd|pass|pwd|secret|token|example|redacted|x{3,}|\*{3,}|.{0,12}\.{3}|.{0,12}…)$";

/// The standard terminator of gitleaks' regexes, for reference:
/// `(?:[\x60'"\s;]|\\[nr]|$)`.
pub(super) const RULES: &[Rule] = &[
    Rule {
        id: "aws-access-token",
        regex: r"\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b",
        keywords: &["A3T", "AKIA", "ASIA", "ABIA", "ACCA"],
        entropy: 3.0,
        allow: &[r".+EXAMPLE$"],
        whole: false,
        back: 0,
        reach: 24,
    },
    // mem-ingest's own (gitleaks: generic-api-key): an AWS secret access
    // key in its usual assignments (credentials file, environment, JSON).
    Rule {
        id: "aws-secret-access-key",
        regex: r#"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey|secret_access_key|SECRET_ACCESS_KEY)["']?[ \t]*(?:=|:|=>)[ \t]*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        keywords: &[
            "secret_access_key",
            "SECRET_ACCESS_KEY",
            "SecretAccessKey",
            "secretAccessKey",
        ],
        entropy: 3.0,
        allow: &[r"EXAMPLE"],
        whole: false,
        back: 8,
        reach: 80,
    },
    Rule {
        id: "github-pat",
        regex: r"ghp_[0-9a-zA-Z]{36}",
        keywords: &["ghp_"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 40,
    },
    Rule {
        id: "github-fine-grained-pat",
        regex: r"github_pat_\w{82}",
        keywords: &["github_pat_"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 93,
    },
    Rule {
        id: "github-oauth",
        regex: r"gho_[0-9a-zA-Z]{36}",
        keywords: &["gho_"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 40,
    },
    Rule {
        id: "github-app-token",
        regex: r"(?:ghu|ghs)_[0-9a-zA-Z]{36}",
        keywords: &["ghu_", "ghs_"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 40,
    },
    Rule {
        id: "github-refresh-token",
        regex: r"ghr_[0-9a-zA-Z]{36}",
        keywords: &["ghr_"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 40,
    },
    Rule {
        id: "gitlab-pat",
        regex: r"glpat-[\w-]{20}",
        keywords: &["glpat-"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 26,
    },
    Rule {
        id: "anthropic-api-key",
        regex: r#"\b(sk-ant-api03-[a-zA-Z0-9_\-]{93}AA)(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["sk-ant-api03"],
        entropy: 0.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 112,
    },
    Rule {
        id: "anthropic-admin-api-key",
        regex: r#"\b(sk-ant-admin01-[a-zA-Z0-9_\-]{93}AA)(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["sk-ant-admin01"],
        entropy: 0.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 114,
    },
    Rule {
        id: "openai-api-key",
        regex: r#"\b(sk-(?:proj|svcacct|admin)-(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})T3BlbkFJ(?:[A-Za-z0-9_-]{74}|[A-Za-z0-9_-]{58})\b|sk-[a-zA-Z0-9]{20}T3BlbkFJ[a-zA-Z0-9]{20})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["T3BlbkFJ"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 90,
        reach: 80,
    },
    Rule {
        id: "gcp-api-key",
        regex: r#"\b(AIza[\w-]{35})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["AIza"],
        entropy: 4.0,
        allow: &[
            r"AIzaSyabcdefghijklmnopqrstuvwxyz1234567",
            r"AIzaSyAnLA7NfeLquW1tJFpx_eQCxoX-oo6YyIs",
            r"AIzaSyCkEhVjf3pduRDt6d1yKOMitrUEke8agEM",
            r"AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU",
            r"AIzaSyD3asb-2pEZVqMkmL6M9N6nHZRR_znhrh0",
            r"AIzayDNSXIbFmlXbIE6mCzDLQAqITYefhixbX4A",
            r"AIzaSyAdOS2zB6NCsk1pCdZ4-P6GBdi_UUPwX7c",
            r"AIzaSyASWm6HmTMdYWpgMnjRBjxcQ9CKctWmLd4",
            r"AIzaSyANUvH9H9BsUccjsu2pCmEkOPjjaXeDQgY",
            r"AIzaSyA5_iVawFQ8ABuTZNUdcwERLJv_a_p4wtM",
            r"AIzaSyA4UrcGxgwQFTfaI3no3t7Lt1sjmdnP5sQ",
            r"AIzaSyDSb51JiIcB6OJpwwMicseKRhhrOq1cS7g",
            r"AIzaSyBF2RrAIm4a0mO64EShQfqfd2AFnzAvvuU",
            r"AIzaSyBcE-OOIbhjyR83gm4r2MFCu4MJmprNXsw",
            r"AIzaSyB8qGxt4ec15vitgn44duC5ucxaOi4FmqE",
            r"AIzaSyA8vmApnrHNFE0bApF4hoZ11srVL_n0nvY",
        ],
        whole: false,
        back: 0,
        reach: 42,
    },
    Rule {
        id: "slack-bot-token",
        regex: r"xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*",
        keywords: &["xox"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 256,
    },
    Rule {
        id: "slack-user-token",
        regex: r"xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}",
        keywords: &["xox"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 90,
    },
    Rule {
        id: "slack-app-token",
        regex: r"(?i)xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+",
        keywords: &["xapp", "XAPP"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 256,
    },
    Rule {
        id: "slack-config-access-token",
        regex: r"(?i)xoxe.xox[bp]-\d-[A-Z0-9]{163,166}",
        keywords: &["xox", "XOX"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 180,
    },
    Rule {
        id: "slack-config-refresh-token",
        regex: r"(?i)xoxe-\d-[A-Z0-9]{146}",
        keywords: &["xox", "XOX"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 160,
    },
    Rule {
        id: "slack-legacy-bot-token",
        regex: r"xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}",
        keywords: &["xox"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 48,
    },
    Rule {
        id: "slack-legacy-workspace-token",
        regex: r"xox[ar]-(?:\d-)?[0-9a-zA-Z]{8,48}",
        keywords: &["xox"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 60,
    },
    Rule {
        id: "slack-legacy-token",
        regex: r"xox[os]-\d+-\d+-\d+-[a-fA-F\d]+",
        keywords: &["xox"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 256,
    },
    Rule {
        id: "slack-webhook-url",
        regex: r"(?:https?://)?hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}",
        keywords: &["hooks.slack.com"],
        entropy: 0.0,
        allow: &[],
        whole: false,
        back: 8,
        reach: 90,
    },
    Rule {
        id: "stripe-access-token",
        regex: r#"\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["k_test_", "k_live_", "k_prod_"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 1,
        reach: 112,
    },
    Rule {
        id: "jwt",
        regex: r#"\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9/\\_-]{17,}\.(?:[a-zA-Z0-9/\\_-]{10,}={0,2})?)(?:[\x60'"\s;]|\\[nr]|$)"#,
        // gitleaks' keyword is `ey`, which "key" and "they" hold: `eyJ`,
        // the base64 of `{"` that starts every JWT's header, is the same
        // tokens' start at a fraction of the hits.
        keywords: &["eyJ"],
        entropy: 3.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 8192,
    },
    Rule {
        id: "private-key",
        regex: r"(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----[\s\S-]{64,}?KEY(?: BLOCK)?-----",
        keywords: &["-----BEGIN", "-----begin"],
        entropy: 0.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 1 << 16,
    },
    Rule {
        id: "npm-access-token",
        regex: r#"(?i)\b(npm_[a-z0-9]{36})(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["npm_", "NPM_"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 42,
    },
    Rule {
        id: "huggingface-access-token",
        regex: r#"\b(hf_(?i:[a-z]{34}))(?:[\x60'"\s;]|\\[nr]|$)"#,
        keywords: &["hf_"],
        entropy: 2.0,
        allow: &[],
        whole: false,
        back: 0,
        reach: 40,
    },
    // mem-ingest's own (gitleaks: generic-api-key): the password of a
    // connection URL, `scheme://user:password@host`.
    Rule {
        id: "url-password",
        regex: r#"\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s:/@"'<>`\\]{1,128}:([^\s/@"'<>`\\]{1,256})@[^\s/@"'<>`\\]"#,
        keywords: &["://"],
        entropy: 0.0,
        allow: &[PLACEHOLDER],
        whole: false,
        back: 32,
        reach: 400,
    },
    // mem-ingest's own (gitleaks: generic-api-key): the value of a
    // `NAME=value` line of a `.env` dump or an export, whose name, in
    // capitals as environment names are, says secret, token, password,
    // key, credential or auth. The name's value starts after `=`, without
    // spaces around it (a program's `KEY = ...` is code).
    Rule {
        id: "env-secret",
        regex: r#"(?m)(?:^|[\s;&|(]|\\[nrt])(?:export[ \t]+)?[A-Z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|PWD|KEY|CREDENTIAL|AUTH)[A-Z0-9_]*=(?:"([^"\\\r\n]{6,})"|'([^'\r\n]{6,})'|([^\s"'`;&|()<>\\$][^\s"'`;&|()<>\\]{5,}))"#,
        keywords: &[
            "SECRET",
            "TOKEN",
            "PASSW",
            "PWD",
            "KEY",
            "CREDENTIAL",
            "AUTH",
        ],
        entropy: 0.0,
        // and code: a dotted name (`KEY=process.env.KEY`)
        allow: &[
            PLACEHOLDER,
            r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$",
        ],
        whole: false,
        back: 72,
        reach: 1024,
    },
];

/// The keywords in the order the any-keyword search is built with (every
/// keyword once; a test checks it). aho-corasick's slim Teddy puts the
/// keywords in 8 buckets by their order (a keyword's bucket is its index
/// modulo 8, counted down, unless one with the same low nibbles in its
/// first three bytes came before), and a bucket matches every three bytes
/// whose nibbles its keywords' bytes have (each nibble on its own): a
/// bucket of unlike keywords takes common words for a candidate, and each
/// candidate is checked against the bucket's keywords. This order is the
/// one of least such work (candidates times their bucket's keywords) on
/// pi's real sessions and a generated pi archive, found by a search over
/// orders (swaps kept when they lowered it): 31 thousand checks on the
/// real sessions' 2 MB of text where the order of fat Teddy's 16 buckets
/// gave 349 thousand in 8, none on 8 MB of generated text. A keyword that
/// starts another stays after it (`SECRET_ACCESS_KEY` before `SECRET`), so
/// the leftmost-first search gives the same hits as in the rules' order.
pub(crate) const SEARCH_ORDER: &[&str] = &[
    "A3T",
    "KEY",
    "hf_",
    "ghu_",
    "eyJ",
    "SecretAccessKey",
    "xox",
    "ghs_",
    "TOKEN",
    "SECRET_ACCESS_KEY",
    "hooks.slack.com",
    "github_pat_",
    "k_test_",
    "CREDENTIAL",
    "XAPP",
    "NPM_",
    "ABIA",
    "secret_access_key",
    "ghp_",
    "ghr_",
    "XOX",
    "npm_",
    "ASIA",
    "secretAccessKey",
    "ACCA",
    "AUTH",
    "gho_",
    "xapp",
    "PWD",
    "sk-ant-admin01",
    "AIza",
    "k_live_",
    "PASSW",
    "-----BEGIN",
    "glpat-",
    "-----begin",
    "k_prod_",
    "SECRET",
    "AKIA",
    "sk-ant-api03",
    "T3BlbkFJ",
    "://",
];
