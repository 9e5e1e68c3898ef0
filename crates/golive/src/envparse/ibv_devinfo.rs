//! `ibv_devinfo`: RDMA adapters and their ports.

use serde::{Deserialize, Serialize};

use super::*;

/// One port of an HCA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IbPort {
    /// The port number.
    pub port: u32,
    /// `state`, e.g. `PORT_ACTIVE (4)`.
    pub state: Option<String>,
    /// `link_layer`: `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: Option<String>,
    /// `active_mtu`, e.g. `4096 (5)`.
    pub active_mtu: Option<String>,
}

/// One HCA of `ibv_devinfo`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hca {
    /// `hca_id`, e.g. `mlx5_0`.
    pub name: String,
    /// `transport`, e.g. `InfiniBand (0)`.
    pub transport: Option<String>,
    /// Firmware version (`fw_ver`).
    pub fw_ver: Option<String>,
    /// `vendor_part_id`, the adapter model's number.
    pub vendor_part_id: Option<String>,
    /// Its ports, in order.
    pub ports: Vec<IbPort>,
}

impl Hca {
    /// Some port's state is `PORT_ACTIVE`.
    pub fn has_active_port(&self) -> bool {
        self.ports.iter().any(|p| {
            p.state
                .as_deref()
                .is_some_and(|s| s.starts_with("PORT_ACTIVE"))
        })
    }
}

/// The HCAs of `ibv_devinfo` output, in order.
pub fn parse_ibv_devinfo(text: &str) -> Vec<Hca> {
    let text = normalize(text);
    let mut out: Vec<Hca> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let Some((key, value)) = l.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        if key == "hca_id" {
            out.push(Hca {
                name: value,
                ..Default::default()
            });
            continue;
        }
        let Some(hca) = out.last_mut() else { continue };
        match key {
            "transport" => hca.transport = Some(value),
            "fw_ver" => hca.fw_ver = Some(value),
            "vendor_part_id" => hca.vendor_part_id = Some(value),
            "port" => hca.ports.push(IbPort {
                port: value.parse().unwrap_or(0),
                ..Default::default()
            }),
            "state" => {
                if let Some(p) = hca.ports.last_mut() {
                    p.state = Some(value);
                }
            }
            "link_layer" => {
                if let Some(p) = hca.ports.last_mut() {
                    p.link_layer = Some(value);
                }
            }
            "active_mtu" => {
                if let Some(p) = hca.ports.last_mut() {
                    p.active_mtu = Some(value);
                }
            }
            _ => {}
        }
    }
    out
}
