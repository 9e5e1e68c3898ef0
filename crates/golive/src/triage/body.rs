//! A traceback's body lines read without parsing them again. vLLM's logger and the process
//! wrappers (`(EngineCore pid=..) `, `[rank3]: `) write every line of a traceback behind the
//! same prefix bytes as its header; behind those bytes an indented line (a frame, a source
//! line, a caret line) starts no prefix of its own, so its message is the rest of the line.
//! In a crash loop most lines are such lines: this is the scanner's fast path for them.

use smallvec::SmallVec;

use super::line::ParsedLine;

/// The raw prefix bytes of a parsed line (everything before its message).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BodyPrefix(SmallVec<[u8; 96]>);

impl BodyPrefix {
    /// The prefix of `pl` (its cleaned text before the message), when the parse of another
    /// line behind the same bytes can depend on nothing but them: not behind a timestamp
    /// without a level (a wrapper logger's fields may follow the prefix).
    pub fn of(pl: &ParsedLine) -> Option<Self> {
        if pl.ts.is_some() && pl.level.is_none() {
            return None;
        }
        // A prefix reader may take one space after its prefix: behind a prefix that does not
        // end with one, it would take the first blank of the body line too.
        let prefix = &pl.text.as_bytes()[..pl.msg_start];
        if !prefix.is_empty() && !prefix.ends_with(b" ") {
            return None;
        }
        Some(BodyPrefix(SmallVec::from_slice(prefix)))
    }

    /// The text of `raw` and its message when it is an indented line behind exactly these
    /// prefix bytes: then `line::parse(raw)` reads the same prefixes (same stream and rank), this
    /// text and this message. `None` when unsure (the caller parses the line).
    ///
    /// Why this holds: every prefix reader consumes at most one space after its prefix, so the
    /// same bytes followed by a blank are read the same way; after them the prefix loop only
    /// goes on at a digit, a `(`, a `[` or a letter (none starts the indented rest, checked
    /// below), and the level readers look at the first byte of the rest (a blank here).
    pub fn body_text<'a>(&self, raw: &'a [u8]) -> Option<(&'a str, &'a str)> {
        let rest = raw.strip_prefix(self.0.as_slice())?;
        if !matches!(rest.first(), Some(b' ' | b'\t')) {
            return None;
        }
        if matches!(rest.iter().find(|&&b| b != b' '), Some(b'(' | b'[')) {
            return None;
        }
        // The raw prefix equals the cleaned one, so it holds no terminal codes; the rest is
        // the message when cleaning leaves it as it is, but for a final `\r` (a TTY's line
        // end, removed by cleaning).
        let rest = match rest.split_last() {
            Some((b'\r', r)) => r,
            _ => rest,
        };
        if memchr::memchr2(0x1b, b'\r', rest).is_some() {
            return None;
        }
        // A line after a progress bar's last state starts after the bar (the parser's reading).
        if super::line::last_bar_start(rest).is_some() {
            return None;
        }
        // One check of the whole text (the prefix came from a text: the message starts at a
        // character boundary).
        let text = simdutf8::basic::from_utf8(&raw[..self.0.len() + rest.len()]).ok()?;
        Some((text, text.get(self.0.len()..)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::triage::line::parse;

    /// Header/body pairs in the real formats; the body's message and stream must be what the
    /// parser says, or the fast path must step aside.
    #[test]
    fn a_body_line_behind_its_header_prefix_reads_as_the_parser_reads_it() {
        let cases: &[(&str, &str, bool)] = &[
            (
                "(EngineCore pid=6890) ERROR 08-03 21:49:23 [core.py:1231] Traceback (most recent call last):",
                "(EngineCore pid=6890) ERROR 08-03 21:49:23 [core.py:1231]   File \"/x/core.py\", line 1200, in run",
                true,
            ),
            (
                "(EngineCore pid=6890) Traceback (most recent call last):",
                "(EngineCore pid=6890)     engine_core = EngineCoreProc(*args)",
                true,
            ),
            ("[rank3]: Traceback (most recent call last):", "[rank3]:   File \"a.py\", line 3, in f", true),
            ("Traceback (most recent call last):", "  File \"a.py\", line 3, in f", true),
            ("Traceback (most recent call last):", "    ^^^^^^^^", true),
            // Not indented: the parser decides.
            ("Traceback (most recent call last):", "ValueError: x", false),
            // A `(`/`[` may start a prefix of its own.
            ("Traceback (most recent call last):", "  (VllmWorker rank=1 pid=3) x", false),
            ("Traceback (most recent call last):", "  [rank1]: x", false),
            // Other prefix bytes.
            (
                "(EngineCore pid=6890) Traceback (most recent call last):",
                "(EngineCore pid=6891)   File \"a.py\", line 3, in f",
                false,
            ),
            // Terminal codes are cleaned by the parser.
            ("Traceback (most recent call last):", "  File \"a.py\"\x1b[0m, line 3", false),
            (
                "\x1b[36m(EngineCore pid=1)\x1b[0m Traceback (most recent call last):",
                "\x1b[36m(EngineCore pid=1)\x1b[0m   File \"a.py\", line 3, in f",
                false,
            ),
            // A TTY's `\r` line ends.
            (
                "(EngineCore pid=6890) ERROR 08-03 21:49:23 [core.py:1231] Traceback (most recent call last):\r",
                "(EngineCore pid=6890) ERROR 08-03 21:49:23 [core.py:1231]     raise ValueError(\r",
                true,
            ),
            ("Traceback (most recent call last):\r", "  File \"a.py\", line 3\r\r", false),
            // A line written after a progress bar's last state starts after the bar (found by
            // fuzzing).
            (
                "Traceback (most recent call last):",
                "  gemm2:  33%|###  | 7/21 [00:01<00:09, 1.40it/s]2026-08-01 21:22:18,781 - INFO - x",
                false,
            ),
        ];
        for (header, body, fast) in cases {
            let h = parse(header.as_bytes());
            let bp = BodyPrefix::of(&h).expect("a plain header has a body prefix");
            let got = bp.body_text(body.as_bytes());
            assert_eq!(got.is_some(), *fast, "{header:?} / {body:?}");
            if let Some((t, m)) = got {
                let b = parse(body.as_bytes());
                assert_eq!(t, b.text, "{body:?}");
                assert_eq!(m, b.msg(), "{body:?}");
                assert_eq!(b.stream, h.stream, "{body:?}");
                assert_eq!(b.rank(), h.rank(), "{body:?}");
            }
        }
    }

    #[test]
    fn no_body_prefix_where_the_last_reader_took_no_space() {
        // The label's optional space is the body line's first blank (found by fuzzing).
        let h = parse(b"svc-1  | (APIServer pid=1)");
        assert_eq!(BodyPrefix::of(&h), None);
        let body = parse(b"svc-1  | (APIServer pid=1)  File \"a.py\", line 3");
        assert_eq!(body.msg(), " File \"a.py\", line 3");
    }

    #[test]
    fn no_body_prefix_behind_a_bare_timestamp() {
        // A docker timestamp without a level: a wrapper logger's fields may follow.
        let ts = parse(b"2025-01-01T00:00:00.000000000Z Traceback (most recent call last):");
        assert!(ts.ts.is_some());
        assert_eq!(BodyPrefix::of(&ts), None);
    }
}
