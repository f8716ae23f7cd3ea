//! The verifier on hand-built programs: correct ones pass, each broken variant is caught with
//! the right message. The order between entries has its own file, the child `entry_order`.

mod entry_order;

use super::testprog::*;
use super::*;
use crate::lower::program::{
    Buf, Loc, Primitive, Program, Signal, SignalKind, Step, Transfer, Wait,
};
use crate::lower::request::CollectiveOp;

/// The `nth` step of `rank` (entry 0) with `prim`, over all tapes in order.
fn find(p: &mut Program, rank: u32, prim: Primitive, nth: usize) -> &mut Step {
    p.ranks[rank as usize].entries[0]
        .tapes
        .iter_mut()
        .flat_map(|t| t.steps.iter_mut())
        .filter(|s| s.primitive == prim)
        .nth(nth)
        .expect("step exists")
}

fn last_step(p: &mut Program, rank: u32, prim: Primitive) -> &mut Step {
    let tape = p.ranks[rank as usize].entries[0].tapes.last_mut().unwrap();
    tape.steps
        .iter_mut()
        .rev()
        .find(|s| s.primitive == prim)
        .expect("step exists")
}

fn err(p: &Program) -> VerifyError {
    match verify(p) {
        Ok(r) => panic!("expected a failure, verified: {r}"),
        Err(e) => e,
    }
}

#[test]
fn ring_all_reduce_verifies() {
    for (order, count, ch, chunk) in [
        (vec![0, 1], 64, 1, 32),
        (vec![0, 1, 2], 96, 1, 32),
        (vec![2, 0, 1], 7, 2, 2),
        (vec![3, 1, 4, 0, 2], 4099, 3, 64),
        (vec![0], 5, 1, 32),
        (vec![0, 1, 2], 0, 1, 32),
    ] {
        let p = ring_all_reduce(&order, count, ch, chunk);
        let r = verify(&p).unwrap_or_else(|e| panic!("{order:?} {count}: {e}"));
        assert_eq!(r.steps, p.step_count() as u64);
        assert_eq!(r.ranks, order.len() as u32);
    }
    // 2 ranks, 64 bf16 elements: each rank writes 2 pieces × (send 16 + reduce into output
    // 16 + forward 16) = 96 elements = 192 bytes.
    let r = verify(&ring_all_reduce(&[0, 1], 64, 1, 32)).unwrap();
    assert_eq!(r.bytes_per_rank, vec![192, 192]);
    assert_eq!(r.transfers, 2 * 2 * 3);
}

#[test]
fn in_place_ring_all_reduce_verifies() {
    let mut p = ring_all_reduce(&[0, 1, 2], 96, 1, 32);
    p.request.in_place = true;
    verify(&p).unwrap();
}

#[test]
fn all_gather_and_mesh_verify() {
    for n in [2, 3, 5] {
        verify(&ring_all_gather(n, 8)).unwrap();
        verify(&mesh_all_reduce(n, 10)).unwrap();
    }
    let p = mesh_all_reduce(3, 9);
    let srcs = match &p.ranks[1].entries[0].tapes[0].steps[1].transfers[0] {
        Transfer::Reduce { srcs, .. } => srcs.len(),
        t => panic!("{t:?}"),
    };
    assert_eq!(srcs, 3);
    let r = verify(&p).unwrap();
    assert_eq!(r.max_sem_value, 2);
}

#[test]
fn permute_and_barrier_verify() {
    verify(&permute_implicit(4, 16)).unwrap();
    verify(&permute_implicit(1, 16)).unwrap();
    verify(&barrier(3)).unwrap();
    verify(&barrier(1)).unwrap();
}

#[test]
fn wrong_chunk_index_is_caught() {
    // Checks the report text a user reads, on purpose.
    // Rank 0 (position 0 of 3) reduces chunk 1 at s = 2: use block 0's input instead.
    let mut p = ring_all_reduce(&[0, 1, 2], 96, 1, 32);
    let s = find(&mut p, 0, Primitive::RecvReduceSend, 0);
    if let Transfer::Reduce { srcs, .. } = &mut s.transfers[0] {
        srcs[0].offset -= 32;
    }
    let e = err(&p);
    assert!(
        matches!(
            &e,
            VerifyError::WrongOutput(m) if matches!(m.problem, OutputProblem::WrongElement { source: 0, .. })
        ),
        "{e}"
    );
    let m = e.to_string();
    assert!(m.contains("wrong chunk or offset"), "{m}");
    assert!(m.contains("[32, 48)"), "{m}");
    assert!(m.contains("last written by"), "{m}");
}

#[test]
fn missing_contribution_is_caught() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1, 2], 96, 1, 32);
    let s = find(&mut p, 0, Primitive::RecvReduceSend, 0);
    let (dst, len) = (s.transfers[0].dst(), s.transfers[0].len());
    s.transfers[0] = Transfer::Copy {
        src: Loc {
            rank: 0,
            buf: Buf::Scratch,
            offset: dst.offset,
        },
        dst,
        len,
    };
    let e = err(&p);
    assert!(
        matches!(
            &e,
            VerifyError::WrongOutput(m)
                if m.problem == OutputProblem::Missing { source: 0 }
                    && (m.rank, m.start, m.end) == (0, 32, 48)
        ),
        "{e}"
    );
    assert!(
        e.to_string().contains("expected in0[e] ⊕ in1[e] ⊕ in2[e]"),
        "{e}"
    );
}

#[test]
fn duplicated_contribution_is_caught() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    let s = find(&mut p, 1, Primitive::RecvReduceCopy, 0);
    if let Transfer::Reduce { srcs, .. } = &mut s.transfers[0] {
        srcs.push(srcs[0]);
    }
    let m = err(&p).to_string();
    assert!(
        m.contains("rank 1 counted twice in output of rank 0 at elements [32, 48)"),
        "{m}"
    );
    assert!(m.contains("2×in1[32]"), "{m}");
}

#[test]
fn missing_signal_deadlocks() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    last_step(&mut p, 0, Primitive::DirectCopySend)
        .signals
        .retain(|s| s.kind == SignalKind::Local);
    let e = err(&p);
    let VerifyError::Deadlock { blocked } = &e else {
        panic!("{e}")
    };
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0].at.rank, 1);
    assert_eq!(blocked[0].at.step, 7);
    assert_eq!(blocked[0].at.primitive, Primitive::DirectRecv);
    assert_eq!(blocked[0].sem, sem(1, 8));
    let m = e.to_string();
    assert!(
        m.contains("rank 1 entry 0 (AllReduce) channel 0 step 7 direct_recv"),
        "{m}"
    );
    assert!(
        m.contains("semaphore (rank 1, topsp 0, id 8) = 0, target 1; no one signals it"),
        "{m}"
    );
}

#[test]
fn wait_cycle_names_the_pending_signallers() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    for r in 0..2 {
        find(&mut p, r, Primitive::Send, 0).wait = Some(Wait {
            sem: sem(r, 8),
            target: 1,
            consume: 1,
        });
    }
    let e = err(&p);
    let VerifyError::Deadlock { blocked } = &e else {
        panic!("{e}")
    };
    assert_eq!(blocked.len(), 2);
    assert_eq!(blocked[0].pending[0].rank, 1);
    assert_eq!(blocked[1].pending[0].rank, 0);
    assert!(
        e.to_string().contains("signals not yet run on rank(s) [1]"),
        "{e}"
    );
}

#[test]
fn extra_signal_is_a_leftover() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    last_step(&mut p, 0, Primitive::DirectRecv)
        .signals
        .push(Signal {
            sem: sem(1, 8),
            amount: 1,
            kind: SignalKind::Remote,
        });
    let e = err(&p);
    assert!(
        matches!(
            e,
            VerifyError::Leftover {
                value: 1,
                waited: true,
                ..
            }
        ),
        "{e}"
    );
    let m = e.to_string();
    assert!(
        m.contains("semaphore (rank 1, topsp 0, id 8) ends at 1, not 0: 1 leftover"),
        "{m}"
    );
    // A Remote increment nobody waits on is an error; a Local one is exempt.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    find(&mut p, 0, Primitive::Send, 0).signals.push(Signal {
        sem: sem(1, 100),
        amount: 1,
        kind: SignalKind::Local,
    });
    verify(&p).unwrap();
    find(&mut p, 0, Primitive::Send, 0).signals[2].kind = SignalKind::Credit;
    let m = err(&p).to_string();
    assert!(m.contains("(no step waits on it)"), "{m}");
}

#[test]
fn reduce_in_all_gather_is_refused() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_gather(3, 8);
    let s = find(&mut p, 1, Primitive::DirectRecvSend, 0);
    let (src, dst, len) = match &s.transfers[0] {
        Transfer::Copy { src, dst, len } => (*src, *dst, *len),
        t => panic!("{t:?}"),
    };
    s.transfers[0] = Transfer::Reduce {
        op: crate::lower::request::ReduceOp::Add,
        shape: crate::lower::program::RingShape::Ring2R1W,
        srcs: vec![src, src],
        dst,
        len,
    };
    let e = err(&p);
    assert!(matches!(e, VerifyError::BadReduce { .. }), "{e}");
    let m = e.to_string();
    assert!(m.contains("reduce in a copy-only op (AllGather)"), "{m}");
    assert!(m.contains("rank 1 entry 0"), "{m}");
    // A reduce primitive is refused too, and so is a 1-source or 33-source reduce.
    let mut p = ring_all_gather(3, 8);
    find(&mut p, 0, Primitive::DirectRecv, 0).primitive = Primitive::RecvReduceCopy;
    assert!(err(&p)
        .to_string()
        .contains("reduce step in a copy-only op"));
    let mut p = mesh_all_reduce(3, 9);
    if let Transfer::Reduce { srcs, .. } = &mut p.ranks[0].entries[0].tapes[0].steps[1].transfers[0]
    {
        srcs.truncate(1);
    }
    assert!(err(&p).to_string().contains("reduce with 1 sources"));
}

#[test]
fn out_of_bounds_loc_is_refused() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_gather(3, 8);
    if let Transfer::Copy { dst, .. } =
        &mut find(&mut p, 2, Primitive::DirectCopySend, 0).transfers[1]
    {
        dst.offset = 20;
    }
    let e = err(&p);
    assert!(
        matches!(
            e,
            VerifyError::OutOfBounds {
                buffer_elems: 24,
                len: 8,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("output of rank 0 elements [20, 28) but the buffer has 24"),
        "{e}"
    );
}

#[test]
fn uninitialised_scratch_read_is_caught() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    for rp in &mut p.ranks {
        rp.scratch_elems = 128;
    }
    let s = find(&mut p, 0, Primitive::RecvReduceCopy, 0);
    if let Transfer::Reduce { srcs, .. } = &mut s.transfers[0] {
        srcs[1].offset += 64;
    }
    let e = err(&p);
    let m = e.to_string();
    assert!(
        m.contains("step 1 recv_reduce_copy chunk 0: reads uninitialised scratch of rank 0 at elements [64, 80)"),
        "{m}"
    );
}

#[test]
fn waiting_on_another_ranks_semaphore_is_refused() {
    // Checks the report text a user reads, on purpose.
    let mut p = ring_all_reduce(&[0, 1], 64, 1, 32);
    find(&mut p, 0, Primitive::RecvReduceCopy, 0).wait = Some(Wait {
        sem: sem(1, 8),
        target: 1,
        consume: 1,
    });
    let e = err(&p);
    assert!(matches!(e, VerifyError::ForeignWait { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("waits on semaphore (rank 1, topsp 0, id 8) which belongs to rank 1"),
        "{e}"
    );
}

#[test]
fn barrier_needs_every_start() {
    let mut p = barrier(3);
    p.ranks[0].entries[0].tapes[0].steps[1].wait = None;
    for r in 1..3 {
        p.ranks[r].entries[0].tapes[0].steps[0]
            .signals
            .retain(|s| s.sem.rank != 0);
    }
    let e = err(&p);
    assert_eq!(
        e,
        VerifyError::Barrier {
            rank: 0,
            missing: vec![1, 2]
        }
    );
}

#[test]
fn in_place_storage_is_shared() {
    // A naive in-place all-gather: rank 0 writes block 0 of rank 1's output (= rank 1's input)
    // before rank 1 has sent its own input on. The greedy schedule exposes the race.
    let mut p = ring_all_gather(3, 8);
    p.request.in_place = true;
    let e = err(&p);
    assert!(matches!(e, VerifyError::WrongOutput(_)), "{e}");
}

#[test]
fn expectations_follow_the_request() {
    let mut q = request(CollectiveOp::ReduceScatter, 3, 4);
    let t = expected_term(&q, 2, 1).unwrap().unwrap();
    assert_eq!(t.describe_at(1), "in0[9] ⊕ in1[9] ⊕ in2[9]");
    q.op = CollectiveOp::AllToAll;
    assert_eq!(
        expected_term(&q, 2, 5).unwrap().unwrap().describe_at(5),
        "in1[9]"
    );
    q.op = CollectiveOp::AllGather;
    assert_eq!(
        expected_term(&q, 0, 11).unwrap().unwrap().describe_at(11),
        "in2[3]"
    );
    assert_eq!(expected_term(&q, 0, 12).unwrap(), None);
    q.op = CollectiveOp::Permute;
    q.pairs = vec![(0, 2), (2, 1)];
    assert_eq!(
        expected_term(&q, 1, 0).unwrap().unwrap().describe_at(0),
        "in2[0]"
    );
    assert_eq!(
        expected_term(&q, 0, 0).unwrap().unwrap(),
        Expect::NotWritten
    );
    q.in_place = true;
    assert_eq!(
        expected_term(&q, 0, 0).unwrap().unwrap().describe_at(0),
        "in0[0]"
    );
    q.pairs.push((1, 2));
    assert!(matches!(
        expected_output(&q, 2),
        Err(VerifyError::InvalidRequest(_))
    ));
    q.op = CollectiveOp::PermuteImplicit;
    assert_eq!(
        expected_term(&q, 0, 3).unwrap().unwrap().describe_at(3),
        "in2[3]"
    );
    q.op = CollectiveOp::PermuteReduceImplicit;
    let e = expected_term(&q, 0, 3).unwrap().unwrap();
    assert_eq!(e.describe_at(3), "in2[3] ⊕ in2[7]");
    q.op = CollectiveOp::AllToAllV;
    assert_eq!(expected_term(&q, 0, 3).unwrap().unwrap(), Expect::Unchecked);
}

#[test]
fn large_ring_all_reduce_is_quick() {
    // 16 ranks, 1 Mi elements, 2 channels, 4 loops of 8192 per channel: 8192 steps.
    let p = ring_all_reduce(&(0..16).collect::<Vec<_>>(), 1 << 20, 2, 8192);
    let r = verify(&p).unwrap();
    assert_eq!(r.steps, p.step_count() as u64);
    // Each rank writes 2·(N−1)/N of the buffer plus its own reduce: (2N−1)/N · count · 2 B.
    assert_eq!(r.bytes_per_rank[3], (31 << 16) * 2);
}

/// `cargo test --release -p opennrt bench_64_ranks -- --ignored --nocapture` prints the time
/// for the performance target of docs/design.md §2.2: 64 ranks × 1 Mi elements × 8 loops.
#[test]
#[ignore]
fn bench_64_ranks() {
    for ch in [1u8, 4] {
        let p = ring_all_reduce(
            &(0..64).collect::<Vec<_>>(),
            1 << 20,
            ch,
            2048 / u64::from(ch),
        );
        let t = std::time::Instant::now();
        let r = verify(&p).unwrap();
        println!("64 ranks, {ch} channel(s): {r} in {:?}", t.elapsed());
    }
}
