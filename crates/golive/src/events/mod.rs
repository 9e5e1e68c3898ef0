//! The event stream of the long-running capabilities (accept, load, watch).
//!
//! They never print: they send [`Event`]s to a [`Reporter`], as nextest's runner sends
//! `TestEventKind` to its display and JUnit writer. The terminal display, the
//! `golive watch --listen` endpoint, the report files of `accept` (report.json,
//! Markdown, JUnit, HTML: `accept::ReportFiles`, fed by [`Event::ReportUpdated`] and
//! [`Event::ReportFinished`]) and tests are reporters.

use std::sync::Arc;

pub mod watch;

use crate::client::RequestRecord;
use crate::load::OnRecord;
use crate::report::{Check, RampStep, Report, Stage};
use watch::{Evaluation, FleetEvaluation};

/// Something that happened during a run.
#[derive(Debug, Clone)]
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
    ReportUpdated(Arc<Report>),
    /// accept: the run ended, decided or interrupted; every report file is written
    /// from this final report.
    ReportFinished(Arc<Report>),
    /// A load (ramp step, soak, `golive load`) starts; `planned`: requests, if known.
    LoadStarted { label: String, planned: Option<u64> },
    /// One request of the current load finished.
    Request(Box<RequestRecord>),
    /// The current load ended.
    LoadFinished { label: String },
    /// A remark for the operator that changes nothing (a clamped setting, a missing file).
    Notice(String),
    /// A warning: something could not be done, the run goes on.
    Warning(String),
    /// watch: a scrape of `/metrics` answered, at `t` seconds.
    Scraped { t: f64 },
    /// watch: a scrape failed but the target is within its grace (a restart?).
    ScrapeFailed { t: f64, error: String },
    /// watch: a counter went down: the server restarted.
    CounterReset { t: f64, what: String },
    /// watch: a window was judged; `firing` is not empty when a trigger fired.
    Evaluated(Box<Evaluation>),
    /// watch --prometheus: a window over the fleet was judged.
    FleetEvaluated(Box<FleetEvaluation>),
    /// watch: the target did not answer (from the start, or longer than the grace).
    Unreachable(String),
}

/// A consumer of the event stream. Called from the run's tasks, so it must be cheap
/// and must not block for long.
pub trait Reporter: Send + Sync {
    fn report(&self, event: &Event);
}

/// A reporter that ignores everything (library callers that only want the result).
pub struct Silent;

impl Reporter for Silent {
    fn report(&self, _: &Event) {}
}

/// Sends every event to each of several reporters, in order.
pub struct Tee(pub Vec<Arc<dyn Reporter>>);

impl Reporter for Tee {
    fn report(&self, event: &Event) {
        for r in &self.0 {
            r.report(event);
        }
    }
}

/// The handle a run carries: cheap to clone, shared by its tasks.
#[derive(Clone)]
pub struct Events(Arc<dyn Reporter>);

impl Default for Events {
    fn default() -> Self {
        Events(Arc::new(Silent))
    }
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

impl Events {
    pub fn new(reporter: Arc<dyn Reporter>) -> Self {
        Events(reporter)
    }

    /// The same events, sent to `first` before the reporters they go to now.
    pub fn and_first(&self, first: Arc<dyn Reporter>) -> Events {
        Events(Arc::new(Tee(vec![first, self.0.clone()])))
    }

    pub fn emit(&self, event: Event) {
        self.0.report(&event);
    }

    pub fn notice(&self, text: impl Into<String>) {
        self.emit(Event::Notice(text.into()));
    }

    pub fn warning(&self, text: impl Into<String>) {
        self.emit(Event::Warning(text.into()));
    }

    /// Announces a load and gives the callback its workers send each record to.
    pub fn load_started(&self, label: &str, planned: Option<u64>) -> Option<OnRecord> {
        self.emit(Event::LoadStarted {
            label: label.to_string(),
            planned,
        });
        let events = self.clone();
        Some(Arc::new(move |rec: &RequestRecord| {
            events.emit(Event::Request(Box::new(rec.clone())))
        }))
    }

    pub fn load_finished(&self, label: &str) {
        self.emit(Event::LoadFinished {
            label: label.to_string(),
        });
    }
}
