//! What the virtio-blk driver (`blk-virtio`) and the rest of the system agree on: the schema of
//! its manifest `config` table. Plain types only; it touches nothing. The driver and the host
//! tool (which checks and encodes the table) use it. The table is optional: the driver needs no
//! settings. Also the driver's host-testable logic: how it finds a modern virtio-pci device's
//! register blocks ([`layout`]).
//!
//! ```toml
//! [[server]]
//! name = "blk0"
//! module = "blk-virtio"
//! provides = ["blk0"]
//! uses = ["pci", "mem"]
//! config = { stray_dma_probe = true }
//! ```
//! - `stray_dma_probe` (test only, default false): on a modern device whose DMA the IOMMU
//!   confines, before serving, send the device one request whose data buffer is given by a
//!   physical address (what a driver that ignored the IOMMU would do), check that the device
//!   reports it could not reach it, and reset the device. Scenario `iommu-blk-stray`.
#![no_std]

pub mod layout;

use sawmill_manifest::config::{Peer, Peers};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub stray_dma_probe: bool,
}

impl Peers for Config {
    fn peers(&mut self, _f: &mut dyn FnMut(Peer<'_>)) {}
}
