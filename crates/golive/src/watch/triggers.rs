//! The runbook's rollback triggers, judged over one window of readings and log lines
//! against the accepted run's baseline.

use crate::report::Baseline;
use crate::text::fmt_num;

use super::logscan::{LogHit, LogKind};
use super::signals::{self, Counter, Reading};
pub use crate::events::watch::{Evaluation, Firing, ProbeSample, Summary, Trigger};

/// What the change record must cover before a rollback (acceptance protocol).
pub const ROLLBACK_REMINDER: &str = "Rollback: the change record must cover image digest, driver, start parameters, topology and cache flag together; a rollback of the application alone does not undo a change that came with the host driver or the container.";

/// Tunable limits; the defaults are documented on the command line.
#[derive(Debug, Clone)]
pub struct Limits {
    /// OOM lines in one window that fire the OOM trigger.
    pub oom_min: usize,
    /// Growth of the mean queue length (last third minus first third of the window).
    pub queue_min_growth: f64,
    /// Relative tolerance: request rate "unchanged", cache ratio "below", latency "above".
    pub tolerance: f64,
    /// Seconds of queued or running work without a generated token that count as stalled.
    pub stall_after_s: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            oom_min: 1,
            queue_min_growth: 1.0,
            tolerance: 0.2,
            stall_after_s: 60.0,
        }
    }
}

/// At most `max` values spread over the series, for an evidence line.
pub(super) fn series_text(points: &[(f64, f64)], max: usize) -> String {
    let step = points.len().div_ceil(max).max(1);
    let mut parts: Vec<String> = points
        .iter()
        .step_by(step)
        .map(|(t, v)| format!("{}@{:.1}s", fmt_num(*v), t))
        .collect();
    if let Some(last) = points.last() {
        if !(points.len() - 1).is_multiple_of(step) {
            parts.push(format!("{}@{:.1}s", fmt_num(last.1), last.0));
        }
    }
    parts.join(", ")
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Requests arriving per second over `rs`: finished plus the growth of in-flight ones.
fn arrival_rate(rs: &[Reading]) -> Option<f64> {
    let (first, last) = (rs.first()?, rs.last()?);
    let dt = last.t - first.t;
    if dt <= 0.0 {
        return None;
    }
    let finished = signals::increase(rs, Counter::Finished)?;
    let inflight = |r: &Reading| r.waiting.unwrap_or(0.0) + r.running.unwrap_or(0.0);
    Some((finished + inflight(last) - inflight(first)) / dt)
}

/// Judges one window (metrics and log only).
pub fn evaluate(
    readings: &[Reading],
    hits: &[LogHit],
    baseline: &Baseline,
    limits: &Limits,
) -> Evaluation {
    evaluate_with_probes(readings, hits, &[], baseline, limits)
}

/// Judges one window, with the probe requests sent in it (`--probe-every-s`).
pub fn evaluate_with_probes(
    readings: &[Reading],
    hits: &[LogHit],
    probes: &[ProbeSample],
    baseline: &Baseline,
    limits: &Limits,
) -> Evaluation {
    let window_s = match (readings.first(), readings.last()) {
        (Some(a), Some(b)) => b.t - a.t,
        _ => 0.0,
    };
    let mut ev = Evaluation {
        window_s,
        samples: readings.len(),
        engine: readings.iter().rev().find_map(|r| r.engine),
        summary: Summary::default(),
        firing: Vec::new(),
        resets: signals::resets(readings),
        notes: Vec::new(),
        probe: probes.last().cloned(),
        rollback_owner: None,
    };
    summarize(readings, &mut ev.summary);
    judge_oom(readings, hits, baseline, limits, &mut ev);
    judge_queue(readings, baseline, limits, &mut ev);
    judge_capacity(readings, baseline, &mut ev);
    judge_driver(hits, &mut ev);
    judge_cache(readings, baseline, limits, &mut ev);
    judge_tool(readings, hits, &mut ev);
    super::stalled::judge(readings, probes, limits.stall_after_s, &mut ev);
    ev
}

fn ratio(readings: &[Reading], num: Counter, den: Counter) -> Option<(f64, f64, f64)> {
    let n = signals::increase(readings, num)?;
    let d = signals::increase(readings, den)?;
    (d > 0.0).then_some((n / d, n, d))
}

fn summarize(readings: &[Reading], s: &mut Summary) {
    let last = readings.last();
    s.waiting_last = last.and_then(|r| r.waiting);
    s.running_last = last.and_then(|r| r.running);
    s.kv_usage_max = readings.iter().filter_map(|r| r.kv_usage).reduce(f64::max);
    if let Some((r, _, q)) = ratio(readings, Counter::CacheHits, Counter::CacheQueries) {
        s.cache_hit_ratio = Some(r);
        s.cache_queries = Some(q);
    }
    s.ttft_mean_ms = ratio(readings, Counter::TtftSum, Counter::TtftCount).map(|r| r.0 * 1000.0);
    s.itl_mean_ms = ratio(readings, Counter::ItlSum, Counter::ItlCount).map(|r| r.0 * 1000.0);
    if let (Some(a), Some(b)) = (readings.first(), readings.last()) {
        if b.t > a.t {
            s.finished_rate_rps =
                signals::increase(readings, Counter::Finished).map(|n| n / (b.t - a.t));
        }
    }
}

fn log_evidence(hits: &[&LogHit], what: &str) -> Vec<String> {
    let mut ev = vec![format!(
        "{} {what} line(s) in the server log in this window; first cause: line {}: {}",
        hits.len(),
        hits[0].line,
        hits[0].text.trim()
    )];
    if hits.len() > 1 {
        let last = hits[hits.len() - 1];
        ev.push(format!("latest: line {}: {}", last.line, last.text.trim()));
    }
    ev
}

fn judge_oom(
    readings: &[Reading],
    hits: &[LogHit],
    baseline: &Baseline,
    limits: &Limits,
    ev: &mut Evaluation,
) {
    let ooms: Vec<&LogHit> = hits.iter().filter(|h| h.kind == LogKind::Oom).collect();
    if ooms.is_empty() || ooms.len() < limits.oom_min {
        if !ooms.is_empty() {
            ev.notes.push(format!(
                "{} OOM line(s), fewer than the {} that fire the trigger",
                ooms.len(),
                limits.oom_min
            ));
        }
        return;
    }
    let mut evidence = log_evidence(&ooms, "OOM");
    let peak_running = readings.iter().filter_map(|r| r.running).reduce(f64::max);
    match (peak_running, baseline.accepted_concurrency) {
        (Some(run), Some(acc)) if run <= acc as f64 => evidence.push(format!(
            "load: at most {} running requests, within the accepted concurrency {acc}",
            fmt_num(run)
        )),
        (Some(run), Some(acc)) => evidence.push(format!(
            "load: up to {} running requests, above the accepted concurrency {acc}: enforce the documented limits (rate limit, input size)",
            fmt_num(run)
        )),
        (Some(run), None) => evidence.push(format!(
            "load: at most {} running requests (no accepted concurrency in the baseline)",
            fmt_num(run)
        )),
        (None, _) => {}
    }
    ev.firing.push(Firing {
        trigger: Trigger::Oom,
        title: Trigger::Oom.title(),
        evidence,
    });
}

fn judge_queue(readings: &[Reading], baseline: &Baseline, limits: &Limits, ev: &mut Evaluation) {
    let rs = signals::since_last_restart(readings);
    let pts: Vec<(f64, f64)> = rs
        .iter()
        .filter_map(|r| r.waiting.map(|w| (r.t, w)))
        .collect();
    if pts.len() < 3 {
        if readings.iter().all(|r| r.waiting.is_none()) && !readings.is_empty() {
            ev.notes
                .push("queue length is not exported: queue growth not judged".into());
        }
        return;
    }
    let third = (pts.len() / 3).max(1);
    let head: Vec<f64> = pts[..third].iter().map(|p| p.1).collect();
    let tail: Vec<f64> = pts[pts.len() - third..].iter().map(|p| p.1).collect();
    let growth = mean(&tail) - mean(&head);
    let slope = signals::slope(&pts).unwrap_or(0.0);
    let last = pts[pts.len() - 1].1;
    let accepted_peak = baseline.waiting_max.unwrap_or(0.0);
    if !(growth >= limits.queue_min_growth && slope > 0.0 && last > accepted_peak) {
        return;
    }
    let name = rs
        .iter()
        .rev()
        .find_map(|r| r.waiting_name)
        .unwrap_or("waiting");
    let mut evidence = vec![
        format!(
            "{name} over {:.1} s: {}",
            pts[pts.len() - 1].0 - pts[0].0,
            series_text(&pts, 12)
        ),
        format!(
            "mean queue {} in the first third, {} in the last third ({:+.2} requests/s); accepted peak {}",
            fmt_num(mean(&head)),
            fmt_num(mean(&tail)),
            slope,
            baseline
                .waiting_max
                .map(fmt_num)
                .unwrap_or_else(|| "not in the baseline (0 assumed)".into())
        ),
    ];
    // The queue may grow because more traffic came: that is not this trigger.
    let mid = rs.len() / 2;
    let (first_half, second_half) = (&rs[..=mid], &rs[mid..]);
    match (arrival_rate(first_half), arrival_rate(second_half)) {
        (Some(a1), Some(a2)) => {
            let dt2 = second_half.last().map(|r| r.t).unwrap_or(0.0)
                - second_half.first().map(|r| r.t).unwrap_or(0.0);
            let unchanged = match baseline.request_rate_rps {
                Some(accepted) => a2 <= accepted * (1.0 + limits.tolerance),
                // One request of slack keeps a handful of requests from reading as a change.
                None => a2 * dt2 <= a1 * dt2 * (1.0 + limits.tolerance) + 1.0,
            };
            let rate_text = format!(
                "request rate {a1:.2} rps in the first half, {a2:.2} rps in the second half{}",
                baseline
                    .request_rate_rps
                    .map(|r| format!(", accepted {r:.2} rps"))
                    .unwrap_or_default()
            );
            if !unchanged {
                ev.notes.push(format!(
                    "queue grew ({}) but the {rate_text}: more traffic than accepted, not a regression; check rate limits",
                    series_text(&pts, 6)
                ));
                return;
            }
            evidence.push(format!("{rate_text}: unchanged"));
        }
        _ => evidence.push(
            "request rate: no finished-request counter on this engine; the load is taken as unchanged"
                .into(),
        ),
    }
    ev.firing.push(Firing {
        trigger: Trigger::QueueGrowth,
        title: Trigger::QueueGrowth.title(),
        evidence,
    });
}

/// The capacity line of the baseline: the live arrival rate above what one server held within
/// the objectives is a warning (a note), not a rollback trigger; the server is not worse, the
/// load is more than it was accepted for.
fn judge_capacity(readings: &[Reading], baseline: &Baseline, ev: &mut Evaluation) {
    let (Some(line), Some(rate)) = (
        baseline.capacity_rps,
        arrival_rate(signals::since_last_restart(readings)),
    ) else {
        return;
    };
    if rate > line {
        ev.notes.push(format!(
            "above the capacity line: requests arrive at {rate:.2} req/s, one server held {line:.2} req/s within the objectives in the accepted run; add replicas before the objectives break"
        ));
    }
}

fn judge_driver(hits: &[LogHit], ev: &mut Evaluation) {
    let found: Vec<&LogHit> = hits
        .iter()
        .filter(|h| h.kind == LogKind::DriverNccl)
        .collect();
    if found.is_empty() {
        return;
    }
    ev.firing.push(Firing {
        trigger: Trigger::DriverNccl,
        title: Trigger::DriverNccl.title(),
        evidence: log_evidence(&found, "driver/NCCL"),
    });
}

fn judge_cache(readings: &[Reading], baseline: &Baseline, limits: &Limits, ev: &mut Evaluation) {
    let Some((hit_ratio, hits, queries)) =
        ratio(readings, Counter::CacheHits, Counter::CacheQueries)
    else {
        if readings.len() >= 2 {
            ev.notes
                .push("no prefix-cache lookups in this window: cache regression not judged".into());
        }
        return;
    };
    let Some(accepted_ratio) = baseline.cache_hit_ratio else {
        ev.notes.push(format!(
            "cache hit ratio {hit_ratio:.3}; no accepted ratio in the baseline to compare with"
        ));
        return;
    };
    let low_limit = accepted_ratio * (1.0 - limits.tolerance);
    if hit_ratio >= low_limit {
        return;
    }
    // Prefill latency as clients see it: the mean time to first token.
    let Some((ttft_s, _, ttft_n)) = ratio(readings, Counter::TtftSum, Counter::TtftCount) else {
        ev.notes.push(format!(
            "cache hit ratio {hit_ratio:.3} is below {low_limit:.3} (accepted {accepted_ratio:.3}), but this engine exports no time-to-first-token histogram: prefill latency not judged"
        ));
        return;
    };
    let ttft_ms = ttft_s * 1000.0;
    let (rising, latency_text) = match baseline.ttft_p50_ms {
        Some(p50) => {
            let limit = p50 * (1.0 + limits.tolerance);
            (
                ttft_ms > limit,
                format!(
                    "mean TTFT {ttft_ms:.1} ms over {} requests, limit {limit:.1} ms (accepted p50 {p50:.1} ms)",
                    fmt_num(ttft_n)
                ),
            )
        }
        None => {
            // Without an accepted TTFT, compare the window's halves.
            let mid = readings.len() / 2;
            let first = ratio(&readings[..=mid], Counter::TtftSum, Counter::TtftCount);
            let second = ratio(&readings[mid..], Counter::TtftSum, Counter::TtftCount);
            match (first, second) {
                (Some(a), Some(b)) => (
                    b.0 > a.0 * (1.0 + limits.tolerance),
                    format!(
                        "mean TTFT {:.1} ms in the first half, {:.1} ms in the second (no accepted TTFT in the baseline)",
                        a.0 * 1000.0,
                        b.0 * 1000.0
                    ),
                ),
                _ => (false, "TTFT trend unknown".to_string()),
            }
        }
    };
    if !rising {
        ev.notes.push(format!(
            "cache hit ratio {hit_ratio:.3} is below {low_limit:.3}, but prefill latency does not rise ({latency_text})"
        ));
        return;
    }
    let name = readings
        .iter()
        .rev()
        .find_map(|r| r.counter_names.get(&Counter::CacheHits).cloned())
        .unwrap_or_default();
    ev.firing.push(Firing {
        trigger: Trigger::CacheRegression,
        title: Trigger::CacheRegression.title(),
        evidence: vec![
            format!(
                "cache hit ratio {hit_ratio:.3} ({} of {} prompt tokens, {name}) below {low_limit:.3} (accepted {accepted_ratio:.3})",
                fmt_num(hits),
                fmt_num(queries)
            ),
            latency_text,
        ],
    });
}

fn judge_tool(readings: &[Reading], hits: &[LogHit], ev: &mut Evaluation) {
    let found: Vec<&LogHit> = hits
        .iter()
        .filter(|h| h.kind == LogKind::ToolSchema)
        .collect();
    let mut evidence = Vec::new();
    if !found.is_empty() {
        evidence.extend(log_evidence(&found, "tool-call/schema"));
    }
    if let Some(n) = signals::increase(readings, Counter::ToolErrors) {
        if n > 0.0 {
            let name = readings
                .iter()
                .rev()
                .find_map(|r| r.counter_names.get(&Counter::ToolErrors).cloned())
                .unwrap_or_default();
            let pts: Vec<(f64, f64)> = readings
                .iter()
                .filter_map(|r| r.counters.get(&Counter::ToolErrors).map(|v| (r.t, *v)))
                .collect();
            evidence.push(format!(
                "{name} rose by {} in this window: {}",
                fmt_num(n),
                series_text(&pts, 8)
            ));
        }
    }
    if evidence.is_empty() {
        return;
    }
    ev.firing.push(Firing {
        trigger: Trigger::ToolSchema,
        title: Trigger::ToolSchema.title(),
        evidence,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsSnapshot;

    fn r(t: f64, text: &str) -> Reading {
        Reading::from_snapshot(&MetricsSnapshot::parse(text).unwrap(), t, &[])
    }

    fn vllm(
        waiting: f64,
        finished: f64,
        hits: f64,
        queries: f64,
        ttft_sum: f64,
        ttft_n: f64,
    ) -> String {
        format!(
            "vllm:num_requests_waiting{{engine=\"0\"}} {waiting}\nvllm:num_requests_running 4\n\
             vllm:e2e_request_latency_seconds_sum 1\nvllm:e2e_request_latency_seconds_count {finished}\n\
             vllm:prefix_cache_hits_total {hits}\nvllm:prefix_cache_queries_total {queries}\n\
             vllm:time_to_first_token_seconds_sum {ttft_sum}\nvllm:time_to_first_token_seconds_count {ttft_n}\n"
        )
    }

    #[test]
    fn queue_growth_fires_only_at_an_unchanged_rate() {
        // 1 request/s finishes while the queue grows: fires.
        let rs: Vec<Reading> = (0..7)
            .map(|i| r(i as f64, &vllm(i as f64, i as f64, 0.0, 0.0, 0.0, 0.0)))
            .collect();
        let ev = evaluate(&rs, &[], &Baseline::default(), &Limits::default());
        assert!(
            ev.firing.iter().any(|f| f.trigger == Trigger::QueueGrowth),
            "{ev:?}"
        );
        // Same queue, but the finished rate triples in the second half: more traffic, no trigger.
        let rs: Vec<Reading> = (0..7)
            .map(|i| {
                let finished = if i <= 3 {
                    i as f64
                } else {
                    3.0 + (i as f64 - 3.0) * 5.0
                };
                r(i as f64, &vllm(i as f64, finished, 0.0, 0.0, 0.0, 0.0))
            })
            .collect();
        let ev = evaluate(&rs, &[], &Baseline::default(), &Limits::default());
        assert!(ev.firing.is_empty(), "{:?}", ev.firing);
        assert!(ev.notes.iter().any(|n| n.contains("more traffic")));
    }

    #[test]
    fn a_rate_above_the_capacity_line_is_a_note_not_a_trigger() {
        // 5 requests/s finish, the queue is flat: above a line of 2 req/s, below one of 8.
        let rs: Vec<Reading> = (0..7)
            .map(|i| r(i as f64, &vllm(0.0, 5.0 * i as f64, 0.0, 0.0, 0.0, 0.0)))
            .collect();
        let line = |rps| Baseline {
            capacity_rps: Some(rps),
            ..Baseline::default()
        };
        let ev = evaluate(&rs, &[], &line(2.0), &Limits::default());
        assert!(ev.firing.is_empty(), "{:?}", ev.firing);
        let note = ev.notes.iter().find(|n| n.contains("capacity line"));
        assert!(
            note.is_some_and(|n| n.contains("5.00 req/s") && n.contains("2.00 req/s")),
            "{:?}",
            ev.notes
        );
        let ev = evaluate(&rs, &[], &line(8.0), &Limits::default());
        assert!(!ev.notes.iter().any(|n| n.contains("capacity line")));
    }

    #[test]
    fn a_queue_within_the_accepted_peak_is_quiet() {
        let rs: Vec<Reading> = (0..6)
            .map(|i| r(i as f64, &vllm(i as f64, i as f64, 0.0, 0.0, 0.0, 0.0)))
            .collect();
        let base = Baseline {
            waiting_max: Some(8.0),
            ..Default::default()
        };
        assert!(evaluate(&rs, &[], &base, &Limits::default())
            .firing
            .is_empty());
    }

    #[test]
    fn cache_regression_needs_low_hits_and_slow_prefill() {
        let base = Baseline {
            cache_hit_ratio: Some(0.8),
            ttft_p50_ms: Some(100.0),
            ..Default::default()
        };
        // 10% hits, mean TTFT 500 ms.
        let rs = vec![
            r(0.0, &vllm(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
            r(5.0, &vllm(0.0, 10.0, 100.0, 1000.0, 5.0, 10.0)),
        ];
        let ev = evaluate(&rs, &[], &base, &Limits::default());
        let f = ev
            .firing
            .iter()
            .find(|f| f.trigger == Trigger::CacheRegression)
            .expect("fires");
        assert!(f.evidence[0].contains("0.100"), "{:?}", f.evidence);
        // Low hits but fast prefill: a note, no trigger.
        let rs = vec![
            r(0.0, &vllm(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
            r(5.0, &vllm(0.0, 10.0, 100.0, 1000.0, 0.5, 10.0)),
        ];
        let ev = evaluate(&rs, &[], &base, &Limits::default());
        assert!(ev.firing.is_empty());
        assert!(ev.notes.iter().any(|n| n.contains("does not rise")));
    }

    #[test]
    fn oom_evidence_is_the_first_cause_and_the_load_against_the_accepted_one() {
        let hit = |line: u64, text: &str| LogHit {
            kind: LogKind::Oom,
            line,
            text: text.into(),
            source: "watch:cuda_oom".into(),
            t: 1.0,
        };
        let hits = vec![
            hit(
                7,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
            ),
            hit(
                19,
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
            ),
        ];
        let rs = vec![r(0.0, &vllm(0.0, 0.0, 0.0, 0.0, 0.0, 0.0))];
        let base = Baseline {
            accepted_concurrency: Some(8),
            ..Default::default()
        };
        let ev = evaluate(&rs, &hits, &base, &Limits::default());
        let f = &ev.firing[0];
        assert_eq!(f.trigger, Trigger::Oom);
        assert!(
            f.evidence[0].starts_with("2 OOM line(s)"),
            "{:?}",
            f.evidence
        );
        assert!(f.evidence[0].contains("line 7: torch.OutOfMemoryError"));
        assert!(f.evidence[1].contains("line 19"));
        assert!(
            f.evidence[2].contains("within the accepted concurrency 8"),
            "{:?}",
            f.evidence
        );
        // With --oom-min 3 two lines are a note, not a trigger.
        let strict = Limits {
            oom_min: 3,
            ..Default::default()
        };
        let ev = evaluate(&rs, &hits, &base, &strict);
        assert!(ev.firing.is_empty());
        assert!(ev.notes[0].contains("fewer than the 3"));
    }

    #[test]
    fn a_restart_is_no_cache_regression_and_no_queue_growth() {
        let base = Baseline {
            cache_hit_ratio: Some(0.5),
            ttft_p50_ms: Some(100.0),
            ..Default::default()
        };
        // Counters fall to zero at t=2 (restart); afterwards 60% hits at fast TTFT.
        let rs = vec![
            r(0.0, &vllm(2.0, 100.0, 5000.0, 10000.0, 10.0, 100.0)),
            r(1.0, &vllm(2.0, 110.0, 5600.0, 11000.0, 11.0, 110.0)),
            r(2.0, &vllm(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
            r(3.0, &vllm(0.0, 10.0, 600.0, 1000.0, 1.0, 10.0)),
        ];
        let ev = evaluate(&rs, &[], &base, &Limits::default());
        assert!(ev.firing.is_empty(), "{:?}", ev.firing);
        assert_eq!(ev.resets.len(), 1);
        assert_eq!(ev.summary.cache_hit_ratio, Some(1200.0 / 2000.0));
    }
}
