//! Rules added after measuring `golive triage` on real failure logs it had never seen: each
//! fixture is written for this repository in the real message formats of vLLM, Ray and
//! wrapper loggers, and pins the class, the first-cause line and the rule.

use std::path::{Path, PathBuf};

use golive::triage::{analyze_paths, Class, Finding, TriageOptions, TriageReport};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/triage")
        .join(name)
}

fn triage(name: &str) -> TriageReport {
    analyze_paths(
        &[fixture(name)],
        &TriageOptions {
            context: 5,
            rules: Vec::new(),
        },
    )
    .unwrap_or_else(|e| panic!("triage of {name} failed: {e:#}"))
}

fn primary(name: &str) -> Finding {
    triage(name)
        .primary
        .unwrap_or_else(|| panic!("{name}: nothing found"))
}

#[test]
fn new_rules_find_class_line_and_rule() {
    let cases: &[(&str, Class, u64, &str)] = &[
        // The import WARNING of vLLM's CUDA extension comes before the AttributeError it causes.
        (
            "dep_vllm_ext_warning.log",
            Class::Dependency,
            2,
            "dep-vllm-ext-import",
        ),
        // A Ray actor died and nothing says why: still a distributed failure, at the first line.
        (
            "ray_actor_died.log",
            Class::Nccl,
            3,
            "conseq-ray-actor-died",
        ),
        // When a worker's own exception is there, it wins over the actor's death.
        (
            "ray_actor_died_after_oom.log",
            Class::OomStartup,
            6,
            "oom-cuda",
        ),
        (
            "tool_cannot_determine.log",
            Class::ToolParser,
            3,
            "tool-extract",
        ),
        // A bare RuntimeError raised inside the structured-output backend.
        (
            "structured_output_crash.log",
            Class::ToolParser,
            9,
            "tool-structured-output-frames",
        ),
        (
            "prefix_coordinator.log",
            Class::PrefixCache,
            6,
            "prefix-cache-frames",
        ),
        // Tracebacks behind wrapper-logger prefixes are read as tracebacks.
        (
            "wrapper_logger_prefix.log",
            Class::PrefixCache,
            5,
            "prefix-cache-frames",
        ),
        (
            "wrapper_logger_config.log",
            Class::Config,
            7,
            "config-tp-divisible",
        ),
    ];
    for (name, class, line, rule) in cases {
        let p = primary(name);
        assert_eq!(
            (p.class, p.line, p.rule.as_str()),
            (*class, *line, *rule),
            "{name}: {p:?}"
        );
        assert!(!p.why.is_empty() && !p.next_step.is_empty(), "{name}");
    }
}

#[test]
fn missing_vllm_c_is_harmless_on_a_platform_plugin() {
    let rep = triage("healthy_plugin_platform.log");
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    assert!(rep.secondary.is_empty(), "{:?}", rep.secondary);
}

#[test]
fn ray_actor_death_is_secondary_to_a_real_cause() {
    let rep = triage("ray_actor_died_after_oom.log");
    assert!(
        rep.secondary
            .iter()
            .any(|f| f.rule == "conseq-ray-actor-died" && f.line == 7),
        "{:?}",
        rep.secondary
    );
}
