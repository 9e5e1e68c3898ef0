//! Python package versions inside the serving container, from `pip list --format json`
//! or golive's importlib.metadata probe (the same `[{"name", "version"}]` shape).

use std::collections::BTreeMap;

/// The packages K3-class failures depend on: (label, how the distribution is named).
pub const KEY_PACKAGES: &[(&str, &[&str])] = &[
    ("vllm", &["vllm"]),
    ("torch", &["torch"]),
    ("nccl", &["nvidia-nccl-cu*"]),
    ("nvshmem", &["nvidia-nvshmem-cu*", "nvshmem"]),
    ("deep_ep", &["deep-ep"]),
    ("flashinfer", &["flashinfer-python", "flashinfer"]),
    ("xgrammar", &["xgrammar"]),
];

/// PEP 503 name normalisation: lower case, runs of `-`, `_`, `.` as one `-`.
pub fn normalize_package_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for ch in name.trim().chars() {
        if matches!(ch, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(ch.to_ascii_lowercase());
        }
    }
    out
}

/// Normalised distribution name → version; `None` when the text is not such a list.
pub fn parse_python_packages(text: &str) -> Option<BTreeMap<String, String>> {
    let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let list = v.as_array()?;
    let map: BTreeMap<String, String> = list
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?;
            let version = p.get("version")?.as_str()?;
            Some((normalize_package_name(name), version.trim().to_string()))
        })
        .collect();
    (!map.is_empty() || list.is_empty()).then_some(map)
}

/// The distribution that stands for `label` (a key package label, or a plain
/// distribution name): its name and version.
pub fn find_package<'a>(
    packages: &'a BTreeMap<String, String>,
    label: &str,
) -> Option<(&'a str, &'a str)> {
    let patterns: Vec<String> = KEY_PACKAGES
        .iter()
        .find(|(l, _)| normalize_package_name(l) == normalize_package_name(label))
        .map(|(_, p)| p.iter().map(|s| s.to_string()).collect())
        .unwrap_or_else(|| vec![normalize_package_name(label)]);
    patterns.iter().find_map(|pat| {
        packages
            .iter()
            .find(|(name, _)| match pat.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => *name == pat,
            })
            .map(|(n, v)| (n.as_str(), v.as_str()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_list_json_and_key_names() {
        let p = parse_python_packages(
            r#"[{"name": "vllm", "version": "0.27.1"}, {"name": "nvidia-nccl-cu13", "version": "2.28.3"},
                {"name": "deep_ep", "version": "1.2.1+cu130"}, {"name": "flashinfer-python", "version": "0.5.2"},
                {"name": "Torch", "version": "2.9.0+cu130"}]"#,
        )
        .unwrap();
        assert_eq!(
            find_package(&p, "nccl"),
            Some(("nvidia-nccl-cu13", "2.28.3"))
        );
        assert_eq!(
            find_package(&p, "deep_ep"),
            Some(("deep-ep", "1.2.1+cu130"))
        );
        assert_eq!(find_package(&p, "torch").unwrap().1, "2.9.0+cu130");
        assert_eq!(
            find_package(&p, "flashinfer").unwrap().0,
            "flashinfer-python"
        );
        assert_eq!(find_package(&p, "xgrammar"), None);
        assert_eq!(parse_python_packages("0.27.1"), None);
        assert_eq!(parse_python_packages(r#"{"a": 1}"#), None);
    }
}
