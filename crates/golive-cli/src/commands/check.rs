//! `golive check`: arguments and output of the environment checklist.

use std::path::PathBuf;

use golive::check::{self, CheckOptions};
use golive::report::Status;

use crate::args::OutputFormat;
use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Bundle directories (one per node).
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// Built-in profile name (`kimi-k3`, `vllm`) or a profile file.
    #[arg(long)]
    pub profile: Option<String>,
    /// A recipe YAML in the format of vllm-project/recipes (models/<org>/<model>.yaml).
    #[arg(long, conflicts_with = "profile")]
    pub recipe: Option<PathBuf>,
    /// Count `unknown` items as failures for the exit code.
    #[arg(long)]
    pub strict: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

impl From<&CheckArgs> for CheckOptions {
    fn from(a: &CheckArgs) -> Self {
        CheckOptions {
            bundles: a.bundles.clone(),
            profile: a.profile.clone(),
            recipe: a.recipe.clone(),
        }
    }
}

pub fn run(args: CheckArgs) -> anyhow::Result<u8> {
    let report = check::check(&CheckOptions::from(&args))?;
    match args.format {
        OutputFormat::Json => out::json_pretty(&report)?,
        OutputFormat::Text => out::text(&check::render_text(&report))?,
    }
    let unknown = report.items.iter().any(|i| i.status == Status::Unknown);
    Ok(if report.any_fail() || (args.strict && unknown) {
        exit::FOUND
    } else {
        exit::OK
    })
}
