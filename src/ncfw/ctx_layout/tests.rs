use super::*;

#[test]
fn arch_keys_round_trip() {
    for a in Arch::ALL {
        assert_eq!(Arch::from_id(a.id()), Some(a));
    }
    for bad in [0, 4, 6, 13, 21, 29, 36, u32::MAX] {
        assert_eq!(Arch::from_id(bad), None, "key {bad}");
    }
}

/// docs/contract/carrier.md §3.1: v3, v4 and v4+ share one layout; v2 differs only by the mesh
/// count.
#[test]
fn per_arch_layouts() {
    assert_eq!(Arch::V3.layout(), Arch::V4.layout());
    assert_eq!(Arch::V4.layout(), Arch::V4Plus.layout());
    let (v2, v3) = (Arch::V2.layout(), Arch::V3.layout());
    assert_eq!(v3.neff_off - v2.neff_off, (108 - 50) * 80);
    assert_eq!(v2.mesh_events, 50);
    assert_eq!(v3.mesh_events, 108);
    assert_eq!(v2.configs_size, 0x3060);
    assert_eq!(v3.configs_size, 0x4280);
}
