//! Hand-assembled bundles for `golive check` and `diff`: raw files in the real formats
//! (tests/fixtures/env) or literal text, in the layout `collect` writes.

use std::path::{Path, PathBuf};

use golive::check::CheckReport;
use golive::report::Status;

/// The text of a file of tests/fixtures/env.
pub fn fixture(name: &str) -> String {
    let p = super::fixture_path("env").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A bundle directory `<root>/<name>/raw/...` with `files` (see [`put`]).
pub fn bundle(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("raw")).unwrap();
    for (raw, src) in files {
        put(&dir, raw, src);
    }
    dir
}

/// Writes `raw/<raw>` of the bundle `dir`: `src` starting with `fixture:` names a fixture
/// file, else it is the literal text.
pub fn put(dir: &Path, raw: &str, src: &str) {
    let text = match src.strip_prefix("fixture:") {
        Some(f) => fixture(f),
        None => src.to_string(),
    };
    std::fs::write(dir.join("raw").join(raw), text).unwrap();
}

/// A complete, healthy Kimi K3 node (8x B300, R580, official image, cache flag).
pub fn healthy(root: &Path, name: &str) -> PathBuf {
    bundle(
        root,
        name,
        &[
            (
                "nvidia-smi.txt",
                "fixture:nvidia-smi_580.95.05_b300_8gpu.txt",
            ),
            (
                "nvidia-smi-topo.txt",
                "fixture:nvidia-smi-topo_b300_8gpu_nv18_no-nic.txt",
            ),
            (
                "docker-image-inspect.json",
                "fixture:docker-image-inspect_kimi-k3_cu130.json",
            ),
            (
                "cmdline.txt",
                "fixture:cmdline_kimi-k3_tp8_prefix-caching.txt",
            ),
            ("startup.log", "fixture:startup_ok.log"),
            ("lsmod.txt", "fixture:lsmod_mlx5_with_peermem.txt"),
            (
                "env.txt",
                "VLLM_USE_V2_MODEL_RUNNER=1\nVLLM_PREFIX_CACHE_RETENTION_INTERVAL=0\n",
            ),
        ],
    )
}

pub fn status(r: &CheckReport, id: &str) -> Status {
    r.item(id)
        .unwrap_or_else(|| panic!("no item {id}: {r:#?}"))
        .status
}

pub fn evidence(r: &CheckReport, id: &str) -> String {
    r.item(id).unwrap().evidence.clone()
}
