//! Flags where they really are: what the `--config FILE` contributed to the running
//! flags, and the flag values a profile requires.

use crate::envparse::{Bundle, Launch};
use crate::profile::Profile;
use crate::report::Status;

/// Where the prefix-caching setting came from, and what the config file holds.
/// Returns evidence lines and `Unknown` when flags may hide in a file not collected.
pub(super) fn config_file_notes(b: &Bundle, l: &Launch) -> (Vec<String>, Option<Status>) {
    let mut ev = Vec::new();
    let mut status = None;
    let path = l.value("--config").unwrap_or("FILE");
    if let Some(e) = &b.config_error {
        ev.push(format!(
            "raw/vllm-config.yaml (--config {path}) cannot be read as flags: {e}"
        ));
        status = Some(Status::Unknown);
    } else if !b.config_args.is_empty() {
        let names: Vec<&str> = b
            .config_args
            .iter()
            .map(|a| a.flag.trim_start_matches('-'))
            .collect();
        ev.push(format!(
            "--config {path} (raw/vllm-config.yaml) sets {}; the command line overrides it",
            crate::text::truncate(&names.join(", "), 200)
        ));
        // The config's args come first in the merged launch: a last mention inside
        // that prefix means the file decided.
        let last = l.args.iter().rposition(|a| {
            matches!(
                a.flag.as_str(),
                "--enable-prefix-caching" | "--no-enable-prefix-caching"
            )
        });
        if let Some(i) = last {
            let source = if i < b.config_args.len() {
                "the --config file"
            } else {
                "the command line"
            };
            ev.push(format!("prefix caching is set by {source}"));
        }
    } else if l.has("--config") {
        ev.push(format!(
            "--config {path} is on the command line but its contents were not collected \
             (raw/vllm-config.yaml): flags set there are not known"
        ));
        if l.prefix_caching().is_none() {
            status = Some(Status::Unknown);
        }
    }
    (ev, status)
}

/// Flags the profile requires with a value (`[flags] values`), e.g. the recipe's
/// `--prefix-match-unit`: evidence and whether all match.
pub(super) fn required_values(profile: &Profile, l: &Launch) -> (Vec<String>, bool) {
    let mut ev = Vec::new();
    let mut ok = true;
    for (flag, want) in &profile.flags.values {
        match l.value(flag) {
            Some(v) if v.trim() == want.trim() => ev.push(format!("{flag} {v} as required")),
            Some(v) => {
                ev.push(format!("{flag} {v} but {} requires {want}", profile.name));
                ok = false;
            }
            None => {
                ev.push(format!(
                    "{flag} {want} required by {} but not in the running flags",
                    profile.name
                ));
                ok = false;
            }
        }
    }
    (ev, ok)
}
