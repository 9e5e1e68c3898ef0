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
    /// The `prefix_cache` check.
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

/// Runs the proof: the requests, then the judgement.
pub async fn run(node: &Node, info: &ServerInfo, model: &str, prefix_words: u32) -> Proof {
    let m = measure(node, info, model, prefix_words).await;
    let mut c = Check::new(
        CheckId::PrefixCache,
        Stage::PrefixCache,
        Status::Pass,
        "a shared system prompt and tool schema is served from the prefix cache (cold, warm x3, control)",
    );
    c.url = Some(node.client.base_url.clone());
    c.request = Some(m.samples[1].body.clone());
    c.duration_ms = m.samples.iter().map(|s| s.rec.e2e_ms() as u64).sum();
    let evidence = table(&m, info);
    let samples = samples_out(&m.samples);
    let failed = m.samples.iter().filter(|s| s.rec.error.is_some()).count();
    if failed > 0 {
        c.status = Status::Fail;
        c.impact = Impact::Environment;
        c.owner = Some(Owner::Server);
        c.measurement = format!("{failed} of {} requests failed", m.samples.len());
        c.evidence = evidence;
        c.data = json!({"cause": "requests_failed"});
        return Proof {
            check: c,
            samples,
            warm_prefill_ms: None,
        };
    }
    let f = Figures::of(&m);
    let rules = rules(&m, &f);
    c.evidence = format!("{}\n{evidence}", rule_lines(&rules));
    c.data = data(&m, &f, info);
    judge(&mut c, &m, &f, &rules, info);
    Proof {
        check: c,
        samples,
        warm_prefill_ms: f.warm_prefill,
    }
}

/// The proof's requests and what the server's tokenizer says of them.
struct Measured {
    /// cold, warm x3, control.
    samples: Vec<Sample>,
    /// The tokenizer's common prefix of cold and warm, and the shorter prompt's length.
    tokenized: Option<(usize, usize)>,
    /// The tokenizer's common prefix of cold and control.
    control_common: Option<usize>,
    /// The prompts are not token-identical over the intended shared part.
    not_identical: bool,
    /// The shared prefix in tokens.
    shared_tokens: Option<f64>,
    /// The server's cache block, in tokens.
    block: f64,
    /// Warm hits the proof asks for: the shared prefix, less 10% and a block.
    required_hits: Option<f64>,
}

async fn measure(node: &Node, info: &ServerInfo, model: &str, prefix_words: u32) -> Measured {
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
    let (tokenized, control_common) = tokenize(node, info, model, &samples).await;

    // The intended shared prefix in tokens: the shared share of the text applied to the
    // tokenized (else reported) prompt length. The tokenizer's common prefix is the
    // actual one; when it falls short, the prompts are not token-identical.
    let prompt_len = tokenized.map(|(_, len)| len as f64).or(samples[0]
        .rec
        .usage
        .prompt_tokens
        .map(|v| v as f64));
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
    Measured {
        samples,
        tokenized,
        control_common,
        not_identical,
        shared_tokens,
        block,
        required_hits: shared_tokens.map(|s| (HIT_SHARE * s - block).max(1.0)),
    }
}

/// Token-level comparison where the server can tokenize with its chat template: the common
/// prefix of cold and warm (with the shorter length), and of cold and control.
async fn tokenize(
    node: &Node,
    info: &ServerInfo,
    model: &str,
    samples: &[Sample],
) -> (Option<(usize, usize)>, Option<usize>) {
    let engine = info.engine.unwrap_or(Engine::Openai);
    let tokens = |s: &Sample| {
        let messages = s.body["messages"].clone();
        async move { engine::tokenize_chat(&node.client, engine, model, &messages).await }
    };
    let cold = tokens(&samples[0]).await;
    let warm = tokens(&samples[1]).await;
    let control = tokens(&samples[samples.len() - 1]).await;
    let tokenized = match (&cold, &warm) {
        (Some(c), Some(w)) => Some((engine::common_prefix(c, w), c.len().min(w.len()))),
        _ => None,
    };
    let control_common = match (&cold, &control) {
        (Some(c), Some(k)) => Some(engine::common_prefix(c, k)),
        _ => None,
    };
    (tokenized, control_common)
}

fn samples_out(samples: &[Sample]) -> Vec<PrefixCacheSample> {
    samples
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
        .collect()
}

/// The evidence table: one row per request, the tokenizer's finding, the cache flag.
fn table(m: &Measured, info: &ServerInfo) -> String {
    let rows: Vec<String> = m
        .samples
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
    let mut evidence = rows.join("\n");
    if let Some((common, len)) = m.tokenized {
        evidence.push_str(&format!(
            "\n/tokenize: cold and warm share {common} of {len} tokens; control shares {}",
            fmt_u(m.control_common.map(|v| v as u64))
        ));
    }
    if let Some(flag) = &info.prefix_cache_flag {
        evidence.push_str(&format!("\nprefix cache flag: {flag}"));
    }
    evidence
}

/// The figures the rules judge.
struct Figures {
    warm_hits: Vec<f64>,
    min_warm_hits: Option<f64>,
    warm_prefill: Option<f64>,
    cold_prefill: Option<f64>,
    control_hits: Option<f64>,
}

impl Figures {
    fn of(m: &Measured) -> Self {
        let warms = Self::warms(m);
        let warm_hits: Vec<f64> = warms.clone().filter_map(Sample::hits).collect();
        Figures {
            min_warm_hits: warm_hits.iter().copied().reduce(f64::min),
            warm_hits,
            warm_prefill: median(warms.filter_map(Sample::prefill_ms).collect()),
            cold_prefill: m.samples[0].prefill_ms(),
            control_hits: m.samples[m.samples.len() - 1].hits(),
        }
    }

    fn warms(m: &Measured) -> impl Iterator<Item = &Sample> + Clone {
        m.samples.iter().filter(|s| s.role == "warm")
    }

    fn mean_hits(&self) -> Option<f64> {
        (!self.warm_hits.is_empty())
            .then(|| self.warm_hits.iter().sum::<f64>() / self.warm_hits.len() as f64)
    }
}

/// The proof's rules, each with its verdict (`None`: no data).
fn rules(m: &Measured, f: &Figures) -> Vec<(String, Option<bool>)> {
    let queries: Vec<f64> = m.samples.iter().filter_map(|s| s.queries).collect();
    let cached: Vec<f64> = Figures::warms(m)
        .filter_map(|s| s.cached_counter.or(s.rec.cached_tokens().map(|x| x as f64)))
        .collect();
    let cached_rise = (!cached.is_empty()).then(|| cached.iter().sum::<f64>());
    vec![
        (
            "cache lookups (queries) rise with every request".into(),
            (queries.len() == m.samples.len()).then(|| queries.iter().all(|q| *q > 0.0)),
        ),
        (
            format!(
                "warm hits >= {} (the shared prefix of {} tokens, less {:.0}% and a {:.0}-token block): min {}",
                fmt_f(m.required_hits),
                fmt_f(m.shared_tokens),
                (1.0 - HIT_SHARE) * 100.0,
                m.block,
                fmt_f(f.min_warm_hits)
            ),
            f.min_warm_hits.zip(m.required_hits).map(|(h, r)| h >= r),
        ),
        (
            format!("cached prompt tokens rise: +{}", fmt_f(cached_rise)),
            cached_rise.map(|v| v > 0.0),
        ),
        (
            format!(
                "warm prefill drops: cold {} ms -> warm median {} ms",
                fmt_f(f.cold_prefill),
                fmt_f(f.warm_prefill)
            ),
            f.cold_prefill.zip(f.warm_prefill).map(|(c, w)| w < c),
        ),
        (
            format!(
                "control (changed early system text) is not a hit: {} hits",
                fmt_f(f.control_hits)
            ),
            f.control_hits
                .zip(m.shared_tokens)
                .map(|(h, s)| h <= CONTROL_SHARE * s),
        ),
    ]
}

fn rule_lines(rules: &[(String, Option<bool>)]) -> String {
    let line = |(t, ok): &(String, Option<bool>)| {
        let mark = match ok {
            Some(true) => "ok",
            Some(false) => "FAILED",
            None => "no data",
        };
        format!("[{mark}] {t}")
    };
    rules.iter().map(line).collect::<Vec<_>>().join("\n")
}

/// The check's data: every figure behind the verdict.
fn data(m: &Measured, f: &Figures, info: &ServerInfo) -> Value {
    let warms = Figures::warms(m);
    json!({
        "shared_prefix_tokens": m.shared_tokens,
        "warm_hits_mean": f.mean_hits(),
        "cold_prefill_ms": f.cold_prefill,
        "warm_prefill_ms": f.warm_prefill,
        "control_hits": f.control_hits,
        "tokenized_common_prefix": m.tokenized.map(|t| t.0),
        "tokenized_prompt_len": m.tokenized.map(|t| t.1),
        "required_warm_hits": m.required_hits,
        "recomputed_tokens": warms.filter_map(|s| s.recomputed).reduce(|a, b| a + b),
        "prompt_tokens_counter_delta": m.samples.iter().filter_map(|s| s.prompt_counter).reduce(|a, b| a + b),
        "prefix_cache_flag": info.prefix_cache_flag,
        "retention_interval": info.retention_interval,
        "cause": Value::Null,
    })
}

/// The verdict: no evidence (warn), every rule kept (pass), or which of the three causes.
fn judge(
    c: &mut Check,
    m: &Measured,
    f: &Figures,
    rules: &[(String, Option<bool>)],
    info: &ServerInfo,
) {
    if f.warm_hits.is_empty() {
        c.status = Status::Warn;
        c.measurement =
            "no cache evidence exposed (no hit counter, no cached_tokens, no timings)".into();
        c.next_step = "expose evidence: vLLM --enable-prompt-tokens-details or /metrics; SGLang --enable-cache-report".into();
        c.data["cause"] = "no_evidence".into();
        return;
    }
    let broken: Vec<&str> = rules
        .iter()
        .filter(|(_, ok)| *ok == Some(false))
        .map(|(t, _)| t.as_str())
        .collect();
    if broken.is_empty() {
        c.measurement = format!(
            "warm requests reused {} of ~{} shared prefix tokens; prefill {} -> {} ms; control {} hits",
            fmt_f(f.mean_hits()),
            fmt_f(m.shared_tokens),
            fmt_f(f.cold_prefill),
            fmt_f(f.warm_prefill),
            fmt_f(f.control_hits)
        );
        return;
    }
    c.status = Status::Fail;
    let (cause, cause_text, impact, owner, next) = cause(m, f, &broken, info);
    c.measurement = format!("{cause_text}; failed: {}", broken.join("; "));
    c.impact = impact;
    c.owner = Some(owner);
    c.next_step = next.to_string();
    c.data["cause"] = cause.into();
}

/// Which of the three causes broke the rules (else `other`).
fn cause(
    m: &Measured,
    f: &Figures,
    broken: &[&str],
    info: &ServerInfo,
) -> (&'static str, String, Impact, Owner, &'static str) {
    let all_zero = f.warm_hits.iter().all(|h| *h <= 0.0);
    let flag_off = info
        .prefix_cache_flag
        .as_deref()
        .is_some_and(|f| matches!(f.to_ascii_lowercase().trim_matches('"'), "false" | "0"));
    let tokenized = m.tokenized;
    if all_zero && !m.not_identical {
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
    } else if m.not_identical {
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
    } else if f
        .min_warm_hits
        .is_some_and(|h| m.required_hits.is_some_and(|r| h > 0.0 && h < r))
    {
        (
            "retention_boundary",
            format!(
                "retention boundary: warm hits {} of {} shared tokens although the tokens are identical; hybrid/KDA models keep state only at prompt ends and at intervals (VLLM_PREFIX_CACHE_RETENTION_INTERVAL {})",
                fmt_f(f.min_warm_hits),
                fmt_f(m.shared_tokens),
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
