//! Judging a parsed reply: one small judge per finding code, run in a fixed order over
//! facts read once from the request and the reply ([`Context`]). A new finding is one
//! new function and one line in [`JUDGES`].
//!
//! The order is the order of the findings in the report: the envelope (finish_reason,
//! the `tool_calls` array), each tool call in turn, text a parser should have handled,
//! usage, then what the case expected. Judges whose findings exclude each other (a
//! call's id is missing or repeated, never both) check their own conditions, so each
//! stands alone.

mod calls;
mod envelope;
mod expected;

use serde_json::{Map, Value};

use super::parse::has_call_markup;
use super::{schema_errors, tool_choice, Answer, Owner, Problem, Reply, ToolCall, ToolChoice};

/// What every judge reads: the exchange and the facts derived from it once.
pub(super) struct Context<'a> {
    request: &'a Value,
    answer: &'a Answer,
    reply: &'a Reply,
    /// The offered tools: name -> parameter schema.
    tools: &'a [(String, Value)],
    choice: ToolChoice,
    /// `tool_choice` required or named: the server must produce a call.
    constrained: bool,
    /// Whose broken arguments are: the server's to constrain under a required or named
    /// `tool_choice`, else the model's.
    args_owner: Owner,
    /// All of `max_tokens` (or `max_completion_tokens`) was used.
    hit_limit: bool,
    finish: Option<&'a str>,
    content: &'a str,
    calls: Vec<Call<'a>>,
    /// A call to an offered tool whose arguments do not parse (cut off, or not JSON).
    truncated_args: bool,
    /// Calls whose raw arguments parse as JSON.
    complete_calls: usize,
    /// No call came, but the text holds call markup a parser should have turned into one.
    markup_in_content: bool,
    /// Structured output (`Answer::Json`): the content parsed, and checked against the
    /// schema when it parsed.
    structured: Option<Structured>,
}

/// One tool call and what was read from it.
pub(super) struct Call<'a> {
    /// Its index in `tool_calls`.
    i: usize,
    call: &'a ToolCall,
    /// The function name, when not empty.
    name: Option<&'a str>,
    /// An earlier call has the same (non-empty) id.
    repeated_id: bool,
    /// The parameter schema of the offered tool it names.
    schema: Option<&'a Value>,
    /// For a call to an offered tool: its arguments (blank reads as `{}`).
    args: Option<Result<Value, serde_json::Error>>,
    /// For an arguments object: the schema's violations, or why the schema is unusable.
    schema_check: Option<Result<Vec<String>, String>>,
}

pub(super) struct Structured {
    parsed: Result<Value, serde_json::Error>,
    schema_check: Option<Result<Vec<String>, String>>,
}

impl<'a> Context<'a> {
    fn new(
        request: &'a Value,
        answer: &'a Answer,
        reply: &'a Reply,
        tools: &'a [(String, Value)],
    ) -> Self {
        let choice = tool_choice(request);
        let constrained = choice != ToolChoice::Free;
        let max_tokens = request
            .get("max_tokens")
            .or_else(|| request.get("max_completion_tokens"))
            .and_then(Value::as_u64);
        let hit_limit = matches!((reply.completion_tokens(), max_tokens), (Some(used), Some(max)) if used >= max);
        let raw_calls = reply.calls();
        let calls: Vec<Call> = raw_calls
            .iter()
            .enumerate()
            .map(|(i, call)| Call::new(i, call, &raw_calls[..i], tools))
            .collect();
        let content = reply.content.as_deref().unwrap_or("");
        let structured = match answer {
            Answer::Json { schema } => {
                let parsed = serde_json::from_str::<Value>(content.trim());
                let schema_check = parsed.as_ref().ok().map(|v| schema_errors(schema, v));
                Some(Structured {
                    parsed,
                    schema_check,
                })
            }
            _ => None,
        };
        Context {
            request,
            answer,
            reply,
            tools,
            constrained,
            // Arguments produced under tool_choice required/named are the server's to constrain.
            args_owner: if constrained {
                Owner::Server
            } else {
                Owner::Model
            },
            choice,
            hit_limit,
            finish: reply.finish_reason.as_deref(),
            content,
            truncated_args: calls.iter().any(|c| matches!(c.args, Some(Err(_)))),
            complete_calls: raw_calls
                .iter()
                .filter(|c| serde_json::from_str::<Value>(&c.arguments).is_ok())
                .count(),
            markup_in_content: !tools.is_empty()
                && raw_calls.is_empty()
                && has_call_markup(content),
            calls,
            structured,
        }
    }

    fn finish_is(&self, reason: &str) -> bool {
        self.finish == Some(reason)
    }

    /// `finish_reason` as the findings quote it.
    fn finish_or_null(&self) -> &str {
        self.finish.unwrap_or("null")
    }

    /// The case wants a tool call, and none came back (nor as markup in the text).
    fn tool_call_missing(&self) -> bool {
        matches!(self.answer, Answer::Tool { .. })
            && self.calls.is_empty()
            && !self.markup_in_content
    }

    /// The case wants a tool call, and calls came back.
    fn tool_call_present(&self) -> bool {
        matches!(self.answer, Answer::Tool { .. }) && !self.calls.is_empty()
    }

    /// The case wants a call cut off by max_tokens, and no call was even started.
    fn cut_call_missing(&self) -> bool {
        *self.answer == Answer::Truncated && self.calls.is_empty() && !self.markup_in_content
    }

    /// The tool the case wants called first, and the arguments it wants of that call.
    fn expected_tool(&self) -> Option<(&'a str, Option<&'a Map<String, Value>>)> {
        match self.answer {
            Answer::Tool {
                name: Some(name),
                args,
            } => Some((name.as_str(), args.as_ref())),
            _ => None,
        }
    }

    /// The first call names the tool the case wants.
    fn first_call_is_expected(&self) -> bool {
        match (self.expected_tool(), self.calls.first()) {
            (Some((want, _)), Some(first)) => first.call.name.as_deref().unwrap_or("") == want,
            _ => false,
        }
    }
}

impl<'a> Call<'a> {
    fn new(
        i: usize,
        call: &'a ToolCall,
        earlier: &[ToolCall],
        tools: &'a [(String, Value)],
    ) -> Self {
        let name = call.name.as_deref().filter(|n| !n.is_empty());
        let repeated_id = match call.id.as_deref() {
            None | Some("") => false,
            Some(id) => earlier.iter().any(|c| c.id.as_deref() == Some(id)),
        };
        let schema = name.and_then(|name| {
            tools
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, schema)| schema)
        });
        let args = schema.map(|_| {
            serde_json::from_str::<Value>(if call.arguments.trim().is_empty() {
                "{}"
            } else {
                &call.arguments
            })
        });
        let schema_check = match (schema, &args) {
            (Some(schema), Some(Ok(args))) if args.is_object() => Some(schema_errors(schema, args)),
            _ => None,
        };
        Call {
            i,
            call,
            name,
            repeated_id,
            schema,
            args,
            schema_check,
        }
    }
}

type ReplyJudge = fn(&Context) -> Option<Problem>;
type CallJudge = fn(&Context, &Call) -> Option<Problem>;
type ArgumentJudge = fn(&Context, &str, &Value) -> Option<Problem>;

/// A judge and what it looks at.
enum Judge {
    /// The reply as a whole.
    Reply(ReplyJudge),
    /// Each tool call in turn, all of these judges on one call before the next.
    EachCall(&'static [CallJudge]),
    /// Each argument the case expects of the first call.
    EachExpectedArgument(ArgumentJudge),
}

use calls::*;
use envelope::*;
use expected::*;

/// Every judge, in the order its findings are reported.
const JUDGES: &[Judge] = &[
    // The envelope.
    Judge::Reply(finish_reason_missing),
    Judge::Reply(finish_reason_unknown),
    Judge::Reply(stop_at_max_tokens),
    Judge::Reply(tool_calls_finish_without_calls),
    Judge::Reply(empty_tool_calls_array),
    Judge::Reply(parallel_tool_calls_ignored),
    Judge::Reply(tool_calls_without_tools),
    // Each tool call: id, type, name among the offered tools, arguments valid JSON
    // against the tool's schema.
    Judge::EachCall(&[
        tool_call_id_missing,
        tool_call_id_duplicate,
        tool_call_type_missing,
        tool_call_type,
        tool_call_name_missing,
        tool_not_offered,
        truncated_call_not_length,
        arguments_not_json,
        arguments_not_object,
        arguments_schema,
        tool_schema_unusable,
    ]),
    // Text that a parser should have handled; usage.
    Judge::Reply(tool_call_markup_in_content),
    Judge::Reply(reasoning_in_content),
    Judge::Reply(usage_missing),
    // What the case expected.
    Judge::Reply(empty_answer),
    Judge::Reply(truncation_not_length),
    Judge::Reply(tool_choice_not_enforced),
    Judge::Reply(no_tool_call_within_max_tokens),
    Judge::Reply(no_tool_call),
    Judge::Reply(truncation_not_exercised),
    Judge::Reply(tool_call_cut_off),
    Judge::Reply(calls_until_max_tokens),
    Judge::Reply(wrong_tool),
    Judge::EachExpectedArgument(wrong_argument),
    Judge::Reply(finish_reason_for_tool_call),
    Judge::Reply(structured_not_json),
    Judge::Reply(structured_schema),
    Judge::Reply(schema_unusable),
];

pub(super) fn judge_reply(
    request: &Value,
    answer: &Answer,
    reply: &Reply,
    problems: &mut Vec<Problem>,
) {
    let tools = super::offered_tools(request);
    let ctx = Context::new(request, answer, reply, &tools);
    for judge in JUDGES {
        match judge {
            Judge::Reply(judge) => problems.extend(judge(&ctx)),
            Judge::EachCall(judges) => {
                for call in &ctx.calls {
                    problems.extend(judges.iter().filter_map(|judge| judge(&ctx, call)));
                }
            }
            Judge::EachExpectedArgument(judge) => {
                if let Some((_, Some(args))) = ctx.expected_tool() {
                    for (key, want) in args {
                        problems.extend(judge(&ctx, key, want));
                    }
                }
            }
        }
    }
}
