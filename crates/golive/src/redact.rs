//! Secret redaction: values of secret-looking names and of secret-bearing
//! command-line flags never reach a bundle, a report or the terminal.

use std::sync::LazyLock;

use regex::Regex;

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

/// True when a config key (`api-key`, `hf_token`) looks like it holds a secret; a
/// count of tokens (`max-num-batched-tokens`) does not.
pub fn is_secret_key(name: &str) -> bool {
    is_secret_name(name) && !name.to_ascii_uppercase().ends_with("TOKENS")
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

static QUOTED_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z_][A-Za-z0-9_]*)(['"]?\s*[=:]\s*)(['"])([^'"]+)(['"])"#).unwrap()
});
static BARE_ASSIGN_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"([A-Za-z_][A-Za-z0-9_]*)=([^\s"',;}\]]+)"#).unwrap());
static YAML_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    // Dashed keys too: `vllm serve --config` files spell flags as `api-key:`.
    Regex::new(r"^(\s*-?\s*)([A-Za-z_][A-Za-z0-9_-]*):[ \t]+([^\s'\x22].*)$").unwrap()
});
static YAML_NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^\s*-?\s*name:\s*['"]?([A-Za-z_][A-Za-z0-9_]*)"#).unwrap());
static YAML_VALUE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\s*value:\s*)(\S.*)$").unwrap());
static FLAG_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(--api-key|--hf-token|--token|--password)(=|\s+)([^\s"']+)"#).unwrap()
});
static BEARER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+").unwrap());

fn redact_json(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Array(a) => {
            if a.iter().all(|x| x.is_string()) {
                let args: Vec<String> = a
                    .iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect();
                let red = redact_args(&args);
                *a = red
                    .into_iter()
                    .map(|s| Value::String(redact_env_line(&s)))
                    .collect();
            } else {
                a.iter_mut().for_each(redact_json);
            }
        }
        Value::Object(o) => {
            // A Kubernetes env entry: `{"name": "HF_TOKEN", "value": "..."}`.
            let secret_entry = o
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(is_secret_name);
            if secret_entry
                && o.get("value")
                    .and_then(Value::as_str)
                    .is_some_and(|v| !v.is_empty())
            {
                o.insert("value".into(), Value::String(REDACTED.into()));
            }
            for (k, val) in o.iter_mut() {
                if is_secret_name(k) && val.as_str().is_some_and(|s| !s.is_empty()) {
                    *val = Value::String(REDACTED.into());
                } else {
                    redact_json(val);
                }
            }
        }
        Value::String(s) => {
            let r = redact_text(s);
            if r != *s {
                *s = r;
            }
        }
        _ => {}
    }
}

/// Replaces secret values anywhere in a text: `NAME=value` and `NAME: value` with a
/// secret-looking NAME, quoted `'api_key': '...'` (vLLM's args dump), secret flags,
/// Bearer tokens, and `name: X` / `value: ...` pairs of a pod spec. JSON is walked
/// structurally (argument lists keep `--api-key X` pairs together) and only rewritten
/// when a secret was found; otherwise the text stays verbatim.
pub fn redact_text(text: &str) -> String {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(text) {
            let before = v.clone();
            redact_json(&mut v);
            if v == before {
                return text.to_string();
            }
            return serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut secret_name_pending = false;
    for line in text.split_inclusive('\n') {
        let mut l = line.to_string();
        if secret_name_pending {
            if let Some(c) = YAML_VALUE_RE.captures(l.trim_end_matches('\n')) {
                let eol = if l.ends_with('\n') { "\n" } else { "" };
                l = format!("{}{REDACTED}{eol}", &c[1]);
            }
            secret_name_pending = false;
        }
        if let Some(c) = YAML_NAME_RE.captures(&l) {
            secret_name_pending = is_secret_name(&c[1]);
        }
        l = QUOTED_SECRET_RE
            .replace_all(&l, |c: &regex::Captures| {
                if is_secret_name(&c[1]) && &c[4] != REDACTED && &c[4] != "None" {
                    format!("{}{}{}{REDACTED}{}", &c[1], &c[2], &c[3], &c[5])
                } else {
                    c[0].to_string()
                }
            })
            .into_owned();
        l = BARE_ASSIGN_RE
            .replace_all(&l, |c: &regex::Captures| {
                if is_secret_name(&c[1]) && &c[2] != REDACTED {
                    format!("{}={REDACTED}", &c[1])
                } else {
                    c[0].to_string()
                }
            })
            .into_owned();
        if let Some(c) = YAML_SECRET_RE.captures(l.trim_end_matches('\n')) {
            if is_secret_key(&c[2]) && !c[3].starts_with(REDACTED) && !c[3].trim().is_empty() {
                let eol = if l.ends_with('\n') { "\n" } else { "" };
                l = format!("{}{}: {REDACTED}{eol}", &c[1], &c[2]);
            }
        }
        l = FLAG_SECRET_RE
            .replace_all(&l, |c: &regex::Captures| {
                if &c[3] == REDACTED {
                    c[0].to_string()
                } else {
                    format!("{}{}{REDACTED}", &c[1], &c[2])
                }
            })
            .into_owned();
        l = BEARER_RE
            .replace_all(&l, format!("${{1}}{REDACTED}"))
            .into_owned();
        out.push_str(&l);
    }
    out
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

    #[test]
    fn redacts_all_forms() {
        let t = "HF_TOKEN=hf_abc NCCL_DEBUG=INFO\n'api_key': 'sk-1', 'model': 'm'\nvllm serve m --api-key sk-2\nAuthorization: Bearer abc.def\n  - name: HF_TOKEN\n    value: hf_xyz\n";
        let r = redact_text(t);
        for s in ["hf_abc", "sk-1", "sk-2", "abc.def", "hf_xyz"] {
            assert!(!r.contains(s), "{s} leaked: {r}");
        }
        assert!(r.contains("NCCL_DEBUG=INFO"));
        assert!(r.contains("'model': 'm'"));
    }

    #[test]
    fn redacts_config_yaml_and_pod_env() {
        let yaml = "api-key: sk-live-1\nhf_token: hf_2\nmax-num-batched-tokens: 8192\nenable-prefix-caching: true\n";
        let r = redact_text(yaml);
        assert!(!r.contains("sk-live-1") && !r.contains("hf_2"), "{r}");
        assert!(
            r.contains("max-num-batched-tokens: 8192") && r.contains("enable-prefix-caching: true"),
            "{r}"
        );
        let pod = r#"{"env": [{"name": "HF_TOKEN", "value": "hf_3"}, {"name": "NCCL_DEBUG", "value": "WARN"}]}"#;
        let r = redact_text(pod);
        assert!(!r.contains("hf_3") && r.contains("WARN"), "{r}");
    }

    #[test]
    fn redacts_json_args_pairs() {
        let t = r#"[{"Path": "vllm", "Args": ["serve", "m", "--api-key", "sk-3"], "Config": {"Env": ["VLLM_API_KEY=sk-4", "A=b"]}}]"#;
        let r = redact_text(t);
        assert!(!r.contains("sk-3") && !r.contains("sk-4"), "{r}");
        assert!(r.contains("A=b"));
        let clean = "[\n    {\"Path\": \"vllm\"}\n]";
        assert_eq!(redact_text(clean), clean);
    }
}
