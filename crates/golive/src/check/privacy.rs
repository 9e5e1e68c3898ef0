//! The runbook's privacy paragraph: does the running server log prompts or outputs,
//! and is an API key required? Read from the launch command, with each logging flag's
//! meaning in the bundle's vLLM version.
//!
//! vLLM's request logging, by version:
//! - before 0.10.1 it was on by default (prompts at INFO), off with `--disable-log-requests`;
//! - from 0.10.1 it is off by default, on with `--enable-log-requests` (vLLM PR 21739;
//!   `--disable-log-requests` deprecated then, removed in 0.11);
//! - from 0.11.1 the prompt itself is logged only at DEBUG (`VLLM_LOGGING_LEVEL=DEBUG`);
//!   INFO keeps the request id and sampling parameters (vLLM PR 26713);
//! - `--enable-log-outputs` logs the generated text at INFO, only while request logging
//!   is on.

use super::{item, CheckItem, Ctx, ItemId};
use crate::envparse::{version_parts, Launch};
use crate::report::Status;

/// What a launch logs of the requests' content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggingScope {
    pub prompts: bool,
    pub outputs: bool,
}

/// The first vLLM release whose request logging is off by default.
const QUIET_BY_DEFAULT: [u64; 3] = [0, 10, 1];
/// The first vLLM release that logs the prompt only at DEBUG.
const PROMPT_AT_DEBUG: [u64; 3] = [0, 11, 1];

/// The logging scope of `launch` in vLLM `version` (unknown version: the current
/// behaviour) with the log level `level` (`VLLM_LOGGING_LEVEL`, default INFO).
pub fn logging_scope(launch: &Launch, version: Option<&str>, level: Option<&str>) -> LoggingScope {
    let at_least = |min: [u64; 3]| version.is_none_or(|v| version_parts(v) >= min.to_vec());
    let requests = if launch.has("--enable-log-requests") {
        true
    } else if launch.has("--disable-log-requests") || launch.has("--no-enable-log-requests") {
        false
    } else {
        !at_least(QUIET_BY_DEFAULT)
    };
    let debug = level.is_some_and(|l| l.trim().eq_ignore_ascii_case("debug"));
    LoggingScope {
        prompts: requests && (debug || !at_least(PROMPT_AT_DEBUG)),
        outputs: requests && launch.has("--enable-log-outputs"),
    }
}

fn scope_words(s: LoggingScope) -> &'static str {
    match (s.prompts, s.outputs) {
        (false, false) => "prompts and outputs are not logged",
        (true, false) => "PROMPTS ARE LOGGED",
        (false, true) => "OUTPUTS ARE LOGGED (prompts not)",
        (true, true) => "PROMPTS AND OUTPUTS ARE LOGGED",
    }
}

const LEVEL_VAR: &str = "VLLM_LOGGING_LEVEL";

/// One item over every node: what each logs, and whether `--api-key` is set (its value
/// is never shown). Logged content is a warning: the retention and access of those
/// logs must be stated in the sign-off.
pub(super) fn check_logging_scope(c: &Ctx) -> CheckItem {
    let mut ev = Vec::new();
    let mut st = Vec::new();
    for b in c.bundles {
        let Some(l) = &b.launch else {
            st.push(Status::Unknown);
            ev.push(c.tag(b, "no launch command: the logging flags are not known"));
            continue;
        };
        let version = b.vllm_version().map(|(v, _)| v);
        let level = l.env.get(LEVEL_VAR).or_else(|| b.env_file.get(LEVEL_VAR));
        let scope = logging_scope(l, version.as_deref(), level.map(String::as_str));
        st.push(if scope.prompts || scope.outputs {
            Status::Warn
        } else {
            Status::Pass
        });
        ev.push(c.tag(
            b,
            format!(
                "{} (vLLM {}); API key required by the server: {}",
                scope_words(scope),
                version.as_deref().unwrap_or("version unknown"),
                if l.has("--api-key") {
                    "yes (--api-key)"
                } else {
                    "no --api-key flag (a gateway may still require one)"
                }
            ),
        ));
    }
    let status = if st.contains(&Status::Unknown) || st.is_empty() {
        Status::Unknown
    } else if st.contains(&Status::Warn) {
        Status::Warn
    } else {
        Status::Pass
    };
    item(
        ItemId::LoggingScope,
        "Logging scope of agent data known (prompts/outputs logged, API key)",
        status,
        ev,
        "State where these logs go, how long they are kept and who can read them \
         (signoff --accept-open with the reason), or drop --enable-log-requests",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envparse::launch::parse_launch;

    fn scope(cmd: &str, version: Option<&str>) -> LoggingScope {
        logging_scope(&parse_launch(cmd).unwrap(), version, None)
    }

    const ON: LoggingScope = LoggingScope {
        prompts: true,
        outputs: false,
    };
    const OFF: LoggingScope = LoggingScope {
        prompts: false,
        outputs: false,
    };

    #[test]
    fn each_flag_means_what_its_vllm_version_makes_it_mean() {
        let m = "vllm serve m";
        let on = format!("{m} --enable-log-requests");
        // Before 0.10.1 prompts are logged unless switched off.
        assert_eq!(scope(m, Some("0.9.2")), ON);
        assert_eq!(
            scope(&format!("{m} --disable-log-requests"), Some("0.9.2")),
            OFF
        );
        // From 0.10.1 they are not, unless switched on.
        assert_eq!(scope(m, Some("0.10.1")), OFF);
        assert_eq!(scope(&on, Some("0.11.0")), ON);
        // From 0.11.1 the prompt needs DEBUG as well.
        assert_eq!(scope(&on, Some("0.32.0")), OFF);
        assert_eq!(scope(m, None), OFF);
        let l = parse_launch(&on).unwrap();
        assert_eq!(logging_scope(&l, Some("0.32.0"), Some("DEBUG")), ON);
        // Outputs only with request logging on, at INFO in every version.
        let both = scope(&format!("{on} --enable-log-outputs"), Some("0.32.0"));
        assert!(!both.prompts && both.outputs);
        assert!(!scope(&format!("{m} --enable-log-outputs"), Some("0.32.0")).outputs);
    }
}
