use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::null_mut;

#[test]
fn guard_and_argument_errors() {
    testing::uninit(|| {
        assert_eq!(nrt_build_global_comm(0, 0, 1), NRT_UNINITIALIZED);
        assert_eq!(nrt_cc_global_comm_init(0, 0, 1), NRT_UNINITIALIZED);
        assert_eq!(nrt_barrier(0, 0, 1), NRT_UNINITIALIZED);
        // SAFETY: rejected by the guard before any pointer is used.
        let st = unsafe { nrt_all_gather(0, 0, 1, 0, null_mut(), null_mut()) };
        assert_eq!(st, NRT_UNINITIALIZED);
    });
    testing::init(|| {
        comm::reset();
        assert_eq!(nrt_cc_create_stream(1), NRT_SUCCESS);
        assert_eq!(nrt_cc_create_stream(9), NRT_INVALID);
        assert_eq!(nrt_cc_global_comm_init(0, 1, 1), NRT_INVALID); // id outside world
        assert_eq!(nrt_cc_global_comm_init(100_000, 0, 1), NRT_INVALID); // not visible
        assert_eq!(nrt_build_global_comm(-1, 0, 1), NRT_INVALID);
        assert_eq!(nrt_barrier(300, 0, 1), NRT_INVALID);
        assert_eq!(nrt_cc_global_comm_init(0, 0, 2), NRT_SUCCESS);
        assert_eq!(nrt_cc_global_comm_init(0, 0, 2), NRT_SUCCESS); // idempotent
        assert_eq!(nrt_cc_global_comm_init(1, 1, 3), NRT_INVALID); // immutable world
                                                                   // A one-rank world: the barrier runs on the device, the all-gather copies.
        assert_eq!(nrt_barrier(0, 0, 1), NRT_SUCCESS);
        let mut input = [1u8, 2, 3];
        let mut out = [9u8; 3];
        // SAFETY: valid buffers of the stated sizes.
        let st = unsafe {
            nrt_all_gather(
                0,
                0,
                1,
                3,
                input.as_mut_ptr().cast(),
                out.as_mut_ptr().cast(),
            )
        };
        assert_eq!(st, NRT_SUCCESS);
        assert_eq!(out, [1, 2, 3]);
        // SAFETY: NULL input with a size is rejected before use.
        let st = unsafe { nrt_all_gather(0, 0, 1, 3, null_mut(), out.as_mut_ptr().cast()) };
        assert_eq!(st, NRT_INVALID);
        // SAFETY: NULL output is rejected before use.
        let st = unsafe { nrt_all_gather(0, 0, 1, 3, input.as_mut_ptr().cast(), null_mut()) };
        assert_eq!(st, NRT_INVALID);
        comm::reset();
    });
}
