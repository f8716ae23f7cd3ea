use super::*;

/// The table is indexed by the variant, so every op must sit at its own index.
#[test]
fn every_op_has_its_row() {
    for (i, r) in OP_NAMES.iter().enumerate() {
        assert_eq!(r.op as usize, i, "{:?}", r.op);
    }
    assert_eq!(OP_NAMES.len(), CollectiveOp::Barrier as usize + 1);
}

/// What the command line, the case lines and the messages printed before the table existed.
#[test]
fn spellings_are_the_tools() {
    let names: Vec<_> = CollectiveOp::listed().map(CollectiveOp::name).collect();
    assert_eq!(
        names.join(", "),
        "all_reduce, all_gather, reduce_scatter, all_to_all, all_to_all_v, permute, \
         permute_implicit, permute_reduce_implicit, send_recv, barrier"
    );
    assert_eq!(CollectiveOp::Recv.name(), "recv");
    assert_eq!(CollectiveOp::AllToAllV.label(), "all-to-all-v");
    assert_eq!(CollectiveOp::Send.label(), "send");
    assert_eq!(
        CollectiveOp::parse("ALL_GATHER"),
        Some(CollectiveOp::AllGather)
    );
    assert_eq!(CollectiveOp::parse("send_recv"), Some(CollectiveOp::Send));
    assert_eq!(CollectiveOp::parse("recv"), None);
    assert_eq!(CollectiveOp::parse("all-reduce"), None);
}

/// The C API's three ops, both ways, with the C header's codes (docs/contract/abi.md §2.2).
#[test]
fn nrt_cc_ops_round_trip() {
    use crate::abi::types::nrt_cc_op_type_t as T;
    for (t, op) in [
        (T::NRT_CC_ALLGATHER, CollectiveOp::AllGather),
        (T::NRT_CC_ALLREDUCE, CollectiveOp::AllReduce),
        (T::NRT_CC_REDUCESCATTER, CollectiveOp::ReduceScatter),
    ] {
        assert_eq!(CollectiveOp::from_nrt_cc_op(t as u32), Some(op));
        assert_eq!(op.nrt_cc_op(), Some(t as u32));
    }
    assert_eq!(CollectiveOp::from_nrt_cc_op(3), None);
    assert_eq!(CollectiveOp::AllToAll.nrt_cc_op(), None);
}

/// The reduce ops' codes are the vendor's `nrt_op_type_t` (docs/contract/abi.md §2.2: ADD 0,
/// MAX 2, MIN 3) and `SDMA_CCETYPE` (docs/contract/lowering.md §2.10: the same numbering).
#[test]
fn reduce_op_codes_are_the_vendors() {
    for (op, code) in [(ReduceOp::Add, 0), (ReduceOp::Max, 2), (ReduceOp::Min, 3)] {
        assert_eq!(op.nrt_op(), code);
        assert_eq!(op.cce_code() as u32, code);
        assert_eq!(ReduceOp::of_nrt_op(code), Some(op));
        assert_eq!(REDUCE_NAMES[op as usize].op, op);
    }
    assert_eq!(ReduceOp::of_nrt_op(1), None, "FMA is not a reduction");
    assert_eq!(ReduceOp::parse("SUM"), Some(ReduceOp::Add));
    assert_eq!(ReduceOp::parse("max"), Some(ReduceOp::Max));
    assert_eq!(ReduceOp::parse("prod"), None);
}
