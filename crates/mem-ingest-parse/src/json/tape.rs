//! Field access on a tape, and compact JSON written out of it.

use simd_json::{Node, StaticNode};

use super::escape::escape;

/// Number of tape nodes a value spans.
pub fn span(n: &Node<'_>) -> usize {
    match n {
        Node::Object { count, .. } | Node::Array { count, .. } => count + 1,
        _ => 1,
    }
}

/// The top-level fields of an object on the tape (empty for a non-object).
#[derive(Clone, Copy)]
pub struct Fields<'t, 'a> {
    nodes: &'t [Node<'a>],
    len: usize,
}

impl<'t, 'a> Fields<'t, 'a> {
    pub fn of(nodes: &'t [Node<'a>]) -> Self {
        match nodes.first() {
            Some(Node::Object { len, .. }) => Fields { nodes, len: *len },
            _ => Fields { nodes: &[], len: 0 },
        }
    }

    pub fn iter(self) -> impl Iterator<Item = (&'a str, &'t [Node<'a>])> {
        let mut idx = 1;
        (0..self.len).map_while(move |_| {
            let Node::String(k) = *self.nodes.get(idx)? else {
                return None;
            };
            let v = self.nodes.get(idx + 1)?;
            let value = &self.nodes[idx + 1..idx + 1 + span(v)];
            idx += 1 + span(v);
            Some((k, value))
        })
    }

    pub fn get(self, key: &str) -> Option<&'t [Node<'a>]> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// What [`Fields::get`] finds for each of several names, in one pass:
    /// `slot` gives a name's place (a `match`: a length, then one
    /// comparison), the first field of each name counting.
    pub fn first_of<const N: usize>(
        self,
        slot: impl Fn(&str) -> Option<usize>,
    ) -> [Option<&'t [Node<'a>]>; N] {
        let mut found = [None; N];
        for (k, v) in self.iter() {
            if let Some(f @ None) = slot(k).and_then(|i| found.get_mut(i)) {
                *f = Some(v);
            }
        }
        found
    }

    pub fn str(self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(as_str)
    }

    /// [`as_text`] of a field.
    pub fn text(self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(as_text)
    }
}

/// A string value as a piece of a record's text: as [`as_str`], except
/// that a raw string of a lean tape read with record text left raw
/// ([`super::lean::defers_text`]) stays raw, for [`crate::line::Text`] to
/// keep as it is or escape again ([`super::lean::canonical`]).
pub fn as_text<'a>(v: &[Node<'a>]) -> Option<&'a str> {
    match v.first() {
        Some(Node::String(s)) if super::lean::defers_text() => Some(s),
        Some(Node::String(s)) => Some(super::lean::value(s)),
        _ => None,
    }
}

pub fn as_str<'a>(v: &[Node<'a>]) -> Option<&'a str> {
    match v.first() {
        Some(Node::String(s)) => Some(super::lean::value(s)),
        _ => None,
    }
}

pub fn as_u64(v: &[Node<'_>]) -> Option<u64> {
    match v.first()? {
        Node::Static(StaticNode::U64(n)) => Some(*n),
        Node::Static(StaticNode::I64(n)) => u64::try_from(*n).ok(),
        Node::Static(StaticNode::F64(f)) if f.is_finite() && *f >= 0.0 => Some(*f as u64),
        _ => None,
    }
}

pub fn as_i64(v: &[Node<'_>]) -> Option<i64> {
    match v.first()? {
        Node::Static(StaticNode::I64(n)) => Some(*n),
        Node::Static(StaticNode::U64(n)) => i64::try_from(*n).ok(),
        Node::Static(StaticNode::F64(f)) if f.is_finite() => Some(*f as i64),
        _ => None,
    }
}

pub fn as_f64(v: &[Node<'_>]) -> Option<f64> {
    match v.first()? {
        Node::Static(StaticNode::I64(n)) => Some(*n as f64),
        Node::Static(StaticNode::U64(n)) => Some(*n as f64),
        Node::Static(StaticNode::F64(f)) => Some(*f),
        _ => None,
    }
}

pub fn as_bool(v: &[Node<'_>]) -> Option<bool> {
    match v.first()? {
        Node::Static(StaticNode::Bool(b)) => Some(*b),
        _ => None,
    }
}

/// The elements of an array on the tape (none for a non-array).
pub fn elements<'t, 'a>(v: &'t [Node<'a>]) -> impl Iterator<Item = &'t [Node<'a>]> {
    let len = match v.first() {
        Some(Node::Array { len, .. }) => *len,
        _ => 0,
    };
    let mut idx = 1;
    (0..len).map_while(move |_| {
        let n = v.get(idx)?;
        let e = &v[idx..idx + span(n)];
        idx += span(n);
        Some(e)
    })
}

/// Writes a value of the tape as compact JSON (as `JSON.stringify` does).
pub fn write_json(v: &[Node<'_>], out: &mut bumpalo::collections::String<'_>) {
    use std::fmt::Write;
    match v.first() {
        // A raw string of a line read with raw text, when it is what the
        // escape writes: copied, not decoded then escaped again.
        Some(Node::String(s)) if super::lean::raw_written(s) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Some(Node::String(s)) => write_json_str(super::lean::value(s), out),
        Some(Node::Static(StaticNode::Null)) | None => out.push_str("null"),
        Some(Node::Static(StaticNode::Bool(b))) => out.push_str(if *b { "true" } else { "false" }),
        Some(Node::Static(StaticNode::I64(n))) => {
            let _ = write!(out, "{n}");
        }
        Some(Node::Static(StaticNode::U64(n))) => {
            let _ = write!(out, "{n}");
        }
        Some(Node::Static(StaticNode::F64(f))) => {
            if f.is_finite() {
                let _ = write!(out, "{f}");
            } else {
                out.push_str("null");
            }
        }
        Some(Node::Array { .. }) => {
            out.push('[');
            for (i, e) in elements(v).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(e, out);
            }
            out.push(']');
        }
        Some(Node::Object { .. }) => {
            out.push('{');
            for (i, (k, e)) in Fields::of(v).iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_str(k, out);
                out.push(':');
                write_json(e, out);
            }
            out.push('}');
        }
    }
}

fn write_json_str(s: &str, out: &mut bumpalo::collections::String<'_>) {
    escape(out, s);
}

/// A hash of a value on the tape (its structure, keys, strings and
/// numbers): two values hash alike when they are the same JSON, whatever
/// its spacing. A document item's version ([`crate::document::Item`]).
pub fn value_hash(v: &[Node<'_>]) -> u64 {
    let n = v.first().map_or(0, span).min(v.len());
    let mut h = 0x243f_6a88_85a3_08d3u64;
    let mut step = |tag: u8, bits: u64| {
        let r = u128::from(h ^ bits ^ u64::from(tag)) * 0x9e37_79b9_7f4a_7c15u128;
        h = (r as u64) ^ ((r >> 64) as u64);
    };
    for node in &v[..n] {
        match node {
            // The wide hash: several times the serial one's speed over a
            // document's text (a version is taken of every message).
            Node::String(s) => step(b's', super::hash::LineHash::Wide.of(s.as_bytes())),
            Node::Object { len, .. } => step(b'o', *len as u64),
            Node::Array { len, .. } => step(b'a', *len as u64),
            Node::Static(StaticNode::Null) => step(b'n', 0),
            Node::Static(StaticNode::Bool(b)) => step(b'b', u64::from(*b)),
            Node::Static(StaticNode::I64(i)) => step(b'i', *i as u64),
            Node::Static(StaticNode::U64(u)) => step(b'u', *u),
            Node::Static(StaticNode::F64(f)) => step(b'f', f.to_bits()),
        }
    }
    h
}
