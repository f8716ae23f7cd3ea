//! Topology as data (docs/design.md §2.8): the simulated instance the lowering reads, and where
//! every rank sits on it.
//!
//! A [`Topology`] is a value: an instance type (or a custom shape), a number of nodes, the LNC
//! size (physical NeuronCores per logical core, 1 or 2, forced to 1 on v2 silicon as
//! `NEURON_LOGICAL_NC_CONFIG` is, docs/contract/abi.md §5.10), and the inter-node fabric (none, an
//! UltraServer pod's P2P links, or a switch). Ranks are logical cores (docs/design.md §2.6): global
//! device id `g` is logical core `g` of the world, numbered node-major, then device, then core
//! ([`Topology::place`]). A replica group's shape (node_n, local_rank_n, intra or inter,
//! docs/contract/lowering.md §0 and §3.1) comes from [`Topology::group_shape`].
//!
//! # `OPENNRT_TOPOLOGY`
//!
//! ```text
//! <topology> := <instance>[:nodes=N][:lnc=1|2]
//!             | trn2-ultraserver[:lnc=1|2]
//!             | custom:<nodes>x<devices>x<cores>[:lnc=1|2][:gen=v2|v3|v4][:fabric=none|pod|switch]
//! <instance> := trn1.2xlarge | trn1.32xlarge | trn1n.32xlarge | trn2.3xlarge | trn2.48xlarge
//!             | trn2u.48xlarge
//! ```
//!
//! Examples: `trn2.48xlarge`, `trn2.48xlarge:lnc=1`, `trn1.32xlarge:nodes=4`,
//! `trn2-ultraserver`, `custom:2x16x8:lnc=2:gen=v3`.
//!
//! * `nodes` defaults to the fewest nodes that hold the world (at least 1).
//! * `lnc` defaults to the instance's default (2 on trn2, 1 on trn1); `lnc=2` on v2 silicon is
//!   forced to 1, as the vendor does. Custom shapes default to LNC 1, generation v3, fabric none.
//! * `trn2-ultraserver` is 4 nodes of trn2u.48xlarge joined by the pod's P2P links (fabric pod);
//!   `trn2u.48xlarge` alone is a pod member too, with at most 4 nodes.
//! * `<cores>` is physical cores per device; the logical cores per device (`cores / lnc`) must not
//!   exceed the TOP_SPs of a device (6 on v2, 16 on v3/v4, docs/contract/device.md §0) since every
//!   logical core needs at least one TOP_SP of its own.
//!
//! A value that does not parse, or a world that does not fit, is an error that lists the forms.
//!
//! `job` ([`JOB_TOPOLOGY`]): in a job whose ranks span hosts, the hosts are the nodes (the
//! runtime asks the job's root where every rank lives and writes the shape in this variable's
//! place); anywhere else, the default below. Without the variable the runtime does the same
//! for a collective of the whole world, from its first go meeting (`runtime::multi_process::run`).
//!
//! **Default (no `OPENNRT_TOPOLOGY`):** the instance named by `OPENNRT_INSTANCE_TYPE` /
//! `NEURON_RT_FAKE_INSTANCE_TYPE` (with `NEURON_LOGICAL_NC_CONFIG`), as the runtime's own
//! configuration reads them, else `trn1.32xlarge`; in both cases with the fewest nodes that hold
//! the world (1 rank → 1 node; 33 ranks on trn1.32xlarge → 2 nodes). Chosen so that the same
//! environment gives the runtime and the lowering the same instance.
//!
//! Hardware facts carried as data: TOP_SPs per device (docs/contract/device.md §0, §5.1), dies
//! (docs/contract/device.md §1.4: bit 47 of a SoC address; TOP_SPs 8..15 sit on die 1), the
//! cross-die peer engine `seng ^ 2`, 4 C2C ports per MLA, and the kangaring DMA engine sets
//! (docs/contract/lowering.md §4.4). The placement of the rest (node, device, core) is this
//! project's numbering.

pub(super) mod parse;
pub(super) mod place;

use crate::error::{Error, Result};

/// Silicon generation (docs/contract/lowering.md §0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Generation {
    /// Sunda / Trn1 (NeuronCore-v2).
    V2,
    /// Cayman / Trn2.
    V3,
    /// Mariana / Trn3.
    V4,
}

impl Generation {
    /// libncfw arch id of the TOP_SP (docs/contract/carrier.md §2.1): 5 v2, 12 v3, 20 v4.
    pub fn ncfw_arch_id(self) -> u32 {
        match self {
            Generation::V2 => 5,
            Generation::V3 => 12,
            Generation::V4 => 20,
        }
    }
    /// TOP_SP sequencers per device (docs/contract/device.md §0): 6 on v2, 16 on v3/v4.
    pub fn topsps_per_device(self) -> u32 {
        match self {
            Generation::V2 => 6,
            Generation::V3 | Generation::V4 => 16,
        }
    }
    /// Dies per device: v3/v4 route die 1 with SoC address bit 47 (docs/contract/device.md §1.4,
    /// §5.1); v2 is modelled as one die.
    pub fn dies_per_device(self) -> u32 {
        match self {
            Generation::V2 => 1,
            Generation::V3 | Generation::V4 => 2,
        }
    }
    /// Physical NeuronCores per device (v4 assumed equal to v3).
    pub fn physical_cores(self) -> u32 {
        match self {
            Generation::V2 => 2,
            Generation::V3 | Generation::V4 => 8,
        }
    }
    /// CCE elements per descriptor (docs/contract/lowering.md §5.2).
    pub fn cce_max_elems(self) -> u64 {
        match self {
            Generation::V2 => 1024,
            Generation::V3 | Generation::V4 => 2048,
        }
    }
    /// Most descriptors per packet (TX, RX), docs/contract/lowering.md §5.2.
    pub fn max_descs_per_packet(self) -> (u32, u32) {
        match self {
            Generation::V2 => (128, 128),
            Generation::V3 | Generation::V4 => (65, 60),
        }
    }
    /// `v2` / `v3` / `v4`.
    pub fn name(self) -> &'static str {
        match self {
            Generation::V2 => "v2",
            Generation::V3 => "v3",
            Generation::V4 => "v4",
        }
    }
    /// The instance family it ships in: `trn1` / `trn2` / `trn3`.
    pub fn family_name(self) -> &'static str {
        match self {
            Generation::V2 => "trn1",
            Generation::V3 => "trn2",
            Generation::V4 => "trn3",
        }
    }
    /// Parse `v2|v3|v4` or the family name.
    pub fn parse(s: &str) -> Option<Generation> {
        [Generation::V2, Generation::V3, Generation::V4]
            .into_iter()
            .find(|g| {
                let s = s.trim();
                g.name().eq_ignore_ascii_case(s) || g.family_name().eq_ignore_ascii_case(s)
            })
    }
}

/// How nodes reach each other (docs/contract/lowering.md §3.1; `nec_pod_type_t` of the ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fabric {
    /// Nodes talk over the network only (or there is one node).
    None,
    /// An UltraServer pod: same-position devices of the pod's nodes are linked P2P.
    PodP2p,
    /// A switch fabric joins every device.
    Switch,
}

impl Fabric {
    /// `none` / `pod` / `switch`.
    pub fn name(self) -> &'static str {
        match self {
            Fabric::None => "none",
            Fabric::PodP2p => "pod",
            Fabric::Switch => "switch",
        }
    }
    /// Parse [`Fabric::name`].
    pub fn parse(s: &str) -> Option<Fabric> {
        [Fabric::None, Fabric::PodP2p, Fabric::Switch]
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
    }
}

/// One simulated instance type (one node).
///
/// Its methods are the instance policy the ABI answers from (`nrt.h` counts and memory,
/// `nec.h` callbacks): which devices exist, how they form a ring, UltraServer pods, nominal HBM.
/// Readings marked (L) are OpenNRT's choices where the vendor's semantics are not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceType {
    /// EC2 name, e.g. `trn1.32xlarge`.
    pub name: &'static str,
    /// `NRT_INSTANCE_*` family value (docs/contract/abi.md §2.2).
    pub family: u32,
    /// `NRT_INSTANCE_SIZE_*` value (docs/contract/abi.md §2.2).
    pub size: u32,
    /// Neuron devices.
    pub devices: u32,
    /// Physical NeuronCores per device.
    pub cores_per_device: u32,
    /// Default logical-core size (`NEURON_LOGICAL_NC_CONFIG`).
    pub default_lnc: u32,
    /// Whether LNC 2 is allowed (forced to 1 on v2 silicon).
    pub lnc2_allowed: bool,
    /// `arch_name` reported by `nrt_get_instance_info`.
    pub arch_name: &'static str,
    /// Silicon generation.
    pub generation: Generation,
    /// Nodes of the UltraServer pod this instance is a member of (1: not a pod member).
    pub pod_nodes: u32,
}

impl InstanceType {
    /// libncfw arch id of the TOP_SP (docs/contract/carrier.md §2.1): 5 v2, 12 v3, 20 v4.
    pub fn ncfw_arch_id(&self) -> u32 {
        self.generation.ncfw_arch_id()
    }
    /// Look an instance up by EC2 name.
    pub fn by_name(name: &str) -> Option<InstanceType> {
        INSTANCE_TYPES
            .iter()
            .find(|t| t.name == name.trim())
            .copied()
    }
    /// Logical cores per device with logical cores of `lnc` physical cores.
    pub fn logical_cores_per_device(&self, lnc: u32) -> u32 {
        self.cores_per_device / lnc
    }
    /// The logical core size in effect when `requested` is asked for (None: the instance's
    /// default). 2 is forced to 1 on v2 silicon, which has no LNC 2 (docs/contract/abi.md §5.10);
    /// None when `requested` is neither 1 nor 2. Both the runtime's `NEURON_LOGICAL_NC_CONFIG`
    /// and the lowering's `--topology …:lnc=` go through here.
    pub fn effective_lnc(&self, requested: Option<u32>) -> Option<u32> {
        match requested.unwrap_or(self.default_lnc) {
            1 => Some(1),
            2 if self.lnc2_allowed => Some(2),
            2 => Some(1),
            _ => None,
        }
    }
    /// Logical cores on the whole instance (one node) with logical cores of `lnc`.
    pub fn logical_cores(&self, lnc: u32) -> u32 {
        self.devices * self.logical_cores_per_device(lnc)
    }
    /// Nominal HBM of one physical core: 16 GiB on v2 (trn1), 12 GiB on v3 and later. The
    /// software device does not enforce it; `nrt_get_vnc_memory_stats` reports it as the limit.
    pub fn hbm_per_physical_core(&self) -> u64 {
        match self.generation {
            Generation::V2 => 16 << 30,
            Generation::V3 | Generation::V4 => 12 << 30,
        }
    }
    /// Nominal HBM of one logical core of `lnc` physical cores.
    pub fn hbm_per_logical_core(&self, lnc: u32) -> u64 {
        self.hbm_per_physical_core() * u64::from(lnc)
    }
    /// Device `dev` as an index of this instance's devices (`0..devices`), else an error naming
    /// the argument `what` and the range. Devices are numbered alike by host device id, RID
    /// (routing id) and MLA index: the simulated maps are the identity.
    pub fn device(&self, dev: i64, what: &str) -> Result<u32> {
        u32::try_from(dev)
            .ok()
            .filter(|d| *d < self.devices)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "{what} {dev} is not a Neuron device of the instance (0..{})",
                    self.devices
                ))
                .with_field(what)
                .with_values(format!("0..{}", self.devices), dev)
            })
    }
    /// As [`InstanceType::device`] for an id the caller passes unsigned (a RID or a libnccom
    /// device id); its error does not name the range.
    pub fn device_id(&self, id: u32, what: &str) -> Result<u32> {
        if id >= self.devices {
            return Err(
                Error::invalid(format!("{what} {id} is not a device of the instance"))
                    .with_field(what)
                    .with_values(format!("0..{}", self.devices), id),
            );
        }
        Ok(id)
    }
    /// The synthetic PCI address (domain, bus, slot, function) of device `dev`: domain 0, bus
    /// `0x10 + dev`, slot 0, function 0, unique per device.
    pub fn pci_bdf(&self, dev: i64, what: &str) -> Result<(u32, u32, u8, u8)> {
        Ok((0, 0x10 + self.device(dev, what)?, 0, 0))
    }
    /// (L) The device reached from device `dev` through `port`: the devices form a ring, port
    /// 0 reaching the next device and port 1 the previous one. An error for a single-device
    /// instance (no peers) or any other port; `dev` must already be a device
    /// ([`InstanceType::device`]).
    pub fn ring_peer(&self, dev: u32, port: i64) -> Result<u32> {
        let n = self.devices;
        if n < 2 {
            return Err(Error::invalid(
                "a single-device instance has no peer devices",
            ));
        }
        match port {
            0 => Ok((dev + 1) % n),
            1 => Ok((dev + n - 1) % n),
            _ => Err(Error::invalid(format!(
                "port {port} is not connected (ports 0 and 1 form the ring)"
            ))),
        }
    }
    /// The nodes of the UltraServer pod this instance is a member of; `None` when it is not a
    /// pod member.
    pub fn pod(&self) -> Option<u32> {
        (self.pod_nodes > 1).then_some(self.pod_nodes)
    }
    /// (L) The pod node reached from `node` at `port_distance` over P2P links, seen from device
    /// `dev`: `(node + port_distance) % nodes`. An error when this instance is not a pod member,
    /// `dev` is not a device or `node` not a node of the pod (the messages name the arguments
    /// of `nec_get_p2p_pod_peer_node`, its caller).
    pub fn pod_peer_node(&self, dev: u32, node: i64, port_distance: u32) -> Result<u32> {
        let nodes = self
            .pod()
            .ok_or_else(|| Error::invalid(format!("{} is not an UltraServer pod", self.name)))?;
        self.device_id(dev, "nec_dev_id")?;
        let n = u32::try_from(node)
            .ok()
            .filter(|n| *n < nodes)
            .ok_or_else(|| {
                Error::invalid(format!("node {node} is not a node of the {nodes}-node pod"))
            })?;
        Ok((n + port_distance % nodes) % nodes)
    }
    /// (L) Whether device `local_rid` of node `local_node` reaches device `remote_rid` of node
    /// `remote_node` directly: always on the same node; across nodes, never over no fabric,
    /// only between same-position devices (equal RIDs) over a pod's P2P links, always through
    /// a switch. `fabric` is asked for only across nodes, so a fabric the caller named wrongly
    /// is an error only where it matters. Both RIDs must be devices of the instance (the
    /// messages name the arguments of `nec_pod_node_can_access_peer_node`, its caller).
    pub fn can_access_peer(
        &self,
        local_rid: u32,
        local_node: u32,
        remote_rid: u32,
        remote_node: u32,
        fabric: impl FnOnce() -> Result<Fabric>,
    ) -> Result<bool> {
        self.device_id(local_rid, "local_rid")?;
        self.device_id(remote_rid, "remote_rid")?;
        if local_node == remote_node {
            return Ok(true);
        }
        Ok(match fabric()? {
            Fabric::None => false,
            Fabric::PodP2p => local_rid == remote_rid,
            Fabric::Switch => true,
        })
    }
}

const fn inst(
    name: &'static str,
    family: u32,
    size: u32,
    devices: u32,
    generation: Generation,
    pod_nodes: u32,
) -> InstanceType {
    let v2 = matches!(generation, Generation::V2);
    InstanceType {
        name,
        family,
        size,
        devices,
        cores_per_device: if v2 { 2 } else { 8 },
        default_lnc: if v2 { 1 } else { 2 },
        lnc2_allowed: !v2,
        arch_name: if v2 { "trn1" } else { "trn2" },
        generation,
        pod_nodes,
    }
}

/// The instance types OpenNRT can simulate.
pub const INSTANCE_TYPES: &[InstanceType] = &[
    inst("trn1.2xlarge", 2, 1, 1, Generation::V2, 1),
    inst("trn1.32xlarge", 2, 6, 16, Generation::V2, 1),
    inst("trn1n.32xlarge", 3, 6, 16, Generation::V2, 1),
    inst("trn2.3xlarge", 5, 8, 1, Generation::V3, 1),
    inst("trn2.48xlarge", 5, 7, 16, Generation::V3, 1),
    inst("trn2u.48xlarge", 9, 7, 16, Generation::V3, 4),
];

/// The default instance when none is named.
pub const DEFAULT_INSTANCE: &str = "trn1.32xlarge";

/// The env var choosing the topology.
pub const TOPOLOGY_ENV: &str = "OPENNRT_TOPOLOGY";

/// The `OPENNRT_TOPOLOGY` value that asks for the job's hosts as the nodes: a job spanning
/// hosts derives its shape from where its ranks live (`runtime::multi_process::host`); anywhere
/// else it means the default.
pub const JOB_TOPOLOGY: &str = "job";

/// The accepted `OPENNRT_TOPOLOGY` forms, for error messages.
pub const TOPOLOGY_FORMS: &str = "<instance>[:nodes=N][:lnc=1|2] (instance: trn1.2xlarge, \
trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge); \
trn2-ultraserver[:lnc=1|2]; custom:<nodes>x<devices>x<cores>[:lnc=1|2][:gen=v2|v3|v4]\
[:fabric=none|pod|switch]";

/// Nodes in a trn2 UltraServer.
pub const ULTRASERVER_NODES: u32 = 4;
/// C2C (chip-to-chip) ports per MLA, i.e. per device (docs/contract/device.md §1.4).
pub const C2C_PORTS_PER_DEVICE: u32 = 4;
/// Most devices a node can address: the SoC chip-id field is 6 bits (docs/contract/device.md §1.4).
pub const MAX_DEVICES_PER_NODE: u32 = 64;
/// Most nodes a topology may have (keeps every count within `u32`).
pub const MAX_NODES: u32 = 1 << 16;

/// A simulated machine: `nodes` identical nodes of `devices_per_node` devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Canonical spelling (parses back to the same value).
    pub name: String,
    /// The instance type of every node; `None` for a custom shape.
    pub instance: Option<InstanceType>,
    /// Silicon generation.
    pub generation: Generation,
    /// Nodes.
    pub nodes: u32,
    /// Devices per node.
    pub devices_per_node: u32,
    /// Physical NeuronCores per device.
    pub cores_per_device: u32,
    /// Physical cores per logical core (1 or 2).
    pub lnc: u32,
    /// Inter-node fabric.
    pub fabric: Fabric,
}

impl Topology {
    /// `nodes` nodes of instance `name` (default: the fewest that hold `world` ranks), with
    /// LNC `lnc` (default: the instance's; 2 is forced to 1 on v2).
    pub fn instance(
        name: &str,
        nodes: Option<u32>,
        lnc: Option<u32>,
        world: u32,
    ) -> Result<Topology> {
        let it = InstanceType::by_name(name).ok_or_else(|| {
            Error::invalid(format!("unknown instance type {name:?}; {TOPOLOGY_FORMS}"))
        })?;
        let lnc = it.effective_lnc(lnc).ok_or_else(|| {
            Error::invalid(format!(
                "LNC {} must be 1 or 2",
                lnc.unwrap_or(it.default_lnc)
            ))
        })?;
        let per_node = it.devices * it.cores_per_device / lnc;
        let nodes = nodes.unwrap_or_else(|| world.div_ceil(per_node).max(1));
        if nodes > MAX_NODES {
            return Err(Error::invalid(format!(
                "{nodes} nodes exceed the {MAX_NODES} a topology may have"
            )));
        }
        if it.pod_nodes > 1 && nodes > it.pod_nodes {
            return Err(Error::invalid(format!(
                "{} is a member of a {}-node UltraServer pod; {nodes} nodes do not fit one pod",
                it.name, it.pod_nodes
            )));
        }
        let t = Topology {
            name: if it.pod_nodes == ULTRASERVER_NODES && nodes == ULTRASERVER_NODES {
                format!("trn2-ultraserver:lnc={lnc}")
            } else {
                format!("{}:nodes={nodes}:lnc={lnc}", it.name)
            },
            instance: Some(it),
            generation: it.generation,
            nodes,
            devices_per_node: it.devices,
            cores_per_device: it.cores_per_device,
            lnc,
            fabric: if it.pod_nodes > 1 {
                Fabric::PodP2p
            } else {
                Fabric::None
            },
        };
        t.check_world(world)?;
        Ok(t)
    }

    /// A custom shape: `nodes × devices × cores` (physical cores per device).
    pub fn custom(
        nodes: u32,
        devices: u32,
        cores: u32,
        lnc: u32,
        generation: Generation,
        fabric: Fabric,
    ) -> Result<Topology> {
        let lnc = match (lnc, generation) {
            (1, _) | (2, Generation::V2) => 1,
            (2, _) => 2,
            (other, _) => return Err(Error::invalid(format!("LNC {other} must be 1 or 2"))),
        };
        if nodes == 0 || devices == 0 || cores == 0 {
            return Err(Error::invalid(
                "nodes, devices and cores must be at least 1",
            ));
        }
        if nodes > MAX_NODES {
            return Err(Error::invalid(format!(
                "{nodes} nodes exceed the {MAX_NODES} a topology may have"
            )));
        }
        if devices > MAX_DEVICES_PER_NODE {
            return Err(Error::invalid(format!(
                "{devices} devices per node exceed the {MAX_DEVICES_PER_NODE} a 6-bit chip id routes"
            )));
        }
        if cores % lnc != 0 {
            return Err(Error::invalid(format!(
                "{cores} cores per device do not split into logical cores of {lnc}"
            )));
        }
        if cores / lnc > generation.topsps_per_device() {
            return Err(Error::invalid(format!(
                "{} logical cores per device exceed the {} TOP_SPs of a {} device",
                cores / lnc,
                generation.topsps_per_device(),
                generation.name()
            )));
        }
        Ok(Topology {
            name: format!(
                "custom:{nodes}x{devices}x{cores}:lnc={lnc}:gen={}:fabric={}",
                generation.name(),
                fabric.name()
            ),
            instance: None,
            generation,
            nodes,
            devices_per_node: devices,
            cores_per_device: cores,
            lnc,
            fabric,
        })
    }

    /// The default for a world of `world` ranks: the fewest trn1.32xlarge nodes that hold it
    /// (an error only for a world beyond [`MAX_NODES`] nodes).
    pub fn for_world(world: u32) -> Result<Topology> {
        Topology::instance(DEFAULT_INSTANCE, None, None, world)
    }

    /// An error unless a world of `world` ranks fits (global ids `0..world`).
    pub fn check_world(&self, world: u32) -> Result<()> {
        if world > self.logical_cores() {
            return Err(Error::invalid(format!(
                "a world of {world} ranks does not fit {} ({} logical cores)",
                self.name,
                self.logical_cores()
            )));
        }
        Ok(())
    }

    /// Logical cores (ranks) per device.
    pub fn logical_cores_per_device(&self) -> u32 {
        self.cores_per_device / self.lnc
    }
    /// Logical cores per node.
    pub fn logical_cores_per_node(&self) -> u32 {
        self.devices_per_node * self.logical_cores_per_device()
    }
    /// Logical cores in the whole topology: the largest world it holds.
    pub fn logical_cores(&self) -> u32 {
        self.nodes * self.logical_cores_per_node()
    }
    /// TOP_SPs per device.
    pub fn topsps_per_device(&self) -> u32 {
        self.generation.topsps_per_device()
    }
    /// TOP_SPs each logical core owns (an even share of its device's).
    pub fn topsps_per_logical_core(&self) -> u32 {
        self.topsps_per_device() / self.logical_cores_per_device()
    }
    /// Dies per device: the generation's, when the cores split evenly over them.
    pub fn dies_per_device(&self) -> u32 {
        let d = self.generation.dies_per_device();
        if self.cores_per_device % d == 0 {
            d
        } else {
            1
        }
    }
    /// C2C ports per device (4 per MLA, docs/contract/device.md §1.4).
    pub fn c2c_ports(&self) -> u32 {
        C2C_PORTS_PER_DEVICE
    }
}

pub use crate::lower::topology::place::*;

#[cfg(test)]
mod tests;
