//! The lowering core: one collective → for every rank, the program the Trainium hardware would
//! run (docs/design.md §1–§2, docs/contract/lowering.md).
//!
//! Pipeline: [`request`] (both entry paths: decoded pseudo-instructions and API arguments) →
//! [`topology`] (the simulated instance and rank placement) → [`select`] (algorithm per leg, with
//! its reason) → [`compose`] (one file per algorithm: the per-rank step tapes of
//! docs/contract/lowering.md §4, in the vocabulary of §4.0) → [`program`] (the IR, with a stable
//! JSON form and a text form) → [`verify`] (symbolic execution: exact contributions, matched
//! sends/receives, no deadlock).
//!
//! The lowering never imports the device, and the device never imports the lowering: they meet
//! only in the bytes of [`crate::isa`].

// Pure computation on bytes and numbers: no unsafe code, and none may creep in.
#![forbid(unsafe_code)]

pub mod addrmap;
pub mod barrier_cfg;
pub mod cases;
pub mod compose;
pub mod emit;
pub mod pipeline;
pub mod program;
pub mod request;
pub mod select;
pub mod spad;
pub mod topology;
pub mod verify;
