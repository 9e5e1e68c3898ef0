//! The contract's live items against small scripted servers (raw HTTP/1.1): one that
//! accepts a wrong temperature, one that answers gibberish on one data-parallel rank.

use std::time::Duration;

use golive::contract::{run, ContractOptions};
use golive::contract::{ContractReq, ImmutableParam};
use golive::report::{Owner, Status};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server answering every request with `answer(headers, body) -> (status, json)`.
async fn serve(answer: fn(&str, &Value) -> (u16, Value)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(i) = text.find("\r\n\r\n") {
                        let len: usize = text[..i]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= i + 4 + len {
                            break (
                                text[..i].to_ascii_lowercase(),
                                serde_json::from_slice(&buf[i + 4..i + 4 + len])
                                    .unwrap_or(Value::Null),
                            );
                        }
                    }
                };
                let (status, json) = answer(&head, &body);
                // A JSON string is written as it is (an event stream).
                let out = match &json {
                    Value::String(raw) => raw.clone(),
                    v => v.to_string(),
                };
                let resp = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{out}", out.len());
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    url
}

fn completion(text: &str) -> Value {
    json!({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]})
}

fn options(url: String, dp_size: usize) -> ContractOptions {
    let temperature = ImmutableParam {
        name: "temperature".into(),
        thinking: String::new(),
        required: Some(json!(1.0)),
        wrong: vec![json!(0.3)],
    };
    ContractOptions {
        urls: vec![url],
        model: "m".into(),
        dp_size,
        spec: ContractReq {
            params: vec![temperature],
            ..ContractReq::default()
        },
        timeout: Duration::from_secs(10),
        reference: None,
        http: None,
    }
}

#[tokio::test]
async fn a_server_that_accepts_a_wrong_temperature_fails_owner_server() {
    let lax = serve(|_, _| (200, completion("Paris is the capital of France."))).await;
    let golive::contract::ContractRun {
        checks, requests, ..
    } = run(&options(lax, 1)).await.unwrap();
    let params = checks.iter().find(|c| c.item == "params").unwrap();
    assert_eq!(
        (params.verdict.status, params.verdict.owner),
        (Status::Fail, Some(Owner::Server))
    );
    assert_eq!(requests, 2);

    let strict = serve(|_, body| {
        if body["temperature"] == json!(0.3) {
            (400, json!({"error": {"message": "temperature"}}))
        } else {
            (200, completion("Paris is the capital of France."))
        }
    })
    .await;
    let checks = run(&options(strict, 1)).await.unwrap().checks;
    assert!(
        checks.iter().all(|c| c.verdict.status == Status::Pass),
        "{checks:?}"
    );
}

#[tokio::test]
async fn gibberish_on_one_rank_only_is_named() {
    let url = serve(|head, _| {
        if head.contains("x-data-parallel-rank: 1") {
            (200, completion(&"\u{FFFD}#".repeat(40)))
        } else {
            (200, completion("Paris is the capital of France."))
        }
    })
    .await;
    let golive::contract::ContractRun {
        checks, requests, ..
    } = run(&options(url.clone(), 3)).await.unwrap();
    assert_eq!(requests, 1 + 3);
    let failed: Vec<_> = checks
        .iter()
        .filter(|c| c.item != "params" && c.verdict.status == Status::Fail)
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    for c in failed {
        assert_eq!(c.path, format!("{url} rank 1"));
        assert_eq!(c.verdict.owner, Some(Owner::Server));
    }
}

/// A server whose chat counts `extra` prompt tokens more than its own /tokenize (20).
fn counting(head: &str, body: &Value, extra: u64) -> (u16, Value) {
    if head.starts_with("post /tokenize") {
        return (
            200,
            json!({"count": 20, "max_model_len": 4096, "tokens": []}),
        );
    }
    let usage =
        json!({"prompt_tokens": 20 + extra, "completion_tokens": 1, "total_tokens": 21 + extra});
    if body["stream"] == json!(true) {
        let chunk = json!({"choices": [{"delta": {"content": "red"}, "index": 0}]});
        let last = json!({"choices": [], "usage": usage});
        return (
            200,
            Value::String(format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n")),
        );
    }
    let mut c = completion("red, yellow, blue");
    c["usage"] = usage;
    (200, c)
}

fn with_tolerance(url: String, tolerance: u64) -> ContractOptions {
    let mut o = options(url, 1);
    o.spec.params.clear();
    o.spec.prompt_token_tolerance = Some(tolerance);
    o
}

#[tokio::test]
async fn prompt_tokens_overcounted_by_ten_fail_streamed_and_non_streamed_owner_server() {
    let over = serve(|h, b| counting(h, b, 10)).await;
    let checks = run(&with_tolerance(over, 3)).await.unwrap().checks;
    let pt: Vec<_> = checks
        .iter()
        .filter(|c| c.item == "prompt_tokens")
        .collect();
    assert_eq!(pt.len(), 2, "{checks:?}");
    for c in &pt {
        assert_eq!(
            (c.verdict.status, c.verdict.owner),
            (Status::Fail, Some(Owner::Server)),
            "{c:?}"
        );
        assert!(
            c.verdict
                .evidence
                .contains("usage.prompt_tokens 30, /tokenize 20"),
            "{c:?}"
        );
    }
    assert!(pt[1].verdict.evidence.starts_with("streamed"));

    // Within [expected, expected + 3]: both pass.
    let honest = serve(|h, b| counting(h, b, 2)).await;
    let checks = run(&with_tolerance(honest, 3)).await.unwrap().checks;
    let pt: Vec<_> = checks
        .iter()
        .filter(|c| c.item == "prompt_tokens")
        .collect();
    assert!(
        pt.iter().all(|c| c.verdict.status == Status::Pass),
        "{pt:?}"
    );
}

fn reasoning_options(url: String) -> ContractOptions {
    let mut o = options(url, 1);
    o.spec.params.clear();
    o.spec.reasoning = true;
    o.spec.reasoning_markers = vec!["<think>".into(), "</think>".into()];
    o.spec.thinking_on = Some(json!({"chat_template_kwargs": {"thinking": true}}));
    o.spec.thinking_off = Some(json!({"chat_template_kwargs": {"thinking": false}}));
    o
}

#[tokio::test]
async fn reasoning_leaked_into_content_fails_owner_parser() {
    let leaky = serve(|_, b| {
        if b["chat_template_kwargs"]["thinking"] == json!(true) {
            (
                200,
                completion("<think>17 has no divisor but 1 and itself</think>yes"),
            )
        } else {
            (200, completion("yes"))
        }
    })
    .await;
    let checks = run(&reasoning_options(leaky)).await.unwrap().checks;
    let r: Vec<_> = checks.iter().filter(|c| c.item == "reasoning").collect();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].verdict.status, r[0].verdict.owner),
        (Status::Fail, Some(Owner::Parser))
    );
    assert!(r[0].verdict.evidence.contains("<think>"), "{:?}", r[0]);
    assert_eq!(
        r[1].verdict.status,
        Status::Pass,
        "thinking off is clean: {:?}",
        r[1]
    );

    let parsed = serve(|_, b| {
        if b["chat_template_kwargs"]["thinking"] == json!(true) {
            let mut c = completion("yes");
            c["choices"][0]["message"]["reasoning_content"] =
                json!("17 has no divisor but 1 and itself");
            (200, c)
        } else {
            (200, completion("yes"))
        }
    })
    .await;
    let checks = run(&reasoning_options(parsed)).await.unwrap().checks;
    let r: Vec<_> = checks.iter().filter(|c| c.item == "reasoning").collect();
    assert!(r.iter().all(|c| c.verdict.status == Status::Pass), "{r:?}");
}

fn prompt(body: &Value) -> String {
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn tool_call(args: &str) -> Value {
    json!({"choices": [{"finish_reason": "tool_calls", "message": {"content": null,
        "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_weather", "arguments": args}}]}}]})
}

#[tokio::test]
async fn f1_and_schema_accuracy_of_two_disagreeing_servers_are_exact() {
    // The reference calls a tool for the four tool prompts of the built-in cases
    // (weather, order, e-mail, search) and answers the other four.
    let reference = serve(|_, b| {
        let p = prompt(b);
        if ["weather", "order", "E-mail", "Search"]
            .iter()
            .any(|k| p.contains(k))
        {
            (200, tool_call(r#"{"city": "Paris"}"#))
        } else {
            (200, completion("Sure."))
        }
    })
    .await;
    // The tested side: calls for weather (valid) and order (invalid arguments), also for
    // the poem (a false trigger), and misses e-mail and search.
    let tested = serve(|_, b| {
        let p = prompt(b);
        if p.contains("weather") || p.contains("poem") {
            (200, tool_call(r#"{"city": "Paris"}"#))
        } else if p.contains("order") {
            (200, tool_call(r#"{"town": 1}"#))
        } else {
            (200, completion("Sure."))
        }
    })
    .await;
    let mut opts = options(tested, 1);
    opts.spec.params.clear();
    opts.spec.f1_min_non_thinking = Some(0.8);
    opts.spec.schema_accuracy_min = Some(0.95);
    opts.reference = Some(golive::contract::Reference {
        url: reference,
        model: None,
        api_key: None,
        cases: golive::contract::builtin_cases(),
        requests: 16,
    });
    let result = run(&opts).await.unwrap();
    let c = result.comparison.expect("a comparison");
    // Twice through the 8 cases: TP 2x2, FP 2x1, FN 2x2, TN 2x3.
    assert_eq!(
        (
            c.score.confusion.tp,
            c.score.confusion.fp,
            c.score.confusion.fn_,
            c.score.confusion.tn
        ),
        (4, 2, 4, 6)
    );
    assert_eq!(c.score.f1, 8.0 / 14.0);
    assert_eq!((c.score.triggered, c.score.schema_valid), (6, 4));
    assert_eq!(c.score.schema_accuracy, 4.0 / 6.0);
    assert_eq!(c.verifier_summary.finish_tool_calls, 6);
    assert_eq!(c.verifier_summary.schema_validation_error_count, 2);
    assert_eq!(
        result.requests,
        32 + 1,
        "both sides of 16 cases, and the path request"
    );
    for item in ["tool_trigger_f1", "tool_schema_accuracy"] {
        let check = result.checks.iter().find(|c| c.item == item).unwrap();
        assert_eq!(
            (check.verdict.status, check.verdict.owner),
            (Status::Fail, Some(Owner::Parser)),
            "{check:?}"
        );
        assert!(check.verdict.evidence.contains("95%"), "{check:?}");
    }
}
