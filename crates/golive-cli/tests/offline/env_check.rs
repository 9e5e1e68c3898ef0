//! `golive check` and `golive diff` on hand-assembled bundles (raw files written in the
//! real formats under tests/fixtures/env): the serving flags against a profile (built-in,
//! TOML file or a recipe), and the command line's exit codes and JSON.

use crate::common;

use std::process::Command;

use golive::check::{check_bundles, CheckReport};
use golive::report::Status;

use common::bundle::{evidence, fixture, healthy, put, status};

#[test]
fn missing_cache_flag_is_the_cache_direction() {
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    put(
        &b,
        "cmdline.txt",
        "fixture:cmdline_kimi-k3_tp8_no-cache-flag.txt",
    );
    let r = check_bundles(std::slice::from_ref(&b), Some("kimi-k3")).unwrap();
    assert_eq!(status(&r, "prefix_caching_flag"), Status::Fail);
    assert!(evidence(&r, "prefix_caching_flag").contains(
        "--enable-prefix-caching required by kimi-k3 but not in the running command line"
    ));
    assert!(
        r.decision
            .starts_with("cache flag, prefix identity and retention"),
        "{}",
        r.decision
    );
    // The generic profile does not require the flag.
    let g = check_bundles(&[b], None).unwrap();
    assert_eq!(status(&g, "prefix_caching_flag"), Status::Pass);
}

#[test]
fn recipe_file_is_a_profile() {
    let path = common::fixture_path("env/recipe_example-moe.yaml");
    let p = golive::profile::Profile::load_recipe(&path).unwrap();
    assert_eq!(p.name, "example-moe");
    assert_eq!(
        p.image.official,
        vec!["vllm/vllm-openai:example-moe".to_string()]
    );
    assert_eq!(p.image.cuda_major, Some(13));
    assert_eq!(p.driver.min.as_deref(), Some("590"));
    assert_eq!(p.vllm.min_version.as_deref(), Some("0.28.0"));
    assert_eq!(p.gpus.min_count, Some(4));
    assert_eq!(
        p.gpus.classes,
        vec!["B300".to_string()],
        "verified hardware"
    );
    assert_eq!(p.gpus.min_by_strategy["multi_node_dep"], 16);
    assert_eq!(p.flags.required, vec!["--trust-remote-code".to_string()]);
    assert_eq!(
        p.flags.required_on["blackwell"],
        vec!["--enable-prefix-caching".to_string()]
    );
    assert_eq!(p.flags.tool_call_parser.as_deref(), Some("example_v1"));
    assert_eq!(p.transport.rdma_all2all, "deepep_v2");
    assert_eq!(p.transport.nvlink_all2all, "flashinfer_nvlink_one_sided");
    assert_eq!(p.transport.rdma_env["UCX_TLS"], "rc,cuda_copy");
    assert_eq!(p.cache.max_context, Some(262144));

    // Judged against the recipe, the Kimi node is the wrong image, driver, vLLM and parser.
    let tmp = tempfile::tempdir().unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let out = Command::new(common::golive_bin())
        .args([
            "check",
            b.to_str().unwrap(),
            "--recipe",
            path.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r: CheckReport = serde_json::from_slice(&out.stdout).unwrap();
    for id in [
        "official_image",
        "host_driver",
        "vllm_version",
        "parsers",
        "prefix_caching_flag",
    ] {
        assert_eq!(status(&r, id), Status::Fail, "{id}: {}", evidence(&r, id));
    }
    assert!(evidence(&r, "prefix_caching_flag")
        .contains("--max-model-len 1048576 exceeds the model's context 262144"));
}

#[test]
fn cli_exit_codes_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let good = healthy(tmp.path(), "gpu-a");
    let run = common::golive;
    let out = run(&[
        "check",
        good.to_str().unwrap(),
        "--profile",
        "kimi-k3",
        "--format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["decision"].as_str().unwrap().contains("acceptance run"));
    let ids: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    for id in [
        "official_image",
        "host_driver",
        "cuda_layers",
        "gpus_visible",
        "parallelism",
        "failure_phase",
        "prefix_caching_flag",
        "communication_path",
        "reproducible",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    assert!(v["items"][0]["evidence"].is_string() && v["items"][0]["status"] == "pass");

    // Text: the repair direction comes first.
    put(
        &good,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_570.133.20_b300_8gpu.txt",
    );
    let out = run(&["check", good.to_str().unwrap(), "--profile", "kimi-k3"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("decision: host or image first"), "{text}");
    assert!(!text.contains("sk-live-9f8e7d6c5b4a"));

    assert_eq!(
        run(&["check", "/nonexistent/bundle"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(&["check", good.to_str().unwrap(), "--profile", "no-such"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(run(&["check"]).status.code(), Some(2));
}

#[test]
fn diff_shows_what_matters_only() {
    let tmp = tempfile::tempdir().unwrap();
    let a = healthy(tmp.path(), "gpu-a-20261130T100000Z");
    let b = healthy(tmp.path(), "gpu-a-20261130T120000Z");
    // B: other driver, another max-model-len, no peermem, one env change; also
    // different memory in use, PIDs and start time, which do not matter.
    put(
        &b,
        "nvidia-smi.txt",
        "fixture:nvidia-smi_590.48.01_b300_8gpu_idle.txt",
    );
    let cmd = fixture("cmdline_kimi-k3_tp8_prefix-caching.txt")
        .replace("--max-model-len 1048576", "--max-model-len 524288");
    put(&b, "cmdline.txt", &cmd);
    put(&b, "lsmod.txt", "fixture:lsmod_mlx5_without_peermem.txt");
    put(
        &b,
        "env.txt",
        "VLLM_USE_V2_MODEL_RUNNER=1\nVLLM_PREFIX_CACHE_RETENTION_INTERVAL=512\n",
    );
    put(
        &b,
        "startup.log",
        &fixture("startup_ok.log")
            .replace("pid=4021", "pid=9977")
            .replace("11-30 10:", "11-30 12:"),
    );

    let ra = golive::envparse::Bundle::load(&a).unwrap();
    let rb = golive::envparse::Bundle::load(&b).unwrap();
    let d = golive::diff::diff_bundles(&ra, &rb);
    let kinds: Vec<String> = d
        .changes
        .iter()
        .map(|c| format!("{} {}", c.kind, c.name).trim().to_string())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "driver",
            "arg --max-model-len",
            "env VLLM_PREFIX_CACHE_RETENTION_INTERVAL",
            "module nvidia_peermem",
        ],
        "{d:#?}"
    );
    assert_eq!(d.changes[0].a.as_deref(), Some("580.95.05"));
    assert_eq!(d.changes[0].b.as_deref(), Some("590.48.01"));

    let out = Command::new(common::golive_bin())
        .args(["diff", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("driver: 580.95.05 -> 590.48.01"), "{text}");
    assert!(!text.contains("sk-live"), "{text}");
    let same = Command::new(common::golive_bin())
        .args([
            "diff",
            a.to_str().unwrap(),
            a.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(v["changes"].as_array().unwrap().len(), 0);
}

#[test]
fn profile_file_in_toml() {
    let tmp = tempfile::tempdir().unwrap();
    let prof = tmp.path().join("site.toml");
    std::fs::write(
        &prof,
        "name = \"site\"\n[driver]\nmin = \"590.48.01\"\n[flags]\nrequired = [\"--enable-chunked-prefill\"]\n",
    )
    .unwrap();
    let b = healthy(tmp.path(), "gpu-a");
    let r = check_bundles(&[b], Some(prof.to_str().unwrap())).unwrap();
    assert_eq!(r.profile, "site");
    assert_eq!(status(&r, "host_driver"), Status::Fail);
    assert!(
        evidence(&r, "prefix_caching_flag").contains("--enable-chunked-prefill required by site")
    );
    std::fs::write(&prof, "name = [broken").unwrap();
    assert!(golive::profile::Profile::load(prof.to_str().unwrap()).is_err());
}
