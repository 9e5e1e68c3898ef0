//! Argument types shared by several subcommands.

use std::time::Duration;

/// `--format` of the commands that print a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people.
    #[default]
    Text,
    /// For machines.
    Json,
}

/// `--api`: which OpenAI endpoint requests go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ApiArg {
    /// `/v1/chat/completions`
    #[default]
    Chat,
    /// `/v1/completions`
    Completions,
}

impl From<ApiArg> for golive::client::Api {
    fn from(a: ApiArg) -> Self {
        match a {
            ApiArg::Chat => golive::client::Api::Chat,
            ApiArg::Completions => golive::client::Api::Completions,
        }
    }
}

/// Connection settings shared by the commands that talk to a server.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Connection")]
pub struct TargetArgs {
    /// API key sent as `Authorization: Bearer ...` (never printed or stored).
    #[arg(long, env = "GOLIVE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Model name; default: the first model of `/v1/models`.
    #[arg(long, env = "GOLIVE_MODEL")]
    pub model: Option<String>,
    /// Timeout for one request, end to end.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    pub request_timeout: Duration,
    /// Timeout to connect.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub connect_timeout: Duration,
    /// Close a pooled keep-alive connection after it was idle this long. Below the common
    /// server-side idle timeouts (uvicorn and llama.cpp's httplib: 5 s), so golive never
    /// reuses a connection the server is about to close.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub pool_idle_timeout: Duration,
}

impl From<TargetArgs> for golive::target::TargetOptions {
    fn from(a: TargetArgs) -> Self {
        golive::target::TargetOptions {
            api_key: a.api_key,
            model: a.model,
            request_timeout: a.request_timeout,
            connect_timeout: a.connect_timeout,
            pool_idle_timeout: a.pool_idle_timeout,
        }
    }
}

/// Largest prompt or output size a flag accepts, in tokens or words: prompts are built
/// in memory, so 4e9 must be a clear error, not a 32 GB allocation.
pub const MAX_TOKENS_FLAG: u32 = 2_097_152;

/// Longest time a duration flag accepts (a year): later deadlines overflow clocks.
const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);

/// A parser of f64 flags that accepts `lo..=hi` only (NaN and infinities never), with an
/// error that names the range.
pub fn f64_in(lo: f64, hi: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync {
    move |s: &str| match s.trim().parse::<f64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number between {lo} and {hi}")),
    }
}

/// An objective of `--goodput`, named as `vllm bench serve` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoodputKey {
    Ttft,
    Tpot,
    E2el,
}

/// `ttft:500`: a key and milliseconds (0.001 ms to a day).
pub fn goodput_item(s: &str) -> Result<(GoodputKey, f64), String> {
    let (key, ms) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not KEY:MS (ttft:500, tpot:50, e2el:2000)"))?;
    let key = match key.trim().to_ascii_lowercase().as_str() {
        "ttft" => GoodputKey::Ttft,
        "tpot" => GoodputKey::Tpot,
        "e2el" => GoodputKey::E2el,
        other => return Err(format!("{other:?} is not an objective: ttft, tpot or e2el")),
    };
    Ok((key, f64_in(0.001, 86_400_000.0)(ms)?))
}

/// The objectives of `--goodput` (the last value of a key given twice); `None` without any.
pub fn slo(items: &[(GoodputKey, f64)]) -> Option<golive::client::Slo> {
    let of = |k: GoodputKey| {
        items
            .iter()
            .rev()
            .find(|(key, _)| *key == k)
            .map(|(_, v)| *v)
    };
    golive::client::Slo::new(
        of(GoodputKey::Ttft),
        of(GoodputKey::Tpot),
        of(GoodputKey::E2el),
    )
}

/// Seconds as an f64 flag: 0.001 to 86400 (a day).
pub fn seconds(s: &str) -> Result<f64, String> {
    f64_in(0.001, 86_400.0)(s).map_err(|e| format!("{e} (seconds)"))
}

/// A duration like `10s` or `5m`, at most a year.
pub fn duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    if d > MAX_DURATION {
        return Err(format!(
            "{s:?} is longer than the 366 days a duration may be"
        ));
    }
    Ok(d)
}

/// A parser of `--max-input`: a size (`64MiB`, `1GB`, `500000`) within
/// [`golive::input::MAX_INPUT_RANGE`], with an error that names the range.
pub fn input_size(s: &str) -> Result<u64, String> {
    let range = golive::input::MAX_INPUT_RANGE;
    let size: bytesize::ByteSize = s.trim().parse().map_err(|e: String| e)?;
    let bytes = size.as_u64();
    if range.contains(&bytes) {
        Ok(bytes)
    } else {
        Err(format!(
            "{s} is outside {} to {}",
            bytesize::ByteSize(*range.start()).display().iec(),
            bytesize::ByteSize(*range.end()).display().iec()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_ranges_refuse_nan_infinity_and_out_of_range() {
        for bad in ["NaN", "inf", "-1", "1e308", "0", "86400.5", "x", ""] {
            let e = seconds(bad).unwrap_err();
            assert!(e.contains("between 0.001 and 86400"), "{bad}: {e}");
        }
        assert_eq!(seconds("0.5"), Ok(0.5));
        assert_eq!(f64_in(0.0, 1.0)("1"), Ok(1.0));
    }

    #[test]
    fn durations_are_capped_at_a_year() {
        assert!(duration("367days").unwrap_err().contains("366 days"));
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert!(duration("ten").is_err());
    }
}
