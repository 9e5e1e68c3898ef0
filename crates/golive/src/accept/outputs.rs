//! The report files as a reporter of the run's events, and attaching triage / container
//! logs to failed server-side checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::events::{Event, Events, ReportError, Reporter};
use crate::report::exporters::{self, Exporter};
use crate::report::{write_atomic, Report, Stage, Status};

/// The report files in one folder, written from the event stream: the intermediate
/// ones (report.json) at every [`Event::ReportUpdated`], all of them at
/// [`Event::ReportFinished`]. A write that fails is returned to the run, which stops.
pub struct ReportFiles {
    dir: PathBuf,
    exporters: Vec<Box<dyn Exporter>>,
}

impl ReportFiles {
    /// report.json, report.md, junit.xml and report.html in `dir`.
    pub fn standard(dir: &Path) -> Self {
        ReportFiles {
            dir: dir.to_path_buf(),
            exporters: exporters::standard(),
        }
    }

    fn write(&self, report: &Report, last: bool) -> anyhow::Result<()> {
        for exporter in self.exporters.iter().filter(|e| last || e.intermediate()) {
            let bytes = exporter.render(report)?;
            write_atomic(&self.dir.join(exporter.file_name()), &bytes)?;
        }
        Ok(())
    }
}

impl Reporter for ReportFiles {
    fn report(&self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::ReportUpdated(report) => self.write(report, false)?,
            Event::ReportFinished(report) => self.write(report, true)?,
            _ => {}
        }
        Ok(())
    }
}

/// Hands the report as it stands to the reporters, and stops the run when one of them
/// failed (a report file that could not be written: the CLI exits 4 for that).
pub(super) struct Publisher {
    pub(super) events: Events,
}

impl Publisher {
    /// `events` with the report files of `out` first among their reporters.
    pub(super) fn new(events: &Events, out: &Path) -> Self {
        Publisher {
            events: events.and_first(Arc::new(ReportFiles::standard(out))),
        }
    }

    /// The report so far (report.json is rewritten), or, when it is `last`, the final
    /// report (every file is written).
    pub(super) fn publish(&self, report: &Report, last: bool) -> anyhow::Result<()> {
        self.events.emit(Event::report(report, last));
        self.events.check()
    }
}

pub(super) fn any_server_failure(report: &Report) -> bool {
    report
        .checks
        .iter()
        .any(|c| c.status == Status::Fail && !matches!(c.stage, Stage::Environment | Stage::Agent))
}

/// How long `docker logs` may take before it is killed (what it wrote is still kept).
const CONTAINER_LOGS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Saves `docker logs` (else `podman logs`) of the container into `out/server-container.log`;
/// a tool that hangs is killed at the deadline and what it wrote until then is kept.
pub(super) async fn container_logs(name: &str, out: &Path) -> anyhow::Result<PathBuf> {
    let mut last_err = None;
    for tool in ["docker", "podman"] {
        let argv = [tool, "logs", "--tail", "20000", name].map(String::from);
        let o = crate::command::run(&argv, CONTAINER_LOGS_DEADLINE).await;
        if o.success() || (o.timed_out && !(o.stdout.is_empty() && o.stderr.is_empty())) {
            // Containers log to both streams; the engine's errors are usually on stderr.
            let mut text = o.stdout;
            text.extend_from_slice(&o.stderr);
            // vLLM logs its arguments at start (`api_key=[...]`): secrets out.
            let text = crate::redact::redact_text(&String::from_utf8_lossy(&text));
            let path = out.join("server-container.log");
            write_atomic(&path, text.as_bytes())?;
            return Ok(path);
        }
        let why = if o.available {
            crate::text::truncate(String::from_utf8_lossy(&o.stderr).trim(), 300)
        } else {
            o.error.unwrap_or_default()
        };
        last_err = Some(anyhow::anyhow!("{tool} logs {name}: {why}"));
    }
    Err(last_err.unwrap_or_else(|| anyhow::anyhow!("no container tool")))
}

/// Puts the triage engine's first-cause line into the evidence of failed server-side checks.
pub(super) fn attach_triage(report: &mut Report, log: &Path) {
    if !any_server_failure(report) {
        return;
    }
    let opts = crate::triage::TriageOptions {
        context: 5,
        ..Default::default()
    };
    let line = match crate::triage::analyze_paths(&[log.to_path_buf()], &opts) {
        Ok(t) => t.primary.map(|f| {
            format!(
                "first cause ({} line {}, {}): {}\n{}",
                f.file,
                f.line,
                f.class.as_str(),
                f.text,
                f.why
            )
        }),
        Err(e) => Some(format!("triage of {} failed: {e:#}", log.display())),
    };
    let Some(line) = line else { return };
    for c in report.checks.iter_mut().filter(|c| {
        c.status == Status::Fail && !matches!(c.stage, Stage::Environment | Stage::Agent)
    }) {
        c.evidence = if c.evidence.is_empty() {
            line.clone()
        } else {
            format!("{line}\n---\n{}", c.evidence)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Check;

    #[test]
    fn report_files_rewrite_json_as_results_come_and_write_all_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let files = Arc::new(ReportFiles::standard(dir.path()));
        let events = Events::default().and_first(files.clone());
        let mut report = Report::new(vec!["http://x".into()]);
        let names = ["report.json", "report.md", "junit.xml", "report.html"];
        let written = || names.map(|n| dir.path().join(n).exists());

        events.emit(Event::ReportUpdated(Arc::new(report.clone())));
        assert_eq!(written(), [true, false, false, false]);
        report
            .checks
            .push(Check::new("basic_chat", Stage::Basic, Status::Pass, "t"));
        events.emit(Event::ReportUpdated(Arc::new(report.clone())));
        assert_eq!(Report::load(dir.path()).unwrap(), report, "rewritten");

        report.decide();
        report.complete = true;
        events.emit(Event::ReportFinished(Arc::new(report.clone())));
        assert_eq!(written(), [true; 4]);
        assert!(events.check().is_ok());
        // The same bytes as each exporter renders, and report.json as save_json writes it.
        for e in exporters::standard() {
            let on_disk = std::fs::read(dir.path().join(e.file_name())).unwrap();
            assert_eq!(on_disk, e.render(&report).unwrap(), "{}", e.file_name());
        }
        let saved = tempfile::tempdir().unwrap();
        report.save_json(saved.path()).unwrap();
        assert_eq!(
            std::fs::read(saved.path().join("report.json")).unwrap(),
            std::fs::read(dir.path().join("report.json")).unwrap()
        );
    }

    #[test]
    fn a_file_that_cannot_be_written_is_kept_as_the_runs_error() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the folder should be: nothing can be written under it.
        let blocked = dir.path().join("out");
        std::fs::write(&blocked, "").unwrap();
        let files = Arc::new(ReportFiles::standard(&blocked));
        let run = Events::default();
        let events = run.and_first(files.clone());
        events.emit(Event::Notice("ignored".into()));
        assert!(events.check().is_ok());
        // The reporter itself returns the error ...
        let report = Arc::new(Report::new(vec![]));
        let direct = files
            .report(&Event::ReportUpdated(report.clone()))
            .expect_err("the failed write");
        assert!(
            direct
                .into_inner()
                .chain()
                .any(|c| c.is::<crate::report::WriteFailed>()),
            "the cause chain is kept"
        );
        // ... and the run's handle keeps the first one, for both handles of the run.
        events.emit(Event::ReportUpdated(report.clone()));
        events.emit(Event::ReportFinished(report));
        let e = run.check().expect_err("the failed write");
        // Returned as the library's error of kind Write, with the reporter's causes inside.
        let typed = e.downcast_ref::<crate::Error>().expect("a typed error");
        assert_eq!(typed.kind(), crate::ErrorKind::Write);
        assert!(
            typed.causes().any(|c| c.is::<crate::report::WriteFailed>()),
            "{e:#}"
        );
        assert!(events.check().is_ok(), "taken once");
    }
}
