//! `golive contract --url URL`: the model's API contract (issue 28) on every replica and
//! data-parallel rank. Exit 0 when every item passed, 1 when one failed.

use std::time::{Duration, Instant};

use anyhow::Context;

use golive::contract::{self, ContractOptions};
use golive::profile::Profile;
use golive::report::Status;

use crate::args::OutputFormat;
use crate::out;

#[derive(Debug, Clone, clap::Args)]
pub struct ContractArgs {
    /// Base URL of a replica (repeat for every replica), e.g. http://127.0.0.1:8000.
    #[arg(long, required = true)]
    pub url: Vec<String>,
    /// Served model name.
    #[arg(long)]
    pub model: String,
    /// Profile whose `[contract]` table is checked (built-in name or TOML file).
    #[arg(long, default_value = "vllm")]
    pub profile: String,
    /// Data-parallel size: each rank is tested through the X-data-parallel-rank header.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub data_parallel_size: u32,
    /// A deployment to compare tool-call triggers with (the vendor's API, or one you
    /// trust): trigger F1 and schema accuracy against it, gated by the profile.
    #[arg(long, value_name = "URL")]
    pub reference_url: Option<String>,
    /// The reference's model name (default: --model).
    #[arg(long, requires = "reference_url")]
    pub reference_model: Option<String>,
    /// The reference's API key (sent as Bearer; never printed).
    #[arg(
        long,
        env = "GOLIVE_REFERENCE_API_KEY",
        hide_env_values = true,
        requires = "reference_url"
    )]
    pub reference_api_key: Option<String>,
    /// Tool cases in the vendor verifier's public format (JSONL, one request body per
    /// line); default: golive's built-in cases.
    #[arg(long, value_name = "FILE", requires = "reference_url")]
    pub cases: Option<std::path::PathBuf>,
    /// Cases sent to each side for the F1 sample (default: the profile's, else 50).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000), requires = "reference_url")]
    pub contract_requests: Option<u32>,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout_s: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(args: ContractArgs) -> anyhow::Result<u8> {
    let profile = Profile::load(&args.profile)?;
    let reference = reference(&args, &profile)?;
    let opts = ContractOptions {
        urls: args.url.clone(),
        model: args.model.clone(),
        dp_size: args.data_parallel_size as usize,
        spec: profile.contract,
        timeout: Duration::from_secs(args.timeout_s),
        reference,
        http: None,
    };
    let started = Instant::now();
    let result = crate::runtime::block_on(contract::run(&opts))??;
    let (checks, requests) = (&result.checks, result.requests);
    let failed = checks.iter().any(|c| c.verdict.status == Status::Fail);
    match args.format {
        OutputFormat::Json => out::json_pretty(&serde_json::json!({
            "checks": checks,
            "requests": requests,
            "duration_s": started.elapsed().as_secs_f64(),
            "comparison": result.comparison,
        }))?,
        OutputFormat::Text => {
            for c in checks {
                let owner = c
                    .verdict
                    .owner
                    .map(|o| format!(" (owner {o:?})"))
                    .unwrap_or_default();
                out::line(format!(
                    "{:?} {} {}: {}{owner}",
                    c.verdict.status, c.item, c.path, c.verdict.evidence
                ))?;
            }
            out::line(format!(
                "contract: {} checks, {requests} requests, {:.1}s",
                checks.len(),
                started.elapsed().as_secs_f64()
            ))?;
        }
    }
    Ok(u8::from(failed))
}

/// The trigger comparison's side, cases and sample size, read before the first request.
fn reference(
    args: &ContractArgs,
    profile: &Profile,
) -> anyhow::Result<Option<contract::Reference>> {
    let Some(url) = &args.reference_url else {
        return Ok(None);
    };
    let cases = match &args.cases {
        Some(path) => {
            let text = golive::input::read_text(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            golive::contract::parse_cases(&text)
                .with_context(|| format!("{} is not a case file", path.display()))?
        }
        None => golive::contract::builtin_cases(),
    };
    let requests = args
        .contract_requests
        .map(|n| n as usize)
        .or(profile.contract.requests)
        .unwrap_or(50);
    Ok(Some(contract::Reference {
        url: url
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_string(),
        model: args.reference_model.clone(),
        api_key: args.reference_api_key.clone(),
        cases,
        requests,
    }))
}
