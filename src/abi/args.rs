//! Argument checks and result writers shared by the entry files of [`abi`](super).
//!
//! **What belongs here:** a helper that more than one entry file uses to check or convert a C
//! argument or to write a result: a logical-core or queue index, the tensor, tensor-set and
//! model handles other families take as arguments (and the objects behind those handles, which
//! the check reads), the in/out slot of a free function, the probe-then-fill struct writer. Entry
//! files import argument handling from here and from [`boundary`](super::boundary), never from
//! one another: these helpers used to sit in the entry file that first needed them (`nrt`,
//! `nrt_async`, `model`, `tensor`, `tensor_set`), and those files imported each other in a
//! circle.
//!
//! **What does not:** the single-pointer primitives every entry uses (NULL and alignment
//! checks, out-parameters, C strings) stay in [`boundary`](super::boundary), beneath this
//! module; a check with one user stays in its entry file, next to the behaviour it documents;
//! the rules of the simulated instance (which devices exist, pods, HBM) are methods of
//! [`InstanceType`](crate::lower::topology::InstanceType).

use std::collections::BTreeMap;
use std::ffi::c_int;

use parking_lot::{Mutex, RwLock};

use crate::abi::boundary::in_ref;
use crate::abi::handle::{self, Opaque};
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::runtime::model::Model;
use crate::runtime::process;
use crate::runtime::tensor::Tensor;

/// Check a logical-core index relative to the visible cores of this process (docs/contract/abi.md
/// §3.3: `vnc` 0 is the first visible core).
pub(crate) fn visible_core(vnc: i64, what: &str) -> Result<u32> {
    let visible = process::config()?.visible_cores;
    u32::try_from(vnc)
        .ok()
        .filter(|v| *v < visible)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{what} {vnc} is not one of the {visible} logical cores visible to this process"
            ))
            .with_field(what)
            .with_values(format!("0..{visible}"), vnc)
        })
}

/// A queue or core index passed as C `int`: negative is `NRT_INVALID` (docs/contract/abi.md §3.6
/// ranges).
pub(crate) fn index_arg(v: c_int, what: &str) -> Result<u32> {
    u32::try_from(v).map_err(|_| {
        Error::invalid(format!("{what} {v} is negative"))
            .with_field(what)
            .with_values(">= 0", v)
    })
}

/// Copy the first `cap` bytes of `full` to `dst` and the full size to `*size_out` (if given):
/// the probe-then-fill convention of the getters that take a struct size.
///
/// # Safety
/// `dst` must be valid for writing `cap` bytes (any alignment) and must not overlap `full`;
/// `size_out` must be NULL or valid for writing one `usize` (any alignment: it is written
/// unaligned).
pub(crate) unsafe fn fill_prefix<T: Copy>(
    full: &T,
    dst: *mut u8,
    cap: usize,
    size_out: *mut usize,
) -> Result<()> {
    let n = cap.min(std::mem::size_of::<T>());
    // SAFETY: `full` is a plain `Copy` struct of size_of::<T>() ≥ n readable bytes; `dst` is
    // valid for `cap` ≥ n byte writes and does not overlap `full` (this function's contract);
    // byte copies need no alignment.
    unsafe { std::ptr::copy_nonoverlapping((full as *const T).cast::<u8>(), dst, n) };
    if !size_out.is_null() {
        // SAFETY: `size_out` is non-NULL (checked) and so valid for writing one `usize` (this
        // function's contract); `write_unaligned` needs no alignment.
        unsafe { size_out.write_unaligned(std::mem::size_of::<T>()) };
    }
    Ok(())
}

/// The handle in the in/out slot of a free function (`T **`): `None` for a NULL slot or a NULL
/// handle (both no-ops).
///
/// # Safety
/// `slot` must be NULL or point to a `*mut T` that is readable during this call. Alignment is
/// not required of the caller: a misaligned `slot` is refused (`NRT_INVALID`) by [`in_ref`].
pub(crate) unsafe fn freed_slot<T>(slot: *mut *mut T, what: &str) -> Result<Option<*mut T>> {
    if slot.is_null() {
        return Ok(None);
    }
    // SAFETY: `slot` is non-NULL (checked) and points to a readable `*mut T` (this function's
    // contract); `in_ref` refuses it if misaligned; the handle is copied out at once.
    let h = *unsafe { in_ref(slot.cast_const(), what) }?;
    Ok((!h.is_null()).then_some(h))
}

/// The object behind `nrt_tensor_t *`: one [`Tensor`] behind a lock (`nrt_tensor_attach_buffer`
/// replaces its storage). The tensor entries ([`tensor`](super::tensor)) create and change it;
/// every other family reads it through [`tensor_of`].
#[derive(Debug)]
pub(crate) struct TensorObject {
    pub(super) tensor: RwLock<Tensor>,
}

impl Opaque for TensorObject {
    type Handle = nrt_tensor_t;
    const KIND: &'static str = "tensor";
    const PER_INIT: bool = true;
}

/// The tensor behind a C handle (NULL → NRT_INVALID, not live → NRT_INVALID_HANDLE), cloned: a
/// cheap clone that keeps the storage alive even if C frees the handle while an operation is
/// queued.
///
/// # Safety
/// `h` may be any value: NULL and addresses that are not live tensor handles are refused
/// before any dereference. If `h` is a live tensor handle, no other thread may free it during
/// this call (C's contract as well).
pub(crate) unsafe fn tensor_of(h: *const nrt_tensor_t, what: &str) -> Result<Tensor> {
    // SAFETY: `handle::get` checks `h` against the live table before any dereference; if `h` is
    // live, no other thread frees it during this call (this function's contract), and the
    // reference is dropped before we return.
    let obj = unsafe { handle::get::<TensorObject>(h, what) }?;
    Ok(obj.tensor.read().clone())
}

/// A tensor handle kept in a set: an identifier only, checked against the handle table before
/// any use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TensorPtr(pub(super) *mut nrt_tensor_t);

// SAFETY: the pointer is never dereferenced through this type; it is compared and returned to
// C, or looked up in the handle table (which checks it) before use.
unsafe impl Send for TensorPtr {}
// SAFETY: `&TensorPtr` only copies the pointer value out; it is never dereferenced through this
// type, so sharing it between threads shares no memory.
unsafe impl Sync for TensorPtr {}

/// The object behind `nrt_tensor_set_t *`: name → tensor handle. The tensor-set entries
/// ([`tensor_set`](super::tensor_set)) fill it; `nrt_execute` and `nrta_execute_schedule` read it
/// through [`tensor_set_members`].
#[derive(Debug, Default)]
pub(super) struct TensorSet {
    pub(super) entries: Mutex<BTreeMap<String, TensorPtr>>,
}

impl Opaque for TensorSet {
    type Handle = nrt_tensor_set_t;
    const KIND: &'static str = "tensor set";
    const PER_INIT: bool = true;
}

/// Every member of a tensor set, resolved to its tensor, in name order. A member freed since
/// it was added is `NRT_INVALID_HANDLE` naming the entry. For `nrt_execute` / `nrta_execute_schedule`.
///
/// # Safety
/// `h` may be any value: NULL and addresses that are not live tensor-set handles are refused
/// before any dereference. If `h` is a live tensor set, no other thread may free it, or any
/// tensor that is a member of it, during this call.
pub(crate) unsafe fn tensor_set_members(
    h: *const nrt_tensor_set_t,
    what: &str,
) -> Result<Vec<(String, Tensor)>> {
    // SAFETY: `handle::get` checks `h` against the live table before any dereference; if `h` is
    // live, no other thread frees it during this call (this function's contract).
    let set = unsafe { handle::get::<TensorSet>(h, what) }?;
    let entries: Vec<_> = set
        .entries
        .lock()
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    entries
        .into_iter()
        .map(|(name, p)| {
            // SAFETY: `tensor_of` accepts any value and checks `p.0` against the live table; a
            // live member is not freed by another thread during this call (this function's
            // contract), which is what `tensor_of` requires.
            let t = unsafe { tensor_of(p.0, &format!("{what}[{name:?}]")) }?;
            Ok((name, t))
        })
        .collect()
}

/// The object behind `nrt_model_t *`. The model entries ([`model`](super::model)) create and
/// free it; `nrta_execute_schedule` reads it through [`model_of`].
#[derive(Debug)]
pub(super) struct ModelObject {
    /// Shared with the compute XU's queued executions (`nrta_execute_schedule`), so an unload
    /// while one is queued frees the model only after it ran.
    pub(super) model: std::sync::Arc<Model>,
}

impl Opaque for ModelObject {
    type Handle = nrt_model_t;
    const KIND: &'static str = "model";
    const PER_INIT: bool = true;
}

/// The model behind a handle.
///
/// # Safety
/// `h` may be any value: NULL and addresses that are not live model handles are refused before
/// any dereference. If `h` is a live model, no other thread may unload it while the returned
/// reference lives (`'a`).
pub(crate) unsafe fn model_of<'a>(
    h: *const nrt_model_t,
    what: &str,
) -> Result<&'a std::sync::Arc<Model>> {
    // SAFETY: `handle::get` checks `h` against the live table before any dereference; a live
    // model is not unloaded while the reference lives (this function's contract), which is
    // `handle::get`'s requirement.
    Ok(&unsafe { handle::get::<ModelObject>(h, what) }?.model)
}

#[cfg(test)]
mod tests;
