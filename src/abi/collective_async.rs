//! The host-driven collective path of the async API (docs/contract/abi.md §3.6, §5.4, §5.7):
//! `nrta_cc_prepare` / `nrta_cc_schedule`. Each is also exported under the name the vendor's
//! runtime uses inside, `nrt_cc_prepare` / `nrt_cc_schedule` (not exported by the vendor in
//! 2.31): the same function bound to a second name at node `NRT_2.0.0` by
//! shim/libnrt.exports, so there is one signature and one body per entry point.
//!
//! This layer converts and checks the C arguments and nothing else: prepare reads the
//! communicator and the two tensor lists once and hands them to `runtime::collective::api::prepare`
//! (tensor checks, request, membership, lowering); schedule takes the context (the handle is
//! dead afterwards: a second schedule with a stale copy of the pointer is `NRT_INVALID_HANDLE`,
//! with the cleared pointer `NRT_INVALID`) and hands it to `runtime::collective::api::schedule`, which
//! runs the collective on the caller's thread or queues it on the collectives XU `queue` of the
//! core, and later writes the status to `*exec_ret` and completes the sequence number.

use crate::abi::boundary::enter_status;
use std::ffi::c_int;

use crate::abi::args::tensor_of;
use crate::abi::boundary::{self, in_ref, out_param, Guard};
use crate::abi::handle::{self, Opaque};
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::runtime::collective::api::{self as cc_api, CommArgs, Prepared};
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
/// `list` must be NULL or point to a valid `nrt_tensor_list_t` whose `tensors` array is NULL or
/// has `num_tensors` entries, none of them written during this call; no tensor it names may be
/// freed by another thread during this call.
unsafe fn tensors_of(list: *const nrt_tensor_list_t, what: &str) -> Result<Vec<Tensor>> {
    // SAFETY: `list` is NULL or a valid `nrt_tensor_list_t` not written during this call (this
    // function's contract); `in_ref` refuses NULL and misalignment.
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
    // SAFETY: `l.tensors` is non-NULL (checked above), so it has `num_tensors` entries not
    // written during this call (this function's contract); `num_tensors` ≤ 4096 (checked).
    let ptrs = unsafe { std::slice::from_raw_parts(l.tensors, l.num_tensors) };
    ptrs.iter()
        .enumerate()
        // SAFETY: no listed tensor is freed during this call (this function's contract), as
        // `tensor_of` requires; it checks each handle against the live table first.
        .map(|(i, &t)| unsafe { tensor_of(t, &format!("{what}.tensors[{i}]")) })
        .collect()
}

/// Prepare a host-driven collective over `comm`: lower it to device programs and return a
/// context that `nrta_cc_schedule` consumes.
///
/// # Returns
/// `NRT_SUCCESS` with `*cc_ctx` set; `NRT_INVALID` for bad arguments (dtype, op, sizes,
/// communicator, tensors not on `comm->vnc`, a core that has not joined the host-CC world);
/// `NRT_INVALID_HANDLE` for a freed tensor; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `comm`, `input` and `output` must be valid for reads; their tensors live; `cc_ctx` NULL or
/// writable.
///
/// `nrt_cc_prepare` is a second name of this function (shim/libnrt.exports).
pub unsafe extern "C" fn nrta_cc_prepare(
    comm: *mut nrt_cc_comm_t,
    input: *mut nrt_tensor_list_t,
    output: *mut nrt_tensor_list_t,
    dtype: RawDtype,
    op: RawOpType,
    cc_op: RawCcOpType,
    cc_ctx: *mut *mut nrt_cc_context_t,
) -> NRT_STATUS {
    enter_status("nrta_cc_prepare", Guard::Lifecycle, || {
        // SAFETY: `comm` is NULL or valid for reads (this function's contract); `in_ref` refuses
        // NULL and misalignment.
        let c = unsafe { in_ref(comm, "comm") }?;
        // SAFETY: `cc_ctx` is NULL or writable (this function's contract); `out_param` refuses
        // NULL and misalignment, so `out.write` below is in bounds.
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
        let api = CommArgs {
            replica_group: group,
            rank: c.rank,
            rank_n: c.rank_n,
            ctx_device_id: c.ctx_device_id,
            ctx_device_count: c.ctx_device_count,
            vnc: c.vnc,
        };
        // SAFETY: `input` is NULL or a valid list whose array holds `num_tensors` entries (#
        // Safety).
        let inputs = unsafe { tensors_of(input, "input") }?;
        // SAFETY: `output` is NULL or a valid list whose array holds `num_tensors` entries (#
        // Safety).
        let outputs = unsafe { tensors_of(output, "output") }?;
        let prepared = cc_api::prepare(api, inputs, outputs, dtype, op, cc_op)?;
        let h = handle::export(CcContext {
            prepared: parking_lot::Mutex::new(Some(prepared)),
        });
        out.write(h);
        Ok(())
    })
}

/// Queue a prepared collective on the collectives execution unit `queue` (0–2). On success the
/// runtime takes the context and sets `*cc_ctx` to NULL.
///
/// # Returns
/// As `nrta_tensor_write`.
///
/// # Safety
/// `cc_ctx` must be NULL or point to a readable and writable slot holding NULL or a context from
/// `nrta_cc_prepare` that no other thread schedules or frees during this call; `exec_ret`
/// writable until completion; `req_sequence` NULL or writable.
///
/// `nrt_cc_schedule` is a second name of this function (shim/libnrt.exports).
pub unsafe extern "C" fn nrta_cc_schedule(
    cc_ctx: *mut *mut nrt_cc_context_t,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> NRT_STATUS {
    enter_status("nrta_cc_schedule", Guard::Lifecycle, || {
        // SAFETY: `cc_ctx` is NULL or a readable, writable slot (this function's contract);
        // `out_param` refuses NULL and misalignment, so reading and writing `slot` is in bounds.
        let slot = unsafe { out_param(cc_ctx, "cc_ctx") }?;
        crate::abi::boundary::exec_ret_arg(exec_ret)?;
        // SAFETY: `cc_ctx` is non-NULL and aligned (checked by `out_param`) and holds NULL or a
        // context handle, so initialised (this function's contract).
        let h = unsafe { slot.assume_init_read() };
        if h.is_null() {
            return Err(Error::invalid(
                "*cc_ctx is NULL: the context was already scheduled (nrta_cc_schedule consumes it)",
            ));
        }
        // SAFETY: `handle::get` checks `h` against the live table before any dereference; no
        // other thread frees the context during this call (this function's contract), and it is
        // released only below, after the last use of `ctx`.
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
            // SAFETY: `req_sequence` is non-NULL here, so writable (this function's contract);
            // `out_param` refuses misalignment.
            Some(unsafe { out_param(req_sequence, "req_sequence") }?)
        };
        let p = ctx.prepared.lock().take().ok_or_else(|| {
            Error::invalid_handle("*cc_ctx was already scheduled (nrta_cc_schedule consumes it)")
        })?;
        let seq = match cc_api::schedule(p, queue, ExecRet(exec_ret.cast())) {
            Ok(s) => s,
            Err((e, p)) => {
                *ctx.prepared.lock() = Some(*p);
                return Err(e);
            }
        };
        // The context is spent: drop its handle so a stale copy of the pointer is detected.
        // SAFETY: `ctx` is not used after this, and no other thread holds a reference to the
        // context (this function's contract); `release` checks `h` against the live table.
        unsafe { handle::release::<CcContext>(h, "*cc_ctx") }?;
        if let Some(o) = seq_out {
            o.write(seq);
        }
        slot.write(std::ptr::null_mut());
        Ok(())
    })
}

#[cfg(test)]
mod tests;
