//! The software device: a simulated Trainium that executes the lowered bytes — and only them —
//! so that collectives give exact results on a CPU (design.md §1–§2, spec/device.md).
//!
//! The device never imports the lowering: they meet only in the bytes of [`crate::isa`].

pub mod memory;
pub mod sema;
