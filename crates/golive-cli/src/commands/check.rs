//! `golive check`: arguments and output of the environment checklist.

use std::path::PathBuf;

use golive::check::{self, CheckOptions};
use golive::report::Status;

use crate::args::OutputFormat;
use crate::{exit, out};

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Bundle directories (one per node).
    #[arg(required = true)]
    pub bundles: Vec<PathBuf>,
    /// Built-in profile name (`kimi-k3`, `vllm`) or a profile file.
    #[arg(long)]
    pub profile: Option<String>,
    /// A recipe YAML in the format of vllm-project/recipes (models/<org>/<model>.yaml).
    #[arg(long, conflicts_with = "profile")]
    pub recipe: Option<PathBuf>,
    /// Count `unknown` items as failures for the exit code.
    #[arg(long)]
    pub strict: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
}

impl From<&CheckArgs> for CheckOptions {
    fn from(a: &CheckArgs) -> Self {
        CheckOptions {
            bundles: a.bundles.clone(),
            profile: a.profile.clone(),
            recipe: a.recipe.clone(),
        }
    }
}

pub fn run(args: CheckArgs) -> anyhow::Result<u8> {
    let report = check::check(&CheckOptions::from(&args))?;
    match args.format {
        OutputFormat::Json => out::json_pretty(&report)?,
        OutputFormat::Text => out::text(&paint_statuses(&check::render_text(&report)))?,
    }
    let unknown = report.items.iter().any(|i| i.status == Status::Unknown);
    Ok(if report.any_fail() || (args.strict && unknown) {
        exit::FOUND
    } else {
        exit::OK
    })
}

/// The checklist with each item's status word (the first word of its line) in the
/// colour of its status.
fn paint_statuses(text: &str) -> String {
    const WORDS: [(&str, Status); 5] = [
        ("pass ", Status::Pass),
        ("warn ", Status::Warn),
        ("FAIL ", Status::Fail),
        ("unknown ", Status::Unknown),
        ("skip ", Status::Skip),
    ];
    text.split_inclusive('\n')
        .map(
            |line| match WORDS.iter().find(|(word, _)| line.starts_with(word)) {
                Some((word, status)) => {
                    let (word, rest) = line.split_at(word.len() - 1);
                    format!("{}{rest}", out::styled(out::status_style(*status), word))
                }
                None => line.to_string(),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::paint_statuses;

    #[test]
    fn only_the_status_word_of_an_item_line_is_painted() {
        let text = "decision: fix it\n\nFAIL     reproducible  Reproducible record\n         evidence: pass the test\nunknown  host_driver  Host driver\npass     parsers  Parsers\n";
        let painted = paint_statuses(text);
        assert_eq!(
            painted,
            "decision: fix it\n\n\x1b[1m\x1b[31mFAIL\x1b[0m     reproducible  Reproducible record\n         evidence: pass the test\n\x1b[33munknown\x1b[0m  host_driver  Host driver\n\x1b[32mpass\x1b[0m     parsers  Parsers\n"
        );
    }
}
