//! Markdown rendering of a report.
use super::Report;

pub fn render(report: &Report) -> String {
    let _ = report;
    String::new()
}
