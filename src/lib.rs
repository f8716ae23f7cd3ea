//! # OpenNRT
//!
//! An open, C-ABI drop-in replacement for the Neuron runtime's collective pipeline: the
//! closed `libnrt.so.1` (which lowers each collective into programs for on-chip sequencers and
//! DMA rings) and `libncfw.so` (the carrier of the firmware that walks them).
//!
//! The crate is the safe core plus one thin ABI layer (docs/design.md §3):
//!
//! * [`abi`] — every `extern "C"` function and nothing else; the boundary macro that catches
//!   panics, guards the lifecycle and maps [`Error`] to `NRT_STATUS` once.
//! * [`runtime`] — process state (init guard), configuration, logging, tensors, execution
//!   units, collectives prepared and run (one process or, under `runtime::multi_process`,
//!   one rank per process), the resident machines, NEFF models (load, lower, execute).
//! * [`status`] — the vendor's status codes (`NRT_STATUS`) with their names, in one table; an
//!   [`ErrorKind`] knows its status.
//! * [`lower`] — the lowering core: request → topology → algorithm selection → composition
//!   (`lower::compose`, one file per algorithm; cost index in docs/algorithms.md) → program IR
//!   → symbolic verification → emission of descriptors, cc_op tables and semaphore wiring.
//! * [`device`] — the software device that executes the emitted bytes: DMA engines and queues,
//!   the CCE, EVT_SEM semaphores, TOP_SP sequencers, the executor and its hang diagnosis.
//! * [`isa`] — every wire format of the hardware contract (pseudo-instructions, cc_op slots).
//! * [`ncfw`] — libncfw's logic: firmware images, CC-context layouts, the `ctx_log` writer.
//! * [`neff`] — the NEFF container the compiler writes: header, payload, KELF, every graph's
//!   `def.json` and engine programs (docs/neff.md), and the writer of collective NEFFs.
//! * [`dtype`] — element types and their exact conversions (bf16, fp16, the FP8 formats).
//! * [`launch`] — for the tools only (`opennrt perf --procs`, `nccom-test`): rank processes
//!   started with a launcher's environment and watched to the end.
//! * [`plot`] — for the tools only (`opennrt perf --plot`, `nccom-test --plot`): bus
//!   bandwidth against size as an SVG chart.
//! * [`progress`] — for the tools only (`opennrt verify`, `opennrt perf`, `nccom-test`): one
//!   updating progress line on stderr, drawn only when stderr is a terminal.
//! * [`testdata`] — for the tests only: where the suite's data files are (`testdata/`) and the
//!   one rule for a missing one (skip and say which, or fail under `OPENNRT_TEST_STRICT=1`).
//!
//! The shared objects themselves are produced by the two thin crates under `cdylib/`, which only
//! bind the public symbol names (versioned for libnrt, unversioned for libncfw) to the functions
//! of [`abi`]. Imports run one way: `abi → runtime → {lower, device} → {isa, ncfw, neff, dtype}`. One
//! exception: `neff::build`, the writer of collective NEFFs for tests and benchmarks, names its
//! collective in the lowering's vocabulary (`ReduceOp`, algorithm names); the NEFF reader
//! (header, payload, graphs) imports only `isa`. `launch` sits beside `abi`: it reads the
//! environment through `runtime::config` and nothing in the libraries imports it.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
pub mod device;
pub mod dtype;
pub mod error;
pub mod isa;
pub mod launch;
pub mod lower;
pub mod nccom_files;
pub mod ncfw;
pub mod neff;
pub mod net;
pub mod plot;
pub mod progress;
pub mod runtime;
pub mod status;
pub mod testdata;

pub use error::{Error, ErrorKind, Result};
