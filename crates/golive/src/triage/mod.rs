//! `golive triage`: the first root-cause line of a failed deployment, from logs.
//!
//! Every input (file, directory, stdin, `.gz`) is scanned once by [`scan`]; rules are data
//! ([`rules`], `rules.toml`). The first cause is chosen across files by the runbook order
//! (image/driver -> dependencies -> config -> memory -> prefix cache -> multi-node -> API
//! server), then by time (timestamps across files) and line order.

mod body;
mod classify;
mod clean;
#[cfg(feature = "fuzz")]
mod fuzzing;
pub mod lifecycle;
mod line;
mod output;
mod phase;
mod prefilter;
mod prefix;
pub mod rules;
mod scan;

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

#[cfg(feature = "fuzz")]
pub use fuzzing::{fuzz_lines, fuzz_scan};
use rules::{RuleKind, RuleSet};
use scan::{FileResult, RawFinding};

pub use output::write_text;
pub use scan::MAX_LINE;

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
    /// A GPU fault at run time: illegal memory access, unspecified launch failure, Xid, ECC.
    GpuFault,
    /// An error inside the serving engine's own code that no deployment cause explains.
    Engine,
    Unknown,
}

/// How far after Ray's wrapper line the wrapped exception's own line may come (its
/// traceback, with the remote worker's frames).
const RAY_WRAPPED_WITHIN: u64 = 400;

/// The finding that states the exception a `RayTaskError(X)` line wraps: the next finding
/// of the same input whose message starts with `X:`.
fn wrapped_by_ray<'a>(
    all: &[(usize, &'a RawFinding)],
    pfi: usize,
    pf: &RawFinding,
) -> Option<(usize, &'a RawFinding)> {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = R.get_or_init(|| regex::Regex::new(r"RayTaskError\((\w+)\)").unwrap());
    let wrapped = re.captures(&pf.text)?.get(1)?.as_str();
    all.iter().copied().find(|(fi, f)| {
        *fi == pfi
            && f.line > pf.line
            && f.line <= pf.line + RAY_WRAPPED_WITHIN
            && line::parse(f.text.as_bytes())
                .msg()
                .strip_prefix(wrapped)
                .is_some_and(|rest| rest.starts_with(':'))
    })
}

/// What to do about a failure of the engine's own code.
const ENGINE_NEXT_STEP: &str = "Note the engine's version (`vllm --version`, `llama-server --version`) and search the message in its issues; retry with the feature the lines before it name turned off, or pin the previous release or image.";

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
    pub schema_version: u32,
    /// How far each process got and how it ended, per input (outcome first).
    #[serde(default)]
    pub outcome: Vec<lifecycle::Outcome>,
    /// The first error that explains a bad end; none when every process came up and served,
    /// then stopped in order or still runs (whatever errors it survived).
    pub primary: Option<Finding>,
    /// Errors a process went on after (it loaded on, or the server served later): never the
    /// primary while a failure it did not get past exists.
    #[serde(default)]
    pub survived: Vec<Finding>,
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
    pub file: String,
    pub lines: u64,
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
/// `outcome[]` and `survived[]` (outcome first: a survived error is never primary).
pub const SCHEMA_VERSION: u32 = 4;

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
/// decompression runs beside the scanning).
fn open(src: &Source) -> anyhow::Result<Box<dyn Read + Send>> {
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

/// The finding with its line and context lines redacted ([`crate::redact::redact_line`]).
fn redacted(mut f: Finding) -> Finding {
    f.text = crate::redact::redact_line(&f.text);
    for line in f.context.iter_mut() {
        *line = crate::redact::redact_line(line);
    }
    f
}

/// Chooses the primary cause and the secondary findings from all files.
fn decide(
    rules: &RuleSet,
    mut results: Vec<(String, FileResult)>,
    notes: Vec<String>,
) -> TriageReport {
    mark_topology(&mut results);
    let facts: HashSet<String> = results
        .iter()
        .flat_map(|(_, r)| r.facts.iter().cloned())
        .collect();
    // Platform facts: a rule's class can depend on them (a CUDA library missing on a ROCm
    // host is a wrong build, not a container without the NVIDIA runtime).
    for (_, r) in results.iter_mut() {
        for f in r.findings.iter_mut() {
            if let Some(rule) = rules.rules.get(f.rule) {
                if let (Some(w), Some(c)) = (&rule.when, rule.class_when) {
                    if facts.contains(w) {
                        f.class = c;
                    }
                }
            }
        }
    }
    // Bare ERROR logger lines: their class from the module that logged them.
    let via_logger = classify::classify_weak(rules, &mut results);
    let mut all: Vec<(usize, &RawFinding)> = Vec::new();
    for (fi, (_, r)) in results.iter().enumerate() {
        for f in &r.findings {
            let excused = f.rule != usize::MAX
                && rules.rules[f.rule]
                    .unless
                    .as_ref()
                    .is_some_and(|u| facts.contains(u));
            if !excused {
                all.push((fi, f));
            }
        }
    }
    classify::drop_weak_repeats(rules, &mut all);
    // Outcome first: an error its process went on after (it loaded on, the server served) was
    // survived. It is the cause only when the log ended badly and no failure that was not got
    // past is found; a log with no such failure is healthy, whatever it survived.
    // An error line (no exception of its own) of a process that went on to die of a later
    // exception of another known class was survived too: that exception ended the process.
    let last_exceptions = LastExceptions::of(&all);
    let overtaken = |(fi, f): &(usize, &RawFinding)| {
        !f.exception
            && !rules.rules.get(f.rule).is_some_and(|r| r.fatal)
            && last_exceptions.after(*fi, f)
    };
    let went_on = |x: &(usize, &RawFinding)| {
        lifecycle::survived(rules, &results[x.0].1.life, x.1) || overtaken(x)
    };
    let bad_end = all
        .iter()
        .any(|x| lifecycle::ends_process(x.1) && !went_on(x));
    let live_cause = all
        .iter()
        .any(|x| x.1.kind == RuleKind::Cause && !went_on(x));
    let candidates: Vec<(usize, &RawFinding)> = all
        .iter()
        .copied()
        .filter(|x| bad_end && x.1.kind == RuleKind::Cause && !(live_cause && went_on(x)))
        .collect();
    // A class that only the traceback's frames name (the layer the code is in, no message
    // that says so) is weaker evidence than a message: it ranks with the engine's own
    // failures, so an earlier error wins over it (a store timeout in the distributed code
    // after a worker died of its own error).
    let rank = |f: &RawFinding| {
        let framed = rules
            .rules
            .get(f.rule)
            .is_some_and(|r| r.frame_path.is_some());
        if framed {
            f.class.runbook_rank().max(Class::Engine.runbook_rank())
        } else {
            f.class.runbook_rank()
        }
    };
    let by_runbook = |a: &(usize, &RawFinding), b: &(usize, &RawFinding)| {
        rank(a.1)
            .cmp(&rank(b.1))
            .then_with(|| match (a.0 != b.0, a.1.ts, b.1.ts) {
                (true, Some(x), Some(y)) => x.cmp(&y),
                _ => (a.0, a.1.line).cmp(&(b.0, b.1.line)),
            })
    };
    // A bare ERROR line is a cause only when nothing else is.
    let mut causes: Vec<(usize, &RawFinding)> = classify::strongest(rules, candidates);
    causes.sort_by(by_runbook);
    // Severity: a cause stated by a warning wins only when nothing fatal of another
    // (known) class follows it in the same file.
    let fatal_after = |(fi, w): (usize, &RawFinding)| {
        causes.iter().any(|(gi, g)| {
            *gi == fi && !g.soft && g.line > w.line && g.class != w.class && g.class.explains()
        })
    };
    let hard: Vec<(usize, &RawFinding)> = causes
        .iter()
        .copied()
        .filter(|&c| !(c.1.soft && fatal_after(c)))
        .collect();
    // A generic line (pydantic's `1 validation error for X`, a bare exception type) followed
    // within a few lines by a specific cause in the same file: the specific line says why.
    let is_generic = |f: &RawFinding| f.rule == usize::MAX || rules.rules[f.rule].generic;
    let causes: Vec<(usize, &RawFinding)> = hard
        .iter()
        .copied()
        .filter(|(fi, g)| {
            !(is_generic(g)
                && hard.iter().any(|(hi, h)| {
                    hi == fi && !is_generic(h) && h.line > g.line && h.line <= g.line + 3
                }))
        })
        .collect();
    let primary = causes.first().copied().or_else(|| {
        // No cause at all: a fatal consequence (engine did not start) is still a failure.
        all.iter()
            .copied()
            .filter(|x| {
                let f = x.1;
                f.kind == RuleKind::Consequence
                    && !f.during_shutdown
                    && f.rule != usize::MAX
                    && rules.rules[f.rule].alone
                    && !went_on(x)
            })
            .min_by(by_runbook)
    });
    // Nothing found at all: a log that stopped before serving says last what went wrong.
    let tail_primary = primary.is_none().then(|| {
        results
            .iter()
            .enumerate()
            .find_map(|(fi, (_, r))| r.tail.as_ref().map(|f| (fi, f)))
    });
    let primary = primary.or(tail_primary.flatten());
    // The earliest error that explains the bad end: an error of the same deployment class
    // logged before it in the same file, even one the process went on after (a failed import
    // of vLLM's own extension, then an attribute missing from it).
    let primary = primary.map(|(pfi, pf)| {
        all.iter()
            .copied()
            .filter(|(fi, f)| {
                *fi == pfi
                    && f.kind == RuleKind::Cause
                    && f.class == pf.class
                    && f.class.explains()
                    && !is_generic(f)
                    && f.line < pf.line
            })
            .min_by_key(|(_, f)| f.line)
            .unwrap_or((pfi, pf))
    });
    // Ray's wrapper (`RayTaskError(ModuleNotFoundError): ray::..`) carries an exception whose
    // own traceback follows and ends with the message: that line states the cause.
    let primary = primary.map(|(pfi, pf)| wrapped_by_ray(&all, pfi, pf).unwrap_or((pfi, pf)));
    let make = |fi: usize, f: &RawFinding, with_context: bool| -> Finding {
        let (rule, mut why, mut next_step) = if f.rule == usize::MAX {
            (
                "python-exception".to_string(),
                "An exception that no rule knows ended a traceback; it is the first error the log states.".to_string(),
                "Read the exception and the frames above it; search the message in the vLLM issues.".to_string(),
            )
        } else {
            let r = &rules.rules[f.rule];
            let mut why = r.why.clone();
            let mut next = r.next_step.clone();
            if let Some(&fr) = via_logger.get(&(fi, f.line)) {
                let src = line::logger_file(&f.text).unwrap_or("?");
                why = format!("{why} It was logged from {src}: {}", rules.rules[fr].why);
                next = rules.rules[fr].next_step.clone();
            }
            if r.startup_refusal && f.class != r.class {
                why = "Raised while the engine ran requests (the traceback's frames are its step or model runner), not while it checked its configuration at startup: a bug in the engine's code, or an input it does not handle.".to_string();
                next = "Report it to the engine with the traceback and the request that triggered it; meanwhile pin the previous engine version or avoid the feature the frames name.".to_string();
            }
            if let Some(w) = &r.when {
                if facts.contains(w) {
                    if let Some(x) = &r.why_when {
                        why = x.clone();
                    }
                    if let Some(x) = &r.next_step_when {
                        next = x.clone();
                    }
                }
            }
            (r.id.clone(), why, next)
        };
        if f.kind == RuleKind::Cause && f.class == Class::OomTopology {
            why = format!("Only one rank/GPU ran out of memory while the others did not: {why}");
            next_step = "Compare memory use per GPU (`nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv`): look for another process on that GPU, uneven layer/expert placement, or a smaller/different GPU in the set.".to_string();
        }
        Finding {
            class: f.class,
            file: results[fi].0.clone(),
            line: f.line,
            text: f.text.clone(),
            rule,
            why,
            next_step,
            rank: f.rank.clone(),
            context: if with_context {
                f.context.clone()
            } else {
                Vec::new()
            },
            kind: match f.kind {
                RuleKind::Cause => "cause",
                RuleKind::Consequence => "consequence",
                RuleKind::Hint => "hint",
                _ => "other",
            }
            .to_string(),
            count: f.count,
            last_line: (f.count > 1).then_some(f.last_line),
        }
    };
    let mut primary_finding = primary.map(|(fi, f)| make(fi, f, true));
    // A lone consequence that quotes its error ("Worker failed with error 'CUDA error: an
    // illegal memory access ...'"): the quoted text names the class and the next step.
    if let Some(p) = primary_finding.as_mut() {
        if p.kind == "consequence" && p.class == Class::Unknown {
            if let Some(ri) = rules.classify_text(&p.text) {
                let r = &rules.rules[ri];
                if r.class != Class::Unknown {
                    p.class = r.class;
                    p.why = format!("{} The line quotes the error: {}", p.why, r.why);
                    p.next_step = r.next_step.clone();
                }
            }
        }
    }
    // A failure that no rule ties to a deployment layer (driver, container, dependency,
    // configuration, memory, network, parser) happened in the engine's own code or in code it
    // runs: the engine is where to look first, and its next step (version, issues, pin or
    // turn the feature off) is the one that helps. Only where the log shows an engine
    // starting or loading: a user's own script that fails says nothing about an engine.
    // The engine ran: the log shows it starting or loading, or an engine's logger (vLLM's
    // `[core.py:712]` header) wrote the line itself.
    let engine_ran = primary.is_some_and(|(fi, f)| {
        results[fi].1.life.engine_ran() || line::logger_file(&f.text).is_some()
    });
    if let Some(p) = primary_finding.as_mut() {
        if p.class == Class::Unknown && engine_ran {
            p.class = Class::Engine;
            p.why = format!(
                "{} No rule names a deployment cause (driver, container, dependency, configuration, memory, network, parser) for it, so it is taken as the engine's own failure.",
                p.why
            );
            p.next_step = format!("{} {}", p.next_step, ENGINE_NEXT_STEP);
        }
    }
    // Hints refine the next step of a primary of their class (e.g. the DMA-BUF errno 524
    // recipe for an NCCL unhandled system error).
    if let Some(p) = primary_finding.as_mut() {
        if let Some((_, h)) = all
            .iter()
            .find(|(_, f)| f.kind == RuleKind::Hint && f.class == p.class)
        {
            let r = &rules.rules[h.rule];
            p.why = format!("{} {}", p.why, r.why);
            p.next_step = r.next_step.clone();
        }
    }
    // A generic NCCL error: the first transport warning NCCL printed says why.
    if let Some(p) = primary_finding.as_mut() {
        if p.class == Class::Nccl && p.rule == "nccl-error" {
            if let Some((fi, w)) = all.iter().find(|(_, f)| {
                f.rule != usize::MAX
                    && matches!(rules.rules[f.rule].id.as_str(), "nccl-warn" | "nccl-ib")
            }) {
                p.why = format!(
                    "{} NCCL's own first warning ({}:{}): {}",
                    p.why,
                    results[*fi].0,
                    w.line,
                    w.text.chars().take(300).collect::<String>()
                );
            }
        }
    }
    let is_primary = |(fi, f): &(usize, &RawFinding)| {
        primary.is_some_and(|(pfi, pf)| pfi == *fi && pf.line == f.line)
    };
    // Errors the processes went on after, apart from the primary.
    let survived: Vec<Finding> = all
        .iter()
        .filter(|x| x.1.kind == RuleKind::Cause && went_on(x) && !is_primary(x))
        .take(MAX_SECONDARY)
        .map(|&(fi, f)| redacted(make(fi, f, false)))
        .collect();
    let mut secondary = Vec::new();
    let mut seen = HashSet::new();
    let mut rest: Vec<(usize, &RawFinding)> = all
        .iter()
        .copied()
        .filter(|x| {
            let f = x.1;
            let survived = f.kind == RuleKind::Cause && went_on(x);
            let teardown = f.kind == RuleKind::Consequence && f.during_shutdown;
            !(is_primary(x) || survived || teardown)
        })
        .collect();
    if primary.is_none() {
        // Nothing found: shutdown noise and lone consequences are not reported.
        rest.clear();
    }
    rest.sort_by_key(|(fi, f)| (*fi, f.line));
    for (fi, f) in rest {
        if secondary.len() >= MAX_SECONDARY {
            break;
        }
        let key = (fi, f.rule, f.rank.clone(), f.text.clone());
        if seen.insert(key) {
            secondary.push(make(fi, f, false));
        }
    }
    // Secrets out of the few lines that are printed, here after the scan (the hot loop
    // stays as fast as it is): `api_key=sk-...` in an args dump, a URL password.
    let secondary = secondary.into_iter().map(redacted).collect();
    let outcome = results
        .iter()
        .enumerate()
        .flat_map(|(fi, (name, r))| match tail_primary.flatten() {
            // The end of the log is where that process crashed.
            Some((tfi, tail)) if tfi == fi => {
                let with_tail: Vec<RawFinding> =
                    r.findings.iter().cloned().chain([tail.clone()]).collect();
                lifecycle::outcomes(rules, name, &r.life, &with_tail)
            }
            _ => lifecycle::outcomes(rules, name, &r.life, &r.findings),
        })
        .collect();
    TriageReport {
        schema_version: SCHEMA_VERSION,
        outcome,
        primary: primary_finding.map(redacted),
        survived,
        secondary,
        inputs: results
            .iter()
            .map(|(n, r)| InputSummary {
                file: n.clone(),
                lines: r.lines,
                bytes: r.bytes,
            })
            .collect(),
        notes,
    }
}

/// Out-of-memory on exactly one rank/GPU while other ranks are present and did not fail
/// becomes `oom_topology`.
fn mark_topology(results: &mut [(String, FileResult)]) {
    let multi_file = results.len() > 1;
    let mut workers: HashSet<String> = HashSet::new();
    let mut failed: HashSet<String> = HashSet::new();
    let mut oom_ids: HashSet<String> = HashSet::new();
    for (fi, (_, r)) in results.iter().enumerate() {
        // One process can carry two labels (vLLM's `(Worker_TP0 pid=..)` and torch's
        // `[rank0]:`): count the engine's own labels when there are any.
        let own = r.workers.iter().any(|w| !line::is_torch_rank(w));
        for w in r.workers.iter().filter(|w| !own || !line::is_torch_rank(w)) {
            workers.insert(format!("{fi}/{w}"));
        }
        if r.workers.is_empty() && multi_file && r.lines > 0 {
            workers.insert(format!("{fi}/"));
        }
        for t in &r.ranks_with_traceback {
            failed.insert(format!("{fi}/{t}"));
        }
        for f in &r.findings {
            let id = format!(
                "{fi}/{}",
                f.rank
                    .as_deref()
                    .filter(|r| scan::is_worker_label(r))
                    .unwrap_or("")
            );
            if f.kind == RuleKind::Cause && f.class.is_oom() {
                // Ray folds the same line of other actors into one: `[repeated 3x across
                // cluster]` is an out-of-memory on more than one rank.
                if f.text.contains("x across cluster]") {
                    oom_ids.insert(format!("{id} (and the actors Ray folded in)"));
                }
                oom_ids.insert(id);
            } else if f.kind == RuleKind::Cause && f.class.explains() && f.class != Class::Nccl {
                failed.insert(id);
            }
        }
    }
    if oom_ids.len() != 1 || workers.len() < 2 {
        return;
    }
    let oom_id = oom_ids.iter().next().unwrap().clone();
    if !workers.contains(&oom_id) && !oom_id.ends_with('/') {
        return;
    }
    // Another rank with its own traceback failed too: not a one-rank problem.
    if failed.iter().any(|f| f != &oom_id && workers.contains(f)) {
        return;
    }
    for (fi, (_, r)) in results.iter_mut().enumerate() {
        for f in r.findings.iter_mut() {
            let id = format!(
                "{fi}/{}",
                f.rank
                    .as_deref()
                    .filter(|r| scan::is_worker_label(r))
                    .unwrap_or("")
            );
            if f.kind == RuleKind::Cause && f.class.is_oom() && id == oom_id {
                f.class = Class::OomTopology;
            }
        }
    }
}

/// The process of a finding within its input: its rank label without the pid.
fn process_of(f: &RawFinding) -> &str {
    scan::strip_pid(f.rank.as_deref().unwrap_or(""))
}

/// Per process of each input, its last uncaught exceptions of a known class: the last one,
/// and the last one of another class than that. One pass over the findings, so that asking
/// whether an error line was overtaken costs no scan (a crash loop has many findings).
struct LastExceptions<'a> {
    by_process: HashMap<(usize, &'a str), Last>,
}

/// A process's last exception (line, class), and the line of its last one of another class.
type Last = ((u64, Class), Option<u64>);

impl<'a> LastExceptions<'a> {
    fn of(all: &[(usize, &'a RawFinding)]) -> Self {
        let mut by_process: HashMap<(usize, &'a str), Last> = HashMap::new();
        for (fi, g) in all {
            if !(g.exception && g.kind == RuleKind::Cause && g.class.explains()) {
                continue;
            }
            let e = by_process
                .entry((*fi, process_of(g)))
                .or_insert(((g.line, g.class), None));
            let ((line, class), other) = *e;
            *e = if g.line >= line {
                // The new last; the old one is the last of another class when it differs.
                let other = if g.class != class { Some(line) } else { other };
                ((g.line, g.class), other)
            } else if g.class != class {
                ((line, class), Some(other.map_or(g.line, |o| o.max(g.line))))
            } else {
                ((line, class), other)
            };
        }
        LastExceptions { by_process }
    }

    /// Whether an uncaught exception of another known class than `f`'s ended `f`'s process
    /// after it.
    fn after(&self, fi: usize, f: &RawFinding) -> bool {
        self.by_process
            .get(&(fi, process_of(f)))
            .is_some_and(|&((line, class), other)| {
                if class != f.class {
                    line > f.last_line
                } else {
                    other.is_some_and(|o| o > f.last_line)
                }
            })
    }
}
