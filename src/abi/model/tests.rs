use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn guarded_then_arguments_checked() {
    testing::uninit(|| {
        // SAFETY: NULL arguments are never dereferenced by these entry points.
        unsafe {
            assert_eq!(nrt_load(null(), 0, 0, 1, null_mut()), NRT_UNINITIALIZED);
            assert_eq!(
                nrt_execute(null_mut(), null(), null_mut()),
                NRT_UNINITIALIZED
            );
            assert_eq!(
                nrt_get_model_tensor_info(null_mut(), null_mut()),
                NRT_UNINITIALIZED
            );
        }
        assert_eq!(nrt_async_drain_queued_execs(0), NRT_UNINITIALIZED);
    });
    testing::init(|| {
        let neff = [0u8; 1024];
        let mut model: *mut nrt_model_t = null_mut();
        let fake = 0x1000 as *mut nrt_model_t; // never dereferenced: not in the live table
        let set = 0x2000 as *mut nrt_tensor_set_t;
        let mut n = 0u32;
        // SAFETY: `neff`, `model` and `n` are live locals of the sizes passed; NULLs are refused
        // by the entries; the fake handles are only looked up in the live table, never read.
        unsafe {
            // NULL pointers: NRT_INVALID (2).
            assert_eq!(nrt_load(null(), 0, 0, 1, &mut model), NRT_INVALID);
            assert_eq!(
                nrt_load(neff.as_ptr().cast(), 0, 0, 1, &mut model),
                NRT_INVALID
            );
            assert_eq!(
                nrt_load(neff.as_ptr().cast(), 1024, 0, 1, null_mut()),
                NRT_INVALID
            );
            assert_eq!(nrt_unload(null_mut()), NRT_INVALID);
            assert_eq!(nrt_execute(fake, null(), set), NRT_INVALID);
            assert_eq!(nrt_execute_repeat(fake, set, set, 0), NRT_INVALID);
            assert_eq!(nrt_get_model_nc_count(fake, null_mut()), NRT_INVALID);
            assert_eq!(
                nrt_register_async_exec_callback(None, null_mut()),
                NRT_INVALID
            );
            // A model that cannot be live: NRT_INVALID_HANDLE (3).
            assert_eq!(nrt_unload(fake), NRT_INVALID_HANDLE);
            assert_eq!(nrt_execute(fake, set, set), NRT_INVALID_HANDLE);
            assert_eq!(nrt_get_model_nc_count(fake, &mut n), NRT_INVALID_HANDLE);
            assert_eq!(
                nrt_free_model_tensor_info(0x3000 as *mut _),
                NRT_INVALID_HANDLE
            );
            // A header with nothing after it: the NEFF is refused (NRT_INVALID), nothing
            // written.
            assert_eq!(
                nrt_load(neff.as_ptr().cast(), 1024, 0, 1, &mut model),
                NRT_INVALID
            );
            assert!(model.is_null());
            // vnc_count above 1: NRT_LOAD_NOT_ENOUGH_NC (9), before the NEFF is read.
            assert_eq!(
                nrt_load(neff.as_ptr().cast(), 1024, 0, 2, &mut model),
                NRT_LOAD_NOT_ENOUGH_NC
            );
            assert!(model.is_null());
            // The legacy drain has nothing to wait for; a core that is not visible is refused.
            assert_eq!(nrt_async_drain_queued_execs(0), NRT_SUCCESS);
            assert_eq!(nrt_async_drain_queued_execs(-1), NRT_INVALID);
        }
        assert_eq!(n, 0);
    });
}
