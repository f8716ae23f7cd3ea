//! Golden tests of the `neff_barrier_config` codec: every offset is the spec's
//! (docs/contract/carrier.md §3.2.5, §3.2.8–§3.2.10; docs/contract/device.md §7.1), written here as
//! literals, not through the layout constants the codec uses.

use super::*;
use crate::error::ErrorKind;

/// A device view with a distinct value in every field.
fn distinctive() -> DeviceBarrier {
    let mut d = DeviceBarrier::default();
    for (s, st) in d.steps.iter_mut().enumerate() {
        let s = s as u64;
        st.m2s_val = 0x1100 + s as u16;
        st.s2m_val = 0x2200 + s as u16;
        for k in 0..4u64 {
            st.barrier_sema[k as usize] = 0x0045_0082_C000_1000 + (s << 8) + (k << 4);
            st.target_sema_val[k as usize] = 0x3300_0000 + (s as u32) * 16 + k as u32;
        }
    }
    d.dma_sync_sema = [0xA1, 0xA2, 0xA3, 0xA4].map(|v| 0x0082_8000_1010u64 | (v << 48));
    d.dma_apb_bcast = ApbBcast {
        m2s_tail_ptr: 0x0102_0304_0506_0708,
        s2m_tail_ptr: 0x1112_1314_1516_1718,
        mask: 0x2122_2324,
    };
    d.start_network_proxy = 0x3132_3334_3536_3738;
    d.dma_sync_sema_value = 0x4142_4344;
    d.tdrbp_low = 0x5152_5354;
    d.tdrbp_high = 0x6162_6364;
    d.desc_count = 0x7172_7374;
    d.total_desc_n = 0x8182_8384;
    d.dma_engines_bitmap = 0x9192;
    d.queue_id = 0xA5;
    d
}

fn le64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn le32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

/// docs/contract/carrier.md §3.2.10 and docs/contract/device.md §7.1: every field at its literal
/// offset; gate at 0x124.
#[test]
fn golden_device_view_offsets() {
    let d = distinctive();
    let b = BarrierConfig::Device(d).encode();
    assert_eq!(b.len(), 0x128);
    for s in 0..4 {
        let o = s * 52; // barrier_step_config stride 52 (0x34)
        assert_eq!(le16(&b, o), 0x1100 + s as u16, "step {s} m2s_val @+0");
        assert_eq!(le16(&b, o + 2), 0x2200 + s as u16, "step {s} s2m_val @+2");
        for k in 0..4 {
            assert_eq!(le64(&b, o + 4 + 8 * k), d.steps[s].barrier_sema[k]);
            assert_eq!(le32(&b, o + 0x24 + 4 * k), d.steps[s].target_sema_val[k]);
        }
    }
    for k in 0..4 {
        assert_eq!(le64(&b, 0xD0 + 8 * k), d.dma_sync_sema[k]);
    }
    assert_eq!(le64(&b, 0xF0), 0x0102_0304_0506_0708); // dma_apb_bcast.m2s_tail_ptr
    assert_eq!(le64(&b, 0xF8), 0x1112_1314_1516_1718); // s2m_tail_ptr
    assert_eq!(le32(&b, 0x100), 0x2122_2324); // mask
    assert_eq!(le64(&b, 0x104), 0x3132_3334_3536_3738); // start_network_proxy (unaligned)
    assert_eq!(le32(&b, 0x10C), 0x4142_4344);
    assert_eq!(le32(&b, 0x110), 0x5152_5354);
    assert_eq!(le32(&b, 0x114), 0x6162_6364);
    assert_eq!(le32(&b, 0x118), 0x7172_7374);
    assert_eq!(le32(&b, 0x11C), 0x8182_8384); // total_desc_n (hidden from ctx_log)
    assert_eq!(le16(&b, 0x120), 0x9192);
    assert_eq!(b[0x122], 0xA5);
    assert_eq!(b[0x123], 0, "reserved");
    assert_eq!(b[0x124], 1, "execute_device_barrier");
    assert_eq!(&b[0x125..], &[0, 0, 0], "reserved");
    assert_eq!(BarrierConfig::decode(&b).unwrap(), BarrierConfig::Device(d));
}

/// docs/contract/carrier.md §3.2.9 / Q-C: the host view overlays the first 16 bytes; gate 0.
#[test]
fn golden_host_view_and_union_overlay() {
    let h = HostBarrier {
        barrier_start: 0x0041_0082_8000_101C,
        barrier_done: 0x0041_0082_8000_1018,
    };
    let b = BarrierConfig::Host(h).encode();
    assert_eq!(le64(&b, 0), h.barrier_start);
    assert_eq!(le64(&b, 8), h.barrier_done);
    assert!(b[16..].iter().all(|&x| x == 0));
    assert_eq!(BarrierConfig::decode(&b).unwrap(), BarrierConfig::Host(h));
    // Same base (docs/contract/device.md §7.1): barrier_start is step 0's m2s_val, s2m_val and 4
    // bytes of barrier_sema[0]; barrier_done the rest of barrier_sema[0] and of barrier_sema[1].
    let d = DeviceBarrier::decode(&b).unwrap();
    assert_eq!(d.steps[0].m2s_val, 0x101C);
    assert_eq!(d.steps[0].s2m_val, 0x8000);
    assert_eq!(d.steps[0].barrier_sema[0] & 0xFFFF_FFFF, 0x0041_0082);
    assert_eq!(
        d.steps[0].barrier_sema[0] >> 32,
        h.barrier_done & 0xFFFF_FFFF
    );
    // Gate bit 0 alone selects the view; the reserved bits do not (Q-C (3)).
    let mut g = b;
    g[0x124] = 0xFE;
    g[0x126] = 0x77;
    assert_eq!(BarrierConfig::decode(&g).unwrap(), BarrierConfig::Host(h));
    g[0x124] = 0x01;
    assert!(matches!(
        BarrierConfig::decode(&g).unwrap(),
        BarrierConfig::Device(_)
    ));
}

#[test]
fn round_trips_and_short_input() {
    let d = distinctive();
    let b = BarrierConfig::Device(d).encode();
    assert_eq!(BarrierConfig::decode(&b).unwrap().encode(), b);
    let e = BarrierConfig::decode(&b[..0x127]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let f = e.fields();
    assert_eq!(f.field.as_deref(), Some("neff_barrier_config"), "{e:?}");
    assert_eq!(
        (f.expected.as_deref(), f.actual.as_deref()),
        (Some("296"), Some("295"))
    );
    assert!(DeviceBarrier::decode(&b[..0x123]).is_err());
    assert!(HostBarrier::decode(&b[..15]).is_err());
    assert_eq!(DeviceBarrier::decode(&b[..0x124]).unwrap(), d);
    // An empty step: every slot inactive.
    assert_eq!(BarrierStep::default().active().count(), 0);
    let mut st = BarrierStep::default();
    st.barrier_sema[2] = 0x82_8000_1008;
    st.target_sema_val[3] = 1; // a target without a semaphore is still "active" (to be rejected)
    let act: Vec<_> = st.active().collect();
    assert_eq!(act, vec![(2, 0x82_8000_1008, 0), (3, 0, 1)]);
}

/// docs/contract/carrier.md Appendix A / docs/contract/lowering.md §2.9: the enum wire values and
/// the step program with its (MAX 7, MAX 2) pads; shapes {1,4,4,1} and {1,2,2,1}
/// (docs/contract/device.md §7.1).
#[test]
fn step_program_pads() {
    assert_eq!(BarrierType::IntraChip as u8, 0);
    assert_eq!(BarrierType::IntraPod as u8, 1);
    assert_eq!(BarrierType::InterChip as u8, 2);
    assert_eq!(BarrierType::InterChipRingLocal as u8, 3);
    assert_eq!(BarrierType::InterChipRingRemote as u8, 4);
    assert_eq!(BarrierType::IntraRack as u8, 5);
    assert_eq!(BarrierType::InterRack as u8, 6);
    assert_eq!(BarrierType::Max as u8, 7);
    assert_eq!(
        (
            BarrierOp::Entry as u8,
            BarrierOp::Exit as u8,
            BarrierOp::Max as u8
        ),
        (0, 1, 2)
    );
    let pad = (BarrierType::Max, BarrierOp::Max);
    let p = StepShape::STANDARD.program(BarrierType::InterChip);
    assert_eq!(
        p[0],
        [(BarrierType::IntraChip, BarrierOp::Entry), pad, pad, pad]
    );
    assert_eq!(p[1], [(BarrierType::InterChip, BarrierOp::Entry); 4]);
    assert_eq!(p[2], [(BarrierType::InterChip, BarrierOp::Exit); 4]);
    assert_eq!(
        p[3],
        [(BarrierType::IntraChip, BarrierOp::Exit), pad, pad, pad]
    );
    let p = StepShape::SWITCH.program(BarrierType::IntraRack);
    assert_eq!(p[1][1], (BarrierType::IntraRack, BarrierOp::Entry));
    assert_eq!(p[1][2], pad);
    assert_eq!(p[2][1], (BarrierType::IntraRack, BarrierOp::Exit));
    assert_eq!(p[2][3], pad);
    assert_eq!(
        (0..4)
            .map(|s| StepShape::SWITCH.slots(s))
            .collect::<Vec<_>>(),
        vec![1, 2, 2, 1]
    );
}
