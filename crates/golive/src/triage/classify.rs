//! Classes from where a failure was stated, beyond the message: the source file a logger line
//! names (vLLM's `[core.py:708]`, glog's `socket.cpp:42]`) through the frame map, and bare
//! ERROR logger lines as a last resort.
//!
//! A bare ERROR/CRITICAL line that no rule explains (no exception, no known message) is still a
//! failure statement, so triage reports it rather than saying "No failure found" - but it is
//! weak: it is the primary cause only when no other cause is found in any input, because
//! engines also log request errors and teardown at ERROR. Lines after an orderly shutdown are
//! consequences (the scanner demotes causes of unknown class there), and only loggers that
//! name their source file count (a wrapper that tags all of stderr as ERROR does not).

use std::collections::{HashMap, HashSet};

use super::line;
use super::rules::RuleSet;
use super::scan::{FileResult, RawFinding};
use super::Class;

/// Weak findings (bare ERROR logger lines): an exception stated on such a line is a
/// strong cause of its own; the others take the class of their logger's source file (or of
/// the component their message names, see [`RuleSet::logger_rule`]). Returns
/// the frame-map entry that named the class, per (input, line), for the texts.
pub fn classify_weak(
    rules: &RuleSet,
    results: &mut [(String, FileResult)],
) -> HashMap<(usize, u64), usize> {
    let mut via_logger = HashMap::new();
    for (fi, (_, r)) in results.iter_mut().enumerate() {
        for f in r.findings.iter_mut() {
            if f.rule == usize::MAX || !rules.rules[f.rule].weak {
                continue;
            }
            let pl = line::parse(f.text.as_bytes());
            if line::is_exception_line(pl.msg()) {
                // The exception no rule knows, as a traceback's last line would be.
                f.rule = usize::MAX;
                continue;
            }
            if let Some(fr) = rules.logger_rule(&f.text) {
                if f.class == Class::Unknown {
                    f.class = rules.rules[fr].class;
                }
                via_logger.insert((fi, f.line), fr);
            }
        }
    }
    via_logger
}

/// Whether a finding is weak (see the module docs).
pub fn is_weak(rules: &RuleSet, rule: usize) -> bool {
    rule != usize::MAX && rules.rules[rule].weak
}

/// The causes a primary is chosen from: the strong ones when there are any, else the weak.
pub fn strongest<'a>(
    rules: &RuleSet,
    causes: Vec<(usize, &'a RawFinding)>,
) -> Vec<(usize, &'a RawFinding)> {
    if causes.iter().all(|(_, f)| is_weak(rules, f.rule)) {
        return causes;
    }
    causes
        .into_iter()
        .filter(|(_, f)| !is_weak(rules, f.rule))
        .collect()
}

/// Drops weak findings on a line that a strong finding of the same input states (an ERROR
/// summary line that the exception after it was moved to).
pub fn drop_weak_repeats(rules: &RuleSet, all: &mut Vec<(usize, &RawFinding)>) {
    let strong: HashSet<(usize, u64)> = all
        .iter()
        .filter(|(_, f)| !is_weak(rules, f.rule))
        .map(|(fi, f)| (*fi, f.line))
        .collect();
    all.retain(|(fi, f)| !(is_weak(rules, f.rule) && strong.contains(&(*fi, f.line))));
}
