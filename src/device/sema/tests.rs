use super::*;

/// docs/contract/device.md §5.1: every window's semantics, two's complement wrap.
#[test]
fn windows() {
    let mut b = SemBlock::new();
    assert!(b.store(SemWindow::Set, 7, 10));
    assert!(b.store(SemWindow::Inc, 7, 5));
    assert_eq!(b.value(7), 15);
    assert!(b.store(SemWindow::Dec, 7, 20));
    assert_eq!(b.value(7), -5);
    assert_eq!(b.load(SemWindow::Read, 7), (-5i32) as u32);
    assert_eq!(b.load(SemWindow::Inc, 7), (-5i32) as u32); // all windows read the value
    assert!(!b.store(SemWindow::Read, 7, 99)); // ignored
    assert_eq!(b.value(7), -5);
    // INC by a "negative" u32 is a subtraction; the other semaphores are untouched.
    assert!(b.store(SemWindow::Inc, 7, u32::MAX));
    assert_eq!(b.value(7), -6);
    assert_eq!(b.nonzero().collect::<Vec<_>>(), vec![(7, -6)]);
    // Events: non-zero sets, zero clears; 256 independent bits.
    for i in [0u8, 63, 64, 200, 255] {
        assert!(b.store(SemWindow::Event, i, 0x8000_0000));
        assert_eq!(b.load(SemWindow::Event, i), 1);
    }
    assert!(!b.event(1) && !b.event(65));
    b.store(SemWindow::Event, 64, 0);
    assert!(!b.event(64) && b.event(63) && b.event(200));
}

#[test]
fn wraparound() {
    let mut b = SemBlock::new();
    b.set(0, i32::MAX);
    b.store(SemWindow::Inc, 0, 1);
    assert_eq!(b.value(0), i32::MIN);
    b.store(SemWindow::Dec, 0, 1);
    assert_eq!(b.value(0), i32::MAX);
    b.set(1, i32::MIN);
    assert!(!b.wait_ge_and_dec(1, 0));
    assert!(b.wait_ge_and_dec(1, i32::MIN));
    assert_eq!(b.value(1), i32::MAX);
}

/// docs/contract/device.md §5.3: ≥ target, then −1 (not −target).
#[test]
fn wait_ge_and_dec_decrements_by_one() {
    let mut b = SemBlock::new();
    b.set(3, 2);
    assert!(!b.wait_ge_and_dec(3, 3));
    assert_eq!(b.value(3), 2);
    b.add(3, 1);
    assert!(b.wait_ge_and_dec(3, 3));
    assert_eq!(b.value(3), 2);
    assert!(b.wait_ge_and_dec(3, 2)); // equal passes
    assert_eq!(b.value(3), 1);
}

/// docs/contract/lowering.md §4.6: ≥ wait_val, then −wait_val.
#[test]
fn mesh_wait_subtracts_wait_val() {
    let mut b = SemBlock::new();
    b.set(9, 3);
    assert!(!b.wait_ge_and_sub(9, 4));
    b.add(9, 1);
    assert!(b.wait_ge_and_sub(9, 4));
    assert_eq!(b.value(9), 0);
    b.set(9, 6);
    assert!(b.wait_ge_and_sub(9, 4));
    assert_eq!(b.value(9), 2);
}

/// docs/contract/isa.md §2: every comparison; 0x04 strictly greater vs 0x05 greater-or-equal.
#[test]
fn every_comparison() {
    use WaitMode as W;
    let table: [(W, [bool; 3]); 10] = [
        // value = target − 1, target, target + 1
        (W::SemEqImm, [false, true, false]),
        (W::SemLtImm, [true, false, false]),
        (W::SemLeImm, [true, true, false]),
        (W::SemGtImm, [false, false, true]),
        (W::SemGeImm, [false, true, true]),
        (W::SemEqReg, [false, true, false]),
        (W::SemLtReg, [true, false, false]),
        (W::SemLeReg, [true, true, false]),
        (W::SemGtReg, [false, false, true]),
        (W::SemGeReg, [false, true, true]),
    ];
    for target in [-1, 0, 5] {
        for (mode, want) in table {
            for (k, d) in [-1, 0, 1].into_iter().enumerate() {
                assert_eq!(satisfied(mode, target + d, target), want[k], "{mode} {d}");
            }
        }
    }
    assert_eq!(WaitMode::SemGtImm.as_u8(), 0x04);
    assert_eq!(WaitMode::SemGeImm.as_u8(), 0x05);
    assert!(!satisfied(WaitMode::SemGtImm, 4, 4) && satisfied(WaitMode::SemGeImm, 4, 4));
    // Signed: a negative value is below a positive target.
    assert!(satisfied(WaitMode::SemLtImm, -1, 0));
    assert!(satisfied(WaitMode::None, i32::MIN, i32::MAX));
}

#[test]
fn event_waits_and_updates() {
    let mut b = SemBlock::new();
    assert!(!b.try_wait(WaitMode::EvtSet, 5, 0));
    assert!(b.try_wait(WaitMode::EvtClearThenSet, 5, 0));
    assert!(b.event(5));
    assert!(!b.try_wait(WaitMode::EvtClear, 5, 0));
    assert!(b.try_wait(WaitMode::EvtSetThenClear, 5, 0));
    assert!(!b.event(5));
    // Semaphore waits compare only.
    b.set(5, 1);
    assert!(b.try_wait(WaitMode::SemGtImm, 5, 0));
    assert_eq!(b.value(5), 1);
    b.update(UpdateMode::SemIncComplete, 5, 0);
    b.update(UpdateMode::SemAddImmRead, 5, 10);
    b.update(UpdateMode::SemDecComplete, 5, 99);
    b.update(UpdateMode::SemSubImmComplete, 5, 3);
    assert_eq!(b.value(5), 8);
    b.update(UpdateMode::SemWrImmComplete, 5, -2);
    assert_eq!(b.value(5), -2);
    b.update(UpdateMode::EvtSetRead, 6, 0);
    assert!(b.event(6) && !b.event(5));
    b.update(UpdateMode::EvtClearComplete, 6, 0);
    assert!(!b.event(6));
}

#[test]
fn chip_blocks() {
    let mut c = ChipSems::new();
    c.block_mut(BlockId::TopSp(15)).unwrap().set(1, 4);
    c.block_mut(BlockId::Tpb(0)).unwrap().set(1, 7);
    assert_eq!(c.block(BlockId::TopSp(15)).unwrap().value(1), 4);
    assert_eq!(c.block(BlockId::Tpb(0)).unwrap().value(1), 7);
    assert_eq!(c.block(BlockId::TopSp(0)).unwrap().value(1), 0);
    assert!(c.block(BlockId::TopSp(16)).is_none());
    assert!(c.block(BlockId::Tpb(MAX_TPBS)).is_none());
    assert_eq!(BlockId::TopSp(3).to_string(), "TOP_SP 3");
}
