//! What `golive watch` reads from one `/metrics` page, engine by engine, and the
//! window arithmetic over a series of such readings (counter increases that survive
//! restarts, growth of a gauge).
//!
//! Metric names come from [`crate::metrics::names`].

pub use crate::events::watch::Reset;
use crate::metrics::names::{
    self, FINISHED_COUNTER, LLAMACPP_PROMPT_TOKENS_CACHED, SGLANG_PROMPT_TOKENS,
};
use crate::metrics::{Engine, MetricsSnapshot};

pub use crate::metrics::names::{
    CACHE_HITS, CACHE_QUERIES, FINISHED_HIST, GENERATED_TOKENS, ITL, KV_USAGE, RUNNING, TTFT,
    WAITING,
};

/// The counters watch follows, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// Requests finished (the request rate once the queue is stable).
    Finished,
    /// Prompt tokens looked up in the prefix cache.
    CacheQueries,
    /// Prompt tokens found in the prefix cache.
    CacheHits,
    /// Sum of the time-to-first-token histogram (seconds).
    TtftSum,
    /// Count of the time-to-first-token histogram.
    TtftCount,
    /// Sum of the inter-token latency histogram (seconds).
    ItlSum,
    /// Count of the inter-token latency histogram.
    ItlCount,
    /// Tool-call / schema failures from a gateway counter (`--tool-error-counter`).
    ToolErrors,
    /// Prompt tokens in total (llama.cpp: computed plus cached).
    PromptTokens,
    /// Output tokens generated.
    GeneratedTokens,
}

/// One scrape, reduced to the numbers the triggers need.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Reading {
    /// Seconds since the watch started.
    pub t: f64,
    /// The engine the metric names identify; `None` when they match none.
    pub engine: Option<Engine>,
    /// Requests waiting in the queue, summed over the target's engines; `None` when not exported.
    pub waiting: Option<f64>,
    /// The family `waiting` came from (for the evidence).
    pub waiting_name: Option<&'static str>,
    /// Requests running, summed over the target's engines; `None` when not exported.
    pub running: Option<f64>,
    /// KV-cache usage as a 0..1 share, of the fullest engine; `None` when not exported.
    pub kv_usage: Option<f64>,
    /// The family `kv_usage` came from (for the evidence).
    pub kv_usage_name: Option<&'static str>,
    /// Counter values at this scrape, summed over the target's engines; a counter not exported is
    /// absent.
    pub counters: std::collections::BTreeMap<Counter, f64>,
    /// Names the counters came from.
    #[serde(skip)]
    pub counter_names: std::collections::BTreeMap<Counter, String>,
    /// `process_start_time_seconds`, when exported (a change is a restart).
    pub start_time: Option<f64>,
    /// Set by the watch loop when the target refused connections since the previous
    /// good scrape: nothing listened on its port, so this reading comes from a new
    /// process. It counts as a restart only where no start time tells better.
    pub restart_hint: Option<String>,
}

fn first_sum(m: &MetricsSnapshot, names: &[&'static str]) -> Option<(f64, &'static str)> {
    names.iter().find_map(|n| m.sum(n).map(|v| (v, *n)))
}

fn first_hist(m: &MetricsSnapshot, names: &[&'static str]) -> Option<((f64, f64), &'static str)> {
    names
        .iter()
        .find_map(|n| m.histogram_sum_count(n).map(|v| (v, *n)))
}

impl Reading {
    /// Reduces a scrape taken `t` seconds into the watch.
    pub fn from_snapshot(m: &MetricsSnapshot, t: f64, tool_error_counters: &[String]) -> Reading {
        let mut r = Reading {
            t,
            engine: m.engine(),
            ..Default::default()
        };
        if let Some((v, n)) = first_sum(m, WAITING) {
            r.waiting = Some(v);
            r.waiting_name = Some(n);
        }
        r.running = first_sum(m, RUNNING).map(|(v, _)| v);
        // Usage is a per-engine fraction: the fullest engine is the one that preempts first.
        if let Some((v, n)) = KV_USAGE.iter().find_map(|n| m.max(n).map(|v| (v, *n))) {
            r.kv_usage = Some(v);
            r.kv_usage_name = Some(n);
        }
        fn put(r: &mut Reading, c: Counter, v: f64, name: &str) {
            r.counters.insert(c, v);
            r.counter_names.insert(c, name.to_string());
        }
        if let Some((v, n)) = first_sum(m, CACHE_QUERIES) {
            put(&mut r, Counter::CacheQueries, v, n);
        }
        if let Some((v, n)) = first_sum(m, CACHE_HITS) {
            put(&mut r, Counter::CacheHits, v, n);
        }
        // llama.cpp counts computed prompt tokens and cached ones apart; a lookup is both.
        if let (Some(computed), Some(cached)) = (
            m.sum(names::PROMPT_TOKENS[2]),
            m.sum(LLAMACPP_PROMPT_TOKENS_CACHED),
        ) {
            put(
                &mut r,
                Counter::CacheQueries,
                computed + cached,
                "llamacpp:prompt_tokens_total + llamacpp:prompt_tokens_cached_total",
            );
            put(
                &mut r,
                Counter::CacheHits,
                cached,
                "llamacpp:prompt_tokens_cached_total",
            );
        }
        if let Some((v, n)) = first_sum(m, names::PROMPT_TOKENS) {
            put(&mut r, Counter::PromptTokens, v, n);
        }
        // SGLang's prompt_tokens_total are all prompt tokens; its cached_tokens are the hits.
        if m.engine() == Some(Engine::Sglang) && !r.counters.contains_key(&Counter::CacheQueries) {
            if let Some(v) = m.sum(SGLANG_PROMPT_TOKENS) {
                put(
                    &mut r,
                    Counter::CacheQueries,
                    v,
                    "sglang:prompt_tokens_total",
                );
            }
        }
        if let Some((v, n)) = first_sum(m, GENERATED_TOKENS) {
            // Named as exported (the family name drops the counter's `_total`).
            put(&mut r, Counter::GeneratedTokens, v, &format!("{n}_total"));
        }
        if let Some(((sum, count), n)) = first_hist(m, TTFT) {
            put(&mut r, Counter::TtftSum, sum, n);
            put(&mut r, Counter::TtftCount, count, n);
        }
        if let Some(((sum, count), n)) = first_hist(m, ITL) {
            put(&mut r, Counter::ItlSum, sum, n);
            put(&mut r, Counter::ItlCount, count, n);
        }
        if let Some(((_, count), n)) = first_hist(m, FINISHED_HIST) {
            put(&mut r, Counter::Finished, count, n);
        } else if let Some(v) = m.sum(FINISHED_COUNTER) {
            put(
                &mut r,
                Counter::Finished,
                v,
                &format!("{FINISHED_COUNTER}_total"),
            );
        }
        let mut tool_total = None;
        for name in tool_error_counters {
            let family = name.strip_suffix("_total").unwrap_or(name);
            if let Some(v) = m.sum(family) {
                *tool_total.get_or_insert(0.0) += v;
            }
        }
        if let Some(v) = tool_total {
            put(
                &mut r,
                Counter::ToolErrors,
                v,
                &tool_error_counters.join(" + "),
            );
        }
        r.start_time = m.sum("process_start_time_seconds");
        r
    }
}

/// True when `after` comes from a restarted server: its start time changed, any
/// counter went down, or (without start times to compare) the target refused
/// connections in between. The last matters for llama.cpp, which exports no start
/// time: a restarted server that has already redone as much work as the old one
/// shows counters that did not go down.
pub fn restarted(before: &Reading, after: &Reading) -> Option<String> {
    if let (Some(a), Some(b)) = (before.start_time, after.start_time) {
        if (a - b).abs() > 0.5 {
            return Some(format!(
                "process_start_time_seconds changed from {a:.0} to {b:.0}"
            ));
        }
    }
    for (c, b) in &after.counters {
        if let Some(a) = before.counters.get(c) {
            if b < a {
                let name = after
                    .counter_names
                    .get(c)
                    .cloned()
                    .unwrap_or_else(|| format!("{c:?}"));
                return Some(format!("{name} went down from {a} to {b}"));
            }
        }
    }
    if before.start_time.is_none() || after.start_time.is_none() {
        return after.restart_hint.clone();
    }
    None
}

/// Restarts between consecutive readings.
pub fn resets(readings: &[Reading]) -> Vec<Reset> {
    readings
        .windows(2)
        .filter_map(|w| restarted(&w[0], &w[1]).map(|what| Reset { t: w[1].t, what }))
        .collect()
}

/// How much a counter grew over the readings, Prometheus `increase()` style: at a
/// restart the counter starts again from zero, so the new value is the increase and a
/// drop is never read as a negative rate. `None` when fewer than two readings have it.
pub fn increase(readings: &[Reading], c: Counter) -> Option<f64> {
    let mut total = 0.0;
    let mut pairs = 0;
    for w in readings.windows(2) {
        let (Some(a), Some(b)) = (w[0].counters.get(&c), w[1].counters.get(&c)) else {
            continue;
        };
        pairs += 1;
        if restarted(&w[0], &w[1]).is_some() {
            total += b;
        } else {
            total += b - a;
        }
    }
    (pairs > 0).then_some(total)
}

/// The readings since the last restart (gauges before it describe another process).
pub fn since_last_restart(readings: &[Reading]) -> &[Reading] {
    let mut start = 0;
    for i in 1..readings.len() {
        if restarted(&readings[i - 1], &readings[i]).is_some() {
            start = i;
        }
    }
    &readings[start..]
}

/// Least-squares slope of `(t, y)` points, per second.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mt = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let var: f64 = points.iter().map(|p| (p.0 - mt).powi(2)).sum();
    if var <= 0.0 {
        return None;
    }
    let cov: f64 = points.iter().map(|p| (p.0 - mt) * (p.1 - my)).sum();
    Some(cov / var)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(t: f64, text: &str) -> Reading {
        Reading::from_snapshot(&MetricsSnapshot::parse(text).unwrap(), t, &[])
    }

    #[test]
    fn old_and_new_vllm_names_read_the_same() {
        let new = reading(
            0.0,
            "vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:prefix_cache_hits_total 10\nvllm:prefix_cache_queries_total 20\n",
        );
        let old = reading(
            0.0,
            "vllm:gpu_cache_usage_perc 0.5\nvllm:gpu_prefix_cache_hits_total 10\nvllm:gpu_prefix_cache_queries_total 20\n",
        );
        assert_eq!(new.kv_usage, Some(0.5));
        assert_eq!(old.kv_usage, Some(0.5));
        assert_eq!(old.counters, new.counters);
        assert_eq!(old.kv_usage_name, Some("vllm:gpu_cache_usage_perc"));
    }

    #[test]
    fn llamacpp_lookups_are_computed_plus_cached() {
        let r = reading(
            0.0,
            "llamacpp:prompt_tokens_total 30\nllamacpp:prompt_tokens_cached_total 335\nllamacpp:requests_deferred 2\nllamacpp:requests_processing 1\n",
        );
        assert_eq!(r.counters[&Counter::CacheQueries], 365.0);
        assert_eq!(r.counters[&Counter::CacheHits], 335.0);
        assert_eq!(r.waiting, Some(2.0));
        assert_eq!(r.running, Some(1.0));
    }

    #[test]
    fn increase_survives_a_restart() {
        let rs = vec![
            reading(0.0, "vllm:prompt_tokens_total 100\n"),
            reading(1.0, "vllm:prompt_tokens_total 150\n"),
            reading(2.0, "vllm:prompt_tokens_total 20\n"),
            reading(3.0, "vllm:prompt_tokens_total 30\n"),
        ];
        assert_eq!(
            increase(&rs, Counter::PromptTokens),
            Some(50.0 + 20.0 + 10.0)
        );
        let found = resets(&rs);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].t, 2.0);
        assert_eq!(since_last_restart(&rs).len(), 2);
    }

    #[test]
    fn a_refused_target_counts_as_a_restart_only_without_start_times() {
        let before = reading(0.0, "llamacpp:prompt_tokens_total 29\n");
        let mut after = reading(5.0, "llamacpp:prompt_tokens_total 29\n");
        assert_eq!(restarted(&before, &after), None);
        after.restart_hint = Some("refused connections".into());
        assert_eq!(
            restarted(&before, &after).as_deref(),
            Some("refused connections")
        );
        // The counter restarted from zero: the whole new value is the increase.
        let later = reading(6.0, "llamacpp:prompt_tokens_total 31\n");
        assert_eq!(
            increase(&[before.clone(), after, later], Counter::PromptTokens),
            Some(29.0 + 2.0)
        );
        // A falling counter is named rather than the hint.
        let mut fell = reading(6.0, "llamacpp:prompt_tokens_total 3\n");
        fell.restart_hint = Some("refused connections".into());
        assert!(restarted(&before, &fell)
            .unwrap()
            .contains("went down from 29 to 3"));
        // Equal start times say the same process answered again (a network outage).
        let same = "process_start_time_seconds 1700000000\nvllm:prompt_tokens_total 10\n";
        let b = reading(0.0, same);
        let mut a = reading(5.0, same);
        a.restart_hint = Some("refused connections".into());
        assert_eq!(restarted(&b, &a), None);
    }

    #[test]
    fn slope_of_a_rising_line() {
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), Some(2.0));
        assert_eq!(slope(&[(0.0, 1.0)]), None);
    }
}
