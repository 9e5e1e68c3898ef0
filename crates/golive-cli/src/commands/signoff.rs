//! `golive signoff`: arguments and output; the hashing is `golive::signoff`.

use std::path::PathBuf;

use golive::report::html::Integrity;
use golive::report::{report_path, Report, Verdict};
use golive::signoff;

use crate::args::OutputFormat;
use crate::out;

#[derive(Debug, Clone, clap::Args)]
pub struct SignoffArgs {
    /// The report directory.
    pub dir: PathBuf,
    /// Who reviewed the measurements and logs (a second person, not the operator).
    #[arg(long, required_unless_present = "verify")]
    pub reviewer: Option<String>,
    /// release, observe, rebuild or expand; default: the run's verdict.
    #[arg(long)]
    pub decision: Option<String>,
    #[arg(long)]
    pub note: Option<String>,
    /// Check the recorded sign-offs against the files now instead of signing.
    #[arg(long, conflicts_with_all = ["reviewer", "decision", "note"])]
    pub verify: bool,
    /// Sign a report whose run did not complete.
    #[arg(long)]
    pub allow_incomplete: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

pub fn run(args: SignoffArgs) -> anyhow::Result<u8> {
    if args.verify {
        let (report, results) = signoff::verify(&args.dir)?;
        anyhow::ensure!(
            !report.signoffs.is_empty(),
            "{} has no sign-off to verify",
            report_path(&args.dir).display()
        );
        let all_intact = results.iter().all(Integrity::intact);
        match args.format {
            OutputFormat::Json => {
                out::line(serde_json::json!({"intact": all_intact, "signoffs": results}))?
            }
            OutputFormat::Text => {
                for x in &results {
                    out::line(signoff::describe(&report, x))?;
                }
            }
        }
        return Ok(if all_intact {
            crate::exit::OK
        } else {
            crate::exit::FOUND
        });
    }
    let reviewer = args.reviewer.as_deref().unwrap_or_default();
    let decision = args
        .decision
        .as_deref()
        .map(str::parse::<Verdict>)
        .transpose()?;
    let s = signoff::sign(
        &args.dir,
        reviewer,
        decision,
        args.note.as_deref().unwrap_or(""),
        args.allow_incomplete,
    )?;
    let report = Report::load(&signoff::report_dir(&args.dir))?;
    let html = signoff::write_html(&args.dir)?;
    match args.format {
        OutputFormat::Json => out::line(serde_json::to_string(&s)?)?,
        OutputFormat::Text => {
            out::line(format!(
                "signed off by {} with decision {}: {} files covered by SHA-256; {} rewritten",
                s.reviewer,
                s.decision.as_str(),
                s.covered.len(),
                html.display()
            ))?;
            if let Some(v) = report.verdict {
                if v != s.decision {
                    out::line(format!(
                        "note: the decision differs from the run's verdict ({})",
                        v.as_str()
                    ))?;
                }
            }
        }
    }
    Ok(crate::exit::OK)
}
