//! The end of a log that stopped before its server served. An SRE reading such a log asks how
//! the process ended: with no orderly stop and nothing serving, the log's last error after
//! the last sign of progress is what it says went wrong (a Metal `unsupported op`, a SYCL
//! `PI_ERROR_OUT_OF_HOST_MEMORY`, an `InvalidModule` from the GPU runtime) even when no rule
//! knows the message. The `[[tail]]` entries of `rules.toml` say which lines count and their
//! class. The finding is kept apart from the others: `decide` uses it only when no cause and
//! no lone consequence is found in any input. A longer log counts only where it shows a server
//! starting or loading (a piece of a long log says nothing about how one ended). A quote (at
//! most [`TAIL_LINES`] lines, no server starting, loading or serving: what an issue pastes) is
//! read whole with the `quote = true` entries: its first error line is what it quotes as going
//! wrong. Lines a rule judged (a finding, a benign line), traceback frames and access lines are
//! skipped. Read once from the last buffer after the scan, so the hot loop is unchanged.

use super::{RawFinding, Scanner, MAX_SHOWN};
use crate::triage::{line, Class};

/// Lines at the end of the input that are looked at.
const TAIL_LINES: usize = 200;

/// The last [`TAIL_LINES`] whole lines of `text` (the input's last bytes), in order, with their
/// numbers: the last one is `last_line`. `whole` says whether `text` starts at a line start.
fn last_lines(text: &[u8], last_line: u64, whole: bool) -> Vec<(u64, &[u8])> {
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut pieces: Vec<&[u8]> = body.rsplitn(TAIL_LINES + 1, |&b| b == b'\n').collect();
    // The piece before the first newline kept may be a line's end only.
    if pieces.len() == TAIL_LINES + 1 || !whole {
        pieces.pop();
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, l)| (last_line.saturating_sub(i as u64), l))
        .rev()
        .filter(|(n, _)| *n > 0)
        .collect()
}

/// A line of a Python traceback (its header, an indented frame or source line, a caret line,
/// the chain between two exceptions, the exception line): a quote's traceback is judged by the
/// rules of its exception (a request's error that the server answered is no end), and vLLM's
/// logger writes each of these lines at ERROR level.
fn traceback_part(msg: &str) -> bool {
    msg.starts_with([' ', '\t'])
        || line::is_traceback_header(msg)
        || line::is_exception_line(msg)
        || msg.starts_with("The above exception was")
        || msg.starts_with("During handling of the above exception")
        || msg.trim().chars().all(|c| matches!(c, '^' | '~'))
}

impl Scanner<'_> {
    /// Remembers that a benign rule quieted `line` (only the last [`TAIL_LINES`] count).
    pub(super) fn quieted(&mut self, line: u64) {
        if self.quiet_lines.len() == TAIL_LINES {
            self.quiet_lines.pop_front();
        }
        self.quiet_lines.push_back(line);
    }

    /// The end-of-log finding of this input (see the module docs), if the log stopped before
    /// serving, without an orderly stop, with a matching line after its last progress.
    pub(super) fn tail_finding(&self, text: &[u8], whole: bool) -> Option<RawFinding> {
        let life = &self.res.life;
        // A quote short enough to be read whole that shows no server at all: what it quotes
        // is what went wrong, its first error line.
        let quote = !life.engine_ran() && self.res.lines <= TAIL_LINES as u64;
        if (!life.engine_ran() && !quote)
            || life.first_served.is_some()
            || life.stopped.is_some()
            || self.shutdown
        {
            return None;
        }
        let entries = if quote {
            &self.rules.quote_rules
        } else {
            &self.rules.tail_rules
        };
        let after = life
            .last_progress
            .max(life.last_loading)
            .max(life.went_on.values().copied().max().unwrap_or(0));
        // Lines a rule already judged (a request's exception, a survived error) are not
        // news, and neither are a traceback's frames and their source lines.
        let judged: std::collections::HashSet<u64> = self
            .res
            .findings
            .iter()
            .map(|f| f.line)
            .chain(self.quiet_lines.iter().copied())
            .collect();
        let mut after_frame = false;
        last_lines(text, self.res.lines, whole)
            .into_iter()
            .filter(|(n, _)| *n > after)
            .find_map(|(n, bytes)| {
                let pl = line::parse(&bytes[..bytes.len().min(MAX_SHOWN * 2)]);
                let frame = pl.msg().trim_start().starts_with("File \"");
                let source = std::mem::replace(&mut after_frame, frame);
                // An access line with an error status failed one request.
                let access = pl.msg().contains(" HTTP/1.");
                if frame
                    || source
                    || access
                    || judged.contains(&n)
                    || matches!(pl.level, Some("INFO" | "DEBUG"))
                    || (quote && traceback_part(pl.msg()))
                {
                    return None;
                }
                let error_level = matches!(pl.level, Some("ERROR" | "CRITICAL"));
                // A line its logger rated a warning was got past, whatever it says.
                let warning = matches!(pl.level, Some("WARNING" | "WARN"));
                let (ri, _) = entries.iter().copied().find(|&(ri, needs_level)| {
                    let r = &self.rules.rules[ri];
                    (error_level || (!needs_level && !warning))
                        && r.regex.as_ref().is_some_and(|re| re.is_match(pl.msg()))
                })?;
                let mut f = self.new_finding(ri, &pl, n);
                // A class the entry leaves open: the component the logger's file or the
                // message names (the frame map), as for a bare ERROR line.
                if f.class == Class::Unknown {
                    if let Some(fr) = self.rules.logger_rule(&f.text) {
                        f.class = self.rules.rules[fr].class;
                    }
                }
                Some(f)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn the_last_lines_are_numbered_from_the_end() {
        let lines = last_lines(b"a\nb\nc\n", 3, true);
        assert_eq!(lines, vec![(1, &b"a"[..]), (2, b"b"), (3, b"c")]);
        // Without a final newline the last piece is the last line all the same.
        let lines = last_lines(b"a\nb\nc", 3, true);
        assert_eq!(lines[2], (3, &b"c"[..]));
        // A buffer that starts mid-line drops its first piece.
        let lines = last_lines(b"tail of x\ny\nz\n", 10, false);
        assert_eq!(lines, vec![(9, &b"y"[..]), (10, b"z")]);
        // Only the last TAIL_LINES are kept.
        let many: Vec<u8> = (0..500)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let lines = last_lines(&many, 500, true);
        assert_eq!(lines.len(), super::TAIL_LINES);
        assert_eq!(lines[0], (301, &b"300"[..]));
    }
}
