//! `golive replay FILE --url URL`: sends a saved regression case again and says whether
//! it passes now (exit 0) or still fails (exit 1).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::http::send;
use super::regress;
use super::validate::{judge, Outcome, Severity};
use crate::exit;
use crate::report::OutputFormat;
use crate::target::{Target, TargetArgs};

#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// A saved regression case (`DIR/regressions/*.json`).
    pub file: PathBuf,
    /// The OpenAI-compatible server to send it to.
    #[arg(long)]
    pub url: String,
    /// How often to send it; it passes only when every attempt passes.
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    #[arg(long, value_enum, default_value_t)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub target: TargetArgs,
}

pub fn run_replay(args: ReplayArgs) -> anyhow::Result<u8> {
    let reg = regress::load(&args.file)?;
    anyhow::ensure!(
        !reg.content_withheld,
        "{} was saved with --no-content: its prompts are withheld, so it cannot be sent again \
         (rerun the failing case without --no-content on non-personal test data)",
        args.file.display()
    );
    let mut target = Target::new(&args.url, &args.target)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = target.http_client()?;
        let saved_model = reg
            .request
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string);
        // --model wins; else what the server serves; else the saved name.
        let model = match target.resolve_model(&client).await {
            Ok(m) => m,
            Err(e) => match saved_model {
                Some(m) => m,
                None => return Err(e),
            },
        };
        let mut body = reg.request.clone();
        body["model"] = json!(model);
        let endpoint = target.url("/v1/chat/completions");
        let mut attempts = Vec::new();
        let mut unreachable = false;
        for _ in 0..args.repeat.max(1) {
            let sent = send(&client, &endpoint, &body, target.request_timeout).await;
            if matches!(sent.outcome, Outcome::Transport { connect: true, .. }) {
                unreachable = true;
            }
            let problems = judge(&body, &reg.expect, &sent.outcome);
            attempts.push((sent, problems));
        }
        let passed = attempts
            .iter()
            .filter(|(_, p)| !p.iter().any(|p| p.severity == Severity::Fail))
            .count();
        let all = attempts.len();
        match args.format {
            OutputFormat::Json => {
                let out = json!({
                    "file": args.file.display().to_string(),
                    "check": reg.check,
                    "url": target.base_url,
                    "passed": passed,
                    "attempts": all,
                    "results": attempts.iter().map(|(s, p)| json!({
                        "duration_ms": s.duration_ms,
                        "problems": p,
                    })).collect::<Vec<_>>(),
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            }
            OutputFormat::Text => {
                for (i, (sent, problems)) in attempts.iter().enumerate() {
                    let fails: Vec<_> = problems
                        .iter()
                        .filter(|p| p.severity == Severity::Fail)
                        .collect();
                    if fails.is_empty() {
                        println!("attempt {}: PASS ({} ms)", i + 1, sent.duration_ms);
                    } else {
                        println!("attempt {}: FAIL ({} ms)", i + 1, sent.duration_ms);
                    }
                    for p in problems {
                        let owner = serde_json::to_value(p.owner).unwrap_or_default();
                        println!(
                            "  {} [{}] {}: {}",
                            if p.severity == Severity::Fail {
                                "fail"
                            } else {
                                "warn"
                            },
                            owner.as_str().unwrap_or("?"),
                            p.code,
                            p.detail
                        );
                    }
                }
                println!(
                    "{}: {} ({passed}/{all} passed) against {}",
                    reg.check,
                    if passed == all { "PASS" } else { "FAIL" },
                    target.base_url
                );
            }
        }
        Ok(if unreachable {
            exit::UNREACHABLE
        } else if passed == all {
            exit::OK
        } else {
            exit::FOUND
        })
    })
}
