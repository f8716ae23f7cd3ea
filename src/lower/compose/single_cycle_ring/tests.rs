use super::*;
use crate::lower::compose::testeval::{census, check_all, leg, request, shuffled, Case};
use crate::lower::request::ReduceOp;

fn case(op: CollectiveOp, n: u32, count: u64) -> Case {
    let mut c = Case::new(op, n, count);
    c.reduce = Some(ReduceOp::Add);
    c
}

#[test]
fn refuses_other_ops() {
    for op in [
        CollectiveOp::AllGather,
        CollectiveOp::ReduceScatter,
        CollectiveOp::AllToAll,
        CollectiveOp::Permute,
    ] {
        let c = case(op, 4, 8);
        let req = request(&c);
        assert!(compose(&leg(&c, &req)).is_err(), "{op:?}");
    }
}

#[test]
fn fused_tape() {
    let mut c = case(CollectiveOp::AllReduce, 4, 4 * 64);
    c.channels = 1;
    let req = request(&c);
    let k = compose(&leg(&c, &req)).unwrap();
    let m = census(&k);
    assert_eq!(m["RecvReduceCopySend"], 4 * 2);
    assert!(!m.contains_key("RecvReduceCopy"));
    for e in k.entries.values() {
        assert_eq!(e.algorithm, Algorithm::SingleCycleRing);
        assert_eq!(e.tapes[0].steps.len(), 2 * (2 * 4 - 1));
    }
}

#[test]
fn results() {
    for n in [1, 2, 3, 4, 5, 8] {
        for count in [0, 1, 7, 4099] {
            let mut c = case(CollectiveOp::AllReduce, n, count);
            check_all(&c, compose);
            c.in_place = true;
            c.order = shuffled(n);
            c.reduce = Some(ReduceOp::Min);
            check_all(&c, compose);
        }
    }
    let mut c = case(CollectiveOp::AllReduce, 2, 1 << 20);
    c.chunk = 4096;
    check_all(&c, compose);
}
