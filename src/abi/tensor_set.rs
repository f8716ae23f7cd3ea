//! `nrt.h` tensor sets (docs/contract/abi.md §3.3): the name → tensor maps `nrt_execute` consumes.
//! A child of [`tensor`](super) (declared there, so `src/abi.rs` re-exports it with the
//! tensor functions).
//!
//! **Sets store handles, not tensors** (§3.3: "the set stores the pointer"). Destroying a set
//! never looks at its members (the developer guide frees members first); a lookup returns the
//! pointer that was added, and a member freed since is `NRT_INVALID_HANDLE` when it is looked
//! up or used. A freed member whose address is reused by a new tensor is indistinguishable
//! from that tensor (the caller's dangling pointer, as with the vendor library).
//!
//! The set object and `tensor_set_members`, which resolves a set argument for `nrt_execute`,
//! live in [`args`](crate::abi::args), with the other argument helpers.

use crate::abi::boundary::{enter_status, enter_void};
use std::ffi::c_char;

use crate::abi::args::{freed_slot, TensorObject, TensorPtr, TensorSet};
use crate::abi::boundary::{out_param, req_cstr, Guard};
use crate::abi::handle;
use crate::abi::types::*;
use crate::error::Error;

/// Allocate an empty tensor set (a name → tensor map consumed by `nrt_execute`).
///
/// # Returns
/// `NRT_SUCCESS` with `*result` set; `NRT_INVALID` if `result` is NULL; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `result` must be NULL or writable.
pub unsafe extern "C" fn nrt_allocate_tensor_set(result: *mut *mut nrt_tensor_set_t) -> NRT_STATUS {
    enter_status("nrt_allocate_tensor_set", Guard::Lifecycle, || {
        // SAFETY: `result` is NULL or valid for writing one `nrt_tensor_set_t *` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
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
    enter_void("nrt_destroy_tensor_set", Guard::Lifecycle, || {
        // SAFETY: `tensor_set` is NULL or a readable `nrt_tensor_set_t *` slot (this function's
        // contract); `freed_slot` does not read NULL and refuses a misaligned slot.
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
    enter_status("nrt_add_tensor_to_tensor_set", Guard::Lifecycle, || {
        // SAFETY: `tensor_set` is a live set (this function's contract), so no other thread frees
        // it while `set` is used; `handle::get` refuses NULL and non-live handles before any
        // dereference.
        let set = unsafe { handle::get::<TensorSet>(tensor_set, "tensor_set") }?;
        // SAFETY: `tensor_name` is NUL-terminated (this function's contract); `req_cstr` also
        // refuses NULL.
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
    enter_status("nrt_get_tensor_from_tensor_set", Guard::Lifecycle, || {
        // SAFETY: `tensor_set` is a live set (this function's contract), so no other thread frees
        // it while `set` is used; `handle::get` refuses NULL and non-live handles before any
        // dereference.
        let set = unsafe { handle::get::<TensorSet>(tensor_set, "tensor_set") }?;
        // SAFETY: `tensor_name` is NUL-terminated (this function's contract); `req_cstr` also
        // refuses NULL.
        let name = unsafe { req_cstr(tensor_name, "tensor_name") }?;
        // SAFETY: `tensor` is NULL or valid for writing one `nrt_tensor_t *` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(tensor, "tensor") }?;
        let p =
            set.entries.lock().get(&name).copied().ok_or_else(|| {
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
