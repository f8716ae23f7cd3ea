//! `nrt.h` tensor sets (docs/contract/abi.md §3.3): the name → tensor maps `nrt_execute` consumes.
//! A child of [`tensor`](super) (declared there, so `src/abi/mod.rs` re-exports it with the
//! tensor functions).
//!
//! **Sets store handles, not tensors** (§3.3: "the set stores the pointer"). Destroying a set
//! never looks at its members (the developer guide frees members first); a lookup returns the
//! pointer that was added, and a member freed since is `NRT_INVALID_HANDLE` when it is looked
//! up or used. A freed member whose address is reused by a new tensor is indistinguishable
//! from that tensor (the caller's dangling pointer, as with the vendor library).

use std::collections::BTreeMap;
use std::ffi::c_char;

use parking_lot::Mutex;

use crate::abi::boundary::{out_param, req_cstr, Guard};
use crate::abi::handle::{self, Opaque};
use crate::abi::tensor::{freed_slot, tensor_of, TensorObject};
use crate::abi::types::*;
use crate::abi_entry;
use crate::error::{Error, Result};
use crate::runtime::tensor::Tensor;

/// A tensor handle kept in a set: an identifier only, checked against the handle table before
/// any use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TensorPtr(*mut nrt_tensor_t);

// SAFETY: the pointer is never dereferenced through this type; it is compared and returned to
// C, or looked up in the handle table (which checks it) before use.
unsafe impl Send for TensorPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for TensorPtr {}

/// The object behind `nrt_tensor_set_t *`.
#[derive(Debug, Default)]
struct TensorSet {
    entries: Mutex<BTreeMap<String, TensorPtr>>,
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
/// As for [`tensor_of`], for the set and each member.
#[allow(
    dead_code,
    reason = "the model executor (nrt_execute) is its first user"
)]
pub(crate) unsafe fn tensor_set_members(
    h: *const nrt_tensor_set_t,
    what: &str,
) -> Result<Vec<(String, Tensor)>> {
    // SAFETY: `h` is NULL or a handle of this library; handle::get checks it against the live table
    // before any dereference.
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
            // SAFETY: the handle is checked against the live table before it is dereferenced, and
            // the caller's contract keeps other threads from freeing it meanwhile.
            let t = unsafe { tensor_of(p.0, &format!("{what}[{name:?}]")) }?;
            Ok((name, t))
        })
        .collect()
}

/// Allocate an empty tensor set (a name → tensor map consumed by `nrt_execute`).
///
/// # Returns
/// `NRT_SUCCESS` with `*result` set; `NRT_INVALID` if `result` is NULL; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `result` must be NULL or writable.
pub unsafe extern "C" fn nrt_allocate_tensor_set(result: *mut *mut nrt_tensor_set_t) -> NRT_STATUS {
    abi_entry!(status "nrt_allocate_tensor_set", Guard::Lifecycle, {
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { out_param(result, "result") }?;
        out.write(handle::export(TensorSet::default()));
        Ok(())
    })
}

/// Free a tensor set and set `*tensor_set` to NULL. Its member tensors are not freed and not
/// even looked at (they may already be freed). NULL and `*tensor_set == NULL` are no-ops; a
/// pointer that is not a live set (double free) is logged and left untouched.
///
/// # Safety
/// `tensor_set` must be NULL or point to a readable and writable `nrt_tensor_set_t *`.
pub unsafe extern "C" fn nrt_destroy_tensor_set(tensor_set: *mut *mut nrt_tensor_set_t) {
    abi_entry!(void "nrt_destroy_tensor_set", Guard::Lifecycle, {
        // SAFETY: forwarded from this function's contract.
        if let Some(h) = unsafe { freed_slot(tensor_set, "tensor_set") }? {
            // SAFETY: the handle table checks `h`; no reference to the set outlives this.
            unsafe { handle::release::<TensorSet>(h, "*tensor_set") }?;
            // SAFETY: `tensor_set` was read above, so it is valid and aligned.
            unsafe { tensor_set.write(std::ptr::null_mut()) };
        }
        Ok(())
    })
}

/// Add `tensor` to the set under `tensor_name`, replacing an existing entry of that name. The
/// set stores the handle; the tensor must stay allocated while the set is used with it.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL arguments; `NRT_INVALID_HANDLE` for a set or tensor
/// that is not live; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `tensor_set` must be a live set; `tensor_name` NUL-terminated; `tensor` a live tensor that
/// outlives its use through the set.
pub unsafe extern "C" fn nrt_add_tensor_to_tensor_set(
    tensor_set: *mut nrt_tensor_set_t,
    tensor_name: *const c_char,
    tensor: *mut nrt_tensor_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_add_tensor_to_tensor_set", Guard::Lifecycle, {
        // SAFETY: forwarded from this function's contract; checked by the handle table.
        let set = unsafe { handle::get::<TensorSet>(tensor_set, "tensor_set") }?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { req_cstr(tensor_name, "tensor_name") }?;
        // SAFETY: checked by the handle table; only its liveness matters here.
        unsafe { handle::get::<TensorObject>(tensor, "tensor") }?;
        set.entries.lock().insert(name, TensorPtr(tensor));
        Ok(())
    })
}

/// Look up the tensor stored under `tensor_name`; `*tensor` is the handle that was added.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor` set; `NRT_INVALID` for NULL arguments or a name not in the set;
/// `NRT_INVALID_HANDLE` for a set that is not live or a member freed since it was added;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `tensor_set` must be a live set; `tensor_name` NUL-terminated; `tensor` NULL or writable.
pub unsafe extern "C" fn nrt_get_tensor_from_tensor_set(
    tensor_set: *mut nrt_tensor_set_t,
    tensor_name: *const c_char,
    tensor: *mut *mut nrt_tensor_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_tensor_from_tensor_set", Guard::Lifecycle, {
        // SAFETY: forwarded from this function's contract; checked by the handle table.
        let set = unsafe { handle::get::<TensorSet>(tensor_set, "tensor_set") }?;
        // SAFETY: forwarded from this function's contract.
        let name = unsafe { req_cstr(tensor_name, "tensor_name") }?;
        // SAFETY: forwarded from this function's contract.
        let out = unsafe { out_param(tensor, "tensor") }?;
        let p = set.entries.lock().get(&name).copied().ok_or_else(|| {
            Error::invalid(format!("no tensor named {name:?} in the tensor set"))
        })?;
        // SAFETY: checked by the handle table; only its liveness matters here.
        unsafe { handle::get::<TensorObject>(p.0, &format!("the tensor stored under {name:?}")) }?;
        out.write(p.0);
        Ok(())
    })
}

#[cfg(test)]
mod tests;
