//! JUnit XML rendering of a report: one testcase per check (classname = stage), so CI
//! systems show the acceptance run like a test run. Fail -> failure, skip/unknown ->
//! skipped, warn -> passed with the warning in system-out.
use std::time::Duration;

use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};

use super::worksheet::{self, ItemState};
use super::{Report, Status};

/// The report as JUnit XML (`junit.xml`), one testcase per check.
pub fn render(report: &Report) -> anyhow::Result<String> {
    let mut junit = quick_junit::Report::new("golive accept");
    junit.set_timestamp(report.started_at.fixed_offset());
    let mut suite = TestSuite::new("acceptance");
    suite.set_timestamp(report.started_at.fixed_offset());
    suite.add_property(Property::new(
        "verdict",
        report.verdict.map_or("none", |v| v.as_str()),
    ));
    suite.add_property(Property::new(
        "verdict_reason",
        report.verdict_reason.as_str(),
    ));
    suite.add_property(Property::new("complete", report.complete.to_string()));
    suite.add_property(Property::new("urls", report.urls.join(" ")));
    if let Some(m) = &report.model {
        suite.add_property(Property::new("model", m.as_str()));
    }
    let mut total_ms = 0u64;
    for c in &report.checks {
        let status = match c.status {
            Status::Pass | Status::Warn => TestCaseStatus::success(),
            Status::Fail => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(c.measurement.as_str());
                s.set_type(format!("{:?}", c.impact).to_lowercase());
                let mut description = c.evidence.clone();
                if !c.next_step.is_empty() {
                    description.push_str(&format!("\nnext step: {}", c.next_step));
                }
                s.set_description(description);
                s
            }
            Status::Skip | Status::Unknown => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(c.measurement.as_str());
                s
            }
        };
        let mut tc = TestCase::new(c.id.as_str(), status);
        tc.set_classname(format!(
            "golive.{}",
            serde_json::to_value(c.stage)?.as_str().unwrap_or("stage")
        ));
        tc.set_time(Duration::from_millis(c.duration_ms));
        total_ms += c.duration_ms;
        let mut out = format!("{}\n{}", c.test_case, c.measurement);
        if c.status == Status::Warn {
            out = format!("WARNING: {out}\n{}", c.evidence);
        }
        tc.set_system_out(out);
        suite.add_test_case(tc);
    }
    suite.set_time(Duration::from_millis(total_ms));
    junit.add_test_suite(suite);
    let entries = worksheet::current(report);
    if !entries.is_empty() {
        junit.add_test_suite(worksheet_suite(&entries));
    }
    Ok(junit.to_string()?)
}

/// One testcase per worksheet item: proven passes, failed fails, an item that needs a
/// person (or was accepted open) is skipped with what to attach.
fn worksheet_suite(entries: &[worksheet::Entry]) -> TestSuite {
    let mut suite = TestSuite::new("worksheet");
    for e in entries {
        let status = match e.state {
            ItemState::Proven => TestCaseStatus::success(),
            ItemState::Failed => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(e.detail.as_str());
                s
            }
            ItemState::NeedsPerson | ItemState::Accepted => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(format!("{}: {}", e.state.as_str(), e.detail));
                s
            }
        };
        let mut tc = TestCase::new(e.id.as_str(), status);
        tc.set_classname("golive.worksheet");
        tc.set_system_out(format!("{}\n{}", e.text, e.detail));
        suite.add_test_case(tc);
    }
    suite
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Check, Stage};

    #[test]
    fn one_testcase_per_check_and_failures_carry_the_measurement() {
        let mut r = Report::new(vec!["http://x".into()]);
        let mut f = Check::new("prefix_cache", Stage::PrefixCache, Status::Fail, "t");
        f.measurement = "feature off <&>".into();
        r.checks.push(f);
        r.checks
            .push(Check::new("soak", Stage::Soak, Status::Skip, "t"));
        r.checks
            .push(Check::new("basic_chat", Stage::Basic, Status::Pass, "t"));
        let xml = render(&r).unwrap();
        assert_eq!(xml.matches("<testcase ").count(), 3);
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("feature off &lt;&amp;&gt;"));
        assert!(xml.contains("classname=\"golive.prefix_cache\""));
        assert!(xml.contains("<skipped"));
        let back = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(back.tests, 3);
    }
}
