use super::*;
use std::ptr::{null, null_mut};

#[test]
fn limits_are_real_and_unguarded() {
    let mut n = 0;
    // SAFETY: `n` is writable; NULL is checked.
    unsafe {
        assert_eq!(
            nrt_async_sendrecv_get_max_num_communicators_per_lnc(&mut n) as i32,
            0
        );
        assert_eq!(n, 128);
        n = 0;
        assert_eq!(
            nrt_async_sendrecv_get_max_num_pending_request(&mut n) as i32,
            0
        );
        assert_eq!(n, 128);
        assert_eq!(
            nrt_async_sendrecv_get_max_num_pending_request(null_mut()) as i32,
            2
        );
    }
}

#[test]
fn the_rest_fails_without_a_guard() {
    // No lifecycle guard: NRT_FAILURE (not 13) in any state.
    assert_eq!(nrt_async_sendrecv_init(0) as i32, 1);
    assert_eq!(nrt_async_sendrecv_flush(0) as i32, 1);
    // SAFETY: the stubs never dereference their arguments.
    unsafe {
        assert_eq!(
            nrt_async_sendrecv_connect(null(), 0, 0, null_mut()) as i32,
            1
        );
        assert_eq!(
            nrt_async_sendrecv_test_request(null_mut(), null_mut(), null_mut()) as i32,
            1
        );
    }
}
