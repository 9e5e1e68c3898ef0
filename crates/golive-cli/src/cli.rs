//! The command line: one subcommand per capability, each defined in `commands/`.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::commands;

#[derive(Parser)]
#[command(
    name = "golive",
    version = golive::LONG_VERSION,
    about = "From 'the vLLM process started' to a signed go/no-go decision",
    after_help = crate::exit::TABLE,
)]
pub struct Cli {
    /// Largest input file golive reads (profiles, cases, tools, reports, bundles, shard and
    /// rules files), e.g. `64MiB`; 4 KiB to 4 GiB. Logs given to `triage` are streamed and
    /// have no cap.
    #[arg(long, global = true, env = "GOLIVE_MAX_INPUT", default_value = "32MiB", value_parser = crate::args::input_size)]
    pub max_input: u64,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Find the first root-cause line of a failed deployment in its logs.
    Triage(commands::triage::TriageArgs),
    /// Record the evidence bundle of this host (and others over SSH).
    Collect(commands::collect::CollectArgs),
    /// Judge bundles against a profile: the runbook's decision checklist.
    Check(commands::check::CheckArgs),
    /// Show what changed between two bundles that matters.
    Diff(commands::diff::DiffArgs),
    /// Run the acceptance protocol against a server and decide: release, observe, rebuild, expand.
    Accept(Box<commands::accept::AcceptArgs>),
    /// Check the model's API contract (parameters, reasoning, every replica and DP rank).
    Contract(commands::contract::ContractArgs),
    /// Generate load (fixed concurrency or rate) and report latency percentiles.
    Load(commands::load::LoadArgs),
    /// Send a saved agent regression case again.
    Replay(commands::replay::ReplayArgs),
    /// One tiny streamed generation with a deadline: is the engine generating? (exec probe, cron)
    Probe(commands::probe::ProbeArgs),
    /// Watch a live server for the rollback triggers.
    Watch(commands::watch::WatchArgs),
    /// Write Prometheus alerting rules for the rollback triggers.
    Rules(commands::rules::RulesArgs),
    /// Record a second reviewer's sign-off on a report.
    Signoff(commands::signoff::SignoffArgs),
    /// Print a shell completion script, e.g. `golive completions bash > /etc/bash_completion.d/golive`.
    Completions(commands::completions::CompletionsArgs),
}

/// The clap command with golive's settings, for parsing and for completions.
pub fn command() -> clap::Command {
    // A later flag overrides an earlier one, so wrapper scripts (scripts/demo.sh) can set
    // defaults that their users override.
    Cli::command().mut_subcommands(|sub| sub.args_override_self(true))
}

pub fn parse() -> Result<Cli, clap::Error> {
    command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
}
