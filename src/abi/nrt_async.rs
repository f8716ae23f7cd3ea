//! `nrt_async.h`: the explicit async API, async 3.0 generation (runtime 2.31+, "GEN-B"; symbol
//! node `NRT_3.0.0`; spec/nrt-abi.md §3.6, §5.3–§5.6, design.md §2.4). Only the GEN-B
//! prototypes are exported: per-request `NRT_STATUS *exec_ret`, `lnc_idx` on the tensor
//! functions, `nrta_xu_t` numbered TENSOR_OP 0 / COMPUTE 1 / COLLECTIVES 2, and the 2.32
//! event-fd registration pair.
//!
//! Implemented by the C ABI issue (issue 5); until then each entry point runs the lifecycle
//! guard (`NRT_UNINITIALIZED` before `nrt_init`) and returns `NRT_FAILURE`, logging a WARNING
//! once. No argument is dereferenced and no out-parameter is written.

// The parameters are named for the header; the bodies use them once issue 5 lands.
#![allow(unused_variables)]

use std::ffi::{c_int, c_void};

use crate::abi::boundary::{not_implemented, Guard};
use crate::abi::types::*;
use crate::abi_entry;

/// Queue a write of `size` bytes from `buf` into `tensor` at `offset` on the tensor-op
/// execution unit `queue` (0–1) of logical core `lnc_idx`. The return value is the enqueue
/// status; the operation's own status is written to `*exec_ret` when it completes.
///
/// # Returns
/// `NRT_SUCCESS` (queued, `*req_sequence` set); `NRT_INVALID` for bad arguments or queue;
/// `NRT_QUEUE_FULL`; `NRT_EXEC_UNIT_UNRECOVERABLE`; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `buf` must stay readable for `size` bytes and `exec_ret` writable until completion;
/// `tensor` must be a live tensor; `req_sequence` NULL or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn nrta_tensor_write(
    tensor: *mut nrt_tensor_t,
    buf: *const c_void,
    offset: u64,
    size: u64,
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_tensor_write", Guard::Lifecycle, { not_implemented("nrta_tensor_write") })
}

/// Queue a read of `size` bytes of `tensor` at `offset` into `buf` (see `nrta_tensor_write`).
///
/// # Returns
/// As `nrta_tensor_write`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `buf` must stay writable for `size` bytes and `exec_ret` until completion; `tensor` must be
/// a live tensor; `req_sequence` NULL or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn nrta_tensor_read(
    buf: *mut c_void,
    tensor: *mut nrt_tensor_t,
    offset: u64,
    size: u64,
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_tensor_read", Guard::Lifecycle, { not_implemented("nrta_tensor_read") })
}

/// Queue a copy of `size` bytes between two device tensors of the same device.
///
/// # Returns
/// As `nrta_tensor_write`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `src` and `dst` must be live tensors; `exec_ret` writable until completion; `req_sequence`
/// NULL or writable.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn nrta_tensor_copy(
    src: *mut nrt_tensor_t,
    src_offset: u64,
    dst: *mut nrt_tensor_t,
    dst_offset: u64,
    size: u64,
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_tensor_copy", Guard::Lifecycle, { not_implemented("nrta_tensor_copy") })
}

/// Queue an execution of `model` on its core's compute execution unit (`queue` must be 0).
///
/// # Returns
/// As `nrta_tensor_write`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `model`, `input` and `output` must be live handles that stay alive until completion;
/// `exec_ret` writable until completion; `req_sequence` NULL or writable.
pub unsafe extern "C" fn nrta_execute_schedule(
    model: *mut nrt_model_t,
    input: *const nrt_tensor_set_t,
    output: *mut nrt_tensor_set_t,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_execute_schedule", Guard::Lifecycle, {
        not_implemented("nrta_execute_schedule")
    })
}

/// Prepare a host-driven collective over `comm`: lower it to device programs and return a
/// context that `nrta_cc_schedule` consumes.
///
/// # Returns
/// `NRT_SUCCESS` with `*cc_ctx` set; `NRT_INVALID` for bad arguments (dtype, op, sizes,
/// communicator); `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not
/// implemented until issue 5.
///
/// # Safety
/// `comm`, `input` and `output` must be valid for reads; their tensors live; `cc_ctx` NULL or
/// writable.
pub unsafe extern "C" fn nrta_cc_prepare(
    comm: *mut nrt_cc_comm_t,
    input: *mut nrt_tensor_list_t,
    output: *mut nrt_tensor_list_t,
    dtype: RawDtype,
    op: RawOpType,
    cc_op: RawCcOpType,
    cc_ctx: *mut *mut nrt_cc_context_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_cc_prepare", Guard::Lifecycle, { not_implemented("nrta_cc_prepare") })
}

/// Queue a prepared collective on the collectives execution unit `queue` (0–2). On success the
/// runtime takes the context and sets `*cc_ctx` to NULL.
///
/// # Returns
/// As `nrta_tensor_write`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `cc_ctx` must point to a context from `nrta_cc_prepare`; `exec_ret` writable until
/// completion; `req_sequence` NULL or writable.
pub unsafe extern "C" fn nrta_cc_schedule(
    cc_ctx: *mut *mut nrt_cc_context_t,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_cc_schedule", Guard::Lifecycle, { not_implemented("nrta_cc_schedule") })
}

/// Non-blocking: has the request `seq` (passed by value) completed?
///
/// # Returns
/// `NRT_SUCCESS` with `*is_completed` set; `NRT_INVALID` for a sequence id naming no execution
/// unit or a NULL pointer; `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not
/// implemented until issue 5.
///
/// # Safety
/// `is_completed` must be NULL or writable.
pub unsafe extern "C" fn nrta_is_completed(seq: nrta_seq_t, is_completed: *mut bool) -> NRT_STATUS {
    abi_entry!(status "nrta_is_completed", Guard::Lifecycle, { not_implemented("nrta_is_completed") })
}

/// The last completed sequence id of execution unit (`lnc`, `xu`, `queue`), encoded with its
/// XU id (counter 0 before any completion).
///
/// # Returns
/// `NRT_SUCCESS` with `*seq` set; `NRT_INVALID` for a bad core, XU type or queue;
/// `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `seq` must be NULL or writable.
pub unsafe extern "C" fn nrta_get_sequence(
    lnc: u32,
    xu: RawXu,
    queue: c_int,
    seq: *mut nrta_seq_t,
) -> NRT_STATUS {
    abi_entry!(status "nrta_get_sequence", Guard::Lifecycle, { not_implemented("nrta_get_sequence") })
}

/// Signal the caller's eventfd `fd` (by writing 1) when `seq` completes, at once if it already
/// has; `fd = -1` deregisters.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad sequence id or fd; `NRT_UNINITIALIZED` before
/// `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
pub extern "C" fn nrta_event_register_seq_id_completion(seq: nrta_seq_t, fd: c_int) -> NRT_STATUS {
    abi_entry!(status "nrta_event_register_seq_id_completion", Guard::Lifecycle, {
        not_implemented("nrta_event_register_seq_id_completion")
    })
}

/// Signal the caller's eventfd `fd` every time execution unit (`lnc`, `xu`, `queue`) completes
/// a request; `fd = -1` deregisters.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core, XU type, queue or fd; `NRT_UNINITIALIZED`
/// before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
pub extern "C" fn nrta_event_register_xu_completion(
    lnc: c_int,
    xu: RawXu,
    queue: c_int,
    fd: c_int,
) -> NRT_STATUS {
    abi_entry!(status "nrta_event_register_xu_completion", Guard::Lifecycle, {
        not_implemented("nrta_event_register_xu_completion")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::handle::testing;
    use std::ptr::{null, null_mut};

    #[test]
    fn guarded_then_not_implemented() {
        testing::uninit(|| {
            // SAFETY: NULL arguments are never dereferenced by these entry points.
            unsafe {
                assert_eq!(
                    nrta_tensor_write(null_mut(), null(), 0, 0, 0, 0, null_mut(), null_mut())
                        as i32,
                    13
                );
                assert_eq!(nrta_is_completed(1, null_mut()) as i32, 13);
                assert_eq!(nrta_get_sequence(0, 0, 0, null_mut()) as i32, 13);
            }
            assert_eq!(nrta_event_register_xu_completion(0, 0, 0, -1) as i32, 13);
        });
        testing::init(|| {
            let mut seq: nrta_seq_t = 77;
            // SAFETY: as above; `seq` is writable.
            unsafe {
                assert_eq!(nrta_get_sequence(0, 0, 0, &mut seq) as i32, 1);
                assert_eq!(
                    nrta_cc_schedule(null_mut(), 0, null_mut(), &mut seq) as i32,
                    1
                );
            }
            assert_eq!(seq, 77, "no out-parameter written on failure");
            assert_eq!(nrta_event_register_seq_id_completion(1, -1) as i32, 1);
        });
    }
}
