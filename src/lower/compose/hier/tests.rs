use super::*;
use crate::lower::compose::mesh::compose_mesh;
use crate::lower::compose::rdh::{compose_inter_rdh, compose_intra_rdh};
use crate::lower::compose::testeval::*;

fn dispatch(leg: &Leg, alg: Algorithm) -> Result<ComposedLeg> {
    match alg {
        Algorithm::Mesh => compose_mesh(leg, 0),
        Algorithm::InterRdh => compose_inter_rdh(leg),
        Algorithm::IntraRdh => compose_intra_rdh(leg),
        other => Err(Error::invalid(format!("test dispatcher has no {other:?}"))),
    }
}

fn cfg(nn: u32, ll: u32, alg: Algorithm, inter: Algorithm) -> HierConfig {
    HierConfig {
        node_n: nn,
        local_rank_n: ll,
        algs: HierAlgs {
            intra_allg: alg,
            intra_redsct: alg,
            inter_allr: inter,
            inter_allg: inter,
            inter_redsct: inter,
        },
        intra_channels: 1,
        inter_channels: 1,
        chunk_elems: 64,
        topsp_of_channel: |c| c,
        scratch_base: 16,
        sem_base: 8,
    }
}

fn run_hier(
    op: CollectiveOp,
    nn: u32,
    ll: u32,
    count: u64,
    in_place: bool,
    algs: (Algorithm, Algorithm),
) {
    let mut c = Case::new(op, nn * ll, count);
    c.in_place = in_place;
    let req = request(&c);
    let h = compose_hier(&req, &cfg(nn, ll, algs.0, algs.1), &dispatch).unwrap();
    let legs: Vec<&ComposedLeg> = h.legs.iter().map(|l| &l.composed).collect();
    check_programs(&c, &programs_of(&legs), 16 + h.scratch_elems);
    // Legs never share semaphore ids or composer scratch.
    for pair in h.legs.windows(2) {
        assert!(pair[0].sem_base + pair[0].composed.sems_used <= pair[1].sem_base);
        assert!(pair[0].scratch_base + pair[0].composed.scratch_elems <= pair[1].scratch_base);
    }
}

#[test]
fn hier_results_match_the_flat_oracle() {
    let mesh = (Algorithm::Mesh, Algorithm::Mesh);
    for op in [
        CollectiveOp::AllReduce,
        CollectiveOp::ReduceScatter,
        CollectiveOp::AllGather,
    ] {
        for (nn, ll) in [(2, 2), (2, 4), (4, 2)] {
            for count in [0, 1, 7, 4099] {
                for in_place in [false, true] {
                    run_hier(op, nn, ll, count, in_place, mesh);
                }
            }
            run_hier(
                op,
                nn,
                ll,
                9,
                false,
                (Algorithm::IntraRdh, Algorithm::InterRdh),
            );
        }
        run_hier(op, 3, 2, 5, false, mesh);
        run_hier(op, 1, 4, 5, true, mesh);
        run_hier(op, 4, 1, 5, false, mesh);
    }
}

#[test]
fn hier_leg_order() {
    let names = |op| {
        let req = request(&Case::new(op, 4, 8));
        let h = compose_hier(
            &req,
            &cfg(2, 2, Algorithm::Mesh, Algorithm::InterRdh),
            &dispatch,
        )
        .unwrap();
        h.legs
            .iter()
            .map(|l| (l.name.clone(), l.algorithm))
            .collect::<Vec<_>>()
    };
    let s = |x: &str| x.to_string();
    assert_eq!(
        names(CollectiveOp::AllReduce),
        vec![
            (s("intra reduce-scatter"), Algorithm::Mesh),
            (s("inter all-reduce"), Algorithm::InterRdh),
            (s("intra all-gather"), Algorithm::Mesh)
        ]
    );
    assert_eq!(
        names(CollectiveOp::ReduceScatter),
        vec![
            (s("intra reduce-scatter"), Algorithm::Mesh),
            (s("inter reduce-scatter"), Algorithm::InterRdh)
        ]
    );
    assert_eq!(
        names(CollectiveOp::AllGather),
        vec![
            (s("inter all-gather"), Algorithm::InterRdh),
            (s("intra all-gather"), Algorithm::Mesh)
        ]
    );
}

#[test]
fn reduce_scatter_placement_is_the_flat_one() {
    // Global chunk (node n, local l) must end on rank n·L + l: only rank n·L + l's input
    // block n·L + l is non-zero, so the reduced block identifies where it went.
    let (nn, ll, c) = (2u32, 4u32, 3u64);
    let n = nn * ll;
    let req = request(&Case::new(CollectiveOp::ReduceScatter, n, c));
    let h = compose_hier(
        &req,
        &cfg(nn, ll, Algorithm::Mesh, Algorithm::Mesh),
        &dispatch,
    )
    .unwrap();
    let legs: Vec<&ComposedLeg> = h.legs.iter().map(|l| &l.composed).collect();
    let input: Vec<Vec<i64>> = (0..n)
        .map(|r| {
            (0..u64::from(n) * c)
                .map(|i| {
                    if i / c == u64::from(r) {
                        100 * i64::from(r) + 1
                    } else {
                        0
                    }
                })
                .collect()
        })
        .collect();
    for sched in SCHEDS {
        let mut mem = Memory::from_inputs(&input, |_| 0, c, 16 + h.scratch_elems, false);
        run(&programs_of(&legs), &mut mem, sched).unwrap();
        for nd in 0..nn {
            for l in 0..ll {
                let r = nd * ll + l;
                assert_eq!(
                    mem.get(r, Buf::Output),
                    vec![100 * i64::from(r) + 1; c as usize],
                    "node {nd} local {l} {sched:?}"
                );
            }
        }
    }
}

#[test]
fn hier_refusals() {
    let req = request(&Case::new(CollectiveOp::AllReduce, 6, 8));
    assert!(compose_hier(
        &req,
        &cfg(2, 2, Algorithm::Mesh, Algorithm::Mesh),
        &dispatch
    )
    .is_err());
    let req = request(&Case::new(CollectiveOp::AllToAll, 4, 8));
    assert!(compose_hier(
        &req,
        &cfg(2, 2, Algorithm::Mesh, Algorithm::Mesh),
        &dispatch
    )
    .is_err());
}
