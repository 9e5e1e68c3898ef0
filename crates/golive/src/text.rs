//! Small text helpers shared by the reports, the checks and the log readers.

/// `s` cut to at most `max` characters, with `…` when something was cut.
pub fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
}

/// A number for evidence lines: whole numbers without decimals, others with three.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Line numbering of a text read forwards: the newlines before byte `counted` are `newlines`
/// (counted only up to where a line number is needed).
#[derive(Default)]
pub(crate) struct LineCount {
    counted: usize,
    newlines: u64,
}

impl LineCount {
    /// Numbering whose text starts at line `first` (1-based).
    pub fn starting_at(first: u64) -> Self {
        LineCount {
            counted: 0,
            newlines: first.saturating_sub(1),
        }
    }

    /// The newlines counted.
    pub fn newlines(&self) -> u64 {
        self.newlines
    }

    /// The text moved `by` bytes towards its start (its front was dropped).
    pub fn shift(&mut self, by: usize) {
        self.counted -= by;
    }

    /// Passes over bytes known to hold no newline, up to `pos`.
    pub fn skip_to(&mut self, pos: usize) {
        self.counted = pos;
    }

    /// Counts the newlines of `text` up to `pos`.
    pub fn count_to(&mut self, text: &[u8], pos: usize) {
        if self.counted < pos {
            self.newlines += memchr::memchr_iter(b'\n', &text[self.counted..pos]).count() as u64;
            self.counted = pos;
        }
    }

    /// Counts the newline at `e`, known to end a line (no search for it).
    pub fn line_ended_at(&mut self, e: usize) {
        self.newlines += 1;
        self.counted = e + 1;
    }

    /// The number of the line starting at the position counted to.
    pub fn next_line(&self) -> u64 {
        self.newlines + 1
    }
}

#[cfg(test)]
mod tests {
    use super::{truncate, LineCount};

    #[test]
    fn line_numbers_follow_the_newlines_counted() {
        let text = b"a\nbb\n\nccc\nd";
        let mut lines = LineCount::starting_at(10);
        assert_eq!(lines.next_line(), 10);
        lines.count_to(text, 5); // after "a\nbb\n"
        assert_eq!(lines.next_line(), 12);
        lines.count_to(text, 3); // behind: nothing counted twice
        assert_eq!(lines.next_line(), 12);
        lines.line_ended_at(5); // the empty line
        lines.count_to(text, text.len());
        assert_eq!((lines.newlines(), lines.next_line()), (13, 14));
        lines.shift(4);
        lines.count_to(text, text.len() - 4); // already counted
        assert_eq!(lines.next_line(), 14);
    }

    #[test]
    fn cuts_on_characters_and_marks_the_cut() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcd", 3), "abc…");
        assert_eq!(truncate("äöüß", 2), "äö…");
        assert_eq!(truncate("", 0), "");
    }
}
