//! Tests of the mesh composer: event census per op and results on the concrete evaluator.

use super::mesh::{compose_mesh, event::*};
use super::mesh_a2a::{compose_mesh_a2av, A2avLayout};
use super::mesh_testeval::*;
use crate::lower::compose::{ComposedLeg, Leg};
use crate::lower::program::{Algorithm, Primitive, Transfer};
use crate::lower::request::CollectiveOp;

const OPS: [CollectiveOp; 4] = [
    CollectiveOp::AllReduce,
    CollectiveOp::ReduceScatter,
    CollectiveOp::AllGather,
    CollectiveOp::AllToAll,
];

fn census(c: &ComposedLeg, rank: u32) -> Vec<u8> {
    c.entries[&rank].tapes[0]
        .steps
        .iter()
        .map(|s| s.event_type.unwrap())
        .collect()
}

#[test]
fn event_census_per_op() {
    let cases: [(CollectiveOp, u32, &[u8]); 6] = [
        (
            CollectiveOp::AllReduce,
            2,
            &[
                FN_BARRIER_FIRST,
                LOCAL_HNDSHK,
                REDUCE_COPY,
                SYNC,
                FN_BARRIER_LAST,
            ],
        ),
        (
            CollectiveOp::AllReduce,
            4,
            &[
                FN_BARRIER_FIRST,
                LOCAL_HNDSHK,
                GLOBAL_HNDSHK,
                INTRA_GRP_BRDCST,
                INTER_GRP_BRDCST,
                REDUCE_WRITE,
                SYNC,
                FN_BARRIER_LAST,
            ],
        ),
        (
            CollectiveOp::ReduceScatter,
            4,
            &[
                FN_BARRIER_FIRST,
                LOCAL_HNDSHK,
                INTRA_GRP_BRDCST,
                REDUCE_COPY,
                SYNC,
                FN_BARRIER_LAST,
            ],
        ),
        (
            CollectiveOp::AllGather,
            4,
            &[
                FN_BARRIER_FIRST,
                LOCAL_HNDSHK,
                INTRA_GRP_BRDCST,
                SYNC,
                FN_BARRIER_LAST,
            ],
        ),
        (
            CollectiveOp::AllToAll,
            4,
            &[
                FN_BARRIER_FIRST,
                LOCAL_HNDSHK,
                A2A_SEND,
                SYNC,
                FN_BARRIER_LAST,
            ],
        ),
        (
            CollectiveOp::AllToAll,
            2,
            &[
                FN_BARRIER_FIRST,
                LOCAL_HNDSHK,
                A2A_SEND,
                SYNC,
                FN_BARRIER_LAST,
            ],
        ),
    ];
    for (op, n, want) in cases {
        let req = request(op, n, 7, false);
        let c = compose_mesh(&flat_leg(&req, None), 2).unwrap();
        for r in 0..n {
            assert_eq!(census(&c, r), want, "{op:?} n={n}");
            let e = &c.entries[&r];
            assert_eq!(e.algorithm, Algorithm::Mesh);
            assert_eq!(e.mesh_sub_type, Some(2));
            assert_eq!(e.tapes.len(), 1);
        }
        // Reduce steps only where a reduction happens; all primitives are mesh events otherwise.
        let reduces = c.entries[&0].tapes[0]
            .steps
            .iter()
            .filter(|s| s.primitive.is_reduce())
            .count();
        let want_reduces = usize::from(matches!(
            op,
            CollectiveOp::AllReduce | CollectiveOp::ReduceScatter
        ));
        assert_eq!(reduces, want_reduces, "{op:?}");
    }
}

#[test]
fn waits_follow_the_wait_val_convention() {
    let req = request(CollectiveOp::AllReduce, 5, 100, false);
    let c = compose_mesh(&flat_leg(&req, None), 0).unwrap();
    for e in c.entries.values() {
        for s in &e.tapes[0].steps {
            if let Some(w) = s.wait {
                assert_eq!((w.target, w.consume), (4, 4));
            }
        }
        let red = e.tapes[0]
            .steps
            .iter()
            .find(|s| s.primitive == Primitive::RecvReduceWrite)
            .unwrap();
        match &red.transfers[0] {
            Transfer::Reduce { srcs, .. } => assert_eq!(srcs.len(), 5),
            t => panic!("{t:?}"),
        }
    }
}

#[test]
fn more_than_32_sources_is_a_tree() {
    let req = request(CollectiveOp::AllReduce, 70, 140, false);
    let c = compose_mesh(&flat_leg(&req, None), 0).unwrap();
    let steps = &c.entries[&3].tapes[0].steps;
    let partial = steps
        .iter()
        .filter(|s| s.event_type == Some(REDUCE_COPY))
        .count();
    assert_eq!(
        partial, 3,
        "70 sources: 32 + 32 + 6 partials, then one final"
    );
    check(&req, &programs_of(&[&c]), c.scratch_elems);
}

fn mesh_result(op: CollectiveOp, n: u32, count: u64, in_place: bool, order: Option<Vec<u32>>) {
    let req = request(op, n, count, in_place);
    let c = compose_mesh(&flat_leg(&req, order), 0).unwrap();
    check(&req, &programs_of(&[&c]), c.scratch_elems);
}

#[test]
fn mesh_results_match_the_oracle() {
    for op in OPS {
        for n in [1, 2, 3, 4, 8] {
            for count in [0, 1, 7, 4099] {
                for in_place in [false, true] {
                    mesh_result(op, n, count, in_place, None);
                }
            }
        }
        mesh_result(op, 32, 7, false, None);
        mesh_result(op, 32, 100, true, None);
        mesh_result(op, 5, 9, false, Some(vec![3, 0, 4, 1, 2]));
    }
}

#[test]
fn back_to_back_ops_do_not_race() {
    // Two ops in a row on the same semaphores and scratch: the entry handshake must keep a fast
    // rank from writing into a peer that is still in the previous op.
    for (a, b) in [
        (CollectiveOp::ReduceScatter, CollectiveOp::AllReduce),
        (CollectiveOp::AllGather, CollectiveOp::AllGather),
        (CollectiveOp::AllToAll, CollectiveOp::ReduceScatter),
    ] {
        let n = 4;
        let ra = request(a, n, 5, false);
        let rb = request(b, n, 5, false);
        let ca = compose_mesh(&flat_leg(&ra, None), 0).unwrap();
        let cb = compose_mesh(&flat_leg(&rb, None), 0).unwrap();
        let progs = programs_of(&[&ca, &cb]);
        for sched in SCHEDS {
            let inp = inputs(n, 20);
            let mut mem = Memory::new(&inp, 20, ca.scratch_elems.max(cb.scratch_elems), false);
            run(&progs, &mut mem, sched).unwrap();
        }
    }
}

fn a2av_leg<'a>(req: &'a crate::lower::request::CollectiveRequest) -> Leg<'a> {
    flat_leg(req, None)
}

#[test]
fn all_to_all_v_with_counts_and_displacements() {
    let n = 4u32;
    // rank r sends (r + 2·i) % 5 elements to rank i, packed in destination order.
    let counts: Vec<Vec<u64>> = (0..n)
        .map(|r| (0..n).map(|i| u64::from((r + 2 * i) % 5)).collect())
        .collect();
    let displs: Vec<Vec<u64>> = counts
        .iter()
        .map(|row| {
            row.iter()
                .scan(0, |acc, &c| {
                    let d = *acc;
                    *acc += c;
                    Some(d)
                })
                .collect()
        })
        .collect();
    let dst_total = 4 * 5;
    let layout = A2avLayout::with_default_recv(counts.clone(), displs.clone(), dst_total);
    let req = request(CollectiveOp::AllToAllV, n, 5, false);
    let leg = a2av_leg(&req);
    let c = compose_mesh_a2av(&leg, 0, &layout).unwrap();
    assert_eq!(
        census(&c, 1),
        [
            FN_BARRIER_FIRST,
            LOCAL_HNDSHK,
            A2A_SEND,
            SYNC,
            FN_BARRIER_LAST
        ]
    );
    let input = inputs(n, 20);
    for sched in SCHEDS {
        let mut mem = Memory::new(&input, dst_total, c.scratch_elems, false);
        run(&programs_of(&[&c]), &mut mem, sched).unwrap();
        for i in 0..n as usize {
            for r in 0..n as usize {
                let len = counts[r][i] as usize;
                let src = &input[r][displs[r][i] as usize..][..len];
                let at = 5 * r;
                assert_eq!(&mem.output(i as u32)[at..at + len], src, "{i} from {r}");
            }
        }
    }
    assert!(compose_mesh(&leg, 0).is_err(), "A2Av needs its layout");
}
