//! The agents that keep their sessions in SQLite databases, on the
//! parsing crate's rows seam ([`mem_ingest_parse::rows`]): OpenCode, Goose, Cursor.
//!
//! A crate of its own because it links SQLite, which neither the parsing
//! crate nor the engine may (`.ci/run`). The command line registers
//! [`formats`] in the registry before its first run
//! ([`mem_ingest_parse::formats::register`]), so that `--agent opencode`
//! and a checkpoint naming `opencode` find it.
#![deny(missing_docs)]
#![deny(unsafe_code)]

use std::sync::Arc;

use mem_ingest_parse::format::Format;

pub mod cursor;
pub mod goose;
mod lenient;
mod lineage;
pub mod opencode;
pub mod sqlite;

pub use cursor::CursorIde;
pub use goose::Goose;
pub use opencode::OpenCode;

/// A record's text and kinds, built a piece at a time: pieces joined by
/// a blank line, each kind named once, in the order first met.
#[derive(Default)]
struct Body {
    text: String,
    kinds: Vec<&'static str>,
}

impl Body {
    /// Names kind `k` (once).
    fn kind(&mut self, k: &'static str) {
        if !self.kinds.contains(&k) {
            self.kinds.push(k);
        }
    }

    /// Adds `s` to the text, after a blank line when text is there.
    fn piece(&mut self, s: &str) {
        if !self.text.is_empty() {
            self.text.push_str("\n\n");
        }
        self.text.push_str(s);
    }
}

/// The database agents' formats, in the registry's order.
pub fn formats() -> Vec<Arc<dyn Format>> {
    vec![Arc::new(OpenCode), Arc::new(Goose), Arc::new(CursorIde)]
}

/// Registers [`formats`] (once per process; later calls do nothing).
pub fn register() {
    mem_ingest_parse::formats::register(formats());
}
