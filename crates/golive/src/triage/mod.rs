//! `golive triage`: the first root-cause line of a failed deployment, from logs.
//!
//! Every input (file, directory, stdin, `.gz`) is scanned once by `scan`; rules are data
//! ([`RuleSet`], `rules.toml`). The first cause is chosen across files by the runbook order
//! (image/driver -> dependencies -> config -> memory -> prefix cache -> multi-node -> API
//! server), then by time (timestamps across files) and line order.

mod body;
mod classify;
mod clean;
mod decide;
mod decoded;
mod docker;
#[cfg(feature = "fuzz")]
mod fuzzing;
mod lifecycle;
mod line;
mod output;
mod phase;
mod prefilter;
mod prefix;
pub(crate) mod rules;
mod scan;
mod utf16;

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use decide::decide;
#[cfg(feature = "fuzz")]
pub(crate) use fuzzing::{fuzz_lines, fuzz_scan};
use scan::FileResult;

pub use lifecycle::{Ended, Outcome as ProcessOutcome, Reached};
pub use output::write_text;
pub use rules::{Rule, RuleKind, RuleSet, STRUCTURAL_ANCHORS};
pub use scan::MAX_LINE;

/// Failure classes (fixed vocabulary, used in JSON), in no particular order;
/// the runbook order that breaks ties lives in the triage engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Host driver: missing or mismatched NVIDIA driver, driver/runtime version, CUDA init.
    Driver,
    /// Container image or runtime: GPU passthrough, the NVIDIA container toolkit, resource limits
    /// (`/dev/shm`).
    Container,
    /// Python packages, wheels and kernels: failed imports, missing operators, an unsupported GPU
    /// architecture.
    Dependency,
    /// Engine arguments or model files: an invalid flag, a bad config, a damaged model.
    Config,
    /// Out of memory at startup (weights, profiling, CUDA graphs, KV cache), before the server
    /// served.
    OomStartup,
    /// Out of memory after the server served.
    OomRuntime,
    /// Out of memory on one rank or GPU while the others did not run out.
    OomTopology,
    /// Prefix cache (automatic prefix caching, SGLang's radix and hierarchical caches).
    PrefixCache,
    /// Multi-node and multi-GPU transport: NCCL, RDMA, NVLink, Ray placement, collective timeouts.
    Nccl,
    /// Tool calls, structured outputs and chat templates in the API server.
    ToolParser,
    /// A GPU fault at run time: illegal memory access, unspecified launch failure, Xid, ECC.
    GpuFault,
    /// An error inside the serving engine's own code that no deployment cause explains.
    Engine,
    /// A failure no rule gives a layer to (a lone consequence, a crash with no cause printed).
    Unknown,
}

impl Class {
    /// Runbook order: earlier layers explain failures of later ones.
    fn runbook_rank(self) -> u8 {
        match self {
            Class::Container | Class::Driver => 0,
            Class::Dependency => 1,
            Class::Config => 2,
            Class::OomStartup | Class::OomRuntime | Class::OomTopology | Class::GpuFault => 3,
            Class::PrefixCache => 4,
            Class::Nccl => 5,
            Class::ToolParser => 6,
            Class::Engine => 7,
            Class::Unknown => 8,
        }
    }

    /// The class as the JSON and the text report spell it (`oom_startup`).
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Driver => "driver",
            Class::Container => "container",
            Class::Dependency => "dependency",
            Class::Config => "config",
            Class::OomStartup => "oom_startup",
            Class::OomRuntime => "oom_runtime",
            Class::OomTopology => "oom_topology",
            Class::PrefixCache => "prefix_cache",
            Class::Nccl => "nccl",
            Class::ToolParser => "tool_parser",
            Class::GpuFault => "gpu_fault",
            Class::Engine => "engine",
            Class::Unknown => "unknown",
        }
    }

    /// Whether the class names a deployment cause (`engine` and `unknown` do not: teardown
    /// noise after a stop, a rank's failure of its own, fatal after a warning).
    pub fn explains(self) -> bool {
        !matches!(self, Class::Engine | Class::Unknown)
    }

    /// Whether the class is a layer that traceback frames name (the distributed layer, the
    /// KV cache) but that does not claim a code bug in its code: the interpreter's words for an
    /// unexpected value there (`code-python-error`) are the engine's bug, not a failed
    /// transport or a prefix-cache setting.
    pub(crate) fn yields_to_code_bug(self) -> bool {
        matches!(self, Class::Nccl | Class::PrefixCache)
    }

    /// Whether an error of this class during an orderly shutdown is still a cause: the hardware
    /// and memory fail whatever the process is doing; everything else is teardown noise then.
    pub(crate) fn outlives_shutdown(self) -> bool {
        self.is_oom() || matches!(self, Class::GpuFault | Class::Driver)
    }

    fn is_oom(self) -> bool {
        matches!(
            self,
            Class::OomStartup | Class::OomRuntime | Class::OomTopology
        )
    }
}

/// One matched line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The layer the failure belongs to.
    pub class: Class,
    /// The file it was found in (`-` for stdin).
    pub file: String,
    /// 1-based line number in that file.
    pub line: u64,
    /// The line without terminal codes and `\r`, cut at 2000 bytes (ending in `…`).
    pub text: String,
    /// Id of the rule that matched.
    pub rule: String,
    /// Why this line is the cause, in words.
    pub why: String,
    /// The single next check, in plain words.
    pub next_step: String,
    /// Rank, worker or node the line came from, when its prefix says so.
    pub rank: Option<String>,
    /// Lines before the cause (for people).
    #[serde(default)]
    pub context: Vec<String>,
    /// `cause`, `consequence` or `hint`.
    #[serde(default)]
    pub kind: String,
    /// How many times the same failure (same rule and message, timestamps and pids aside)
    /// occurred in this file, e.g. in a crash loop; `line` is the first occurrence.
    #[serde(default = "one")]
    pub count: u64,
    /// Line of the last occurrence, when `count` > 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_line: Option<u64>,
}

fn one() -> u64 {
    1
}

/// The result of a triage run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriageReport {
    /// Version of this JSON layout ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// How far each process got and how it ended, per input (outcome first).
    #[serde(default)]
    pub outcome: Vec<ProcessOutcome>,
    /// The first error that explains a bad end; none when every process came up and served,
    /// then stopped in order or still runs (whatever errors it survived).
    pub primary: Option<Finding>,
    /// Errors a process went on after (it loaded on, or the server served later): never the
    /// primary while a failure it did not get past exists.
    #[serde(default)]
    pub survived: Vec<Finding>,
    /// The other findings, once each, in input and line order (at most 25); empty when there is no
    /// primary.
    pub secondary: Vec<Finding>,
    /// Files read, with the number of lines in each.
    #[serde(default)]
    pub inputs: Vec<InputSummary>,
    /// Inputs skipped or read only in part (binary, empty, truncated `.gz`, over-long lines).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One input that was read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputSummary {
    /// The input as named (`-` for stdin).
    pub file: String,
    /// Lines read (a last line without a newline counts).
    pub lines: u64,
    /// Bytes read (of a `.gz`, after decompression).
    pub bytes: u64,
}

/// Options of the triage engine.
#[derive(Debug, Clone, Default)]
pub struct TriageOptions {
    /// Lines of context before the cause.
    pub context: usize,
    /// Extra rule files.
    pub rules: Vec<PathBuf>,
}

/// Version of the triage JSON: 2 added the class `gpu_fault`, 3 the class `engine`, 4
/// `outcome[]` and `survived[]` (outcome first: a survived error is never primary), 5 an
/// outcome of its own (`restarted_at`) for a run that crashed and was started again.
pub const SCHEMA_VERSION: u32 = 5;

/// At most this many secondary findings are reported.
const MAX_SECONDARY: usize = 25;

/// An input to read.
enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    fn name(&self) -> String {
        match self {
            Source::Stdin => "-".to_string(),
            Source::File(p) => p.display().to_string(),
        }
    }
}

/// Files inside a directory that are certainly not logs.
fn is_non_log_name(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.starts_with('.') {
        return true;
    }
    let ext = p
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    matches!(
        ext.as_str(),
        "png"
            | "jpg"
            | "jpeg"
            | "gif"
            | "pdf"
            | "zip"
            | "tar"
            | "tgz"
            | "xz"
            | "zst"
            | "bz2"
            | "so"
            | "bin"
            | "safetensors"
            | "pt"
            | "pth"
            | "whl"
            | "pyc"
            | "exe"
            | "o"
            | "a"
    )
}

fn expand(paths: &[PathBuf], notes: &mut Vec<String>) -> anyhow::Result<Vec<Source>> {
    let mut out = Vec::new();
    let mut stdin_seen = false;
    for p in paths {
        if p.as_os_str() == "-" {
            if !stdin_seen {
                out.push(Source::Stdin);
                stdin_seen = true;
            }
            continue;
        }
        let meta = std::fs::metadata(p).with_context(|| format!("cannot read {}", p.display()))?;
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = walkdir::WalkDir::new(p)
                .follow_links(true)
                .into_iter()
                .filter_map(|e| match e {
                    Ok(e) => Some(e),
                    Err(err) => {
                        notes.push(format!("skipped: {err}"));
                        None
                    }
                })
                .filter(|e| e.file_type().is_file())
                .map(|e| e.into_path())
                .collect();
            files.sort();
            let before = out.len();
            for f in files {
                if is_non_log_name(&f) {
                    notes.push(format!("skipped {}: not a log file", f.display()));
                } else {
                    out.push(Source::File(f));
                }
            }
            if out.len() == before {
                notes.push(format!("{}: no log files inside", p.display()));
            }
        } else {
            out.push(Source::File(p.clone()));
        }
    }
    Ok(out)
}

/// The input of one source; the scanner reads it on its own thread (the kernel's copy or the
/// decompression runs beside the scanning). UTF-16 (with its byte-order mark) and Docker
/// `json-file` records are decoded.
fn open(src: &Source) -> anyhow::Result<Box<dyn Read + Send>> {
    let raw = open_raw(src)?;
    utf16::decoded(raw)
        .and_then(docker::decoded)
        .with_context(|| format!("cannot read {}", src.name()))
}

/// The bytes of one source (a `.gz` decompressed).
fn open_raw(src: &Source) -> anyhow::Result<Box<dyn Read + Send>> {
    match src {
        Source::Stdin => Ok(Box::new(io::stdin())),
        Source::File(p) => {
            let f =
                std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            let gz = p.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"));
            if gz {
                Ok(Box::new(flate2::read::MultiGzDecoder::new(
                    io::BufReader::with_capacity(1 << 20, f),
                )))
            } else {
                Ok(Box::new(f))
            }
        }
    }
}

/// Triage files, directories or `-` (stdin) read together.
pub fn analyze_paths(paths: &[PathBuf], opts: &TriageOptions) -> crate::Result<TriageReport> {
    let rules = RuleSet::load(&opts.rules)?;
    let mut notes = Vec::new();
    let sources = expand(paths, &mut notes)?;
    let mut results: Vec<(String, FileResult)> = Vec::new();
    for src in &sources {
        let name = src.name();
        let reader = open(src)?;
        let res = match scan::scan_reader(&rules, reader, opts.context) {
            Ok(r) => r,
            Err(e) => {
                notes.push(format!("{name}: unreadable ({e}); skipped"));
                continue;
            }
        };
        if res.binary {
            notes.push(format!("{name}: binary data, not a text log; skipped"));
            continue;
        }
        if res.bytes == 0 {
            notes.push(format!("{name}: empty"));
        }
        for n in &res.notes {
            notes.push(format!("{name}: {n}"));
        }
        results.push((name, res));
    }
    if results.is_empty() && !sources.is_empty() {
        crate::error::bail_input!(
            "no readable log among the inputs: {}",
            if notes.is_empty() {
                "nothing to read".to_string()
            } else {
                notes.join("; ")
            }
        );
    }
    if sources.is_empty() {
        crate::error::bail_input!("no log files to read: {}", notes.join("; "));
    }
    Ok(decide(&rules, results, notes))
}

/// Triage of one log held in memory, with rules already loaded (for tools that triage many
/// small logs, e.g. the coverage measurement over an engine's own messages).
pub fn analyze_text(rules: &RuleSet, name: &str, text: &str) -> TriageReport {
    match scan::scan_slice(rules, text.as_bytes(), 0) {
        Ok(res) => decide(rules, vec![(name.to_string(), res)], Vec::new()),
        Err(e) => TriageReport {
            schema_version: SCHEMA_VERSION,
            notes: vec![format!("{name}: unreadable ({e})")],
            ..Default::default()
        },
    }
}
