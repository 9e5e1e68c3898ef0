//! `scripts/local-server.sh` on a CPU its prebuilt binary cannot run: a stand-in for the
//! prebuilt llama-server that dies with SIGILL, as the real one does on AVX2-only EPYCs,
//! makes the script fall back to the source build for this CPU, which then serves.

use crate::common;

use std::process::Command;
use std::time::Duration;

#[test]
fn a_prebuilt_server_that_dies_with_sigill_falls_back_to_the_source_build() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("llama-server");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'ggml: starting' >&2\nkill -ILL $$\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let port = 18291u16;
    let _guard = common::ServerGuard(port);
    // Only the fallback is under test: with no source build for this CPU yet the script
    // builds one (about 12 minutes on 2 cores); scripts/test.sh builds it beforehand.
    let out = Command::new(common::repo_root().join("scripts/local-server.sh"))
        .args(["start", "--port", &port.to_string()])
        .env("GOLIVE_LOCAL_PREBUILT", &fake)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("SIGILL"), "{stderr}");
    assert!(
        stderr.contains("cannot serve on this CPU; building it from source"),
        "{stderr}"
    );
    let url = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    // The source build serves a real completion.
    let o = Command::new("curl")
        .args(["-fsS", "-m", "60", &format!("{url}/completion")])
        .args(["-H", "Content-Type: application/json"])
        .args([
            "-d",
            r#"{"prompt":"The capital of France is","n_predict":4}"#,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let body: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        body["tokens_predicted"].as_u64().unwrap_or(0) >= 1,
        "{body}"
    );
}

#[test]
fn a_server_on_the_port_that_this_checkout_did_not_start_is_an_error_not_reused() {
    // Another program answers /health on the port (another checkout's server, the user's).
    let served = tempfile::tempdir().unwrap();
    std::fs::write(served.path().join("health"), "{\"status\":\"ok\"}").unwrap();
    let port = common::free_port();
    let mut other = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(served.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = format!("127.0.0.1:{port}");
    common::wait_until("the other server", Duration::from_secs(10), || {
        common::http_get(&addr, "/health").is_some_and(|(code, _)| code == 200)
    });
    let local = tempfile::tempdir().unwrap();
    let out = Command::new(common::repo_root().join("scripts/local-server.sh"))
        .args(["start", "--port", &port.to_string()])
        .env("GOLIVE_LOCAL", local.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let alive = other.try_wait().unwrap().is_none();
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{addr} already answers")),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "no URL for a server that is not ours"
    );
    assert!(alive, "the other server is left running");
}
