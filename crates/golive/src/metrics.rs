//! Prometheus `/metrics` scraping with family-aware lookups.
//!
//! Counters appear as `x_total` (plus `x_created`) in newer clients and as `x` in
//! older ones; lookups match the family, so callers name `vllm:prefix_cache_hits`
//! and get the `_total` sample too. Metric names of the engines live in [`names`],
//! not in the callers.

pub mod names;

use anyhow::Context;
use prometheus_parse::{Sample, Scrape, Value};

/// Which serving engine a metrics page (or server) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    Vllm,
    Sglang,
    LlamaCpp,
    /// OpenAI-compatible, engine unknown.
    Openai,
}

impl Engine {
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
    pub samples: Vec<Sample>,
    pub taken_at: std::time::Instant,
}

impl MetricsSnapshot {
    /// Parses Prometheus text exposition format.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        // prometheus-parse drops the `_sum`/`_count` samples of labelled histograms;
        // without the histogram TYPE line every series stays a plain sample (`le` kept).
        // Its name pattern is `\w+`, which rejects the `:` of `vllm:...`, so names are
        // escaped on the way in and restored on the way out.
        let lines = text
            .lines()
            .filter(|l| !(l.starts_with("# TYPE") && l.trim_end().ends_with(" histogram")))
            .map(|l| Ok(escape_name_colons(l)));
        let mut scrape = Scrape::parse(lines).context("cannot parse the Prometheus text")?;
        for s in &mut scrape.samples {
            if s.metric.contains(COLON_ESCAPE) {
                s.metric = s.metric.replace(COLON_ESCAPE, ":");
            }
        }
        Ok(MetricsSnapshot {
            samples: scrape.samples,
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
        let text = resp
            .text()
            .await
            .with_context(|| format!("cannot read {url}"))?;
        Self::parse(&text)
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
        for s in self.family(family) {
            if let Some(v) = scalar(&s.value) {
                found = true;
                total += v;
            }
        }
        found.then_some(total)
    }

    /// Sum over the samples whose label `label` equals `value`.
    pub fn sum_where(&self, family: &str, label: &str, value: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self
            .family(family)
            .filter(|s| s.labels.get(label) == Some(value))
        {
            if let Some(v) = scalar(&s.value) {
                found = true;
                total += v;
            }
        }
        found.then_some(total)
    }

    /// Largest value of a gauge family over all label sets.
    pub fn max(&self, family: &str) -> Option<f64> {
        self.family(family)
            .filter_map(|s| scalar(&s.value))
            .reduce(f64::max)
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
            let (Some(le), Some(v)) = (s.labels.get("le"), scalar(&s.value)) else {
                continue;
            };
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(f64::NAN)
            };
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

const COLON_ESCAPE: &str = "__golive_colon__";

/// Escapes `:` in the metric name of a sample, HELP or TYPE line (never in label values).
fn escape_name_colons(line: &str) -> String {
    let (head, name_and_rest) = if let Some(rest) = line.strip_prefix("# HELP ") {
        ("# HELP ", rest)
    } else if let Some(rest) = line.strip_prefix("# TYPE ") {
        ("# TYPE ", rest)
    } else if line.starts_with('#') {
        return line.to_string();
    } else {
        ("", line)
    };
    let end = name_and_rest
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(name_and_rest.len());
    let (name, rest) = name_and_rest.split_at(end);
    if !name.contains(':') {
        return line.to_string();
    }
    format!("{head}{}{rest}", name.replace(':', COLON_ESCAPE))
}

fn family_matches(metric: &str, family: &str) -> bool {
    matches!(metric.strip_prefix(family), Some("") | Some("_total"))
}

fn scalar(v: &Value) -> Option<f64> {
    match v {
        Value::Counter(x) | Value::Gauge(x) | Value::Untyped(x) => Some(*x),
        _ => None,
    }
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
