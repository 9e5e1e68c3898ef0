//! `golive replay FILE --url URL`: sends a saved regression case again and says whether
//! it passes now (exit 0) or still fails (exit 1).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::http::send;
use super::regress;
use super::validate::{judge, Outcome, Problem, Severity};
use crate::target::{Target, TargetOptions};

/// What `golive replay` runs: a saved case, a server, how often.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// A saved regression case (`DIR/regressions/*.json`).
    pub file: PathBuf,
    /// The OpenAI-compatible server to send it to.
    pub url: String,
    /// How often to send it; it passes only when every attempt passes.
    pub repeat: u32,
    /// Credentials, model and timeouts of the server.
    pub target: TargetOptions,
}

/// Sends the saved case `repeat` times and judges every answer.
pub async fn replay(args: &ReplayOptions) -> crate::Result<ReplayResult> {
    let reg = regress::load(&args.file)?;
    crate::error::ensure_input!(
        !reg.content_withheld,
        "{} was saved with --no-content: its prompts are withheld, so it cannot be sent again \
         (rerun the failing case without --no-content on non-personal test data)",
        args.file.display()
    );
    let mut target = Target::new(&args.url, &args.target)?;
    let client = crate::client::OpenAiClient::new(&target)?;
    let saved_model = reg
        .request
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string);
    // --model wins; else what the server serves; else the saved name.
    let model = match target.resolve_model(&client.http).await {
        Ok(m) => m,
        Err(e) => match saved_model {
            Some(m) => m,
            None => return Err(e.into()),
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
    Ok(ReplayResult {
        file: args.file.display().to_string(),
        check: reg.check.clone(),
        url: target.base_url.clone(),
        attempts: attempts
            .into_iter()
            .map(|(sent, problems)| ReplayAttempt {
                duration_ms: sent.duration_ms,
                problems,
            })
            .collect(),
        unreachable,
    })
}

/// One sending of the saved case.
#[derive(Debug, Clone)]
pub struct ReplayAttempt {
    /// From sending to the end of the answer, ms.
    pub duration_ms: u64,
    /// The validator's findings on this answer.
    pub problems: Vec<Problem>,
}

impl ReplayAttempt {
    /// No failing finding (warnings allowed).
    pub fn passed(&self) -> bool {
        !self.problems.iter().any(|p| p.severity == Severity::Fail)
    }
}

/// What `replay` found.
#[derive(Debug, Clone)]
pub struct ReplayResult {
    /// The regression file, as given.
    pub file: String,
    /// The check it failed in, e.g. `agent_tool_required_arg`.
    pub check: String,
    /// The server it was sent to (base URL).
    pub url: String,
    /// Every attempt, in order.
    pub attempts: Vec<ReplayAttempt>,
    /// An attempt could not connect.
    pub unreachable: bool,
}

impl ReplayResult {
    /// Attempts that passed.
    pub fn passed(&self) -> usize {
        self.attempts.iter().filter(|a| a.passed()).count()
    }

    /// Every attempt passed (`golive replay` exits 0).
    pub fn all_passed(&self) -> bool {
        self.passed() == self.attempts.len()
    }

    /// The result as `golive replay --format json` prints it.
    pub fn to_json(&self) -> Value {
        json!({
            "file": self.file,
            "check": self.check,
            "url": self.url,
            "passed": self.passed(),
            "attempts": self.attempts.len(),
            "results": self.attempts.iter().map(|a| json!({
                "duration_ms": a.duration_ms,
                "problems": a.problems,
            })).collect::<Vec<_>>(),
        })
    }

    /// The report for people: one line per attempt and problem, then the summary.
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (i, a) in self.attempts.iter().enumerate() {
            let verdict = if a.passed() { "PASS" } else { "FAIL" };
            let _ = writeln!(out, "attempt {}: {verdict} ({} ms)", i + 1, a.duration_ms);
            for p in &a.problems {
                let owner = serde_json::to_value(p.owner).unwrap_or_default();
                let _ = writeln!(
                    out,
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
        let _ = writeln!(
            out,
            "{}: {} ({}/{} passed) against {}",
            self.check,
            if self.all_passed() { "PASS" } else { "FAIL" },
            self.passed(),
            self.attempts.len(),
            self.url
        );
        out
    }
}
