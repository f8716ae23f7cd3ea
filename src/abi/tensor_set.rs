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
mod tests {
    use super::*;
    use crate::abi::handle::testing;
    use crate::abi::tensor::nrt_tensor_get_size;
    use crate::abi::tensor::tests::{alloc, free, DEVICE, HOST};
    use nrt_status::*;
    use std::ffi::CString;
    use std::ptr::{null, null_mut};

    #[test]
    fn tensor_sets() {
        testing::init(|| {
            let (a, b) = (alloc(DEVICE, 0, 4), alloc(HOST, -1, 4));
            let mut set = null_mut();
            let mut got = null_mut();
            let name = CString::new("output_0").unwrap();
            // SAFETY: live handles and C strings; NULLs and wrong kinds are checked by the callees.
            unsafe {
                assert_eq!(nrt_allocate_tensor_set(null_mut()), NRT_INVALID);
                assert_eq!(nrt_allocate_tensor_set(&mut set), NRT_SUCCESS);
                assert_eq!(
                    nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                    NRT_INVALID
                );
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(set, name.as_ptr(), a),
                    NRT_SUCCESS
                );
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(set, c"in".as_ptr(), b),
                    NRT_SUCCESS
                );
                assert_eq!(
                    nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                    NRT_SUCCESS
                );
                assert_eq!(got, a);
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(set, name.as_ptr(), b),
                    NRT_SUCCESS,
                    "replace"
                );
                assert_eq!(
                    nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                    NRT_SUCCESS
                );
                assert_eq!(got, b);
                let members = tensor_set_members(set, "set").unwrap();
                let names: Vec<_> = members
                    .iter()
                    .map(|(n, t)| (n.as_str(), t.size()))
                    .collect();
                assert_eq!(names, [("in", 4), ("output_0", 4)]);
                // NULLs and wrong kinds.
                assert_eq!(nrt_add_tensor_to_tensor_set(set, null(), a), NRT_INVALID);
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(set, name.as_ptr(), null_mut()),
                    NRT_INVALID
                );
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(null_mut(), name.as_ptr(), a),
                    NRT_INVALID
                );
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(a.cast(), name.as_ptr(), a),
                    NRT_INVALID_HANDLE,
                    "a tensor is not a set"
                );
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(set, name.as_ptr(), set.cast()),
                    NRT_INVALID_HANDLE,
                    "a set is not a tensor"
                );
                assert_eq!(
                    nrt_get_tensor_from_tensor_set(set, name.as_ptr(), null_mut()),
                    NRT_INVALID
                );
                assert_eq!(
                    nrt_get_tensor_from_tensor_set(set, null(), &mut got),
                    NRT_INVALID
                );
                assert_eq!(nrt_tensor_get_size(set.cast()), 0, "a set is not a tensor");
            }
            // Members freed first (the developer-guide order): the set reports them, destroy is fine.
            free(a);
            free(b);
            // SAFETY: as above; the stale members are only looked up in the handle table.
            unsafe {
                assert_eq!(
                    nrt_get_tensor_from_tensor_set(set, name.as_ptr(), &mut got),
                    NRT_INVALID_HANDLE
                );
                assert_eq!(
                    tensor_set_members(set, "set").unwrap_err().kind(),
                    crate::error::ErrorKind::InvalidHandle
                );
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(set, name.as_ptr(), a),
                    NRT_INVALID_HANDLE
                );
                let stale = set;
                nrt_destroy_tensor_set(&mut set);
                assert!(set.is_null());
                let mut again = stale;
                nrt_destroy_tensor_set(&mut again);
                assert_eq!(again, stale, "double destroy: logged, slot untouched");
                assert_eq!(
                    nrt_add_tensor_to_tensor_set(stale, name.as_ptr(), a),
                    NRT_INVALID_HANDLE
                );
                nrt_destroy_tensor_set(null_mut());
                nrt_destroy_tensor_set(&mut set);
            }
        });
    }
}
