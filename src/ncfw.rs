//! libncfw's logic: OpenNRT's firmware images, the per-arch CC-context layout, and the
//! `ctx_log` JSON serializer (docs/contract/carrier.md). The three C entry points live in `abi::ncfw`.
//!
//! * [`ctx_layout`] — [`Arch`] (keys 5/12/20/28) and every offset of the CC context (§3).
//! * [`ctx_builder`] — [`CcContextBuilder`]: typed setters → a context image.
//! * [`ctx_log`](mod@ctx_log) — the JSON writer (§4) with its documented spec choices.
//! * [`image`] — our own IRAM/DRAM firmware images and their parser ([`FirmwareImage`]).
//! * [`sample`] — a context with distinctive values in every field (CLI, tests).

// Pure computation on bytes and numbers: no unsafe code, and none may creep in.
#![forbid(unsafe_code)]

pub mod ctx_builder;
pub mod ctx_layout;
pub mod ctx_log;
mod ctx_log_emit;
pub mod image;
pub mod sample;

pub use ctx_builder::{
    ApbBcast, BarrierStep, BasicBlockCtx, CcContextBuilder, DevConfigs, DeviceBarrier, MeshEvent,
    NeffSemas, RingChannel, RingNeighbor, RingRow,
};
pub use ctx_layout::{Arch, CtxLayout};
pub use ctx_log::{ctx_log, ctx_log_string, LogStatus, LOG_BUF_SIZE};
pub use image::{image_for, DispatchClass, DispatchEntry, DramInfo, FirmwareImage, Handler};
pub use sample::sample_context;
