//! `golive triage`: arguments and output of the log triage.

use std::path::PathBuf;

use golive::triage::{self, TriageOptions};

use crate::args::OutputFormat;
use crate::{exit, out};

/// `golive triage` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct TriageArgs {
    /// Log files, directories (every log inside), `-` for stdin; `.gz` is read too.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Lines of context before the cause line.
    #[arg(long, default_value_t = 30, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=10_000))]
    pub context: usize,
    /// Extra rule file (TOML), added to the built-in rules.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

/// Runs `golive triage`; returns the exit code.
pub fn run(args: TriageArgs) -> anyhow::Result<u8> {
    let opts = TriageOptions {
        context: args.context,
        rules: args.rules.clone(),
    };
    let report = match triage::analyze_paths(&args.paths, &opts) {
        Ok(r) => r,
        Err(e) => {
            let e = anyhow::Error::new(e);
            out::error(&e);
            return Ok(exit::code_for(&e));
        }
    };
    match args.format {
        OutputFormat::Json => out::json_pretty(&report)?,
        OutputFormat::Text => {
            for n in &report.notes {
                out::note("triage", format!("note: {n}"));
            }
            let mut text = Vec::new();
            triage::write_text(&mut text, &report)?;
            out::text(&String::from_utf8_lossy(&text))?;
        }
    }
    Ok(if report.primary.is_some() {
        exit::FOUND
    } else {
        exit::OK
    })
}
