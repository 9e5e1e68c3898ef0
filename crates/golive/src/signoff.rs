//! `golive signoff`: the second reviewer's decision, bound to the report by SHA-256.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct SignoffArgs {
    /// The report directory.
    pub dir: PathBuf,
    #[arg(long)]
    pub reviewer: String,
    #[arg(long)]
    pub decision: Option<String>,
    #[arg(long)]
    pub note: Option<String>,
}

pub fn run(args: SignoffArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive signoff is not built yet")
}
