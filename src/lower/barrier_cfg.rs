//! Building the `neff_barrier_config` of every TOP_SP of a replica group: the device barrier
//! (`{1,4,4,1}` steps, docs/contract/device.md §7.1) and the host barrier view (§7.2). The bytes
//! are [`crate::isa::barrier_cfg`]'s; `device::barrier` executes them.
//!
//! # Participants and semaphores
//!
//! Every TOP_SP of every rank of the group participates (Choice: each TOP_SP has its own NCFW
//! context and with it its own `barrier_configs`, docs/contract/carrier.md §3.2.7), in group order,
//! then rank-local TOP_SP order. Addresses come from the collective programs' [`AddressMap`] (same
//! chip ids, same device TOP_SP numbering), in the READ-window form the firmware stores
//! (docs/contract/device.md §9.2), routed when the semaphore is on another chip. Two reserved ids
//! (docs/contract/lowering.md §6.4) are used: [`GATHER_SEM`] = BARRIER0 (2) counts arrivals,
//! [`RELEASE_SEM`] = BARRIER1 (3) carries the leaders' exchange and the release. Keeping them apart
//! means an early release or peer signal can never be counted as an arrival.
//!
//! # Slot semantics (Choice; docs/contract/device.md §7.1 is \[M\] flow)
//!
//! A slot naming a semaphore of the executing TOP_SP itself is an **EXIT** (wait `≥ target`, then
//! consume `target` with `wait_ge_and_dec`); a slot naming another TOP_SP's semaphore is an
//! **ENTRY** (+1 through its INC window, READ + 0x800), target 0. This is the spec's wording
//! ("ENTRY … each peer's barrier_sema", "EXIT … on each own semaphore"). It departs from the
//! firmware step table's fixed op per step (step 0 ENTRY, step 3 EXIT) for leaders: a leader must
//! *wait* for its members before it signals its peers, or a peer could release while a member has
//! not arrived; with ENTRY-only steps before the waits no correct two-level barrier exists.
//!
//! # Leaders and rounds (Choice)
//!
//! * **Chip leader**: the first participant on each chip (lowest group rank, TOP_SP 0). Members
//!   arrive at it: step 0, ENTRY on the leader's GATHER; the leader's step 0 is EXIT GATHER ≥
//!   members (fan-in is free: all arrivals add to one semaphore).
//! * **Roots** exchange in one round: step 1 ENTRY every other root's RELEASE, step 2 EXIT own
//!   RELEASE ≥ roots − 1. Step 1/2 hold [`StepShape::slots`] entries (4, or 2 on a switch fabric,
//!   whose shape is `{1,2,2,1}`), so at most 5 (3) roots. More chip leaders than that are
//!   gathered one level up: the first chip leader of each node leads its node's chip leaders; if
//!   the node leaders are still too many, they are split into exactly 5 (3) contiguous blocks of
//!   near-equal size (leader `j` of `n` goes to block `j·5 / n`), each led by its first. A non-root leader gathers (step 0), then signals its parent (step 1, ENTRY GATHER).
//! * **Release**: step 3 has one slot, so the release runs as a chain: each root releases the
//!   next participant of its subtree in preorder (step 3 ENTRY on its RELEASE), every non-root
//!   waits for it (step 2, EXIT RELEASE ≥ 1) and passes it on (step 3). The release of a subtree
//!   of `n` TOP_SPs takes `n` hops — the price of the one-slot step 3; any group size is built.
//!   Where a subtree spans several chips the chain crosses them in step 3 (which the firmware
//!   table labels INTRA_CHIP; the label is not in the bytes).
//!
//! Every semaphore ends at 0: each GATHER receives exactly as many arrivals as its leader waits
//! for, each RELEASE exactly one release (non-roots) or roots − 1 signals (roots).
//!
//! The DMA fields (`m2s_val`, `s2m_val`, `dma_sync_sema`, `tdrbp`, `desc_count`, …) stay 0: our
//! ENTRY is a direct semaphore store, not a descriptor ring (`device::barrier` rejects non-zero
//! DMA fields instead of ignoring them).
//!
//! # Host barrier (docs/contract/device.md §7.2; Choice for the ids)
//!
//! The leader of each rank (rank-local TOP_SP 0, the `leader` of `neff_configs`) gets
//! `{barrier_start: own START, barrier_done: own DONE}`; the rank's other TOP_SPs get
//! `{barrier_start: 0, barrier_done: the leader's DONE}`. Ids: host-CC mode DONE = HOST_BARRIER0
//! (6), START = HOST_BARRIER1 (7); otherwise DONE = BARRIER0 (2), START = BARRIER1 (3).
//! docs/contract/device.md §7.2 names id 6 / id 2 for `barrier_done`; docs/contract/carrier.md
//! Appendix A lists "6/7 start/done" — we follow docs/contract/device.md, the statement that names
//! the field; flip [`host_barrier_ids`] if dumps say otherwise.

use crate::error::{Error, Result};
use crate::isa::barrier_cfg::{
    BarrierConfig, BarrierType, DeviceBarrier, HostBarrier, StepShape, BARRIER_CONFIG_BYTES,
};
use crate::isa::evtsem::SemWindow;
use crate::lower::addrmap::{AddressMap, BufferSizes, RankPlace};
use crate::lower::program::{sem_id, Sem};
use crate::lower::topology::{Fabric, Topology};

/// Arrivals are counted here (BARRIER0, docs/contract/lowering.md §6.4).
pub const GATHER_SEM: u8 = sem_id::BARRIER0;
/// Root exchange and release (BARRIER1).
pub const RELEASE_SEM: u8 = sem_id::BARRIER1;

/// `(barrier_start id, barrier_done id)` of the host barrier (module doc).
pub fn host_barrier_ids(host_cc: bool) -> (u8, u8) {
    if host_cc {
        (sem_id::HOST_BARRIER1, sem_id::HOST_BARRIER0)
    } else {
        (sem_id::BARRIER1, sem_id::BARRIER0)
    }
}

/// The highest level at which a participant leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Leads nothing: arrives at its chip leader.
    Member,
    /// Leads its chip.
    ChipLeader,
    /// Leads its node's chip leaders.
    NodeLeader,
    /// Leads a block of node leaders.
    BlockLeader,
}

/// One participating TOP_SP and its place in the barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarrierParticipant {
    /// Index of its rank in the group.
    pub rank: u32,
    /// The rank's global device id.
    pub global: u32,
    /// Rank-local TOP_SP.
    pub topsp: u8,
    /// Node.
    pub node: u32,
    /// Routed chip id (the machine's chip).
    pub chip: u8,
    /// Device TOP_SP index on the chip.
    pub device_topsp: u8,
    /// Highest level it leads.
    pub role: Role,
    /// Whom it arrives at (`None` for a root).
    pub parent: Option<usize>,
    /// Who arrives at it, members first, then child leaders.
    pub children: Vec<usize>,
    /// The next participant it releases (step 3).
    pub release_next: Option<usize>,
}

/// The device barrier of a group: participants, roots and one config per participant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceBarrierPlan {
    /// Step shape of the fabric.
    pub shape: StepShape,
    /// The firmware `barrier_type` of steps 1–2 (a label: the bytes do not carry it).
    pub peer_type: BarrierType,
    /// Participants in group order, then TOP_SP order.
    pub participants: Vec<BarrierParticipant>,
    /// Indices of the roots.
    pub roots: Vec<usize>,
    /// `configs[i]` belongs to `participants[i]`.
    pub configs: Vec<DeviceBarrier>,
}

/// One TOP_SP's host barrier view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostBarrierEntry {
    /// Index of its rank in the group.
    pub rank: u32,
    /// Rank-local TOP_SP.
    pub topsp: u8,
    /// Routed chip id.
    pub chip: u8,
    /// Device TOP_SP.
    pub device_topsp: u8,
    /// The rank's leader (reporter) TOP_SP.
    pub leader: bool,
    /// The view.
    pub config: HostBarrier,
}

/// The host barrier views of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostBarrierPlan {
    /// Host-driven CC mode (ids 6/7).
    pub host_cc: bool,
    /// One entry per TOP_SP, group order then TOP_SP order.
    pub entries: Vec<HostBarrierEntry>,
}

/// The semaphore-only address map of `group` on `topo` (no buffers).
fn address_map(topo: &Topology, group: &[u32]) -> Result<AddressMap> {
    topo.group_shape(group)?; // empty group, duplicates, ids outside the topology
    let places = group
        .iter()
        .map(|&g| {
            topo.place(g).map(|p| RankPlace {
                node: p.node,
                device: p.device,
                core: p.core,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    AddressMap::new(places, topo.lnc, topo.generation, BufferSizes::default())
}

/// Shape and step-1/2 label of a fabric: a switch has `{1,2,2,1}` (INTRA_RACK within a node,
/// INTER_RACK across); a pod talks INTRA_POD; otherwise INTER_CHIP.
fn shape_of(topo: &Topology, multi_node: bool) -> (StepShape, BarrierType) {
    match topo.fabric {
        Fabric::Switch if multi_node => (StepShape::SWITCH, BarrierType::InterRack),
        Fabric::Switch => (StepShape::SWITCH, BarrierType::IntraRack),
        Fabric::PodP2p => (StepShape::STANDARD, BarrierType::IntraPod),
        Fabric::None => (StepShape::STANDARD, BarrierType::InterChip),
    }
}

/// Group `members` by `keys` (`keys[j]` is `members[j]`'s; first-appearance order); the first
/// of each group leads it, the others get it as parent. Returns the leaders.
fn elect(p: &mut [BarrierParticipant], members: &[usize], keys: &[u64]) -> Vec<usize> {
    let mut leaders: Vec<(u64, usize)> = Vec::new();
    for (&i, &k) in members.iter().zip(keys) {
        match leaders.iter().find(|&&(lk, _)| lk == k) {
            Some(&(_, l)) => p[i].parent = Some(l),
            None => leaders.push((k, i)),
        }
    }
    leaders.into_iter().map(|(_, l)| l).collect()
}

/// Plan the device barrier of `group` (global device ids) on `topo` (module doc).
pub fn plan_device_barrier(topo: &Topology, group: &[u32]) -> Result<DeviceBarrierPlan> {
    let map = address_map(topo, group)?;
    let per_rank = map.topsps_per_rank();
    let mut p = Vec::new();
    for (r, &g) in group.iter().enumerate() {
        let r = r as u32;
        for t in 0..per_rank {
            p.push(BarrierParticipant {
                rank: r,
                global: g,
                topsp: t,
                node: topo.place(g)?.node,
                chip: map.chip_id(r)?,
                device_topsp: map.device_topsp(r, t)?,
                role: Role::Member,
                parent: None,
                children: Vec::new(),
                release_next: None,
            });
        }
    }
    let multi_node = topo.group_shape(group)?.is_inter();
    let (shape, peer_type) = shape_of(topo, multi_node);
    let max_roots = shape.slots(1) + 1;
    let all: Vec<usize> = (0..p.len()).collect();
    let chips: Vec<u64> = p.iter().map(|q| u64::from(q.chip)).collect();
    let mut leaders = elect(&mut p, &all, &chips);
    let mut level = Role::ChipLeader;
    for l in &leaders {
        p[*l].role = level;
    }
    while leaders.len() > max_roots {
        let (keys, next): (Vec<u64>, Role) = if level == Role::ChipLeader {
            (
                leaders.iter().map(|&l| u64::from(p[l].node)).collect(),
                Role::NodeLeader,
            )
        } else {
            let n = leaders.len();
            let keys = (0..n).map(|j| (j * max_roots / n) as u64).collect();
            (keys, Role::BlockLeader)
        };
        let ls = leaders.clone();
        leaders = elect(&mut p, &ls, &keys);
        level = next;
        for l in &leaders {
            p[*l].role = level;
        }
    }
    // Children in participant order: members (assigned first) precede child leaders.
    for role in [Role::Member, Role::ChipLeader, Role::NodeLeader] {
        for i in 0..p.len() {
            if p[i].role == role {
                if let Some(par) = p[i].parent {
                    p[par].children.push(i);
                }
            }
        }
    }
    for &root in &leaders {
        let mut order = Vec::new();
        preorder(&p, root, &mut order);
        for w in order.windows(2) {
            p[w[0]].release_next = Some(w[1]);
        }
    }
    let configs = (0..p.len())
        .map(|i| device_config(&map, &p, &leaders, i))
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceBarrierPlan {
        shape,
        peer_type,
        participants: p,
        roots: leaders,
        configs,
    })
}

fn preorder(p: &[BarrierParticipant], i: usize, out: &mut Vec<usize>) {
    out.push(i);
    for &c in &p[i].children {
        preorder(p, c, out);
    }
}

/// The READ-window address of participant `to`'s semaphore `id` as `from` addresses it.
fn read_addr(
    map: &AddressMap,
    p: &[BarrierParticipant],
    from: usize,
    to: usize,
    id: u8,
) -> Result<u64> {
    let sem = Sem {
        rank: p[to].rank,
        topsp: p[to].topsp,
        id,
    };
    map.sem_addr(p[from].rank, sem, SemWindow::Read)
}

/// Participant `i`'s config (module doc, "Leaders and rounds").
fn device_config(
    map: &AddressMap,
    p: &[BarrierParticipant],
    roots: &[usize],
    i: usize,
) -> Result<DeviceBarrier> {
    let mut d = DeviceBarrier::default();
    let me = &p[i];
    let own = |id| read_addr(map, p, i, i, id);
    if !me.children.is_empty() {
        d.steps[0].barrier_sema[0] = own(GATHER_SEM)?;
        d.steps[0].target_sema_val[0] = me.children.len() as u32;
    }
    match me.parent {
        Some(par) if me.children.is_empty() => {
            d.steps[0].barrier_sema[0] = read_addr(map, p, i, par, GATHER_SEM)?;
        }
        Some(par) => d.steps[1].barrier_sema[0] = read_addr(map, p, i, par, GATHER_SEM)?,
        None => {
            let peers = roots.iter().filter(|&&r| r != i);
            for (k, &r) in peers.enumerate() {
                d.steps[1].barrier_sema[k] = read_addr(map, p, i, r, RELEASE_SEM)?;
            }
        }
    }
    let release_wait = match me.parent {
        Some(_) => 1,
        None => roots.len() as u32 - 1,
    };
    if release_wait > 0 {
        d.steps[2].barrier_sema[0] = own(RELEASE_SEM)?;
        d.steps[2].target_sema_val[0] = release_wait;
    }
    if let Some(n) = me.release_next {
        d.steps[3].barrier_sema[0] = read_addr(map, p, i, n, RELEASE_SEM)?;
    }
    Ok(d)
}

impl DeviceBarrierPlan {
    /// The 0x128-byte `neff_barrier_config` of every participant (gate bit set).
    pub fn encoded(&self) -> Vec<[u8; BARRIER_CONFIG_BYTES]> {
        self.configs
            .iter()
            .map(|c| BarrierConfig::Device(*c).encode())
            .collect()
    }

    /// Check every config against the step shape: no active slot beyond `shape.slots(s)`.
    pub fn check_shape(&self) -> Result<()> {
        for (i, c) in self.configs.iter().enumerate() {
            for (s, st) in c.steps.iter().enumerate() {
                if let Some((k, ..)) = st.active().find(|&(k, ..)| k >= self.shape.slots(s)) {
                    let q = &self.participants[i];
                    return Err(Error::invalid(format!(
                        "device barrier: rank {} TOP_SP {} step {s} slot {k} is beyond the step \
                         shape {:?} (docs/contract/device.md §7.1)",
                        q.rank, q.topsp, self.shape.0
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Plan the host barrier views of `group` on `topo` (module doc, "Host barrier").
pub fn plan_host_barrier(topo: &Topology, group: &[u32], host_cc: bool) -> Result<HostBarrierPlan> {
    let map = address_map(topo, group)?;
    let (start, done) = host_barrier_ids(host_cc);
    let mut entries = Vec::new();
    for r in 0..group.len() as u32 {
        for t in 0..map.topsps_per_rank() {
            let leader_sem = |id| Sem {
                rank: r,
                topsp: 0,
                id,
            };
            let config = HostBarrier {
                barrier_start: if t == 0 {
                    map.sem_addr(r, leader_sem(start), SemWindow::Read)?
                } else {
                    0
                },
                barrier_done: map.sem_addr(r, leader_sem(done), SemWindow::Read)?,
            };
            entries.push(HostBarrierEntry {
                rank: r,
                topsp: t,
                chip: map.chip_id(r)?,
                device_topsp: map.device_topsp(r, t)?,
                leader: t == 0,
                config,
            });
        }
    }
    Ok(HostBarrierPlan { host_cc, entries })
}

impl HostBarrierPlan {
    /// The 0x128-byte `neff_barrier_config` of every entry (gate bit clear).
    pub fn encoded(&self) -> Vec<[u8; BARRIER_CONFIG_BYTES]> {
        self.entries
            .iter()
            .map(|e| BarrierConfig::Host(e.config).encode())
            .collect()
    }
}

#[cfg(test)]
mod tests;
