//! The agent's stream assembler and the validator's whole-answer reader on answers whose
//! fields have unexpected types, nulls, other JSON values than objects and broken tool-call
//! parts: what they read and which problems they report, in which words and order. The
//! expected lines were taken from the readers over `serde_json::Value` before both moved to
//! the one wire model (`golive::wire`), so they pin that the move changed nothing.

use golive::agent::assemble_bytes;
use golive::agent::{parse_completion, Problem, Reply};
use serde_json::Value;

fn render(reply: &Reply, problems: &[Problem]) -> String {
    let mut out = serde_json::to_string(reply).unwrap();
    for p in problems {
        out.push_str("\n  ");
        out.push_str(&serde_json::to_string(p).unwrap());
    }
    out
}

/// Each case one stream of these events, ended with `[DONE]`.
const STREAMS: &[&[&str]] = &[
    &[r#"{"error":null,"choices":[{"delta":{"content":"x"}}]}"#],
    &[r#"{"error":{"message":"tool_call_parser failed"}}"#],
    &[r#"{"error":{"code":5}}"#],
    &[
        r#"{"choices":[{"delta":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":5}]}"#,
        r#"{"choices":[{"finish_reason":9}]}"#,
        r#"{"choices":[{"finish_reason":null}]}"#,
    ],
    &[
        r#"{"choices":[{"delta":{"content":5,"reasoning":7,"reasoning_content":"r"},"finish_reason":9}]}"#,
        r#"{"choices":[{"delta":{"content":"a\"b","reasoning":"x"},"finish_reason":"length"}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":5}"#,
    ],
    &[r#"{"choices":[{"delta":{"tool_calls":{"index":0}}}]}"#],
    &[r#"{"choices":[{"delta":{"tool_calls":null,"content":null}}]}"#],
    &[
        r#"{"choices":[{"delta":{"tool_calls":[5,{"index":-1},{"index":1.0},{"index":0,"id":7,"type":3,"function":{"name":"","arguments":{}}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":"f"},{"index":2,"id":"b","function":{"name":"g","arguments":"{\"k\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"h","arguments":null}},{"index":2,"function":{"arguments":"1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]},"finish_reason":"tool_calls"}],"usage":null}"#,
    ],
    &[r#"[1,2]"#, r#"5"#, r#""s""#, r#"null"#],
    &[
        r#"{"choices":{}}"#,
        r#"{"choices":[7]}"#,
        r#"{"choices":[]}"#,
        r#"{"choices":null}"#,
    ],
    &[r#"{"a":1,"a":2,"choices":[{"delta":{"content":"d","content":"e"}}]}"#],
    &[
        r#"{"choices":[{"delta":{"content":"\ud83d\ude00 \u00e9"}}]}"#,
        r#"{"choices":[{"delta":{"content":"x"}}],"extra":"\ud800"}"#,
        r#"{"choices":[{"delta":{"content":"y"}}]} trailing"#,
    ],
];

/// Each case one non-streamed body.
const BODIES: &[&str] = &[
    r#"{"object":"chat.completion.chunk","choices":[{"message":{"content":5}}]}"#,
    r#"{"object":5,"choices":[{"finish_reason":7,"message":{"content":null,"reasoning":"a","reasoning_content":"b","tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"f","arguments":{"x":1}}},5,{"function":{"arguments":null}},{"index":-2,"id":3,"function":{"name":4,"arguments":[1]}},{"function":"g"}]}}]}"#,
    r#"{"object":"chat.completion","choices":[{"message":{"content":"a\"b\n","reasoning_content":"r","reasoning":"r","tool_calls":[]},"finish_reason":"stop"}],"usage":{"completion_tokens":3}}"#,
    r#"[]"#,
    r#"null"#,
    r#"{"object":"a\"b","choices":[]}"#,
    r#"{"choices":[5]}"#,
    r#"{"choices":[{"message":5}]}"#,
    r#"{"choices":[{"message":null,"finish_reason":"stop"}]}"#,
    r#"{"choices":[{"message":{"tool_calls":"x","content":[1]}}],"usage":null}"#,
    r#"{"choices":{"0":{}},"usage":[1]}"#,
];

fn sse(events: &[&str]) -> Vec<u8> {
    let mut out = String::new();
    for e in events {
        out.push_str("data: ");
        out.push_str(e);
        out.push_str("\n\n");
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn actual() -> String {
    let mut out = String::new();
    for events in STREAMS {
        let (reply, problems) = assemble_bytes(&sse(events));
        out.push_str(&render(&reply, &problems));
        out.push('\n');
    }
    for body in BODIES {
        let json: Value = serde_json::from_str(body).unwrap();
        let (reply, problems) = parse_completion(&json);
        out.push_str(&render(&reply, &problems));
        out.push('\n');
    }
    out
}

#[test]
fn lax_fields_read_and_report_as_before() {
    let got = actual();
    let want = include_str!("wire_readers.expected");
    if got != want {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target-wire_readers.actual");
        std::fs::write(path, &got).unwrap();
        panic!("the readers' findings changed; actual in {path}:\n{got}");
    }
}
