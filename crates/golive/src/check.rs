//! `golive check`: the runbook's decision checklist over one or more bundles.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::report::Status;

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckItem {
    pub id: String,
    pub title: String,
    pub status: Status,
    /// The line or value it was judged on.
    pub evidence: String,
    #[serde(default)]
    pub next_step: String,
}

/// The checklist and the repair direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub schema_version: u32,
    pub items: Vec<CheckItem>,
    /// The repair direction the runbook's decision rules give.
    pub decision: String,
}

/// Judges bundles against a profile (`None`: the generic vLLM profile).
pub fn check_bundles(bundles: &[PathBuf], profile: Option<&str>) -> anyhow::Result<CheckReport> {
    let _ = (bundles, profile);
    Ok(CheckReport {
        schema_version: crate::report::SCHEMA_VERSION,
        ..Default::default()
    })
}

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Bundle directories (one per node).
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// Built-in profile name (`kimi-k3`, `vllm`) or a profile file.
    #[arg(long)]
    pub profile: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::OutputFormat,
}

pub fn run(args: CheckArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive check is not built yet")
}
