//! `nrt_status.h`: the status codes every `NRT_STATUS`-returning function returns
//! (docs/contract/abi.md §2.1). The enum, its numbers and its names live in the core
//! ([`crate::status`], which cbindgen also reads for the header); this module re-exports them
//! and adds the type of a status that C passes *in*.

pub use crate::status::{nrt_status, NRT_STATUS};

/// A status passed *in* by C (`NRT_STATUS` in the header); any int may arrive.
pub type RawStatus = i32;
