//! Secret redaction: values of secret-looking names and of secret-bearing
//! command-line flags never reach a bundle, a report or the terminal.

/// Replacement text for a secret value.
pub const REDACTED: &str = "<redacted>";

const SECRET_NAME_PARTS: &[&str] = &[
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
];
const SECRET_FLAGS: &[&str] = &["--api-key", "--hf-token", "--token", "--password"];

/// True when an environment variable name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// Redacts a `NAME=value` line when NAME looks secret.
pub fn redact_env_line(line: &str) -> String {
    match line.split_once('=') {
        Some((name, _)) if is_secret_name(name) => format!("{name}={REDACTED}"),
        _ => line.to_string(),
    }
}

/// Redacts secret flag values in an argument vector (`--api-key X` and `--api-key=X`).
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut redact_next = false;
    for arg in args {
        if redact_next {
            out.push(REDACTED.to_string());
            redact_next = false;
            continue;
        }
        if let Some((flag, _)) = arg.split_once('=') {
            if SECRET_FLAGS.contains(&flag) {
                out.push(format!("{flag}={REDACTED}"));
                continue;
            }
        }
        if SECRET_FLAGS.contains(&arg.as_str()) {
            redact_next = true;
        }
        out.push(arg.clone());
    }
    out
}

/// Redacts a whole shell command line (split with shell rules, re-joined).
pub fn redact_command_line(line: &str) -> String {
    match shlex::split(line) {
        Some(args) => {
            let red = redact_args(&args);
            if red == args {
                line.to_string()
            } else {
                shlex::try_join(red.iter().map(String::as_str)).unwrap_or_else(|_| red.join(" "))
            }
        }
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_secrets_are_redacted() {
        assert_eq!(redact_env_line("HF_TOKEN=hf_abc"), "HF_TOKEN=<redacted>");
        assert_eq!(
            redact_env_line("AWS_SECRET_ACCESS_KEY=x"),
            "AWS_SECRET_ACCESS_KEY=<redacted>"
        );
        assert_eq!(redact_env_line("NCCL_DEBUG=INFO"), "NCCL_DEBUG=INFO");
    }

    #[test]
    fn flag_secrets_are_redacted() {
        let args: Vec<String> = ["vllm", "serve", "m", "--api-key", "sk-1", "--hf-token=hf_2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let red = redact_args(&args);
        assert_eq!(red[4], REDACTED);
        assert_eq!(red[5], "--hf-token=<redacted>");
        assert!(!redact_command_line("vllm serve m --api-key sk-secret").contains("sk-secret"));
    }
}
