//! `nrt.h` host-driven collectives and communicator setup (spec/nrt-abi.md §3.5).
//!
//! Implemented by the C ABI issue (issue 5, single process) and the multi-process issue
//! (issue 6, bootstrap across processes); until then each entry point runs the lifecycle guard
//! (`NRT_UNINITIALIZED` before `nrt_init`) and returns `NRT_FAILURE`, logging a WARNING once.

// The parameters are named for the header; the bodies use them once issues 5 and 6 land.
#![allow(unused_variables)]

use std::ffi::c_void;

use crate::abi::boundary::{not_implemented, Guard};
use crate::abi::types::*;
use crate::abi_entry;

/// Create the global communicator used by NEFF-embedded collectives: this worker is
/// `g_device_id` of `g_device_count` (the largest world any NEFF will use), on logical core
/// `vnc`. Idempotent for the same world; the world cannot change once set.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core, a rank outside the world or a different world
/// on re-entry; `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented
/// until issue 5.
pub extern "C" fn nrt_build_global_comm(
    vnc: i32,
    g_device_id: u32,
    g_device_count: u32,
) -> NRT_STATUS {
    abi_entry!(status "nrt_build_global_comm", Guard::Lifecycle, {
        not_implemented("nrt_build_global_comm")
    })
}

/// Create the global communicator of the standalone (host-driven, `nrta_cc_*`) collectives.
///
/// # Returns
/// As `nrt_build_global_comm`. Currently `NRT_FAILURE`: not implemented until issue 5.
pub extern "C" fn nrt_cc_global_comm_init(
    vnc: u32,
    g_device_id: u32,
    g_device_count: u32,
) -> NRT_STATUS {
    abi_entry!(status "nrt_cc_global_comm_init", Guard::Lifecycle, {
        not_implemented("nrt_cc_global_comm_init")
    })
}

/// Let host-driven collectives run beside NEFF collectives on a separate collective stream.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad stream id; `NRT_UNINITIALIZED` before `nrt_init`.
/// Currently `NRT_FAILURE`: not implemented until issue 5.
pub extern "C" fn nrt_cc_create_stream(stream_id: u32) -> NRT_STATUS {
    abi_entry!(status "nrt_cc_create_stream", Guard::Lifecycle, {
        not_implemented("nrt_cc_create_stream")
    })
}

/// Block until all `g_device_count` workers have called `nrt_barrier`. The first barrier also
/// bootstraps the global communicator.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for a bad core or rank; `NRT_TIMEOUT`; `NRT_UNINITIALIZED`
/// before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
pub extern "C" fn nrt_barrier(vnc: i32, g_device_id: u32, g_device_count: u32) -> NRT_STATUS {
    abi_entry!(status "nrt_barrier", Guard::Lifecycle, { not_implemented("nrt_barrier") })
}

/// Host-memory all-gather: every worker contributes `rank_input_size` bytes from `input`;
/// `output` receives `g_device_count * rank_input_size` bytes in rank order. Blocking.
///
/// # Returns
/// `NRT_SUCCESS`; `NRT_INVALID` for NULL buffers or a bad rank; `NRT_TIMEOUT`;
/// `NRT_UNINITIALIZED` before `nrt_init`. Currently `NRT_FAILURE`: not implemented until issue 5.
///
/// # Safety
/// `input` must have `rank_input_size` readable bytes and `output`
/// `g_device_count * rank_input_size` writable bytes.
pub unsafe extern "C" fn nrt_all_gather(
    vnc: i32,
    g_device_id: u32,
    g_device_count: u32,
    rank_input_size: u32,
    input: *mut c_void,
    output: *mut c_void,
) -> NRT_STATUS {
    abi_entry!(status "nrt_all_gather", Guard::Lifecycle, { not_implemented("nrt_all_gather") })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::handle::testing;
    use std::ptr::null_mut;

    #[test]
    fn guarded_then_not_implemented() {
        testing::uninit(|| {
            assert_eq!(nrt_build_global_comm(0, 0, 1) as i32, 13);
            assert_eq!(nrt_cc_global_comm_init(0, 0, 1) as i32, 13);
            assert_eq!(nrt_barrier(0, 0, 1) as i32, 13);
            // SAFETY: NULL buffers are never dereferenced by the stub.
            let st = unsafe { nrt_all_gather(0, 0, 1, 0, null_mut(), null_mut()) };
            assert_eq!(st as i32, 13);
        });
        testing::init(|| {
            assert_eq!(nrt_cc_create_stream(1) as i32, 1);
            assert_eq!(nrt_barrier(0, 0, 1) as i32, 1);
        });
    }
}
