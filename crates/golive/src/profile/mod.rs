//! Profiles: what a deployment requires (image, driver, GPUs, flags), as data.
//!
//! Built-in profiles are TOML files embedded at build time (`profiles/*.toml`);
//! `--profile FILE` reads another TOML file of the same shape, and `--recipe FILE`
//! reads a recipe YAML in the format of `vllm-project/recipes` (`models/<org>/<model>.yaml`,
//! [`Profile::from_recipe`]). Hardware and engine facts (GPU families, fabrics, the
//! driver/CUDA table) are profile data too ([`HardwareFacts`] and its neighbours): the generic `vllm` profile carries them and every
//! other profile falls back to its values ([`Profile::inherit`]).

mod facts;
pub(crate) mod recipe;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;

use anyhow::Context;
use serde::{Deserialize, Serialize};

pub use facts::{CudaFacts, Fabric, FabricFacts, FabricTable, GpuFamily, HardwareFacts, Strategy};
pub use recipe::{ProseFact, ProsePattern, PROSE as RECIPE_PROSE};

const BUILTIN: &[(&str, &str)] = &[
    ("kimi-k3", include_str!("../../profiles/kimi-k3.toml")),
    ("vllm", BUILTIN_GENERIC),
];

/// Names of the built-in profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// The image a deployment must run (`[image]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageReq {
    /// Official image references (`repo:tag`); empty: any image.
    pub official: Vec<String>,
    /// CUDA major version the image is built for.
    pub cuda_major: Option<u32>,
}

/// The host driver a deployment needs (`[driver]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DriverReq {
    /// Minimum host driver version (dotted).
    pub min: Option<String>,
    /// The branch name, for people (`R580`).
    pub branch: Option<String>,
}

/// The vLLM a deployment needs (`[vllm]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VllmReq {
    /// Lowest vLLM version (dotted, e.g. `0.28`); `None`: any.
    pub min_version: Option<String>,
}

/// The GPUs a deployment needs (`[gpus]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuReq {
    /// Fewest GPUs of one server; `None`: not prescribed.
    pub min_count: Option<u32>,
    /// GPU name fragments of the required class (`B300` matches `NVIDIA B300 SXM6 AC`).
    pub classes: Vec<String>,
    /// Minimum GPUs by parallel strategy ([`Strategy`], e.g. `multi_node_dep = 16`); a key
    /// that is no strategy is a GPU-name fragment (`h100 = 32`) and applies instead
    /// whenever the host has that GPU (the recipe's `strategy_min_gpus`).
    pub min_by_strategy: BTreeMap<String, u32>,
}

/// The serving flags a deployment needs (`[flags]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlagReq {
    /// Flags that must be in the running command line.
    pub required: Vec<String>,
    /// Flags required on one hardware family only (`blackwell`, `hopper`).
    pub required_on: BTreeMap<String, Vec<String>>,
    /// Flags that must have this value in the running flags (command line merged with
    /// its `--config` file), e.g. `{ "--prefix-match-unit" = "64" }`.
    pub values: BTreeMap<String, String>,
    /// `--tool-call-parser` the model needs; `None`: not prescribed.
    pub tool_call_parser: Option<String>,
    /// `--reasoning-parser` the model needs; `None`: not prescribed.
    pub reasoning_parser: Option<String>,
}

/// The interconnect a deployment needs (`[transport]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TransportReq {
    /// `--all2all-backend` for RDMA fabrics (empty: not prescribed).
    pub rdma_all2all: String,
    /// `--all2all-backend` for NVLink fabrics.
    pub nvlink_all2all: String,
    /// Environment required when RDMA carries traffic.
    pub rdma_env: BTreeMap<String, String>,
    /// DeepGEMM MegaMoE (`megamoe_backend`) must not be used when RDMA carries traffic.
    pub megamoe_forbidden_with_rdma: bool,
    /// The `--moe-backend` value of DeepGEMM MegaMoE.
    pub megamoe_backend: Option<String>,
    /// The variable that turns NCCL's DMA-BUF registration off (errno 524 fallback).
    pub dmabuf_fallback_env: Option<String>,
}

/// The prefix cache and context of a deployment (`[cache]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheReq {
    /// The variable that sets the cache's retention, shown when set (e.g. `VLLM_PREFIX_CACHE_RETENTION_INTERVAL`).
    pub retention_env: Option<String>,
    /// The model's context in tokens; a larger `--max-model-len` fails the check.
    pub max_context: Option<u64>,
}

/// What a deployment requires.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Profile {
    /// The profile's name (`kimi-k3`, `vllm`), as reports show it.
    pub name: String,
    /// One line on what it is for.
    pub description: String,
    /// Where the facts come from (recipe, runbook).
    pub source: String,
    /// The model it is written for (`moonshotai/Kimi-K3`); `None`: any.
    pub model: Option<String>,
    /// The image it needs.
    pub image: ImageReq,
    /// The host driver it needs.
    pub driver: DriverReq,
    /// The vLLM it needs.
    pub vllm: VllmReq,
    /// The GPUs it needs.
    pub gpus: GpuReq,
    /// The serving flags it needs.
    pub flags: FlagReq,
    /// The interconnect it needs.
    pub transport: TransportReq,
    /// The prefix cache and context it needs.
    pub cache: CacheReq,
    /// PEP 440 bounds on the Python packages inside the serving container, by package
    /// (`vllm`, `torch`, `nccl`, `nvshmem`, `deep_ep`, `flashinfer`, `xgrammar` or a
    /// distribution name), e.g. `vllm = ">=0.27.0"`.
    pub packages: BTreeMap<String, String>,
    /// GPU families (`[[hardware.families]]`).
    pub hardware: HardwareFacts,
    /// What belongs to RDMA and to NVLink (`[fabrics.rdma]`, `[fabrics.nvlink]`).
    pub fabrics: FabricTable,
    /// The driver each CUDA release needs (`[cuda]`).
    pub cuda: CudaFacts,
    /// The model's API contract (`[contract]`): immutable parameters, reasoning,
    /// prompt-token tolerance, tool-call gates.
    pub contract: crate::contract::ContractReq,
    /// The runbook's worksheet (`[[worksheet]]`); empty: the built-in one
    /// ([`Profile::worksheet_items`]).
    pub worksheet: Vec<crate::report::worksheet::ItemSpec>,
}

/// Recipe flags whose value the recipe fixes and a profile then requires.
pub const RECIPE_VALUE_FLAGS: &[&str] = &[
    "--prefix-match-unit",
    "--prefix-caching-hash-algo",
    "--kv-cache-dtype",
];

/// The generic `vllm` profile, parsed once: the facts every other profile falls back to.
static GENERIC: LazyLock<Profile> = LazyLock::new(|| {
    toml::from_str(BUILTIN_GENERIC).expect("the built-in vllm profile is valid (tested)")
});

const BUILTIN_GENERIC: &str = include_str!("../../profiles/vllm.toml");

impl Profile {
    /// The generic `vllm` profile (the fallback of every fact a profile leaves out).
    pub fn generic() -> &'static Profile {
        &GENERIC
    }

    /// A built-in profile by name, or a TOML profile file.
    pub fn load(name_or_file: &str) -> anyhow::Result<Profile> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_file) {
            let mut p: Profile = toml::from_str(text)
                .with_context(|| format!("built-in profile {name_or_file} is invalid"))?;
            p.inherit(Profile::generic());
            return Ok(p);
        }
        let path = Path::new(name_or_file);
        if !path.is_file() {
            anyhow::bail!(
                "unknown profile {name_or_file:?}: use one of {} or a profile file (TOML)",
                builtin_names().join(", ")
            );
        }
        if name_or_file.ends_with(".yaml") || name_or_file.ends_with(".yml") {
            return Profile::load_recipe(path);
        }
        let text = crate::input::read_text(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut p: Profile = toml::from_str(&text)
            .with_context(|| format!("{} is not a valid profile", path.display()))?;
        if p.name.is_empty() {
            p.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        p.inherit(Profile::generic());
        p.check_versions()
            .with_context(|| format!("{} is not a valid profile", path.display()))?;
        Ok(p)
    }

    /// Every version and version bound parses: a typo fails when the profile is read,
    /// instead of passing (or turning unknown) in every check.
    pub fn check_versions(&self) -> anyhow::Result<()> {
        use std::str::FromStr;
        for (label, bound) in &self.packages {
            pep440_rs::VersionSpecifiers::from_str(bound).map_err(|e| {
                anyhow::anyhow!("packages.{label} = {bound:?} is not a PEP 440 bound: {e}")
            })?;
        }
        if let Some(v) = &self.vllm.min_version {
            pep440_rs::Version::from_str(v)
                .map_err(|e| anyhow::anyhow!("vllm.min_version = {v:?} is not a version: {e}"))?;
        }
        if let Some(v) = &self.driver.min {
            anyhow::ensure!(
                !v.is_empty()
                    && v.split('.')
                        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())),
                "driver.min = {v:?} is not a dotted version such as 580.65.06"
            );
        }
        Ok(())
    }

    /// Fills every fact this profile leaves out (an empty list, an unset name) from
    /// `base`: GPU families, the fabrics' backends, variables and multi-node GPUs, the
    /// CUDA table, the MegaMoE backend and the DMA-BUF fallback variable. Requirements
    /// (image, driver, flags, ...) are never inherited.
    pub fn inherit(&mut self, base: &Profile) {
        fn list(mine: &mut Vec<String>, base: &[String]) {
            if mine.is_empty() {
                *mine = base.to_vec();
            }
        }
        if self.hardware.families.is_empty() {
            self.hardware.families = base.hardware.families.clone();
        }
        for (mine, theirs) in [
            (&mut self.fabrics.rdma, &base.fabrics.rdma),
            (&mut self.fabrics.nvlink, &base.fabrics.nvlink),
        ] {
            list(&mut mine.all2all, &theirs.all2all);
            list(&mut mine.env, &theirs.env);
            list(&mut mine.multi_node_gpus, &theirs.multi_node_gpus);
        }
        if self.cuda.driver_native.is_empty() {
            self.cuda.driver_native = base.cuda.driver_native.clone();
        }
        if self.contract.is_empty() {
            self.contract = base.contract.clone();
        }
        let t = &mut self.transport;
        if t.megamoe_backend.is_none() {
            t.megamoe_backend = base.transport.megamoe_backend.clone();
        }
        if t.dmabuf_fallback_env.is_none() {
            t.dmabuf_fallback_env = base.transport.dmabuf_fallback_env.clone();
        }
    }

    /// The worksheet items: the profile's own, else the built-in runbook worksheet.
    pub fn worksheet_items(&self) -> Vec<crate::report::worksheet::ItemSpec> {
        if self.worksheet.is_empty() {
            crate::report::worksheet::builtin()
        } else {
            self.worksheet.clone()
        }
    }

    /// `--recipe FILE`.
    pub fn load_recipe(path: &Path) -> anyhow::Result<Profile> {
        let text = crate::input::read_text(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let p = Profile::from_recipe(&text)
            .with_context(|| format!("{} is not a recipe", path.display()))?;
        p.check_versions()
            .with_context(|| format!("{} is not a recipe", path.display()))?;
        Ok(p)
    }

    /// Flags required on a host whose GPUs are `gpu_names`.
    pub fn required_flags_for(&self, gpu_names: &[String]) -> Vec<String> {
        let mut flags = self.flags.required.clone();
        let families: std::collections::BTreeSet<&str> = gpu_names
            .iter()
            .filter_map(|n| self.hardware.family(n))
            .collect();
        for fam in families {
            if let Some(extra) = self.flags.required_on.get(fam) {
                for f in extra {
                    if !flags.contains(f) {
                        flags.push(f.clone());
                    }
                }
            }
        }
        flags
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_load() {
        let k = Profile::load("kimi-k3").unwrap();
        assert_eq!(
            k.image.official,
            vec!["vllm/vllm-openai:kimi-k3".to_string()]
        );
        assert_eq!(k.driver.min.as_deref(), Some("580.65.06"));
        assert_eq!(k.vllm.min_version.as_deref(), Some("0.27.0"));
        assert_eq!(k.gpus.min_count, Some(8));
        assert_eq!(
            k.flags.required,
            vec!["--enable-prefix-caching".to_string()]
        );
        assert_eq!(k.transport.rdma_all2all, "deepep_v2");
        assert_eq!(k.transport.nvlink_all2all, "flashinfer_nvlink_one_sided");
        assert_eq!(k.transport.rdma_env["UCX_TLS"], "rc,cuda_copy");
        assert_eq!(k.cache.max_context, Some(1_048_576));
        let v = Profile::load("vllm").unwrap();
        assert!(v.flags.required.is_empty());
        assert!(Profile::load("nope").is_err());
        for builtin in builtin_names() {
            Profile::load(builtin).unwrap().check_versions().unwrap();
        }
    }

    #[test]
    fn recipe_cache_flags_and_vllm_bound() {
        let p = Profile::from_recipe(
            "model:\n  model_id: org/m\n  min_vllm_version: \"0.27.0\"\n  base_args:\n    - \"--enable-prefix-caching\"\n    - \"--prefix-match-unit\"\n    - \"64\"\n    - \"--kv-cache-dtype=fp8\"\n",
        )
        .unwrap();
        assert_eq!(p.flags.values["--prefix-match-unit"], "64");
        assert_eq!(p.flags.values["--kv-cache-dtype"], "fp8");
        assert_eq!(
            p.flags.required,
            vec!["--enable-prefix-caching".to_string()]
        );
        assert_eq!(p.packages["vllm"], ">=0.27.0");
        let k = Profile::load("kimi-k3").unwrap();
        assert_eq!(k.packages["vllm"], ">=0.27.0");
    }

    #[test]
    fn hardware_facts_are_data() {
        let g = Profile::generic();
        let fam = |n: &str| g.hardware.family(n).map(String::from);
        assert_eq!(fam("NVIDIA B300 SXM6 AC").as_deref(), Some("blackwell"));
        assert_eq!(fam("NVIDIA GB200").as_deref(), Some("blackwell"));
        assert_eq!(fam("NVIDIA H200").as_deref(), Some("hopper"));
        assert_eq!(fam("NVIDIA GH200 480GB").as_deref(), Some("hopper"));
        assert_eq!(fam("AMD Instinct MI300X").as_deref(), Some("amd"));
        assert_eq!(fam("Tesla T4"), None);
        let f = &g.fabrics;
        assert_eq!(f.of_backend("deepep_v2"), Fabric::Rdma);
        assert_eq!(f.of_backend("DeepEP_low_latency"), Fabric::Rdma);
        assert_eq!(f.of_backend("pplx"), Fabric::Rdma);
        assert_eq!(f.of_backend("flashinfer_nvlink_one_sided"), Fabric::Nvlink);
        assert_eq!(f.of_backend("allgather_reducescatter"), Fabric::Generic);
        assert!(f.is_env_of(Fabric::Rdma, "UCX_TLS"));
        assert!(f.is_env_of(Fabric::Rdma, "NCCL_IB_HCA"));
        assert!(f.is_env_of(Fabric::Nvlink, "NCCL_MNNVL_ENABLE"));
        assert!(!f.is_env_of(Fabric::Nvlink, "NCCL_DEBUG"));
        assert!(f.multi_node_nvlink("NVIDIA GB300"));
        assert!(!f.multi_node_nvlink("NVIDIA B300 SXM6 AC"));
        let c = &g.cuda;
        assert_eq!(c.native_for_driver("535.129.03"), Some((12, 2)));
        assert_eq!(c.native_for_driver("580.95.05"), Some((13, 0)));
        assert_eq!(c.native_for_driver("580.20"), Some((12, 9)));
        assert_eq!(c.native_for_driver("610.57.04"), Some((13, 3)));
        assert_eq!(c.native_for_driver("garbage"), None);
    }

    #[test]
    fn profiles_inherit_the_generic_facts() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("site.toml");
        std::fs::write(
            &own,
            "[[hardware.families]]\nname = \"hopper\"\ngpus = [\"H100\"]\n[transport]\nrdma_all2all = \"x\"\n",
        )
        .unwrap();
        let p = Profile::load(own.to_str().unwrap()).unwrap();
        assert_eq!(p.name, "site");
        assert_eq!(
            p.hardware.families.len(),
            1,
            "its own families replace the list"
        );
        assert_eq!(p.hardware.family("NVIDIA B300"), None);
        assert_eq!(p.fabrics, Profile::generic().fabrics);
        assert_eq!(p.cuda, Profile::generic().cuda);
        assert_eq!(
            p.transport.dmabuf_fallback_env.as_deref(),
            Some("NCCL_DMABUF_ENABLE")
        );
        assert_eq!(
            p.transport.megamoe_backend.as_deref(),
            Some("deep_gemm_mega_moe")
        );
        let k = Profile::load("kimi-k3").unwrap();
        assert_eq!(k.fabrics, Profile::generic().fabrics);
    }
}
