//! `golive diff`: arguments and output of the bundle comparison.

use std::path::PathBuf;

use golive::diff::{self, DiffOptions};

use crate::args::OutputFormat;
use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

/// Exit 0 when nothing that matters changed, 1 when something did (like diff(1)).
pub fn run(args: DiffArgs) -> anyhow::Result<u8> {
    let r = diff::diff(&DiffOptions {
        a: args.a,
        b: args.b,
    })?;
    match args.format {
        OutputFormat::Json => out::json_pretty(&r)?,
        OutputFormat::Text => out::text(&diff::render_text(&r))?,
    }
    Ok(if r.changes.is_empty() {
        exit::OK
    } else {
        exit::FOUND
    })
}
