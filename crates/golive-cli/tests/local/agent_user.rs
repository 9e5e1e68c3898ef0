//! The user's own agent (`--tools`, `--cases`), `--no-content`, regression files and
//! `golive replay`, against the real local llama-server with the tool-call template.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use golive::agent::AgentOptions;
use golive::report::{decide_verdict, Impact, Owner, Status, Verdict};

use common::agent::{jinja_server, stage, tool_template_server, TOOL_TEMPLATE_PORT};

/// Nothing listens here (the range is ours; 18219 is never started).
const DEAD_PORT: u16 = 18219;

fn fixtures() -> PathBuf {
    common::fixture_path("agent/user")
}

fn regression_files(out: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(out.join("regressions")) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

fn replay(file: &Path, url: &str, extra: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::golive_bin())
        .arg("replay")
        .arg(file)
        .args(["--url", url])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_tools_and_cases_replace_the_examples_and_block_on_failure() {
    let url = tool_template_server();
    let out = tempfile::tempdir().unwrap();
    let opts = AgentOptions {
        repeat: 1,
        agent_max_tokens: 48,
        tools: Some(fixtures().join("tools.json")),
        cases: Some(fixtures().join("cases.toml")),
        agent_only: vec![
            "agent_case_".into(),
            "agent_stream_case_order".into(),
            "agent_tool_choice_named_".into(),
        ],
        agent_server_log: Some(common::local_server_log(TOOL_TEMPLATE_PORT)),
        ..AgentOptions::default()
    };
    let checks = stage(&url, &opts, out.path()).await;
    for c in &checks {
        eprintln!(
            "{:<44} {:?} {:?} owner={:?} {}",
            c.id, c.status, c.impact, c.owner, c.measurement
        );
    }
    let ids: Vec<&str> = checks.iter().map(|c| c.id.as_str()).collect();
    for want in [
        "agent_case_order_status",
        "agent_case_broken_parcel",
        "agent_case_small_talk",
        "agent_stream_case_order_status",
        "agent_tool_choice_named_lookup_order",
        "agent_tool_choice_named_create_ticket",
    ] {
        assert!(ids.contains(&want), "{want} missing from {ids:?}");
    }
    // The example tool-call prompts are replaced by the user's.
    assert!(!ids.contains(&"agent_tool_required_arg") && !ids.contains(&"agent_tools_choice"));
    for c in &checks {
        assert_eq!(c.data["user_schema"], true, "{}", c.id);
        if c.status == Status::Fail {
            // On the user's own schemas a failure blocks the release.
            assert_eq!(c.impact, Impact::Interface, "{c:?}");
            assert!(c.owner.is_some());
        }
    }
    // tool_choice "required" is grammar-constrained by this template: the call comes back
    // well-formed, so whatever is still wrong is the model's choice of tool or arguments.
    let order = checks
        .iter()
        .find(|c| c.id == "agent_case_order_status")
        .unwrap();
    if order.status == Status::Fail {
        assert_eq!(order.owner, Some(Owner::Model), "{order:?}");
    }
    if checks.iter().any(|c| c.status == Status::Fail) {
        assert_eq!(decide_verdict(&checks).0, Verdict::Rebuild);
    }
    // A parser failure answered with HTTP 500 is also in the server's log (--agent-server-log).
    for c in checks
        .iter()
        .filter(|c| c.measurement.contains("parser_error"))
    {
        let codes: Vec<&str> = c.data["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["code"].as_str().unwrap())
            .collect();
        assert!(
            codes.contains(&"parser_exception_in_log"),
            "{}: {codes:?}",
            c.id
        );
        assert_eq!(c.owner, Some(Owner::Parser));
    }

    // Every failing request was saved; replaying one that still fails exits 1.
    let regs = regression_files(out.path());
    let failed: usize = checks
        .iter()
        .map(|c| c.data["repeat"].as_u64().unwrap() - c.data["passed"].as_u64().unwrap())
        .sum::<u64>() as usize;
    assert!(
        regs.len() >= failed,
        "{} files for {failed} failures",
        regs.len()
    );
    if let Some(first) = regs.first() {
        let (code, stdout, stderr) = replay(first, &url, &[]);
        assert!(code == 1 || code == 0, "{code} {stdout} {stderr}");
        assert!(
            stdout.contains(if code == 0 { "PASS" } else { "FAIL" }),
            "{stdout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_content_keeps_prompts_and_answers_out() {
    let url = tool_template_server();
    let out = tempfile::tempdir().unwrap();
    let cases = out.path().join("private.jsonl");
    // tool_choice auto on this template makes llama.cpp's parser fail (HTTP 500): a
    // failure, so a regression file is written.
    std::fs::write(
        &cases,
        r#"{"name": "private", "prompt": "Customer ZEBRA-4711 (born 1970-01-01) asks where order A-1234 is.", "tool": "lookup_order"}"#,
    )
    .unwrap();
    let opts = AgentOptions {
        repeat: 1,
        agent_max_tokens: 32,
        tools: Some(fixtures().join("tools.json")),
        cases: Some(cases),
        agent_only: vec!["agent_case_".into()],
        no_content: true,
        ..AgentOptions::default()
    };
    let checks = stage(&url, &opts, out.path()).await;
    assert_eq!(checks.len(), 1);
    let report = serde_json::to_string(&checks).unwrap();
    assert!(!report.contains("ZEBRA"), "{report}");
    assert!(
        report.contains("sha256"),
        "the request is kept as hashes: {report}"
    );
    let regs = regression_files(out.path());
    assert!(!regs.is_empty(), "{:?}", checks[0]);
    for r in &regs {
        let text = std::fs::read_to_string(r).unwrap();
        assert!(!text.contains("ZEBRA"), "{text}");
        assert!(text.contains("\"content_withheld\": true"));
    }
    // Such a file cannot be replayed: a clear refusal, exit 2.
    let (code, _, stderr) = replay(&regs[0], &url, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("withheld"), "{stderr}");
}

#[test]
fn replay_passes_fails_and_reports_an_unreachable_server() {
    let url = jinja_server();
    let dir = tempfile::tempdir().unwrap();
    let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"], "additionalProperties": false});
    let reg = |expect: serde_json::Value, request: serde_json::Value| {
        serde_json::json!({"golive_regression": 1, "check": "agent_structured_valid_schema",
            "saved_at": "2026-01-01T00:00:00Z", "url": "http://127.0.0.1:1", "expect": expect,
            "content_withheld": false, "request": request,
            "observed": {"kind": "reply", "problems": [], "duration_ms": 1}})
    };
    // Structured output is enforced by the server: this case passes (exit 0).
    let good = dir.path().join("good.json");
    std::fs::write(
        &good,
        reg(
            serde_json::json!({"answer": "json", "schema": schema}),
            serde_json::json!({"model": "x", "max_tokens": 24, "temperature": 0,
                "messages": [{"role": "user", "content": "Is the sky blue? Answer as JSON."}],
                "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}),
        )
        .to_string(),
    )
    .unwrap();
    let (code, stdout, stderr) = replay(&good, &url, &["--format", "json"]);
    assert_eq!(code, 0, "{stdout} {stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["passed"], 1);
    // Expecting a 4xx for a valid request fails (exit 1) and says why.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        reg(
            serde_json::json!({"answer": "client_error"}),
            serde_json::json!({"model": "x", "max_tokens": 4,
                "messages": [{"role": "user", "content": "Hi"}]}),
        )
        .to_string(),
    )
    .unwrap();
    let (code, stdout, _) = replay(&bad, &url, &[]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("invalid_request_accepted"), "{stdout}");
    // Nobody listening: exit 3.
    let (code, stdout, stderr) = replay(
        &good,
        &format!("http://127.0.0.1:{DEAD_PORT}"),
        &["--model", "x"],
    );
    assert_eq!(code, 3, "{stdout} {stderr}");
    // Not a regression file: usage error.
    std::fs::write(dir.path().join("x.json"), "{}").unwrap();
    let (code, _, stderr) = replay(&dir.path().join("x.json"), &url, &[]);
    assert_eq!(code, 2, "{stderr}");
}
