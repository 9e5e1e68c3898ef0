//! Scripted command-line tools on PATH (`docker`, `kubectl`) that answer like the real
//! CLIs, with outputs in the real formats (fixtures under tests/fixtures/env), so the
//! container and pod probes of `collect` run end to end without a daemon or a cluster.

use std::path::Path;

/// A file of tests/fixtures/env, as a path for a shell script.
pub fn env_fixture(name: &str) -> String {
    super::fixture_path("env").join(name).display().to_string()
}

/// Writes an executable `name` with `script` into `dir`.
pub fn write_exe(dir: &Path, name: &str, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `PATH` with `dir` first, so a scripted tool there is found before a real one.
pub fn path_with(dir: &Path) -> String {
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A scripted `docker`: `inspect` prints the container's inspect fixture, `image inspect`
/// the Kimi K3 CUDA 13 image, `logs` the healthy startup log on stderr (as the real CLI
/// writes a container's stderr); `exec C nvidia-smi` prints the B300 table and
/// `exec C sh ...` the image's CUDA_VERSION. The test adds the answers of its own: more
/// `exec` commands and other subcommands. Anything else fails as the real CLI does.
pub struct DockerShim {
    inspect: String,
    exec: Vec<String>,
    commands: Vec<String>,
}

impl DockerShim {
    /// `inspect`: the fixture `docker inspect CONTAINER` prints.
    pub fn new(inspect: &str) -> DockerShim {
        DockerShim {
            inspect: env_fixture(inspect),
            exec: Vec::new(),
            commands: Vec::new(),
        }
    }

    /// `docker exec C CMD ARGS...` for a CMD matching the shell pattern `cmd` runs the
    /// shell `answer`, with CMD as `$1` and its arguments from `$2`.
    pub fn exec(mut self, cmd: &str, answer: &str) -> DockerShim {
        self.exec.push(format!("      {cmd}) {answer} ;;"));
        self
    }

    /// `docker SUB ...` for a SUB matching the shell pattern `sub` runs the shell `answer`.
    pub fn command(mut self, sub: &str, answer: &str) -> DockerShim {
        self.commands.push(format!("  {sub}) {answer} ;;"));
        self
    }

    /// Writes the script as `dir/docker`; returns a `PATH` that finds it first.
    pub fn install(&self, dir: &Path) -> String {
        let script = format!(
            r#"#!/bin/sh
case "$1" in
  inspect) cat '{inspect}' ;;
  image) cat '{image}' ;;
  logs) cat '{log}' >&2 ;;
  exec)
    shift 2
    case "$1" in
      nvidia-smi) cat '{smi}' ;;
      sh) echo CUDA_VERSION=13.0.1 ;;
{exec}
      *) echo "OCI runtime exec failed: exec failed: unable to start container process: exec: \"$1\": executable file not found in \$PATH: unknown" >&2; exit 126 ;;
    esac ;;
{commands}
  *) echo "docker: '$1' is not a docker command." >&2; exit 1 ;;
esac
"#,
            inspect = self.inspect,
            image = env_fixture("docker-image-inspect_kimi-k3_cu130.json"),
            log = env_fixture("startup_ok.log"),
            smi = env_fixture("nvidia-smi_580.95.05_b300_8gpu.txt"),
            exec = self.exec.join("\n"),
            commands = self.commands.join("\n"),
        );
        write_exe(dir, "docker", &script);
        path_with(dir)
    }
}
