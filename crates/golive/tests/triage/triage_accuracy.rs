//! Accuracy of `golive triage` on the real logs in `../shared` (skips when absent, fails under
//! `CI=true`) and on the repository's own fixtures (lines written in the real message formats).
//! The figures on `../shared` are exact: the misses must equal the committed known-misses list.

use crate::common;

use std::path::{Path, PathBuf};

use golive::triage::{analyze_paths, Class, TriageOptions, TriageReport};

fn triage(paths: &[PathBuf]) -> TriageReport {
    analyze_paths(
        paths,
        &TriageOptions {
            context: 30,
            rules: Vec::new(),
        },
    )
    .unwrap_or_else(|e| panic!("triage of {paths:?} failed: {e:#}"))
}

fn class_name(c: Class) -> String {
    serde_json::to_value(c)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

fn read_tsv(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

#[test]
fn corpus_class_and_first_cause_line() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let dir = shared.join("corpus");
    let rows = read_tsv(&dir.join("labels.tsv"));
    assert!(!rows.is_empty());
    let (mut class_ok, mut line_ok) = (0usize, 0usize);
    let mut misses = Vec::new();
    for row in &rows {
        let (id, class, line) = (&row[0], &row[1], row[2].parse::<u64>().unwrap());
        let rep = triage(&[dir.join(format!("{id}.log"))]);
        let (got_class, got_line) = match &rep.primary {
            Some(p) => (class_name(p.class), Some(p.line)),
            None => ("none".to_string(), None),
        };
        let c = &got_class == class;
        let l = got_line.is_some_and(|g| g.abs_diff(line) <= 2);
        class_ok += usize::from(c);
        line_ok += usize::from(l);
        if !(c && l) {
            misses.push(format!(
                "{id}: want {class}@{line}, got {got_class}@{got_line:?}"
            ));
        }
    }
    let n = rows.len();
    assert!(n > 0, "no labelled fragment was read");
    eprintln!("corpus: class {class_ok}/{n}, first-cause line within 2: {line_ok}/{n}");
    assert_known_misses("corpus", &misses);
}

/// The committed list of known misses (`tests/triage_known_misses.txt`, one `set/id: ...` line
/// each): a regression or a fix shows as a changed list, not as a floor that still passes.
fn assert_known_misses(set: &str, misses: &[String]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/triage_known_misses.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut known: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix(&format!("{set}/")))
        .map(str::to_string)
        .collect();
    let mut got = misses.to_vec();
    known.sort();
    got.sort();
    assert_eq!(
        got, known,
        "{set}: the misses changed; update tests/triage_known_misses.txt only for an understood change"
    );
}

#[test]
fn long_logs_healthy_silent_failed_found() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let dir = shared.join("long");
    let rows = read_tsv(&dir.join("INDEX.tsv"));
    let mut problems = Vec::new();
    let (mut healthy, mut failed) = (0, 0);
    for row in &rows {
        let (id, outcome) = (&row[0], &row[2]);
        let rep = triage(&[dir.join(format!("{id}.log"))]);
        if outcome == "ok" {
            healthy += 1;
            if let Some(p) = &rep.primary {
                problems.push(format!(
                    "{id}: healthy but found {:?}@{} ({})",
                    p.class, p.line, p.rule
                ));
            }
            if !rep.secondary.is_empty() {
                problems.push(format!("{id}: healthy but has secondary findings"));
            }
        } else {
            failed += 1;
            let want: u64 = row[3].parse().unwrap();
            match &rep.primary {
                Some(p) if p.line.abs_diff(want) <= 2 && class_name(p.class) == *outcome => {}
                Some(p) => problems.push(format!(
                    "{id}: want {outcome}@{want}, got {:?}@{} ({})",
                    p.class, p.line, p.rule
                )),
                None => problems.push(format!("{id}: want {outcome}@{want}, found nothing")),
            }
        }
    }
    eprintln!("long: {healthy} healthy, {failed} failed; problems: {problems:#?}");
    assert_eq!(healthy + failed, rows.len());
    assert!(healthy > 0 && failed > 0, "no whole log was read");
    assert_known_misses("long", &problems);
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/triage")
        .join(name)
}

fn primary_of(name: &str) -> golive::triage::Finding {
    let rep = triage(&[fixture(name)]);
    rep.primary
        .unwrap_or_else(|| panic!("{name}: nothing found"))
}

#[test]
fn every_class_from_fixtures() {
    let cases: &[(&str, Class, u64)] = &[
        ("driver_cuda13.log", Class::Driver, 10),
        ("container_cli.log", Class::Container, 3),
        ("dependency_import.log", Class::Dependency, 7),
        ("config_argparse.log", Class::Config, 3),
        ("oom_startup_kv.log", Class::OomStartup, 6),
        ("oom_runtime.log", Class::OomRuntime, 8),
        ("oom_topology_multirank.log", Class::OomTopology, 8),
        ("prefix_cache.log", Class::PrefixCache, 2),
        ("nccl_kimi_dmabuf.log", Class::Nccl, 2),
        ("tool_parser.log", Class::ToolParser, 3),
        // An exception no rule knows, in a log where vLLM started: the engine's own failure.
        ("unknown_exception.log", Class::Engine, 5),
        ("compose_docker_ts.log", Class::Driver, 2),
        ("import_chain.log", Class::Dependency, 8),
        // The same in a user's script with no engine start in sight: unknown.
        ("script_error.log", Class::Unknown, 6),
    ];
    for (name, class, line) in cases {
        let p = primary_of(name);
        assert_eq!((p.class, p.line), (*class, *line), "{name}: {p:?}");
        assert!(!p.next_step.is_empty() && !p.why.is_empty(), "{name}");
    }
}

#[test]
fn cuda13_driver_error_asks_for_r580_by_driver_version() {
    let p = primary_of("driver_cuda13.log");
    assert!(p.next_step.contains("R580"), "{}", p.next_step);
    assert!(p.next_step.contains("driver_version"), "{}", p.next_step);
}

#[test]
fn kimi_dmabuf_recipe_needs_nvidia_peermem() {
    let p = primary_of("nccl_kimi_dmabuf.log");
    assert!(
        p.next_step.contains("NCCL_DMABUF_ENABLE=0"),
        "{}",
        p.next_step
    );
    assert!(
        p.next_step.contains("lsmod | grep nvidia_peermem"),
        "{}",
        p.next_step
    );
}

#[test]
fn consequences_are_secondary_and_context_is_given() {
    let rep = triage(&[fixture("dependency_import.log")]);
    let p = rep.primary.unwrap();
    assert_eq!(p.rule, "dep-undefined-symbol");
    assert!(
        p.context.len() >= 5 && p.context.len() <= 30,
        "{:?}",
        p.context
    );
    assert!(rep
        .secondary
        .iter()
        .any(|s| s.text.contains("Engine core initialization failed")));
}

#[test]
fn healthy_shutdown_gives_no_finding() {
    let rep = triage(&[fixture("healthy_shutdown.log")]);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
    assert!(rep.secondary.is_empty());
}

#[test]
fn multi_node_runbook_order_beats_nccl_on_other_node() {
    let rep = triage(&[fixture("multinode")]);
    let p = rep.primary.unwrap();
    assert_eq!(p.class, Class::Driver);
    assert!(p.file.ends_with("node1.log"), "{}", p.file);
    assert_eq!(
        p.rank.as_deref(),
        Some("RayWorkerWrapper pid=310, ip=10.0.0.2")
    );
    assert!(rep.secondary.iter().any(|s| s.class == Class::Nccl));
}

#[test]
fn earliest_failing_rank_by_timestamp_across_files() {
    let rep = triage(&[
        fixture("ranks_ts/a_rank0.log"),
        fixture("ranks_ts/b_rank3.log"),
    ]);
    let p = rep.primary.unwrap();
    assert_eq!(p.class, Class::Nccl);
    assert_eq!(p.rank.as_deref(), Some("rank3"), "{p:?}");
    assert!(p.file.ends_with("b_rank3.log"));
}

#[test]
fn torchrun_interleaved_ranks_keep_their_tracebacks_apart() {
    let p = primary_of("torchrun_interleaved.log");
    // The dependency on rank 1 explains the NCCL error on rank 0 (runbook order).
    assert_eq!((p.class, p.line), (Class::Dependency, 8), "{p:?}");
    assert_eq!(p.rank.as_deref(), Some("rank1"));
}

#[test]
fn client_errors_ignored_tracebacks_and_benign_nccl_warnings_are_not_failures() {
    let rep = triage(&[fixture("healthy_client_errors.log")]);
    assert!(rep.primary.is_none(), "{:?}", rep.primary);
}

#[test]
fn a_restart_returns_to_the_startup_phase() {
    let p = primary_of("restart_then_startup_oom.log");
    assert_eq!((p.class, p.line), (Class::OomStartup, 7), "{p:?}");
}

#[test]
fn nvidia_container_driver_requirement_errors_are_driver_class() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let dir = shared.join("env");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !name.starts_with("nvidia-container-error_") {
            continue;
        }
        n += 1;
        let rep = triage(std::slice::from_ref(&path));
        let p = rep
            .primary
            .unwrap_or_else(|| panic!("{name}: nothing found"));
        assert_eq!(p.class, Class::Driver, "{name}: {p:?}");
        assert!(p.text.contains("requirement error"), "{name}: {}", p.text);
    }
    assert!(n > 0, "no nvidia-container-cli output in {}", dir.display());
    eprintln!("checked {n} nvidia-container-cli outputs");
}

#[test]
fn one_rank_oom_across_rank_files_is_topology_and_beats_nccl_timeouts() {
    let rep = triage(&[fixture("ranks_oom")]);
    let p = rep.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::OomTopology, 5), "{p:?}");
    assert!(p.file.ends_with("rank1.log"));
    assert!(rep.secondary.iter().any(|s| s.class == Class::Nccl));
}

#[test]
fn generic_nccl_error_quotes_nccls_first_warning() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let rep = triage(&[shared.join("long/014.log")]);
    let p = rep.primary.unwrap();
    assert_eq!((p.class, p.line), (Class::Nccl, 88));
    assert!(p.why.contains("Network is unreachable"), "{}", p.why);
}

/// A log read from Docker's `json-file` driver (`<id>-json.log`: one JSON record a line, the
/// text escaped) is triaged as the text the container wrote: on every real log in `../shared`
/// (corpus and long), the same primary (class, rule, line) and the same outcome per process.
#[test]
fn docker_json_file_logs_triage_as_the_text_they_hold() {
    let Some(shared) = common::shared_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for sub in ["corpus", "long"] {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(shared.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        for log in logs {
            let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
            let plain = dir.path().join("plain.log");
            std::fs::write(&plain, &text).unwrap();
            let docker = dir.path().join("docker-json.log");
            let records: String = text
                .split_inclusive('\n')
                .map(|l| {
                    let rec = serde_json::json!({"log": l, "stream": "stderr", "time": "2025-12-01T10:00:00.000000000Z"});
                    format!("{rec}\n")
                })
                .collect();
            std::fs::write(&docker, records).unwrap();
            let (a, b) = (triage(&[plain]), triage(&[docker]));
            let key = |r: &TriageReport| {
                r.primary
                    .as_ref()
                    .map(|p| (class_name(p.class), p.rule.clone(), p.line))
            };
            assert_eq!(key(&a), key(&b), "{}", log.display());
            let outcome = |r: &TriageReport| -> Vec<String> {
                r.outcome
                    .iter()
                    .map(|o| format!("{} {:?} {:?} {:?}", o.process, o.reached, o.ended, o.line))
                    .collect()
            };
            assert_eq!(outcome(&a), outcome(&b), "{}", log.display());
            compared += 1;
        }
    }
    assert!(compared > 40, "only {compared} logs compared");
}
