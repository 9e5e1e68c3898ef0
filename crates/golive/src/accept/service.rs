//! Stages `service` (health, models, version, metrics, running config) and `basic`
//! (one short request returns a complete answer, streamed and not), per node.

use std::time::{Duration, Instant};

use serde_json::json;

use super::engine::{self, ServerInfo};
use super::Node;
use crate::client::{Api, ErrorKind, RequestSpec};
use crate::metrics::MetricsSnapshot;
use crate::report::{Check, CheckId, Impact, Owner, Stage, Status};

const SHORT: Duration = Duration::from_secs(10);

/// A check id for node `node` (0: the id itself, else `ID_nodeN`).
pub(super) fn node_id(base: CheckId, node: usize) -> String {
    if node == 0 {
        base.into()
    } else {
        format!("{base}_node{}", node + 1)
    }
}

fn excerpt(s: &str, max: usize) -> String {
    crate::text::truncate(s.trim(), max)
}

/// Result of the service stage for one node.
pub struct ServiceOutcome {
    /// The node's service-stage checks.
    pub checks: Vec<Check>,
    /// Nothing answered at all (connection refused or timed out everywhere).
    pub unreachable: bool,
    /// What the stage learned about the server.
    pub info: ServerInfo,
}

/// The service stage on one node: `/health`, `/v1/models`, `/metrics`, then the engine, its
/// version and running configuration.
pub async fn service_stage(node: &Node, index: usize) -> ServiceOutcome {
    let (health, health_down) = health_check(node, index).await;
    let (models, models_down) = models_check(node, index).await;
    let url = &node.client.base_url;
    let t0 = Instant::now();
    let metrics = engine::scrape(&node.client.http, &format!("{url}/metrics")).await;
    let info = engine::detect(&node.client, metrics.as_ref()).await;
    let mut metrics_check = metrics_check(metrics.as_ref(), &info, index);
    metrics_check.request = Some(json!({"method": "GET", "url": format!("{url}/metrics")}));
    server_side(&mut metrics_check, url, t0);
    let version = version_check(&info, url, index);
    let idle = idle_check(metrics.as_ref(), &info, index);
    ServiceOutcome {
        checks: vec![health, models, metrics_check, version, idle],
        unreachable: health_down && models_down,
        info,
    }
}

/// The fields every service check shares: the server's own, an environment matter.
fn server_side(c: &mut Check, url: &str, t0: Instant) {
    c.impact = Impact::Environment;
    c.owner = Some(Owner::Server);
    c.url = Some(url.to_string());
    c.duration_ms = t0.elapsed().as_millis() as u64;
}

/// A request that got no answer: whether the server is down (no connection, no answer in
/// time).
fn no_answer(c: &mut Check, kind: ErrorKind, detail: String) -> bool {
    c.status = Status::Fail;
    c.measurement = format!("no answer ({})", kind.as_str());
    c.evidence = detail;
    matches!(kind, ErrorKind::Connect | ErrorKind::Timeout)
}

/// `GET /health` answers 200; whether the server is down.
async fn health_check(node: &Node, index: usize) -> (Check, bool) {
    let url = &node.client.base_url;
    let t0 = Instant::now();
    let mut c = Check::new(
        node_id(CheckId::ServiceHealth, index),
        Stage::Service,
        Status::Pass,
        "GET /health answers 200",
    );
    c.request = Some(json!({"method": "GET", "url": format!("{url}/health")}));
    let mut down = false;
    match node.client.get_text("/health", SHORT).await {
        Ok((200, body)) => {
            c.measurement = "HTTP 200".into();
            c.evidence = excerpt(&body, 300);
        }
        Ok((status, body)) => {
            c.status = Status::Fail;
            c.measurement = format!("HTTP {status}");
            c.evidence = excerpt(&body, 500);
            c.next_step = "the server is up but not healthy: read its log (golive triage --server-log) before anything else".into();
        }
        Err((kind, detail)) => {
            down = no_answer(&mut c, kind, detail);
            c.next_step =
                "check that the server runs and listens on this address, and the firewall".into();
        }
    }
    server_side(&mut c, url, t0);
    (c, down)
}

/// `GET /v1/models` lists the served model (`--model` among them); whether the server is
/// down.
async fn models_check(node: &Node, index: usize) -> (Check, bool) {
    let url = &node.client.base_url;
    let t0 = Instant::now();
    let mut c = Check::new(
        node_id(CheckId::ServiceModels, index),
        Stage::Service,
        Status::Pass,
        "GET /v1/models lists the served model",
    );
    c.request = Some(json!({"method": "GET", "url": format!("{url}/v1/models")}));
    let mut down = false;
    match node.client.get_text("/v1/models", SHORT).await {
        Ok((200, body)) => {
            judge_models(&mut c, &body, node.target.model.as_deref());
            c.evidence = excerpt(&body, 500);
        }
        Ok((status, body)) => {
            c.status = Status::Fail;
            c.measurement = format!("HTTP {status}");
            c.evidence = excerpt(&body, 500);
            if status == 401 || status == 403 {
                c.next_step =
                    "the server wants an API key: pass --api-key or GOLIVE_API_KEY".into();
            }
        }
        Err((kind, detail)) => down = no_answer(&mut c, kind, detail),
    }
    server_side(&mut c, url, t0);
    (c, down)
}

fn judge_models(c: &mut Check, body: &str, want: Option<&str>) {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        c.status = Status::Fail;
        c.measurement = "no model listed".into();
        c.next_step =
            "the server lists no model: check --served-model-name and the model path".into();
        return;
    }
    c.measurement = format!("models: {}", ids.join(", "));
    if let Some(want) = want.filter(|w| !ids.contains(w)) {
        c.status = Status::Fail;
        c.measurement = format!("--model {want} not among: {}", ids.join(", "));
        c.next_step = "use a served model name (--served-model-name)".into();
    }
}

/// `GET /metrics` is Prometheus text with the engine's families.
fn metrics_check(metrics: Option<&MetricsSnapshot>, info: &ServerInfo, index: usize) -> Check {
    let mut c = Check::new(
        node_id(CheckId::ServiceMetrics, index),
        Stage::Service,
        Status::Pass,
        "GET /metrics is Prometheus text with the engine's families",
    );
    let Some(m) = metrics else {
        c.status = Status::Warn;
        c.measurement = "no metrics page".into();
        c.evidence = "GET /metrics did not return Prometheus text".into();
        c.next_step =
            "enable metrics (llama.cpp: --metrics) so cache, queue and KV evidence can be read"
                .into();
        return c;
    };
    let names = info.names();
    let present: Vec<&str> = [
        names.kv_usage,
        names.waiting,
        names.running,
        names.cache_hits,
        names.cache_queries,
        names.preemptions,
    ]
    .iter()
    .flat_map(|l| l.iter())
    .copied()
    .filter(|n| m.has(n))
    .collect();
    c.measurement = format!(
        "{} samples; engine families present: {}",
        m.samples.len(),
        if present.is_empty() {
            "none".to_string()
        } else {
            present.join(", ")
        }
    );
    c.evidence = present
        .iter()
        .filter_map(|n| m.family(n).next())
        .map(|s| format!("{} {:?}", s.metric, s.value))
        .collect::<Vec<_>>()
        .join("\n");
    // Lines the reader skipped: the page is kept, but say so.
    if let Some(first) = m.problems.first() {
        c.measurement
            .push_str(&format!("; {} unreadable line(s) skipped", m.problem_count));
        c.evidence
            .push_str(&format!("\nfirst unreadable line: {first}"));
    }
    c
}

/// The runbook's "started without traffic, base consumption documented": what the
/// metrics page says about memory at rest, read before golive's first request.
fn idle_check(metrics: Option<&MetricsSnapshot>, info: &ServerInfo, index: usize) -> Check {
    let mut c = Check::new(
        node_id(CheckId::IdleBaseline, index),
        Stage::Service,
        Status::Pass,
        "before the first request: the server is idle and its memory at rest is recorded",
    );
    c.impact = Impact::Info;
    let Some(m) = metrics else {
        c.status = Status::Skip;
        c.measurement = "no metrics page: the idle consumption could not be read".into();
        return c;
    };
    let names = info.names();
    let running = engine::first_sum(m, names.running);
    let waiting = engine::first_sum(m, names.waiting);
    let kv = engine::first_max(m, names.kv_usage);
    let rss = m.sum("process_resident_memory_bytes");
    let fmt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("not exposed".to_string(), f);
    c.measurement = format!(
        "running {}, waiting {}, KV cache {}, process memory {}",
        fmt(running, &|v| format!("{v:.0}")),
        fmt(waiting, &|v| format!("{v:.0}")),
        fmt(kv, &|v| format!("{:.1}%", v * 100.0)),
        fmt(rss, &|v| format!("{:.0} MiB", v / 1048576.0)),
    );
    c.data = json!({"running": running, "waiting": waiting, "kv_usage": kv,
        "process_resident_memory_bytes": rss});
    let busy = running.unwrap_or(0.0) + waiting.unwrap_or(0.0);
    if busy > 0.0 {
        c.status = Status::Warn;
        c.evidence = format!("{busy:.0} request(s) running or waiting before golive's first one: another client is using the server, so this is not the idle consumption");
    } else if kv.is_none() && rss.is_none() {
        c.status = Status::Skip;
        c.measurement.push_str(": no memory figure exposed");
    }
    c
}

/// The engine, its version and running configuration are exposed.
fn version_check(info: &ServerInfo, url: &str, index: usize) -> Check {
    let mut c = Check::new(
        node_id(CheckId::ServiceVersion, index),
        Stage::Service,
        Status::Pass,
        "engine, version and running configuration are exposed",
    );
    c.measurement = format!(
        "engine {}, version {}, max model len {}, prefix cache flag {}",
        info.engine_name(),
        info.version.as_deref().unwrap_or("unknown"),
        info.max_model_len
            .map_or("unknown".to_string(), |v| v.to_string()),
        info.prefix_cache_flag.as_deref().unwrap_or("not exposed"),
    );
    c.evidence = match &info.config_source {
        Some(src) => format!("{src}: {}", info.config_excerpt),
        None => "no running configuration exposed".into(),
    };
    if info.version.is_none() {
        c.status = Status::Skip;
        c.next_step = "the server does not say its version (vLLM: GET /version)".into();
    }
    c.data = serde_json::to_value(info).unwrap_or_default();
    let probed: Vec<String> = [
        "/version",
        "/props",
        "/get_server_info",
        "/server_info?config_format=json",
        "/metrics",
    ]
    .iter()
    .map(|p| format!("{url}{p}"))
    .collect();
    c.request = Some(json!({"method": "GET", "probed": probed}));
    c.url = Some(url.to_string());
    c
}

/// One short text request, non-streamed and streamed: complete answers.
pub async fn basic_stage(node: &Node, index: usize, model: &str) -> Vec<Check> {
    let url = node.client.base_url.clone();
    let mut checks = Vec::new();
    let messages = json!([{"role": "user", "content": "Say hello in one short sentence."}]);
    for stream in [false, true] {
        let mut body = json!({
            "model": model, "messages": messages, "max_tokens": 32, "temperature": 0,
            "stream": stream,
        });
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        let spec = RequestSpec::from_json(Api::Chat, &body, true);
        let rec = node.client.send_now(&spec).await;
        let name = if stream {
            CheckId::BasicStream
        } else {
            CheckId::BasicChat
        };
        let mut c = Check::new(
            node_id(name, index),
            Stage::Basic,
            Status::Pass,
            if stream {
                "one short streamed chat request: tokens arrive, finish_reason set, ends with [DONE]"
            } else {
                "one short chat request returns a complete answer with finish_reason and usage"
            },
        );
        c.request = Some(body.clone());
        c.url = Some(url.clone());
        c.duration_ms = rec.e2e_ms() as u64;
        c.impact = Impact::Environment;
        c.owner = Some(Owner::Server);
        c.data = json!({
            "ttft_ms": rec.ttft_ms(), "e2e_ms": rec.e2e_ms(), "chunks": rec.chunks,
            "prompt_tokens": rec.usage.prompt_tokens, "completion_tokens": rec.usage.completion_tokens,
            "finish_reason": rec.finish_reason, "done_marker": rec.done_marker,
        });
        c.evidence = format!("answer: {:?}", excerpt(&rec.text, 300));
        if let Some(kind) = rec.error {
            c.status = Status::Fail;
            c.measurement = format!("failed: {} after {:.0} ms", kind.as_str(), rec.e2e_ms());
            c.evidence = excerpt(&rec.error_detail, 800);
            c.next_step =
                "the server does not serve a simple request: read its log (--server-log)".into();
        } else {
            let mut problems = Vec::new();
            if rec.finish_reason.is_none() {
                problems.push("no finish_reason");
            }
            if stream && rec.token_us.is_empty() {
                problems.push("no token chunks");
            }
            if !stream && rec.text.trim().is_empty() {
                problems.push("empty answer");
            }
            let mut warns = Vec::new();
            if stream && !rec.done_marker {
                warns.push("no data: [DONE]");
            }
            if rec.usage.completion_tokens.is_none() {
                warns.push("no usage");
            }
            c.measurement = format!(
                "{} output tokens, finish_reason {}, {:.0} ms{}",
                rec.output_tokens(),
                rec.finish_reason.as_deref().unwrap_or("none"),
                rec.e2e_ms(),
                rec.ttft_ms()
                    .map(|t| format!(", TTFT {t:.0} ms"))
                    .unwrap_or_default()
            );
            if !problems.is_empty() {
                c.status = Status::Fail;
                c.measurement
                    .push_str(&format!("; {}", problems.join(", ")));
                c.next_step =
                    "the answer is incomplete: check the chat template and the server log".into();
            } else if !warns.is_empty() {
                c.status = Status::Warn;
                c.measurement.push_str(&format!("; {}", warns.join(", ")));
                c.impact = Impact::Info;
            }
        }
        checks.push(c);
    }
    checks
}
