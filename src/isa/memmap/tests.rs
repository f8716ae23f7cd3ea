use super::*;
use crate::isa::evtsem::{topsp_base, SemAddr};

/// The layout table of the module doc.
#[test]
fn golden_window_layout() {
    assert_eq!(core_window(0), 0x1000_0000_0000);
    assert_eq!(core_window(3), 0x1300_0000_0000);
    assert_eq!(const_word(1, 1), 0x1100_0000_0004);
    assert_eq!(program_area(0, 1), 0x1000_5000_0000);
    assert_eq!(window_of(core_window(15) + 5), Some((15, 5)));
    assert_eq!(window_of(core_window(16)), None);
    assert_eq!(window_of(HBM_BASE - 1), None);
    assert_eq!(
        (align_buf(0), align_buf(4096), align_buf(4097)),
        (4096, 4096, 8192)
    );
    // Everything stays inside the 47-bit local space.
    assert!(core_window(MAX_CORES) <= 1 << 47);
}

#[test]
fn program_parts() {
    let p = |off| program_part(off, 2);
    assert_eq!(p(PROGRAM_OFF), Some((0, ProgramPart::CtrlSpad, 0)));
    assert_eq!(p(PROGRAM_OFF + 0x1004), Some((0, ProgramPart::SlotSpad, 4)));
    assert_eq!(p(PROGRAM_OFF + 0x9000), None); // after the SLOT SPAD
    let t1 = PROGRAM_OFF + PROGRAM_STRIDE;
    assert_eq!(
        p(t1 + M2S_RING_OFF + 16),
        Some((1, ProgramPart::M2sRing, 16))
    );
    assert_eq!(p(t1 + S2M_RING_OFF), Some((1, ProgramPart::S2mRing, 0)));
    assert_eq!(p(PROGRAM_OFF + 2 * PROGRAM_STRIDE), None);
}

/// docs/contract/device.md §5.1: per-TPB block 0 at 0x2802700000; TOP_SP blocks per the
/// formula.
#[test]
fn golden_sem_blocks() {
    assert_eq!(tpb_evt_sem_base(0), 0x28_0270_0000);
    assert_eq!(tpb_block_of(0x28_0270_1804), Some((0, 0x1804)));
    assert_eq!(tpb_block_of(tpb_evt_sem_base(15) + 4), Some((15, 4)));
    assert_eq!(tpb_block_of(0x28_0270_2000), None);
    assert_eq!(tpb_block_of((1 << 47) | 0x28_0270_0000), None);
    for t in 0..16u8 {
        assert_eq!(topsp_block_of(topsp_base(t) + 0x1FFF), Some((t, 0x1FFF)));
        assert_eq!(topsp_block_of(topsp_base(t) + 0x2000), None);
    }
    assert_eq!(topsp_block_of(0x8082_8000_0000), Some((8, 0)));
    assert_eq!(topsp_block_of(0x1000), None);
    // sem_window_at agrees with SemAddr on every aligned offset.
    for off in (0..SEM_BLOCK_BYTES).step_by(4) {
        let via = SemAddr::decode(topsp_base(3) + off).map(|s| (s.window, s.idx));
        assert_eq!(sem_window_at(off), via, "offset {off:#x}");
    }
    assert_eq!(sem_window_at(0x1802), None);
    assert!(overlaps_sem_block(
        topsp_base(12) + 0x1FFF,
        topsp_base(12) + 0x3000
    ));
    assert!(!overlaps_sem_block(topsp_base(12) + 0x2000, topsp_base(13)));
    assert!(overlaps_sem_block(0, 1 << 48));
    assert!(!overlaps_sem_block(HBM_BASE, HBM_BASE + CORE_WINDOW));
}

/// docs/contract/device.md §8.1.
#[test]
fn golden_local_regs() {
    assert_eq!(HOST_TRIGGER_V3, 0x615A0);
    assert_eq!(LOCAL_REG_BASE + REG_BB_SWITCH_OFF, 0x615E0);
    assert_eq!(LOCAL_REG_BASE + REG_STOP_OFF, 0x615C0);
    assert_eq!(LOCAL_REG_BASE + REG_INIT_OFF, 0x61540);
    assert_eq!(LOCAL_REG_BASE + REG_TSYNC_OFF, 0x61560);
    assert_eq!(HOST_TRIGGER_V2, 0x60848);
}
