//! Tests of one-word lowering: the mapping tables, the docs/contract/isa.md §4 worked example, 0xC7
//! ≡ 0xC8, counts and fits, every rejection with its message, 0xD9+0xDA fields and operands.

use super::testutil::*;
use super::*;
use crate::isa::enums::{AluOp, CcDim, Flag, UpdateMode, WaitMode};
use crate::isa::instr::decode;
use crate::isa::instr::trigger::{DmaConfigs, TriggerAllReduce};
use crate::isa::operand::{Addr4, PseudoAddr8};
use crate::lower::request::IoForm;

/// docs/contract/isa.md §4 worked example: `c8 10 00 00 | 04 0a 13 16 | 00 00 00 00 | 04 0a 00 00 |
/// 03 00 00 00 | 04 00 00 00 | 20 00.. | ctype 01 @32` → an all-reduce of 32 FP32, ADD,
/// group 0, tensors 3 → 4, waiting sem10 > 0, incrementing sem22 on completion.
#[test]
fn golden_worked_example_1_4() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut b = [0u8; 64];
    b[..24].copy_from_slice(&[
        0xc8, 0x10, 0x00, 0x00, 0x04, 0x0a, 0x13, 0x16, 0x00, 0x00, 0x00, 0x00, 0x04, 0x0a, 0x00,
        0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    ]);
    b[24] = 0x20;
    b[32] = 0x01;
    let mut c = ctx();
    c.tensors = tensors(&[(3, 128), (4, 128)]);
    c.collective_streams = Some(1);
    let r = CollectiveRequest::from_instr(&decode(&b).unwrap(), &c).unwrap();
    let mut want = CollectiveRequest::new(
        CollectiveOp::AllReduce,
        Dtype::Fp32,
        Some(ReduceOp::Add),
        32,
        vec![10, 11, 12, 13],
        2,
    );
    let t = |id| Operand {
        tensor: TensorName::TensorId(id),
        offset_bytes: 0,
        shape: None,
        placement: Some(Placement::Hbm),
    };
    want.operands = Operands {
        src0: Some(t(3)),
        src1: None,
        dst: Some(t(4)),
    };
    want.trigger = Some(TriggerEvents {
        wait_mode: WaitMode::SemGtImm,
        wait_idx: 10,
        semaphore_value: 0,
        update_mode: UpdateMode::SemIncComplete,
        update_idx: 22,
    });
    assert_eq!(r, want);
    assert_eq!((r.input_elems(), r.output_elems()), (32, 32));
    // One byte short of the 32 FP32 elements.
    c.tensors = tensors(&[(3, 127), (4, 128)]);
    let m = err(decode(&b).unwrap(), &c);
    assert!(m.starts_with("opcode 0xC8: input tensor 3 has 31 FP32 elements (127 bytes)"));
}

/// docs/contract/isa.md §3: 0xC7 lowers exactly like 0xC8 with ctype ALL_REDUCE and group 0.
#[test]
fn c7_equals_c8_all_reduce_group_0() {
    let w7 = TriggerAllReduce {
        common: Common::default(),
        op: AluOp::Max,
        dtype: Dtype::Bf16,
        reserved14: [0; 2],
        input_tensor_id: 3,
        output_tensor_id: 4,
        num_elements: 64,
        reserved32: [0; 32],
    };
    let w8 = c8(CollectiveType::AllReduce, AluOp::Max, Dtype::Bf16, 64);
    let r7 = lower(Instr::TriggerAllReduce(w7)).unwrap();
    let r8 = lower(Instr::TriggerCollective(w8)).unwrap();
    assert_eq!(r7, r8);
    assert_eq!(r7.reduce, Some(ReduceOp::Max));
}

/// docs/contract/isa.md §4 scaling: RS input and A2A both × rank_n; AG output and A2A × rank_n.
#[test]
fn c8_counts_scale_with_rank_n() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut c = ctx();
    for (ct, op, inb, outb) in [
        (CollectiveType::ReduceScatter, AluOp::Add, 4 * 8 * 2, 8 * 2),
        (CollectiveType::AllGather, AluOp::Bypass, 8 * 2, 4 * 8 * 2),
        (
            CollectiveType::AllToAll,
            AluOp::Bypass,
            4 * 8 * 2,
            4 * 8 * 2,
        ),
    ] {
        c.tensors = tensors(&[(3, inb), (4, outb)]);
        let w = Instr::TriggerCollective(c8(ct, op, Dtype::Bf16, 8));
        let r = CollectiveRequest::from_instr(&w, &c).unwrap();
        assert_eq!(r.count, 8);
        assert_eq!((r.input_elems() * 2, r.output_elems() * 2), (inb, outb));
        c.tensors = tensors(&[(3, inb - 2), (4, outb)]);
        assert!(err(w, &c).contains("input tensor 3 has"), "{ct}");
    }
    // Offsets count too, and overflow is an error, not a wrap.
    let mut w = c8(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16, 8);
    w.dst_offset_elems = 1;
    c.tensors = tensors(&[(3, 16), (4, 16)]);
    let m = err(Instr::TriggerCollective(w), &c);
    assert!(m.contains(
        "output tensor 4 has 8 BFLOAT16 elements (16 bytes); the op needs 8 from element offset 1"
    ));
    let mut w = c8(
        CollectiveType::AllGather,
        AluOp::Bypass,
        Dtype::Bf16,
        u64::MAX / 2,
    );
    w.output_tensor_id = 3;
    let m = err(Instr::TriggerCollective(w), &ctx());
    assert!(m.contains("overflows u64"), "{m}");
    c.tensors = tensors(&[(3, 16)]);
    let m = err(
        Instr::TriggerCollective(c8(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16, 8)),
        &c,
    );
    assert!(m.contains("tensor id 4 names no tensor of the NEFF"), "{m}");
}

#[test]
fn in_place_and_overlap() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut w = c8(CollectiveType::AllReduce, AluOp::Add, Dtype::Fp32, 16);
    w.output_tensor_id = 3;
    assert!(lower(Instr::TriggerCollective(w)).unwrap().in_place);
    w.dst_offset_elems = 16;
    assert!(!lower(Instr::TriggerCollective(w)).unwrap().in_place);
    w.dst_offset_elems = 8;
    let m = err(Instr::TriggerCollective(w), &ctx());
    assert!(
        m.contains("input [0, 16) and output [8, 24) of tensor 3 overlap"),
        "{m}"
    );
    // 0xD9: the same variable at the same offset.
    assert!(lower(Instr::Collective2(ar2(5, 5))).unwrap().in_place);
    assert!(!lower(Instr::Collective2(ar2(5, 6))).unwrap().in_place);
    let mut p = ar2(5, 5);
    p.ext.dst.start = PseudoAddr8::var(5, 2).unwrap();
    let m = err(Instr::Collective2(p), &ctx());
    assert!(
        m.contains("input [0, 64) and output [2, 66) of Var(5) overlap"),
        "{m}"
    );
    // A negative stride walks below its start: src0 from byte 62 backwards covers [0, 64).
    let mut p = ar2(5, 5);
    p.trigger.src0.start = PseudoAddr8::var(5, 62).unwrap();
    p.trigger.src0.step_elem = [-1, 0];
    let m = err(Instr::Collective2(p), &ctx());
    assert!(
        m.contains("input [0, 64) and output [0, 64) of Var(5) overlap"),
        "{m}"
    );
    let mut w = c8(CollectiveType::AllReduce, AluOp::Add, Dtype::Fp32, 0);
    w.src_offset_elems = u64::MAX / 2;
    let m = err(Instr::TriggerCollective(w), &ctx());
    assert!(
        m.contains("src element offset 9223372036854775807 x 4 bytes overflows u64"),
        "{m}"
    );
}

/// docs/contract/lowering.md §2.1: ctype → op for every ctype; explicit PERMUTE_REDUCE rejected.
#[test]
fn golden_ctype_table() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    use CollectiveType as C;
    let want = [
        (C::AllReduce, Some(CollectiveOp::AllReduce), 1),
        (C::ReduceScatter, Some(CollectiveOp::ReduceScatter), 4),
        (C::AllGather, Some(CollectiveOp::AllGather), 0),
        (C::AllToAll, Some(CollectiveOp::AllToAll), 7),
        (C::Permute, Some(CollectiveOp::Permute), 8),
        (C::PermuteReduce, None, 9),
        (C::PermuteImplicit, Some(CollectiveOp::PermuteImplicit), 10),
        (
            C::PermuteReduceImplicit,
            Some(CollectiveOp::PermuteReduceImplicit),
            11,
        ),
        (C::AllToAllV, Some(CollectiveOp::AllToAllV), 12),
    ];
    assert_eq!(want.len(), C::ALL.len());
    for (ct, op, enc) in want {
        match op {
            Some(op) => {
                let got = CollectiveOp::from_ctype(ct).unwrap();
                assert_eq!(got, op);
                assert_eq!(got.enc_op().unwrap().as_u8(), enc);
                assert_eq!(ct.enc_op().as_u8(), enc);
            }
            None => {
                let e = CollectiveOp::from_ctype(ct).unwrap_err();
                assert!(e.message().contains("PERMUTE_REDUCE (6) is not supported"));
                assert!(e.message().contains("rule 12"));
            }
        }
    }
    assert_eq!(CollectiveOp::Send.enc_op().unwrap().as_u8(), 5);
    assert_eq!(CollectiveOp::Recv.enc_op().unwrap().as_u8(), 6);
    assert_eq!(CollectiveOp::Barrier.enc_op(), None);
    // Through a word: rule 12 from validation names the byte.
    let m = err(
        Instr::TriggerCollective(c8(
            CollectiveType::PermuteReduce,
            AluOp::Add,
            Dtype::Bf16,
            8,
        )),
        &ctx(),
    );
    assert!(
        m.contains("field ctype at byte 32") && m.contains("rule 12"),
        "{m}"
    );
}

/// docs/contract/lowering.md §2.11: ADD/MAX/MIN → CCE 0/2/3; the rest rejected with the reason.
#[test]
fn golden_alu_table() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    for alu in AluOp::ALL {
        let r = ReduceOp::from_alu(*alu);
        match alu {
            AluOp::Add | AluOp::Max | AluOp::Min => {
                let op = r.unwrap();
                assert_eq!(op.cce_code(), alu.cce_op().unwrap().as_u8());
            }
            _ => {
                let m = r.unwrap_err().message().to_string();
                assert!(
                    m.starts_with(&format!("op (ALU_OP) = {} ", alu.name())),
                    "{m}"
                );
                let why = match alu {
                    AluOp::Mult => "scaled accumulate (acc += scale*src), not a product",
                    AluOp::Subtract | AluOp::Divide => "not associative",
                    AluOp::Bypass => "BYPASS is the copy op",
                    _ => "compiler converts integer reductions to FP32",
                };
                assert!(m.contains(why), "{m}");
            }
        }
    }
    assert_eq!(
        [ReduceOp::Add, ReduceOp::Max, ReduceOp::Min].map(ReduceOp::cce_code),
        [0, 2, 3]
    );
    // Copy ops ignore the op byte.
    let r = lower(Instr::TriggerCollective(c8(
        CollectiveType::AllGather,
        AluOp::Mult,
        Dtype::Int32,
        8,
    )))
    .unwrap();
    assert_eq!((r.reduce, r.dtype), (None, Dtype::Int32));
}

#[test]
fn rejections_through_words() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let c = ctx();
    let w = |ct, op, d| Instr::TriggerCollective(c8(ct, op, d, 8));
    let m = err(w(CollectiveType::AllReduce, AluOp::Mult, Dtype::Bf16), &c);
    assert!(
        m.contains("MULT is not supported") && m.contains("rule 6"),
        "{m}"
    );
    let m = err(
        w(CollectiveType::ReduceScatter, AluOp::Add, Dtype::Int32),
        &c,
    );
    assert!(
        m.contains("converts integer reductions to FP32") && m.contains("rule 10"),
        "{m}"
    );
    let m = err(w(CollectiveType::AllReduce, AluOp::Add, Dtype::Fp32r), &c);
    assert!(m.contains("FP32R is an accumulation type"), "{m}");
    let mut c2s = ctx();
    c2s.collective_streams = Some(2);
    let m = err(w(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16), &c2s);
    assert!(
        m.contains("only allowed on a single stream") && m.contains("rule 2"),
        "{m}"
    );
    let mut wg = c8(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16, 8);
    wg.group_id = 7;
    let m = err(Instr::TriggerCollective(wg), &c);
    assert_eq!(
        m,
        "opcode 0xC8: group_id 7 names no replica group (the NEFF defines groups [0, 1])"
    );
    let other = InstrContext::new(99, c.groups.clone());
    let m = err(
        w(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16),
        &other,
    );
    assert_eq!(
        m,
        "opcode 0xC8: replica group 0 = [10, 11, 12, 13] does not contain this rank's device id 99"
    );
    let mut dup = ctx();
    dup.groups.insert(0, vec![12, 12]);
    let m = err(w(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16), &dup);
    assert!(m.contains("lists device 12 twice (ranks 0 and 1)"), "{m}");
    let mut bad = c8(CollectiveType::AllReduce, AluOp::Add, Dtype::Bf16, 8);
    bad.common.events.update_mode = UpdateMode::SemIncRead;
    let m = err(Instr::TriggerCollective(bad), &c);
    assert!(
        m.contains("field update_mode at byte 6") && m.contains("rule 1"),
        "{m}"
    );
    let m = err(
        Instr::Other {
            opcode: 0x01,
            raw: [1; 64],
        },
        &c,
    );
    assert!(m.contains("opcode 0x01 is not a collective trigger"), "{m}");
}

#[test]
fn explicit_permute_pairs() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let w = Instr::TriggerCollective(c8(CollectiveType::Permute, AluOp::Bypass, Dtype::Bf16, 8));
    let m = err(w.clone(), &ctx());
    assert!(m.contains("explicit PERMUTE on group 0 needs the module's source-target pairs"));
    let mut c = ctx();
    c.permute_pairs
        .insert(0, vec![(0, 1), (1, 2), (2, 3), (3, 0)]);
    let r = CollectiveRequest::from_instr(&w, &c).unwrap();
    assert_eq!(r.pairs, [(0, 1), (1, 2), (2, 3), (3, 0)]);
    c.permute_pairs.insert(0, vec![(0, 4)]);
    assert!(
        err(w.clone(), &c).contains("permute pair (0 -> 4) of group 0 names a rank outside 0..4")
    );
    c.permute_pairs.insert(0, vec![(0, 1), (2, 1)]);
    assert!(err(w, &c).contains("each rank may send once and receive once"));
}

/// 0xD9: element counts are num_elem[0]·num_elem[1] and must agree with the op.
#[test]
fn collective2_counts_and_fields() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut p = c2(
        CollectiveType::AllGather,
        AluOp::Bypass,
        Tensor2d {
            start: PseudoAddr8::var(1, 0).unwrap(),
            step_elem: [1, 8],
            num_elem: [8, 2],
        },
        var(2, 64),
    );
    p.ext.stream_id = 2;
    p.ext.dma_configs = DmaConfigs { raw: 3 };
    p.ext.channel_id = 1;
    p.ext.cc_buf_start_addr = Addr4::sbuf(0x100).unwrap();
    p.ext.cc_buf_size = 4096;
    p.ext.cross_sb_out = Flag::On;
    let r = lower(Instr::Collective2(p)).unwrap();
    assert_eq!(
        (r.op, r.count, r.output_elems()),
        (CollectiveOp::AllGather, 16, 64)
    );
    assert_eq!((r.stream, r.priority, r.cc_dim, r.channel), (2, 3, 0, None));
    assert_eq!(
        r.cc_buf,
        Some(CcBuf {
            start_addr: 0x100,
            size: 4096
        })
    );
    assert!(r.cross_sb_out);
    assert_eq!(r.operands.src0.unwrap().shape.unwrap().num_elem, [8, 2]);
    assert_eq!(r.chain, ChainInfo::default());
    assert_eq!(r.io_form, IoForm::Single);
    let mut v2 = ctx();
    v2.arch = Some(Arch::V2);
    assert_eq!(
        CollectiveRequest::from_instr(&Instr::Collective2(p), &v2)
            .unwrap()
            .priority,
        0
    );

    p.ext.dst = var(2, 63);
    let m = err(Instr::Collective2(p), &ctx());
    assert!(
        m.contains("ALL_GATHER: src0 has 16 elements and dst 63")
            && m.contains("dst = src0 x rank_n"),
        "{m}"
    );
    let rs = c2(
        CollectiveType::ReduceScatter,
        AluOp::Min,
        var(1, 64),
        var(2, 16),
    );
    let r = lower(Instr::Collective2(rs)).unwrap();
    assert_eq!((r.count, r.reduce), (16, Some(ReduceOp::Min)));
    let a2a = c2(
        CollectiveType::AllToAll,
        AluOp::Bypass,
        var(1, 12),
        var(2, 12),
    );
    assert_eq!(lower(Instr::Collective2(a2a)).unwrap().count, 3);
    let a2a = c2(
        CollectiveType::AllToAll,
        AluOp::Bypass,
        var(1, 10),
        var(2, 10),
    );
    assert!(err(Instr::Collective2(a2a), &ctx()).contains("a multiple of rank_n"));
    let mut pm = c2(
        CollectiveType::PermuteImplicit,
        AluOp::Bypass,
        var(1, 8),
        var(2, 8),
    );
    pm.ext.channel_id = 3;
    assert_eq!(lower(Instr::Collective2(pm)).unwrap().channel, Some(3));
    let mut pr = c2(
        CollectiveType::PermuteReduceImplicit,
        AluOp::Add,
        var(1, 8),
        var(2, 8),
    );
    pr.trigger.src1 = var(3, 8);
    let r = lower(Instr::Collective2(pr)).unwrap();
    assert_eq!(r.operands.src1.unwrap().tensor, TensorName::Var(3));
    pr.trigger.src1 = var(3, 4);
    assert!(err(Instr::Collective2(pr), &ctx()).contains("src1 has 4 elements but src0 has 8"));
}

#[test]
fn collective2_operands_fit_their_variables() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut c = ctx();
    let info = |bytes| TensorInfo {
        bytes,
        placement: Some(Placement::Hbm),
    };
    c.vars = Some(BTreeMap::from([(1, info(64)), (2, info(63))]));
    let m = err(Instr::Collective2(ar2(1, 2)), &c);
    assert_eq!(
        m,
        "opcode 0xD9: dst walks bytes [0, 64) of variable 2, which has 63 bytes (num_elem [32, 1], \
         step_elem [1, 0])"
    );
    c.vars = Some(BTreeMap::from([(1, info(64)), (2, info(64))]));
    assert!(CollectiveRequest::from_instr(&Instr::Collective2(ar2(1, 2)), &c).is_ok());
    let mut p = ar2(1, 2);
    p.trigger.src0.step_elem = [-1, 0];
    let m = err(Instr::Collective2(p), &c);
    assert!(m.contains("src0 walks bytes [-62, 2) of variable 1"), "{m}");
    // SBUF placement reaches rule 7: all-to-all is HBM only.
    c.vars = Some(BTreeMap::from([
        (
            1,
            TensorInfo {
                bytes: 64,
                placement: Some(Placement::Sbuf),
            },
        ),
        (2, info(64)),
    ]));
    let a2a = c2(
        CollectiveType::AllToAll,
        AluOp::Bypass,
        var(1, 32),
        var(2, 32),
    );
    let m = err(Instr::Collective2(a2a), &c);
    assert!(m.contains("rule 7"), "{m}");
}

/// docs/contract/isa.md §9 rule 7: cc_dim must suit the op (reduce-scatter: cc_dim 0 only); cc_dim
/// passes through.
#[test]
fn cc_dim_against_the_op() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut p = c2(
        CollectiveType::ReduceScatter,
        AluOp::Add,
        var(1, 64),
        var(2, 16),
    );
    p.trigger.cc_dim = CcDim::Dim1;
    let m = err(Instr::Collective2(p), &ctx());
    assert!(
        m.contains("field cc_dim at byte 15") && m.contains("rule 7"),
        "{m}"
    );
    let mut g = c2(
        CollectiveType::AllGather,
        AluOp::Bypass,
        var(1, 16),
        var(2, 64),
    );
    g.trigger.cc_dim = CcDim::Dim1;
    assert_eq!(lower(Instr::Collective2(g)).unwrap().cc_dim, 1);
}
