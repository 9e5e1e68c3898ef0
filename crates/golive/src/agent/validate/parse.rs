//! Reading a chat-completions body into a `Reply`: the envelope findings, parser-error
//! markers and tool-call markup left in the text.

use serde_json::Value;

use super::{quote, Owner, Problem, ProblemCode, Reply, ToolCall};
use crate::wire::{Answer, Choice, Lax, LaxField, Str, ToolCallPart};

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
    // A JSON value other than an object has none of the fields.
    let answer = match Answer::of(body) {
        Lax::Typed(answer) => answer,
        Lax::Other(_) => Answer::default(),
    };
    if answer.object.typed().map(Str::as_str) != Some("chat.completion") {
        let object = serde_json::to_string(&answer.object).unwrap_or_default();
        problems.push(Problem::warn(
            Owner::Server,
            ProblemCode::EnvelopeObject,
            format!("`object` is {object}, expected \"chat.completion\""),
        ));
    }
    reply.usage = answer.usage.clone();
    let Some(choice) = answer.choices.typed().and_then(|c| c.first()) else {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeNoChoices,
            "the answer has no `choices[0]`",
        ));
        return (reply, problems);
    };
    let no_choice = Choice::default();
    let choice = match choice {
        Lax::Typed(choice) => choice,
        Lax::Other(_) => &no_choice,
    };
    reply.finish_reason = choice.finish_reason.typed().map(|f| f.to_string());
    let Some(message) = choice.message.typed() else {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeNoMessage,
            "`choices[0].message` is missing",
        ));
        return (reply, problems);
    };
    match &message.content {
        None => {}
        Some(Lax::Typed(s)) => reply.content = Some(s.to_string()),
        Some(Lax::Other(other)) => problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::EnvelopeContentType,
            format!(
                "`message.content` is {}, expected a string or null",
                quote(&other.to_string(), 80)
            ),
        )),
    }
    for (field, text) in [
        ("reasoning", &message.reasoning),
        ("reasoning_content", &message.reasoning_content),
    ] {
        if let Some(text) = text.typed().map(Str::as_str) {
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
    match &message.tool_calls {
        None => {}
        Some(calls) => match ToolCallPart::parts(calls) {
            Some(parts) => {
                let mut out = Vec::new();
                for (i, (_, call)) in parts.enumerate() {
                    let function = call.function.typed();
                    let arguments = match function.and_then(|f| f.arguments.as_ref()) {
                        Some(Lax::Typed(s)) => s.to_string(),
                        None => String::new(),
                        Some(Lax::Other(other)) => {
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
                    let text = |f: &Option<Lax<Str<'_>>>| f.typed().map(|s| s.to_string());
                    out.push(ToolCall {
                        index: call.index.typed().copied(),
                        id: text(&call.id),
                        kind: text(&call.kind),
                        name: function.and_then(|f| text(&f.name)),
                        arguments,
                    });
                }
                reply.tool_calls = Some(out);
            }
            None => problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::EnvelopeToolCallsType,
                format!("`message.tool_calls` is {calls}, expected an array"),
            )),
        },
    }
    (reply, problems)
}
