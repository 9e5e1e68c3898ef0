//! After go-live: `golive watch` (rollback triggers) and `golive rules` (Prometheus alerts).

pub mod rules;

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    #[arg(long)]
    pub url: String,
    /// The accepted run's report.json (or its directory).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Evaluate once and exit (for cron).
    #[arg(long)]
    pub once: bool,
    #[command(flatten)]
    pub target: crate::target::TargetArgs,
}

pub fn run(args: WatchArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive watch is not built yet")
}
