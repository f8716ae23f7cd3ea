//! `nrt_status.h`: the status codes every `NRT_STATUS`-returning function returns
//! (docs/contract/abi.md §2.1), with their names.

#![allow(non_camel_case_types)]

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

/// A status passed *in* by C (`NRT_STATUS` in the header); any int may arrive.
pub type RawStatus = i32;

impl nrt_status {
    /// Every status with its name, in value order (28 enumerators, docs/contract/abi.md §2.1).
    pub const ALL: [(nrt_status, &'static str); 28] = {
        use nrt_status::*;
        [
            (NRT_SUCCESS, "NRT_SUCCESS"),
            (NRT_FAILURE, "NRT_FAILURE"),
            (NRT_INVALID, "NRT_INVALID"),
            (NRT_INVALID_HANDLE, "NRT_INVALID_HANDLE"),
            (NRT_RESOURCE, "NRT_RESOURCE"),
            (NRT_TIMEOUT, "NRT_TIMEOUT"),
            (NRT_HW_ERROR, "NRT_HW_ERROR"),
            (NRT_QUEUE_FULL, "NRT_QUEUE_FULL"),
            (NRT_LOAD_NOT_ENOUGH_NC, "NRT_LOAD_NOT_ENOUGH_NC"),
            (NRT_UNSUPPORTED_NEFF_VERSION, "NRT_UNSUPPORTED_NEFF_VERSION"),
            (NRT_FAIL_HOST_MEM_ALLOC, "NRT_FAIL_HOST_MEM_ALLOC"),
            (NRT_UNINITIALIZED, "NRT_UNINITIALIZED"),
            (NRT_CLOSED, "NRT_CLOSED"),
            (NRT_QUEUE_EMPTY, "NRT_QUEUE_EMPTY"),
            (NRT_EXEC_UNIT_UNRECOVERABLE, "NRT_EXEC_UNIT_UNRECOVERABLE"),
            (NRT_EXEC_BAD_INPUT, "NRT_EXEC_BAD_INPUT"),
            (
                NRT_EXEC_COMPLETED_WITH_NUM_ERR,
                "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
            ),
            (NRT_EXEC_COMPLETED_WITH_ERR, "NRT_EXEC_COMPLETED_WITH_ERR"),
            (NRT_EXEC_NC_BUSY, "NRT_EXEC_NC_BUSY"),
            (NRT_EXEC_OOB, "NRT_EXEC_OOB"),
            (NRT_COLL_PENDING, "NRT_COLL_PENDING"),
            (NRT_EXEC_HW_ERR_COLLECTIVES, "NRT_EXEC_HW_ERR_COLLECTIVES"),
            (NRT_EXEC_HW_ERR_HBM_UE, "NRT_EXEC_HW_ERR_HBM_UE"),
            (NRT_EXEC_HW_ERR_NC_UE, "NRT_EXEC_HW_ERR_NC_UE"),
            (NRT_EXEC_HW_ERR_DMA_ABORT, "NRT_EXEC_HW_ERR_DMA_ABORT"),
            (NRT_EXEC_SW_NQ_OVERFLOW, "NRT_EXEC_SW_NQ_OVERFLOW"),
            (
                NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE,
                "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE",
            ),
            (NRT_NETWORK_PROXY_FAILURE, "NRT_NETWORK_PROXY_FAILURE"),
        ]
    };
}
