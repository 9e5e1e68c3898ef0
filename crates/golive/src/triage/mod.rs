//! `golive triage`: the first root-cause line of a failed deployment, from logs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Failure classes (fixed vocabulary, used in JSON), in no particular order;
/// the runbook order that breaks ties lives in the triage engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Driver,
    Container,
    Dependency,
    Config,
    OomStartup,
    OomRuntime,
    OomTopology,
    PrefixCache,
    Nccl,
    ToolParser,
    Unknown,
}

/// One matched line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub class: Class,
    /// The file it was found in (`-` for stdin).
    pub file: String,
    /// 1-based line number in that file.
    pub line: u64,
    pub text: String,
    /// Id of the rule that matched.
    pub rule: String,
    /// Why this line is the cause, in words.
    pub why: String,
    pub next_step: String,
    /// Rank, worker or node the line came from, when its prefix says so.
    pub rank: Option<String>,
    /// Lines before the cause (for people).
    #[serde(default)]
    pub context: Vec<String>,
}

/// The result of a triage run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TriageReport {
    pub schema_version: u32,
    pub primary: Option<Finding>,
    pub secondary: Vec<Finding>,
}

/// Options of the triage engine.
#[derive(Debug, Clone, Default)]
pub struct TriageOptions {
    /// Lines of context before the cause.
    pub context: usize,
    /// Extra rule files.
    pub rules: Vec<PathBuf>,
}

/// Triage files, directories or `-` (stdin) read together.
pub fn analyze_paths(paths: &[PathBuf], opts: &TriageOptions) -> anyhow::Result<TriageReport> {
    let _ = (paths, opts);
    Ok(TriageReport {
        schema_version: crate::report::SCHEMA_VERSION,
        ..Default::default()
    })
}

/// `golive triage` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct TriageArgs {
    /// Log files, directories (every log inside), `-` for stdin; `.gz` is read too.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Lines of context before the cause line.
    #[arg(long, default_value_t = 30)]
    pub context: usize,
    /// Extra rule file (TOML), added to the built-in rules.
    #[arg(long)]
    pub rules: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::OutputFormat,
}

/// Runs `golive triage`; returns the exit code.
pub fn run(args: TriageArgs) -> anyhow::Result<u8> {
    let _ = args;
    anyhow::bail!("golive triage is not built yet")
}
