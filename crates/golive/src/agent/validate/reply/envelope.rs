//! Judges of the envelope (finish_reason, the `tool_calls` array), of text a parser
//! should have handled, and of usage.

use serde_json::Value;

use super::Context;
use crate::agent::validate::parse::has_open_call;
use crate::agent::validate::{quote, Owner, Problem, ProblemCode};

pub(super) fn finish_reason_missing(ctx: &Context) -> Option<Problem> {
    ctx.finish.is_none().then(|| {
        Problem::fail(
            Owner::Server,
            ProblemCode::FinishReasonMissing,
            "`finish_reason` is missing",
        )
    })
}

pub(super) fn finish_reason_unknown(ctx: &Context) -> Option<Problem> {
    match ctx.finish? {
        "stop" | "length" | "tool_calls" | "content_filter" => None,
        other => Some(Problem::warn(
            Owner::Server,
            ProblemCode::FinishReasonUnknown,
            format!(
                "`finish_reason` is {other:?}, not one of stop, length, tool_calls, content_filter"
            ),
        )),
    }
}

pub(super) fn stop_at_max_tokens(ctx: &Context) -> Option<Problem> {
    (ctx.finish_is("stop") && ctx.hit_limit && !ctx.reply.has_text() && ctx.calls.is_empty()).then(|| {
        Problem::warn(
            Owner::Server,
            ProblemCode::StopAtMaxTokens,
            "all max_tokens were used for an empty answer, yet finish_reason is \"stop\", not \"length\"",
        )
    })
}

pub(super) fn tool_calls_finish_without_calls(ctx: &Context) -> Option<Problem> {
    (ctx.finish_is("tool_calls") && ctx.calls.is_empty()).then(|| {
        Problem::fail(
            Owner::Server,
            ProblemCode::ToolCallsFinishWithoutCalls,
            "finish_reason is \"tool_calls\" but `tool_calls` is empty or absent (vLLM #53255 shape)",
        )
    })
}

pub(super) fn empty_tool_calls_array(ctx: &Context) -> Option<Problem> {
    (ctx.reply.tool_calls.as_ref().is_some_and(|c| c.is_empty()) && !ctx.finish_is("tool_calls")).then(|| {
        Problem::warn(
            Owner::Server,
            ProblemCode::EmptyToolCallsArray,
            "`tool_calls: []` on a text answer; clients that test for presence take the tool branch (vLLM #44104 shape); expected null or absent",
        )
    })
}

pub(super) fn parallel_tool_calls_ignored(ctx: &Context) -> Option<Problem> {
    (ctx.request.get("parallel_tool_calls") == Some(&Value::Bool(false)) && ctx.calls.len() > 1)
        .then(|| {
            Problem::fail(
                Owner::Server,
                ProblemCode::ParallelToolCallsIgnored,
                format!(
                    "parallel_tool_calls was false but {} calls came back",
                    ctx.calls.len()
                ),
            )
        })
}

pub(super) fn tool_calls_without_tools(ctx: &Context) -> Option<Problem> {
    (!ctx.calls.is_empty() && ctx.tools.is_empty()).then(|| {
        Problem::fail(
            Owner::Server,
            ProblemCode::ToolCallsWithoutTools,
            "tool calls came back although no tools were offered",
        )
    })
}

pub(super) fn tool_call_markup_in_content(ctx: &Context) -> Option<Problem> {
    ctx.markup_in_content.then(|| {
        Problem::fail(
            Owner::Parser,
            ProblemCode::ToolCallMarkupInContent,
            format!(
                "the model wrote a tool call the server's parser did not recognise{}: {}",
                if ctx.finish_is("length") && has_open_call(ctx.content) {
                    // vLLM #47903; seen on vLLM 0.32 with non-strict tools, whose arguments
                    // the server does not constrain.
                    " (cut off by max_tokens, finish_reason \"length\"; the parser returned its raw markup as content instead of a call; a `strict` tool or a larger max_tokens avoids the cut)"
                } else {
                    ""
                },
                quote(ctx.content, 160)
            ),
        )
    })
}

pub(super) fn reasoning_in_content(ctx: &Context) -> Option<Problem> {
    (ctx.content.contains("<think>") || ctx.content.contains("</think>")).then(|| {
        Problem::warn(
            Owner::Parser,
            ProblemCode::ReasoningInContent,
            "reasoning markup (<think>) left in `content`: no reasoning parser is configured for this model",
        )
    })
}

pub(super) fn usage_missing(ctx: &Context) -> Option<Problem> {
    if ctx.reply.usage.is_some() {
        return None;
    }
    let wants_usage = ctx
        .request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let streamed = ctx
        .request
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if wants_usage {
        Some(Problem::fail(
            Owner::Server,
            ProblemCode::UsageMissing,
            "`stream_options.include_usage` was set but no usage chunk came",
        ))
    } else if !streamed {
        Some(Problem::warn(
            Owner::Server,
            ProblemCode::UsageMissing,
            "the answer carries no `usage`",
        ))
    } else {
        None
    }
}
