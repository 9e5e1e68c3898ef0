//! The shape of an accept stage: the resolved [`AcceptPlan`](super::plan::AcceptPlan) and a
//! [`StageCtx`] in, a [`StageResult`] out, filled by the stage itself. The run merges every
//! result into the report; a long stage (the ramp) hands in parts as it goes, so an
//! interrupted run keeps them. The report leaves the run in one place, [`StageCtx::save`],
//! which runs beside the stages and writes it out each time it changed.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

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
    /// Its part of the baseline ([`merge_baseline`] says how parts combine).
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
        merge_baseline(&mut report.baseline, self.baseline);
        carry.accepted = self.carry.accepted.or(carry.accepted);
        carry.soak_gaps = self.carry.soak_gaps.or(carry.soak_gaps.take());
        carry.soak_agent = self.carry.soak_agent.or(carry.soak_agent.take());
    }
}

/// The run's report as the stages fill it; [`StageCtx::save`] writes it out.
pub(super) struct StageCtx<'a> {
    events: Events,
    kept: Mutex<Kept<'a>>,
    /// The report changed since it was last written.
    changed: Notify,
}

struct Kept<'a> {
    report: &'a mut Report,
    carry: Carry,
    /// The report is final: every file is written, and saving ends.
    finished: bool,
}

impl<'a> StageCtx<'a> {
    pub fn new(events: &Events, report: &'a mut Report) -> Self {
        StageCtx {
            events: events.clone(),
            kept: Mutex::new(Kept {
                report,
                carry: Carry::default(),
                finished: false,
            }),
            changed: Notify::new(),
        }
    }

    pub fn events(&self) -> &Events {
        &self.events
    }

    fn lock(&self) -> MutexGuard<'_, Kept<'a>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Merges `part` into the report, unsaved.
    pub fn apply(&self, part: StageResult) {
        let mut kept = self.lock();
        let Kept { report, carry, .. } = &mut *kept;
        part.apply(report, carry);
    }

    /// Has the report as it stands saved (report.json), at the run's next pause.
    pub fn publish(&self) {
        self.changed.notify_one();
    }

    /// Merges `part` into the report and has it saved.
    pub fn keep(&self, part: StageResult) {
        self.apply(part);
        self.publish();
    }

    /// The report is final: every file is written from it, and [`StageCtx::save`] ends.
    pub fn finish(&self) {
        self.lock().finished = true;
        self.publish();
    }

    /// Reads or changes the report in place.
    pub fn edit<R>(&self, f: impl FnOnce(&mut Report) -> R) -> R {
        f(self.lock().report)
    }

    /// Reads what earlier stages left.
    pub fn carried<R>(&self, f: impl FnOnce(&Carry) -> R) -> R {
        f(&self.lock().carry)
    }

    /// Runs beside the stages: each time the report changed, it goes to `publisher`
    /// (report.json), and once it is final, every file is written and saving ends. Changes
    /// that come faster than the disk are written once. A write that fails ends it with the
    /// error, and the run stops with it.
    pub async fn save(&self, publisher: &Publisher) -> anyhow::Result<()> {
        loop {
            self.changed.notified().await;
            let kept = self.lock();
            publisher.publish(kept.report, kept.finished)?;
            if kept.finished {
                return Ok(());
            }
        }
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

/// Adds a later stage's part of the baseline to `into`: a figure it measured replaces the
/// earlier one, except the peaks (KV-cache usage, waiting requests), which keep the higher,
/// and the accepted concurrency, which the first stage that accepts one sets (the ramp, else
/// the soak).
fn merge_baseline(into: &mut Baseline, later: Baseline) {
    fn peak(a: Option<f64>, b: Option<f64>) -> Option<f64> {
        match (a, b) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        }
    }
    let Baseline {
        cache_hit_ratio,
        ttft_p50_ms,
        ttft_p95_ms,
        itl_p95_ms,
        prefill_warm_ms,
        error_rate,
        accepted_concurrency,
        request_rate_rps,
        kv_cache_usage_max,
        waiting_max,
        capacity_rps,
        objectives,
    } = later;
    into.cache_hit_ratio = cache_hit_ratio.or(into.cache_hit_ratio);
    into.ttft_p50_ms = ttft_p50_ms.or(into.ttft_p50_ms);
    into.ttft_p95_ms = ttft_p95_ms.or(into.ttft_p95_ms);
    into.itl_p95_ms = itl_p95_ms.or(into.itl_p95_ms);
    into.prefill_warm_ms = prefill_warm_ms.or(into.prefill_warm_ms);
    into.error_rate = error_rate.or(into.error_rate);
    into.accepted_concurrency = into.accepted_concurrency.or(accepted_concurrency);
    into.request_rate_rps = request_rate_rps.or(into.request_rate_rps);
    into.kv_cache_usage_max = peak(into.kv_cache_usage_max, kv_cache_usage_max);
    into.waiting_max = peak(into.waiting_max, waiting_max);
    into.capacity_rps = capacity_rps.or(into.capacity_rps);
    into.objectives = objectives.or(into.objectives);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn save_writes_report_json_as_parts_come_and_every_file_once_final() {
        let dir = tempfile::tempdir().unwrap();
        let publisher = Publisher::new(&Events::default(), dir.path());
        let mut report = Report::new(vec!["http://x".into()]);
        let ctx = StageCtx::new(&publisher.events, &mut report);
        let json = dir.path().join("report.json");
        let work = async {
            ctx.keep(StageResult::of_checks(vec![Check::new(
                "basic_chat",
                Stage::Basic,
                Status::Pass,
                "t",
            )]));
            tokio::task::yield_now().await;
            // Saved at the pause, before the run is final.
            let saved = Report::load(dir.path()).unwrap();
            assert_eq!(saved.checks.len(), 1);
            assert!(!dir.path().join("report.md").exists());
            ctx.edit(|r| r.complete = true);
            ctx.finish();
            anyhow::Ok(())
        };
        runtime()
            .block_on(async { tokio::try_join!(work, ctx.save(&publisher)) })
            .unwrap();
        assert!(Report::load(dir.path()).unwrap().complete);
        for name in ["report.md", "junit.xml", "report.html"] {
            assert!(dir.path().join(name).exists(), "{name}");
        }
        assert!(json.exists());
    }

    #[test]
    fn a_save_that_fails_stops_the_stages_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the folder should be: nothing can be written under it.
        let blocked = dir.path().join("out");
        std::fs::write(&blocked, "").unwrap();
        let publisher = Publisher::new(&Events::default(), &blocked);
        let mut report = Report::new(vec![]);
        let ctx = StageCtx::new(&publisher.events, &mut report);
        let stages = async {
            ctx.publish();
            std::future::pending::<()>().await;
            anyhow::Ok(())
        };
        let both = async { tokio::try_join!(stages, ctx.save(&publisher)) };
        let e = runtime()
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), both).await })
            .expect("the failed write ends the run, not a hang")
            .expect_err("the failed write ends the run");
        let typed = e.downcast_ref::<crate::Error>().expect("a typed error");
        assert_eq!(typed.kind(), crate::ErrorKind::Write, "{e:#}");
    }

    #[test]
    fn a_later_stage_replaces_figures_keeps_peaks_and_the_first_accepted_concurrency() {
        let mut b = Baseline {
            ttft_p95_ms: Some(100.0),
            error_rate: Some(0.0),
            accepted_concurrency: Some(8),
            kv_cache_usage_max: Some(0.9),
            waiting_max: Some(2.0),
            prefill_warm_ms: Some(12.0),
            ..Baseline::default()
        };
        merge_baseline(
            &mut b,
            Baseline {
                ttft_p95_ms: Some(150.0),
                error_rate: Some(0.01),
                accepted_concurrency: Some(4),
                kv_cache_usage_max: Some(0.5),
                waiting_max: Some(7.0),
                request_rate_rps: Some(3.0),
                ..Baseline::default()
            },
        );
        assert_eq!(b.ttft_p95_ms, Some(150.0));
        assert_eq!(b.error_rate, Some(0.01));
        assert_eq!(b.accepted_concurrency, Some(8));
        assert_eq!(b.kv_cache_usage_max, Some(0.9));
        assert_eq!(b.waiting_max, Some(7.0));
        assert_eq!(b.request_rate_rps, Some(3.0));
        // What the later part did not measure stays.
        assert_eq!(b.prefill_warm_ms, Some(12.0));
        let mut none = Baseline::default();
        merge_baseline(
            &mut none,
            Baseline {
                accepted_concurrency: Some(4),
                ..Baseline::default()
            },
        );
        assert_eq!(none.accepted_concurrency, Some(4));
    }
}
