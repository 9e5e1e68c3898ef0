//! Running the probes: the `Collector` that runs each command probe with its deadline
//! ([`crate::command::run`]), writes its output under its contract name and records it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::ProbeRecord;
use crate::redact::{redact_args, redact_text};

// ---------------------------------------------------------------- collection

/// What a command probe keeps under its contract name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// stdout, on success.
    Stdout,
    /// stdout and stderr, on success (`docker logs` replays the container's stderr on stderr).
    Both,
    /// stdout and stderr, also on failure: the error is the evidence (`docker run` refused by
    /// nvidia-container-cli).
    Evidence,
}

pub(super) struct Collector {
    pub(super) raw: PathBuf,
    pub(super) timeout: Duration,
    pub(super) probes: Vec<ProbeRecord>,
}

/// The last non-empty line (a traceback's last line names the error).
pub(super) fn first_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .map(|l| redact_text(l).chars().take(200).collect())
}

impl Collector {
    pub(super) fn write(&self, file: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let text = redact_text(&String::from_utf8_lossy(bytes));
        crate::outfile::write_atomic(&self.raw.join(file), text.as_bytes())?;
        Ok(())
    }

    /// Runs a command probe and writes its output as `keep` says; a failure's
    /// combined output goes to `<file>.failed.txt` and a timed-out probe's partial
    /// output to `<file>.partial.txt`, so the contract file only ever holds real,
    /// whole output (unless the error itself is the evidence).
    pub(super) async fn cmd<S: AsRef<str>>(
        &mut self,
        name: &str,
        argv: &[S],
        file: &str,
        keep: Keep,
    ) -> Option<Vec<u8>> {
        let keep_failure = keep == Keep::Evidence;
        let argv: Vec<String> = argv.iter().map(|s| s.as_ref().to_string()).collect();
        let out = crate::command::run(&argv, self.timeout).await;
        let mut rec = ProbeRecord {
            name: name.to_string(),
            command: redact_args(&argv).join(" "),
            available: out.available,
            exit_status: out.status,
            duration_ms: out.duration.as_millis() as u64,
            timed_out: out.timed_out,
            output: None,
            error: out.error.clone(),
        };
        let mut result = None;
        if out.timed_out {
            let mut partial = out.stdout.clone();
            partial.extend_from_slice(&out.stderr);
            let kept = format!("{file}.partial.txt");
            if !partial.is_empty() && self.write(&kept, &partial).is_ok() {
                rec.output = Some(kept);
                rec.error = Some(format!(
                    "{}; the {} bytes it wrote until then are kept",
                    out.error.as_deref().unwrap_or("timed out"),
                    partial.len()
                ));
            }
        } else if out.available {
            let mut combined = out.stdout.clone();
            combined.extend_from_slice(&out.stderr);
            if out.status == Some(0) || keep_failure {
                let bytes = if keep == Keep::Stdout {
                    out.stdout.clone()
                } else {
                    combined
                };
                if self.write(file, &bytes).is_ok() {
                    rec.output = Some(file.to_string());
                }
                result = Some(bytes);
            } else {
                let failed = format!("{file}.failed.txt");
                if self.write(&failed, &combined).is_ok() {
                    rec.output = Some(failed);
                }
            }
            if out.status != Some(0) {
                rec.error = first_line(&out.stderr).or_else(|| first_line(&out.stdout));
            }
        }
        self.probes.push(rec);
        result.filter(|_| out.status == Some(0) || keep_failure)
    }

    /// Reads a file probe (`/proc/modules`).
    pub(super) fn file(&mut self, name: &str, path: &Path, file: &str) -> Option<String> {
        let start = Instant::now();
        let read = crate::input::read_capped(path, crate::input::max_input());
        let mut rec = ProbeRecord {
            name: name.to_string(),
            command: format!("read {}", path.display()),
            available: read.is_ok(),
            exit_status: read.is_ok().then_some(0),
            duration_ms: start.elapsed().as_millis() as u64,
            ..Default::default()
        };
        let result = match read {
            Ok(bytes) => {
                if self.write(file, &bytes).is_ok() {
                    rec.output = Some(file.into());
                }
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            Err(e) => {
                rec.error = Some(e.to_string());
                None
            }
        };
        self.probes.push(rec);
        result
    }

    /// Records a probe whose output golive derived itself (process cmdline/env).
    pub(super) fn derived(
        &mut self,
        name: &str,
        command: String,
        file: &str,
        text: Option<String>,
        error: Option<String>,
    ) {
        let mut rec = ProbeRecord {
            name: name.into(),
            command,
            available: text.is_some(),
            ..Default::default()
        };
        match text {
            Some(t) => {
                rec.exit_status = Some(0);
                if self.write(file, t.as_bytes()).is_ok() {
                    rec.output = Some(file.into());
                }
            }
            None => rec.error = error,
        }
        self.probes.push(rec);
    }
}
