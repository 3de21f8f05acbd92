//! Helpers shared by the integration tests.

use std::process::Command;

/// The command line, run as an unprivileged user: `nobody` through
/// `setpriv` when the tests run as root (root reads any file, so a test of
/// an unreadable file needs someone else), else as is.
pub fn unprivileged_cli() -> Command {
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    if root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_mem-ingest"),
        ]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_mem-ingest"))
    }
}
