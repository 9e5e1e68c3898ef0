//! The on-disk format of an evidence bundle, shared by the writer (`collect`) and the
//! reader (`envparse::bundle`): `DIR/manifest.json` ([`Manifest`]) and the raw files
//! under `DIR/raw/` ([`names`]). Secrets never reach it: everything written is passed
//! through [`crate::redact`] first.

use serde::{Deserialize, Serialize};

/// The manifest's file name inside a bundle.
pub const MANIFEST: &str = "manifest.json";

/// The folder of the raw probe outputs inside a bundle.
pub const RAW_DIR: &str = "raw";

/// Contract names of the raw files (issue 3); `check` and `diff` read these.
pub mod names {
    /// `nvidia-smi` on the host.
    pub const NVIDIA_SMI: &str = "nvidia-smi.txt";
    /// `nvidia-smi --query-gpu=... --format=csv`: one GPU a row.
    pub const NVIDIA_SMI_QUERY: &str = "nvidia-smi-query.csv";
    /// `nvidia-smi topo -m`: the GPU and NIC interconnect matrix.
    pub const NVIDIA_SMI_TOPO: &str = "nvidia-smi-topo.txt";
    /// `nvidia-smi --query-compute-apps=... --format=csv`: processes on the GPUs.
    pub const NVIDIA_SMI_APPS: &str = "nvidia-smi-apps.csv";
    /// `docker inspect` of the serving container.
    pub const DOCKER_INSPECT: &str = "docker-inspect.json";
    /// `docker image inspect` of its image.
    pub const DOCKER_IMAGE_INSPECT: &str = "docker-image-inspect.json";
    /// The serving process's command line, shell-quoted and redacted.
    pub const CMDLINE: &str = "cmdline.txt";
    /// The serving process's environment, filtered and redacted, one `NAME=value` a line.
    pub const ENV: &str = "env.txt";
    /// `/proc/modules`: the loaded kernel modules.
    pub const LSMOD: &str = "lsmod.txt";
    /// `ibv_devinfo`: the RDMA devices.
    pub const IBV_DEVINFO: &str = "ibv_devinfo.txt";
    /// `ip -br link`: the network interfaces.
    pub const IP_LINK: &str = "ip-link.txt";
    /// vLLM's version, from inside the container or the host.
    pub const VLLM_VERSION: &str = "vllm-version.txt";
    /// The server's log (`--log`, `docker logs`, `kubectl logs`).
    pub const STARTUP_LOG: &str = "startup.log";
    /// Extra files golive collect writes.
    pub const CONTAINER_NVIDIA_SMI: &str = "container-nvidia-smi.txt";
    /// `nvidia-smi` inside the container or pod.
    pub const PROBE_IMAGE: &str = "probe-image.txt";
    /// The image run once with `--gpus all` and `nvidia-smi`: whether it sees the GPUs.
    pub const CONTAINER_CUDA: &str = "container-cuda.txt";
    /// The CUDA runtime inside the container (`$CUDA_VERSION`, `version.json`).
    pub const DRIVER_VERSION: &str = "driver-version.txt";
    /// `/proc/driver/nvidia/version`.
    pub const UNAME: &str = "uname.txt";
    /// `uname -a`.
    pub const NVCC: &str = "nvcc.txt";
    /// `nvcc --version` on the host.
    pub const POD_SPEC: &str = "pod-spec.yaml";
    /// The `vllm serve --config FILE` contents (redacted).
    pub const VLLM_CONFIG: &str = "vllm-config.yaml";
    /// Python distributions inside the serving container, `pip list --format json` shape.
    pub const PYTHON_PACKAGES: &str = "python-packages.json";
    /// `kubectl get pod -o json` (containerStatuses[].lastState).
    pub const POD_JSON: &str = "pod.json";
    /// `kubectl logs --previous`: the crashed container's log.
    pub const POD_PREVIOUS_LOG: &str = "pod-previous.log";
    /// `kubectl get events --field-selector involvedObject.name=POD -o json`.
    pub const POD_EVENTS: &str = "pod-events.json";
}

/// One probe as recorded in the manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeRecord {
    /// What the probe is, in words (`nvidia-smi topo`, `container env`).
    pub name: String,
    /// The command line or file read (`read /proc/modules`).
    pub command: String,
    /// False when the tool or file does not exist on this host.
    pub available: bool,
    /// Exit code (0 for a file read); `None`: not run, killed, or a file that could not be read.
    pub exit_status: Option<i32>,
    /// How long it ran, ms.
    pub duration_ms: u64,
    /// Still running at the deadline, and killed.
    pub timed_out: bool,
    /// File under raw/ the output went to.
    pub output: Option<String>,
    /// Why it did not give a result, in words (first line of stderr, error).
    pub error: Option<String>,
}

impl ProbeRecord {
    /// It ran, exited 0 and was not killed.
    pub fn ok(&self) -> bool {
        self.available && !self.timed_out && self.exit_status == Some(0)
    }
    /// One word for people: ok, unavailable, failed, timed out.
    pub fn outcome(&self) -> String {
        if !self.available {
            "unavailable".into()
        } else if self.timed_out {
            "timed out".into()
        } else if self.exit_status == Some(0) {
            "ok".into()
        } else {
            format!(
                "failed (exit {})",
                self.exit_status.map_or("?".into(), |s| s.to_string())
            )
        }
    }
}

/// `manifest.json` of a bundle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    /// The report schema version ([`crate::report::SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// Always `golive`.
    pub tool: String,
    /// The golive version that wrote it.
    pub tool_version: String,
    /// The git commit golive was built from.
    pub tool_commit: String,
    /// The name of the host it was collected on (unusual characters as `_`).
    pub host: String,
    /// UTC, RFC 3339.
    pub time: String,
    /// The collect options (redacted).
    pub options: Vec<String>,
    /// PID of the serving process read (never compared by diff).
    pub serving_pid: Option<u32>,
    /// Every probe, in the order they ran.
    pub probes: Vec<ProbeRecord>,
}
