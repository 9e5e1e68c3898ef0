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

/// Deepest nesting a PromQL expression may have: the parser and the walkers recurse,
/// and a deeply nested expression would overflow the stack.
pub const MAX_PROMQL_DEPTH: usize = 128;

/// Deepest nesting (flow brackets, block indentation) a YAML document may have; the YAML
/// parser is slow on deep nesting long before it refuses it.
pub const MAX_YAML_DEPTH: usize = 64;

/// Deepest nesting of `(`, `[` and `{` in `s`, not counting brackets inside the quotes
/// listed in `quotes` (a backslash escapes the next character there). With
/// `count_unary`, unary operators (`-`, `+`, `!`) in a row count as nesting too: PromQL
/// parsers recurse on them.
pub fn nesting_depth(s: &str, quotes: &[u8], count_unary: bool) -> usize {
    let (mut depth, mut deepest, mut unary) = (0usize, 0usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for &b in s.as_bytes() {
        if let Some(q) = quote {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                _ if b == q => quote = None,
                _ => {}
            }
            continue;
        }
        match b {
            _ if quotes.contains(&b) => quote = Some(b),
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'+' | b'!' if count_unary => unary += 1,
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => unary = 0,
        }
        if matches!(b, b'(' | b'[' | b'{') {
            unary = 0;
        }
        deepest = deepest.max(depth + unary);
    }
    deepest
}

/// An error when a PromQL expression nests deeper than [`MAX_PROMQL_DEPTH`].
pub fn check_promql_depth(expr: &str) -> anyhow::Result<()> {
    let depth = nesting_depth(expr, b"\"'`", true);
    anyhow::ensure!(
        depth <= MAX_PROMQL_DEPTH,
        "the PromQL expression nests {depth} levels deep; at most {MAX_PROMQL_DEPTH} are read"
    );
    Ok(())
}

/// An error when a YAML text nests deeper than [`MAX_YAML_DEPTH`]: flow brackets, or
/// block levels (estimated from indentation and `- ` sequence marks).
pub fn check_yaml_depth(text: &str) -> anyhow::Result<()> {
    let flow = nesting_depth(text, b"\"", false);
    let block = text
        .lines()
        .map(|l| {
            let indent = l.len() - l.trim_start_matches(' ').len();
            let rest = &l[indent..];
            let dashes = rest.split("- ").take_while(|p| p.trim().is_empty()).count();
            indent / 2 + dashes
        })
        .max()
        .unwrap_or(0);
    let depth = flow.max(block);
    anyhow::ensure!(
        depth <= MAX_YAML_DEPTH,
        "the YAML nests about {depth} levels deep; at most {MAX_YAML_DEPTH} are read"
    );
    Ok(())
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
    use super::{check_promql_depth, check_yaml_depth, truncate, LineCount};

    #[test]
    fn deep_promql_and_yaml_are_refused_and_usual_text_is_not() {
        let deep = format!("{}x{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(check_promql_depth(&deep)
            .unwrap_err()
            .to_string()
            .contains("at most 128"));
        assert!(check_promql_depth(&format!("{}1", "-".repeat(10_000))).is_err());
        let fine = r#"sum(rate(x{job!="a((((("}[5m])) - -1 / on() group(y)"#;
        check_promql_depth(fine).unwrap();
        assert!(check_yaml_depth(&"[".repeat(40_000)).is_err());
        let block: String = (0..200)
            .map(|i| format!("{}a{i}:\n", "  ".repeat(i)))
            .collect();
        assert!(check_yaml_depth(&block)
            .unwrap_err()
            .to_string()
            .contains("at most 64"));
        assert!(check_yaml_depth(&"- ".repeat(1000)).is_err());
        check_yaml_depth("# ------------------------------------------------------------------------------------\na:\n  - b: [1, {c: d}]\n").unwrap();
    }

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
