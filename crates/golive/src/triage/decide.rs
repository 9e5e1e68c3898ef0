//! The choice among every input's findings, outcome first: which errors a process went on
//! after (survived), whether the log ended badly, then the earliest error that explains the
//! bad end in runbook order, and the words that explain it.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use super::rules::{RuleKind, RuleSet};
use super::scan::{self, FileResult, RawFinding};
use super::{classify, lifecycle, line, Class, Finding, InputSummary, TriageReport};
use super::{MAX_SECONDARY, SCHEMA_VERSION};

/// One finding and the input (index into the results) it was found in.
type Found<'a> = (usize, &'a RawFinding);

/// Chooses the primary cause and the secondary findings from all files.
pub(super) fn decide(
    rules: &RuleSet,
    mut results: Vec<(String, FileResult)>,
    notes: Vec<String>,
) -> TriageReport {
    mark_topology(rules, &mut results);
    let facts = facts_of(&results);
    apply_platform_facts(rules, &mut results, &facts);
    // Bare ERROR logger lines: their class from the module that logged them.
    let via_logger = classify::classify_weak(rules, &mut results);
    let all = unexcused(rules, &results, &facts);
    let judge = Judge::new(rules, &results, &all);
    let (primary, tail) = judge.primary(&all);
    let words = Words {
        rules,
        results: &results,
        via_logger: &via_logger,
        facts: &facts,
    };
    // Where the primary shows, when another finding's line says it first: the crash line a
    // backtrace frame follows, or an earlier report of the same error.
    let shown_on = primary
        .and_then(|p| crash_of_frame(rules, &all, p).or_else(|| first_report(&judge, &all, p)));
    let primary_finding = primary.map(|(fi, f)| words.primary(&all, fi, f, shown_on));
    let shown = Shown { primary, shown_on };
    let survived = survived(&judge, &words, &all, &shown);
    let secondary = secondary(&judge, &words, &all, &shown);
    TriageReport {
        schema_version: SCHEMA_VERSION,
        outcome: outcomes(rules, &results, tail),
        primary: primary_finding.map(redacted),
        survived,
        secondary,
        inputs: inputs(&results),
        notes,
    }
}

/// Every fact the inputs established (the platform: ROCm, CPU, ...).
fn facts_of(results: &[(String, FileResult)]) -> HashSet<String> {
    results
        .iter()
        .flat_map(|(_, r)| r.facts.iter().cloned())
        .collect()
}

/// Platform facts: a rule's class can depend on them (a CUDA library missing on a ROCm host is
/// a wrong build, not a container without the NVIDIA runtime).
fn apply_platform_facts(
    rules: &RuleSet,
    results: &mut [(String, FileResult)],
    facts: &HashSet<String>,
) {
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
}

/// Every finding that no fact excuses (a rule's `unless`), without the weak repeats of a
/// strong finding's line.
fn unexcused<'a>(
    rules: &RuleSet,
    results: &'a [(String, FileResult)],
    facts: &HashSet<String>,
) -> Vec<Found<'a>> {
    let excused = |f: &RawFinding| {
        f.rule != usize::MAX
            && rules.rules[f.rule]
                .unless
                .as_ref()
                .is_some_and(|u| facts.contains(u))
    };
    let mut all: Vec<Found<'a>> = results
        .iter()
        .enumerate()
        .flat_map(|(fi, (_, r))| r.findings.iter().map(move |f| (fi, f)))
        .filter(|(_, f)| !excused(f))
        .collect();
    classify::drop_weak_repeats(rules, &mut all);
    all
}

/// A generic line: pydantic's `1 validation error for X`, a bare exception type, an
/// exception no rule knows.
fn is_generic(rules: &RuleSet, f: &RawFinding) -> bool {
    f.rule == usize::MAX || rules.rules[f.rule].generic
}

/// A finding's place in the runbook order. A class that only the traceback's frames name
/// (the layer the code is in, no message that says so) is weaker evidence than a message: it
/// ranks with the engine's own failures, so an earlier error wins over it (a store timeout in
/// the distributed code after a worker died of its own error).
fn rank(rules: &RuleSet, f: &RawFinding) -> u8 {
    let framed = rules
        .rules
        .get(f.rule)
        .is_some_and(|r| r.frame_path.is_some());
    if framed {
        f.class.runbook_rank().max(Class::Engine.runbook_rank())
    } else {
        f.class.runbook_rank()
    }
}

/// Runbook order, then time across inputs (timestamps), then input and line order.
fn by_runbook(rules: &RuleSet, a: &Found<'_>, b: &Found<'_>) -> Ordering {
    rank(rules, a.1)
        .cmp(&rank(rules, b.1))
        .then_with(|| match (a.0 != b.0, a.1.ts, b.1.ts) {
            (true, Some(x), Some(y)) => x.cmp(&y),
            _ => (a.0, a.1.line).cmp(&(b.0, b.1.line)),
        })
}

/// Outcome first: an error its process went on after (it loaded on, the server served) was
/// survived. It is the cause only when the log ended badly and no failure that was not got
/// past is found; a log with no such failure is healthy, whatever it survived.
struct Judge<'a> {
    rules: &'a RuleSet,
    results: &'a [(String, FileResult)],
    last_exceptions: LastExceptions<'a>,
}

impl<'a> Judge<'a> {
    fn new(rules: &'a RuleSet, results: &'a [(String, FileResult)], all: &[Found<'a>]) -> Self {
        Judge {
            rules,
            results,
            last_exceptions: LastExceptions::of(all),
        }
    }

    /// An error line (no exception of its own) of a process that went on to die of a later
    /// exception of another known class was survived too: that exception ended the process.
    fn overtaken(&self, (fi, f): &Found<'_>) -> bool {
        !f.exception
            && !self.rules.rules.get(f.rule).is_some_and(|r| r.fatal)
            && self.last_exceptions.after(*fi, f)
    }

    /// Whether the finding's process went on after it.
    fn went_on(&self, x: &Found<'_>) -> bool {
        lifecycle::survived(self.rules, &self.results[x.0].1.life, x.1) || self.overtaken(x)
    }

    /// The first cause in runbook order among those that explain a bad end: none when every
    /// process went on after what it logged.
    fn first_cause(&self, all: &[Found<'a>]) -> Option<Found<'a>> {
        let bad_end = all
            .iter()
            .any(|x| lifecycle::ends_process(x.1) && !self.went_on(x));
        if !bad_end {
            return None;
        }
        let live_cause = all
            .iter()
            .any(|x| x.1.kind == RuleKind::Cause && !self.went_on(x));
        let candidates: Vec<Found<'a>> = all
            .iter()
            .copied()
            .filter(|x| x.1.kind == RuleKind::Cause && !(live_cause && self.went_on(x)))
            .collect();
        // A bare ERROR line is a cause only when nothing else is.
        let mut causes = classify::strongest(self.rules, candidates);
        causes.sort_by(|a, b| by_runbook(self.rules, a, b));
        let hard = without_overruled_warnings(&causes);
        first_specific(self.rules, &hard)
    }

    /// No cause at all: a fatal consequence (engine did not start) is still a failure.
    fn lone_consequence(&self, all: &[Found<'a>]) -> Option<Found<'a>> {
        all.iter()
            .copied()
            .filter(|x| {
                let f = x.1;
                f.kind == RuleKind::Consequence
                    && !f.during_shutdown
                    && f.rule != usize::MAX
                    && self.rules.rules[f.rule].alone
                    && !self.went_on(x)
            })
            .min_by(|a, b| by_runbook(self.rules, a, b))
    }

    /// The primary: the first cause, else a lone consequence, else what a log that stopped
    /// before serving said last (returned second: that input crashed where it stops); then
    /// the earliest line of its class that explains it, and the exception that Ray's wrapper
    /// line carries.
    fn primary(&self, all: &[Found<'a>]) -> (Option<Found<'a>>, Option<Found<'a>>) {
        let found = self.first_cause(all).or_else(|| self.lone_consequence(all));
        let tail = if found.is_none() {
            tail_of(self.results)
        } else {
            None
        };
        let primary = found.or(tail).map(|p| {
            let p = earliest_of_class(self.rules, all, p);
            let p = announced_exception(self.rules, all, p).unwrap_or(p);
            wrapped_by_ray(all, p.0, p.1).unwrap_or(p)
        });
        (primary, tail)
    }
}

/// Severity: a cause stated by a warning wins only when nothing fatal of another (known)
/// class follows it in the same file.
fn without_overruled_warnings<'a>(causes: &[Found<'a>]) -> Vec<Found<'a>> {
    let fatal_after = |(fi, w): Found<'_>| {
        causes.iter().any(|(gi, g)| {
            *gi == fi && !g.soft && g.line > w.line && g.class != w.class && g.class.explains()
        })
    };
    causes
        .iter()
        .copied()
        .filter(|&c| !(c.1.soft && fatal_after(c)))
        .collect()
}

/// The first cause, passing over a generic line (pydantic's `1 validation error for X`, a
/// bare exception type) that a specific cause of the same file follows within a few lines:
/// the specific line says why.
fn first_specific<'a>(rules: &RuleSet, hard: &[Found<'a>]) -> Option<Found<'a>> {
    hard.iter().copied().find(|(fi, g)| {
        !(is_generic(rules, g)
            && hard.iter().any(|(hi, h)| {
                hi == fi && !is_generic(rules, h) && h.line > g.line && h.line <= g.line + 3
            }))
    })
}

/// The earliest error that explains the bad end: an error of the same deployment class logged
/// before it in the same file, even one the process went on after (a failed import of vLLM's
/// own extension, then an attribute missing from it), but not one the server went on to serve
/// after: a server that served was not broken by what it logged while it started.
fn earliest_of_class<'a>(rules: &RuleSet, all: &[Found<'a>], (pfi, pf): Found<'a>) -> Found<'a> {
    all.iter()
        .copied()
        .filter(|(fi, f)| {
            *fi == pfi
                && f.kind == RuleKind::Cause
                && f.class == pf.class
                && f.class.explains()
                && !is_generic(rules, f)
                && f.line < pf.line
                && f.served == pf.served
        })
        .min_by_key(|(_, f)| f.line)
        .unwrap_or((pfi, pf))
}

/// Nothing found at all: a log that stopped before serving says last what went wrong.
fn tail_of(results: &[(String, FileResult)]) -> Option<Found<'_>> {
    results
        .iter()
        .enumerate()
        .find_map(|(fi, (_, r))| r.tail.as_ref().map(|f| (fi, f)))
}

/// What a finding says to the reader: its rule's why and next step, refined by the logger
/// that wrote it and the facts of the platform.
struct Words<'a> {
    rules: &'a RuleSet,
    results: &'a [(String, FileResult)],
    via_logger: &'a HashMap<(usize, u64), usize>,
    facts: &'a HashSet<String>,
}

impl Words<'_> {
    fn finding(&self, fi: usize, f: &RawFinding, with_context: bool) -> Finding {
        let (rule, mut why, mut next_step) = self.rule_words(fi, f);
        if f.kind == RuleKind::Cause && f.class == Class::OomTopology {
            why = format!("Only one rank/GPU ran out of memory while the others did not: {why}");
            next_step = "Compare memory use per GPU (`nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv`): look for another process on that GPU, uneven layer/expert placement, or a smaller/different GPU in the set.".to_string();
        }
        Finding {
            class: f.class,
            file: self.results[fi].0.clone(),
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
    }

    /// The rule's id, why and next step for this finding.
    fn rule_words(&self, fi: usize, f: &RawFinding) -> (String, String, String) {
        if f.rule == usize::MAX {
            return (
                "python-exception".to_string(),
                "An exception that no rule knows ended a traceback; it is the first error the log states.".to_string(),
                "Read the exception and the frames above it; search the message in the vLLM issues.".to_string(),
            );
        }
        let r = &self.rules.rules[f.rule];
        let mut why = r.why.clone();
        let mut next = r.next_step.clone();
        if let Some(&fr) = self.via_logger.get(&(fi, f.line)) {
            let src = line::logger_file(&f.text).unwrap_or("?");
            why = format!(
                "{why} It was logged from {src}: {}",
                self.rules.rules[fr].why
            );
            next = self.rules.rules[fr].next_step.clone();
        }
        if r.startup_refusal && f.class != r.class {
            why = "Raised while the engine ran requests (the traceback's frames are its step or model runner), not while it checked its configuration at startup: a bug in the engine's code, or an input it does not handle.".to_string();
            next = "Report it to the engine with the traceback and the request that triggered it; meanwhile pin the previous engine version or avoid the feature the frames name.".to_string();
        }
        if r.when.as_ref().is_some_and(|w| self.facts.contains(w)) {
            if let Some(x) = &r.why_when {
                why = x.clone();
            }
            if let Some(x) = &r.next_step_when {
                next = x.clone();
            }
        }
        (r.id.clone(), why, next)
    }

    /// The primary's finding, with its context, refined in order: the error a lone
    /// consequence quotes, the engine as the owner of what no rule ties to a layer, a hint of
    /// its class, NCCL's own first warning; then shown on `shown_on`'s line when another
    /// finding states it first.
    fn primary(
        &self,
        all: &[Found<'_>],
        fi: usize,
        f: &RawFinding,
        shown_on: Option<Found<'_>>,
    ) -> Finding {
        let mut p = self.finding(fi, f, true);
        self.quoted_error(&mut p);
        // The engine ran: the log shows it starting or loading, its processes' labels
        // (SGLang's `[time TP0]`, vLLM's `(EngineCore_DP0 pid=..)`; not torch's bare ranks),
        // a traceback frame in its package or a line only a running engine prints
        // (`scan::ENGINE_RAN`: a quoted piece of a log shows little else), or an engine's logger
        // (vLLM's `[core.py:712]` header) wrote the line itself.
        let r = &self.results[fi].1;
        let engine_labels = r.workers.iter().any(|w| !line::is_torch_rank(w));
        if r.life.engine_ran()
            || engine_labels
            || r.facts.contains(super::scan::ENGINE_RAN)
            || line::logger_file(&f.text).is_some()
        {
            engine_owns_unknown(&mut p);
        }
        self.hint(all, &mut p);
        self.nccl_first_warning(all, &mut p);
        if let Some((_, c)) = shown_on {
            p.line = c.line;
            p.text = c.text.clone();
            p.context = c.context.clone();
            if c.rank.is_some() {
                p.rank = c.rank.clone();
            }
        }
        p
    }

    /// A lone consequence that quotes its error ("Worker failed with error 'CUDA error: an
    /// illegal memory access ...'"): the quoted text names the class and the next step.
    fn quoted_error(&self, p: &mut Finding) {
        if p.kind != "consequence" || p.class != Class::Unknown {
            return;
        }
        if let Some(ri) = self.rules.classify_text(&p.text) {
            let r = &self.rules.rules[ri];
            if r.class != Class::Unknown {
                p.class = r.class;
                p.why = format!("{} The line quotes the error: {}", p.why, r.why);
                p.next_step = r.next_step.clone();
            }
        }
    }

    /// Hints refine the next step of a primary of their class (e.g. the DMA-BUF errno 524
    /// recipe for an NCCL unhandled system error).
    fn hint(&self, all: &[Found<'_>], p: &mut Finding) {
        if let Some((_, h)) = all
            .iter()
            .find(|(_, f)| f.kind == RuleKind::Hint && f.class == p.class)
        {
            let r = &self.rules.rules[h.rule];
            p.why = format!("{} {}", p.why, r.why);
            p.next_step = r.next_step.clone();
        }
    }

    /// A generic NCCL error: the first transport warning NCCL printed says why.
    fn nccl_first_warning(&self, all: &[Found<'_>], p: &mut Finding) {
        if p.class != Class::Nccl || p.rule != "nccl-error" {
            return;
        }
        if let Some((fi, w)) = all.iter().find(|(_, f)| {
            f.rule != usize::MAX
                && matches!(
                    self.rules.rules[f.rule].id.as_str(),
                    "nccl-warn" | "nccl-ib"
                )
        }) {
            p.why = format!(
                "{} NCCL's own first warning ({}:{}): {}",
                p.why,
                self.results[*fi].0,
                w.line,
                w.text.chars().take(300).collect::<String>()
            );
        }
    }
}

/// A failure that no rule ties to a deployment layer (driver, container, dependency,
/// configuration, memory, network, parser) happened in the engine's own code or in code it
/// runs: the engine is where to look first, and its next step (version, issues, pin or turn
/// the feature off) is the one that helps. Only where the log shows an engine running: a
/// user's own script that fails says nothing about an engine.
fn engine_owns_unknown(p: &mut Finding) {
    if p.class != Class::Unknown {
        return;
    }
    p.class = Class::Engine;
    p.why = format!(
        "{} No rule names a deployment cause (driver, container, dependency, configuration, memory, network, parser) for it, so it is taken as the engine's own failure.",
        p.why
    );
    p.next_step = format!("{} {}", p.next_step, ENGINE_NEXT_STEP);
}

/// The primary, and the line it is shown on when another finding states it first (the crash
/// line a backtrace frame follows, an earlier report of the same error).
struct Shown<'a> {
    primary: Option<Found<'a>>,
    shown_on: Option<Found<'a>>,
}

/// Whether `x` is the primary, or the line the primary is shown on.
fn is_primary(shown: &Shown<'_>, (fi, f): &Found<'_>) -> bool {
    [shown.primary, shown.shown_on]
        .into_iter()
        .flatten()
        .any(|(pfi, pf)| pfi == *fi && pf.line == f.line)
}

/// A frame of a native crash's backtrace (`backtrace_frame`) names the layer; the crash line
/// it follows (a fatal consequence within a backtrace's first lines above it) states the cause.
fn crash_of_frame<'a>(
    rules: &RuleSet,
    all: &[Found<'a>],
    (pfi, pf): Found<'a>,
) -> Option<Found<'a>> {
    if pf.rule == usize::MAX || !rules.rules[pf.rule].backtrace_frame {
        return None;
    }
    all.iter()
        .copied()
        .filter(|(fi, f)| {
            *fi == pfi
                && f.kind == RuleKind::Consequence
                && f.rule != usize::MAX
                && rules.rules[f.rule].fatal
                && f.line < pf.line
                && f.line + FRAME_REACH >= pf.line
        })
        .max_by_key(|(_, f)| f.line)
}

/// The same error (the same message) reported earlier in the file, by another process whose
/// own lines could not name its class (its traceback cut off where the log starts): that
/// report is the earliest error that explains the end; the class is the primary's.
fn first_report<'a>(
    judge: &Judge<'_>,
    all: &[Found<'a>],
    (pfi, pf): Found<'a>,
) -> Option<Found<'a>> {
    all.iter()
        .copied()
        .filter(|x| {
            let (fi, f) = *x;
            fi == pfi
                && f.line < pf.line
                && f.msg_hash == pf.msg_hash
                && f.kind == RuleKind::Cause
                && f.class == Class::Unknown
                && !judge.went_on(x)
        })
        .min_by_key(|(_, f)| f.line)
}

/// Errors the processes went on after, apart from the primary.
fn survived(
    judge: &Judge<'_>,
    words: &Words<'_>,
    all: &[Found<'_>],
    shown: &Shown<'_>,
) -> Vec<Finding> {
    all.iter()
        .filter(|x| x.1.kind == RuleKind::Cause && judge.went_on(x) && !is_primary(shown, x))
        .take(MAX_SECONDARY)
        .map(|&(fi, f)| redacted(words.finding(fi, f, false)))
        .collect()
}

/// The other findings, once each, in input and line order: not the primary, not what was
/// survived, not teardown consequences; none when nothing was found (shutdown noise and lone
/// consequences are not reported).
fn secondary(
    judge: &Judge<'_>,
    words: &Words<'_>,
    all: &[Found<'_>],
    shown: &Shown<'_>,
) -> Vec<Finding> {
    if shown.primary.is_none() {
        return Vec::new();
    }
    let mut rest: Vec<Found<'_>> = all
        .iter()
        .copied()
        .filter(|x| {
            let f = x.1;
            let survived = f.kind == RuleKind::Cause && judge.went_on(x);
            let teardown = f.kind == RuleKind::Consequence && f.during_shutdown;
            !(is_primary(shown, x) || survived || teardown)
        })
        .collect();
    rest.sort_by_key(|(fi, f)| (*fi, f.line));
    let mut seen = HashSet::new();
    // Secrets out of the few lines that are printed, here after the scan (the hot loop stays
    // as fast as it is): `api_key=sk-...` in an args dump, a URL password.
    rest.into_iter()
        .filter(|(fi, f)| seen.insert((*fi, f.rule, f.rank.clone(), f.text.clone())))
        .take(MAX_SECONDARY)
        .map(|(fi, f)| redacted(words.finding(fi, f, false)))
        .collect()
}

/// How each process of each input got on and ended; the input whose end is the primary
/// (`tail`) crashed where it stops.
fn outcomes(
    rules: &RuleSet,
    results: &[(String, FileResult)],
    tail: Option<Found<'_>>,
) -> Vec<lifecycle::Outcome> {
    results
        .iter()
        .enumerate()
        .flat_map(|(fi, (name, r))| match tail {
            Some((tfi, tail)) if tfi == fi => {
                let with_tail: Vec<RawFinding> =
                    r.findings.iter().cloned().chain([tail.clone()]).collect();
                lifecycle::outcomes(rules, name, &r.life, &with_tail)
            }
            _ => lifecycle::outcomes(rules, name, &r.life, &r.findings),
        })
        .collect()
}

/// The size of each input.
fn inputs(results: &[(String, FileResult)]) -> Vec<InputSummary> {
    results
        .iter()
        .map(|(n, r)| InputSummary {
            file: n.clone(),
            lines: r.lines,
            bytes: r.bytes,
        })
        .collect()
}

/// The finding with its line and context lines redacted ([`crate::redact::redact_line`]).
fn redacted(mut f: Finding) -> Finding {
    f.text = crate::redact::redact_line(&f.text);
    for line in f.context.iter_mut() {
        *line = crate::redact::redact_line(line);
    }
    f
}

/// How many lines a native backtrace's frame may come after its crash line (the header, the
/// signal handler's own frames).
const FRAME_REACH: u64 = 8;

/// How far after a line that announces or wraps an exception (Ray's wrapper line) that
/// exception's own line may come: its traceback, with a remote worker's frames.
const TRACEBACK_REACH: u64 = 400;

/// The exception that ends the traceback an announcing line (`announces`) logged: the first
/// exception of the same class after it in the same input, within a traceback's reach, unless
/// a cause of another known class comes first; else, where that traceback says the error was
/// raised in a subprocess ([`SUBPROCESS_WRAPPERS`]), the subprocess's own exception that
/// follows the wrapper, whatever its class.
fn announced_exception<'a>(
    rules: &RuleSet,
    all: &[Found<'a>],
    (pfi, pf): Found<'a>,
) -> Option<Found<'a>> {
    if !rules.rules.get(pf.rule).is_some_and(|r| r.announces) {
        return None;
    }
    let mut after: Vec<Found<'a>> = all
        .iter()
        .copied()
        .filter(|(fi, f)| {
            *fi == pfi
                && f.kind == RuleKind::Cause
                && f.line > pf.line
                && f.line <= pf.line + TRACEBACK_REACH
        })
        .collect();
    after.sort_by_key(|(_, f)| f.line);
    let same_class = after
        .iter()
        .copied()
        .find(|(_, f)| f.class == pf.class || f.class.explains())
        .filter(|(_, f)| f.class == pf.class && f.exception);
    same_class.or_else(|| {
        let is_wrapper = |f: &RawFinding| {
            let parsed = line::parse(f.text.as_bytes());
            SUBPROCESS_WRAPPERS.iter().any(|w| parsed.msg().contains(w))
        };
        let wrapper = after.iter().position(|(_, f)| is_wrapper(f))?;
        after[wrapper + 1..].iter().copied().find(|(_, f)| {
            !is_wrapper(f)
                && (f.exception || line::is_exception_line(line::parse(f.text.as_bytes()).msg()))
        })
    })
}

/// Exceptions that say a subprocess failed; within an announced traceback, that process's own
/// error follows them (vLLM's model inspection logs the subprocess's output after its
/// `CalledProcessError` and `RuntimeError: Error raised in subprocess:`).
const SUBPROCESS_WRAPPERS: [&str; 2] = ["Error raised in subprocess", "CalledProcessError: "];

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
            && f.line <= pf.line + TRACEBACK_REACH
            && line::parse(f.text.as_bytes())
                .msg()
                .strip_prefix(wrapped)
                .is_some_and(|rest| rest.starts_with(':'))
    })
}

/// What to do about a failure of the engine's own code.
const ENGINE_NEXT_STEP: &str = "Note the engine's version (`vllm --version`, `llama-server --version`) and search the message in its issues; retry with the feature the lines before it name turned off, or pin the previous release or image.";

/// Out-of-memory on exactly one rank/GPU while other ranks are present and did not fail
/// becomes `oom_topology`. An error another rank went on after (an import probe every rank
/// logs while loading) is no failure of that rank.
fn mark_topology(rules: &RuleSet, results: &mut [(String, FileResult)]) {
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
            failed.insert(format!("{fi}/{}", own_label(t, &r.workers)));
        }
        for f in &r.findings {
            let id = worker_id(fi, f, &r.workers);
            if f.kind == RuleKind::Cause && f.class.is_oom() {
                // Ray folds the same line of other actors into one: `[repeated 3x across
                // cluster]` is an out-of-memory on more than one rank. So does an unlabelled
                // line seen more than once among several workers (each rank's C++ `what():`).
                let unlabelled_again = id.ends_with('/') && (f.count > 1 || oom_ids.contains(&id));
                if f.text.contains("x across cluster]") || unlabelled_again {
                    oom_ids.insert(format!("{id} (and more ranks)"));
                }
                oom_ids.insert(id);
            } else if f.kind == RuleKind::Cause
                && f.class.explains()
                && f.class != Class::Nccl
                && !lifecycle::survived(rules, &r.life, f)
            {
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
            let id = worker_id(fi, f, &r.workers);
            if f.kind == RuleKind::Cause && f.class.is_oom() && id == oom_id {
                f.class = Class::OomTopology;
            }
        }
    }
}

/// A finding's worker within the inputs (`input/label`; `input/` for none), its torch rank
/// named by the engine's own label when the input has one ([`own_label`]).
fn worker_id(fi: usize, f: &RawFinding, labels: &HashSet<String>) -> String {
    let rank = f
        .rank
        .as_deref()
        .filter(|r| scan::is_worker_label(r))
        .unwrap_or("");
    format!("{fi}/{}", own_label(rank, labels))
}

/// The engine's own label for torch's `rankN` of the same process: the one label of the input
/// whose tensor-parallel index is N (vLLM's `Worker_TP2`, SGLang's `DP0 TP2`). Any other label,
/// or a rank no single own label matches, is returned as it is.
fn own_label<'a>(label: &'a str, labels: &'a HashSet<String>) -> &'a str {
    let Some(n) = label
        .strip_prefix("rank")
        .filter(|_| line::is_torch_rank(label))
    else {
        return label;
    };
    let tp_index = |w: &str| w.rsplit_once("TP").map(|(_, i)| i.trim() == n);
    let mut same = labels
        .iter()
        .filter(|w| !line::is_torch_rank(w) && tp_index(w) == Some(true));
    match (same.next(), same.next()) {
        (Some(w), None) => w,
        _ => label,
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
