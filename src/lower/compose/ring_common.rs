//! What the ring-family composers share (ring, kangaring, single-cycle ring, the permute family):
//! the piece grid every rank agrees on, memory locations of a leg, step builders in the
//! docs/contract/lowering.md §4.0 vocabulary and the assembly of per-rank entries.
//!
//! **Data model (push, docs/contract/lowering.md §4.10, §6.4).** A sending step's transfer writes
//! into the receiver's memory and carries the two increments of §6.4: LOCAL on the sender (its
//! source may be reused) and REMOTE on the receiver's receive semaphore (the data has landed). The
//! receiving step waits on its own receive semaphore (`wait_ge_and_dec`, target 1, consume 1)
//! before it reads what arrived. A step whose only write is local (e.g. `recv_reduce_copy`) carries
//! the LOCAL increment only: there is no receiver to notify, and a REMOTE increment on oneself
//! would never be consumed.
//!
//! **Piece grid (§4.1, §5.3).** Chunk k's block is split with a [`ChunkPlan`] of its own length,
//! so every rank derives the same channel windows, loops and halves for chunk k. When blocks
//! differ in length (uneven counts), a channel runs as many loops as the longest block needs and
//! as many halves per loop as any block has; a block without that piece contributes a
//! zero-length transfer, so all tapes keep the same step structure (a zero-length transfer
//! still signals, so the semaphore protocol is unchanged).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::lower::compose::{loc, ChunkPlan, ComposedLeg, Leg, SemPlan};
use crate::lower::program::{
    Algorithm, Buf, Entry, Half, Loc, Primitive, RingShape, Signal, SignalKind, Step, Tape,
    Transfer, Wait,
};
use crate::lower::request::ReduceOp;

/// One (loop, half) piece of a channel: for every chunk (rank id), its `(offset, len)`
/// relative to the chunk's block (`len` 0 when the block has no such piece).
#[derive(Debug, Clone)]
pub struct Slot {
    /// Which half of the loop.
    pub half: Half,
    /// Per chunk: block-relative offset and length.
    pub pieces: BTreeMap<u32, (u64, u64)>,
}

impl Slot {
    /// The piece of chunk `k`.
    pub fn of(&self, k: u32) -> (u64, u64) {
        self.pieces.get(&k).copied().unwrap_or((0, 0))
    }
}

/// A channel's loops; each loop holds its halves in issue order (H0 then H1).
#[derive(Debug, Clone)]
pub struct ChannelGrid {
    /// Channel id.
    pub channel: u8,
    /// Loops of this channel, each with 1 or 2 halves.
    pub loops: Vec<Vec<Slot>>,
}

/// A block's pieces `(offset, len)`, per channel.
type PiecesByChannel = Vec<Vec<(u64, u64)>>;

/// The piece grid of a set of chunks: every used channel (one with at least one non-empty
/// piece in some block), in channel order. Empty when every block is empty.
pub fn grid(chunks: &[(u32, u64)], channels: u8, chunk_elems: u64) -> Result<Vec<ChannelGrid>> {
    // Per chunk, per channel: the pieces grouped by loop (piece i is loop i / 2, half i % 2:
    // only a channel window's last loop can lack its H1, see `ChunkPlan::pieces`).
    let mut per_chunk: Vec<(u32, PiecesByChannel)> = Vec::new();
    for &(k, len) in chunks {
        let plan = ChunkPlan::new(len, channels, chunk_elems)?;
        let by_channel = (0..channels)
            .map(|c| {
                if c < plan.channels {
                    plan.pieces(c)
                } else {
                    Vec::new()
                }
            })
            .collect();
        per_chunk.push((k, by_channel));
    }
    let mut out = Vec::new();
    for c in 0..channels {
        let npieces = per_chunk
            .iter()
            .map(|(_, p)| p[c as usize].len())
            .max()
            .unwrap_or(0);
        if npieces == 0 {
            continue;
        }
        let mut loops = Vec::new();
        for l in 0..npieces.div_ceil(2) {
            let mut halves = Vec::new();
            for (h, half) in [(0, Half::H0), (1, Half::H1)] {
                let i = 2 * l + h;
                if i >= npieces {
                    break;
                }
                let has_any = per_chunk.iter().any(|(_, p)| i < p[c as usize].len());
                if !has_any {
                    break;
                }
                let pieces = per_chunk
                    .iter()
                    .map(|(k, p)| (*k, p[c as usize].get(i).copied().unwrap_or((0, 0))))
                    .collect();
                halves.push(Slot { half, pieces });
            }
            loops.push(halves);
        }
        out.push(ChannelGrid { channel: c, loops });
    }
    Ok(out)
}

/// True when two buffers of a rank are one storage (the same buffer, or input and output of
/// an in-place request).
pub fn same_storage(leg: &Leg, a: Buf, b: Buf) -> bool {
    a == b
        || (leg.request.in_place
            && matches!(
                (a, b),
                (Buf::Input, Buf::Output) | (Buf::Output, Buf::Input)
            ))
}

/// True when two locations name the same element of the same storage.
pub fn same_loc(leg: &Leg, a: Loc, b: Loc) -> bool {
    a.rank == b.rank && a.offset == b.offset && same_storage(leg, a.buf, b.buf)
}

/// Chunk k's block length, checked to agree between the source and destination blocks.
pub fn block_len(leg: &Leg, k: u32) -> Result<u64> {
    let s = leg.src_block.get(k as usize).copied();
    let d = leg.dst_block.get(k as usize).copied();
    match (s, d) {
        (Some((_, a)), Some((_, b))) if a == b => Ok(a),
        (Some((_, a)), Some((_, b))) => Err(Error::invalid(format!(
            "chunk {k}: source block has {a} elements but destination block {b}"
        ))),
        _ => Err(Error::invalid(format!("chunk {k} has no block in the leg"))),
    }
}

/// Checks shared by every composer: a non-empty order of distinct ranks and a semaphore range
/// that fits the 256 TOP_SP semaphores.
pub fn check_leg(leg: &Leg) -> Result<()> {
    if leg.order.is_empty() {
        return Err(Error::invalid("a leg needs at least one rank"));
    }
    let mut seen = leg.order.clone();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::invalid(format!(
            "ring order {:?} repeats a rank",
            leg.order
        )));
    }
    let top = u32::from(leg.sems.base) + u32::from(leg.channels) * u32::from(SemPlan::PER_CHANNEL);
    if top > u32::from(crate::lower::program::sem_id::LAST_FREE) + 1 {
        return Err(Error::invalid(format!(
            "semaphores {}..{top} of {} channels run past the last free TOP_SP semaphore (252)",
            leg.sems.base, leg.channels
        )));
    }
    Ok(())
}

/// Which collective a ring-family leg runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    /// All-reduce (docs/contract/lowering.md §4.2).
    AllReduce,
    /// Reduce-scatter (docs/contract/lowering.md §4.3).
    ReduceScatter,
    /// All-gather (docs/contract/lowering.md §4.3).
    AllGather,
}

/// Reject in-place ring layouts where a push could overwrite input another step still needs
/// (rules in the module doc of [`ring`](super::ring)).
pub fn check_in_place(leg: &Leg, kind: RingKind) -> Result<()> {
    if !same_storage(leg, leg.src.buf, leg.dst.buf) || leg.n() == 1 {
        return Ok(());
    }
    let range = |w: crate::lower::compose::Window, b: (u64, u64)| (w.offset + b.0, b.1);
    let src = |k: u32| range(leg.src, leg.src_block[k as usize]);
    let dst = |k: u32| range(leg.dst, leg.dst_block[k as usize]);
    let overlap =
        |a: (u64, u64), b: (u64, u64)| a.1 > 0 && b.1 > 0 && a.0 < b.0 + b.1 && b.0 < a.0 + a.1;
    let bad = |k: u32, why: &str| {
        Err(Error::invalid(format!(
            "in-place {:?}: chunk {k}'s blocks {why} (source {:?}, destination {:?})",
            leg.op,
            src(k),
            dst(k)
        )))
    };
    for &k in &leg.order {
        let clash = match kind {
            RingKind::AllReduce => src(k) != dst(k),
            RingKind::ReduceScatter => {
                src(k) != dst(k) && leg.order.iter().any(|&j| overlap(dst(k), src(j)))
            }
            RingKind::AllGather => {
                src(k) != dst(k) && leg.order.iter().any(|&j| j != k && overlap(src(k), dst(j)))
            }
        };
        if clash {
            return bad(k, "break the in-place layout rule");
        }
    }
    Ok(())
}

/// Where a leg's memory lives, and how steps are wired, for one channel.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'l, 'a> {
    /// The leg.
    pub leg: &'l Leg<'a>,
    /// Channel id.
    pub channel: u8,
    /// Its TOP_SP.
    pub topsp: u8,
}

impl<'l, 'a> Ctx<'l, 'a> {
    /// The context of channel `c`.
    pub fn new(leg: &'l Leg<'a>, channel: u8) -> Self {
        Ctx {
            leg,
            channel,
            topsp: (leg.topsp_of_channel)(channel),
        }
    }
    /// Chunk k's piece at `off` in `rank`'s source window.
    pub fn src(&self, rank: u32, k: u32, off: u64) -> Loc {
        let b = self.leg.src_block[k as usize].0;
        loc(rank, self.leg.src.buf, self.leg.src.offset + b + off)
    }
    /// Chunk k's piece at `off` in `rank`'s destination window.
    pub fn dst(&self, rank: u32, k: u32, off: u64) -> Loc {
        let b = self.leg.dst_block[k as usize].0;
        loc(rank, self.leg.dst.buf, self.leg.dst.offset + b + off)
    }
    /// `rank`'s scratch at leg-relative `off`.
    pub fn scratch(&self, rank: u32, off: u64) -> Loc {
        loc(rank, Buf::Scratch, self.leg.scratch_base + off)
    }
    /// Wait for one arrival on `rank`'s receive semaphore.
    pub fn wait(&self, rank: u32) -> Option<Wait> {
        Some(self.leg.sems.wait_recv(rank, self.channel, self.topsp))
    }
    /// Wait for one credit on `rank`'s credit semaphore.
    pub fn wait_credit(&self, rank: u32) -> Option<Wait> {
        Some(Wait {
            sem: self.leg.sems.credit(rank, self.channel, self.topsp),
            target: 1,
            consume: 1,
        })
    }
    /// LOCAL + REMOTE of a data leg from `from` to `to`.
    pub fn leg_signals(&self, from: u32, to: u32) -> Vec<Signal> {
        self.leg
            .sems
            .leg_signals(from, to, self.channel, self.topsp)
    }
    /// LOCAL only (a step whose writes are all local).
    pub fn local_signal(&self, rank: u32) -> Vec<Signal> {
        vec![Signal {
            sem: self.leg.sems.local(rank, self.channel, self.topsp),
            amount: 1,
            kind: SignalKind::Local,
        }]
    }
    /// A credit returned to `to` (`post_recv`, docs/contract/lowering.md §6.4).
    pub fn credit_signal(&self, to: u32) -> Vec<Signal> {
        vec![Signal {
            sem: self.leg.sems.credit(to, self.channel, self.topsp),
            amount: 1,
            kind: SignalKind::Credit,
        }]
    }
}

/// A copy step.
pub fn copy_step(
    primitive: Primitive,
    half: Half,
    chunk: u32,
    wait: Option<Wait>,
    transfers: Vec<Transfer>,
    signals: Vec<Signal>,
) -> Step {
    Step {
        primitive,
        half,
        chunk,
        reduction: None,
        wait,
        transfers,
        signals,
        event_type: None,
    }
}

/// A reduce step: `op` and `shape` are the two separate arguments of
/// docs/contract/lowering.md §2.6 / §4.0.
#[allow(clippy::too_many_arguments)]
pub fn reduce_step(
    primitive: Primitive,
    half: Half,
    chunk: u32,
    op: ReduceOp,
    shape: RingShape,
    wait: Option<Wait>,
    transfers: Vec<Transfer>,
    signals: Vec<Signal>,
) -> Step {
    Step {
        primitive,
        half,
        chunk,
        reduction: Some((op, shape)),
        wait,
        transfers,
        signals,
        event_type: None,
    }
}

/// A plain copy transfer.
pub fn copy(src: Loc, dst: Loc, len: u64) -> Transfer {
    Transfer::Copy { src, dst, len }
}

/// Collects per-rank, per-channel step lists into a [`ComposedLeg`].
#[derive(Debug)]
pub struct Assembler {
    name: String,
    algorithm: Algorithm,
    ranks: Vec<u32>,
    tapes: BTreeMap<u32, BTreeMap<u8, Vec<Step>>>,
    max_channel: Option<u8>,
}

impl Assembler {
    /// An assembler for the entries of `leg`, named `name`.
    pub fn new(leg: &Leg, name: impl Into<String>, algorithm: Algorithm) -> Self {
        Assembler {
            name: name.into(),
            algorithm,
            ranks: leg.order.clone(),
            tapes: leg.order.iter().map(|&r| (r, BTreeMap::new())).collect(),
            max_channel: None,
        }
    }
    /// Append a step to `rank`'s tape of `channel`.
    pub fn push(&mut self, rank: u32, channel: u8, step: Step) {
        self.max_channel = Some(self.max_channel.map_or(channel, |m| m.max(channel)));
        self.tapes
            .entry(rank)
            .or_default()
            .entry(channel)
            .or_default()
            .push(step);
    }
    /// The composed leg: one entry per rank of the order (possibly without tapes), one tape
    /// per channel that has steps on that rank.
    pub fn finish(self, leg: &Leg, scratch_elems: u64) -> ComposedLeg {
        let mut entries = BTreeMap::new();
        for (rank, chans) in self.tapes {
            let tapes = chans
                .into_iter()
                .map(|(channel, steps)| Tape {
                    channel,
                    topsp: (leg.topsp_of_channel)(channel),
                    steps,
                })
                .collect();
            entries.insert(
                rank,
                Entry {
                    leg: self.name.clone(),
                    algorithm: self.algorithm,
                    mesh_sub_type: None,
                    ranks: self.ranks.clone(),
                    tapes,
                },
            );
        }
        let sems_used = self
            .max_channel
            .map_or(0, |m| (m + 1) * SemPlan::PER_CHANNEL);
        ComposedLeg {
            entries,
            scratch_elems,
            sems_used,
        }
    }
}
