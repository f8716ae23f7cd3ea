//! Tests of the mesh composer: event census per op and results on the concrete evaluator.

use super::{compose_mesh, event::*};
use crate::lower::compose::mesh_a2a::{compose_mesh_a2av, A2avLayout};
use crate::lower::compose::testeval::*;
use crate::lower::compose::ComposedLeg;
use crate::lower::program::{Algorithm, Buf, Primitive, Transfer};
use crate::lower::request::CollectiveOp;

const OPS: [CollectiveOp; 4] = [
    CollectiveOp::AllReduce,
    CollectiveOp::ReduceScatter,
    CollectiveOp::AllGather,
    CollectiveOp::AllToAll,
];

/// The event type of every step of `rank`'s tape.
fn event_types(c: &ComposedLeg, rank: u32) -> Vec<u8> {
    c.entries[&rank].tapes[0]
        .steps
        .iter()
        .map(|s| s.event_type.unwrap())
        .collect()
}

/// The case's flat leg composed as a mesh of flavour `sub_type`.
fn composed(c: &Case, sub_type: u8) -> ComposedLeg {
    compose_mesh(&leg(c, &request(c)), sub_type).unwrap()
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
        let c = composed(&Case::new(op, n, 7), 2);
        for r in 0..n {
            assert_eq!(event_types(&c, r), want, "{op:?} n={n}");
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
    let c = composed(&Case::new(CollectiveOp::AllReduce, 5, 100), 0);
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
    let case = Case::new(CollectiveOp::AllReduce, 70, 140);
    let c = composed(&case, 0);
    let steps = &c.entries[&3].tapes[0].steps;
    let partial = steps
        .iter()
        .filter(|s| s.event_type == Some(REDUCE_COPY))
        .count();
    assert_eq!(
        partial, 3,
        "70 sources: 32 + 32 + 6 partials, then one final"
    );
    check_leg(&case, &c);
}

fn mesh_result(op: CollectiveOp, n: u32, count: u64, in_place: bool, order: Option<Vec<u32>>) {
    let mut c = Case::new(op, n, count);
    c.in_place = in_place;
    if let Some(order) = order {
        c.order = order;
    }
    check_all(&c, |l| compose_mesh(l, 0));
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
        let ca = composed(&Case::new(a, n, 5), 0);
        let cb = composed(&Case::new(b, n, 5), 0);
        let progs = programs_of(&[&ca, &cb]);
        let scratch = SCRATCH_BASE + ca.scratch_elems.max(cb.scratch_elems);
        for sched in SCHEDS {
            let inp = inputs(n, 20);
            let mut mem = Memory::from_inputs(&inp, |_| 0, 20, scratch, false);
            run(&progs, &mut mem, sched)
                .unwrap_or_else(|e| panic!("{a:?} then {b:?} {sched:?}: {e}"));
        }
    }
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
    let case = Case::new(CollectiveOp::AllToAllV, n, 5);
    let req = request(&case);
    let l = leg(&case, &req);
    let c = compose_mesh_a2av(&l, 0, &layout).unwrap();
    assert_eq!(
        event_types(&c, 1),
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
        let scratch = SCRATCH_BASE + c.scratch_elems;
        let mut mem = Memory::from_inputs(&input, |_| 0, dst_total, scratch, false);
        run(&programs_of(&[&c]), &mut mem, sched).unwrap();
        for i in 0..n as usize {
            for r in 0..n as usize {
                let len = counts[r][i] as usize;
                let src = &input[r][displs[r][i] as usize..][..len];
                let at = 5 * r;
                let got = &mem.get(i as u32, Buf::Output)[at..at + len];
                assert_eq!(got, src, "{i} from {r} {sched:?}");
            }
        }
    }
    assert!(compose_mesh(&l, 0).is_err(), "A2Av needs its layout");
}
