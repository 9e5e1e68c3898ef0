//! `golive load`: arguments, the live line and the summary of a load run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use golive::events::Events;
use golive::load::{self, Arrival, LoadOptions, LoadOutcome, Shard};

use crate::args::{ApiArg, OutputFormat, TargetArgs};
use crate::progress::LiveLoads;
use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct LoadArgs {
    #[command(subcommand)]
    pub command: Option<LoadCommand>,
    /// OpenAI-compatible API server, e.g. http://127.0.0.1:8000. Repeat it for replicas of
    /// the same model: the requests are spread over them in turn, as a load balancer would.
    #[arg(long, required_unless_present = "k8s_job")]
    pub url: Vec<String>,
    /// Requests in flight at once (closed loop, default 1); with --rate, the most in
    /// flight (default 1024).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub concurrency: Option<u32>,
    /// Requests per second (open loop, evenly spaced) instead of a fixed concurrency.
    #[arg(long, value_parser = crate::args::f64_in(0.001, 1_000_000.0))]
    pub rate: Option<f64>,
    /// An open loop whose rate moves linearly from START to END requests per second over
    /// SECS seconds, then holds END, e.g. 1:20:120 (instead of --rate). The run lasts the
    /// ramp unless --duration or --requests say otherwise; with --saturation-window it stops
    /// where the server stops keeping up.
    #[arg(long, value_name = "START:END:SECS", value_parser = rate_ramp, conflicts_with_all = ["rate", "think_time"])]
    pub rate_ramp: Option<load::RateRamp>,
    /// How requests arrive at --rate (or along --rate-ramp): constant (one every 1/rate s),
    /// poisson (independent users) or gamma (bursts: --burstiness below 1 burstier than
    /// poisson, above 1 more even).
    #[arg(long, value_enum, default_value_t = ArrivalKind::Constant)]
    pub arrival: ArrivalKind,
    /// With --arrival gamma: the shape of its intervals, 0.01 to 100 (1 is poisson).
    #[arg(long, value_parser = crate::args::f64_in(0.01, 100.0))]
    pub burstiness: Option<f64>,
    /// With --rate: stop early when, over this window, the requests in flight and the time
    /// to first token both rise significantly (over-saturation: the server cannot take the
    /// rate); the summary keeps the statistics so far. 0s: never stop early.
    #[arg(long, default_value = "20s", value_parser = crate::args::duration)]
    pub saturation_window: Duration,
    /// The seed of a poisson or gamma schedule (the same for every shard of one run).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Number of requests (default 100 unless --duration is given).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub requests: Option<u64>,
    /// Run for this long instead of a number of requests, e.g. 30s, 5m.
    #[arg(long, value_parser = crate::args::duration)]
    pub duration: Option<Duration>,
    /// Closed loop: each stream pauses this long between its requests, as a user or an
    /// agent loop does (connections then sit idle in the pool), e.g. 6s.
    #[arg(long, value_parser = crate::args::duration)]
    pub think_time: Option<Duration>,
    /// Approximate prompt length in tokens.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub prompt_tokens: u32,
    /// Output limit (`max_tokens`).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=crate::args::MAX_TOKENS_FLAG as i64))]
    pub max_tokens: u32,
    /// Tokens of the prompt shared by every request (prefix-cache traffic); 0 = none.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=crate::args::MAX_TOKENS_FLAG as i64))]
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
    /// Stdout: text (the summary) or json (one event per line: `load_started`, a `request`
    /// per finished request, `load_progress`, `load_finished`, then `load_summary` with the
    /// summary as `data`).
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Per-request objectives for goodput, as `vllm bench serve --goodput` takes them:
    /// `ttft:MS`, `tpot:MS`, `e2el:MS` (e.g. `--goodput ttft:500 tpot:50`). The summary adds
    /// the share of requests within every one, and their requests and tokens per second.
    #[arg(long, value_name = "KEY:MS", num_args = 1..=3, value_parser = crate::args::goodput_item)]
    pub goodput: Vec<(crate::args::GoodputKey, f64)>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Run only shard INDEX of COUNT (0-based) of this plan: the request indices
    /// i % COUNT == INDEX and 1/COUNT of --rate and --concurrency; the shard document
    /// (summary and raw histograms) goes to --out DIR and, with --format json, stdout.
    #[arg(long, value_name = "INDEX/COUNT", conflicts_with = "k8s_job")]
    pub shard: Option<Shard>,
    /// With --shard: the directory that receives load-shard-INDEX-of-COUNT.json.
    #[arg(long, requires = "shard")]
    pub out: Option<PathBuf>,
    /// Print a Kubernetes Indexed Job that runs this many shards of the load given
    /// after `--` (e.g. `--k8s-job 4 --image IMG -- --url URL --requests 4000`).
    #[arg(long, value_name = "N", requires = "image", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub k8s_job: Option<u32>,
    /// With --k8s-job: the image (with `golive` on its PATH) the shards run in.
    #[arg(long, requires = "k8s_job")]
    pub image: Option<String>,
    /// With --k8s-job: the Job's name.
    #[arg(long, default_value = "golive-load", requires = "k8s_job")]
    pub job_name: String,
    /// With --k8s-job: the Job's namespace.
    #[arg(long, requires = "k8s_job")]
    pub job_namespace: Option<String>,
    /// With --k8s-job: the `golive load` arguments of every shard.
    #[arg(last = true, value_name = "LOAD_ARGS")]
    pub job_args: Vec<String>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum LoadCommand {
    /// Combine the shards of one `golive load --shard I/N` run into one summary, with
    /// percentiles from the merged histograms.
    Merge(MergeArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct MergeArgs {
    /// Shard files, or directories of load-shard-*.json files (pod logs work too).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Write the merged summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Summary on stdout: text or json.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

/// `--arrival`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ArrivalKind {
    Constant,
    Poisson,
    Gamma,
}

impl ArrivalKind {
    fn as_str(self) -> &'static str {
        match self {
            ArrivalKind::Constant => "constant",
            ArrivalKind::Poisson => "poisson",
            ArrivalKind::Gamma => "gamma",
        }
    }
}

/// The options of the arguments; `--arrival` and `--burstiness` that do not fit are an error.
impl TryFrom<&LoadArgs> for LoadOptions {
    type Error = anyhow::Error;

    fn try_from(a: &LoadArgs) -> anyhow::Result<Self> {
        Ok(LoadOptions {
            url: a.url.first().cloned().unwrap_or_default(),
            replicas: a.url.iter().skip(1).cloned().collect(),
            concurrency: a.concurrency,
            rate: a.rate,
            rate_ramp: a.rate_ramp,
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
            shard: a.shard,
            slo: crate::args::slo(&a.goodput),
            arrival: Arrival::new(a.arrival.as_str(), a.burstiness)?,
            seed: a.seed,
            saturation_window: Some(a.saturation_window).filter(|w| !w.is_zero()),
        })
    }
}

pub fn run(args: LoadArgs) -> anyhow::Result<u8> {
    if let Some(LoadCommand::Merge(m)) = &args.command {
        return merge(m);
    }
    if let Some(n) = args.k8s_job {
        return k8s_job(&args, n);
    }
    let opts = LoadOptions::try_from(&args)?;
    let live = Arc::new(LiveLoads::new("load", false));
    // `--format json` (not a shard, whose one line a pod log carries): the events, one per
    // line, then the summary as the last line.
    let json = (args.format == OutputFormat::Json && opts.shard.is_none())
        .then(|| Arc::new(out::JsonEvents::new()));
    let events = match &json {
        Some(j) => Events::new(j.clone()).and_first(live),
        None => Events::new(live),
    };
    let outcome = crate::runtime::block_on(load::load(&opts, &events))?;
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
    if opts.shard.is_some() {
        let doc = load::ShardOutput::new(&opts, &summary, &result)?;
        if let Some(dir) = &args.out {
            golive::outfile::create_dirs(dir)?;
            golive::report::write_atomic(
                &dir.join(doc.file_name()),
                &serde_json::to_vec_pretty(&doc)?,
            )?;
        }
        if args.format == OutputFormat::Json {
            // One line: a pod log (`kubectl logs`) mixes stderr into it.
            out::line(serde_json::to_string(&doc)?)?;
            return Ok(load_exit(&summary));
        }
    }
    match args.format {
        // Not a shard (answered above): the event stream's last line.
        OutputFormat::Json => match &json {
            Some(j) => j.last("load_summary", &summary)?,
            None => unreachable!("--format json without --shard has its event stream"),
        },
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
    Ok(load_exit(&summary))
}

fn load_exit(summary: &load::LoadSummary) -> u8 {
    if summary.errors == 0 && summary.requests > 0 {
        exit::OK
    } else {
        exit::FOUND
    }
}

/// `golive load merge`: exit 0 when no shard had errors, 1 otherwise.
fn merge(args: &MergeArgs) -> anyhow::Result<u8> {
    let merged = load::merge_shards(&args.paths)?;
    if let Some(path) = &args.json {
        golive::report::write_atomic(path, &serde_json::to_vec_pretty(&merged)?)?;
    }
    match args.format {
        OutputFormat::Json => out::json_pretty(&merged)?,
        OutputFormat::Text => out::text(&merged.to_text())?,
    }
    Ok(load_exit(&merged.summary))
}

/// `golive load --k8s-job N`: checks the shards' arguments as `golive load` would
/// parse them, then prints the Job.
fn k8s_job(args: &LoadArgs, shards: u32) -> anyhow::Result<u8> {
    anyhow::ensure!(shards >= 1, "--k8s-job needs at least 1 shard");
    anyhow::ensure!(
        args.url.is_empty(),
        "--k8s-job: give the shards' load arguments after `--` (--url too), \
         e.g. golive load --k8s-job {shards} --image IMG -- --url URL --requests 4000"
    );
    for own in ["--shard", "--format", "--out", "--k8s-job"] {
        anyhow::ensure!(
            !args
                .job_args
                .iter()
                .any(|a| a == own || a.starts_with(&format!("{own}="))),
            "--k8s-job sets {own} of each shard itself; leave it out after `--`"
        );
    }
    // Checked by `load`'s own argument parser, as each shard will parse them.
    let first_shard = format!("0/{shards}");
    let argv = ["load", "--shard", &first_shard]
        .into_iter()
        .map(String::from)
        .chain(args.job_args.iter().cloned());
    let parser =
        <LoadArgs as clap::Args>::augment_args(clap::Command::new("load")).args_override_self(true);
    let sub = parser
        .try_get_matches_from(argv)
        .map_err(|e| anyhow::anyhow!("the shards' load arguments after `--`: {e}"))?;
    if sub
        .get_one::<u32>("concurrency")
        .is_some_and(|c| *c < shards)
        && sub.get_one::<f64>("rate").is_none()
        && sub.get_one::<load::RateRamp>("rate_ramp").is_none()
    {
        anyhow::bail!("--concurrency is split across the {shards} shards: give at least {shards}");
    }
    let yaml = load::k8s_job_yaml(&load::K8sJobOptions {
        name: args.job_name.clone(),
        namespace: args.job_namespace.clone(),
        image: args.image.clone().unwrap_or_default(),
        shards,
        load_args: args.job_args.clone(),
    })?;
    out::text(&yaml)?;
    Ok(exit::OK)
}

/// `--rate-ramp START:END:SECS`, range-checked as it is parsed.
fn rate_ramp(text: &str) -> Result<load::RateRamp, String> {
    load::RateRamp::parse(text).map_err(|e| e.to_string())
}
