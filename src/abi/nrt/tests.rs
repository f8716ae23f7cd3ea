use super::*;
use crate::status::nrt_status::*;

#[test]
fn status_strings_cover_all_28() {
    for (s, name) in nrt_status::ALL {
        let p = nrt_get_status_as_str(s as i32);
        // SAFETY: the function returns static NUL-terminated strings.
        let got = unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap();
        assert_eq!(got, name.to_str().unwrap());
    }
    // SAFETY: `nrt_get_status_as_str` returns a static NUL-terminated string for any value.
    let unknown = unsafe { std::ffi::CStr::from_ptr(nrt_get_status_as_str(8)) };
    assert_eq!(unknown.to_str().unwrap(), "NRT_UNKNOWN_STATUS");
}

#[test]
fn get_version_respects_size() {
    let mut v = std::mem::MaybeUninit::<nrt_version_t>::zeroed();
    // SAFETY: v is a valid nrt_version_t-sized buffer.
    unsafe {
        assert_eq!(nrt_get_version(v.as_mut_ptr(), 159), NRT_FAILURE);
        assert_eq!(nrt_get_version(std::ptr::null_mut(), 224), NRT_INVALID);
        assert_eq!(nrt_get_version(v.as_mut_ptr(), 200), NRT_SUCCESS);
        let got = v.assume_init();
        assert_eq!(
            [got.rt_major, got.rt_minor, got.rt_patch, got.rt_maintenance],
            RT_VERSION
        );
        assert_eq!(got.git_hash[0], 0, "git_hash only when size > 200");
        assert_eq!(nrt_get_version(v.as_mut_ptr(), 224), NRT_SUCCESS);
    }
}

#[test]
fn topology_getters_are_guarded() {
    crate::abi::handle::testing::uninit(|| {
        let mut v = 0u32;
        // SAFETY: `v` is writable; NULL is checked.
        unsafe {
            assert_eq!(nrt_host_device_id_get(0, &mut v), NRT_UNINITIALIZED);
            assert_eq!(
                nrt_host_device_id_rid_map_get(&mut v, std::ptr::null_mut()),
                NRT_UNINITIALIZED
            );
            assert_eq!(
                nrt_get_hbm_mmap_va(0, 0, std::ptr::null_mut(), std::ptr::null_mut()),
                NRT_UNINITIALIZED
            );
            assert_eq!(
                nrt_get_vnc_memory_stats(0, std::ptr::null_mut(), 16, std::ptr::null_mut()),
                NRT_UNINITIALIZED
            );
            assert_eq!(
                nrt_get_dmabuf_fd(0, 0, std::ptr::null_mut()),
                NRT_UNINITIALIZED
            );
            assert_eq!(
                nrt_get_attached_efa_bdf(
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                NRT_UNINITIALIZED
            );
        }
    });
}

#[test]
fn topology_getters_after_init() {
    crate::abi::handle::testing::init(|| {
        let devices = process::config().unwrap().instance.devices;
        let mut v = 99u32;
        let mut fd = -7;
        // SAFETY: all out-pointers are writable locals; NULL is checked.
        unsafe {
            assert_eq!(nrt_host_device_id_get(3, &mut v), NRT_SUCCESS);
            assert_eq!(v, 3);
            v = 99;
            assert_eq!(
                nrt_host_device_id_get(devices as c_int, &mut v),
                NRT_INVALID
            );
            assert_eq!(nrt_host_device_id_get(-1, &mut v), NRT_INVALID);
            assert_eq!(v, 99, "not written on failure");
            assert_eq!(nrt_host_device_id_get(0, std::ptr::null_mut()), NRT_INVALID);

            // Probe, too small, exact.
            let mut count = 0u32;
            assert_eq!(
                nrt_host_device_id_rid_map_get(&mut count, std::ptr::null_mut()),
                NRT_SUCCESS
            );
            assert_eq!(count, devices);
            let mut map = vec![u32::MAX; devices as usize + 2];
            let mut small = devices - 1;
            assert_eq!(
                nrt_host_device_id_rid_map_get(&mut small, map.as_mut_ptr()),
                NRT_RESOURCE
            );
            assert_eq!((small, map[0]), (devices - 1, u32::MAX));
            let mut cap = devices + 2;
            assert_eq!(
                nrt_host_device_id_rid_map_get(&mut cap, map.as_mut_ptr()),
                NRT_SUCCESS
            );
            assert_eq!(cap, devices);
            assert!(map[..devices as usize]
                .iter()
                .enumerate()
                .all(|(i, r)| *r == i as u32));
            assert_eq!(map[devices as usize], u32::MAX);
            assert_eq!(
                nrt_host_device_id_rid_map_get(std::ptr::null_mut(), map.as_mut_ptr()),
                NRT_INVALID
            );

            assert_eq!(nrt_get_dmabuf_fd(0x1000, 64, &mut fd), NRT_FAILURE);
            assert_eq!(fd, -7);
            assert_eq!(
                nrt_get_dmabuf_fd(0x1000, 64, std::ptr::null_mut()),
                NRT_INVALID
            );
            let mut len = 32usize;
            let mut bdf = [0 as c_char; 32];
            assert_eq!(
                nrt_get_attached_efa_bdf(std::ptr::null(), bdf.as_mut_ptr(), &mut len),
                NRT_FAILURE
            );
            assert_eq!(len, 32);
            assert_eq!(
                nrt_get_hbm_mmap_va(0, 0, std::ptr::null_mut(), std::ptr::null_mut()),
                NRT_FAILURE
            );
        }
    });
}
