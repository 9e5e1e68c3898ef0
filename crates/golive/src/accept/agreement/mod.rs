//! Stage `agreement`: the same weights must give the same answer on every serving path.
//!
//! A small shipped set of prompts with known answers (`agreement/prompts.toml`:
//! arithmetic, a string copied from a long context, a JSON field lookup) is sent greedy
//! (temperature 0, fixed seed) to `/v1/completions` with `logprobs`, twice per server:
//! cold (a run tag makes the prompt new to the cache), then again once the prefix is
//! cached. Checks: `agreement_cache` (cold against cached, per server),
//! `agreement_replicas` (each `--url` against the first, or all against
//! `--reference-url`), `agreement_known_answers` (a known answer wrong on every path is
//! the model's: a warning). Tokens are compared, and where they first differ the
//! position, both continuations and the logprob margin are reported; a divergence at
//! a near tie (the other path's token within [`TIE_MARGIN`] of the chosen one) is
//! floating-point noise between kernels, a warning, not a failure.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::stage::StageResult;
use crate::client::OpenAiClient;
use crate::metrics::Engine;
use crate::report::{Check, CheckId, Impact, Owner, Stage, Status};
use crate::target::Target;

mod compare;

pub use compare::{
    compare, parse_completion, Comparison, Divergence, Generation, LOGPROB_TOLERANCE, TIE_MARGIN,
};

const PROMPTS: &str = include_str!("../../../agreement/prompts.toml");

/// One prompt with a known answer.
#[derive(Debug, Clone, Deserialize)]
pub struct AgreementPrompt {
    /// Name in the agreement checks' data (`arithmetic`).
    pub id: String,
    /// What the prompt tests, in words (`JSON field lookup`).
    pub kind: String,
    /// The text to continue; `{filler}` stands for the filler.
    pub prompt: String,
    /// Must appear in the answer.
    pub expect: String,
    /// Output limit of the greedy answer (`max_tokens`).
    pub max_tokens: u32,
    /// Text put in place of `{filler}`, so the prefix cache holds most of the prompt; empty: none.
    #[serde(default)]
    pub filler: String,
    /// How many times the filler is repeated.
    #[serde(default)]
    pub filler_repeat: usize,
}

impl AgreementPrompt {
    /// The prompt text, behind a line with the run's tag (new to every cache).
    pub fn text(&self, tag: &str) -> String {
        let body = self.prompt.replace(
            "{filler}",
            self.filler.repeat(self.filler_repeat).trim_end(),
        );
        format!("Log {tag}.\n{body}")
    }
}

#[derive(Deserialize)]
struct PromptFile {
    prompt: Vec<AgreementPrompt>,
}

/// The shipped prompt set.
pub fn prompts() -> anyhow::Result<Vec<AgreementPrompt>> {
    let f: PromptFile = toml::from_str(PROMPTS)?;
    Ok(f.prompt)
}

/// One server's two answers to one prompt.
type Pair = Result<(Generation, Generation), String>;

/// One serving path: a server, its answers per prompt.
struct Path {
    label: String,
    url: String,
    check_suffix: String,
    answers: Vec<Pair>,
}

async fn complete(
    client: &OpenAiClient,
    engine: Option<Engine>,
    model: &str,
    text: &str,
    max_tokens: u32,
) -> Result<Generation, String> {
    let mut body = json!({
        "model": model, "prompt": text, "max_tokens": max_tokens,
        "temperature": 0, "seed": 42, "logprobs": 2,
    });
    if engine == Some(Engine::LlamaCpp) {
        // llama.cpp keeps the prompt's KV cache in the slot only with cache_prompt.
        body["cache_prompt"] = json!(true);
    }
    let timeout = client.request_timeout.min(Duration::from_secs(120));
    let (status, text) = client
        .post_json("/v1/completions", &body, timeout)
        .await
        .map_err(|(kind, detail)| format!("{}: {detail}", kind.as_str()))?;
    if !(200..300).contains(&status) {
        return Err(format!(
            "HTTP {status}: {}",
            crate::text::truncate(text.trim(), 200)
        ));
    }
    let json: Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "the answer is not JSON ({e}): {}",
            crate::text::truncate(&text, 160)
        )
    })?;
    parse_completion(&json).map_err(|e| format!("{e:#}"))
}

/// The stage as `accept` runs it: every node, and `--reference-url` when given.
pub(super) async fn stage(plan: &super::plan::AcceptPlan<'_>) -> anyhow::Result<StageResult> {
    let (args, nodes, infos, model) = (plan.args, plan.nodes, &plan.infos, plan.model.as_str());
    let reference = match &args.reference_url {
        None => None,
        Some(url) => {
            let mut target = Target::new(url, &args.target)?;
            let client = OpenAiClient::new(&target)?;
            let model = target
                .resolve_model(&client.http)
                .await
                .unwrap_or_else(|_| model.to_string());
            Some((client, model))
        }
    };
    let servers: Vec<_> = nodes
        .iter()
        .zip(infos)
        .map(|(n, i)| {
            (
                n.client.base_url.clone(),
                n.client.as_ref(),
                i.engine,
                model.to_string(),
            )
        })
        .collect();
    let checks = run(
        &servers,
        reference.as_ref().map(|(c, m)| (c, None, m.clone())),
    )
    .await;
    Ok(StageResult::of_checks(checks))
}

/// The agreement checks over the servers under test and the optional reference.
/// `servers`: (label, client, engine, model); the first is the baseline unless a
/// reference is given.
pub async fn run(
    servers: &[(String, &OpenAiClient, Option<Engine>, String)],
    reference: Option<(&OpenAiClient, Option<Engine>, String)>,
) -> Vec<Check> {
    let prompts = match prompts() {
        Ok(p) => p,
        Err(e) => {
            let mut c = Check::new(
                "agreement",
                Stage::Agreement,
                Status::Fail,
                "read the shipped agreement prompts",
            );
            c.measurement = format!("{e:#}");
            return vec![c];
        }
    };
    let tag = crate::load::run_tag();
    let with_reference = reference.is_some();
    let mut paths = Vec::new();
    let all = servers
        .iter()
        .enumerate()
        .map(|(i, (label, client, engine, model))| {
            let suffix = if i == 0 {
                String::new()
            } else {
                format!("_node{}", i + 1)
            };
            (label.clone(), *client, *engine, model.clone(), suffix)
        })
        .chain(reference.map(|(client, engine, model)| {
            (
                "reference".to_string(),
                client,
                engine,
                model,
                "_reference".into(),
            )
        }));
    for (label, client, engine, model, suffix) in all {
        let mut answers = Vec::new();
        for p in &prompts {
            let text = p.text(&tag);
            let cold = complete(client, engine, &model, &text, p.max_tokens).await;
            let pair = match cold {
                Err(e) => Err(e),
                Ok(cold) => complete(client, engine, &model, &text, p.max_tokens)
                    .await
                    .map(|cached| (cold, cached)),
            };
            answers.push(pair);
        }
        paths.push(Path {
            label,
            url: client.base_url.clone(),
            check_suffix: suffix,
            answers,
        });
    }
    let mut checks: Vec<Check> = paths.iter().map(|p| cache_check(p, &prompts)).collect();
    checks.push(replica_check(&paths, &prompts, with_reference));
    checks.push(known_answer_check(&paths, &prompts));
    checks
}

fn describe(d: &Divergence, a: &str, b: &str) -> String {
    format!(
        "first diverging {} (char {}): {a} {:?} | {b} {:?}{}",
        d.token_index
            .map_or("text".to_string(), |k| format!("token {k}")),
        d.char_index,
        d.a,
        d.b,
        d.margin.map_or(String::new(), |m| format!(
            "; margin {m:.3} nats{}",
            if d.near_tie { " (near tie)" } else { "" }
        ))
    )
}

/// Folds per-prompt comparisons into one check.
struct Tally {
    failed: Vec<String>,
    ties: Vec<String>,
    errors: Vec<String>,
    logprob_warn: Vec<String>,
    same: usize,
    rows: Vec<Value>,
}

impl Tally {
    fn new() -> Self {
        Tally {
            failed: Vec::new(),
            ties: Vec::new(),
            errors: Vec::new(),
            logprob_warn: Vec::new(),
            same: 0,
            rows: Vec::new(),
        }
    }

    fn add(&mut self, what: &str, a_label: &str, b_label: &str, a: &Generation, b: &Generation) {
        match compare(a, b) {
            Comparison::Same { max_logprob_diff } => {
                self.same += 1;
                if let Some(d) = max_logprob_diff.filter(|d| *d > LOGPROB_TOLERANCE) {
                    self.logprob_warn.push(format!(
                        "{what}: same tokens, logprobs differ by up to {d:.3} nats"
                    ));
                }
                self.rows.push(json!({"prompt": what, "same": true, "max_logprob_diff": max_logprob_diff, "text": a.text}));
            }
            Comparison::Differs(d) => {
                let line = format!("{what}: {}", describe(&d, a_label, b_label));
                if d.near_tie {
                    self.ties.push(line);
                } else {
                    self.failed.push(line);
                }
                self.rows
                    .push(json!({"prompt": what, "same": false, "divergence": d}));
            }
        }
    }

    fn into_check(self, mut c: Check, compared: &str) -> Check {
        let total = self.same + self.failed.len() + self.ties.len();
        if total == 0 {
            // Error answers are the other stages' findings; with nothing to compare this
            // check has no evidence either way.
            c.status = Status::Skip;
            c.measurement = format!(
                "not run: no answer to compare ({})",
                self.errors.first().map_or("no prompts", String::as_str)
            );
            c.evidence = self.errors.join("\n");
            return c;
        }
        c.status = if !self.failed.is_empty() {
            Status::Fail
        } else if !self.ties.is_empty() || !self.errors.is_empty() || !self.logprob_warn.is_empty()
        {
            Status::Warn
        } else {
            Status::Pass
        };
        c.measurement = format!(
            "{} of {total} answers identical ({compared}){}{}{}",
            self.same,
            if self.failed.is_empty() {
                String::new()
            } else {
                format!(", {} diverge", self.failed.len())
            },
            if self.ties.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} diverge at a near tie (< {TIE_MARGIN} nats)",
                    self.ties.len()
                )
            },
            if self.errors.is_empty() {
                String::new()
            } else {
                format!(", {} requests failed", self.errors.len())
            },
        );
        c.evidence = self
            .failed
            .iter()
            .chain(&self.ties)
            .chain(&self.errors)
            .chain(&self.logprob_warn)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        c.data = json!({"comparisons": self.rows, "tie_margin": TIE_MARGIN, "logprob_tolerance": LOGPROB_TOLERANCE});
        if c.status == Status::Fail {
            c.impact = Impact::Interface;
            c.owner = Some(Owner::Server);
            c.next_step = "Server: the same weights answer differently on two paths. Compare the engine versions, images, flags (quantization, kv-cache dtype, prefix caching, disaggregated prefill/decode) of the paths; rerun with the prefix cache off to see which path is wrong.".into();
        } else if c.status == Status::Warn && !self.ties.is_empty() {
            c.owner = Some(Owner::Server);
            c.next_step = "Divergence only where two tokens were nearly tied: float rounding between kernels, not corruption. Watch it; rerun if it grows.".into();
        }
        c
    }
}

fn cache_check(path: &Path, prompts: &[AgreementPrompt]) -> Check {
    let mut c = Check::new(
        format!("{}{}", CheckId::AgreementCache, path.check_suffix),
        Stage::Agreement,
        Status::Pass,
        format!(
            "{}: a greedy answer is the same cold and once its prompt is cached",
            path.label
        ),
    );
    c.url = Some(path.url.clone());
    let mut t = Tally::new();
    let mut cache_use = Vec::new();
    for (p, pair) in prompts.iter().zip(&path.answers) {
        match pair {
            Err(e) => t.errors.push(format!("{}: {e}", p.id)),
            Ok((cold, cached)) => {
                t.add(&p.id, "cold", "cached", cold, cached);
                cache_use.push(json!({"prompt": p.id, "prompt_tokens": cached.prompt_tokens, "cached_tokens": cached.cached_tokens}));
            }
        }
    }
    let mut c = t.into_check(c, "cold against cached");
    let cached: Vec<String> = cache_use
        .iter()
        .filter_map(|u| {
            Some(format!(
                "{} {}/{}",
                u["prompt"].as_str()?,
                u["cached_tokens"].as_u64()?,
                u["prompt_tokens"].as_u64()?
            ))
        })
        .collect();
    c.measurement.push_str(&if cached.is_empty() {
        "; the server does not report cached prompt tokens".to_string()
    } else {
        format!(
            "; cached prompt tokens on the second request: {}",
            cached.join(", ")
        )
    });
    c.data["cache_use"] = json!(cache_use);
    c
}

fn replica_check(paths: &[Path], prompts: &[AgreementPrompt], with_reference: bool) -> Check {
    let mut c = Check::new(
        CheckId::AgreementReplicas,
        Stage::Agreement,
        Status::Pass,
        if with_reference {
            "every --url gives the reference's greedy answers"
        } else {
            "every --url gives the first one's greedy answers"
        },
    );
    let (base, others): (&Path, Vec<&Path>) = if with_reference {
        let (r, rest) = paths.split_last().expect("the reference is a path");
        (r, rest.iter().collect())
    } else {
        match paths.split_first() {
            Some((b, rest)) => (b, rest.iter().collect()),
            None => return c,
        }
    };
    if others.is_empty() {
        c.status = Status::Skip;
        c.measurement = "not run: one --url and no --reference-url".into();
        return c;
    }
    c.url = Some(base.url.clone());
    let mut t = Tally::new();
    for other in &others {
        for (i, p) in prompts.iter().enumerate() {
            match (&base.answers[i], &other.answers[i]) {
                (Ok((a, _)), Ok((b, _))) => t.add(
                    &format!("{} on {}", p.id, other.label),
                    &base.label,
                    &other.label,
                    a,
                    b,
                ),
                (Err(e), _) => t.errors.push(format!("{} on {}: {e}", p.id, base.label)),
                (_, Err(e)) => t.errors.push(format!("{} on {}: {e}", p.id, other.label)),
            }
        }
    }
    t.into_check(c, &format!("cold answers against {}", base.label))
}

fn known_answer_check(paths: &[Path], prompts: &[AgreementPrompt]) -> Check {
    let mut c = Check::new(
        CheckId::AgreementKnownAnswers,
        Stage::Agreement,
        Status::Pass,
        "the greedy answers to the prompts with a known answer are right",
    );
    let mut wrong_everywhere = Vec::new();
    let mut rows = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        let answers: Vec<&str> = paths
            .iter()
            .filter_map(|path| path.answers[i].as_ref().ok())
            .flat_map(|(a, b)| [a.text.as_str(), b.text.as_str()])
            .collect();
        let right = answers.iter().filter(|a| a.contains(&p.expect)).count();
        rows.push(json!({"prompt": p.id, "kind": p.kind, "expect": p.expect, "right": right, "answers": answers.len(), "example": answers.first()}));
        if !answers.is_empty() && right == 0 {
            wrong_everywhere.push(format!(
                "{} ({}): expected {:?}, got {:?}",
                p.id,
                p.kind,
                p.expect,
                answers[0].trim()
            ));
        }
    }
    if rows.iter().all(|r| r["answers"] == 0) {
        c.status = Status::Skip;
        c.measurement = "not run: no answer to judge".into();
        return c;
    }
    c.measurement = format!(
        "{} of {} known answers right on some path{}",
        prompts.len() - wrong_everywhere.len(),
        prompts.len(),
        if wrong_everywhere.is_empty() {
            String::new()
        } else {
            format!("; wrong on every path: {}", wrong_everywhere.len())
        }
    );
    c.evidence = wrong_everywhere.join("\n");
    c.data = json!({"prompts": rows});
    if !wrong_everywhere.is_empty() {
        c.status = Status::Warn;
        c.owner = Some(Owner::Model);
        c.next_step = "Model: every path gives the same wrong answer, so the serving is consistent and the model (or its quantization) is weak at this; check the model card's evals before blaming the server.".into();
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_prompts_parse() {
        let p = prompts().unwrap();
        assert!(p.len() >= 3);
        let long = p.iter().find(|p| p.id == "copy_long_context").unwrap();
        assert!(long.text("t1").len() > 1000 && long.text("t1").starts_with("Log t1."));
    }
}
