use super::*;
use crate::lower::compose::testeval::{census, check_all, leg, request, shuffled, Case};
use crate::lower::program::{Primitive, Transfer};
use crate::lower::request::{CollectiveOp, ReduceOp};

fn case(op: CollectiveOp, n: u32, count: u64) -> Case {
    let mut c = Case::new(op, n, count);
    if op != CollectiveOp::AllGather {
        c.reduce = Some(ReduceOp::Max);
    }
    c
}

/// docs/contract/lowering.md §8.2: kangaring reduce steps carry KANGARING_NR1W; the op is
/// separate.
#[test]
fn uses_kangaring_nr1w() {
    for op in [CollectiveOp::AllReduce, CollectiveOp::ReduceScatter] {
        let c = case(op, 4, 1000);
        let req = request(&c);
        let k = compose(&leg(&c, &req)).unwrap();
        let mut reduces = 0;
        for e in k.entries.values() {
            assert_eq!(e.algorithm, Algorithm::Kangaring);
            for s in e.tapes.iter().flat_map(|t| &t.steps) {
                if s.primitive.is_reduce() {
                    reduces += 1;
                    assert_eq!(s.primitive, Primitive::DirectReduceSendKangaring);
                    assert_eq!(s.reduction, Some((ReduceOp::Max, RingShape::KangaringNR1W)));
                    for t in &s.transfers {
                        if let Transfer::Reduce { srcs, shape, .. } = t {
                            assert!(srcs.len() <= 4);
                            assert_eq!(*shape, RingShape::KangaringNR1W);
                        }
                    }
                } else {
                    assert!(s.reduction.is_none());
                }
            }
        }
        assert!(reduces > 0);
    }
    let c = case(CollectiveOp::AllGather, 4, 100);
    let req = request(&c);
    let ag = census(&compose(&leg(&c, &req)).unwrap());
    assert!(!ag.keys().any(|k| k.contains("Reduce")));
}

#[test]
fn results_equal_ring() {
    for op in [
        CollectiveOp::AllReduce,
        CollectiveOp::ReduceScatter,
        CollectiveOp::AllGather,
    ] {
        for n in [1, 2, 3, 4, 5, 8] {
            for count in [0, 1, 7, 4099] {
                let mut c = case(op, n, count);
                check_all(&c, compose);
                c.in_place = true;
                c.order = shuffled(n);
                check_all(&c, compose);
            }
        }
    }
}

#[test]
fn large_two_ranks() {
    let mut c = case(CollectiveOp::AllReduce, 2, 1 << 20);
    c.chunk = 4096;
    check_all(&c, compose);
}
