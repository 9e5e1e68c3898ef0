//! What only the serving container knows: its Python package versions and the
//! contents of the `--config FILE` the server was started with.

use std::path::Path;

use super::{Collector, Keep};
use crate::bundle_format::names;

/// Prints every installed distribution as `pip list --format json` does
/// (`[{"name", "version"}]`), without needing pip in the image.
const PACKAGES_PY: &str = "import importlib.metadata as m, json; \
print(json.dumps(sorted(({'name': d.metadata['Name'], 'version': d.version} \
for d in m.distributions() if d.metadata['Name']), key=lambda p: p['name'].lower())))";

fn with_prefix(exec: &[String], tail: &[&str]) -> Vec<String> {
    exec.iter()
        .cloned()
        .chain(tail.iter().map(|s| s.to_string()))
        .collect()
}

/// vLLM's version inside the container that `exec` runs in; whether it answered.
pub(super) async fn vllm_version(c: &mut Collector, exec: &[String], what: &str) -> bool {
    c.cmd(
        &format!("{what} vLLM version"),
        &with_prefix(
            exec,
            &["python3", "-c", "import vllm; print(vllm.__version__)"],
        ),
        names::VLLM_VERSION,
        Keep::Stdout,
    )
    .await
    .is_some()
}

/// The package versions inside the container that `exec` (`docker exec NAME`,
/// `kubectl exec POD --`) runs in: importlib.metadata, else `pip list`.
pub(super) async fn packages(c: &mut Collector, exec: &[String], what: &str) {
    let found = c
        .cmd(
            &format!("{what} Python packages"),
            &with_prefix(exec, &["python3", "-c", PACKAGES_PY]),
            names::PYTHON_PACKAGES,
            Keep::Stdout,
        )
        .await
        .is_some_and(|out| {
            crate::envparse::parse_python_packages(&String::from_utf8_lossy(&out)).is_some()
        });
    if !found {
        c.cmd(
            &format!("{what} pip list"),
            &with_prefix(exec, &["pip", "list", "--format", "json"]),
            names::PYTHON_PACKAGES,
            Keep::Stdout,
        )
        .await;
    }
}

/// Saves the `--config FILE` of the launch read so far (redacted like every raw file):
/// read inside the container with `exec cat`, or through /proc for a host process.
pub(super) async fn config_file(c: &mut Collector, exec: Option<&[String]>, pid: Option<u32>) {
    let Ok(bundle) = crate::envparse::Bundle::load(c.raw.parent().unwrap_or(&c.raw)) else {
        return;
    };
    let Some(path) = bundle
        .launch
        .as_ref()
        .and_then(|l| l.value("--config"))
        .map(String::from)
    else {
        return;
    };
    match (exec, pid) {
        (Some(exec), _) => {
            c.cmd(
                "serve --config file",
                &with_prefix(exec, &["cat", &path]),
                names::VLLM_CONFIG,
                Keep::Stdout,
            )
            .await;
        }
        (None, Some(pid)) => {
            // The process's own view of the file system: its root and working directory.
            let seen = if Path::new(&path).is_absolute() {
                format!("/proc/{pid}/root{path}")
            } else {
                format!("/proc/{pid}/cwd/{path}")
            };
            c.file("serve --config file", Path::new(&seen), names::VLLM_CONFIG);
        }
        (None, None) => {}
    }
}
