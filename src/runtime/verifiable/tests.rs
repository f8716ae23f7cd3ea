//! Unit tests of the verifiable data and the reference: budgets against the codecs, the value
//! plan's bounds, reference results on tiny hand-made inputs (expected values written out by
//! hand), comparison helpers, and detection of deliberately misplaced data.

use super::*;
use crate::dtype::{f32_to_bf16, f32_to_fp16};
use crate::lower::request::{A2avMeta, ReduceOp};

fn req(op: CollectiveOp, d: Dtype, red: Option<ReduceOp>, n: u32, c: u64) -> CollectiveRequest {
    CollectiveRequest::new(op, d, red, c, (0..n).collect(), 0)
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn bf16s(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| f32_to_bf16(*x).to_le_bytes())
        .collect()
}
fn fp16s(v: &[f32]) -> Vec<u8> {
    v.iter()
        .flat_map(|x| f32_to_fp16(*x).to_le_bytes())
        .collect()
}
fn u16s(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// docs/contract/device.md §11.2 formats: BF16 p = 8, FP16 p = 11, FP32 p = 24, E4M3 p = 4, E5M2 p = 3, E3M4
/// p = 5 but max 15.5.
#[test]
fn budgets_match_the_formats() {
    let want = [
        (Dtype::Bf16, 256),
        (Dtype::Fp16, 2048),
        (Dtype::Fp32, 1 << 24),
        (Dtype::Fp8E4, 16),
        (Dtype::Fp8E5, 8),
        (Dtype::Fp8E3, 15),
        (Dtype::Int8, 127),
        (Dtype::Uint8, 255),
        (Dtype::Int32, i32::MAX as u64),
        (Dtype::Uint64, u64::MAX),
    ];
    for (d, b) in want {
        assert_eq!(exact_budget(d).unwrap(), b, "{d}");
    }
    assert!(exact_budget(Dtype::Fp32r).is_err());
    // Every integer up to B is exact in the codec; B + 1 is not (or overflows).
    for d in [
        Dtype::Bf16,
        Dtype::Fp16,
        Dtype::Fp8E3,
        Dtype::Fp8E4,
        Dtype::Fp8E5,
    ] {
        let c = FloatCodec::new(d, &Numerics::default()).unwrap();
        let b = exact_budget(d).unwrap() as i64;
        let mut buf = vec![0u8; c.size()];
        for v in -b..=b {
            c.narrow_one(v as f32, &mut buf);
            assert_eq!(c.widen_one(&buf), v as f32, "{d} {v}");
        }
        c.narrow_one((b + 1) as f32, &mut buf);
        assert_ne!(
            c.widen_one(&buf),
            (b + 1) as f32,
            "{d}: B + 1 must not be exact"
        );
    }
    let c = FloatCodec::new(Dtype::Fp32, &Numerics::default()).unwrap();
    let mut buf = [0u8; 4];
    c.narrow_one((1 << 24) as f32 + 1.0, &mut buf);
    assert_eq!(c.widen_one(&buf), (1 << 24) as f32);
}

/// Sum of magnitudes per set within the budget (so every partial sum is exact), values that
/// vary by rank, negatives where signed.
#[test]
fn reduce_inputs_stay_within_budget() {
    for (d, n, c) in [
        (Dtype::Bf16, 64, 300),
        (Dtype::Fp8E5, 64, 300),
        (Dtype::Fp8E3, 5, 300),
        (Dtype::Fp32, 3, 300),
        (Dtype::Fp16, 16, 300),
    ] {
        for red in [ReduceOp::Add, ReduceOp::Max, ReduceOp::Min] {
            let rq = req(CollectiveOp::AllReduce, d, Some(red), n, c);
            let ins = inputs(&rq).unwrap();
            let cd = FloatCodec::new(d, &Numerics::default()).unwrap();
            let b = exact_budget(d).unwrap() as f32;
            let esz = cd.size();
            let val = |r: usize, e: usize| cd.widen_one(&ins[r][e * esz..(e + 1) * esz]);
            let mut neg = false;
            for e in 0..c as usize {
                let vals: Vec<f32> = (0..n as usize).map(|r| val(r, e)).collect();
                assert!(vals.iter().all(|v| v.fract() == 0.0 && v.abs() <= b));
                neg |= vals.iter().any(|v| *v < 0.0);
                if red == ReduceOp::Add {
                    let mag: f32 = vals.iter().map(|v| v.abs()).sum();
                    assert!(mag <= b, "{d} n={n} element {e}: Σ|v| = {mag} > {b}");
                }
            }
            assert!(neg, "{d} {red:?}: negative values expected");
            assert_ne!(ins[0], ins[1], "{d}: ranks must differ");
        }
    }
    // Unsigned integers (a modelled integer reduction): no negatives, sums within range.
    let rq = req(
        CollectiveOp::AllReduce,
        Dtype::Uint8,
        Some(ReduceOp::Add),
        4,
        64,
    );
    let ins = inputs(&rq).unwrap();
    for e in 0..64 {
        let s: u32 = ins.iter().map(|v| u32::from(v[e])).sum();
        assert!(s <= 255);
    }
    // Permute-reduce: src0[e] and src1[e] = in[c + e] together within the budget.
    let rq = req(
        CollectiveOp::PermuteReduceImplicit,
        Dtype::Fp8E5,
        Some(ReduceOp::Add),
        3,
        50,
    );
    let ins = inputs(&rq).unwrap();
    let cd = FloatCodec::new(Dtype::Fp8E5, &Numerics::default()).unwrap();
    for v in &ins {
        assert_eq!(v.len(), 100);
        for e in 0..50 {
            let s = cd.widen_one(&v[e..e + 1]).abs() + cd.widen_one(&v[50 + e..51 + e]).abs();
            assert!(s <= 8.0);
        }
    }
}

#[test]
fn copy_inputs_are_finite_and_distinct() {
    for d in crate::dtype::CCE_IO_DTYPES {
        let rq = req(CollectiveOp::AllGather, d, None, 3, 1000);
        let ins = inputs(&rq).unwrap();
        let cd = FloatCodec::new(d, &Numerics::default()).unwrap();
        for v in &ins {
            let mut f = vec![0f32; 1000];
            cd.widen(v, &mut f);
            assert!(f.iter().all(|x| x.is_finite()), "{d}");
        }
        assert_ne!(ins[0], ins[1]);
    }
    let rq = req(CollectiveOp::AllToAll, Dtype::Uint64, None, 2, 5);
    let ins = inputs(&rq).unwrap();
    assert_eq!(ins[1].len(), 2 * 5 * 8);
    assert!(inputs(&req(CollectiveOp::Barrier, Dtype::Fp32, None, 4, 0))
        .unwrap()
        .iter()
        .all(Vec::is_empty));
}

#[test]
fn reference_reductions_by_hand() {
    let ins = vec![f32s(&[1.0, 2.0, 3.0]), f32s(&[10.0, -20.0, 30.0])];
    for (red, want) in [
        (ReduceOp::Add, [11.0, -18.0, 33.0]),
        (ReduceOp::Max, [10.0, 2.0, 30.0]),
        (ReduceOp::Min, [1.0, -20.0, 3.0]),
    ] {
        let rq = req(CollectiveOp::AllReduce, Dtype::Fp32, Some(red), 2, 3);
        assert_eq!(expected(&rq, &ins).unwrap(), vec![f32s(&want); 2]);
    }
    let rq = req(
        CollectiveOp::ReduceScatter,
        Dtype::Bf16,
        Some(ReduceOp::Add),
        2,
        2,
    );
    let ins = vec![bf16s(&[1.0, 2.0, 3.0, 4.0]), bf16s(&[5.0, 6.0, 7.0, 8.0])];
    let want = vec![bf16s(&[6.0, 8.0]), bf16s(&[10.0, 12.0])];
    assert_eq!(expected(&rq, &ins).unwrap(), want);
    // In place the logical result is the same (the storage offset is staging's business).
    let mut ip = rq.clone();
    ip.in_place = true;
    assert_eq!(expected(&ip, &ins).unwrap(), want);
    // Implicit permute-reduce: rank r gets pred's src0 ⊕ src1.
    let rq = req(
        CollectiveOp::PermuteReduceImplicit,
        Dtype::Fp16,
        Some(ReduceOp::Add),
        2,
        2,
    );
    let ins = vec![fp16s(&[1.0, 2.0, 3.0, 4.0]), fp16s(&[5.0, 6.0, 7.0, 8.0])];
    assert_eq!(
        expected(&rq, &ins).unwrap(),
        vec![fp16s(&[12.0, 14.0]), fp16s(&[4.0, 6.0])]
    );
    // Integers (i128 path): int8 max and add, two's complement bytes.
    let ins = vec![vec![0xFB, 3], vec![2, 0xF9]]; // [-5, 3], [2, -7]
    let rq = req(
        CollectiveOp::AllReduce,
        Dtype::Int8,
        Some(ReduceOp::Max),
        2,
        2,
    );
    assert_eq!(expected(&rq, &ins).unwrap(), vec![vec![2, 3]; 2]);
    let rq = req(
        CollectiveOp::AllReduce,
        Dtype::Int8,
        Some(ReduceOp::Add),
        2,
        2,
    );
    assert_eq!(expected(&rq, &ins).unwrap(), vec![vec![0xFD, 0xFC]; 2]);
}

#[test]
fn reference_copies_by_hand() {
    let rq = req(CollectiveOp::AllGather, Dtype::Int8, None, 3, 1);
    let ins = vec![vec![7], vec![8], vec![9]];
    assert_eq!(expected(&rq, &ins).unwrap(), vec![vec![7, 8, 9]; 3]);
    let rq = req(CollectiveOp::AllToAll, Dtype::Uint16, None, 2, 2);
    let ins = vec![u16s(&[1, 2, 3, 4]), u16s(&[5, 6, 7, 8])];
    assert_eq!(
        expected(&rq, &ins).unwrap(),
        vec![u16s(&[1, 2, 5, 6]), u16s(&[3, 4, 7, 8])]
    );
    let ins3 = vec![vec![1, 2], vec![3, 4], vec![5, 6]];
    let rq = req(CollectiveOp::PermuteImplicit, Dtype::Uint8, None, 3, 2);
    assert_eq!(
        expected(&rq, &ins3).unwrap(),
        vec![vec![5, 6], vec![1, 2], vec![3, 4]]
    );
    // Explicit pairs 0 → 2, 1 → 0: rank 1 is nobody's target (zero out of place, its own
    // input in place).
    let mut rq = req(CollectiveOp::Permute, Dtype::Uint8, None, 3, 2);
    rq.pairs = vec![(0, 2), (1, 0)];
    assert_eq!(
        expected(&rq, &ins3).unwrap(),
        vec![vec![3, 4], vec![0, 0], vec![1, 2]]
    );
    rq.in_place = true;
    assert_eq!(
        expected(&rq, &ins3).unwrap(),
        vec![vec![3, 4], vec![3, 4], vec![1, 2]]
    );
    // Send/recv without pairs: rank 0 → rank 1.
    let rq = req(CollectiveOp::Send, Dtype::Uint8, None, 2, 2);
    assert_eq!(
        expected(&rq, &ins3[..2]).unwrap(),
        vec![vec![0, 0], vec![1, 2]]
    );
    let rq = req(CollectiveOp::Barrier, Dtype::Fp32, None, 3, 0);
    let none: Vec<Vec<u8>> = vec![vec![]; 3];
    assert_eq!(expected(&rq, &none).unwrap(), none);
}

/// Rank 0 sends 1 element to itself (from 0) and 3 to rank 1 (from 1); rank 1 sends 2 to rank 0
/// (from 2), none to itself. Input 4, output 6 elements; derived receive displacements
/// (6 / 2) · p = 0, 3.
#[test]
fn reference_all_to_all_v_by_hand() {
    let rows = vec![vec![vec![1, 3], vec![0, 1]], vec![vec![2, 0], vec![2, 4]]];
    let meta = A2avMeta::from_bitmap(0x03, 4, 6, None)
        .unwrap()
        .with_table(2, &rows)
        .unwrap();
    let mut rq = req(CollectiveOp::AllToAllV, Dtype::Uint8, None, 2, 3);
    rq.a2av = Some(meta);
    let ins = vec![vec![10, 11, 12, 13], vec![20, 21, 22, 23]];
    assert_eq!(
        expected(&rq, &ins).unwrap(),
        vec![vec![10, 0, 0, 22, 23, 0], vec![11, 12, 13, 0, 0, 0]]
    );
    rq.in_place = true;
    assert_eq!(
        expected(&rq, &ins).unwrap(),
        vec![vec![10, 11, 12, 22, 23, 0], vec![11, 12, 13, 23, 0, 0]]
    );
    rq.a2av.as_mut().unwrap().table = None;
    assert!(expected(&rq, &ins).is_err());
}

#[test]
fn comparison_helpers() {
    // Checks the message a user reads, on purpose.
    let rq = req(CollectiveOp::AllGather, Dtype::Bf16, None, 2, 2);
    let want = vec![bf16s(&[1.0, 2.0, 3.0, 4.0]); 2];
    let mut got = want.clone();
    assert_eq!(count_wrong(&rq, &got, &want), 0);
    assert_eq!(first_mismatch(&rq, &got, &want), None);
    got[1][4] ^= 0x01; // element 2 of rank 1
    got[1][7] ^= 0x80; // element 3 of rank 1
    assert_eq!(count_wrong(&rq, &got, &want), 2);
    let m = first_mismatch(&rq, &got, &want).unwrap();
    assert_eq!((m.rank, m.elem), (1, 2));
    assert!(
        m.to_string()
            .starts_with("rank 1 element 2: expected 3 (0x4040), got"),
        "{m}"
    );
    // A short result: the missing elements count.
    got[0].truncate(4);
    assert_eq!(count_wrong(&rq, &got, &want), 4);
    assert!(first_mismatch(&rq, &got, &want)
        .unwrap()
        .to_string()
        .contains("too short"));

    // `check` streams the same verdict from the inputs.
    let ins = vec![bf16s(&[1.0, 2.0]), bf16s(&[3.0, 4.0])];
    let mut got = want.clone();
    assert_eq!(check(&rq, &ins, &got).unwrap().wrong, 0);
    got[0][0] ^= 1;
    got[1][6] ^= 1;
    let c = check(&rq, &ins, &got).unwrap();
    assert_eq!(c.wrong, 2);
    assert_eq!(c.first.map(|m| (m.rank, m.elem)), Some((0, 0)));
    got[1].pop();
    assert!(check(&rq, &ins, &got).is_err());
}

/// A chunk of the wrong rank or offset gives a wrong result on most of its elements.
#[test]
fn misplaced_chunks_are_caught() {
    // Fraction of the 512-element chunk that changes when rank a's chunk at `at` is replaced by
    // rank b's chunk at `from`.
    let changed = |rq: &CollectiveRequest, a: usize, b: usize, at: usize, from: usize| {
        let ins = inputs(rq).unwrap();
        let esz = rq.elem_bytes().unwrap() as usize;
        let mut bad = ins.clone();
        let chunk = ins[b][from * esz..(from + 512) * esz].to_vec();
        bad[a][at * esz..(at + 512) * esz].copy_from_slice(&chunk);
        let w = expected(rq, &ins).unwrap();
        let g = expected(rq, &bad).unwrap();
        count_wrong(rq, &g[..1], &w[..1]) as f64 / 512.0
    };
    let ar = |d, n, red| req(CollectiveOp::AllReduce, d, Some(red), n, 2048);
    // Wrong rank, same offset; right rank, wrong offset.
    for (rq, floor) in [
        (ar(Dtype::Bf16, 8, ReduceOp::Add), 0.9),
        (ar(Dtype::Bf16, 64, ReduceOp::Add), 0.8),
        // MAX / MIN: a term decides an element only where it is the extreme (≈ 1/N).
        (ar(Dtype::Fp32, 8, ReduceOp::Max), 0.08),
        (ar(Dtype::Bf16, 4, ReduceOp::Min), 0.15),
        (ar(Dtype::Fp8E4, 16, ReduceOp::Add), 0.5),
        (ar(Dtype::Fp8E5, 64, ReduceOp::Add), 0.05),
    ] {
        for (b, from) in [(1, 0), (0, 512)] {
            let f = changed(&rq, 0, b, 0, from);
            assert!(
                f >= floor,
                "{:?} {:?}: only {f} changed",
                rq.dtype,
                rq.reduce
            );
        }
    }
    let ag = req(CollectiveOp::AllGather, Dtype::Int8, None, 4, 2048);
    assert!(changed(&ag, 2, 3, 0, 0) > 0.97);
    assert!(changed(&ag, 2, 2, 0, 1) > 0.97);
}
