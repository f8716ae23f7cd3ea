//! The tensor-op requests of the async API (docs/contract/abi.md §3.6, §5.4; GEN-B with
//! `lnc_idx`): `nrta_tensor_write`, `nrta_tensor_read` and `nrta_tensor_copy` queue their
//! transfer on the tensor-op execution unit `queue` (0–1) of logical core `lnc` ([`Queue`]).
//! The ABI entry checks its pointers and handles and makes one call here.
//!
//! Producer side as the vendor's (§5.4): the arguments are checked (bounds, overflow; for copy
//! two device tensors on the same core), then the XU resolves the queue and assigns the sequence
//! number. Checking the bounds at enqueue makes a bad request the call's own `NRT_INVALID` rather
//! than a later `exec_ret`; the worker checks them again (the tensor views are cloned into the
//! request, so the storage outlives an early `nrt_tensor_free`). A failed transfer logs its
//! error; the XU writes its status to `exec_ret`.
//!
//! Choice: `lnc` must be a core of this process but need not own the tensor (the vendor routes
//! by `lnc_idx`; a host tensor has no core).

use crate::error::{Error, Result};
use crate::runtime::tensor::{Placement, Tensor};
use crate::runtime::xu::{self, ExecRet, XuType};

/// Where a tensor-op request runs and reports: the tensor-op queue `queue` of logical core
/// `lnc`; its status goes to `exec_ret` when it completes.
#[derive(Debug, Clone, Copy)]
pub struct Queue {
    /// Process-relative logical core (`lnc_idx`).
    pub lnc: u32,
    /// Tensor-op queue of that core (0–1).
    pub queue: u32,
    /// The caller's status slot, written at completion.
    pub exec_ret: ExecRet,
}

/// A caller's buffer travelling to the worker (the async contract keeps it valid and untouched
/// until the request completes).
#[derive(Debug, Clone, Copy)]
struct HostPtr(usize);

/// Queue `job` on the tensor-op XU `at`; returns the request's sequence id.
fn submit(at: Queue, job: impl FnOnce() -> Result<()> + Send + 'static) -> Result<u64> {
    let body = Box::new(move || job().inspect_err(|e| crate::log_error!("nrta_tensor", "{e}")));
    xu::submit(at.lnc, XuType::TensorOp, at.queue, at.exec_ret, body)
}

/// `nrta_tensor_write`: queue a write of `size` bytes from `src` into `tensor` at `offset`;
/// returns the sequence id.
///
/// # Safety
/// `src` must stay readable for `size` bytes until the request completes (NULL only when `size`
/// is 0).
pub unsafe fn write(
    tensor: Tensor,
    offset: u64,
    size: u64,
    src: *const u8,
    at: Queue,
) -> Result<u64> {
    tensor.check_range(offset, size, "nrta_tensor_write")?;
    let src = HostPtr(src as usize);
    submit(at, move || {
        // SAFETY: the caller keeps `src` readable for `size` bytes until completion.
        unsafe { tensor.write_raw(offset, src.0 as *const u8, size) }
    })
}

/// `nrta_tensor_read`: queue a read of `size` bytes of `tensor` at `offset` into `dst`; returns
/// the sequence id.
///
/// # Safety
/// `dst` must stay writable for `size` bytes until the request completes (NULL only when `size`
/// is 0).
pub unsafe fn read(tensor: Tensor, offset: u64, size: u64, dst: *mut u8, at: Queue) -> Result<u64> {
    tensor.check_range(offset, size, "nrta_tensor_read")?;
    let dst = HostPtr(dst as usize);
    submit(at, move || {
        // SAFETY: the caller keeps `dst` writable for `size` bytes until completion.
        unsafe { tensor.read_raw(offset, dst.0 as *mut u8, size) }
    })
}

/// `nrta_tensor_copy`: queue a copy of `size` bytes from `src` at `src_offset` to `dst` at
/// `dst_offset`, two device tensors of the same core (docs/contract/abi.md §5.4); returns the
/// sequence id.
pub fn copy(
    src: Tensor,
    src_offset: u64,
    dst: Tensor,
    dst_offset: u64,
    size: u64,
    at: Queue,
) -> Result<u64> {
    if src.placement() != Placement::Device || dst.placement() != Placement::Device {
        return Err(Error::invalid(
            "nrta_tensor_copy needs two device tensors (docs/contract/abi.md §5.4)",
        ));
    }
    if src.vnc() != dst.vnc() {
        return Err(Error::invalid(format!(
            "nrta_tensor_copy: src is on vnc {:?}, dst on vnc {:?}; both must be on the same core",
            src.vnc(),
            dst.vnc()
        )));
    }
    src.check_range(src_offset, size, "nrta_tensor_copy source")?;
    dst.check_range(dst_offset, size, "nrta_tensor_copy destination")?;
    submit(at, move || {
        dst.copy_from(dst_offset, &src, src_offset, size)
    })
}

#[cfg(test)]
mod tests;
