//! `golive load`: the ramp's load generator on its own.

#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    #[arg(long)]
    pub url: String,
    #[command(flatten)]
    pub target: crate::target::TargetArgs,
}

pub fn run(args: LoadArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive load is not built yet")
}
