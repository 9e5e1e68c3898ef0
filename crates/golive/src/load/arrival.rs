//! When an open loop starts its requests: at a constant rate, as a Poisson process, or in
//! gamma-distributed bursts (`vllm bench serve --burstiness`'s model: shape = burstiness,
//! mean interval 1/rate). The schedule is a function of the request index and the seed, so
//! every shard of a run computes the same one and sends its own indices at their times.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::SeedableRng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Arrival {
    /// One request every 1/rate seconds.
    #[default]
    Constant,
    /// Exponential intervals: independent users.
    Poisson,
    /// Gamma intervals of shape `burstiness`: below 1 burstier than Poisson, above 1 more
    /// even; 1 is Poisson.
    Gamma {
        /// The gamma shape (`--burstiness`), 0.01 to 100.
        burstiness: f64,
    },
}

impl Arrival {
    /// The arrival of `--arrival KIND --burstiness B` (`B` only for `gamma`).
    pub fn new(kind: &str, burstiness: Option<f64>) -> anyhow::Result<Self> {
        Ok(match (kind, burstiness) {
            ("constant", None) => Arrival::Constant,
            ("poisson", None) => Arrival::Poisson,
            ("gamma", Some(b)) if b.is_finite() && (0.01..=100.0).contains(&b) => {
                Arrival::Gamma { burstiness: b }
            }
            ("gamma", Some(b)) => anyhow::bail!("--burstiness must be 0.01 to 100, not {b}"),
            ("gamma", None) => anyhow::bail!("--arrival gamma needs --burstiness"),
            (_, Some(_)) => anyhow::bail!("--burstiness goes with --arrival gamma"),
            (other, None) => {
                anyhow::bail!("--arrival is constant, poisson or gamma, not {other:?}")
            }
        })
    }
}

/// A rate that moves linearly from `start` to `end` requests per second over `secs`, then
/// holds `end` (`--rate-ramp START:END:SECS`): one run that walks the load up to where the
/// server stops keeping up, as a user ramp would.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RateRamp {
    /// Requests per second at the start.
    pub start: f64,
    /// Requests per second at the end of the ramp, and after it.
    pub end: f64,
    /// Length of the ramp, in seconds.
    pub secs: f64,
}

impl RateRamp {
    /// `START:END:SECS`, e.g. `1:20:120`: rates 0 to 100000 per second (the end above zero),
    /// 1 second to a day.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let parts: Vec<&str> = text.split(':').collect();
        let [start, end, secs] = parts[..] else {
            anyhow::bail!("--rate-ramp is START:END:SECS (e.g. 1:20:120), not {text:?}");
        };
        let number = |s: &str, what: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| anyhow::anyhow!("--rate-ramp: {what} {s:?} is not a number"))
        };
        let ramp = RateRamp {
            start: number(start, "START")?,
            end: number(end, "END")?,
            secs: number(secs, "SECS")?,
        };
        anyhow::ensure!(
            (0.0..=100_000.0).contains(&ramp.start) && ramp.end > 0.0 && ramp.end <= 100_000.0,
            "--rate-ramp: rates are 0 to 100000 per second, and END above zero"
        );
        anyhow::ensure!(
            (1.0..=86_400.0).contains(&ramp.secs),
            "--rate-ramp: SECS is 1 to 86400"
        );
        Ok(ramp)
    }

    /// The mean rate over the ramp.
    pub fn mean_rate(&self) -> f64 {
        (self.start + self.end) / 2.0
    }

    /// The rate `t` seconds into the run.
    pub fn rate_at(&self, t: f64) -> f64 {
        let f = (t / self.secs).clamp(0.0, 1.0);
        self.start + (self.end - self.start) * f
    }

    /// When the expected number of requests reaches `u`: the inverse of the rate's integral
    /// (`start t + slope t^2 / 2` on the ramp, then `end` per second).
    pub fn time_of(&self, u: f64) -> f64 {
        let on_ramp = self.mean_rate() * self.secs;
        if u >= on_ramp {
            return self.secs + (u - on_ramp) / self.end;
        }
        let slope = (self.end - self.start) / self.secs;
        if slope.abs() < 1e-12 {
            return u / self.start;
        }
        (-self.start + (self.start * self.start + 2.0 * slope * u).max(0.0).sqrt()) / slope
    }
}

/// The planned start times of an open loop, in request-index order.
pub struct Schedule {
    /// The ramp the times are mapped through (the intervals are then drawn at one per unit
    /// of expected count, and a ramp's own time replaces it: time rescaling).
    ramp: Option<RateRamp>,
    interval: f64,
    gamma: Option<Gamma<f64>>,
    rng: Xoshiro256PlusPlus,
    /// The index whose start time `at` holds.
    next: u64,
    at: f64,
}

impl Schedule {
    /// The schedule at `rate` requests per second (above zero), from `seed`.
    pub fn new(arrival: Arrival, rate: f64, seed: u64) -> anyhow::Result<Self> {
        anyhow::ensure!(
            rate.is_finite() && rate > 0.0,
            "the rate must be above zero"
        );
        let interval = 1.0 / rate;
        let shape = match arrival {
            Arrival::Constant => None,
            Arrival::Poisson => Some(1.0),
            Arrival::Gamma { burstiness } => Some(burstiness),
        };
        let gamma = shape
            .map(|k| Gamma::new(k, interval / k))
            .transpose()
            .map_err(|e| anyhow::anyhow!("no gamma distribution for this rate: {e}"))?;
        Ok(Schedule {
            ramp: None,
            interval,
            gamma,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            next: 0,
            at: 0.0,
        })
    }

    /// The schedule along `ramp`: the arrival's intervals drawn at one request per unit of
    /// expected count, each time then mapped through the ramp, so the arrivals keep their
    /// spread while the rate moves.
    pub fn ramped(arrival: Arrival, ramp: RateRamp, seed: u64) -> anyhow::Result<Self> {
        let mut s = Schedule::new(arrival, 1.0, seed)?;
        s.ramp = Some(ramp);
        Ok(s)
    }

    /// The start of request `index`, from the start of the run. Indices must not go back:
    /// the schedule draws every interval up to `index` once.
    pub fn offset(&mut self, index: u64) -> Duration {
        let at = match &self.gamma {
            None => self.interval * index as f64,
            Some(gamma) => {
                while self.next < index {
                    self.at += gamma.sample(&mut self.rng);
                    self.next += 1;
                }
                self.at
            }
        };
        Duration::from_secs_f64(self.ramp.map_or(at, |r| r.time_of(at)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intervals(arrival: Arrival, n: u64) -> Vec<f64> {
        let mut s = Schedule::new(arrival, 100.0, 7).unwrap();
        let times: Vec<f64> = (0..=n).map(|i| s.offset(i).as_secs_f64()).collect();
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn mean_cv(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn every_arrival_keeps_the_rate_and_its_own_spread() {
        // Constant: exactly 10 ms apart.
        let (mean, cv) = mean_cv(&intervals(Arrival::Constant, 1000));
        assert!((mean - 0.01).abs() < 1e-9 && cv < 1e-6, "{mean} {cv}");
        // Poisson: exponential intervals, coefficient of variation 1.
        let (mean, cv) = mean_cv(&intervals(Arrival::Poisson, 20_000));
        assert!((mean - 0.01).abs() < 0.0003, "{mean}");
        assert!((cv - 1.0).abs() < 0.05, "{cv}");
        // Gamma of shape k: CV 1/sqrt(k); bursts below 1, even above.
        let (mean, cv) = mean_cv(&intervals(Arrival::Gamma { burstiness: 0.25 }, 20_000));
        assert!((mean - 0.01).abs() < 0.0005, "{mean}");
        assert!((cv - 2.0).abs() < 0.15, "{cv}");
        let (_, cv) = mean_cv(&intervals(Arrival::Gamma { burstiness: 4.0 }, 20_000));
        assert!((cv - 0.5).abs() < 0.05, "{cv}");
    }

    #[test]
    fn a_ramp_walks_the_rate_from_start_to_end_then_holds_it() {
        let ramp = RateRamp::parse("2:10:10").unwrap();
        assert_eq!(ramp.mean_rate(), 6.0);
        // The inverse of the integral: 60 requests by the end of the ramp, 10/s after.
        assert!((ramp.time_of(60.0) - 10.0).abs() < 1e-9);
        assert!((ramp.time_of(80.0) - 12.0).abs() < 1e-9);
        assert_eq!(ramp.time_of(0.0), 0.0);
        let mut s = Schedule::ramped(Arrival::Constant, ramp, 1).unwrap();
        let times: Vec<f64> = (0..80).map(|i| s.offset(i).as_secs_f64()).collect();
        let in_second = |k: f64| times.iter().filter(|t| **t >= k && **t < k + 1.0).count();
        // About 2.4/s in the first second, 9.6/s in the last of the ramp, 10/s after it.
        assert!((2..=3).contains(&in_second(0.0)), "{}", in_second(0.0));
        assert!((9..=10).contains(&in_second(9.0)), "{}", in_second(9.0));
        assert_eq!(in_second(10.0), 10);
        assert!(times.windows(2).all(|w| w[1] > w[0]));
        // A falling ramp and a flat one invert too.
        let down = RateRamp::parse("10:2:10").unwrap();
        assert!((down.time_of(60.0) - 10.0).abs() < 1e-9);
        let flat = RateRamp::parse("5:5:10").unwrap();
        assert!((flat.time_of(25.0) - 5.0).abs() < 1e-9);
        // Poisson along the ramp: the count by the end of the ramp stays near 60.
        let mut p = Schedule::ramped(Arrival::Poisson, ramp, 9).unwrap();
        let by_end = (0..200)
            .take_while(|&i| p.offset(i).as_secs_f64() < 10.0)
            .count();
        assert!((40..=80).contains(&by_end), "{by_end}");
    }

    #[test]
    fn a_ramp_is_range_checked_when_parsed() {
        for bad in [
            "1:20",
            "a:2:3",
            "1:0:10",
            "-1:5:10",
            "1:5:0",
            "1:5:90000",
            "1:5:nan",
        ] {
            assert!(RateRamp::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            RateRamp::parse("0:20:60").unwrap(),
            RateRamp {
                start: 0.0,
                end: 20.0,
                secs: 60.0
            }
        );
    }

    #[test]
    fn the_schedule_is_a_function_of_index_and_seed() {
        let mut whole = Schedule::new(Arrival::Poisson, 50.0, 1).unwrap();
        let all: Vec<Duration> = (0..100).map(|i| whole.offset(i)).collect();
        // A shard that asks only for every fourth index sees the same times.
        let mut shard = Schedule::new(Arrival::Poisson, 50.0, 1).unwrap();
        for i in (3..100).step_by(4) {
            assert_eq!(shard.offset(i), all[i as usize]);
        }
        let mut other = Schedule::new(Arrival::Poisson, 50.0, 2).unwrap();
        assert_ne!(other.offset(50), all[50]);
    }

    #[test]
    fn bad_arrivals_are_refused() {
        assert!(Arrival::new("gamma", None).is_err());
        assert!(Arrival::new("gamma", Some(0.0)).is_err());
        assert!(Arrival::new("gamma", Some(f64::NAN)).is_err());
        assert!(Arrival::new("poisson", Some(2.0)).is_err());
        assert!(Arrival::new("uniform", None).is_err());
        assert_eq!(
            Arrival::new("gamma", Some(0.5)).unwrap(),
            Arrival::Gamma { burstiness: 0.5 }
        );
        assert!(Schedule::new(Arrival::Poisson, 0.0, 0).is_err());
    }
}
