//! Judges of what the case expected: text, a tool call (the right one, with the right
//! arguments), structured output, a call cut off by max_tokens.

use serde_json::Value;

use super::Context;
use crate::agent::validate::{quote, Answer, Owner, Problem, ProblemCode, ToolChoice};

pub(super) fn empty_answer(ctx: &Context) -> Option<Problem> {
    if ctx.reply.has_text() || !ctx.calls.is_empty() {
        return None;
    }
    let detail = match ctx.answer {
        Answer::Text => format!("no text (finish_reason {:?})", ctx.finish_or_null()),
        Answer::TextOrTool if !ctx.markup_in_content => format!(
            "neither text nor a tool call (finish_reason {:?})",
            ctx.finish_or_null()
        ),
        _ => return None,
    };
    Some(Problem::fail(
        Owner::Model,
        ProblemCode::EmptyAnswer,
        detail,
    ))
}

pub(super) fn truncation_not_length(ctx: &Context) -> Option<Problem> {
    // A call cut off under another finish_reason was already reported per call
    // (truncated_call_not_length); this is the cut that left no broken call behind.
    (*ctx.answer == Answer::Truncated
        && ctx.hit_limit
        && !ctx.truncated_args
        && !ctx.finish_is("length"))
    .then(|| {
        Problem::fail(
            Owner::Server,
            ProblemCode::TruncationNotLength,
            format!(
                "the answer was cut off by max_tokens but finish_reason is {:?}, not \"length\"",
                ctx.finish_or_null()
            ),
        )
    })
}

/// The server let a required or named `tool_choice` pass without a tool call.
pub(super) fn tool_choice_not_enforced(ctx: &Context) -> Option<Problem> {
    if !ctx.constrained {
        return None;
    }
    let has_text = ctx.reply.has_text();
    let what = if ctx.tool_call_missing() && has_text {
        "the answer is text"
    } else if ctx.tool_call_missing() && !ctx.finish_is("length") {
        // With "length", max_tokens ran out first (no_tool_call_within_max_tokens).
        "the answer has no tool call"
    } else if ctx.cut_call_missing() && has_text {
        "the answer is text"
    } else {
        return None;
    };
    Some(Problem::fail(
        Owner::Server,
        ProblemCode::ToolChoiceNotEnforced,
        format!(
            "tool_choice {} was not enforced: {what} ({})",
            ctx.request.get("tool_choice").unwrap_or(&Value::Null),
            quote(ctx.content, 80)
        ),
    ))
}

pub(super) fn no_tool_call_within_max_tokens(ctx: &Context) -> Option<Problem> {
    (ctx.tool_call_missing()
        && !(ctx.constrained && ctx.reply.has_text())
        && ctx.finish_is("length"))
    .then(|| {
        Problem::fail(
            Owner::Model,
            ProblemCode::NoToolCallWithinMaxTokens,
            "no tool call before max_tokens ran out",
        )
    })
}

pub(super) fn no_tool_call(ctx: &Context) -> Option<Problem> {
    (ctx.tool_call_missing() && !ctx.constrained && !ctx.finish_is("length")).then(|| {
        Problem::fail(
            Owner::Model,
            ProblemCode::NoToolCall,
            format!("answered without a tool call: {}", quote(ctx.content, 120)),
        )
    })
}

pub(super) fn truncation_not_exercised(ctx: &Context) -> Option<Problem> {
    (ctx.cut_call_missing() && !(ctx.constrained && ctx.reply.has_text())).then(|| {
        Problem::warn(
            Owner::Model,
            ProblemCode::TruncationNotExercised,
            "no tool call was started, so a cut-off call was not tested",
        )
    })
}

pub(super) fn tool_call_cut_off(ctx: &Context) -> Option<Problem> {
    (ctx.tool_call_present()
        && ctx.truncated_args
        && ctx.finish_is("length")
        && ctx.complete_calls == 0)
        .then(|| {
            Problem::fail(
                Owner::Model,
                ProblemCode::ToolCallCutOff,
                "the tool call was cut off by max_tokens (finish_reason \"length\")",
            )
        })
}

pub(super) fn calls_until_max_tokens(ctx: &Context) -> Option<Problem> {
    // The complete calls stand; "length" honestly flags the cut-off rest.
    (ctx.tool_call_present()
        && ctx.finish_is("length")
        && !(ctx.truncated_args && ctx.complete_calls == 0))
        .then(|| {
            Problem::warn(
                Owner::Model,
                ProblemCode::CallsUntilMaxTokens,
                format!(
                    "{} complete call(s), then the model kept going until max_tokens (finish_reason \"length\"{})",
                    ctx.complete_calls,
                    if ctx.truncated_args { ", the last call cut off" } else { "" }
                ),
            )
        })
}

pub(super) fn wrong_tool(ctx: &Context) -> Option<Problem> {
    let (want, _) = ctx.expected_tool()?;
    let first = ctx.calls.first()?;
    if ctx.first_call_is_expected() {
        return None;
    }
    let got = first.call.name.as_deref().unwrap_or("");
    let owner = if matches!(&ctx.choice, ToolChoice::Named(n) if n == want) {
        Owner::Server
    } else {
        Owner::Model
    };
    Some(Problem::fail(
        owner,
        ProblemCode::WrongTool,
        format!("called {got:?}, expected {want:?}"),
    ))
}

pub(super) fn wrong_argument(ctx: &Context, key: &str, want: &Value) -> Option<Problem> {
    if !ctx.first_call_is_expected() {
        return None;
    }
    let got_args: Value =
        serde_json::from_str(&ctx.calls.first()?.call.arguments).unwrap_or(Value::Null);
    let got = got_args.get(key);
    (got != Some(want)).then(|| {
        Problem::fail(
            Owner::Model,
            ProblemCode::WrongArgument,
            format!(
                "argument {key:?} is {}, expected {}",
                quote(&got.unwrap_or(&Value::Null).to_string(), 60),
                quote(&want.to_string(), 60)
            ),
        )
    })
}

pub(super) fn finish_reason_for_tool_call(ctx: &Context) -> Option<Problem> {
    if !ctx.tool_call_present() {
        return None;
    }
    // OpenAI answers "tool_calls" for auto/required and "stop" for a named choice.
    let expected: &[&str] = match ctx.choice {
        ToolChoice::Named(_) => &["stop", "tool_calls"],
        _ => &["tool_calls"],
    };
    let f = ctx
        .finish
        .filter(|f| *f != "length" && !expected.contains(f))?;
    Some(Problem::warn(
        Owner::Server,
        ProblemCode::FinishReasonForToolCall,
        format!("finish_reason is {f:?} for a tool call; OpenAI clients expect \"tool_calls\""),
    ))
}

pub(super) fn structured_not_json(ctx: &Context) -> Option<Problem> {
    let e = ctx.structured.as_ref()?.parsed.as_ref().err()?;
    let (owner, why) = if ctx.finish_is("length") {
        (
            Owner::Model,
            "the model did not close the JSON before max_tokens",
        )
    } else {
        (
            Owner::Server,
            "response_format json_schema was not enforced",
        )
    };
    Some(Problem::fail(
        owner,
        ProblemCode::StructuredNotJson,
        format!(
            "{why}: content is not JSON ({e}): {}",
            quote(ctx.content, 120)
        ),
    ))
}

pub(super) fn structured_schema(ctx: &Context) -> Option<Problem> {
    let check = ctx.structured.as_ref()?.schema_check.as_ref()?;
    let errors = check.as_ref().ok().filter(|e| !e.is_empty())?;
    Some(Problem::fail(
        Owner::Server,
        ProblemCode::StructuredSchema,
        format!(
            "content breaks the requested schema (response_format was not enforced): {}",
            errors.join("; ")
        ),
    ))
}

pub(super) fn schema_unusable(ctx: &Context) -> Option<Problem> {
    let check = ctx.structured.as_ref()?.schema_check.as_ref()?;
    let e = check.as_ref().err()?;
    Some(Problem::warn(
        Owner::Client,
        ProblemCode::SchemaUnusable,
        e.clone(),
    ))
}
