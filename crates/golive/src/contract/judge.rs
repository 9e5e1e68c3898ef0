//! The contract items' verdicts, judged from what a server answered (no I/O here:
//! the runner sends the requests and hands the answers in).

use serde::Serialize;

use crate::report::{Owner, Status};

/// One item's verdict: status, the evidence it was judged on, and who fixes a failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// How the item came out.
    pub status: Status,
    /// What it was judged on, in words.
    pub evidence: String,
    /// Who fixes a failure or a warning; `None` when it passed.
    pub owner: Option<Owner>,
}

fn pass(evidence: String) -> Verdict {
    Verdict {
        status: Status::Pass,
        evidence,
        owner: None,
    }
}

fn fail(owner: Owner, evidence: String) -> Verdict {
    Verdict {
        status: Status::Fail,
        evidence,
        owner: Some(owner),
    }
}

/// params: a wrong value of an immutable parameter must get HTTP 400.
pub fn wrong_param(name: &str, value: &serde_json::Value, http_status: u16) -> Verdict {
    match http_status {
        400 => pass(format!("{name}={value} rejected with 400")),
        200..=299 => fail(
            Owner::Server,
            format!("{name}={value} accepted ({http_status}): the server does not enforce the model's contract"),
        ),
        s => Verdict {
            status: Status::Warn,
            evidence: format!("{name}={value} answered {s}, not 400"),
            owner: Some(Owner::Server),
        },
    }
}

/// prompt_tokens: the reported count lies in `[expected, expected + tolerance]`.
pub fn prompt_tokens(label: &str, expected: u64, reported: Option<u64>, tolerance: u64) -> Verdict {
    let Some(reported) = reported else {
        return fail(Owner::Server, format!("{label}: no usage.prompt_tokens"));
    };
    let evidence = format!(
        "{label}: usage.prompt_tokens {reported}, /tokenize {expected}, tolerance +{tolerance}"
    );
    if (expected..=expected + tolerance).contains(&reported) {
        pass(evidence)
    } else {
        fail(Owner::Server, evidence)
    }
}

/// What one answer carried, for the reasoning item.
#[derive(Debug, Clone, Default)]
pub struct Answer<'a> {
    /// The reasoning channel (`reasoning_content` or `reasoning`); `None`: absent.
    pub reasoning: Option<&'a str>,
    /// The answer's `content`.
    pub content: &'a str,
    /// The answer's `finish_reason`.
    pub finish_reason: Option<&'a str>,
}

/// reasoning: with thinking on, a reasoning channel and a clean `content`; a
/// truncation inside the think channel is named as such; with thinking off, none.
pub fn reasoning(thinking: bool, a: &Answer, markers: &[String]) -> Verdict {
    let leaked: Vec<&str> = markers
        .iter()
        .map(String::as_str)
        .filter(|m| a.content.contains(m))
        .collect();
    if !leaked.is_empty() {
        return fail(
            Owner::Parser,
            format!("content carries reasoning markers {leaked:?}"),
        );
    }
    let has_reasoning = a.reasoning.is_some_and(|r| !r.trim().is_empty());
    match (thinking, has_reasoning) {
        (true, false) => fail(Owner::Parser, "thinking on, but no reasoning_content/reasoning".into()),
        (false, true) => fail(Owner::Parser, "thinking off, but a reasoning channel came back".into()),
        (true, true) if a.finish_reason == Some("length") && a.content.trim().is_empty() => Verdict {
            status: Status::Warn,
            evidence: "reasoning truncated (finish_reason length inside the think channel), no answer yet".into(),
            owner: None,
        },
        _ => pass(format!("thinking {}: reasoning {}, content clean", on_off(thinking), if has_reasoning { "present" } else { "absent" })),
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// degenerate output: a single repeated character, a runaway repetition (a short
/// unit repeated over the text's second half), or too many U+FFFD characters.
pub fn degenerate(text: &str, max_replacement_share: f64) -> Verdict {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return fail(Owner::Server, "empty generation".into());
    }
    let bad = chars.iter().filter(|&&c| c == '\u{FFFD}').count();
    let share = bad as f64 / chars.len() as f64;
    if share > max_replacement_share {
        return fail(
            Owner::Server,
            format!(
                "{bad} of {} characters are U+FFFD ({:.1}%)",
                chars.len(),
                share * 100.0
            ),
        );
    }
    if chars.len() >= 16 && chars.iter().all(|&c| c == chars[0]) {
        return fail(
            Owner::Server,
            format!(
                "one character {:?} repeated {} times",
                chars[0],
                chars.len()
            ),
        );
    }
    if let Some(unit) = runaway(&chars) {
        return fail(Owner::Server, format!("runaway repetition of {unit:?}"));
    }
    pass(format!("{} characters, no degenerate pattern", chars.len()))
}

/// A unit of 1–32 characters that repeats back to back over the last half of a text
/// of at least 64 characters.
fn runaway(chars: &[char]) -> Option<String> {
    if chars.len() < 64 {
        return None;
    }
    let tail = &chars[chars.len() / 2..];
    (1..=32).find_map(|p| {
        let repeats = tail.len() >= 3 * p && tail[p..].iter().zip(tail).all(|(a, b)| a == b);
        repeats.then(|| tail[..p].iter().collect())
    })
}

/// Every path: the ranks (or replicas) whose answer differs from the majority's.
pub fn odd_ones<'a>(answers: &[(&'a str, &str)]) -> Vec<&'a str> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, a) in answers {
        match counts.iter_mut().find(|(t, _)| t == a) {
            Some((_, n)) => *n += 1,
            None => counts.push((a, 1)),
        }
    }
    let Some(&(majority, n)) = counts.iter().max_by_key(|(_, n)| *n) else {
        return Vec::new();
    };
    if n * 2 <= answers.len() && answers.len() > 2 {
        return answers.iter().map(|(p, _)| *p).collect();
    }
    answers
        .iter()
        .filter(|(_, a)| *a != majority)
        .map(|(p, _)| *p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_accepted_wrong_temperature_fails_owner_server() {
        let v = wrong_param("temperature", &json!(0.3), 200);
        assert_eq!((v.status, v.owner), (Status::Fail, Some(Owner::Server)));
        assert_eq!(
            wrong_param("temperature", &json!(0.3), 400).status,
            Status::Pass
        );
    }

    #[test]
    fn an_overcount_of_ten_prompt_tokens_fails_owner_server() {
        let v = prompt_tokens("stream", 42, Some(52), 3);
        assert_eq!((v.status, v.owner), (Status::Fail, Some(Owner::Server)));
        assert!(
            v.evidence.contains("52") && v.evidence.contains("42"),
            "{}",
            v.evidence
        );
        assert_eq!(
            prompt_tokens("stream", 42, Some(45), 3).status,
            Status::Pass
        );
        assert_eq!(
            prompt_tokens("stream", 42, Some(41), 3).status,
            Status::Fail
        );
    }

    #[test]
    fn reasoning_leaked_into_content_fails_owner_parser() {
        let markers = vec!["<think>".to_string(), "</think>".to_string()];
        let leak = Answer {
            reasoning: None,
            content: "<think>hmm</think>4",
            finish_reason: Some("stop"),
        };
        let v = reasoning(true, &leak, &markers);
        assert_eq!((v.status, v.owner), (Status::Fail, Some(Owner::Parser)));
        let good = Answer {
            reasoning: Some("2+2"),
            content: "4",
            finish_reason: Some("stop"),
        };
        assert_eq!(reasoning(true, &good, &markers).status, Status::Pass);
        assert_eq!(reasoning(false, &good, &markers).status, Status::Fail);
        let cut = Answer {
            reasoning: Some("long"),
            content: "",
            finish_reason: Some("length"),
        };
        let v = reasoning(true, &cut, &markers);
        assert_eq!(v.status, Status::Warn);
        assert!(v.evidence.contains("truncated"));
    }

    #[test]
    fn degenerate_outputs_fail_owner_server() {
        assert_eq!(degenerate(&"a".repeat(100), 0.01).status, Status::Fail);
        let runaway = format!("The answer is simple. {}", "the cat ".repeat(30));
        let v = degenerate(&runaway, 0.01);
        assert_eq!((v.status, v.owner), (Status::Fail, Some(Owner::Server)));
        assert_eq!(
            degenerate("ok \u{FFFD}\u{FFFD} text", 0.01).status,
            Status::Fail
        );
        let prose = "Paris is the capital of France. It lies on the Seine and has about two million inhabitants.";
        assert_eq!(degenerate(prose, 0.01).status, Status::Pass);
    }

    #[test]
    fn the_rank_that_answers_differently_is_named() {
        let answers = [
            ("rank 0", "Paris"),
            ("rank 1", "xq#@!zz"),
            ("rank 2", "Paris"),
        ];
        assert_eq!(odd_ones(&answers), vec!["rank 1"]);
        assert!(odd_ones(&[("rank 0", "a"), ("rank 1", "a")]).is_empty());
    }
}
