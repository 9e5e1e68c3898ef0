//! `golive accept`: the acceptance run, stage by stage, ending in a verdict.

use std::path::PathBuf;

#[derive(Debug, Clone, clap::Args)]
pub struct AcceptArgs {
    /// OpenAI-compatible API server; repeat once per node.
    #[arg(long, required = true)]
    pub url: Vec<String>,
    /// Directory for report.json, report.md, junit.xml, report.html.
    #[arg(long, default_value = "golive-report")]
    pub out: PathBuf,
    #[command(flatten)]
    pub target: crate::target::TargetArgs,
    #[command(flatten)]
    pub agent: crate::agent::AgentOptions,
}

pub fn run(args: AcceptArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive accept is not built yet")
}
