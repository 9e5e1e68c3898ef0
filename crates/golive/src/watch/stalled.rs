//! The `stalled` trigger: an engine that is alive but generates nothing. Metrics-only
//! checks miss it when the gauges look idle (vLLM #46811: `/health` 200, running 0,
//! nothing generated), so it is judged two ways:
//!
//! - work is queued or running (`vllm:num_requests_running`/`waiting`, llama.cpp's
//!   `requests_processing`/`deferred`) and the generated-token counter does not
//!   advance for `--stall-after-s`;
//! - `/health` answers 2xx but the latest probe request (`--probe-every-s`) got no
//!   token within its deadline.
//!
//! An idle server (nothing running or queued, counter flat) does not fire.

use crate::events::watch::{Evaluation, Firing, ProbeSample, Trigger};
use crate::text::fmt_num;

use super::signals::{self, Counter, Reading};

/// Adds the `stalled` firing (or notes) to `ev`; `stall_after_s`: `--stall-after-s`.
pub(super) fn judge(
    readings: &[Reading],
    probes: &[ProbeSample],
    stall_after_s: f64,
    ev: &mut Evaluation,
) {
    let mut evidence = Vec::new();
    judge_counter(readings, stall_after_s, ev, &mut evidence);
    judge_probe(probes, ev, &mut evidence);
    if !evidence.is_empty() {
        ev.firing.push(Firing {
            trigger: Trigger::Stalled,
            title: Trigger::Stalled.title(),
            evidence,
        });
    }
}

fn busy(r: &Reading) -> f64 {
    r.running.unwrap_or(0.0) + r.waiting.unwrap_or(0.0)
}

/// Work in flight while the generated-token counter stands still.
fn judge_counter(
    readings: &[Reading],
    stall_after_s: f64,
    ev: &mut Evaluation,
    evidence: &mut Vec<String>,
) {
    let rs = signals::since_last_restart(readings);
    let Some(last) = rs.last() else {
        return;
    };
    let tokens = |r: &Reading| r.counters.get(&Counter::GeneratedTokens).copied();
    let Some(last_tokens) = tokens(last) else {
        if rs.iter().any(|r| busy(r) > 0.0) {
            ev.notes.push(
                "no generated-token counter on this engine: a stall under load is judged by the probe only (--probe-every-s)".into(),
            );
        }
        return;
    };
    // The trailing span in which work was in flight at every scrape and the counter
    // kept the value it has now.
    let from = rs
        .iter()
        .rposition(|r| !(busy(r) > 0.0 && tokens(r) == Some(last_tokens)))
        .map_or(0, |i| i + 1);
    if from >= rs.len() {
        return;
    }
    let flat_s = last.t - rs[from].t;
    if flat_s < stall_after_s {
        if flat_s > 0.0 {
            // With a window shorter than --stall-after-s this is all that can show.
            ev.notes.push(format!(
                "work in flight and no new token for {flat_s:.1} s (stalled after {} s)",
                fmt_num(stall_after_s)
            ));
        }
        return;
    }
    let name = last
        .counter_names
        .get(&Counter::GeneratedTokens)
        .cloned()
        .unwrap_or_default();
    evidence.push(format!(
        "{} running and {} waiting requests at every scrape for {flat_s:.1} s ({:.1} s .. {:.1} s) while {name} stayed at {} (limit --stall-after-s {})",
        fmt_num(last.running.unwrap_or(0.0)),
        fmt_num(last.waiting.unwrap_or(0.0)),
        rs[from].t,
        last.t,
        fmt_num(last_tokens),
        fmt_num(stall_after_s)
    ));
}

/// `/health` answers while the latest probe got no token.
fn judge_probe(probes: &[ProbeSample], ev: &mut Evaluation, evidence: &mut Vec<String>) {
    let Some(p) = probes.last() else {
        return;
    };
    let reason = p.probe.reason.map(|r| r.as_str()).unwrap_or("ok");
    if p.probe.ok {
        return;
    }
    if !p.probe.stalled() {
        ev.notes.push(format!(
            "probe at {:.1} s failed ({reason}: {}): not a stall",
            p.t, p.probe.detail
        ));
        return;
    }
    if !p.health_ok() {
        ev.notes.push(format!(
            "probe at {:.1} s got no token ({reason}) and /health did not answer 2xx ({}): down, not stalled",
            p.t,
            p.health_status
                .map(|s| format!("HTTP {s}"))
                .or_else(|| p.health_error.clone())
                .unwrap_or_default()
        ));
        return;
    }
    evidence.push(format!(
        "/health answered HTTP {} at {:.1} s, but the probe request got {reason} within {:.1} s: {}",
        p.health_status.unwrap_or(0),
        p.t,
        p.probe.deadline_s,
        p.probe.detail
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsSnapshot;
    use crate::probe::{ProbeOutcome, ProbeReason};

    /// The stalled judgement alone, on a fresh window.
    fn evaluate(readings: &[Reading], probes: &[ProbeSample], stall_after_s: f64) -> Evaluation {
        let mut ev = Evaluation::default();
        judge(readings, probes, stall_after_s, &mut ev);
        ev
    }

    fn r(t: f64, running: f64, waiting: f64, tokens: f64) -> Reading {
        let text = format!(
            "vllm:num_requests_running{{engine=\"0\"}} {running}\nvllm:num_requests_waiting{{engine=\"0\"}} {waiting}\nvllm:generation_tokens_total{{engine=\"0\"}} {tokens}\n"
        );
        Reading::from_snapshot(&MetricsSnapshot::parse(&text).unwrap(), t, &[])
    }

    fn stalled(ev: &Evaluation) -> bool {
        ev.firing.iter().any(|f| f.trigger == Trigger::Stalled)
    }

    #[test]
    fn busy_and_flat_fires_idle_and_advancing_do_not() {
        let judge = |rs: &[Reading]| evaluate(rs, &[], 3.0);
        // Tokens advance, then stop for 4 s with one request running.
        let rs: Vec<Reading> = (0..8)
            .map(|i| r(i as f64, 1.0, 0.0, (i.min(3) * 10) as f64))
            .collect();
        let ev = judge(&rs);
        assert!(stalled(&ev), "{ev:?}");
        let f = ev
            .firing
            .iter()
            .find(|f| f.trigger == Trigger::Stalled)
            .unwrap();
        assert!(f.evidence[0].contains("stayed at 30"), "{:?}", f.evidence);
        assert!(f.evidence[0].contains("for 4.0 s"), "{:?}", f.evidence);
        // Only queued (waiting) work counts too.
        let rs: Vec<Reading> = (0..5).map(|i| r(i as f64, 0.0, 2.0, 7.0)).collect();
        assert!(stalled(&judge(&rs)));
        // Idle: nothing running or queued, counter flat.
        let rs: Vec<Reading> = (0..8).map(|i| r(i as f64, 0.0, 0.0, 30.0)).collect();
        assert!(!stalled(&judge(&rs)));
        // Busy and advancing.
        let rs: Vec<Reading> = (0..8)
            .map(|i| r(i as f64, 4.0, 1.0, i as f64 * 5.0))
            .collect();
        assert!(!stalled(&judge(&rs)));
        // Flat for less than --stall-after-s: a note only.
        let rs: Vec<Reading> = (0..8)
            .map(|i| r(i as f64, 1.0, 0.0, (i.min(6) * 10) as f64))
            .collect();
        let ev = judge(&rs);
        assert!(!stalled(&ev));
        assert!(
            ev.notes
                .iter()
                .any(|n| n.contains("no new token for 1.0 s")),
            "{:?}",
            ev.notes
        );
    }

    fn sample(health: Option<u16>, reason: Option<ProbeReason>) -> ProbeSample {
        ProbeSample {
            t: 2.0,
            health_status: health,
            health_error: health.is_none().then(|| "GET /health: no answer".into()),
            probe: ProbeOutcome {
                url: "http://x".into(),
                model: Some("m".into()),
                ok: reason.is_none(),
                reason,
                http_status: Some(200),
                deadline_s: 2.0,
                ttft_ms: None,
                elapsed_ms: 2000.0,
                output_chunks: 0,
                detail: "no token within 2.0 s".into(),
            },
        }
    }

    #[test]
    fn a_probe_without_a_token_fires_only_while_health_answers() {
        let judge = |p: ProbeSample| evaluate(&[], &[p], 60.0);
        let ev = judge(sample(Some(200), Some(ProbeReason::NoFirstToken)));
        assert!(stalled(&ev), "{ev:?}");
        assert!(ev.firing[0].evidence[0].contains("/health answered HTTP 200"));
        assert!(stalled(&judge(sample(
            Some(200),
            Some(ProbeReason::StalledMidStream)
        ))));
        // Down (no /health) or answering with an error: not a stall.
        let down = judge(sample(None, Some(ProbeReason::NoFirstToken)));
        assert!(!stalled(&down));
        assert!(
            down.notes[0].contains("down, not stalled"),
            "{:?}",
            down.notes
        );
        assert!(!stalled(&judge(sample(
            Some(200),
            Some(ProbeReason::HttpStatus)
        ))));
        assert!(!stalled(&judge(sample(Some(200), None))));
    }
}
