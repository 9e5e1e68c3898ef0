//! Prometheus alerting rules for the rollback triggers, with the baseline's numbers.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct RulesArgs {
    #[arg(long)]
    pub baseline: PathBuf,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
}

pub fn run(args: RulesArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive rules is not built yet")
}
