//! `golive replay FILE --url URL`: sends a saved regression case again; exit 0 when it
//! passes now, 1 when it still fails.

use std::path::PathBuf;

use golive::agent::{self, ReplayOptions};

use crate::args::{OutputFormat, TargetArgs};
use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// A saved regression case (`DIR/regressions/*.json`).
    pub file: PathBuf,
    /// The OpenAI-compatible server to send it to.
    #[arg(long)]
    pub url: String,
    /// How often to send it; it passes only when every attempt passes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub repeat: u32,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub target: TargetArgs,
}

impl From<&ReplayArgs> for ReplayOptions {
    fn from(a: &ReplayArgs) -> Self {
        ReplayOptions {
            file: a.file.clone(),
            url: a.url.clone(),
            repeat: a.repeat,
            target: a.target.clone().into(),
        }
    }
}

pub fn run(args: ReplayArgs) -> anyhow::Result<u8> {
    let opts = ReplayOptions::from(&args);
    let result = crate::runtime::block_on(agent::replay(&opts))??;
    match args.format {
        OutputFormat::Json => out::json_pretty(&result.to_json())?,
        OutputFormat::Text => out::text(&result.render_text())?,
    }
    Ok(if result.unreachable {
        exit::UNREACHABLE
    } else if result.all_passed() {
        exit::OK
    } else {
        exit::FOUND
    })
}
