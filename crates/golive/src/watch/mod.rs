//! After go-live: `golive watch` (rollback triggers) and `golive rules` (Prometheus alerts).
//!
//! `watch` scrapes `/metrics` every `--interval`, follows the server log when given,
//! and judges the runbook's rollback triggers over the last `--window` against the
//! accepted run's baseline. Exit codes: 0 quiet, 1 a trigger fired, 3 unreachable.

mod dashboard;
mod fleet;
mod lint;
mod logscan;
mod prometheus;
mod rules;
mod signals;
mod stalled;
mod triggers;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::events::{Event, Events};
use crate::metrics::MetricsSnapshot;
use crate::report::{Baseline, Report};

use logscan::LogFollower;
use triggers::ROLLBACK_REMINDER;

// The payloads of watch's events (crate::events::Event), defined beside the event stream.
pub use crate::events::watch::{
    Evaluation, Firing, FleetEvaluation, FleetFiring, ProbeSample, ReplicaWindow, Reset, Summary,
};
pub use dashboard::dashboard_json;
pub use fleet::{render_text as render_fleet_text, run as run_fleet, FleetOptions};
pub use lint::{lint, Exported, Finding as LintFinding, LintOptions, LintReport};
pub use logscan::LogHit;
pub use rules::{rules_yaml, RulesOptions};
pub use signals::{Counter, Reading};
pub use triggers::{evaluate, Limits, Trigger};

/// How a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// No trigger fired (`--once`, `--duration` over, Ctrl-C, SIGTERM).
    Quiet,
    /// A rollback trigger fired.
    Fired,
    /// The target did not answer.
    Unreachable,
}

/// What `golive watch` scrapes, how often, over which window and with which trigger limits (its CLI
/// flags).
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// Base URL of the server (its `/metrics` is scraped).
    pub url: String,
    /// The accepted run's report.json (or its directory): thresholds come from its baseline.
    pub baseline: Option<PathBuf>,
    /// Time between scrapes.
    pub interval: Duration,
    /// The span the triggers are judged over.
    pub window: Duration,
    /// Server log to follow (only lines written after the start count, unless --log-from-start).
    pub log: Option<PathBuf>,
    /// A command whose output is the server log, e.g. "docker logs -f --since 1s vllm" or
    /// "kubectl logs -f deploy/vllm" (split like a shell would; no shell is run).
    pub log_cmd: Option<String>,
    /// Read the log from its beginning instead of following only new lines.
    pub log_from_start: bool,
    /// A counter of tool-call or schema failures (e.g. from the gateway); any increase fires.
    pub tool_error_counters: Vec<String>,
    /// Evaluate one window and exit (for cron).
    pub once: bool,
    /// Stop a continuous watch after this long (exit 0 when quiet).
    pub duration: Option<Duration>,
    /// How long the target may stay unreachable (a restart) before watch exits 3;
    /// default: one window.
    pub down_grace: Option<Duration>,
    /// OOM lines in one window that fire the OOM trigger.
    pub oom_min: usize,
    /// Growth of the mean queue length over the window that counts as growth.
    pub queue_min_growth: f64,
    /// Relative tolerance for "unchanged" request rate, "below" cache ratio, "above" latency.
    pub tolerance: f64,
    /// Queued or running work without a new generated token for this long is a stall.
    pub stall_after: Duration,
    /// Send a probe request (`golive probe`) with `/health` this often; `None`: never
    /// (watch then sends no generation traffic of its own).
    pub probe_every: Option<Duration>,
    /// Deadline of each probe request.
    pub probe_deadline: Duration,
    /// Connection settings (API key, model, TLS, request timeout) for the scrapes and probe
    /// requests.
    pub target: crate::target::TargetOptions,
}

/// Everything watch has seen, trimmed to the window.
struct State {
    readings: Vec<Reading>,
    hits: Vec<LogHit>,
    probes: Vec<ProbeSample>,
    window_s: f64,
}

impl State {
    fn trim(&mut self, now: f64) {
        let from = now - self.window_s;
        // Keep one reading before the window so counter increases cover all of it.
        let keep_from = self.readings.iter().rposition(|r| r.t <= from).unwrap_or(0);
        self.readings.drain(..keep_from);
        // Log lines count over the same span as the kept readings (the first poll of a
        // short window sits exactly at its start).
        let hits_from = self.readings.first().map_or(from, |r| r.t.min(from));
        self.hits.retain(|h| h.t >= hits_from);
        self.probes.retain(|p| p.t >= from);
    }

    fn evaluate(&self, baseline: &Baseline, limits: &Limits) -> Evaluation {
        triggers::evaluate_with_probes(&self.readings, &self.hits, &self.probes, baseline, limits)
    }

    /// The latest probe got no token while `/health` answered: the target is up (and
    /// stuck) even when its `/metrics` does not answer.
    fn alive_but_stalled(&self) -> bool {
        self.probes.last().is_some_and(|p| {
            p.probe.stalled() && p.health_status.is_some_and(|s| (200..300).contains(&s))
        })
    }
}

/// Watches the target until a trigger fires, `once`/`duration` ends it, or a signal;
/// every scrape, reset and judged window goes to `events`.
pub async fn run(args: &WatchOptions, events: &Events) -> crate::Result<WatchEnd> {
    crate::error::ensure_input!(!args.interval.is_zero(), "--interval must be above zero");
    crate::error::ensure_input!(
        args.window >= args.interval,
        "--window must be at least one --interval"
    );
    crate::error::ensure_input!(
        (0.0..1.0).contains(&args.tolerance),
        "--tolerance must be between 0 and 1"
    );
    crate::error::ensure_input!(
        args.probe_every.is_none_or(|d| !d.is_zero()) && !args.probe_deadline.is_zero(),
        "--probe-every-s and --probe-deadline-s must be above zero"
    );
    let (baseline, rollback_owner) = match &args.baseline {
        Some(p) => {
            let r = Report::load(p)?;
            let owner = r.rollback_owner().map(str::to_string);
            (r.baseline, owner)
        }
        None => (Baseline::default(), None),
    };
    let target = crate::target::Target::new(&args.url, &args.target)?;
    let client = target.http_client()?;
    let prober = Prober {
        client: crate::client::OpenAiClient::new(&target)?,
        model: target.model.clone(),
        every: args.probe_every,
        deadline: args.probe_deadline,
    };
    let metrics_url = target.url("/metrics");
    let accepted = (&baseline, rollback_owner.as_deref());
    let end = watch_loop(args, events, accepted, &client, &metrics_url, &prober).await?;
    // A reporter that failed on the last window (stdout on a full disk) ends the watch.
    events.check()?;
    Ok(end)
}

/// The probe requests of `--probe-every-s`.
struct Prober {
    client: crate::client::OpenAiClient,
    model: Option<String>,
    every: Option<Duration>,
    deadline: Duration,
}

impl Prober {
    fn due(&self, t: f64, last: Option<f64>) -> bool {
        self.every
            .is_some_and(|every| last.is_none_or(|l| t - l + 1e-6 >= every.as_secs_f64()))
    }

    /// `/health` and one probe generation, at the same time.
    async fn sample(&self, t: f64) -> ProbeSample {
        let (health, probe) = tokio::join!(
            self.client.get_text("/health", self.deadline),
            crate::probe::probe(&self.client, self.model.as_deref(), self.deadline, 1)
        );
        let (health_status, health_error) = match health {
            Ok((status, _)) => (Some(status), None),
            Err((_, e)) => (None, Some(e)),
        };
        ProbeSample {
            t,
            health_status,
            health_error,
            probe,
        }
    }
}

async fn watch_loop(
    args: &WatchOptions,
    events: &Events,
    (baseline, rollback_owner): (&Baseline, Option<&str>),
    client: &reqwest::Client,
    metrics_url: &str,
    prober: &Prober,
) -> anyhow::Result<WatchEnd> {
    let mut run = Watch::open(args, events, baseline, rollback_owner)?;
    let timeout = scrape_timeout(args.interval, args.target.request_timeout);
    let mut stop = StopSignals::listen()?;
    let mut next_tick = run.start;
    loop {
        let t = run.start.elapsed().as_secs_f64();
        // Ctrl-C / SIGTERM are honoured during a scrape too: a server that is going down may
        // hold the request open (llama-server on SIGTERM answers nothing until it is killed).
        let sample = Watch::sample(t, run.last_probe, client, metrics_url, prober, timeout);
        let Some((scraped, probed)) = stop.unless_stopped(sample).await else {
            return Ok(run.finish(run.last_ok.is_some()));
        };
        run.note_probe(t, probed);
        if let Some(end) = run.note_scrape(t, scraped) {
            return Ok(end);
        }
        run.read_logs(t)?;
        if let Some(end) = run.judge_window(t) {
            return Ok(end);
        }
        // A reporter that could not report (stdout on a full disk) ends the watch.
        events.check()?;
        if args.duration.is_some_and(|d| run.start.elapsed() >= d) {
            return Ok(run.finish(true));
        }
        if stop.pause_until_next(&mut next_tick, args.interval).await {
            return Ok(run.finish(run.last_ok.is_some()));
        }
    }
}

/// Ctrl-C and SIGTERM, which end a watch quietly at any wait.
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn listen() -> anyhow::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The work's result, or none when a stop signal came first.
    async fn unless_stopped<T>(&mut self, work: impl std::future::Future<Output = T>) -> Option<T> {
        tokio::select! {
            r = work => Some(r),
            _ = self.interrupt.recv() => None,
            _ = self.terminate.recv() => None,
        }
    }

    /// Waits for the next tick (`interval` after the last; at once when late); true when a
    /// stop signal came first.
    async fn pause_until_next(&mut self, next_tick: &mut Instant, interval: Duration) -> bool {
        *next_tick += interval;
        let now = Instant::now();
        let pause = if *next_tick > now {
            *next_tick - now
        } else {
            *next_tick = now;
            Duration::ZERO
        };
        self.unless_stopped(tokio::time::sleep(pause))
            .await
            .is_none()
    }
}

/// One watch under way: what it read within the window, its log followers, and when the
/// target last answered.
struct Watch<'a> {
    args: &'a WatchOptions,
    events: &'a Events,
    baseline: &'a Baseline,
    rollback_owner: Option<&'a str>,
    limits: Limits,
    state: State,
    start: Instant,
    log: Option<LogFollower>,
    log_cmd: Option<logscan::CommandFollower>,
    down_grace_s: f64,
    last_probe: Option<f64>,
    last_ok: Option<f64>,
    /// When the target refused connections since the last good scrape: (first, last) t.
    refused: Option<(f64, f64)>,
    last_status: f64,
}

impl<'a> Watch<'a> {
    fn open(
        args: &'a WatchOptions,
        events: &'a Events,
        baseline: &'a Baseline,
        rollback_owner: Option<&'a str>,
    ) -> anyhow::Result<Watch<'a>> {
        let start = Instant::now();
        if let Some(p) = &args.log {
            if !p.exists() {
                events.notice(format!(
                    "{} does not exist yet; following it once it appears",
                    p.display()
                ));
            }
        }
        let log_cmd = match &args.log_cmd {
            Some(c) => Some(logscan::CommandFollower::spawn(c)?),
            None => None,
        };
        Ok(Watch {
            args,
            events,
            baseline,
            rollback_owner,
            limits: Limits {
                oom_min: args.oom_min.max(1),
                queue_min_growth: args.queue_min_growth,
                tolerance: args.tolerance,
                stall_after_s: args.stall_after.as_secs_f64(),
            },
            state: State {
                readings: Vec::new(),
                hits: Vec::new(),
                probes: Vec::new(),
                window_s: args.window.as_secs_f64(),
            },
            start,
            log: args
                .log
                .as_ref()
                .map(|p| LogFollower::open(p, args.log_from_start)),
            log_cmd,
            down_grace_s: args.down_grace.unwrap_or(args.window).as_secs_f64(),
            last_probe: None,
            last_ok: None,
            refused: None,
            last_status: f64::NEG_INFINITY,
        })
    }

    /// One scrape of `/metrics` (bounded by `timeout`) and, when one is due after
    /// `last_probe`, a probe, at once. (No `&self`: the watch's log followers are not `Sync`,
    /// and the future crosses threads.)
    async fn sample(
        t: f64,
        last_probe: Option<f64>,
        client: &reqwest::Client,
        metrics_url: &str,
        prober: &Prober,
        timeout: Duration,
    ) -> (anyhow::Result<MetricsSnapshot>, Option<ProbeSample>) {
        let probe_due = prober.due(t, last_probe);
        let scrape = async {
            tokio::time::timeout(timeout, MetricsSnapshot::scrape(client, metrics_url))
                .await
                .unwrap_or_else(|_| {
                    Err(anyhow::anyhow!(
                        "GET {metrics_url} gave no answer within {}",
                        humantime::format_duration(timeout)
                    ))
                })
        };
        let probing = async {
            if probe_due {
                Some(prober.sample(t).await)
            } else {
                None
            }
        };
        tokio::join!(scrape, probing)
    }

    fn note_probe(&mut self, t: f64, probed: Option<ProbeSample>) {
        if let Some(p) = probed {
            self.last_probe = Some(t);
            self.state.probes.push(p);
        }
    }

    /// A scrape's reading joins the window; a failed one is reported, and ends the watch
    /// (exit 3) when the target was never reached or stayed down past the grace.
    fn note_scrape(
        &mut self,
        t: f64,
        scraped: anyhow::Result<MetricsSnapshot>,
    ) -> Option<WatchEnd> {
        match scraped {
            Ok(m) => {
                self.note_reading(t, &m);
                None
            }
            Err(e) => self.note_failed_scrape(t, &e),
        }
    }

    fn note_reading(&mut self, t: f64, m: &MetricsSnapshot) {
        let mut reading = Reading::from_snapshot(m, t, &self.args.tool_error_counters);
        if let Some((from, to)) = self.refused.take() {
            reading.restart_hint = Some(format!(
                "the target refused connections between {from:.1} s and {to:.1} s (nothing listened: a new process)"
            ));
        }
        if let Some(prev) = self.state.readings.last() {
            if let Some(what) = signals::restarted(prev, &reading) {
                self.events.emit(Event::CounterReset { t, what });
            }
        }
        self.state.readings.push(reading);
        self.last_ok = Some(t);
        self.events.emit(Event::Scraped { t });
    }

    fn note_failed_scrape(&mut self, t: f64, e: &anyhow::Error) -> Option<WatchEnd> {
        // Unreachable from the start, or for longer than the grace: exit 3.
        let down_for = t - self.last_ok.unwrap_or(0.0);
        let gone = self.last_ok.is_none() || down_for >= self.down_grace_s;
        if gone && !self.state.alive_but_stalled() {
            let hint = if format!("{e:#}").contains("404") {
                " (llama.cpp serves /metrics only when started with --metrics)"
            } else {
                ""
            };
            self.events.emit(Event::Unreachable(format!(
                "target unreachable: {e:#}{hint}"
            )));
            return Some(WatchEnd::Unreachable);
        }
        if connection_refused(e) {
            self.refused = Some((self.refused.map_or(t, |r| r.0), t));
        }
        self.events.emit(Event::ScrapeFailed {
            t,
            error: format!("{e:#}"),
        });
        None
    }

    /// The log lines written until now join the window (a one-shot window may wait for a
    /// whole log read from its start); readings, lines and probes older than it leave.
    fn read_logs(&mut self, t: f64) -> anyhow::Result<()> {
        if let Some(f) = self.log.as_mut() {
            f.catch_up(if self.args.once {
                Duration::from_secs(120)
            } else {
                self.args.interval / 2
            });
            self.state.hits.extend(f.poll_hits(t)?);
        }
        if let Some(c) = self.log_cmd.as_mut() {
            self.state.hits.extend(c.poll_hits(t));
        }
        self.state.trim(t);
        Ok(())
    }

    /// Once the window is full: a firing trigger ends the watch, as does `--once`; otherwise
    /// the status is reported once a window.
    fn judge_window(&mut self, t: f64) -> Option<WatchEnd> {
        let window_s = self.state.window_s;
        if t + 1e-6 < window_s {
            return None;
        }
        let mut ev = self.state.evaluate(self.baseline, &self.limits);
        ev.rollback_owner = self.rollback_owner.map(str::to_string);
        let end = if !ev.firing.is_empty() {
            Some(WatchEnd::Fired)
        } else if self.args.once {
            Some(WatchEnd::Quiet)
        } else {
            None
        };
        if end.is_some() || t - self.last_status >= window_s {
            self.events.emit(Event::Evaluated(Box::new(ev)));
            self.last_status = t;
        }
        end
    }

    fn finish(&self, reached: bool) -> WatchEnd {
        finish(
            self.events,
            &self.state,
            self.baseline,
            &self.limits,
            reached,
        )
    }
}

/// How long one scrape may take: about one interval (at least 3 s, at most 30 s, never
/// above --request-timeout), so a server that holds the request open cannot stall
/// the watch for the 120 s meant for long generations.
fn scrape_timeout(interval: Duration, request_timeout: Duration) -> Duration {
    interval
        .clamp(Duration::from_secs(3), Duration::from_secs(30))
        .min(request_timeout)
}

/// True when nothing listened on the target's port (as opposed to a timeout or an
/// HTTP error from a process that is up).
fn connection_refused(e: &anyhow::Error) -> bool {
    // anyhow's chain follows every `source()`, down to hyper's io::Error.
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// Ends a continuous watch (--duration over, Ctrl-C, SIGTERM) with the judgement of
/// what it saw; a watch that never got an answer says so and exits 3.
fn finish(
    events: &Events,
    state: &State,
    baseline: &Baseline,
    limits: &Limits,
    ever_reached: bool,
) -> WatchEnd {
    if !ever_reached && !state.alive_but_stalled() {
        events.emit(Event::Unreachable(
            "stopped before the target answered a scrape".into(),
        ));
        return WatchEnd::Unreachable;
    }
    let ev = state.evaluate(baseline, limits);
    let end = if ev.firing.is_empty() {
        WatchEnd::Quiet
    } else {
        WatchEnd::Fired
    };
    events.emit(Event::Evaluated(Box::new(ev)));
    end
}

fn opt(v: Option<f64>, unit: &str, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}{unit}"))
        .unwrap_or_else(|| "n/a".into())
}

/// The JSON line of one window, as `--format json` prints it.
pub fn evaluation_json(url: &str, ev: &Evaluation) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(ev)?;
    v["url"] = serde_json::Value::String(url.to_string());
    for (f, out) in ev.firing.iter().zip(
        v["firing"]
            .as_array_mut()
            .map(|a| a.iter_mut())
            .into_iter()
            .flatten(),
    ) {
        if let Some(step) = f.trigger.next_step() {
            out["next_step"] = step.into();
        }
    }
    if !ev.firing.is_empty() {
        v["rollback_reminder"] = ROLLBACK_REMINDER.into();
    }
    Ok(v)
}

/// The line that says a restart was seen, when it is seen (text form).
pub fn reset_text(t: f64, what: &str) -> String {
    format!(
        "golive watch: {t:.1}s: counter reset (server restart): {what}; increases counted from zero, no rate read as negative"
    )
}

/// The text report of one window.
pub fn render_text(url: &str, ev: &Evaluation) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let s = &ev.summary;
    let _ = writeln!(
        out,
        "golive watch {url} ({}): {} over {:.1} s, {} scrape(s): waiting {}, running {}, KV cache {}, cache hits {}, TTFT {}, ITL {}, finished {}",
        ev.engine.map(|e| e.as_str()).unwrap_or("engine unknown"),
        if ev.firing.is_empty() { "quiet" } else { "TRIGGER" },
        ev.window_s,
        ev.samples,
        opt(s.waiting_last, "", 0),
        opt(s.running_last, "", 0),
        opt(s.kv_usage_max.map(|v| v * 100.0), "%", 1),
        opt(s.cache_hit_ratio, "", 3),
        opt(s.ttft_mean_ms, " ms", 1),
        opt(s.itl_mean_ms, " ms", 1),
        opt(s.finished_rate_rps, " rps", 2),
    );
    for r in &ev.resets {
        let _ = writeln!(
            out,
            "  counter reset at {:.1} s (server restart): {}; increases counted from zero",
            r.t, r.what
        );
    }
    for n in &ev.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    if let Some(p) = &ev.probe {
        let _ = writeln!(
            out,
            "  probe at {:.1} s: /health {}, generation {}",
            p.t,
            p.health_status
                .map(|s| format!("HTTP {s}"))
                .unwrap_or_else(|| "no answer".into()),
            match p.probe.reason {
                None => format!("ok ({})", p.probe.detail),
                Some(r) => format!("{} ({})", r.as_str(), p.probe.detail),
            }
        );
    }
    for f in &ev.firing {
        let _ = writeln!(out, "TRIGGER {}: {}", f.trigger.id(), f.title);
        for e in &f.evidence {
            let _ = writeln!(out, "  evidence: {e}");
        }
        if let Some(step) = f.trigger.next_step() {
            let _ = writeln!(out, "  next step: {step}");
        }
    }
    if !ev.firing.is_empty() {
        let _ = writeln!(out, "{ROLLBACK_REMINDER}");
        if let Some(owner) = &ev.rollback_owner {
            let _ = writeln!(out, "Rollback owner: {owner}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_firing_names_the_rollback_owner_of_the_signed_baseline() {
        let mut ev = Evaluation {
            window_s: 60.0,
            samples: 3,
            engine: None,
            summary: Default::default(),
            firing: vec![crate::events::watch::Firing {
                trigger: crate::events::watch::Trigger::Oom,
                title: "repeated OOM",
                evidence: vec!["CUDA out of memory".into()],
            }],
            resets: Vec::new(),
            notes: Vec::new(),
            probe: None,
            rollback_owner: Some("oncall-llm".into()),
        };
        let text = render_text("http://x", &ev);
        assert!(text.contains("Rollback owner: oncall-llm"), "{text}");
        let json = evaluation_json("http://x", &ev).unwrap();
        assert_eq!(json["rollback_owner"], "oncall-llm");
        ev.rollback_owner = None;
        assert!(!render_text("http://x", &ev).contains("Rollback owner"));
    }

    #[test]
    fn a_scrape_waits_about_one_interval() {
        let long = Duration::from_secs(120);
        assert_eq!(
            scrape_timeout(Duration::from_millis(300), long),
            Duration::from_secs(3)
        );
        assert_eq!(
            scrape_timeout(Duration::from_secs(10), long),
            Duration::from_secs(10)
        );
        assert_eq!(
            scrape_timeout(Duration::from_secs(600), long),
            Duration::from_secs(30)
        );
        assert_eq!(
            scrape_timeout(Duration::from_secs(10), Duration::from_secs(2)),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn a_closed_port_reads_as_refused_and_an_http_error_does_not() {
        // A port that was just free: nothing listens on it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = reqwest::Client::new();
        let e = rt
            .block_on(MetricsSnapshot::scrape(
                &client,
                &format!("http://127.0.0.1:{port}/metrics"),
            ))
            .unwrap_err();
        assert!(connection_refused(&e), "{e:#}");
        assert!(!connection_refused(&anyhow::anyhow!(
            "GET /metrics answered HTTP 503 Service Unavailable"
        )));
    }
}
