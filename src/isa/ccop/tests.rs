use super::*;
use crate::error::ErrorKind;
use proptest::prelude::*;

fn ring_fields(channel_list: u32) -> CcOpFields {
    CcOpFields {
        algo_type: DevicePattern::Ring as u8,
        algo_sub_type: 0,
        trigger_next: false,
        reporter: true,
        ring_wait_complete: false,
        ring_send_complete: false,
        safe_mode: false,
        unique_tensors: false,
        operands: CcOpOperands::Ring { channel_list },
    }
}

/// Seed 003 (docs/contract/isa.md §11.2):
/// word0 = (trigger_next<<15)|(algo_sub_type<<12)|(algo_type<<8)|1.
#[test]
fn golden_word0_formula_seed003() {
    let f = CcOpFields {
        algo_type: 1,
        algo_sub_type: 3,
        trigger_next: true,
        reporter: true,
        ring_wait_complete: true,
        ring_send_complete: false,
        safe_mode: true,
        unique_tensors: false,
        operands: CcOpOperands::Mesh {
            sema_shift_offset: 0x1234,
            sema_mask: 0xBEEF,
        },
    };
    let b = pack_cc_op([0; 8], &f, 0).unwrap();
    // (1<<15)|(3<<12)|(1<<8)|1 = 0xB101, little-endian.
    assert_eq!(&b[0..2], &[0x01, 0xB1]);
    // reporter | ring_wait<<1 | safe_mode<<3 = 0b01011.
    assert_eq!(b[2], 0x0B);
    assert_eq!(b[3], 0x00);
    // Mesh union: two u16 stores at slot+4 and slot+6 (docs/contract/isa.md §11.3).
    assert_eq!(&b[4..8], &[0x34, 0x12, 0xEF, 0xBE]);
}

/// docs/contract/isa.md §11.3: channel_list is OR of (1 << abs_id); stored as u32 at slot+4.
#[test]
fn golden_ring_union_seed003() {
    let list = (1 << 0) | (1 << 5) | (1 << 31);
    let b = pack_cc_op([0; 8], &ring_fields(list), 0).unwrap();
    assert_eq!(b, [0x01, 0x00, 0x01, 0x00, 0x21, 0x00, 0x00, 0x80]);
    let e = SpadCtrlEntry::unpack(b);
    assert!(e.cc_op && e.reporter);
    assert_eq!(e.algo_type, 0);
    assert_eq!(e.channel_list(), list);
    // Same bytes seen through the mesh view (the dumper prints both,
    // docs/contract/carrier.md §5 item 1).
    assert_eq!(e.sema_shift_offset(), 0x0021);
    assert_eq!(e.sema_mask(), 0x8000);
}

/// docs/contract/isa.md §11.2: the packer keeps `old_word & 0xFE`, `old_flag & 0xE0`, and never
/// stores byte 3.
#[test]
fn packer_preserves_reserved_bits() {
    let old = [0xFF; 8];
    let b = pack_cc_op(old, &ring_fields(0), 0).unwrap();
    assert_eq!(b[0], 0xFF); // header reserved bits kept, cc_op = 1
    assert_eq!(b[1], 0x00); // algo byte fully rewritten
    assert_eq!(b[2], 0xE1); // reserved [7:5] kept, reporter only
    assert_eq!(b[3], 0xFF); // padding untouched
    assert_eq!(&b[4..8], &[0, 0, 0, 0]);
}

/// docs/contract/isa.md §11.2 / docs/contract/lowering.md §6.1:
/// `assert(channel->id != 0 || channel->reporter)`.
#[test]
fn channel_zero_needs_reporter() {
    let mut f = ring_fields(1);
    f.reporter = false;
    let e = pack_cc_op([0; 8], &f, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("reporter"), "{e:?}");
    assert!(pack_cc_op([0; 8], &f, 3).is_ok());
}

#[test]
fn field_widths_are_enforced() {
    let mut f = ring_fields(0);
    f.algo_type = 16;
    assert!(pack_cc_op([0; 8], &f, 0).is_err());
    let mut f = ring_fields(0);
    f.algo_sub_type = 8;
    assert!(pack_cc_op([0; 8], &f, 0).is_err());
    let e = SpadCtrlEntry {
        algo_type: 0x10,
        ..Default::default()
    };
    assert!(e.pack().is_err());
}

/// docs/contract/carrier.md §3.5: safe_mode is bit 3 and unique_tensors bit 4 of slot byte 2;
/// the CTRL-mark logger reads safe_mode as bit 19 of the slot's first dword
/// (docs/contract/isa.md §11.5).
#[test]
fn hidden_flags_positions() {
    let mut f = ring_fields(0);
    f.safe_mode = true;
    f.unique_tensors = true;
    let b = pack_cc_op([0; 8], &f, 0).unwrap();
    let dword = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    assert_eq!((dword >> 19) & 1, 1);
    assert_eq!((dword >> 20) & 1, 1);
}

proptest! {
    #[test]
    fn unpack_pack_is_identity(b in any::<[u8; 8]>()) {
        prop_assert_eq!(SpadCtrlEntry::unpack(b).pack().unwrap(), b);
    }

    #[test]
    fn pack_cc_op_roundtrips_through_unpack(
        old in any::<[u8; 8]>(), algo_type in 0u8..16, algo_sub_type in 0u8..8,
        flags in 0u8..32, trig in any::<bool>(), word in any::<u32>(), ch in 1u32..32,
    ) {
        let f = CcOpFields {
            algo_type, algo_sub_type, trigger_next: trig,
            reporter: flags & 1 != 0, ring_wait_complete: flags & 2 != 0,
            ring_send_complete: flags & 4 != 0, safe_mode: flags & 8 != 0,
            unique_tensors: flags & 16 != 0,
            operands: CcOpOperands::Ring { channel_list: word },
        };
        let e = SpadCtrlEntry::unpack(pack_cc_op(old, &f, ch).unwrap());
        prop_assert!(e.cc_op);
        prop_assert_eq!(e.algo_type, algo_type);
        prop_assert_eq!(e.algo_sub_type, algo_sub_type);
        prop_assert_eq!(e.trigger_next, trig);
        prop_assert_eq!(e.reporter, f.reporter);
        prop_assert_eq!(e.safe_mode, f.safe_mode);
        prop_assert_eq!(e.unique_tensors, f.unique_tensors);
        prop_assert_eq!(e.union_word, word);
        prop_assert_eq!(e.header_reserved, old[0] >> 1);
        prop_assert_eq!(e.flags_reserved, old[2] >> 5);
        prop_assert_eq!(e.pad, old[3]);
    }
}
