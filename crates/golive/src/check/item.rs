//! The checklist's items: their ids (one enum, so a typo is a compile error) and the
//! item a check produces.

use serde::{Deserialize, Serialize};

use crate::report::{Owner, Status};

crate::names::snake_case_names! {
    /// The id of a checklist item, written in report.json and the text as its snake_case
    /// name (`prefix_caching_flag`).
    pub enum ItemId {
        /// Official image (tag and digest).
        OfficialImage,
        /// Host driver on every host (the driver version, not the CUDA header).
        HostDriver,
        /// CUDA layers: container runtime vs host driver vs local toolkit.
        CudaLayers,
        /// vLLM version.
        VllmVersion,
        /// Visible GPUs (the container's view apart from the host's).
        GpusVisible,
        /// GPUs vs tensor x pipeline x data parallel.
        Parallelism,
        /// Failure phase known (the first cause in the startup log).
        FailurePhase,
        /// `--enable-prefix-caching` in the running command line.
        PrefixCachingFlag,
        /// One communication path; the backend matches the fabric.
        CommunicationPath,
        /// Reproducible record (digest, arguments, driver, logs).
        Reproducible,
        /// Tool-call and reasoning parser as the recipe names them.
        Parsers,
        /// Python packages in the serving container (vllm, torch, NCCL, ...).
        PackageVersions,
        /// Kubernetes' crash record (lastState, previous log, events).
        PodCrashRecord,
        /// Same image digest, driver, vLLM version and relevant env on every node.
        NodeConsistency,
        /// Logging scope of agent data known (prompts and outputs logged, API key).
        LoggingScope,
    }
}

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckItem {
    /// Which item.
    pub id: ItemId,
    /// The item in words, as the checklist shows it.
    pub title: String,
    /// How it was judged (`unknown`: evidence missing).
    pub status: Status,
    /// The line or value it was judged on.
    pub evidence: String,
    /// What to do when it did not pass; empty when it passed.
    #[serde(default)]
    pub next_step: String,
    /// Who fixes a failure, where the item knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
}

pub(super) fn item(
    id: ItemId,
    title: &str,
    status: Status,
    evidence: Vec<String>,
    next_step: &str,
) -> CheckItem {
    CheckItem {
        id,
        title: title.into(),
        status,
        evidence: evidence.join("\n"),
        next_step: if status == Status::Pass {
            String::new()
        } else {
            next_step.into()
        },
        owner: None,
    }
}

/// Worst of the per-bundle statuses: any fail → fail, else any unknown → unknown.
pub(super) fn combine(statuses: &[Status]) -> Status {
    if statuses.contains(&Status::Fail) {
        Status::Fail
    } else if statuses.is_empty() || statuses.contains(&Status::Unknown) {
        Status::Unknown
    } else {
        Status::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_written_as_before() {
        crate::names::assert_round_trip::<ItemId>();
        assert_eq!(ItemId::PrefixCachingFlag.as_str(), "prefix_caching_flag");
        assert_eq!(ItemId::VllmVersion.as_str(), "vllm_version");
        assert_eq!(ItemId::GpusVisible.as_str(), "gpus_visible");
        assert!("prefix_cachng_flag".parse::<ItemId>().is_err());
    }
}
