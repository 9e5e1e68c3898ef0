//! The server under test: base URL, credentials, model and timeouts, and the
//! HTTP client built from them. Shared by accept, load, agent, replay and watch.

use std::time::Duration;

use anyhow::Context;

/// An API key that never prints itself.
#[derive(Clone, Default)]
pub struct ApiKey(Option<String>);

impl ApiKey {
    pub fn new(key: Option<String>) -> Self {
        ApiKey(key.filter(|k| !k.is_empty()))
    }
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

/// One OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct Target {
    /// Base URL without a trailing slash and without `/v1`, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    pub api_key: ApiKey,
    pub model: Option<String>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// How long an idle pooled connection is kept (see [`TargetOptions::pool_idle_timeout`]).
    pub pool_idle_timeout: Duration,
}

impl Target {
    pub fn new(url: &str, args: &TargetOptions) -> anyhow::Result<Self> {
        let parsed = url::Url::parse(url).with_context(|| format!("invalid URL {url:?}"))?;
        anyhow::ensure!(
            matches!(parsed.scheme(), "http" | "https"),
            "URL {url:?} must start with http:// or https://"
        );
        let mut base = url.trim_end_matches('/').to_string();
        if let Some(stripped) = base.strip_suffix("/v1") {
            base = stripped.to_string();
        }
        Ok(Target {
            base_url: base,
            api_key: ApiKey::new(args.api_key.clone()),
            model: args.model.clone(),
            request_timeout: args.request_timeout,
            connect_timeout: args.connect_timeout,
            pool_idle_timeout: args.pool_idle_timeout,
        })
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
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(key) = self.api_key.expose() {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                .context("API key contains characters not allowed in a header")?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        reqwest::Client::builder()
            .default_headers(headers)
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
}
