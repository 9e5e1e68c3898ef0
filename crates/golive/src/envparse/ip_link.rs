//! `ip -br link`: the network links.

use serde::{Deserialize, Serialize};

use super::*;

/// One network interface of `ip -br link`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetLink {
    /// The interface name, e.g. `ib0`, `eth0`.
    pub name: String,
    /// Its state, e.g. `UP`, `DOWN`, `UNKNOWN`.
    pub state: String,
}

/// Parses `ip -br link` (`name state mac <flags>`).
pub fn parse_ip_link(text: &str) -> Vec<NetLink> {
    normalize(text)
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let name = cols.next()?.split('@').next()?.to_string();
            let state = cols.next()?.to_string();
            Some(NetLink { name, state })
        })
        .collect()
}
