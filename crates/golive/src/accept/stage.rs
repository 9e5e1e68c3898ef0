//! The shape of an accept stage: the resolved [`AcceptPlan`](super::plan::AcceptPlan) and a
//! [`StageCtx`] in, a [`StageResult`] out, filled by the stage itself. The run merges every
//! result into the report and saves it; a long stage (the ramp) hands in parts as it goes, so
//! an interrupted run keeps them.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::outputs::Publisher;
use super::silence::GapRow;
use crate::events::{Event, Events};
use crate::report::{
    AgentConformance, Baseline, Check, CheckId, Measurements, Report, Stage, Status,
};

/// What one stage (or part of one) adds to the run.
#[derive(Default)]
pub(super) struct StageResult {
    /// Its checks, in order.
    pub checks: Vec<Check>,
    /// Its measurements: the stage fills its own list.
    pub measurements: Measurements,
    /// Its part of the baseline ([`Baseline::merge`] says how parts combine).
    pub baseline: Baseline,
    /// What the later stages read of it.
    pub carry: Carry,
}

/// What a stage leaves for the later ones, outside the report.
#[derive(Default)]
pub(super) struct Carry {
    /// The ramp's accepted concurrency and that step's request rate: the soak's load.
    pub accepted: Option<(u32, Option<f64>)>,
    /// The soak's stream gaps (the ramp's are in its steps).
    pub soak_gaps: Option<GapRow>,
    /// The agent cases mixed into the soak, with its concurrency.
    pub soak_agent: Option<(u32, AgentConformance)>,
}

impl StageResult {
    pub fn of_checks(checks: Vec<Check>) -> Self {
        StageResult {
            checks,
            ..Default::default()
        }
    }

    /// A stage that did not run: one `skip` check saying why.
    pub fn skipped(id: CheckId, stage: Stage, why: &str) -> Self {
        let mut c = Check::new(id, stage, Status::Skip, format!("{id} stage"));
        c.measurement = format!("not run: {why}");
        Self::of_checks(vec![c])
    }

    fn apply(self, report: &mut Report, carry: &mut Carry) {
        report.checks.extend(self.checks);
        let m = &mut report.measurements;
        m.prefix_cache.extend(self.measurements.prefix_cache);
        m.ramp.extend(self.measurements.ramp);
        m.soak.extend(self.measurements.soak);
        report.baseline.merge(self.baseline);
        carry.accepted = self.carry.accepted.or(carry.accepted);
        carry.soak_gaps = self.carry.soak_gaps.or(carry.soak_gaps.take());
        carry.soak_agent = self.carry.soak_agent.or(carry.soak_agent.take());
    }
}

/// The run's report as the stages fill it, and where it is saved.
pub(super) struct StageCtx<'a> {
    publisher: &'a Publisher,
    kept: Mutex<Kept<'a>>,
}

struct Kept<'a> {
    report: &'a mut Report,
    carry: Carry,
}

impl<'a> StageCtx<'a> {
    pub fn new(publisher: &'a Publisher, report: &'a mut Report) -> Self {
        StageCtx {
            publisher,
            kept: Mutex::new(Kept {
                report,
                carry: Carry::default(),
            }),
        }
    }

    pub fn events(&self) -> &Events {
        &self.publisher.events
    }

    fn lock(&self) -> MutexGuard<'_, Kept<'a>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Merges `part` into the report, unsaved.
    pub fn apply(&self, part: StageResult) {
        let mut kept = self.lock();
        let Kept { report, carry } = &mut *kept;
        part.apply(report, carry);
    }

    /// Saves the report as it stands (report.json).
    pub fn publish(&self) -> anyhow::Result<()> {
        self.publisher.update(self.lock().report)
    }

    /// Merges `part` into the report and saves it.
    pub fn keep(&self, part: StageResult) -> anyhow::Result<()> {
        self.apply(part);
        self.publish()
    }

    /// Reads or changes the report in place.
    pub fn edit<R>(&self, f: impl FnOnce(&mut Report) -> R) -> R {
        f(self.lock().report)
    }

    /// Reads what earlier stages left.
    pub fn carried<R>(&self, f: impl FnOnce(&Carry) -> R) -> R {
        f(&self.lock().carry)
    }
}

/// Announces stage changes: the previous stage finished, the next one started.
/// The checks a stage added are reported when it ends.
pub(super) struct StageTracker {
    current: Option<Stage>,
    /// Checks of the report already reported.
    seen: usize,
}

impl StageTracker {
    pub fn new() -> Self {
        StageTracker {
            current: None,
            seen: 0,
        }
    }

    pub fn enter(&mut self, next: Stage, ctx: &StageCtx<'_>) {
        self.end(ctx);
        ctx.events().emit(Event::StageStarted(next));
        self.current = Some(next);
    }

    pub fn end(&mut self, ctx: &StageCtx<'_>) {
        let (new, total) = ctx.edit(|r| {
            (
                r.checks[self.seen.min(r.checks.len())..].to_vec(),
                r.checks.len(),
            )
        });
        for c in new {
            ctx.events().emit(Event::CheckResult(Box::new(c)));
        }
        self.seen = total;
        if let Some(done) = self.current.take() {
            ctx.events().emit(Event::StageFinished(done));
        }
    }
}
