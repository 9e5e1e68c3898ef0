//! `--recipe FILE`: a recipe YAML in the format of `vllm-project/recipes`
//! (`models/<org>/<model>.yaml`) read into a [`Profile`].
//!
//! The structured parts are read as typed YAML ([`Recipe`]): the image by CUDA build,
//! the minimum vLLM, the context length, the base and hardware-override arguments, the
//! parsers, the minimum GPUs per strategy, the verified hardware, `--all2all-backend`
//! and the environment of the strategy overrides. A few facts exist in the recipe
//! format only as prose (the guide and the install notes); those are read by the
//! patterns of [`PROSE`], one documented row each, and only where the structure
//! does not already say it.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::LazyLock;

use anyhow::Context;
use regex::Regex;
use serde::Deserialize;
use serde_norway::Mapping;

use super::facts::{Fabric, Strategy};
use super::Profile;

/// A YAML scalar read as text (recipes quote most values, not all).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn text(&self) -> String {
        match self {
            Scalar::Text(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }
}

fn texts(v: &[Scalar]) -> Vec<String> {
    v.iter().map(Scalar::text).collect()
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Meta {
    title: Option<String>,
    slug: Option<String>,
    /// `{b300: verified, h200: verified, ...}`, in the file's order (the order the
    /// evidence names the classes in).
    hardware: Mapping,
}

/// `docker_image`: one image, or one per vendor, each one image or one per CUDA build
/// (`{nvidia: {cu130: "vllm/vllm-openai:kimi-k3"}}`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum DockerImage {
    One(String),
    ByVendor(BTreeMap<String, VendorImage>),
}

/// One image, or one per CUDA build in the file's order (`{cu130: "..."}`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum VendorImage {
    One(String),
    ByCuda(Mapping),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Model {
    model_id: Option<String>,
    min_vllm_version: Option<Scalar>,
    docker_image: Option<DockerImage>,
    /// `{docker: {note}, pip: {note}}`; an entry may also be `false`.
    install: Mapping,
    context_length: Option<u64>,
    base_args: Vec<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Feature {
    args: Vec<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct HardwareOverride {
    extra_args: Vec<Scalar>,
    extra_env: BTreeMap<String, Scalar>,
}

/// A prefill or decode pool of a disaggregated strategy.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Pool {
    vllm_args: Vec<Scalar>,
    env: BTreeMap<String, Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StrategyOverride {
    extra_args: Vec<Scalar>,
    env: BTreeMap<String, Scalar>,
    hardware_overrides: BTreeMap<String, HardwareOverride>,
    prefill: Option<Pool>,
    decode: Option<Pool>,
}

/// The parts of a recipe golive reads; everything else in the file is ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Recipe {
    meta: Meta,
    model: Option<Model>,
    features: BTreeMap<String, Feature>,
    default_strategy: Option<String>,
    /// Keys are strategies, or GPU classes (`h100: 32`).
    strategy_min_gpus: BTreeMap<String, u32>,
    hardware_overrides: BTreeMap<String, HardwareOverride>,
    strategy_overrides: BTreeMap<String, StrategyOverride>,
    guide: String,
}

/// What a prose pattern fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProseFact {
    /// `vllm/vllm-openai:TAG` named in the guide (when `docker_image` is absent).
    Image,
    /// The CUDA major of "CUDA 13 (cu130) build only" (when no `cuNNN` image key).
    CudaMajor,
    /// The host driver branch of "r580+" (no structured field exists).
    DriverBranch,
    /// GPU count and class of "At least 8x GB300" (the class when no hardware is verified).
    Hardware,
    /// "`--all2all-backend X` for RDMA|NVLink".
    All2allBackend,
    /// `UCX_TLS="rc,cuda_copy"` (when no strategy override sets it).
    UcxTls,
    /// "... is not compatible with cross-node RDMA": DeepGEMM MegaMoE on RDMA.
    MegaMoeNotOnRdma,
    /// The guide names the `NCCL_DMABUF_ENABLE` fallback (errno 524).
    DmabufFallback,
}

/// One prose pattern: what it fills, where it looks, and the recipe sentence it was
/// written for (tested below).
pub struct ProsePattern {
    /// The fact it fills in.
    pub fact: ProseFact,
    /// `guide` or `notes` (the guide and the install notes).
    pub source: &'static str,
    /// The regular expression.
    pub regex: &'static str,
    /// The recipe sentence it was written for.
    pub example: &'static str,
}

/// Every prose pattern the recipe reader uses. The examples are sentences of the
/// official Kimi K3 recipe (`models/moonshotai/Kimi-K3.yaml`, 2026-07/08) and of the
/// runbook in `../shared/seeds` quoting it.
pub const PROSE: &[ProsePattern] = &[
    ProsePattern {
        fact: ProseFact::Image,
        source: "guide",
        regex: r"(vllm/vllm-openai:[A-Za-z0-9._-]+)",
        example: "- **vLLM:** Use the vllm/vllm-openai:kimi-k3 docker",
    },
    ProsePattern {
        fact: ProseFact::CudaMajor,
        source: "notes",
        regex: r"CUDA (\d+) \(cu(\d+)\) build only",
        example: "CUDA 13 (cu130) build only — no -cu129 tag; the host needs an r580+ NVIDIA driver.",
    },
    ProsePattern {
        fact: ProseFact::DriverBranch,
        source: "notes",
        regex: r"(?i)\br(\d{3})\+",
        example: "CUDA 13 (cu130) build only — no -cu129 tag; the host needs an r580+ NVIDIA driver.",
    },
    ProsePattern {
        fact: ProseFact::Hardware,
        source: "guide",
        regex: r"(?i)at least (\d+)x ([A-Za-z0-9]+)",
        example: "- **Hardware:** At least 8x GB300. Multi-node for real production traffic.",
    },
    ProsePattern {
        fact: ProseFact::All2allBackend,
        source: "guide",
        regex: r"--all2all-backend\s+([A-Za-z0-9_]+)`?\s+for\s+(RDMA|NVLink)",
        example: "Use `--all2all-backend deepep_v2` for RDMA and `--all2all-backend flashinfer_nvlink_one_sided` for NVLink.",
    },
    ProsePattern {
        fact: ProseFact::UcxTls,
        source: "guide",
        regex: r#"UCX_TLS="?([a-z_,]+)"?"#,
        example: "- **RDMA**: If RDMA is enabled, set `UCX_TLS=\"rc,cuda_copy\"` to make sure KV Cache transfer goes through RDMA.",
    },
    ProsePattern {
        fact: ProseFact::MegaMoeNotOnRdma,
        source: "guide",
        regex: r"not compatible with cross-node RDMA",
        example: "DeepGEMM MegaMoE is recommended for cross-node NVLink but not compatible with cross-node RDMA.",
    },
    ProsePattern {
        fact: ProseFact::DmabufFallback,
        source: "guide",
        regex: r"NCCL_DMABUF_ENABLE",
        example: "If NCCL fails with mlx5dv_reg_dmabuf_mr errno 524, set NCCL_DMABUF_ENABLE=0 to use nvidia_peermem.",
    },
];

static PROSE_RE: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    PROSE
        .iter()
        .map(|p| Regex::new(p.regex).expect("prose pattern"))
        .collect()
});

fn prose(fact: ProseFact) -> &'static Regex {
    let i = PROSE
        .iter()
        .position(|p| p.fact == fact)
        .expect("every ProseFact has a row");
    &PROSE_RE[i]
}

/// The `--all2all-backend` values of an argument list.
fn all2all_values(args: &[String]) -> Vec<String> {
    args.iter()
        .enumerate()
        .filter_map(|(i, a)| {
            a.strip_prefix("--all2all-backend=")
                .map(String::from)
                .or_else(|| (a == "--all2all-backend").then(|| args.get(i + 1).cloned())?)
        })
        .collect()
}

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

/// Boolean switches: required everywhere in base args, on that hardware in an override.
fn switches(args: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| a.starts_with("--enable-") || *a == "--trust-remote-code")
        .cloned()
        .collect()
}

impl Recipe {
    /// Every argument list and environment of the strategy overrides.
    fn strategy_parts(&self) -> (Vec<Vec<String>>, Vec<(String, String)>) {
        let mut args = Vec::new();
        let mut env = Vec::new();
        let mut add_env = |m: &BTreeMap<String, Scalar>| {
            env.extend(m.iter().map(|(k, v)| (k.clone(), v.text())));
        };
        for s in self.strategy_overrides.values() {
            args.push(texts(&s.extra_args));
            add_env(&s.env);
            for h in s.hardware_overrides.values() {
                args.push(texts(&h.extra_args));
                add_env(&h.extra_env);
            }
            for pool in [&s.prefill, &s.decode].into_iter().flatten() {
                args.push(texts(&pool.vllm_args));
                add_env(&pool.env);
            }
        }
        (args, env)
    }
}

impl Profile {
    /// Reads a recipe YAML (see the module documentation).
    pub fn from_recipe(text: &str) -> anyhow::Result<Profile> {
        let doc = parse_recipe(text)?;
        let model = doc.model.as_ref().context("no `model:` section")?;
        let generic = Profile::generic();
        let notes: String = model
            .install
            .values()
            .filter_map(|n| n.get("note")?.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let guide = doc.guide.as_str();
        let mut p = Profile {
            name: doc
                .meta
                .slug
                .clone()
                .or_else(|| model.model_id.clone())
                .unwrap_or_else(|| "recipe".into()),
            description: doc.meta.title.clone().unwrap_or_default(),
            source: "recipe file (vllm-project/recipes format)".into(),
            model: model.model_id.clone(),
            ..Default::default()
        };
        p.vllm.min_version = model.min_vllm_version.as_ref().map(Scalar::text);
        // The same bound on the vllm distribution inside the container.
        if let Some(v) = &p.vllm.min_version {
            p.packages.insert("vllm".into(), format!(">={v}"));
        }
        p.cache.max_context = model.context_length;
        p.read_image(model, guide, &notes);
        p.read_gpus(&doc, guide);
        let base = texts(&model.base_args);
        p.read_flags(&doc, &base);
        p.read_transport(&doc, guide, &base, generic);
        p.inherit(generic);
        Ok(p)
    }

    /// The official image (per CUDA build where the recipe lists them, else the guide's), the
    /// CUDA major and the driver branch the install notes name.
    fn read_image(&mut self, model: &Model, guide: &str, notes: &str) {
        let p = self;
        match &model.docker_image {
            Some(DockerImage::One(img)) => p.image.official.push(img.clone()),
            Some(DockerImage::ByVendor(v)) => match v.get("nvidia") {
                Some(VendorImage::One(img)) => p.image.official.push(img.clone()),
                Some(VendorImage::ByCuda(by_cuda)) => {
                    for (build, img) in by_cuda {
                        let (Some(build), Some(img)) = (build.as_str(), img.as_str()) else {
                            continue;
                        };
                        p.image.official.push(img.to_string());
                        if let Some(n) =
                            build.strip_prefix("cu").and_then(|n| n.parse::<u32>().ok())
                        {
                            p.image.cuda_major.get_or_insert(n / 10);
                        }
                    }
                }
                None => {}
            },
            None => {}
        }
        if p.image.official.is_empty() {
            if let Some(c) = prose(ProseFact::Image).captures(guide) {
                p.image.official.push(c[1].to_string());
            }
        }
        if let Some(c) = prose(ProseFact::CudaMajor).captures(notes) {
            p.image.cuda_major.get_or_insert(c[1].parse().unwrap_or(0));
        }
        if let Some(c) = prose(ProseFact::DriverBranch).captures(notes) {
            p.driver.min = Some(c[1].to_string());
            p.driver.branch = Some(format!("R{}", &c[1]));
        }
    }

    /// Minimum GPUs (keys that name a strategy, else a GPU class: `h100: 32`) and the GPU
    /// classes (the hardware the recipe marks verified, else the guide's "At least 8x GB300").
    fn read_gpus(&mut self, doc: &Recipe, guide: &str) {
        let p = self;
        for (k, v) in &doc.strategy_min_gpus {
            p.gpus.min_by_strategy.insert(k.clone(), *v);
        }
        if !doc.strategy_min_gpus.is_empty() {
            let default = doc
                .default_strategy
                .clone()
                .unwrap_or_else(|| Strategy::SingleNodeTp.as_str().into());
            p.gpus.min_count = p.gpus.min_by_strategy.get(&default).copied();
        }
        for (hw, state) in &doc.meta.hardware {
            if let (Some(hw), Some("verified")) = (hw.as_str(), state.as_str()) {
                p.gpus.classes.push(hw.to_ascii_uppercase());
            }
        }
        if let Some(c) = prose(ProseFact::Hardware).captures(guide) {
            p.gpus.min_count.get_or_insert(c[1].parse().unwrap_or(0));
            if p.gpus.classes.is_empty() {
                p.gpus.classes.push(c[2].to_string());
            }
        }
    }

    /// The switches the base arguments and each hardware's overrides require, the values the
    /// recipe fixes for the cache flags, and the tool-call and reasoning parsers.
    fn read_flags(&mut self, doc: &Recipe, base: &[String]) {
        let p = self;
        p.flags.required = switches(base);
        // The recipe-era cache flags carry a value the recipe fixes.
        for flag in super::RECIPE_VALUE_FLAGS {
            if let Some(v) = value_after(base, flag) {
                p.flags.values.insert(flag.to_string(), v);
            }
        }
        for (hw, o) in &doc.hardware_overrides {
            let flags = switches(&texts(&o.extra_args));
            if !flags.is_empty() {
                p.flags.required_on.insert(hw.clone(), flags);
            }
        }
        let feature_value = |feature: &str, flag: &str| -> Option<String> {
            let args = texts(&doc.features.get(feature)?.args);
            let i = args.iter().position(|a| a == flag)?;
            args.get(i + 1).cloned()
        };
        p.flags.tool_call_parser = feature_value("tool_calling", "--tool-call-parser");
        p.flags.reasoning_parser = feature_value("reasoning", "--reasoning-parser");
    }

    /// The all-to-all backend per fabric (the guide's "X for RDMA/NVLink" first, else the one
    /// backend per fabric the structured arguments use), the RDMA environment (what the
    /// strategy overrides set, else the guide's UCX_TLS), and the guide's transport caveats.
    fn read_transport(&mut self, doc: &Recipe, guide: &str, base: &[String], generic: &Profile) {
        let p = self;
        for c in prose(ProseFact::All2allBackend).captures_iter(guide) {
            if &c[2] == "RDMA" {
                p.transport.rdma_all2all = c[1].to_string();
            } else {
                p.transport.nvlink_all2all = c[1].to_string();
            }
        }
        let (strategy_args, strategy_env) = doc.strategy_parts();
        let mut by_fabric: BTreeMap<Fabric, Vec<String>> = BTreeMap::new();
        let lists = std::iter::once(base.to_vec())
            .chain(
                doc.hardware_overrides
                    .values()
                    .map(|o| texts(&o.extra_args)),
            )
            .chain(doc.features.values().map(|f| texts(&f.args)))
            .chain(strategy_args);
        for b in lists.flat_map(|l| all2all_values(&l)) {
            let list = by_fabric.entry(generic.fabrics.of_backend(&b)).or_default();
            if !list.contains(&b) {
                list.push(b);
            }
        }
        for (fabric, slot) in [
            (Fabric::Rdma, &mut p.transport.rdma_all2all),
            (Fabric::Nvlink, &mut p.transport.nvlink_all2all),
        ] {
            if let (true, Some([one])) = (slot.is_empty(), by_fabric.get(&fabric).map(|v| &v[..])) {
                *slot = one.clone();
            }
        }
        for (k, v) in strategy_env {
            if generic.fabrics.is_env_of(Fabric::Rdma, &k) {
                p.transport.rdma_env.insert(k, v);
            }
        }
        if !p.transport.rdma_env.contains_key("UCX_TLS") {
            if let Some(c) = prose(ProseFact::UcxTls).captures(guide) {
                p.transport
                    .rdma_env
                    .insert("UCX_TLS".into(), c[1].to_string());
            }
        }
        if prose(ProseFact::MegaMoeNotOnRdma).is_match(guide) {
            p.transport.megamoe_forbidden_with_rdma = true;
        }
        if prose(ProseFact::DmabufFallback).is_match(guide) {
            p.transport.dmabuf_fallback_env = Some("NCCL_DMABUF_ENABLE".into());
        }
    }
}

/// A recipe file read: invalid YAML, then no `model:`, are refused with the untyped reader's
/// messages.
fn parse_recipe(text: &str) -> anyhow::Result<Recipe> {
    crate::text::check_yaml_depth(text).context("invalid YAML")?;
    let value: serde_norway::Value = serde_norway::from_str(text).context("invalid YAML")?;
    if value.get("model").is_none() {
        anyhow::bail!("no `model:` section");
    }
    serde_norway::from_value(value).context("not a recipe YAML")
}

/// True when `key` of `strategy_min_gpus` names a strategy (else a GPU class).
pub fn is_strategy(key: &str) -> bool {
    Strategy::from_str(key).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(fact: ProseFact, text: &str) -> Vec<String> {
        prose(fact)
            .captures(text)
            .map(|c| {
                c.iter()
                    .skip(1)
                    .map(|m| m.map_or(String::new(), |m| m.as_str().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn example(fact: ProseFact) -> &'static str {
        PROSE.iter().find(|p| p.fact == fact).unwrap().example
    }

    #[test]
    fn every_prose_pattern_reads_its_recipe_sentence() {
        use ProseFact::*;
        assert_eq!(first(Image, example(Image)), ["vllm/vllm-openai:kimi-k3"]);
        assert_eq!(first(CudaMajor, example(CudaMajor)), ["13", "130"]);
        assert_eq!(first(DriverBranch, example(DriverBranch)), ["580"]);
        assert_eq!(first(Hardware, example(Hardware)), ["8", "GB300"]);
        let a2a: Vec<(String, String)> = prose(All2allBackend)
            .captures_iter(example(All2allBackend))
            .map(|c| (c[1].to_string(), c[2].to_string()))
            .collect();
        assert_eq!(
            a2a,
            [
                ("deepep_v2".to_string(), "RDMA".to_string()),
                ("flashinfer_nvlink_one_sided".into(), "NVLink".into())
            ]
        );
        assert_eq!(first(UcxTls, example(UcxTls)), ["rc,cuda_copy"]);
        assert!(prose(MegaMoeNotOnRdma).is_match(example(MegaMoeNotOnRdma)));
        assert!(prose(DmabufFallback).is_match(example(DmabufFallback)));
        // One row per fact, and every row compiles.
        assert_eq!(PROSE.len(), PROSE_RE.len());
        for p in PROSE {
            assert_eq!(PROSE.iter().filter(|q| q.fact == p.fact).count(), 1);
        }
    }

    #[test]
    fn structured_parts_win_over_prose() {
        let p = Profile::from_recipe(
            "model:\n  model_id: org/m\n  min_vllm_version: 0.28\n  docker_image: \"vllm/vllm-openai:m\"\n\
             strategy_overrides:\n  multi_node_dep:\n    extra_args: [\"--all2all-backend\", \"deepep_v2\"]\n    \
             hardware_overrides:\n      blackwell:\n        extra_args: [\"--all2all-backend=flashinfer_nvlink_one_sided\"]\n  \
             pd_cluster:\n    env:\n      NCCL_MNNVL_ENABLE: \"1\"\n    hardware_overrides:\n      blackwell:\n        \
             extra_env:\n          UCX_TLS: \"rc,cuda_copy\"\n    decode:\n      vllm_args: [\"--all2all-backend\", \"allgather_reducescatter\"]\n\
             guide: |\n  Use the vllm/vllm-openai:other docker. Set UCX_TLS=\"rc\".\n",
        )
        .unwrap();
        assert_eq!(p.vllm.min_version.as_deref(), Some("0.28"));
        assert_eq!(p.image.official, ["vllm/vllm-openai:m"]);
        assert_eq!(p.transport.rdma_all2all, "deepep_v2");
        assert_eq!(p.transport.nvlink_all2all, "flashinfer_nvlink_one_sided");
        assert_eq!(p.transport.rdma_env.len(), 1, "{:?}", p.transport.rdma_env);
        assert_eq!(p.transport.rdma_env["UCX_TLS"], "rc,cuda_copy");
        // Facts the recipe does not carry come from the generic profile.
        assert_eq!(
            p.transport.dmabuf_fallback_env.as_deref(),
            Some("NCCL_DMABUF_ENABLE")
        );
        assert!(!p.hardware.families.is_empty());
    }

    #[test]
    fn bad_recipes_get_a_clear_error() {
        let e = Profile::from_recipe("meta:\n  title: x\n").unwrap_err();
        assert!(format!("{e:#}").contains("no `model:` section"), "{e:#}");
        // Shapes the real recipes use are read, not refused.
        let p = Profile::from_recipe(
            "meta:\n  hardware:\n    h200: verified\n    b200: verified\n    x: planned\nmodel:\n  install:\n    pip: false\n    docker:\n      note: \"needs an r590+ driver\"\n",
        )
        .unwrap();
        assert_eq!(p.gpus.classes, ["H200", "B200"], "the file's order");
        assert_eq!(p.driver.min.as_deref(), Some("590"));
        let e = Profile::from_recipe("model:\n  base_args: 3\n").unwrap_err();
        assert!(format!("{e:#}").contains("not a recipe YAML"), "{e:#}");
        let e = Profile::from_recipe("model: [\n").unwrap_err();
        assert!(format!("{e:#}").contains("invalid YAML"), "{e:#}");
        let e = Profile::from_recipe("vm\n").unwrap_err();
        assert_eq!(format!("{e:#}"), "no `model:` section");
    }
}
