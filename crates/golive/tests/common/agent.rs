//! The agent tests' two real llama-servers and the agent stage run in-process. The
//! servers keep their ports between test binaries (the start script reuses a healthy
//! one; scripts/test.sh stops them at the end), so each starts once per suite.

use std::path::Path;
use std::time::Duration;

use golive::agent::{run_stage, AgentOptions};
use golive::report::Check;
use golive::target::{Target, TargetOptions};

/// llama.cpp's own (fallback) chat template, `--jinja`: no tool-call support.
pub const JINJA_PORT: u16 = 18210;
/// `scripts/templates/gemma3-tool-calls.jinja`, which llama.cpp's chat parser recognises.
pub const TOOL_TEMPLATE_PORT: u16 = 18211;

/// The project's tool-call template for Gemma 3.
pub fn tool_call_template() -> String {
    super::repo_root()
        .join("scripts/templates/gemma3-tool-calls.jinja")
        .display()
        .to_string()
}

/// The server with llama.cpp's own template; returns its URL.
pub fn jinja_server() -> String {
    super::start_local_server(JINJA_PORT, &["--jinja"])
}

/// The server with the tool-call template; returns its URL.
pub fn tool_template_server() -> String {
    let template = tool_call_template();
    super::start_local_server(
        TOOL_TEMPLATE_PORT,
        &["--jinja", "--chat-template-file", &template],
    )
}

/// The agent stage against `url` (the model looked up on the server), as `accept` runs it.
pub async fn stage(url: &str, opts: &AgentOptions, out: &Path) -> Vec<Check> {
    let args = TargetOptions {
        api_key: None,
        model: None,
        request_timeout: Duration::from_secs(300),
        connect_timeout: Duration::from_secs(5),
        pool_idle_timeout: Duration::from_secs(3),
    };
    let mut t = Target::new(url, &args).unwrap();
    let client = golive::client::OpenAiClient::new(&t).unwrap();
    let model = t.resolve_model(&client.http).await.unwrap();
    run_stage(&t, &client, &model, opts, out).await
}
