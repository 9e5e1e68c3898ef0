//! The library holds the logic and nothing of the terminal: no argument parser, no
//! progress bars, no printing. Those belong to `crates/golive-cli`.

use std::path::Path;

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn the_library_has_no_clap_no_indicatif_and_no_printing() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 20, "found only {} sources", files.len());
    let forbidden = [
        "clap::",
        "use clap",
        "indicatif",
        "print!(",
        "println!(",
        "eprint!(",
        "eprintln!(",
        "std::env::args(",
        "std::process::exit(",
    ];
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for word in forbidden {
                if code.contains(word) {
                    hits.push(format!("{}:{}: {word}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "terminal code in the library:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_library_does_not_depend_on_clap_or_indicatif() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    for dep in ["clap", "indicatif"] {
        assert!(
            !manifest
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{dep} "))
                    || l.trim_start().starts_with(&format!("{dep}="))),
            "crates/golive/Cargo.toml depends on {dep}"
        );
    }
}

/// The library's network entry points are `async` and build no runtime: the binary owns the
/// one runtime, and an async caller can call the library (issue 25). A file's unit tests (after
/// its `#[cfg(test)]`) may build their own.
#[test]
fn the_library_builds_no_async_runtime() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut hits = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if !line.starts_with("//")
                && ["runtime::Builder", "Runtime::new(", "block_on("]
                    .iter()
                    .any(|w| line.contains(w))
            {
                hits.push(format!("{}:{}: {line}", f.display(), n + 1));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "the library builds a runtime:\n{}",
        hits.join("\n")
    );
}

/// The accept stages read as lists, not scripts: no function in `accept/` is over 120 lines
/// (issue 25). A function runs from its `fn` line to the `}` at its own indentation.
#[test]
fn no_accept_function_is_over_120_lines() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/accept");
    let mut files = Vec::new();
    sources(&dir, &mut files);
    assert!(files.len() >= 10, "found only {} sources", files.len());
    let mut long = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let indent = &line[..line.len() - code.len()];
            let is_fn = [
                "fn ",
                "pub fn ",
                "async fn ",
                "pub async fn ",
                "pub(super) fn ",
                "pub(super) async fn ",
                "pub(crate) fn ",
                "pub(crate) async fn ",
            ]
            .iter()
            .any(|p| code.starts_with(p));
            if !is_fn || code.ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            let Some(end) = lines[i + 1..].iter().position(|l| *l == close) else {
                continue;
            };
            if end + 2 > 120 {
                long.push(format!("{}:{}: {} lines", f.display(), i + 1, end + 2));
            }
        }
    }
    assert!(
        long.is_empty(),
        "accept functions over 120 lines:\n{}",
        long.join("\n")
    );
}

/// The public entry points the binary calls return `golive::Result`: the library names the
/// kind of an error (input, unreachable, write, internal) and the binary maps it to the exit
/// code, never the text.
#[test]
fn entry_points_return_the_librarys_typed_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let entry_points = [
        ("accept/mod.rs", "pub async fn run("),
        ("check/mod.rs", "pub fn check("),
        ("collect/mod.rs", "pub async fn collect("),
        ("contract/run.rs", "pub async fn run("),
        ("diff.rs", "pub fn diff("),
        ("load/mod.rs", "pub async fn load("),
        ("probe.rs", "pub async fn run("),
        ("agent/replay.rs", "pub async fn replay("),
        ("signoff.rs", "pub fn sign("),
        ("signoff.rs", "pub fn verify("),
        ("signoff.rs", "pub fn write_html("),
        ("triage/mod.rs", "pub fn analyze_paths("),
        ("watch/mod.rs", "pub async fn run("),
        ("watch/fleet.rs", "pub async fn run("),
        ("watch/lint.rs", "pub async fn lint("),
        ("watch/rules.rs", "pub fn rules_yaml("),
    ];
    for (file, start) in entry_points {
        let text = std::fs::read_to_string(src.join(file)).unwrap();
        let at = text
            .find(start)
            .unwrap_or_else(|| panic!("{file}: no `{start}`"));
        let signature = &text[at..at + text[at..].find('{').unwrap()];
        assert!(
            signature.contains("-> crate::Result<"),
            "{file}: `{start}` returns {signature}"
        );
    }
}
