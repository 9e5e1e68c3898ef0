//! The one-line probes: vLLM version, `/proc/driver/nvidia/version`, container CUDA errors, `nvcc`.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::*;

static VLLM_VERSION_RES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"vLLM API server version\s+v?(\d+\.\d+[0-9A-Za-z.+\-]*)",
        r"Initializing an? (?:V\d )?LLM engine \(v(\d+\.\d+[0-9A-Za-z.+\-]*)\)",
        r"█\s+version\s+v?(\d+\.\d+[0-9A-Za-z.+\-]*)",
        r"(?m)^\s*(?:vllm\s+)?v?(\d+\.\d+\.\d+[0-9A-Za-z.+\-]*)\s*$",
        r"(?i)vllm[ =:]+v?(\d+\.\d+\.\d+[0-9A-Za-z.+\-]*)",
    ]
    .iter()
    .map(|r| Regex::new(r).unwrap())
    .collect()
});

/// The vLLM version from `vllm --version`, a Python print or a server log banner.
pub fn parse_vllm_version(text: &str) -> Option<String> {
    let text = normalize(text);
    VLLM_VERSION_RES
        .iter()
        .find_map(|re| re.captures(&text).map(|c| c[1].to_string()))
}

static PROC_DRIVER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)").unwrap());

/// The driver version from `/proc/driver/nvidia/version`.
pub fn parse_proc_driver_version(text: &str) -> Option<String> {
    PROC_DRIVER_RE.captures(text).map(|c| c[1].to_string())
}

/// An nvidia-container-cli refusal: the image needs a newer CUDA than the driver has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerCudaError {
    /// 1-based line.
    pub line: usize,
    /// The CUDA version the image requires, e.g. `13.0`.
    pub required_cuda: String,
    /// The line, trimmed to 300 characters.
    pub text: String,
}

static UNSATISFIED_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"unsatisfied condition:\s*cuda\s*>=\s*(\d+(?:\.\d+)*)").unwrap());

/// Finds nvidia-container-cli `requirement error: unsatisfied condition: cuda>=X` lines.
pub fn parse_container_cuda_errors(text: &str) -> Vec<ContainerCudaError> {
    normalize(text)
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            UNSATISFIED_RE.captures(l).map(|c| ContainerCudaError {
                line: i + 1,
                required_cuda: c[1].to_string(),
                text: l.trim().chars().take(300).collect(),
            })
        })
        .collect()
}

static NVCC_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"release\s+(\d+\.\d+)").unwrap());

/// The local CUDA toolkit version from `nvcc --version`.
pub fn parse_nvcc(text: &str) -> Option<String> {
    NVCC_RE.captures(text).map(|c| c[1].to_string())
}
