//! `golive rules`: the generated alerting rules pass the real `promtool check rules`,
//! and `promtool test rules` exercises every alert, firing and not firing, with
//! vLLM's current and pre-0.11 metric names.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn write_baseline(dir: &Path, baseline: Value) {
    let mut report = golive::report::Report::new(vec!["http://127.0.0.1:1".into()]);
    report.baseline = serde_json::from_value(baseline).unwrap();
    report.save_json(dir).unwrap();
}

fn run_rules(dir: &Path, extra: &[&str]) -> String {
    let out = Command::new(common::golive_bin())
        .args(["rules", "--baseline", dir.to_str().unwrap(), "-o"])
        .arg(dir.join("rules.yml"))
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "golive rules failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(dir.join("rules.yml")).unwrap()
}

fn promtool_ok(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The annotations of each generated alert (promtool compares them exactly).
fn annotations(rules_yaml: &str) -> std::collections::BTreeMap<String, Value> {
    let file: Value = serde_norway::from_str(rules_yaml).unwrap();
    file["groups"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_string(),
                r["annotations"].clone(),
            )
        })
        .collect()
}

/// The rules of a baseline with every figure (the cache hit ratio given) and the
/// gateway's tool-error counter; `extra` goes to `golive rules`.
fn full_baseline_rules(dir: &Path, cache_hit_ratio: f64, extra: &[&str]) -> String {
    write_baseline(
        dir,
        json!({"cache_hit_ratio": cache_hit_ratio, "ttft_p50_ms": 250.0, "waiting_max": 4,
               "request_rate_rps": 2.0, "accepted_concurrency": 16, "kv_cache_usage_max": 0.7}),
    );
    let counter = ["--tool-error-counter", "gateway_tool_call_failures_total"];
    run_rules(dir, &[&counter[..], extra].concat())
}

#[test]
fn rules_pass_promtool_check_for_full_and_empty_baselines() {
    if !common::promtool_installed() {
        return;
    }
    let full = tempfile::tempdir().unwrap();
    let yaml = full_baseline_rules(full.path(), 0.9, &[]);
    let (ok, out) = promtool_ok(&["check", "rules", "rules.yml"], full.path());
    assert!(ok, "{out}\n{yaml}");
    assert!(out.contains("SUCCESS: 8 rules found"), "{out}");

    // Without baseline numbers the rules that need them are left out and named.
    let empty = tempfile::tempdir().unwrap();
    write_baseline(empty.path(), json!({}));
    let yaml = run_rules(empty.path(), &[]);
    assert!(yaml.contains("# Left out: cache_regression"), "{yaml}");
    assert!(yaml.contains("# Left out: tool_schema"), "{yaml}");
    let (ok, out) = promtool_ok(&["check", "rules", "rules.yml"], empty.path());
    assert!(ok, "{out}\n{yaml}");

    // promtool really checks: a broken expression is refused.
    std::fs::write(
        empty.path().join("broken.yml"),
        yaml.replace("vllm:num_requests_waiting)", "vllm:num_requests_waiting"),
    )
    .unwrap();
    let (ok, out) = promtool_ok(&["check", "rules", "broken.yml"], empty.path());
    assert!(!ok, "promtool accepted a broken rule: {out}");
}

fn alert(name: &str, labels: Value, ann: &std::collections::BTreeMap<String, Value>) -> Value {
    json!({"exp_labels": labels, "exp_annotations": ann[name]})
}

/// promtool unit tests for every alert; `ann` are the generated annotations.
fn alert_tests(ann: &std::collections::BTreeMap<String, Value>) -> Value {
    let s = |name: &str, inst: &str, values: &str| json!({"series": format!("{name}{{job=\"vllm\",instance=\"{inst}\",engine=\"0\",model_name=\"m\"}}"), "values": values});
    let l = |inst: &str, trigger: Option<&str>, severity: &str| {
        let mut v = json!({"job": "vllm", "instance": inst, "severity": severity});
        if let Some(t) = trigger {
            v["trigger"] = json!(t);
        }
        v
    };
    json!([
        {   // a: the queue grows by one a minute at 1 rps (accepted 2): fires.
            // b: the same queue at 5 rps, above the accepted rate: quiet.
            // c: a queue within the accepted peak of 4: quiet.
            "interval": "1m",
            "input_series": [
                s("vllm:num_requests_waiting", "a", "0+1x30"),
                s("vllm:e2e_request_latency_seconds_count", "a", "0+60x30"),
                s("vllm:num_requests_waiting", "b", "0+1x30"),
                s("vllm:e2e_request_latency_seconds_count", "b", "0+300x30"),
                s("vllm:num_requests_waiting", "c", "3x30"),
                s("vllm:e2e_request_latency_seconds_count", "c", "0+60x30"),
            ],
            "alert_rule_test": [
                {"eval_time": "20m", "alertname": "GoliveQueueGrowth",
                 "exp_alerts": [alert("GoliveQueueGrowth", l("a", Some("queue_growth"), "critical"), ann)]},
                // Not before the condition held for `for: 5m` (waiting > 4 from minute 5).
                {"eval_time": "8m", "alertname": "GoliveQueueGrowth", "exp_alerts": []},
            ],
        },
        {   // a: current names, 10% hits, 0.5 s mean TTFT: fires. b: the same with the
            // pre-0.11 gpu_prefix_cache_* names: fires. c: 10% hits but 0.1 s TTFT: quiet.
            // d: 95% hits, slow TTFT: quiet.
            "interval": "1m",
            "input_series": [
                s("vllm:prefix_cache_hits_total", "a", "0+600x30"),
                s("vllm:prefix_cache_queries_total", "a", "0+6000x30"),
                s("vllm:time_to_first_token_seconds_sum", "a", "0+30x30"),
                s("vllm:time_to_first_token_seconds_count", "a", "0+60x30"),
                s("vllm:gpu_prefix_cache_hits_total", "b", "0+600x30"),
                s("vllm:gpu_prefix_cache_queries_total", "b", "0+6000x30"),
                s("vllm:time_to_first_token_seconds_sum", "b", "0+30x30"),
                s("vllm:time_to_first_token_seconds_count", "b", "0+60x30"),
                s("vllm:prefix_cache_hits_total", "c", "0+600x30"),
                s("vllm:prefix_cache_queries_total", "c", "0+6000x30"),
                s("vllm:time_to_first_token_seconds_sum", "c", "0+6x30"),
                s("vllm:time_to_first_token_seconds_count", "c", "0+60x30"),
                s("vllm:prefix_cache_hits_total", "d", "0+5700x30"),
                s("vllm:prefix_cache_queries_total", "d", "0+6000x30"),
                s("vllm:time_to_first_token_seconds_sum", "d", "0+30x30"),
                s("vllm:time_to_first_token_seconds_count", "d", "0+60x30"),
            ],
            "alert_rule_test": [
                {"eval_time": "15m", "alertname": "GolivePrefixCacheBelowBaseline",
                 "exp_alerts": [
                    alert("GolivePrefixCacheBelowBaseline", l("a", Some("cache_regression"), "critical"), ann),
                    alert("GolivePrefixCacheBelowBaseline", l("b", Some("cache_regression"), "critical"), ann),
                 ]},
            ],
        },
        {   // a: two restarts in 30 minutes: fires. b: one restart: quiet.
            // c: no process_start_time_seconds, but prompt_tokens_total reset twice: fires.
            "interval": "1m",
            "input_series": [
                {"series": "process_start_time_seconds{job=\"vllm\",instance=\"a\"}", "values": "1000x8 2000x8 3000x8"},
                s("vllm:num_requests_running", "a", "1x25"),
                {"series": "process_start_time_seconds{job=\"vllm\",instance=\"b\"}", "values": "1000x12 2000x12"},
                s("vllm:num_requests_running", "b", "1x25"),
                s("vllm:prompt_tokens_total", "c", "0+100x8 0+100x8 0+100x8"),
            ],
            "alert_rule_test": [
                {"eval_time": "24m", "alertname": "GoliveRepeatedRestart",
                 "exp_alerts": [
                    alert("GoliveRepeatedRestart", l("a", Some("oom"), "critical"), ann),
                    alert("GoliveRepeatedRestart", l("c", Some("oom"), "critical"), ann),
                 ]},
            ],
        },
        {   // Preemptions at 8 running (accepted 16): warns; at 32 running: quiet.
            // KV usage 0.9 (current name) and 0.95 (pre-0.11 name) above 0.84: warn; 0.5: quiet.
            "interval": "1m",
            "input_series": [
                s("vllm:num_preemptions_total", "a", "0+1x30"),
                s("vllm:num_requests_running", "a", "8x30"),
                s("vllm:num_preemptions_total", "b", "0+1x30"),
                s("vllm:num_requests_running", "b", "32x30"),
                s("vllm:kv_cache_usage_perc", "a", "0.9x30"),
                s("vllm:gpu_cache_usage_perc", "b", "0.95x30"),
                s("vllm:kv_cache_usage_perc", "c", "0.5x30"),
            ],
            "alert_rule_test": [
                {"eval_time": "15m", "alertname": "GoliveKvPreemptionsAtAcceptedLoad",
                 "exp_alerts": [alert("GoliveKvPreemptionsAtAcceptedLoad", l("a", None, "warning"), ann)]},
                {"eval_time": "15m", "alertname": "GoliveKvCacheAboveAccepted",
                 "exp_alerts": [
                    alert("GoliveKvCacheAboveAccepted", l("a", None, "warning"), ann),
                    alert("GoliveKvCacheAboveAccepted", l("b", None, "warning"), ann),
                 ]},
            ],
        },
        {   // a: one request running, tokens rise for 10 minutes, then stand still: fires.
            // b: idle (nothing running or waiting, counter flat): quiet.
            // c: busy and generating: quiet.
            "interval": "1m",
            "input_series": [
                s("vllm:num_requests_running", "a", "1x30"),
                s("vllm:num_requests_waiting", "a", "0x30"),
                s("vllm:generation_tokens_total", "a", "0+100x10 1000x20"),
                s("vllm:num_requests_running", "b", "0x30"),
                s("vllm:num_requests_waiting", "b", "0x30"),
                s("vllm:generation_tokens_total", "b", "500x30"),
                s("vllm:num_requests_running", "c", "4x30"),
                s("vllm:num_requests_waiting", "c", "2x30"),
                s("vllm:generation_tokens_total", "c", "0+100x30"),
            ],
            "alert_rule_test": [
                {"eval_time": "20m", "alertname": "GoliveStalled",
                 "exp_alerts": [alert("GoliveStalled", l("a", Some("stalled"), "critical"), ann)]},
                // While tokens still advanced, nothing fires.
                {"eval_time": "8m", "alertname": "GoliveStalled", "exp_alerts": []},
            ],
        },
        {   // An XID 79 on GPU 3 at minute 10: fires while it is in the window, then clears.
            // Tool-call failures rise at minute 11: fires.
            "interval": "1m",
            "input_series": [
                {"series": "DCGM_FI_DEV_XID_ERRORS{Hostname=\"node1\",gpu=\"3\"}", "values": "0x9 79x3 0x30"},
                {"series": "DCGM_FI_DEV_XID_ERRORS{Hostname=\"node1\",gpu=\"2\"}", "values": "0x40"},
                s("gateway_tool_call_failures_total", "a", "0x10 1 2 2 2 2 2"),
                s("gateway_tool_call_failures_total", "b", "0x16"),
            ],
            "alert_rule_test": [
                {"eval_time": "12m", "alertname": "GoliveGpuXidError",
                 "exp_alerts": [{"exp_labels": {"Hostname": "node1", "gpu": "3", "severity": "critical", "trigger": "driver_nccl"},
                                 "exp_annotations": ann["GoliveGpuXidError"]}]},
                {"eval_time": "30m", "alertname": "GoliveGpuXidError", "exp_alerts": []},
                {"eval_time": "14m", "alertname": "GoliveToolCallFailures",
                 "exp_alerts": [alert("GoliveToolCallFailures", l("a", Some("tool_schema"), "critical"), ann)]},
            ],
        },
    ])
}

fn write_tests(dir: &Path, ann: &std::collections::BTreeMap<String, Value>) {
    let test_file = json!({
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": alert_tests(ann),
    });
    std::fs::write(
        dir.join("rules_test.yml"),
        serde_norway::to_string(&test_file).unwrap(),
    )
    .unwrap();
}

#[test]
fn promtool_test_rules_exercises_every_alert() {
    if !common::promtool_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let yaml = full_baseline_rules(dir.path(), 0.9, &[]);
    let ann = annotations(&yaml);
    write_tests(dir.path(), &ann);
    let (ok, out) = promtool_ok(&["test", "rules", "rules_test.yml"], dir.path());
    assert!(ok, "{out}");
    assert!(out.contains("SUCCESS"), "{out}");

    // The tests can fail: with a stricter cache baseline instance d (95% hits) fires too,
    // and promtool reports the unexpected alert.
    let strict = tempfile::tempdir().unwrap();
    full_baseline_rules(strict.path(), 1.0, &["--tolerance", "0.01"]);
    let strict_yaml = std::fs::read_to_string(strict.path().join("rules.yml")).unwrap();
    write_tests(strict.path(), &annotations(&strict_yaml));
    let (ok, out) = promtool_ok(&["test", "rules", "rules_test.yml"], strict.path());
    assert!(!ok, "a stricter baseline should change the alerts: {out}");
    assert!(out.contains("GolivePrefixCacheBelowBaseline"), "{out}");
    assert!(out.contains("instance=\"d\""), "{out}");
}
