//! Rank placement on a [`Topology`] (re-exported from [`crate::lower::topology`]): where a
//! global device id sits, the shape of a replica group, die pairing, C2C ports, the kangaring
//! engine sets and the SoC routing bits.
//!
//! Numbering (this project's; the vendor's physical numbering is not needed for results):
//! global id `g` → node `g / per_node`, device `(g % per_node) / per_device`, logical core
//! `g % per_device`. Logical core `c` of a device spans physical cores `c·lnc .. c·lnc + lnc`
//! and owns the TOP_SPs `c·k .. c·k + k` with `k = TOP_SPs per device / logical cores per
//! device`. On v3/v4 this agrees with the hardware's die split: the first half of the physical
//! cores and TOP_SPs 0..7 are die 0, the rest die 1 (docs/contract/device.md §5.1, bit 47).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::lower::topology::{Topology, C2C_PORTS_PER_DEVICE};

/// Where one rank (logical core) sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Global device id (the rank's logical core in the world).
    pub global: u32,
    /// Node.
    pub node: u32,
    /// Device within the node (the SoC chip id, docs/contract/device.md §1.4).
    pub device: u32,
    /// Logical core within the device.
    pub core: u32,
    /// Logical core within the node (the `NEURON_RT_VISIBLE_CORES` numbering).
    pub node_core: u32,
    /// Physical cores within the device.
    pub physical_cores: Range<u32>,
    /// Die of the first physical core.
    pub die: u32,
    /// TOP_SPs (indices within the device) the logical core owns.
    pub topsps: Range<u32>,
}

/// SoC address bit 47: die (docs/contract/device.md §1.4).
pub const SOC_DIE_SHIFT: u32 = 47;
/// SoC address bits 53:48: chip (device) id.
pub const SOC_CHIP_SHIFT: u32 = 48;
/// SoC address bit 54: the chip id is valid.
pub const SOC_ID_VALID: u64 = 1 << 54;
/// Bits 46:0: the local address.
pub const SOC_LOCAL_MASK: u64 = (1 << 47) - 1;
/// Neighbour-routing form: bit 50 EXIT_SENG.
pub const SOC_EXIT_SENG: u64 = 1 << 50;
/// Neighbour-routing form: bit 51 EXIT_DIE.
pub const SOC_EXIT_DIE: u64 = 1 << 51;
/// Neighbour-routing form: bit 52 NEIGHBOR_ROUTE.
pub const SOC_NEIGHBOR_ROUTE: u64 = 1 << 52;

impl Placement {
    /// The routing bits a SoC address aimed at this rank's die carries
    /// (docs/contract/device.md §1.4): id-valid, chip id = device, die. The node is not part of a
    /// SoC address: inter-node traffic goes through the network path.
    pub fn soc_route_bits(&self) -> u64 {
        SOC_ID_VALID
            | (u64::from(self.device & 0x3F) << SOC_CHIP_SHIFT)
            | (u64::from(self.die & 1) << SOC_DIE_SHIFT)
    }
    /// `local` (bits 46:0) routed to this rank's device and die.
    pub fn soc_address(&self, local: u64) -> u64 {
        self.soc_route_bits() | (local & SOC_LOCAL_MASK)
    }
}

/// The shape of a replica group on a topology (docs/contract/lowering.md §0, §3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupShape {
    /// Ranks in the group.
    pub rank_n: u32,
    /// Distinct nodes the group touches.
    pub node_n: u32,
    /// Ranks per node: the most the group has on any one node.
    pub local_rank_n: u32,
    /// Node ids, in order of first appearance in the group.
    pub nodes: Vec<u32>,
    /// Rank ids (indices into the group) on each node of `nodes`, in group order.
    pub by_node: Vec<Vec<u32>>,
}

impl GroupShape {
    /// One node only.
    pub fn is_intra(&self) -> bool {
        self.node_n == 1
    }
    /// More than one node.
    pub fn is_inter(&self) -> bool {
        self.node_n > 1
    }
    /// Every node holds the same number of ranks: `local_rank_n · node_n == rank_n`.
    pub fn is_uniform(&self) -> bool {
        self.local_rank_n * self.node_n == self.rank_n
    }
    /// The intra-node sub-groups: one per node, ranks in group order.
    pub fn intra_groups(&self) -> Vec<Vec<u32>> {
        self.by_node.clone()
    }
    /// The inter-node sub-groups of a uniform group: group `l` holds local index `l` of every
    /// node, in node order (docs/contract/lowering.md §4.7). Empty if the group is not uniform.
    pub fn inter_groups(&self) -> Vec<Vec<u32>> {
        if !self.is_uniform() {
            return Vec::new();
        }
        (0..self.local_rank_n as usize)
            .map(|l| self.by_node.iter().map(|ranks| ranks[l]).collect())
            .collect()
    }
}

/// Which path a kangaring channel's engines serve (docs/contract/lowering.md §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KangaPath {
    /// Die-to-die.
    D2d,
    /// PCIe.
    Pcie,
}

/// The DMA engines of a kangaring channel (docs/contract/lowering.md §4.4): the primary channel
/// uses 8 engines, the secondary 4.
pub fn kangaring_engines(path: KangaPath, primary: bool) -> &'static [u32] {
    match (path, primary) {
        (KangaPath::D2d, true) => &[4, 5, 6, 7, 12, 13, 14, 15],
        (KangaPath::D2d, false) => &[4, 5, 6, 7],
        (KangaPath::Pcie, true) => &[0, 1, 2, 3, 8, 9, 10, 11],
        (KangaPath::Pcie, false) => &[0, 1, 2, 3],
    }
}

/// The cross-die peer of DMA engine `seng`: `seng ^ 2` (docs/contract/device.md §1.4,
/// docs/contract/lowering.md §4.4).
pub fn cross_die_peer_engine(seng: u32) -> u32 {
    seng ^ 2
}

impl Topology {
    /// Where global device id `g` sits.
    pub fn place(&self, g: u32) -> Result<Placement> {
        if g >= self.logical_cores() {
            return Err(Error::invalid(format!(
                "global device id {g} is outside {} ({} logical cores)",
                self.name,
                self.logical_cores()
            )));
        }
        let (per_node, per_dev) = (
            self.logical_cores_per_node(),
            self.logical_cores_per_device(),
        );
        let node_core = g % per_node;
        let core = node_core % per_dev;
        let first_phys = core * self.lnc;
        let cores_per_die = self.cores_per_device / self.dies_per_device();
        let k = self.topsps_per_logical_core();
        Ok(Placement {
            global: g,
            node: g / per_node,
            device: node_core / per_dev,
            core,
            node_core,
            physical_cores: first_phys..first_phys + self.lnc,
            die: first_phys / cores_per_die,
            topsps: core * k..core * k + k,
        })
    }

    /// The shape of a replica group given as global device ids. Errors on an empty group, a
    /// duplicate, or an id outside the topology.
    pub fn group_shape(&self, group: &[u32]) -> Result<GroupShape> {
        if group.is_empty() {
            return Err(Error::invalid("the replica group is empty"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut nodes: Vec<u32> = Vec::new();
        let mut by_node: Vec<Vec<u32>> = Vec::new();
        for (r, &g) in group.iter().enumerate() {
            if !seen.insert(g) {
                return Err(Error::invalid(format!(
                    "global device id {g} appears twice in the replica group"
                )));
            }
            let node = self.place(g)?.node;
            match nodes.iter().position(|&n| n == node) {
                Some(i) => by_node[i].push(r as u32),
                None => {
                    nodes.push(node);
                    by_node.push(vec![r as u32]);
                }
            }
        }
        Ok(GroupShape {
            rank_n: group.len() as u32,
            node_n: nodes.len() as u32,
            local_rank_n: by_node.iter().map(|v| v.len() as u32).max().unwrap_or(0),
            nodes,
            by_node,
        })
    }

    /// The logical core on the other die of the same device, at the same position (the
    /// kangaring cross-die partner); `None` on a one-die device.
    pub fn die_peer(&self, g: u32) -> Result<Option<u32>> {
        let p = self.place(g)?;
        let per_dev = self.logical_cores_per_device();
        if self.dies_per_device() < 2 || per_dev < 2 {
            return Ok(None);
        }
        let half = per_dev / 2;
        let peer_core = (p.core + half) % per_dev;
        Ok(Some(g - p.core + peer_core))
    }

    /// The device on the far side of C2C port `port` (0..4) of `device` within a node, or
    /// `None` if the port is unconnected. Model (an OpenNRT choice, marked \[L\]; it agrees
    /// with `abi::nec`'s port map): ports 0 and 1 join all devices of the node into a ring
    /// (next, previous); when the node has more than 4 devices and a multiple of 4 (the
    /// 16-device trn1/trn2 nodes), ports 2 and 3 reach 4 devices ahead and behind, which
    /// makes the 4 × 4 torus; otherwise they are unconnected.
    pub fn c2c_peer(&self, device: u32, port: u32) -> Option<u32> {
        let d = self.devices_per_node;
        if device >= d || port >= C2C_PORTS_PER_DEVICE || d < 2 {
            return None;
        }
        let torus = d > 4 && d % 4 == 0;
        match port {
            0 => Some((device + 1) % d),
            1 => Some((device + d - 1) % d),
            2 if torus => Some((device + 4) % d),
            3 if torus => Some((device + d - 4) % d),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
