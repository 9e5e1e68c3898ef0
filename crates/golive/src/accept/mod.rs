//! `golive accept`: the acceptance run, stage by stage, ending in a verdict.
//!
//! Stages: environment (from `--bundle`), service and basic (per `--url`), prefix
//! cache, agent, ramp, soak. After every stage the report as it stands goes out as an
//! event (`complete: false`), at the run's next pause, and report.json is rewritten from
//! it, so an interrupted run (Ctrl-C included) keeps what it measured; at the end the
//! verdict is decided and the final report goes out, from which every file is written
//! ([`ReportFiles`]).
//!
//! Verdict rules (README): environment or agent-interface failures -> rebuild;
//! capacity failures at the expected load -> expand; failures only beyond the expected
//! load (limits), non-blocking failures or warnings -> observe; all pass -> release.

mod access;
mod agent_load;
mod agreement;
mod capacity;
mod contract;
mod engine;
mod outputs;
mod plan;
mod prefix_cache;
mod ramp;
mod service;
mod silence;
mod soak;
mod stage;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::client::OpenAiClient;
use crate::events::{Event, Events};
use crate::report::{Check, CheckId, Impact, Report, Stage, Status};
use crate::target::Target;
use engine::ServerInfo;
use plan::{AcceptPlan, PLANNED};
use stage::{StageCtx, StageResult, StageTracker};

pub use capacity::{
    answer as capacity_answer, Backtest, CapacityAnswer, Interval, Prediction, TargetLoad,
    MAX_BACKTEST_ERROR,
};
pub use outputs::ReportFiles;
use outputs::{any_server_failure, attach_triage, container_logs, Publisher};
pub(crate) use ramp::rate_text;
pub use ramp::{BoundaryBy, BOUNDARY_WIDTH};
pub use silence::{check as silence_check, GapRow};

/// Stages that can be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkippableStage {
    /// The prefix-cache proof (`--skip prefix-cache`).
    PrefixCache,
    /// The agreement stage: the same greedy answer on every serving path.
    Agreement,
    /// The agent stage: tool calls, structured output and streaming, case by case.
    Agent,
    /// The contract stage: the profile's API contract on every node and data-parallel rank.
    Contract,
    /// The load ramp: short and long steps at rising concurrency.
    Ramp,
    /// The soak at the accepted load (`--duration`).
    Soak,
}

/// What `golive accept` runs against and how (its CLI flags).
#[derive(Debug, Clone)]
pub struct AcceptOptions {
    /// OpenAI-compatible API server; repeat once per node (service and basic run on each).
    pub url: Vec<String>,
    /// Directory for report.json, report.md, junit.xml, report.html.
    pub out: PathBuf,
    /// Deployment profile (`kimi-k3`, `vllm` or a file), for the environment checklist.
    pub profile: Option<String>,
    /// Bundle directory from `golive collect` (one per node): joins the environment checklist.
    pub bundle: Vec<PathBuf>,
    /// Server log: a failed stage is triaged and its first-cause line becomes the evidence.
    pub server_log: Option<PathBuf>,
    /// Container of the server (docker or podman): on a failure its logs are saved to
    /// DIR/server-container.log and triaged like --server-log.
    pub server_container: Option<String>,
    /// Highest concurrency of the ramp.
    pub concurrency: u32,
    /// The expected load; ramp failures above it are limits (observe), at or below it capacity failures (expand). Default: --concurrency.
    pub expected_concurrency: Option<u32>,
    /// Longest context (prompt + output) of the ramp, in tokens. Default: the server's max model length (else 4096).
    pub max_context: Option<u32>,
    /// Expected context; longer ramp steps that fail are limits. Default: --max-context.
    pub expected_context: Option<u32>,
    /// Length of the soak, e.g. 10m.
    pub duration: Duration,
    /// Output limit of ramp and soak requests.
    pub output_tokens: u32,
    /// Prompt length of the short requests (tokens, approximate).
    pub short_prompt: u32,
    /// Requests per concurrent stream in each ramp step.
    pub ramp_requests: u32,
    /// Length of the shared system prompt of the prefix-cache proof (words ≈ tokens).
    pub prefix_words: u32,
    /// Latency objective: a ramp step whose TTFT p95 is above this many ms fails.
    pub slo_ttft_p95_ms: Option<f64>,
    /// Latency objective: a ramp step whose inter-token latency p95 is above this many ms fails.
    pub slo_itl_p95_ms: Option<f64>,
    /// Latency objective: a ramp step whose end-to-end latency p95 is above this many ms fails.
    pub slo_e2e_p95_ms: Option<f64>,
    /// `stream_silence` fails when a streamed answer is silent longer than this between deltas.
    pub max_stream_gap: Duration,
    /// DCGM exporter metrics URL (GPU memory over the ramp), e.g. http://node:9400/metrics.
    pub dcgm: Option<String>,
    /// Who reviews this run (recorded on every check).
    pub reviewer: Option<String>,
    /// Who runs it (default: the login name).
    pub operator: Option<String>,
    /// Leave stages out (repeatable): prefix-cache, agreement, agent, ramp, soak.
    pub skip: Vec<SkippableStage>,
    /// Connection settings (API key, model, TLS, request timeout) for every node.
    pub target: crate::target::TargetOptions,
    /// Options of the agent stage (repeats, the user's tools and cases).
    pub agent: crate::agent::AgentOptions,
    /// Share of ramp and soak requests that are agent cases (0..1], judged like the agent stage.
    pub agent_mix: Option<f64>,
    /// Server whose answers the agreement stage compares every `url` against (default: the first `url`).
    pub reference_url: Option<String>,
    /// The deployment is private: a request without a key or with a wrong key must be refused.
    pub expect_auth: bool,
    /// Data-parallel size: the contract stage tests each rank by `X-data-parallel-rank`.
    pub data_parallel_size: u32,
    /// What production must carry (`--target-rate` / `--target-concurrency`): the
    /// capacity check answers how many replicas that needs.
    pub target_load: Option<TargetLoad>,
    /// Spare capacity on top of the target, e.g. 0.2.
    pub headroom: f64,
    /// Time for the boundary search after a ramp step fails on load: the concurrency is
    /// bisected between the last holding and the failing step until the bracket is within
    /// 10%; zero: no search.
    pub boundary_budget: Duration,
    /// Measurements of the capacity step in all (1..=10): with a target, the step the
    /// capacity answer rests on is measured again, and the answer gives the interval.
    pub capacity_repeat: u32,
    /// What the boundary search bisects: the concurrency (then, one request apart and wider
    /// than 10%, the offered rate), or the offered rate straight away.
    pub boundary_by: BoundaryBy,
}

impl AcceptOptions {
    /// The per-request objectives goodput counts against: every `--slo-*` given, held by each
    /// request (TTFT, its own inter-token latency as TPOT, E2E); `None` without any.
    pub fn slo(&self) -> Option<crate::client::Slo> {
        crate::client::Slo::new(
            self.slo_ttft_p95_ms,
            self.slo_itl_p95_ms,
            self.slo_e2e_p95_ms,
        )
    }

    /// The same objectives at the step level: a ramp step's p95s against them.
    pub fn step_objectives(&self) -> crate::report::Objectives {
        crate::report::Objectives {
            ttft_p95_ms: self.slo_ttft_p95_ms,
            itl_p95_ms: self.slo_itl_p95_ms,
            e2e_p95_ms: self.slo_e2e_p95_ms,
        }
    }
}

/// One API server under test.
pub struct Node {
    /// The server's URL and connection settings.
    pub target: Target,
    /// The OpenAI API client the stages send their requests through.
    pub client: Arc<OpenAiClient>,
    /// Where the stages report progress (stage changes, requests, checks).
    pub events: Events,
}

/// How an acceptance run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptEnd {
    /// Every stage ran (or was skipped); the report has a verdict.
    Decided,
    /// No server answered; the report has a verdict on what was seen.
    Unreachable,
    /// Ctrl-C: the report keeps the checks so far, without a verdict.
    Interrupted,
}

/// What `run` leaves: the report as written to `--out`, and how the run ended.
pub struct AcceptOutcome {
    /// How the run ended.
    pub end: AcceptEnd,
    /// The report as written to `--out`.
    pub report: Report,
}

/// Runs the stages against the `url`s; progress goes to `events`, and to the report
/// files in `args.out` (report.json after each stage, all of them at the end).
pub async fn run(args: &AcceptOptions, events: &Events) -> crate::Result<AcceptOutcome> {
    crate::error::ensure_input!(args.concurrency >= 1, "--concurrency must be at least 1");
    crate::error::ensure_input!(
        args.output_tokens >= 1,
        "--output-tokens must be at least 1"
    );
    if let Some(share) = args.agent_mix {
        crate::error::ensure_input!(
            share > 0.0 && share <= 1.0,
            "--agent-mix is the share of agent requests: above 0 and at most 1, not {share}"
        );
    }
    if let Some(log) = &args.server_log {
        crate::error::ensure_input!(
            log.exists(),
            "--server-log {} does not exist",
            log.display()
        );
        // A FIFO or device never ends: the final report would wait for it for ever.
        crate::error::ensure_input!(
            log.is_file(),
            "--server-log {} is not a regular file (a FIFO or device would never end)",
            log.display()
        );
    }
    // The inputs are read and checked before the first request (the agent's own tools
    // and cases at parse time, by the caller: `agent::validate`).
    // The profile, loaded once: the contract stage and the worksheet read it.
    let profile = match &args.profile {
        Some(p) => crate::profile::Profile::load(p)?,
        None => crate::profile::Profile::generic().clone(),
    };
    let publisher = Publisher::new(events, &args.out);
    let events = &publisher.events;
    let mut nodes = Vec::new();
    for url in &args.url {
        let target = Target::new(url, &args.target)?;
        let client = Arc::new(OpenAiClient::new(&target)?);
        nodes.push(Node {
            target,
            client,
            events: events.clone(),
        });
    }
    let mut report = Report::new(nodes.iter().map(|n| n.target.base_url.clone()).collect());
    report.profile = args.profile.clone();
    report.reviewer = args.reviewer.clone();
    report.operator = args
        .operator
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok());
    // A report that cannot be written stops the run before its first request.
    publisher.publish(&report, false)?;
    let ctx = StageCtx::new(events, &mut report);
    let worksheet = profile.worksheet_items();
    let work = async {
        let outcome = tokio::select! {
            r = run_stages(args, &profile, &mut nodes, &ctx) => Some(r?),
            () = interrupted() => None,
        };
        let end = finish(args, &ctx, outcome, &worksheet).await;
        ctx.finish();
        anyhow::Ok(end)
    };
    // The report leaves in one place, beside the stages; a write that fails stops them.
    let (end, ()) = tokio::try_join!(work, ctx.save(&publisher))?;
    Ok(AcceptOutcome { end, report })
}

/// Ctrl-C or SIGTERM (`kill`, `docker stop`, systemd) arrived: the run stops and
/// still writes every report file with what was measured.
async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = async {
        match signal(SignalKind::terminate()) {
            Ok(mut s) => s.recv().await,
            Err(_) => std::future::pending().await,
        }
    };
    let int = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await
        }
    };
    tokio::select! {
        _ = term => {}
        () = int => {}
    }
}

/// How the stages ended.
enum StagesEnd {
    Done,
    Unreachable,
}

/// What the run adds at the end: triage of the server's log on a server-side failure, the
/// reviewer on every check, and the verdict (none when interrupted); then the report is final.
async fn finish(
    args: &AcceptOptions,
    ctx: &StageCtx<'_>,
    outcome: Option<StagesEnd>,
    worksheet: &[crate::report::worksheet::ItemSpec],
) -> AcceptEnd {
    let log = server_log(args, ctx).await;
    ctx.edit(|report| {
        if let Some(log) = &log {
            attach_triage(report, log);
        }
        for c in &mut report.checks {
            if c.reviewer.is_none() {
                c.reviewer = args.reviewer.clone();
            }
            if args.agent.no_content && c.stage != Stage::Agent {
                strip_content(c);
            }
        }
        match &outcome {
            None => {
                // Interrupted: keep what was measured, decide nothing.
                report.complete = false;
                report.verdict = None;
                report.verdict_reason =
                    "interrupted before the end; the checks so far are kept".into();
            }
            Some(_) => {
                report.decide();
                report.complete = true;
                report.finished_at = Some(chrono::Utc::now());
            }
        }
        report.worksheet = crate::report::worksheet::evaluate(worksheet, report);
    });
    match outcome {
        None => AcceptEnd::Interrupted,
        Some(StagesEnd::Unreachable) => AcceptEnd::Unreachable,
        Some(StagesEnd::Done) => AcceptEnd::Decided,
    }
}

/// The server's log to triage: `--server-log`, else, on a server-side failure, the logs of
/// `--server-container` saved next to the report.
async fn server_log(args: &AcceptOptions, ctx: &StageCtx<'_>) -> Option<PathBuf> {
    if let Some(log) = &args.server_log {
        return Some(log.clone());
    }
    let name = args.server_container.as_ref()?;
    if !ctx.edit(|r| any_server_failure(r)) {
        return None;
    }
    match container_logs(name, &args.out).await {
        Ok(log) => Some(log),
        Err(e) => {
            ctx.events()
                .warning(format!("cannot read the logs of container {name}: {e:#}"));
            None
        }
    }
}

fn environment_checks(
    bundles: &anyhow::Result<Vec<crate::envparse::Bundle>>,
    profile: &crate::profile::Profile,
) -> Vec<Check> {
    match bundles {
        Ok(b) => crate::check::judge(b, profile)
            .items
            .into_iter()
            .map(|item| {
                let mut c = Check::new(
                    item.id.as_str(),
                    Stage::Environment,
                    item.status,
                    item.title,
                );
                c.measurement = item.evidence.lines().next().unwrap_or("").to_string();
                c.evidence = item.evidence;
                c.next_step = item.next_step;
                c.impact = Impact::Environment;
                c.owner = Some(crate::report::Owner::Environment);
                c
            })
            .collect(),
        Err(e) => {
            let mut c = Check::new(
                CheckId::EnvironmentBundles,
                Stage::Environment,
                Status::Fail,
                "the environment bundles can be read and judged",
            );
            c.measurement = "bundles could not be judged".into();
            c.evidence = format!("{e:#}");
            c.impact = Impact::Environment;
            vec![c]
        }
    }
}

async fn run_stages(
    args: &AcceptOptions,
    profile: &crate::profile::Profile,
    nodes: &mut [Node],
    ctx: &StageCtx<'_>,
) -> anyhow::Result<StagesEnd> {
    let mut tracker = StageTracker::new();
    // The bundles are read once: judged here, and their layout sizes the capacity answer.
    let bundles = crate::check::load_bundles(&args.bundle);
    if !args.bundle.is_empty() {
        ctx.keep(StageResult::of_checks(environment_checks(
            &bundles, profile,
        )));
    }
    let gpus_per_server = bundles
        .as_ref()
        .ok()
        .and_then(|b| crate::check::gpus_per_server(b));
    tracker.enter(Stage::Service, ctx);
    let Some(infos) = service(nodes, args.expect_auth, ctx).await else {
        tracker.end(ctx);
        return Ok(StagesEnd::Unreachable);
    };
    let Some(model) = resolve_model(&mut nodes[0], ctx).await else {
        tracker.end(ctx);
        return Ok(StagesEnd::Done);
    };
    tracker.enter(Stage::Basic, ctx);
    let basic_ok = basic(nodes, &model, ctx).await;
    let learned = plan::Learned {
        infos,
        model,
        basic_ok,
        gpus_per_server,
    };
    let (plan, mix_error) = AcceptPlan::resolve(args, profile, nodes, learned, ctx).await;
    ctx.apply(StageResult::of_checks(mix_error.into_iter().collect()));
    // The stages after basic: each runs, or is skipped by the plan's one rule.
    for p in &PLANNED {
        tracker.enter(p.stage, ctx);
        let result = match plan.skip_reason(p, ctx) {
            Some(why) => AcceptPlan::skipped(p, &why),
            None => run_stage(p.stage, &plan, ctx).await?,
        };
        ctx.keep(result);
    }
    ctx.keep(closing_checks(&plan, ctx));
    tracker.end(ctx);
    Ok(StagesEnd::Done)
}

/// One planned stage.
async fn run_stage(
    stage: Stage,
    plan: &AcceptPlan<'_>,
    ctx: &StageCtx<'_>,
) -> anyhow::Result<StageResult> {
    Ok(match stage {
        Stage::PrefixCache => prefix_cache::stage(plan).await,
        Stage::Agreement => agreement::stage(plan).await?,
        Stage::Agent => {
            let (node, args) = (plan.node(), plan.args);
            StageResult::of_checks(
                crate::agent::run_stage(
                    &node.target,
                    &node.client,
                    &plan.model,
                    &args.agent,
                    &args.out,
                )
                .await,
            )
        }
        Stage::Contract => contract::stage(plan).await,
        Stage::Ramp => ramp::stage(plan, ctx).await,
        Stage::Soak => soak::stage(plan, ctx).await,
        other => unreachable!("{other:?} is not a planned stage"),
    })
}

/// The service stage on every node; `None` when no node answered at all.
async fn service(nodes: &[Node], expect_auth: bool, ctx: &StageCtx<'_>) -> Option<Vec<ServerInfo>> {
    let mut infos = Vec::new();
    let mut all_unreachable = true;
    for (i, node) in nodes.iter().enumerate() {
        let mut o = service::service_stage(node, i).await;
        all_unreachable &= o.unreachable;
        if !o.unreachable {
            o.checks
                .push(access::check(&node.target, expect_auth, i).await);
        }
        ctx.apply(StageResult::of_checks(o.checks));
        infos.push(o.info);
    }
    let urls = ctx.edit(|r| {
        r.engine = infos.first().map(|i| i.engine_name().to_string());
        r.urls.join(", ")
    });
    ctx.publish();
    if all_unreachable {
        ctx.events()
            .emit(Event::Unreachable(format!("no server answered at {urls}")));
        return None;
    }
    Some(infos)
}

/// The model under test (`--model`, else what the first node serves); `None`, with a failed
/// check, when neither is known.
async fn resolve_model(node: &mut Node, ctx: &StageCtx<'_>) -> Option<String> {
    match node.target.resolve_model(&node.client.http).await {
        Ok(model) => {
            ctx.edit(|r| r.model = Some(model.clone()));
            Some(model)
        }
        Err(e) => {
            let mut c = Check::new(
                CheckId::ServiceModelResolved,
                Stage::Service,
                Status::Fail,
                "a model to test is known",
            );
            c.measurement = "no model".into();
            c.evidence = format!("{e:#}");
            c.impact = Impact::Environment;
            ctx.keep(StageResult::of_checks(vec![c]));
            None
        }
    }
}

/// The basic stage on every node; whether the first node passed it.
async fn basic(nodes: &[Node], model: &str, ctx: &StageCtx<'_>) -> bool {
    let mut first_ok = true;
    for (i, node) in nodes.iter().enumerate() {
        let checks = service::basic_stage(node, i, model).await;
        first_ok &= i > 0 || checks.iter().all(|c| c.status != Status::Fail);
        ctx.apply(StageResult::of_checks(checks));
    }
    ctx.publish();
    first_ok
}

/// The checks over ramp and soak together: stream silences, and the agent cases under load.
fn closing_checks(plan: &AcceptPlan<'_>, ctx: &StageCtx<'_>) -> StageResult {
    let (soak_gaps, soak_agent) = ctx.carried(|c| (c.soak_gaps.clone(), c.soak_agent.clone()));
    let (silence, agent) = ctx.edit(|r| {
        let steps = &r.measurements.ramp;
        let mut rows: Vec<_> = steps.iter().map(silence::GapRow::from_step).collect();
        rows.extend(soak_gaps);
        let url = &plan.node().client.base_url;
        let silence = silence::check(&rows, plan.args.max_stream_gap, url);
        let agent = agent_load::check(steps, soak_agent.as_ref().map(|(c, a)| (*c, a)));
        (silence, agent)
    });
    let (capacity, line) = ctx.edit(|r| capacity_check(plan, &r.measurements.ramp));
    let mut result =
        StageResult::of_checks(silence.into_iter().chain(agent).chain(capacity).collect());
    result.baseline.capacity_rps = line;
    result.baseline.objectives = plan.args.step_objectives().given();
    result
}

/// With a target: the replicas it needs, from the ramp (see [`capacity`]), and the capacity
/// line of the baseline (one server's goodput at the objectives).
fn capacity_check(
    plan: &AcceptPlan<'_>,
    steps: &[crate::report::RampStep],
) -> (Option<Check>, Option<f64>) {
    let args = plan.args;
    let Some(target) = args.target_load else {
        return (None, None);
    };
    let slo = args.step_objectives();
    let replicas = plan.nodes.len() as u32;
    let answer = capacity::answer(steps, target, &slo, args.headroom, replicas)
        .map(|a| a.with_gpus(plan.gpus_per_server));
    let line = answer.as_ref().and_then(|a| a.per_replica_rps);
    let check = Some(match answer {
        Some(a) => a.check(),
        None => {
            let mut c = Check::new(
                CheckId::Capacity,
                Stage::Ramp,
                Status::Skip,
                "replicas needed for the target at the objectives, from the ramp",
            );
            c.measurement = "no answer: no ramp step held, or no goodput was measured \
                                 (a rate target needs --slo-* objectives)"
                .into();
            c
        }
    });
    (check, line)
}

/// `--no-content`: prompts and answers become hashes and lengths.
fn strip_content(c: &mut Check) {
    fn hashed(text: &str) -> String {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(text.as_bytes());
        format!(
            "sha256:{} ({} chars)",
            hex::encode(digest),
            text.chars().count()
        )
    }
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    match x {
                        serde_json::Value::String(s) if k == "content" || k == "prompt" => {
                            *x = serde_json::Value::String(hashed(s));
                        }
                        _ => walk(x),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    if let Some(r) = &mut c.request {
        walk(r);
    }
    if let Some(answer) = c.evidence.strip_prefix("answer: ") {
        c.evidence = format!("answer: {}", hashed(answer));
    }
}
