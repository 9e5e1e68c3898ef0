//! `golive accept`: arguments, the terminal display of the run's events, the verdict.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use golive::accept::BoundaryBy;
use golive::accept::TargetLoad;
use golive::accept::{self, AcceptEnd, AcceptOptions, SkippableStage};
use golive::agent::AgentOptions;
use golive::events::{Event, Events, ReportError, Reporter};
use golive::report::{Stage, Status};

use crate::args::{OutputFormat, TargetArgs};
use crate::progress::LiveLoads;
use crate::{exit, out};

const EXAMPLES: &str = "\
Examples:
  golive accept --url http://10.0.0.5:8000 --out run1
  golive accept --url http://n1:8000 --url http://n2:8000 --bundle b/n1 --bundle b/n2 \\
      --profile kimi-k3 --concurrency 32 --expected-concurrency 16 --duration 10m
  golive accept --url http://127.0.0.1:8000 --skip ramp --skip soak   # agent checks only

Exit codes: 0 verdict release, 1 any other verdict or interrupted, 2 usage,
3 no server answered, 4 internal error or a report could not be written.";

/// Stages that can be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SkipArg {
    PrefixCache,
    Agreement,
    Agent,
    Contract,
    Ramp,
    Soak,
}

/// What the boundary search bisects (`--boundary-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BoundaryByArg {
    Concurrency,
    Rate,
}

impl From<BoundaryByArg> for BoundaryBy {
    fn from(b: BoundaryByArg) -> Self {
        match b {
            BoundaryByArg::Concurrency => BoundaryBy::Concurrency,
            BoundaryByArg::Rate => BoundaryBy::Rate,
        }
    }
}

impl From<SkipArg> for SkippableStage {
    fn from(s: SkipArg) -> Self {
        match s {
            SkipArg::PrefixCache => SkippableStage::PrefixCache,
            SkipArg::Agreement => SkippableStage::Agreement,
            SkipArg::Agent => SkippableStage::Agent,
            SkipArg::Contract => SkippableStage::Contract,
            SkipArg::Ramp => SkippableStage::Ramp,
            SkipArg::Soak => SkippableStage::Soak,
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct AcceptArgs {
    /// OpenAI-compatible API server; repeat once per node (service and basic run on each).
    #[arg(
        help_heading = "Server",
        long,
        required = true,
        env = "GOLIVE_URL",
        value_delimiter = ','
    )]
    pub url: Vec<String>,
    /// Directory for report.json, report.md, junit.xml, report.html.
    #[arg(help_heading = "Report", long, default_value = "golive-report")]
    pub out: PathBuf,
    /// Deployment profile (`kimi-k3`, `vllm` or a file), for the environment checklist.
    #[arg(help_heading = "Environment", long, env = "GOLIVE_PROFILE")]
    pub profile: Option<String>,
    /// Bundle directory from `golive collect` (one per node): joins the environment checklist.
    #[arg(help_heading = "Environment", long)]
    pub bundle: Vec<PathBuf>,
    /// Server log: a failed stage is triaged and its first-cause line becomes the evidence.
    #[arg(help_heading = "Environment", long)]
    pub server_log: Option<PathBuf>,
    /// Container of the server (docker or podman): on a failure its logs are saved to
    /// DIR/server-container.log and triaged like --server-log.
    #[arg(help_heading = "Environment", long)]
    pub server_container: Option<String>,
    /// Highest concurrency of the ramp.
    #[arg(help_heading = "Load", long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub concurrency: u32,
    /// The expected load; ramp failures above it are limits (observe), at or below it capacity failures (expand). Default: --concurrency.
    #[arg(help_heading = "Load", long, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub expected_concurrency: Option<u32>,
    /// Longest context (prompt + output) of the ramp, in tokens. Default: the server's max model length (else 4096).
    #[arg(help_heading = "Load", long, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub max_context: Option<u32>,
    /// Expected context; longer ramp steps that fail are limits. Default: --max-context.
    #[arg(help_heading = "Load", long, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub expected_context: Option<u32>,
    /// Length of the soak, e.g. 10m.
    #[arg(help_heading = "Load", long, default_value = "60s", value_parser = crate::args::duration)]
    pub duration: Duration,
    /// Output limit of ramp and soak requests.
    #[arg(help_heading = "Load", long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub output_tokens: u32,
    /// Prompt length of the short requests (tokens, approximate).
    #[arg(help_heading = "Load", long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub short_prompt: u32,
    /// Requests per concurrent stream in each ramp step.
    #[arg(help_heading = "Load", long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub ramp_requests: u32,
    /// Length of the shared system prompt of the prefix-cache proof (words ≈ tokens).
    #[arg(help_heading = "Load", long, default_value_t = 400, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub prefix_words: u32,
    /// Latency objective: a ramp step whose TTFT p95 is above this many ms fails. Every
    /// objective is also a per-request one: the steps and the soak report goodput, the
    /// requests (and tokens) per second whose own TTFT, TPOT and E2E are within them.
    #[arg(help_heading = "Objectives", long, value_parser = crate::args::f64_in(0.001, 86_400_000.0))]
    pub slo_ttft_p95_ms: Option<f64>,
    /// Latency objective: a ramp step whose inter-token latency p95 is above this many ms fails.
    #[arg(help_heading = "Objectives", long, value_parser = crate::args::f64_in(0.001, 86_400_000.0))]
    pub slo_itl_p95_ms: Option<f64>,
    /// Latency objective: a ramp step whose end-to-end latency p95 is above this many ms fails.
    #[arg(help_heading = "Objectives", long, value_parser = crate::args::f64_in(0.001, 86_400_000.0))]
    pub slo_e2e_p95_ms: Option<f64>,
    /// `stream_silence` fails when a streamed answer of the ramp or soak is silent
    /// for longer than this many seconds between two output deltas.
    #[arg(help_heading = "Objectives", long, default_value_t = 10.0, value_parser = crate::args::seconds)]
    pub max_stream_gap_s: f64,
    /// DCGM exporter metrics URL (GPU memory over the ramp), e.g. http://node:9400/metrics.
    #[arg(help_heading = "Load", long)]
    pub dcgm: Option<String>,
    /// Who reviews this run (recorded on every check).
    #[arg(help_heading = "Report", long)]
    pub reviewer: Option<String>,
    /// `json`: stdout gets the run's events, one JSON object per line
    /// (`{"t": seconds, "event": "check_result", "data": {...}}`), instead of the verdict line.
    #[arg(help_heading = "Report", long, value_enum, default_value_t)]
    pub format: OutputFormat,
    /// Who runs it (default: the login name).
    #[arg(help_heading = "Report", long)]
    pub operator: Option<String>,
    /// Leave stages out (repeatable): prefix-cache, agreement, agent, contract, ramp, soak.
    #[arg(help_heading = "Stages", long, value_enum)]
    pub skip: Vec<SkipArg>,
    /// Share of ramp and soak requests that are agent cases (tool calls, structured
    /// output; built-in or --tools/--cases), each judged like the agent stage, e.g. 0.2.
    #[arg(help_heading = "Load", long, value_parser = crate::args::f64_in(0.0, 1.0))]
    pub agent_mix: Option<f64>,
    /// Server of the same weights whose greedy answers the agreement stage compares every
    /// --url against (default: the first --url).
    #[arg(help_heading = "Server", long)]
    pub reference_url: Option<String>,
    /// The deployment is private: a request without a key and one with a wrong key must
    /// be refused (401/403), else access_control fails and the verdict is rebuild.
    #[arg(long)]
    pub expect_auth: bool,
    /// The production rate (req/s of this mix): the capacity check says how many
    /// replicas hold it at the --slo-* objectives, with --headroom.
    #[arg(help_heading = "Capacity", long, value_parser = crate::args::f64_in(0.001, 1.0e6), conflicts_with = "target_concurrency")]
    pub target_rate: Option<f64>,
    /// The production concurrency (requests in flight), instead of a rate.
    #[arg(help_heading = "Capacity", long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub target_concurrency: Option<u32>,
    /// Spare capacity on top of the target, as a fraction.
    #[arg(help_heading = "Capacity", long, default_value_t = 0.2, value_parser = crate::args::f64_in(0.0, 10.0))]
    pub headroom: f64,
    /// Time for the boundary search after a ramp step fails on load: the concurrency is
    /// bisected between the last step that held and the failing one until the two are
    /// within 10% apart (then, one request apart and still wider, the offered rate: see
    /// --boundary-by); 0s: no search.
    #[arg(help_heading = "Capacity", long, default_value = "3m", value_parser = crate::args::duration)]
    pub boundary_budget: Duration,
    /// What the boundary search bisects: `concurrency`, going on in the offered request
    /// rate (open loop, constant arrivals) where the concurrency ends one request apart and
    /// wider than 10%; or `rate`, the offered rate straight after the doubling ramp.
    #[arg(help_heading = "Capacity", long, value_enum, default_value_t = BoundaryByArg::Concurrency)]
    pub boundary_by: BoundaryByArg,
    /// With a target: measure the step the capacity answer rests on this many times in all
    /// (the ramp's own measurement included); the answer is their mean goodput with a 90%
    /// interval, and the replicas at both ends of it. (`--repeat` is the agent stage's.)
    #[arg(help_heading = "Capacity", long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub capacity_repeat: u32,
    /// Data-parallel size of each node: the contract stage tests every rank through the
    /// X-data-parallel-rank header.
    #[arg(help_heading = "Server", long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub data_parallel_size: u32,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub agent: AgentArgs,
}

impl From<AcceptArgs> for AcceptOptions {
    fn from(a: AcceptArgs) -> Self {
        AcceptOptions {
            url: a.url,
            out: a.out,
            profile: a.profile,
            bundle: a.bundle,
            server_log: a.server_log,
            server_container: a.server_container,
            concurrency: a.concurrency,
            expected_concurrency: a.expected_concurrency,
            max_context: a.max_context,
            expected_context: a.expected_context,
            duration: a.duration,
            output_tokens: a.output_tokens,
            short_prompt: a.short_prompt,
            ramp_requests: a.ramp_requests,
            prefix_words: a.prefix_words,
            slo_ttft_p95_ms: a.slo_ttft_p95_ms,
            slo_itl_p95_ms: a.slo_itl_p95_ms,
            slo_e2e_p95_ms: a.slo_e2e_p95_ms,
            max_stream_gap: std::time::Duration::from_secs_f64(a.max_stream_gap_s),
            dcgm: a.dcgm,
            reviewer: a.reviewer,
            operator: a.operator,
            skip: a
                .skip
                .into_iter()
                .chain(a.agent.skip_agent.then_some(SkipArg::Agent))
                .map(Into::into)
                .collect(),
            target: a.target.into(),
            agent: a.agent.into(),
            agent_mix: a.agent_mix,
            reference_url: a.reference_url,
            expect_auth: a.expect_auth,
            data_parallel_size: a.data_parallel_size,
            target_load: match (a.target_rate, a.target_concurrency) {
                (Some(r), _) => Some(TargetLoad::Rate(r)),
                (None, Some(c)) => Some(TargetLoad::Concurrency(c)),
                (None, None) => None,
            },
            headroom: a.headroom,
            boundary_budget: a.boundary_budget,
            capacity_repeat: a.capacity_repeat,
            boundary_by: a.boundary_by.into(),
        }
    }
}

/// Options of the agent stage (flattened into `golive accept`).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Agent stage")]
pub struct AgentArgs {
    /// Repetitions of each agent case (reported as a pass rate).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub repeat: u32,
    /// The user's own OpenAI `tools` array (JSON); replaces the example tools.
    #[arg(long)]
    pub tools: Option<PathBuf>,
    /// The user's own cases (TOML `[[case]]` tables or JSON lines: prompt, tool, args).
    #[arg(long)]
    pub cases: Option<PathBuf>,
    /// Keep prompts and answers out of the report and the regression files (hashes and lengths only).
    #[arg(long)]
    pub no_content: bool,
    /// Old spelling of `--skip agent`, kept for scripts.
    #[arg(long, hide = true)]
    pub skip_agent: bool,
    /// max_tokens of the agent requests.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub agent_max_tokens: u32,
    /// max_tokens of the case that must be cut off inside a tool call.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub agent_cut_tokens: u32,
    /// Deadline of the first, deliberately long attempt of the timeout-and-retry case.
    #[arg(long, default_value = "1s", value_parser = crate::args::duration)]
    pub agent_first_timeout: Duration,
    /// Do not run the streamed variants (when the production client does not stream).
    #[arg(long)]
    pub agent_no_stream: bool,
    /// The server's log file: parser exceptions printed during a request are attributed to it.
    #[arg(long)]
    pub agent_server_log: Option<PathBuf>,
    /// Run only the agent checks whose id starts with one of these (comma-separated),
    /// e.g. `agent_case_,agent_stream_case_` to rerun only your own cases.
    #[arg(long, value_delimiter = ',')]
    pub agent_only: Vec<String>,
}

impl From<AgentArgs> for AgentOptions {
    fn from(a: AgentArgs) -> Self {
        AgentOptions {
            repeat: a.repeat,
            tools: a.tools,
            cases: a.cases,
            no_content: a.no_content,
            skip_agent: a.skip_agent,
            agent_max_tokens: a.agent_max_tokens,
            agent_cut_tokens: a.agent_cut_tokens,
            agent_first_timeout: a.agent_first_timeout,
            agent_no_stream: a.agent_no_stream,
            agent_server_log: a.agent_server_log,
            agent_only: a.agent_only,
        }
    }
}

/// What a person sees during `accept`: one line per stage, warnings, the live line of
/// each load, one line per failed check.
struct Terminal {
    loads: LiveLoads,
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Environment => "environment",
        Stage::Service => "service",
        Stage::Basic => "basic",
        Stage::PrefixCache => "prefix cache",
        Stage::Ramp => "ramp",
        Stage::Soak => "soak",
        Stage::Agent => "agent",
        Stage::Stability => "stability",
        Stage::Agreement => "agreement",
        Stage::Contract => "contract",
    }
}

impl Reporter for Terminal {
    /// Notes on stderr, which golive never fails on (a closed stderr loses them only).
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::StageStarted(stage) => {
                out::note("accept", format!("stage {}", stage_name(*stage)))
            }
            Event::CheckResult(c) if c.status == Status::Fail => out::note(
                "accept",
                format!(
                    "{} {}: {}",
                    out::styled(out::status_style(c.status), "FAIL"),
                    c.id,
                    c.measurement
                ),
            ),
            Event::Notice(text) | Event::Warning(text) | Event::Unreachable(text) => {
                out::note("accept", text)
            }
            Event::LoadStarted { .. } | Event::LoadProgress(_) | Event::LoadFinished(_) => {
                self.loads.show(event)
            }
            _ => {}
        }
        Ok(())
    }
}

pub fn run(args: AcceptArgs) -> anyhow::Result<u8> {
    let format = args.format;
    let opts = AcceptOptions::from(args);
    // The agent's own tools and cases are read at parse time: a typo exits 2 before the
    // first request.
    golive::agent::validate(&opts.agent)?;
    let terminal: Arc<dyn Reporter> = Arc::new(Terminal {
        loads: LiveLoads::new("accept", true),
    });
    let json = (format == OutputFormat::Json).then(|| Arc::new(out::JsonEvents::new()));
    let events = match &json {
        None => Events::new(terminal),
        Some(j) => Events::new(j.clone()).and_first(terminal),
    };
    let outcome = crate::runtime::block_on(accept::run(&opts, &events))??;
    if let Some(j) = &json {
        j.finish()?;
    }
    let report = &outcome.report;
    let out_dir = opts.out.display();
    match outcome.end {
        AcceptEnd::Interrupted => {
            out::note(
                "accept",
                format!("interrupted; partial report in {out_dir}"),
            );
            Ok(exit::FOUND)
        }
        end => {
            let verdict = out::styled(
                out::verdict_style(report.verdict),
                report.verdict.map_or("none", |v| v.as_str()),
            );
            let line = format!(
                "verdict {verdict} ({}); report in {out_dir}",
                report.verdict_reason
            );
            out::note("accept", &line);
            // The verdict on stdout too, for scripts: `golive accept ... | tail -1` (with
            // --format json the last event line, `report_finished`, carries it).
            if format == OutputFormat::Text {
                out::line(format!("golive accept: {line}"))?;
            }
            Ok(match (end, report.verdict) {
                (AcceptEnd::Unreachable, _) => exit::UNREACHABLE,
                (_, Some(golive::report::Verdict::Release)) => exit::OK,
                _ => exit::FOUND,
            })
        }
    }
}
