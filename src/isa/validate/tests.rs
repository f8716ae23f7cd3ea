//! One test per rule of docs/contract/isa.md §9: a word that breaks it, and the exact error fields
//! (opcode, field, byte offset, value, rule). Words are built valid, broken in one field, then
//! encoded and run through `decode` + `validate`, as the loader does.

use super::*;
use crate::isa::enums::{CcDim, Flag, InstrChaining};
use crate::isa::instr::decode;
use crate::isa::instr::other::Sb2sbCollective;
use crate::isa::instr::trigger::DmaConfigs;
use crate::isa::markers::LncSizeFmt;
use crate::isa::operand::Tensor2d;
use crate::isa::operand::{Addr4, PseudoAddr8};
use crate::isa::stream::decode_stream;
use crate::isa::testutil::{c7, c8, collective2, sb2sb, var_tensor};

/// decode + validate, as the loader does.
fn check(bytes: &[u8], ctx: &ValidationContext) -> IsaResult<()> {
    validate(&decode(bytes)?, ctx)
}

fn fields(e: &IsaError) -> (u8, &'static str, usize, u64, &'static str) {
    (e.opcode, e.field, e.offset, e.value, e.rule)
}

fn ctx() -> ValidationContext {
    ValidationContext::default()
}

fn c2(f: impl FnOnce(&mut Collective2)) -> Vec<u8> {
    let mut w = collective2();
    f(&mut w);
    w.encode().to_vec()
}

#[test]
fn rule_1_update_mode() {
    let mut w = c8();
    w.common.events.update_mode = UpdateMode::SemIncRead;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "update_mode", 6, 0x03, rule::RULE_1));
    assert_eq!(
        e.to_string(),
        "opcode 0xC8: field update_mode at byte 6 = 0x03: collective pseudo-ops must use update \
         mode SEM_INC_COMPLETE (0x13) (docs/contract/isa.md §9 rule 1)"
    );
    let b = c2(|w| w.trigger.common.events.update_mode = UpdateMode::None);
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "update_mode", 6, 0x00, rule::RULE_1));
    // 0xCB is lowered into a cc-op too; 0xDB and 0xBF are not held to rule 1.
    let mut b = [0u8; 64];
    b[0] = 0xCB;
    b[6] = 0x19;
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xCB, "update_mode", 6, 0x19, rule::RULE_1));
    b[0] = 0xDB;
    assert_eq!(check(&b, &ctx()), Ok(()));
}

#[test]
fn rule_2_single_stream() {
    let c = ValidationContext {
        collective_streams: Some(2),
        ..ctx()
    };
    let e = check(&c8().encode(), &c).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "opcode", 0, 0xC8, rule::RULE_2));
    let e = check(&c7().encode(), &c).unwrap_err();
    assert_eq!(fields(&e), (0xC7, "opcode", 0, 0xC7, rule::RULE_2));
    // 0xD9 is the multi-stream form.
    assert_eq!(check(&collective2().encode(), &c), Ok(()));
    let one = ValidationContext {
        collective_streams: Some(1),
        ..ctx()
    };
    assert_eq!(check(&c8().encode(), &one), Ok(()));
}

#[test]
fn rule_3_d9_pairing() {
    let mut b = collective2().encode();
    b[64] = 0xC8;
    let e = decode(&b).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "next_opcode", 64, 0xC8, rule::RULE_3));
    let e = decode(&b[..64]).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "next_opcode", 64, 64, rule::RULE_3));
    b[64] = 0xDA;
    let e = decode(&b[..100]).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "next_opcode", 64, 100, rule::RULE_3));
    assert_eq!(rule_03_d9_pairing(&b), Ok(()));
}

/// docs/contract/isa.md §6: a 0xDA that is not right after a 0xD9 is a PSEUDO_DMA_EXT.
#[test]
fn lone_da_is_dma_ext() {
    let b = collective2().encode();
    let i = decode(&b[64..]).unwrap();
    assert!(matches!(i, Instr::DmaExt { .. }));
    assert_eq!(validate(&i, &ctx()), Ok(()));
}

#[test]
fn rule_4_address_markers() {
    let imm = PseudoAddr8::imm(0x1000).unwrap();
    let b = c2(|w| w.trigger.src0.start = imm);
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(
        fields(&e),
        (0xD9, "src0.start_addr", 16, 0x00, rule::RULE_4)
    );
    // VAR_ID plus another modifier is not the required form.
    let b = c2(|w| w.ext.dst.start.raw |= 0x08 << 56);
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "dst.start_addr", 8, 0x18, rule::RULE_4));
    // src1 is checked when the op uses it.
    let b = c2(|w| {
        w.trigger.ctype = CollectiveType::PermuteReduceImplicit;
        w.trigger.src1 = Tensor2d::contiguous(PseudoAddr8 { raw: 0x40 << 56 }, 4);
    });
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(
        fields(&e),
        (0xD9, "src1.start_addr", 40, 0x40, rule::RULE_4)
    );
    // cc_buf_start_addr: bit 25 set (not SBUF), then a bit in 26-31.
    let b = c2(|w| w.ext.cc_buf_start_addr = Addr4 { raw: 1 << 25 });
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(
        fields(&e),
        (0xDA, "cc_buf_start_addr", 32, 1 << 25, rule::RULE_4)
    );
    let b = c2(|w| w.ext.cc_buf_start_addr = Addr4 { raw: 0x0400_0010 });
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(e.value, 0x0400_0010);
    let b = c2(|w| w.ext.cc_buf_start_addr = Addr4::sbuf(0x10).unwrap());
    assert_eq!(check(&b, &ctx()), Ok(()));
}

#[test]
fn rule_5_dma_configs() {
    let b = c2(|w| w.ext.dma_configs = DmaConfigs { raw: 5 });
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "dma_configs", 41, 5, rule::RULE_5));
    let b = c2(|w| w.ext.dma_configs = DmaConfigs { raw: 0x0C });
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "dma_configs", 41, 0x0C, rule::RULE_5));
    let b = c2(|w| w.ext.dma_configs = DmaConfigs { raw: 4 });
    assert_eq!(check(&b, &ctx()), Ok(()));
}

#[test]
fn rule_6_reduce_op() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut w = c8();
    w.op = AluOp::Mult;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "op", 12, 0x06, rule::RULE_6));
    assert!(
        e.reason.contains("product") && e.reason.contains("docs/contract/lowering.md §2.11"),
        "{e}"
    );
    w.op = AluOp::AddInt;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "op", 12, 0xC4, rule::RULE_6));
    assert!(
        e.reason.contains("converts integer reductions to FP32"),
        "{e}"
    );
    let mut w = c7();
    w.op = AluOp::Subtract;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC7, "op", 12, 0x05, rule::RULE_6));
    // Copy ops ignore the op byte.
    let mut w = c8();
    w.ctype = CollectiveType::AllGather;
    w.op = AluOp::Mult;
    assert_eq!(check(&w.encode(), &ctx()), Ok(()));
    for op in [AluOp::Add, AluOp::Max, AluOp::Min] {
        let mut w = c8();
        w.op = op;
        assert_eq!(check(&w.encode(), &ctx()), Ok(()));
    }
}

#[test]
fn rule_7_cc_dim() {
    // Only 0 or 1: decode rejects 2 ("Invalid cc_dim").
    let mut b = collective2().encode();
    b[15] = 2;
    let e = decode(&b).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "cc_dim", 15, 2, rule::RULE_7));
    // reduce-scatter: cc_dim 0 only.
    let rs = |w: &mut Collective2| {
        w.trigger.ctype = CollectiveType::ReduceScatter;
        w.trigger.cc_dim = CcDim::Dim1;
    };
    let e = check(&c2(rs), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "cc_dim", 15, 1, rule::RULE_7));
    // all-gather: cc_dim 1 only in SBUF.
    let ag = c2(|w| {
        w.trigger.ctype = CollectiveType::AllGather;
        w.trigger.cc_dim = CcDim::Dim1;
    });
    let hbm = ValidationContext {
        location: Some(Location::Hbm),
        ..ctx()
    };
    let sbuf = ValidationContext {
        location: Some(Location::Sbuf),
        ..ctx()
    };
    let e = check(&ag, &hbm).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "cc_dim", 15, 1, rule::RULE_7));
    assert_eq!(check(&ag, &sbuf), Ok(()));
    // all-to-all and permutes: HBM only.
    let a2a = c2(|w| w.trigger.ctype = CollectiveType::AllToAll);
    let e = check(&a2a, &sbuf).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "ctype", 14, 4, rule::RULE_7));
    let perm = c2(|w| w.trigger.ctype = CollectiveType::PermuteImplicit);
    let e = check(&perm, &sbuf).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "ctype", 14, 7, rule::RULE_7));
    assert_eq!(check(&perm, &hbm), Ok(()));
    // Two-dimensional input needs mesh.
    let two_d = c2(|w| {
        w.trigger.src0.num_elem = [4, 8];
        w.trigger.src0.step_elem = [1, 16];
    });
    let no_mesh = ValidationContext {
        mesh_available: Some(false),
        ..ctx()
    };
    let e = check(&two_d, &no_mesh).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "src0.num_elem[1]", 36, 8, rule::RULE_7));
    // SBUF cc_dim 0 shapes: RS input = output × rank_n along the free dimension.
    let sbuf4 = ValidationContext {
        rank_n: Some(4),
        ..sbuf.clone()
    };
    let rs_bad = c2(|w| {
        w.trigger.ctype = CollectiveType::ReduceScatter;
        w.trigger.src0 = var_tensor(1, 32);
        w.ext.dst = var_tensor(2, 16);
    });
    let e = check(&rs_bad, &sbuf4).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "src0.num_elem[0]", 32, 32, rule::RULE_7));
    let ag_bad = c2(|w| {
        w.trigger.ctype = CollectiveType::AllGather;
        w.trigger.src0 = var_tensor(1, 8);
        w.ext.dst = var_tensor(2, 16);
    });
    let e = check(&ag_bad, &sbuf4).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "dst.num_elem[0]", 24, 16, rule::RULE_7));
    let ag_ok = c2(|w| {
        w.trigger.ctype = CollectiveType::AllGather;
        w.trigger.src0 = var_tensor(1, 8);
        w.ext.dst = var_tensor(2, 32);
    });
    assert_eq!(check(&ag_ok, &sbuf4), Ok(()));
}

#[test]
fn rule_8_stream_channel_group() {
    let e = check(&c2(|w| w.ext.stream_id = 4), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "stream_id", 6, 4, rule::RULE_8));
    let e = check(&c2(|w| w.ext.channel_id = 32), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "channel_id", 4, 32, rule::RULE_8));
    let c = ValidationContext {
        metaring_channel_n: Some(2),
        ..ctx()
    };
    let e = check(&c2(|w| w.ext.channel_id = 2), &c).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "channel_id", 4, 2, rule::RULE_8));
    // One-to-one stream <-> group across a stream.
    let mut s = c2(|w| {
        w.ext.stream_id = 1;
        w.ext.group_id = 7;
    });
    s.extend(c2(|w| {
        w.ext.stream_id = 1;
        w.ext.group_id = 8;
    }));
    let d = decode_stream(&s).unwrap();
    let e = validate_stream(&d, &mut ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "stream_id", 6, 1, rule::RULE_8));
    assert_eq!(e.word_at, Some(128));
    let mut s = c2(|w| w.ext.group_id = 7);
    s.extend(c2(|w| {
        w.ext.stream_id = 2;
        w.ext.group_id = 7;
    }));
    let e = validate_stream(&decode_stream(&s).unwrap(), &mut ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "group_id", 2, 7, rule::RULE_8));
    // 0xDB carries the same ids at 12/14/20.
    let mut b = [0u8; 64];
    b[0] = 0xDB;
    b[6] = 0x13;
    b[20] = 9;
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDB, "stream_id", 20, 9, rule::RULE_8));
}

#[test]
fn rule_9_all_to_all_v() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let a2av = |bitmap: u8, n: u32| {
        c2(move |w| {
            w.trigger.ctype = CollectiveType::AllToAllV;
            w.trigger.op = AluOp::Bypass;
            w.trigger.src1 = var_tensor(3, n);
            w.ext.src1_bitmap = bitmap;
        })
    };
    let e = check(&a2av(0b0001, 16), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xDA, "src1_bitmap", 42, 1, rule::RULE_9));
    let c = ValidationContext {
        rank_n: Some(4),
        ..ctx()
    };
    let e = check(&a2av(0b0011, 15), &c).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "src1.num_elem", 56, 15, rule::RULE_9));
    assert!(e
        .reason
        .starts_with("src1 tensor has wrong num_elem and/or step_elem"));
    assert_eq!(check(&a2av(0b0011, 16), &c), Ok(()));
    assert_eq!(check(&a2av(0b1111, 16), &c), Ok(()));
    let mut w = c8();
    w.ctype = CollectiveType::AllToAllV;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "ctype", 32, 9, rule::RULE_9));
}

#[test]
fn rule_10_dtype() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let mut b = c8().encode();
    b[13] = 16; // FP4 exists only on newer headers
    let e = decode(&b).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "dtype", 13, 16, rule::RULE_10));
    let mut w = c8();
    w.dtype = Dtype::Invalid;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "dtype", 13, 0, rule::RULE_10));
    w.dtype = Dtype::Int32;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "dtype", 13, 8, rule::RULE_10));
    assert!(
        e.reason.contains("converts integer reductions to FP32"),
        "{e}"
    );
    w.dtype = Dtype::Fp32r;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "dtype", 13, 11, rule::RULE_10));
    // Copies of any dtype are fine; every CCE dtype reduces.
    w.ctype = CollectiveType::AllGather;
    w.dtype = Dtype::Int64;
    assert_eq!(check(&w.encode(), &ctx()), Ok(()));
    for d in crate::dtype::CCE_IO_DTYPES {
        let mut w = c8();
        w.dtype = d;
        assert_eq!(check(&w.encode(), &ctx()), Ok(()));
    }
}

#[test]
fn rule_11_s3d3() {
    let run = |f: &dyn Fn(&mut Sb2sbCollective), c: &ValidationContext| {
        let mut w = sb2sb();
        f(&mut w);
        check(&w.encode(), c).unwrap_err()
    };
    let e = run(&|w| w.out_dtype = Dtype::Fp16, &ctx());
    assert_eq!(fields(&e), (0xBF, "out_dtype", 13, 7, rule::RULE_11));
    let e = run(&|w| w.src.num = [16, 16, 2], &ctx());
    assert_eq!(fields(&e), (0xBF, "src.num", 26, 512, rule::RULE_11));
    let e = run(&|w| w.dst.num = [257, 1, 1], &ctx());
    assert_eq!(fields(&e), (0xBF, "dst.num", 58, 257, rule::RULE_11));
    let e = run(&|w| w.num_active_channels = 0, &ctx());
    assert_eq!(
        fields(&e),
        (0xBF, "num_active_channels", 33, 0, rule::RULE_11)
    );
    let e = run(&|w| w.num_active_channels = 129, &ctx());
    assert_eq!(e.value, 129);
    let e = run(&|w| w.lnc_size_fmt = LncSizeFmt::Lnc4, &ctx());
    assert_eq!(fields(&e), (0xBF, "lnc_size_fmt", 32, 2, rule::RULE_11));
    let e = run(
        &|w| {
            w.dst.addr = Addr4 {
                raw: (1 << 25) | 0x10,
            }
        },
        &ctx(),
    );
    assert_eq!(
        fields(&e),
        (0xBF, "dst.addr", 48, (1 << 25) | 0x10, rule::RULE_11)
    );
    let e = run(&|w| w.src.addr = Addr4 { raw: 0x4000_0000 }, &ctx());
    assert_eq!(
        fields(&e),
        (0xBF, "src.addr", 16, 0x4000_0000, rule::RULE_11)
    );
    let e = run(&|w| w.reserved0[1] = 1, &ctx());
    assert_eq!(fields(&e), (0xBF, "reserved0", 15, 1, rule::RULE_11));
    let e = run(&|w| w.reserved1[3] = 0xFF, &ctx());
    assert_eq!(fields(&e), (0xBF, "reserved1", 37, 0xFF, rule::RULE_11));
    let v2 = ValidationContext {
        arch: Some(Arch::V2),
        ..ctx()
    };
    let e = run(&|_| {}, &v2);
    assert_eq!(fields(&e), (0xBF, "opcode", 0, 0xBF, rule::RULE_11));
    assert_eq!(check(&sb2sb().encode(), &ctx()), Ok(()));
}

#[test]
fn rule_12_supported_operation() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let b = c2(|w| {
        w.trigger.ctype = CollectiveType::PermuteReduce;
        w.trigger.src1 = var_tensor(3, 32);
    });
    let e = check(&b, &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xD9, "ctype", 14, 6, rule::RULE_12));
    assert!(e.reason.starts_with("not supported operation"));
    let mut w = c8();
    w.ctype = CollectiveType::PermuteReduce;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "ctype", 32, 6, rule::RULE_12));
    let no_mesh = ValidationContext {
        mesh_available: Some(false),
        ..ctx()
    };
    w.ctype = CollectiveType::AllToAll;
    w.op = AluOp::Bypass;
    let e = check(&w.encode(), &no_mesh).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "ctype", 32, 4, rule::RULE_12));
    assert!(e.reason.contains("MESH"));
    assert_eq!(check(&w.encode(), &ctx()), Ok(()));
    // The API path: BROADCAST and REDUCE exist only as host ops.
    for op in [
        EncOpType::Broadcast,
        EncOpType::Reduce,
        EncOpType::PermuteReduce,
    ] {
        let r = enc_op_unsupported(op, Some(true)).unwrap();
        assert!(r.starts_with("not supported operation"), "{r}");
    }
    assert!(enc_op_unsupported(EncOpType::AllToAllV, Some(false)).is_some());
    assert!(enc_op_unsupported(EncOpType::AllToAllV, Some(true)).is_none());
}

/// docs/contract/isa.md §4 / docs/contract/lowering.md §7 item 2: 0xC8 bytes 33–47 must be 0
/// (table-driven range).
#[test]
fn c8_reserved_bytes() {
    let mut w = c8();
    w.reserved[14] = 0xAB;
    let e = check(&w.encode(), &ctx()).unwrap_err();
    assert_eq!(fields(&e), (0xC8, "reserved", 47, 0xAB, rule::C8_RESERVED));
}

/// Every collective pseudo-op stream of the helpers validates, and the mapping is recorded.
#[test]
fn observe_records_mapping() {
    let mut s = collective2().encode().to_vec();
    s.extend(c2(|w| {
        w.ext.instr_chaining = InstrChaining::None;
        w.ext.unique_tensors = Flag::On;
    }));
    let mut c = ctx();
    validate_stream(&decode_stream(&s).unwrap(), &mut c).unwrap();
    assert_eq!(c.stream_to_group.get(&0), Some(&0));
    assert_eq!(c.group_to_stream.get(&0), Some(&0));
}
