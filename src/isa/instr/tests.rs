use super::*;
use crate::isa::enums::{AluOp, CollectiveType, Dtype};
use proptest::prelude::*;

/// docs/contract/isa.md §4 worked example: an all-reduce of 32 FP32 elements.
/// `c8 10 00 00 | 04 0a 13 16 | 00 00 00 00 | 04 0a 00 00 | 03 00 00 00 | 04 00 00 00 |
/// 20 00.. | ctype 01 @32`.
#[test]
fn golden_c8_worked_example_lowering_1_4() {
    let mut b = [0u8; 64];
    b[..24].copy_from_slice(&[
        0xc8, 0x10, 0x00, 0x00, 0x04, 0x0a, 0x13, 0x16, 0x00, 0x00, 0x00, 0x00, 0x04, 0x0a, 0x00,
        0x00, 0x03, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00,
    ]);
    b[24] = 0x20;
    b[32] = 0x01;
    let Instr::TriggerCollective(w) = decode(&b).unwrap() else {
        panic!("not a 0xC8")
    };
    // wait SEM_GT_IMM on sem 10 with value 0; update SEM_INC_COMPLETE on sem 22.
    assert_eq!(w.common.inst_word_len, 0x10);
    assert_eq!(w.common.events.wait_mode, WaitMode::SemGtImm);
    assert_eq!(w.common.events.wait_idx, 10);
    assert_eq!(w.common.events.semaphore_value, 0);
    assert_eq!(w.common.events.update_mode, UpdateMode::SemIncComplete);
    assert_eq!(w.common.events.update_idx, 22);
    // op ADD, dtype FP32, group 0, input tensor 3, output tensor 4, n = 32, ctype ALL_REDUCE.
    assert_eq!(w.op, AluOp::Add);
    assert_eq!(w.dtype, Dtype::Fp32);
    assert_eq!(w.group_id, 0);
    assert_eq!(w.input_tensor_id, 3);
    assert_eq!(w.output_tensor_id, 4);
    assert_eq!(w.num_elements, 32);
    assert_eq!(w.ctype, CollectiveType::AllReduce);
    assert_eq!(w.src_offset_elems, 0);
    assert_eq!(w.dst_offset_elems, 0);
    assert_eq!(&*encode(&Instr::TriggerCollective(w)), &b[..]);
}

#[test]
fn short_slices_are_errors() {
    for n in 0..64 {
        let v = vec![0xC8u8; n];
        let e = decode(&v).unwrap_err();
        assert_eq!((e.field, e.offset, e.value), ("word", n, n as u64));
        assert_eq!(e.rule, rule::FRAMING);
    }
}

#[test]
fn unlisted_enum_codes_name_the_field() {
    let mut b = [0u8; 64];
    b[0] = 0xC7;
    b[6] = 0x06; // no source names 0x06
    let e = decode(&b).unwrap_err();
    assert_eq!(
        (e.opcode, e.field, e.offset, e.value),
        (0xC7, "update_mode", 6, 6)
    );
    assert_eq!(e.rule, rule::EVENTS);
    b[6] = 0x13;
    b[4] = 0x86;
    let e = decode(&b).unwrap_err();
    assert_eq!((e.field, e.offset, e.value), ("wait_mode", 4, 0x86));
}

#[test]
fn other_and_dma_ext_are_kept_raw() {
    let mut b = [0x5Au8; 64];
    b[0] = 0x01;
    let i = decode(&b).unwrap();
    assert_eq!(i.opcode(), 0x01);
    assert!(matches!(i, Instr::Other { opcode: 0x01, .. }));
    assert_eq!(&*encode(&i), &b[..]);
    b[0] = 0xDA;
    let i = decode(&b).unwrap();
    assert!(matches!(i, Instr::DmaExt { .. }));
    assert!(!i.is_collective_trigger() && i.common().is_none());
    assert_eq!(&*i.encode(), &b[..]);
}

proptest! {
    /// Decode never panics, on any length; whatever decodes re-encodes to the same bytes.
    #[test]
    fn decode_total_and_reencodes(
        v in prop::collection::vec(any::<u8>(), 0..200),
        op in prop::sample::select(vec![0xC7u8, 0xC8, 0xCB, 0xD9, 0xDA, 0xDB, 0xBF, 0x00]),
        force in any::<bool>(),
    ) {
        let mut v = v;
        if force && !v.is_empty() {
            v[0] = op;
            if op == 0xD9 && v.len() > 64 { v[64] = 0xDA; }
        }
        if let Ok(i) = decode(&v) {
            prop_assert_eq!(&*encode(&i), &v[..i.len()]);
        }
    }

    #[test]
    fn decode_any_64_and_128(w in any::<[u8; 64]>(), x in any::<[u8; 64]>()) {
        let _ = decode(&w);
        let mut p = [0u8; 128];
        p[..64].copy_from_slice(&w);
        p[64..].copy_from_slice(&x);
        let _ = decode(&p);
        p[0] = 0xD9;
        p[64] = 0xDA;
        if let Ok(i) = decode(&p) {
            prop_assert_eq!(&*encode(&i), &p[..]);
        }
    }
}
