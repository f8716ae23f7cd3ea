//! `ncfw/ncfw.h`: the three unversioned exports of libncfw.so (docs/contract/carrier.md §1.3–§1.6).
//!
//! libncfw returns plain `int`s with positive errno values, not `NRT_STATUS`: 0 success,
//! 2 (ENOENT) unknown arch key in `libncfw_get_image`, 22 (EINVAL) bad argument, 28 (ENOSPC)
//! truncated dump. The entry points run through [`enter`](crate::abi::boundary::enter) with
//! [`Guard::None`]; a caught panic returns 22.

use crate::abi::boundary::enter_value;
use std::ffi::{c_char, c_int, c_void, CStr};

use crate::abi::boundary::Guard;
use crate::ncfw::{ctx_log, image_for, Arch, LogStatus, LOG_BUF_SIZE};

/// The libncfw ABI version (descriptor layout + ctx_log signature).
pub const NCFW_VERSION: c_int = 2;
/// Success.
pub const NCFW_OK: c_int = 0;
/// `ENOENT`: `libncfw_get_image` was given an unknown arch key.
pub const NCFW_ENOENT: c_int = 2;
/// `EINVAL`: a NULL argument, or `libncfw_ctx_log` was given an unknown arch key.
pub const NCFW_EINVAL: c_int = 22;
/// `ENOSPC`: the `libncfw_ctx_log` output was truncated to the 1 MiB buffer.
pub const NCFW_ENOSPC: c_int = 28;

/// One firmware image: a pointer into the library's read-only data and its size.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct ncfw_ram_image_t {
    /// First byte of the image; valid for the life of the process. Never free it.
    pub ram_image: *const c_void,
    /// Byte length (fits in 32 bits; the upper half is always zero).
    pub ram_image_size: u64,
}

/// The `{iram, dram}` pair `libncfw_get_image` fills.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types)]
pub struct ncfw_image_t {
    /// Code image (offset 0x00).
    pub iram: ncfw_ram_image_t,
    /// Data image (offset 0x10).
    pub dram: ncfw_ram_image_t,
}

const _: () = {
    assert!(std::mem::size_of::<ncfw_ram_image_t>() == 16);
    assert!(std::mem::align_of::<ncfw_ram_image_t>() == 8);
    assert!(std::mem::offset_of!(ncfw_ram_image_t, ram_image) == 0);
    assert!(std::mem::offset_of!(ncfw_ram_image_t, ram_image_size) == 8);
    assert!(std::mem::size_of::<ncfw_image_t>() == 32);
    assert!(std::mem::offset_of!(ncfw_image_t, iram) == 0x00);
    assert!(std::mem::offset_of!(ncfw_image_t, dram) == 0x10);
};

/// The libncfw ABI version. libnrt refuses a carrier that does not return 2.
///
/// # Returns
/// Always 2.
pub extern "C" fn libncfw_get_version() -> c_int {
    enter_value("libncfw_get_version", Guard::None, NCFW_VERSION, || {
        Ok(NCFW_VERSION)
    })
}

fn ram_image(img: &'static [u8]) -> ncfw_ram_image_t {
    ncfw_ram_image_t {
        ram_image: img.as_ptr().cast(),
        // Sizes are u32 words zero-extended into the 64-bit slot (docs/contract/carrier.md §1.5).
        ram_image_size: u64::from(u32::try_from(img.len()).expect("image sizes fit in u32")),
    }
}

/// Get the OpenNRT firmware images (IRAM code, DRAM data) for a TOP_SP arch key
/// (5 = v2, 12 = v3, 20 = v4, 28 = v4+). The pointers point into this library's read-only
/// data, stay valid while the library is loaded, and must not be freed or written. These are
/// images for OpenNRT's software device, never for real silicon.
///
/// # Returns
/// 0 on success (`*out` filled, sizes with the upper 32 bits zero); 22 if `out` is NULL
/// (checked first, whatever the key); 2 for any other key (`*out` is not written); 22 if an
/// internal error was caught.
///
/// # Safety
/// `out` must be NULL or point to a writable `ncfw_image_t` (32 bytes).
pub unsafe extern "C" fn libncfw_get_image(arch_id: u32, out: *mut ncfw_image_t) -> c_int {
    enter_value("libncfw_get_image", Guard::None, NCFW_EINVAL, || {
        if out.is_null() {
            return Ok(NCFW_EINVAL);
        }
        let Some(arch) = Arch::from_id(arch_id) else {
            return Ok(NCFW_ENOENT);
        };
        let (iram, dram) = image_for(arch);
        let img = ncfw_image_t {
            iram: ram_image(iram),
            dram: ram_image(dram),
        };
        // SAFETY: `out` is non-null and the caller promises it points to a writable
        // ncfw_image_t; an unaligned write keeps us safe even for a misaligned pointer.
        unsafe { out.write_unaligned(img) };
        Ok(NCFW_OK)
    })
}

/// Pretty-print a collective-communication context as JSON-like text into `out_buf`
/// (docs/contract/carrier.md §4). `out_buf` is zeroed (exactly 1 MiB) and receives NUL-terminated text;
/// `model_name` is inserted verbatim (not escaped); `arch_id` is the key of `libncfw_get_image`.
///
/// # Returns
/// 0 on success; 28 if the text did not fit in 1 MiB (the buffer holds the first 1 MiB − 1
/// bytes); 22 for an unknown `arch_id` (checked first; the buffer is not touched), for a NULL
/// `ctx`, `out_buf` or `model_name` (the buffer is not touched), or if an internal error was
/// caught.
///
/// # Safety
/// `ctx` must point to at least the arch's minimum context size of readable bytes: 0x32C6
/// for key 5 and 0x44E6 for keys 12, 20 and 28 (nothing beyond is read). `out_buf` must point
/// to at least 0x100000 writable bytes that overlap neither `ctx` nor `model_name`.
/// `model_name` must be a NUL-terminated string. The
/// output for `pring_base_addr` / `pring_total_desc_num` is the address of those fields inside
/// `ctx`, as the vendor prints it.
pub unsafe extern "C" fn libncfw_ctx_log(
    ctx: *const c_void,
    out_buf: *mut c_char,
    model_name: *const c_char,
    arch_id: u32,
) -> c_int {
    enter_value("libncfw_ctx_log", Guard::None, NCFW_EINVAL, || {
        let Some(arch) = Arch::from_id(arch_id) else {
            return Ok(NCFW_EINVAL);
        };
        if ctx.is_null() || out_buf.is_null() || model_name.is_null() {
            return Ok(NCFW_EINVAL);
        }
        // SAFETY: non-null; the caller promises `min_size` readable bytes at `ctx`.
        let ctx = unsafe { std::slice::from_raw_parts(ctx.cast::<u8>(), arch.layout().min_size) };
        // SAFETY: non-null; the caller promises 0x100000 writable bytes at `out_buf` that do
        // not overlap `ctx` or `model_name`.
        let out = unsafe { std::slice::from_raw_parts_mut(out_buf.cast::<u8>(), LOG_BUF_SIZE) };
        // SAFETY: non-null and NUL-terminated by the caller's promise.
        let name = unsafe { CStr::from_ptr(model_name) }.to_bytes();
        Ok(match ctx_log(ctx, arch, name, out)? {
            LogStatus::Complete => NCFW_OK,
            LogStatus::Truncated => NCFW_ENOSPC,
        })
    })
}

#[cfg(test)]
mod tests;
