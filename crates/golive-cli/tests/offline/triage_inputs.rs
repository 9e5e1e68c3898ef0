//! `golive triage` on awkward inputs and its command line contract (exit codes, JSON).

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use golive::triage::{analyze_paths, Class, TriageOptions};

const OOM_LINE: &str = "(EngineCore_DP0 pid=7) ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n";

fn opts() -> TriageOptions {
    TriageOptions {
        context: 30,
        rules: Vec::new(),
    }
}

fn golive(args: &[&str], stdin: Option<&[u8]>) -> (i32, String, String) {
    let mut child = Command::new(common::golive_bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut si = child.stdin.take().unwrap();
        if let Some(data) = stdin {
            si.write_all(data).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn empty_file_is_nothing_found_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("empty.log");
    std::fs::write(&p, b"").unwrap();
    let rep = analyze_paths(&[p], &opts()).unwrap();
    assert!(rep.primary.is_none());
    assert!(
        rep.notes.iter().any(|n| n.contains("empty")),
        "{:?}",
        rep.notes
    );
}

#[test]
fn binary_file_alone_is_an_error_and_skipped_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("core.dump");
    std::fs::write(&bin, [0u8, 1, 2, 0, 255, 254, 0, 0]).unwrap();
    let err = analyze_paths(std::slice::from_ref(&bin), &opts()).unwrap_err();
    assert!(format!("{err:#}").contains("binary"), "{err:#}");
    std::fs::write(dir.path().join("server.log"), OOM_LINE).unwrap();
    std::fs::write(dir.path().join("plot.png"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
    let rep = analyze_paths(&[dir.path().to_path_buf()], &opts()).unwrap();
    assert_eq!(rep.primary.as_ref().unwrap().class, Class::OomStartup);
    assert!(
        rep.notes.iter().any(|n| n.contains("binary")),
        "{:?}",
        rep.notes
    );
    assert!(
        rep.notes.iter().any(|n| n.contains("plot.png")),
        "{:?}",
        rep.notes
    );
}

#[test]
fn invalid_utf8_and_crlf_and_ansi_are_handled() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.log");
    let mut data = b"INFO \xff\xfe\xfd broken bytes\r\n".to_vec();
    data.extend_from_slice(b"\x1b[1;36m(EngineCore_DP0 pid=7)\x1b[0;0m ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory for the cache blocks.\r\n");
    std::fs::write(&p, data).unwrap();
    let rep = analyze_paths(&[p], &opts()).unwrap();
    let prim = rep.primary.unwrap();
    assert_eq!((prim.class, prim.line), (Class::OomStartup, 2));
    assert!(!prim.text.contains('\x1b') && !prim.text.contains('\r'));
}

#[test]
fn ten_megabyte_line_does_not_hide_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("long-line.log");
    let mut data = vec![b'x'; 10 << 20];
    data.push(b'\n');
    data.extend_from_slice(OOM_LINE.as_bytes());
    std::fs::write(&p, data).unwrap();
    let rep = analyze_paths(&[p], &opts()).unwrap();
    let prim = rep.primary.unwrap();
    assert_eq!((prim.class, prim.line), (Class::OomStartup, 2));
    assert!(prim.context.iter().all(|c| c.len() < 10_000));
}

#[test]
fn gzip_and_truncated_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("log.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for i in 0..2000 {
        writeln!(
            enc,
            "INFO 10-25 13:08:{:02} [loggers.py:1] line {i}",
            i % 60
        )
        .unwrap();
    }
    enc.write_all(OOM_LINE.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    std::fs::write(&p, &gz).unwrap();
    let rep = analyze_paths(std::slice::from_ref(&p), &opts()).unwrap();
    assert_eq!(rep.primary.as_ref().unwrap().line, 2001);
    // Cut the stream: whatever was decompressed is read, with a note.
    std::fs::write(&p, &gz[..gz.len() - 12]).unwrap();
    let rep = analyze_paths(&[p], &opts()).unwrap();
    assert!(
        rep.notes.iter().any(|n| n.contains("ended early")),
        "{:?}",
        rep.notes
    );
}

#[test]
fn missing_path_is_exit_2_with_a_message() {
    let (code, _, err) = golive(&["triage", "/nonexistent/vllm.log"], None);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/vllm.log"), "{err}");
}

#[test]
fn stdin_json_and_exit_codes() {
    let (code, out, _) = golive(
        &["triage", "--format", "json", "-"],
        Some(OOM_LINE.as_bytes()),
    );
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["primary"]["class"], "oom_startup");
    assert_eq!(v["primary"]["file"], "-");
    assert_eq!(v["primary"]["line"], 1);
    assert_eq!(v["primary"]["rule"], "oom-kv-cache-no-blocks");
    assert!(v["primary"]["next_step"].as_str().unwrap().len() > 10);
    assert!(v["secondary"].is_array());
    assert!(v["schema_version"].as_u64().is_some());

    let (code, out, _) = golive(
        &["triage", "--format", "json", "-"],
        Some(b"INFO all good\n"),
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["primary"].is_null());
}

#[test]
fn text_output_has_context_class_and_next_step() {
    let fixture = common::fixture_path("triage/oom_startup_kv.log");
    let (code, out, _) = golive(
        &["triage", "--context", "2", fixture.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 1);
    assert!(out.contains("oom_startup"), "{out}");
    assert!(out.contains("next step:"), "{out}");
    assert!(out.contains(">       6 |"), "{out}");
    assert!(
        out.contains("      4 |") && !out.contains("      3 |"),
        "{out}"
    );
}

#[test]
fn user_rules_are_added_and_bad_rule_files_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("mine.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nid = \"site-quota\"\nkind = \"cause\"\nclass = \"config\"\npatterns = [\"quota exceeded for project\"]\nnext_step = \"Raise the project quota.\"\nwhy = \"Site quota.\"\n",
    )
    .unwrap();
    let log = dir.path().join("a.log");
    std::fs::write(&log, "hello\nERROR: quota exceeded for project llm\n").unwrap();
    let rep = analyze_paths(
        std::slice::from_ref(&log),
        &TriageOptions {
            context: 3,
            rules: vec![rules.clone()],
        },
    )
    .unwrap();
    let p = rep.primary.unwrap();
    assert_eq!((p.rule.as_str(), p.line), ("site-quota", 2));
    std::fs::write(&rules, "[[rule]]\nid = 3\n").unwrap();
    let (code, _, err) = golive(
        &[
            "triage",
            "--rules",
            rules.to_str().unwrap(),
            log.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rule file"), "{err}");
}

#[test]
fn tracebacks_across_buffer_boundaries_keep_exact_line_numbers() {
    // Filler of ~8 MiB puts the traceback across the scanner's first buffer boundary; the
    // position is varied so the boundary falls on different traceback lines.
    let filler = "(APIServer pid=1) INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n";
    let per = filler.len();
    for shift in [0usize, 1, 2, 3] {
        let n = (8 << 20) / per - 2 + shift;
        let mut data = String::with_capacity(n * per + 1024);
        data.push_str("(APIServer pid=1) INFO:     Application startup complete.\n");
        for _ in 0..n {
            data.push_str(filler);
        }
        data.push_str("(EngineCore_DP0 pid=2) ERROR 05-01 14:39:06 [core.py:1131] Traceback (most recent call last):\n");
        data.push_str("(EngineCore_DP0 pid=2) ERROR 05-01 14:39:06 [core.py:1131]   File \"/x/vllm/v1/worker/gpu_model_runner.py\", line 1520, in execute_model\n");
        data.push_str("(EngineCore_DP0 pid=2) ERROR 05-01 14:39:06 [core.py:1131]     hidden_states = self.model(\n");
        data.push_str("(EngineCore_DP0 pid=2) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB.\n");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.log");
        std::fs::write(&p, &data).unwrap();
        let rep = analyze_paths(std::slice::from_ref(&p), &opts()).unwrap();
        let prim = rep.primary.unwrap();
        let want = 1 + n as u64 + 4;
        assert_eq!(
            (prim.class, prim.line),
            (Class::OomRuntime, want),
            "shift {shift}"
        );
        assert_eq!(prim.context.len(), 30);
        assert!(prim.context.last().unwrap().contains("self.model("));
        assert_eq!(rep.inputs[0].lines, want);
        assert_eq!(rep.inputs[0].bytes, data.len() as u64);
    }
}
