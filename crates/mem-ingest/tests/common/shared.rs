//! Where the tests find the project's shared folder (`../shared`: the
//! format specs, the sample sessions of every agent, pi's two real
//! sessions, the reference tools' pinned sources). The one place that
//! says so, for the integration tests (`mod common`) and the library's
//! unit tests (included with `#[path]`).
//!
//! - `MEM_INGEST_SHARED`: the shared folder itself. CI points it at a
//!   folder that does not exist for the plain `cargo test` run, so that a
//!   test reading the shared folder without being ignored fails there.
//! - `MEM_INGEST_REAL_DIR`: pi's real sessions (`real/` of the shared
//!   folder otherwise), as before.
//! - Else `../shared` beside the repository root: the first folder above
//!   the crate's manifest that holds `Cargo.lock` (a workspace's root once
//!   the crates move into folders of their own), not the manifest's own
//!   folder.
//!
//! Every test that reads it is `#[ignore = "needs ../shared: ..."]`, so a
//! plain clone's `cargo test` never reads it; `--include-ignored` runs
//! them, and each fails when what it reads is missing.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository's root: the first folder from the crate's manifest up
/// that holds `Cargo.lock`.
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The shared folder: `MEM_INGEST_SHARED`, else `../shared` beside the
/// repository root. Not checked: [`shared`] is, for the tests that read it.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("MEM_INGEST_SHARED") {
        Some(d) => PathBuf::from(d),
        None => repo_root().join("../shared"),
    }
}

/// `sub` inside the shared folder; panics (fails the test) when it is
/// missing, naming it and the variable that moves it, so that an
/// `--include-ignored` run without the shared folder cannot pass.
pub fn shared(sub: &str) -> PathBuf {
    let p = shared_dir().join(sub);
    assert!(
        p.exists(),
        "{} is missing: this test needs the shared folder (set MEM_INGEST_SHARED to it)",
        p.display()
    );
    p
}

/// The sample sessions of every agent: `samples/` of the shared folder.
pub fn samples() -> PathBuf {
    shared("samples")
}

/// The sample folders of the agents this release reads (Claude Code's and
/// Codex's, and the single-message samples of both): the samples of the
/// agents still to come sit beside them and are not session files of
/// these.
pub fn samples_read() -> Vec<PathBuf> {
    let s = samples();
    ["claude-code", "claude-code-log-messages", "codex"]
        .iter()
        .map(|a| s.join(a))
        .collect()
}

/// pi's real sessions: `MEM_INGEST_REAL_DIR`, else `real/` of the shared
/// folder; checked as [`shared`] is.
pub fn real_dir() -> PathBuf {
    let p = match std::env::var_os("MEM_INGEST_REAL_DIR") {
        Some(d) => PathBuf::from(d),
        None => shared_dir().join("real"),
    };
    assert!(
        p.is_dir(),
        "{} is missing: this test needs pi's real sessions (set MEM_INGEST_REAL_DIR or MEM_INGEST_SHARED)",
        p.display()
    );
    p
}
