//! Judging a parsed reply: finish_reason, each tool call and its arguments, text a
//! parser should have handled, usage fields, and what the case expected.

use std::collections::HashSet;

use serde_json::Value;

use super::parse::{has_call_markup, has_open_call};
use super::{
    offered_tools, quote, schema_errors, tool_choice, Answer, Owner, Problem, ProblemCode, Reply,
    ToolChoice,
};

pub(super) fn judge_reply(
    request: &Value,
    answer: &Answer,
    reply: &Reply,
    problems: &mut Vec<Problem>,
) {
    let tools = offered_tools(request);
    let choice = tool_choice(request);
    let constrained = choice != ToolChoice::Free;
    // Arguments produced under tool_choice required/named are the server's to constrain.
    let args_owner = if constrained {
        Owner::Server
    } else {
        Owner::Model
    };
    let max_tokens = request
        .get("max_tokens")
        .or_else(|| request.get("max_completion_tokens"))
        .and_then(Value::as_u64);
    let hit_limit =
        matches!((reply.completion_tokens(), max_tokens), (Some(used), Some(max)) if used >= max);
    let finish = reply.finish_reason.as_deref();
    let calls = reply.calls();

    match finish {
        None => problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::FinishReasonMissing,
            "`finish_reason` is missing",
        )),
        Some("stop" | "length" | "tool_calls" | "content_filter") => {}
        Some(other) => problems.push(Problem::warn(
            Owner::Server,
            ProblemCode::FinishReasonUnknown,
            format!(
                "`finish_reason` is {other:?}, not one of stop, length, tool_calls, content_filter"
            ),
        )),
    }
    if finish == Some("stop") && hit_limit && !reply.has_text() && calls.is_empty() {
        problems.push(Problem::warn(
            Owner::Server,
            ProblemCode::StopAtMaxTokens,
            "all max_tokens were used for an empty answer, yet finish_reason is \"stop\", not \"length\"",
        ));
    }
    if finish == Some("tool_calls") && calls.is_empty() {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::ToolCallsFinishWithoutCalls,
            "finish_reason is \"tool_calls\" but `tool_calls` is empty or absent (vLLM #53255 shape)",
        ));
    }
    if reply.tool_calls.as_ref().is_some_and(|c| c.is_empty()) && finish != Some("tool_calls") {
        problems.push(Problem::warn(
            Owner::Server,
            ProblemCode::EmptyToolCallsArray,
            "`tool_calls: []` on a text answer; clients that test for presence take the tool branch (vLLM #44104 shape); expected null or absent",
        ));
    }
    if request.get("parallel_tool_calls") == Some(&Value::Bool(false)) && calls.len() > 1 {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::ParallelToolCallsIgnored,
            format!(
                "parallel_tool_calls was false but {} calls came back",
                calls.len()
            ),
        ));
    }
    if !calls.is_empty() && tools.is_empty() {
        problems.push(Problem::fail(
            Owner::Server,
            ProblemCode::ToolCallsWithoutTools,
            "tool calls came back although no tools were offered",
        ));
    }

    // Each tool call: id, type, name among the offered tools, arguments JSON valid against the schema.
    let mut ids = HashSet::new();
    let mut truncated_args = false;
    for (i, call) in calls.iter().enumerate() {
        match call.id.as_deref() {
            None | Some("") => problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::ToolCallIdMissing,
                format!("tool_calls[{i}] has no id"),
            )),
            Some(id) => {
                if !ids.insert(id.to_string()) {
                    problems.push(Problem::fail(
                        Owner::Server,
                        ProblemCode::ToolCallIdDuplicate,
                        format!("tool_calls[{i}] repeats id {id:?}"),
                    ));
                }
            }
        }
        match call.kind.as_deref() {
            Some("function") => {}
            None => problems.push(Problem::warn(
                Owner::Server,
                ProblemCode::ToolCallTypeMissing,
                format!("tool_calls[{i}] has no `type: \"function\"`"),
            )),
            Some(other) => problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::ToolCallType,
                format!("tool_calls[{i}].type is {other:?}, expected \"function\""),
            )),
        }
        let Some(name) = call.name.as_deref().filter(|n| !n.is_empty()) else {
            problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::ToolCallNameMissing,
                format!("tool_calls[{i}] has no function name"),
            ));
            continue;
        };
        let Some((_, schema)) = tools.iter().find(|(n, _)| n == name) else {
            if !tools.is_empty() {
                problems.push(Problem::fail(
                    args_owner,
                    ProblemCode::ToolNotOffered,
                    format!("tool_calls[{i}] calls {name:?}, which was not offered"),
                ));
            }
            continue;
        };
        let args: Value = match serde_json::from_str(if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        }) {
            Ok(v) => v,
            Err(e) => {
                truncated_args = true;
                if finish == Some("length") {
                    // Honestly reported truncation; judged by the expectation below.
                } else if hit_limit || *answer == Answer::Truncated {
                    problems.push(Problem::fail(
                        Owner::Server,
                        ProblemCode::TruncatedCallNotLength,
                        format!(
                            "tool_calls[{i}] was cut off by max_tokens (arguments do not parse: {e}) but finish_reason is {:?}, not \"length\" (vLLM #53269 shape)",
                            finish.unwrap_or("null")
                        ),
                    ));
                } else {
                    problems.push(Problem::fail(
                        args_owner,
                        ProblemCode::ArgumentsNotJson,
                        format!(
                            "tool_calls[{i}] ({name}) arguments are not JSON ({e}): {}",
                            quote(&call.arguments, 120)
                        ),
                    ));
                }
                continue;
            }
        };
        if !args.is_object() {
            problems.push(Problem::fail(
                args_owner,
                ProblemCode::ArgumentsNotObject,
                format!(
                    "tool_calls[{i}] ({name}) arguments are {}, not a JSON object",
                    quote(&args.to_string(), 80)
                ),
            ));
            continue;
        }
        match schema_errors(schema, &args) {
            Ok(errors) if errors.is_empty() => {}
            Ok(errors) => problems.push(Problem::fail(
                args_owner,
                ProblemCode::ArgumentsSchema,
                format!(
                    "tool_calls[{i}] ({name}) arguments break the tool's schema: {}",
                    errors.join("; ")
                ),
            )),
            Err(e) => problems.push(Problem::warn(
                Owner::Client,
                ProblemCode::ToolSchemaUnusable,
                format!("tool {name}: {e}"),
            )),
        }
    }

    // Text that a parser should have handled.
    let content = reply.content.as_deref().unwrap_or("");
    let markup_in_content = !tools.is_empty() && calls.is_empty() && has_call_markup(content);
    if markup_in_content {
        problems.push(Problem::fail(
            Owner::Parser,
            ProblemCode::ToolCallMarkupInContent,
            format!(
                "the model wrote a tool call the server's parser did not recognise{}: {}",
                if finish == Some("length") && has_open_call(content) {
                    // vLLM #47903; seen on vLLM 0.32 with non-strict tools, whose arguments
                    // the server does not constrain.
                    " (cut off by max_tokens, finish_reason \"length\"; the parser returned its raw markup as content instead of a call; a `strict` tool or a larger max_tokens avoids the cut)"
                } else {
                    ""
                },
                quote(content, 160)
            ),
        ));
    }
    if content.contains("<think>") || content.contains("</think>") {
        problems.push(Problem::warn(
            Owner::Parser,
            ProblemCode::ReasoningInContent,
            "reasoning markup (<think>) left in `content`: no reasoning parser is configured for this model",
        ));
    }
    let wants_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let streamed = request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if reply.usage.is_none() {
        if wants_usage {
            problems.push(Problem::fail(
                Owner::Server,
                ProblemCode::UsageMissing,
                "`stream_options.include_usage` was set but no usage chunk came",
            ));
        } else if !streamed {
            problems.push(Problem::warn(
                Owner::Server,
                ProblemCode::UsageMissing,
                "the answer carries no `usage`",
            ));
        }
    }

    // What this case expected.
    match answer {
        Answer::Text => {
            if !reply.has_text() && calls.is_empty() {
                problems.push(Problem::fail(
                    Owner::Model,
                    ProblemCode::EmptyAnswer,
                    format!("no text (finish_reason {:?})", finish.unwrap_or("null")),
                ));
            }
        }
        Answer::TextOrTool => {
            if !reply.has_text() && calls.is_empty() && !markup_in_content {
                problems.push(Problem::fail(
                    Owner::Model,
                    ProblemCode::EmptyAnswer,
                    format!(
                        "neither text nor a tool call (finish_reason {:?})",
                        finish.unwrap_or("null")
                    ),
                ));
            }
        }
        Answer::Tool { name, args } => {
            if calls.is_empty() {
                if markup_in_content {
                    // Already the parser's.
                } else if constrained && reply.has_text() {
                    problems.push(choice_not_enforced(request, "the answer is text", content));
                } else if finish == Some("length") {
                    problems.push(Problem::fail(
                        Owner::Model,
                        ProblemCode::NoToolCallWithinMaxTokens,
                        "no tool call before max_tokens ran out",
                    ));
                } else if constrained {
                    problems.push(choice_not_enforced(
                        request,
                        "the answer has no tool call",
                        content,
                    ));
                } else {
                    problems.push(Problem::fail(
                        Owner::Model,
                        ProblemCode::NoToolCall,
                        format!("answered without a tool call: {}", quote(content, 120)),
                    ));
                }
            } else {
                let complete = calls
                    .iter()
                    .filter(|c| serde_json::from_str::<Value>(&c.arguments).is_ok())
                    .count();
                if truncated_args && finish == Some("length") && complete == 0 {
                    problems.push(Problem::fail(
                        Owner::Model,
                        ProblemCode::ToolCallCutOff,
                        "the tool call was cut off by max_tokens (finish_reason \"length\")",
                    ));
                } else if finish == Some("length") {
                    // The complete calls stand; "length" honestly flags the cut-off rest.
                    problems.push(Problem::warn(
                        Owner::Model,
                        ProblemCode::CallsUntilMaxTokens,
                        format!(
                            "{complete} complete call(s), then the model kept going until max_tokens (finish_reason \"length\"{})",
                            if truncated_args { ", the last call cut off" } else { "" }
                        ),
                    ));
                }
                if let Some(want) = name {
                    let got = calls[0].name.as_deref().unwrap_or("");
                    if got != want {
                        let owner = if matches!(&choice, ToolChoice::Named(n) if n == want) {
                            Owner::Server
                        } else {
                            Owner::Model
                        };
                        problems.push(Problem::fail(
                            owner,
                            ProblemCode::WrongTool,
                            format!("called {got:?}, expected {want:?}"),
                        ));
                    } else if let Some(want_args) = args {
                        let got_args: Value =
                            serde_json::from_str(&calls[0].arguments).unwrap_or(Value::Null);
                        for (k, v) in want_args {
                            if got_args.get(k) != Some(v) {
                                problems.push(Problem::fail(
                                    Owner::Model,
                                    ProblemCode::WrongArgument,
                                    format!(
                                        "argument {k:?} is {}, expected {}",
                                        quote(
                                            &got_args.get(k).unwrap_or(&Value::Null).to_string(),
                                            60
                                        ),
                                        quote(&v.to_string(), 60)
                                    ),
                                ));
                            }
                        }
                    }
                }
                // OpenAI answers "tool_calls" for auto/required and "stop" for a named choice.
                let expected_finish: &[&str] = match choice {
                    ToolChoice::Named(_) => &["stop", "tool_calls"],
                    _ => &["tool_calls"],
                };
                if let Some(f) = finish {
                    if f != "length" && !expected_finish.contains(&f) {
                        problems.push(Problem::warn(
                            Owner::Server,
                            ProblemCode::FinishReasonForToolCall,
                            format!("finish_reason is {f:?} for a tool call; OpenAI clients expect \"tool_calls\""),
                        ));
                    }
                }
            }
        }
        Answer::Json { schema } => {
            let trimmed = content.trim();
            match serde_json::from_str::<Value>(trimmed) {
                Err(e) => {
                    let (owner, why) = if finish == Some("length") {
                        (Owner::Model, "the model did not close the JSON before max_tokens")
                    } else {
                        (Owner::Server, "response_format json_schema was not enforced")
                    };
                    problems.push(Problem::fail(
                        owner,
                        ProblemCode::StructuredNotJson,
                        format!("{why}: content is not JSON ({e}): {}", quote(content, 120)),
                    ));
                }
                Ok(value) => match schema_errors(schema, &value) {
                    Ok(errors) if errors.is_empty() => {}
                    Ok(errors) => problems.push(Problem::fail(
                        Owner::Server,
                        ProblemCode::StructuredSchema,
                        format!(
                            "content breaks the requested schema (response_format was not enforced): {}",
                            errors.join("; ")
                        ),
                    )),
                    Err(e) => problems.push(Problem::warn(Owner::Client, ProblemCode::SchemaUnusable, e)),
                },
            }
        }
        Answer::Truncated => {
            let cut = truncated_args || hit_limit;
            if cut
                && finish != Some("length")
                && !problems
                    .iter()
                    .any(|p| p.code == ProblemCode::TruncatedCallNotLength)
            {
                problems.push(Problem::fail(
                    Owner::Server,
                    ProblemCode::TruncationNotLength,
                    format!(
                        "the answer was cut off by max_tokens but finish_reason is {:?}, not \"length\"",
                        finish.unwrap_or("null")
                    ),
                ));
            }
            if calls.is_empty() && !markup_in_content {
                if constrained && reply.has_text() {
                    problems.push(choice_not_enforced(request, "the answer is text", content));
                } else {
                    problems.push(Problem::warn(
                        Owner::Model,
                        ProblemCode::TruncationNotExercised,
                        "no tool call was started, so a cut-off call was not tested",
                    ));
                }
            }
        }
        Answer::ClientError => {}
    }
}

/// The server let a required `tool_choice` pass without a tool call; `what` says what came instead.
fn choice_not_enforced(request: &Value, what: &str, content: &str) -> Problem {
    Problem::fail(
        Owner::Server,
        ProblemCode::ToolChoiceNotEnforced,
        format!(
            "tool_choice {} was not enforced: {what} ({})",
            request.get("tool_choice").unwrap_or(&Value::Null),
            quote(content, 80)
        ),
    )
}
