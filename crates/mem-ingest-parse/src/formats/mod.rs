//! The agents read, each a folder of its own, and the registry of them:
//! [`builtin`] (the command line's default list, in the order a file that
//! no format claims falls to the first) and [`by_name`] (`--agent`, and a
//! checkpoint's list of agents).

use std::sync::Arc;

use crate::format::Format;

pub mod amp;
pub mod claude;
pub mod cline;
pub mod codex;
pub mod copilot;
pub mod cursor;
pub mod gemini;
pub mod pi;
pub mod qwen;

pub use amp::Amp;
pub use claude::Claude;
pub use cline::Cline;
pub use codex::Codex;
pub use copilot::Copilot;
pub use cursor::CursorCli;
pub use gemini::Gemini;
pub use pi::Pi;
pub use qwen::Qwen;

/// Every format this build reads, pi's first. A file named as a PATH is
/// the first's that detects it: formats whose detection looks for keys of
/// their own come before Claude Code's, which takes any line with a
/// `sessionId` (Qwen Code's records have one too, and a Copilot CLI event
/// may name one). Gemini CLI's comes before Qwen Code's, whose walk
/// claims any `chats/*.jsonl`: a Gemini `chats/session-*.jsonl` is
/// Gemini's. Amp's comes before Claude Code's and Codex's (Codex's takes
/// an object with an `id` on its first line: a thread is one).
pub fn builtin() -> Vec<Arc<dyn Format>> {
    let own: [Arc<dyn Format>; 8] = [
        Arc::new(Pi),
        Arc::new(Gemini),
        Arc::new(Qwen),
        Arc::new(Copilot),
        Arc::new(Amp),
        Arc::new(Cline),
        Arc::new(Claude),
        Arc::new(Codex),
    ];
    own.into_iter()
        .chain(REGISTERED.get().into_iter().flatten().cloned())
        .collect()
}

/// Formats that live in a crate of their own, added after the crate's own
/// ones ([`register`]).
static REGISTERED: std::sync::OnceLock<Vec<Arc<dyn Format>>> = std::sync::OnceLock::new();

/// Adds `formats` to the registry, after this crate's, once per process:
/// the database agents' (OpenCode, ...), which read SQLite and so live in
/// `mem-ingest-db` (neither this crate nor the engine may depend on
/// SQLite), are registered by the program that links them, before its
/// first run, so that `--agent` and a checkpoint's list of agents find
/// them by name. `false` when formats were registered before (the first
/// registration stays).
pub fn register(formats: Vec<Arc<dyn Format>>) -> bool {
    REGISTERED.set(formats).is_ok()
}

/// The format named `name` ([`Format::name`]).
pub fn by_name(name: &str) -> Option<Arc<dyn Format>> {
    builtin().into_iter().find(|f| f.name() == name)
}

#[cfg(test)]
mod tests {
    /// The NDJSON writer's raw-text path is taken only when every format
    /// of a run honours the raw-text read, and a run without `--agent`
    /// reads every built-in format: one that does not would put every
    /// default `backfill -o` on the slower path.
    #[test]
    fn every_builtin_format_honours_the_raw_text_read() {
        let slow: Vec<&str> = super::builtin()
            .iter()
            .filter(|f| !f.honours_raw_text(crate::seal::Crate))
            .map(|f| f.name())
            .collect();
        assert_eq!(slow, Vec::<&str>::new());
    }
}
