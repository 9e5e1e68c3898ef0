//! Reading a chat-completions body into a `Reply`: the envelope findings, parser-error
//! markers and tool-call markup left in the text.

use serde_json::Value;

use super::{quote, Owner, Problem, ProblemCode, Reply, ToolCall};

/// Text a server or gateway uses when its tool-call or chat-template parser failed.
const PARSER_MARKERS: &[&str] = &[
    "tool call parser",
    "tool_call_parser",
    "toolparser",
    "tool parser",
    "error in extracting tool call",
    "handle streaming tool call",
    "failed to parse tool call",
    "failed to parse",
    "unable to generate parser",
    "chat template",
    "jsondecodeerror",
    "invalid diff",
    // llama.cpp: the model's text did not fit the chat format's parser.
    "does not match the expected",
    "peg-native format",
];

/// True when `text` reads like a tool-call / template parser error.
pub fn mentions_parser(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    PARSER_MARKERS.iter().any(|m| lower.contains(m))
}

/// Tool-call markup that a parser should have turned into `tool_calls`.
const CALL_MARKUP: &[&str] = &[
    "<tool_call>",
    "<|tool_call",
    "<|tool_calls_section_begin|>",
    "[TOOL_CALLS]",
    "<function=",
    "<|python_tag|>",
    "functools[",
];

pub(super) fn has_call_markup(content: &str) -> bool {
    if CALL_MARKUP.iter().any(|m| content.contains(m)) {
        return true;
    }
    // A bare JSON call object (`{"name": ..., "arguments": ...}`) left as text.
    let t = content.trim();
    t.starts_with('{') && t.contains("\"name\"") && t.contains("\"arguments\"")
}

/// A tool call opened in the text and never closed: the answer ended inside it.
/// Markups with an explicit end (`</tool_call>`, `<|tool_call_end|>`) are counted; a
/// bare JSON call is open while its braces do not balance.
pub(super) fn has_open_call(content: &str) -> bool {
    let opened =
        |open: &str, close: &str| content.matches(open).count() > content.matches(close).count();
    if opened("<tool_call>", "</tool_call>") || opened("<|tool_call_begin|>", "<|tool_call_end|>") {
        return true;
    }
    let t = content.trim();
    t.starts_with('{') && serde_json::from_str::<Value>(t).is_err()
}

/// Reads a non-streamed chat completion body.
pub fn parse_completion(body: &Value) -> (Reply, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut reply = Reply::default();
    if body.get("object").and_then(Value::as_str) != Some("chat.completion") {
        problems.push(Problem::warn(
            Owner::Server,
            ProblemCode::EnvelopeObject,
            format!(
                "`object` is {}, expected \"chat.completion\"",
                body.get("object").unwrap_or(&Value::Null)
            ),
        ));
    }
    reply.usage = body.get("usage").filter(|u| !u.is_null()).cloned();
    let Some(choice) = body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeNoChoices,
            "the answer has no `choices[0]`",
        ));
        return (reply, problems);
    };
    reply.finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    let Some(message) = choice.get("message").filter(|m| m.is_object()) else {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeNoMessage,
            "`choices[0].message` is missing",
        ));
        return (reply, problems);
    };
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => reply.content = Some(s.clone()),
        Some(other) => problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeContentType,
            format!(
                "`message.content` is {}, expected a string or null",
                quote(&other.to_string(), 80)
            ),
        )),
    }
    for field in ["reasoning", "reasoning_content"] {
        if let Some(text) = message.get(field).and_then(Value::as_str) {
            if reply.reasoning.is_none() {
                reply.reasoning = Some(text.to_string());
                reply.reasoning_field = Some(field.to_string());
            } else if reply.reasoning.as_deref() != Some(text) {
                problems.push(Problem::warn(
                    Owner::Server,
                    ProblemCode::ReasoningFieldsDiffer,
                    "`reasoning` and `reasoning_content` carry different text",
                ));
            }
        }
    }
    match message.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            let mut out = Vec::with_capacity(calls.len());
            for (i, call) in calls.iter().enumerate() {
                let function = call.get("function");
                let arguments = match function.and_then(|f| f.get("arguments")) {
                    Some(Value::String(s)) => s.clone(),
                    None | Some(Value::Null) => String::new(),
                    Some(other) => {
                        problems.push(Problem::fail(
                            Owner::Server,
                            ProblemCode::ArgumentsNotString,
                            format!(
                                "tool_calls[{i}].function.arguments is JSON, not a JSON string"
                            ),
                        ));
                        other.to_string()
                    }
                };
                out.push(ToolCall {
                    index: call.get("index").and_then(Value::as_u64),
                    id: call.get("id").and_then(Value::as_str).map(str::to_string),
                    kind: call.get("type").and_then(Value::as_str).map(str::to_string),
                    name: function
                        .and_then(|f| f.get("name"))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    arguments,
                });
            }
            reply.tool_calls = Some(out);
        }
        Some(other) => problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeToolCallsType,
            format!("`message.tool_calls` is {other}, expected an array"),
        )),
    }
    (reply, problems)
}
