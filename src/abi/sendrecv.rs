//! `nrt_async_sendrecv.h`: point-to-point async send/recv between logical cores, possibly on
//! other hosts (docs/contract/abi.md §3.7, §5.12; symbol node `NRT_2.0.0`).
//!
//! The vendor's entry points are unguarded thunks (the engine behind them checks the state,
//! spec §5.1), so these run with no lifecycle guard of their own. The two limit getters answer
//! with real constants; everything else returns `NRT_FAILURE` (WARNING logged once) until the
//! no open issue implements the transport yet (the multi-process issue, 6, is the natural home).

// The parameters are named for the header; the bodies use them once the transport lands.
#![allow(unused_variables)]

use std::ffi::{c_char, c_int};

use crate::abi::boundary::{not_implemented, out_param, Guard};
use crate::abi::types::*;
use crate::abi_entry;

/// Communicators per logical core (the vendor's connect-task ring holds 128; docs/contract/abi.md
/// §10 item 13).
pub const MAX_COMMUNICATORS_PER_LNC: c_int = 128;
/// Pending requests per communicator (docs/contract/abi.md §3.7).
pub const MAX_PENDING_REQUESTS: c_int = 128;

/// Maximum number of communicators per logical core: 128. Legal in any state.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `num` is NULL.
///
/// # Safety
/// `num` must be NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_get_max_num_communicators_per_lnc(
    num: *mut c_int,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_get_max_num_communicators_per_lnc", Guard::None, {
        // SAFETY: forwarded from this function's contract.
        unsafe { out_param(num, "num") }?.write(MAX_COMMUNICATORS_PER_LNC);
        Ok(())
    })
}

/// Maximum number of pending requests per communicator: 128. Legal in any state.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `num` is NULL.
///
/// # Safety
/// `num` must be NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_get_max_num_pending_request(
    num: *mut c_int,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_get_max_num_pending_request", Guard::None, {
        // SAFETY: forwarded from this function's contract.
        unsafe { out_param(num, "num") }?.write(MAX_PENDING_REQUESTS);
        Ok(())
    })
}

/// Start the send/recv service of absolute host logical core `lnc` (0–127). Requires
/// `NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1` and a bootstrap port.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core; `NRT_FAILURE` when the feature is disabled or
/// the runtime is not initialized. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
pub extern "C" fn nrt_async_sendrecv_init(lnc: c_int) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_init", Guard::None, {
        not_implemented("nrt_async_sendrecv_init")
    })
}

/// Stop the send/recv service of `lnc`; fails with open communicators or requests in flight.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_FAILURE` otherwise. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
pub extern "C" fn nrt_async_sendrecv_close(lnc: c_int) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_close", Guard::None, {
        not_implemented("nrt_async_sendrecv_close")
    })
}

/// Start connecting (sender side, non-blocking) from local core `lnc` to `peer_lnc` at
/// `peer_ip`; poll `nrt_async_sendrecv_test_comm` until done.
///
/// # Returns
/// `NRT_SUCCESS` with `*send_comm` set; `NRT_INVALID`; `NRT_RESOURCE` beyond the communicator
/// limit. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
///
/// # Safety
/// `peer_ip` must be NUL-terminated; `send_comm` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_connect(
    peer_ip: *const c_char,
    peer_lnc: c_int,
    lnc: c_int,
    send_comm: *mut *mut nrt_async_sendrecv_comm_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_connect", Guard::None, {
        not_implemented("nrt_async_sendrecv_connect")
    })
}

/// Start accepting (receiver side, non-blocking) a connection from `peer_lnc` at `peer_ip`.
///
/// # Returns
/// As `nrt_async_sendrecv_connect`. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
///
/// # Safety
/// `peer_ip` must be NUL-terminated; `recv_comm` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_accept(
    peer_ip: *const c_char,
    peer_lnc: c_int,
    lnc: c_int,
    recv_comm: *mut *mut nrt_async_sendrecv_comm_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_accept", Guard::None, {
        not_implemented("nrt_async_sendrecv_accept")
    })
}

/// Non-blocking: has the communicator finished connecting?
///
/// # Returns
/// `NRT_SUCCESS` with `*done` set; `NRT_TIMEOUT` if the connection did not form in time;
/// `NRT_INVALID`. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
///
/// # Safety
/// `comm` must be a live communicator; `done` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_test_comm(
    comm: *mut nrt_async_sendrecv_comm_t,
    done: *mut bool,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_test_comm", Guard::None, {
        not_implemented("nrt_async_sendrecv_test_comm")
    })
}

/// Post a non-blocking send of `length` bytes of `tensor` at `offset`.
///
/// # Returns
/// `NRT_SUCCESS` with `*request` set; `NRT_INVALID` (bounds, unconnected comm); `NRT_RESOURCE`
/// beyond 128 pending requests. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
///
/// # Safety
/// `tensor` and `send_comm` must be live; `request` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_send_tensor(
    tensor: *mut nrt_tensor_t,
    offset: usize,
    length: usize,
    send_comm: *mut nrt_async_sendrecv_comm_t,
    request: *mut *mut nrt_async_sendrecv_request_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_send_tensor", Guard::None, {
        not_implemented("nrt_async_sendrecv_send_tensor")
    })
}

/// Post a non-blocking receive of up to `length` bytes into `tensor` at `offset`.
///
/// # Returns
/// As `nrt_async_sendrecv_send_tensor`. Currently `NRT_FAILURE`: not implemented yet (no issue scheduled).
///
/// # Safety
/// `tensor` and `recv_comm` must be live; `request` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_recv_tensor(
    tensor: *mut nrt_tensor_t,
    offset: usize,
    length: usize,
    recv_comm: *mut nrt_async_sendrecv_comm_t,
    request: *mut *mut nrt_async_sendrecv_request_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_recv_tensor", Guard::None, {
        not_implemented("nrt_async_sendrecv_recv_tensor")
    })
}

/// Non-blocking: has the request completed, and how many bytes moved? A request reported done
/// is recycled and must not be tested again.
///
/// # Returns
/// `NRT_SUCCESS` with `*done` (and `*size` when done) set; `NRT_INVALID`. Currently
/// `NRT_FAILURE`: not implemented yet (no issue scheduled).
///
/// # Safety
/// `request` must be live; `done` and `size` NULL or writable.
pub unsafe extern "C" fn nrt_async_sendrecv_test_request(
    request: *mut nrt_async_sendrecv_request_t,
    done: *mut bool,
    size: *mut usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_test_request", Guard::None, {
        not_implemented("nrt_async_sendrecv_test_request")
    })
}

/// Make completed receives on `lnc` visible in memory.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core. Currently `NRT_FAILURE`: not implemented yet (the async send/recv transport).
pub extern "C" fn nrt_async_sendrecv_flush(lnc: c_int) -> NRT_STATUS {
    abi_entry!(status "nrt_async_sendrecv_flush", Guard::None, {
        not_implemented("nrt_async_sendrecv_flush")
    })
}

#[cfg(test)]
mod tests;
