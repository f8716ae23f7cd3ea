//! Composition: one file per algorithm, each turning a request on a ring/mesh geometry into the
//! per-rank step tapes of docs/contract/lowering.md §4 (gloo style: algorithms separate from
//! transport). Each file's doc comment states its step count and bytes on the wire.
//!
//! What every composer shares lives here: the [`Leg`] it composes (which ranks, in which ring
//! order, over which element window of the buffers), the channel/chunk split of §4.1 and §5.3
//! ([`ChunkPlan`]), and the semaphore plan ([`SemPlan`]) that wires steps together (§6.4).

use crate::error::{Error, Result};
use crate::lower::program::{Buf, Loc, Sem, Signal, SignalKind, Wait};
use crate::lower::request::{CollectiveOp, CollectiveRequest};

pub mod hier;
pub mod kangaring;
pub mod leg_join;
pub mod mesh;
pub mod mesh_a2a;
pub mod permute;
pub mod rdh;
pub mod ring;
pub mod ring_common;
pub mod single_cycle_ring;
#[cfg(test)]
pub mod testeval;

/// Most ring channels per communicator (`NEC_MAX_CHANNELS`, docs/contract/lowering.md §5.3).
pub const MAX_CHANNELS: u8 = 32;
/// Default chunk size in bytes (`NEURON_RT_CC_CHUNK_SIZE`, docs/contract/lowering.md §5.3).
pub const DEFAULT_CHUNK_BYTES: u64 = 2 << 20;
/// Chunk element counts are even and 32-element aligned (docs/contract/lowering.md §5.3).
pub const CHUNK_ALIGN_ELEMS: u64 = 32;

/// Where a leg reads or writes on every participant: a buffer and the element offset the
/// leg's blocks are relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The buffer.
    pub buf: Buf,
    /// Element offset of the window in it.
    pub offset: u64,
}

/// One leg to compose: a set of ranks (in ring order) running one collective over windows of
/// every participant's buffers. A flat collective is one leg over the whole group; a
/// hierarchical one is several (docs/contract/lowering.md §4.7).
///
/// Blocks are indexed by **rank id** (the chunk index of §4.1 is a rank id): `src_block[k]` is
/// where chunk k's data sits in a participant's source window, `dst_block[k]` where chunk k
/// goes in a participant's destination window. For example, with N ranks and `count` elements:
/// all-reduce: both are the same near-equal split of `count` into N blocks; reduce-scatter:
/// `src_block[k] = (k·count, count)`, `dst_block[k] = (0, count)` (only rank k keeps chunk k);
/// all-gather: `src_block[k] = (0, count)` (rank k's own input), `dst_block[k] = (k·count, count)`.
/// Entries for ranks outside the leg are unused.
#[derive(Debug, Clone)]
pub struct Leg<'a> {
    /// The request (dtype, reduce op, in-place flag).
    pub request: &'a CollectiveRequest,
    /// What this leg does (for a flat collective: the request's op).
    pub op: CollectiveOp,
    /// Participating rank ids, in ring order (`user_ranks`, docs/contract/lowering.md §4.1):
    /// position p holds rank `order[p]`.
    pub order: Vec<u32>,
    /// Source window of every participant.
    pub src: Window,
    /// Destination window of every participant.
    pub dst: Window,
    /// `(offset, len)` of chunk k (a rank id) in the source window.
    pub src_block: Vec<(u64, u64)>,
    /// `(offset, len)` of chunk k in the destination window.
    pub dst_block: Vec<(u64, u64)>,
    /// First scratch element this leg may use (every participant has the same layout).
    pub scratch_base: u64,
    /// Channels to spread each block over (1..=32).
    pub channels: u8,
    /// Chunk size in elements (even, multiple of 32; the last chunk may be shorter).
    pub chunk_elems: u64,
    /// Which TOP_SP of a rank drives channel `c`.
    pub topsp_of_channel: fn(u8) -> u8,
    /// The semaphores this leg may use.
    pub sems: SemPlan,
}

/// What a composer returns for one leg.
#[derive(Debug, Clone)]
pub struct ComposedLeg {
    /// One entry per participating rank.
    pub entries: std::collections::BTreeMap<u32, crate::lower::program::Entry>,
    /// Scratch elements used from `scratch_base` (the same on every participant).
    pub scratch_elems: u64,
    /// TOP_SP semaphore ids used from `sems.base`.
    pub sems_used: u8,
}

impl Leg<'_> {
    /// Number of ranks in the leg.
    pub fn n(&self) -> u32 {
        self.order.len() as u32
    }
    /// Position of `rank` in the ring order.
    pub fn position(&self, rank: u32) -> Result<u32> {
        self.order
            .iter()
            .position(|&r| r == rank)
            .map(|p| p as u32)
            .ok_or_else(|| {
                Error::invalid(format!("rank {rank} is not in the leg {:?}", self.order))
            })
    }
    /// `na[i]` of docs/contract/lowering.md §4.1 for the rank at position `p`: the rank `i` places
    /// further along the ring.
    pub fn na(&self, p: u32, i: u32) -> u32 {
        self.order[((p + i) % self.n()) as usize]
    }
    /// NEXT of the rank at position `p`.
    pub fn next(&self, p: u32) -> u32 {
        self.na(p, 1)
    }
    /// PREV of the rank at position `p`.
    pub fn prev(&self, p: u32) -> u32 {
        self.order[((p + self.n() - 1) % self.n()) as usize]
    }
}

/// A near-equal split of `total` elements into `n` blocks `(offset, len)`: the first
/// `total % n` blocks get one element more (counts need not divide evenly).
pub fn split_even(total: u64, n: u32) -> Vec<(u64, u64)> {
    let n64 = u64::from(n.max(1));
    let (base, extra) = (total / n64, total % n64);
    (0..n64)
        .map(|k| (k * base + k.min(extra), base + u64::from(k < extra)))
        .collect()
}

/// How a block of `block_elems` elements is split over channels and chunks
/// (docs/contract/lowering.md §4.1): channel c owns a contiguous 1/ch_n share of every block; a
/// channel's share is processed in loops of `chunk` elements; each loop is issued as two halves
/// (H0, H1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Elements per block.
    pub block_elems: u64,
    /// Channels actually used (a channel with no elements is skipped).
    pub channels: u8,
    /// Chunk elements.
    pub chunk_elems: u64,
}

impl ChunkPlan {
    /// Plan a block over at most `channels` channels with chunks of `chunk_elems`.
    pub fn new(block_elems: u64, channels: u8, chunk_elems: u64) -> Result<ChunkPlan> {
        if channels == 0 || channels > MAX_CHANNELS {
            return Err(Error::invalid(format!(
                "channel count {channels} is not in 1..={MAX_CHANNELS}"
            )));
        }
        if chunk_elems == 0 || chunk_elems % 2 != 0 {
            return Err(Error::invalid(format!(
                "chunk of {chunk_elems} elements: must be even and non-zero"
            )));
        }
        // Never use more channels than there are elements to give them.
        let used = (channels as u64).min(block_elems.max(1)) as u8;
        Ok(ChunkPlan {
            block_elems,
            channels: used,
            chunk_elems,
        })
    }

    /// The element window `[start, end)` of block-relative offsets that channel `c` owns.
    pub fn channel_window(&self, c: u8) -> (u64, u64) {
        let ch = u64::from(self.channels);
        let c = u64::from(c);
        let base = self.block_elems / ch;
        let extra = self.block_elems % ch;
        let start = c * base + c.min(extra);
        let len = base + u64::from(c < extra);
        (start, start + len)
    }

    /// The pieces `(offset, len)` of channel `c`'s window, one per (loop, half), in issue order.
    /// Every half is non-empty except when the window itself is empty (then there are none).
    pub fn pieces(&self, c: u8) -> Vec<(u64, u64)> {
        let (start, end) = self.channel_window(c);
        let mut out = Vec::new();
        let mut off = start;
        while off < end {
            let loop_len = self.chunk_elems.min(end - off);
            let h0 = loop_len.div_ceil(2);
            out.push((off, h0));
            if loop_len - h0 > 0 {
                out.push((off + h0, loop_len - h0));
            }
            off += loop_len;
        }
        out
    }
}

/// Chunk size in elements for a dtype of `elem_bytes` bytes: the default 2 MiB chunk rounded
/// down to the 32-element alignment of docs/contract/lowering.md §5.3.
pub fn default_chunk_elems(elem_bytes: u64) -> u64 {
    let e = (DEFAULT_CHUNK_BYTES / elem_bytes.max(1)) / CHUNK_ALIGN_ELEMS * CHUNK_ALIGN_ELEMS;
    e.max(CHUNK_ALIGN_ELEMS)
}

/// The semaphores that wire a leg's steps (docs/contract/lowering.md §6.4): per (rank, channel) a
/// receive semaphore (REMOTE increments land here; the receiving step waits on it) and a
/// local-completion one (LOCAL increments: the source may be reused), and a credit semaphore for
/// flow control.
#[derive(Debug, Clone, Copy)]
pub struct SemPlan {
    /// First free TOP_SP semaphore id for this leg.
    pub base: u8,
}

impl SemPlan {
    /// Semaphores per channel.
    pub const PER_CHANNEL: u8 = 3;

    /// The plan for a leg whose semaphores start at `base`.
    pub fn new(base: u8) -> SemPlan {
        SemPlan { base }
    }
    fn id(&self, channel: u8, k: u8) -> u8 {
        self.base + channel * Self::PER_CHANNEL + k
    }
    /// `recv_sema` of `rank`'s channel: data for it has landed.
    pub fn recv(&self, rank: u32, channel: u8, topsp: u8) -> Sem {
        Sem {
            rank,
            topsp,
            id: self.id(channel, 0),
        }
    }
    /// `dma_compl_sema` of `rank`'s channel: its own transfers finished.
    pub fn local(&self, rank: u32, channel: u8, topsp: u8) -> Sem {
        Sem {
            rank,
            topsp,
            id: self.id(channel, 1),
        }
    }
    /// `send_sema` of `rank`'s channel: credits returned by the receiver.
    pub fn credit(&self, rank: u32, channel: u8, topsp: u8) -> Sem {
        Sem {
            rank,
            topsp,
            id: self.id(channel, 2),
        }
    }
    /// Wait for one arrival on `rank`'s receive semaphore, consuming it (`wait_ge_and_dec`).
    pub fn wait_recv(&self, rank: u32, channel: u8, topsp: u8) -> Wait {
        Wait {
            sem: self.recv(rank, channel, topsp),
            target: 1,
            consume: 1,
        }
    }
    /// The two increments of a leg that sends from `from` to `to` (docs/contract/lowering.md §6.4):
    /// LOCAL on the sender, REMOTE on the receiver.
    pub fn leg_signals(&self, from: u32, to: u32, channel: u8, topsp: u8) -> Vec<Signal> {
        vec![
            Signal {
                sem: self.local(from, channel, topsp),
                amount: 1,
                kind: SignalKind::Local,
            },
            Signal {
                sem: self.recv(to, channel, topsp),
                amount: 1,
                kind: SignalKind::Remote,
            },
        ]
    }
}

/// Shorthand for a location.
pub fn loc(rank: u32, buf: Buf, offset: u64) -> Loc {
    Loc { rank, buf, offset }
}

#[cfg(test)]
mod tests;
