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
//! Backtest: each interior holding step is predicted from its two holding neighbours, held
//! out of its own prediction (see [`Prediction::throughput`] and [`Prediction::linear`] for
//! the models); the error at the step nearest the capacity is reported, and above 15% (or
//! with fewer than three holding steps) the answer is `low confidence`.
//!
//! Repeats (`--capacity-repeat N`): the capacity step is measured N times in all; the answer
//! rests on the mean goodput of the N, with a 90% interval of that mean (see [`Interval`]).
//!
//! Rate steps (the boundary search in the offered rate, open loop): for a rate target a rate
//! step that held counts with its goodput, and the lowest rate that failed bounds the capacity
//! from above; a concurrency target and the backtest (Little's law, in concurrency) keep to
//! the closed-loop steps. A step the client could not send on schedule counts neither way.

use serde::Serialize;

use super::ramp::{rate_text, repeat_of};
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
    /// Label of the held-out step (`4 x short (200 tokens)`).
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
    /// From the neighbouring steps (goodput in req/s, TTFT in ms).
    pub predicted: f64,
    /// As measured at the held-out step, in the same unit.
    pub measured: f64,
    /// Relative error, |predicted - measured| / measured (0.15 = 15%).
    pub error: f64,
}

impl Prediction {
    fn of(predicted: f64, measured: f64) -> Prediction {
        Prediction {
            predicted,
            measured,
            error: (predicted - measured).abs() / measured,
        }
    }

    /// `b`'s throughput (requests per second at concurrency `b.0`) from its neighbours by
    /// Little's law: a closed loop of N requests in flight that completes X per second spends
    /// R = N / X in the system. R, not X, is interpolated linearly in N, and X = N / R.
    ///
    /// Why R: below saturation R is the service time (flat) and X grows with N; past it X
    /// flattens and R grows linearly with N (queueing: N / k requests ahead of each); a batching
    /// engine that slows each request as the batch grows has R = s + a N. R is linear in
    /// N in all three, so the prediction is exact there, where goodput itself bends (a
    /// straight line through a saturating curve misses its middle). Needs positive figures.
    fn throughput(a: (u32, f64), b: (u32, f64), c: (u32, f64)) -> Option<Prediction> {
        if a.1 <= 0.0 || b.1 <= 0.0 || c.1 <= 0.0 {
            return None;
        }
        let r = |(n, x): (u32, f64)| f64::from(n) / x;
        let along = f64::from(b.0 - a.0) / f64::from(c.0 - a.0);
        let r_b = r(a) + (r(c) - r(a)) * along;
        Some(Prediction::of(f64::from(b.0) / r_b, b.1))
    }

    /// `b`'s p95 TTFT from its neighbours, linear in the concurrency: the first token waits
    /// for the requests ahead of it, about N / k of them past k slots, so the wait grows in
    /// proportion to N and the prefill adds a constant; below the slots it is flat. (A power
    /// of N, straight in log-log, misses that constant: at 8 between 4 and 16 of 4 slots
    /// with a 1 s service and 50 ms prefill it predicts 390 ms for 1050.)
    fn linear(a: (u32, f64), b: (u32, f64), c: (u32, f64)) -> Prediction {
        let along = f64::from(b.0 - a.0) / f64::from(c.0 - a.0);
        Prediction::of(a.1 + (c.1 - a.1) * along, b.1)
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

/// The capacity step measured more than once (`--capacity-repeat`): the goodput of every
/// measurement and a 90% confidence interval of their mean, mean ± t(0.95, n - 1) · s / √n
/// (Student's t, s the sample standard deviation). The mean, not the spread, is what a
/// fleet of replicas holds, so the interval is that of the mean; with two measurements
/// t is 6.3, and the interval says how little two tell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    /// Goodput (req/s) of each measurement, the ramp's own first.
    pub samples: Vec<f64>,
    /// Mean goodput of the measurements (req/s).
    pub mean: f64,
    /// Low end of the 90% interval of the mean (req/s), never below 0.
    pub low: f64,
    /// High end of the 90% interval of the mean (req/s).
    pub high: f64,
    /// Measurements of the step that failed their objectives (any: low confidence).
    pub failed: u32,
    /// For a rate target, the replicas needed at the interval's high end (the fewest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas_at_high: Option<u32>,
    /// ... and at its low end (the most; none where the interval reaches zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas_at_low: Option<u32>,
}

/// t(0.95, df) for df = 1..=10; beyond, the value at 10 (conservative: t falls with df).
const T_95: [f64; 10] = [
    6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
];

impl Interval {
    /// The interval of `samples` (at least two), none for fewer.
    pub fn of(samples: &[f64], failed: u32) -> Option<Interval> {
        let n = samples.len();
        if n < 2 {
            return None;
        }
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = T_95[(n - 2).min(T_95.len() - 1)] * (var / n as f64).sqrt();
        Some(Interval {
            samples: samples.to_vec(),
            mean,
            low: (mean - half).max(0.0),
            high: mean + half,
            failed,
            replicas_at_high: None,
            replicas_at_low: None,
        })
    }

    /// `(90% interval 2.80-3.40 req/s over 3 measurements)`.
    fn text(&self) -> String {
        let failed = match self.failed {
            0 => String::new(),
            f => format!(", {f} failed"),
        };
        format!(
            "(90% interval {:.2}-{:.2} req/s over {} measurements{failed})",
            self.low,
            self.high,
            self.samples.len()
        )
    }
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityAnswer {
    /// The load production must carry (`--target-rate` or `--target-concurrency`).
    pub target: TargetLoad,
    /// The kind of request whose capacity binds (`short`, `long`), and its longest prompt.
    pub kind: String,
    /// Longest prompt (tokens) of that kind.
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
    /// The concurrency of the first failing step above the capacity, if the ramp got there
    /// (none where that step is a rate step).
    pub failing_concurrency: Option<u32>,
    /// The offered rate (req/s) of the failing step above the capacity, where it is a rate
    /// step of the boundary search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_rate: Option<f64>,
    /// What failed first above the capacity.
    pub binding: String,
    /// Spare capacity the replica count adds on top of the target (`--headroom`, 0.2 = 20%).
    pub headroom: f64,
    /// Replicas needed at `per_replica`, and at the bracket's upper end.
    pub replicas: u32,
    /// Replicas needed if one replica holds up to the bracket's upper end (the fewest).
    pub replicas_at_best: u32,
    /// Replicas under test (`--url`).
    pub replicas_now: u32,
    /// The held-out step nearest the capacity, predicted from its neighbours; `None` where no three
    /// steps of the binding kind rise in concurrency.
    pub backtest: Option<Backtest>,
    /// The capacity step's repeats (`--capacity-repeat`): its goodput's interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
    /// The answer is uncertain: the backtest is missing or off by more than [`MAX_BACKTEST_ERROR`],
    /// or a repeat of the capacity step missed its objectives.
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
    /// The closed-loop steps, in rising concurrency.
    steps: Vec<&'a RampStep>,
    /// The rate steps (open loop), in rising offered rate.
    rates: Vec<&'a RampStep>,
}

/// A step's kind, from its label (`4 x long (256 tokens context)`: `long`); the long
/// prompts grow with the step, so the length itself does not group them.
fn kind(s: &RampStep) -> &str {
    super::ramp::step_kind(&s.label)
}

/// The steps by kind, closed-loop ones in rising concurrency, rate steps in rising rate;
/// repeats of a step (`--capacity-repeat`) are left out (they are the capacity step's, see
/// [`again`]), and so are steps the client could not send on schedule.
fn series(steps: &[RampStep]) -> Vec<Series<'_>> {
    let mut out: Vec<Series> = Vec::new();
    let counted = steps
        .iter()
        .filter(|s| repeat_of(&s.label).is_none() && !s.client_limited);
    for s in counted {
        let i = match out.iter().position(|x| x.kind == kind(s)) {
            Some(i) => i,
            None => {
                out.push(Series {
                    kind: kind(s),
                    prompt_tokens: s.prompt_tokens,
                    steps: Vec::new(),
                    rates: Vec::new(),
                });
                out.len() - 1
            }
        };
        let x = &mut out[i];
        x.prompt_tokens = x.prompt_tokens.max(s.prompt_tokens);
        match s.rate {
            Some(_) => x.rates.push(s),
            None => x.steps.push(s),
        }
    }
    for x in &mut out {
        x.steps.sort_by_key(|s| s.concurrency);
        x.rates
            .sort_by(|a, b| a.rate.unwrap_or(0.0).total_cmp(&b.rate.unwrap_or(0.0)));
    }
    out
}

/// The repeats of `step` among `steps` (those the client sent on schedule).
fn again<'a>(steps: &'a [RampStep], step: &RampStep) -> Vec<&'a RampStep> {
    steps
        .iter()
        .filter(|s| repeat_of(&s.label).is_some_and(|(of, _)| of == step.label))
        .filter(|s| !s.client_limited)
        .collect()
}

fn holds(s: &RampStep) -> bool {
    matches!(s.status, Some(Status::Pass | Status::Warn))
}

fn goodput(s: &RampStep) -> Option<f64> {
    s.goodput.as_ref().map(|g| g.requests_per_s)
}

/// The figure the target is measured in, for one step (a rate step has no concurrency of
/// its own: its cap is not what it held).
fn figure(s: &RampStep, target: TargetLoad) -> Option<f64> {
    match target {
        TargetLoad::Rate(_) => goodput(s),
        TargetLoad::Concurrency(_) => s.rate.is_none().then_some(f64::from(s.concurrency)),
    }
}

/// One series' capacity.
struct Capacity<'a> {
    /// The best holding step's figure, and what the failing step above it bounds it by.
    best: f64,
    upper: Option<f64>,
    /// The best holding step.
    step: &'a RampStep,
    /// The failing step above it (a rate step where one failed above it).
    fail: Option<&'a RampStep>,
    /// The first closed-loop step that failed above the best closed-loop one.
    closed_fail: Option<&'a RampStep>,
}

/// The capacity of one series: the best holding step, closed-loop or (for a rate target) a
/// rate step; the failing step above it is the lowest rate that failed above it, else the
/// first closed-loop step that failed above the best closed-loop one.
fn series_capacity<'a>(x: &Series<'a>, target: TargetLoad) -> Option<Capacity<'a>> {
    let closed = closed_capacity(x, target);
    let open = match target {
        TargetLoad::Rate(_) => best_of(x.rates.iter().copied(), target),
        TargetLoad::Concurrency(_) => None,
    };
    let (best, step) = match (closed, open) {
        (Some((c, _, _)), Some((o, os))) if o > c => (o, os),
        (Some((c, cs, _)), _) => (c, cs),
        (None, Some((o, os))) => (o, os),
        (None, None) => return None,
    };
    let failed_rate = x
        .rates
        .iter()
        .find(|s| !holds(s) && s.rate.is_some_and(|r| r > best))
        .copied()
        .filter(|_| matches!(target, TargetLoad::Rate(_)));
    let closed_fail = closed.and_then(|c| c.2);
    let fail = failed_rate.or(closed_fail);
    Some(Capacity {
        best,
        upper: fail.and_then(|f| upper_bound(f, target)),
        step,
        fail,
        closed_fail,
    })
}

/// The best holding step among `steps` by the target's figure.
fn best_of<'a>(
    steps: impl Iterator<Item = &'a RampStep>,
    target: TargetLoad,
) -> Option<(f64, &'a RampStep)> {
    steps
        .filter(|s| holds(s))
        .filter_map(|s| figure(s, target).map(|f| (f, s)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The best holding closed-loop step, and the first closed-loop step above it that failed.
fn closed_capacity<'a>(
    x: &Series<'a>,
    target: TargetLoad,
) -> Option<(f64, &'a RampStep, Option<&'a RampStep>)> {
    let (best, step) = best_of(x.steps.iter().copied(), target)?;
    let fail = x
        .steps
        .iter()
        .skip_while(|s| !std::ptr::eq(**s, step))
        .find(|s| !holds(s))
        .copied();
    Some((best, step, fail))
}

/// What a failing step says of the capacity from above: a rate step its offered rate; a
/// closed-loop step its all-request rate (for a rate target) or its concurrency.
fn upper_bound(f: &RampStep, target: TargetLoad) -> Option<f64> {
    if let (Some(rate), TargetLoad::Rate(_)) = (f.rate, target) {
        return Some(rate);
    }
    match target {
        TargetLoad::Rate(_) => f
            .goodput
            .as_ref()
            .filter(|g| g.slo_attainment > 0.0)
            .map(|g| g.requests_per_s / g.slo_attainment),
        TargetLoad::Concurrency(_) => Some(f64::from(f.concurrency)),
    }
}

/// Where a step ran: `concurrency 8`, or `0.64 req/s offered` for a rate step.
fn at(s: &RampStep) -> String {
    match s.rate {
        Some(r) => format!("{} req/s offered", rate_text(r)),
        None => format!("concurrency {}", s.concurrency),
    }
}

/// The binding in words: where this series failed, else where the ramp first did; where the
/// series failed at a rate step, also where its closed loop failed (the objective it missed
/// in concurrency: a rate step may stop on its growing queue before one is missed).
fn binding_text(steps: &[RampStep], cap: &Capacity<'_>, slo: &Objectives) -> String {
    let other_fail = || {
        steps
            .iter()
            .filter(|s| s.status == Some(Status::Fail) && repeat_of(&s.label).is_none())
            .filter(|s| s.rate.is_none())
            .min_by_key(|s| s.concurrency)
    };
    let first = binding(cap.fail.or_else(other_fail), slo);
    match (cap.fail.and_then(|f| f.rate), cap.closed_fail) {
        (Some(_), Some(closed)) => {
            format!("{first}; in the closed loop {}", binding(Some(closed), slo))
        }
        _ => first,
    }
}

/// What failed first in `s`, in words (its missed objectives, then its errors, preemptions,
/// a growing queue).
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
    if s.saturation.is_some() {
        why.push("over-saturated (requests in flight and TTFT rising)".into());
    }
    if why.is_empty() {
        why.push("the step's judgement".into());
    }
    format!("{} at {}", why.join(", "), at(s))
}

/// A figure of a step over its measurements (itself and its repeats): their mean, none
/// where none has it.
fn mean_of(steps: &[RampStep], s: &RampStep, f: impl Fn(&RampStep) -> Option<f64>) -> Option<f64> {
    let all: Vec<f64> = std::iter::once(s)
        .chain(again(steps, s))
        .filter_map(f)
        .collect();
    (!all.is_empty()).then(|| all.iter().sum::<f64>() / all.len() as f64)
}

fn ttft_p95(s: &RampStep) -> Option<f64> {
    (s.ttft_ms.count > 0 && s.ttft_ms.p95 > 0.0).then_some(s.ttft_ms.p95)
}

/// Each interior step predicted from its neighbours (goodput by [`Prediction::throughput`],
/// p95 TTFT by [`Prediction::linear`]), each step's figures the mean of its measurements;
/// the one nearest `near` (by concurrency) is returned.
fn backtest(steps: &[RampStep], x: &Series<'_>, near: u32) -> Option<Backtest> {
    // Only holding steps: the answer rests on goodput rising with concurrency below the
    // boundary, and that is what a held-out step tests. Only closed-loop ones (the series'
    // `steps`): Little's law in concurrency says nothing of an open loop's rate steps.
    let points: Vec<(&RampStep, f64, Option<f64>)> = x
        .steps
        .iter()
        .filter(|s| holds(s))
        .filter_map(|s| {
            let g = mean_of(steps, s, goodput)?;
            Some((*s, g, mean_of(steps, s, ttft_p95)))
        })
        .collect();
    points
        .windows(3)
        .filter(|w| {
            w[0].0.concurrency < w[1].0.concurrency && w[1].0.concurrency < w[2].0.concurrency
        })
        .filter_map(|w| {
            let g = |i: usize| (w[i].0.concurrency, w[i].1);
            let t = |i: usize| w[i].2.map(|v| (w[i].0.concurrency, v));
            let ttft_p95_ms = match (t(0), t(1), t(2)) {
                (Some(a), Some(b), Some(c)) => Some(Prediction::linear(a, b, c)),
                _ => None,
            };
            let held_out = Backtest {
                step: w[1].0.label.clone(),
                goodput: Prediction::throughput(g(0), g(1), g(2))?,
                ttft_p95_ms,
            };
            Some((w[1].0.concurrency.abs_diff(near), held_out))
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, b)| b)
}

/// The kind whose capacity binds (the smallest), and its capacity.
fn binding_series<'s, 'a>(
    all: &'s [Series<'a>],
    target: TargetLoad,
) -> Option<(&'s Series<'a>, Capacity<'a>)> {
    all.iter()
        .filter_map(|x| series_capacity(x, target).map(|c| (x, c)))
        .min_by(|a, b| a.1.best.total_cmp(&b.1.best))
}

/// The step the capacity answer rests on: the best holding step of the binding kind (after
/// a boundary search, normally the bracket's holding end). `--capacity-repeat` measures it
/// again.
pub(crate) fn capacity_step(steps: &[RampStep], target: TargetLoad) -> Option<&RampStep> {
    let all = series(steps);
    binding_series(&all, target).map(|(_, c)| c.step)
}

/// The capacity step's goodput over its measurements (itself and its repeats): the
/// interval, and for a rate target the capacity becomes their mean.
fn measured_again(
    steps: &[RampStep],
    step: &RampStep,
    target: TargetLoad,
    headroom: f64,
) -> Option<Interval> {
    let repeats = again(steps, step);
    let failed = repeats.iter().filter(|s| !holds(s)).count() as u32;
    let samples: Vec<f64> = std::iter::once(step)
        .chain(repeats)
        .filter_map(goodput)
        .collect();
    let mut interval = Interval::of(&samples, failed)?;
    if let TargetLoad::Rate(rate) = target {
        let want = rate * (1.0 + headroom);
        let count = |per: f64| (per > 0.0).then(|| (want / per).ceil().max(1.0) as u32);
        interval.replicas_at_high = count(interval.high);
        interval.replicas_at_low = count(interval.low);
    }
    Some(interval)
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
    let (x, cap) = binding_series(&all, target)?;
    let Capacity {
        best: first,
        upper,
        step,
        fail,
        ..
    } = cap;
    let interval = measured_again(steps, step, target, headroom);
    let best = match (&interval, target) {
        (Some(i), TargetLoad::Rate(_)) => i.mean,
        _ => first,
    };
    if best <= 0.0 {
        return None;
    }
    let want = match target {
        TargetLoad::Rate(r) => r,
        TargetLoad::Concurrency(c) => f64::from(c),
    } * (1.0 + headroom);
    let count = |per: f64| (want / per).ceil().max(1.0) as u32;
    // Near the capacity step; for a rate step, the highest closed-loop step that held.
    let near = match step.rate {
        Some(_) => x
            .steps
            .iter()
            .filter(|s| holds(s))
            .map(|s| s.concurrency)
            .max(),
        None => Some(step.concurrency),
    };
    let backtest = backtest(steps, x, near.unwrap_or(0));
    let low_confidence = backtest
        .as_ref()
        .is_none_or(|b| b.worst_error() > MAX_BACKTEST_ERROR)
        || interval.as_ref().is_some_and(|i| i.failed > 0);
    Some(CapacityAnswer {
        target,
        kind: x.kind.to_string(),
        prompt_tokens: x.prompt_tokens,
        per_replica: best,
        per_replica_rps: interval.as_ref().map(|i| i.mean).or(goodput(step)),
        bracket: (best, upper),
        failing_concurrency: fail.filter(|f| f.rate.is_none()).map(|f| f.concurrency),
        failing_rate: fail.and_then(|f| f.rate),
        binding: binding_text(steps, &cap, slo),
        headroom,
        replicas: count(best),
        replicas_at_best: count(upper.unwrap_or(best).max(best)),
        replicas_now,
        backtest,
        interval,
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
        let bound = match (self.failing_rate, self.failing_concurrency, self.bracket.1) {
            (Some(r), _, _) => format!("the step at {} req/s offered fails", rate_text(r)),
            (None, Some(c), Some(u)) => format!("the step at concurrency {c} fails, below {u:.2}"),
            (None, Some(c), None) => format!("the step at concurrency {c} fails"),
            _ => "no failing step of this kind above it: at least this".into(),
        };
        let (spread, range) = self.interval_text();
        let mut line = format!(
            "target {target} ({} requests, up to {} prompt tokens): one replica holds {:.2} {unit}{spread} ({bound}); binding: {}; {} replica(s){range} ({} at the boundary) with {:.0}% headroom, {} under test",
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

    /// The repeats' interval after the capacity (` (90% interval 2.80-3.40 req/s over 3
    /// measurements)`, for a concurrency target of the goodput) and the replicas over it
    /// (` (4-6 over the interval)`); empty without repeats.
    fn interval_text(&self) -> (String, String) {
        let Some(i) = &self.interval else {
            return (String::new(), String::new());
        };
        let spread = match self.target {
            TargetLoad::Rate(_) => format!(" {}", i.text()),
            TargetLoad::Concurrency(_) => format!(" (goodput {:.2} req/s {})", i.mean, i.text()),
        };
        let range = match (i.replicas_at_high, i.replicas_at_low) {
            (Some(h), Some(l)) => format!(" ({h}-{l} over the interval)"),
            (Some(h), None) => format!(" ({h} or more over the interval)"),
            _ => String::new(),
        };
        (spread, range)
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

    /// A closed loop against `slots` slots whose service time grows with the batch
    /// (`s0 + a` per request running beside it): the goodput of concurrency `c`.
    fn batching(c: u32, slots: u32, s0: f64, a: f64) -> f64 {
        let running = c.min(slots);
        f64::from(running) / (s0 + a * f64::from(running))
    }

    #[test]
    fn littles_law_predicts_a_saturating_replica_where_a_straight_line_misses() {
        // 4 slots on a CPU: 1 s alone, 0.25 s more per request beside it (llama-server-like).
        let x = |c| (c, batching(c, 4, 1.0, 0.25));
        let linear = |a: (u32, f64), b: (u32, f64), c: (u32, f64)| {
            let p = a.1 + (c.1 - a.1) * f64::from(b.0 - a.0) / f64::from(c.0 - a.0);
            (p - b.1).abs() / b.1
        };
        // Below the slots R = s0 + a N is linear in N: the prediction is exact.
        let p = Prediction::throughput(x(1), x(2), x(4)).unwrap();
        assert!(p.error < 1e-9, "{p:?}");
        // Past them X is flat and R = N / X linear: exact again.
        let p = Prediction::throughput(x(8), x(16), x(32)).unwrap();
        assert!(p.error < 1e-9, "{p:?}");
        // At the knee (4 slots between 2 and 8) neither is exact; the straight line misses
        // by more than the 15% rule, R by less.
        let p = Prediction::throughput(x(2), x(4), x(8)).unwrap();
        let miss = linear(x(2), x(4), x(8));
        assert!(p.error < MAX_BACKTEST_ERROR, "{p:?}");
        assert!(
            miss > MAX_BACKTEST_ERROR && p.error < miss,
            "{miss} vs {p:?}"
        );
        // A server without batching slowdown (X = min(N, k) / s): the knee alone.
        let y = |c| (c, batching(c, 4, 0.2, 0.0));
        let p = Prediction::throughput(y(2), y(4), y(8)).unwrap();
        assert!(p.error < linear(y(2), y(4), y(8)), "{p:?}");
        assert!(Prediction::throughput(y(2), (4, 0.0), y(8)).is_none());
    }

    #[test]
    fn the_first_token_waits_in_proportion_to_the_queue() {
        // 4 slots of 1 s, 50 ms prefill: TTFT p95 at N is (ceil(N / 4) - 1) s + 50 ms.
        let t = |c: u32| (c, f64::from(c.div_ceil(4) - 1) * 1000.0 + 50.0);
        for (a, b, c) in [(1, 2, 4), (4, 8, 16), (8, 16, 32)] {
            let p = Prediction::linear(t(a), t(b), t(c));
            assert!(p.error < 1e-9, "{b} between {a} and {c}: {p:?}");
        }
        // The knee (8 between 2 and 16: flat, then growing) is missed, and shows.
        assert!(Prediction::linear(t(2), t(8), t(16)).error > MAX_BACKTEST_ERROR);
    }

    #[test]
    fn the_interval_of_repeats_is_the_t_interval_of_their_mean() {
        assert_eq!(Interval::of(&[3.0], 0), None);
        let i = Interval::of(&[2.8, 3.1, 3.4], 0).unwrap();
        // mean 3.1, s 0.3, t(0.95, 2) 2.920: 3.1 ± 2.920 x 0.3 / √3.
        let half = 2.920 * 0.3 / 3f64.sqrt();
        assert!((i.mean - 3.1).abs() < 1e-9, "{i:?}");
        assert!((i.low - (3.1 - half)).abs() < 1e-9 && (i.high - (3.1 + half)).abs() < 1e-9);
        // Equal measurements: no width; more measurements, a narrower t.
        let i = Interval::of(&[2.0; 10], 0).unwrap();
        assert_eq!((i.low, i.high), (2.0, 2.0));
        let wide = Interval::of(&[2.0, 4.0], 0).unwrap();
        assert_eq!(wide.low, 0.0, "clamped at zero: {wide:?}");
        let n4 = Interval::of(&[2.0, 4.0, 2.0, 4.0], 0).unwrap();
        assert!(n4.high - n4.low < wide.high - wide.low, "{n4:?}");
    }

    /// The ramp of [`ramp`] with the capacity step (concurrency 4 of 4 slots) measured
    /// again at these goodputs.
    fn repeated(goodputs: &[f64]) -> Vec<RampStep> {
        let mut steps = ramp(4);
        let capacity = steps[2].clone();
        for (n, g) in (2..).zip(goodputs) {
            let mut s = capacity.clone();
            s.label = super::super::ramp::repeat_label(&capacity.label, n);
            s.goodput.as_mut().unwrap().requests_per_s = *g;
            steps.push(s);
        }
        steps
    }

    #[test]
    fn repeats_give_the_capacity_an_interval_and_the_replicas_at_both_ends() {
        let slo = Objectives {
            e2e_p95_ms: Some(300.0),
            ..Default::default()
        };
        let steps = repeated(&[15.0, 25.0]);
        let step = capacity_step(&steps, TargetLoad::Rate(40.0)).unwrap();
        assert_eq!(step.label, steps[2].label);
        let a = answer(&steps, TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        let i = a.interval.clone().expect("an interval");
        assert_eq!(i.samples, vec![20.0, 15.0, 25.0]);
        assert_eq!((a.per_replica, a.per_replica_rps), (20.0, Some(20.0)));
        // 48 req/s wanted: 3 at the mean, ceil(48 / high) and ceil(48 / low) at the ends.
        let need = |per: f64| (48.0 / per).ceil() as u32;
        assert_eq!(a.replicas, 3);
        assert_eq!(i.replicas_at_high, Some(need(i.high)));
        assert_eq!(i.replicas_at_low, Some(need(i.low)));
        assert!(need(i.low) > need(i.high), "{i:?}");
        let line = a.line();
        assert!(line.contains("over 3 measurements"), "{line}");
        assert!(
            line.contains(&format!(
                "({}-{} over the interval)",
                need(i.high),
                need(i.low)
            )),
            "{line}"
        );
        // report.json carries it on the answer.
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["interval"]["samples"].as_array().unwrap().len(), 3);
        // The series and the backtest leave the repeats out.
        assert_eq!(
            a.backtest,
            answer(&ramp(4), TargetLoad::Rate(40.0), &slo, 0.2, 1)
                .unwrap()
                .backtest
        );
    }

    #[test]
    fn a_repeat_that_fails_makes_the_answer_low_confidence_but_not_the_binding() {
        let slo = Objectives {
            e2e_p95_ms: Some(300.0),
            ..Default::default()
        };
        let mut steps = repeated(&[19.0]);
        let last = steps.last_mut().unwrap();
        last.status = Some(Status::Fail);
        let a = answer(&steps, TargetLoad::Concurrency(10), &slo, 0.2, 1).unwrap();
        let i = a.interval.clone().unwrap();
        assert_eq!((i.failed, i.replicas_at_high), (1, None));
        assert!(a.low_confidence, "{}", a.line());
        assert!(a.line().contains("goodput 19.50 req/s"), "{}", a.line());
        // The ramp's first failing step still binds (concurrency 8), not the repeat at 4.
        assert!(a.binding.ends_with("at concurrency 8"), "{}", a.binding);
    }

    /// A rate step of the boundary search on the short requests of [`ramp`]: offered `rate`,
    /// holding with that goodput or failing the E2E objective.
    fn rate_step(rate: f64, ok: bool) -> RampStep {
        RampStep {
            label: format!("{rate} req/s x short (100 tokens), boundary search"),
            concurrency: 80,
            rate: Some(rate),
            prompt_tokens: 100,
            e2e_ms: Percentiles {
                count: 80,
                p95: if ok { 200.0 } else { 900.0 },
                ..Default::default()
            },
            status: Some(if ok { Status::Pass } else { Status::Fail }),
            goodput: Some(Goodput {
                slo_attainment: if ok { 1.0 } else { 0.3 },
                requests_per_s: if ok { rate } else { 0.3 * rate },
                output_tokens_per_s: 0.0,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_holding_rate_step_is_the_capacity_and_the_lowest_failing_rate_its_bound() {
        let slo = Objectives {
            e2e_p95_ms: Some(300.0),
            ..Default::default()
        };
        // 4 in flight hold 20 req/s; the rate search held 21 and failed 22.5 and 24.
        let mut steps = ramp(4);
        let closed_only = answer(&steps, TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        steps.extend([
            rate_step(21.0, true),
            rate_step(24.0, false),
            rate_step(22.5, false),
        ]);
        let a = answer(&steps, TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        assert_eq!(
            (a.per_replica, a.bracket),
            (21.0, (21.0, Some(22.5))),
            "{}",
            a.line()
        );
        assert_eq!((a.failing_rate, a.failing_concurrency), (Some(22.5), None));
        assert_eq!(a.replicas, 3, "48 / 21: {}", a.line());
        assert_eq!(a.replicas_at_best, 3, "48 / 22.5: {}", a.line());
        assert!(
            a.line().contains("the step at 22.5 req/s offered fails"),
            "{}",
            a.line()
        );
        // The rate that failed binds, and the objective the closed loop missed is named.
        assert_eq!(
            a.binding,
            "E2E p95 900 ms at 22.5 req/s offered; in the closed loop E2E p95 400 ms at concurrency 8"
        );
        // A rate step stopped on its growing queue before it missed an objective says so.
        let mut stopped = steps.clone();
        let s = stopped.iter_mut().find(|s| s.rate == Some(22.5)).unwrap();
        s.e2e_ms.p95 = 250.0;
        s.saturation = Some(crate::load::saturation::Saturation {
            at_s: 1.0,
            window_s: 0.5,
            in_flight_slope: 4.0,
            in_flight_se: 0.5,
            ttft_slope_ms: 80.0,
            ttft_se_ms: 5.0,
            in_flight_mean: 5.0,
            ttft_mean_ms: 220.0,
        });
        let b = answer(&stopped, TargetLoad::Rate(40.0), &slo, 0.2, 1)
            .unwrap()
            .binding;
        assert!(
            b.starts_with("over-saturated (requests in flight and TTFT rising) at 22.5 req/s"),
            "{b}"
        );
        assert_eq!(
            capacity_step(&steps, TargetLoad::Rate(40.0)).unwrap().rate,
            Some(21.0)
        );
        // The backtest keeps to the closed loop: the same as without the rate steps.
        assert!(a.backtest.is_some());
        assert_eq!(a.backtest, closed_only.backtest);
        // In concurrency the rate steps say nothing: 4 in flight, the step at 8 fails.
        let c = answer(&steps, TargetLoad::Concurrency(10), &slo, 0.2, 1).unwrap();
        assert_eq!(
            (c.per_replica, c.failing_concurrency, c.failing_rate),
            (4.0, Some(8), None)
        );
        // A rate step the client could not send on schedule counts neither way.
        let mut late = rate_step(30.0, true);
        late.client_limited = true;
        steps.push(late);
        let a = answer(&steps, TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        assert_eq!(a.per_replica, 21.0, "{}", a.line());
        // The first rate probe failing: the closed loop's best step, the rate bounds it.
        let mut steps = ramp(4);
        steps.push(rate_step(22.0, false));
        let a = answer(&steps, TargetLoad::Rate(40.0), &slo, 0.2, 1).unwrap();
        assert_eq!(
            (a.per_replica, a.bracket.1),
            (20.0, Some(22.0)),
            "{}",
            a.line()
        );
        assert_eq!(
            capacity_step(&steps, TargetLoad::Rate(40.0))
                .unwrap()
                .concurrency,
            4
        );
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
