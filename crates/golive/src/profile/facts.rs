//! Hardware and engine facts as profile data: GPU families, the fabric each
//! `--all2all-backend` and each environment variable belongs to, GPU classes whose
//! NVLink spans nodes, and the driver → native CUDA table.
//!
//! The generic `vllm` profile carries them (`profiles/vllm.toml`); every other profile
//! falls back to those values where it leaves a list empty ([`super::Profile::inherit`]).

use serde::{Deserialize, Serialize};

use crate::envparse::{cmp_versions, version_parts, SmiTable};

crate::names::snake_case_names! {
    /// The interconnect an all-to-all backend or an environment variable is made for.
    pub enum Fabric {
        /// InfiniBand/RoCE between nodes (DeepEP, pplx, NIXL, MoRI; UCX, NCCL_IB_*, NVSHMEM_IB*).
        Rdma,
        /// NVLink, within a node or across an NVL rack (MNNVL).
        Nvlink,
        /// Works on any fabric (e.g. `allgather_reducescatter`, `naive`).
        Generic,
    }
}

crate::names::snake_case_names! {
    /// Deployment strategies as recipes name them (`strategy_min_gpus`, `default_strategy`).
    pub enum Strategy {
        /// One node, tensor parallel.
        SingleNodeTp,
        /// One node, tensor parallel with expert parallel.
        SingleNodeTep,
        /// One node, data parallel with expert parallel.
        SingleNodeDep,
        /// Several nodes, tensor parallel.
        MultiNodeTp,
        /// Several nodes, tensor parallel with expert parallel.
        MultiNodeTep,
        /// Several nodes, data parallel with expert parallel.
        MultiNodeDep,
        /// Several nodes, tensor and pipeline parallel.
        MultiNodeTpPp,
        /// Prefill and decode on separate servers (disaggregated).
        PdCluster,
    }
}

/// One GPU family: its name as recipes key hardware overrides and the GPU-name
/// fragments that belong to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuFamily {
    /// The family's name, as recipes key hardware overrides (`blackwell`, `hopper`).
    pub name: String,
    /// GPU-name fragments of the family (`B300`, `H100`).
    pub gpus: Vec<String>,
}

/// `[hardware]`: the GPU families.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HardwareFacts {
    /// GPU families by name fragment (case-insensitive); the first family with a
    /// fragment the GPU name contains wins.
    pub families: Vec<GpuFamily>,
}

/// What belongs to one fabric. Patterns: `exact`, `prefix*`, `*fragment*` or `*suffix`;
/// backend names compare case-insensitively, variable names exactly.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FabricFacts {
    /// `--all2all-backend` names made for this fabric.
    pub all2all: Vec<String>,
    /// Environment variables that configure this fabric.
    pub env: Vec<String>,
    /// GPU-name fragments of classes whose links of this fabric span nodes
    /// (multi-node NVLink: GB200/GB300 NVL racks).
    pub multi_node_gpus: Vec<String>,
}

/// `[fabrics]`: what belongs to each interconnect.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FabricTable {
    /// `[fabrics.rdma]`.
    pub rdma: FabricFacts,
    /// `[fabrics.nvlink]`.
    pub nvlink: FabricFacts,
}

/// `[cuda]`: the driver branch each CUDA release needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CudaFacts {
    /// `[minimum driver, CUDA]` pairs in ascending order (CUDA toolkit release notes,
    /// table 3, Linux GA): a driver at or above the minimum runs that CUDA natively.
    pub driver_native: Vec<(String, String)>,
}

/// `pattern` as described on [`FabricFacts`].
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        (Some(rest), _) if rest.ends_with('*') => name.contains(&rest[..rest.len() - 1]),
        (Some(suffix), _) => name.ends_with(suffix),
        (None, Some(prefix)) => name.starts_with(prefix),
        (None, None) => name == pattern,
    }
}

impl HardwareFacts {
    /// The family of a GPU name (`blackwell` for `NVIDIA B300 SXM6 AC`).
    pub fn family(&self, gpu_name: &str) -> Option<&str> {
        let n = gpu_name.to_ascii_uppercase();
        self.families
            .iter()
            .find(|f| f.gpus.iter().any(|g| n.contains(&g.to_ascii_uppercase())))
            .map(|f| f.name.as_str())
    }
}

impl FabricTable {
    /// The facts of `fabric`; `None` for [`Fabric::Generic`], which has none.
    pub fn get(&self, fabric: Fabric) -> Option<&FabricFacts> {
        match fabric {
            Fabric::Rdma => Some(&self.rdma),
            Fabric::Nvlink => Some(&self.nvlink),
            Fabric::Generic => None,
        }
    }

    /// The fabric an `--all2all-backend` is made for (NVLink patterns are tried first).
    pub fn of_backend(&self, backend: &str) -> Fabric {
        let b = backend.to_ascii_lowercase();
        let hit = |f: &FabricFacts| {
            f.all2all
                .iter()
                .any(|p| pattern_matches(&p.to_ascii_lowercase(), &b))
        };
        if hit(&self.nvlink) {
            Fabric::Nvlink
        } else if hit(&self.rdma) {
            Fabric::Rdma
        } else {
            Fabric::Generic
        }
    }

    /// True when `name` configures `fabric`.
    pub fn is_env_of(&self, fabric: Fabric, name: &str) -> bool {
        self.get(fabric)
            .is_some_and(|f| f.env.iter().any(|p| pattern_matches(p, name)))
    }

    /// True when a GPU of this name has NVLink across nodes.
    pub fn multi_node_nvlink(&self, gpu_name: &str) -> bool {
        let n = gpu_name.to_ascii_uppercase();
        self.nvlink
            .multi_node_gpus
            .iter()
            .any(|g| n.contains(&g.to_ascii_uppercase()))
    }
}

fn cuda_pair(v: &str) -> Option<(u32, u32)> {
    let p = version_parts(v);
    Some((
        u32::try_from(*p.first()?).ok()?,
        u32::try_from(p.get(1).copied().unwrap_or(0)).ok()?,
    ))
}

impl CudaFacts {
    /// The newest CUDA a host driver runs natively (without forward-compatibility
    /// libraries).
    pub fn native_for_driver(&self, driver: &str) -> Option<(u32, u32)> {
        if version_parts(driver).is_empty() {
            return None;
        }
        let mut best = None;
        for (min, cuda) in &self.driver_native {
            if cmp_versions(driver, min) == std::cmp::Ordering::Less {
                // Below this release's GA build: the previous entry stands.
                break;
            }
            best = cuda_pair(cuda).or(best);
        }
        best
    }

    /// The CUDA of the `nvidia-smi` header and the driver's native CUDA, when the header
    /// shows more (forward-compatibility libraries): the driver, not the header, decides.
    pub fn header_exceeds_native(&self, smi: &SmiTable) -> Option<((u32, u32), (u32, u32))> {
        let shown = cuda_pair(smi.cuda_shown.as_deref()?)?;
        let native = self.native_for_driver(smi.driver.as_deref()?)?;
        (shown > native).then_some((shown, native))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn patterns() {
        assert!(pattern_matches("deepep*", "deepep_v2"));
        assert!(!pattern_matches("deepep*", "x_deepep"));
        assert!(pattern_matches("*pplx*", "my_pplx_kernels"));
        assert!(pattern_matches("*_ENABLE", "NCCL_DMABUF_ENABLE"));
        assert!(pattern_matches("NCCL_NVLS_ENABLE", "NCCL_NVLS_ENABLE"));
        assert!(!pattern_matches("NCCL_NVLS_ENABLE", "NCCL_NVLS_ENABLE_X"));
    }

    #[test]
    fn strategies_read_as_recipes_spell_them() {
        crate::names::assert_round_trip::<Strategy>();
        crate::names::assert_round_trip::<Fabric>();
        assert_eq!(Strategy::MultiNodeTpPp.as_str(), "multi_node_tp_pp");
        assert!(Strategy::from_str("h100").is_err());
    }
}
