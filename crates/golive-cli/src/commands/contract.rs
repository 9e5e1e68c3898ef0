//! `golive contract --url URL`: the model's API contract (issue 28) on every replica and
//! data-parallel rank. Exit 0 when every item passed, 1 when one failed.

use std::time::{Duration, Instant};

use golive::contract::run::{self, ContractOptions};
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
    /// Seconds one request may take.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout_s: u64,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
}

pub fn run(args: ContractArgs) -> anyhow::Result<u8> {
    let profile = Profile::load(&args.profile)?;
    let opts = ContractOptions {
        urls: args.url.clone(),
        model: args.model.clone(),
        dp_size: args.data_parallel_size as usize,
        spec: profile.contract,
        timeout: Duration::from_secs(args.timeout_s),
    };
    let started = Instant::now();
    let (checks, requests) = crate::runtime::block_on(run::run(&opts))??;
    let failed = checks.iter().any(|c| c.verdict.status == Status::Fail);
    match args.format {
        OutputFormat::Json => out::json_pretty(&checks)?,
        OutputFormat::Text => {
            for c in &checks {
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
