//! Check `stream_silence`: the longest gap between output deltas of every streamed
//! request of the ramp and the soak, p99 and max per step. Agent clients time out on
//! a silent stream long before the request does ("Tool use interrupted"); vLLM #50604
//! sent one tool-call delta after 32 s of silence. A gap inside a tool call (a
//! tool-call delta on both sides) is the parser's: the tokens were generated and held
//! back. A gap between content tokens is the server's.

use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use crate::client::LatencyStats;
use crate::report::{Check, CheckId, Impact, Owner, Percentiles, RampStep, Stage, Status};

/// The gaps of one ramp step or of the soak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapRow {
    /// Ramp or soak.
    pub stage: Stage,
    /// The ramp step's label, or `soak`.
    pub label: String,
    /// Streamed requests with at least two output deltas.
    pub requests: u64,
    /// p99 of the gaps between output deltas (ms).
    pub p99_ms: f64,
    /// Longest gap between output deltas (ms).
    pub max_ms: f64,
    /// The longest gap inside a tool call (ms), if any.
    pub tool_call_max_ms: Option<f64>,
    /// Time to the first tool-call delta, p99 (ms), when tool calls were streamed.
    pub first_tool_call_p99_ms: Option<f64>,
}

impl GapRow {
    fn new(
        stage: Stage,
        label: &str,
        gaps: &Percentiles,
        tool: Option<f64>,
        first_tool: &Percentiles,
    ) -> Self {
        GapRow {
            stage,
            label: label.to_string(),
            requests: gaps.count,
            p99_ms: gaps.p99,
            max_ms: gaps.max,
            tool_call_max_ms: tool,
            first_tool_call_p99_ms: (first_tool.count > 0).then_some(first_tool.p99),
        }
    }

    /// The gaps of a recorded ramp step.
    pub fn from_step(s: &RampStep) -> Self {
        Self::new(
            Stage::Ramp,
            &s.label,
            &s.stream_gap_ms,
            s.tool_call_gap_max_ms,
            &s.first_tool_call_ms,
        )
    }

    /// The gaps in a run's latency stats, under `label`.
    pub fn from_stats(stage: Stage, label: &str, s: &LatencyStats) -> Self {
        Self::new(
            stage,
            label,
            &s.stream_gap_ms(),
            s.tool_call_gap_max_ms(),
            &s.first_tool_call_ms(),
        )
    }
}

/// `stream_silence` over `rows`; `None` when no ramp or soak step ran.
pub fn check(rows: &[GapRow], max_gap: Duration, url: &str) -> Option<Check> {
    if rows.is_empty() {
        return None;
    }
    let limit_ms = max_gap.as_secs_f64() * 1000.0;
    let limit = format!("{:.1} s", max_gap.as_secs_f64());
    let mut c = Check::new(
        CheckId::StreamSilence,
        Stage::Ramp,
        Status::Pass,
        format!(
            "no streamed answer of the ramp or soak goes silent for more than {limit} between two output deltas"
        ),
    );
    c.url = Some(url.to_string());
    let measured: Vec<&GapRow> = rows.iter().filter(|r| r.requests > 0).collect();
    let Some(worst) = measured
        .iter()
        .copied()
        .max_by(|a, b| a.max_ms.total_cmp(&b.max_ms))
    else {
        c.status = Status::Skip;
        c.measurement = "no streamed answer had two output deltas".into();
        return Some(c);
    };
    c.stage = worst.stage;
    let requests: u64 = measured.iter().map(|r| r.requests).sum();
    let p99 = measured.iter().map(|r| r.p99_ms).fold(0.0, f64::max);
    let tool_max = measured
        .iter()
        .filter_map(|r| r.tool_call_max_ms)
        .reduce(f64::max);
    let parser_rows: Vec<&&GapRow> = measured
        .iter()
        .filter(|r| r.tool_call_max_ms.is_some_and(|t| t > limit_ms))
        .collect();
    c.measurement = format!(
        "longest gap between deltas over {requests} streamed requests: p99 {p99:.0} ms, max {:.0} ms ({} '{}'){}; limit {limit}",
        worst.max_ms,
        stage_name(worst.stage),
        worst.label,
        tool_max
            .map(|t| format!(", inside tool calls max {t:.0} ms"))
            .unwrap_or_default()
    );
    c.evidence = measured
        .iter()
        .map(|r| {
            format!(
                "{} '{}': {} requests, p99 {:.0} ms, max {:.0} ms{}{}",
                stage_name(r.stage),
                r.label,
                r.requests,
                r.p99_ms,
                r.max_ms,
                r.tool_call_max_ms
                    .map(|t| format!(", inside a tool call max {t:.0} ms"))
                    .unwrap_or_default(),
                r.first_tool_call_p99_ms
                    .map(|t| format!(", first tool-call delta p99 {t:.0} ms"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    c.data = json!({
        "max_stream_gap_ms": limit_ms,
        "rows": measured,
    });
    if worst.max_ms <= limit_ms {
        return Some(c);
    }
    c.status = Status::Fail;
    if let Some(row) = parser_rows.first() {
        c.stage = row.stage;
        c.owner = Some(Owner::Parser);
        // Agents break on it whatever the load: the interface is not fit for release.
        c.impact = Impact::Interface;
        c.next_step = "the tool parser holds tool-call deltas back (a gap inside a tool call): upgrade the engine to a release whose parser streams arguments (vLLM #50604, fixed by #50627), or pick a tool parser that streams; agent clients time out on the silence".into();
    } else {
        c.owner = Some(Owner::Server);
        c.impact = Impact::Info;
        c.next_step = "the server went silent between content tokens: look for preemptions and long prefills that block decoding (chunked prefill, --max-num-batched-tokens) in the step's metrics and log; until fixed, agent clients need an idle timeout above the gap".into();
    }
    Some(c)
}

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::Soak => "soak",
        Stage::Agent => "agent",
        _ => "ramp",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str, max_ms: f64, tool: Option<f64>) -> GapRow {
        GapRow {
            stage: Stage::Ramp,
            label: label.into(),
            requests: 4,
            p99_ms: max_ms,
            max_ms,
            tool_call_max_ms: tool,
            first_tool_call_p99_ms: tool.map(|_| 50.0),
        }
    }

    #[test]
    fn owner_is_parser_only_for_a_gap_inside_a_tool_call() {
        let limit = Duration::from_secs(1);
        let ok = check(&[row("1 x short", 80.0, None)], limit, "u").unwrap();
        assert_eq!(ok.status, Status::Pass);
        let server = check(
            &[row("1 x short", 80.0, None), row("2 x long", 2100.0, None)],
            limit,
            "u",
        )
        .unwrap();
        assert_eq!(server.status, Status::Fail);
        assert_eq!(server.owner, Some(Owner::Server));
        assert!(
            server.measurement.contains("max 2100 ms (ramp '2 x long')"),
            "{}",
            server.measurement
        );
        let parser = check(&[row("1 x short", 2100.0, Some(2100.0))], limit, "u").unwrap();
        assert_eq!(parser.owner, Some(Owner::Parser));
        assert_eq!(parser.impact, Impact::Interface);
        // A short gap inside a tool call beside a long content gap: the server's.
        let mixed = check(&[row("s", 2100.0, Some(300.0))], limit, "u").unwrap();
        assert_eq!(mixed.owner, Some(Owner::Server));
        assert!(check(&[], limit, "u").is_none());
    }
}
