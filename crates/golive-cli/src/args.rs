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
