//! Check `agent_under_load`: the agent cases mixed into the ramp and soak
//! (`--agent-mix`) must stay as conformant under concurrency as they are alone.
//! The baseline is the concurrency-1 steps; a later step (or the soak) more than
//! [`MAX_DROP`] below it fails, owner parser when its failures are the parser's
//! (tool-call markup left in the text, parser errors), else server (error answers,
//! timeouts, broken streams). Interface impact: the verdict is rebuild, like the agent
//! stage's failures on the user's own schemas.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::agent::mix::AgentMix;
use crate::agent::AgentOptions;
use crate::report::{AgentConformance, Check, CheckId, Impact, Owner, RampStep, Stage, Status};

/// The largest drop of the conformance rate (share of answers) under load that passes:
/// 2 points, so one bad answer in a few dozen fails while a rate measured on thousands
/// of answers may wobble by a rare transport hiccup without failing the release.
pub const MAX_DROP: f64 = 0.02;

/// The agent mix of `--agent-mix SHARE`, or the failing check that says why the cases
/// could not be read.
pub fn mix(
    share: Option<f64>,
    opts: &AgentOptions,
    model: &str,
    deadline: Duration,
) -> (Option<Arc<AgentMix>>, Option<Check>) {
    let Some(share) = share else {
        return (None, None);
    };
    match AgentMix::new(share, opts, model, deadline) {
        Ok(m) => (Some(Arc::new(m)), None),
        Err(e) => {
            let mut c = Check::new(
                CheckId::AgentUnderLoad,
                Stage::Ramp,
                Status::Fail,
                "agent cases mixed into the ramp and soak (--agent-mix)",
            );
            c.measurement = format!("{e:#}");
            c.impact = Impact::Interface;
            c.owner = Some(Owner::Client);
            c.next_step = "Fix the --tools/--cases file named above.".into();
            (None, Some(c))
        }
    }
}

/// One load phase with agent requests: a ramp step or the soak.
struct Phase<'a> {
    label: String,
    concurrency: u32,
    agent: &'a AgentConformance,
}

/// The check over the ramp steps and the soak; `None` when no agent request was mixed in.
pub fn check(steps: &[RampStep], soak: Option<(u32, &AgentConformance)>) -> Option<Check> {
    let phases = phases(steps, soak);
    if phases.is_empty() {
        return None;
    }
    Some(judge(&phases))
}

/// The ramp steps and the soak that mixed agent requests in.
fn phases<'a>(steps: &'a [RampStep], soak: Option<(u32, &'a AgentConformance)>) -> Vec<Phase<'a>> {
    let mut phases: Vec<Phase> = steps
        .iter()
        .filter_map(|s| {
            Some(Phase {
                label: s.label.clone(),
                concurrency: s.concurrency,
                agent: s.agent.as_ref().filter(|a| a.requests > 0)?,
            })
        })
        .collect();
    if let Some((c, a)) = soak.filter(|(_, a)| a.requests > 0) {
        phases.push(Phase {
            label: format!("soak at concurrency {c}"),
            concurrency: c,
            agent: a,
        });
    }
    phases
}

fn judge(phases: &[Phase<'_>]) -> Check {
    // Baseline: the concurrency-1 phases pooled; without them, full conformance.
    let (base_ok, base_n) = phases
        .iter()
        .filter(|p| p.concurrency <= 1)
        .fold((0u64, 0u64), |(ok, n), p| {
            (ok + p.agent.conformant, n + p.agent.requests)
        });
    let baseline = if base_n > 0 {
        base_ok as f64 / base_n as f64
    } else {
        1.0
    };
    let dropped: Vec<&Phase> = phases
        .iter()
        .filter(|p| p.concurrency > 1)
        .filter(|p| p.agent.rate().is_some_and(|r| r < baseline - MAX_DROP))
        .collect();
    let total: u64 = phases.iter().map(|p| p.agent.requests).sum();
    let conformant: u64 = phases.iter().map(|p| p.agent.conformant).sum();
    let per_step: Vec<String> = phases
        .iter()
        .map(|p| {
            let soak = if p.label.starts_with("soak") {
                "soak "
            } else {
                ""
            };
            format!("{soak}c{} {}", p.concurrency, p.agent.rate_text())
        })
        .collect();
    let status = if !dropped.is_empty() {
        Status::Fail
    } else if conformant < total {
        Status::Warn
    } else {
        Status::Pass
    };
    let mut c = Check::new(
        CheckId::AgentUnderLoad,
        Stage::Ramp,
        status,
        "agent cases mixed into the ramp and soak stay as conformant under concurrency as at concurrency 1",
    );
    c.measurement = format!(
        "conformance {}; baseline at concurrency 1 {:.0}%, allowed drop {:.0} points",
        per_step.join(", "),
        baseline * 100.0,
        MAX_DROP * 100.0
    );
    if let Some(worst) = dropped.iter().min_by(|a, b| {
        let (ra, rb) = (a.agent.rate(), b.agent.rate());
        ra.partial_cmp(&rb).unwrap_or(std::cmp::Ordering::Equal)
    }) {
        c.measurement.push_str(&format!(
            "; drops to {} at {} ({})",
            worst.agent.rate_text(),
            worst.label,
            worst.agent.codes_text()
        ));
    }
    let shown: Vec<&Phase> = if dropped.is_empty() {
        phases.iter().collect()
    } else {
        dropped.clone()
    };
    c.evidence = shown
        .iter()
        .flat_map(|p| {
            p.agent
                .examples
                .iter()
                .map(move |e| format!("{}: {e}", p.label))
        })
        .take(6)
        .collect::<Vec<_>>()
        .join("\n");
    c.data = json!({
        "baseline_rate": baseline,
        "max_drop": MAX_DROP,
        "phases": phases.iter().map(|p| json!({
            "label": p.label, "concurrency": p.concurrency, "rate": p.agent.rate(),
            "requests": p.agent.requests, "conformant": p.agent.conformant,
            "failures_by_owner": p.agent.failures_by_owner,
            "failures_by_code": p.agent.failures_by_code,
        })).collect::<Vec<_>>(),
        "dropped": dropped.iter().map(|p| p.label.clone()).collect::<Vec<_>>(),
    });
    owner(&mut c, &dropped);
    c
}

/// Who acts: the parser when the dropped phases' failures are its, else the server; a
/// warning (not conformant at concurrency 1 either) goes back to the agent stage.
fn owner(c: &mut Check, dropped: &[&Phase<'_>]) {
    let owners_of = |ps: &[&Phase], name: &str| -> u64 {
        ps.iter()
            .map(|p| p.agent.failures_by_owner.get(name).copied().unwrap_or(0))
            .sum()
    };
    match c.status {
        Status::Fail => {
            c.impact = Impact::Interface;
            if owners_of(dropped, "parser") > 0 {
                c.owner = Some(Owner::Parser);
                c.next_step = "Parser: tool calls come back malformed only under concurrency. Check the tool-call parser for state shared between requests (streaming parsers), its version and --tool-call-parser; replay the failing case at concurrency 1 and N (golive replay) and keep the mix in the ramp until it holds.".into();
            } else {
                c.owner = Some(Owner::Server);
                c.next_step = "Server: agent requests get error answers, timeouts or broken streams under load while the plain load does not. Read the server log for them (golive triage); a strict tool grammar or structured-output backend under load is the usual suspect.".into();
            }
        }
        Status::Warn => {
            c.owner = Some(Owner::Server);
            c.next_step =
                "Not conformant even at concurrency 1: the agent stage's checks say why.".into();
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(concurrency: u32, requests: u64, conformant: u64, owner: &str) -> RampStep {
        let mut a = AgentConformance {
            requests,
            conformant,
            ..Default::default()
        };
        if conformant < requests {
            a.failures_by_owner
                .insert(owner.into(), requests - conformant);
            a.failures_by_code
                .insert("tool_call_markup_in_content".into(), requests - conformant);
        }
        RampStep {
            label: format!("{concurrency} x short"),
            concurrency,
            agent: Some(a),
            ..Default::default()
        }
    }

    #[test]
    fn a_drop_under_load_fails_on_its_owner_and_steady_conformance_passes() {
        let held = check(&[step(1, 4, 4, ""), step(8, 40, 40, "")], None).unwrap();
        assert_eq!(held.status, Status::Pass);
        // 100% at concurrency 1, 92% at 8: a parser that breaks under load.
        let broke = check(&[step(1, 4, 4, ""), step(8, 50, 46, "parser")], None).unwrap();
        assert_eq!(broke.status, Status::Fail);
        assert_eq!(broke.owner, Some(Owner::Parser));
        assert_eq!(broke.impact, Impact::Interface);
        assert!(
            broke.measurement.contains("92% (46/50)"),
            "{}",
            broke.measurement
        );
        let errors = check(&[step(1, 4, 4, ""), step(8, 50, 40, "gateway")], None).unwrap();
        assert_eq!(errors.owner, Some(Owner::Server));
        // The same rate at every concurrency is not a drop under load.
        let same = check(&[step(1, 10, 9, "parser"), step(4, 20, 18, "parser")], None).unwrap();
        assert_eq!(same.status, Status::Warn);
        assert!(check(&[RampStep::default()], None).is_none());
    }
}
