//! What keeps the raw-text path the crate's own: a source's
//! [`crate::format::Format::honours_raw_text`] and an encoder's
//! [`crate::sink::Encoder::takes_raw_text`] take a [`Crate`], which no one
//! outside the crate can make, so no outside format or encoder can have
//! escaped text escaped twice.

/// Only the crate makes one.
#[derive(Debug, Clone, Copy)]
pub struct Crate;
