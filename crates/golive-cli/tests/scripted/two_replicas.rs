//! Issue 27 item 6: the replica arithmetic checked on real servers. One llama-server pinned to
//! core 0 is measured by `accept`'s ramp; its capacity answer predicts what two replicas hold;
//! `golive load` spreads the same requests over two replicas (cores 0 and 1) and measures it.

use crate::common;

use std::process::Command;

use common::{check, report, ServerGuard};

#[test]
fn two_real_replicas_hold_what_the_capacity_answer_predicts_within_15_percent() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "two replicas need two cores"
        );
        eprintln!("skipped: one core");
        return;
    }
    let (pa, pb) = (18301u16, 18302u16);
    let _ga = ServerGuard(pa);
    let _gb = ServerGuard(pb);
    let a = common::start_local_server_on_core(pa, 0);
    let b = common::start_local_server_on_core(pb, 1);

    // One replica: a closed-loop ramp up to 4 in flight; every step holds (the objective is
    // far away), so the capacity is the best step's goodput.
    let dir = tempfile::tempdir().unwrap();
    let out = common::accept_without_agent(&a, dir.path())
        .args([
            "--concurrency",
            "4",
            "--ramp-requests",
            "4",
            "--output-tokens",
            "16",
        ])
        .args([
            "--max-context",
            "256",
            "--slo-e2e-p95-ms",
            "120000",
            "--target-rate",
            "1",
        ])
        .args(common::RAMP_ONLY)
        .output()
        .unwrap();
    let r = report(dir.path());
    let cap = check(&r, "capacity");
    let per_replica = cap["data"]["per_replica"]
        .as_f64()
        .unwrap_or_else(|| panic!("{cap:#}\n{}", common::text(&out)));
    let kind = cap["data"]["kind"].as_str().unwrap().to_string();
    let steps: Vec<golive::report::RampStep> =
        serde_json::from_value(r["measurements"]["ramp"].clone()).unwrap();
    let best = steps
        .iter()
        .filter(|s| s.label.contains(&format!(" x {kind}")))
        .max_by_key(|s| s.concurrency)
        .unwrap();
    let predicted = 2.0 * per_replica;

    // Two replicas, the same requests at twice the concurrency, spread over both.
    let json = dir.path().join("two.json");
    let out = Command::new(common::golive_bin())
        .args([
            "load",
            "--url",
            &a,
            "--url",
            &b,
            "--ignore-eos",
            "--goodput",
            "e2el:120000",
        ])
        .args(["--concurrency", &(2 * best.concurrency).to_string()])
        .args(["--requests", &(6 * best.concurrency).to_string()])
        .args(["--prompt-tokens", &best.prompt_tokens.to_string()])
        .args(["--max-tokens", &best.max_tokens.to_string(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let two: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(two["errors"], 0, "{two:#}");
    assert!(two["url"].as_str().unwrap().contains(&b), "{}", two["url"]);
    let measured = two["goodput"]["requests_per_s"].as_f64().unwrap();
    let error = (measured - predicted).abs() / predicted;
    eprintln!(
        "one replica {per_replica:.2} req/s ({} x {kind}); two predicted {predicted:.2}, measured {measured:.2} req/s: error {:.0}%",
        best.concurrency,
        error * 100.0
    );
    assert!(
        error <= 0.15,
        "two replicas: predicted {predicted:.2}, measured {measured:.2} req/s ({:.0}%)\n{}",
        error * 100.0,
        cap["measurement"]
    );
}
