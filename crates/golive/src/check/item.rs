//! The checklist's items: their ids (one enum, so a typo is a compile error) and the
//! item a check produces.

use serde::{Deserialize, Serialize};

use crate::report::{Owner, Status};

crate::names::snake_case_names! {
    /// The id of a checklist item, written in report.json and the text as its snake_case
    /// name (`prefix_caching_flag`).
    pub enum ItemId {
        OfficialImage,
        HostDriver,
        CudaLayers,
        VllmVersion,
        GpusVisible,
        Parallelism,
        FailurePhase,
        PrefixCachingFlag,
        CommunicationPath,
        Reproducible,
        Parsers,
        PackageVersions,
        PodCrashRecord,
        NodeConsistency,
        LoggingScope,
    }
}

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckItem {
    pub id: ItemId,
    pub title: String,
    pub status: Status,
    /// The line or value it was judged on.
    pub evidence: String,
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
