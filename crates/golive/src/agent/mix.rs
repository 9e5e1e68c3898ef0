//! Agent cases mixed into the ramp and soak (`--agent-mix`): a share of the load's
//! requests are agent cases (tool calls, structured output), each judged by
//! [`validate::judge`] exactly as in the agent stage, so a parser or grammar that breaks
//! only under concurrency shows up as a drop of the conformance rate.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use super::cases::{Budget, Case};
use super::http::send;
use super::validate::{self, judge, quote, Answer, Severity};
use super::{owner_name, request_body, AgentOptions};
use crate::client::OpenAiClient;
use crate::report::{AgentConformance, Owner};

/// One agent case as the mix sends it.
#[derive(Debug, Clone)]
struct MixCase {
    id: String,
    request: Value,
    answer: Answer,
    streamed: bool,
}

/// The agent share of a load: which requests are agent cases, and how they fared.
#[derive(Debug)]
pub struct AgentMix {
    share: f64,
    cases: Vec<MixCase>,
    model: String,
    deadline: Duration,
    /// `--no-content`: quotes of answers stay out of the examples.
    withhold: bool,
    tally: Mutex<AgentConformance>,
}

impl AgentMix {
    /// The mix for `model`: the agent stage's cases (built-in, or the user's `--tools` /
    /// `--cases`) that ask for tool calls or structured output, the answers a parser or
    /// grammar produces; text, invalid-request and cut-off cases stay in the agent stage.
    pub fn new(
        share: f64,
        opts: &AgentOptions,
        model: &str,
        deadline: Duration,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            share > 0.0 && share <= 1.0,
            "--agent-mix must be above 0 and at most 1 (the share of agent requests), not {share}"
        );
        let budget = Budget::of(opts);
        let cases: Vec<MixCase> = super::plan(opts, &budget)?
            .into_iter()
            .filter(|c| matches!(c.answer, Answer::Tool { .. } | Answer::Json { .. }))
            .map(|c: Case| MixCase {
                streamed: c.streamed && !opts.agent_no_stream,
                id: c.id,
                request: c.request,
                answer: c.answer,
            })
            .collect();
        anyhow::ensure!(
            !cases.is_empty(),
            "--agent-mix: no tool-call or structured-output case to mix in"
        );
        Ok(AgentMix {
            share,
            cases,
            model: model.to_string(),
            deadline,
            withhold: opts.no_content,
            tally: Mutex::new(AgentConformance::default()),
        })
    }

    /// A fresh tally with the same cases (one per ramp step).
    pub fn fresh(&self) -> Self {
        AgentMix {
            share: self.share,
            cases: self.cases.clone(),
            model: self.model.clone(),
            deadline: self.deadline,
            withhold: self.withhold,
            tally: Mutex::new(AgentConformance::default()),
        }
    }

    /// Whether the load's request `index` is an agent case: evenly spread, the first
    /// request of a load always one, so even a short ramp step carries some.
    pub fn picks(&self, index: u64) -> bool {
        (index as f64 * self.share).fract() < self.share - 1e-9 || self.share >= 1.0
    }

    /// Sends the agent case for load request `index` on the load's client and judges it.
    pub async fn send(&self, client: &OpenAiClient, index: u64) {
        let k = (index as f64 * self.share).floor() as usize;
        let case = &self.cases[k % self.cases.len()];
        // Streamed and non-streamed in turn where the case streams: the load is streamed,
        // and buffering parsers break in the streamed path.
        let streamed = case.streamed && (k / self.cases.len()).is_multiple_of(2);
        let body = request_body(&case.request, &self.model, streamed);
        let endpoint = format!("{}/v1/chat/completions", client.base_url);
        let sent = send(client, &endpoint, &body, self.deadline).await;
        let problems = judge(&body, &case.answer, &sent.outcome);
        let fails: Vec<_> = problems
            .iter()
            .filter(|p| p.severity == Severity::Fail)
            .collect();
        let Ok(mut t) = self.tally.lock() else {
            return;
        };
        t.requests += 1;
        let interface: Vec<_> = fails
            .iter()
            .filter(|p| is_interface(p.owner))
            .copied()
            .collect();
        if interface.is_empty() {
            t.conformant += 1;
            t.model_failures += u64::from(!fails.is_empty());
        }
        let mut owners: Vec<Owner> = fails.iter().map(|p| p.owner).collect();
        owners.dedup();
        for o in owners {
            *t.failures_by_owner
                .entry(owner_name(o).to_string())
                .or_default() += 1;
        }
        for p in &fails {
            *t.failures_by_code
                .entry(p.code.as_str().to_string())
                .or_default() += 1;
        }
        if let Some(p) = interface.first() {
            if t.examples.len() < 3 {
                let detail = if self.withhold {
                    validate::scrub_quotes(&p.detail)
                } else {
                    p.detail.clone()
                };
                t.examples.push(format!(
                    "{}{}: [{}] {}: {}",
                    case.id,
                    if streamed { " (streamed)" } else { "" },
                    owner_name(p.owner),
                    p.code,
                    quote(&detail, 300)
                ));
            }
        }
    }

    /// What the agent requests so far found.
    pub fn conformance(&self) -> AgentConformance {
        self.tally.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// The case ids that the mix sends (for the report's request field).
    pub fn case_ids(&self) -> Value {
        json!(self.cases.iter().map(|c| c.id.as_str()).collect::<Vec<_>>())
    }
}

/// Failures of the serving stack (not the model's): these count against conformance.
pub fn is_interface(owner: Owner) -> bool {
    matches!(owner, Owner::Parser | Owner::Server | Owner::Gateway)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_share_evenly_starting_with_the_first_request() {
        let mix =
            AgentMix::new(0.2, &AgentOptions::default(), "m", Duration::from_secs(1)).unwrap();
        let picked: Vec<u64> = (0..20).filter(|i| mix.picks(*i)).collect();
        assert_eq!(picked, vec![0, 5, 10, 15]);
        let half =
            AgentMix::new(0.5, &AgentOptions::default(), "m", Duration::from_secs(1)).unwrap();
        assert_eq!((0..10).filter(|i| half.picks(*i)).count(), 5);
        let all =
            AgentMix::new(1.0, &AgentOptions::default(), "m", Duration::from_secs(1)).unwrap();
        assert!((0..10).all(|i| all.picks(i)));
        assert!(AgentMix::new(0.0, &AgentOptions::default(), "m", Duration::from_secs(1)).is_err());
        // Only the answers a parser or grammar produces are mixed in.
        assert!(mix
            .cases
            .iter()
            .all(|c| matches!(c.answer, Answer::Tool { .. } | Answer::Json { .. })));
        assert!(mix.cases.len() >= 4);
    }
}
