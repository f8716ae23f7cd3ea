//! The runtime: process-wide state behind the C ABI.
//!
//! * [`state`] — the lifecycle state machine and its guard (spec/nrt-abi.md §5.1).
//! * [`process`] — what `nrt_init` builds and `nrt_close` tears down.
//! * [`config`] — the environment, read once at `nrt_init` (spec/nrt-abi.md §5.10).
//! * [`firmware`] — loading and gating `libncfw.so` (spec/ncfw.md §1.2).
//! * [`log`] — logging under `NEURON_RT_LOG_LEVEL`.
//! * [`tensor`] — tensors: views of simulated device or host memory (spec/nrt-abi.md §3.3).
//! * [`device_run`] — running an emitted collective on the software device.
//! * [`comm`] — the global communicators (worlds) of this process.
//! * [`rendezvous`] — where the ranks of one collective meet.
//! * [`cc`] — host-driven collectives: prepare (lower, emit, cache) and run on the device.
//! * [`cc_tensor`] — a rank's tensors as the data of a device collective.
//! * [`host_cc`] — `nrt_barrier` and `nrt_all_gather`.
//! * [`bootstrap`] — one rank per process: the job's root, members, remote arrivals.
//! * [`shm`] — named shared memory of a job.
//! * [`wire`] — the private protocol between the processes of a job.
//! * [`verifiable`] — verifiable data, the reference result and in-place staging for runs.
//! * [`xu`] — execution units: async request queues, sequence ids, completion and eventfds.

pub mod bootstrap;
pub mod cc;
pub mod cc_api;
pub mod cc_tensor;
pub mod comm;
pub mod config;
pub mod device_run;
pub mod firmware;
pub mod host_cc;
pub mod log;
pub mod process;
pub mod rendezvous;
pub mod resident;
pub mod shared_go;
pub mod shared_run;
pub mod shared_seg;
pub mod shm;
pub mod state;
pub mod tensor;
pub mod verifiable;
pub mod wire;
pub mod xu;
