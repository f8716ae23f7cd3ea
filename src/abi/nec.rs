//! `nec.h`: the callbacks libnccom makes into libnrt (docs/contract/abi.md §3.10). Their return
//! types are mixed — `void`, `int`, `bool`, `size_t` and `NRT_STATUS` — and each is given a
//! simple, defined behaviour for the simulated instance (`process::config()`, the same one the
//! count getters report). None runs the lifecycle guard: they answer from the configuration
//! (or the caller's memory) and libnccom may call them while `nrt_init` is still running. None
//! dereferences a NULL pointer: an error is logged and the documented failure value returned.
//!
//! Simulated topology (readings marked (L) are OpenNRT's choices where the vendor's semantics
//! are not public; the topology issue may refine them). The rules are methods of the instance
//! type ([`InstanceType`]); the callbacks here decode the
//! C arguments, call them and write the results:
//! * devices are numbered `0..devices`; host device id, RID ("routing id") and MLA index of a
//!   device are all the same number (identity maps);
//! * (L) device ports: port 0 reaches the next device of a ring, port 1 the previous one;
//! * (L) UltraServer pods (`trn2u`): 4 nodes; the P2P pod peer at `port_distance` is
//!   `(node + port_distance) % 4`; other instance types are not pods.
//!
//! The four dynamic (ragged all-to-all) size callbacks live in [`nec_dynamic`](super::nec_dynamic).

use crate::abi::boundary::{enter_status, enter_value, enter_void};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::boundary::{out_param, Guard};
use crate::abi::types::*;
use crate::error::{Error, Result};
use crate::lower::topology::{Fabric, InstanceType};
use crate::runtime::process;

/// `-EINVAL`, the failure value of the `int`-returning callbacks.
const NEG_EINVAL: c_int = -libc::EINVAL;
/// Nodes in an UltraServer pod (L).
// Kept for the generated header (include/nrt/nrt.h defines it); the rule itself is
// `InstanceType::pod`, and the two cannot drift apart:
pub const POD_NODES: u32 = 4;
const _: () = assert!(POD_NODES == crate::lower::topology::ULTRASERVER_NODES);

/// The simulated instance the callbacks answer for.
fn instance() -> Result<InstanceType> {
    Ok(process::config()?.instance)
}

/// `d` checked as a device of the instance, returned as passed.
fn dev(d: c_int, what: &str) -> Result<c_int> {
    instance()?.device(i64::from(d), what).map(|_| d)
}

/// The fabric a C `nec_pod_type_t` names.
fn fabric(pod_type: RawPodType) -> Result<Fabric> {
    match pod_type {
        x if x == nec_pod_type_t::NEC_POD_TYPE_NONE as u32 => Ok(Fabric::None),
        x if x == nec_pod_type_t::NEC_POD_TYPE_P2P as u32 => Ok(Fabric::PodP2p),
        x if x == nec_pod_type_t::NEC_POD_TYPE_SWITCH as u32 => Ok(Fabric::Switch),
        other => Err(Error::invalid(format!(
            "pod_type {other} is not NONE, P2P or SWITCH"
        ))),
    }
}

/// Atomically add `val` to the 32-bit semaphore at `sem_inc_addr` (wrapping). A NULL or
/// misaligned address is logged and ignored.
///
/// # Safety
/// `sem_inc_addr` must be NULL or point to a live, 4-byte-aligned `uint32_t`.
pub unsafe extern "C" fn nec_inc_semaphore(sem_inc_addr: *mut u32, val: u32) {
    enter_void("nec_inc_semaphore", Guard::None, || {
        if sem_inc_addr.is_null() {
            return Err(Error::invalid("sem_inc_addr is NULL"));
        }
        if !sem_inc_addr.is_aligned() {
            return Err(Error::invalid("sem_inc_addr is not 4-byte aligned"));
        }
        // SAFETY: non-null, aligned, and the caller promises a live u32 that every other
        // accessor also updates atomically (or not concurrently).
        unsafe { AtomicU32::from_ptr(sem_inc_addr) }.fetch_add(val, Ordering::SeqCst);
        Ok(())
    })
}

/// The number of Neuron devices on the instance. When `available_devices_array` is not NULL the
/// first `min(devices, array_size)` device indices (0, 1, …) are written to it.
///
/// Returns the device count, or `-EINVAL` if the configuration is invalid.
///
/// # Safety
/// `available_devices_array` must be NULL or writable for `array_size` ints.
pub unsafe extern "C" fn nec_get_device_count(
    available_devices_array: *mut c_int,
    array_size: u32,
) -> c_int {
    enter_value("nec_get_device_count", Guard::None, NEG_EINVAL, || {
        let n = instance()?.devices;
        if !available_devices_array.is_null() {
            if !available_devices_array.is_aligned() {
                return Err(Error::invalid(
                    "available_devices_array is not aligned for int",
                ));
            }
            for i in 0..n.min(array_size) {
                // SAFETY: i < array_size, the caller's capacity; i < devices fits an int.
                unsafe { available_devices_array.add(i as usize).write(i as c_int) };
            }
        }
        Ok(n as c_int)
    })
}

/// The (synthetic) PCI address of device `neuron_dev`: domain 0, bus `0x10 + neuron_dev`,
/// slot 0, function 0 — unique per device.
///
/// Returns 0, or `-EINVAL` for a device that does not exist or a NULL pointer (nothing written).
///
/// # Safety
/// Each pointer must be NULL or writable.
pub unsafe extern "C" fn nec_get_device_pci_bdf(
    neuron_dev: c_int,
    domain: *mut u32,
    bus_num: *mut u32,
    pci_slot: *mut u8,
    dev_func: *mut u8,
) -> c_int {
    enter_value("nec_get_device_pci_bdf", Guard::None, NEG_EINVAL, || {
        // SAFETY: `domain` is NULL or valid for writing one `uint32_t` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `d.write` is in bounds.
        let d = unsafe { out_param(domain, "domain") }?;
        // SAFETY: `bus_num` is NULL or valid for writing one `uint32_t` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `b.write` is in bounds.
        let b = unsafe { out_param(bus_num, "bus_num") }?;
        // SAFETY: `pci_slot` is NULL or valid for writing one `uint8_t` (this function's
        // contract); `out_param` refuses NULL, so `s.write` is in bounds.
        let s = unsafe { out_param(pci_slot, "pci_slot") }?;
        // SAFETY: `dev_func` is NULL or valid for writing one `uint8_t` (this function's
        // contract); `out_param` refuses NULL, so `f.write` is in bounds.
        let f = unsafe { out_param(dev_func, "dev_func") }?;
        let (domain, bus, slot, func) = instance()?.pci_bdf(i64::from(neuron_dev), "neuron_dev")?;
        d.write(domain);
        b.write(bus);
        s.write(slot);
        f.write(func);
        Ok(0)
    })
}

/// The logical-core size (physical cores per logical core, 1 or 2) of the configuration.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` if `virtual_core_size` is NULL or the environment is invalid.
///
/// # Safety
/// `virtual_core_size` must be NULL or writable.
pub unsafe extern "C" fn nec_get_virtual_core_size(virtual_core_size: *mut u32) -> NRT_STATUS {
    enter_status("nec_get_virtual_core_size", Guard::None, || {
        // SAFETY: `virtual_core_size` is NULL or valid for writing one `uint32_t` (this
        // function's contract); `out_param` refuses NULL and misalignment, so `out.write` is in
        // bounds.
        let out = unsafe { out_param(virtual_core_size, "virtual_core_size") }?;
        out.write(process::config()?.lnc);
        Ok(())
    })
}

/// (L) libnccom reports the port map of device `local_nec_dev_id`: `count` pairs of (MLA index,
/// host device id), read from the two arrays. The simulated maps are the identity, so the
/// pairs are validated for shape only, logged at DEBUG, and not stored; the arrays are never
/// written.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for an unknown device, a negative `count`, or NULL arrays with
/// `count > 0`.
///
/// # Safety
/// With `count > 0`, both arrays must be readable for `count` ints.
pub unsafe extern "C" fn nec_build_port_and_rid_map(
    local_nec_dev_id: c_int,
    mla_indexes: *mut c_int,
    host_device_ids: *mut c_int,
    count: c_int,
) -> NRT_STATUS {
    enter_status("nec_build_port_and_rid_map", Guard::None, || {
        dev(local_nec_dev_id, "local_nec_dev_id")?;
        let n = usize::try_from(count)
            .map_err(|_| Error::invalid(format!("count {count} is negative")))?;
        let len = n * std::mem::size_of::<c_int>();
        // SAFETY: the caller promises `count` readable ints in each array when count > 0.
        let (m, h) = unsafe {
            (
                crate::abi::boundary::bytes(
                    mla_indexes.cast::<u8>().cast_const(),
                    len,
                    "mla_indexes",
                )?,
                crate::abi::boundary::bytes(
                    host_device_ids.cast::<u8>().cast_const(),
                    len,
                    "host_device_ids",
                )?,
            )
        };
        let ints = |b: &[u8]| -> Vec<c_int> {
            b.chunks_exact(4)
                .map(|c| c_int::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        crate::log_debug!(
            "nec_build_port_and_rid_map",
            "device {local_nec_dev_id}: mla {:?} -> host device {:?} (simulated maps are the identity)",
            ints(m),
            ints(h)
        );
        Ok(())
    })
}

/// Whether MLA (device) `mla_idx` exists, seen from device `local_nec_dev_id`. False for any
/// unknown index.
pub extern "C" fn nec_is_mla_available(local_nec_dev_id: c_int, mla_idx: c_int) -> bool {
    enter_value("nec_is_mla_available", Guard::None, false, || {
        let inst = instance()?;
        Ok(inst
            .device(i64::from(local_nec_dev_id), "local_nec_dev_id")
            .is_ok()
            && inst.device(i64::from(mla_idx), "mla_idx").is_ok())
    })
}

/// The RID of MLA `mla_idx` (identity). Returns -1 for an unknown device or index.
pub extern "C" fn nec_mla_idx_to_rid(local_nec_dev_id: c_int, mla_idx: c_int) -> c_int {
    enter_value("nec_mla_idx_to_rid", Guard::None, -1, || {
        dev(local_nec_dev_id, "local_nec_dev_id")?;
        dev(mla_idx, "mla_idx")
    })
}

/// The MLA index of RID `rid` (identity). Returns -1 for an unknown device or RID.
pub extern "C" fn nec_rid_to_mla_idx(local_nec_dev_id: c_int, rid: c_int) -> c_int {
    enter_value("nec_rid_to_mla_idx", Guard::None, -1, || {
        dev(local_nec_dev_id, "local_nec_dev_id")?;
        dev(rid, "rid")
    })
}

/// (L) The MLA reached from `mla_idx` through `port`: port 0 → next device of the ring, port 1
/// → previous device. Returns -1 for an unknown device, index or port, or a single-device
/// instance (no peers).
pub extern "C" fn nec_get_peer_mla_idx(
    local_nec_dev_id: c_int,
    mla_idx: c_int,
    port: c_int,
) -> c_int {
    enter_value("nec_get_peer_mla_idx", Guard::None, -1, || {
        let inst = instance()?;
        inst.device(i64::from(local_nec_dev_id), "local_nec_dev_id")?;
        let m = inst.device(i64::from(mla_idx), "mla_idx")?;
        Ok(inst.ring_peer(m, i64::from(port))? as c_int)
    })
}

/// (L) The node of an UltraServer pod reached from `node` at `port_distance` over P2P links:
/// `(node + port_distance) % 4`, written to `*peer_node`.
///
/// Returns 0; `-EINVAL` (nothing written) when the instance is not a pod, `nec_dev_id` or
/// `node` is out of range, or `peer_node` is NULL.
///
/// # Safety
/// `peer_node` must be NULL or writable.
pub unsafe extern "C" fn nec_get_p2p_pod_peer_node(
    nec_dev_id: u32,
    node: c_int,
    port_distance: u32,
    peer_node: *mut c_int,
) -> c_int {
    enter_value("nec_get_p2p_pod_peer_node", Guard::None, NEG_EINVAL, || {
        // SAFETY: `peer_node` is NULL or valid for writing one `int` (this function's contract);
        // `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(peer_node, "peer_node") }?;
        let peer = instance()?.pod_peer_node(nec_dev_id, i64::from(node), port_distance)?;
        out.write(peer as c_int);
        Ok(0)
    })
}

/// (L) Whether device `local_rid` of node `local_node_id` can reach device `remote_rid` of node
/// `remote_node_id` directly: always on the same node; across nodes never for pod type NONE,
/// only between same-position devices (equal RIDs) for P2P, always for SWITCH.
///
/// # Returns
/// `NRT_SUCCESS` with `*can_access_peer` set to 1 or 0; `NRT_INVALID` for a NULL pointer, an
/// unknown pod type, or a RID that is not a device of the instance.
///
/// # Safety
/// `can_access_peer` must be NULL or writable.
pub unsafe extern "C" fn nec_pod_node_can_access_peer_node(
    pod_type: RawPodType,
    local_rid: u32,
    local_node_id: u32,
    remote_rid: u32,
    remote_node_id: u32,
    can_access_peer: *mut c_int,
) -> NRT_STATUS {
    enter_status("nec_pod_node_can_access_peer_node", Guard::None, || {
        // SAFETY: `can_access_peer` is NULL or valid for writing one `int` (this function's
        // contract); `out_param` refuses NULL and misalignment, so `out.write` is in bounds.
        let out = unsafe { out_param(can_access_peer, "can_access_peer") }?;
        let can = instance()?.can_access_peer(
            local_rid,
            local_node_id,
            remote_rid,
            remote_node_id,
            || fabric(pod_type),
        )?;
        out.write(c_int::from(can));
        Ok(())
    })
}

/// Log a driver message from libnccom at INFO: at most `size` bytes of `str`, up to its first
/// NUL; `action` is logged with it. NULL is logged and ignored.
///
/// # Safety
/// `str` must be NULL or readable for `size` bytes (or up to a NUL within them).
pub unsafe extern "C" fn nec_ndl_printk(str: *mut c_char, size: u32, action: u32) {
    enter_void("nec_ndl_printk", Guard::None, || {
        if str.is_null() {
            return Err(Error::invalid("str is NULL"));
        }
        let mut b = Vec::new();
        for i in 0..size as usize {
            // SAFETY: i < size and no NUL came before: readable by the caller's contract.
            let c = unsafe { str.add(i).read() } as u8;
            if c == 0 {
                break;
            }
            b.push(c);
        }
        crate::log_info!(
            "nec_ndl_printk",
            "[action {action}] {}",
            String::from_utf8_lossy(&b).trim_end()
        );
        Ok(())
    })
}

#[cfg(test)]
mod tests;
