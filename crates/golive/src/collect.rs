//! `golive collect`: one evidence bundle per host and run.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct CollectArgs {
    /// Directory that receives `<host>-<UTC timestamp>/` bundles.
    #[arg(long, default_value = "golive-bundles")]
    pub out: PathBuf,
}

pub fn run(args: CollectArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive collect is not built yet")
}
