use super::*;
use crate::abi::handle::testing;
use crate::abi::inspect_config::{nrt_inspect_config_allocate, nrt_inspect_config_free};
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn begin_stop_are_guarded_then_succeed() {
    testing::uninit(|| {
        assert_eq!(nrt_inspect_begin(), NRT_UNINITIALIZED);
        assert_eq!(nrt_inspect_stop(), NRT_UNINITIALIZED);
    });
    testing::init(|| {
        let mut o = null_mut();
        // SAFETY: `o` is writable; handles are checked.
        unsafe {
            assert_eq!(nrt_inspect_begin(), NRT_SUCCESS);
            assert_eq!(nrt_inspect_config_allocate(&mut o), NRT_SUCCESS);
            assert_eq!(nrt_inspect_begin_with_options(o), NRT_SUCCESS);
            assert_eq!(nrt_inspect_begin_with_options(null_mut()), NRT_INVALID);
            assert_eq!(nrt_inspect_stop(), NRT_SUCCESS);
            assert_eq!(nrt_inspect_config_free(o), NRT_SUCCESS);
        }
    });
}

#[test]
fn instance_output_dir_is_bounded() {
    let want = instance_output_dir("/tmp/out/");
    assert!(
        want.starts_with("/tmp/out/") && want.ends_with(&format!("_pid{}", std::process::id())),
        "{want}"
    );
    let mut buf = vec![1 as c_char; want.len() + 1];
    // SAFETY: `buf` is writable for its length; strings are NUL-terminated.
    unsafe {
        assert_eq!(
            nrt_inspect_get_instance_output_dir(
                c"/tmp/out/".as_ptr(),
                buf.as_mut_ptr(),
                want.len()
            ),
            NRT_RESOURCE
        );
        assert_eq!(buf[0], 1, "nothing written when too small");
        assert_eq!(
            nrt_inspect_get_instance_output_dir(c"/tmp/out/".as_ptr(), buf.as_mut_ptr(), buf.len()),
            NRT_SUCCESS
        );
        assert_eq!(
            std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
            want
        );
        assert_eq!(
            nrt_inspect_get_instance_output_dir(null(), buf.as_mut_ptr(), buf.len()),
            NRT_INVALID
        );
        assert_eq!(
            nrt_inspect_get_instance_output_dir(c"".as_ptr(), buf.as_mut_ptr(), buf.len()),
            NRT_INVALID
        );
        assert_eq!(
            nrt_inspect_get_instance_output_dir(c"/x".as_ptr(), null_mut(), 64),
            NRT_INVALID
        );
    }
}
