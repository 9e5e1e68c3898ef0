//! Stage `contract`: the model's API contract (the profile's `[contract]` table) on every
//! node and data-parallel rank, each item a check (`contract_params`, ...) with the
//! owner the contract names; a failure is an interface failure (rebuild). One summary
//! check says how long it took and how many requests it sent.

use std::collections::BTreeMap;
use std::time::Instant;

use super::plan::AcceptPlan;
use super::stage::StageResult;
use crate::contract::run::{ContractCheck, ContractOptions, ContractRun};
use crate::report::{Check, CheckId, Impact, Stage, Status};

pub(super) async fn stage(plan: &AcceptPlan<'_>) -> StageResult {
    let started = Instant::now();
    let opts = options(plan);
    match crate::contract::run::run(&opts).await {
        Ok(run) => result(&run, started),
        Err(e) => summary_only(Status::Fail, format!("the contract stopped: {e:#}")),
    }
}

fn options(plan: &AcceptPlan<'_>) -> ContractOptions {
    ContractOptions {
        urls: plan
            .nodes
            .iter()
            .map(|n| n.target.base_url.clone())
            .collect(),
        model: plan.model.clone(),
        dp_size: plan.args.data_parallel_size.max(1) as usize,
        spec: plan.profile.contract.clone(),
        timeout: plan.node().target.request_timeout,
        reference: None,
        http: Some(plan.node().client.http.clone()),
    }
}

fn result(run: &ContractRun, started: Instant) -> StageResult {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut checks: Vec<Check> = run
        .checks
        .iter()
        .map(|c| {
            let n = seen.entry(c.item.clone()).or_default();
            *n += 1;
            to_check(c, *n)
        })
        .collect();
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    let status = if failed > 0 {
        Status::Fail
    } else {
        Status::Pass
    };
    let mut summary = summary(
        status,
        format!(
            "{} items, {failed} failed; {} requests",
            checks.len(),
            run.requests,
        ),
    );
    summary.duration_ms = started.elapsed().as_millis() as u64;
    summary.data = serde_json::json!({"requests": run.requests, "items": checks.len(),
        "failed": failed, "comparison": run.comparison});
    checks.insert(0, summary);
    StageResult::of_checks(checks)
}

/// `contract_<item>`, numbered from the second check of the same item on.
fn to_check(c: &ContractCheck, n: usize) -> Check {
    let id = match n {
        1 => format!("contract_{}", c.item),
        n => format!("contract_{}_{n}", c.item),
    };
    let mut check = Check::new(id, Stage::Contract, c.verdict.status, describe(&c.item));
    check.measurement = c.verdict.evidence.clone();
    check.evidence = format!("path: {}", c.path);
    check.url = Some(c.path.clone());
    check.owner = c.verdict.owner;
    check.impact = if c.verdict.status == Status::Fail {
        Impact::Interface
    } else {
        Impact::Info
    };
    check
}

fn describe(item: &str) -> String {
    match item {
        "params" => "a wrong immutable sampling parameter is refused with HTTP 400",
        "prompt_tokens" => "usage.prompt_tokens lies within the tolerance of /tokenize's count",
        "reasoning" => "reasoning arrives in its own field, never in content",
        "path" => "the short greedy request answers sanely on this path",
        "path_agreement" => "every path answers the greedy request alike",
        "tool_trigger_f1" => "tool-call trigger F1 against the reference",
        "tool_schema_accuracy" => "triggered tool calls pass their schema",
        other => other,
    }
    .to_string()
}

fn summary(status: Status, measurement: String) -> Check {
    let mut c = Check::new(
        CheckId::Contract,
        Stage::Contract,
        status,
        "the model's API contract on every node and rank",
    );
    c.measurement = measurement;
    c
}

fn summary_only(status: Status, measurement: String) -> StageResult {
    StageResult::of_checks(vec![summary(status, measurement)])
}
