//! Prometheus `/metrics` scraping with family-aware lookups; the page is read by
//! [`Reader`], golive's own reader of the text format.
//!
//! Counters appear as `x_total` (plus `x_created`) in newer clients and as `x` in
//! older ones; lookups match the family, so callers name `vllm:prefix_cache_hits`
//! and get the `_total` sample too. Metric names of the engines live in one table
//! (`metrics/names.rs`), not in the callers.

mod exposition;
pub(crate) mod names;

use anyhow::Context;

pub use exposition::{Labels, MetricType, ParseError, Reader, Record, Sample};

/// The largest `/metrics` page read (vLLM's is about 60 KB).
pub const MAX_PAGE_BYTES: usize = 64 << 20;

/// Problems of one page kept in [`MetricsSnapshot::problems`]; the rest are counted.
const MAX_PROBLEMS_KEPT: usize = 20;

/// Which serving engine a metrics page (or server) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// vLLM (`vllm:` metrics).
    Vllm,
    /// SGLang (`sglang:` metrics).
    Sglang,
    /// llama.cpp's `llama-server` (`llamacpp:` metrics).
    LlamaCpp,
    /// OpenAI-compatible, engine unknown.
    Openai,
}

impl Engine {
    /// The engine as reports show it (`vllm`, `llama.cpp`, `openai-compatible`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::LlamaCpp => "llama.cpp",
            Engine::Openai => "openai-compatible",
        }
    }
}

/// One parsed `/metrics` page.
#[derive(Debug, Clone)]
pub struct MetricsSnapshot {
    /// Every sample on the page, in page order.
    pub samples: Vec<Sample>,
    /// Lines that could not be read (the first few; the other samples are kept).
    pub problems: Vec<ParseError>,
    /// How many lines could not be read, all of them.
    pub problem_count: usize,
    /// When the page was parsed.
    pub taken_at: std::time::Instant,
}

impl MetricsSnapshot {
    /// Parses Prometheus text exposition format (or OpenMetrics text).
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        Self::parse_bytes(text.as_bytes())
    }

    /// Parses a page as received; a line that cannot be read (not UTF-8, cut short,
    /// malformed) is kept in `problems` and the rest of the page is read. An error only
    /// when no line could be read as a sample but some could not: not a metrics page.
    pub fn parse_bytes(page: &[u8]) -> anyhow::Result<Self> {
        let mut samples = Vec::new();
        let mut problems = Vec::new();
        let mut problem_count = 0;
        for record in exposition::Reader::new(page) {
            match record {
                Ok(exposition::Record::Sample(s)) => samples.push(s),
                Ok(_) => {}
                Err(e) => {
                    problem_count += 1;
                    if problems.len() < MAX_PROBLEMS_KEPT {
                        problems.push(e);
                    }
                }
            }
        }
        if samples.is_empty() {
            if let Some(first) = problems.first() {
                anyhow::bail!(
                    "not a Prometheus text page: {first}{}",
                    match problem_count - 1 {
                        0 => String::new(),
                        n => format!(" (and {n} more unreadable line(s))"),
                    }
                );
            }
        }
        Ok(MetricsSnapshot {
            samples,
            problems,
            problem_count,
            taken_at: std::time::Instant::now(),
        })
    }

    /// GETs and parses `url` (a full `/metrics` URL).
    pub async fn scrape(client: &reqwest::Client, url: &str) -> anyhow::Result<Self> {
        let resp = client
            .get(url)
            .send()
            .await
            .with_context(|| format!("cannot reach {url}"))?;
        let status = resp.status();
        anyhow::ensure!(status.is_success(), "GET {url} answered HTTP {status}");
        let mut resp = resp;
        let mut page = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .with_context(|| format!("cannot read {url}"))?
        {
            anyhow::ensure!(
                page.len() + chunk.len() <= MAX_PAGE_BYTES,
                "{url} sent more than {} MiB; not read as a metrics page",
                MAX_PAGE_BYTES >> 20
            );
            page.extend_from_slice(&chunk);
        }
        Self::parse_bytes(&page).with_context(|| format!("cannot read the page of {url}"))
    }

    /// Samples whose name is the family, `family_total`, or (for plain names) `family`.
    pub fn family<'a>(&'a self, family: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples
            .iter()
            .filter(move |s| family_matches(&s.metric, family))
    }

    /// True when any sample of the family is present.
    pub fn has(&self, family: &str) -> bool {
        self.family(family).next().is_some()
    }

    /// Sum of a counter/gauge family over all label sets (engines, models).
    pub fn sum(&self, family: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for v in self.family(family).filter_map(scalar) {
            found = true;
            total += v;
        }
        found.then_some(total)
    }

    /// Sum over the samples whose label `label` equals `value`.
    pub fn sum_where(&self, family: &str, label: &str, value: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for v in self
            .family(family)
            .filter(|s| s.labels.get(label) == Some(value))
            .filter_map(scalar)
        {
            found = true;
            total += v;
        }
        found.then_some(total)
    }

    /// Largest value of a gauge family over all label sets.
    pub fn max(&self, family: &str) -> Option<f64> {
        self.family(family).filter_map(scalar).reduce(f64::max)
    }

    /// A label's value on the first sample of the family (e.g. `enable_prefix_caching`
    /// of `vllm:cache_config_info`).
    pub fn label(&self, family: &str, label: &str) -> Option<String> {
        self.family(family)
            .find_map(|s| s.labels.get(label).map(str::to_string))
    }

    /// `(sum, count)` of a histogram family, summed over label sets.
    pub fn histogram_sum_count(&self, family: &str) -> Option<(f64, f64)> {
        let sum = self.sum(&format!("{family}_sum"))?;
        let count = self.sum(&format!("{family}_count"))?;
        Some((sum, count))
    }

    /// Cumulative bucket counts `(le, count)` of a histogram family, summed over label
    /// sets and sorted by bound.
    pub fn histogram_buckets(&self, family: &str) -> Vec<(f64, f64)> {
        let mut by_le: Vec<(f64, f64)> = Vec::new();
        for s in self.family(&format!("{family}_bucket")) {
            let Some(le) = s.labels.get("le") else {
                continue;
            };
            let (le, v) = (le.parse().unwrap_or(f64::NAN), s.value);
            match by_le.iter_mut().find(|(b, _)| *b == le) {
                Some(entry) => entry.1 += v,
                None => by_le.push((le, v)),
            }
        }
        by_le.retain(|(le, _)| !le.is_nan());
        by_le.sort_by(|a, b| a.0.total_cmp(&b.0));
        by_le
    }

    /// The engine these metrics come from, by name prefix.
    pub fn engine(&self) -> Option<Engine> {
        [Engine::Vllm, Engine::Sglang, Engine::LlamaCpp]
            .into_iter()
            .find(|e| {
                let prefix = names::engine_prefix(*e).unwrap_or_default();
                self.samples.iter().any(|s| s.metric.starts_with(prefix))
            })
    }
}

fn family_matches(metric: &str, family: &str) -> bool {
    matches!(metric.strip_prefix(family), Some("") | Some("_total"))
}

/// A sample's value where summing it makes sense: not a summary's quantile.
fn scalar(s: &Sample) -> Option<f64> {
    (s.kind != MetricType::Summary || s.labels.get("quantile").is_none()).then_some(s.value)
}

/// Difference of a counter between two snapshots; `None` when it went down (a
/// restart reset the counter) or is missing in either.
pub fn counter_delta(
    before: &MetricsSnapshot,
    after: &MetricsSnapshot,
    family: &str,
) -> Option<f64> {
    let (a, b) = (before.sum(family)?, after.sum(family)?);
    (b >= a).then_some(b - a)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1200.0
vllm:prefix_cache_queries_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="1",model_name="m"} 2.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",enable_prefix_caching="True",engine="0"} 1.0
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="1.0",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 3.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 4.5
vllm:e2e_request_latency_seconds_count{model_name="m"} 3.0
"#;

    #[test]
    fn families_match_total_suffix_and_sum_over_engines() {
        let m = MetricsSnapshot::parse(VLLM).unwrap();
        assert_eq!(m.sum("vllm:prefix_cache_queries"), Some(1200.0));
        assert_eq!(m.sum("vllm:num_requests_waiting"), Some(5.0));
        assert_eq!(m.max("vllm:num_requests_waiting"), Some(3.0));
        assert_eq!(
            m.label("vllm:cache_config_info", "enable_prefix_caching")
                .as_deref(),
            Some("True")
        );
        assert_eq!(
            m.histogram_sum_count("vllm:e2e_request_latency_seconds"),
            Some((4.5, 3.0))
        );
        assert_eq!(
            m.histogram_buckets("vllm:e2e_request_latency_seconds"),
            vec![(1.0, 2.0), (f64::INFINITY, 3.0)]
        );
        assert_eq!(m.engine(), Some(Engine::Vllm));
        // `_created` is a different family, never summed into the counter.
        assert!(m.sum("vllm:prefix_cache_queries_created").is_some());
        assert_eq!(m.sum("vllm:prefix_cache"), None);
    }

    #[test]
    fn counter_reset_is_not_a_negative_delta() {
        let a = MetricsSnapshot::parse("x_total 10\n").unwrap();
        let b = MetricsSnapshot::parse("x_total 2\n").unwrap();
        assert_eq!(counter_delta(&a, &b, "x"), None);
        assert_eq!(counter_delta(&b, &a, "x"), Some(8.0));
    }
}
