//! Exact outputs of each rule, and the look-alikes that stay.

use super::*;

/// Made-up credentials of each kind (random characters in each rule's
/// shape; none was ever issued).
const AWS_ID: &str = "AKIAEZCOJCBEUDBISVFZ";
const AWS_SECRET: &str = "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";
const GHP: &str = "ghp_lKaRT4l3tzKQ89bHPUcmXpx8fezCPliWyIX2";
const GH_FINE: &str =
    "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";
const ANTHROPIC: &str = "sk-ant-api03-AcVLvacYlDpVb0sBhRt-GXuKpxQDMLQTk_8IE1923xlE3tqi2fPiyPnfqAJV_K37sCQM1ORSAvSaF8gtRlrKl5EctCuwAAA";
const OPENAI: &str = "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";
const GCP: &str = "AIzad7Od1SdRzhqw88eu81MjM-wydYn3mUJpULL";
const SLACK: &str = "xoxb-8460277237-8369865801842-9pZ15SrhhQLekcN2cPBGg5MC";
const STRIPE: &str = "sk_live_OGAGOn80VSYfM9uoz02oPgfE";
const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
const GLPAT: &str = "glpat-6bpYdfeI5zNEmwTdUR3x";
const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nBdq3qlaLfLt2wWHAQ0w+VW0TxYGAm1vro1MrkJ1RrgzaAmZPTnAyIh4eSe8NOHgB\nsP4PdXQn/2vO7F6G8qzP9pe+NhWkqyHXSqUDGtTIvLXEPxxLfYrNbyDFWJhSPE5m\n0lyOmmNBV7qD9xzUbXsQWFfPsn44xAXrKqniYdrzW6QOH8teslnBWDGrcO9Ucmvd\n-----END RSA PRIVATE KEY-----";

fn redact(text: &str) -> (String, Vec<&'static str>) {
    let r = Redactor::get();
    let mut rules = Vec::new();
    let out = r.redact(text, &mut rules);
    let ids = rules.iter().map(|&i| r.rule_ids()[i]).collect();
    (out.unwrap_or_else(|| text.to_owned()), ids)
}

#[track_caller]
fn check(text: &str, want: &str, rules: &[&str]) {
    let (out, ids) = redact(text);
    assert_eq!(out, want);
    assert_eq!(ids, rules);
}

#[test]
fn each_rule_replaces_its_secret_with_its_id() {
    check(
        &format!("my key is {AWS_ID} ok"),
        "my key is [REDACTED:aws-access-token] ok",
        &["aws-access-token"],
    );
    check(
        &format!("[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"),
        "[default]\naws_access_key_id = [REDACTED:aws-access-token]\naws_secret_access_key = [REDACTED:aws-secret-access-key]\n",
        &["aws-access-token", "aws-secret-access-key"],
    );
    check(
        &format!(r#"{{"SecretAccessKey": "{AWS_SECRET}"}}"#),
        r#"{"SecretAccessKey": "[REDACTED:aws-secret-access-key]"}"#,
        &["aws-secret-access-key"],
    );
    check(
        &format!("git clone https://{GHP}@github.com/o/r"),
        "git clone https://[REDACTED:github-pat]@github.com/o/r",
        &["github-pat"],
    );
    check(
        &format!("token: {GH_FINE}"),
        "token: [REDACTED:github-fine-grained-pat]",
        &["github-fine-grained-pat"],
    );
    check(
        &format!("x-api-key: {ANTHROPIC}\n"),
        "x-api-key: [REDACTED:anthropic-api-key]\n",
        &["anthropic-api-key"],
    );
    check(
        &format!("OPENAI: '{OPENAI}'"),
        "OPENAI: '[REDACTED:openai-api-key]'",
        &["openai-api-key"],
    );
    check(
        &format!("key={GCP};"),
        "key=[REDACTED:gcp-api-key];",
        &["gcp-api-key"],
    );
    check(
        &format!("slack {SLACK} end"),
        "slack [REDACTED:slack-bot-token] end",
        &["slack-bot-token"],
    );
    check(
        &format!("stripe.api_key = \"{STRIPE}\""),
        "stripe.api_key = \"[REDACTED:stripe-access-token]\"",
        &["stripe-access-token"],
    );
    check(
        &format!("Authorization: Bearer {JWT}\n"),
        "Authorization: Bearer [REDACTED:jwt]\n",
        &["jwt"],
    );
    check(
        &format!("gitlab {GLPAT}."),
        "gitlab [REDACTED:gitlab-pat].",
        &["gitlab-pat"],
    );
    check(
        &format!("$ cat id_rsa\n{PEM}\n$ ls"),
        "$ cat id_rsa\n[REDACTED:private-key]\n$ ls",
        &["private-key"],
    );
    check(
        "DATABASE_URL=postgres://app:Zq8-vTr4_pLm@db.internal:5432/app",
        "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app",
        &["url-password"],
    );
}

#[test]
fn env_dump_lines_whose_names_say_secret() {
    let env = "DEBUG=true\nDB_PASSWORD=hunter2hunter\nexport STRIPE_WEBHOOK_SECRET=\"whsec 42 abc\"\nMY_API_KEY='k3y-v4lue-99'\nPORT=8080\nAUTH_TOKEN=${AUTH_TOKEN}\nSESSION_KEY=short\n";
    check(
        env,
        "DEBUG=true\nDB_PASSWORD=[REDACTED:env-secret]\nexport STRIPE_WEBHOOK_SECRET=\"[REDACTED:env-secret]\"\nMY_API_KEY='[REDACTED:env-secret]'\nPORT=8080\nAUTH_TOKEN=${AUTH_TOKEN}\nSESSION_KEY=short\n",
        &["env-secret", "env-secret", "env-secret"],
    );
    // A command that sets one, and one inside a JSON string's escapes.
    check(
        r#"{"cmd":"echo ok\nGITHUB_TOKEN=t0k3n-abcdef ./run.sh"}"#,
        r#"{"cmd":"echo ok\nGITHUB_TOKEN=[REDACTED:env-secret] ./run.sh"}"#,
        &["env-secret"],
    );
}

#[test]
fn a_value_with_a_long_start_before_its_ellipsis_is_no_placeholder() {
    // A README shows a key's shape with a short start (kept, above); a
    // password of real length that ends in dots, or a real value a display
    // cut with an ellipsis, is a secret.
    check(
        "DB_PASSWORD=hunter2hunter42...\nAPI_TOKEN=tok-9f8e7d6c5b4a3210…\n",
        "DB_PASSWORD=[REDACTED:env-secret]\nAPI_TOKEN=[REDACTED:env-secret]\n",
        &["env-secret", "env-secret"],
    );
}

#[test]
fn look_alikes_stay() {
    for text in [
        // git SHAs, UUIDs, hex digests
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
        "id 550e8400-e29b-41d4-a716-446655440000",
        "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        // an image already a placeholder
        "[image image/png, 48213 bytes]",
        // placeholders in documentation
        "export ANTHROPIC_API_KEY=sk-ant-YOUR-KEY-HERE",
        "export ANTHROPIC_API_KEY=sk-ant-...\nexport GROQ_API_KEY=gsk_…",
        "ANTHROPIC_API_KEY=<your-key>",
        "OPENAI_API_KEY=your-api-key-here",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "postgres://user:password@localhost/db",
        "https://user:${TOKEN}@github.com/o/r",
        "mysql://root:<password>@127.0.0.1",
        "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "sk_live_xxxxxxxxxxxx",
        "xoxb-0000000000-0000000000-XXXXXXXXXXXXXXXX",
        // code, not a .env line
        "    api_key = os.environ[\"API_KEY\"]",
        "SECRET_KEY = get_secret()",
        "const KEY=process.env.KEY",
        "PASSWORD=$DB_PASSWORD",
        // words
        "the key, the token and the secret are all here; they keyed it",
        "https://docs.example.com/page and https://github.com/o/r",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    ] {
        check(text, text, &[]);
    }
}

#[test]
fn overlapping_matches_keep_the_first() {
    // A PEM block holding something that looks like a JWT: one redaction.
    let text = format!("-----BEGIN PRIVATE KEY-----\n{JWT}\n{JWT}\n-----END PRIVATE KEY-----");
    check(&text, "[REDACTED:private-key]", &["private-key"]);
    // A token as a URL's password: the same bytes for two rules, named
    // by the first in the list (the token's own, the more precise).
    check(
        &format!("https://x:{GHP}@github.com"),
        "https://x:[REDACTED:github-pat]@github.com",
        &["github-pat"],
    );
}

#[test]
fn many_secrets_far_apart_in_a_long_text() {
    let filler = "lorem ipsum dolor sit amet key token secret ".repeat(500);
    let text = format!("{GHP}{filler}{AWS_ID} {filler}{PEM}{filler}{STRIPE}");
    let want = format!(
        "[REDACTED:github-pat]{filler}[REDACTED:aws-access-token] {filler}[REDACTED:private-key]{filler}[REDACTED:stripe-access-token]"
    );
    check(
        &text,
        &want,
        &[
            "github-pat",
            "aws-access-token",
            "private-key",
            "stripe-access-token",
        ],
    );
}

#[test]
fn a_match_longer_than_its_window_is_redacted_whole() {
    // A Slack bot token's tail is unbounded: past its 256-byte reach.
    let long = format!(
        "xoxb-8460277237-8369865801842-{}",
        "9pZ15SrhhQLekcN2cPBGg5MC".repeat(20)
    );
    check(
        &format!("t={long} end"),
        "t=[REDACTED:slack-bot-token] end",
        &["slack-bot-token"],
    );
}

#[test]
fn escaped_text_is_decoded_where_a_keyword_is() {
    let r = Redactor::get();
    let mut rules = Vec::new();
    // A PEM block written with \n escapes, a key behind \u escapes.
    let escaped = format!(
        "{}\\n\\u0041KIAEZCOJCBEUDBISVFZ \\\"q\\\"",
        PEM.replace('\n', "\\n")
    );
    assert_eq!(
        r.redact_escaped(&escaped, &mut rules).as_deref(),
        Some("[REDACTED:private-key]\n[REDACTED:aws-access-token] \"q\"")
    );
    // The \u-escaped key: found in the decoded text. (The raw text the
    // engine builds escapes only quotes, backslashes and control bytes;
    // a \u escape of a letter is what a line holds.)
    assert_eq!(
        unescape("\\u0041KIAEZCOJCBEUDBISVFZ"),
        "AKIAEZCOJCBEUDBISVFZ"
    );
    let mut rules2 = Vec::new();
    assert_eq!(
        r.redact(&unescape("k=\\u0041KIAEZCOJCBEUDBISVFZ"), &mut rules2)
            .as_deref(),
        Some("k=[REDACTED:aws-access-token]")
    );
    let ids: Vec<_> = rules.iter().map(|&i| r.rule_ids()[i]).collect();
    assert_eq!(ids, ["private-key", "aws-access-token"]);
    assert_eq!(
        r.redact_escaped("nothing here \\n at all", &mut rules),
        None
    );
}

#[test]
fn unescape_decodes_json_escapes() {
    assert_eq!(
        unescape(r#"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\q\"#),
        "a\"b\\c/d\u{8}\u{c}\n\r\té😀\u{FFFD}x\\q\\"
    );
}

#[test]
fn rules_compile_and_have_keywords() {
    let r = Redactor::get();
    // Each rule's regex and allowlist compile (they are compiled at their
    // first use otherwise).
    r.compile_all();
    assert_eq!(r.rule_ids().len(), rules::RULES.len());
    for rule in rules::RULES {
        assert!(!rule.keywords.is_empty(), "{}", rule.id);
    }
    assert!(!r.rule_ids().contains(&"generic-api-key"));
    assert_eq!(
        r.rule_index("jwt"),
        r.rule_ids().iter().position(|i| *i == "jwt")
    );
}

#[test]
fn entropy_is_gitleaks_measure() {
    assert_eq!(shannon(b""), 0.0);
    assert_eq!(shannon(b"aaaa"), 0.0);
    assert_eq!(shannon(b"abab"), 1.0);
    assert_eq!(shannon(b"abcd"), 2.0);
}

/// `text` as the NDJSON writer escapes it (between the quotes).
fn escape(text: &str) -> String {
    let mut out = Vec::new();
    crate::write_json_string(&mut out, text);
    String::from_utf8(out[1..out.len() - 1].to_vec()).expect("escaped is UTF-8")
}

/// The text escaped: found where the decoded text has them, by decoding
/// only around the keywords (`find_escaped` tells, true), and redacted
/// the same.
#[track_caller]
fn agrees_escaped(text: &str) -> Vec<Found> {
    let r = Redactor::get();
    let escaped = escape(text);
    let (mut want, mut got) = (Vec::new(), Vec::new());
    r.find(text, &mut want);
    assert!(r.find_escaped(escaped.as_bytes(), &mut got), "{text:?}");
    assert_eq!(got, want, "{text:?}");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    assert_eq!(
        r.redact_escaped(&escaped, &mut a),
        r.redact(text, &mut b),
        "{text:?}"
    );
    assert_eq!(a, b);
    want
}

#[test]
fn escaped_text_is_searched_where_its_keywords_are() {
    let r = Redactor::get();
    let rule = |f: &[Found]| -> Vec<&str> { f.iter().map(|f| r.rule_ids()[f.rule]).collect() };
    // A window at the text's start and at its end, the secret touching
    // the text's first and last byte.
    let f = agrees_escaped(&format!("{AWS_ID}\n\"q\"\t{GHP}"));
    assert_eq!(rule(&f), ["aws-access-token", "github-pat"]);
    assert_eq!((f[0].start, f[0].end), (0, 20));
    assert_eq!((f[1].start, f[1].end), (25, 65));
    // A keyword right after an escape, and a secret ending at one (the
    // regex's `\s` after it is the decoded newline).
    let f = agrees_escaped(&format!("\"\n{STRIPE}\n{SLACK}\r\n"));
    assert_eq!(rule(&f), ["stripe-access-token", "slack-bot-token"]);
    assert_eq!((f[0].start, f[0].end), (2, 2 + STRIPE.len()));
    // Escapes all through a PEM block and an .env dump, characters of
    // several bytes before the keywords.
    let f = agrees_escaped(&format!(
        "é😀{PEM}\r\nexport DB_PASSWORD=\"hunter2-but-longer\"\n\u{1}é{JWT}\n\u{1f}"
    ));
    assert_eq!(rule(&f), ["private-key", "env-secret", "jwt"]);
    // Look-alikes and no secret: nothing found, nothing decoded whole.
    assert!(agrees_escaped("a \"sk-ant-YOUR-KEY-HERE\"\n://example.com\n").is_empty());
    assert!(agrees_escaped("").is_empty());
    // Many windows far apart, each decoded alone.
    let long = format!("{AWS_ID}\n{}", "\"x\"\tlorem ipsum://\n".repeat(500)).repeat(3);
    assert_eq!(agrees_escaped(&long).len(), 3);
}

#[test]
fn a_keyword_made_by_an_escapes_letter_is_no_hit() {
    let r = Redactor::get();
    // `\npm_...`: the escaped text holds `npm_`, the text a newline and
    // `pm_`: no npm token (as the decoded text is searched).
    let token = "npm_k3J9x2Qm7Lw0Rt5Yv8Nb1Hc4Pz6Sd2Fg9Aq7";
    let text = format!("x\n{}", &token[1..]);
    assert!(escape(&text).contains(token));
    assert!(agrees_escaped(&text).is_empty());
    // The same in a control byte's `\u00XX` escape: `\u001eyJ...` holds
    // `eyJ` from the escape's last hex digit, the text `yJ`; after one,
    // `\u001bxox...`, the `x` is the text's, a real keyword.
    let text = format!("\u{1e}{}", &JWT[1..]);
    assert!(escape(&text).starts_with("\\u001eyJhbGci"));
    assert!(agrees_escaped(&text).is_empty());
    assert_eq!(agrees_escaped(&format!("\u{1b}{SLACK}")).len(), 1);
    // A keyword split by an escape is none in either.
    assert!(agrees_escaped("AK\nIAEZCOJCBEUDBISVFZ xo\"xb-8460277237-8369865801842").is_empty());
    let mut rules = Vec::new();
    assert_eq!(
        r.redact_escaped("a\\\\npm_k3J9x2Qm7Lw0Rt5Yv8Nb1Hc4Pz6Sd2Fg9Aq7 ", &mut rules)
            .as_deref(),
        Some("a\\[REDACTED:npm-access-token] ")
    );
}

#[test]
fn escapes_the_writer_never_writes_decode_the_whole_text() {
    let r = Redactor::get();
    let mut found = Vec::new();
    // A key behind \u escapes of its letters, beside another keyword far
    // away: found (its keyword is in no escaped byte).
    let escaped = format!(
        "\\u0041KIAEZCOJCBEUDBISVFZ {} see https://example.com",
        "word ".repeat(200)
    );
    assert!(!r.find_escaped(escaped.as_bytes(), &mut found));
    let mut rules = Vec::new();
    let out = r.redact_escaped(&escaped, &mut rules).expect("redacted");
    assert!(
        out.starts_with("[REDACTED:aws-access-token] word "),
        "{out}"
    );
    assert_eq!(rules, [r.rule_index("aws-access-token").unwrap()]);
    // `:\/\/` (an escaped solidus) hides `://`.
    let escaped = "AKIA postgres:\\/\\/u:s3cr3tPassw0rd@db.example.com/x";
    assert!(!r.find_escaped(escaped.as_bytes(), &mut found));
    let mut rules = Vec::new();
    assert_eq!(
        r.redact_escaped(escaped, &mut rules).as_deref(),
        Some("AKIA postgres://u:[REDACTED:url-password]@db.example.com/x")
    );
    // A \u escape of a control byte in capitals is read too.
    assert!(r.find_escaped(b"x\\u001B AKIAEZCOJCBEUDBISVFZ", &mut found));
    assert_eq!((found[0].start, found[0].end), (3, 23));
}

#[test]
fn a_match_its_window_cuts_is_searched_in_the_whole_decoded_text() {
    // As a_match_longer_than_its_window_is_redacted_whole, escaped: the
    // pieces do not reach the text's end, the whole text is decoded.
    let r = Redactor::get();
    let long = format!(
        "xoxb-8460277237-8369865801842-{}",
        "9pZ15SrhhQLekcN2cPBGg5MC".repeat(20)
    );
    let text = format!("t={long} end\n\"tail\"");
    let escaped = escape(&text);
    let mut found = Vec::new();
    assert!(!r.find_escaped(escaped.as_bytes(), &mut found));
    let mut rules = Vec::new();
    assert_eq!(
        r.redact_escaped(&escaped, &mut rules).as_deref(),
        Some("t=[REDACTED:slack-bot-token] end\n\"tail\"")
    );
}

#[test]
fn the_search_order_holds_every_keyword_and_keeps_prefixes_first() {
    let mut keywords: Vec<&str> = Vec::new();
    for rule in rules::RULES {
        for k in rule.keywords {
            if !keywords.contains(k) {
                keywords.push(k);
            }
        }
    }
    // The shipped order is taken (not the fallback).
    assert_eq!(
        search_order(&keywords, rules::SEARCH_ORDER),
        rules::SEARCH_ORDER
    );
    let at = |k: &str| rules::SEARCH_ORDER.iter().position(|p| *p == k);
    assert!(at("SECRET_ACCESS_KEY") < at("SECRET"));
    // An order that misses a keyword, or puts SECRET first: the rules'.
    assert_eq!(search_order(&keywords, &rules::SEARCH_ORDER[1..]), keywords);
    let mut swapped = rules::SEARCH_ORDER.to_vec();
    let (i, j) = (at("SECRET").unwrap(), at("SECRET_ACCESS_KEY").unwrap());
    swapped.swap(i, j);
    assert_eq!(search_order(&keywords, &swapped), keywords);
}
