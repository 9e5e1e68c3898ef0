//! The contract's quick items against a live server: the immutable parameters and
//! every path (each `--url`, each data-parallel rank by the `X-data-parallel-rank`
//! header). Typed options in, checks out; nothing printed.

use std::time::Duration;

use anyhow::Context;

use serde::Serialize;
use serde_json::{json, Value};

use super::judge::{self, Verdict};
use super::spec::ContractReq;
use crate::report::{Owner, Status};

/// What `golive contract` runs against.
#[derive(Debug, Clone)]
pub struct ContractOptions {
    /// Base URLs (replicas), without `/v1`.
    pub urls: Vec<String>,
    /// The served model name (`--model`).
    pub model: String,
    /// Data-parallel size; each rank is addressed by header (1: no header).
    pub dp_size: usize,
    /// The model's contract (the profile's `[contract]`).
    pub spec: ContractReq,
    /// Deadline of one request (`--timeout-s`).
    pub timeout: Duration,
    /// A deployment to compare tool-call triggers with (`--reference-url`).
    pub reference: Option<Reference>,
    /// A client with the deployment's credentials (accept's); none: a plain one.
    pub http: Option<reqwest::Client>,
}

/// The trigger comparison's other side and sample.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Base URL, without `/v1`.
    pub url: String,
    /// Its model name (default: the tested model's).
    pub model: Option<String>,
    /// Bearer key of the reference (a vendor API needs one).
    pub api_key: Option<String>,
    /// The cases, sent in turn until `requests` are sent.
    pub cases: Vec<super::cases::Case>,
    /// Cases sent to each side for the F1 sample (`--contract-requests`).
    pub requests: usize,
}

/// What a contract run found.
#[derive(Debug, Clone, Serialize)]
pub struct ContractRun {
    /// Every check, per item and path.
    pub checks: Vec<ContractCheck>,
    /// Requests sent (both sides of the comparison included).
    pub requests: u64,
    /// The trigger comparison, with `--reference-url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<super::trigger::Comparison>,
}

/// One contract check: item, path, verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContractCheck {
    /// `params`, `path`, ...
    pub item: String,
    /// The replica URL and rank, e.g. `http://h:8000 rank 1`.
    pub path: String,
    /// The item's verdict on that path.
    pub verdict: Verdict,
}

/// Runs the contract: the quick items on every replica and path, then the trigger
/// comparison with the reference, if one is given.
pub async fn run(opts: &ContractOptions) -> crate::Result<ContractRun> {
    let (mut checks, mut requests) = quick_items(opts).await?;
    let mut comparison = None;
    if let Some(reference) = &opts.reference {
        let (c, n) = compare(opts, reference).await?;
        checks.extend(super::trigger::judge(&c, opts, &reference.url));
        requests += n;
        comparison = Some(c);
    }
    Ok(ContractRun {
        checks,
        requests,
        comparison,
    })
}

/// The same cases to the first replica and the reference.
async fn compare(
    opts: &ContractOptions,
    reference: &Reference,
) -> anyhow::Result<(super::trigger::Comparison, u64)> {
    use super::trigger;
    anyhow::ensure!(!reference.cases.is_empty(), "no tool cases to compare");
    let url = opts.urls.first().context("no --url")?;
    let tested = client(opts)?;
    let bearer = reference
        .api_key
        .as_ref()
        .map(|key| format!("Bearer {key}"));
    let other = reqwest::Client::builder()
        .timeout(opts.timeout)
        .default_headers(
            crate::target::auth_headers(bearer.as_deref())
                .context("the reference key is not a valid header value")?,
        )
        .build()?;
    let ref_model = reference.model.as_deref().unwrap_or(&opts.model);
    let mut pairs = Vec::new();
    for case in reference
        .cases
        .iter()
        .cycle()
        .take(reference.requests.max(1))
    {
        let mine = trigger::request(case, &opts.model, opts);
        let theirs = trigger::request(case, ref_model, opts);
        let (s1, a1) = post(&tested, url, None, &mine).await;
        let (s2, a2) = post(&other, &reference.url, None, &theirs).await;
        pairs.push((
            trigger::outcome(&mine, s1, &a1),
            trigger::outcome(&theirs, s2, &a2),
        ));
    }
    let n = 2 * pairs.len() as u64;
    Ok((trigger::score(&pairs), n))
}

/// The params item on every replica, prompt tokens and reasoning on every replica,
/// and the short greedy request on every path.
async fn quick_items(opts: &ContractOptions) -> anyhow::Result<(Vec<ContractCheck>, u64)> {
    let http = client(opts)?;
    let mut checks = Vec::new();
    let mut requests = 0;
    for url in &opts.urls {
        for p in &opts.spec.params {
            for wrong in &p.wrong {
                let mut body = json!({"model": opts.model, "max_tokens": 1, p.name.clone(): wrong,
                    "messages": [{"role": "user", "content": "Say OK."}]});
                merge(&mut body, thinking_switch(&opts.spec, &p.thinking));
                let (status, _) = post(&http, url, None, &body).await;
                requests += 1;
                checks.push(ContractCheck {
                    item: "params".into(),
                    path: url.clone(),
                    verdict: judge::wrong_param(&p.name, wrong, status),
                });
            }
        }
    }
    for url in &opts.urls {
        let (c, n) = prompt_token_items(&http, opts, url).await;
        checks.extend(c);
        requests += n;
        if opts.spec.reasoning {
            let (c, n) = reasoning_items(&http, opts, url).await;
            checks.extend(c);
            requests += n;
        }
    }
    let (path_checks, n) = every_path(&http, opts).await;
    checks.extend(path_checks);
    Ok((checks, requests + n))
}

/// The deployment's client: accept's, with its credentials, else a plain one.
fn client(opts: &ContractOptions) -> anyhow::Result<reqwest::Client> {
    match &opts.http {
        Some(h) => Ok(h.clone()),
        None => Ok(reqwest::Client::builder().timeout(opts.timeout).build()?),
    }
}

/// The chat both prompt-token requests send.
fn token_messages() -> Value {
    json!([{"role": "system", "content": "You are a terse assistant."},
           {"role": "user", "content": "Name three primary colours, comma separated."}])
}

/// prompt_tokens: `usage.prompt_tokens`, non-streamed and streamed (the final usage
/// chunk), within the profile's tolerance of `/tokenize`'s count of the rendered chat.
async fn prompt_token_items(
    http: &reqwest::Client,
    opts: &ContractOptions,
    url: &str,
) -> (Vec<ContractCheck>, u64) {
    let Some(tolerance) = opts.spec.prompt_token_tolerance else {
        return (Vec::new(), 0);
    };
    let item = |verdict| ContractCheck {
        item: "prompt_tokens".into(),
        path: url.to_string(),
        verdict,
    };
    let tokenize = json!({"model": opts.model, "messages": token_messages(),
        "add_generation_prompt": true});
    let (status, counted) = post_to(
        http,
        &format!("{}/tokenize", url.trim_end_matches('/')),
        &tokenize,
    )
    .await;
    let Some(expected) = counted["count"].as_u64() else {
        let verdict = Verdict {
            status: Status::Skip,
            evidence: format!("POST /tokenize with messages answered {status} without a count: nothing to compare with"),
            owner: None,
        };
        return (vec![item(verdict)], 1);
    };
    let body = json!({"model": opts.model, "messages": token_messages(), "max_tokens": 1,
        "temperature": 0});
    let (_, plain) = post(http, url, None, &body).await;
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let text = post_stream(http, url, &streamed).await;
    let checks = vec![
        item(judge::prompt_tokens(
            "non-streamed",
            expected,
            plain["usage"]["prompt_tokens"].as_u64(),
            tolerance,
        )),
        item(judge::prompt_tokens(
            "streamed",
            expected,
            streamed_prompt_tokens(&text),
            tolerance,
        )),
    ];
    (checks, 3)
}

/// The `usage.prompt_tokens` of the last SSE chunk that has one.
fn streamed_prompt_tokens(sse: &str) -> Option<u64> {
    sse.lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find_map(|v| v["usage"]["prompt_tokens"].as_u64())
}

/// reasoning: with thinking on, the reasoning arrives in `reasoning_content` (or
/// `reasoning`) and `content` carries no marker; with thinking off, no reasoning.
async fn reasoning_items(
    http: &reqwest::Client,
    opts: &ContractOptions,
    url: &str,
) -> (Vec<ContractCheck>, u64) {
    let mut checks = Vec::new();
    for thinking in [true, false] {
        let mut body = json!({"model": opts.model, "max_tokens": 256,
            "messages": [{"role": "user", "content": "Is 17 a prime number? Answer yes or no."}]});
        let switch = thinking_switch(&opts.spec, if thinking { "on" } else { "off" });
        merge(&mut body, switch);
        let (status, answer) = post(http, url, None, &body).await;
        let message = &answer["choices"][0]["message"];
        let verdict = if status != 200 {
            Verdict {
                status: Status::Fail,
                evidence: format!(
                    "thinking {}: {}",
                    if thinking { "on" } else { "off" },
                    http_failure(status, &answer)
                ),
                owner: Some(Owner::Server),
            }
        } else {
            let a = judge::Answer {
                reasoning: message["reasoning_content"]
                    .as_str()
                    .or_else(|| message["reasoning"].as_str()),
                content: message["content"].as_str().unwrap_or(""),
                finish_reason: answer["choices"][0]["finish_reason"].as_str(),
            };
            judge::reasoning(thinking, &a, &opts.spec.reasoning_markers)
        };
        checks.push(ContractCheck {
            item: "reasoning".into(),
            path: url.to_string(),
            verdict,
        });
    }
    (checks, 2)
}

/// The short greedy request on every replica and rank: each answer judged for
/// degenerate output, and the paths that answer differently from the rest named.
async fn every_path(http: &reqwest::Client, opts: &ContractOptions) -> (Vec<ContractCheck>, u64) {
    let body = json!({"model": opts.model, "temperature": 0, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Name the capital of France in one short sentence."}]});
    let share = opts.spec.replacement_char_max_share.unwrap_or(0.01);
    let mut answers: Vec<(String, String)> = Vec::new();
    let mut failed = 0;
    let mut checks = Vec::new();
    for url in &opts.urls {
        for rank in 0..opts.dp_size.max(1) {
            let header = (opts.dp_size > 1).then(|| rank.to_string());
            let path = match &header {
                Some(r) => format!("{url} rank {r}"),
                None => url.clone(),
            };
            let (status, answer) = post(http, url, header.as_deref(), &body).await;
            let text = answer["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let verdict = if status == 200 {
                judge::degenerate(&text, share)
            } else {
                Verdict {
                    status: Status::Fail,
                    evidence: http_failure(status, &answer),
                    owner: Some(Owner::Server),
                }
            };
            checks.push(ContractCheck {
                item: "path".into(),
                path: path.clone(),
                verdict,
            });
            // Only answers are compared: a failed path is already named above.
            if status == 200 {
                answers.push((path, text));
            } else {
                failed += 1;
            }
        }
    }
    let pairs: Vec<(&str, &str)> = answers
        .iter()
        .map(|(p, a)| (p.as_str(), a.as_str()))
        .collect();
    for odd in judge::odd_ones(&pairs) {
        let evidence = "answers the greedy request differently from the other paths".to_string();
        let verdict = Verdict {
            status: Status::Fail,
            evidence,
            owner: Some(Owner::Server),
        };
        checks.push(ContractCheck {
            item: "path_agreement".into(),
            path: odd.into(),
            verdict,
        });
    }
    (checks, answers.len() as u64 + failed)
}

/// `HTTP 400: <the server's error message>` (shortened).
fn http_failure(status: u16, answer: &Value) -> String {
    let message = answer["error"]["message"]
        .as_str()
        .or_else(|| answer["message"].as_str())
        .or_else(|| answer["detail"].as_str())
        .unwrap_or("");
    match message {
        "" => format!("HTTP {status}"),
        m => format!("HTTP {status}: {}", crate::text::truncate(m, 200)),
    }
}

/// The body fields that select a parameter's thinking mode (`on`/`off`), if any.
fn thinking_switch<'a>(spec: &'a ContractReq, mode: &str) -> Option<&'a Value> {
    match mode {
        "on" => spec.thinking_on.as_ref(),
        "off" => spec.thinking_off.as_ref(),
        _ => None,
    }
}

fn merge(body: &mut Value, extra: Option<&Value>) {
    if let (Some(b), Some(Value::Object(e))) = (body.as_object_mut(), extra) {
        b.extend(e.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// Sends a request; the HTTP status (0 when no answer came) and the body, read up to the
/// client's body cap (a longer one reads as empty).
async fn send(req: reqwest::RequestBuilder) -> (u16, Vec<u8>) {
    let Ok(resp) = req.send().await else {
        return (0, Vec::new());
    };
    let status = resp.status().as_u16();
    match crate::client::read_limited(resp, crate::client::MAX_BODY).await {
        Ok(body) if !body.cut => (status, body.bytes),
        _ => (status, Vec::new()),
    }
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// POSTs JSON to a whole URL; the status and the JSON body.
async fn post_to(http: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let (status, bytes) = send(http.post(url).json(body)).await;
    (status, json_of(&bytes))
}

/// A chat completion request to the server at `url`.
fn chat(http: &reqwest::Client, url: &str, body: &Value) -> reqwest::RequestBuilder {
    http.post(format!("{}/v1/chat/completions", url.trim_end_matches('/')))
        .json(body)
}

/// POSTs a streamed chat completion; the event stream as text (empty when none came).
async fn post_stream(http: &reqwest::Client, url: &str, body: &Value) -> String {
    String::from_utf8_lossy(&send(chat(http, url, body)).await.1).into_owned()
}

/// POSTs a chat completion (to one rank, by header); the status and the JSON body.
async fn post(http: &reqwest::Client, url: &str, rank: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = chat(http, url, body);
    if let Some(r) = rank {
        req = req.header("X-data-parallel-rank", r);
    }
    let (status, bytes) = send(req).await;
    (status, json_of(&bytes))
}
