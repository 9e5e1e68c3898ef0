//! Stage `soak`: `--duration` of steady load at the accepted concurrency (open loop at
//! a steady request rate when the ramp measured one). Samples queue, KV cache, cache
//! hit ratio and errors over time; fails on a growing queue or errors.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::engine::{self, first_delta, first_max, first_sum, EngineMetrics, ServerInfo};
use super::plan::AcceptPlan;
use super::silence::GapRow;
use super::stage::{StageCtx, StageResult};
use super::Node;
use crate::agent::mix::AgentMix;
use crate::client::{ErrorClass, LatencyStats, Slo};
use crate::load::{run_load, LoadCounters, LoadPlan, LoadResult};
use crate::metrics::MetricsSnapshot;
use crate::report::{
    AgentConformance, Baseline, Check, CheckId, Impact, Owner, SoakSample, Stage, Status,
};

/// Error share above which the soak fails.
pub const MAX_ERROR_RATE: f64 = 0.01;

/// What the soak found.
pub struct SoakOutcome {
    /// The `soak` check.
    pub check: Check,
    /// Metrics samples over the soak (requests finished, queue, KV usage).
    pub samples: Vec<SoakSample>,
    /// Latencies, errors and tokens of the soak's requests.
    pub stats: LatencyStats,
    /// Requests recorded per wall second (req/s).
    pub request_rate: f64,
    /// Prefix-cache hit share (0..1) from the server's counters, else from the answers' cached
    /// tokens; `None` when neither says.
    pub cache_hit_ratio: Option<f64>,
    /// The agent cases mixed into the soak (`--agent-mix`).
    pub agent: Option<AgentConformance>,
}

/// The stage as `accept` runs it, on the first node: at the ramp's accepted concurrency (else
/// the expected one), at 80% of the rate the ramp sustained there, so that a growing queue
/// means trouble.
pub(super) async fn stage(plan: &AcceptPlan<'_>, ctx: &StageCtx<'_>) -> StageResult {
    let args = plan.args;
    let fallback = (plan.expected_concurrency.min(args.concurrency), None);
    let (conc, rate) = ctx.carried(|c| c.accepted).unwrap_or(fallback);
    let rate = rate.map(|r| r * 0.8).filter(|r| *r > 0.0);
    let load = SoakLoad {
        duration: args.duration,
        concurrency: conc,
        rate,
        prompt_tokens: args.short_prompt,
        output_tokens: args.output_tokens,
        tokens_per_word: plan.tokens_per_word,
        agent_mix: plan.agent_mix.as_ref().map(|m| Arc::new(m.fresh())),
        slo: args.slo(),
    };
    let o = run(plan.node(), plan.info(), &plan.model, &load).await;
    let mut result = StageResult {
        baseline: baseline(&o, conc),
        ..StageResult::default()
    };
    result.carry.soak_gaps = Some(GapRow::from_stats(Stage::Soak, "soak", &o.stats));
    result.carry.soak_agent = o.agent.map(|a| (conc, a));
    result.measurements.soak = o.samples;
    result.checks.push(o.check);
    result
}

/// The soak's part of the baseline: its latencies, error share and rate when it completed
/// requests, its peaks, and its concurrency as accepted when it did not fail.
fn baseline(o: &SoakOutcome, concurrency: u32) -> Baseline {
    let mut b = Baseline {
        cache_hit_ratio: o.cache_hit_ratio,
        kv_cache_usage_max: o
            .samples
            .iter()
            .filter_map(|s| s.kv_cache_usage)
            .reduce(f64::max),
        waiting_max: o.samples.iter().filter_map(|s| s.waiting).reduce(f64::max),
        accepted_concurrency: (o.check.status != Status::Fail).then_some(concurrency),
        ..Baseline::default()
    };
    if o.stats.requests > 0 {
        b.ttft_p50_ms = Some(o.stats.ttft_ms().p50);
        b.ttft_p95_ms = Some(o.stats.ttft_ms().p95);
        b.itl_p95_ms = Some(o.stats.itl_ms().p95);
        b.error_rate = Some(o.stats.error_rate());
        b.request_rate_rps = Some(o.request_rate);
    }
    b
}

/// The soak's load.
pub struct SoakLoad {
    /// How long the soak runs (`--duration`).
    pub duration: Duration,
    /// Requests in flight (closed loop); with a `rate`, at most 4 times this many.
    pub concurrency: u32,
    /// Open loop at this request rate; `None`: closed loop at `concurrency`.
    pub rate: Option<f64>,
    /// Prompt length (tokens); three quarters of it is a prefix all requests share.
    pub prompt_tokens: u32,
    /// Output limit of each request.
    pub output_tokens: u32,
    /// Server tokens per prompt word.
    pub tokens_per_word: f64,
    /// Agent cases mixed into the load.
    pub agent_mix: Option<Arc<AgentMix>>,
    /// Per-request objectives goodput counts against.
    pub slo: Option<Slo>,
}

/// Runs the soak: the load with its samples, then the judgement.
pub async fn run(node: &Node, info: &ServerInfo, model: &str, load: &SoakLoad) -> SoakOutcome {
    let plan = Arc::new(soak_plan(model, info, load));
    let m = measure(node, info, &plan, load.duration).await;
    let stats = &m.result.stats;
    let cache_hit_ratio = m.hit_ratio.or_else(|| {
        (stats.prompt_tokens > 0).then(|| stats.cached_tokens as f64 / stats.prompt_tokens as f64)
    });
    let agent = plan.agent_mix.as_ref().map(|m| m.conformance());
    let sent = stats.requests + agent.as_ref().map_or(0, |a| a.requests);
    let queue = Queue::of(&m.samples, &m.in_flight, load.concurrency, sent);
    let kv: Vec<f64> = m.samples.iter().filter_map(|s| s.kv_cache_usage).collect();
    let kv_growth = (kv.len() >= 3).then(|| kv[kv.len() - 1] - kv[0]);
    let mut c = soak_check(node, model, load, &plan, &m.result);
    let mut capacity_evidence = judge(&mut c, stats, &queue, agent.as_ref());
    if let Some(sat) = &m.result.saturation {
        c.status = Status::Fail;
        capacity_evidence = true;
        c.measurement
            .push_str(&format!("; stopped early, {}", sat.text()));
    }
    let request_rate = m.result.request_rate();
    c.measurement = format!(
        "{} requests, {:.2} req/s, error rate {:.2}%, TTFT p95 {:.0} ms, ITL p95 {:.1} ms, queue {:.1} -> {:.1}{}{}{}",
        stats.requests,
        request_rate,
        stats.error_rate() * 100.0,
        stats.ttft_ms().p95,
        stats.itl_ms().p95,
        queue.first,
        queue.last,
        cache_hit_ratio.map(|r| format!(", cache hit ratio {:.0}%", r * 100.0)).unwrap_or_default(),
        kv_growth.map(|g| format!(", KV change {:+.0} points", g * 100.0)).unwrap_or_default(),
        c.measurement,
    );
    if let Some(a) = &agent {
        c.measurement
            .push_str(&format!(", agent conformance {}", a.rate_text()));
    }
    let goodput = stats.goodput(m.result.elapsed);
    if let Some(g) = &goodput {
        c.measurement.push_str(&format!(", {}", g.text()));
    }
    c.data = json!({
        "requests": stats.requests, "errors": stats.errors, "errors_by_kind": stats.errors_by_kind,
        "errors_by_class": stats.errors_by_class, "reconnects": stats.reconnects,
        "request_rate": request_rate, "queue_first_third": queue.first, "queue_last_third": queue.last,
        "cache_hit_ratio": cache_hit_ratio, "kv_growth": kv_growth,
        "ttft_ms": stats.ttft_ms(), "itl_ms": stats.itl_ms(), "e2e_ms": stats.e2e_ms(),
        "stream_gap_ms": stats.stream_gap_ms(), "tool_call_gap_max_ms": stats.tool_call_gap_max_ms(),
        "first_tool_call_ms": stats.first_tool_call_ms(),
        "agent": agent,
        "saturation": m.result.saturation,
    });
    if let Some(g) = goodput {
        c.data["goodput"] = json!(g);
    }
    self_check(&mut c, &plan, &m.result);
    owner(&mut c, capacity_evidence);
    SoakOutcome {
        check: c,
        samples: m.samples,
        stats: stats.clone(),
        request_rate,
        cache_hit_ratio,
        agent,
    }
}

fn soak_plan(model: &str, info: &ServerInfo, load: &SoakLoad) -> LoadPlan {
    let mut plan = LoadPlan::new(model);
    plan.concurrency = load.concurrency.max(1);
    plan.rate = load.rate;
    if load.rate.is_some() {
        // Room for a queue to build up, so growth is visible rather than capped.
        plan.concurrency = load.concurrency.max(1) * 4;
    }
    plan.requests = None;
    plan.duration = Some(load.duration);
    plan.prompt_tokens = load.prompt_tokens.max(16);
    // Shared-prefix traffic, as agents send: the cache hit ratio becomes the baseline.
    plan.shared_prefix_tokens = load.prompt_tokens * 3 / 4;
    plan.max_tokens = load.output_tokens;
    // Fixed output lengths where the engine takes `ignore_eos` (not plain OpenAI gateways).
    plan.ignore_eos = info.ignores_eos();
    plan.keep_records = true;
    plan.tokens_per_word = load.tokens_per_word;
    plan.agent_mix = load.agent_mix.clone();
    plan.slo = load.slo;
    // An open loop the server cannot take stops early, over a third of the soak.
    plan.saturation_window = load
        .rate
        .map(|_| (load.duration / 3).clamp(Duration::from_secs(5), Duration::from_secs(60)));
    plan
}

/// The load and what was sampled while it ran.
struct SoakMeasured {
    result: LoadResult,
    /// One sample per interval (a twelfth of the soak, at least a second).
    samples: Vec<SoakSample>,
    /// The client's requests in flight at each sample.
    in_flight: Vec<f64>,
    /// The server's prefix-cache hit ratio over the whole soak, from its counters.
    hit_ratio: Option<f64>,
}

async fn measure(
    node: &Node,
    info: &ServerInfo,
    plan: &Arc<LoadPlan>,
    duration: Duration,
) -> SoakMeasured {
    let names = info.names();
    let metrics_url = engine::metrics_url(&node.client.base_url, info);
    let scrape = || engine::scrape_at(&node.client.http, metrics_url.as_deref());
    let counters = Arc::new(LoadCounters::default());
    let interval = (duration / 12).max(Duration::from_secs(1));
    let first = scrape().await;
    let started = Instant::now();
    let tracker = node.events.load_started("soak", None);
    let load = run_load(
        node.client.clone(),
        plan.clone(),
        counters.clone(),
        Some(tracker.on_record()),
    );
    let mut samples: Vec<SoakSample> = Vec::new();
    let mut in_flight: Vec<f64> = Vec::new();
    let sampler = async {
        let mut prev = first.clone();
        loop {
            tokio::time::sleep(interval).await;
            let snap = scrape().await;
            in_flight.push(counters.in_flight.load(Ordering::Relaxed) as f64);
            samples.push(sample(&counters, started, &prev, &snap, &names));
            if snap.is_some() {
                prev = snap;
            }
        }
    };
    let result = tokio::select! {
        r = load => r,
        _ = sampler => unreachable!("the sampler never ends"),
    };
    tracker.finish();
    let last = scrape().await;
    ttft_per_interval(&mut samples, &result, node.client.micros(started));
    SoakMeasured {
        hit_ratio: hit_ratio(&first, &last, &names),
        result,
        samples,
        in_flight,
    }
}

/// One interval's sample: the client's counters and the server's gauges.
fn sample(
    counters: &LoadCounters,
    started: Instant,
    prev: &Option<MetricsSnapshot>,
    snap: &Option<MetricsSnapshot>,
    names: &EngineMetrics,
) -> SoakSample {
    SoakSample {
        t_s: started.elapsed().as_secs_f64(),
        requests_done: counters.done.load(Ordering::Relaxed),
        errors: counters.errors.load(Ordering::Relaxed),
        running: snap.as_ref().and_then(|s| first_sum(s, names.running)),
        waiting: snap.as_ref().and_then(|s| first_sum(s, names.waiting)),
        kv_cache_usage: snap.as_ref().and_then(|s| first_max(s, names.kv_usage)),
        cache_hit_ratio: hit_ratio(prev, snap, names),
        ttft_p95_ms: None,
    }
}

/// The prefix-cache hit ratio between two scrapes: hits over lookups (llama.cpp: over
/// computed plus cached prompt tokens).
fn hit_ratio(
    a: &Option<MetricsSnapshot>,
    b: &Option<MetricsSnapshot>,
    names: &EngineMetrics,
) -> Option<f64> {
    let (a, b) = (a.as_ref()?, b.as_ref()?);
    let hits = first_delta(a, b, names.cache_hits);
    let lookups = first_delta(a, b, names.cache_queries)
        .or_else(|| Some(first_delta(a, b, names.prompt_tokens)? + hits?));
    match (hits, lookups) {
        (Some(h), Some(q)) if q > 0.0 => Some(h / q),
        _ => None,
    }
}

/// TTFT p95 per interval, from the kept records (`epoch`: the soak's start in the client's
/// clock).
fn ttft_per_interval(samples: &mut [SoakSample], result: &LoadResult, epoch: u64) {
    let mut prev_t = 0.0;
    for s in samples {
        let mut h = crate::client::new_histogram();
        for r in &result.records {
            let end_s = r.end_us.saturating_sub(epoch) as f64 / 1e6;
            if r.ok() && end_s > prev_t && end_s <= s.t_s {
                if let Some(t) = r.ttft_us() {
                    h.saturating_record(t.max(1));
                }
            }
        }
        if !h.is_empty() {
            s.ttft_p95_ms = Some(h.value_at_quantile(0.95) as f64 / 1000.0);
        }
        prev_t = s.t_s;
    }
}

/// Queue growth: the server's waiting queue (else the client's in-flight count), last third
/// against the first third. A queue longer than every request the soak sent holds other
/// clients' requests (a shared server): it says nothing about the soak's own load.
struct Queue {
    first: f64,
    last: f64,
    grows: bool,
}

impl Queue {
    fn of(samples: &[SoakSample], in_flight: &[f64], concurrency: u32, sent: u64) -> Self {
        let queue: Vec<f64> = if samples.iter().all(|s| s.waiting.is_some()) && !samples.is_empty()
        {
            samples.iter().filter_map(|s| s.waiting).collect()
        } else {
            in_flight.to_vec()
        };
        let third = (queue.len() / 3).max(1);
        let mean = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        let (first, last) = if queue.len() >= 3 {
            (mean(&queue[..third]), mean(&queue[queue.len() - third..]))
        } else {
            (0.0, 0.0)
        };
        let grows = queue.len() >= 3
            && last > 2.0 * first + 2.0
            && last >= f64::from(concurrency.max(1)) * 0.5
            && last <= sent as f64;
        Queue { first, last, grows }
    }
}

fn soak_check(
    node: &Node,
    model: &str,
    load: &SoakLoad,
    plan: &LoadPlan,
    result: &LoadResult,
) -> Check {
    let mut c = Check::new(
        CheckId::Soak,
        Stage::Soak,
        Status::Pass,
        format!(
            "{} of steady load at concurrency {}{}: no errors, no growing queue",
            humantime::format_duration(Duration::from_secs(load.duration.as_secs())),
            load.concurrency,
            load.rate
                .map(|r| format!(", {r:.2} req/s"))
                .unwrap_or_default()
        ),
    );
    c.url = Some(node.client.base_url.clone());
    c.duration_ms = result.elapsed.as_millis() as u64;
    c.request = Some(json!({
        "endpoint": "/v1/chat/completions", "model": model, "concurrency": load.concurrency, "rate": load.rate,
        "prompt_tokens": plan.prompt_tokens, "shared_prefix_tokens": plan.shared_prefix_tokens,
        "max_tokens": plan.max_tokens, "stream": true,
    }));
    c.evidence = result
        .stats
        .error_examples
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join("\n");
    c
}

/// The soak's status, with its reasons in `c.measurement` ("; why" or empty); whether the
/// failure shows load. Only capacity errors (timeouts, 429/503/504) count against the
/// sustainable load; error answers are the server's, lost connections the transport's (a
/// warning).
fn judge(
    c: &mut Check,
    stats: &LatencyStats,
    queue: &Queue,
    agent: Option<&AgentConformance>,
) -> bool {
    let mut why = Vec::new();
    let agent_requests = agent.map_or(0, |a| a.requests);
    if stats.requests == 0 && agent_requests > 0 {
        // A soak too short for its rate: every request it sent was an agent case.
        c.status = Status::Warn;
        why.push(
            "only agent requests were sent: no plain request measured (a longer --duration)"
                .to_string(),
        );
    } else if stats.requests == 0 {
        c.status = Status::Fail;
        why.push("no request completed".to_string());
    }
    let rate_of = |n: u64| n as f64 / stats.requests.max(1) as f64;
    let capacity_errors = stats.errors_of(ErrorClass::Capacity);
    let server_errors = stats.errors_of(ErrorClass::Server);
    let transport_errors = stats.errors_of(ErrorClass::Transport);
    let mut capacity_evidence = false;
    if rate_of(capacity_errors) > MAX_ERROR_RATE {
        c.status = Status::Fail;
        capacity_evidence = true;
        why.push(format!(
            "capacity error rate {:.1}% ({} of {}: timeouts, 429/503/504)",
            rate_of(capacity_errors) * 100.0,
            capacity_errors,
            stats.requests
        ));
    }
    if rate_of(server_errors) > MAX_ERROR_RATE {
        c.status = Status::Fail;
        why.push(format!(
            "{server_errors} of {} requests got an error answer or a malformed stream",
            stats.requests
        ));
    }
    if stats.errors > 0 && c.status == Status::Pass {
        c.status = Status::Warn;
        why.push(format!(
            "{} errors ({} lost to the connection)",
            stats.errors, transport_errors
        ));
    }
    if queue.grows {
        c.status = Status::Fail;
        capacity_evidence = true;
        why.push(format!(
            "queue grows at a steady rate: {:.1} -> {:.1}",
            queue.first, queue.last
        ));
    }
    c.measurement = if why.is_empty() {
        String::new()
    } else {
        format!("; {}", why.join("; "))
    };
    capacity_evidence
}

/// The client's self-check of an open-loop soak: how late it started requests against the
/// schedule and its CPU share; a soak the client could not keep on schedule says so.
fn self_check(c: &mut Check, plan: &LoadPlan, result: &LoadResult) {
    if plan.rate.is_none() {
        return;
    }
    let lateness = result.stats.schedule_lateness_ms();
    // A soak that failed on the server (a growing queue fills golive's in-flight cap, and the
    // schedule slips behind it) is the server's, not the client's.
    let limited = c.status != Status::Fail && crate::load::client_limited(plan.rate, &lateness);
    c.data["schedule_lateness_ms"] = json!(lateness);
    c.data["client_cpu_share"] = json!(result.client_cpu_share());
    c.data["client_limited"] = json!(limited);
    if limited {
        c.measurement.push_str(&format!(
            "; client-limited: requests started up to {:.0} ms late (p95), the rate is the client's",
            lateness.p95
        ));
    }
}

/// Who acts on a failed soak: the server for error answers without load, else capacity.
fn owner(c: &mut Check, capacity_evidence: bool) {
    if c.status != Status::Fail {
        return;
    }
    c.owner = Some(Owner::Server);
    if capacity_evidence {
        c.impact = Impact::Capacity;
        c.next_step = "the accepted load is not sustainable: lower the load target, or expand (more replicas/GPUs)".into();
    } else {
        c.impact = Impact::Info;
        c.next_step = "error answers, not capacity: read the server log for the failing requests (golive triage)".into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(queue: &[f64]) -> Vec<SoakSample> {
        queue
            .iter()
            .map(|&w| SoakSample {
                waiting: Some(w),
                ..SoakSample::default()
            })
            .collect()
    }

    #[test]
    fn a_queue_grows_only_with_the_soaks_own_requests_behind_it() {
        let samples = waiting(&[0.0, 0.0, 0.0, 3.0, 3.5, 3.25]);
        assert!(Queue::of(&samples, &[], 2, 40).grows);
        // One request sent: the 3 waiting are another client's on a shared server.
        assert!(!Queue::of(&samples, &[], 2, 1).grows);
    }
}
