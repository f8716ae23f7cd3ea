use super::*;
use crate::lower::compose::testeval::*;

#[test]
fn worked_check_k3_r5() {
    assert_eq!(rdh_sets(3, 5, 0), (vec![0, 2, 4, 6], vec![1, 3, 5, 7]));
    assert_eq!(rdh_sets(3, 5, 1), (vec![3, 7], vec![1, 5]));
    assert_eq!(rdh_sets(3, 5, 2), (vec![1], vec![5]));
}

#[test]
fn send_set_is_the_partners_keep_set() {
    for k in 1..=6 {
        for r in 0..1u32 << k {
            for b in 0..k {
                let (send, keep) = rdh_sets(k, r, b);
                assert_eq!(send, rdh_sets(k, r ^ (1 << b), b).1);
                if b > 0 {
                    let prev_keep = rdh_sets(k, r, b - 1).1;
                    assert!(send.iter().chain(&keep).all(|c| prev_keep.contains(c)));
                }
            }
            assert_eq!(rdh_sets(k, r, k - 1).1, vec![r]);
        }
    }
}

#[test]
fn rdh_results_match_the_oracle() {
    for op in [
        CollectiveOp::AllReduce,
        CollectiveOp::ReduceScatter,
        CollectiveOp::AllGather,
    ] {
        for n in [1, 2, 4, 8, 16] {
            for count in [0, 1, 7, 4099] {
                for in_place in [false, true] {
                    let mut case = Case::new(op, n, count);
                    case.in_place = in_place;
                    let req = request(&case);
                    for alg in [Algorithm::InterRdh, Algorithm::IntraRdh] {
                        let c = compose_rdh(&leg(&case, &req), alg).unwrap();
                        assert!(c.entries.values().all(|e| e.algorithm == alg));
                        check_leg(&case, &c);
                    }
                }
            }
        }
        // A permuted order: chunk c is rank order[c]'s block.
        let mut case = Case::new(op, 8, 5);
        case.order = vec![3, 6, 0, 1, 7, 2, 5, 4];
        check_all(&case, compose_inter_rdh);
    }
}

#[test]
fn rdh_census_and_refusals() {
    let inter = |op, n, count| {
        let c = Case::new(op, n, count);
        compose_inter_rdh(&leg(&c, &request(&c)))
    };
    let c = inter(CollectiveOp::AllGather, 8, 4).unwrap();
    assert!(c.entries[&0].tapes[0]
        .steps
        .iter()
        .all(|s| !s.primitive.is_reduce()));
    assert_eq!(c.entries[&0].tapes[0].steps.len(), 1 + 7 + 3);
    let c = inter(CollectiveOp::ReduceScatter, 8, 4).unwrap();
    let steps = &c.entries[&5].tapes[0].steps;
    assert_eq!(steps.len(), 2 * 7);
    assert!(steps
        .iter()
        .filter(|s| s.primitive.is_reduce())
        .all(|s| s.reduction.map(|r| r.1) == Some(RingShape::Ring2R1W)));
    // Rank 5's first exchange sends chunks {0,2,4,6} to rank 4.
    let sent: Vec<u32> = steps[..4].iter().map(|s| s.chunk).collect();
    assert_eq!(sent, vec![0, 2, 4, 6]);
    assert_eq!(steps[3].signals[0].sem.rank, 4);
    assert!(inter(CollectiveOp::AllReduce, 6, 4).is_err());
    assert!(inter(CollectiveOp::AllToAll, 4, 4).is_err());
}
