//! Agent interface conformance: tool calls, structured output, streaming, fallbacks.

use std::path::{Path, PathBuf};

use crate::report::Check;
use crate::target::Target;

/// Options of the agent stage (flattened into `golive accept`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentOptions {
    /// Repetitions of each agent case.
    #[arg(long, default_value_t = 5)]
    pub repeat: u32,
    /// The user's own OpenAI `tools` array (JSON).
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// The user's own cases (TOML or JSONL).
    #[arg(long)]
    pub cases: Option<PathBuf>,
    /// Keep prompts and answers out of the report (hashes and lengths only).
    #[arg(long)]
    pub no_content: bool,
    /// Skip the agent stage.
    #[arg(long)]
    pub skip_agent: bool,
}

/// Runs the agent stage against one server; failing requests are saved under `out/regressions/`.
pub async fn run_stage(
    target: &Target,
    client: &reqwest::Client,
    model: &str,
    opts: &AgentOptions,
    out: &Path,
) -> Vec<Check> {
    let _ = (target, client, model, opts, out);
    Vec::new()
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// A saved regression case.
    pub file: PathBuf,
    #[arg(long)]
    pub url: String,
    #[command(flatten)]
    pub target: crate::target::TargetArgs,
}

pub fn run_replay(args: ReplayArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive replay is not built yet")
}
