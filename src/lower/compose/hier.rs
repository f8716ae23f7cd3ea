//! HIER — hierarchical composition (docs/contract/lowering.md §4.7): a collective over node_n nodes
//! × local_rank_n ranks (rank id = n·L + l) as chained legs, each composed by the per-leg algorithm
//! of §3.4 through a dispatcher.
//!
//! Legs, in order (each leg is one cc_op entry per rank):
//! * all-reduce: intra reduce-scatter → inter all-reduce (on slice l, among the ranks sharing
//!   local index l) → intra all-gather;
//! * reduce-scatter: intra reduce-scatter → inter reduce-scatter;
//! * all-gather: **inter all-gather first** → intra all-gather.
//!
//! **Step count / bytes on the wire**: the sum of the legs' (see each dispatched composer). For
//! an all-reduce of S bytes per rank with bandwidth-optimal legs: intra RS (L−1)/L·S, inter AR
//! 2·(n−1)/n·S/L, intra AG (L−1)/L·S per rank.
//!
//! **Placement** (the role of the vendor's page tables): the inter leg works in a scratch region
//! at `cfg.scratch_base` (all-reduce: `count` elements, slice l at its own offset; reduce-scatter
//! and all-gather: node_n blocks). The final placement equals the flat collective's: for
//! reduce-scatter, global block (node n, local l) ends on rank n·L + l; for all-gather, rank r's
//! input ends in every output block r. Where a leg's per-rank chunk is strided in the buffer
//! (reduce-scatter's intra leg: blocks m·L + l for every node m; all-gather's intra leg: output
//! blocks m·L + l), a [`Leg`] cannot express it (its blocks are contiguous), so that leg is
//! composed as node_n **sub-legs**, one per node m, each contiguous; their tapes are appended
//! per channel into the one entry of the leg. Sub-legs of one leg get their own scratch and
//! semaphore ranges, as legs do. (If `Leg` gains multi-piece blocks, one sub-leg suffices.)
//!
//! **Semaphores and scratch**: every leg (and sub-leg) gets its own semaphore range and its own
//! composer scratch range after the region — a rank may start leg k+1 while a peer is still in
//! leg k, so nothing is shared between legs.
//!
//! **Order between legs**: the device chains a TOP_SP's entries on that TOP_SP only
//! (docs/contract/device.md §8.3, docs/contract/lowering.md §6.3), while leg k+1 on one TOP_SP
//! reads what leg k wrote on another (legs differ in algorithm and channel split). So consecutive
//! legs of a rank are joined explicitly with semaphores ([`leg_join`](super::leg_join)), one id per
//! boundary after the legs' ranges.
//!
//! **Result**: [`HierComposed`]: one [`ComposedLeg`] per leg, in order, each with one entry per
//! rank (the integrator appends `legs[i].composed.entries[rank]` to the rank's entries in leg
//! order; each TOP_SP runs its entries one after another, chained with trigger_next /
//! complete_prev, §6.3, and the leg joins order the TOP_SPs), plus the total scratch and
//! semaphore use (leg joins included).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::lower::compose::leg_join::join_entries;
use crate::lower::compose::{split_even, ComposedLeg, Leg, SemPlan, Window};
use crate::lower::program::{Algorithm, Buf, Entry};
use crate::lower::request::{CollectiveOp, CollectiveRequest};

/// The per-leg algorithms (the five slots the selector logs, docs/contract/lowering.md §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HierAlgs {
    /// Intra-node all-gather.
    pub intra_allg: Algorithm,
    /// Intra-node reduce-scatter.
    pub intra_redsct: Algorithm,
    /// Inter-node all-reduce.
    pub inter_allr: Algorithm,
    /// Inter-node all-gather.
    pub inter_allg: Algorithm,
    /// Inter-node reduce-scatter.
    pub inter_redsct: Algorithm,
}

/// Node structure and the resources the legs may use.
#[derive(Debug, Clone, Copy)]
pub struct HierConfig {
    /// Nodes.
    pub node_n: u32,
    /// Ranks per node (rank id = n·local_rank_n + l).
    pub local_rank_n: u32,
    /// Per-leg algorithms.
    pub algs: HierAlgs,
    /// Channels of the intra legs.
    pub intra_channels: u8,
    /// Channels of the inter legs.
    pub inter_channels: u8,
    /// Chunk elements.
    pub chunk_elems: u64,
    /// Which TOP_SP drives channel c.
    pub topsp_of_channel: fn(u8) -> u8,
    /// First scratch element the hierarchical op may use.
    pub scratch_base: u64,
    /// First TOP_SP semaphore id the hierarchical op may use.
    pub sem_base: u8,
}

/// One composed leg.
#[derive(Debug, Clone)]
pub struct HierLeg {
    /// "intra reduce-scatter", "inter all-reduce", …
    pub name: String,
    /// The leg's operation.
    pub op: CollectiveOp,
    /// The algorithm composing it.
    pub algorithm: Algorithm,
    /// One entry per rank; scratch/semaphores counted from the leg's own bases.
    pub composed: ComposedLeg,
    /// First scratch element of the leg's composers.
    pub scratch_base: u64,
    /// First semaphore id of the leg.
    pub sem_base: u8,
}

/// The legs of a hierarchical op.
#[derive(Debug, Clone)]
pub struct HierComposed {
    /// In execution order.
    pub legs: Vec<HierLeg>,
    /// Scratch elements used from `cfg.scratch_base` (region + every leg).
    pub scratch_elems: u64,
    /// Semaphore ids used from `cfg.sem_base`.
    pub sems_used: u8,
}

/// One contiguous piece of a leg over one group.
struct Sub {
    order: Vec<u32>,
    src: Window,
    dst: Window,
    src_block: Vec<(u64, u64)>,
    dst_block: Vec<(u64, u64)>,
}

struct LegSpec {
    name: &'static str,
    op: CollectiveOp,
    algorithm: Algorithm,
    channels: u8,
    /// `subs[j][g]`: sub-leg j (run one after another) of group g (disjoint ranks).
    subs: Vec<Vec<Sub>>,
}

fn w(buf: Buf, offset: u64) -> Window {
    Window { buf, offset }
}

/// Compose a hierarchical all-reduce, reduce-scatter or all-gather.
pub fn compose_hier(
    req: &CollectiveRequest,
    cfg: &HierConfig,
    compose_leg: &dyn Fn(&Leg, Algorithm) -> Result<ComposedLeg>,
) -> Result<HierComposed> {
    let (nn, ll) = (cfg.node_n, cfg.local_rank_n);
    if nn == 0 || ll == 0 || nn * ll != req.rank_n() {
        return Err(Error::invalid(format!(
            "hierarchical op: {nn} nodes × {ll} ranks does not cover the {} ranks of the group",
            req.rank_n()
        )));
    }
    let n_all = (nn * ll) as usize;
    let id = |n: u32, l: u32| n * ll + l;
    let intra = |n: u32| (0..ll).map(|l| id(n, l)).collect::<Vec<_>>();
    let inter = |l: u32| (0..nn).map(|n| id(n, l)).collect::<Vec<_>>();
    let c = req.count;
    let region = cfg.scratch_base;
    let blocks = |f: &dyn Fn(u32) -> (u64, u64)| (0..n_all as u32).map(f).collect::<Vec<_>>();
    let (src0, src_at) = if req.in_place && req.op == CollectiveOp::AllGather {
        (Buf::Output, c) // in place, rank r's input is its output block r
    } else {
        (Buf::Input, 0)
    };
    let (specs, region_len) = match req.op {
        CollectiveOp::AllReduce => {
            let slices = split_even(c, ll);
            let slice = |r: u32| slices[(r % ll) as usize];
            let sub_of = |r: u32| {
                let (off, len) = slice(r);
                let (o, l2) = split_even(len, nn)[(r / ll) as usize];
                (off + o, l2)
            };
            let intra_rs = (0..nn)
                .map(|n| Sub {
                    order: intra(n),
                    src: w(Buf::Input, 0),
                    dst: w(Buf::Scratch, region),
                    src_block: blocks(&slice),
                    dst_block: blocks(&slice),
                })
                .collect();
            let inter_ar = (0..ll)
                .map(|l| Sub {
                    order: inter(l),
                    src: w(Buf::Scratch, region),
                    dst: w(Buf::Scratch, region),
                    src_block: blocks(&sub_of),
                    dst_block: blocks(&sub_of),
                })
                .collect();
            let intra_ag = (0..nn)
                .map(|n| Sub {
                    order: intra(n),
                    src: w(Buf::Scratch, region),
                    dst: w(Buf::Output, 0),
                    src_block: blocks(&slice),
                    dst_block: blocks(&slice),
                })
                .collect();
            let specs = vec![
                spec("intra reduce-scatter", CollectiveOp::ReduceScatter, cfg.algs.intra_redsct, cfg.intra_channels, vec![intra_rs]),
                spec("inter all-reduce", CollectiveOp::AllReduce, cfg.algs.inter_allr, cfg.inter_channels, vec![inter_ar]),
                spec("intra all-gather", CollectiveOp::AllGather, cfg.algs.intra_allg, cfg.intra_channels, vec![intra_ag]),
            ];
            (specs, c)
        }
        CollectiveOp::ReduceScatter => {
            // Sub-leg m: the node's partial of global blocks m·L + l lands in region slot m.
            let intra_rs = (0..nn)
                .map(|m| {
                    (0..nn)
                        .map(|n| Sub {
                            order: intra(n),
                            src: w(Buf::Input, u64::from(m * ll) * c),
                            dst: w(Buf::Scratch, region + u64::from(m) * c),
                            src_block: blocks(&|r| (u64::from(r % ll) * c, c)),
                            dst_block: blocks(&|_| (0, c)),
                        })
                        .collect()
                })
                .collect();
            // In place, rank r's result goes to block r of the shared storage (NCCL's
            // convention, as the flat composers and the verifier use).
            let own = |r: u32| if req.in_place { (u64::from(r) * c, c) } else { (0, c) };
            let inter_rs = (0..ll)
                .map(|l| Sub {
                    order: inter(l),
                    src: w(Buf::Scratch, region),
                    dst: w(Buf::Output, 0),
                    src_block: blocks(&|r| (u64::from(r / ll) * c, c)),
                    dst_block: blocks(&own),
                })
                .collect();
            let specs = vec![
                spec("intra reduce-scatter", CollectiveOp::ReduceScatter, cfg.algs.intra_redsct, cfg.intra_channels, intra_rs),
                spec("inter reduce-scatter", CollectiveOp::ReduceScatter, cfg.algs.inter_redsct, cfg.inter_channels, vec![inter_rs]),
            ];
            (specs, u64::from(nn) * c)
        }
        CollectiveOp::AllGather => {
            let inter_ag = (0..ll)
                .map(|l| Sub {
                    order: inter(l),
                    src: w(src0, 0),
                    dst: w(Buf::Scratch, region),
                    src_block: blocks(&|r| (u64::from(r) * src_at, c)),
                    dst_block: blocks(&|r| (u64::from(r / ll) * c, c)),
                })
                .collect();
            // Sub-leg m: region slot m (rank m·L + l's input) to output block m·L + l.
            let intra_ag = (0..nn)
                .map(|m| {
                    (0..nn)
                        .map(|n| Sub {
                            order: intra(n),
                            src: w(Buf::Scratch, region + u64::from(m) * c),
                            dst: w(Buf::Output, u64::from(m * ll) * c),
                            src_block: blocks(&|_| (0, c)),
                            dst_block: blocks(&|r| (u64::from(r % ll) * c, c)),
                        })
                        .collect()
                })
                .collect();
            let specs = vec![
                spec("inter all-gather", CollectiveOp::AllGather, cfg.algs.inter_allg, cfg.inter_channels, vec![inter_ag]),
                spec("intra all-gather", CollectiveOp::AllGather, cfg.algs.intra_allg, cfg.intra_channels, intra_ag),
            ];
            (specs, u64::from(nn) * c)
        }
        other => {
            return Err(Error::invalid(format!(
                "hierarchical composition covers all-reduce, reduce-scatter and all-gather, not {other:?}"
            )))
        }
    };
    let mut scratch = region + region_len;
    let mut sem = u32::from(cfg.sem_base);
    let mut legs = Vec::new();
    for s in specs {
        let (leg_scratch, leg_sem) = (scratch, sem as u8);
        let mut entries: BTreeMap<u32, Entry> = BTreeMap::new();
        for sub in &s.subs {
            let (mut used_scratch, mut used_sems) = (0u64, 0u8);
            for g in sub {
                let leg = Leg {
                    request: req,
                    op: s.op,
                    order: g.order.clone(),
                    src: g.src,
                    dst: g.dst,
                    src_block: g.src_block.clone(),
                    dst_block: g.dst_block.clone(),
                    scratch_base: scratch,
                    channels: s.channels,
                    chunk_elems: cfg.chunk_elems,
                    topsp_of_channel: cfg.topsp_of_channel,
                    sems: SemPlan::new(u8::try_from(sem).map_err(|_| sem_overflow(sem))?),
                };
                let composed = compose_leg(&leg, s.algorithm)?;
                used_scratch = used_scratch.max(composed.scratch_elems);
                used_sems = used_sems.max(composed.sems_used);
                for (rank, e) in composed.entries {
                    merge(&mut entries, rank, e, s.name);
                }
            }
            scratch += used_scratch;
            sem += u32::from(used_sems);
            if sem > u32::from(crate::lower::program::sem_id::LAST_FREE) + 1 {
                return Err(sem_overflow(sem));
            }
        }
        legs.push(HierLeg {
            name: s.name.to_string(),
            op: s.op,
            algorithm: s.algorithm,
            composed: ComposedLeg {
                entries,
                scratch_elems: scratch - leg_scratch,
                sems_used: (sem - u32::from(leg_sem)) as u8,
            },
            scratch_base: leg_scratch,
            sem_base: leg_sem,
        });
    }
    // Leg joins (`leg_join`): one semaphore id per leg boundary, after every leg's range. On a
    // rank, leg i is joined to the latest earlier leg with tapes there.
    let join_base = sem;
    sem += legs.len().saturating_sub(1) as u32;
    if sem > u32::from(crate::lower::program::sem_id::LAST_FREE) + 1 {
        return Err(sem_overflow(sem));
    }
    for i in 1..legs.len() {
        let id = (join_base + i as u32 - 1) as u8;
        let (done, rest) = legs.split_at_mut(i);
        for (&rank, next) in rest[0].composed.entries.iter_mut() {
            let prev = done
                .iter_mut()
                .rev()
                .filter_map(|l| l.composed.entries.get_mut(&rank))
                .find(|e| !e.tapes.is_empty());
            if let Some(prev) = prev {
                join_entries(prev, next, rank, id);
            }
        }
    }
    Ok(HierComposed {
        legs,
        scratch_elems: scratch - cfg.scratch_base,
        sems_used: (sem - u32::from(cfg.sem_base)) as u8,
    })
}

fn spec(
    name: &'static str,
    op: CollectiveOp,
    algorithm: Algorithm,
    channels: u8,
    subs: Vec<Vec<Sub>>,
) -> LegSpec {
    LegSpec {
        name,
        op,
        algorithm,
        channels,
        subs,
    }
}

fn sem_overflow(sem: u32) -> Error {
    Error::resource(format!(
        "hierarchical op needs TOP_SP semaphore ids up to {sem}: more than the free ids of a TOP_SP (8..=252)"
    ))
}

/// Append a sub-leg's entry to the rank's entry of the leg: same channel → steps appended.
fn merge(entries: &mut BTreeMap<u32, Entry>, rank: u32, mut e: Entry, name: &str) {
    e.leg = name.to_string();
    match entries.get_mut(&rank) {
        None => {
            entries.insert(rank, e);
        }
        Some(have) => {
            for t in e.tapes {
                match have.tapes.iter_mut().find(|h| h.channel == t.channel) {
                    Some(h) => h.steps.extend(t.steps),
                    None => have.tapes.push(t),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
