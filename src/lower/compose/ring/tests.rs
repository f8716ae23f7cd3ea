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
    use crate::lower::compose::testeval::{programs_of, run, Memory, SCHEDS};
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
    let want: Vec<i64> = (0..10).map(|i| 400 + 2 * i).collect();
    for sched in SCHEDS {
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
        run(&programs_of(&[&k]), &mut mem, sched).unwrap();
        assert_eq!(mem.get(1, Buf::Output), &want[..], "{sched:?}");
        assert_eq!(mem.get(3, Buf::Output), &want[..], "{sched:?}");
    }
}
