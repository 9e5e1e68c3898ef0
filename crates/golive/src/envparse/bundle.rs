//! A bundle: a directory with `manifest.json` (optional) and raw files under
//! `raw/` (all optional). Reading re-parses the raw files every time, so a
//! bundle assembled by hand is as good as one written by `golive collect`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::*;
pub use crate::bundle_format::names;
use crate::bundle_format::{Manifest, MANIFEST, RAW_DIR};

/// Everything read from one bundle.
#[derive(Debug, Clone, Default)]
pub struct Bundle {
    /// The bundle directory it was read from.
    pub dir: PathBuf,
    /// `manifest.json`; `None`: absent or not golive's.
    pub manifest: Option<Manifest>,
    /// The host it was collected on: the manifest's, else the directory's name.
    pub host: String,
    /// `nvidia-smi` on the host.
    pub smi: Option<SmiTable>,
    /// `nvidia-smi --query-gpu`: one entry per GPU.
    pub query: Vec<QueryGpu>,
    /// `nvidia-smi topo -m`; `None`: absent or without GPUs.
    pub topo: Option<Topology>,
    /// `docker inspect` of the serving container.
    pub container: Option<DockerInfo>,
    /// `docker image inspect` of its image.
    pub image: Option<DockerInfo>,
    /// The running flags: the launch command merged with its `--config` file.
    pub launch: Option<Launch>,
    /// The flags `raw/vllm-config.yaml` (the `--config FILE`) sets.
    pub config_args: Vec<LaunchArg>,
    /// Why `raw/vllm-config.yaml` could not be read as flags.
    pub config_error: Option<String>,
    /// `raw/env.txt` as written.
    pub env_file: BTreeMap<String, String>,
    /// `/proc/modules`: the loaded kernel modules.
    pub modules: Option<Modules>,
    /// `ibv_devinfo`: the RDMA devices.
    pub ibv: Option<Vec<Hca>>,
    /// `ip -br link`: the network interfaces.
    pub links: Option<Vec<NetLink>>,
    /// The vLLM version from `raw/vllm-version.txt`.
    pub vllm_version_file: Option<String>,
    /// Path of the server's log, when the bundle has one.
    pub startup_log: Option<PathBuf>,
    /// The server's log.
    pub startup_log_text: Option<String>,
    /// `nvidia-smi` as seen inside the container (docker exec or --probe-image).
    pub container_smi: Option<SmiTable>,
    /// CUDA errors in the container's `nvidia-smi`, the image probe or the log.
    pub container_cuda_errors: Vec<ContainerCudaError>,
    /// `raw/container-cuda.txt`: the container's CUDA runtime, as written.
    pub container_cuda_text: Option<String>,
    /// The driver version from `/proc/driver/nvidia/version`.
    pub proc_driver: Option<String>,
    /// `uname -a`.
    pub uname: Option<String>,
    /// The local CUDA toolkit version from `nvcc --version`.
    pub nvcc: Option<String>,
    /// Python distributions inside the serving container (normalised name → version).
    pub python_packages: Option<BTreeMap<String, String>>,
    /// `kubectl get pod -o json` of the serving pod.
    pub pod: Option<serde_json::Value>,
    /// The pod's events (`kubectl get events -o json`).
    pub pod_events: Option<serde_json::Value>,
    /// `kubectl logs --previous`: the log of the container before its last restart.
    pub pod_previous_log: Option<String>,
    /// Raw files present (names under raw/).
    pub files: Vec<String>,
}

fn read_opt(dir: &Path, name: &str) -> Option<String> {
    let bytes = crate::input::read_head(&dir.join(name), crate::input::max_input()).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

impl Bundle {
    /// Reads a bundle directory. A directory without `raw/` is read as if it were
    /// the `raw/` folder itself (people often hand over just the files).
    pub fn load(dir: &Path) -> anyhow::Result<Bundle> {
        anyhow::ensure!(dir.is_dir(), "{} is not a bundle directory", dir.display());
        let raw = if dir.join(RAW_DIR).is_dir() {
            dir.join(RAW_DIR)
        } else {
            dir.to_path_buf()
        };
        // The raw files are the contract; a foreign or damaged manifest only loses the host name.
        let manifest = crate::input::read_text(dir.join(MANIFEST))
            .ok()
            .and_then(|t| serde_json::from_str::<Manifest>(&t).ok());
        let mut files: Vec<String> = std::fs::read_dir(&raw)
            .with_context(|| format!("cannot read {}", raw.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let host = manifest
            .as_ref()
            .map(|m| m.host.clone())
            .unwrap_or_else(|| {
                let name = dir
                    .canonicalize()
                    .ok()
                    .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .unwrap_or_else(|| dir.display().to_string());
                // "<host>-<UTC timestamp>" → host.
                match name.rsplit_once('-') {
                    Some((h, ts)) if ts.len() >= 8 && ts.starts_with("20") && ts.ends_with('Z') => {
                        h.to_string()
                    }
                    _ => name,
                }
            });
        let r = |n: &str| read_opt(&raw, n);
        let container = r(names::DOCKER_INSPECT).map(|t| parse_docker_inspect(&t));
        let image = r(names::DOCKER_IMAGE_INSPECT).map(|t| parse_docker_inspect(&t));
        let mut launch = r(names::CMDLINE).and_then(|t| launch::parse_launch(&t));
        if launch.is_none() {
            launch = container
                .as_ref()
                .and_then(|c| {
                    let mut argv: Vec<String> = c.path.iter().cloned().collect();
                    argv.extend(c.args.iter().cloned());
                    launch::launch_from_argv(&argv)
                })
                .or_else(|| {
                    r(names::POD_SPEC).and_then(|t| launch::parse_launch(&pod_spec_command(&t)))
                });
        }
        let (config_args, config_error) = match r(names::VLLM_CONFIG) {
            Some(text) => match config_file::parse_config_file(&text) {
                Ok(args) => (args, None),
                Err(e) => (Vec::new(), Some(format!("{e:#}"))),
            },
            None => (Vec::new(), None),
        };
        if let Some(l) = launch.as_mut() {
            config_file::merge_config(l, &config_args);
        }
        let startup_log_text = r(names::STARTUP_LOG);
        let mut container_cuda_errors = Vec::new();
        let mut container_smi = None;
        for name in [names::CONTAINER_NVIDIA_SMI, names::PROBE_IMAGE] {
            if let Some(t) = r(name) {
                container_cuda_errors.extend(parse_container_cuda_errors(&t));
                let smi = parse_nvidia_smi(&t);
                if container_smi.is_none() && (smi.driver.is_some() || !smi.gpus.is_empty()) {
                    container_smi = Some(smi);
                }
            }
        }
        if let Some(log) = &startup_log_text {
            container_cuda_errors.extend(parse_container_cuda_errors(log));
        }
        Ok(Bundle {
            dir: dir.to_path_buf(),
            manifest,
            host,
            smi: r(names::NVIDIA_SMI).map(|t| parse_nvidia_smi(&t)),
            query: r(names::NVIDIA_SMI_QUERY)
                .map(|t| parse_query_csv(&t))
                .unwrap_or_default(),
            topo: r(names::NVIDIA_SMI_TOPO)
                .map(|t| parse_topology(&t))
                .filter(|t| t.gpu_count() > 0),
            container,
            image,
            launch,
            config_args,
            config_error,
            env_file: r(names::ENV).map(|t| parse_env(&t)).unwrap_or_default(),
            modules: r(names::LSMOD).map(|t| parse_modules(&t)),
            ibv: r(names::IBV_DEVINFO).map(|t| parse_ibv_devinfo(&t)),
            links: r(names::IP_LINK).map(|t| parse_ip_link(&t)),
            vllm_version_file: r(names::VLLM_VERSION).and_then(|t| parse_vllm_version(&t)),
            startup_log: startup_log_text
                .as_ref()
                .map(|_| raw.join(names::STARTUP_LOG)),
            startup_log_text,
            container_smi,
            container_cuda_errors,
            container_cuda_text: r(names::CONTAINER_CUDA),
            proc_driver: r(names::DRIVER_VERSION).and_then(|t| parse_proc_driver_version(&t)),
            uname: r(names::UNAME)
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty()),
            nvcc: r(names::NVCC).and_then(|t| parse_nvcc(&t)),
            python_packages: r(names::PYTHON_PACKAGES).and_then(|t| parse_python_packages(&t)),
            pod: r(names::POD_JSON).and_then(|t| serde_json::from_str(&t).ok()),
            pod_events: r(names::POD_EVENTS).and_then(|t| serde_json::from_str(&t).ok()),
            pod_previous_log: r(names::POD_PREVIOUS_LOG),
            files,
        })
    }

    /// The host driver version and the line it was read from (the `Driver Version`,
    /// never the `CUDA Version` header).
    pub fn driver(&self) -> Option<(String, String)> {
        if let Some(smi) = &self.smi {
            if let Some(d) = &smi.driver {
                let line = smi
                    .driver_line
                    .clone()
                    .unwrap_or_else(|| format!("Driver Version: {d}"));
                return Some((d.clone(), format!("nvidia-smi.txt: {line}")));
            }
        }
        if let Some(d) = self.query.iter().find_map(|g| g.driver_version.clone()) {
            return Some((
                d.clone(),
                format!("nvidia-smi-query.csv: driver_version {d}"),
            ));
        }
        if let Some(d) = &self.proc_driver {
            return Some((d.clone(), format!("driver-version.txt: Kernel Module {d}")));
        }
        // A container's nvidia-smi reports the host's kernel driver too.
        if let Some(smi) = &self.container_smi {
            if let Some(d) = &smi.driver {
                let line = smi
                    .driver_line
                    .clone()
                    .unwrap_or_else(|| format!("Driver Version: {d}"));
                return Some((d.clone(), format!("container nvidia-smi: {line}")));
            }
        }
        None
    }

    /// GPU names seen on the host (table, else query CSV, else topology labels).
    pub fn host_gpus(&self) -> Vec<String> {
        if let Some(smi) = self.smi.as_ref().filter(|s| !s.gpus.is_empty()) {
            return smi.gpus.iter().map(|g| g.name.clone()).collect();
        }
        if !self.query.is_empty() {
            return self
                .query
                .iter()
                .map(|g| g.name.clone().unwrap_or_default())
                .collect();
        }
        self.topo
            .as_ref()
            .map(|t| t.gpus.clone())
            .unwrap_or_default()
    }

    /// All relevant environment of the serving process: env.txt, the launch command's
    /// env and the container's env, filtered to the relevant prefixes.
    pub fn relevant_env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        if let Some(c) = &self.container {
            env.extend(c.env.clone());
        }
        if let Some(l) = &self.launch {
            env.extend(l.env.clone());
        }
        env.extend(self.env_file.clone());
        env.retain(|k, _| is_relevant_env(k));
        for (k, v) in env.iter_mut() {
            *v = crate::redact::redact_pair(k, v);
        }
        env
    }

    /// GPUs the serving process can use: the container's view first, then the host's,
    /// restricted by CUDA_VISIBLE_DEVICES. Returns the count and where it came from.
    pub fn visible_gpus(&self) -> Option<(usize, String)> {
        let (mut n, mut source) =
            if let Some(c) = self.container_smi.as_ref().filter(|s| !s.gpus.is_empty()) {
                (c.gpus.len(), "container nvidia-smi".to_string())
            } else if let Some(s) = self.smi.as_ref().filter(|s| !s.gpus.is_empty()) {
                (s.gpus.len(), "host nvidia-smi".to_string())
            } else if !self.query.is_empty() {
                (self.query.len(), "nvidia-smi-query.csv".to_string())
            } else if let Some(t) = &self.topo {
                (t.gpu_count(), "nvidia-smi topo -m".to_string())
            } else {
                return None;
            };
        if let Some(cvd) = self.relevant_env().get("CUDA_VISIBLE_DEVICES") {
            let listed = cvd.split(',').filter(|s| !s.trim().is_empty()).count();
            if listed < n {
                n = listed;
                source.push_str(&format!(", CUDA_VISIBLE_DEVICES={cvd}"));
            }
        }
        Some((n, source))
    }

    /// The image reference (tag) and digest, from inspect files or the launch command.
    pub fn image_ref(&self) -> Option<String> {
        self.container
            .as_ref()
            .and_then(|c| c.image_ref.clone())
            .or_else(|| {
                self.image
                    .as_ref()
                    .and_then(|i| i.repo_tags.first().cloned())
            })
            .or_else(|| self.launch.as_ref().and_then(|l| l.image.clone()))
    }
    /// The image digest (`sha256:...`): from the image, the container, or a `@digest` reference.
    pub fn image_digest(&self) -> Option<String> {
        self.image
            .as_ref()
            .and_then(|i| i.digest())
            .or_else(|| self.container.as_ref().and_then(|c| c.digest()))
            .or_else(|| {
                self.image_ref()
                    .and_then(|r| r.split_once('@').map(|(_, d)| d.to_string()))
            })
    }

    /// The vLLM version and where it was read.
    pub fn vllm_version(&self) -> Option<(String, String)> {
        if let Some(v) = &self.vllm_version_file {
            return Some((v.clone(), "vllm-version.txt".into()));
        }
        if let Some((_, v)) = self
            .python_packages
            .as_ref()
            .and_then(|p| find_package(p, "vllm"))
        {
            return Some((v.to_string(), "python-packages.json".into()));
        }
        let log = self.startup_log_text.as_ref()?;
        parse_vllm_version(log).map(|v| (v, "startup.log banner".into()))
    }

    /// True when any RDMA device or driver is visible on this host.
    pub fn rdma_evidence(&self) -> Option<String> {
        if let Some(ibv) = &self.ibv {
            let active: Vec<&str> = ibv
                .iter()
                .filter(|h| h.has_active_port())
                .map(|h| h.name.as_str())
                .collect();
            if !active.is_empty() {
                return Some(format!(
                    "ibv_devinfo: {} active ({})",
                    active.len(),
                    active.join(",")
                ));
            }
        }
        if let Some(m) = &self.modules {
            if m.is_loaded("mlx5_ib") {
                return Some("lsmod: mlx5_ib loaded".into());
            }
        }
        None
    }
    /// True when we looked for RDMA and found none (ibv_devinfo or lsmod present, empty).
    pub fn rdma_absent_evidence(&self) -> Option<String> {
        if self.rdma_evidence().is_some() {
            return None;
        }
        match (&self.ibv, &self.modules) {
            (Some(ibv), _) if ibv.is_empty() => Some("ibv_devinfo: no HCA".into()),
            (Some(_), _) => Some("ibv_devinfo: no active port".into()),
            (None, Some(_)) => Some("lsmod: no mlx5_ib".into()),
            _ => None,
        }
    }
}

#[cfg(feature = "fuzz")]
/// Fuzz entry: the text readers a bundle runs on its raw files.
#[doc(hidden)]
pub fn fuzz_texts(text: &str) {
    let cmd = pod_spec_command(text);
    let _ = launch::parse_launch(&cmd);
    let _ = parse_docker_inspect(text);
    let _ = parse_env(text);
}

/// The container command of a rendered pod spec (YAML), as one shell line.
fn pod_spec_command(text: &str) -> String {
    if crate::text::check_yaml_depth(text).is_err() {
        return String::new();
    }
    let Ok(value) = serde_norway::from_str::<serde_norway::Value>(text) else {
        return String::new();
    };
    let container = value
        .get("spec")
        .and_then(|s| s.get("containers"))
        .and_then(|c| c.as_sequence())
        .and_then(|c| c.first());
    let Some(c) = container else {
        return String::new();
    };
    let list = |k: &str| -> Vec<String> {
        c.get(k)
            .and_then(|v| v.as_sequence())
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut words = list("command");
    words.extend(list("args"));
    let mut env_lines = String::new();
    if let Some(env) = c.get("env").and_then(|e| e.as_sequence()) {
        for e in env {
            if let (Some(n), Some(v)) = (
                e.get("name").and_then(|n| n.as_str()),
                e.get("value").and_then(|v| v.as_str()),
            ) {
                env_lines.push_str(&format!(
                    "export {n}={}\n",
                    shlex::try_quote(v).unwrap_or_default()
                ));
            }
        }
    }
    // `sh -c "<script>"`: the script is the command.
    if words.len() >= 3 && (words[0].ends_with("sh")) && words[1] == "-c" {
        return format!("{env_lines}{}", words[2..].join("\n"));
    }
    format!(
        "{env_lines}{}",
        shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
    )
}
