//! `docker inspect` of the container and of its image.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::*;

/// What `docker inspect` / `docker image inspect` (full JSON, `--format` lines,
/// `jq` excerpts, truncated copies) says about the image and the container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DockerInfo {
    /// Container or image id.
    pub id: Option<String>,
    /// The image reference the container was created from (`Config.Image`).
    pub image_ref: Option<String>,
    /// The image id of a container (`Image`).
    pub image_id: Option<String>,
    /// `RepoTags`: the image's `repo:tag` names.
    pub repo_tags: Vec<String>,
    /// `name@sha256:...` entries.
    pub repo_digests: Vec<String>,
    /// Container entry: `Path` then `Args`.
    pub path: Option<String>,
    /// The container entry's arguments (`Args`).
    pub args: Vec<String>,
    /// `Config.Env`, by variable name.
    pub env: BTreeMap<String, String>,
    /// The container's `State.Status` (`running`, `exited`).
    pub state: Option<String>,
    /// True when the text was not complete JSON and was read line by line.
    pub partial: bool,
}

impl DockerInfo {
    /// The `sha256:` digest of the image (from RepoDigests).
    pub fn digest(&self) -> Option<String> {
        self.repo_digests
            .iter()
            .find_map(|d| d.split_once('@').map(|(_, s)| s.to_string()))
    }
    /// The CUDA version the image was built for (`CUDA_VERSION`, else `NVIDIA_REQUIRE_CUDA`).
    pub fn image_cuda(&self) -> Option<String> {
        if let Some(v) = self.env.get("CUDA_VERSION") {
            return Some(v.clone());
        }
        let req = self.env.get("NVIDIA_REQUIRE_CUDA")?;
        REQUIRE_CUDA_RE.captures(req).map(|c| c[1].to_string())
    }
}

static REQUIRE_CUDA_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"cuda>=\s*(\d+(?:\.\d+)*)").unwrap());
static DIGEST_REF_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9][A-Za-z0-9._/:-]*@sha256:[0-9a-f]{64}").unwrap());
static JSON_STR_FIELD_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""(Id|Image|Path|Status)"\s*:\s*"([^"]*)""#).unwrap());
static QUOTED_ENV_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#""([A-Za-z_][A-Za-z0-9_]*)=([^"]*)""#).unwrap());
static SHA_ID_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|\s)(sha256:[0-9a-f]{64})").unwrap());
static TAG_IN_BRACKETS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[([A-Za-z0-9][A-Za-z0-9._/-]*:[A-Za-z0-9._-]+)\]").unwrap());

fn env_from_list(list: &[serde_json::Value]) -> BTreeMap<String, String> {
    list.iter()
        .filter_map(|v| v.as_str())
        .filter_map(|s| s.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn strings(v: Option<&serde_json::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Parses docker inspect output of a container or an image, complete or not.
pub fn parse_docker_inspect(text: &str) -> DockerInfo {
    let text = normalize(text);
    // Quoted in a markdown issue: strip "> " from every line.
    let unquoted: String = text
        .lines()
        .map(|l| {
            l.strip_prefix("> ")
                .or_else(|| l.strip_prefix('>'))
                .unwrap_or(l)
        })
        .collect::<Vec<_>>()
        .join("\n");
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(unquoted.trim()) {
        let obj = match &value {
            serde_json::Value::Array(a) if a.iter().all(|v| v.is_string()) => {
                return DockerInfo {
                    env: env_from_list(a),
                    ..Default::default()
                };
            }
            serde_json::Value::Array(a) => a.first().cloned().unwrap_or_default(),
            other => other.clone(),
        };
        let mut info = DockerInfo {
            id: obj.get("Id").and_then(|v| v.as_str()).map(String::from),
            repo_tags: strings(obj.get("RepoTags")),
            repo_digests: strings(obj.get("RepoDigests")),
            path: obj.get("Path").and_then(|v| v.as_str()).map(String::from),
            args: strings(obj.get("Args")),
            state: obj
                .pointer("/State/Status")
                .and_then(|v| v.as_str())
                .map(String::from),
            ..Default::default()
        };
        if let Some(config) = obj.get("Config") {
            info.image_ref = config
                .get("Image")
                .and_then(|v| v.as_str())
                .map(String::from);
            if let Some(env) = config.get("Env").and_then(|v| v.as_array()) {
                info.env = env_from_list(env);
            }
        }
        if info.path.is_some() || obj.get("State").is_some() {
            // A container: "Image" is the image id.
            info.image_id = obj.get("Image").and_then(|v| v.as_str()).map(String::from);
        }
        return info;
    }
    // Not JSON (truncated, `--format` output): read what is recognisable.
    let mut info = DockerInfo {
        partial: true,
        ..Default::default()
    };
    for c in JSON_STR_FIELD_RE.captures_iter(&unquoted) {
        let v = c[2].to_string();
        match &c[1] {
            "Id" if info.id.is_none() => info.id = Some(v),
            "Image" => {
                if v.starts_with("sha256:") {
                    info.image_id.get_or_insert(v);
                } else {
                    info.image_ref.get_or_insert(v);
                }
            }
            "Path" if info.path.is_none() => info.path = Some(v),
            "Status" if info.state.is_none() => info.state = Some(v),
            _ => {}
        }
    }
    for m in DIGEST_REF_RE.find_iter(&unquoted) {
        let d = m.as_str().to_string();
        if !info.repo_digests.contains(&d) {
            info.repo_digests.push(d);
        }
    }
    // RepoTags: a JSON list block, or `[name:tag]` in a --format line.
    if let Some(start) = unquoted.find("\"RepoTags\"") {
        let block = &unquoted[start..];
        let end = block.find(']').unwrap_or(block.len());
        for q in block[..end].split('"').skip(3).step_by(2) {
            if q.contains(':') && !q.contains("sha256") {
                info.repo_tags.push(q.to_string());
            }
        }
    }
    for c in TAG_IN_BRACKETS_RE.captures_iter(&unquoted) {
        if !info.repo_tags.contains(&c[1].to_string()) {
            info.repo_tags.push(c[1].to_string());
        }
    }
    if info.id.is_none() {
        info.id = SHA_ID_RE.captures(&unquoted).map(|c| c[1].to_string());
    }
    // Args list of a container (complete lines only).
    if let Some(start) = unquoted.find("\"Args\"") {
        let block = &unquoted[start..];
        if let Some(end) = block.find(']') {
            info.args = block[..end]
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let l = l.trim().trim_end_matches(',');
                    l.strip_prefix('"')
                        .and_then(|l| l.strip_suffix('"'))
                        .map(String::from)
                })
                .collect();
        }
    }
    if let Some(start) = unquoted.find("\"Env\"") {
        for c in QUOTED_ENV_RE.captures_iter(&unquoted[start..]) {
            info.env.insert(c[1].to_string(), c[2].to_string());
        }
    }
    info
}
