//! Test helpers: hand-built valid words and proptest strategies that build *valid* words of
//! every kind (they decode, and pass [`validate`] with an empty context), plus the round-trip
//! properties `decode(encode(x)) == x` for each kind.

use proptest::prelude::*;

use super::enums::{
    AluOp, CcDim, CollectiveType, Dtype, Flag, InstrChaining, UpdateMode, WaitMode,
};
use super::instr::other::{CurProcessingRankId, Sb2sbCollective, SendRecv};
use super::instr::trigger::{
    Collective2, Collective2Ext, DmaConfigs, TriggerAllReduce, TriggerCollective,
    TriggerCollective2,
};
use super::instr::{decode, encode, Common, Events, Instr};
use super::layout::{da_covers, DA_TAIL_START};
use super::markers::LncSizeFmt;
use super::operand::{Addr4, PseudoAddr8, Tensor2d, Tensor3d};
use super::validate::{validate, ValidationContext};

/// A contiguous VAR_ID operand of `n` elements of variable `var`.
pub fn var_tensor(var: u16, n: u32) -> Tensor2d {
    Tensor2d::contiguous(PseudoAddr8::var(var, 0).unwrap(), n)
}

/// A valid 0xC8 all-reduce (the docs/contract/isa.md §4 example's fields).
pub fn c8() -> TriggerCollective {
    TriggerCollective {
        common: Common::default(),
        op: AluOp::Add,
        dtype: Dtype::Fp32,
        group_id: 0,
        input_tensor_id: 3,
        output_tensor_id: 4,
        num_elements: 32,
        ctype: CollectiveType::AllReduce,
        reserved: [0; 15],
        src_offset_elems: 0,
        dst_offset_elems: 0,
    }
}

/// A valid 0xC7.
pub fn c7() -> TriggerAllReduce {
    TriggerAllReduce {
        common: Common::default(),
        op: AluOp::Max,
        dtype: Dtype::Bf16,
        reserved14: [0; 2],
        input_tensor_id: 1,
        output_tensor_id: 2,
        num_elements: 64,
        reserved32: [0; 32],
    }
}

/// A valid 0xD9+0xDA all-reduce of 32 FP32 elements, standalone.
pub fn collective2() -> Collective2 {
    Collective2 {
        trigger: TriggerCollective2 {
            common: Common::default(),
            op: AluOp::Add,
            dtype: Dtype::Fp32,
            ctype: CollectiveType::AllReduce,
            cc_dim: CcDim::Dim0,
            src0: var_tensor(1, 32),
            src1: Tensor2d::default(),
        },
        ext: Collective2Ext {
            instr_chaining: InstrChaining::None,
            group_id: 0,
            channel_id: 0,
            stream_id: 0,
            dst: var_tensor(2, 32),
            cc_buf_start_addr: Addr4::default(),
            cc_buf_size: 0,
            unique_tensors: Flag::Off,
            dma_configs: DmaConfigs::default(),
            src1_bitmap: 0,
            permute_chain: 0,
            cross_sb_out: Flag::Off,
            tail_reserved: [0; 32],
        },
    }
}

/// [`collective2`] with the given chaining code.
pub fn with_chaining(c: InstrChaining) -> Collective2 {
    let mut w = collective2();
    w.ext.instr_chaining = c;
    w
}

/// A valid 0xBF of 16 BF16 elements.
pub fn sb2sb() -> Sb2sbCollective {
    let t = |off| Tensor3d {
        addr: Addr4::sbuf(off).unwrap(),
        step: [1, 16, 0],
        num: [16, 1, 1],
    };
    Sb2sbCollective {
        common: Common::default(),
        in_dtype: Dtype::Bf16,
        out_dtype: Dtype::Bf16,
        reserved0: [0; 2],
        src: t(0x100),
        lnc_size_fmt: LncSizeFmt::Lnc1,
        num_active_channels: 1,
        reserved1: [0; 14],
        dst: t(0x200),
    }
}

fn pick<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(all)
}

/// A collective's EVENTS: any wait, update SEM_INC_COMPLETE (rule 1).
fn arb_common() -> impl Strategy<Value = Common> {
    (
        any::<[u8; 3]>(),
        pick(WaitMode::ALL),
        any::<[u8; 2]>(),
        any::<u32>(),
    )
        .prop_map(|(h, wait_mode, idx, semaphore_value)| Common {
            inst_word_len: h[0],
            debug_cmd: h[1],
            debug_hint: h[2],
            events: Events {
                wait_mode,
                wait_idx: idx[0],
                update_mode: UpdateMode::SemIncComplete,
                update_idx: idx[1],
                semaphore_value,
            },
        })
}

const REDUCE_OPS: &[AluOp] = &[AluOp::Add, AluOp::Max, AluOp::Min];
const CCE_DTYPES: &[Dtype] = &crate::dtype::CCE_IO_DTYPES;

/// (ctype, op, dtype) that rules 6, 10 and 12 accept.
fn arb_kind(allow_a2av: bool) -> impl Strategy<Value = (CollectiveType, AluOp, Dtype)> {
    (
        pick(CollectiveType::ALL),
        pick(REDUCE_OPS),
        pick(CCE_DTYPES),
        pick(AluOp::ALL),
        pick(&Dtype::ALL[1..]),
    )
        .prop_filter("no rule-12 ctype", move |(c, ..)| {
            *c != CollectiveType::PermuteReduce && (allow_a2av || *c != CollectiveType::AllToAllV)
        })
        .prop_map(|(c, rop, rdt, op, dt)| {
            if c.is_reducing() {
                (c, rop, rdt)
            } else {
                (c, op, dt)
            }
        })
}

fn arb_var_tensor() -> impl Strategy<Value = Tensor2d> {
    (
        any::<u16>(),
        0u64..1 << 40,
        any::<[i32; 2]>(),
        any::<[u32; 2]>(),
    )
        .prop_map(|(v, off, step_elem, num_elem)| Tensor2d {
            start: PseudoAddr8::var(v, off).unwrap(),
            step_elem,
            num_elem,
        })
}

/// Valid 0xC7 words.
pub fn arb_c7() -> impl Strategy<Value = TriggerAllReduce> {
    (
        arb_common(),
        pick(REDUCE_OPS),
        pick(CCE_DTYPES),
        any::<[u8; 2]>(),
        any::<(u32, u32, u64)>(),
        any::<[u8; 32]>(),
    )
        .prop_map(
            |(common, op, dtype, reserved14, (i, o, n), reserved32)| TriggerAllReduce {
                common,
                op,
                dtype,
                reserved14,
                input_tensor_id: i,
                output_tensor_id: o,
                num_elements: n,
                reserved32,
            },
        )
}

/// Valid 0xC8 words.
pub fn arb_c8() -> impl Strategy<Value = TriggerCollective> {
    (
        arb_common(),
        arb_kind(false),
        any::<u16>(),
        any::<(u32, u32, u64)>(),
        any::<(u64, u64)>(),
    )
        .prop_map(
            |(common, (ctype, op, dtype), group_id, (i, o, n), (so, d))| TriggerCollective {
                common,
                op,
                dtype,
                group_id,
                input_tensor_id: i,
                output_tensor_id: o,
                num_elements: n,
                ctype,
                reserved: [0; 15],
                src_offset_elems: so,
                dst_offset_elems: d,
            },
        )
}

/// Valid 0xD9+0xDA pairs (any chaining code: chains are a stream property).
pub fn arb_collective2() -> impl Strategy<Value = Collective2> {
    let trig = (
        arb_common(),
        arb_kind(true),
        pick(CcDim::ALL),
        arb_var_tensor(),
        arb_var_tensor(),
        any::<bool>(),
    )
        .prop_map(|(common, (ctype, op, dtype), dim, src0, src1, absent)| {
            let needs_dim0 = matches!(
                ctype,
                CollectiveType::ReduceScatter
                    | CollectiveType::AllToAll
                    | CollectiveType::AllToAllV
            );
            let src1_needed = matches!(
                ctype,
                CollectiveType::AllToAllV | CollectiveType::PermuteReduceImplicit
            );
            TriggerCollective2 {
                common,
                op,
                dtype,
                ctype,
                cc_dim: if needs_dim0 { CcDim::Dim0 } else { dim },
                src0,
                src1: if absent && !src1_needed {
                    Tensor2d::default()
                } else {
                    src1
                },
            }
        });
    let ext = (
        pick(InstrChaining::ALL),
        (any::<u16>(), 0u16..32, 0u16..4),
        arb_var_tensor(),
        prop_oneof![Just(0u32), 0u32..1 << 25],
        any::<u32>(),
        (pick(Flag::ALL), pick(Flag::ALL)),
        0u8..=4,
        any::<(u8, u8)>(),
        any::<[u8; 32]>(),
    )
        .prop_map(
            |(ch, (g, c, s), dst, cc, size, (u, x), prio, (bm, pc), mut tail)| {
                for (i, b) in tail.iter_mut().enumerate() {
                    if da_covers(DA_TAIL_START + i) {
                        *b = 0;
                    }
                }
                Collective2Ext {
                    instr_chaining: ch,
                    group_id: g,
                    channel_id: c,
                    stream_id: s,
                    dst,
                    cc_buf_start_addr: Addr4 { raw: cc },
                    cc_buf_size: size,
                    unique_tensors: u,
                    dma_configs: DmaConfigs { raw: prio },
                    src1_bitmap: bm,
                    permute_chain: pc,
                    cross_sb_out: x,
                    tail_reserved: tail,
                }
            },
        );
    (trig, ext).prop_map(|(trigger, mut ext)| {
        if trigger.ctype == CollectiveType::AllToAllV {
            ext.src1_bitmap |= 0b11;
        }
        Collective2 { trigger, ext }
    })
}

/// Valid 0xCB words.
pub fn arb_send_recv() -> impl Strategy<Value = SendRecv> {
    (
        arb_common(),
        any::<(u32, u64, bool)>(),
        any::<[u8; 23]>(),
        any::<(u64, u64)>(),
    )
        .prop_map(
            |(common, (tensor_id, peer_id, is_send), reserved25, (o, s))| SendRecv {
                common,
                tensor_id,
                peer_id,
                is_send,
                reserved25,
                offset_bytes: o,
                size_bytes: s,
            },
        )
}

/// Valid 0xDB words.
pub fn arb_cur_rank() -> impl Strategy<Value = CurProcessingRankId> {
    (
        arb_common(),
        any::<(u16, u16, u16)>(),
        0u16..32,
        0u16..4,
        any::<[u8; 32]>(),
        any::<[u8; 10]>(),
    )
        .prop_map(|(common, (g, it, reg), ch, st, r1, r2)| {
            let mut reserved22 = [0u8; 42];
            reserved22[..32].copy_from_slice(&r1);
            reserved22[32..].copy_from_slice(&r2);
            CurProcessingRankId {
                common,
                group_id: g,
                channel_id: ch,
                iteration_id: it,
                dst_reg: reg,
                stream_id: st,
                reserved22,
            }
        })
}

fn arb_t3d() -> impl Strategy<Value = Tensor3d> {
    (
        0u32..1 << 25,
        any::<[i16; 3]>(),
        0u16..=16,
        0u16..=4,
        0u16..=4,
    )
        .prop_map(|(off, step, a, b, c)| Tensor3d {
            addr: Addr4 { raw: off },
            step,
            num: [a, b, c],
        })
}

/// Valid 0xBF words.
pub fn arb_sb2sb() -> impl Strategy<Value = Sb2sbCollective> {
    (
        arb_common(),
        pick(&Dtype::ALL[1..]),
        arb_t3d(),
        arb_t3d(),
        prop_oneof![Just(LncSizeFmt::Lnc1), Just(LncSizeFmt::Lnc2)],
        1u8..=128,
    )
        .prop_map(|(common, d, src, dst, lnc, ch)| Sb2sbCollective {
            common,
            in_dtype: d,
            out_dtype: d,
            reserved0: [0; 2],
            src,
            lnc_size_fmt: lnc,
            num_active_channels: ch,
            reserved1: [0; 14],
            dst,
        })
}

fn roundtrip(i: Instr) -> Result<(), TestCaseError> {
    prop_assert_eq!(validate(&i, &ValidationContext::default()), Ok(()));
    let bytes = encode(&i);
    prop_assert_eq!(bytes.len(), i.len());
    let back = decode(&bytes);
    prop_assert_eq!(back, Ok(i));
    Ok(())
}

proptest! {
    #[test]
    fn roundtrip_c7(w in arb_c7()) { roundtrip(Instr::TriggerAllReduce(w))?; }
    #[test]
    fn roundtrip_c8(w in arb_c8()) { roundtrip(Instr::TriggerCollective(w))?; }
    #[test]
    fn roundtrip_collective2(w in arb_collective2()) { roundtrip(Instr::Collective2(w))?; }
    #[test]
    fn roundtrip_send_recv(w in arb_send_recv()) { roundtrip(Instr::SendRecv(w))?; }
    #[test]
    fn roundtrip_cur_rank(w in arb_cur_rank()) { roundtrip(Instr::CurProcessingRankId(w))?; }
    #[test]
    fn roundtrip_sb2sb(w in arb_sb2sb()) { roundtrip(Instr::Sb2sb(w))?; }
    #[test]
    fn roundtrip_raw_words(mut w in any::<[u8; 64]>(), op in any::<u8>()) {
        // Untyped opcodes and lone 0xDA are kept raw.
        w[0] = if [0xC7, 0xC8, 0xCB, 0xD9, 0xDB, 0xBF].contains(&op) { 0xDA } else { op };
        let i = decode(&w).unwrap();
        prop_assert_eq!(decode(&encode(&i)), Ok(i));
    }
}

#[test]
fn hand_built_words_are_valid() {
    let ctx = ValidationContext::default();
    for i in [
        Instr::TriggerAllReduce(c7()),
        Instr::TriggerCollective(c8()),
        Instr::Collective2(collective2()),
        Instr::Sb2sb(sb2sb()),
    ] {
        assert_eq!(validate(&i, &ctx), Ok(()), "{i:?}");
        assert_eq!(decode(&encode(&i)), Ok(i));
    }
}
