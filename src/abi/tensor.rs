//! `nrt.h` tensors and tensor sets, and `nrt_memcpy_to_device` (spec/nrt-abi.md §3.3).
//!
//! Every entry point here is part of the exported surface now and is implemented by the C ABI
//! issue (issue 5): until then each runs the lifecycle guard (so `NRT_UNINITIALIZED` before
//! `nrt_init`) and then returns `NRT_FAILURE`, logging a WARNING once per function. The two
//! value-returning functions return NULL / 0 and the two `void` functions do nothing; none of
//! them dereferences a pointer it is given.

// The parameters are named for the header; the bodies use them once issue 5 lands.
#![allow(unused_variables)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi::boundary::{not_implemented, Guard};
use crate::abi::types::*;
use crate::abi_entry;

/// Allocate a tensor of `size` bytes on logical core `vnc` (relative to the visible cores;
/// -1 for host placement). `name` is an optional debug label.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor` set; `NRT_INVALID` for bad arguments; `NRT_RESOURCE` or
/// `NRT_FAIL_HOST_MEM_ALLOC` when out of memory; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented until issue 5.
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
    abi_entry!(status "nrt_tensor_allocate", Guard::Lifecycle, {
        not_implemented("nrt_tensor_allocate")
    })
}

/// Free a tensor and set `*tensor` to NULL. NULL and `*tensor == NULL` are no-ops.
/// Currently does nothing (logs once): not implemented until issue 5.
///
/// # Safety
/// `tensor` must be NULL or point to a tensor handle from this library.
pub unsafe extern "C" fn nrt_tensor_free(tensor: *mut *mut nrt_tensor_t) {
    abi_entry!(void "nrt_tensor_free", Guard::Lifecycle, {
        not_implemented("nrt_tensor_free")
    })
}

/// Copy `size` bytes at `offset` of the tensor into `buf`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `offset + size` exceeds the tensor or a pointer is NULL;
/// `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `tensor` must be a live tensor; `buf` must have `size` writable bytes.
pub unsafe extern "C" fn nrt_tensor_read(
    tensor: *const nrt_tensor_t,
    buf: *mut c_void,
    offset: usize,
    size: usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_read", Guard::Lifecycle, { not_implemented("nrt_tensor_read") })
}

/// Copy `size` bytes from `buf` into the tensor at `offset`.
///
/// # Returns
/// As `nrt_tensor_read`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `tensor` must be a live tensor; `buf` must have `size` readable bytes.
pub unsafe extern "C" fn nrt_tensor_write(
    tensor: *mut nrt_tensor_t,
    buf: *const c_void,
    offset: usize,
    size: usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_write", Guard::Lifecycle, { not_implemented("nrt_tensor_write") })
}

/// Run `num_batches` batches of reads (scatter from tensors into host buffers). `unsafe`
/// skips the bounds checks in the vendor runtime.
///
/// # Returns
/// As `nrt_tensor_read`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `batches` must point to `num_batches` valid batch descriptors.
pub unsafe extern "C" fn nrt_tensor_read_batch(
    batches: *const nrt_tensor_batch_t,
    num_batches: u64,
    r#unsafe: bool,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_read_batch", Guard::Lifecycle, {
        not_implemented("nrt_tensor_read_batch")
    })
}

/// Run `num_batches` batches of writes (gather from host buffers into tensors).
///
/// # Returns
/// As `nrt_tensor_write`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `batches` must point to `num_batches` valid batch descriptors.
pub unsafe extern "C" fn nrt_tensor_write_batch(
    batches: *const nrt_tensor_batch_t,
    num_batches: u64,
    r#unsafe: bool,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_write_batch", Guard::Lifecycle, {
        not_implemented("nrt_tensor_write_batch")
    })
}

/// Copy `size` bytes from `src` at `src_offset` to `dst` at `dst_offset`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for out-of-range offsets or device tensors on different cores;
/// `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
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
    abi_entry!(status "nrt_tensor_copy", Guard::Lifecycle, { not_implemented("nrt_tensor_copy") })
}

/// Size of the tensor in bytes; 0 on any error. Currently always 0: not implemented until
/// issue 5.
///
/// # Safety
/// `tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_get_size(tensor: *const nrt_tensor_t) -> usize {
    abi_entry!(value "nrt_tensor_get_size", Guard::Lifecycle, 0, {
        not_implemented("nrt_tensor_get_size").map(|()| 0)
    })
}

/// Fill `size` bytes at `offset` with the byte `value`.
///
/// # Returns
/// As `nrt_tensor_write`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `tensor` must be a live tensor.
pub unsafe extern "C" fn nrt_tensor_memset(
    tensor: *mut nrt_tensor_t,
    offset: u64,
    value: c_int,
    size: usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_memset", Guard::Lifecycle, { not_implemented("nrt_tensor_memset") })
}

/// Allocate a tensor without storage; attach storage with `nrt_tensor_attach_buffer`.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor` set; `NRT_INVALID` if `tensor` is NULL; `NRT_UNINITIALIZED`
/// before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `name` must be NULL or NUL-terminated; `tensor` must be NULL or writable.
pub unsafe extern "C" fn nrt_tensor_allocate_empty(
    name: *const c_char,
    tensor: *mut *mut nrt_tensor_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_allocate_empty", Guard::Lifecycle, {
        not_implemented("nrt_tensor_allocate_empty")
    })
}

/// Make caller memory (`size` bytes at `buffer`) the storage of `tensor` (zero-copy; the caller
/// keeps ownership and keeps it alive).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL arguments; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `tensor` must be a live tensor; `buffer` must stay valid for `size` bytes while attached.
pub unsafe extern "C" fn nrt_tensor_attach_buffer(
    tensor: *mut nrt_tensor_t,
    buffer: *mut c_void,
    size: usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_attach_buffer", Guard::Lifecycle, {
        not_implemented("nrt_tensor_attach_buffer")
    })
}

/// Create a tensor aliasing `[offset, offset + size)` of `tensor_source` (no copy).
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor_slice` set; `NRT_INVALID` for an out-of-range slice or NULL
/// arguments; `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented
/// until issue 5.
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
    abi_entry!(status "nrt_tensor_allocate_slice", Guard::Lifecycle, {
        not_implemented("nrt_tensor_allocate_slice")
    })
}

/// Host-usable virtual address of the tensor's storage; NULL on any error. Currently always
/// NULL: not implemented until issue 5.
///
/// # Safety
/// `tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_get_va(tensor: *const nrt_tensor_t) -> *mut c_void {
    abi_entry!(value "nrt_tensor_get_va", Guard::Lifecycle, std::ptr::null_mut(), {
        not_implemented("nrt_tensor_get_va").map(|()| std::ptr::null_mut())
    })
}

/// Describe the device allocation behind a tensor (address, size, HBM index).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL arguments or a host tensor; `NRT_UNINITIALIZED` before
/// `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `tensor` must be a live tensor; `alloc_info` NULL or writable.
pub unsafe extern "C" fn nrt_tensor_get_device_allocation_info(
    tensor: *const nrt_tensor_t,
    alloc_info: *mut nrt_tensor_device_allocation_info_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_get_device_allocation_info", Guard::Lifecycle, {
        not_implemented("nrt_tensor_get_device_allocation_info")
    })
}

/// Implicit-async companion: wait until the output tensor's completion count reaches
/// `expected_completion_count` (`timeout` in microseconds, negative = unbounded).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_TIMEOUT`; `NRT_INVALID` for NULL; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `output_tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_check_output_completion(
    output_tensor: *const nrt_tensor_t,
    timeout: i64,
    expected_completion_count: u64,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_check_output_completion", Guard::Lifecycle, {
        not_implemented("nrt_tensor_check_output_completion")
    })
}

/// Implicit-async companion: reset the output tensor's completion count.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL; `NRT_UNINITIALIZED` before `nrt_init`. Currently
/// `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `output_tensor` must be NULL or a live tensor.
pub unsafe extern "C" fn nrt_tensor_reset_output_completion(
    output_tensor: *mut nrt_tensor_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_tensor_reset_output_completion", Guard::Lifecycle, {
        not_implemented("nrt_tensor_reset_output_completion")
    })
}

/// Copy `size` host bytes to `dest`, an address inside a live device tensor (as returned by
/// `nrt_tensor_get_va`).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if the range is not inside a live device tensor;
/// `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `src` must have `size` readable bytes.
pub unsafe extern "C" fn nrt_memcpy_to_device(
    dest: *mut c_void,
    src: *const c_void,
    size: usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_memcpy_to_device", Guard::Lifecycle, {
        not_implemented("nrt_memcpy_to_device")
    })
}

/// Allocate an empty tensor set (a name → tensor map consumed by `nrt_execute`).
///
/// # Returns
/// `NRT_SUCCESS` with `*result` set; `NRT_INVALID` if `result` is NULL; `NRT_UNINITIALIZED`
/// before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `result` must be NULL or writable.
pub unsafe extern "C" fn nrt_allocate_tensor_set(result: *mut *mut nrt_tensor_set_t) -> NRT_STATUS {
    abi_entry!(status "nrt_allocate_tensor_set", Guard::Lifecycle, {
        not_implemented("nrt_allocate_tensor_set")
    })
}

/// Free a tensor set (not its member tensors) and set `*tensor_set` to NULL. Currently does
/// nothing (logs once): not implemented until issue 5.
///
/// # Safety
/// `tensor_set` must be NULL or point to a tensor-set handle from this library.
pub unsafe extern "C" fn nrt_destroy_tensor_set(tensor_set: *mut *mut nrt_tensor_set_t) {
    abi_entry!(void "nrt_destroy_tensor_set", Guard::Lifecycle, {
        not_implemented("nrt_destroy_tensor_set")
    })
}

/// Add `tensor` to the set under `tensor_name`, replacing an existing entry of that name.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL arguments; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented until issue 5.
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
        not_implemented("nrt_add_tensor_to_tensor_set")
    })
}

/// Look up the tensor stored under `tensor_name`.
///
/// # Returns
/// `NRT_SUCCESS` with `*tensor` set; `NRT_INVALID` for NULL arguments or an unknown name;
/// `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `tensor_set` must be a live set; `tensor_name` NUL-terminated; `tensor` NULL or writable.
pub unsafe extern "C" fn nrt_get_tensor_from_tensor_set(
    tensor_set: *mut nrt_tensor_set_t,
    tensor_name: *const c_char,
    tensor: *mut *mut nrt_tensor_t,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_tensor_from_tensor_set", Guard::Lifecycle, {
        not_implemented("nrt_get_tensor_from_tensor_set")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::handle::testing;
    use std::ptr::{null, null_mut};

    #[test]
    fn guarded_before_init() {
        testing::uninit(|| {
            // SAFETY: NULL arguments are never dereferenced by these entry points.
            unsafe {
                assert_eq!(nrt_tensor_allocate(0, 0, 8, null(), null_mut()) as i32, 13);
                assert_eq!(nrt_tensor_read(null(), null_mut(), 0, 0) as i32, 13);
                assert_eq!(nrt_memcpy_to_device(null_mut(), null(), 0) as i32, 13);
                assert_eq!(nrt_allocate_tensor_set(null_mut()) as i32, 13);
                assert_eq!(nrt_tensor_get_size(null()), 0);
                assert!(nrt_tensor_get_va(null()).is_null());
                nrt_tensor_free(null_mut());
                nrt_destroy_tensor_set(null_mut());
            }
        });
    }

    #[test]
    fn not_implemented_after_init() {
        testing::init(|| {
            let mut bogus = std::ptr::without_provenance_mut::<nrt_tensor_t>(0xdead);
            // SAFETY: the stubs never dereference their arguments.
            unsafe {
                assert_eq!(nrt_tensor_allocate(0, 0, 8, null(), null_mut()) as i32, 1);
                assert_eq!(nrt_tensor_copy(null(), 0, null_mut(), 0, 0) as i32, 1);
                assert_eq!(nrt_tensor_get_size(bogus), 0);
                assert!(nrt_tensor_get_va(bogus).is_null());
                nrt_tensor_free(&mut bogus);
                assert_eq!(
                    bogus.addr(),
                    0xdead,
                    "void stubs never touch their argument"
                );
            }
        });
    }
}
