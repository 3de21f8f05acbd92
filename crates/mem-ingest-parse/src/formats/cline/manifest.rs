//! An SDK session's manifest (`<sessionId>.json`), read for the few
//! strings it gives (the cwd, the start, the session a fork names): the
//! rest skipped as it is parsed, never built as a `serde_json::Value`.
//!
//! What it reads is what `serde_json::Value`'s lookups read: a key's last
//! value, a string only when it is one (anything else reads as none), no
//! field at all where a value is not an object; a file that is not JSON
//! has none.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The strings of a manifest that are read (each a string, else none).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ManifestDoc {
    pub(super) cwd: Option<String>,
    pub(super) workspace_root: Option<String>,
    pub(super) started_at: Option<String>,
    pub(super) created_at: Option<String>,
    /// `metadata.fork.forkedFromSessionId`.
    pub(super) forked_from: Option<String>,
}

/// The manifest `<id>.json` in the session folder `dir`, when it is JSON.
pub(super) fn read(dir: &Path, id: &std::ffi::OsStr) -> Option<ManifestDoc> {
    let mut m = dir.join(id);
    m.as_mut_os_string().push(".json");
    parse(&std::fs::read(&m).ok()?)
}

/// A manifest's bytes read, when they are JSON.
pub(super) fn parse(b: &[u8]) -> Option<ManifestDoc> {
    serde_json::from_slice::<Top>(b).ok().map(|t| t.0)
}

/// What any JSON value that is not an object (for [`Str`], not a string)
/// reads as: the default, the value skipped.
macro_rules! others_are_default {
    ($de:lifetime) => {
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
        fn visit_seq<A: SeqAccess<$de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
            while a.next_element::<Skip>()?.is_some() {}
            Ok(Self::Value::default())
        }
    };
}

/// What a string that is not an object's reads as (the default).
macro_rules! strings_are_default {
    () => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Self::Value::default())
        }
    };
}

/// Any JSON value, parsed as `serde_json::Value` parses it (its strings
/// decoded and checked, its numbers read: the same errors) and dropped,
/// never built.
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Skip;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Skip, A::Error> {
                while a.next_element::<Skip>()?.is_some() {}
                Ok(Skip)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Skip, A::Error> {
                while a.next_entry::<Key<'de>, Skip>()?.is_some() {}
                Ok(Skip)
            }
        }
        d.deserialize_any(V)
    }
}

/// Any JSON value: a string kept, anything else none.
#[derive(Default)]
struct Str(Option<String>);

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str;
            others_are_default!('de);
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str, E> {
                Ok(Str(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Str, E> {
                Ok(Str(Some(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Str, A::Error> {
                while a.next_entry::<Key<'de>, Skip>()?.is_some() {}
                Ok(Str(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An object's key, borrowed when it has no escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The manifest's top level.
#[derive(Default)]
struct Top(ManifestDoc);

impl<'de> Deserialize<'de> for Top {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Top;
            others_are_default!('de);
            strings_are_default!();
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Top, A::Error> {
                let mut m = ManifestDoc::default();
                while let Some(k) = a.next_key::<Key<'de>>()? {
                    match &*k.0 {
                        "cwd" => m.cwd = a.next_value::<Str>()?.0,
                        "workspace_root" => m.workspace_root = a.next_value::<Str>()?.0,
                        "started_at" => m.started_at = a.next_value::<Str>()?.0,
                        "created_at" => m.created_at = a.next_value::<Str>()?.0,
                        "metadata" => m.forked_from = a.next_value::<Metadata>()?.0,
                        _ => {
                            a.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(Top(m))
            }
        }
        d.deserialize_any(V)
    }
}

/// `metadata`: its `fork`'s `forkedFromSessionId`.
#[derive(Default)]
struct Metadata(Option<String>);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Metadata;
            others_are_default!('de);
            strings_are_default!();
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Metadata, A::Error> {
                let mut m = Metadata(None);
                while let Some(k) = a.next_key::<Key<'de>>()? {
                    if k.0 == "fork" {
                        m.0 = a.next_value::<Fork>()?.0;
                    } else {
                        a.next_value::<Skip>()?;
                    }
                }
                Ok(m)
            }
        }
        d.deserialize_any(V)
    }
}

/// `fork`: its `forkedFromSessionId`.
#[derive(Default)]
struct Fork(Option<String>);

impl<'de> Deserialize<'de> for Fork {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fork;
            others_are_default!('de);
            strings_are_default!();
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Fork, A::Error> {
                let mut f = Fork(None);
                while let Some(k) = a.next_key::<Key<'de>>()? {
                    if k.0 == "forkedFromSessionId" {
                        f.0 = a.next_value::<Str>()?.0;
                    } else {
                        a.next_value::<Skip>()?;
                    }
                }
                Ok(f)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `serde_json::Value`'s lookups read of the same bytes, as the
    /// reader read manifests before.
    fn by_value(b: &[u8]) -> Option<ManifestDoc> {
        let v: serde_json::Value = serde_json::from_slice(b).ok()?;
        let s = |x: Option<&serde_json::Value>| x.and_then(|x| x.as_str()).map(str::to_owned);
        Some(ManifestDoc {
            cwd: s(v.get("cwd")),
            workspace_root: s(v.get("workspace_root")),
            started_at: s(v.get("started_at")),
            created_at: s(v.get("created_at")),
            forked_from: s(v
                .get("metadata")
                .and_then(|m| m.get("fork"))
                .and_then(|f| f.get("forkedFromSessionId"))),
        })
    }

    #[test]
    fn reads_what_a_value_reads() {
        let cases: &[&str] = &[
            r#"{"version":1,"session_id":"s","cwd":"/home/me/app","started_at":"2026-07-15T10:00:00.000Z"}"#,
            r#"{"cwd":"","workspace_root":"/w","created_at":"2026-01-01T00:00:00Z","extra":{"a":[1,2,{"b":null}]}}"#,
            r#"{"cwd":"/a","cwd":"/b"}"#,
            r#"{"cwd":"/a","cwd":7}"#,
            r#"{"cwd":{"x":"/a"},"started_at":["2026"],"created_at":true}"#,
            r#"{"c\u0077d":"/esc\naped","metadata":{"fork":{"forkedFromSessionId":"p1"}}}"#,
            r#"{"metadata":{"fork":{"forkedFromSessionId":"p1"}},"metadata":{"other":1}}"#,
            r#"{"metadata":{"fork":{"forkedFromSessionId":"p1"},"fork":null}}"#,
            r#"{"metadata":{"fork":"p1"}}"#,
            r#"{"metadata":[{"fork":{"forkedFromSessionId":"p1"}}]}"#,
            r#"{"metadata":{"fork":{"forkedFromSessionId":5,"x":{}}}}"#,
            "[1,2,3]",
            "\"a string\"",
            "null",
            "12.5",
            " {\"cwd\":\"/a\"} \n",
            "{\"cwd\":\"/a\"} x",
            "{\"cwd\":\"/a\"",
            "",
            "{\"cwd\":\"\\ud800\"}",
            "{\"x\":\"\\ud800\",\"cwd\":\"/a\"}",
            "{\"x\":1e999,\"cwd\":\"/a\"}",
            "{\"x\":[1,{\"y\":\"\\q\"}],\"cwd\":\"/a\"}",
            "{\"x\":-0,\"y\":123456789012345678901234567890,\"cwd\":\"/a\"}",
        ];
        for c in cases {
            assert_eq!(parse(c.as_bytes()), by_value(c.as_bytes()), "{c}");
        }
        assert_eq!(
            parse(cases[5].as_bytes()).unwrap().cwd.as_deref(),
            Some("/esc\naped")
        );
        assert_eq!(parse(b"[1]"), Some(ManifestDoc::default()));
        assert_eq!(parse(b"{"), None);
        // Invalid UTF-8 in a string, read or not: not JSON, as for a Value.
        for b in [
            &b"{\"cwd\":\"\xff\"}"[..],
            b"{\"x\":\"\xff\",\"cwd\":\"/a\"}",
        ] {
            assert_eq!(parse(b), None);
            assert_eq!(by_value(b), None);
        }
    }
}
