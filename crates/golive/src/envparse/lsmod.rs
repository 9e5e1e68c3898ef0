//! `lsmod` / `/proc/modules`: the loaded kernel modules.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::*;

/// Kernel modules from `lsmod` or `/proc/modules` (also `lsmod | grep` excerpts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Modules {
    /// Modules listed in the first column.
    pub listed: BTreeSet<String>,
    /// Modules named only as users of a listed module ("Used by" column): they are
    /// loaded too, the excerpt just did not show their own line.
    pub referenced: BTreeSet<String>,
}

impl Modules {
    /// The module is loaded (listed, or used by a listed one).
    pub fn is_loaded(&self, name: &str) -> bool {
        self.listed.contains(name) || self.referenced.contains(name)
    }
    /// All loaded module names (listed or referenced).
    pub fn all(&self) -> BTreeSet<String> {
        self.listed.union(&self.referenced).cloned().collect()
    }
}

/// The modules of `lsmod` or `/proc/modules` output.
pub fn parse_modules(text: &str) -> Modules {
    let text = normalize(text);
    let mut m = Modules::default();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 3 || cols[0] == "Module" || cols[1].parse::<u64>().is_err() {
            continue;
        }
        m.listed.insert(cols[0].to_string());
        // lsmod: "name size count users"; /proc/modules: "name size count users state addr".
        if let Some(users) = cols.get(3) {
            for u in users
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty() && *u != "-")
            {
                if u.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    m.referenced.insert(u.to_string());
                }
            }
        }
    }
    m.referenced.retain(|r| !m.listed.contains(r));
    m
}
