//! Tests of the address map.

use super::*;

fn two_chips() -> AddressMap {
    let places = vec![
        RankPlace {
            node: 0,
            device: 0,
            core: 0,
        },
        RankPlace {
            node: 0,
            device: 0,
            core: 1,
        },
        RankPlace {
            node: 0,
            device: 1,
            core: 0,
        },
        RankPlace {
            node: 1,
            device: 0,
            core: 0,
        },
    ];
    let bufs = BufferSizes {
        input: 100,
        output: 5000,
        scratch: 64,
        in_place: false,
    };
    AddressMap::new(places, 1, Generation::V3, bufs).unwrap()
}

/// docs/contract/device.md §5.1: INC of sem id 8 on TOP_SP 1 of core 0 = 0x82C0000000 + 0x1800 +
/// 32; §1.4: chip id 53:48 + id-valid 54 when the semaphore is on another chip.
#[test]
fn sem_inc_addresses() {
    let m = two_chips();
    let s = Sem {
        rank: 0,
        topsp: 1,
        id: 8,
    };
    assert_eq!(m.sem_inc_addr(0, s).unwrap(), 0x82_C000_1820);
    assert_eq!(m.sem_inc_addr(1, s).unwrap(), 0x82_C000_1820); // same chip: no routing
    assert_eq!(m.sem_inc_addr(2, s).unwrap(), (1 << 54) | 0x82_C000_1820);
    // rank 1 = core 1 → device TOP_SPs 2, 3.
    let s1 = Sem {
        rank: 1,
        topsp: 0,
        id: 8,
    };
    assert_eq!(m.sem_inc_addr(0, s1).unwrap(), 0x83_0000_1820);
    // rank 3: node 1 → chip 1·2 + 0 = 2.
    let s3 = Sem {
        rank: 3,
        topsp: 0,
        id: 9,
    };
    assert_eq!(
        m.sem_inc_addr(0, s3).unwrap(),
        (1 << 54) | (2 << 48) | 0x82_8000_1824
    );
    assert!(m
        .sem_inc_addr(
            0,
            Sem {
                rank: 0,
                topsp: 2,
                id: 8
            }
        )
        .is_err());
    let (r, reg, _) = m.resolve(0, m.sem_inc_addr(0, s3).unwrap()).unwrap();
    assert_eq!(
        (r, reg),
        (
            3,
            Region::Sem(SemAddr {
                topsp: 0,
                window: SemWindow::Inc,
                idx: 9
            })
        )
    );
    let (r, reg, _) = m.resolve(0, m.sem_inc_addr(0, s1).unwrap()).unwrap();
    assert_eq!(
        (r, reg),
        (
            1,
            Region::Sem(SemAddr {
                topsp: 0,
                window: SemWindow::Inc,
                idx: 8
            })
        )
    );
}

#[test]
fn buffers_resolve_back() {
    let m = two_chips();
    for from in 0..4 {
        for rank in 0..4 {
            for (buf, region, off) in [
                (Buf::Input, Region::Input, 3),
                (Buf::Output, Region::Output, 7),
                (Buf::Scratch, Region::Scratch, 1),
            ] {
                let a = m
                    .loc_addr(
                        from,
                        Loc {
                            rank,
                            buf,
                            offset: off,
                        },
                        4,
                        4,
                    )
                    .unwrap();
                assert_eq!(m.resolve(from, a).unwrap(), (rank, region, off * 4));
            }
        }
    }
    assert!(m
        .loc_addr(
            0,
            Loc {
                rank: 0,
                buf: Buf::Input,
                offset: 25
            },
            4,
            4
        )
        .is_err());
    assert_eq!(
        m.resolve(2, m.const_one_addr(2).unwrap()).unwrap(),
        (2, Region::Const, 4)
    );
    assert_eq!(
        m.resolve(1, m.slot_spad_base(1, 1).unwrap()).unwrap(),
        (1, Region::SlotSpad(1), 0)
    );
    assert_eq!(
        m.resolve(1, m.s2m_ring_base(1, 0).unwrap() + 32).unwrap(),
        (1, Region::S2mRing(0), 32)
    );
    assert!(m.resolve(0, 0x1234).is_err());
}

#[test]
fn in_place_output_is_input() {
    let places = vec![RankPlace {
        node: 0,
        device: 0,
        core: 0,
    }];
    let bufs = BufferSizes {
        input: 64,
        output: 64,
        scratch: 0,
        in_place: true,
    };
    let m = AddressMap::new(places, 2, Generation::V3, bufs).unwrap();
    assert_eq!(m.topsps_per_rank(), 4);
    let o = m
        .loc_addr(
            0,
            Loc {
                rank: 0,
                buf: Buf::Output,
                offset: 2,
            },
            2,
            2,
        )
        .unwrap();
    let i = m
        .loc_addr(
            0,
            Loc {
                rank: 0,
                buf: Buf::Input,
                offset: 2,
            },
            2,
            2,
        )
        .unwrap();
    assert_eq!(o, i);
    assert_eq!(m.resolve(0, o).unwrap(), (0, Region::Input, 4));
}

#[test]
fn rejects_bad_placements() {
    let p = RankPlace {
        node: 0,
        device: 0,
        core: 0,
    };
    assert!(AddressMap::new(vec![p, p], 1, Generation::V3, BufferSizes::default()).is_err());
    let far = RankPlace {
        node: 64,
        device: 0,
        core: 0,
    };
    assert!(AddressMap::new(vec![far], 1, Generation::V3, BufferSizes::default()).is_err());
    let c8 = RankPlace {
        node: 0,
        device: 0,
        core: 8,
    };
    assert!(AddressMap::new(vec![c8], 1, Generation::V3, BufferSizes::default()).is_err());
    let huge = BufferSizes {
        input: 1 << 40,
        ..Default::default()
    };
    assert!(AddressMap::new(vec![p], 1, Generation::V3, huge).is_err());
}
