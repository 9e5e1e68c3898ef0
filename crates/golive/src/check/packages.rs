//! The Python package versions inside the serving container against the profile's
//! PEP 440 bounds (`[packages]`).

use std::str::FromStr;

use pep440_rs::{Version, VersionSpecifiers};

use super::{combine, item, CheckItem, Ctx, ItemId};
use crate::envparse::{find_package, KEY_PACKAGES};
use crate::report::Status;

/// `package_versions`: only when a bundle has the package list.
pub(super) fn check_packages(c: &Ctx) -> Option<CheckItem> {
    if c.bundles.iter().all(|b| b.python_packages.is_none()) {
        return None;
    }
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let Some(pkgs) = &b.python_packages else {
            st.push(Status::Unknown);
            ev.push(c.tag(b, "no package list (raw/python-packages.json)"));
            continue;
        };
        let found: Vec<String> = KEY_PACKAGES
            .iter()
            .filter_map(|(label, _)| find_package(pkgs, label))
            .map(|(n, v)| format!("{n} {v}"))
            .collect();
        ev.push(c.tag(
            b,
            if found.is_empty() {
                "none of vllm, torch, nccl, nvshmem, deep_ep, flashinfer, xgrammar installed".into()
            } else {
                found.join(", ")
            },
        ));
        let mut status = Status::Pass;
        for (label, bound) in &c.profile.packages {
            let Ok(spec) = VersionSpecifiers::from_str(bound) else {
                ev.push(c.tag(b, format!("profile bound {label} {bound:?} is not PEP 440")));
                status = Status::Unknown;
                continue;
            };
            match find_package(pkgs, label) {
                None => {
                    ev.push(c.tag(
                        b,
                        format!("{label} not installed; {} requires {bound}", c.profile.name),
                    ));
                    status = Status::Fail;
                }
                Some((name, v)) => match Version::from_str(v) {
                    Ok(ver) if spec.contains(&ver) => {}
                    Ok(_) => {
                        ev.push(c.tag(
                            b,
                            format!("{name} {v} outside {bound} ({})", c.profile.name),
                        ));
                        status = Status::Fail;
                    }
                    Err(_) => {
                        ev.push(c.tag(b, format!("{name} {v}: not a PEP 440 version")));
                        if status == Status::Pass {
                            status = Status::Unknown;
                        }
                    }
                },
            }
        }
        st.push(status);
    }
    // Every node of one deployment runs the same versions (NCCL, NVSHMEM and DeepEP
    // talk to their peers on the other nodes).
    if c.multi {
        for (label, _) in KEY_PACKAGES {
            let seen: Vec<(String, String)> = c
                .bundles
                .iter()
                .filter_map(|b| {
                    let (_, v) = find_package(b.python_packages.as_ref()?, label)?;
                    Some((b.host.clone(), v.to_string()))
                })
                .collect();
            if seen.iter().any(|(_, v)| *v != seen[0].1) {
                let list: Vec<String> = seen.iter().map(|(h, v)| format!("{h} {v}")).collect();
                ev.push(format!(
                    "{label} differs between nodes: {}",
                    list.join(", ")
                ));
                st.push(Status::Fail);
            }
        }
    }
    Some(item(
        ItemId::PackageVersions,
        "Python packages in the serving container (vllm, torch, NCCL, NVSHMEM, DeepEP, FlashInfer, xgrammar)",
        combine(&st),
        ev,
        "Use the image that ships the required versions (the recipe's image) instead of upgrading single wheels in the container; print the versions inside the image to confirm.",
    ))
}
