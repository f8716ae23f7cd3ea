//! RING: all-reduce, reduce-scatter and all-gather around one ring
//! (docs/contract/lowering.md §4.1–§4.3).
//!
//! **Step count** per rank, per used channel, per (loop, half) piece, with N ranks:
//! all-reduce 2N (reduce-scatter phase N + 1: `send`, N−2 × `recv_reduce_send`,
//! `recv_reduce_copy`, `direct_copy_send`; all-gather phase N−1: N−2 × `direct_recv_send`,
//! `direct_recv`); reduce-scatter N (`send`, N−2 × `recv_reduce_send`, `recv_reduce_copy`);
//! all-gather N (`direct_copy_send`, N−2 × `direct_recv_send`, `direct_recv`). N = 1: one
//! `direct_copy` (none when source and destination are the same elements).
//!
//! **Bytes on the wire** per rank (E = element bytes): all-reduce 2·(N−1)/N · count · E;
//! reduce-scatter (N−1) · count · E (count = the output block); all-gather (N−1) · count · E.
//!
//! Choices (all documented in [`ring_common`](super::ring_common) too):
//! * **Final reduce-scatter step of an all-reduce**: the pair `recv_reduce_copy` (into this
//!   rank's output block) then `direct_copy_send` (forward the finished block from the output),
//!   the main line of §4.2. The fused `recv_reduce_copy_send` is what the single-cycle ring
//!   composer uses ([`Style::fused_final`]).
//! * **Half order**: each line of §4.2 runs for H0 then H1 before the next line ("each line runs
//!   for H0 then H1"); loops run one after the other.
//! * **Scratch**: a reduce-scatter partial for chunk k lands in the receiver's scratch at
//!   `scratch_base + Σ_{j before k in ring order} len(block j) + piece offset`. A rank receives
//!   each (chunk, element) at most once per collective, so no slot is overwritten before its
//!   reduce step read it. `scratch_elems` = the sum of the participants' block lengths.
//!   All-gather data is pushed straight into the receiver's destination window.
//! * **In place** (input and output one storage): all-reduce needs identical source and
//!   destination blocks; partials never land on the input, and a peer's all-gather push into
//!   block j arrives only after this rank's reduce step read its own input of block j (the
//!   finished block depended on it). Reduce-scatter: a rank's output block must be its own
//!   input block (NCCL's convention) or clear of every input block. All-gather: a rank's input
//!   must be its own output block (NCCL's convention; its `direct_copy` is then skipped) or clear
//!   of every other block. Other layouts are rejected.

use crate::error::{Error, Result};
use crate::lower::compose::ring_common::{
    block_len, check_in_place, check_leg, copy, copy_step, grid, reduce_step, same_loc, Assembler,
    Ctx, RingKind, Slot,
};
use crate::lower::compose::{ComposedLeg, Leg};
use crate::lower::program::{Algorithm, Primitive, RingShape, Step, Transfer};
use crate::lower::request::CollectiveOp;
use crate::lower::request::ReduceOp;

/// How a ring-family composer differs from the plain ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// The algorithm recorded in the entries.
    pub algorithm: Algorithm,
    /// The ring shape passed to every reduce step.
    pub shape: RingShape,
    /// Reduce steps use `direct_reduce_send_kangaring` (docs/contract/lowering.md §4.4).
    pub kangaring: bool,
    /// The all-reduce's last reduce-scatter step is one `recv_reduce_copy_send`.
    pub fused_final: bool,
}

impl Style {
    /// The plain ring of docs/contract/lowering.md §4.2: RING_2R1W, `recv_reduce_copy` +
    /// `direct_copy_send`.
    pub const RING: Style = Style {
        algorithm: Algorithm::Ring,
        shape: RingShape::Ring2R1W,
        kangaring: false,
        fused_final: false,
    };
}

/// Compose a ring leg (all-reduce, reduce-scatter or all-gather).
pub fn compose(leg: &Leg) -> Result<ComposedLeg> {
    compose_styled(leg, Style::RING)
}

/// One line of the per-loop sequence for one rank (chunk = rank id).
#[derive(Debug, Clone, Copy)]
enum Line {
    /// N = 1: local copy.
    LocalCopy(u32),
    /// `send`: raw local data to NEXT's scratch.
    Send(u32),
    /// `recv_reduce_send`.
    Rrs(u32),
    /// `recv_reduce_copy`.
    Rrc(u32),
    /// `recv_reduce_copy_send`.
    Rrcs(u32),
    /// `direct_copy_send` of the finished block (from the output).
    ForwardDone(u32),
    /// `direct_copy_send` of the own input (all-gather).
    CopySendOwn(u32),
    /// `direct_recv_send`.
    RecvSend(u32),
    /// `direct_recv`.
    Recv(u32),
}

/// The lines of one loop for the rank at position `p` (docs/contract/lowering.md §4.2, §4.3).
fn lines(leg: &Leg, kind: RingKind, style: Style, p: u32) -> Vec<Line> {
    let n = leg.n();
    let na = |i: u32| leg.na(p, i);
    if n == 1 {
        return vec![Line::LocalCopy(na(0))];
    }
    let mut out = Vec::new();
    if kind == RingKind::AllGather {
        out.push(Line::CopySendOwn(na(0)));
    } else {
        out.push(Line::Send(na(n - 1)));
        out.extend((2..n).map(|s| Line::Rrs(na(n - s))));
        match (kind, style.fused_final) {
            (RingKind::ReduceScatter, _) => out.push(Line::Rrc(na(0))),
            (_, true) => out.push(Line::Rrcs(na(0))),
            (_, false) => out.extend([Line::Rrc(na(0)), Line::ForwardDone(na(0))]),
        }
        if kind == RingKind::ReduceScatter {
            return out;
        }
    }
    out.extend((1..n - 1).map(|t| Line::RecvSend(na(n - t))));
    out.push(Line::Recv(na(1)));
    out
}

/// Compose a ring-family leg in the given style.
pub fn compose_styled(leg: &Leg, style: Style) -> Result<ComposedLeg> {
    check_leg(leg)?;
    let kind = match leg.op {
        CollectiveOp::AllReduce => RingKind::AllReduce,
        CollectiveOp::ReduceScatter => RingKind::ReduceScatter,
        CollectiveOp::AllGather => RingKind::AllGather,
        other => {
            return Err(Error::invalid(format!(
                "the {} composer builds all-reduce, reduce-scatter and all-gather, not {other:?}",
                style.algorithm.name()
            )))
        }
    };
    let op = match kind {
        // Unused: all-gather has no reduce step (docs/contract/lowering.md §4.3).
        RingKind::AllGather => ReduceOp::Add,
        _ => leg.request.reduce.ok_or_else(|| {
            Error::invalid(format!("{:?} needs a reduce op (add, max or min)", leg.op))
        })?,
    };
    let mut chunks = Vec::new();
    let mut scratch_off = vec![0u64; leg.src_block.len().max(leg.dst_block.len())];
    let mut scratch_elems = 0;
    for &k in &leg.order {
        let len = block_len(leg, k)?;
        chunks.push((k, len));
        scratch_off[k as usize] = scratch_elems;
        scratch_elems += len;
    }
    if kind == RingKind::AllGather || leg.n() == 1 {
        scratch_elems = 0;
    }
    check_in_place(leg, kind)?;
    let name = format!(
        "{} {}",
        style.algorithm.name(),
        match kind {
            RingKind::AllReduce => "all-reduce",
            RingKind::ReduceScatter => "reduce-scatter",
            RingKind::AllGather => "all-gather",
        }
    );
    let mut asm = Assembler::new(leg, name, style.algorithm);
    let build = Build {
        style,
        op,
        scratch_off: &scratch_off,
    };
    for cg in grid(&chunks, leg.channels, leg.chunk_elems)? {
        let cx = Ctx::new(leg, cg.channel);
        for halves in &cg.loops {
            for p in 0..leg.n() {
                let me = leg.order[p as usize];
                for line in lines(leg, kind, style, p) {
                    for slot in halves {
                        if let Some(step) = build.step(&cx, p, line, slot) {
                            asm.push(me, cg.channel, step);
                        }
                    }
                }
            }
        }
    }
    Ok(asm.finish(leg, scratch_elems))
}

/// What step builders need besides the channel context.
struct Build<'s> {
    style: Style,
    op: ReduceOp,
    scratch_off: &'s [u64],
}

impl Build<'_> {
    fn reduce_primitive(&self, plain: Primitive) -> Primitive {
        if self.style.kangaring {
            Primitive::DirectReduceSendKangaring
        } else {
            plain
        }
    }

    /// The step of `line` on one piece for the rank at position `p`; `None` when the line has
    /// nothing to do there (an N = 1 copy onto itself).
    fn step(&self, cx: &Ctx, p: u32, line: Line, slot: &Slot) -> Option<Step> {
        let leg = cx.leg;
        let me = leg.order[p as usize];
        let next = leg.next(p);
        let h = slot.half;
        let scr =
            |rank: u32, k: u32, off: u64| cx.scratch(rank, self.scratch_off[k as usize] + off);
        let reduce = |k: u32, off: u64, len: u64, dst| Transfer::Reduce {
            op: self.op,
            shape: self.style.shape,
            srcs: vec![cx.src(me, k, off), scr(me, k, off)],
            dst,
            len,
        };
        let rstep = |prim, k, transfers, signals| {
            let prim = self.reduce_primitive(prim);
            reduce_step(
                prim,
                h,
                k,
                self.op,
                self.style.shape,
                cx.wait(me),
                transfers,
                signals,
            )
        };
        Some(match line {
            Line::LocalCopy(k) => {
                let (off, len) = slot.of(k);
                let (s, d) = (cx.src(me, k, off), cx.dst(me, k, off));
                if same_loc(leg, s, d) {
                    return None;
                }
                copy_step(
                    Primitive::DirectCopy,
                    h,
                    k,
                    None,
                    vec![copy(s, d, len)],
                    cx.local_signal(me),
                )
            }
            Line::Send(k) => {
                let (off, len) = slot.of(k);
                let t = copy(cx.src(me, k, off), scr(next, k, off), len);
                copy_step(
                    Primitive::Send,
                    h,
                    k,
                    None,
                    vec![t],
                    cx.leg_signals(me, next),
                )
            }
            Line::Rrs(k) => {
                let (off, len) = slot.of(k);
                let t = reduce(k, off, len, scr(next, k, off));
                rstep(
                    Primitive::RecvReduceSend,
                    k,
                    vec![t],
                    cx.leg_signals(me, next),
                )
            }
            Line::Rrc(k) => {
                let (off, len) = slot.of(k);
                let t = reduce(k, off, len, cx.dst(me, k, off));
                rstep(Primitive::RecvReduceCopy, k, vec![t], cx.local_signal(me))
            }
            Line::Rrcs(k) => {
                let (off, len) = slot.of(k);
                let d = cx.dst(me, k, off);
                let ts = vec![reduce(k, off, len, d), copy(d, cx.dst(next, k, off), len)];
                rstep(
                    Primitive::RecvReduceCopySend,
                    k,
                    ts,
                    cx.leg_signals(me, next),
                )
            }
            Line::ForwardDone(k) => {
                let (off, len) = slot.of(k);
                let t = copy(cx.dst(me, k, off), cx.dst(next, k, off), len);
                copy_step(
                    Primitive::DirectCopySend,
                    h,
                    k,
                    None,
                    vec![t],
                    cx.leg_signals(me, next),
                )
            }
            Line::CopySendOwn(k) => {
                let (off, len) = slot.of(k);
                let (s, d) = (cx.src(me, k, off), cx.dst(me, k, off));
                let mut ts = Vec::new();
                if !same_loc(leg, s, d) {
                    ts.push(copy(s, d, len));
                }
                ts.push(copy(s, cx.dst(next, k, off), len));
                copy_step(
                    Primitive::DirectCopySend,
                    h,
                    k,
                    None,
                    ts,
                    cx.leg_signals(me, next),
                )
            }
            Line::RecvSend(k) => {
                let (off, len) = slot.of(k);
                let t = copy(cx.dst(me, k, off), cx.dst(next, k, off), len);
                let sig = cx.leg_signals(me, next);
                copy_step(Primitive::DirectRecvSend, h, k, cx.wait(me), vec![t], sig)
            }
            Line::Recv(k) => copy_step(Primitive::DirectRecv, h, k, cx.wait(me), vec![], vec![]),
        })
    }
}

#[cfg(test)]
mod tests;
