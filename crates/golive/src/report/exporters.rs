//! The report files, one [`Exporter`] each, as hyperfine writes its results through a
//! `trait Exporter`: each renders the whole report as it stands into the bytes of one
//! file. `accept` feeds them from its event stream (`accept::ReportFiles`): report.json
//! is rewritten at every step, so an interrupted run keeps what it measured; the others
//! are written once, from the final report.

use super::Report;

/// One report file, rendered from the whole report.
pub trait Exporter: Send + Sync {
    /// The file's name inside the output folder.
    fn file_name(&self) -> &'static str;

    /// Rewritten from every intermediate report too, not only the final one.
    fn intermediate(&self) -> bool {
        false
    }

    /// The file's bytes for `report` as it stands.
    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>>;
}

/// `report.json`: the report itself, pretty-printed; rewritten as results come.
pub struct Json;

impl Exporter for Json {
    fn file_name(&self) -> &'static str {
        "report.json"
    }

    fn intermediate(&self) -> bool {
        true
    }

    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        Ok(serde_json::to_vec_pretty(report)?)
    }
}

/// `report.md`: for people and pull requests.
pub struct Markdown;

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        Ok(super::markdown::render(report).into_bytes())
    }
}

/// `junit.xml`: one testcase per check, for CI systems.
pub struct Junit;

impl Exporter for Junit {
    fn file_name(&self) -> &'static str {
        "junit.xml"
    }

    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        Ok(super::junit::render(report)?.into_bytes())
    }
}

/// `report.html`: self-contained, with charts.
pub struct Html;

impl Exporter for Html {
    fn file_name(&self) -> &'static str {
        "report.html"
    }

    fn render(&self, report: &Report) -> anyhow::Result<Vec<u8>> {
        Ok(super::html::render(report).into_bytes())
    }
}

/// The files `golive accept` writes, in the order they are written.
pub fn standard() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(Json),
        Box::new(Markdown),
        Box::new(Junit),
        Box::new(Html),
    ]
}
