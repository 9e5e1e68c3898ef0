//! Secrets in texts: `NAME=value` and `NAME: value` forms, quoted and list values,
//! YAML block lists under a secret key, secret flags, pod-spec env pairs and JSON walked
//! structurally; free-text secrets through [`super::redact_value`].

use std::sync::LazyLock;

use regex::Regex;

use super::{is_secret_flag, is_secret_name, redact_args, redact_env_line};
use super::{redact_value, REDACTED};

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
        if is_secret_name(&c[2]) && !c[3].starts_with(REDACTED) && !c[3].trim().is_empty() {
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
