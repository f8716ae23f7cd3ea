//! `nrt_experimental.h` and other miscellaneous exports (docs/contract/abi.md §3.8): the legacy
//! trace pair, the network-plugin hand-off to libnccom, and the pool-engine microcode hook.

use crate::abi::boundary::{enter_status, enter_value};
use std::ffi::{c_char, c_int, c_void};

use parking_lot::Mutex;

use crate::abi::boundary::{in_ref, req_cstr, Guard};
use crate::abi::types::*;
use crate::error::Error;
use crate::runtime::state::{self, State};

/// Start the legacy execution trace. OpenNRT has no hardware to trace: this succeeds and logs
/// at INFO that there is nothing to capture.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_trace_start(trace_mem: bool) -> NRT_STATUS {
    enter_status("nrt_trace_start", Guard::Lifecycle, || {
        crate::log_info!(
            "nrt_trace_start",
            "trace (trace_mem {trace_mem}) requested: OpenNRT simulates the device and has nothing to trace"
        );
        Ok(())
    })
}

/// Stop the legacy trace and save it to `filename`. Succeeds without writing a file (there is
/// nothing to save), logging at INFO.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `filename` is NULL; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `filename` must be NULL or NUL-terminated.
pub unsafe extern "C" fn nrt_trace_stop(filename: *const c_char) -> NRT_STATUS {
    enter_status("nrt_trace_stop", Guard::Lifecycle, || {
        // SAFETY: `filename` is NULL or NUL-terminated (this function's contract); `req_cstr`
        // refuses NULL.
        let f = unsafe { req_cstr(filename, "filename") }?;
        crate::log_info!("nrt_trace_stop", "nothing was traced; {f:?} is not written");
        Ok(())
    })
}

/// The message `nrt_get_libnccl_net` reports.
pub const NO_NET_PLUGIN: &str = "OpenNRT has no network plugin (libnccl-net): collectives between processes use OpenNRT's own transport";

/// Hand libnccom the network plugin the runtime loaded. OpenNRT has none: returns NULL, sets
/// `*err` to 1 and writes a NUL-terminated explanation into `err_msg` (truncated to
/// `err_msg_size` bytes). `err` and `err_msg` may be NULL. No lifecycle guard: libnccom calls
/// this while `nrt_init` is still running.
///
/// # Safety
/// `err` must be NULL or writable; `err_msg` NULL or writable for `err_msg_size` bytes.
pub unsafe extern "C" fn nrt_get_libnccl_net(
    err: *mut c_int,
    err_msg: *mut c_char,
    err_msg_size: usize,
) -> *mut c_void {
    enter_value(
        "nrt_get_libnccl_net",
        Guard::None,
        std::ptr::null_mut(),
        || {
            if !err.is_null() && err.is_aligned() {
                // SAFETY: non-null, aligned, and writable by the caller's contract.
                unsafe { err.write(1) };
            }
            if !err_msg.is_null() && err_msg_size > 0 {
                // SAFETY: the caller promises `err_msg_size` writable bytes.
                let dst = unsafe { std::slice::from_raw_parts_mut(err_msg, err_msg_size) };
                crate::abi::boundary::fill_c_chars(dst, NO_NET_PLUGIN);
            }
            crate::log_info!("nrt_get_libnccl_net", "{NO_NET_PLUGIN}");
            Ok(std::ptr::null_mut())
        },
    )
}

/// A stored pool-engine microcode pair (copied from the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolEngUcode {
    /// Instruction-RAM image.
    pub iram: Vec<u8>,
    /// Data-RAM image (may be empty).
    pub dram: Vec<u8>,
}

static POOL_UCODE: Mutex<Option<PoolEngUcode>> = Mutex::new(None);

/// Largest image accepted (a sanity bound against garbage sizes): 64 MiB.
pub const MAX_UCODE_IMAGE: usize = 64 << 20;

/// The custom pool-engine microcode registered by `nrt_set_pool_eng_ucode`, if any. The
/// simulated pool engine does not run it; it is kept for inspection.
pub fn pool_eng_ucode() -> Option<PoolEngUcode> {
    POOL_UCODE.lock().clone()
}

/// A copy of one microcode image.
///
/// # Safety
/// If `img.size` is non-zero and at most [`MAX_UCODE_IMAGE`], `img.bin` must be NULL or point
/// to `img.size` readable bytes not written during this call.
unsafe fn copy_image(img: &nrt_ucode_img, what: &str, required: bool) -> crate::Result<Vec<u8>> {
    if img.size == 0 {
        if required {
            return Err(Error::invalid(format!("{what} image is empty (size 0)")));
        }
        return Ok(Vec::new());
    }
    if img.size > MAX_UCODE_IMAGE {
        return Err(Error::invalid(format!(
            "{what} image size {} exceeds the {MAX_UCODE_IMAGE}-byte limit",
            img.size
        )));
    }
    // SAFETY: `img.size` is non-zero, so `img.bin` is NULL or has `img.size` readable bytes not
    // written during this call (this function's contract); `bytes` refuses NULL, and the slice
    // is copied before returning.
    let b = unsafe { crate::abi::boundary::bytes(img.bin, img.size, &format!("{what}.bin")) }?;
    Ok(b.to_vec())
}

/// Register a custom GPSIMD pool-engine microcode pair. The images are copied (the caller may
/// free its buffers afterwards) and kept for the process; a later call replaces them. The
/// simulated pool engine ignores them.
///
/// State rule (docs/contract/abi.md §10 item 8, the readings disagree): accepted both before
/// `nrt_init` (as the header asks) and while initialized, and kept across `nrt_close`; refused
/// during the `nrt_close` teardown (`NRT_CLOSED`) and in a child forked after `nrt_init`
/// (`NRT_FAILURE`).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `ucode_info` is NULL, the IRAM image is empty or has a NULL
/// `bin`, the DRAM image has a NULL `bin` with a non-zero size, or an image exceeds 64 MiB.
///
/// # Safety
/// `ucode_info` must be NULL or valid for reading one `nrt_ucode_info`; each image's `bin` must
/// be NULL or point to `size` readable bytes; none of them written during this call.
pub unsafe extern "C" fn nrt_set_pool_eng_ucode(ucode_info: *const nrt_ucode_info) -> NRT_STATUS {
    enter_status("nrt_set_pool_eng_ucode", Guard::None, || {
        let s = state::current();
        if matches!(s, State::Closed | State::Child) {
            if let Some(e) = state::guard_error(s) {
                return Err(e);
            }
        }
        // SAFETY: `ucode_info` is NULL or a valid `nrt_ucode_info` (this function's contract);
        // `in_ref` refuses NULL and misalignment.
        let info = unsafe { in_ref(ucode_info, "ucode_info") }?;
        // SAFETY: the IRAM image's `bin` points to `size` readable bytes (this function's
        // contract), which is `copy_image`'s contract.
        let iram = unsafe { copy_image(&info.iram, "iram", true) }?;
        // SAFETY: the DRAM image's `bin` points to `size` readable bytes (this function's
        // contract), which is `copy_image`'s contract.
        let dram = unsafe { copy_image(&info.dram, "dram", false) }?;
        crate::log_info!(
            "nrt_set_pool_eng_ucode",
            "stored pool-engine microcode (iram {} bytes, dram {} bytes); the simulated pool engine does not run it",
            iram.len(),
            dram.len()
        );
        *POOL_UCODE.lock() = Some(PoolEngUcode { iram, dram });
        Ok(())
    })
}

#[cfg(test)]
mod tests;
