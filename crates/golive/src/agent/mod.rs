//! Agent interface conformance: tool calls, structured output, streaming, fallbacks.
//!
//! Each case is sent `--repeat` times (a correct tool call once proves no stable agent
//! function) and reported as a rate. Every exchange is judged by [`validate::judge`]
//! (envelope, tool-call ids/names/arguments against the tool's JSON Schema,
//! finish_reason, reasoning and usage fields) and each problem is attributed to the
//! server, its parser, the model, the gateway or the client. Failing requests are saved
//! as replayable files under `DIR/regressions/` ([`regress`]); `golive replay` sends
//! one again ([`replay`]).

pub mod cases;
pub mod http;
pub mod mix;
pub mod regress;
pub mod replay;
pub mod stream;
pub mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::client::OpenAiClient;
use crate::report::{Check, Impact, Owner, Stage, Status};
use crate::target::Target;
use cases::{Budget, Case};
use http::{send, LogWatch, Sent};
use validate::{judge, quote, shape, Answer, Outcome, Problem, Severity, Shape};

pub use replay::{replay, ReplayOptions, ReplayResult};

/// Options of the agent stage (flattened into `golive accept`).
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// Repetitions of each agent case (reported as a pass rate).
    pub repeat: u32,
    /// The user's own OpenAI `tools` array (JSON); replaces the example tools.
    pub tools: Option<PathBuf>,
    /// The user's own cases (TOML `[[case]]` tables or JSON lines: prompt, tool, args).
    pub cases: Option<PathBuf>,
    /// Keep prompts and answers out of the report and the regression files (hashes and lengths only).
    pub no_content: bool,
    /// Skip the agent stage.
    pub skip_agent: bool,
    /// max_tokens of the agent requests.
    pub agent_max_tokens: u32,
    /// max_tokens of the case that must be cut off inside a tool call.
    pub agent_cut_tokens: u32,
    /// Deadline of the first, deliberately long attempt of the timeout-and-retry case.
    pub agent_first_timeout: Duration,
    /// Do not run the streamed variants (when the production client does not stream).
    pub agent_no_stream: bool,
    /// The server's log file: parser exceptions printed during a request are attributed to it.
    pub agent_server_log: Option<PathBuf>,
    /// Run only the agent checks whose id starts with one of these (comma-separated),
    /// e.g. `agent_case_,agent_stream_case_` to rerun only your own cases.
    pub agent_only: Vec<String>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            repeat: 5,
            tools: None,
            cases: None,
            no_content: false,
            skip_agent: false,
            agent_max_tokens: 128,
            agent_cut_tokens: 8,
            agent_first_timeout: Duration::from_secs(1),
            agent_no_stream: false,
            agent_server_log: None,
            agent_only: Vec::new(),
        }
    }
}

/// Everything a case run needs.
struct Ctx<'a> {
    endpoint: String,
    base_url: String,
    client: &'a OpenAiClient,
    model: &'a str,
    opts: &'a AgentOptions,
    out: &'a Path,
    deadline: Duration,
    log: Option<LogWatch>,
}

/// Runs the agent stage against one server; failing requests are saved under `out/regressions/`.
pub async fn run_stage(
    target: &Target,
    client: &OpenAiClient,
    model: &str,
    opts: &AgentOptions,
    out: &Path,
) -> Vec<Check> {
    if opts.skip_agent {
        let mut c = Check::new(
            "agent_stage",
            Stage::Agent,
            Status::Skip,
            "agent interface conformance",
        );
        c.measurement = "skipped (--skip-agent)".into();
        return vec![c];
    }
    let budget = Budget {
        max_tokens: opts.agent_max_tokens.max(16),
        cut_tokens: opts.agent_cut_tokens.max(1),
    };
    let cases = match plan(opts, &budget) {
        Ok(c) => c,
        Err(e) => {
            let mut c = Check::new(
                "agent_inputs",
                Stage::Agent,
                Status::Fail,
                "read the agent's own tools and cases (--tools, --cases)",
            );
            c.measurement = format!("{e:#}");
            c.impact = Impact::Interface;
            c.owner = Some(Owner::Client);
            c.next_step =
                "Fix the file named above; the production schemas must be testable before release."
                    .into();
            return vec![c];
        }
    };
    let mut ctx = Ctx {
        endpoint: target.url("/v1/chat/completions"),
        base_url: target.base_url.clone(),
        client,
        model,
        opts,
        out,
        deadline: target.request_timeout,
        log: opts.agent_server_log.clone().map(LogWatch::new),
    };
    let selected = |id: &str| {
        opts.agent_only.is_empty() || opts.agent_only.iter().any(|p| id.starts_with(p.as_str()))
    };
    let mut checks = Vec::new();
    for case in &cases {
        let plain = selected(&case.id);
        let streamed = case.streamed && !opts.agent_no_stream && selected(&stream_id(&case.id));
        let mut reference = None;
        if plain || streamed {
            // The non-streamed run is also the reference shape of the streamed one.
            let (check, shape) = run_case(&mut ctx, case, false, None).await;
            reference = shape;
            if plain {
                checks.push(check);
            }
        }
        if streamed {
            let (check, _) = run_case(&mut ctx, case, true, reference).await;
            checks.push(check);
        }
    }
    if selected("agent_timeout_retry") {
        let user_tools = opts.tools.as_ref().and_then(|p| cases::load_tools(p).ok());
        checks.push(timeout_retry(&mut ctx, &budget, user_tools.as_ref()).await);
    }
    checks
}

/// The cases to run: the built-in set, with the user's tools and cases in place of the examples.
fn plan(opts: &AgentOptions, budget: &Budget) -> anyhow::Result<Vec<Case>> {
    let user_tools = opts.tools.as_deref().map(cases::load_tools).transpose()?;
    let mut list = cases::builtin_cases(budget, user_tools.as_ref());
    if let Some(path) = &opts.cases {
        let user = cases::load_user_cases(path)?;
        let tools = user_tools.unwrap_or_else(cases::builtin_tools);
        // The user's prompts replace the example tool-call prompts.
        list.retain(|c| {
            !matches!(
                c.id.as_str(),
                "agent_tool_required_arg" | "agent_tools_choice"
            )
        });
        list.extend(cases::user_cases(&user, &tools, budget)?);
    }
    Ok(list)
}

/// One exchange of a case, judged.
struct Run {
    sent: Sent,
    problems: Vec<Problem>,
    regression: Option<PathBuf>,
}

impl Run {
    fn failed(&self) -> bool {
        self.problems.iter().any(|p| p.severity == Severity::Fail)
    }
}

fn stream_id(id: &str) -> String {
    match id.strip_prefix("agent_") {
        Some(rest) => format!("agent_stream_{rest}"),
        None => format!("agent_stream_{id}"),
    }
}

fn request_body(case_request: &Value, model: &str, streamed: bool) -> Value {
    let mut body = case_request.clone();
    body["model"] = json!(model);
    if streamed {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// Sends one request, judges it, attaches parser lines from the server log, and saves a
/// regression file when it failed.
async fn exchange(
    ctx: &mut Ctx<'_>,
    check_id: &str,
    body: &Value,
    answer: &Answer,
    deadline: Duration,
    reference: Option<&Shape>,
) -> Run {
    let sent = send(ctx.client, &ctx.endpoint, body, deadline).await;
    let mut problems = judge(body, answer, &sent.outcome);
    if let Some(log) = ctx.log.as_mut() {
        let mut lines = log.parser_lines();
        // Servers log asynchronously (llama.cpp through a logger thread): the parser's
        // exception can land just after the error answer, so a server-side failure waits
        // up to a second for it.
        let server_side = problems.iter().any(|p| {
            p.severity == Severity::Fail && matches!(p.owner, Owner::Parser | Owner::Server)
        });
        if lines.is_empty() && server_side && *answer != Answer::ClientError {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                lines = log.parser_lines();
                if !lines.is_empty() {
                    break;
                }
            }
        }
        // A rejected invalid request is expected to log its error.
        if !lines.is_empty() && *answer != Answer::ClientError {
            let detail = format!(
                "the server log shows a parser error during this request: {}",
                quote(&lines.join(" | "), 400)
            );
            let failed = problems.iter().any(|p| p.severity == Severity::Fail);
            // With a failure the log names its owner; without one the error was swallowed
            // (e.g. a call the parser dropped and returned as text), which is worth a warning.
            problems.push(if failed {
                Problem::fail(Owner::Parser, "parser_exception_in_log", detail)
            } else {
                Problem::warn(Owner::Parser, "parser_exception_in_log", detail)
            });
        }
    }
    if let (
        Some(want),
        Outcome::Reply {
            reply, envelope, ..
        },
    ) = (reference, &sent.outcome)
    {
        let got = shape(reply);
        let whole = !envelope.iter().any(|p| p.severity == Severity::Fail);
        if whole && &got != want {
            problems.push(Problem::fail(
                Owner::Parser,
                "stream_shape_differs",
                format!(
                    "the streamed answer has another shape than the non-streamed one (temperature 0): streamed {}, non-streamed {}",
                    serde_json::to_string(&got).unwrap_or_default(),
                    serde_json::to_string(want).unwrap_or_default()
                ),
            ));
        }
    }
    let mut run = Run {
        sent,
        problems,
        regression: None,
    };
    if run.failed() {
        let withhold = ctx.opts.no_content;
        let reg = regress::Regression {
            golive_regression: regress::REGRESSION_VERSION,
            check: check_id.to_string(),
            saved_at: chrono::Utc::now(),
            url: ctx.base_url.clone(),
            expect: answer.clone(),
            content_withheld: withhold,
            request: if withhold {
                regress::redact_request(body)
            } else {
                body.clone()
            },
            observed: regress::observed(
                &run.sent.outcome,
                &run.problems,
                run.sent.duration_ms,
                withhold,
            ),
        };
        match regress::save(ctx.out, &reg) {
            Ok(path) => run.regression = Some(path),
            Err(e) => run.problems.push(Problem::warn(
                Owner::Client,
                "regression_not_saved",
                format!("{e:#}"),
            )),
        }
    }
    run
}

async fn run_case(
    ctx: &mut Ctx<'_>,
    case: &Case,
    streamed: bool,
    reference: Option<Shape>,
) -> (Check, Option<Shape>) {
    let id = if streamed {
        stream_id(&case.id)
    } else {
        case.id.clone()
    };
    let body = request_body(&case.request, ctx.model, streamed);
    let mut runs = Vec::new();
    let mut last_shape = None;
    let repeat = ctx.opts.repeat.max(1);
    for _ in 0..repeat {
        let deadline = ctx.deadline;
        let run = exchange(ctx, &id, &body, &case.answer, deadline, reference.as_ref()).await;
        if let Outcome::Reply {
            reply, envelope, ..
        } = &run.sent.outcome
        {
            if !envelope.iter().any(|p| p.severity == Severity::Fail) {
                last_shape = Some(shape(reply));
            }
        }
        runs.push(run);
    }
    let test_case = if streamed {
        format!("{} (streamed, deltas assembled by index)", case.test_case)
    } else {
        case.test_case.clone()
    };
    let check = summarize(ctx, &id, &test_case, &body, case.user_schema, &runs);
    (check, last_shape)
}

/// Priority of owners when several failed: the most specific infrastructure owner first.
const OWNER_ORDER: [Owner; 6] = [
    Owner::Parser,
    Owner::Server,
    Owner::Gateway,
    Owner::Client,
    Owner::Environment,
    Owner::Model,
];

fn owner_name(o: Owner) -> &'static str {
    match o {
        Owner::Environment => "environment",
        Owner::Server => "server",
        Owner::Parser => "parser",
        Owner::Model => "model",
        Owner::Gateway => "gateway",
        Owner::Client => "client",
    }
}

fn next_step(owner: Owner, replay: Option<&Path>, url: &str) -> String {
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
fn summarize(
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
    let mut by_code: BTreeMap<String, (usize, Problem)> = BTreeMap::new();
    for r in runs {
        for p in &r.problems {
            by_code
                .entry(p.code.clone())
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

/// Timeout followed by a retry with a stricter format: a long free answer with a short
/// deadline (the client gives up), then at once the same need as a named tool call with a
/// small budget, which must come back valid within the normal timeout.
async fn timeout_retry(ctx: &mut Ctx<'_>, budget: &Budget, user_tools: Option<&Value>) -> Check {
    let (tools, user_schema) = match user_tools {
        Some(t) => (t.clone(), true),
        None => (cases::builtin_tools(), false),
    };
    let name = cases::tool_names(&tools)
        .into_iter()
        .next()
        .unwrap_or_default();
    let sys = cases::long_system_prompt(&tools);
    let first = json!({"model": ctx.model, "temperature": 0, "max_tokens": 1024, "tools": tools,
        "messages": [{"role": "system", "content": sys},
                     {"role": "user", "content": "Before doing anything, explain in great detail, step by step and with many examples, how you decide which tool to use. Be thorough; at least 800 words."}]});
    let prompt = if user_tools.is_some() {
        format!("Call {name} with realistic arguments.")
    } else {
        "Look up the weather in Paris.".to_string()
    };
    let retry = json!({"model": ctx.model, "temperature": 0, "max_tokens": budget.max_tokens, "tools": tools,
        "tool_choice": {"type": "function", "function": {"name": name}},
        "messages": [{"role": "system", "content": sys}, {"role": "user", "content": prompt}]});
    let answer = Answer::Tool {
        name: Some(name.clone()),
        args: None,
    };
    let id = "agent_timeout_retry";
    let mut runs = Vec::new();
    let mut timed_out = 0;
    let mut first_outcomes: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..ctx.opts.repeat.max(1) {
        let deadline = ctx.opts.agent_first_timeout;
        let sent = send(ctx.client, &ctx.endpoint, &first, deadline).await;
        let kind = match &sent.outcome {
            Outcome::Timeout { .. } => {
                timed_out += 1;
                "timeout".to_string()
            }
            Outcome::Reply { reply, .. } => format!(
                "answered ({})",
                reply.finish_reason.as_deref().unwrap_or("null")
            ),
            Outcome::HttpError { status, .. } => format!("http_{status}"),
            Outcome::Transport { .. } => "transport".to_string(),
        };
        *first_outcomes.entry(kind).or_insert(0u32) += 1;
        let deadline = ctx.deadline;
        runs.push(exchange(ctx, id, &retry, &answer, deadline, None).await);
    }
    let mut check = summarize(
        ctx,
        id,
        &format!(
            "timeout ({} ms deadline on a long answer) followed by a retry with a stricter format (tool_choice named {name}, max_tokens {})",
            ctx.opts.agent_first_timeout.as_millis(),
            budget.max_tokens
        ),
        &retry,
        user_schema,
        &runs,
    );
    check.measurement = format!(
        "first attempt timed out {timed_out}/{} times; retry: {}",
        runs.len(),
        check.measurement
    );
    if let Some(d) = check.data.as_object_mut() {
        d.insert("first_attempt_timeouts".into(), json!(timed_out));
        d.insert("first_attempt_outcomes".into(), json!(first_outcomes));
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(problems: Vec<Problem>) -> Run {
        Run {
            sent: Sent {
                outcome: Outcome::Timeout { after_ms: 1 },
                duration_ms: 5,
                body: None,
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
        let model_fail = || vec![Problem::fail(Owner::Model, "no_tool_call", "x")];
        let server_fail = || vec![Problem::fail(Owner::Server, "server_error", "x")];
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
                "usage_missing",
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
