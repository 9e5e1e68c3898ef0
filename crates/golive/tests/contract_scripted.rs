//! The contract's live items against small scripted servers (raw HTTP/1.1): one that
//! accepts a wrong temperature, one that answers gibberish on one data-parallel rank.

use std::time::Duration;

use golive::contract::run::{run, ContractOptions};
use golive::contract::{ContractReq, ImmutableParam};
use golive::report::{Owner, Status};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server answering every request with `answer(headers, body) -> (status, json)`.
async fn serve(answer: fn(&str, &Value) -> (u16, Value)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(i) = text.find("\r\n\r\n") {
                        let len: usize = text[..i]
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= i + 4 + len {
                            break (
                                text[..i].to_ascii_lowercase(),
                                serde_json::from_slice(&buf[i + 4..i + 4 + len])
                                    .unwrap_or(Value::Null),
                            );
                        }
                    }
                };
                let (status, json) = answer(&head, &body);
                let out = json.to_string();
                let resp = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{out}", out.len());
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    url
}

fn completion(text: &str) -> Value {
    json!({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]})
}

fn options(url: String, dp_size: usize) -> ContractOptions {
    let temperature = ImmutableParam {
        name: "temperature".into(),
        thinking: String::new(),
        required: Some(json!(1.0)),
        wrong: vec![json!(0.3)],
    };
    ContractOptions {
        urls: vec![url],
        model: "m".into(),
        dp_size,
        spec: ContractReq {
            params: vec![temperature],
            ..ContractReq::default()
        },
        timeout: Duration::from_secs(10),
    }
}

#[tokio::test]
async fn a_server_that_accepts_a_wrong_temperature_fails_owner_server() {
    let lax = serve(|_, _| (200, completion("Paris is the capital of France."))).await;
    let (checks, requests) = run(&options(lax, 1)).await.unwrap();
    let params = checks.iter().find(|c| c.item == "params").unwrap();
    assert_eq!(
        (params.verdict.status, params.verdict.owner),
        (Status::Fail, Some(Owner::Server))
    );
    assert_eq!(requests, 2);

    let strict = serve(|_, body| {
        if body["temperature"] == json!(0.3) {
            (400, json!({"error": {"message": "temperature"}}))
        } else {
            (200, completion("Paris is the capital of France."))
        }
    })
    .await;
    let (checks, _) = run(&options(strict, 1)).await.unwrap();
    assert!(
        checks.iter().all(|c| c.verdict.status == Status::Pass),
        "{checks:?}"
    );
}

#[tokio::test]
async fn gibberish_on_one_rank_only_is_named() {
    let url = serve(|head, _| {
        if head.contains("x-data-parallel-rank: 1") {
            (200, completion(&"\u{FFFD}#".repeat(40)))
        } else {
            (200, completion("Paris is the capital of France."))
        }
    })
    .await;
    let (checks, requests) = run(&options(url.clone(), 3)).await.unwrap();
    assert_eq!(requests, 1 + 3);
    let failed: Vec<_> = checks
        .iter()
        .filter(|c| c.item != "params" && c.verdict.status == Status::Fail)
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    for c in failed {
        assert_eq!(c.path, format!("{url} rank 1"));
        assert_eq!(c.verdict.owner, Some(Owner::Server));
    }
}
