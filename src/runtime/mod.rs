//! The runtime: process-wide state behind the C ABI.
//!
//! * [`state`] — the lifecycle state machine and its guard (spec/nrt-abi.md §5.1).
//! * [`process`] — what `nrt_init` builds and `nrt_close` tears down.
//! * [`config`] — the environment, read once at `nrt_init` (spec/nrt-abi.md §5.10).
//! * [`firmware`] — loading and gating `libncfw.so` (spec/ncfw.md §1.2).
//! * [`log`] — logging under `NEURON_RT_LOG_LEVEL`.
//! * [`tensor`] — tensors: views of simulated device or host memory (spec/nrt-abi.md §3.3).
//! * [`device_run`] — running an emitted collective on the software device.
//! * [`verifiable`] — verifiable data, the reference result and in-place staging for runs.

pub mod config;
pub mod device_run;
pub mod firmware;
pub mod log;
pub mod process;
pub mod state;
pub mod tensor;
pub mod verifiable;
