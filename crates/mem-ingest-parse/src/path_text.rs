//! A path as text, distinct and reversible: the one spelling of a file's
//! path in the records' `file` field (NDJSON, the store, the dataset), in
//! the checkpoint's keys (state layout 9, store schema 4) and wherever
//! else a path is kept as text.
//!
//! The path's bytes are written as they are where they are UTF-8, except
//! that a backslash is doubled (`\\`), and each byte of a sequence that is
//! not UTF-8 is written `\xHH` (two lowercase hex digits). Two paths never
//! share a spelling (`bad\xff.jsonl` and `bad\xfe.jsonl` stay two files,
//! where a lossy conversion made both `bad\u{fffd}.jsonl`), and
//! [`path_of`] gives the bytes back. A UTF-8 path without a backslash, all
//! but every path, is its own spelling, borrowed.

use crate::sys::{os_bytes, os_string};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// `path`'s spelling (see the module).
pub fn spell(path: &Path) -> Cow<'_, str> {
    spell_bytes(os_bytes(path.as_os_str()))
}

/// The spelling of a path's bytes.
pub fn spell_bytes(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) if !s.contains('\\') => Cow::Borrowed(s),
        _ => {
            let mut out = String::with_capacity(bytes.len() + 8);
            let mut rest = bytes;
            while !rest.is_empty() {
                let (good, bad) = match std::str::from_utf8(rest) {
                    Ok(s) => (s, 0),
                    Err(e) => {
                        let (g, _) = rest.split_at(e.valid_up_to());
                        let g = std::str::from_utf8(g).expect("valid up to");
                        (g, e.error_len().unwrap_or(rest.len() - e.valid_up_to()))
                    }
                };
                for c in good.chars() {
                    if c == '\\' {
                        out.push_str("\\\\");
                    } else {
                        out.push(c);
                    }
                }
                let at = good.len();
                for b in &rest[at..at + bad] {
                    out.push_str(&format!("\\x{b:02x}"));
                }
                rest = &rest[at + bad..];
            }
            Cow::Owned(out)
        }
    }
}

/// The path a spelling names; `None` for text that no path spells (a lone
/// backslash, `\x` without two hex digits).
pub fn path_of(spelled: &str) -> Option<PathBuf> {
    let b = spelled.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'\\') => {
                out.push(b'\\');
                i += 2;
            }
            Some(b'x') => {
                let hex = b.get(i + 2..i + 4)?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 4;
            }
            _ => return None,
        }
    }
    Some(PathBuf::from(os_string(out)))
}

/// A key of a checkpoint saved before paths were spelled (state layouts
/// before 9, store schemas before 4: the path, lossily), in today's
/// spelling: its backslashes doubled. A key that held U+FFFD stood for a
/// path that was not UTF-8, whose bytes are lost: `None`, and the caller
/// finds the file by its identity (see `archive::state`).
pub fn respell_legacy(key: &str) -> Option<Cow<'_, str>> {
    if key.contains('\u{fffd}') {
        None
    } else if key.contains('\\') {
        Some(Cow::Owned(key.replace('\\', "\\\\")))
    } else {
        Some(Cow::Borrowed(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::os_str;

    fn p(b: &[u8]) -> PathBuf {
        PathBuf::from(os_str(b))
    }

    #[test]
    fn utf8_paths_are_their_own_spelling() {
        let path = Path::new("/home/dev/src/日本語-proj/a b.jsonl");
        assert!(matches!(spell(path), Cow::Borrowed(_)));
        assert_eq!(spell(path), "/home/dev/src/日本語-proj/a b.jsonl");
        assert_eq!(path_of(&spell(path)).unwrap(), path);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_written_as_hex_and_come_back() {
        let ff = p(b"/a/bad\xff.jsonl");
        let fe = p(b"/a/bad\xfe.jsonl");
        assert_eq!(spell(&ff), "/a/bad\\xff.jsonl");
        assert_eq!(spell(&fe), "/a/bad\\xfe.jsonl");
        // A literal backslash is doubled: the file named `bad\xff.jsonl`
        // in ASCII is another spelling.
        let ascii = p(b"/a/bad\\xff.jsonl");
        assert_eq!(spell(&ascii), "/a/bad\\\\xff.jsonl");
        // A valid sequence beside an invalid one, and a truncated one at
        // the end.
        let mixed = p("/é\u{e9}".as_bytes());
        assert_eq!(spell(&mixed), "/éé");
        let cut = p(b"/x\xc3\xa9\xe6\x97");
        assert_eq!(spell(&cut), "/x\u{e9}\\xe6\\x97");
        for path in [ff, fe, ascii, mixed, cut] {
            assert_eq!(path_of(&spell(&path)).unwrap(), path);
        }
    }

    #[test]
    fn text_no_path_spells_is_refused() {
        assert_eq!(path_of("a\\b"), None);
        assert_eq!(path_of("a\\x4"), None);
        assert_eq!(path_of("a\\xzz"), None);
        assert_eq!(path_of("a\\"), None);
    }

    #[test]
    fn legacy_keys_are_respelled_or_given_up() {
        assert_eq!(respell_legacy("/a/b.jsonl").unwrap(), "/a/b.jsonl");
        assert_eq!(respell_legacy("/a\\b.jsonl").unwrap(), "/a\\\\b.jsonl");
        assert_eq!(respell_legacy("/a/bad\u{fffd}.jsonl"), None);
    }
}
