//! The validator on answers in the shapes public issue threads report (vLLM tool calling,
//! reasoning fields, structured output). Each fixture under `tests/fixtures/agent/` names
//! its thread, holds a request, the expectation, the answer (JSON body, SSE events, or an
//! HTTP error) and the problems the validator must find, with their owners.

use std::path::PathBuf;

use golive::agent::assemble_bytes;
use golive::agent::http_error;
use golive::agent::{judge, parse_completion, Answer, Outcome, Severity};
use serde_json::Value;

fn fixtures() -> Vec<(String, Value)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                serde_json::from_str(&text).unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The outcome a fixture describes.
fn outcome(f: &Value) -> Outcome {
    if let Some(body) = f.get("response") {
        let (reply, envelope) = parse_completion(body);
        return Outcome::Reply {
            status: 200,
            reply,
            envelope,
        };
    }
    if let Some(events) = f.get("sse").and_then(Value::as_array) {
        let mut wire = String::new();
        for e in events {
            wire.push_str("data: ");
            wire.push_str(e.as_str().unwrap());
            wire.push_str("\n\n");
        }
        let (reply, envelope) = assemble_bytes(wire.as_bytes());
        return Outcome::Reply {
            status: 200,
            reply,
            envelope,
        };
    }
    let http = &f["http"];
    http_error(
        http["status"].as_u64().unwrap() as u16,
        http["body"].as_str().unwrap(),
    )
}

#[test]
fn fixtures_name_their_threads() {
    let all = fixtures();
    assert!(
        all.len() >= 8,
        "expected the fixture set, found {}",
        all.len()
    );
    for (name, f) in &all {
        assert!(
            f["thread"].as_str().is_some_and(|t| !t.is_empty()),
            "{name} names no thread"
        );
    }
}

#[test]
fn validator_finds_exactly_the_reported_problems() {
    for (name, f) in fixtures() {
        let answer: Answer = serde_json::from_value(f["expect"].clone())
            .unwrap_or_else(|e| panic!("{name}: bad expect: {e}"));
        let problems = judge(&f["request"], &answer, &outcome(&f));
        let mut fails: Vec<(String, String)> = problems
            .iter()
            .filter(|p| p.severity == Severity::Fail)
            .map(|p| {
                (
                    p.code.to_string(),
                    serde_json::to_value(p.owner)
                        .unwrap()
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect();
        let mut want_fails: Vec<(String, String)> = f["want_fail"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w[0].as_str().unwrap().to_string(),
                    w[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        fails.sort();
        want_fails.sort();
        assert_eq!(fails, want_fails, "{name}: failures (all: {problems:#?})");
        let mut warns: Vec<&str> = problems
            .iter()
            .filter(|p| p.severity == Severity::Warn)
            .map(|p| p.code.as_str())
            .collect();
        let mut want_warns: Vec<&str> = f["want_warn"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        warns.sort();
        want_warns.sort();
        assert_eq!(warns, want_warns, "{name}: warnings (all: {problems:#?})");
        if let Some(field) = f.get("reasoning_field").and_then(Value::as_str) {
            match outcome(&f) {
                Outcome::Reply { reply, .. } => {
                    assert_eq!(reply.reasoning_field.as_deref(), Some(field), "{name}");
                    assert!(
                        reply.reasoning.is_some_and(|r| r.contains("7 x 13")),
                        "{name}"
                    );
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}

#[test]
fn streamed_and_non_streamed_shapes_agree_on_the_same_call() {
    // The cut-off call of #53269 once more, complete this time, both ways.
    use golive::agent::shape;
    let body = serde_json::json!({"object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function",
            "function": {"name": "web_search", "arguments": "{\"query\": \"rain\", \"max_results\": 3}"}}]}}],
        "usage": {"completion_tokens": 20}});
    let (plain, _) = parse_completion(&body);
    let wire = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"type\":\"function\",\"function\":{\"name\":\"web_search\",\"arguments\":\"{\\\"query\\\": \"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"rain\\\", \\\"max_results\\\": 3}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let (streamed, problems) = assemble_bytes(wire.as_bytes());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(shape(&streamed), shape(&plain));
    assert_eq!(streamed.calls()[0].arguments, plain.calls()[0].arguments);
}
