//! `nrt_async.h`: the explicit async API, async 3.0 generation (runtime 2.31+, "GEN-B"; symbol
//! node `NRT_3.0.0`; docs/contract/abi.md §3.6, §5.3–§5.6, docs/design.md §2.4). Only the GEN-B
//! prototypes are exported: per-request `NRT_STATUS *exec_ret`, `lnc_idx` on the tensor
//! functions, `nrta_xu_t` numbered TENSOR_OP 0 / COMPUTE 1 / COLLECTIVES 2, and the 2.32
//! event-fd registration pair.
//!
//! Each `nrta_*` entry checks its pointers and handles and makes one runtime call: the tensor
//! transfers run on the tensor-op XUs (`runtime::tensor::ops`), the collectives on the
//! collectives XUs (`abi::collective_async`, over `runtime::collective::api`), and
//! `nrta_execute_schedule` queues a model's execution on the compute XU of its core
//! (`runtime::model::schedule`).
//!
//! Completion (`nrta_is_completed`, `nrta_get_sequence`, the two `nrta_event_register_*`) is
//! implemented over the execution units of [`crate::runtime::xu`]. The implicit-async interlock of
//! docs/contract/abi.md §5.3 never fires: `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` is warned
//! about at `nrt_init` and ignored (runtime 2.34 behaviour), so no `nrta_*` fails with
//! `NRT_FAILURE` for it.

use crate::abi::boundary::enter_status;
use std::ffi::{c_int, c_void};

use std::mem::MaybeUninit;

use crate::abi::args::{index_arg, model_of, tensor_of, tensor_set_members};
use crate::abi::boundary::{exec_ret_arg, non_null, out_param, Guard};
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::runtime::tensor::ops::{self, Queue};
use crate::runtime::xu::{self, ExecRet, XuType};

/// The optional `req_sequence` of a schedule call: NULL (not wanted) or checked for alignment,
/// to be written on success.
///
/// # Safety
/// `req_sequence` must be NULL or writable.
unsafe fn seq_out<'a>(
    req_sequence: *mut nrta_seq_t,
) -> Result<Option<&'a mut MaybeUninit<nrta_seq_t>>> {
    if req_sequence.is_null() {
        return Ok(None);
    }
    // SAFETY: `req_sequence` is non-NULL here, so valid for writing one `nrta_seq_t` (this
    // function's contract); `out_param` refuses misalignment.
    unsafe { out_param(req_sequence, "req_sequence") }.map(Some)
}

/// The queue arguments of a tensor-op call: `exec_ret` (NULL refused), `lnc_idx`, `queue`.
fn tensor_queue(lnc_idx: c_int, queue: c_int, exec_ret: *mut NRT_STATUS) -> Result<Queue> {
    exec_ret_arg(exec_ret)?;
    Ok(Queue {
        lnc: index_arg(lnc_idx, "lnc_idx")?,
        queue: index_arg(queue, "queue")?,
        exec_ret: ExecRet(exec_ret.cast()),
    })
}

/// A caller's buffer of `size` bytes: NULL only when `size` is 0.
fn host_buf<T>(p: *const T, size: u64) -> Result<()> {
    if p.is_null() && size > 0 {
        return Err(Error::invalid("buf is NULL"));
    }
    Ok(())
}

/// Queue a write of `size` bytes from `buf` into `tensor` at `offset` on the tensor-op
/// execution unit `queue` (0–1) of logical core `lnc_idx`. The return value is the enqueue
/// status; the operation's own status is written to `*exec_ret` when it completes.
///
/// # Returns
/// `NRT_SUCCESS` (queued, `*req_sequence` set); `NRT_INVALID` for bad arguments (a NULL
/// `exec_ret` among them) or queue; `NRT_QUEUE_FULL`; `NRT_EXEC_UNIT_UNRECOVERABLE`;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `buf` must stay readable for `size` bytes and `exec_ret` writable until completion;
/// `tensor` must be a live tensor; `req_sequence` NULL or writable.
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
    enter_status("nrta_tensor_write", Guard::Lifecycle, || {
        // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let t = unsafe { tensor_of(tensor, "tensor") }?;
        host_buf(buf, size)?;
        let at = tensor_queue(lnc_idx, queue, exec_ret)?;
        // SAFETY: `req_sequence` is NULL or writable (this function's contract), which is
        // `seq_out`'s contract.
        let seq_out = unsafe { seq_out(req_sequence) }?;
        // SAFETY: `buf` stays readable for `size` bytes until completion (this function's
        // contract) and `host_buf` refused NULL with `size` > 0: `ops::write`'s contract.
        let seq = unsafe { ops::write(t, offset, size, buf.cast(), at) }?;
        if let Some(o) = seq_out {
            o.write(seq);
        }
        Ok(())
    })
}

/// Queue a read of `size` bytes of `tensor` at `offset` into `buf` (see `nrta_tensor_write`).
///
/// # Returns
/// As `nrta_tensor_write`.
///
/// # Safety
/// `buf` must stay writable for `size` bytes and `exec_ret` until completion; `tensor` must be
/// a live tensor; `req_sequence` NULL or writable.
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
    enter_status("nrta_tensor_read", Guard::Lifecycle, || {
        // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let t = unsafe { tensor_of(tensor, "tensor") }?;
        host_buf(buf, size)?;
        let at = tensor_queue(lnc_idx, queue, exec_ret)?;
        // SAFETY: `req_sequence` is NULL or writable (this function's contract), which is
        // `seq_out`'s contract.
        let seq_out = unsafe { seq_out(req_sequence) }?;
        // SAFETY: `buf` stays writable for `size` bytes until completion (this function's
        // contract) and `host_buf` refused NULL with `size` > 0: `ops::read`'s contract.
        let seq = unsafe { ops::read(t, offset, size, buf.cast(), at) }?;
        if let Some(o) = seq_out {
            o.write(seq);
        }
        Ok(())
    })
}

/// Queue a copy of `size` bytes between two device tensors of the same device.
///
/// # Returns
/// As `nrta_tensor_write`.
///
/// # Safety
/// `src` and `dst` must be live tensors; `exec_ret` writable until completion; `req_sequence`
/// NULL or writable.
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
    enter_status("nrta_tensor_copy", Guard::Lifecycle, || {
        // SAFETY: `src` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let s = unsafe { tensor_of(src, "src") }?;
        // SAFETY: `dst` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let d = unsafe { tensor_of(dst, "dst") }?;
        let at = tensor_queue(lnc_idx, queue, exec_ret)?;
        // SAFETY: `req_sequence` is NULL or writable (this function's contract), which is
        // `seq_out`'s contract.
        let seq_out = unsafe { seq_out(req_sequence) }?;
        let seq = ops::copy(s, src_offset, d, dst_offset, size, at)?;
        if let Some(o) = seq_out {
            o.write(seq);
        }
        Ok(())
    })
}

/// Queue an execution of `model` on its core's compute execution unit (`queue` must be 0).
///
/// The sets are read at this call (their members then); the execution runs on the XU's worker
/// in FIFO order and writes its status (as `nrt_execute` would return it) to `*exec_ret`.
///
/// # Returns
/// As `nrta_tensor_write`; `NRT_INVALID_HANDLE` for a handle that names no live model or set.
///
/// # Safety
/// `model`, `input` and `output` must be live handles that stay alive until completion, and no
/// tensor in either set may be freed by another thread during this call; `exec_ret` writable
/// until completion; `req_sequence` NULL or writable.
pub unsafe extern "C" fn nrta_execute_schedule(
    model: *mut nrt_model_t,
    input: *const nrt_tensor_set_t,
    output: *mut nrt_tensor_set_t,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    enter_status("nrta_execute_schedule", Guard::Lifecycle, || {
        exec_ret_arg(exec_ret)?;
        non_null(input, "input")?;
        non_null(output, "output")?;
        let queue = index_arg(queue, "queue")?;
        // SAFETY: `req_sequence` is NULL or writable (this function's contract), which is
        // `seq_out`'s contract.
        let seq_out = unsafe { seq_out(req_sequence) }?;
        // SAFETY: `model` is live until completion (this function's contract), so it is not
        // unloaded while the reference is cloned; `model_of` checks it against the live table.
        let m = unsafe { model_of(model, "model") }?.clone();
        // SAFETY: `input` stays alive until completion and its tensors are not freed during this
        // call (this function's contract), as `tensor_set_members` requires; it checks them first.
        let inputs = unsafe { tensor_set_members(input, "input") }?;
        // SAFETY: `output` stays alive until completion and its tensors are not freed during this
        // call (this function's contract), as `tensor_set_members` requires; it checks them first.
        let outputs = unsafe { tensor_set_members(output, "output") }?;
        let seq =
            crate::runtime::model::schedule(m, inputs, outputs, queue, ExecRet(exec_ret.cast()))?;
        if let Some(o) = seq_out {
            o.write(seq);
        }
        Ok(())
    })
}

// `nrta_cc_prepare` and `nrta_cc_schedule` live in `abi::collective_async`, with their bodies.

/// Non-blocking: has the request `seq` (passed by value) completed? When it has not, the
/// calling thread yields its CPU before returning, so a tight polling loop does not starve the
/// thread that runs the collective.
///
/// # Returns
/// `NRT_SUCCESS` with `*is_completed` set; `NRT_INVALID` for a sequence id naming no execution
/// unit or a request its unit never handed out (a poller would wait forever), or a NULL
/// pointer; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `is_completed` must be NULL or writable.
pub unsafe extern "C" fn nrta_is_completed(seq: nrta_seq_t, is_completed: *mut bool) -> NRT_STATUS {
    enter_status("nrta_is_completed", Guard::Lifecycle, || {
        // SAFETY: `is_completed` is NULL or valid for writing one `bool` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(is_completed, "is_completed") }?;
        let done = xu::poll_completed(seq)?;
        out.write(done);
        Ok(())
    })
}

/// The last completed sequence id of execution unit (`lnc`, `xu`, `queue`), encoded with its
/// XU id (counter 0 before any completion).
///
/// # Returns
/// `NRT_SUCCESS` with `*seq` set; `NRT_INVALID` for a bad core, XU type or queue or a NULL
/// pointer; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `seq` must be NULL or writable.
pub unsafe extern "C" fn nrta_get_sequence(
    lnc: u32,
    xu: RawXu,
    queue: c_int,
    seq: *mut nrta_seq_t,
) -> NRT_STATUS {
    enter_status("nrta_get_sequence", Guard::Lifecycle, || {
        // SAFETY: `seq` is NULL or valid for writing one `nrta_seq_t` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(seq, "seq") }?;
        let last = xu::last_completed(lnc, XuType::from_raw(xu)?, index_arg(queue, "queue")?)?;
        out.write(last);
        Ok(())
    })
}

/// Signal the caller's eventfd `fd` (by writing 1) when `seq` completes, at once if it already
/// has; `fd = -1` deregisters. One fd per sequence id: registering again replaces it. The
/// runtime never reads or closes `fd`; deregister before closing it.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a sequence id naming no execution unit, a registration
/// for a request its unit never handed out, or an `fd` that is neither -1 nor open;
/// `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrta_event_register_seq_id_completion(seq: nrta_seq_t, fd: c_int) -> NRT_STATUS {
    enter_status(
        "nrta_event_register_seq_id_completion",
        Guard::Lifecycle,
        || xu::register_seq_fd(seq, fd),
    )
}

/// Signal the caller's eventfd `fd` every time execution unit (`lnc`, `xu`, `queue`) completes
/// a request (signals may coalesce in the counter); `fd = -1` deregisters. One fd per execution
/// unit: registering again replaces it. The runtime never reads or closes `fd`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core, XU type or queue, or an `fd` that is neither -1
/// nor open; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrta_event_register_xu_completion(
    lnc: c_int,
    xu: RawXu,
    queue: c_int,
    fd: c_int,
) -> NRT_STATUS {
    enter_status(
        "nrta_event_register_xu_completion",
        Guard::Lifecycle,
        || {
            xu::register_xu_fd(
                index_arg(lnc, "logical core")?,
                XuType::from_raw(xu)?,
                index_arg(queue, "queue")?,
                fd,
            )
        },
    )
}

#[cfg(test)]
mod tests;
