use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn trace_is_guarded_then_succeeds() {
    testing::uninit(|| {
        assert_eq!(nrt_trace_start(true), NRT_UNINITIALIZED);
        // SAFETY: NULL is checked.
        assert_eq!(unsafe { nrt_trace_stop(null()) }, NRT_UNINITIALIZED);
    });
    testing::init(|| {
        assert_eq!(nrt_trace_start(false), NRT_SUCCESS);
        // SAFETY: a valid C string, and NULL which is checked.
        unsafe {
            assert_eq!(nrt_trace_stop(null()), NRT_INVALID);
            assert_eq!(nrt_trace_stop(c"/tmp/x.ntff".as_ptr()), NRT_SUCCESS);
        }
    });
}

#[test]
fn libnccl_net_reports_an_error() {
    let mut err = 0;
    let mut msg = [1 as c_char; 16];
    // SAFETY: writable locals of the given sizes; NULLs are allowed.
    unsafe {
        assert!(nrt_get_libnccl_net(&mut err, msg.as_mut_ptr(), msg.len()).is_null());
        assert_ne!(err, 0);
        let s = std::ffi::CStr::from_ptr(msg.as_ptr()).to_str().unwrap();
        assert_eq!(s, &NO_NET_PLUGIN[..15], "bounded and NUL-terminated");
        assert!(nrt_get_libnccl_net(null_mut(), null_mut(), 0).is_null());
        msg[0] = 5;
        assert!(nrt_get_libnccl_net(null_mut(), msg.as_mut_ptr(), 0).is_null());
        assert_eq!(msg[0], 5, "size 0 writes nothing");
    }
}

#[test]
fn pool_ucode_is_validated_and_copied() {
    let mut iram = vec![1u8, 2, 3];
    let dram = [9u8; 2];
    let mut info = nrt_ucode_info {
        iram: nrt_ucode_img {
            bin: iram.as_mut_ptr(),
            size: iram.len(),
        },
        dram: nrt_ucode_img {
            bin: dram.as_ptr().cast_mut(),
            size: dram.len(),
        },
    };
    testing::uninit(|| {
        // SAFETY: `info` points to live buffers of the stated sizes; NULL is checked.
        unsafe {
            assert_eq!(nrt_set_pool_eng_ucode(null()), NRT_INVALID);
            assert_eq!(nrt_set_pool_eng_ucode(&info), NRT_SUCCESS);
        }
        iram[0] = 42; // the library kept a copy
        let got = pool_eng_ucode().unwrap();
        assert_eq!((got.iram, got.dram), (vec![1, 2, 3], vec![9, 9]));
        info.iram.bin = null_mut();
        // SAFETY: `info` is a live local; the NULL IRAM `bin` is refused before any read, and
        // `dram` is a live buffer of the stated size.
        assert_eq!(unsafe { nrt_set_pool_eng_ucode(&info) }, NRT_INVALID);
        info.iram = nrt_ucode_img {
            bin: iram.as_mut_ptr(),
            size: 0,
        };
        // SAFETY: `info` is a live local; the empty IRAM image is refused before any read, and
        // `dram` is a live buffer of the stated size.
        assert_eq!(unsafe { nrt_set_pool_eng_ucode(&info) }, NRT_INVALID);
        info.iram.size = 1;
        info.dram = nrt_ucode_img {
            bin: null_mut(),
            size: 0,
        };
        // SAFETY: `info` is a live local whose IRAM `bin` points to 1 live byte of `iram`; the
        // DRAM image is empty, so its NULL `bin` is not read.
        assert_eq!(unsafe { nrt_set_pool_eng_ucode(&info) }, NRT_SUCCESS);
        assert_eq!(pool_eng_ucode().unwrap().iram, vec![42]);
    });
}
