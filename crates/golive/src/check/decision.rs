//! The repair direction: the runbook's decision rules, in their order ("host or image
//! first ... do not tune prefix caching first when NCCL initialization fails").

use std::collections::BTreeSet;
use std::fmt;

use super::{CheckItem, ItemId};
use crate::report::Status;
use crate::triage::Class;

/// One decision rule of the runbook, in the order they apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Repair {
    /// Host driver, image or GPU access.
    HostOrImage,
    /// Kubernetes' crash record of the serving pod.
    PodCrashRecord,
    /// Engine version, parsers and packages: reset to the official recipe.
    Dependencies,
    /// Memory: topology and parallelism first, then one parameter at a time.
    Memory,
    /// Multi-node: one node first, then the fabric and consistency across ranks.
    IsolateMultiNode,
    /// The prefix-caching flag, prefix identity and retention.
    CacheFlag,
}

impl Repair {
    /// Every rule, in the order the runbook applies them.
    pub const ALL: [Repair; 6] = [
        Repair::HostOrImage,
        Repair::PodCrashRecord,
        Repair::Dependencies,
        Repair::Memory,
        Repair::IsolateMultiNode,
        Repair::CacheFlag,
    ];

    /// The rule in words: its name, a colon, what to do.
    pub fn text(self) -> &'static str {
        match self {
            Repair::HostOrImage => "host or image first: fix the host driver, the image or GPU access before changing any model parameter",
            Repair::PodCrashRecord => "the pod's crash record: a container OOMKilled (exit 137) needs a higher memory limit on the host side; any other crash, its previous log triaged first",
            Repair::Dependencies => "dependencies and build reset: compare against the official recipe, reset to the official image or a clean pinned build, remove optional features until the base server starts",
            Repair::Memory => "memory: topology and parallelism first, then change one parameter at a time (context length, concurrency, batched tokens, cache retention)",
            Repair::IsolateMultiNode => "isolate multi-node: start one node with the smallest documented command, then check backend vs fabric, NICs, identical env and versions on every rank",
            Repair::CacheFlag => "cache flag, prefix identity and retention: put --enable-prefix-caching in the running command, then test identical prefixes with a positive and a negative control and check the retention setting",
        }
    }

    /// The rule's name (the text before the colon).
    pub fn name(self) -> &'static str {
        let t = self.text();
        t.split(':').next().unwrap_or(t)
    }

    /// The items whose failure calls for this rule.
    fn items(self) -> &'static [ItemId] {
        match self {
            Repair::HostOrImage => &[
                ItemId::OfficialImage,
                ItemId::HostDriver,
                ItemId::CudaLayers,
                ItemId::GpusVisible,
            ],
            Repair::PodCrashRecord => &[ItemId::PodCrashRecord],
            Repair::Dependencies => &[
                ItemId::VllmVersion,
                ItemId::Parsers,
                ItemId::PackageVersions,
            ],
            Repair::Memory => &[ItemId::Parallelism],
            Repair::IsolateMultiNode => &[ItemId::CommunicationPath, ItemId::NodeConsistency],
            Repair::CacheFlag => &[ItemId::PrefixCachingFlag],
        }
    }

    /// The failure classes in the startup log that call for this rule (through the
    /// `failure_phase` item).
    fn classes(self) -> &'static [Class] {
        match self {
            Repair::HostOrImage => &[Class::Driver, Class::Container, Class::GpuFault],
            Repair::PodCrashRecord => &[],
            // An engine-internal error: reset to the official image or a pinned engine release,
            // optional features off until the base server starts.
            Repair::Dependencies => &[
                Class::Dependency,
                Class::Config,
                Class::ToolParser,
                Class::Engine,
            ],
            Repair::Memory => &[Class::OomStartup, Class::OomTopology, Class::OomRuntime],
            Repair::IsolateMultiNode => &[Class::Nccl],
            Repair::CacheFlag => &[Class::PrefixCache],
        }
    }
}

/// Where the checklist points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The first rule that applies, the items that call for it, and the later rules.
    Repair {
        /// The first rule that applies.
        first: Repair,
        /// The failed items that call for it.
        failed: Vec<ItemId>,
        /// The rules that apply after it, in order.
        later: Vec<Repair>,
    },
    /// Items failed that no rule names.
    RecordMissingEvidence {
        /// The failed items.
        failed: Vec<ItemId>,
    },
    /// Nothing failed, but evidence is missing.
    CollectEvidence {
        /// The items without evidence.
        unknown: Vec<ItemId>,
    },
    /// Everything passed.
    Accept,
}

fn join(ids: &[ItemId]) -> String {
    ids.iter()
        .map(|i| i.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Repair {
                first,
                failed,
                later,
            } => {
                write!(f, "{} (failed: {})", first.text(), join(failed))?;
                if !later.is_empty() {
                    let names: Vec<&str> = later.iter().map(|r| r.name()).collect();
                    write!(f, "; after that: {}", names.join("; "))?;
                }
                Ok(())
            }
            Decision::RecordMissingEvidence { failed } => write!(
                f,
                "record the missing evidence first (failed: {})",
                join(failed)
            ),
            Decision::CollectEvidence { unknown } => write!(
                f,
                "no failing item; evidence missing for: {} (collect it before judging)",
                join(unknown)
            ),
            Decision::Accept => f.write_str(
                "environment matches the profile: continue with the acceptance run (golive accept)",
            ),
        }
    }
}

/// The runbook's decision rules, in order; the first that applies is the direction.
pub fn decide(items: &[CheckItem], classes: &BTreeSet<Class>) -> Decision {
    let with = |status: Status| -> Vec<ItemId> {
        items
            .iter()
            .filter(|i| i.status == status)
            .map(|i| i.id)
            .collect()
    };
    let failed = with(Status::Fail);
    let mut applicable = Repair::ALL.iter().filter_map(|&rule| {
        let mut ids: Vec<ItemId> = failed
            .iter()
            .copied()
            .filter(|id| rule.items().contains(id))
            .collect();
        if rule.classes().iter().any(|c| classes.contains(c)) {
            ids.push(ItemId::FailurePhase);
        }
        let mut seen = BTreeSet::new();
        ids.retain(|id| seen.insert(*id));
        (!ids.is_empty()).then_some((rule, ids))
    });
    if let Some((first, ids)) = applicable.next() {
        return Decision::Repair {
            first,
            failed: ids,
            later: applicable.map(|(rule, _)| rule).collect(),
        };
    }
    if !failed.is_empty() {
        return Decision::RecordMissingEvidence { failed };
    }
    let unknown = with(Status::Unknown);
    if !unknown.is_empty() {
        return Decision::CollectEvidence { unknown };
    }
    Decision::Accept
}

#[cfg(test)]
mod tests {
    use super::super::item;
    use super::*;

    fn it(id: ItemId, status: Status) -> CheckItem {
        item(id, "t", status, vec![], "")
    }

    #[test]
    fn first_rule_wins_and_later_rules_are_named() {
        let items = [
            it(ItemId::PrefixCachingFlag, Status::Fail),
            it(ItemId::HostDriver, Status::Fail),
            it(ItemId::Reproducible, Status::Unknown),
        ];
        let classes = BTreeSet::from([Class::Driver]);
        let d = decide(&items, &classes);
        assert_eq!(
            d,
            Decision::Repair {
                first: Repair::HostOrImage,
                failed: vec![ItemId::HostDriver, ItemId::FailurePhase],
                later: vec![Repair::CacheFlag],
            }
        );
        let text = d.to_string();
        assert!(
            text.starts_with("host or image first: fix the host driver"),
            "{text}"
        );
        assert!(
            text.ends_with("(failed: host_driver, failure_phase); after that: cache flag, prefix identity and retention"),
            "{text}"
        );
    }

    #[test]
    fn without_a_rule() {
        let d = decide(&[it(ItemId::Reproducible, Status::Fail)], &BTreeSet::new());
        assert_eq!(
            d.to_string(),
            "record the missing evidence first (failed: reproducible)"
        );
        let d = decide(
            &[it(ItemId::Reproducible, Status::Unknown)],
            &BTreeSet::new(),
        );
        assert!(matches!(d, Decision::CollectEvidence { .. }));
        let d = decide(&[it(ItemId::Reproducible, Status::Pass)], &BTreeSet::new());
        assert_eq!(d, Decision::Accept);
        assert!(d.to_string().contains("acceptance run"));
    }
}
