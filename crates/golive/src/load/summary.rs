//! The JSON/text summary of `golive load` (`LoadSummary`) and the per-request CSV.

use std::time::Duration;

use serde::Serialize;

use anyhow::Context;

use super::{LoadPlan, LoadResult};
use crate::client::{Api, LatencyStats, RequestRecord, Slo};
use crate::report::{Goodput, Percentiles};

/// The JSON summary of `golive load`.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LoadSummary {
    /// The golive version that ran it.
    pub tool_version: String,
    /// The git commit golive was built from.
    pub tool_commit: String,
    /// The server's base URL; with several `--url`, all of them, space-separated.
    pub url: String,
    /// The model asked for.
    pub model: String,
    /// Endpoint: chat or completions.
    pub api: Api,
    /// Closed loop: streams; open loop: the in-flight cap (this shard's share).
    pub concurrency: u32,
    /// Requests per second asked for (open loop; this shard's share); `None`: closed loop.
    pub rate: Option<f64>,
    /// The ramp the rate moved along (`rate` is then its mean).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_ramp: Option<super::RateRamp>,
    /// Prompt length asked for, in tokens.
    pub prompt_tokens: u32,
    /// Output limit of each request (`max_tokens`).
    pub max_tokens: u32,
    /// Tokens of the prompt shared by every request.
    pub shared_prefix_tokens: u32,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Failed requests by error kind (`timeout`, `http_status`, ...).
    pub errors_by_kind: std::collections::BTreeMap<String, u64>,
    /// Failed requests by what they are evidence of: capacity, transport, server.
    pub errors_by_class: std::collections::BTreeMap<String, u64>,
    /// The first failure's detail per error kind.
    pub error_examples: std::collections::BTreeMap<String, String>,
    /// Requests sent again on a fresh connection after the server closed a pooled one
    /// under them (a keep-alive race); they are not errors.
    pub reconnects: u64,
    /// Wall time of the run, in seconds.
    pub duration_s: f64,
    /// Requests per second over the run (`requests / duration_s`).
    pub request_rate: f64,
    /// Output tokens of the successful requests.
    pub output_tokens: u64,
    /// Output tokens per second over the run.
    pub output_tokens_per_s: f64,
    /// Stream events of the successful requests.
    pub chunks: u64,
    /// Prompt tokens of the successful requests, as the server counted them.
    pub prompt_tokens_total: u64,
    /// Of those, tokens served from the prefix cache.
    pub cached_tokens_total: u64,
    /// Time to first token, ms.
    pub ttft_ms: Percentiles,
    /// Inter-token latency (gaps between output chunks), ms.
    pub itl_ms: Percentiles,
    /// Time per output token after the first, per request, ms.
    pub tpot_ms: Percentiles,
    /// Whole request, end to end, ms.
    pub e2e_ms: Percentiles,
    /// Per request, the longest gap between output deltas (stream silence).
    pub stream_gap_ms: Percentiles,
    /// How requests arrived (open loop).
    #[serde(default)]
    pub arrival: super::Arrival,
    /// How late requests started against their planned start (the client's self-check).
    #[serde(default)]
    pub schedule_lateness_ms: Percentiles,
    /// golive's CPU seconds per wall second over the run (1.0: one core busy).
    #[serde(default)]
    pub client_cpu_share: f64,
    /// The client could not keep an open loop's schedule (lateness p95 above the larger of
    /// 10 ms and one interval): the figures say what the client sent, not what the server
    /// could take.
    #[serde(default)]
    pub client_limited: bool,
    /// Goodput against `--goodput`'s per-request objectives (absent without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<SummaryGoodput>,
    /// The open loop stopped early on over-saturation (absent when it ran to its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saturation: Option<super::saturation::Saturation>,
}

/// The summary's goodput: the objectives, the counts (merged across shards) and the rates.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SummaryGoodput {
    pub slo: Slo,
    /// Requests that met every objective.
    pub met_requests: u64,
    /// Their output tokens.
    pub met_output_tokens: u64,
    #[serde(flatten)]
    pub rates: Goodput,
}

impl LoadSummary {
    /// The summary of a finished run against `url`.
    pub fn new(url: &str, plan: &LoadPlan, result: &LoadResult) -> Self {
        let mut s = Self::from_stats(url, plan, &result.stats, result.elapsed);
        s.client_cpu_share = result.client_cpu_share();
        s.saturation = result.saturation;
        s
    }

    /// The summary of these statistics, measured over `elapsed` (also of merged shards).
    pub fn from_stats(url: &str, plan: &LoadPlan, s: &LatencyStats, elapsed: Duration) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        LoadSummary {
            tool_version: crate::TOOL_VERSION.to_string(),
            tool_commit: crate::GIT_COMMIT.to_string(),
            url: url.to_string(),
            model: plan.model.clone(),
            api: plan.api,
            concurrency: plan.concurrency,
            // A shard's own share of the plan's rate.
            rate: plan.rate.map(|r| r / f64::from(plan.shard.count.max(1))),
            rate_ramp: plan.rate_ramp,
            prompt_tokens: plan.prompt_tokens,
            max_tokens: plan.max_tokens,
            shared_prefix_tokens: plan.shared_prefix_tokens,
            requests: s.requests,
            errors: s.errors,
            errors_by_kind: s.errors_by_kind.clone(),
            errors_by_class: s.errors_by_class.clone(),
            error_examples: s.error_examples.clone(),
            reconnects: s.reconnects,
            duration_s: secs,
            request_rate: s.requests as f64 / secs,
            output_tokens: s.output_tokens,
            output_tokens_per_s: s.output_tokens as f64 / secs,
            chunks: s.chunks,
            prompt_tokens_total: s.prompt_tokens,
            cached_tokens_total: s.cached_tokens,
            ttft_ms: s.ttft_ms(),
            itl_ms: s.itl_ms(),
            tpot_ms: s.tpot_ms(),
            e2e_ms: s.e2e_ms(),
            stream_gap_ms: s.stream_gap_ms(),
            arrival: plan.arrival,
            schedule_lateness_ms: s.schedule_lateness_ms(),
            client_cpu_share: 0.0,
            client_limited: client_limited(
                plan.rate.map(|r| r / f64::from(plan.shard.count.max(1))),
                &s.schedule_lateness_ms(),
            ),
            goodput: s
                .slo
                .zip(s.goodput(elapsed))
                .map(|(slo, rates)| SummaryGoodput {
                    slo,
                    met_requests: s.slo_met,
                    met_output_tokens: s.slo_met_output_tokens,
                    rates,
                }),
            saturation: None,
        }
    }

    /// The summary as `golive load` prints it.
    pub fn to_text(&self) -> String {
        let row = |name: &str, p: &Percentiles| {
            format!(
                "{name:<5} ms  p50 {:>9.2}  p90 {:>9.2}  p95 {:>9.2}  p99 {:>9.2}  max {:>9.2}  (n={})\n",
                p.p50, p.p90, p.p95, p.p99, p.max, p.count
            )
        };
        let mut out = format!(
            "golive load: {} model {} ({:?}), concurrency {}{}\n\
             requests {} errors {}{} in {:.2} s: {:.2} req/s, {:.1} output tok/s, {} chunks\n",
            self.url,
            self.model,
            self.api,
            self.concurrency,
            match (self.rate_ramp, self.rate) {
                (Some(r), _) =>
                    format!(", rate ramp {}/s to {}/s over {} s", r.start, r.end, r.secs),
                (None, Some(r)) => format!(", rate {r}/s"),
                (None, None) => String::new(),
            },
            self.requests,
            self.errors,
            if self.reconnects > 0 {
                format!(" reconnects {}", self.reconnects)
            } else {
                String::new()
            },
            self.duration_s,
            self.request_rate,
            self.output_tokens_per_s,
            self.chunks,
        );
        for (kind, n) in &self.errors_by_kind {
            let example = self
                .error_examples
                .get(kind)
                .map(String::as_str)
                .unwrap_or("");
            out.push_str(&format!("  error {kind}: {n} (e.g. {example})\n"));
        }
        out.push_str(&row("TTFT", &self.ttft_ms));
        out.push_str(&row("ITL", &self.itl_ms));
        out.push_str(&row("TPOT", &self.tpot_ms));
        out.push_str(&row("E2E", &self.e2e_ms));
        if self.rate.is_some() {
            let l = &self.schedule_lateness_ms;
            out.push_str(&format!(
                "schedule ({:?}): lateness p50 {:.2} ms p99 {:.2} ms, client CPU {:.0}%{}\n",
                self.arrival,
                l.p50,
                l.p99,
                self.client_cpu_share * 100.0,
                if self.client_limited {
                    "; CLIENT-LIMITED: golive could not keep the schedule, the rate is the client's"
                } else {
                    ""
                }
            ));
        }
        if let Some(g) = &self.goodput {
            out.push_str(&format!("{}\n", g.rates.text()));
        }
        if let Some(sat) = &self.saturation {
            let rate = match self.rate_ramp {
                Some(r) => format!("the ramp's rate there, {:.2}/s", r.rate_at(sat.at_s)),
                None => "this rate".to_string(),
            };
            out.push_str(&format!(
                "STOPPED EARLY: {}; the server cannot take {rate}\n",
                sat.text()
            ));
        }
        out
    }
}

/// Whether an open loop at `rate` fell behind its schedule: lateness p95 above the larger of
/// 10 ms and one interval (one request in 20 later than the next one's planned start). Not the
/// p99: in a rate step of 40 requests that is the latest one, and one start held up once (a
/// page fault, a busy neighbour on 2 cores: 36 and 85 ms at 31.9 and 33.4 req/s, both runs'
/// other starts on time) does not change the load the server was offered.
pub fn client_limited(rate: Option<f64>, lateness: &Percentiles) -> bool {
    let Some(rate) = rate.filter(|r| *r > 0.0) else {
        return false;
    };
    lateness.count > 0 && lateness.p95 > (1000.0 / rate).max(10.0)
}

/// Per-request CSV rows (times in ms since the client's epoch).
pub fn write_csv(path: &std::path::Path, records: &[RequestRecord]) -> anyhow::Result<()> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "index",
        "scheduled_ms",
        "start_ms",
        "first_byte_ms",
        "first_token_ms",
        "end_ms",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "chunks",
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "http_status",
        "error",
        "error_detail",
        "request_id",
    ])?;
    let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
    let opt = |v: Option<String>| v.unwrap_or_default();
    let mut sorted: Vec<&RequestRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.index);
    for r in sorted {
        w.write_record([
            r.index.to_string(),
            ms(r.scheduled_us),
            ms(r.start_us),
            opt(r.first_byte_us.map(ms)),
            opt(r.first_token_us.map(ms)),
            ms(r.end_us),
            opt(r.ttft_ms().map(|v| format!("{v:.3}"))),
            opt(r.tpot_ms().map(|v| format!("{v:.3}"))),
            format!("{:.3}", r.e2e_ms()),
            r.chunks.to_string(),
            opt(r.usage.prompt_tokens.map(|v| v.to_string())),
            opt(r.usage.completion_tokens.map(|v| v.to_string())),
            opt(r.cached_tokens().map(|v| v.to_string())),
            opt(r.http_status.map(|v| v.to_string())),
            r.error.map(|e| e.as_str().to_string()).unwrap_or_default(),
            r.error_detail.clone(),
            opt(r.request_id.clone()),
        ])?;
    }
    let bytes = w.into_inner().context("cannot render the CSV")?;
    crate::outfile::write_atomic(path, &bytes)?;
    Ok(())
}
