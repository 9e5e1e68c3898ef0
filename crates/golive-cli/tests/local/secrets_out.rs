//! No planted secret leaves golive (issue 24, item 3), one test per leak class, each
//! driving the real binary: a password in `--url` against a real server behind nginx's
//! Basic auth (reports, stdout, stderr), the URL and an API key together, triage's
//! context lines, `diff` of bundles with URL passwords, and the `load --k8s-job` Job.
//! (`collect` is pinned in env_collect.rs, the redact function's spellings in its unit
//! tests.)

use crate::common;

use serde_json::Value;

/// Runs golive; asserts the exit code and that none of `secrets` is in stdout or stderr.
fn run_clean(args: &[&str], code: i32, secrets: &[&str]) -> std::process::Output {
    let out = common::golive(args);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {text}");
    for s in secrets {
        assert!(!text.contains(s), "{s} printed by {args:?}: {text}");
    }
    out
}

#[test]
fn triage_context_lines_carry_no_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("server.log");
    std::fs::write(
        &log,
        "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.32.0\n\
         INFO 05-01 10:00:00 [utils.py:253] non-default args: {'model': 'm', 'api_key': ['sk-TRIAGE-LIST-1', 'sk-TRIAGE-LIST-2'], 'port': 8000}\n\
         INFO 05-01 10:00:00 [arg_utils.py:1] args: Namespace(api_key=['sk-TRIAGE-NS-3'], hf_token='hf_TRIAGE_NS_4', otlp_traces_endpoint='https://u:pw-TRIAGE-5@otel:4317')\n\
         DEBUG 05-01 10:00:01 [env.py:1] api_key=sk-TRIAGE-BARE-6 HTTPS_PROXY=http://proxyuser:pw-TRIAGE-7@proxy:3128\n\
         DEBUG 05-01 10:00:01 [http.py:1] headers: Authorization: Bearer TRIAGE-BEARER-8\n\
         ERROR 05-01 10:00:02 [engine.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.00 GiB is free.\n",
    )
    .unwrap();
    let secrets = [
        "sk-TRIAGE-LIST-1",
        "sk-TRIAGE-LIST-2",
        "sk-TRIAGE-NS-3",
        "hf_TRIAGE_NS_4",
        "pw-TRIAGE-5",
        "sk-TRIAGE-BARE-6",
        "pw-TRIAGE-7",
        "TRIAGE-BEARER-8",
    ];
    let path = log.to_str().unwrap();
    let text = run_clean(&["triage", path], 1, &secrets);
    let stdout = String::from_utf8_lossy(&text.stdout);
    // The cause was found and its context printed, with the secrets replaced.
    assert!(stdout.contains("CUDA out of memory"), "{stdout}");
    assert!(
        stdout.contains("'port': 8000") && stdout.contains("<redacted>"),
        "the context lines are printed, redacted: {stdout}"
    );
    assert!(stdout.contains("proxyuser:***@proxy:3128"), "{stdout}");
    let json = run_clean(&["triage", path, "--format", "json"], 1, &secrets);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        report["primary"]["context"].as_array().unwrap().len() >= 5,
        "{report:#}"
    );
}

#[test]
fn diff_shows_no_url_password() {
    let tmp = tempfile::tempdir().unwrap();
    // Bundles written by hand (or by an older golive): the secrets are in their files.
    let env = |pw: &str, host: &str| {
        format!(
            "VLLM_USE_V2_MODEL_RUNNER=1\nRAY_ADDRESS=http://ray:{pw}@{host}:8265\nVLLM_API_KEY={pw}-key\n"
        )
    };
    let cmdline = |pw: &str, host: &str| {
        format!(
            "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --enable-prefix-caching \
             --otlp-traces-endpoint https://u:{pw}@{host}:4317 --api_key {pw}-arg\n"
        )
    };
    let a = common::bundle::healthy(tmp.path(), "a");
    common::bundle::put(&a, "env.txt", &env("pw-DIFF-A1", "head-a"));
    common::bundle::put(&a, "cmdline.txt", &cmdline("pw-DIFF-A1", "otel-a"));
    let b = common::bundle::healthy(tmp.path(), "b");
    common::bundle::put(&b, "env.txt", &env("pw-DIFF-B2", "head-b"));
    common::bundle::put(&b, "cmdline.txt", &cmdline("pw-DIFF-B2", "otel-b"));
    let secrets = ["pw-DIFF-A1", "pw-DIFF-B2"];
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    // The hosts differ: changes, shown without the passwords.
    let out = run_clean(&["diff", a, b], 1, &secrets);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("env RAY_ADDRESS") && text.contains("http://ray:***@head-b:8265"),
        "{text}"
    );
    assert!(text.contains("https://u:***@otel-b:4317"), "{text}");
    run_clean(&["diff", a, b, "--format", "json"], 1, &secrets);
}

/// `golive load --k8s-job 2 --image i -- SHARD_ARGS`, checked with [`run_clean`].
fn k8s_job(shard_args: &[&str], code: i32, secrets: &[&str]) -> std::process::Output {
    let mut args = vec!["load", "--k8s-job", "2", "--image", "i", "--"];
    args.extend(shard_args);
    run_clean(&args, code, secrets)
}

/// The container of the Job `out` printed.
fn job_container(out: &std::process::Output) -> Value {
    let job: Value = serde_norway::from_slice(&out.stdout).unwrap();
    job["spec"]["template"]["spec"]["containers"][0].clone()
}

#[test]
fn k8s_job_takes_the_key_from_a_secret() {
    let key = "sk-K8S-SECRET-1";
    let url = ["--url", "http://vllm:8000", "--requests", "10"];
    for spelling in [vec!["--api-key", key], vec!["--api-key=sk-K8S-SECRET-1"]] {
        let out = k8s_job(&[&url[..], &spelling].concat(), 0, &[key]);
        let container = job_container(&out);
        let job_args = container["args"].to_string();
        assert!(
            !job_args.contains("api-key") && !job_args.contains("api_key"),
            "{job_args}"
        );
        assert!(job_args.contains("http://vllm:8000"), "{job_args}");
        let env = &container["env"][0];
        assert_eq!(env["name"], "GOLIVE_API_KEY");
        let secret = &env["valueFrom"]["secretKeyRef"];
        assert_eq!(secret["name"], golive::load::API_KEY_SECRET, "{env}");
        assert_eq!(secret["key"], golive::load::API_KEY_SECRET_KEY, "{env}");
        assert_eq!(
            secret["optional"], false,
            "a key was given: the Secret must exist"
        );
        // How to create the Secret is printed with the Job.
        let yaml = String::from_utf8_lossy(&out.stdout);
        assert!(
            yaml.contains("kubectl create secret generic golive-api-key --from-literal=api-key="),
            "{yaml}"
        );
    }
    // No key given: the Secret is optional.
    let container = job_container(&k8s_job(&url, 0, &[]));
    let env = &container["env"][0];
    assert_eq!(env["valueFrom"]["secretKeyRef"]["optional"], true, "{env}");
    // A URL with a password would be in the args: refused, without printing it.
    let out = k8s_job(&["--url", "http://u:pw-K8S-2@v:8000"], 2, &["pw-K8S-2"]);
    assert!(common::text(&out).contains("Secret golive-api-key"));
}

/// nginx asking for Basic auth (user `tester`, password `pw`) in front of `upstream`.
fn basic_auth_proxy(upstream: &str, pw: &str) -> Option<common::nginx::Nginx> {
    let port = common::free_port();
    let http = format!(
        r#"server {{ listen 127.0.0.1:{port};
  location / {{ auth_basic "golive"; auth_basic_user_file users;
    proxy_pass {upstream}; proxy_buffering off; proxy_http_version 1.1; }} }}"#
    );
    let users = format!("tester:{{PLAIN}}{pw}\n");
    common::nginx::Nginx::start(port, &http, &[("conf/users", &users), ("users", &users)])
}

#[test]
fn url_password_is_basic_auth_and_never_printed() {
    let pw = "pw-URL-SECRET-9";
    let upstream = common::local_server_url();
    let Some(nginx) = basic_auth_proxy(&upstream, pw) else {
        return;
    };
    let host = nginx.url.trim_start_matches("http://").to_string();
    let url = format!("http://tester:{pw}@{host}");
    let wrong = format!("http://tester:wrong@{host}");
    // The password is sent (nginx lets the probe through) and never printed.
    run_clean(&["probe", "--url", &url], 0, &[pw]);
    let refused = common::golive(&["probe", "--url", &wrong]);
    assert_ne!(refused.status.code(), Some(0), "{}", common::text(&refused));
    // A URL password and an API key: one Authorization header cannot carry both.
    let both = run_clean(
        &["probe", "--url", &url, "--api-key", "sk-BOTH-1"],
        2,
        &[pw, "sk-BOTH-1"],
    );
    assert!(
        common::text(&both).contains("--api-key"),
        "{}",
        common::text(&both)
    );
    // A short load run: its summary shows the URL without userinfo.
    let load = run_clean(
        &[
            "load",
            "--url",
            &url,
            "--requests",
            "2",
            "--concurrency",
            "1",
            "--max-tokens",
            "4",
            "--prompt-tokens",
            "16",
            "--no-calibrate",
        ],
        0,
        &[pw],
    );
    assert!(String::from_utf8_lossy(&load.stdout).contains(&host));
    // accept: every report file and the terminal output are free of it.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let run = common::small_local_accept(&url, &out, &[]);
    let text = common::text(&run);
    assert!(run.status.code().is_some_and(|c| c <= 1), "{text}");
    assert!(!text.contains(pw), "accept printed the password: {text}");
    let files = common::all_text(&out);
    assert!(files.contains("\"urls\""), "no report written: {files}");
    assert!(!files.contains(pw), "a report file holds the password");
    assert!(
        !files.contains("tester:"),
        "a report file holds the userinfo"
    );
    let report = common::report(&out);
    assert_eq!(report["urls"][0], format!("http://{host}"));
    // Every request with the credentials went through nginx: of those, only the wrong
    // password's was refused. (accept's access-control probes come without them, or
    // with a wrong Bearer key, and are refused as they should be.)
    let log = nginx.access_log();
    let as_tester = |l: &&str| l.contains(" - tester [");
    let refused: Vec<&str> = log
        .lines()
        .filter(as_tester)
        .filter(|l| l.contains("\" 401 "))
        .collect();
    assert_eq!(refused.len(), 1, "{log}");
    let probes = log
        .lines()
        .filter(|l| !as_tester(l) && l.contains("\" 401 "))
        .count();
    assert_eq!(probes, 4, "accept's access probes, refused by nginx: {log}");
}
