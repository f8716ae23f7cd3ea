//! `nrt_experimental.h` and other miscellaneous exports (docs/contract/abi.md §3.8): the legacy
//! trace pair, the network-plugin hand-off to libnccom, and the pool-engine microcode hook.

use std::ffi::{c_char, c_int, c_void};

use parking_lot::Mutex;

use crate::abi::boundary::{in_ref, req_cstr, Guard};
use crate::abi::types::*;
use crate::abi_entry;
use crate::error::Error;
use crate::runtime::state::{self, State};

/// Start the legacy execution trace. OpenNRT has no hardware to trace: this succeeds and logs
/// at INFO that there is nothing to capture.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_trace_start(trace_mem: bool) -> NRT_STATUS {
    abi_entry!(status "nrt_trace_start", Guard::Lifecycle, {
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
    abi_entry!(status "nrt_trace_stop", Guard::Lifecycle, {
        // SAFETY: forwarded from this function's contract.
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
    abi_entry!(value "nrt_get_libnccl_net", Guard::None, std::ptr::null_mut(), {
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
    })
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

fn copy_image(img: &nrt_ucode_img, what: &str, required: bool) -> crate::Result<Vec<u8>> {
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
    // SAFETY: the caller promises `bin` points to `size` readable bytes.
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
/// `ucode_info` must be NULL or valid; each image's `bin` must point to `size` readable bytes.
pub unsafe extern "C" fn nrt_set_pool_eng_ucode(ucode_info: *const nrt_ucode_info) -> NRT_STATUS {
    abi_entry!(status "nrt_set_pool_eng_ucode", Guard::None, {
        let s = state::current();
        if matches!(s, State::Closed | State::Child) {
            if let Some(e) = state::guard_error(s) {
                return Err(e);
            }
        }
        // SAFETY: forwarded from this function's contract.
        let info = unsafe { in_ref(ucode_info, "ucode_info") }?;
        let iram = copy_image(&info.iram, "iram", true)?;
        let dram = copy_image(&info.dram, "dram", false)?;
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
mod tests {
    use super::*;
    use crate::abi::handle::testing;
    use std::ptr::{null, null_mut};

    #[test]
    fn trace_is_guarded_then_succeeds() {
        testing::uninit(|| {
            assert_eq!(nrt_trace_start(true) as i32, 13);
            // SAFETY: NULL is checked.
            assert_eq!(unsafe { nrt_trace_stop(null()) } as i32, 13);
        });
        testing::init(|| {
            assert_eq!(nrt_trace_start(false) as i32, 0);
            // SAFETY: a valid C string, and NULL which is checked.
            unsafe {
                assert_eq!(nrt_trace_stop(null()) as i32, 2);
                assert_eq!(nrt_trace_stop(c"/tmp/x.ntff".as_ptr()) as i32, 0);
            }
        });
    }

    #[test]
    fn libnccl_net_reports_an_error() {
        let mut err = 0;
        let mut msg = [1 as c_char; 16];
        // SAFETY: writable locals of the given sizes; NULLs are allowed.
        unsafe {
            assert!(nrt_get_libnccl_net(&mut err, msg.as_mut_ptr(), msg.len()).is_null());
            assert_ne!(err, 0);
            let s = std::ffi::CStr::from_ptr(msg.as_ptr()).to_str().unwrap();
            assert_eq!(s, &NO_NET_PLUGIN[..15], "bounded and NUL-terminated");
            assert!(nrt_get_libnccl_net(null_mut(), null_mut(), 0).is_null());
            msg[0] = 5;
            assert!(nrt_get_libnccl_net(null_mut(), msg.as_mut_ptr(), 0).is_null());
            assert_eq!(msg[0], 5, "size 0 writes nothing");
        }
    }

    #[test]
    fn pool_ucode_is_validated_and_copied() {
        let mut iram = vec![1u8, 2, 3];
        let dram = [9u8; 2];
        let mut info = nrt_ucode_info {
            iram: nrt_ucode_img {
                bin: iram.as_mut_ptr(),
                size: iram.len(),
            },
            dram: nrt_ucode_img {
                bin: dram.as_ptr().cast_mut(),
                size: dram.len(),
            },
        };
        testing::uninit(|| {
            // SAFETY: `info` points to live buffers of the stated sizes; NULL is checked.
            unsafe {
                assert_eq!(nrt_set_pool_eng_ucode(null()) as i32, 2);
                assert_eq!(nrt_set_pool_eng_ucode(&info) as i32, 0);
            }
            iram[0] = 42; // the library kept a copy
            let got = pool_eng_ucode().unwrap();
            assert_eq!((got.iram, got.dram), (vec![1, 2, 3], vec![9, 9]));
            info.iram.bin = null_mut();
            // SAFETY: as above.
            assert_eq!(unsafe { nrt_set_pool_eng_ucode(&info) } as i32, 2);
            info.iram = nrt_ucode_img {
                bin: iram.as_mut_ptr(),
                size: 0,
            };
            // SAFETY: as above.
            assert_eq!(unsafe { nrt_set_pool_eng_ucode(&info) } as i32, 2);
            info.iram.size = 1;
            info.dram = nrt_ucode_img {
                bin: null_mut(),
                size: 0,
            };
            // SAFETY: as above; an empty DRAM image is allowed.
            assert_eq!(unsafe { nrt_set_pool_eng_ucode(&info) } as i32, 0);
            assert_eq!(pool_eng_ucode().unwrap().iram, vec![42]);
        });
    }
}
