//! `golive load`: arguments, the live line and the summary of a load run.

use std::path::PathBuf;
use std::time::Duration;

use golive::load::{self, LoadOptions, LoadOutcome};

use crate::args::{ApiArg, OutputFormat, TargetArgs};
use crate::progress::Live;
use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// OpenAI-compatible API server, e.g. http://127.0.0.1:8000
    #[arg(long)]
    pub url: String,
    /// Requests in flight at once (closed loop, default 1); with --rate, the most in
    /// flight (default 1024).
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// Requests per second (open loop, evenly spaced) instead of a fixed concurrency.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Number of requests (default 100 unless --duration is given).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Run for this long instead of a number of requests, e.g. 30s, 5m.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<Duration>,
    /// Closed loop: each stream pauses this long between its requests, as a user or an
    /// agent loop does (connections then sit idle in the pool), e.g. 6s.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub think_time: Option<Duration>,
    /// Approximate prompt length in tokens.
    #[arg(long, default_value_t = 128)]
    pub prompt_tokens: u32,
    /// Output limit (`max_tokens`).
    #[arg(long, default_value_t = 128)]
    pub max_tokens: u32,
    /// Tokens of the prompt shared by every request (prefix-cache traffic); 0 = none.
    #[arg(long, default_value_t = 0)]
    pub shared_prefix_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every answer has `max_tokens` tokens.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Do not calibrate prompt lengths with a first one-token request (prompt lengths
    /// are then counted in words, about one token each).
    #[arg(long)]
    pub no_calibrate: bool,
    /// Endpoint: chat or completions.
    #[arg(long, value_enum, default_value = "chat")]
    pub api: ApiArg,
    /// Write the summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write one CSV row per request to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Summary on stdout: text or json.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    #[command(flatten)]
    pub target: TargetArgs,
}

impl From<&LoadArgs> for LoadOptions {
    fn from(a: &LoadArgs) -> Self {
        LoadOptions {
            url: a.url.clone(),
            concurrency: a.concurrency,
            rate: a.rate,
            requests: a.requests,
            duration: a.duration,
            think_time: a.think_time,
            prompt_tokens: a.prompt_tokens,
            max_tokens: a.max_tokens,
            shared_prefix_tokens: a.shared_prefix_tokens,
            ignore_eos: a.ignore_eos,
            no_calibrate: a.no_calibrate,
            api: a.api.into(),
            keep_records: a.csv.is_some(),
            target: a.target.clone().into(),
        }
    }
}

pub fn run(args: LoadArgs) -> anyhow::Result<u8> {
    let opts = LoadOptions::from(&args);
    let live = Live::start("load", opts.planned_requests());
    let outcome = load::load(&opts, live.as_ref().map(Live::on_record));
    if let Some(l) = &live {
        l.finish();
    }
    let (summary, result) = match outcome? {
        LoadOutcome::Unreachable(e) => {
            out::note("load", format!("{e:#}"));
            return Ok(exit::UNREACHABLE);
        }
        LoadOutcome::Done { summary, result } => (summary, result),
    };
    if let Some(path) = &args.json {
        golive::report::write_atomic(path, &serde_json::to_vec_pretty(&summary)?)?;
    }
    if let Some(path) = &args.csv {
        load::write_csv(path, &result.records)?;
    }
    match args.format {
        OutputFormat::Json => out::json_pretty(&summary)?,
        OutputFormat::Text => {
            out::text(&summary.to_text())?;
            // One machine-readable line for benchmark harnesses.
            out::line(format!(
                "completed={} duration={:.3}",
                summary.requests - summary.errors,
                summary.duration_s
            ))?;
        }
    }
    Ok(if summary.errors == 0 && summary.requests > 0 {
        exit::OK
    } else {
        exit::FOUND
    })
}
