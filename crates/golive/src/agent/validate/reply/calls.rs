//! Judges of one tool call: id, type, name among the offered tools, arguments valid
//! JSON against the tool's schema.

use super::{Call, Context};
use crate::agent::validate::{quote, Answer, Owner, Problem, ProblemCode};

pub(super) fn tool_call_id_missing(_: &Context, c: &Call) -> Option<Problem> {
    matches!(c.call.id.as_deref(), None | Some("")).then(|| {
        Problem::fail(
            Owner::Server,
            ProblemCode::ToolCallIdMissing,
            format!("tool_calls[{}] has no id", c.i),
        )
    })
}

pub(super) fn tool_call_id_duplicate(_: &Context, c: &Call) -> Option<Problem> {
    let id = c.call.id.as_deref().filter(|_| c.repeated_id)?;
    Some(Problem::fail(
        Owner::Server,
        ProblemCode::ToolCallIdDuplicate,
        format!("tool_calls[{}] repeats id {id:?}", c.i),
    ))
}

pub(super) fn tool_call_type_missing(_: &Context, c: &Call) -> Option<Problem> {
    c.call.kind.is_none().then(|| {
        Problem::warn(
            Owner::Server,
            ProblemCode::ToolCallTypeMissing,
            format!("tool_calls[{}] has no `type: \"function\"`", c.i),
        )
    })
}

pub(super) fn tool_call_type(_: &Context, c: &Call) -> Option<Problem> {
    let kind = c.call.kind.as_deref().filter(|k| *k != "function")?;
    Some(Problem::fail(
        Owner::Server,
        ProblemCode::ToolCallType,
        format!(
            "tool_calls[{}].type is {kind:?}, expected \"function\"",
            c.i
        ),
    ))
}

pub(super) fn tool_call_name_missing(_: &Context, c: &Call) -> Option<Problem> {
    c.name.is_none().then(|| {
        Problem::fail(
            Owner::Server,
            ProblemCode::ToolCallNameMissing,
            format!("tool_calls[{}] has no function name", c.i),
        )
    })
}

pub(super) fn tool_not_offered(ctx: &Context, c: &Call) -> Option<Problem> {
    let name = c
        .name
        .filter(|_| c.schema.is_none() && !ctx.tools.is_empty())?;
    Some(Problem::fail(
        ctx.args_owner,
        ProblemCode::ToolNotOffered,
        format!("tool_calls[{}] calls {name:?}, which was not offered", c.i),
    ))
}

/// Arguments that do not parse when max_tokens ran out (or the case cuts them off):
/// a cut-off call. With finish_reason "length" the server said so honestly, and the
/// expectation judges it.
fn cut_off_error<'c>(ctx: &Context, c: &'c Call) -> Option<&'c serde_json::Error> {
    match &c.args {
        Some(Err(e)) if !ctx.finish_is("length") => Some(e),
        _ => None,
    }
}

pub(super) fn truncated_call_not_length(ctx: &Context, c: &Call) -> Option<Problem> {
    let e = cut_off_error(ctx, c).filter(|_| ctx.hit_limit || *ctx.answer == Answer::Truncated)?;
    Some(Problem::fail(
        Owner::Server,
        ProblemCode::TruncatedCallNotLength,
        format!(
            "tool_calls[{}] was cut off by max_tokens (arguments do not parse: {e}) but finish_reason is {:?}, not \"length\" (vLLM #53269 shape)",
            c.i,
            ctx.finish_or_null()
        ),
    ))
}

pub(super) fn arguments_not_json(ctx: &Context, c: &Call) -> Option<Problem> {
    let e =
        cut_off_error(ctx, c).filter(|_| !(ctx.hit_limit || *ctx.answer == Answer::Truncated))?;
    Some(Problem::fail(
        ctx.args_owner,
        ProblemCode::ArgumentsNotJson,
        format!(
            "tool_calls[{}] ({}) arguments are not JSON ({e}): {}",
            c.i,
            c.name.unwrap_or_default(),
            quote(&c.call.arguments, 120)
        ),
    ))
}

pub(super) fn arguments_not_object(ctx: &Context, c: &Call) -> Option<Problem> {
    let args = c.args.as_ref()?.as_ref().ok().filter(|a| !a.is_object())?;
    Some(Problem::fail(
        ctx.args_owner,
        ProblemCode::ArgumentsNotObject,
        format!(
            "tool_calls[{}] ({}) arguments are {}, not a JSON object",
            c.i,
            c.name.unwrap_or_default(),
            quote(&args.to_string(), 80)
        ),
    ))
}

pub(super) fn arguments_schema(ctx: &Context, c: &Call) -> Option<Problem> {
    let errors = c
        .schema_check
        .as_ref()?
        .as_ref()
        .ok()
        .filter(|e| !e.is_empty())?;
    Some(Problem::fail(
        ctx.args_owner,
        ProblemCode::ArgumentsSchema,
        format!(
            "tool_calls[{}] ({}) arguments break the tool's schema: {}",
            c.i,
            c.name.unwrap_or_default(),
            errors.join("; ")
        ),
    ))
}

pub(super) fn tool_schema_unusable(_: &Context, c: &Call) -> Option<Problem> {
    let e = c.schema_check.as_ref()?.as_ref().err()?;
    Some(Problem::warn(
        Owner::Client,
        ProblemCode::ToolSchemaUnusable,
        format!("tool {}: {e}", c.name.unwrap_or_default()),
    ))
}
