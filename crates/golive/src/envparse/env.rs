//! Environment files (`env`, `/proc/PID/environ`) and which variables matter.

use std::collections::BTreeMap;

use super::*;

/// Parses `NAME=value` lines (also `export NAME=value`, `declare -x NAME="value"`,
/// `- NAME=value` YAML list items, NUL-separated `/proc/PID/environ`).
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    let text = normalize(text).replace('\0', "\n");
    let mut env = BTreeMap::new();
    for line in text.lines() {
        let mut l = line.trim();
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        for prefix in ["export ", "declare -x ", "- "] {
            if let Some(rest) = l.strip_prefix(prefix) {
                l = rest.trim();
            }
        }
        let Some((name, value)) = l.split_once('=') else {
            continue;
        };
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || name.starts_with(|c: char| c.is_ascii_digit())
        {
            continue;
        }
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        env.insert(name.to_string(), value.to_string());
    }
    env
}

/// Prefixes of environment variables that decide how vLLM runs (issue 3 list).
pub const RELEVANT_ENV_PREFIXES: &[&str] = &[
    "NCCL_",
    "UCX_",
    "VLLM_",
    "CUDA_",
    "NVIDIA_",
    "TORCH_",
    "GLOO_",
    "RAY_",
    "OMP_",
    "NVSHMEM_",
    "LD_LIBRARY_PATH",
];

/// True for the environment variables a bundle keeps.
pub fn is_relevant_env(name: &str) -> bool {
    RELEVANT_ENV_PREFIXES.iter().any(|p| name.starts_with(p))
}
