//! `--agent-mix`: agent cases mixed into the ramp and soak, judged like the agent stage.
//! A scripted tool-call parser that breaks only while another request is in flight is
//! caught by `agent_under_load` (owner parser, verdict rebuild); against the real local
//! llama-server the conformance per ramp step lands in report.json.

use crate::common;
use crate::fault_server;

use common::{check, report};
use fault_server::{start, Fault};

#[test]
fn a_parser_that_breaks_only_under_concurrency_fails_agent_under_load() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(start(Fault::ToolParserUnderLoad));
    let dir = tempfile::tempdir().unwrap();
    let out = common::golive(&[
        "accept",
        "--url",
        &server.url,
        "--out",
        dir.path().to_str().unwrap(),
        "--skip",
        "agent",
        "--skip",
        "prefix-cache",
        "--skip",
        "agreement",
        "--concurrency",
        "2",
        "--ramp-requests",
        "6",
        "--duration",
        "2s",
        "--output-tokens",
        "4",
        "--max-context",
        "512",
        "--request-timeout",
        "5s",
        "--agent-mix",
        "0.5",
    ]);
    let r = report(dir.path());
    let ramp = r["measurements"]["ramp"].as_array().unwrap();
    let rate = |s: &serde_json::Value| {
        s["agent"]["conformant"].as_f64().unwrap() / s["agent"]["requests"].as_f64().unwrap()
    };
    for s in ramp {
        assert!(s["agent"]["requests"].as_u64().unwrap() >= 3, "{s:#}");
        if s["concurrency"] == 1 {
            assert_eq!(rate(s), 1.0, "alone the parser is right: {s:#}");
        } else {
            assert!(rate(s) < 1.0, "under concurrency it breaks: {s:#}");
            assert!(
                s["agent"]["failures_by_code"]["tool_call_markup_in_content"]
                    .as_u64()
                    .unwrap()
                    >= 1,
                "{s:#}"
            );
        }
    }
    let c = check(&r, "agent_under_load");
    eprintln!(
        "agent_under_load: {} {}\n{}",
        c["status"], c["measurement"], c["evidence"]
    );
    assert_eq!(c["status"], "fail", "{c:#}");
    assert_eq!(c["owner"], "parser", "{c:#}");
    assert_eq!(c["impact"], "interface", "{c:#}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("tool_call_markup_in_content"),
        "{c:#}"
    );
    assert!(
        c["measurement"]
            .as_str()
            .unwrap()
            .contains("baseline at concurrency 1 100%"),
        "{c:#}"
    );
    // The plain load itself was fine: capacity is not blamed.
    assert_eq!(check(&r, "ramp_c2_short")["status"], "pass");
    assert_eq!(r["verdict"], "rebuild", "{}", r["verdict_reason"]);
    assert!(r["verdict_reason"]
        .as_str()
        .unwrap()
        .contains("agent_under_load"));
    assert_eq!(out.status.code(), Some(1), "{}", common::text(&out));
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("## Agent conformance under load"), "{md}");
    let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
    assert!(junit.contains("agent_under_load"));
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(html.contains("Agent conformance over the ramp"));
}

#[test]
fn conformance_per_ramp_step_on_the_real_server() {
    let url = common::local_server_url();
    let dir = tempfile::tempdir().unwrap();
    let out = common::small_local_accept(
        &url,
        dir.path(),
        &[
            "--skip",
            "prefix-cache",
            "--skip",
            "agreement",
            "--agent-mix",
            "0.5",
            "--agent-max-tokens",
            "32",
        ],
    );
    let r = report(dir.path());
    assert_eq!(r["complete"], true, "{}", common::text(&out));
    let ramp = r["measurements"]["ramp"].as_array().unwrap();
    assert!(ramp.len() >= 4, "{ramp:#?}");
    for s in ramp {
        let a = &s["agent"];
        let (n, ok) = (
            a["requests"].as_u64().unwrap(),
            a["conformant"].as_u64().unwrap(),
        );
        assert!(
            n >= 1 && ok <= n,
            "every step carries agent requests: {s:#}"
        );
    }
    let c = check(&r, "agent_under_load");
    eprintln!("agent_under_load: {} {}", c["status"], c["measurement"]);
    let phases = c["data"]["phases"].as_array().unwrap();
    // Every ramp step and the soak report a rate.
    assert_eq!(phases.len(), ramp.len() + 1, "{c:#}");
    assert!(phases.iter().all(|p| p["rate"].as_f64().is_some()), "{c:#}");
    assert!(c["measurement"].as_str().unwrap().contains("c2 "), "{c:#}");
    // A short soak whose only requests were agent cases warns, it does not fail.
    assert_ne!(
        check(&r, "soak")["status"],
        "fail",
        "{:#}",
        check(&r, "soak")
    );
}
