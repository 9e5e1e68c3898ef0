//! Engine awareness on a scripted vLLM-like server (vLLM needs GPUs, so it cannot run
//! here): detection from `/version` and `vllm:` metrics, the prefix-cache proof from
//! `vllm:prefix_cache_{queries,hits}` and `/tokenize`, and each of the three failure
//! causes with the impact the verdict needs.

use crate::common;
use crate::fault_server;

use std::path::Path;

use common::check;
use fault_server::{start, Fault};

fn run(fault: Fault, out: &Path) -> (Option<i32>, serde_json::Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(fault));
    let o = common::accept_without_agent(&server.url, out)
        .args([
            "--skip",
            "ramp",
            "--skip",
            "soak",
            "--prefix-words",
            "300",
            "--request-timeout",
            "10s",
        ])
        .output()
        .unwrap();
    let r = serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    drop(server);
    (o.status.code(), r)
}

#[test]
fn vllm_with_prefix_caching_passes_from_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (code, r) = run(
        Fault::Vllm {
            caching: true,
            retention: None,
            nonce_prefix: false,
        },
        dir.path(),
    );
    assert_eq!(r["engine"], "vllm");
    let v = check(&r, "service_version");
    assert!(
        v["measurement"]
            .as_str()
            .unwrap()
            .contains("version 0.33.0"),
        "{v:#}"
    );
    assert!(
        v["measurement"]
            .as_str()
            .unwrap()
            .contains("prefix cache flag True"),
        "{v:#}"
    );
    assert_eq!(v["data"]["max_model_len"], 8192);
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "pass", "{pc:#}");
    let samples = r["measurements"]["prefix_cache"].as_array().unwrap();
    // Hits come from the vLLM counter, in whole 16-token blocks.
    let warm_hits = samples[1]["hits_delta"].as_f64().unwrap();
    assert!(warm_hits >= 300.0 && warm_hits % 16.0 == 0.0, "{samples:?}");
    assert!(samples[0]["queries_delta"].as_f64().unwrap() > 300.0);
    // Prefill from vllm:request_prefill_time_seconds drops for the warm request.
    assert!(
        samples[1]["prefill_ms"].as_f64().unwrap() < samples[0]["prefill_ms"].as_f64().unwrap()
    );
    assert_eq!(r["verdict"], "release", "{}", r["verdict_reason"]);
    assert_eq!(code, Some(0));
}

#[test]
fn vllm_with_caching_disabled_is_feature_off_and_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (code, r) = run(
        Fault::Vllm {
            caching: false,
            retention: None,
            nonce_prefix: false,
        },
        dir.path(),
    );
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "fail");
    assert_eq!(pc["data"]["cause"], "feature_off");
    assert!(
        pc["measurement"]
            .as_str()
            .unwrap()
            .contains("False: disabled"),
        "{pc:#}"
    );
    assert!(pc["next_step"]
        .as_str()
        .unwrap()
        .contains("--enable-prefix-caching"));
    assert_eq!(r["verdict"], "rebuild");
    assert_eq!(code, Some(1));
}

#[test]
fn template_with_a_changing_first_token_is_prefix_not_identical() {
    let dir = tempfile::tempdir().unwrap();
    let (_, r) = run(
        Fault::Vllm {
            caching: true,
            retention: None,
            nonce_prefix: true,
        },
        dir.path(),
    );
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "fail", "{pc:#}");
    assert_eq!(pc["data"]["cause"], "prefix_not_identical", "{pc:#}");
    assert_eq!(pc["data"]["tokenized_common_prefix"], 0);
    assert_eq!(pc["owner"], "gateway");
}

#[test]
fn hybrid_model_retention_interval_is_a_limit_and_observe() {
    let dir = tempfile::tempdir().unwrap();
    let (code, r) = run(
        Fault::Vllm {
            caching: true,
            retention: Some(256),
            nonce_prefix: false,
        },
        dir.path(),
    );
    let pc = check(&r, "prefix_cache");
    assert_eq!(pc["status"], "fail", "{pc:#}");
    assert_eq!(pc["data"]["cause"], "retention_boundary", "{pc:#}");
    assert!(pc["measurement"]
        .as_str()
        .unwrap()
        .contains("VLLM_PREFIX_CACHE_RETENTION_INTERVAL"));
    assert_eq!(pc["impact"], "limit");
    assert_eq!(r["verdict"], "observe", "{}", r["verdict_reason"]);
    assert_eq!(code, Some(1));
}
