//! Scripted answers of the faults that need request-aware bodies: a tool-call parser
//! that breaks only under concurrency, and a completions replica that answers
//! differently from a real server.

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{chunk, respond};

/// The tool call a correct parser would return for this request: the named tool, else
/// get_order_status when the user asks about an order, else get_weather.
fn tool_call_for(req: &Value) -> (String, String) {
    if let Some(name) = req
        .pointer("/tool_choice/function/name")
        .and_then(Value::as_str)
    {
        let args = if name == "get_order_status" {
            r#"{"order_id": "A-1234"}"#
        } else {
            r#"{"city": "Rome"}"#
        };
        return (name.to_string(), args.to_string());
    }
    let last_user = req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("");
    if last_user.contains("order") {
        (
            "get_order_status".into(),
            r#"{"order_id": "A-1234"}"#.into(),
        )
    } else {
        ("get_weather".into(), r#"{"city": "Berlin"}"#.into())
    }
}

/// Answers an agent request (tools or response_format offered). `broken`: the parser
/// failed and the call comes back as markup in the text, as a parser whose state is
/// shared between concurrent requests does.
pub async fn agent_answer(sock: &mut TcpStream, req: &Value, broken: bool) -> std::io::Result<()> {
    let stream = req["stream"].as_bool().unwrap_or(false);
    let usage = json!({"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52});
    let (message, delta, finish) = if req.get("response_format").is_some() {
        let content = r#"{"city": "Madrid", "temperature_c": 24, "conditions": "sunny"}"#;
        (
            json!({"role": "assistant", "content": content}),
            json!({"role": "assistant", "content": content}),
            "stop",
        )
    } else {
        let (name, args) = tool_call_for(req);
        if broken {
            let markup =
                format!("<tool_call>{{\"name\": \"{name}\", \"arguments\": {args}}}</tool_call>");
            (
                json!({"role": "assistant", "content": markup}),
                json!({"role": "assistant", "content": markup}),
                "stop",
            )
        } else {
            let call = json!({"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}});
            let mut streamed = call.clone();
            streamed["index"] = json!(0);
            (
                json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                json!({"role": "assistant", "tool_calls": [streamed]}),
                "tool_calls",
            )
        }
    };
    if !stream {
        let body = json!({"id": "c1", "object": "chat.completion", "model": "fault-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage});
        return respond(
            sock,
            "200 OK",
            "application/json",
            body.to_string().as_bytes(),
        )
        .await;
    }
    sock.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await?;
    let event = |v: Value| format!("data: {v}\n\n");
    let base = |choices: Value| json!({"id": "c1", "object": "chat.completion.chunk", "model": "fault-model", "choices": choices});
    chunk(
        sock,
        &event(base(
            json!([{"index": 0, "delta": delta, "finish_reason": null}]),
        )),
    )
    .await?;
    chunk(
        sock,
        &event(base(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
        )),
    )
    .await?;
    let mut last = base(json!([]));
    last["usage"] = usage;
    chunk(sock, &format!("{}data: [DONE]\n\n", event(last))).await?;
    sock.write_all(b"0\r\n\r\n").await
}

/// A `/v1/completions` answer in llama.cpp's layout: `text` with one `logprobs.content`
/// entry per token, every token a clear choice (margin 3 nats).
pub async fn completion_answer(sock: &mut TcpStream, tokens: &[&str]) -> std::io::Result<()> {
    let content: Vec<Value> = tokens
        .iter()
        .map(|t| {
            json!({"token": t, "logprob": -0.05, "top_logprobs": [
            {"token": t, "logprob": -0.05}, {"token": "~", "logprob": -3.05}]})
        })
        .collect();
    let body = json!({"object": "text_completion", "model": "fault-model",
        "choices": [{"index": 0, "text": tokens.concat(), "logprobs": {"content": content}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": tokens.len()}});
    respond(
        sock,
        "200 OK",
        "application/json",
        body.to_string().as_bytes(),
    )
    .await
}
