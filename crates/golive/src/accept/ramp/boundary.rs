//! The boundary search (issue 27): after a ramp step fails on load, the bracket the doubling
//! ramp left (the last step of that kind that held, the failing one) is narrowed to
//! [`BOUNDARY_WIDTH`], each search step a ramp step of its own; check `ramp_boundary`
//! records where it ended.
//!
//! It bisects the concurrency first (`--boundary-by concurrency`). Integers cannot bracket a
//! small server to 10% (4 slots: 4 holds, 5 fails, 25% apart), so where the two ends are one
//! request apart and still wider, the search goes on in the offered request rate: steps of
//! the failing kind sent open loop at a constant rate (see [`super::step_load`]), from the
//! holding step's goodput up (a probe 10% above it, then 25% above each rate that held) until
//! one fails, then bisected. `--boundary-by rate` searches the rate straight after the
//! doubling ramp.

use std::time::Instant;

use serde_json::json;

use super::{rate_text, repeat_of, step_kind, BoundaryBy, Ramp, RampOutcome, StepDone, StepPlan};
use super::{RampConfig, TransportTally};
use crate::report::{Check, CheckId, Impact, RampStep, Stage, Status};

/// The search stops when the bracket's width is at most this share of its lower end (or one
/// request wide).
pub const BOUNDARY_WIDTH: f64 = 0.10;

/// While the rate search has no failing rate, each probe after the first is this factor
/// above the last rate that held.
const RATE_WIDEN: f64 = 1.25;

/// A rate step sends at least this many requests per request in flight at the holding step,
/// about as many service times as it lasts near the boundary: an overload of `e` (the
/// offered rate `1 + e` times the capacity) queues the step's last requests about
/// `e x ROUNDS` service times, which a latency objective a few tenths of a service time
/// above the service time sees from `e` of a few percent.
const RATE_STEP_ROUNDS: u32 = 10;

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
    /// golive could not keep a rate step's schedule: the client, not the server.
    ClientLimited,
}

impl SearchEnd {
    fn text(self) -> &'static str {
        match self {
            SearchEnd::Narrow => "within 10% of the holding end",
            SearchEnd::OneApart => "one request apart",
            SearchEnd::Budget => "the --boundary-budget ran out first",
            SearchEnd::NotLoad => "a search step failed on error answers, not load",
            SearchEnd::ClientLimited => {
                "golive could not keep a rate step's schedule (the client, not the server)"
            }
        }
    }
}

/// What a search step showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Showed {
    Holds,
    /// It failed with evidence of load.
    FailsOnLoad,
    /// It failed on error answers alone.
    FailsNotLoad,
    /// The client fell behind the step's schedule.
    ClientLimited,
}

impl Showed {
    fn of(done: &StepDone) -> Showed {
        match (done.client_limited, done.failed, done.capacity) {
            (true, _, _) => Showed::ClientLimited,
            (false, false, _) => Showed::Holds,
            (false, true, true) => Showed::FailsOnLoad,
            (false, true, false) => Showed::FailsNotLoad,
        }
    }

    /// The end of the search a step that showed this makes, whatever the bracket.
    fn end(self) -> Option<SearchEnd> {
        match self {
            Showed::FailsNotLoad => Some(SearchEnd::NotLoad),
            Showed::ClientLimited => Some(SearchEnd::ClientLimited),
            Showed::Holds | Showed::FailsOnLoad => None,
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

/// The bracket of the rate search, in requests per second offered: the highest rate that
/// held (at first the holding ramp step's goodput) and the lowest that failed (none while
/// the search still widens upwards).
#[derive(Debug, Clone, Copy, PartialEq)]
struct RateBracket {
    holds: f64,
    fails: Option<f64>,
    /// Rate steps measured, and how many of them held.
    probes: u32,
    held: u32,
}

impl RateBracket {
    /// The search from a rate that held.
    fn from(holds: f64) -> Self {
        RateBracket {
            holds,
            fails: None,
            probes: 0,
            held: 0,
        }
    }

    /// Why the search should end here, if it should: within [`BOUNDARY_WIDTH`] of the
    /// holding rate (up to rounding, so that a first probe 10% above it that fails ends it).
    fn end(&self) -> Option<SearchEnd> {
        self.width()
            .filter(|w| *w <= BOUNDARY_WIDTH + 1e-9)
            .map(|_| SearchEnd::Narrow)
    }

    /// The next rate to probe: 10% above the holding rate first, then 25% above each rate
    /// that held until one fails; then the middle of the bracket.
    fn next(&self) -> f64 {
        match self.fails {
            Some(fails) => (self.holds + fails) / 2.0,
            None if self.probes == 0 => self.holds * (1.0 + BOUNDARY_WIDTH),
            None => self.holds * RATE_WIDEN,
        }
    }

    /// The bracket after a probe at `rate` showed `showed`; the search's end if it ends there.
    fn after(&mut self, rate: f64, showed: Showed) -> Option<SearchEnd> {
        self.probes += 1;
        match showed {
            Showed::Holds => {
                self.holds = rate;
                self.held += 1;
            }
            Showed::FailsOnLoad => self.fails = Some(rate),
            Showed::FailsNotLoad | Showed::ClientLimited => return showed.end(),
        }
        self.end()
    }

    /// The width as a share of the holding rate, once a rate failed.
    fn width(&self) -> Option<f64> {
        self.fails
            .map(|f| (f - self.holds) / self.holds.max(f64::MIN_POSITIVE))
    }
}

/// Where a boundary search stands.
struct Search {
    concurrency: Bracket,
    /// The rate search's bracket, once it began.
    rate: Option<RateBracket>,
    /// Why it ended (none: not yet).
    end: Option<SearchEnd>,
    /// Search steps measured, of both kinds.
    steps: u32,
    /// Requests of each rate step, and so its cap on requests in flight (set when the rate
    /// search begins, from the concurrency bracket as the bisection left it).
    rate_requests: u32,
    started: Instant,
}

impl Search {
    fn spent(&self, cfg: &RampConfig) -> bool {
        self.started.elapsed() >= cfg.boundary_budget
    }

    /// Whether the rate is searched next: asked for, or the concurrency search ended with
    /// its two ends one request apart and still wider than [`BOUNDARY_WIDTH`].
    fn wants_rate(&self) -> bool {
        matches!(self.end, None | Some(SearchEnd::OneApart))
    }
}

impl Ramp<'_> {
    /// Narrows the bracket between the last step of `failed`'s kind that held and `failed`,
    /// holding its prompt and output lengths: the concurrency (unless `--boundary-by rate`),
    /// then the offered rate where the concurrency leaves it one request wide (see the
    /// module), until the bracket is within 10%, the budget is spent, a step fails without
    /// load, or the client cannot keep a rate step's schedule. Each search step is kept like
    /// a ramp step; the result is the `ramp_boundary` check.
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
        let concurrency = Bracket {
            holds,
            fails: failed.concurrency,
        };
        let mut search = Search {
            concurrency,
            rate: None,
            end: concurrency.end().filter(|e| *e == SearchEnd::Narrow),
            steps: 0,
            rate_requests: 0,
            started: Instant::now(),
        };
        if self.cfg.boundary_by == BoundaryBy::Concurrency {
            let end = self
                .bisect_concurrency(failed, &mut search, outcome, transport, on_step)
                .await;
            search.end = Some(end);
        }
        if search.wants_rate() {
            let from = holding_rate(outcome, failed, search.concurrency.holds);
            let end = self
                .search_rate(failed, from, &mut search, outcome, transport, on_step)
                .await;
            search.end = Some(end);
        }
        Some(boundary_check(failed, &search))
    }

    /// Bisects the concurrency until the bracket is narrow or one request wide (or another
    /// end); returns why it ended.
    async fn bisect_concurrency(
        &self,
        failed: &StepPlan,
        search: &mut Search,
        outcome: &mut RampOutcome,
        transport: &mut TransportTally,
        on_step: &mut impl FnMut(&RampStep, &Check),
    ) -> SearchEnd {
        loop {
            if let Some(end) = search.concurrency.end() {
                return end;
            }
            if search.spent(self.cfg) {
                return SearchEnd::Budget;
            }
            let p = failed.searching(search.concurrency.middle());
            let done = self.step(&p, &outcome.steps, transport).await;
            search.steps += 1;
            let showed = Showed::of(&done);
            outcome.keep(done, on_step);
            match showed {
                Showed::Holds => search.concurrency.holds = p.concurrency,
                Showed::FailsOnLoad => {
                    search.concurrency.fails = p.concurrency;
                    outcome.boundary = Some(p.boundary_text());
                }
                Showed::FailsNotLoad | Showed::ClientLimited => {
                    return showed.end().unwrap_or(SearchEnd::NotLoad)
                }
            }
        }
    }

    /// Searches the offered rate from `from` (a rate that held) until the bracket is within
    /// 10% (or another end); returns why it ended.
    async fn search_rate(
        &self,
        failed: &StepPlan,
        from: f64,
        search: &mut Search,
        outcome: &mut RampOutcome,
        transport: &mut TransportTally,
        on_step: &mut impl FnMut(&RampStep, &Check),
    ) -> SearchEnd {
        let mut bracket = RateBracket::from(from);
        search.rate_requests = rate_step_requests(self.cfg, search.concurrency);
        let end = loop {
            if let Some(end) = bracket.end() {
                break end;
            }
            if search.spent(self.cfg) {
                break SearchEnd::Budget;
            }
            let rate = bracket.next();
            let p = failed.at_rate(rate, search.rate_requests);
            let done = self.step(&p, &outcome.steps, transport).await;
            search.steps += 1;
            let showed = Showed::of(&done);
            outcome.keep(done, on_step);
            if let Some(end) = bracket.after(rate, showed) {
                break end;
            }
        };
        search.rate = Some(bracket);
        end
    }
}

/// The requests of one rate step: as many as the failing concurrency step sent, and at least
/// [`RATE_STEP_ROUNDS`] per request in flight at the holding step.
fn rate_step_requests(cfg: &RampConfig, bracket: Bracket) -> u32 {
    let closed = bracket.fails.saturating_mul(cfg.requests_per_stream.max(1));
    closed.max(RATE_STEP_ROUNDS.saturating_mul(bracket.holds.max(1)))
}

/// The rate the holding step of `failed`'s kind at concurrency `holds` sustained: its
/// goodput, or its request rate where it has none (no objectives) or none of its requests
/// met them.
fn holding_rate(outcome: &RampOutcome, failed: &StepPlan, holds: u32) -> f64 {
    let step = outcome
        .steps
        .iter()
        .zip(&outcome.request_rates)
        .rev()
        .filter(|(s, _)| s.rate.is_none() && repeat_of(&s.label).is_none())
        .filter(|(s, _)| step_kind(&s.label) == failed.kind() && s.concurrency == holds)
        .find(|(s, _)| s.status != Some(Status::Fail));
    step.map_or(0.0, |(s, rate)| {
        s.goodput
            .as_ref()
            .map(|g| g.requests_per_s)
            .filter(|g| *g > 0.0)
            .unwrap_or(*rate)
    })
}

impl StepPlan {
    /// The same request at another concurrency, as a step of the boundary search.
    fn searching(&self, concurrency: u32) -> StepPlan {
        StepPlan {
            label: format!("{concurrency} x {}, boundary search", self.what()),
            concurrency,
            rate: None,
            ..self.clone()
        }
    }

    /// The same request sent at `rate` per second, `requests` of them, as a step of the
    /// boundary search in the offered rate.
    fn at_rate(&self, rate: f64, requests: u32) -> StepPlan {
        StepPlan {
            label: format!(
                "{} req/s x {}, boundary search",
                rate_text(rate),
                self.what()
            ),
            concurrency: requests,
            rate: Some(rate),
            ..self.clone()
        }
    }
}

/// `ramp_boundary`: where the search left the boundary of the failing kind of request.
fn boundary_check(failed: &StepPlan, search: &Search) -> Check {
    let kind = failed.kind();
    let end = search.end.unwrap_or(SearchEnd::Budget);
    let by = match search.rate {
        Some(_) => "the offered rate",
        None => "concurrency",
    };
    let mut c = Check::new(
        CheckId::RampBoundary,
        Stage::Ramp,
        Status::Pass,
        format!("the boundary of {kind} requests found to within 10% (bisecting {by})"),
    );
    let context = match kind {
        "long" => format!(
            "; the search holds the failing step's context, {} tokens",
            failed.context
        ),
        _ => String::new(),
    };
    c.measurement = format!("{}{context}", bracket_text(kind, search, end));
    match end {
        SearchEnd::Budget => {
            c.status = Status::Warn;
            c.next_step = "raise --boundary-budget to narrow the bracket".into();
        }
        SearchEnd::ClientLimited => {
            c.status = Status::Warn;
            c.next_step = "golive fell behind a rate step's schedule: run it where it has CPU to spare to search the rate".into();
        }
        _ => {}
    }
    c.impact = Impact::Info;
    c.data = boundary_data(failed, search, end);
    c
}

/// `long requests hold at 0.58 req/s and fail at 0.63 req/s offered: bracket width 8%, ...`,
/// or at concurrency 10 and 11.
fn bracket_text(kind: &str, search: &Search, end: SearchEnd) -> String {
    let conc = search.concurrency;
    let steps = format!(
        "{} search step(s), {:.0} s",
        search.steps,
        search.started.elapsed().as_secs_f64()
    );
    let Some(rate) = search.rate else {
        return format!(
            "{kind} requests hold at concurrency {} and fail at {}: bracket width {:.0}%, {} ({steps})",
            conc.holds,
            conc.fails,
            conc.width() * 100.0,
            end.text()
        );
    };
    let holds = match rate.held {
        0 => format!(
            "{} req/s (the goodput at concurrency {})",
            rate_text(rate.holds),
            conc.holds
        ),
        _ => format!("{} req/s", rate_text(rate.holds)),
    };
    let bracket = match (rate.fails, rate.width()) {
        (Some(f), Some(w)) => format!(
            "{kind} requests hold at {holds} and fail at {} req/s offered: bracket width {:.0}%",
            rate_text(f),
            w * 100.0
        ),
        _ => format!("{kind} requests hold at {holds} offered, no failing rate found"),
    };
    format!(
        "{bracket}, {} (in concurrency {} holds and {} fails; {steps})",
        end.text(),
        conc.holds,
        conc.fails
    )
}

/// The check's data: the bracket of the quantity bisected (`by`), the concurrency one always.
fn boundary_data(failed: &StepPlan, search: &Search, end: SearchEnd) -> serde_json::Value {
    let conc = search.concurrency;
    let mut data = json!({
        "by": "concurrency", "kind": failed.kind(), "holds": conc.holds, "fails": conc.fails,
        "width": conc.width(), "end": format!("{end:?}").to_lowercase(),
        "search_steps": search.steps, "seconds": search.started.elapsed().as_secs_f64(),
        "prompt_tokens": failed.prompt_tokens, "context": failed.context,
    });
    if let Some(rate) = search.rate {
        data["by"] = json!("rate");
        data["rate_holds"] = json!(rate.holds);
        data["rate_fails"] = json!(rate.fails);
        data["width"] = json!(rate.width());
        data["rate_steps"] = json!(rate.probes);
        data["rate_step_requests"] = json!(search.rate_requests);
    }
    data
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
            rate: None,
        };
        let s = p.searching(12).searching(13);
        assert_eq!(s.label, "13 x long (80 tokens context), boundary search");
        assert_eq!((s.concurrency, s.prompt_tokens, s.kind()), (13, 72, "long"));
    }

    /// The rate search against a server that holds every rate up to `capacity` and no more,
    /// from `from`: the probes and the final bracket.
    fn search_against(capacity: f64, from: f64) -> (Vec<f64>, RateBracket) {
        let mut b = RateBracket::from(from);
        let mut probes = Vec::new();
        while b.end().is_none() {
            let rate = b.next();
            probes.push(rate);
            let showed = match rate <= capacity {
                true => Showed::Holds,
                false => Showed::FailsOnLoad,
            };
            b.after(rate, showed);
            assert!(probes.len() < 50, "no end: {probes:?}");
        }
        (probes, b)
    }

    #[test]
    fn the_rate_search_probes_ten_percent_up_widens_then_bisects_to_ten_percent() {
        // The first probe is 10% above the rate that held; failing, it ends the search there.
        let (probes, b) = search_against(1.05, 1.0);
        assert_eq!(probes.len(), 1);
        assert!((probes[0] - 1.1).abs() < 1e-12, "{probes:?}");
        assert_eq!((b.holds, b.fails, b.held), (1.0, Some(probes[0]), 0));
        assert_eq!(b.end(), Some(SearchEnd::Narrow));
        // Holding, the next is 25% above it, and so on until one fails; then bisection.
        let (probes, b) = search_against(2.0, 1.0);
        assert!((probes[1] - 1.1 * 1.25).abs() < 1e-12, "{probes:?}");
        assert!((probes[2] - 1.1 * 1.25 * 1.25).abs() < 1e-12, "{probes:?}");
        assert!(b.holds <= 2.0 && b.fails.unwrap() > 2.0, "{b:?}");
        // Wherever the capacity lies, the bracket ends around it and within 10%: the first
        // probe; when it holds, one per 25% up to past the capacity and two halvings of the
        // 25% bracket.
        for i in 0..300 {
            let capacity = 1.0 + f64::from(i) * 0.01;
            let (probes, b) = search_against(capacity, 1.0);
            let fails = b.fails.expect("a failing rate");
            assert!(b.holds <= capacity && capacity < fails, "{capacity}: {b:?}");
            assert!(
                b.width().unwrap() <= BOUNDARY_WIDTH + 1e-9,
                "{capacity}: {b:?}"
            );
            let widening = (capacity / 1.1).ln() / RATE_WIDEN.ln();
            let most = match capacity < 1.1 {
                true => 1,
                false => 1 + (widening.floor() as usize + 1) + 2,
            };
            assert!(probes.len() <= most, "{capacity}: {probes:?}");
        }
    }

    #[test]
    fn a_rate_step_without_load_evidence_or_off_schedule_ends_the_rate_search_as_it_was() {
        for (showed, end) in [
            (Showed::FailsNotLoad, SearchEnd::NotLoad),
            (Showed::ClientLimited, SearchEnd::ClientLimited),
        ] {
            let mut b = RateBracket::from(2.0);
            b.after(2.2, Showed::Holds);
            assert_eq!(b.after(2.75, showed), Some(end));
            // Neither a hold nor a failure: the bracket is the one before the step.
            assert_eq!((b.holds, b.fails, b.held, b.probes), (2.2, None, 1, 2));
            assert_eq!(b.width(), None);
        }
        let done = |client_limited, failed, capacity| StepDone {
            step: RampStep::default(),
            check: Check::new("x", Stage::Ramp, Status::Pass, "t"),
            failed,
            capacity,
            rate: 1.0,
            client_limited,
        };
        assert_eq!(Showed::of(&done(false, false, false)), Showed::Holds);
        assert_eq!(Showed::of(&done(false, true, true)), Showed::FailsOnLoad);
        assert_eq!(Showed::of(&done(false, true, false)), Showed::FailsNotLoad);
        assert_eq!(Showed::of(&done(true, true, true)), Showed::ClientLimited);
    }

    #[test]
    fn a_rate_step_is_the_failing_request_at_a_rate_named_in_its_label_and_id() {
        let p = StepPlan {
            label: "5 x long (256 tokens context), boundary search".into(),
            concurrency: 5,
            prompt_tokens: 240,
            max_tokens: 16,
            context: 256,
            rate: None,
        };
        let r = p.at_rate(0.6234, 40);
        assert_eq!(
            r.label,
            "0.623 req/s x long (256 tokens context), boundary search"
        );
        assert_eq!(
            (r.concurrency, r.rate, r.prompt_tokens),
            (40, Some(0.6234), 240)
        );
        assert_eq!((step_kind(&r.label), r.kind()), ("long", "long"));
        assert_eq!(super::super::step_id(&r), "ramp_r0p623_long");
        assert_eq!(p.at_rate(0.62, 40).label.split(' ').next(), Some("0.62"));
        // Rate steps of one search stay apart in their ids, and a repeat keeps the rate.
        assert_ne!(
            super::super::step_id(&p.at_rate(12.0, 40)),
            super::super::step_id(&p.at_rate(12.5, 40))
        );
        let recorded = RampStep {
            label: r.label.clone(),
            concurrency: 40,
            rate: r.rate,
            prompt_tokens: 240,
            max_tokens: 16,
            ..Default::default()
        };
        let again = StepPlan::again(&recorded, 2);
        assert_eq!((again.rate, again.concurrency), (Some(0.6234), 40));
        assert_eq!(super::super::step_id(&again), "ramp_r0p623_long_repeat2");
        assert_eq!(repeat_of(&again.label), Some((r.label.as_str(), 2)));
    }

    #[test]
    fn a_rate_step_sends_the_failing_steps_requests_and_ten_rounds_of_the_holding_one() {
        let cfg = |k| RampConfig {
            requests_per_stream: k,
            ..super::super::tests::config()
        };
        // 4 hold, 5 fail: 10 rounds of 4 in flight, above 5 x 4 requests per stream.
        let b = Bracket { holds: 4, fails: 5 };
        assert_eq!(rate_step_requests(&cfg(4), b), 40);
        assert_eq!(rate_step_requests(&cfg(16), b), 80);
    }
}
