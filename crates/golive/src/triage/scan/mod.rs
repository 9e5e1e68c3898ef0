//! The streaming scanner: one pass over one log, large buffers, a literal prefilter over the
//! whole buffer (aho-corasick), and line-by-line work only on candidate lines and inside
//! Python tracebacks.

use std::io::{self, Read};

use rustc_hash::{FxHashMap, FxHashSet};

use super::lifecycle::Progress;
use super::line::{self, ParsedLine};
use super::prefilter::{Prefilter, SAMPLE};
use super::rules::{RuleKind, RuleSet};
use super::Class;

/// Bytes read per buffer.
const CHUNK: usize = 4 << 20;
/// Bytes of already scanned text kept in front of the buffer for context lines.
const HISTORY: usize = 256 << 10;
/// Longer lines are cut here (the rest of the line is skipped, never buffered).
pub const MAX_LINE: usize = 1 << 20;
/// Input bytes checked for a NUL (binary data).
const PROBE: usize = 8192;
/// Room in front of the bytes read for the text kept from the buffer before: the history and
/// a partial line (shorter than MAX_LINE: a longer one is cut and skipped).
const ROOM: usize = HISTORY + MAX_LINE;
/// Lines displayed are cut to this many characters.
const MAX_SHOWN: usize = 2000;
/// Lines after an out-of-memory line read for phase evidence.
const LOOKAHEAD: u64 = 15;
/// A traceback with no new frame for this many lines is considered cut off.
const TB_STALE: u64 = 40;
/// How much older than the latest error a progress line must be stamped to be a late print.
const STALE_MS: u64 = 60_000;
/// Lines between an exception and Python's chain words that still join them.
const CHAIN_GAP: u64 = 3;

/// Lines after an exception line that may go on stating its message (pydantic's error count,
/// the field, `  Input should be ...`, the documentation link).
const MESSAGE_LINES: u64 = 4;
/// Bytes around an access line's needle read for its line (a longer line is read in part).
const ANSWER_REACH: usize = 512;
/// The chain root of a benign exception whose wrappers are benign too ([`Rule::quiets_chain`]).
const QUIET_ROOT: u64 = u64::MAX;
/// Streams whose last exception is remembered (a hostile log cannot grow the map).
const MAX_STREAMS: usize = 4096;
/// Frames text kept per traceback.
const MAX_FRAMES_TEXT: usize = 64 << 10;

mod fill;
mod findings;
mod matching;
mod memo;
mod occ;
mod region;
mod tail;
mod traceback;

pub(crate) use findings::strip_pid;
use findings::{msg_hash, FindingKey};
pub use findings::{FileResult, RawFinding};
use traceback::{summary_states, Traceback};

struct Scanner<'a> {
    rules: &'a RuleSet,
    context: usize,
    res: FileResult,
    shutdown: bool,
    tracebacks: FxHashMap<String, Traceback>,
    force_slow_until: u64,
    /// Prefilter keys chosen from this input's first bytes (`None`: the rule set's own).
    filter: Option<std::sync::Arc<Prefilter>>,
    /// Needle occurrences of the region (kept for the next region).
    occ: Vec<u64>,
    /// Pattern occurrences (start, pattern) on the line being handled.
    pats: Vec<(usize, u32)>,
    /// The rank label last judged for `res.workers`.
    last_rank: String,
    /// Raw worker labels (around a worker anchor) already judged.
    worker_raw: FxHashSet<Vec<u8>>,
    cand: Vec<usize>,
    /// The last line matched held a literal of a `child` rule (ollama's scheduler reporting its
    /// runner dead): only then is a finding's text read for one ([`RuleSet::names_child_death`]).
    child_cand: bool,
    /// Streams whose next traceback Python announced as ignored.
    ignore_next_tb: FxHashSet<String>,
    /// First occurrence (index in `res.findings`) of each settled failure.
    seen: FxHashMap<FindingKey, usize>,
    /// Findings whose out-of-memory phase is not decided yet (evidence still coming).
    unsettled: Vec<usize>,
    /// Findings in `res.findings` merged into an earlier one (dropped by `compact`).
    merged: usize,
    phase_memo: memo::PhaseMemo,
    frames_memo: memo::FramesMemo,
    /// Traceback source lines whose rule matching waits (see [`traceback::DeferredSource`]).
    deferred: Vec<traceback::DeferredSource>,
    /// An error was recorded since the last progress marker: the next serving marker is read
    /// even after the server serves (it shows the error was survived).
    want_progress: bool,
    /// The latest timestamp of a recorded error.
    last_error_ts: Option<u64>,
    /// The processes (labels, pid stripped) with an error no progress has covered yet.
    pending: FxHashSet<String>,
    /// Per stream: the last exception line and the line of its finding.
    last_exc: FxHashMap<String, (u64, u64)>,
    /// Per stream: the finding line of the exception the next one wraps (a chain).
    chain: FxHashMap<String, u64>,
    /// The stream and line of the last exception that failed one request: the lines that go
    /// on stating its message (pydantic's `  Input should be ...`) failed that request too.
    request_exc: Option<(String, u64)>,
    /// Lines judged without a parse ([`Scanner::traceback_body_line`],
    /// [`Scanner::inert_line`]); off only to check them against the full line handler.
    fast_paths: bool,
    /// The last lines a benign rule quieted (bounded): the end-of-log reading skips them.
    quiet_lines: std::collections::VecDeque<u64>,
}

/// Regions whose occurrences came from the reader's search (tests check it is used).
#[cfg(test)]
static SEARCHED_BY_READER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Scans one input stream, read on its own thread.
pub fn scan_reader<R: Read + Send + 'static>(
    rules: &RuleSet,
    reader: R,
    context: usize,
) -> io::Result<FileResult> {
    scan(
        rules,
        fill::ReadAhead::new(reader, ROOM, CHUNK),
        context,
        true,
    )
}

/// Scans one log held in memory.
pub fn scan_slice(rules: &RuleSet, data: &[u8], context: usize) -> io::Result<FileResult> {
    scan(rules, slice(data, CHUNK), context, true)
}

#[cfg(any(test, feature = "fuzz"))]
/// [`scan_slice`] with every line the prefilter selects handled in full (the fuzz target
/// compares the two).
pub fn scan_slice_in_full(rules: &RuleSet, data: &[u8], context: usize) -> io::Result<FileResult> {
    scan(rules, slice(data, CHUNK), context, false)
}

#[cfg(any(test, feature = "fuzz"))]
/// [`scan_slice`] read `chunk` bytes at a time (the fuzz target compares it with one read:
/// lines, tracebacks and context across buffer boundaries).
#[doc(hidden)]
pub fn scan_slice_in_chunks(
    rules: &RuleSet,
    data: &[u8],
    context: usize,
    chunk: usize,
) -> io::Result<FileResult> {
    scan(rules, slice(data, chunk.max(1)), context, true)
}

fn slice(data: &[u8], chunk: usize) -> fill::SliceFill<'_> {
    fill::SliceFill { data, chunk }
}

fn scan<F: fill::Fill>(
    rules: &RuleSet,
    mut src: F,
    context: usize,
    fast_paths: bool,
) -> io::Result<FileResult> {
    let mut sc = Scanner {
        rules,
        context,
        res: FileResult::default(),
        shutdown: false,
        tracebacks: FxHashMap::default(),
        force_slow_until: 0,
        filter: None,
        occ: Vec::new(),
        pats: Vec::new(),
        last_rank: String::new(),
        worker_raw: FxHashSet::default(),
        cand: Vec::new(),
        child_cand: false,
        ignore_next_tb: FxHashSet::default(),
        seen: FxHashMap::default(),
        unsettled: Vec::new(),
        merged: 0,
        phase_memo: Default::default(),
        frames_memo: Default::default(),
        deferred: Vec::new(),
        want_progress: false,
        last_error_ts: None,
        pending: FxHashSet::default(),
        last_exc: FxHashMap::default(),
        chain: FxHashMap::default(),
        request_exc: None,
        fast_paths,
        quiet_lines: Default::default(),
    };
    // The text scanned is buf[base..len] (positions below are relative to `base`): the text
    // kept from the buffer before, then the bytes read into this one.
    let mut buf: Vec<u8> = Vec::new();
    let (mut base, mut len) = (0usize, 0usize);
    // Start of unscanned bytes.
    let mut start = 0usize;
    let mut lines = crate::text::LineCount::default();
    let mut eof = false;
    let mut first = true;
    // Inside an over-long line: drop bytes until its newline.
    let mut skipping = false;
    // Whether the text's first byte is the start of a line (false after trimming history
    // mid-line).
    let mut buf_at_line_start = true;
    let mut read_err: Option<io::Error> = None;
    let mut probe = BinaryProbe::default();
    // The occurrences the reader found in this buffer's new bytes.
    let mut pre: Option<occ::Pre>;
    while !eof {
        // The next buffer, with the history kept for context and the unscanned rest of this
        // one moved in front of its new bytes.
        let keep_from = start.saturating_sub(HISTORY);
        let tail = &buf[base + keep_from..len];
        // Bytes read into the new buffer.
        let new = match src.next(tail.len()) {
            Some(mut f) => {
                let nb = f.start - tail.len();
                f.buf[nb..f.start].copy_from_slice(tail);
                if keep_from > 0 {
                    buf_at_line_start = buf[base + keep_from - 1] == b'\n';
                }
                start -= keep_from;
                lines.shift(keep_from);
                pre = f.searched.take().map(|s| occ::Pre {
                    from: tail.len(),
                    cut: s.cut - nb,
                    occ: s.occ,
                });
                let spent = std::mem::replace(&mut buf, f.buf);
                if spent.capacity() > 0 {
                    src.recycle(spent);
                }
                (base, len) = (nb, f.end);
                let new = f.end - f.start;
                sc.res.bytes += new as u64;
                eof = f.last;
                if let Some(e) = f.err {
                    // Bytes read before the error are kept.
                    if sc.res.bytes == 0 {
                        return Err(e);
                    }
                    read_err = Some(e);
                }
                new
            }
            None => {
                eof = true;
                pre = None;
                0
            }
        };
        let text = &buf[base..len];
        // Control bytes among the input's first PROBE bytes: binary data. Counted across
        // the buffers they came in and judged once, so buffer sizes never change the answer.
        let read_before = sc.res.bytes as usize - new;
        if read_before < PROBE {
            let piece = &text[text.len() - new..][..new.min(PROBE - read_before)];
            probe.add(piece);
            if (read_before + piece.len() >= PROBE || eof) && probe.is_binary() {
                sc.res.binary = true;
                return Ok(sc.res);
            }
        }
        if first {
            first = false;
            if text.len() >= SAMPLE {
                let filter =
                    std::sync::Arc::new(Prefilter::new(rules.needles.clone(), &text[..SAMPLE]));
                src.search_with(filter.clone());
                sc.filter = Some(filter);
            }
        }
        if skipping {
            match memchr::memchr(b'\n', &text[start..]) {
                Some(i) => {
                    lines.line_ended_at(start + i);
                    start += i + 1;
                    skipping = false;
                }
                None => {
                    start = text.len();
                    lines.skip_to(start);
                    continue;
                }
            }
        }
        // Whole lines (all the rest at the end of the input).
        let end = if eof {
            text.len()
        } else {
            memchr::memrchr(b'\n', &text[start..]).map_or(start, |i| start + i + 1)
        };
        if end > start {
            // Lines longer than MAX_LINE inside the region are cut in scan_region.
            // The reader's search holds when it ended where the region does.
            let pre = pre.take().filter(|p| p.cut == end);
            #[cfg(test)]
            if pre.is_some() {
                SEARCHED_BY_READER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            sc.scan_region(text, start, end, &mut lines, buf_at_line_start, pre);
            start = end;
        }
        if !eof && text.len() - start >= MAX_LINE {
            // An over-long line: scan its first MAX_LINE bytes, skip the rest.
            let cut = start + MAX_LINE;
            sc.scan_region(text, start, cut, &mut lines, buf_at_line_start, None);
            sc.res.notes.push(format!(
                "line {} is longer than {} MiB; only its start was read",
                lines.next_line(),
                MAX_LINE >> 20
            ));
            start = text.len();
            lines.skip_to(start);
            skipping = true;
        }
    }
    let last_is_partial = len > base && buf[len - 1] != b'\n';
    sc.res.lines = lines.newlines() + u64::from(last_is_partial);
    sc.finish();
    sc.res.tail = sc.tail_finding(&buf[base..len], buf_at_line_start);
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

/// What [`Scanner::traceback_part`] made of a line.
enum TracebackPart {
    /// A traceback's own line (header, frame, source line), taken.
    Taken,
    /// The exception line that ends the stream's open traceback.
    Exception,
    /// A line outside any traceback.
    Outside,
}

/// Where a line sits in its buffer: the lines before it are read from there.
#[derive(Clone, Copy)]
struct LineAt<'b> {
    buf: &'b [u8],
    ls: usize,
    line_no: u64,
    at_start: bool,
}

/// An exception line without a message (`StopIteration`, `KeyboardInterrupt`), or whose
/// message is one word (`KeyError: 'glm_moe_dsa'`: which lookup failed, not why): it names no
/// cause, so the exception that wraps it states one.
fn bare_exception(text: &str) -> bool {
    let parsed = super::line::parse(text.as_bytes());
    let msg = parsed.msg().trim();
    let word = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
    match msg.split_once(':') {
        None => word(msg),
        Some((name, rest)) => word(name) && word(rest.trim()),
    }
}

impl Scanner<'_> {
    /// A line printed late shows no progress after the errors before it: Ray's deduplicated
    /// summary of older lines (`... [repeated 3x across cluster]`, often flushed at exit), or a
    /// line stamped more than [`STALE_MS`] before the latest error (clocks of nodes merged into
    /// one log may differ by less).
    fn stale(&self, msg: &str, ts: Option<u64>) -> bool {
        msg.contains("x across cluster]")
            || matches!((ts, self.last_error_ts), (Some(t), Some(e)) if t + STALE_MS < e)
    }

    /// An exception that wraps an earlier one of its stream (Python's chain): the first of the
    /// chain is the cause line, the wrapper a consequence. The root takes the wrapper's class
    /// and rule when it has none of its own (an exception no rule knows, the engine's code).
    fn join_chain(&mut self, stream: &str, f: &mut RawFinding) {
        let Some(root_line) = self.chain.remove(stream) else {
            return;
        };
        let Some(root) = self
            .res
            .findings
            .iter_mut()
            .rev()
            .find(|r| r.line == root_line && !r.merged)
        else {
            return;
        };
        // Raised while one HTTP request's task handled it (the wrapper's frames run through
        // the ASGI server's request task): the whole chain failed that request.
        root.request |= f.request;
        if root.kind != RuleKind::Cause || f.kind != RuleKind::Cause {
            return;
        }
        // The more specific class names the chain: a deployment class over the engine's own
        // code, the engine's code over an exception no rule knows.
        let rank = |c: Class| match c {
            Class::Unknown => 0,
            Class::Engine => 1,
            _ => 2,
        };
        if root.class == Class::Unknown && rank(f.class) == 2 && bare_exception(&root.text) {
            root.kind = RuleKind::Consequence;
            return;
        }
        if rank(root.class) < 2 && rank(f.class) > rank(root.class) {
            root.class = f.class;
            root.rule = f.rule;
        }
        f.kind = RuleKind::Consequence;
    }

    /// Whether `pl` goes on stating the message of the last exception that failed one request:
    /// its stream's next lines, up to [`MESSAGE_LINES`] after it.
    fn states_request_exception(&self, pl: &ParsedLine, line_no: u64) -> bool {
        self.request_exc.as_ref().is_some_and(|(stream, exc)| {
            line_no <= exc + MESSAGE_LINES && stream.as_str() == pl.stream.as_str()
        })
    }

    /// The last exception of a stream (its line, and the line of its chain's root finding,
    /// [`QUIET_ROOT`] for a harmless one), for the next exception that Python's chain words join
    /// to it.
    fn remember_exception(&mut self, stream: &str, line_no: u64, root: u64) {
        if self.last_exc.len() < MAX_STREAMS || self.last_exc.contains_key(stream) {
            self.last_exc.insert(stream.to_string(), (line_no, root));
        }
    }

    /// Progress of `rank` covers the errors that wait for it ([`Lifecycle::went_on_after`]'s
    /// rules): serving markers are passed over again once no error waits.
    fn covered(&mut self, rank: Option<&str>, progress: Progress) {
        match progress {
            Progress::None => return,
            Progress::All => self.pending.clear(),
            Progress::Request => {
                self.pending.remove(strip_pid(rank.unwrap_or("")));
            }
            Progress::Loading => {
                let label = strip_pid(rank.unwrap_or(""));
                self.pending.retain(|l| l != label && is_worker_label(l));
            }
        }
        self.want_progress = !self.pending.is_empty();
    }

    /// An access line passed over once the server serves (its needle at `at`, the region
    /// ending at `end`): a request answered 2xx, unless it is a control call or a request the
    /// process made itself.
    fn answered_unread(&mut self, buf: &[u8], at: usize, end: usize) {
        let from = at.saturating_sub(ANSWER_REACH);
        let ls = memchr::memrchr(b'\n', &buf[from..at]).map_or(from, |i| from + i + 1);
        let to = end.min(at + ANSWER_REACH);
        let le = memchr::memchr(b'\n', &buf[at..to]).map_or(to, |i| at + i);
        if super::lifecycle::answered(&buf[ls..le]) == Some(true) {
            self.res.life.answered_unread();
        }
    }

    /// Serving markers are passed over: the server serves and no error waits for progress.
    fn skip_serving(&self) -> bool {
        self.res.serving_line.is_some() && !self.want_progress
    }

    fn slow_mode(&self, line_no: u64) -> bool {
        !self.tracebacks.is_empty() || line_no <= self.force_slow_until
    }

    /// Handles one line (`lits`: the literals the prefilter found on it): the notes every
    /// line gets, then the one reading that claims it (a traceback's own line, the exception
    /// that ends a traceback, an ordinary line).
    fn handle_line(
        &mut self,
        buf: &[u8],
        ls: usize,
        le: usize,
        line_no: u64,
        at_start: bool,
        lits: &matching::LineLiterals,
    ) {
        // Source lines whose matching waits come first (see traceback::DeferredSource).
        self.resolve_deferred(buf, at_start, lits.filter);
        let raw = &buf[ls..le.min(ls + MAX_LINE)];
        let pl = line::parse(raw);
        let at = LineAt {
            buf,
            ls,
            line_no,
            at_start,
        };
        self.note_phase_evidence(pl.msg(), line_no);
        self.note_worker_label(&pl);
        self.close_stale_tracebacks(&pl, line_no);
        match self.traceback_part(&pl, at, lits) {
            TracebackPart::Taken => {}
            TracebackPart::Exception => self.exception_line(&pl, at, lits),
            TracebackPart::Outside => self.ordinary_line(&pl, at, lits),
        }
    }

    /// Phase evidence for recent out-of-memory findings.
    fn note_phase_evidence(&mut self, msg: &str, line_no: u64) {
        if line_no > self.force_slow_until {
            return;
        }
        let mut ev = None;
        for &i in &self.unsettled {
            let f = &mut self.res.findings[i];
            if f.phase_open_until >= line_no && f.evidence_len < 16 << 10 {
                let e = *ev.get_or_insert_with(|| self.phase_memo.of(msg));
                f.evidence = f.evidence.or(e);
                f.evidence_len += 1 + msg.len();
            }
        }
    }

    /// Worker labels, for the one-rank-OOM test.
    fn note_worker_label(&mut self, pl: &ParsedLine) {
        let Some(r) = pl.rank() else {
            return;
        };
        // Consecutive lines mostly carry the same label: judge it once.
        if r != self.last_rank {
            self.last_rank.clear();
            self.last_rank.push_str(r);
            if is_worker_label(r) && !self.res.workers.contains(r) {
                self.res.workers.insert(r.to_string());
            }
        }
    }

    /// Stale tracebacks of any other stream end here (cut off).
    fn close_stale_tracebacks(&mut self, pl: &ParsedLine, line_no: u64) {
        if self.tracebacks.is_empty() {
            return;
        }
        let stale: Vec<String> = self
            .tracebacks
            .iter()
            .filter(|(k, tb)| line_no > tb.last_line + TB_STALE && k.as_str() != pl.stream.as_str())
            .map(|(k, _)| k.clone())
            .collect();
        for k in stale {
            self.close_traceback(&k);
        }
    }

    /// A traceback's own lines: its header, its frames and their source lines, and a fragment
    /// that starts at a `raise`. Says whether the line was taken, ends a traceback (its
    /// exception), or stands outside one (a traceback it cut off is closed first).
    fn traceback_part(
        &mut self,
        pl: &ParsedLine,
        at: LineAt<'_>,
        lits: &matching::LineLiterals,
    ) -> TracebackPart {
        let msg = pl.msg();
        let line_no = at.line_no;
        if line::is_traceback_header(msg) {
            self.close_traceback(pl.stream.as_str());
            self.open_traceback(pl, line_no);
            let own = line::header_message(msg);
            let sum = match own {
                Some(m) => Some((line_no, pl.text.to_string(), m.to_string())),
                None => self.summary_before(at.buf, at.ls, line_no, pl, at.at_start),
            };
            // A message on the header's own line: the rule that names it, else none (the
            // frame map names its class if the traceback is cut off before its exception).
            let header_cause = own.map(|_| {
                let ri = self
                    .match_rule(pl, lits, None, true)
                    .filter(|&ri| !self.rules.rules[ri].generic)
                    .unwrap_or(usize::MAX);
                self.new_finding(ri, pl, line_no)
            });
            if let Some(tb) = self.tracebacks.get_mut(pl.stream.as_str()) {
                tb.summary = sum;
                tb.header_cause = header_cause;
            }
            return TracebackPart::Taken;
        }
        if line::is_frame(msg) {
            self.frame_line(pl, line_no, msg.trim(), false);
            return TracebackPart::Taken;
        }
        if let Some(frame) = line::ipython_frame(msg) {
            self.frame_line(pl, line_no, &frame, true);
            return TracebackPart::Taken;
        }
        let in_tb = self.tracebacks.contains_key(pl.stream.as_str());
        let indented = msg.starts_with(' ') || msg.starts_with('\t');
        let trimmed = msg.trim_start();
        // A blank line (a quote's trailing one, a paste that doubled every line) leaves the
        // traceback open for what continues it; anything else after it stands outside (the
        // blocks of faulthandler's dump and what follows them). IPython's own blank lines are
        // its traceback's (`ipython_line`).
        if let Some(tb) = self
            .tracebacks
            .get_mut(pl.stream.as_str())
            .filter(|tb| !tb.ipython)
        {
            if trimmed.is_empty() {
                tb.after_blank = true;
                tb.after_frame = false;
                return TracebackPart::Taken;
            }
            if std::mem::take(&mut tb.after_blank) && !indented && !line::is_exception_line(msg) {
                self.close_traceback(pl.stream.as_str());
                return TracebackPart::Outside;
            }
        }
        if in_tb && self.ends_traceback(pl, indented) {
            return TracebackPart::Exception;
        }
        if in_tb && self.ipython_line(pl, at, lits) {
            return TracebackPart::Taken;
        }
        if in_tb {
            let cut = traceback::is_failing_statement(trimmed)
                .then(|| self.new_finding(usize::MAX, pl, line_no));
            let tb = self.tracebacks.get_mut(pl.stream.as_str()).unwrap();
            let is_source =
                indented || tb.after_frame || trimmed.starts_with('^') || trimmed.starts_with('~');
            if !is_source {
                // Not part of the traceback: it was cut off.
                self.close_traceback(pl.stream.as_str());
                return TracebackPart::Outside;
            }
            tb.after_frame = false;
            tb.last_line = line_no;
            tb.push_frames_text(trimmed);
            // A caret or continuation line after the statement keeps it (as the fast path does).
            if cut.is_some() {
                tb.cut_cause = cut;
            }
            if tb.pending.is_none() && lits.has_literal {
                self.pend_source_cause(at.buf, at.ls, line_no, at.at_start, pl, lits);
            }
            return TracebackPart::Taken;
        }
        if indented && trimmed.starts_with("raise ") {
            // A fragment that starts inside a traceback: treat it as one.
            self.open_traceback(pl, line_no);
            if lits.has_literal {
                self.pend_source_cause(at.buf, at.ls, line_no, at.at_start, pl, lits);
            }
            return TracebackPart::Taken;
        }
        TracebackPart::Outside
    }

    /// A frame line (`File "...", line N, in f`, IPython's in that form): it joins its
    /// stream's traceback, or opens one.
    fn frame_line(&mut self, pl: &ParsedLine, line_no: u64, frame: &str, ipython: bool) {
        if !self.tracebacks.contains_key(pl.stream.as_str()) && !self.adopt_traceback(pl, line_no) {
            self.open_traceback(pl, line_no);
        }
        let tb = self.tracebacks.get_mut(pl.stream.as_str()).unwrap();
        tb.last_line = line_no;
        tb.after_frame = true;
        tb.after_blank = false;
        tb.ipython |= ipython;
        tb.enter_frame();
        tb.push_frames_text(frame);
    }

    /// A line of an open IPython traceback between its frames: a blank line, or a line of
    /// the source it shows around a frame's line. Only the frame's own line (behind the
    /// arrow) is its source line, as Python's one line is; the lines around it ran no code.
    fn ipython_line(
        &mut self,
        pl: &ParsedLine,
        at: LineAt<'_>,
        lits: &matching::LineLiterals,
    ) -> bool {
        let tb = self.tracebacks.get_mut(pl.stream.as_str()).unwrap();
        if !tb.ipython {
            return false;
        }
        let msg = pl.msg();
        let source = line::ipython_source(msg);
        if !msg.trim().is_empty() && source.is_none() {
            return false;
        }
        tb.last_line = at.line_no;
        if let Some((code, true)) = source {
            tb.after_frame = false;
            tb.push_frames_text(code);
            if tb.pending.is_none() && lits.has_literal {
                self.pend_source_cause(at.buf, at.ls, at.line_no, at.at_start, pl, lits);
            }
        }
        true
    }

    /// Whether a line of an open traceback is its exception line. Only a traceback ends with
    /// one; an exception type without the usual suffix (`Exception: ..`, `_RemoteUnavailable:
    /// ..`) too, right after a frame's source line.
    fn ends_traceback(&self, pl: &ParsedLine, indented: bool) -> bool {
        let msg = pl.msg();
        line::is_exception_line(msg)
            || (!indented
                && self
                    .tracebacks
                    .get(pl.stream.as_str())
                    .is_some_and(|tb| !tb.after_frame && !tb.frames.is_empty())
                && line::ends_traceback(msg))
    }

    /// The exception line that ends a traceback: its finding, from the rules, the frame map or
    /// the cause its source line named, recorded with what the traceback tells of it.
    fn exception_line(&mut self, pl: &ParsedLine, at: LineAt<'_>, lits: &matching::LineLiterals) {
        let tb = self
            .tracebacks
            .remove(pl.stream.as_str())
            .unwrap_or_default();
        if tb.ignored {
            return;
        }
        if self.chain.get(pl.stream.as_str()) == Some(&QUIET_ROOT) {
            // Raised while handling a harmless exception: as harmless (and so are its wrappers).
            self.chain.remove(pl.stream.as_str());
            self.quieted(at.line_no);
            self.remember_exception(pl.stream.as_str(), at.line_no, QUIET_ROOT);
            return;
        }
        // A traceback a wrapper relayed at INFO ends in an exception like any other: the
        // level is the wrapper's, not the error's.
        let unleveled;
        let pl = if tb.relayed && traceback::is_relayed(pl) {
            unleveled = pl.clone().without_level();
            &unleveled
        } else {
            pl
        };
        let slot = self.frames_memo.lookup(&tb.frames);
        let Some(mut f) = self.exception_finding(pl, &tb, slot, at.line_no, lits) else {
            return;
        };
        self.mark_exception(&mut f, pl, &tb, slot);
        if f.kind == RuleKind::Cause && f.class.explains() && f.class != Class::Nccl {
            self.mark_failed(tb.rank.as_deref());
        }
        // The lines before the exception line.
        self.attach_context(&mut f, at.buf, at.ls, at.at_start);
        if f.rule != usize::MAX && self.rules.rules[f.rule].phase {
            f.evidence = self.frames_memo.phase(slot, &tb.frames);
            f.evidence_len = tb.frames.len();
        }
        self.join_chain(pl.stream.as_str(), &mut f);
        self.remember_exception(pl.stream.as_str(), at.line_no, f.line);
        self.record(f, at.line_no);
    }

    /// The finding an exception line makes: a specific rule on it; else the cause its source
    /// line named; else the frame map or a generic rule; else, outside a stop and above INFO,
    /// a cause of class unknown. None for a known harmless exception.
    fn exception_finding(
        &mut self,
        pl: &ParsedLine,
        tb: &traceback::Traceback,
        slot: usize,
        line_no: u64,
        lits: &matching::LineLiterals,
    ) -> Option<RawFinding> {
        let matched = self.match_rule(pl, lits, Some((&tb.frames, slot)), false);
        let quiet_level = matches!(
            pl.level.unwrap_or(""),
            "INFO" | "DEBUG" | "WARNING" | "WARN"
        );
        let generic = matched.filter(|&ri| self.rules.rules[ri].generic);
        let specific = matched.filter(|&ri| !self.rules.rules[ri].generic);
        match specific.map(|ri| (ri, self.rules.rules[ri].kind)) {
            Some((ri, RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint)) => {
                return Some(self.new_finding(ri, pl, line_no));
            }
            // A known harmless exception (e.g. a client's request was invalid).
            Some((ri, RuleKind::Benign)) => {
                self.quieted(line_no);
                if self.rules.rules[ri].quiets_chain {
                    self.remember_exception(pl.stream.as_str(), line_no, QUIET_ROOT);
                }
                return None;
            }
            _ => {}
        }
        if let Some(mut p) = tb.pending.clone() {
            // The exception line states the cause the source line pointed at.
            p.line = line_no;
            p.last_line = line_no;
            p.msg_hash = msg_hash(pl.msg());
            p.text = cut(&pl.text);
            p.ts = pl.ts.or(p.ts);
            p.last_ts = p.ts;
            return Some(p);
        }
        let frame = if quiet_level {
            None
        } else {
            self.exception_frame_rule(tb, slot, generic)
        };
        match frame.or(generic) {
            Some(ri) => Some(self.new_finding(ri, pl, line_no)),
            None if !self.shutdown && !quiet_level => {
                // An exception no rule knows: a cause of class unknown.
                let mut f = self.new_finding(usize::MAX, pl, line_no);
                f.kind = RuleKind::Cause;
                f.class = Class::Unknown;
                Some(f)
            }
            None => None,
        }
    }

    /// The frame-path map's entry for a traceback, where it names the class and the message
    /// alone does not: a fallback entry (the engine's own code) says less than any rule but a
    /// catch-all; a code bug in the distributed layer's code is no failed transport, and one in
    /// the KV-cache code no prefix-cache setting: the engine's code is wrong there.
    fn exception_frame_rule(
        &mut self,
        tb: &traceback::Traceback,
        slot: usize,
        generic: Option<usize>,
    ) -> Option<usize> {
        let rules = &self.rules.rules;
        let frame = self
            .frames_memo
            .frame_rule(slot, self.rules, &tb.frames)
            .filter(|&fr| !rules[fr].fallback || generic.is_none_or(|g| rules[g].catch_all));
        let yields = |fr: usize| generic.is_some_and(|g| rules[fr].frames_yield_to(&rules[g]));
        match frame {
            Some(fr) if !rules[fr].fallback && yields(fr) => {
                self.rules.fallback_frame_rule(&tb.frames)
            }
            f => f,
        }
    }

    /// What the traceback tells of its exception's finding: raised in a request's task, it
    /// failed that request only; a refusal rule's exception raised while the engine ran
    /// requests is its bug; a raw traceback's exception line takes its header's rank; the
    /// ERROR line a request handler logged before it failed that request too, and that line
    /// is the cause line where it states the exception's message first (vLLM V0 and others).
    fn mark_exception(
        &mut self,
        f: &mut RawFinding,
        pl: &ParsedLine,
        tb: &traceback::Traceback,
        slot: usize,
    ) {
        f.exception = true;
        self.note_engine_frames(&tb.frames);
        f.request |= request_task(&tb.frames) || caught_by_request_handler(&tb.frames, &pl.text);
        f.script = own_script(&tb.frames);
        if f.request {
            self.request_exc = Some((pl.stream.as_str().to_string(), f.line));
        }
        let refusal = self
            .rules
            .rules
            .get(f.rule)
            .is_some_and(|r| r.startup_refusal);
        if refusal && self.frames_memo.phase(slot, &tb.frames).in_request_path() {
            f.class = Class::Engine;
        }
        if f.rank.is_none() {
            f.rank.clone_from(&tb.rank);
        }
        if let Some((sl, stext, smsg)) = tb.summary.as_ref() {
            if f.request {
                self.mark_request(*sl);
            }
            if summary_states(smsg, pl.msg()) {
                f.line = *sl;
                f.text = cut(stext);
            }
        }
    }

    /// A line outside any traceback: a lifecycle marker, a benign line, a fact, or a finding.
    fn ordinary_line(&mut self, pl: &ParsedLine, at: LineAt<'_>, lits: &matching::LineLiterals) {
        let msg = pl.msg();
        let line_no = at.line_no;
        // Python prints tracebacks it ignores (e.g. in __del__ at exit): not failures.
        if msg.starts_with("Exception ignored in") {
            self.ignore_next_tb.insert(pl.stream.as_str().to_string());
            return;
        }

        // An ordinary line.
        let Some(ri) = self.match_rule(pl, lits, None, false) else {
            return;
        };
        let kind = self.rules.rules[ri].kind;
        // A native backtrace's frame names functions (`llama_context::decode`), never what the
        // process did: no marker of its life.
        let marker = matches!(
            kind,
            RuleKind::Serving | RuleKind::Progress | RuleKind::Startup | RuleKind::Shutdown
        );
        if marker && line::is_native_frame(msg) {
            return;
        }
        match kind {
            // A request the process made (urllib3's `https://huggingface.co:443 "HEAD /x
            // HTTP/1.1" 200 0`) is no request it served.
            // Nor is its answer a failure (huggingface_hub's `HTTP Request: GET
            // https://huggingface.co/.../additional_chat_templates "HTTP/1.1 404 Not Found"`
            // probes an optional file): the process decides what a status means, and an
            // exception says so when it cannot go on.
            RuleKind::Serving | RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint
                if super::lifecycle::is_outgoing_request(msg) => {}
            RuleKind::Serving => {
                if self.res.serving_line.is_none() {
                    self.res.serving_line = Some(line_no);
                }
                let progress = if self.stale(msg, pl.ts) {
                    Progress::None
                } else {
                    super::lifecycle::progress_of(msg)
                };
                self.res.life.served(pl.rank(), line_no, progress);
                self.covered(pl.rank(), progress);
            }
            RuleKind::Progress
                if !self.stale(msg, pl.ts) && !super::lifecycle::states_failure(msg) =>
            {
                self.res.life.went_on(pl.rank(), line_no, Progress::Loading);
                self.covered(pl.rank(), Progress::Loading);
            }
            RuleKind::Progress => {}
            RuleKind::Shutdown => {
                self.res.life.stopped(line_no, msg);
                self.shutdown = true;
            }
            RuleKind::Startup => {
                // A (re)start: earlier serving and shutdown no longer describe this phase.
                self.res.serving_line = None;
                self.shutdown = false;
                self.res.life.started(line_no);
            }
            // Python's words between chained exceptions: the next exception of this stream
            // wraps the one just before (`raise RuntimeError(msg) from exc`).
            RuleKind::Benign if self.rules.rules[ri].chain => {
                if let Some(&(exc_line, root)) = self.last_exc.get(pl.stream.as_str()) {
                    if line_no <= exc_line + CHAIN_GAP {
                        self.chain.insert(pl.stream.as_str().to_string(), root);
                    }
                }
            }
            RuleKind::Benign => self.quieted(line_no),
            RuleKind::Fact => {
                if let Some(f) = &self.rules.rules[ri].fact {
                    self.res.facts.insert(f.clone());
                }
            }
            RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint => {
                if self.rules.rules[ri].failed_exit
                    && self.shutdown
                    && self.res.life.first_served.is_none()
                {
                    self.shutdown = false;
                    self.res.life.stop_undone();
                }
                let mut f = self.new_finding(ri, pl, line_no);
                f.request |= self.states_request_exception(pl, line_no);
                self.attach_context(&mut f, at.buf, at.ls, at.at_start);
                self.record(f, line_no);
            }
        }
    }

    fn finish(&mut self) {
        let keys: Vec<String> = self.tracebacks.keys().cloned().collect();
        for k in keys {
            self.close_cut_traceback(&k);
        }
        // Decide the phase of the out-of-memory findings left, merge repeats.
        self.settle(u64::MAX);
        self.res.findings.retain(|f| !f.merged);
        self.res.findings.sort_by_key(|f| f.line);
    }
}

/// Counts of the bytes that text has and binary data has: NUL padding (a log preallocated
/// or cut by a crash) counts as neither; other control bytes and bytes no UTF-8 text has
/// are binary's.
#[derive(Default)]
struct BinaryProbe {
    text: usize,
    odd: usize,
}

impl BinaryProbe {
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match b {
                0 => {}
                1..=8 | 0x0e..=0x1a | 0x1c..=0x1f | 0x7f | 0xf8..=0xff => self.odd += 1,
                _ => self.text += 1,
            }
        }
    }

    /// More than one binary byte in 33.
    fn is_binary(&self) -> bool {
        self.odd > 0 && self.odd * 32 > self.text
    }
}

#[cfg(test)]
fn looks_binary(probe: &[u8]) -> bool {
    let mut p = BinaryProbe::default();
    p.add(probe);
    p.is_binary()
}

/// Words one of which every worker label holds ([`is_worker_label`] is true only with one of
/// them in the label): a line without any has no label to note.
const WORKER_LABEL_WORDS: [&str; 5] = ["rank", "TP", "_PP", "RayWorkerWrapper", "VllmWorker"];

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

impl Scanner<'_> {
    /// Marks the recent finding stated on line `line` (or last repeated there) as a request's.
    fn mark_request(&mut self, line: u64) {
        if let Some(f) = self
            .res
            .findings
            .iter_mut()
            .rev()
            .take(8)
            .find(|f| f.line == line || f.last_line == line)
        {
            f.request = true;
        }
    }
}

impl Scanner<'_> {
    /// A traceback through an engine's own package ([`engine_frames`]) shows the engine ran.
    pub(super) fn note_engine_frames(&mut self, frames: &str) {
        if !self.res.facts.contains(ENGINE_RAN) && engine_frames(frames) {
            self.res.facts.insert(ENGINE_RAN.to_string());
        }
    }
}

/// The fact that an engine ran: a traceback ran through its own package ([`engine_frames`]),
/// or a line only a running engine prints (rule `fact-engine-ran` names this fact).
pub(crate) const ENGINE_RAN: &str = "engine_ran";

/// The source trees of the engines whose tracebacks are read (vLLM, SGLang, TGI's server).
const ENGINE_PACKAGES: [&str; 3] = ["/vllm/", "/sglang/", "/text_generation_server/"];

/// The folders Python installs packages into.
const INSTALLED_PACKAGES: [&str; 2] = ["site-packages/", "dist-packages/"];

/// A traceback frame in an engine's own package (vLLM, SGLang, TGI's server) below its entry
/// points: the engine ran, even in a quoted piece of its log that shows nothing else of it (an
/// issue's pasted traceback). A frame in `entrypoints/` alone is a user's script calling the
/// engine's API (`LLM(...)`), whose error it may be.
fn engine_frames(frames: &str) -> bool {
    frames.lines().any(|frame| {
        ENGINE_PACKAGES.iter().any(|pkg| frame.contains(pkg)) && !frame.contains("/entrypoints/")
    })
}

/// Whether every frame of a traceback is a script's own: none in an installed package or an
/// engine's source tree, and the frames were kept whole. A server's traceback always runs
/// through its packages.
pub(super) fn own_script(frames: &str) -> bool {
    let mut files = frames.lines().filter(|l| line::is_frame(l)).peekable();
    frames.len() < MAX_FRAMES_TEXT
        && files.peek().is_some()
        && files.all(|f| {
            !INSTALLED_PACKAGES
                .iter()
                .chain(&ENGINE_PACKAGES)
                .any(|p| f.contains(p))
        })
}

/// Whether a traceback's frames run through an ASGI server's per-request task (uvicorn's
/// `run_asgi`, hypercorn's `handle_request`): the exception failed one HTTP request.
/// Not when the frames run through the engine's own background loop too (vLLM V0's
/// `run_engine_loop`, raising its error into every request waiting on it): the engine died.
fn request_task(frames: &str) -> bool {
    (frames.contains(", in run_asgi\n") || frames.contains("hypercorn/"))
        && !ENGINE_LOOPS.iter().any(|l| frames.contains(l))
}

/// The frames of an engine's background loop that steps every request (vLLM V0's
/// `AsyncLLMEngine`).
const ENGINE_LOOPS: [&str; 2] = [", in run_engine_loop\n", ", in engine_step\n"];

/// A traceback that an OpenAI serving handler logged itself (`[serving_chat.py:251]`) and whose
/// outermost frame is that handler's (`vllm/entrypoints/openai/serving_chat.py`): the handler
/// caught its request's exception, logged it and answered with an error; the server went on.
fn caught_by_request_handler(frames: &str, exception_line: &str) -> bool {
    // The frame test first: the logger regex ran on every exception of a crash loop (2% of
    // the scanner's time on the crash-loop benchmark) for the few a handler caught.
    frames
        .lines()
        .next()
        .is_some_and(|outer| outer.contains("/entrypoints/openai/serving_"))
        && line::logger_file(exception_line).is_some_and(|f| f.starts_with("serving_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_of_its_own_has_no_frame_in_a_package() {
        let own = "File \"<frozen runpy>\", line 198, in _run_module_as_main\nFile \"/gpfs/u/bench/run.py\", line 87, in run\n    meta = collect()\n";
        assert!(own_script(own));
        for package in [
            "File \"/usr/local/lib/python3.12/site-packages/torch/cuda/__init__.py\", line 1, in f\n",
            "File \"/usr/lib/python3/dist-packages/x.py\", line 1, in f\n",
            "File \"/workspace/vllm/vllm/v1/engine/core.py\", line 1, in f\n",
            "File \"/ws/sglang/python/sglang/srt/server.py\", line 1, in f\n",
        ] {
            assert!(!own_script(&format!("{own}{package}")), "{package}");
        }
        // No frame at all: nothing says whose it is.
        assert!(!own_script("    meta = collect()\n"));
    }

    #[test]
    fn nul_padding_is_not_binary_but_control_bytes_are() {
        assert!(!looks_binary(&[0u8; 8192]));
        let mut padded = vec![0u8; 4000];
        padded.extend_from_slice(b"INFO 03-07 00:38:27 [backends.py:351] Cache the graph\n");
        assert!(!looks_binary(&padded));
        assert!(looks_binary(&[0u8, 1, 2, 0, 255, 254, 0, 0]));
        assert!(looks_binary(b"\x89PNG\r\n\x1a\n\0\0"));
        assert!(!looks_binary(
            "ERROR ü ✓ \x1b[31mred\x1b[0m\r\n\t".as_bytes()
        ));
    }

    /// Found by the fuzzer: the probe's bytes judged per buffer made the last byte alone
    /// (one DEL) binary in 4 KiB buffers, but not in one.
    #[test]
    fn binary_is_judged_on_the_whole_probe_whatever_the_buffers() {
        let mut data = Vec::new();
        while data.len() < 4096 - 64 {
            data.extend_from_slice(
                b"\t\x7fdriver on you RuntimeError: NCCL error: unhandled system error\n",
            );
        }
        data.truncate(4096);
        data.push(0x7f);
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let whole = scan_slice(&rules, &data, 3).unwrap();
        let chunked = scan_slice_in_chunks(&rules, &data, 3, 4096).unwrap();
        assert!(!whole.binary);
        assert!(whole == chunked, "{whole:#?}\n{chunked:#?}");
    }

    #[test]
    fn every_worker_label_holds_a_worker_label_word() {
        for label in [
            "VllmWorker rank=3 pid=9",
            "Worker_TP1 pid=7",
            "Worker_PP0_TP2 pid=7",
            "RayWorkerWrapper pid=1234, ip=10.0.0.2",
            "TP3 pid=5",
            "EngineCore_DP0 TP1",
            "[rank3]",
        ] {
            assert!(is_worker_label(label), "{label}");
            assert!(
                WORKER_LABEL_WORDS.iter().any(|w| label.contains(w)),
                "{label}"
            );
        }
        for label in [
            "APIServer pid=1",
            "EngineCore_DP0 pid=2",
            "EngineCore pid=2",
        ] {
            assert!(!is_worker_label(label), "{label}");
        }
    }

    /// A crash loop read in buffers of a few bytes to a few KiB: every line, traceback and
    /// context line crosses buffer boundaries somewhere, and the result is that of one read.
    #[test]
    fn small_buffers_give_the_result_of_one_read() {
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let h = "(EngineCore pid=2) ERROR 08-03 21:49:23 [core.py:1231]";
        let restart = format!(
            "(APIServer pid=1) INFO 08-03 21:02:48 [api_utils.py:273] non-default args: {{'model': 'm'}}\n\
             (APIServer pid=1) [transformers] Unrecognized keys in `rope_parameters` for 'rope_type'='default'\n\
             {h} EngineCore failed to start.\n\
             {h} Traceback (most recent call last):\n\
             {h}   File \"/venv/vllm/v1/engine/core.py\", line 1200, in run_engine_core\n\
             {h}     engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)\n\
             {h}                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n\
             {h}   File \"/venv/vllm/v1/core/kv_cache_utils.py\", line 760, in _check_enough_kv_cache_memory\n\
             {h}     raise ValueError(\n\
             {h} ValueError: To serve at least one request with the model's max seq len (262144), (18.35 GiB KV cache is needed, which is larger than the available KV cache memory (8.72 GiB).\n\
             (EngineCore pid=2) Process EngineCore:\n"
        );
        let data = restart.repeat(200);
        let whole = scan_slice(&rules, data.as_bytes(), 3).unwrap();
        assert_eq!(whole.lines, 11 * 200);
        assert!(!whole.findings.is_empty(), "{whole:#?}");
        for chunk in [61, 1000, 4096] {
            let got = scan_slice_in_chunks(&rules, data.as_bytes(), 3, chunk).unwrap();
            assert_eq!(got, whole, "read {chunk} bytes at a time");
        }
    }

    /// Read from a stream, the buffers after the first few come searched by the reader's
    /// thread (the partial line kept in front of each searched here): the result is that of
    /// one read, and the reader's searches were used.
    #[test]
    fn a_stream_searched_by_its_reader_gives_the_result_of_one_read() {
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let h = "(EngineCore pid=2) ERROR 08-03 21:49:23 [core.py:1231]";
        let mut data = String::new();
        let mut i = 0;
        // Lines of varying length, so each buffer ends inside another line; a failure every
        // few hundred lines, a traceback across buffer ends.
        while data.len() < 12 << 20 {
            data.push_str(&format!(
                "(APIServer pid=1) INFO 08-03 21:02:48 [loggers.py:{i}] Avg prompt throughput: {} tokens/s{}\n",
                i % 97,
                "x".repeat(i % 53)
            ));
            if i % 700 == 0 {
                data.push_str(&format!(
                    "{h} Traceback (most recent call last):\n\
                     {h}   File \"/venv/vllm/v1/engine/core.py\", line 1200, in run_engine_core\n\
                     {h} RuntimeError: CUDA error: out of memory (step {i})\n"
                ));
            }
            i += 1;
        }
        let whole = scan_slice(&rules, data.as_bytes(), 3).unwrap();
        assert!(!whole.findings.is_empty());
        let used = SEARCHED_BY_READER.load(std::sync::atomic::Ordering::Relaxed);
        let got = scan(
            &rules,
            fill::ReadAhead::new(io::Cursor::new(data.into_bytes()), ROOM, 1 << 20),
            3,
            true,
        )
        .unwrap();
        assert!(got == whole, "{got:#?}\n{whole:#?}");
        assert!(
            SEARCHED_BY_READER.load(std::sync::atomic::Ordering::Relaxed) > used,
            "no buffer came searched"
        );
    }

    /// A worker label cut off at its line's end closes nowhere: the `)` of the next line is
    /// not its end (found by fuzzing: the label depended on where the buffer ended).
    #[test]
    fn a_worker_label_never_spans_lines() {
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let data = "2025-05-01T10:00:09.000Z (RayWorkerWrapper pid=221, ip=10.0.ing\n\
                    2025-05-01T10:00:09.000Z (RayWorkerWrapper pid=221, ip=10.0.0.1) ERROR 05-01 10:00:09 worker_base.py:464] RuntimeError: NCCL error: unhandled system error\n";
        let whole = scan_slice(&rules, data.as_bytes(), 3).unwrap();
        assert!(!whole.findings.is_empty());
        assert!(
            whole.workers.iter().all(|w| !w.contains('\n')),
            "{:?}",
            whole.workers
        );
        let first_line = data.find('\n').unwrap() + 1;
        let cut = scan_slice_in_chunks(&rules, data.as_bytes(), 3, first_line).unwrap();
        assert_eq!(cut, whole);
    }

    /// A traceback cut off after its innermost frame's `assert` (a caret line under it, or an
    /// outer frame's statement followed by a call in an inner one): the fast path for body lines
    /// and the full line handler name the same failing statement, or none.
    #[test]
    fn a_cut_tracebacks_failing_statement_is_the_same_on_both_paths() {
        let rules = RuleSet::load(&[] as &[&str]).unwrap();
        let h = "(EngineCore pid=2) ERROR 08-03 21:49:23 [core.py:1231]";
        let caret = format!(
            "{h} Traceback (most recent call last):\n\
             {h}   File \"/venv/vllm/model_executor/models/mllama.py\", line 1392, in forward\n\
             {h}     assert actual_len >= last_group_len\n\
             {h}     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        );
        let outer = format!(
            "{h} Traceback (most recent call last):\n\
             {h}   File \"/venv/vllm/worker/model_runner.py\", line 10, in run\n\
             {h}     raise_if_needed(x)\n\
             {h}   File \"/venv/vllm/model_executor/models/mllama.py\", line 1392, in forward\n\
             {h}     assert actual_len >= last_group_len\n\
             {h}   File \"/venv/vllm/model_executor/models/mllama.py\", line 20, in vision\n"
        );
        for (data, cut) in [(caret, Some(3)), (outer, None)] {
            let fast = scan_slice(&rules, data.as_bytes(), 3).unwrap();
            let full = scan_slice_in_full(&rules, data.as_bytes(), 3).unwrap();
            assert_eq!(fast, full, "{data}");
            let named = fast.findings.iter().find(|f| f.text.contains("assert "));
            assert_eq!(named.map(|f| f.line), cut, "{fast:#?}");
        }
    }
}
