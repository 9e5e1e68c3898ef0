//! Fuzz entries of the files a user hands golive: report.json (signoff, replay's
//! neighbours), regression files (replay), shard files (load merge) and PromQL (rules
//! --lint, watch --selector).

use super::text;

pub(super) fn report(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let _ = crate::signoff::report_content_digest(&value);
    if let Ok(r) = serde_json::from_value::<crate::report::Report>(value) {
        let _ = crate::report::markdown::render(&r);
        let _ = crate::report::junit::render(&r);
    }
}

pub(super) fn regression(data: &[u8]) {
    let _ = crate::agent::regress::parse(&text(data), std::path::Path::new("fuzz"));
}

pub(super) fn shard(data: &[u8]) {
    crate::load::shard::fuzz_shard(data);
}

pub(super) fn promql(data: &[u8]) {
    let t = text(data);
    if crate::text::check_promql_depth(&t).is_ok() {
        let _ = promql_parser::parser::parse(&t);
    }
    let _ = crate::text::check_yaml_depth(&t);
}

pub(super) const PROMQL_SEEDS: &[&str] = &[
    "sum(rate(vllm:request_success_total{model_name=~\"m.*\"}[5m])) by (model_name)",
    "histogram_quantile(0.95, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])) by (le))",
    "max(vllm:kv_cache_usage_perc) or max(vllm:gpu_cache_usage_perc) > 0.9",
    "-(-(1)) + !up offset 5m @ end()",
    "avg_over_time(vllm:num_requests_waiting[10m:1m]) / on() group_left max(x)",
];

pub(super) const PROMQL_DICT: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "-",
    "!",
    "\"",
    "'",
    "`",
    "by (le)",
    "rate(",
    "sum(",
    "[5m]",
    "offset",
    "@",
    "=~",
    "!=",
    " or ",
    " and ",
    " unless ",
    "on()",
    "group_left",
];
