//! `golive signoff`: a second person's decision is recorded with SHA-256 of the report
//! and its evidence; a later change to any of them is detected by `--verify` and
//! shown in the re-rendered report.html.

mod common;

use std::path::Path;
use std::process::Command;

use common::{golive, text};
use golive::report::{Check, Impact, Report, Stage, Status, Verdict};

/// A finished report with evidence files, as an acceptance run leaves it.
fn report_dir(dir: &Path) {
    let mut r = Report::new(vec!["http://127.0.0.1:8000".into()]);
    r.operator = Some("alice".into());
    r.model = Some("kimi-k3".into());
    r.complete = true;
    let mut c = Check::new(
        "prefix_cache",
        Stage::PrefixCache,
        Status::Pass,
        "warm request reuses the prefix",
    );
    c.measurement = "cached 335 of 365 prompt tokens".into();
    c.impact = Impact::Capacity;
    r.checks.push(c);
    r.decide();
    r.save_json(dir).unwrap();
    std::fs::write(dir.join("report.md"), "# report\n").unwrap();
    std::fs::write(dir.join("junit.xml"), "<testsuites/>\n").unwrap();
    std::fs::create_dir_all(dir.join("regressions")).unwrap();
    std::fs::write(
        dir.join("regressions/tool-case-1.json"),
        "{\"messages\":[]}\n",
    )
    .unwrap();
}

#[test]
fn signoff_records_hashes_and_verify_detects_every_kind_of_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    report_dir(dir);
    let d = dir.to_str().unwrap();

    let out = golive(&[
        "signoff",
        d,
        "--reviewer",
        "bob",
        "--note",
        "checked <logs> & metrics",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = Report::load(dir).unwrap();
    assert_eq!(r.signoffs.len(), 1);
    let s = &r.signoffs[0];
    assert_eq!(s.reviewer, "bob");
    // The decision defaults to the run's verdict.
    assert_eq!(s.decision, Verdict::Release);
    let files: Vec<&str> = s.covered.keys().map(String::as_str).collect();
    assert_eq!(
        files,
        [
            "junit.xml",
            "regressions/tool-case-1.json",
            "report.json",
            "report.md"
        ]
    );
    // The evidence hash is the plain SHA-256 of the file (as sha256sum computes it).
    let sum = Command::new("sha256sum")
        .arg(dir.join("report.md"))
        .output()
        .unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    assert_eq!(
        sum.split_whitespace().next(),
        Some(s.covered["report.md"].as_str())
    );

    // The HTML shows who ran it, who reviewed it, and the intact sign-off; text is escaped.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<dt>Ran it</dt><dd>alice</dd>"), "{html}");
    assert!(html.contains("<dt>Reviewed by</dt><dd>bob</dd>"));
    assert!(html.contains("intact"));
    assert!(html.contains("checked &lt;logs&gt; &amp; metrics"));

    // Verify right away: intact, exit 0. A second sign-off does not break the first.
    let out = golive(&["signoff", d, "--reviewer", "carol", "--decision", "observe"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("differs from the run's verdict"),
        "{}",
        text(&out)
    );
    let out = golive(&["signoff", "--verify", d]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(text(&out).matches("intact").count(), 2, "{}", text(&out));

    // Change evidence, remove some, add some, and touch a measurement in report.json.
    std::fs::write(dir.join("report.md"), "# report (edited)\n").unwrap();
    std::fs::remove_file(dir.join("junit.xml")).unwrap();
    std::fs::write(dir.join("regressions/tool-case-2.json"), "{}\n").unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    v["checks"][0]["measurement"] = "cached 365 of 365 prompt tokens".into();
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_vec_pretty(&v).unwrap(),
    )
    .unwrap();

    let out = golive(&["signoff", "--verify", d]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("CHANGED since the sign-off"), "{t}");
    assert!(t.contains("changed: report.json"), "{t}");
    assert!(t.contains("changed: report.md"), "{t}");
    assert!(t.contains("removed: junit.xml"), "{t}");
    assert!(t.contains("added:   regressions/tool-case-2.json"), "{t}");

    // Re-rendering shows it too.
    golive::signoff::write_html(dir).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("CHANGED since sign-off"), "{html}");
    assert!(html.contains("removed: junit.xml"));
}

#[test]
fn reformatting_report_json_keeps_the_signoff_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    report_dir(dir);
    let d = dir.to_str().unwrap();
    assert_eq!(
        golive(&["signoff", d, "--reviewer", "bob"]).status.code(),
        Some(0)
    );
    // Same content, compact and with reordered keys: still intact.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let mut pairs: Vec<(String, serde_json::Value)> =
        v.as_object().unwrap().clone().into_iter().collect();
    pairs.reverse();
    let reordered = format!(
        "{{{}}}",
        pairs
            .iter()
            .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
            .collect::<Vec<_>>()
            .join(",")
    );
    std::fs::write(dir.join("report.json"), reordered).unwrap();
    let out = golive(&["signoff", "--verify", d, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["intact"], true);
}

#[test]
fn the_operator_cannot_sign_their_own_run_and_bad_input_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    report_dir(dir);
    let d = dir.to_str().unwrap();
    let out = golive(&["signoff", d, "--reviewer", "Alice"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("second person"), "{}", text(&out));
    let out = golive(&["signoff", d, "--reviewer", "bob", "--decision", "ship-it"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("unknown decision"), "{}", text(&out));
    let out = golive(&["signoff", "--verify", d]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no sign-off"), "{}", text(&out));
    // An interrupted run is not signed by accident.
    let mut r = Report::load(dir).unwrap();
    r.complete = false;
    r.save_json(dir).unwrap();
    let out = golive(&["signoff", d, "--reviewer", "bob"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--allow-incomplete"), "{}", text(&out));
    assert!(Report::load(dir).unwrap().signoffs.is_empty());
}
