//! `golive rules`: Prometheus alerting rules for the rollback triggers.

use std::path::PathBuf;
use std::time::Duration;

use golive::watch::rules::{self, RulesOptions};

use crate::exit::OK;
use crate::out;

#[derive(Debug, Clone, clap::Args)]
pub struct RulesArgs {
    /// The accepted run's report.json (or its directory).
    #[arg(long)]
    pub baseline: PathBuf,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Range of the rates and queue growth.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub window: Duration,
    /// How long a condition must hold before the alert fires.
    #[arg(long = "for", default_value = "5m", value_parser = humantime::parse_duration)]
    pub for_: Duration,
    /// Relative tolerance for "unchanged" request rate, "below" cache ratio, "above" latency.
    #[arg(long, default_value_t = 0.2)]
    pub tolerance: f64,
    /// A counter of tool-call or schema failures (e.g. from the gateway); any increase alerts.
    #[arg(long = "tool-error-counter")]
    pub tool_error_counters: Vec<String>,
    /// Requests in flight without a generated token for this long alert `GoliveStalled`.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub stall_after: Duration,
}

impl From<&RulesArgs> for RulesOptions {
    fn from(a: &RulesArgs) -> Self {
        RulesOptions {
            baseline: a.baseline.clone(),
            window: a.window,
            for_: a.for_,
            tolerance: a.tolerance,
            tool_error_counters: a.tool_error_counters.clone(),
            stall_after: a.stall_after,
        }
    }
}

pub fn run(args: RulesArgs) -> anyhow::Result<u8> {
    let (yaml, left_out) = rules::rules_yaml(&RulesOptions::from(&args))?;
    match &args.output {
        Some(p) => {
            golive::report::write_atomic(p, yaml.as_bytes())?;
            for l in &left_out {
                out::note("rules", format!("left out {l}"));
            }
        }
        None => out::text(&yaml)?,
    }
    Ok(OK)
}
