//! `golive diff`: what changed between two bundles that matters.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::OutputFormat,
}

pub fn run(args: DiffArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive diff is not built yet")
}
