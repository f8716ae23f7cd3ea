//! The runtime: process-wide state behind the C ABI.
//!
//! * [`state`] — the lifecycle state machine and its guard (docs/contract/abi.md §5.1).
//! * [`process`] — what `nrt_init` builds and `nrt_close` tears down.
//! * [`config`] — the environment, read once at `nrt_init` (docs/contract/abi.md §5.10).
//! * [`firmware`] — loading and gating `libncfw.so` (docs/contract/carrier.md §1.2).
//! * [`log`] — logging under `NEURON_RT_LOG_LEVEL`.
//! * [`tensor`] — tensors: views of simulated device or host memory (docs/contract/abi.md §3.3).
//! * [`model`] — NEFF models: load (parse, lower the collectives), execute.
//! * [`machine`] — the software machine of one collective: an emitted program loaded into it
//!   and run, every rank in this process.
//! * [`resident`] — a prepared collective's machine kept loaded between runs.
//! * [`comm`] — the global communicators (worlds) of this process.
//! * [`rendezvous`] — where the ranks of one collective meet.
//! * [`collective`] — host-driven collectives: prepare (lower, emit, cache) and run on the device;
//!   its children [`collective::api`], the `nrta_cc_prepare` / `nrta_cc_schedule` path behind
//!   the ABI, and [`collective::io`], a rank's tensors as the data of a device collective.
//! * [`host_collective`] — `nrt_barrier` and `nrt_all_gather`.
//! * [`multi_process`] — one rank per process: the job's bootstrap, its shared memory and
//!   wire protocol, and collectives run together on shared device segments.
//! * [`verifiable`] — verifiable data, the reference result and in-place staging for runs.
//! * [`sys_trace`] — the system trace's recorder: start/stop events of what the device runs.
//! * [`sendrecv`] — point-to-point tensors between cores of any processes and hosts.
//! * [`xu`] — execution units: async request queues, sequence ids, completion and eventfds.
//! * [`fault_injection`] — faults the C multi-process tests ask for (`OPENNRT_TEST_KILL_IN_RUN`).

pub mod collective;
pub mod comm;
pub mod config;
pub mod fault_injection;
pub mod firmware;
pub mod flight_recorder;
pub mod host_collective;
pub mod log;
pub mod machine;
pub mod model;
pub mod multi_process;
pub mod process;
pub mod rendezvous;
pub mod resident;
pub mod sendrecv;
pub mod state;
pub mod sys_trace;
pub mod tensor;
pub mod verifiable;
pub mod xu;
