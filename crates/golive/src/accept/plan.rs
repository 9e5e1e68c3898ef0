//! The acceptance run's plan, resolved once from the options and what the service and basic
//! stages learned (ripgrep's `HiArgs`): every later stage reads it, none changes it.

use std::sync::Arc;

use super::engine::ServerInfo;
use super::stage::{StageCtx, StageResult};
use super::{AcceptOptions, Node, SkippableStage};
use crate::agent::mix::AgentMix;
use crate::profile::Profile;
use crate::report::{Check, CheckId, Stage};

pub(super) struct AcceptPlan<'a> {
    pub args: &'a AcceptOptions,
    /// The deployment profile (`--profile`, else the generic one), loaded once.
    pub profile: &'a Profile,
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
    /// GPUs one server uses (TP x PP x DP of the bundles' launch command), when known.
    pub gpus_per_server: Option<u64>,
}

/// What the stages before the plan learned: the service stage's server facts, the model,
/// whether the first node answered its basic request, and the GPUs of one server from the
/// bundles' launch command.
pub(super) struct Learned {
    pub infos: Vec<ServerInfo>,
    pub model: String,
    pub basic_ok: bool,
    pub gpus_per_server: Option<u64>,
}

/// Why the later stages do not run when the first node failed its basic request.
const NOT_SERVED: &str = "the basic request failed on the first node";

impl<'a> AcceptPlan<'a> {
    /// The plan for the stages after basic; an `--agent-mix` that cannot be built is a check.
    pub async fn resolve(
        args: &'a AcceptOptions,
        profile: &'a Profile,
        nodes: &'a [Node],
        learned: Learned,
        ctx: &StageCtx<'_>,
    ) -> (Self, Option<Check>) {
        let Learned {
            infos,
            model,
            basic_ok,
            gpus_per_server,
        } = learned;
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
            profile,
            nodes,
            infos,
            model,
            basic_ok,
            tokens_per_word,
            expected_concurrency: args.expected_concurrency.unwrap_or(args.concurrency),
            max_context,
            agent_mix,
            gpus_per_server,
        };
        (plan, mix_error)
    }

    pub fn node(&self) -> &Node {
        &self.nodes[0]
    }

    pub fn info(&self) -> &ServerInfo {
        &self.infos[0]
    }

    /// The one skip rule: why `p` does not run, or `None` when it runs.
    pub fn skip_reason(&self, p: &Planned, ctx: &StageCtx<'_>) -> Option<String> {
        let stage = p.stage;
        if self.args.skip.contains(&p.skippable) {
            return Some(format!("--skip {}", p.flag));
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

    /// What a stage that does not run leaves: its `skip` check, if it has one.
    pub fn skipped(p: &Planned, why: &str) -> StageResult {
        match p.skip_check {
            Some(id) => StageResult::skipped(id, p.stage, why),
            None => StageResult::default(),
        }
    }
}

/// A stage after basic, as the plan runs or skips it.
pub(super) struct Planned {
    pub stage: Stage,
    /// How `--skip` names it.
    skippable: SkippableStage,
    flag: &'static str,
    /// The check that says it did not run; the agent stage has none (its checks are its
    /// cases, and a skipped one lists nothing).
    skip_check: Option<CheckId>,
}

/// The stages after basic, in the order they run.
pub(super) const PLANNED: [Planned; 6] = [
    Planned {
        stage: Stage::PrefixCache,
        skippable: SkippableStage::PrefixCache,
        flag: "prefix-cache",
        skip_check: Some(CheckId::PrefixCache),
    },
    Planned {
        stage: Stage::Agreement,
        skippable: SkippableStage::Agreement,
        flag: "agreement",
        skip_check: Some(CheckId::Agreement),
    },
    Planned {
        stage: Stage::Agent,
        skippable: SkippableStage::Agent,
        flag: "agent",
        skip_check: None,
    },
    Planned {
        stage: Stage::Contract,
        skippable: SkippableStage::Contract,
        flag: "contract",
        skip_check: Some(CheckId::Contract),
    },
    Planned {
        stage: Stage::Ramp,
        skippable: SkippableStage::Ramp,
        flag: "ramp",
        skip_check: Some(CheckId::Ramp),
    },
    Planned {
        stage: Stage::Soak,
        skippable: SkippableStage::Soak,
        flag: "soak",
        skip_check: Some(CheckId::Soak),
    },
];

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
