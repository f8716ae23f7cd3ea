//! Every `extern "C"` function of libnrt.so.1 and libncfw.so, and nothing else.
//!
//! The functions here are ordinary Rust functions with the C calling convention; they are not
//! `#[no_mangle]`. The thin crates under `cdylib/` bind the public names to them (libnrt with
//! symbol versions, see `cdylib/nrt/build.rs`). Every body runs through
//! [`abi_entry!`](crate::abi_entry) (see [`boundary`]).
//!
//! All public functions are re-exported flat from this module, so the binding crate can name
//! each one as `opennrt::abi::<symbol>`.

pub mod boundary;
pub mod ncfw;
pub mod nrt;
pub mod types;

pub use nrt::*;
