//! The `gen-corpus` binary: [`gen_corpus::run`] on the command line's
//! arguments.

use std::io::{self, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let code = gen_corpus::run(
        std::env::args().skip(1),
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    );
    let _ = io::stdout().flush();
    ExitCode::from(code)
}
