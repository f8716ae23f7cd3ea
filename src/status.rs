//! The vendor's status codes (`NRT_STATUS`, docs/contract/abi.md §2.1): every number with its
//! name, in one table ([`nrt_status::ALL`]).
//!
//! They live in the core, not in `abi`, because the core produces them: every
//! [`ErrorKind`](crate::error::ErrorKind) has its status ([`ErrorKind::status`]), the execution
//! units write them to a request's `exec_ret` (`runtime::xu`), the system trace names them.
//! `abi` re-exports the enum as the C type. It keeps the vendor's C spelling because it *is* that
//! type: cbindgen reads this file for `include/nrt/nrt_status.h` (tests/headers.rs), and the
//! names of the table are what `nrt_get_status_as_str`, the logs and the trace print.
//!
//! [`ErrorKind::status`]: crate::error::ErrorKind::status

#![allow(non_camel_case_types)]

use std::ffi::CStr;

/// The name of a number that is no status (`nrt_get_status_as_str`).
const UNKNOWN: &CStr = c"NRT_UNKNOWN_STATUS";

/// Status codes (docs/contract/abi.md §2.1). Values 8 and 12 are unused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum nrt_status {
    /// Success.
    NRT_SUCCESS = 0,
    /// Generic failure (also: not implemented yet, forked child).
    NRT_FAILURE = 1,
    /// Invalid argument or input.
    NRT_INVALID = 2,
    /// Invalid handle.
    NRT_INVALID_HANDLE = 3,
    /// Out of a resource.
    NRT_RESOURCE = 4,
    /// Timed out.
    NRT_TIMEOUT = 5,
    /// Hardware error.
    NRT_HW_ERROR = 6,
    /// Execution-unit queue full.
    NRT_QUEUE_FULL = 7,
    /// Not enough NeuronCores for the model.
    NRT_LOAD_NOT_ENOUGH_NC = 9,
    /// Unsupported NEFF version.
    NRT_UNSUPPORTED_NEFF_VERSION = 10,
    /// Host memory allocation failed.
    NRT_FAIL_HOST_MEM_ALLOC = 11,
    /// Called before nrt_init (or after nrt_close returned).
    NRT_UNINITIALIZED = 13,
    /// Called while nrt_close runs.
    NRT_CLOSED = 14,
    /// Queue empty.
    NRT_QUEUE_EMPTY = 15,
    /// Execution unit dead; restart required.
    NRT_EXEC_UNIT_UNRECOVERABLE = 101,
    /// Bad input at execution.
    NRT_EXEC_BAD_INPUT = 1002,
    /// Completed with numerical errors.
    NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003,
    /// Completed with errors.
    NRT_EXEC_COMPLETED_WITH_ERR = 1004,
    /// NeuronCore busy.
    NRT_EXEC_NC_BUSY = 1005,
    /// Out of bounds.
    NRT_EXEC_OOB = 1006,
    /// Collective still pending.
    NRT_COLL_PENDING = 1100,
    /// Stuck in a collective (missing notification; a peer may have failed).
    NRT_EXEC_HW_ERR_COLLECTIVES = 1200,
    /// HBM uncorrectable error.
    NRT_EXEC_HW_ERR_HBM_UE = 1201,
    /// NeuronCore uncorrectable error.
    NRT_EXEC_HW_ERR_NC_UE = 1202,
    /// DMA abort.
    NRT_EXEC_HW_ERR_DMA_ABORT = 1203,
    /// Software notification-queue overflow.
    NRT_EXEC_SW_NQ_OVERFLOW = 1204,
    /// Repairable HBM uncorrectable error.
    NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205,
    /// Network proxy failure.
    NRT_NETWORK_PROXY_FAILURE = 1206,
}

/// The status type every `NRT_STATUS`-returning function returns.
pub type NRT_STATUS = nrt_status;

impl nrt_status {
    /// Every status with its name, in value order (28 enumerators, docs/contract/abi.md §2.1):
    /// the one table of status names (`nrt_get_status_as_str`, [`ErrorKind::status_name`],
    /// logs, trace). NUL-terminated so that C can be handed a name as it is.
    ///
    /// [`ErrorKind::status_name`]: crate::error::ErrorKind::status_name
    pub const ALL: [(nrt_status, &'static CStr); 28] = {
        use nrt_status::*;
        [
            (NRT_SUCCESS, c"NRT_SUCCESS"),
            (NRT_FAILURE, c"NRT_FAILURE"),
            (NRT_INVALID, c"NRT_INVALID"),
            (NRT_INVALID_HANDLE, c"NRT_INVALID_HANDLE"),
            (NRT_RESOURCE, c"NRT_RESOURCE"),
            (NRT_TIMEOUT, c"NRT_TIMEOUT"),
            (NRT_HW_ERROR, c"NRT_HW_ERROR"),
            (NRT_QUEUE_FULL, c"NRT_QUEUE_FULL"),
            (NRT_LOAD_NOT_ENOUGH_NC, c"NRT_LOAD_NOT_ENOUGH_NC"),
            (
                NRT_UNSUPPORTED_NEFF_VERSION,
                c"NRT_UNSUPPORTED_NEFF_VERSION",
            ),
            (NRT_FAIL_HOST_MEM_ALLOC, c"NRT_FAIL_HOST_MEM_ALLOC"),
            (NRT_UNINITIALIZED, c"NRT_UNINITIALIZED"),
            (NRT_CLOSED, c"NRT_CLOSED"),
            (NRT_QUEUE_EMPTY, c"NRT_QUEUE_EMPTY"),
            (NRT_EXEC_UNIT_UNRECOVERABLE, c"NRT_EXEC_UNIT_UNRECOVERABLE"),
            (NRT_EXEC_BAD_INPUT, c"NRT_EXEC_BAD_INPUT"),
            (
                NRT_EXEC_COMPLETED_WITH_NUM_ERR,
                c"NRT_EXEC_COMPLETED_WITH_NUM_ERR",
            ),
            (NRT_EXEC_COMPLETED_WITH_ERR, c"NRT_EXEC_COMPLETED_WITH_ERR"),
            (NRT_EXEC_NC_BUSY, c"NRT_EXEC_NC_BUSY"),
            (NRT_EXEC_OOB, c"NRT_EXEC_OOB"),
            (NRT_COLL_PENDING, c"NRT_COLL_PENDING"),
            (NRT_EXEC_HW_ERR_COLLECTIVES, c"NRT_EXEC_HW_ERR_COLLECTIVES"),
            (NRT_EXEC_HW_ERR_HBM_UE, c"NRT_EXEC_HW_ERR_HBM_UE"),
            (NRT_EXEC_HW_ERR_NC_UE, c"NRT_EXEC_HW_ERR_NC_UE"),
            (NRT_EXEC_HW_ERR_DMA_ABORT, c"NRT_EXEC_HW_ERR_DMA_ABORT"),
            (NRT_EXEC_SW_NQ_OVERFLOW, c"NRT_EXEC_SW_NQ_OVERFLOW"),
            (
                NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE,
                c"NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE",
            ),
            (NRT_NETWORK_PROXY_FAILURE, c"NRT_NETWORK_PROXY_FAILURE"),
        ]
    };

    /// The status numbered `v`, if there is one (C may pass any int; 8 and 12 are unused).
    pub fn from_raw(v: i32) -> Option<nrt_status> {
        Self::ALL
            .iter()
            .find(|(s, _)| s.code() == v)
            .map(|(s, _)| *s)
    }

    /// The vendor's number, as C's `NRT_STATUS` holds it (and `exec_ret` receives it).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The vendor's name (`"NRT_INVALID"`), NUL-terminated.
    pub fn c_name(self) -> &'static CStr {
        Self::ALL
            .iter()
            .find(|(s, _)| *s == self)
            .map_or(UNKNOWN, |(_, n)| n)
    }

    /// The vendor's name (`"NRT_INVALID"`).
    pub fn name(self) -> &'static str {
        // Every name of the table is ASCII (tested), so this never falls back.
        self.c_name().to_str().unwrap_or_default()
    }

    /// The name of the status numbered `v`, `"NRT_UNKNOWN_STATUS"` for a number that is none
    /// (what `nrt_get_status_as_str` returns).
    pub fn c_name_of(v: i32) -> &'static CStr {
        Self::from_raw(v).map_or(UNKNOWN, Self::c_name)
    }

    /// `"NRT_UNKNOWN_STATUS"`, the name of a number that is no status.
    pub fn unknown_c_name() -> &'static CStr {
        UNKNOWN
    }
}

#[cfg(test)]
mod tests;
