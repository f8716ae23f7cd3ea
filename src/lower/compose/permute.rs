//! The point-to-point family: PERMUTE, PERMUTE_IMPLICIT, PERMUTE_REDUCE_IMPLICIT
//! (docs/contract/lowering.md §4.9), SEND/RECV (§4.10) and BARRIER, all in the push model of
//! [`ring_common`](super::ring_common): a sender's step writes into the receiver's memory with
//! LOCAL + REMOTE increments; the receiver's `direct_recv` waits on its receive semaphore.
//!
//! **Step count** per rank, per used channel, per (loop, half) piece of the block moved: one
//! sending step (`send`, or `direct_reduce_send_permute` for permute-reduce) if the rank has a
//! target, one `direct_recv` if it has a source (a self pair is one local `direct_copy`, none in
//! place). SEND/RECV adds one `post_recv` per channel on the receiver. BARRIER: 4 steps at ring
//! position 0, 2 elsewhere, on channel 0. **Bytes on the wire** per sending rank: count · E
//! (BARRIER: none).
//!
//! Choices:
//! * **Chunk and blocks.** The data a rank sends is chunk `s` (its own id): it reads
//!   `src_block[s]` of its source window and writes `dst_block[s]` of the target's destination
//!   window, split with the chunk's [`ChunkPlan`](super::ChunkPlan) so sender and receiver agree
//!   on pieces. Per piece a rank first sends, then receives: sends never wait, so no cycle forms.
//! * **PERMUTE**: pairs come from `leg.request.pairs` (source, target rank ids; every rank at
//!   most once as a source and once as a target). A rank that is nobody's target leaves its
//!   output alone; a rank that is nobody's source sends nothing.
//! * **PERMUTE_IMPLICIT**: position p sends to position p + 1 of `leg.order`.
//! * **PERMUTE_REDUCE_IMPLICIT**: the second operand `src1` is the `len` elements right after
//!   `src0` in the source window (the input holds `[src0 | src1]`, 2·count elements); the
//!   successor receives `op(src0, src1)`, computed by the sender's CCE on the way out
//!   (`direct_reduce_send_permute`, shape RING_2R1W: two sources, one write).
//! * **In place** (source and destination one storage): a peer's push could land on input this
//!   rank has not sent yet, so incoming data is staged in the receiver's scratch (at the piece's
//!   block offset) and the `direct_recv` step copies it into place after this rank's own send of
//!   that piece. That needs identical source and destination blocks for every chunk (otherwise
//!   it is rejected). Out of place, data lands directly in the destination.
//! * **SEND/RECV**: a 2-rank leg, `order[0]` sends to `order[1]`. The receiver's `post_recv`
//!   returns one credit per channel to the sender's credit semaphore; the sender's first `send`
//!   on that channel waits for it (§4.10: "RECV posts credit").
//! * **BARRIER**: no data; a zero-length token (a zero-length transfer still signals) goes
//!   around the ring twice. Position 0 starts trip 1 and, once it returns (every rank has
//!   arrived), starts trip 2; a rank finishes when trip 2 passes it, so no rank finishes before
//!   every rank has arrived. N = 1: nothing to do.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::lower::compose::ring_common::{
    block_len, check_leg, copy, copy_step, grid, reduce_step, same_loc, same_storage, Assembler,
    Ctx,
};
use crate::lower::compose::{loc, ComposedLeg, Leg};
use crate::lower::program::{Algorithm, Half, Primitive, RingShape, Step, Transfer};
use crate::lower::request::{CollectiveOp, ReduceOp};

/// Compose any op of the family, chosen by `leg.op`.
pub fn compose(leg: &Leg) -> Result<ComposedLeg> {
    match leg.op {
        CollectiveOp::Permute => compose_permute(leg),
        CollectiveOp::PermuteImplicit => compose_permute_implicit(leg),
        CollectiveOp::PermuteReduceImplicit => compose_permute_reduce_implicit(leg),
        CollectiveOp::Send | CollectiveOp::Recv => compose_send_recv(leg),
        CollectiveOp::Barrier => compose_barrier(leg),
        other => Err(Error::invalid(format!(
            "the point-to-point composer does not build {other:?}"
        ))),
    }
}

/// PERMUTE with explicit pairs (`leg.request.pairs`).
pub fn compose_permute(leg: &Leg) -> Result<ComposedLeg> {
    p2p(leg, "permute", &leg.request.pairs, None, false)
}

/// PERMUTE_IMPLICIT: ring successor.
pub fn compose_permute_implicit(leg: &Leg) -> Result<ComposedLeg> {
    p2p(leg, "permute-implicit", &successors(leg), None, false)
}

/// PERMUTE_REDUCE_IMPLICIT: the successor receives `op(src0, src1)`.
pub fn compose_permute_reduce_implicit(leg: &Leg) -> Result<ComposedLeg> {
    let op = leg
        .request
        .reduce
        .ok_or_else(|| Error::invalid("permute-reduce needs a reduce op (add, max or min)"))?;
    p2p(
        leg,
        "permute-reduce-implicit",
        &successors(leg),
        Some(op),
        false,
    )
}

/// SEND/RECV: `order[0]` sends to `order[1]`.
pub fn compose_send_recv(leg: &Leg) -> Result<ComposedLeg> {
    if leg.order.len() != 2 {
        return Err(Error::invalid(format!(
            "send/recv is a 2-rank leg (sender, receiver), got ranks {:?}",
            leg.order
        )));
    }
    p2p(
        leg,
        "send/recv",
        &[(leg.order[0], leg.order[1])],
        None,
        true,
    )
}

/// BARRIER: two trips of a zero-length token around the ring.
pub fn compose_barrier(leg: &Leg) -> Result<ComposedLeg> {
    check_leg(leg)?;
    let mut asm = Assembler::new(leg, "barrier", Algorithm::Ring);
    let n = leg.n();
    if n > 1 {
        let cx = Ctx::new(leg, 0);
        let token = |me: u32, next: u32| vec![copy(cx.scratch(me, 0), cx.scratch(next, 0), 0)];
        for p in 0..n {
            let (me, next) = (leg.order[p as usize], leg.next(p));
            let pass = |prim, wait| {
                copy_step(
                    prim,
                    Half::H0,
                    me,
                    wait,
                    token(me, next),
                    cx.leg_signals(me, next),
                )
            };
            let steps = if p == 0 {
                let back = || {
                    copy_step(
                        Primitive::DirectRecv,
                        Half::H0,
                        me,
                        cx.wait(me),
                        vec![],
                        vec![],
                    )
                };
                vec![
                    pass(Primitive::Send, None),
                    back(),
                    pass(Primitive::Send, None),
                    back(),
                ]
            } else {
                vec![
                    pass(Primitive::DirectRecvSend, cx.wait(me)),
                    pass(Primitive::DirectRecvSend, cx.wait(me)),
                ]
            };
            for s in steps {
                asm.push(me, 0, s);
            }
        }
    }
    Ok(asm.finish(leg, 0))
}

/// Position p → position p + 1 of the ring order.
fn successors(leg: &Leg) -> Vec<(u32, u32)> {
    (0..leg.n())
        .map(|p| (leg.order[p as usize], leg.next(p)))
        .collect()
}

/// The shared point-to-point composer: every `(from, to)` pair moves chunk `from` (reduced
/// with its `src1` when `reduce` is set); `credits` adds the SEND/RECV credit handshake.
fn p2p(
    leg: &Leg,
    name: &str,
    pairs: &[(u32, u32)],
    reduce: Option<ReduceOp>,
    credits: bool,
) -> Result<ComposedLeg> {
    check_leg(leg)?;
    let mut target = BTreeMap::new();
    let mut source = BTreeMap::new();
    for &(s, t) in pairs {
        for r in [s, t] {
            leg.position(r)?;
        }
        if target.insert(s, t).is_some() || source.insert(t, s).is_some() {
            return Err(Error::invalid(format!(
                "{name}: pairs {pairs:?} name rank {s} as a source or rank {t} as a target twice"
            )));
        }
    }
    let mut chunks = Vec::new();
    for &s in target.keys() {
        chunks.push((s, block_len(leg, s)?));
    }
    let staging = same_storage(leg, leg.src.buf, leg.dst.buf) && target.iter().any(|(s, t)| s != t);
    let mut scratch_elems = 0;
    if staging {
        let first = leg.src_block[chunks[0].0 as usize];
        if chunks
            .iter()
            .any(|&(k, _)| leg.src_block[k as usize] != first || leg.dst_block[k as usize] != first)
        {
            return Err(Error::invalid(format!(
                "in-place {name}: every chunk needs the same source and destination block"
            )));
        }
        scratch_elems = first.1;
    }
    let mut asm = Assembler::new(leg, name, Algorithm::Ring);
    for cg in grid(&chunks, leg.channels, leg.chunk_elems)? {
        let cx = Ctx::new(leg, cg.channel);
        if credits {
            for (&t, &s) in &source {
                let post = copy_step(
                    Primitive::PostRecv,
                    Half::H0,
                    s,
                    None,
                    vec![],
                    cx.credit_signal(s),
                );
                asm.push(t, cg.channel, post);
            }
        }
        for (i, slot) in cg.loops.iter().flatten().enumerate() {
            for &me in &leg.order {
                if let Some(&to) = target.get(&me) {
                    let (off, len) = slot.of(me);
                    let wait = if credits && i == 0 {
                        cx.wait_credit(me)
                    } else {
                        None
                    };
                    let step = send(&cx, me, to, off, len, slot.half, reduce, staging, wait);
                    if let Some(step) = step {
                        asm.push(me, cg.channel, step);
                    }
                }
                if let Some(&from) = source.get(&me).filter(|&&f| f != me) {
                    let (off, len) = slot.of(from);
                    let (transfers, signals) = if staging {
                        (
                            vec![copy(cx.scratch(me, off), cx.dst(me, from, off), len)],
                            cx.local_signal(me),
                        )
                    } else {
                        (vec![], vec![])
                    };
                    let step = copy_step(
                        Primitive::DirectRecv,
                        slot.half,
                        from,
                        cx.wait(me),
                        transfers,
                        signals,
                    );
                    asm.push(me, cg.channel, step);
                }
            }
        }
    }
    Ok(asm.finish(leg, scratch_elems))
}

/// The sending step of one piece of chunk `me` to `to` (a local step when `to == me`; `None`
/// for a copy onto itself).
#[allow(clippy::too_many_arguments)]
fn send(
    cx: &Ctx,
    me: u32,
    to: u32,
    off: u64,
    len: u64,
    half: Half,
    reduce: Option<ReduceOp>,
    staging: bool,
    wait: Option<crate::lower::program::Wait>,
) -> Option<Step> {
    let local = to == me;
    let dst = if staging && !local {
        cx.scratch(to, off)
    } else {
        cx.dst(to, me, off)
    };
    let signals = if local {
        cx.local_signal(me)
    } else {
        cx.leg_signals(me, to)
    };
    let src0 = cx.src(me, me, off);
    Some(match reduce {
        Some(op) => {
            let b = cx.leg.src_block[me as usize];
            let src1 = loc(me, cx.leg.src.buf, cx.leg.src.offset + b.0 + b.1 + off);
            let shape = RingShape::Ring2R1W;
            let t = Transfer::Reduce {
                op,
                shape,
                srcs: vec![src0, src1],
                dst,
                len,
            };
            reduce_step(
                Primitive::DirectReduceSendPermute,
                half,
                me,
                op,
                shape,
                wait,
                vec![t],
                signals,
            )
        }
        None if local => {
            if same_loc(cx.leg, src0, dst) {
                return None;
            }
            copy_step(
                Primitive::DirectCopy,
                half,
                me,
                wait,
                vec![copy(src0, dst, len)],
                signals,
            )
        }
        None => copy_step(
            Primitive::Send,
            half,
            me,
            wait,
            vec![copy(src0, dst, len)],
            signals,
        ),
    })
}

#[cfg(test)]
mod tests;
