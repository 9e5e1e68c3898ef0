//! One module per subcommand: its arguments, the conversion into the library's
//! options, and what it shows on the terminal.

pub mod accept;
pub mod check;
pub mod collect;
pub mod completions;
pub mod diff;
pub mod load;
pub mod replay;
pub mod rules;
pub mod signoff;
pub mod triage;
pub mod watch;

use crate::cli::{Cli, Command};

/// Runs the subcommand; returns its exit code.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Triage(a) => triage::run(a),
        Command::Collect(a) => collect::run(a),
        Command::Check(a) => check::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Accept(a) => accept::run(*a),
        Command::Load(a) => load::run(a),
        Command::Replay(a) => replay::run(a),
        Command::Watch(a) => watch::run(a),
        Command::Rules(a) => rules::run(a),
        Command::Signoff(a) => signoff::run(a),
        Command::Completions(a) => completions::run(a),
    }
}
