//! Stage `ramp`: 1 short, 1 long, 2 parallel short, 2 parallel long, then doubling
//! concurrency up to `--concurrency` while the long context doubles up to
//! `--max-context`. Per step: latency percentiles, errors, KV-cache usage, waiting
//! requests, preemptions. The first failing step is the boundary, recorded with what
//! the runbook asks of every OOM.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::capacity::TargetLoad;
use super::engine::{self, first_delta, ServerInfo};
use super::plan::AcceptPlan;
use super::stage::{StageCtx, StageResult};
use super::Node;
use crate::agent::mix::AgentMix;
use crate::client::{ErrorClass, ErrorKind, Slo};
use crate::events::Event;
use crate::load::{run_load, LoadCounters, LoadPlan, LoadResult};
use crate::report::{
    Baseline, Check, CheckId, Impact, Objectives, Owner, Percentiles, RampStep, Stage, Status,
};

mod boundary;
pub use boundary::BOUNDARY_WIDTH;

/// One planned step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPlan {
    /// The step's name in checks and reports (`2 x short (200 tokens)`, `2 x long (4096 tokens
    /// context)`).
    pub label: String,
    /// Requests in flight (closed loop); for a rate step, the most in flight.
    pub concurrency: u32,
    /// Prompt length (server tokens).
    pub prompt_tokens: u32,
    /// Output limit of each request (`max_tokens`).
    pub max_tokens: u32,
    /// Prompt plus output limit.
    pub context: u32,
    /// A step of the boundary search in the offered rate: its requests start at this many
    /// per second (open loop), `concurrency` of them at most in flight (see [`step_load`]).
    pub rate: Option<f64>,
}

/// Which quantity the boundary search bisects (`--boundary-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BoundaryBy {
    /// The concurrency; where its two ends are one request apart and still wider than
    /// [`BOUNDARY_WIDTH`], the search goes on in the offered rate.
    #[default]
    Concurrency,
    /// The offered rate, straight after the doubling ramp's bracket.
    Rate,
}

/// Settings of the ramp.
#[derive(Debug, Clone)]
pub struct RampConfig {
    /// Highest concurrency of the ramp (`--concurrency`).
    pub concurrency: u32,
    /// The expected load: failing steps above it are limits (observe), at or below it capacity
    /// failures (expand).
    pub expected_concurrency: u32,
    /// Longest context (prompt + output, tokens) of the long steps.
    pub max_context: u32,
    /// Expected context (tokens): longer steps that fail are limits.
    pub expected_context: u32,
    /// Output limit of every request (`--output-tokens`).
    pub output_tokens: u32,
    /// Prompt length of the short steps (tokens, `--short-prompt`).
    pub short_prompt: u32,
    /// Requests per concurrent stream in each step (`--ramp-requests`).
    pub requests_per_stream: u32,
    /// Server tokens per prompt word, so prompt lengths are in the server's tokens.
    pub tokens_per_word: f64,
    /// A step fails when one of its latency p95s is above its objective.
    pub objectives: Objectives,
    /// The per-request objectives each step counts goodput against.
    pub slo: Option<Slo>,
    /// Agent cases mixed into every step (`--agent-mix`); each step counts its own.
    pub agent_mix: Option<Arc<AgentMix>>,
    /// Time for the boundary search after a failure on load (`--boundary-budget`); zero:
    /// no search.
    pub boundary_budget: Duration,
    /// The capacity target (`--target-rate`/`--target-concurrency`): it picks the step
    /// that `repeat` measures again.
    pub target: Option<TargetLoad>,
    /// Measurements of the capacity step in all (`--capacity-repeat`); 1: no repeat.
    pub repeat: u32,
    /// What the boundary search bisects (`--boundary-by`).
    pub boundary_by: BoundaryBy,
}

/// The steps: at each concurrency level (1, 2, 4, ... up to the maximum) one short and
/// one long step; the long context doubles with the level and ends at `max_context`.
pub fn plan_steps(cfg: &RampConfig) -> Vec<StepPlan> {
    let mut levels = vec![1u32];
    while *levels.last().unwrap_or(&1) < cfg.concurrency.max(1) {
        let next = (levels.last().unwrap_or(&1) * 2).min(cfg.concurrency);
        levels.push(next);
    }
    if cfg.concurrency >= 2 && levels.len() < 2 {
        levels.push(2);
    }
    let out = cfg.output_tokens.max(1);
    let short_ctx = cfg.short_prompt + out;
    let max_ctx = cfg.max_context.max(short_ctx + 1);
    let n = levels.len() as u32;
    // Long context at level i: max_ctx / 2^(n-1-i), never below twice the short one.
    let long_ctx = |i: u32| -> u32 {
        let shift = (n - 1 - i).min(31);
        (max_ctx >> shift).max((2 * short_ctx).min(max_ctx))
    };
    let mut steps = Vec::new();
    for (i, c) in levels.iter().enumerate() {
        let lc = long_ctx(i as u32);
        steps.push(StepPlan {
            label: format!("{c} x short ({} tokens)", cfg.short_prompt),
            concurrency: *c,
            prompt_tokens: cfg.short_prompt,
            max_tokens: out,
            context: short_ctx,
            rate: None,
        });
        steps.push(StepPlan {
            label: format!("{c} x long ({lc} tokens context)"),
            concurrency: *c,
            prompt_tokens: lc.saturating_sub(out).max(1),
            max_tokens: out,
            context: lc,
            rate: None,
        });
    }
    steps
}

/// What the ramp found.
pub struct RampOutcome {
    /// The ramp's checks: one per step run, the steps left out after a failure, the boundary
    /// search's and the transport's.
    pub checks: Vec<Check>,
    /// Every step run, as report.json records it.
    pub steps: Vec<RampStep>,
    /// Highest concurrency whose short and long steps both passed.
    pub accepted_concurrency: Option<u32>,
    /// Request rate of the short step at the accepted concurrency.
    pub accepted_rate: Option<f64>,
    /// The first step that failed (`label (concurrency N, context M)`); `None` when every step
    /// held.
    pub boundary: Option<String>,
    /// Each step's request rate (all requests, per second), in the order of `steps`.
    pub request_rates: Vec<f64>,
}

impl RampOutcome {
    /// Keeps a measured step: `on_step` sees it (to save the report), then the outcome.
    fn keep(&mut self, done: StepDone, on_step: &mut impl FnMut(&RampStep, &Check)) {
        on_step(&done.step, &done.check);
        self.request_rates.push(done.rate);
        self.steps.push(done.step);
        self.checks.push(done.check);
    }
}

/// `ramp_c4_short`, `ramp_c4_short_repeat2`; a rate step by its rate (`ramp_r0p62_long`).
fn step_id(p: &StepPlan) -> String {
    let at = match p.rate {
        Some(r) => format!("r{}", rate_text(r).replace('.', "p")),
        None => format!("c{}", p.concurrency),
    };
    match repeat_of(&p.label) {
        Some((_, n)) => format!("ramp_{at}_{}_repeat{n}", p.kind()),
        None => format!("ramp_{at}_{}", p.kind()),
    }
}

/// A rate in three significant digits without trailing zeros (`0.623`, `0.62`, `12.5`,
/// `140`): the steps of a search within 10% stay apart.
pub(crate) fn rate_text(rate: f64) -> String {
    let digits = if rate > 0.0 && rate.is_finite() {
        (2 - rate.log10().floor() as i32).clamp(0, 6) as usize
    } else {
        0
    };
    let text = format!("{rate:.digits$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

/// The label of a step measured again (`--capacity-repeat`): the step's own label and the
/// measurement's number (2 for the first repeat).
pub(crate) fn repeat_label(label: &str, n: u32) -> String {
    format!("{label}, repeat {n}")
}

/// A repeat's step label and number (`4 x short (128 tokens), repeat 2`: the step
/// `4 x short (128 tokens)`, 2); none for a step measured once.
pub(crate) fn repeat_of(label: &str) -> Option<(&str, u32)> {
    let (of, n) = label.rsplit_once(", repeat ")?;
    Some((of, n.parse().ok()?))
}

/// A step's kind from its label (`4 x long (256 tokens context)`: `long`).
pub(crate) fn step_kind(label: &str) -> &str {
    label
        .split(" x ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or(label)
}

impl StepPlan {
    /// `short` or `long`.
    fn kind(&self) -> &str {
        step_kind(&self.label)
    }

    /// The step as the ramp's boundary: its label, concurrency and context.
    fn boundary_text(&self) -> String {
        format!(
            "{} (concurrency {}, context {})",
            self.label, self.concurrency, self.context
        )
    }

    /// A recorded step, to be measured again as its `n`th measurement (a rate step at its
    /// rate).
    fn again(s: &RampStep, n: u32) -> StepPlan {
        StepPlan {
            label: repeat_label(&s.label, n),
            concurrency: s.concurrency,
            prompt_tokens: s.prompt_tokens,
            max_tokens: s.max_tokens,
            context: s.prompt_tokens + s.max_tokens,
            rate: s.rate,
        }
    }

    /// What the step sends, after its load (`long (256 tokens context)` of
    /// `4 x long (256 tokens context), boundary search`).
    fn what(&self) -> &str {
        let what = self.label.split_once(" x ").map_or("", |(_, r)| r);
        what.trim_end_matches(", boundary search")
    }
}

impl RampConfig {
    /// The ramp of an acceptance plan.
    fn of(plan: &AcceptPlan<'_>) -> Self {
        let args = plan.args;
        RampConfig {
            concurrency: args.concurrency,
            expected_concurrency: plan.expected_concurrency,
            max_context: plan.max_context,
            expected_context: args.expected_context.unwrap_or(plan.max_context),
            output_tokens: args.output_tokens,
            short_prompt: args.short_prompt,
            requests_per_stream: args.ramp_requests,
            tokens_per_word: plan.tokens_per_word,
            objectives: args.step_objectives(),
            slo: args.slo(),
            agent_mix: plan.agent_mix.clone(),
            boundary_budget: args.boundary_budget,
            target: args.target_load,
            repeat: args.capacity_repeat,
            boundary_by: args.boundary_by,
        }
    }
}

/// The stage as `accept` runs it, on the first node: each step is kept as it finishes (an
/// interrupted run keeps it); the result holds the checks the steps did not, the accepted
/// concurrency and the baseline of the accepted step.
pub(super) async fn stage(plan: &AcceptPlan<'_>, ctx: &StageCtx<'_>) -> StageResult {
    let cfg = RampConfig::of(plan);
    let mut kept = Vec::new();
    let on_step = |step: &RampStep, check: &Check| {
        kept.push(check.id.clone());
        let mut part = StageResult::of_checks(vec![check.clone()]);
        part.measurements.ramp.push(step.clone());
        ctx.apply(part);
        ctx.events()
            .emit(Event::RampStepDone(Box::new(step.clone())));
        ctx.publish();
    };
    let dcgm = plan.args.dcgm.as_deref();
    let outcome = run(plan.node(), plan.info(), &plan.model, &cfg, dcgm, on_step).await;
    let mut result = StageResult {
        baseline: baseline(&outcome),
        ..StageResult::default()
    };
    result.carry.accepted = outcome
        .accepted_concurrency
        .map(|c| (c, outcome.accepted_rate));
    result.checks = outcome
        .checks
        .into_iter()
        .filter(|c| !kept.contains(&c.id))
        .collect();
    result
}

/// The ramp's part of the baseline: the accepted concurrency, the peaks over every step, and
/// the latencies of the accepted step when it had no error.
fn baseline(outcome: &RampOutcome) -> Baseline {
    let steps = &outcome.steps;
    let mut b = Baseline {
        accepted_concurrency: outcome.accepted_concurrency,
        kv_cache_usage_max: steps
            .iter()
            .filter_map(|s| s.kv_cache_usage)
            .reduce(f64::max),
        waiting_max: steps.iter().filter_map(|s| s.waiting_max).reduce(f64::max),
        ..Baseline::default()
    };
    let accepted = steps.iter().rev().find(|s| {
        Some(s.concurrency) == outcome.accepted_concurrency && s.rate.is_none() && s.errors == 0
    });
    if let Some(step) = accepted {
        b.ttft_p50_ms = Some(step.ttft_ms.p50);
        b.ttft_p95_ms = Some(step.ttft_ms.p95);
        b.itl_p95_ms = Some(step.itl_ms.p95);
        b.error_rate = Some(0.0);
    }
    b
}

/// Runs the ramp; `on_step` is called after every step (to save the report). The ramp stops
/// at the first failed step; the steps after it are listed as skipped. A failure on load
/// is then searched down to [`BOUNDARY_WIDTH`] between the last step of its kind that held
/// and itself, within `cfg.boundary_budget`.
pub async fn run(
    node: &Node,
    info: &ServerInfo,
    model: &str,
    cfg: &RampConfig,
    dcgm: Option<&str>,
    mut on_step: impl FnMut(&RampStep, &Check),
) -> RampOutcome {
    let ramp = Ramp {
        node,
        info,
        model,
        cfg,
        dcgm,
    };
    let plans = plan_steps(cfg);
    let mut outcome = RampOutcome {
        checks: Vec::new(),
        steps: Vec::new(),
        accepted_concurrency: None,
        accepted_rate: None,
        boundary: None,
        request_rates: Vec::new(),
    };
    let mut level_ok: BTreeMap<u32, (bool, Option<f64>)> = BTreeMap::new();
    let mut transport = TransportTally::default();
    let mut failed_on_load = None;
    for (i, p) in plans.iter().enumerate() {
        let done = ramp.step(p, &outcome.steps, &mut transport).await;
        let entry = level_ok.entry(p.concurrency).or_insert((true, None));
        entry.0 &= !done.failed;
        if p.kind() == "short" {
            entry.1 = Some(done.rate);
        }
        let (failed, capacity) = (done.failed, done.capacity);
        outcome.keep(done, &mut on_step);
        if failed {
            let boundary = p.boundary_text();
            outcome.checks.extend(not_run(&plans[i + 1..], &boundary));
            outcome.boundary = Some(boundary);
            failed_on_load = capacity.then_some(p);
            break;
        }
    }
    if let Some(p) = failed_on_load {
        let search = ramp
            .search(p, &mut outcome, &mut transport, &mut on_step)
            .await;
        outcome.checks.extend(search);
    }
    ramp.repeat(&mut outcome, &mut transport, &mut on_step)
        .await;
    outcome
        .checks
        .extend(transport.check(&node.client.base_url));
    (outcome.accepted_concurrency, outcome.accepted_rate) =
        accepted(&level_ok, &plans, &outcome.steps, cfg);
    outcome
}

/// What one ramp runs against, and how.
struct Ramp<'a> {
    node: &'a Node,
    info: &'a ServerInfo,
    model: &'a str,
    cfg: &'a RampConfig,
    dcgm: Option<&'a str>,
}

/// One step measured, judged and recorded.
struct StepDone {
    step: RampStep,
    check: Check,
    failed: bool,
    /// The failure shows load (see [`StepJudged::capacity_evidence`]).
    capacity: bool,
    /// Requests per second, all requests.
    rate: f64,
    /// An open loop that fell behind its schedule (see [`crate::load::client_limited`]).
    client_limited: bool,
}

impl Ramp<'_> {
    /// Measures, judges and records one step.
    async fn step(
        &self,
        p: &StepPlan,
        earlier: &[RampStep],
        transport: &mut TransportTally,
    ) -> StepDone {
        let m = self.measure(p).await;
        let judged = judge_step(&m, self.cfg);
        let mut step = step_record(p, &m, judged.status);
        let mut check = step_check(self.node, self.model, p, &m, &step, &judged);
        let mut failed = judged.status == Status::Fail;
        let lateness = m.result.stats.schedule_lateness_ms();
        // Error answers stay the server's; anything else the client could not send as
        // planned says nothing of the server.
        let client_limited =
            crate::load::client_limited(p.rate, &lateness) && (!failed || judged.capacity_evidence);
        if client_limited {
            mark_client_limited(&mut check, &mut step, &lateness);
            failed = false;
        } else if failed {
            let failure = Failure {
                m: &m,
                judged: &judged,
                earlier,
                step: &step,
            };
            mark_failure(&mut check, p, self.info, self.cfg, &failure);
        }
        transport.add(&m.result.stats);
        StepDone {
            step,
            check,
            failed,
            capacity: judged.capacity_evidence && !client_limited,
            rate: m.result.request_rate(),
            client_limited,
        }
    }
}

impl Ramp<'_> {
    /// Measures the capacity step again until it has `cfg.repeat` measurements
    /// (`--capacity-repeat`; none without a target or a step that held). A repeat that
    /// fails is a warning, not a new boundary: the capacity answer counts it and says low
    /// confidence.
    async fn repeat(
        &self,
        outcome: &mut RampOutcome,
        transport: &mut TransportTally,
        on_step: &mut impl FnMut(&RampStep, &Check),
    ) {
        let Some(target) = self.cfg.target.filter(|_| self.cfg.repeat > 1) else {
            return;
        };
        let Some(step) = super::capacity::capacity_step(&outcome.steps, target).cloned() else {
            return;
        };
        for n in 2..=self.cfg.repeat {
            let p = StepPlan::again(&step, n);
            let mut done = self.step(&p, &outcome.steps, transport).await;
            if done.failed {
                done.check.status = Status::Warn;
                done.check.impact = Impact::Info;
                done.check.next_step = "the capacity step failed when measured again: the capacity lies within the noise of the boundary; the answer is low confidence".into();
            }
            outcome.keep(done, on_step);
        }
    }
}

/// One step's load and what the server's metrics said during it.
struct StepMeasured {
    result: LoadResult,
    peaks: engine::Peaks,
    /// Preemptions during the step (counter delta).
    preemptions: Option<f64>,
    /// How the agent cases mixed into the step fared.
    agent: Option<crate::report::AgentConformance>,
}

impl Ramp<'_> {
    async fn measure(&self, p: &StepPlan) -> StepMeasured {
        let (node, info) = (self.node, self.info);
        let names = info.names();
        let metrics_url = engine::metrics_url(&node.client.base_url, info);
        let scrape = || engine::scrape_at(&node.client.http, metrics_url.as_deref());
        let plan = Arc::new(step_load(self.model, info, self.cfg, p));
        let before = scrape().await;
        let load_label = format!("ramp {}", p.label);
        let tracker = node.events.load_started(&load_label, plan.requests);
        let load = run_load(
            node.client.clone(),
            plan.clone(),
            Arc::new(LoadCounters::default()),
            Some(tracker.on_record()),
        );
        let every = Duration::from_millis(500);
        let (result, peaks) = engine::with_peaks(
            &node.client.http,
            metrics_url.as_deref(),
            self.dcgm,
            names,
            every,
            load,
        )
        .await;
        tracker.finish();
        let after = scrape().await;
        let preemptions = match (&before, &after) {
            (Some(b), Some(a)) => first_delta(b, a, names.preemptions),
            _ => None,
        };
        StepMeasured {
            result,
            peaks,
            preemptions,
            agent: plan.agent_mix.as_ref().map(|m| m.conformance()),
        }
    }
}

/// The load of one step: `requests_per_stream` requests per stream in a closed loop; a rate
/// step sends its `concurrency` requests at its rate, evenly spaced (open loop: a queue
/// forms in the server, never in the client, whose cap is the request count), and stops
/// early when the server is over-saturated, judged over half the step's schedule.
fn step_load(model: &str, info: &ServerInfo, cfg: &RampConfig, p: &StepPlan) -> LoadPlan {
    let mut plan = LoadPlan::new(model);
    plan.concurrency = p.concurrency;
    plan.requests = Some(u64::from(p.concurrency * cfg.requests_per_stream.max(1)));
    if let Some(rate) = p.rate.filter(|r| *r > 0.0 && r.is_finite()) {
        plan.rate = Some(rate);
        plan.arrival = crate::load::Arrival::Constant;
        plan.requests = Some(u64::from(p.concurrency));
        let schedule = f64::from(p.concurrency) / rate;
        plan.saturation_window = Some(Duration::from_secs_f64(schedule / 2.0));
    }
    plan.prompt_tokens = p.prompt_tokens;
    plan.max_tokens = p.max_tokens;
    // Fixed output lengths where the engine takes `ignore_eos`; a plain OpenAI
    // gateway may reject unknown fields.
    plan.ignore_eos = info.ignores_eos();
    plan.tokens_per_word = cfg.tokens_per_word;
    plan.agent_mix = cfg.agent_mix.as_ref().map(|m| Arc::new(m.fresh()));
    plan.slo = cfg.slo;
    plan
}

/// A step's verdict and its reasons.
struct StepJudged {
    status: Status,
    why: Vec<String>,
    /// The failure shows load (timeouts, 429/503/504, a preemption storm, an objective
    /// missed); without it, a failure is the server's, not capacity.
    capacity_evidence: bool,
}

impl StepJudged {
    fn fail(&mut self, capacity: bool, why: String) {
        self.status = Status::Fail;
        self.capacity_evidence |= capacity;
        self.why.push(why);
    }

    fn warn(&mut self, why: String) {
        if self.status == Status::Pass {
            self.status = Status::Warn;
        }
        self.why.push(why);
    }
}

/// Only evidence of capacity fails a step on capacity: timeouts and 429/503/504, a
/// preemption storm, the latency objectives. Error answers fail it on the server; a lost
/// connection is a transport finding of its own.
fn judge_step(m: &StepMeasured, cfg: &RampConfig) -> StepJudged {
    let s = &m.result.stats;
    let n = s.requests;
    let mut j = StepJudged {
        status: Status::Pass,
        why: Vec::new(),
        capacity_evidence: false,
    };
    let capacity_errors = s.errors_of(ErrorClass::Capacity);
    if capacity_errors > 0 {
        j.fail(
            true,
            format!("{capacity_errors} of {n} requests failed under load (timeouts, 429/503/504)"),
        );
    }
    let server_errors = s.errors_of(ErrorClass::Server);
    if server_errors > 0 {
        j.fail(
            false,
            format!("{server_errors} of {n} requests got an error answer or a malformed stream"),
        );
    }
    if let Some(sat) = &m.result.saturation {
        j.fail(true, sat.text());
    }
    let transport_errors = s.errors_of(ErrorClass::Transport);
    if transport_errors > 0 {
        j.warn(format!(
            "{transport_errors} of {n} requests lost to the connection (not capacity)"
        ));
    }
    if let Some(pre) = m.preemptions.filter(|v| *v > 0.0) {
        if pre >= n as f64 {
            j.fail(
                true,
                format!("preemption storm: {pre:.0} preemptions for {n} requests"),
            );
        } else if j.status == Status::Pass {
            j.warn(format!("{pre:.0} preemptions"));
        }
    }
    for m in cfg
        .objectives
        .missed(&s.ttft_ms(), &s.itl_ms(), &s.e2e_ms())
    {
        let d = m.digits;
        j.fail(
            true,
            format!(
                "{} p95 {:.d$} ms above the SLO {:.d$} ms",
                m.name, m.p95, m.limit
            ),
        );
    }
    j
}

/// One objective a step missed: its name, the step's p95, the objective, and the digits
/// it is written with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Missed {
    /// `TTFT`, `E2E` or `ITL`.
    pub name: &'static str,
    /// The step's p95 (ms).
    pub p95: f64,
    /// The objective (ms, `--slo-*`).
    pub limit: f64,
    /// Decimals the figures are written with (1 for ITL, else 0).
    pub digits: usize,
}

impl Objectives {
    /// The objectives missed, in the order TTFT, E2E, ITL; a latency with no samples
    /// misses nothing.
    pub fn missed(&self, ttft: &Percentiles, itl: &Percentiles, e2e: &Percentiles) -> Vec<Missed> {
        [
            ("TTFT", self.ttft_p95_ms, ttft, 0),
            ("E2E", self.e2e_p95_ms, e2e, 0),
            ("ITL", self.itl_p95_ms, itl, 1),
        ]
        .into_iter()
        .filter_map(|(name, limit, p, digits)| {
            let limit = limit.filter(|l| p.count > 0 && p.p95 > *l)?;
            Some(Missed {
                name,
                p95: p.p95,
                limit,
                digits,
            })
        })
        .collect()
    }
}

fn step_record(p: &StepPlan, m: &StepMeasured, status: Status) -> RampStep {
    let s = &m.result.stats;
    RampStep {
        label: p.label.clone(),
        concurrency: p.concurrency,
        rate: p.rate,
        client_limited: false,
        prompt_tokens: p.prompt_tokens,
        max_tokens: p.max_tokens,
        requests: s.requests,
        errors: s.errors,
        errors_by_kind: s.errors_by_kind.clone(),
        errors_by_class: s.errors_by_class.clone(),
        reconnects: s.reconnects,
        ttft_ms: s.ttft_ms(),
        itl_ms: s.itl_ms(),
        tpot_ms: s.tpot_ms(),
        e2e_ms: s.e2e_ms(),
        kv_cache_usage: m.peaks.kv_usage_max,
        waiting_max: m.peaks.waiting_max,
        running_max: m.peaks.running_max,
        preemptions: m.preemptions,
        gpu_memory_used_mib: m.peaks.gpu_memory_used_mib_max,
        last_success_at: s.last_success_at,
        status: Some(status),
        stream_gap_ms: s.stream_gap_ms(),
        tool_call_gap_max_ms: s.tool_call_gap_max_ms(),
        first_tool_call_ms: s.first_tool_call_ms(),
        agent: m.agent.clone(),
        goodput: s.goodput(goodput_span(p, m)),
        saturation: m.result.saturation,
    }
}

/// The time a step's goodput is counted over: its whole run; for a rate step, the schedule
/// of the requests it sent (they arrive over it, and a server that holds the rate finishes
/// them as fast: the last ones' drain would otherwise dilute the rate it held).
fn goodput_span(p: &StepPlan, m: &StepMeasured) -> Duration {
    let elapsed = m.result.elapsed;
    match p.rate.filter(|r| *r > 0.0) {
        Some(rate) => {
            let sent = m.result.stats.requests as f64;
            elapsed.min(Duration::from_secs_f64(sent / rate))
        }
        None => elapsed,
    }
}

fn step_check(
    node: &Node,
    model: &str,
    p: &StepPlan,
    m: &StepMeasured,
    step: &RampStep,
    judged: &StepJudged,
) -> Check {
    let s = &m.result.stats;
    let mut c = Check::new(
        step_id(p),
        Stage::Ramp,
        judged.status,
        step_case(p, s.requests),
    );
    c.url = Some(node.client.base_url.clone());
    c.duration_ms = m.result.elapsed.as_millis() as u64;
    c.request = Some(json!({
        "endpoint": "/v1/chat/completions", "model": model, "concurrency": p.concurrency,
        "prompt_tokens": p.prompt_tokens, "max_tokens": p.max_tokens, "stream": true, "ignore_eos": true,
        "requests": s.requests,
    }));
    if let (Some(rate), Some(r)) = (p.rate, c.request.as_mut()) {
        r["rate"] = json!(rate);
        r["arrival"] = json!("constant");
    }
    let why = &judged.why;
    let offered = p
        .rate
        .map(|r| format!(" ({} offered)", rate_text(r)))
        .unwrap_or_default();
    c.measurement = format!(
        "TTFT p50 {:.0} ms p95 {:.0} ms, ITL p95 {:.1} ms, E2E p95 {:.0} ms, {:.2} req/s{offered}, errors {}{}{}{}",
        step.ttft_ms.p50,
        step.ttft_ms.p95,
        step.itl_ms.p95,
        step.e2e_ms.p95,
        m.result.request_rate(),
        s.errors,
        step.kv_cache_usage.map(|v| format!(", KV {:.0}%", v * 100.0)).unwrap_or_default(),
        step.waiting_max.map(|v| format!(", waiting max {v:.0}")).unwrap_or_default(),
        if why.is_empty() { String::new() } else { format!("; {}", why.join("; ")) }
    );
    if let Some(a) = &step.agent {
        c.measurement
            .push_str(&format!(", agent conformance {}", a.rate_text()));
    }
    if let Some(g) = &step.goodput {
        c.measurement.push_str(&format!(", {}", g.text()));
    }
    c.evidence = s
        .error_examples
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join("\n");
    c.data = serde_json::to_value(step).unwrap_or_default();
    c
}

/// What a step sends, in words (a check's test case).
fn step_case(p: &StepPlan, requests: u64) -> String {
    let load = match p.rate {
        Some(r) => format!(
            "{} req/s offered (open loop, at most {} in flight)",
            rate_text(r),
            p.concurrency
        ),
        None => format!("{} in parallel", p.concurrency),
    };
    format!(
        "{}: {requests} requests, {load}, prompt ~{} tokens, output limit {}",
        p.label, p.prompt_tokens, p.max_tokens
    )
}

/// What a failed step's record is made of.
struct Failure<'a> {
    m: &'a StepMeasured,
    judged: &'a StepJudged,
    earlier: &'a [RampStep],
    step: &'a RampStep,
}

/// A failed step: error answers without load are the server's; a failure with load is
/// capacity at the expected load, a limit beyond it, with the runbook's OOM record.
fn mark_failure(
    c: &mut Check,
    p: &StepPlan,
    info: &ServerInfo,
    cfg: &RampConfig,
    failure: &Failure<'_>,
) {
    let Failure {
        m,
        judged,
        earlier,
        step,
    } = *failure;
    c.owner = Some(Owner::Server);
    if !judged.capacity_evidence {
        // Error answers without any sign of load: the server or its parser is wrong,
        // and more GPUs would not help.
        c.impact = Impact::Info;
        c.next_step = "error answers, not capacity: read the server log for the failing requests (golive triage)".into();
        return;
    }
    let (beyond_expected, next_step) = failure_next_step(p, cfg);
    c.impact = if beyond_expected {
        Impact::Limit
    } else {
        Impact::Capacity
    };
    c.next_step = next_step.into();
    let history: Vec<_> = earlier
        .iter()
        .chain(std::iter::once(step))
        .map(|st| {
            json!({
                "label": st.label, "kv_cache_usage": st.kv_cache_usage,
                "gpu_memory_used_mib": st.gpu_memory_used_mib, "waiting_max": st.waiting_max,
                "preemptions": st.preemptions,
            })
        })
        .collect();
    let last_success = m.result.stats.last_success_at;
    c.data["boundary"] = json!({
        "step": p.label,
        "concurrency": p.concurrency,
        "rate": p.rate,
        "input_tokens": p.prompt_tokens,
        "output_limit": p.max_tokens,
        "context": p.context,
        "max_model_len": info.max_model_len,
        "cache_settings": info.cache_settings,
        "prefix_cache_flag": info.prefix_cache_flag,
        "last_success_at": last_success.or_else(|| earlier.iter().rev().find_map(|x| x.last_success_at)),
        "waiting_max": m.peaks.waiting_max,
        "running_max": m.peaks.running_max,
        "preemptions": m.preemptions,
        "over_steps": history,
        "beyond_expected_load": beyond_expected,
    });
}

/// Whether a step failing on load is beyond the expected load, and what to do. A rate step
/// is a probe of the boundary search above a rate that held: it finds the limit and never
/// changes the verdict (the ramp step the search started from said whether the expected
/// load holds).
fn failure_next_step(p: &StepPlan, cfg: &RampConfig) -> (bool, &'static str) {
    if p.rate.is_some() {
        return (true, "the boundary search's probe: the server does not hold this offered rate (ramp_boundary has the bracket)");
    }
    if p.concurrency > cfg.expected_concurrency || p.context > cfg.expected_context {
        (
            true,
            "beyond the expected load: record this step as the deployment's limit",
        )
    } else {
        (false, "fails at the expected load: more GPUs, other parallelism, or lower max-model-len / max-num-seqs")
    }
}

/// An open loop that fell behind its schedule: a warning of the client's, neither a hold nor
/// a failure of the server (the capacity answer leaves it out).
fn mark_client_limited(c: &mut Check, step: &mut RampStep, lateness: &Percentiles) {
    step.client_limited = true;
    step.status = Some(Status::Warn);
    c.status = Status::Warn;
    c.impact = Impact::Info;
    c.owner = None;
    c.measurement.push_str(&format!(
        "; golive could not keep the schedule (lateness p95 {:.0} ms): the step says what the client sent, not what the server can take",
        lateness.p95
    ));
    c.next_step = "run golive where it has CPU to spare (or from several machines, golive load --shard) to measure this rate".into();
    c.data = serde_json::to_value(&*step).unwrap_or_default();
}

/// The steps after the boundary, listed as not run.
fn not_run(rest: &[StepPlan], boundary: &str) -> Vec<Check> {
    rest.iter()
        .map(|p| {
            let mut c = Check::new(
                step_id(p),
                Stage::Ramp,
                Status::Skip,
                format!("{}: not run", p.label),
            );
            c.measurement = format!("not run: the ramp stopped at its boundary, {boundary}");
            c
        })
        .collect()
}

/// Accepted: the highest level (within the expected load) whose steps all ran and passed,
/// with every lower level passing too; and its short step's request rate.
fn accepted(
    level_ok: &BTreeMap<u32, (bool, Option<f64>)>,
    plans: &[StepPlan],
    steps: &[RampStep],
    cfg: &RampConfig,
) -> (Option<u32>, Option<f64>) {
    let mut found = (None, None);
    for (c, (ok, rate)) in level_ok {
        if !ok {
            break;
        }
        let level_steps = plans.iter().filter(|p| p.concurrency == *c).count();
        let ran = steps
            .iter()
            .filter(|s| s.concurrency == *c && s.rate.is_none() && repeat_of(&s.label).is_none())
            .count();
        if ran == level_steps && *c <= cfg.expected_concurrency {
            found = (Some(*c), *rate);
        }
    }
    found
}

/// Connections lost over the whole ramp: one finding of their own, never capacity.
#[derive(Default)]
struct TransportTally {
    requests: u64,
    errors: u64,
    reconnects: u64,
    by_kind: std::collections::BTreeMap<String, u64>,
    examples: Vec<String>,
}

impl TransportTally {
    fn add(&mut self, s: &crate::client::LatencyStats) {
        self.requests += s.requests;
        self.errors += s.errors_of(ErrorClass::Transport);
        self.reconnects += s.reconnects;
        for kind in [ErrorKind::Connect, ErrorKind::EarlyClose] {
            if let Some(n) = s.errors_by_kind.get(kind.as_str()) {
                *self.by_kind.entry(kind.as_str().to_string()).or_default() += n;
            }
            if let Some(e) = s.error_examples.get(kind.as_str()) {
                if self.examples.len() < 4 {
                    self.examples.push(format!("{}: {e}", kind.as_str()));
                }
            }
        }
    }

    /// `transport`: warn when requests were lost to the connection; pass with the count
    /// when golive only had to reconnect; none when neither happened.
    fn check(&self, url: &str) -> Option<Check> {
        if self.errors == 0 && self.reconnects == 0 {
            return None;
        }
        let status = if self.errors > 0 {
            Status::Warn
        } else {
            Status::Pass
        };
        let mut c = Check::new(
            CheckId::Transport,
            Stage::Ramp,
            status,
            "every ramp request reaches the server over a working connection",
        );
        c.url = Some(url.to_string());
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        c.measurement = format!(
            "{} of {} requests lost to the connection{}; {} sent again on a fresh connection after a keep-alive race",
            self.errors,
            self.requests,
            if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) },
            self.reconnects
        );
        c.evidence = self.examples.join("\n");
        c.data = json!({
            "requests": self.requests, "errors": self.errors, "reconnects": self.reconnects,
            "errors_by_kind": self.by_kind,
        });
        c.impact = Impact::Info;
        if self.errors > 0 {
            c.owner = Some(Owner::Gateway);
            c.next_step = "connections closed or refused, not capacity: compare the idle/keep-alive timeouts of server, gateway and load balancer, and look for restarts".into();
        }
        Some(c)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A ramp up to 16 in flight and 8192 tokens of context.
    pub(super) fn config() -> RampConfig {
        RampConfig {
            concurrency: 16,
            expected_concurrency: 16,
            max_context: 8192,
            expected_context: 8192,
            output_tokens: 64,
            short_prompt: 128,
            requests_per_stream: 2,
            tokens_per_word: 1.0,
            objectives: Objectives::default(),
            slo: None,
            agent_mix: None,
            boundary_budget: Duration::ZERO,
            target: None,
            repeat: 1,
            boundary_by: BoundaryBy::Concurrency,
        }
    }

    #[test]
    fn a_rate_is_written_in_three_significant_digits() {
        let texts: Vec<String> = [0.6234, 0.62, 0.058, 12.5, 140.0, 1.0, 9.996]
            .into_iter()
            .map(rate_text)
            .collect();
        assert_eq!(texts, ["0.623", "0.62", "0.058", "12.5", "140", "1", "10"]);
    }

    #[test]
    fn steps_start_with_the_runbook_four_and_end_at_the_maxima() {
        let cfg = config();
        let steps = plan_steps(&cfg);
        let conc: Vec<u32> = steps.iter().map(|s| s.concurrency).collect();
        assert_eq!(conc, vec![1, 1, 2, 2, 4, 4, 8, 8, 16, 16]);
        assert!(steps[0].label.contains("short") && steps[1].label.contains("long"));
        assert_eq!(steps.last().unwrap().context, 8192);
        // The long context doubles with the level.
        let longs: Vec<u32> = steps.iter().skip(1).step_by(2).map(|s| s.context).collect();
        assert_eq!(longs, vec![512, 1024, 2048, 4096, 8192]);
        let odd = plan_steps(&RampConfig {
            concurrency: 6,
            ..cfg.clone()
        });
        assert_eq!(odd.last().unwrap().concurrency, 6);
        let one = plan_steps(&RampConfig {
            concurrency: 1,
            ..cfg
        });
        assert_eq!(one.len(), 2);
    }
}
