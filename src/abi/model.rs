//! `nrt.h` models: load, execute and introspection (docs/contract/abi.md §3.4).
//!
//! Not implemented yet (loading NEFFs). Each entry point runs the lifecycle guard
//! (`NRT_UNINITIALIZED` before `nrt_init`), then checks its arguments as the real one will:
//! a NULL pointer is `NRT_INVALID`, and a non-NULL model is `NRT_INVALID_HANDLE` (no model can
//! be loaded yet, so none is live), each with an ERROR line naming the argument. What passes
//! the checks returns `NRT_FAILURE` with a WARNING once per function. No argument is
//! dereferenced.

// The parameters are named for the header; some bodies will use them once models load.
#![allow(unused_variables)]

use std::ffi::c_void;

use crate::abi::boundary::{not_implemented, Guard};
use crate::abi::types::*;
use crate::abi_entry;
use crate::error::{Error, Result};

/// `p` must not be NULL (`NRT_INVALID`, naming `what`).
fn given<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    Ok(())
}

/// A model handle: NULL is `NRT_INVALID`; any other value names no live model, since none can
/// be loaded yet (`NRT_INVALID_HANDLE`).
fn model_arg<T>(model: *const T, what: &str) -> Result<()> {
    given(model, what)?;
    Err(Error::invalid_handle(format!(
        "{what} is not a live model: no model is loaded (loading NEFFs is not implemented yet)"
    )))
}

/// `nrt_load`'s NEFF and out-parameter.
fn neff_args(neff_bytes: *const c_void, size: usize, model: *mut *mut nrt_model_t) -> Result<()> {
    given(neff_bytes, "neff_bytes")?;
    if size == 0 {
        return Err(Error::invalid(
            "size is 0: a NEFF has at least its 1024-byte header",
        ));
    }
    given(model, "model")
}

/// Load a NEFF of `size` bytes onto `vnc_count` logical cores starting at `vnc` (relative to
/// the visible cores; -1 = first free). `vnc_count` is deprecated: -1, 0 and 1 are accepted.
///
/// # Returns
/// `NRT_SUCCESS` with `*model` set; `NRT_INVALID` (bad NEFF, LNC mismatch, NULL);
/// `NRT_UNSUPPORTED_NEFF_VERSION`; `NRT_LOAD_NOT_ENOUGH_NC`; `NRT_RESOURCE`;
/// `NRT_FAIL_HOST_MEM_ALLOC`; `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`:
/// not implemented yet (NEFF models).
///
/// # Safety
/// `neff_bytes` must have `size` readable bytes; `model` must be NULL or writable.
pub unsafe extern "C" fn nrt_load(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    model: *mut *mut nrt_model_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_load", Guard::Lifecycle, {
        neff_args(neff_bytes, size, model)?;
        not_implemented("nrt_load")
    })
}

/// `nrt_load` plus joining the collective world: `ctx_device_id` is this worker's global rank,
/// `ctx_device_count` the world size.
///
/// # Returns
/// As `nrt_load`; `NRT_INVALID` also when the NEFF's world does not fit the global
/// communicator. Currently `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// As for `nrt_load`.
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn nrt_load_collectives(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    ctx_device_id: u32,
    ctx_device_count: u32,
    model: *mut *mut nrt_model_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_load_collectives", Guard::Lifecycle, {
        neff_args(neff_bytes, size, model)?;
        not_implemented("nrt_load_collectives")
    })
}

/// Unload a model and free its resources.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad handle; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// `model` must be NULL or a live model.
pub unsafe extern "C" fn nrt_unload(model: *mut nrt_model_t) -> NRT_STATUS {
    abi_entry!(status "nrt_unload", Guard::Lifecycle, {
        model_arg(model, "model")?;
        not_implemented("nrt_unload")
    })
}

/// Run the model once, synchronously, binding its inputs and outputs by name from the two
/// tensor sets.
///
/// # Returns
/// `NRT_SUCCESS` or an execution status (1002–1006, 1200–1206, 101, `NRT_TIMEOUT`);
/// `NRT_INVALID` for bad arguments; `NRT_UNINITIALIZED` before `nrt_init`. Currently
/// `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// `model`, `input_set` and `output_set` must be live handles.
pub unsafe extern "C" fn nrt_execute(
    model: *mut nrt_model_t,
    input_set: *const nrt_tensor_set_t,
    output_set: *mut nrt_tensor_set_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_execute", Guard::Lifecycle, {
        given(input_set, "input_set")?;
        given(output_set, "output_set")?;
        model_arg(model, "model")?;
        not_implemented("nrt_execute")
    })
}

/// Run the same binding `repeat_count` times.
///
/// # Returns
/// As `nrt_execute`. Currently `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// As for `nrt_execute`.
pub unsafe extern "C" fn nrt_execute_repeat(
    model: *mut nrt_model_t,
    input_set: *const nrt_tensor_set_t,
    output_set: *mut nrt_tensor_set_t,
    repeat_count: i32,
) -> NRT_STATUS {
    abi_entry!(status "nrt_execute_repeat", Guard::Lifecycle, {
        given(input_set, "input_set")?;
        given(output_set, "output_set")?;
        if repeat_count < 1 {
            return Err(Error::invalid(format!(
                "repeat_count {repeat_count}: at least one execution"
            )));
        }
        model_arg(model, "model")?;
        not_implemented("nrt_execute_repeat")
    })
}

/// Number of logical cores the model occupies (alias of `nrt_get_model_vnc_count`).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_UNINITIALIZED` before `nrt_init`. Currently
/// `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// `model` must be NULL or a live model; `vnc_count` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_nc_count(
    model: *const nrt_model_t,
    vnc_count: *mut u32,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_model_nc_count", Guard::Lifecycle, {
        given(vnc_count, "vnc_count")?;
        model_arg(model, "model")?;
        not_implemented("nrt_get_model_nc_count")
    })
}

/// Number of logical cores the model occupies.
///
/// # Returns
/// As `nrt_get_model_nc_count`. Currently `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// As for `nrt_get_model_nc_count`.
pub unsafe extern "C" fn nrt_get_model_vnc_count(
    model: *const nrt_model_t,
    vnc_count: *mut u32,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_model_vnc_count", Guard::Lifecycle, {
        given(vnc_count, "vnc_count")?;
        model_arg(model, "model")?;
        not_implemented("nrt_get_model_vnc_count")
    })
}

/// Describe the model, copying at most `info_size_in` bytes of `nrt_model_info_t` and
/// reporting the bytes written in `*info_size_out` (probe-then-fill).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_UNINITIALIZED` before `nrt_init`. Currently
/// `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// `info` must have `info_size_in` writable bytes; `info_size_out` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_info(
    model: *const nrt_model_t,
    info: *mut nrt_model_info_t,
    info_size_in: usize,
    info_size_out: *mut usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_model_info", Guard::Lifecycle, {
        given(info, "info")?;
        model_arg(model, "model")?;
        not_implemented("nrt_get_model_info")
    })
}

/// Allocate the array describing the model's input and output tensors; free it with
/// `nrt_free_model_tensor_info`.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor_info` set; `NRT_INVALID` for NULL; `NRT_UNINITIALIZED` before
/// `nrt_init`. Currently `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// `model` must be a live model; `tensor_info` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_tensor_info(
    model: *mut nrt_model_t,
    tensor_info: *mut *mut nrt_tensor_info_array_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_model_tensor_info", Guard::Lifecycle, {
        given(tensor_info, "tensor_info")?;
        model_arg(model, "model")?;
        not_implemented("nrt_get_model_tensor_info")
    })
}

/// Free an array returned by `nrt_get_model_tensor_info`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not
/// implemented yet (NEFF models).
///
/// # Safety
/// `tensor_info` must be NULL or an array from `nrt_get_model_tensor_info`.
pub unsafe extern "C" fn nrt_free_model_tensor_info(
    tensor_info: *mut nrt_tensor_info_array_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_free_model_tensor_info", Guard::Lifecycle, {
        given(tensor_info, "tensor_info")?;
        Err(Error::invalid_handle(
            "tensor_info was not handed out by nrt_get_model_tensor_info (no model is loaded)",
        ))
    })
}

/// Number of instances of the model (copies loaded on different cores).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_UNINITIALIZED` before `nrt_init`. Currently
/// `NRT_FAILURE`: not implemented yet (NEFF models).
///
/// # Safety
/// `model` must be NULL or a live model; `instance_count` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_instance_count(
    model: *mut nrt_model_t,
    instance_count: *mut u32,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_model_instance_count", Guard::Lifecycle, {
        given(instance_count, "instance_count")?;
        model_arg(model, "model")?;
        not_implemented("nrt_get_model_instance_count")
    })
}

/// Legacy implicit-async mode: wait until every execution queued on logical core `vnc` has
/// completed.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented yet (NEFF models).
pub extern "C" fn nrt_async_drain_queued_execs(vnc: i32) -> NRT_STATUS {
    abi_entry!(status "nrt_async_drain_queued_execs", Guard::Lifecycle, {
        not_implemented("nrt_async_drain_queued_execs")
    })
}

/// Legacy implicit-async mode: register the callback called with `params` when an execution
/// completes.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not
/// implemented yet (NEFF models).
///
/// # Safety
/// `callback` must stay callable, and `params` valid for it, until replaced or `nrt_close`.
pub unsafe extern "C" fn nrt_register_async_exec_callback(
    callback: NRT_ASYNC_EXEC_STATUS_CALLBACK,
    params: *mut c_void,
) -> NRT_STATUS {
    abi_entry!(status "nrt_register_async_exec_callback", Guard::Lifecycle, {
        if callback.is_none() {
            return Err(Error::invalid("callback is NULL"));
        }
        not_implemented("nrt_register_async_exec_callback")
    })
}

#[cfg(test)]
mod tests;
