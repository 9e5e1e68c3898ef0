//! Latency statistics over many requests: `LatencyStats`, the microsecond histogram
//! and its percentiles.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;

use super::{ErrorClass, RequestRecord};
use crate::report::{Goodput, Percentiles};
use serde::{Deserialize, Serialize};

/// Per-request service-level objectives, as vLLM's `--goodput` names them (`ttft`, `tpot`,
/// `e2el`, in ms): a request meets them when it succeeded and each given one holds for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Time to the first token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Mean time per output token after the first (the request's own inter-token latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// End to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
}

impl Slo {
    /// `None` when no objective is given.
    pub fn new(ttft_ms: Option<f64>, tpot_ms: Option<f64>, e2e_ms: Option<f64>) -> Option<Self> {
        let slo = Slo {
            ttft_ms,
            tpot_ms,
            e2e_ms,
        };
        (slo != Slo::default()).then_some(slo)
    }

    /// Whether `r` succeeded within every objective. An objective the request gives no
    /// figure for (no TPOT with one output token) does not count against it.
    pub fn met_by(&self, r: &RequestRecord) -> bool {
        let within = |limit: Option<f64>, value: Option<f64>| {
            limit.is_none_or(|l| value.is_none_or(|v| v <= l))
        };
        r.ok()
            && within(self.ttft_ms, r.ttft_ms())
            && within(self.tpot_ms, r.tpot_ms())
            && within(self.e2e_ms, Some(r.e2e_ms()))
    }
}

/// Latency statistics over many requests (histograms in microseconds).
#[derive(Debug, Clone)]
pub struct LatencyStats {
    /// Time to first token, one value per successful request (µs).
    pub ttft: Histogram<u64>,
    /// Gaps between output chunks, every one of every successful request (µs).
    pub itl: Histogram<u64>,
    /// Mean time per output token after the first, per successful request (µs).
    pub tpot: Histogram<u64>,
    /// Whole request, per successful request (µs).
    pub e2e: Histogram<u64>,
    /// Requests recorded, failed ones included.
    pub requests: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Failed requests by [`super::ErrorKind`] name (`timeout`, `http_status`, ...).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Failed requests by what they are evidence of (`capacity`, `transport`, `server`).
    pub errors_by_class: BTreeMap<String, u64>,
    /// HTTP status of every failed request that got one.
    pub errors_by_status: BTreeMap<u16, u64>,
    /// Requests sent a second time on a fresh connection after a reuse race (not errors).
    pub reconnects: u64,
    /// First error's detail per kind (evidence).
    pub error_examples: BTreeMap<String, String>,
    /// Output tokens of the successful requests.
    pub output_tokens: u64,
    /// Stream events of the successful requests.
    pub chunks: u64,
    /// Prompt tokens of the successful requests, as the server counted them.
    pub prompt_tokens: u64,
    /// Prompt tokens served from the cache, of the successful requests.
    pub cached_tokens: u64,
    /// When the latest successful request ended.
    pub last_success_at: Option<DateTime<Utc>>,
    /// Longest gap between output deltas, one value per streamed request (µs).
    pub stream_gap: Histogram<u64>,
    /// The longest of those gaps that fell inside a tool call (µs), if any did.
    pub tool_call_gap_max_us: Option<u64>,
    /// Time to the first tool-call delta, per request that streamed a tool call (µs).
    pub first_tool_call: Histogram<u64>,
    /// How late each request started against its planned start (µs; open loop: the
    /// schedule, closed loop: about zero).
    pub schedule_lag: Histogram<u64>,
    /// The objectives requests are counted against (goodput), if any.
    pub slo: Option<Slo>,
    /// Requests that met every objective of `slo`.
    pub slo_met: u64,
    /// Their output tokens.
    pub slo_met_output_tokens: u64,
}

impl Default for LatencyStats {
    fn default() -> Self {
        // 1 µs .. 1 h at 3 significant figures; saturating_record clamps outliers.
        let h = || new_histogram();
        LatencyStats {
            ttft: h(),
            itl: h(),
            tpot: h(),
            e2e: h(),
            requests: 0,
            errors: 0,
            errors_by_kind: BTreeMap::new(),
            errors_by_class: BTreeMap::new(),
            errors_by_status: BTreeMap::new(),
            reconnects: 0,
            error_examples: BTreeMap::new(),
            output_tokens: 0,
            chunks: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            last_success_at: None,
            stream_gap: h(),
            tool_call_gap_max_us: None,
            first_tool_call: h(),
            schedule_lag: h(),
            slo: None,
            slo_met: 0,
            slo_met_output_tokens: 0,
        }
    }
}

impl LatencyStats {
    /// Empty statistics that count requests against `slo`.
    pub fn with_slo(slo: Option<Slo>) -> Self {
        LatencyStats {
            slo,
            ..LatencyStats::default()
        }
    }

    /// Counts `r`: its times when it succeeded, its error otherwise.
    pub fn record(&mut self, r: &RequestRecord) {
        self.requests += 1;
        self.schedule_lag
            .saturating_record(r.start_us.saturating_sub(r.scheduled_us).max(1));
        if self.slo.is_some_and(|slo| slo.met_by(r)) {
            self.slo_met += 1;
            self.slo_met_output_tokens += r.output_tokens();
        }
        self.reconnects += u64::from(r.reconnected);
        if let Some(kind) = r.error {
            self.errors += 1;
            *self
                .errors_by_class
                .entry(ErrorClass::of(kind, r.http_status).as_str().to_string())
                .or_default() += 1;
            if let Some(status) = r.http_status {
                *self.errors_by_status.entry(status).or_default() += 1;
            }
            *self
                .errors_by_kind
                .entry(kind.as_str().to_string())
                .or_default() += 1;
            self.error_examples
                .entry(kind.as_str().to_string())
                .or_insert_with(|| match &r.request_id {
                    Some(id) => format!("{} (X-Request-Id {id})", r.error_detail),
                    None => r.error_detail.clone(),
                });
            return;
        }
        if let Some(t) = r.ttft_us() {
            self.ttft.saturating_record(t.max(1));
        }
        for itl in r.itl_us() {
            self.itl.saturating_record(u64::from(itl).max(1));
        }
        if let Some(tpot) = r.tpot_ms() {
            self.tpot.saturating_record(((tpot * 1000.0) as u64).max(1));
        }
        self.e2e
            .saturating_record(r.end_us.saturating_sub(r.start_us).max(1));
        if let Some(gap) = r.longest_gap_us {
            self.stream_gap.saturating_record(u64::from(gap).max(1));
            if r.longest_gap_in_tool_call {
                self.tool_call_gap_max_us = self.tool_call_gap_max_us.max(Some(u64::from(gap)));
            }
        }
        if let Some(t) = r.first_tool_call_us {
            self.first_tool_call.saturating_record(u64::from(t).max(1));
        }
        self.output_tokens += r.output_tokens();
        self.chunks += r.chunks;
        self.prompt_tokens += r.usage.prompt_tokens.unwrap_or(0);
        self.cached_tokens += r.cached_tokens().unwrap_or(0);
        if r.ended_at > self.last_success_at {
            self.last_success_at = r.ended_at;
        }
    }

    /// Failed requests of one class.
    pub fn errors_of(&self, class: ErrorClass) -> u64 {
        self.errors_by_class
            .get(class.as_str())
            .copied()
            .unwrap_or(0)
    }

    /// Failed requests over all requests, 0..1 (0 without requests).
    pub fn error_rate(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.errors as f64 / self.requests as f64
        }
    }

    /// Time to first token percentiles, ms.
    pub fn ttft_ms(&self) -> Percentiles {
        percentiles(&self.ttft)
    }
    /// Inter-token latency percentiles, ms.
    pub fn itl_ms(&self) -> Percentiles {
        percentiles(&self.itl)
    }
    /// Time per output token percentiles, ms.
    pub fn tpot_ms(&self) -> Percentiles {
        percentiles(&self.tpot)
    }
    /// End-to-end latency percentiles, ms.
    pub fn e2e_ms(&self) -> Percentiles {
        percentiles(&self.e2e)
    }
    /// Percentiles of the per-request longest gap between output deltas.
    pub fn stream_gap_ms(&self) -> Percentiles {
        percentiles(&self.stream_gap)
    }
    /// Time to the first tool-call delta percentiles, for requests that streamed one, ms.
    pub fn first_tool_call_ms(&self) -> Percentiles {
        percentiles(&self.first_tool_call)
    }
    /// How late requests started against their planned start (ms).
    pub fn schedule_lateness_ms(&self) -> Percentiles {
        percentiles(&self.schedule_lag)
    }

    /// The share of requests that met every objective (`None` without objectives or
    /// requests).
    pub fn slo_attainment(&self) -> Option<f64> {
        (self.slo.is_some() && self.requests > 0)
            .then(|| self.slo_met as f64 / self.requests as f64)
    }

    /// Requests and output tokens per second that met every objective, over `elapsed`.
    pub fn goodput(&self, elapsed: std::time::Duration) -> Option<Goodput> {
        let secs = elapsed.as_secs_f64();
        (self.slo.is_some() && secs > 0.0).then(|| Goodput {
            slo_attainment: self.slo_attainment().unwrap_or(0.0),
            requests_per_s: self.slo_met as f64 / secs,
            output_tokens_per_s: self.slo_met_output_tokens as f64 / secs,
        })
    }

    /// The longest gap inside a tool call, in ms.
    pub fn tool_call_gap_max_ms(&self) -> Option<f64> {
        self.tool_call_gap_max_us.map(|us| us as f64 / 1000.0)
    }
}

/// A microsecond histogram from 1 µs to one hour, 3 significant figures.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("static bounds are valid")
}

/// Percentiles (ms) of a microsecond histogram.
pub fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    Percentiles {
        count: h.len(),
        mean: h.mean() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p90: ms(h.value_at_quantile(0.90)),
        p95: ms(h.value_at_quantile(0.95)),
        p99: ms(h.value_at_quantile(0.99)),
        max: ms(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ErrorKind;

    #[test]
    fn a_request_meets_the_slo_when_it_succeeded_within_every_objective() {
        // First token at 100 ms, then 3 tokens 20 ms apart, done at 170 ms.
        let rec = RequestRecord {
            start_us: 0,
            first_token_us: Some(100_000),
            token_us: vec![100_000, 120_000, 140_000, 160_000],
            end_us: 170_000,
            ..Default::default()
        };
        let slo = |t, p, e| Slo::new(t, p, e).unwrap();
        assert!(Slo::new(None, None, None).is_none());
        assert!(slo(Some(100.0), Some(20.0), Some(170.0)).met_by(&rec));
        assert!(!slo(Some(99.0), None, None).met_by(&rec));
        assert!(!slo(None, Some(19.0), None).met_by(&rec));
        assert!(!slo(None, None, Some(169.0)).met_by(&rec));
        let failed = RequestRecord {
            error: Some(ErrorKind::Timeout),
            ..rec.clone()
        };
        assert!(!slo(None, None, Some(1e9)).met_by(&failed));

        let mut s = LatencyStats::with_slo(Some(slo(None, None, Some(170.0))));
        s.record(&rec);
        s.record(&failed);
        s.record(&RequestRecord {
            end_us: 400_000,
            ..rec.clone()
        });
        assert_eq!((s.requests, s.slo_met), (3, 1));
        let g = s.goodput(std::time::Duration::from_secs(2)).unwrap();
        assert!((g.slo_attainment - 1.0 / 3.0).abs() < 1e-9);
        assert!((g.requests_per_s - 0.5).abs() < 1e-9);
        assert!(
            (g.output_tokens_per_s - 2.0).abs() < 1e-9,
            "4 tokens in 2 s"
        );
        assert!(LatencyStats::default()
            .goodput(std::time::Duration::from_secs(1))
            .is_none());
    }

    #[test]
    fn stream_gaps_are_summarised_per_request() {
        let gap = |us: u32, in_tool: bool, first_tool: Option<u32>| RequestRecord {
            start_us: 0,
            first_token_us: Some(10),
            token_us: vec![10, 10 + us],
            end_us: u64::from(us) + 20,
            longest_gap_us: Some(us),
            longest_gap_in_tool_call: in_tool,
            first_tool_call_us: first_tool,
            ..Default::default()
        };
        let mut s = LatencyStats::default();
        s.record(&gap(2_000_000, false, None));
        s.record(&gap(500_000, true, Some(40_000)));
        s.record(&gap(30_000, false, None));
        let p = s.stream_gap_ms();
        assert_eq!(p.count, 3);
        assert!((p.max - 2000.0).abs() < 2.0, "{p:?}");
        // Only the gap inside a tool call counts as the parser's.
        assert_eq!(s.tool_call_gap_max_ms(), Some(500.0));
        assert_eq!(s.first_tool_call_ms().count, 1);
    }

    #[test]
    fn stats_from_token_times() {
        let rec = RequestRecord {
            start_us: 1000,
            first_token_us: Some(11_000),
            token_us: vec![10_000, 12_000, 14_000, 16_000],
            end_us: 18_000,
            chunks: 4,
            ..Default::default()
        };
        assert_eq!(rec.ttft_ms(), Some(10.0));
        assert_eq!(rec.tpot_ms(), Some(2.0));
        assert_eq!(rec.e2e_ms(), 17.0);
        let mut s = LatencyStats::default();
        s.record(&rec);
        let itl = s.itl_ms();
        assert_eq!(itl.count, 3);
        assert!((itl.p50 - 2.0).abs() < 0.01, "{itl:?}");
        let mut failed = rec.clone();
        failed.error = Some(ErrorKind::EarlyClose);
        s.record(&failed);
        assert_eq!(s.errors_by_kind.get("early_close"), Some(&1));
        assert_eq!(s.error_rate(), 0.5);
    }
}
