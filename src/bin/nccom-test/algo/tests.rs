use super::*;

#[test]
fn names_are_the_vendors_five() {
    assert_eq!(vendor_name(Algorithm::IntraRdh), "rdh");
    assert_eq!(vendor_name(Algorithm::InterRdh), "rdh");
    assert_eq!(vendor_name(Algorithm::SingleCycleRing), "ring");
    assert_eq!(vendor_name(Algorithm::Kangaring), "kangaring");
    assert_eq!(vendor_name(Algorithm::Hier), "hier");
}

#[test]
fn requests_mirror_the_neff() {
    let r = request(Op::SendRecv, Dtype::Fp32, 8, &[0, 1, 2], &[]);
    assert_eq!(r.op, opennrt::lower::request::CollectiveOp::PermuteImplicit);
    assert_eq!(r.reduce, None);
    let r = request(
        Op::Permute,
        Dtype::Fp32,
        8,
        &[4, 5],
        &[(4, 5), (5, 4), (0, 1)],
    );
    assert_eq!(r.pairs, vec![(0, 1), (1, 0)]);
    let r = request(Op::AllReduce, Dtype::Bf16, 8, &[0, 1], &[]);
    assert_eq!(r.reduce, Some(ReduceOp::Add));
}

/// A small all-reduce on one node takes mesh; all-to-all is always mesh.
#[test]
fn the_selection_is_the_lowerings() {
    let world: Vec<u32> = (0..2).collect();
    assert_eq!(
        chosen(Op::AllReduce, Dtype::Fp32, 256, 2, &world, &[]),
        Ok("mesh")
    );
    assert_eq!(
        chosen(Op::AllToAll, Dtype::Fp32, 256, 2, &world, &[]),
        Ok("mesh")
    );
}
