//! `golive probe --url URL`: one tiny streamed generation with a deadline. Exit 0 when a
//! token arrived and the answer ended in time, 1 when the server answered but produced
//! no token in time (or an error), 3 when nothing accepted the connection.

use std::time::Duration;

use golive::probe::{self, ProbeOptions, ProbeReason};
use golive::report::Status;

use crate::args::{OutputFormat, TargetArgs};
use crate::{exit, out};

/// The exit codes of `golive probe`, for its help and the README.
const EXIT_CODES: &str = "\
Exit codes:
  0  a token arrived and the answer ended within the deadline
  1  no token in time: http_status (with the status), no_first_token (the deadline
     passed before any token), stalled_mid_stream (a token, then no end),
     broken_stream (closed early or not the OpenAI stream format)
  2  usage: bad arguments
  3  connect: nothing accepted the connection";

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct ProbeArgs {
    /// Base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8000.
    #[arg(long)]
    pub url: String,
    /// Seconds the whole probe may take: model lookup (without --model), first token,
    /// end of the answer.
    #[arg(long, default_value_t = 10.0, value_parser = crate::args::seconds)]
    pub deadline_s: f64,
    /// Output limit of the probe request (1-4 tokens).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4))]
    pub max_tokens: u32,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub target: TargetArgs,
}

pub fn run(args: ProbeArgs) -> anyhow::Result<u8> {
    anyhow::ensure!(
        args.deadline_s.is_finite() && args.deadline_s > 0.0,
        "--deadline-s must be a number of seconds above zero"
    );
    let opts = ProbeOptions {
        url: args.url.clone(),
        deadline: Duration::from_secs_f64(args.deadline_s),
        max_tokens: args.max_tokens,
        target: args.target.clone().into(),
    };
    let outcome = crate::runtime::block_on(probe::run(&opts))??;
    match args.format {
        OutputFormat::Json => out::json_pretty(&outcome)?,
        OutputFormat::Text => {
            let model = outcome.model.as_deref().unwrap_or("model unknown");
            match outcome.reason {
                None => out::line(format!(
                    "golive probe {} ({model}): {}: {}",
                    outcome.url,
                    out::styled(out::status_style(Status::Pass), "ok"),
                    outcome.detail
                ))?,
                Some(reason) => out::line(format!(
                    "golive probe {} ({model}): {} {}{}: {}",
                    outcome.url,
                    out::styled(out::status_style(Status::Fail), "FAILED"),
                    reason.as_str(),
                    outcome
                        .http_status
                        .filter(|_| reason == ProbeReason::HttpStatus)
                        .map(|s| format!(" {s}"))
                        .unwrap_or_default(),
                    outcome.detail
                ))?,
            }
        }
    }
    Ok(match outcome.reason {
        None => exit::OK,
        Some(ProbeReason::Connect) => exit::UNREACHABLE,
        Some(_) => exit::FOUND,
    })
}
