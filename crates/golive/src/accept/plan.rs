//! The acceptance run's plan, resolved once from the options and what the service and basic
//! stages learned (ripgrep's `HiArgs`): every later stage reads it, none changes it.

use std::sync::Arc;

use super::engine::ServerInfo;
use super::stage::{StageCtx, StageResult};
use super::{AcceptOptions, Node, SkippableStage};
use crate::agent::mix::AgentMix;
use crate::report::{Check, CheckId, Stage};

pub(super) struct AcceptPlan<'a> {
    pub args: &'a AcceptOptions,
    /// The servers under test; the load stages run on the first.
    pub nodes: &'a [Node],
    /// What the service stage learned, per node.
    pub infos: Vec<ServerInfo>,
    pub model: String,
    /// The first node answered the basic request: the later stages can run.
    pub basic_ok: bool,
    /// The server's tokens per word of golive's prompts (ramp and soak lengths).
    pub tokens_per_word: f64,
    pub expected_concurrency: u32,
    /// The ramp's longest context: `--max-context`, at most the server's max model length.
    pub max_context: u32,
    /// The agent cases mixed into ramp and soak (`--agent-mix`).
    pub agent_mix: Option<Arc<AgentMix>>,
}

/// Why the later stages do not run when the first node failed its basic request.
const NOT_SERVED: &str = "the basic request failed on the first node";

impl<'a> AcceptPlan<'a> {
    /// The plan for the stages after basic; an `--agent-mix` that cannot be built is a check.
    pub async fn resolve(
        args: &'a AcceptOptions,
        nodes: &'a [Node],
        infos: Vec<ServerInfo>,
        model: String,
        basic_ok: bool,
        ctx: &StageCtx<'_>,
    ) -> (Self, Option<Check>) {
        let node = &nodes[0];
        let tokens_per_word = if basic_ok {
            crate::load::calibrate_tokens_per_word(&node.client, crate::client::Api::Chat, &model)
                .await
                .unwrap_or(1.0)
        } else {
            1.0
        };
        let (agent_mix, mix_error) = super::agent_load::mix(
            args.agent_mix,
            &args.agent,
            &model,
            node.target.request_timeout,
        );
        let max_context = max_context(args, &infos[0], ctx);
        let plan = AcceptPlan {
            args,
            nodes,
            infos,
            model,
            basic_ok,
            tokens_per_word,
            expected_concurrency: args.expected_concurrency.unwrap_or(args.concurrency),
            max_context,
            agent_mix,
        };
        (plan, mix_error)
    }

    pub fn node(&self) -> &Node {
        &self.nodes[0]
    }

    pub fn info(&self) -> &ServerInfo {
        &self.infos[0]
    }

    /// The one skip rule: why `stage` does not run, or `None` when it runs.
    pub fn skip_reason(&self, stage: Stage, ctx: &StageCtx<'_>) -> Option<String> {
        let (skippable, name) = skippable(stage)?;
        if self.args.skip.contains(&skippable) {
            return Some(format!("--skip {name}"));
        }
        if !self.basic_ok {
            return Some(NOT_SERVED.into());
        }
        if stage == Stage::Agent && self.args.agent.skip_agent {
            return Some("--skip-agent".into());
        }
        let ramp_ran = !self.args.skip.contains(&SkippableStage::Ramp);
        if stage == Stage::Soak && ramp_ran && ctx.carried(|c| c.accepted.is_none()) {
            return Some("the ramp accepted no concurrency".into());
        }
        None
    }

    /// What a stage that does not run leaves: one `skip` check, except the agent stage, which
    /// lists nothing then (its checks are its cases).
    pub fn skipped(stage: Stage, why: &str) -> StageResult {
        match stage_check(stage) {
            Some(id) => StageResult::skipped(id, stage, why),
            None => StageResult::default(),
        }
    }
}

/// The stage as `--skip` names it.
fn skippable(stage: Stage) -> Option<(SkippableStage, &'static str)> {
    Some(match stage {
        Stage::PrefixCache => (SkippableStage::PrefixCache, "prefix-cache"),
        Stage::Agreement => (SkippableStage::Agreement, "agreement"),
        Stage::Agent => (SkippableStage::Agent, "agent"),
        Stage::Ramp => (SkippableStage::Ramp, "ramp"),
        Stage::Soak => (SkippableStage::Soak, "soak"),
        _ => return None,
    })
}

fn stage_check(stage: Stage) -> Option<CheckId> {
    Some(match stage {
        Stage::PrefixCache => CheckId::PrefixCache,
        Stage::Agreement => CheckId::Agreement,
        Stage::Ramp => CheckId::Ramp,
        Stage::Soak => CheckId::Soak,
        _ => return None,
    })
}

/// `--max-context`, else the server's max model length, else 4096; never above the server's
/// length, where longer requests would only be refused (HTTP 400: a setting, not a capacity).
fn max_context(args: &AcceptOptions, info: &ServerInfo, ctx: &StageCtx<'_>) -> u32 {
    let server_max = info
        .max_model_len
        .map(|v| v.min(u64::from(u32::MAX)) as u32);
    let wanted = args.max_context.or(server_max).unwrap_or(4096);
    match server_max.filter(|l| *l < wanted) {
        Some(limit) => {
            ctx.events().notice(format!(
                "--max-context {wanted} is above the server's max model length {limit}; using {limit}"
            ));
            limit
        }
        None => wanted,
    }
}
