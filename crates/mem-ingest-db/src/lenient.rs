//! Typed, borrowed reads of the JSON in a database's columns, as lenient
//! as `serde_json::Value`'s accessors: a field of another type than the
//! one read is absent (as `Value::as_str` gives `None`), never an error,
//! and the text accepted or refused is exactly `serde_json::from_str::<
//! Value>`'s (every value goes through `deserialize_any`: strings are
//! checked and decoded, numbers parsed, nesting limited, as for a
//! `Value`), with no tree built: strings borrowed where they hold no
//! escape, the fields not read skipped. A key given twice keeps its last
//! value, as a `Value`'s map does.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Any JSON value, read and dropped.
pub(crate) struct Skip;

impl<'de> de::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Skip, A::Error> {
        while s.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Skip, A::Error> {
        while m.next_key::<Skip>()?.is_some() {
            m.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}

/// A string, borrowed when it holds no escape; `None` for another type.
#[derive(Debug, Default, Clone)]
pub(crate) struct Str<'a>(pub Option<Cow<'a, str>>);

impl<'a> Str<'a> {
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de> de::Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Some(Cow::Owned(s))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Str<'de>, E> {
                Ok(Str(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Str<'de>, E> {
                Ok(Str(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Str<'de>, E> {
                Ok(Str(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Str<'de>, E> {
                Ok(Str(None))
            }
            fn visit_unit<E>(self) -> Result<Str<'de>, E> {
                Ok(Str(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Str<'de>, A::Error> {
                SkipVisitor.visit_seq(s).map(|_| Str(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Str<'de>, A::Error> {
                SkipVisitor.visit_map(m).map(|_| Str(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// A number as a `Value` holds it (or none: another type).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    #[default]
    None,
    U(u64),
    I(i64),
    F(f64),
}

impl Num {
    /// `Value::as_u64`.
    pub(crate) fn as_u64(self) -> Option<u64> {
        match self {
            Num::U(u) => Some(u),
            Num::I(i) => u64::try_from(i).ok(),
            _ => None,
        }
    }
    /// `Value::as_i64`.
    pub(crate) fn as_i64(self) -> Option<i64> {
        match self {
            Num::U(u) => i64::try_from(u).ok(),
            Num::I(i) => Some(i),
            _ => None,
        }
    }
    /// `Value::as_f64`.
    #[allow(clippy::cast_precision_loss)]
    pub(crate) fn as_f64(self) -> Option<f64> {
        match self {
            Num::U(u) => Some(u as f64),
            Num::I(i) => Some(i as f64),
            Num::F(f) => Some(f),
            Num::None => None,
        }
    }
}

impl<'de> de::Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, u: u64) -> Result<Num, E> {
                Ok(Num::U(u))
            }
            fn visit_i64<E>(self, i: i64) -> Result<Num, E> {
                Ok(Num::I(i))
            }
            fn visit_f64<E>(self, f: f64) -> Result<Num, E> {
                Ok(Num::F(f))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Num, E> {
                Ok(Num::None)
            }
            fn visit_str<E>(self, _: &str) -> Result<Num, E> {
                Ok(Num::None)
            }
            fn visit_unit<E>(self) -> Result<Num, E> {
                Ok(Num::None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Num, A::Error> {
                SkipVisitor.visit_seq(s).map(|_| Num::None)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Num, A::Error> {
                SkipVisitor.visit_map(m).map(|_| Num::None)
            }
        }
        d.deserialize_any(V)
    }
}

/// Any value, kept as what the accessors ask of it: `null` or not, `true`
/// or not.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Any {
    /// Not given.
    #[default]
    Absent,
    Null,
    True,
    /// Another value.
    Other,
}

impl Any {
    /// Given and not `null` (`v.is_some_and(|v| !v.is_null())`).
    pub(crate) fn is_set(self) -> bool {
        matches!(self, Any::True | Any::Other)
    }
}

impl<'de> de::Deserialize<'de> for Any {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Any;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Any, E> {
                Ok(if b { Any::True } else { Any::Other })
            }
            fn visit_u64<E>(self, _: u64) -> Result<Any, E> {
                Ok(Any::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Any, E> {
                Ok(Any::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Any, E> {
                Ok(Any::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Any, E> {
                Ok(Any::Other)
            }
            fn visit_unit<E>(self) -> Result<Any, E> {
                Ok(Any::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Any, A::Error> {
                SkipVisitor.visit_seq(s).map(|_| Any::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Any, A::Error> {
                SkipVisitor.visit_map(m).map(|_| Any::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// An object's fields read by name; the others skipped.
pub(crate) trait Fields<'de>: Default {
    /// Reads the value of `key` when it is one of its fields (`map`'s
    /// next value), else skips it.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// An object of fields `T`: `Node::Obj` when the value is an object (as
/// `Value::get` and `Value::pointer` look into one only), else what it is.
#[derive(Debug, Default, Clone)]
pub(crate) enum Node<T> {
    #[default]
    Absent,
    Null,
    /// Another value than an object.
    Other,
    Obj(T),
}

impl<T> Node<T> {
    /// The object's fields, when it is one.
    pub(crate) fn obj(&self) -> Option<&T> {
        match self {
            Node::Obj(t) => Some(t),
            _ => None,
        }
    }
    /// Given and not `null`.
    pub(crate) fn is_set(&self) -> bool {
        matches!(self, Node::Obj(_) | Node::Other)
    }
}

impl<T: Default> Node<T> {
    /// The object's fields; no field for another value (as `Value::get`
    /// finds none in it).
    pub(crate) fn obj_or_default(self) -> T {
        match self {
            Node::Obj(t) => t,
            _ => T::default(),
        }
    }
}

/// A key, borrowed when it holds no escape.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de, T: Fields<'de>> de::Deserialize<'de> for Node<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Fields<'de>> Visitor<'de> for V<T> {
            type Value = Node<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Node<T>, E> {
                Ok(Node::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Node<T>, E> {
                Ok(Node::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Node<T>, E> {
                Ok(Node::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Node<T>, E> {
                Ok(Node::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Node<T>, E> {
                Ok(Node::Other)
            }
            fn visit_unit<E>(self) -> Result<Node<T>, E> {
                Ok(Node::Null)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<Node<T>, A::Error> {
                SkipVisitor.visit_seq(s).map(|_| Node::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Node<T>, A::Error> {
                let mut t = T::default();
                while let Some(Key(k)) = m.next_key::<Key<'de>>()? {
                    t.field(&k, &mut m)?;
                }
                Ok(Node::Obj(t))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Skips `map`'s next value.
pub(crate) fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value_seed(SkipSeed).map(|_| ())
}

struct SkipSeed;

impl<'de> DeserializeSeed<'de> for SkipSeed {
    type Value = Skip;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Skip, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

/// `text` read as a `T` object (its other values: `Node::Other`), with
/// `serde_json::from_str`'s errors (trailing characters included).
pub(crate) fn parse<'de, T: Fields<'de>>(text: &'de str) -> serde_json::Result<Node<T>> {
    serde_json::from_str(text)
}

#[cfg(test)]
mod tests {
    use serde::de::MapAccess;
    use serde_json::Value;

    use super::*;

    /// `a` (a string), `n` (a number), `o` (an object of `a`), `z` (set).
    #[derive(Debug, Default)]
    struct T<'a> {
        a: Str<'a>,
        n: Num,
        o: Node<Box<T<'a>>>,
        z: Any,
    }

    impl<'de> Fields<'de> for Box<T<'de>> {
        fn field<A: MapAccess<'de>>(&mut self, key: &str, m: &mut A) -> Result<(), A::Error> {
            match key {
                "a" => self.a = m.next_value()?,
                "n" => self.n = m.next_value()?,
                "o" => self.o = m.next_value()?,
                "z" => self.z = m.next_value()?,
                _ => skip(m)?,
            }
            Ok(())
        }
    }

    /// Accepted and refused as a `Value` is, with its error; each field
    /// what `Value`'s accessors give.
    #[test]
    fn reads_what_value_reads_and_refuses_what_it_refuses() {
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        let cases = [
            r#"{"a":"x","n":5,"o":{"a":"y\n"},"z":null}"#,
            r#"{"a":"x","a":7,"n":-5,"z":true}"#,
            r#"{"a":"\u00e9t\u00e9","n":1.5,"o":[1,{"a":"q"}],"z":false}"#,
            r#"{"n":18446744073709551615,"o":{"n":9223372036854775808}}"#,
            r#"{"n":1e400}"#,
            r#"{"x":"\ud800"}"#,
            r#"{"x":"\udc00\ud800"}"#,
            r#"{"a":"x"} x"#,
            r#"{"a":"x""#,
            r#"{"x":"tab	in"}"#,
            r#"{"x":[1,2,}"#,
            r#"[1,2]"#,
            r#""s""#,
            r#"{"o":{"a":"first"},"o":"second"}"#,
            r#"{"o":{"a":"first"},"o":{"n":2}}"#,
            r#"{"x":01}"#,
            r#"{"x":-}"#,
            r#"{"\u0061":"escaped key"}"#,
            &deep,
        ];
        for c in cases {
            let v = serde_json::from_str::<Value>(c);
            let t = parse::<Box<T<'_>>>(c);
            match (&v, &t) {
                (Ok(v), Ok(t)) => {
                    let t = t.obj();
                    assert_eq!(
                        t.and_then(|t| t.a.get()),
                        v.get("a").and_then(Value::as_str),
                        "{c}"
                    );
                    let n = t.map_or(Num::None, |t| t.n);
                    assert_eq!(n.as_u64(), v.get("n").and_then(Value::as_u64), "{c}");
                    assert_eq!(n.as_i64(), v.get("n").and_then(Value::as_i64), "{c}");
                    assert_eq!(n.as_f64(), v.get("n").and_then(Value::as_f64), "{c}");
                    assert_eq!(
                        t.and_then(|t| t.o.obj()).and_then(|o| o.a.get()),
                        v.pointer("/o/a").and_then(Value::as_str),
                        "{c}"
                    );
                    assert_eq!(
                        t.and_then(|t| t.o.obj()).and_then(|o| o.n.as_u64()),
                        v.pointer("/o/n").and_then(Value::as_u64),
                        "{c}"
                    );
                    assert_eq!(
                        t.is_some_and(|t| t.z.is_set()),
                        v.get("z").is_some_and(|z| !z.is_null()),
                        "{c}"
                    );
                    assert_eq!(
                        t.is_some_and(|t| t.z == Any::True),
                        v.get("z") == Some(&Value::Bool(true)),
                        "{c}"
                    );
                }
                (Err(v), Err(t)) => assert_eq!(v.to_string(), t.to_string(), "{c}"),
                _ => panic!("{c}: Value {v:?}, typed {t:?}"),
            }
        }
    }
}
