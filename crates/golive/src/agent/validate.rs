//! Judging one chat-completions exchange: envelope, tool calls, arguments against the
//! tool's JSON Schema, finish_reason, reasoning and usage fields, and whose fault each
//! problem is (runbook: a parser error is handled differently from a model that emits a
//! formally wrong tool call).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::report::Owner;

/// How bad one finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Fail,
    Warn,
}

/// One finding about one exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub owner: Owner,
    pub severity: Severity,
    /// Stable short code, e.g. `empty_tool_calls_with_finish_reason`.
    pub code: String,
    pub detail: String,
}

impl Problem {
    pub fn fail(owner: Owner, code: &str, detail: impl Into<String>) -> Self {
        Problem {
            owner,
            severity: Severity::Fail,
            code: code.to_string(),
            detail: detail.into(),
        }
    }
    pub fn warn(owner: Owner, code: &str, detail: impl Into<String>) -> Self {
        Problem {
            owner,
            severity: Severity::Warn,
            code: code.to_string(),
            detail: detail.into(),
        }
    }
}

/// What a request must produce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub enum Answer {
    /// A non-empty text answer and no tool call.
    Text,
    /// Either a text answer or valid tool calls (after a tool result, or small talk with tools offered).
    TextOrTool,
    /// At least one tool call; the first one to `name` when given, with `args` as a subset of its arguments.
    Tool {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Map<String, Value>>,
    },
    /// `content` is JSON valid against `schema` (structured output).
    Json { schema: Value },
    /// A clean 4xx with an error message (an invalid request must not get a 5xx or a hang).
    ClientError,
    /// A tool call cut off by `max_tokens`: `finish_reason` must be `length`, not `tool_calls`.
    Truncated,
}

/// One tool call, from a message or assembled from stream deltas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: String,
}

/// The assistant turn of a 2xx answer, the same for streamed and non-streamed answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    pub finish_reason: Option<String>,
    pub content: Option<String>,
    pub reasoning: Option<String>,
    /// `reasoning` or the older `reasoning_content`, whichever carried it.
    pub reasoning_field: Option<String>,
    /// `None` when the field is absent or null; `Some(empty)` for `"tool_calls": []`.
    pub tool_calls: Option<Vec<ToolCall>>,
    pub usage: Option<Value>,
}

impl Reply {
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }
    pub fn has_text(&self) -> bool {
        self.content
            .as_deref()
            .is_some_and(|c| !c.trim().is_empty())
    }
    pub fn completion_tokens(&self) -> Option<u64> {
        self.usage.as_ref()?.get("completion_tokens")?.as_u64()
    }
}

/// What came back for one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// HTTP 2xx with a body read as a chat completion (or an assembled stream).
    Reply {
        status: u16,
        reply: Reply,
        /// Problems found while reading the envelope or the stream.
        envelope: Vec<Problem>,
    },
    /// HTTP status outside 2xx.
    HttpError {
        status: u16,
        message: Option<String>,
        body_excerpt: String,
        /// The body is JSON (an API error), not a proxy's HTML page.
        json_body: bool,
    },
    /// No complete answer within the deadline.
    Timeout { after_ms: u64 },
    /// The connection failed (`connect`: nothing listening) or broke.
    Transport { connect: bool, error: String },
}

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

fn has_call_markup(content: &str) -> bool {
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
fn has_open_call(content: &str) -> bool {
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
            "envelope_object",
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
            "envelope_no_choices",
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
            "envelope_no_message",
            "`choices[0].message` is missing",
        ));
        return (reply, problems);
    };
    match message.get("content") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => reply.content = Some(s.clone()),
        Some(other) => problems.push(Problem::fail(
            Owner::Server,
            "envelope_content_type",
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
                    "reasoning_fields_differ",
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
                            "arguments_not_string",
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
            "envelope_tool_calls_type",
            format!("`message.tool_calls` is {other}, expected an array"),
        )),
    }
    (reply, problems)
}

/// The offered tools of a request: name -> parameter schema.
pub fn offered_tools(request: &Value) -> Vec<(String, Value)> {
    request
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    let f = t.get("function")?;
                    let name = f.get("name")?.as_str()?.to_string();
                    let params = f
                        .get("parameters")
                        .cloned()
                        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                    Some((name, params))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `tool_choice` of a request: `required`, a named function, or free.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    Free,
    Required,
    Named(String),
}

pub fn tool_choice(request: &Value) -> ToolChoice {
    match request.get("tool_choice") {
        Some(Value::String(s)) if s == "required" => ToolChoice::Required,
        Some(obj @ Value::Object(_)) => obj
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|n| ToolChoice::Named(n.to_string()))
            .unwrap_or(ToolChoice::Free),
        _ => ToolChoice::Free,
    }
}

/// Validates `instance` against a JSON Schema; `Err` lists the violations, or says the schema is unusable.
/// External `$ref`s are never fetched.
pub fn schema_errors(schema: &Value, instance: &Value) -> Result<Vec<String>, String> {
    struct NoFetch;
    impl jsonschema::Retrieve for NoFetch {
        fn retrieve(
            &self,
            uri: &jsonschema::Uri<String>,
        ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
            Err(format!("external schema {uri} is not fetched").into())
        }
    }
    let validator = jsonschema::options()
        .with_retriever(NoFetch)
        .build(schema)
        .map_err(|e| format!("the schema itself is invalid: {e}"))?;
    Ok(validator
        .iter_errors(instance)
        .take(5)
        .map(|e| {
            // The offending value is quoted so that `--no-content` can withhold it.
            let value = quote(&e.instance().to_string(), 60);
            let message = e.masked_with(value).to_string();
            let path = e.instance_path().to_string();
            if path.is_empty() {
                message
            } else {
                format!("{path}: {message}")
            }
        })
        .collect())
}

/// Quotes (at most `max` characters of) answer or request text inside `⟦…⟧`, so that
/// `--no-content` can find and remove every quoted excerpt ([`scrub_quotes`]).
pub fn quote(text: &str, max: usize) -> String {
    let mut cut: String = text
        .chars()
        .take(max)
        .map(|c| if c == '⟧' { ']' } else { c })
        .collect();
    if text.chars().count() > max {
        cut.push('…');
    }
    format!("⟦{cut}⟧")
}

/// Replaces every [`quote`]d excerpt with its length only.
pub fn scrub_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('⟦') {
        out.push_str(&rest[..start]);
        let after = &rest[start + '⟦'.len_utf8()..];
        match after.find('⟧') {
            Some(end) => {
                out.push_str(&format!(
                    "⟦{} chars withheld⟧",
                    after[..end].chars().count()
                ));
                rest = &after[end + '⟧'.len_utf8()..];
            }
            None => {
                out.push_str("⟦withheld⟧");
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Judges one outcome against what the request expected.
pub fn judge(request: &Value, answer: &Answer, outcome: &Outcome) -> Vec<Problem> {
    match outcome {
        Outcome::Timeout { after_ms } => {
            if *answer == Answer::ClientError {
                // A tiny invalid request must be rejected at once; hanging is the server's doing.
                vec![Problem::fail(
                    Owner::Server,
                    "invalid_request_hang",
                    format!("no answer to an invalid request within {after_ms} ms: the server should reject it with a 4xx"),
                )]
            } else {
                vec![Problem::fail(
                    Owner::Gateway,
                    "timeout",
                    format!("no complete answer within {after_ms} ms"),
                )]
            }
        }
        Outcome::Transport { connect, error } => vec![if *connect {
            Problem::fail(Owner::Server, "connect", format!("cannot connect: {error}"))
        } else {
            Problem::fail(
                Owner::Gateway,
                "connection_broken",
                format!("the connection broke: {error}"),
            )
        }],
        Outcome::HttpError {
            status,
            message,
            body_excerpt,
            json_body,
        } => judge_http_error(
            answer,
            *status,
            message.as_deref(),
            body_excerpt,
            *json_body,
        ),
        Outcome::Reply {
            status,
            reply,
            envelope,
        } => {
            let mut problems = envelope.clone();
            if *answer == Answer::ClientError {
                problems.push(Problem::fail(
                    Owner::Server,
                    "invalid_request_accepted",
                    format!("an invalid request was answered with HTTP {status} instead of a 4xx"),
                ));
                return problems;
            }
            // A stream that ended in an error event or was cut off has no whole answer to judge.
            let broken = problems.iter().any(|p| {
                matches!(
                    p.code.as_str(),
                    "error_in_stream" | "stream_cut" | "stream_truncated" | "body_not_json"
                )
            });
            if !broken {
                judge_reply(request, answer, reply, &mut problems);
            }
            problems
        }
    }
}

fn judge_http_error(
    answer: &Answer,
    status: u16,
    message: Option<&str>,
    body: &str,
    json_body: bool,
) -> Vec<Problem> {
    let text = message.unwrap_or(body);
    let has_message = message.is_some_and(|m| !m.trim().is_empty());
    let quoted = quote(text, 200);
    if *answer == Answer::ClientError && (400..500).contains(&status) {
        if has_message {
            return Vec::new();
        }
        return vec![Problem::fail(
            Owner::Server,
            "client_error_without_message",
            format!("HTTP {status} without an error message"),
        )];
    }
    let problem = match status {
        401 | 403 => Problem::fail(
            Owner::Client,
            "auth",
            format!("HTTP {status}: check the API key ({quoted})"),
        ),
        404 => Problem::fail(
            Owner::Client,
            "not_found",
            format!("HTTP 404: check the URL and the model name ({quoted})"),
        ),
        408 | 429 => Problem::fail(
            Owner::Gateway,
            "throttled",
            format!("HTTP {status}: {quoted}"),
        ),
        502..=504 if !json_body => Problem::fail(
            Owner::Gateway,
            "gateway_error",
            format!("HTTP {status} from a gateway (not a JSON API error): {quoted}"),
        ),
        _ if mentions_parser(text) => Problem::fail(
            Owner::Parser,
            "parser_error",
            format!("HTTP {status}: {quoted}"),
        ),
        s if s >= 500 && *answer == Answer::ClientError => Problem::fail(
            Owner::Server,
            "invalid_request_5xx",
            format!("an invalid request got HTTP {s} instead of a 4xx: {quoted}"),
        ),
        s if s >= 500 => {
            Problem::fail(Owner::Server, "server_error", format!("HTTP {s}: {quoted}"))
        }
        s => Problem::fail(
            Owner::Server,
            "valid_request_rejected",
            format!("a valid request was rejected with HTTP {s}: {quoted}"),
        ),
    };
    vec![problem]
}

fn judge_reply(request: &Value, answer: &Answer, reply: &Reply, problems: &mut Vec<Problem>) {
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
            "finish_reason_missing",
            "`finish_reason` is missing",
        )),
        Some("stop" | "length" | "tool_calls" | "content_filter") => {}
        Some(other) => problems.push(Problem::warn(
            Owner::Server,
            "finish_reason_unknown",
            format!(
                "`finish_reason` is {other:?}, not one of stop, length, tool_calls, content_filter"
            ),
        )),
    }
    if finish == Some("stop") && hit_limit && !reply.has_text() && calls.is_empty() {
        problems.push(Problem::warn(
            Owner::Server,
            "stop_at_max_tokens",
            "all max_tokens were used for an empty answer, yet finish_reason is \"stop\", not \"length\"",
        ));
    }
    if finish == Some("tool_calls") && calls.is_empty() {
        problems.push(Problem::fail(
            Owner::Server,
            "tool_calls_finish_without_calls",
            "finish_reason is \"tool_calls\" but `tool_calls` is empty or absent (vLLM #53255 shape)",
        ));
    }
    if reply.tool_calls.as_ref().is_some_and(|c| c.is_empty()) && finish != Some("tool_calls") {
        problems.push(Problem::warn(
            Owner::Server,
            "empty_tool_calls_array",
            "`tool_calls: []` on a text answer; clients that test for presence take the tool branch (vLLM #44104 shape); expected null or absent",
        ));
    }
    if request.get("parallel_tool_calls") == Some(&Value::Bool(false)) && calls.len() > 1 {
        problems.push(Problem::fail(
            Owner::Server,
            "parallel_tool_calls_ignored",
            format!(
                "parallel_tool_calls was false but {} calls came back",
                calls.len()
            ),
        ));
    }
    if !calls.is_empty() && tools.is_empty() {
        problems.push(Problem::fail(
            Owner::Server,
            "tool_calls_without_tools",
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
                "tool_call_id_missing",
                format!("tool_calls[{i}] has no id"),
            )),
            Some(id) => {
                if !ids.insert(id.to_string()) {
                    problems.push(Problem::fail(
                        Owner::Server,
                        "tool_call_id_duplicate",
                        format!("tool_calls[{i}] repeats id {id:?}"),
                    ));
                }
            }
        }
        match call.kind.as_deref() {
            Some("function") => {}
            None => problems.push(Problem::warn(
                Owner::Server,
                "tool_call_type_missing",
                format!("tool_calls[{i}] has no `type: \"function\"`"),
            )),
            Some(other) => problems.push(Problem::fail(
                Owner::Server,
                "tool_call_type",
                format!("tool_calls[{i}].type is {other:?}, expected \"function\""),
            )),
        }
        let Some(name) = call.name.as_deref().filter(|n| !n.is_empty()) else {
            problems.push(Problem::fail(
                Owner::Server,
                "tool_call_name_missing",
                format!("tool_calls[{i}] has no function name"),
            ));
            continue;
        };
        let Some((_, schema)) = tools.iter().find(|(n, _)| n == name) else {
            if !tools.is_empty() {
                problems.push(Problem::fail(
                    args_owner,
                    "tool_not_offered",
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
                        "truncated_call_not_length",
                        format!(
                            "tool_calls[{i}] was cut off by max_tokens (arguments do not parse: {e}) but finish_reason is {:?}, not \"length\" (vLLM #53269 shape)",
                            finish.unwrap_or("null")
                        ),
                    ));
                } else {
                    problems.push(Problem::fail(
                        args_owner,
                        "arguments_not_json",
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
                "arguments_not_object",
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
                "arguments_schema",
                format!(
                    "tool_calls[{i}] ({name}) arguments break the tool's schema: {}",
                    errors.join("; ")
                ),
            )),
            Err(e) => problems.push(Problem::warn(
                Owner::Client,
                "tool_schema_unusable",
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
            "tool_call_markup_in_content",
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
            "reasoning_in_content",
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
                "usage_missing",
                "`stream_options.include_usage` was set but no usage chunk came",
            ));
        } else if !streamed {
            problems.push(Problem::warn(
                Owner::Server,
                "usage_missing",
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
                    "empty_answer",
                    format!("no text (finish_reason {:?})", finish.unwrap_or("null")),
                ));
            }
        }
        Answer::TextOrTool => {
            if !reply.has_text() && calls.is_empty() && !markup_in_content {
                problems.push(Problem::fail(
                    Owner::Model,
                    "empty_answer",
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
                        "no_tool_call_within_max_tokens",
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
                        "no_tool_call",
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
                        "tool_call_cut_off",
                        "the tool call was cut off by max_tokens (finish_reason \"length\")",
                    ));
                } else if finish == Some("length") {
                    // The complete calls stand; "length" honestly flags the cut-off rest.
                    problems.push(Problem::warn(
                        Owner::Model,
                        "calls_until_max_tokens",
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
                            "wrong_tool",
                            format!("called {got:?}, expected {want:?}"),
                        ));
                    } else if let Some(want_args) = args {
                        let got_args: Value =
                            serde_json::from_str(&calls[0].arguments).unwrap_or(Value::Null);
                        for (k, v) in want_args {
                            if got_args.get(k) != Some(v) {
                                problems.push(Problem::fail(
                                    Owner::Model,
                                    "wrong_argument",
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
                            "finish_reason_for_tool_call",
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
                        "structured_not_json",
                        format!("{why}: content is not JSON ({e}): {}", quote(content, 120)),
                    ));
                }
                Ok(value) => match schema_errors(schema, &value) {
                    Ok(errors) if errors.is_empty() => {}
                    Ok(errors) => problems.push(Problem::fail(
                        Owner::Server,
                        "structured_schema",
                        format!(
                            "content breaks the requested schema (response_format was not enforced): {}",
                            errors.join("; ")
                        ),
                    )),
                    Err(e) => problems.push(Problem::warn(Owner::Client, "schema_unusable", e)),
                },
            }
        }
        Answer::Truncated => {
            let cut = truncated_args || hit_limit;
            if cut
                && finish != Some("length")
                && !problems
                    .iter()
                    .any(|p| p.code == "truncated_call_not_length")
            {
                problems.push(Problem::fail(
                    Owner::Server,
                    "truncation_not_length",
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
                        "truncation_not_exercised",
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
        "tool_choice_not_enforced",
        format!(
            "tool_choice {} was not enforced: {what} ({})",
            request.get("tool_choice").unwrap_or(&Value::Null),
            quote(content, 80)
        ),
    )
}

/// Compact shape of a reply for comparing a streamed answer with the non-streamed one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub finish_reason: Option<String>,
    pub has_text: bool,
    pub tools: Vec<String>,
}

pub fn shape(reply: &Reply) -> Shape {
    Shape {
        finish_reason: reply.finish_reason.clone(),
        has_text: reply.has_text(),
        tools: reply
            .calls()
            .iter()
            .map(|c| c.name.clone().unwrap_or_default())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather_request() -> Value {
        json!({
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]}}}],
            "max_tokens": 64
        })
    }

    fn completion(message: Value, finish: &str) -> Value {
        json!({"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}})
    }

    fn run(request: &Value, answer: &Answer, body: &Value) -> Vec<Problem> {
        let (reply, envelope) = parse_completion(body);
        judge(
            request,
            answer,
            &Outcome::Reply {
                status: 200,
                reply,
                envelope,
            },
        )
    }

    fn codes(p: &[Problem]) -> Vec<&str> {
        p.iter().map(|p| p.code.as_str()).collect()
    }

    #[test]
    fn valid_call_passes_and_enum_violation_is_the_models() {
        let req = weather_request();
        let want = Answer::Tool {
            name: Some("get_weather".into()),
            args: None,
        };
        let ok = completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Berlin\"}"}}]}),
            "tool_calls",
        );
        assert_eq!(run(&req, &want, &ok), vec![]);
        let bad = completion(
            json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"unit\":\"kelvin\"}"}}]}),
            "tool_calls",
        );
        let p = run(&req, &want, &bad);
        assert_eq!(codes(&p), vec!["arguments_schema"]);
        assert_eq!(p[0].owner, Owner::Model);
        assert!(
            p[0].detail.contains("city") && p[0].detail.contains("kelvin"),
            "{p:?}"
        );
    }

    #[test]
    fn scrubbed_details_keep_the_rule_but_not_the_value() {
        let req = weather_request();
        let body = completion(
            json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Berlin\", \"unit\": \"DE89-3704-0044\"}"}}]}),
            "tool_calls",
        );
        let p = run(&req, &Answer::TextOrTool, &body);
        assert!(p[0].detail.contains("DE89-3704-0044"), "{p:?}");
        let scrubbed = scrub_quotes(&p[0].detail);
        assert!(!scrubbed.contains("DE89"), "{scrubbed}");
        assert!(
            scrubbed.contains("/unit") && scrubbed.contains("celsius"),
            "{scrubbed}"
        );
    }

    #[test]
    fn repeated_calls_until_length_warn_and_parallel_false_is_enforced() {
        let mut req = weather_request();
        req["tool_choice"] = json!("required");
        let call = |id: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": args}});
        let body = completion(
            json!({"role": "assistant", "tool_calls": [call("a", "{\"city\": \"Rome\"}"), call("b", "{\"city\": \"Ro")]}),
            "length",
        );
        let want = Answer::Tool {
            name: None,
            args: None,
        };
        let p = run(&req, &want, &body);
        assert_eq!(codes(&p), vec!["calls_until_max_tokens"]);
        assert_eq!(p[0].severity, Severity::Warn);
        // Only a cut-off call: nothing usable came back.
        let only_cut = completion(
            json!({"role": "assistant", "tool_calls": [call("b", "{\"city\": \"Ro")]}),
            "length",
        );
        assert_eq!(
            codes(&run(&req, &want, &only_cut)),
            vec!["tool_call_cut_off"]
        );
        req["parallel_tool_calls"] = json!(false);
        let two = completion(
            json!({"role": "assistant", "tool_calls": [call("a", "{\"city\": \"Rome\"}"), call("b", "{\"city\": \"Oslo\"}")]}),
            "tool_calls",
        );
        let p = run(&req, &want, &two);
        assert_eq!(
            (codes(&p), p[0].owner),
            (vec!["parallel_tool_calls_ignored"], Owner::Server)
        );
    }

    #[test]
    fn cut_off_case_is_judged_only_when_something_was_cut() {
        let mut req = weather_request();
        req["max_tokens"] = json!(12);
        let text = |finish: &str, used: u64| {
            let mut b = completion(json!({"role": "assistant", "content": "Sure."}), finish);
            b["usage"]["completion_tokens"] = json!(used);
            b
        };
        // A short free answer within the budget: nothing was cut, so nothing was tested.
        let p = run(&req, &Answer::Truncated, &text("stop", 3));
        assert_eq!(
            (codes(&p), p[0].severity),
            (vec!["truncation_not_exercised"], Severity::Warn)
        );
        // The whole budget used but "stop": the server hid the truncation.
        let p = run(&req, &Answer::Truncated, &text("stop", 12));
        assert!(codes(&p).contains(&"truncation_not_length"), "{p:?}");
        // A named tool_choice answered with text was not enforced.
        req["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
        let p = run(&req, &Answer::Truncated, &text("length", 12));
        assert_eq!(
            (codes(&p), p[0].owner),
            (vec!["tool_choice_not_enforced"], Owner::Server)
        );
    }

    #[test]
    fn constrained_arguments_are_the_servers() {
        let mut req = weather_request();
        req["tool_choice"] = json!("required");
        let bad = completion(
            json!({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": 5}"}}]}),
            "tool_calls",
        );
        let p = run(
            &req,
            &Answer::Tool {
                name: None,
                args: None,
            },
            &bad,
        );
        assert_eq!(p[0].owner, Owner::Server);
    }

    #[test]
    fn duplicate_ids_unknown_tool_and_markup_in_content() {
        let req = weather_request();
        let body = completion(
            json!({"role": "assistant", "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"A\"}"}},
                {"id": "x", "type": "function", "function": {"name": "launch", "arguments": "{}"}}]}),
            "tool_calls",
        );
        let p = run(&req, &Answer::TextOrTool, &body);
        assert_eq!(
            codes(&p),
            vec!["tool_call_id_duplicate", "tool_not_offered"]
        );
        let markup = completion(
            json!({"role": "assistant", "content": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n</tool_call>"}),
            "stop",
        );
        let p = run(
            &req,
            &Answer::Tool {
                name: None,
                args: None,
            },
            &markup,
        );
        assert_eq!(codes(&p), vec!["tool_call_markup_in_content"]);
        // The same markup cut off by max_tokens (vLLM #47903; vLLM 0.32 with a non-strict
        // tool) stays the parser's and says so; a closed call does not.
        let cut = completion(
            json!({"role": "assistant", "content": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\n  \"properties\": {\"city\""}),
            "length",
        );
        let tool = Answer::Tool {
            name: None,
            args: None,
        };
        let pc = run(&req, &tool, &cut);
        assert_eq!(codes(&pc), vec!["tool_call_markup_in_content"], "{pc:?}");
        assert!(pc[0].detail.contains("cut off by max_tokens"), "{pc:?}");
        let closed = completion(
            json!({"role": "assistant", "content": "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"A\"}}\n</tool_call>"}),
            "length",
        );
        let pc = run(&req, &tool, &closed);
        assert_eq!(codes(&pc), vec!["tool_call_markup_in_content"], "{pc:?}");
        assert!(!pc[0].detail.contains("cut off by max_tokens"), "{pc:?}");
        assert_eq!(p[0].owner, Owner::Parser);
    }

    #[test]
    fn text_instead_of_free_call_is_the_models_but_required_is_the_servers() {
        let mut req = weather_request();
        let body = completion(
            json!({"role": "assistant", "content": "It is sunny."}),
            "stop",
        );
        let want = Answer::Tool {
            name: None,
            args: None,
        };
        let p = run(&req, &want, &body);
        assert_eq!(
            (p[0].owner, p[0].code.as_str()),
            (Owner::Model, "no_tool_call")
        );
        req["tool_choice"] = json!({"type": "function", "function": {"name": "get_weather"}});
        let p = run(&req, &want, &body);
        assert_eq!(
            (p[0].owner, p[0].code.as_str()),
            (Owner::Server, "tool_choice_not_enforced")
        );
    }

    #[test]
    fn structured_output_is_validated() {
        let schema =
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let req = json!({"max_tokens": 32});
        let want = Answer::Json { schema };
        let ok = completion(
            json!({"role": "assistant", "content": " {\"n\": 3} "}),
            "stop",
        );
        assert_eq!(run(&req, &want, &ok), vec![]);
        let bad = completion(
            json!({"role": "assistant", "content": "{\"n\": \"three\"}"}),
            "stop",
        );
        assert_eq!(codes(&run(&req, &want, &bad)), vec!["structured_schema"]);
        let cut = completion(
            json!({"role": "assistant", "content": "{\"n\": "}),
            "length",
        );
        let p = run(&req, &want, &cut);
        assert_eq!(
            (p[0].owner, p[0].code.as_str()),
            (Owner::Model, "structured_not_json")
        );
    }

    #[test]
    fn http_errors_are_attributed() {
        let req = json!({});
        let err = |status, message: Option<&str>, json_body| Outcome::HttpError {
            status,
            message: message.map(str::to_string),
            body_excerpt: String::new(),
            json_body,
        };
        assert!(judge(
            &req,
            &Answer::ClientError,
            &err(400, Some("bad schema"), true)
        )
        .is_empty());
        let p = judge(&req, &Answer::ClientError, &err(500, Some(""), true));
        assert_eq!(
            (p[0].owner, p[0].code.as_str()),
            (Owner::Server, "invalid_request_5xx")
        );
        let p = judge(&req, &Answer::Text, &err(502, None, false));
        assert_eq!(p[0].owner, Owner::Gateway);
        let p = judge(
            &req,
            &Answer::Text,
            &err(
                500,
                Some("Error in extracting tool call from response"),
                true,
            ),
        );
        assert_eq!(p[0].owner, Owner::Parser);
        let p = judge(&req, &Answer::Text, &err(401, Some("no key"), true));
        assert_eq!(p[0].owner, Owner::Client);
        let p = judge(
            &req,
            &Answer::ClientError,
            &Outcome::Timeout { after_ms: 5 },
        );
        assert_eq!(p[0].owner, Owner::Server);
        let p = judge(&req, &Answer::Text, &Outcome::Timeout { after_ms: 5 });
        assert_eq!(p[0].owner, Owner::Gateway);
    }
}
