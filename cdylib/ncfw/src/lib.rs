//! `libncfw.so`: nothing but the binding of the three public, unversioned names to the
//! `extern "C"` functions of [`opennrt::abi::ncfw`] (docs/contract/carrier.md §1.1, Appendix B). rustc's
//! anonymous version script for a cdylib exports exactly these `#[no_mangle]` functions and
//! defines no version node, so the names stay unversioned like the vendor's.

use std::ffi::{c_char, c_int, c_void};

pub use imp::{ncfw_image_t, ncfw_ram_image_t};
use opennrt::abi::ncfw as imp;

/// See [`opennrt::abi::ncfw::libncfw_get_version`].
#[no_mangle]
pub extern "C" fn libncfw_get_version() -> c_int {
    imp::libncfw_get_version()
}

/// See [`opennrt::abi::ncfw::libncfw_get_image`].
///
/// # Safety
/// As for the function it forwards to.
#[no_mangle]
pub unsafe extern "C" fn libncfw_get_image(arch_id: u32, out: *mut ncfw_image_t) -> c_int {
    // SAFETY: the caller's pointers meet the # Safety contract of
    // opennrt::abi::ncfw::libncfw_get_image, which checks them.
    unsafe { imp::libncfw_get_image(arch_id, out) }
}

/// See [`opennrt::abi::ncfw::libncfw_ctx_log`].
///
/// # Safety
/// As for the function it forwards to.
#[no_mangle]
pub unsafe extern "C" fn libncfw_ctx_log(
    ctx: *const c_void,
    out_buf: *mut c_char,
    model_name: *const c_char,
    arch_id: u32,
) -> c_int {
    // SAFETY: the caller's pointers meet the # Safety contract of
    // opennrt::abi::ncfw::libncfw_ctx_log, which checks them.
    unsafe { imp::libncfw_ctx_log(ctx, out_buf, model_name, arch_id) }
}
