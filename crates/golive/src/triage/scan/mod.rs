//! The streaming scanner: one pass over one log, large buffers, a literal prefilter over the
//! whole buffer (aho-corasick), and line-by-line work only on candidate lines and inside
//! Python tracebacks.

use std::collections::{HashMap, HashSet};
use std::io::{self, Read};
use std::sync::OnceLock;

use super::line;
use super::rules::{RuleKind, RuleSet};
use super::Class;
use aho_corasick::Input;

const CHUNK: usize = 8 << 20;
/// Bytes of already scanned text kept in front of the buffer for context lines.
const HISTORY: usize = 256 << 10;
/// Longer lines are cut here (the rest of the line is skipped, never buffered).
pub const MAX_LINE: usize = 1 << 20;
/// Lines displayed are cut to this many characters.
const MAX_SHOWN: usize = 2000;
/// Lines after an out-of-memory line read for phase evidence.
const LOOKAHEAD: u64 = 15;
/// A traceback with no new frame for this many lines is considered cut off.
const TB_STALE: u64 = 40;
/// Regions at least this large are searched by two threads.
const PARALLEL_MIN: usize = 1 << 20;

/// Whether this machine has a second core to search with.
fn parallel() -> bool {
    static P: OnceLock<bool> = OnceLock::new();
    *P.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// Frames text kept per traceback.
const MAX_FRAMES_TEXT: usize = 64 << 10;

mod findings;
mod matching;
mod traceback;

use findings::{msg_hash, FindingKey};
pub use findings::{FileResult, RawFinding};
use traceback::{summary_states, Traceback};

struct Scanner<'a> {
    rules: &'a RuleSet,
    context: usize,
    res: FileResult,
    shutdown: bool,
    tracebacks: HashMap<String, Traceback>,
    force_slow_until: u64,
    cand: Vec<usize>,
    /// Streams whose next traceback Python announced as ignored.
    ignore_next_tb: HashSet<String>,
    /// First occurrence (index in `res.findings`) of each settled failure.
    seen: HashMap<FindingKey, usize>,
    /// Findings whose out-of-memory phase is not decided yet (evidence still coming).
    unsettled: Vec<usize>,
}

/// Scans one input stream.
pub fn scan_reader<R: Read>(
    rules: &RuleSet,
    mut reader: R,
    context: usize,
) -> io::Result<FileResult> {
    let mut sc = Scanner {
        rules,
        context,
        res: FileResult::default(),
        shutdown: false,
        tracebacks: HashMap::new(),
        force_slow_until: 0,
        cand: Vec::new(),
        ignore_next_tb: HashSet::new(),
        seen: HashMap::new(),
        unsettled: Vec::new(),
    };
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK + HISTORY + 64 * 1024);
    // Start of unscanned bytes; newlines before `counted` are counted in `newlines`.
    let mut start = 0usize;
    let mut counted = 0usize;
    let mut newlines = 0u64;
    let mut eof = false;
    let mut first = true;
    // Inside an over-long line: drop bytes until its newline.
    let mut skipping = false;
    // Whether buf[0] is the start of a line (false after trimming history mid-line).
    let mut buf_at_line_start = true;
    let mut read_err: Option<io::Error> = None;
    loop {
        // Keep some history for context, drop the rest.
        let keep_from = start.saturating_sub(HISTORY);
        if keep_from > 0 {
            buf_at_line_start = buf[keep_from - 1] == b'\n';
            buf.drain(..keep_from);
            start -= keep_from;
            counted -= keep_from;
        }
        // Fill (into spare capacity: no zeroing of the buffer before each read).
        let target = buf.len() + CHUNK;
        buf.reserve(target - buf.len());
        while buf.len() < target && !eof {
            let old = buf.len();
            match reader
                .by_ref()
                .take((target - old) as u64)
                .read_to_end(&mut buf)
            {
                Ok(n) => {
                    sc.res.bytes += n as u64;
                    if buf.len() < target {
                        eof = true;
                    }
                }
                Err(e) => {
                    // Bytes read before the error are kept.
                    sc.res.bytes += (buf.len() - old) as u64;
                    eof = true;
                    if sc.res.bytes == 0 && old == 0 {
                        return Err(e);
                    }
                    read_err = Some(e);
                }
            }
        }
        if first {
            first = false;
            let probe = &buf[..buf.len().min(8192)];
            if memchr::memchr(0, probe).is_some() {
                sc.res.binary = true;
                return Ok(sc.res);
            }
        }
        if skipping {
            match memchr::memchr(b'\n', &buf[start..]) {
                Some(i) => {
                    start += i + 1;
                    counted = start;
                    newlines += 1;
                    skipping = false;
                }
                None => {
                    start = buf.len();
                    counted = start;
                    if eof {
                        break;
                    }
                    continue;
                }
            }
        }
        if start >= buf.len() {
            if eof {
                break;
            }
            continue;
        }
        let end = if eof {
            buf.len()
        } else {
            match memchr::memrchr(b'\n', &buf[start..]) {
                Some(i) => start + i + 1,
                None if buf.len() - start >= MAX_LINE => {
                    // An over-long line: scan its first MAX_LINE bytes, skip the rest.
                    let cut = start + MAX_LINE;
                    sc.scan_region(
                        &buf,
                        start,
                        cut,
                        &mut counted,
                        &mut newlines,
                        buf_at_line_start,
                    );
                    sc.res.notes.push(format!(
                        "line {} is longer than {} MiB; only its start was read",
                        newlines + 1,
                        MAX_LINE >> 20
                    ));
                    start = buf.len();
                    counted = start;
                    skipping = true;
                    continue;
                }
                None => continue,
            }
        };
        // Lines longer than MAX_LINE inside the region are cut in scan_region.
        sc.scan_region(
            &buf,
            start,
            end,
            &mut counted,
            &mut newlines,
            buf_at_line_start,
        );
        start = end;
        if eof && start >= buf.len() {
            break;
        }
    }
    let last_is_partial = !buf.is_empty() && *buf.last().unwrap() != b'\n';
    sc.res.lines = newlines + u64::from(last_is_partial);
    sc.finish();
    if let Some(e) = read_err {
        sc.res.notes.push(format!(
            "input ended early ({e}); the {} lines before that were read",
            sc.res.lines
        ));
    }
    Ok(sc.res)
}

fn cut(s: &str) -> String {
    if s.len() <= MAX_SHOWN {
        return s.to_string();
    }
    let mut end = MAX_SHOWN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl Scanner<'_> {
    fn slow_mode(&self, line_no: u64) -> bool {
        !self.tracebacks.is_empty() || line_no <= self.force_slow_until
    }

    /// Scans buf[a..b) (b at a line end or the buffer end).
    fn scan_region(
        &mut self,
        buf: &[u8],
        a: usize,
        b: usize,
        counted: &mut usize,
        newlines: &mut u64,
        buf_at_line_start: bool,
    ) {
        let mut pos = a;
        // Start of the line that contains `pos` (pos can sit after a worker prefix).
        let mut cur_ls = a;
        // Candidate positions from the vectorised searchers, in order (None: scan with the
        // automaton directly).
        let cands = self.candidates_in(buf, a, b);
        let mut ci = 0usize;
        // Next serving marker at or after `pos` (`usize::MAX`: none before `b`), searched
        // lazily and only while the server is not serving: once it serves, the request log
        // lines that carry these markers are no candidates at all.
        let mut serving_next: Option<usize> = None;
        while pos < b {
            // Line number of the line starting at `pos`.
            if *counted < pos {
                *newlines += memchr::memchr_iter(b'\n', &buf[*counted..pos]).count() as u64;
                *counted = pos;
            }
            if self.slow_mode(*newlines + 1) {
                let e = memchr::memchr(b'\n', &buf[pos..b]).map_or(b, |i| pos + i);
                // Whether any literal (other than a serving marker) occurs on the line: rule
                // matching of traceback source lines is skipped without one.
                // (Terminal codes and `\r` are removed before rules match: such a line may
                // hold a literal the raw bytes split.)
                let has_literal = match &cands {
                    Some(c) => {
                        let k = c.partition_point(|&x| x < cur_ls);
                        c.get(k).is_some_and(|&x| x < e)
                            || memchr::memchr2(0x1b, b'\r', &buf[cur_ls..e]).is_some()
                    }
                    None => true,
                };
                self.handle_line(
                    buf,
                    cur_ls,
                    e,
                    *newlines + 1,
                    buf_at_line_start,
                    has_literal,
                );
                pos = e + 1;
                cur_ls = pos;
                continue;
            }
            let ac = if self.res.serving_line.is_some() {
                &self.rules.automaton_serving
            } else {
                &self.rules.automaton
            };
            let m = match &cands {
                Some(c) => {
                    while ci < c.len() && c[ci] < pos {
                        ci += 1;
                    }
                    let mut p = c.get(ci).copied().unwrap_or(usize::MAX);
                    if self.res.serving_line.is_none() {
                        if let Some(sv) = &self.rules.packed_serving {
                            let q = match serving_next {
                                Some(q) if q >= pos => q,
                                _ => {
                                    let q = sv
                                        .find_in(&buf[..b], aho_corasick::Span::from(pos..b))
                                        .map_or(usize::MAX, |m| m.start());
                                    serving_next = Some(q);
                                    q
                                }
                            };
                            p = p.min(q);
                        }
                    }
                    if p == usize::MAX {
                        break;
                    }
                    // Check the candidate's line (from `pos`) with the full automaton.
                    let le = memchr::memchr(b'\n', &buf[p..b]).map_or(b, |i| p + i);
                    let from = memchr::memrchr(b'\n', &buf[pos..p]).map_or(pos, |i| pos + i + 1);
                    // No literal starts in [from, p), so no pattern occurrence starts more than
                    // its length before p: the search starts there, not at the line start (the
                    // same leftmost match, without reading the whole of a long line).
                    let from = from.max(p.saturating_sub(ac.max_pattern_len().saturating_sub(1)));
                    match ac.find(Input::new(&buf[..le]).range(from..le)) {
                        Some(m) => m,
                        None => {
                            pos = le + 1;
                            cur_ls = pos;
                            continue;
                        }
                    }
                }
                None => {
                    let Some(m) = ac.find(Input::new(&buf[..b]).range(pos..b)) else {
                        break;
                    };
                    m
                }
            };
            let ls = memchr::memrchr(b'\n', &buf[pos..m.start()]).map_or(cur_ls, |i| pos + i + 1);
            let map = if self.res.serving_line.is_some() {
                &self.rules.pattern_rule_serving
            } else {
                &self.rules.pattern_rule
            };
            if map[m.pattern().as_usize()] == Some(super::rules::WORKER_ANCHOR) {
                // A worker prefix: remember the rank, keep searching the same line.
                self.note_worker(&buf[ls..m.end()], &buf[m.end()..b]);
                pos = m.end();
                cur_ls = ls;
                continue;
            }
            let le = memchr::memchr(b'\n', &buf[m.start()..b]).map_or(b, |i| m.start() + i);
            if *counted < ls {
                *newlines += memchr::memchr_iter(b'\n', &buf[*counted..ls]).count() as u64;
                *counted = ls;
            }
            self.handle_line(buf, ls, le, *newlines + 1, buf_at_line_start, true);
            pos = le + 1;
            cur_ls = pos;
        }
        if *counted < b {
            *newlines += memchr::memchr_iter(b'\n', &buf[*counted..b]).count() as u64;
            *counted = b;
        }
    }

    /// `has_literal`: false only when no rule literal occurs on the line (then traceback
    /// source lines need no rule matching).
    fn handle_line(
        &mut self,
        buf: &[u8],
        ls: usize,
        le: usize,
        line_no: u64,
        at_start: bool,
        has_literal: bool,
    ) {
        let raw = &buf[ls..le.min(ls + MAX_LINE)];
        let pl = line::parse(raw);
        let msg = pl.msg();

        // Phase evidence for recent out-of-memory findings.
        if line_no <= self.force_slow_until {
            for &i in &self.unsettled {
                let f = &mut self.res.findings[i];
                if f.phase_open_until >= line_no && f.evidence.len() < 16 << 10 {
                    f.evidence.push('\n');
                    f.evidence.push_str(msg);
                }
            }
        }

        // Worker labels, for the one-rank-OOM test.
        if let Some(r) = &pl.rank {
            if is_worker_label(r) {
                self.res.workers.insert(r.clone());
            }
        }

        // Stale tracebacks of any stream end here (cut off).
        if !self.tracebacks.is_empty() {
            let stale: Vec<String> = self
                .tracebacks
                .iter()
                .filter(|(k, tb)| line_no > tb.last_line + TB_STALE && **k != pl.stream)
                .map(|(k, _)| k.clone())
                .collect();
            for k in stale {
                self.close_traceback(&k);
            }
        }

        if line::is_traceback_header(msg) {
            self.close_traceback(&pl.stream);
            self.open_traceback(&pl, line_no);
            if let Some(sum) = self.summary_before(buf, ls, line_no, &pl, at_start) {
                if let Some(tb) = self.tracebacks.get_mut(&pl.stream) {
                    tb.summary = Some(sum);
                }
            }
            return;
        }
        if line::is_frame(msg) {
            if !self.tracebacks.contains_key(&pl.stream) && !self.adopt_traceback(&pl, line_no) {
                self.open_traceback(&pl, line_no);
            }
            let tb = self.tracebacks.get_mut(&pl.stream).unwrap();
            tb.last_line = line_no;
            tb.after_frame = true;
            // Only the innermost frame's source line (the `raise`) speaks for the exception.
            tb.pending = None;
            if tb.frames.len() < MAX_FRAMES_TEXT {
                tb.frames.push_str(msg.trim());
                tb.frames.push('\n');
            }
            return;
        }
        let in_tb = self.tracebacks.contains_key(&pl.stream);
        let indented = msg.starts_with(' ') || msg.starts_with('\t');
        let trimmed = msg.trim_start();
        // An exception type without the usual suffix (`Exception: ..`, `_RemoteUnavailable: ..`)
        // also ends a traceback, right after a frame's source line.
        let is_exc = line::is_exception_line(msg)
            || (in_tb
                && !indented
                && self
                    .tracebacks
                    .get(&pl.stream)
                    .is_some_and(|tb| !tb.after_frame && !tb.frames.is_empty())
                && super::classify::ends_traceback(msg));
        if in_tb && !is_exc {
            let tb = self.tracebacks.get_mut(&pl.stream).unwrap();
            let is_source =
                indented || tb.after_frame || trimmed.starts_with('^') || trimmed.starts_with('~');
            if is_source {
                tb.after_frame = false;
                tb.last_line = line_no;
                if tb.frames.len() < MAX_FRAMES_TEXT {
                    tb.frames.push_str(trimmed);
                    tb.frames.push('\n');
                }
                let has_pending = tb.pending.is_some();
                if !has_pending && has_literal {
                    if let Some(ri) = self.match_rule(&pl, None, true) {
                        let f = self.new_finding(ri, &pl, line_no, buf, ls, at_start);
                        if let Some(tb) = self.tracebacks.get_mut(&pl.stream) {
                            tb.pending = Some(f);
                        }
                    }
                }
                return;
            }
            // Not part of the traceback: it was cut off.
            self.close_traceback(&pl.stream);
        } else if !in_tb && indented && trimmed.starts_with("raise ") {
            // A fragment that starts inside a traceback: treat it as one.
            self.open_traceback(&pl, line_no);
            if !has_literal {
                return;
            }
            if let Some(ri) = self.match_rule(&pl, None, true) {
                let f = self.new_finding(ri, &pl, line_no, buf, ls, at_start);
                if let Some(tb) = self.tracebacks.get_mut(&pl.stream) {
                    tb.pending = Some(f);
                }
            }
            return;
        }

        if in_tb && is_exc {
            let tb = self.tracebacks.remove(&pl.stream).unwrap_or_default();
            if tb.ignored {
                return;
            }
            let matched = self.match_rule(&pl, Some(&tb.frames), false);
            let level = pl.level.as_deref().unwrap_or("");
            let quiet_level = matches!(level, "INFO" | "DEBUG" | "WARNING" | "WARN");
            let generic = matched.filter(|&ri| self.rules.rules[ri].generic);
            let specific = matched.filter(|&ri| !self.rules.rules[ri].generic);
            // The frame-path map names the class when the message alone does not.
            let frame = if quiet_level {
                None
            } else {
                self.rules.frame_rule(&tb.frames)
            };
            let mut finding = match specific.map(|ri| (ri, self.rules.rules[ri].kind)) {
                Some((ri, RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint)) => {
                    Some(self.new_finding(ri, &pl, line_no, buf, ls, at_start))
                }
                // A known harmless exception (e.g. a client's request was invalid).
                Some((_, RuleKind::Benign)) => None,
                _ => match (tb.pending, frame, generic) {
                    (Some(mut p), _, _) => {
                        // The exception line states the cause the source line pointed at.
                        p.line = line_no;
                        p.last_line = line_no;
                        p.msg_hash = msg_hash(pl.msg());
                        p.text = cut(&pl.text);
                        p.ts = pl.ts.or(p.ts);
                        p.last_ts = p.ts;
                        p.context = self.context_before(buf, ls, at_start);
                        Some(p)
                    }
                    (None, Some(ri), _) | (None, None, Some(ri)) => {
                        Some(self.new_finding(ri, &pl, line_no, buf, ls, at_start))
                    }
                    (None, None, None) if !self.shutdown && !quiet_level => {
                        // An exception no rule knows: a cause of class unknown.
                        let mut f = self.new_finding(usize::MAX, &pl, line_no, buf, ls, at_start);
                        f.kind = RuleKind::Cause;
                        f.class = Class::Unknown;
                        Some(f)
                    }
                    (None, None, None) => None,
                },
            };
            // The exception line of a raw traceback has no prefix; its header's rank holds.
            if let Some(f) = finding.as_mut() {
                if f.rank.is_none() {
                    f.rank.clone_from(&tb.rank);
                }
            }
            // vLLM V0 (and others) log the exception's message once before its traceback:
            // that first line is the cause line.
            if let (Some(f), Some((sl, stext, smsg))) = (finding.as_mut(), tb.summary.as_ref()) {
                if summary_states(smsg, msg) {
                    f.line = *sl;
                    f.text = cut(stext);
                }
            }
            if let Some(f) = &finding {
                if f.kind == RuleKind::Cause && !matches!(f.class, Class::Nccl | Class::Unknown) {
                    self.mark_failed(tb.rank.as_deref());
                }
            }
            if let Some(mut f) = finding {
                if f.rule != usize::MAX && self.rules.rules[f.rule].phase {
                    f.evidence = tb.frames.clone();
                }
                self.record(f, line_no);
            }
            return;
        }

        // Python prints tracebacks it ignores (e.g. in __del__ at exit): not failures.
        if msg.starts_with("Exception ignored in") {
            self.ignore_next_tb.insert(pl.stream.clone());
            return;
        }

        // An ordinary line.
        let Some(ri) = self.match_rule(&pl, None, false) else {
            return;
        };
        let kind = self.rules.rules[ri].kind;
        match kind {
            RuleKind::Serving => {
                if self.res.serving_line.is_none() {
                    self.res.serving_line = Some(line_no);
                }
            }
            RuleKind::Shutdown => self.shutdown = true,
            RuleKind::Startup => {
                // A (re)start: earlier serving and shutdown no longer describe this phase.
                self.res.serving_line = None;
                self.shutdown = false;
            }
            RuleKind::Benign => {}
            RuleKind::Fact => {
                if let Some(f) = &self.rules.rules[ri].fact {
                    self.res.facts.insert(f.clone());
                }
            }
            RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint => {
                let f = self.new_finding(ri, &pl, line_no, buf, ls, at_start);
                self.record(f, line_no);
            }
        }
    }

    fn finish(&mut self) {
        let keys: Vec<String> = self.tracebacks.keys().cloned().collect();
        for k in keys {
            self.close_traceback(&k);
        }
        // Decide the phase of the out-of-memory findings left, merge repeats.
        self.settle(u64::MAX);
        self.res.findings.retain(|f| !f.merged);
        self.res.findings.sort_by_key(|f| f.line);
    }
}

/// Labels of tensor/pipeline-parallel workers (not the API server or a lone engine core).
pub fn is_worker_label(label: &str) -> bool {
    label.contains("rank")
        || label.contains("_TP")
        || label.contains("_PP")
        || label.starts_with("RayWorkerWrapper")
        || label.starts_with("VllmWorker")
        || label.starts_with("TP")
        || label.contains(" TP")
}
