//! What keeps the raw-text path the workspace's own: a source's
//! [`crate::format::Format::honours_raw_text`] and an encoder's
//! `takes_raw_text` (the engine's `sink::Encoder`) take a [`Crate`], a
//! token in a module hidden from the docs that only the workspace's crates
//! name (it is no part of the public API), so no outside format or encoder
//! can have escaped text escaped twice: theirs keep the provided `false`.

/// Only the workspace's crates make one.
#[derive(Debug, Clone, Copy)]
pub struct Crate;
