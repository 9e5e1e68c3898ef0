//! The startup-log item: failure classes triage finds in the bundles' logs, the phase
//! they point at, and the NCCL DMA-BUF (errno 524) line.

use std::collections::BTreeSet;

use super::{combine, item, CheckItem, Ctx, ItemId};
use crate::report::Status;
use crate::triage::rules::RuleKind;
use crate::triage::Class;

fn phase_of(class: Class) -> &'static str {
    match class {
        Class::Driver | Class::Container => "container/driver (before Python)",
        Class::Dependency => "import and dependencies",
        Class::Config => "arguments and configuration",
        Class::OomStartup | Class::OomTopology => "memory at startup",
        Class::OomRuntime => "memory while serving",
        Class::PrefixCache => "prefix cache",
        Class::Nccl => "multi-node communication (NCCL init)",
        Class::ToolParser => "tool/reasoning parser",
        Class::GpuFault => "GPU fault while running (Xid, ECC, illegal memory access)",
        Class::Engine => "the engine's own code (engine bug or unsupported feature combination)",
        Class::Unknown => "unknown",
    }
}

/// Failure classes found in the bundles' startup logs (for the decision).
pub(super) fn log_classes(c: &Ctx) -> (CheckItem, BTreeSet<Class>) {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    let mut classes = BTreeSet::new();
    let mut next = String::new();
    for b in c.bundles {
        let (Some(path), Some(text)) = (&b.startup_log, &b.startup_log_text) else {
            st.push(Status::Unknown);
            ev.push(c.tag(b, "no raw/startup.log"));
            continue;
        };
        let report = crate::triage::analyze_paths(
            std::slice::from_ref(path),
            &crate::triage::TriageOptions::default(),
        );
        if let Ok(Some(f)) = report.map(|r| r.primary) {
            classes.insert(f.class);
            ev.push(c.tag(
                b,
                format!(
                    "phase: {} — startup.log line {}: {}",
                    phase_of(f.class),
                    f.line,
                    f.text.trim()
                ),
            ));
            if next.is_empty() {
                next = f.next_step.clone();
            }
            st.push(Status::Fail);
            continue;
        }
        if let Some(e) = b.container_cuda_errors.first() {
            classes.insert(Class::Container);
            ev.push(c.tag(
                b,
                format!(
                    "phase: {} — line {}: {}",
                    phase_of(Class::Container),
                    e.line,
                    e.text
                ),
            ));
            st.push(Status::Fail);
            continue;
        }
        if let Some((n, l)) = errno524_line(text) {
            classes.insert(Class::Nccl);
            ev.push(c.tag(
                b,
                format!(
                    "phase: {} — startup.log line {n}: {l}",
                    phase_of(Class::Nccl)
                ),
            ));
            st.push(Status::Fail);
            continue;
        }
        // Serving markers are triage's `serving` rules (vLLM, SGLang, llama.cpp, ...).
        let rules = crate::triage::rules::RuleSet::builtin();
        if let Some(l) = text
            .lines()
            .find(|l| rules.first_of_kind(l, RuleKind::Serving).is_some())
        {
            let l = crate::redact::redact_line(l.trim());
            ev.push(c.tag(b, format!("no failure; started: {l}")));
            st.push(Status::Pass);
        } else {
            ev.push(c.tag(b, "no known failure line and no startup-complete line"));
            st.push(Status::Unknown);
        }
    }
    if next.is_empty() {
        next = "Find the first failing line (golive triage raw/startup.log) before changing anything; the last line is usually a consequence.".into();
    }
    (
        item(
            ItemId::FailurePhase,
            "Failure phase known (first cause in startup.log)",
            combine(&st),
            ev,
            &next,
        ),
        classes,
    )
}

/// The first line triage's NCCL hints name (the DMA-BUF registration failing with errno
/// 524), read with triage's rules.
pub(super) fn errno524_line(text: &str) -> Option<(usize, String)> {
    let rules = crate::triage::rules::RuleSet::builtin();
    text.lines()
        .enumerate()
        .find(|(_, l)| {
            rules
                .first_of_kind(l, RuleKind::Hint)
                .is_some_and(|ri| rules.rules[ri].class == Class::Nccl)
        })
        .map(|(i, l)| {
            (
                i + 1,
                crate::redact::redact_line(l.trim())
                    .chars()
                    .take(300)
                    .collect(),
            )
        })
}
