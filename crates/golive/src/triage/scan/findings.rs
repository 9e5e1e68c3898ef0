//! Findings of one file: `RawFinding`, `FileResult`, the key that makes two findings one
//! failure, and recording/settling/merging them (crash loops become one counted finding).

use std::collections::HashSet;

use super::super::lifecycle::Lifecycle;
use super::super::phase::Evidence;
use super::super::rules::RuleKind;
use super::super::Class;
use super::{Scanner, LOOKAHEAD};

/// A rule match in one file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawFinding {
    pub rule: usize,
    pub kind: RuleKind,
    pub class: Class,
    pub line: u64,
    pub text: String,
    pub rank: Option<String>,
    pub ts: Option<u64>,
    pub context: Vec<String>,
    /// Phase evidence (frames, the line and lines after it) for `phase` rules: what the
    /// phase patterns found in it, and its length in bytes (lines joined by newlines).
    pub(super) evidence: Evidence,
    pub(super) evidence_len: usize,
    pub(super) phase_open_until: u64,
    pub during_shutdown: bool,
    /// The server had served (since its last start) when this line was logged.
    pub(crate) served: bool,
    /// Found on a WARNING line: a cause only when nothing fatal of another class follows.
    pub soft: bool,
    /// Occurrences of the same failure (crash loops): this one is the first.
    pub count: u64,
    /// Line and timestamp of the last occurrence (when `count` > 1).
    pub last_line: u64,
    pub last_ts: Option<u64>,
    /// Hash of the message without its prefixes (timestamps, pids): what makes two
    /// occurrences "the same failure".
    pub(crate) msg_hash: u64,
    /// Merged into an earlier occurrence (dropped at the end).
    pub(super) merged: bool,
    /// Raised while the HTTP server handled one request (its traceback runs through the ASGI
    /// server's request task): it failed that request, and the server went on.
    pub request: bool,
    /// The exception line that ends a traceback (an uncaught exception: what ended its
    /// process, unless something caught it).
    pub exception: bool,
    /// Raised in a script of its own: no frame of its traceback is in an installed package or
    /// an engine's source ([`super::own_script`]). Once the server served, that is a client or
    /// a harness sharing the log (a benchmark script), not the server.
    pub script: bool,
    /// Requests the server had answered when the (last occurrence of the) line was logged
    /// ([`super::super::lifecycle::Lifecycle::answers`]).
    pub answers_before: u64,
}

pub(super) fn msg_hash(msg: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    msg.hash(&mut h);
    h.finish()
}

/// What makes two findings the same failure: rule, kind, class, phase of the server, rank
/// and message.
pub(super) type FindingKey = (usize, u8, Class, bool, bool, Option<String>, u64);

fn finding_key(f: &RawFinding) -> FindingKey {
    key_as(f, f.kind, f.class)
}

fn key_as(f: &RawFinding, kind: RuleKind, class: Class) -> FindingKey {
    (
        f.rule,
        kind as u8,
        class,
        f.during_shutdown,
        f.served,
        f.rank.as_ref().map(|r| strip_pid(r).to_string()),
        f.msg_hash,
    )
}

/// The kind a finding is recorded with: during an orderly shutdown, errors are teardown noise
/// (sockets, collectives, imports and the engine's own code going away), except what the
/// hardware or memory says then: a GPU fault, a driver error or an out-of-memory is still a cause.
fn recorded_kind(f: &RawFinding) -> RuleKind {
    if f.during_shutdown && f.kind == RuleKind::Cause && !f.class.outlives_shutdown() {
        RuleKind::Consequence
    } else {
        f.kind
    }
}

/// Processes whose errors wait for progress, at most (more labels: the first ones wait).
const MAX_PENDING: usize = 256;

/// The process a label names: `EngineCore_DP0 pid=1` and `EngineCore_DP0 pid=2` are one
/// process across restarts. A worker whose name carries no rank (Ray's `RayWorkerWrapper
/// pid=91931, ip=10.0.0.5`, vLLM V0's `VllmWorkerProcess pid=7`: every rank an actor of the
/// same name) is told apart by its pid (and node): one rank's loading is not another's.
pub(crate) fn strip_pid(label: &str) -> &str {
    let name = label.split(" pid=").next().unwrap_or(label);
    if name.len() < label.len()
        && super::is_worker_label(name)
        && !name.bytes().any(|b| b.is_ascii_digit())
    {
        return label;
    }
    name
}

/// What one file yielded.
#[derive(Debug, Default, PartialEq)]
pub struct FileResult {
    pub findings: Vec<RawFinding>,
    pub serving_line: Option<u64>,
    /// How far the processes of this file got and how they ended ([`super::super::lifecycle`]).
    pub life: Lifecycle,
    pub workers: HashSet<String>,
    pub ranks_with_traceback: HashSet<String>,
    pub facts: HashSet<String>,
    pub lines: u64,
    pub bytes: u64,
    pub binary: bool,
    pub notes: Vec<String>,
    /// The log stopped before serving: its last error after the last progress, for when
    /// nothing else is found (see `scan::tail`).
    pub tail: Option<RawFinding>,
}

impl Scanner<'_> {
    /// Whether `f`, once recorded, certainly merges into an earlier occurrence of the same
    /// failure (whatever phase an out-of-memory turns out to have): its context is not needed.
    pub(super) fn surely_repeat(&self, f: &RawFinding) -> bool {
        let kind = recorded_kind(f);
        let phase = f.rule != usize::MAX && self.rules.rules[f.rule].phase;
        let classes: &[Class] = if phase {
            &[Class::OomStartup, Class::OomRuntime]
        } else {
            std::slice::from_ref(&f.class)
        };
        classes.iter().all(|&c| {
            self.seen
                .get(&key_as(f, kind, c))
                .is_some_and(|&j| self.res.findings[j].line <= f.line)
        })
    }

    pub(super) fn record(&mut self, mut f: RawFinding, line_no: u64) {
        if f.served
            && self
                .rules
                .rules
                .get(f.rule)
                .is_some_and(|r| r.before_serving)
        {
            return;
        }
        f.kind = recorded_kind(&f);
        if (f.kind == RuleKind::Consequence && !f.during_shutdown)
            || self.rules.rules.get(f.rule).is_some_and(|r| r.fatal)
        {
            self.res.life.crashed();
        }
        f.answers_before = self.res.life.answers;
        if self.child_cand && self.rules.names_child_death(&f.text) {
            self.res.life.child_ended(line_no);
        }
        // The next progress marker says whether this error was survived.
        self.want_progress = true;
        self.last_error_ts = self.last_error_ts.max(f.last_ts);
        let label = strip_pid(f.rank.as_deref().unwrap_or(""));
        if !self.pending.contains(label) && self.pending.len() < MAX_PENDING {
            self.pending.insert(label.to_string());
        }
        self.settle(line_no);
        if f.rule != usize::MAX && self.rules.rules[f.rule].phase {
            f.evidence = f.evidence.or(Evidence::of(&f.text));
            f.evidence_len += 1 + f.text.len();
            f.phase_open_until = line_no + LOOKAHEAD;
            self.force_slow_until = self.force_slow_until.max(line_no + LOOKAHEAD);
            self.unsettled.push(self.res.findings.len());
            self.res.findings.push(f);
            return;
        }
        // A repeat of an earlier failure only counts (no entry kept: a crash loop stays small).
        if let Some(&j) = self.seen.get(&finding_key(&f)) {
            let first = &mut self.res.findings[j];
            if first.line <= f.line {
                first.count += f.count;
                if f.last_line >= first.last_line {
                    first.last_line = f.last_line;
                    first.last_ts = f.last_ts;
                    first.answers_before = f.answers_before;
                }
                return;
            }
        }
        self.res.findings.push(f);
        self.merge_last_into_first(self.res.findings.len() - 1);
    }

    /// Decides the phase of out-of-memory findings whose evidence is complete (before line
    /// `line_no`, or all with `u64::MAX`) and merges repeats.
    pub(super) fn settle(&mut self, line_no: u64) {
        if self.unsettled.is_empty() {
            return;
        }
        let due: Vec<usize>;
        (due, self.unsettled) = std::mem::take(&mut self.unsettled)
            .into_iter()
            .partition(|&i| self.res.findings[i].phase_open_until < line_no);
        for i in due {
            let f = &mut self.res.findings[i];
            f.class = f.evidence.class(f.served);
            self.merge_last_into_first(i);
        }
        self.compact();
    }

    /// Drops merged findings once they are most of the list (memory stays bounded in a crash
    /// loop of out-of-memory failures); the order of the others is kept.
    fn compact(&mut self) {
        if self.merged < 1024 || self.merged * 2 < self.res.findings.len() {
            return;
        }
        self.merged = 0;
        let mut new_index = vec![usize::MAX; self.res.findings.len()];
        let mut k = 0;
        for (i, f) in self.res.findings.iter().enumerate() {
            if !f.merged {
                new_index[i] = k;
                k += 1;
            }
        }
        self.res.findings.retain(|f| !f.merged);
        for v in self.seen.values_mut() {
            *v = new_index[*v];
        }
        for u in self.unsettled.iter_mut() {
            *u = new_index[*u];
        }
    }

    /// Merges finding `i` into an earlier occurrence of the same failure, if any: the
    /// repeats of a crash loop become one finding with a count and the last occurrence.
    pub(super) fn merge_last_into_first(&mut self, i: usize) {
        let key = finding_key(&self.res.findings[i]);
        match self.seen.get(&key) {
            None => {
                self.seen.insert(key, i);
            }
            Some(&j) => {
                let (first, other) = if self.res.findings[i].line < self.res.findings[j].line {
                    (i, j)
                } else {
                    (j, i)
                };
                let (count, last_line, last_ts) = {
                    let (a, b) = (&self.res.findings[i], &self.res.findings[j]);
                    let last = if a.last_line >= b.last_line { a } else { b };
                    (a.count + b.count, last.last_line, last.last_ts)
                };
                let f = &mut self.res.findings[first];
                f.count = count;
                f.last_line = last_line;
                f.last_ts = last_ts;
                let o = &mut self.res.findings[other];
                o.merged = true;
                self.merged += 1;
                o.context = Vec::new();
                o.text = String::new();
                self.seen.insert(key, first);
            }
        }
    }
}
