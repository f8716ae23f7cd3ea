//! MESH: the event tape of docs/contract/lowering.md §4.6 for all-reduce, reduce-scatter and
//! all-gather (all-to-all and all-to-all-v live in [`super::mesh_a2a`]).
//!
//! **Step count** (G = ranks in the leg, one tape per rank on mesh window 0, one step per event):
//! all-reduce 5 events for G = 2 (slot t0) and 8 otherwise (slot t1), plus
//! `ceil`-tree partial reduce events when G > 32; reduce-scatter 6; all-gather 5. Per rank the
//! events are the same for every message size: a mesh op is one shot (the per-op cap of §5.4 is
//! the selector's business) and the emitter tiles each transfer into SB2SB legs.
//!
//! **Bytes on the wire per rank** (S = block bytes, G ranks): all-reduce 2·(G−1)·S (scatter the
//! G−1 foreign blocks, write the reduced block to G−1 peers); reduce-scatter (G−1)·S; all-gather
//! (G−1)·S. Semaphore triggers: 1 per peer per phase (entry, data, result).
//!
//! **Event semantics (this project's choice, §4.6 marks the exact indices \[M\])**. Every op:
//! * `FN_BARRIER_FIRST` (4): arrive — +1 on every peer's ENTRY semaphore ("I am in this op: my
//!   scratch and output may be written"). All-to-all stages its input here first when in place.
//! * `LOCAL_HNDSHK` (2): wait ENTRY ≥ G−1: every peer has arrived. This entry handshake is what
//!   makes back-to-back ops safe (a fast rank cannot write a peer's scratch, or bump its
//!   semaphores, while that peer still runs the previous op).
//! * the op's data events (below); each ends with +1 on the receivers' DATA or RESULT semaphore;
//! * `SYNC` (0): wait RESULT ≥ G−1: every peer's last write into this rank has landed;
//! * `FN_BARRIER_LAST` (5): closes the function; a marker (no wait, no DMA, no trigger) because
//!   SYNC already waited for everything that targets this rank.
//!
//! All-reduce, t0 (G = 2): FN_FIRST → LOCAL_HNDSHK (+ the scatter) → REDUCE_COPY (reduce and
//! write the result to the peer) → SYNC → FN_LAST. t1 (general): FN_FIRST → LOCAL_HNDSHK →
//! GLOBAL_HNDSHK → INTRA_GRP_BRDCST (scatter: block k of every rank to owner k's scratch slot) →
//! INTER_GRP_BRDCST → (REDUCE_COPY partial tree when G > 32) → REDUCE_WRITE (one multi-source CCE
//! reduce of the G copies, then the result to every rank's output) → SYNC → FN_LAST.
//! GLOBAL_HNDSHK and INTER_GRP_BRDCST carry nothing on a single-group full mesh (the handshake is
//! complete after LOCAL_HNDSHK and there is no other group); they are kept, empty, so the event
//! census is the §4.6 t1 sequence. Reduce-scatter: FN_FIRST → LOCAL_HNDSHK → INTRA_GRP_BRDCST
//! (scatter) → REDUCE_COPY (into the owner's output; RESULT +1 on every peer = "I am done with
//! your copy") → SYNC → FN_LAST. All-gather: FN_FIRST → LOCAL_HNDSHK (+ own block to own output)
//! → INTRA_GRP_BRDCST (own block to every peer's output slot) → SYNC → FN_LAST.
//!
//! **Waits** follow the fixed convention of §4.6: `Wait { target: wait_val, consume: wait_val }`
//! with wait_val = number of distinct ranks that signal the semaphore; a zero wait_val is no wait.
//! **Signals** are +1 each, i.e. `1 << sema_shift_offset` with sema_shift_offset = 0
//! ([`MESH_SEMA_SHIFT_OFFSET`]): the counting convention needs every sender to add the same 1
//! (docs/contract/device.md §5.3 allows bit-flags; with counts they would not sum to wait_val).
//! Triggers beyond the 3 direct ones of an event record ride on the DMA rings as semaphore
//! descriptors (docs/contract/lowering.md §6.4).
//!
//! **Semaphores**: three per leg from `leg.sems.base`: ENTRY, DATA, RESULT ([`MESH_SEMS`]); each
//! event phase has its own so an early arrival of a later phase can never satisfy an earlier
//! wait. **Scratch**: reduce ops use G slots of the largest block (slot q receives the copy from
//! the rank at position q; the owner's own slot stays unused — it reduces straight from its
//! input), plus the partial slots of the G > 32 tree.
//!
//! **More than 32 sources**: the CCE takes at most 32 sources per transfer
//! (docs/contract/lowering.md §4.6), so for G > 32 the sources are reduced in groups of 32 into
//! partial slots (REDUCE_COPY events, level by level) until at most 32 remain; the final
//! REDUCE_WRITE / REDUCE_COPY reduces those.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::lower::compose::{ComposedLeg, Leg, Window};
use crate::lower::program::{
    Algorithm, Buf, Entry, Half, Loc, Primitive, RingShape, Sem, Signal, SignalKind, Step, Tape,
    Transfer, Wait,
};
use crate::lower::request::{CollectiveOp, ReduceOp};

/// `enc_mesh_event_type`, newer numbering (docs/contract/lowering.md §2.9; judgement: the newer
/// table).
pub mod event {
    /// Close the op: wait for the last writes into this rank.
    pub const SYNC: u8 = 0;
    /// Global handshake.
    pub const GLOBAL_HNDSHK: u8 = 1;
    /// Local handshake.
    pub const LOCAL_HNDSHK: u8 = 2;
    /// Broadcast to the other groups.
    pub const INTER_GRP_BRDCST: u8 = 3;
    /// Function barrier, opening.
    pub const FN_BARRIER_FIRST: u8 = 4;
    /// Function barrier, closing.
    pub const FN_BARRIER_LAST: u8 = 5;
    /// Handshake before a local reduce.
    pub const REDUCE_LOCAL_HNDSHK: u8 = 6;
    /// Broadcast inside the group.
    pub const INTRA_GRP_BRDCST: u8 = 7;
    /// Multi-source reduce into a local buffer.
    pub const REDUCE_COPY: u8 = 8;
    /// Second reduce-copy stage (absent from the older `nec.h` numbering).
    pub const REDUCE_COPY_2: u8 = 9;
    /// Multi-source reduce whose result is written to peers.
    pub const REDUCE_WRITE: u8 = 10;
    /// Second inter-group broadcast.
    pub const INTER_GRP_BRDCST_2: u8 = 11;
    /// Local and pod-group broadcast.
    pub const LOCAL_AND_POD_GRP_BRDCST: u8 = 12;
    /// Second local and pod-group broadcast.
    pub const LOCAL_AND_POD_GRP_BRDCST_2: u8 = 13;
    /// First all-to-all event (14..=22 are the all-to-all range; the names of 14..=21 were not
    /// recovered). This project uses it for the all-to-all send.
    pub const A2A_SEND: u8 = 14;
    /// All-to-all-v: counts copied from the host (last of the all-to-all range).
    pub const COPY_FROM_HOST: u8 = 22;
}

/// Most sources of one CCE reduce transfer (docs/contract/lowering.md §4.6: num_sources ≤ 32).
pub const MAX_CCE_SOURCES: usize = 32;
/// Semaphores a mesh leg uses from `leg.sems.base` (ENTRY, DATA, RESULT).
pub const MESH_SEMS: u8 = 3;
/// The cc_op mesh union's `sema_shift_offset` (docs/contract/lowering.md §6.1): signals add
/// `1 << 0` = 1, which the counting wait convention of §4.6 requires.
pub const MESH_SEMA_SHIFT_OFFSET: u16 = 0;
/// The cc_op mesh union's `sema_mask` (docs/contract/lowering.md §6.1): every bit counts.
pub const MESH_SEMA_MASK: u16 = 0xFFFF;

/// The three semaphore roles of a mesh leg (offsets from `leg.sems.base`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role {
    /// A peer arrived in the op.
    Entry = 0,
    /// A peer's copy landed in this rank's scratch.
    Data = 1,
    /// A peer's final write into this rank landed (or: the peer is done with our data).
    Result = 2,
}

/// What every mesh event builder of one rank needs.
pub(crate) struct Ctx<'l, 'a> {
    pub leg: &'l Leg<'a>,
    pub me: u32,
    pub pos: u32,
    pub peers: Vec<u32>,
    pub topsp: u8,
}

impl<'l, 'a> Ctx<'l, 'a> {
    pub fn new(leg: &'l Leg<'a>, me: u32) -> Result<Self> {
        let pos = leg.position(me)?;
        let peers = leg.order.iter().copied().filter(|&r| r != me).collect();
        Ok(Ctx {
            leg,
            me,
            pos,
            peers,
            topsp: (leg.topsp_of_channel)(0),
        })
    }
    pub fn p(&self) -> u32 {
        self.peers.len() as u32
    }
    pub fn sem(&self, rank: u32, role: Role) -> Sem {
        Sem {
            rank,
            topsp: self.topsp,
            id: self.leg.sems.base + role as u8,
        }
    }
    /// The docs/contract/lowering.md §4.6 wait: `n` distinct ranks signal it; none when `n == 0`.
    pub fn wait(&self, role: Role, n: u32) -> Option<Wait> {
        (n > 0).then(|| Wait {
            sem: self.sem(self.me, role),
            target: n,
            consume: n,
        })
    }
    /// +1 on `role` of every peer.
    pub fn trigger_peers(&self, role: Role) -> Vec<Signal> {
        self.peers
            .iter()
            .map(|&r| Signal {
                sem: self.sem(r, role),
                amount: 1,
                kind: SignalKind::Remote,
            })
            .collect()
    }
    /// A `MeshEvent` step of `event_type` on this rank's own chunk.
    pub fn event(&self, event_type: u8) -> Step {
        Step {
            primitive: Primitive::MeshEvent,
            half: Half::H0,
            chunk: self.me,
            reduction: None,
            wait: None,
            transfers: Vec::new(),
            signals: Vec::new(),
            event_type: Some(event_type),
        }
    }
    /// Element `off` of `rank`'s view of `w`.
    pub fn at(&self, rank: u32, w: Window, off: u64) -> Loc {
        Loc {
            rank,
            buf: w.buf,
            offset: w.offset + off,
        }
    }
    /// A copy, or nothing when it moves no element or reads and writes the same storage.
    pub fn copy(&self, src: Loc, dst: Loc, len: u64) -> Option<Transfer> {
        (len > 0 && !same_place(self.leg, src, dst)).then_some(Transfer::Copy { src, dst, len })
    }
}

/// True when two locations name the same storage (input and output alias when in place).
pub(crate) fn same_place(leg: &Leg, a: Loc, b: Loc) -> bool {
    let norm = |b: Buf| match b {
        Buf::Input if leg.request.in_place => Buf::Output,
        other => other,
    };
    a.rank == b.rank && a.offset == b.offset && norm(a.buf) == norm(b.buf)
}

/// Reject a leg the mesh cannot run: no ranks, duplicates, blocks not covering every rank id.
pub(crate) fn check_leg(leg: &Leg) -> Result<()> {
    if leg.order.is_empty() {
        return Err(Error::invalid("mesh leg with no ranks"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for &r in &leg.order {
        if !seen.insert(r) {
            return Err(Error::invalid(format!(
                "rank {r} appears twice in the mesh leg {:?}",
                leg.order
            )));
        }
        if r as usize >= leg.src_block.len() || r as usize >= leg.dst_block.len() {
            return Err(Error::invalid(format!(
                "mesh leg: rank {r} has no source/destination block ({} / {} given)",
                leg.src_block.len(),
                leg.dst_block.len()
            )));
        }
    }
    Ok(())
}

fn reduce_op(leg: &Leg) -> Result<ReduceOp> {
    leg.request.reduce.ok_or_else(|| {
        Error::invalid(format!(
            "{:?} needs a reduce op; the request has none",
            leg.op
        ))
    })
}

/// Wrap per-rank tapes into the leg's result.
pub(crate) fn finish(
    leg: &Leg,
    sub_type: u8,
    tapes: BTreeMap<u32, Vec<Step>>,
    scratch_elems: u64,
) -> ComposedLeg {
    let topsp = (leg.topsp_of_channel)(0);
    let name = format!("mesh {:?}", leg.op);
    let entries = tapes
        .into_iter()
        .map(|(rank, steps)| {
            let entry = Entry {
                leg: name.clone(),
                algorithm: Algorithm::Mesh,
                mesh_sub_type: Some(sub_type),
                ranks: leg.order.clone(),
                tapes: vec![Tape {
                    channel: 0,
                    topsp,
                    steps,
                }],
            };
            (rank, entry)
        })
        .collect();
    ComposedLeg {
        entries,
        scratch_elems,
        sems_used: MESH_SEMS,
    }
}

/// Compose one mesh leg: all-reduce, reduce-scatter, all-gather or (fixed-block) all-to-all.
/// `sub_type` is the mesh flavour (`enc_alg_mesh_type`, docs/contract/lowering.md §3.5) written to
/// every entry's `mesh_sub_type`. All-to-all-v needs its layout: use
/// [`super::mesh_a2a::compose_mesh_a2av`].
pub fn compose_mesh(leg: &Leg, sub_type: u8) -> Result<ComposedLeg> {
    check_leg(leg)?;
    match leg.op {
        CollectiveOp::AllReduce | CollectiveOp::ReduceScatter => {
            let op = reduce_op(leg)?;
            compose_reduce(leg, sub_type, op, leg.op == CollectiveOp::AllReduce)
        }
        CollectiveOp::AllGather => compose_all_gather(leg, sub_type),
        CollectiveOp::AllToAll => {
            let layout = super::mesh_a2a::A2avLayout::from_leg(leg);
            super::mesh_a2a::compose_mesh_a2av(leg, sub_type, &layout)
        }
        other => Err(Error::invalid(format!(
            "the mesh composer does not build {other:?} (all-reduce, reduce-scatter, \
             all-gather, all-to-all; all-to-all-v through compose_mesh_a2av)"
        ))),
    }
}

/// The largest source block of the leg's ranks (the scratch slot size).
fn slot_elems(leg: &Leg) -> u64 {
    leg.order
        .iter()
        .map(|&r| leg.src_block[r as usize].1)
        .max()
        .unwrap_or(0)
}

/// Partial-slot count of the >32-source tree for `g` sources.
fn tree_partials(mut g: usize) -> usize {
    let mut total = 0;
    while g > MAX_CCE_SOURCES {
        g = g.div_ceil(MAX_CCE_SOURCES);
        total += g;
    }
    total
}

fn compose_reduce(leg: &Leg, sub_type: u8, op: ReduceOp, all_reduce: bool) -> Result<ComposedLeg> {
    let g = leg.n() as usize;
    let slot = slot_elems(leg);
    let partial_base = leg.scratch_base + g as u64 * slot;
    let scratch = if g > 1 {
        (g + tree_partials(g)) as u64 * slot
    } else {
        0
    };
    let mut tapes = BTreeMap::new();
    for &me in &leg.order {
        let cx = Ctx::new(leg, me)?;
        let p = cx.p();
        let mut steps = Vec::new();
        // Arrive.
        let mut first = cx.event(event::FN_BARRIER_FIRST);
        first.signals = cx.trigger_peers(Role::Entry);
        steps.push(first);
        // Scatter: block k of my source goes to owner k's slot for my position.
        let scatter: Vec<Transfer> = cx
            .peers
            .iter()
            .filter_map(|&k| {
                let (off, len) = leg.src_block[k as usize];
                let dst = Loc {
                    rank: k,
                    buf: Buf::Scratch,
                    offset: leg.scratch_base + u64::from(cx.pos) * slot,
                };
                cx.copy(cx.at(me, leg.src, off), dst, len)
            })
            .collect();
        let mut hs = cx.event(event::LOCAL_HNDSHK);
        hs.wait = cx.wait(Role::Entry, p);
        let t0 = all_reduce && g == 2;
        if t0 {
            hs.transfers = scatter;
            hs.signals = cx.trigger_peers(Role::Data);
            steps.push(hs);
        } else {
            steps.push(hs);
            if all_reduce {
                steps.push(cx.event(event::GLOBAL_HNDSHK));
            }
            let mut bc = cx.event(event::INTRA_GRP_BRDCST);
            bc.transfers = scatter;
            bc.signals = cx.trigger_peers(Role::Data);
            steps.push(bc);
            if all_reduce {
                steps.push(cx.event(event::INTER_GRP_BRDCST));
            }
        }
        // Reduce the G copies of my block (own source + the peers' slots, in ring order).
        let (_, len) = leg.src_block[me as usize];
        let mut srcs: Vec<Loc> = leg
            .order
            .iter()
            .enumerate()
            .map(|(q, &r)| {
                if r == me {
                    cx.at(me, leg.src, leg.src_block[me as usize].0)
                } else {
                    Loc {
                        rank: me,
                        buf: Buf::Scratch,
                        offset: leg.scratch_base + q as u64 * slot,
                    }
                }
            })
            .collect();
        let mut pending_wait = cx.wait(Role::Data, p);
        let mut next_partial = partial_base;
        while srcs.len() > MAX_CCE_SOURCES {
            let mut level = Vec::new();
            for group in srcs.chunks(MAX_CCE_SOURCES) {
                let dst = Loc {
                    rank: me,
                    buf: Buf::Scratch,
                    offset: next_partial,
                };
                next_partial += slot;
                let mut st = cx.event(event::REDUCE_COPY);
                st.primitive = Primitive::RecvReduceCopy;
                st.wait = pending_wait.take();
                st.reduction = Some((op, shape_for(group.len())));
                st.transfers = reduce_transfer(&cx, op, group.to_vec(), dst, len);
                steps.push(st);
                level.push(dst);
            }
            srcs = level;
        }
        let out = cx.at(me, leg.dst, leg.dst_block[me as usize].0);
        let final_type = match (all_reduce, t0) {
            (true, false) => event::REDUCE_WRITE,
            _ => event::REDUCE_COPY,
        };
        let mut red = cx.event(final_type);
        red.primitive = if final_type == event::REDUCE_WRITE {
            Primitive::RecvReduceWrite
        } else {
            Primitive::RecvReduceCopy
        };
        red.wait = pending_wait.take();
        red.reduction = Some((op, shape_for(srcs.len())));
        red.transfers = reduce_transfer(&cx, op, srcs, out, len);
        if all_reduce {
            for &k in &cx.peers {
                let dst = cx.at(k, leg.dst, leg.dst_block[me as usize].0);
                red.transfers.extend(cx.copy(out, dst, len));
            }
        }
        red.signals = cx.trigger_peers(Role::Result);
        steps.push(red);
        let mut sync = cx.event(event::SYNC);
        sync.wait = cx.wait(Role::Result, p);
        steps.push(sync);
        steps.push(cx.event(event::FN_BARRIER_LAST));
        tapes.insert(me, steps);
    }
    Ok(finish(leg, sub_type, tapes, scratch))
}

/// Ring shape of a reduce with `n` sources: two sources is the 2R1W shape, more is NR1W
/// (docs/contract/lowering.md §2.6).
fn shape_for(n: usize) -> RingShape {
    if n > 2 {
        RingShape::KangaringNR1W
    } else {
        RingShape::Ring2R1W
    }
}

/// One CCE reduce of `srcs` into `dst`; a single source degenerates to a copy (or nothing).
fn reduce_transfer(cx: &Ctx, op: ReduceOp, srcs: Vec<Loc>, dst: Loc, len: u64) -> Vec<Transfer> {
    if len == 0 {
        return Vec::new();
    }
    if srcs.len() == 1 {
        return cx.copy(srcs[0], dst, len).into_iter().collect();
    }
    vec![Transfer::Reduce {
        op,
        shape: shape_for(srcs.len()),
        srcs,
        dst,
        len,
    }]
}

fn compose_all_gather(leg: &Leg, sub_type: u8) -> Result<ComposedLeg> {
    let mut tapes = BTreeMap::new();
    for &me in &leg.order {
        let cx = Ctx::new(leg, me)?;
        let (soff, len) = leg.src_block[me as usize];
        let (doff, dlen) = leg.dst_block[me as usize];
        if dlen != len {
            return Err(Error::invalid(format!(
                "all-gather leg: rank {me}'s source block has {len} elements, its output slot {dlen}"
            )));
        }
        let src = cx.at(me, leg.src, soff);
        let mut steps = Vec::new();
        let mut first = cx.event(event::FN_BARRIER_FIRST);
        first.signals = cx.trigger_peers(Role::Entry);
        steps.push(first);
        let mut hs = cx.event(event::LOCAL_HNDSHK);
        hs.wait = cx.wait(Role::Entry, cx.p());
        hs.transfers = cx
            .copy(src, cx.at(me, leg.dst, doff), len)
            .into_iter()
            .collect();
        steps.push(hs);
        let mut bc = cx.event(event::INTRA_GRP_BRDCST);
        bc.transfers = cx
            .peers
            .iter()
            .filter_map(|&k| cx.copy(src, cx.at(k, leg.dst, doff), len))
            .collect();
        bc.signals = cx.trigger_peers(Role::Result);
        steps.push(bc);
        let mut sync = cx.event(event::SYNC);
        sync.wait = cx.wait(Role::Result, cx.p());
        steps.push(sync);
        steps.push(cx.event(event::FN_BARRIER_LAST));
        tapes.insert(me, steps);
    }
    Ok(finish(leg, sub_type, tapes, 0))
}

#[cfg(test)]
mod tests;
