//! `golive rules`: Prometheus alerting rules for the rollback triggers, `--grafana`: a
//! dashboard of the same baseline, and `--lint`: rule files and Grafana dashboards
//! checked against the exported names.

use std::path::PathBuf;
use std::time::Duration;

use golive::watch::{
    dashboard_json, lint, rules_yaml, Exported, LintOptions, LintReport, RulesOptions,
};

use crate::args::OutputFormat;
use crate::exit::{FOUND, OK};
use crate::out;

#[derive(Debug, Clone, clap::Args)]
pub struct RulesArgs {
    /// The accepted run's report.json (or its directory). With --lint and no
    /// --url/--metrics-file: only names the rename table knows as stale are findings.
    #[arg(long, required_unless_present = "lint")]
    pub baseline: Option<PathBuf>,
    /// Check Prometheus rule files (YAML) and Grafana dashboards (JSON) instead: every
    /// metric name the server does not export is a finding (exit 1), with its rename.
    #[arg(long, num_args = 1.., value_name = "FILE")]
    pub lint: Vec<PathBuf>,
    /// With --lint: a metrics URL (e.g. http://vllm:8000/metrics); repeat it for other
    /// exporters the rules read (dcgm-exporter): a name exported by any of them counts.
    #[arg(long, requires = "lint")]
    pub url: Vec<String>,
    /// With --lint: a saved /metrics page instead of a live scrape (repeatable).
    #[arg(long, requires = "lint")]
    pub metrics_file: Vec<PathBuf>,
    /// Write a Grafana dashboard of the baseline instead of alerting rules: request rate,
    /// TTFT/ITL/E2E p95, queue, running, KV cache and prefix-cache panels, with the
    /// capacity line, the --slo-* objectives and the accepted figures drawn on them.
    #[arg(long, conflicts_with = "lint")]
    pub grafana: bool,
    /// With --lint: text or JSON.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Range of the rates and queue growth.
    #[arg(long, default_value = "10m", value_parser = crate::args::duration)]
    pub window: Duration,
    /// How long a condition must hold before the alert fires.
    #[arg(long = "for", default_value = "5m", value_parser = crate::args::duration)]
    pub for_: Duration,
    /// Relative tolerance for "unchanged" request rate, "below" cache ratio, "above" latency.
    #[arg(long, default_value_t = 0.2, value_parser = crate::args::f64_in(0.0, 100.0))]
    pub tolerance: f64,
    /// A counter of tool-call or schema failures (e.g. from the gateway); any increase alerts.
    #[arg(long = "tool-error-counter")]
    pub tool_error_counters: Vec<String>,
    /// Requests in flight without a generated token for this long alert `GoliveStalled`.
    #[arg(long, default_value = "5m", value_parser = crate::args::duration)]
    pub stall_after: Duration,
}

impl From<&RulesArgs> for RulesOptions {
    fn from(a: &RulesArgs) -> Self {
        RulesOptions {
            baseline: a.baseline.clone().unwrap_or_default(),
            window: a.window,
            for_: a.for_,
            tolerance: a.tolerance,
            tool_error_counters: a.tool_error_counters.clone(),
            stall_after: a.stall_after,
        }
    }
}

pub fn run(args: RulesArgs) -> anyhow::Result<u8> {
    if !args.lint.is_empty() {
        return run_lint(&args);
    }
    let opts = RulesOptions::from(&args);
    let (text, left_out) = if args.grafana {
        dashboard_json(&opts)?
    } else {
        rules_yaml(&opts)?
    };
    match &args.output {
        Some(p) => {
            golive::report::write_atomic(p, text.as_bytes())?;
            for l in &left_out {
                out::note("rules", format!("left out {l}"));
            }
        }
        None => out::text(&text)?,
    }
    Ok(OK)
}

fn run_lint(args: &RulesArgs) -> anyhow::Result<u8> {
    let mut exported: Vec<Exported> = args.url.iter().cloned().map(Exported::Url).collect();
    exported.extend(args.metrics_file.iter().cloned().map(Exported::MetricsFile));
    if exported.is_empty() {
        match &args.baseline {
            Some(b) => exported.push(Exported::Baseline(b.clone())),
            None => anyhow::bail!(
                "--lint needs --url METRICS_URL, --metrics-file FILE or --baseline report.json"
            ),
        }
    }
    let opts = LintOptions {
        files: args.lint.clone(),
        exported,
    };
    let report = crate::runtime::block_on(lint(&opts))??;
    match args.format {
        OutputFormat::Json => out::json_pretty(&report)?,
        OutputFormat::Text => out::text(&lint_text(&report))?,
    }
    Ok(if report.findings.is_empty() {
        OK
    } else {
        FOUND
    })
}

fn lint_text(r: &LintReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for f in &r.findings {
        let _ = write!(
            s,
            "{}: {}: {} is not exported",
            f.file, f.location, f.metric
        );
        match &f.hint {
            Some(h) => {
                let _ = writeln!(s, "; {h}");
            }
            None => s.push('\n'),
        }
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    let _ = writeln!(
        s,
        "golive rules --lint: {} expression(s), {} metric name(s), {} not exported by {}",
        r.expressions,
        r.names_used,
        r.findings.len(),
        r.against
    );
    s
}
