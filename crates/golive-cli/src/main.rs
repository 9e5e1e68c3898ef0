//! The `golive` binary: arguments, the terminal and exit codes; the logic is in the
//! `golive` library.

mod args;
mod cli;
mod commands;
mod exit;
mod out;
mod progress;
mod runtime;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Runs the subcommand; returns its exit code.
fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    golive::input::set_max_input(cli.max_input);
    match cli.command {
        Command::Triage(a) => commands::triage::run(a),
        Command::Collect(a) => commands::collect::run(a),
        Command::Check(a) => commands::check::run(a),
        Command::Diff(a) => commands::diff::run(a),
        Command::Accept(a) => commands::accept::run(*a),
        Command::Contract(a) => commands::contract::run(a),
        Command::Load(a) => commands::load::run(a),
        Command::Replay(a) => commands::replay::run(a),
        Command::Probe(a) => commands::probe::run(a),
        Command::Watch(a) => commands::watch::run(a),
        Command::Rules(a) => commands::rules::run(a),
        Command::Signoff(a) => commands::signoff::run(a),
        Command::Completions(a) => commands::completions::run(a, cli::command()),
    }
}

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        // Bad arguments: clap's message with golive's prefix; --help and --version: stdout.
        Err(e) if e.use_stderr() => {
            out::usage_error(&e);
            return ExitCode::from(exit::USAGE);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(exit::OK);
        }
    };
    let result = std::panic::catch_unwind(|| dispatch(cli));
    match result {
        Ok(Ok(code)) => ExitCode::from(code),
        Ok(Err(e)) => {
            out::error(&e);
            ExitCode::from(exit::code_for(&e))
        }
        // The panic message is already on stderr.
        Err(_) => ExitCode::from(exit::INTERNAL),
    }
}
