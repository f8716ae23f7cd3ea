//! The all-to-all-v and implicit permute-reduce expectations: hand-checked tiny cases, the
//! lowered programs verify, and a broken program is caught with the right problem.

use super::*;
use crate::lower::pipeline::{lower, LowerConfig};
use crate::lower::program::{Program, Transfer};
use crate::lower::request::A2avMeta;
use crate::lower::verify::testprog::request;
use crate::lower::verify::{verify, OutputProblem};

/// 2 ranks, input 4 and output 5 elements, every row given (src1_bitmap 0x0F):
/// rank 0 sends 1 element from in0[3] to itself and 2 from in0[0] to rank 1; rank 1 sends 3 from
/// in1[0] to rank 0 and nothing to itself. Rank 0 receives rank 1's 3 at out[0] and its own 1 at
/// out[4] (out[3] is a gap); rank 1 receives rank 0's 2 at out[1] (out[0], out[3..5] are gaps).
fn a2av_request(in_place: bool) -> CollectiveRequest {
    let rows = vec![
        vec![vec![1, 2], vec![3, 0], vec![1, 3], vec![4, 0]],
        vec![vec![3, 0], vec![0, 3], vec![2, 0], vec![1, 0]],
    ];
    let meta = A2avMeta::from_bitmap(0x0F, 4, 5, None)
        .and_then(|m| m.with_table(2, &rows))
        .unwrap();
    let mut q = request(CollectiveOp::AllToAllV, 2, 2);
    q.a2av = Some(meta);
    q.in_place = in_place;
    q
}

fn lowered(q: &CollectiveRequest) -> Program {
    lower(q, &LowerConfig::for_world(q.rank_n()).unwrap()).unwrap()
}

/// Every transfer of `rank`'s program, mutably, in order.
fn transfers(p: &mut Program, rank: u32) -> impl Iterator<Item = &mut Transfer> {
    p.ranks[rank as usize]
        .entries
        .iter_mut()
        .flat_map(|e| e.tapes.iter_mut())
        .flat_map(|t| t.steps.iter_mut())
        .flat_map(|s| s.transfers.iter_mut())
}

fn wrong_output(p: &Program) -> Box<crate::lower::verify::Mismatch> {
    match verify(p) {
        Err(VerifyError::WrongOutput(m)) => m,
        other => panic!("expected a wrong output, got {other:?}"),
    }
}

fn described(v: &[ExpectedSeg]) -> Vec<(u64, u64, String)> {
    v.iter()
        .map(|s| (s.start, s.end, s.expect.describe_at(s.start)))
        .collect()
}

#[test]
fn a2av_expectation_hand_checked() {
    let s = |a: u64, b: u64, d: &str| (a, b, d.to_string());
    let q = a2av_request(false);
    assert_eq!(
        described(&expected_output(&q, 0).unwrap()),
        [s(0, 3, "in1[0]"), s(3, 4, "untouched"), s(4, 5, "in0[3]")]
    );
    assert_eq!(
        described(&expected_output(&q, 1).unwrap()),
        [
            s(0, 1, "untouched"),
            s(1, 3, "in0[0]"),
            s(3, 5, "untouched")
        ]
    );
    // In place, a gap keeps the rank's own input where the input (4 elements) reaches.
    let q = a2av_request(true);
    assert_eq!(
        described(&expected_output(&q, 1).unwrap()),
        [
            s(0, 1, "in1[0]"),
            s(1, 3, "in0[0]"),
            s(3, 4, "in1[3]"),
            s(4, 5, "untouched")
        ]
    );
    // Without a table the output is not checked.
    let mut q = a2av_request(false);
    q.a2av.as_mut().unwrap().table = None;
    assert_eq!(
        expected_output(&q, 0).unwrap(),
        [seg(0, 5, Expect::Unchecked)]
    );
}

#[test]
fn a2av_bad_tables_are_invalid_requests() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut q = a2av_request(false);
    let t = q.a2av.as_mut().unwrap().table.as_mut().unwrap();
    t.recv_displs[0] = vec![0, 0];
    let e = expected_output(&q, 0).unwrap_err();
    assert!(matches!(e, VerifyError::InvalidRequest(_)), "{e:?}");
    assert!(e.to_string().contains("overlaps"), "{e}");
    let t = q.a2av.as_mut().unwrap().table.as_mut().unwrap();
    t.recv_displs[0] = vec![4, 3];
    let e = expected_output(&q, 0).unwrap_err();
    assert!(matches!(e, VerifyError::InvalidRequest(_)), "{e:?}");
    assert!(e.to_string().contains("past its output of 5"), "{e}");
    let t = q.a2av.as_mut().unwrap().table.as_mut().unwrap();
    t.send_counts.pop();
    let e = expected_output(&q, 0).unwrap_err();
    assert!(matches!(e, VerifyError::InvalidRequest(_)), "{e:?}");
    assert!(e.to_string().contains("not 2 × 2"), "{e}");
}

#[test]
fn a2av_lowered_verifies_and_broken_is_caught() {
    for in_place in [false, true] {
        let q = a2av_request(in_place);
        verify(&lowered(&q)).unwrap_or_else(|e| panic!("in place {in_place}: {e}"));
    }
    // Rank 1 sends its 3 elements from in1[1] instead of in1[0].
    let mut p = lowered(&a2av_request(false));
    for t in transfers(&mut p, 1) {
        if let Transfer::Copy { src, dst, .. } = t {
            if dst.rank == 0 {
                src.offset = 1;
            }
        }
    }
    let m = wrong_output(&p);
    assert_eq!((m.rank, m.start), (0, 0));
    assert_eq!(
        m.problem,
        OutputProblem::WrongElement {
            source: 1,
            expected: 0,
            found: 1
        }
    );
    // Rank 0 sends 3 elements to rank 1 instead of 2: rank 1's gap at out[3] is written.
    let mut p = lowered(&a2av_request(false));
    for t in transfers(&mut p, 0) {
        if let Transfer::Copy { dst, len, .. } = t {
            if dst.rank == 1 {
                *len = 3;
            }
        }
    }
    let m = wrong_output(&p);
    assert_eq!((m.rank, m.start, m.end), (1, 3, 4));
    assert_eq!(m.problem, OutputProblem::ShouldBeUntouched);
}

#[test]
fn permute_reduce_expectation_hand_checked() {
    // 3 ranks, count 4: rank 0's predecessor is rank 2; src1 is 4 elements after src0.
    let q = request(CollectiveOp::PermuteReduceImplicit, 3, 4);
    assert_eq!(q.input_elems(), 8);
    assert_eq!(
        described(&expected_output(&q, 0).unwrap()),
        [(0, 4, "in2[0] ⊕ in2[4]".to_string())]
    );
    assert_eq!(
        expected_term(&q, 1, 3).unwrap().unwrap().describe_at(3),
        "in0[3] ⊕ in0[7]"
    );
}

#[test]
fn permute_reduce_lowered_verifies_and_broken_is_caught() {
    for in_place in [false, true] {
        let mut q = request(CollectiveOp::PermuteReduceImplicit, 3, 4);
        q.in_place = in_place;
        verify(&lowered(&q)).unwrap_or_else(|e| panic!("in place {in_place}: {e}"));
    }
    // Rank 0 reduces src0 with itself instead of with src1: rank 1 gets in0 twice.
    let q = request(CollectiveOp::PermuteReduceImplicit, 3, 4);
    let mut p = lowered(&q);
    for t in transfers(&mut p, 0) {
        if let Transfer::Reduce { srcs, .. } = t {
            srcs[1] = srcs[0];
        }
    }
    let m = wrong_output(&p);
    assert_eq!(m.rank, 1);
    assert_eq!(
        m.problem,
        OutputProblem::Duplicate {
            source: 0,
            times: 2
        }
    );
    // Rank 2 sends src0 only (a plain copy): rank 0 lacks in2[c + e].
    let mut p = lowered(&q);
    for t in transfers(&mut p, 2) {
        if let Transfer::Reduce { srcs, dst, len, .. } = t {
            *t = Transfer::Copy {
                src: srcs[0],
                dst: *dst,
                len: *len,
            };
        }
    }
    let m = wrong_output(&p);
    assert_eq!(m.rank, 0);
    assert!(
        matches!(m.problem, OutputProblem::WrongElement { source: 2, .. }),
        "{:?}",
        m.problem
    );
}
