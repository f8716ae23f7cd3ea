use super::*;

/// docs/contract/device.md §5.1 examples: TOP_SP 1 = 0x82C0000000, TOP_SP 8 = 0x808280000000.
#[test]
fn golden_topsp_bases() {
    assert_eq!(topsp_base(0), 0x82_8000_0000);
    assert_eq!(topsp_base(1), 0x82_C000_0000);
    assert_eq!(topsp_base(7), 0x84_4000_0000);
    assert_eq!(topsp_base(8), 0x8082_8000_0000);
    assert_eq!(topsp_base(15), 0x8084_4000_0000);
}

/// docs/contract/device.md §5.1: INC of semaphore idx = base + 0x1800 + 4·idx;
/// docs/contract/carrier.md App. A windows.
#[test]
fn golden_windows() {
    let s = SemAddr {
        topsp: 1,
        window: SemWindow::Inc,
        idx: 9,
    };
    assert_eq!(s.encode(), 0x82_C000_1824);
    assert_eq!(SemAddr::decode(0x82_C000_1824), Some(s));
    let r = SemAddr {
        topsp: 8,
        window: SemWindow::Read,
        idx: 255,
    };
    assert_eq!(r.encode(), 0x8082_8000_13FC);
    assert_eq!(SemAddr::decode(r.encode()), Some(r));
    assert_eq!(
        SemAddr {
            window: SemWindow::Dec,
            ..r
        }
        .encode(),
        0x8082_8000_1FFC
    );
    assert_eq!(
        SemAddr {
            window: SemWindow::Set,
            ..r
        }
        .encode(),
        0x8082_8000_17FC
    );
    assert_eq!(SemAddr::decode(0x82_8000_0800), None); // gap between events and READ
    assert_eq!(SemAddr::decode(0x1000), None);
}

#[test]
fn every_sem_roundtrips() {
    for t in 0..16 {
        for w in [
            SemWindow::Event,
            SemWindow::Read,
            SemWindow::Set,
            SemWindow::Inc,
            SemWindow::Dec,
        ] {
            for idx in [0u8, 1, 7, 128, 255] {
                let s = SemAddr {
                    topsp: t,
                    window: w,
                    idx,
                };
                assert_eq!(SemAddr::decode(s.encode()), Some(s));
            }
        }
    }
}

/// docs/contract/device.md §1.4: chip id 53:48, id-valid 54, die 47.
#[test]
fn golden_soc_routing() {
    let a = SocAddr {
        local: 0x82_C000_1824,
        die: false,
        route: Route::Chip(5),
    };
    assert_eq!(a.encode(), 0x0045_0082_C000_1824);
    assert_eq!(SocAddr::decode(a.encode()).unwrap(), a);
    let t8 = SocAddr::decode(topsp_base(8)).unwrap();
    assert!(t8.die && t8.route == Route::Local);
    let n = SocAddr {
        local: 0x40,
        die: true,
        route: Route::Neighbor {
            exit_die: true,
            exit_seng: false,
        },
    };
    assert_eq!(n.encode(), (1 << 52) | (1 << 51) | (1 << 47) | 0x40);
    assert_eq!(SocAddr::decode(n.encode()).unwrap(), n);
    assert!(SocAddr::decode(1 << 48).is_err());
    assert!(SocAddr::decode(1 << 60).is_err());
}
