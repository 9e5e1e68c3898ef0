//! The `golive` binary: arguments, the terminal and exit codes; the logic is in the
//! `golive` library.

mod args;
mod cli;
mod commands;
mod exit;
mod out;
mod progress;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    let result = std::panic::catch_unwind(|| commands::run(cli));
    match result {
        Ok(Ok(code)) => ExitCode::from(code),
        Ok(Err(e)) => match exit::code_for(&e) {
            None => ExitCode::from(exit::OK),
            Some(code) => {
                out::error(&e);
                ExitCode::from(code)
            }
        },
        // The panic message is already on stderr.
        Err(_) => ExitCode::from(exit::INTERNAL),
    }
}
