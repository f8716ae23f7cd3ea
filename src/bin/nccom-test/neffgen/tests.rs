use super::*;
use crate::ops::Sizes;

fn spec(op: Op) -> NeffSpec {
    NeffSpec {
        op,
        ranks: 4,
        count: 16,
        dtype: Dtype::Fp32,
        ops: 1,
        groups: None,
        pairs: None,
    }
}

/// The builder's var sizes are the ones the size arithmetic of `ops` gives.
#[test]
fn var_sizes_agree_with_the_size_arithmetic() {
    for op in [
        Op::AllReduce,
        Op::AllGather,
        Op::ReduceScatter,
        Op::AllToAll,
        Op::Permute,
        Op::SendRecv,
    ] {
        let b = build(&spec(op)).unwrap();
        assert!(b.bytes.len() > 1024, "{op:?}");
        assert_eq!(b.in_bytes, 16 * 4 * op.in_blocks(4), "{op:?}");
        assert_eq!(b.out_bytes, 16 * 4 * op.out_blocks(4), "{op:?}");
    }
}

#[test]
fn groups_pairs_and_ops_reach_the_builder() {
    let mut s = spec(Op::Permute);
    s.ops = 3;
    s.groups = Some(vec![vec![0, 2], vec![1, 3]]);
    s.pairs = Some(vec![(0, 2), (2, 0)]);
    let b = build_spec(&s);
    assert_eq!(b.ops, 3);
    assert_eq!(b.replica_groups, Some(vec![vec![vec![0, 2], vec![1, 3]]]));
    assert_eq!(b.group_size(), 2);
    assert!(build(&s).is_ok());
}

#[test]
fn refusals_are_the_builders() {
    let v = build(&spec(Op::AllToAllV)).unwrap();
    assert_eq!(v.in_bytes, v.out_bytes);
    let mut s = spec(Op::AllReduce);
    s.dtype = Dtype::Int32;
    assert!(build(&s).is_err());
    let mut s = spec(Op::AllReduce);
    s.count = 0;
    assert!(build(&s).is_err());
}
