//! `golive accept`: the acceptance run, stage by stage, ending in a verdict.
//!
//! Stages: environment (from `--bundle`), service and basic (per `--url`), prefix
//! cache, agent, ramp, soak. After every stage the report as it stands goes out as an
//! event (`complete: false`) and report.json is rewritten from it, so an interrupted run
//! (Ctrl-C included) keeps what it measured; at the end the verdict is decided and the
//! final report goes out, from which every file is written ([`ReportFiles`]).
//!
//! Verdict rules (README): environment or agent-interface failures -> rebuild;
//! capacity failures at the expected load -> expand; failures only beyond the expected
//! load (limits), non-blocking failures or warnings -> observe; all pass -> release.

pub mod agent_load;
pub mod agreement;
pub mod engine;
mod outputs;
pub mod prefix_cache;
pub mod ramp;
pub mod service;
pub mod silence;
pub mod soak;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::client::OpenAiClient;
use crate::events::{Event, Events};
use crate::report::{Check, CheckId, Impact, Report, Stage, Status};
use crate::target::Target;

pub use outputs::ReportFiles;
use outputs::{any_server_failure, attach_triage, container_logs, Publisher};

/// Stages that can be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkippableStage {
    PrefixCache,
    Agreement,
    Agent,
    Ramp,
    Soak,
}

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
    pub target: crate::target::TargetOptions,
    pub agent: crate::agent::AgentOptions,
    /// Share of ramp and soak requests that are agent cases (0..1], judged like the agent stage.
    pub agent_mix: Option<f64>,
    /// Server whose answers the agreement stage compares every `url` against (default: the first `url`).
    pub reference_url: Option<String>,
}

/// One API server under test.
pub struct Node {
    pub target: Target,
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
    pub end: AcceptEnd,
    pub report: Report,
}

/// Runs the stages against the `url`s; progress goes to `events`, and to the report
/// files in `args.out` (report.json after each stage, all of them at the end).
pub async fn run(args: &AcceptOptions, events: &Events) -> anyhow::Result<AcceptOutcome> {
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    anyhow::ensure!(
        args.output_tokens >= 1,
        "--output-tokens must be at least 1"
    );
    if let Some(share) = args.agent_mix {
        anyhow::ensure!(
            share > 0.0 && share <= 1.0,
            "--agent-mix is the share of agent requests: above 0 and at most 1, not {share}"
        );
    }
    if let Some(log) = &args.server_log {
        anyhow::ensure!(
            log.exists(),
            "--server-log {} does not exist",
            log.display()
        );
        // A FIFO or device never ends: the final report would wait for it for ever.
        anyhow::ensure!(
            log.is_file(),
            "--server-log {} is not a regular file (a FIFO or device would never end)",
            log.display()
        );
    }
    // The inputs are read and checked before the first request.
    if let Some(p) = &args.profile {
        crate::profile::Profile::load(p)?;
    }
    crate::agent::validate(&args.agent)?;
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
    crate::outfile::create_dirs(&args.out)?;
    let mut report = Report::new(nodes.iter().map(|n| n.target.base_url.clone()).collect());
    report.profile = args.profile.clone();
    report.reviewer = args.reviewer.clone();
    report.operator = args
        .operator
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok());
    publisher.update(&report)?;
    let outcome = tokio::select! {
        r = run_stages(args, &publisher, &mut nodes, &mut report) => Some(r?),
        () = interrupted() => None,
    };
    let end = finish(args, &publisher, &mut report, outcome).await?;
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

async fn finish(
    args: &AcceptOptions,
    publisher: &Publisher,
    report: &mut Report,
    outcome: Option<StagesEnd>,
) -> anyhow::Result<AcceptEnd> {
    if let Some(log) = &args.server_log {
        attach_triage(report, log);
    } else if let Some(name) = &args.server_container {
        if any_server_failure(report) {
            match container_logs(name, &args.out).await {
                Ok(log) => attach_triage(report, &log),
                Err(e) => publisher
                    .events
                    .warning(format!("cannot read the logs of container {name}: {e:#}")),
            }
        }
    }
    for c in &mut report.checks {
        if c.reviewer.is_none() {
            c.reviewer = args.reviewer.clone();
        }
        if args.agent.no_content && c.stage != Stage::Agent {
            strip_content(c);
        }
    }
    match outcome {
        None => {
            // Interrupted: keep what was measured, decide nothing.
            report.complete = false;
            report.verdict = None;
            report.verdict_reason = "interrupted before the end; the checks so far are kept".into();
            publisher.finish(report)?;
            Ok(AcceptEnd::Interrupted)
        }
        Some(end) => {
            report.decide();
            report.complete = true;
            report.finished_at = Some(chrono::Utc::now());
            publisher.finish(report)?;
            Ok(match end {
                StagesEnd::Unreachable => AcceptEnd::Unreachable,
                StagesEnd::Done => AcceptEnd::Decided,
            })
        }
    }
}

fn environment_checks(args: &AcceptOptions) -> Vec<Check> {
    match crate::check::check_bundles(&args.bundle, args.profile.as_deref()) {
        Ok(r) => r
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

fn skipped(id: CheckId, stage: Stage, why: &str) -> Check {
    let mut c = Check::new(id, stage, Status::Skip, format!("{id} stage"));
    c.measurement = format!("not run: {why}");
    c
}

async fn run_stages(
    args: &AcceptOptions,
    publisher: &Publisher,
    nodes: &mut [Node],
    report: &mut Report,
) -> anyhow::Result<StagesEnd> {
    let out = args.out.as_path();
    let events = &publisher.events;
    let mut stage = StageTracker::new(events);
    if !args.bundle.is_empty() {
        report.checks.extend(environment_checks(args));
        publisher.update(report)?;
    }

    // service, per node
    stage.enter(Stage::Service, report);
    let mut infos = Vec::new();
    let mut all_unreachable = true;
    for (i, node) in nodes.iter().enumerate() {
        let o = service::service_stage(node, i).await;
        all_unreachable &= o.unreachable;
        report.checks.extend(o.checks);
        infos.push(o.info);
    }
    report.engine = infos.first().map(|i| i.engine_name().to_string());
    publisher.update(report)?;
    if all_unreachable {
        stage.end(report);
        events.emit(Event::Unreachable(format!(
            "no server answered at {}",
            report.urls.join(", ")
        )));
        return Ok(StagesEnd::Unreachable);
    }

    let model = match nodes[0].target.resolve_model(&nodes[0].client.http).await {
        Ok(m) => m,
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
            report.checks.push(c);
            publisher.update(report)?;
            stage.end(report);
            return Ok(StagesEnd::Done);
        }
    };
    report.model = Some(model.clone());

    // basic, per node
    stage.enter(Stage::Basic, report);
    let mut basic_ok = true;
    for (i, node) in nodes.iter().enumerate() {
        let checks = service::basic_stage(node, i, &model).await;
        basic_ok &= i > 0 || checks.iter().all(|c| c.status != Status::Fail);
        report.checks.extend(checks);
    }
    publisher.update(report)?;
    let node = &nodes[0];
    let info = &infos[0];
    // Prompt lengths of ramp and soak in the server's tokens.
    let tokens_per_word = if basic_ok {
        crate::load::calibrate_tokens_per_word(&node.client, crate::client::Api::Chat, &model)
            .await
            .unwrap_or(1.0)
    } else {
        1.0
    };
    let skip = |s: SkippableStage| args.skip.contains(&s);
    let not_served = "the basic request failed on the first node";

    // prefix cache
    stage.enter(Stage::PrefixCache, report);
    if skip(SkippableStage::PrefixCache) {
        report.checks.push(skipped(
            CheckId::PrefixCache,
            Stage::PrefixCache,
            "--skip prefix-cache",
        ));
    } else if !basic_ok {
        report.checks.push(skipped(
            CheckId::PrefixCache,
            Stage::PrefixCache,
            not_served,
        ));
    } else {
        let (check, samples) = prefix_cache::run(node, info, &model, args.prefix_words).await;
        report.measurements.prefix_cache = samples;
        report.baseline.prefill_warm_ms = check.data["warm_prefill_ms"].as_f64();
        report.checks.push(check);
    }
    publisher.update(report)?;

    // agreement: cold against cached, replicas against the first or the reference
    stage.enter(Stage::Agreement, report);
    if skip(SkippableStage::Agreement) {
        report.checks.push(skipped(
            CheckId::Agreement,
            Stage::Agreement,
            "--skip agreement",
        ));
    } else if !basic_ok {
        report
            .checks
            .push(skipped(CheckId::Agreement, Stage::Agreement, not_served));
    } else {
        let checks = agreement::stage(args, nodes, &infos, &model).await?;
        report.checks.extend(checks);
    }
    publisher.update(report)?;

    // agent
    stage.enter(Stage::Agent, report);
    if !skip(SkippableStage::Agent) && !args.agent.skip_agent && basic_ok {
        let checks =
            crate::agent::run_stage(&node.target, &node.client, &model, &args.agent, out).await;
        report.checks.extend(checks);
        publisher.update(report)?;
    }

    // agent cases mixed into ramp and soak
    let (agent_mix, mix_error) = agent_load::mix(
        args.agent_mix,
        &args.agent,
        &model,
        node.target.request_timeout,
    );
    report.checks.extend(mix_error);

    // ramp
    stage.enter(Stage::Ramp, report);
    let expected_concurrency = args.expected_concurrency.unwrap_or(args.concurrency);
    let server_max = info
        .max_model_len
        .map(|v| v.min(u64::from(u32::MAX)) as u32);
    let mut max_context = args.max_context.or(server_max).unwrap_or(4096);
    if let Some(limit) = server_max.filter(|l| *l < max_context) {
        // Longer requests would only be refused (HTTP 400): a setting, not a capacity limit.
        events.notice(format!("--max-context {max_context} is above the server's max model length {limit}; using {limit}"));
        max_context = limit;
    }
    let mut accepted: Option<(u32, Option<f64>)> = None;
    let mut gap_rows: Vec<silence::GapRow> = Vec::new();
    if skip(SkippableStage::Ramp) {
        report
            .checks
            .push(skipped(CheckId::Ramp, Stage::Ramp, "--skip ramp"));
    } else if !basic_ok {
        report
            .checks
            .push(skipped(CheckId::Ramp, Stage::Ramp, not_served));
    } else {
        let cfg = ramp::RampConfig {
            concurrency: args.concurrency,
            expected_concurrency,
            max_context,
            expected_context: args.expected_context.unwrap_or(max_context),
            output_tokens: args.output_tokens,
            short_prompt: args.short_prompt,
            requests_per_stream: args.ramp_requests,
            tokens_per_word,
            slo_ttft_p95_ms: args.slo_ttft_p95_ms,
            slo_itl_p95_ms: args.slo_itl_p95_ms,
            agent_mix: agent_mix.clone(),
        };
        let outcome = ramp::run(
            node,
            info,
            &model,
            &cfg,
            args.dcgm.as_deref(),
            |step, check| {
                report.measurements.ramp.push(step.clone());
                report.checks.push(check.clone());
                events.emit(Event::RampStepDone(Box::new(step.clone())));
                if let Err(e) = publisher.update(report) {
                    events.warning(format!("cannot save the report: {e:#}"));
                }
            },
        )
        .await;
        for c in outcome.checks {
            if !report.checks.iter().any(|x| x.id == c.id) {
                report.checks.push(c);
            }
        }
        report.baseline.accepted_concurrency = outcome.accepted_concurrency;
        accepted = outcome
            .accepted_concurrency
            .map(|c| (c, outcome.accepted_rate));
        let steps = &report.measurements.ramp;
        gap_rows.extend(steps.iter().map(silence::GapRow::from_step));
        report.baseline.kv_cache_usage_max = steps
            .iter()
            .filter_map(|s| s.kv_cache_usage)
            .reduce(f64::max);
        report.baseline.waiting_max = steps.iter().filter_map(|s| s.waiting_max).reduce(f64::max);
        if let Some(step) = steps
            .iter()
            .rev()
            .find(|s| Some(s.concurrency) == outcome.accepted_concurrency && s.errors == 0)
        {
            report.baseline.ttft_p50_ms = Some(step.ttft_ms.p50);
            report.baseline.ttft_p95_ms = Some(step.ttft_ms.p95);
            report.baseline.itl_p95_ms = Some(step.itl_ms.p95);
            report.baseline.error_rate = Some(0.0);
        }
    }
    publisher.update(report)?;

    // soak
    stage.enter(Stage::Soak, report);
    let mut soak_agent = None;
    if skip(SkippableStage::Soak) {
        report
            .checks
            .push(skipped(CheckId::Soak, Stage::Soak, "--skip soak"));
    } else if !basic_ok {
        report
            .checks
            .push(skipped(CheckId::Soak, Stage::Soak, not_served));
    } else if accepted.is_none() && !skip(SkippableStage::Ramp) {
        report.checks.push(skipped(
            CheckId::Soak,
            Stage::Soak,
            "the ramp accepted no concurrency",
        ));
    } else {
        let (conc, rate) = accepted.unwrap_or((expected_concurrency.min(args.concurrency), None));
        // A steady rate below what the ramp sustained, so a growing queue means trouble.
        let rate = rate.map(|r| r * 0.8).filter(|r| *r > 0.0);
        let o = soak::run(
            node,
            info,
            &model,
            args.duration,
            conc,
            rate,
            args.short_prompt,
            args.output_tokens,
            tokens_per_word,
            agent_mix.as_ref().map(|m| Arc::new(m.fresh())),
        )
        .await;
        report.measurements.soak = o.samples;
        gap_rows.push(silence::GapRow::from_stats(Stage::Soak, "soak", &o.stats));
        soak_agent = o.agent.map(|a| (conc, a));
        let b = &mut report.baseline;
        b.cache_hit_ratio = o.cache_hit_ratio;
        if o.stats.requests > 0 {
            b.ttft_p50_ms = Some(o.stats.ttft_ms().p50);
            b.ttft_p95_ms = Some(o.stats.ttft_ms().p95);
            b.itl_p95_ms = Some(o.stats.itl_ms().p95);
            b.error_rate = Some(o.stats.error_rate());
            b.request_rate_rps = Some(o.request_rate);
        }
        let soak_kv = report
            .measurements
            .soak
            .iter()
            .filter_map(|s| s.kv_cache_usage)
            .reduce(f64::max);
        let soak_wait = report
            .measurements
            .soak
            .iter()
            .filter_map(|s| s.waiting)
            .reduce(f64::max);
        b.kv_cache_usage_max = max_opt(b.kv_cache_usage_max, soak_kv);
        b.waiting_max = max_opt(b.waiting_max, soak_wait);
        if b.accepted_concurrency.is_none() {
            b.accepted_concurrency = (o.check.status != Status::Fail).then_some(conc);
        }
        report.checks.push(o.check);
    }
    if let Some(c) = silence::check(&gap_rows, args.max_stream_gap, &node.client.base_url) {
        report.checks.push(c);
    }
    if let Some(c) = agent_load::check(
        &report.measurements.ramp,
        soak_agent.as_ref().map(|(c, a)| (*c, a)),
    ) {
        report.checks.push(c);
    }
    publisher.update(report)?;
    stage.end(report);
    Ok(StagesEnd::Done)
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

/// Announces stage changes: the previous stage finished, the next one started.
/// The checks a stage added are reported when it ends.
struct StageTracker<'a> {
    events: &'a Events,
    current: Option<Stage>,
    /// Checks of the report already reported.
    seen: usize,
}

impl<'a> StageTracker<'a> {
    fn new(events: &'a Events) -> Self {
        StageTracker {
            events,
            current: None,
            seen: 0,
        }
    }

    fn enter(&mut self, next: Stage, report: &Report) {
        self.end(report);
        self.events.emit(Event::StageStarted(next));
        self.current = Some(next);
    }

    fn end(&mut self, report: &Report) {
        for c in report.checks.iter().skip(self.seen) {
            self.events.emit(Event::CheckResult(Box::new(c.clone())));
        }
        self.seen = report.checks.len();
        if let Some(done) = self.current.take() {
            self.events.emit(Event::StageFinished(done));
        }
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}
