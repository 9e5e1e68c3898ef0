//! `golive diff`: what changed between two bundles that matters — image digest,
//! driver, vLLM version, launch arguments (argument by argument), relevant env,
//! GPU set and topology, cache flag, kernel modules — and nothing that does not
//! (timestamps, PIDs, memory in use).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::envparse::Bundle;

/// The two bundle directories `golive diff` compares.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The bundle before.
    pub a: PathBuf,
    /// The bundle after.
    pub b: PathBuf,
}

/// One change that matters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// `image_digest`, `image`, `driver`, `vllm_version`, `arg`, `model`, `program`,
    /// `env`, `gpus`, `topology`, `cache_flag`, `module`.
    pub kind: String,
    /// The argument, variable or module name when the kind has several.
    pub name: String,
    /// The value in the bundle before; `None`: absent there.
    pub a: Option<String>,
    /// The value in the bundle after; `None`: absent there.
    pub b: Option<String>,
}

/// What `golive diff` found (`--json`), bundle before to bundle after.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiffReport {
    /// The report schema version ([`crate::report::SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The bundle before, as a path.
    pub a: String,
    /// The bundle after, as a path.
    pub b: String,
    /// Every change that matters, grouped by kind; empty: none.
    pub changes: Vec<Change>,
}

/// Kernel modules that decide GPU and RDMA behaviour.
fn relevant_module(m: &str) -> bool {
    m.starts_with("nvidia")
        || m.starts_with("mlx")
        || m.starts_with("ib_")
        || m.starts_with("rdma")
        || m == "nv_peer_mem"
        || m == "gdrdrv"
}

/// A change, shown redacted (a bundle written by hand or by an older golive may hold a
/// secret: `RAY_ADDRESS=http://u:p@...`; the bundle's parser redacts it already).
fn push(out: &mut Vec<Change>, kind: &str, name: &str, a: Option<String>, b: Option<String>) {
    if a != b {
        let shown = |v: Option<String>| {
            v.map(|v| {
                let flag = name.strip_prefix("--").unwrap_or(name);
                crate::redact::redact_pair(flag, &crate::redact::redact_line(&v))
            })
        };
        out.push(Change {
            kind: kind.into(),
            name: name.into(),
            a: shown(a),
            b: shown(b),
        });
    }
}

/// Launch arguments as flag → values (repeated flags keep all their values in order).
fn arg_map(b: &Bundle) -> BTreeMap<String, Vec<String>> {
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Some(l) = &b.launch {
        for a in &l.args {
            m.entry(a.flag.clone())
                .or_default()
                .push(a.value.clone().unwrap_or_default());
        }
    }
    m
}

fn gpu_set(b: &Bundle) -> Option<String> {
    let names = b.host_gpus();
    if names.is_empty() {
        return None;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for n in names {
        *counts.entry(n).or_default() += 1;
    }
    let mut s: Vec<String> = counts
        .into_iter()
        .map(|(k, v)| format!("{v}x {k}"))
        .collect();
    // Bus ids identify the physical set; memory in use and PIDs do not matter.
    let bus: Vec<String> = b
        .smi
        .as_ref()
        .map(|t| t.gpus.iter().map(|g| g.bus_id.clone()).collect())
        .unwrap_or_default();
    if !bus.is_empty() {
        s.push(format!("bus {}", bus.join(",")));
    }
    Some(s.join("; "))
}

/// Compares two loaded bundles.
pub fn diff_bundles(a: &Bundle, b: &Bundle) -> DiffReport {
    let mut out = Vec::new();
    push(&mut out, "image", "", a.image_ref(), b.image_ref());
    push(
        &mut out,
        "image_digest",
        "",
        a.image_digest(),
        b.image_digest(),
    );
    push(
        &mut out,
        "driver",
        "",
        a.driver().map(|d| d.0),
        b.driver().map(|d| d.0),
    );
    push(
        &mut out,
        "vllm_version",
        "",
        a.vllm_version().map(|v| v.0),
        b.vllm_version().map(|v| v.0),
    );
    push(
        &mut out,
        "program",
        "",
        a.launch.as_ref().map(|l| l.program.clone()),
        b.launch.as_ref().map(|l| l.program.clone()),
    );
    push(
        &mut out,
        "model",
        "",
        a.launch.as_ref().and_then(|l| l.model.clone()),
        b.launch.as_ref().and_then(|l| l.model.clone()),
    );
    let pc = |x: &Bundle| {
        x.launch.as_ref().map(|l| match l.prefix_caching() {
            Some(true) => "on".to_string(),
            Some(false) => "off".to_string(),
            None => "default".to_string(),
        })
    };
    push(&mut out, "cache_flag", "", pc(a), pc(b));
    let (ma, mb) = (arg_map(a), arg_map(b));
    let flags: BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
    for f in flags {
        if f.contains("prefix-caching") {
            continue; // reported once as cache_flag
        }
        let show = |v: Option<&Vec<String>>| {
            v.map(|vals| {
                if vals.iter().all(|x| x.is_empty()) {
                    "(set)".to_string()
                } else {
                    vals.join(" | ")
                }
            })
        };
        push(&mut out, "arg", f, show(ma.get(f)), show(mb.get(f)));
    }
    let (ea, eb) = (a.relevant_env(), b.relevant_env());
    let names: BTreeSet<&String> = ea.keys().chain(eb.keys()).collect();
    for n in names {
        push(&mut out, "env", n, ea.get(n).cloned(), eb.get(n).cloned());
    }
    push(&mut out, "gpus", "", gpu_set(a), gpu_set(b));
    let topo = |x: &Bundle| x.topo.as_ref().map(|t| t.summary());
    push(&mut out, "topology", "", topo(a), topo(b));
    let links = |x: &Bundle| x.topo.as_ref().map(|t| t.links.clone());
    if topo(a) == topo(b) && links(a) != links(b) {
        push(
            &mut out,
            "topology",
            "links",
            Some("matrix A".into()),
            Some("matrix B (different connections)".into()),
        );
    }
    let nics = |x: &Bundle| x.topo.as_ref().map(|t| t.nics.join(","));
    push(&mut out, "topology", "nics", nics(a), nics(b));
    if let (Some(x), Some(y)) = (&a.modules, &b.modules) {
        let (sa, sb) = (x.all(), y.all());
        for m in sa.symmetric_difference(&sb).filter(|m| relevant_module(m)) {
            let state = |s: &BTreeSet<String>| {
                Some(
                    if s.contains(m) {
                        "loaded"
                    } else {
                        "not loaded"
                    }
                    .to_string(),
                )
            };
            push(&mut out, "module", m, state(&sa), state(&sb));
        }
    }
    let hca = |x: &Bundle| {
        x.ibv.as_ref().map(|v| {
            v.iter()
                .map(|h| {
                    format!(
                        "{}{}",
                        h.name,
                        if h.has_active_port() { "" } else { " (down)" }
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        })
    };
    push(&mut out, "rdma", "hca", hca(a), hca(b));
    DiffReport {
        schema_version: crate::report::SCHEMA_VERSION,
        a: a.dir.display().to_string(),
        b: b.dir.display().to_string(),
        changes: out,
    }
}

/// The changes as `golive diff` prints them, one per line.
pub fn render_text(r: &DiffReport) -> String {
    if r.changes.is_empty() {
        return format!("no changes that matter between {} and {}\n", r.a, r.b);
    }
    let mut s = format!(
        "{} changes that matter ({} -> {}):\n",
        r.changes.len(),
        r.a,
        r.b
    );
    for c in &r.changes {
        let what = if c.name.is_empty() {
            c.kind.clone()
        } else {
            format!("{} {}", c.kind, c.name)
        };
        let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "(absent)".into());
        s.push_str(&format!("  {what}: {} -> {}\n", v(&c.a), v(&c.b)));
    }
    s
}

/// Loads both bundles and compares them.
pub fn diff(opts: &DiffOptions) -> crate::Result<DiffReport> {
    let a = Bundle::load(&opts.a)?;
    let b = Bundle::load(&opts.b)?;
    Ok(diff_bundles(&a, &b))
}
