//! Multi-GPU and multi-node items: the parallelism layout, the collective transport
//! (NCCL over RDMA/NVLink) and the consistency of the nodes' environments.

use std::collections::{BTreeMap, BTreeSet};

use super::logs::errno524_line;
use super::{item, CheckItem, Ctx, ItemId};
use crate::envparse::Launch;
use crate::profile::recipe::is_strategy;
use crate::profile::{Fabric, FabricTable, Strategy};
use crate::report::Status;

fn strategy(launch: &crate::envparse::Launch, multi: bool) -> Strategy {
    if launch.has("--enable-expert-parallel") && launch.data_parallel() > 1 {
        Strategy::MultiNodeDep
    } else if launch.pipeline_parallel() > 1 {
        Strategy::MultiNodeTpPp
    } else if launch.has("--enable-expert-parallel") && multi {
        Strategy::MultiNodeTep
    } else if multi {
        Strategy::MultiNodeTp
    } else {
        Strategy::SingleNodeTp
    }
}

pub(super) fn check_parallelism(c: &Ctx) -> CheckItem {
    let mut ev = Vec::new();
    let mut status = Status::Pass;
    let head = c
        .bundles
        .iter()
        .find_map(|b| b.launch.as_ref().map(|l| (b, l)));
    let Some((hb, launch)) = head else {
        return item(
            ItemId::Parallelism,
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
    let mins = &c.profile.gpus.min_by_strategy;
    if !mins.is_empty() {
        // A GPU-class key (`h100 = 32`) the hosts' GPUs match decides before the strategy.
        let gpus: Vec<String> = c
            .bundles
            .iter()
            .flat_map(|b| b.host_gpus())
            .map(|g| g.to_ascii_uppercase())
            .collect();
        let strat = mins
            .keys()
            .filter(|k| !is_strategy(k))
            .find(|k| gpus.iter().any(|g| g.contains(&k.to_ascii_uppercase())))
            .map(String::as_str)
            .unwrap_or_else(|| strategy(launch, multi).as_str());
        if let Some(min) = mins.get(strat) {
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
        ItemId::Parallelism,
        "GPUs vs tensor x pipeline x data parallel",
        status,
        ev,
        "Topology first: match --tensor-parallel-size x --pipeline-parallel-size x --data-parallel-size to the GPUs every node really sees, then change one memory parameter at a time.",
    )
}

pub(super) fn check_transport(c: &Ctx) -> CheckItem {
    let t = Transport::read(c);
    let mut f = Problems::default();
    t.backend_against_fabric(c, &mut f);
    t.stray_variables(&mut f);
    t.profile_backend(c, &mut f);
    t.rdma_variables(c, &mut f);
    t.megamoe_over_rdma(c, &mut f);
    dmabuf_registration(c, &mut f);
    t.item(f)
}

/// What the bundles and the launch command say of the all-to-all path.
struct Transport<'a> {
    launch: Option<&'a Launch>,
    backend: Option<String>,
    /// The fabric the backend needs.
    kind: Option<Fabric>,
    multi: bool,
    gpus: Vec<String>,
    /// The GPUs have multi-node NVLink.
    mnnvl: bool,
    /// RDMA found, and RDMA looked for and not found (tagged per node).
    rdma: Vec<String>,
    no_rdma: Vec<String>,
    /// NVLink in the topology.
    nvlink: bool,
    env: BTreeMap<String, String>,
    fabrics: &'a FabricTable,
}

/// Failures found, and the repair of each.
#[derive(Default)]
struct Problems {
    fails: Vec<String>,
    next: Vec<String>,
}

impl Problems {
    fn add(&mut self, fail: String, next: String) {
        self.fails.push(fail);
        self.next.push(next);
    }
}

impl<'a> Transport<'a> {
    fn read(c: &Ctx<'a>) -> Transport<'a> {
        let launch = c.bundles.iter().find_map(|b| b.launch.as_ref());
        let backend = launch.and_then(|l| l.all2all_backend());
        let fabrics = &c.profile.fabrics;
        let gpus: Vec<String> = c.bundles.iter().flat_map(|b| b.host_gpus()).collect();
        Transport {
            launch,
            kind: backend.as_deref().map(|b| fabrics.of_backend(b)),
            backend,
            multi: c.multi || launch.and_then(|l| l.multi_node_hint()).is_some(),
            mnnvl: gpus.iter().any(|g| fabrics.multi_node_nvlink(g)),
            gpus,
            rdma: c
                .bundles
                .iter()
                .filter_map(|b| b.rdma_evidence().map(|e| c.tag(b, e)))
                .collect(),
            no_rdma: c
                .bundles
                .iter()
                .filter_map(|b| b.rdma_absent_evidence().map(|e| c.tag(b, e)))
                .collect(),
            nvlink: c
                .bundles
                .iter()
                .any(|b| b.topo.as_ref().is_some_and(|t| t.has_nvlink())),
            env: c.bundles.iter().flat_map(|b| b.relevant_env()).collect(),
            fabrics,
        }
    }

    fn backend_name(&self) -> String {
        self.backend.clone().unwrap_or_default()
    }

    /// The backend needs a fabric the hosts lack: RDMA on a host without it, NVLink across
    /// nodes without multi-node NVLink.
    fn backend_against_fabric(&self, c: &Ctx, f: &mut Problems) {
        let p = &c.profile.transport;
        if self.kind == Some(Fabric::Rdma) && self.rdma.is_empty() && !self.no_rdma.is_empty() {
            f.add(
                format!(
                    "RDMA backend {} on a host without RDMA ({})",
                    self.backend_name(),
                    self.no_rdma.join("; ")
                ),
                if p.nvlink_all2all.is_empty() {
                    "use the NVLink all-to-all backend on an NVLink-only fabric".to_string()
                } else {
                    format!("use --all2all-backend {} on NVLink", p.nvlink_all2all)
                },
            );
        }
        if self.kind == Some(Fabric::Nvlink) && self.multi && !self.mnnvl {
            f.add(
                format!(
                    "NVLink backend {} across nodes without multi-node NVLink (GPUs: {})",
                    self.backend_name(),
                    self.gpus
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "unknown".into())
                ),
                if p.rdma_all2all.is_empty() {
                    "use an RDMA backend across nodes".into()
                } else {
                    format!("use --all2all-backend {} over RDMA", p.rdma_all2all)
                },
            );
        }
    }

    /// The environment variables of the other fabric than the backend's.
    fn stray_variables(&self, f: &mut Problems) {
        let vars_of = |fabric: Fabric| -> Vec<&str> {
            self.env
                .keys()
                .filter(|k| self.fabrics.is_env_of(fabric, k))
                .map(String::as_str)
                .collect()
        };
        let rdma_vars = vars_of(Fabric::Rdma);
        if self.kind == Some(Fabric::Nvlink) && !rdma_vars.is_empty() {
            f.add(
                format!(
                    "RDMA variables on an NVLink backend: {}",
                    rdma_vars.join(", ")
                ),
                "remove the RDMA variables from the NVLink deployment".into(),
            );
        }
        let nvlink_vars = vars_of(Fabric::Nvlink);
        if self.kind == Some(Fabric::Rdma) && !nvlink_vars.is_empty() {
            f.add(
                format!(
                    "NVLink variables on an RDMA backend: {}",
                    nvlink_vars.join(", ")
                ),
                "remove the MNNVL variables from the RDMA deployment".into(),
            );
        }
    }

    /// The profile names the backend for this fabric across nodes, and the command uses another.
    fn profile_backend(&self, c: &Ctx, f: &mut Problems) {
        let (Some(b), Some(k)) = (&self.backend, self.kind) else {
            return;
        };
        let p = &c.profile.transport;
        let want = match k {
            Fabric::Rdma => &p.rdma_all2all,
            Fabric::Nvlink => &p.nvlink_all2all,
            Fabric::Generic => &String::new(),
        };
        if self.multi && !want.is_empty() && want != b {
            f.add(
                format!(
                    "{} uses --all2all-backend {want} for {}, the command uses {b}",
                    c.profile.name,
                    k.as_str().to_uppercase()
                ),
                format!("use --all2all-backend {want}"),
            );
        }
    }

    /// The variables RDMA needs (the profile's), set to other values, or missing where the KV
    /// cache moves over RDMA.
    fn rdma_variables(&self, c: &Ctx, f: &mut Problems) {
        let kv_transfer = self.launch.is_some_and(|l| l.has("--kv-transfer-config"));
        if !(self.kind == Some(Fabric::Rdma) || (kv_transfer && !self.rdma.is_empty())) {
            return;
        }
        for (k, want) in &c.profile.transport.rdma_env {
            match self.env.get(k) {
                Some(v) if v != want => {
                    f.add(
                        format!("{k}={v}, RDMA needs {k}={want}"),
                        format!("set {k}={want}"),
                    );
                }
                None if kv_transfer => f.add(
                    format!("{k} not set; KV transfer over RDMA needs {k}={want}"),
                    format!("set {k}={want}"),
                ),
                _ => {}
            }
        }
    }

    /// DeepGEMM MegaMoE across nodes over RDMA, which it does not support.
    fn megamoe_over_rdma(&self, c: &Ctx, f: &mut Problems) {
        let p = &c.profile.transport;
        let (true, Some(mega)) = (p.megamoe_forbidden_with_rdma, &p.megamoe_backend) else {
            return;
        };
        let over_rdma = self.kind == Some(Fabric::Rdma) || (!self.mnnvl && !self.rdma.is_empty());
        if self.launch.and_then(|l| l.value("--moe-backend")) == Some(mega.as_str())
            && self.multi
            && over_rdma
        {
            f.add(
                format!("--moe-backend {mega} with cross-node RDMA (DeepGEMM MegaMoE is not compatible with cross-node RDMA)"),
                format!(
                    "leave --moe-backend unset (automatic) on RDMA; MegaMoE only with cross-node NVLink ({})",
                    c.profile.fabrics.nvlink.multi_node_gpus.join("/")
                ),
            );
        }
    }

    /// The checklist item: failed with the problems found, unknown where the command or the
    /// fabric is not recorded, else passed.
    fn item(&self, f: Problems) -> CheckItem {
        let mut ev = vec![self.summary()];
        let status = if !f.fails.is_empty() {
            Status::Fail
        } else if self.launch.is_none() {
            ev.push("no launch command: backend and node layout unknown".into());
            Status::Unknown
        } else if self.multi
            && (self.backend.is_none() || (self.rdma.is_empty() && !self.nvlink && !self.mnnvl))
        {
            ev.push("multi-node, but the backend or the fabric is not recorded".into());
            Status::Unknown
        } else {
            Status::Pass
        };
        ev.extend(f.fails);
        let next = if f.next.is_empty() {
            "Record the all-to-all backend and the fabric (ibv_devinfo, lsmod, topology) of every node."
                .to_string()
        } else {
            f.next.join("; ")
        };
        item(
            ItemId::CommunicationPath,
            "One communication path; backend matches the fabric",
            status,
            ev,
            &next,
        )
    }

    /// The first evidence line: backend, layout and the fabric found.
    fn summary(&self) -> String {
        format!(
            "all2all backend: {}; {}; fabric: RDMA {}, NVLink {}",
            self.backend.clone().unwrap_or_else(|| "not set".into()),
            if self.multi {
                "multi-node"
            } else {
                "single node"
            },
            if !self.rdma.is_empty() {
                self.rdma.join("; ")
            } else if !self.no_rdma.is_empty() {
                format!("none ({})", self.no_rdma.join("; "))
            } else {
                "unknown".into()
            },
            if self.nvlink {
                "yes (topology)"
            } else {
                "not seen"
            }
        )
    }
}

/// mlx5 refusing a DMA-BUF registration (errno 524) in a node's startup log, and the repair
/// that node's modules and environment call for.
fn dmabuf_registration(c: &Ctx, f: &mut Problems) {
    let p = &c.profile.transport;
    for b in c.bundles {
        let Some((n, line)) = b.startup_log_text.as_deref().and_then(errno524_line) else {
            continue;
        };
        // Profile::inherit fills it from the generic profile.
        let fallback = p.dmabuf_fallback_env.clone().unwrap_or_default();
        let peermem = b.modules.as_ref().map(|m| m.is_loaded("nvidia_peermem"));
        let set = b.relevant_env().get(&fallback).cloned();
        f.add(c.tag(b, format!("startup.log line {n}: {line}")), match (peermem, set.as_deref()) {
            (Some(true), Some("0")) => format!("{fallback}=0 is set and nvidia_peermem is loaded: inspect the earliest failing rank and the NIC path"),
            (Some(true), _) => format!("mlx5 dmabuf registration is unsupported here: set {fallback}=0 to fall back to nvidia_peermem (loaded on {}), still GPUDirect RDMA", b.host),
            (Some(false), _) => format!("nvidia_peermem is NOT loaded on {}: load it (modprobe nvidia_peermem) on every node, then set {fallback}=0", b.host),
            (None, _) => format!("check `lsmod | grep nvidia_peermem` on {} (no raw/lsmod.txt), load it, then set {fallback}=0", b.host),
        });
    }
}

/// Names that legitimately differ per node.
fn per_node_env(name: &str) -> bool {
    name == "VLLM_HOST_IP"
        || name.ends_with("_IP")
        || name.ends_with("_RANK")
        || name.ends_with("_ADDR")
        || name == "HOSTNAME"
}

pub(super) fn check_consistency(c: &Ctx) -> CheckItem {
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
        ItemId::NodeConsistency,
        "Same image digest, driver, vLLM version and relevant env on every node",
        status,
        ev,
        "Isolate multi-node: bring every node to the same image digest, driver branch, vLLM version and environment before debugging NCCL.",
    )
}
