//! Writing the report files and attaching triage / container logs to failed server-side checks.

use std::path::{Path, PathBuf};

use crate::report::{Report, Stage, Status};

/// Writes report.json, report.md, junit.xml and report.html into `out`.
pub fn write_outputs(report: &Report, out: &Path) -> anyhow::Result<()> {
    report.save_json(out)?;
    crate::report::write_atomic(
        &out.join("report.md"),
        crate::report::markdown::render(report).as_bytes(),
    )?;
    crate::report::write_atomic(
        &out.join("junit.xml"),
        crate::report::junit::render(report)?.as_bytes(),
    )?;
    crate::report::write_atomic(
        &out.join("report.html"),
        crate::report::html::render(report).as_bytes(),
    )?;
    Ok(())
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
            let path = out.join("server-container.log");
            crate::report::write_atomic(&path, &text)?;
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
