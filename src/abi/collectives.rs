//! `nrt.h` host-driven collectives and communicator setup (docs/contract/abi.md §3.5, §5.7–§5.8),
//! over `runtime::comm` (the worlds), `runtime::host_collective` (barrier, host all-gather).
//!
//! Several ranks in one process (docs/design.md §2.6): each thread calls these with its own `vnc`
//! and global id, and the calls of one collective meet in `runtime::rendezvous`. Ranks in other
//! processes are the multi-process issue (6): until then a world whose ranks are not all in
//! this process ends its collectives with `NRT_TIMEOUT` naming the ranks that never came.

use crate::abi::boundary::enter_status;
use std::ffi::c_void;

use crate::abi::args::visible_core;
use crate::abi::boundary::Guard;
use crate::abi::types::*;
use crate::error::Error;
use crate::runtime::comm::{self, Slot};
use crate::runtime::{host_collective, process};

fn visible() -> crate::Result<u32> {
    Ok(process::config()?.visible_cores)
}

fn root_comm_id() -> Option<String> {
    process::config().ok().and_then(|c| c.root_comm_id.clone())
}

/// Create the global communicator used by NEFF-embedded collectives (and the host barrier and
/// all-gather): this worker is `g_device_id` of `g_device_count` (the largest world any NEFF
/// will use), on logical core `vnc`. Idempotent for the same world; the world cannot change once
/// set.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a core that is not visible, a rank outside the world, a
/// malformed `NEURON_RT_ROOT_COMM_ID`, or a different world on re-entry; `NRT_UNINITIALIZED`
/// before `nrt_init`.
pub extern "C" fn nrt_build_global_comm(
    vnc: i32,
    g_device_id: u32,
    g_device_count: u32,
) -> NRT_STATUS {
    enter_status("nrt_build_global_comm", Guard::Lifecycle, || {
        let v = visible_core(i64::from(vnc), "vnc")?;
        comm::join(
            Slot::Neff,
            v,
            g_device_id,
            g_device_count,
            visible()?,
            root_comm_id(),
        )
    })
}

/// Create the global communicator of the standalone (host-driven, `nrta_cc_*`) collectives:
/// logical core `vnc` is global rank `g_device_id` of `g_device_count`. Call it once per core
/// before `nrta_cc_prepare`.
///
/// # Returns
/// As `nrt_build_global_comm`.
pub extern "C" fn nrt_cc_global_comm_init(
    vnc: u32,
    g_device_id: u32,
    g_device_count: u32,
) -> NRT_STATUS {
    enter_status("nrt_cc_global_comm_init", Guard::Lifecycle, || {
        let v = visible_core(i64::from(vnc), "vnc")?;
        comm::join(
            Slot::HostCc,
            v,
            g_device_id,
            g_device_count,
            visible()?,
            root_comm_id(),
        )
    })
}

/// Let host-driven collectives run beside NEFF collectives on a separate collective stream.
/// OpenNRT records the request (there are no NEFF collectives to split the engines with; the
/// host-driven collectives always have their own machine). Stream ids 0–3 are accepted (the
/// four collective streams of the pseudo-instructions, docs/contract/lowering.md).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a stream id above 3; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_cc_create_stream(stream_id: u32) -> NRT_STATUS {
    enter_status("nrt_cc_create_stream", Guard::Lifecycle, || {
        if stream_id > 3 {
            return Err(Error::invalid(format!(
                "stream_id {stream_id}: collective streams are 0..=3"
            )));
        }
        crate::log_info!(
            "nrt_cc_create_stream",
            "host-driven collectives on stream {stream_id}"
        );
        Ok(())
    })
}

/// Block until all `g_device_count` workers have called `nrt_barrier`. The barrier is a
/// 128-byte all-reduce run on the (software) device, as the vendor's; the first barrier also
/// creates the global communicator (as `nrt_build_global_comm`).
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a core that is not visible (or `vnc` ≥ 256), a rank outside
/// the world or a different world than before; `NRT_TIMEOUT` when a worker does not arrive
/// within `NEURON_RT_EXEC_TIMEOUT`; `NRT_FAILURE` when the barrier's collective failed to build
/// (sticky for the core) or returned a wrong value; `NRT_UNINITIALIZED` before `nrt_init`.
pub extern "C" fn nrt_barrier(vnc: i32, g_device_id: u32, g_device_count: u32) -> NRT_STATUS {
    enter_status("nrt_barrier", Guard::Lifecycle, || {
        if vnc >= 256 {
            return Err(Error::invalid(format!(
                "nrt_barrier: vnc {vnc} is not below 256"
            )));
        }
        let v = visible_core(i64::from(vnc), "vnc")?;
        host_collective::barrier(v, g_device_id, g_device_count, visible()?)
    })
}

/// Host-memory all-gather: every worker contributes `rank_input_size` bytes from `input`;
/// `output` receives `g_device_count * rank_input_size` bytes in rank order (zeroed first, the
/// caller's slice at `g_device_id * rank_input_size`). Blocking.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL buffers (with a non-zero size), a core that is not
/// visible, a rank outside the world, or workers passing different sizes (on every worker);
/// `NRT_TIMEOUT` when a worker does not arrive within `NEURON_RT_EXEC_TIMEOUT`;
/// `NRT_UNINITIALIZED` before `nrt_init`.
///
/// # Safety
/// `input` must have `rank_input_size` readable bytes and `output`
/// `g_device_count * rank_input_size` writable bytes, not overlapping `input`.
pub unsafe extern "C" fn nrt_all_gather(
    vnc: i32,
    g_device_id: u32,
    g_device_count: u32,
    rank_input_size: u32,
    input: *mut c_void,
    output: *mut c_void,
) -> NRT_STATUS {
    enter_status("nrt_all_gather", Guard::Lifecycle, || {
        let v = visible_core(i64::from(vnc), "vnc")?;
        let size = rank_input_size as usize;
        let total = size.checked_mul(g_device_count as usize).ok_or_else(|| {
            Error::invalid("rank_input_size × g_device_count overflows the address space")
        })?;
        // SAFETY: the caller promises `rank_input_size` readable bytes at `input`.
        let inp = unsafe { crate::abi::boundary::bytes(input.cast(), size, "input") }?;
        if total > 0 && output.is_null() {
            return Err(Error::invalid("output is NULL"));
        }
        if total > 0
            && (output as usize) < (input as usize) + size
            && (input as usize) < (output as usize) + total
        {
            return Err(Error::invalid("output overlaps input"));
        }
        let out: &mut [u8] = if total == 0 {
            &mut []
        } else {
            // SAFETY: non-NULL, `total` writable bytes by the caller's promise, not overlapping
            // `input` (checked above).
            unsafe { std::slice::from_raw_parts_mut(output.cast::<u8>(), total) }
        };
        host_collective::all_gather(v, g_device_id, g_device_count, visible()?, inp, out)
    })
}

#[cfg(test)]
mod tests;
