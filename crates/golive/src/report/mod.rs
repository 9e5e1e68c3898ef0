//! The acceptance report: shared data types written as `report.json`, and its
//! renderings (Markdown, JUnit XML, self-contained HTML), each a file that an
//! exporter writes. Checks produce [`Check`] values; reporters only read them.

mod check_id;
pub(crate) mod exporters;
pub(crate) mod html;
pub(crate) mod junit;
pub(crate) mod markdown;
pub(crate) mod worksheet;

/// Output files are written by [`crate::outfile`]; re-exported where they always were.
pub use crate::outfile::{write_atomic, WriteFailed};
pub use check_id::CheckId;
pub use html::{render as render_html, Integrity};
pub use worksheet::{
    current as current_worksheet, evaluate as evaluate_worksheet, tally as worksheet_tally,
    Entry as WorksheetEntry, ItemSpec as WorksheetItem, ItemState as WorksheetState,
    Proof as WorksheetProof,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Version of the `report.json` layout. Bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Passed.
    Pass,
    /// Passed with a reservation (the verdict becomes at best `observe`).
    Warn,
    /// Failed; its [`Impact`] says what that means for the verdict.
    Fail,
    /// Not run (not asked for, or what it needs is missing).
    Skip,
    /// The evidence needed to judge this item is missing (environment checklist).
    Unknown,
}

/// The one decision an acceptance run ends in (runbook: release, observe, rebuild, expand).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Everything passed: go live.
    Release,
    /// Failures only beyond the expected load (documented limits) or warnings: go live and watch.
    Observe,
    /// Environment or interface failures: fix host, image, dependencies or parser first.
    Rebuild,
    /// Capacity failures at the expected load: more GPUs, other parallelism or smaller limits.
    Expand,
}

impl Verdict {
    /// The verdict as reports and `--decision` spell it (`release`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Release => "release",
            Verdict::Observe => "observe",
            Verdict::Rebuild => "rebuild",
            Verdict::Expand => "expand",
        }
    }
}

impl std::str::FromStr for Verdict {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "release" => Verdict::Release,
            "observe" => Verdict::Observe,
            "rebuild" => Verdict::Rebuild,
            "expand" => Verdict::Expand,
            other => {
                anyhow::bail!("unknown decision {other:?}: use release, observe, rebuild or expand")
            }
        })
    }
}

/// Which part of the acceptance protocol a check belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Host, driver, image and launch, from the environment bundles.
    Environment,
    /// The server's endpoints: health, models, metrics, version.
    Service,
    /// One chat completion, plain and streamed.
    Basic,
    /// Proof that a shared prefix is served from the cache.
    PrefixCache,
    /// The load ramp: concurrency and prompt length step by step.
    Ramp,
    /// Steady load at the accepted concurrency for `--duration`.
    Soak,
    /// Tool calls and structured output on the agent cases.
    Agent,
    /// Stability; no check of this version belongs to it.
    Stability,
    /// Same answer on every serving path (cold/cached, replicas).
    Agreement,
    /// The model's API contract (the profile's `[contract]`).
    Contract,
}

/// What a failing check means for the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Impact {
    /// Host, image, driver, dependencies, config: rebuild.
    Environment,
    /// Fails at the expected load: expand.
    Capacity,
    /// Fails only beyond the expected load, recorded as a limit: observe.
    Limit,
    /// Agent interface (tool calls, schemas) on the user's own schemas: blocks release (rebuild).
    Interface,
    /// Informational: never changes the verdict by itself beyond `observe` for a warning.
    #[default]
    Info,
}

/// Who has to act on a failure (runbook: GPU problems apart from parser/model/gateway problems).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Owner {
    /// The host, driver, image or configuration.
    Environment,
    /// The serving engine (5xx, malformed answers, unenforced `tool_choice`).
    Server,
    /// The engine's tool-call parser does not match the model's format.
    Parser,
    /// The model: the envelope is fine, the content is wrong.
    Model,
    /// A proxy between client and server (timeouts, cut or buffered streams).
    Gateway,
    /// The caller: URL, model name, API key, or the cases given.
    Client,
}

/// One check of the report: test case, measurement, evidence, reviewer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// Stable snake_case id, e.g. `prefix_cache`, `agent_tool_required_arg`.
    pub id: String,
    /// Which part of the protocol it belongs to.
    pub stage: Stage,
    /// How it came out.
    pub status: Status,
    /// One line: what was tested, in words.
    pub test_case: String,
    /// What was measured, in words (numbers included), e.g. "cached 335 of 365 prompt tokens".
    pub measurement: String,
    /// Structured numbers behind `measurement`, for machines and charts.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
    /// Log or response excerpt the judgement rests on.
    #[serde(default)]
    pub evidence: String,
    /// The request that produced the evidence (may be reduced to hashes with `--no-content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
    /// What a failure means for the verdict.
    #[serde(default)]
    pub impact: Impact,
    /// Who has to act when it fails; `None`: not said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// The next step when it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_step: String,
    /// Who reviewed this check (from `--reviewer`, or the sign-off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// The server it measured, when a run has several (`--url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// How long it took, ms (0 when not measured).
    #[serde(default)]
    pub duration_ms: u64,
}

impl Check {
    /// A check with the given id, stage and status and empty details.
    pub fn new(
        id: impl Into<String>,
        stage: Stage,
        status: Status,
        test_case: impl Into<String>,
    ) -> Self {
        Check {
            id: id.into(),
            stage,
            status,
            test_case: test_case.into(),
            measurement: String::new(),
            data: serde_json::Value::Null,
            evidence: String::new(),
            request: None,
            impact: Impact::Info,
            owner: None,
            next_step: String::new(),
            reviewer: None,
            url: None,
            duration_ms: 0,
        }
    }
}

/// Goodput: what met every per-request objective (`--slo-*`), as a share and per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// Share of the requests sent (failed ones included) that met every objective.
    pub slo_attainment: f64,
    /// Requests per second that met every objective.
    pub requests_per_s: f64,
    /// Output tokens per second of those requests.
    pub output_tokens_per_s: f64,
}

impl Goodput {
    /// `goodput 3.1 req/s, 410 tok/s (97% within the SLO)`.
    pub fn text(&self) -> String {
        format!(
            "goodput {:.2} req/s, {:.0} tok/s ({:.0}% within the SLO)",
            self.requests_per_s,
            self.output_tokens_per_s,
            self.slo_attainment * 100.0
        )
    }
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Values measured; 0: none (all the other fields are then 0).
    pub count: u64,
    /// Mean, ms.
    pub mean: f64,
    /// Median, ms.
    pub p50: f64,
    /// 90th percentile, ms.
    pub p90: f64,
    /// 95th percentile, ms.
    pub p95: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// Largest value, ms.
    pub max: f64,
}

/// One step of the load ramp (runbook: 1 short, 1 long, 2 parallel short, ...).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RampStep {
    /// The step as the report shows it, e.g. `4 x short (128 tokens)`.
    pub label: String,
    /// Requests in flight at once; for a step of the boundary search in the offered rate
    /// (`rate`), the open loop's cap on them.
    pub concurrency: u32,
    /// A step of the boundary search in the offered rate: requests per second sent at a
    /// constant rate (open loop) instead of a fixed concurrency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// The open loop fell behind its schedule (see `load::client_limited`): the step says
    /// what the client sent, not what the server can take, and counts neither way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_limited: bool,
    /// Prompt length asked for, in tokens (approximate).
    pub prompt_tokens: u32,
    /// Output limit of each request (`max_tokens`).
    pub max_tokens: u32,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Failed requests by error kind (`timeout`, `http_status`, ...).
    #[serde(default)]
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Failed requests by what they are evidence of: `capacity`, `transport`, `server`.
    #[serde(default)]
    pub errors_by_class: BTreeMap<String, u64>,
    /// Requests sent again on a fresh connection after a keep-alive race (not errors).
    #[serde(default)]
    pub reconnects: u64,
    /// Time to first token, ms.
    pub ttft_ms: Percentiles,
    /// Gaps between output chunks (inter-token latency), ms.
    pub itl_ms: Percentiles,
    /// Mean time per output token after the first, per request, ms.
    pub tpot_ms: Percentiles,
    /// Whole request, end to end, ms.
    pub e2e_ms: Percentiles,
    /// Peak KV-cache usage 0..1 during the step, from the server's metrics.
    pub kv_cache_usage: Option<f64>,
    /// Peak of the server's waiting (queued) requests during the step.
    pub waiting_max: Option<f64>,
    /// Peak of the server's running requests during the step.
    pub running_max: Option<f64>,
    /// Preemptions counted during the step.
    pub preemptions: Option<f64>,
    /// GPU memory in use (MiB), from a DCGM exporter when given.
    pub gpu_memory_used_mib: Option<f64>,
    /// When the last request of the step that succeeded ended.
    pub last_success_at: Option<DateTime<Utc>>,
    /// How the step was judged; `None` in reports that did not judge steps.
    pub status: Option<Status>,
    /// Per request, the longest silence between output deltas (ms); the
    /// `stream_silence` check judges its p99 and max.
    #[serde(default)]
    pub stream_gap_ms: Percentiles,
    /// The longest of those gaps that fell inside a tool call (ms), if any did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_gap_max_ms: Option<f64>,
    /// Time to the first tool-call delta (ms), for requests that streamed one.
    #[serde(default)]
    pub first_tool_call_ms: Percentiles,
    /// Agent cases mixed into the step (`--agent-mix`), each judged like the agent stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentConformance>,
    /// What met every per-request objective (with `--slo-*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// A rate step stopped early: the server was over-saturated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<crate::load::saturation::Saturation>,
}

/// How the agent cases mixed into a load (`--agent-mix`) fared, judged by the agent
/// stage's validator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentConformance {
    /// Agent requests sent.
    pub requests: u64,
    /// Answers without a failing problem of the interface (server, parser, gateway).
    pub conformant: u64,
    /// Answers whose only failures are the model's (wrong tool, no call): not counted
    /// against the interface, the agent stage reports them.
    pub model_failures: u64,
    /// Failing problems by owner (`parser`, `server`, ...), one per answer and owner.
    #[serde(default)]
    pub failures_by_owner: BTreeMap<String, u64>,
    /// Failing problems by code, e.g. `tool_call_markup_in_content`.
    #[serde(default)]
    pub failures_by_code: BTreeMap<String, u64>,
    /// Up to three failing answers: case, owner, code and detail.
    #[serde(default)]
    pub examples: Vec<String>,
}

impl AgentConformance {
    /// Share of conformant answers, `None` when no agent request was sent.
    pub fn rate(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.conformant as f64 / self.requests as f64)
    }

    /// The rate in percent for tables and evidence, `87% (7/8)`; `–` without agent requests.
    pub fn rate_text(&self) -> String {
        match self.rate() {
            Some(r) => format!("{:.0}% ({}/{})", r * 100.0, self.conformant, self.requests),
            None => "–".into(),
        }
    }

    /// Failing-problem counts by code, e.g. `tool_call_markup_in_content ×3`.
    pub fn codes_text(&self) -> String {
        let mut by: std::collections::BTreeMap<&str, u64> = Default::default();
        for (code, n) in &self.failures_by_code {
            *by.entry(code.as_str()).or_default() += n;
        }
        by.iter()
            .map(|(code, n)| format!("{code} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One request of the prefix-cache proof.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefixCacheSample {
    /// `cold`, `warm`, `control`.
    pub role: String,
    /// Prompt tokens as the server counted them.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the cache (the response's usage, else the engine's counter).
    pub cached_tokens: Option<u64>,
    /// Prefill time, ms: the server's timing, else its prefill histogram, else the TTFT.
    pub prefill_ms: Option<f64>,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Change of the engine's prefix-cache hit counter around the request.
    pub hits_delta: Option<f64>,
    /// Change of the engine's prefix-cache lookup counter around the request.
    pub queries_delta: Option<f64>,
}

/// One sample of the soak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakSample {
    /// Seconds since the soak started.
    pub t_s: f64,
    /// Requests finished so far.
    pub requests_done: u64,
    /// Requests failed so far.
    pub errors: u64,
    /// The server's running requests at the sample.
    pub running: Option<f64>,
    /// The server's waiting (queued) requests at the sample.
    pub waiting: Option<f64>,
    /// The server's KV-cache usage at the sample, 0..1.
    pub kv_cache_usage: Option<f64>,
    /// Prefix-cache hit ratio since the previous sample, 0..1.
    pub cache_hit_ratio: Option<f64>,
    /// TTFT p95 of the requests that ended since the previous sample, ms.
    pub ttft_p95_ms: Option<f64>,
}

/// The numbers behind the charts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// The prefix-cache proof, one request each.
    #[serde(default)]
    pub prefix_cache: Vec<PrefixCacheSample>,
    /// The ramp, one entry per step.
    #[serde(default)]
    pub ramp: Vec<RampStep>,
    /// The soak, one sample per interval.
    #[serde(default)]
    pub soak: Vec<SoakSample>,
}

/// The step-level latency objectives (`--slo-*-p95-ms`): a ramp step fails on each one
/// its p95 is above, the capacity answer names the first missed as binding, and the
/// baseline keeps them for `watch` and the `rules --grafana` panels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Objectives {
    /// `--slo-ttft-p95-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p95_ms: Option<f64>,
    /// `--slo-itl-p95-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_p95_ms: Option<f64>,
    /// `--slo-e2e-p95-ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_p95_ms: Option<f64>,
}

impl Objectives {
    /// `None` when no objective is given.
    pub fn given(self) -> Option<Self> {
        (self != Objectives::default()).then_some(self)
    }

    /// "TTFT p95 <= 2000 ms, ITL p95 <= 50.0 ms" (the ones given).
    pub fn text(&self) -> String {
        [
            ("TTFT", self.ttft_p95_ms, 0),
            ("ITL", self.itl_p95_ms, 1),
            ("E2E", self.e2e_p95_ms, 0),
        ]
        .into_iter()
        .filter_map(|(name, v, d)| v.map(|v| format!("{name} p95 <= {v:.d$} ms")))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// What the accepted run measured; `golive watch` and `golive rules` judge against it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Prefix-cache hit ratio (hits / queries, tokens) under the accepted load.
    pub cache_hit_ratio: Option<f64>,
    /// Median time to first token under the accepted load, ms.
    pub ttft_p50_ms: Option<f64>,
    /// TTFT p95 under the accepted load, ms.
    pub ttft_p95_ms: Option<f64>,
    /// Inter-token latency p95 under the accepted load, ms.
    pub itl_p95_ms: Option<f64>,
    /// Warm-request prefill time (ms).
    pub prefill_warm_ms: Option<f64>,
    /// Fraction of failed requests under the accepted load.
    pub error_rate: Option<f64>,
    /// Highest concurrency that passed.
    pub accepted_concurrency: Option<u32>,
    /// Requests per second the soak sustained.
    pub request_rate_rps: Option<f64>,
    /// Peak KV-cache usage, 0..1.
    pub kv_cache_usage_max: Option<f64>,
    /// Peak of the server's waiting requests.
    pub waiting_max: Option<f64>,
    /// The capacity line: requests per second one server held within the objectives (the
    /// capacity answer's holding step, `accept --target-rate/--target-concurrency` with
    /// `--slo-*`). `watch` and `rules` warn when the live rate crosses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_rps: Option<f64>,
    /// The objectives the run was judged against (`--slo-*`); none given: absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objectives: Option<Objectives>,
}

impl Baseline {
    /// The baseline as labelled, formatted rows (`None`: not measured), so every
    /// reporter shows the same numbers the same way.
    pub fn rows(&self) -> Vec<(&'static str, Option<String>)> {
        let ms = |v: Option<f64>| v.map(|x| format!("{x:.1} ms"));
        let percent = |v: Option<f64>, digits: usize| v.map(|x| format!("{:.digits$}%", x * 100.0));
        vec![
            ("Prefix-cache hit ratio", percent(self.cache_hit_ratio, 1)),
            ("TTFT p50", ms(self.ttft_p50_ms)),
            ("TTFT p95", ms(self.ttft_p95_ms)),
            ("ITL p95", ms(self.itl_p95_ms)),
            ("Warm prefill", ms(self.prefill_warm_ms)),
            ("Error rate", percent(self.error_rate, 2)),
            (
                "Accepted concurrency",
                self.accepted_concurrency.map(|x| x.to_string()),
            ),
            (
                "Request rate",
                self.request_rate_rps.map(|x| format!("{x:.2} req/s")),
            ),
            ("Peak KV-cache usage", percent(self.kv_cache_usage_max, 1)),
            (
                "Peak waiting requests",
                self.waiting_max.map(|x| format!("{x:.0}")),
            ),
            (
                "Capacity line (one server)",
                self.capacity_rps.map(|x| format!("{x:.2} req/s")),
            ),
            ("Objectives", self.objectives.map(|o| o.text())),
        ]
    }
}

/// A second person's review of a report (`golive signoff`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signoff {
    /// Who reviewed (`--reviewer`).
    pub reviewer: String,
    /// The decision the reviewer signs; by default the run's verdict.
    pub decision: Verdict,
    /// The reviewer's note; empty: none.
    #[serde(default)]
    pub note: String,
    /// When the sign-off was made.
    pub at: DateTime<Utc>,
    /// SHA-256 of each covered file, relative to the report directory.
    pub covered: BTreeMap<String, String>,
    /// SHA-256 of the previous sign-off's record (payload and signature): the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// The reviewer's `ssh-keygen -Y sign -n golive` signature of the payload; none: unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Who rolls the deployment back (`--rollback-owner`). Empty fields are left out of
    /// the record, so sign-offs made before they existed keep their payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_owner: Option<String>,
    /// Worksheet items left open that the reviewer accepted, with the reason
    /// (`--accept-open ITEM --reason TEXT`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accepted_open: BTreeMap<String, String>,
}

/// The whole `report.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The layout version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The golive version that wrote it.
    pub tool_version: String,
    /// The git commit golive was built from (`unknown`; absent in older reports).
    #[serde(default)]
    pub tool_commit: String,
    /// When the run started.
    pub started_at: DateTime<Utc>,
    /// When it ended; `None`: still running, or interrupted.
    pub finished_at: Option<DateTime<Utc>>,
    /// False while the run is still going (or was interrupted).
    pub complete: bool,
    /// The servers tested (`--url`), without credentials.
    pub urls: Vec<String>,
    /// The engine found on the first server (`vllm`, `sglang`, `llama.cpp`, `openai-compatible`).
    #[serde(default)]
    pub engine: Option<String>,
    /// The model tested.
    #[serde(default)]
    pub model: Option<String>,
    /// The deployment profile (`--profile`); `None`: the generic one.
    #[serde(default)]
    pub profile: Option<String>,
    /// Who ran it (`--operator`, else the login name).
    #[serde(default)]
    pub operator: Option<String>,
    /// Who reviewed it (`--reviewer`).
    #[serde(default)]
    pub reviewer: Option<String>,
    /// The decision; `None` until the run has decided.
    pub verdict: Option<Verdict>,
    /// Why, in words (the checks that led to it).
    #[serde(default)]
    pub verdict_reason: String,
    /// Every check, in the order they ran.
    pub checks: Vec<Check>,
    /// The numbers behind the charts.
    #[serde(default)]
    pub measurements: Measurements,
    /// What the run accepted, for `golive watch` and `golive rules`.
    #[serde(default)]
    pub baseline: Baseline,
    /// The runbook's worksheet as the run judged it ([`current_worksheet`] adds what
    /// the sign-offs say); empty in reports older than the worksheet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worksheet: Vec<worksheet::Entry>,
    /// Sign-offs, oldest first.
    #[serde(default)]
    pub signoffs: Vec<Signoff>,
}

impl Report {
    /// An empty, incomplete report of a run against `urls`.
    pub fn new(urls: Vec<String>) -> Self {
        Report {
            schema_version: SCHEMA_VERSION,
            tool_version: crate::TOOL_VERSION.to_string(),
            tool_commit: crate::GIT_COMMIT.to_string(),
            started_at: Utc::now(),
            finished_at: None,
            complete: false,
            urls,
            engine: None,
            model: None,
            profile: None,
            operator: None,
            reviewer: None,
            verdict: None,
            verdict_reason: String::new(),
            checks: Vec::new(),
            measurements: Measurements::default(),
            baseline: Baseline::default(),
            worksheet: Vec::new(),
            signoffs: Vec::new(),
        }
    }

    /// Reads a `report.json` (or the `report.json` inside a directory).
    pub fn load(path: &Path) -> anyhow::Result<Report> {
        let file = report_path(path);
        let text = crate::input::read_text(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a golive report", file.display()))
    }

    /// Writes `report.json` atomically (temp file + rename), so an interrupted run
    /// always leaves a whole file with what was measured so far.
    pub fn save_json(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        use exporters::Exporter;
        let json = exporters::Json.render(self)?;
        write_atomic(&dir.join(exporters::Json.file_name()), &json)
    }

    /// Who rolls back, as the newest sign-off that names one says.
    pub fn rollback_owner(&self) -> Option<&str> {
        self.signoffs
            .iter()
            .rev()
            .find_map(|s| s.rollback_owner.as_deref())
    }

    /// Sets `verdict` and `verdict_reason` from the checks.
    pub fn decide(&mut self) {
        let (verdict, mut reason) = decide_verdict(&self.checks);
        // An `expand` says how much: the capacity answer, when a target was given.
        if let Some(c) = self.checks.iter().find(|c| c.id == CheckId::Capacity) {
            if verdict == Verdict::Expand || c.status != Status::Skip {
                reason.push_str(&format!("; capacity: {}", c.measurement));
            }
        }
        self.verdict = Some(verdict);
        self.verdict_reason = reason;
    }
}

/// `path` itself if it is a file, else `path/report.json`.
pub fn report_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    }
}

/// The README's verdict rules, in one place:
/// environment or interface failures -> rebuild; capacity failures at the expected load
/// -> expand; failures only beyond the expected load (limits) or warnings -> observe;
/// all pass -> release.
pub fn decide_verdict(checks: &[Check]) -> (Verdict, String) {
    let failed = |impact: Impact| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.status == Status::Fail && c.impact == impact)
            .map(|c| c.id.as_str())
            .collect()
    };
    let env = failed(Impact::Environment);
    if !env.is_empty() {
        return (
            Verdict::Rebuild,
            format!("environment checks failed: {}", env.join(", ")),
        );
    }
    let iface = failed(Impact::Interface);
    if !iface.is_empty() {
        return (
            Verdict::Rebuild,
            format!("interface checks failed: {}", iface.join(", ")),
        );
    }
    let cap = failed(Impact::Capacity);
    if !cap.is_empty() {
        return (
            Verdict::Expand,
            format!("capacity failed at the expected load: {}", cap.join(", ")),
        );
    }
    let limits = failed(Impact::Limit);
    let other_fail: Vec<&str> = checks
        .iter()
        .filter(|c| c.status == Status::Fail && c.impact == Impact::Info)
        .map(|c| c.id.as_str())
        .collect();
    let warns: Vec<&str> = checks
        .iter()
        .filter(|c| c.status == Status::Warn)
        .map(|c| c.id.as_str())
        .collect();
    if !limits.is_empty() || !other_fail.is_empty() || !warns.is_empty() {
        let mut parts = Vec::new();
        if !limits.is_empty() {
            parts.push(format!(
                "limits beyond the expected load: {}",
                limits.join(", ")
            ));
        }
        if !other_fail.is_empty() {
            parts.push(format!("non-blocking failures: {}", other_fail.join(", ")));
        }
        if !warns.is_empty() {
            parts.push(format!("warnings: {}", warns.join(", ")));
        }
        return (Verdict::Observe, parts.join("; "));
    }
    (Verdict::Release, "all checks passed".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(id: &str, status: Status, impact: Impact) -> Check {
        let mut c = Check::new(id, Stage::Basic, status, "t");
        c.impact = impact;
        c
    }

    #[test]
    fn verdict_rules_follow_the_readme_order() {
        assert_eq!(
            decide_verdict(&[check("a", Status::Pass, Impact::Info)]).0,
            Verdict::Release
        );
        assert_eq!(
            decide_verdict(&[check("a", Status::Warn, Impact::Info)]).0,
            Verdict::Observe
        );
        assert_eq!(
            decide_verdict(&[check("a", Status::Fail, Impact::Limit)]).0,
            Verdict::Observe
        );
        assert_eq!(
            decide_verdict(&[
                check("a", Status::Fail, Impact::Limit),
                check("b", Status::Fail, Impact::Capacity)
            ])
            .0,
            Verdict::Expand
        );
        assert_eq!(
            decide_verdict(&[
                check("b", Status::Fail, Impact::Capacity),
                check("c", Status::Fail, Impact::Environment)
            ])
            .0,
            Verdict::Rebuild
        );
        assert_eq!(
            decide_verdict(&[check("d", Status::Fail, Impact::Interface)]).0,
            Verdict::Rebuild
        );
        // A skipped check does not block a release.
        assert_eq!(
            decide_verdict(&[check("e", Status::Skip, Impact::Capacity)]).0,
            Verdict::Release
        );
    }

    #[test]
    fn baseline_rows_format_every_number_once() {
        let b = Baseline {
            cache_hit_ratio: Some(0.687),
            error_rate: Some(0.0012),
            accepted_concurrency: Some(4),
            ..Baseline::default()
        };
        let rows = b.rows();
        assert_eq!(rows.len(), 12);
        assert_eq!(rows[10], ("Capacity line (one server)", None));
        assert_eq!(
            rows[0],
            ("Prefix-cache hit ratio", Some("68.7%".to_string()))
        );
        assert_eq!(rows[5], ("Error rate", Some("0.12%".to_string())));
        assert_eq!(rows[6], ("Accepted concurrency", Some("4".to_string())));
        assert_eq!(rows[1], ("TTFT p50", None));
    }

    #[test]
    fn report_round_trips_and_saves_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Report::new(vec!["http://127.0.0.1:1".into()]);
        r.checks
            .push(check("prefix_cache", Status::Pass, Impact::Capacity));
        r.decide();
        r.save_json(dir.path()).unwrap();
        let back = Report::load(dir.path()).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.verdict, Some(Verdict::Release));
    }
}
