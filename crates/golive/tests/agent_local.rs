//! The agent stage end to end against the real local llama-server (Gemma 3 270M on CPU):
//! once with llama.cpp's fallback template (no tool-call support) and once with
//! `scripts/templates/gemma3-tool-calls.jinja`, which llama.cpp's chat parser recognises,
//! as the positive tool-call control. Repeat 1 and tiny max_tokens keep it short.

mod common;

use std::path::Path;
use std::time::Duration;

use golive::agent::{run_stage, AgentOptions};
use golive::report::{Check, Owner, Status};
use golive::target::{Target, TargetArgs};

const PLAIN_PORT: u16 = 18210;
const TEMPLATE_PORT: u16 = 18211;

fn target(url: &str) -> Target {
    let args = TargetArgs {
        api_key: None,
        model: None,
        request_timeout: Duration::from_secs(90),
        connect_timeout: Duration::from_secs(5),
    };
    Target::new(url, &args).unwrap()
}

fn template_file() -> String {
    common::repo_root()
        .join("scripts/templates/gemma3-tool-calls.jinja")
        .display()
        .to_string()
}

async fn stage(url: &str, opts: &AgentOptions, out: &Path) -> Vec<Check> {
    let mut t = target(url);
    let client = t.http_client().unwrap();
    let model = t.resolve_model(&client).await.unwrap();
    run_stage(&t, &client, &model, opts, out).await
}

fn find<'a>(checks: &'a [Check], id: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

fn show(checks: &[Check]) {
    for c in checks {
        eprintln!(
            "{:<44} {:?} owner={:?} {}",
            c.id, c.status, c.owner, c.measurement
        );
        if c.status == Status::Fail {
            eprintln!("    evidence: {}", c.evidence.replace('\n', "\n    "));
        }
    }
}

fn small_opts() -> AgentOptions {
    AgentOptions {
        repeat: 1,
        agent_max_tokens: 40,
        agent_cut_tokens: 6,
        ..AgentOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_template_stage_is_honest_about_a_tiny_model() {
    let url = common::start_local_server(PLAIN_PORT, &["--jinja"]);
    let out = tempfile::tempdir().unwrap();
    let checks = stage(&url, &small_opts(), out.path()).await;
    show(&checks);
    // Structured output is grammar-constrained by the server: it must pass, streamed too.
    assert_eq!(
        find(&checks, "agent_structured_valid_schema").status,
        Status::Pass
    );
    assert_eq!(
        find(&checks, "agent_stream_structured_valid_schema").status,
        Status::Pass
    );
    // An invalid schema gets a clean 4xx with a message.
    assert_eq!(
        find(&checks, "agent_structured_invalid_schema").status,
        Status::Pass
    );
    // A free tool call the 270M model does not make is the model's fault, never the server's.
    let free = find(&checks, "agent_tool_required_arg");
    if free.status != Status::Pass {
        assert_eq!(free.owner, Some(Owner::Model), "{free:?}");
        assert_eq!(
            free.status,
            Status::Warn,
            "built-in examples only warn on model faults"
        );
    }
    // Every check is an agent check; every failure names an owner and left a regression file.
    for c in &checks {
        assert_eq!(c.stage, golive::report::Stage::Agent);
        if c.status == Status::Fail {
            assert!(c.owner.is_some(), "{c:?}");
            assert!(
                !c.data["regressions"].as_array().unwrap().is_empty(),
                "{c:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recognised_template_makes_required_tool_calls_a_positive_control() {
    let template = template_file();
    let url = common::start_local_server(
        TEMPLATE_PORT,
        &["--jinja", "--chat-template-file", &template],
    );
    let out = tempfile::tempdir().unwrap();
    let checks = stage(&url, &small_opts(), out.path()).await;
    show(&checks);
    let required = find(&checks, "agent_tool_choice_required");
    assert_ne!(required.status, Status::Fail, "{required:?}");
    let streamed = find(&checks, "agent_stream_tool_choice_required");
    assert_ne!(streamed.status, Status::Fail, "{streamed:?}");
}
