//! Small text helpers shared by the reports and the checks.

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

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn cuts_on_characters_and_marks_the_cut() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcd", 3), "abc…");
        assert_eq!(truncate("äöüß", 2), "äö…");
        assert_eq!(truncate("", 0), "");
    }
}
