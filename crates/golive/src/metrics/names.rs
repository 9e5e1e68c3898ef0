//! The one table of engine metric names: what each role (queue, KV usage, prefix
//! cache, latency) is called on vLLM (current names first, then the ones they
//! replaced), SGLang and llama.cpp, and the known renames. `watch`, `rules`,
//! `accept` and `rules --lint` all read from here.
//!
//! Grounded in vLLM 0.32's `vllm/v1/metrics/loggers.py` and a real vLLM 0.32 scrape,
//! vLLM's deprecation notes (deprecated in X.Y, hidden in X.Y+1, removed in X.Y+2),
//! SGLang's `sglang:` and llama.cpp's `llamacpp:` exporters.

use super::Engine;

/// Requests waiting for a slot (queue length).
pub const WAITING: &[&str] = &[
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "llamacpp:requests_deferred",
];
/// Requests being processed.
pub const RUNNING: &[&str] = &[
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "llamacpp:requests_processing",
];
/// KV-cache usage 0..1 (`gpu_cache_usage_perc` before vLLM 0.11).
pub const KV_USAGE: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
];
/// Prefix-cache lookups in tokens (`gpu_prefix_cache_*` before vLLM 0.11).
pub const CACHE_QUERIES: &[&str] = &["vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"];
/// Prefix-cache hits in tokens (SGLang: its cached tokens).
pub const CACHE_HITS: &[&str] = &[
    "vllm:prefix_cache_hits",
    "vllm:gpu_prefix_cache_hits",
    "sglang:cached_tokens",
];
/// Time to first token histograms (the prefill latency as clients see it).
pub const TTFT: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
];
/// Inter-token latency (`time_per_output_token_seconds` before vLLM 0.11).
pub const ITL: &[&str] = &[
    "vllm:inter_token_latency_seconds",
    "vllm:time_per_output_token_seconds",
    "sglang:inter_token_latency_seconds",
];
/// Finished-request histograms, for the request rate.
pub const FINISHED_HIST: &[&str] = &[
    "vllm:e2e_request_latency_seconds",
    "sglang:e2e_request_latency_seconds",
];
/// Finished-request counter where no histogram is exported.
pub const FINISHED_COUNTER: &str = "vllm:request_success";
/// Output tokens generated (the stalled-engine trigger watches it advance).
pub const GENERATED_TOKENS: &[&str] = &[
    "vllm:generation_tokens",
    "sglang:generation_tokens",
    "llamacpp:tokens_predicted",
];
/// Preemption counters (SGLang: its retracted requests).
pub const PREEMPTIONS: &[&str] = &["vllm:num_preemptions", "sglang:num_retracted_reqs"];
/// Prompt tokens processed (llama.cpp: excluding cached ones).
pub const PROMPT_TOKENS: &[&str] = &[
    "vllm:prompt_tokens",
    "sglang:prompt_tokens",
    "llamacpp:prompt_tokens",
];
/// llama.cpp's prompt tokens reused from its cache.
pub const LLAMACPP_PROMPT_TOKENS_CACHED: &str = "llamacpp:prompt_tokens_cached";
/// SGLang's prompt tokens (all of them; its cached tokens are the hits).
pub const SGLANG_PROMPT_TOKENS: &str = "sglang:prompt_tokens";
/// vLLM's cache configuration (labels: enable_prefix_caching, block_size, ...).
pub const VLLM_CACHE_CONFIG_INFO: &str = "vllm:cache_config_info";

/// Metric families per engine for `accept` (first present wins).
#[derive(Debug, Clone, Copy)]
pub struct EngineMetrics {
    /// KV-cache usage gauges, 0..1.
    pub kv_usage: &'static [&'static str],
    /// Waiting (queued) request gauges.
    pub waiting: &'static [&'static str],
    /// Running request gauges.
    pub running: &'static [&'static str],
    /// Preemption counters.
    pub preemptions: &'static [&'static str],
    /// Prefix-cache lookups, in tokens.
    pub cache_queries: &'static [&'static str],
    /// Prefix-cache hits, in tokens.
    pub cache_hits: &'static [&'static str],
    /// Prompt tokens served from cache (vLLM: local + external).
    pub cached_tokens: &'static [&'static str],
    /// vLLM's recomputed prompt tokens (`vllm:prompt_tokens_recomputed`); empty for the others.
    pub recomputed: &'static [&'static str],
    /// Prompt tokens processed (computed).
    pub prompt_tokens: &'static [&'static str],
    /// Prefill time histogram (seconds), for the warm-prefill measurement.
    pub prefill_histogram: Option<&'static str>,
}

/// The families `accept` reads for `engine`.
pub fn engine_metrics(engine: Engine) -> EngineMetrics {
    match engine {
        Engine::Vllm => EngineMetrics {
            kv_usage: &KV_USAGE[..2],
            waiting: &WAITING[..1],
            running: &RUNNING[..1],
            preemptions: &PREEMPTIONS[..1],
            cache_queries: CACHE_QUERIES,
            cache_hits: &CACHE_HITS[..2],
            cached_tokens: &["vllm:prompt_tokens_cached"],
            recomputed: &["vllm:prompt_tokens_recomputed"],
            prompt_tokens: &PROMPT_TOKENS[..1],
            prefill_histogram: Some("vllm:request_prefill_time_seconds"),
        },
        Engine::Sglang => EngineMetrics {
            kv_usage: &KV_USAGE[2..3],
            waiting: &WAITING[1..2],
            running: &RUNNING[1..2],
            preemptions: &PREEMPTIONS[1..],
            cache_queries: &[],
            cache_hits: &CACHE_HITS[2..],
            cached_tokens: &CACHE_HITS[2..],
            recomputed: &[],
            prompt_tokens: &PROMPT_TOKENS[1..2],
            prefill_histogram: None,
        },
        Engine::LlamaCpp => EngineMetrics {
            kv_usage: &KV_USAGE[3..],
            waiting: &WAITING[2..],
            running: &RUNNING[2..],
            preemptions: &[],
            cache_queries: &[],
            cache_hits: &[LLAMACPP_PROMPT_TOKENS_CACHED],
            cached_tokens: &[LLAMACPP_PROMPT_TOKENS_CACHED],
            recomputed: &[],
            prompt_tokens: &PROMPT_TOKENS[2..],
            prefill_histogram: None,
        },
        Engine::Openai => EngineMetrics {
            kv_usage: &[],
            waiting: &[],
            running: &[],
            preemptions: &[],
            cache_queries: &[],
            cache_hits: &[],
            cached_tokens: &[],
            recomputed: &[],
            prompt_tokens: &[],
            prefill_histogram: None,
        },
    }
}

/// The name prefix of an engine's own families.
pub fn engine_prefix(engine: Engine) -> Option<&'static str> {
    match engine {
        Engine::Vllm => Some("vllm:"),
        Engine::Sglang => Some("sglang:"),
        Engine::LlamaCpp => Some("llamacpp:"),
        Engine::Openai => None,
    }
}

/// The families an engine always exports once it serves (a missing one is an
/// `absent` finding, never a quiet reading): queue and running requests, and where
/// the engine has one, the KV usage gauge. llama.cpp dropped its KV gauge in 2025
/// builds, so only its request gauges are required.
pub fn required(engine: Engine) -> &'static [&'static str] {
    const VLLM: &[&str] = &[WAITING[0], RUNNING[0], KV_USAGE[0]];
    const SGLANG: &[&str] = &[WAITING[1], RUNNING[1], KV_USAGE[2]];
    const LLAMACPP: &[&str] = &[WAITING[2], RUNNING[2]];
    match engine {
        Engine::Vllm => VLLM,
        Engine::Sglang => SGLANG,
        Engine::LlamaCpp => LLAMACPP,
        Engine::Openai => &[],
    }
}

/// A metric that was renamed or removed, and what to use instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Rename {
    /// The old family name (no `_total`/`_bucket` suffix).
    pub old: &'static str,
    /// The current family, when there is a one-to-one replacement.
    pub new: Option<&'static str>,
    /// When and how (the release, or what to compute instead).
    pub note: &'static str,
}

/// Known renames and removals.
pub const RENAMES: &[Rename] = &[
    Rename {
        old: "vllm:gpu_cache_usage_perc",
        new: Some("vllm:kv_cache_usage_perc"),
        note: "renamed in vLLM 0.9 (deprecated), old name removed in 0.11",
    },
    Rename {
        old: "vllm:gpu_prefix_cache_queries",
        new: Some("vllm:prefix_cache_queries"),
        note: "renamed in vLLM 0.9 (deprecated), old name removed in 0.11",
    },
    Rename {
        old: "vllm:gpu_prefix_cache_hits",
        new: Some("vllm:prefix_cache_hits"),
        note: "renamed in vLLM 0.9 (deprecated), old name removed in 0.11",
    },
    Rename {
        old: "vllm:time_per_output_token_seconds",
        new: Some("vllm:inter_token_latency_seconds"),
        note: "renamed in vLLM 0.11 (deprecated); the per-request mean is vllm:request_time_per_output_token_seconds",
    },
    Rename {
        old: "vllm:time_in_queue_requests",
        new: Some("vllm:request_queue_time_seconds"),
        note: "V0 duplicate, removed with V1",
    },
    Rename {
        old: "vllm:gpu_prefix_cache_hit_rate",
        new: None,
        note: "removed with V1: compute rate(vllm:prefix_cache_hits_total) / rate(vllm:prefix_cache_queries_total)",
    },
    Rename {
        old: "vllm:cpu_cache_usage_perc",
        new: None,
        note: "removed with V1 (no CPU swap space)",
    },
    Rename {
        old: "vllm:cpu_prefix_cache_hit_rate",
        new: None,
        note: "removed with V1 (no CPU swap space)",
    },
    Rename {
        old: "vllm:num_requests_swapped",
        new: None,
        note: "removed with V1 (no CPU swap space)",
    },
    Rename {
        old: "vllm:model_forward_time_milliseconds",
        new: Some("vllm:request_inference_time_seconds"),
        note: "removed with V1: use the prefill, decode or inference time histograms",
    },
    Rename {
        old: "vllm:model_execute_time_milliseconds",
        new: Some("vllm:request_inference_time_seconds"),
        note: "removed with V1: use the prefill, decode or inference time histograms",
    },
    Rename {
        old: "vllm:avg_prompt_throughput_toks_per_s",
        new: None,
        note: "removed with V1: compute rate(vllm:prompt_tokens_total)",
    },
    Rename {
        old: "vllm:avg_generation_throughput_toks_per_s",
        new: None,
        note: "removed with V1: compute rate(vllm:generation_tokens_total)",
    },
];

/// Role tables, for "the same role on another engine".
const ROLES: &[(&str, &[&str])] = &[
    ("queue length", WAITING),
    ("running requests", RUNNING),
    ("KV-cache usage", KV_USAGE),
    ("prefix-cache lookups", CACHE_QUERIES),
    ("prefix-cache hits", CACHE_HITS),
    ("time to first token", TTFT),
    ("inter-token latency", ITL),
    ("end-to-end latency", FINISHED_HIST),
    ("prompt tokens", PROMPT_TOKENS),
];

/// The known rename of a family, if any.
pub fn rename_of(family: &str) -> Option<&'static Rename> {
    RENAMES.iter().find(|r| r.old == family)
}

/// The role a family plays and the other names of that role (any engine).
pub fn role_of(family: &str) -> Option<(&'static str, &'static [&'static str])> {
    ROLES
        .iter()
        .find(|(_, names)| names.contains(&family))
        .map(|(role, names)| (*role, *names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rename_target_is_a_current_name_and_roles_cover_them() {
        for r in RENAMES {
            assert!(r.old.starts_with("vllm:"), "{}", r.old);
            if let Some(new) = r.new {
                assert!(rename_of(new).is_none(), "{new} is itself renamed");
            }
        }
        assert_eq!(
            role_of("vllm:gpu_cache_usage_perc").unwrap().0,
            "KV-cache usage"
        );
        let m = engine_metrics(Engine::LlamaCpp);
        assert_eq!(m.waiting, &["llamacpp:requests_deferred"]);
        assert_eq!(
            engine_metrics(Engine::Sglang).kv_usage,
            &["sglang:token_usage"]
        );
        assert_eq!(
            engine_metrics(Engine::Vllm).cache_hits,
            &["vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"]
        );
    }
}
