//! `nrt.h`: lifecycle, version, status strings, core counts and instance info
//! (spec/nrt-abi.md §3.1–§3.2).

use std::ffi::c_char;

use crate::abi::boundary::{fill_c_chars, opt_cstr, out_param, Guard};
use crate::abi::types::*;
use crate::abi_entry;
use crate::error::Error;
use crate::runtime::process;

/// The runtime version OpenNRT reports: the ABI level it implements (runtime 2.31.24.0).
pub const RT_VERSION: [u64; 4] = [2, 31, 24, 0];

/// Initialize the runtime: read the environment, load and check `libncfw.so`, reserve the
/// visible logical cores. Idempotent while initialized; allowed again after `nrt_close`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad environment (instance type, visible cores, LNC);
/// `NRT_FAILURE` if `libncfw.so` cannot be loaded or is not version 2, or in a process forked
/// after `nrt_init`; `NRT_CLOSED` while `nrt_close` runs.
///
/// # Safety
/// `fw_version` and `fal_version` must each be NULL or a NUL-terminated string.
pub unsafe extern "C" fn nrt_init(
    framework: RawFramework,
    fw_version: *const c_char,
    fal_version: *const c_char,
) -> NRT_STATUS {
    abi_entry!(status "nrt_init", Guard::None, {
        // SAFETY: forwarded from this function's contract.
        let (fw, fal) = unsafe { (opt_cstr(fw_version), opt_cstr(fal_version)) };
        process::init(framework, fw.as_deref().unwrap_or(""), fal.as_deref().unwrap_or(""))
    })
}

/// Close the runtime: tear down everything `nrt_init` built. Does nothing unless initialized.
/// Afterwards every call returns `NRT_UNINITIALIZED` until the next `nrt_init`.
pub extern "C" fn nrt_close() {
    abi_entry!(void "nrt_close", Guard::None, {
        process::close();
        Ok(())
    })
}

/// Fill `ver` with the runtime version, copying only what fits in `size` bytes: the four
/// numbers and `rt_detail` need 160 bytes, `git_hash` is written only when `size > 200`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `ver` is NULL; `NRT_FAILURE` if `size < 160`.
///
/// # Safety
/// `ver` must point to at least `size` writable bytes.
pub unsafe extern "C" fn nrt_get_version(ver: *mut nrt_version_t, size: usize) -> NRT_STATUS {
    abi_entry!(status "nrt_get_version", Guard::None, {
        if ver.is_null() {
            return Err(Error::invalid("ver is NULL"));
        }
        if size < 160 {
            return Err(Error::failure(format!(
                "size {size} is smaller than the 160 bytes of nrt_version_t up to git_hash"
            )));
        }
        let mut v = nrt_version_t {
            rt_major: RT_VERSION[0],
            rt_minor: RT_VERSION[1],
            rt_patch: RT_VERSION[2],
            rt_maintenance: RT_VERSION[3],
            rt_detail: [0; RT_VERSION_DETAIL_LEN],
            git_hash: [0; GIT_HASH_LEN],
        };
        let detail = format!(
            "libnrt version {}.{}.{}.{} (OpenNRT {})",
            RT_VERSION[0],
            RT_VERSION[1],
            RT_VERSION[2],
            RT_VERSION[3],
            env!("CARGO_PKG_VERSION")
        );
        fill_c_chars(&mut v.rt_detail, &detail);
        fill_c_chars(&mut v.git_hash, env!("OPENNRT_GIT_HASH"));
        let n = if size > 200 { std::mem::size_of::<nrt_version_t>() } else { 160 };
        // SAFETY: `ver` is non-null and the caller promises `size >= n` writable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping((&v as *const nrt_version_t).cast::<u8>(), ver.cast::<u8>(), n)
        };
        Ok(())
    })
}

/// The name of a status code as a static string (never NULL; unknown values give
/// `"NRT_UNKNOWN_STATUS"`).
pub extern "C" fn nrt_get_status_as_str(status: RawStatus) -> *const c_char {
    abi_entry!(value "nrt_get_status_as_str", Guard::None, c"NRT_UNKNOWN_STATUS".as_ptr(), {
        Ok(status_name(status).as_ptr())
    })
}

fn status_name(status: RawStatus) -> &'static std::ffi::CStr {
    macro_rules! names {
        ($($n:ident),*) => {
            match status {
                $(x if x == nrt_status::$n as i32 => {
                    // SAFETY: the literal is NUL-terminated by construction.
                    unsafe { std::ffi::CStr::from_bytes_with_nul_unchecked(concat!(stringify!($n), "\0").as_bytes()) }
                })*
                _ => c"NRT_UNKNOWN_STATUS",
            }
        };
    }
    names!(
        NRT_SUCCESS,
        NRT_FAILURE,
        NRT_INVALID,
        NRT_INVALID_HANDLE,
        NRT_RESOURCE,
        NRT_TIMEOUT,
        NRT_HW_ERROR,
        NRT_QUEUE_FULL,
        NRT_LOAD_NOT_ENOUGH_NC,
        NRT_UNSUPPORTED_NEFF_VERSION,
        NRT_FAIL_HOST_MEM_ALLOC,
        NRT_UNINITIALIZED,
        NRT_CLOSED,
        NRT_QUEUE_EMPTY,
        NRT_EXEC_UNIT_UNRECOVERABLE,
        NRT_EXEC_BAD_INPUT,
        NRT_EXEC_COMPLETED_WITH_NUM_ERR,
        NRT_EXEC_COMPLETED_WITH_ERR,
        NRT_EXEC_NC_BUSY,
        NRT_EXEC_OOB,
        NRT_COLL_PENDING,
        NRT_EXEC_HW_ERR_COLLECTIVES,
        NRT_EXEC_HW_ERR_HBM_UE,
        NRT_EXEC_HW_ERR_NC_UE,
        NRT_EXEC_HW_ERR_DMA_ABORT,
        NRT_EXEC_SW_NQ_OVERFLOW,
        NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE,
        NRT_NETWORK_PROXY_FAILURE
    )
}

fn write_count(
    out: *mut u32,
    what: &str,
    pick: impl FnOnce(&crate::runtime::config::Config) -> u32,
) -> crate::Result<()> {
    // SAFETY: the exported callers forward a pointer the C caller promises is NULL or valid.
    let out = unsafe { out_param(out, what) }?;
    let cfg = process::config()?;
    out.write(pick(&cfg));
    Ok(())
}

/// Number of logical NeuronCores on the instance (physical cores ÷ LNC size). Legal before
/// `nrt_init`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `vnc_count` is NULL or the environment is invalid.
///
/// # Safety
/// `vnc_count` must be NULL or writable.
pub unsafe extern "C" fn nrt_get_total_vnc_count(vnc_count: *mut u32) -> NRT_STATUS {
    abi_entry!(status "nrt_get_total_vnc_count", Guard::None, {
        write_count(vnc_count, "vnc_count", |c| c.total_cores())
    })
}

/// Alias of `nrt_get_total_vnc_count` (counts are in logical cores).
///
/// # Safety
/// As for `nrt_get_total_vnc_count`.
pub unsafe extern "C" fn nrt_get_total_nc_count(nc_count: *mut u32) -> NRT_STATUS {
    abi_entry!(status "nrt_get_total_nc_count", Guard::None, {
        write_count(nc_count, "nc_count", |c| c.total_cores())
    })
}

/// Number of logical NeuronCores this process owns: before `nrt_init` derived from
/// `NEURON_RT_VISIBLE_CORES` / `NEURON_RT_NUM_CORES`, afterwards the allocation made by
/// `nrt_init`.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `vnc_count` is NULL or the environment is invalid.
///
/// # Safety
/// `vnc_count` must be NULL or writable.
pub unsafe extern "C" fn nrt_get_visible_vnc_count(vnc_count: *mut u32) -> NRT_STATUS {
    abi_entry!(status "nrt_get_visible_vnc_count", Guard::None, {
        write_count(vnc_count, "vnc_count", |c| c.visible_cores)
    })
}

/// Alias of `nrt_get_visible_vnc_count`.
///
/// # Safety
/// As for `nrt_get_visible_vnc_count`.
pub unsafe extern "C" fn nrt_get_visible_nc_count(nc_count: *mut u32) -> NRT_STATUS {
    abi_entry!(status "nrt_get_visible_nc_count", Guard::None, {
        write_count(nc_count, "nc_count", |c| c.visible_cores)
    })
}

/// Describe the (simulated) instance, copying at most `instance_info_len` bytes of the 32-byte
/// struct.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `info` is NULL or the environment is invalid.
///
/// # Safety
/// `info` must point to at least `instance_info_len` writable bytes.
pub unsafe extern "C" fn nrt_get_instance_info(
    info: *mut nrt_instance_info_t,
    instance_info_len: usize,
) -> NRT_STATUS {
    abi_entry!(status "nrt_get_instance_info", Guard::None, {
        if info.is_null() {
            return Err(Error::invalid("info is NULL"));
        }
        let cfg = process::config()?;
        let mut v = nrt_instance_info_t {
            family: cfg.instance.family,
            size: cfg.instance.size,
            arch_name: [0; 16],
            device_revision: [0; 8],
        };
        fill_c_chars(&mut v.arch_name, cfg.instance.arch_name);
        fill_c_chars(&mut v.device_revision, "sim");
        let n = instance_info_len.min(std::mem::size_of::<nrt_instance_info_t>());
        // SAFETY: the caller promises `instance_info_len` writable bytes; we copy at most that.
        unsafe {
            std::ptr::copy_nonoverlapping((&v as *const nrt_instance_info_t).cast::<u8>(), info.cast::<u8>(), n)
        };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_strings_cover_all_28() {
        for (s, name) in nrt_status::ALL {
            let p = nrt_get_status_as_str(s as i32);
            // SAFETY: the function returns static NUL-terminated strings.
            let got = unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap();
            assert_eq!(got, name);
        }
        // SAFETY: as above.
        let unknown = unsafe { std::ffi::CStr::from_ptr(nrt_get_status_as_str(8)) };
        assert_eq!(unknown.to_str().unwrap(), "NRT_UNKNOWN_STATUS");
    }

    #[test]
    fn get_version_respects_size() {
        let mut v = std::mem::MaybeUninit::<nrt_version_t>::zeroed();
        // SAFETY: v is a valid nrt_version_t-sized buffer.
        unsafe {
            assert_eq!(nrt_get_version(v.as_mut_ptr(), 159) as i32, 1);
            assert_eq!(nrt_get_version(std::ptr::null_mut(), 224) as i32, 2);
            assert_eq!(nrt_get_version(v.as_mut_ptr(), 200) as i32, 0);
            let got = v.assume_init();
            assert_eq!(
                [got.rt_major, got.rt_minor, got.rt_patch, got.rt_maintenance],
                RT_VERSION
            );
            assert_eq!(got.git_hash[0], 0, "git_hash only when size > 200");
            assert_eq!(nrt_get_version(v.as_mut_ptr(), 224) as i32, 0);
        }
    }
}
