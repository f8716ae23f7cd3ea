use super::*;
use crate::abi::handle::testing;
use std::ptr::{null, null_mut};

#[test]
fn options_allocate_set_free() {
    let mut o = null_mut();
    // SAFETY: `o` is writable; the functions check every handle.
    unsafe {
        assert_eq!(
            nrt_profile_continuous_options_allocate(null_mut()) as i32,
            2
        );
        assert_eq!(nrt_profile_continuous_options_allocate(&mut o) as i32, 0);
        assert!(!o.is_null());
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(o, c"/tmp/p".as_ptr()) as i32,
            0
        );
        let got = handle::get::<ContinuousOptions>(o, "o")
            .unwrap()
            .output_dir
            .lock()
            .clone();
        assert_eq!(got.as_deref(), Some("/tmp/p"));
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(o, null()) as i32,
            2
        );
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(o, c"".as_ptr()) as i32,
            2
        );
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(null_mut(), c"/x".as_ptr()) as i32,
            2
        );
        assert_eq!(nrt_profile_continuous_options_free(o) as i32, 0);
        assert_eq!(
            nrt_profile_continuous_options_free(o) as i32,
            3,
            "double free detected"
        );
        assert_eq!(nrt_profile_continuous_options_free(null_mut()) as i32, 0);
    }
}

#[test]
fn guarded_before_init() {
    testing::uninit(|| {
        assert_eq!(nrt_profile_session_start(0) as i32, 13);
        assert_eq!(nrt_profile_continuous_stop() as i32, 13);
        // SAFETY: NULLs are checked.
        unsafe {
            assert_eq!(nrt_profile_stop(null()) as i32, 13);
            assert_eq!(nrt_profile_continuous_start(null_mut()) as i32, 13);
        }
    });
}

#[test]
fn sessions_and_no_ops_after_init() {
    testing::init(|| {
        let mut id = 0u64;
        // SAFETY: locals are writable; strings are NUL-terminated; NULLs are checked.
        unsafe {
            let fake_model = std::ptr::NonNull::<nrt_model_t>::dangling().as_ptr();
            assert_eq!(nrt_profile_start(fake_model, c"f".as_ptr()) as i32, 0);
            assert_eq!(nrt_profile_start(null_mut(), c"f".as_ptr()) as i32, 2);
            assert_eq!(nrt_profile_stop(c"f".as_ptr()) as i32, 0);
            assert_eq!(
                nrt_profile_session_stop(1, &mut id) as i32,
                2,
                "no open session"
            );
            assert_eq!(nrt_profile_session_start(1) as i32, 0);
            assert_eq!(nrt_profile_session_start(1) as i32, 2, "one per core");
            assert_eq!(nrt_profile_session_start(-1) as i32, 2);
            assert_eq!(nrt_profile_session_start(1 << 20) as i32, 2);
            assert_eq!(nrt_profile_session_stop(1, null_mut()) as i32, 2);
            assert_eq!(nrt_profile_session_stop(1, &mut id) as i32, 0);
            assert!(id >= 1);
            assert_eq!(
                nrt_profile_session_serialize(id, c"s.ntff".as_ptr()) as i32,
                0
            );
            assert_eq!(nrt_profile_session_serialize(id, null()) as i32, 2);
            assert_eq!(nrt_profile_session_drop(id) as i32, 0);
            assert_eq!(nrt_profile_session_drop(id) as i32, 2);
            assert_eq!(nrt_profile_session_serialize(id, c"s".as_ptr()) as i32, 2);
            assert_eq!(nrt_profile_session_drop_all(1) as i32, 0);

            let mut o = null_mut();
            assert_eq!(nrt_profile_continuous_options_allocate(&mut o) as i32, 0);
            assert_eq!(nrt_profile_continuous_start(o) as i32, 0);
            assert_eq!(nrt_profile_continuous_start(null_mut()) as i32, 0);
            assert_eq!(nrt_profile_continuous_save(0, o) as i32, 0);
            assert_eq!(nrt_profile_continuous_stop() as i32, 0);
            assert_eq!(nrt_profile_continuous_options_free(o) as i32, 0);
            assert_eq!(
                nrt_profile_continuous_start(o) as i32,
                3,
                "freed handle rejected"
            );
        }
    });
}
