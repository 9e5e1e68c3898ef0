//! Stage `prefix_cache`: proof that a shared prefix is really reused.
//!
//! Requests go one at a time, with the metrics diffed around each: cold (a fresh
//! prefix), several warm (identical long system prompt and tool schema, a different
//! final question), and a control (changed early system text). Pass only if lookups
//! rise, warm hits are of the size of the shared prefix, cached tokens rise, warm
//! prefill drops and the control is not a hit. A failure names its cause: the feature
//! is off, the prefix is not token-identical, or a retention boundary.

use std::time::Duration;

use serde_json::{json, Value};

use super::engine::{self, first_delta, ServerInfo};
use super::plan::AcceptPlan;
use super::stage::StageResult;
use super::Node;
use crate::client::{Api, RequestRecord, RequestSpec};
use crate::metrics::{Engine, MetricsSnapshot};
use crate::report::{Check, CheckId, Impact, Owner, PrefixCacheSample, Stage, Status};

/// Warm requests after the cold one.
const WARM_REQUESTS: usize = 3;
/// Warm hits must cover this share of the shared prefix, less one cache block (engines
/// cache whole blocks and recompute the last token).
const HIT_SHARE: f64 = 0.9;
/// Block size assumed when the server does not say.
const DEFAULT_BLOCK: f64 = 16.0;
/// The prompts count as token-identical when the tokenizer's common prefix covers this
/// share of the intended shared part.
const IDENTICAL_SHARE: f64 = 0.8;
/// The control may match at most this share (the template's first tokens match).
const CONTROL_SHARE: f64 = 0.3;

const TOOL_SCHEMA: &str = r#"{"type":"function","function":{"name":"lookup_order","description":"Look up an order by id and return its status, items and shipping address.","parameters":{"type":"object","properties":{"order_id":{"type":"string","description":"The order id, e.g. A-10023"},"include_items":{"type":"boolean"}},"required":["order_id"]}}}"#;

/// The long shared system prompt: `session` text first (changed for the control), then
/// about `words` words of policy text and a tool schema.
pub fn system_prompt(session: &str, words: u32) -> String {
    let mut s = format!(
        "Session {session}. You are the support assistant of a mail-order shop. Follow the policy below.\n"
    );
    let body = crate::load::prompt_text(words, words, "policy", 0);
    s.push_str(&body[..body.find("\nRequest").unwrap_or(body.len())]);
    s.push_str("\nTools available (call them by name with JSON arguments):\n");
    s.push_str(TOOL_SCHEMA);
    s
}

const QUESTIONS: &[&str] = &[
    "What is the status of order A-10023?",
    "Can I change the shipping address of order B-77?",
    "Which items are in order C-5150?",
    "Was order D-42 shipped yet?",
    "How do I return a damaged item?",
];

struct Sample {
    role: &'static str,
    rec: RequestRecord,
    body: Value,
    hits: Option<f64>,
    queries: Option<f64>,
    cached_counter: Option<f64>,
    recomputed: Option<f64>,
    prompt_counter: Option<f64>,
    prefill_hist_ms: Option<f64>,
}

impl Sample {
    /// Cache hits in tokens, best evidence first: the engine's hit counter, then the
    /// response's cached tokens.
    fn hits(&self) -> Option<f64> {
        self.hits
            .or(self.rec.cached_tokens().map(|v| v as f64))
            .or(self.cached_counter)
    }
    fn prefill_ms(&self) -> Option<f64> {
        self.rec
            .timings
            .and_then(|t| t.prompt_ms)
            .or(self.prefill_hist_ms)
            .or(self.rec.ttft_ms())
    }
}

async fn scrape(node: &Node) -> Option<MetricsSnapshot> {
    engine::scrape(
        &node.client.http,
        &format!("{}/metrics", node.client.base_url),
    )
    .await
}

async fn one(
    node: &Node,
    info: &ServerInfo,
    role: &'static str,
    model: &str,
    system: &str,
    question: &str,
) -> Sample {
    let names = info.names();
    let body = json!({
        "model": model,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 8, "temperature": 0, "stream": true,
        "stream_options": {"include_usage": true},
    });
    let before = scrape(node).await;
    let rec = node
        .client
        .send_now(&RequestSpec::from_json(Api::Chat, &body, true))
        .await;
    // Some engines publish counters a moment after the answer: wait until the
    // prompt-token counter moved (at most ~1 s).
    let mut after = scrape(node).await;
    if let Some(b) = &before {
        for _ in 0..5 {
            let moved = after
                .as_ref()
                .and_then(|a| {
                    first_delta(b, a, names.prompt_tokens).or(first_delta(
                        b,
                        a,
                        names.cache_queries,
                    ))
                })
                .is_some_and(|d| d > 0.0);
            if moved || names.prompt_tokens.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            after = scrape(node).await;
        }
    }
    let d = |fams: &[&str]| match (&before, &after) {
        (Some(b), Some(a)) => first_delta(b, a, fams),
        _ => None,
    };
    let prefill_hist_ms = names
        .prefill_histogram
        .and_then(|h| match (&before, &after) {
            (Some(b), Some(a)) => {
                let (s0, n0) = b.histogram_sum_count(h)?;
                let (s1, n1) = a.histogram_sum_count(h)?;
                (n1 > n0).then(|| (s1 - s0) / (n1 - n0) * 1000.0)
            }
            _ => None,
        });
    let mut hits = d(names.cache_hits);
    let mut queries = d(names.cache_queries);
    let prompt_counter = d(names.prompt_tokens);
    if info.engine == Some(Engine::LlamaCpp) {
        // llama.cpp counts computed and cached prompt tokens apart; a lookup covers both.
        queries = match (prompt_counter, hits) {
            (Some(p), Some(h)) => Some(p + h),
            (p, _) => p,
        };
    }
    if rec.error.is_some() {
        hits = None;
    }
    Sample {
        role,
        body,
        hits,
        queries,
        cached_counter: d(names.cached_tokens),
        recomputed: d(names.recomputed),
        prompt_counter,
        prefill_hist_ms,
        rec,
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// What the proof found.
pub struct Proof {
    pub check: Check,
    /// The per-request samples (cold, warm x3, control).
    pub samples: Vec<PrefixCacheSample>,
    /// The warm requests' median prefill time, for the baseline (none when requests failed).
    pub warm_prefill_ms: Option<f64>,
}

/// The stage as `accept` runs it, on the first node.
pub(super) async fn stage(plan: &AcceptPlan<'_>) -> StageResult {
    let proof = run(
        plan.node(),
        plan.info(),
        &plan.model,
        plan.args.prefix_words,
    )
    .await;
    let mut result = StageResult::of_checks(vec![proof.check]);
    result.measurements.prefix_cache = proof.samples;
    result.baseline.prefill_warm_ms = proof.warm_prefill_ms;
    result
}

/// Runs the proof.
pub async fn run(node: &Node, info: &ServerInfo, model: &str, prefix_words: u32) -> Proof {
    let tag = crate::load::run_tag();
    let system = system_prompt(&tag, prefix_words);
    let control_system =
        system_prompt(&format!("{tag} control, a different session"), prefix_words);
    let mut samples = Vec::new();
    samples.push(one(node, info, "cold", model, &system, QUESTIONS[0]).await);
    for q in QUESTIONS.iter().skip(1).take(WARM_REQUESTS) {
        samples.push(one(node, info, "warm", model, &system, q).await);
    }
    samples.push(one(node, info, "control", model, &control_system, QUESTIONS[4]).await);

    // Token-level comparison where the server can tokenize with its chat template.
    let engine = info.engine.unwrap_or(Engine::Openai);
    let toks = |s: &Sample| s.body["messages"].clone();
    let cold_tokens = engine::tokenize_chat(&node.client, engine, model, &toks(&samples[0])).await;
    let warm_tokens = engine::tokenize_chat(&node.client, engine, model, &toks(&samples[1])).await;
    let control_tokens = engine::tokenize_chat(
        &node.client,
        engine,
        model,
        &toks(&samples[samples.len() - 1]),
    )
    .await;
    let tokenized = match (&cold_tokens, &warm_tokens) {
        (Some(c), Some(w)) => Some((engine::common_prefix(c, w), c.len().min(w.len()))),
        _ => None,
    };
    let control_common = match (&cold_tokens, &control_tokens) {
        (Some(c), Some(k)) => Some(engine::common_prefix(c, k)),
        _ => None,
    };

    let failed: Vec<&Sample> = samples.iter().filter(|s| s.rec.error.is_some()).collect();
    let cold = &samples[0];
    let warms: Vec<&Sample> = samples.iter().filter(|s| s.role == "warm").collect();
    let control = &samples[samples.len() - 1];

    // The intended shared prefix in tokens: the shared share of the text applied to the
    // tokenized (else reported) prompt length. The tokenizer's common prefix is the
    // actual one; when it falls short, the prompts are not token-identical.
    let prompt_len =
        tokenized
            .map(|(_, len)| len as f64)
            .or(cold.rec.usage.prompt_tokens.map(|v| v as f64));
    let intended = prompt_len.map(|len| {
        let total = system.len() + QUESTIONS[0].len();
        len * system.len() as f64 / total as f64
    });
    let not_identical = match (tokenized, intended) {
        (Some((common, _)), Some(want)) => (common as f64) < IDENTICAL_SHARE * want,
        _ => false,
    };
    let shared_tokens: Option<f64> = if not_identical {
        intended
    } else {
        tokenized.map(|(common, _)| common as f64).or(intended)
    };
    let block = info
        .cache_settings
        .get("block_size")
        .and_then(|v| v.as_str().and_then(|s| s.parse().ok()).or(v.as_f64()))
        .unwrap_or(DEFAULT_BLOCK);
    let required_hits = shared_tokens.map(|s| (HIT_SHARE * s - block).max(1.0));

    let out_samples: Vec<PrefixCacheSample> = samples
        .iter()
        .map(|s| PrefixCacheSample {
            role: s.role.to_string(),
            prompt_tokens: s.rec.usage.prompt_tokens.or(s
                .rec
                .timings
                .and_then(|t| Some(t.prompt_n? + t.cache_n.unwrap_or(0)))),
            cached_tokens: s.rec.cached_tokens().or(s.cached_counter.map(|v| v as u64)),
            prefill_ms: s.prefill_ms(),
            ttft_ms: s.rec.ttft_ms(),
            hits_delta: s.hits,
            queries_delta: s.queries,
        })
        .collect();

    let mut c = Check::new(
        CheckId::PrefixCache,
        Stage::PrefixCache,
        Status::Pass,
        "a shared system prompt and tool schema is served from the prefix cache (cold, warm x3, control)",
    );
    c.url = Some(node.client.base_url.clone());
    c.request = Some(samples[1].body.clone());
    c.duration_ms = samples.iter().map(|s| s.rec.e2e_ms() as u64).sum();

    let table: Vec<String> = samples
        .iter()
        .map(|s| {
            format!(
                "{:<7} prompt={} cached(response)={} hits(metrics)={} queries={} prefill_ms={}{}",
                s.role,
                fmt_u(s.rec.usage.prompt_tokens),
                fmt_u(s.rec.cached_tokens()),
                fmt_f(s.hits),
                fmt_f(s.queries),
                fmt_f(s.prefill_ms()),
                s.rec
                    .error
                    .map(|e| format!(" ERROR {}: {}", e.as_str(), s.rec.error_detail))
                    .unwrap_or_default()
            )
        })
        .collect();
    let mut evidence = table.join("\n");
    if let Some((common, len)) = tokenized {
        evidence.push_str(&format!(
            "\n/tokenize: cold and warm share {common} of {len} tokens; control shares {}",
            fmt_u(control_common.map(|v| v as u64))
        ));
    }
    if let Some(flag) = &info.prefix_cache_flag {
        evidence.push_str(&format!("\nprefix cache flag: {flag}"));
    }

    if !failed.is_empty() {
        c.status = Status::Fail;
        c.impact = Impact::Environment;
        c.owner = Some(Owner::Server);
        c.measurement = format!("{} of {} requests failed", failed.len(), samples.len());
        c.evidence = evidence;
        c.data = json!({"cause": "requests_failed"});
        return Proof {
            check: c,
            samples: out_samples,
            warm_prefill_ms: None,
        };
    }

    let warm_hits: Vec<f64> = warms.iter().filter_map(|s| s.hits()).collect();
    let has_evidence = !warm_hits.is_empty();
    let warm_prefill = median(warms.iter().filter_map(|s| s.prefill_ms()).collect());
    let cold_prefill = cold.prefill_ms();
    let control_hits = control.hits();
    let min_warm_hits = warm_hits.iter().copied().reduce(f64::min);

    let mut rules: Vec<(String, Option<bool>)> = Vec::new();
    let queries: Vec<f64> = samples.iter().filter_map(|s| s.queries).collect();
    rules.push((
        "cache lookups (queries) rise with every request".into(),
        (queries.len() == samples.len()).then(|| queries.iter().all(|q| *q > 0.0)),
    ));
    rules.push((
        format!(
            "warm hits >= {} (the shared prefix of {} tokens, less {:.0}% and a {block:.0}-token block): min {}",
            fmt_f(required_hits),
            fmt_f(shared_tokens),
            (1.0 - HIT_SHARE) * 100.0,
            fmt_f(min_warm_hits)
        ),
        match (min_warm_hits, required_hits) {
            (Some(h), Some(r)) => Some(h >= r),
            _ => None,
        },
    ));
    let cached_rise: Option<f64> = {
        let v: Vec<f64> = warms
            .iter()
            .filter_map(|s| s.cached_counter.or(s.rec.cached_tokens().map(|x| x as f64)))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    rules.push((
        format!("cached prompt tokens rise: +{}", fmt_f(cached_rise)),
        cached_rise.map(|v| v > 0.0),
    ));
    rules.push((
        format!(
            "warm prefill drops: cold {} ms -> warm median {} ms",
            fmt_f(cold_prefill),
            fmt_f(warm_prefill)
        ),
        match (cold_prefill, warm_prefill) {
            (Some(c), Some(w)) => Some(w < c),
            _ => None,
        },
    ));
    rules.push((
        format!(
            "control (changed early system text) is not a hit: {} hits",
            fmt_f(control_hits)
        ),
        match (control_hits, shared_tokens) {
            (Some(h), Some(s)) => Some(h <= CONTROL_SHARE * s),
            _ => None,
        },
    ));
    let broken: Vec<&str> = rules
        .iter()
        .filter(|(_, ok)| *ok == Some(false))
        .map(|(t, _)| t.as_str())
        .collect();
    let rule_lines: Vec<String> = rules
        .iter()
        .map(|(t, ok)| {
            format!(
                "[{}] {t}",
                match ok {
                    Some(true) => "ok",
                    Some(false) => "FAILED",
                    None => "no data",
                }
            )
        })
        .collect();
    c.evidence = format!("{}\n{}", rule_lines.join("\n"), evidence);

    let mean_hits =
        (!warm_hits.is_empty()).then(|| warm_hits.iter().sum::<f64>() / warm_hits.len() as f64);
    c.data = json!({
        "shared_prefix_tokens": shared_tokens,
        "warm_hits_mean": mean_hits,
        "cold_prefill_ms": cold_prefill,
        "warm_prefill_ms": warm_prefill,
        "control_hits": control_hits,
        "tokenized_common_prefix": tokenized.map(|t| t.0),
        "tokenized_prompt_len": tokenized.map(|t| t.1),
        "required_warm_hits": required_hits,
        "recomputed_tokens": warms.iter().filter_map(|s| s.recomputed).reduce(|a, b| a + b),
        "prompt_tokens_counter_delta": samples.iter().filter_map(|s| s.prompt_counter).reduce(|a, b| a + b),
        "prefix_cache_flag": info.prefix_cache_flag,
        "retention_interval": info.retention_interval,
        "cause": Value::Null,
    });

    if !has_evidence {
        c.status = Status::Warn;
        c.measurement =
            "no cache evidence exposed (no hit counter, no cached_tokens, no timings)".into();
        c.next_step = "expose evidence: vLLM --enable-prompt-tokens-details or /metrics; SGLang --enable-cache-report".into();
        c.data["cause"] = "no_evidence".into();
        return Proof {
            check: c,
            samples: out_samples,
            warm_prefill_ms: warm_prefill,
        };
    }
    if broken.is_empty() {
        c.measurement = format!(
            "warm requests reused {} of ~{} shared prefix tokens; prefill {} -> {} ms; control {} hits",
            fmt_f(mean_hits),
            fmt_f(shared_tokens),
            fmt_f(cold_prefill),
            fmt_f(warm_prefill),
            fmt_f(control_hits)
        );
        return Proof {
            check: c,
            samples: out_samples,
            warm_prefill_ms: warm_prefill,
        };
    }

    // Which of the three causes.
    c.status = Status::Fail;
    let all_zero = warm_hits.iter().all(|h| *h <= 0.0);
    let flag_off = info
        .prefix_cache_flag
        .as_deref()
        .is_some_and(|f| matches!(f.to_ascii_lowercase().trim_matches('"'), "false" | "0"));
    let (cause, cause_text, impact, owner, next) = if all_zero && !not_identical {
        (
            "feature_off",
            format!(
                "feature off: no prefix-cache hits at all (cache flag {})",
                info.prefix_cache_flag.as_deref().map_or("not exposed".to_string(), |f| {
                    if flag_off { format!("{f}: disabled") } else { f.to_string() }
                })
            ),
            Impact::Environment,
            Owner::Server,
            "enable prefix caching (vLLM: --enable-prefix-caching, do not pass --no-enable-prefix-caching; llama.cpp: drop --no-cache-prompt; SGLang: drop --disable-radix-cache)",
        )
    } else if not_identical {
        (
            "prefix_not_identical",
            format!(
                "prefix not identical: the tokenized prompts share only {} of {} tokens",
                tokenized.map_or(0, |t| t.0),
                tokenized.map_or(0, |t| t.1)
            ),
            Impact::Environment,
            Owner::Gateway,
            "make the prompt prefix byte-identical: no timestamps, request ids or reordered tools before the shared part (chat template, gateway, client)",
        )
    } else if min_warm_hits.is_some_and(|h| required_hits.is_some_and(|r| h > 0.0 && h < r)) {
        (
            "retention_boundary",
            format!(
                "retention boundary: warm hits {} of {} shared tokens although the tokens are identical; hybrid/KDA models keep state only at prompt ends and at intervals (VLLM_PREFIX_CACHE_RETENTION_INTERVAL {})",
                fmt_f(min_warm_hits),
                fmt_f(shared_tokens),
                info.retention_interval.as_deref().unwrap_or("not exposed; VLLM_SERVER_DEV_MODE=1 shows it in /server_info")
            ),
            Impact::Limit,
            Owner::Model,
            "align shared prefixes with the retention interval (or lower VLLM_PREFIX_CACHE_RETENTION_INTERVAL) and record the limit",
        )
    } else {
        (
            "other",
            format!("cache reuse incomplete: {}", broken.join("; ")),
            Impact::Info,
            Owner::Server,
            "compare the warm and control requests in the evidence",
        )
    };
    c.measurement = format!("{cause_text}; failed: {}", broken.join("; "));
    c.impact = impact;
    c.owner = Some(owner);
    c.next_step = next.to_string();
    c.data["cause"] = cause.into();
    Proof {
        check: c,
        samples: out_samples,
        warm_prefill_ms: warm_prefill,
    }
}

fn fmt_f(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.0}"))
}
fn fmt_u(v: Option<u64>) -> String {
    v.map_or("-".to_string(), |x| x.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_prompt_differs_early_and_warm_prompts_share_the_system_text() {
        let a = system_prompt("abc", 300);
        let b = system_prompt("abc control, a different session", 300);
        assert!(a.len() > 1500);
        let common = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
        assert!(common < 20, "control shares {common} bytes");
        assert!(a.contains("lookup_order"));
    }
}
