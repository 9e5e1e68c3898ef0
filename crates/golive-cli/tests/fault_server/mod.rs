//! A small scripted OpenAI-compatible server (raw HTTP/1.1 on a tokio TcpListener) that
//! produces the faults a real server will not produce on demand: a hang before the
//! first byte, a close mid-stream, malformed SSE, HTTP 500, a slow drip.
#![allow(dead_code)]

mod scripted_answers;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How `/v1/chat/completions` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A proper stream: `tokens` content chunks `delay` apart, usage, `[DONE]`.
    Ok { tokens: u32, delay_ms: u64 },
    /// Reads the request and never answers.
    HangBeforeFirstByte,
    /// Headers and two chunks, then the connection is closed.
    CloseMidStream,
    /// `data:` events that are not JSON.
    MalformedSse,
    /// HTTP 500 with an OpenAI error object.
    Http500,
    /// Headers, then one byte every 300 ms, forever.
    SlowDrip,
    /// A keep-alive race on every reuse: the first completion on a connection is a proper
    /// stream of `tokens` chunks; a later one on the same connection is read and the
    /// connection closed without an answer, as when the server's idle timeout fires just
    /// as the client reuses the connection.
    DropReused { tokens: u32 },
    /// At capacity: more than `max_in_flight` completions at once get HTTP 503, and
    /// `vllm:num_requests_waiting` counts every rejected request (a growing queue).
    Overloaded { max_in_flight: u64 },
    /// Every `every`-th completion is cut mid-stream (a lost connection a retry cannot
    /// undo); the others are proper streams.
    Flaky { every: u64 },
    /// A vLLM-like engine: `/version`, `vllm:` metrics with prefix-cache counters in
    /// tokens, `/tokenize` with `messages`. Words are tokens. With `caching`, a prompt's
    /// hits are its longest common prefix with an earlier prompt, in whole 16-token
    /// blocks, and (hybrid models) only at multiples of `retention`. `nonce_prefix`
    /// puts a per-request token first, as a template with a timestamp would.
    Vllm {
        caching: bool,
        retention: Option<usize>,
        nonce_prefix: bool,
    },
    /// A stream whose content goes silent for `gap_ms` between its first and second
    /// token (the server holds decoding back).
    ContentGap { gap_ms: u64 },
    /// A tool-call stream whose parser holds the arguments back: the delta with the
    /// function name, `gap_ms` of silence, then the arguments in one delta.
    ToolCallGap { gap_ms: u64 },
    /// Alive but stuck: `/health` 200, `/metrics` with one running request and a
    /// generated-token counter that never moves, and completions that get their
    /// headers and then nothing.
    Stuck,
    /// A tool-call parser that breaks under concurrency: agent requests (tools or
    /// response_format) get proper tool calls while they are alone, and the call as
    /// markup in the text while another completion is in flight. Plain requests are
    /// proper streams of 6 chunks 20 ms apart.
    ToolParserUnderLoad,
    /// A replica that answers every `/v1/completions` prompt with the same scripted
    /// tokens (with logprobs); otherwise like `Ok { tokens: 4, delay_ms: 2 }`.
    Replica,
    /// A replica of known capacity: `slots` requests are served at once, each for
    /// `service_ms`, the rest wait for a slot (closed-loop capacity slots / service).
    Slots { slots: usize, service_ms: u64 },
}

/// Counters and seen prompts of the vLLM-like engine.
#[derive(Default)]
struct VllmState {
    prompts: Vec<Vec<u64>>,
    queries: u64,
    hits: u64,
    prompt_tokens: u64,
    prefill_s: f64,
    prefill_n: u64,
    nonce: u64,
    in_flight: u64,
    rejected: u64,
    /// The slots of `Fault::Slots`.
    slots: Option<Arc<tokio::sync::Semaphore>>,
}

pub struct FaultServer {
    pub url: String,
    /// Chat requests received.
    pub requests: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(fault: Fault) -> FaultServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(AtomicU64::new(0));
    let counter = requests.clone();
    let state = Arc::new(std::sync::Mutex::new(VllmState {
        slots: match fault {
            Fault::Slots { slots, .. } => Some(Arc::new(tokio::sync::Semaphore::new(slots))),
            _ => None,
        },
        ..VllmState::default()
    }));
    let task = tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                break;
            };
            let counter = counter.clone();
            let state = state.clone();
            // Like real servers: every token goes out at once (no Nagle coalescing).
            let _ = sock.set_nodelay(true);
            tokio::spawn(async move {
                let _ = serve(sock, fault, counter, state).await;
            });
        }
    });
    FaultServer {
        url,
        requests,
        task,
    }
}

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.lines();
            let mut first = lines.next()?.split_whitespace();
            let method = first.next()?.to_string();
            let path = first.next()?.to_string();
            let len: usize = lines
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let mut tmp = [0u8; 8192];
                let n = sock.read(&mut tmp).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(Request { method, path, body });
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
}

async fn respond(
    sock: &mut TcpStream,
    status: &str,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body).await
}

async fn chunk(sock: &mut TcpStream, data: &str) -> std::io::Result<()> {
    sock.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
        .await?;
    sock.flush().await
}

fn content_event(text: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
    )
}

fn words_of(body: &[u8]) -> Vec<u64> {
    use std::hash::{Hash, Hasher};
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let mut out = Vec::new();
    for m in v["messages"].as_array().into_iter().flatten() {
        let text = format!(
            "<{}> {}",
            m["role"].as_str().unwrap_or(""),
            m["content"].as_str().unwrap_or("")
        );
        for w in text.split_whitespace() {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            w.hash(&mut h);
            out.push(h.finish() % 100_000);
        }
    }
    out
}

fn vllm_tokens(body: &[u8], nonce_prefix: bool, state: &mut VllmState) -> Vec<u64> {
    let mut t = words_of(body);
    if nonce_prefix {
        state.nonce += 1;
        t.insert(0, 1_000_000 + state.nonce);
    }
    t
}

fn vllm_metrics(s: &VllmState, caching: bool) -> String {
    let flag = if caching { "True" } else { "False" };
    format!(
        "# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{{engine=\"0\",model_name=\"m\"}} {q}\n\
         vllm:prefix_cache_queries_created{{engine=\"0\",model_name=\"m\"}} 1.7e9\n\
         # TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{{engine=\"0\",model_name=\"m\"}} {h}\n\
         vllm:prompt_tokens_total{{engine=\"0\",model_name=\"m\"}} {p}\n\
         vllm:num_requests_running{{engine=\"0\",model_name=\"m\"}} 0.0\n\
         vllm:num_requests_waiting{{engine=\"0\",model_name=\"m\"}} 0.0\n\
         vllm:kv_cache_usage_perc{{engine=\"0\",model_name=\"m\"}} 0.125\n\
         vllm:num_preemptions_total{{engine=\"0\",model_name=\"m\"}} 0.0\n\
         # TYPE vllm:request_prefill_time_seconds histogram\n\
         vllm:request_prefill_time_seconds_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"m\"}} {n}\n\
         vllm:request_prefill_time_seconds_sum{{engine=\"0\",model_name=\"m\"}} {ps}\n\
         vllm:request_prefill_time_seconds_count{{engine=\"0\",model_name=\"m\"}} {n}\n\
         vllm:cache_config_info{{block_size=\"16\",enable_prefix_caching=\"{flag}\",engine=\"0\",num_gpu_blocks=\"4096\"}} 1.0\n",
        q = s.queries, h = s.hits, p = s.prompt_tokens, n = s.prefill_n, ps = s.prefill_s,
    )
}

async fn serve(
    mut sock: TcpStream,
    fault: Fault,
    counter: Arc<AtomicU64>,
    state: Arc<std::sync::Mutex<VllmState>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut served_here = 0u64;
    let (fault, replica) = match fault {
        Fault::Replica => (
            Fault::Ok {
                tokens: 4,
                delay_ms: 2,
            },
            true,
        ),
        f => (f, false),
    };
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        served_here += 1;
        if replica && req.path == "/v1/completions" {
            counter.fetch_add(1, Ordering::Relaxed);
            scripted_answers::completion_answer(&mut sock, &[" QX", "-77", "13", "."]).await?;
            continue;
        }
        if fault == Fault::ToolParserUnderLoad && req.path == "/v1/chat/completions" {
            counter.fetch_add(1, Ordering::Relaxed);
            let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
            state.lock().unwrap().in_flight += 1;
            let served = if body.get("tools").is_some() || body.get("response_format").is_some() {
                // Long enough for a concurrent request to be in flight at the same time.
                tokio::time::sleep(Duration::from_millis(30)).await;
                let concurrent = state.lock().unwrap().in_flight > 1;
                scripted_answers::agent_answer(&mut sock, &body, concurrent).await
            } else if body["stream"].as_bool().unwrap_or(false) {
                ok_stream(&mut sock, 6, 20).await
            } else {
                json_answer(&mut sock, 4).await
            };
            state.lock().unwrap().in_flight -= 1;
            served?;
            continue;
        }
        if let Fault::DropReused { .. } = fault {
            if served_here > 1 && req.path.ends_with("/completions") {
                counter.fetch_add(1, Ordering::Relaxed);
                return Ok(()); // closed under the request: nothing comes back
            }
        }
        if let Fault::Overloaded { .. } = fault {
            if req.path == "/metrics" {
                let waiting = state.lock().unwrap().rejected;
                let text = format!(
                    "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{engine=\"0\",model_name=\"fault-model\"}} {waiting}.0\n"
                );
                respond_metrics(&mut sock, &text).await?;
                continue;
            }
        }
        if fault == Fault::Stuck && req.path == "/metrics" {
            respond_metrics(
                &mut sock,
                "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"fault-model\"} 1.0\n\
                 # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=\"fault-model\"} 0.0\n\
                 # TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine=\"0\",model_name=\"fault-model\"} 42.0\n",
            )
            .await?;
            continue;
        }
        if let Fault::Vllm {
            caching,
            retention,
            nonce_prefix,
        } = fault
        {
            match (req.method.as_str(), req.path.as_str()) {
                ("GET", "/version") => {
                    respond(
                        &mut sock,
                        "200 OK",
                        "application/json",
                        br#"{"version":"0.33.0"}"#,
                    )
                    .await?;
                    continue;
                }
                ("GET", "/metrics") => {
                    let text = vllm_metrics(&state.lock().unwrap(), caching);
                    respond_metrics(&mut sock, &text).await?;
                    continue;
                }
                ("GET", "/v1/models") => {
                    respond(&mut sock, "200 OK", "application/json", br#"{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm","max_model_len":8192}]}"#).await?;
                    continue;
                }
                ("POST", "/tokenize") => {
                    let t = vllm_tokens(&req.body, nonce_prefix, &mut state.lock().unwrap());
                    let body =
                        serde_json::json!({"count": t.len(), "max_model_len": 8192, "tokens": t})
                            .to_string();
                    respond(&mut sock, "200 OK", "application/json", body.as_bytes()).await?;
                    continue;
                }
                ("POST", "/v1/chat/completions") => {
                    counter.fetch_add(1, Ordering::Relaxed);
                    // Its usage counts the prompt as its /tokenize does (words).
                    let (prefill_ms, prompt) = {
                        let mut s = state.lock().unwrap();
                        let t = vllm_tokens(&req.body, nonce_prefix, &mut s);
                        let mut hit = 0;
                        if caching {
                            let best = s
                                .prompts
                                .iter()
                                .map(|p| p.iter().zip(&t).take_while(|(a, b)| a == b).count())
                                .max()
                                .unwrap_or(0);
                            // The last token is always recomputed; whole blocks only.
                            hit = best.min(t.len().saturating_sub(1)) / 16 * 16;
                            if let Some(r) = retention {
                                hit = hit / r * r;
                            }
                        }
                        s.prompts.push(t.clone());
                        s.queries += t.len() as u64;
                        s.hits += hit as u64;
                        s.prompt_tokens += t.len() as u64;
                        let ms = (t.len() - hit) as f64 * 0.2;
                        s.prefill_s += ms / 1000.0;
                        s.prefill_n += 1;
                        (ms, t.len())
                    };
                    tokio::time::sleep(Duration::from_micros((prefill_ms * 1000.0) as u64)).await;
                    let stream = String::from_utf8_lossy(&req.body).contains("\"stream\":true");
                    if !stream {
                        let body = format!(
                            r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"Hello there."}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":{prompt},"completion_tokens":3}}}}"#
                        );
                        respond(&mut sock, "200 OK", "application/json", body.as_bytes()).await?;
                        continue;
                    }
                    sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n").await?;
                    for i in 0..3 {
                        chunk(&mut sock, &content_event(&format!("w{i}"))).await?;
                    }
                    chunk(&mut sock, &format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\ndata: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":3}}}}\n\ndata: [DONE]\n\n")).await?;
                    sock.write_all(b"0\r\n\r\n").await?;
                    continue;
                }
                _ => {}
            }
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health") => {
                respond(
                    &mut sock,
                    "200 OK",
                    "application/json",
                    b"{\"status\":\"ok\"}",
                )
                .await?
            }
            ("GET", "/v1/models") => {
                respond(
                    &mut sock,
                    "200 OK",
                    "application/json",
                    br#"{"object":"list","data":[{"id":"fault-model","object":"model"}]}"#,
                )
                .await?
            }
            ("POST", p) if p.ends_with("/completions") => {
                counter.fetch_add(1, Ordering::Relaxed);
                let stream = String::from_utf8_lossy(&req.body).contains("\"stream\":true");
                match fault {
                    Fault::HangBeforeFirstByte => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    Fault::Http500 => {
                        respond(
                            &mut sock,
                            "500 Internal Server Error",
                            "application/json",
                            br#"{"error":{"message":"CUDA out of memory (scripted)","type":"server_error","code":500}}"#,
                        )
                        .await?
                    }
                    Fault::Overloaded { max_in_flight } => {
                        let admitted = {
                            let mut st = state.lock().unwrap();
                            if st.in_flight >= max_in_flight {
                                st.rejected += 1;
                                false
                            } else {
                                st.in_flight += 1;
                                true
                            }
                        };
                        if !admitted {
                            respond(
                                &mut sock,
                                "503 Service Unavailable",
                                "application/json",
                                br#"{"error":{"message":"The server is overloaded (scripted)","type":"ServiceUnavailableError","code":503}}"#,
                            )
                            .await?;
                            continue;
                        }
                        let served = if stream {
                            ok_stream(&mut sock, 8, 40).await
                        } else {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            json_answer(&mut sock, 8).await
                        };
                        state.lock().unwrap().in_flight -= 1;
                        served?;
                    }
                    Fault::Slots { service_ms, .. } => {
                        let slots = state.lock().unwrap().slots.clone().expect("slots");
                        let _slot = slots.acquire_owned().await.expect("open semaphore");
                        tokio::time::sleep(Duration::from_millis(service_ms)).await;
                        if stream {
                            ok_stream(&mut sock, 4, 0).await?
                        } else {
                            json_answer(&mut sock, 4).await?
                        }
                    }
                    Fault::Ok { tokens, delay_ms } if !stream => {
                        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                        json_answer(&mut sock, tokens).await?
                    }
                    Fault::DropReused { tokens } if !stream => json_answer(&mut sock, tokens).await?,
                    Fault::ContentGap { .. } | Fault::ToolCallGap { .. } if !stream => {
                        json_answer(&mut sock, 4).await?
                    }
                    Fault::Flaky { every } => {
                        let n = counter.load(Ordering::Relaxed);
                        if !stream {
                            json_answer(&mut sock, 4).await?
                        } else if n.is_multiple_of(every) {
                            sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n").await?;
                            chunk(&mut sock, &content_event("a")).await?;
                            return Ok(()); // dropped: the chunked body never ends
                        } else {
                            ok_stream(&mut sock, 4, 2).await?
                        }
                    }
                    _ => {
                        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n").await?;
                        match fault {
                            Fault::Ok { tokens, delay_ms } => {
                                stream_body(&mut sock, tokens, delay_ms).await?;
                            }
                            Fault::DropReused { tokens } => {
                                stream_body(&mut sock, tokens, 5).await?;
                            }
                            Fault::CloseMidStream => {
                                chunk(&mut sock, &content_event("a")).await?;
                                chunk(&mut sock, &content_event("b")).await?;
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                return Ok(()); // dropped: the chunked body never ends
                            }
                            Fault::MalformedSse => {
                                chunk(&mut sock, &content_event("a")).await?;
                                chunk(&mut sock, "data: <html>upstream error</html>\n\n").await?;
                                chunk(&mut sock, "data: [DONE]\n\n").await?;
                                sock.write_all(b"0\r\n\r\n").await?;
                            }
                            Fault::SlowDrip => {
                                let event = content_event("slow");
                                sock.write_all(format!("{:x}\r\n", event.len() * 1000).as_bytes()).await?;
                                loop {
                                    for b in event.bytes() {
                                        sock.write_all(&[b]).await?;
                                        sock.flush().await?;
                                        tokio::time::sleep(Duration::from_millis(300)).await;
                                    }
                                }
                            }
                            Fault::ContentGap { gap_ms } => {
                                chunk(&mut sock, &content_event("t0")).await?;
                                tokio::time::sleep(Duration::from_millis(gap_ms)).await;
                                for t in ["t1", "t2", "t3"] {
                                    chunk(&mut sock, &content_event(t)).await?;
                                }
                                finish(&mut sock, "stop", 4).await?;
                            }
                            Fault::ToolCallGap { gap_ms } => {
                                chunk(&mut sock, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"lookup_order\",\"arguments\":\"\"}}]}}]}\n\n").await?;
                                tokio::time::sleep(Duration::from_millis(gap_ms)).await;
                                chunk(&mut sock, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"order_id\\\": \\\"A-1234\\\"}\"}}]}}]}\n\n").await?;
                                finish(&mut sock, "tool_calls", 12).await?;
                            }
                            Fault::Stuck => {
                                // Headers went out; not one event follows.
                                tokio::time::sleep(Duration::from_secs(3600)).await;
                            }
                            Fault::HangBeforeFirstByte
                            | Fault::Http500
                            | Fault::Vllm { .. }
                            | Fault::Overloaded { .. }
                            | Fault::Flaky { .. }
                            | Fault::ToolParserUnderLoad
                            | Fault::Slots { .. }
                            | Fault::Replica => {
                                unreachable!()
                            }
                        }
                    }
                }
            }
            _ => {
                respond(
                    &mut sock,
                    "404 Not Found",
                    "application/json",
                    br#"{"error":{"message":"File Not Found","code":404}}"#,
                )
                .await?
            }
        }
    }
    Ok(())
}

/// Headers and a proper stream of `tokens` chunks `delay_ms` apart.
async fn ok_stream(sock: &mut TcpStream, tokens: u32, delay_ms: u64) -> std::io::Result<()> {
    sock.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    )
    .await?;
    stream_body(sock, tokens, delay_ms).await
}

/// The body of a proper stream: role, `tokens` content chunks, finish, usage, `[DONE]`.
async fn stream_body(sock: &mut TcpStream, tokens: u32, delay_ms: u64) -> std::io::Result<()> {
    chunk(sock, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n").await?;
    for i in 0..tokens {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        chunk(sock, &content_event(&format!("t{i}"))).await?;
    }
    chunk(
        sock,
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    )
    .await?;
    chunk(sock, &format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n", tokens + 10)).await?;
    sock.write_all(b"0\r\n\r\n").await
}

/// The end of a stream: `finish_reason`, usage, `[DONE]`, the last chunk.
async fn finish(sock: &mut TcpStream, reason: &str, tokens: u32) -> std::io::Result<()> {
    chunk(
        sock,
        &format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"{reason}\"}}]}}\n\ndata: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{tokens}}}}}\n\ndata: [DONE]\n\n"),
    )
    .await?;
    sock.write_all(b"0\r\n\r\n").await
}

/// A whole (non-streamed) chat answer of `tokens` words.
async fn json_answer(sock: &mut TcpStream, tokens: u32) -> std::io::Result<()> {
    let text = "ok ".repeat(tokens as usize);
    let body = format!(
        r#"{{"id":"c1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":10,"completion_tokens":{tokens},"total_tokens":{}}}}}"#,
        tokens + 10
    );
    respond(sock, "200 OK", "application/json", body.as_bytes()).await
}

/// A Prometheus text answer.
async fn respond_metrics(sock: &mut TcpStream, text: &str) -> std::io::Result<()> {
    respond(sock, "200 OK", "text/plain; version=0.0.4", text.as_bytes()).await
}
