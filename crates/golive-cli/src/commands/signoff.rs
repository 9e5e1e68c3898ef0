//! `golive signoff`: arguments and output; the hashing is `golive::signoff`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use golive::report::Integrity;
use golive::report::{report_path, Report, Verdict};
use golive::signoff::{self, SignOptions, SignatureState};

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
    #[arg(long, conflicts_with_all = ["reviewer", "decision", "note", "key", "rollback_owner", "accept_open"])]
    pub verify: bool,
    /// The reviewer's SSH private key: the sign-off is signed with
    /// `ssh-keygen -Y sign -n golive`. Without it the sign-off is recorded as unsigned.
    #[arg(long, value_name = "PATH")]
    pub key: Option<PathBuf>,
    /// With --verify: check each signature with `ssh-keygen -Y verify` against this
    /// allowed-signers file (the reviewer is the identity); unsigned sign-offs then fail.
    #[arg(long, value_name = "FILE", requires = "verify")]
    pub allowed_signers: Option<PathBuf>,
    /// Sign a report whose run did not complete.
    #[arg(long)]
    pub allow_incomplete: bool,
    /// Who rolls the deployment back (the worksheet's rollback item; alert annotations).
    #[arg(long, value_name = "NAME")]
    pub rollback_owner: Option<String>,
    /// Accept a worksheet item left open (failed or needing a person) by its id, as
    /// ITEM or ITEM=REASON; repeatable. Without it, signoff refuses while items are open.
    #[arg(long, value_name = "ITEM[=REASON]")]
    pub accept_open: Vec<String>,
    /// The reason for each --accept-open item given without its own.
    #[arg(long, value_name = "TEXT", requires = "accept_open")]
    pub reason: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

pub fn run(args: SignoffArgs) -> anyhow::Result<u8> {
    if args.verify {
        return verify(&args);
    }
    let s = signoff::sign(&args.dir, &sign_options(&args)?)?;
    let report = Report::load(&signoff::report_dir(&args.dir))?;
    let html = signoff::write_html(&args.dir)?;
    match args.format {
        OutputFormat::Json => out::line(serde_json::to_string(&s)?)?,
        OutputFormat::Text => {
            out::line(format!(
                "signed off by {} with decision {}: {} files covered by SHA-256, {}; {} rewritten",
                s.reviewer,
                s.decision.as_str(),
                s.covered.len(),
                if s.signature.is_some() {
                    "signed with the SSH key"
                } else {
                    "UNSIGNED (no --key)"
                },
                html.display()
            ))?;
            let entries = golive::report::current_worksheet(&report);
            if !entries.is_empty() {
                let [proven, failed, person, accepted] = golive::report::worksheet_tally(&entries);
                out::line(format!(
                    "worksheet: {proven} proven, {failed} failed, {person} need a person, {accepted} accepted open"
                ))?;
            }
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

fn sign_options(args: &SignoffArgs) -> anyhow::Result<SignOptions> {
    let decision = args
        .decision
        .as_deref()
        .map(str::parse::<Verdict>)
        .transpose()?;
    let mut accept_open = BTreeMap::new();
    for item in &args.accept_open {
        let (id, reason) = match item.split_once('=') {
            Some((id, reason)) => (id, reason.to_string()),
            None => (item.as_str(), args.reason.clone().unwrap_or_default()),
        };
        accept_open.insert(id.trim().to_string(), reason);
    }
    Ok(SignOptions {
        reviewer: args.reviewer.clone().unwrap_or_default(),
        decision,
        note: args.note.clone().unwrap_or_default(),
        allow_incomplete: args.allow_incomplete,
        key: args.key.clone(),
        rollback_owner: args.rollback_owner.clone(),
        accept_open,
    })
}

fn signature_text(state: &SignatureState) -> String {
    match state {
        SignatureState::Unsigned => "unsigned".to_string(),
        SignatureState::NotChecked => {
            "signed (signature not checked: pass --allowed-signers)".to_string()
        }
        SignatureState::Good => "signature good".to_string(),
        SignatureState::Bad(msg) => format!("signature BAD: {msg}"),
    }
}

fn verify(args: &SignoffArgs) -> anyhow::Result<u8> {
    let (report, results) = signoff::verify(&args.dir)?;
    anyhow::ensure!(
        !report.signoffs.is_empty(),
        "{} has no sign-off to verify",
        report_path(&args.dir).display()
    );
    let allowed = args.allowed_signers.as_deref();
    let mut states = Vec::new();
    for s in &report.signoffs {
        states.push(signoff::verify_signature(s, allowed)?);
    }
    let all_intact = results.iter().all(Integrity::intact);
    let signed_ok = allowed.is_none() || states.iter().all(|s| *s == SignatureState::Good);
    match args.format {
        OutputFormat::Json => out::line(serde_json::json!({
            "intact": all_intact,
            "signatures_ok": signed_ok,
            "signoffs": results,
            "signatures": states,
        }))?,
        OutputFormat::Text => {
            for (x, state) in results.iter().zip(&states) {
                out::line(format!(
                    "{}\n  {}",
                    signoff::describe(&report, x),
                    signature_text(state)
                ))?;
            }
        }
    }
    Ok(if all_intact && signed_ok {
        crate::exit::OK
    } else {
        crate::exit::FOUND
    })
}
