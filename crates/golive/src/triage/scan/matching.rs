//! Literal candidates and rule matching on one line, worker labels, context lines and
//! new findings.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::super::clean::clean;
use super::super::line::{self, ParsedLine};
use super::super::prefilter::Prefilter;
use super::super::rules::{RuleKind, RuleSet};
use super::super::Class;
use super::findings::{msg_hash, RawFinding};
use super::{cut, Scanner, MAX_LINE};

/// Raw worker labels remembered as judged (a bound: pids of restarted workers add labels).
const MAX_WORKER_RAW: usize = 1 << 16;

/// The pattern occurrences the prefilter found on a line starting at `ls`.
pub(super) struct LineLiterals<'p> {
    pub(super) ls: usize,
    pub(super) pats: &'p [(usize, u32)],
    pub(super) filter: &'p Prefilter,
    /// False only when no rule literal occurs on the line (then traceback source lines need
    /// no rule matching).
    pub(super) has_literal: bool,
}

impl LineLiterals<'_> {
    /// Rules whose literals occur on the line's text (sorted, deduplicated): from the
    /// prefilter's occurrences when the text is the raw line, else searched in the text
    /// (cleaned of terminal codes, a literal the raw bytes split can appear).
    fn candidates(&self, rules: &RuleSet, pl: &ParsedLine, out: &mut Vec<usize>) {
        match &pl.text {
            Cow::Borrowed(text) => rules.rules_of(self.pats, self.ls + text.len(), out),
            Cow::Owned(text) => {
                let mut pats = Vec::new();
                self.filter.patterns_of(text.as_bytes(), &mut pats);
                rules.rules_of(&pats, text.len(), out);
            }
        }
    }
}

/// Words of a line that [`Scanner::handle_line`] acts on whatever the rules say: an indented
/// `raise ` opens a traceback, and a worker label (see [`super::WORKER_LABEL_WORDS`]) is noted.
/// (One vectorised search for all of them: six separate substring searches cost more than
/// the rest of the judgement of such a line.)
fn has_acted_on_word(raw: &[u8]) -> bool {
    static W: OnceLock<aho_corasick::packed::Searcher> = OnceLock::new();
    W.get_or_init(|| {
        aho_corasick::packed::Searcher::new(
            std::iter::once("raise ").chain(super::WORKER_LABEL_WORDS),
        )
        .expect("a handful of short words fit the packed searcher")
    })
    .find(raw)
    .is_some()
}

impl Scanner<'_> {
    /// Whether [`Scanner::handle_line`] would leave a line outside any traceback without
    /// effect, judged on its raw bytes without parsing it: no traceback anchor, no word it
    /// acts on, no terminal code (rules read the cleaned text), and no rule of its literals
    /// (`pats`, the line starting at `ls`) whose regex may match it. Many common lines carry
    /// a generic configuration word (`requires`, `is disabled`, `nrecognized`) that only an
    /// exception line states as a cause.
    pub(super) fn inert_line(&mut self, raw: &[u8], ls: usize, pats: &[(usize, u32)]) -> bool {
        // A TTY's final `\r` is all that cleaning removes from such a line.
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if !self.fast_paths
            || memchr::memchr2(0x1b, b'\r', raw).is_some()
            || pats
                .iter()
                .any(|&(_, pi)| self.rules.pattern_rule[pi as usize].is_none())
            || has_acted_on_word(raw)
        {
            return false;
        }
        let Ok(text) = std::str::from_utf8(raw) else {
            return false;
        };
        self.rules.rules_of(pats, ls + text.len(), &mut self.cand);
        !self.rules.may_match_text(&self.cand, text)
    }

    /// Records the worker label around a worker anchor, cheaply (no full line parsing).
    /// `buf[ls..end]` ends with the anchor; the label closes before `le`, the line's end (a
    /// label never spans lines: found by comparing reads in small buffers with one read).
    pub(super) fn note_worker(&mut self, buf: &[u8], ls: usize, end: usize, le: usize) {
        let Some(open) = memchr::memrchr2(b'(', b'[', &buf[ls..end]).map(|i| ls + i) else {
            return;
        };
        let close_ch = if buf[open] == b'(' { b')' } else { b']' };
        let Some(close) =
            memchr::memchr(close_ch, &buf[end..le.min(end + 120).max(end)]).map(|i| end + i)
        else {
            return;
        };
        // Every line of a multi-rank log carries a label, and there are few labels: each
        // raw label (pid included) is judged once.
        let raw = &buf[open + 1..close];
        if self.worker_raw.contains(raw) {
            return;
        }
        if self.worker_raw.len() < MAX_WORKER_RAW {
            self.worker_raw.insert(raw.to_vec());
        }
        let mut label = raw.to_vec();
        if !label.starts_with(b"RayWorkerWrapper") {
            if let Some(p) = memchr::memmem::find(&label, b" pid=") {
                label.truncate(p);
            }
        }
        if let Ok(l) = std::str::from_utf8(&label) {
            if !self.res.workers.contains(l) {
                self.res.workers.insert(l.to_string());
            }
        }
    }

    /// The context lines before buf[ls..] for a finding that may be reported: a repeat of a
    /// failure already found (a crash loop) merges into the first and needs none.
    pub(super) fn attach_context(
        &self,
        f: &mut RawFinding,
        buf: &[u8],
        ls: usize,
        buf_at_line_start: bool,
    ) {
        f.context = if self.surely_repeat(f) {
            Vec::new()
        } else {
            self.context_before(buf, ls, buf_at_line_start)
        };
    }

    /// Up to `self.context` lines before buf[ls..].
    pub(super) fn context_before(
        &self,
        buf: &[u8],
        ls: usize,
        buf_at_line_start: bool,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let mut end = ls; // exclusive end of the previous line (its '\n' at end-1)
        while out.len() < self.context && end > 0 {
            let line_end = end - 1; // index of '\n'
            let s = memchr::memrchr(b'\n', &buf[..line_end]).map_or(0, |i| i + 1);
            if s == 0 && !buf_at_line_start {
                break; // a partial line at the start of the kept history
            }
            let raw = &buf[s..line_end.min(s + MAX_LINE)];
            out.push(cut(&clean(raw)));
            end = s;
        }
        out.reverse();
        out
    }

    /// A finding on this line, without context lines (see [`Self::attach_context`]).
    pub(super) fn new_finding(&self, rule: usize, pl: &ParsedLine, line_no: u64) -> RawFinding {
        let (kind, class, request) = match self.rules.rules.get(rule) {
            Some(r) => (r.kind, r.class, r.request),
            None => (RuleKind::Cause, Class::Unknown, false),
        };
        RawFinding {
            rule,
            kind,
            class,
            line: line_no,
            text: cut(&pl.text),
            rank: pl.rank().map(str::to_string),
            ts: pl.ts,
            context: Vec::new(),
            evidence: Default::default(),
            evidence_len: 0,
            phase_open_until: 0,
            during_shutdown: self.shutdown,
            served: self.res.serving_line.is_some(),
            soft: matches!(pl.level, Some("WARNING" | "WARN")),
            count: 1,
            last_line: line_no,
            last_ts: pl.ts,
            msg_hash: msg_hash(pl.msg()),
            merged: false,
            request,
            exception: false,
            answers_before: 0,
            script: false,
        }
    }

    /// First rule that matches the line (literal candidates, regex, frames). On exception
    /// lines (`frames` given) the rules without literals are tried too, in rule order.
    pub(super) fn match_rule(
        &mut self,
        pl: &ParsedLine,
        lits: &LineLiterals,
        frames: Option<(&str, usize)>,
        causes_only: bool,
    ) -> Option<usize> {
        let mut cand = std::mem::take(&mut self.cand);
        lits.candidates(self.rules, pl, &mut cand);
        self.child_cand = cand.iter().any(|&ri| self.rules.rules[ri].child);
        if frames.is_some() {
            cand.extend_from_slice(&self.rules.exception_rules);
            cand.sort_unstable();
            cand.dedup();
        }
        let mut found = None;
        // Informational lines never state a failure; warnings only for rules that allow it.
        let level = pl.level.unwrap_or("");
        let info_line = matches!(level, "INFO" | "DEBUG") || line::has_nccl_info(&pl.text);
        let warning_line = matches!(level, "WARNING" | "WARN");
        for &ri in &cand {
            let r = &self.rules.rules[ri];
            if causes_only && r.kind != RuleKind::Cause {
                continue;
            }
            // A fact never hides a cause on the same line (`HIP out of memory` is both).
            if r.kind == RuleKind::Fact {
                if r.regex.as_ref().is_none_or(|re| re.is_match(&pl.text)) {
                    if let Some(f) = &r.fact {
                        if !self.res.facts.contains(f) {
                            self.res.facts.insert(f.clone());
                        }
                    }
                }
                continue;
            }
            if matches!(
                r.kind,
                RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint
            ) && !r.on_info
                && (info_line || (warning_line && !r.on_warning))
            {
                continue;
            }
            if let Some(fr) = &r.frames {
                match frames {
                    Some((f, slot)) if self.frames_memo.matches(slot, ri, fr, f) => {}
                    _ => continue,
                }
                // The interpreter's words for a code bug (matched before, generic) are the
                // code's fault: frames of the KV-cache or the distributed layer do not make
                // them a prefix-cache setting or a failed transport.
                if found.is_some_and(|g: usize| r.frames_yield_to(&self.rules.rules[g])) {
                    continue;
                }
            }
            if !r.regex_matches(pl) {
                continue;
            }
            // A generic rule ("AttributeError: ", "not supported") yields to a specific one.
            if r.generic {
                found = found.or(Some(ri));
                continue;
            }
            found = Some(ri);
            break;
        }
        self.cand = cand;
        found
    }
}
