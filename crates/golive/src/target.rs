//! The server under test: base URL, credentials, model and timeouts, and the
//! HTTP client built from them. Shared by accept, load, agent, replay and watch.

use std::time::Duration;

use anyhow::Context;

/// An API key that never prints itself.
#[derive(Clone, Default)]
pub struct ApiKey(Option<String>);

impl ApiKey {
    /// The key; `None` or an empty string: no key.
    pub fn new(key: Option<String>) -> Self {
        ApiKey(key.filter(|k| !k.is_empty()))
    }
    /// A key is set (and will be sent as Bearer).
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }
    /// The secret itself, for the Authorization header only.
    pub fn expose(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_set() {
            "ApiKey(<redacted>)"
        } else {
            "ApiKey(none)"
        })
    }
}

/// User name and password from the URL's userinfo (`http://user:pass@host`), sent as
/// HTTP Basic auth; never printed, and the URL shown anywhere has no userinfo.
#[derive(Clone)]
pub struct BasicAuth {
    user: String,
    password: Option<String>,
}

impl BasicAuth {
    /// The userinfo of `url`, percent-decoded; `None` when it has none.
    fn from_url(url: &url::Url) -> anyhow::Result<Option<Self>> {
        if url.username().is_empty() && url.password().is_none() {
            return Ok(None);
        }
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
                .map_err(|_| anyhow::anyhow!("the URL's user name or password is not UTF-8"))
        };
        Ok(Some(BasicAuth {
            user: decode(url.username())?,
            password: url.password().map(decode).transpose()?,
        }))
    }

    /// The `Authorization` header value: `Basic base64(user:password)`.
    fn header_value(&self) -> String {
        use base64::Engine;
        let pair = format!("{}:{}", self.user, self.password.as_deref().unwrap_or(""));
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicAuth(<redacted>)")
    }
}

/// Connection settings shared by the commands that talk to a server.
#[derive(Debug, Clone)]
pub struct TargetOptions {
    /// API key sent as `Authorization: Bearer ...` (never printed or stored).
    pub api_key: Option<String>,
    /// Model name; default: the first model of `/v1/models`.
    pub model: Option<String>,
    /// Timeout for one request, end to end.
    pub request_timeout: Duration,
    /// Timeout to connect.
    pub connect_timeout: Duration,
    /// Close a pooled keep-alive connection after it was idle this long. Below the common
    /// server-side idle timeouts (uvicorn and llama.cpp's httplib: 5 s), so golive never
    /// reuses a connection the server is about to close.
    pub pool_idle_timeout: Duration,
}

/// The `Authorization` header for `value` (`Bearer KEY`, `Basic ...`), marked sensitive
/// so it is never logged; none: no header.
pub fn auth_headers(value: Option<&str>) -> anyhow::Result<reqwest::header::HeaderMap> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(auth) = value {
        let mut value = reqwest::header::HeaderValue::from_str(auth)
            .context("API key contains characters not allowed in a header")?;
        value.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    Ok(headers)
}

/// One OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct Target {
    /// Base URL without a trailing slash, without `/v1` and without userinfo, e.g.
    /// `http://127.0.0.1:8000`: safe to print.
    pub base_url: String,
    /// Sent as `Authorization: Bearer ...` (`--api-key`).
    pub api_key: ApiKey,
    /// The URL's userinfo, sent as Basic auth.
    pub basic_auth: Option<BasicAuth>,
    /// The model to ask for (`--model`); `None`: the first of `/v1/models`.
    pub model: Option<String>,
    /// Deadline for one request, end to end (`--request-timeout`).
    pub request_timeout: Duration,
    /// Deadline to connect (`--connect-timeout`).
    pub connect_timeout: Duration,
    /// How long an idle pooled connection is kept (see [`TargetOptions::pool_idle_timeout`]).
    pub pool_idle_timeout: Duration,
}

impl Target {
    /// The server at `url`. Userinfo in the URL (`http://user:pass@host`) becomes Basic
    /// auth and is dropped from [`Target::base_url`]; with an API key too, this is an
    /// error (one `Authorization` header cannot carry both).
    pub fn new(url: &str, args: &TargetOptions) -> anyhow::Result<Self> {
        let shown = crate::redact::display_url(url);
        let mut parsed = url::Url::parse(url).with_context(|| format!("invalid URL {shown:?}"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https"),
            "URL {shown:?} must start with http:// or https://"
        );
        let basic_auth = BasicAuth::from_url(&parsed)?;
        let api_key = ApiKey::new(args.api_key.clone());
        anyhow::ensure!(
            basic_auth.is_none() || !api_key.is_set(),
            "the URL {shown:?} carries a user name and password (sent as Basic auth) and \
             --api-key is set too (sent as Bearer); one Authorization header cannot carry \
             both: give one of them"
        );
        let url = if basic_auth.is_some() {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        } else {
            url.to_string()
        };
        let mut base = url.trim_end_matches('/').to_string();
        if let Some(stripped) = base.strip_suffix("/v1") {
            base = stripped.to_string();
        }
        Ok(Target {
            base_url: base,
            api_key,
            basic_auth,
            model: args.model.clone(),
            request_timeout: args.request_timeout,
            connect_timeout: args.connect_timeout,
            pool_idle_timeout: args.pool_idle_timeout,
        })
    }

    /// The same server without any credentials (access-control probes).
    pub fn without_credentials(&self) -> Target {
        Target {
            api_key: ApiKey::new(None),
            basic_auth: None,
            ..self.clone()
        }
    }

    /// The same server with `key` as its Bearer key instead of the configured credentials.
    pub fn with_api_key(&self, key: &str) -> Target {
        Target {
            api_key: ApiKey::new(Some(key.to_string())),
            basic_auth: None,
            ..self.clone()
        }
    }

    /// `base_url` joined with an absolute path such as `/v1/models`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// A client with the key as a default header and timeouts on connect and on the whole
    /// request; idle connections are pooled for `pool_idle_timeout`.
    pub fn http_client(&self) -> anyhow::Result<reqwest::Client> {
        self.build_client(1024)
    }

    /// A client that keeps no idle connection, so every request opens a fresh one: for
    /// the one retry after a pooled connection was closed under a request.
    pub fn fresh_connection_client(&self) -> anyhow::Result<reqwest::Client> {
        self.build_client(0)
    }

    fn build_client(&self, max_idle_per_host: usize) -> anyhow::Result<reqwest::Client> {
        let auth = match (self.api_key.expose(), &self.basic_auth) {
            (Some(key), _) => Some(format!("Bearer {key}")),
            (None, Some(basic)) => Some(basic.header_value()),
            (None, None) => None,
        };
        reqwest::Client::builder()
            .default_headers(auth_headers(auth.as_deref())?)
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .pool_max_idle_per_host(max_idle_per_host)
            .pool_idle_timeout(self.pool_idle_timeout)
            .tcp_nodelay(true)
            .build()
            .context("cannot build the HTTP client")
    }

    /// The model to use: `--model`, else the first id of `/v1/models`.
    pub async fn resolve_model(&mut self, client: &reqwest::Client) -> anyhow::Result<String> {
        if let Some(m) = &self.model {
            return Ok(m.clone());
        }
        let resp = client
            .get(self.url("/v1/models"))
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.url("/v1/models")))?;
        let status = resp.status();
        anyhow::ensure!(status.is_success(), "GET /v1/models answered HTTP {status}");
        let body = crate::client::read_limited(resp, crate::client::MAX_BODY)
            .await
            .context("cannot read the answer of /v1/models")?;
        anyhow::ensure!(
            !body.cut,
            "/v1/models: {}",
            crate::client::LimitedBody::too_large(crate::client::MAX_BODY)
        );
        let body: serde_json::Value =
            serde_json::from_slice(&body.bytes).context("/v1/models did not return JSON")?;
        let id = body["data"][0]["id"]
            .as_str()
            .context("/v1/models lists no model; pass --model")?
            .to_string();
        self.model = Some(id.clone());
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_never_in_debug_output() {
        let k = ApiKey::new(Some("sk-very-secret".into()));
        assert!(!format!("{k:?}").contains("sk-very-secret"));
    }

    #[test]
    fn base_url_drops_v1_and_slash() {
        let args = TargetOptions {
            api_key: None,
            model: None,
            request_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            pool_idle_timeout: Duration::from_secs(3),
        };
        let t = Target::new("http://127.0.0.1:8000/v1/", &args).unwrap();
        assert_eq!(t.url("/v1/models"), "http://127.0.0.1:8000/v1/models");
        assert!(Target::new("ftp://x", &args).is_err());
    }

    #[test]
    fn userinfo_becomes_basic_auth_and_leaves_the_url() {
        let mut args = TargetOptions {
            api_key: None,
            model: None,
            request_timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            pool_idle_timeout: Duration::from_secs(3),
        };
        let t = Target::new("http://al%40ice:pw%2Fsecret@127.0.0.1:8000/v1", &args).unwrap();
        assert_eq!(t.base_url, "http://127.0.0.1:8000");
        let basic = t.basic_auth.as_ref().unwrap();
        // base64("al@ice:pw/secret")
        assert_eq!(basic.header_value(), "Basic YWxAaWNlOnB3L3NlY3JldA==");
        assert!(!format!("{t:?}").contains("secret"));
        args.api_key = Some("sk-both".into());
        let err = Target::new("http://u:pw-both@127.0.0.1:8000", &args).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("--api-key") && !msg.contains("pw-both"),
            "{msg}"
        );
    }
}
