//! Folding the runs of one agent case into its check: rate, problems by code, owner and next step.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use super::validate::{Outcome, Problem, Severity};
use super::{regress, validate};
use super::{Ctx, Run};
use crate::report::{Check, Impact, Owner, Stage, Status};

/// Priority of owners when several failed: the most specific infrastructure owner first.
const OWNER_ORDER: [Owner; 6] = [
    Owner::Parser,
    Owner::Server,
    Owner::Gateway,
    Owner::Client,
    Owner::Environment,
    Owner::Model,
];

pub(super) fn owner_name(o: Owner) -> &'static str {
    match o {
        Owner::Environment => "environment",
        Owner::Server => "server",
        Owner::Parser => "parser",
        Owner::Model => "model",
        Owner::Gateway => "gateway",
        Owner::Client => "client",
    }
}

pub(super) fn next_step(owner: Owner, replay: Option<&Path>, url: &str) -> String {
    let what = match owner {
        Owner::Server => "Server: the service broke the OpenAI contract (5xx, malformed answer, unenforced tool_choice or response_format, inconsistent finish_reason). Check the vLLM version and flags (--enable-auto-tool-choice, --tool-call-parser, structured-output backend) before touching the model or the prompts.",
        Owner::Parser => "Parser: the model's tool-call format does not match the server's parser. Check --tool-call-parser and the chat template against the model's recipe (K3 needs its own parser); retest one feature at a time.",
        Owner::Model => "Model: the envelope is fine but the content is wrong or invalid. Tighten the prompt or schema, force the format with tool_choice or response_format, and keep a server-side schema check with a stricter retry as the fallback.",
        Owner::Gateway => "Gateway: timeouts or cut streams between client and server. Check proxy timeouts, buffering of text/event-stream and connection limits; compare with a request straight to the server.",
        Owner::Client => "Client: check the URL, model name, API key and the --tools/--cases files.",
        Owner::Environment => "Environment: fix the host before retesting the interface.",
    };
    match replay {
        Some(p) => format!("{what} Replay: golive replay {} --url {url}", p.display()),
        None => what.to_string(),
    }
}

/// Folds the runs of one case into its check: a rate, the problems by code, the owner.
pub(super) fn summarize(
    ctx: &Ctx<'_>,
    id: &str,
    test_case: &str,
    body: &Value,
    user_schema: bool,
    runs: &[Run],
) -> Check {
    let withhold = ctx.opts.no_content;
    let total = runs.len();
    let passed = runs.iter().filter(|r| !r.failed()).count();
    // Problems by code: count, owner, severity, first detail.
    // Keyed by the code's name: the order of the evidence is the names' order.
    let mut by_code: BTreeMap<&str, (usize, Problem)> = BTreeMap::new();
    for r in runs {
        for p in &r.problems {
            by_code
                .entry(p.code.as_str())
                .and_modify(|e| e.0 += 1)
                .or_insert((1, p.clone()));
        }
    }
    let fails: Vec<&Problem> = by_code
        .values()
        .map(|(_, p)| p)
        .filter(|p| p.severity == Severity::Fail)
        .collect();
    let owner = OWNER_ORDER
        .iter()
        .copied()
        .find(|o| fails.iter().any(|p| p.owner == *o));
    let any_warn = by_code.values().any(|(_, p)| p.severity == Severity::Warn);
    let status = match owner {
        None if any_warn => Status::Warn,
        None => Status::Pass,
        // On the user's own schemas every failure blocks; on the examples a model that
        // cannot do it is a note about the model, not about the service.
        Some(_) if user_schema => Status::Fail,
        Some(Owner::Model) => Status::Warn,
        Some(_) => Status::Fail,
    };
    let mut check = Check::new(id, Stage::Agent, status, test_case);
    check.impact = if user_schema && status == Status::Fail {
        Impact::Interface
    } else {
        Impact::Info
    };
    check.owner = owner;
    let mut durations: Vec<u64> = runs.iter().map(|r| r.sent.duration_ms).collect();
    check.duration_ms = durations.iter().sum();
    durations.sort_unstable();
    let median = durations.get(durations.len() / 2).copied().unwrap_or(0);
    let summary: Vec<String> = by_code
        .iter()
        .map(|(code, (n, p))| format!("{} {code} ×{n}", owner_name(p.owner)))
        .collect();
    check.measurement = format!(
        "{passed}/{total} passed ({:.0}%), median {median} ms{}",
        100.0 * passed as f64 / total.max(1) as f64,
        if summary.is_empty() {
            String::new()
        } else {
            format!("; {}", summary.join(", "))
        }
    );
    let regressions: Vec<String> = runs
        .iter()
        .filter_map(|r| r.regression.as_ref())
        .map(|p| p.display().to_string())
        .collect();
    let mut finish_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut reasoning_fields: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs {
        let key = match &r.sent.outcome {
            Outcome::Reply { reply, .. } => {
                if let Some(f) = &reply.reasoning_field {
                    *reasoning_fields.entry(f.clone()).or_default() += 1;
                }
                reply.finish_reason.clone().unwrap_or_else(|| "null".into())
            }
            Outcome::HttpError { status, .. } => format!("http_{status}"),
            Outcome::Timeout { .. } => "timeout".into(),
            Outcome::Transport { .. } => "transport".into(),
        };
        *finish_reasons.entry(key).or_default() += 1;
    }
    let problems_json: Vec<Value> = by_code
        .iter()
        .map(|(code, (n, p))| {
            let detail = if withhold {
                validate::scrub_quotes(&p.detail)
            } else {
                p.detail.clone()
            };
            json!({"code": code, "count": n, "owner": p.owner, "severity": p.severity, "detail": detail})
        })
        .collect();
    check.data = json!({
        "repeat": total,
        "passed": passed,
        "pass_rate": passed as f64 / total.max(1) as f64,
        "durations_ms": runs.iter().map(|r| r.sent.duration_ms).collect::<Vec<_>>(),
        "outcomes": finish_reasons,
        "reasoning_fields": reasoning_fields,
        "problems": problems_json,
        "regressions": regressions,
        "user_schema": user_schema,
        "connection_retries": runs.iter().filter(|r| r.sent.retried_connection).count(),
    });
    // Evidence: the first failing (else the last) exchange.
    let shown = runs.iter().find(|r| r.failed()).or_else(|| runs.last());
    if let Some(r) = shown {
        let mut parts = Vec::new();
        for p in r
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Fail)
            .take(3)
        {
            let d = if withhold {
                validate::scrub_quotes(&p.detail)
            } else {
                p.detail.clone()
            };
            parts.push(format!("[{}] {d}", owner_name(p.owner)));
        }
        let observed = regress::observed(&r.sent.outcome, &[], r.sent.duration_ms, withhold);
        let answer = serde_json::to_string(&observed.answer).unwrap_or_default();
        parts.push(format!(
            "answer: {}",
            answer.chars().take(600).collect::<String>()
        ));
        check.evidence = parts.join("\n");
    }
    check.request = Some(if withhold {
        regress::redact_request(body)
    } else {
        body.clone()
    });
    check.url = Some(ctx.base_url.clone());
    if let Some(o) = owner {
        let first_reg = runs.iter().find_map(|r| r.regression.as_deref());
        check.next_step = next_step(o, first_reg, &ctx.base_url);
    }
    check
}

#[cfg(test)]
mod tests {
    use super::super::http::Sent;
    use super::super::AgentOptions;
    use super::*;
    use crate::agent::validate::ProblemCode;
    use crate::client::OpenAiClient;
    use crate::target::Target;
    use std::time::Duration;

    fn run_with(problems: Vec<Problem>) -> Run {
        Run {
            sent: Sent {
                outcome: Outcome::Timeout { after_ms: 1 },
                duration_ms: 5,
                retried_connection: false,
            },
            problems,
            regression: None,
        }
    }

    #[test]
    fn status_impact_and_owner_follow_whose_schema_failed() {
        let options = crate::target::TargetOptions {
            api_key: None,
            model: None,
            request_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            pool_idle_timeout: Duration::from_secs(1),
        };
        let target = Target::new("http://127.0.0.1:1", &options).unwrap();
        let client = OpenAiClient::new(&target).unwrap();
        let opts = AgentOptions::default();
        let ctx = Ctx {
            endpoint: String::new(),
            base_url: "http://127.0.0.1:1".into(),
            client: &client,
            model: "m",
            opts: &opts,
            out: Path::new("."),
            deadline: Duration::from_secs(1),
            log: None,
        };
        let body = json!({});
        let model_fail = || vec![Problem::fail(Owner::Model, ProblemCode::NoToolCall, "x")];
        let server_fail = || vec![Problem::fail(Owner::Server, ProblemCode::ServerError, "x")];
        let check =
            |user: bool, runs: Vec<Run>| summarize(&ctx, "agent_x", "t", &body, user, &runs);

        let c = check(false, vec![run_with(vec![]), run_with(model_fail())]);
        assert_eq!(
            (c.status, c.impact, c.owner),
            (Status::Warn, Impact::Info, Some(Owner::Model))
        );
        assert_eq!(c.data["passed"], 1);
        assert!(
            c.measurement.starts_with("1/2 passed (50%)"),
            "{}",
            c.measurement
        );

        let c = check(false, vec![run_with(model_fail()), run_with(server_fail())]);
        assert_eq!(
            (c.status, c.impact, c.owner),
            (Status::Fail, Impact::Info, Some(Owner::Server))
        );

        let c = check(true, vec![run_with(model_fail())]);
        assert_eq!((c.status, c.impact), (Status::Fail, Impact::Interface));

        let c = check(
            true,
            vec![run_with(vec![Problem::warn(
                Owner::Server,
                ProblemCode::UsageMissing,
                "x",
            )])],
        );
        assert_eq!(
            (c.status, c.impact, c.owner),
            (Status::Warn, Impact::Info, None)
        );

        let c = check(true, vec![run_with(vec![])]);
        assert_eq!((c.status, c.owner), (Status::Pass, None));
        assert!(c.next_step.is_empty());
    }
}
