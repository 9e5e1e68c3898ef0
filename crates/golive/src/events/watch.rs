//! What `watch` reports: the judgement of one window, of one server ([`Evaluation`]) or
//! of a fleet through Prometheus ([`FleetEvaluation`]). They are the payloads of the
//! watch events, so they live with the event stream; `watch` makes them.

use crate::metrics::Engine;

/// One rollback trigger of the runbook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Repeated OOM under the accepted load.
    Oom,
    /// Queue growth at an unchanged request rate.
    QueueGrowth,
    /// Driver or NCCL errors (after a node or image update).
    DriverNccl,
    /// Cache hits below the accepted baseline while prefill latency rises.
    CacheRegression,
    /// Tool-call failures or answers that break the agreed schema.
    ToolSchema,
    /// The engine is alive but generates nothing: work waits or runs while the
    /// generated-token counter stands still, or `/health` answers while a probe
    /// request gets no token.
    Stalled,
}

impl Trigger {
    /// Every trigger, in the runbook's order.
    pub const ALL: [Trigger; 6] = [
        Trigger::Oom,
        Trigger::QueueGrowth,
        Trigger::DriverNccl,
        Trigger::CacheRegression,
        Trigger::ToolSchema,
        Trigger::Stalled,
    ];

    /// The stable id, as in the JSON and the alert rules (`queue_growth`).
    pub fn id(self) -> &'static str {
        match self {
            Trigger::Oom => "oom",
            Trigger::QueueGrowth => "queue_growth",
            Trigger::DriverNccl => "driver_nccl",
            Trigger::CacheRegression => "cache_regression",
            Trigger::ToolSchema => "tool_schema",
            Trigger::Stalled => "stalled",
        }
    }
    /// The trigger in words, as the display and the rules show it.
    pub fn title(self) -> &'static str {
        match self {
            Trigger::Oom => "out of memory under the accepted load",
            Trigger::QueueGrowth => "queue growth at an unchanged request rate",
            Trigger::DriverNccl => "driver or NCCL errors",
            Trigger::CacheRegression => {
                "prefix-cache hits below the accepted baseline while prefill latency rises"
            }
            Trigger::ToolSchema => "tool-call failures or schema breaks",
            Trigger::Stalled => "engine alive but not generating (stalled)",
        }
    }
    /// What to do first, where it is not the rollback alone.
    pub fn next_step(self) -> Option<&'static str> {
        match self {
            Trigger::Stalled => Some(
                "save the server log and find the first cause (golive triage), then restart the engine; /health alone does not show this, so use `golive probe` as the liveness probe",
            ),
            _ => None,
        }
    }
}

/// A trigger that fired, with its evidence.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Firing {
    /// Which trigger.
    pub trigger: Trigger,
    /// [`Trigger::title`].
    pub title: &'static str,
    /// The numbers and log lines it fired on, one per line.
    pub evidence: Vec<String>,
}

/// Numbers over the window, for the status line.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Summary {
    /// The server's waiting (queued) requests at the latest reading.
    pub waiting_last: Option<f64>,
    /// The server's running requests at the latest reading.
    pub running_last: Option<f64>,
    /// Peak KV-cache usage over the window, 0..1.
    pub kv_usage_max: Option<f64>,
    /// Prefix-cache hits over lookups in the window, 0..1.
    pub cache_hit_ratio: Option<f64>,
    /// Prefix-cache lookups in the window (the ratio's denominator).
    pub cache_queries: Option<f64>,
    /// Mean time to first token in the window, ms, from the engine's histogram.
    pub ttft_mean_ms: Option<f64>,
    /// Mean inter-token latency in the window, ms, from the engine's histogram.
    pub itl_mean_ms: Option<f64>,
    /// Requests finished per second over the window.
    pub finished_rate_rps: Option<f64>,
}

/// The judgement of one window.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Evaluation {
    /// Seconds from the window's first reading to its last.
    pub window_s: f64,
    /// Readings (scrapes) in the window.
    pub samples: usize,
    /// The engine the metrics belong to; `None`: not recognised yet.
    pub engine: Option<Engine>,
    /// The numbers over the window.
    pub summary: Summary,
    /// The triggers that fired; empty: none.
    pub firing: Vec<Firing>,
    /// Server restarts seen in the window.
    pub resets: Vec<Reset>,
    /// Why a trigger could not be judged, or was close.
    pub notes: Vec<String>,
    /// The latest probe of the window (`--probe-every-s`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeSample>,
    /// Who rolls back, from the baseline's sign-off (`signoff --rollback-owner`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollback_owner: Option<String>,
}

/// A counter restart seen between two readings.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Reset {
    /// Seconds into the watch of the reading after the restart.
    pub t: f64,
    /// What shows the restart, in words (a counter that went down, a new start time).
    pub what: String,
}

/// One probe of the watch: `/health` and a tiny generation, sent together.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeSample {
    /// Seconds since the watch started.
    pub t: f64,
    /// Status of `GET /health`; `None` when it did not answer.
    pub health_status: Option<u16>,
    /// Why `/health` did not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_error: Option<String>,
    /// The generation probe sent with it.
    pub probe: crate::probe::ProbeOutcome,
}

impl ProbeSample {
    /// `/health` answered 2xx.
    pub fn health_ok(&self) -> bool {
        self.health_status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// A finding over the fleet: a trigger on one replica, imbalance or absent.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FleetFiring {
    /// A trigger id (`queue_growth`, ...), `imbalance` or `absent`.
    pub kind: String,
    /// The replica, as the `--replica-label` label's value; `(all)` when none matched.
    pub replica: String,
    /// What was found, in words (`replica absent`, a trigger's title).
    pub title: String,
    /// The numbers, series or log lines behind it, one per line.
    pub evidence: Vec<String>,
}

/// One replica's window.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplicaWindow {
    /// The replica, as the `--replica-label` label's value.
    pub replica: String,
    /// Its latest `up` value (1: Prometheus scrapes it); `None`: no `up` series.
    pub up: Option<f64>,
    /// Gone or missing series in the window (a `FleetFiring` of kind `absent` says why).
    pub absent: bool,
    /// Mean of its waiting requests over the window.
    pub queue_mean: Option<f64>,
    /// Its triggers, judged as for one server.
    pub evaluation: Evaluation,
}

/// The judgement of one window over the fleet.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FleetEvaluation {
    /// The Prometheus queried (`--prometheus`).
    pub prometheus: String,
    /// The series selector (`--selector`); empty: all.
    pub selector: String,
    /// The label that names a replica (`--replica-label`).
    pub replica_label: String,
    /// The window judged, in seconds (`--window`).
    pub window_s: f64,
    /// Resolution of the range queries, in seconds.
    pub step_s: f64,
    /// One entry per replica seen, sorted by name.
    pub replicas: Vec<ReplicaWindow>,
    /// Findings over the fleet: triggers per replica, imbalance, absent replicas.
    pub firing: Vec<FleetFiring>,
    /// Why something could not be judged (series without the replica label).
    pub notes: Vec<String>,
}
