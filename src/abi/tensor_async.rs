//! The tensor-op path of the async API (docs/contract/abi.md §3.6, §5.4; GEN-B with `lnc_idx`):
//! `nrta_tensor_write`, `nrta_tensor_read`, `nrta_tensor_copy` queue their transfer on the
//! tensor-op execution unit `queue` (0–1) of logical core `lnc_idx`.
//!
//! Producer side as the vendor's (§5.4): guard, argument checks (NULL pointers, bounds,
//! overflow; for copy two device tensors on the same core), then the XU resolves the queue and
//! assigns the sequence number. Checking the bounds at enqueue makes a bad request the call's
//! own `NRT_INVALID` rather than a later `exec_ret`; the worker checks them again (the tensor
//! views are cloned into the request, so the storage outlives an early `nrt_tensor_free`).
//! Choice: `lnc_idx` must be a core of this process but need not own the tensor (the vendor
//! routes by `lnc_idx`; a host tensor has no core).

use std::ffi::{c_int, c_void};

use crate::abi::args::{index_arg, tensor_of};
use crate::abi::boundary::out_param;
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::runtime::tensor::{Placement, Tensor};
use crate::runtime::xu::{self, ExecRet, XuType};

/// A caller's buffer travelling to the worker (the async contract keeps it valid and untouched
/// until the request completes).
#[derive(Debug, Clone, Copy)]
struct HostPtr(usize);

/// Queue `job` on the tensor-op XU and write `*req_sequence`.
///
/// # Safety
/// `req_sequence` NULL or writable; `exec_ret` writable until completion (NULL is refused).
unsafe fn submit(
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
    job: impl FnOnce() -> Result<()> + Send + 'static,
) -> Result<()> {
    crate::abi::boundary::exec_ret_arg(exec_ret)?;
    let lnc = index_arg(lnc_idx, "lnc_idx")?;
    let queue = index_arg(queue, "queue")?;
    let seq_out = if req_sequence.is_null() {
        None
    } else {
        // SAFETY: `req_sequence` is NULL (refused by out_param) or writable, as # Safety requires.
        Some(unsafe { out_param(req_sequence, "req_sequence") }?)
    };
    let body = Box::new(move || job().inspect_err(|e| crate::log_error!("nrta_tensor", "{e}")));
    let seq = xu::submit(lnc, XuType::TensorOp, queue, ExecRet(exec_ret.cast()), body)?;
    if let Some(o) = seq_out {
        o.write(seq);
    }
    Ok(())
}

fn host_ptr(p: *const c_void, size: u64, what: &str) -> Result<HostPtr> {
    if p.is_null() && size > 0 {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    Ok(HostPtr(p as usize))
}

/// `nrta_tensor_write`'s body.
///
/// # Safety
/// As `nrta_tensor_write`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn write(
    tensor: *mut nrt_tensor_t,
    buf: *const c_void,
    offset: u64,
    size: u64,
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> Result<()> {
    // SAFETY: looked up in the handle table.
    let t: Tensor = unsafe { tensor_of(tensor, "tensor") }?;
    t.check_range(offset, size, "nrta_tensor_write")?;
    let src = host_ptr(buf, size, "buf")?;
    let job = move || {
        // SAFETY: the caller keeps `buf` readable for `size` bytes until completion.
        unsafe { t.write_raw(offset, src.0 as *const u8, size) }
    };
    // SAFETY: `exec_ret` and `req_sequence` carry this function's # Safety guarantees (writable,
    // `exec_ret` until completion), which submit requires.
    unsafe { submit(lnc_idx, queue, exec_ret, req_sequence, job) }
}

/// `nrta_tensor_read`'s body.
///
/// # Safety
/// As `nrta_tensor_read`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn read(
    buf: *mut c_void,
    tensor: *mut nrt_tensor_t,
    offset: u64,
    size: u64,
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> Result<()> {
    // SAFETY: looked up in the handle table.
    let t: Tensor = unsafe { tensor_of(tensor, "tensor") }?;
    t.check_range(offset, size, "nrta_tensor_read")?;
    let dst = host_ptr(buf, size, "buf")?;
    let job = move || {
        // SAFETY: the caller keeps `buf` writable for `size` bytes until completion.
        unsafe { t.read_raw(offset, dst.0 as *mut u8, size) }
    };
    // SAFETY: `exec_ret` and `req_sequence` carry this function's # Safety guarantees (writable,
    // `exec_ret` until completion), which submit requires.
    unsafe { submit(lnc_idx, queue, exec_ret, req_sequence, job) }
}

/// `nrta_tensor_copy`'s body: two device tensors of the same core (docs/contract/abi.md §5.4).
///
/// # Safety
/// As `nrta_tensor_copy`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn copy(
    src: *mut nrt_tensor_t,
    src_offset: u64,
    dst: *mut nrt_tensor_t,
    dst_offset: u64,
    size: u64,
    lnc_idx: c_int,
    queue: c_int,
    exec_ret: *mut NRT_STATUS,
    req_sequence: *mut nrta_seq_t,
) -> Result<()> {
    // SAFETY: looked up in the handle table.
    let s: Tensor = unsafe { tensor_of(src, "src") }?;
    // SAFETY: looked up in the handle table.
    let d: Tensor = unsafe { tensor_of(dst, "dst") }?;
    if s.placement() != Placement::Device || d.placement() != Placement::Device {
        return Err(Error::invalid(
            "nrta_tensor_copy needs two device tensors (docs/contract/abi.md §5.4)",
        ));
    }
    if s.vnc() != d.vnc() {
        return Err(Error::invalid(format!(
            "nrta_tensor_copy: src is on vnc {:?}, dst on vnc {:?}; both must be on the same core",
            s.vnc(),
            d.vnc()
        )));
    }
    s.check_range(src_offset, size, "nrta_tensor_copy source")?;
    d.check_range(dst_offset, size, "nrta_tensor_copy destination")?;
    let job = move || d.copy_from(dst_offset, &s, src_offset, size);
    // SAFETY: `exec_ret` and `req_sequence` carry this function's # Safety guarantees (writable,
    // `exec_ret` until completion), which submit requires.
    unsafe { submit(lnc_idx, queue, exec_ret, req_sequence, job) }
}

#[cfg(test)]
mod tests;
