//! The `golive` binary: argument parsing and dispatch only; the logic is in the `golive` library.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "golive",
    version,
    about = "From 'the vLLM process started' to a signed go/no-go decision"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Find the first root-cause line of a failed deployment in its logs.
    Triage(golive::triage::TriageArgs),
    /// Record the evidence bundle of this host (and others over SSH).
    Collect(golive::collect::CollectArgs),
    /// Judge bundles against a profile: the runbook's decision checklist.
    Check(golive::check::CheckArgs),
    /// Show what changed between two bundles that matters.
    Diff(golive::diff::DiffArgs),
    /// Run the acceptance protocol against a server and decide: release, observe, rebuild, expand.
    Accept(Box<golive::accept::AcceptArgs>),
    /// Generate load (fixed concurrency or rate) and report latency percentiles.
    Load(golive::load::LoadArgs),
    /// Send a saved agent regression case again.
    Replay(golive::agent::ReplayArgs),
    /// Watch a live server for the rollback triggers.
    Watch(golive::watch::WatchArgs),
    /// Write Prometheus alerting rules for the rollback triggers.
    Rules(golive::watch::rules::RulesArgs),
    /// Record a second reviewer's sign-off on a report.
    Signoff(golive::signoff::SignoffArgs),
}

fn main() -> ExitCode {
    // A later flag overrides an earlier one, so wrapper scripts (scripts/demo.sh) can set
    // defaults that their users override.
    let command = Cli::command().mut_subcommands(|sub| sub.args_override_self(true));
    let parsed = command
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                golive::exit::USAGE
            } else {
                golive::exit::OK
            });
        }
    };
    let result = match cli.command {
        Command::Triage(a) => golive::triage::run(a),
        Command::Collect(a) => golive::collect::run(a),
        Command::Check(a) => golive::check::run(a),
        Command::Diff(a) => golive::diff::run(a),
        Command::Accept(a) => golive::accept::run(*a),
        Command::Load(a) => golive::load::run(a),
        Command::Replay(a) => golive::agent::run_replay(a),
        Command::Watch(a) => golive::watch::run(a),
        Command::Rules(a) => golive::watch::rules::run(a),
        Command::Signoff(a) => golive::signoff::run(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("golive: error: {e:#}");
            ExitCode::from(golive::exit::USAGE)
        }
    }
}
