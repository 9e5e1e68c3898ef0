//! The agent stage end to end against the real local llama-server (Gemma 3 270M on CPU):
//! once with llama.cpp's fallback template (no tool-call support) and once with
//! `scripts/templates/gemma3-tool-calls.jinja`, which llama.cpp's chat parser recognises,
//! as the positive tool-call control. Repeat 1 and tiny max_tokens keep it short.

use crate::common;

use golive::agent::AgentOptions;
use golive::report::{Check, Owner, Status};

use common::agent::{jinja_server, stage, tool_call_template, tool_template_server};
use common::agent::{JINJA_PORT, TOOL_TEMPLATE_PORT};

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

/// Repeat 1, tiny answers, and only the checks whose ids start with `only` (the ones a test
/// asserts: each check costs seconds of the 270M model on CPU).
fn small_opts(only: &[&str]) -> AgentOptions {
    AgentOptions {
        repeat: 1,
        agent_max_tokens: 40,
        agent_cut_tokens: 6,
        agent_only: only.iter().map(|s| s.to_string()).collect(),
        ..AgentOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_template_stage_is_honest_about_a_tiny_model() {
    let url = jinja_server();
    let out = tempfile::tempdir().unwrap();
    let only = [
        "agent_structured_",
        "agent_stream_structured_",
        "agent_tool_required_arg",
        "agent_tool_choice_",
    ];
    let checks = stage(&url, &small_opts(&only), out.path()).await;
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
    // tool_choice "required"/named that come back as text were not enforced: with this
    // template llama.cpp cannot constrain them, which is the server's configuration.
    for id in ["agent_tool_choice_required", "agent_tool_choice_named"] {
        let c = find(&checks, id);
        if c.status != Status::Pass {
            assert_ne!(c.owner, Some(Owner::Model), "{c:?}");
        }
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
    let url = tool_template_server();
    let out = tempfile::tempdir().unwrap();
    let only = [
        "agent_tool_choice_required",
        "agent_stream_tool_choice_required",
        "agent_tool_required_arg",
    ];
    let checks = stage(&url, &small_opts(&only), out.path()).await;
    show(&checks);
    // tool_choice "required" is grammar-constrained into <tool_call>{...}</tool_call>: the call
    // is parsed, its id is set and its arguments validate against the schema, streamed too
    // (where the assembled deltas must have the non-streamed shape).
    for id in [
        "agent_tool_choice_required",
        "agent_stream_tool_choice_required",
    ] {
        let c = find(&checks, id);
        assert_ne!(c.status, Status::Fail, "{c:?}");
        assert_eq!(c.data["passed"], 1, "{c:?}");
    }
    // Free calls (tool_choice auto) on this template make llama.cpp answer HTTP 500 when the
    // model's text does not fit the format: the parser's failure, not the model's.
    let free = find(&checks, "agent_tool_required_arg");
    if free.status == Status::Fail {
        assert_eq!(free.owner, Some(Owner::Parser), "{free:?}");
    }
}

/// The whole default stage (repeat 5), for measuring: `cargo test -p golive --test library agent_local -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn full_default_stage_on_both_templates() {
    for (port, extra) in [
        (JINJA_PORT, vec!["--jinja".to_string()]),
        (
            TOOL_TEMPLATE_PORT,
            vec![
                "--jinja".to_string(),
                "--chat-template-file".to_string(),
                tool_call_template(),
            ],
        ),
    ] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let url = common::start_local_server(port, &extra);
        let out = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let checks = stage(&url, &AgentOptions::default(), out.path()).await;
        eprintln!(
            "== port {port}: {} checks in {:.0} s",
            checks.len(),
            started.elapsed().as_secs_f64()
        );
        show(&checks);
        assert!(checks.len() >= 21);
    }
}
