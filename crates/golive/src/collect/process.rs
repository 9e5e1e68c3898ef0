//! The serving process on this host: finding it in /proc, its command line and
//! environment, and the host name.

use std::collections::BTreeMap;

use crate::envparse::is_relevant_env;
use crate::redact::redact_env_line;

/// Finds the serving process: the first (lowest PID) `vllm serve` or
/// `python -m vllm.entrypoints...` process in /proc.
pub fn find_vllm_process() -> Option<u32> {
    let own = std::process::id();
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|p| *p != own)
        .collect();
    pids.sort_unstable();
    pids.into_iter()
        .find(|pid| read_cmdline(*pid).is_some_and(|argv| is_vllm_server_argv(&argv)))
}

/// True for the argument vector of a vLLM server process.
pub fn is_vllm_server_argv(argv: &[String]) -> bool {
    argv.windows(2).any(|w| {
        let base = w[0].rsplit('/').next().unwrap_or(&w[0]);
        (base == "vllm" && w[1] == "serve")
            || (w[0] == "-m" && w[1].starts_with("vllm.entrypoints"))
    })
}

pub(super) fn read_cmdline(pid: u32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv: Vec<String> = bytes
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    (!argv.is_empty()).then_some(argv)
}

pub(super) fn read_environ(pid: u32) -> Option<BTreeMap<String, String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter_map(|s| {
                let s = String::from_utf8_lossy(s);
                s.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

pub(super) fn env_text(env: &BTreeMap<String, String>) -> String {
    env.iter()
        .filter(|(k, _)| is_relevant_env(k))
        .map(|(k, v)| redact_env_line(&format!("{k}={v}")) + "\n")
        .collect()
}

pub(super) fn hostname() -> String {
    let h = gethostname::gethostname().to_string_lossy().into_owned();
    let clean: String = h
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "host".into()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_vllm_argv() {
        let v = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert!(is_vllm_server_argv(&v(
            "/usr/bin/python3 /usr/local/bin/vllm serve m"
        )));
        assert!(is_vllm_server_argv(&v(
            "python3 -m vllm.entrypoints.openai.api_server --model m"
        )));
        assert!(!is_vllm_server_argv(&v("grep vllm")));
    }
}
