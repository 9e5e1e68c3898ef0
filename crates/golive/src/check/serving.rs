//! Serving-configuration items: the prefix-caching flag, reproducibility of the launch
//! and the tool/reasoning parsers.

use super::{combine, flags, item, CheckItem, Ctx, ItemId};
use crate::report::Status;
use crate::text::truncate;

pub(super) fn check_prefix_flag(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let Some(l) = &b.launch else {
            st.push(Status::Unknown);
            ev.push(c.tag(
                b,
                "no launch command (raw/cmdline.txt, docker-inspect.json or pod-spec.yaml)",
            ));
            continue;
        };
        let required = c.profile.required_flags_for(&b.host_gpus());
        let pc = l.prefix_caching();
        let mut status = Status::Pass;
        let state = match pc {
            Some(true) => "--enable-prefix-caching present",
            Some(false) => "prefix caching switched off (--no-enable-prefix-caching)",
            None => "no prefix-caching flag (engine default applies)",
        };
        ev.push(c.tag(b, format!("{state}: {}", truncate(&l.command_line(), 240))));
        let (notes, config_status) = flags::config_file_notes(b, l);
        ev.extend(notes.into_iter().map(|n| c.tag(b, n)));
        if let Some(s) = config_status {
            status = s;
        }
        let (notes, values_ok) = flags::required_values(c.profile, l);
        ev.extend(notes.into_iter().map(|n| c.tag(b, n)));
        if !values_ok {
            status = Status::Fail;
        }
        for f in &required {
            let present = if f == "--enable-prefix-caching" {
                pc == Some(true)
            } else {
                l.has(f)
            };
            if !present {
                ev.push(c.tag(
                    b,
                    format!(
                        "{f} required by {} but not in the running command line{}",
                        c.profile.name,
                        if b.config_args.is_empty() {
                            ""
                        } else {
                            " nor in its --config file"
                        }
                    ),
                ));
                status = Status::Fail;
            }
        }
        // The effective config in the log must agree with the command line.
        if let Some(text) = &b.startup_log_text {
            if pc == Some(true) && text.contains("enable_prefix_caching=False") {
                ev.push(c.tag(b, "startup.log: enable_prefix_caching=False although the command enables it (wrapper dropped it?)"));
                status = Status::Fail;
            }
        }
        if let Some(name) = &c.profile.cache.retention_env {
            if let Some(v) = b.relevant_env().get(name) {
                let meaning = if v.trim() == "0" {
                    " (periodic checkpoints off: only prompt-end states kept)"
                } else {
                    ""
                };
                ev.push(c.tag(b, format!("{name}={v}{meaning}")));
            }
        }
        if let (Some(max), Some(len)) = (c.profile.cache.max_context, l.value("--max-model-len")) {
            if let Some(n) = parse_len(len) {
                if n > max {
                    ev.push(c.tag(
                        b,
                        format!("--max-model-len {len} exceeds the model's context {max}"),
                    ));
                    status = Status::Fail;
                }
            }
        }
        st.push(status);
    }
    item(
        ItemId::PrefixCachingFlag,
        "--enable-prefix-caching in the actual running command line",
        combine(&st),
        ev,
        "Add --enable-prefix-caching to the final command (check the process arguments, not the template), then test prefix identity and retention with a positive and a negative control.",
    )
}

fn parse_len(v: &str) -> Option<u64> {
    let v = v.trim().to_ascii_lowercase();
    if let Some(k) = v.strip_suffix('k') {
        return k.parse::<u64>().ok().map(|n| n * 1024);
    }
    if let Some(m) = v.strip_suffix('m') {
        return m.parse::<u64>().ok().map(|n| n * 1024 * 1024);
    }
    v.parse().ok()
}

pub(super) fn check_reproducible(c: &Ctx) -> CheckItem {
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let mut missing = Vec::new();
        if b.image_digest().is_none() {
            missing.push("image digest");
        }
        if b.launch.is_none() {
            missing.push("launch arguments");
        }
        if b.driver().is_none() {
            missing.push("driver version");
        }
        if b.startup_log.is_none() {
            missing.push("startup log");
        }
        if missing.is_empty() {
            ev.push(c.tag(b, "digest, arguments, driver and startup log recorded"));
            st.push(Status::Pass);
        } else {
            ev.push(c.tag(b, format!("missing: {}", missing.join(", "))));
            st.push(Status::Fail);
        }
    }
    item(
        ItemId::Reproducible,
        "Reproducible record (digest, arguments, driver, logs)",
        combine(&st),
        ev,
        "Save the run under its own directory (golive collect --container NAME): image digest, full command, driver, startup log.",
    )
}

pub(super) fn check_parsers(c: &Ctx) -> Option<CheckItem> {
    let want_tool = c.profile.flags.tool_call_parser.clone();
    let want_reason = c.profile.flags.reasoning_parser.clone();
    if want_tool.is_none() && want_reason.is_none() {
        return None;
    }
    let mut st = Vec::new();
    let mut ev = Vec::new();
    for b in c.bundles {
        let Some(l) = &b.launch else {
            st.push(Status::Unknown);
            continue;
        };
        let mut status = Status::Pass;
        for (flag, want) in [
            ("--tool-call-parser", &want_tool),
            ("--reasoning-parser", &want_reason),
        ] {
            let (Some(want), Some(have)) = (want, l.value(flag)) else {
                continue;
            };
            if have != want {
                ev.push(c.tag(b, format!("{flag} {have}, the recipe uses {want}")));
                status = Status::Fail;
            } else {
                ev.push(c.tag(b, format!("{flag} {have}")));
            }
        }
        if l.has("--enable-auto-tool-choice") && !l.has("--tool-call-parser") {
            ev.push(c.tag(b, "--enable-auto-tool-choice without --tool-call-parser"));
            status = Status::Fail;
        }
        if status == Status::Pass && ev.is_empty() {
            ev.push(c.tag(b, "no tool-call or reasoning parser set"));
        }
        st.push(status);
    }
    Some(item(
        ItemId::Parsers,
        "Tool-call and reasoning parser as the recipe names them",
        combine(&st),
        ev,
        "Use the model's own parsers (recipe features) and validate tool calls against your schemas.",
    ))
}
