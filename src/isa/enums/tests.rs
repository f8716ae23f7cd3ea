use super::*;

/// docs/contract/isa.md §10: the compiler's ctype lookup table in order AR, RS, AG, A2A, A2Av,
/// PERM, PERM_RED, PERM_IMPL, PERM_RED_IMPL is `01 02 03 04 09 05 06 07 08`.
#[test]
fn golden_ctype_compiler_table() {
    use CollectiveType::*;
    let order = [
        AllReduce,
        ReduceScatter,
        AllGather,
        AllToAll,
        AllToAllV,
        Permute,
        PermuteReduce,
        PermuteImplicit,
        PermuteReduceImplicit,
    ];
    let bytes: Vec<u8> = order.iter().map(|c| c.as_u8()).collect();
    assert_eq!(bytes, [1, 2, 3, 4, 9, 5, 6, 7, 8]);
    assert_eq!(CollectiveType::from_u8(0), None);
    assert_eq!(CollectiveType::from_u8(10), None);
}

#[test]
fn from_u8_inverts_as_u8_and_rejects_the_rest() {
    fn check<T: Copy + PartialEq + std::fmt::Debug>(
        all: &[T],
        from: fn(u8) -> Option<T>,
        to: fn(T) -> u8,
    ) {
        for v in 0..=255u8 {
            match from(v) {
                Some(x) => assert_eq!(to(x), v),
                None => assert!(all.iter().all(|x| to(*x) != v)),
            }
        }
    }
    check(WaitMode::ALL, WaitMode::from_u8, WaitMode::as_u8);
    check(UpdateMode::ALL, UpdateMode::from_u8, UpdateMode::as_u8);
    check(
        CollectiveType::ALL,
        CollectiveType::from_u8,
        CollectiveType::as_u8,
    );
    check(AluOp::ALL, AluOp::from_u8, AluOp::as_u8);
    check(Dtype::ALL, Dtype::from_u8, Dtype::as_u8);
    check(CcDim::ALL, CcDim::from_u8, CcDim::as_u8);
    check(
        InstrChaining::ALL,
        InstrChaining::from_u8,
        InstrChaining::as_u8,
    );
    assert_eq!(UpdateMode::from_u8(0x06), None);
    assert_eq!(UpdateMode::from_u8(0x18), None);
    assert_eq!(WaitMode::from_u8(0x86), None);
    assert_eq!(Dtype::from_u8(16), None);
}

/// docs/contract/isa.md §10: FP32R is 4 bytes in memory, 0 in the SDMA size table.
#[test]
fn golden_dtype_sizes() {
    let sizes: Vec<usize> = Dtype::ALL.iter().map(|d| d.sdma_size_table()).collect();
    assert_eq!(sizes, [0, 8, 1, 1, 2, 2, 2, 2, 4, 4, 4, 0, 8, 1, 1, 1]);
    assert_eq!(Dtype::Fp32r.size_bytes(), Some(4));
    assert_eq!(Dtype::Invalid.size_bytes(), None);
}

/// docs/contract/isa.md §9 rule 6 mask 0x350 = ADD, MULT, MAX, MIN; §4 masks 0x90 / 0x81.
#[test]
fn golden_masks() {
    let pass: Vec<AluOp> = AluOp::ALL
        .iter()
        .copied()
        .filter(|o| o.passes_vendor_reduce_mask())
        .collect();
    assert_eq!(pass, [AluOp::Add, AluOp::Mult, AluOp::Max, AluOp::Min]);
    let ins: Vec<EncOpType> = EncOpType::ALL
        .iter()
        .copied()
        .filter(|o| o.input_spans_ranks())
        .collect();
    assert_eq!(ins, [EncOpType::ReduceScatter, EncOpType::AllToAll]);
    let outs: Vec<EncOpType> = EncOpType::ALL
        .iter()
        .copied()
        .filter(|o| o.output_spans_ranks())
        .collect();
    assert_eq!(outs, [EncOpType::AllGather, EncOpType::AllToAll]);
}

#[test]
fn cc_dim_axis_and_misc() {
    assert_eq!(CcDim::Dim0.axis(), Axis::Free);
    assert_eq!(CcDim::Dim1.axis(), Axis::Partition);
    assert_eq!(AluOp::Mult.cce_op(), None);
    assert_eq!(AluOp::Min.cce_op(), Some(CceOp::Min));
    assert_eq!(
        UpdateMode::SemIncComplete.to_string(),
        "SEM_INC_COMPLETE (0x13)"
    );
    assert!(permute_chain_active(7) && !permute_chain_active(0));
}
