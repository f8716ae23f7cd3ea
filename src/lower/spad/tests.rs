use super::*;
use crate::isa::ccop::SpadCtrlEntry;
use crate::lower::program::Algorithm;

fn entry(alg: Algorithm, tapes: &[(u8, u8)]) -> Entry {
    Entry::for_test(alg, Some(2), vec![0, 1, 2], tapes, Vec::new)
}

/// docs/contract/lowering.md §6.1: channel_list bitmap, reporter on channel 0's TOP_SP,
/// chaining flags.
#[test]
fn ring_entry_two_topsps() {
    let e = entry(Algorithm::Ring, &[(0, 0), (1, 1), (2, 0)]);
    let (f0, c0) = cc_op_fields(1, &e, 0, true).unwrap();
    assert_eq!(
        (f0.operands, c0),
        (
            CcOpOperands::Ring {
                channel_list: 0b101
            },
            0
        )
    );
    assert!(f0.reporter && f0.ring_wait_complete && !f0.ring_send_complete && !f0.trigger_next);
    let (f1, c1) = cc_op_fields(1, &e, 1, false).unwrap();
    assert_eq!(
        (f1.operands, c1),
        (CcOpOperands::Ring { channel_list: 0b10 }, 1)
    );
    assert!(!f1.reporter && f1.ring_send_complete && f1.trigger_next);
    assert!(cc_op_fields(1, &e, 2, false).is_err());
}

/// docs/contract/isa.md §11.3–§11.4 (seed 003): mesh → algo_type 1, sub-type = flavour, union =
/// shift/mask.
#[test]
fn mesh_entry_and_continuation() {
    let e = entry(Algorithm::Mesh, &[(0, 0)]);
    let (f, c) = cc_op_fields(2, &e, 0, true).unwrap();
    let bytes = build_ctrl_spad(&[CcOpPlacement {
        fields: f,
        channel_id: c,
        slots: 2,
    }])
    .unwrap();
    assert_eq!(
        &bytes[..8],
        &[0x01, 0x21, 0x01, 0x00, 0x02, 0x00, 0x07, 0x00]
    );
    assert_eq!(&bytes[8..], &SPAD_SLOT_CONTINUE_MARK.to_le_bytes());
    let s = SpadCtrlEntry::unpack(bytes[..8].try_into().unwrap());
    assert_eq!(
        (
            s.algo_type,
            s.algo_sub_type,
            s.sema_shift_offset(),
            s.sema_mask()
        ),
        (1, 2, 2, 7)
    );
    let too_many = vec![
        CcOpPlacement {
            fields: f,
            channel_id: c,
            slots: 1
        };
        513
    ];
    assert!(build_ctrl_spad(&too_many).is_err());
}
