//! `golive load`: the ramp's load generator on its own, as users run `vllm bench serve`:
//! fixed concurrency or a fixed request rate, prompt and output lengths, an optional
//! shared prefix; results as text, JSON and per-request CSV.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::{Api, LatencyStats, OnRecord, OpenAiClient, RequestRecord, RequestSpec};
use crate::events::Events;
use crate::target::Target;

mod arrival;
mod k8s;
pub(crate) mod saturation;
pub(crate) mod shard;

pub use arrival::{Arrival, RateRamp, Schedule};
pub use k8s::{
    job_yaml as k8s_job_yaml, JobOptions as K8sJobOptions, API_KEY_SECRET, API_KEY_SECRET_KEY,
};
pub use saturation::Saturation;
pub use shard::{
    merge as merge_shards, EncodedHistograms, MergedLoad, MergedShard, Shard, ShardOutput,
    ShardPlan,
};

mod summary;
pub use summary::{client_limited, write_csv, LoadSummary};

/// What `golive load` runs: the server, the traffic, and how long.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// OpenAI-compatible API server, e.g. http://127.0.0.1:8000
    pub url: String,
    /// Further replicas of the same model: the requests are spread over `url` and these in
    /// turn (round robin by request index), as a load balancer would.
    pub replicas: Vec<String>,
    /// Requests in flight at once (closed loop, default 1); with --rate, the most in
    /// flight (default 1024).
    pub concurrency: Option<u32>,
    /// Requests per second (open loop, evenly spaced) instead of a fixed concurrency.
    pub rate: Option<f64>,
    /// Number of requests (default 100 unless --duration is given).
    pub requests: Option<u64>,
    /// Run for this long instead of a number of requests, e.g. 30s, 5m.
    pub duration: Option<Duration>,
    /// Closed loop: each stream pauses this long between its requests, as a user or an
    /// agent loop does (connections then sit idle in the pool), e.g. 6s.
    pub think_time: Option<Duration>,
    /// Approximate prompt length in tokens.
    pub prompt_tokens: u32,
    /// Output limit (`max_tokens`).
    pub max_tokens: u32,
    /// Tokens of the prompt shared by every request (prefix-cache traffic); 0 = none.
    pub shared_prefix_tokens: u32,
    /// Ask the server to ignore end-of-sequence so every answer has `max_tokens` tokens.
    pub ignore_eos: bool,
    /// Do not calibrate prompt lengths with a first one-token request (prompt lengths
    /// are then counted in words, about one token each).
    pub no_calibrate: bool,
    /// Endpoint: chat or completions.
    pub api: Api,
    /// Keep every request's record in the result (for a per-request CSV).
    pub keep_records: bool,
    /// Credentials, model and timeouts of the server.
    pub target: crate::target::TargetOptions,
    /// Run only this share of the plan (`--shard I/N`); `None` = the whole plan.
    pub shard: Option<Shard>,
    /// Per-request objectives: the summary counts goodput against them (`--goodput`).
    pub slo: Option<crate::client::Slo>,
    /// How requests arrive at `rate` (`--arrival`, `--burstiness`).
    pub arrival: Arrival,
    /// The seed of a random arrival (`--seed`).
    pub seed: u64,
    /// Open loop: stop early on over-saturation, judged over this window
    /// (`--saturation-window`); none: run the whole plan.
    pub saturation_window: Option<Duration>,
    /// Open loop whose rate moves from START to END over SECS (`--rate-ramp`) instead of a
    /// fixed `rate`; the run lasts the ramp unless `duration` or `requests` say otherwise.
    pub rate_ramp: Option<RateRamp>,
}

impl LoadOptions {
    /// How many requests the run sends, when that is known beforehand.
    pub fn planned_requests(&self) -> Option<u64> {
        self.requests
            .or(if self.duration.is_some() || self.rate_ramp.is_some() {
                None
            } else {
                Some(100)
            })
    }

    /// Whether requests start on a schedule (`--rate` or `--rate-ramp`) rather than as
    /// streams free up.
    pub fn open_loop(&self) -> bool {
        self.rate.is_some() || self.rate_ramp.is_some()
    }

    /// How long the run lasts: `--duration`, else a ramp's length.
    fn planned_duration(&self) -> Option<Duration> {
        self.duration.or(self
            .rate_ramp
            .filter(|_| self.requests.is_none())
            .map(|r| Duration::from_secs_f64(r.secs)))
    }
}

/// What to send, how much and how fast.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Endpoint: chat or completions.
    pub api: Api,
    /// The model asked for in every request.
    pub model: String,
    /// Closed loop: streams sending one request after another; open loop: the most in flight.
    pub concurrency: u32,
    /// Open loop: requests per second.
    pub rate: Option<f64>,
    /// Requests of the whole plan; `None`: until `duration` ends (100 without one).
    pub requests: Option<u64>,
    /// Stop starting requests after this long; `None`: when `requests` are sent.
    pub duration: Option<Duration>,
    /// Closed loop: pause of each stream between its requests.
    pub think_time: Option<Duration>,
    /// Prompt length in tokens (turned into words with `tokens_per_word`).
    pub prompt_tokens: u32,
    /// Output limit of each request (`max_tokens`).
    pub max_tokens: u32,
    /// Tokens at the start of every prompt that are the same for all requests of the run.
    pub shared_prefix_tokens: u32,
    /// Sends `ignore_eos`, so every answer runs to `max_tokens`.
    pub ignore_eos: bool,
    /// Keep every request's record (CSV, per-interval statistics).
    pub keep_records: bool,
    /// Makes prompts unique to this run, so an earlier run's cache does not help.
    pub run_tag: String,
    /// Server tokens per prompt word (see [`calibrate_tokens_per_word`]); 1.0 if unknown.
    pub tokens_per_word: f64,
    /// Which share of the request indices this run sends (all of them by default);
    /// `requests` and `rate` stay the whole plan's.
    pub shard: Shard,
    /// Agent cases mixed into the load (`--agent-mix`): the requests it picks are sent
    /// and judged by it instead of the plain prompt, and stay out of the latency stats.
    pub agent_mix: Option<Arc<crate::agent::mix::AgentMix>>,
    /// Per-request objectives the statistics count goodput against.
    pub slo: Option<crate::client::Slo>,
    /// Open loop: how requests arrive at `rate`.
    pub arrival: Arrival,
    /// Open loop: the seed of a random arrival (the same for every shard of a run).
    pub seed: u64,
    /// Open loop: stop early when the requests in flight and the TTFT both rise
    /// significantly over this window ([`Saturation`]); none: never.
    pub saturation_window: Option<Duration>,
    /// Open loop: the rate moves along this ramp (`rate` is then its mean).
    pub rate_ramp: Option<RateRamp>,
}

impl LoadPlan {
    /// A plan of one streamed chat request of 128 prompt tokens and 64 output tokens to `model`.
    pub fn new(model: &str) -> Self {
        LoadPlan {
            api: Api::Chat,
            model: model.to_string(),
            concurrency: 1,
            rate: None,
            requests: Some(1),
            duration: None,
            think_time: None,
            prompt_tokens: 128,
            max_tokens: 64,
            shared_prefix_tokens: 0,
            ignore_eos: false,
            keep_records: false,
            run_tag: run_tag(),
            tokens_per_word: 1.0,
            shard: Shard::WHOLE,
            agent_mix: None,
            slo: None,
            arrival: Arrival::Constant,
            seed: 0,
            saturation_window: None,
            rate_ramp: None,
        }
    }

    /// The open loop's start times: along the ramp, or at the fixed rate. A schedule that
    /// cannot be drawn (a bad burstiness from a library caller) is constant.
    fn schedule(&self, rate: f64) -> anyhow::Result<Schedule> {
        let drawn = |arrival| match self.rate_ramp {
            Some(ramp) => Schedule::ramped(arrival, ramp, self.seed),
            None => Schedule::new(arrival, rate, self.seed),
        };
        drawn(self.arrival).or_else(|_| drawn(Arrival::Constant))
    }

    /// The request with this index (body built once per request).
    pub fn request(&self, index: u64) -> RequestSpec {
        let ratio = if self.tokens_per_word.is_finite() && self.tokens_per_word > 0.0 {
            self.tokens_per_word
        } else {
            1.0
        };
        let words = |tokens: u32| (f64::from(tokens) / ratio).round() as u32;
        let text = prompt_text(
            words(self.prompt_tokens),
            words(self.shared_prefix_tokens),
            &self.run_tag,
            index,
        );
        let mut body = match self.api {
            Api::Chat => serde_json::json!({
                "model": self.model,
                "messages": [{"role": "user", "content": text}],
            }),
            Api::Completions => serde_json::json!({"model": self.model, "prompt": text}),
        };
        body["max_tokens"] = self.max_tokens.into();
        body["temperature"] = 0.into();
        body["stream"] = true.into();
        body["stream_options"] = serde_json::json!({"include_usage": true});
        if self.ignore_eos {
            body["ignore_eos"] = true.into();
        }
        let mut spec = RequestSpec::from_json(self.api, &body, false);
        spec.request_id = Some(format!("golive-{}-{index}", self.run_tag));
        spec
    }
}

/// Tokens per word of [`prompt_text`] on this server, from the `usage.prompt_tokens`
/// of a one-token request with a 400-word prompt (every engine reports usage), so
/// prompt lengths in tokens come out right. `None` when the server does not say.
pub async fn calibrate_tokens_per_word(
    client: &OpenAiClient,
    api: Api,
    model: &str,
) -> Option<f64> {
    const WORDS: u32 = 400;
    let text = prompt_text(WORDS, 0, &run_tag(), 0);
    let words = text.split_whitespace().count() as f64;
    let mut body = match api {
        Api::Chat => {
            serde_json::json!({"model": model, "messages": [{"role": "user", "content": text}]})
        }
        Api::Completions => serde_json::json!({"model": model, "prompt": text}),
    };
    body["max_tokens"] = 1.into();
    body["stream"] = false.into();
    let rec = client
        .send_now(&RequestSpec::from_json(api, &body, false))
        .await;
    let tokens = rec.usage.prompt_tokens? as f64;
    // Clamp: a template or a strange tokenizer must not make prompts absurd.
    Some((tokens / words).clamp(0.5, 4.0))
}

/// A short tag unique to this process and moment.
pub fn run_tag() -> String {
    format!(
        "{:x}{:x}",
        std::process::id(),
        chrono::Utc::now().timestamp_micros() & 0xffff_ffff
    )
}

const WORDS: &[&str] = &[
    "the", "river", "stone", "light", "garden", "window", "paper", "market", "engine", "forest",
    "silver", "morning", "table", "signal", "harbor", "letter", "winter", "bridge", "music",
    "orange", "valley", "mirror", "shadow", "planet", "island", "summer", "thunder", "copper",
    "meadow", "lantern", "circle", "candle", "ocean", "pencil", "basket", "marble", "rocket",
    "tunnel", "castle", "feather", "button", "ladder", "jacket", "pepper", "violet", "cotton",
    "anchor", "meadow", "falcon", "saddle", "timber", "velvet", "wallet", "quartz", "ribbon",
    "canvas", "desert", "glacier", "hammer", "kettle", "lemon", "needle", "puzzle", "sunset",
];

/// About `tokens` tokens of text (one common word ≈ one token): `shared` tokens identical
/// for every request of the run, then a part unique to the request.
pub fn prompt_text(tokens: u32, shared: u32, tag: &str, index: u64) -> String {
    let shared = shared.min(tokens);
    let mut out = String::with_capacity(tokens as usize * 8 + 64);
    if shared > 0 {
        out.push_str(&format!("Context {tag}:"));
        push_words(&mut out, shared.saturating_sub(4), 0x9e37_79b9);
        out.push('\n');
    }
    out.push_str(&format!("Request {tag}-{index}:"));
    let unique = tokens.saturating_sub(shared).saturating_sub(8);
    push_words(
        &mut out,
        unique,
        index.wrapping_mul(0x2545_f491).wrapping_add(1),
    );
    out.push_str("\nContinue the text.");
    out
}

fn push_words(out: &mut String, n: u32, seed: u64) {
    let mut x = seed | 1;
    for _ in 0..n {
        // xorshift: cheap, deterministic word choice
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(' ');
        out.push_str(WORDS[(x % WORDS.len() as u64) as usize]);
    }
}

/// Live counters a caller can sample while the load runs (soak, progress).
#[derive(Debug, Default)]
pub struct LoadCounters {
    /// Requests started.
    pub started: AtomicU64,
    /// Requests finished, failed ones included.
    pub done: AtomicU64,
    /// Requests failed.
    pub errors: AtomicU64,
    /// Requests in flight now.
    pub in_flight: AtomicI64,
}

/// What a load run measured.
#[derive(Debug, Clone)]
pub struct LoadResult {
    /// The statistics of the requests this run sent (agent-mix requests left out).
    pub stats: LatencyStats,
    /// Every request (only with `keep_records`), in completion order per worker.
    pub records: Vec<RequestRecord>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// CPU time golive's process used meanwhile (all its threads), in seconds.
    pub client_cpu_s: f64,
    /// The open loop stopped early: the server was over-saturated.
    pub saturation: Option<saturation::Saturation>,
}

impl LoadResult {
    /// The client's CPU share: CPU seconds per wall second (1.0 is one core busy).
    pub fn client_cpu_share(&self) -> f64 {
        self.client_cpu_s / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Requests recorded per wall second of the run.
    pub fn request_rate(&self) -> f64 {
        self.stats.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs the plan against the client; one worker task per concurrent stream (closed
/// loop), or a scheduler that starts requests at their planned times (open loop).
pub async fn run_load(
    client: Arc<OpenAiClient>,
    plan: Arc<LoadPlan>,
    counters: Arc<LoadCounters>,
    progress: Option<OnRecord>,
) -> LoadResult {
    let started = Instant::now();
    let cpu_before = process_cpu_s();
    let deadline = plan.duration.map(|d| started + d);
    let limit = match (plan.requests, plan.duration) {
        (Some(n), _) => plan.shard.share_of(n),
        (None, Some(_)) => u64::MAX,
        (None, None) => plan.shard.share_of(100),
    };
    let (stats, records, saturation) = if let Some(rate) = plan.rate.filter(|r| *r > 0.0) {
        open_loop(
            client, plan, counters, progress, rate, limit, deadline, started,
        )
        .await
    } else {
        let (stats, records) = closed_loop(client, plan, counters, progress, limit, deadline).await;
        (stats, records, None)
    };
    LoadResult {
        stats,
        records,
        elapsed: started.elapsed(),
        client_cpu_s: process_cpu_s() - cpu_before,
        saturation,
    }
}

/// CPU seconds this process has used, all threads.
fn process_cpu_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

#[allow(clippy::too_many_arguments)]
async fn open_loop(
    client: Arc<OpenAiClient>,
    plan: Arc<LoadPlan>,
    counters: Arc<LoadCounters>,
    progress: Option<OnRecord>,
    rate: f64,
    limit: u64,
    deadline: Option<Instant>,
    started: Instant,
) -> (
    LatencyStats,
    Vec<RequestRecord>,
    Option<saturation::Saturation>,
) {
    // Set when the detector finds the server over-saturated: no request starts after it.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let permits = Arc::new(tokio::sync::Semaphore::new(plan.concurrency.max(1) as usize));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<RequestRecord>();
    // A rate that is not a number sends nothing.
    let Ok(mut schedule) = plan.schedule(rate) else {
        return (LatencyStats::with_slo(plan.slo), Vec::new(), None);
    };
    let mut index = 0u64;
    let scheduler = {
        let counters = counters.clone();
        let plan = plan.clone();
        let stop = stop.clone();
        async move {
            while index < limit {
                // The whole plan's schedule: a shard sends its own indices at the times
                // the unsharded run would, so N shards together keep the total rate.
                let global = plan.shard.global_index(index);
                let scheduled = started + schedule.offset(global);
                if deadline.is_some_and(|d| scheduled >= d) {
                    break;
                }
                tokio::time::sleep_until(tokio::time::Instant::from_std(scheduled)).await;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // At most `concurrency` in flight: a saturated server delays starts,
                // which shows as schedule lag rather than unbounded client memory.
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                let (client, plan, counters, tx) =
                    (client.clone(), plan.clone(), counters.clone(), tx.clone());
                let i = global;
                counters.started.fetch_add(1, Ordering::Relaxed);
                counters.in_flight.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    if let Some(mix) = plan.agent_mix.as_ref().filter(|m| m.picks(i)) {
                        mix.send(&client, i).await;
                        counters.in_flight.fetch_sub(1, Ordering::Relaxed);
                        counters.done.fetch_add(1, Ordering::Relaxed);
                        drop(permit);
                        return;
                    }
                    let spec = plan.request(i);
                    let rec = client.send(&spec, scheduled, i).await;
                    counters.in_flight.fetch_sub(1, Ordering::Relaxed);
                    counters.done.fetch_add(1, Ordering::Relaxed);
                    if rec.error.is_some() {
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(permit);
                    let _ = tx.send(rec);
                });
                index += 1;
            }
        }
    };
    let collector = async {
        let mut stats = LatencyStats::with_slo(plan.slo);
        let mut records = Vec::new();
        let mut detector = plan.saturation_window.map(saturation::Detector::new);
        let mut saturated = None;
        while let Some(rec) = rx.recv().await {
            if let (Some(d), None) = (detector.as_mut(), saturated) {
                let in_flight = counters.in_flight.load(Ordering::Relaxed) as f64;
                let ttft = rec.ttft_ms();
                saturated = d.add(started.elapsed().as_secs_f64(), in_flight, ttft);
                if saturated.is_some() {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            stats.record(&rec);
            if let Some(p) = &progress {
                p(&rec);
            }
            if plan.keep_records {
                records.push(rec);
            }
        }
        (stats, records, saturated)
    };
    let ((), out) = tokio::join!(scheduler, collector);
    out
}

async fn closed_loop(
    client: Arc<OpenAiClient>,
    plan: Arc<LoadPlan>,
    counters: Arc<LoadCounters>,
    progress: Option<OnRecord>,
    limit: u64,
    deadline: Option<Instant>,
) -> (LatencyStats, Vec<RequestRecord>) {
    let next = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..plan.concurrency.max(1) {
        let (client, plan, counters, next, progress) = (
            client.clone(),
            plan.clone(),
            counters.clone(),
            next.clone(),
            progress.clone(),
        );
        workers.push(tokio::spawn(async move {
            // Each worker keeps its own statistics: no lock on the hot path.
            let mut stats = LatencyStats::with_slo(plan.slo);
            let mut records = Vec::new();
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let local = next.fetch_add(1, Ordering::Relaxed);
                if local >= limit {
                    break;
                }
                let i = plan.shard.global_index(local);
                counters.started.fetch_add(1, Ordering::Relaxed);
                counters.in_flight.fetch_add(1, Ordering::Relaxed);
                if let Some(mix) = plan.agent_mix.as_ref().filter(|m| m.picks(i)) {
                    mix.send(&client, i).await;
                    counters.in_flight.fetch_sub(1, Ordering::Relaxed);
                    counters.done.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let spec = plan.request(i);
                let rec = client.send(&spec, Instant::now(), i).await;
                counters.in_flight.fetch_sub(1, Ordering::Relaxed);
                counters.done.fetch_add(1, Ordering::Relaxed);
                if rec.error.is_some() {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                }
                stats.record(&rec);
                if let Some(p) = &progress {
                    p(&rec);
                }
                if plan.keep_records {
                    records.push(rec);
                }
                if let Some(pause) = plan.think_time.filter(|p| !p.is_zero()) {
                    let wake = Instant::now() + pause;
                    if deadline.is_some_and(|d| wake >= d) {
                        break;
                    }
                    tokio::time::sleep(pause).await;
                }
            }
            (stats, records)
        }));
    }
    let mut stats = LatencyStats::with_slo(plan.slo);
    let mut records = Vec::new();
    for w in workers {
        if let Ok((s, r)) = w.await {
            merge_stats(&mut stats, &s);
            records.extend(r);
        }
    }
    (stats, records)
}

/// Adds `other` into `into`.
pub fn merge_stats(into: &mut LatencyStats, other: &LatencyStats) {
    let _ = into.ttft.add(&other.ttft);
    let _ = into.itl.add(&other.itl);
    let _ = into.tpot.add(&other.tpot);
    let _ = into.e2e.add(&other.e2e);
    let _ = into.stream_gap.add(&other.stream_gap);
    let _ = into.first_tool_call.add(&other.first_tool_call);
    let _ = into.schedule_lag.add(&other.schedule_lag);
    into.tool_call_gap_max_us = into.tool_call_gap_max_us.max(other.tool_call_gap_max_us);
    into.requests += other.requests;
    into.errors += other.errors;
    for (k, v) in &other.errors_by_kind {
        *into.errors_by_kind.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &other.errors_by_class {
        *into.errors_by_class.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &other.errors_by_status {
        *into.errors_by_status.entry(*k).or_default() += v;
    }
    into.reconnects += other.reconnects;
    for (k, v) in &other.error_examples {
        into.error_examples
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
    into.slo = into.slo.or(other.slo);
    into.slo_met += other.slo_met;
    into.slo_met_output_tokens += other.slo_met_output_tokens;
    into.output_tokens += other.output_tokens;
    into.chunks += other.chunks;
    into.prompt_tokens += other.prompt_tokens;
    into.cached_tokens += other.cached_tokens;
    if other.last_success_at > into.last_success_at {
        into.last_success_at = other.last_success_at;
    }
}

/// The label of `golive load`'s one load in its events.
pub const LOAD_LABEL: &str = "load";

/// How `load` ended.
pub enum LoadOutcome {
    /// The server did not answer `/v1/models` (or the model could not be resolved).
    Unreachable(anyhow::Error),
    /// The load ran (to the end, or stopped early on over-saturation).
    Done {
        /// What `golive load` prints.
        summary: Box<LoadSummary>,
        /// The measurements it was made from.
        result: Box<LoadResult>,
    },
}

/// Checks the options, resolves the model, calibrates and runs the load. `events` gets
/// [`Event::LoadStarted`](crate::events::Event::LoadStarted), one
/// [`Event::Request`](crate::events::Event::Request) per finished request, the running
/// figures ([`Event::LoadProgress`](crate::events::Event::LoadProgress)) and
/// [`Event::LoadFinished`](crate::events::Event::LoadFinished), as accept's loads do; a
/// reporter's error ends the command with it once the load is done.
pub async fn load(args: &LoadOptions, events: &Events) -> crate::Result<LoadOutcome> {
    crate::error::ensure_input!(
        args.concurrency.is_none_or(|c| c >= 1),
        "--concurrency must be at least 1"
    );
    crate::error::ensure_input!(
        args.open_loop() || args.arrival == Arrival::Constant,
        "--arrival poisson or gamma shapes an open loop: give its --rate"
    );
    crate::error::ensure_input!(
        args.think_time.is_none() || !args.open_loop(),
        "--think-time paces a closed loop; it cannot be combined with --rate"
    );
    crate::error::ensure_input!(
        args.rate.is_none() || args.rate_ramp.is_none(),
        "--rate and --rate-ramp are two schedules: give one"
    );
    if let Some(r) = args.rate {
        crate::error::ensure_input!(r > 0.0 && r.is_finite(), "--rate must be a positive number");
    }
    crate::error::ensure_input!(args.max_tokens >= 1, "--max-tokens must be at least 1");
    let (shard, total_concurrency) = shard::shard_and_concurrency(args)?;
    let mut target = Target::new(&args.url, &args.target)?;
    let more = args
        .replicas
        .iter()
        .map(|u| Target::new(u, &args.target).map(|t| t.base_url))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let client = OpenAiClient::new(&target)?.spread_over(more);
    let model = match target.resolve_model(&client.http).await {
        Ok(m) => m,
        Err(e) => return Ok(LoadOutcome::Unreachable(e)),
    };
    let plan = LoadPlan {
        api: args.api,
        model: model.clone(),
        // Open loop: the concurrency flag is only a cap; by default a generous one.
        // A shard gets its share of the streams (or of the cap).
        concurrency: shard.share_of(u64::from(total_concurrency)).max(1) as u32,
        rate: args.rate.or(args.rate_ramp.map(|r| r.mean_rate())),
        requests: args.planned_requests(),
        duration: args.planned_duration(),
        think_time: args.think_time,
        prompt_tokens: args.prompt_tokens,
        max_tokens: args.max_tokens,
        shared_prefix_tokens: args.shared_prefix_tokens,
        ignore_eos: args.ignore_eos,
        keep_records: args.keep_records,
        run_tag: run_tag(),
        tokens_per_word: if args.no_calibrate {
            1.0
        } else {
            calibrate_tokens_per_word(&client, args.api, &model)
                .await
                .unwrap_or(1.0)
        },
        shard,
        agent_mix: None,
        slo: args.slo,
        arrival: args.arrival,
        seed: args.seed,
        saturation_window: args.saturation_window,
        rate_ramp: args.rate_ramp,
    };
    let plan = Arc::new(plan);
    // The summary names every replica the requests went to.
    let urls = std::iter::once(&client.base_url)
        .chain(&client.spread)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let tracker = events.load_started(LOAD_LABEL, plan.requests);
    let result = run_load(
        Arc::new(client),
        plan.clone(),
        Arc::new(LoadCounters::default()),
        Some(tracker.on_record()),
    )
    .await;
    tracker.finish();
    events.check()?;
    let summary = LoadSummary::new(&urls, &plan, &result);
    Ok(LoadOutcome::Done {
        summary: Box::new(summary),
        result: Box::new(result),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_share_exactly_the_prefix() {
        let a = prompt_text(200, 100, "t", 1);
        let b = prompt_text(200, 100, "t", 2);
        let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        let shared_part = a.find("Request").unwrap();
        assert!(common >= shared_part, "{common} < {shared_part}");
        assert_ne!(a, b);
        let words = a.split_whitespace().count();
        assert!((180..=215).contains(&words), "{words} words");
        // No shared prefix: requests differ right after the run tag.
        let c = prompt_text(50, 0, "t", 1);
        let d = prompt_text(50, 0, "t", 2);
        assert_ne!(c, d);
    }
}
