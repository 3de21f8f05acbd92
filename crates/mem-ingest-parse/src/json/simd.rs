//! A line parsed in place with simd-json, and repaired when simd-json
//! rejects it for invalid UTF-8 or lone surrogate escapes.

use bumpalo::Bump;
use simd_json::{ErrorType, Tape};

use crate::report::SkipReason;

/// How a line parsed.
pub enum Parsed {
    /// As read, in a copy at this address.
    AsRead(usize),
    /// After repair (invalid UTF-8 or lone surrogate escapes).
    Repaired,
}

/// Copies `line` into the arena with simd-json's padding and parses it in
/// place.
pub fn parse_into<'a>(
    buffers: &mut simd_json::Buffers,
    tape: &mut Tape<'a>,
    arena: &'a Bump,
    line: &[u8],
) -> Result<Parsed, SkipReason> {
    let err = match parse_padded(buffers, tape, arena, line) {
        Ok(copy) => return Ok(Parsed::AsRead(copy)),
        Err(e) => e,
    };
    match err.error() {
        ErrorType::InvalidUtf8 | ErrorType::InvalidUnicodeCodepoint => {}
        _ => return Err(reason_for(line, &err)),
    }
    let mut fixed = bumpalo::collections::Vec::with_capacity_in(line.len() + 16, arena);
    repair(line, &mut fixed);
    match parse_padded(buffers, tape, arena, &fixed) {
        Ok(_) => Ok(Parsed::Repaired),
        Err(e) => Err(reason_for(line, &e)),
    }
}

/// Returns the address of the copy parsed.
pub fn parse_padded<'a>(
    buffers: &mut simd_json::Buffers,
    tape: &mut Tape<'a>,
    arena: &'a Bump,
    line: &[u8],
) -> Result<usize, simd_json::Error> {
    let len = line.len();
    // Each byte written once, by memcpy (bumpalo's `extend_from_slice`
    // copies byte by byte: it was a third of all instructions; a space-filled
    // slice then a copy writes the line twice).
    const PADDING: [u8; simd_json::INPUT_PADDING] = [b' '; simd_json::INPUT_PADDING];
    let mut buf = bumpalo::collections::Vec::with_capacity_in(len + PADDING.len(), arena);
    buf.extend_from_slices_copy(&[line, &PADDING]);
    let copy = buf.into_bump_slice_mut();
    let at = copy.as_ptr() as usize;
    simd_json::fill_tape_padded(copy, len, buffers, tape).map(|()| at)
}

fn reason_for(line: &[u8], err: &simd_json::Error) -> SkipReason {
    if memchr::memchr(0, line).is_some() {
        return SkipReason::Nul;
    }
    match err.error() {
        ErrorType::DepthLimitExceeded => SkipReason::TooDeep,
        other => SkipReason::Malformed(error_text(other)),
    }
}

fn error_text(err: &ErrorType) -> String {
    match err {
        ErrorType::InternalError | ErrorType::TrailingData => {
            "unexpected bytes after the value or invalid structure".to_owned()
        }
        ErrorType::Syntax => "syntax error".to_owned(),
        ErrorType::Eof => "unexpected end of line".to_owned(),
        ErrorType::InvalidUtf8 => "invalid UTF-8 outside a string".to_owned(),
        ErrorType::InvalidUnicodeCodepoint => "invalid unicode escape".to_owned(),
        other => format!("parser error {other:?}"),
    }
}

/// Replaces invalid UTF-8 with U+FFFD (one per maximal invalid subpart, as
/// pi's decoder does) and lone surrogate escapes with `\ufffd`.
pub fn repair(line: &[u8], out: &mut bumpalo::collections::Vec<'_, u8>) {
    for chunk in line.utf8_chunks() {
        out.extend_from_slice_copy(chunk.valid().as_bytes());
        if !chunk.invalid().is_empty() {
            out.extend_from_slice_copy("\u{FFFD}".as_bytes());
        }
    }
    let hex4 = |b: &[u8]| -> Option<u32> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u32::from_str_radix(s, 16).ok()
    };
    let mut i = 0;
    // `i` may pass the end by one after a backslash that ends the line.
    while let Some(k) = memchr::memchr(b'\\', out.get(i..).unwrap_or_default()) {
        let at = i + k;
        if out.get(at + 1) != Some(&b'u') {
            i = at + 2; // an escaped character, `\\` included
            continue;
        }
        let Some(cp) = hex4(&out[at + 2..]) else {
            i = at + 2;
            continue;
        };
        let low_follows = || {
            out.get(at + 6..at + 8) == Some(b"\\u")
                && hex4(&out[at + 8..]).is_some_and(|c| (0xDC00..0xE000).contains(&c))
        };
        if (0xD800..0xDC00).contains(&cp) && low_follows() {
            i = at + 12;
        } else if (0xD800..0xE000).contains(&cp) {
            out[at + 2..at + 6].copy_from_slice(b"fffd");
            i = at + 6;
        } else {
            i = at + 6;
        }
    }
}
