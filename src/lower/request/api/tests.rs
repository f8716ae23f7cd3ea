use super::*;
use crate::abi::types::{nrt_cc_op_type_t, nrt_dtype_t, nrt_op_type_t};
use crate::lower::request::{nrt_cc_op, nrt_op};

fn comm(rank: u32) -> ApiComm {
    ApiComm {
        replica_group: vec![4, 5, 6, 7],
        rank,
        rank_n: 4,
        ctx_device_id: 4 + rank,
        ctx_device_count: 8,
        vnc: 0,
    }
}

const AR: u32 = nrt_cc_op::ALLREDUCE;
const AG: u32 = nrt_cc_op::ALLGATHER;
const RS: u32 = nrt_cc_op::REDUCESCATTER;
const BF16: u32 = 6;

fn api(c: &ApiComm, i: &[u64], o: &[u64], d: u32, op: u32, cc: u32) -> Result<CollectiveRequest> {
    CollectiveRequest::from_api(c, i, o, false, d, op, cc)
}

fn msg(r: Result<CollectiveRequest>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Invalid, "{e}");
    e.message().to_string()
}

/// docs/contract/abi.md §2.2: the three raw enums match the C twins in abi/types.rs.
#[test]
fn golden_nrt_enum_tables() {
    assert_eq!(nrt_cc_op_type_t::NRT_CC_ALLGATHER as u32, AG);
    assert_eq!(nrt_cc_op_type_t::NRT_CC_ALLREDUCE as u32, AR);
    assert_eq!(nrt_cc_op_type_t::NRT_CC_REDUCESCATTER as u32, RS);
    for (c, want) in [
        (AG, CollectiveOp::AllGather),
        (AR, CollectiveOp::AllReduce),
        (RS, CollectiveOp::ReduceScatter),
    ] {
        assert_eq!(cc_op_of(c).unwrap(), want);
    }
    assert_eq!(nrt_op_type_t::NRT_OP_ADD as u32, nrt_op::ADD);
    assert_eq!(nrt_op_type_t::NRT_OP_FMA as u32, nrt_op::FMA);
    assert_eq!(nrt_op_type_t::NRT_OP_MAX as u32, nrt_op::MAX);
    assert_eq!(nrt_op_type_t::NRT_OP_MIN as u32, nrt_op::MIN);
    assert_eq!(nrt_op_type_t::NRT_OP_INVALID as u32, nrt_op::INVALID);
    for (v, want) in [(0, ReduceOp::Add), (2, ReduceOp::Max), (3, ReduceOp::Min)] {
        let r = ReduceOp::from_nrt_op(v, "all-reduce").unwrap();
        assert_eq!(r, want);
        assert_eq!(u32::from(r.cce_code()), v, "nrt_op_type_t = SDMA_CCETYPE");
    }
    use nrt_dtype_t::*;
    let all = [
        NRT_DTYPE_UNKNOWN,
        NRT_DTYPE_UINT64,
        NRT_DTYPE_INT8,
        NRT_DTYPE_UINT8,
        NRT_DTYPE_INT16,
        NRT_DTYPE_UINT16,
        NRT_DTYPE_BFLOAT16,
        NRT_DTYPE_FLOAT16,
        NRT_DTYPE_INT32,
        NRT_DTYPE_UINT32,
        NRT_DTYPE_FLOAT32,
        NRT_DTYPE_FP32R,
        NRT_DTYPE_INT64,
        NRT_DTYPE_FP8_E3,
        NRT_DTYPE_FP8_E4,
        NRT_DTYPE_FP8_E5,
    ];
    for (i, d) in all.into_iter().enumerate() {
        assert_eq!(d as u32, i as u32);
        let copy = dtype_of(d as u32, CollectiveOp::AllGather);
        let red = dtype_of(d as u32, CollectiveOp::AllReduce);
        if i == 0 {
            assert!(copy.is_err() && red.is_err());
            continue;
        }
        assert_eq!(copy.unwrap().as_u8(), i as u8, "passthrough for copies");
        assert_eq!(red.is_ok(), matches!(i, 6 | 7 | 10 | 13 | 14 | 15), "{d:?}");
    }
}

#[test]
fn enum_rejections_say_what_and_why() {
    // Checks the message a user reads, on purpose.
    let c = comm(0);
    assert_eq!(
        msg(api(&c, &[8], &[8], BF16, 0, 3)),
        "cc_op (nrt_cc_op_type_t) = 3 is not a collective: valid values are NRT_CC_ALLGATHER \
             0, NRT_CC_ALLREDUCE 1, NRT_CC_REDUCESCATTER 2"
    );
    assert_eq!(
        msg(api(&c, &[8], &[8], 16, 0, AR)),
        "dtype (nrt_dtype_t) = 16 is not a valid nrt_dtype_t (values 1..=15)"
    );
    assert_eq!(
        msg(api(&c, &[8], &[8], 0, 0, AG)),
        "dtype (nrt_dtype_t) = 0: NRT_DTYPE_UNKNOWN (0) is not a data type"
    );
    let m = msg(api(&c, &[8], &[8], 8, 0, AR));
    assert_eq!(
        m,
        "dtype (nrt_dtype_t) = 8: all-reduce of INT32 is not supported: integer reductions \
             are rejected because the compiler converts integer reductions to FP32 \
             (docs/design.md §2.9)"
    );
    let m = msg(api(&c, &[32], &[8], 11, 0, RS));
    assert!(m.starts_with("dtype (nrt_dtype_t) = 11: reduce-scatter of FP32R is not supported: FP32R is an accumulation type"), "{m}");
    let m = msg(api(&c, &[8], &[8], BF16, nrt_op::FMA, AR));
    assert_eq!(
        m,
        "op (nrt_op_type_t) = 1: NRT_OP_FMA (1) is not supported: FMA computes a scaled \
             accumulate (acc += scale*src) and needs a scale, which the collective API does not \
             carry"
    );
    let m = msg(api(&c, &[8], &[8], BF16, nrt_op::INVALID, AR));
    assert_eq!(
        m,
        "op (nrt_op_type_t) = 15: NRT_OP_INVALID (15) is not a reduction; all-reduce needs \
             NRT_OP_ADD (0), NRT_OP_MAX (2) or NRT_OP_MIN (3)"
    );
    assert!(msg(api(&c, &[8], &[8], BF16, 7, AR)).contains("7 is not a valid nrt_op_type_t"));
    // All-gather ignores op and accepts integers and FP32R (copies are exact).
    let r = api(&c, &[8], &[32], 8, nrt_op::INVALID, AG).unwrap();
    assert_eq!((r.reduce, r.dtype, r.count), (None, Dtype::Int32, 2));
    assert!(api(&c, &[8], &[32], 11, 0, AG).is_ok());
}

#[test]
fn comm_rejections() {
    let check = |c: ApiComm| msg(api(&c, &[8], &[8], BF16, 0, AR));
    let mut c = comm(1);
    c.rank_n = 3;
    assert_eq!(
        check(c),
        "comm.rank_n = 3 but comm.replica_group has 4 entries; they must agree"
    );
    let mut c = comm(1);
    c.rank = 4;
    assert_eq!(check(c), "comm.rank = 4 is not below comm.rank_n = 4");
    let mut c = comm(1);
    c.ctx_device_id = 6;
    assert_eq!(
        check(c),
        "comm.replica_group[1] = 5 but comm.ctx_device_id = 6: the group must contain the \
             calling rank at its index"
    );
    let mut c = comm(1);
    c.ctx_device_count = 7;
    assert_eq!(
        check(c),
        "comm.replica_group[3] = 7 is not below comm.ctx_device_count = 7 (the world size)"
    );
    let mut c = comm(1);
    c.replica_group[2] = 4;
    assert_eq!(
        check(c),
        "comm.replica_group[0] and [2] are both device 4: participants must be distinct"
    );
    let c = ApiComm {
        ctx_device_count: 1,
        ..Default::default()
    };
    assert_eq!(
        check(c),
        "comm.rank_n = 0: a communicator needs at least one rank"
    );
}

/// docs/contract/abi.md §5.7: AG out = N × in, RS in = N × out, AR in = out; the 2.33 list
/// forms.
#[test]
fn sizes_and_list_forms() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let c = comm(2);
    let r = api(&c, &[64], &[64], BF16, 2, AR).unwrap();
    let mut want = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Bf16,
        Some(ReduceOp::Max),
        32,
        vec![4, 5, 6, 7],
        2,
    );
    assert_eq!(r, want);
    let r = CollectiveRequest::from_api(&c, &[64], &[64], true, BF16, 2, AR).unwrap();
    want.in_place = true;
    assert_eq!(r, want);
    let r = api(&c, &[16], &[64], BF16, 0, AG).unwrap();
    assert_eq!(
        (r.count, r.output_elems(), r.io_form),
        (8, 32, IoForm::Single)
    );
    let r = api(&c, &[16], &[16; 4], BF16, 0, AG).unwrap();
    assert_eq!(
        (r.count, r.output_elems(), r.io_form),
        (8, 32, IoForm::OutputBlocks)
    );
    let r = api(&c, &[64], &[16], 10, 3, RS).unwrap();
    assert_eq!(
        (r.count, r.input_elems(), r.io_form),
        (4, 16, IoForm::Single)
    );
    let r = api(&c, &[16; 4], &[16], 10, 3, RS).unwrap();
    assert_eq!(
        (r.count, r.input_elems(), r.io_form),
        (4, 16, IoForm::InputBlocks)
    );
    // Zero-element collectives are legal.
    let r = api(&c, &[0], &[0], BF16, 0, AR).unwrap();
    assert_eq!(r.count, 0);
    assert_eq!(api(&c, &[0; 4], &[0], BF16, 0, RS).unwrap().count, 0);

    assert_eq!(
        msg(api(&c, &[64], &[32], BF16, 0, AR)),
        "all-reduce: input 64 bytes and output 32 bytes do not fit: it needs input = output \
             (rank_n = 4)"
    );
    assert_eq!(
        msg(api(&c, &[16], &[48], BF16, 0, AG)),
        "all-gather: input 16 bytes and output 48 bytes do not fit: it needs output = rank_n \
             x input (rank_n = 4)"
    );
    assert_eq!(
        msg(api(&c, &[48], &[16], BF16, 0, RS)),
        "reduce-scatter: input 48 bytes and output 16 bytes do not fit: it needs input = \
             rank_n x output (rank_n = 4)"
    );
    assert_eq!(
        msg(api(&c, &[16], &[16, 16, 16, 8], BF16, 0, AG)),
        "all-gather: the 4 outputs tensors are the rank blocks and must be equal-sized: \
             outputs[0] is 16 bytes, outputs[3] is 8 bytes"
    );
    assert_eq!(
        msg(api(&c, &[16], &[16; 3], BF16, 0, AG)),
        "all-gather: 1 input and 3 output tensors given; it takes 1 input and 1 or rank_n = \
             4 outputs"
    );
    assert_eq!(
        msg(api(&c, &[16; 4], &[16; 4], BF16, 0, RS)),
        "reduce-scatter: 4 input and 4 output tensors given; it takes 1 or rank_n = 4 inputs \
             and 1 output"
    );
    assert_eq!(
        msg(api(&c, &[16; 4], &[16], BF16, 0, AR)),
        "all-reduce: 4 input and 1 output tensors given; it takes 1 input and 1 output"
    );
    assert_eq!(
        msg(api(&c, &[], &[16], BF16, 0, AR)),
        "all-reduce: 0 input and 1 output tensors given; at least one of each is needed"
    );
    assert_eq!(
        msg(CollectiveRequest::from_api(
            &c,
            &[16],
            &[16; 4],
            true,
            BF16,
            0,
            AG
        )),
        "all-gather: in-place (same tensor) needs one input and one output tensor, not the \
             4-tensor outputs list"
    );
    assert_eq!(
        msg(api(&c, &[15], &[15], BF16, 0, AR)),
        "inputs[0] is 15 bytes, not a multiple of the 2-byte BFLOAT16 element"
    );
    assert_eq!(
        msg(api(&c, &[u64::MAX / 2], &[u64::MAX / 2; 4], 3, 0, AG)),
        "all-gather: the outputs sizes overflow u64"
    );
    let m = msg(api(&c, &[u64::MAX / 2], &[u64::MAX / 2], 3, 0, AG));
    assert!(m.contains("it needs output = rank_n x input"), "{m}");
}

/// Two prepares of the same op on the same communicator give equal requests, whatever the
/// rank (apart from `rank` itself): the program cache of `runtime::collective` keys on that.
#[test]
fn requests_differ_only_by_rank_across_ranks() {
    let a = api(&comm(0), &[64], &[64], BF16, 0, AR).unwrap();
    let b = api(&comm(3), &[64], &[64], BF16, 0, AR).unwrap();
    assert_eq!(CollectiveRequest { rank: 0, ..b }, a);
}
