//! `vllm serve --config FILE`: the YAML file of flags that recipes now ship. vLLM reads
//! each key as a flag name without `--` (underscores or dashes), a `true` as the bare
//! switch, `false` as `--no-` switch, a list as several values, and places them before
//! the command line's own flags, so the command line wins (argparse: the last one).

use super::launch::{Launch, LaunchArg};

/// The flags a config file sets, in file order, as `LaunchArg`s of the command line.
pub fn parse_config_file(text: &str) -> anyhow::Result<Vec<LaunchArg>> {
    use serde_norway::Value;
    crate::text::check_yaml_depth(text)?;
    let doc: Value = serde_norway::from_str(&super::normalize(text))
        .map_err(|e| anyhow::anyhow!("not YAML: {e}"))?;
    let map = match doc {
        Value::Mapping(m) => m,
        Value::Null => return Ok(Vec::new()),
        _ => anyhow::bail!("not a mapping of flag names to values"),
    };
    let mut args = Vec::new();
    for (key, value) in map {
        let Some(key) = key.as_str() else { continue };
        let key = key.trim().trim_start_matches('-');
        // Same normalisation as the command line (`max_num_seqs` == `max-num-seqs`);
        // dotted keys keep their underscores after the first part.
        let name = match key.split_once('.') {
            Some((head, rest)) => format!("{}.{rest}", head.replace('_', "-")),
            None => key.replace('_', "-"),
        };
        let scalar = |v: &Value| -> Option<String> {
            match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                Value::Null => None,
                // vLLM passes nested settings (`compilation-config`) as JSON.
                other => serde_json::to_string(other).ok(),
            }
        };
        let arg = match &value {
            Value::Bool(true) => LaunchArg {
                flag: format!("--{name}"),
                value: None,
            },
            Value::Bool(false) => LaunchArg {
                flag: format!("--no-{name}"),
                value: None,
            },
            Value::Sequence(items) => LaunchArg {
                flag: format!("--{name}"),
                value: Some(
                    items
                        .iter()
                        .filter_map(scalar)
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
            },
            v => LaunchArg {
                flag: format!("--{name}"),
                value: scalar(v),
            },
        };
        // Secrets never leave the parser (as on the command line).
        let arg = if crate::redact::is_secret_name(&name) && arg.value.is_some() {
            LaunchArg {
                value: Some(crate::redact::REDACTED.into()),
                ..arg
            }
        } else {
            LaunchArg {
                value: arg.value.map(|v| crate::redact::redact_value(&v)),
                ..arg
            }
        };
        args.push(arg);
    }
    Ok(args)
}

/// The running flags: the config file's first, then the command line's, so a flag on
/// the command line overrides the file's. A `model` key names the model when the
/// command line does not.
pub fn merge_config(launch: &mut Launch, config: &[LaunchArg]) {
    if launch.model.is_none() {
        launch.model = config
            .iter()
            .rev()
            .find(|a| a.flag == "--model")
            .and_then(|a| a.value.clone());
    }
    let mut args = config.to_vec();
    args.append(&mut launch.args);
    launch.args = args;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_keys_become_flags_and_the_command_line_wins() {
        let cfg = parse_config_file(
            "model: moonshotai/Kimi-K3\nenable_prefix_caching: true\n\
             tensor-parallel-size: 8\nprefix-match-unit: 64\nenforce-eager: false\n\
             api-key: sk-secret\nmiddleware: [a, b]\nmax-num-batched-tokens: 8192\n",
        )
        .unwrap();
        let flags: Vec<&str> = cfg.iter().map(|a| a.flag.as_str()).collect();
        assert_eq!(
            flags,
            [
                "--model",
                "--enable-prefix-caching",
                "--tensor-parallel-size",
                "--prefix-match-unit",
                "--no-enforce-eager",
                "--api-key",
                "--middleware",
                "--max-num-batched-tokens"
            ]
        );
        assert_eq!(cfg[5].value.as_deref(), Some(crate::redact::REDACTED));
        assert_eq!(cfg[6].value.as_deref(), Some("a b"));
        assert_eq!(cfg[7].value.as_deref(), Some("8192"));
        let mut l = super::super::launch::parse_launch(
            "vllm serve --config k3.yaml --tensor-parallel-size 4 --no-enable-prefix-caching",
        )
        .unwrap();
        merge_config(&mut l, &cfg);
        assert_eq!(l.model.as_deref(), Some("moonshotai/Kimi-K3"));
        assert_eq!(l.tensor_parallel(), 4);
        assert_eq!(l.prefix_caching(), Some(false));
        assert_eq!(l.value("--prefix-match-unit"), Some("64"));
        assert!(parse_config_file("- a\n- b\n").is_err());
        assert!(parse_config_file("a: [unclosed\n").is_err());
    }
}
