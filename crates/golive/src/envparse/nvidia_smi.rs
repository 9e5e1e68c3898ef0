//! `nvidia-smi`: the table, `--query-gpu` CSV and `topo -m`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::*;

/// One GPU row of the plain `nvidia-smi` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SmiGpu {
    /// The GPU's index.
    pub index: u32,
    /// Its name as printed (may be cut short by the table).
    pub name: String,
    /// Its PCI bus id, e.g. `00000000:18:00.0`.
    pub bus_id: String,
    /// Memory in use, MiB.
    pub memory_used_mib: Option<u64>,
    /// Memory in all, MiB.
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
    /// The GPU rows, in order.
    pub gpus: Vec<SmiGpu>,
    /// PIDs listed in the processes section.
    pub process_pids: Vec<u64>,
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
    /// `index`.
    pub index: Option<u32>,
    /// `name`, e.g. `NVIDIA B300 SXM6 AC`.
    pub name: Option<String>,
    /// `uuid`, e.g. `GPU-...`.
    pub uuid: Option<String>,
    /// `driver_version`: the host driver.
    pub driver_version: Option<String>,
    /// `memory.total`, MiB.
    pub memory_total_mib: Option<u64>,
    /// `memory.used`, MiB.
    pub memory_used_mib: Option<u64>,
    /// `pci.bus_id`.
    pub pci_bus_id: Option<String>,
    /// `compute_cap`, e.g. `10.0`.
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
    /// GPUs in the matrix.
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
