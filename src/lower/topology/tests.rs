use super::*;
use crate::error::ErrorKind;

fn it(name: &str) -> InstanceType {
    InstanceType::by_name(name).unwrap()
}

/// The message of an `NRT_INVALID` error (what the tests below check on purpose).
fn invalid<T: std::fmt::Debug>(r: Result<T>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    e.to_string()
}

#[test]
fn logical_core_counts() {
    let t = it("trn2.48xlarge");
    assert_eq!((t.logical_cores_per_device(2), t.logical_cores(2)), (4, 64));
    assert_eq!(
        (t.logical_cores_per_device(1), t.logical_cores(1)),
        (8, 128)
    );
    assert_eq!(it("trn1.32xlarge").logical_cores(1), 32);
    assert_eq!(it("trn1.2xlarge").logical_cores(1), 2);
}

/// LNC 2 exists from v3 on; v2 silicon runs it as 1 (docs/contract/abi.md §5.10); anything but
/// 1 or 2 is refused. The runtime's variable and the lowering's topology both rely on this.
#[test]
fn effective_lnc_forces_2_to_1_on_v2() {
    let (v2, v3) = (it("trn1.32xlarge"), it("trn2.48xlarge"));
    assert_eq!(v2.effective_lnc(Some(2)), Some(1));
    assert_eq!(v3.effective_lnc(Some(2)), Some(2));
    assert_eq!(v3.effective_lnc(Some(1)), Some(1));
    assert_eq!(v3.effective_lnc(None), Some(v3.default_lnc));
    assert_eq!(v3.effective_lnc(Some(3)), None);
    assert_eq!(v2.effective_lnc(Some(0)), None);
}

#[test]
fn hbm_per_core_by_generation() {
    assert_eq!(it("trn1.32xlarge").hbm_per_logical_core(1), 16 << 30);
    assert_eq!(it("trn2.48xlarge").hbm_per_physical_core(), 12 << 30);
    assert_eq!(it("trn2.48xlarge").hbm_per_logical_core(2), 24 << 30);
}

#[test]
fn device_ranges() {
    let t = it("trn1.32xlarge");
    assert_eq!(t.device(15, "dev").unwrap(), 15);
    let e = t.device(16, "neuron_dev").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let f = e.fields();
    assert_eq!(f.field.as_deref(), Some("neuron_dev"), "{e:?}");
    assert_eq!(f.expected.as_deref(), Some("0..16"), "{e:?}");
    assert_eq!(f.actual.as_deref(), Some("16"), "{e:?}");
    assert!(t.device(-1, "dev").is_err());
    assert!(
        t.device(i64::from(u32::MAX) + 16, "dev").is_err(),
        "no wrap to 15"
    );
    assert_eq!(t.device_id(3, "rid").unwrap(), 3);
    let e = t.device_id(16, "remote_rid").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    assert_eq!(e.fields().field.as_deref(), Some("remote_rid"), "{e:?}");
    assert_eq!(e.fields().actual.as_deref(), Some("16"), "{e:?}");
    assert_eq!(t.pci_bdf(1, "dev").unwrap(), (0, 0x11, 0, 0));
    assert!(t.pci_bdf(16, "dev").is_err());
}

#[test]
fn device_ring() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let t = it("trn2.48xlarge");
    assert_eq!(t.ring_peer(15, 0).unwrap(), 0);
    assert_eq!(t.ring_peer(0, 1).unwrap(), 15);
    assert_eq!(t.ring_peer(4, 0).unwrap(), 5);
    let e = invalid(t.ring_peer(0, 2));
    assert!(e.contains("port 2 is not connected"), "{e}");
    let e = invalid(it("trn2.3xlarge").ring_peer(0, 0));
    assert!(
        e.contains("single-device instance has no peer devices"),
        "{e}"
    );
}

#[test]
fn ultraserver_pods() {
    // Checks the message on purpose: it says which check fired; no field carries that.
    let u = it("trn2u.48xlarge");
    assert_eq!(u.pod(), Some(ULTRASERVER_NODES));
    assert_eq!(u.pod_peer_node(0, 1, 2).unwrap(), 3);
    assert_eq!(u.pod_peer_node(15, 3, 1).unwrap(), 0);
    assert_eq!(u.pod_peer_node(0, 0, u32::MAX).unwrap(), 3, "no overflow");
    assert!(u.pod_peer_node(16, 0, 1).is_err());
    let e = invalid(u.pod_peer_node(0, 4, 1));
    assert!(e.contains("node 4 is not a node of the 4-node pod"), "{e}");
    assert!(u.pod_peer_node(0, -1, 1).is_err());
    let t = it("trn2.48xlarge");
    assert_eq!(t.pod(), None);
    let e = invalid(t.pod_peer_node(0, 1, 2));
    assert!(e.contains("trn2.48xlarge is not an UltraServer pod"), "{e}");
}

#[test]
fn peer_access_by_fabric() {
    let t = it("trn2.48xlarge");
    let fab = |f: Fabric| move || Ok(f);
    let unknown = || -> Result<Fabric> { Err(Error::invalid("unknown fabric")) };
    assert!(
        t.can_access_peer(0, 1, 3, 1, unknown).unwrap(),
        "same node: fabric not asked"
    );
    assert!(!t.can_access_peer(0, 0, 0, 1, fab(Fabric::None)).unwrap());
    assert!(t.can_access_peer(2, 0, 2, 1, fab(Fabric::PodP2p)).unwrap());
    assert!(!t.can_access_peer(2, 0, 3, 1, fab(Fabric::PodP2p)).unwrap());
    assert!(t.can_access_peer(2, 0, 3, 1, fab(Fabric::Switch)).unwrap());
    assert!(t.can_access_peer(0, 0, 0, 1, unknown).is_err());
    assert!(t.can_access_peer(16, 0, 0, 0, fab(Fabric::Switch)).is_err());
    assert!(t.can_access_peer(0, 0, 16, 0, fab(Fabric::Switch)).is_err());
}
