use super::*;
use crate::status::nrt_status::*;
use std::ptr::null_mut;

#[test]
fn inc_semaphore_adds_atomically() {
    let mut sem: u32 = 5;
    // SAFETY: `sem` is a live aligned u32; NULL and misalignment are checked.
    unsafe {
        nec_inc_semaphore(&mut sem, 3);
        assert_eq!(sem, 8);
        nec_inc_semaphore(&mut sem, u32::MAX); // wraps: 8 - 1
        assert_eq!(sem, 7);
        nec_inc_semaphore(null_mut(), 1);
        let mut words = [0u32; 2];
        let odd = words.as_mut_ptr().cast::<u8>().add(1).cast::<u32>();
        nec_inc_semaphore(odd, 1);
        assert_eq!(words, [0, 0], "misaligned address ignored");
    }
}

#[test]
fn device_queries() {
    let n = instance().unwrap().devices as c_int;
    let mut arr = [-1 as c_int; 64];
    // SAFETY: every pointer is a writable local; NULLs are checked.
    unsafe {
        assert_eq!(nec_get_device_count(null_mut(), 0), n);
        assert_eq!(nec_get_device_count(arr.as_mut_ptr(), 2), n);
        assert_eq!(arr[..3], [0, 1, -1]);
        let (mut d, mut b, mut s, mut f) = (9u32, 9u32, 9u8, 9u8);
        assert_eq!(nec_get_device_pci_bdf(1, &mut d, &mut b, &mut s, &mut f), 0);
        assert_eq!((d, b, s, f), (0, 0x11, 0, 0));
        assert_eq!(
            nec_get_device_pci_bdf(n, &mut d, &mut b, &mut s, &mut f),
            -libc::EINVAL
        );
        assert_eq!(
            nec_get_device_pci_bdf(0, null_mut(), &mut b, &mut s, &mut f),
            -libc::EINVAL
        );
        let mut lnc = 0;
        assert_eq!(nec_get_virtual_core_size(&mut lnc), NRT_SUCCESS);
        assert_eq!(lnc, process::config().unwrap().lnc);
        assert_eq!(nec_get_virtual_core_size(null_mut()), NRT_INVALID);
    }
    assert!(nec_is_mla_available(0, n - 1));
    assert!(!nec_is_mla_available(0, n));
    assert!(!nec_is_mla_available(-1, 0));
    assert_eq!(nec_mla_idx_to_rid(0, 3), 3);
    assert_eq!(nec_rid_to_mla_idx(0, 3), 3);
    assert_eq!(nec_mla_idx_to_rid(0, n), -1);
    assert_eq!(nec_rid_to_mla_idx(n, 0), -1);
    if n > 1 {
        assert_eq!(nec_get_peer_mla_idx(0, n - 1, 0), 0);
        assert_eq!(nec_get_peer_mla_idx(0, 0, 1), n - 1);
    }
    assert_eq!(nec_get_peer_mla_idx(0, 0, 7), -1);
    assert_eq!(nec_get_peer_mla_idx(0, -2, 0), -1);
}

#[test]
fn port_map_and_pods() {
    let mut m = [0 as c_int, 1];
    let mut h = [0 as c_int, 1];
    let mut can = -1;
    let mut peer = -1;
    // SAFETY: arrays and locals are valid for the given counts; NULLs are checked.
    unsafe {
        assert_eq!(
            nec_build_port_and_rid_map(0, m.as_mut_ptr(), h.as_mut_ptr(), 2),
            NRT_SUCCESS
        );
        assert_eq!(
            nec_build_port_and_rid_map(0, null_mut(), null_mut(), 0),
            NRT_SUCCESS
        );
        assert_eq!(
            nec_build_port_and_rid_map(0, null_mut(), h.as_mut_ptr(), 1),
            NRT_INVALID
        );
        assert_eq!(
            nec_build_port_and_rid_map(0, m.as_mut_ptr(), h.as_mut_ptr(), -1),
            NRT_INVALID
        );
        assert_eq!(
            nec_build_port_and_rid_map(-1, m.as_mut_ptr(), h.as_mut_ptr(), 2),
            NRT_INVALID
        );
        assert_eq!(m, [0, 1], "input arrays are never written");

        use nec_pod_type_t::*;
        assert_eq!(
            nec_pod_node_can_access_peer_node(NEC_POD_TYPE_NONE as u32, 0, 1, 3, 1, &mut can),
            NRT_SUCCESS
        );
        assert_eq!(can, 1, "same node");
        assert_eq!(
            nec_pod_node_can_access_peer_node(NEC_POD_TYPE_NONE as u32, 0, 0, 0, 1, &mut can),
            NRT_SUCCESS
        );
        assert_eq!(can, 0);
        assert_eq!(
            nec_pod_node_can_access_peer_node(NEC_POD_TYPE_P2P as u32, 2, 0, 2, 1, &mut can),
            NRT_SUCCESS
        );
        assert_eq!(can, 1);
        assert_eq!(
            nec_pod_node_can_access_peer_node(NEC_POD_TYPE_P2P as u32, 2, 0, 3, 1, &mut can),
            NRT_SUCCESS
        );
        assert_eq!(can, 0);
        assert_eq!(
            nec_pod_node_can_access_peer_node(NEC_POD_TYPE_SWITCH as u32, 2, 0, 3, 1, &mut can),
            NRT_SUCCESS
        );
        assert_eq!(can, 1);
        assert_eq!(
            nec_pod_node_can_access_peer_node(3, 0, 0, 0, 1, &mut can),
            NRT_INVALID
        );
        assert_eq!(
            nec_pod_node_can_access_peer_node(0, 0, 0, 0, 1, null_mut()),
            NRT_INVALID
        );
        assert_eq!(
            nec_pod_node_can_access_peer_node(0, 1 << 20, 0, 0, 1, &mut can),
            NRT_INVALID
        );

        let cfg = process::config().unwrap();
        let r = nec_get_p2p_pod_peer_node(0, 1, 2, &mut peer);
        if cfg.instance.pod().is_some() {
            assert_eq!((r, peer), (0, 3));
        } else {
            assert_eq!((r, peer), (-libc::EINVAL, -1), "not a pod: nothing written");
        }
        assert_eq!(
            nec_get_p2p_pod_peer_node(0, 1, 2, null_mut()),
            -libc::EINVAL
        );
        nec_ndl_printk(c"hello from the driver\n".as_ptr().cast_mut(), 64, 1);
        nec_ndl_printk(null_mut(), 4, 0);
    }
}
