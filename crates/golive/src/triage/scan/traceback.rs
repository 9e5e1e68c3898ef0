//! Python traceback tracking: open, adopt, close tracebacks per stream, and the ERROR
//! summary line before a traceback header.

use smallvec::SmallVec;

use super::super::body::BodyPrefix;
use super::super::line::{self, ParsedLine};
use super::super::prefilter::Prefilter;
use super::findings::RawFinding;
use super::matching::LineLiterals;
use super::{Scanner, MAX_FRAMES_TEXT, MAX_LINE};

/// A traceback source line with rule literals, not matched yet
/// ([`Scanner::traceback_body_line`]): buf[ls..le], its line number and its literals.
pub(super) struct DeferredSource {
    ls: usize,
    le: usize,
    line_no: u64,
    pats: SmallVec<[(usize, u32); 4]>,
}

#[derive(Debug, Default)]
pub(super) struct Traceback {
    pub(super) last_line: u64,
    /// Announced by `Exception ignored in ...`: nothing in it is reported.
    pub(super) ignored: bool,
    /// Rank label of the stream.
    pub(super) rank: Option<String>,
    pub(super) frames: String,
    pub(super) after_frame: bool,
    /// Its last line was blank (a quote's trailing line, a paste that doubled every line):
    /// only a frame, an indented line or an exception line continues it.
    pub(super) after_blank: bool,
    /// IPython printed it (a notebook's traceback): its frames show source lines around the
    /// frame's own line and blank lines between them.
    pub(super) ipython: bool,
    pub(super) pending: Option<RawFinding>,
    /// The innermost frame's source line when it is an `assert` or a `raise` statement: what
    /// a traceback that the input cuts off before its exception line failed on.
    pub(super) cut_cause: Option<RawFinding>,
    /// An ERROR line just before the header, or the message its own line states before it
    /// (line, text, message): a one-line summary of the exception when the exception line
    /// repeats it.
    pub(super) summary: Option<(u64, String, String)>,
    /// The cause a rule found in the message the header's own line states: what a traceback
    /// cut off before its exception line failed on.
    pub(super) header_cause: Option<RawFinding>,
    /// The prefix bytes of the line that opened it (its stream's prefix): the body lines
    /// behind them are read by [`Scanner::traceback_body_line`].
    pub(super) body: Option<BodyPrefix>,
    /// Its header was logged at INFO or DEBUG by a wrapper's logger (no engine's header): a
    /// process's stderr relayed at the wrapper's level, which says nothing of the error.
    pub(super) relayed: bool,
}

impl Traceback {
    /// A frame line: only the innermost frame's source line speaks for the exception, so what
    /// an outer one named (a cause, a failing statement) no longer counts.
    pub(super) fn enter_frame(&mut self) {
        self.pending = None;
        self.cut_cause = None;
    }

    /// A frame or source line of the traceback, kept for the frame-path map (up to a bound).
    pub(super) fn push_frames_text(&mut self, text: &str) {
        if self.frames.len() < MAX_FRAMES_TEXT {
            self.frames.push_str(text);
            self.frames.push('\n');
        }
    }
}

impl Scanner<'_> {
    /// The ERROR line right before a traceback header on the same stream, when it is a
    /// message (not itself part of a traceback).
    pub(super) fn summary_before(
        &self,
        buf: &[u8],
        ls: usize,
        line_no: u64,
        pl: &ParsedLine,
        at_start: bool,
    ) -> Option<(u64, String, String)> {
        if ls == 0 || line_no < 2 {
            return None;
        }
        let s = memchr::memrchr(b'\n', &buf[..ls - 1]).map_or(0, |i| i + 1);
        if s == 0 && !at_start {
            return None;
        }
        let prev = line::parse(&buf[s..(ls - 1).min(s + MAX_LINE)]);
        let m = prev.msg().trim();
        let error_level = matches!(prev.level, Some("ERROR" | "CRITICAL"));
        // vLLM V0 logs the summary through its logger and the traceback raw after it.
        let same_stream = prev.stream == pl.stream
            || prev.stream.as_str().strip_suffix("log|") == Some(pl.stream.as_str());
        if !error_level || !same_stream || m.len() < 12 || line::is_frame(m) {
            return None;
        }
        Some((line_no - 1, prev.text.to_string(), m.to_string()))
    }

    pub(super) fn open_traceback(&mut self, pl: &ParsedLine, line_no: u64) {
        let ignored = self.ignore_next_tb.remove(pl.stream.as_str());
        self.tracebacks.insert(
            pl.stream.as_str().to_string(),
            Traceback {
                last_line: line_no,
                ignored,
                rank: pl.rank().map(str::to_string),
                body: BodyPrefix::of(pl),
                relayed: is_relayed(pl),
                ..Default::default()
            },
        );
    }

    /// SGLang prints a traceback's header behind its rank prefix (`[.. TP3] Scheduler hit an
    /// exception: Traceback ...`) and the frames raw after it: the raw stream takes over the
    /// header's traceback, rank included. True when it did.
    pub(super) fn adopt_traceback(&mut self, pl: &ParsedLine, line_no: u64) -> bool {
        if pl.rank().is_some() {
            return false;
        }
        let Some(key) = self
            .tracebacks
            .iter()
            .find(|(_, tb)| {
                tb.frames.is_empty() && tb.last_line + 1 == line_no && tb.rank.is_some()
            })
            .map(|(k, _)| k.clone())
        else {
            return false;
        };
        let mut tb = self.tracebacks.remove(&key).unwrap();
        tb.body = BodyPrefix::of(pl);
        self.tracebacks.insert(pl.stream.as_str().to_string(), tb);
        true
    }

    /// The fast path for a line inside the one open traceback: an indented line (a frame, or a
    /// source or caret line that names no cause) behind the traceback's prefix bytes, with no
    /// terminal codes and no phase evidence wanted, has the effect [`Scanner::handle_line`]
    /// would give it, without parsing it. `lits`: the line's start and its rule-literal
    /// occurrences, when it has any. False when the line is not such a line (nothing was done).
    pub(super) fn traceback_body_line(
        &mut self,
        raw: &[u8],
        line_no: u64,
        lits: Option<(usize, &[(usize, u32)])>,
    ) -> bool {
        if !self.fast_paths || self.tracebacks.len() != 1 || line_no <= self.force_slow_until {
            return false;
        }
        let Some(tb) = self.tracebacks.values_mut().next() else {
            return false;
        };
        let Some((_, msg)) = tb.body.as_ref().and_then(|bp| bp.body_text(raw)) else {
            return false;
        };
        let frame = line::is_frame(msg);
        // A header opens another traceback; IPython's lines take the slow path.
        if line::is_traceback_header(msg)
            || tb.ipython
            || (!frame && line::may_be_ipython_frame(msg))
        {
            return false;
        }
        // A source line with rule literals may leave a cause pending, unless one is already:
        // it is matched later, and only if no frame follows it first (a frame drops a pending
        // cause: only the innermost frame's source line speaks for the exception).
        if let (false, None, Some((ls, pats))) = (frame, &tb.pending, lits) {
            self.deferred.push(DeferredSource {
                ls,
                le: ls + raw.len(),
                line_no,
                pats: pats.iter().copied().collect(),
            });
        }
        // As in handle_line: the line's stream is the traceback's (same prefix bytes), no
        // other traceback goes stale, the rank was noted at the header, and an indented line
        // is never an exception line.
        tb.last_line = line_no;
        let text = if frame {
            tb.enter_frame();
            self.deferred.clear();
            msg.trim()
        } else {
            msg.trim_start()
        };
        tb.after_frame = frame;
        tb.after_blank = false;
        tb.push_frames_text(text);
        if !frame && is_failing_statement(text) {
            let f = self.new_finding(usize::MAX, &line::parse(raw), line_no);
            if let Some(tb) = self.tracebacks.values_mut().next() {
                tb.cut_cause = Some(f);
            }
        }
        true
    }

    /// Matches the source lines [`Scanner::traceback_body_line`] deferred, in order, as
    /// [`Scanner::handle_line`] would have: the first that names a cause leaves it pending.
    /// Called when [`Scanner::handle_line`] starts and at the end of a region (while the lines
    /// are in the buffer).
    pub(super) fn resolve_deferred(&mut self, buf: &[u8], at_start: bool, filter: &Prefilter) {
        if self.deferred.is_empty() {
            return;
        }
        let mut deferred = std::mem::take(&mut self.deferred);
        for d in &deferred {
            // Deferred only while one traceback was open; nothing else was handled since.
            if self.tracebacks.len() != 1 || self.tracebacks.values().any(|tb| tb.pending.is_some())
            {
                break;
            }
            let pl = line::parse(&buf[d.ls..d.le]);
            let lits = LineLiterals {
                ls: d.ls,
                pats: &d.pats,
                filter,
                has_literal: true,
            };
            if self.pend_source_cause(buf, d.ls, d.line_no, at_start, &pl, &lits) {
                break;
            }
        }
        deferred.clear();
        self.deferred = deferred;
    }

    /// Matches a traceback's source line (`pl`, at `ls`) against the cause rules of its
    /// literals; a cause it names waits in its stream's traceback for the exception line.
    /// True when it named one.
    pub(super) fn pend_source_cause(
        &mut self,
        buf: &[u8],
        ls: usize,
        line_no: u64,
        at_start: bool,
        pl: &ParsedLine,
        lits: &LineLiterals,
    ) -> bool {
        let Some(ri) = self.match_rule(pl, lits, None, true) else {
            return false;
        };
        let mut f = self.new_finding(ri, pl, line_no);
        self.attach_context(&mut f, buf, ls, at_start);
        if let Some(tb) = self.tracebacks.get_mut(pl.stream.as_str()) {
            tb.pending = Some(f);
        }
        true
    }

    /// Ranks that failed on their own (not only through a collective or a consequence).
    pub(super) fn mark_failed(&mut self, rank: Option<&str>) {
        self.res
            .ranks_with_traceback
            .insert(rank.unwrap_or("").to_string());
    }

    pub(super) fn close_traceback(&mut self, stream: &str) {
        if let Some(tb) = self.tracebacks.remove(stream) {
            self.closed(tb);
        }
    }

    /// A traceback cut off before its exception: this rank failed in an unknown way, and the
    /// cause its source line named, if any, is recorded.
    fn closed(&mut self, tb: Traceback) {
        if tb.ignored {
            return;
        }
        self.mark_failed(tb.rank.as_deref());
        self.note_engine_frames(&tb.frames);
        if let Some(p) = tb.pending {
            let line_no = p.line;
            self.record(p, line_no);
        }
    }

    /// At the end of the input, a traceback still open was cut off there (a quote): with no
    /// cause pending, the message its header's own line states, else the `assert` or `raise`
    /// its innermost frame shows, is what failed; the frame map names its class where no rule
    /// does, as for an exception line.
    pub(super) fn close_cut_traceback(&mut self, stream: &str) {
        let Some(mut tb) = self.tracebacks.remove(stream) else {
            return;
        };
        let cut = tb
            .header_cause
            .take()
            .or_else(|| tb.cut_cause.take())
            .filter(|_| !tb.ignored && tb.pending.is_none())
            .map(|mut f| {
                if f.rule == usize::MAX {
                    let slot = self.frames_memo.lookup(&tb.frames);
                    if let Some(ri) = self.exception_frame_rule(&tb, slot, None) {
                        f.rule = ri;
                        f.class = self.rules.rules[ri].class;
                    }
                }
                f
            });
        self.closed(tb);
        if let Some(f) = cut {
            let line_no = f.line;
            self.record(f, line_no);
        }
    }
}

/// A source line that fails by itself when it runs: `assert ...`, `raise ...`.
pub(super) fn is_failing_statement(source: &str) -> bool {
    source.starts_with("assert ") || source.starts_with("raise ")
}

/// Whether a summary line (`msg` of the line before a traceback) states the exception that
/// ends it (`exc`, e.g. `RuntimeError: CUDA error: ...`): the summary is the message or its
/// `repr`.
pub(super) fn summary_states(summary: &str, exc: &str) -> bool {
    let exc = exc.trim();
    let m = exc.split_once(": ").map_or("", |(_, m)| m.trim());
    if m.len() < 12 {
        return false;
    }
    let head: String = m.chars().take(60).collect();
    summary.contains(&head) || m.starts_with(summary.trim_end_matches("...").trim())
}

/// Whether a line was logged at INFO or DEBUG by a wrapper's logger rather than an engine's own
/// (whose header names its source file: vLLM's DEBUG traceback of an optional chat-template
/// probe is the engine saying it is harmless).
pub(super) fn is_relayed(pl: &ParsedLine) -> bool {
    matches!(pl.level, Some("INFO" | "DEBUG")) && line::logger_file(&pl.text).is_none()
}
