//! Parsers for the raw files of a bundle (nvidia-smi, topology, docker inspect,
//! launch command, env, lsmod, ibv_devinfo).
//!
//! Every parser takes text as found in the wild (CRLF, tabs, markdown quoting,
//! indentation, truncated copies) and returns what it could read; none fails.
//! Missing facts are `None`/empty, never guessed.

pub(crate) mod bundle;
mod config_file;
mod docker;
mod env;
mod ibv_devinfo;
mod ip_link;
pub(crate) mod launch;
mod lsmod;
mod nvidia_smi;
mod packages;
mod probes;

pub use docker::{parse_docker_inspect, DockerInfo};
pub use ibv_devinfo::{parse_ibv_devinfo, Hca, IbPort};
pub use ip_link::NetLink;
pub use lsmod::{parse_modules, Modules};
pub use nvidia_smi::{
    parse_nvidia_smi, parse_query_csv, parse_topology, QueryGpu, SmiGpu, SmiTable, Topology,
};
pub use probes::{parse_container_cuda_errors, ContainerCudaError};

pub(crate) use env::{is_relevant_env, parse_env};
pub(crate) use ip_link::parse_ip_link;
pub(crate) use packages::{find_package, parse_python_packages, KEY_PACKAGES};
pub(crate) use probes::{parse_nvcc, parse_proc_driver_version, parse_vllm_version};

pub use bundle::Bundle;
pub use launch::{launch_from_argv, parse_launch, Launch, LaunchArg};

/// Normalises line endings and strips a leading BOM.
pub fn normalize(text: &str) -> String {
    text.trim_start_matches('\u{feff}')
        .replace("\r\n", "\n")
        .replace('\r', "\n")
}

/// Dotted numeric version ("580.65.06", "13.0") as comparable parts.
pub fn version_parts(v: &str) -> Vec<u64> {
    v.trim()
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .map_while(|p| p.parse::<u64>().ok())
        .collect()
}

/// Compares two Python package versions by PEP 440: `0.11.0rc2` < `0.11.0` <
/// `0.11.0.post1`, `0.27` == `0.27.0`. Versions that are not PEP 440 (a vLLM dev build's
/// odd tag) are compared as dotted numbers.
pub fn cmp_pep440(a: &str, b: &str) -> std::cmp::Ordering {
    use std::str::FromStr;
    let parse = |v: &str| pep440_rs::Version::from_str(v.trim().trim_start_matches('v')).ok();
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => cmp_versions(a, b),
    }
}

/// Compares two dotted versions numerically; missing parts count as 0.
pub fn cmp_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (pa, pb) = (version_parts(a), version_parts(b));
    let n = pa.len().max(pb.len());
    for i in 0..n {
        let (x, y) = (
            pa.get(i).copied().unwrap_or(0),
            pb.get(i).copied().unwrap_or(0),
        );
        match x.cmp(&y) {
            std::cmp::Ordering::Equal => continue,
            o => return o,
        }
    }
    std::cmp::Ordering::Equal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(
            cmp_versions("580.65.06", "580.9"),
            std::cmp::Ordering::Greater
        );
        assert_eq!(cmp_versions("575.51.03", "580"), std::cmp::Ordering::Less);
        assert_eq!(cmp_versions("0.27.0", "0.27"), std::cmp::Ordering::Equal);
    }

    #[test]
    fn python_versions_order_pre_releases_before_the_release() {
        use std::cmp::Ordering::*;
        assert_eq!(cmp_pep440("0.11.0rc2", "0.11.0"), Less);
        assert_eq!(cmp_pep440("0.11.0", "0.11.0rc2"), Greater);
        assert_eq!(cmp_pep440("0.11.0.dev3", "0.11.0rc1"), Less);
        assert_eq!(cmp_pep440("0.11.0.post1", "0.11.0"), Greater);
        assert_eq!(cmp_pep440("0.27", "0.27.0"), Equal);
        assert_eq!(cmp_pep440("0.27.1+cu130", "0.27.0"), Greater);
    }

    #[test]
    fn r610_header_is_read() {
        let t = parse_nvidia_smi(
            "| NVIDIA-SMI 610.57.04              KMD Version: 610.57.04     CUDA UMD Version: 13.3     |\n",
        );
        assert_eq!(t.driver.as_deref(), Some("610.57.04"));
        assert_eq!(t.cuda_shown.as_deref(), Some("13.3"));
        assert!(t.r610_names);
    }

    #[test]
    fn modules_from_proc_modules() {
        let m = parse_modules(
            "nvidia_peermem 16384 0 - Live 0x0000000000000000\nib_core 434176 8 ib_uverbs,mlx5_ib, Live 0x0\n",
        );
        assert!(m.is_loaded("nvidia_peermem"));
        assert!(m.is_loaded("mlx5_ib"));
        assert!(!m.is_loaded("nvidia"));
    }

    #[test]
    fn env_lines() {
        let e = parse_env("export NCCL_DEBUG=INFO\nUCX_TLS=\"rc,cuda_copy\"\n# c\nnot a line\n");
        assert_eq!(e["NCCL_DEBUG"], "INFO");
        assert_eq!(e["UCX_TLS"], "rc,cuda_copy");
        assert_eq!(e.len(), 2);
    }
}
