//! Host and image items: the image reference, the driver, the CUDA layers, the vLLM
//! version and the GPUs the bundles saw.

use std::collections::{BTreeMap, BTreeSet};

use super::{combine, item, strip_registry, CheckItem, Ctx, ItemId};
use crate::envparse::{cmp_pep440, cmp_versions, version_parts};
use crate::report::Status;

pub(super) fn check_image(c: &Ctx) -> CheckItem {
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
        ItemId::OfficialImage,
        "Official image (tag and digest)",
        combine(&st),
        ev,
        &next,
    )
}

pub(super) fn check_driver(c: &Ctx) -> CheckItem {
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
        ItemId::HostDriver,
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

pub(super) fn check_cuda_layers(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let driver = b.driver().map(|(d, _)| d);
        let native = driver
            .as_deref()
            .and_then(|d| c.profile.cuda.native_for_driver(d));
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
            if let Some((shown, nat)) = c.profile.cuda.header_exceeds_native(smi) {
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
        ItemId::CudaLayers,
        "CUDA layers: container runtime vs host driver vs local toolkit",
        combine(&st),
        ev,
        "The container depends on the host driver: upgrade the host driver or use an image built for the host's CUDA; never copy libraries between host and container, and a newer toolkit in the image does not help.",
    )
}

pub(super) fn check_vllm(c: &Ctx) -> CheckItem {
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
        ItemId::VllmVersion,
        "vLLM version",
        combine(&st),
        ev,
        "Dependency problem: use the image that ships the required vLLM (print the version inside the image) instead of upgrading single wheels.",
    )
}

pub(super) fn check_gpus(c: &Ctx) -> CheckItem {
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
        ItemId::GpusVisible,
        "Visible GPUs (container view apart from the host's)",
        status,
        ev,
        "Check the device plugin / --gpus / CUDA_VISIBLE_DEVICES and that every rank sees the same devices; use the GPU class and count the profile names.",
    )
}
