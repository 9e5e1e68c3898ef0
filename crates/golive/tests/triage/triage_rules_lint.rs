//! Rule hygiene of `rules.toml`, as tests: no pattern that can never fire because an earlier
//! rule always takes its lines, no duplicate patterns, no regex that matches a bare number
//! (a pid, a timestamp, a port).

use golive::triage::{Rule, RuleKind, RuleSet};

fn set() -> RuleSet {
    RuleSet::load(&[] as &[&str]).unwrap()
}

fn stops_matching(a: &Rule, b: &Rule) -> bool {
    // `a` takes every line that holds one of its literals (no regex, no frames, not generic),
    // at every level where `b` could fire.
    if a.regex.is_some() || a.frames.is_some() || a.generic || a.kind == RuleKind::Fact {
        return false;
    }
    let levelled =
        |k: RuleKind| matches!(k, RuleKind::Cause | RuleKind::Consequence | RuleKind::Hint);
    if !levelled(a.kind) {
        return true;
    }
    levelled(b.kind) && (a.on_warning || !b.on_warning)
}

#[test]
fn no_pattern_is_shadowed_by_an_earlier_rule() {
    let set = set();
    let mut dead = Vec::new();
    for (bi, b) in set.rules.iter().enumerate() {
        if b.kind == RuleKind::Fact {
            continue;
        }
        for lb in set.literals_of(b) {
            for a in &set.rules[..bi] {
                if !stops_matching(a, b) {
                    continue;
                }
                if let Some(la) = set
                    .literals_of(a)
                    .iter()
                    .find(|la| lb.contains(la.as_str()))
                {
                    dead.push(format!(
                        "{}: pattern {lb:?} never fires, {}'s {la:?} takes its lines first",
                        b.id, a.id
                    ));
                }
            }
        }
    }
    assert!(dead.is_empty(), "{dead:#?}");
}

#[test]
fn no_duplicate_patterns() {
    let set = set();
    let mut seen: std::collections::HashMap<String, String> = Default::default();
    let mut dups = Vec::new();
    // A literal an earlier rule narrows with a regex or frames may come back in a later,
    // wider rule (that is how a refinement is written); facts never take a line.
    let refines = |r: &Rule| r.regex.is_some() || r.frames.is_some() || r.kind == RuleKind::Fact;
    let mut earlier: std::collections::HashMap<String, &Rule> = Default::default();
    for r in &set.rules {
        let lits = set.literals_of(r);
        for l in &lits {
            if let Some(other) = seen.insert(l.clone(), r.id.clone()) {
                if !refines(earlier[l]) {
                    dups.push(format!("{l:?} in {other} and {}", r.id));
                }
            }
            earlier.entry(l.clone()).or_insert(r);
            // A literal that holds another literal of the same rule adds no line.
            if let Some(inner) = lits.iter().find(|m| *m != l && l.contains(m.as_str())) {
                dups.push(format!("{}: {l:?} holds its own {inner:?}", r.id));
            }
        }
    }
    assert!(dups.is_empty(), "{dups:#?}");
}

#[test]
fn no_regex_matches_a_bare_number() {
    let numbers = [
        "0",
        "1",
        "7",
        "42",
        "524",
        "5240",
        "2024",
        "65535",
        "12:05:24.524",
        "2026-12-01",
        "10.0.0.5",
        "0x1f",
        "3.14",
    ];
    let set = set();
    let mut bad = Vec::new();
    for r in &set.rules {
        for (what, re) in [
            ("regex", &r.regex),
            ("frames", &r.frames),
            ("path", &r.frame_path),
        ] {
            if let Some(re) = re {
                for n in numbers {
                    if re.is_match(n) {
                        bad.push(format!("{} {what} {:?} matches {n:?}", r.id, re.as_str()));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_lint_finds_what_it_looks_for() {
    // A rule file with each defect: the checks above must see them.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        r#"
[[rule]]
id = "a"
kind = "cause"
class = "nccl"
patterns = ["NCCL error"]
why = "w"
next_step = "n"

[[rule]]
id = "b"
kind = "cause"
class = "nccl"
patterns = ["NCCL error: unhandled", "NCCL error"]
regex = "524"
why = "w"
next_step = "n"
"#,
    )
    .unwrap();
    let set = RuleSet::load(&[&p]).unwrap();
    let (a, b) = (&set.rules[0], &set.rules[1]);
    assert!(stops_matching(a, b));
    assert!(set.literals_of(b).iter().any(|l| l.contains("NCCL error")));
    assert!(b.regex.as_ref().unwrap().is_match("pid 5240"));
}
