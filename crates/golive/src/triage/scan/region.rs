//! One region of the buffer (whole lines): the prefilter's needle occurrences, searched beside
//! the line work ([`super::occ`]), pick the lines to handle; inside tracebacks every line is
//! read, body lines through their fast path.

use super::super::prefilter::occ_parts;
use super::super::rules::WORKER_ANCHOR;
use super::{matching, occ, Scanner, MAX_LINE};
use crate::text::LineCount;

impl Scanner<'_> {
    /// Scans buf[a..b) (b at a line end or the buffer end).
    pub(super) fn scan_region(
        &mut self,
        buf: &[u8],
        a: usize,
        b: usize,
        lines: &mut LineCount,
        buf_at_line_start: bool,
        pre: Option<occ::Pre>,
    ) {
        let rules = self.rules;
        let filter = self.filter.take();
        let f = filter.as_deref().unwrap_or(&rules.prefilter);
        let occ = std::mem::take(&mut self.occ);
        self.occ = match pre {
            // The reader searched the region already, but for its seam.
            Some(pre) => {
                let mut view = occ::OccView::searched(f, buf, a, b, occ, &pre);
                self.scan_lines(buf, a, b, lines, buf_at_line_start, &mut view);
                view.occ
            }
            // A large region is searched block by block beside the line work.
            None => {
                let blocks = occ::Blocks::new(f, buf, a, b);
                std::thread::scope(|s| {
                    if let Some(bl) = &blocks {
                        s.spawn(|| bl.help());
                    }
                    let mut view = occ::OccView::new(f, buf, a, b, occ, blocks.as_ref());
                    self.scan_lines(buf, a, b, lines, buf_at_line_start, &mut view);
                    view.occ
                })
            }
        };
        self.filter = filter;
    }

    /// The lines of buf[a..b), with the needle occurrences of `view`.
    fn scan_lines(
        &mut self,
        buf: &[u8],
        a: usize,
        b: usize,
        lines: &mut LineCount,
        buf_at_line_start: bool,
        view: &mut occ::OccView,
    ) {
        let rules = self.rules;
        let f = view.filter;
        let needles = f.needles();
        let mut pats = std::mem::take(&mut self.pats);
        // Occurrences before `k` lie before `pos`, the start of the next line to scan.
        let mut k = 0usize;
        let mut pos = a;
        while pos < b {
            lines.count_to(buf, pos);
            while k < view.occ.len() && view.at(k) < pos {
                k += 1;
            }
            if self.slow_mode(lines.next_line()) {
                // Every line is read (inside a traceback, or phase evidence after an OOM).
                let e = memchr::memchr(b'\n', &buf[pos..b]).map_or(b, |i| pos + i);
                view.ensure(e);
                let occ = &view.occ;
                let j = line_end_index(occ, k, a, e);
                let has_rule_literal = occ[k..j]
                    .iter()
                    .any(|&o| !needles.serving_only(occ_parts(o).1));
                let line_needles = occ[k..j].iter().map(|&o| {
                    let (p, n) = occ_parts(o);
                    (a + p, n)
                });
                needles.patterns_in(buf, pos, e, line_needles, &mut pats);
                // A traceback's body line: its effect without a parse.
                if self.traceback_body_line(
                    &buf[pos..e.min(pos + MAX_LINE)],
                    lines.next_line(),
                    has_rule_literal.then_some((pos, pats.as_slice())),
                ) {
                    if e < b {
                        lines.line_ended_at(e);
                    }
                    pos = e + 1;
                    continue;
                }
                // Whether any literal (other than a serving marker) occurs on the line: rule
                // matching of traceback source lines is skipped without one.
                // (Terminal codes and `\r` are removed before rules match: such a line may
                // hold a literal the raw bytes split.)
                let has_literal =
                    has_rule_literal || memchr::memchr2(0x1b, b'\r', &buf[pos..e]).is_some();
                let lits = matching::LineLiterals {
                    ls: pos,
                    pats: &pats,
                    filter: f,
                    has_literal,
                };
                self.handle_line(buf, pos, e, lines.next_line(), buf_at_line_start, &lits);
                // The newline ending the line is counted here (no search for it).
                if e < b {
                    lines.line_ended_at(e);
                }
                pos = e + 1;
                k = j;
                continue;
            }
            // The next line holding a needle that counts: serving markers only until the
            // server serves, and after that only while an error waits for the progress that
            // shows it was survived.
            let serving = self.skip_serving();
            // Only an occurrence before which all are known is the next one (occurrences
            // of blocks not searched yet may come before the last ones held).
            loop {
                while view.settled(k) && serving && needles.serving_only(occ_parts(view.occ[k]).1) {
                    if needles.marks_answer(occ_parts(view.occ[k]).1) {
                        self.answered_unread(buf, view.at(k), b);
                    }
                    k += 1;
                }
                if view.settled(k) || view.complete() {
                    break;
                }
                view.pull();
            }
            if k >= view.occ.len() {
                break;
            }
            let p = view.at(k);
            let le = memchr::memchr(b'\n', &buf[p..b]).map_or(b, |i| p + i);
            view.ensure(le);
            let occ = &view.occ;
            let ls = memchr::memrchr(b'\n', &buf[pos..p]).map_or(pos, |i| pos + i + 1);
            // All needles of the line (serving markers passed over above included).
            let mut k0 = k;
            while k0 > 0 && view.at(k0 - 1) >= ls {
                k0 -= 1;
            }
            let j = line_end_index(occ, k, a, le);
            let line_needles = occ[k0..j].iter().map(|&o| {
                let (p, n) = occ_parts(o);
                (a + p, n)
            });
            needles.patterns_in(buf, ls, le, line_needles, &mut pats);
            // The patterns in leftmost-first order, as one automaton over all of them (without
            // the serving markers once the server serves) would report them: worker prefixes
            // note the rank and the search goes on after them; any other pattern makes the
            // line a candidate.
            let mut from = ls;
            let mut handle = false;
            for &(s, pi) in &pats {
                if s < from || (serving && needles.pattern_serving(pi)) {
                    continue;
                }
                if rules.pattern_rule[pi as usize] == Some(WORKER_ANCHOR) {
                    let end = s + needles.pattern_len(pi);
                    self.note_worker(buf, ls, end, le);
                    from = end;
                    continue;
                }
                handle = true;
                break;
            }
            if handle && !self.inert_line(&buf[ls..le.min(ls + MAX_LINE)], ls, &pats) {
                lines.count_to(buf, ls);
                let lits = matching::LineLiterals {
                    ls,
                    pats: &pats,
                    filter: f,
                    has_literal: true,
                };
                self.handle_line(buf, ls, le, lines.next_line(), buf_at_line_start, &lits);
            }
            pos = le + 1;
            k = j;
        }
        // The deferred source lines leave the buffer with the region.
        self.resolve_deferred(buf, buf_at_line_start, f);
        lines.count_to(buf, b);
        self.pats = pats;
    }
}

/// The index of the first occurrence at or after `e` (absolute), from index `k`: a walk, since
/// a line holds few occurrences (a binary search over the rest of the region was the
/// scanner's hottest line inside tracebacks).
fn line_end_index(occ: &[u64], k: usize, a: usize, e: usize) -> usize {
    k + occ[k..]
        .iter()
        .position(|&o| occ_parts(o).0 >= e - a)
        .unwrap_or(occ.len() - k)
}
