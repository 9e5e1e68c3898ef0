//! Latency statistics over many requests: `LatencyStats`, the microsecond histogram
//! and its percentiles.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;

use super::{ErrorClass, RequestRecord};
use crate::report::Percentiles;

/// Latency statistics over many requests (histograms in microseconds).
#[derive(Debug, Clone)]
pub struct LatencyStats {
    pub ttft: Histogram<u64>,
    pub itl: Histogram<u64>,
    pub tpot: Histogram<u64>,
    pub e2e: Histogram<u64>,
    pub requests: u64,
    pub errors: u64,
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Failed requests by what they are evidence of (`capacity`, `transport`, `server`).
    pub errors_by_class: BTreeMap<String, u64>,
    /// HTTP status of every failed request that got one.
    pub errors_by_status: BTreeMap<u16, u64>,
    /// Requests sent a second time on a fresh connection after a reuse race (not errors).
    pub reconnects: u64,
    /// First error's detail per kind (evidence).
    pub error_examples: BTreeMap<String, String>,
    pub output_tokens: u64,
    pub chunks: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub last_success_at: Option<DateTime<Utc>>,
    /// Longest gap between output deltas, one value per streamed request (µs).
    pub stream_gap: Histogram<u64>,
    /// The longest of those gaps that fell inside a tool call (µs), if any did.
    pub tool_call_gap_max_us: Option<u64>,
    /// Time to the first tool-call delta, per request that streamed a tool call (µs).
    pub first_tool_call: Histogram<u64>,
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
        }
    }
}

impl LatencyStats {
    pub fn record(&mut self, r: &RequestRecord) {
        self.requests += 1;
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
                .or_insert_with(|| r.error_detail.clone());
            return;
        }
        if let Some(t) = r.first_token_us {
            self.ttft
                .saturating_record(t.saturating_sub(r.start_us).max(1));
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

    pub fn error_rate(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.errors as f64 / self.requests as f64
        }
    }

    pub fn ttft_ms(&self) -> Percentiles {
        percentiles(&self.ttft)
    }
    pub fn itl_ms(&self) -> Percentiles {
        percentiles(&self.itl)
    }
    pub fn tpot_ms(&self) -> Percentiles {
        percentiles(&self.tpot)
    }
    pub fn e2e_ms(&self) -> Percentiles {
        percentiles(&self.e2e)
    }
    /// Percentiles of the per-request longest gap between output deltas.
    pub fn stream_gap_ms(&self) -> Percentiles {
        percentiles(&self.stream_gap)
    }
    pub fn first_tool_call_ms(&self) -> Percentiles {
        percentiles(&self.first_tool_call)
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
