//! `#[repr(C)]` twins of every public vendor type (docs/contract/abi.md §2), with compile-time
//! size and alignment assertions. cbindgen turns these into the committed headers.
//!
//! Enums are declared twice on purpose. The Rust `enum` (e.g. [`nrt_dtype_t`]) carries the
//! vendor's enumerators and values into the header. Parameters that C passes *in* use a plain
//! integer alias (e.g. [`RawDtype`]) because a C caller can pass any int, and an out-of-range
//! value in a Rust enum is undefined behaviour; cbindgen renames the alias to the enum's C name
//! (`nrt_dtype_t`), so the header reads exactly like the vendor's. Values the library returns
//! (e.g. `NRT_STATUS`) use the enum directly.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

// nrt_status.h lives in status.rs; re-exported so `use types::*` sees it.
pub use crate::abi::status::*;

// ---------------------------------------------------------------- nrt.h enums

/// Framework of the caller (docs/contract/abi.md §2.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_framework_type_t {
    /// Invalid.
    NRT_FRAMEWORK_TYPE_INVALID = 0,
    /// No framework.
    NRT_FRAMEWORK_TYPE_NO_FW = 1,
    /// TensorFlow.
    NRT_FRAMEWORK_TYPE_TENSORFLOW = 2,
    /// PyTorch.
    NRT_FRAMEWORK_TYPE_PYTORCH = 3,
    /// MXNet.
    NRT_FRAMEWORK_TYPE_MXNET = 4,
    /// Precheck.
    NRT_FRAMEWORK_TYPE_PRECHECK = 5,
}
/// `nrt_framework_type_t` as passed in by C.
pub type RawFramework = u32;

/// Where a tensor lives (docs/contract/abi.md §2.2). VIRTUAL support was removed in 2.32; the value
/// stays.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_tensor_placement_t {
    /// Device memory (HBM).
    NRT_TENSOR_PLACEMENT_DEVICE = 0,
    /// Host memory.
    NRT_TENSOR_PLACEMENT_HOST = 1,
    /// Virtual (reserved).
    NRT_TENSOR_PLACEMENT_VIRTUAL = 2,
}
/// `nrt_tensor_placement_t` as passed in by C.
pub type RawPlacement = u32;

/// Instance family reported in `nrt_instance_info_t.family` (docs/contract/abi.md §2.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_instance_family {
    /// Unknown.
    NRT_INSTANCE_UNKNOWN = 0,
    /// inf1.
    NRT_INSTANCE_INF1 = 1,
    /// trn1.
    NRT_INSTANCE_TRN1 = 2,
    /// trn1n.
    NRT_INSTANCE_TRN1N = 3,
    /// inf2.
    NRT_INSTANCE_INF2 = 4,
    /// trn2.
    NRT_INSTANCE_TRN2 = 5,
    /// trn2n.
    NRT_INSTANCE_TRN2N = 6,
    /// inf2e.
    NRT_INSTANCE_INF2E = 7,
    /// trn2p.
    NRT_INSTANCE_TRN2P = 8,
    /// trn2u.
    NRT_INSTANCE_TRN2U = 9,
    /// trn2e.
    NRT_INSTANCE_TRN2E = 10,
    /// trn2eu.
    NRT_INSTANCE_TRN2EU = 11,
    /// trn2ac.
    NRT_INSTANCE_TRN2AC = 12,
    /// trn2uac.
    NRT_INSTANCE_TRN2UAC = 13,
    /// trn3.
    NRT_INSTANCE_TRN3 = 14,
    /// trn3pds98.
    NRT_INSTANCE_TRN3PDS98 = 15,
}

/// Instance size reported in `nrt_instance_info_t.size` (docs/contract/abi.md §2.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_instance_size {
    /// 1xlarge.
    NRT_INSTANCE_SIZE_1XL = 0,
    /// 2xlarge.
    NRT_INSTANCE_SIZE_2XL = 1,
    /// 4xlarge.
    NRT_INSTANCE_SIZE_4XL = 2,
    /// 6xlarge.
    NRT_INSTANCE_SIZE_6XL = 3,
    /// 8xlarge.
    NRT_INSTANCE_SIZE_8XL = 4,
    /// 24xlarge.
    NRT_INSTANCE_SIZE_24XL = 5,
    /// 32xlarge.
    NRT_INSTANCE_SIZE_32XL = 6,
    /// 48xlarge.
    NRT_INSTANCE_SIZE_48XL = 7,
    /// 3xlarge.
    NRT_INSTANCE_SIZE_3XL = 8,
    /// Unknown (`NRT_INSTANCE_SIZE_NUM` aliases it).
    NRT_INSTANCE_SIZE_UNKNOWN = 9,
}
/// Number of instance sizes (aliases `NRT_INSTANCE_SIZE_UNKNOWN`).
pub const NRT_INSTANCE_SIZE_NUM: u32 = 9;

/// Reduction operation of a collective (docs/contract/abi.md §2.2; same numbering as the DMA CCE
/// op).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_op_type_t {
    /// Sum.
    NRT_OP_ADD = 0x0,
    /// Fused multiply-add.
    NRT_OP_FMA = 0x1,
    /// Maximum.
    NRT_OP_MAX = 0x2,
    /// Minimum.
    NRT_OP_MIN = 0x3,
    /// Invalid.
    NRT_OP_INVALID = 0xF,
}
/// `nrt_op_type_t` as passed in by C.
pub type RawOpType = u32;

/// Element type (docs/contract/abi.md §2.2; same numbering as the ISA and DMA dtype).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_dtype_t {
    /// Unknown (`NRT_DTYPE_INVALID` aliases it).
    NRT_DTYPE_UNKNOWN = 0,
    /// uint64.
    NRT_DTYPE_UINT64 = 1,
    /// int8.
    NRT_DTYPE_INT8 = 2,
    /// uint8.
    NRT_DTYPE_UINT8 = 3,
    /// int16.
    NRT_DTYPE_INT16 = 4,
    /// uint16.
    NRT_DTYPE_UINT16 = 5,
    /// bfloat16.
    NRT_DTYPE_BFLOAT16 = 6,
    /// float16.
    NRT_DTYPE_FLOAT16 = 7,
    /// int32.
    NRT_DTYPE_INT32 = 8,
    /// uint32.
    NRT_DTYPE_UINT32 = 9,
    /// float32.
    NRT_DTYPE_FLOAT32 = 10,
    /// float32 "round" accumulation type.
    NRT_DTYPE_FP32R = 11,
    /// int64.
    NRT_DTYPE_INT64 = 12,
    /// FP8 E3M4.
    NRT_DTYPE_FP8_E3 = 13,
    /// FP8 E4M3.
    NRT_DTYPE_FP8_E4 = 14,
    /// FP8 E5M2.
    NRT_DTYPE_FP8_E5 = 15,
}
/// Alias of `NRT_DTYPE_UNKNOWN`.
pub const NRT_DTYPE_INVALID: u32 = 0;
/// `nrt_dtype_t` as passed in by C.
pub type RawDtype = u32;

/// The same numbering as the ISA DTYPE (docs/contract/abi.md §2.2), so every wire type has its C
/// value; INVALID is `NRT_DTYPE_UNKNOWN`.
impl From<crate::isa::enums::Dtype> for nrt_dtype_t {
    fn from(d: crate::isa::enums::Dtype) -> Self {
        use crate::isa::enums::Dtype as D;
        use nrt_dtype_t::*;
        match d {
            D::Invalid => NRT_DTYPE_UNKNOWN,
            D::Uint64 => NRT_DTYPE_UINT64,
            D::Int8 => NRT_DTYPE_INT8,
            D::Uint8 => NRT_DTYPE_UINT8,
            D::Int16 => NRT_DTYPE_INT16,
            D::Uint16 => NRT_DTYPE_UINT16,
            D::Bf16 => NRT_DTYPE_BFLOAT16,
            D::Fp16 => NRT_DTYPE_FLOAT16,
            D::Int32 => NRT_DTYPE_INT32,
            D::Uint32 => NRT_DTYPE_UINT32,
            D::Fp32 => NRT_DTYPE_FLOAT32,
            D::Fp32r => NRT_DTYPE_FP32R,
            D::Int64 => NRT_DTYPE_INT64,
            D::Fp8E3 => NRT_DTYPE_FP8_E3,
            D::Fp8E4 => NRT_DTYPE_FP8_E4,
            D::Fp8E5 => NRT_DTYPE_FP8_E5,
        }
    }
}

/// Collective operation of the host-driven API (docs/contract/abi.md §2.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_cc_op_type_t {
    /// All-gather.
    NRT_CC_ALLGATHER = 0,
    /// All-reduce.
    NRT_CC_ALLREDUCE = 1,
    /// Reduce-scatter.
    NRT_CC_REDUCESCATTER = 2,
}
/// `nrt_cc_op_type_t` as passed in by C.
pub type RawCcOpType = u32;

/// Tensor usage in `nrt_tensor_info_t` (docs/contract/abi.md §2.2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrt_tensor_usage_t {
    /// Model input.
    NRT_TENSOR_USAGE_INPUT = 0,
    /// Model output.
    NRT_TENSOR_USAGE_OUTPUT = 1,
}

/// Execution-unit types, async 3.0 numbering (runtime 2.31+, docs/design.md §2.4).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nrta_xu_t {
    /// Tensor read/write/copy (2 queues).
    NRTA_XU_TENSOR_OP = 0,
    /// Model execution (1 queue).
    NRTA_XU_COMPUTE = 1,
    /// Collectives (3 queues).
    NRTA_XU_COLLECTIVES = 2,
    /// Number of XU types.
    NRTA_XU_TYPE_NUM = 3,
}
/// `nrta_xu_t` as passed in by C.
pub type RawXu = u32;

/// Inspect device-profile mode (enum of the vendor's nrt_profile.h; values not public).
pub type nrt_inspect_device_profile_mode_t = u32;

// ---------------------------------------------------------------- macros and scalars

/// Major version of the nrt API.
pub const NRT_MAJOR_VERSION: u32 = 2;
/// Minor version of the nrt API.
pub const NRT_MINOR_VERSION: u32 = 0;
/// Length of `nrt_version_t.rt_detail`.
pub const RT_VERSION_DETAIL_LEN: usize = 128;
/// Length of `nrt_version_t.git_hash`.
pub const GIT_HASH_LEN: usize = 64;
/// Maximum tensor-name length.
pub const NRT_TENSOR_NAME_MAX: usize = 256;
/// Largest per-XU sequence number (`(1 << 48) - 1`).
pub const NRTA_SEQ_NUM_MAX: u64 = (1u64 << 48) - 1;
/// Mask of the sequence number inside an `nrta_seq_t`.
pub const NRTA_SEQ_NUM_MASK: u64 = NRTA_SEQ_NUM_MAX;

/// Sequence id of an async request: low 48 bits counter, high 16 bits XU id.
pub type nrta_seq_t = u64;
/// XU id (the high 16 bits of an `nrta_seq_t`).
pub type nrta_xu_id_t = u16;

/// Implicit-async completion callback.
pub type NRT_ASYNC_EXEC_STATUS_CALLBACK = Option<
    unsafe extern "C" fn(
        params: *mut c_void,
        model_id: u32,
        vnc: u32,
        job_id: u64,
        status: RawStatus,
    ),
>;

// ---------------------------------------------------------------- opaque handles

// Opaque handles. Written out (not generated by a macro) because cbindgen does not expand
// macros. Later issues give each a Rust body that C never sees into.
/// A loaded model.
#[derive(Debug)]
pub struct nrt_model {
    _private: [u8; 0],
}
/// `nrt_model` as C names it.
pub type nrt_model_t = nrt_model;

/// A tensor.
#[derive(Debug)]
pub struct nrt_tensor {
    _private: [u8; 0],
}
/// `nrt_tensor` as C names it.
pub type nrt_tensor_t = nrt_tensor;

/// A prepared host-driven collective (owned by the runtime after nrta_cc_schedule).
#[derive(Debug)]
pub struct nrt_cc_context {
    _private: [u8; 0],
}
/// `nrt_cc_context` as C names it.
pub type nrt_cc_context_t = nrt_cc_context;

/// An async send/recv communicator.
#[derive(Debug)]
pub struct nrt_async_sendrecv_comm {
    _private: [u8; 0],
}
/// `nrt_async_sendrecv_comm` as C names it.
pub type nrt_async_sendrecv_comm_t = nrt_async_sendrecv_comm;

/// An async send/recv request.
#[derive(Debug)]
pub struct nrt_async_sendrecv_request {
    _private: [u8; 0],
}
/// `nrt_async_sendrecv_request` as C names it.
pub type nrt_async_sendrecv_request_t = nrt_async_sendrecv_request;

/// Options of nrt_inspect_begin_with_options.
#[derive(Debug)]
pub struct nrt_inspect_config {
    _private: [u8; 0],
}
/// `nrt_inspect_config` as C names it.
pub type nrt_inspect_config_t = nrt_inspect_config;

/// Options of nrt_sys_trace_start.
#[derive(Debug)]
pub struct nrt_sys_trace_config {
    _private: [u8; 0],
}
/// `nrt_sys_trace_config` as C names it.
pub type nrt_sys_trace_config_t = nrt_sys_trace_config;

/// Options of nrt_sys_trace_fetch_events.
#[derive(Debug)]
pub struct nrt_sys_trace_fetch_options {
    _private: [u8; 0],
}
/// `nrt_sys_trace_fetch_options` as C names it.
pub type nrt_sys_trace_fetch_options_t = nrt_sys_trace_fetch_options;

/// Options of continuous profiling.
#[derive(Debug)]
pub struct nrt_profile_continuous_options {
    _private: [u8; 0],
}
/// `nrt_profile_continuous_options` as C names it.
pub type nrt_profile_continuous_options_t = nrt_profile_continuous_options;

/// Header of one debug-stream event.
#[derive(Debug)]
pub struct ndebug_stream_event_header {
    _private: [u8; 0],
}
/// `ndebug_stream_event_header` as C names it.
pub type ndebug_stream_event_header_t = ndebug_stream_event_header;

/// A tensor set is an opaque `void` in the vendor header.
pub type nrt_tensor_set_t = c_void;

// ---------------------------------------------------------------- structs (docs/contract/abi.md §2.4)

/// Runtime version (224 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_version_t {
    /// Major.
    pub rt_major: u64,
    /// Minor.
    pub rt_minor: u64,
    /// Patch.
    pub rt_patch: u64,
    /// Maintenance.
    pub rt_maintenance: u64,
    /// `"libnrt version <ver>"`.
    pub rt_detail: [c_char; RT_VERSION_DETAIL_LEN],
    /// Git hash (40 characters).
    pub git_hash: [c_char; GIT_HASH_LEN],
}

/// Instance description (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_instance_info_t {
    /// `NRT_INSTANCE_*`.
    pub family: u32,
    /// `NRT_INSTANCE_SIZE_*`.
    pub size: u32,
    /// Architecture name.
    pub arch_name: [c_char; 16],
    /// Device revision.
    pub device_revision: [c_char; 8],
}

/// Communicator of a host-driven collective (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_cc_comm_t {
    /// `rank_n` global device ids of the participants, in rank order.
    pub replica_group: *mut u32,
    /// Caller's index in `replica_group`.
    pub rank: u32,
    /// Number of ranks.
    pub rank_n: u32,
    /// Global id given to nrt_cc_global_comm_init.
    pub ctx_device_id: u32,
    /// World size given to nrt_cc_global_comm_init.
    pub ctx_device_count: u32,
    /// Local logical core.
    pub vnc: u32,
}

/// A list of tensors (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_tensor_list_t {
    /// The tensors.
    pub tensors: *mut *mut nrt_tensor_t,
    /// How many.
    pub num_tensors: usize,
}

/// Async 2.x error record (16 bytes); kept for the size assertion of the C tests.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrta_error_t {
    /// Sequence id.
    pub seq_id: nrta_seq_t,
    /// An `NRT_STATUS` widened.
    pub error_code: u64,
}

/// Model I/O tensor description (296 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_tensor_info_t {
    /// Name.
    pub name: [c_char; NRT_TENSOR_NAME_MAX],
    /// `nrt_tensor_usage_t`.
    pub usage: nrt_tensor_usage_t,
    /// Size in bytes.
    pub size: usize,
    /// `nrt_dtype_t`.
    pub dtype: nrt_dtype_t,
    /// Shape.
    pub shape: *mut u32,
    /// Number of dimensions.
    pub ndim: u32,
}

/// Array of tensor descriptions (8 bytes + n × 296; flexible array).
#[repr(C)]
#[derive(Debug)]
pub struct nrt_tensor_info_array_t {
    /// Number of entries.
    pub tensor_count: u64,
    /// The entries.
    pub tensor_array: [nrt_tensor_info_t; 0],
}

/// One batch operation (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_tensor_batch_op_t {
    /// Offset in the tensor.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
    /// Host buffer.
    pub buffer: *mut c_void,
}

/// A batch of operations on one tensor (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_tensor_batch_t {
    /// The tensor.
    pub tensor: *const nrt_tensor_t,
    /// The operations.
    pub ops: *const nrt_tensor_batch_op_t,
    /// How many.
    pub num_ops: u32,
}

/// Device allocation of a tensor (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_tensor_device_allocation_info_t {
    /// Physical address.
    pub physical_address: u64,
    /// Bytes.
    pub size: usize,
    /// HBM index.
    pub hbm_index: i32,
}

/// Memory statistics of one logical core (16 bytes, append-only).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_vnc_memory_stats_t {
    /// Bytes in use.
    pub bytes_used: usize,
    /// Limit.
    pub bytes_limit: usize,
}

/// Model information (4 bytes, append-only).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_model_info_t {
    /// Logical core the model runs on.
    pub vnc: u32,
}

/// One microcode image (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_ucode_img {
    /// Bytes.
    pub bin: *mut u8,
    /// Length.
    pub size: usize,
}

/// A pool-engine microcode pair (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nrt_ucode_info {
    /// Instruction RAM image.
    pub iram: nrt_ucode_img,
    /// Data RAM image.
    pub dram: nrt_ucode_img,
}

/// libnccom version record (56 bytes + flexible tail).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nec_version_info_t {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// Maintenance.
    pub maintenance: u64,
    /// Git hash.
    pub git_hash: [c_char; 16],
    /// Compatibility id (89 for runtime 2.31).
    pub compatibility_version: u64,
}

/// Pod type of the nec_* topology callbacks.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum nec_pod_type_t {
    /// None.
    NEC_POD_TYPE_NONE = 0,
    /// Point to point.
    NEC_POD_TYPE_P2P = 1,
    /// Switch.
    NEC_POD_TYPE_SWITCH = 2,
    /// Invalid.
    NEC_POD_TYPE_INVALID = 3,
}
/// `nec_pod_type_t` as passed in by C.
pub type RawPodType = u32;

/// Host memory descriptor of the dynamic (ragged) all-to-all callbacks (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct enc_host_mem_t {
    /// Handle.
    pub mem_handle: *mut c_void,
    /// Virtual address.
    pub va: *mut c_void,
    /// Physical address.
    pub pa: u64,
    /// Bytes.
    pub size: usize,
}

// ---------------------------------------------------------------- layout assertions

macro_rules! assert_layout {
    ($($t:ty => ($size:expr, $align:expr);)*) => {$(
        const _: () = assert!(std::mem::size_of::<$t>() == $size, concat!("size of ", stringify!($t)));
        const _: () = assert!(std::mem::align_of::<$t>() == $align, concat!("align of ", stringify!($t)));
    )*};
}

// Sizes and alignments from docs/contract/abi.md §2.4 (compiled from the public headers).
assert_layout! {
    nrt_version_t => (224, 8);
    nrt_instance_info_t => (32, 4);
    nrt_cc_comm_t => (32, 8);
    nrt_tensor_list_t => (16, 8);
    nrta_error_t => (16, 8);
    nrt_tensor_info_t => (296, 8);
    nrt_tensor_info_array_t => (8, 8);
    nrt_tensor_batch_op_t => (24, 8);
    nrt_tensor_batch_t => (24, 8);
    nrt_tensor_device_allocation_info_t => (24, 8);
    nrt_vnc_memory_stats_t => (16, 8);
    nrt_model_info_t => (4, 4);
    nrt_ucode_img => (16, 8);
    nrt_ucode_info => (32, 8);
    nec_version_info_t => (56, 8);
    enc_host_mem_t => (32, 8);
    nrt_status => (4, 4);
    nrt_dtype_t => (4, 4);
    nrta_xu_t => (4, 4);
}

const _: () = assert!(std::mem::offset_of!(nrt_version_t, rt_detail) == 32);
const _: () = assert!(std::mem::offset_of!(nrt_version_t, git_hash) == 160);
const _: () = assert!(std::mem::offset_of!(nrt_instance_info_t, arch_name) == 8);
const _: () = assert!(std::mem::offset_of!(nrt_instance_info_t, device_revision) == 24);
const _: () = assert!(std::mem::offset_of!(nrt_cc_comm_t, rank) == 8);
const _: () = assert!(std::mem::offset_of!(nrt_cc_comm_t, vnc) == 24);
const _: () = assert!(std::mem::offset_of!(nrt_tensor_info_t, usage) == 256);
const _: () = assert!(std::mem::offset_of!(nrt_tensor_info_t, size) == 264);
const _: () = assert!(std::mem::offset_of!(nrt_tensor_info_t, dtype) == 272);
const _: () = assert!(std::mem::offset_of!(nrt_tensor_info_t, shape) == 280);
const _: () = assert!(std::mem::offset_of!(nrt_tensor_info_t, ndim) == 288);
const _: () = assert!(std::mem::offset_of!(nec_version_info_t, compatibility_version) == 48);
const _: () = assert!(std::mem::offset_of!(nrt_tensor_device_allocation_info_t, hbm_index) == 16);
