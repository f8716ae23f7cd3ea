use super::*;
use crate::abi::handle::testing;
use crate::status::nrt_status::*;
use std::ptr::{null, null_mut};

#[test]
fn limits_are_real_and_unguarded() {
    let mut n = 0;
    // SAFETY: `n` is writable; NULL is checked.
    unsafe {
        assert_eq!(
            nrt_async_sendrecv_get_max_num_communicators_per_lnc(&mut n),
            NRT_SUCCESS
        );
        assert_eq!(n, 128);
        n = 0;
        assert_eq!(
            nrt_async_sendrecv_get_max_num_pending_request(&mut n),
            NRT_SUCCESS
        );
        assert_eq!(n, 128);
        assert_eq!(
            nrt_async_sendrecv_get_max_num_pending_request(null_mut()),
            NRT_INVALID
        );
    }
}

#[test]
fn init_needs_a_runtime_and_a_real_core() {
    testing::uninit(|| {
        // No lifecycle guard: NRT_FAILURE (not 13) before nrt_init.
        assert_eq!(nrt_async_sendrecv_init(0), NRT_FAILURE);
        assert_eq!(nrt_async_sendrecv_init(-1), NRT_INVALID);
        assert_eq!(nrt_async_sendrecv_init(128), NRT_INVALID);
    });
}

#[test]
fn init_is_gated_by_the_feature_variable() {
    // The test environment does not set NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED.
    testing::init(|| {
        assert_eq!(nrt_async_sendrecv_init(0), NRT_FAILURE);
    });
    // A real nrt_init with the variable set, and with it unset, in this one process.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
        .to_string();
    let enabled = [
        ("NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED", "1"),
        ("NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT", port.as_str()),
    ];
    testing::with_runtime(&enabled, || {
        assert_eq!(nrt_async_sendrecv_init(0), NRT_STATUS::NRT_SUCCESS);
        assert_eq!(nrt_async_sendrecv_close(0), NRT_STATUS::NRT_SUCCESS);
    });
    testing::with_runtime(&[], || {
        assert_eq!(nrt_async_sendrecv_init(0), NRT_STATUS::NRT_FAILURE);
    });
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let ip = c"127.0.0.1";
    let mut comm: *mut nrt_async_sendrecv_comm_t = null_mut();
    let mut done = true;
    // SAFETY: NULLs and dangling-free handles are what the entries check.
    unsafe {
        assert_eq!(
            nrt_async_sendrecv_connect(null(), 0, 1, &mut comm),
            NRT_INVALID
        );
        assert_eq!(
            nrt_async_sendrecv_accept(ip.as_ptr(), 0, 1, null_mut()),
            NRT_INVALID
        );
        assert_eq!(
            nrt_async_sendrecv_connect(ip.as_ptr(), -3, 1, &mut comm),
            NRT_INVALID
        );
        assert_eq!(
            nrt_async_sendrecv_connect(ip.as_ptr(), 0, 999, &mut comm),
            NRT_INVALID
        );
        assert!(comm.is_null(), "nothing written on failure");
        // A core whose service never started.
        assert_eq!(
            nrt_async_sendrecv_connect(ip.as_ptr(), 0, 127, &mut comm),
            NRT_FAILURE
        );
        assert_eq!(nrt_async_sendrecv_flush(127), NRT_FAILURE);
        assert_eq!(nrt_async_sendrecv_flush(-1), NRT_INVALID);
        assert_eq!(nrt_async_sendrecv_close(127), NRT_FAILURE);
        assert_eq!(
            nrt_async_sendrecv_test_request(null_mut(), &mut done, null_mut()),
            NRT_INVALID
        );
        assert_eq!(
            nrt_async_sendrecv_test_comm(null_mut(), &mut done),
            NRT_INVALID
        );
        // An address that is no handle: NRT_INVALID_HANDLE, never dereferenced.
        let fake = 0x1000 as *mut nrt_async_sendrecv_comm_t;
        assert_eq!(
            nrt_async_sendrecv_test_comm(fake, &mut done),
            NRT_INVALID_HANDLE
        );
        assert!(done, "nothing written on failure");
    }
}
