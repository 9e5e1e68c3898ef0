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
    Gamma { burstiness: f64 },
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

/// The planned start times of an open loop, in request-index order.
pub struct Schedule {
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
            interval,
            gamma,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            next: 0,
            at: 0.0,
        })
    }

    /// The start of request `index`, from the start of the run. Indices must not go back:
    /// the schedule draws every interval up to `index` once.
    pub fn offset(&mut self, index: u64) -> Duration {
        let Some(gamma) = &self.gamma else {
            return Duration::from_secs_f64(self.interval * index as f64);
        };
        while self.next < index {
            self.at += gamma.sample(&mut self.rng);
            self.next += 1;
        }
        Duration::from_secs_f64(self.at)
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
