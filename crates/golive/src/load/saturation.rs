//! Over-saturation of an open loop (issue 27 item 2), after GuideLLM's detector: requests
//! arrive faster than the server finishes them, so the requests in flight pile up and each
//! waits longer for its first token. Both show as a significantly positive slope over the
//! recent window (the slope's lower confidence bound above zero, and a rise that matters), and
//! then the run stops early: its statistics are kept, no one waits for timeouts.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Samples the detector needs in its window, of each series, before it judges.
const MIN_SAMPLES: usize = 12;
/// One-sided z for the slopes' lower bound (99.9%): a noisy run must not stop.
const Z: f64 = 3.09;
/// Samples kept per series (a hostile server cannot grow them).
const MAX_SAMPLES: usize = 4096;

/// Why an open loop stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// Seconds into the run.
    pub at_s: f64,
    /// The window the slopes were fitted over, in seconds.
    pub window_s: f64,
    /// Requests in flight: slope, per second.
    pub in_flight_slope: f64,
    /// Standard error of the in-flight slope.
    pub in_flight_se: f64,
    /// Time to first token: slope, ms per second.
    pub ttft_slope_ms: f64,
    /// Standard error of the TTFT slope, ms per second.
    pub ttft_se_ms: f64,
    /// Mean requests in flight over the window.
    pub in_flight_mean: f64,
    /// Mean TTFT over the window, ms.
    pub ttft_mean_ms: f64,
}

impl Saturation {
    /// `over-saturated at 23.1 s: in flight +4.20/s (±0.31), TTFT +180 ms/s (±22) over 20 s`
    /// (a window under 10 s in tenths: the accept ramp's rate steps judge over half a second).
    pub fn text(&self) -> String {
        let digits = usize::from(self.window_s < 10.0);
        format!(
            "over-saturated at {:.1} s: in flight {:+.2}/s (±{:.2}), TTFT {:+.0} ms/s (±{:.0}) over the last {:.digits$} s (mean {:.1} in flight, TTFT {:.0} ms)",
            self.at_s,
            self.in_flight_slope,
            self.in_flight_se,
            self.ttft_slope_ms,
            self.ttft_se_ms,
            self.window_s,
            self.in_flight_mean,
            self.ttft_mean_ms
        )
    }
}

/// A least-squares slope, its standard error and the mean of `y`.
fn fit(points: &VecDeque<(f64, f64)>) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 3 {
        return None;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    let rss: f64 = points
        .iter()
        .map(|(x, y)| (y - my - slope * (x - mx)).powi(2))
        .sum();
    let se = (rss / (n - 2.0) / sxx).sqrt();
    Some((slope, se, my))
}

/// Feeds on the run's samples; says when both series rise significantly.
#[derive(Debug)]
pub struct Detector {
    window: f64,
    in_flight: VecDeque<(f64, f64)>,
    ttft: VecDeque<(f64, f64)>,
}

impl Detector {
    /// A detector over the last `window` seconds.
    pub fn new(window: std::time::Duration) -> Self {
        Detector {
            window: window.as_secs_f64(),
            in_flight: VecDeque::new(),
            ttft: VecDeque::new(),
        }
    }

    /// A finished request at `t` seconds into the run, with `in_flight` requests still in
    /// flight and its TTFT (none when it failed before a token).
    pub fn add(&mut self, t: f64, in_flight: f64, ttft_ms: Option<f64>) -> Option<Saturation> {
        push(&mut self.in_flight, (t, in_flight), self.window);
        if let Some(v) = ttft_ms {
            push(&mut self.ttft, (t, v), self.window);
        }
        self.judge(t)
    }

    fn judge(&self, t: f64) -> Option<Saturation> {
        // Only once the window has filled: the run's first seconds always ramp up.
        let span = |s: &VecDeque<(f64, f64)>| {
            s.back().map_or(0.0, |b| b.0) - s.front().map_or(0.0, |f| f.0)
        };
        if self.in_flight.len() < MIN_SAMPLES
            || self.ttft.len() < MIN_SAMPLES
            || t < self.window
            || span(&self.in_flight) < 0.75 * self.window
        {
            return None;
        }
        let (fs, fse, fm) = fit(&self.in_flight)?;
        let (ts, tse, tm) = fit(&self.ttft)?;
        // Growth that goes on: the later half of the window still rises (the run's start,
        // when the requests in flight climb to their steady level, does not).
        let later: VecDeque<(f64, f64)> = self
            .in_flight
            .iter()
            .copied()
            .filter(|p| p.0 >= t - self.window / 2.0)
            .collect();
        let (ls, lse, _) = fit(&later)?;
        let significant = fs - Z * fse > 0.0 && ts - Z * tse > 0.0 && ls - Z * lse > 0.0;
        // A rise that matters over the window: more requests than one in flight, and a first
        // token a quarter later than the window's mean.
        let large = fs * self.window >= 1.0_f64.max(0.25 * fm) && ts * self.window >= 0.25 * tm;
        (significant && large).then_some(Saturation {
            at_s: t,
            window_s: self.window,
            in_flight_slope: fs,
            in_flight_se: fse,
            ttft_slope_ms: ts,
            ttft_se_ms: tse,
            in_flight_mean: fm,
            ttft_mean_ms: tm,
        })
    }
}

/// Adds a sample and drops those older than the window (and beyond the cap).
fn push(s: &mut VecDeque<(f64, f64)>, p: (f64, f64), window: f64) {
    s.push_back(p);
    while s.front().is_some_and(|f| f.0 < p.0 - window) || s.len() > MAX_SAMPLES {
        s.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Requests arriving at `rate` on a server finishing `capacity` per second, one sample per
    /// finished request, with a little jitter.
    fn run(rate: f64, capacity: f64, seconds: f64) -> Option<Saturation> {
        let mut d = Detector::new(Duration::from_secs(10));
        let done = rate.min(capacity);
        let mut t = 0.0;
        let mut k = 0u32;
        while t < seconds {
            t += 1.0 / done;
            k += 1;
            let jitter = if k.is_multiple_of(2) { 0.3 } else { -0.3 };
            let backlog = ((rate - capacity).max(0.0) * t).max(0.0);
            let in_flight = 2.0 + backlog + jitter;
            let ttft = 100.0 + backlog / capacity * 1000.0 + 10.0 * jitter;
            if let Some(s) = d.add(t, in_flight, Some(ttft)) {
                return Some(s);
            }
        }
        None
    }

    #[test]
    fn arrivals_above_capacity_stop_the_run_and_below_it_never() {
        let s = run(20.0, 10.0, 60.0).expect("over-saturated");
        assert!((10.0..12.0).contains(&s.at_s), "{}", s.text());
        assert!((9.0..11.0).contains(&s.in_flight_slope), "{}", s.text());
        assert!(s.text().starts_with("over-saturated at"));
        assert!(s.text().contains("over the last 10 s"), "{}", s.text());
        let short = Saturation { window_s: 0.4, ..s };
        assert!(
            short.text().contains("over the last 0.4 s"),
            "{}",
            short.text()
        );
        assert_eq!(run(8.0, 10.0, 60.0), None);
        // A short burst of queueing at the start does not count once the window has moved on.
        let mut d = Detector::new(Duration::from_secs(10));
        for i in 0..400 {
            let t = f64::from(i) * 0.1;
            let in_flight = if t < 3.0 {
                t * 3.0
            } else {
                9.0 + if i % 2 == 0 { 0.5 } else { -0.5 }
            };
            assert_eq!(
                d.add(t, in_flight, Some(100.0 + in_flight * 10.0)),
                None,
                "t={t}"
            );
        }
    }

    #[test]
    fn the_fit_gives_slope_and_error() {
        let pts: VecDeque<(f64, f64)> = (0..10)
            .map(|i| (f64::from(i), 2.0 * f64::from(i) + 1.0))
            .collect();
        let (slope, se, mean) = fit(&pts).unwrap();
        assert!((slope - 2.0).abs() < 1e-12 && se < 1e-9 && (mean - 10.0).abs() < 1e-12);
        assert_eq!(
            fit(&VecDeque::from(vec![(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)])),
            None
        );
    }
}
