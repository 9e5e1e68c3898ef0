//! `golive check`: the runbook's decision checklist over one or more bundles.
//!
//! Every item is `pass`, `fail` or `unknown` (evidence missing) with the line it
//! was judged on. The repair direction follows the runbook's decision rules in
//! their order: host or image first; dependencies and build reset; memory one
//! parameter at a time; isolate multi-node; cache flag, prefix identity and
//! retention ("do not tune prefix caching first when ... NCCL initialization fails").

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::envparse::Bundle;
use crate::profile::Profile;
use crate::report::Status;
use crate::triage::Class;

mod cluster;
mod flags;
mod host;
mod kube;
mod logs;
mod packages;
mod serving;

use cluster::{check_consistency, check_parallelism, check_transport};
use host::{check_cuda_layers, check_driver, check_gpus, check_image, check_vllm};
use logs::log_classes;
use serving::{check_parsers, check_prefix_flag, check_reproducible};

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckItem {
    pub id: String,
    pub title: String,
    pub status: Status,
    /// The line or value it was judged on.
    pub evidence: String,
    #[serde(default)]
    pub next_step: String,
    /// Who fixes a failure, where the item knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<crate::report::Owner>,
}

/// The checklist and the repair direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub schema_version: u32,
    pub items: Vec<CheckItem>,
    /// The repair direction the runbook's decision rules give.
    pub decision: String,
    /// Profile the bundles were judged against.
    #[serde(default)]
    pub profile: String,
    /// Hosts of the bundles, in the order given.
    #[serde(default)]
    pub hosts: Vec<String>,
}

impl CheckReport {
    pub fn item(&self, id: &str) -> Option<&CheckItem> {
        self.items.iter().find(|i| i.id == id)
    }
    pub fn any_fail(&self) -> bool {
        self.items.iter().any(|i| i.status == Status::Fail)
    }
}

/// Judges bundles against a profile (`None`: the generic vLLM profile). `profile`
/// is a built-in name, a profile TOML file or a recipe YAML file.
pub fn check_bundles(bundles: &[PathBuf], profile: Option<&str>) -> anyhow::Result<CheckReport> {
    let profile = Profile::load(profile.unwrap_or("vllm"))?;
    let loaded = bundles
        .iter()
        .map(|b| Bundle::load(b))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(judge(&loaded, &profile))
}

#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Bundle directories (one per node).
    pub bundles: Vec<PathBuf>,
    /// Built-in profile name (`kimi-k3`, `vllm`) or a profile file.
    pub profile: Option<String>,
    /// A recipe YAML in the format of vllm-project/recipes (models/<org>/<model>.yaml).
    pub recipe: Option<PathBuf>,
}

/// Judges the bundles against the profile or recipe of `opts`.
pub fn check(opts: &CheckOptions) -> anyhow::Result<CheckReport> {
    let profile = match &opts.recipe {
        Some(r) => Profile::load_recipe(r)?,
        None => Profile::load(opts.profile.as_deref().unwrap_or("vllm"))?,
    };
    let loaded = opts
        .bundles
        .iter()
        .map(|b| Bundle::load(b))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(judge(&loaded, &profile))
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
        s.push_str(&format!("{st:<8} {:<24} {}\n", i.id, i.title));
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

fn item(
    id: &str,
    title: &str,
    status: Status,
    evidence: Vec<String>,
    next_step: &str,
) -> CheckItem {
    CheckItem {
        id: id.into(),
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
fn combine(statuses: &[Status]) -> Status {
    if statuses.contains(&Status::Fail) {
        Status::Fail
    } else if statuses.is_empty() || statuses.contains(&Status::Unknown) {
        Status::Unknown
    } else {
        Status::Pass
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
    items.extend(packages::check_packages(&c));
    items.extend(kube::check_pod_crash(&c));
    if c.multi {
        items.push(check_consistency(&c));
    }
    let decision = decide(&items, &classes);
    CheckReport {
        schema_version: crate::report::SCHEMA_VERSION,
        items,
        decision,
        profile: profile.name.clone(),
        hosts: bundles.iter().map(|b| b.host.clone()).collect(),
    }
}

/// The runbook's decision rules, in order; the first that applies is the direction.
fn decide(items: &[CheckItem], classes: &BTreeSet<Class>) -> String {
    let failed = |ids: &[&str]| -> Vec<String> {
        items
            .iter()
            .filter(|i| i.status == Status::Fail && ids.contains(&i.id.as_str()))
            .map(|i| i.id.clone())
            .collect()
    };
    let has = |cs: &[Class]| cs.iter().any(|c| classes.contains(c));
    let mut rules: Vec<(Vec<String>, &str)> = Vec::new();
    let mut host = failed(&[
        "official_image",
        "host_driver",
        "cuda_layers",
        "gpus_visible",
    ]);
    if has(&[Class::Driver, Class::Container, Class::GpuFault]) {
        host.push("failure_phase".into());
    }
    rules.push((host, "host or image first: fix the host driver, the image or GPU access before changing any model parameter"));
    rules.push((failed(&["pod_crash_record"]), "the pod's crash record: a container OOMKilled (exit 137) needs a higher memory limit on the host side; any other crash, its previous log triaged first"));
    let mut deps = failed(&["vllm_version", "parsers", "package_versions"]);
    if has(&[Class::Dependency, Class::Config, Class::ToolParser]) {
        deps.push("failure_phase".into());
    }
    rules.push((deps, "dependencies and build reset: compare against the official recipe, reset to the official image or a clean pinned build, remove optional features until the base server starts"));
    let mut mem = failed(&["parallelism"]);
    if has(&[Class::OomStartup, Class::OomTopology, Class::OomRuntime]) {
        mem.push("failure_phase".into());
    }
    rules.push((mem, "memory: topology and parallelism first, then change one parameter at a time (context length, concurrency, batched tokens, cache retention)"));
    let mut multi = failed(&["communication_path", "node_consistency"]);
    if has(&[Class::Nccl]) {
        multi.push("failure_phase".into());
    }
    rules.push((multi, "isolate multi-node: start one node with the smallest documented command, then check backend vs fabric, NICs, identical env and versions on every rank"));
    let mut cache = failed(&["prefix_caching_flag"]);
    if has(&[Class::PrefixCache]) {
        cache.push("failure_phase".into());
    }
    rules.push((cache, "cache flag, prefix identity and retention: put --enable-prefix-caching in the running command, then test identical prefixes with a positive and a negative control and check the retention setting"));
    let applicable: Vec<(Vec<String>, &str)> = rules
        .into_iter()
        .filter(|(ids, _)| !ids.is_empty())
        .collect();
    if let Some((ids, first)) = applicable.first() {
        let mut d = format!("{first} (failed: {})", dedup(ids).join(", "));
        if applicable.len() > 1 {
            let later: Vec<String> = applicable[1..]
                .iter()
                .map(|(_, t)| t.split(':').next().unwrap_or(t).to_string())
                .collect();
            d.push_str(&format!("; after that: {}", later.join("; ")));
        }
        return d;
    }
    let other_fail: Vec<String> = items
        .iter()
        .filter(|i| i.status == Status::Fail)
        .map(|i| i.id.clone())
        .collect();
    if !other_fail.is_empty() {
        return format!(
            "record the missing evidence first (failed: {})",
            other_fail.join(", ")
        );
    }
    let unknown: Vec<String> = items
        .iter()
        .filter(|i| i.status == Status::Unknown)
        .map(|i| i.id.clone())
        .collect();
    if !unknown.is_empty() {
        return format!(
            "no failing item; evidence missing for: {} (collect it before judging)",
            unknown.join(", ")
        );
    }
    "environment matches the profile: continue with the acceptance run (golive accept)".into()
}

fn dedup(v: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    v.iter()
        .filter(|x| seen.insert(x.as_str()))
        .cloned()
        .collect()
}
