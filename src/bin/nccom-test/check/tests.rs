use super::*;

fn ring(n: u32) -> Vec<Vec<u32>> {
    vec![(0..n).collect()]
}

/// The same seed gives the same data in any process; another seed or rank other data.
#[test]
fn data_is_a_pure_function_of_seed_rank_and_index() {
    let a = Data::new(Dtype::Fp32, Some(Mode::Random), 7);
    let b = Data::new(Dtype::Fp32, Some(Mode::Random), 7);
    assert_eq!(a.input(3, 64), b.input(3, 64));
    assert_ne!(a.input(3, 64), a.input(2, 64));
    assert_ne!(
        a.input(3, 64),
        Data::new(Dtype::Fp32, Some(Mode::Random), 8).input(3, 64)
    );
    let zero = Data::new(Dtype::Fp32, None, 7);
    assert!(zero.input(0, 16).iter().all(|&b| b == 0));
    let ones = Data::new(Dtype::Bf16, Some(Mode::AllOnes), 0);
    assert_eq!(ones.input(1, 2), vec![0x80, 0x3F, 0x80, 0x3F]);
    let ints = Data::new(Dtype::Uint8, Some(Mode::AllOnes), 0);
    assert_eq!(ints.input(0, 3), vec![1, 1, 1]);
}

#[test]
fn random_floats_are_quarter_steps() {
    let d = Data::new(Dtype::Fp8E4, Some(Mode::Random), 1);
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..2000 {
        let v = d.value(0, i);
        assert!((-2.0..=2.0).contains(&v) && (v * 4.0).fract() == 0.0);
        assert_eq!(dtypes::decode_float(Dtype::Fp8E4, d.bits(0, i)), Some(v));
        seen.insert((v * 4.0) as i32);
    }
    assert_eq!(seen.len(), 17);
}

/// all_ones: an all-reduce expects the rank count.
#[test]
fn all_ones_all_reduce_expects_the_rank_count() {
    let d = Data::new(Dtype::Fp32, Some(Mode::AllOnes), 0);
    let l = Layout::of(Op::AllReduce, 4, &ring(3), &[], 1).unwrap();
    match l.want(&d, 2) {
        Want::Near { value, .. } => assert_eq!(value, 3.0),
        w => panic!("{w:?}"),
    }
    let out: Vec<u8> = (0..4).flat_map(|_| 3f32.to_le_bytes()).collect();
    assert_eq!(compare(&d, &l, &out), Verdict::default());
}

/// An independent naive model of each op over whole inputs, against the layout's golden.
fn naive(op: Op, d: &Data, n: u32, count: u64, r: u32) -> Vec<u64> {
    let blocks_in = op.in_blocks(n);
    let ins: Vec<Vec<u64>> = (0..n)
        .map(|k| (0..count * blocks_in).map(|i| d.bits(k, i)).collect())
        .collect();
    let sum = |i: u64| ins.iter().fold(0u64, |s, x| s.wrapping_add(x[i as usize])) & 0xFF;
    match op {
        Op::AllReduce => (0..count).map(sum).collect(),
        Op::ReduceScatter => (0..count).map(|i| sum(u64::from(r) * count + i)).collect(),
        Op::AllGather => ins.iter().flat_map(|x| x.clone()).collect(),
        Op::AllToAll => ins
            .iter()
            .flat_map(|x| {
                x[(r as usize * count as usize)..((r as usize + 1) * count as usize)].to_vec()
            })
            .collect(),
        Op::SendRecv | Op::Permute => ins[((r + n - 1) % n) as usize].clone(),
        _ => unreachable!(),
    }
}

#[test]
fn golden_matches_a_naive_model_of_every_op() {
    let d = Data::new(Dtype::Uint8, Some(Mode::Random), 99);
    let n = 3;
    let pairs: Vec<(u32, u32)> = (0..n).map(|r| (r, (r + 1) % n)).collect();
    for op in [
        Op::AllReduce,
        Op::ReduceScatter,
        Op::AllGather,
        Op::AllToAll,
        Op::SendRecv,
        Op::Permute,
    ] {
        for r in 0..n {
            let l = Layout::of(op, 5, &ring(n), &pairs, r).unwrap();
            let g = golden(&d, &l);
            let want: Vec<u8> = naive(op, &d, n, 5, r).iter().map(|&b| b as u8).collect();
            assert_eq!(g, want, "{op:?} rank {r}");
            assert_eq!(compare(&d, &l, &g), Verdict::default());
        }
    }
}

/// A wrong element is counted and the first one named; a float within tolerance passes.
#[test]
fn mismatches_are_counted_and_named() {
    let d = Data::new(Dtype::Int32, Some(Mode::Random), 3);
    let l = Layout::of(Op::AllGather, 4, &ring(2), &[], 0).unwrap();
    let mut out = golden(&d, &l);
    out[4 * 5] ^= 1;
    out[4 * 7] ^= 1;
    let v = compare(&d, &l, &out);
    assert_eq!(v.wrong, 2);
    assert!(v.first.unwrap().starts_with("element 5: got"));
    assert_eq!(compare(&d, &l, &out[..8]).wrong, 6);

    let f = Data::new(Dtype::Bf16, Some(Mode::Random), 3);
    let l = Layout::of(Op::AllReduce, 64, &ring(8), &[], 0).unwrap();
    let ok = golden(&f, &l);
    assert_eq!(compare(&f, &l, &ok).wrong, 0);
    let mut nan = ok.clone();
    nan[0] = 0xC0;
    nan[1] = 0x7F;
    assert_eq!(compare(&f, &l, &nan).wrong, 1);
}

/// Subgroups: positions are within the rank's subgroup; a permute rank nobody targets is
/// not checked.
#[test]
fn layouts_follow_replica_subgroups_and_pairs() {
    let groups = vec![vec![0, 2], vec![1, 3]];
    let l = Layout::of(Op::ReduceScatter, 4, &groups, &[], 3).unwrap();
    assert_eq!((l.members.clone(), l.pos), (vec![1, 3], 1));
    let l = Layout::of(Op::SendRecv, 4, &groups, &[], 2).unwrap();
    assert_eq!(l.src, Some(0));
    let l = Layout::of(Op::Permute, 4, &ring(4), &[(0, 1)], 2).unwrap();
    assert_eq!(l.src, None);
    let d = Data::new(Dtype::Fp32, Some(Mode::Random), 0);
    assert_eq!(l.want(&d, 0), Want::Skip);
    assert!(Layout::of(Op::AllReduce, 4, &groups, &[], 9).is_none());
}

#[test]
fn digests_differ_with_the_bytes() {
    assert_eq!(digest(b""), "cbf29ce484222325");
    assert_ne!(digest(b"ab"), digest(b"ba"));
}

/// All-to-all-v golden by hand (3 ranks, uint8, a table with a zero count and gaps): rank 1
/// receives rank 0's 2 elements from 4 at 0, nothing from itself, rank 2's 1 element from 0
/// at 5; the rest is 0. A wrong element and a non-zero gap are both caught.
#[test]
fn variable_size_golden_by_hand() {
    let d = Data::new(Dtype::Uint8, Some(Mode::Random), 3);
    let t = r#"{"metadata":[
        {"send_counts":[1,2,0],"send_displs":[0,4,0]},
        {"send_counts":[0,0,3],"send_displs":[0,0,1]},
        {"send_counts":[0,1,2],"send_displs":[0,0,2],"recv_displs":[0,6,3]}]}"#;
    // recv_displs given for rank 2 only: rank 1's are packed, [0, 2, 2].
    let rows = crate::metadata::parse(t, Op::AllToAllV, 3).unwrap();
    let l = Layout::of(Op::AllToAllV, 3, &ring(3), &[], 1)
        .unwrap()
        .with_table(&rows);
    let want: Vec<u64> = (0..9)
        .map(|j| match l.want(&d, j) {
            Want::Exact(b) => b,
            w => panic!("{w:?}"),
        })
        .collect();
    assert_eq!(
        want,
        [d.bits(0, 4), d.bits(0, 5), d.bits(2, 0), 0, 0, 0, 0, 0, 0]
    );
    let mut out: Vec<u8> = want.iter().map(|&b| b as u8).collect();
    assert_eq!(compare(&d, &l, &out).wrong, 0);
    out[7] = 1;
    out[0] ^= 0xFF;
    let v = compare(&d, &l, &out);
    assert_eq!(v.wrong, 2);
    assert!(v.first.unwrap().starts_with("element 0:"));
    // Rank 2: rank 1's 3 elements from 1 at 6, its own 2 from 2 at 3.
    let l2 = Layout::of(Op::AllToAllV, 3, &ring(3), &[], 2)
        .unwrap()
        .with_table(&rows);
    assert_eq!(l2.want(&d, 6), Want::Exact(d.bits(1, 1)));
    assert_eq!(l2.want(&d, 4), Want::Exact(d.bits(2, 3)));
    assert_eq!(l2.want(&d, 0), Want::Exact(0));
}

/// A widened uint8 all-reduce's golden result is the saturated sum (computed here with u32
/// arithmetic), and an output that wrapped instead is counted wrong.
#[test]
fn widened_integer_sums_saturate_and_a_wrapped_output_fails() {
    let d = Data::new(Dtype::Uint8, Some(Mode::Random), 3).widened(2);
    let groups = vec![vec![0, 1]];
    let l = Layout::of(Op::AllReduce, 256, &groups, &[], 0).unwrap();
    let (a, b) = (d.input(0, 256), d.input(1, 256));
    let sat: Vec<u8> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| (u32::from(x) + u32::from(y)).min(255) as u8)
        .collect();
    assert!(sat.contains(&255), "the data exercises saturation");
    assert_eq!(compare(&d, &l, &sat), Verdict::default());
    let wrapped: Vec<u8> = a.iter().zip(&b).map(|(&x, &y)| x.wrapping_add(y)).collect();
    assert!(compare(&d, &l, &wrapped).wrong > 0);
    // 32-bit data stays within 2^23 on two ranks, so fp32 sums are exact.
    let d = Data::new(Dtype::Int32, Some(Mode::Random), 3).widened(2);
    assert!((0..1000).all(|i| crate::widen::value_of(Dtype::Int32, d.bits(1, i)).abs() <= 1 << 23));
}
