//! `golive watch`: arguments, and the two front ends of the watch's events: the
//! terminal (text or JSON lines) and, with `--listen`, a `/metrics` endpoint.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use golive::events::{Event, Events, ReportError, Reporter, Tee};
use golive::watch::{self, FleetOptions, Limits, WatchEnd, WatchOptions};

use crate::args::{OutputFormat, TargetArgs};
use crate::{exit, out};

mod listen;

#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Base URL of the server (its `/metrics` is scraped).
    #[arg(
        long,
        required_unless_present = "prometheus",
        conflicts_with = "prometheus"
    )]
    pub url: Option<String>,
    /// Read the fleet from this Prometheus server (PromQL over --window) instead of
    /// scraping one server; the triggers are judged per replica, plus imbalance and absent.
    #[arg(long, value_name = "URL", conflicts_with_all = ["log", "log_cmd", "listen"])]
    pub prometheus: Option<String>,
    /// With --prometheus: label matchers that pick the serving targets.
    #[arg(long, default_value = "", requires = "prometheus")]
    pub selector: String,
    /// With --prometheus: the label that names a replica.
    #[arg(long, default_value = "instance", requires = "prometheus")]
    pub replica_label: String,
    /// With --prometheus: a replica's mean queue, peak KV usage or mean TTFT this many
    /// times the median of the others (and 2 requests, 20 points, 100 ms above it) is
    /// an imbalance.
    #[arg(long, default_value_t = 2.0, value_parser = crate::args::f64_in(1.0, 1000.0), requires = "prometheus")]
    pub imbalance_factor: f64,
    /// The accepted run's report.json (or its directory): thresholds come from its baseline.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Time between scrapes.
    #[arg(long, default_value = "10s", value_parser = crate::args::duration)]
    pub interval: Duration,
    /// The span the triggers are judged over.
    #[arg(long, default_value = "2m", value_parser = crate::args::duration)]
    pub window: Duration,
    /// Server log to follow (only lines written after the start count, unless --log-from-start).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// A command whose output is the server log, e.g. "docker logs -f --since 1s vllm" or
    /// "kubectl logs -f deploy/vllm" (split like a shell would; no shell is run).
    #[arg(long, conflicts_with = "log")]
    pub log_cmd: Option<String>,
    /// Read the log from its beginning instead of following only new lines.
    #[arg(long, requires = "log")]
    pub log_from_start: bool,
    /// A counter of tool-call or schema failures (e.g. from the gateway); any increase fires.
    #[arg(long = "tool-error-counter")]
    pub tool_error_counters: Vec<String>,
    /// Evaluate one window and exit (for cron).
    #[arg(long)]
    pub once: bool,
    /// Stop a continuous watch after this long (exit 0 when quiet).
    #[arg(long, value_parser = crate::args::duration)]
    pub duration: Option<Duration>,
    /// How long the target may stay unreachable (a restart) before watch exits 3;
    /// default: one window.
    #[arg(long, value_parser = crate::args::duration)]
    pub down_grace: Option<Duration>,
    /// OOM lines in one window that fire the OOM trigger.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub oom_min: usize,
    /// Growth of the mean queue length over the window that counts as growth.
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::f64_in(0.0, 1e9))]
    pub queue_min_growth: f64,
    /// Relative tolerance for "unchanged" request rate, "below" cache ratio, "above" latency.
    #[arg(long, default_value_t = 0.2, value_parser = crate::args::f64_in(0.0, 100.0))]
    pub tolerance: f64,
    /// Seconds of queued or running work without a new generated token that fire
    /// `stalled`.
    #[arg(long, default_value_t = 60.0, value_parser = crate::args::seconds)]
    pub stall_after_s: f64,
    /// Every this many seconds, send `/health` and one probe generation (as `golive
    /// probe`); `stalled` fires when /health answers but the probe gets no token. Off
    /// by default: watch then sends no generation traffic of its own.
    #[arg(long, value_parser = crate::args::seconds)]
    pub probe_every_s: Option<f64>,
    /// Deadline of each probe generation.
    #[arg(long, default_value_t = 10.0, value_parser = crate::args::seconds)]
    pub probe_deadline_s: f64,
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// Serve `/healthz` and `/metrics` (golive's own: one gauge per trigger, scrape
    /// counts) on this address while watching, e.g. 127.0.0.1:9464.
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// Seconds from the command line as a duration; clear errors for the rest.
fn seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(
        v.is_finite() && v > 0.0,
        "{flag} must be a number of seconds above zero"
    );
    Ok(Duration::from_secs_f64(v))
}

impl TryFrom<&WatchArgs> for WatchOptions {
    type Error = anyhow::Error;
    fn try_from(a: &WatchArgs) -> anyhow::Result<Self> {
        Ok(WatchOptions {
            url: a.url.clone().unwrap_or_default(),
            baseline: a.baseline.clone(),
            interval: a.interval,
            window: a.window,
            log: a.log.clone(),
            log_cmd: a.log_cmd.clone(),
            log_from_start: a.log_from_start,
            tool_error_counters: a.tool_error_counters.clone(),
            once: a.once,
            duration: a.duration,
            down_grace: a.down_grace,
            oom_min: a.oom_min,
            queue_min_growth: a.queue_min_growth,
            tolerance: a.tolerance,
            stall_after: seconds("--stall-after-s", a.stall_after_s)?,
            probe_every: a
                .probe_every_s
                .map(|v| seconds("--probe-every-s", v))
                .transpose()?,
            probe_deadline: seconds("--probe-deadline-s", a.probe_deadline_s)?,
            target: a.target.clone().into(),
        })
    }
}

/// The watch on the terminal: windows on stdout, restarts and scrape failures as seen.
struct Terminal {
    url: String,
    format: OutputFormat,
    /// `--listen` is on.
    serving: bool,
    /// `--once`: one window, then the watch's own end.
    once: bool,
    /// Told when the command must end before the watch does: stdout closed, or
    /// stdout could not be written.
    ended: Mutex<Sender<Ended>>,
}

/// What ends `golive watch`: the library's run returned (also with the error of a
/// reporter: stdout that could not be written), or stdout was closed.
enum Ended {
    Run(anyhow::Result<WatchEnd>),
    StdoutClosed,
}

impl Terminal {
    fn show(&self, event: &Event) -> anyhow::Result<()> {
        match (event, self.format) {
            (Event::Evaluated(ev), OutputFormat::Json) => out::line(serde_json::to_string(
                &watch::evaluation_json(&self.url, ev)?,
            )?)?,
            (Event::Evaluated(ev), OutputFormat::Text) => {
                out::text(&watch::render_text(&self.url, ev))?
            }
            (Event::FleetEvaluated(ev), OutputFormat::Json) => {
                out::line(serde_json::to_string(ev)?)?
            }
            (Event::FleetEvaluated(ev), OutputFormat::Text) => {
                out::text(&watch::render_fleet_text(ev))?
            }
            (Event::CounterReset { t, what }, OutputFormat::Json) => {
                out::line(serde_json::json!({"event": "counter_reset", "t": t, "what": what}))?
            }
            (Event::CounterReset { t, what }, OutputFormat::Text) => {
                out::line(watch::reset_text(*t, what))?
            }
            (Event::ScrapeFailed { t, error }, OutputFormat::Text) => out::note(
                "watch",
                format!("{t:.1}s: scrape failed ({error}); server restarting?"),
            ),
            (Event::Notice(text) | Event::Warning(text) | Event::Unreachable(text), _) => {
                out::note("watch", text)
            }
            _ => {}
        }
        Ok(())
    }
}

impl Reporter for Terminal {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        // stdout cannot be written (`> /dev/full`): the watch ends with the error, exit 4.
        self.show(event)?;
        // stdout closed (`golive watch | head -1`): a continuous watch has no one left
        // to tell and ends quiet (exit 0); a fired trigger or a --once window goes on to
        // the watch's own end and exit code. With --listen the endpoint goes on serving.
        let judged = matches!(event, Event::Evaluated(_) | Event::FleetEvaluated(_));
        if judged && out::stdout_closed() && !self.serving && !self.once && !fired(event) {
            self.end(Ended::StdoutClosed);
        }
        Ok(())
    }
}

impl Terminal {
    /// Ends the command with `why`, whatever the watch itself is doing.
    fn end(&self, why: Ended) {
        if let Ok(tx) = self.ended.lock() {
            let _ = tx.send(why);
        }
    }
}

/// A judgement with a firing trigger (the watch ends with it, exit 1).
fn fired(event: &Event) -> bool {
    match event {
        Event::Evaluated(ev) => !ev.firing.is_empty(),
        Event::FleetEvaluated(ev) => !ev.firing.is_empty(),
        _ => false,
    }
}

fn fleet_options(a: &WatchArgs, prometheus: &str) -> FleetOptions {
    FleetOptions {
        prometheus: prometheus.to_string(),
        selector: a.selector.clone(),
        replica_label: a.replica_label.clone(),
        baseline: a.baseline.clone(),
        interval: a.interval,
        window: a.window,
        once: a.once,
        duration: a.duration,
        limits: Limits {
            oom_min: a.oom_min.max(1),
            queue_min_growth: a.queue_min_growth,
            tolerance: a.tolerance,
            stall_after_s: a.stall_after_s,
        },
        imbalance_factor: a.imbalance_factor,
        tool_error_counters: a.tool_error_counters.clone(),
        target: a.target.clone().into(),
    }
}

/// The watch to run, single-server or fleet, with its events.
type WatchRun =
    std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<WatchEnd>> + Send>>;

pub fn run(args: WatchArgs) -> anyhow::Result<u8> {
    let (tx, rx) = channel();
    let terminal = |url: &str| Terminal {
        // The URL as shown: its userinfo (Basic auth) never printed.
        url: golive::redact::display_url(url),
        format: args.format,
        serving: args.listen.is_some(),
        once: args.once,
        ended: Mutex::new(tx.clone()),
    };
    let events;
    let watch_run: WatchRun;
    if let Some(prometheus) = &args.prometheus {
        events = Events::new(Arc::new(terminal(prometheus)));
        let opts = fleet_options(&args, prometheus);
        watch_run = Box::pin(async move { Ok(watch::run_fleet(&opts, &events).await?) });
    } else {
        let opts = WatchOptions::try_from(&args)?;
        let mut reporters: Vec<Arc<dyn Reporter>> = vec![Arc::new(terminal(&opts.url))];
        if let Some(addr) = args.listen {
            reporters.push(listen::serve(addr)?);
        }
        events = Events::new(Arc::new(Tee(reporters)));
        watch_run = Box::pin(async move { Ok(watch::run(&opts, &events).await?) });
    }
    // The watch runs as a task of its own, so that a closed stdout (`golive watch | head`)
    // ends the command here, as every command ends, and main returns its exit code.
    crate::runtime::get()?.spawn(async move {
        let _ = tx.send(Ended::Run(watch_run.await));
    });
    Ok(match rx.recv()? {
        Ended::StdoutClosed => exit::OK,
        Ended::Run(end) => match end? {
            WatchEnd::Quiet => exit::OK,
            WatchEnd::Fired => exit::FOUND,
            WatchEnd::Unreachable => exit::UNREACHABLE,
        },
    })
}
