//! `golive check`: the runbook's decision checklist over one or more bundles.
//!
//! Every item is `pass`, `fail` or `unknown` (evidence missing) with the line it
//! was judged on. The repair direction follows the runbook's decision rules in
//! their order: host or image first; dependencies and build reset; memory one
//! parameter at a time; isolate multi-node; cache flag, prefix identity and
//! retention ("do not tune prefix caching first when ... NCCL initialization fails").

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::envparse::{cmp_pep440, cmp_versions, native_cuda_for_driver, version_parts, Bundle};
use crate::profile::Profile;
use crate::report::Status;
use crate::text::truncate;
use crate::triage::rules::RuleKind;
use crate::triage::Class;

mod flags;
mod kube;
mod packages;

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

fn check_image(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let (r, d) = (b.image_ref(), b.image_digest());
        let shown = format!(
            "image {} digest {}",
            r.clone().unwrap_or_else(|| "(not recorded)".into()),
            d.clone().unwrap_or_else(|| "(not recorded)".into())
        );
        ev.push(c.tag(b, &shown));
        let official = &c.profile.image.official;
        // A digest-pinned reference is official when the image carries the official tag.
        let tags: Vec<String> = b.image.iter().flat_map(|i| i.repo_tags.clone()).collect();
        let is_official = |r: &str| {
            official.iter().any(|o| {
                strip_registry(o) == strip_registry(r)
                    || tags.iter().any(|t| strip_registry(t) == strip_registry(o))
            })
        };
        st.push(match (&r, &d) {
            (None, _) => Status::Unknown,
            (Some(r), _) if !official.is_empty() && !is_official(r) => {
                ev.push(c.tag(
                    b,
                    format!("{r} is not the official {}", official.join(" or ")),
                ));
                Status::Fail
            }
            (Some(_), None) => Status::Unknown,
            _ => Status::Pass,
        });
    }
    let official = c.profile.image.official.join(" or ");
    let next = if official.is_empty() {
        "Record the image tag and digest (docker image inspect) with every run.".to_string()
    } else {
        format!(
            "Use the official image {official} without unrelated overrides; record its digest (docker image inspect)."
        )
    };
    item(
        "official_image",
        "Official image (tag and digest)",
        combine(&st),
        ev,
        &next,
    )
}

fn check_driver(c: &Ctx) -> CheckItem {
    let min = c.profile.driver.min.clone();
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        match b.driver() {
            None => {
                st.push(Status::Unknown);
                ev.push(c.tag(b, "no driver version (raw/nvidia-smi.txt, nvidia-smi-query.csv or driver-version.txt)"));
            }
            Some((d, line)) => {
                let ok = min
                    .as_ref()
                    .is_none_or(|m| cmp_versions(&d, m) != std::cmp::Ordering::Less);
                let verdict = match &min {
                    Some(m) if !ok => format!(" — driver {d} < required {m}"),
                    Some(m) => format!(" — driver {d} >= {m}"),
                    None => String::new(),
                };
                ev.push(c.tag(b, format!("{line}{verdict}")));
                st.push(if ok { Status::Pass } else { Status::Fail });
            }
        }
    }
    let target = match (&c.profile.driver.branch, &min) {
        (Some(b), Some(m)) => format!("{b} or newer (>= {m})"),
        (None, Some(m)) => format!(">= {m}"),
        _ => "a branch that supports the image's CUDA".into(),
    };
    let next = format!(
        "Host problem: drain the node and upgrade the host driver to {target}, reboot, run a minimal CUDA container test, then the official image again; or build a pinned environment for the older branch (not equivalent to the official recipe)."
    );
    item(
        "host_driver",
        "Host driver on every host (Driver Version, not the CUDA header)",
        combine(&st),
        ev,
        &next,
    )
}

fn cuda_tuple(v: &str) -> Option<(u32, u32)> {
    let p = version_parts(v);
    Some((*p.first()? as u32, p.get(1).copied().unwrap_or(0) as u32))
}

fn check_cuda_layers(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let driver = b.driver().map(|(d, _)| d);
        let native = driver.as_deref().and_then(native_cuda_for_driver);
        // Container runtime: image env, container probe, else the profile's image CUDA.
        let image_env_cuda = b
            .image
            .as_ref()
            .and_then(|i| i.image_cuda())
            .or_else(|| b.container.as_ref().and_then(|i| i.image_cuda()))
            .or_else(|| {
                b.container_cuda_text
                    .as_deref()
                    .and_then(|t| crate::envparse::parse_env(t).get("CUDA_VERSION").cloned())
                    .filter(|v| !v.is_empty())
            });
        let official = b.image_ref().is_some_and(|r| {
            c.profile
                .image
                .official
                .iter()
                .any(|o| strip_registry(o) == strip_registry(&r))
        });
        let image_cuda = image_env_cuda.clone().or_else(|| {
            official
                .then(|| c.profile.image.cuda_major.map(|m| format!("{m}.0")))
                .flatten()
        });
        let mut line = format!(
            "container runtime CUDA {} | host driver {} (native CUDA {})",
            image_cuda.clone().map_or("unknown".into(), |v| {
                if image_env_cuda.is_some() {
                    v
                } else {
                    format!("{v} (profile: official image is CUDA-{v}-only)")
                }
            }),
            driver.clone().unwrap_or_else(|| "unknown".into()),
            native.map_or("unknown".into(), |(a, b)| format!("{a}.{b}"))
        );
        if let Some(tk) = &b.nvcc {
            line.push_str(&format!(
                " | local toolkit {tk} (does not change what the driver supports)"
            ));
        }
        ev.push(c.tag(b, &line));
        if let Some(smi) = &b.smi {
            if let Some((shown, nat)) = smi.cuda_header_exceeds_native() {
                ev.push(c.tag(
                    b,
                    format!(
                        "nvidia-smi header shows CUDA {}.{} above the driver's native {}.{} (forward-compatibility libraries); judged by the driver",
                        shown.0, shown.1, nat.0, nat.1
                    ),
                ));
            }
        }
        let mut status = Status::Pass;
        for e in &b.container_cuda_errors {
            ev.push(c.tag(b, format!("line {}: {}", e.line, e.text)));
            status = Status::Fail;
        }
        match (image_cuda.as_deref().and_then(cuda_tuple), native) {
            (Some(img), Some(nat)) if img > nat => {
                ev.push(c.tag(
                    b,
                    format!(
                        "image needs CUDA {}.{}, driver supports {}.{} natively",
                        img.0, img.1, nat.0, nat.1
                    ),
                ));
                status = Status::Fail;
            }
            (Some(_), Some(_)) => {}
            _ if status != Status::Fail => status = Status::Unknown,
            _ => {}
        }
        st.push(status);
    }
    item(
        "cuda_layers",
        "CUDA layers: container runtime vs host driver vs local toolkit",
        combine(&st),
        ev,
        "The container depends on the host driver: upgrade the host driver or use an image built for the host's CUDA; never copy libraries between host and container, and a newer toolkit in the image does not help.",
    )
}

fn check_vllm(c: &Ctx) -> CheckItem {
    let min = c.profile.vllm.min_version.clone();
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        match b.vllm_version() {
            None => {
                st.push(Status::Unknown);
                ev.push(c.tag(
                    b,
                    "no vLLM version (raw/vllm-version.txt or the startup.log banner)",
                ));
            }
            Some((v, src)) => {
                let ok = min
                    .as_ref()
                    .is_none_or(|m| cmp_pep440(&v, m) != std::cmp::Ordering::Less);
                let verdict = match &min {
                    Some(m) if !ok => format!(" < required {m}"),
                    Some(m) => format!(" >= {m}"),
                    None => String::new(),
                };
                ev.push(c.tag(b, format!("vLLM {v} ({src}){verdict}")));
                st.push(if ok { Status::Pass } else { Status::Fail });
            }
        }
    }
    item(
        "vllm_version",
        "vLLM version",
        combine(&st),
        ev,
        "Dependency problem: use the image that ships the required vLLM (print the version inside the image) instead of upgrading single wheels.",
    )
}

fn check_gpus(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    let mut total = 0usize;
    let mut names: Vec<String> = Vec::new();
    for b in c.bundles {
        let host = b.host_gpus();
        let visible = b.visible_gpus();
        let mut status = Status::Pass;
        match &visible {
            None => {
                status = Status::Unknown;
                ev.push(c.tag(
                    b,
                    "no GPU list (raw/nvidia-smi.txt, nvidia-smi-query.csv, nvidia-smi-topo.txt)",
                ));
            }
            Some((n, src)) => {
                total += n;
                let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
                for g in &host {
                    *by_name.entry(g.as_str()).or_default() += 1;
                }
                let list: Vec<String> = by_name.iter().map(|(k, v)| format!("{v}x {k}")).collect();
                ev.push(c.tag(
                    b,
                    format!(
                        "{n} visible ({src}); host: {}",
                        if list.is_empty() {
                            "?".into()
                        } else {
                            list.join(", ")
                        }
                    ),
                ));
                names.extend(host.iter().cloned());
            }
        }
        if let Some(csmi) = &b.container_smi {
            if !host.is_empty() && csmi.gpus.len() < host.len() {
                ev.push(c.tag(
                    b,
                    format!(
                        "container sees {} of the host's {} GPUs",
                        csmi.gpus.len(),
                        host.len()
                    ),
                ));
            }
        } else if !b.container_cuda_errors.is_empty() {
            ev.push(c.tag(
                b,
                "the container could not start with GPUs (nvidia-container-cli)",
            ));
            status = Status::Fail;
        }
        st.push(status);
    }
    let mut status = combine(&st);
    if let Some(min) = c.profile.gpus.min_count {
        if total > 0 && (total as u32) < min {
            ev.push(format!(
                "{total} GPUs visible in total < {min} required by {}",
                c.profile.name
            ));
            status = Status::Fail;
        }
    }
    let classes = &c.profile.gpus.classes;
    if !classes.is_empty() {
        let wrong: BTreeSet<&String> = names
            .iter()
            .filter(|n| {
                !classes
                    .iter()
                    .any(|cl| n.to_ascii_uppercase().contains(&cl.to_ascii_uppercase()))
            })
            .collect();
        if !wrong.is_empty() {
            ev.push(format!(
                "not {}-class: {}",
                classes.join("/"),
                wrong.into_iter().cloned().collect::<Vec<_>>().join(", ")
            ));
            status = Status::Fail;
        }
    }
    item(
        "gpus_visible",
        "Visible GPUs (container view apart from the host's)",
        status,
        ev,
        "Check the device plugin / --gpus / CUDA_VISIBLE_DEVICES and that every rank sees the same devices; use the GPU class and count the profile names.",
    )
}

fn strategy(launch: &crate::envparse::Launch, multi: bool) -> &'static str {
    if launch.has("--enable-expert-parallel") && launch.data_parallel() > 1 {
        "multi_node_dep"
    } else if launch.pipeline_parallel() > 1 {
        "multi_node_tp_pp"
    } else if launch.has("--enable-expert-parallel") && multi {
        "multi_node_tep"
    } else if multi {
        "multi_node_tp"
    } else {
        "single_node_tp"
    }
}

fn check_parallelism(c: &Ctx) -> CheckItem {
    let mut ev = Vec::new();
    let mut status = Status::Pass;
    let head = c
        .bundles
        .iter()
        .find_map(|b| b.launch.as_ref().map(|l| (b, l)));
    let Some((hb, launch)) = head else {
        return item(
            "parallelism",
            "GPUs vs tensor x pipeline x data parallel",
            Status::Unknown,
            vec!["no launch command (raw/cmdline.txt or docker-inspect.json)".into()],
            "Save the complete launch command in raw/cmdline.txt.",
        );
    };
    let (tp, pp, dp) = (
        launch.tensor_parallel(),
        launch.pipeline_parallel(),
        launch.data_parallel(),
    );
    let world = tp * pp * dp;
    let sizes = format!("TP {tp} x PP {pp} x DP {dp} = {world} GPUs");
    let total: Option<usize> = c
        .bundles
        .iter()
        .map(|b| b.visible_gpus().map(|(n, _)| n))
        .sum();
    let hint = launch.multi_node_hint();
    let multi = c.multi || hint.is_some();
    match total {
        None => {
            ev.push(format!("{sizes}; visible GPUs unknown"));
            status = Status::Unknown;
        }
        Some(total) if world as usize <= total => ev.push(format!("{sizes} <= {total} visible")),
        Some(total) if !c.multi && hint.is_some() => {
            ev.push(format!(
                "{sizes} > {total} visible on {}; spans nodes ({}): check the bundles of all nodes together",
                hb.host,
                hint.clone().unwrap_or_default()
            ));
            status = Status::Unknown;
        }
        Some(total) => {
            ev.push(format!("{sizes} > {total} visible GPUs"));
            status = Status::Fail;
        }
    }
    // Tensor parallelism over a GPU that lost its NVLink (degraded fabric) while its
    // peers keep theirs: one slow or failing rank.
    for b in c.bundles {
        let Some(t) = &b.topo else { continue };
        let without = t.gpus_without_nvlink();
        if tp > 1 && t.has_nvlink() && !without.is_empty() {
            ev.push(c.tag(
                b,
                format!(
                    "topology: {} — TP {tp} spans GPUs without NVLink",
                    t.summary()
                ),
            ));
            status = Status::Fail;
        } else if tp > 1 {
            ev.push(c.tag(b, format!("topology: {}", t.summary())));
        }
    }
    // Each node hosts its local DP ranks of TP x PP GPUs (when TP x PP fits a node).
    for b in c.bundles {
        let (Some(l), Some((n, _))) = (b.launch.as_ref(), b.visible_gpus()) else {
            continue;
        };
        let need = l.tensor_parallel() * l.pipeline_parallel() * l.data_parallel_local();
        if l.data_parallel_local() < l.data_parallel() && need as usize > n {
            ev.push(c.tag(
                b,
                format!(
                    "local DP {} x TP x PP = {need} > {n} visible on this node",
                    l.data_parallel_local()
                ),
            ));
            status = Status::Fail;
        }
    }
    if !c.profile.gpus.min_by_strategy.is_empty() {
        let strat = if c
            .bundles
            .iter()
            .flat_map(|b| b.host_gpus())
            .any(|g| g.contains("H100"))
        {
            "h100"
        } else {
            strategy(launch, multi)
        };
        if let Some(min) = c.profile.gpus.min_by_strategy.get(strat) {
            if world < *min as u64 {
                ev.push(format!(
                    "{strat} needs >= {min} GPUs ({}), the command uses {world}",
                    c.profile.name
                ));
                status = Status::Fail;
            } else {
                ev.push(format!("{strat}: {world} >= {min} GPUs"));
            }
        }
    }
    item(
        "parallelism",
        "GPUs vs tensor x pipeline x data parallel",
        status,
        ev,
        "Topology first: match --tensor-parallel-size x --pipeline-parallel-size x --data-parallel-size to the GPUs every node really sees, then change one memory parameter at a time.",
    )
}

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
        Class::Unknown => "unknown",
    }
}

/// Failure classes found in the bundles' startup logs (for the decision).
fn log_classes(c: &Ctx) -> (CheckItem, BTreeSet<Class>) {
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
            ev.push(c.tag(b, format!("no failure; started: {}", l.trim())));
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
            "failure_phase",
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
fn errno524_line(text: &str) -> Option<(usize, String)> {
    let rules = crate::triage::rules::RuleSet::builtin();
    text.lines()
        .enumerate()
        .find(|(_, l)| {
            rules
                .first_of_kind(l, RuleKind::Hint)
                .is_some_and(|ri| rules.rules[ri].class == Class::Nccl)
        })
        .map(|(i, l)| (i + 1, l.trim().chars().take(300).collect()))
}

fn check_prefix_flag(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let Some(l) = &b.launch else {
            st.push(Status::Unknown);
            ev.push(c.tag(
                b,
                "no launch command (raw/cmdline.txt, docker-inspect.json or pod-spec.yaml)",
            ));
            continue;
        };
        let required = c.profile.required_flags_for(&b.host_gpus());
        let pc = l.prefix_caching();
        let mut status = Status::Pass;
        let state = match pc {
            Some(true) => "--enable-prefix-caching present",
            Some(false) => "prefix caching switched off (--no-enable-prefix-caching)",
            None => "no prefix-caching flag (engine default applies)",
        };
        ev.push(c.tag(b, format!("{state}: {}", truncate(&l.command_line(), 240))));
        let (notes, config_status) = flags::config_file_notes(b, l);
        ev.extend(notes.into_iter().map(|n| c.tag(b, n)));
        if let Some(s) = config_status {
            status = s;
        }
        let (notes, values_ok) = flags::required_values(c.profile, l);
        ev.extend(notes.into_iter().map(|n| c.tag(b, n)));
        if !values_ok {
            status = Status::Fail;
        }
        for f in &required {
            let present = if f == "--enable-prefix-caching" {
                pc == Some(true)
            } else {
                l.has(f)
            };
            if !present {
                ev.push(c.tag(
                    b,
                    format!(
                        "{f} required by {} but not in the running command line{}",
                        c.profile.name,
                        if b.config_args.is_empty() {
                            ""
                        } else {
                            " nor in its --config file"
                        }
                    ),
                ));
                status = Status::Fail;
            }
        }
        // The effective config in the log must agree with the command line.
        if let Some(text) = &b.startup_log_text {
            if pc == Some(true) && text.contains("enable_prefix_caching=False") {
                ev.push(c.tag(b, "startup.log: enable_prefix_caching=False although the command enables it (wrapper dropped it?)"));
                status = Status::Fail;
            }
        }
        if let Some(name) = &c.profile.cache.retention_env {
            if let Some(v) = b.relevant_env().get(name) {
                let meaning = if v.trim() == "0" {
                    " (periodic checkpoints off: only prompt-end states kept)"
                } else {
                    ""
                };
                ev.push(c.tag(b, format!("{name}={v}{meaning}")));
            }
        }
        if let (Some(max), Some(len)) = (c.profile.cache.max_context, l.value("--max-model-len")) {
            if let Some(n) = parse_len(len) {
                if n > max {
                    ev.push(c.tag(
                        b,
                        format!("--max-model-len {len} exceeds the model's context {max}"),
                    ));
                    status = Status::Fail;
                }
            }
        }
        st.push(status);
    }
    item(
        "prefix_caching_flag",
        "--enable-prefix-caching in the actual running command line",
        combine(&st),
        ev,
        "Add --enable-prefix-caching to the final command (check the process arguments, not the template), then test prefix identity and retention with a positive and a negative control.",
    )
}

fn parse_len(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    if let Some(k) = v.strip_suffix('k') {
        return k.parse::<u64>().ok().map(|n| n * 1024);
    }
    if let Some(m) = v.strip_suffix('m') {
        return m.parse::<u64>().ok().map(|n| n * 1024 * 1024);
    }
    v.parse().ok()
}

fn backend_kind(backend: &str) -> &'static str {
    let b = backend.to_ascii_lowercase();
    if b.contains("nvlink") || b.contains("mnnvl") {
        "nvlink"
    } else if b.starts_with("deepep")
        || b.contains("pplx")
        || b.contains("nixl")
        || b.contains("mori")
    {
        "rdma"
    } else {
        "generic"
    }
}

fn is_rdma_var(n: &str) -> bool {
    n.starts_with("UCX_")
        || n.starts_with("NCCL_IB_")
        || n.starts_with("NCCL_NET_GDR")
        || n.starts_with("NVSHMEM_IB")
        || n.starts_with("NVSHMEM_HCA")
        || n == "NVSHMEM_REMOTE_TRANSPORT"
        || n == "NCCL_DMABUF_ENABLE"
}

fn is_nvlink_var(n: &str) -> bool {
    n == "NCCL_MNNVL_ENABLE" || n == "NCCL_NVLS_ENABLE"
}

fn check_transport(c: &Ctx) -> CheckItem {
    let mut ev = Vec::new();
    let mut fails = Vec::new();
    let mut next = Vec::new();
    let launch = c.bundles.iter().find_map(|b| b.launch.as_ref());
    let backend = launch.and_then(|l| l.all2all_backend());
    let multi = c.multi || launch.and_then(|l| l.multi_node_hint()).is_some();
    let gpus: Vec<String> = c.bundles.iter().flat_map(|b| b.host_gpus()).collect();
    let mnnvl = gpus
        .iter()
        .any(|g| g.contains("GB200") || g.contains("GB300"));
    let rdma: Vec<String> = c
        .bundles
        .iter()
        .filter_map(|b| b.rdma_evidence().map(|e| c.tag(b, e)))
        .collect();
    let no_rdma: Vec<String> = c
        .bundles
        .iter()
        .filter_map(|b| b.rdma_absent_evidence().map(|e| c.tag(b, e)))
        .collect();
    let nvlink = c
        .bundles
        .iter()
        .any(|b| b.topo.as_ref().is_some_and(|t| t.has_nvlink()));
    let env: BTreeMap<String, String> = c.bundles.iter().flat_map(|b| b.relevant_env()).collect();
    let rdma_vars: Vec<&String> = env.keys().filter(|k| is_rdma_var(k)).collect();
    let nvlink_vars: Vec<&String> = env.keys().filter(|k| is_nvlink_var(k)).collect();
    ev.push(format!(
        "all2all backend: {}; {}; fabric: RDMA {}, NVLink {}",
        backend.clone().unwrap_or_else(|| "not set".into()),
        if multi { "multi-node" } else { "single node" },
        if !rdma.is_empty() {
            rdma.join("; ")
        } else if !no_rdma.is_empty() {
            format!("none ({})", no_rdma.join("; "))
        } else {
            "unknown".into()
        },
        if nvlink { "yes (topology)" } else { "not seen" }
    ));
    let kind = backend.as_deref().map(backend_kind);
    let p = &c.profile.transport;
    if kind == Some("rdma") && rdma.is_empty() && !no_rdma.is_empty() {
        fails.push(format!(
            "RDMA backend {} on a host without RDMA ({})",
            backend.clone().unwrap_or_default(),
            no_rdma.join("; ")
        ));
        next.push(if p.nvlink_all2all.is_empty() {
            "use the NVLink all-to-all backend on an NVLink-only fabric".to_string()
        } else {
            format!("use --all2all-backend {} on NVLink", p.nvlink_all2all)
        });
    }
    if kind == Some("nvlink") && multi && !mnnvl {
        fails.push(format!(
            "NVLink backend {} across nodes without multi-node NVLink (GPUs: {})",
            backend.clone().unwrap_or_default(),
            gpus.first().cloned().unwrap_or_else(|| "unknown".into())
        ));
        next.push(if p.rdma_all2all.is_empty() {
            "use an RDMA backend across nodes".into()
        } else {
            format!("use --all2all-backend {} over RDMA", p.rdma_all2all)
        });
    }
    if kind == Some("nvlink") && !rdma_vars.is_empty() {
        fails.push(format!(
            "RDMA variables on an NVLink backend: {}",
            rdma_vars
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        next.push("remove the RDMA variables from the NVLink deployment".into());
    }
    if kind == Some("rdma") && !nvlink_vars.is_empty() {
        fails.push(format!(
            "NVLink variables on an RDMA backend: {}",
            nvlink_vars
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        next.push("remove the MNNVL variables from the RDMA deployment".into());
    }
    if let (Some(b), Some(k)) = (&backend, kind) {
        let want = match k {
            "rdma" => &p.rdma_all2all,
            "nvlink" => &p.nvlink_all2all,
            _ => &String::new(),
        };
        if multi && !want.is_empty() && want != b {
            fails.push(format!(
                "{} uses --all2all-backend {want} for {}, the command uses {b}",
                c.profile.name,
                k.to_uppercase()
            ));
            next.push(format!("use --all2all-backend {want}"));
        }
    }
    let kv_transfer = launch.is_some_and(|l| l.has("--kv-transfer-config"));
    if kind == Some("rdma") || (kv_transfer && !rdma.is_empty()) {
        for (k, want) in &p.rdma_env {
            match env.get(k) {
                Some(v) if v != want => {
                    fails.push(format!("{k}={v}, RDMA needs {k}={want}"));
                    next.push(format!("set {k}={want}"));
                }
                None if kv_transfer => {
                    fails.push(format!(
                        "{k} not set; KV transfer over RDMA needs {k}={want}"
                    ));
                    next.push(format!("set {k}={want}"));
                }
                _ => {}
            }
        }
    }
    if p.megamoe_forbidden_with_rdma {
        let mega = p
            .megamoe_backend
            .clone()
            .unwrap_or_else(|| "deep_gemm_mega_moe".into());
        if launch.and_then(|l| l.value("--moe-backend")) == Some(mega.as_str())
            && multi
            && (kind == Some("rdma") || (!mnnvl && !rdma.is_empty()))
        {
            fails.push(format!("--moe-backend {mega} with cross-node RDMA (DeepGEMM MegaMoE is not compatible with cross-node RDMA)"));
            next.push("leave --moe-backend unset (automatic) on RDMA; MegaMoE only with cross-node NVLink (GB200/GB300)".into());
        }
    }
    for b in c.bundles {
        let Some((n, line)) = b.startup_log_text.as_deref().and_then(errno524_line) else {
            continue;
        };
        let fallback = p
            .dmabuf_fallback_env
            .clone()
            .unwrap_or_else(|| "NCCL_DMABUF_ENABLE".into());
        let peermem = b.modules.as_ref().map(|m| m.is_loaded("nvidia_peermem"));
        let set = b.relevant_env().get(&fallback).cloned();
        fails.push(c.tag(b, format!("startup.log line {n}: {line}")));
        next.push(match (peermem, set.as_deref()) {
            (Some(true), Some("0")) => format!("{fallback}=0 is set and nvidia_peermem is loaded: inspect the earliest failing rank and the NIC path"),
            (Some(true), _) => format!("mlx5 dmabuf registration is unsupported here: set {fallback}=0 to fall back to nvidia_peermem (loaded on {}), still GPUDirect RDMA", b.host),
            (Some(false), _) => format!("nvidia_peermem is NOT loaded on {}: load it (modprobe nvidia_peermem) on every node, then set {fallback}=0", b.host),
            (None, _) => format!("check `lsmod | grep nvidia_peermem` on {} (no raw/lsmod.txt), load it, then set {fallback}=0", b.host),
        });
    }
    let status = if !fails.is_empty() {
        Status::Fail
    } else if launch.is_none() {
        ev.push("no launch command: backend and node layout unknown".into());
        Status::Unknown
    } else if multi && (backend.is_none() || (rdma.is_empty() && !nvlink && !mnnvl)) {
        ev.push("multi-node, but the backend or the fabric is not recorded".into());
        Status::Unknown
    } else {
        Status::Pass
    };
    ev.extend(fails);
    let next = if next.is_empty() {
        "Record the all-to-all backend and the fabric (ibv_devinfo, lsmod, topology) of every node."
            .to_string()
    } else {
        next.join("; ")
    };
    item(
        "communication_path",
        "One communication path; backend matches the fabric",
        status,
        ev,
        &next,
    )
}

fn check_reproducible(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let mut missing = Vec::new();
        if b.image_digest().is_none() {
            missing.push("image digest");
        }
        if b.launch.is_none() {
            missing.push("launch arguments");
        }
        if b.driver().is_none() {
            missing.push("driver version");
        }
        if b.startup_log.is_none() {
            missing.push("startup log");
        }
        if missing.is_empty() {
            ev.push(c.tag(b, "digest, arguments, driver and startup log recorded"));
            st.push(Status::Pass);
        } else {
            ev.push(c.tag(b, format!("missing: {}", missing.join(", "))));
            st.push(Status::Fail);
        }
    }
    item(
        "reproducible",
        "Reproducible record (digest, arguments, driver, logs)",
        combine(&st),
        ev,
        "Save the run under its own directory (golive collect --container NAME): image digest, full command, driver, startup log.",
    )
}

/// Names that legitimately differ per node.
fn per_node_env(name: &str) -> bool {
    name == "VLLM_HOST_IP"
        || name.ends_with("_IP")
        || name.ends_with("_RANK")
        || name.ends_with("_ADDR")
        || name == "HOSTNAME"
}

fn check_consistency(c: &Ctx) -> CheckItem {
    let mut ev = Vec::new();
    let mut status = Status::Pass;
    let mut compare = |what: &str, values: Vec<(String, Option<String>)>| {
        let known: BTreeSet<&String> = values.iter().filter_map(|(_, v)| v.as_ref()).collect();
        let line = values
            .iter()
            .map(|(h, v)| format!("{h}={}", v.clone().unwrap_or_else(|| "?".into())))
            .collect::<Vec<_>>()
            .join(", ");
        if known.len() > 1 {
            ev.push(format!("{what} differs: {line}"));
            status = Status::Fail;
        } else if values.iter().any(|(_, v)| v.is_none()) {
            ev.push(format!("{what} not recorded everywhere: {line}"));
            if status == Status::Pass {
                status = Status::Unknown;
            }
        } else {
            ev.push(format!(
                "{what} identical: {}",
                known.into_iter().next().cloned().unwrap_or_default()
            ));
        }
    };
    compare(
        "image digest",
        c.bundles
            .iter()
            .map(|b| (b.host.clone(), b.image_digest()))
            .collect(),
    );
    compare(
        "driver",
        c.bundles
            .iter()
            .map(|b| (b.host.clone(), b.driver().map(|d| d.0)))
            .collect(),
    );
    compare(
        "vLLM version",
        c.bundles
            .iter()
            .map(|b| (b.host.clone(), b.vllm_version().map(|v| v.0)))
            .collect(),
    );
    let envs: Vec<(String, BTreeMap<String, String>)> = c
        .bundles
        .iter()
        .map(|b| {
            let mut e = b.relevant_env();
            e.retain(|k, _| !per_node_env(k));
            (b.host.clone(), e)
        })
        .collect();
    let names: BTreeSet<&String> = envs.iter().flat_map(|(_, e)| e.keys()).collect();
    let mut env_diffs = Vec::new();
    for n in names {
        let vals: BTreeSet<Option<&String>> = envs.iter().map(|(_, e)| e.get(n)).collect();
        if vals.len() > 1 {
            let line = envs
                .iter()
                .map(|(h, e)| format!("{h}={}", e.get(n).map(String::as_str).unwrap_or("(unset)")))
                .collect::<Vec<_>>()
                .join(", ");
            env_diffs.push(format!("{n}: {line}"));
        }
    }
    if env_diffs.is_empty() {
        ev.push("relevant env identical".into());
    } else {
        ev.push(format!("relevant env differs: {}", env_diffs.join("; ")));
        status = Status::Fail;
    }
    item(
        "node_consistency",
        "Same image digest, driver, vLLM version and relevant env on every node",
        status,
        ev,
        "Isolate multi-node: bring every node to the same image digest, driver branch, vLLM version and environment before debugging NCCL.",
    )
}

fn check_parsers(c: &Ctx) -> Option<CheckItem> {
    let want_tool = c.profile.flags.tool_call_parser.clone();
    let want_reason = c.profile.flags.reasoning_parser.clone();
    if want_tool.is_none() && want_reason.is_none() {
        return None;
    }
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let Some(l) = &b.launch else {
            st.push(Status::Unknown);
            continue;
        };
        let mut status = Status::Pass;
        for (flag, want) in [
            ("--tool-call-parser", &want_tool),
            ("--reasoning-parser", &want_reason),
        ] {
            let (Some(want), Some(have)) = (want, l.value(flag)) else {
                continue;
            };
            if have != want {
                ev.push(c.tag(b, format!("{flag} {have}, the recipe uses {want}")));
                status = Status::Fail;
            } else {
                ev.push(c.tag(b, format!("{flag} {have}")));
            }
        }
        if l.has("--enable-auto-tool-choice") && !l.has("--tool-call-parser") {
            ev.push(c.tag(b, "--enable-auto-tool-choice without --tool-call-parser"));
            status = Status::Fail;
        }
        if status == Status::Pass && ev.is_empty() {
            ev.push(c.tag(b, "no tool-call or reasoning parser set"));
        }
        st.push(status);
    }
    Some(item(
        "parsers",
        "Tool-call and reasoning parser as the recipe names them",
        combine(&st),
        ev,
        "Use the model's own parsers (recipe features) and validate tool calls against your schemas.",
    ))
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
