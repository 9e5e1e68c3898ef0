//! Engine awareness: which server this is (vLLM, SGLang, llama.cpp, plain OpenAI), the
//! metric names to read for load, queue and cache evidence, the running configuration
//! where the server exposes it, and token-level prefix comparison through `/tokenize`.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::client::OpenAiClient;
use crate::metrics::{Engine, MetricsSnapshot};

const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

pub use crate::metrics::names::EngineMetrics;

/// Metric families per engine (from the one table in [`crate::metrics::names`]).
pub fn metric_names(engine: Engine) -> EngineMetrics {
    crate::metrics::names::engine_metrics(engine)
}

/// Sum of the first family in `names` the snapshot has.
pub fn first_sum(snap: &MetricsSnapshot, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| snap.sum(n))
}

/// Largest value of the first family in `names` the snapshot has.
pub fn first_max(snap: &MetricsSnapshot, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| snap.max(n))
}

/// Counter difference of the first family present in both; `None` on reset or absence.
pub fn first_delta(a: &MetricsSnapshot, b: &MetricsSnapshot, names: &[&str]) -> Option<f64> {
    names
        .iter()
        .find_map(|n| crate::metrics::counter_delta(a, b, n))
}

/// What the service stage learned about one server.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerInfo {
    /// The engine, recognised from the metrics page, `/version`, `/props` or `/get_server_info`;
    /// `openai` (any OpenAI-compatible server) when none is; `None` only before detection.
    pub engine: Option<Engine>,
    /// The engine's version (vLLM `/version`, llama.cpp `build_info`, SGLang `version`); `None`
    /// when unknown.
    pub version: Option<String>,
    /// Model ids `/v1/models` lists; empty when it did not answer.
    pub models: Vec<String>,
    /// vLLM `max_model_len`, llama.cpp per-slot `n_ctx`, SGLang `context_length`.
    pub max_model_len: Option<u64>,
    /// `/metrics` answered with a metrics page.
    pub metrics_available: bool,
    /// The prefix-cache switch as the server reports it (`True`/`False`), when it does.
    pub prefix_cache_flag: Option<String>,
    /// Cache settings the server exposes (block size, blocks, memory fraction, slots).
    pub cache_settings: serde_json::Map<String, Value>,
    /// `VLLM_PREFIX_CACHE_RETENTION_INTERVAL` from `/server_info` (dev mode only).
    pub retention_interval: Option<String>,
    /// Where the running config came from, and an excerpt of it.
    pub config_source: Option<String>,
    /// A compact JSON excerpt of that config (templates and environment dumps left out); empty when
    /// there is none.
    pub config_excerpt: String,
}

impl ServerInfo {
    /// The engine's name as reports spell it (`vllm`, `llama.cpp`; `openai-compatible` when
    /// unknown).
    pub fn engine_name(&self) -> &'static str {
        self.engine.unwrap_or(Engine::Openai).as_str()
    }
    /// The engine accepts the `ignore_eos` sampling extension (vLLM, SGLang, llama.cpp).
    pub fn ignores_eos(&self) -> bool {
        matches!(
            self.engine,
            Some(Engine::Vllm | Engine::Sglang | Engine::LlamaCpp)
        )
    }
    /// The metric families `accept` reads for this engine.
    pub fn names(&self) -> EngineMetrics {
        metric_names(self.engine.unwrap_or(Engine::Openai))
    }
}

fn json(body: &str) -> Option<Value> {
    serde_json::from_str(body).ok()
}

fn find_key<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => m
            .get(key)
            .or_else(|| m.values().find_map(|x| find_key(x, key))),
        Value::Array(a) => a.iter().find_map(|x| find_key(x, key)),
        _ => None,
    }
}

/// Probes `/version`, `/props`, `/get_server_info`, `/server_info` and the metrics
/// page; never fails (what is missing stays `None`).
pub async fn detect(client: &OpenAiClient, metrics: Option<&MetricsSnapshot>) -> ServerInfo {
    let mut info = ServerInfo {
        metrics_available: metrics.is_some(),
        ..Default::default()
    };
    let metrics_engine = metrics.and_then(|m| m.engine());
    if let Ok((200, body)) = client.get_text("/v1/models", PROBE_TIMEOUT).await {
        if let Some(v) = json(&body) {
            if let Some(data) = v["data"].as_array() {
                info.models = data
                    .iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_string))
                    .collect();
                info.max_model_len = data.first().and_then(|m| m["max_model_len"].as_u64());
            }
        }
    }
    let mut engine = metrics_engine;
    if let Ok((200, body)) = client.get_text("/version", PROBE_TIMEOUT).await {
        if let Some(v) = json(&body).and_then(|v| v["version"].as_str().map(str::to_string)) {
            info.version = Some(v);
            engine = engine.or(Some(Engine::Vllm));
        }
    }
    if engine.is_none() || engine == Some(Engine::LlamaCpp) {
        if let Ok((200, body)) = client.get_text("/props", PROBE_TIMEOUT).await {
            if json(&body).is_some_and(|v| read_llamacpp_props(&mut info, &v)) {
                engine = Some(Engine::LlamaCpp);
            }
        }
    }
    if engine.is_none() || engine == Some(Engine::Sglang) {
        if let Ok((200, body)) = client.get_text("/get_server_info", PROBE_TIMEOUT).await {
            if let Some(v) = json(&body) {
                engine = Some(Engine::Sglang);
                read_sglang_info(&mut info, &v);
            }
        }
    }
    if engine == Some(Engine::Vllm) {
        if let Some(m) = metrics {
            for label in [
                "enable_prefix_caching",
                "block_size",
                "num_gpu_blocks",
                "gpu_memory_utilization",
                "cache_dtype",
                "prefix_caching_hash_algo",
            ] {
                if let Some(v) = m.label(crate::metrics::names::VLLM_CACHE_CONFIG_INFO, label) {
                    if label == "enable_prefix_caching" {
                        info.prefix_cache_flag = Some(v.clone());
                    }
                    info.cache_settings
                        .insert(label.to_string(), Value::String(v));
                }
            }
            if !info.cache_settings.is_empty() {
                info.config_source = Some("/metrics vllm:cache_config_info".into());
                info.config_excerpt = format!("{:?}", info.cache_settings);
            }
        }
        // Only with VLLM_SERVER_DEV_MODE=1; a 404 is normal.
        if let Ok((200, body)) = client
            .get_text("/server_info?config_format=json", PROBE_TIMEOUT)
            .await
        {
            if let Some(v) = json(&body) {
                if let Some(r) = find_key(&v, "VLLM_PREFIX_CACHE_RETENTION_INTERVAL") {
                    info.retention_interval = Some(r.to_string().trim_matches('"').to_string());
                }
                if let Some(len) = find_key(&v, "max_model_len").and_then(Value::as_u64) {
                    info.max_model_len = info.max_model_len.or(Some(len));
                }
                info.config_source = Some("/server_info".into());
                info.config_excerpt = excerpt_json(&v, &["system_env"]);
            }
        }
    }
    info.engine = engine.or(Some(Engine::Openai));
    info
}

/// llama.cpp's `/props`: its build, context per slot, slots and `cache_prompt`; whether the
/// page is llama.cpp's.
fn read_llamacpp_props(info: &mut ServerInfo, v: &Value) -> bool {
    if v.get("default_generation_settings").is_none() && v.get("build_info").is_none() {
        return false;
    }
    if let Some(b) = v["build_info"].as_str() {
        info.version = Some(b.to_string());
    }
    let n_ctx = v["default_generation_settings"]["n_ctx"].as_u64();
    info.max_model_len = info.max_model_len.or(n_ctx);
    for key in ["total_slots", "model_path"] {
        if let Some(x) = v.get(key) {
            info.cache_settings.insert(key.to_string(), x.clone());
        }
    }
    if let Some(n) = n_ctx {
        info.cache_settings
            .insert("n_ctx_per_slot".into(), n.into());
    }
    if let Some(cp) = find_key(v, "cache_prompt") {
        info.prefix_cache_flag = Some(cp.to_string());
    }
    info.config_source = Some("/props".into());
    info.config_excerpt = excerpt_json(v, &["chat_template"]);
    true
}

/// SGLang's `/get_server_info`: version, context length, radix cache and memory settings.
fn read_sglang_info(info: &mut ServerInfo, v: &Value) {
    if let Some(ver) = v["version"].as_str() {
        info.version = Some(ver.to_string());
    }
    info.max_model_len = info.max_model_len.or(v["context_length"].as_u64());
    if let Some(d) = v["disable_radix_cache"].as_bool() {
        info.prefix_cache_flag = Some(if d { "False" } else { "True" }.into());
    }
    for key in [
        "mem_fraction_static",
        "max_running_requests",
        "chunked_prefill_size",
        "page_size",
    ] {
        if let Some(x) = v.get(key) {
            info.cache_settings.insert(key.to_string(), x.clone());
        }
    }
    info.config_source = Some("/get_server_info".into());
    info.config_excerpt = excerpt_json(v, &[]);
}

/// A compact JSON excerpt without bulky keys (templates, environment dumps).
fn excerpt_json(v: &Value, drop: &[&str]) -> String {
    let mut v = v.clone();
    if let Value::Object(m) = &mut v {
        for k in drop {
            m.remove(*k);
        }
    }
    let text = v.to_string();
    crate::text::truncate(&text, 1500)
}

/// The token ids the server's own tokenizer gives for chat `messages` (with the chat
/// template applied), when it offers a way: vLLM `/tokenize` with `messages`, llama.cpp
/// `/apply-template` + `/tokenize`.
pub async fn tokenize_chat(
    client: &OpenAiClient,
    engine: Engine,
    model: &str,
    messages: &Value,
) -> Option<Vec<u64>> {
    let ids = |body: &str| -> Option<Vec<u64>> {
        let v = json(body)?;
        let tokens = v["tokens"].as_array()?;
        // llama.cpp may return {id, piece} objects with with_pieces.
        tokens
            .iter()
            .map(|t| t.as_u64().or_else(|| t["id"].as_u64()))
            .collect()
    };
    if engine == Engine::LlamaCpp {
        let (status, body) = client
            .post_json(
                "/apply-template",
                &serde_json::json!({"messages": messages}),
                PROBE_TIMEOUT,
            )
            .await
            .ok()?;
        if status != 200 {
            return None;
        }
        let prompt = json(&body)?["prompt"].as_str()?.to_string();
        let (status, body) = client
            .post_json(
                "/tokenize",
                &serde_json::json!({"content": prompt, "add_special": true, "parse_special": true}),
                PROBE_TIMEOUT,
            )
            .await
            .ok()?;
        return (status == 200).then(|| ids(&body)).flatten();
    }
    let (status, body) = client
        .post_json(
            "/tokenize",
            &serde_json::json!({"model": model, "messages": messages}),
            PROBE_TIMEOUT,
        )
        .await
        .ok()?;
    (status == 200).then(|| ids(&body)).flatten()
}

/// Length of the common prefix of two token lists.
pub fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Polls `/metrics` (and a DCGM exporter) while a load step runs; keeps the peaks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Peaks {
    /// Peak KV-cache usage as a 0..1 share, of the fullest engine; `None` when not exported.
    pub kv_usage_max: Option<f64>,
    /// Peak of the requests waiting, summed over the server's engines; `None` when not exported.
    pub waiting_max: Option<f64>,
    /// Peak of the requests running, summed over the server's engines; `None` when not exported.
    pub running_max: Option<f64>,
    /// Peak framebuffer memory used on the fullest GPU (MiB, DCGM `DCGM_FI_DEV_FB_USED`); `None`
    /// without `--dcgm`.
    pub gpu_memory_used_mib_max: Option<f64>,
    /// `/metrics` scrapes taken into the peaks.
    pub samples: u32,
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

impl Peaks {
    /// Takes one `/metrics` scrape into the peaks (`names`: the engine's metric families).
    pub fn observe(&mut self, snap: &MetricsSnapshot, names: &EngineMetrics) {
        self.kv_usage_max = max_opt(self.kv_usage_max, first_max(snap, names.kv_usage));
        self.waiting_max = max_opt(self.waiting_max, first_sum(snap, names.waiting));
        self.running_max = max_opt(self.running_max, first_sum(snap, names.running));
        self.samples += 1;
    }
    /// Takes the fullest GPU of one DCGM exporter scrape into the memory peak.
    pub fn observe_dcgm(&mut self, snap: &MetricsSnapshot) {
        // Framebuffer memory used per GPU, MiB: the fullest GPU is the one that OOMs.
        self.gpu_memory_used_mib_max = max_opt(
            self.gpu_memory_used_mib_max,
            snap.max("DCGM_FI_DEV_FB_USED"),
        );
    }
}

/// Scrapes `url` (a whole metrics URL) with a short timeout; `None` when unavailable.
pub async fn scrape(http: &reqwest::Client, url: &str) -> Option<MetricsSnapshot> {
    tokio::time::timeout(PROBE_TIMEOUT, MetricsSnapshot::scrape(http, url))
        .await
        .ok()?
        .ok()
}

/// The node's `/metrics` page, where the service stage found one.
pub fn metrics_url(base_url: &str, info: &ServerInfo) -> Option<String> {
    info.metrics_available
        .then(|| format!("{base_url}/metrics"))
}

/// A scrape of `url`, or nothing without one.
pub async fn scrape_at(http: &reqwest::Client, url: Option<&str>) -> Option<MetricsSnapshot> {
    scrape(http, url?).await
}

/// Runs `work` while polling the server's metrics (and DCGM) every `every`.
pub async fn with_peaks<F: std::future::Future>(
    http: &reqwest::Client,
    metrics_url: Option<&str>,
    dcgm_url: Option<&str>,
    names: EngineMetrics,
    every: Duration,
    work: F,
) -> (F::Output, Peaks) {
    let mut peaks = Peaks::default();
    let poll = async {
        loop {
            if let Some(url) = metrics_url {
                if let Some(s) = scrape(http, url).await {
                    peaks.observe(&s, &names);
                }
            }
            if let Some(url) = dcgm_url {
                if let Some(s) = scrape(http, url).await {
                    peaks.observe_dcgm(&s);
                }
            }
            tokio::time::sleep(every).await;
        }
    };
    let out = tokio::select! {
        out = work => out,
        _ = poll => unreachable!("the poll loop never ends"),
    };
    (out, peaks)
}
