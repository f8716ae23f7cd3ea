use super::*;
use crate::abi::handle::testing;
use crate::abi::inspect_config::{nrt_inspect_config_allocate, nrt_inspect_config_free};
use std::ptr::{null, null_mut};

#[test]
fn begin_stop_are_guarded_then_succeed() {
    testing::uninit(|| {
        assert_eq!(nrt_inspect_begin() as i32, 13);
        assert_eq!(nrt_inspect_stop() as i32, 13);
    });
    testing::init(|| {
        let mut o = null_mut();
        // SAFETY: `o` is writable; handles are checked.
        unsafe {
            assert_eq!(nrt_inspect_begin() as i32, 0);
            assert_eq!(nrt_inspect_config_allocate(&mut o) as i32, 0);
            assert_eq!(nrt_inspect_begin_with_options(o) as i32, 0);
            assert_eq!(nrt_inspect_begin_with_options(null_mut()) as i32, 2);
            assert_eq!(nrt_inspect_stop() as i32, 0);
            assert_eq!(nrt_inspect_config_free(o) as i32, 0);
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
            nrt_inspect_get_instance_output_dir(c"/tmp/out/".as_ptr(), buf.as_mut_ptr(), want.len())
                as i32,
            4
        );
        assert_eq!(buf[0], 1, "nothing written when too small");
        assert_eq!(
            nrt_inspect_get_instance_output_dir(c"/tmp/out/".as_ptr(), buf.as_mut_ptr(), buf.len())
                as i32,
            0
        );
        assert_eq!(
            std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().unwrap(),
            want
        );
        assert_eq!(
            nrt_inspect_get_instance_output_dir(null(), buf.as_mut_ptr(), buf.len()) as i32,
            2
        );
        assert_eq!(
            nrt_inspect_get_instance_output_dir(c"".as_ptr(), buf.as_mut_ptr(), buf.len()) as i32,
            2
        );
        assert_eq!(
            nrt_inspect_get_instance_output_dir(c"/x".as_ptr(), null_mut(), 64) as i32,
            2
        );
    }
}
