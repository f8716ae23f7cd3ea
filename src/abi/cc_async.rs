//! The host-driven collective path of the async API (docs/contract/abi.md §3.6, §5.4, §5.7):
//! `nrta_cc_prepare` / `nrta_cc_schedule`, and their internal twins `nrt_cc_prepare` /
//! `nrt_cc_schedule` (the names the vendor's runtime uses inside; not exported by the vendor in
//! 2.31, so their prototypes here are OpenNRT's: the same as the `nrta_` functions, bound at
//! node `NRT_2.0.0`).
//!
//! This layer converts and checks the C arguments and nothing else: prepare reads the
//! communicator and the two tensor lists once and hands them to `runtime::cc_api::prepare`
//! (tensor checks, request, membership, lowering); schedule takes the context (the handle is
//! dead afterwards: a second schedule with a stale copy of the pointer is `NRT_INVALID_HANDLE`,
//! with the cleared pointer `NRT_INVALID`) and hands it to `runtime::cc_api::schedule`, which
//! runs the collective on the caller's thread or queues it on the collectives XU `queue` of the
//! core, and later writes the status to `*exec_ret` and completes the sequence number.

use std::ffi::c_int;

use crate::abi::boundary::{self, in_ref, out_param, status_of};
use crate::abi::handle::{self, Opaque};
use crate::abi::tensor::tensor_of;
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::lower::request::api::ApiComm;
use crate::runtime::cc_api::{self, Prepared};
use crate::runtime::tensor::Tensor;
use crate::runtime::xu::{ExecRet, XuType};

/// A prepared collective: what `nrt_cc_context_t *` points to. The payload is taken by the
/// schedule that queues it (and put back if queueing fails, so the caller may retry).
#[derive(Debug)]
pub struct CcContext {
    prepared: parking_lot::Mutex<Option<Prepared>>,
}

impl Opaque for CcContext {
    type Handle = nrt_cc_context_t;
    const KIND: &'static str = "collective context";
    const PER_INIT: bool = true;
}

/// The tensors of a list (NULL list → error; a NULL `tensors` array only with 0 entries).
///
/// # Safety
/// `list` must be NULL or point to a valid `nrt_tensor_list_t` whose array has `num_tensors`
/// entries.
unsafe fn tensors_of(list: *const nrt_tensor_list_t, what: &str) -> Result<Vec<Tensor>> {
    // SAFETY: forwarded contract.
    let l = unsafe { in_ref(list, what) }?;
    if l.num_tensors == 0 {
        return Ok(Vec::new());
    }
    if l.num_tensors > 4096 {
        return Err(Error::invalid(format!(
            "{what}.num_tensors = {} is not a plausible tensor count",
            l.num_tensors
        )));
    }
    if l.tensors.is_null() {
        return Err(Error::invalid(format!(
            "{what}.tensors is NULL with num_tensors = {}",
            l.num_tensors
        )));
    }
    // SAFETY: non-NULL with `num_tensors` entries by the caller's promise.
    let ptrs = unsafe { std::slice::from_raw_parts(l.tensors, l.num_tensors) };
    ptrs.iter()
        .enumerate()
        // SAFETY: each handle is checked against the live table before use.
        .map(|(i, &t)| unsafe { tensor_of(t, &format!("{what}.tensors[{i}]")) })
        .collect()
}

/// `nrta_cc_prepare`'s body.
///
/// # Safety
/// As `nrta_cc_prepare`.
pub(crate) unsafe fn prepare(
    comm: *const nrt_cc_comm_t,
    input: *const nrt_tensor_list_t,
    output: *const nrt_tensor_list_t,
    dtype: u32,
    op: u32,
    cc_op: u32,
    cc_ctx: *mut *mut nrt_cc_context_t,
) -> Result<()> {
    // SAFETY: forwarded contract.
    let c = unsafe { in_ref(comm, "comm") }?;
    // SAFETY: forwarded contract.
    let out = unsafe { out_param(cc_ctx, "cc_ctx") }?;
    let group: Vec<u32> = if c.rank_n == 0 {
        Vec::new()
    } else {
        boundary::non_null(c.replica_group, "comm.replica_group")?;
        if c.rank_n > 65_536 {
            return Err(Error::invalid(format!(
                "comm.rank_n = {} is not plausible",
                c.rank_n
            )));
        }
        // SAFETY: non-NULL; the caller promises `rank_n` entries.
        unsafe { std::slice::from_raw_parts(c.replica_group, c.rank_n as usize) }.to_vec()
    };
    let api = ApiComm {
        replica_group: group,
        rank: c.rank,
        rank_n: c.rank_n,
        ctx_device_id: c.ctx_device_id,
        ctx_device_count: c.ctx_device_count,
        vnc: c.vnc,
    };
    // SAFETY: forwarded contract.
    let inputs = unsafe { tensors_of(input, "input") }?;
    // SAFETY: forwarded contract.
    let outputs = unsafe { tensors_of(output, "output") }?;
    let prepared = cc_api::prepare(api, inputs, outputs, dtype, op, cc_op)?;
    let h = handle::export(CcContext {
        prepared: parking_lot::Mutex::new(Some(prepared)),
    });
    out.write(h);
    Ok(())
}

/// `nrta_cc_schedule`'s body.
///
/// # Safety
/// As `nrta_cc_schedule`.
pub(crate) unsafe fn schedule(
    cc_ctx: *mut *mut nrt_cc_context_t,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> Result<()> {
    // SAFETY: forwarded contract.
    let slot = unsafe { out_param(cc_ctx, "cc_ctx") }?;
    crate::abi::boundary::exec_ret_arg(exec_ret)?;
    // SAFETY: `cc_ctx` is non-NULL and aligned (checked); the caller promises it holds a
    // pointer written by prepare (or NULL after a schedule).
    let h = unsafe { slot.assume_init_read() };
    if h.is_null() {
        return Err(Error::invalid(
            "*cc_ctx is NULL: the context was already scheduled (nrta_cc_schedule consumes it)",
        ));
    }
    // SAFETY: looked up in the live table before use.
    let ctx = unsafe { handle::get::<CcContext>(h, "*cc_ctx") }?;
    let queue = u32::try_from(queue)
        .ok()
        .filter(|&q| q < XuType::Collectives.queues())
        .ok_or_else(|| {
            Error::invalid(format!(
                "queue {queue}: the collectives XU has queues 0..=2"
            ))
        })?;
    let seq_out = if req_sequence.is_null() {
        None
    } else {
        // SAFETY: non-NULL; the caller promises it is writable.
        Some(unsafe { out_param(req_sequence, "req_sequence") }?)
    };
    let p = ctx.prepared.lock().take().ok_or_else(|| {
        Error::invalid_handle("*cc_ctx was already scheduled (nrta_cc_schedule consumes it)")
    })?;
    let seq = match cc_api::schedule(p, queue, ExecRet(exec_ret.cast()), |e| status_of(e) as i32) {
        Ok(s) => s,
        Err((e, p)) => {
            *ctx.prepared.lock() = Some(*p);
            return Err(e);
        }
    };
    // The context is spent: drop its handle so a stale copy of the pointer is detected.
    // SAFETY: live (looked up above); `ctx` is not used after this.
    unsafe { handle::release::<CcContext>(h, "*cc_ctx") }?;
    if let Some(o) = seq_out {
        o.write(seq);
    }
    slot.write(std::ptr::null_mut());
    Ok(())
}

/// OpenNRT's export of the vendor-internal name behind `nrta_cc_prepare` (not exported by the
/// vendor's 2.31 library; the prototype is OpenNRT's and equals `nrta_cc_prepare`'s). Same
/// behaviour as `nrta_cc_prepare`.
///
/// # Returns
/// As `nrta_cc_prepare`.
///
/// # Safety
/// As `nrta_cc_prepare`.
pub unsafe extern "C" fn nrt_cc_prepare(
    comm: *mut nrt_cc_comm_t,
    input: *mut nrt_tensor_list_t,
    output: *mut nrt_tensor_list_t,
    dtype: RawDtype,
    op: RawOpType,
    cc_op: RawCcOpType,
    cc_ctx: *mut *mut nrt_cc_context_t,
) -> NRT_STATUS {
    crate::abi_entry!(status "nrt_cc_prepare", crate::abi::boundary::Guard::Lifecycle, {
        // SAFETY: forwarded contract.
        unsafe { prepare(comm, input, output, dtype, op, cc_op, cc_ctx) }
    })
}

/// OpenNRT's export of the vendor-internal name behind `nrta_cc_schedule` (prototype
/// OpenNRT's, equal to `nrta_cc_schedule`'s). Same behaviour as `nrta_cc_schedule`.
///
/// # Returns
/// As `nrta_cc_schedule`.
///
/// # Safety
/// As `nrta_cc_schedule`.
pub unsafe extern "C" fn nrt_cc_schedule(
    cc_ctx: *mut *mut nrt_cc_context_t,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    crate::abi_entry!(status "nrt_cc_schedule", crate::abi::boundary::Guard::Lifecycle, {
        // SAFETY: forwarded contract.
        unsafe { schedule(cc_ctx, queue, exec_ret, req_sequence) }
    })
}

#[cfg(test)]
mod tests;
