use super::*;
use crate::lower::compose::testeval::{
    census, check_all, inputs, leg, programs_of, request, run, shuffled, Case, Memory, SCHEDS,
    SCRATCH_BASE,
};

fn case(op: CollectiveOp, n: u32, count: u64) -> Case {
    let mut c = Case::new(op, n, count);
    if op == CollectiveOp::PermuteReduceImplicit {
        c.reduce = Some(ReduceOp::Add);
    }
    c
}

fn composed(c: &Case) -> ComposedLeg {
    let req = request(c);
    compose(&leg(c, &req)).unwrap()
}

#[test]
fn implicit_results() {
    for op in [
        CollectiveOp::PermuteImplicit,
        CollectiveOp::PermuteReduceImplicit,
    ] {
        for n in [1, 2, 3, 4, 5, 8] {
            for count in [0, 1, 7, 4099] {
                for in_place in [false, true] {
                    let mut c = case(op, n, count);
                    c.in_place = in_place;
                    check_all(&c, compose);
                    c.order = shuffled(n);
                    c.reduce = c.reduce.map(|_| ReduceOp::Max);
                    check_all(&c, compose);
                }
            }
        }
    }
    let mut c = case(CollectiveOp::PermuteImplicit, 2, 1 << 20);
    c.chunk = 4096;
    check_all(&c, compose);
}

#[test]
fn explicit_results() {
    for n in [1, 2, 3, 4, 5, 8] {
        // A derangement-ish permutation with one fixed point and one rank left out.
        let order = shuffled(n);
        let mut pairs: Vec<(u32, u32)> = (0..n.saturating_sub(1))
            .map(|i| {
                (
                    order[i as usize],
                    order[(i as usize + 1) % (n as usize - 1).max(1)],
                )
            })
            .collect();
        if n >= 4 {
            pairs.pop();
        }
        for count in [0, 1, 7, 4099] {
            for in_place in [false, true] {
                let mut c = case(CollectiveOp::Permute, n, count);
                c.pairs = pairs.clone();
                c.in_place = in_place;
                check_all(&c, compose);
            }
        }
    }
    let mut c = case(CollectiveOp::Permute, 3, 10);
    c.pairs = vec![(0, 1), (2, 1)];
    let req = request(&c);
    assert!(
        compose(&leg(&c, &req)).is_err(),
        "two sources for one target"
    );
}

#[test]
fn send_recv() {
    for count in [0, 1, 7, 4099] {
        for order in [vec![0, 1], vec![1, 0]] {
            let mut c = case(CollectiveOp::Send, 2, count);
            c.order = order;
            check_all(&c, compose);
            c.op = CollectiveOp::Recv;
            check_all(&c, compose);
        }
    }
    let k = composed(&case(CollectiveOp::Send, 2, 300));
    let m = census(&k);
    assert_eq!(m["PostRecv"], 3, "one credit per channel");
    let first = &k.entries[&0].tapes[0].steps[0];
    assert_eq!(first.primitive, Primitive::Send);
    assert!(
        first.wait.is_some(),
        "the sender waits for the receiver's credit"
    );
    assert!(compose(&leg(
        &case(CollectiveOp::Send, 3, 1),
        &request(&case(CollectiveOp::Send, 3, 1))
    ))
    .is_err());
}

#[test]
fn permute_reduce_uses_permute_primitive() {
    let k = composed(&case(CollectiveOp::PermuteReduceImplicit, 4, 100));
    for s in k
        .entries
        .values()
        .flat_map(|e| &e.tapes)
        .flat_map(|t| &t.steps)
    {
        if s.primitive.is_reduce() {
            assert_eq!(s.primitive, Primitive::DirectReduceSendPermute);
            assert_eq!(s.reduction, Some((ReduceOp::Add, RingShape::Ring2R1W)));
        } else {
            assert_eq!(s.primitive, Primitive::DirectRecv);
        }
    }
}

/// Every rank waits for every other: drop any one rank and nobody finishes.
#[test]
fn barrier() {
    // Checks the report text a user reads, on purpose.
    for n in [1, 2, 3, 4, 5, 8] {
        for order in [(0..n).collect::<Vec<_>>(), shuffled(n)] {
            let mut c = case(CollectiveOp::Barrier, n, 0);
            c.order = order;
            check_all(&c, compose);
            let k = composed(&c);
            let steps: usize = k
                .entries
                .values()
                .flat_map(|e| &e.tapes)
                .map(|t| t.steps.len())
                .sum();
            assert_eq!(steps, if n == 1 { 0 } else { 2 * n as usize + 2 });
            if n == 1 {
                continue;
            }
            let scratch = SCRATCH_BASE + k.scratch_elems;
            for (absent, sched) in (0..n).flat_map(|a| SCHEDS.map(|s| (a, s))) {
                let mut programs = programs_of(&[&k]);
                programs.remove(&absent);
                let mut mem = Memory::from_inputs(&inputs(n, 0), |_| 0, 0, scratch, false);
                let err = run(&programs, &mut mem, sched).unwrap_err();
                for r in (0..n).filter(|&r| r != absent) {
                    assert!(
                        err.contains(&format!("rank {r} ch")),
                        "rank {r} finished without rank {absent} ({sched:?}): {err}"
                    );
                }
            }
        }
    }
}
