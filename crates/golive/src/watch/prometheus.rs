//! The part of Prometheus' HTTP API that `watch --prometheus` reads
//! (`/api/v1/query_range`), with serde for its JSON. Errors say what the server
//! answered (HTTP status, `errorType`/`error`), never a bare decode failure.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct ApiResponse {
    status: String,
    data: Option<RangeData>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RangeData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<RawSeries>,
}

#[derive(Debug, Deserialize)]
struct RawSeries {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// One series of a range query: its labels (`__name__` included) and `(unix s, value)`.
#[derive(Debug, Clone)]
pub struct Series {
    /// The series' labels, `__name__` included.
    pub labels: BTreeMap<String, String>,
    /// `(unix seconds, value)` samples in time order; values that do not parse are left out.
    pub points: Vec<(f64, f64)>,
}

/// A Prometheus server's query API.
pub struct PrometheusApi {
    client: reqwest::Client,
    base: url::Url,
    timeout: Duration,
}

impl PrometheusApi {
    /// An API at `base` (the server's root URL) over `client`; each request and body read must
    /// finish within `timeout`.
    pub fn new(client: reqwest::Client, base: &str, timeout: Duration) -> anyhow::Result<Self> {
        let mut base = url::Url::parse(base).with_context(|| format!("invalid URL {base:?}"))?;
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        Ok(PrometheusApi {
            client,
            base,
            timeout,
        })
    }

    /// `query_range` over `[start, end]` (unix seconds) every `step`.
    pub async fn query_range(
        &self,
        query: &str,
        start: f64,
        end: f64,
        step: Duration,
    ) -> anyhow::Result<Vec<Series>> {
        let mut url = self.base.join("api/v1/query_range")?;
        url.query_pairs_mut()
            .append_pair("query", query)
            .append_pair("start", &format!("{start:.3}"))
            .append_pair("end", &format!("{end:.3}"))
            .append_pair("step", &format!("{}", step.as_secs_f64().max(0.001)));
        let shown = format!("{}api/v1/query_range?query={query}", self.base);
        let resp = tokio::time::timeout(self.timeout, self.client.get(url).send())
            .await
            .map_err(|_| anyhow::anyhow!("{shown} gave no answer within {:?}", self.timeout))?
            .with_context(|| format!("cannot reach {}", self.base))?;
        let status = resp.status();
        let max = crate::client::MAX_BODY * 4;
        let body = tokio::time::timeout(self.timeout, crate::client::read_limited(resp, max))
            .await
            .map_err(|_| anyhow::anyhow!("{shown}: the answer stopped midway"))?
            .with_context(|| format!("cannot read the answer of {shown}"))?;
        anyhow::ensure!(
            !body.cut,
            "{shown}: {}",
            crate::client::LimitedBody::too_large(max)
        );
        let body = String::from_utf8_lossy(&body.bytes);
        let parsed: ApiResponse = serde_json::from_str(&body).with_context(|| {
            format!(
                "{shown} answered HTTP {status} with no Prometheus API JSON: {}",
                crate::text::truncate(&body, 200)
            )
        })?;
        if parsed.status != "success" {
            anyhow::bail!(
                "Prometheus refused the query {query:?}: {}: {}",
                parsed.error_type.unwrap_or_default(),
                parsed.error.unwrap_or_default()
            );
        }
        let data = parsed
            .data
            .with_context(|| format!("{shown}: the answer has no data"))?;
        anyhow::ensure!(
            data.result_type == "matrix",
            "{shown}: expected a matrix, got {}",
            data.result_type
        );
        Ok(data
            .result
            .into_iter()
            .map(|s| Series {
                labels: s.metric,
                points: s
                    .values
                    .into_iter()
                    .filter_map(|(t, v)| v.parse::<f64>().ok().map(|v| (t, v)))
                    .collect(),
            })
            .collect())
    }
}

/// The matchers of `{job="vllm"}` (or `job="vllm"`), without the braces.
pub fn selector_matchers(selector: &str) -> anyhow::Result<String> {
    let s = selector.trim();
    let inner = s
        .strip_prefix('{')
        .map(|x| x.strip_suffix('}'))
        .unwrap_or(Some(s))
        .with_context(|| format!("--selector {selector:?}: unbalanced braces"))?;
    let inner = inner.trim().trim_end_matches(',').to_string();
    // The parser checks the matchers, so a typo is a clear error, not an empty fleet.
    if !inner.is_empty() {
        crate::text::check_promql_depth(&inner)?;
        promql_parser::parser::parse(&format!("up{{{inner}}}")).map_err(|e| {
            anyhow::anyhow!("--selector {selector:?} is no label matcher list: {e}")
        })?;
    }
    Ok(inner)
}

/// `inner` and `extra` joined into one `{...}`.
pub fn with_matchers(inner: &str, extra: &str) -> String {
    match (inner.is_empty(), extra.is_empty()) {
        (true, _) => format!("{{{extra}}}"),
        (false, true) => format!("{{{inner}}}"),
        (false, false) => format!("{{{inner},{extra}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_join_and_typos_are_refused() {
        let m = selector_matchers(r#"{job="vllm"}"#).unwrap();
        assert_eq!(m, r#"job="vllm""#);
        assert_eq!(
            with_matchers(&m, r#"__name__=~"vllm:.+""#),
            r#"{job="vllm",__name__=~"vllm:.+"}"#
        );
        assert_eq!(selector_matchers("").unwrap(), "");
        assert!(selector_matchers(r#"{job="vllm}"#).is_err());
    }
}
