//! Parsers for the raw files of a bundle (nvidia-smi, topology, docker inspect,
//! launch command, env, lsmod, ibv_devinfo).
//!
//! Every parser takes text as found in the wild (CRLF, tabs, markdown quoting,
//! indentation, truncated copies) and returns what it could read; none fails.
//! Missing facts are `None`/empty, never guessed.

pub mod bundle;
pub mod launch;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

pub use bundle::Bundle;
pub use launch::{Launch, LaunchArg};

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

/// The highest CUDA version (major, minor) a Linux driver branch supports natively,
/// from NVIDIA's CUDA compatibility table. Branches newer than the table return the
/// newest known entry (a lower bound).
pub fn native_cuda_for_driver(driver: &str) -> Option<(u32, u32)> {
    // (minimum driver, CUDA) — CUDA toolkit release notes, table 3 (Linux, GA).
    const TABLE: &[(&str, (u32, u32))] = &[
        ("450.36.06", (11, 0)),
        ("455.23", (11, 1)),
        ("460.27.03", (11, 2)),
        ("465.19.01", (11, 3)),
        ("470.42.01", (11, 4)),
        ("495.29.05", (11, 5)),
        ("510.39.01", (11, 6)),
        ("515.43.04", (11, 7)),
        ("520.61.05", (11, 8)),
        ("525.60.13", (12, 0)),
        ("530.30.02", (12, 1)),
        ("535.54.03", (12, 2)),
        ("545.23.06", (12, 3)),
        ("550.54.14", (12, 4)),
        ("555.42.02", (12, 5)),
        ("560.28.03", (12, 6)),
        ("565.57.01", (12, 7)),
        ("570.26", (12, 8)),
        ("575.51.03", (12, 9)),
        ("580.65.06", (13, 0)),
        ("590.44.01", (13, 1)),
        ("595", (13, 2)),
        ("610", (13, 3)),
    ];
    if version_parts(driver).is_empty() {
        return None;
    }
    let mut best = None;
    for (min, cuda) in TABLE {
        if cmp_versions(driver, min) != std::cmp::Ordering::Less {
            best = Some(*cuda);
        } else {
            // Same branch, below its GA build: still that branch's family at best
            // the previous CUDA; keep the previous entry.
            break;
        }
    }
    best
}

// ---------------------------------------------------------------- nvidia-smi

/// One GPU row of the plain `nvidia-smi` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmiGpu {
    pub index: u32,
    pub name: String,
    pub bus_id: String,
    pub memory_used_mib: Option<u64>,
    pub memory_total_mib: Option<u64>,
}

/// The plain `nvidia-smi` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmiTable {
    /// The `NVIDIA-SMI x` tool version (can differ from the driver after an upgrade).
    pub smi_version: Option<String>,
    /// `Driver Version:` (or `KMD Version:` from R610 on): the host driver.
    pub driver: Option<String>,
    /// The exact header line the driver was read from.
    pub driver_line: Option<String>,
    /// `CUDA Version:` (or `CUDA UMD Version:`): the highest CUDA the user-space
    /// driver libraries accept — with forward-compatibility libraries in a
    /// container this exceeds what the kernel driver supports natively.
    pub cuda_shown: Option<String>,
    /// True when the header used the R610 names (`KMD Version`, `CUDA UMD Version`).
    pub r610_names: bool,
    pub gpus: Vec<SmiGpu>,
    /// PIDs listed in the processes section.
    pub process_pids: Vec<u64>,
}

impl SmiTable {
    /// True when the CUDA version in the header exceeds the driver's native CUDA
    /// (forward-compatibility libraries): the driver, not the header, decides.
    pub fn cuda_header_exceeds_native(&self) -> Option<((u32, u32), (u32, u32))> {
        let shown = self.cuda_shown.as_deref()?;
        let native = native_cuda_for_driver(self.driver.as_deref()?)?;
        let p = version_parts(shown);
        let shown = (*p.first()? as u32, p.get(1).copied().unwrap_or(0) as u32);
        (shown > native).then_some((shown, native))
    }
}

static SMI_VERSION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"NVIDIA-SMI\s+(\d+(?:\.\d+)+)").unwrap());
static DRIVER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(Driver|KMD)\s+Version:\s*(\d+(?:\.\d+)+)").unwrap());
static CUDA_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"CUDA\s+(UMD\s+)?Version:\s*(\d+(?:\.\d+)*)").unwrap());
static GPU_ROW_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off|N/A)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
        .unwrap()
});
static MEM_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB").unwrap());
static PROC_ROW_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\|\s+(\d+|N/A)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(\d+)\s+(C\+G|C|G)\s+").unwrap()
});

/// Parses the plain `nvidia-smi` output (any layout from R470 to R610).
pub fn parse_nvidia_smi(text: &str) -> SmiTable {
    let text = normalize(text);
    let mut t = SmiTable::default();
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_start_matches("> ").trim())
        .collect();
    for (i, line) in lines.iter().enumerate() {
        if t.smi_version.is_none() {
            if let Some(c) = SMI_VERSION_RE.captures(line) {
                t.smi_version = Some(c[1].to_string());
            }
        }
        if t.driver.is_none() {
            if let Some(c) = DRIVER_RE.captures(line) {
                t.driver = Some(c[2].to_string());
                t.driver_line = Some(
                    line.trim_matches(|ch: char| ch == '|' || ch.is_whitespace())
                        .to_string(),
                );
                t.r610_names = &c[1] == "KMD";
            }
        }
        if t.cuda_shown.is_none() {
            if let Some(c) = CUDA_RE.captures(line) {
                t.cuda_shown = Some(c[2].to_string());
                t.r610_names |= c.get(1).is_some();
            }
        }
        if let Some(c) = GPU_ROW_RE.captures(line) {
            let mut gpu = SmiGpu {
                index: c[1].parse().unwrap_or(0),
                name: c[2].trim().to_string(),
                bus_id: c[4].to_string(),
                ..Default::default()
            };
            if let Some(next) = lines.get(i + 1) {
                if let Some(m) = MEM_RE.captures(next) {
                    gpu.memory_used_mib = m[1].parse().ok();
                    gpu.memory_total_mib = m[2].parse().ok();
                }
            }
            t.gpus.push(gpu);
        } else if let Some(c) = PROC_ROW_RE.captures(line) {
            if let Ok(pid) = c[2].parse() {
                t.process_pids.push(pid);
            }
        }
    }
    t
}

// ------------------------------------------------------ nvidia-smi --query-gpu

/// One row of `nvidia-smi --query-gpu=... --format=csv`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryGpu {
    pub index: Option<u32>,
    pub name: Option<String>,
    pub uuid: Option<String>,
    pub driver_version: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub memory_used_mib: Option<u64>,
    pub pci_bus_id: Option<String>,
    pub compute_cap: Option<String>,
}

/// Parses the CSV of `--query-gpu` (with or without units, with or without a header
/// when the default field order of golive's own probe was used).
pub fn parse_query_csv(text: &str) -> Vec<QueryGpu> {
    let text = normalize(text);
    let mut lines = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let Some(first) = lines.next() else {
        return Vec::new();
    };
    let split = |l: &str| {
        l.split(',')
            .map(|c| c.trim().to_string())
            .collect::<Vec<_>>()
    };
    let default_header = "index, name, uuid, driver_version, memory.total [MiB], memory.used [MiB], memory.free [MiB], pci.bus_id";
    let (header, first_data) = if first.contains("name")
        || first.contains("driver_version")
        || first.contains("index") && !first.starts_with(|c: char| c.is_ascii_digit())
    {
        (split(first), None)
    } else {
        (split(default_header), Some(first))
    };
    let keys: Vec<String> = header
        .iter()
        .map(|h| {
            h.split('[')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    let num = |v: &str| {
        v.split_whitespace()
            .next()
            .and_then(|n| n.parse::<f64>().ok())
            .map(|f| f as u64)
    };
    first_data
        .into_iter()
        .chain(lines)
        .filter_map(|line| {
            let cells = split(line);
            if cells.len() < 2 {
                return None;
            }
            let mut g = QueryGpu::default();
            for (k, v) in keys.iter().zip(cells.iter()) {
                let v = v.as_str();
                match k.as_str() {
                    "index" => g.index = v.parse().ok(),
                    "name" | "gpu_name" => g.name = Some(v.to_string()),
                    "uuid" | "gpu_uuid" => g.uuid = Some(v.to_string()),
                    "driver_version" => g.driver_version = Some(v.to_string()),
                    "memory.total" => g.memory_total_mib = num(v),
                    "memory.used" => g.memory_used_mib = num(v),
                    "pci.bus_id" | "gpu_bus_id" => g.pci_bus_id = Some(v.to_string()),
                    "compute_cap" => g.compute_cap = Some(v.to_string()),
                    _ => {}
                }
            }
            (g.name.is_some() || g.driver_version.is_some()).then_some(g)
        })
        .collect()
}

// ------------------------------------------------------------ nvidia-smi topo

/// `nvidia-smi topo -m`: the connection matrix between GPUs and NICs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// GPU labels in order (`GPU0`...).
    pub gpus: Vec<String>,
    /// NIC labels in order, with the legend's device names when present (`mlx5_0`).
    pub nics: Vec<String>,
    /// `links[i][j]`: connection between GPU i and column j (GPUs first, then NICs).
    pub links: Vec<Vec<String>>,
    /// True when rows or the header are missing (truncated copy).
    pub partial: bool,
}

static TOPO_CELL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(X|NV\d+|SYS|NODE|PHB|PXB|PIX|SOC)$").unwrap());
static TOPO_LABEL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(GPU|NIC|mlx\d+_\d+)(\d*)").unwrap());
static NIC_LEGEND_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*NIC(\d+):\s*(\S+)").unwrap());

impl Topology {
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }
    /// GPUs (indices) that have no NVLink to any other GPU.
    pub fn gpus_without_nvlink(&self) -> Vec<usize> {
        if self.gpus.len() < 2 {
            return Vec::new();
        }
        (0..self.links.len())
            .filter(|&i| {
                !self.links[i]
                    .iter()
                    .take(self.gpus.len())
                    .any(|c| c.starts_with("NV"))
            })
            .collect()
    }
    /// True when any GPU pair is connected over NVLink.
    pub fn has_nvlink(&self) -> bool {
        self.links
            .iter()
            .any(|r| r.iter().take(self.gpus.len()).any(|c| c.starts_with("NV")))
    }
    /// The NVLink bond width seen between GPUs (`NV18`), the most common one.
    pub fn nvlink_label(&self) -> Option<String> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &self.links {
            for c in r.iter().take(self.gpus.len()) {
                if c.starts_with("NV") {
                    *counts.entry(c.as_str()).or_default() += 1;
                }
            }
        }
        counts
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(k, _)| k.to_string())
    }
    /// GPUs with a NIC at most one PCIe switch away (PIX/PXB): GPUDirect RDMA friendly.
    pub fn gpus_with_close_nic(&self) -> usize {
        self.links
            .iter()
            .filter(|r| {
                r.iter()
                    .skip(self.gpus.len())
                    .any(|c| c == "PIX" || c == "PXB")
            })
            .count()
    }
    /// A one-line summary (for evidence and diffs).
    pub fn summary(&self) -> String {
        let nv = self.nvlink_label().unwrap_or_else(|| "no NVLink".into());
        let mut s = format!("{} GPUs ({nv}), {} NICs", self.gpus.len(), self.nics.len());
        let without = self.gpus_without_nvlink();
        if self.has_nvlink() && !without.is_empty() {
            let list: Vec<String> = without.iter().map(|i| format!("GPU{i}")).collect();
            s.push_str(&format!(", without NVLink: {}", list.join(",")));
        }
        if self.partial {
            s.push_str(" (partial copy)");
        }
        s
    }
}

/// Parses `nvidia-smi topo -m` (spaces or tabs, indented, header missing, columns
/// run together, truncated).
pub fn parse_topology(text: &str) -> Topology {
    let text = normalize(text);
    let mut header: Vec<String> = Vec::new();
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut legend: BTreeMap<usize, String> = BTreeMap::new();
    for raw in text.lines() {
        let line = raw.trim_start_matches("> ").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = NIC_LEGEND_RE.captures(line) {
            if let Ok(i) = c[1].parse() {
                legend.insert(i, c[2].to_string());
            }
            continue;
        }
        let mut tokens = line.split_whitespace();
        let Some(first) = tokens.next() else { continue };
        let is_row_label =
            (first.starts_with("GPU") || first.starts_with("NIC") || first.starts_with("mlx"))
                && first.len() > 3
                && first.chars().last().is_some_and(|c| c.is_ascii_digit());
        if is_row_label {
            let rest: Vec<&str> = tokens.collect();
            if rest.first().is_some_and(|t| TOPO_CELL_RE.is_match(t)) {
                let cells: Vec<String> = rest
                    .iter()
                    .take_while(|t| TOPO_CELL_RE.is_match(t))
                    .map(|t| t.to_string())
                    .collect();
                rows.push((first.to_string(), cells));
                continue;
            }
        }
        if header.is_empty() && line.contains("GPU0") {
            // Header: labels may run together ("NIC11NIC12"); stop before "CPU Affinity".
            let labels_part = line.split("CPU").next().unwrap_or(line);
            header = TOPO_LABEL_RE
                .find_iter(labels_part)
                .map(|m| m.as_str().to_string())
                .collect();
        }
    }
    let gpu_rows: Vec<&(String, Vec<String>)> =
        rows.iter().filter(|(l, _)| l.starts_with("GPU")).collect();
    let mut topo = Topology::default();
    let n_gpu = if !header.is_empty() {
        header.iter().filter(|h| h.starts_with("GPU")).count()
    } else {
        // No header: a column is a GPU column when some GPU row shows X or NV# there.
        let width = gpu_rows.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
        (0..width)
            .filter(|&j| {
                gpu_rows
                    .iter()
                    .any(|(_, c)| c.get(j).is_some_and(|v| v == "X" || v.starts_with("NV")))
            })
            .max()
            .map_or(gpu_rows.len(), |j| j + 1)
            .max(gpu_rows.len())
    };
    let width = if header.is_empty() {
        gpu_rows.iter().map(|(_, c)| c.len()).max().unwrap_or(0)
    } else {
        header.len()
    };
    let n_nic = width.saturating_sub(n_gpu);
    topo.gpus = (0..n_gpu).map(|i| format!("GPU{i}")).collect();
    topo.nics = (0..n_nic)
        .map(|i| legend.get(&i).cloned().unwrap_or_else(|| format!("NIC{i}")))
        .collect();
    topo.links = gpu_rows.iter().map(|(_, c)| c.clone()).collect();
    let nic_rows = rows.iter().filter(|(l, _)| !l.starts_with("GPU")).count();
    topo.partial = header.is_empty() || gpu_rows.len() < n_gpu || nic_rows < n_nic;
    topo
}

// ------------------------------------------------------------- docker inspect

/// What `docker inspect` / `docker image inspect` (full JSON, `--format` lines,
/// `jq` excerpts, truncated copies) says about the image and the container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DockerInfo {
    /// Container or image id.
    pub id: Option<String>,
    /// The image reference the container was created from (`Config.Image`).
    pub image_ref: Option<String>,
    /// The image id of a container (`Image`).
    pub image_id: Option<String>,
    pub repo_tags: Vec<String>,
    /// `name@sha256:...` entries.
    pub repo_digests: Vec<String>,
    /// Container entry: `Path` then `Args`.
    pub path: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub state: Option<String>,
    /// True when the text was not complete JSON and was read line by line.
    pub partial: bool,
}

impl DockerInfo {
    /// The `sha256:` digest of the image (from RepoDigests).
    pub fn digest(&self) -> Option<String> {
        self.repo_digests
            .iter()
            .find_map(|d| d.split_once('@').map(|(_, s)| s.to_string()))
    }
    /// The CUDA version the image was built for (`CUDA_VERSION`, else `NVIDIA_REQUIRE_CUDA`).
    pub fn image_cuda(&self) -> Option<String> {
        if let Some(v) = self.env.get("CUDA_VERSION") {
            return Some(v.clone());
        }
        let req = self.env.get("NVIDIA_REQUIRE_CUDA")?;
        REQUIRE_CUDA_RE.captures(req).map(|c| c[1].to_string())
    }
}

static REQUIRE_CUDA_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"cuda>=\s*(\d+(?:\.\d+)*)").unwrap());
static DIGEST_REF_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9][A-Za-z0-9._/:-]*@sha256:[0-9a-f]{64}").unwrap());
static JSON_STR_FIELD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""(Id|Image|Path|Status)"\s*:\s*"([^"]*)""#).unwrap());
static QUOTED_ENV_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([A-Za-z_][A-Za-z0-9_]*)=([^"]*)""#).unwrap());
static SHA_ID_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|\s)(sha256:[0-9a-f]{64})").unwrap());
static TAG_IN_BRACKETS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[([A-Za-z0-9][A-Za-z0-9._/-]*:[A-Za-z0-9._-]+)\]").unwrap());

fn env_from_list(list: &[serde_json::Value]) -> BTreeMap<String, String> {
    list.iter()
        .filter_map(|v| v.as_str())
        .filter_map(|s| s.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn strings(v: Option<&serde_json::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Parses docker inspect output of a container or an image, complete or not.
pub fn parse_docker_inspect(text: &str) -> DockerInfo {
    let text = normalize(text);
    // Quoted in a markdown issue: strip "> " from every line.
    let unquoted: String = text
        .lines()
        .map(|l| {
            l.strip_prefix("> ")
                .or_else(|| l.strip_prefix('>'))
                .unwrap_or(l)
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(unquoted.trim()) {
        let obj = match &value {
            serde_json::Value::Array(a) if a.iter().all(|v| v.is_string()) => {
                return DockerInfo {
                    env: env_from_list(a),
                    ..Default::default()
                };
            }
            serde_json::Value::Array(a) => a.first().cloned().unwrap_or_default(),
            other => other.clone(),
        };
        let mut info = DockerInfo {
            id: obj.get("Id").and_then(|v| v.as_str()).map(String::from),
            repo_tags: strings(obj.get("RepoTags")),
            repo_digests: strings(obj.get("RepoDigests")),
            path: obj.get("Path").and_then(|v| v.as_str()).map(String::from),
            args: strings(obj.get("Args")),
            state: obj
                .pointer("/State/Status")
                .and_then(|v| v.as_str())
                .map(String::from),
            ..Default::default()
        };
        if let Some(config) = obj.get("Config") {
            info.image_ref = config
                .get("Image")
                .and_then(|v| v.as_str())
                .map(String::from);
            if let Some(env) = config.get("Env").and_then(|v| v.as_array()) {
                info.env = env_from_list(env);
            }
        }
        if info.path.is_some() || obj.get("State").is_some() {
            // A container: "Image" is the image id.
            info.image_id = obj.get("Image").and_then(|v| v.as_str()).map(String::from);
        }
        return info;
    }
    // Not JSON (truncated, `--format` output): read what is recognisable.
    let mut info = DockerInfo {
        partial: true,
        ..Default::default()
    };
    for c in JSON_STR_FIELD_RE.captures_iter(&unquoted) {
        let v = c[2].to_string();
        match &c[1] {
            "Id" if info.id.is_none() => info.id = Some(v),
            "Image" => {
                if v.starts_with("sha256:") {
                    info.image_id.get_or_insert(v);
                } else {
                    info.image_ref.get_or_insert(v);
                }
            }
            "Path" if info.path.is_none() => info.path = Some(v),
            "Status" if info.state.is_none() => info.state = Some(v),
            _ => {}
        }
    }
    for m in DIGEST_REF_RE.find_iter(&unquoted) {
        let d = m.as_str().to_string();
        if !info.repo_digests.contains(&d) {
            info.repo_digests.push(d);
        }
    }
    // RepoTags: a JSON list block, or `[name:tag]` in a --format line.
    if let Some(start) = unquoted.find("\"RepoTags\"") {
        let block = &unquoted[start..];
        let end = block.find(']').unwrap_or(block.len());
        for q in block[..end].split('"').skip(3).step_by(2) {
            if q.contains(':') && !q.contains("sha256") {
                info.repo_tags.push(q.to_string());
            }
        }
    }
    for c in TAG_IN_BRACKETS_RE.captures_iter(&unquoted) {
        if !info.repo_tags.contains(&c[1].to_string()) {
            info.repo_tags.push(c[1].to_string());
        }
    }
    if info.id.is_none() {
        info.id = SHA_ID_RE.captures(&unquoted).map(|c| c[1].to_string());
    }
    // Args list of a container (complete lines only).
    if let Some(start) = unquoted.find("\"Args\"") {
        let block = &unquoted[start..];
        if let Some(end) = block.find(']') {
            info.args = block[..end]
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let l = l.trim().trim_end_matches(',');
                    l.strip_prefix('"')
                        .and_then(|l| l.strip_suffix('"'))
                        .map(String::from)
                })
                .collect();
        }
    }
    if let Some(start) = unquoted.find("\"Env\"") {
        for c in QUOTED_ENV_RE.captures_iter(&unquoted[start..]) {
            info.env.insert(c[1].to_string(), c[2].to_string());
        }
    }
    info
}

// ----------------------------------------------------------------- env files

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

// --------------------------------------------------------------------- lsmod

/// Kernel modules from `lsmod` or `/proc/modules` (also `lsmod | grep` excerpts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Modules {
    /// Modules listed in the first column.
    pub listed: BTreeSet<String>,
    /// Modules named only as users of a listed module ("Used by" column): they are
    /// loaded too, the excerpt just did not show their own line.
    pub referenced: BTreeSet<String>,
}

impl Modules {
    pub fn is_loaded(&self, name: &str) -> bool {
        self.listed.contains(name) || self.referenced.contains(name)
    }
    /// All loaded module names (listed or referenced).
    pub fn all(&self) -> BTreeSet<String> {
        self.listed.union(&self.referenced).cloned().collect()
    }
}

pub fn parse_modules(text: &str) -> Modules {
    let text = normalize(text);
    let mut m = Modules::default();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 3 || cols[0] == "Module" || cols[1].parse::<u64>().is_err() {
            continue;
        }
        m.listed.insert(cols[0].to_string());
        // lsmod: "name size count users"; /proc/modules: "name size count users state addr".
        if let Some(users) = cols.get(3) {
            for u in users
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty() && *u != "-")
            {
                if u.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    m.referenced.insert(u.to_string());
                }
            }
        }
    }
    m.referenced.retain(|r| !m.listed.contains(r));
    m
}

// --------------------------------------------------------------- ibv_devinfo

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbPort {
    pub port: u32,
    pub state: Option<String>,
    pub link_layer: Option<String>,
    pub active_mtu: Option<String>,
}

/// One HCA of `ibv_devinfo`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hca {
    pub name: String,
    pub transport: Option<String>,
    pub fw_ver: Option<String>,
    pub vendor_part_id: Option<String>,
    pub ports: Vec<IbPort>,
}

impl Hca {
    pub fn has_active_port(&self) -> bool {
        self.ports.iter().any(|p| {
            p.state
                .as_deref()
                .is_some_and(|s| s.starts_with("PORT_ACTIVE"))
        })
    }
}

pub fn parse_ibv_devinfo(text: &str) -> Vec<Hca> {
    let text = normalize(text);
    let mut out: Vec<Hca> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let Some((key, value)) = l.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        if key == "hca_id" {
            out.push(Hca {
                name: value,
                ..Default::default()
            });
            continue;
        }
        let Some(hca) = out.last_mut() else { continue };
        match key {
            "transport" => hca.transport = Some(value),
            "fw_ver" => hca.fw_ver = Some(value),
            "vendor_part_id" => hca.vendor_part_id = Some(value),
            "port" => hca.ports.push(IbPort {
                port: value.parse().unwrap_or(0),
                ..Default::default()
            }),
            "state" => {
                if let Some(p) = hca.ports.last_mut() {
                    p.state = Some(value);
                }
            }
            "link_layer" => {
                if let Some(p) = hca.ports.last_mut() {
                    p.link_layer = Some(value);
                }
            }
            "active_mtu" => {
                if let Some(p) = hca.ports.last_mut() {
                    p.active_mtu = Some(value);
                }
            }
            _ => {}
        }
    }
    out
}

// --------------------------------------------------------------- ip -br link

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetLink {
    pub name: String,
    pub state: String,
}

/// Parses `ip -br link` (`name state mac <flags>`).
pub fn parse_ip_link(text: &str) -> Vec<NetLink> {
    normalize(text)
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let name = cols.next()?.split('@').next()?.to_string();
            let state = cols.next()?.to_string();
            Some(NetLink { name, state })
        })
        .collect()
}

// ------------------------------------------------------------ other probes

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
    pub required_cuda: String,
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
        assert_eq!(native_cuda_for_driver("535.129.03"), Some((12, 2)));
        assert_eq!(native_cuda_for_driver("580.95.05"), Some((13, 0)));
        assert_eq!(native_cuda_for_driver("580.20"), Some((12, 9)));
        assert_eq!(native_cuda_for_driver("garbage"), None);
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
