use super::*;
use crate::abi::boundary::{enter_status, enter_value};
use crate::status::nrt_status::*;

#[test]
fn every_kind_maps_to_a_vendor_status() {
    use nrt_status::*;
    let cases = [
        (ErrorKind::Failure, NRT_FAILURE, 1),
        (ErrorKind::NotImplemented, NRT_FAILURE, 1),
        (ErrorKind::Invalid, NRT_INVALID, 2),
        (ErrorKind::InvalidHandle, NRT_INVALID_HANDLE, 3),
        (ErrorKind::Resource, NRT_RESOURCE, 4),
        (ErrorKind::Timeout, NRT_TIMEOUT, 5),
        (ErrorKind::QueueFull, NRT_QUEUE_FULL, 7),
        (ErrorKind::NotEnoughCores, NRT_LOAD_NOT_ENOUGH_NC, 9),
        (
            ErrorKind::UnsupportedNeffVersion,
            NRT_UNSUPPORTED_NEFF_VERSION,
            10,
        ),
        (ErrorKind::HostAlloc, NRT_FAIL_HOST_MEM_ALLOC, 11),
        (ErrorKind::Uninitialized, NRT_UNINITIALIZED, 13),
        (ErrorKind::Closed, NRT_CLOSED, 14),
        (ErrorKind::ExecBadInput, NRT_EXEC_BAD_INPUT, 1002),
        (
            ErrorKind::CollectivesHang,
            NRT_EXEC_HW_ERR_COLLECTIVES,
            1200,
        ),
        (ErrorKind::DmaAbort, NRT_EXEC_HW_ERR_DMA_ABORT, 1203),
        (
            ErrorKind::ExecUnitUnrecoverable,
            NRT_EXEC_UNIT_UNRECOVERABLE,
            101,
        ),
        // include/nrt/nrt_status.h (the vendor's header): NRT_NETWORK_PROXY_FAILURE = 1206.
        (ErrorKind::NetworkProxy, NRT_NETWORK_PROXY_FAILURE, 1206),
    ];
    for k in ErrorKind::ALL {
        assert!(
            cases.iter().any(|c| c.0 == k),
            "{k:?} has no row here: every kind's status is pinned to its spec number"
        );
    }
    for (k, s, n) in cases {
        let st = status_of(&Error::new(k, "x"));
        assert_eq!(st, s);
        assert_eq!(st as i32, n, "docs/contract/abi.md §2.1 value of {s:?}");
        // The name the core gives the kind is the header's name of its status.
        // SAFETY: nrt_get_status_as_str returns a static NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(crate::abi::nrt::nrt_get_status_as_str(n)) };
        assert_eq!(k.status_name(), name.to_str().unwrap(), "{k:?}");
    }
}

#[test]
fn panics_become_failure() {
    let s = enter_status("test_panic", Guard::None, || {
        if true {
            panic!("boom");
        }
        Ok(())
    });
    assert_eq!(s, nrt_status::NRT_FAILURE);
    let v: usize = enter_value("test_panic_value", Guard::None, 7, || panic!("boom"));
    assert_eq!(v, 7);
}

#[test]
fn errors_map_and_success_is_zero() {
    let s = enter_status("test_err", Guard::None, || Err(Error::invalid("bad")));
    assert_eq!(s, NRT_INVALID);
    let s = enter_status("test_ok", Guard::None, || Ok(()));
    assert_eq!(s, NRT_SUCCESS);
}

#[test]
fn pointer_helpers_reject_null() {
    assert!(non_null(std::ptr::null::<u8>(), "x").is_err());
    // SAFETY: NULL is an allowed input of these helpers.
    unsafe {
        assert!(out_param(std::ptr::null_mut::<u32>(), "out").is_err());
        assert!(in_ref(std::ptr::null::<u32>(), "in").is_err());
        assert!(req_cstr(std::ptr::null(), "s").is_err());
        assert!(bytes(std::ptr::null(), 0, "b").unwrap().is_empty());
        assert!(bytes(std::ptr::null(), 1, "b").is_err());
    }
    let mut buf = [1 as c_char; 4];
    fill_c_chars(&mut buf, "abcdef");
    assert_eq!(buf, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
}
