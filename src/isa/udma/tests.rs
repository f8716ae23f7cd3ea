//! Tests of the UDMA descriptor codec: golden words from the spec, round trips, robustness.

use super::*;
use crate::error::ErrorKind;
use crate::isa::enums::Dtype;
use proptest::prelude::*;

/// docs/contract/device.md §1.1: the default CME meta_ctrl is 0x01080003 (class 2 at 25:23, bit 19,
/// bits 1:0 = 3).
#[test]
fn golden_default_copy_meta_ctrl() {
    assert_eq!(CopyMeta::default().encode(), META_CTRL_COPY_DEFAULT);
    assert_eq!(CopyMeta::decode(0x0108_0003).unwrap(), CopyMeta::default());
    // write_barrier is bit 26, notification bit 28 (docs/contract/device.md §1.1).
    let m = CopyMeta {
        write_barrier: true,
        notification: true,
        ..CopyMeta::default()
    };
    assert_eq!(m.encode(), 0x1508_0003);
}

/// docs/contract/device.md §2.2: ADD, bf16 out (6), accum FP32R (11), last → 0x020B6080.
#[test]
fn golden_cce_add_bf16_meta_ctrl() {
    let m = CceMeta::for_reduce(CceOp::Add, Dtype::Bf16, true);
    assert_eq!(m.encode(), 0x020B_6080);
    assert_eq!(
        CceMeta::for_reduce(CceOp::Add, Dtype::Bf16, false).encode(),
        0x020B_6000
    );
    assert_eq!(CceMeta::decode(0x020B_6080).unwrap(), m);
    // docs/contract/device.md §11.1: the decoder accepts accum = 10 (FP32) too.
    assert_eq!(CceMeta::decode(0x020A_6080).unwrap().accum, 10);
    assert!(CceMeta::decode(0x0209_6080).is_err());
}

/// docs/contract/device.md §2.2: MIN/MAX put "last" at bit 4 (and notification at bit 7).
#[test]
fn golden_cce_max_layout() {
    let m = CceMeta::for_reduce(CceOp::Max, Dtype::Fp16, true);
    assert_eq!(m.encode(), 0x020B_7012);
    let d = CceMeta::decode(0x020B_7012).unwrap();
    assert!(d.last && !d.flag);
    let d = CceMeta::decode(0x020B_7082).unwrap();
    assert!(!d.last && d.flag);
}

/// docs/contract/device.md §1.1: len_ctrl bits; LENGTH 0 means 65536.
#[test]
fn golden_len_ctrl() {
    let c = LenCtrl {
        length: 65536,
        ring_id: 1,
        first: true,
        last: true,
        ..Default::default()
    };
    assert_eq!(c.encode(), 0x0D00_0000);
    assert_eq!(LenCtrl::decode(0x0D00_0000).unwrap(), c);
    let c = LenCtrl {
        length: 16,
        ring_id: 2,
        dmb: true,
        ..Default::default()
    };
    assert_eq!(c.encode(), 0x4200_0010);
    let e = LenCtrl::decode(0x0001_0010).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(
        e.fields().field.as_deref(),
        Some("len_ctrl reserved"),
        "{e:?}"
    );
    assert_eq!(e.fields().actual.as_deref(), Some("0x1"), "{e:?}");
}

/// docs/contract/device.md §1.1: the copy meta descriptor word 0 is `(idx << 24) | 0x04800000`.
#[test]
fn golden_copy_meta_descriptor_word0() {
    let d = Descriptor::CopyMetaDesc {
        ctrl: LenCtrl {
            meta: true,
            first: true,
            ring_id: 1,
            ..Default::default()
        },
        meta: CopyMeta::default(),
        meta1: 7,
        meta2: 9,
    };
    let bytes = d.encode();
    assert_eq!(
        u32::from_le_bytes(bytes[0..4].try_into().unwrap()),
        (1 << 24) | 0x0480_0000
    );
    assert_eq!(Descriptor::decode(&bytes, Direction::M2S).unwrap(), d);
    match Descriptor::decode(&bytes, Direction::M2S).unwrap() {
        Descriptor::CopyMetaDesc { ctrl, .. } => assert_eq!(ctrl.meta_idx(), 0x05),
        _ => unreachable!(),
    }
}

/// docs/contract/device.md §2.1: a CCE compute descriptor's words.
#[test]
fn golden_cce_compute_words() {
    let d = Descriptor::Cce(CceCompute {
        ctrl: LenCtrl {
            meta: true,
            ring_id: 1,
            first: true,
            ..Default::default()
        },
        meta: CceMeta::for_reduce(CceOp::Min, Dtype::Bf16, false),
        length: 16,
        w2_hi: CceCompute::default_w2_hi(CceOp::Min),
        scale: 0,
    });
    let b = d.encode();
    let w = |i: usize| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
    assert_eq!(w(0), 0x0580_0000); // META | RING_ID 1 | FIRST
    assert_eq!(w(1), 0x020B_6003); // MIN, out bf16, accum FP32R
    assert_eq!(w(2), 0x0200_0010); // 16 bytes | MIN/MAX 0x02000000
    assert_eq!(w(3), 0);
    assert_eq!(Descriptor::decode(&b, Direction::M2S).unwrap(), d);
}

#[test]
fn decode_errors_name_field_and_bits() {
    let rx = Descriptor::RxData {
        ctrl: LenCtrl {
            length: 4,
            ring_id: 1,
            ..Default::default()
        },
        addr: 0x1000,
    };
    let mut b = rx.encode();
    b[4] = 1;
    let e = Descriptor::decode(&b, Direction::S2M).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("S2M W1"), "{e:?}");
    // A TX word with an unknown class.
    let mut b = rx.encode();
    b[4..8].copy_from_slice(&(3u32 << 23).to_le_bytes());
    let e = Descriptor::decode(&b, Direction::M2S).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(
        e.fields().field.as_deref(),
        Some("meta_ctrl SDMA class"),
        "{e:?}"
    );
    assert_eq!(e.fields().actual.as_deref(), Some("0x3"), "{e:?}");
}

/// docs/contract/device.md §1.3: the tag starts at 1 and goes +1 mod 4 at each wrap.
#[test]
fn ring_id_generation_rule() {
    assert_eq!(ring_id_at(0, 64), 1);
    assert_eq!(ring_id_at(63, 64), 1);
    assert_eq!(ring_id_at(64, 64), 2);
    assert_eq!(ring_id_at(128, 64), 3);
    assert_eq!(ring_id_at(192, 64), 0);
    assert_eq!(ring_id_at(256, 64), 1);
}

fn ctrl_strategy(meta: bool, rx: bool) -> impl Strategy<Value = LenCtrl> {
    (1u32..=65536, 0u8..4, any::<[bool; 6]>()).prop_map(move |(length, ring_id, f)| LenCtrl {
        length: if meta { 0 } else { length },
        meta,
        ring_id,
        first: f[0],
        last: f[1],
        int_en: f[2],
        sow: rx && f[3],
        dmb: f[4],
        concat: f[5],
    })
}

fn copy_meta_strategy() -> impl Strategy<Value = CopyMeta> {
    (0u8..8, any::<bool>(), 0u8..8, any::<bool>(), any::<bool>()).prop_map(|(a, c, o, w, n)| {
        CopyMeta {
            block_attr: a,
            copy_source_data: c,
            op_type: o,
            write_barrier: w,
            notification: n,
        }
    })
}

fn io_dtype() -> impl Strategy<Value = u8> {
    prop::sample::select(vec![1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15])
}

fn cce_strategy() -> impl Strategy<Value = CceCompute> {
    (
        ctrl_strategy(true, false),
        0u8..6,
        io_dtype(),
        prop::sample::select(vec![0u8, 6, 7, 10]),
        any::<[bool; 4]>(),
        0u32..0x100_0000,
        any::<u32>(),
        0u8..8,
    )
        .prop_map(|(ctrl, op, out, input, f, length, scale, k)| {
            let op = CceOp::from_u8(op).unwrap();
            let use_const = op.is_min_max() && f[3];
            let op_sel = if use_const { k } else { op.op_selector() };
            let w2_hi = match op {
                CceOp::Fma => k & 0x3F,
                _ => CceCompute::default_w2_hi(op),
            } | if f[2] { W2_COMBO } else { 0 };
            CceCompute {
                ctrl,
                meta: CceMeta {
                    op,
                    op_sel,
                    accum: if f[0] { 10 } else { 11 },
                    out,
                    input,
                    last: f[1],
                    wb: f[2],
                    flag: f[0],
                    use_const,
                },
                length,
                w2_hi,
                scale: if op == CceOp::Fma { scale } else { 0 },
            }
        })
}

fn m2s_strategy() -> impl Strategy<Value = Descriptor> {
    prop_oneof![
        (
            ctrl_strategy(false, false),
            prop::option::of(copy_meta_strategy()),
            any::<u64>()
        )
            .prop_map(|(ctrl, meta, addr)| Descriptor::TxData { ctrl, meta, addr }),
        cce_strategy().prop_map(Descriptor::Cce),
        (
            ctrl_strategy(true, false),
            copy_meta_strategy(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(ctrl, meta, meta1, meta2)| Descriptor::CopyMetaDesc {
                ctrl,
                meta,
                meta1,
                meta2
            }),
    ]
}

proptest! {
    #[test]
    fn m2s_roundtrip(d in m2s_strategy()) {
        prop_assert_eq!(Descriptor::decode(&d.encode(), Direction::M2S).unwrap(), d);
    }

    #[test]
    fn s2m_roundtrip(ctrl in ctrl_strategy(false, true), addr in any::<u64>()) {
        let d = Descriptor::RxData { ctrl, addr };
        prop_assert_eq!(Descriptor::decode(&d.encode(), Direction::S2M).unwrap(), d);
    }

    #[test]
    fn decode_never_panics(b in any::<[u8; 16]>(), rx in any::<bool>()) {
        let dir = if rx { Direction::S2M } else { Direction::M2S };
        if let Ok(d) = Descriptor::decode(&b, dir) {
            // Whatever decodes re-encodes to the same bytes.
            prop_assert_eq!(d.encode(), b);
        }
    }
}
