//! Judging one chat-completions exchange: envelope, tool calls, arguments against the
//! tool's JSON Schema, finish_reason, reasoning and usage fields, and whose fault each
//! problem is (runbook: a parser error is handled differently from a model that emits a
//! formally wrong tool call).

mod code;
mod parse;
mod reply;
mod schema;

pub use code::ProblemCode;

pub use parse::{mentions_parser, parse_completion};
pub use schema::{offered_tools, quote, schema_errors, scrub_quotes, tool_choice, ToolChoice};

use reply::judge_reply;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::report::Owner;

/// How bad one finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The exchange breaks the interface: the case fails.
    Fail,
    /// Worth a look, but clients cope: the case warns.
    Warn,
}

/// One finding about one exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Who has to act on it.
    pub owner: Owner,
    /// Whether it fails the case or only warns.
    pub severity: Severity,
    /// Stable short code, e.g. `empty_tool_calls_array`.
    pub code: ProblemCode,
    /// What was seen, in words (quoted excerpts included).
    pub detail: String,
}

impl Problem {
    /// A failing finding.
    pub fn fail(owner: Owner, code: ProblemCode, detail: impl Into<String>) -> Self {
        Problem {
            owner,
            severity: Severity::Fail,
            code,
            detail: detail.into(),
        }
    }
    /// A warning.
    pub fn warn(owner: Owner, code: ProblemCode, detail: impl Into<String>) -> Self {
        Problem {
            owner,
            severity: Severity::Warn,
            code,
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
        /// The tool the first call must name; `None`: any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Arguments the first call must carry with these values; `None`: any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<Map<String, Value>>,
    },
    /// `content` is JSON valid against `schema` (structured output).
    Json {
        /// The JSON Schema `content` must satisfy.
        schema: Value,
    },
    /// A clean 4xx with an error message (an invalid request must not get a 5xx or a hang).
    ClientError,
    /// A tool call cut off by `max_tokens`: `finish_reason` must be `length`, not `tool_calls`.
    Truncated,
}

/// One tool call, from a message or assembled from stream deltas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The stream's `index`; `None` in a non-streamed answer without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// The call's `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The call's `type` (`function`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `function.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `function.arguments`, as sent (a JSON string, or the stream's pieces joined).
    #[serde(default)]
    pub arguments: String,
}

/// The assistant turn of a 2xx answer, the same for streamed and non-streamed answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// `finish_reason`; `None`: absent.
    pub finish_reason: Option<String>,
    /// `content`; `None`: null or absent.
    pub content: Option<String>,
    /// The reasoning text (`reasoning` or `reasoning_content`); `None`: none.
    pub reasoning: Option<String>,
    /// `reasoning` or the older `reasoning_content`, whichever carried it.
    pub reasoning_field: Option<String>,
    /// `None` when the field is absent or null; `Some(empty)` for `"tool_calls": []`.
    pub tool_calls: Option<Vec<ToolCall>>,
    /// `usage` as sent; `None`: absent.
    pub usage: Option<Value>,
}

impl Reply {
    /// The tool calls; empty when there are none.
    pub fn calls(&self) -> &[ToolCall] {
        self.tool_calls.as_deref().unwrap_or(&[])
    }
    /// `content` has non-blank text.
    pub fn has_text(&self) -> bool {
        self.content
            .as_deref()
            .is_some_and(|c| !c.trim().is_empty())
    }
    /// `usage.completion_tokens`.
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
        /// The HTTP status.
        status: u16,
        /// The assistant turn.
        reply: Reply,
        /// Problems found while reading the envelope or the stream.
        envelope: Vec<Problem>,
    },
    /// HTTP status outside 2xx.
    HttpError {
        /// The HTTP status.
        status: u16,
        /// The API error's message, when the body is JSON and carries one.
        message: Option<String>,
        /// The body's first 300 characters.
        body_excerpt: String,
        /// The body is JSON (an API error), not a proxy's HTML page.
        json_body: bool,
    },
    /// No complete answer within the deadline.
    Timeout {
        /// The deadline that passed, ms.
        after_ms: u64,
    },
    /// The connection failed (`connect`: nothing listening) or broke.
    Transport {
        /// Nothing accepted the connection (else it broke later).
        connect: bool,
        /// The error, in words.
        error: String,
    },
}

/// Judges one outcome against what the request expected.
pub fn judge(request: &Value, answer: &Answer, outcome: &Outcome) -> Vec<Problem> {
    match outcome {
        Outcome::Timeout { after_ms } => {
            if *answer == Answer::ClientError {
                // A tiny invalid request must be rejected at once; hanging is the server's doing.
                vec![Problem::fail(
                    Owner::Server,
                    ProblemCode::InvalidRequestHang,
                    format!("no answer to an invalid request within {after_ms} ms: the server should reject it with a 4xx"),
                )]
            } else {
                vec![Problem::fail(
                    Owner::Gateway,
                    ProblemCode::Timeout,
                    format!("no complete answer within {after_ms} ms"),
                )]
            }
        }
        Outcome::Transport { connect, error } => vec![if *connect {
            Problem::fail(
                Owner::Server,
                ProblemCode::Connect,
                format!("cannot connect: {error}"),
            )
        } else {
            Problem::fail(
                Owner::Gateway,
                ProblemCode::ConnectionBroken,
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
                    ProblemCode::InvalidRequestAccepted,
                    format!("an invalid request was answered with HTTP {status} instead of a 4xx"),
                ));
                return problems;
            }
            // A stream that ended in an error event or was cut off has no whole answer to judge.
            let broken = problems.iter().any(|p| {
                matches!(
                    p.code,
                    ProblemCode::ErrorInStream
                        | ProblemCode::StreamCut
                        | ProblemCode::StreamTruncated
                        | ProblemCode::BodyNotJson
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
            ProblemCode::ClientErrorWithoutMessage,
            format!("HTTP {status} without an error message"),
        )];
    }
    let problem = match status {
        401 | 403 => Problem::fail(
            Owner::Client,
            ProblemCode::Auth,
            format!("HTTP {status}: check the API key ({quoted})"),
        ),
        404 => Problem::fail(
            Owner::Client,
            ProblemCode::NotFound,
            format!("HTTP 404: check the URL and the model name ({quoted})"),
        ),
        408 | 429 => Problem::fail(
            Owner::Gateway,
            ProblemCode::Throttled,
            format!("HTTP {status}: {quoted}"),
        ),
        502..=504 if !json_body => Problem::fail(
            Owner::Gateway,
            ProblemCode::GatewayError,
            format!("HTTP {status} from a gateway (not a JSON API error): {quoted}"),
        ),
        _ if mentions_parser(text) => Problem::fail(
            Owner::Parser,
            ProblemCode::ParserError,
            format!("HTTP {status}: {quoted}"),
        ),
        s if s >= 500 && *answer == Answer::ClientError => Problem::fail(
            Owner::Server,
            ProblemCode::InvalidRequest5xx,
            format!("an invalid request got HTTP {s} instead of a 4xx: {quoted}"),
        ),
        s if s >= 500 => Problem::fail(
            Owner::Server,
            ProblemCode::ServerError,
            format!("HTTP {s}: {quoted}"),
        ),
        s => Problem::fail(
            Owner::Server,
            ProblemCode::ValidRequestRejected,
            format!("a valid request was rejected with HTTP {s}: {quoted}"),
        ),
    };
    vec![problem]
}

/// Compact shape of a reply for comparing a streamed answer with the non-streamed one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shape {
    /// `finish_reason`.
    pub finish_reason: Option<String>,
    /// `content` has non-blank text.
    pub has_text: bool,
    /// The called tools' names, in order.
    pub tools: Vec<String>,
}

/// The shape of `reply`.
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
