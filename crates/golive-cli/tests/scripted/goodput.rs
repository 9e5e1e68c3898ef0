//! Goodput (issue 27, item 1): the requests, and their tokens, that met every per-request
//! objective, per ramp step, in the soak and in `golive load --goodput`. The scripted server
//! streams 4 tokens 30 ms apart, so every request takes at least 90 ms end to end: an
//! objective above that is met by all of them, one below it by none.

use crate::common;
use crate::fault_server;

use std::process::Command;

use common::{check, report};
use fault_server::{start, Fault};

fn slow_server(rt: &tokio::runtime::Runtime) -> fault_server::FaultServer {
    rt.block_on(start(Fault::Ok {
        tokens: 4,
        delay_ms: 30,
    }))
}

fn load_json(url: &str, goodput: &[&str]) -> serde_json::Value {
    let out = Command::new(common::golive_bin())
        .args([
            "load",
            "--url",
            url,
            "--requests",
            "8",
            "--concurrency",
            "2",
        ])
        .args(["--max-tokens", "4", "--no-calibrate", "--format", "json"])
        .arg("--goodput")
        .args(goodput)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::load_summary(&out.stdout)
}

#[test]
fn load_counts_the_requests_within_every_objective() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = slow_server(&rt);

    let all = load_json(&server.url, &["ttft:5000", "e2el:5000"]);
    let g = &all["goodput"];
    assert_eq!(g["met_requests"], 8, "{all:#}");
    assert_eq!(g["met_output_tokens"], 32, "{all:#}");
    assert_eq!(g["slo_attainment"], 1.0);
    assert_eq!(g["slo"]["e2e_ms"], 5000.0);
    let rps = g["requests_per_s"].as_f64().unwrap();
    let rate = all["request_rate"].as_f64().unwrap();
    assert!(
        (rps - rate).abs() < 1e-9,
        "all met: goodput {rps} = rate {rate}"
    );

    // 20 ms end to end cannot be met when the tokens alone take 90 ms.
    let none = load_json(&server.url, &["ttft:5000", "e2el:20"]);
    assert_eq!(none["goodput"]["met_requests"], 0, "{none:#}");
    assert_eq!(none["goodput"]["slo_attainment"], 0.0);
    assert_eq!(none["goodput"]["requests_per_s"], 0.0);
}

#[test]
fn load_without_objectives_has_no_goodput_and_a_bad_key_is_refused() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = slow_server(&rt);
    let out = Command::new(common::golive_bin())
        .args(["load", "--url", &server.url, "--requests", "2"])
        .args(["--max-tokens", "4", "--no-calibrate", "--format", "json"])
        .output()
        .unwrap();
    let v = common::load_summary(&out.stdout);
    assert!(v.get("goodput").is_none(), "{v:#}");
    for bad in ["itl:50", "ttft", "ttft:-1", "ttft:1e99"] {
        let out = Command::new(common::golive_bin())
            .args(["load", "--url", &server.url, "--goodput", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "--goodput {bad} is usage");
    }
}

fn accept_json(url: &str, out: &std::path::Path, slo: &[&str]) -> serde_json::Value {
    let mut c = common::accept_without_agent(url, out);
    c.args([
        "--concurrency",
        "2",
        "--output-tokens",
        "4",
        "--max-context",
        "512",
    ])
    .args([
        "--duration",
        "2s",
        "--skip",
        "prefix-cache",
        "--skip",
        "agreement",
    ])
    .args(slo);
    let o = c.output().unwrap();
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    report(out)
}

#[test]
fn accept_reports_goodput_per_ramp_step_and_for_the_soak() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = slow_server(&rt);
    let dir = tempfile::tempdir().unwrap();
    let r = accept_json(
        &server.url,
        dir.path(),
        &["--slo-ttft-p95-ms", "5000", "--slo-e2e-p95-ms", "5000"],
    );
    let steps = r["measurements"]["ramp"].as_array().unwrap();
    assert!(!steps.is_empty());
    for s in steps {
        let g = &s["goodput"];
        assert_eq!(g["slo_attainment"], 1.0, "{s:#}");
        assert!(g["requests_per_s"].as_f64().unwrap() > 0.0, "{s:#}");
        assert!(g["output_tokens_per_s"].as_f64().unwrap() > 0.0, "{s:#}");
    }
    let first = check(&r, "ramp_c1_short");
    assert!(
        first["measurement"]
            .as_str()
            .unwrap()
            .contains("(100% within the SLO)"),
        "{first:#}"
    );
    let soak = check(&r, "soak");
    assert_eq!(soak["data"]["goodput"]["slo_attainment"], 1.0, "{soak:#}");
    // The soak runs open loop at 80% of the ramp's rate: the client's self-check is kept.
    assert_eq!(soak["data"]["client_limited"], false, "{soak:#}");
    assert!(
        soak["data"]["schedule_lateness_ms"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(soak["data"]["client_cpu_share"].as_f64().unwrap() > 0.0);

    // An end-to-end objective no request can meet: no goodput, and the step fails on it.
    let dir = tempfile::tempdir().unwrap();
    let r = accept_json(
        &server.url,
        dir.path(),
        &["--slo-e2e-p95-ms", "20", "--skip", "soak"],
    );
    let first = check(&r, "ramp_c1_short");
    assert_eq!(first["status"], "fail", "{first:#}");
    assert!(
        first["measurement"].as_str().unwrap().contains("E2E p95"),
        "{first:#}"
    );
    assert_eq!(first["data"]["goodput"]["slo_attainment"], 0.0, "{first:#}");
    assert_eq!(r["verdict"], "expand", "{}", r["verdict_reason"]);
}

#[test]
fn without_objectives_the_report_has_no_goodput() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = slow_server(&rt);
    let dir = tempfile::tempdir().unwrap();
    let r = accept_json(&server.url, dir.path(), &["--skip", "soak"]);
    for s in r["measurements"]["ramp"].as_array().unwrap() {
        assert!(s.get("goodput").is_none(), "{s:#}");
    }
}
