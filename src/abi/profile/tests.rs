use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn options_allocate_set_free() {
    let mut o = null_mut();
    // SAFETY: `o` is writable; the functions check every handle.
    unsafe {
        assert_eq!(
            nrt_profile_continuous_options_allocate(null_mut()),
            NRT_INVALID
        );
        assert_eq!(nrt_profile_continuous_options_allocate(&mut o), NRT_SUCCESS);
        assert!(!o.is_null());
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(o, c"/tmp/p".as_ptr()),
            NRT_SUCCESS
        );
        let got = handle::get::<ContinuousOptions>(o, "o")
            .unwrap()
            .output_dir
            .lock()
            .clone();
        assert_eq!(got.as_deref(), Some("/tmp/p"));
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(o, null()),
            NRT_INVALID
        );
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(o, c"".as_ptr()),
            NRT_INVALID
        );
        assert_eq!(
            nrt_profile_continuous_options_set_output_dir(null_mut(), c"/x".as_ptr()),
            NRT_INVALID
        );
        assert_eq!(nrt_profile_continuous_options_free(o), NRT_SUCCESS);
        assert_eq!(
            nrt_profile_continuous_options_free(o),
            NRT_INVALID_HANDLE,
            "double free detected"
        );
        assert_eq!(nrt_profile_continuous_options_free(null_mut()), NRT_SUCCESS);
    }
}

#[test]
fn guarded_before_init() {
    testing::uninit(|| {
        assert_eq!(nrt_profile_session_start(0), NRT_UNINITIALIZED);
        assert_eq!(nrt_profile_continuous_stop(), NRT_UNINITIALIZED);
        // SAFETY: NULLs are checked.
        unsafe {
            assert_eq!(nrt_profile_stop(null()), NRT_UNINITIALIZED);
            assert_eq!(nrt_profile_continuous_start(null_mut()), NRT_UNINITIALIZED);
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
            assert_eq!(nrt_profile_start(fake_model, c"f".as_ptr()), NRT_SUCCESS);
            assert_eq!(nrt_profile_start(null_mut(), c"f".as_ptr()), NRT_INVALID);
            assert_eq!(nrt_profile_stop(c"f".as_ptr()), NRT_SUCCESS);
            assert_eq!(
                nrt_profile_session_stop(1, &mut id),
                NRT_INVALID,
                "no open session"
            );
            assert_eq!(nrt_profile_session_start(1), NRT_SUCCESS);
            assert_eq!(nrt_profile_session_start(1), NRT_INVALID, "one per core");
            assert_eq!(nrt_profile_session_start(-1), NRT_INVALID);
            assert_eq!(nrt_profile_session_start(1 << 20), NRT_INVALID);
            assert_eq!(nrt_profile_session_stop(1, null_mut()), NRT_INVALID);
            assert_eq!(nrt_profile_session_stop(1, &mut id), NRT_SUCCESS);
            assert!(id >= 1);
            assert_eq!(
                nrt_profile_session_serialize(id, c"s.ntff".as_ptr()),
                NRT_SUCCESS
            );
            assert_eq!(nrt_profile_session_serialize(id, null()), NRT_INVALID);
            assert_eq!(nrt_profile_session_drop(id), NRT_SUCCESS);
            assert_eq!(nrt_profile_session_drop(id), NRT_INVALID);
            assert_eq!(
                nrt_profile_session_serialize(id, c"s".as_ptr()),
                NRT_INVALID
            );
            assert_eq!(nrt_profile_session_drop_all(1), NRT_SUCCESS);

            let mut o = null_mut();
            assert_eq!(nrt_profile_continuous_options_allocate(&mut o), NRT_SUCCESS);
            assert_eq!(nrt_profile_continuous_start(o), NRT_SUCCESS);
            assert_eq!(nrt_profile_continuous_start(null_mut()), NRT_SUCCESS);
            assert_eq!(nrt_profile_continuous_save(0, o), NRT_SUCCESS);
            assert_eq!(nrt_profile_continuous_stop(), NRT_SUCCESS);
            assert_eq!(nrt_profile_continuous_options_free(o), NRT_SUCCESS);
            assert_eq!(
                nrt_profile_continuous_start(o),
                NRT_INVALID_HANDLE,
                "freed handle rejected"
            );
        }
    });
}
