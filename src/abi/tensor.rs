//! `nrt.h` tensors and tensor sets, and `nrt_memcpy_to_device` (docs/contract/abi.md §3.3), on top of
//! [`runtime::tensor`](crate::runtime::tensor).
//!
//! **Handles.** A `nrt_tensor_t *` is a registered handle ([`handle`]) of an object holding one
//! [`Tensor`] behind a lock (`nrt_tensor_attach_buffer` replaces its storage). The object and
//! `tensor_of`, through which every family taking a tensor argument gets the tensor, live in
//! [`args`](crate::abi::args); `tensor_of` returns a cheap clone that keeps the storage alive
//! even if C frees the handle while an operation is queued. A `nrt_tensor_set_t *` is a registered handle of a
//! name → tensor-handle map ([`crate::abi::tensor_set`]). NULL is `NRT_INVALID`; a freed or foreign pointer is
//! `NRT_INVALID_HANDLE` and never dereferenced, so a double free is logged, not a crash.
//!
//! Tensor sets live in [`crate::abi::tensor_set`] (a sibling module, re-exported here).
//!
//! **Lifecycle.** Every function runs the §5.1 guard (13 before `nrt_init`). Tensors belong to
//! the `nrt_init` they were allocated under (`handle::Opaque::PER_INIT`): `nrt_close` frees
//! them, and a handle from before the close is `NRT_INVALID_HANDLE` after the next `nrt_init`
//! (the vendor releases device memory at close).

use crate::abi::boundary::{enter_code, enter_status, enter_value, enter_void};
use std::ffi::{c_char, c_int, c_void};
use std::time::Duration;

use parking_lot::RwLock;

use crate::abi::args::{freed_slot, tensor_of, TensorObject};
use crate::abi::boundary::{in_ref, non_null, opt_cstr, out_param, Guard};
use crate::abi::handle;
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::runtime::process;
use crate::runtime::tensor::{self as rt, Placement, Tensor};

pub use crate::abi::tensor_set::*;

/// The C host buffer of a read or write: NULL is allowed only for zero bytes.
fn buffer(p: *const c_void, size: usize, what: &str) -> Result<()> {
    if size > 0 {
        non_null(p, what)?;
    }
    Ok(())
}

/// Allocate a tensor of `size` bytes, zero-filled. `vnc` is relative to the process's visible
/// logical cores (0 = the first) and must be below `nrt_get_visible_vnc_count` for DEVICE
/// placement; it is ignored for HOST placement (the vendor's clients pass -1). `name` is an
/// optional debug label. Device memory is host memory with a usable VA.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor` set; `NRT_INVALID` for a NULL `tensor`, a bad core, an unknown
/// placement or `NRT_TENSOR_PLACEMENT_VIRTUAL` (removed in runtime 2.32); `NRT_RESOURCE`
/// (device) or `NRT_FAIL_HOST_MEM_ALLOC` (host) when out of memory; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated; `tensor` must be NULL or writable.
pub unsafe extern "C" fn nrt_tensor_allocate(
    tensor_placement: RawPlacement,
    vnc: c_int,
    size: usize,
    name: *const c_char,
    tensor: *mut *mut nrt_tensor_t,
) -> NRT_STATUS {
    enter_status("nrt_tensor_allocate", Guard::Lifecycle, || {
        // SAFETY: `tensor` is NULL or valid for writing one `nrt_tensor_t *` (this function's
        // contract); `out_param` refuses NULL and misalignment, so the final `out.write` is in
        // bounds.
        let out = unsafe { out_param(tensor, "tensor") }?;
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract); `opt_cstr` does not
        // read NULL.
        let name = unsafe { opt_cstr(name) }.unwrap_or_default();
        let placement = match tensor_placement {
            0 => Placement::Device,
            1 => Placement::Host,
            2 => {
                return Err(Error::invalid(
                    "NRT_TENSOR_PLACEMENT_VIRTUAL (2) is not supported: virtual tensors were removed in runtime 2.32; use DEVICE (0) or HOST (1)",
                ))
            }
            p => {
                return Err(Error::invalid(format!(
                    "unknown tensor placement {p} (DEVICE 0, HOST 1)"
                )))
            }
        };
        let core = match placement {
            Placement::Host => None,
            Placement::Device => {
                let visible = process::config()?.visible_cores;
                match u32::try_from(vnc) {
                    Ok(c) if c < visible => Some(c),
                    _ => {
                        return Err(Error::invalid(format!(
                            "vnc {vnc} is not a visible logical core of this process (0..{visible})"
                        )))
                    }
                }
            }
        };
        let t = Tensor::allocate(placement, core, size as u64, &name)?;
        out.write(handle::export(TensorObject {
            tensor: RwLock::new(t),
        }));
        Ok(())
    })
}

/// Free a tensor and set `*tensor` to NULL. NULL and `*tensor == NULL` are no-ops. Slices and
/// queued operations keep the memory they use alive. A pointer that is not a live tensor
/// (double free) is logged and left untouched.
///
/// # Safety
/// `tensor` must be NULL or point to a readable and writable `nrt_tensor_t *`.
pub unsafe extern "C" fn nrt_tensor_free(tensor: *mut *mut nrt_tensor_t) {
    enter_void("nrt_tensor_free", Guard::Lifecycle, || {
        // SAFETY: `tensor` is NULL or a readable `nrt_tensor_t *` slot (this function's contract);
        // `freed_slot` does not read NULL and refuses a misaligned slot.
        if let Some(h) = unsafe { freed_slot(tensor, "tensor") }? {
            // SAFETY: the handle table checks `h`; no reference to the object outlives this.
            unsafe { handle::release::<TensorObject>(h, "*tensor") }?;
            // SAFETY: `tensor` was read above, so it is valid and aligned.
            unsafe { tensor.write(std::ptr::null_mut()) };
        }
        Ok(())
    })
}

/// Copy `size` bytes at `offset` of the tensor into `buf`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `offset + size` exceeds the tensor or a pointer is NULL;
/// `NRT_INVALID_HANDLE` for a tensor that is not live; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `tensor` must be a live tensor; `buf` must have `size` writable bytes.
pub unsafe extern "C" fn nrt_tensor_read(
    tensor: *const nrt_tensor_t,
    buf: *mut c_void,
    offset: usize,
    size: usize,
) -> NRT_STATUS {
    enter_status("nrt_tensor_read", Guard::Lifecycle, || {
        // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let t = unsafe { tensor_of(tensor, "tensor") }?;
        buffer(buf, size, "buf")?;
        // SAFETY: `buf` has `size` writable bytes (this function's contract) and `buffer`
        // refused NULL with `size` > 0, which is `read_raw`'s contract for `dst`.
        unsafe { t.read_raw(offset as u64, buf.cast(), size as u64) }
    })
}

/// Copy `size` bytes from `buf` into the tensor at `offset`.
///
/// # Returns
/// As `nrt_tensor_read`.
///
/// # Safety
/// `tensor` must be a live tensor; `buf` must have `size` readable bytes.
pub unsafe extern "C" fn nrt_tensor_write(
    tensor: *mut nrt_tensor_t,
    buf: *const c_void,
    offset: usize,
    size: usize,
) -> NRT_STATUS {
    enter_status("nrt_tensor_write", Guard::Lifecycle, || {
        // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let t = unsafe { tensor_of(tensor, "tensor") }?;
        buffer(buf, size, "buf")?;
        // SAFETY: `buf` has `size` readable bytes (this function's contract) and `buffer`
        // refused NULL with `size` > 0, which is `write_raw`'s contract for `src`.
        unsafe { t.write_raw(offset as u64, buf.cast(), size as u64) }
    })
}

/// Check every batch and operation (handles, NULLs, ranges) before any byte moves, so a
/// failing batch call changes nothing. Returns each operation with its tensor.
///
/// # Safety
/// If `num_batches > 0`, `batches` must be NULL or point to `num_batches` initialised batch
/// descriptors, and each descriptor with `num_ops > 0` must have `ops` NULL or pointing to
/// `num_ops` initialised operations; none of them may be written, and no tensor they name may
/// be freed by another thread, during this call. Alignment is checked here (`in_ref`).
unsafe fn checked_batches(
    batches: *const nrt_tensor_batch_t,
    num_batches: u64,
    op: &str,
) -> Result<Vec<(Tensor, nrt_tensor_batch_op_t)>> {
    if num_batches == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: `num_batches > 0`, so `batches` is NULL or points to initialised descriptors not
    // written during this call (this function's contract); `in_ref` refuses NULL and misalignment.
    let first = unsafe { in_ref(batches, "batches") }?;
    let n = usize::try_from(num_batches)
        .map_err(|_| Error::invalid(format!("num_batches {num_batches} is too large")))?;
    // SAFETY: `first` is `batches`, non-NULL and aligned (checked by `in_ref`), and points to
    // `num_batches` = `n` initialised descriptors not written during this call (this function's
    // contract).
    let all = unsafe { std::slice::from_raw_parts(std::ptr::from_ref(first), n) };
    let mut work = Vec::new();
    for (i, b) in all.iter().enumerate() {
        // SAFETY: no tensor named by a descriptor is freed by another thread during this call
        // (this function's contract); `tensor_of` checks `b.tensor` against the live table first.
        let t = unsafe { tensor_of(b.tensor, &format!("batches[{i}].tensor")) }?;
        if b.num_ops == 0 {
            continue;
        }
        // SAFETY: `num_ops > 0`, so `b.ops` is NULL or points to initialised ops not written
        // during this call (this function's contract); `in_ref` refuses NULL and misalignment.
        let op0 = unsafe { in_ref(b.ops, &format!("batches[{i}].ops")) }?;
        // SAFETY: `op0` is a valid, aligned `nrt_tensor_batch_op_t` and `b.ops` points to
        // `b.num_ops` of them, not written during this call (this function's contract), so the
        // slice covers readable ops.
        let ops =
            unsafe { std::slice::from_raw_parts(std::ptr::from_ref(op0), b.num_ops as usize) };
        for (j, o) in ops.iter().enumerate() {
            let what = format!("batches[{i}].ops[{j}]");
            if o.size > 0 {
                non_null(o.buffer, &format!("{what}.buffer"))?;
            }
            t.check_range(o.offset, o.size, &format!("{op} {what}"))?;
            work.push((t.clone(), *o));
        }
    }
    Ok(work)
}

/// Run `num_batches` batches of reads, each op copying `size` bytes at `offset` of the
/// batch's tensor into `buffer`. Every operation is checked before any is run. Choice: `unsafe`
/// (skip the bounds checks in the vendor runtime) is accepted and ignored; checks always run.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL arrays or buffers or an out-of-range op (nothing is
/// copied then); `NRT_INVALID_HANDLE` for a tensor that is not live; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `batches` must be NULL or point to `num_batches` batch descriptors, each with `ops` NULL or
/// pointing to `num_ops` operations whose `buffer` is NULL or has `size` writable bytes. None of
/// them may be accessed by another thread, and no tensor they name freed, during this call.
pub unsafe extern "C" fn nrt_tensor_read_batch(
    batches: *const nrt_tensor_batch_t,
    num_batches: u64,
    r#unsafe: bool,
) -> NRT_STATUS {
    enter_status("nrt_tensor_read_batch", Guard::Lifecycle, || {
        let _ = r#unsafe;
        // SAFETY: `batches` points to `num_batches` descriptors whose ops are valid, and no named
        // tensor is freed during this call (this function's contract), which is what
        // `checked_batches` requires.
        for (t, o) in unsafe { checked_batches(batches, num_batches, "read") }? {
            // SAFETY: `checked_batches` refused a NULL `buffer` with `size` > 0, and each op's
            // `buffer` has `size` writable bytes (this function's contract): `read_raw`'s.
            unsafe { t.read_raw(o.offset, o.buffer.cast(), o.size) }?;
        }
        Ok(())
    })
}

/// Run `num_batches` batches of writes, each op copying `size` bytes from `buffer` into the
/// batch's tensor at `offset`. Checked and run as `nrt_tensor_read_batch`.
///
/// # Returns
/// As `nrt_tensor_read_batch`.
///
/// # Safety
/// `batches` must be NULL or point to `num_batches` batch descriptors, each with `ops` NULL or
/// pointing to `num_ops` operations whose `buffer` is NULL or has `size` readable bytes. None of
/// them may be written by another thread, and no tensor they name freed, during this call.
pub unsafe extern "C" fn nrt_tensor_write_batch(
    batches: *const nrt_tensor_batch_t,
    num_batches: u64,
    r#unsafe: bool,
) -> NRT_STATUS {
    enter_status("nrt_tensor_write_batch", Guard::Lifecycle, || {
        let _ = r#unsafe;
        // SAFETY: `batches` points to `num_batches` descriptors whose ops are valid, and no named
        // tensor is freed during this call (this function's contract), which is what
        // `checked_batches` requires.
        for (t, o) in unsafe { checked_batches(batches, num_batches, "write") }? {
            // SAFETY: `checked_batches` refused a NULL `buffer` with `size` > 0, and each op's
            // `buffer` has `size` readable bytes (this function's contract): `write_raw`'s.
            unsafe { t.write_raw(o.offset, o.buffer.cast_const().cast(), o.size) }?;
        }
        Ok(())
    })
}

/// Copy `size` bytes from `src` at `src_offset` to `dst` at `dst_offset` (overlap allowed).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL, out-of-range offsets or two device tensors on
/// different cores; `NRT_INVALID_HANDLE` for a tensor that is not live; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `src` and `dst` must be live tensors.
pub unsafe extern "C" fn nrt_tensor_copy(
    src: *const nrt_tensor_t,
    src_offset: usize,
    dst: *mut nrt_tensor_t,
    dst_offset: usize,
    size: usize,
) -> NRT_STATUS {
    enter_status("nrt_tensor_copy", Guard::Lifecycle, || {
        // SAFETY: `src` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let s = unsafe { tensor_of(src, "src") }?;
        // SAFETY: `dst` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let d = unsafe { tensor_of(dst, "dst") }?;
        if s.placement() == Placement::Device
            && d.placement() == Placement::Device
            && s.vnc() != d.vnc()
        {
            return Err(Error::invalid(format!(
                "src is on logical core {:?} and dst on {:?}: device tensors must be on the same core (docs/contract/abi.md §3.3)",
                s.vnc(),
                d.vnc()
            )));
        }
        d.copy_from(dst_offset as u64, &s, src_offset as u64, size as u64)
    })
}

/// Size of the tensor in bytes; 0 on any error (and for an empty tensor).
///
/// # Safety
/// `tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_get_size(tensor: *const nrt_tensor_t) -> usize {
    enter_value("nrt_tensor_get_size", Guard::Lifecycle, 0, || {
        // SAFETY: `tensor` is NULL or a live tensor (this function's contract), so no other thread
        // frees it during this call; `tensor_of` refuses NULL and non-live handles before any
        // dereference.
        Ok(unsafe { tensor_of(tensor, "tensor") }?.size() as usize)
    })
}

/// Fill `size` bytes at `offset` with the byte `value` (converted to `unsigned char`, as
/// `memset` does).
///
/// # Returns
/// As `nrt_tensor_write`.
///
/// # Safety
/// `tensor` must be a live tensor.
pub unsafe extern "C" fn nrt_tensor_memset(
    tensor: *mut nrt_tensor_t,
    offset: u64,
    value: c_int,
    size: usize,
) -> NRT_STATUS {
    enter_status("nrt_tensor_memset", Guard::Lifecycle, || {
        // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread frees it
        // during this call; `tensor_of` refuses NULL and non-live handles before any dereference.
        let t = unsafe { tensor_of(tensor, "tensor") }?;
        t.fill(offset, value as u8, size as u64)
    })
}

/// Allocate a tensor without storage (size 0, NULL VA, host placement); give it memory with
/// `nrt_tensor_attach_buffer`.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor` set; `NRT_INVALID` if `tensor` is NULL; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `name` must be NULL or NUL-terminated; `tensor` must be NULL or writable.
pub unsafe extern "C" fn nrt_tensor_allocate_empty(
    name: *const c_char,
    tensor: *mut *mut nrt_tensor_t,
) -> NRT_STATUS {
    enter_status("nrt_tensor_allocate_empty", Guard::Lifecycle, || {
        // SAFETY: `tensor` is NULL or valid for writing one `nrt_tensor_t *` (this function's
        // contract); `out_param` refuses NULL and misalignment, so the final `out.write` is in
        // bounds.
        let out = unsafe { out_param(tensor, "tensor") }?;
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract); `opt_cstr` does not
        // read NULL.
        let name = unsafe { opt_cstr(name) }.unwrap_or_default();
        let t = Tensor::empty(&name);
        out.write(handle::export(TensorObject {
            tensor: RwLock::new(t),
        }));
        Ok(())
    })
}

/// Make caller memory (`size` bytes at `buffer`) the storage of `tensor` (zero-copy; the caller
/// keeps ownership and keeps it alive). Any previous storage is released by this tensor (slices
/// of it keep theirs); the tensor becomes a host tensor of `size` bytes.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a NULL tensor or buffer; `NRT_INVALID_HANDLE` for a tensor
/// that is not live; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `tensor` must be a live tensor; `buffer` must stay valid for `size` bytes while attached.
pub unsafe extern "C" fn nrt_tensor_attach_buffer(
    tensor: *mut nrt_tensor_t,
    buffer: *mut c_void,
    size: usize,
) -> NRT_STATUS {
    enter_status("nrt_tensor_attach_buffer", Guard::Lifecycle, || {
        // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread frees it
        // while `obj` is used; `handle::get` refuses NULL and non-live handles before any
        // dereference.
        let obj = unsafe { handle::get::<TensorObject>(tensor, "tensor") }?;
        // SAFETY: the caller keeps `buffer` valid for `size` bytes while attached.
        unsafe { obj.tensor.write().attach(buffer.cast(), size as u64) }
    })
}

/// Create a tensor aliasing `[offset, offset + size)` of `tensor_source` (no copy; same
/// placement and core). The slice keeps the memory alive, so freeing the source first is safe.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor_slice` set; `NRT_INVALID` for an out-of-range slice or NULL
/// arguments; `NRT_INVALID_HANDLE` for a source that is not live; `NRT_UNINITIALIZED` before
/// `nrt_init`.
///
/// # Safety
/// `tensor_source` must be a live tensor; `name` NULL or NUL-terminated; `tensor_slice` NULL or
/// writable.
pub unsafe extern "C" fn nrt_tensor_allocate_slice(
    tensor_source: *const nrt_tensor_t,
    offset: usize,
    size: usize,
    name: *const c_char,
    tensor_slice: *mut *mut nrt_tensor_t,
) -> NRT_STATUS {
    enter_status("nrt_tensor_allocate_slice", Guard::Lifecycle, || {
        // SAFETY: `tensor_slice` is NULL or valid for writing one `nrt_tensor_t *` (this function's
        // contract); `out_param` refuses NULL and misalignment, so the final `out.write` is in
        // bounds.
        let out = unsafe { out_param(tensor_slice, "tensor_slice") }?;
        // SAFETY: `tensor_source` is a live tensor (this function's contract), so no other thread
        // frees it during this call; `tensor_of` refuses NULL and non-live handles before any
        // dereference.
        let src = unsafe { tensor_of(tensor_source, "tensor_source") }?;
        // SAFETY: `name` is NULL or NUL-terminated (this function's contract); `opt_cstr` does not
        // read NULL.
        let name = unsafe { opt_cstr(name) }.unwrap_or_default();
        let t = src.slice(offset as u64, size as u64, &name)?;
        out.write(handle::export(TensorObject {
            tensor: RwLock::new(t),
        }));
        Ok(())
    })
}

/// Host-usable virtual address of the tensor's first byte (device memory is host memory);
/// NULL on any error and for an empty tensor without attached memory. Every tensor with
/// storage has a non-NULL, unique VA, including size-0 tensors.
///
/// # Safety
/// `tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_get_va(tensor: *const nrt_tensor_t) -> *mut c_void {
    enter_value(
        "nrt_tensor_get_va",
        Guard::Lifecycle,
        std::ptr::null_mut(),
        || {
            // SAFETY: `tensor` is NULL or a live tensor (this function's contract), so no other
            // thread frees it during this call; `tensor_of` refuses NULL and non-live handles
            // before any dereference.
            let t = unsafe { tensor_of(tensor, "tensor") }?;
            if !t.has_storage() {
                return Err(Error::invalid(format!(
                    "tensor {:?} has no storage (allocated empty, nothing attached)",
                    t.name()
                )));
            }
            Ok(t.va().cast())
        },
    )
}

/// Describe the device memory of a tensor: `physical_address` is the address of its first
/// byte (simulated device memory is host memory, so this equals `nrt_tensor_get_va`), `size`
/// its size in bytes (the slice's own range for a slice), `hbm_index` 0 (OpenNRT simulates one
/// memory per device).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL arguments or a host tensor; `NRT_INVALID_HANDLE` for a
/// tensor that is not live; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `tensor` must be a live tensor; `alloc_info` NULL or writable.
pub unsafe extern "C" fn nrt_tensor_get_device_allocation_info(
    tensor: *const nrt_tensor_t,
    alloc_info: *mut nrt_tensor_device_allocation_info_t,
) -> NRT_STATUS {
    enter_status(
        "nrt_tensor_get_device_allocation_info",
        Guard::Lifecycle,
        || {
            // SAFETY: `alloc_info` is NULL or valid for one write (this function's contract);
            // `out_param` refuses NULL and misalignment, so the final `out.write` is in bounds.
            let out = unsafe { out_param(alloc_info, "alloc_info") }?;
            // SAFETY: `tensor` is a live tensor (this function's contract), so no other thread
            // frees it during this call; `tensor_of` refuses NULL and non-live handles before any
            // dereference.
            let t = unsafe { tensor_of(tensor, "tensor") }?;
            if t.placement() != Placement::Device {
                return Err(Error::invalid(format!(
                    "tensor {:?} is a host tensor; only device tensors have a device allocation",
                    t.name()
                )));
            }
            out.write(nrt_tensor_device_allocation_info_t {
                physical_address: t.va().addr() as u64,
                size: t.size() as usize,
                hbm_index: 0,
            });
            Ok(())
        },
    )
}

/// The logical core a tensor lives on, as `nrt_tensor_allocate` took it: relative to the
/// process's visible cores (0 = the first), the `lnc_idx` that `nrta_tensor_read` / `_write` /
/// `_copy` expect and the `vnc` that `nrt_get_model_info` reports. A host tensor (and one
/// allocated empty or given caller memory by `nrt_tensor_attach_buffer`) has no core:
/// `*lnc_idx` = -1, the `vnc` of host placement. A slice reports its parent's core. Newer than
/// runtime 2.31 (not in its export set); OpenNRT binds it at `NRT_2.0.0` beside the other
/// `nrt_tensor_*`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `tensor` or `lnc_idx` is NULL; `NRT_INVALID_HANDLE` for a
/// tensor that is not live; `NRT_UNINITIALIZED` before `nrt_init`. `*lnc_idx` is written only
/// on success.
///
/// # Safety
/// `tensor` must be NULL or a tensor handle that no other thread frees during this call;
/// `lnc_idx` NULL or writable.
pub unsafe extern "C" fn nrt_tensor_get_lnc_index(
    tensor: *const nrt_tensor_t,
    lnc_idx: *mut c_int,
) -> NRT_STATUS {
    enter_status("nrt_tensor_get_lnc_index", Guard::Lifecycle, || {
        // SAFETY: `lnc_idx` is NULL or valid for writing one `int` (this function's contract);
        // `out_param` refuses NULL and misalignment, so the final `out.write` is in bounds.
        let out = unsafe { out_param(lnc_idx, "lnc_idx") }?;
        // SAFETY: no other thread frees `tensor` during this call (this function's contract);
        // `tensor_of` refuses NULL and non-live handles before any dereference.
        let t = unsafe { tensor_of(tensor, "tensor") }?;
        let idx = match t.vnc() {
            Some(v) => c_int::try_from(v).map_err(|_| {
                Error::failure(format!(
                    "tensor {:?}: core {v} does not fit an int",
                    t.name()
                ))
            })?,
            None => -1,
        };
        out.write(idx);
        Ok(())
    })
}

/// Wait until the output tensor's completion count reaches `expected_completion_count`
/// (`timeout` in microseconds, negative = unbounded). Implicit async was removed in runtime
/// 2.34, so executions are synchronous: the count is the number of finished executions that
/// wrote this tensor as an output since the last reset. 0 is reached at once; a count no
/// execution provides times out.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_TIMEOUT` (not logged as an error); `NRT_INVALID` for NULL;
/// `NRT_INVALID_HANDLE` for a tensor that is not live; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `output_tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_check_output_completion(
    output_tensor: *const nrt_tensor_t,
    timeout: i64,
    expected_completion_count: u64,
) -> NRT_STATUS {
    enter_code(
        "nrt_tensor_check_output_completion",
        Guard::Lifecycle,
        || {
            // SAFETY: `output_tensor` is NULL or a live tensor (this function's contract), so no
            // other thread frees it during this call; `tensor_of` refuses NULL and non-live handles
            // before any dereference.
            let t = unsafe { tensor_of(output_tensor, "output_tensor") }?;
            let limit = u64::try_from(timeout).ok().map(Duration::from_micros);
            match t.wait_output_completions(expected_completion_count, limit) {
                Ok(()) => Ok(nrt_status::NRT_SUCCESS),
                Err(e) if e.kind() == crate::error::ErrorKind::Timeout => {
                    crate::log_debug!("nrt_tensor_check_output_completion", "{}", e.message());
                    Ok(nrt_status::NRT_TIMEOUT)
                }
                Err(e) => Err(e),
            }
        },
    )
}

/// Reset the output tensor's completion count to 0.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_INVALID_HANDLE` for a tensor that is not live;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `output_tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_reset_output_completion(
    output_tensor: *mut nrt_tensor_t,
) -> NRT_STATUS {
    enter_status(
        "nrt_tensor_reset_output_completion",
        Guard::Lifecycle,
        || {
            // SAFETY: `output_tensor` is NULL or a live tensor (this function's contract), so no
            // other thread frees it during this call; `tensor_of` refuses NULL and non-live handles
            // before any dereference.
            unsafe { tensor_of(output_tensor, "output_tensor") }?.reset_output_completions();
            Ok(())
        },
    )
}

/// Copy `size` host bytes to `dest`, an address inside a live device tensor (as returned by
/// `nrt_tensor_get_va`, plus any offset); all `size` bytes must lie inside that tensor's
/// memory. Host tensors and attached buffers are not device memory.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `dest` is NULL, `src` is NULL with `size > 0`, or the range
/// is not inside a live device tensor; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `src` must have `size` readable bytes.
pub unsafe extern "C" fn nrt_memcpy_to_device(
    dest: *mut c_void,
    src: *const c_void,
    size: usize,
) -> NRT_STATUS {
    enter_status("nrt_memcpy_to_device", Guard::Lifecycle, || {
        non_null(dest.cast_const(), "dest")?;
        buffer(src, size, "src")?;
        // SAFETY: `src` has `size` readable bytes by contract; `dest` is checked by the callee.
        unsafe { rt::memcpy_to_device(dest.cast(), src.cast(), size as u64) }
    })
}

#[cfg(test)]
pub(crate) mod tests;
