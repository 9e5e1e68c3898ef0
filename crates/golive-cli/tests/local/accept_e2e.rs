//! `golive accept` end to end against the real local llama-server (llama.cpp on CPU):
//! a run with the prompt cache on must prove prefix reuse; the same server started
//! with `--no-cache-prompt` must fail the prefix-cache check with the cause "feature off".
//! Ports 18201-18202 are this test's own; the servers are stopped at the end.

use crate::common;

use std::path::Path;

use common::check;

/// The checks that failed, with their evidence (what a verdict assertion shows).
fn failed_checks(r: &serde_json::Value) -> serde_json::Value {
    r["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["status"] == "fail")
        .cloned()
        .collect::<Vec<_>>()
        .into()
}

fn accept(url: &str, out: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let o = common::accept_without_agent(url, out)
        .args([
            "--concurrency",
            "2",
            "--max-context",
            "384",
            "--output-tokens",
            "8",
        ])
        .args([
            "--ramp-requests",
            "1",
            "--duration",
            "6s",
            "--prefix-words",
            "150",
        ])
        .args([
            "--short-prompt",
            "64",
            "--request-timeout",
            "120s",
            "--reviewer",
            "ci",
        ])
        .args(extra)
        .output()
        .unwrap();
    let report = std::fs::read(out.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null);
    (
        o.status.code(),
        report,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn accept_against_the_local_llama_server_proves_cache_reuse_and_detects_it_off() {
    let dir = tempfile::tempdir().unwrap();

    // 1. Prompt cache on (llama.cpp's default).
    let url = common::start_local_server(18201, &[]);
    let guard = common::ServerGuard(18201);
    // The fixture is a 270M base model: its greedy answer to the contract's question echoes
    // the prompt in a loop, and whether that loop's unit is short enough to be called runaway
    // repetition depends on the CPU's float path and the cache state (CI at 1e82dd1 failed
    // contract_path here, a run on this machine passed). The contract is run in part 2.
    let (code, r, stderr) = accept(&url, &dir.path().join("on"), &["--skip", "contract"]);
    drop(guard);
    assert_eq!(r["complete"], true, "{stderr}");
    assert_eq!(r["engine"], "llama.cpp");
    for id in [
        "service_health",
        "service_models",
        "service_metrics",
        "basic_chat",
        "basic_stream",
    ] {
        assert_eq!(check(&r, id)["status"], "pass", "{id}: {:#}", check(&r, id));
    }
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "pass", "{pc:#}");
    let samples = r["measurements"]["prefix_cache"].as_array().unwrap();
    assert_eq!(samples.len(), 5);
    let cold = &samples[0];
    let warm = &samples[1];
    assert_eq!(cold["role"], "cold");
    // A fresh prefix: at most the template's first token(s) come from the cache.
    let warm_cached = warm["cached_tokens"].as_u64().unwrap();
    assert!(warm_cached > 100, "{warm}");
    assert!(
        cold["cached_tokens"].as_u64().unwrap() * 4 < warm_cached,
        "{cold}"
    );
    assert!(warm["prefill_ms"].as_f64().unwrap() < cold["prefill_ms"].as_f64().unwrap());
    // The warm prefix was compared token by token with the server's tokenizer.
    assert!(
        pc["data"]["tokenized_common_prefix"].as_u64().unwrap() > 100,
        "{pc:#}"
    );
    assert_eq!(r["measurements"]["ramp"].as_array().unwrap().len(), 4);
    assert!(r["baseline"]["prefill_warm_ms"].as_f64().is_some());
    assert!(
        r["baseline"]["cache_hit_ratio"].as_f64().unwrap() > 0.0,
        "{:#}",
        r["baseline"]
    );
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        matches!(verdict, "release" | "observe"),
        "{verdict}: {}; failed checks: {:#}",
        r["verdict_reason"],
        failed_checks(&r)
    );
    assert_eq!(code, Some(if verdict == "release" { 0 } else { 1 }));

    // 2. The same server with --no-cache-prompt: the proof must fail, cause "feature off".
    let url = common::start_local_server(18202, &["--no-cache-prompt"]);
    let guard = common::ServerGuard(18202);
    let (code, r, stderr) = accept(
        &url,
        &dir.path().join("off"),
        // (No agreement stage either: with the cache off there is no cached path to compare.)
        &["--skip", "ramp", "--skip", "soak", "--skip", "agreement"],
    );
    drop(guard);
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "fail", "{stderr}\n{pc:#}");
    assert_eq!(pc["data"]["cause"], "feature_off", "{pc:#}");
    assert!(
        pc["measurement"]
            .as_str()
            .unwrap()
            .starts_with("feature off"),
        "{pc:#}"
    );
    assert_eq!(pc["impact"], "environment");
    // The contract's greedy request reached the real server and its answer was judged (pass,
    // or a degenerate pattern of the base model's echo loop), never an HTTP failure
    // (`HTTP 0` when no answer came).
    let path = check(&r, "contract_path");
    let judged = path["measurement"].as_str().unwrap_or("");
    assert!(
        !judged.is_empty() && !judged.starts_with("HTTP "),
        "{path:#}"
    );
    assert_eq!(r["verdict"], "rebuild");
    assert_eq!(code, Some(1));
}
