use super::*;
use crate::error::ErrorKind;
use crate::isa::ccop::SpadCtrlEntry;
use crate::ncfw::ctx_layout::*;

fn rd64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// The builder writes each field at the spec offset (spot checks of
/// docs/contract/carrier.md §3, unaligned included).
#[test]
fn builder_writes_spec_offsets() {
    for arch in Arch::ALL {
        let c = sample_context(arch);
        let l = arch.layout();
        assert_eq!(c.len(), l.min_size);
        // docs/contract/carrier.md §3.2.2: channel 3 recv_sema at 3 × 148 + 56.
        assert_eq!(rd64(&c, 3 * 148 + 56), sample_addr(region::RING, 3, 0x38));
        // docs/contract/carrier.md §3.2.6: mesh event 2 wait_val at mesh_off + 2 × 80 + 0x48.
        let w = l.mesh_off + 2 * 80 + 0x48;
        assert_eq!(u32::from_le_bytes(c[w..w + 4].try_into().unwrap()), 5002);
        // docs/contract/carrier.md §3.2.10: unaligned start_network_proxy at barrier + 0x104.
        let bc = l.neff_configs_off + 0x898;
        assert_eq!(rd64(&c, bc + 0x104), sample_addr(region::BARRIER, 9, 0x104));
        assert_eq!(c[bc + 0x124] & 1, 1);
        // docs/contract/carrier.md §3.2.12: unaligned tpb_ctrl_ack at dev + 0x24; nibbles at
        // +0x2C / +0x2D.
        assert_eq!(rd64(&c, l.dev_configs_off + 0x24), 0x1122_3344_5566_7788);
        assert_eq!(c[l.dev_configs_off + 0x2C], 0xA5);
        assert_eq!(c[l.dev_configs_off + 0x2D], 0x03);
        // docs/contract/carrier.md §3.2.7: flags byte = leader | dbg_cc_nop; function_n hidden
        // but stored.
        assert_eq!(c[l.neff_configs_off + 0xE07], 0b011);
        assert_eq!(c[l.neff_configs_off + 0xE04..][..2], [0x34, 0x12]);
        // docs/contract/carrier.md §3.5: the runtime slot, packed by crate::isa::ccop.
        let slot: [u8; 8] = c[l.neff_off..l.neff_off + 8].try_into().unwrap();
        let e = SpadCtrlEntry::unpack(slot);
        assert!(e.cc_op && e.trigger_next && e.reporter && e.safe_mode && e.ring_send_complete);
        assert_eq!((e.algo_type, e.algo_sub_type), (1, 3));
        assert_eq!((e.sema_shift_offset(), e.sema_mask()), (0x1234, 0xBEEF));
        // docs/contract/carrier.md §3.7: hierarchical run_state and mesh event_index.
        assert_eq!(c[l.algo_off + 0x200], 2);
        assert_eq!(c[l.algo_off + 0x204..][..2], [77, 0]);
    }
}

#[test]
fn builder_rejects_bad_indices_and_widths() {
    let mut b = CcContextBuilder::new(Arch::V2);
    assert!(b.ring_channel(32, &RingChannel::default()).is_err());
    assert!(b.mesh_event(49, &MeshEvent::default()).is_ok());
    assert!(b.mesh_event(50, &MeshEvent::default()).is_err());
    assert!(CcContextBuilder::new(Arch::V3)
        .mesh_event(107, &MeshEvent::default())
        .is_ok());
    assert!(b.dma_alloc_bitmap(8, 0, 0).is_err());
    assert!(b.slot_spad_base(6, 0).is_err());
    assert!(b.basic_block(256, 1, 0, 0).is_err());
    assert!(b.runtime_ring_row(32, &RingRow::default()).is_err());
    assert!(b.desc_count_raw(&[0; 2081]).is_err());
    let e = b
        .dev_configs(&DevConfigs {
            tpb_id: 16,
            ..Default::default()
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(
        e.fields().field.as_deref(),
        Some("dev_configs.tpb_id"),
        "{e:?}"
    );
    assert_eq!(e.fields().actual.as_deref(), Some("16"), "{e:?}");
    // The packer's assertion: channel 0 needs the reporter bit.
    let mut f = SAMPLE_CC_OP;
    f.reporter = false;
    assert!(b.runtime_cc_op(&f, 0).is_err());
    assert!(b.runtime_cc_op(&f, 1).is_ok());
}
