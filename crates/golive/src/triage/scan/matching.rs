//! Literal candidates and rule matching on one line, worker labels, context lines and
//! new findings.

use super::super::line::{self, ParsedLine};
use super::super::rules::RuleKind;
use super::super::Class;
use super::findings::{msg_hash, RawFinding};
use super::{cut, parallel, Scanner, MAX_LINE, PARALLEL_MIN};

impl Scanner<'_> {
    /// Start positions of every literal match in buf[a..b), sorted, from the vectorised
    /// searchers; `None` when they are not available on this CPU. Large regions are searched
    /// by two threads (half of the searchers each).
    pub(super) fn candidates_in(&self, buf: &[u8], a: usize, b: usize) -> Option<Vec<usize>> {
        let packed = self.rules.packed.as_ref()?;
        // Serving markers are searched lazily by the caller.
        let searchers: Vec<&aho_corasick::packed::Searcher> = packed.iter().collect();
        let hay = &buf[..b];
        let collect = |group: &[&aho_corasick::packed::Searcher]| {
            let mut out = Vec::new();
            for s in group {
                let mut at = a;
                while at < b {
                    match s.find_in(hay, aho_corasick::Span::from(at..b)) {
                        Some(m) => {
                            out.push(m.start());
                            at = m.start() + 1;
                        }
                        None => break,
                    }
                }
            }
            out
        };
        let mut out = if b - a >= PARALLEL_MIN && searchers.len() > 1 && parallel() {
            let (left, right) = searchers.split_at(searchers.len() / 2);
            std::thread::scope(|sc| {
                let other = sc.spawn(|| collect(right));
                let mut mine = collect(left);
                mine.extend(other.join().unwrap_or_default());
                mine
            })
        } else {
            collect(&searchers)
        };
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// Records the worker label around a worker anchor, cheaply (no full line parsing).
    pub(super) fn note_worker(&mut self, before: &[u8], after: &[u8]) {
        let Some(open) = memchr::memrchr2(b'(', b'[', before) else {
            return;
        };
        let close_ch = if before[open] == b'(' { b')' } else { b']' };
        let tail = &after[..after.len().min(120)];
        let Some(close) = memchr::memchr(close_ch, tail) else {
            return;
        };
        let mut label = before[open + 1..].to_vec();
        label.extend_from_slice(&tail[..close]);
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
            out.push(cut(&line::clean(raw)));
            end = s;
        }
        out.reverse();
        out
    }

    pub(super) fn new_finding(
        &self,
        rule: usize,
        pl: &ParsedLine,
        line_no: u64,
        buf: &[u8],
        ls: usize,
        at_start: bool,
    ) -> RawFinding {
        let (kind, class) = match self.rules.rules.get(rule) {
            Some(r) => (r.kind, r.class),
            None => (RuleKind::Cause, Class::Unknown),
        };
        RawFinding {
            rule,
            kind,
            class,
            line: line_no,
            text: cut(&pl.text),
            rank: pl.rank.clone(),
            ts: pl.ts,
            context: self.context_before(buf, ls, at_start),
            evidence: String::new(),
            phase_open_until: 0,
            during_shutdown: self.shutdown,
            served: self.res.serving_line.is_some(),
            soft: matches!(pl.level.as_deref(), Some("WARNING" | "WARN")),
            count: 1,
            last_line: line_no,
            last_ts: pl.ts,
            msg_hash: msg_hash(pl.msg()),
            merged: false,
        }
    }

    /// First rule that matches the line (literal candidates, regex, frames). On exception
    /// lines (`frames` given) the rules without literals are tried too, in rule order.
    pub(super) fn match_rule(
        &mut self,
        pl: &ParsedLine,
        frames: Option<&str>,
        causes_only: bool,
    ) -> Option<usize> {
        let mut cand = std::mem::take(&mut self.cand);
        self.rules.candidates(pl.text.as_bytes(), &mut cand);
        if frames.is_some() {
            cand.extend_from_slice(&self.rules.exception_rules);
            cand.sort_unstable();
            cand.dedup();
        }
        let mut found = None;
        // Informational lines never state a failure; warnings only for rules that allow it.
        let level = pl.level.as_deref().unwrap_or("");
        let info_line = matches!(level, "INFO" | "DEBUG") || pl.text.contains(" NCCL INFO ");
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
            ) && (info_line || (warning_line && !r.on_warning))
            {
                continue;
            }
            if let Some(fr) = &r.frames {
                match frames {
                    Some(f) if fr.is_match(f) => {}
                    _ => continue,
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
