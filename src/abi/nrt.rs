//! `nrt.h`: lifecycle, version, status strings, core counts, instance info, and the topology
//! and memory getters (docs/contract/abi.md §3.1–§3.2).
//!
//! Guards: `nrt_init`, `nrt_close`, the version and status-string functions, the four count
//! getters and `nrt_get_instance_info` work in any state; every other getter here runs the
//! lifecycle guard (`NRT_UNINITIALIZED` before `nrt_init`).

use crate::abi::boundary::{enter_code, enter_status, enter_value, enter_void};
use std::ffi::{c_char, c_int, c_void};

use crate::abi::args::{fill_prefix, visible_core};
use crate::abi::boundary::{fill_c_chars, not_implemented, opt_cstr, out_param, Guard};
use crate::abi::types::*;
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
    enter_status("nrt_init", Guard::None, || {
        // SAFETY: `fw_version` is NULL or NUL-terminated (this function's contract); `opt_cstr`
        // does not read NULL.
        let fw = unsafe { opt_cstr(fw_version) };
        // SAFETY: `fal_version` is NULL or NUL-terminated (this function's contract); `opt_cstr`
        // does not read NULL.
        let fal = unsafe { opt_cstr(fal_version) };
        process::init(
            framework,
            fw.as_deref().unwrap_or(""),
            fal.as_deref().unwrap_or(""),
        )
    })
}

/// Close the runtime: tear down everything `nrt_init` built. Does nothing unless initialized.
/// Afterwards every call returns `NRT_UNINITIALIZED` until the next `nrt_init`.
pub extern "C" fn nrt_close() {
    enter_void("nrt_close", Guard::None, || {
        // The runtime tears itself down (runtime::process::close); then what the ABI layer
        // keeps per nrt_init: tensors, tensor sets, unscheduled contexts, profile sessions.
        process::close(|| {
            crate::abi::profile::reset_sessions();
            crate::abi::sendrecv::forget_handles();
            crate::abi::handle::free_per_init_objects();
        });
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
    enter_status("nrt_get_version", Guard::None, || {
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
        let n = if size > 200 {
            std::mem::size_of::<nrt_version_t>()
        } else {
            160
        };
        // SAFETY: `ver` is non-null and the caller promises `size >= n` writable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&v as *const nrt_version_t).cast::<u8>(),
                ver.cast::<u8>(),
                n,
            )
        };
        Ok(())
    })
}

/// The name of a status code as a static string (never NULL; unknown values give
/// `"NRT_UNKNOWN_STATUS"`).
pub extern "C" fn nrt_get_status_as_str(status: RawStatus) -> *const c_char {
    enter_value(
        "nrt_get_status_as_str",
        Guard::None,
        nrt_status::unknown_c_name().as_ptr(),
        || Ok(nrt_status::c_name_of(status).as_ptr()),
    )
}

/// Write one of the configuration's core counts to `*out`.
///
/// # Safety
/// `out` must be NULL or valid for writing one `u32`.
unsafe fn write_count(
    out: *mut u32,
    what: &str,
    pick: impl FnOnce(&crate::runtime::config::Config) -> u32,
) -> crate::Result<()> {
    // SAFETY: `out` is NULL or valid for one write (this function's contract); `out_param`
    // refuses NULL and misalignment, so `out.write` below is in bounds.
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
    enter_status("nrt_get_total_vnc_count", Guard::None, || {
        // SAFETY: `vnc_count` is NULL or writable (this function's contract), which is
        // `write_count`'s contract.
        unsafe { write_count(vnc_count, "vnc_count", |c| c.total_cores()) }
    })
}

/// Alias of `nrt_get_total_vnc_count` (counts are in logical cores).
///
/// # Safety
/// `nc_count` must be NULL or writable.
pub unsafe extern "C" fn nrt_get_total_nc_count(nc_count: *mut u32) -> NRT_STATUS {
    enter_status("nrt_get_total_nc_count", Guard::None, || {
        // SAFETY: `nc_count` is NULL or writable (this function's contract), which is
        // `write_count`'s contract.
        unsafe { write_count(nc_count, "nc_count", |c| c.total_cores()) }
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
    enter_status("nrt_get_visible_vnc_count", Guard::None, || {
        // SAFETY: `vnc_count` is NULL or writable (this function's contract), which is
        // `write_count`'s contract.
        unsafe { write_count(vnc_count, "vnc_count", |c| c.visible_cores) }
    })
}

/// Alias of `nrt_get_visible_vnc_count`.
///
/// # Safety
/// `nc_count` must be NULL or writable.
pub unsafe extern "C" fn nrt_get_visible_nc_count(nc_count: *mut u32) -> NRT_STATUS {
    enter_status("nrt_get_visible_nc_count", Guard::None, || {
        // SAFETY: `nc_count` is NULL or writable (this function's contract), which is
        // `write_count`'s contract.
        unsafe { write_count(nc_count, "nc_count", |c| c.visible_cores) }
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
    enter_status("nrt_get_instance_info", Guard::None, || {
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
            std::ptr::copy_nonoverlapping(
                (&v as *const nrt_instance_info_t).cast::<u8>(),
                info.cast::<u8>(),
                n,
            )
        };
        Ok(())
    })
}

/// The host device id of local Neuron device `neuron_dev`. In the simulated instance device `i`
/// is host device `i` (no container remapping).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `host_device_id` is NULL or `neuron_dev` is not a device of
/// the instance; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `host_device_id` must be NULL or writable.
pub unsafe extern "C" fn nrt_host_device_id_get(
    neuron_dev: c_int,
    host_device_id: *mut u32,
) -> NRT_STATUS {
    enter_status("nrt_host_device_id_get", Guard::Lifecycle, || {
        // SAFETY: `host_device_id` is NULL or valid for writing one `uint32_t` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(host_device_id, "host_device_id") }?;
        let cfg = process::config()?;
        let dev = cfg.instance.device(i64::from(neuron_dev), "neuron_dev")?;
        out.write(dev);
        Ok(())
    })
}

/// The routing id (RID) of every host device: entry `i` of `host_did_to_rid_map` is the RID of
/// host device `i`. In the simulated instance the map is the identity.
///
/// `*count` is in/out: in, the capacity of `host_did_to_rid_map` in entries; out, the number of
/// entries written (the number of devices). With `host_did_to_rid_map` NULL the call only
/// reports the number of devices in `*count` (probe).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `count` is NULL; `NRT_RESOURCE` if the capacity is smaller
/// than the number of devices (nothing is written); `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `count` must be NULL or readable and writable; `host_did_to_rid_map` NULL or writable for
/// `*count` entries.
pub unsafe extern "C" fn nrt_host_device_id_rid_map_get(
    count: *mut u32,
    host_did_to_rid_map: *mut u32,
) -> NRT_STATUS {
    enter_status("nrt_host_device_id_rid_map_get", Guard::Lifecycle, || {
        // SAFETY: `count` is NULL or valid for reading and writing one `uint32_t` (this
        // function's contract); `out_param` refuses NULL and misalignment before any access.
        let count = unsafe { out_param(count, "count") }?;
        let devices = process::config()?.instance.devices;
        if host_did_to_rid_map.is_null() {
            count.write(devices);
            return Ok(());
        }
        // SAFETY: `count` is non-null and aligned (checked) and the caller promises it is
        // initialised on input.
        let cap = unsafe { count.assume_init_read() };
        if cap < devices {
            return Err(Error::resource(format!(
                "host_did_to_rid_map holds {cap} entries but the instance has {devices} devices"
            )));
        }
        if !host_did_to_rid_map.is_aligned() {
            return Err(Error::invalid(
                "host_did_to_rid_map is not aligned for uint32_t",
            ));
        }
        for i in 0..devices {
            // SAFETY: i < devices <= cap, the caller's capacity.
            unsafe { host_did_to_rid_map.add(i as usize).write(i) };
        }
        count.write(devices);
        Ok(())
    })
}

/// The host mapping of HBM bank `hbm_idx` of device `device_id`: its virtual address and size.
///
/// Not implemented: the software device keeps each device tensor in an allocation of its own,
/// so there is no one HBM bank whose mapping could be handed out.
///
/// # Returns
/// `NRT_FAILURE` (logged once); `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `addr` and `size` must be NULL or writable.
pub unsafe extern "C" fn nrt_get_hbm_mmap_va(
    device_id: c_int,
    hbm_idx: c_int,
    addr: *mut *mut c_void,
    size: *mut usize,
) -> NRT_STATUS {
    let _ = (device_id, hbm_idx, addr, size);
    enter_status("nrt_get_hbm_mmap_va", Guard::Lifecycle, || {
        not_implemented("nrt_get_hbm_mmap_va")
    })
}

/// Device memory of logical core `vnc`: `bytes_used` is every live device tensor and model
/// scratch on it; `bytes_limit` the nominal HBM of one logical core of the simulated instance
/// (16 GiB per physical core on trn1, 12 GiB on trn2 and later, times the LNC size; the
/// software device does not enforce it). Probe-then-fill: a smaller `stats_size_in` gets a
/// prefix, `*stats_size_out` the full size.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL or a core that is not visible; `NRT_UNINITIALIZED`
/// before `nrt_init`.
///
/// # Safety
/// `stats` must be NULL or have `stats_size_in` writable bytes; `stats_size_out` NULL or
/// writable.
pub unsafe extern "C" fn nrt_get_vnc_memory_stats(
    vnc: u32,
    stats: *mut nrt_vnc_memory_stats_t,
    stats_size_in: usize,
    stats_size_out: *mut usize,
) -> NRT_STATUS {
    enter_status("nrt_get_vnc_memory_stats", Guard::Lifecycle, || {
        if stats.is_null() {
            return Err(Error::invalid("stats is NULL"));
        }
        let v = visible_core(i64::from(vnc), "vnc")?;
        let config = process::config()?;
        let full = nrt_vnc_memory_stats_t {
            bytes_used: crate::runtime::tensor::device_bytes_in_use(v) as usize,
            bytes_limit: config.instance.hbm_per_logical_core(config.lnc) as usize,
        };
        // SAFETY: `stats` is non-NULL (checked above), so it has `stats_size_in` writable bytes,
        // and `stats_size_out` is NULL or writable (this function's contract); `full` is a
        // local, so they do not overlap. That is `fill_prefix`'s contract.
        unsafe { fill_prefix(&full, stats.cast(), stats_size_in, stats_size_out) }
    })
}

/// The PCI BDF of the EFA NIC attached to the device memory at `va`. The simulated instance
/// has no EFA devices, so this always fails (after the guard) with `NRT_FAILURE`; the failure
/// is logged once at INFO, not as an error, since callers probe with it.
///
/// # Returns
/// `NRT_FAILURE`; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// None of the pointers is dereferenced.
pub unsafe extern "C" fn nrt_get_attached_efa_bdf(
    va: *const c_void,
    efa_bdf: *mut c_char,
    len: *mut usize,
) -> NRT_STATUS {
    let _ = (va, efa_bdf, len);
    enter_code("nrt_get_attached_efa_bdf", Guard::Lifecycle, || {
        crate::runtime::log::write_once(
            crate::runtime::log::Level::Info,
            "nrt_get_attached_efa_bdf",
            "nrt_get_attached_efa_bdf",
            format_args!(
                "no EFA device is attached in OpenNRT's simulated instance; returning NRT_FAILURE"
            ),
        );
        Ok(nrt_status::NRT_FAILURE)
    })
}

/// Export `size` bytes of device memory at `va` as a dma-buf fd. The simulated device memory is
/// ordinary host memory with no dma-buf exporter, so this always fails (after the guard and the
/// argument check) with `NRT_FAILURE` — never `NRT_RESOURCE`, which libfabric treats as fatal;
/// any other failure makes it fall back to ordinary memory registration. Logged once at INFO.
///
/// # Returns
/// `NRT_FAILURE`; `NRT_INVALID` if `fd` is NULL; `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `fd` is checked for NULL and never written.
pub unsafe extern "C" fn nrt_get_dmabuf_fd(va: u64, size: u64, fd: *mut c_int) -> NRT_STATUS {
    let _ = (va, size);
    enter_code("nrt_get_dmabuf_fd", Guard::Lifecycle, || {
        if fd.is_null() {
            return Err(Error::invalid("fd is NULL"));
        }
        crate::runtime::log::write_once(
            crate::runtime::log::Level::Info,
            "nrt_get_dmabuf_fd",
            "nrt_get_dmabuf_fd",
            format_args!("OpenNRT's simulated device memory cannot be exported as a dma-buf; returning NRT_FAILURE (callers fall back to ordinary registration)"),
        );
        Ok(nrt_status::NRT_FAILURE)
    })
}

#[cfg(test)]
mod tests;
