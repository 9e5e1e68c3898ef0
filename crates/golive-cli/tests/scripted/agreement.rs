//! The agreement stage: greedy answers to the shipped known-answer prompts, cold against
//! cached and replica against replica. Two identical real llama-servers (the shared
//! one and one of our own, same model and flags) agree; a scripted replica that
//! answers differently fails `agreement_replicas` with the first diverging position.

use crate::common;
use crate::fault_server;

use std::path::Path;

use common::{check, report};

fn accept_agreement(urls: &[&str], out: &Path) -> std::process::Output {
    let mut args = vec!["accept"];
    for u in urls {
        args.extend(["--url", u]);
    }
    args.extend(["--out", out.to_str().unwrap()]);
    for s in ["prefix-cache", "agent", "contract", "ramp", "soak"] {
        args.extend(["--skip", s]);
    }
    args.extend(["--request-timeout", "120s"]);
    common::golive(&args)
}

#[test]
fn identical_servers_agree_and_a_different_replica_fails_with_the_position() {
    let url = common::local_server_url();
    let port = 18551;
    let _guard = common::ServerGuard(port);
    let second = common::start_local_server(port, &[]);

    // Two identical real servers; each also cold against cached.
    let dir = tempfile::tempdir().unwrap();
    let out = accept_agreement(&[&url, &second], dir.path());
    let r = report(dir.path());
    assert_eq!(r["complete"], true, "{}", common::text(&out));
    let replicas = check(&r, "agreement_replicas");
    assert_eq!(replicas["status"], "pass", "{replicas:#}");
    assert!(
        replicas["measurement"]
            .as_str()
            .unwrap()
            .starts_with("3 of 3 answers identical"),
        "{replicas:#}"
    );
    for id in ["agreement_cache", "agreement_cache_node2"] {
        let c = check(&r, id);
        eprintln!("{id}: {} {}", c["status"], c["measurement"]);
        // Measured on llama.cpp: the cached path gives the same tokens (logprobs within
        // a few thousandths of a nat), so anything but a pass is a finding.
        assert_eq!(c["status"], "pass", "{c:#}");
        // The second request really was served from the cache.
        let uses = c["data"]["cache_use"].as_array().unwrap();
        assert!(
            uses.iter()
                .all(|u| u["cached_tokens"].as_u64().unwrap() > 0),
            "{c:#}"
        );
        for cmp in c["data"]["comparisons"].as_array().unwrap() {
            assert!(cmp["max_logprob_diff"].as_f64().unwrap() < 0.1, "{cmp:#}");
        }
    }
    let known = check(&r, "agreement_known_answers");
    eprintln!(
        "agreement_known_answers: {} {}",
        known["status"], known["measurement"]
    );
    assert_ne!(
        known["status"], "fail",
        "a wrong known answer is the model's warning: {known:#}"
    );
    if known["status"] == "warn" {
        assert_eq!(known["owner"], "model");
    }

    // A scripted replica that answers otherwise: the divergence and where it starts.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let replica = rt.block_on(fault_server::start(fault_server::Fault::Replica));
    let dir = tempfile::tempdir().unwrap();
    let out = accept_agreement(&[&url, &replica.url], dir.path());
    let r = report(dir.path());
    let c = check(&r, "agreement_replicas");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert_eq!(c["owner"], "server");
    assert_eq!(c["impact"], "interface");
    let evidence = c["evidence"].as_str().unwrap();
    eprintln!(
        "agreement_replicas: {} {}\n{evidence}",
        c["status"], c["measurement"]
    );
    assert!(evidence.contains("first diverging token"), "{evidence}");
    let cmps = c["data"]["comparisons"].as_array().unwrap();
    let diverged: Vec<_> = cmps.iter().filter(|x| x["same"] == false).collect();
    assert_eq!(diverged.len(), 3, "{c:#}");
    for d in &diverged {
        let div = &d["divergence"];
        assert!(
            div["token_index"].as_u64().is_some() && div["char_index"].as_u64().is_some(),
            "{d:#}"
        );
        assert!(div["b"].as_str().unwrap().len() <= 40);
        assert_eq!(div["near_tie"], false, "{d:#}");
    }
    // The copy prompt: the real server's " QX-7731..." and the replica's " QX-7713."
    // part at character 6.
    let copy = diverged
        .iter()
        .find(|d| {
            d["prompt"]
                .as_str()
                .unwrap()
                .starts_with("copy_long_context")
        })
        .unwrap();
    if copy["divergence"]["a"].as_str().unwrap().starts_with("31") {
        assert_eq!(copy["divergence"]["char_index"], 6, "{copy:#}");
    }
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
    assert!(r["verdict_reason"]
        .as_str()
        .unwrap()
        .contains("agreement_replicas"));
    assert_eq!(out.status.code(), Some(1));
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("agreement_replicas"));
}
