//! Secret redaction: values of secret-looking names and of secret-bearing
//! command-line flags never reach a bundle, a report or the terminal.

use std::sync::LazyLock;

use regex::Regex;

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

/// True when a config key (`api-key`, `hf_token`) looks like it holds a secret; a
/// count of tokens (`max-num-batched-tokens`) does not.
pub fn is_secret_key(name: &str) -> bool {
    is_secret_name(name)
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

static QUOTED_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z_][A-Za-z0-9_-]*)(['"]?\s*[=:]\s*)(['"])([^'"]+)(['"])"#).unwrap()
});
/// `'api_key': ['sk-1', 'sk-2']`, `api_key=[...]`, `"api_key": [...]` (one line).
static LIST_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"([A-Za-z_][A-Za-z0-9_-]*)(['"]?\s*[=:]\s*)\[([^\]]*)\]"#).unwrap()
});
static BARE_ASSIGN_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"([A-Za-z_][A-Za-z0-9_-]*)=([^\s"',;}\]]+)"#).unwrap());
static YAML_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    // Dashed keys too: `vllm serve --config` files spell flags as `api-key:`.
    Regex::new(r"^(\s*-?\s*)([A-Za-z_][A-Za-z0-9_-]*):[ \t]+([^\s'\x22].*)$").unwrap()
});
/// A key with no value on its line: a block list or block scalar may follow.
static YAML_OPEN_KEY_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^(\s*)(?:-\s+)?['"]?([A-Za-z_][A-Za-z0-9_-]*)['"]?:\s*(?:[|>][-+]?\s*)?$"#)
        .unwrap()
});
static YAML_NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^\s*-?\s*name:\s*['"]?([A-Za-z_][A-Za-z0-9_]*)"#).unwrap());
static YAML_VALUE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\s*value:\s*)(\S.*)$").unwrap());
static FLAG_SECRET_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(--?[A-Za-z][A-Za-z0-9_-]*)(=|\s+)('[^']*'|"[^"]*"|[^\s"'-][^\s"']*)"#).unwrap()
});
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
            Some((user, pass)) if pass == "***" => format!("{}{user}:***@", &c[1]),
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

/// Every string under `v` replaced (the value of a secret key, whatever its shape).
fn redact_all_strings(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if !s.is_empty() => *s = REDACTED.into(),
        Value::Number(_) => *v = Value::String(REDACTED.into()),
        Value::Array(a) => a.iter_mut().for_each(redact_all_strings),
        Value::Object(o) => o.values_mut().for_each(redact_all_strings),
        _ => {}
    }
}

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
                if is_secret_name(k) && !val.is_null() && !val.is_boolean() {
                    redact_all_strings(val);
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
/// secret-looking NAME in any spelling, quoted `'api_key': '...'` and list values
/// `'api_key': ['...']` (vLLM's args dump), YAML block lists and block scalars under a
/// secret key, secret flags, `Authorization` headers, Bearer tokens, URL passwords,
/// token-shaped words, and `name: X` / `value: ...` pairs of a pod spec. JSON is walked
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
    let mut lines = LineState::default();
    for line in text.split_inclusive('\n') {
        let (body, eol) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        out.push_str(&lines.redact_line(body));
        out.push_str(eol);
    }
    out
}

/// What earlier lines say about the next ones: a pod-spec `name: HF_TOKEN` (its `value:`
/// follows), or a secret YAML key whose list or block scalar follows (its indent).
#[derive(Default)]
struct LineState {
    secret_name_pending: bool,
    secret_block_indent: Option<usize>,
}

impl LineState {
    fn redact_line(&mut self, line: &str) -> String {
        if let Some(l) = self.in_secret_block(line) {
            return l;
        }
        let mut l = line.to_string();
        if self.secret_name_pending {
            if let Some(c) = YAML_VALUE_RE.captures(&l) {
                l = format!("{}{REDACTED}", &c[1]);
            }
            self.secret_name_pending = false;
        }
        if let Some(c) = YAML_NAME_RE.captures(&l) {
            self.secret_name_pending = is_secret_name(&c[1]);
        }
        if let Some(c) = YAML_OPEN_KEY_RE.captures(&l) {
            if is_secret_name(&c[2]) {
                self.secret_block_indent = Some(c[1].len());
            }
        }
        redact_named_values(&l)
    }

    /// A line inside a secret key's block list or block scalar, redacted; `None` when
    /// the line ends the block (or no block is open).
    fn in_secret_block(&mut self, line: &str) -> Option<String> {
        let indent = self.secret_block_indent?;
        let body = line.trim_start();
        let own = line.len() - body.len();
        if body.is_empty() {
            return Some(line.to_string());
        }
        let list_item = body.starts_with('-') && own >= indent;
        if own > indent || list_item {
            let lead = &line[..own];
            return Some(if let Some(rest) = body.strip_prefix('-') {
                let gap = &rest[..rest.len() - rest.trim_start().len()];
                format!("{lead}-{gap}{REDACTED}")
            } else {
                format!("{lead}{REDACTED}")
            });
        }
        self.secret_block_indent = None;
        None
    }
}

/// One line of a log as it may be printed: its `NAME=value` forms, secret flags, list
/// values and free-text secrets redacted (no JSON reformatting, no multi-line state).
pub fn redact_line(line: &str) -> String {
    redact_named_values(line)
}

/// One line's `NAME = value` forms, secret flags and free-text secrets.
fn redact_named_values(line: &str) -> String {
    let keep = |c: &regex::Captures, value: &str| {
        !is_secret_name(&c[1]) || value == REDACTED || value == "None" || value.is_empty()
    };
    let mut l = LIST_SECRET_RE
        .replace_all(line, |c: &regex::Captures| {
            if keep(c, c[3].trim()) {
                c[0].to_string()
            } else {
                format!("{}{}[{REDACTED}]", &c[1], &c[2])
            }
        })
        .into_owned();
    l = QUOTED_SECRET_RE
        .replace_all(&l, |c: &regex::Captures| {
            if keep(c, &c[4]) {
                c[0].to_string()
            } else {
                format!("{}{}{}{REDACTED}{}", &c[1], &c[2], &c[3], &c[5])
            }
        })
        .into_owned();
    l = BARE_ASSIGN_RE
        .replace_all(&l, |c: &regex::Captures| {
            if keep(c, &c[2]) {
                c[0].to_string()
            } else {
                format!("{}={REDACTED}", &c[1])
            }
        })
        .into_owned();
    if let Some(c) = YAML_SECRET_RE.captures(&l) {
        if is_secret_key(&c[2]) && !c[3].starts_with(REDACTED) && !c[3].trim().is_empty() {
            l = format!("{}{}: {REDACTED}", &c[1], &c[2]);
        }
    }
    l = FLAG_SECRET_RE
        .replace_all(&l, |c: &regex::Captures| {
            let value = c[3].trim_matches(|q| q == '\'' || q == '"');
            if !is_secret_flag(&c[1]) || value == REDACTED || value.is_empty() {
                c[0].to_string()
            } else {
                format!("{}{}{REDACTED}", &c[1], &c[2])
            }
        })
        .into_owned();
    redact_value(&l)
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

    /// Every spelling and shape of a secret, one row each: (input, secret, kept text).
    const TEXT_TABLE: &[(&str, &str, &str)] = &[
        ("--api_key sk-u1234567", "sk-u1234567", "--api_key"),
        ("--api-key=k-eq-1", "k-eq-1", "--api-key="),
        ("--API-KEY k-up-1", "k-up-1", "--API-KEY"),
        ("--hf-token 'hf q 1'", "hf q 1", "--hf-token"),
        (
            "API_KEY=k-env-1 NCCL_DEBUG=INFO",
            "k-env-1",
            "NCCL_DEBUG=INFO",
        ),
        ("apiKey: k-camel-1", "k-camel-1", "apiKey:"),
        ("hf_token: k-yaml-1", "k-yaml-1", "hf_token:"),
        ("HF_TOKEN=k-env-2", "k-env-2", "HF_TOKEN="),
        ("DB_PASSWORD=k-pw-1", "k-pw-1", "DB_PASSWORD"),
        ("MY_SECRET=k-sec-1", "k-sec-1", "MY_SECRET"),
        ("GH_TOKEN=k-tok-1", "k-tok-1", "GH_TOKEN"),
        ("X-Api-Key: k-hdr-1", "k-hdr-1", "X-Api-Key"),
        (
            "'api_key': ['k-list-1', 'k-list-2']",
            "k-list-",
            "'api_key'",
        ),
        ("api_key=['k-list-3']", "k-list-3", "api_key="),
        ("\"api_key\": [\"k-list-4\"]", "k-list-4", "api_key"),
        ("api-key: [k-flow-1, k-flow-2]", "k-flow-", "api-key:"),
        (
            "api-key:\n  - k-block-1\n  - k-block-2\nport: 8000",
            "k-block-",
            "port: 8000",
        ),
        ("api_key:\n- k-block-3\nmodel: m", "k-block-3", "model: m"),
        ("secret: |\n  k-scalar-1\nport: 1", "k-scalar-1", "port: 1"),
        (
            "HTTPS_PROXY=http://u:pw-proxy-1@proxy:3128",
            "pw-proxy-1",
            "proxy:3128",
        ),
        (
            "--otlp-traces-endpoint https://u:pw-otlp-1@otel:4317",
            "pw-otlp-1",
            "otel:4317",
        ),
        ("see https://tok-user-1@host/x", "tok-user-1", "host/x"),
        (
            "Authorization: Bearer k-bearer-1",
            "k-bearer-1",
            "Authorization",
        ),
        (
            "Authorization: Basic dXNlcjpwYXNz",
            "dXNlcjpwYXNz",
            "Authorization",
        ),
        (
            "curl -H \"Authorization: Basic dXNlcjpwYXNz\" x",
            "dXNlcjpwYXNz",
            "Basic",
        ),
        (
            "proxy-authorization: basic k-basic-2",
            "k-basic-2",
            "proxy-authorization",
        ),
        (
            "\"authorization\": \"Bearer k-json-1\"",
            "k-json-1",
            "authorization",
        ),
        (
            "loaded key sk-proj-abcdef123456 ok",
            "sk-proj-abcdef123456",
            "loaded key",
        ),
        (
            "token hf_AbCdEfGhIjKlMnOpQrStUv here",
            "hf_AbCdEfGhIjKlMnOpQrStUv",
            "here",
        ),
    ];

    #[test]
    fn every_spelling_and_shape_is_redacted() {
        for (input, secret, kept) in TEXT_TABLE {
            let r = redact_text(input);
            assert!(!r.contains(secret), "{input:?} leaked {secret:?}: {r:?}");
            assert!(r.contains(kept), "{input:?} lost {kept:?}: {r:?}");
        }
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

    #[test]
    fn json_list_values_under_secret_keys() {
        let t = r#"{"api_key": ["k-j1", "k-j2"], "hf_token": 12345, "creds": {"password": "k-j3"}, "proxy": "http://u:pw-j4@p", "enable_auth": true, "port": 8000}"#;
        let r = redact_text(t);
        for s in ["k-j1", "k-j2", "12345", "k-j3", "pw-j4"] {
            assert!(!r.contains(s), "{s}: {r}");
        }
        assert!(r.contains("8000") && r.contains("true"), "{r}");
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
