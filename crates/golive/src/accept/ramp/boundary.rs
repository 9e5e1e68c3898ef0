//! The boundary search (issue 27): after a ramp step fails on load, the bracket the doubling
//! ramp left (the last step of that kind that held, the failing one) is narrowed to
//! [`BOUNDARY_WIDTH`] by bisecting the concurrency, each search step a ramp step of its own;
//! check `ramp_boundary` records where it ended.

use std::time::Duration;

use serde_json::json;

use super::{step_kind, Ramp, RampOutcome, StepPlan, TransportTally};
use crate::report::{Check, CheckId, Impact, RampStep, Stage, Status};

/// The search stops when the bracket's width is at most this share of its lower end (or one
/// request wide).
pub const BOUNDARY_WIDTH: f64 = 0.10;

/// Why the boundary search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SearchEnd {
    /// The bracket is within [`BOUNDARY_WIDTH`] of its lower end.
    Narrow,
    /// The two ends are one request apart.
    OneApart,
    /// `--boundary-budget` was spent.
    Budget,
    /// A search step failed on error answers, not load: the server, not capacity.
    NotLoad,
}

impl SearchEnd {
    fn text(self) -> &'static str {
        match self {
            SearchEnd::Narrow => "within 10% of the holding step",
            SearchEnd::OneApart => "one request apart",
            SearchEnd::Budget => "the --boundary-budget ran out first",
            SearchEnd::NotLoad => "a search step failed on error answers, not load",
        }
    }
}

/// The bracket of the search: the highest holding and the lowest failing concurrency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bracket {
    holds: u32,
    fails: u32,
}

impl Bracket {
    /// Why the search should end here, if it should.
    fn end(&self) -> Option<SearchEnd> {
        let width = self.fails.saturating_sub(self.holds);
        if f64::from(width) <= BOUNDARY_WIDTH * f64::from(self.holds) {
            Some(SearchEnd::Narrow)
        } else if width <= 1 {
            Some(SearchEnd::OneApart)
        } else {
            None
        }
    }

    fn middle(&self) -> u32 {
        self.holds + (self.fails - self.holds) / 2
    }

    /// The width as a share of the holding end.
    fn width(&self) -> f64 {
        f64::from(self.fails - self.holds) / f64::from(self.holds.max(1))
    }
}

impl Ramp<'_> {
    /// Bisects the concurrency between the last step of `failed`'s kind that held and
    /// `failed`, holding its prompt and output lengths, until the bracket is narrow, one
    /// request wide, the budget is spent, or a step fails without load. Each search step is
    /// kept like a ramp step; the result is the `ramp_boundary` check.
    pub(super) async fn search(
        &self,
        failed: &StepPlan,
        outcome: &mut RampOutcome,
        transport: &mut TransportTally,
        on_step: &mut impl FnMut(&RampStep, &Check),
    ) -> Option<Check> {
        let holds = outcome
            .steps
            .iter()
            .filter(|s| step_kind(&s.label) == failed.kind() && s.concurrency < failed.concurrency)
            .filter(|s| s.status != Some(Status::Fail))
            .map(|s| s.concurrency)
            .max()?;
        let mut bracket = Bracket {
            holds,
            fails: failed.concurrency,
        };
        let started = std::time::Instant::now();
        let mut searched = 0;
        let end = loop {
            if let Some(end) = bracket.end() {
                break end;
            }
            if started.elapsed() >= self.cfg.boundary_budget {
                break SearchEnd::Budget;
            }
            let p = failed.searching(bracket.middle());
            let done = self.step(&p, &outcome.steps, transport).await;
            searched += 1;
            on_step(&done.step, &done.check);
            outcome.steps.push(done.step);
            outcome.checks.push(done.check);
            match (done.failed, done.capacity) {
                (false, _) => bracket.holds = p.concurrency,
                (true, true) => {
                    bracket.fails = p.concurrency;
                    outcome.boundary = Some(p.boundary_text());
                }
                (true, false) => break SearchEnd::NotLoad,
            }
        };
        Some(boundary_check(
            failed,
            bracket,
            end,
            searched,
            started.elapsed(),
        ))
    }
}

impl StepPlan {
    /// The same request at another concurrency, as a step of the boundary search.
    fn searching(&self, concurrency: u32) -> StepPlan {
        let what = self.label.split_once(" x ").map_or("", |(_, r)| r);
        let what = what.trim_end_matches(", boundary search");
        StepPlan {
            label: format!("{concurrency} x {what}, boundary search"),
            concurrency,
            ..self.clone()
        }
    }
}

/// `ramp_boundary`: where the search left the boundary of the failing kind of request.
fn boundary_check(
    failed: &StepPlan,
    bracket: Bracket,
    end: SearchEnd,
    searched: u32,
    took: Duration,
) -> Check {
    let kind = failed.kind();
    let mut c = Check::new(
        CheckId::RampBoundary,
        Stage::Ramp,
        Status::Pass,
        format!("the boundary of {kind} requests found to within 10% (bisecting concurrency)"),
    );
    c.measurement = format!(
        "{kind} requests hold at concurrency {} and fail at {}: bracket width {:.0}%, {} ({searched} search step(s), {:.0} s){}",
        bracket.holds,
        bracket.fails,
        bracket.width() * 100.0,
        end.text(),
        took.as_secs_f64(),
        if kind == "long" {
            format!("; the search holds the failing step's context, {} tokens", failed.context)
        } else {
            String::new()
        }
    );
    if end == SearchEnd::Budget {
        c.status = Status::Warn;
        c.next_step = "raise --boundary-budget to narrow the bracket".into();
    }
    c.impact = Impact::Info;
    c.data = json!({
        "kind": kind, "holds": bracket.holds, "fails": bracket.fails,
        "width": bracket.width(), "end": format!("{end:?}").to_lowercase(),
        "search_steps": searched, "seconds": took.as_secs_f64(),
        "prompt_tokens": failed.prompt_tokens, "context": failed.context,
    });
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_bisects_until_within_ten_percent_or_one_request_apart() {
        let b = |holds, fails| Bracket { holds, fails };
        assert_eq!(b(8, 16).end(), None);
        assert_eq!(b(8, 16).middle(), 12);
        // 10 of 11: 10% of the holding end.
        assert_eq!(b(10, 11).end(), Some(SearchEnd::Narrow));
        assert_eq!(b(12, 13).end(), Some(SearchEnd::Narrow));
        // Below 10 the integers end it first.
        assert_eq!(b(3, 4).end(), Some(SearchEnd::OneApart));
        assert_eq!(b(20, 23).end(), None);
        assert_eq!(b(40, 44).end(), Some(SearchEnd::Narrow));
        assert!((b(40, 44).width() - 0.1).abs() < 1e-9);
        // The search step is the failing one at another concurrency.
        let p = StepPlan {
            label: "16 x long (80 tokens context)".into(),
            concurrency: 16,
            prompt_tokens: 72,
            max_tokens: 8,
            context: 80,
        };
        let s = p.searching(12).searching(13);
        assert_eq!(s.label, "13 x long (80 tokens context), boundary search");
        assert_eq!((s.concurrency, s.prompt_tokens, s.kind()), (13, 72, "long"));
    }
}
