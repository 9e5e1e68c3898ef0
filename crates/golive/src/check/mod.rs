//! `golive check`: the runbook's decision checklist over one or more bundles.
//!
//! Every item is `pass`, `fail` or `unknown` (evidence missing) with the line it
//! was judged on. The repair direction follows the runbook's decision rules in
//! their order: host or image first; dependencies and build reset; memory one
//! parameter at a time; isolate multi-node; cache flag, prefix identity and
//! retention ("do not tune prefix caching first when ... NCCL initialization fails").

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::envparse::Bundle;
use crate::profile::Profile;
use crate::report::Status;

mod cluster;
mod decision;
mod flags;
mod host;
mod item;
mod kube;
mod logs;
mod packages;
mod privacy;
mod serving;

pub use decision::{decide, Decision, Repair};
use item::{combine, item};
pub use item::{CheckItem, ItemId};

use cluster::{check_consistency, check_parallelism, check_transport};
use host::{check_cuda_layers, check_driver, check_gpus, check_image, check_vllm};
use logs::log_classes;
use serving::{check_parsers, check_prefix_flag, check_reproducible};

/// The checklist and the repair direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The report schema version ([`crate::report::SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The checklist, one item per check, in the runbook's order.
    pub items: Vec<CheckItem>,
    /// The repair direction the runbook's decision rules give ([`Decision`], in words).
    pub decision: String,
    /// Profile the bundles were judged against.
    #[serde(default)]
    pub profile: String,
    /// Hosts of the bundles, in the order given.
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl CheckReport {
    /// The item with this id: an [`ItemId`] or its name (`"prefix_caching_flag"`).
    pub fn item(&self, id: impl TryInto<ItemId>) -> Option<&CheckItem> {
        let id = id.try_into().ok()?;
        self.items.iter().find(|i| i.id == id)
    }
    /// Some item failed (`golive check` then exits non-zero).
    pub fn any_fail(&self) -> bool {
        self.items.iter().any(|i| i.status == Status::Fail)
    }
}

/// Judges bundles against a profile (`None`: the generic vLLM profile). `profile`
/// is a built-in name, a profile TOML file or a recipe YAML file.
pub fn check_bundles(bundles: &[PathBuf], profile: Option<&str>) -> anyhow::Result<CheckReport> {
    let profile = Profile::load(profile.unwrap_or("vllm"))?;
    Ok(judge(&load_bundles(bundles)?, &profile))
}

/// Reads the bundle directories (one per node).
pub fn load_bundles(bundles: &[PathBuf]) -> anyhow::Result<Vec<Bundle>> {
    bundles.iter().map(|b| Bundle::load(b)).collect()
}

/// GPUs one server of this layout uses: tensor x pipeline x data parallel of the first
/// bundle's launch command (`None` without one).
pub fn gpus_per_server(bundles: &[Bundle]) -> Option<u64> {
    let launch = bundles.iter().find_map(|b| b.launch.as_ref())?;
    Some(launch.tensor_parallel() * launch.pipeline_parallel() * launch.data_parallel())
}

/// What `golive check` judges: bundles, a profile, optionally a recipe.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Bundle directories (one per node).
    pub bundles: Vec<PathBuf>,
    /// Built-in profile name (`kimi-k3`, `vllm`) or a profile file.
    pub profile: Option<String>,
    /// A recipe YAML in the format of vllm-project/recipes (`models/<org>/<model>.yaml`).
    pub recipe: Option<PathBuf>,
}

/// Judges the bundles against the profile or recipe of `opts`.
pub fn check(opts: &CheckOptions) -> crate::Result<CheckReport> {
    let profile = match &opts.recipe {
        Some(r) => Profile::load_recipe(r)?,
        None => Profile::load(opts.profile.as_deref().unwrap_or("vllm"))?,
    };
    Ok(judge(&load_bundles(&opts.bundles)?, &profile))
}

/// The report for people: the repair direction first, then every item.
pub fn render_text(r: &CheckReport) -> String {
    let mut s = format!(
        "decision: {}\n\nprofile: {}   hosts: {}\n\n",
        r.decision,
        r.profile,
        r.hosts.join(", ")
    );
    for i in &r.items {
        let st = match i.status {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Unknown => "unknown",
            Status::Warn => "warn",
            Status::Skip => "skip",
        };
        s.push_str(&format!("{st:<8} {:<24} {}\n", i.id.as_str(), i.title));
        for line in i.evidence.lines() {
            s.push_str(&format!("         evidence: {line}\n"));
        }
        if let Some(owner) = i.owner.filter(|_| i.status != Status::Pass) {
            s.push_str(&format!(
                "         owner: {}\n",
                format!("{owner:?}").to_ascii_lowercase()
            ));
        }
        if i.status != Status::Pass && !i.next_step.is_empty() {
            s.push_str(&format!("         next: {}\n", i.next_step));
        }
    }
    s
}

struct Ctx<'a> {
    bundles: &'a [Bundle],
    profile: &'a Profile,
    multi: bool,
}

impl Ctx<'_> {
    fn tag(&self, b: &Bundle, s: impl AsRef<str>) -> String {
        if self.multi {
            format!("{}: {}", b.host, s.as_ref())
        } else {
            s.as_ref().to_string()
        }
    }
}

fn strip_registry(r: &str) -> String {
    let r = r.split('@').next().unwrap_or(r);
    r.trim_start_matches("docker.io/")
        .trim_start_matches("library/")
        .to_string()
}

/// The checklist over loaded bundles.
pub fn judge(bundles: &[Bundle], profile: &Profile) -> CheckReport {
    let c = Ctx {
        bundles,
        profile,
        multi: bundles.len() > 1,
    };
    let (phase, classes) = log_classes(&c);
    let mut items = vec![
        check_image(&c),
        check_driver(&c),
        check_cuda_layers(&c),
        check_vllm(&c),
        check_gpus(&c),
        check_parallelism(&c),
        phase,
        check_prefix_flag(&c),
        check_transport(&c),
        check_reproducible(&c),
    ];
    if let Some(p) = check_parsers(&c) {
        items.push(p);
    }
    items.push(privacy::check_logging_scope(&c));
    items.extend(packages::check_packages(&c));
    items.extend(kube::check_pod_crash(&c));
    if c.multi {
        items.push(check_consistency(&c));
    }
    let decision = decide(&items, &classes).to_string();
    CheckReport {
        schema_version: crate::report::SCHEMA_VERSION,
        items,
        decision,
        profile: profile.name.clone(),
        hosts: bundles.iter().map(|b| b.host.clone()).collect(),
    }
}
