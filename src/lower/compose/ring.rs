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
mod tests {
    use super::*;
    use crate::lower::compose::testeval::{census, check_all, leg, request, shuffled, Case};
    use crate::lower::program::Half;

    fn case(op: CollectiveOp, n: u32, count: u64) -> Case {
        let mut c = Case::new(op, n, count);
        if op != CollectiveOp::AllGather {
            c.reduce = Some(ReduceOp::Add);
        }
        c
    }

    fn composed(c: &Case) -> ComposedLeg {
        let req = request(c);
        compose(&leg(c, &req)).unwrap()
    }

    /// docs/contract/lowering.md §4.2's worked check: N = 4, identity ring, the chunk each rank
    /// handles per line.
    #[test]
    fn worked_table_n4() {
        let mut c = case(CollectiveOp::AllReduce, 4, 4 * 64);
        c.channels = 1;
        let k = composed(&c);
        use Primitive::*;
        let prims = [
            Send,
            RecvReduceSend,
            RecvReduceSend,
            RecvReduceCopy,
            DirectCopySend,
            DirectRecvSend,
            DirectRecvSend,
            DirectRecv,
        ];
        for r in 0..4u32 {
            let tape = &k.entries[&r].tapes[0];
            assert_eq!(tape.steps.len(), 16, "one loop, two halves, 2N steps each");
            let h0: Vec<_> = tape.steps.iter().filter(|s| s.half == Half::H0).collect();
            let chunks: Vec<u32> = h0.iter().map(|s| s.chunk).collect();
            let m = |i: u32| (r + i) % 4;
            assert_eq!(chunks, vec![m(3), m(2), m(1), r, r, m(3), m(2), m(1)]);
            assert_eq!(h0.iter().map(|s| s.primitive).collect::<Vec<_>>(), prims);
            // Each line runs for H0 then H1.
            assert_eq!(tape.steps[0].half, Half::H0);
            assert_eq!(tape.steps[1].half, Half::H1);
            assert_eq!(tape.steps[1].chunk, tape.steps[0].chunk);
        }
    }

    /// docs/contract/lowering.md §8.1: all-reduce = reduce-scatter (reduce, RING_2R1W) + all-gather
    /// (copy); all-gather has zero reduce steps.
    #[test]
    fn census_facts() {
        for n in [2, 3, 5] {
            let ar = composed(&case(CollectiveOp::AllReduce, n, 4099));
            let rs = composed(&case(CollectiveOp::ReduceScatter, n, 4099 / u64::from(n)));
            let ag = composed(&case(CollectiveOp::AllGather, n, 777));
            for e in ar.entries.values().chain(rs.entries.values()) {
                for s in e.tapes.iter().flat_map(|t| &t.steps) {
                    assert_eq!(s.primitive.is_reduce(), s.reduction.is_some());
                    if let Some(r) = s.reduction {
                        assert_eq!(r, (ReduceOp::Add, RingShape::Ring2R1W));
                        assert!(s
                            .transfers
                            .iter()
                            .all(|t| matches!(t, Transfer::Reduce { .. })));
                    }
                }
            }
            for e in ag.entries.values() {
                for s in e.tapes.iter().flat_map(|t| &t.steps) {
                    assert!(!s.primitive.is_reduce() && s.reduction.is_none());
                    assert!(s
                        .transfers
                        .iter()
                        .all(|t| matches!(t, Transfer::Copy { .. })));
                }
            }
            let (car, cag) = (census(&ar), census(&ag));
            assert!(car.contains_key("RecvReduceSend") == (n > 2));
            assert!(car.contains_key("RecvReduceCopy") && car.contains_key("DirectRecv"));
            assert!(!cag.keys().any(|k| k.contains("Reduce")), "{cag:?}");
            // The all-reduce's reduce steps are exactly the reduce-scatter's, per piece.
            let reduces = |m: &BTreeMap<String, usize>| {
                m.iter()
                    .filter(|(k, _)| k.contains("Reduce"))
                    .map(|(_, v)| v)
                    .sum::<usize>()
            };
            let one = |k: &ComposedLeg| {
                k.entries[&0]
                    .tapes
                    .iter()
                    .map(|t| t.steps.len())
                    .sum::<usize>()
            };
            let c1 = |op, cnt| {
                let mut c = case(op, n, cnt);
                c.channels = 1;
                c.chunk = 1 << 20;
                composed(&c)
            };
            let (ar1, rs1, ag1) = (
                c1(CollectiveOp::AllReduce, 64 * u64::from(n)),
                c1(CollectiveOp::ReduceScatter, 64),
                c1(CollectiveOp::AllGather, 64),
            );
            assert_eq!(reduces(&census(&ar1)), reduces(&census(&rs1)));
            // Steps per rank per piece: AR 2N, RS N, AG N (two halves here).
            let n = n as usize;
            assert_eq!((one(&ar1), one(&rs1), one(&ag1)), (4 * n, 2 * n, 2 * n));
        }
    }

    use std::collections::BTreeMap;

    #[test]
    fn results_all_ops() {
        for op in [
            CollectiveOp::AllReduce,
            CollectiveOp::ReduceScatter,
            CollectiveOp::AllGather,
        ] {
            for n in [1, 2, 3, 4, 5, 8] {
                for count in [0, 1, 7, 4099] {
                    for in_place in [false, true] {
                        let mut c = case(op, n, count);
                        c.in_place = in_place;
                        check_all(&c, compose);
                        c.order = shuffled(n);
                        c.channels = 2;
                        check_all(&c, compose);
                    }
                }
            }
        }
    }

    #[test]
    fn results_max_min_and_channels() {
        for (redop, channels, chunk) in [
            (ReduceOp::Max, 1, 32),
            (ReduceOp::Min, 32, 64),
            (ReduceOp::Add, 5, 2),
        ] {
            for op in [CollectiveOp::AllReduce, CollectiveOp::ReduceScatter] {
                for n in [2, 3, 4] {
                    let mut c = case(op, n, 301);
                    c.reduce = Some(redop);
                    c.channels = channels;
                    c.chunk = chunk;
                    c.order = shuffled(n);
                    check_all(&c, compose);
                }
            }
        }
    }

    #[test]
    fn results_large_two_ranks() {
        for op in [
            CollectiveOp::AllReduce,
            CollectiveOp::ReduceScatter,
            CollectiveOp::AllGather,
        ] {
            let mut c = case(op, 2, 1 << 20);
            c.channels = 4;
            c.chunk = 4096;
            check_all(&c, compose);
        }
    }

    #[test]
    fn scratch_and_sems() {
        let ar = composed(&case(CollectiveOp::AllReduce, 4, 4099));
        assert_eq!(ar.scratch_elems, 4099);
        assert_eq!(ar.sems_used, 3 * 3);
        let ag = composed(&case(CollectiveOp::AllGather, 4, 4099));
        assert_eq!(ag.scratch_elems, 0);
        let zero = composed(&case(CollectiveOp::AllReduce, 4, 0));
        assert!(zero.entries.values().all(|e| e.tapes.is_empty()));
        let mut one = case(CollectiveOp::AllReduce, 1, 10);
        one.in_place = true;
        assert!(
            composed(&one).entries[&0].tapes.is_empty(),
            "N = 1 in place: nothing to do"
        );
    }

    #[test]
    fn rejects() {
        let mut c = case(CollectiveOp::AllReduce, 3, 10);
        c.reduce = None;
        let req = request(&c);
        assert!(compose(&leg(&c, &req)).is_err());
        let c = case(CollectiveOp::Permute, 3, 10);
        let req = request(&c);
        assert!(compose(&leg(&c, &req)).is_err());
        // In-place all-gather with every input at the start of the storage: unsafe.
        let mut c = case(CollectiveOp::AllGather, 3, 10);
        c.in_place = true;
        let req = request(&c);
        let mut l = leg(&c, &req);
        l.src_block = vec![(0, 10); 3];
        assert!(compose(&l).is_err());
    }

    /// docs/contract/lowering.md §4.2 for N = 2: send na[1]; reduce na[0] and forward it; receive
    /// na[1].
    #[test]
    fn two_rank_short_form() {
        let mut c = case(CollectiveOp::AllReduce, 2, 2 * 64);
        c.channels = 1;
        c.order = vec![1, 0];
        let k = composed(&c);
        use Primitive::*;
        for r in 0..2u32 {
            let h0: Vec<_> = k.entries[&r].tapes[0]
                .steps
                .iter()
                .filter(|s| s.half == Half::H0)
                .map(|s| (s.primitive, s.chunk))
                .collect();
            let o = 1 - r;
            assert_eq!(
                h0,
                vec![
                    (Send, o),
                    (RecvReduceCopy, r),
                    (DirectCopySend, r),
                    (DirectRecv, o)
                ]
            );
        }
    }

    /// A sub-leg (as HIER builds): ranks 3 and 1 of a 4-rank group, blocks indexed by rank id.
    #[test]
    fn sub_leg_of_a_larger_group() {
        use crate::lower::compose::testeval::{run, Memory};
        use crate::lower::program::Buf;
        let mut c = case(CollectiveOp::AllReduce, 4, 10);
        c.order = vec![3, 1];
        let req = request(&c);
        let mut l = leg(&c, &req);
        l.src_block = vec![(0, 0), (0, 6), (0, 0), (6, 4)];
        l.dst_block = l.src_block.clone();
        l.scratch_base = 0;
        let k = compose(&l).unwrap();
        assert_eq!(k.entries.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
        let mut mem = Memory::new(false);
        for r in [1u32, 3] {
            mem.set(
                r,
                Buf::Input,
                (0..10).map(|i| i64::from(r) * 100 + i).collect(),
            );
            mem.set(r, Buf::Output, vec![0; 10]);
            mem.set(r, Buf::Scratch, vec![0; k.scratch_elems as usize]);
        }
        run(&k.entries, &mut mem, 1).unwrap();
        let want: Vec<i64> = (0..10).map(|i| 400 + 2 * i).collect();
        assert_eq!(mem.get(1, Buf::Output), &want[..]);
        assert_eq!(mem.get(3, Buf::Output), &want[..]);
    }
}
