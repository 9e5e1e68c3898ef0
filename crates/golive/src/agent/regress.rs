//! Regression files: every failing agent request is saved under `DIR/regressions/` as a
//! self-contained JSON file (request, expectation, what was observed) that
//! `golive replay` can send again. With `--no-content` prompts and answers are replaced
//! by their SHA-256 and length.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::validate::{scrub_quotes, Answer, Outcome, Problem, Reply};

/// Layout version of a regression file.
pub const REGRESSION_VERSION: u32 = 1;

/// One saved failing request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regression {
    /// The file's layout version ([`REGRESSION_VERSION`]).
    pub golive_regression: u32,
    /// The check it failed in, e.g. `agent_tool_required_arg`.
    pub check: String,
    /// When it was saved.
    pub saved_at: DateTime<Utc>,
    /// The server it failed against (base URL).
    pub url: String,
    /// What the request must produce.
    pub expect: Answer,
    /// True when prompts and answers were replaced by hashes (`--no-content`): not replayable.
    pub content_withheld: bool,
    /// The request body as sent (`stream` included).
    pub request: Value,
    /// What came back when it failed.
    pub observed: Observed,
}

/// What came back when it failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// `reply`, `http_error`, `timeout` or `transport`.
    pub kind: String,
    /// The HTTP status, when an answer came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// The validator's findings.
    pub problems: Vec<Problem>,
    /// The assistant turn (or the error), possibly reduced to hashes.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub answer: Value,
    /// From sending to the end of the answer, ms.
    pub duration_ms: u64,
}

/// `{"sha256": ..., "chars": n}` in place of a text.
pub fn digest(text: &str) -> Value {
    json!({"sha256": hex::encode(Sha256::digest(text.as_bytes())), "chars": text.chars().count()})
}

/// The request with every message text and every argument string replaced by its digest;
/// tool schemas and parameters stay (they are the interface, not user data).
pub fn redact_request(request: &Value) -> Value {
    let mut out = request.clone();
    if let Some(messages) = out.get_mut("messages").and_then(Value::as_array_mut) {
        for m in messages {
            if let Some(c) = m.get_mut("content") {
                *c = redact_text_value(c);
            }
            for key in ["reasoning", "reasoning_content"] {
                if let Some(c) = m.get_mut(key) {
                    *c = redact_text_value(c);
                }
            }
            if let Some(calls) = m.get_mut("tool_calls").and_then(Value::as_array_mut) {
                for call in calls {
                    if let Some(a) = call.pointer_mut("/function/arguments") {
                        *a = redact_text_value(a);
                    }
                }
            }
        }
    }
    out
}

fn redact_text_value(v: &Value) -> Value {
    match v {
        Value::String(s) => digest(s),
        Value::Null => Value::Null,
        other => digest(&other.to_string()),
    }
}

/// The observed answer as JSON, reduced to digests when `withhold`.
pub fn answer_value(reply: &Reply, withhold: bool) -> Value {
    let mut v = serde_json::to_value(reply).unwrap_or(Value::Null);
    if withhold {
        for key in ["content", "reasoning"] {
            if let Some(s) = reply_text(reply, key) {
                v[key] = digest(s);
            }
        }
        if let Some(calls) = v.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for call in calls {
                if let Some(a) = call.get("arguments").and_then(Value::as_str).map(digest) {
                    call["arguments"] = a;
                }
            }
        }
    }
    v
}

fn reply_text<'a>(reply: &'a Reply, key: &str) -> Option<&'a str> {
    match key {
        "content" => reply.content.as_deref(),
        _ => reply.reasoning.as_deref(),
    }
}

/// Problems with quoted excerpts removed when `withhold`.
pub fn scrub_problems(problems: &[Problem], withhold: bool) -> Vec<Problem> {
    problems
        .iter()
        .map(|p| {
            let mut p = p.clone();
            if withhold {
                p.detail = scrub_quotes(&p.detail);
            }
            p
        })
        .collect()
}

/// Builds the observed part of a regression file.
pub fn observed(
    outcome: &Outcome,
    problems: &[Problem],
    duration_ms: u64,
    withhold: bool,
) -> Observed {
    let (kind, http_status, answer) = match outcome {
        Outcome::Reply { status, reply, .. } => {
            ("reply", Some(*status), answer_value(reply, withhold))
        }
        Outcome::HttpError {
            status,
            message,
            body_excerpt,
            ..
        } => {
            let text = message.clone().unwrap_or_else(|| body_excerpt.clone());
            (
                "http_error",
                Some(*status),
                if withhold {
                    json!({"error": digest(&text)})
                } else {
                    json!({"error": text})
                },
            )
        }
        Outcome::Timeout { .. } => ("timeout", None, Value::Null),
        Outcome::Transport { error, .. } => ("transport", None, json!({"error": error})),
    };
    Observed {
        kind: kind.to_string(),
        http_status,
        problems: scrub_problems(problems, withhold),
        answer,
        duration_ms,
    }
}

/// Writes `dir/regressions/<check>-<n>.json` (first free n); returns the path.
pub fn save(dir: &Path, reg: &Regression) -> anyhow::Result<PathBuf> {
    let folder = dir.join("regressions");
    crate::outfile::create_dirs(&folder)?;
    let mut n = 1;
    let path = loop {
        let p = folder.join(format!("{}-{n}.json", reg.check));
        if !p.exists() {
            break p;
        }
        n += 1;
    };
    let bytes = serde_json::to_vec_pretty(&as_saved(reg))?;
    crate::report::write_atomic(&path, &bytes)
}

/// The case as it may be written: the URL without userinfo, and no URL password,
/// Authorization header or token-shaped word in what came back (an error body may echo
/// them). The request stays as sent, so the case replays.
fn as_saved(reg: &Regression) -> Regression {
    let mut reg = reg.clone();
    reg.url = crate::redact::display_url(&reg.url);
    if let Ok(observed) = crate::redact::redact_serde(&reg.observed) {
        reg.observed = observed;
    }
    reg
}

/// Reads a regression file.
pub fn load(path: &Path) -> anyhow::Result<Regression> {
    let text =
        crate::input::read_text(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&text, path)
}

/// A regression file's text, read from `path`.
pub fn parse(text: &str, path: &Path) -> anyhow::Result<Regression> {
    let reg: Regression = serde_json::from_str(text)
        .with_context(|| format!("{} is not a golive regression file", path.display()))?;
    anyhow::ensure!(
        reg.golive_regression <= REGRESSION_VERSION,
        "{} was written by a newer golive (layout {})",
        path.display(),
        reg.golive_regression
    );
    anyhow::ensure!(
        reg.request.is_object(),
        "{}: `request` must be a JSON object (the saved request body), not {}",
        path.display(),
        match &reg.request {
            serde_json::Value::Null => "null",
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::String(_) => "a string",
            _ => "a scalar",
        }
    );
    Ok(reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_keeps_structure_and_drops_text() {
        let req = json!({"messages": [
            {"role": "user", "content": "my IBAN is DE00 1234"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "pay", "arguments": "{\"iban\": \"DE00 1234\"}"}}]}],
            "tools": [{"type": "function", "function": {"name": "pay"}}]});
        let red = redact_request(&req);
        let text = red.to_string();
        assert!(!text.contains("DE00"), "{text}");
        assert_eq!(red["messages"][0]["content"]["chars"], 20);
        assert_eq!(
            red["messages"][1]["tool_calls"][0]["function"]["name"],
            "pay"
        );
        assert_eq!(red["tools"], req["tools"]);
        let reply = Reply {
            content: Some("secret answer".into()),
            ..Default::default()
        };
        assert!(!answer_value(&reply, true).to_string().contains("secret"));
        assert!(answer_value(&reply, false).to_string().contains("secret"));
    }

    #[test]
    fn a_saved_case_holds_no_secret() {
        let reg = Regression {
            golive_regression: REGRESSION_VERSION,
            check: "agent_tool".into(),
            saved_at: Utc::now(),
            url: "http://tester:pw-REG-1@127.0.0.1:8000".into(),
            expect: Answer::Text,
            content_withheld: false,
            request: json!({"messages": [{"role": "user", "content": "hi"}]}),
            observed: Observed {
                kind: "http_error".into(),
                http_status: Some(401),
                problems: Vec::new(),
                answer: json!({"error": "bad header Authorization: Bearer sk-REG-2abcdef"}),
                duration_ms: 1,
            },
        };
        let dir = tempfile::tempdir().unwrap();
        let path = save(dir.path(), &reg).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("pw-REG-1") && !text.contains("sk-REG-2"),
            "{text}"
        );
        let back = load(&path).unwrap();
        assert_eq!(back.url, "http://127.0.0.1:8000");
        assert_eq!(back.request, reg.request, "the request replays as sent");
    }
}
