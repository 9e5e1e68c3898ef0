//! Fuzz entries of the triage engine (driven by [`crate::fuzz`]): the line reader against
//! its regex reference, and the whole scanner against itself read in full and in small buffers.

use super::rules::RuleSet;
use super::{body, decide, line, scan};

/// Fuzz entry: the line reader on every line of `data`; its hand-written prefix readers must
/// agree with the regexes alone.
#[doc(hidden)]
pub fn fuzz_lines(data: &[u8]) {
    let mut prev: Option<(body::BodyPrefix, line::Stream, Option<String>)> = None;
    for raw in data.split(|&b| b == b'\n') {
        let pl = line::parse(raw);
        // The scanner's fast path for traceback bodies must read a line as the parser does.
        if let Some((bp, stream, rank)) = &prev {
            if let Some((t, m)) = bp.body_text(raw) {
                let shown = String::from_utf8_lossy(raw);
                assert_eq!(t, pl.text, "{shown:?}");
                assert_eq!(m, pl.msg(), "{shown:?}");
                assert_eq!(stream, &pl.stream, "{shown:?}");
                assert_eq!(rank.as_deref(), pl.rank(), "{shown:?}");
            }
        }
        prev = body::BodyPrefix::of(&pl)
            .map(|bp| (bp, pl.stream.clone(), pl.rank().map(str::to_string)));
        assert_eq!(
            pl,
            line::parse_reference(raw),
            "{:?}",
            String::from_utf8_lossy(raw)
        );
        let msg = pl.msg();
        let _ = line::is_frame(msg);
        let _ = line::is_exception_line(msg);
        let _ = line::is_traceback_header(msg);
        assert!(pl.msg_start <= pl.text.len());
    }
}

/// Fuzz entry: the whole scanner and the decision on `data` as one log.
#[doc(hidden)]
pub fn fuzz_scan(data: &[u8]) {
    static RULES: std::sync::OnceLock<RuleSet> = std::sync::OnceLock::new();
    let rules = RULES.get_or_init(|| RuleSet::load(&[] as &[&str]).expect("built-in rules"));
    let res = scan::scan_slice(rules, data, 3).expect("reading a slice cannot fail");
    // The lines judged without a parse are judged as the full line handler judges them.
    let full = scan::scan_slice_in_full(rules, data, 3).expect("reading a slice cannot fail");
    assert!(
        res == full,
        "fast paths differ:\n{res:#?}\nin full:\n{full:#?}"
    );
    // Read in small buffers: the same result (lines of a MiB or more are cut where a buffer
    // ends, so only inputs without one compare).
    if data.len() < scan::MAX_LINE
        || data
            .split(|&b| b == b'\n')
            .all(|l| l.len() < scan::MAX_LINE)
    {
        let chunked =
            scan::scan_slice_in_chunks(rules, data, 3, 4096).expect("reading a slice cannot fail");
        // (Binary input is reported with the bytes read until it was found.)
        assert!(
            res == chunked || (res.binary && chunked.binary),
            "small buffers differ:\n{res:#?}\nin 4 KiB buffers:\n{chunked:#?}"
        );
    }
    for f in &res.findings {
        assert!(
            f.line >= 1 && f.line <= res.lines,
            "finding at line {} of {}",
            f.line,
            res.lines
        );
    }
    let _ = decide(rules, vec![("-".to_string(), res)], Vec::new());
}
