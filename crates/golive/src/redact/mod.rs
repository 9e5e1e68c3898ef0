//! Secret redaction, the one used on every way out (bundles, reports, regression cases,
//! diff, triage's printed lines, the terminal): values of secret names in any spelling
//! and of secret flags (list values too), URL passwords, `Authorization` headers and
//! token-shaped words. [`redact_text`] reads whole texts (YAML, JSON, logs); the free-text
//! part alone is [`redact_value`].

use std::sync::LazyLock;

use regex::Regex;

mod text;
pub use text::{redact_line, redact_text};

/// Replacement text for a secret value.
pub const REDACTED: &str = "<redacted>";

/// Words that make a name secret wherever they stand (`SECRET_KEY_BASE`, `db_password`).
const STRONG_WORDS: &[&str] = &[
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "AUTHORIZATION",
];
/// Endings that make a name secret when they end its last word (`HF_TOKEN`, `apiKey`,
/// `x-api-key`), but not inside it (`token_ids`, `SSH_AUTH_SOCK`, `tokenizer`).
const LAST_WORD_ENDINGS: &[&str] = &["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "AUTH"];

/// The words of a name, upper-cased: split at `_`, `-`, `.`, and lower-to-upper case
/// changes (`apiKey` → `API`, `KEY`).
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            words.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_uppercase());
    }
    words.push(cur);
    words.retain(|w| !w.is_empty());
    words
}

/// True when a name (environment variable, config key, flag without its dashes, header)
/// looks like it holds a secret, in any spelling: `HF_TOKEN`, `hf-token`, `apiKey`,
/// `API_KEY`, `X-Api-Key`, `DB_PASSWORD`, `AWS_SECRET_ACCESS_KEY`. A count of tokens
/// (`max-num-batched-tokens`), `tokenizer` and `token_ids` are not secret.
pub fn is_secret_name(name: &str) -> bool {
    let words = name_words(name);
    let strong = words.iter().any(|w| STRONG_WORDS.contains(&w.as_str()));
    let last = words
        .last()
        .is_some_and(|w| LAST_WORD_ENDINGS.iter().any(|e| w.ends_with(e)));
    strong || last
}

/// True for a command-line flag whose value is a secret: `--api-key`, `--api_key`,
/// `--hf-token`, `--password`, `--API-KEY`.
pub fn is_secret_flag(flag: &str) -> bool {
    flag.strip_prefix("--")
        .or_else(|| flag.strip_prefix('-'))
        .is_some_and(|name| !name.is_empty() && is_secret_name(name))
}

/// `value` of `name`: all of it when the name is secret, else its passwords in URLs and
/// token-shaped words ([`redact_value`]).
pub fn redact_pair(name: &str, value: &str) -> String {
    if is_secret_name(name) && !value.is_empty() {
        REDACTED.to_string()
    } else {
        redact_value(value)
    }
}

/// Redacts a `NAME=value` line: the whole value when NAME looks secret, else the
/// passwords of URLs in it (`HTTPS_PROXY=http://u:p@proxy`) and token-shaped words.
pub fn redact_env_line(line: &str) -> String {
    match line.split_once('=') {
        Some((name, value)) => format!("{name}={}", redact_pair(name, value)),
        None => redact_value(line),
    }
}

/// Redacts secret flag values in an argument vector: `--api-key X`, `--api_key=X`,
/// list values (`--api-key K1 K2`: every value up to the next flag), and passwords in
/// URLs and token-shaped words of every other argument.
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut in_secret_flag = false;
    for arg in args {
        if in_secret_flag && !arg.starts_with('-') {
            out.push(REDACTED.to_string());
            continue;
        }
        in_secret_flag = false;
        if let Some((flag, value)) = arg.split_once('=') {
            if flag.starts_with('-') && is_secret_flag(flag) {
                out.push(format!("{flag}={REDACTED}"));
                in_secret_flag = true;
                continue;
            }
            if !flag.starts_with('-') && is_secret_name(flag) && !value.is_empty() {
                // `env HF_TOKEN=x vllm serve ...`
                out.push(format!("{flag}={REDACTED}"));
                continue;
            }
        }
        in_secret_flag = is_secret_flag(arg);
        out.push(redact_value(arg));
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

/// `Authorization: Bearer X`, `Proxy-Authorization: Basic X`, `"authorization": "..."`.
static AUTH_HEADER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(authorization['"]?\s*[:=]\s*['"]?)((?:bearer|basic|token|digest)\s+)?[^\s'",;}]+"#,
    )
    .unwrap()
});
static BEARER_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+").unwrap());
/// `scheme://userinfo@`: everything up to the last `@` before the path.
static URL_USERINFO_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z][A-Za-z0-9+.-]*://)([^/\s'"<>@]*(?:@[^/\s'"<>@]*)*)@"#).unwrap()
});
/// Token shapes that are secret whatever their name: OpenAI-style `sk-...`, Hugging Face
/// `hf_...`, GitHub `ghp_...`/`github_pat_...`, AWS access key ids, Slack `xox?-`, JWTs.
static TOKEN_SHAPE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"\b(?:sk-[A-Za-z0-9_-]{8,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{16,}",
        r"|github_pat_[A-Za-z0-9_]{16,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{8,}",
        r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
    ))
    .unwrap()
});

/// The password of a URL's userinfo, or the whole userinfo when it has no password (a
/// token as user name): `https://u:p@h` → `https://u:***@h`, `https://tok@h` → `https://***@h`.
pub fn redact_url_userinfo(text: &str) -> String {
    URL_USERINFO_RE
        .replace_all(text, |c: &regex::Captures| match c[2].split_once(':') {
            _ if c[2].is_empty() => c[0].to_string(),
            Some((user, _)) => format!("{}{user}:***@", &c[1]),
            None if &c[2] == "***" => c[0].to_string(),
            None => format!("{}***@", &c[1]),
        })
        .into_owned()
}

/// A URL as it may be shown: without its userinfo (`http://u:p@h:8000/v1` →
/// `http://h:8000/v1`); text that is no URL keeps only its passwords out.
pub fn display_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            let shown = u.to_string();
            // `Url` adds a `/` to a bare host; keep the spelling the user gave.
            if url.ends_with('/') {
                shown
            } else {
                shown.trim_end_matches('/').to_string()
            }
        }
        Ok(_) => url.to_string(),
        Err(_) => redact_value(url),
    }
}

/// Free-text secrets with no name beside them: URL passwords, `Authorization` headers,
/// Bearer tokens and token-shaped words.
pub fn redact_value(text: &str) -> String {
    let mut t = redact_url_userinfo(text);
    if t.contains(':') || t.contains('=') {
        t = AUTH_HEADER_RE
            .replace_all(&t, |c: &regex::Captures| {
                let scheme = c.get(2).map_or("", |m| m.as_str());
                format!("{}{scheme}{REDACTED}", &c[1])
            })
            .into_owned();
    }
    t = BEARER_RE
        .replace_all(&t, format!("${{1}}{REDACTED}"))
        .into_owned();
    TOKEN_SHAPE_RE.replace_all(&t, REDACTED).into_owned()
}

/// Every string value under `v` passed through [`redact_value`] (names and structure
/// kept): the last look at a report before it leaves the process.
pub fn redact_strings(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            let r = redact_value(s);
            if r != *s {
                *s = r;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_strings),
        Value::Object(o) => o.values_mut().for_each(redact_strings),
        _ => {}
    }
}

/// `value` with the free-text secrets of its strings redacted ([`redact_strings`]), or
/// the error when it does not survive the round trip through JSON.
pub fn redact_serde<T>(value: &T) -> anyhow::Result<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut v = serde_json::to_value(value)?;
    redact_strings(&mut v);
    Ok(serde_json::from_value(v)?)
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
    fn names_in_every_spelling() {
        for secret in [
            "api_key",
            "api-key",
            "API_KEY",
            "apiKey",
            "ApiKey",
            "apikey",
            "hf_token",
            "HF_TOKEN",
            "hfToken",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "SECRET_KEY_BASE",
            "OPENAI_API_KEY",
            "X-Api-Key",
            "Authorization",
            "GITHUB_TOKEN",
            "DB_PASS",
            "CREDENTIALS",
        ] {
            assert!(is_secret_name(secret), "{secret} not secret");
        }
        for plain in [
            "max-num-batched-tokens",
            "tokenizer",
            "tokenizer_mode",
            "token_ids",
            "SSH_AUTH_SOCK",
            "NCCL_DEBUG",
            "HTTPS_PROXY",
            "model",
            "max_tokens",
            "ssl_keyfile",
        ] {
            assert!(!is_secret_name(plain), "{plain} is secret");
        }
        for flag in [
            "--api-key",
            "--api_key",
            "--API-KEY",
            "--hf-token",
            "--token",
        ] {
            assert!(is_secret_flag(flag), "{flag}");
        }
        assert!(!is_secret_flag("--tokenizer") && !is_secret_flag("--"));
    }

    #[test]
    fn argument_lists_and_urls() {
        let args: Vec<String> = [
            "vllm",
            "serve",
            "m",
            "--api-key",
            "k-a1",
            "k-a2",
            "--port",
            "8000",
            "--otlp-traces-endpoint",
            "https://u:pw-a3@otel:4317",
            "--api_key=k-a4",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let red = redact_args(&args).join(" ");
        for s in ["k-a1", "k-a2", "pw-a3", "k-a4"] {
            assert!(!red.contains(s), "{s}: {red}");
        }
        assert!(
            red.contains("--port 8000") && red.contains("https://u:***@otel:4317"),
            "{red}"
        );
        assert_eq!(
            redact_env_line("HTTP_PROXY=http://u:pw@p:3128"),
            "HTTP_PROXY=http://u:***@p:3128"
        );
        assert_eq!(display_url("http://u:pw@h:8000/v1"), "http://h:8000/v1");
        assert_eq!(display_url("http://tok@h:8000/"), "http://h:8000/");
        assert_eq!(display_url("http://h:8000"), "http://h:8000");
        // Idempotent: redacting twice changes nothing more.
        let once = redact_text("a https://u:p@h b --api-key k-1\n");
        assert_eq!(redact_text(&once), once);
    }
}
