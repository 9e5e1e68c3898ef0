//! The event stream of the long-running capabilities (accept, load, watch).
//!
//! They never print: they send [`Event`]s to a [`Reporter`], as nextest's runner sends
//! `TestEventKind` to its display and JUnit writer. The terminal display, the
//! `golive watch --listen` endpoint, the report files of `accept` (report.json,
//! Markdown, JUnit, HTML: `accept::ReportFiles`, fed by [`Event::ReportUpdated`] and
//! [`Event::ReportFinished`]) and tests are reporters.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) mod watch;

use crate::client::{new_histogram, percentiles, OnRecord, RequestRecord};
use crate::report::{Check, RampStep, Report, Stage};
use hdrhistogram::Histogram;
use watch::{Evaluation, FleetEvaluation};

/// Something that happened during a run. It serialises as `{"event": "stage_started",
/// "data": ...}` (the lines of `--format json`); the report events carry the report's
/// state in short ([`ReportState`]), the whole report is in `report.json`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum Event {
    /// accept: a stage begins (`basic` and `service` run per node).
    StageStarted(Stage),
    /// accept: a stage ended; its checks are in the report.
    StageFinished(Stage),
    /// accept: one check was decided.
    CheckResult(Box<Check>),
    /// accept: one ramp step was measured.
    RampStepDone(Box<RampStep>),
    /// accept: the report as it stands (`complete: false`), after every stage and ramp
    /// step; report.json is rewritten from it, so an interrupted run keeps its results.
    #[serde(serialize_with = "report_state")]
    ReportUpdated(Arc<Report>),
    /// accept: the run ended, decided or interrupted; every report file is written
    /// from this final report.
    #[serde(serialize_with = "report_state")]
    ReportFinished(Arc<Report>),
    /// A load (ramp step, soak, `golive load`) starts.
    LoadStarted {
        /// The load as the display shows it, e.g. the ramp step `4 x short (128 tokens)`.
        label: String,
        /// Requests it will send; `None`: not known in advance (the soak).
        planned: Option<u64>,
    },
    /// One request of the current load finished.
    Request(Box<RequestRecord>),
    /// The current load's running figures, at most every [`PROGRESS_EVERY`]: what a live
    /// display draws (the library counts; a display does not).
    LoadProgress(LoadProgress),
    /// The current load ended; its final figures.
    LoadFinished(LoadProgress),
    /// A remark for the operator that changes nothing (a clamped setting, a missing file).
    Notice(String),
    /// A warning: something could not be done, the run goes on.
    Warning(String),
    /// watch: a scrape of `/metrics` answered.
    Scraped {
        /// Seconds since the watch started.
        t: f64,
    },
    /// watch: a scrape failed but the target is within its grace (a restart?).
    ScrapeFailed {
        /// Seconds since the watch started.
        t: f64,
        /// Why, in words.
        error: String,
    },
    /// watch: a counter went down: the server restarted.
    CounterReset {
        /// Seconds since the watch started.
        t: f64,
        /// What shows the restart, in words (a counter that went down, a new start time).
        what: String,
    },
    /// watch: a window was judged; `firing` is not empty when a trigger fired.
    Evaluated(Box<Evaluation>),
    /// watch --prometheus: a window over the fleet was judged.
    FleetEvaluated(Box<FleetEvaluation>),
    /// watch: the target did not answer (from the start, or longer than the grace).
    Unreachable(String),
}

/// How often a load's running figures are sent ([`Event::LoadProgress`]).
pub const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// One load's figures so far, as the library counts them from its requests.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LoadProgress {
    /// The load's label ([`Event::LoadStarted`]).
    pub label: String,
    /// Requests finished so far.
    pub requests: u64,
    /// Of them, failed.
    pub errors: u64,
    /// Seconds since the load started.
    pub elapsed_s: f64,
    /// Finished requests per second since the load started.
    pub requests_per_s: f64,
    /// Median time to first token of the answered requests; `None` before the first.
    pub ttft_p50_ms: Option<f64>,
}

/// The running count of one load: what [`LoadProgress`] shows, and when it was last sent.
/// It counts only that (requests, failures, one TTFT histogram), not the load's whole
/// [`crate::client::LatencyStats`]: the load's own statistics already record every chunk
/// gap of every request, and the display must not record them all a second time.
struct Tally {
    label: String,
    started: Instant,
    last_sent: Instant,
    requests: u64,
    errors: u64,
    ttft: Histogram<u64>,
}

impl Tally {
    fn new(label: &str) -> Self {
        let now = Instant::now();
        Tally {
            label: label.to_string(),
            started: now,
            last_sent: now,
            requests: 0,
            errors: 0,
            ttft: new_histogram(),
        }
    }

    fn progress(&self) -> LoadProgress {
        let elapsed_s = self.started.elapsed().as_secs_f64();
        LoadProgress {
            label: self.label.clone(),
            requests: self.requests,
            errors: self.errors,
            elapsed_s,
            requests_per_s: self.requests as f64 / elapsed_s.max(1e-3),
            ttft_p50_ms: (!self.ttft.is_empty()).then(|| percentiles(&self.ttft).p50),
        }
    }

    /// Counts `rec`; the figures when they are due to be sent.
    fn record(&mut self, rec: &RequestRecord) -> Option<LoadProgress> {
        self.requests += 1;
        match (rec.error, rec.ttft_us()) {
            (Some(_), _) => self.errors += 1,
            (None, Some(t)) => self.ttft.saturating_record(t.max(1)),
            (None, None) => {}
        }
        (self.last_sent.elapsed() >= PROGRESS_EVERY).then(|| {
            self.last_sent = Instant::now();
            self.progress()
        })
    }
}

/// A report's state in short: what an event line says of it.
#[derive(Debug, serde::Serialize)]
pub struct ReportState<'a> {
    /// The run has ended (decided or interrupted).
    pub complete: bool,
    /// The decision so far (`release`, `observe`, `rebuild`, `expand`); `None`: none yet.
    pub verdict: Option<crate::report::Verdict>,
    /// Why, in words.
    pub verdict_reason: &'a str,
    /// Checks decided so far.
    pub checks: usize,
    /// Of them, failed.
    pub failed: usize,
}

impl Event {
    /// The report as it may leave the process ([`redacted`]): [`Event::ReportFinished`] when
    /// it is `last`, else [`Event::ReportUpdated`].
    pub fn report(report: &Report, last: bool) -> Self {
        let report = Arc::new(redacted(report));
        if last {
            Event::ReportFinished(report)
        } else {
            Event::ReportUpdated(report)
        }
    }
}

/// The report as it may leave the process: URL passwords, Authorization headers and
/// token-shaped words in any of its texts (a server's error body, a log line) redacted,
/// so no reporter (the report files, the JSON event lines) sees a secret.
/// (A report that does not survive the round trip through JSON, e.g. a NaN figure, goes
/// out as it is: its URLs carry no userinfo and its log lines were redacted at triage.)
fn redacted(report: &Report) -> Report {
    crate::redact::redact_serde(report).unwrap_or_else(|_| report.clone())
}

impl<'a> From<&'a Report> for ReportState<'a> {
    fn from(r: &'a Report) -> Self {
        ReportState {
            complete: r.complete,
            verdict: r.verdict,
            verdict_reason: &r.verdict_reason,
            checks: r.checks.len(),
            failed: r
                .checks
                .iter()
                .filter(|c| c.status == crate::report::Status::Fail)
                .count(),
        }
    }
}

fn report_state<S: serde::Serializer>(report: &Arc<Report>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&ReportState::from(report.as_ref()), s)
}

/// A consumer of the event stream. Called from the run's tasks, so it must be cheap
/// and must not block for long. A reporter that cannot do its part (a report file or
/// stdout that cannot be written) returns the error: the run stops with it at its next
/// step ([`Events::check`]), and the CLI exits with the code the error calls for.
pub trait Reporter: Send + Sync {
    /// Handles one event; an error stops the run at its next step.
    fn report(&self, event: &Event) -> Result<(), ReportError>;
}

/// Why a reporter could not report an event; its cause chain is kept whole, so the CLI
/// can tell an output that could not be written (exit 4) from other failures.
#[derive(Debug)]
pub struct ReportError(anyhow::Error);

impl ReportError {
    /// The error, with its cause chain.
    pub fn into_inner(self) -> anyhow::Error {
        self.0
    }
}

impl From<anyhow::Error> for ReportError {
    fn from(e: anyhow::Error) -> Self {
        ReportError(e)
    }
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

/// A reporter that ignores everything (library callers that only want the result).
pub struct Silent;

impl Reporter for Silent {
    fn report(&self, _: &Event) -> Result<(), ReportError> {
        Ok(())
    }
}

/// Sends every event to each of several reporters, in order; every one of them gets it,
/// and the first error is returned.
pub struct Tee(pub Vec<Arc<dyn Reporter>>);

impl Reporter for Tee {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        let mut first = Ok(());
        for r in &self.0 {
            let done = r.report(event);
            if first.is_ok() {
                first = done;
            }
        }
        first
    }
}

/// The handle a run carries: cheap to clone, shared by its tasks. It keeps the first
/// error a reporter returned until the run collects it ([`Events::check`]).
#[derive(Clone)]
pub struct Events {
    reporter: Arc<dyn Reporter>,
    failed: Arc<Mutex<Option<anyhow::Error>>>,
}

impl Default for Events {
    fn default() -> Self {
        Events::new(Arc::new(Silent))
    }
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    /// A handle that sends every event to `reporter`.
    pub fn new(reporter: Arc<dyn Reporter>) -> Self {
        Events {
            reporter,
            failed: Arc::default(),
        }
    }

    /// The same events, sent to `first` before the reporters they go to now (one run:
    /// the first error of any of them is kept for both handles).
    pub fn and_first(&self, first: Arc<dyn Reporter>) -> Events {
        Events {
            reporter: Arc::new(Tee(vec![first, self.reporter.clone()])),
            failed: self.failed.clone(),
        }
    }

    /// Sends `event` to the reporters; an error one of them returns is kept for
    /// [`Events::check`] (the run's tasks go on until their next step).
    pub fn emit(&self, event: Event) {
        if let Err(e) = self.reporter.report(&event) {
            if let Ok(mut failed) = self.failed.lock() {
                failed.get_or_insert(e.into_inner());
            }
        }
    }

    /// The first error a reporter returned since the last call: the run stops with it. A
    /// reporter writes the run's outputs, so its failure is of kind
    /// [`crate::ErrorKind::Write`], whatever its own error type.
    pub fn check(&self) -> anyhow::Result<()> {
        let failed = self.failed.lock().ok().and_then(|mut f| f.take());
        failed.map_or(Ok(()), |e| {
            Err(crate::Error::new(crate::ErrorKind::Write, e).into())
        })
    }

    /// Emits [`Event::Notice`].
    pub fn notice(&self, text: impl Into<String>) {
        self.emit(Event::Notice(text.into()));
    }

    /// Emits [`Event::Warning`].
    pub fn warning(&self, text: impl Into<String>) {
        self.emit(Event::Warning(text.into()));
    }

    /// Announces a load; the handle gives the callback its workers send each record to
    /// (each becomes an [`Event::Request`], and the load's count sends
    /// [`Event::LoadProgress`]) and ends the load with [`LoadTracker::finish`].
    pub fn load_started(&self, label: &str, planned: Option<u64>) -> LoadTracker {
        self.emit(Event::LoadStarted {
            label: label.to_string(),
            planned,
        });
        LoadTracker {
            events: self.clone(),
            tally: Arc::new(Mutex::new(Tally::new(label))),
        }
    }
}

/// One load under way: its running count, and the events it reports to.
pub struct LoadTracker {
    events: Events,
    tally: Arc<Mutex<Tally>>,
}

impl LoadTracker {
    /// The callback the load's workers send each finished request to.
    pub fn on_record(&self) -> OnRecord {
        let (events, tally) = (self.events.clone(), self.tally.clone());
        Arc::new(move |rec: &RequestRecord| {
            events.emit(Event::Request(Box::new(rec.clone())));
            let due = tally.lock().ok().and_then(|mut t| t.record(rec));
            if let Some(p) = due {
                events.emit(Event::LoadProgress(p));
            }
        })
    }

    /// Emits [`Event::LoadFinished`] with the load's final figures.
    pub fn finish(self) {
        let progress = match self.tally.lock() {
            Ok(t) => t.progress(),
            Err(poisoned) => poisoned.into_inner().progress(),
        };
        self.events.emit(Event::LoadFinished(progress));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reporter whose output is gone, with an error type of its own (as the binary's).
    struct Broken;

    #[derive(Debug, thiserror::Error)]
    #[error("stdout is full")]
    struct Full;

    impl Reporter for Broken {
        fn report(&self, _: &Event) -> Result<(), ReportError> {
            Err(anyhow::Error::new(Full).into())
        }
    }

    #[test]
    fn a_reporters_failure_stops_the_run_as_a_write_error_with_its_cause_kept() {
        let events = Events::new(Arc::new(Broken));
        assert!(events.check().is_ok(), "nothing reported yet");
        events.notice("one");
        events.notice("two");
        let e = events.check().unwrap_err();
        assert_eq!(crate::Error::kind_of(&e), crate::ErrorKind::Write);
        let typed = e.downcast_ref::<crate::Error>().expect("a typed error");
        assert!(typed.causes().any(|c| c.is::<Full>()), "{e:#}");
        assert_eq!(format!("{e}"), "stdout is full");
        // The first error only, once.
        assert!(events.check().is_ok());
    }

    /// Keeps every event it is sent.
    #[derive(Default)]
    struct Kept(Mutex<Vec<Event>>);

    impl Reporter for Kept {
        fn report(&self, event: &Event) -> Result<(), ReportError> {
            self.0.lock().unwrap().push(event.clone());
            Ok(())
        }
    }

    #[test]
    fn a_load_sends_its_running_figures_at_most_every_interval_and_its_final_ones_at_the_end() {
        let kept = Arc::new(Kept::default());
        let events = Events::new(kept.clone());
        let step = events.load_started("step", Some(4));
        let on_record = step.on_record();
        let ok = RequestRecord {
            start_us: 0,
            first_token_us: Some(100_000),
            end_us: 150_000,
            http_status: Some(200),
            ..Default::default()
        };
        let failed = RequestRecord {
            error: Some(crate::client::ErrorKind::Timeout),
            ..Default::default()
        };
        on_record(&failed);
        on_record(&ok);
        std::thread::sleep(PROGRESS_EVERY);
        on_record(&ok);
        on_record(&ok);
        step.finish();
        let got = kept.0.lock().unwrap();
        let progress: Vec<&LoadProgress> = got
            .iter()
            .filter_map(|e| match e {
                Event::LoadProgress(p) => Some(p),
                _ => None,
            })
            .collect();
        // Four requests within one interval but the last two: one snapshot, after the third.
        assert_eq!(progress.len(), 1, "{got:?}");
        assert_eq!((progress[0].requests, progress[0].errors), (3, 1));
        let Some(Event::LoadFinished(end)) = got.last() else {
            panic!("{got:?}")
        };
        assert_eq!(
            (end.label.as_str(), end.requests, end.errors),
            ("step", 4, 1)
        );
        let ttft = end.ttft_p50_ms.unwrap();
        assert!((ttft - 100.0).abs() < 1.0, "{ttft}");
        assert!(end.requests_per_s > 0.0);
        drop(got);
        // A load with no answered request has no TTFT yet.
        let empty = events.load_started("empty", None);
        empty.on_record()(&failed);
        empty.finish();
        let got = kept.0.lock().unwrap();
        let Some(Event::LoadFinished(end)) = got.last() else {
            panic!("{got:?}")
        };
        assert_eq!((end.requests, end.ttft_p50_ms), (1, None));
    }
}
