//! `golive watch --prometheus`: the fleet as a Prometheus server has it. Each
//! replica's series over the window become the same [`Reading`]s a scrape gives, and
//! [`triggers::evaluate`] judges them per replica. Across replicas two more findings:
//!
//! - **imbalance**: one replica's mean queue, peak KV usage or mean TTFT is more than
//!   `imbalance_factor` times the median of the others, and above it by a floor (2
//!   requests, 20 KV points, 100 ms), so idle replicas at 0 against 1 never read as
//!   "far above";
//! - **absent**: a replica whose `up` is 0 or whose series stopped, or a family the
//!   replica's engine always exports that is missing: reported, never read as quiet.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::events::{Event, Events};
use crate::metrics::{names, Engine, MetricsSnapshot};
use crate::report::{Baseline, Report};

use super::prometheus::{selector_matchers, with_matchers, PrometheusApi, Series};
use super::signals::Reading;
use super::triggers::{self, Limits};
use super::WatchEnd;
pub use crate::events::watch::{FleetEvaluation, FleetFiring, ReplicaWindow};

/// What `golive watch --prometheus` queries and how it judges the fleet (its CLI flags).
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Base URL of the Prometheus server.
    pub prometheus: String,
    /// Label matchers that pick the serving targets, e.g. `{job="vllm"}`.
    pub selector: String,
    /// The label that names a replica.
    pub replica_label: String,
    /// The accepted run's report.json (or its directory): thresholds come from its baseline;
    /// `None`: an empty baseline, so triggers that need an accepted figure stay quiet.
    pub baseline: Option<PathBuf>,
    /// Time between evaluations (a continuous watch).
    pub interval: Duration,
    /// The span each replica's series are queried over and judged.
    pub window: Duration,
    /// Evaluate one window and exit (for cron).
    pub once: bool,
    /// Stop a continuous watch after this long; `None`: run until a finding or a signal.
    pub duration: Option<Duration>,
    /// Thresholds of the per-replica rollback triggers.
    pub limits: Limits,
    /// "Far above the median of the others": this many times it (and above the floor).
    pub imbalance_factor: f64,
    /// Counters of tool-call or schema failures (`--tool-error-counter`); any increase fires.
    pub tool_error_counters: Vec<String>,
    /// Connection settings for the Prometheus server (API key, TLS, request timeout).
    pub target: crate::target::TargetOptions,
}

/// Imbalance floors: how far above the median of the others counts at least.
const QUEUE_FLOOR: f64 = 2.0;
const KV_FLOOR: f64 = 0.2;
const TTFT_FLOOR_MS: f64 = 100.0;

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// The step of the range queries: about 60 points per window, at least 1 s.
fn step_for(window: Duration) -> Duration {
    (window / 60).max(Duration::from_secs(1))
}

/// Runs the fleet watch until a finding, `once`/`duration`, or a signal.
pub async fn run(opts: &FleetOptions, events: &Events) -> crate::Result<WatchEnd> {
    crate::error::ensure_input!(!opts.interval.is_zero(), "--interval must be above zero");
    crate::error::ensure_input!(
        opts.imbalance_factor >= 1.0,
        "--imbalance-factor must be at least 1"
    );
    crate::error::ensure_input!(
        !opts.replica_label.is_empty(),
        "--replica-label must not be empty"
    );
    let matchers = selector_matchers(&opts.selector)?;
    let baseline = match &opts.baseline {
        Some(p) => Report::load(p)?.baseline,
        None => Baseline::default(),
    };
    let target = crate::target::Target::new(&opts.prometheus, &opts.target)?;
    let api = PrometheusApi::new(
        target.http_client()?,
        &opts.prometheus,
        opts.target.request_timeout.min(Duration::from_secs(30)),
    )?;
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt()).map_err(crate::error::internal)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(crate::error::internal)?;
    let start = Instant::now();
    let mut last_status = f64::NEG_INFINITY;
    let mut ever = false;
    loop {
        let judged = tokio::select! {
            r = evaluate_fleet(&api, opts, &matchers, &baseline) => Some(r),
            _ = interrupt.recv() => None,
            _ = terminate.recv() => None,
        };
        let Some(judged) = judged else {
            return Ok(if ever {
                WatchEnd::Quiet
            } else {
                WatchEnd::Unreachable
            });
        };
        let ev = match judged {
            Ok(ev) => ev,
            Err(e) => {
                events.emit(Event::Unreachable(format!("Prometheus: {e:#}")));
                return Ok(WatchEnd::Unreachable);
            }
        };
        ever = true;
        let t = start.elapsed().as_secs_f64();
        let fired = !ev.firing.is_empty();
        if fired || opts.once || t - last_status >= opts.window.as_secs_f64() {
            last_status = t;
            events.emit(Event::FleetEvaluated(Box::new(ev)));
        }
        // A reporter that could not report (stdout on a full disk) ends the watch.
        events.check()?;
        if fired {
            return Ok(WatchEnd::Fired);
        }
        if opts.once || opts.duration.is_some_and(|d| start.elapsed() >= d) {
            return Ok(WatchEnd::Quiet);
        }
        let stop = tokio::select! {
            _ = tokio::time::sleep(opts.interval) => false,
            _ = interrupt.recv() => true,
            _ = terminate.recv() => true,
        };
        if stop {
            return Ok(WatchEnd::Quiet);
        }
    }
}

/// The families watch reads: every engine family except bucket and `_created`
/// series (the triggers use `_sum`/`_count`), and the process start time.
const ENGINE_FAMILIES: &str = r#"__name__=~"(vllm|sglang|llamacpp):.+|process_start_time_seconds",__name__!~".+_(bucket|created)""#;

/// One window: two range queries, then the per-replica and cross-replica judgement.
pub async fn evaluate_fleet(
    api: &PrometheusApi,
    opts: &FleetOptions,
    matchers: &str,
    baseline: &Baseline,
) -> anyhow::Result<FleetEvaluation> {
    let end = now_unix();
    let start = end - opts.window.as_secs_f64();
    let step = step_for(opts.window);
    let up = api
        .query_range(
            &format!("up{}", with_matchers(matchers, "")),
            start,
            end,
            step,
        )
        .await?;
    let series = api
        .query_range(&with_matchers(matchers, ENGINE_FAMILIES), start, end, step)
        .await?;
    Ok(judge(opts, baseline, &up, &series, start, end, step))
}

/// The cross-replica judgement over already-fetched series (pure, for tests).
pub fn judge(
    opts: &FleetOptions,
    baseline: &Baseline,
    up: &[Series],
    series: &[Series],
    start: f64,
    end: f64,
    step: Duration,
) -> FleetEvaluation {
    let label = &opts.replica_label;
    let step_s = step.as_secs_f64();
    let mut ev = FleetEvaluation {
        prometheus: opts.prometheus.clone(),
        selector: opts.selector.clone(),
        replica_label: label.clone(),
        window_s: end - start,
        step_s,
        replicas: Vec::new(),
        firing: Vec::new(),
        notes: Vec::new(),
    };
    let (pages, unlabelled) = pages_by_replica(series, label);
    if unlabelled > 0 {
        ev.notes.push(format!(
            "{unlabelled} series have no `{label}` label and are not counted (set --replica-label)"
        ));
    }
    let up_last = latest_up(up, label);
    if up_last.is_empty() && pages.is_empty() {
        ev.firing.push(FleetFiring {
            kind: "absent".into(),
            replica: "(all)".into(),
            title: "no replica matches the selector".into(),
            evidence: vec![format!(
                "neither up{} nor engine series over the last {:.0} s: wrong --selector, or every replica is gone",
                if opts.selector.is_empty() { "" } else { &opts.selector },
                end - start
            )],
        });
        return ev;
    }
    let window = Window {
        start,
        end,
        fresh: end - 2.0 * step_s - 1.0,
    };
    let replicas: BTreeSet<&String> = up_last.keys().chain(pages.keys()).collect();
    for replica in replicas {
        let page = pages.get(replica);
        let up = up_last.get(replica).copied();
        judge_replica(&mut ev, opts, baseline, replica, page, up, &window);
    }
    judge_imbalance(&mut ev, opts.imbalance_factor);
    ev
}

/// The window's bounds (seconds), and the time after which a series still counts as current.
struct Window {
    start: f64,
    end: f64,
    fresh: f64,
}

/// One replica's page at each step: replica -> step (ms) -> exposition lines, and the number of
/// series without the replica label.
fn pages_by_replica(
    series: &[Series],
    label: &str,
) -> (BTreeMap<String, BTreeMap<i64, String>>, usize) {
    let mut pages: BTreeMap<String, BTreeMap<i64, String>> = BTreeMap::new();
    let mut unlabelled = 0;
    for s in series {
        let Some(replica) = s.labels.get(label) else {
            unlabelled += 1;
            continue;
        };
        let name = s.labels.get("__name__").cloned().unwrap_or_default();
        let page = pages.entry(replica.clone()).or_default();
        for (t, v) in &s.points {
            // Millisecond keys: the same step instant from every series.
            let line = page.entry((t * 1000.0).round() as i64).or_default();
            line.push_str(&format!("{name} {v}\n"));
        }
    }
    (pages, unlabelled)
}

/// Each replica's latest `up` sample: (t, value).
fn latest_up(up: &[Series], label: &str) -> BTreeMap<String, (f64, f64)> {
    let mut up_last: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for s in up {
        if let (Some(r), Some(&(t, v))) = (s.labels.get(label), s.points.last()) {
            let e = up_last.entry(r.clone()).or_insert((t, v));
            if t >= e.0 {
                *e = (t, v);
            }
        }
    }
    up_last
}

/// One replica over the window: its triggers, whether it is absent (and why), the families its
/// engine always exports that are missing, and its window's row.
fn judge_replica(
    ev: &mut FleetEvaluation,
    opts: &FleetOptions,
    baseline: &Baseline,
    replica: &str,
    page: Option<&BTreeMap<i64, String>>,
    up: Option<(f64, f64)>,
    w: &Window,
) {
    let readings: Vec<Reading> = page
        .into_iter()
        .flatten()
        .filter_map(|(t_ms, text)| {
            let m = MetricsSnapshot::parse(text).ok()?;
            let t = *t_ms as f64 / 1000.0 - w.start;
            Some(Reading::from_snapshot(&m, t, &opts.tool_error_counters))
        })
        .collect();
    let evaluation = triggers::evaluate(&readings, &[], baseline, &opts.limits);
    let last_t = page
        .and_then(|p| p.keys().next_back())
        .map(|t| *t as f64 / 1000.0);
    let absent = absence(up, last_t, w, &opts.selector);
    if absent.is_empty() {
        missing_families(ev, replica, &readings, page);
    }
    let is_absent = !absent.is_empty();
    if is_absent {
        ev.firing.push(FleetFiring {
            kind: "absent".into(),
            replica: replica.to_string(),
            title: "replica absent".into(),
            evidence: absent,
        });
    }
    for f in &evaluation.firing {
        ev.firing.push(FleetFiring {
            kind: f.trigger.id().to_string(),
            replica: replica.to_string(),
            title: f.title.to_string(),
            evidence: f.evidence.clone(),
        });
    }
    let waits: Vec<f64> = readings.iter().filter_map(|r| r.waiting).collect();
    ev.replicas.push(ReplicaWindow {
        replica: replica.to_string(),
        up: up.map(|u| u.1),
        absent: is_absent,
        queue_mean: (!waits.is_empty()).then(|| waits.iter().sum::<f64>() / waits.len() as f64),
        evaluation,
    });
}

/// Why a replica counts as absent: Prometheus cannot scrape it, its `up` or engine series
/// ended before the window did, or it has none. Empty: present.
fn absence(up: Option<(f64, f64)>, last_t: Option<f64>, w: &Window, selector: &str) -> Vec<String> {
    let mut absent = Vec::new();
    match up {
        Some((t, v)) if v < 1.0 => absent.push(format!(
            "up == {v} in the latest scrape ({} s before the end of the window): Prometheus cannot scrape it",
            fmt_ago(w.end - t)
        )),
        Some((t, _)) if t < w.fresh => absent.push(format!(
            "its up series ended {} s before the end of the window (gone from the targets)",
            fmt_ago(w.end - t)
        )),
        None => absent.push(format!("no up series for it (selector {selector})")),
        _ => {}
    }
    match last_t {
        None => absent.push("it exports no engine series in the window".into()),
        Some(t) if t < w.fresh && absent.is_empty() => absent.push(format!(
            "its engine series stopped {} s before the end of the window",
            fmt_ago(w.end - t)
        )),
        _ => {}
    }
    absent
}

/// Families its engine always exports, missing from a present replica's latest reading: a
/// missing family reads as absent, not as quiet.
fn missing_families(
    ev: &mut FleetEvaluation,
    replica: &str,
    readings: &[Reading],
    page: Option<&BTreeMap<i64, String>>,
) {
    let (Some(engine), Some(text)) = (
        readings.iter().rev().find_map(|r| r.engine),
        page.and_then(|p| p.values().next_back()),
    ) else {
        return;
    };
    let Ok(m) = MetricsSnapshot::parse(text) else {
        return;
    };
    for name in names::required(engine) {
        let alternatives = names::role_of(name).map(|r| r.1).unwrap_or(&[]);
        if !alternatives.iter().any(|n| m.has(n)) {
            ev.firing.push(FleetFiring {
                kind: "absent".into(),
                replica: replica.to_string(),
                title: format!("{name} is missing"),
                evidence: vec![format!(
                    "{} exports it whenever it serves; a missing family reads as absent, not as quiet (renamed? see `golive rules --lint`)",
                    engine.as_str()
                )],
            });
        }
    }
}

fn fmt_ago(s: f64) -> String {
    format!("{:.0}", s.max(0.0))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// One replica far above the median of the others (present replicas only).
fn judge_imbalance(ev: &mut FleetEvaluation, factor: f64) {
    type Pick = fn(&ReplicaWindow) -> Option<f64>;
    let signals: [(&str, &str, Pick, f64, f64); 3] = [
        ("mean queue", "", |r| r.queue_mean, QUEUE_FLOOR, 1.0),
        (
            "peak KV-cache usage",
            "%",
            |r| r.evaluation.summary.kv_usage_max,
            KV_FLOOR,
            100.0,
        ),
        (
            "mean TTFT",
            " ms",
            |r| r.evaluation.summary.ttft_mean_ms,
            TTFT_FLOOR_MS,
            1.0,
        ),
    ];
    let present: Vec<&ReplicaWindow> = ev.replicas.iter().filter(|r| !r.absent).collect();
    let mut found = Vec::new();
    for (what, unit, pick, floor, scale) in signals {
        let values: Vec<(&str, f64)> = present
            .iter()
            .filter_map(|r| pick(r).map(|v| (r.replica.as_str(), v)))
            .collect();
        if values.len() < 2 {
            continue;
        }
        for (replica, v) in &values {
            let others: Vec<f64> = values
                .iter()
                .filter(|(r, _)| r != replica)
                .map(|x| x.1)
                .collect();
            let Some(m) = median(others.clone()) else {
                continue;
            };
            if *v > factor * m && v - m >= floor {
                found.push(FleetFiring {
                    kind: "imbalance".into(),
                    replica: replica.to_string(),
                    title: format!("{what} far above the other replicas"),
                    evidence: vec![format!(
                        "{what} {:.1}{unit} against a median of {:.1}{unit} over the other {} replica(s) (limit: {factor}x the median and at least {:.1}{unit} above it)",
                        v * scale,
                        m * scale,
                        others.len(),
                        floor * scale
                    )],
                });
            }
        }
    }
    ev.firing.extend(found);
}

/// The text report of one fleet window.
pub fn render_text(ev: &FleetEvaluation) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let absent = ev.replicas.iter().filter(|r| r.absent).count();
    let _ = writeln!(
        out,
        "golive watch --prometheus {} {}: {} over {:.0} s (step {:.0} s), {} replica(s) by `{}`, {absent} absent",
        ev.prometheus,
        if ev.selector.is_empty() { "{}" } else { &ev.selector },
        if ev.firing.is_empty() { "quiet" } else { "TRIGGER" },
        ev.window_s,
        ev.step_s,
        ev.replicas.len(),
        ev.replica_label,
    );
    let opt = |v: Option<f64>, scale: f64, unit: &str| {
        v.map(|x| format!("{:.1}{unit}", x * scale))
            .unwrap_or_else(|| "n/a".into())
    };
    for r in &ev.replicas {
        let s = &r.evaluation.summary;
        let _ = writeln!(
            out,
            "  {} ({}): {}up {}, mean queue {}, running {}, KV cache {}, TTFT {}, {} point(s)",
            r.replica,
            r.evaluation
                .engine
                .map(Engine::as_str)
                .unwrap_or("engine unknown"),
            if r.absent { "ABSENT, " } else { "" },
            r.up.map(|u| format!("{u}")).unwrap_or_else(|| "n/a".into()),
            opt(r.queue_mean, 1.0, ""),
            opt(s.running_last, 1.0, ""),
            opt(s.kv_usage_max, 100.0, "%"),
            opt(s.ttft_mean_ms, 1.0, " ms"),
            r.evaluation.samples,
        );
    }
    for n in &ev.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    for f in &ev.firing {
        let _ = writeln!(out, "TRIGGER {} on {}: {}", f.kind, f.replica, f.title);
        for e in &f.evidence {
            let _ = writeln!(out, "  evidence: {e}");
        }
    }
    if ev
        .firing
        .iter()
        .any(|f| f.kind != "imbalance" && f.kind != "absent")
    {
        let _ = writeln!(out, "{}", triggers::ROLLBACK_REMINDER);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, replica: &str, points: &[(f64, f64)]) -> Series {
        Series {
            labels: [("__name__", name), ("instance", replica)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            points: points.to_vec(),
        }
    }

    fn opts() -> FleetOptions {
        FleetOptions {
            prometheus: "http://p".into(),
            selector: String::new(),
            replica_label: "instance".into(),
            baseline: None,
            interval: Duration::from_secs(1),
            window: Duration::from_secs(10),
            once: true,
            duration: None,
            limits: Limits::default(),
            imbalance_factor: 2.0,
            tool_error_counters: Vec::new(),
            target: crate::target::TargetOptions {
                api_key: None,
                model: None,
                request_timeout: Duration::from_secs(5),
                connect_timeout: Duration::from_secs(5),
                pool_idle_timeout: Duration::from_secs(4),
            },
        }
    }

    /// The fleet judged over a 10 s window at a 1 s step, with the default limits.
    fn judge_window(up: &[Series], s: &[Series]) -> FleetEvaluation {
        judge(
            &opts(),
            &Baseline::default(),
            up,
            s,
            0.0,
            10.0,
            Duration::from_secs(1),
        )
    }

    /// What fired, as (kind, replica).
    fn fired(ev: &FleetEvaluation) -> Vec<(&str, &str)> {
        ev.firing
            .iter()
            .map(|f| (f.kind.as_str(), f.replica.as_str()))
            .collect()
    }

    #[test]
    fn a_queue_far_above_the_others_and_a_replica_gone() {
        let pts = |v: f64| (0..=10).map(|t| (t as f64, v)).collect::<Vec<_>>();
        let mut s = Vec::new();
        let mut up = Vec::new();
        for (r, q) in [("a", 3.0), ("b", 0.0), ("c", 0.0)] {
            s.push(series("llamacpp:requests_deferred", r, &pts(q)));
            s.push(series("llamacpp:requests_processing", r, &pts(1.0)));
            up.push(series("up", r, &pts(1.0)));
        }
        let ev = judge_window(&up, &s);
        let kinds = fired(&ev);
        assert_eq!(kinds, vec![("imbalance", "a")], "{}", render_text(&ev));
        // c stops: up 0 at the end, its series end early.
        up[2] = series("up", "c", &[(0.0, 1.0), (5.0, 1.0), (10.0, 0.0)]);
        s.retain(|x| x.labels["instance"] != "c");
        let ev = judge_window(&up, &s);
        let kinds = fired(&ev);
        assert!(kinds.contains(&("absent", "c")), "{kinds:?}");
        assert!(kinds.contains(&("imbalance", "a")), "{kinds:?}");
        // A healthy fleet with one replica at 1 against 0: under the floor, quiet.
        let s: Vec<Series> = [("a", 1.0), ("b", 0.0)]
            .iter()
            .flat_map(|(r, q)| {
                [
                    series("llamacpp:requests_deferred", r, &pts(*q)),
                    series("llamacpp:requests_processing", r, &pts(1.0)),
                ]
            })
            .collect();
        let up: Vec<Series> = ["a", "b"]
            .iter()
            .map(|r| series("up", r, &pts(1.0)))
            .collect();
        let ev = judge_window(&up, &s);
        assert!(ev.firing.is_empty(), "{}", render_text(&ev));
        // vLLM: one replica's KV cache far fuller than the others'.
        let mut s = Vec::new();
        let mut up = Vec::new();
        for (r, kv) in [("a", 0.9), ("b", 0.3), ("c", 0.35)] {
            for (name, v) in [
                ("vllm:num_requests_waiting", 0.0),
                ("vllm:num_requests_running", 2.0),
                ("vllm:kv_cache_usage_perc", kv),
            ] {
                s.push(series(name, r, &pts(v)));
            }
            up.push(series("up", r, &pts(1.0)));
        }
        let ev = judge_window(&up, &s);
        assert_eq!(ev.firing.len(), 1, "{}", render_text(&ev));
        assert_eq!(
            (ev.firing[0].replica.as_str(), ev.firing[0].title.as_str()),
            ("a", "peak KV-cache usage far above the other replicas")
        );
        // A family the engine always exports, missing: absent, not quiet.
        let s = vec![series("llamacpp:requests_deferred", "a", &pts(0.0))];
        let up = vec![series("up", "a", &pts(1.0))];
        let ev = judge_window(&up, &s);
        assert_eq!(ev.firing.len(), 1, "{}", render_text(&ev));
        assert_eq!(
            ev.firing[0].title,
            "llamacpp:requests_processing is missing"
        );
    }
}
