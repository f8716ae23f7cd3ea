use super::*;

/// The all-to-all-v table of the matrix, written out by hand for 3 ranks, count 4:
/// `send(r, p) = ((r + 2p)·2 + 4) mod 5`, 0 when p = r + 1 (mod 3).
#[test]
fn a2av_counts_by_hand() {
    let m = a2av_meta(3, 4, A2avRecv::Derived).unwrap();
    let t = m.table.unwrap();
    assert_eq!(
        t.send_counts,
        vec![vec![4, 0, 2], vec![1, 0, 0], vec![0, 2, 1]]
    );
    assert_eq!(t.send_displs[0], vec![0, 4, 4]);
    assert_eq!(t.recv_displs[1], vec![0, 4, 8]);
    let p = a2av_meta(3, 4, A2avRecv::Packed).unwrap().table.unwrap();
    // Rank 0 receives 4, 1, 0 from ranks 0, 1, 2, packed in descending peer order.
    assert_eq!(p.recv_counts[0], vec![4, 1, 0]);
    assert_eq!(p.recv_displs[0], vec![1, 0, 0]);
}

#[test]
fn variants_and_names() {
    assert_eq!(permute_pairs(3), vec![(0, 2), (1, 0), (2, 1)]);
    assert_eq!(topologies(4).len(), 2);
    assert_eq!(
        topologies(8),
        vec![
            None,
            Some("custom:8x1x1".into()),
            Some("custom:2x1x4".into()),
            Some("trn2.48xlarge".into())
        ]
    );
    assert!(!applies(CollectiveOp::Send, 3, 1));
    assert!(!applies(CollectiveOp::Barrier, 3, 1));
    let mut c = Case::new(CollectiveOp::ReduceScatter, Some(Algorithm::Ring), 4, 7);
    c.in_place = true;
    c.reduce = ReduceOp::Max;
    assert_eq!(
        c.name(true),
        "reduce_scatter alg=ring ranks=4 count=7 in-place dtype=bf16 redop=max \
             topology=default"
    );
}

#[test]
fn lower_tells_illegal_from_legal() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let c = Case::new(CollectiveOp::AllToAll, Some(Algorithm::Ring), 4, 7);
    assert!(matches!(c.lower().unwrap(), Lowered::Illegal(m) if m.contains("OPENNRT_CC_ALGO")));
    let mut c = Case::new(
        CollectiveOp::AllReduce,
        Some(Algorithm::SingleCycleRing),
        4,
        7,
    );
    assert!(matches!(c.lower().unwrap(), Lowered::Illegal(_)));
    c.topology = Some("custom:4x1x1".into());
    assert!(matches!(c.lower().unwrap(), Lowered::Program(_)));
    let m = matrix(&[2], &[0, 1]);
    assert!(m.iter().any(|c| c.op == CollectiveOp::Send));
    assert!(m
        .iter()
        .all(|c| c.op != CollectiveOp::Barrier || c.count == 0));
}
