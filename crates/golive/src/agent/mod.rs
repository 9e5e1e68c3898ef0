//! Agent interface conformance: tool calls, structured output, streaming, fallbacks.
//!
//! Each case is sent `--repeat` times (a correct tool call once proves no stable agent
//! function) and reported as a rate. Every exchange is judged by [`judge`]
//! (envelope, tool-call ids/names/arguments against the tool's JSON Schema,
//! finish_reason, reasoning and usage fields) and each problem is attributed to the
//! server, its parser, the model, the gateway or the client. Failing requests are saved
//! as replayable files under `DIR/regressions/`; `golive replay` sends one again
//! ([`replay()`]).

pub(crate) mod cases;
mod http;
pub(crate) mod mix;
pub(crate) mod regress;
mod replay;
pub(crate) mod stream;
mod summary;
pub(crate) mod validate;

use summary::{owner_name, summarize};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::client::OpenAiClient;
use crate::report::{Check, Impact, Owner, Stage, Status};
use crate::target::Target;
use cases::{Budget, Case};
use http::{send, LogWatch, Sent};
use validate::quote;

pub use http::http_error;
pub use mix::AgentMix;
pub use replay::{replay, ReplayOptions, ReplayResult};
pub use stream::assemble_bytes;
pub use validate::{
    judge, parse_completion, shape, Answer, Outcome, Problem, ProblemCode, Reply, Severity, Shape,
    ToolCall,
};

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
    let budget = Budget::of(opts);
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

/// Reads and checks `--tools` and `--cases` as the stage will. The caller checks its options
/// with it as it parses them (the CLI does, before `accept` sends its first request), so a
/// typo is an input error at the start; left unchecked, the stage reports the file as a
/// failed check (`agent_inputs`) at the end.
pub fn validate(opts: &AgentOptions) -> crate::Result<()> {
    if opts.tools.is_none() && opts.cases.is_none() {
        return Ok(());
    }
    let budget = Budget::of(opts);
    plan(opts, &budget)
        .map(drop)
        .map_err(|e| crate::Error::new(crate::ErrorKind::Input, e))
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
                Problem::fail(Owner::Parser, ProblemCode::ParserExceptionInLog, detail)
            } else {
                Problem::warn(Owner::Parser, ProblemCode::ParserExceptionInLog, detail)
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
                ProblemCode::StreamShapeDiffers,
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
                ProblemCode::RegressionNotSaved,
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
