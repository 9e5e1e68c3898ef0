//! The capacity answer (issue 27): from the ramp's measured steps, what one replica holds
//! at the objectives, what binds it, how many replicas the target needs with headroom,
//! and a backtest of the interpolation the answer rests on.
//!
//! Per prompt length the ramp is a series of steps of rising concurrency. A step holds
//! when it passed (its objectives and errors); one replica's capacity is the best holding
//! step: its goodput (requests per second within every objective) for `--target-rate`, its
//! concurrency for `--target-concurrency`. The true boundary lies between that step and
//! the first failing one above it (the bracket), so the replica count is given for both
//! ends. The prompt length with the smallest capacity binds (the conservative answer).
//!
//! Backtest: each interior holding step is predicted from its two holding neighbours by
//! linear interpolation of goodput over concurrency, held out of its own prediction; the
//! error at the step nearest the capacity is reported, and above 15% (or with fewer than
//! three holding steps) the answer is `low confidence`.

use serde::Serialize;

use crate::report::Objectives;
use crate::report::{Check, CheckId, Impact, RampStep, Stage, Status};

/// What production must carry.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum TargetLoad {
    /// Requests per second of this mix.
    Rate(f64),
    /// Requests in flight.
    Concurrency(u32),
}

/// A held-out step, predicted from its neighbours: its goodput, and its p95 TTFT.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Backtest {
    pub step: String,
    /// Its goodput (report.json: `predicted`, `measured`, `error` at the backtest's top level).
    #[serde(flatten)]
    pub goodput: Prediction,
    /// The step's p95 TTFT predicted the same way (none where a step had no TTFT samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_p95_ms: Option<Prediction>,
}

/// One figure of a held-out step: predicted, measured, and the relative error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prediction {
    pub predicted: f64,
    pub measured: f64,
    pub error: f64,
}

impl Prediction {
    /// `b`'s value interpolated linearly (in concurrency) between `a` and `c`.
    fn between(a: (u32, f64), b: (u32, f64), c: (u32, f64)) -> Prediction {
        let along = f64::from(b.0 - a.0) / f64::from(c.0 - a.0);
        let predicted = a.1 + (c.1 - a.1) * along;
        Prediction {
            predicted,
            measured: b.1,
            error: (predicted - b.1).abs() / b.1,
        }
    }
}

impl Backtest {
    /// The larger of its errors (goodput, p95 TTFT).
    pub fn worst_error(&self) -> f64 {
        let g = self.goodput.error;
        self.ttft_p95_ms.map_or(g, |t| t.error.max(g))
    }
}

/// The backtest error above which the answer is low confidence.
pub const MAX_BACKTEST_ERROR: f64 = 0.15;

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityAnswer {
    pub target: TargetLoad,
    /// The kind of request whose capacity binds (`short`, `long`), and its longest prompt.
    pub kind: String,
    pub prompt_tokens: u32,
    /// One replica's capacity at the objectives (req/s, or concurrency).
    pub per_replica: f64,
    /// The holding step's goodput (req/s within the objectives), whatever the target's unit:
    /// the capacity line `watch` and `rules` hold the live rate against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_replica_rps: Option<f64>,
    /// Where the boundary lies: the holding step, and the first failing step above it
    /// (none: the ramp never failed, so the capacity is at least `per_replica`).
    pub bracket: (f64, Option<f64>),
    /// The concurrency of the first failing step above the capacity, if the ramp got there.
    pub failing_concurrency: Option<u32>,
    /// What failed first above the capacity.
    pub binding: String,
    pub headroom: f64,
    /// Replicas needed at `per_replica`, and at the bracket's upper end.
    pub replicas: u32,
    pub replicas_at_best: u32,
    /// Replicas under test (`--url`).
    pub replicas_now: u32,
    pub backtest: Option<Backtest>,
    pub low_confidence: bool,
    /// GPUs one replica uses (TP x PP x DP from the bundles), when known; the GPUs needed are
    /// `replicas` times it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus_per_replica: Option<u64>,
}

/// What the ramp measured on one kind of request (`short`, `long`).
struct Series<'a> {
    kind: &'a str,
    prompt_tokens: u32,
    steps: Vec<&'a RampStep>,
}

/// A step's kind, from its label (`4 x long (256 tokens context)`: `long`); the long
/// prompts grow with the step, so the length itself does not group them.
fn kind(s: &RampStep) -> &str {
    super::ramp::step_kind(&s.label)
}

fn series(steps: &[RampStep]) -> Vec<Series<'_>> {
    let mut out: Vec<Series> = Vec::new();
    for s in steps {
        match out.iter_mut().find(|x| x.kind == kind(s)) {
            Some(x) => {
                x.steps.push(s);
                x.prompt_tokens = x.prompt_tokens.max(s.prompt_tokens);
            }
            None => out.push(Series {
                kind: kind(s),
                prompt_tokens: s.prompt_tokens,
                steps: vec![s],
            }),
        }
    }
    for x in &mut out {
        x.steps.sort_by_key(|s| s.concurrency);
    }
    out
}

fn holds(s: &RampStep) -> bool {
    matches!(s.status, Some(Status::Pass | Status::Warn))
}

fn goodput(s: &RampStep) -> Option<f64> {
    s.goodput.as_ref().map(|g| g.requests_per_s)
}

/// The figure the target is measured in, for one step.
fn figure(s: &RampStep, target: TargetLoad) -> Option<f64> {
    match target {
        TargetLoad::Rate(_) => goodput(s),
        TargetLoad::Concurrency(_) => Some(f64::from(s.concurrency)),
    }
}

/// The capacity of one series: the best holding step's figure, the first failing
/// step's figure above it, and that step.
fn series_capacity<'a>(
    x: &Series<'a>,
    target: TargetLoad,
) -> Option<(f64, Option<f64>, &'a RampStep, Option<&'a RampStep>)> {
    let (i, best) = x
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| holds(s))
        .filter_map(|(i, s)| figure(s, target).map(|f| (i, f)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let fail = x.steps[i + 1..].iter().find(|s| !holds(s)).copied();
    // A failing step's all-request rate bounds the capacity from above.
    let upper = fail.and_then(|f| match target {
        TargetLoad::Rate(_) => f
            .goodput
            .as_ref()
            .filter(|g| g.slo_attainment > 0.0)
            .map(|g| g.requests_per_s / g.slo_attainment),
        TargetLoad::Concurrency(_) => Some(f64::from(f.concurrency)),
    });
    Some((best, upper, x.steps[i], fail))
}

/// What failed first in `s`, in words (its missed objectives, then its errors).
fn binding(s: Option<&RampStep>, slo: &Objectives) -> String {
    let Some(s) = s else {
        return "none: the ramp held at every step".into();
    };
    let mut missed = slo.missed(&s.ttft_ms, &s.itl_ms, &s.e2e_ms);
    // Named as the request sees them: first token, tokens, whole answer.
    missed.sort_by_key(|m| ["TTFT", "ITL", "E2E"].iter().position(|n| *n == m.name));
    let mut why: Vec<String> = missed
        .iter()
        .map(|m| format!("{} p95 {:.0} ms", m.name, m.p95))
        .collect();
    if s.errors > 0 {
        why.push(format!("{} errors", s.errors));
    }
    if s.preemptions.is_some_and(|p| p > 0.0) {
        why.push("preemptions".into());
    }
    if why.is_empty() {
        why.push("the step's judgement".into());
    }
    format!("{} at concurrency {}", why.join(", "), s.concurrency)
}

/// Each interior step predicted from its neighbours; the one nearest `near` (by
/// concurrency) is returned.
fn backtest(x: &Series<'_>, near: u32) -> Option<Backtest> {
    // Only holding steps: the answer rests on goodput rising with concurrency below the
    // boundary, and that is what a held-out step tests.
    let points: Vec<&RampStep> = x
        .steps
        .iter()
        .copied()
        .filter(|s| holds(s) && goodput(s).is_some())
        .collect();
    let at = |s: &RampStep, v: f64| (s.concurrency, v);
    let ttft = |s: &RampStep| (s.ttft_ms.count > 0 && s.ttft_ms.p95 > 0.0).then_some(s.ttft_ms.p95);
    points
        .windows(3)
        .filter(|w| goodput(w[1]).unwrap_or(0.0) > 0.0 && w[2].concurrency > w[0].concurrency)
        .map(|w| {
            let g = |s: &RampStep| at(s, goodput(s).unwrap_or(0.0));
            let ttft_p95_ms = match (ttft(w[0]), ttft(w[1]), ttft(w[2])) {
                (Some(a), Some(b), Some(c)) => {
                    Some(Prediction::between(at(w[0], a), at(w[1], b), at(w[2], c)))
                }
                _ => None,
            };
            let held_out = Backtest {
                step: w[1].label.clone(),
                goodput: Prediction::between(g(w[0]), g(w[1]), g(w[2])),
                ttft_p95_ms,
            };
            (w[1].concurrency.abs_diff(near), held_out)
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, b)| b)
}

/// The capacity answer, or `None` when no step held (or, for a rate, no goodput was
/// measured: the objectives are needed).
pub fn answer(
    steps: &[RampStep],
    target: TargetLoad,
    slo: &Objectives,
    headroom: f64,
    replicas_now: u32,
) -> Option<CapacityAnswer> {
    let all = series(steps);
    let (x, (best, upper, step, fail)) = all
        .iter()
        .filter_map(|x| series_capacity(x, target).map(|c| (x, c)))
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))?;
    if best <= 0.0 {
        return None;
    }
    let want = match target {
        TargetLoad::Rate(r) => r,
        TargetLoad::Concurrency(c) => f64::from(c),
    } * (1.0 + headroom);
    let count = |per: f64| (want / per).ceil().max(1.0) as u32;
    let backtest = backtest(x, step.concurrency);
    let low_confidence = backtest
        .as_ref()
        .is_none_or(|b| b.worst_error() > MAX_BACKTEST_ERROR);
    // The binding objective: where this series failed, else where the ramp first did.
    let other_fail = || {
        steps
            .iter()
            .filter(|s| s.status == Some(Status::Fail))
            .min_by_key(|s| s.concurrency)
    };
    Some(CapacityAnswer {
        target,
        kind: x.kind.to_string(),
        prompt_tokens: x.prompt_tokens,
        per_replica: best,
        per_replica_rps: goodput(step),
        bracket: (best, upper),
        failing_concurrency: fail.map(|f| f.concurrency),
        binding: binding(fail.or_else(other_fail), slo),
        headroom,
        replicas: count(best),
        replicas_at_best: count(upper.unwrap_or(best).max(best)),
        replicas_now,
        backtest,
        low_confidence,
        gpus_per_replica: None,
    })
}

impl CapacityAnswer {
    /// The answer with the GPUs one replica uses.
    pub fn with_gpus(mut self, gpus_per_replica: Option<u64>) -> Self {
        self.gpus_per_replica = gpus_per_replica;
        self
    }

    /// GPUs needed for the target: replicas x GPUs per replica.
    pub fn gpus(&self) -> Option<u64> {
        self.gpus_per_replica.map(|g| g * u64::from(self.replicas))
    }

    /// `target 12 req/s: one replica holds 3.1 req/s (boundary below 4.0), binding TTFT
    /// p95 2300 ms at concurrency 8; 5 replicas (4 at the boundary) with 20% headroom`.
    pub fn line(&self) -> String {
        let (unit, target) = match self.target {
            TargetLoad::Rate(r) => ("req/s", format!("{r:.2} req/s")),
            TargetLoad::Concurrency(c) => ("in flight", format!("{c} in flight")),
        };
        let bound = match (self.failing_concurrency, self.bracket.1) {
            (Some(c), Some(u)) => format!("the step at concurrency {c} fails, below {u:.2}"),
            (Some(c), None) => format!("the step at concurrency {c} fails"),
            _ => "no failing step of this kind above it: at least this".into(),
        };
        let mut line = format!(
            "target {target} ({} requests, up to {} prompt tokens): one replica holds {:.2} {unit} ({bound}); binding: {}; {} replica(s) ({} at the boundary) with {:.0}% headroom, {} under test",
            self.kind,
            self.prompt_tokens,
            self.per_replica,
            self.binding,
            self.replicas,
            self.replicas_at_best,
            self.headroom * 100.0,
            self.replicas_now
        );
        if let (Some(per), Some(all)) = (self.gpus_per_replica, self.gpus()) {
            line.push_str(&format!(
                " = {all} GPUs ({per} per replica: TP x PP x DP of the launch command)"
            ));
        }
        match &self.backtest {
            Some(b) => {
                line.push_str(&format!(
                    "; backtest {}: predicted {:.2}, measured {:.2} req/s, error {:.0}%",
                    b.step,
                    b.goodput.predicted,
                    b.goodput.measured,
                    b.goodput.error * 100.0
                ));
                if let Some(t) = b.ttft_p95_ms {
                    line.push_str(&format!(
                        "; TTFT p95 predicted {:.0}, measured {:.0} ms, error {:.0}%",
                        t.predicted,
                        t.measured,
                        t.error * 100.0
                    ));
                }
            }
            None => line.push_str("; no backtest (fewer than three steps with goodput)"),
        }
        if self.low_confidence {
            line.push_str(" — LOW CONFIDENCE");
        }
        line
    }

    /// The `capacity` check: fails on capacity (expand) when the replicas under test are
    /// fewer than needed; a low-confidence answer that holds is a warning.
    pub fn check(&self) -> Check {
        let mut c = Check::new(
            CheckId::Capacity,
            Stage::Ramp,
            Status::Pass,
            "replicas needed for the target at the objectives, from the ramp",
        );
        c.measurement = self.line();
        c.data = serde_json::to_value(self).unwrap_or_default();
        if self.replicas > self.replicas_now {
            c.status = Status::Fail;
            c.impact = Impact::Capacity;
            c.next_step = format!(
                "add capacity: {} replica(s) for the target ({} now)",
                self.replicas, self.replicas_now
            );
        } else if self.low_confidence {
            c.status = Status::Warn;
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Goodput, Percentiles};

    /// A replica of `slots` slots and `service_s` per request under closed-loop load:
    /// below the slots every request takes the service time, above them requests queue.
    fn step(c: u32, slots: u32, service_s: f64, e2e_slo_ms: f64) -> RampStep {
        let rate = f64::from(c.min(slots)) / service_s;
        let e2e = service_s * 1000.0 * f64::from(c.div_ceil(slots));
        let ok = e2e <= e2e_slo_ms;
        RampStep {
            label: format!("{c} x short (100 tokens)"),
            concurrency: c,
            prompt_tokens: 100,
            e2e_ms: Percentiles {
                count: u64::from(c) * 4,
                p95: e2e,
                ..Default::default()
            },
            // The first token comes after the queue and a 50 ms prefill.
            ttft_ms: Percentiles {
                count: u64::from(c) * 4,
                p95: e2e - service_s * 1000.0 + 50.0,
                ..Default::default()
            },
            status: Some(if ok { Status::Pass } else { Status::Fail }),
            goodput: Some(Goodput {
                slo_attainment: if ok { 1.0 } else { 0.0 },
                requests_per_s: if ok { rate } else { 0.0 },
                output_tokens_per_s: 0.0,
            }),
            ..Default::default()
        }
    }

    fn ramp(slots: u32) -> Vec<RampStep> {
        [1, 2, 4, 8, 16]
            .into_iter()
            .map(|c| step(c, slots, 0.2, 300.0))
            .collect()
    }

    #[test]
    fn a_known_replica_gives_the_replica_count_for_three_targets() {
        let slo = Objectives {
            e2e_p95_ms: Some(300.0),
            ..Default::default()
        };
        // 4 slots of 200 ms: 20 req/s per replica.
        let steps = ramp(4);
        for (target, replicas) in [(15.0, 1), (40.0, 3), (75.0, 5)] {
            let a = answer(&steps, TargetLoad::Rate(target), &slo, 0.2, 1).unwrap();
            assert_eq!(a.per_replica, 20.0);
            assert_eq!(a.replicas, replicas, "target {target}: {}", a.line());
        }
        let a = answer(&steps, TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        assert!(
            a.binding.contains("E2E p95 400 ms at concurrency 8"),
            "{}",
            a.binding
        );
        assert_eq!(a.check().status, Status::Fail);
        assert_eq!(a.check().impact, Impact::Capacity);
        let held = answer(&steps, TargetLoad::Rate(15.0), &slo, 0.2, 1).unwrap();
        assert_ne!(held.check().status, Status::Fail);
        // In concurrency: 4 in flight per replica.
        let a = answer(&steps, TargetLoad::Concurrency(10), &slo, 0.2, 2).unwrap();
        assert_eq!((a.per_replica, a.replicas), (4.0, 3));
    }

    #[test]
    fn gpus_are_the_replicas_times_the_layout_of_one() {
        let slo = Objectives {
            e2e_p95_ms: Some(1000.0),
            ..Default::default()
        };
        let a = answer(&ramp(4), TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        assert_eq!((a.gpus_per_replica, a.gpus()), (None, None));
        assert!(!a.line().contains("GPUs"), "{}", a.line());
        let a = a.with_gpus(Some(16));
        assert_eq!(a.gpus(), Some(u64::from(a.replicas) * 16));
        assert!(
            a.line()
                .contains(&format!("= {} GPUs (16 per replica", a.replicas * 16)),
            "{}",
            a.line()
        );
    }

    #[test]
    fn the_backtest_predicts_a_held_out_step_from_its_neighbours() {
        let slo = Objectives::default();
        // Goodput linear in concurrency below the slots: the interpolation is exact.
        let steps = ramp(16);
        let a = answer(&steps, TargetLoad::Rate(10.0), &slo, 0.0, 1).unwrap();
        let b = a.backtest.clone().unwrap();
        assert!(b.goodput.error < 1e-9, "{b:?}");
        // report.json keeps the goodput's figures at the backtest's top level.
        let json = serde_json::to_value(&b).unwrap();
        assert!(
            json["predicted"].is_number() && json["error"].is_number(),
            "{json}"
        );
        assert!(json["ttft_p95_ms"]["measured"].is_number(), "{json}");
        let t = b.ttft_p95_ms.expect("TTFT predicted too");
        assert!(t.error < 1e-9 && t.measured == 50.0, "{t:?}");
        assert!(!a.low_confidence);
        assert!(
            a.line().contains("TTFT p95 predicted 50, measured 50 ms"),
            "{}",
            a.line()
        );
        // Goodput on the line but the first token late at the held-out step: low confidence.
        let mut late = ramp(16);
        late[3].ttft_ms.p95 = 80.0;
        let a = answer(&late, TargetLoad::Rate(10.0), &slo, 0.0, 1).unwrap();
        let b = a.backtest.clone().unwrap();
        assert!(
            b.goodput.error < 1e-9 && b.ttft_p95_ms.unwrap().error > 0.3,
            "{b:?}"
        );
        assert!(a.low_confidence, "{}", a.line());
        // A knee between the neighbours: the interpolation misses, low confidence.
        let mut bent = ramp(16);
        bent[3].goodput.as_mut().unwrap().requests_per_s = 20.0;
        let a = answer(&bent, TargetLoad::Rate(10.0), &slo, 0.0, 1).unwrap();
        assert!(a.low_confidence, "{}", a.line());
        assert!(a.line().contains("LOW CONFIDENCE"));
    }

    #[test]
    fn without_goodput_a_rate_target_has_no_answer() {
        let mut steps = ramp(4);
        for s in &mut steps {
            s.goodput = None;
        }
        assert!(answer(
            &steps,
            TargetLoad::Rate(5.0),
            &Objectives::default(),
            0.2,
            1
        )
        .is_none());
    }
}
