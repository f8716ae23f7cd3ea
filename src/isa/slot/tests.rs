use super::*;
use proptest::prelude::*;

#[test]
fn golden_record() {
    let r = SlotRecord {
        m2s: 4,
        s2m: 2,
        repeat: 1,
        wait: Some(SlotWait {
            topsp: 1,
            sem: 8,
            target: 1,
            consume: 1,
        }),
        end: true,
    };
    assert_eq!(
        r.encode(),
        [4, 0, 2, 0, 1, 0, 8, 0x11, 1, 0, 0, 0, 1, 0, 0, 0]
    );
    let n = SlotRecord {
        repeat: 0,
        end: true,
        ..Default::default()
    };
    assert_eq!(
        n.encode(),
        [0, 0, 0, 0, 0, 0, 0xFF, 0x10, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(SLOTS, 32);
}

proptest! {
    #[test]
    fn roundtrip(m2s in any::<u16>(), s2m in any::<u16>(), rep in any::<u16>(), w in prop::option::of((0u8..16, 0u8..255, any::<u32>(), any::<u32>())), end in any::<bool>()) {
        let r = SlotRecord { m2s, s2m, repeat: rep, wait: w.map(|(topsp, sem, target, consume)| SlotWait { topsp, sem, target, consume }), end };
        prop_assert_eq!(SlotRecord::decode(&r.encode()).unwrap(), r);
    }

    #[test]
    fn decode_total(b in any::<[u8; 16]>()) {
        if let Ok(r) = SlotRecord::decode(&b) { prop_assert_eq!(r.encode(), b); }
    }
}
