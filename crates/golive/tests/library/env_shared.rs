//! Every real command output in ../shared/env goes through the parsers; the key
//! facts of its INDEX.tsv are asserted. Skips with a message when ../shared is absent
//! (under `CI=true` that fails).

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use golive::envparse;

/// `../shared/env` beside the repository (see [`common::shared_dir`]).
fn env_dir() -> Option<PathBuf> {
    common::shared_file("env/INDEX.tsv").map(|index| index.parent().unwrap().to_path_buf())
}

/// file → (kind, key facts) from INDEX.tsv.
fn index(dir: &std::path::Path) -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(dir.join("INDEX.tsv")).unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            (cols.len() >= 3).then(|| {
                (
                    cols[0].to_string(),
                    (cols[1].to_string(), cols[2].to_string()),
                )
            })
        })
        .collect()
}

/// `key=value` facts ("driver=580.95.05; cuda_shown=13.0; gpu=...; count=8").
fn facts(key_facts: &str) -> BTreeMap<String, String> {
    key_facts
        .split(';')
        .filter_map(|f| f.trim().split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn read(dir: &std::path::Path, f: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(dir.join(f)).unwrap()).into_owned()
}

#[test]
fn every_file_is_indexed_and_parsed() {
    let Some(dir) = env_dir() else { return };
    let idx = index(&dir);
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name == "INDEX.tsv" {
            continue;
        }
        let (kind, _) = idx
            .get(&name)
            .unwrap_or_else(|| panic!("{name} has no INDEX.tsv row"));
        let text = read(&dir, &name);
        // Each kind's parser finds something in each of its files.
        match kind.as_str() {
            "nvidia-smi" => assert!(envparse::parse_nvidia_smi(&text).driver.is_some(), "{name}"),
            "nvidia-smi-query" => assert!(!envparse::parse_query_csv(&text).is_empty(), "{name}"),
            "nvidia-smi-topo" => assert!(envparse::parse_topology(&text).gpu_count() > 0, "{name}"),
            "docker-inspect" => {
                let _ = envparse::parse_docker_inspect(&text);
            }
            "vllm-cmdline" => assert!(
                envparse::parse_launch(&text).is_some(),
                "{name}: no vLLM launch found"
            ),
            "lsmod" => assert!(!envparse::parse_modules(&text).listed.is_empty(), "{name}"),
            "ibv_devinfo" => assert!(!envparse::parse_ibv_devinfo(&text).is_empty(), "{name}"),
            "nvidia-container-error" => {
                assert!(
                    !envparse::parse_container_cuda_errors(&text).is_empty(),
                    "{name}"
                )
            }
            other => panic!("{name}: unknown kind {other}"),
        }
        seen += 1;
    }
    assert!(seen >= 60, "only {seen} files");
}

#[test]
fn nvidia_smi_tables_match_index() {
    let Some(dir) = env_dir() else { return };
    let mut n = 0;
    for (file, (kind, kf)) in index(&dir) {
        if kind != "nvidia-smi" {
            continue;
        }
        let f = facts(&kf);
        let t = envparse::parse_nvidia_smi(&read(&dir, &file));
        assert_eq!(
            t.driver.as_deref(),
            f.get("driver").map(String::as_str),
            "{file}: driver"
        );
        assert_eq!(
            t.cuda_shown.as_deref(),
            f.get("cuda_shown").map(String::as_str),
            "{file}: CUDA header"
        );
        let count: usize = f["count"].parse().unwrap();
        assert_eq!(t.gpus.len(), count, "{file}: GPU count");
        assert_eq!(t.gpus[0].name, f["gpu"], "{file}: GPU name");
        if let Some(smi) = f.get("nvidia_smi") {
            // Userspace/kernel skew: the tool version differs, the driver is the Driver Version.
            assert_eq!(t.smi_version.as_deref(), Some(smi.as_str()), "{file}");
            assert_ne!(t.smi_version, t.driver, "{file}");
        }
        n += 1;
    }
    assert!(n >= 20, "{n} nvidia-smi files");
}

#[test]
fn forward_compat_header_is_recognised() {
    let Some(dir) = env_dir() else { return };
    let t = envparse::parse_nvidia_smi(&read(
        &dir,
        "nvidia-smi_535.129.03_cuda12.3-compat_l4_1gpu.txt",
    ));
    let cuda = &golive::profile::Profile::generic().cuda;
    assert_eq!(cuda.header_exceeds_native(&t), Some(((12, 3), (12, 2))));
    let t =
        envparse::parse_nvidia_smi(&read(&dir, "nvidia-smi_535.129.03_a100-pcie-40gb_1gpu.txt"));
    assert_eq!(cuda.header_exceeds_native(&t), None);
}

#[test]
fn query_csvs_match_index() {
    let Some(dir) = env_dir() else { return };
    for (file, (kind, kf)) in index(&dir) {
        if kind != "nvidia-smi-query" {
            continue;
        }
        let f = facts(&kf);
        let rows = envparse::parse_query_csv(&read(&dir, &file));
        let count: usize = f["count"]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(rows.len(), count, "{file}: rows");
        let driver = f["driver"].split_whitespace().next().unwrap();
        assert!(
            rows.iter()
                .all(|r| r.driver_version.as_deref() == Some(driver)),
            "{file}: driver"
        );
        let gpu = f["gpu"].split(" (").next().unwrap();
        assert!(
            rows[0].name.as_deref().unwrap().contains(gpu),
            "{file}: {gpu} vs {:?}",
            rows[0].name
        );
        assert!(
            rows[0].memory_total_mib.is_some() || !kf.contains("memory.total"),
            "{file}: memory"
        );
    }
}

#[test]
fn topologies_match_index() {
    let Some(dir) = env_dir() else { return };
    // file → (GPUs, NICs, NVLink label, GPUs without NVLink, GPUs with a PIX/PXB NIC)
    type Expect<'a> = (
        &'a str,
        usize,
        usize,
        Option<&'a str>,
        &'a [usize],
        Option<usize>,
    );
    let expected: &[Expect] = &[
        (
            "nvidia-smi-topo_3gpu_nv4-node_2x-mlx5.txt",
            3,
            2,
            Some("NV4"),
            &[2],
            Some(0),
        ),
        (
            "nvidia-smi-topo_a100-sxm4-40gb_8gpu_nv12_8x-mlx5-phb.txt",
            8,
            8,
            Some("NV12"),
            &[],
            Some(0),
        ),
        (
            "nvidia-smi-topo_b200_8gpu_gpu2-no-nvlink_12nic_PARTIAL-noheader.txt",
            8,
            12,
            Some("NV18"),
            &[2],
            None,
        ),
        (
            "nvidia-smi-topo_b200_8gpu_nv18_13nic_header-runtogether_PARTIAL.txt",
            8,
            13,
            Some("NV18"),
            &[],
            None,
        ),
        (
            "nvidia-smi-topo_b200_8gpu_nv18_8nic_tabs_collect-env_PARTIAL.txt",
            8,
            8,
            Some("NV18"),
            &[],
            Some(8),
        ),
        (
            "nvidia-smi-topo_b200_8gpu_nv18_9nic_PARTIAL.txt",
            8,
            9,
            Some("NV18"),
            &[],
            Some(8),
        ),
        (
            "nvidia-smi-topo_gb200_4gpu_nv18_4nic_gpu-numa-id_PARTIAL.txt",
            4,
            4,
            Some("NV18"),
            &[],
            Some(0),
        ),
        (
            "nvidia-smi-topo_h100-sxm5_8gpu_nv18_1x-mlx5-sys_indented.txt",
            8,
            1,
            Some("NV18"),
            &[],
            Some(0),
        ),
        (
            "nvidia-smi-topo_h100_8gpu_nv18_8x-mlx5-pix-node.txt",
            8,
            8,
            Some("NV18"),
            &[],
            Some(8),
        ),
        (
            "nvidia-smi-topo_h200_8gpu_nv18_10x-mlx5_nano4.txt",
            8,
            10,
            Some("NV18"),
            &[],
            Some(8),
        ),
        (
            "nvidia-smi-topo_h20_8gpu_nv18_5nic-ibp-rocep-names.txt",
            8,
            5,
            Some("NV18"),
            &[],
            Some(4),
        ),
    ];
    let idx = index(&dir);
    let topo_files = idx.values().filter(|(k, _)| k == "nvidia-smi-topo").count();
    assert_eq!(
        topo_files,
        expected.len(),
        "every topology file has an expectation"
    );
    for (file, gpus, nics, nv, without, close) in expected {
        let (_, kf) = &idx[*file];
        // The expectations restate INDEX.tsv: its text names the same counts.
        assert!(
            kf.contains(&format!("{gpus}")) && kf.contains(&format!("{nics}")),
            "{file}: {kf}"
        );
        let t = envparse::parse_topology(&read(&dir, file));
        assert_eq!(t.gpu_count(), *gpus, "{file}: GPUs");
        assert_eq!(t.nics.len(), *nics, "{file}: NICs");
        assert_eq!(t.nvlink_label().as_deref(), *nv, "{file}: NVLink");
        assert_eq!(
            t.gpus_without_nvlink(),
            without.to_vec(),
            "{file}: without NVLink"
        );
        if let Some(c) = close {
            assert_eq!(t.gpus_with_close_nic(), *c, "{file}: GPUs with PIX/PXB NIC");
        }
        assert_eq!(
            t.partial,
            file.contains("noheader")
                || file.contains("13nic")
                || file.contains("8nic_tabs")
                || file.contains("9nic"),
            "{file}: partial"
        );
    }
    let h20 = envparse::parse_topology(&read(
        &dir,
        "nvidia-smi-topo_h20_8gpu_nv18_5nic-ibp-rocep-names.txt",
    ));
    assert_eq!(h20.nics[4], "rocep32s0f0");
}

#[test]
fn docker_inspects_match_index() {
    let Some(dir) = env_dir() else { return };
    let c = envparse::parse_docker_inspect(&read(
        &dir,
        "docker-inspect_vllm-container_v0.9.1_path-args_blockquoted_PARTIAL.txt",
    ));
    assert_eq!(c.path.as_deref(), Some("python3"));
    assert_eq!(c.state.as_deref(), Some("running"));
    assert!(c
        .image_id
        .as_deref()
        .unwrap()
        .starts_with("sha256:05775a19"));
    let mut argv = vec![c.path.clone().unwrap()];
    argv.extend(c.args.clone());
    let l = envparse::launch_from_argv(&argv).unwrap();
    assert_eq!(l.tensor_parallel(), 2);
    assert_eq!(
        l.model.as_deref(),
        Some("deepseek-ai/DeepSeek-R1-Distill-Llama-8B")
    );

    let i = envparse::parse_docker_inspect(&read(
        &dir,
        "docker-inspect_vllm-openai-latest_2024-10_image_PARTIAL.json",
    ));
    assert!(i.partial);
    assert!(i.id.as_deref().unwrap().starts_with("sha256:9de570df"));
    assert_eq!(i.repo_tags, vec!["vllm/vllm-openai:latest".to_string()]);
    assert!(i.digest().unwrap().starts_with("sha256:facbbd4a"));

    let f = envparse::parse_docker_inspect(&read(
        &dir,
        "docker-inspect_vllm-openai-v0.30.0_format-line.txt",
    ));
    assert_eq!(f.repo_tags, vec!["vllm/vllm-openai:v0.30.0".to_string()]);
    assert!(f.digest().unwrap().starts_with("sha256:8a69ffad"));
    assert!(f.id.as_deref().unwrap().starts_with("sha256:8a69ffad"));

    let e = envparse::parse_docker_inspect(&read(
        &dir,
        "docker-inspect_vllm-openai-v0.8.5_config-env-jq.json",
    ));
    assert_eq!(e.env.len(), 41);
    assert_eq!(e.image_cuda().as_deref(), Some("12.4.0"));
    assert_eq!(e.env["NCCL_VERSION"], "2.20.5-1");

    let o = envparse::parse_docker_inspect(&read(
        &dir,
        "docker-inspect_vllm-omni-latest_format-entrypoint-cmd-null.txt",
    ));
    assert!(o.digest().is_none() && o.args.is_empty());
}

#[test]
fn launch_commands_match_index() {
    let Some(dir) = env_dir() else { return };
    let l = |f: &str| envparse::parse_launch(&read(&dir, f)).unwrap_or_else(|| panic!("{f}"));

    let a = l("vllm-cmdline_api-server_tp16_ray_2node-h100_dsr1.sh");
    assert!(a.program.contains("vllm.entrypoints.openai.api_server"));
    assert_eq!(a.tensor_parallel(), 16);
    assert_eq!(a.env["CUDA_VISIBLE_DEVICES"].split(',').count(), 16);
    assert!(a.multi_node_hint().unwrap().contains("ray"));

    let b = l("vllm-cmdline_ascend_dp2-tp16-ep_no-prefix-caching_node0.sh");
    assert_eq!(
        (
            b.data_parallel(),
            b.data_parallel_local(),
            b.tensor_parallel()
        ),
        (2, 1, 16)
    );
    assert_eq!(b.prefix_caching(), Some(false));
    assert!(b.has("--enable-expert-parallel"));
    assert_eq!(b.env["GLOO_SOCKET_IFNAME"], "enp23s0f3");

    let c = l("vllm-cmdline_compose_2x8-h20_ray-head_nccl-ib-env_prefix-caching_PARTIAL.yaml");
    assert_eq!(c.image.as_deref(), Some("vllm/vllm-openai:latest"));
    assert_eq!(c.prefix_caching(), Some(true));
    assert_eq!(c.env["NCCL_IB_HCA"], "ibp1");
    assert_eq!(
        c.env["NCCL_NET_GDR_LEVEL"], "SYS",
        "the later of the two values wins"
    );

    let d = l("vllm-cmdline_docker-run_tp2_2x4090_nccl-p2p-disable.sh");
    assert_eq!(d.image.as_deref(), Some("vllm/vllm-openai:latest"));
    assert_eq!(d.tensor_parallel(), 2);
    assert_eq!(d.env["NCCL_P2P_DISABLE"], "1");
    assert!(d.has("--enforce-eager"));

    let e = l("vllm-cmdline_docker-run_tp8_8xh100_llama405b-fp8.sh");
    assert_eq!(e.tensor_parallel(), 8);
    assert_eq!(e.value("--max-num-seqs"), Some("16"));
    assert_eq!(e.value("--enable-chunked-prefill"), Some("True"));
    assert!(e.env.contains_key("HUGGING_FACE_HUB_TOKEN"));
    assert!(
        !e.args
            .iter()
            .any(|a| a.value.as_deref().is_some_and(|v| v.contains("logs.vllm"))),
        "redirect target is not an argument"
    );

    let f = l("vllm-cmdline_gb200-4gpu_dp4-ep_nvshmem-ucx-env_PARTIAL.sh");
    assert_eq!((f.data_parallel(), f.data_parallel_local()), (4, 4));
    assert_eq!(f.env["UCX_NET_DEVICES"], "mlx5_2:1");
    assert_eq!(f.env["NVSHMEM_REMOTE_TRANSPORT"], "ibdevx");

    let g = l("vllm-cmdline_hip-8card_pp2-pcp4-ep_deepep-ht_prefix-caching.sh");
    assert!(
        g.program.contains("vllm.entrypoints.cli.main serve"),
        "{}",
        g.program
    );
    assert_eq!((g.tensor_parallel(), g.pipeline_parallel()), (1, 2));
    assert_eq!(
        g.all2all_backend().as_deref(),
        Some("deepep_high_throughput")
    );
    assert_eq!(g.prefix_caching(), Some(true));
    assert_eq!(g.env["VLLM_USE_V2_MODEL_RUNNER"], "1");
    assert_eq!(
        g.model.as_deref(),
        Some("/models/Hy4-preview-Channel-FP8-w8a8-v2")
    );

    let h = l("vllm-cmdline_kimi-k2_dp16-ep_node0.sh");
    assert_eq!((h.data_parallel(), h.data_parallel_local()), (16, 8));
    assert!(!h.has("--headless"));
    let i = l("vllm-cmdline_kimi-k2_dp16-ep_node1-headless.sh");
    assert!(i.has("--headless"));
    assert_eq!(i.value("--data-parallel-start-rank"), Some("8"));

    let j = l("vllm-cmdline_multinode-dp16-ep_deepep-ht_test-sh_PARTIAL.sh");
    assert_eq!(
        (
            j.tensor_parallel(),
            j.data_parallel(),
            j.data_parallel_local()
        ),
        (1, 16, 8)
    );
    assert_eq!(
        j.all2all_backend().as_deref(),
        Some("deepep_high_throughput")
    );
    assert_eq!(j.env["VLLM_USE_DEEP_GEMM"], "1");

    let k = l("vllm-cmdline_serve_tp32_nccl-env_prefix-caching_dsr1.sh");
    assert_eq!((k.tensor_parallel(), k.pipeline_parallel()), (32, 1));
    assert_eq!(k.prefix_caching(), Some(true));
    assert_eq!(k.env["NCCL_IB_HCA"], "mlx5");
    assert_eq!(k.value("--max-num-batched-tokens"), Some("32768"));

    let m = l("vllm-cmdline_serve_tp4_no-prefix-caching_fuse-allreduce.sh");
    assert_eq!(m.tensor_parallel(), 4);
    assert_eq!(m.prefix_caching(), Some(false));
    assert!(m.has("--compilation-config.pass_config.fuse_allreduce_rms"));

    let n = l("vllm-cmdline_serve_tp8_expert-parallel_dsv2-lite.sh");
    assert_eq!(n.tensor_parallel(), 8);
    assert_eq!(n.prefix_caching(), None);
    assert_eq!(
        n.model.as_deref(),
        Some("deepseek-ai/DeepSeek-Coder-V2-Lite-Instruct")
    );
}

#[test]
fn modules_and_hcas_match_index() {
    let Some(dir) = env_dir() else { return };
    let m = |f: &str| envparse::parse_modules(&read(&dir, f));
    assert!(m("lsmod_grep-nvidia_peermem_ib-core.txt").is_loaded("nvidia_peermem"));
    let ofed = m("lsmod_mlx5_ofed-4.5-sles12_no-nvidia.txt");
    assert!(
        !ofed.is_loaded("nvidia") && !ofed.is_loaded("nvidia_peermem") && ofed.is_loaded("mlx5_ib")
    );
    assert!(m("lsmod_nvid_peermem-loaded_550.90.07.txt").is_loaded("nvidia_peermem"));
    let cu13 = m("lsmod_nvidia-mlx5_peermem-loaded_cuda13.1-host.txt");
    assert!(
        cu13.is_loaded("nvidia_peermem")
            && cu13.is_loaded("mlx5_core")
            && cu13.is_loaded("mlx5_fwctl")
    );
    let referenced = m("lsmod_rdma-ib-mlx_peermem-referenced.txt");
    assert!(!referenced.listed.contains("nvidia_peermem"));
    assert!(
        referenced.is_loaded("nvidia_peermem"),
        "a module using ib_uverbs is loaded"
    );

    let h = |f: &str| envparse::parse_ibv_devinfo(&read(&dir, f));
    let azure = h("ibv_devinfo_azure-ndh200_8x-mlx5_ib-cx7_plus_mlx5_an0.txt");
    assert_eq!(azure.len(), 9);
    assert_eq!(azure.iter().filter(|x| x.name.starts_with("mlx5_ib") && x.vendor_part_id.as_deref() == Some("4126")).count(), 8);
    assert!(azure.iter().all(|x| x.has_active_port()));
    let an0 = azure.iter().find(|x| x.name == "mlx5_an0").unwrap();
    assert_eq!(an0.ports[0].link_layer.as_deref(), Some("Ethernet"));
    let head = h("ibv_devinfo_head_h100-node_mlx5_0_cx6-4123.txt");
    assert_eq!(
        (
            head.len(),
            head[0].fw_ver.as_deref(),
            head[0].has_active_port()
        ),
        (1, Some("20.41.1000"), false)
    );
    let mlx4 = h("ibv_devinfo_mlx4_0_connectx3_ib.txt");
    assert_eq!(
        (mlx4[0].name.as_str(), mlx4[0].vendor_part_id.as_deref()),
        ("mlx4_0", Some("4099"))
    );
    assert!(mlx4[0].has_active_port());
    let ind = h("ibv_devinfo_mlx5_0_cx6-4123_ib_first-line-indented.txt");
    assert_eq!(
        (ind[0].name.as_str(), ind[0].fw_ver.as_deref()),
        ("mlx5_0", Some("20.35.1012"))
    );
    let roce = h("ibv_devinfo_mlx5_0_cx7-4126_roce-ethernet_masked-guid.txt");
    assert_eq!(roce[0].ports[0].link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(roce[0].ports[0].active_mtu.as_deref(), Some("1024 (3)"));
}

#[test]
fn container_cli_errors_match_index() {
    let Some(dir) = env_dir() else { return };
    for (file, (kind, _)) in index(&dir) {
        if kind != "nvidia-container-error" {
            continue;
        }
        // The file name carries the required CUDA: "..._cuda12.8_...".
        let want = file
            .split("_cuda")
            .nth(1)
            .unwrap()
            .split('_')
            .next()
            .unwrap();
        let errs = envparse::parse_container_cuda_errors(&read(&dir, &file));
        assert!(
            errs.iter().all(|e| e.required_cuda == want),
            "{file}: {errs:?}"
        );
        let n = if file.contains("vastai") { 2 } else { 1 };
        assert_eq!(errs.len(), n, "{file}");
    }
}

#[test]
fn whole_server_logs_as_startup_logs() {
    // The 20 real vLLM server logs (ANSI colours, \r progress bars, CRLF) as the
    // startup.log of a bundle: the version banner is read and check never errors.
    let Some(index) = common::shared_file("long/INDEX.tsv") else {
        return;
    };
    let long = index.parent().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut with_banner = 0;
    let banner = regex::Regex::new(r"vLLM API server version (\d+\.\d+\.\d+\S*)").unwrap();
    for entry in std::fs::read_dir(long).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let dir = tmp.path().join(path.file_stem().unwrap());
        std::fs::create_dir_all(dir.join("raw")).unwrap();
        std::fs::write(dir.join("raw/startup.log"), &text).unwrap();
        let r = golive::check::check_bundles(std::slice::from_ref(&dir), None).unwrap();
        assert!(r.item("failure_phase").is_some());
        if let Some(c) = banner.captures(&text) {
            let b = golive::envparse::Bundle::load(&dir).unwrap();
            assert_eq!(
                b.vllm_version().map(|v| v.0).as_deref(),
                Some(&c[1]),
                "{}",
                path.display()
            );
            with_banner += 1;
        }
    }
    assert!(with_banner >= 8, "{with_banner} logs with a version banner");
}
