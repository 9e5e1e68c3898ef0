//! A small scripted OpenAI-compatible server (raw HTTP/1.1 on a tokio TcpListener) that
//! produces the faults a real server will not produce on demand: a hang before the
//! first byte, a close mid-stream, malformed SSE, HTTP 500, a slow drip.
#![allow(dead_code)]

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
    let task = tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                break;
            };
            let counter = counter.clone();
            // Like real servers: every token goes out at once (no Nagle coalescing).
            let _ = sock.set_nodelay(true);
            tokio::spawn(async move {
                let _ = serve(sock, fault, counter).await;
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

async fn serve(mut sock: TcpStream, fault: Fault, counter: Arc<AtomicU64>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
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
                    Fault::Ok { tokens, delay_ms } if !stream => {
                        let text = "ok ".repeat(tokens as usize);
                        let body = format!(
                            r#"{{"id":"c1","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":10,"completion_tokens":{tokens},"total_tokens":{}}}}}"#,
                            tokens + 10
                        );
                        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                        respond(&mut sock, "200 OK", "application/json", body.as_bytes()).await?
                    }
                    _ => {
                        sock.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n").await?;
                        match fault {
                            Fault::Ok { tokens, delay_ms } => {
                                chunk(&mut sock, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n").await?;
                                for i in 0..tokens {
                                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                                    chunk(&mut sock, &content_event(&format!("t{i}"))).await?;
                                }
                                chunk(&mut sock, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n").await?;
                                chunk(&mut sock, &format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n", tokens + 10)).await?;
                                sock.write_all(b"0\r\n\r\n").await?;
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
                            Fault::HangBeforeFirstByte | Fault::Http500 => unreachable!(),
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
