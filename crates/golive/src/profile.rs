//! Profiles: what a deployment requires (image, driver, GPUs, flags), as data.
//!
//! Built-in profiles are TOML files embedded at build time (`profiles/*.toml`);
//! `--profile FILE` reads another TOML file of the same shape, and `--recipe FILE`
//! reads a recipe YAML in the format of `vllm-project/recipes` (`models/<org>/<model>.yaml`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

const BUILTIN: &[(&str, &str)] = &[
    ("kimi-k3", include_str!("../profiles/kimi-k3.toml")),
    ("vllm", include_str!("../profiles/vllm.toml")),
];

/// Names of the built-in profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ImageReq {
    /// Official image references (`repo:tag`); empty: any image.
    pub official: Vec<String>,
    /// CUDA major version the image is built for.
    pub cuda_major: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DriverReq {
    /// Minimum host driver version (dotted).
    pub min: Option<String>,
    /// The branch name, for people (`R580`).
    pub branch: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VllmReq {
    pub min_version: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuReq {
    pub min_count: Option<u32>,
    /// GPU name fragments of the required class (`B300` matches `NVIDIA B300 SXM6 AC`).
    pub classes: Vec<String>,
    pub min_by_strategy: BTreeMap<String, u32>,
}

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
    pub tool_call_parser: Option<String>,
    pub reasoning_parser: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TransportReq {
    /// `--all2all-backend` for RDMA fabrics (empty: not prescribed).
    pub rdma_all2all: String,
    /// `--all2all-backend` for NVLink fabrics.
    pub nvlink_all2all: String,
    /// Environment required when RDMA carries traffic.
    pub rdma_env: BTreeMap<String, String>,
    pub megamoe_forbidden_with_rdma: bool,
    pub megamoe_backend: Option<String>,
    pub dmabuf_fallback_env: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheReq {
    pub retention_env: Option<String>,
    pub max_context: Option<u64>,
}

/// What a deployment requires.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// Where the facts come from (recipe, runbook).
    pub source: String,
    pub model: Option<String>,
    pub image: ImageReq,
    pub driver: DriverReq,
    pub vllm: VllmReq,
    pub gpus: GpuReq,
    pub flags: FlagReq,
    pub transport: TransportReq,
    pub cache: CacheReq,
    /// PEP 440 bounds on the Python packages inside the serving container, by package
    /// (`vllm`, `torch`, `nccl`, `nvshmem`, `deep_ep`, `flashinfer`, `xgrammar` or a
    /// distribution name), e.g. `vllm = ">=0.27.0"`.
    pub packages: BTreeMap<String, String>,
}

/// Recipe flags whose value the recipe fixes and a profile then requires.
pub const RECIPE_VALUE_FLAGS: &[&str] = &[
    "--prefix-match-unit",
    "--prefix-caching-hash-algo",
    "--kv-cache-dtype",
];

/// The value of `flag` in a recipe's argument list (`--flag V` or `--flag=V`).
fn value_after(args: &[String], flag: &str) -> Option<String> {
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
        (a == flag)
            .then(|| args.get(i + 1).filter(|v| !v.starts_with("--")).cloned())
            .flatten()
    })
}

/// Hardware family of a GPU name, as recipes key their overrides.
pub fn hardware_family(gpu_name: &str) -> Option<&'static str> {
    let n = gpu_name.to_ascii_uppercase();
    let has = |s: &str| n.contains(s);
    if has("B200") || has("B300") || has("GB200") || has("GB300") || has("BLACKWELL") || has("B100")
    {
        Some("blackwell")
    } else if has("H100") || has("H200") || has("H20") || has("H800") || has("GH200") {
        Some("hopper")
    } else if has("MI3") || has("AMD") {
        Some("amd")
    } else {
        None
    }
}

impl Profile {
    /// A built-in profile by name, or a TOML profile file.
    pub fn load(name_or_file: &str) -> anyhow::Result<Profile> {
        if let Some((_, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_file) {
            return toml::from_str(text)
                .with_context(|| format!("built-in profile {name_or_file} is invalid"));
        }
        let path = Path::new(name_or_file);
        if !path.is_file() {
            anyhow::bail!(
                "unknown profile {name_or_file:?}: use one of {} or a profile file (TOML)",
                builtin_names().join(", ")
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if name_or_file.ends_with(".yaml") || name_or_file.ends_with(".yml") {
            return Profile::from_recipe(&text)
                .with_context(|| format!("{} is not a recipe", path.display()));
        }
        let mut p: Profile = toml::from_str(&text)
            .with_context(|| format!("{} is not a valid profile", path.display()))?;
        if p.name.is_empty() {
            p.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        Ok(p)
    }

    /// `--recipe FILE`.
    pub fn load_recipe(path: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Profile::from_recipe(&text).with_context(|| format!("{} is not a recipe", path.display()))
    }

    /// Reads a recipe YAML (`vllm-project/recipes` format: `meta`, `model`, `features`,
    /// `strategy_min_gpus`, `hardware_overrides`, `strategy_overrides`, `guide`).
    pub fn from_recipe(text: &str) -> anyhow::Result<Profile> {
        use serde_norway::Value;
        let doc: Value = serde_norway::from_str(text).context("invalid YAML")?;
        let model = doc.get("model").context("no `model:` section")?;
        let s = |v: Option<&Value>| v.and_then(|v| v.as_str()).map(String::from);
        let strs = |v: Option<&Value>| -> Vec<String> {
            v.and_then(|v| v.as_sequence())
                .map(|s| {
                    s.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        let guide = s(doc.get("guide")).unwrap_or_default();
        let notes = format!(
            "{guide}\n{}\n{}",
            s(model
                .get("install")
                .and_then(|i| i.get("docker"))
                .and_then(|d| d.get("note")))
            .unwrap_or_default(),
            s(model
                .get("install")
                .and_then(|i| i.get("pip"))
                .and_then(|d| d.get("note")))
            .unwrap_or_default()
        );
        let mut p = Profile {
            name: s(doc.get("meta").and_then(|m| m.get("slug")))
                .or_else(|| s(model.get("model_id")))
                .unwrap_or_else(|| "recipe".into()),
            description: s(doc.get("meta").and_then(|m| m.get("title"))).unwrap_or_default(),
            source: "recipe file (vllm-project/recipes format)".into(),
            model: s(model.get("model_id")),
            ..Default::default()
        };
        p.vllm.min_version = s(model.get("min_vllm_version"));
        // The same bound on the vllm distribution inside the container.
        if let Some(v) = &p.vllm.min_version {
            p.packages.insert("vllm".into(), format!(">={v}"));
        }
        p.cache.max_context = model.get("context_length").and_then(|v| v.as_u64());
        // docker_image: { nvidia: { cu130: "..." } } or { nvidia: "..." }.
        if let Some(nv) = model.get("docker_image").and_then(|d| d.get("nvidia")) {
            match nv {
                Value::String(img) => p.image.official.push(img.clone()),
                Value::Mapping(m) => {
                    for (k, v) in m {
                        if let Some(img) = v.as_str() {
                            p.image.official.push(img.to_string());
                        }
                        if let Some(cu) = k.as_str().and_then(|k| k.strip_prefix("cu")) {
                            if let Ok(n) = cu.parse::<u32>() {
                                p.image.cuda_major.get_or_insert(n / 10);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if p.image.official.is_empty() {
            // Prose: "Use the vllm/vllm-openai:kimi-k3 docker".
            let re = regex::Regex::new(r"(vllm/vllm-openai:[A-Za-z0-9._-]+)").unwrap();
            if let Some(c) = re.captures(&guide) {
                p.image.official.push(c[1].to_string());
            }
        }
        let re_cuda = regex::Regex::new(r"CUDA (\d+) \(cu(\d+)\) build only").unwrap();
        if let Some(c) = re_cuda.captures(&notes) {
            p.image.cuda_major.get_or_insert(c[1].parse().unwrap_or(0));
        }
        let re_driver = regex::Regex::new(r"(?i)\br(\d{3})\+").unwrap();
        if let Some(c) = re_driver.captures(&notes) {
            p.driver.min = Some(c[1].to_string());
            p.driver.branch = Some(format!("R{}", &c[1]));
        }
        if let Some(m) = doc.get("strategy_min_gpus").and_then(|m| m.as_mapping()) {
            for (k, v) in m {
                if let (Some(k), Some(v)) = (k.as_str(), v.as_u64()) {
                    p.gpus.min_by_strategy.insert(k.to_string(), v as u32);
                }
            }
            let default = s(doc.get("default_strategy")).unwrap_or_else(|| "single_node_tp".into());
            p.gpus.min_count = p.gpus.min_by_strategy.get(&default).copied();
        }
        // GPU classes: the hardware the recipe marks verified (meta.hardware), else
        // the guide's "At least 8x GB300".
        if let Some(hw) = doc
            .get("meta")
            .and_then(|m| m.get("hardware"))
            .and_then(|h| h.as_mapping())
        {
            for (k, v) in hw {
                if let (Some(k), Some("verified")) = (k.as_str(), v.as_str()) {
                    p.gpus.classes.push(k.to_ascii_uppercase());
                }
            }
        }
        let re_hw = regex::Regex::new(r"(?i)at least (\d+)x ([A-Za-z0-9]+)").unwrap();
        if let Some(c) = re_hw.captures(&guide) {
            p.gpus.min_count.get_or_insert(c[1].parse().unwrap_or(0));
            if p.gpus.classes.is_empty() {
                p.gpus.classes.push(c[2].to_string());
            }
        }
        // Boolean switches in base args are required everywhere; in a hardware
        // override only on that hardware.
        let switches = |args: Vec<String>| -> Vec<String> {
            args.into_iter()
                .filter(|a| a.starts_with("--enable-") || a == "--trust-remote-code")
                .collect()
        };
        p.flags.required = switches(strs(model.get("base_args")));
        // The recipe-era cache flags carry a value the recipe fixes.
        let base = strs(model.get("base_args"));
        for flag in RECIPE_VALUE_FLAGS {
            if let Some(v) = value_after(&base, flag) {
                p.flags.values.insert(flag.to_string(), v);
            }
        }
        if let Some(hw) = doc.get("hardware_overrides").and_then(|h| h.as_mapping()) {
            for (k, v) in hw {
                let Some(k) = k.as_str() else { continue };
                let flags = switches(strs(v.get("extra_args")));
                if !flags.is_empty() {
                    p.flags.required_on.insert(k.to_string(), flags);
                }
            }
        }
        let parser_after = |feature: &str, flag: &str| -> Option<String> {
            let args = strs(
                doc.get("features")
                    .and_then(|f| f.get(feature))
                    .and_then(|f| f.get("args")),
            );
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1).cloned())
        };
        p.flags.tool_call_parser = parser_after("tool_calling", "--tool-call-parser");
        p.flags.reasoning_parser = parser_after("reasoning", "--reasoning-parser");
        let re_a2a =
            regex::Regex::new(r"--all2all-backend\s+([A-Za-z0-9_]+)`?\s+for\s+(RDMA|NVLink)")
                .unwrap();
        for c in re_a2a.captures_iter(&guide) {
            if &c[2] == "RDMA" {
                p.transport.rdma_all2all = c[1].to_string();
            } else {
                p.transport.nvlink_all2all = c[1].to_string();
            }
        }
        let re_ucx = regex::Regex::new(r#"UCX_TLS="?([a-z_,]+)"?"#).unwrap();
        if let Some(c) = re_ucx.captures(&guide) {
            p.transport
                .rdma_env
                .insert("UCX_TLS".into(), c[1].to_string());
        }
        if guide.contains("not compatible with cross-node RDMA") {
            p.transport.megamoe_forbidden_with_rdma = true;
            p.transport.megamoe_backend = Some("deep_gemm_mega_moe".into());
        }
        if guide.contains("NCCL_DMABUF_ENABLE") {
            p.transport.dmabuf_fallback_env = Some("NCCL_DMABUF_ENABLE".into());
        }
        Ok(p)
    }

    /// Flags required on a host whose GPUs are `gpu_names`.
    pub fn required_flags_for(&self, gpu_names: &[String]) -> Vec<String> {
        let mut flags = self.flags.required.clone();
        let families: std::collections::BTreeSet<&str> = gpu_names
            .iter()
            .filter_map(|n| hardware_family(n))
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
    fn families() {
        assert_eq!(hardware_family("NVIDIA B300 SXM6 AC"), Some("blackwell"));
        assert_eq!(hardware_family("NVIDIA H200"), Some("hopper"));
        assert_eq!(hardware_family("Tesla T4"), None);
    }
}
