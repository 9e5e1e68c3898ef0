//! Tool-call trigger F1 and schema accuracy against a reference deployment, as the
//! vendor verifier measures them: the same tool cases go to both sides, a case is
//! "triggered" where a side ends with `finish_reason == "tool_calls"`, the reference is
//! the truth, and schema accuracy is the share of the tested side's triggered answers
//! whose every call's arguments pass the offered tool's schema.

use serde::Serialize;
use serde_json::{json, Value};

use super::cases::Case;
use super::judge::Verdict;
use super::run::{ContractCheck, ContractOptions};
use super::score::{Confusion, ToolCallScore, VerifierSummary};
use crate::agent::validate::{offered_tools, schema_errors};
use crate::report::{Owner, Status};

/// What one side answered to one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Ended with `finish_reason == "tool_calls"`.
    pub triggered: bool,
    /// `stop`, `tool_calls` or something else (`length`, none).
    pub finish: String,
    /// Every call's arguments parse as JSON and pass the offered tool's schema.
    pub schema_valid: bool,
}

/// An answer judged; `None` for a failed request (not counted in the matrix).
pub fn outcome(request: &Value, status: u16, answer: &Value) -> Option<Outcome> {
    if status != 200 {
        return None;
    }
    let choice = &answer["choices"][0];
    let finish = choice["finish_reason"].as_str().unwrap_or("").to_string();
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tools = offered_tools(request);
    let call_valid = |call: &Value| {
        let name = call["function"]["name"].as_str().unwrap_or("");
        let Some((_, schema)) = tools.iter().find(|(n, _)| n == name) else {
            return false;
        };
        let args = call["function"]["arguments"].as_str().unwrap_or("");
        serde_json::from_str::<Value>(args)
            .ok()
            .is_some_and(|a| schema_errors(schema, &a).is_ok_and(|e| e.is_empty()))
    };
    Some(Outcome {
        triggered: finish == "tool_calls",
        schema_valid: !calls.is_empty() && calls.iter().all(call_valid),
        finish,
    })
}

/// The comparison's result: the score, the verifier's summary and how many requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The tested side's tool-call trigger score against the reference.
    pub score: ToolCallScore,
    /// The same numbers under the vendor verifier's field names.
    pub verifier_summary: VerifierSummary,
    /// Cases sent (each to both sides).
    pub cases: u64,
}

/// Scores paired outcomes (tested, reference); a pair with a failed side is a failure
/// of the tested side when that side failed, and is left out of the matrix either way.
pub fn score(pairs: &[(Option<Outcome>, Option<Outcome>)]) -> Comparison {
    let mut confusion = Confusion::default();
    let (mut triggered, mut valid, mut failures) = (0, 0, 0);
    let mut finish = [0u64; 3];
    for (tested, reference) in pairs {
        let Some(t) = tested else {
            failures += 1;
            continue;
        };
        let Some(r) = reference else {
            continue;
        };
        confusion.add(t.triggered, r.triggered);
        finish[match t.finish.as_str() {
            "stop" => 0,
            "tool_calls" => 1,
            _ => 2,
        }] += 1;
        if t.triggered {
            triggered += 1;
            valid += u64::from(t.schema_valid);
        }
    }
    let score = ToolCallScore::new(confusion, triggered, valid);
    Comparison {
        verifier_summary: score.verifier_summary(finish, failures),
        score,
        cases: pairs.len() as u64,
    }
}

/// golive's own tool cases: the built-in tools, half the prompts needing one, half not.
pub fn builtin_cases() -> Vec<Case> {
    let tools = crate::agent::cases::builtin_tools();
    [
        "What is the weather in Paris right now?",
        "Thanks, that is all for today.",
        "Where is my order A-1234?",
        "Write a two-line poem about the sea.",
        "E-mail anna@example.com that the meeting moves to 3 pm.",
        "What is 12 times 12?",
        "Search the manual for how to reset the router, at most 3 results.",
        "Say hello in French.",
    ]
    .iter()
    .enumerate()
    .map(|(i, prompt)| {
        // A bound on the answer: a call fits in it, and a CPU test server ends in seconds.
        let body = json!({"messages": [{"role": "user", "content": prompt}], "tools": tools,
            "max_tokens": 128});
        Case {
            line: i + 1,
            body: body.as_object().cloned().unwrap_or_default(),
        }
    })
    .collect()
}

/// The request one side gets: the case with the side's model, not streamed, and the
/// profile's required sampling values where the case sets none.
pub fn request(case: &Case, model: &str, opts: &ContractOptions) -> Value {
    let mut body = Value::Object(case.body.clone());
    body["model"] = json!(model);
    body["stream"] = json!(false);
    for p in opts
        .spec
        .params
        .iter()
        .filter(|p| p.thinking.is_empty() || p.thinking == "off")
    {
        if let (Some(v), None) = (&p.required, body.get(&p.name)) {
            body[&p.name] = v.clone();
        }
    }
    body
}

/// The gates: F1 (non-thinking) and schema accuracy against the profile's minimums.
pub fn judge(c: &Comparison, opts: &ContractOptions, reference: &str) -> Vec<ContractCheck> {
    let s = &c.score;
    let n = s.confusion.total();
    let interval = |i: Option<super::Interval>| {
        i.map(|i| format!(" (95% {:.2}-{:.2})", i.low, i.high))
            .unwrap_or_default()
    };
    let f1 = gate(
        s.f1,
        opts.spec.f1_min(false),
        format!(
            "trigger F1 {:.3}{} over {n} cases against {reference}: TP {} FP {} FN {} TN {}",
            s.f1,
            interval(s.f1_interval),
            s.confusion.tp,
            s.confusion.fp,
            s.confusion.fn_,
            s.confusion.tn
        ),
    );
    let schema = gate(
        s.schema_accuracy,
        opts.spec.schema_accuracy_min,
        format!(
            "schema accuracy {:.3}{}: {} of {} triggered answers with valid arguments",
            s.schema_accuracy,
            interval(s.schema_interval),
            s.schema_valid,
            s.triggered
        ),
    );
    // A reference that never called a tool makes F1 1.0 on any silent server: say so.
    let f1 = if s.confusion.tp + s.confusion.fn_ == 0 {
        Verdict {
            status: Status::Warn,
            evidence: format!(
                "{}; the reference called no tool in {n} cases, so the sample says nothing \
                 about triggers: use cases that need a tool (--cases)",
                f1.evidence
            ),
            owner: None,
        }
    } else {
        f1
    };
    [("tool_trigger_f1", f1), ("tool_schema_accuracy", schema)]
        .into_iter()
        .map(|(item, verdict)| ContractCheck {
            item: item.into(),
            path: opts.urls.first().cloned().unwrap_or_default(),
            verdict,
        })
        .collect()
}

fn gate(value: f64, min: Option<f64>, evidence: String) -> Verdict {
    match min {
        Some(min) if value < min => Verdict {
            status: Status::Fail,
            evidence: format!("{evidence}; below the gate {min}"),
            owner: Some(Owner::Parser),
        },
        Some(min) => Verdict {
            status: Status::Pass,
            evidence: format!("{evidence}; gate {min}"),
            owner: None,
        },
        None => Verdict {
            status: Status::Pass,
            evidence: format!("{evidence}; the profile sets no gate"),
            owner: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(finish: &str, args: Option<&str>) -> Value {
        let calls = args.map(
            |a| json!([{"type": "function", "function": {"name": "get_weather", "arguments": a}}]),
        );
        json!({"choices": [{"finish_reason": finish,
            "message": {"content": null, "tool_calls": calls}}]})
    }

    #[test]
    fn an_outcome_is_triggered_by_finish_reason_and_valid_by_the_schema() {
        let req = Value::Object(builtin_cases()[0].body.clone());
        let ok = outcome(
            &req,
            200,
            &answer("tool_calls", Some(r#"{"city":"Paris"}"#)),
        )
        .unwrap();
        assert!(ok.triggered && ok.schema_valid);
        let bad = outcome(
            &req,
            200,
            &answer("tool_calls", Some(r#"{"town":"Paris"}"#)),
        )
        .unwrap();
        assert!(bad.triggered && !bad.schema_valid);
        let broken = outcome(&req, 200, &answer("tool_calls", Some("{city:"))).unwrap();
        assert!(!broken.schema_valid);
        // A call that ends with "stop" is not triggered (the verifier's definition).
        let stop = outcome(&req, 200, &answer("stop", Some(r#"{"city":"Paris"}"#))).unwrap();
        assert!(!stop.triggered);
        assert_eq!(outcome(&req, 500, &Value::Null), None);
    }

    #[test]
    fn a_reference_that_never_calls_a_tool_is_a_warning_not_a_perfect_f1() {
        let quiet = Some(Outcome {
            triggered: false,
            finish: "stop".into(),
            schema_valid: false,
        });
        let c = score(&[(quiet.clone(), quiet.clone()), (quiet.clone(), quiet)]);
        assert_eq!(c.score.f1, 1.0);
        let opts = ContractOptions {
            urls: vec!["http://t".into()],
            model: "m".into(),
            dp_size: 1,
            spec: Default::default(),
            timeout: std::time::Duration::from_secs(1),
            reference: None,
            http: None,
        };
        let checks = judge(&c, &opts, "http://r");
        assert_eq!(checks[0].verdict.status, Status::Warn);
        assert!(checks[0]
            .verdict
            .evidence
            .contains("called no tool in 2 cases"));
    }

    #[test]
    fn failed_requests_are_counted_as_failures_not_cases() {
        let t = |triggered| {
            Some(Outcome {
                triggered,
                finish: if triggered { "tool_calls" } else { "stop" }.into(),
                schema_valid: true,
            })
        };
        let c = score(&[
            (t(true), t(true)),
            (None, t(true)),
            (t(false), None),
            (t(true), t(false)),
        ]);
        assert_eq!(c.score.confusion.total(), 2);
        assert_eq!(c.verifier_summary.failure_count, 1);
        assert_eq!((c.score.confusion.tp, c.score.confusion.fp), (1, 1));
        assert_eq!(c.cases, 4);
    }
}
