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

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::client::OpenAiClient;
use crate::metrics::Engine;
use crate::report::{Check, Impact, Owner, Stage, Status};

/// A divergence counts as a near tie when, on one of the two paths, the other path's
/// token was within this many nats of the chosen one. Cached and uncached kernels (and
/// replicas with other batch shapes) differ in float rounding, which moves logprobs by
/// far less (measured on llama.cpp, README); a corrupted path changes tokens that had a
/// clear lead.
pub const TIE_MARGIN: f64 = 0.1;

/// Same tokens whose logprobs differ by more than this (nats) are a warning: the text
/// agrees but the distribution behind it does not.
pub const LOGPROB_TOLERANCE: f64 = 0.5;

const PROMPTS: &str = include_str!("../../agreement/prompts.toml");

/// One prompt with a known answer.
#[derive(Debug, Clone, Deserialize)]
pub struct AgreementPrompt {
    pub id: String,
    pub kind: String,
    pub prompt: String,
    /// Must appear in the answer.
    pub expect: String,
    pub max_tokens: u32,
    #[serde(default)]
    pub filler: String,
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

/// One generated token with its logprob and the runner-ups the engine returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    pub token: String,
    pub logprob: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<(String, f64)>,
}

/// One greedy answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    pub text: String,
    /// Present when the engine returned logprobs.
    pub tokens: Option<Vec<Token>>,
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the cache, where the engine says (llama.cpp
    /// `timings.cache_n`, vLLM `usage.prompt_tokens_details.cached_tokens`).
    pub cached_tokens: Option<u64>,
}

/// Reads a `/v1/completions` answer: llama.cpp's `logprobs.content` list or the OpenAI
/// legacy `logprobs.tokens` / `token_logprobs` / `top_logprobs` (vLLM).
pub fn parse_completion(body: &Value) -> anyhow::Result<Generation> {
    let choice = body
        .pointer("/choices/0")
        .ok_or_else(|| anyhow::anyhow!("no choices in the answer"))?;
    let text = choice
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("choices[0].text is missing"))?
        .to_string();
    let lp = choice.get("logprobs").filter(|v| !v.is_null());
    let tokens = lp.and_then(|lp| {
        if let Some(content) = lp.get("content").and_then(Value::as_array) {
            return Some(
                content
                    .iter()
                    .map(|t| Token {
                        token: t["token"].as_str().unwrap_or("").to_string(),
                        logprob: t["logprob"].as_f64(),
                        top: t["top_logprobs"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|x| {
                                Some((x["token"].as_str()?.to_string(), x["logprob"].as_f64()?))
                            })
                            .collect(),
                    })
                    .collect(),
            );
        }
        let toks = lp.get("tokens")?.as_array()?;
        let lps = lp.get("token_logprobs").and_then(Value::as_array);
        let tops = lp.get("top_logprobs").and_then(Value::as_array);
        Some(
            toks.iter()
                .enumerate()
                .map(|(i, t)| Token {
                    token: t.as_str().unwrap_or("").to_string(),
                    logprob: lps.and_then(|l| l.get(i)).and_then(Value::as_f64),
                    top: tops
                        .and_then(|l| l.get(i))
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect(),
        )
    });
    Ok(Generation {
        text,
        tokens,
        prompt_tokens: body.pointer("/usage/prompt_tokens").and_then(Value::as_u64),
        cached_tokens: body
            .pointer("/timings/cache_n")
            .or_else(|| body.pointer("/usage/prompt_tokens_details/cached_tokens"))
            .and_then(Value::as_u64),
    })
}

/// Where two answers first differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// Index of the first differing generated token (when both returned tokens).
    pub token_index: Option<usize>,
    /// Index of the first differing character of the text.
    pub char_index: usize,
    /// The two continuations from that point (at most 40 characters each).
    pub a: String,
    pub b: String,
    /// At the first differing token: how far (nats) the other path's token was behind
    /// the chosen one, the smaller of the two paths' views; `None` when neither path
    /// listed the other's token among its runner-ups.
    pub margin: Option<f64>,
    pub near_tie: bool,
}

/// How two answers compare.
#[derive(Debug, Clone, PartialEq)]
pub enum Comparison {
    /// Same tokens (or text); the largest logprob difference over them, where returned.
    Same {
        max_logprob_diff: Option<f64>,
    },
    Differs(Divergence),
}

fn chars_from(s: &str, at: usize) -> String {
    s.chars().skip(at).take(40).collect()
}

/// Compares two greedy answers token by token (text when tokens are missing).
pub fn compare(a: &Generation, b: &Generation) -> Comparison {
    let char_index = a
        .text
        .chars()
        .zip(b.text.chars())
        .take_while(|(x, y)| x == y)
        .count();
    let (Some(ta), Some(tb)) = (&a.tokens, &b.tokens) else {
        if a.text == b.text {
            return Comparison::Same {
                max_logprob_diff: None,
            };
        }
        return Comparison::Differs(Divergence {
            token_index: None,
            char_index,
            a: chars_from(&a.text, char_index),
            b: chars_from(&b.text, char_index),
            margin: None,
            near_tie: false,
        });
    };
    let first = ta.iter().zip(tb).position(|(x, y)| x.token != y.token);
    let first = first.or_else(|| (ta.len() != tb.len()).then(|| ta.len().min(tb.len())));
    let Some(k) = first else {
        let max = ta
            .iter()
            .zip(tb)
            .filter_map(|(x, y)| Some((x.logprob? - y.logprob?).abs()))
            .reduce(f64::max);
        return Comparison::Same {
            max_logprob_diff: max,
        };
    };
    // How far behind its own choice each path ranked the other path's token.
    let behind = |own: &Token, other: &str| -> Option<f64> {
        let chosen = own.logprob?;
        own.top
            .iter()
            .find(|(t, _)| t == other)
            .map(|(_, lp)| chosen - lp)
    };
    let margin = match (ta.get(k), tb.get(k)) {
        (Some(x), Some(y)) => match (behind(x, &y.token), behind(y, &x.token)) {
            (Some(p), Some(q)) => Some(p.min(q)),
            (p, q) => p.or(q),
        },
        _ => None,
    };
    Comparison::Differs(Divergence {
        token_index: Some(k),
        char_index,
        a: chars_from(&a.text, char_index),
        b: chars_from(&b.text, char_index),
        margin,
        near_tie: margin.is_some_and(|m| m.abs() < TIE_MARGIN),
    })
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
        format!("agreement_cache{}", path.check_suffix),
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
        "agreement_replicas",
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
        "agreement_known_answers",
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

    /// A token, its logprob and its runner-ups.
    type Tok<'a> = (&'a str, f64, &'a [(&'a str, f64)]);

    fn generation(tokens: &[Tok]) -> Generation {
        Generation {
            text: tokens.iter().map(|t| t.0).collect(),
            tokens: Some(
                tokens
                    .iter()
                    .map(|(t, lp, top)| Token {
                        token: t.to_string(),
                        logprob: Some(*lp),
                        top: top.iter().map(|(a, b)| (a.to_string(), *b)).collect(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_diverging_token_and_its_margin_are_found() {
        let a = generation(&[
            (" QX", -0.1, &[]),
            ("-77", -0.2, &[("-77", -0.2), ("-71", -2.5)]),
            ("31", -0.1, &[]),
        ]);
        let b = generation(&[
            (" QX", -0.1, &[]),
            ("-71", -0.3, &[("-71", -0.3), ("-77", -0.35)]),
            ("13", -0.1, &[]),
        ]);
        let Comparison::Differs(d) = compare(&a, &b) else {
            panic!("must differ")
        };
        assert_eq!(d.token_index, Some(1));
        assert_eq!(d.char_index, 5);
        assert_eq!((d.a.as_str(), d.b.as_str()), ("731", "113"));
        // b nearly chose a's token (0.05 nats), so this is a near tie.
        assert!((d.margin.unwrap() - 0.05).abs() < 1e-9 && d.near_tie);
        let c = generation(&[
            (" QX", -0.1, &[]),
            ("-71", -0.3, &[("-71", -0.3), ("-77", -3.0)]),
            ("13", -0.1, &[]),
        ]);
        let Comparison::Differs(d) = compare(&a, &c) else {
            panic!("must differ")
        };
        assert!(!d.near_tie, "{d:?}");
        assert_eq!(
            compare(&a, &a),
            Comparison::Same {
                max_logprob_diff: Some(0.0)
            }
        );
    }

    #[test]
    fn the_shipped_prompts_parse_and_both_logprob_layouts_are_read() {
        let p = prompts().unwrap();
        assert!(p.len() >= 3);
        let long = p.iter().find(|p| p.id == "copy_long_context").unwrap();
        assert!(long.text("t1").len() > 1000 && long.text("t1").starts_with("Log t1."));
        let llama = json!({"choices":[{"text":" 5","logprobs":{"content":[{"token":" 5","logprob":-0.01,"top_logprobs":[{"token":" 5","logprob":-0.01},{"token":" 6","logprob":-5.0}]}]}}],
            "usage":{"prompt_tokens":12},"timings":{"cache_n":11}});
        let g = parse_completion(&llama).unwrap();
        assert_eq!(g.tokens.as_ref().unwrap()[0].top.len(), 2);
        assert_eq!((g.prompt_tokens, g.cached_tokens), (Some(12), Some(11)));
        let legacy = json!({"choices":[{"text":" 5","logprobs":{"tokens":[" 5"],"token_logprobs":[-0.01],"top_logprobs":[{" 5":-0.01," 6":-5.0}]}}]});
        let g = parse_completion(&legacy).unwrap();
        assert_eq!(g.tokens.unwrap()[0].top.len(), 2);
        assert!(parse_completion(&json!({"choices": []})).is_err());
    }
}
