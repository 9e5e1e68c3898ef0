//! The contract's quick items against a live server: the immutable parameters and
//! every path (each `--url`, each data-parallel rank by the `X-data-parallel-rank`
//! header). Typed options in, checks out; nothing printed.

use std::time::Duration;

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
    pub model: String,
    /// Data-parallel size; each rank is addressed by header (1: no header).
    pub dp_size: usize,
    pub spec: ContractReq,
    pub timeout: Duration,
}

/// One contract check: item, path, verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContractCheck {
    /// `params`, `path`, ...
    pub item: String,
    /// The replica URL and rank, e.g. `http://h:8000 rank 1`.
    pub path: String,
    pub verdict: Verdict,
}

/// Runs the params item on every replica and the short greedy request on every path.
pub async fn run(opts: &ContractOptions) -> anyhow::Result<(Vec<ContractCheck>, u64)> {
    let http = reqwest::Client::builder().timeout(opts.timeout).build()?;
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
    let (path_checks, n) = every_path(&http, opts).await;
    checks.extend(path_checks);
    Ok((checks, requests + n))
}

/// The short greedy request on every replica and rank: each answer judged for
/// degenerate output, and the paths that answer differently from the rest named.
async fn every_path(http: &reqwest::Client, opts: &ContractOptions) -> (Vec<ContractCheck>, u64) {
    let body = json!({"model": opts.model, "temperature": 0, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Name the capital of France in one short sentence."}]});
    let share = opts.spec.replacement_char_max_share.unwrap_or(0.01);
    let mut answers: Vec<(String, String)> = Vec::new();
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
                    evidence: format!("HTTP {status}"),
                    owner: Some(Owner::Server),
                }
            };
            checks.push(ContractCheck {
                item: "path".into(),
                path: path.clone(),
                verdict,
            });
            answers.push((path, text));
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
    (checks, answers.len() as u64)
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

/// POSTs a chat completion; the HTTP status (0 when no answer came) and the JSON body.
async fn post(http: &reqwest::Client, url: &str, rank: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = http
        .post(format!("{}/v1/chat/completions", url.trim_end_matches('/')))
        .json(body);
    if let Some(r) = rank {
        req = req.header("X-data-parallel-rank", r);
    }
    match req.send().await {
        Ok(resp) => {
            let status = resp.status().as_u16();
            (status, resp.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}
