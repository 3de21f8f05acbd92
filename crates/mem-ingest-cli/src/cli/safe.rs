//! Text from transcripts made safe for a terminal: every human output
//! (search's hits, the tables, what later commands print of a session)
//! goes through [`printable`]; `--json` escapes by itself.

use std::borrow::Cow;

/// `s` with every character that steers a terminal or the reading order
/// of its line written as an escape, as Rust writes it in a string: `\t`,
/// `\n`, `\r`, `\0`, else `\u{1b}` (its code point in hex). Those are:
/// - the C0 controls (U+0000 to U+001F: ESC begins colours, cursor moves
///   and title sequences, BEL rings; tab and newline too, which would
///   break a table's columns or a one-line field), DEL (U+007F) and the
///   C1 controls (U+0080 to U+009F: U+009B is a CSI on some terminals);
/// - the bidirectional formatting characters (U+061C, U+200E, U+200F,
///   U+202A to U+202E, U+2066 to U+2069), which reorder what follows them
///   ("Trojan Source"), and the line and paragraph separators U+2028 and
///   U+2029.
///
/// Everything else is kept, a backslash included (not doubled: this is
/// for reading; `--json` is the exact form). A caller that prints text of
/// several lines splits it at `\n` first. Borrowed when nothing needs it.
pub(crate) fn printable(s: &str) -> Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control()
            || matches!(
                c,
                '\u{061C}'
                    | '\u{200E}'
                    | '\u{200F}'
                    | '\u{202A}'..='\u{202E}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{2028}'
                    | '\u{2029}'
            )
    }
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if unsafe_char(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_are_escaped() {
        assert!(matches!(
            printable("plain «text», é, ∑, a\\b"),
            Cow::Borrowed("plain «text», é, ∑, a\\b")
        ));
        assert_eq!(
            printable("\0\u{1}\t\n\r\u{7}\u{1b}[2J\u{1f} \u{7f}\u{80}\u{9b}\u{9f}\u{a0}"),
            "\\0\\u{1}\\t\\n\\r\\u{7}\\u{1b}[2J\\u{1f} \\u{7f}\\u{80}\\u{9b}\\u{9f}\u{a0}"
        );
        assert_eq!(
            printable("a\u{202e}b\u{2066}c\u{2069}d\u{200f}e\u{61c}f\u{2028}g\u{2029}h\u{200d}i"),
            "a\\u{202e}b\\u{2066}c\\u{2069}d\\u{200f}e\\u{61c}f\\u{2028}g\\u{2029}h\u{200d}i"
        );
    }
}
