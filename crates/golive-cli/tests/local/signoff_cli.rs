//! `golive signoff`: a second person's decision is recorded with SHA-256 of the report
//! and its evidence; a later change to any of them is detected by `--verify` and
//! shown in the re-rendered report.html.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{golive, text};
use golive::report::{Check, Impact, Report, Stage, Status, Verdict};

/// A finished report with evidence files, as an acceptance run leaves it.
fn report_dir(dir: &Path) {
    let mut r = Report::new(vec!["http://127.0.0.1:8000".into()]);
    r.operator = Some("alice".into());
    r.model = Some("kimi-k3".into());
    r.complete = true;
    let mut c = Check::new(
        "prefix_cache",
        Stage::PrefixCache,
        Status::Pass,
        "warm request reuses the prefix",
    );
    c.measurement = "cached 335 of 365 prompt tokens".into();
    c.impact = Impact::Capacity;
    r.checks.push(c);
    r.decide();
    r.save_json(dir).unwrap();
    std::fs::write(dir.join("report.md"), "# report\n").unwrap();
    std::fs::write(dir.join("junit.xml"), "<testsuites/>\n").unwrap();
    std::fs::create_dir_all(dir.join("regressions")).unwrap();
    std::fs::write(
        dir.join("regressions/tool-case-1.json"),
        "{\"messages\":[]}\n",
    )
    .unwrap();
}

#[test]
fn signoff_records_hashes_and_verify_detects_every_kind_of_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    report_dir(dir);
    let d = dir.to_str().unwrap();

    let out = golive(&[
        "signoff",
        d,
        "--reviewer",
        "bob",
        "--note",
        "checked <logs> & metrics",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = Report::load(dir).unwrap();
    assert_eq!(r.signoffs.len(), 1);
    let s = &r.signoffs[0];
    assert_eq!(s.reviewer, "bob");
    // The decision defaults to the run's verdict.
    assert_eq!(s.decision, Verdict::Release);
    let files: Vec<&str> = s.covered.keys().map(String::as_str).collect();
    assert_eq!(
        files,
        [
            "junit.xml",
            "regressions/tool-case-1.json",
            "report.json",
            "report.md"
        ]
    );
    // The evidence hash is the plain SHA-256 of the file (as sha256sum computes it).
    let sum = Command::new("sha256sum")
        .arg(dir.join("report.md"))
        .output()
        .unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    assert_eq!(
        sum.split_whitespace().next(),
        Some(s.covered["report.md"].as_str())
    );

    // The HTML shows who ran it, who reviewed it, and the intact sign-off; text is escaped.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<dt>Ran it</dt><dd>alice</dd>"), "{html}");
    assert!(html.contains("<dt>Reviewed by</dt><dd>bob</dd>"));
    assert!(html.contains("intact"));
    assert!(html.contains("checked &lt;logs&gt; &amp; metrics"));

    // Verify right away: intact, exit 0. A second sign-off does not break the first.
    let out = golive(&["signoff", d, "--reviewer", "carol", "--decision", "observe"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("differs from the run's verdict"),
        "{}",
        text(&out)
    );
    let out = golive(&["signoff", "--verify", d]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(text(&out).matches("intact").count(), 2, "{}", text(&out));

    // Change evidence, remove some, add some, and touch a measurement in report.json.
    std::fs::write(dir.join("report.md"), "# report (edited)\n").unwrap();
    std::fs::remove_file(dir.join("junit.xml")).unwrap();
    std::fs::write(dir.join("regressions/tool-case-2.json"), "{}\n").unwrap();
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    v["checks"][0]["measurement"] = "cached 365 of 365 prompt tokens".into();
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_vec_pretty(&v).unwrap(),
    )
    .unwrap();

    let out = golive(&["signoff", "--verify", d]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("CHANGED since the sign-off"), "{t}");
    assert!(t.contains("changed: report.json"), "{t}");
    assert!(t.contains("changed: report.md"), "{t}");
    assert!(t.contains("removed: junit.xml"), "{t}");
    assert!(t.contains("added:   regressions/tool-case-2.json"), "{t}");

    // Re-rendering shows it too.
    golive::signoff::write_html(dir).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("CHANGED since sign-off"), "{html}");
    assert!(html.contains("removed: junit.xml"));
}

#[test]
fn reformatting_report_json_keeps_the_signoff_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    report_dir(dir);
    let d = dir.to_str().unwrap();
    assert_eq!(
        golive(&["signoff", d, "--reviewer", "bob"]).status.code(),
        Some(0)
    );
    // Same content, compact and with reordered keys: still intact.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let mut pairs: Vec<(String, serde_json::Value)> =
        v.as_object().unwrap().clone().into_iter().collect();
    pairs.reverse();
    let reordered = format!(
        "{{{}}}",
        pairs
            .iter()
            .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
            .collect::<Vec<_>>()
            .join(",")
    );
    std::fs::write(dir.join("report.json"), reordered).unwrap();
    let out = golive(&["signoff", "--verify", d, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["intact"], true);
}

#[test]
fn the_operator_cannot_sign_their_own_run_and_bad_input_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    report_dir(dir);
    let d = dir.to_str().unwrap();
    let out = golive(&["signoff", d, "--reviewer", "Alice"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("second person"), "{}", text(&out));
    let out = golive(&["signoff", d, "--reviewer", "bob", "--decision", "ship-it"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("unknown decision"), "{}", text(&out));
    let out = golive(&["signoff", "--verify", d]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no sign-off"), "{}", text(&out));
    // An interrupted run is not signed by accident.
    let mut r = Report::load(dir).unwrap();
    r.complete = false;
    r.save_json(dir).unwrap();
    let out = golive(&["signoff", d, "--reviewer", "bob"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--allow-incomplete"), "{}", text(&out));
    assert!(Report::load(dir).unwrap().signoffs.is_empty());
}

/// A throwaway ed25519 key at `dir/NAME` and an allowed-signers line for `who`;
/// None (skip) when ssh-keygen is missing, unless CI=true.
fn keypair(dir: &Path, name: &str, who: &str) -> Option<(String, String)> {
    let key = dir.join(name);
    let made = Command::new("ssh-keygen")
        .args(["-t", "ed25519", "-N", "", "-q", "-C", who, "-f"])
        .arg(&key)
        .status();
    match made {
        Ok(s) if s.success() => {}
        other => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "ssh-keygen is needed in CI: {other:?}"
            );
            eprintln!("skipping: ssh-keygen unavailable ({other:?})");
            return None;
        }
    }
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    Some((key.to_str().unwrap().to_string(), format!("{who} {public}")))
}

/// A report signed by bob (with his key), then carol (with hers); the allowed-signers
/// file lists both. Returns (report dir, allowed-signers path) or None to skip.
fn signed_chain(tmp: &Path) -> Option<(String, String)> {
    let dir = tmp.join("report");
    std::fs::create_dir_all(&dir).unwrap();
    report_dir(&dir);
    let (bob_key, bob_line) = keypair(tmp, "bob", "bob@example.org")?;
    let (carol_key, carol_line) = keypair(tmp, "carol", "carol@example.org")?;
    let allowed = tmp.join("allowed_signers");
    std::fs::write(&allowed, format!("{bob_line}{carol_line}")).unwrap();
    let d = dir.to_str().unwrap().to_string();
    for (who, key) in [
        ("bob@example.org", &bob_key),
        ("carol@example.org", &carol_key),
    ] {
        let out = golive(&["signoff", &d, "--reviewer", who, "--key", key]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            text(&out).contains("signed with the SSH key"),
            "{}",
            text(&out)
        );
    }
    Some((d, allowed.to_str().unwrap().to_string()))
}

fn verify(d: &str, allowed: &str) -> (Option<i32>, String) {
    let out = golive(&["signoff", "--verify", d, "--allowed-signers", allowed]);
    (out.status.code(), text(&out))
}

fn edit_json(d: &str, f: impl FnOnce(&mut serde_json::Value)) {
    let path = Path::new(d).join("report.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn a_signed_chain_verifies_and_every_forgery_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((d, allowed)) = signed_chain(tmp.path()) else {
        return;
    };
    let (code, t) = verify(&d, &allowed);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(t.matches("signature good").count(), 2, "{t}");
    assert_eq!(t.matches("intact").count(), 2, "{t}");
    let pristine = tmp.path().join("pristine");
    copy_dir(Path::new(&d), &pristine);

    type Forgery = (&'static str, &'static str, Box<dyn Fn(&str)>);
    let forgeries: Vec<Forgery> = vec![
        (
            "changed decision",
            "signature BAD",
            Box::new(|d| edit_json(d, |v| v["signoffs"][0]["decision"] = "rebuild".into())),
        ),
        (
            "changed reviewer",
            "signature BAD",
            Box::new(|d| {
                edit_json(d, |v| {
                    v["signoffs"][1]["reviewer"] = "bob@example.org".into()
                })
            }),
        ),
        (
            "edited report.html",
            "changed: report.html",
            Box::new(|d| {
                let p = Path::new(d).join("report.html");
                let html = std::fs::read_to_string(&p).unwrap();
                std::fs::write(&p, html.replace("release", "rebuild")).unwrap();
            }),
        ),
        (
            "added dot-file",
            "added:   .hidden",
            Box::new(|d| std::fs::write(Path::new(d).join(".hidden"), "x").unwrap()),
        ),
        (
            "edited evidence with recomputed digest",
            "signature BAD",
            Box::new(|d| {
                std::fs::write(Path::new(d).join("report.md"), "# forged\n").unwrap();
                let sum = sha256_hex(b"# forged\n");
                edit_json(d, |v| {
                    v["signoffs"][0]["covered"]["report.md"] = sum.clone().into();
                    v["signoffs"][1]["covered"]["report.md"] = sum.clone().into();
                });
            }),
        ),
        (
            "removed signature",
            "unsigned",
            Box::new(|d| {
                edit_json(d, |v| {
                    v["signoffs"][1]
                        .as_object_mut()
                        .unwrap()
                        .remove("signature");
                })
            }),
        ),
        (
            "removed first sign-off",
            "chain broken",
            Box::new(|d| {
                edit_json(d, |v| {
                    v["signoffs"].as_array_mut().unwrap().remove(0);
                })
            }),
        ),
    ];
    for (name, expected, forge) in &forgeries {
        let _ = std::fs::remove_dir_all(&d);
        copy_dir(&pristine, Path::new(&d));
        assert_eq!(verify(&d, &allowed).0, Some(0), "{name}: pristine copy");
        forge(&d);
        let (code, t) = verify(&d, &allowed);
        assert_eq!(code, Some(1), "{name} was not detected:\n{t}");
        assert!(t.contains(expected), "{name}: expected {expected:?}:\n{t}");
    }
}

#[test]
fn a_key_not_in_allowed_signers_and_an_unsigned_signoff_fail_verify() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((d, allowed)) = signed_chain(tmp.path()) else {
        return;
    };
    // Mallory signs as carol with her own key: verify refuses it.
    let Some((mallory_key, _)) = keypair(tmp.path(), "mallory", "carol@example.org") else {
        return;
    };
    let out = golive(&[
        "signoff",
        &d,
        "--reviewer",
        "carol@example.org",
        "--key",
        &mallory_key,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (code, t) = verify(&d, &allowed);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("signature BAD"), "{t}");
    assert_eq!(t.matches("signature good").count(), 2, "{t}");

    // Without --key: recorded, marked unsigned; verify says so and fails with a file.
    let tmp2 = tempfile::tempdir().unwrap();
    report_dir(tmp2.path());
    let d2 = tmp2.path().to_str().unwrap();
    let out = golive(&["signoff", d2, "--reviewer", "bob@example.org"]);
    assert!(text(&out).contains("UNSIGNED"), "{}", text(&out));
    let out = golive(&["signoff", "--verify", d2]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("unsigned"), "{}", text(&out));
    let (code, t) = verify(d2, &allowed);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("unsigned"), "{t}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A finished report whose run judged the runbook's worksheet, as `accept` leaves it.
fn report_with_worksheet(dir: &Path) {
    report_dir(dir);
    let mut r = golive::report::Report::load(dir).unwrap();
    let items = golive::profile::Profile::generic().worksheet_items();
    r.worksheet = golive::report::evaluate_worksheet(&items, &r);
    r.save_json(dir).unwrap();
}

#[test]
fn signoff_refuses_open_worksheet_items_until_each_is_accepted_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    report_with_worksheet(tmp.path());
    let d = tmp.path().to_str().unwrap();
    // Open items are listed by id and the sign-off is refused (nothing recorded).
    let out = golive(&["signoff", d, "--reviewer", "bob"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    for id in [
        "recipe_checked",
        "rollback_named",
        "host_driver",
        "oom_documented",
    ] {
        assert!(t.contains(id), "{id} not listed:\n{t}");
    }
    assert!(
        !t.contains("second_person"),
        "the sign-off itself proves it:\n{t}"
    );
    assert!(golive::report::Report::load(tmp.path())
        .unwrap()
        .signoffs
        .is_empty());

    // An unknown item and a reason-less acceptance are refused.
    let out = golive(&[
        "signoff",
        d,
        "--reviewer",
        "bob",
        "--accept-open",
        "no_such_item",
        "--reason",
        "x",
    ]);
    assert!(text(&out).contains("no such item"), "{}", text(&out));
    let out = golive(&[
        "signoff",
        d,
        "--reviewer",
        "bob",
        "--accept-open",
        "recipe_checked",
    ]);
    assert!(text(&out).contains("needs a reason"), "{}", text(&out));

    // Every open item accepted (one with its own reason), the rollback owner named.
    let report = golive::report::Report::load(tmp.path()).unwrap();
    let open: Vec<String> = report
        .worksheet
        .iter()
        .filter(|e| e.state.is_open())
        .map(|e| e.id.clone())
        .filter(|id| id != "second_person" && id != "rollback_named")
        .collect();
    let mut args = vec![
        "signoff",
        d,
        "--reviewer",
        "bob",
        "--rollback-owner",
        "oncall-llm",
    ];
    let own = "recipe_checked=recipe of 2026-11-30 read, link in ticket OPS-12".to_string();
    for id in &open {
        args.push("--accept-open");
        args.push(if id == "recipe_checked" {
            own.as_str()
        } else {
            id.as_str()
        });
    }
    args.extend(["--reason", "bundles attached to ticket OPS-12"]);
    let out = golive(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let signed = golive::report::Report::load(tmp.path()).unwrap();
    let s = &signed.signoffs[0];
    assert_eq!(s.rollback_owner.as_deref(), Some("oncall-llm"));
    assert_eq!(s.accepted_open.len(), open.len());
    assert!(s.accepted_open["recipe_checked"].contains("OPS-12"));
    let now = golive::report::current_worksheet(&signed);
    let state = |id: &str| now.iter().find(|e| e.id == id).unwrap().state;
    use golive::report::WorksheetState;
    assert_eq!(state("second_person"), WorksheetState::Proven);
    assert_eq!(state("rollback_named"), WorksheetState::Proven);
    assert_eq!(state("recipe_checked"), WorksheetState::Accepted);
    let html = std::fs::read_to_string(tmp.path().join("report.html")).unwrap();
    assert!(html.contains("id=\"worksheet\""), "no worksheet section");
    assert!(
        html.contains("accepted by bob: recipe of 2026-11-30"),
        "{html}"
    );
    assert!(html.contains("oncall-llm"));
    let out = golive(&["signoff", "--verify", d]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // A reviewer's acceptance cannot be widened afterwards without the SSH signature
    // noticing: the accepted items are part of the signed payload.
    let payload = golive::signoff::payload(s).unwrap();
    let mut forged = s.clone();
    forged
        .accepted_open
        .insert("tool_fallback".into(), "added later".into());
    assert_ne!(payload, golive::signoff::payload(&forged).unwrap());
}

#[test]
fn a_signoff_without_the_new_fields_keeps_its_payload() {
    // Sign-offs recorded before rollback_owner and accepted_open existed still verify:
    // the empty fields are left out of the record, so the signed bytes are the same.
    let v = serde_json::json!({"reviewer": "bob", "decision": "release", "note": "",
        "at": "2026-11-01T00:00:00Z", "covered": {"report.json": "ab"}});
    let s: golive::report::Signoff = serde_json::from_value(v.clone()).unwrap();
    let payload: serde_json::Value =
        serde_json::from_slice(&golive::signoff::payload(&s).unwrap()).unwrap();
    assert_eq!(payload, v);
}
