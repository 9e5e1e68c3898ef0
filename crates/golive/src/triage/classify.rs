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
use std::sync::OnceLock;

use regex::Regex;

use super::line;
use super::rules::RuleSet;
use super::scan::{FileResult, RawFinding};
use super::Class;

/// The source file a logger header names: vLLM's `ERROR 10-25 13:08:43 [core.py:708] `
/// (`[v1/core/block_pool.py:42]` with relative paths), its older `engine.py:389] `, and glog's
/// `E0909 07:11:16.569000 123 socket.cpp:42] `.
pub fn logger_file(line: &str) -> Option<&str> {
    static R: OnceLock<Regex> = OnceLock::new();
    let re = R.get_or_init(|| {
        Regex::new(concat!(
            r"(?:^|[\s)\]|])(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?",
            r"|[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ )",
            r"([\w.\-/]+\.(?:py|cc|cpp|cu|h|hpp|rs)):\d+\]"
        ))
        .unwrap()
    });
    re.captures(line).and_then(|c| c.get(1)).map(|m| m.as_str())
}

/// The line that ends a traceback when its exception type has none of the usual suffixes
/// (`Exception: ...`, `_RemoteUnavailable: ...`, `UpdateRejected: ...`): a class name (a
/// capitalised identifier, optionally behind a module path) and the message, right after a
/// frame's source line. Python prints nothing else there.
pub fn ends_traceback(msg: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"^([a-z_][\w]*\.)*_?[A-Z][A-Za-z0-9_]*(: |:$|$)").unwrap())
        .is_match(msg)
}

/// torch's own rank label (`[rank3]:` prefixes), as opposed to an engine's worker label.
pub fn is_torch_rank(label: &str) -> bool {
    label
        .strip_prefix("rank")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logger_files_of_vllm_and_glog_headers() {
        assert_eq!(
            logger_file("(EngineCore_DP0 pid=1) ERROR 10-25 13:08:43 [core.py:708] x"),
            Some("core.py")
        );
        assert_eq!(
            logger_file("ERROR 02-19 07:03:11 engine.py:389] x"),
            Some("engine.py")
        );
        assert_eq!(
            logger_file("INFO 01-02 10:00:00 [v1/core/block_pool.py:42] x"),
            Some("v1/core/block_pool.py")
        );
        assert_eq!(
            logger_file("E0909 07:11:16.569000 123 torch/csrc/socket.cpp:42] [c10d] x"),
            Some("torch/csrc/socket.cpp")
        );
        // A wrapper logger's level says nothing about the source.
        assert_eq!(
            logger_file("2024-01-22 14:32:27 | ERROR | stderr | x"),
            None
        );
        assert_eq!(logger_file("[2025-03-07 10:04:13 TP0] Failed to x"), None);
    }

    #[test]
    fn exception_types_without_the_usual_suffix_end_a_traceback() {
        assert!(ends_traceback("Exception: Failed to upload file"));
        assert!(ends_traceback("_RemoteUnavailable: the remote read failed"));
        assert!(ends_traceback("vllm.distributed.x._UnsupportedFakeOp: op"));
        assert!(ends_traceback("StopIteration"));
        // Source lines of frames printed without indentation are not exceptions.
        assert!(!ends_traceback(
            "self.comm: ncclComm_t = self.nccl.ncclCommInitRank("
        ));
        assert!(!ends_traceback("return func(*args, **kwargs)"));
    }
}
