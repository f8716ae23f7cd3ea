//! `nrt.h` models: load, execute and introspection (docs/contract/abi.md §3.4), over
//! `runtime::model` (docs/neff.md has the choices where the format is open).
//!
//! A model handle is a registered object (`abi::handle`), freed by `nrt_unload` or by
//! `nrt_close`; a stale or foreign handle is `NRT_INVALID_HANDLE` and never dereferenced. The
//! tensor-info arrays of `nrt_get_model_tensor_info` are `malloc`ed (so a client that calls
//! `free()` on one does not corrupt the heap) and recorded here, so
//! `nrt_free_model_tensor_info` frees only arrays it handed out.

use crate::abi::boundary::enter_status;
use std::collections::BTreeSet;
use std::ffi::c_void;

use parking_lot::Mutex;

use crate::abi::args::{fill_prefix, model_of, tensor_set_members, visible_core, ModelObject};
use crate::abi::boundary::{not_implemented, out_param, Guard};
use crate::abi::handle;
use crate::abi::types::*;
use crate::error::{Error, ErrorKind, Result};
use crate::isa::enums::Dtype;
use crate::runtime::model::{LoadArgs, Model};

/// `p` must not be NULL (`NRT_INVALID`, naming `what`).
fn given<T>(p: *const T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    Ok(())
}

/// `nrt_load`'s NEFF bytes, checked.
///
/// # Safety
/// `neff_bytes` must be NULL or point to `size` readable bytes that are not written for `'a`.
unsafe fn neff_arg<'a>(neff_bytes: *const c_void, size: usize) -> Result<&'a [u8]> {
    given(neff_bytes, "neff_bytes")?;
    if size == 0 {
        return Err(Error::invalid(
            "size is 0: a NEFF has at least its 1024-byte header",
        ));
    }
    if size > isize::MAX as usize {
        return Err(Error::invalid(format!(
            "size {size} exceeds the address space"
        )));
    }
    // SAFETY: `neff_bytes` is non-NULL (checked by `given`), so it points to `size` readable
    // bytes not written for `'a` (this function's contract); `size` ≤ isize::MAX (checked).
    Ok(unsafe { std::slice::from_raw_parts(neff_bytes.cast::<u8>(), size) })
}

/// `vnc` as `nrt_load` takes it: −1 = the first free core.
fn load_core(vnc: i32) -> Result<Option<u32>> {
    match vnc {
        -1 => Ok(None),
        v => visible_core(i64::from(v), "vnc").map(Some),
    }
}

/// Load and hand out a model.
///
/// # Safety
/// `neff_bytes` must be NULL or point to `size` readable bytes not written during this call;
/// `model` must be NULL or valid for writing one `nrt_model_t *`.
unsafe fn load(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    world: Option<(u32, u32)>,
    model: *mut *mut nrt_model_t,
) -> Result<()> {
    // SAFETY: `model` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `out.write` below is in bounds.
    let out = unsafe { out_param(model, "model") }?;
    // SAFETY: `neff_bytes` is NULL or has `size` readable bytes not written during this call
    // (this function's contract); `file` is not used after it returns, as `neff_arg` requires.
    let file = unsafe { neff_arg(neff_bytes, size) }?;
    let m = Model::load(
        file,
        LoadArgs {
            vnc: load_core(vnc)?,
            vnc_count,
            world,
        },
    )?;
    out.write(handle::export(ModelObject {
        model: std::sync::Arc::new(m),
    }));
    Ok(())
}

/// Load a NEFF of `size` bytes onto `vnc_count` logical cores starting at `vnc` (relative to
/// the visible cores; -1 = first free). `vnc_count` is deprecated: -1, 0 and 1 are accepted.
///
/// # Returns
/// `NRT_SUCCESS` with `*model` set; `NRT_INVALID` (bad NEFF, LNC mismatch, NULL, a NEFF with
/// collectives and no global communicator); `NRT_UNSUPPORTED_NEFF_VERSION`;
/// `NRT_LOAD_NOT_ENOUGH_NC` (`vnc_count` > 1); `NRT_RESOURCE`; `NRT_FAIL_HOST_MEM_ALLOC`;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `neff_bytes` must be NULL or have `size` readable bytes, not written during this call;
/// `model` must be NULL or writable.
pub unsafe extern "C" fn nrt_load(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    model: *mut *mut nrt_model_t,
) -> NRT_STATUS {
    enter_status("nrt_load", Guard::Lifecycle, || {
        // SAFETY: `neff_bytes` is NULL or has `size` readable bytes not written during this call,
        // and `model` is NULL or writable (this function's contract): exactly `load`'s contract.
        unsafe { load(neff_bytes, size, vnc, vnc_count, None, model) }
    })
}

/// `nrt_load` plus joining the collective world: `ctx_device_id` is this worker's global rank,
/// `ctx_device_count` the world size. The NEFF's collectives are lowered here (the load-time
/// rewrite, docs/contract/abi.md §5.9).
///
/// # Returns
/// As `nrt_load`; `NRT_INVALID` also when the NEFF's world does not fit the global
/// communicator, or a collective pseudo-instruction is refused (the log line names the graph,
/// engine, slot and rule).
///
/// # Safety
/// As for `nrt_load`.
pub unsafe extern "C" fn nrt_load_collectives(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    ctx_device_id: u32,
    ctx_device_count: u32,
    model: *mut *mut nrt_model_t,
) -> NRT_STATUS {
    enter_status("nrt_load_collectives", Guard::Lifecycle, || {
        let world = Some((ctx_device_id, ctx_device_count));
        // SAFETY: `neff_bytes` is NULL or has `size` readable bytes not written during this call,
        // and `model` is NULL or writable (`nrt_load`'s contract, which this function shares):
        // exactly `load`'s contract.
        unsafe { load(neff_bytes, size, vnc, vnc_count, world, model) }
    })
}

/// Unload a model and free its resources.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE` for a handle that names no live
/// model; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `model` must be NULL or a model handle no other thread is using.
pub unsafe extern "C" fn nrt_unload(model: *mut nrt_model_t) -> NRT_STATUS {
    enter_status("nrt_unload", Guard::Lifecycle, || {
        given(model, "model")?;
        // SAFETY: checked against the live table; the caller's contract excludes other users.
        unsafe { handle::release::<ModelObject>(model, "model") }?;
        Ok(())
    })
}

/// The model and the sets' members of `nrt_execute` / `nrt_execute_repeat`, checked.
///
/// # Safety
/// Each of `model`, `input_set` and `output_set` may be any value (NULL and non-live handles
/// are refused before any dereference). No other thread may unload a live `model` while the
/// returned reference lives (`'a`), nor free a live set or any of its tensors during this call.
unsafe fn execute_args<'a>(
    model: *const nrt_model_t,
    input_set: *const nrt_tensor_set_t,
    output_set: *const nrt_tensor_set_t,
) -> Result<(&'a std::sync::Arc<Model>, Members, Members)> {
    given(input_set, "input_set")?;
    given(output_set, "output_set")?;
    // SAFETY: a live `model` is not unloaded for `'a` (this function's contract), as `model_of`
    // requires; `model_of` refuses NULL and non-live handles before any dereference.
    let m = unsafe { model_of(model, "model") }?;
    // SAFETY: a live `input_set` and its tensors are not freed during this call (this function's
    // contract), as `tensor_set_members` requires; it checks every handle against the live table.
    let inputs = unsafe { tensor_set_members(input_set, "input_set") }?;
    // SAFETY: a live `output_set` and its tensors are not freed during this call (this function's
    // contract), as `tensor_set_members` requires; it checks every handle against the live table.
    let outputs = unsafe { tensor_set_members(output_set, "output_set") }?;
    Ok((m, inputs, outputs))
}

/// A tensor set's members, by name.
type Members = Vec<(String, crate::runtime::tensor::Tensor)>;

/// Run the model once, synchronously, binding its inputs and outputs by name from the two
/// tensor sets.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL, a missing or wrong-sized tensor (named), or ranks
/// whose NEFFs carry different collective sequences; `NRT_INVALID_HANDLE`; `NRT_FAILURE` for a
/// model with compute the software device cannot execute (the log line names graph, engine,
/// slot and opcode); a collective's status (`NRT_TIMEOUT`, 1200, 1203); `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `model`, `input_set` and `output_set` must be live handles; no other thread may unload the
/// model or free either set or any of their tensors during this call.
pub unsafe extern "C" fn nrt_execute(
    model: *mut nrt_model_t,
    input_set: *const nrt_tensor_set_t,
    output_set: *mut nrt_tensor_set_t,
) -> NRT_STATUS {
    enter_status("nrt_execute", Guard::Lifecycle, || {
        // SAFETY: no other thread unloads `model` or frees either set or their tensors during this
        // call (this function's contract), and `m` does not outlive it, as `execute_args` requires.
        let (m, inputs, outputs) = unsafe { execute_args(model, input_set, output_set) }?;
        m.execute_repeat(&inputs, &outputs, 1)
    })
}

/// Run the same binding `repeat_count` times.
///
/// # Returns
/// As `nrt_execute`; `NRT_INVALID` for `repeat_count` < 1.
///
/// # Safety
/// As for `nrt_execute`.
pub unsafe extern "C" fn nrt_execute_repeat(
    model: *mut nrt_model_t,
    input_set: *const nrt_tensor_set_t,
    output_set: *mut nrt_tensor_set_t,
    repeat_count: i32,
) -> NRT_STATUS {
    enter_status("nrt_execute_repeat", Guard::Lifecycle, || {
        let times = u32::try_from(repeat_count)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "repeat_count {repeat_count}: at least one execution"
                ))
            })?;
        // SAFETY: no other thread unloads `model` or frees either set or their tensors during this
        // call (`nrt_execute`'s contract, which this function shares), and `m` does not outlive it,
        // as `execute_args` requires.
        let (m, inputs, outputs) = unsafe { execute_args(model, input_set, output_set) }?;
        m.execute_repeat(&inputs, &outputs, times)
    })
}

/// Number of logical cores the model occupies (alias of `nrt_get_model_vnc_count`): 1.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE`; `NRT_UNINITIALIZED` before
/// `nrt_init`.
///
/// # Safety
/// `model` must be NULL or a live model that no other thread unloads during this call;
/// `vnc_count` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_nc_count(
    model: *const nrt_model_t,
    vnc_count: *mut u32,
) -> NRT_STATUS {
    enter_status("nrt_get_model_nc_count", Guard::Lifecycle, || {
        // SAFETY: `model` is NULL or a live model not unloaded during this call, and `vnc_count` is
        // NULL or writable (this function's contract): exactly `one_core`'s contract.
        unsafe { one_core(model, vnc_count) }
    })
}

/// `*out = 1` for a live model (every model spans one logical core here).
///
/// # Safety
/// `model` may be any value (NULL and non-live handles are refused); a live one must not be
/// unloaded by another thread during this call. `out` must be NULL or valid for writing one
/// `u32`.
unsafe fn one_core(model: *const nrt_model_t, out: *mut u32) -> Result<()> {
    // SAFETY: `out` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `out.write(1)` is in bounds.
    let out = unsafe { out_param(out, "vnc_count") }?;
    // SAFETY: a live `model` is not unloaded during this call (this function's contract), and
    // the reference is dropped at once; `model_of` checks `model` against the live table.
    unsafe { model_of(model, "model") }?;
    out.write(1);
    Ok(())
}

/// Number of logical cores the model occupies: 1.
///
/// # Returns
/// As `nrt_get_model_nc_count`.
///
/// # Safety
/// As for `nrt_get_model_nc_count`.
pub unsafe extern "C" fn nrt_get_model_vnc_count(
    model: *const nrt_model_t,
    vnc_count: *mut u32,
) -> NRT_STATUS {
    enter_status("nrt_get_model_vnc_count", Guard::Lifecycle, || {
        // SAFETY: `model` is NULL or a live model not unloaded during this call, and `vnc_count` is
        // NULL or writable (`nrt_get_model_nc_count`'s contract, which this function shares):
        // exactly `one_core`'s contract.
        unsafe { one_core(model, vnc_count) }
    })
}

/// Describe the model, copying at most `info_size_in` bytes of `nrt_model_info_t` and
/// reporting the bytes of the full struct in `*info_size_out` (probe-then-fill: a smaller
/// `info_size_in` gets a prefix, append-only struct).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE`; `NRT_UNINITIALIZED` before
/// `nrt_init`.
///
/// # Safety
/// `model` must be NULL or a live model that no other thread unloads during this call; `info`
/// must be NULL or have `info_size_in` writable bytes; `info_size_out` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_info(
    model: *const nrt_model_t,
    info: *mut nrt_model_info_t,
    info_size_in: usize,
    info_size_out: *mut usize,
) -> NRT_STATUS {
    enter_status("nrt_get_model_info", Guard::Lifecycle, || {
        given(info, "info")?;
        // SAFETY: `model` is NULL or a live model not unloaded during this call (this function's
        // contract); `model_of` refuses NULL and non-live handles before any dereference.
        let m = unsafe { model_of(model, "model") }?;
        let full = nrt_model_info_t { vnc: m.vnc() };
        // SAFETY: `info` is non-NULL (checked by `given`), so it has `info_size_in` writable
        // bytes, and `info_size_out` is NULL or writable (this function's contract); `full` is a
        // local, so they do not overlap. That is `fill_prefix`'s contract.
        unsafe { fill_prefix(&full, info.cast(), info_size_in, info_size_out) }
    })
}

/// The arrays `nrt_get_model_tensor_info` handed out (address → entries).
static INFO_ARRAYS: Mutex<BTreeSet<usize>> = Mutex::new(BTreeSet::new());

/// `nrt_dtype_t` of a numpy dtype name (`tensor_map.json`, [`Dtype::from_numpy_name`]);
/// unknown: `NRT_DTYPE_UNKNOWN`.
fn dtype_of(name: Option<&str>) -> nrt_dtype_t {
    name.and_then(Dtype::from_numpy_name)
        .map_or(nrt_dtype_t::NRT_DTYPE_UNKNOWN, nrt_dtype_t::from)
}

/// Free an array built by [`tensor_info_array`] (its shapes, then itself).
///
/// # Safety
/// `a` came from [`tensor_info_array`] and is freed once.
unsafe fn free_info_array(a: *mut nrt_tensor_info_array_t) {
    // SAFETY: `a` is a live array of `tensor_count` initialised entries.
    unsafe {
        let n = (*a).tensor_count as usize;
        let first = std::ptr::addr_of_mut!((*a).tensor_array).cast::<nrt_tensor_info_t>();
        for i in 0..n {
            libc::free((*first.add(i)).shape.cast());
        }
        libc::free(a.cast());
    }
}

/// A `malloc`ed `nrt_tensor_info_array_t` describing `m`'s inputs then outputs.
fn tensor_info_array(m: &Model) -> Result<*mut nrt_tensor_info_array_t> {
    let vars: Vec<_> = m.neff().inputs().chain(m.neff().outputs()).collect();
    let oom = || {
        Error::new(
            ErrorKind::HostAlloc,
            "cannot allocate the tensor info array",
        )
    };
    let bytes = std::mem::size_of::<nrt_tensor_info_array_t>()
        + vars.len() * std::mem::size_of::<nrt_tensor_info_t>();
    // SAFETY: plain allocation; checked for NULL below.
    let a = unsafe { libc::calloc(1, bytes) }.cast::<nrt_tensor_info_array_t>();
    if a.is_null() {
        return Err(oom());
    }
    // SAFETY: `a` has room for the header and `vars.len()` entries (calloc zeroed them, so a
    // partial array frees cleanly: NULL shapes).
    unsafe {
        (*a).tensor_count = vars.len() as u64;
        let first = std::ptr::addr_of_mut!((*a).tensor_array).cast::<nrt_tensor_info_t>();
        for (i, v) in vars.iter().enumerate() {
            let e = &mut *first.add(i);
            let name = v.name.as_bytes();
            let n = name.len().min(NRT_TENSOR_NAME_MAX - 1);
            for (k, b) in name[..n].iter().enumerate() {
                e.name[k] = *b as std::ffi::c_char;
            }
            e.usage = if v.kind == crate::neff::VarKind::Input {
                nrt_tensor_usage_t::NRT_TENSOR_USAGE_INPUT
            } else {
                nrt_tensor_usage_t::NRT_TENSOR_USAGE_OUTPUT
            };
            e.size = usize::try_from(v.size).map_err(|_| oom())?;
            e.dtype = dtype_of(v.dtype.as_deref());
            let shape: Vec<u32> = match &v.shape {
                Some(s) => s
                    .iter()
                    .map(|&d| u32::try_from(d).unwrap_or(u32::MAX))
                    .collect(),
                None => Vec::new(),
            };
            if !shape.is_empty() {
                let p = libc::malloc(shape.len() * 4).cast::<u32>();
                if p.is_null() {
                    free_info_array(a);
                    return Err(oom());
                }
                std::ptr::copy_nonoverlapping(shape.as_ptr(), p, shape.len());
                e.shape = p;
                e.ndim = shape.len() as u32;
            }
        }
    }
    INFO_ARRAYS.lock().insert(a.addr());
    Ok(a)
}

/// Allocate the array describing the model's input and output tensors (names, usage, 64-bit
/// sizes from the NEFF's vars; dtype and shape where `tensor_map.json` gives them, else
/// `NRT_DTYPE_UNKNOWN` and no shape); free it with `nrt_free_model_tensor_info`.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor_info` set; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE`;
/// `NRT_FAIL_HOST_MEM_ALLOC`; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `model` must be a live model that no other thread unloads during this call; `tensor_info`
/// NULL or writable.
pub unsafe extern "C" fn nrt_get_model_tensor_info(
    model: *mut nrt_model_t,
    tensor_info: *mut *mut nrt_tensor_info_array_t,
) -> NRT_STATUS {
    enter_status("nrt_get_model_tensor_info", Guard::Lifecycle, || {
        // SAFETY: `tensor_info` is NULL or valid for one write (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(tensor_info, "tensor_info") }?;
        // SAFETY: `model` is a live model not unloaded during this call (this function's
        // contract); `model_of` refuses NULL and non-live handles before any dereference.
        let m = unsafe { model_of(model, "model") }?;
        out.write(tensor_info_array(m)?);
        Ok(())
    })
}

/// Free an array returned by `nrt_get_model_tensor_info`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE` for a pointer it did not hand
/// out (or already freed); `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `tensor_info` must be NULL or an array from `nrt_get_model_tensor_info`.
pub unsafe extern "C" fn nrt_free_model_tensor_info(
    tensor_info: *mut nrt_tensor_info_array_t,
) -> NRT_STATUS {
    enter_status("nrt_free_model_tensor_info", Guard::Lifecycle, || {
        given(tensor_info, "tensor_info")?;
        if !INFO_ARRAYS.lock().remove(&tensor_info.addr()) {
            return Err(Error::invalid_handle(
                "tensor_info was not handed out by nrt_get_model_tensor_info, or was freed",
            ));
        }
        // SAFETY: handed out by tensor_info_array and removed from the record just now, once.
        unsafe { free_info_array(tensor_info) };
        Ok(())
    })
}

/// Number of instances of the model (copies loaded on different cores): 1.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE`; `NRT_UNINITIALIZED` before
/// `nrt_init`.
///
/// # Safety
/// `model` must be NULL or a live model that no other thread unloads during this call;
/// `instance_count` NULL or writable.
pub unsafe extern "C" fn nrt_get_model_instance_count(
    model: *mut nrt_model_t,
    instance_count: *mut u32,
) -> NRT_STATUS {
    enter_status("nrt_get_model_instance_count", Guard::Lifecycle, || {
        // SAFETY: `instance_count` is NULL or valid for one write (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write(1)` is in bounds.
        let out = unsafe { out_param(instance_count, "instance_count") }?;
        // SAFETY: `model` is NULL or a live model not unloaded during this call (this function's
        // contract); `model_of` refuses NULL and non-live handles before any dereference.
        unsafe { model_of(model, "model") }?;
        out.write(1);
        Ok(())
    })
}

/// Legacy implicit-async mode: wait until every execution queued on logical core `vnc` has
/// completed.
///
/// `nrt_execute` is synchronous here (implicit async mode was removed in runtime 2.34,
/// docs/contract/abi.md §5.3), so nothing is ever queued: the drain returns at once once the
/// core is checked.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a core that is not visible; `NRT_UNINITIALIZED` before
/// `nrt_init`.
pub extern "C" fn nrt_async_drain_queued_execs(vnc: i32) -> NRT_STATUS {
    enter_status("nrt_async_drain_queued_execs", Guard::Lifecycle, || {
        visible_core(i64::from(vnc), "vnc").map(|_| ())
    })
}

/// Legacy implicit-async mode: register the callback called with `params` when an execution
/// completes.
///
/// Not implemented: with synchronous execution (implicit async mode was removed in runtime
/// 2.34) no execution would ever call it, and accepting it would promise callbacks that never
/// come.
///
/// # Returns
/// `NRT_INVALID` for a NULL callback; `NRT_FAILURE` otherwise (logged once);
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `callback` must stay callable, and `params` valid for it, until replaced or `nrt_close`.
pub unsafe extern "C" fn nrt_register_async_exec_callback(
    callback: NRT_ASYNC_EXEC_STATUS_CALLBACK,
    params: *mut c_void,
) -> NRT_STATUS {
    enter_status("nrt_register_async_exec_callback", Guard::Lifecycle, || {
        let _ = params;
        if callback.is_none() {
            return Err(Error::invalid("callback is NULL"));
        }
        not_implemented("nrt_register_async_exec_callback")
    })
}

#[cfg(test)]
mod tests;
